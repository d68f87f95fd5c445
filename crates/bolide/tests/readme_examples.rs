//! Every scenario file the README shows (its ```yaml blocks) runs green against the reference
//! server, read straight out of README.md so the documentation cannot drift from the tool.

mod common;

use bolide::stats::vu::DdpDoc;
use common::bolide;
use refserver::{Config, DdpConfig, Reactivity, Server};

fn yaml_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(text), l) => {
                text.push_str(l);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_readme_scenarios_run_green_against_the_reference_server() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let blocks = yaml_blocks(&readme);
    assert!(!blocks.is_empty(), "the README shows a scenario file");
    let users = [("ann", "secret-1"), ("bob", "secret-2"), ("cy", "secret-3")];
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let ddp = DdpConfig {
            reactivity,
            users: users.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect(),
            ..DdpConfig::default()
        };
        let server = Server::start(Config { ddp, threads: 2, ..Config::default() }).unwrap();
        for (i, block) in blocks.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let mut csv = String::from("username,password\n");
            for (u, p) in users {
                csv.push_str(&format!("{u},{p}\n"));
            }
            std::fs::write(dir.path().join("users.csv"), csv).unwrap();
            let file = dir.path().join("example.yml");
            std::fs::write(&file, block).unwrap();
            let json = dir.path().join("run.json");
            let o = bolide(&[
                "run",
                file.to_str().unwrap(),
                "--target",
                &server.base_url(),
                "--duration",
                "1s",
                "--arrival-rate",
                "3",
                "--json",
                json.to_str().unwrap(),
            ]);
            let doc = DdpDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let s = &doc.summary;
            let context = format!("block {i}, {reactivity:?}\n{}\n{}", o.out, o.err);
            assert_eq!(o.code, 0, "{context}");
            assert_eq!((s.users.launched, s.users.completed, s.users.failed), (3, 3, 0), "{context}");
            assert_eq!(s.step_errors, 0, "{:?}\n{context}", s.errors_by_class);
            assert!(s.ensure.iter().all(|e| e.ok), "{:?}", s.ensure);
            // Three users, each: two logins, two inserts filed under the label, both seen appearing.
            let step = |name: &str| doc.steps.iter().find(|st| st.name == name).map_or(0, |st| st.count);
            assert_eq!(step("login"), 6, "{context}");
            assert_eq!(step("add a task"), 6, "{context}");
            assert_eq!(step("waitFor taskCollection"), 6, "{context}");
            assert_eq!(step("call removeTask"), 6, "{context}");
        }
        assert_eq!(server.app().tasks.len(), 0, "every task the examples added was removed");
    }
}

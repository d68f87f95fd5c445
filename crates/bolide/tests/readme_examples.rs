//! Every scenario file the README and the reference pages in docs/ show (their ```yaml blocks)
//! runs green against the reference server, and every `bolide` command they show parses, read
//! straight out of the Markdown so the documentation cannot drift from the tool.

mod common;

use bolide::stats::vu::VuDoc;
use common::bolide;
use refserver::{Config, DdpConfig, Reactivity, Server};

/// README.md and every page of docs/ (Markdown), one after the other.
fn documentation() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut text = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let mut pages: Vec<_> = std::fs::read_dir(format!("{root}/docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 9, "the reference pages are in docs/: {pages:?}");
    for p in pages {
        text.push('\n');
        text.push_str(&std::fs::read_to_string(p).unwrap());
    }
    text
}

fn yaml_blocks(readme: &str) -> Vec<String> {
    blocks(readme, "```yaml")
}

fn blocks(readme: &str, fence: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, l) if l == fence => current = Some(String::new()),
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
    let readme = documentation();
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
            let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let s = &doc.summary;
            let context = format!("block {i}, {reactivity:?}\n{}\n{}", o.out, o.err);
            // The example's latency limits are the machine's to meet (a busy one may break them,
            // exit 1); its error rate is the scenario's, and every verdict agrees with its value.
            let broken = doc.thresholds.iter().filter(|e| !e.ok).count();
            assert_eq!(o.code, if broken == 0 { 0 } else { 1 }, "{context}");
            assert_eq!((s.users.launched, s.users.completed, s.users.failed), (3, 3, 0), "{context}");
            assert_eq!(s.step_errors, 0, "{:?}\n{context}", s.errors_by_class);
            assert!(
                doc.thresholds.iter().all(|e| e.ok || !e.threshold.to_ascii_lowercase().contains("error")),
                "{:?}",
                doc.thresholds
            );
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

/// Splits a shell line into words: single and double quotes, no expansions.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

#[test]
fn every_bolide_command_the_readme_shows_parses() {
    use clap::Parser;
    let readme = documentation();
    let mut checked = 0;
    for block in blocks(&readme, "```sh") {
        let joined = block.replace("\\\n", " ");
        for line in joined.lines() {
            // The command before a comment, a pipe or a redirection.
            let line = line.split(" #").next().unwrap().split(" | ").next().unwrap().split(" > ").next().unwrap();
            let line = line.trim();
            let Some(rest) = line.strip_prefix("bolide ") else { continue };
            // A command substitution stands for one word (a PID here).
            let mut rest = rest.to_string();
            while let Some(at) = rest.find("$(") {
                let end = rest[at..].find(')').map_or(rest.len(), |e| at + e + 1);
                rest.replace_range(at..end, "4242");
            }
            let mut argv = vec!["bolide".to_string()];
            argv.extend(words(&rest));
            let argv = bolide::app::capacity_shorthand(argv.into_iter().map(Into::into).collect());
            if let Err(e) = bolide::cli::Cli::try_parse_from(&argv) {
                panic!("README command does not parse: {line}\n{e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} commands found");
}

#[test]
fn every_image_the_documentation_shows_is_in_the_repository() {
    // README.md and docs/*.md: ![text](path) relative to the page, each a file that exists.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut seen = 0;
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for part in text.split("![").skip(1) {
            let Some(target) = part.split_once("](").and_then(|(_, rest)| rest.split_once(')')).map(|(t, _)| t) else {
                continue;
            };
            if target.starts_with("http") {
                continue;
            }
            let file = page.parent().unwrap().join(target);
            assert!(file.is_file(), "{}: the image {target} is missing", page.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "the README and docs show the pages as they look: {seen} images");
}

/// Every `--flag` the README and docs/ name in backticks is one of bolide's (of some command),
/// unless it is another tool's, listed here with its tool: the pages cannot name a flag the binary
/// lacks.
#[test]
fn every_flag_the_documentation_names_is_the_binary_s() {
    use clap::CommandFactory;
    fn longs(cmd: &clap::Command, out: &mut std::collections::BTreeSet<String>) {
        for a in cmd.get_arguments() {
            if let Some(l) = a.get_long() {
                out.insert(format!("--{l}"));
            }
            for alias in a.get_all_aliases().unwrap_or_default() {
                out.insert(format!("--{alias}"));
            }
        }
        for sub in cmd.get_subcommands() {
            longs(sub, out);
        }
    }
    let mut bolide_flags = std::collections::BTreeSet::from(["--help".to_string(), "--version".to_string()]);
    longs(&bolide::cli::Cli::command(), &mut bolide_flags);
    // Other tools' flags the pages name, and whose.
    let others = [
        ("--enable-feature", "prometheus"),
        ("--web", "prometheus"),
        ("--latency", "wrk"),
        ("--vus", "k6"),
        ("--locked", "cargo"),
        ("--replay", "fuzz/run"),
        ("--disable-keepalive", "hey"),
        ("--require", "node"),
    ];
    let text = documentation();
    let mut unknown = Vec::new();
    for piece in text.split('`').skip(1).step_by(2) {
        let Some(flag) = piece.strip_prefix("--") else { continue };
        let name: String = flag.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        // `---` is YAML's document marker, not a flag.
        if name.is_empty() || name.starts_with('-') {
            continue;
        }
        let flag = format!("--{name}");
        if !bolide_flags.contains(&flag) && !others.iter().any(|(f, _)| *f == flag) {
            unknown.push(flag);
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(unknown.is_empty(), "flags the documentation names that bolide does not have: {unknown:?}");
    // And every version number the pages give of the result format is the one bolide writes.
    let version = bolide::stats::result::VERSION;
    assert!(text.contains("documents are written as version "), "the pages say which version is written");
    for (at, _) in text.match_indices("documents are written as version ") {
        let n: String =
            text[at + "documents are written as version ".len()..].chars().take_while(char::is_ascii_digit).collect();
        assert_eq!(n, version.to_string(), "the documented result format version");
    }
}

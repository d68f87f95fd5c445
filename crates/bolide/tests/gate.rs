//! The CI gate end to end: `--threshold` on http, run, bench, capacity and merge (a scenario's
//! `ensure` in the same grammar, the exit codes, the table, the verdicts in the documents),
//! `compare --fail-on`, and summary documents on stdout for pipes.

mod common;

use common::{bolide, read_doc};

fn server() -> refserver::Server {
    refserver::Server::start(refserver::Config::default()).unwrap()
}

#[test]
fn http_thresholds_gate_the_exit_code_and_are_recorded() {
    let server = server();
    let url = format!("{}/delay/20", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let json = json.to_str().unwrap();
    // Every response takes at least 20 ms: these hold.
    let o = bolide(&[
        "http",
        "-c",
        "2",
        "-n",
        "20",
        "--json",
        json,
        "--threshold",
        "p50>=20ms",
        "--threshold",
        "error_rate<1%",
        "--threshold",
        "errors<1",
        "--threshold",
        "rps>0",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = read_doc(std::path::Path::new(json));
    assert_eq!(doc.thresholds.len(), 4);
    assert!(doc.thresholds.iter().all(|t| t.ok), "{:?}", doc.thresholds);
    assert!(doc.thresholds[0].value.unwrap() >= 20.0);
    assert_eq!(doc.thresholds[2].value, Some(0.0));
    assert!(o.out.contains("Thresholds    p50>=20ms"), "{}", o.out);
    assert!(!o.out.contains("BROKEN"), "{}", o.out);

    // One broken: exit 1, the table names it, the document records the verdicts.
    let o = bolide(&[
        "http",
        "-c",
        "2",
        "-n",
        "20",
        "--json",
        json,
        "--threshold",
        "max<5ms",
        "--threshold",
        "p99<10s",
        &url,
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let doc = read_doc(std::path::Path::new(json));
    let verdicts: Vec<(&str, bool)> = doc.thresholds.iter().map(|t| (t.threshold.as_str(), t.ok)).collect();
    assert_eq!(verdicts, [("max<5ms", false), ("p99<10s", true)]);
    assert_eq!(doc.thresholds[0].metric, "max of all requests");
    assert_eq!(doc.summary.responses, 20, "a broken threshold loses no result");
    let line = o.out.lines().find(|l| l.contains("max<5ms")).unwrap();
    assert!(line.trim_end().ends_with("BROKEN") && line.contains(" ms"), "{line}");
    assert!(o.out.contains("1 of 2 thresholds broken: exit code 1"), "{}", o.out);

    // With --json -, stdout is the document alone and still carries the verdicts.
    let o = bolide(&["http", "-c", "1", "-n", "5", "--json", "-", "--threshold", "min<1ms", &url]);
    assert_eq!(o.code, 1);
    let v: serde_json::Value = serde_json::from_str(&o.out).expect("stdout is JSON only");
    assert_eq!(v["thresholds"][0]["ok"], false);
    assert!(o.err.contains("min<1ms"), "{}", o.err);
}

#[test]
fn bad_thresholds_are_usage_errors_naming_the_column_and_the_metrics() {
    let server = server();
    let url = server.base_url();
    let o = bolide(&["http", "-n", "1", "--threshold", "p99<<200ms", "--threshold", "latency<1s", &url]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--threshold \"p99<<200ms\": column 5: expected a number, found '<'"), "{}", o.err);
    assert!(o.err.contains("column 1: unknown metric \"latency\"; the metrics are p50"), "{}", o.err);
    assert!(o.err.contains("rss.NAME"), "the metrics available are listed: {}", o.err);
    // A process nobody watches, a step of an HTTP run: refused before anything runs.
    let o = bolide(&["http", "-n", "1", "--threshold", "cpu.app<80%", "--threshold", "step[\"x\"].p95<1s", &url]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("no process named \"app\" is watched (watched: none); add --monitor app="), "{}", o.err);
    assert!(o.err.contains("step[...] applies to DDP runs"), "{}", o.err);
    assert_eq!(server.requests(), 0, "nothing was sent");
}

#[test]
fn process_thresholds_read_the_watched_process() {
    let server = server();
    let pid = std::process::id().to_string();
    let monitor = format!("app={pid}");
    let (o, doc) = {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let o = bolide(&[
            "http",
            "-c",
            "1",
            "-d",
            "1s",
            "--monitor",
            &monitor,
            "--monitor-interval",
            "100ms",
            "--json",
            json.to_str().unwrap(),
            "--threshold",
            "rss.app<1KB",
            "--threshold",
            "rss.app.mean>1KB",
            "--threshold",
            "cpu.app.max>=0%",
            &server.base_url(),
        ]);
        (o, read_doc(&json))
    };
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let app = &doc.monitor[0];
    let t = &doc.thresholds;
    assert_eq!(t[0].value, Some(app.peak_rss_bytes as f64));
    assert!(!t[0].ok && t[1].ok && t[2].ok, "{t:?}");
    assert_eq!(t[2].value, Some(app.peak_cpu_pct));
    assert_eq!((t[0].unit.as_str(), t[2].unit.as_str()), ("B", "%"));
}

fn scenario(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("s.yml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn run_thresholds_and_ensure_share_one_grammar() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    // ensure as a list of expressions; the call sleeps 30 ms.
    let file = scenario(
        &dir,
        &format!(
            "config:\n  target: {}\n  phases: [{{duration: 200ms, arrivalCount: 3}}]\n  ensure:\n    - p99 < 10s\n    - \
             step[\"call bolide.sleep\"].p95 >= 30ms\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: \
             bolide.sleep, params: {{ms: 30}}}}\n",
            server.base_url()
        ),
    );
    let json = dir.path().join("r.json");
    let json = json.to_str().unwrap();
    let o = bolide(&["run", &file, "--json", json, "--threshold", "error_rate<1%", "--threshold", "rps>0"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(json).unwrap()).unwrap();
    let got: Vec<(&str, String, bool)> = doc
        .thresholds
        .iter()
        .map(|t| (t.threshold.as_str(), serde_json::to_value(t.source).unwrap().as_str().unwrap().to_string(), t.ok))
        .collect();
    assert_eq!(
        got,
        [
            ("p99 < 10s", "ensure".to_string(), true),
            ("step[\"call bolide.sleep\"].p95 >= 30ms", "ensure".to_string(), true),
            ("error_rate<1%", "--threshold".to_string(), true),
            ("rps>0", "--threshold".to_string(), true),
        ]
    );
    assert_eq!(doc.thresholds[1].metric, "p95 of call bolide.sleep");
    // The same step, a bound it cannot meet, from the command line: exit 1.
    let o = bolide(&["run", &file, "--json", json, "--threshold", "step[\"call bolide.sleep\"].max<1ms"]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("1 of 3 thresholds broken"), "{}", o.out);
    // A step the scenario does not have: refused, naming the steps it has.
    let o = bolide(&["run", &file, "--threshold", "step[\"call nothing\"].max<1s"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("the steps are \"connect\", \"call bolide.sleep\""), "{}", o.err);
    // Artillery's map form with a thresholds list beside it.
    let file = scenario(
        &dir,
        &format!(
            "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\n  ensure:\n    maxErrorRate: 0\n    \
             thresholds: [\"max<1ms\"]\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: bolide.sleep, \
             params: {{ms: 5}}}}\n",
            server.base_url()
        ),
    );
    let o = bolide(&["run", &file, "--json", json]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(json).unwrap()).unwrap();
    let got: Vec<(&str, bool)> = doc.thresholds.iter().map(|t| (t.threshold.as_str(), t.ok)).collect();
    assert_eq!(got, [("error_rate<=0%", true), ("max<1ms", false)]);
}

#[test]
fn a_bad_ensure_expression_is_a_scenario_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        &dir,
        "config:\n  target: http://127.0.0.1:9\n  phases: [{duration: 1, arrivalRate: 1}]\n  ensure:\n    - p99<1s\n    - \
         p99 < fast\nscenarios:\n  - flow: [connect]\n",
    );
    let o = bolide(&["run", &file]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("s.yml:6:7"), "{}", o.err);
    assert!(o.err.contains("\"p99 < fast\": expected a number, found 'f' at column 7 of the expression"), "{}", o.err);
}

#[test]
fn bench_tabulates_thresholds_over_its_runs_and_fails_when_one_broke() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series");
    let url = format!("{}/delay/10", server.base_url());
    let o = bolide(&[
        "bench",
        "http",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--label",
        "x",
        "-c",
        "1",
        "-n",
        "5",
        "--threshold",
        "p50>=10ms",
        "--threshold",
        "max<2ms",
        &url,
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let table = o.out.lines().skip_while(|l| !l.starts_with("| Threshold")).take(4).collect::<Vec<_>>().join("\n");
    assert!(table.starts_with("| Threshold | Run 1"), "{}", o.out);
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert!(rows[0].contains("p50>=10ms") && rows[0].contains("| ok "), "{table}");
    assert!(rows[1].contains("max<2ms") && rows[1].contains("BROKEN in run 1, 2"), "{table}");
    assert!(o.out.contains("thresholds BROKEN: max<2ms"), "each run's line says it: {}", o.out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("http-summary.json")).unwrap()).unwrap();
    assert_eq!(summary["runs"][1]["thresholds"][1]["ok"], false);
    assert_eq!(summary["runs"][1]["thresholds"][0]["ok"], true);
}

#[test]
fn merge_judges_the_plan_s_thresholds_over_the_whole_run() {
    let server = server();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}/delay/5", server.base_url());
    let mut files = Vec::new();
    for i in 1..=2 {
        let json = dir.path().join(format!("seg-{i}.json"));
        let seg = format!("{i}/2");
        // Each segment sends 5 of the plan's 10: "errors<1" holds, "rps" and the counts are the
        // whole run's after the merge.
        let o = bolide(&[
            "http",
            "-c",
            "2",
            "-n",
            "10",
            "--segment",
            &seg,
            "--json",
            json.to_str().unwrap(),
            "--threshold",
            "errors<1",
            "--threshold",
            "p50<1ms",
            &url,
        ]);
        assert_eq!(o.code, 1, "p50<1ms cannot hold over /delay/5: {}", o.out);
        files.push(json.to_str().unwrap().to_string());
    }
    let merged = dir.path().join("merged.json");
    let mut args = vec!["merge", "-o", merged.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let o = bolide(&args);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let doc = read_doc(&merged);
    assert_eq!(doc.summary.responses, 10);
    let got: Vec<(&str, bool)> = doc.thresholds.iter().map(|t| (t.threshold.as_str(), t.ok)).collect();
    assert_eq!(got, [("errors<1", true), ("p50<1ms", false)]);
    assert!(doc.thresholds[1].value.unwrap() >= 5.0);
    assert!(o.out.contains("1 of 2 thresholds broken"), "{}", o.out);
}

/// `bolide capacity http` from 5/s by 5 to `to`, 1 s levels over two connections, then `extra`.
fn capacity_http(to: &str, extra: &[&str]) -> common::Outcome {
    // The thresholds' verdicts are under test, not the machine's idle CPU: judge busy levels too.
    let mut args = vec!["capacity", "http", "--from", "5", "--step", "5", "--to", to, "-d", "1s", "-c", "2", "-t", "1"];
    args.push("--allow-busy-machine");
    args.extend_from_slice(extra);
    bolide(&args)
}

#[test]
fn capacity_levels_fail_on_thresholds_and_a_failed_first_level_exits_1() {
    let server = server();
    let url = format!("{}/delay/20", server.base_url());
    let ladder = |threshold: &str| capacity_http("10", &["--cooldown", "0", "--threshold", threshold, &url]);
    // Every response takes 20 ms or more: the first level already breaks p99<5ms.
    let o = ladder("p99<5ms");
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("x: threshold p99<5ms broken: "), "{}", o.out);
    assert!(o.out.contains("No level passed. The server failed at 5 per second."), "{}", o.out);
    // A threshold every level holds: the ladder climbs to its end and exits 0.
    let o = ladder("p99<5s");
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("Every level passed"), "{}", o.out);
}

/// A series directory of HTTP result documents made from the fixture, one per requests/s value.
fn series(dir: &std::path::Path, name: &str, rps: &[f64]) -> std::path::PathBuf {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/http-run.json");
    let text = std::fs::read_to_string(fixture).unwrap();
    let out = dir.join(name);
    std::fs::create_dir_all(&out).unwrap();
    for (i, r) in rps.iter().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["summary"]["requests_per_s"] = serde_json::json!(r);
        v["label"] = serde_json::json!(name);
        // The fixture's run is suspect (a busy machine); these runs count for significance.
        v["generator"]["suspect"] = serde_json::Value::Null;
        v.as_object_mut().unwrap().remove("monitor");
        std::fs::write(out.join(format!("http-{}.json", i + 1)), v.to_string()).unwrap();
    }
    out
}

#[test]
fn compare_fails_on_a_significant_regression_and_says_which_rule() {
    let dir = tempfile::tempdir().unwrap();
    let base = series(dir.path(), "base", &[1000.0, 1010.0, 990.0]);
    // 20% fewer requests per second, with little noise: significant.
    let slower = series(dir.path(), "slower", &[800.0, 810.0, 790.0]);
    // 20% fewer on average, but the runs spread over 500..1100: within noise.
    let noisy = series(dir.path(), "noisy", &[500.0, 1100.0, 800.0]);
    let (b, s, n) = (base.to_str().unwrap(), slower.to_str().unwrap(), noisy.to_str().unwrap());
    let o = bolide(&["compare", b, s, "--format", "md", "--fail-on", "rps<-10%", "--fail-on", "time>+50%"]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("## Regression gate (--fail-on)"), "{}", o.out);
    // The verdict is the page's first line, and again under the gate's table.
    let first = "**Regression gate: FAILED** (rps&lt;-10% failed): exit code 1.";
    assert!(o.out.starts_with(first) && o.out.matches(first).count() == 2, "{}", o.out);
    // Markdown: a rule's < and > are entities (GitHub shows them as written).
    let row = o.out.lines().find(|l| l.starts_with("| rps&lt;-10%")).unwrap();
    assert!(row.contains("-20.00%") && row.contains("FAILED: -20.00% &lt;-10%, significant"), "{row}");
    // time per request rose 25%: under the 50% bound.
    let row = o.out.lines().find(|l| l.starts_with("| time&gt;+50%")).unwrap();
    assert!(row.contains("| pass ") && row.contains("| pass: +25.00%, not &gt;+50%"), "{row}");
    // Within noise: inconclusive, never "ok": exit 4 unless allowed; --ignore-significance fails it.
    let o = bolide(&["compare", b, n, "--fail-on", "rps<-10%"]);
    assert_eq!(o.code, 4, "{}\n{}", o.out, o.err);
    assert!(o.out.starts_with("Regression gate: INCONCLUSIVE (rps<-10% could not be judged"), "{}", o.out);
    assert!(o.out.contains("within the runs' noise") && !o.out.contains("held"), "{}", o.out);
    let o = bolide(&["compare", b, n, "--fail-on", "rps<-10%", "--allow-inconclusive"]);
    assert_eq!(o.code, 0, "{}", o.out);
    assert!(o.out.starts_with("Regression gate: INCONCLUSIVE") && o.out.contains("exit code 0 (--allow-inconclusive)"));
    let o = bolide(&["compare", b, n, "--fail-on", "rps<-10%", "--ignore-significance"]);
    assert_eq!(o.code, 1, "{}", o.out);
    // Every run suspect (a busy runner): a 5x regression is inconclusive, not a pass.
    let all_suspect = |name: &str, rps: &[f64]| {
        let dir = series(dir.path(), name, rps);
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            v["generator"]["suspect"] = serde_json::json!("the generator used 97% of a core");
            std::fs::write(&f, v.to_string()).unwrap();
        }
        dir
    };
    let (sb, sn) =
        (all_suspect("busy-base", &[1000.0, 1010.0, 990.0]), all_suspect("busy-new", &[200.0, 201.0, 199.0]));
    let o =
        bolide(&["compare", sb.to_str().unwrap(), sn.to_str().unwrap(), "--format", "json", "--fail-on", "time>+20%"]);
    assert_eq!(o.code, 4, "{}\n{}", o.out, o.err);
    let v: serde_json::Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(
        (v["gate_outcome"].as_str(), v["gate"][0]["outcome"].as_str()),
        (Some("inconclusive"), Some("inconclusive"))
    );
    assert_eq!((v["gate"][0]["past_bound"].as_bool(), v["gate"][0]["failed"].as_bool()), (Some(true), Some(false)));
    assert!(v["gate"][0]["verdict"].as_str().unwrap().contains("only 0 and 0 clean runs"), "{}", v["gate"][0]);
    // JSON: the gate's verdicts, stdout JSON alone.
    let o = bolide(&["compare", b, s, "--format", "json", "--fail-on", "rps<-10%", "--fail-on", "cpu>+15%"]);
    assert_eq!(o.code, 1);
    let v: serde_json::Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(v["gate"][0]["failed"], true);
    assert_eq!(v["gate"][0]["significant"], true);
    // These runs watched no server: a CPU rule cannot pass on nothing.
    assert_eq!(v["gate"][1]["failed"], true);
    assert!(v["gate"][1]["verdict"].as_str().unwrap().contains("no server CPU was measured"), "{}", v["gate"][1]);
    // A bad rule is a usage error that names it.
    let o = bolide(&["compare", b, s, "--fail-on", "latency>+10%"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--fail-on \"latency>+10%\": column 1: unknown metric"), "{}", o.err);
}

#[test]
fn bench_capacity_and_merge_write_their_documents_to_stdout_alone() {
    let server = server();
    let url = format!("{}/delay/5", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("series");
    // bench: the series' summary on stdout, the table on stderr.
    let o = bolide(&[
        "bench",
        "http",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--label",
        "p",
        "-c",
        "1",
        "-n",
        "5",
        "--json",
        "-",
        "--threshold",
        "errors<1",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let v: serde_json::Value = serde_json::from_str(&o.out).expect("stdout is the summary alone");
    assert_eq!(v["format"], "bolide.bench");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["runs"][0]["thresholds"][0]["ok"], true);
    assert!(
        common::md_table(&o.err, "# Run").is_some() && common::md_table(&o.err, "Threshold").is_some(),
        "{}",
        o.err
    );
    // The same summary is in the directory too.
    assert!(out.join("http-summary.json").exists());

    // capacity: the ladder's levels and conclusion.
    let o = capacity_http("10", &["--cooldown", "0", "--json", "-", &url]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let v: serde_json::Value = serde_json::from_str(&o.out).expect("stdout is the ladder alone");
    assert_eq!(v["format"], "bolide.capacity");
    let levels: Vec<(f64, &str)> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["level"].as_f64().unwrap(), l["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(levels, [(5.0, "pass"), (10.0, "pass")]);
    assert_eq!(v["highest_passing"], 10.0);
    assert!(v["levels"][1]["measures"]["requests_per_s"].as_f64().unwrap() > 5.0);
    assert!(o.err.contains("Every level passed"), "{}", o.err);
    // To a file: written whole, the table on stdout.
    let ladder = dir.path().join("ladder.json");
    let o = capacity_http("5", &["--json", ladder.to_str().unwrap(), &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("| Requests/s |"), "{}", o.out);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ladder).unwrap()).unwrap();
    assert_eq!(v["levels"][0]["verdict"], "pass");

    // merge: --json - is -o -.
    let seg = dir.path().join("seg.json");
    let o = bolide(&["http", "-c", "1", "-n", "4", "--segment", "1/1", "--json", seg.to_str().unwrap(), &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    let o = bolide(&["merge", seg.to_str().unwrap(), "--json", "-"]);
    assert_eq!(o.code, 0, "{}", o.err);
    let v: serde_json::Value = serde_json::from_str(&o.out).expect("stdout is the merged document alone");
    assert_eq!(v["summary"]["responses"], 4);
}

/// The `run:` script of the workflow step called `name` (a block or one line), dedented.
fn step_script(workflow: &str, name: &str) -> String {
    let lines: Vec<&str> = workflow.lines().collect();
    let at =
        lines.iter().position(|l| l.trim() == format!("- name: {name}")).unwrap_or_else(|| panic!("no step {name}"));
    let step_indent = lines[at].len() - lines[at].trim_start().len();
    let mut i = at + 1;
    while i < lines.len() {
        let l = lines[i];
        let indent = l.len() - l.trim_start().len();
        if !l.trim().is_empty() && indent <= step_indent {
            break;
        }
        if let Some(rest) = l.trim().strip_prefix("run:") {
            if rest.trim() != "|" {
                return rest.trim().to_string();
            }
            let body_indent = indent + 2;
            return lines[i + 1..]
                .iter()
                .take_while(|b| b.trim().is_empty() || b.len() - b.trim_start().len() >= body_indent)
                .map(|b| b.get(body_indent..).unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
        }
        i += 1;
    }
    panic!("step {name} has no run:");
}

/// A top-level `env:` value of the workflow (its comment dropped).
fn workflow_env(workflow: &str, key: &str) -> String {
    let line = workflow.lines().find(|l| l.starts_with(&format!("  {key}: "))).unwrap_or_else(|| panic!("no {key}"));
    let value = line.split_once(": ").unwrap().1;
    let value = value.split("  #").next().unwrap().trim();
    value.trim_matches('"').to_string()
}

#[test]
fn the_github_workflow_s_bolide_steps_run_here() {
    let workflow =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ci/benchmark-pull-request.yml"))
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // `bolide` on the PATH is this build; the app is the reference server, started by --spawn.
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_bolide"), bin.join("bolide")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let (output, summary) = (root.join("github-output"), root.join("step-summary"));
    let env = [
        ("PATH", path),
        ("APP_START", format!("bolide serve --port {port}")),
        ("APP_URL", format!("http://127.0.0.1:{port}")),
        // A short workload here, from a scenario file only the pull request has (head/); the
        // workflow's own thresholds.
        ("WORKLOAD", "head/bench/tasks.yml".into()),
        ("RUNS", "2".into()),
        ("FAIL_ON", workflow_env(&workflow, "FAIL_ON")),
        ("GITHUB_OUTPUT", output.to_str().unwrap().into()),
        ("GITHUB_STEP_SUMMARY", summary.to_str().unwrap().into()),
        // The workflow's own wait for a cold build, and the pull request's number.
        ("READY_TIMEOUT", workflow_env(&workflow, "READY_TIMEOUT")),
        ("PR_NUMBER", "42".into()),
    ];
    assert_eq!(env[8].1, "10m", "a cold Meteor build is waited for, not 30 s");
    assert_eq!(env[5].1, "--fail-on time>+10% --fail-on cpu>+15% --fail-on p99>+20%");
    // Both sides run from the job's root: a scenario file is named in the pull request's checkout.
    let workload = workflow.lines().find(|l| l.starts_with("  WORKLOAD: ")).unwrap();
    assert!(workload.contains("head/bench/"), "the pull request's scenario for both sides: {workload}");
    // bolide itself is installed pinned (a reviewed commit, Cargo.lock), never by an unpublished
    // package name that anyone could take, and once: cached by that commit.
    let install = step_script(&workflow, "Install bolide (pinned, from source)");
    assert!(install.contains("cargo install --locked --git \"$BOLIDE_GIT\" --rev \"$BOLIDE_REV\""), "{install}");
    assert!(workflow.contains("key: bolide-${{ env.BOLIDE_REV }}"), "{workflow}");
    assert!(workflow.contains("if: steps.bolide-cache.outputs.cache-hit != 'true'"), "{workflow}");
    assert!(!workflow.contains("npm install --global bolide") && !workflow.contains("npx bolide"), "{workflow}");
    use std::path::Path;
    let step = |name: &str, dir: &Path| {
        let script = step_script(&workflow, name);
        assert!(script.contains("bolide "), "{name}: {script}");
        let o = std::process::Command::new("bash")
            .args(["-eo", "pipefail", "-c", &script])
            .current_dir(dir)
            .envs(env.iter().map(|(k, v)| (k, v.as_str())))
            .output()
            .unwrap();
        let text = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{name}: {text}");
        text
    };
    // Two checkouts of the app (the reference server stands in for both); the scenario is the
    // pull request's alone.
    for side in ["base", "head"] {
        std::fs::create_dir(root.join(side)).unwrap();
    }
    std::fs::create_dir(root.join("head/bench")).unwrap();
    let scenario = r#"config:
  target: http://127.0.0.1:3000
  phases:
    - duration: 1
      arrivalRate: 2
scenarios:
  - name: insert and clear
    flow:
      - connect
      - subscribe: fetchTasks
      - call:
          method: insertTask
          params: { description: "Task 1", sessionId: "{{ $vuId }}" }
      - call:
          method: removeAllTasks
          params: { sessionId: "{{ $vuId }}" }
      - disconnect
"#;
    std::fs::write(root.join("head/bench/tasks.yml"), scenario).unwrap();
    let out = step("Benchmark base and pull request, interleaved", root);
    // One bench, the two sides interleaved (base, head, head, base), each started in its own
    // checkout by --spawn.
    assert!(out.contains("interleaved"), "{out}");
    let series = |side: &str| {
        let dir = root.join(format!("results/side={side}"));
        let mut starts: Vec<String> = (1..=2)
            .map(|i| {
                let doc: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(dir.join(format!("tasks-{i}.json"))).unwrap())
                        .unwrap();
                assert_eq!(doc["summary"]["users"]["failed"], 0, "{side} run {i}: {doc}");
                doc["started_at"].as_str().unwrap().to_string()
            })
            .collect();
        starts.sort();
        starts
    };
    let (base, head) = (series("base"), series("head"));
    assert!(base[0] < head[0] && head[0] <= head[1] && head[1] < base[1], "A B B A: {base:?} {head:?}");
    let code = std::fs::read_to_string(&output).unwrap();
    let md = std::fs::read_to_string(root.join("results/comparison.md")).unwrap();
    assert!(md.contains("## Regression gate (--fail-on)"), "{md}");
    for rule in ["time>+10%", "cpu>+15%", "p99>+20%"] {
        let rule = rule.replace('>', "&gt;");
        assert!(md.contains(&format!("| {rule}")), "{rule} judged: {md}");
    }
    // Judged in pairs, as the runs were interleaved.
    assert!(md.contains("each metric is judged in 2 pairs"), "{md}");
    // The step's recorded exit code and the Markdown's first line agree on the verdict.
    let first = md.lines().next().unwrap();
    let expected = if first.starts_with("**Regression gate: FAILED**") {
        "code=1"
    } else if first.starts_with("**Regression gate: INCONCLUSIVE**") {
        "code=4"
    } else {
        assert!(first.starts_with("**Regression gate: pass**"), "{md}");
        "code=0"
    };
    assert_eq!(code.trim(), expected, "{md}");
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), md, "the job summary shows the comparison");
    // The artifact the trusted companion reads: the comparison and the pull request's number.
    assert_eq!(std::fs::read_to_string(root.join("comment/comparison.md")).unwrap(), md);
    assert_eq!(std::fs::read_to_string(root.join("comment/pr-number")).unwrap().trim(), "42");
    // The benchmark itself holds no write token (a fork's pull request would not have one).
    assert!(workflow.contains("permissions:\n  contents: read\n\nenv:"), "{workflow}");
    assert!(!workflow.contains("pull-requests: write") && !workflow.contains("gh pr comment"), "{workflow}");
}

/// The companion workflow's comment step, run here with a stand-in for `gh` that answers as
/// GitHub's API would and logs what it was asked: one comment made on the first run, the same
/// one updated on the next, a number that is not one refused.
#[test]
fn the_github_comment_workflow_posts_one_comment_and_updates_it() {
    let workflow =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ci/benchmark-comment.yml")).unwrap();
    assert!(workflow.contains("workflow_run:") && workflow.contains("pull-requests: write"), "{workflow}");
    let script = step_script(&workflow, "Comment on the pull request");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // The stand-in: listing comments prints the id in ./existing (if any); every call is logged.
    // It answers the pull request's head with ./head-sha; the comment filter itself is GitHub's
    // (jq over the API's answer), so the stand-in gives the filtered answer: ./existing.
    let gh = "#!/bin/sh\necho \"$*\" >> \"$GH_LOG\"\ncase \"$*\" in\n  *pulls/*) cat head-sha ;;\n  *--paginate*) cat existing 2>/dev/null || true ;;\nesac\n";
    std::fs::write(bin.join("gh"), gh).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("gh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(root.join("comment")).unwrap();
    std::fs::write(root.join("comment/comparison.md"), "**Regression gate: pass**\n").unwrap();
    let log = root.join("gh.log");
    let run = |pr: &str| {
        std::fs::write(root.join("comment/pr-number"), pr).unwrap();
        std::process::Command::new("bash")
            .args(["-eo", "pipefail", "-c", &script])
            .current_dir(root)
            .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
            .env("GH_LOG", &log)
            .env("REPO", "owner/app")
            .env("HEAD_SHA", "abc123")
            .output()
            .unwrap()
    };
    std::fs::write(root.join("head-sha"), "abc123\n").unwrap();
    let o = run("42\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        script.contains("select(.user.login == \\\"github-actions[bot]\\\""),
        "only the bot's own comment: {script}"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("api repos/owner/app/issues/42/comments --paginate"), "{calls}");
    assert!(calls.contains("api --method POST repos/owner/app/issues/42/comments -F body=@body.md"), "{calls}");
    let body = std::fs::read_to_string(root.join("body.md")).unwrap();
    assert_eq!(body, "<!-- bolide benchmark -->\n**Regression gate: pass**\n");
    // The next push: the comment found by its marker is updated, no second one made.
    std::fs::write(root.join("existing"), "987\n").unwrap();
    std::fs::remove_file(&log).unwrap();
    assert!(run("42").status.success());
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("api --method PATCH repos/owner/app/issues/comments/987 -F body=@body.md"), "{calls}");
    assert!(!calls.contains("POST"), "{calls}");
    // What the pull request's run left is data: a number that is no number is refused, and so is
    // the number of a pull request other than the one measured.
    let o = run("42; rm -rf /");
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no pull request number"));
    std::fs::write(root.join("head-sha"), "other\n").unwrap();
    let o = run("7");
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("is not the one the benchmark ran for"));
}

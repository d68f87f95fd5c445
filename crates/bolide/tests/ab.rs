//! A/B in one command (`bench --parameter-list`), the minimum detectable effect, and the Meteor
//! team's transport tables as built-ins (`ddp-calls`, `ddp-connect`), against the reference
//! server and Meteor's own (`../shared/meteor-server`), its counters read back.

mod common;

use std::path::Path;

use common::{bolide, free_port};
use serde_json::Value;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A step of a DDP result document, by name.
fn step<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let steps = doc["steps"].as_array().unwrap_or_else(|| panic!("no steps: {doc}"));
    steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name:?}: {}", doc["steps"]))
}

fn started(doc: &Value) -> std::time::SystemTime {
    humantime::parse_rfc3339_weak(doc["started_at"].as_str().unwrap()).unwrap()
}

fn server_pid(doc: &Value) -> u64 {
    let m = doc["monitor"].as_array().unwrap();
    m.iter().find(|m| m["name"] == "server").unwrap()["pid"].as_u64().unwrap()
}

/// `bolide serve` for `--spawn` on a free port: the command, its ready URL and its base URL.
fn spawned_reference_server() -> (String, String, String) {
    let port = free_port();
    let spawn = format!("exec {} serve --port {port}", env!("CARGO_BIN_EXE_bolide"));
    (spawn, format!("http://127.0.0.1:{port}/ok"), format!("http://127.0.0.1:{port}"))
}

#[test]
fn a_parameter_list_interleaves_fresh_servers_and_compares_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ab");
    let grid = dir.path().join("grid.json");
    let html = dir.path().join("report.html");
    let (spawn, ready, base) = spawned_reference_server();
    let url = format!("{base}/delay/{{d}}");
    // Each server started writes the value its environment got (--spawn-env) before it serves.
    let seen = dir.path().join("seen.txt");
    let spawn = format!("echo \"$SEEN_DELAY\" >> {}; {spawn}", seen.display());
    let o = bolide(&[
        "bench",
        "http",
        "--parameter-list",
        "d",
        "0,3",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--spawn",
        &spawn,
        "--spawn-env",
        "SEEN_DELAY=delay-{d}",
        "--ready-url",
        &ready,
        "-c",
        "2",
        "-d",
        "1s",
        "--out",
        out.to_str().unwrap(),
        "--json",
        grid.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--fail-on",
        "p99>+10%",
        "--detect",
        "5%",
        &url,
    ]);
    // The gate's verdict is the runs' to give (fail here, unless the machine is wildly noisy).
    assert!([0, 1, 4].contains(&o.code), "{}\n{}", o.out, o.err);
    let doc = |v: &str, i: u32| json(&out.join(format!("d={v}")).join(format!("http-{i}.json")));
    let (a1, b1, b2, a2) = (doc("0", 1), doc("3", 1), doc("3", 2), doc("0", 2));
    // Each value is a series of its own label; the rounds alternate: A B, then B A.
    for (d, label) in [(&a1, "d=0"), (&a2, "d=0"), (&b1, "d=3"), (&b2, "d=3")] {
        assert_eq!(d["label"], label);
    }
    assert!(started(&a1) < started(&b1) && started(&b1) < started(&b2) && started(&b2) < started(&a2));
    // A fresh server for every run, in the rounds' order, with the value in its environment.
    let started_servers = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(started_servers.lines().collect::<Vec<_>>(), ["delay-0", "delay-3", "delay-3", "delay-0"]);
    let pids: std::collections::BTreeSet<u64> = [&a1, &a2, &b1, &b2].iter().map(|d| server_pid(d)).collect();
    assert_eq!(pids.len(), 4, "one server per run");
    for d in [&b1, &b2] {
        assert!(d["command_line"].to_string().contains("/delay/3"), "{}", d["command_line"]);
        // The server waits 3 ms before answering: a floor no machine load lowers.
        assert!(d["summary"]["latency"]["mean_us"].as_f64().unwrap() >= 3000.0);
    }
    for v in ["0", "3"] {
        let s = json(&out.join(format!("d={v}/http-summary.json")));
        assert_eq!((s["label"].as_str(), s["runs"].as_array().unwrap().len()), (Some(&*format!("d={v}")), 2));
    }
    // The comparison, written beside the series and carried by --json.
    let c = json(&out.join("comparison.json"));
    assert!(std::fs::read_to_string(out.join("comparison.md")).unwrap().contains("Comparison with d=0"));
    // The HTML report compares the series as the terminal did (not "d=3 has no runs of it").
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("d=3 compared with d=0") && page.contains("Detectable"), "the report compares");
    assert!(!page.contains("has no runs of it"));
    let g = json(&grid);
    assert_eq!(g["format"], "bolide.bench-parameters");
    assert_eq!(g["series"].as_array().unwrap().len(), 2);
    assert_eq!(g["comparison"], c);
    assert_eq!((c["baseline"].as_str(), c["comparisons"].as_array().unwrap().len()), (Some("d=0"), 1));
    let comparison = &c["comparisons"][0];
    assert_eq!(comparison["series"], "d=3");
    let metrics = comparison["metrics"].as_array().unwrap();
    let mean = metrics.iter().find(|m| m["metric"] == "Mean latency (ms)").unwrap();
    // Two clean runs a side measure their noise: a smallest detectable change. Runs marked suspect
    // (a busy machine) do not count, and with fewer than two a side there is none to give.
    let clean = |runs: &Value| runs.as_array().unwrap().iter().filter(|r| r["suspect"].is_null()).count();
    let measured = clean(&comparison["baseline_runs"]) >= 2 && clean(&comparison["runs"]) >= 2;
    assert_eq!(mean["detectable_pct"].as_f64().is_some_and(|d| d > 0.0), measured, "{mean}");
    assert_eq!(o.out.contains("Smallest changes these runs could detect (80% power, p < 0.05): with "), measured);
    // --detect 5%: the runs a side that change needs, said for every metric either way.
    assert_eq!(mean["detect"]["change_pct"], 5.0);
    assert!(mean["detect"].get("runs_needed").is_some(), "{mean}");
    assert!(o.out.contains("To detect a change of 5% (80% power, p < 0.05), runs a side needed: "));
    let gate = c["gate"].as_array().unwrap();
    assert_eq!((gate.len(), gate[0]["rule"].as_str()), (1, Some("p99>+10%")));
    assert!(gate[0]["change_pct"].as_f64().is_some(), "{}", gate[0]);
    // The series compare again from their directories.
    let again = bolide(&[
        "compare",
        "--format",
        "json",
        "--allow-different-workloads",
        out.join("d=0").to_str().unwrap(),
        out.join("d=3").to_str().unwrap(),
    ]);
    assert_eq!(again.code, 0, "{}", again.err);
}

#[test]
fn an_a_a_test_is_two_series_of_one_value() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("aa");
    let (spawn, ready, base) = spawned_reference_server();
    let url = format!("{base}/ok");
    let o = bolide(&[
        "bench",
        "http",
        "-L",
        "v",
        "a,a",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--spawn",
        &spawn,
        "--ready-url",
        &ready,
        "-c",
        "1",
        "-d",
        "500ms",
        "--out",
        out.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let c = json(&out.join("comparison.json"));
    assert_eq!(c["comparisons"][0]["baseline"], "v=a");
    assert_eq!(c["comparisons"][0]["series"], "v=a#2");
    // The same workload: compared without a word of difference.
    assert_eq!(c["comparisons"][0]["differences"].as_array().map_or(0, Vec::len), 0);
    for label in ["v=a", "v=a#2"] {
        assert_eq!(json(&out.join(label).join("http-summary.json"))["runs"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn parameter_lists_and_levels_refuse_what_they_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let rows: [(&[&str], &str); 12] = [
        (
            &["bench", "run", "ddp-connect", "-L", "pw", "s3cret,other", "--login", "ann:{pw}", "--out", out],
            "where a secret goes",
        ),
        (&["capacity", "run", "ddp-calls", "--from", "1", "--step", "1", "--to", "2"], "closed loop"),
        (&["run", "ddp-connect", "--users", "1,10"], "--burst N, not --users"),
        (&["run", "ddp-calls", "--burst", "1,10"], "--burst is for the built-in ddp-connect"),
        (&["bench", "http", "-L", "v", "a", "--out", out, "http://127.0.0.1:9/"], "at least two values"),
        (&["bench", "http", "-L", "v", "a/b,c", "--out", out, "http://127.0.0.1:9/"], "no slashes"),
        (&["bench", "http", "--fail-on", "p99>+5%", "--out", out, "http://127.0.0.1:9/"], "--parameter-list"),
        (
            &["bench", "http", "-L", "v", "1,2", "--baseline", "v=9", "--out", out, "http://127.0.0.1:9/"],
            "none of the series",
        ),
        (&["bench", "http", "-L", "v", "1,2", "--detect", "lots", "--out", out, "http://127.0.0.1:9/"], "--detect"),
        (&["run", "tasks-reactive", "--users", "1,10"], "levels, one run each, are for"),
        (&["run", "tasks-reactive", "--method", "x"], "--method is for the built-in ddp-calls"),
        (&["run", "ddp-calls", "--arrival-rate", "5"], "closed loop"),
    ];
    for (args, words) in rows {
        let o = bolide(args);
        assert_eq!(o.code, 2, "{args:?}: {}\n{}", o.out, o.err);
        assert!(o.err.contains(words), "{args:?}: {}", o.err);
    }
    // Nothing of a refused series was written.
    assert_eq!(std::fs::read_dir(out).unwrap().count(), 0);
}

#[test]
fn the_transport_tables_count_what_meteors_server_counts() {
    // ddp-calls at two client counts: every call bolide made is one Meteor ran.
    let meteor = common::meteor::Meteor::start_with(&["--bench-echo"]);
    let url = format!("http://127.0.0.1:{}", meteor.port);
    let dir = tempfile::tempdir().unwrap();
    let levels = dir.path().join("calls.json");
    let o = bolide(&[
        "run",
        "ddp-calls",
        "--target",
        &url,
        "--users",
        "1,4",
        "-d",
        "1s",
        "--monitor",
        &format!("app=:{}", meteor.port),
        "--monitor-interval",
        "500ms",
        "--json",
        levels.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = json(&levels);
    let rows = doc["levels"].as_array().unwrap();
    assert_eq!(rows.iter().map(|l| l["level"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 4]);
    let stats = meteor.stats();
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let calls: u64 = rows.iter().map(|l| n(&l["ok"]) + n(&l["errors"])).sum();
    assert!(calls > 0);
    assert_eq!(n(&stats["methods"]["bench.echo"]), calls, "{stats}");
    assert_eq!(n(&stats["messagesIn"]["connect"]), 5, "one session per user: {stats}");
    for l in rows {
        assert_eq!((l["step"].as_str(), n(&l["errors"])), (Some("call bench.echo"), 0), "{l}");
        assert!(l["p99_ms"].as_f64().unwrap() >= l["p50_ms"].as_f64().unwrap());
        // The server's memory, sampled every 500 ms.
        assert!(l["rss_samples"].as_u64().unwrap() >= 1 && l["rss_max_bytes"].as_u64().unwrap() > 0, "{l}");
    }
    let table = common::md_table(&o.out, "Clients").expect("the team's table");
    let clients: Vec<&str> = table[1..].iter().map(|r| r[0].trim_end_matches(" (suspect)")).collect();
    assert_eq!(clients, ["1", "4"]);
    for l in [1, 4] {
        let d = json(&dir.path().join(format!("ddp-calls-users-{l}.json")));
        assert_eq!(d["label"], format!("users={l}"));
    }

    // ddp-connect in bursts of 1 and 5, each session subscribing: Meteor saw every one.
    let meteor = common::meteor::Meteor::start();
    let url = format!("http://127.0.0.1:{}", meteor.port);
    let levels = dir.path().join("connect.json");
    let o = bolide(&[
        "run",
        "ddp-connect",
        "--target",
        &url,
        "--burst",
        "1,5",
        "-d",
        "1s",
        "--publication",
        "fetchTasks",
        "--json",
        levels.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = json(&levels);
    let rows = doc["levels"].as_array().unwrap();
    let connects: u64 = rows.iter().map(|l| n(&l["ok"])).sum();
    let stats = meteor.stats();
    assert!(connects > 0);
    assert_eq!(n(&stats["messagesIn"]["connect"]), connects, "{stats}");
    assert_eq!(n(&stats["subscriptions"]["fetchTasks"]), connects, "{stats}");
    assert!(common::md_table(&o.out, "Burst").is_some(), "{}", o.out);
}

#[test]
fn an_interleaved_ddp_comparison_of_meteors_compression() {
    // Meteor's server with compression on and off, spawned fresh for each run; its counters
    // written on exit equal the calls of the run.
    let dir = tempfile::tempdir().unwrap();
    let server = common::meteor_server_dir();
    let port = free_port();
    let stats = dir.path().join("stats-{c}.json");
    let spawn = format!(
        "cd {} && exec node server.js --port {port} --quiet --bench-echo --compression {{c}} --stats-file {}",
        server.display(),
        stats.display()
    );
    let out = dir.path().join("ab");
    let url = format!("http://127.0.0.1:{port}");
    let o = bolide(&[
        "bench",
        "run",
        "ddp-calls",
        "-L",
        "c",
        "on,off",
        "--runs",
        "1",
        "--cooldown",
        "0",
        "--spawn",
        &spawn,
        "--ready-url",
        &format!("{url}/"),
        "--target",
        &url,
        "--users",
        "2",
        "-d",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    for c in ["on", "off"] {
        let doc = json(&out.join(format!("c={c}/ddp-calls-1.json")));
        let calls = step(&doc, "call bench.echo")["count"].as_u64().unwrap();
        let counted = json(&dir.path().join(format!("stats-{c}.json")));
        assert_eq!(counted["methods"]["bench.echo"].as_u64(), Some(calls), "{c}: {counted}");
        assert!(doc["command_line"].to_string().contains(&format!("--compression {c}")), "{}", doc["command_line"]);
    }
    assert!(o.out.contains("c=off against c=on"), "{}", o.out);
}

#[test]
fn ddp_connect_logs_each_session_in_and_ddp_calls_says_what_it_needs() {
    use refserver::{Config, DdpConfig, Server};
    let ddp = DdpConfig { users: vec![("ann".into(), "s3cret-pw".into())], ..DdpConfig::default() };
    let server = Server::start(Config { ddp, threads: 1, ..Config::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let o = bolide(&[
        "run",
        "ddp-connect",
        "--target",
        &server.base_url(),
        "--burst",
        "3",
        "-d",
        "1s",
        "--login",
        "ann:s3cret-pw",
        "--publication",
        "fetchTasks",
        "--json",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = json(&file);
    let count = |name: &str| step(&doc, name)["count"].as_u64().unwrap();
    let connects = count("connect");
    assert!(connects >= 3, "{connects}");
    assert_eq!((count("login"), count("subscribe fetchTasks")), (connects, connects));
    assert_eq!(doc["summary"]["step_errors"], 0, "{}", doc["summary"]);
    // The password is not kept.
    assert!(!std::fs::read_to_string(&file).unwrap().contains("s3cret-pw"));
    let bad = bolide(&["run", "ddp-connect", "--target", &server.base_url(), "--login", "nopassword"]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("--login is NAME:PASSWORD"), "{}", bad.err);
}

#[test]
fn a_parameter_may_stand_in_a_typed_flag() {
    // `--users {n}`: read as the first value's command line, then each value's own.
    use refserver::{Config, Server};
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("levels");
    let o = bolide(&[
        "bench",
        "run",
        "ddp-calls",
        "-L",
        "n",
        "1,3",
        "--users",
        "{n}",
        "--runs",
        "1",
        "--cooldown",
        "0",
        "--target",
        &server.base_url(),
        "-d",
        "500ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    for n in [1, 3] {
        let doc = json(&out.join(format!("n={n}/ddp-calls-1.json")));
        // One walk per looping user: as many connects as users.
        assert_eq!(step(&doc, "connect")["count"], n, "{}", doc["steps"]);
    }
    assert!(o.out.contains("Calls per second"), "{}", o.out);
}

#[test]
fn a_parameter_reaches_a_scenario_as_a_variable() {
    // The scenario asks for /delay/{{ d }}: with the value there it answers 200 after d ms;
    // without it, the path is no number and the step fails.
    use refserver::{Config, Server};
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("delay.yml");
    let flow = "config:\n  target: http://127.0.0.1:1\n  phases:\n    - duration: 1\n      arrivalRate: 4\nscenarios:\n  - flow:\n      - get: { url: \"/delay/{{ d }}\", expect: 200 }\n";
    std::fs::write(&scenario, flow).unwrap();
    let out = dir.path().join("vars");
    let o = bolide(&[
        "bench",
        "run",
        scenario.to_str().unwrap(),
        "-L",
        "d",
        "0,3",
        "--runs",
        "1",
        "--cooldown",
        "0",
        "--target",
        &server.base_url(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    for d in [0, 3] {
        let doc = json(&out.join(format!("d={d}/delay-1.json")));
        let steps = doc["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 1, "{}", doc["steps"]);
        assert_eq!((steps[0]["errors"].as_u64(), steps[0]["count"].as_u64().is_some_and(|c| c >= 1)), (Some(0), true));
        if d == 3 {
            // The server waited 3 ms: a floor no machine load lowers.
            assert!(steps[0]["latency"]["min_us"].as_u64().unwrap() >= 3000, "{}", steps[0]);
        }
    }
}

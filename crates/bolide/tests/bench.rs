//! `bench`, `compare`, `capacity`, `--spawn` and `demo` end to end, against the reference server
//! started by bolide itself (`--spawn "bolide serve ..."`) or in-process, on 127.0.0.1 only.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bolide::stats::doc::Doc;
use common::bolide;

const BIN: &str = env!("CARGO_BIN_EXE_bolide");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(300)).is_ok()
}

/// `--spawn` and `--ready-url` for a reference server on `port` with extra `serve` flags.
fn spawn_flags(port: u16, extra: &str) -> [String; 4] {
    [
        "--spawn".into(),
        format!("exec '{BIN}' serve --port {port} --threads 1 {extra}"),
        "--ready-url".into(),
        format!("http://127.0.0.1:{port}/ok"),
    ]
}

fn run(args: &[String]) -> common::Outcome {
    let v: Vec<&str> = args.iter().map(String::as_str).collect();
    bolide(&v)
}

/// A tiny tasks-reactive series into `dir` (runs of about a second).
fn tiny_bench(label: &str, dir: &Path, port: u16, runs: &str) -> common::Outcome {
    let mut args: Vec<String> = [
        "bench",
        "run",
        "tasks-reactive",
        "--arrival-rate",
        "3",
        "-d",
        "1s",
        "--think",
        "0",
        "--tasks",
        "3",
        "-t",
        "1",
        "--runs",
        runs,
        "--cooldown",
        "0",
        "--label",
        label,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["--target".into(), format!("http://127.0.0.1:{port}"), "--out".into(), dir.display().to_string()]);
    args.extend(spawn_flags(port, "--reactivity poll"));
    run(&args)
}

#[test]
fn bench_spawns_watches_and_stops_the_server_and_compare_reads_the_series() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let o = tiny_bench("before", &a, port, "2");
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(!listening(port), "the spawned server is stopped after the series");
    // Column widths depend on whether a run was marked suspect (a busy machine): match the rows.
    for needle in ["| # Run ", "| 1 ", "| 2 ", "| Mean ", "bolide compare"] {
        assert!(o.out.contains(needle), "{needle:?} in\n{}", o.out);
    }
    // Every run's document: the spawned server watched as "server", bolide's own threads too.
    for i in 1..=2 {
        let Doc::Ddp(d) = Doc::load(&a.join(format!("tasks-reactive-{i}.json"))).unwrap() else { panic!() };
        assert_eq!(d.label.as_deref(), Some("before"));
        assert_eq!(d.summary.users.completed, 3, "{:?}", d.summary.users);
        assert_eq!(d.monitor.len(), 1);
        assert_eq!(d.monitor[0].name, "server");
        assert!(d.monitor[0].avg_rss_bytes > 1e6, "{:?}", d.monitor[0]);
        assert!(d.monitor[0].vanished_s.is_none(), "the server lived through the run");
        // bolide's own threads are checked through the binary (the demo test): in this test
        // process, other tests' load threads run beside ours.
        assert!(d.generator.is_some(), "bolide watches itself");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("tasks-reactive-summary.json")).unwrap()).unwrap();
    assert_eq!(summary["format"], "bolide.bench");
    assert_eq!(summary["runs"].as_array().unwrap().len(), 2);
    // The summary's CPU is the mean of the runs' own (whatever the machine made of them).
    let cpu: Vec<f64> = (1..=2)
        .map(|i| match Doc::load(&a.join(format!("tasks-reactive-{i}.json"))).unwrap() {
            Doc::Ddp(d) => d.monitor[0].avg_cpu_pct,
            _ => panic!(),
        })
        .collect();
    let mean = summary["mean"]["cpu_pct"].as_f64().unwrap();
    assert!((mean - (cpu[0] + cpu[1]) / 2.0).abs() < 1e-6, "{mean} vs {cpu:?}");

    // The same directory again would overwrite runs: refused, nothing lost.
    let again = tiny_bench("before", &a, port, "1");
    assert_eq!(again.code, 2, "{}", again.err);
    assert!(again.err.contains("already holds runs of tasks-reactive"), "{}", again.err);

    let o = tiny_bench("after", &b, port, "2");
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let c = bolide(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(c.code, 0, "{}\n{}", c.out, c.err);
    for needle in ["Comparison with before", "Per-step latency", "call insertTask"] {
        assert!(c.out.contains(needle), "{needle:?} in\n{}", c.out);
    }
    // The metrics' table judges each metric (what it says depends on which runs were suspect).
    let table = common::md_table(&c.out, "Metric").unwrap_or_else(|| panic!("{}", c.out));
    let col = table[0].iter().position(|h| h == "Significance").unwrap_or_else(|| panic!("{}", c.out));
    assert_eq!(table[0].last().map(String::as_str), Some("Detectable"), "{}", c.out);
    assert!(table.iter().skip(1).all(|row| !row[col].is_empty() && !row.last().unwrap().is_empty()), "{}", c.out);
    assert!(c.out.contains(" faster, ") || c.out.contains(" slower, ") || c.out.contains("same time, "), "{}", c.out);
    let json =
        bolide(&["compare", "--format", "json", "--baseline", "after", a.to_str().unwrap(), b.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&json.out).unwrap();
    assert_eq!(v["baseline"], "after");
    assert_eq!(v["comparisons"][0]["per_run"].as_array().unwrap().len(), 2);
    let bad = bolide(&["compare", "--baseline", "nope", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("none of the series: before, after"), "{}", bad.err);
}

#[test]
fn a_spawn_that_fails_or_finds_the_port_taken_ends_with_exit_3() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let o = bolide(&["http", "-d", "1s", "--spawn", "echo boom >&2; exit 4", "--ready-url", &url, &url]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains("ended (exit status: 4)") && o.err.contains("| boom"), "{}", o.err);
    let begin = Instant::now();
    let o = bolide(&["http", "-d", "1s", "--spawn", "sleep 5", "--ready-url", &url, "--ready-timeout", "1s", &url]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains("not ready after 1s"), "{}", o.err);
    assert!(begin.elapsed() < Duration::from_secs(4), "the sleeping spawn is stopped, not waited for");
    // Something already answers at the ready URL: it would be measured instead.
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let ok = format!("{}/ok", server.base_url());
    let o = bolide(&["http", "-d", "1s", "--spawn", "sleep 5", "--ready-url", &ok, &ok]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains("something already answers"), "{}", o.err);
    // Usage errors: --spawn without --ready-url, a ready URL that is not http://.
    let o = bolide(&["http", "--spawn", "true", &ok]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--ready-url"), "{}", o.err);
    let o = bolide(&["http", "--spawn", "true", "--ready-url", "https://127.0.0.1:1/", &ok]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("only http:// URLs"), "{}", o.err);
}

#[test]
fn compare_names_and_skips_bad_files_and_refuses_other_workloads() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n).display().to_string();
    for (label, conns) in [("one", "1"), ("two", "1"), ("wide", "2")] {
        let o = bolide(&[
            "bench",
            "http",
            "--runs",
            "2",
            "--cooldown",
            "0",
            "--label",
            label,
            "--out",
            &dir(label),
            "-n",
            "300",
            "-c",
            conns,
            "-t",
            "1",
            &url,
        ]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    }
    let two = tmp.path().join("two");
    std::fs::write(two.join("corrupt.json"), "{\"format\": \"bolide.result\", ").unwrap();
    std::fs::write(two.join("foreign.json"), "{\"format\": \"k6-summary\"}").unwrap();
    std::fs::write(two.join("notes.txt"), "hello").unwrap();
    // What bolide itself writes beside a series (its report, CSV rows) is passed over in silence.
    std::fs::write(two.join("report.html"), "<!DOCTYPE html>").unwrap();
    std::fs::write(two.join("rows.csv"), "run,t_s,metric,labels,value\n").unwrap();
    std::fs::remove_file(two.join("http-2.json")).unwrap();
    let o = bolide(&["compare", &dir("one"), &dir("two")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(!o.err.contains("report.html") && !o.err.contains("rows.csv"), "{}", o.err);
    for needle in [
        "corrupt.json: not JSON",
        "foreign.json: not a bolide result (format \"k6-summary\")",
        "notes.txt: not a result document",
        "http-2.json: run 2 is listed in",
    ] {
        assert!(o.err.contains(needle), "{needle:?} in\n{}", o.err);
    }
    let header = o.out.lines().find(|l| l.starts_with("| Result")).unwrap_or_else(|| panic!("{}", o.out));
    assert!(header.contains("| one (2 runs) |") && header.trim_end().ends_with("two |"), "{header}");
    assert!(o.out.lines().any(|l| l.starts_with("| Requests ") && l.matches(" 300 |").count() == 2), "{}", o.out);
    // Different connection counts are different workloads.
    let o = bolide(&["compare", &dir("one"), &dir("wide")]);
    assert_eq!(o.code, 2, "{}\n{}", o.out, o.err);
    // Said once (in the report), not again on stderr.
    assert_eq!(format!("{}{}", o.out, o.err).matches("connections: 1 vs 2").count(), 1, "{}\n{}", o.out, o.err);
    assert!(o.err.contains("nothing comparable"), "{}", o.err);
    // On purpose: compared, the difference beside the comparison.
    let o = bolide(&["compare", &dir("one"), &dir("wide"), "--allow-different-workloads"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(
        o.out.contains("Different workloads, compared on purpose: ") && o.out.contains("connections: 1 vs 2"),
        "{}",
        o.out
    );
    let o = bolide(&["compare", &dir("one"), &dir("missing")]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("no such file or directory"), "{}", o.err);
}

#[test]
fn capacity_finds_the_limit_of_a_server_with_few_sessions() {
    // At most 4 sessions. At 1 user per second for 2 s, 2 users live at once; at 3 per second 6
    // users arrive and each lives longer than the arrivals last, so some are refused.
    let port = free_port();
    let mut args: Vec<String> = [
        "capacity",
        "tasks-reactive",
        "--from",
        "1",
        "--step",
        "2",
        "--to",
        "5",
        "-d",
        "2s",
        "--think",
        "200ms",
        "--tasks",
        "5",
        // The ladder's logic on the server's limit is under test, not the machine's idle CPU
        // (a busy machine would give every level "no verdict"; a unit test covers that).
        "--allow-busy-machine",
        "-t",
        "1",
        "--cooldown",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["--target".into(), format!("http://127.0.0.1:{port}")]);
    args.extend(spawn_flags(port, "--max-sessions 4"));
    let o = run(&args);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("| # Connections |"), "{}", o.out);
    assert!(o.out.contains("Highest passing level: 1 per second. The server failed at 3 per second."), "{}", o.out);
    let row3 = o.out.lines().find(|l| l.starts_with("| 3 ")).unwrap_or_else(|| panic!("{}", o.out));
    assert!(row3.contains("| x ") && row3.contains("users failed"), "{row3}");
    assert!(!o.out.lines().any(|l| l.starts_with("| 5 ")), "the ladder stops at the first failure");
    assert!(!listening(port));
}

#[test]
fn capacity_over_http_rates() {
    // Two connections to a 100 ms endpoint carry at most 20 requests per second.
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/delay/100", server.base_url());
    let o = bolide(&[
        "capacity",
        "http",
        "--from",
        "5",
        "--step",
        "35",
        "--to",
        "40",
        "--allow-busy-machine",
        "-d",
        "2s",
        "-c",
        "2",
        "-t",
        "1",
        "--cooldown",
        "0",
        &url,
    ]);
    // A ladder that stops without a verdict found no knee: inconclusive, exit 4.
    assert_eq!(o.code, 4, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("| Requests/s |"), "{}", o.out);
    // At 40/s the sends that never went out are the two connections' limit (Little's law), not
    // the server failing: the verdict says so and what to change.
    assert!(o.out.contains("Highest passing level: 5 per second. At 40 per second the limit was not the server: too few connections for the rate: 2 connections"), "{}", o.out);
    assert!(o.out.contains("raise -c to at least"), "{}", o.out);
    assert!(!o.out.contains("The server failed"), "{}", o.out);
    let bad = bolide(&["capacity", "http", "--from", "5", "--step", "0", "--to", "4", &url]);
    assert_eq!(bad.code, 2);
    assert!(bad.err.contains("need 0 < from <= to and step > 0"), "{}", bad.err);
    // The ladder sets the rate and the length: --rps and -n are refused, not silently ignored.
    let bad = bolide(&["capacity", "http", "--from", "5", "--step", "5", "--to", "10", "--rps", "7", "-n", "9", &url]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.err.contains("--rps: capacity sets each level's rate") && bad.err.contains("-n/--requests"),
        "{}",
        bad.err
    );
}

#[test]
fn a_server_that_answers_503_fails_the_capacity_ladder() {
    // Every answer a 503: the error rate is the server's answer on any machine, busy or not; the
    // ladder fails at its first level (exit 1) and names the error rate.
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/status/503", server.base_url());
    let o = bolide(&[
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
        &url,
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("50 per second: x: error rate 100.00% > 1.00%"), "{}", o.out);
    assert!(o.out.contains("No level passed. The server failed at 50 per second."), "{}", o.out);
}

#[test]
fn ctrl_c_during_bench_keeps_the_finished_runs() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("s");
    let mut child = Command::new(BIN)
        .args(["bench", "http", "--runs", "20", "--cooldown", "0", "--label", "x", "--out"])
        .arg(&out)
        .args(["-d", "1s", "-c", "1", "-t", "1"])
        .arg(format!("{}/delay/5", server.base_url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let begin = Instant::now();
    while !out.join("http-2.json").exists() && begin.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "bench did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    // Stopped by Ctrl-C: 130, after the report.
    assert_eq!(o.status.code(), Some(130), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("Interrupted: ") && stdout.contains("of 20 runs finished"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("http-summary.json")).unwrap()).unwrap();
    assert_eq!(summary["interrupted"], true);
    let runs = summary["runs"].as_array().unwrap();
    assert!(runs.len() >= 2 && runs.len() < 20, "{}", runs.len());
    for r in runs {
        assert!(out.join(r["file"].as_str().unwrap()).exists());
    }
}

#[test]
fn ctrl_c_during_capacity_reports_the_finished_levels() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "capacity",
            "http",
            "--from",
            "5",
            "--step",
            "5",
            "--to",
            "100",
            "--allow-busy-machine",
            "--cooldown",
            "0",
            "-d",
            "1s",
            "-c",
            "2",
        ])
        .args(["-t", "1"])
        .arg(format!("{}/ok", server.base_url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the first level is in (whenever a busy machine gets there), while the next runs.
    let lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in lines.map_while(Result::ok) {
            if line.trim_start().starts_with("5 per second:") {
                let _ = seen_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let _ = seen_rx.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "capacity did not stop after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let stdout = reader.join().unwrap();
    assert_eq!(o.status.code(), Some(130), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("| 5 ") && stdout.contains("| ok"), "{stdout}");
    assert!(stdout.contains("Interrupted before the ladder ended."), "{stdout}");
    assert!(!stdout.contains("| 100 "), "{stdout}");
}

#[test]
fn demo_quick_runs_the_meteor_benchmark_on_a_spawned_server() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    // `bolide` on the PATH is this build: the hints say `bolide ...`.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("bolide")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new(BIN).args(["demo", "--quick", "--out"]).arg(&out).env("PATH", path).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    for name in ["tasks-reactive", "tasks-nonreactive"] {
        let Doc::Ddp(d) = Doc::load(&out.join(format!("{name}-1.json"))).unwrap() else { panic!() };
        assert_eq!(d.summary.users.failed, 0, "{name}: {:?}", d.summary.users);
        assert!(d.summary.users.completed >= 10, "{name}: {:?}", d.summary.users);
        assert_eq!(d.monitor[0].name, "server");
        assert!(d.monitor[0].avg_rss_bytes > 1e6);
        let g = d.generator.expect("bolide watches itself");
        assert!(g.threads == 1 && !g.samples.is_empty(), "{g:?}");
    }
    assert_eq!(stdout.matches("| # Run ").count(), 2, "{stdout}");
    // The next step compares like with like: a --quick series with a later --quick one.
    assert!(stdout.contains("\n  bolide demo --quick\n"), "{stdout}");
    assert!(stdout.contains(&format!("\n  bolide compare {} ", out.display())), "{stdout}");
    assert!(stdout.contains(&format!("Results: {}\n", out.display())), "{stdout}");
    // The HTML report of both runs, by default beside them.
    assert!(stdout.contains(&format!("HTML report: {}", out.join("report.html").display())), "{stdout}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("tasks-reactive-1.json") && page.contains("tasks-nonreactive-1.json"));
}

#[test]
fn demo_cluster_quick_runs_the_five_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cluster");
    let o = Command::new(BIN).args(["demo", "cluster", "--quick", "--out"]).arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cluster.json")).unwrap()).unwrap();
    let shapes = figures["shapes"].as_array().unwrap();
    let names: Vec<&str> = shapes.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "control",
            "3 servers, one balancer",
            "3 servers, all balancers",
            "5 servers, all balancers",
            "10 servers, all balancers"
        ]
    );
    let files = [
        "control",
        "3-servers-one-balancer",
        "3-servers-all-balancers",
        "5-servers-all-balancers",
        "10-servers-all-balancers",
    ];
    for (shape, file) in shapes.iter().zip(files) {
        let servers = shape["servers"].as_array().unwrap();
        let subs: Vec<u64> = servers.iter().map(|s| s["subscriptions"].as_u64().unwrap()).collect();
        let entries = servers.iter().filter(|s| s["entry"] == true).count();
        let Doc::Ddp(d) = Doc::load(&out.join(format!("{file}.json"))).unwrap() else { panic!() };
        assert_eq!(d.summary.users.failed, 0, "{file}: {:?}", d.summary.users);
        // Every subscription the users saw ready was made ready by one of the servers, once.
        let ready = d.steps.iter().find(|s| s.name == "subscribe payload").unwrap();
        assert_eq!(subs.iter().sum::<u64>(), ready.count - ready.errors, "{file}: {subs:?}");
        // Every server took its share (how even depends on each user's speed: the balancer's
        // exact round-robin is tested in tests/targets.rs).
        assert!(subs.iter().all(|s| *s > 0), "{file}: {subs:?}");
        // Each server watched by its port, its CPU and RAM in the table.
        assert_eq!(d.monitor.len(), servers.len(), "{file}");
        assert!(d.monitor.iter().all(|m| m.vanished_s.is_none() && m.avg_rss_bytes > 1e6), "{file}");
        assert_eq!(entries, if file.contains("all") { servers.len() } else { 1 }, "{file}");
        assert_eq!(d.per_target.len(), if entries > 1 { entries } else { 0 }, "{file}");
    }
    let table = std::fs::read_to_string(out.join("cluster.md")).unwrap();
    assert!(stdout.contains(table.lines().nth(2).unwrap()), "the table is printed: {stdout}");
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 2 + 5, "a header, a rule, five shapes");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("10-servers-all-balancers.json"));
    // Every server stopped with its shape.
    let ports: Vec<u64> = shapes
        .iter()
        .flat_map(|s| s["servers"].as_array().unwrap().iter().map(|v| v["port"].as_u64().unwrap()))
        .collect();
    for port in ports {
        assert!(std::net::TcpStream::connect(("127.0.0.1", port as u16)).is_err(), "a server on {port} is still up");
    }
}

#[test]
fn a_watched_process_that_exits_mid_run_is_recorded_and_the_run_goes_on() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let mut short = Command::new("sleep").arg("0.8").spawn().unwrap();
    let spec = format!("short={}", short.id());
    // A spawned server that exits by itself after a second.
    let port = free_port();
    let spawn = format!("'{BIN}' serve --port {port} --threads 1 & sleep 1.2; kill $!");
    let ready = format!("http://127.0.0.1:{port}/ok");
    let o = bolide(&[
        "http",
        "-d",
        "2500ms",
        "-c",
        "1",
        "-t",
        "1",
        "--monitor",
        &spec,
        "--monitor-interval",
        "250ms",
        "--spawn",
        &spawn,
        "--ready-url",
        &ready,
        &url,
    ]);
    let _ = short.wait();
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("short") && o.out.contains("(gone after "), "{}", o.out);
    assert!(o.err.contains("warning: the spawned server was gone"), "{}", o.err);
    // The load ran to its end (2.5 s, and a little more on a busy machine).
    let ran_s: f64 = o
        .out
        .split(" responses in ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no duration in {}", o.out));
    assert!(ran_s >= 2.5, "the load ran to its end: {}", o.out);
}

#[test]
fn the_hints_name_the_command_that_works_for_how_bolide_was_started() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bench = |env: &[(&str, &str)], out: &str| {
        let mut c = Command::new(BIN);
        c.args(["bench", "http", "--runs", "1", "-n", "5", "-c", "1", "--out"]).arg(tmp.path().join(out));
        c.arg(format!("{}/ok", server.base_url())).env_remove("CARGO").env_remove("CARGO_MANIFEST_DIR");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Started by `cargo run` (a clone, no bolide on the PATH): cargo run's own words.
    let text = bench(&[("CARGO", "cargo"), ("CARGO_MANIFEST_DIR", "/x"), ("PATH", "/usr/bin:/bin")], "a");
    // (`--release` in it when this test runs a release build.)
    let profile = if cfg!(debug_assertions) { "" } else { "--release " };
    assert!(text.contains(&format!("Compare with another series: cargo run {profile}-- compare ")), "{text}");
    // Neither: the executable's path.
    let text = bench(&[("PATH", "/usr/bin:/bin")], "b");
    let exe = std::path::Path::new(BIN).canonicalize().unwrap();
    assert!(text.contains(&format!("Compare with another series: {} compare ", exe.display())), "{text}");
}

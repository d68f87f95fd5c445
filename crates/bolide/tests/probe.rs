//! bolide-probe (npm/bolide-probe) inside the real Meteor server of ../shared/meteor-server,
//! started by bolide's --spawn with no change to the server: what the server did inside equals
//! what bolide's users did.

mod common;

use common::bolide;

#[test]
fn the_probe_in_a_real_meteor_server_counts_what_the_users_did() {
    let server_dir = common::meteor_server_dir();
    let probe = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../npm/bolide-probe");
    let (port, probe_port) = (common::free_port(), common::free_port());
    let spawn = format!(
        "cd '{}' && NODE_OPTIONS='--require {}' exec node server.js --port {port}",
        server_dir.display(),
        probe.canonicalize().unwrap().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "run",
        "tasks-reactive",
        "--target",
        &format!("http://127.0.0.1:{port}"),
        "--arrival-rate",
        "10",
        // Three whole seconds: a mean per scrape interval needs intervals with calls in them.
        "-d",
        "3s",
        "--tasks",
        "3",
        "--think",
        "0",
        "--spawn",
        &spawn,
        "--ready-url",
        &format!("http://127.0.0.1:{port}/"),
        "--probe",
        &format!("app=127.0.0.1:{probe_port}"),
        "--threshold",
        "probe.app.methods>=1",
        "--threshold",
        "probe.app.eventloop_p99<1m",
        "--threshold",
        "probe.app.heap<4GiB",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The named figures read the probe's series: every method call, the mean per-second p99 in ms.
    let verdict = |t: &str| doc.thresholds.iter().find(|v| v.threshold == t).and_then(|v| v.value).unwrap();
    let calls: f64 = doc.scrape[0]
        .series
        .iter()
        .filter(|x| x.metric == "probe_meteor_method_calls_total")
        .filter_map(|x| x.increase)
        .sum();
    assert_eq!(verdict("probe.app.methods>=1"), calls);
    let p99 = doc.scrape[0].series.iter().find(|x| x.metric == "probe_eventloop_delay_p99_seconds").unwrap();
    assert!((verdict("probe.app.eventloop_p99<1m") - p99.mean.unwrap() * 1000.0).abs() < 1e-9);
    let users = doc.summary.users.completed;
    assert!(users >= 5 && doc.summary.users.failed == 0, "{}", o.out);
    let s = &doc.scrape[0];
    assert_eq!((s.name.as_str(), s.errors), ("app", 0), "{:?}", s.last_error);
    let series = |name: &str| {
        s.series.iter().find(|x| bolide::monitor::scrape::series_name(x) == name).unwrap_or_else(|| {
            panic!("{name} in {:?}", s.series.iter().map(bolide::monitor::scrape::series_name).collect::<Vec<_>>())
        })
    };
    let increase = |name: &str| series(name).increase.unwrap_or(-1.0) as u64;
    // Sessions, subscriptions and methods the server saw: what the users did.
    assert_eq!(increase("probe_meteor_sessions_created_total"), users);
    assert_eq!(increase("probe_meteor_subscriptions_started_total{name=\"fetchTasks\"}"), users);
    assert_eq!(increase("probe_meteor_subscriptions_started_total{name=\"meteor_autoupdate_clientVersions\"}"), users);
    assert_eq!(increase("probe_meteor_method_calls_total{name=\"insertTask\"}"), users * 3);
    assert_eq!(increase("probe_meteor_method_calls_total{name=\"removeTask\"}"), users * 3);
    assert_eq!(increase("probe_meteor_method_calls_total{name=\"removeAllTasks\"}"), users * 2);
    assert_eq!(increase("probe_meteor_method_errors_total{name=\"insertTask\"}"), 0);
    // Each method's run time, as the server measured it.
    assert_eq!(increase("probe_meteor_method_seconds{name=\"insertTask\"}"), users * 3);
    assert!(series("probe_meteor_method_seconds{name=\"insertTask\"}").quantiles.is_some());
    // Each fetchTasks subscription observed the (in-memory) tasks collection once.
    assert_eq!(increase("probe_meteor_observers_started_total{collection=\"taskCollection\"}"), users);
    // The gauges (sessions, subscriptions, observers now) are there each second; what they read
    // depends on when a read falls, so only their presence is checked.
    for gauge in ["probe_meteor_sessions", "probe_meteor_universal_subscriptions", "probe_meteor_queued_messages"] {
        assert!(series(gauge).values.iter().flatten().count() >= 2, "{gauge}");
    }
    // And the Node side: the event loop's delay each second, its busy time, the heap.
    assert!(series("probe_eventloop_delay_p99_seconds").values.iter().flatten().count() >= 2);
    assert!(series("probe_eventloop_active_seconds_total").increase.is_some_and(|a| a > 0.0));
    assert!(series("probe_heap_used_bytes").max.unwrap_or(0.0) > 1e6);
    assert!(
        o.out.contains("Scraped app (") && o.out.contains("probe_meteor_method_seconds{name=\"insertTask\"}"),
        "{}",
        o.out
    );
    // The report draws them under their own heading, in words and human units.
    let charts = bolide::report::charts::single_run(&bolide::stats::doc::Doc::Ddp(Box::new(doc.clone())));
    let chart = |title: &str| {
        charts
            .iter()
            .find(|c| c.title == title)
            .unwrap_or_else(|| panic!("{title} in {:?}", charts.iter().map(|c| c.title.as_str()).collect::<Vec<_>>()))
    };
    let internals: Vec<&str> = charts
        .iter()
        .filter(|c| c.group.as_deref() == Some("Server internals: app"))
        .map(|c| c.title.as_str())
        .collect();
    assert!(internals.len() >= 6, "{internals:?}");
    let lag = chart("app: Event-loop delay p99");
    assert_eq!(lag.y_label, "ms");
    let drawn_ms: Vec<f64> = lag.series[0].values.iter().flatten().copied().collect();
    let read_ms: Vec<f64> = p99.values.iter().flatten().map(|v| v * 1000.0).collect();
    assert_eq!(drawn_ms, read_ms, "each read in ms");
    assert_eq!(chart("app: Heap used").y_label, "MB");
    let methods = chart("app: Method time by name");
    assert_eq!((methods.y_label.as_str(), &methods.empty), ("ms, mean per call", &None));
    let names: Vec<&str> = methods.series.iter().map(|s| s.label.as_str()).collect();
    assert!(names.contains(&"insertTask") && names.contains(&"removeTask"), "{names:?}");
    // A method's mean time is a time a call takes: above zero, below the step timeout.
    let insert = methods.series.iter().find(|s| s.label == "insertTask").unwrap();
    let drawn: Vec<f64> = insert.values.iter().flatten().copied().collect();
    assert!(!drawn.is_empty() && drawn.iter().all(|ms| *ms > 0.0 && *ms < 120_000.0), "{:?}", insert.values);
    // Only loopback.
    let o = bolide(&["run", "tasks-reactive", "--target", "http://127.0.0.1:1", "--probe", "app=10.0.0.1:9465"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("serves loopback addresses only"), "{}", o.err);
}

#[test]
fn the_probe_in_a_plain_node_server_has_no_meteor_and_serves_loopback_only() {
    common::in_node_setup();
    let probe = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../npm/bolide-probe").canonicalize().unwrap();
    let mut child = std::process::Command::new("node")
        .arg("metrics.mjs")
        .current_dir(common::node_dir())
        .env("NODE_OPTIONS", format!("--require {}", probe.display()))
        .env("BOLIDE_PROBE", "127.0.0.1:0")
        // Sampled every 100 ms instead of 20: the same series.
        .env("BOLIDE_PROBE_RESOLUTION", "100")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let (mut line, mut said) = (String::new(), String::new());
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    std::io::BufRead::read_line(&mut err, &mut said).unwrap();
    let port = serde_json::from_str::<serde_json::Value>(&line).unwrap()["port"].as_u64().unwrap();
    // "bolide-probe: serving http://127.0.0.1:PORT/metrics"
    let probe_addr = said.trim().rsplit("http://").next().unwrap().trim_end_matches("/metrics").to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "http",
        "-n",
        "200",
        "--probe",
        &format!("node={probe_addr}"),
        "--json",
        json.to_str().unwrap(),
        &format!("http://127.0.0.1:{port}/hit"),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &doc.scrape[0];
    assert_eq!((s.name.as_str(), s.errors), ("node", 0), "{:?}", s.last_error);
    let has = |m: &str| s.series.iter().any(|x| x.metric == m);
    for m in [
        "probe_eventloop_delay_p99_seconds",
        "probe_eventloop_active_seconds_total",
        "probe_heap_used_bytes",
        "probe_cpu_seconds_total",
    ] {
        assert!(has(m), "{m}");
    }
    assert!(!s.series.iter().any(|x| x.metric.starts_with("probe_meteor_")), "no Meteor in this process");
    // Another address than loopback: the probe does not start.
    let o = std::process::Command::new("node")
        .args(["-e", ""])
        .env("NODE_OPTIONS", format!("--require {}", probe.display()))
        .env("BOLIDE_PROBE", "0.0.0.0:9465")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("is not a loopback address; not started"), "{said}");
    // A sampling period it cannot use is said, and the default used.
    let mut child = std::process::Command::new("node")
        .args(["-e", "setTimeout(() => {}, 200)"])
        .env("NODE_OPTIONS", format!("--require {}", probe.display()))
        .env("BOLIDE_PROBE", "127.0.0.1:0")
        .env("BOLIDE_PROBE_RESOLUTION", "5")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut said).unwrap();
    let _ = child.wait();
    assert!(
        said.contains("BOLIDE_PROBE_RESOLUTION=5 is not a whole number of ms from 10 to 1000; 20 is used"),
        "{said}"
    );
    assert!(said.contains("bolide-probe: serving http://127.0.0.1:"), "{said}");
}

/// The probe from the binary alone: `--probe app` with `--spawn` loads bolide's own copy into the
/// real Meteor server (no npm, no NODE_OPTIONS in the command), on a port bolide picked; and
/// `bolide probe path` writes that copy, the npm package's file byte for byte.
#[test]
fn the_probe_comes_from_the_binary_alone() {
    let server_dir = common::meteor_server_dir();
    let port = common::free_port();
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let spawn = format!("cd '{}' && exec node server.js --port {port}", server_dir.display());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["run", "tasks-reactive", "--target", &format!("http://127.0.0.1:{port}")])
        .args(["--arrival-rate", "5", "-d", "1s", "--tasks", "2", "--think", "0", "--spawn", &spawn])
        .args(["--ready-url", &format!("http://127.0.0.1:{port}/"), "--probe", "app"])
        .args(["--threshold", "probe.app.methods>=1", "--json", json.to_str().unwrap()])
        .env("XDG_CACHE_HOME", cache.path())
        .env_remove("NODE_OPTIONS")
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &doc.scrape[0];
    assert_eq!((s.name.as_str(), s.errors), ("app", 0), "{:?}", s.last_error);
    let calls: f64 =
        s.series.iter().filter(|x| x.metric == "probe_meteor_method_calls_total").filter_map(|x| x.increase).sum();
    let users = doc.summary.users.completed as f64;
    assert!(users >= 1.0 && calls >= users * 2.0, "{calls} calls for {users} users");

    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["probe", "path"])
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(path.starts_with(&cache.path().join("bolide").display().to_string()), "{path}");
    let npm = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../npm/bolide-probe/index.js");
    assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(npm).unwrap());

    // Without --spawn, an address is needed: a usage error that says how to load it.
    let o = common::bolide(&["run", "tasks-reactive", "--target", "http://127.0.0.1:9", "--probe", "app"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--probe app names no address") && o.err.contains("bolide probe path"), "{}", o.err);
}

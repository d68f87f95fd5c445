//! `bolide run` end to end, in-process, against the reference server on 127.0.0.1:0 (push and poll
//! reactivity, raw WebSocket and SockJS), and against small fake DDP servers for client behaviour.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bolide::stats::vu::VuDoc;
use common::*;
use refserver::{Config, DdpConfig, Reactivity, Server};

fn server(reactivity: Reactivity) -> Server {
    Server::start(Config { ddp: DdpConfig { reactivity, ..DdpConfig::default() }, threads: 2, ..Config::default() })
        .unwrap()
}

/// Runs `bolide run ARGS... --json TMP`; returns the outcome and the document.
fn run(args: &[&str]) -> (Outcome, VuDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut argv = vec!["run", "--json", json.to_str().unwrap()];
    argv.extend_from_slice(args);
    let o = bolide(&argv);
    let doc = VuDoc::from_json(
        &std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document; {}\n{}", o.out, o.err)),
    )
    .unwrap();
    (o, doc)
}

fn step<'a>(doc: &'a VuDoc, name: &str) -> &'a bolide::stats::vu::StepSummary {
    doc.steps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no step {name}"))
}

fn hist_count(encoded: &str) -> u64 {
    bolide::stats::hist::decode(encoded).unwrap().len()
}

/// Ten users arrive within 45 ms; with a 200 ms think before each action every user is subscribed
/// before the first insert and stays subscribed past the last one, so each sees all 200 inserts.
fn tasks_reactive_exact(reactivity: Reactivity, transport: &str) {
    let server = server(reactivity);
    let url = server.base_url();
    let (o, doc) = run(&[
        "tasks-reactive",
        "--target",
        &url,
        "--arrival-rate",
        "200",
        "-d",
        "50ms",
        "--think",
        "200ms",
        "--transport",
        transport,
        "-t",
        "2",
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (10, 10, 0), "{}", o.out);
    assert_eq!(doc.summary.step_errors, 0, "{:?}", doc.summary.errors_by_class);
    // 42 method calls per user, each complete with both result and updated.
    let calls: u64 =
        ["call removeAllTasks", "call insertTask", "call removeTask"].iter().map(|n| step(&doc, n).count).sum();
    assert_eq!(calls, 420);
    assert_eq!(step(&doc, "call insertTask").count, 200);
    assert_eq!(server.app().methods_called.load(Ordering::Relaxed), 420, "the server saw the same calls");
    for n in ["call removeAllTasks", "call insertTask", "call removeTask"] {
        assert!(step(&doc, n).to_result.is_some() && step(&doc, n).to_updated.is_some());
    }
    // Every insert seen by every subscribed user: 10 x 200 added messages carrying createdAt.
    assert_eq!(hist_count(&doc.histograms.fanout_us), 2000);
    // Each user's own 20 inserts and 20 removals seen through its subscription.
    assert_eq!(step(&doc, "waitFor taskCollection").count, 400);
    assert_eq!(hist_count(&doc.histograms.reactive_us), 400);
    assert_eq!(step(&doc, "connect").count, 10);
    assert_eq!(server.app().sessions_started.load(Ordering::Relaxed), 10);
    assert_eq!(server.app().tasks.len(), 0, "every user cleaned up");
    assert!(doc.summary.total_time_s > 8.0, "43 thinks of 200 ms per user: {}", doc.summary.total_time_s);
    assert!(o.out.contains("Reactive latency") && o.out.contains("Fan-out latency"), "{}", o.out);
    // The response time per second holds every sample of the run, each in the second it ended.
    let per_second =
        |f: &dyn Fn(&bolide::stats::vu::DdpSecond) -> Option<u64>| -> u64 { doc.timeline.iter().filter_map(f).sum() };
    for s in &doc.steps {
        let n = per_second(&|t| t.step_latency.get(&s.name).map(|l| l.count));
        assert_eq!(n, hist_count(&s.latency_histogram), "{} per second", s.name);
    }
    let all: u64 = doc.steps.iter().map(|s| hist_count(&s.latency_histogram)).sum();
    assert_eq!(per_second(&|t| t.latency.as_ref().map(|l| l.count)), all);
    assert_eq!(per_second(&|t| t.reactive.as_ref().map(|l| l.count)), 400);
    assert_eq!(per_second(&|t| t.fanout.as_ref().map(|l| l.count)), 2000);
    let busy = doc.timeline.iter().filter(|t| t.latency.is_some()).count();
    assert!(busy >= 8, "steps end in most of the run's seconds: {busy}");
    for l in doc.timeline.iter().filter_map(|t| t.latency.as_ref()) {
        assert!(l.p50_us <= l.p99_us && l.p99_us <= l.max_us && l.histogram.is_none(), "{l:?}");
    }
}

#[test]
fn tasks_reactive_push_websocket() {
    tasks_reactive_exact(Reactivity::Push, "websocket");
}

#[test]
fn tasks_reactive_push_sockjs() {
    tasks_reactive_exact(Reactivity::Push, "sockjs");
}

#[test]
fn tasks_reactive_poll_websocket() {
    tasks_reactive_exact(Reactivity::POLL, "websocket");
}

#[test]
fn tasks_reactive_poll_sockjs() {
    tasks_reactive_exact(Reactivity::POLL, "sockjs");
}

#[test]
fn tasks_nonreactive_exact_counts() {
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let server = server(reactivity);
        let (o, doc) = run(&[
            "tasks-nonreactive",
            "--target",
            &server.base_url(),
            "--arrival-rate",
            "200",
            "-d",
            "50ms",
            "--think",
            "0",
        ]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        assert_eq!(
            (doc.summary.users.completed, doc.summary.step_errors),
            (10, 0),
            "{:?}",
            doc.summary.errors_by_class
        );
        // 85 calls per user; the fetchTasks after each insert and removal checked its result.
        assert_eq!(server.app().methods_called.load(Ordering::Relaxed), 850);
        assert_eq!(step(&doc, "call fetchTasks").count, 10 * 43);
        assert_eq!(step(&doc, "unsubscribe fetchTasks").count, 10);
        assert!(doc.summary.reactive.is_none(), "no subscription, no reactive latency");
    }
}

#[test]
fn sub_churn_counts_subscriptions() {
    let server = server(Reactivity::Push);
    let (o, doc) = run(&["sub-churn", "--target", &server.base_url(), "--arrival-rate", "100", "-d", "50ms"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(doc.summary.users.completed, 5);
    assert_eq!(step(&doc, "subscribe fetchTasks").count, 50);
    assert!(step(&doc, "subscribe fetchTasks").per_minute > 0.0);
    assert_eq!(server.app().sessions_started.load(Ordering::Relaxed), 50);
}

fn write_scenario(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("scenario.yml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn every_step_kind_from_a_file() {
    let server = Server::start(Config {
        ddp: DdpConfig {
            users: vec![("ann".into(), "pw-ann".into()), ("bob".into(), "pw-bob".into())],
            ..DdpConfig::default()
        },
        ..Config::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), "ann,pw-ann\nbob,pw-bob\n").unwrap();
    let text = format!(
        r#"config:
  target: {target}
  phases:
    - arrivalCount: 4
      duration: 200ms
  variables:
    color: [red, blue]
  payload:
    path: users.csv
    fields: [username, password]
  ddp:
    transport: sockjs
    stepTimeout: 5s
scenarios:
  - name: everything
    flow:
      - get: {{ url: /ok, expect: 200 }}
      - post: {{ url: /status/201, json: {{ a: 1 }}, expect: {{ statusCode: 201 }} }}
      - connect
      - login: {{ user: "{{{{ username }}}}", password: "{{{{ password }}}}" }}
      - login: {{ resume: "{{{{ loginToken }}}}" }}
      - subscribe: {{ name: fetchTasks, capture: subId }}
      - loop:
          - call:
              method: insertTask
              params: [{{ description: "{{{{ color }}}} {{{{ $loopElement }}}}", sessionId: "{{{{ $vuId }}}}" }}]
              capture: {{ as: ids, append: true }}
          - waitFor: {{ collection: taskCollection, where: {{ description: "{{{{ color }}}} {{{{ $loopElement }}}}" }} }}
        over: [a, b, c]
      - call:
          method: fetchTasks
          expect: {{ contains: {{ sessionId: "{{{{ $vuId }}}}" }} }}
          capture: {{ as: first, path: "0._id" }}
      - think: {{ min: 10ms, max: 30ms }}
      - call: {{ method: removeAllTasks, params: {{ sessionId: "{{{{ $vuId }}}}" }} }}
        label: cleanup
      - waitFor: {{ collection: taskCollection, where: {{ sessionId: "{{{{ $vuId }}}}" }}, until: disappears }}
      - unsubscribe: fetchTasks
      - disconnect
"#,
        target = server.base_url()
    );
    let path = write_scenario(&dir, &text);
    let (o, doc) = run(&[&path]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!(
        (doc.summary.users.launched, doc.summary.users.completed),
        (4, 4),
        "{:?}\n{}",
        doc.summary.errors_by_class,
        o.err
    );
    for (name, n) in [
        ("GET /ok", 4),
        ("POST /status/201", 4),
        ("connect", 4),
        ("login", 8),
        ("subscribe fetchTasks", 4),
        ("call insertTask", 12),
        ("waitFor taskCollection", 16),
        ("call fetchTasks", 4),
        ("cleanup", 4),
        ("unsubscribe fetchTasks", 4),
        ("disconnect", 4),
    ] {
        assert_eq!(step(&doc, name).count, n, "{name}");
    }
    assert_eq!(doc.settings.transport, "sockjs");
    assert_eq!(server.app().tasks.len(), 0);
}

#[test]
fn failures_are_counted_by_class() {
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    // Each row: a step that fails, its error class.
    let rows = [
        ("- call: {method: noSuchMethod}", "ddp_error"),
        ("- subscribe: noSuchPublication", "nosub"),
        ("- call: {method: bolide.sleep, params: {ms: 2000}, timeout: 200ms}", "timeout"),
        ("- call: {method: fetchTasks, expect: {contains: {sessionId: nobody}}}", "expect"),
        ("- waitFor: {collection: taskCollection, where: {description: never}, timeout: 100ms}", "timeout"),
        ("- get: {url: /status/500}", "status"),
        ("- login: {user: ann, password: wrong}", "ddp_error"),
    ];
    for (i, (bad, class)) in rows.into_iter().enumerate() {
        let text = format!(
            "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\nscenarios:\n  - flow:\n      - connect\n      {bad}\n      - disconnect\n",
            server.base_url()
        );
        let path = write_scenario(&dir, &text);
        let (o, doc) = run(&[&path]);
        assert_eq!(o.code, 0, "row {i}: target failures are data\n{}", o.err);
        assert_eq!((doc.summary.users.failed, doc.summary.users.completed), (2, 0), "row {i}");
        assert_eq!(doc.summary.errors_by_class.get(class), Some(&2), "row {i}: {:?}", doc.summary.errors_by_class);
        assert_eq!(step(&doc, "disconnect").count, 0, "row {i}: a failed user stops");
        assert!(o.err.contains(&format!("first {class} error")), "row {i}: {}", o.err);
        // A timed-out step stays in the step's latency at (about) its timeout; other failures
        // have no latency to record.
        let failed = doc.steps.iter().find(|s| s.errors > 0).unwrap();
        let samples = hist_count(&failed.latency_histogram);
        if class == "timeout" {
            assert_eq!(samples, 2, "row {i}");
            assert!(failed.latency.as_ref().unwrap().p50_us >= 100_000, "row {i}: {:?}", failed.latency);
        } else if class != "expect" {
            assert_eq!(samples, 0, "row {i}");
            // No sample: null in the document and "no sample" in the summary, never zeros.
            assert_eq!(failed.latency, None, "row {i}");
            assert!(o.out.contains("no sample: no attempt succeeded"), "row {i}: {}", o.out);
        }
    }
}

/// A server's error reason carrying terminal escapes (an OSC window title, a clear screen,
/// colours, a bell): the server echoes the method's name in its "not found" reason, and what
/// reaches the terminal and the document is the escapes written out, never the bytes.
#[test]
fn a_server_s_error_reason_reaches_no_terminal_raw() {
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      \
         - call: {{method: \"x\\e]0;pwned\\a\\e[2J\\e[31mred\"}}\n        label: bad call\n",
        server.base_url()
    );
    let path = write_scenario(&dir, &text);
    let (o, doc) = run(&[&path]);
    assert_eq!(doc.summary.errors_by_class.get("ddp_error"), Some(&1), "{}", o.err);
    let json = serde_json::to_string(&doc).unwrap();
    for (what, shown) in [("stdout", &o.out), ("stderr", &o.err), ("document", &json)] {
        let raw = shown.contains('\u{1b}') || shown.contains('\u{7}') || shown.contains("\\u001b");
        assert!(!raw, "{what} holds a raw escape: {shown:?}");
    }
    assert!(o.err.contains("Method 'x\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{1b}[31mred' not found"), "{}", o.err);
}

#[test]
fn a_server_that_goes_away_mid_run() {
    let server = server(Reactivity::Push);
    let target = server.base_url();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: {target}\n  phases: [{{duration: 100ms, arrivalCount: 3}}]\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - call: {{method: bolide.sleep, params: {{ms: 3000}}}}\n      - disconnect\n"
    );
    let path = write_scenario(&dir, &text);
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        server.shutdown();
    });
    let begin = Instant::now();
    let (o, doc) = run(&[&path]);
    stopper.join().unwrap();
    assert!(begin.elapsed() < Duration::from_secs(10));
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!((doc.summary.users.launched, doc.summary.users.failed), (3, 3));
    assert_eq!(doc.summary.errors_by_class.get("closed"), Some(&3), "{:?}", doc.summary.errors_by_class);
}

#[test]
fn max_vusers_skips_arrivals() {
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 300ms, arrivalCount: 6}}]\n  maxVusers: 2\nscenarios:\n  - flow:\n      - connect\n      - think: 1s\n      - disconnect\n",
        server.base_url()
    );
    let (o, doc) = run(&[&write_scenario(&dir, &text), "-t", "1"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!((doc.summary.users.launched, doc.summary.users.skipped, doc.summary.users.completed), (2, 4, 2));
    assert!(o.out.contains("4 skipped (maxVusers)"), "{}", o.out);
}

#[test]
fn broken_ensure_exits_1() {
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\n  ensure:\n    maxErrorRate: 1\n    steps:\n      call bolide.sleep: {{p99: 50}}\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: bolide.sleep, params: {{ms: 150}}}}\n",
        server.base_url()
    );
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(o.code, 1, "{}", o.out);
    let e = &doc.thresholds;
    assert_eq!(e.len(), 2);
    assert_eq!(
        (e[0].threshold.as_str(), e[1].threshold.as_str()),
        ("error_rate<=1%", "step[\"call bolide.sleep\"].p99<=50ms")
    );
    assert!(e[0].ok, "no errors: {e:?}");
    assert!(!e[1].ok && e[1].value.unwrap() >= 150.0 && e[1].bound == 50.0, "{e:?}");
    assert!(o.out.contains("BROKEN"), "{}", o.out);
}

#[test]
fn ensure_on_a_step_without_samples_fails_and_says_why() {
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    // Every call fails at once (404): the step has no sample, so its p95 limit cannot pass.
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\n  ensure:\n    steps:\n      call noSuchMethod: {{p95: 100}}\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: noSuchMethod}}\n",
        server.base_url()
    );
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(o.code, 1, "{}", o.out);
    let e = &doc.thresholds[0];
    assert!(!e.ok && e.value.is_none(), "{e:?}");
    assert!(e.why.as_deref().unwrap().contains("no sample of call noSuchMethod"), "{e:?}");
    assert!(o.out.contains("no sample of call noSuchMethod") && o.out.contains("BROKEN"), "{}", o.out);
    assert!(!o.out.contains("0.00 ms"), "{}", o.out);
}

#[test]
fn unreachable_target_exits_3_and_bad_input_exits_2() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let o = bolide(&["run", "tasks-reactive", "--target", &url]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains("nothing answers"), "{}", o.err);
    // Each row: arguments, words of the message.
    let rows: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "tasks-reactiv"], "did you mean the built-in \"tasks-reactive\""),
        (vec!["run", "tasks-reactive", "--arrival-rate", "0"], "--arrival-rate must be at least one a day"),
        (vec!["run", "tasks-reactive", "--target", "ftp://x/"], "scheme ftp://"),
        (vec!["run", "tasks-reactive", "--think", "soon"], "--think \"soon\""),
        (vec!["run", "examples-not-here.yml"], "neither a built-in scenario nor a file"),
    ];
    for (args, words) in rows {
        let o = bolide(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(words), "{args:?}: {}", o.err);
    }
}

#[test]
fn the_examples_are_the_builtins() {
    use bolide::scenario::{builtin, yaml};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in builtin::NAMES {
        let from_file = yaml::load_file(&root.join(format!("{name}.yml"))).unwrap_or_else(|e| panic!("{e}"));
        let built = builtin::by_name(name, &builtin::Knobs::default()).unwrap();
        assert_eq!(from_file, built, "examples/{name}.yml differs from the built-in");
    }
}

/// A fake DDP server over raw WebSocket: `script` gets each connection's text messages and answers.
fn fake_ddp(script: fn(usize, &str) -> Vec<String>) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use ddp::ws::{self, Incoming, Opcode};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    // Connections are numbered in the order their WebSocket handshakes arrive (a plain TCP probe
    // does not count).
    let handshakes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let log = std::sync::Arc::clone(&log);
            let handshakes = std::sync::Arc::clone(&handshakes);
            std::thread::spawn(move || {
                let mut s = s;
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let key = loop {
                    let Ok(k) = s.read(&mut chunk) else { return };
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        buf.drain(..end + 4);
                        let key = text
                            .lines()
                            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                            .unwrap_or_default()
                            .to_string();
                        break key;
                    }
                };
                let n = handshakes.fetch_add(1, Ordering::SeqCst);
                let head = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n", ws::accept_key(&key));
                let _ = s.write_all(head.as_bytes());
                let mut reader = ws::Reader::new(true, 1 << 20, false);
                loop {
                    while let Ok(Some((used, msg))) = reader.next(&mut buf) {
                        buf.drain(..used);
                        // Control frames from the client are logged as `N #kind detail`.
                        let payload = match msg {
                            Some(Incoming::Data { payload, .. }) => payload,
                            Some(Incoming::Close { code, .. }) => {
                                log.lock().unwrap().push(format!("{n} #close {}", code.unwrap_or(1005)));
                                continue;
                            }
                            Some(Incoming::Pong(p)) => {
                                log.lock().unwrap().push(format!("{n} #pong {}", String::from_utf8_lossy(&p)));
                                continue;
                            }
                            _ => continue,
                        };
                        let text = String::from_utf8_lossy(&payload).to_string();
                        log.lock().unwrap().push(format!("{n} {text}"));
                        for reply in script(n, &text) {
                            let mut wire = Vec::new();
                            if reply == "CLOSE" {
                                ws::encode_frame(&mut wire, Opcode::Close, false, &ws::close_payload(1000, ""), None);
                            } else if reply == "BADFRAME" {
                                // Reserved bits set: not WebSocket.
                                wire.extend_from_slice(&[0xF1, 0x01, b'x']);
                            } else if let Some(hex) = reply.strip_prefix("BYTES:") {
                                // Frames built by the script, written as they are.
                                wire.extend(
                                    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()),
                                );
                            } else if let Some(raw) = reply.strip_prefix("RAW:") {
                                ws::encode_frame(&mut wire, Opcode::Text, false, raw.as_bytes(), None);
                            } else {
                                ws::encode_frame(&mut wire, Opcode::Text, false, reply.as_bytes(), None);
                            }
                            let _ = s.write_all(&wire);
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn client_follows_failed_ignores_legacy_greetings_and_answers_pings() {
    // Connection 0 proposes pre2; the client must reconnect with it. Connection 1 greets the old way,
    // accepts, and pings; the client answers with the same id.
    let (url, seen) = fake_ddp(|n, text| {
        let m: serde_json::Value = serde_json::from_str(text).unwrap();
        match (n, m["msg"].as_str()) {
            (0, Some("connect")) => vec![r#"{"msg":"failed","version":"pre2"}"#.into(), "CLOSE".into()],
            (_, Some("connect")) => vec![
                r#"{"server_id":"0"}"#.into(),
                r#"{"msg":"connected","session":"s1","unknownField":true}"#.into(),
                r#"{"msg":"ping","id":"p1"}"#.into(),
            ],
            (_, Some("method")) => vec![
                format!(r#"{{"msg":"updated","methods":[{}]}}"#, m["id"]),
                format!(r#"{{"msg":"result","id":{},"result":7}}"#, m["id"]),
            ],
            _ => vec![],
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let text = format!("config:\n  target: {url}\n  phases: [{{duration: 100ms, arrivalCount: 1}}]\n  ddp: {{compression: false}}\nscenarios:\n  - flow:\n      - connect\n      - think: 200ms\n      - call: {{method: m}}\n      - disconnect\n");
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!((o.code, doc.summary.users.completed), (0, 1), "{}\n{}", o.out, o.err);
    let log: Vec<String> = seen.lock().unwrap().iter().filter(|l| !l.contains(" #")).cloned().collect();
    assert_eq!(log[0], r#"0 {"msg":"connect","version":"1","support":["1","pre2","pre1"]}"#);
    assert_eq!(log[1], r#"1 {"msg":"connect","version":"pre2","support":["1","pre2","pre1"]}"#);
    assert!(log.contains(&r#"1 {"msg":"pong","id":"p1"}"#.to_string()), "{log:?}");
    assert!(log.contains(&r#"1 {"msg":"method","method":"m","params":[],"id":"1"}"#.to_string()), "{log:?}");
    assert_eq!(doc.summary.pings_answered, 1);
}

/// Inserts a task from outside (a minimal DDP client on a raw WebSocket).
fn insert_from_outside(addr: std::net::SocketAddr, description: &str) {
    use ddp::ws::{self, Opcode};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let key = ws::client_key();
    write!(s, "GET /websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let send = |s: &mut std::net::TcpStream, text: &str| {
        let mut wire = Vec::new();
        ws::encode_frame(&mut wire, Opcode::Text, false, text.as_bytes(), Some([1, 2, 3, 4]));
        s.write_all(&wire).unwrap();
    };
    send(&mut s, r#"{"msg":"connect","version":"1","support":["1"]}"#);
    let call = format!(
        r#"{{"msg":"method","method":"insertTask","params":[{{"description":"{description}","sessionId":"outside"}}],"id":"1"}}"#
    );
    send(&mut s, &call);
    // Read until the result arrives, so the insert has happened.
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(r#""msg":"result""#) {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "server closed");
        got.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn fan_out_counts_new_writes_only_never_a_documents_age() {
    let server = server(Reactivity::Push);
    // Documents that are seconds old when the users subscribe: their age is no fan-out.
    for i in 0..20 {
        insert_from_outside(server.addr(), &format!("old {i}"));
    }
    std::thread::sleep(Duration::from_millis(1_500));
    let (o, doc) = run(&[
        "tasks-reactive",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "100",
        "-d",
        "20ms",
        "--think",
        "20ms",
        "--tasks",
        "3",
        "-t",
        "1",
    ]);
    assert_eq!((o.code, doc.summary.users.completed), (0, 2), "{}\n{}", o.out, o.err);
    // Each user's own 3 inserts at least, at most every insert seen by both users.
    let fanout = doc.summary.fanout.as_ref().expect("fan-out measured");
    let seen = hist_count(&doc.histograms.fanout_us);
    assert!((6..=12).contains(&seen), "{seen} fan-out samples");
    assert!(fanout.max_us < 1_000_000, "the 1.5 s old documents stayed out: {fanout:?}");
    // A non-reactive user's page-load data (subscribe, then unsubscribe) is no fan-out either;
    // one user, so no other user's write can reach it while it is briefly subscribed.
    let (o, doc) = run(&[
        "tasks-nonreactive",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "100",
        "-d",
        "10ms",
        "--think",
        "0",
    ]);
    assert_eq!((o.code, doc.summary.users.completed), (0, 1), "{}\n{}", o.out, o.err);
    assert_eq!(hist_count(&doc.histograms.fanout_us), 0);
    assert!(doc.summary.fanout.is_none());
}

#[test]
fn wait_for_appears_and_changes_after_the_users_own_write() {
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let server = server(reactivity);
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - call: {{method: insertTask, params: [{{description: mine, sessionId: \"{{{{ $vuId }}}}\"}}], capture: id}}\n      - waitFor: {{collection: taskCollection, where: {{_id: \"{{{{ id }}}}\"}}, until: appears, timeout: 2s}}\n      - call: {{method: updateTask, params: [{{taskId: \"{{{{ id }}}}\", description: edited}}]}}\n      - waitFor: {{collection: taskCollection, where: {{_id: \"{{{{ id }}}}\", description: edited}}, until: changes, timeout: 2s}}\n      - call: {{method: removeTask, params: [{{taskId: \"{{{{ id }}}}\"}}]}}\n      - waitFor: {{collection: taskCollection, where: {{_id: \"{{{{ id }}}}\"}}, until: disappears, timeout: 2s}}\n      - disconnect\n",
            server.base_url()
        );
        let (o, doc) = run(&[&write_scenario(&dir, &text)]);
        assert_eq!(o.code, 0, "{reactivity:?}: {}\n{}", o.out, o.err);
        assert_eq!((doc.summary.users.completed, doc.summary.step_errors), (2, 0), "{reactivity:?}: {}", o.err);
        assert_eq!(step(&doc, "waitFor taskCollection").count, 6);
        // Reactive latency: from each call's send to its change, three per user.
        assert_eq!(hist_count(&doc.histograms.reactive_us), 6);
        assert_eq!(server.app().tasks.len(), 0);
    }
}

#[test]
fn a_wait_for_that_times_out_says_what_the_cache_held() {
    let server = server(Reactivity::Push);
    insert_from_outside(server.addr(), "before");
    let dir = tempfile::tempdir().unwrap();
    // The document is there before the user connects, so it never "appears".
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - waitFor: {{collection: taskCollection, where: {{description: before}}, until: appears, timeout: 200ms}}\n",
        server.base_url()
    );
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(doc.summary.errors_by_class.get("timeout"), Some(&1));
    let line = o.err.lines().find(|l| l.starts_with("first timeout error")).unwrap_or_else(|| panic!("{}", o.err));
    assert!(line.contains("taskCollection has 1 matching document, added"), "{line}");
    assert!(line.contains("before this step began"), "{line}");
    assert_eq!(line.matches("waitFor taskCollection").count(), 1, "no repeated prefix: {line}");
}

#[test]
fn wait_for_sees_documents_that_arrive_while_it_waits() {
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let server = server(reactivity);
        let addr = server.addr();
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - waitFor: {{collection: taskCollection, where: {{description: later}}, until: appears, timeout: 5s}}\n      - waitFor: {{collection: taskCollection, where: {{sessionId: outside}}, until: disappears, timeout: 5s}}\n      - disconnect\n",
            server.base_url()
        );
        let path = write_scenario(&dir, &text);
        // The insert comes 300 ms after the user's subscription is ready (whenever a busy machine
        // gets it there), the removal 500 ms after the insert.
        let ready = {
            let app = std::sync::Arc::clone(server.app());
            move || {
                let began = std::time::Instant::now();
                while app.subscriptions_ready.load(std::sync::atomic::Ordering::Relaxed) == 0
                    && began.elapsed() < Duration::from_secs(20)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        let (inserted_tx, inserted_rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            ready();
            std::thread::sleep(Duration::from_millis(300));
            insert_from_outside(addr, "later");
            let _ = inserted_tx.send(());
        });
        let remover = {
            let app = std::sync::Arc::clone(server.app());
            std::thread::spawn(move || {
                let _ = inserted_rx.recv_timeout(Duration::from_secs(30));
                std::thread::sleep(Duration::from_millis(500));
                app.tasks.remove_where(|t| t.session_id == "outside", &mut refserver::tasks::Fence::default());
                if let Reactivity::Poll { .. } = app.tasks.reactivity() {
                    app.tasks.poll();
                }
            })
        };
        let (o, doc) = run(&[&path]);
        writer.join().unwrap();
        remover.join().unwrap();
        assert_eq!(
            (o.code, doc.summary.users.completed),
            (0, 1),
            "{reactivity:?}: {:?}\n{}",
            doc.summary.errors_by_class,
            o.err
        );
        let waited = step(&doc, "waitFor taskCollection");
        assert_eq!(waited.count, 2);
        let max_us = waited.latency.as_ref().map_or(0, |l| l.max_us);
        assert!(max_us >= 200_000, "the first wait lasted until the insert: {:?}", waited.latency);
    }
}

#[test]
fn reconnects_when_the_scenario_says_so() {
    let first = server(Reactivity::Push);
    let addr = first.addr();
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: {}\n  phases: [{{duration: 100ms, arrivalCount: 1}}]\n  ddp: {{reconnect: true}}\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - call: {{method: bolide.sleep, params: {{ms: 1500}}}}\n      - disconnect\n",
        first.base_url()
    );
    let path = write_scenario(&dir, &text);
    // The server goes away during the call and comes back on the same port.
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        first.shutdown();
        Server::start(Config { addr, ..Config::default() }).unwrap()
    });
    let (o, doc) = run(&[&path]);
    let second = restarter.join().unwrap();
    assert_eq!((o.code, doc.summary.users.completed), (0, 1), "{:?}\n{}", doc.summary.errors_by_class, o.err);
    // The call the restart cut was sent again: it counts once, as what its resend got; the cut
    // is counted apart (the seconds' `resent`), not as a failed step.
    assert_eq!(doc.summary.errors_by_class.get("closed"), None, "{:?}", doc.summary.errors_by_class);
    assert_eq!(doc.summary.step_errors, 0);
    assert_eq!(step(&doc, "reconnect").count, 1);
    assert_eq!(step(&doc, "call bolide.sleep").count, 1, "one call, resent once");
    assert_eq!(doc.timeline.iter().map(|s| s.counts.resent).sum::<u64>(), 1);
    assert_eq!(second.app().sessions_started.load(Ordering::Relaxed), 1, "the user came back");
    assert_eq!(second.app().methods_called.load(Ordering::Relaxed), 0, "bolide.sleep is not counted as a tasks method");
}

#[test]
fn ddp_documents_match_their_published_schema() {
    let v = common::schema::validator("ddp-result.schema.json");
    let server = server(Reactivity::Push);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let spec = format!("server=:{}", server.addr().port());
    let o = bolide(&[
        "run",
        "tasks-reactive",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "100",
        "-d",
        "30ms",
        "--think",
        "100ms",
        "--tasks",
        "3",
        "--monitor",
        &spec,
        "--monitor-interval",
        "100ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("Server") && o.out.contains("CPU avg"), "{}", o.out);
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(value["monitor"][0]["pid"], std::process::id(), "the server runs in this process");
    assert!(!value["monitor"][0]["samples"].as_array().unwrap().is_empty());
    // Strict enough to notice a broken document.
    let mut broken = value.clone();
    broken["summary"]["users"].as_object_mut().unwrap().remove("completed");
    broken["settings"]["transport"] = "pigeon".into();
    assert_eq!(v.iter_errors(&broken).count(), 2);
    // And the HTTP schema refuses it: the two kinds are told apart.
    assert!(!common::schema::validator("result.schema.json").is_valid(&value));
}

#[test]
fn a_server_speaking_garbage_is_a_protocol_error() {
    // Each method call is answered with a frame that is not JSON, or a compressed frame that was
    // never negotiated; both break the protocol.
    let (url, _) = fake_ddp(|_, text| {
        let m: serde_json::Value = serde_json::from_str(text).unwrap();
        match m["msg"].as_str() {
            Some("connect") => vec![r#"{"msg":"connected","session":"s"}"#.into()],
            Some("method") => vec!["RAW:\u{1}\u{2} not json".into()],
            _ => vec![],
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let text = format!("config:\n  target: {url}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\n  ddp: {{compression: false, stepTimeout: 3s}}\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: m}}\n");
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(doc.summary.users.failed, 2);
    // Unparsable text is counted and the call then times out (the server never answered it).
    assert_eq!(doc.summary.protocol_errors, 2, "{:?}", doc.summary);
    assert_eq!(doc.summary.errors_by_class.get("timeout"), Some(&2), "{:?}", doc.summary.errors_by_class);

    // A frame that is not WebSocket at all ends the connection: the waiting call is a protocol error.
    let (url, _) = fake_ddp(|_, text| {
        let m: serde_json::Value = serde_json::from_str(text).unwrap();
        match m["msg"].as_str() {
            Some("connect") => vec![r#"{"msg":"connected","session":"s"}"#.into()],
            Some("method") => vec!["BADFRAME".into()],
            _ => vec![],
        }
    });
    let text = format!("config:\n  target: {url}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\n  ddp: {{compression: false, stepTimeout: 3s}}\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: m}}\n");
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(doc.summary.errors_by_class.get("protocol"), Some(&2), "{:?}", doc.summary.errors_by_class);
}

/// Server frames as the fake server's script writes them (`BYTES:` + hex).
fn frames(list: &[(ddp::ws::Opcode, bool, &[u8])]) -> String {
    let mut wire = Vec::new();
    for &(opcode, fin, payload) in list {
        let start = wire.len();
        ddp::ws::encode_frame(&mut wire, opcode, false, payload, None);
        if !fin {
            wire[start] &= 0x7f;
        }
    }
    format!("BYTES:{}", wire.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

#[test]
fn client_websocket_conformance() {
    // RFC 6455 as Autobahn's client cases check it, one connection per case: a message in
    // fragments with a ping between them is read whole and the ping answered; a close from the
    // server is echoed with its code; invalid UTF-8 is answered with 1007, a close code no peer may
    // send with 1002, a close reason that is not UTF-8 with 1007.
    use ddp::ws::{close_payload, Opcode};
    let (url, seen) = fake_ddp(|n, text| {
        let m: serde_json::Value = serde_json::from_str(text).unwrap();
        if m["msg"] == "connect" {
            return vec![r#"{"msg":"connected","session":"s"}"#.into()];
        }
        if m["msg"] != "method" {
            return vec![];
        }
        let updated = format!(r#"{{"msg":"updated","methods":[{}]}}"#, m["id"]);
        let result = format!(r#"{{"msg":"result","id":{},"result":1}}"#, m["id"]);
        let (head, tail) = result.split_at(10);
        let mut reason = close_payload(1000, "");
        reason.extend_from_slice(&[0xce, 0xba, 0xff]);
        match n {
            0 => vec![
                updated,
                frames(&[
                    (Opcode::Text, false, head.as_bytes()),
                    (Opcode::Ping, true, b"mid"),
                    (Opcode::Continuation, true, tail.as_bytes()),
                ]),
            ],
            1 => vec![frames(&[(Opcode::Close, true, &close_payload(1001, "going away"))])],
            2 => vec![frames(&[(Opcode::Text, true, b"{\"msg\":\"\xff\"}")])],
            3 => vec![frames(&[(Opcode::Close, true, &[0x03, 0xed])])],
            _ => vec![frames(&[(Opcode::Close, true, &reason)])],
        }
    });
    let dir = tempfile::tempdir().unwrap();
    // One user at a time, so that connection N is case N.
    let text = format!("config:\n  target: {url}\n  phases: [{{duration: 2500ms, arrivalCount: 5}}]\n  ddp: {{compression: false, stepTimeout: 2s}}\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: m}}\n      - disconnect\n");
    let (o, doc) = run(&[&write_scenario(&dir, &text)]);
    assert_eq!(o.code, 0, "{}", o.err);
    let log = seen.lock().unwrap().clone();
    let control = |n: usize| -> Vec<String> {
        log.iter().filter(|l| l.starts_with(&format!("{n} #"))).map(|l| l[2..].to_string()).collect()
    };
    assert_eq!(control(0), ["#pong mid", "#close 1000"], "{log:?}");
    assert_eq!(control(1), ["#close 1001"], "{log:?}");
    assert_eq!(control(2), ["#close 1007"], "{log:?}");
    assert_eq!(control(3), ["#close 1002"], "{log:?}");
    assert_eq!(control(4), ["#close 1007"], "{log:?}");
    assert_eq!((doc.summary.users.completed, doc.summary.users.failed), (1, 4), "{:?}", doc.summary.users);
}

#[test]
fn the_churn_built_ins_subscribe_to_the_publication_the_command_line_names() {
    // The probe against Meteor: cluster-churn subscribed to `payload`, which only the reference
    // server publishes, so every user failed with nosub. --publication names the app's own.
    let s = server(Reactivity::Push);
    let target = s.base_url();
    let (o, doc) =
        run(&["cluster-churn", "--target", &target, "--users", "2", "-d", "1s", "--publication", "fetchTasks"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(doc.summary.users.failed, 0, "{:?}", doc.summary.users);
    let sub = step(&doc, "subscribe fetchTasks");
    assert!(sub.count >= 2 && sub.errors == 0, "{sub:?}");
    // Its arguments, as JSON; a publication the server does not have: the users fail, and the
    // first error says what the server answered.
    let (o, doc) = run(&[
        "sub-churn",
        "--target",
        &target,
        "--arrival-rate",
        "2",
        "-d",
        "1s",
        "--publication",
        "nope",
        "--publication-args",
        "[\"room-1\", 50]",
    ]);
    assert_eq!(o.code, 0, "target failures are data: {}", o.err);
    assert!(doc.summary.users.failed >= 1 && doc.summary.users.completed == 0, "{:?}", doc.summary.users);
    assert!(o.err.contains("Subscription 'nope' not found"), "{}", o.err);
    // Refusals: arguments that are not a JSON array, a built-in that does not take it.
    for (args, says) in [
        (
            &["sub-churn", "--publication", "x", "--publication-args", "{}"][..],
            "--publication-args must be a JSON array",
        ),
        (&["sub-churn", "--publication", "x", "--publication-args", "[1"][..], "--publication-args is not JSON"),
        (&["tasks-reactive", "--publication", "x"][..], "--publication: tasks-reactive does not take it"),
        (&["sub-churn", "--publication-args", "[]"][..], "--publication"),
    ] {
        let mut argv = vec!["run", "--target", &target];
        argv.extend_from_slice(args);
        let o = bolide(&argv);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(says), "{args:?}: {}", o.err);
    }
}

//! The reactive-correctness audit (`--audit`, `audit:` steps) end to end: against the reference
//! server (push and poll reactivity), through a proxy that loses one in N document messages on
//! their way to the users (the audit fails and names the lost documents), one that only delays
//! them (it passes), and a target that dies for good (incomplete, exit 4: never a pass); against
//! Meteor's own server (raw WebSocket, SockJS's websocket, xhr-polling and xhr-streaming,
//! compression on and off); and with faults seeded into the run (restart, stall, drop, kill).

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bolide::stats::audit::{Kind, Outcome};
use bolide::stats::vu::VuDoc;
use common::*;
use refserver::{Config, DdpConfig, Reactivity, Server};

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/audit-tasks.yml");

/// One test of this file at a time, held from its first line: the fault tests count the users
/// that reconnect between one fault and the next, which the other tests' runs sharing the
/// machine's two cores delayed past the next fault (a user finds its connection closed only at its
/// next step, often after an audit checkpoint's wait); a test whose target dies on a timer starts
/// that timer only once it holds the turn.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn server(reactivity: Reactivity) -> Server {
    Server::start(Config { ddp: DdpConfig { reactivity, ..DdpConfig::default() }, threads: 2, ..Config::default() })
        .unwrap()
}

/// Runs `bolide run ARGS... --json TMP`; the outcome and the document.
fn run(args: &[&str]) -> (Outcome_, VuDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut argv = vec!["run", "--json", json.to_str().unwrap()];
    argv.extend_from_slice(args);
    let o = bolide(&argv);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document; {}\n{}", o.out, o.err));
    let problems = schema_problems("ddp-result.schema.json", &text);
    assert!(problems.is_empty(), "{problems:?}");
    (o, VuDoc::from_json(&text).unwrap())
}

type Outcome_ = common::Outcome;

fn audit(doc: &VuDoc) -> &bolide::stats::audit::AuditSection {
    doc.audit.as_ref().expect("the document has an audit section")
}

/// Every walk checked at both checkpoints of the scenario, every check agreed.
fn passed_everywhere(o: &Outcome_, doc: &VuDoc) {
    let a = audit(doc);
    let u = &doc.summary.users;
    assert_eq!(o.code, 0, "{}\n{}\n{:?}", o.out, o.err, a);
    assert_eq!(a.outcome, Outcome::Passed, "{a:?}");
    assert_eq!((u.failed, doc.summary.step_errors), (0, 0), "{}", o.out);
    assert!(u.completed >= 20, "every looping user walked at least once: {u:?}");
    assert_eq!(a.checks, 2 * u.completed, "two checkpoints per walk");
    assert_eq!((a.agreed, a.failed, a.incomplete, a.unreached, a.differences), (a.checks, 0, 0, 0, 0));
    let names: Vec<&str> = a.checkpoints.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["audit after the writes", "audit after removeAllTasks"]);
    assert!(a.truth_reads >= 1 && a.messages_in > 0, "the truth was read over connections of its own: {a:?}");
    assert!(o.out.contains("Audit         passed: "), "{}", o.out);
}

#[test]
fn inserts_renames_and_removes_pass_the_audit_on_the_reference_server() {
    let _turn = one_at_a_time();
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let server = server(reactivity);
        let (o, doc) = run(&[SCENARIO, "--target", &server.base_url(), "-d", "2s", "-t", "2"]);
        passed_everywhere(&o, &doc);
        // The users' calls reached the server (the audit's truth reads call nothing).
        let calls: u64 = doc.steps.iter().filter(|s| s.name.starts_with("call ")).map(|s| s.count).sum();
        assert_eq!(server.app().methods_called.load(Ordering::Relaxed), calls);
    }
}

#[test]
fn the_built_in_workloads_pass_with_audit_in_the_open_model() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    let url = server.base_url();
    let (o, doc) = run(&[
        "tasks-reactive",
        "--target",
        &url,
        "--arrival-rate",
        "10",
        "-d",
        "1s",
        "--think",
        "20ms",
        "--tasks",
        "3",
        "--audit",
    ]);
    let a = audit(&doc);
    assert_eq!((o.code, a.outcome), (0, Outcome::Passed), "{}\n{}", o.out, o.err);
    assert_eq!(a.checks, doc.summary.users.completed);
    assert_eq!(a.checkpoints.len(), 1);
    // A flow without a cache of its own keeps one to be audited.
    let (o, doc) = run(&["tasks-nonreactive", "--target", &url, "--users", "3", "-d", "1s", "--think", "0", "--audit"]);
    assert_eq!((o.code, audit(&doc).outcome), (0, Outcome::Passed), "{}\n{}", o.out, o.err);
}

#[test]
fn an_audit_without_a_cache_or_a_subscription_is_a_usage_error() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yml");
    std::fs::write(
        &file,
        "config:\n  target: http://127.0.0.1:9\n  phases: [{duration: 1, arrivalRate: 1}]\n  ddp: {cache: false}\n\
         scenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - audit: taskCollection\n",
    )
    .unwrap();
    let o = bolide(&["run", file.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("it needs config.ddp.cache"), "{}", o.err);
    std::fs::write(
        &file,
        "config:\n  target: http://127.0.0.1:9\n  phases: [{duration: 1, arrivalRate: 1}]\n\
         scenarios:\n  - flow:\n      - connect\n      - call: {method: insertTask}\n",
    )
    .unwrap();
    let o = bolide(&["run", file.to_str().unwrap(), "--audit"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--audit: no flow subscribes"), "{}", o.err);
    // A malformed audit step says where.
    std::fs::write(
        &file,
        "config:\n  target: http://127.0.0.1:9\n  phases: [{duration: 1, arrivalRate: 1}]\n\
         scenarios:\n  - flow:\n      - connect\n      - audit: {collection: t, settle: 2s, timeout: 1s}\n",
    )
    .unwrap();
    let o = bolide(&["run", file.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("s.yml:7:") && o.err.contains("must be shorter than its timeout"), "{}", o.err);
}

/// What a [`Proxy`] loses of the server's document messages.
#[derive(Clone, Copy)]
enum Lose {
    Nothing,
    /// Every n-th document message (`added`, `changed`, `removed`) over all connections.
    EveryNth(u64),
    /// The `added` of every document whose `description` is this, on every connection, or on
    /// the proxy's first connection only.
    Added {
        description: &'static str,
        first_connection_only: bool,
    },
}

/// A WebSocket proxy between bolide and the server: the client's bytes go through as they are;
/// the server's frames are read one by one, and the document messages `lose` names are dropped
/// (their collection and id kept), the others sent on after `delay`. `kill` closes every
/// connection and stops listening, for good.
struct Proxy {
    port: u16,
    lost: Arc<Mutex<Vec<(String, String, String)>>>,
    dead: Arc<AtomicBool>,
    passed: Arc<AtomicU64>,
}

impl Proxy {
    fn start(upstream: u16, lose: Lose, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let lost = Arc::new(Mutex::new(Vec::new()));
        let dead = Arc::new(AtomicBool::new(false));
        let passed = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(AtomicU64::new(0));
        let (l, d, p) = (Arc::clone(&lost), Arc::clone(&dead), Arc::clone(&passed));
        std::thread::spawn(move || {
            let mut open: Vec<TcpStream> = Vec::new();
            let mut accepted = 0u64;
            // Bounded: the proxy lives at most a minute.
            for _ in 0..60_000 {
                if d.load(Ordering::SeqCst) {
                    for s in &open {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                    return;
                }
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                        open.push(client.try_clone().unwrap());
                        open.push(server.try_clone().unwrap());
                        let (l, p, seen) = (Arc::clone(&l), Arc::clone(&p), Arc::clone(&seen));
                        accepted += 1;
                        let lose = match lose {
                            Lose::Added { first_connection_only: true, .. } if accepted > 1 => Lose::Nothing,
                            other => other,
                        };
                        std::thread::spawn(move || relay(client, server, lose, delay, l, p, seen));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Proxy { port, lost, dead, passed }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.dead.store(true, Ordering::SeqCst);
    }
}

fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    lose: Lose,
    delay: Duration,
    lost: Arc<Mutex<Vec<(String, String, String)>>>,
    passed: Arc<AtomicU64>,
    seen: Arc<AtomicU64>,
) {
    let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    // Client to server, as it is (the upgrade request, then masked frames).
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    // Server to client: the upgrade response as it is, then frame by frame.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match server.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    assert!(!String::from_utf8_lossy(&buf[..head_end]).contains("permessage-deflate"), "run with --no-compression");
    if client.write_all(&buf[..head_end]).is_err() {
        return;
    }
    buf.drain(..head_end);
    let mut reader = ddp::ws::Reader::new(false, 64 << 20, false);
    loop {
        while let Ok(Some((used, message))) = reader.next(&mut buf) {
            buf.drain(..used);
            let mut out = Vec::new();
            match message {
                Some(ddp::ws::Incoming::Data { opcode, payload, .. }) => {
                    let text = String::from_utf8_lossy(&payload).to_string();
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                    let msg = v.get("msg").and_then(|m| m.as_str()).unwrap_or_default().to_string();
                    let drop = match lose {
                        Lose::EveryNth(every) if matches!(msg.as_str(), "added" | "changed" | "removed") => {
                            (seen.fetch_add(1, Ordering::SeqCst) + 1).is_multiple_of(every)
                        }
                        Lose::Added { description, .. } => {
                            msg == "added"
                                && v.pointer("/fields/description").and_then(|d| d.as_str()) == Some(description)
                        }
                        _ => false,
                    };
                    if drop {
                        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or_default().to_string();
                        lost.lock().unwrap().push((msg, field("collection"), field("id")));
                        continue;
                    }
                    ddp::ws::encode_frame(&mut out, opcode, false, &payload, None);
                }
                Some(ddp::ws::Incoming::Ping(p)) => {
                    ddp::ws::encode_frame(&mut out, ddp::ws::Opcode::Ping, false, &p, None)
                }
                Some(ddp::ws::Incoming::Pong(p)) => {
                    ddp::ws::encode_frame(&mut out, ddp::ws::Opcode::Pong, false, &p, None)
                }
                Some(ddp::ws::Incoming::Close { code, reason }) => {
                    let payload = ddp::ws::close_payload(code.unwrap_or(1000), &reason);
                    ddp::ws::encode_frame(&mut out, ddp::ws::Opcode::Close, false, &payload, None);
                }
                None => continue,
            }
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            if client.write_all(&out).is_err() {
                return;
            }
            passed.fetch_add(1, Ordering::Relaxed);
        }
        match server.read(&mut chunk) {
            Ok(0) | Err(_) => {
                let _ = client.shutdown(std::net::Shutdown::Both);
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn a_proxy_that_loses_document_messages_fails_the_audit_and_names_what_was_lost() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    let proxy = Proxy::start(server.addr().port(), Lose::EveryNth(7), Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let (o, doc) = run(&[
        SCENARIO,
        "--target",
        &proxy.url(),
        "--users",
        "10",
        "-d",
        "1s",
        "--no-compression",
        "--threshold",
        "audit.failed==0",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let a = audit(&doc);
    assert_eq!(o.code, 1, "a difference is exit 1\n{}\n{}", o.out, o.err);
    assert_eq!(a.outcome, Outcome::Failed, "{a:?}");
    assert!(a.failed > 0 && a.differences >= a.failed, "{a:?}");
    let lost = proxy.lost.lock().unwrap().clone();
    assert!(!lost.is_empty());
    // Every difference named is a document whose message the proxy lost.
    let lost_ids: BTreeSet<&str> = lost.iter().map(|(_, _, id)| id.as_str()).collect();
    let named: Vec<_> = a.checkpoints.iter().flat_map(|c| &c.first_differences).collect();
    assert!(!named.is_empty());
    for d in &named {
        assert_eq!(d.collection, "taskCollection");
        assert!(lost_ids.contains(d.id.as_str()), "{d:?} was not lost on the way: {lost:?}");
        // A lost `added` is a document missing from the cache (or, once its removal came, none).
        if lost.iter().all(|(m, _, id)| m == "added" && id == &d.id) {
            assert_eq!(d.kind, Kind::Missing, "{d:?}");
        }
    }
    assert!(o.out.contains("Audit         FAILED: "), "{}", o.out);
    assert!(o.out.contains(&format!("taskCollection/{}", named[0].id)), "the summary names it: {}", o.out);
    let t = &doc.thresholds[0];
    assert_eq!((t.threshold.as_str(), t.ok, t.value), ("audit.failed==0", false, Some(a.failed as f64)));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<failure type=\"audit\""), "{xml}");
    assert!(xml.contains("classname=\"bolide.run.audit\""), "{xml}");
}

#[test]
fn a_loss_every_connection_shares_is_seen_only_by_a_truth_read_around_the_proxy() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    let lose = Lose::Added { description: "Task 3", first_connection_only: false };
    let proxy = Proxy::start(server.addr().port(), lose, Duration::ZERO);
    let common = [SCENARIO, "--target", &proxy.url(), "--users", "10", "-d", "1s", "--no-compression"];
    // Through the users' path, the truth loses what the users lose: every check agrees (the
    // caveat docs/audit.md states, said on the summary); only the `removed` that later names a
    // document the cache never got breaks the protocol, and that fails the run.
    let (o, doc) = run(&common);
    let a = audit(&doc);
    assert!(!proxy.lost.lock().unwrap().is_empty(), "the proxy lost the Task 3 documents");
    assert_eq!((a.agreed, a.failed, a.differences), (a.checks, 0, 0), "{}\n{a:?}", o.out);
    let absent = doc.summary.events.get(bolide::realtime::ddp::wire::VIOLATION_REMOVED_ABSENT).copied().unwrap_or(0);
    assert!(absent > 0 && a.violations == absent, "{a:?} {:?}", doc.summary.events);
    assert_eq!((o.code, a.outcome), (1, Outcome::Failed), "{}\n{a:?}", o.out);
    assert!(o.out.contains("protocol violation(s)"), "{}", o.out);
    let truth = a.truth.as_ref().expect("where the truth was read");
    assert_eq!((truth.urls.as_slice(), truth.apart), ([proxy.url()].as_slice(), false));
    assert!(o.out.contains("truth read through the users' own target(s)"), "{}", o.out);
    // Read straight from the server, the truth has them: every user misses them after the
    // writes, and agrees again once they were removed.
    proxy.lost.lock().unwrap().clear();
    let url = format!("http://127.0.0.1:{}", server.addr().port());
    let (o, doc) = run(&[&common[..], &["--audit-truth", &url]].concat());
    let a = audit(&doc);
    assert_eq!((o.code, a.outcome), (1, Outcome::Failed), "{}\n{a:?}", o.out);
    let truth = a.truth.as_ref().unwrap();
    assert_eq!((truth.urls.as_slice(), truth.apart), ([url.clone()].as_slice(), true));
    assert!(o.out.contains(&format!("truth read at {url} (--audit-truth")), "{}", o.out);
    let (writes, removed) = (&a.checkpoints[0], &a.checkpoints[1]);
    assert_eq!(writes.name, "audit after the writes");
    assert_eq!((writes.failed, writes.incomplete), (writes.checks, 0), "every user misses the lost ones: {a:?}");
    assert_eq!(removed.agreed, removed.checks, "{a:?}");
    assert!(writes.differences >= writes.checks, "{a:?}");
    let lost: BTreeSet<String> = proxy.lost.lock().unwrap().iter().map(|(_, _, id)| id.clone()).collect();
    for d in &writes.first_differences {
        assert_eq!(d.kind, Kind::Missing, "{d:?}");
        assert!(lost.contains(&d.id), "{d:?} was not lost on the way");
    }
    // A truth URL per target, or one for all; a count in between is refused.
    let o = bolide(&["run", SCENARIO, "--target", &url, "--audit-truth", &url, "--audit-truth", &url]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--audit-truth: 2 URLs for 1 targets"), "{}", o.err);
}

#[test]
fn a_truth_that_changes_between_reads_with_no_write_is_unstable_never_agreed() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    // The truth's first read lacks the Task 3 documents, the next ones have them; the users go
    // straight to the server and hold them all along.
    let lose = Lose::Added { description: "Task 3", first_connection_only: true };
    let proxy = Proxy::start(server.addr().port(), lose, Duration::ZERO);
    let url = format!("http://127.0.0.1:{}", server.addr().port());
    let (o, doc) = run(&[
        SCENARIO,
        "--target",
        &url,
        "--audit-truth",
        &proxy.url(),
        "--users",
        "10",
        "-d",
        "1s",
        "--no-compression",
    ]);
    let a = audit(&doc);
    assert!(!proxy.lost.lock().unwrap().is_empty(), "the first truth read lost the Task 3 documents");
    assert_eq!((o.code, a.outcome), (4, Outcome::Incomplete), "{}\n{a:?}", o.out);
    assert_eq!((a.unstable, a.failed), (1, 0), "{a:?}");
    assert_eq!(a.agreed + a.incomplete, a.checks, "{a:?}");
    let reasons: Vec<&String> = a.checkpoints.iter().flat_map(|c| &c.reasons).collect();
    assert!(reasons.iter().any(|r| r.starts_with(bolide::stats::audit::TRUTH_CHANGED)), "{reasons:?}");
    assert!(o.out.contains("1 check(s) found the truth changed between two reads"), "{}", o.out);
}

const BUGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/audit-bugs.yml");

/// `bench/audit-bugs.yml` against a reference server with `bug` injected (none: an honest one),
/// over `transport`; stale-after-reconnect (and the honest server, once) with every connection
/// dropped during the users' pause, so that they resume their sessions.
fn bug_run(bug: Option<refserver::Bug>, transport: &str, drop: bool) -> (Outcome_, VuDoc) {
    let ddp = DdpConfig { bug, ..DdpConfig::default() };
    let server = Server::start(Config { ddp, threads: 2, ..Config::default() }).unwrap();
    let url = server.base_url();
    let mut args = vec![BUGS, "--target", &url, "--transport", transport];
    if drop {
        args.extend(["--fault", "drop@1500ms:100%"]);
    }
    run(&args)
}

#[test]
fn every_injected_server_bug_is_caught_over_websocket_and_sockjs_and_an_honest_server_passes() {
    let _turn = one_at_a_time();
    use refserver::Bug;
    for transport in ["websocket", "sockjs"] {
        for drop in [false, true] {
            let (o, doc) = bug_run(None, transport, drop);
            let a = audit(&doc);
            assert_eq!((o.code, a.outcome), (0, Outcome::Passed), "honest, {transport}, drop {drop}\n{}\n{a:?}", o.out);
            assert_eq!((a.violations, doc.summary.step_errors), (0, 0), "{}", o.out);
        }
        for bug in Bug::ALL {
            let (o, doc) = bug_run(Some(bug), transport, bug == Bug::StaleAfterReconnect);
            let a = audit(&doc);
            let what = format!("{} over {transport}\n{}\n{a:?}", bug.name(), o.out);
            assert_eq!((o.code, a.outcome), (1, Outcome::Failed), "{what}");
            let events = |name: &str| doc.summary.events.get(name).copied().unwrap_or(0);
            let differences: Vec<_> = a.checkpoints.iter().flat_map(|c| &c.first_differences).collect();
            // Each is caught by what it breaks: a protocol rule Meteor's client throws on, or the
            // cache against the truth, named.
            match bug {
                Bug::ReadyTwice => assert!(events(bolide::realtime::ddp::wire::VIOLATION_READY_TWICE) > 0, "{what}"),
                Bug::DupAdded => assert!(events(bolide::realtime::ddp::wire::VIOLATION_ADDED_PRESENT) > 0, "{what}"),
                Bug::LostChanged | Bug::StaleAfterReconnect => {
                    assert!(
                        differences.iter().any(|d| d.kind == Kind::Field && d.field.as_deref() == Some("description")),
                        "{what}"
                    )
                }
                Bug::LostRemoved | Bug::LimitReappear | Bug::ReadyEarly => {
                    assert!(differences.iter().any(|d| d.kind == Kind::Extra), "{what}")
                }
                Bug::Leak => {
                    assert!(differences.iter().any(|d| d.kind == Kind::Extra && d.id.starts_with("leaked-")), "{what}")
                }
            }
            if !matches!(bug, Bug::ReadyTwice | Bug::DupAdded) {
                assert!(a.failed > 0 && a.differences > 0, "{what}");
            }
        }
    }
}

#[test]
fn a_proxy_that_delays_but_loses_nothing_passes() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    let proxy = Proxy::start(server.addr().port(), Lose::Nothing, Duration::from_millis(2));
    let (o, doc) = run(&[SCENARIO, "--target", &proxy.url(), "--users", "5", "-d", "1s", "--no-compression"]);
    assert_eq!((o.code, audit(&doc).outcome), (0, Outcome::Passed), "{}\n{}", o.out, o.err);
    assert!(proxy.passed.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_target_that_dies_for_good_leaves_the_audit_incomplete_never_passed() {
    let _turn = one_at_a_time();
    let server = server(Reactivity::Push);
    let proxy = Proxy::start(server.addr().port(), Lose::Nothing, Duration::ZERO);
    let dead = Arc::clone(&proxy.dead);
    std::thread::spawn(move || {
        sleep_ms(700);
        dead.store(true, Ordering::SeqCst);
    });
    let (o, doc) = run(&[SCENARIO, "--target", &proxy.url(), "--users", "5", "-d", "2s", "--no-compression"]);
    let a = audit(&doc);
    assert_eq!(o.code, 4, "an audit that could not check is exit 4\n{}\n{}", o.out, o.err);
    assert_eq!(a.outcome, Outcome::Incomplete, "{a:?}");
    assert_eq!(a.failed, 0);
    assert!(a.unreached + a.incomplete > 0, "{a:?}");
    assert!(!a.why.is_empty() && o.out.contains("Audit         INCOMPLETE: "), "{}", o.out);
}

#[test]
fn meteors_own_server_passes_the_audit_over_each_transport_and_compression() {
    let _turn = one_at_a_time();
    let combinations = [
        ("on", "websocket"),
        ("off", "sockjs"),
        ("on", "sockjs"),
        ("off", "websocket"),
        ("on", "xhr-polling"),
        ("off", "xhr-streaming"),
    ];
    for (compression, transport) in combinations {
        let meteor = common::meteor::Meteor::start_with(&["--compression", compression]);
        let url = format!("http://127.0.0.1:{}", meteor.port);
        let (o, doc) = run(&[SCENARIO, "--target", &url, "-d", "2s", "--transport", transport]);
        passed_everywhere(&o, &doc);
        // Meteor's own counters: the users' calls, and the users' and the audit's sessions and
        // subscriptions (each truth read is one session subscribed once).
        let stats = meteor.stats();
        let steps = |name: &str| doc.steps.iter().find(|s| s.name == name).map_or(0, |s| s.count);
        let reads = audit(&doc).truth_reads;
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        assert_eq!(n(&stats["methods"]["insertTask"]), steps("call insertTask"), "{stats}");
        assert_eq!(n(&stats["methods"]["/taskCollection/updateAsync"]), steps("call /taskCollection/updateAsync"));
        assert_eq!(n(&stats["subscriptions"]["fetchTasks"]), steps("subscribe fetchTasks") + reads, "{stats}");
        assert_eq!(n(&stats["messagesIn"]["connect"]), steps("connect") + reads, "{stats}");
    }
    // The built-in tasks workloads, audited before each user leaves: 20 looping users each.
    let meteor = common::meteor::Meteor::start();
    let url = format!("http://127.0.0.1:{}", meteor.port);
    for workload in ["tasks-reactive", "tasks-nonreactive"] {
        let (o, doc) =
            run(&[workload, "--target", &url, "--users", "20", "-d", "2s", "--think", "0", "--tasks", "3", "--audit"]);
        let a = audit(&doc);
        assert_eq!((o.code, a.outcome), (0, Outcome::Passed), "{workload}\n{}\n{}", o.out, o.err);
        assert_eq!(a.checks, doc.summary.users.completed, "{workload}: one checkpoint per walk");
        assert!(a.checks >= 20, "{workload}: {a:?}");
    }
}

/// `bolide serve` on a free port, for `--spawn` (the server a fault kills and starts again).
fn spawned_reference_server() -> (Vec<String>, String) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let spawn = format!("exec {} serve --port {port}", env!("CARGO_BIN_EXE_bolide"));
    (vec!["--spawn".into(), spawn, "--ready-url".into(), format!("{url}/")], url)
}

fn with<'a>(base: &'a [String], more: &[&'a str]) -> Vec<&'a str> {
    more.iter().copied().chain(base.iter().map(String::as_str)).collect()
}

#[test]
fn users_reconnect_and_converge_after_a_restart_a_stall_and_dropped_connections() {
    let _turn = one_at_a_time();
    let (spawn, url) = spawned_reference_server();
    let args = with(
        &spawn,
        &[
            SCENARIO,
            "--target",
            &url,
            "--users",
            "10",
            "--fault",
            "restart@1s",
            // After Meteor's back-off brought the users back (its third try comes 3.6 to 6.1 s
            // after the first).
            "--fault",
            "stall@7500ms:700ms",
            "--fault",
            "drop@8500ms:50%",
            "--threshold",
            "audit.failed==0",
        ],
    );
    let (o, doc) = run(&args);
    let a = audit(&doc);
    assert_eq!(o.code, 0, "{}\n{}\n{a:?}", o.out, o.err);
    assert_eq!(a.outcome, Outcome::Passed, "{a:?}");
    let f: Vec<(&str, bool)> = doc.faults.iter().map(|f| (f.fault.as_str(), f.ok)).collect();
    assert_eq!(f, [("restart@1s", true), ("stall@7500ms:700ms", true), ("drop@8500ms:50%", true)], "{:?}", doc.faults);
    let (restart, drop) = (&doc.faults[0], &doc.faults[2]);
    assert!(restart.done.contains("started it again"), "{}", restart.done);
    // The monitor followed the server to its new process, sampled to the run's end.
    let server = doc.monitor.iter().find(|m| m.name == "server").expect("the spawned server is watched");
    let new_pid: u32 = restart.done.split("(pid ").nth(2).and_then(|t| t.split(',').next()).unwrap().parse().unwrap();
    assert_eq!(server.followed.iter().map(|f| f.1).collect::<Vec<_>>(), [new_pid], "{server:?}");
    assert_eq!((server.pid, server.vanished_s), (new_pid, None), "{server:?}");
    assert!(server.samples.iter().any(|s| s.0 > server.followed[0].0 + 1.0), "{server:?}");
    assert!(o.out.contains("(restarted at "), "{}", o.out);
    // The report's first screen: the audit's outcome, each fault, the server's card saying it
    // followed the restart.
    let facts = bolide::report::band::run_facts(&bolide::stats::doc::Doc::from(doc.clone()));
    let fact = |label: &str| facts.iter().find(|f| f.label == label).unwrap_or_else(|| panic!("no {label} card"));
    assert_eq!(fact("Audit").value, "PASSED");
    assert!(fact("Audit").detail.starts_with("0 difference(s); "), "{:?}", fact("Audit"));
    assert!(fact("Fault restart@1s").value.starts_with("done at 1.0 s"), "{:?}", fact("Fault restart@1s"));
    assert!(fact("Fault restart@1s").detail.contains("users back in "), "{:?}", fact("Fault restart@1s"));
    assert!(fact("Server CPU").detail.contains("server restarted at "), "{:?}", fact("Server CPU"));
    // Every user's session died with the server and each came back (none failed, every check
    // agreed): those mid-walk reconnected, those between two walks retried their connect.
    assert!(restart.reconnects >= 1, "{restart:?}");
    assert_eq!(doc.summary.users.failed, 0);
    assert!(restart.converged_s.is_some(), "{restart:?}");
    assert!(drop.reconnects >= 1 && drop.converged_s.is_some(), "{drop:?}");
    let reconnects: u64 = doc.timeline.iter().map(|s| s.counts.reconnects).sum();
    assert_eq!(reconnects, doc.steps.iter().find(|s| s.name == "reconnect").map_or(0, |s| s.count - s.errors));
    assert_eq!(reconnects, doc.faults.iter().map(|f| f.reconnects).sum::<u64>(), "every reconnect follows a fault");
    assert!(o.out.contains("Faults        restart@1s at "), "{}", o.out);
    // The charts mark each fault where it was done, beside the reconnections and the checks.
    let charts = bolide::report::charts::single_run(&bolide::stats::doc::Doc::from(doc.clone()));
    for id in ["faults-and-audit", "response-time"] {
        let c = charts.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no chart {id}"));
        let marks = c.series.iter().find(|s| s.label == "fault").expect("a fault series");
        let at: Vec<f64> = marks.values.iter().zip(&c.x).filter(|(v, _)| v.is_some()).map(|(_, x)| *x).collect();
        assert_eq!(at, [1.0, 7.0, 8.0], "{id}");
    }
}

#[test]
fn a_server_killed_for_good_leaves_the_audit_incomplete() {
    let _turn = one_at_a_time();
    let (spawn, url) = spawned_reference_server();
    let args = with(&spawn, &[SCENARIO, "--target", &url, "--users", "5", "-d", "2s", "--fault", "kill@700ms"]);
    let (o, doc) = run(&args);
    let a = audit(&doc);
    assert_eq!(o.code, 4, "{}\n{}", o.out, o.err);
    assert_eq!((a.outcome, a.failed), (Outcome::Incomplete, 0), "{a:?}");
    assert!(doc.faults[0].ok && doc.faults[0].done.contains("for good"), "{:?}", doc.faults);
    // Usage: a fault on the server needs one bolide started; a malformed one says its form.
    let o = bolide(&["run", SCENARIO, "--target", &url, "--fault", "restart@1s"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--fault restart@1s: acts on the server bolide starts"), "{}", o.err);
    let o = bolide(&["run", SCENARIO, "--target", &url, "--fault", "drop@1s"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("drop needs a share"), "{}", o.err);
}

/// Whether something accepts connections on `port` of 127.0.0.1.
fn answers(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_ok()
}

/// Waits (5 s at most) until nothing answers on `port`.
fn gone_from(port: u16) -> bool {
    for _ in 0..50 {
        if !answers(port) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_server_that_left_its_process_group_is_killed_with_its_tree() {
    let _turn = one_at_a_time();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    // The server leaves the group bolide made for it (a session of its own); the shell waits.
    let spawn = format!("setsid {} serve --port {port} & wait", env!("CARGO_BIN_EXE_bolide"));
    let ready = format!("{url}/");
    let args = [
        SCENARIO,
        "--target",
        &url,
        "--users",
        "5",
        "-d",
        "2s",
        "--spawn",
        &spawn,
        "--ready-url",
        &ready,
        "--fault",
        "kill@700ms",
    ];
    let (o, doc) = run(&args);
    let a = audit(&doc);
    assert!(doc.faults[0].ok && doc.faults[0].done.contains("and its tree for good"), "{:?}", doc.faults);
    assert_eq!((o.code, a.outcome), (4, Outcome::Incomplete), "the server died mid-run: {}\n{a:?}", o.out);
    assert!(gone_from(port), "the server outlived its kill and the run");
}

#[test]
fn restart_after_kill_starts_the_server_again() {
    let _turn = one_at_a_time();
    let (spawn, url) = spawned_reference_server();
    let args = with(
        &spawn,
        &[SCENARIO, "--target", &url, "--users", "5", "-d", "3s", "--fault", "kill@700ms", "--fault", "restart@1500ms"],
    );
    let (o, doc) = run(&args);
    let f: Vec<(&str, bool)> = doc.faults.iter().map(|f| (f.fault.as_str(), f.ok)).collect();
    assert_eq!(f, [("kill@700ms", true), ("restart@1500ms", true)], "{}\n{:?}", o.out, doc.faults);
    let restart = &doc.faults[1].done;
    assert!(restart.contains("was not running (killed before) and started it again"), "{restart}");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    assert!(gone_from(port), "bolide stops the server it started again");
}

#[test]
fn a_spawned_server_ends_when_bolide_is_killed_outright() {
    let _turn = one_at_a_time();
    let (spawn, url) = spawned_reference_server();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let mut args = vec!["run".to_string(), SCENARIO.into(), "--target".into(), url.clone()];
    args.extend(["--users", "2", "-d", "30s"].map(String::from));
    args.extend(spawn);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Bounded: the server is up within 20 s, or the test fails.
    let mut up = false;
    for _ in 0..200 {
        if answers(port) {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL: bolide runs no code of its own after it.
    let _ = child.wait();
    assert!(up, "the spawned server never answered");
    assert!(gone_from(port), "the spawned server outlived a SIGKILLed bolide");
}

#[test]
fn meteors_server_slow_to_restart_has_every_user_back_and_no_step_failed() {
    let _turn = one_at_a_time();
    let dir = meteor_server_dir();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    // A real app takes seconds to come back: this one's start waits 5 s, so the users' first
    // tries are refused and Meteor's back-off (4.8 s, then 10.6 s) brings them back.
    let spawn = format!("sleep 5 && cd '{}' && exec node server.js --port {port} --quiet", dir.display());
    let ready = format!("{url}/");
    // The example's walks, for 45 s: long enough for the back-off to bring every user back.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("audit-45s.yml");
    let text = std::fs::read_to_string(SCENARIO).unwrap();
    assert!(text.contains("    - duration: 10\n"));
    std::fs::write(&scenario, text.replace("    - duration: 10\n", "    - duration: 45\n")).unwrap();
    let (o, doc) = run(&[
        scenario.to_str().unwrap(),
        "--target",
        &url,
        "--users",
        "10",
        "--spawn",
        &spawn,
        "--ready-url",
        &ready,
        "--fault",
        "restart@3s",
        "--threshold",
        "error_rate==0",
    ]);
    let a = audit(&doc);
    assert_eq!((o.code, a.outcome), (0, Outcome::Passed), "{}\n{}\n{a:?}", o.out, o.err);
    let restart = &doc.faults[0];
    assert!(restart.ok && restart.done.contains("started it again"), "{restart:?}");
    // The users mid-walk at the kill reconnect (those between two walks open their next one,
    // retrying their `connect`): which are which is chance, so at least one reconnected.
    assert!(restart.reconnects >= 1, "{restart:?}");
    assert!(restart.back_s.is_some_and(|s| s >= 5.0), "no user was back before the server: {restart:?}");
    // Every user came back: none failed (a user still away at its phase's end fails), no step
    // failed for the cut, and every check agreed.
    assert_eq!(doc.summary.step_errors, 0, "no step failed for the cut: {:?}", doc.summary.errors_by_class);
    assert_eq!(doc.summary.users.failed, 0);
    assert_eq!((a.agreed, a.incomplete), (a.checks, 0), "{a:?}");
    let reconnect = doc.steps.iter().find(|s| s.name == "reconnect").expect("a reconnect step");
    assert_eq!((reconnect.count, reconnect.errors), (restart.reconnects, 0));
    // The restarted server was sampled after it came back.
    let server = doc.monitor.iter().find(|m| m.name == "server").unwrap();
    assert_eq!((server.followed.len(), server.vanished_s), (1, None), "{server:?}");
    assert!(server.samples.iter().any(|s| s.0 > server.followed[0].0 + 5.0), "{server:?}");
}

#[test]
fn meteors_own_server_converges_after_a_restart_a_stall_and_dropped_connections() {
    let _turn = one_at_a_time();
    let dir = meteor_server_dir();
    for transport in ["websocket", "sockjs"] {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}");
        let spawn = format!("cd '{}' && exec node server.js --port {port} --quiet", dir.display());
        let (o, doc) = run(&[
            SCENARIO,
            "--target",
            &url,
            "--transport",
            transport,
            "--users",
            "20",
            "-d",
            "10s",
            "--spawn",
            &spawn,
            "--ready-url",
            &format!("{url}/"),
            "--fault",
            "restart@1s",
            // After Meteor's back-off brought the users back (its third try comes 3.6 to 6.1 s
            // after the first).
            "--fault",
            "stall@7500ms:1s",
            "--fault",
            "drop@9s:30%",
        ]);
        let a = audit(&doc);
        assert_eq!((o.code, a.outcome), (0, Outcome::Passed), "{transport}\n{}\n{}\n{a:?}", o.out, o.err);
        assert!(doc.faults.iter().all(|f| f.ok), "{:?}", doc.faults);
        // Users mid-walk reconnect, users between two walks retry their connect: none failed.
        assert!(doc.faults[0].reconnects >= 1 && doc.faults[0].converged_s.is_some(), "{:?}", doc.faults[0]);
        assert_eq!(doc.summary.users.failed, 0, "{transport}\n{}", o.out);
    }
}

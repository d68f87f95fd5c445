//! Hostile peers on loopback, each started by its test (`tests/peers/hostile.mjs` on the real npm
//! packages, a page served here for the browser): bolide, run as users run it (its own process,
//! its peak memory read through `wait4`), stays within 128 MB whatever the peer sends, ends when
//! its steps' timeouts say, counts what it drops, and never shows a credential it sent when a
//! server echoes it back (on the terminal or in any file it writes).

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use bolide::stats::vu::VuDoc;
use common::*;

/// The most memory bolide may take against any of these peers.
const BUDGET_KB: u64 = 128 * 1024;

/// What a run of bolide as a process of its own left: exit code, stdout, stderr, peak RSS (kB),
/// and every file it wrote (its document, HTML page, JUnit and CSV: name, text).
struct Ran {
    code: i32,
    out: String,
    err: String,
    peak_kb: u64,
    files: Vec<(String, String)>,
    doc: VuDoc,
}

/// `bolide run FILE ARGS...` writing every kind of file, as a process of its own, reaped by `wait4` (its own peak,
/// not the largest of this test process's children).
#[allow(clippy::zombie_processes)]
fn run(file: &str, extra: &[&str]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let at = |name: &str| out_dir.join(name).display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["run", file, "--json", &at("run.json"), "--html", &at("run.html"), "--junit", &at("junit.xml")])
        .args(["--out", &format!("csv={}", at("seconds.csv"))])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let out = reader.join().unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child; both pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
    let mut files = Vec::new();
    for e in std::fs::read_dir(&out_dir).unwrap_or_else(|_| panic!("no {}\n{out}\n{err}", out_dir.display())) {
        let path = e.unwrap().path();
        files.push((path.display().to_string(), String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()));
    }
    let json = files.iter().find(|(name, _)| name.ends_with(".json")).unwrap_or_else(|| {
        panic!("no document among {:?}\n{out}\n{err}", files.iter().map(|f| &f.0).collect::<Vec<_>>())
    });
    let doc = VuDoc::from_json(&json.1).unwrap();
    Ran { code: libc::WEXITSTATUS(status), out, err, peak_kb: usage.ru_maxrss as u64, files, doc }
}

fn scenario(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("scenario.yml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn event(doc: &VuDoc, name: &str) -> u64 {
    doc.summary.events.get(name).copied().unwrap_or(0)
}

fn errors(doc: &VuDoc, class: &str) -> u64 {
    doc.summary.errors_by_class.get(class).copied().unwrap_or(0)
}

/// A Socket.IO scenario: `users` users walk `flow` against `target`, with `config` added.
fn sio(target: &str, users: u32, config: &str, flow: &str) -> String {
    format!(
        "config:\n  target: \"{target}\"\n  phases: [{{ duration: 1, arrivalCount: {users} }}]\n{config}scenarios:\n  - engine: socketio\n    flow:\n{flow}"
    )
}

/// No credential bolide sent is anywhere a reader or a file sees, and the mask is where the
/// server's words were shown.
fn no_secret_shown(r: &Ran, secrets: &[&str]) {
    for s in secrets {
        let lower = s.to_ascii_lowercase();
        assert!(!r.out.to_ascii_lowercase().contains(&lower), "{s} on stdout:\n{}", r.out);
        assert!(!r.err.to_ascii_lowercase().contains(&lower), "{s} on stderr:\n{}", r.err);
        for (name, text) in &r.files {
            assert!(!text.to_ascii_lowercase().contains(&lower), "{s} in {name}");
        }
    }
    assert!(r.err.contains("<redacted>"), "the server's words were shown, masked:\n{}", r.err);
}

/// A `response` whose events never answer keeps one event, not all of them: 3,000 events of
/// 64 KB (192 MB) that do not answer, then the one that does, in under 128 MB; and a server that
/// never answers ends the step at its timeout with Artillery's "data is not valid".
#[test]
fn a_response_flooded_with_events_that_never_answer_keeps_flat_memory() {
    let server = Peer::start_with("hostile.mjs", &["sio-flood"]);
    let dir = tempfile::tempdir().unwrap();
    let flow = "      - emit: { channel: echo, data: { count: 3000 } }\n        response: { channel: echoed, data: { done: true } }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 1, "  timeout: 120\n", flow)), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.out, r.err);
    assert_eq!(r.doc.summary.users.completed, 1, "{}", r.out);
    assert_eq!(event(&r.doc, "socketio.events_received"), 3001);
    assert!(r.peak_kb < BUDGET_KB, "bolide took {} kB over 192 MB of events", r.peak_kb);

    let flow = "      - emit: { channel: echo, data: { count: -1 } }\n        response: { channel: echoed, data: { done: true } }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 1, "  timeout: 3\n", flow)), &[]);
    assert_eq!(errors(&r.doc, "response"), 1, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("data is not valid: echoed came") && r.err.contains("the last with"), "{}", r.err);
    assert!(event(&r.doc, "socketio.events_received") > 0);
    assert!(r.peak_kb < BUDGET_KB, "bolide took {} kB", r.peak_kb);
}

/// A CONNECT_ERROR that repeats the auth payload, the query's token, the Authorization header and
/// the cookie: shown masked, written nowhere.
#[test]
fn a_socketio_server_echoing_credentials_has_them_masked() {
    let server = Peer::start_with("hostile.mjs", &["sio-secrets"]);
    let dir = tempfile::tempdir().unwrap();
    let config = "  socketio:\n    transports: [websocket]\n    auth: { token: sio-auth-Tok-4242 }\n    query: { token: sio-query-tok-5353 }\n    extraHeaders: { Authorization: Bearer sio-hdr-6464, Cookie: sid=sio-cookie-7575 }\n";
    let flow = "      - emit: { channel: ack, data: 1 }\n        acknowledge: {}\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 2, config, flow)), &[]);
    assert_eq!(errors(&r.doc, "connect"), 2, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("first connect error") && r.err.contains("denied: auth"), "{}", r.err);
    no_secret_shown(&r, &["sio-auth-Tok-4242", "sio-query-tok-5353", "sio-hdr-6464", "sio-cookie-7575"]);
}

/// graphql-ws: a close reason repeating connectionParams' token and the Authorization header, and
/// an error repeating connectionParams, Authorization and Cookie.
#[test]
fn a_graphql_server_echoing_credentials_has_them_masked() {
    let server = Peer::start_with("hostile.mjs", &["gql-secrets"]);
    let dir = tempfile::tempdir().unwrap();
    let gql = |close: bool| {
        format!(
            "config:\n  target: \"{}\"\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\n  graphql:\n    connectionParams: {{ token: gql-param-tok-8181, close: {close} }}\n    headers: {{ Authorization: Bearer gql-hdr-9292, Cookie: sid=gql-cookie-1313 }}\nscenarios:\n  - engine: graphql-ws\n    flow:\n      - subscribe: {{ query: \"subscription {{ taskAdded {{ id }} }}\", count: 1 }}\n",
            server.url("/graphql")
        )
    };
    let secrets = ["gql-param-tok-8181", "gql-hdr-9292", "gql-cookie-1313"];
    let r = run(&scenario(dir.path(), &gql(true)), &[]);
    assert_eq!(r.doc.summary.users.failed, 2, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("Forbidden"), "{}", r.err);
    no_secret_shown(&r, &secrets);
    let r = run(&scenario(dir.path(), &gql(false)), &[]);
    assert_eq!(r.doc.summary.users.failed, 2, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("denied for"), "{}", r.err);
    no_secret_shown(&r, &secrets);
}

/// A DDP `login` refused with a reason that repeats its parameters: neither the password nor its
/// digest (which Meteor takes for the password) is shown.
#[test]
fn a_ddp_server_echoing_the_login_digest_has_it_masked() {
    use sha2::Digest;
    let server = Peer::start_with("hostile.mjs", &["ddp-secrets"]);
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: \"{}\"\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\nscenarios:\n  - flow:\n      - connect\n      - login: {{ user: someone, password: ddp-pass-2468 }}\n",
        server.url("")
    );
    let r = run(&scenario(dir.path(), &text), &[]);
    assert_eq!(r.doc.summary.users.failed, 2, "{}\n{}", r.out, r.err);
    assert!(r.err.contains("no such user for"), "{}", r.err);
    let digest: String = sha2::Sha256::digest(b"ddp-pass-2468").iter().map(|b| format!("{b:02x}")).collect();
    no_secret_shown(&r, &["ddp-pass-2468", &digest]);
}

/// Events on a namespace the user never joined are not its own: counted apart, and they satisfy
/// no `listen`.
#[test]
fn events_on_a_namespace_the_user_never_joined_are_not_its_own() {
    let server = Peer::start_with("hostile.mjs", &["sio-foreign"]);
    let dir = tempfile::tempdir().unwrap();
    let flow = "      - listen: { channel: tick, count: 2 }\n      - listen: { channel: tick, count: 1, timeout: 1 }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 2, "  timeout: 10\n", flow)), &[]);
    // Its own two ticks count; the fifty on /elsewhere do not.
    let step = |name: &str| r.doc.steps.iter().find(|s| s.name == name).map(|s| (s.count, s.errors));
    assert_eq!(step("listen tick"), Some((4, 2)), "{}\n{}", r.out, r.err);
    assert_eq!(errors(&r.doc, "timeout"), 2);
    assert_eq!(event(&r.doc, "socketio.foreign_namespace_packets"), 100);
    assert_eq!(event(&r.doc, "socketio.events_received"), 4);
}

/// A connection the server closes after the user's last step on it fails that user, named.
#[test]
fn a_connection_that_dies_after_the_last_step_fails_its_user() {
    let server = Peer::start_with("hostile.mjs", &["sio-dies"]);
    let dir = tempfile::tempdir().unwrap();
    let flow = "      - emit: { channel: bye, data: 1 }\n      - think: 2\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 2, "", flow)), &[]);
    let u = &r.doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (2, 0, 2), "{}\n{}", r.out, r.err);
    assert!(r.err.contains("the connection closed after the user's last step on it"), "{}", r.err);
    // The same flow without the server closing, or with the server ending the session on purpose
    // (its DISCONNECT): both complete.
    for channel in ["ack", "leave"] {
        let flow = format!("      - emit: {{ channel: {channel}, data: 1 }}\n      - think: 2\n");
        let r = run(&scenario(dir.path(), &sio(&server.url(""), 2, "", &flow)), &[]);
        assert_eq!(r.doc.summary.users.completed, 2, "{channel}: {}\n{}", r.out, r.err);
    }
}

/// An upgrade whose probe is never answered leaves the session on polling within the connect's
/// budget, counted: with the default 10 s step timeout every user completes.
#[test]
fn an_unanswered_upgrade_probe_leaves_the_session_on_polling() {
    let server = Peer::start_with("hostile.mjs", &["sio-noprobe"]);
    let dir = tempfile::tempdir().unwrap();
    let flow = "      - emit: { channel: ack, data: 1 }\n        acknowledge: { data: { ok: true } }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 2, "", flow)), &[]);
    let u = &r.doc.summary.users;
    assert_eq!((u.completed, u.failed), (2, 0), "{}\n{}", r.out, r.err);
    assert_eq!(event(&r.doc, "socketio.failed_upgrades"), 2);
    assert_eq!(event(&r.doc, "socketio.on_polling"), 2);
    assert_eq!(event(&r.doc, "socketio.acks_received"), 2);
    assert_eq!(server.counts()["probes_unanswered"], 2);
}

/// A page logging 20,000 errors a second while its user thinks: counted, the first kept, bolide
/// within its budget.
#[test]
fn a_page_logging_errors_without_end_is_counted_in_flat_memory() {
    let found = bolide::browser::executable(&Default::default());
    assert!(found.is_ok(), "this test needs Chromium: {}", found.unwrap_err());
    let page = "<!doctype html><title>noisy</title><p id=up>up</p><script>\
        setInterval(() => { for (let i = 0; i < 200; i++) console.error('boom ' + i + ' ' + 'x'.repeat(1000)); }, 10);\
        </script>";
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        // At most 50 requests: the page and its icon.
        for stream in listener.incoming().take(50) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let (status, body) = if buf.starts_with(b"GET / ") { ("200 OK", page) } else { ("404 Not Found", "") };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "config:\n  target: \"http://127.0.0.1:{port}\"\n  phases: [{{ duration: 1, arrivalCount: 1 }}]\nscenarios:\n  - engine: browser\n    flow:\n      - goto: /\n      - think: 8\n      - waitForSelector: \"#up\"\n"
    );
    let r = run(&scenario(dir.path(), &text), &[]);
    let b = r.doc.browser.as_ref().expect("a browser section");
    assert!(b.console_errors >= 10_000, "{} console errors\n{}\n{}", b.console_errors, r.out, r.err);
    assert!(r.err.contains("boom 0"), "the first error is named: {}", r.err);
    // bolide's own peak (its VmHWM, in the document): wait4's would count the Chromium it reaped.
    let peak_kb = r.doc.generator.as_ref().and_then(|g| g.peak_rss_bytes).expect("generator.peak_rss_bytes") / 1024;
    assert!(peak_kb < BUDGET_KB, "bolide took {peak_kb} kB");
}

/// What the server sent before it saw the user's close still counts: the answer to the poll that
/// was pending (2,000 events in one), and binary frames during the WebSocket's closing handshake.
#[test]
fn what_arrives_while_a_connection_closes_is_counted() {
    let server = Peer::start_with("hostile.mjs", &["sio-burst"]);
    let dir = tempfile::tempdir().unwrap();
    // (The think lets the user's next poll reach the server and wait there.)
    let flow =
        "      - emit: { channel: ack, data: 1 }\n        acknowledge: {}\n      - think: 2\n      - disconnect\n";
    let config = "  socketio: { transports: [polling] }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 1, config, flow)), &[]);
    assert_eq!(r.doc.summary.users.completed, 1, "{}\n{}", r.out, r.err);
    assert_eq!(server.counts()["burst_sent"], 2000);
    assert_eq!(event(&r.doc, "socketio.events_received"), 2000, "{}", r.out);

    // Binary frames during the closing handshake: counted as the link counts them at any other
    // time (as protocol errors: binary events are not read yet).
    let flow = "      - emit: { channel: ack, data: 1 }\n        acknowledge: {}\n      - disconnect\n";
    let config = "  socketio: { transports: [websocket] }\n";
    let r = run(&scenario(dir.path(), &sio(&server.url(""), 1, config, flow)), &[]);
    assert_eq!(server.counts()["binary_sent"], 5);
    assert_eq!(r.doc.summary.protocol_errors, 5, "{}\n{}", r.out, r.err);
}

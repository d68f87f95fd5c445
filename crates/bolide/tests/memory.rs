//! The memory guard: bolide's peak RSS holding many sessions of each realtime protocol (DDP
//! against the reference server, Socket.IO and GraphQL over WebSocket against the real npm
//! servers of `tests/peers`) and running `bolide http -c 1000`, each against a budget.
//!
//! The figure is the document's `generator.peak_rss_bytes` (bolide's own high-water mark). Peak
//! RSS for a fixed workload is close to deterministic (the same allocations in the same
//! order), so a change that adds a kilobyte a session fails here with the figure and the budget.
//! A session's cost is the difference between two runs, `SMALL` and `LARGE` sessions held at
//! once, divided by the sessions between them: the process's own base (code, threads, the
//! histograms) cancels out. Every session must be held and end well: a protocol that failed to
//! connect would otherwise look cheap.
//!
//! The budgets are the figures measured when they were set (BENCHMARKS.md, "Memory per session"),
//! plus about 15%: release builds (`cargo test --release --test memory`, which `.ci/run` runs)
//! and debug builds (`cargo test`, whose futures are larger) each have their own.

mod common;

use std::process::{Command, Stdio};

use bolide::stats::vu::VuDoc;
use common::*;
use refserver::{Config, Server};

/// Sessions held at once in the two runs.
const SMALL: u64 = 500;
const LARGE: u64 = 3000;
/// Arrivals a second in both.
const RATE: u64 = 500;

/// A budget: KB a session (marginal) and MB of peak RSS for `LARGE` sessions.
struct Budget {
    kb_per_session: f64,
    peak_mb: f64,
}

/// The budgets of the build this test is part of: a session costs the same in both (measured
/// 3.9, 4.3 and 3.0 KB), the debug binary's base is about 16 MB more.
fn budget(protocol: &str) -> Budget {
    let (kb, release_mb) = match protocol {
        // Measured 3.86-3.88 KB, 29.8 MB.
        "ddp" => (4.5, 35.0),
        // Measured 4.25-4.29 KB, 30.1 MB.
        "socketio" => (4.9, 35.0),
        // Measured 3.02-3.09 KB, 26.1 MB.
        "graphql" => (3.6, 30.0),
        // A stream kept open after its first event (its task reading it): measured 2.98 KB and
        // 28.4 MB in the release build (2.96 KB and 42.6 MB in the debug build); 4.68 KB before
        // the task's reconnection was boxed and the users of a thread shared their target.
        "sse" => (3.5, 33.0),
        // The same over HTTP/2, a connection a user: measured 24.3 KB and 91.7 MB (release), nearly
        // all of it the h2 crate's buffers of a connection (16 KB to write, 8 KB to read).
        "sse-h2" => (27.0, 100.0),
        other => panic!("no budget for {other}"),
    };
    Budget { kb_per_session: kb, peak_mb: release_mb + debug_base_mb() }
}

/// How much more the debug binary holds before any session (its code and debug info).
fn debug_base_mb() -> f64 {
    if cfg!(debug_assertions) {
        17.0
    } else {
        0.0
    }
}

/// Runs bolide with `args` (which write the document `json`) to its end; its stderr.
fn run_to_end(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bolide")).args(args).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// bolide's peak RSS in KB, as its document says (`generator.peak_rss_bytes`: the process's own
/// high-water mark; a parent's `wait4` would also count what the forked test process held).
fn peak_kb(generator: Option<&bolide::monitor::generator::GeneratorResult>, err: &str) -> u64 {
    let bytes =
        generator.and_then(|g| g.peak_rss_bytes).unwrap_or_else(|| panic!("no generator.peak_rss_bytes: {err}"));
    bytes / 1024
}

/// Holds `n` sessions of the flow `flow` against `target` on one generator thread (`RATE`
/// arrivals a second, each held until all have come); peak RSS in KB, after checking that all `n`
/// completed. Both runs arrive at the same rate, so the users in their handshakes at any moment
/// (whose buffers are not a held session's) are as many in both and cancel out.
fn hold(target: &str, n: u64, config: &str, flow: &str) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hold.yml");
    let json = dir.path().join("run.json");
    let text = format!(
        "config:\n  target: \"{target}\"\n  phases: [{{ duration: {}, arrivalRate: {RATE} }}]\n{config}scenarios:\n{}",
        n / RATE,
        flow.replace("THINK", &format!("      - think: {}\n", LARGE / RATE + 1))
    );
    std::fs::write(&file, text).unwrap();
    let err = run_to_end(&["run", file.to_str().unwrap(), "-t", "1", "-q", "--json", json.to_str().unwrap()]);
    let doc =
        VuDoc::from_json(&std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document: {err}"))).unwrap();
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (n, n, 0), "every session held and ended well: {err}");
    peak_kb(doc.generator.as_ref(), &err)
}

/// One guard at a time: two at once (the test harness's threads) share the machine's cores with
/// each other's servers, and a slowed protocol holds more in flight.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Measures `protocol`'s sessions at `SMALL` and `LARGE` and holds them to the budget. A busy
/// machine can only add to a reading (a slowed server leaves more in flight at once), never take
/// from it: a reading over the budget is taken again, up to three in all, and the least is
/// judged. A session that costs more than its budget costs it in every reading.
fn guard(protocol: &str, target: &str, config: &str, flow: &str) {
    let _turn = one_at_a_time();
    let b = budget(protocol);
    let mut readings = Vec::new();
    let (mut small, mut large, mut per_session) = (0, 0, f64::MAX);
    for _ in 0..3 {
        let (s, l) = (hold(target, SMALL, config, flow), hold(target, LARGE, config, flow));
        let each = (l as f64 - s as f64) / (LARGE - SMALL) as f64;
        readings.push(format!("{each:.2}"));
        if each < per_session {
            (small, large, per_session) = (s, l, each);
        }
        if per_session <= b.kb_per_session && large as f64 / 1000.0 <= b.peak_mb {
            break;
        }
    }
    let peak_mb = large as f64 / 1000.0;
    eprintln!(
        "{protocol}: {SMALL} sessions {small} KB, {LARGE} sessions {large} KB: {per_session:.2} KB a session \
         (budget {}; readings {}), peak {peak_mb:.1} MB (budget {})",
        b.kb_per_session,
        readings.join(", "),
        b.peak_mb
    );
    assert!(
        per_session <= b.kb_per_session,
        "{protocol}: {per_session:.2} KB a session, over its budget of {} KB ({small} KB at {SMALL} sessions, {large} KB at {LARGE})",
        b.kb_per_session
    );
    assert!(
        peak_mb <= b.peak_mb,
        "{protocol}: peak RSS {peak_mb:.1} MB at {LARGE} sessions, over its budget of {} MB",
        b.peak_mb
    );
}

/// Enough open files for `LARGE` sessions in bolide and in the servers of this process.
fn enough_files() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    assert!(
        lim.rlim_max >= 2 * LARGE + 256,
        "the open-file limit ({}) is too low for {LARGE} sessions: raise it (ulimit -Hn)",
        lim.rlim_max
    );
}

#[test]
fn ddp_sessions_stay_within_their_memory_budget() {
    enough_files();
    let s = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let flow = "  - flow:\n      - connect\n      - subscribe: fetchTasks\nTHINK      - disconnect\n";
    guard("ddp", &s.base_url(), "  ddp: { compression: true, cache: true }\n", flow);
}

#[test]
fn socketio_sessions_stay_within_their_memory_budget() {
    enough_files();
    let server = Peer::start("sio-server.mjs");
    // As bench/socketio-idle.yml: join a room, acknowledged, and stay.
    let flow = "  - engine: socketio\n    flow:\n      - emit: [\"join\", \"lobby\"]\n        acknowledge:\n          data: joined\nTHINK";
    guard("socketio", &server.url(""), "", flow);
}

#[test]
fn graphql_sessions_stay_within_their_memory_budget() {
    enough_files();
    let server = Peer::start("gql-server.mjs");
    // A live subscription each, waiting for nothing, then held.
    let flow = "  - engine: graphql-ws\n    flow:\n      - subscribe:\n          query: \"subscription { taskAdded { id } }\"\n          count: 0\nTHINK";
    guard("graphql", &server.url("/graphql"), "  graphql:\n    connectionParams: { token: secret }\n", flow);
}

#[test]
fn sse_streams_stay_within_their_memory_budget() {
    enough_files();
    let server = Peer::start("sse-hold.mjs");
    // A stream each, its first event read, then kept open (its events counted for `listen`).
    let flow = "  - engine: sse\n    flow:\n      - stream: { events: 1, keep: true }\nTHINK";
    guard("sse", &server.url("/hold"), "", flow);
}

#[test]
fn sse_streams_over_http2_stay_within_their_memory_budget() {
    enough_files();
    let server = Peer::start_with("sse-hold.mjs", &["h2c"]);
    let flow = "  - engine: sse\n    flow:\n      - stream: { events: 1, keep: true }\nTHINK";
    guard("sse-h2", &server.url("/hold"), "  sse: { http2: true }\n", flow);
}

#[test]
fn a_thousand_http_connections_stay_within_their_memory_budget() {
    let _turn = one_at_a_time();
    enough_files();
    let s = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let url = format!("{}/", s.base_url());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("http.json");
    let err = run_to_end(&["http", "-c", "1000", "-t", "1", "-d", "3s", "-q", "--json", json.to_str().unwrap(), &url]);
    let doc = read_doc(&json);
    assert!(doc.summary.responses > 1000 && doc.summary.errors == 0, "every connection answered: {err}");
    let kb = peak_kb(doc.generator.as_ref(), &err);
    // Measured 15.1-15.3 MB.
    let budget_mb = 18.0 + debug_base_mb();
    let mb = kb as f64 / 1000.0;
    eprintln!("http -c 1000: peak {mb:.1} MB (budget {budget_mb})");
    assert!(!err.contains("error:"), "{err}");
    assert!(mb <= budget_mb, "bolide http -c 1000: peak RSS {mb:.1} MB, over its budget of {budget_mb} MB");
}

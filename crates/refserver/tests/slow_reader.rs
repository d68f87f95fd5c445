//! A client that does not read is cut off once its pending bytes pass the limit, not buffered.
//! (The other attacks run against `bolide serve` in its own process: crates/bolide/tests/attack.rs.)

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use refserver::{Config, DdpConfig, Server};
use serde_json::json;

/// `n` calls of the good client (an insert and a remove of its own task each).
fn calls(good: &mut Client, session: &str, n: usize, tag: &str) {
    for i in 0..n {
        let (r, _) =
            good.call(&format!("{tag}{i}"), "insertTask", json!([{"description": "good", "sessionId": session}]));
        let id = r["result"].as_str().unwrap().to_string();
        good.call(&format!("{tag}{i}r"), "removeTask", json!([{"taskId": id}]));
    }
}

#[test]
fn a_client_that_does_not_read_is_cut_off_not_buffered() {
    let server = Server::start(Config {
        threads: 2,
        ddp: DdpConfig { max_pending_bytes: 1 << 20, ..DdpConfig::default() },
        ..Config::default()
    })
    .unwrap();
    let addr = server.addr();
    let mut good = Client::open(addr, Transport::Raw);
    let me = good.handshake();
    let mut slow = Client::open(addr, Transport::Raw);
    slow.handshake();
    slow.sub("slow", "fetchTasks");
    // 4 MB of documents for a client that reads nothing: it is cut off past 1 MiB waiting.
    let big = "x".repeat(60_000);
    for i in 0..70 {
        good.call(&format!("w{i}"), "insertTask", json!([{"description": big, "sessionId": me}]));
    }
    good.call("clean", "removeAllTasks", json!([{"sessionId": me}]));
    let before = server.app().live_sessions.load(Ordering::SeqCst);
    assert!(
        eventually(Duration::from_secs(5), || server.app().live_sessions.load(Ordering::SeqCst) == 1),
        "{before} sessions"
    );
    // What the slow client finally reads ends without a close frame, well short of 4 MB.
    let got = slow.until_closed(Duration::from_secs(5));
    let bytes: usize = got.iter().map(|m| m.to_string().len()).sum();
    assert!(slow.closed.is_none() && bytes < 3 << 20, "{bytes} bytes, close {:?}", slow.closed);
    calls(&mut good, &me, 10, "after");
}

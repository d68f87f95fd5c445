//! The server conformance cases of ddp-brief section 6 (numbers in the test names), each run over
//! raw WebSocket, `/sockjs/websocket` and SockJS framing, with compression off and on, and with
//! push and poll reactivity.

mod common;

use std::time::{Duration, Instant};

use common::*;
use refserver::{DdpConfig, Reactivity};
use serde_json::{json, Value};

fn each(case: impl Fn(&mut dyn FnMut() -> Client, Reactivity, Transport, &refserver::Server)) {
    for (reactivity, compression, transport) in setups() {
        let server = server(reactivity, compression);
        let addr = server.addr();
        let mut open = || Client::open(addr, transport);
        case(&mut open, reactivity, transport, &server);
    }
}

#[test]
fn c01_connect_gives_a_fresh_17_character_session() {
    each(|open, _, _, _| {
        let a = open().handshake();
        let b = open().handshake();
        assert!(ddp::id::is_random_id(&a) && ddp::id::is_random_id(&b), "{a} {b}");
        assert_ne!(a, b);
    });
}

#[test]
fn c02_c03_version_refusals_send_failed_and_close() {
    each(|open, _, _, _| {
        // Each row: connect message, the version `failed` proposes.
        let rows = [
            (json!({"msg": "connect", "version": "pre1", "support": ["1", "pre1"]}), "1"),
            (json!({"msg": "connect", "version": "1"}), "1"),
            (json!({"msg": "connect", "version": "1", "support": ["pre2"]}), "1"),
        ];
        for (connect, version) in rows {
            let mut c = open();
            c.send(connect.clone());
            let got = c.until_closed(Duration::from_secs(5));
            assert_eq!(got, vec![json!({"msg": "failed", "version": version})], "{connect}");
            assert!(c.closed.is_some() || c.sockjs_close.is_some(), "socket closed after failed");
        }
    });
}

#[test]
fn c04_must_connect_first_and_already_connected() {
    each(|open, _, _, _| {
        let mut c = open();
        let sub = json!({"msg": "sub", "id": "a", "name": "fetchTasks", "params": []});
        c.send(sub.clone());
        assert_eq!(c.recv(), json!({"msg": "error", "reason": "Must connect first", "offendingMessage": sub}));
        c.handshake();
        c.send(json!({"msg": "connect", "version": "1", "support": ["1"]}));
        assert_eq!(c.recv(), json!({"msg": "error", "reason": "Already connected"}));
    });
}

#[test]
fn c05_bad_json_and_unknown_messages() {
    each(|open, _, transport, _| {
        let mut c = open();
        c.handshake();
        let bad = if transport == Transport::SockJs { r#"["{not json"]"# } else { "{not json" };
        c.send_frame(bad, false);
        assert_eq!(c.recv(), json!({"msg": "error", "reason": "Bad request"}));
        let unknown = json!({"msg": "launch", "target": "moon"});
        c.send(unknown.clone());
        assert_eq!(c.recv(), json!({"msg": "error", "reason": "Bad request", "offendingMessage": unknown}));
        // The session is still fine.
        c.send(json!({"msg": "ping", "id": "still"}));
        assert_eq!(c.recv(), json!({"msg": "pong", "id": "still"}));
    });
}

#[test]
fn c06_c14_pings_jump_the_queue_and_methods_keep_their_order() {
    each(|open, _, _, _| {
        let mut c = open();
        c.handshake();
        c.send(json!({"msg": "method", "method": "bolide.sleep", "params": [{"ms": 300}], "id": "1"}));
        c.send(json!({"msg": "method", "method": "fetchTasks", "params": [], "id": "2"}));
        c.send(json!({"msg": "ping", "id": "x"}));
        c.send(json!({"msg": "ping"}));
        // The pongs come before the first method's result (it sleeps 300 ms): they did not wait
        // behind it. The order proves it, whatever the machine's load.
        assert_eq!(c.recv(), json!({"msg": "pong", "id": "x"}), "pong waited for the method");
        assert_eq!(c.recv(), json!({"msg": "pong"}));
        let rest: Vec<Value> = (0..4).map(|_| c.recv()).collect();
        let results: Vec<&Value> = rest.iter().filter(|m| m["msg"] == "result").map(|m| &m["id"]).collect();
        assert_eq!(results, [&json!("1"), &json!("2")], "results in send order: {rest:?}");
    });
}

#[test]
fn c07_server_pings_after_silence_and_closes_without_an_answer() {
    let quick = DdpConfig {
        heartbeat_interval: Duration::from_millis(200),
        heartbeat_timeout: Duration::from_millis(200),
        ..DdpConfig::default()
    };
    for transport in TRANSPORTS {
        let server = server_with(quick.clone());
        // Answering keeps the session alive.
        let mut alive = Client::open(server.addr(), transport);
        alive.handshake();
        for _ in 0..3 {
            assert_eq!(alive.recv(), json!({"msg": "ping"}));
            alive.send(json!({"msg": "pong"}));
        }
        // Silence after the ping closes it: between one and two intervals, then the timeout.
        let mut mute = Client::open(server.addr(), transport);
        mute.handshake();
        let begin = Instant::now();
        assert_eq!(mute.recv(), json!({"msg": "ping"}));
        let pinged = begin.elapsed();
        assert!(pinged >= Duration::from_millis(150) && pinged < Duration::from_millis(1000), "{pinged:?}");
        assert!(mute.until_closed(Duration::from_secs(3)).is_empty());
        assert!(begin.elapsed() >= Duration::from_millis(350), "closed after the timeout: {:?}", begin.elapsed());
        // And the answering one is still there.
        alive.send(json!({"msg": "ping", "id": "ok"}));
        let got = alive.recv_until(|m| m["msg"] == "pong");
        assert_eq!(got.last().unwrap(), &json!({"msg": "pong", "id": "ok"}));
    }
}

fn insert(c: &mut Client, id: &str, description: &str, session: &str) -> (String, Vec<Value>) {
    let (result, seen) = c.call(id, "insertTask", json!([{"description": description, "sessionId": session}]));
    assert!(result.get("error").is_none(), "{result}");
    (result["result"].as_str().unwrap().to_string(), seen)
}

#[test]
fn c08_c09_c10_subscribe_unsubscribe() {
    each(|open, _, _, _| {
        let mut a = open();
        let sa = a.handshake();
        let ids: Vec<String> = (0..3).map(|i| insert(&mut a, &format!("{i}"), &format!("t{i}"), &sa).0).collect();
        let mut b = open();
        b.handshake();
        let got = b.sub("s1", "fetchTasks");
        let added: Vec<&str> = got.iter().filter(|m| m["msg"] == "added").map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(added, ids.iter().map(String::as_str).collect::<Vec<_>>(), "{got:?}");
        for m in got.iter().filter(|m| m["msg"] == "added") {
            assert_eq!(m["collection"], "taskCollection");
            assert!(m["fields"]["createdAt"]["$date"].is_i64(), "c17: createdAt is an EJSON date: {m}");
        }
        assert_eq!(got.last().unwrap(), &json!({"msg": "ready", "subs": ["s1"]}));
        // c09: the same id again gets nothing; an unknown name gets nosub 404.
        b.send(json!({"msg": "sub", "id": "s1", "name": "fetchTasks", "params": []}));
        let nosub = b.sub("s2", "noSuchPublication");
        assert_eq!(nosub.len(), 1, "the repeated sub got no answer: {nosub:?}");
        assert_eq!(nosub[0]["error"]["error"], 404);
        assert_eq!(nosub[0]["error"]["errorType"], "Meteor.Error");
        // The autoupdate subscription browsers send is simply ready.
        assert_eq!(b.sub("au", "meteor_autoupdate_clientVersions"), vec![json!({"msg": "ready", "subs": ["au"]})]);
        // c10: unsub removes what only that sub covered, then nosub without error.
        b.send(json!({"msg": "unsub", "id": "s1"}));
        let got = b.recv_until(|m| m["msg"] == "nosub");
        let removed: Vec<&str> =
            got.iter().filter(|m| m["msg"] == "removed").map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(removed.len(), 3, "{got:?}");
        assert_eq!(got.last().unwrap(), &json!({"msg": "nosub", "id": "s1"}));
        b.send(json!({"msg": "unsub", "id": "never"}));
        assert_eq!(b.recv(), json!({"msg": "nosub", "id": "never"}));
    });
}

#[test]
fn c11_writes_fan_out_and_updated_follows_the_data() {
    each(|open, reactivity, _, _| {
        let mut a = open();
        let sa = a.handshake();
        let mut b = open();
        b.handshake();
        a.sub("a1", "fetchTasks");
        b.sub("b1", "fetchTasks");
        let (id, seen) = insert(&mut a, "1", "New Task 1", &sa);
        let pos = |msg: &str| seen.iter().position(|m| m["msg"] == msg);
        let added_at = pos("added").unwrap_or_else(|| {
            // A's added may arrive after both result and updated only if the server is wrong.
            panic!("A got no added before updated: {seen:?}")
        });
        assert!(added_at < pos("updated").unwrap(), "added before updated: {seen:?}");
        assert_eq!(seen[added_at]["id"], id.as_str());
        if reactivity == Reactivity::Push {
            assert!(pos("updated") < pos("result"), "push: updated first, as Meteor 3: {seen:?}");
        } else {
            assert!(pos("result") < pos("updated"), "poll: result first, updated after the poll: {seen:?}");
        }
        let on_b = b.recv();
        assert_eq!((on_b["msg"].as_str(), on_b["id"].as_str()), (Some("added"), Some(id.as_str())));
        assert_eq!(on_b["fields"]["description"], "New Task 1");
        // Removal fans out too.
        let (result, seen) = a.call("2", "removeTask", json!([{"taskId": id}]));
        assert_eq!(result["result"], 1);
        assert!(seen.iter().any(|m| m["msg"] == "removed" && m["id"] == id.as_str()), "{seen:?}");
        assert_eq!(b.recv(), json!({"msg": "removed", "collection": "taskCollection", "id": id}));
    });
}

#[test]
fn c12_c13_methods_without_writes_and_unknown_methods() {
    each(|open, _, _, _| {
        let mut c = open();
        c.handshake();
        let (result, seen) = c.call("1", "fetchTasks", json!([]));
        assert_eq!(result["result"], json!([]));
        assert_eq!(seen.len(), 2, "just result and updated: {seen:?}");
        let (result, seen) = c.call("2", "noSuchMethod", json!([]));
        assert_eq!(result["error"]["error"], 404);
        assert_eq!(result["error"]["errorType"], "Meteor.Error");
        assert_eq!(result["error"]["reason"], "Method 'noSuchMethod' not found");
        assert_eq!(seen.len(), 2, "{seen:?}");
        // Wrong arguments: Meteor's check() answers 400 Match failed.
        let (result, _) = c.call("3", "insertTask", json!([{"description": 5}]));
        assert_eq!(result["error"]["error"], 400);
        let (result, _) = c.call("4", "removeAllTasks", json!([{"sessionId": "nobody"}]));
        assert_eq!(result["result"], 0);
    });
}

#[test]
fn c15_malformed_method_and_subscription() {
    each(|open, _, _, _| {
        let mut c = open();
        c.handshake();
        let bad_method = json!({"msg": "method", "method": "fetchTasks", "params": [], "id": 7});
        c.send(bad_method.clone());
        assert_eq!(
            c.recv(),
            json!({"msg": "error", "reason": "Malformed method invocation", "offendingMessage": bad_method})
        );
        let bad_sub = json!({"msg": "sub", "id": "s", "name": "fetchTasks", "params": "nope"});
        c.send(bad_sub.clone());
        assert_eq!(c.recv(), json!({"msg": "error", "reason": "Malformed subscription", "offendingMessage": bad_sub}));
    });
}

#[test]
fn c16_compression_follows_the_threshold() {
    for transport in TRANSPORTS {
        let server = server(Reactivity::Push, true);
        let mut c = Client::open(server.addr(), transport);
        assert_eq!(
            c.extensions.as_deref(),
            Some("permessage-deflate; server_no_context_takeover; client_no_context_takeover")
        );
        let s = c.handshake();
        for i in 0..40 {
            insert(&mut c, &format!("{i}"), &format!("New Task {i}"), &s);
        }
        let (plain_before, packed_before) = (c.plain_frames, c.compressed_frames);
        assert_eq!(packed_before, 0, "small messages stay uncompressed");
        let (result, _) = c.call("big", "fetchTasks", json!([]));
        assert_eq!(result["result"].as_array().unwrap().len(), 40);
        assert_eq!(c.compressed_frames, 1, "the 40-task result is over 1024 bytes: compressed");
        assert!(c.plain_frames > plain_before || transport == Transport::SockJs);
        // With compression off, nothing is negotiated.
        let off = server_with(DdpConfig { compression: false, ..DdpConfig::default() });
        let c = Client::open(off.addr(), transport);
        assert_eq!(c.extensions, None);
    }
}

#[test]
fn sessions_are_parallel_and_isolated() {
    let server = server(Reactivity::Push, true);
    let mut slow = Client::open(server.addr(), Transport::Raw);
    slow.handshake();
    slow.send(json!({"msg": "method", "method": "bolide.sleep", "params": [{"ms": 1000}], "id": "1"}));
    let mut fast = Client::open(server.addr(), Transport::SockJs);
    fast.handshake();
    let begin = Instant::now();
    let (result, _) = fast.call("1", "fetchTasks", json!([]));
    assert_eq!(result["result"], json!([]));
    assert!(
        begin.elapsed() < Duration::from_millis(800),
        "another session's slow method held us: {:?}",
        begin.elapsed()
    );
}

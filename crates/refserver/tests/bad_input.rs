//! Malformed frames, malformed messages, floods and limits: each gets its reply or its close, and
//! a good session on the same server never notices.

mod common;

use std::time::Duration;

use common::*;
use ddp::ws::{self, Opcode};
use refserver::{DdpConfig, Reactivity};
use serde_json::json;

fn masked(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    ws::encode_frame(&mut wire, opcode, false, payload, Some([9, 8, 7, 6]));
    wire
}

/// A connected session that watches a task appear, to prove bad neighbours did not disturb it.
fn good_session(server: &refserver::Server) -> Client {
    let mut good = Client::open(server.addr(), Transport::Raw);
    good.handshake();
    good.sub("g", "fetchTasks");
    good
}

fn still_good(good: &mut Client, server: &refserver::Server, n: usize) {
    let mut writer = Client::open(server.addr(), Transport::SockJs);
    let s = writer.handshake();
    writer.call("1", "insertTask", json!([{"description": format!("after {n}"), "sessionId": s}]));
    // Other sessions' documents may come first (the flood's); this one must come.
    let want = format!("after {n}");
    let got = good.recv_until(|m| m["msg"] == "added" && m["fields"]["description"] == want.as_str());
    assert!(got.iter().all(|m| m["msg"] == "added"), "only data in between: {:?}", got.last());
}

#[test]
fn malformed_frames_close_with_the_right_code() {
    let server = server_with(DdpConfig { max_message_bytes: 4096, ..DdpConfig::default() });
    let mut good = good_session(&server);
    let mut unmasked = Vec::new();
    ws::encode_frame(&mut unmasked, Opcode::Text, false, b"{}", None);
    // Each row: transport, bytes sent after the handshake, WebSocket close code, SockJS close.
    type SockJsClose = Option<(u16, &'static str)>;
    let rows: Vec<(Transport, Vec<u8>, u16, SockJsClose)> = vec![
        (Transport::Raw, unmasked, 1002, None),
        (Transport::Raw, vec![0x83, 0x80, 1, 2, 3, 4], 1002, None),
        (Transport::Raw, masked(Opcode::Binary, b"{}"), 1003, None),
        (Transport::Raw, masked(Opcode::Text, &[0xff, 0xfe, 0xfd]), 1007, None),
        (Transport::Raw, masked(Opcode::Text, &vec![b' '; 5000]), 1009, None),
        (
            Transport::Raw,
            {
                // A compressed frame that is not DEFLATE.
                let mut w = Vec::new();
                ws::encode_frame(&mut w, Opcode::Text, true, b"\xff\xff\xff\xff", Some([1, 1, 1, 1]));
                w
            },
            1007,
            None,
        ),
        (Transport::SockJs, masked(Opcode::Text, b"not a sockjs frame"), 3000, Some((3000, "Broken framing."))),
    ];
    for (i, (transport, bytes, code, sockjs)) in rows.into_iter().enumerate() {
        let mut c = Client::open(server.addr(), transport);
        c.handshake();
        c.send_bytes(&bytes);
        assert!(c.until_closed(Duration::from_secs(5)).is_empty(), "row {i}");
        assert_eq!(c.closed.as_ref().and_then(|c| c.0), Some(code), "row {i}: {:?}", c.closed);
        if let Some((code, reason)) = sockjs {
            assert_eq!(c.sockjs_close, Some((code, reason.to_string())), "row {i}");
        }
        still_good(&mut good, &server, i);
    }
}

#[test]
fn malformed_messages_get_ddp_errors_and_the_session_lives_on() {
    let server = server(Reactivity::Push, false);
    let mut good = good_session(&server);
    let mut c = Client::open(server.addr(), Transport::Raw);
    c.handshake();
    // Each row: text sent, the reply.
    let rows: Vec<(&str, serde_json::Value)> = vec![
        ("[]", json!({"msg": "error", "reason": "Bad request"})),
        ("42", json!({"msg": "error", "reason": "Bad request"})),
        (r#"{"no":"msg"}"#, json!({"msg": "error", "reason": "Bad request", "offendingMessage": {"no": "msg"}})),
        (r#"{"msg":["x"]}"#, json!({"msg": "error", "reason": "Bad request", "offendingMessage": {"msg": ["x"]}})),
        (
            r#"{"msg":"added","collection":"c","id":"1"}"#,
            json!({"msg": "error", "reason": "Bad request", "offendingMessage": {"msg": "added", "collection": "c", "id": "1"}}),
        ),
        (
            r#"{"msg":"method","method":1,"id":"1"}"#,
            json!({"msg": "error", "reason": "Malformed method invocation", "offendingMessage": {"msg": "method", "method": 1, "id": "1"}}),
        ),
        (
            r#"{"msg":"sub","id":5,"name":"x"}"#,
            json!({"msg": "error", "reason": "Malformed subscription", "offendingMessage": {"msg": "sub", "id": 5, "name": "x"}}),
        ),
        (r#"{"msg":"unsub"}"#, json!({"msg": "error", "reason": "Bad request", "offendingMessage": {"msg": "unsub"}})),
    ];
    for (text, reply) in rows {
        c.send_frame(text, false);
        assert_eq!(c.recv(), reply, "{text}");
    }
    c.send(json!({"msg": "ping", "id": "alive"}));
    assert_eq!(c.recv(), json!({"msg": "pong", "id": "alive"}));
    still_good(&mut good, &server, 0);
}

#[test]
fn a_flooding_client_does_not_disturb_others() {
    let server = server(Reactivity::POLL, true);
    let mut good = good_session(&server);
    let mut flood = Client::open(server.addr(), Transport::Raw);
    let s = flood.handshake();
    // 5,000 messages in one burst, never reading the answers.
    let mut burst = Vec::new();
    for i in 0..5_000 {
        let m = json!({"msg": "method", "method": "insertTask", "params": [{"description": "flood", "sessionId": s}], "id": format!("{i}")});
        ws::encode_frame(&mut burst, Opcode::Text, false, m.to_string().as_bytes(), Some([1, 2, 3, 4]));
    }
    flood.send_bytes(&burst);
    // The good session keeps answering pings and receives the flood's documents as data.
    good.send(json!({"msg": "ping", "id": "p"}));
    let got = good.recv_until(|m| m["msg"] == "pong");
    assert_eq!(got.last().unwrap(), &json!({"msg": "pong", "id": "p"}));
    assert!(eventually(Duration::from_secs(20), || server.app().tasks.len() == 5_000), "{}", server.app().tasks.len());
    still_good(&mut good, &server, 1);
}

#[test]
fn limits_sessions_handshake_and_version_header() {
    let server = server_with(DdpConfig {
        max_sessions: 2,
        handshake_timeout: Duration::from_millis(300),
        ..DdpConfig::default()
    });
    let mut a = Client::open(server.addr(), Transport::Raw);
    a.handshake();
    let mut idle = Client::open(server.addr(), Transport::Raw);
    // A third is refused while two are open.
    let refused = Client::open_with(server.addr(), Transport::Raw, true).err();
    assert_eq!(refused.as_deref(), Some("HTTP/1.1 503 Service Unavailable"));
    // The one that never sends connect is closed after the handshake timeout, freeing its slot.
    assert!(idle.until_closed(Duration::from_secs(3)).is_empty());
    assert!(eventually(Duration::from_secs(2), || server
        .app()
        .live_sessions
        .load(std::sync::atomic::Ordering::SeqCst)
        == 1));
    let mut b = Client::open(server.addr(), Transport::SockJs);
    b.handshake();
    a.send(json!({"msg": "ping"}));
    assert_eq!(a.recv(), json!({"msg": "pong"}));
}

#[test]
fn plain_http_on_ddp_paths() {
    use std::io::{Read, Write};
    let server = server(Reactivity::Push, true);
    let get = |path: &str, extra: &str| {
        let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n").as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    let info = get("/sockjs/info", "");
    assert!(info.starts_with("HTTP/1.1 200"), "{info}");
    let body: serde_json::Value = serde_json::from_str(info.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["websocket"], true);
    assert_eq!(body["origins"], json!(["*:*"]));
    assert_eq!(body["cookie_needed"], false);
    assert!(body["entropy"].is_u64());
    assert!(get("/websocket", "").starts_with("HTTP/1.1 400"), "a plain GET cannot upgrade");
    let old = get("/websocket", "Upgrade: websocket\r\nSec-WebSocket-Key: x\r\nSec-WebSocket-Version: 7\r\n");
    assert!(old.starts_with("HTTP/1.1 400") && old.contains("Sec-WebSocket-Version: 13"), "{old}");
    let page = get("/", "");
    assert!(page.contains("Add task") && page.contains("sessionId") && page.contains("/bolide-ddp.js"), "{page}");
    assert!(get("/bolide-ddp.js", "").contains("BolideDDP"));
}

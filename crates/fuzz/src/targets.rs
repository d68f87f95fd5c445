//! The fuzz targets: each takes arbitrary bytes, drives one parser the way bolide or its
//! reference server drives it, and checks properties that must hold for every input (round trips,
//! the same answer whatever way the bytes are split). A panic anywhere is a finding.

use bolide::proto::http::parser::{Progress, ResponseParser};
use ddp::ws::{self, Deflate, Incoming, Opcode};
use serde_json::Value;

/// One fuzz target: its name, inputs to start from, words worth inserting, and the function.
pub struct Target {
    pub name: &'static str,
    pub about: &'static str,
    pub seeds: fn() -> Vec<Vec<u8>>,
    pub dictionary: &'static [&'static str],
    pub max_len: usize,
    pub run: fn(&[u8]),
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "har",
        about: "bolide record: HAR files, their WebSocket frames, the flow and the scenario written (which bolide must read back)",
        seeds: har_seeds,
        dictionary: &[
            "\"_webSocketMessages\":[",
            "{\"type\":\"send\",\"time\":1,\"opcode\":1,\"data\":\"",
            "{\"type\":\"receive\",\"time\":2,\"opcode\":1,\"data\":\"",
            "{\\\"msg\\\":\\\"method\\\",\\\"method\\\":\\\"",
            "\\\"params\\\":[",
            "\\\"result\\\":\\\"",
            "HRSDMy25RLcwGu9p6",
            "/sockjs/1/a/websocket",
            "a[\\\"",
        ],
        max_len: 8192,
        run: har,
    },
    Target {
        name: "http-response",
        about: "bolide's HTTP/1.1 response parser, fed whole and in pieces",
        seeds: http_seeds,
        dictionary: &[
            "HTTP/1.1 ",
            "HTTP/1.0 ",
            "200 OK",
            "100 Continue",
            "204",
            "304",
            "\r\n",
            "\r\n\r\n",
            "Content-Length: ",
            "Transfer-Encoding: chunked",
            "Connection: close",
            "Connection: keep-alive",
            "0\r\n\r\n",
            "ffffffffffffffff",
            ";ext=1",
            "18446744073709551616",
        ],
        max_len: 4096,
        run: http_response,
    },
    Target {
        name: "ws-frames",
        about: "WebSocket frame reader (client and server side), messages inflated",
        seeds: ws_seeds,
        dictionary: &["\u{81}", "\u{1}", "\u{80}", "\u{88}", "\u{89}", "\u{8a}", "\u{c1}", "\u{7e}", "\u{7f}"],
        max_len: 4096,
        run: ws_frames,
    },
    Target {
        name: "deflate",
        about: "permessage-deflate: inflating any bytes, and compress-then-inflate round trips",
        seeds: deflate_seeds,
        dictionary: &["\u{0}\u{0}\u{ff}\u{ff}", "\u{2}\u{0}", "\u{3}\u{0}"],
        max_len: 4096,
        run: deflate,
    },
    Target {
        name: "sockjs",
        about: "SockJS frames from servers and clients, and their round trips",
        seeds: sockjs_seeds,
        dictionary: &["a[", "c[", "o", "h", "[\"", "\\\"", "\\u0000", "\\ud800", "\"]", ","],
        max_len: 4096,
        run: sockjs,
    },
    Target {
        name: "ddp",
        about: "DDP messages and EJSON values, with exact round trips",
        seeds: ddp_seeds,
        dictionary: &[
            "{\"msg\":\"",
            "\"id\":\"",
            "\"fields\":",
            "\"$date\":",
            "\"$binary\":",
            "\"$escape\":",
            "\"$type\":",
            "\"$value\":",
            "\"$InfNaN\":",
            "\"cleared\":[",
            "\"params\":[",
            "1e308",
            "-0",
            "null",
        ],
        max_len: 4096,
        run: ddp_messages,
    },
    Target {
        name: "socketio",
        about: "Socket.IO: Engine.IO polling payloads and packets, Socket.IO packets (namespaces, acks, binary, watched events)",
        seeds: socketio_seeds,
        dictionary: &[
            "\n",
            "\u{1e}",
            "0{\"sid\":\"",
            "\"upgrades\":[\"websocket\"]",
            "\"pingInterval\":",
            "\"pingTimeout\":",
            "40",
            "41",
            "42[\"r\",",
            "430[",
            "44{\"message\":\"",
            "/admin,",
            "451-",
            "{\"_placeholder\":true,\"num\":0}",
            "2probe",
            "3probe",
            "\"sentAt\":",
            "{\"$date\":",
            "2026-11-28T17:00:00Z",
            "18446744073709551616",
            "{\"ok\":true}",
        ],
        max_len: 4096,
        run: socketio,
    },
    Target {
        name: "graphql-ws",
        about: "graphql-ws (graphql-transport-ws) messages from a server, moving operations in flight",
        seeds: graphql_ws_seeds,
        dictionary: &[
            "\n",
            "{\"type\":\"",
            "\"id\":\"1\",",
            "\"id\":\"2\",",
            "\"id\":\"3\",",
            "connection_ack",
            "next",
            "error",
            "complete",
            "ping",
            "\"payload\":",
            "{\"data\":",
            "\"errors\":[{\"message\":\"",
            "\"createdAt\":",
            "{\"$date\":",
            "2026-11-28T17:00:00Z",
            "1e308",
            "null",
        ],
        max_len: 4096,
        run: graphql_ws,
    },
    Target {
        name: "sse-stream",
        about: "Server-Sent Events: a stream cut into reads anywhere reads the same events, and a chunked body unframes the same",
        seeds: sse_seeds,
        dictionary: &[
            "\r\n", "\n", "\r", "data: ", "event: ", "id: ", "retry: ", ": ", "\u{feff}", "\r\n\r\n", "0\r\n\r\n",
            "5\r\n", "[DONE]",
        ],
        max_len: 4096,
        run: sse_stream,
    },
    Target {
        name: "prometheus-text",
        about: "--scrape: the exposition text reader and the bounded scraper (what it keeps is what it writes, and reads back)",
        seeds: prometheus_seeds,
        dictionary: &[
            "# TYPE ",
            " counter\n",
            " gauge\n",
            " histogram\n",
            " summary\n",
            "_bucket{le=\"",
            "\"} ",
            "_sum ",
            "_count ",
            "{quantile=\"0.99\"}",
            "NaN",
            "+Inf",
            "-Inf",
            "\\\"",
            "\\n",
            ",}",
            "1e308",
        ],
        max_len: 4096,
        run: prometheus_text,
    },
    Target {
        name: "scenario",
        about: "scenario files: the YAML reader and the scenario loader",
        seeds: scenario_seeds,
        dictionary: &[
            "config:\n",
            "scenarios:\n",
            "  - ",
            "phases:",
            "duration: ",
            "arrivalRate: ",
            "rampTo: ",
            "arrivalCount: ",
            "flow:\n",
            "- call: ",
            "- think: ",
            "- loop:\n",
            "count: ",
            "&a ",
            "*a",
            "<<: ",
            "{{ ",
            " }}",
            "\"",
            "'",
            "1e20",
            "-1",
            "---\n",
            "? ",
            "!!str ",
        ],
        max_len: 8192,
        run: scenario,
    },
];

fn strings(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|s| s.as_bytes().to_vec()).collect()
}

// --- HTTP -----------------------------------------------------------------------------------

fn http_seeds() -> Vec<Vec<u8>> {
    // The first byte is the control byte (HEAD or not, piece size); the response follows.
    strings(&[
        "\u{0}HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "\u{2}HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nTrailer: t\r\n\r\n",
        "\u{4}HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.0 200 OK\r\n\r\nbody until close",
        "\u{1}HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
        "\u{6}HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nokHTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
    ])
}

/// Everything one connection's parser reports for a byte stream. Errors compare equal whatever
/// their detail: fed in pieces, a bad head can be caught earlier and named differently, but it
/// must be an error at the same point of the stream.
#[derive(Debug, PartialEq)]
enum Seen {
    Response(bolide::proto::http::parser::Response),
    Error,
    Eof(Option<bolide::proto::http::parser::Response>),
}

/// Feeds `data` to a parser `piece` bytes at a time, as a connection would, following the
/// parser's contract (unconsumed bytes are offered again).
fn http_parse(data: &[u8], expect_body: bool, piece: usize) -> Vec<Seen> {
    let mut parser = ResponseParser::new(1024);
    parser.start(expect_body);
    let mut seen = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    // Each step either feeds bytes or consumes some; the bound catches a parser that does neither.
    for _ in 0..(4 * data.len() + 16) {
        let end = (fed + piece).min(data.len());
        buf.extend_from_slice(&data[fed..end]);
        fed = end;
        match parser.advance(&buf) {
            Ok(Progress::More { consumed }) => {
                assert!(consumed <= buf.len(), "consumed {consumed} of {} bytes", buf.len());
                buf.drain(..consumed);
                if fed == data.len() {
                    seen.push(match parser.eof() {
                        Ok(r) => Seen::Eof(r),
                        Err(_) => Seen::Error,
                    });
                    return seen;
                }
            }
            Ok(Progress::Done { consumed, response }) => {
                assert!(consumed <= buf.len(), "consumed {consumed} of {} bytes", buf.len());
                assert!(consumed > 0, "a response ended without consuming a byte");
                buf.drain(..consumed);
                seen.push(Seen::Response(response));
                if !response.keep_alive {
                    return seen;
                }
                parser.start(expect_body);
                if buf.is_empty() && fed == data.len() {
                    return seen;
                }
            }
            Err(_) => {
                seen.push(Seen::Error);
                return seen;
            }
        }
    }
    panic!("the parser made no progress on {} bytes", data.len());
}

fn http_response(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let expect_body = ctl & 1 == 0;
    let piece = 1 + usize::from(ctl >> 1) % 32;
    let whole = http_parse(rest, expect_body, rest.len().max(1));
    let pieces = http_parse(rest, expect_body, piece);
    assert_eq!(whole, pieces, "the same bytes parsed differently whole and in pieces of {piece}");
}

// --- WebSocket ------------------------------------------------------------------------------

fn ws_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let mut compressed = Vec::new();
    Deflate::new(1, 9).compress(br#"{"msg":"ping"}"#, true, &mut compressed);
    for (ctl, mask) in [(0u8, None), (1u8, Some([1, 2, 3, 4]))] {
        let mut s = vec![ctl | 2];
        ws::encode_frame(&mut s, Opcode::Text, false, br#"{"msg":"ping"}"#, mask);
        ws::encode_frame(&mut s, Opcode::Ping, false, b"hi", mask);
        ws::encode_frame(&mut s, Opcode::Text, true, &compressed, mask);
        ws::encode_frame(&mut s, Opcode::Binary, false, &[7u8; 300], mask);
        ws::encode_frame(&mut s, Opcode::Close, false, &ws::close_payload(1000, "bye"), mask);
        seeds.push(s);
        // A fragmented message with a ping between its fragments.
        let mut f = vec![ctl];
        let mut frag = Vec::new();
        ws::encode_frame(&mut frag, Opcode::Text, false, b"{\"msg\":", mask);
        frag[0] &= 0x7f;
        f.extend_from_slice(&frag);
        ws::encode_frame(&mut f, Opcode::Ping, false, b"", mask);
        ws::encode_frame(&mut f, Opcode::Continuation, false, b"\"pong\"}", mask);
        seeds.push(f);
    }
    seeds
}

fn ws_frames(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let from_client = ctl & 1 != 0;
    let deflate = ctl & 2 != 0;
    let max = [125, 1 << 10, 1 << 16][usize::from(ctl >> 2) % 3];
    let mut buf = rest.to_vec();
    let mut reader = ws::Reader::new(from_client, max, deflate);
    let mut inflater = Deflate::new(1, 15);
    let mut pos = 0;
    while let Ok(Some((used, message))) = reader.next(&mut buf[pos..]) {
        assert!(used > 0 && pos + used <= buf.len(), "used {used} at {pos} of {}", buf.len());
        pos += used;
        match message {
            Some(Incoming::Data { compressed: true, payload, .. }) => {
                assert!(deflate, "a compressed message without permessage-deflate");
                if let Ok(text) = inflater.decompress(&payload, true, max) {
                    assert!(text.len() <= max, "inflated {} bytes past the limit {max}", text.len());
                }
            }
            Some(Incoming::Data { payload, .. }) => assert!(payload.len() <= max),
            Some(Incoming::Ping(p) | Incoming::Pong(p)) => assert!(p.len() <= 125),
            _ => {}
        }
    }
    // Any payload framed by us reads back as itself, masked or not.
    let mask = (ctl & 4 != 0).then_some([ctl, 0x5a, 0xa5, 0x0f]);
    let mut framed = Vec::new();
    ws::encode_frame(&mut framed, Opcode::Binary, false, rest, mask);
    let mut reader = ws::Reader::new(mask.is_some(), 1 << 20, false);
    let expected = Incoming::Data { opcode: Opcode::Binary, compressed: false, payload: rest.to_vec() };
    let len = framed.len();
    assert_eq!(reader.next(&mut framed), Ok(Some((len, Some(expected)))), "a frame did not read back");
}

// --- permessage-deflate ---------------------------------------------------------------------

fn deflate_seeds() -> Vec<Vec<u8>> {
    let mut seeds = strings(&[
        "\u{9}{\"msg\":\"added\",\"collection\":\"tasks\",\"id\":\"abc\",\"fields\":{\"text\":\"hello\"}}",
        "\u{f}aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ]);
    let mut c = vec![0x8f];
    Deflate::new(1, 15).compress(b"hello hello hello hello", true, &mut c);
    seeds.push(c);
    seeds
}

fn deflate(data: &[u8]) {
    let Some((&ctl, rest)) = data.split_first() else { return };
    let reset = ctl & 0x80 != 0;
    let window = 9 + (ctl & 0x7f) % 7;
    let max = 1 << 16;
    // Arbitrary bytes inflate to at most `max`, or fail.
    let mut d = Deflate::new(1, window);
    if let Ok(out) = d.decompress(rest, reset, max) {
        assert!(out.len() <= max);
    }
    // Whatever we compress inflates back to itself, with or without context takeover.
    let mut ours = Deflate::new(1, window);
    let mut theirs = Deflate::new(1, window);
    for _ in 0..2 {
        let mut packed = Vec::new();
        ours.compress(rest, reset, &mut packed);
        let back = theirs.decompress(&packed, reset, max).expect("our own compressed message inflates");
        assert_eq!(back, rest, "compress then inflate changed the message");
    }
}

// --- SockJS ---------------------------------------------------------------------------------

fn sockjs_seeds() -> Vec<Vec<u8>> {
    strings(&[
        "o",
        "h",
        r#"a["{\"msg\":\"ping\"}","{\"msg\":\"ready\",\"subs\":[\"a\"]}"]"#,
        r#"c[3000,"Go away!"]"#,
        r#"["{\"msg\":\"sub\",\"id\":\"a\",\"name\":\"n\",\"params\":[]}"]"#,
        r#""{\"msg\":\"pong\"}""#,
    ])
}

fn sockjs(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = ddp::sockjs::parse_server_frame(&text);
    if let Ok(list) = ddp::sockjs::parse_client_frame(&text) {
        let framed = ddp::sockjs::encode_messages(&list);
        assert_eq!(
            ddp::sockjs::parse_server_frame(&framed),
            Ok(ddp::sockjs::ServerFrame::Messages(list.clone())),
            "messages did not survive a server frame"
        );
        for m in &list {
            let one = ddp::sockjs::encode_client(m);
            assert_eq!(ddp::sockjs::parse_client_frame(&one), Ok(vec![m.clone()]), "client frame round trip");
        }
    }
}

// --- DDP and EJSON --------------------------------------------------------------------------

fn ddp_seeds() -> Vec<Vec<u8>> {
    strings(&[
        r#"{"msg":"connect","version":"1","support":["1","pre2","pre1"]}"#,
        r#"{"msg":"added","collection":"c","id":"1","fields":{"a":{"$date":5},"b":{"$binary":"AAE="}}}"#,
        r#"{"msg":"changed","collection":"c","id":"1","fields":{"x":{"$escape":{"$type":1}}},"cleared":["y"]}"#,
        r#"{"msg":"result","id":"1","error":{"error":404,"reason":"r","details":"d"}}"#,
        r#"{"msg":"method","method":"insertTask","params":[{"text":"t","n":{"$InfNaN":1}}],"id":"7","randomSeed":"s"}"#,
        r#"{"msg":"sub","id":"a","name":"fetchTasks","params":[{"$type":"oid","$value":"abc"}]}"#,
        r#"{"msg":"nosub","id":"a","error":{"error":"e","reason":"r","message":"m","errorType":"Meteor.Error"}}"#,
        r#"{"msg":"updated","methods":["1","2"]}"#,
    ])
}

fn ddp_messages(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(message) = ddp::Message::parse(text) {
        let again = ddp::Message::parse(&message.to_json());
        assert_eq!(again.as_ref(), Ok(&message), "a message did not survive its own JSON");
    }
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        if let Ok(e) = ddp::Ejson::from_json(&value) {
            let json = e.to_json();
            assert_eq!(ddp::Ejson::from_json(&json).as_ref(), Ok(&e), "EJSON value changed on a round trip");
        }
    }
}

// --- Socket.IO ----------------------------------------------------------------------------

fn socketio_seeds() -> Vec<Vec<u8>> {
    // The first byte is the control byte (namespace, what the watch wants, whether the pieces
    // after the first come over a WebSocket); the pieces follow, one a line.
    strings(&[
        "\u{0}0{\"sid\":\"s1\",\"upgrades\":[\"websocket\"],\"pingInterval\":25000,\"pingTimeout\":20000}\n40{\"sid\":\"x\"}\u{1e}2\n42[\"r\",{\"ok\":true,\"sentAt\":1795477935652}]\u{1e}430[\"done\"]\n41",
        "\u{8}0{\"sid\":\"s1\",\"upgrades\":[\"websocket\"]}\u{1e}40\n3probe\n42[\"r\",1]\n42[\"r\",2]\n2\n430[1]\n1",
        "\u{3}0{\"sid\":\"s2\",\"pingInterval\":18446744073709551616}\n40/admin,{\"sid\":\"y\"}\n42/admin,[\"r\",\"it is ok\"]\u{1e}42/chat,[\"r\"]\n44/admin,{\"message\":\"not authorized\"}",
        "\u{4}0{}\n451-[\"r\",{\"_placeholder\":true,\"num\":0}]\u{1e}bAQID\u{1e}461-/admin,0[{\"_placeholder\":true,\"num\":0}]\n6\u{1e}3\u{1e}5",
        "\u{6}42[\"r\",{\"sentAt\":\"2026-11-28T17:00:00Z\"}]\u{1e}42[\"r\",{\"a\":{\"sentAt\":{\"$date\":1795477935652}}}]\u{1e}42[\"r\",{\"ok\":true}]\u{1e}4312[]",
    ])
}

fn socketio(data: &[u8]) {
    use bolide::realtime::socketio::wire::{self, Want};
    let Some((&ctl, rest)) = data.split_first() else { return };
    let nsp = if ctl & 1 != 0 { "/admin" } else { "/" };
    let want = match (ctl >> 1) & 3 {
        0 => Want::Any,
        1 => Want::All(vec![Value::from(1), Value::from(2)]),
        2 => Want::Contains("ok".into()),
        _ => Want::Equals(serde_json::json!({"ok": true})),
    };
    // Polling answers, or the first one and then WebSocket messages (an upgrade).
    let pieces: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
    let (polled, ws) = pieces.split_at(if ctl & 8 != 0 { 1 } else { pieces.len() });
    let texts: Vec<String> = ws.iter().map(|t| String::from_utf8_lossy(t).into_owned()).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (traffic, replies, answer, _ack) = wire::feed(nsp, ("r", want.clone()), polled, &texts);

    // Every Engine.IO packet a server sent, as bolide splits them.
    let mut packets: Vec<String> = Vec::new();
    for body in polled {
        packets.extend(String::from_utf8_lossy(body).split('\u{1e}').filter(|p| !p.is_empty()).map(String::from));
    }
    assert_eq!(traffic.messages_in, packets.len() as u64, "polled packets miscounted");
    packets.extend(texts.iter().map(|t| t.to_string()));
    // Each ping answered with its pong, in order, and nothing else.
    let pongs: Vec<String> = packets.iter().filter_map(|p| p.strip_prefix('2')).map(|r| format!("3{r}")).collect();
    assert_eq!(replies, pongs, "pings not answered one for one");
    // What answered the watch does answer it.
    if let Some(kept) = answer {
        match &want {
            Want::All(all) => assert_eq!(&kept, all, "a list answered by other arguments"),
            w => assert!(w.answers(&kept), "{kept:?} answered {w:?}"),
        }
    }
    // An event bolide would write reads back as itself.
    for p in packets.iter().filter_map(|p| p.strip_prefix('4')) {
        let Some(wire::Packet { kind: b'2', nsp, id, data: Some(Value::Array(args)) }) = wire::parse_packet(p) else {
            continue;
        };
        let written = wire::event_packet(nsp, id, &args);
        let back = wire::parse_packet(&written).unwrap_or_else(|| panic!("{written:?} does not parse"));
        assert_eq!((back.kind, back.nsp, back.id), (b'2', nsp, id), "{p:?} written as {written:?}");
        assert_eq!(back.data, Some(Value::Array(args)), "{p:?} written as {written:?}");
    }
}

// --- graphql-ws -----------------------------------------------------------------------------

fn graphql_ws_seeds() -> Vec<Vec<u8>> {
    // One message a line.
    strings(&[
        "{\"type\":\"connection_ack\"}\n{\"type\":\"ping\",\"payload\":{}}\n{\"id\":\"1\",\"type\":\"next\",\"payload\":{\"data\":{\"taskAdded\":{\"createdAt\":1795477935652}}}}\n{\"id\":\"2\",\"type\":\"next\",\"payload\":{\"data\":{\"x\":1}}}\n{\"id\":\"2\",\"type\":\"complete\"}",
        "{\"id\":\"1\",\"type\":\"error\",\"payload\":[{\"message\":\"boom\"},{\"locations\":[]}]}\n{\"id\":\"3\",\"type\":\"next\",\"payload\":{\"data\":{\"a\":{\"b\":{\"createdAt\":\"2026-11-28T17:00:00.123Z\"}}}}}",
        "{\"id\":\"2\",\"type\":\"next\",\"payload\":{\"data\":null,\"errors\":[{\"message\":\"no\"},\"odd\"]}}\n{\"type\":\"pong\"}\nnot json\n{\"type\":\"ka\"}\n[1]",
        "{\"id\":\"1\",\"type\":\"next\",\"payload\":{\"data\":{\"createdAt\":{\"$date\":1795477935652}}}}\n{\"id\":\"1\",\"type\":\"next\",\"payload\":{\"errors\":{\"message\":1}}}",
    ])
}

fn graphql_ws(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let texts: Vec<&str> = text.split('\n').collect();
    let (traffic, replies, ops) = bolide::realtime::graphql::wire::feed(&texts);
    // The same messages read by serde_json alone: what each one must have done.
    let (mut pings, mut nexts, mut errors, mut completes, mut bad) = (0, 0, 0, 0, 0);
    let mut want = [(0u64, false); 2];
    for t in &texts {
        let Ok(msg) = serde_json::from_str::<Value>(t) else {
            bad += 1;
            continue;
        };
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default();
        let op = ["1", "2"].iter().position(|&o| o == id);
        match msg.get("type").and_then(Value::as_str).unwrap_or_default() {
            "ping" => pings += 1,
            "next" => {
                nexts += 1;
                if let Some(i) = op {
                    want[i].0 += 1;
                }
            }
            kind @ ("error" | "complete") => {
                if kind == "error" {
                    errors += 1;
                } else {
                    completes += 1;
                }
                if let Some(i) = op {
                    want[i].1 = true;
                }
            }
            "connection_ack" | "pong" => {}
            _ => bad += 1,
        }
    }
    assert_eq!(replies, vec![r#"{"type":"pong"}"#.to_string(); pings], "pings not answered one for one");
    assert_eq!(ops, want, "operations' next messages or completion");
    assert_eq!(traffic.protocol_errors, bad, "protocol errors");
    let count = |name| traffic.events.get(name).copied().unwrap_or_default();
    assert_eq!(count("graphql.next_received"), nexts);
    assert_eq!(count("graphql.errors_received"), errors);
    assert_eq!(count("graphql.complete_received"), completes);
}

// --- sse-stream -------------------------------------------------------------------------------

fn sse_seeds() -> Vec<Vec<u8>> {
    strings(&[
        "\u{feff}: hi\r\nevent: tick\r\nid: 7\r\nretry: 1500\r\ndata: a\r\ndata: b\r\n\r\ndata:x\n\ndata\n\nid\n\r",
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
        "5\r\nhello\r\n6;x=1\r\n world\r\n0\r\nT: 1\r\n\r\n",
    ])
}

fn sse_stream(data: &[u8]) {
    use bolide::realtime::sse::wire;
    let (a, b) = match data {
        [x, y, ..] => (*x as usize % (data.len() + 1), *y as usize % (data.len() + 1)),
        _ => (0, 0),
    };
    let (a, b) = (a.min(b), a.max(b));
    let whole = wire::feed(&[data]);
    assert_eq!(wire::feed(&[&data[..a], &data[a..b], &data[b..]]), whole, "cut at {a} and {b}");
    for (name, data, id) in &whole.0 {
        assert!(!name.contains(['\r', '\n']) && !data.contains('\r'), "{name:?} {data:?}");
        assert!(id.as_deref().is_none_or(|i| !i.contains(['\0', '\r', '\n'])), "{id:?}");
    }
    let one = wire::unchunk(&[data]);
    let cut = wire::unchunk(&[&data[..a], &data[a..b], &data[b..]]);
    match (&one, &cut) {
        (Ok(x), Ok(y)) => assert_eq!(x, y, "chunked body cut at {a} and {b}"),
        (Err(_), Err(_)) => {}
        _ => panic!("a chunked body read whole and cut at {a}, {b}: {one:?} and {cut:?}"),
    }
}

// --- scenario files -------------------------------------------------------------------------

fn scenario_seeds() -> Vec<Vec<u8>> {
    let mut seeds = strings(&[
        include_str!("../../../examples/tasks-reactive.yml"),
        include_str!("../../../examples/tasks-nonreactive.yml"),
        include_str!("../../../examples/sub-churn.yml"),
        "config:\n  target: ws://127.0.0.1:3000\n  phases:\n    - duration: 1\n      arrivalCount: 2\n    - pause: 1\nscenarios:\n  - flow:\n      - think: [1, 2]\n      - loop:\n          - call: m\n            params: [\"{{ $uuid }}\"]\n        count: 2\n",
        "a: &x [1, 2]\nb: *x\nc: {d: 'e', f: \"g\\n\"}\n",
    ]);
    seeds.push(
        b"config:\n  target: http://127.0.0.1\n  ensure:\n    p99: 100\n    maxErrorRate: 1\nscenarios: []\n".to_vec(),
    );
    seeds
}

fn scenario(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = bolide::scenario::yaml::parse(&text);
    // Payload files are looked up under a directory that does not exist: nothing is read.
    let base = std::path::Path::new("/nonexistent/bolide-fuzz");
    if let Err(e) = bolide::scenario::yaml::load_str(&text, "fuzz.yml", base) {
        // Every problem is printable (positions, hints) without panicking.
        let _ = e.to_string();
    }
}

// --- HAR files (bolide record) ----------------------------------------------------------------

fn prometheus_seeds() -> Vec<Vec<u8>> {
    strings(&[
        "# HELP hits_total Hits.\n# TYPE hits_total counter\nhits_total{route=\"/a\"} 3\n# TYPE temp gauge\ntemp 21.5\n",
        "# TYPE req histogram\nreq_bucket{le=\"0.1\"} 1\nreq_bucket{le=\"+Inf\"} 4\nreq_sum 2.5\nreq_count 4\n",
        "# TYPE lag summary\nlag{quantile=\"0.99\"} 0.02\nlag_sum 1\nlag_count 10\nup{a=\"x,y\",b=\"\\\"q\\\"\"} 1 1700000000000\n",
        "# TYPE n histogram\nn_bucket{le=\"NaN\"} 1\nn_bucket{le=\"1\"} NaN\nn_bucket{le=\"+Inf\"} NaN\n",
    ])
}

fn prometheus_text(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    use bolide::monitor::scrape::{parse_spec, Scraper};
    let mut s = Scraper::new(parse_spec("x=http://127.0.0.1:1/metrics").unwrap(), None, 3);
    // The same text twice (a counter's increase), then half of it: never more than the limit kept.
    s.take_text(0.0, Ok(text.to_string()));
    s.take_text(1.0, Ok(text.to_string()));
    let half = (0..=text.len() / 2).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    s.take_text(2.0, Ok(text[..half].to_string()));
    let r = s.finish();
    assert!(r.series.len() <= 3);
    for series in &r.series {
        assert!(series.buckets.len() <= bolide::monitor::scrape::MAX_BUCKETS);
        assert_eq!(series.values.len(), 3);
    }
    // What bolide writes of it, bolide reads back.
    let json = serde_json::to_string(&r).unwrap();
    let back: bolide::monitor::scrape::ScrapeResult =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(back.series.len(), r.series.len());
}

fn har_seeds() -> Vec<Vec<u8>> {
    strings(&[
        r#"{"log":{"entries":[{"request":{"url":"ws://127.0.0.1:3000/websocket"},"_webSocketMessages":[
{"type":"send","time":1795477935652.0,"opcode":1,"data":"{\"msg\":\"connect\",\"version\":\"1\"}"},
{"type":"receive","time":1795477935656.5,"opcode":1,"data":"{\"msg\":\"connected\",\"session\":\"s\"}"},
{"type":"send","time":1795477935700.0,"opcode":1,"data":"{\"msg\":\"sub\",\"id\":\"a\",\"name\":\"fetchTasks\",\"params\":[]}"},
{"type":"send","time":1795477936000.0,"opcode":1,"data":"{\"msg\":\"method\",\"method\":\"insertTask\",\"params\":[{\"sessionId\":\"HRSDMy25RLcwGu9p6\"}],\"id\":\"1\"}"},
{"type":"receive","time":1795477936010.0,"opcode":1,"data":"{\"msg\":\"result\",\"id\":\"1\",\"result\":\"JzCEya3bA7yugdpTS\"}"},
{"type":"send","time":1795477936100.0,"opcode":1,"data":"{\"msg\":\"method\",\"method\":\"removeTask\",\"params\":[\"JzCEya3bA7yugdpTS\",\"HRSDMy25RLcwGu9p6\"],\"id\":\"2\"}"}]}]}}"#,
        r#"{"log":{"entries":[{"request":{"url":"wss://x/sockjs/1/a/websocket"},"response":{"headers":[]},"_webSocketMessages":[
{"type":"receive","time":1.0,"opcode":1,"data":"o"},
{"type":"send","time":1.1,"opcode":1,"data":"[\"{\\\"msg\\\":\\\"connect\\\"}\"]"},
{"type":"send","time":1.2,"opcode":1,"data":"[\"{\\\"msg\\\":\\\"method\\\",\\\"method\\\":\\\"login\\\",\\\"id\\\":\\\"1\\\",\\\"params\\\":[{\\\"resume\\\":\\\"t\\\"}]}\"]"},
{"type":"receive","time":1.3,"opcode":1,"data":"c[3000,\"Go away\"]"}]}]}}"#,
        r#"{"log":{"entries":[
{"startedDateTime":"2026-11-24T00:00:00.000Z","request":{"method":"POST","url":"http://127.0.0.1:3000/api?x={{ y }}","postData":{"mimeType":"application/json","text":"{\"a\":\"{{ nope }}\",\"password\":\"p\"}"}},"response":{"status":200,"content":{"mimeType":"application/json"}}},
{"startedDateTime":"2026-11-24T00:00:00.100+01:00","time":5,"request":{"method":"POST","url":"http://127.0.0.1:3000/form","postData":{"mimeType":"text/plain","text":"hello {{ x }}"}},"response":{"status":200,"content":{"mimeType":"text/css"}}},
{"request":{"url":"ws://127.0.0.1:3000/websocket"},"_webSocketMessages":[{"type":"send","time":1795478400.5,"opcode":1,"data":"{\"msg\":\"connect\"}"},{"type":"send","time":1795478400.6,"opcode":1,"data":"{\"msg\":\"method\",\"method\":\"m\",\"params\":[\"{{ z }}\"],\"id\":\"1\"}"},{"type":"receive","time":1795478400.7,"opcode":1,"data":"{\"msg\":\"added\",\"collection\":\"c\",\"id\":\"{{\"}"},{"type":"receive","time":1795478400.8,"opcode":1,"data":"{\"msg\":\"result\",\"id\":\"1\",\"result\":\"{{\"}"},{"type":"send","time":1795478400.9,"opcode":1,"data":"{\"msg\":\"method\",\"method\":\"m\",\"params\":[\"{{\"],\"id\":\"2\"}"}]}]}}"#,
    ])
}

fn har(data: &[u8]) {
    let Ok(mut har) = bolide::record::har::parse(data) else { return };
    let total = har.connections.len();
    let opts = bolide::record::flow::Options {
        correlate: true,
        think_scale: 1.0,
        think_max: std::time::Duration::from_secs(10),
    };
    for (i, c) in har.connections.iter_mut().enumerate() {
        let mut other = 0;
        let messages = bolide::record::har::messages(c, &mut other);
        if !bolide::record::har::is_ddp(&messages) {
            continue;
        }
        // A connection whose URL is no ws:// or wss:// URL is refused by bolide record.
        let Ok(target) = bolide::record::har::target(&c.url) else { continue };
        // Every plain request kept, static assets too, so that the writer meets all of them.
        let choice = bolide::record::flow::HttpChoice { ddp_only: false, keep_static: true };
        let http = bolide::record::flow::pick_requests(
            &har.requests,
            &target,
            f64::NEG_INFINITY,
            f64::INFINITY,
            choice,
            &mut Vec::new(),
        );
        let rec = bolide::record::flow::build(&messages, &http, &opts);
        // The payload's columns as variables, as bolide record checks a scenario before writing it.
        let text = bolide::record::scenario(&[(i + 1, rec)], c, &target, std::path::Path::new("fuzz.har"), total, true);
        // What bolide record writes, bolide run reads (a session too large for a scenario is
        // refused by record with its reason, never written).
        let base = std::path::Path::new("/nonexistent/bolide-fuzz");
        if text.len() > bolide::scenario::yaml::MAX_FILE_BYTES {
            continue;
        }
        if let Err(e) = bolide::scenario::yaml::load_str(&text, "recorded.yml", base) {
            let e = e.to_string();
            assert!(
                e.contains("this file holds more than"),
                "bolide record wrote a scenario bolide cannot read: {e}\n{text}"
            );
        }
    }
}

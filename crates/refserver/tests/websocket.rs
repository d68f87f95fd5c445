//! WebSocket conformance of the reference server, case by case as the Autobahn suite checks it
//! (framing, pings, fragmentation, UTF-8, close codes, permessage-deflate), through `/echo`: the
//! DDP routes' own connection code, sending messages back instead of reading DDP. The suite itself
//! runs with `bench/autobahn.sh`; these cases keep its verdicts on every build.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ddp::ws::{self, close_payload, Deflate, Incoming, Opcode};
use refserver::{DdpConfig, Server};

/// What the client saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Pong(Vec<u8>),
    /// The server's close code (None: a close frame without one).
    Close(Option<u16>),
}

fn echo_server(compression: bool) -> Server {
    common::server_with(DdpConfig { ws_echo: true, compression, ..DdpConfig::default() })
}

struct Peer {
    stream: TcpStream,
    reader: ws::Reader,
    inflate: Option<Deflate>,
    buf: Vec<u8>,
}

impl Peer {
    fn open(server: &Server, offer_deflate: bool) -> Peer {
        let mut stream = TcpStream::connect(server.addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let key = ws::client_key();
        let offer =
            if offer_deflate { format!("Sec-WebSocket-Extensions: {}\r\n", ws::CLIENT_OFFER) } else { String::new() };
        let req = format!(
            "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n"
        );
        stream.write_all(req.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).unwrap(), 1, "server closed during the upgrade");
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let ext = head.lines().find_map(|l| l.strip_prefix("Sec-WebSocket-Extensions: "));
        let deflate = ws::client_accept_deflate(ext).unwrap().is_some();
        assert_eq!(deflate, offer_deflate, "{head}");
        Peer {
            stream,
            reader: ws::Reader::new(false, 1 << 24, deflate),
            inflate: deflate.then(|| Deflate::new(1, 15)),
            buf: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// Everything the server sends until it closes the connection (or 5 s of silence).
    fn events(&mut self) -> Vec<Ev> {
        let mut out = Vec::new();
        loop {
            match self.reader.next(&mut self.buf) {
                Ok(Some((used, msg))) => {
                    self.buf.drain(..used);
                    match msg {
                        Some(Incoming::Data { opcode, compressed, payload }) => {
                            let payload = if compressed {
                                self.inflate.as_mut().unwrap().decompress(&payload, true, 1 << 24).unwrap()
                            } else {
                                payload
                            };
                            out.push(if opcode == Opcode::Text { Ev::Text(payload) } else { Ev::Binary(payload) });
                        }
                        Some(Incoming::Pong(p)) => out.push(Ev::Pong(p)),
                        Some(Incoming::Close { code, .. }) => out.push(Ev::Close(code)),
                        Some(Incoming::Ping(_)) | None => {}
                    }
                }
                Ok(None) => {
                    let mut chunk = [0u8; 65536];
                    match self.stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return out,
                        Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    }
                }
                Err(e) => panic!("the server broke the protocol: {e}"),
            }
        }
    }
}

/// A masked client frame; `fin` false leaves the message open.
fn frame(opcode: Opcode, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut w = Vec::new();
    ws::encode_frame(&mut w, opcode, false, payload, Some([0x37, 0xfa, 0x21, 0x3d]));
    if !fin {
        w[0] &= 0x7f;
    }
    w
}

fn close(code: u16) -> Vec<u8> {
    frame(Opcode::Close, true, &close_payload(code, ""))
}

/// Sends `wire` followed by a normal close, returns what came back.
fn exchange(server: &Server, wire: Vec<u8>) -> Vec<Ev> {
    let mut p = Peer::open(server, false);
    p.send(&wire);
    p.send(&close(1000));
    p.events()
}

#[test]
fn framing_pings_fragments_utf8_and_close_codes() {
    let server = echo_server(false);
    let big = |n: usize| (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let cat = |parts: &[Vec<u8>]| parts.concat();
    let mut bad_reason = close_payload(1000, "");
    bad_reason.extend_from_slice(&[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5, 0xed, 0xa0, 0x80]);
    // Each row: Autobahn's section, what the client sends (a close 1000 follows), what it gets.
    let rows: Vec<(&str, Vec<u8>, Vec<Ev>)> = vec![
        ("1.1.1 empty text", frame(Opcode::Text, true, b""), vec![Ev::Text(vec![]), Ev::Close(Some(1000))]),
        (
            "1.1.2 125 bytes",
            frame(Opcode::Text, true, &[b'*'; 125]),
            vec![Ev::Text(vec![b'*'; 125]), Ev::Close(Some(1000))],
        ),
        (
            "1.1.3 126 bytes",
            frame(Opcode::Text, true, &[b'*'; 126]),
            vec![Ev::Text(vec![b'*'; 126]), Ev::Close(Some(1000))],
        ),
        (
            "1.1.6 65535 bytes",
            frame(Opcode::Text, true, &[b'*'; 65535]),
            vec![Ev::Text(vec![b'*'; 65535]), Ev::Close(Some(1000))],
        ),
        (
            "1.2.7 65536 binary",
            frame(Opcode::Binary, true, &big(65536)),
            vec![Ev::Binary(big(65536)), Ev::Close(Some(1000))],
        ),
        (
            "2.3 ping with binary",
            frame(Opcode::Ping, true, &[0, 0xff, 0xfe, 0xfd]),
            vec![Ev::Pong(vec![0, 0xff, 0xfe, 0xfd]), Ev::Close(Some(1000))],
        ),
        (
            "2.4 ping of 125",
            frame(Opcode::Ping, true, &[b'p'; 125]),
            vec![Ev::Pong(vec![b'p'; 125]), Ev::Close(Some(1000))],
        ),
        ("2.5 ping of 126", frame(Opcode::Ping, true, &[b'p'; 126]), vec![Ev::Close(Some(1002))]),
        (
            "2.7 unsolicited pong",
            cat(&[frame(Opcode::Pong, true, b"x"), frame(Opcode::Text, true, b"after")]),
            vec![Ev::Text(b"after".to_vec()), Ev::Close(Some(1000))],
        ),
        (
            "3.1 RSV1 without an extension",
            {
                let mut f = frame(Opcode::Text, true, b"x");
                f[0] |= 0x40;
                f
            },
            vec![Ev::Close(Some(1002))],
        ),
        (
            "3.2 RSV2",
            {
                let mut f = frame(Opcode::Text, true, b"x");
                f[0] |= 0x20;
                f
            },
            vec![Ev::Close(Some(1002))],
        ),
        (
            "4.1.1 opcode 3",
            {
                let mut f = frame(Opcode::Text, true, b"");
                f[0] = 0x83;
                f
            },
            vec![Ev::Close(Some(1002))],
        ),
        (
            "4.2.1 opcode 11",
            {
                let mut f = frame(Opcode::Text, true, b"");
                f[0] = 0x8b;
                f
            },
            vec![Ev::Close(Some(1002))],
        ),
        ("5.1 fragmented ping", frame(Opcode::Ping, false, b"a"), vec![Ev::Close(Some(1002))]),
        (
            "5.3 text in 2 fragments",
            cat(&[frame(Opcode::Text, false, b"frag"), frame(Opcode::Continuation, true, b"ment")]),
            vec![Ev::Text(b"fragment".to_vec()), Ev::Close(Some(1000))],
        ),
        (
            "5.6 ping between fragments",
            cat(&[
                frame(Opcode::Text, false, b"fr"),
                frame(Opcode::Ping, true, b"mid"),
                frame(Opcode::Continuation, false, b"agm"),
                frame(Opcode::Continuation, true, b"ent"),
            ]),
            vec![Ev::Pong(b"mid".to_vec()), Ev::Text(b"fragment".to_vec()), Ev::Close(Some(1000))],
        ),
        ("5.9 continuation without a start", frame(Opcode::Continuation, true, b"x"), vec![Ev::Close(Some(1002))]),
        (
            "5.18 a new message inside a fragmented one",
            cat(&[frame(Opcode::Text, false, b"a"), frame(Opcode::Text, true, b"b")]),
            vec![Ev::Close(Some(1002))],
        ),
        (
            "6.2 valid UTF-8 split inside a code point",
            cat(&[
                frame(Opcode::Text, false, &[0xce, 0xba, 0xe1]),
                frame(Opcode::Continuation, true, &[0xbd, 0xb9, 0xcf, 0x83]),
            ]),
            vec![Ev::Text(vec![0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83]), Ev::Close(Some(1000))],
        ),
        ("6.3 invalid UTF-8", frame(Opcode::Text, true, &[0xce, 0xba, 0xed, 0xa0, 0x80]), vec![Ev::Close(Some(1007))]),
        (
            "6.4 invalid UTF-8 across fragments",
            cat(&[frame(Opcode::Text, false, b"ok"), frame(Opcode::Continuation, true, &[0xf4, 0x90, 0x80, 0x80])]),
            vec![Ev::Close(Some(1007))],
        ),
        ("7.3.1 close without a code", frame(Opcode::Close, true, b""), vec![Ev::Close(Some(1000))]),
        ("7.3.2 close of one byte", frame(Opcode::Close, true, b"\x03"), vec![Ev::Close(Some(1002))]),
        ("7.5.1 close reason not UTF-8", frame(Opcode::Close, true, &bad_reason), vec![Ev::Close(Some(1007))]),
        ("7.7.x close 1001 echoed", close(1001), vec![Ev::Close(Some(1001))]),
        ("7.7.x close 3000 echoed", close(3000), vec![Ev::Close(Some(3000))]),
        ("7.7.x close 4999 echoed", close(4999), vec![Ev::Close(Some(4999))]),
        ("7.9.1 close 0", close(0), vec![Ev::Close(Some(1002))]),
        ("7.9.2 close 999", close(999), vec![Ev::Close(Some(1002))]),
        ("7.9.4 close 1005", close(1005), vec![Ev::Close(Some(1002))]),
        ("7.9.5 close 1006", close(1006), vec![Ev::Close(Some(1002))]),
        ("7.9.8 close 2000", close(2000), vec![Ev::Close(Some(1002))]),
        (
            "7.1.3 data after close is ignored",
            cat(&[close(1000), frame(Opcode::Text, true, b"late")]),
            vec![Ev::Close(Some(1000))],
        ),
    ];
    for (name, wire, expected) in rows {
        let got = exchange(&server, wire);
        assert_eq!(got, expected, "case {name}");
    }
}

#[test]
fn permessage_deflate_messages_whole_and_in_fragments() {
    let server = echo_server(true);
    let text: Vec<u8> = "Hello, compressed world! ".repeat(200).into_bytes();
    let mut packed = Vec::new();
    Deflate::new(1, 15).compress(&text, true, &mut packed);
    let compressed = |fin: bool, payload: &[u8]| {
        let mut f = frame(Opcode::Text, fin, payload);
        f[0] |= 0x40;
        f
    };
    let (a, b) = packed.split_at(packed.len() / 2);
    let rows: Vec<(&str, Vec<u8>)> = vec![
        ("12.1 one compressed frame", compressed(true, &packed)),
        (
            "13.x compressed message in two fragments",
            [compressed(false, a), frame(Opcode::Continuation, true, b)].concat(),
        ),
        ("13.x an uncompressed message between compressed ones", frame(Opcode::Text, true, &text)),
    ];
    for (name, wire) in rows {
        let mut p = Peer::open(&server, true);
        p.send(&wire);
        p.send(&close(1000));
        // Long replies come back compressed (over the threshold); the reader inflated them.
        assert_eq!(p.events(), vec![Ev::Text(text.clone()), Ev::Close(Some(1000))], "case {name}");
    }
    // RSV1 on a continuation frame is a protocol error.
    let mut p = Peer::open(&server, true);
    let mut cont = frame(Opcode::Continuation, true, b);
    cont[0] |= 0x40;
    p.send(&[compressed(false, a), cont].concat());
    assert_eq!(p.events(), vec![Ev::Close(Some(1002))]);
    // Compressed bytes that do not inflate: 1007.
    let mut p = Peer::open(&server, true);
    p.send(&compressed(true, &[0xff, 0xff, 0xff, 0xff]));
    assert_eq!(p.events(), vec![Ev::Close(Some(1007))]);
}

#[test]
fn echo_is_off_unless_asked() {
    let server = common::server_with(DdpConfig::default());
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 404");
}

//! A small blocking DDP test client built on the shared `ddp` crate's codec, and server set-ups.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use ddp::ws::{self, Deflate, Incoming, Opcode};
use refserver::{Config, DdpConfig, Reactivity, Server};
use serde_json::{json, Value};

/// One way to reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `/websocket`, one message per frame.
    Raw,
    /// `/sockjs/websocket`: also unframed.
    SockJsRaw,
    /// `/sockjs/NNN/xxxxxxxx/websocket`, SockJS framing.
    SockJs,
}

pub const TRANSPORTS: [Transport; 3] = [Transport::Raw, Transport::SockJsRaw, Transport::SockJs];

/// A server with one of the test set-ups.
pub fn server(reactivity: Reactivity, compression: bool) -> Server {
    server_with(DdpConfig { reactivity, compression, ..DdpConfig::default() })
}

pub fn server_with(ddp: DdpConfig) -> Server {
    Server::start(Config { ddp, ..Config::default() }).unwrap()
}

/// Every combination the conformance cases run under.
pub fn setups() -> Vec<(Reactivity, bool, Transport)> {
    let mut out = Vec::new();
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        for compression in [false, true] {
            for t in TRANSPORTS {
                out.push((reactivity, compression, t));
            }
        }
    }
    out
}

pub struct Client {
    stream: TcpStream,
    reader: ws::Reader,
    buf: Vec<u8>,
    transport: Transport,
    deflate: Option<Deflate>,
    pending: std::collections::VecDeque<Value>,
    /// Frames received with RSV1 (compressed) and without.
    pub compressed_frames: usize,
    pub plain_frames: usize,
    /// The close frame, once one arrived.
    pub closed: Option<(Option<u16>, String)>,
    /// The SockJS close frame, if one arrived.
    pub sockjs_close: Option<(u16, String)>,
    pub extensions: Option<String>,
}

fn path(t: Transport) -> String {
    match t {
        Transport::Raw => "/websocket".into(),
        Transport::SockJsRaw => "/sockjs/websocket".into(),
        Transport::SockJs => format!("/sockjs/{}/{}/websocket", 123, "abcd0123"),
    }
}

impl Client {
    /// Opens a WebSocket on the transport's path, offering permessage-deflate like a browser.
    pub fn open(addr: SocketAddr, transport: Transport) -> Client {
        Client::open_with(addr, transport, true).expect("upgrade accepted")
    }

    /// Returns the HTTP status line when the upgrade is refused.
    pub fn open_with(addr: SocketAddr, transport: Transport, offer_deflate: bool) -> Result<Client, String> {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let key = ws::client_key();
        let mut req = format!(
            "GET {} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
            path(transport)
        );
        if offer_deflate {
            req.push_str(&format!("Sec-WebSocket-Extensions: {}\r\n", ws::CLIENT_OFFER));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let status = head.lines().next().unwrap_or_default().to_string();
        if !status.starts_with("HTTP/1.1 101") {
            return Err(status);
        }
        assert!(head.contains(&format!("Sec-WebSocket-Accept: {}", ws::accept_key(&key))), "{head}");
        let extensions = head.lines().find_map(|l| l.strip_prefix("Sec-WebSocket-Extensions: ")).map(str::to_string);
        let deflate = ws::client_accept_deflate(extensions.as_deref()).unwrap().map(|_| Deflate::new(1, 15));
        let mut c = Client {
            stream,
            reader: ws::Reader::new(false, 16 << 20, deflate.is_some()),
            buf: Vec::new(),
            transport,
            deflate,
            pending: Default::default(),
            compressed_frames: 0,
            plain_frames: 0,
            closed: None,
            sockjs_close: None,
            extensions,
        };
        if transport == Transport::SockJs {
            assert_eq!(c.next_text().as_deref(), Some("o"), "SockJS opens with o");
        }
        Ok(c)
    }

    /// Sends a text frame as is (masked; compressed when agreed and `compress`).
    pub fn send_frame(&mut self, text: &str, compress: bool) {
        let mut wire = Vec::new();
        match (&mut self.deflate, compress) {
            (Some(d), true) => {
                let mut packed = Vec::new();
                d.compress(text.as_bytes(), true, &mut packed);
                ws::encode_frame(&mut wire, Opcode::Text, true, &packed, Some(rand::random()));
            }
            _ => ws::encode_frame(&mut wire, Opcode::Text, false, text.as_bytes(), Some(rand::random())),
        }
        let _ = self.stream.write_all(&wire);
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// Sends one DDP message in the transport's framing (compressed every other time when agreed).
    pub fn send(&mut self, msg: Value) {
        let text = msg.to_string();
        let framed = match self.transport {
            Transport::SockJs => ddp::sockjs::encode_client(&text),
            _ => text,
        };
        let compress = self.deflate.is_some() && framed.len() % 2 == 0;
        self.send_frame(&framed, compress);
    }

    /// The next text message, or None when the connection closed or the wait ran out.
    fn next_text(&mut self) -> Option<String> {
        loop {
            match self.reader.next(&mut self.buf) {
                Ok(Some((used, msg))) => {
                    self.buf.drain(..used);
                    match msg {
                        Some(Incoming::Data { compressed, payload, .. }) => {
                            let payload = if compressed {
                                self.compressed_frames += 1;
                                self.deflate.as_mut().unwrap().decompress(&payload, true, 16 << 20).unwrap()
                            } else {
                                self.plain_frames += 1;
                                payload
                            };
                            return Some(String::from_utf8(payload).unwrap());
                        }
                        Some(Incoming::Ping(p)) => {
                            let mut wire = Vec::new();
                            ws::encode_frame(&mut wire, Opcode::Pong, false, &p, Some([1, 2, 3, 4]));
                            let _ = self.stream.write_all(&wire);
                        }
                        Some(Incoming::Close { code, reason }) => {
                            self.closed = Some((code, reason));
                            return None;
                        }
                        _ => {}
                    }
                }
                Ok(None) => {
                    let mut chunk = [0u8; 65536];
                    match self.stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return None,
                        Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                    }
                }
                Err(e) => panic!("server broke the WebSocket protocol: {e}"),
            }
        }
    }

    /// The next DDP message, or None when the connection closed first.
    pub fn try_recv(&mut self) -> Option<Value> {
        while self.pending.is_empty() {
            let text = self.next_text()?;
            match self.transport {
                Transport::SockJs => match ddp::sockjs::parse_server_frame(&text).unwrap() {
                    ddp::sockjs::ServerFrame::Messages(list) => {
                        for m in list {
                            self.pending.push_back(serde_json::from_str(&m).unwrap());
                        }
                    }
                    ddp::sockjs::ServerFrame::Close { code, reason } => self.sockjs_close = Some((code, reason)),
                    other => panic!("unexpected SockJS frame {other:?}"),
                },
                _ => self.pending.push_back(serde_json::from_str(&text).unwrap()),
            }
        }
        self.pending.pop_front()
    }

    pub fn recv(&mut self) -> Value {
        self.try_recv().expect("a message before the connection closed")
    }

    /// Messages until one satisfies `done` (included).
    pub fn recv_until(&mut self, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let m = self.recv();
            let stop = done(&m);
            got.push(m);
            if stop {
                return got;
            }
        }
    }

    /// Waits for the server to close; returns whatever DDP messages came first.
    pub fn until_closed(&mut self, within: Duration) -> Vec<Value> {
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut got = Vec::new();
        while let Some(m) = self.try_recv() {
            got.push(m);
        }
        got
    }

    /// Whether nothing arrives for `d`.
    pub fn silent_for(&mut self, d: Duration) -> bool {
        self.stream.set_read_timeout(Some(d)).unwrap();
        let got = self.try_recv();
        self.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        match got {
            None => true,
            Some(m) => {
                self.pending.push_front(m);
                false
            }
        }
    }

    /// `connect` with the browser's versions; returns the session id.
    pub fn handshake(&mut self) -> String {
        self.send(json!({"msg": "connect", "version": "1", "support": ["1", "pre2", "pre1"]}));
        let m = self.recv();
        assert_eq!(m["msg"], "connected", "{m}");
        m["session"].as_str().unwrap().to_string()
    }

    /// Calls a method; returns (result message, every message up to both result and updated).
    pub fn call(&mut self, id: &str, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.send(json!({"msg": "method", "method": method, "params": params, "id": id}));
        let mut seen = Vec::new();
        let (mut result, mut updated) = (None, false);
        while result.is_none() || !updated {
            let m = self.recv();
            if m["msg"] == "result" && m["id"] == id {
                result = Some(m.clone());
            }
            if m["msg"] == "updated" && m["methods"].as_array().unwrap().iter().any(|x| x == id) {
                updated = true;
            }
            seen.push(m);
        }
        (result.unwrap(), seen)
    }

    /// Subscribes; returns the messages up to `ready` (or `nosub`).
    pub fn sub(&mut self, id: &str, name: &str) -> Vec<Value> {
        self.send(json!({"msg": "sub", "id": id, "name": name, "params": []}));
        self.recv_until(|m| (m["msg"] == "ready" || m["msg"] == "nosub") && (m["subs"][0] == id || m["id"] == id))
    }
}

/// Waits until `cond` holds, for at most `within`.
pub fn eventually(within: Duration, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

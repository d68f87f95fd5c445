//! A WebSocket that carries the text messages of a protocol above it (Engine.IO's packets,
//! graphql-ws's messages), with the DDP client's framing, compression, ping and close handling
//! (`proto::ddp`). One task per link owns the socket, as DDP's does: it hands each message to the
//! protocol's [`Receiver`] (which says what to answer), writes what the user queues, and ends the
//! link when the server is silent longer than the protocol allows. Messages and bytes count into
//! the worker's `Traffic`, as DDP's do.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ddp::ws::{self, Opcode};
use tokio::io::AsyncWriteExt;

use super::http::{tls::Connector, Stream};
use super::outbox;
use super::read::read_appending;
use super::ws::{self as wire, ClientConfig, DdpFailure, Endpoint, Framer, Frames, Outgoing, Traffic};

/// A failed operation of a realtime protocol other than DDP: its class in the result document's
/// `errors_by_class` (`connect`, `timeout`, `disconnect`, `closed`, `protocol`, ...) and what failed,
/// a server's words in it made printable.
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: &'static str,
    pub detail: String,
}

impl Failure {
    pub fn new(class: &'static str, detail: impl AsRef<str>) -> Failure {
        Failure { class, detail: crate::redact::printable(detail.as_ref()).into_owned() }
    }

    /// The transport's failures, in the same classes as DDP's.
    pub fn from_wire(f: DdpFailure) -> Failure {
        Failure::new(f.class(), f.detail())
    }
}

/// What a protocol does with the messages of its link.
pub trait Receiver {
    /// One text message from the server; what to answer goes into `replies`.
    fn text(&self, text: &str, replies: &mut Vec<String>);
    /// The link ended, and why.
    fn ended(&self, why: String);
    /// How long the server may stay silent before the link is dead (None: as long as it likes).
    fn silence(&self) -> Option<Duration>;
}

/// How a link opens: its path (with the query), request headers, the subprotocol the server must
/// choose, whether permessage-deflate is offered.
pub struct Opening<'a> {
    pub path: &'a str,
    pub headers: &'a [(String, String)],
    pub protocol: Option<&'a str>,
    pub compression: bool,
}

/// An open link; dropping it aborts its task (the socket closes without a closing handshake).
pub struct Link {
    tx: outbox::Sender<Outgoing>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Link {
    /// Opens the WebSocket and starts its task; the protocol's handshake is the caller's.
    pub async fn open(
        ep: &Endpoint,
        how: &Opening<'_>,
        tls: Option<&Connector>,
        traffic: Rc<RefCell<Traffic>>,
        receiver: Rc<dyn Receiver>,
    ) -> Result<Link, Failure> {
        let socket = wire::upgrade_with(ep, how.path, how.compression, how.headers, how.protocol, tls)
            .await
            .map_err(Failure::from_wire)?;
        let cfg = ClientConfig { compression: how.compression, ..ClientConfig::default() };
        let mut framer = Framer::new(socket.leftover, &cfg, socket.deflate);
        // Binary messages (Socket.IO's attachments) are handed over as such, not read as text.
        framer.raw = true;
        let deflate = socket.deflate.map(|d| d.own_max_window_bits);
        let (tx, rx) = outbox::channel();
        let task = tokio::task::spawn_local(run(socket.stream, framer, rx, receiver, traffic, deflate));
        Ok(Link { tx, task: Some(task) })
    }

    /// Queues a message; false when the link is gone.
    pub fn send(&self, text: String) -> bool {
        self.tx.send(Outgoing::Ddp(text)).is_ok()
    }

    /// Closes as a browser's page does (the closing handshake, a second at most); the task
    /// finishing it.
    pub fn close(mut self) -> Option<tokio::task::JoinHandle<()>> {
        let _ = self.tx.send(Outgoing::Close);
        self.task.take()
    }
}

/// Writes `text` framed (compressed with the server's window when the link is).
fn frame(out: &mut Vec<u8>, text: &str, deflate: Option<u8>) {
    wire::frame(out, text, wire::Transport::WebSocket, deflate);
}

/// The link's task: reads and hands over messages, answers pings, writes what is queued, ends the
/// link on a close, an error or a silence longer than the receiver allows.
async fn run(
    mut stream: Stream,
    mut framer: Framer,
    mut rx: outbox::Receiver<Outgoing>,
    receiver: Rc<dyn Receiver>,
    traffic: Rc<RefCell<Traffic>>,
    deflate: Option<u8>,
) {
    let mut heard = Instant::now();
    let why = 'link: loop {
        loop {
            match framer.next() {
                Ok(None) => break,
                Ok(Some(Frames::Nothing)) => {}
                // A binary message: no protocol here reads one yet (counted, the link goes on).
                Ok(Some(Frames::Raw(true, _))) => {
                    heard = Instant::now();
                    let mut t = traffic.borrow_mut();
                    t.messages_in += 1;
                    t.protocol_errors += 1;
                }
                Ok(Some(Frames::Raw(false, bytes))) => {
                    heard = Instant::now();
                    let text = String::from_utf8_lossy(&bytes);
                    let mut replies = Vec::new();
                    traffic.borrow_mut().messages_in += 1;
                    receiver.text(&text, &mut replies);
                    if !replies.is_empty() {
                        let mut out = Vec::new();
                        for r in &replies {
                            frame(&mut out, r, deflate);
                        }
                        if stream.write_all(&out).await.is_err() {
                            break 'link "write failed".to_string();
                        }
                        let mut t = traffic.borrow_mut();
                        t.messages_out += replies.len() as u64;
                        t.bytes_out += out.len() as u64;
                    }
                }
                Ok(Some(Frames::Ping(p))) => {
                    let mut pong = Vec::new();
                    ws::encode_frame(&mut pong, Opcode::Pong, false, &p, Some(rand::random()));
                    if stream.write_all(&pong).await.is_err() {
                        break 'link "write failed".to_string();
                    }
                    traffic.borrow_mut().bytes_out += pong.len() as u64;
                }
                Ok(Some(Frames::Close(why))) => {
                    wire::send_close(&mut stream, &mut framer).await;
                    break 'link why;
                }
                // Raw mode hands every data message over as `Raw`.
                Ok(Some(Frames::Ddp(_))) => {}
                Err(e) => {
                    wire::send_close(&mut stream, &mut framer).await;
                    traffic.borrow_mut().protocol_errors += 1;
                    break 'link e.detail();
                }
            }
        }
        if framer.buf.is_empty() {
            framer.buf = Vec::new();
        }
        let silence = receiver.silence();
        let dead_at = silence.map(|s| heard + s);
        tokio::select! {
            read = read_appending(&mut stream, &mut framer.buf) => match read {
                Ok(0) => break 'link "transport close: the server closed the connection".to_string(),
                Ok(n) => traffic.borrow_mut().bytes_in += n as u64,
                Err(e) => break 'link format!("transport error: {e}"),
            },
            out = rx.recv() => match out {
                Some(Outgoing::Ddp(text)) => {
                    let mut wire_bytes = Vec::new();
                    frame(&mut wire_bytes, &text, deflate);
                    let (mut messages, mut closing) = (1, false);
                    loop {
                        match rx.try_recv() {
                            Some(Outgoing::Ddp(more)) => {
                                frame(&mut wire_bytes, &more, deflate);
                                messages += 1;
                            }
                            Some(Outgoing::Close) => {
                                closing = true;
                                break;
                            }
                            None => break,
                        }
                    }
                    if let Err(e) = stream.write_all(&wire_bytes).await {
                        break 'link format!("transport error: write: {e}");
                    }
                    // Counted once written: a message that never left is not a message sent.
                    {
                        let mut t = traffic.borrow_mut();
                        t.messages_out += messages;
                        t.bytes_out += wire_bytes.len() as u64;
                    }
                    if closing {
                        close_reading(&mut stream, &mut framer, &*receiver, &traffic).await;
                        break 'link "closed by the client".to_string();
                    }
                }
                Some(Outgoing::Close) | None => {
                    close_reading(&mut stream, &mut framer, &*receiver, &traffic).await;
                    break 'link "closed by the client".to_string();
                }
            },
            _ = async {
                match dead_at {
                    Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                    None => std::future::pending().await,
                }
            } => {
                let s = silence.unwrap_or_default();
                break 'link format!("ping timeout: nothing from the server within {s:?}");
            }
        }
    };
    receiver.ended(why);
}

/// The client's close (1000) and its closing handshake, within `CLOSING_HANDSHAKE`: what the
/// server sent before it saw the close still reaches the protocol (and its counts), so that what
/// bolide counts received is what the server counts sent.
async fn close_reading(stream: &mut Stream, framer: &mut Framer, receiver: &dyn Receiver, traffic: &RefCell<Traffic>) {
    let mut wire_bytes = Vec::new();
    ws::encode_frame(&mut wire_bytes, Opcode::Close, false, &ws::close_payload(1000, ""), Some(rand::random()));
    let handshake = async {
        if stream.write_all(&wire_bytes).await.is_err() {
            return;
        }
        traffic.borrow_mut().bytes_out += wire_bytes.len() as u64;
        loop {
            loop {
                match framer.next() {
                    Ok(None) => break,
                    Ok(Some(Frames::Raw(false, bytes))) => {
                        traffic.borrow_mut().messages_in += 1;
                        receiver.text(&String::from_utf8_lossy(&bytes), &mut Vec::new());
                    }
                    // A binary message: counted as the link's loop counts one.
                    Ok(Some(Frames::Raw(true, _))) => {
                        let mut t = traffic.borrow_mut();
                        t.messages_in += 1;
                        t.protocol_errors += 1;
                    }
                    Ok(Some(Frames::Close(_))) | Err(_) => return,
                    Ok(Some(_)) => {}
                }
            }
            match read_appending(stream, &mut framer.buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => traffic.borrow_mut().bytes_in += n as u64,
            }
        }
    };
    let _ = tokio::time::timeout(wire::CLOSING_HANDSHAKE, handshake).await;
}

/// Waits until `ready` finds what it wants in a protocol's shared state (looked at again at each
/// notification), failing when `gone` says the connection is gone or after `timeout`.
pub async fn wait_on<S, T>(
    state: &RefCell<S>,
    notify: &tokio::sync::Notify,
    timeout: Duration,
    what: &str,
    gone: impl Fn(&S) -> Option<Failure>,
    mut ready: impl FnMut(&mut S) -> Option<T>,
) -> Result<T, Failure> {
    let end = tokio::time::Instant::now() + timeout;
    loop {
        let notified = notify.notified();
        {
            let mut st = state.borrow_mut();
            if let Some(v) = ready(&mut st) {
                return Ok(v);
            }
            if let Some(f) = gone(&st) {
                return Err(Failure { detail: format!("{} while waiting for {what}", f.detail), ..f });
            }
        }
        if tokio::time::timeout_at(end, notified).await.is_err() {
            return Err(Failure::new("timeout", format!("no {what} within {timeout:?}")));
        }
    }
}

/// The ms since the epoch in a pushed message's `field` (a number, or an ISO date text, or an
/// EJSON date), looked for in `v` and, a few levels down, in what it holds; what the fan-out
/// latency counts from.
pub fn stamped_ms(v: &serde_json::Value, field: &str, depth: u8) -> Option<f64> {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            if let Some(t) = m.get(field) {
                let ms = match t {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => {
                        s.parse::<f64>().ok().or_else(|| humantime::parse_rfc3339_weak(s).ok().and_then(epoch_ms))
                    }
                    other => ddp::ejson::json_date_ms(other),
                };
                if ms.is_some() {
                    return ms;
                }
            }
            if depth == 0 {
                return None;
            }
            m.values().find_map(|x| stamped_ms(x, field, depth - 1))
        }
        Value::Array(items) if depth > 0 => items.iter().find_map(|x| stamped_ms(x, field, depth - 1)),
        _ => None,
    }
}

fn epoch_ms(t: std::time::SystemTime) -> Option<f64> {
    t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs_f64() * 1000.0)
}

/// Records a pushed message's age (now less its stamp, in ms since the epoch) as a fan-out
/// latency.
pub fn record_fanout(traffic: &RefCell<Traffic>, stamped_ms: f64) {
    let now = epoch_ms(std::time::SystemTime::now()).unwrap_or_default();
    let lag_us = ((now - stamped_ms) * 1000.0).max(1.0) as u64;
    traffic.borrow_mut().fanout(lag_us);
}

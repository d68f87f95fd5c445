//! A DDP client connection that behaves like a browser's Meteor client: raw WebSocket or SockJS
//! (info request, then `/sockjs/NNN/xxxxxxxx/websocket`), permessage-deflate offered as browsers
//! offer it, `connect` with version "1" and support ["1","pre2","pre1"] (and a new attempt with the
//! version a `failed` proposes), pings answered (DDP and WebSocket), pings sent after silence and a
//! dead connection dropped, method ids counting up, sub ids `Random.id()`, a method complete only
//! with both `result` and `updated`, and an optional local collection cache.
//!
//! One task per connection (on the worker's single-threaded runtime) owns the socket; the virtual
//! user talks to it through shared state (`Rc<Shared>`: what arrived, when) and a queue of outgoing
//! messages. Everything is timestamped where it happens, so latencies need no extra bookkeeping.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ddp::message::{DdpError, Fields, Message, ParseError};
use ddp::ws::{self, Opcode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use crate::proto::http::{tls::Connector, Stream};
use crate::proto::outbox;
use crate::proto::read::read_appending;
use crate::proto::ws::{
    close_politely, compress, frame, send_close, websocket, ClientConfig, DdpFailure, Endpoint, Framer, Frames,
    Outgoing, Traffic,
};

/// The DDP versions a browser's Meteor client supports, preferred first.
pub const SUPPORTED: [&str; 3] = ["1", "pre2", "pre1"];

/// A method call in flight or done.
#[derive(Debug, Clone)]
pub struct Call {
    pub sent: Instant,
    pub result_at: Option<Instant>,
    pub updated_at: Option<Instant>,
    pub result: Option<Value>,
    pub error: Option<DdpError>,
}

#[derive(Debug, Clone)]
struct Sub {
    ready_at: Option<Instant>,
    /// `nosub`, with its error if any (boxed: a live subscription holds 8 bytes for it, not 200).
    nosub: Option<Option<Box<DdpError>>>,
    /// Wall-clock time the `sub` was sent, ms since the epoch: a document stamped earlier was
    /// written before this subscriber asked, so its age is no fan-out.
    sent_ms: f64,
}

/// A cached document: when it arrived and when it last changed.
#[derive(Debug, Clone)]
pub struct Doc {
    pub fields: Fields,
    pub added_at: Instant,
    pub changed_at: Instant,
}

/// How many removed documents a connection remembers (for `waitFor ... disappears`).
const REMOVED_KEPT: usize = 256;
/// Mutable lookup by `&str` that also hands back the shared key.
trait KeyedMut<V> {
    fn get_key_value_mut_by(&mut self, key: &str) -> Option<(Rc<str>, &mut V)>;
}

impl<V> KeyedMut<V> for HashMap<Rc<str>, V> {
    fn get_key_value_mut_by(&mut self, key: &str) -> Option<(Rc<str>, &mut V)> {
        let shared = Rc::clone(self.get_key_value(key)?.0);
        self.get_mut(key).map(|v| (shared, v))
    }
}

/// How many of the latest document changes are kept for a new waiter's first look.
const RECENT_KEPT: usize = 256;
/// How many document changes are logged between two looks of a waiter.
const CHANGES_KEPT: usize = 1024;

impl State {
    /// The shared name of a collection (a handful per app, interned once).
    fn collection_name(&mut self, name: &str) -> Rc<str> {
        match self.names.iter().find(|n| &***n == name) {
            Some(n) => Rc::clone(n),
            None => {
                let n: Rc<str> = Rc::from(name);
                self.names.push(Rc::clone(&n));
                n
            }
        }
    }

    /// Logs a document event; ids are shared with the cache, so this allocates nothing.
    fn log_change(&mut self, collection: &Rc<str>, id: &Rc<str>) {
        if self.recent.len() == RECENT_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((Rc::clone(collection), Rc::clone(id)));
        if !self.waiting {
            return;
        }
        if self.changes.len() >= CHANGES_KEPT {
            self.changes.clear();
            self.changes_overflowed = true;
        } else if !self.changes_overflowed {
            self.changes.push((Rc::clone(collection), Rc::clone(id)));
        }
    }

    /// Starts a fresh look: the caller examines everything now and is told of changes from here
    /// on, until [`State::stop_waiting`].
    pub fn reset_changes(&mut self) {
        self.changes.clear();
        self.changes_overflowed = false;
        self.waiting = true;
    }

    /// The waiter is done: changes are no longer logged for it.
    pub fn stop_waiting(&mut self) {
        self.waiting = false;
        self.changes.clear();
        self.changes_overflowed = false;
    }
}

/// What a document event was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocEvent {
    Added,
    Changed,
    Removed,
}

/// Everything the connection task learned, for the virtual user to look at.
#[derive(Debug, Default)]
pub struct State {
    pub session: Option<String>,
    pub closed: Option<String>,
    /// When it closed (a user reconnecting credits the fault that closed it).
    pub closed_at: Option<std::time::Instant>,
    /// The connection ended because the server broke the protocol (bad frame, bad compression).
    pub protocol_broken: bool,
    calls: HashMap<String, Call>,
    subs: crate::vecmap::VecMap<String, Sub>,
    /// collection -> id -> document (when caching).
    pub collections: HashMap<Rc<str>, HashMap<Rc<str>, Doc>>,
    /// Interned collection names.
    names: Vec<Rc<str>>,
    /// The latest removed documents (collection, id, last fields, when).
    pub removed: std::collections::VecDeque<(String, String, Fields, Instant)>,
    /// Documents added, changed or removed since a waiter last looked (collection, id), so that a
    /// `waitFor` re-checks only those instead of every document on every message. Bounded: past
    /// the bound it is dropped and `changes_overflowed` tells the waiter to look at everything.
    pub changes: Vec<(Rc<str>, Rc<str>)>,
    pub changes_overflowed: bool,
    /// The latest document changes, newest last, kept across looks: a new `waitFor` usually wants
    /// something that just happened, so it looks here before it looks at everything.
    pub recent: std::collections::VecDeque<(Rc<str>, Rc<str>)>,
    /// Whether a `waitFor` is looking (only then are `changes` logged).
    waiting: bool,
    /// When the last message other than a heartbeat arrived (an audit's quiet time counts from it).
    pub last_data: Option<Instant>,
    next_method: ddp::id::MethodIds,
}

/// State shared between the connection task and its virtual user.
pub struct Shared {
    pub state: RefCell<State>,
    pub notify: Notify,
}

/// An open DDP session.
pub struct Conn {
    shared: Rc<Shared>,
    tx: outbox::Sender<Outgoing>,
    /// The connection's task; taken by `close`, which lets it end by itself.
    task: Option<tokio::task::JoinHandle<()>>,
    /// When the WebSocket was open and `connected` arrived, measured from the start of `connect`.
    pub handshake: Duration,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1000.0).unwrap_or_default()
}

/// Opens a session over a WebSocket (raw or SockJS's): transport, `connect`, `connected` (retrying
/// once with the version a `failed` proposes, if we speak it). `deadline` bounds the whole
/// handshake. SockJS's HTTP transports open theirs with `proto::xhr::connect`.
pub async fn connect(
    ep: &Endpoint,
    cfg: &ClientConfig,
    tls: Option<&Connector>,
    traffic: Rc<RefCell<Traffic>>,
    deadline: Duration,
) -> Result<Conn, DdpFailure> {
    let begin = Instant::now();
    let attempts = async {
        let mut version = SUPPORTED[0].to_string();
        for _ in 0..2 {
            match handshake(ep, cfg, tls, &traffic, &version, begin).await? {
                Ok(conn) => return Ok(conn),
                Err(proposed) if SUPPORTED.contains(&proposed.as_str()) && proposed != version => version = proposed,
                Err(proposed) => {
                    return Err(DdpFailure::Protocol(format!(
                        "server wants DDP version {proposed:?}, which we do not speak"
                    )))
                }
            }
        }
        Err(DdpFailure::Protocol("server refused every DDP version we proposed".into()))
    };
    match tokio::time::timeout(deadline, attempts).await {
        Ok(r) => r,
        Err(_) => Err(DdpFailure::Timeout(format!("no DDP session within {deadline:?}"))),
    }
}

/// One attempt: `Ok(Ok(conn))` on `connected`, `Ok(Err(version))` on `failed`.
async fn handshake(
    ep: &Endpoint,
    cfg: &ClientConfig,
    tls: Option<&Connector>,
    traffic: &Rc<RefCell<Traffic>>,
    version: &str,
    begin: Instant,
) -> Result<Result<Conn, String>, DdpFailure> {
    let crate::proto::ws::Socket { mut stream, leftover, deflate } = websocket(ep, cfg, tls).await?;
    let mut framer = Framer::new(leftover, cfg, deflate);
    let connect = Message::Connect {
        session: cfg.resume.clone(),
        version: version.to_string(),
        support: SUPPORTED.map(String::from).to_vec(),
    };
    let mut wire = Vec::new();
    frame(&mut wire, &connect.to_json(), cfg.transport, deflate.map(|d| d.own_max_window_bits));
    stream.write_all(&wire).await.map_err(|e| DdpFailure::Closed(format!("sending connect: {e}")))?;
    {
        let mut t = traffic.borrow_mut();
        t.messages_out += 1;
        t.bytes_out += wire.len() as u64;
    }
    loop {
        let Some(frames) = framer.next()? else {
            let n =
                read_appending(&mut stream, &mut framer.buf).await.map_err(|e| DdpFailure::Closed(e.to_string()))?;
            if n == 0 {
                return Err(DdpFailure::Closed("closed before connected".into()));
            }
            traffic.borrow_mut().bytes_in += n as u64;
            continue;
        };
        let texts = match frames {
            Frames::Ping(p) => {
                let mut pong = Vec::new();
                ws::encode_frame(&mut pong, Opcode::Pong, false, &p, Some(rand::random()));
                let _ = stream.write_all(&pong).await;
                continue;
            }
            Frames::Close(why) => {
                send_close(&mut stream, &mut framer).await;
                return Err(DdpFailure::Closed(why));
            }
            // Raw messages come only in raw mode (`echo`).
            Frames::Nothing | Frames::Raw(..) => continue,
            Frames::Ddp(texts) => texts,
        };
        for (i, t) in texts.iter().enumerate() {
            traffic.borrow_mut().messages_in += 1;
            match Message::parse(t) {
                Ok(Message::Connected { session }) => {
                    let shared = Rc::new(Shared { state: RefCell::new(State::default()), notify: Notify::new() });
                    shared.state.borrow_mut().session = Some(session);
                    // Messages batched after `connected` in the same SockJS frame are not lost.
                    let mut replies = Vec::new();
                    for rest in &texts[i + 1..] {
                        handle(rest, &shared, cfg, traffic, &mut replies);
                    }
                    let (tx, rx) = outbox::channel();
                    for r in replies {
                        let _ = tx.send(Outgoing::Ddp(r));
                    }
                    let task = tokio::task::spawn_local(run(
                        stream,
                        framer,
                        rx,
                        Rc::clone(&shared),
                        cfg.clone(),
                        Rc::clone(traffic),
                        deflate.map(|d| d.own_max_window_bits),
                    ));
                    return Ok(Ok(Conn { shared, tx, task: Some(task), handshake: begin.elapsed() }));
                }
                Ok(Message::Failed { version }) => return Ok(Err(version)),
                // The legacy `{"server_id":"0"}` greeting, and anything else before `connected`.
                Err(ParseError::NoMsg(_)) | Ok(_) => {}
                Err(e) => return Err(DdpFailure::Protocol(e.to_string())),
            }
        }
    }
}

/// What [`echo`] saw before the connection ended.
#[derive(Debug, Default)]
pub struct EchoOutcome {
    /// Data messages received (and, when echoing, sent back).
    pub messages: u64,
    /// The first data message.
    pub first: Option<Vec<u8>>,
    /// How the connection ended: the server's close, or the protocol error we closed for.
    pub ended: String,
}

/// A WebSocket on `path` (with its query) through the DDP client's own framing, deflate, ping and
/// close handling, that sends every data message back with its opcode when `echo` (what
/// conformance suites' fuzzing servers ask of a client, e.g. Autobahn's `/runCase`); otherwise it
/// only reads. Ends when the server closes, on a protocol error (after telling the server why),
/// or after `within`.
pub async fn echo(
    ep: &Endpoint,
    path: &str,
    compression: bool,
    tls: Option<&Connector>,
    echo: bool,
    within: Duration,
) -> Result<EchoOutcome, DdpFailure> {
    let socket = crate::proto::ws::upgrade(ep, path, compression, tls).await?;
    let (mut stream, deflate) = (socket.stream, socket.deflate.map(|d| d.own_max_window_bits));
    let cfg = ClientConfig { compression, ..ClientConfig::default() };
    let mut framer = Framer::new(socket.leftover, &cfg, socket.deflate);
    framer.raw = true;
    let mut outcome = EchoOutcome::default();
    let session = async {
        loop {
            while let Some(frames) = framer.next().inspect_err(|e| outcome.ended = e.detail()).ok().flatten() {
                let mut wire = Vec::new();
                match frames {
                    Frames::Raw(binary, payload) => {
                        outcome.messages += 1;
                        if echo {
                            let opcode = if binary { Opcode::Binary } else { Opcode::Text };
                            if let Some(window_bits) = deflate {
                                let mut packed = Vec::with_capacity(payload.len() / 2 + 16);
                                compress(&payload, window_bits, &mut packed);
                                ws::encode_frame(&mut wire, opcode, true, &packed, Some(rand::random()));
                            } else {
                                ws::encode_frame(&mut wire, opcode, false, &payload, Some(rand::random()));
                            }
                        }
                        outcome.first.get_or_insert(payload);
                    }
                    Frames::Ping(p) => ws::encode_frame(&mut wire, Opcode::Pong, false, &p, Some(rand::random())),
                    Frames::Close(why) => {
                        outcome.ended = why;
                        return;
                    }
                    Frames::Nothing | Frames::Ddp(_) => {}
                }
                if stream.write_all(&wire).await.is_err() {
                    outcome.ended = "write failed".into();
                    return;
                }
            }
            if !outcome.ended.is_empty() {
                return;
            }
            framer.buf.reserve(64 * 1024);
            match stream.read_buf(&mut framer.buf).await {
                Ok(0) => return outcome.ended = "server closed the connection".into(),
                Ok(_) => {}
                Err(e) => return outcome.ended = format!("read: {e}"),
            }
        }
    };
    if tokio::time::timeout(within, session).await.is_err() {
        outcome.ended = format!("still open after {within:?}");
        framer.close_reply = Some(1000);
    }
    // Answer the close (or say why we close), then wait briefly for the server to close first.
    let goodbye = async {
        send_close(&mut stream, &mut framer).await;
        let mut rest = [0u8; 4096];
        while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), goodbye).await;
    Ok(outcome)
}

/// The connection task: reads, answers pings, records, wakes the virtual user; writes its messages;
/// sends a ping after silence and gives up on a dead connection.
async fn run(
    mut stream: Stream,
    mut framer: Framer,
    mut rx: outbox::Receiver<Outgoing>,
    shared: Rc<Shared>,
    cfg: ClientConfig,
    traffic: Rc<RefCell<Traffic>>,
    deflate: Option<u8>,
) {
    // Meteor's heartbeat (ddp-common/heartbeat.js): a repeating tick; at a tick, if nothing arrived
    // since the previous one and no ping is outstanding, send a ping; if nothing arrives within the
    // timeout after it, the connection is dead. So on an idle connection the server (15 s) pings
    // first and our pong keeps both sides quiet, as with a browser.
    let mut next_tick = Instant::now() + cfg.heartbeat_interval;
    let mut heard = false;
    let mut ping_sent: Option<Instant> = None;
    // `--fault drop`: the throws this connection has seen.
    let mut drops_seen = cfg.drops.as_ref().map_or(0, |d| d.round());
    let why = 'conn: loop {
        if cfg.drops.as_ref().is_some_and(|d| d.hits(&mut drops_seen)) {
            break 'conn "dropped by bolide (--fault drop)".to_string();
        }
        // Process whatever complete frames are buffered, then wake the user once.
        let woke = match drain(&mut stream, &mut framer, &shared, &cfg, &traffic, deflate).await {
            ControlFlow::Continue(woke) => woke,
            ControlFlow::Break(why) => break 'conn why,
        };
        if woke {
            heard = true;
            ping_sent = None;
        }
        if woke {
            shared.notify.notify_waiters();
        }
        // What is left of a frame stays; an empty buffer is given back, so an idle session holds
        // none (reads go through the thread's shared buffer).
        if framer.buf.is_empty() {
            framer.buf = Vec::new();
        }
        let heartbeat_at = match ping_sent {
            Some(at) => (at + cfg.heartbeat_timeout).min(next_tick),
            None => next_tick,
        };
        tokio::select! {
            read = read_appending(&mut stream, &mut framer.buf) => match read {
                Ok(0) => break 'conn "server closed the connection".to_string(),
                Ok(n) => traffic.borrow_mut().bytes_in += n as u64,
                Err(e) => break 'conn format!("read: {e}"),
            },
            out = rx.recv() => match out {
                Some(Outgoing::Ddp(text)) => {
                    if let ControlFlow::Break(why) = send(&mut stream, &mut framer, &mut rx, text, &cfg, &traffic, deflate).await {
                        break 'conn why;
                    }
                }
                Some(Outgoing::Close) | None => {
                    close_politely(&mut stream, &mut framer, &traffic).await;
                    break 'conn "closed by the client".to_string();
                }
            },
            _ = async {
                match &cfg.drops {
                    Some(d) => d.notify.notified().await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(heartbeat_at)) => {
                let now = Instant::now();
                if ping_sent.is_some_and(|at| now >= at + cfg.heartbeat_timeout) {
                    break 'conn format!("no answer to a ping within {:?}: connection dropped as dead", cfg.heartbeat_timeout);
                }
                if now >= next_tick {
                    next_tick += cfg.heartbeat_interval;
                    if !heard && ping_sent.is_none() {
                        if let ControlFlow::Break(why) = ping(&mut stream, &cfg, &traffic, deflate).await {
                            break 'conn why;
                        }
                        ping_sent = Some(now);
                    }
                    heard = false;
                }
            }
        }
    };
    {
        let mut st = shared.state.borrow_mut();
        st.closed = Some(why);
        st.closed_at = Some(std::time::Instant::now());
    }
    shared.notify.notify_waiters();
}

/// Handles the complete frames in the buffer: pings answered, DDP messages applied to the shared
/// state and answered; whether any DDP message came (the user is woken once), or why the
/// connection ends (`Break`).
async fn drain(
    stream: &mut Stream,
    framer: &mut Framer,
    shared: &Shared,
    cfg: &ClientConfig,
    traffic: &RefCell<Traffic>,
    deflate: Option<u8>,
) -> ControlFlow<String, bool> {
    let mut woke = false;
    loop {
        match framer.next() {
            Ok(None) => return ControlFlow::Continue(woke),
            Ok(Some(Frames::Nothing | Frames::Raw(..))) => {}
            Ok(Some(Frames::Ping(p))) => {
                let mut pong = Vec::new();
                ws::encode_frame(&mut pong, Opcode::Pong, false, &p, Some(rand::random()));
                if stream.write_all(&pong).await.is_err() {
                    return ControlFlow::Break("write failed".to_string());
                }
                // A WebSocket control frame: bytes on the wire, not a DDP message.
                traffic.borrow_mut().bytes_out += pong.len() as u64;
            }
            Ok(Some(Frames::Close(why))) => {
                send_close(stream, framer).await;
                return ControlFlow::Break(why);
            }
            Ok(Some(Frames::Ddp(texts))) => {
                let mut replies = Vec::new();
                for t in texts {
                    handle(&t, shared, cfg, traffic, &mut replies);
                }
                for r in replies {
                    let mut wire = Vec::new();
                    frame(&mut wire, &r, cfg.transport, deflate);
                    if stream.write_all(&wire).await.is_err() {
                        return ControlFlow::Break("write failed".to_string());
                    }
                    let mut t = traffic.borrow_mut();
                    t.messages_out += 1;
                    t.bytes_out += wire.len() as u64;
                }
                woke = true;
            }
            Err(e) => {
                send_close(stream, framer).await;
                traffic.borrow_mut().protocol_errors += 1;
                shared.state.borrow_mut().protocol_broken = true;
                return ControlFlow::Break(e.detail());
            }
        }
    }
}

/// Writes the user's message and whatever else is queued in one write; a close queued behind
/// them follows (`Break`: why the connection ends).
async fn send(
    stream: &mut Stream,
    framer: &mut Framer,
    rx: &mut outbox::Receiver<Outgoing>,
    text: String,
    cfg: &ClientConfig,
    traffic: &RefCell<Traffic>,
    deflate: Option<u8>,
) -> ControlFlow<String> {
    let mut wire = Vec::new();
    frame(&mut wire, &text, cfg.transport, deflate);
    let mut messages = 1;
    let mut closing = false;
    loop {
        match rx.try_recv() {
            Some(Outgoing::Ddp(more)) => {
                frame(&mut wire, &more, cfg.transport, deflate);
                messages += 1;
            }
            Some(Outgoing::Close) => {
                closing = true;
                break;
            }
            None => break,
        }
    }
    if let Err(e) = stream.write_all(&wire).await {
        return ControlFlow::Break(format!("write: {e}"));
    }
    // Counted once written: a message that never left is not a message sent.
    {
        let mut t = traffic.borrow_mut();
        t.messages_out += messages;
        t.bytes_out += wire.len() as u64;
    }
    if closing {
        close_politely(stream, framer, traffic).await;
        return ControlFlow::Break("closed by the client".to_string());
    }
    ControlFlow::Continue(())
}

/// Meteor's heartbeat ping, after a tick of silence.
async fn ping(
    stream: &mut Stream,
    cfg: &ClientConfig,
    traffic: &RefCell<Traffic>,
    deflate: Option<u8>,
) -> ControlFlow<String> {
    let mut wire = Vec::new();
    frame(&mut wire, r#"{"msg":"ping"}"#, cfg.transport, deflate);
    if stream.write_all(&wire).await.is_err() {
        return ControlFlow::Break("write failed".to_string());
    }
    let mut t = traffic.borrow_mut();
    t.messages_out += 1;
    t.bytes_out += wire.len() as u64;
    t.pings_sent += 1;
    ControlFlow::Continue(())
}

/// Applies one message from the server to the shared state (for another transport's task).
pub(super) fn handle_text(
    text: &str,
    shared: &Shared,
    cfg: &ClientConfig,
    traffic: &RefCell<Traffic>,
    replies: &mut Vec<String>,
) {
    handle(text, shared, cfg, traffic, replies)
}

/// Applies one message from the server to the shared state; `replies` collects what to answer.
fn handle(text: &str, shared: &Shared, cfg: &ClientConfig, traffic: &RefCell<Traffic>, replies: &mut Vec<String>) {
    let now = Instant::now();
    traffic.borrow_mut().messages_in += 1;
    let msg = match Message::parse(text) {
        Ok(m) => m,
        Err(ParseError::NoMsg(_)) => return,
        Err(_) => {
            traffic.borrow_mut().protocol_errors += 1;
            return;
        }
    };
    let mut st = shared.state.borrow_mut();
    if !matches!(msg, Message::Ping { .. } | Message::Pong { .. }) {
        st.last_data = Some(now);
    }
    match msg {
        // Over a WebSocket the handshake reads these; over SockJS's HTTP transports they come here.
        Message::Connected { session } => st.session = Some(session),
        Message::Failed { version } => {
            st.closed = Some(format!("the server refused DDP version 1 (it proposes {version:?})"));
            st.protocol_broken = true;
        }
        Message::Ping { id } => {
            replies.push(Message::Pong { id }.to_json());
            traffic.borrow_mut().pings_answered += 1;
        }
        Message::Result { id, result, error } => {
            if let Some(c) = st.calls.get_mut(&id) {
                c.result_at = Some(now);
                c.result = result;
                c.error = error;
            }
        }
        Message::Updated { methods } => {
            for id in methods {
                if let Some(c) = st.calls.get_mut(&id) {
                    c.updated_at = Some(now);
                }
            }
        }
        Message::Ready { subs } => {
            for id in subs {
                if let Some(s) = st.subs.get_mut(&id) {
                    if s.ready_at.is_some() {
                        violation(traffic, VIOLATION_READY_TWICE);
                    }
                    s.ready_at = Some(now);
                }
            }
        }
        Message::Nosub { id, error } => {
            if let Some(s) = st.subs.get_mut(&id) {
                s.nosub = Some(error.map(Box::new));
            }
        }
        Message::Added { collection, id, fields } | Message::AddedBefore { collection, id, fields, .. } => {
            record_fanout(&st, cfg, &fields, traffic);
            if cfg.cache {
                let (collection, id) = (st.collection_name(&collection), Rc::<str>::from(id));
                st.log_change(&collection, &id);
                let held = st
                    .collections
                    .entry(collection)
                    .or_default()
                    .insert(id, Doc { fields, added_at: now, changed_at: now });
                if held.is_some() {
                    violation(traffic, VIOLATION_ADDED_PRESENT);
                }
            }
        }
        Message::Changed { collection, id, fields, cleared } => {
            record_fanout(&st, cfg, &fields, traffic);
            if !cfg.cache {
                return;
            }
            let Some((name, docs)) = st.collections.get_key_value_mut_by(&collection) else {
                violation(traffic, VIOLATION_CHANGED_ABSENT);
                return;
            };
            let Some((key, doc)) = docs.get_key_value_mut_by(&id) else {
                violation(traffic, VIOLATION_CHANGED_ABSENT);
                return;
            };
            for (k, v) in fields {
                doc.fields.insert(k, v);
            }
            for k in cleared {
                doc.fields.shift_remove(&k);
            }
            doc.changed_at = now;
            st.log_change(&name, &key);
        }
        Message::Removed { collection, id } if cfg.cache => {
            let Some((name, docs)) = st.collections.get_key_value_mut_by(&collection) else {
                violation(traffic, VIOLATION_REMOVED_ABSENT);
                return;
            };
            let Some((key, gone)) = docs.remove_entry(id.as_str()) else {
                violation(traffic, VIOLATION_REMOVED_ABSENT);
                return;
            };
            st.log_change(&name, &key);
            if st.removed.len() == REMOVED_KEPT {
                st.removed.pop_front();
            }
            st.removed.push_back((collection, id, gone.fields, now));
        }
        Message::Error { .. } => traffic.borrow_mut().protocol_errors += 1,
        _ => {}
    }
}

/// The protocol violations Meteor's client throws on (livedata's `_process_added`, `_process_changed`,
/// `_process_removed`) and a second `ready` for one subscription (which it ignores), counted as the document's
/// events under these names.
pub const VIOLATION_ADDED_PRESENT: &str = "ddp.violation.added_for_a_present_id";
pub const VIOLATION_CHANGED_ABSENT: &str = "ddp.violation.changed_for_an_absent_id";
pub const VIOLATION_REMOVED_ABSENT: &str = "ddp.violation.removed_for_an_absent_id";
pub const VIOLATION_READY_TWICE: &str = "ddp.violation.ready_twice";
/// The events' common prefix.
pub const VIOLATION: &str = "ddp.violation.";

fn violation(traffic: &RefCell<Traffic>, name: &'static str) {
    *traffic.borrow_mut().events.entry(name).or_default() += 1;
}

/// Fan-out latency: from the write (the document's timestamp field) until this subscriber got it.
/// Only data that reaches a live subscription after its `ready` counts: a subscription's initial
/// documents and a method's page-load data say how old a document is, not how fast a write fans
/// out, so they are left out (and so is whatever arrives while another subscription of the session
/// is still waiting for its `ready`).
fn record_fanout(st: &State, cfg: &ClientConfig, fields: &serde_json::Map<String, Value>, traffic: &RefCell<Traffic>) {
    let Some(field) = &cfg.fanout_field else { return };
    // DDP does not say which subscription a document is for; while any subscription waits for
    // its `ready`, what arrives may be its initial data, so nothing is counted until it is ready.
    let live = st.subs.values().any(|s| s.ready_at.is_some());
    let pending = st.subs.values().any(|s| s.ready_at.is_none() && s.nosub.is_none());
    if !live || pending {
        return;
    }
    // Some servers send `ready` before a subscription's initial documents (Meteor does for
    // collections that live in the server's memory): a document written before the earliest live
    // subscription was sent is initial data, however late after `ready` it arrives.
    let subscribed_ms =
        st.subs.values().filter(|s| s.ready_at.is_some()).map(|s| s.sent_ms).fold(f64::INFINITY, f64::min);
    if let Some(written_ms) = fields.get(field).and_then(ddp::ejson::json_date_ms) {
        if written_ms < subscribed_ms {
            return;
        }
        let lag_us = ((now_ms() - written_ms) * 1000.0).max(1.0) as u64;
        traffic.borrow_mut().fanout(lag_us);
    }
}

/// What a completed method call measured.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub result: Option<Value>,
    pub sent: Instant,
    pub to_result: Duration,
    pub to_updated: Duration,
    /// The later of the two: when a browser's callback would run.
    pub to_both: Duration,
}

impl Conn {
    /// A session whose task another transport runs (`proto::xhr`).
    pub(super) fn from_parts(
        shared: Rc<Shared>,
        tx: outbox::Sender<Outgoing>,
        task: tokio::task::JoinHandle<()>,
        handshake: Duration,
    ) -> Conn {
        Conn { shared, tx, task: Some(task), handshake }
    }

    /// The same session, its handshake having taken `took`.
    pub(super) fn handshake_took(mut self, took: Duration) -> Conn {
        self.handshake = took;
        self
    }

    pub fn shared(&self) -> &Rc<Shared> {
        &self.shared
    }

    /// Waits until `ready` says yes, the connection closed, or the timeout passed.
    pub async fn wait<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut ready: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T, DdpFailure> {
        let end = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.notify.notified();
            {
                let mut st = self.shared.state.borrow_mut();
                if let Some(v) = ready(&mut st) {
                    return Ok(v);
                }
                if let Some(why) = &st.closed {
                    return Err(if st.protocol_broken {
                        DdpFailure::Protocol(format!("{why} while waiting for {what}"))
                    } else {
                        DdpFailure::Closed(format!("{why} while waiting for {what}"))
                    });
                }
            }
            if tokio::time::timeout_at(end, notified).await.is_err() {
                return Err(DdpFailure::Timeout(format!("no {what} within {timeout:?}")));
            }
        }
    }

    fn send(&self, m: &Message) -> Result<(), DdpFailure> {
        if let Some(why) = &self.shared.state.borrow().closed {
            return Err(DdpFailure::Closed(why.clone()));
        }
        self.tx.send(Outgoing::Ddp(m.to_json())).map_err(|_| DdpFailure::Closed("connection task ended".into()))
    }

    /// Calls a method and waits for both `result` and `updated`.
    pub async fn call(&self, method: &str, params: Vec<Value>, timeout: Duration) -> Result<CallOutcome, DdpFailure> {
        let sent = Instant::now();
        let id = {
            let mut st = self.shared.state.borrow_mut();
            let id = st.next_method.next_id();
            st.calls.insert(id.clone(), Call { sent, result_at: None, updated_at: None, result: None, error: None });
            id
        };
        self.send(&Message::Method { method: method.to_string(), params, id: id.clone(), random_seed: None })?;
        let done = self
            .wait(timeout, "result and updated", |st| {
                let c = st.calls.get(&id)?;
                (c.result_at.is_some() && c.updated_at.is_some()).then(|| st.calls.remove(&id).expect("present"))
            })
            .await;
        let call = match done {
            Ok(c) => c,
            Err(e) => {
                self.shared.state.borrow_mut().calls.remove(&id);
                return Err(e);
            }
        };
        if let Some(error) = call.error {
            return Err(DdpFailure::DdpError(Box::new(error)));
        }
        let (r, u) = (call.result_at.expect("done"), call.updated_at.expect("done"));
        Ok(CallOutcome {
            result: call.result,
            sent,
            to_result: r - sent,
            to_updated: u - sent,
            to_both: r.max(u) - sent,
        })
    }

    /// Subscribes and waits for `ready`; returns the sub id and the time to ready.
    pub async fn subscribe(
        &self,
        name: &str,
        params: Vec<Value>,
        timeout: Duration,
    ) -> Result<(String, Duration), DdpFailure> {
        let sent = Instant::now();
        let id = ddp::id::random_id();
        self.shared.state.borrow_mut().subs.insert(id.clone(), Sub { ready_at: None, nosub: None, sent_ms: now_ms() });
        self.send(&Message::Sub { id: id.clone(), name: name.to_string(), params })?;
        let got = self
            .wait(timeout, "ready", |st| {
                let s = st.subs.get(&id)?;
                match (&s.nosub, s.ready_at) {
                    (Some(err), _) => Some(Err(err.clone())),
                    (None, Some(at)) => Some(Ok(at)),
                    _ => None,
                }
            })
            .await?;
        match got {
            Ok(at) => Ok((id, at - sent)),
            Err(error) => {
                self.shared.state.borrow_mut().subs.remove(&id);
                Err(DdpFailure::Nosub(
                    error.unwrap_or_else(|| Box::new(DdpError::meteor("nosub", "subscription stopped"))),
                ))
            }
        }
    }

    /// Stops a subscription (the server's `removed`s and `nosub` follow).
    pub fn unsubscribe(&self, id: &str) -> Result<(), DdpFailure> {
        self.shared.state.borrow_mut().subs.remove(id);
        self.send(&Message::Unsub { id: id.to_string() })
    }

    /// Closes the WebSocket as a browser does: the connection's task writes what was queued
    /// before, sends a close frame (1000) and reads until the server's close frame or the end of
    /// the stream, within a second, even if the server does not answer. The task, returned, ends
    /// by itself; whoever ends the run awaits it, so that nothing the user sent is lost.
    pub fn close(mut self) -> Option<tokio::task::JoinHandle<()>> {
        let task = self.task.take()?;
        if self.tx.send(Outgoing::Close).is_ok() {
            Some(task)
        } else {
            task.abort();
            None
        }
    }

    /// The local collections as they are now (one, or every one): id to fields, for an audit.
    pub fn snapshot(&self, collection: Option<&str>) -> crate::stats::audit::Snapshot {
        let st = self.shared.state.borrow();
        st.collections
            .iter()
            .filter(|(name, _)| collection.is_none_or(|c| c == &***name))
            .map(|(name, docs)| {
                let docs = docs.iter().map(|(id, d)| (id.to_string(), d.fields.clone())).collect();
                (name.to_string(), docs)
            })
            .collect()
    }

    /// The session's id, from the server's `connected`.
    pub fn session_id(&self) -> Option<String> {
        self.shared.state.borrow().session.clone()
    }

    /// Whether the connection is gone, and why.
    pub fn closed(&self) -> Option<String> {
        self.shared.state.borrow().closed.clone()
    }

    /// When the connection closed, if it did.
    pub fn closed_at(&self) -> Option<std::time::Instant> {
        self.shared.state.borrow().closed_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ws::*;

    #[test]
    fn messages_are_compressed_within_the_window_the_server_allows() {
        // A repeat 2 KB back: a 9-bit window cannot reach it, a 15-bit one can.
        let block: String =
            (0..2048u32).map(|i| char::from(b'!' + (i.wrapping_mul(2654435761) >> 25) as u8 % 90)).collect();
        let message = format!("{block}{block}");
        let sizes: Vec<usize> = [9u8, 15]
            .iter()
            .map(|&bits| {
                let mut wire = Vec::new();
                frame(&mut wire, &message, Transport::WebSocket, Some(bits));
                wire.len()
            })
            .collect();
        assert!(sizes[0] > sizes[1] * 3 / 2, "9-bit window {} bytes, 15-bit {}", sizes[0], sizes[1]);
        // And the server's answer sets the window.
        let params = ws::client_accept_deflate(Some("permessage-deflate; client_max_window_bits=9")).unwrap();
        assert_eq!(params.map(|p| p.own_max_window_bits), Some(9));
    }

    #[test]
    fn document_events_reach_the_cache_and_the_change_logs() {
        let shared = Shared { state: RefCell::new(State::default()), notify: Notify::new() };
        let traffic = RefCell::new(Traffic::default());
        let cfg = ClientConfig::default();
        let mut replies = Vec::new();
        // Changes are logged for a waiter only while it waits.
        handle(r#"{"msg":"added","collection":"c","id":"early","fields":{}}"#, &shared, &cfg, &traffic, &mut replies);
        // A subscription's initial data (before its ready) is no fan-out, however old it is.
        shared.state.borrow_mut().subs.insert("s".into(), Sub { ready_at: None, nosub: None, sent_ms: 0.0 });
        let old = r#"{"msg":"added","collection":"c","id":"old","fields":{"createdAt":{"$date":1}}}"#;
        handle(old, &shared, &cfg, &traffic, &mut replies);
        assert_eq!(traffic.borrow().fanout_us.len(), 0);
        handle(r#"{"msg":"ready","subs":["s"]}"#, &shared, &cfg, &traffic, &mut replies);
        handle(r#"{"msg":"removed","collection":"c","id":"old"}"#, &shared, &cfg, &traffic, &mut replies);
        assert!(shared.state.borrow().changes.is_empty());
        shared.state.borrow_mut().reset_changes();
        let added = r#"{"msg":"added","collection":"c","id":"a","fields":{"x":1,"createdAt":{"$date":1}}}"#;
        handle(added, &shared, &cfg, &traffic, &mut replies);
        handle(
            r#"{"msg":"changed","collection":"c","id":"a","fields":{"x":2},"cleared":["createdAt"]}"#,
            &shared,
            &cfg,
            &traffic,
            &mut replies,
        );
        handle(r#"{"msg":"ping","id":"p"}"#, &shared, &cfg, &traffic, &mut replies);
        let st = shared.state.borrow();
        let doc = &st.collections["c"]["a"];
        assert_eq!(serde_json::Value::Object(doc.fields.clone()), serde_json::json!({"x": 2}));
        assert_eq!(st.recent.len(), 5);
        assert_eq!(st.changes.len(), 2);
        assert_eq!(replies, vec![r#"{"msg":"pong","id":"p"}"#.to_string()]);
        assert_eq!(traffic.borrow().fanout_us.len(), 1);
        drop(st);
        handle(r#"{"msg":"removed","collection":"c","id":"a"}"#, &shared, &cfg, &traffic, &mut replies);
        let st = shared.state.borrow();
        assert_eq!(st.collections["c"].len(), 1, "only `early` is left");
        assert_eq!(st.removed.back().map(|r| r.1.as_str()), Some("a"));
        assert_eq!(st.recent.len(), 6);
        assert_eq!(st.changes.len(), 3);
    }

    #[test]
    fn a_server_that_sends_ready_first_brings_no_document_ages_into_fan_out() {
        // Meteor sends `ready` before the initial documents of a collection held in the server's
        // memory: they arrive after `ready`, stamped long before the subscription (the probe saw
        // a fan-out p50 of 13.6 s, the documents' age).
        let shared = Shared { state: RefCell::new(State::default()), notify: Notify::new() };
        let traffic = RefCell::new(Traffic::default());
        let cfg = ClientConfig::default();
        let mut replies = Vec::new();
        let subscribed = now_ms();
        shared.state.borrow_mut().subs.insert("s".into(), Sub { ready_at: None, nosub: None, sent_ms: subscribed });
        handle(r#"{"msg":"ready","subs":["s"]}"#, &shared, &cfg, &traffic, &mut replies);
        for (i, age_ms) in [13_600.0, 60_000.0, 5.0].iter().enumerate() {
            let old = format!(
                r#"{{"msg":"added","collection":"c","id":"old{i}","fields":{{"createdAt":{{"$date":{}}}}}}}"#,
                (subscribed - age_ms) as u64
            );
            handle(&old, &shared, &cfg, &traffic, &mut replies);
        }
        assert_eq!(traffic.borrow().fanout_us.len(), 0, "documents written before the subscription");
        // A write after the subscription was sent is fan-out.
        let new = format!(
            r#"{{"msg":"added","collection":"c","id":"new","fields":{{"createdAt":{{"$date":{}}}}}}}"#,
            now_ms() as u64 + 1
        );
        handle(&new, &shared, &cfg, &traffic, &mut replies);
        assert_eq!(traffic.borrow().fanout_us.len(), 1);
        assert!(traffic.borrow().fanout_us.max() < 1_000_000, "a fresh write, not an age");
    }
}

//! DDP sessions of the reference server, as Meteor's `livedata_server` runs them: version
//! negotiation; `ping` answered at once, ahead of everything; every other message of a session
//! processed in arrival order, one at a time (sessions run in parallel); a merge box per session;
//! `result` and `updated` with the write-fence meaning of `updated`; heartbeats; limits.
//!
//! Each connection has three parts: the reader (this module's `serve`: frames in, pings, the
//! heartbeat and handshake timers), the processor (a task that takes the session's messages in
//! order), and the writer (a task that frames, batches, compresses and writes what both send).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ddp::message::{DdpError, Fields, Message, ParseError};
use ddp::ws::{self, Deflate, Incoming, Opcode};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::mergebox::MergeBox;
use crate::tasks::{self, Fence, Reactivity, Subscriber, Tasks};

/// DDP versions this server speaks, in preference order.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["1", "pre2", "pre1"];

/// The server's DDP settings.
#[derive(Debug, Clone)]
pub struct DdpConfig {
    pub reactivity: Reactivity,
    /// permessage-deflate offered to clients (Meteor 3.1.1's defaults when on).
    pub compression: bool,
    /// Messages shorter than this go uncompressed (Meteor 3.1.1: 1024 bytes).
    pub compression_threshold: usize,
    /// Largest incoming message, in bytes; larger ones close the connection (1009).
    pub max_message_bytes: usize,
    /// Most DDP connections at once; more are refused with 503.
    pub max_sessions: usize,
    /// A connection that has not completed the DDP handshake by then is closed.
    pub handshake_timeout: Duration,
    /// Ping after this much silence; close if nothing arrives within the timeout after it.
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    /// SockJS transport: WebSocket ping interval (sockjs-node as Meteor configures it: 45 s).
    pub sockjs_heartbeat: Duration,
    /// Messages of one session waiting to be processed before reading from it pauses.
    pub queue_limit: usize,
    /// Most live subscriptions of one session; more get `nosub` with error 429.
    pub max_subs_per_session: usize,
    /// Most documents a session's merge box holds, each counted once per subscription that
    /// publishes it; a session past it is closed (1008), as a production server sheds a client
    /// that would exhaust its memory.
    pub max_session_documents: usize,
    /// Most bytes waiting to be written to one client; a client that reads too slowly to keep
    /// under it is cut off (the connection closed), not buffered without bound.
    pub max_pending_bytes: usize,
    /// Users that exist from the start (username, password), for `login`.
    pub users: Vec<(String, String)>,
    /// The `payload` publication's initial data (MeteorHacks' Cluster test: about 200 kB sent on
    /// every subscription): this many bytes of document bodies in all, ...
    pub payload_bytes: usize,
    /// ... spread over this many documents of the `payload` collection.
    pub payload_docs: usize,
    /// Serve `/echo`: a WebSocket that sends every message back, through the same framing,
    /// compression, ping and close handling as the DDP routes; for WebSocket conformance suites.
    pub ws_echo: bool,
    /// A server bug to reproduce (`bolide serve --inject-bug`); none unless asked.
    pub bug: Option<crate::bugs::Bug>,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig {
            reactivity: Reactivity::Push,
            compression: true,
            compression_threshold: 1024,
            max_message_bytes: 1 << 20,
            max_sessions: 100_000,
            handshake_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(15),
            heartbeat_timeout: Duration::from_secs(15),
            sockjs_heartbeat: Duration::from_secs(45),
            queue_limit: 1_000,
            max_subs_per_session: 100,
            max_session_documents: 100_000,
            max_pending_bytes: 16 << 20,
            users: Vec::new(),
            payload_bytes: 200_000,
            payload_docs: 100,
            ws_echo: false,
            bug: None,
        }
    }
}

/// State shared by every session: the tasks app and the counters.
pub struct App {
    pub tasks: Arc<Tasks>,
    pub accounts: crate::accounts::Accounts,
    pub config: DdpConfig,
    pub live_sessions: AtomicUsize,
    pub sessions_started: AtomicU64,
    pub methods_called: AtomicU64,
    /// Subscriptions answered with `ready`.
    pub subscriptions_ready: AtomicU64,
    /// DDP messages read from clients (heartbeats too).
    pub messages_in: AtomicU64,
    /// DDP messages queued to clients (heartbeats too).
    pub messages_out: AtomicU64,
    /// The `payload` publication's documents, made once: (id, fields).
    pub payload: Vec<(String, Fields)>,
    /// With a bug injected: every document's fields as first sent by any session.
    pub first_seen: Mutex<HashMap<String, Fields>>,
}

impl App {
    pub fn new(config: DdpConfig) -> Arc<App> {
        let accounts = crate::accounts::Accounts::default();
        for (name, password) in &config.users {
            accounts.add(name, password);
        }
        Arc::new(App {
            tasks: Tasks::new(config.reactivity),
            accounts,
            live_sessions: AtomicUsize::new(0),
            sessions_started: AtomicU64::new(0),
            methods_called: AtomicU64::new(0),
            subscriptions_ready: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
            payload: payload_docs(config.payload_bytes, config.payload_docs),
            first_seen: Mutex::new(HashMap::new()),
            config,
        })
    }

    /// Takes a session slot, or None when the server is full.
    pub fn admit(self: &Arc<Self>) -> Option<SessionSlot> {
        let now = self.live_sessions.fetch_add(1, Ordering::SeqCst);
        if now >= self.config.max_sessions {
            self.live_sessions.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(SessionSlot(Arc::clone(self)))
    }
}

/// A connection's place in the session count, given back when dropped.
pub struct SessionSlot(Arc<App>);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.live_sessions.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How DDP messages ride on WebSocket messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One DDP message per text frame (`/websocket`).
    Raw,
    /// SockJS: `o`, `a[...]`, `c[...]` from the server, `["..."]` from the client.
    SockJs,
    /// `/echo` (only with [`DdpConfig::ws_echo`]): every text or binary message sent back as it
    /// came; no DDP.
    Echo,
}

enum Out {
    Ddp(String),
    /// A message sent back by `/echo`: binary or not, and its bytes.
    Echo(bool, Vec<u8>),
    Pong(Vec<u8>),
    Ping,
    Close(u16, String),
}

impl Out {
    /// Bytes this item holds while it waits.
    fn size(&self) -> usize {
        match self {
            Out::Ddp(t) => t.len(),
            Out::Echo(_, b) => b.len(),
            Out::Pong(p) => p.len(),
            Out::Ping => 0,
            Out::Close(_, r) => r.len(),
        }
    }
}

/// What waits to be written to one client, and the switch that cuts it off.
#[derive(Default)]
struct Pending {
    bytes: AtomicUsize,
    cut: std::sync::atomic::AtomicBool,
    /// Wakes the writer (the only waiter) when the client is cut off.
    wake: tokio::sync::Notify,
}

/// The way out to one client: queues for the writer, counting bytes against
/// [`DdpConfig::max_pending_bytes`].
#[derive(Clone)]
struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    /// Counts the DDP messages that go out.
    app: Arc<App>,
    pending: Arc<Pending>,
    limit: usize,
}

impl Outbox {
    fn send(&self, item: Out) {
        if self.pending.cut.load(Ordering::Relaxed) {
            return;
        }
        if matches!(item, Out::Ddp(_)) {
            self.app.messages_out.fetch_add(1, Ordering::Relaxed);
        }
        let size = item.size();
        if self.pending.bytes.fetch_add(size, Ordering::Relaxed) + size > self.limit {
            self.cut();
            return;
        }
        let _ = self.tx.send(item);
    }

    /// Closes the connection without writing what waits (the writer stops at once).
    fn cut(&self) {
        self.pending.cut.store(true, Ordering::Relaxed);
        self.pending.wake.notify_one();
    }
}

/// One DDP session once `connect` succeeded.
pub struct Session {
    pub id: String,
    version: String,
    app: Arc<App>,
    out: Outbox,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    merge: MergeBox,
    /// Live subscriptions: whether each is a `fetchTasks` one (the autoupdate one publishes
    /// nothing).
    subs: HashMap<String, bool>,
    /// The observer of the tasks collection that every `fetchTasks` subscription of this session
    /// shares: identical cursors are observed once per session, so a session holding many
    /// subscriptions costs each write one callback, not one per subscription.
    tasks_view: Option<u64>,
    /// What an injected bug remembers of this session.
    bug: crate::bugs::BugState,
}

impl Session {
    fn send(&self, m: &Message) {
        self.out.send(Out::Ddp(m.to_json()));
    }

    fn send_all(&self, msgs: Vec<Message>) {
        for m in msgs {
            self.send(&m);
        }
    }

    fn with_merge(&self, f: impl FnOnce(&mut MergeBox, &mut Vec<Message>)) {
        let mut out = Vec::new();
        {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut st.merge, &mut out);
            if let Some(bug) = self.app.config.bug {
                out = crate::bugs::apply(bug, &mut st.bug, &self.app.first_seen, out);
            }
            if st.merge.copies() > self.app.config.max_session_documents {
                // The client would hold more than a session may: shed it.
                self.out.cut();
                return;
            }
            // Queue while holding the lock so that the order of data messages is the merge order.
            for m in &out {
                self.out.send(Out::Ddp(m.to_json()));
            }
        }
    }

    fn heartbeats(&self) -> bool {
        self.version != "pre1"
    }
}

impl Subscriber for Session {
    fn added(&self, sub_id: &str, id: &str, fields: &Fields) {
        self.with_merge(|mb, out| mb.added(sub_id, tasks::COLLECTION, id, fields, out));
    }

    fn changed(&self, sub_id: &str, id: &str, fields: &Fields, cleared: &[String]) {
        self.with_merge(|mb, out| mb.changed(sub_id, tasks::COLLECTION, id, fields, cleared, out));
    }

    fn removed(&self, sub_id: &str, id: &str) {
        self.with_merge(|mb, out| mb.removed(sub_id, tasks::COLLECTION, id, out));
    }
}

/// The reply to a `connect`: the version to speak, or the version to propose instead.
pub fn negotiate(version: &str, support: &[String]) -> Result<String, String> {
    if !support.iter().any(|s| s == version) {
        return Err(SUPPORTED_VERSIONS[0].to_string());
    }
    let pick = support.iter().find(|s| SUPPORTED_VERSIONS.contains(&s.as_str())).map_or(SUPPORTED_VERSIONS[0], |s| s);
    if pick == version {
        Ok(pick.to_string())
    } else {
        Err(pick.to_string())
    }
}

thread_local! {
    /// No context takeover either way, so one compressor per thread serves every session.
    static DEFLATE: RefCell<Deflate> = RefCell::new(Deflate::new(1, 9));
    /// Reads land here first; a session keeps only the bytes of frames not yet complete, so an
    /// idle session holds no read buffer at all.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; 64 * 1024]);
}

/// Serves one upgraded connection until it closes. `leftover` holds bytes read past the
/// handshake; `deflate` says whether permessage-deflate was agreed.
pub async fn serve(
    stream: TcpStream,
    leftover: Vec<u8>,
    framing: Framing,
    deflate: bool,
    app: Arc<App>,
    _slot: SessionSlot,
) {
    let (rd, wr) = stream.into_split();
    let (tx, out_rx) = mpsc::unbounded_channel::<Out>();
    let pending = Arc::new(Pending::default());
    let out_tx =
        Outbox { tx, app: Arc::clone(&app), pending: Arc::clone(&pending), limit: app.config.max_pending_bytes };
    let threshold = app.config.compression_threshold;
    let writer = tokio::spawn(write_loop(wr, out_rx, framing, deflate, threshold, pending));
    let config = app.config.clone();
    let mut reader = ws::Reader::new(true, config.max_message_bytes, deflate);
    let mut buf = leftover;
    let mut session: Option<Arc<Session>> = None;
    let mut queue: Option<mpsc::Sender<Queued>> = None;
    let mut processor = None;
    // Heartbeats: a tick every interval; silence over a whole interval sends a ping, which must
    // be followed by some message within the timeout.
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + config.heartbeat_interval, config.heartbeat_interval);
    let mut heard = false;
    let mut ping_deadline: Option<tokio::time::Instant> = None;
    let mut sockjs_tick =
        tokio::time::interval_at(tokio::time::Instant::now() + config.sockjs_heartbeat, config.sockjs_heartbeat);
    let mut ws_pong_deadline: Option<tokio::time::Instant> = None;
    let handshake_deadline = tokio::time::Instant::now() + config.handshake_timeout;
    let close = |code: u16, reason: &str| {
        out_tx.send(Out::Close(code, reason.to_string()));
    };

    let mut queued = 0u64;
    'conn: loop {
        // Take every complete frame already buffered.
        let mut used = 0;
        loop {
            match reader.next(&mut buf[used..]) {
                Ok(None) => break,
                Ok(Some((n, msg))) => {
                    used += n;
                    let Some(msg) = msg else { continue };
                    match msg {
                        Incoming::Ping(p) => {
                            out_tx.send(Out::Pong(p));
                        }
                        Incoming::Pong(_) => ws_pong_deadline = None,
                        Incoming::Close { code, .. } => {
                            close(code.unwrap_or(1000), "");
                            break 'conn;
                        }
                        Incoming::Data { opcode, compressed, payload } => {
                            let payload = if compressed {
                                match DEFLATE
                                    .with(|d| d.borrow_mut().decompress(&payload, true, config.max_message_bytes))
                                {
                                    Ok(p) => p,
                                    Err(e) => {
                                        close(e.close_code, &e.reason);
                                        break 'conn;
                                    }
                                }
                            } else {
                                payload
                            };
                            if framing == Framing::Echo && opcode == Opcode::Binary {
                                out_tx.send(Out::Echo(true, payload));
                                continue;
                            }
                            if opcode != Opcode::Text {
                                close(1003, "DDP travels in text frames");
                                break 'conn;
                            }
                            let Ok(text) = String::from_utf8(payload) else {
                                close(1007, "invalid UTF-8");
                                break 'conn;
                            };
                            if framing == Framing::Echo {
                                out_tx.send(Out::Echo(false, text.into_bytes()));
                                continue;
                            }
                            let texts = match framing {
                                Framing::Raw | Framing::Echo => vec![text],
                                Framing::SockJs => match ddp::sockjs::parse_client_frame(&text) {
                                    Ok(list) => list,
                                    Err(_) => {
                                        close(3000, "Broken framing.");
                                        break 'conn;
                                    }
                                },
                            };
                            heard = true;
                            ping_deadline = None;
                            for t in texts {
                                app.messages_in.fetch_add(1, Ordering::Relaxed);
                                let parsed = Message::parse(&t);
                                match (&session, parsed) {
                                    (None, Ok(Message::Connect { version, support, session: resumed })) => {
                                        match negotiate(&version, &support) {
                                            Ok(v) => {
                                                let s = Arc::new(Session {
                                                    id: ddp::id::random_id(),
                                                    version: v,
                                                    app: Arc::clone(&app),
                                                    out: out_tx.clone(),
                                                    state: Mutex::new(SessionState {
                                                        bug: crate::bugs::BugState::new(resumed.is_some()),
                                                        ..SessionState::default()
                                                    }),
                                                });
                                                app.sessions_started.fetch_add(1, Ordering::Relaxed);
                                                s.send(&Message::Connected { session: s.id.clone() });
                                                let (tx, rx) = mpsc::channel(config.queue_limit);
                                                processor = Some(tokio::spawn(process(Arc::clone(&s), rx)));
                                                queue = Some(tx);
                                                session = Some(s);
                                            }
                                            Err(v) => {
                                                out_tx.send(Out::Ddp(Message::Failed { version: v }.to_json()));
                                                close(1000, "");
                                                break 'conn;
                                            }
                                        }
                                    }
                                    (None, Err(ParseError::Malformed { msg, .. })) if msg == "connect" => {
                                        out_tx.send(Out::Ddp(Message::Failed { version: "1".into() }.to_json()));
                                        close(1000, "");
                                        break 'conn;
                                    }
                                    (None, Err(e)) => {
                                        out_tx.send(Out::Ddp(e.reply().to_json()));
                                    }
                                    (None, Ok(m)) => {
                                        let reply = Message::Error {
                                            reason: "Must connect first".into(),
                                            offending_message: Some(m.to_value()),
                                        };
                                        out_tx.send(Out::Ddp(reply.to_json()));
                                    }
                                    (Some(s), Ok(Message::Ping { id })) if s.heartbeats() => {
                                        // Ahead of the queue: answered even while a method runs.
                                        s.send(&Message::Pong { id });
                                    }
                                    (Some(_), item) => {
                                        let q = queue.as_ref().expect("queue exists once connected");
                                        // A full queue pauses reading: a flood slows its own session only.
                                        if q.send(Box::new(item)).await.is_err() {
                                            break 'conn;
                                        }
                                        queued += 1;
                                        if queued.is_multiple_of(16) {
                                            // Many messages in one read: let other sessions run.
                                            tokio::task::yield_now().await;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    close(e.close_code, &e.reason);
                    break 'conn;
                }
            }
        }
        buf.drain(..used);
        if buf.is_empty() && buf.capacity() > 0 {
            buf = Vec::new();
        }

        let ping_wait = async {
            match ping_deadline.min(ws_pong_deadline) {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let handshake_wait = async {
            if session.is_none() && framing != Framing::Echo {
                tokio::time::sleep_until(handshake_deadline).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            ready = rd.readable() => {
                if ready.is_err() {
                    break 'conn;
                }
                let read = SCRATCH.with(|scratch| {
                    let mut scratch = scratch.borrow_mut();
                    let n = rd.try_read(&mut scratch)?;
                    buf.extend_from_slice(&scratch[..n]);
                    Ok::<usize, std::io::Error>(n)
                });
                match read {
                    Ok(0) => break 'conn,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break 'conn,
                }
            },
            _ = tick.tick() => {
                if let Some(s) = &session {
                    if s.heartbeats() && !heard && ping_deadline.is_none() {
                        s.send(&Message::Ping { id: None });
                        ping_deadline = Some(tokio::time::Instant::now() + config.heartbeat_timeout);
                    }
                }
                heard = false;
            }
            _ = sockjs_tick.tick(), if framing == Framing::SockJs => {
                if ws_pong_deadline.is_none() {
                    out_tx.send(Out::Ping);
                    ws_pong_deadline = Some(tokio::time::Instant::now() + Duration::from_secs(10));
                }
            }
            _ = ping_wait => {
                close(3000, "No response from heartbeat");
                break 'conn;
            }
            _ = handshake_wait => {
                close(1000, "DDP handshake timeout");
                break 'conn;
            }
            // The writer stopped: the client was cut off, or its socket failed.
            _ = out_tx.tx.closed() => break 'conn,
        }
    }
    drop(queue);
    if let Some(p) = processor {
        // Let the processor see the end of its queue, then tear the subscriptions down.
        p.abort();
        let _ = p.await;
    }
    if let Some(s) = session {
        let key = {
            let mut st = s.state.lock().unwrap_or_else(|p| p.into_inner());
            st.subs.clear();
            st.tasks_view.take()
        };
        if let Some(k) = key {
            s.app.tasks.stop_observing(k);
        }
    }
    drop(out_tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
}

/// Frames, batches, compresses and writes; ends after a close or when every sender is gone.
async fn write_loop(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Out>,
    framing: Framing,
    deflate: bool,
    threshold: usize,
    pending: Arc<Pending>,
) {
    let mut wire = Vec::new();
    let frame_message = |wire: &mut Vec<u8>, opcode: Opcode, data: &[u8]| {
        if deflate && data.len() >= threshold {
            let mut packed = Vec::with_capacity(data.len() / 3 + 16);
            DEFLATE.with(|d| d.borrow_mut().compress(data, true, &mut packed));
            ws::encode_frame(wire, opcode, true, &packed, None);
        } else {
            ws::encode_frame(wire, opcode, false, data, None);
        }
    };
    let frame_text = |wire: &mut Vec<u8>, text: &[u8]| frame_message(wire, Opcode::Text, text);
    if framing == Framing::SockJs {
        frame_text(&mut wire, b"o");
        if wr.write_all(&wire).await.is_err() {
            return;
        }
        wire.clear();
    }
    let mut batch: Vec<String> = Vec::new();
    let flush = |wire: &mut Vec<u8>, batch: &mut Vec<String>| {
        if !batch.is_empty() {
            frame_text(wire, ddp::sockjs::encode_messages(batch).as_bytes());
            batch.clear();
        }
    };
    let mut closing = None;
    loop {
        let first = tokio::select! {
            item = rx.recv() => item,
            _ = pending.wake.notified() => None,
        };
        let Some(first) = first.filter(|_| !pending.cut.load(Ordering::Relaxed)) else { break };
        let mut next = Some(first);
        let mut taken = 0;
        let mut bytes = 0;
        while let Some(item) = next {
            bytes += item.size();
            match item {
                Out::Ddp(text) => match framing {
                    Framing::Raw | Framing::Echo => frame_text(&mut wire, text.as_bytes()),
                    Framing::SockJs => batch.push(text),
                },
                Out::Echo(binary, data) => {
                    frame_message(&mut wire, if binary { Opcode::Binary } else { Opcode::Text }, &data)
                }
                Out::Pong(p) => {
                    flush(&mut wire, &mut batch);
                    ws::encode_frame(&mut wire, Opcode::Pong, false, &p, None);
                }
                Out::Ping => {
                    flush(&mut wire, &mut batch);
                    ws::encode_frame(&mut wire, Opcode::Ping, false, b"", None);
                }
                Out::Close(code, reason) => {
                    closing = Some((code, reason));
                    break;
                }
            }
            taken += 1;
            next = if taken < 512 { rx.try_recv().ok() } else { None };
        }
        flush(&mut wire, &mut batch);
        if let Some((code, reason)) = &closing {
            if framing == Framing::SockJs {
                frame_text(&mut wire, ddp::sockjs::encode_close(*code, reason).as_bytes());
            }
            let code = if ws::close_code_allowed(*code) { *code } else { 1000 };
            ws::encode_frame(&mut wire, Opcode::Close, false, &ws::close_payload(code, reason), None);
        }
        let written = tokio::select! {
            r = wr.write_all(&wire) => r.is_ok(),
            // Cut off while the client is not reading: drop what waits.
            _ = pending.wake.notified() => false,
        };
        if !written {
            return;
        }
        pending.bytes.fetch_sub(bytes, Ordering::Relaxed);
        // Idle sessions keep no write buffer either.
        wire = Vec::new();
        if closing.is_some() {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

/// Takes a session's messages in order, one at a time.
/// A message waiting for the processor; boxed so that a channel block (32 slots, allocated when the
/// session starts) costs 256 bytes, not 10 KB.
type Queued = Box<Result<Message, ParseError>>;

async fn process(session: Arc<Session>, mut rx: mpsc::Receiver<Queued>) {
    while let Some(item) = rx.recv().await {
        // One message, then other sessions' turn: a session flooding its queue gets its share
        // of the threads, not all of them.
        tokio::task::yield_now().await;
        match *item {
            Err(e) => session.send(&e.reply()),
            Ok(Message::Connect { .. }) => {
                session.send(&Message::Error { reason: "Already connected".into(), offending_message: None })
            }
            Ok(Message::Pong { .. }) => {}
            Ok(Message::Ping { .. }) => {
                // A pre1 session has no heartbeats.
                session.send(&Message::Error { reason: "Bad request".into(), offending_message: None })
            }
            Ok(Message::Sub { id, name, params: _ }) => subscribe(&session, id, &name),
            Ok(Message::Unsub { id }) => unsubscribe(&session, &id),
            Ok(Message::Method { method, params, id, .. }) => {
                if method == "bolide.sleep" {
                    // Test knob: holds this session's queue, as a slow method without unblock() does.
                    let ms = params.first().and_then(|p| p.get("ms")).and_then(Value::as_u64).unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(ms.min(60_000))).await;
                    session.send_all(vec![
                        Message::Updated { methods: vec![id.clone()] },
                        Message::Result { id, result: Some(Value::from(ms)), error: None },
                    ]);
                    continue;
                }
                call(&session, &method, &params, id)
            }
            Ok(other) => session
                .send(&Message::Error { reason: "Bad request".into(), offending_message: Some(other.to_value()) }),
        }
    }
}

/// The merge box's name for the shared `fetchTasks` observer (see `SessionState::tasks_view`).
const TASKS_VIEW: &str = "fetchTasks";

fn subscribe(session: &Arc<Session>, id: String, name: &str) {
    // Messages of a session are processed one at a time, so nothing else subscribes meanwhile.
    let first_view = {
        let mut st = session.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.subs.contains_key(&id) {
            return; // a known id is silently ignored, as Meteor does
        }
        if name != "fetchTasks" && name != "meteor_autoupdate_clientVersions" && name != PAYLOAD {
            drop(st);
            let error = DdpError::meteor(404, &format!("Subscription '{name}' not found"));
            session.send(&Message::Nosub { id, error: Some(error) });
            return;
        }
        let most = session.app.config.max_subs_per_session;
        if st.subs.len() >= most {
            drop(st);
            let error = DdpError::meteor(429, &format!("Too many subscriptions on this connection (at most {most})"));
            session.send(&Message::Nosub { id, error: Some(error) });
            return;
        }
        let tasks = name == "fetchTasks";
        st.subs.insert(id.clone(), tasks);
        tasks && st.tasks_view.is_none()
    };
    if name == PAYLOAD {
        // The same documents for every subscriber, all at once, then `ready`.
        let key = format!("{PAYLOAD}:{id}");
        session.with_merge(|mb, out| {
            for (doc_id, fields) in &session.app.payload {
                mb.added(&key, PAYLOAD, doc_id, fields, out);
            }
        });
    }
    let bug = session.app.config.bug;
    if first_view && bug == Some(crate::bugs::Bug::ReadyEarly) {
        // The bug: `ready` at once, the initial documents a second later.
        session.app.subscriptions_ready.fetch_add(1, Ordering::Relaxed);
        session.send(&Message::Ready { subs: vec![id] });
        let late = Arc::clone(session);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if !late.out.tx.is_closed() {
                observe_tasks(&late);
            }
        });
        return;
    }
    if first_view {
        // The initial documents go out (as `added`) before `ready`.
        observe_tasks(session);
    }
    if bug == Some(crate::bugs::Bug::Leak) && name == "fetchTasks" {
        session.send(&crate::bugs::leaked(tasks::COLLECTION, &session.id));
    }
    session.app.subscriptions_ready.fetch_add(1, Ordering::Relaxed);
    session.send(&Message::Ready { subs: vec![id.clone()] });
    if bug == Some(crate::bugs::Bug::ReadyTwice) {
        session.send(&Message::Ready { subs: vec![id] });
    }
}

/// The session's shared `fetchTasks` observer, started: the documents it holds go out as `added`.
fn observe_tasks(session: &Arc<Session>) {
    let subscriber: Arc<dyn Subscriber> = Arc::clone(session) as Arc<dyn Subscriber>;
    let key = session.app.tasks.observe(subscriber, TASKS_VIEW);
    session.state.lock().unwrap_or_else(|p| p.into_inner()).tasks_view = Some(key);
}

/// The publication (and collection) of fixed-size documents for subscription churn.
const PAYLOAD: &str = "payload";

/// `docs` documents whose `body` strings add up to `bytes` (the first ones a byte longer when it
/// does not divide), each with its index `n`, as a real collection's documents would be.
fn payload_docs(bytes: usize, docs: usize) -> Vec<(String, Fields)> {
    let docs = docs.max(1);
    (0..docs)
        .map(|n| {
            let len = bytes / docs + usize::from(n < bytes % docs);
            let mut fields = Fields::new();
            fields.insert("n".into(), Value::from(n));
            fields.insert("body".into(), Value::String("x".repeat(len)));
            (format!("payload{n:05}"), fields)
        })
        .collect()
}

fn unsubscribe(session: &Arc<Session>, id: &str) {
    let last_view = {
        let mut st = session.state.lock().unwrap_or_else(|p| p.into_inner());
        let was = st.subs.remove(id);
        let others = st.subs.values().any(|tasks| *tasks);
        if was == Some(true) && !others {
            st.tasks_view.take()
        } else {
            None
        }
    };
    if let Some(key) = last_view {
        session.app.tasks.stop_observing(key);
        session.with_merge(|mb, out| mb.drop_sub(TASKS_VIEW, out));
    }
    session.with_merge(|mb, out| mb.drop_sub(&format!("{PAYLOAD}:{id}"), out));
    session.send(&Message::Nosub { id: id.to_string(), error: None });
}

/// The string field `key` of the method's single object argument (Meteor's check() would answer
/// 400 "Match failed" otherwise).
fn arg<'a>(params: &'a [Value], key: &str) -> Result<&'a str, Box<DdpError>> {
    params
        .first()
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| Box::new(DdpError::meteor(400, "Match failed")))
}

/// The tasks app's methods, and accounts' `login` and `createUser`.
fn run_method(app: &App, method: &str, params: &[Value], fence: &mut Fence) -> Result<Option<Value>, Box<DdpError>> {
    let tasks = &app.tasks;
    match method {
        "login" => app.accounts.login(params.first()).map(Some),
        "createUser" => app.accounts.create_user(params.first()).map(Some),
        // The Meteor team's transport benchmarks' method: its argument back.
        "bench.echo" => Ok(Some(params.first().cloned().unwrap_or(Value::Null))),
        "insertTask" => {
            let description = arg(params, "description")?;
            let session_id = arg(params, "sessionId")?;
            Ok(Some(Value::String(tasks.insert(session_id, description, fence))))
        }
        "removeTask" => {
            let task = arg(params, "taskId")?;
            Ok(Some(Value::from(tasks.remove_where(|t| t.id == task, fence))))
        }
        "updateTask" => {
            let task = arg(params, "taskId")?;
            let description = arg(params, "description")?;
            Ok(Some(Value::from(tasks.update(task, description, fence))))
        }
        // The collection's own mutation method, as Meteor's client calls it under allow rules:
        // [{_id}, {$set: {description}}, options]; an untrusted selector is by _id only.
        "/taskCollection/updateAsync" | "/taskCollection/update" => {
            let bad = || Box::new(DdpError::meteor(400, "Match failed"));
            let task = params.first().and_then(|s| s.get("_id")).and_then(Value::as_str).ok_or_else(bad)?;
            let set = params.get(1).and_then(|m| m.get("$set")).ok_or_else(bad)?;
            let description = set.get("description").and_then(Value::as_str).ok_or_else(bad)?;
            Ok(Some(Value::from(tasks.update(task, description, fence))))
        }
        "removeAllTasks" => {
            let owner = arg(params, "sessionId")?;
            Ok(Some(Value::from(tasks.remove_where(|t| t.session_id == owner, fence))))
        }
        "fetchTasks" => Ok(Some(Value::Array(tasks.all().iter().map(tasks::Task::document).collect()))),
        other => Err(Box::new(DdpError::meteor(404, &format!("Method '{other}' not found")))),
    }
}

fn call(session: &Arc<Session>, method: &str, params: &[Value], id: String) {
    session.app.methods_called.fetch_add(1, Ordering::Relaxed);
    let mut fence = Fence::default();
    let outcome = run_method(&session.app, method, params, &mut fence);
    let result = match outcome {
        Ok(result) => Message::Result { id: id.clone(), result, error: None },
        Err(error) => Message::Result { id: id.clone(), result: None, error: Some(*error) },
    };
    let updated = Message::Updated { methods: vec![id] };
    if fence.is_clear() {
        // Nothing owed: the fence fires as it is armed, so `updated` goes first (Meteor 3).
        session.send_all(vec![updated, result]);
    } else {
        session.send(&result);
        let s = Arc::clone(session);
        tokio::spawn(async move {
            fence.committed().await;
            s.send(&updated);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_negotiation() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Each row: proposed version, support list, expected outcome.
        let rows = [
            ("1", v(&["1", "pre2", "pre1"]), Ok("1".to_string())),
            ("pre1", v(&["1", "pre1"]), Err("1".to_string())),
            ("pre2", v(&["pre2", "pre1"]), Ok("pre2".to_string())),
            ("1", v(&["pre2"]), Err("1".to_string())),
            ("2", v(&["2", "1"]), Err("1".to_string())),
            ("9", v(&["9"]), Err("1".to_string())),
        ];
        for (version, support, want) in rows {
            assert_eq!(negotiate(version, &support), want, "{version} {support:?}");
        }
    }
}

#[cfg(test)]
mod memory_tests {
    /// What each idle session costs in tasks: the connection's futures stay small because nothing
    /// large (read chunks, header arrays, body blocks) is held across an await. A 16 KiB array
    /// slipping back in would break the server's per-session memory target; this catches it.
    #[test]
    fn per_session_futures_stay_small() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = super::App::new(super::DdpConfig::default());
            let shared = crate::Shared {
                counters: Default::default(),
                app: app.clone(),
                balancer: Default::default(),
                balance: Default::default(),
                limits: crate::Limits { max_connections: 16, request_timeout: std::time::Duration::from_secs(10) },
                addr,
            };
            let http = crate::serve_connection(tokio::net::TcpStream::connect(addr).await.unwrap(), &shared);
            assert!(std::mem::size_of_val(&http) < 2048, "HTTP task: {}", std::mem::size_of_val(&http));
            let slot = app.admit().unwrap();
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let session = super::serve(stream, Vec::new(), super::Framing::Raw, false, app.clone(), slot);
            assert!(std::mem::size_of_val(&session) < 4096, "session task: {}", std::mem::size_of_val(&session));
            let (_tx, rx) = tokio::sync::mpsc::unbounded_channel::<super::Out>();
            let (_, w) = listener.accept().await.unwrap().0.into_split();
            let writer = super::write_loop(w, rx, super::Framing::Raw, false, 1024, Default::default());
            assert!(std::mem::size_of_val(&writer) < 1024, "writer task: {}", std::mem::size_of_val(&writer));
            assert_eq!(std::mem::size_of::<super::Queued>(), 8, "queue slots are boxed");
        });
    }
}

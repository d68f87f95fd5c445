//! The DevTools protocol over WebSocket, as a client on a worker's single-threaded runtime: one
//! connection per browser user to the browser's endpoint, commands matched to their answers by
//! id, events queued in order for the page to read (their timestamps are the browser's, so when
//! they are read does not change what they measure).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use ddp::ws::{self, Incoming, Opcode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::problem::Problem;

/// The largest DevTools message accepted (a page's big frames and evaluations fit).
const MAX_MESSAGE: usize = 64 << 20;

/// One event: its method, the session it belongs to (a page's), its parameters.
#[derive(Debug, Clone)]
pub struct Event {
    pub method: String,
    pub session: Option<String>,
    pub params: Value,
}

type Answer = oneshot::Sender<Result<Value, Problem>>;

/// What a command the browser did not answer in time says.
pub const NO_ANSWER: &str = "no answer from the browser within";

/// Which events are kept, made small first (a WebSocket frame's payload is large, and a user
/// thinking reads none for a while): false drops the event.
pub type Keep = fn(&str, &mut Value) -> bool;

/// At most this many events wait to be read (a page that logs errors without end while its user
/// thinks): past it, events are counted by kind and dropped.
pub const MAX_QUEUED: usize = 50_000;

/// What a command waiting on a page that crashed is answered.
pub const CRASHED: &str = "the page crashed";

#[derive(Default)]
struct Shared {
    next_id: Cell<u64>,
    /// Commands waiting for their answer: the session each went to, and where the answer goes.
    waiting: RefCell<HashMap<u64, (Option<String>, Answer)>>,
    events: RefCell<VecDeque<Event>>,
    /// Events past [`MAX_QUEUED`], by session and method: counted, not kept.
    dropped: RefCell<HashMap<(Option<String>, String), u64>>,
    /// Sessions whose page crashed: a command to one is answered at once.
    crashed: RefCell<std::collections::HashSet<Option<String>>>,
    /// Why the connection ended (the browser died, or closed it).
    closed: RefCell<Option<String>>,
    arrived: Notify,
    keep: Option<Keep>,
    /// Where the reader's own commands go (a dialog's answer): the writer's queue.
    tx: Option<mpsc::UnboundedSender<Vec<u8>>>,
}

/// A DevTools connection.
pub struct Cdp {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    shared: Rc<Shared>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for Cdp {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Cdp {
    /// Connects to `ws://127.0.0.1:PORT/PATH` (the browser's endpoint) within `timeout`, keeping
    /// the events `keep` keeps.
    pub async fn connect(port: u16, path: &str, keep: Keep, timeout: Duration) -> Result<Cdp, Problem> {
        match tokio::time::timeout(timeout, Cdp::open(port, path, keep)).await {
            Ok(r) => r,
            Err(_) => Err(format!("the browser's DevTools endpoint did not answer within {timeout:?}").into()),
        }
    }

    async fn open(port: u16, path: &str, keep: Keep) -> Result<Cdp, Problem> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("the browser's DevTools endpoint refused: {e}"))?;
        let _ = stream.set_nodelay(true);
        let key = ws::client_key();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(req.as_bytes()).await.map_err(|e| format!("DevTools handshake: {e}"))?;
        let mut buf = Vec::with_capacity(4096);
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > 64 << 10 || stream.read_buf(&mut buf).await.map_err(|e| format!("DevTools: {e}"))? == 0 {
                return Err("the browser closed its DevTools connection during the handshake".into());
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        if !head.starts_with("HTTP/1.1 101") {
            let status = head.lines().next().unwrap_or_default();
            return Err(format!("DevTools refused the WebSocket: {}", crate::redact::printable(status)).into());
        }
        let accept = ws::accept_key(&key);
        if !head.lines().any(|l| l.to_ascii_lowercase().starts_with("sec-websocket-accept:") && l.contains(&accept)) {
            return Err("DevTools answered with a wrong Sec-WebSocket-Accept".into());
        }
        let leftover = buf[end..].to_vec();
        let (mut read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let shared =
            Rc::new(Shared { next_id: Cell::new(1), keep: Some(keep), tx: Some(tx.clone()), ..Shared::default() });
        let writer = tokio::task::spawn_local(async move {
            while let Some(frame) = rx.recv().await {
                if write.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let s = Rc::clone(&shared);
        let reader = tokio::task::spawn_local(async move {
            let why = read_loop(&mut read, leftover, &s).await;
            s.closed.replace(Some(why.clone()));
            for (_, (_, answer)) in s.waiting.borrow_mut().drain() {
                let _ = answer.send(Err(why.clone().into()));
            }
            s.arrived.notify_one();
        });
        Ok(Cdp { tx, shared, tasks: [writer, reader] })
    }

    /// Sends a command (to a page's session when `session` is given) and waits for its answer,
    /// within `timeout`.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, Problem> {
        if let Some(why) = self.closed() {
            return Err(why.into());
        }
        if self.shared.crashed.borrow().contains(&session.map(str::to_string)) {
            return Err(format!("{method}: {CRASHED}").into());
        }
        let (id, frame) = command(&self.shared, method, params, session);
        let (answer, answered) = oneshot::channel();
        self.shared.waiting.borrow_mut().insert(id, (session.map(str::to_string), answer));
        if self.tx.send(frame).is_err() {
            self.shared.waiting.borrow_mut().remove(&id);
            return Err("the browser's DevTools connection is closed".into());
        }
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(r)) => r.map_err(|e| Problem::from(format!("{method}: {e}"))),
            Ok(Err(_)) => Err("the browser's DevTools connection is closed".into()),
            Err(_) => {
                self.shared.waiting.borrow_mut().remove(&id);
                Err(format!("{method}: {NO_ANSWER} {timeout:?}").into())
            }
        }
    }

    /// How many events of each kind for `session` (or for none) came past the queue's bound
    /// since the last call.
    pub fn take_dropped(&self, session: &str) -> Vec<(String, u64)> {
        let mut dropped = self.shared.dropped.borrow_mut();
        if dropped.is_empty() {
            return Vec::new();
        }
        let mine: Vec<_> = dropped.keys().filter(|(s, _)| s.as_deref().is_none_or(|s| s == session)).cloned().collect();
        mine.into_iter().filter_map(|k| dropped.remove(&k).map(|n| (k.1, n))).collect()
    }

    /// The events that arrived so far, in order.
    pub fn take_events(&self) -> VecDeque<Event> {
        std::mem::take(&mut *self.shared.events.borrow_mut())
    }

    /// Waits until an event arrives (or the connection ends), at most `wait`.
    pub async fn arrival(&self, wait: Duration) {
        if !self.shared.events.borrow().is_empty() || self.closed().is_some() {
            return;
        }
        let _ = tokio::time::timeout(wait, self.shared.arrived.notified()).await;
    }

    /// Why the connection ended, once it has.
    pub fn closed(&self) -> Option<String> {
        self.shared.closed.borrow().clone()
    }
}

/// A command's id and its frame, ready to send.
fn command(s: &Shared, method: &str, params: Value, session: Option<&str>) -> (u64, Vec<u8>) {
    let id = s.next_id.get();
    s.next_id.set(id + 1);
    let mut msg = json!({ "id": id, "method": method, "params": params });
    if let Some(s) = session {
        msg["sessionId"] = Value::String(s.to_string());
    }
    let mut frame = Vec::new();
    ws::encode_frame(&mut frame, Opcode::Text, false, msg.to_string().as_bytes(), Some(rand::random()));
    (id, frame)
}

async fn read_loop(read: &mut tokio::net::tcp::OwnedReadHalf, mut buf: Vec<u8>, s: &Shared) -> String {
    let mut reader = ws::Reader::new(false, MAX_MESSAGE, false);
    loop {
        loop {
            match reader.next(&mut buf) {
                Ok(Some((used, message))) => {
                    buf.drain(..used);
                    match message {
                        Some(Incoming::Data { payload, .. }) => dispatch(&payload, s),
                        Some(Incoming::Close { .. }) => return "the browser closed its DevTools connection".into(),
                        _ => {}
                    }
                }
                Ok(None) => break,
                Err(e) => return format!("the browser's DevTools connection broke: {e}"),
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return "the browser's DevTools connection closed (did the browser die?)".into(),
            Ok(_) => {}
        }
    }
}

fn dispatch(payload: &[u8], s: &Shared) {
    let Ok(mut v) = serde_json::from_slice::<Value>(payload) else { return };
    if let Some(id) = v.get("id").and_then(Value::as_u64) {
        if let Some((_, answer)) = s.waiting.borrow_mut().remove(&id) {
            let r = match v.get_mut("error") {
                Some(e) => {
                    Err(crate::redact::printable(e.get("message").and_then(Value::as_str).unwrap_or("error"))
                        .into_owned())
                }
                None => Ok(v.get_mut("result").map(Value::take).unwrap_or(Value::Null)),
            };
            let _ = answer.send(r.map_err(Problem::from));
        }
        return;
    }
    let Some(method) = v.get("method").and_then(Value::as_str).map(str::to_string) else { return };
    let session = v.get("sessionId").and_then(Value::as_str).map(str::to_string);
    let mut params = v.get_mut("params").map(Value::take).unwrap_or(Value::Null);
    // A page that crashed answers nothing more: what waits on it is answered now.
    if method == "Inspector.targetCrashed" {
        s.crashed.borrow_mut().insert(session.clone());
        let mut waiting = s.waiting.borrow_mut();
        let gone: Vec<u64> = waiting.iter().filter(|(_, (on, _))| *on == session).map(|(id, _)| *id).collect();
        for id in gone {
            if let Some((_, answer)) = waiting.remove(&id) {
                let _ = answer.send(Err(CRASHED.into()));
            }
        }
    }
    // A dialog (alert, confirm, prompt, beforeunload) holds the page's script, its load and any
    // input sent to it until it is answered: it is answered here, at once, as a user pressing OK
    // would (a prompt with its default text), whatever the page's user is waiting for. Its answer
    // matches no waiting command and is dropped.
    if method == "Page.javascriptDialogOpening" {
        let text = params["defaultPrompt"].as_str().unwrap_or_default().to_string();
        let (_, frame) = command(
            s,
            "Page.handleJavaScriptDialog",
            json!({ "accept": true, "promptText": text }),
            session.as_deref(),
        );
        if let Some(tx) = &s.tx {
            let _ = tx.send(frame);
        }
    }
    // Past the bound, an event is counted by kind before anything is made of it; what the page's
    // state hangs on (its load, a navigation, its end) is never dropped.
    let state = matches!(
        method.as_str(),
        "Page.loadEventFired"
            | "Page.frameNavigated"
            | "Inspector.targetCrashed"
            | "Inspector.detached"
            | "Network.webSocketClosed"
    );
    if !state && s.events.borrow().len() >= MAX_QUEUED {
        *s.dropped.borrow_mut().entry((session, method)).or_default() += 1;
        s.arrived.notify_one();
        return;
    }
    if s.keep.is_some_and(|keep| !keep(&method, &mut params)) {
        return;
    }
    s.events.borrow_mut().push_back(Event { method, session, params });
    s.arrived.notify_one();
}

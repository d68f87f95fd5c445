//! A Socket.IO v4 client as the official one (socket.io-client 4) speaks it: Engine.IO v4 over
//! HTTP long-polling first, then the upgrade to a WebSocket (`2probe`, `3probe`, `5`), or over a
//! WebSocket straight away (`transports: [websocket]`); the server's pings answered, a silence
//! longer than its ping interval and timeout taken for a dead connection ("ping timeout"); one
//! namespace per connection (`40/admin,` and its `40{"sid":..}` or `44{"message":..}`), events
//! (`42["name",...]`), acknowledgements asked (`42<id>[...]`) and received (`43<id>[...]`), the
//! server's disconnect (`41`: "io server disconnect").
//!
//! Packets from either transport reach the same [`Shared`] state: what was acknowledged, how many
//! events of each name came (for `listen`), the events a `response` watches, the fan-out latency
//! of each event that carries its emitter's send time.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use crate::proto::http::tls::Connector;
use crate::proto::link::{self, Failure, Link, Opening};
use crate::proto::outbox;
use crate::proto::ws::{self as wire, Endpoint, Outgoing, Traffic};
use crate::scenario::settings::{SioTransport, SocketIoConfig};

/// The largest answer read from one poll.
const MAX_BODY: usize = 16 << 20;
/// Most distinct event names a connection counts.
const MAX_EVENT_NAMES: usize = 1024;
/// How long a POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// Packets in one polling payload are separated by this (Engine.IO v4).
const SEPARATOR: char = '\u{1e}';

/// What a connection knows, shared by its transport's task and its user.
#[derive(Default)]
pub struct State {
    sid: Option<String>,
    upgrades: Vec<String>,
    /// The server's ping interval plus its ping timeout: longer without a packet is a dead link.
    silence: Option<Duration>,
    probed: bool,
    /// The WebSocket took over from polling: what it says is the session's (before, only its
    /// `3probe`).
    upgraded: bool,
    /// The namespace's CONNECT answered: when, or the server's refusal.
    connected: Option<Result<Instant, String>>,
    /// Acknowledgements by id: asked for and not yet come (None), or when they came and their
    /// arguments. An id nobody waits for (any more) is not kept.
    acks: HashMap<u64, Option<(Instant, Vec<Value>)>>,
    /// Events by name: how many came, and how many a `listen` took.
    counts: HashMap<String, (u64, u64)>,
    /// What a `response` waits for: events of this name since the emit, their arguments.
    watch: Option<Watch>,
    /// Why the connection ended (socket.io-client's reasons: "io server disconnect", "transport
    /// close", "ping timeout", "transport error").
    pub closed: Option<String>,
    pub last_data: Option<Instant>,
}

/// What an answer must carry (Artillery's `data`): a list, every argument of the events since
/// the emit one after another; a mapping or a number, the last argument of an event; text, part of
/// the last argument of an event; nothing, any event.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    Any,
    All(Vec<Value>),
    Contains(String),
    Equals(Value),
}

impl Want {
    pub fn new(data: Option<Value>) -> Want {
        match data {
            None => Want::Any,
            Some(Value::Array(all)) => Want::All(all),
            Some(Value::String(part)) => Want::Contains(part),
            Some(v) => Want::Equals(v),
        }
    }

    /// Whether one answer's arguments (an acknowledgement's, or all a response's) are wanted.
    pub fn answers(&self, got: &[Value]) -> bool {
        match (self, got.last()) {
            (Want::Any, _) => true,
            (Want::All(all), _) => got == all.as_slice(),
            (Want::Contains(part), Some(Value::String(last))) => last.contains(part.as_str()),
            (Want::Equals(w), Some(last)) => last == w,
            (_, _) => false,
        }
    }
}

/// The events a `response` watches, judged one at a time as they come: it keeps what the judge
/// needs (the answer so far, the last event for the error), never every event, so a server
/// sending endless events that do not answer costs one event's memory.
struct Watch {
    channel: String,
    want: Want,
    /// The answer: its arguments (a list's, those that matched so far).
    kept: Vec<Value>,
    /// A list's events no longer match it: no later event can.
    spoiled: bool,
    /// The last event's arguments, when they did not answer (for the error at the timeout).
    last_args: Vec<Value>,
    events: u64,
    answered: Option<Instant>,
}

impl Watch {
    fn new(channel: String, want: Want) -> Watch {
        Watch { channel, want, kept: Vec::new(), spoiled: false, last_args: Vec::new(), events: 0, answered: None }
    }

    /// One event of the channel: judged now.
    fn event(&mut self, args: Vec<Value>, now: Instant) {
        self.events += 1;
        if self.answered.is_some() {
            return;
        }
        let answers = match &self.want {
            Want::All(all) => {
                let at = self.kept.len();
                if !self.spoiled && all.get(at..at + args.len()) == Some(args.as_slice()) {
                    self.kept.extend(args.iter().cloned());
                } else {
                    self.spoiled = true;
                    self.kept = Vec::new();
                }
                !self.spoiled && self.kept.len() == all.len()
            }
            want => want.answers(&args),
        };
        if answers {
            if !matches!(self.want, Want::All(_)) {
                self.kept = args;
            }
            self.answered = Some(now);
        } else {
            self.last_args = args;
        }
    }
}

/// A connection's state and what it needs to read packets.
pub struct Shared {
    pub state: RefCell<State>,
    pub notify: Notify,
    traffic: Rc<RefCell<Traffic>>,
    fanout_field: Option<String>,
    /// The namespace this connection joined.
    nsp: String,
}

impl Shared {
    /// One Engine.IO packet from the server.
    fn packet(&self, p: &str, replies: &mut Vec<String>) {
        let now = Instant::now();
        let mut st = self.state.borrow_mut();
        let (kind, rest) = (p.as_bytes().first().copied(), p.get(1..).unwrap_or_default());
        match kind {
            Some(b'0') => match serde_json::from_str::<Value>(rest) {
                Ok(open) => {
                    st.sid = open.get("sid").and_then(Value::as_str).map(String::from);
                    st.upgrades = open
                        .get("upgrades")
                        .and_then(Value::as_array)
                        .map(|u| u.iter().filter_map(Value::as_str).map(String::from).collect())
                        .unwrap_or_default();
                    // Within a day: a hostile number neither overflows nor waits forever.
                    let ms = |k: &str| open.get(k).and_then(Value::as_u64).unwrap_or(25_000).clamp(1, 86_400_000);
                    st.silence = Some(Duration::from_millis(ms("pingInterval") + ms("pingTimeout")));
                }
                Err(_) => self.traffic.borrow_mut().protocol_errors += 1,
            },
            Some(b'1') => st.closed = Some("transport close: the server closed the Engine.IO session".into()),
            Some(b'2') => replies.push(format!("3{rest}")),
            Some(b'3') => st.probed |= rest == "probe",
            Some(b'4') => self.message(rest, now, &mut st),
            Some(b'6') => {}
            _ => self.traffic.borrow_mut().protocol_errors += 1,
        }
        drop(st);
        self.notify.notify_waiters();
    }

    /// One Socket.IO packet (an Engine.IO message).
    fn message(&self, p: &str, now: Instant, st: &mut State) {
        let Some(parsed) = parse_packet(p) else {
            self.traffic.borrow_mut().protocol_errors += 1;
            return;
        };
        // A connection is one namespace's: what a server says on another is not this user's
        // (counted, dropped).
        if parsed.nsp != self.nsp && !matches!(parsed.kind, b'5' | b'6') {
            self.traffic.borrow_mut().count("socketio.foreign_namespace_packets", 1);
            return;
        }
        match parsed.kind {
            b'0' => st.connected = Some(Ok(now)),
            b'1' => {
                self.traffic.borrow_mut().count("socketio.server_disconnects", 1);
                st.closed = Some("io server disconnect".into());
            }
            b'2' => {
                let Some(Value::Array(mut args)) = parsed.data else {
                    self.traffic.borrow_mut().protocol_errors += 1;
                    return;
                };
                if args.is_empty() || !args[0].is_string() {
                    self.traffic.borrow_mut().protocol_errors += 1;
                    return;
                }
                let name = match args.remove(0) {
                    Value::String(s) => s,
                    _ => unreachable!("checked above"),
                };
                st.last_data = Some(now);
                self.traffic.borrow_mut().count("socketio.events_received", 1);
                if let Some(field) = &self.fanout_field {
                    if let Some(ms) = args.iter().find_map(|a| link::stamped_ms(a, field, 2)) {
                        link::record_fanout(&self.traffic, ms);
                    }
                }
                if let Some(w) = st.watch.as_mut().filter(|w| w.channel == name) {
                    w.event(args, now);
                }
                // Names a server makes up are counted up to a bound (listen waits for named ones).
                if st.counts.len() < MAX_EVENT_NAMES || st.counts.contains_key(&name) {
                    st.counts.entry(name).or_default().0 += 1;
                }
            }
            b'3' => {
                let args = match parsed.data {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                };
                if let Some(id) = parsed.id {
                    self.traffic.borrow_mut().count("socketio.acks_received", 1);
                    if let Some(slot) = st.acks.get_mut(&id) {
                        *slot = Some((now, args));
                    }
                }
            }
            b'4' => {
                let why = parsed
                    .data
                    .as_ref()
                    .and_then(|d| d.get("message").and_then(Value::as_str).map(String::from))
                    .unwrap_or_else(|| "refused".into());
                self.traffic.borrow_mut().count("socketio.connect_errors", 1);
                st.connected = Some(Err(why));
            }
            // Binary events and acknowledgements (their attachments follow as binary frames).
            _ => self.traffic.borrow_mut().protocol_errors += 1,
        }
    }

    fn gone(st: &State) -> Option<Failure> {
        st.closed.as_ref().map(|why| Failure::new("disconnect", why))
    }
}

impl link::Receiver for Shared {
    fn text(&self, text: &str, replies: &mut Vec<String>) {
        self.packet(text, replies);
    }

    fn ended(&self, why: String) {
        let mut st = self.state.borrow_mut();
        st.closed.get_or_insert(why);
        drop(st);
        self.notify.notify_waiters();
    }

    fn silence(&self) -> Option<Duration> {
        self.state.borrow().silence
    }
}

/// The upgrade's WebSocket until it takes over: its `3probe` (and, once upgraded, everything)
/// reaches the session; its end before that is not the session's.
struct Probe(Rc<Shared>);

impl link::Receiver for Probe {
    fn text(&self, text: &str, replies: &mut Vec<String>) {
        if self.0.state.borrow().upgraded || text == "3probe" {
            self.0.packet(text, replies);
        }
    }

    fn ended(&self, why: String) {
        if self.0.state.borrow().upgraded {
            link::Receiver::ended(&*self.0, why);
        }
    }

    fn silence(&self) -> Option<Duration> {
        self.0.state.borrow().silence
    }
}

/// A Socket.IO packet's parts: `<type>[<attachments>-][/<nsp>,][<id>][<json>]`.
pub struct Packet<'a> {
    pub kind: u8,
    /// Its namespace (`/` when it names none).
    pub nsp: &'a str,
    pub id: Option<u64>,
    pub data: Option<Value>,
}

pub fn parse_packet(p: &str) -> Option<Packet<'_>> {
    let kind = *p.as_bytes().first()?;
    if !(b'0'..=b'6').contains(&kind) {
        return None;
    }
    let mut rest = &p[1..];
    if matches!(kind, b'5' | b'6') {
        // Binary packets: their placeholders are not read (counted as protocol errors).
        return Some(Packet { kind, nsp: "/", id: None, data: None });
    }
    let mut nsp = "/";
    if rest.starts_with('/') {
        let end = rest.find(',').unwrap_or(rest.len());
        nsp = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let id = (digits > 0).then(|| rest[..digits].parse().ok()).flatten();
    rest = &rest[digits..];
    let data = if rest.is_empty() { None } else { Some(serde_json::from_str(rest).ok()?) };
    Some(Packet { kind, nsp, id, data })
}

/// The Socket.IO packet of an event (with an acknowledgement id when one is asked) on `nsp`, as
/// an Engine.IO message carries it (after its `4`).
pub fn event_packet(nsp: &str, id: Option<u64>, args: &[Value]) -> String {
    let mut p = String::from("2");
    if nsp != "/" {
        p.push_str(nsp);
        p.push(',');
    }
    if let Some(id) = id {
        p.push_str(&id.to_string());
    }
    p.push_str(&Value::Array(args.to_vec()).to_string());
    p
}

enum Out {
    Ws(Link),
    Polling { tx: outbox::Sender<Outgoing>, task: Option<tokio::task::JoinHandle<()>> },
}

/// One namespace's connection.
pub struct SioConn {
    shared: Rc<Shared>,
    out: Out,
    nsp: String,
    next_ack: Cell<u64>,
    /// The connection's handshake: the transport (upgraded, when it was), then the namespace's
    /// CONNECT answered.
    pub handshake: Duration,
}

impl Drop for SioConn {
    fn drop(&mut self) {
        if let Out::Polling { task: Some(t), .. } = &self.out {
            t.abort();
        }
    }
}

/// Where Engine.IO's requests go: `<path>/?EIO=4&transport=<t>` with the configured query.
fn request_path(cfg: &SocketIoConfig, transport: &str, sid: Option<&str>) -> String {
    let mut p = format!("{}/?EIO=4&transport={transport}", cfg.path.trim_end_matches('/'));
    if let Some(sid) = sid {
        p.push_str("&sid=");
        p.push_str(&url_encode(sid));
    }
    for (k, v) in &cfg.query {
        p.push('&');
        p.push_str(&url_encode(k));
        p.push('=');
        p.push_str(&url_encode(v));
    }
    p
}

fn url_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// Opens a connection to namespace `nsp` within `timeout`, by the configured transports.
pub async fn connect(
    ep: &Endpoint,
    cfg: &SocketIoConfig,
    nsp: &str,
    tls: Option<&Connector>,
    traffic: Rc<RefCell<Traffic>>,
    timeout: Duration,
) -> Result<SioConn, Failure> {
    let begin = Instant::now();
    // A server that echoes the auth payload, a query token or a header back does not get them
    // shown.
    if let Some(a) = &cfg.auth {
        crate::redact::sent_payload(a);
    }
    for (name, value) in cfg.headers.iter().chain(&cfg.query) {
        crate::redact::sent_header(name, value);
    }
    let shared = Rc::new(Shared {
        state: RefCell::new(State::default()),
        notify: Notify::new(),
        traffic: Rc::clone(&traffic),
        fanout_field: cfg.fanout_field.clone(),
        nsp: nsp.to_string(),
    });
    let opening = async {
        let out = match cfg.transports.first() {
            Some(SioTransport::Polling) => by_polling(ep, cfg, nsp, tls, &shared, timeout).await?,
            _ => {
                let path = request_path(cfg, "websocket", None);
                let how = Opening { path: &path, headers: &cfg.headers, protocol: None, compression: cfg.compression };
                let l = Link::open(ep, &how, tls, Rc::clone(&traffic), shared.clone() as Rc<dyn link::Receiver>)
                    .await
                    .map_err(connect_failure)?;
                wait(&shared, timeout, "Engine.IO open packet", |st| st.sid.is_some().then_some(())).await?;
                l.send(connect_packet(nsp, cfg.auth.as_ref()));
                connected(&shared, timeout).await?;
                Out::Ws(l)
            }
        };
        Ok::<_, Failure>(out)
    };
    let out = match tokio::time::timeout(timeout, opening).await {
        Ok(r) => r?,
        Err(_) => return Err(Failure::new("timeout", format!("no Socket.IO connection to {nsp} within {timeout:?}"))),
    };
    {
        let mut t = traffic.borrow_mut();
        t.count("socketio.connections", 1);
        let upgraded = matches!(out, Out::Ws(_)) && cfg.transports.first() == Some(&SioTransport::Polling);
        t.count(if matches!(out, Out::Ws(_)) { "socketio.on_websocket" } else { "socketio.on_polling" }, 1);
        if upgraded {
            t.count("socketio.upgrades", 1);
        }
    }
    Ok(SioConn { shared, out, nsp: nsp.to_string(), next_ack: Cell::new(0), handshake: begin.elapsed() })
}

/// A transport's failure while connecting is a connect error (a timeout stays one).
fn connect_failure(f: Failure) -> Failure {
    match f.class {
        "timeout" => f,
        _ => Failure { class: "connect", ..f },
    }
}

fn connect_packet(nsp: &str, auth: Option<&Value>) -> String {
    let mut p = String::from("40");
    if nsp != "/" {
        p.push_str(nsp);
        p.push(',');
    }
    if let Some(a) = auth {
        p.push_str(&a.to_string());
    }
    p
}

async fn wait<T>(
    shared: &Shared,
    timeout: Duration,
    what: &str,
    ready: impl FnMut(&mut State) -> Option<T>,
) -> Result<T, Failure> {
    link::wait_on(&shared.state, &shared.notify, timeout, what, Shared::gone, ready).await
}

/// Waits for the namespace's CONNECT to be answered.
async fn connected(shared: &Shared, timeout: Duration) -> Result<(), Failure> {
    match wait(shared, timeout, "the namespace's CONNECT answer", |st| st.connected.clone()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(why)) => Err(Failure::new("connect", format!("the server refused the connection: {why}"))),
        Err(f) => Err(connect_failure(f)),
    }
}

/// The handshake over HTTP long-polling, the namespace's CONNECT, then the upgrade to a WebSocket
/// when both sides offer it (as socket.io-client does).
async fn by_polling(
    ep: &Endpoint,
    cfg: &SocketIoConfig,
    nsp: &str,
    tls: Option<&Connector>,
    shared: &Rc<Shared>,
    timeout: Duration,
) -> Result<Out, Failure> {
    // The connect's whole budget counts from here (the handshake's requests take from it too).
    let end = Instant::now() + timeout;
    let traffic = &shared.traffic;
    let body = exchange(ep, tls, "GET", &request_path(cfg, "polling", None), &cfg.headers, b"", traffic)
        .await
        .map_err(connect_failure)?;
    apply_payload(shared, &body, &mut Vec::new());
    let Some(sid) = shared.state.borrow().sid.clone() else {
        return Err(Failure::new("connect", "the server's first poll held no Engine.IO open packet"));
    };
    let polled = request_path(cfg, "polling", Some(&sid));
    post(ep, tls, &polled, &cfg.headers, &[connect_packet(nsp, cfg.auth.as_ref())], traffic)
        .await
        .map_err(connect_failure)?;
    // Polls until the namespace answers (pings that come meanwhile answered).
    while shared.state.borrow().connected.is_none() && Instant::now() < end {
        let body = exchange(ep, tls, "GET", &polled, &cfg.headers, b"", traffic).await.map_err(connect_failure)?;
        let mut replies = Vec::new();
        apply_payload(shared, &body, &mut replies);
        if !replies.is_empty() {
            post(ep, tls, &polled, &cfg.headers, &replies, traffic).await.map_err(connect_failure)?;
        }
        if let Some(f) = Shared::gone(&shared.state.borrow()) {
            return Err(connect_failure(f));
        }
    }
    connected(shared, Duration::ZERO).await?;
    let upgrade = cfg.transports.contains(&SioTransport::WebSocket)
        && shared.state.borrow().upgrades.iter().any(|u| u == "websocket");
    if upgrade {
        // A WebSocket that cannot be opened or probed leaves the session on polling, as
        // socket.io-client leaves it.
        let path = request_path(cfg, "websocket", Some(&sid));
        let how = Opening { path: &path, headers: &cfg.headers, protocol: None, compression: cfg.compression };
        // The opening and the probe take at most half of what the connect has left (10 s at
        // most), so a server that never answers them leaves the session time to go on polling.
        let probe = Duration::from_secs(10).min(end.saturating_duration_since(Instant::now()) / 2);
        let probe_end = Instant::now() + probe;
        let opened = Link::open(ep, &how, tls, Rc::clone(traffic), Rc::new(Probe(Rc::clone(shared))));
        if let Ok(Ok(l)) = tokio::time::timeout(probe, opened).await {
            l.send("2probe".into());
            let left = probe_end.saturating_duration_since(Instant::now());
            if wait(shared, left, "the upgrade's 3probe", |st| st.probed.then_some(())).await.is_ok() {
                shared.state.borrow_mut().upgraded = true;
                l.send("5".into());
                return Ok(Out::Ws(l));
            }
            drop(l);
        }
        traffic.borrow_mut().count("socketio.failed_upgrades", 1);
    }
    let (tx, rx) = outbox::channel();
    let task =
        tokio::task::spawn_local(polling(ep.clone(), tls.cloned(), polled, cfg.headers.clone(), Rc::clone(shared), rx));
    Ok(Out::Polling { tx, task: Some(task) })
}

/// Applies a polling payload's packets.
fn apply_payload(shared: &Shared, body: &[u8], replies: &mut Vec<String>) {
    let text = String::from_utf8_lossy(body);
    for p in text.split(SEPARATOR).filter(|p| !p.is_empty()) {
        shared.traffic.borrow_mut().messages_in += 1;
        shared.packet(p, replies);
    }
}

/// What a server's bytes do to a connection on `nsp` waiting for acknowledgement 0 and for events
/// `channel` that answer `want`, without I/O (crates/fuzz drives it): `polled` as polling answers,
/// then `texts` as WebSocket messages. Its counts, its replies, the watch's answer, the ack's data.
pub fn feed(nsp: &str, (channel, want): (&str, Want), polled: &[&[u8]], texts: &[&str]) -> Fed {
    let shared = Shared {
        state: Default::default(),
        notify: Notify::new(),
        traffic: Rc::default(),
        fanout_field: Some("sentAt".into()),
        nsp: nsp.into(),
    };
    shared.state.borrow_mut().acks.insert(0, None);
    shared.state.borrow_mut().watch = Some(Watch::new(channel.into(), want));
    let mut replies = Vec::new();
    polled.iter().for_each(|body| apply_payload(&shared, body, &mut replies));
    texts.iter().for_each(|text| shared.packet(text, &mut replies));
    let mut st = shared.state.into_inner();
    let answer = st.watch.filter(|w| w.answered.is_some()).map(|w| w.kept);
    (shared.traffic.take(), replies, answer, st.acks.remove(&0).flatten().map(|(_, args)| args))
}
/// What [`feed`] gives: counts, replies, the watch's answer, the acknowledgement's arguments.
pub type Fed = (Traffic, Vec<String>, Option<Vec<Value>>, Option<Vec<Value>>);

/// Sends packets in one POST; they count as sent once the server said `ok`.
async fn post(
    ep: &Endpoint,
    tls: Option<&Connector>,
    path: &str,
    headers: &[(String, String)],
    packets: &[String],
    traffic: &RefCell<Traffic>,
) -> Result<(), Failure> {
    let body = packets.join(&SEPARATOR.to_string());
    match tokio::time::timeout(POST_TIMEOUT, exchange(ep, tls, "POST", path, headers, body.as_bytes(), traffic)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(Failure::new(
                "disconnect",
                format!("transport error: a POST unanswered within {POST_TIMEOUT:?}"),
            ))
        }
    };
    traffic.borrow_mut().messages_out += packets.len() as u64;
    Ok(())
}

/// The polling transport's task: a GET always pending (never dropped while the server may answer
/// it: a poll cut short closes the session), POSTs for what the user sends.
async fn polling(
    ep: Endpoint,
    tls: Option<Connector>,
    path: String,
    headers: Vec<(String, String)>,
    shared: Rc<Shared>,
    mut rx: outbox::Receiver<Outgoing>,
) {
    let poll = |ep: Endpoint,
                tls: Option<Connector>,
                path: String,
                headers: Vec<(String, String)>,
                shared: Rc<Shared>| async move {
        let silence = shared.state.borrow().silence.unwrap_or(Duration::from_secs(45));
        match tokio::time::timeout(silence, exchange(&ep, tls.as_ref(), "GET", &path, &headers, b"", &shared.traffic))
            .await
        {
            Ok(r) => r,
            Err(_) => Err(Failure::new("disconnect", format!("ping timeout: no poll answered within {silence:?}"))),
        }
    };
    let mut pending = Box::pin(poll(ep.clone(), tls.clone(), path.clone(), headers.clone(), Rc::clone(&shared)));
    let mut ours = false;
    let why = loop {
        tokio::select! {
            got = &mut pending => match got {
                Ok(body) => {
                    let mut replies = Vec::new();
                    apply_payload(&shared, &body, &mut replies);
                    if !replies.is_empty() {
                        if let Err(f) = post(&ep, tls.as_ref(), &path, &headers, &replies, &shared.traffic).await {
                            break format!("transport error: {}", f.detail);
                        }
                    }
                    if let Some(why) = shared.state.borrow().closed.clone() {
                        break why;
                    }
                    pending = Box::pin(poll(ep.clone(), tls.clone(), path.clone(), headers.clone(), Rc::clone(&shared)));
                }
                Err(f) => break f.detail,
            },
            out = rx.recv() => match out {
                Some(Outgoing::Ddp(p)) => {
                    let mut packets = vec![p];
                    let mut closing = false;
                    while let Some(more) = rx.try_recv() {
                        match more {
                            Outgoing::Ddp(p) => packets.push(p),
                            Outgoing::Close => closing = true,
                        }
                    }
                    if closing {
                        packets.push("1".into());
                    }
                    if let Err(f) = post(&ep, tls.as_ref(), &path, &headers, &packets, &shared.traffic).await {
                        break format!("transport error: {}", f.detail);
                    }
                    if closing {
                        ours = true;
                        break "closed by the client".into();
                    }
                }
                Some(Outgoing::Close) | None => {
                    let _ = post(&ep, tls.as_ref(), &path, &headers, &["1".to_string()], &shared.traffic).await;
                    ours = true;
                    break "closed by the client".into();
                }
            },
        }
    };
    // The poll still pending when the user closed: the server answers it with what it had sent
    // before it saw the close, which counts as received (a server's last burst is not lost).
    if ours {
        if let Ok(Ok(body)) = tokio::time::timeout(wire::CLOSING_HANDSHAKE, &mut pending).await {
            apply_payload(&shared, &body, &mut Vec::new());
        }
    }
    link::Receiver::ended(&*shared, why);
}

/// One HTTP/1.1 exchange on a connection of its own: the answer's body, when its status is 200.
async fn exchange(
    ep: &Endpoint,
    tls: Option<&Connector>,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    traffic: &RefCell<Traffic>,
) -> Result<Vec<u8>, Failure> {
    // What errors name: the path without its query (where a token may be).
    let shown = path.split('?').next().unwrap_or_default();
    let mut s = wire::open(ep, tls).await.map_err(Failure::from_wire)?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\nConnection: close\r\nUser-Agent: bolide/{}\r\n",
        wire::host_header(ep),
        env!("CARGO_PKG_VERSION")
    );
    if method == "POST" {
        req.push_str(&format!("Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut out = req.into_bytes();
    out.extend_from_slice(body);
    s.write_all(&out).await.map_err(|e| Failure::new("closed", format!("{method} {shown}: {e}")))?;
    traffic.borrow_mut().bytes_out += out.len() as u64;
    let (head, mut rest) = wire::read_head(&mut s).await.map_err(Failure::from_wire)?;
    let status = head.lines().next().unwrap_or_default().to_string();
    let length = wire::header(&head, "content-length").and_then(|v| v.trim().parse::<usize>().ok());
    let chunked = wire::header(&head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let mut total = head.len() + rest.len();
    loop {
        if length.is_some_and(|n| rest.len() >= n) || rest.len() > MAX_BODY {
            break;
        }
        let n = s
            .read_buf(&mut rest)
            .await
            .map_err(|e| Failure::new("disconnect", format!("transport error: {method}: {e}")))?;
        if n == 0 {
            break;
        }
        total += n;
    }
    traffic.borrow_mut().bytes_in += total as u64;
    if !(status.starts_with("HTTP/1.1 200") || status.starts_with("HTTP/1.0 200")) {
        let said = String::from_utf8_lossy(&rest[..rest.len().min(200)]).into_owned();
        return Err(Failure::new("connect", format!("{method} {shown} answered {status}: {said}")));
    }
    if chunked {
        let mut body = Vec::new();
        crate::realtime::ddp::xhr::dechunk(&mut rest, &mut body).map_err(Failure::from_wire)?;
        return Ok(body);
    }
    if let Some(n) = length {
        rest.truncate(n);
    }
    Ok(rest)
}

impl SioConn {
    fn send(&self, packet: String) -> Result<(), Failure> {
        if let Some(f) = Shared::gone(&self.shared.state.borrow()) {
            return Err(f);
        }
        let sent = match &self.out {
            Out::Ws(l) => l.send(format!("4{packet}")),
            Out::Polling { tx, .. } => tx.send(Outgoing::Ddp(format!("4{packet}"))).is_ok(),
        };
        match sent {
            true => Ok(()),
            false => Err(Failure::new("disconnect", "transport close: the connection's task ended")),
        }
    }

    /// Sends an event packet, counted as an emit.
    fn send_event(&self, id: Option<u64>, args: &[Value]) -> Result<(), Failure> {
        self.send(event_packet(&self.nsp, id, args))?;
        self.shared.traffic.borrow_mut().count("socketio.emits", 1);
        Ok(())
    }

    /// Emits an event (its name first in `args`); when it was sent.
    pub fn emit(&self, args: &[Value]) -> Result<Instant, Failure> {
        let sent = Instant::now();
        self.send_event(None, args)?;
        Ok(sent)
    }

    /// Emits an event asking for an acknowledgement, and waits for it: when it was sent, when the
    /// acknowledgement came and its arguments.
    pub async fn emit_with_ack(
        &self,
        args: &[Value],
        timeout: Duration,
    ) -> Result<(Instant, Instant, Vec<Value>), Failure> {
        let id = self.next_ack.get();
        self.next_ack.set(id + 1);
        self.shared.state.borrow_mut().acks.insert(id, None);
        let sent = Instant::now();
        let got = match self.send_event(Some(id), args) {
            Ok(()) => {
                wait(&self.shared, timeout, "the acknowledgement", |st| match st.acks.get(&id) {
                    Some(Some(_)) => st.acks.remove(&id).flatten(),
                    _ => None,
                })
                .await
            }
            Err(f) => Err(f),
        };
        self.shared.state.borrow_mut().acks.remove(&id);
        let (at, got) = got?;
        Ok((sent, at, got))
    }

    /// Emits an event and waits until the events named `channel` that came since answer it
    /// (`want`, judged as each comes): when it was sent, when the answer came, its arguments. At
    /// the timeout: "response timeout" when none came, else the last that did not do.
    pub async fn emit_for_response(
        &self,
        args: &[Value],
        channel: &str,
        want: Want,
        timeout: Duration,
    ) -> Result<(Instant, Instant, Vec<Value>), Failure> {
        self.shared.state.borrow_mut().watch = Some(Watch::new(channel.to_string(), want));
        let sent = Instant::now();
        let waited = match self.send_event(None, args) {
            Ok(()) => wait(&self.shared, timeout, "the response", |st| st.watch.as_ref()?.answered).await,
            Err(f) => Err(f),
        };
        let watch = self.shared.state.borrow_mut().watch.take();
        match (waited, watch) {
            (Ok(at), Some(w)) => Ok((sent, at, w.kept)),
            (Ok(at), None) => Ok((sent, at, Vec::new())),
            (Err(f), Some(w)) if f.class == "timeout" && w.events > 0 => {
                let got = crate::redact::brief(&Value::Array(w.last_args));
                let times = match w.events {
                    1 => "once".to_string(),
                    n => format!("{} times", crate::report::term::count(n)),
                };
                Err(Failure::new("response", format!("data is not valid: {channel} came {times}, the last with {got}")))
            }
            (Err(f), _) if f.class == "timeout" => {
                Err(Failure::new("timeout", format!("response timeout: no {channel} event within {timeout:?}")))
            }
            (Err(f), _) => Err(f),
        }
    }

    /// Waits until `count` events named `channel` not taken by an earlier `listen` came, and takes
    /// them.
    pub async fn take_events(&self, channel: &str, count: u64, timeout: Duration) -> Result<Instant, Failure> {
        let what = format!("{count} {channel} events");
        wait(&self.shared, timeout, &what, |st| {
            let c = st.counts.get_mut(channel)?;
            (c.0 - c.1 >= count).then(|| {
                c.1 += count;
                Instant::now()
            })
        })
        .await
    }

    pub fn shared(&self) -> &Rc<Shared> {
        &self.shared
    }

    /// Disconnects the namespace (`41`) and closes the connection, as a page's `socket.close()`.
    pub fn close(mut self) -> Option<tokio::task::JoinHandle<()>> {
        let _ = self.send(if self.nsp == "/" { "1".into() } else { format!("1{},", self.nsp) });
        match std::mem::replace(&mut self.out, Out::Polling { tx: outbox::channel().0, task: None }) {
            Out::Ws(l) => l.close(),
            Out::Polling { tx, task } => {
                let _ = tx.send(Outgoing::Close);
                task
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_read_as_socket_io_writes_them() {
        let p = parse_packet(r#"2["chat",{"a":1}]"#).unwrap();
        assert_eq!((p.kind, p.id), (b'2', None));
        assert_eq!(p.data.unwrap(), serde_json::json!(["chat", {"a": 1}]));
        let p = parse_packet(r#"3/admin,17["ok"]"#).unwrap();
        assert_eq!((p.kind, p.id), (b'3', Some(17)));
        assert_eq!(p.data.unwrap(), serde_json::json!(["ok"]));
        let p = parse_packet(r#"0/admin,{"sid":"x"}"#).unwrap();
        assert_eq!(p.kind, b'0');
        assert!(parse_packet("9").is_none());
        assert!(parse_packet("2[broken").is_none());
        assert_eq!(event_packet("/", Some(3), &[serde_json::json!("echo"), serde_json::json!(1)]), r#"23["echo",1]"#);
        assert_eq!(event_packet("/admin", None, &[serde_json::json!("e")]), r#"2/admin,["e"]"#);
        assert_eq!(connect_packet("/admin", Some(&serde_json::json!({"token": "t"}))), r#"40/admin,{"token":"t"}"#);
    }

    #[test]
    fn events_count_acks_and_watches() {
        let shared = Shared {
            state: RefCell::new(State::default()),
            notify: Notify::new(),
            traffic: Rc::new(RefCell::new(Traffic::default())),
            fanout_field: Some("sentAt".into()),
            nsp: "/".into(),
        };
        let mut replies = Vec::new();
        shared.packet(r#"0{"sid":"s1","upgrades":["websocket"],"pingInterval":300,"pingTimeout":200}"#, &mut replies);
        shared.packet("2", &mut replies);
        assert_eq!(replies, vec!["3".to_string()]);
        shared.state.borrow_mut().watch = Some(Watch::new("r".into(), Want::Any));
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() - 5;
        shared.packet(&format!(r#"42["r",{{"sentAt":{stamp}}}]"#), &mut replies);
        shared.packet(r#"42["other",1]"#, &mut replies);
        shared.packet(r#"42/chat,["r",1]"#, &mut replies);
        // An acknowledgement is kept only while someone waits for it.
        shared.state.borrow_mut().acks.insert(1, None);
        shared.packet(r#"431["done"]"#, &mut replies);
        shared.packet(r#"439["nobody asked"]"#, &mut replies);
        shared.packet(r#"41"#, &mut replies);
        let st = shared.state.borrow();
        assert_eq!(st.silence, Some(Duration::from_millis(500)));
        assert_eq!(st.counts["r"], (1, 0));
        assert_eq!(st.counts["other"], (1, 0));
        assert_eq!(st.watch.as_ref().unwrap().events, 1);
        assert_eq!(st.acks[&1].as_ref().unwrap().1, vec![serde_json::json!("done")]);
        assert!(!st.acks.contains_key(&9));
        assert_eq!(st.closed.as_deref(), Some("io server disconnect"));
        assert_eq!(shared.traffic.borrow().fanout_us.len(), 1);
        assert_eq!(shared.traffic.borrow().events["socketio.foreign_namespace_packets"], 1);
    }

    /// A watch judges each event as it comes and keeps one event's arguments at most beyond the
    /// answer: 10,000 events that do not answer leave it as small as one.
    #[test]
    fn a_watch_keeps_what_its_judge_needs() {
        use serde_json::json;
        let now = Instant::now();
        let big = json!("x".repeat(1000));
        let mut w = Watch::new("r".into(), Want::new(Some(json!({"ok": true}))));
        for _ in 0..10_000 {
            w.event(vec![big.clone()], now);
        }
        assert_eq!((w.events, w.kept.len(), w.last_args.len(), w.answered), (10_000, 0, 1, None));
        w.event(vec![json!(1), json!({"ok": true})], now);
        assert_eq!((w.answered, w.kept.len()), (Some(now), 2));
        w.event(vec![big.clone()], now);
        assert_eq!((w.events, w.kept.len()), (10_002, 2), "the answer stays the first");

        // A list: the events' arguments one after another, spoiled for good by one that differs.
        let mut w = Watch::new("r".into(), Want::new(Some(json!([1, 2, 3]))));
        w.event(vec![json!(1)], now);
        w.event(vec![json!(2), json!(3)], now);
        assert_eq!((w.answered, w.kept), (Some(now), vec![json!(1), json!(2), json!(3)]));
        let mut w = Watch::new("r".into(), Want::new(Some(json!([1, 2]))));
        w.event(vec![json!(1), json!(9)], now);
        w.event(vec![json!(1), json!(2)], now);
        assert_eq!((w.answered, w.kept.len(), w.spoiled), (None, 0, true));

        // Text: part of the last argument; nothing: the first event.
        let mut w = Watch::new("r".into(), Want::new(Some(json!("ell"))));
        w.event(vec![json!("nope")], now);
        w.event(vec![json!(1), json!("hello")], now);
        assert_eq!(w.kept, vec![json!(1), json!("hello")]);
        let mut w = Watch::new("r".into(), Want::Any);
        w.event(vec![], now);
        assert_eq!(w.answered, Some(now));
        assert!(Want::Any.answers(&[]) && !Want::new(Some(json!(1))).answers(&[]));
    }
}

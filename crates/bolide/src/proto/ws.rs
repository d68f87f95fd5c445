//! The WebSocket under every realtime protocol: where the server is (`Endpoint`), how it is
//! reached (`Transport`: a raw WebSocket, or SockJS's), the upgrade with permessage-deflate offered
//! as browsers offer it, frames read and written (`Framer`: WebSocket frames, SockJS's framing
//! inside them), the closing handshake, the settings every connection of a run shares
//! (`ClientConfig`) and the counters every protocol reports into (`Traffic`). DDP's client
//! (`realtime::ddp::wire`) and the link the other protocols ride (`link.rs`) both stand on it.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use ddp::message::DdpError;
use ddp::ws::{self, Deflate, Incoming, Opcode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{self, tls::Connector, Stream};
use super::read::read_appending;

/// How DDP reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `ws(s)://host/websocket`, one DDP message per frame.
    WebSocket,
    /// SockJS's websocket transport, as a browser does by default.
    SockJs,
    /// SockJS's xhr-polling fallback (`proto::xhr`): a POST per frame received.
    XhrPolling,
    /// SockJS's xhr-streaming fallback (`proto::xhr`): frames streamed in long POST answers.
    XhrStreaming,
}

impl Transport {
    pub const ALL: [Transport; 4] =
        [Transport::WebSocket, Transport::SockJs, Transport::XhrPolling, Transport::XhrStreaming];

    /// The transport of a name as [`Transport::name`] writes it.
    pub fn named(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }

    /// As flags, scenario files and documents write it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::SockJs => "sockjs",
            Transport::XhrPolling => "xhr-polling",
            Transport::XhrStreaming => "xhr-streaming",
        }
    }
}

/// The switch every user connection of a run listens to: when it is thrown, each connection
/// closes with the given probability (its socket shut, no closing handshake), as a network
/// that drops them would.
#[derive(Debug, Default)]
pub struct Drops {
    /// How many times it was thrown (a connection acts once per throw).
    round: AtomicU64,
    /// The share of the latest throw, in millionths.
    share_ppm: AtomicU32,
    pub notify: tokio::sync::Notify,
}

impl Drops {
    pub fn throw(&self, share: f64) {
        self.share_ppm.store((share * 1e6).round() as u32, Ordering::SeqCst);
        self.round.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// The latest throw's round.
    pub fn round(&self) -> u64 {
        self.round.load(Ordering::SeqCst)
    }

    /// Whether a connection that last saw round `seen` is dropped now (its own draw); updates
    /// `seen`.
    pub fn hits(&self, seen: &mut u64) -> bool {
        let now = self.round();
        if now == *seen {
            return false;
        }
        *seen = now;
        let share = f64::from(self.share_ppm.load(Ordering::SeqCst)) / 1e6;
        rand::random::<f64>() < share
    }
}

/// Settings shared by every connection of a run.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub transport: Transport,
    pub compression: bool,
    /// Keep a local copy of published documents (needed by `waitFor`).
    pub cache: bool,
    /// A date field set by the server on insert; each `added` carrying it gives a fan-out latency.
    pub fanout_field: Option<String>,
    /// Ping after this much silence (a browser: 17.5 s); drop the connection if nothing arrives
    /// within the timeout after it (15 s).
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    /// Largest message accepted from the server.
    pub max_message_bytes: usize,
    /// `--fault drop`: the switch that drops a share of the connections.
    pub drops: Option<std::sync::Arc<Drops>>,
    /// The previous session's id, sent in `connect` (Meteor's client resuming after a reconnect).
    pub resume: Option<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            transport: Transport::WebSocket,
            compression: true,
            cache: true,
            fanout_field: Some("createdAt".into()),
            heartbeat_interval: Duration::from_millis(17_500),
            heartbeat_timeout: Duration::from_secs(15),
            max_message_bytes: 64 << 20,
            drops: None,
            resume: None,
        }
    }
}

/// Where the server is: host name (for Host and SNI), addresses, TLS, path prefix.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub addrs: Vec<SocketAddr>,
    pub tls: bool,
    /// Path prefix of the app (ROOT_URL's path), without a trailing slash.
    pub prefix: String,
}

/// How a DDP operation failed; the classes the recorder counts.
#[derive(Debug, Clone, PartialEq)]
pub enum DdpFailure {
    /// TCP, TLS, WebSocket handshake or SockJS info failed.
    Connect(String),
    /// The connection closed (or was dropped as dead) while something was awaited.
    Closed(String),
    /// No answer within the step's timeout.
    Timeout(String),
    /// A method answered with an error.
    DdpError(Box<DdpError>),
    /// A subscription answered `nosub` with an error.
    Nosub(Box<DdpError>),
    /// The server broke the protocol (bad frame, bad JSON, `failed` with no version in common).
    Protocol(String),
}

impl DdpFailure {
    /// The class name used in result documents.
    pub fn class(&self) -> &'static str {
        match self {
            DdpFailure::Connect(_) => "connect",
            DdpFailure::Closed(_) => "closed",
            DdpFailure::Timeout(_) => "timeout",
            DdpFailure::DdpError(_) => "ddp_error",
            DdpFailure::Nosub(_) => "nosub",
            DdpFailure::Protocol(_) => "protocol",
        }
    }

    /// What failed, for people: a server's words in it (an error's reason, a close reason, a
    /// status line) made printable.
    pub fn detail(&self) -> String {
        let text = match self {
            DdpFailure::Connect(s) | DdpFailure::Closed(s) | DdpFailure::Timeout(s) | DdpFailure::Protocol(s) => {
                s.clone()
            }
            DdpFailure::DdpError(e) | DdpFailure::Nosub(e) => {
                format!("error {} {}", e.code(), e.reason.as_deref().unwrap_or_default())
            }
        };
        crate::redact::printable(&text).into_owned()
    }
}

/// Traffic counters and fan-out samples a connection reports (one per worker, shared by its
/// connections; single-threaded, so no atomics).
#[derive(Debug)]
pub struct Traffic {
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub pings_answered: u64,
    /// Heartbeat pings bolide sent after silence (also counted in `messages_out`).
    pub pings_sent: u64,
    /// Server timestamp field to receipt, microseconds.
    pub fanout_us: hdrhistogram::Histogram<u64>,
    /// The same for the current second (made at its first sample, emptied at every tick).
    pub fanout_second_us: Option<hdrhistogram::Histogram<u64>>,
    /// Top-level `error` messages and unparsable messages from the server.
    pub protocol_errors: u64,
    /// A protocol's own counts (`socketio.emits`, `graphql.next`, ...), named as the document
    /// shows them.
    pub events: std::collections::BTreeMap<&'static str, u64>,
    /// A protocol's own latencies (`llm.ttft`, `sse.first_event`), microseconds, named as the
    /// document and thresholds show them: the run's histograms.
    pub measures: std::collections::BTreeMap<&'static str, hdrhistogram::Histogram<u64>>,
    /// The same for the current second (emptied at every tick).
    pub measures_second: std::collections::BTreeMap<&'static str, hdrhistogram::Histogram<u64>>,
    /// What the protocols declared of their figures ([`Traffic::declare`]), for the readers of
    /// the document.
    pub declared: Declared,
}

/// What a protocol declares of its own figures, so that the readers of a document (compare, the
/// gate, charts, a ladder's table) treat them right without knowing the protocol.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// Counts ([`Traffic::events`]' names) that are a throughput: compared per second of the run,
    /// higher is better; in the order declared.
    pub throughputs: Vec<&'static str>,
    /// A latency ([`Traffic::measures`]' name) whose p50's inverse is what one user receives a
    /// second, with that figure's name in a ladder's table.
    pub per_user: std::collections::BTreeMap<&'static str, &'static str>,
}

impl Declared {
    /// Adds another's declarations.
    pub fn merge(&mut self, o: &Declared) {
        self.add(&o.throughputs, o.per_user.iter().map(|(k, v)| (*k, *v)));
    }

    fn add(&mut self, throughputs: &[&'static str], per_user: impl IntoIterator<Item = (&'static str, &'static str)>) {
        for t in throughputs {
            if !self.throughputs.contains(t) {
                self.throughputs.push(t);
            }
        }
        self.per_user.extend(per_user);
    }
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            messages_in: 0,
            messages_out: 0,
            bytes_in: 0,
            bytes_out: 0,
            pings_answered: 0,
            pings_sent: 0,
            fanout_us: crate::stats::hist::latency_us(),
            fanout_second_us: None,
            protocol_errors: 0,
            events: Default::default(),
            measures: Default::default(),
            measures_second: Default::default(),
            declared: Declared::default(),
        }
    }
}

impl Traffic {
    /// A fan-out latency, in the run's histogram and the current second's.
    pub fn fanout(&mut self, lag_us: u64) {
        crate::stats::hist::record(&mut self.fanout_us, lag_us);
        crate::stats::hist::record(self.fanout_second_us.get_or_insert_with(crate::stats::hist::latency_us), lag_us);
    }

    /// Counts one of a protocol's own events.
    pub fn count(&mut self, event: &'static str, n: u64) {
        *self.events.entry(event).or_default() += n;
    }

    /// One of a protocol's own latencies, in the run's histogram of that name and the second's.
    pub fn measure(&mut self, name: &'static str, us: u64) {
        use crate::stats::hist;
        hist::record(self.measures.entry(name).or_insert_with(hist::latency_us), us);
        hist::record(self.measures_second.entry(name).or_insert_with(hist::latency_us), us);
    }

    /// A protocol's declaration of its figures: `throughputs` among its counts, `per_user` among
    /// its latencies (each with its inverse's name). Cheap to repeat.
    pub fn declare(&mut self, throughputs: &[&'static str], per_user: &[(&'static str, &'static str)]) {
        if throughputs.iter().all(|t| self.declared.throughputs.contains(t))
            && per_user.iter().all(|(m, _)| self.declared.per_user.contains_key(m))
        {
            return;
        }
        self.declared.add(throughputs, per_user.iter().copied());
    }

    /// Adds another worker's counts and samples.
    pub fn merge(&mut self, o: &Traffic) {
        self.declared.merge(&o.declared);
        self.messages_in += o.messages_in;
        self.messages_out += o.messages_out;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.pings_answered += o.pings_answered;
        self.pings_sent += o.pings_sent;
        self.protocol_errors += o.protocol_errors;
        for (k, n) in &o.events {
            *self.events.entry(k).or_default() += n;
        }
        self.fanout_us.add(&o.fanout_us).expect("fan-out histograms share one shape");
        for (k, h) in &o.measures {
            let mine = self.measures.entry(k).or_insert_with(crate::stats::hist::latency_us);
            mine.add(h).expect("measure histograms share one shape");
        }
    }
}

thread_local! {
    /// Compressor for what we send (we never keep context) and decompressor for peers that do not
    /// keep theirs: one per thread for every connection.
    static DEFLATE: RefCell<Deflate> = RefCell::new(Deflate::new(1, 15).writing_literals());
    /// Compressors for servers that allow less than a 15-bit window (9 to 14 bits).
    static SMALL_WINDOWS: RefCell<[Option<Deflate>; 6]> = const { RefCell::new([None, None, None, None, None, None]) };
}

pub(crate) fn random_lower(n: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz012345";
    let mut rng = rand::rng();
    (0..n).map(|_| CHARS[rng.random_range(0..CHARS.len())] as char).collect()
}

/// Reads an HTTP response head (bounded); returns it and the bytes after it.
pub(crate) async fn read_head(stream: &mut Stream) -> Result<(String, Vec<u8>), DdpFailure> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        if let Some(at) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at + 4]).into_owned();
            return Ok((head, buf[at + 4..].to_vec()));
        }
        if buf.len() > 64 * 1024 {
            return Err(DdpFailure::Connect("response head over 64 KiB".into()));
        }
        // A handshake's answer is a few hundred bytes: the first read fits in 1 KB (thousands of
        // users in their handshakes at once each hold this buffer).
        if buf.capacity() - buf.len() < 256 {
            buf.reserve(4096);
        }
        let n =
            stream.read_buf(&mut buf).await.map_err(|e| DdpFailure::Connect(format!("reading the handshake: {e}")))?;
        if n == 0 {
            return Err(DdpFailure::Connect("connection closed during the handshake".into()));
        }
    }
}

pub(crate) fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

pub(crate) async fn open(ep: &Endpoint, tls: Option<&Connector>) -> Result<Stream, DdpFailure> {
    http::open_stream(&ep.host, &ep.addrs, ep.tls, tls).await.map_err(|f| DdpFailure::Connect(f.detail))
}

pub(crate) fn host_header(ep: &Endpoint) -> String {
    let default = if ep.tls { 443 } else { 80 };
    let host = if ep.host.contains(':') { format!("[{}]", ep.host) } else { ep.host.clone() };
    if ep.port == default {
        host
    } else {
        format!("{host}:{}", ep.port)
    }
}

/// `GET <prefix>/sockjs/info`, as sockjs-client does before choosing a transport; `websocket`:
/// the transport needs the server's websockets.
pub(crate) async fn sockjs_info(ep: &Endpoint, tls: Option<&Connector>, websocket: bool) -> Result<(), DdpFailure> {
    let mut s = open(ep, tls).await?;
    let req = format!(
        "GET {}/sockjs/info HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        ep.prefix,
        host_header(ep)
    );
    s.write_all(req.as_bytes()).await.map_err(|e| DdpFailure::Connect(format!("sockjs info: {e}")))?;
    let (head, mut body) = read_head(&mut s).await?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(DdpFailure::Connect(format!("sockjs info answered {}", head.lines().next().unwrap_or_default())));
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), s.take(64 * 1024).read_to_end(&mut body)).await;
    if websocket && String::from_utf8_lossy(&body).contains("\"websocket\":false") {
        return Err(DdpFailure::Connect("the server's SockJS has websockets disabled".into()));
    }
    Ok(())
}

/// A socket with the WebSocket handshake done.
pub(crate) struct Socket {
    pub(crate) stream: Stream,
    pub(crate) leftover: Vec<u8>,
    pub(crate) deflate: Option<ws::DeflateParams>,
}

pub(crate) async fn websocket(
    ep: &Endpoint,
    cfg: &ClientConfig,
    tls: Option<&Connector>,
) -> Result<Socket, DdpFailure> {
    let path = match cfg.transport {
        Transport::WebSocket => format!("{}/websocket", ep.prefix),
        Transport::XhrPolling | Transport::XhrStreaming => {
            return Err(DdpFailure::Connect("SockJS's HTTP transports open no WebSocket".into()))
        }
        Transport::SockJs => {
            sockjs_info(ep, tls, true).await?;
            let server: u16 = rand::random::<u16>() % 1000;
            format!("{}/sockjs/{server:03}/{}/websocket", ep.prefix, random_lower(8))
        }
    };
    upgrade(ep, &path, cfg.compression, tls).await
}

/// Opens a WebSocket on `path` (with its query), offering permessage-deflate if `compression`.
pub(crate) async fn upgrade(
    ep: &Endpoint,
    path: &str,
    compression: bool,
    tls: Option<&Connector>,
) -> Result<Socket, DdpFailure> {
    upgrade_with(ep, path, compression, &[], None, tls).await
}

/// [`upgrade`] with request headers of the caller's (an app's own, already checked for CR and LF)
/// and a subprotocol the server must choose (`Sec-WebSocket-Protocol`, graphql-ws's).
pub(crate) async fn upgrade_with(
    ep: &Endpoint,
    path: &str,
    compression: bool,
    headers: &[(String, String)],
    protocol: Option<&str>,
    tls: Option<&Connector>,
) -> Result<Socket, DdpFailure> {
    let mut stream = open(ep, tls).await?;
    let key = ws::client_key();
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: bolide/{}\r\n",
        host_header(ep),
        env!("CARGO_PKG_VERSION")
    );
    if compression {
        req.push_str(&format!("Sec-WebSocket-Extensions: {}\r\n", ws::CLIENT_OFFER));
    }
    if let Some(p) = protocol {
        req.push_str(&format!("Sec-WebSocket-Protocol: {p}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.map_err(|e| DdpFailure::Connect(format!("WebSocket request: {e}")))?;
    let (head, leftover) = read_head(&mut stream).await?;
    let status = head.lines().next().unwrap_or_default().to_string();
    if !status.starts_with("HTTP/1.1 101") {
        return Err(DdpFailure::Connect(format!("WebSocket upgrade refused: {status}")));
    }
    if header(&head, "sec-websocket-accept") != Some(ws::accept_key(&key).as_str()) {
        return Err(DdpFailure::Protocol("wrong Sec-WebSocket-Accept".into()));
    }
    if let Some(p) = protocol {
        let chosen = header(&head, "sec-websocket-protocol").unwrap_or_default();
        if !chosen.eq_ignore_ascii_case(p) {
            let chosen = crate::redact::printable(chosen);
            return Err(DdpFailure::Protocol(format!(
                "the server did not choose the subprotocol {p} (it said {chosen:?})"
            )));
        }
    }
    let deflate = ws::client_accept_deflate(header(&head, "sec-websocket-extensions")).map_err(DdpFailure::Protocol)?;
    Ok(Socket { stream, leftover, deflate })
}

/// Compresses one message with at most `window_bits` of window (what the server allowed), from
/// this thread's compressors (no context takeover: one per window size serves every connection).
pub(crate) fn compress(payload: &[u8], window_bits: u8, out: &mut Vec<u8>) {
    if window_bits >= 15 {
        return DEFLATE.with(|d| d.borrow_mut().compress(payload, true, out));
    }
    SMALL_WINDOWS.with(|all| {
        let mut all = all.borrow_mut();
        let slot = &mut all[usize::from(window_bits.saturating_sub(9)).min(5)];
        slot.get_or_insert_with(|| Deflate::new(1, window_bits).writing_literals()).compress(payload, true, out);
    });
}

/// Frames one DDP message for the wire; `deflate`: compressed, with this window.
pub(crate) fn frame(out: &mut Vec<u8>, text: &str, transport: Transport, deflate: Option<u8>) {
    let framed;
    let payload = match transport {
        Transport::WebSocket => text,
        Transport::SockJs | Transport::XhrPolling | Transport::XhrStreaming => {
            framed = ddp::sockjs::encode_client(text);
            framed.as_str()
        }
    };
    let mask = Some(rand::random());
    if let Some(window_bits) = deflate {
        let mut packed = Vec::with_capacity(payload.len() / 2 + 16);
        compress(payload.as_bytes(), window_bits, &mut packed);
        ws::encode_frame(out, Opcode::Text, true, &packed, mask);
    } else {
        ws::encode_frame(out, Opcode::Text, false, payload.as_bytes(), mask);
    }
}

/// Reads frames until DDP texts arrive; the handshake phase's reader (before the task exists).
pub(crate) struct Framer {
    reader: ws::Reader,
    pub(crate) buf: Vec<u8>,
    transport: Transport,
    own_inflater: Option<Box<Deflate>>,
    peer_resets: bool,
    max: usize,
    opened: bool,
    /// The close code to send the server before the socket closes: its own code echoed after it
    /// closed, or ours after it broke the protocol (RFC 6455 sections 5.5.1 and 7.4.1).
    pub(crate) close_reply: Option<u16>,
    /// Hand data messages over as they came (text or binary), for [`echo`] and `proto::link`;
    /// not DDP.
    pub(crate) raw: bool,
}

pub(crate) enum Frames {
    Ddp(Vec<String>),
    /// A whole data message in raw mode: whether it was binary, and its payload.
    Raw(bool, Vec<u8>),
    Ping(Vec<u8>),
    Close(String),
    Nothing,
}

impl Framer {
    pub(crate) fn new(socket_leftover: Vec<u8>, cfg: &ClientConfig, deflate: Option<ws::DeflateParams>) -> Framer {
        let peer_resets = deflate.is_some_and(|d| d.peer_no_context_takeover);
        Framer {
            reader: ws::Reader::new(false, cfg.max_message_bytes, deflate.is_some()),
            buf: socket_leftover,
            transport: cfg.transport,
            own_inflater: (deflate.is_some() && !peer_resets).then(|| Box::new(Deflate::new(1, 15))),
            peer_resets,
            max: cfg.max_message_bytes,
            opened: cfg.transport == Transport::WebSocket,
            close_reply: None,
            raw: false,
        }
    }

    /// Takes one frame from the buffer, if complete. `Ok(None)`: need more bytes.
    pub(crate) fn next(&mut self) -> Result<Option<Frames>, DdpFailure> {
        let next = self.reader.next(&mut self.buf).map_err(|e| {
            self.close_reply = Some(e.close_code);
            DdpFailure::Protocol(e.to_string())
        });
        let Some((used, msg)) = next? else {
            return Ok(None);
        };
        self.buf.drain(..used);
        let Some(msg) = msg else { return Ok(Some(Frames::Nothing)) };
        let payload = match msg {
            Incoming::Ping(p) => return Ok(Some(Frames::Ping(p))),
            Incoming::Pong(_) => return Ok(Some(Frames::Nothing)),
            Incoming::Close { code, reason } => {
                self.close_reply = Some(code.unwrap_or(1000));
                return Ok(Some(Frames::Close(format!(
                    "server closed the WebSocket ({} {reason})",
                    code.unwrap_or(1005)
                ))));
            }
            Incoming::Data { opcode, compressed, payload } => (opcode == Opcode::Binary, compressed, payload),
        };
        let (binary, compressed, payload) = payload;
        let payload = match compressed {
            false => payload,
            true => {
                let out = match &mut self.own_inflater {
                    Some(d) => d.decompress(&payload, false, self.max),
                    None => DEFLATE.with(|d| d.borrow_mut().decompress(&payload, self.peer_resets, self.max)),
                };
                out.map_err(|e| {
                    self.close_reply = Some(e.close_code);
                    DdpFailure::Protocol(e.to_string())
                })?
            }
        };
        if self.raw && binary {
            return Ok(Some(Frames::Raw(true, payload)));
        }
        let text = String::from_utf8(payload).map_err(|_| {
            self.close_reply = Some(1007);
            DdpFailure::Protocol("frame is not UTF-8".into())
        })?;
        if self.raw {
            return Ok(Some(Frames::Raw(false, text.into_bytes())));
        }
        match self.transport {
            Transport::WebSocket => Ok(Some(Frames::Ddp(vec![text]))),
            Transport::SockJs | Transport::XhrPolling | Transport::XhrStreaming => {
                match ddp::sockjs::parse_server_frame(&text).map_err(|e| DdpFailure::Protocol(e.to_string()))? {
                    ddp::sockjs::ServerFrame::Open => {
                        self.opened = true;
                        Ok(Some(Frames::Nothing))
                    }
                    ddp::sockjs::ServerFrame::Heartbeat => Ok(Some(Frames::Nothing)),
                    ddp::sockjs::ServerFrame::Messages(list) => Ok(Some(Frames::Ddp(list))),
                    ddp::sockjs::ServerFrame::Close { code, reason } => {
                        Ok(Some(Frames::Close(format!("SockJS close {code} {reason}"))))
                    }
                }
            }
        }
    }
}

/// How long the client's closing handshake may take before the socket is dropped anyway.
pub const CLOSING_HANDSHAKE: Duration = Duration::from_secs(1);

/// The client's close (1000) and its closing handshake, within [`CLOSING_HANDSHAKE`].
pub(crate) async fn close_politely(stream: &mut Stream, framer: &mut Framer, traffic: &RefCell<Traffic>) {
    let mut wire = Vec::new();
    ws::encode_frame(&mut wire, Opcode::Close, false, &ws::close_payload(1000, ""), Some(rand::random()));
    let _ = tokio::time::timeout(CLOSING_HANDSHAKE, closing_handshake(stream, framer, &wire, traffic)).await;
}

/// The client's side of the WebSocket closing handshake (RFC 6455 §7.1): the close frame `wire`
/// goes out, then the connection is read (and dropped) until the server's close frame or the end
/// of the stream. Dropping a socket with bytes still unread would reset it, and a server loses
/// what it had received but not yet read (the last `unsub` or `method` before a disconnect);
/// read to the end, the server closes first, as it does for a browser.
async fn closing_handshake(stream: &mut Stream, framer: &mut Framer, wire: &[u8], traffic: &RefCell<Traffic>) {
    if stream.write_all(wire).await.is_err() {
        return;
    }
    traffic.borrow_mut().bytes_out += wire.len() as u64;
    loop {
        loop {
            match framer.next() {
                Ok(None) => break,
                Ok(Some(Frames::Close(_))) | Err(_) => return,
                Ok(Some(_)) => {}
            }
        }
        match read_appending(stream, &mut framer.buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => traffic.borrow_mut().bytes_in += n as u64,
        }
    }
}

/// Answers a server's close, or tells it why we close, once; the socket closes after it.
pub(crate) async fn send_close(stream: &mut Stream, framer: &mut Framer) {
    if let Some(code) = framer.close_reply.take() {
        let mut wire = Vec::new();
        ws::encode_frame(&mut wire, Opcode::Close, false, &ws::close_payload(code, ""), Some(rand::random()));
        let _ = stream.write_all(&wire).await;
    }
}

/// What a user asks its connection's task to do: send a message, or close.
pub(crate) enum Outgoing {
    Ddp(String),
    Close,
}

//! The recording proxy (`bolide record --listen ADDR --to URL`): a browser points at it, it
//! forwards each HTTP request and WebSocket to the app's server as it is (permessage-deflate passed
//! through), and keeps what passed as a HAR: each request with its answer, and each WebSocket's
//! frames (inflated where the two sides compress) under `_webSocketMessages`, as Chrome writes them.
//! URLs name the server the proxy forwards to, so the HAR (and the scenario made from it) aims at
//! the app, not at the proxy. Secrets are masked in what is kept: the values of sensitive headers,
//! and in JSON (request bodies, DDP frames) the values of keys such as `password`, `token`,
//! `resume`.
//!
//! Blocking sockets, a thread per browser connection: a recording session has a handful.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::problem::Problem;
use crate::redact::{Redactor, MASK};

/// The largest request or response head read (browsers send a few KiB).
const MAX_HEAD: usize = 64 * 1024;
/// The most of a request body kept in the HAR (the whole body is forwarded).
const MAX_KEPT_BODY: usize = 1 << 20;
/// The largest WebSocket message read from a frame stream; past it the frames are still forwarded
/// but no longer read.
const MAX_MESSAGE: usize = 64 << 20;

/// Where the proxy forwards to.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `host:port` to connect to.
    pub addr: String,
    /// `host:port` as URLs and the Host header name it.
    pub authority: String,
}

impl Upstream {
    /// `http://host:port` (a path is ignored); https is refused with the reason.
    pub fn parse(to: &str) -> Result<Upstream, Problem> {
        let u =
            url::Url::parse(to).map_err(|e| format!("--to {to:?} is not a URL: {e} (e.g. http://127.0.0.1:3000)"))?;
        match u.scheme() {
            "http" | "ws" => {}
            "https" | "wss" => {
                return Err(format!(
                    "--to {to:?}: the recording proxy forwards to plain http:// servers only (run the app \
                     without TLS locally, or record a HAR in the browser instead)"
                )
                .into())
            }
            other => return Err(format!("--to {to:?}: the scheme {other:?} is not http").into()),
        }
        let host = u.host_str().ok_or_else(|| format!("--to {to:?} names no host"))?;
        let port = u.port().unwrap_or(80);
        let authority = if port == 80 { host.to_string() } else { format!("{host}:{port}") };
        Ok(Upstream { addr: format!("{host}:{port}"), authority })
    }
}

/// One request that passed, with its answer and, for a WebSocket, its frames.
#[derive(Debug, Clone, Default)]
struct Entry {
    started: Option<SystemTime>,
    elapsed_ms: f64,
    method: String,
    target: String,
    version: String,
    request_headers: Vec<(String, String)>,
    body: Option<(String, String)>,
    body_size: usize,
    status: u16,
    reason: String,
    response_headers: Vec<(String, String)>,
    response_size: usize,
    /// `(sent by the browser, seconds since the epoch, opcode, data)`.
    frames: Vec<(bool, f64, u8, String)>,
    websocket: bool,
}

/// What the proxy has seen so far.
#[derive(Debug, Default)]
pub struct Log {
    entries: Vec<Entry>,
    /// Browser connections accepted.
    pub connections: usize,
    /// Problems met on the way (an upstream that refused, frames that could not be read).
    pub problems: Vec<String>,
}

/// A running proxy: its address and what it has seen.
pub struct Proxy {
    pub addr: SocketAddr,
    listener: TcpListener,
    upstream: Upstream,
    log: Arc<Mutex<Log>>,
}

impl Proxy {
    pub fn bind(listen: &str, upstream: Upstream) -> Result<Proxy, Problem> {
        let listener = TcpListener::bind(listen).map_err(|e| format!("--listen {listen}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("--listen {listen}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("--listen {listen}: {e}"))?;
        // std listens with a queue of 128: a page's burst of connections beyond it would wait
        // for the kernel's retries (1 s, 3 s, ...). Listening again sets a longer one (the kernel
        // caps it at net.core.somaxconn); where it cannot, the shorter stays.
        {
            use std::os::fd::AsRawFd;
            // SAFETY: listen(2) on the listener's own descriptor, which it keeps open.
            let _ = unsafe { libc::listen(listener.as_raw_fd(), ACCEPT_QUEUE) };
        }
        Ok(Proxy { addr, listener, upstream, log: Arc::default() })
    }

    /// Accepts and forwards until `stop` says so (checked at least every 50 ms) or `until`
    /// passes; then the HAR of what passed (connections still open are cut where they are).
    /// Accepting is driven by the listener's readiness: a connection is taken the moment it
    /// arrives, and a burst is taken whole before waiting again.
    pub fn run(self, stop: impl Fn() -> bool, until: Option<Instant>) -> (Value, Log) {
        while !stop() && until.is_none_or(|u| Instant::now() < u) {
            let wait = until.map_or(STOP_CHECK, |u| u.saturating_duration_since(Instant::now()).min(STOP_CHECK));
            if !readable(&self.listener, wait) {
                continue;
            }
            // Every connection waiting now, until the queue is empty.
            loop {
                match self.listener.accept() {
                    Ok((client, _)) => {
                        let (upstream, log) = (self.upstream.clone(), self.log.clone());
                        log.lock().map(|mut l| l.connections += 1).ok();
                        let _ = std::thread::Builder::new()
                            .name("bolide-record".into())
                            .spawn(move || serve(client, &upstream, &log));
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // The queue is empty.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // Out of descriptors, say: the queue stays readable, so a short pause keeps
                    // this loop from spinning until a connection ends.
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(10));
                        break;
                    }
                }
            }
        }
        let log = std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()));
        (har(&log.entries, &self.upstream), log)
    }
}

/// The listener's queue of connections not yet accepted.
const ACCEPT_QUEUE: libc::c_int = 4096;
/// How often the accept loop looks at its stop, at the latest.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// Waits until `listener` has a connection to accept, at most `wait`; false when none came (or
/// the wait was interrupted by a signal).
fn readable(listener: &TcpListener, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one pollfd that lives through the call, and its count.
    let n = unsafe { libc::poll(&mut fd, 1, ms) };
    n > 0 && fd.revents & (libc::POLLIN | libc::POLLERR) != 0
}

/// Bytes read from a socket and not yet used.
struct Buffered {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Buffered {
    /// Reads more; false at the end of the stream.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// The next head (up to and with its blank line), or None when the stream ends before one starts.
    fn head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(end) = memchr::memmem::find(&self.buf, b"\r\n\r\n") {
                return Ok(Some(self.buf.drain(..end + 4).collect()));
            }
            if self.buf.len() > MAX_HEAD {
                return Err(io::Error::other(format!("a head longer than {MAX_HEAD} bytes")));
            }
            if !self.fill()? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a head"))
                };
            }
        }
    }

    /// Forwards `n` bytes to `to`, keeping up to `keep.1` of them in `keep.0`.
    fn forward(&mut self, mut n: usize, to: &mut TcpStream, keep: &mut Option<&mut Vec<u8>>) -> io::Result<()> {
        while n > 0 {
            if self.buf.is_empty() && !self.fill()? {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a body"));
            }
            let take = n.min(self.buf.len());
            to.write_all(&self.buf[..take])?;
            if let Some(k) = keep.as_deref_mut() {
                let room = MAX_KEPT_BODY.saturating_sub(k.len()).min(take);
                k.extend_from_slice(&self.buf[..room]);
            }
            self.buf.drain(..take);
            n -= take;
        }
        Ok(())
    }

    /// Forwards one line (with its CRLF) and returns it.
    fn line(&mut self, to: &mut TcpStream) -> io::Result<String> {
        loop {
            if let Some(end) = memchr::memmem::find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.forward(end + 2, to, &mut None)?;
                return Ok(line);
            }
            if self.buf.len() > MAX_HEAD || !self.fill()? {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "a chunked body without its line end"));
            }
        }
    }
}

/// How a message's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn has_token(headers: &[(String, String)], name: &str, token: &str) -> bool {
    header(headers, name).is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

/// Copies a body of `kind` from `from` to `to`, returning its size; `keep` gets the first bytes.
fn copy_body(from: &mut Buffered, to: &mut TcpStream, kind: Body, mut keep: Option<&mut Vec<u8>>) -> io::Result<usize> {
    match kind {
        Body::None => Ok(0),
        Body::Length(n) => from.forward(n, to, &mut keep).map(|_| n),
        Body::Chunked => {
            let mut size = 0;
            loop {
                let line = from.line(to)?;
                let hex = line.split(';').next().unwrap_or("").trim();
                let n = usize::from_str_radix(hex, 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("chunk size {hex:?}")))?;
                if n == 0 {
                    // Trailers, up to the blank line.
                    while !from.line(to)?.is_empty() {}
                    return Ok(size);
                }
                from.forward(n, to, &mut keep)?;
                from.line(to)?;
                size += n;
            }
        }
        Body::UntilClose => {
            let mut size = 0;
            loop {
                if !from.buf.is_empty() {
                    let n = from.buf.len();
                    from.forward(n, to, &mut keep)?;
                    size += n;
                }
                if !from.fill()? {
                    return Ok(size);
                }
            }
        }
    }
}

fn parse_headers(raw: &[httparse::Header]) -> Vec<(String, String)> {
    raw.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())).collect()
}

fn write_head(to: &mut TcpStream, first: &str, headers: &[(String, String)]) -> io::Result<()> {
    let mut head = format!("{first}\r\n");
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    to.write_all(head.as_bytes())
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn problem(log: &Mutex<Log>, text: String) {
    if let Ok(mut l) = log.lock() {
        if l.problems.len() < 100 && !l.problems.contains(&text) {
            l.problems.push(text);
        }
    }
}

/// One browser connection: its requests forwarded one after another on one upstream connection,
/// until either side closes or a WebSocket takes it over.
fn serve(client: TcpStream, upstream: &Upstream, log: &Mutex<Log>) {
    let _ = client.set_nonblocking(false);
    let _ = client.set_nodelay(true);
    let Ok(mut client_w) = client.try_clone() else { return };
    let mut client = Buffered { stream: client, buf: Vec::new() };
    let mut server: Option<(Buffered, TcpStream)> = None;
    while let Some(Request { mut entry, keep_alive, body, clock }) = read_request(&mut client, &mut client_w, log) {
        if server.is_none() {
            let Some(s) = connect(upstream, &mut client_w, log) else { break };
            server = Some(s);
        }
        let Some((from_server, to_server)) = server.as_mut() else { break };
        if !forward_request(&mut client, to_server, &mut entry, body, upstream, log) {
            break;
        }
        let Some((status, reason, response_headers)) = answer_head(from_server, &mut client_w, &entry, log) else {
            return;
        };
        entry.status = status;
        entry.reason = reason;
        entry.response_headers = response_headers;
        if status == 101 {
            entry.websocket = true;
            entry.elapsed_ms = clock.elapsed().as_secs_f64() * 1000.0;
            let deflate = header(&entry.response_headers, "sec-websocket-extensions")
                .is_some_and(|v| v.contains("permessage-deflate"));
            let index = {
                let Ok(mut l) = log.lock() else { return };
                l.entries.push(entry);
                l.entries.len() - 1
            };
            let Some((from_server, to_server)) = server.take() else { return };
            tunnel(client, client_w, from_server, to_server, deflate, index, log);
            return;
        }
        let Some(keep_alive) = pass_answer(from_server, &mut client_w, entry, keep_alive, clock, log) else { break };
        if !keep_alive {
            break;
        }
    }
    let _ = client_w.shutdown(Shutdown::Both);
    if let Some((_, s)) = server {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// A browser's request as read: its entry so far, whether the browser keeps the connection,
/// how its body is delimited, and when it arrived.
struct Request {
    entry: Entry,
    keep_alive: bool,
    body: Body,
    clock: Instant,
}

/// Reads a browser's request head (None: the connection ends, a 400 answered where it is not
/// HTTP/1.x).
fn read_request(client: &mut Buffered, client_w: &mut TcpStream, log: &Mutex<Log>) -> Option<Request> {
    let head = match client.head() {
        Ok(Some(h)) => h,
        Ok(None) => return None,
        Err(e) => {
            problem(log, format!("a browser's request could not be read: {e}"));
            return None;
        }
    };
    let mut raw = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut raw);
    if !matches!(req.parse(&head), Ok(httparse::Status::Complete(_))) {
        let _ = client_w.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        problem(log, "a browser sent a request that is not HTTP/1.x; answered 400".into());
        return None;
    }
    let started = SystemTime::now();
    let clock = Instant::now();
    let entry = Entry {
        started: Some(started),
        method: req.method.unwrap_or("GET").to_string(),
        target: req.path.unwrap_or("/").to_string(),
        version: format!("HTTP/1.{}", req.version.unwrap_or(1)),
        request_headers: parse_headers(req.headers),
        ..Entry::default()
    };
    let keep_alive = req.version == Some(1) && !has_token(&entry.request_headers, "connection", "close");
    let body = if has_token(&entry.request_headers, "transfer-encoding", "chunked") {
        Body::Chunked
    } else {
        match header(&entry.request_headers, "content-length").map(|v| v.trim().parse::<usize>()) {
            Some(Ok(n)) => Body::Length(n),
            Some(Err(_)) => {
                let _ =
                    client_w.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                return None;
            }
            None => Body::None,
        }
    };
    Some(Request { entry, keep_alive, body, clock })
}

/// The upstream connection (its reader and writer); None where the server refused, answered 502.
fn connect(upstream: &Upstream, client_w: &mut TcpStream, log: &Mutex<Log>) -> Option<(Buffered, TcpStream)> {
    match TcpStream::connect(&upstream.addr) {
        Ok(s) => {
            let _ = s.set_nodelay(true);
            let w = s.try_clone().ok()?;
            Some((Buffered { stream: s, buf: Vec::new() }, w))
        }
        Err(e) => {
            let text = format!("bolide record: the server {} refused: {e}\n", upstream.addr);
            let _ = client_w.write_all(
                format!(
                    "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                )
                .as_bytes(),
            );
            problem(log, format!("the server {} refused a connection: {e}", upstream.addr));
            None
        }
    }
}

/// Sends the request on to the server, named for it, keeping the start of its body in `entry`
/// (false: it could not be sent, said).
fn forward_request(
    client: &mut Buffered,
    to_server: &mut TcpStream,
    entry: &mut Entry,
    body: Body,
    upstream: &Upstream,
    log: &Mutex<Log>,
) -> bool {
    // The request as the browser sent it, named for the server it goes to.
    let mut headers = entry.request_headers.clone();
    for (n, v) in headers.iter_mut() {
        if n.eq_ignore_ascii_case("host") {
            *v = upstream.authority.clone();
        }
    }
    let first = format!("{} {} {}", entry.method, entry.target, entry.version);
    let mut kept = Vec::new();
    let sent =
        write_head(to_server, &first, &headers).and_then(|_| copy_body(client, to_server, body, Some(&mut kept)));
    match sent {
        Ok(n) => entry.body_size = n,
        Err(e) => {
            problem(log, format!("{} {}: the request could not be forwarded: {e}", entry.method, entry.target));
            return false;
        }
    }
    // A body cut at the limit cannot be read for its secrets (its JSON or form is not whole):
    // its text is left out of the HAR, its size kept.
    if !kept.is_empty() && kept.len() >= entry.body_size && kept.len() < MAX_KEPT_BODY {
        let mime = header(&entry.request_headers, "content-type").unwrap_or("").to_string();
        entry.body = Some((mime, String::from_utf8_lossy(&kept).into_owned()));
    }
    true
}

/// An answer's status, reason and headers.
type Answer = (u16, String, Vec<(String, String)>);

/// The answer's head, passed on to the browser (1xx other than 101 passed on, then the real
/// one): its status, reason and headers. None: the connection is over (said where the server
/// failed).
fn answer_head(
    from_server: &mut Buffered,
    client_w: &mut TcpStream,
    entry: &Entry,
    log: &Mutex<Log>,
) -> Option<Answer> {
    loop {
        let head = match from_server.head() {
            Ok(Some(h)) => h,
            Ok(None) | Err(_) => {
                problem(log, format!("{} {}: the server closed without an answer", entry.method, entry.target));
                let _ = client_w.shutdown(Shutdown::Both);
                return None;
            }
        };
        let mut raw = [httparse::EMPTY_HEADER; 128];
        let mut res = httparse::Response::new(&mut raw);
        if !matches!(res.parse(&head), Ok(httparse::Status::Complete(_))) {
            problem(log, format!("{} {}: the server's answer is not HTTP", entry.method, entry.target));
            let _ = client_w.shutdown(Shutdown::Both);
            return None;
        }
        client_w.write_all(&head).ok()?;
        let status = res.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        return Some((status, res.reason.unwrap_or("").to_string(), parse_headers(res.headers)));
    }
}

/// Passes the answer's body on and logs the exchange; whether the connection stays open for
/// another request (None: the body could not be passed on, said).
fn pass_answer(
    from_server: &mut Buffered,
    client_w: &mut TcpStream,
    mut entry: Entry,
    keep_alive_req: bool,
    clock: Instant,
    log: &Mutex<Log>,
) -> Option<bool> {
    let no_body = entry.method == "HEAD" || entry.status == 204 || entry.status == 304;
    let kind = if no_body {
        Body::None
    } else if has_token(&entry.response_headers, "transfer-encoding", "chunked") {
        Body::Chunked
    } else {
        match header(&entry.response_headers, "content-length").and_then(|v| v.trim().parse().ok()) {
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        }
    };
    match copy_body(from_server, client_w, kind, None) {
        Ok(n) => entry.response_size = n,
        Err(e) => {
            problem(log, format!("{} {}: the answer could not be passed on: {e}", entry.method, entry.target));
            return None;
        }
    }
    entry.elapsed_ms = clock.elapsed().as_secs_f64() * 1000.0;
    let keep_alive =
        keep_alive_req && kind != Body::UntilClose && !has_token(&entry.response_headers, "connection", "close");
    if let Ok(mut l) = log.lock() {
        l.entries.push(entry);
    }
    Some(keep_alive)
}

/// A WebSocket after its 101: bytes copied both ways as they come, and each direction's frames
/// read on the side into the entry's messages.
fn tunnel(
    client: Buffered,
    client_w: TcpStream,
    server: Buffered,
    server_w: TcpStream,
    deflate: bool,
    index: usize,
    log: &Mutex<Log>,
) {
    std::thread::scope(|s| {
        s.spawn(|| pipe(server, client_w, false, deflate, index, log));
        pipe(client, server_w, true, deflate, index, log);
    });
}

fn pipe(mut from: Buffered, mut to: TcpStream, from_client: bool, deflate: bool, index: usize, log: &Mutex<Log>) {
    let mut reader = ddp::ws::Reader::new(from_client, MAX_MESSAGE, deflate);
    let mut inflate = ddp::ws::Deflate::new(1, 15);
    let mut parse: Vec<u8> = std::mem::take(&mut from.buf);
    let mut reading = true;
    let mut pending = parse.clone();
    // When the bytes being read came in: a frame's time is when the proxy read it, before it passed
    // it on, so that an answer is never timed before the message it answers.
    let mut read_at = now_s();
    loop {
        if !pending.is_empty() {
            if to.write_all(&pending).is_err() {
                break;
            }
            pending.clear();
        }
        while reading {
            match reader.next(&mut parse) {
                Ok(None) => break,
                Ok(Some((used, message))) => {
                    parse.drain(..used);
                    let Some(ddp::ws::Incoming::Data { opcode, compressed, payload }) = message else { continue };
                    let payload = if compressed {
                        match inflate.decompress(&payload, false, MAX_MESSAGE) {
                            Ok(p) => p,
                            Err(e) => {
                                problem(log, format!("a compressed WebSocket message could not be inflated: {e}"));
                                reading = false;
                                break;
                            }
                        }
                    } else {
                        payload
                    };
                    let time = read_at;
                    let (code, data) = match (opcode, String::from_utf8(payload)) {
                        (ddp::ws::Opcode::Text, Ok(text)) => (1u8, masked_frame(&text)),
                        (_, Ok(text)) => (2, base64_of(text.as_bytes())),
                        (_, Err(e)) => (2, base64_of(e.as_bytes())),
                    };
                    if let Ok(mut l) = log.lock() {
                        if let Some(entry) = l.entries.get_mut(index) {
                            entry.frames.push((from_client, time, code, data));
                        }
                    }
                }
                Err(e) => {
                    problem(log, format!("WebSocket frames could not be read (still forwarded): {e}"));
                    reading = false;
                }
            }
        }
        if !reading {
            parse.clear();
        }
        let mut chunk = [0u8; 16 * 1024];
        match from.stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                read_at = now_s();
                pending.extend_from_slice(&chunk[..n]);
                if reading {
                    parse.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A value with the values of secret keys masked.
fn mask(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| if super::flow::secret_name(&k) { (k, Value::String(MASK.into())) } else { (k, mask(x)) })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(mask).collect()),
        other => other,
    }
}

/// A DDP message (or any JSON) with its secrets masked: the values of secret keys, and every
/// value passed to one of Meteor's accounts methods whose parameters are secrets by position
/// (`resetPassword`'s token); DDP's own session id (`connect`, `connected`) is no credential and
/// stays, as bolide record reads it.
fn mask_message(v: Value) -> Value {
    let Value::Object(mut o) = v else { return mask(v) };
    let kind = o.get("msg").and_then(Value::as_str).unwrap_or_default().to_string();
    let method = o.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
    let kept_session = matches!(kind.as_str(), "connect" | "connected").then(|| o.remove("session")).flatten();
    // Secret by position: a method's parameters that are values; an object among them has its
    // secret keys masked (a digest's `algorithm` stays, as bolide record keeps it).
    if kind == "method" && super::flow::SECRET_METHODS.contains(&method.as_str()) {
        if let Some(Value::Array(params)) = o.get_mut("params") {
            for p in params.iter_mut() {
                if matches!(p, Value::String(_) | Value::Number(_)) {
                    *p = Value::String(MASK.into());
                }
            }
        }
    }
    let mut masked = mask(Value::Object(o));
    if let (Some(session), Value::Object(m)) = (kept_session, &mut masked) {
        m.insert("session".into(), session);
    }
    masked
}

/// A form body (`application/x-www-form-urlencoded`) or a query string with the values of secret
/// fields masked; None when nothing was.
fn masked_form(text: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(text.as_bytes()).into_owned().collect();
    if !pairs.iter().any(|(k, _)| super::flow::secret_name(k)) {
        return None;
    }
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in &pairs {
        out.append_pair(k, if super::flow::secret_name(k) { MASK } else { v });
    }
    Some(out.finish())
}

/// A request target (`/path?query`) with the secret query parameters' values masked.
fn masked_target(target: &str) -> String {
    match target.split_once('?') {
        Some((path, query)) => match masked_form(query) {
            Some(q) => format!("{path}?{q}"),
            None => target.to_string(),
        },
        None => target.to_string(),
    }
}

/// A JSON text with its secrets masked; a form's secret fields masked; other text as it is.
fn masked_json(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => {
            let m = match v.clone() {
                Value::Array(items) => Value::Array(items.into_iter().map(mask_message).collect()),
                one => mask_message(one),
            };
            if m == v {
                text.to_string()
            } else {
                m.to_string()
            }
        }
        // Not JSON: a form's secret fields masked (`password=...&user=...`).
        _ => masked_form(text).unwrap_or_else(|| text.to_string()),
    }
}

/// A WebSocket text frame as kept: DDP (raw, or SockJS's `a[...]` and `[...]` of DDP texts) with
/// secrets masked.
fn masked_frame(text: &str) -> String {
    let sockjs = text.strip_prefix('a').unwrap_or(text);
    if sockjs.starts_with("[\"") {
        if let Ok(items) = serde_json::from_str::<Vec<String>>(sockjs) {
            let items: Vec<String> = items.iter().map(|t| masked_json(t)).collect();
            let body = serde_json::to_string(&items).unwrap_or_default();
            return if text.starts_with('a') { format!("a{body}") } else { body };
        }
    }
    masked_json(text)
}

fn headers_json(headers: &[(String, String)]) -> Value {
    let r = Redactor::default();
    Value::Array(headers.iter().map(|(n, v)| json!({"name": n, "value": r.value(n, v)})).collect())
}

/// The HAR of what passed.
fn har(entries: &[Entry], upstream: &Upstream) -> Value {
    let out: Vec<Value> = entries
        .iter()
        .map(|e| {
            let scheme = if e.websocket { "ws" } else { "http" };
            let url = format!("{scheme}://{}{}", upstream.authority, masked_target(&e.target));
            let started = e.started.map(|t| humantime::format_rfc3339_millis(t).to_string()).unwrap_or_default();
            let mime = header(&e.response_headers, "content-type").unwrap_or("").to_string();
            let mut request = json!({
                "method": e.method, "url": url, "httpVersion": e.version,
                "headers": headers_json(&e.request_headers), "queryString": [], "cookies": [],
                "headersSize": -1, "bodySize": e.body_size,
            });
            if let Some((mime, text)) = &e.body {
                // SockJS's xhr_send bodies are arrays of DDP texts: masked as its frames are.
                request["postData"] = json!({"mimeType": mime, "text": masked_frame(text)});
            }
            let mut entry = json!({
                "startedDateTime": started,
                "time": e.elapsed_ms,
                "request": request,
                "response": {
                    "status": e.status, "statusText": e.reason, "httpVersion": e.version,
                    "headers": headers_json(&e.response_headers), "cookies": [],
                    "content": {"size": e.response_size, "mimeType": mime},
                    "redirectURL": "", "headersSize": -1, "bodySize": e.response_size,
                },
                "cache": {},
                "timings": {"send": 0, "wait": e.elapsed_ms, "receive": 0},
            });
            if e.websocket {
                entry["_resourceType"] = "websocket".into();
                // The two directions' threads log in the order they take the lock; the HAR lists
                // frames in the order they came.
                let mut frames: Vec<&(bool, f64, u8, String)> = e.frames.iter().collect();
                frames.sort_by(|a, b| a.1.total_cmp(&b.1));
                entry["_webSocketMessages"] = frames
                    .into_iter()
                    .map(|(sent, t, op, data)| {
                        json!({"type": if *sent { "send" } else { "receive" }, "time": t, "opcode": op, "data": data})
                    })
                    .collect();
            }
            entry
        })
        .collect();
    json!({"log": {
        "version": "1.2",
        "creator": {"name": "bolide record --listen", "version": env!("CARGO_PKG_VERSION")},
        "entries": out,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_and_masks() {
        let u = Upstream::parse("http://127.0.0.1:3000/some/path").unwrap();
        assert_eq!((u.addr.as_str(), u.authority.as_str()), ("127.0.0.1:3000", "127.0.0.1:3000"));
        let u = Upstream::parse("http://[::1]").unwrap();
        assert_eq!((u.addr.as_str(), u.authority.as_str()), ("[::1]:80", "[::1]"));
        assert!(Upstream::parse("https://127.0.0.1").unwrap_err().to_string().contains("plain http://"));
        assert!(Upstream::parse("nope").unwrap_err().to_string().contains("not a URL"));
        let login = r#"{"msg":"method","method":"login","params":[{"user":{"username":"u1"},"password":{"digest":"abc","algorithm":"sha-256"}}],"id":"1"}"#;
        let kept = masked_frame(login);
        assert!(!kept.contains("abc") && kept.contains("u1") && kept.contains(MASK), "{kept}");
        let sockjs = format!(
            "a{}",
            serde_json::to_string(&vec![r#"{"msg":"result","id":"1","result":{"id":"U","token":"T0K"}}"#]).unwrap()
        );
        let kept = masked_frame(&sockjs);
        assert!(kept.starts_with("a[") && !kept.contains("T0K") && kept.contains("\\\"id\\\":\\\"U\\\""), "{kept}");
        let resume = r#"{"msg":"method","method":"login","params":[{"resume":"T0K"}],"id":"2"}"#;
        assert!(!masked_frame(resume).contains("T0K"));
        // Frames with nothing secret are kept byte for byte.
        let plain = r#"{"msg":"sub","id":"a","name":"fetchTasks","params":[]}"#;
        assert_eq!(masked_frame(plain), plain);
        assert_eq!(masked_frame("o"), "o");
        // Secrets by position (a reset token, digests), by key (apiKey, otp), in forms and queries.
        let reset = r#"{"msg":"method","method":"resetPassword","params":["r3set-tok",{"digest":"d1g","algorithm":"sha-256"}],"id":"3"}"#;
        let kept = masked_frame(reset);
        assert!(!kept.contains("r3set-tok") && !kept.contains("d1g") && kept.contains("resetPassword"), "{kept}");
        assert!(kept.contains("sha-256"), "a digest's algorithm stays: {kept}");
        // SockJS's xhr_send body: an array of DDP texts, masked as frames are.
        let xhr =
            serde_json::to_string(&vec![r#"{"msg":"method","method":"login","params":[{"resume":"T0K"}],"id":"2"}"#])
                .unwrap();
        assert!(!masked_frame(&xhr).contains("T0K"), "{}", masked_frame(&xhr));
        let keyed =
            r#"{"msg":"method","method":"report","params":[{"apiKey":"k3y","otp":123456,"sessionId":"s1"}],"id":"4"}"#;
        let kept = masked_frame(keyed);
        assert!(!kept.contains("k3y") && !kept.contains("123456") && kept.contains("s1"), "{kept}");
        // DDP's own session id is no credential: kept byte for byte.
        let connected = r#"{"msg":"connected","session":"kcHDuKPiG3JjRfk4C"}"#;
        assert_eq!(masked_frame(connected), connected);
        assert_eq!(masked_json("user=ann&password=hunter2"), "user=ann&password=%3Credacted%3E");
        assert_eq!(masked_target("/reset?token=abc&x=1"), "/reset?token=%3Credacted%3E&x=1");
        assert_eq!(masked_target("/plain?x=1"), "/plain?x=1");
    }
}

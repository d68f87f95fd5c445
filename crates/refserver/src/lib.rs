//! bolide's reference target: a stand-in for a Meteor server running the benchmark's tasks app,
//! over DDP (raw WebSocket and SockJS, permessage-deflate, push or poll reactivity; see
//! [`session`] and [`tasks`]), plus plain HTTP test endpoints, on a keep-alive HTTP/1.1 server with
//! a multi-threaded tokio runtime of its own.
//!
//! DDP endpoints: `/websocket` and `/sockjs/websocket` (raw WebSocket, one DDP message per frame),
//! `/sockjs/<server>/<session>/websocket` (SockJS framing), `/sockjs/info`. `GET /` serves the tasks
//! page for a person, driven by a small browser DDP client at `/bolide-ddp.js`.
//!
//! HTTP endpoints:
//! - `GET /ok`: 200 with the 2-byte body `OK`;
//! - `GET /bytes/N`: 200 with N bytes (at most 1 GiB);
//! - `GET /delay/MS`: 200 `OK` after MS milliseconds (at most 10 minutes);
//! - `GET /status/CODE`: that status (200-599) with a short body;
//! - `GET /stats`: the server's own counts as JSON (sessions, subscriptions made ready, method
//!   calls, connections, and with `balance` the connections kept and forwarded), what a
//!   monitoring agent such as Kadira would report;
//! - any method works; HEAD answers headers only. Request bodies with Content-Length are read and
//!   dropped; chunked request bodies are refused with 501.
//!
//! With peers in [`Config::balance`] it is also a Cluster-like balancer ([`balance`]).
//!
//! A library first: tests start it on `127.0.0.1:0` and read its request counter.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub mod accounts;
pub mod balance;
pub mod bugs;
pub mod mergebox;
pub mod session;
pub mod tasks;

pub use bugs::Bug;
pub use session::{App, DdpConfig};
pub use tasks::Reactivity;

/// Largest request head accepted.
const HEAD_LIMIT: usize = 64 * 1024;
/// Largest `/bytes/N`.
const MAX_BYTES: u64 = 1 << 30;
/// Longest `/delay/MS`.
const MAX_DELAY_MS: u64 = 600_000;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub addr: SocketAddr,
    /// Runtime worker threads.
    pub threads: usize,
    /// The DDP side: reactivity, compression, limits, heartbeats.
    pub ddp: DdpConfig,
    /// Most connections open at once (HTTP and DDP); more are answered 503 and closed. 0: the
    /// open-file limit (raised to its hard limit at start) less [`FD_RESERVE`], so that the
    /// server can always accept and refuse.
    pub max_connections: usize,
    /// How long a connection may take to send a complete request head, from when it opens or
    /// its previous request was answered (idle keep-alive connections and slowloris clients are
    /// closed after it).
    pub request_timeout: Duration,
    /// Called on a runtime thread that has run out of work, at most once a second per thread:
    /// where the embedding program hands freed memory back to the system. (mimalloc, for one,
    /// keeps the pages a thread's blocks were freed from, often by other threads, until that
    /// thread collects; `bolide serve` passes its collect here.)
    pub on_idle: Option<fn()>,
    /// Peers to balance DDP connections over (this server takes every (peers + 1)-th itself);
    /// empty: no balancing.
    pub balance: Vec<SocketAddr>,
}

/// Descriptors kept free under the open-file limit (for accepting and refusing, and files).
pub const FD_RESERVE: usize = 64;

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: 1,
            ddp: DdpConfig::default(),
            max_connections: 0,
            request_timeout: Duration::from_secs(10),
            on_idle: None,
            balance: Vec::new(),
        }
    }
}

/// Runs `hook` if this thread has not run it in the last second.
fn idle(hook: fn()) {
    thread_local! {
        static LAST: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    }
    let now = std::time::Instant::now();
    if LAST.get().is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
        LAST.set(Some(now));
        hook();
    }
}

/// Raises the soft open-file limit to the hard one and returns it.
fn open_file_limit() -> usize {
    // SAFETY: getrlimit/setrlimit only read and write the struct handed to them.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
}

/// Counters a test can read while the server runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered (complete responses written or being written).
    pub requests: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections refused (503) because `max_connections` were open.
    pub refused: AtomicU64,
    /// Connections closed because no complete request head came within `request_timeout`.
    pub timed_out: AtomicU64,
}

/// The HTTP side's limits.
#[derive(Debug, Clone, Copy)]
struct Limits {
    max_connections: usize,
    request_timeout: Duration,
}

/// A connection's place in the open count, given back when dropped.
struct Open(Arc<Counters>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A running server; stops on [`Server::shutdown`] or when dropped.
pub struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    balance: Arc<balance::BalanceCounters>,
    app: Arc<App>,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds (errors surface here, not later) and starts serving on a thread of its own.
    pub fn start(config: Config) -> io::Result<Server> {
        let listener = std::net::TcpListener::bind(config.addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let mut rt = tokio::runtime::Builder::new_multi_thread();
        rt.worker_threads(config.threads.max(1)).thread_name("refserver").enable_all();
        if let Some(hook) = config.on_idle {
            rt.on_thread_park(move || idle(hook));
        }
        let rt = rt.build()?;
        let counters = Arc::new(Counters::default());
        let cap = match config.max_connections {
            0 => open_file_limit().saturating_sub(FD_RESERVE).max(16),
            n => n,
        };
        let limits = Limits { max_connections: cap, request_timeout: config.request_timeout };
        let app = App::new(config.ddp.clone());
        let balance = Arc::new(balance::BalanceCounters::default());
        let shared = Arc::new(Shared {
            counters: Arc::clone(&counters),
            app: Arc::clone(&app),
            balancer: balance::Balancer::new(config.balance.clone()),
            balance: Arc::clone(&balance),
            limits,
            addr,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let a = Arc::clone(&app);
        let listener = {
            let _guard = rt.enter();
            TcpListener::from_std(listener)?
        };
        let thread = std::thread::Builder::new().name("refserver-main".into()).spawn(move || {
            rt.block_on(async move {
                let poller = tokio::spawn(Arc::clone(&a.tasks).run_poller());
                accept_loop(listener, shared, stop_rx).await;
                poller.abort();
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        })?;
        Ok(Server { addr, counters, balance, app, stop: Some(stop_tx), thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::Relaxed)
    }

    /// The connection counters: open now, refused at the cap, closed by the request timeout.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Where the balancer sent DDP connections (all zero without peers).
    pub fn balance_counters(&self) -> &balance::BalanceCounters {
        &self.balance
    }

    /// The DDP side: the tasks collection, session and method counters.
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// `ws://ADDR/websocket`.
    pub fn websocket_url(&self) -> String {
        format!("ws://{}/websocket", self.addr)
    }

    /// Stops accepting, closes connections, and waits for the server thread.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// What every connection's task needs.
struct Shared {
    counters: Arc<Counters>,
    app: Arc<App>,
    balancer: balance::Balancer,
    balance: Arc<balance::BalanceCounters>,
    limits: Limits,
    addr: SocketAddr,
}

impl Shared {
    /// `GET /stats`: the server's own counts, as JSON.
    fn stats(&self) -> String {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        let a = &self.app;
        let b = &self.balance;
        format!(
            concat!(
                r#"{{"sessions_started":{},"sessions_live":{},"subscriptions_ready":{},"methods_called":{},"#,
                r#""messages_in":{},"messages_out":{},"#,
                r#""connections":{},"connections_open":{},"requests":{},"balance":{{"peers":{},"kept":{},"#,
                r#""forwarded":{},"peer_failures":{}}}}}"#
            ),
            n(&a.sessions_started),
            a.live_sessions.load(Ordering::Relaxed),
            n(&a.subscriptions_ready),
            n(&a.methods_called),
            n(&a.messages_in),
            n(&a.messages_out),
            n(&c.connections),
            n(&c.open),
            n(&c.requests),
            self.balancer.peers().len(),
            n(&b.kept),
            n(&b.forwarded),
            n(&b.peer_failures),
        )
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let counters = &shared.counters;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    counters.connections.fetch_add(1, Ordering::Relaxed);
                    if counters.open.load(Ordering::Relaxed) >= shared.limits.max_connections as u64 {
                        // Full: say so without waiting on the client, and close.
                        counters.refused.fetch_add(1, Ordering::Relaxed);
                        let _ = stream.try_write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        continue;
                    }
                    counters.open.fetch_add(1, Ordering::Relaxed);
                    let open = Open(Arc::clone(counters));
                    let _ = stream.set_nodelay(true);
                    let sh = Arc::clone(&shared);
                    tokio::spawn(async move {
                        let _open = open;
                        // The HTTP part ends (its buffers freed) before a DDP session starts.
                        let Ok(Some(mut up)) = serve_connection(stream, &sh).await else { return };
                        if sh.balancer.is_active() && !up.info.forwarded {
                            let routed = sh.balancer.route(up.stream, &up.head, &up.leftover, sh.addr, &sh.balance).await;
                            match routed {
                                Ok(Some(stream)) => up.stream = stream,
                                _ => return,
                            }
                        }
                        let _ = upgrade(up, Arc::clone(&sh.app)).await;
                    });
                }
                // Out of file descriptors and the like: pause instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = stop.changed() => return,
        }
    }
}

/// What the router decided.
struct Reply {
    status: u16,
    body: Body,
    content_type: &'static str,
    delay: Duration,
}

enum Body {
    Static(&'static [u8]),
    Repeat(u64),
    Text(String),
}

impl Body {
    fn len(&self) -> u64 {
        match self {
            Body::Static(b) => b.len() as u64,
            Body::Repeat(n) => *n,
            Body::Text(s) => s.len() as u64,
        }
    }
}

/// The tasks page and its DDP client.
const PAGE: &str = include_str!("../assets/index.html");
const CLIENT_JS: &str = include_str!("../assets/bolide-ddp.js");

fn route(path: &str) -> Reply {
    let reply = |status, body, content_type| Reply { status, body, content_type, delay: Duration::ZERO };
    let text = |status, body| reply(status, body, "text/plain");
    let path = path.split('?').next().unwrap_or(path);
    let number = |prefix: &str| path.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
    if path == "/ok" {
        text(200, Body::Static(b"OK"))
    } else if path == "/" {
        reply(200, Body::Static(PAGE.as_bytes()), "text/html; charset=utf-8")
    } else if path == "/bolide-ddp.js" {
        reply(200, Body::Static(CLIENT_JS.as_bytes()), "text/javascript; charset=utf-8")
    } else if path == "/sockjs/info" {
        let entropy: u32 = rand_entropy();
        let info = format!(r#"{{"websocket":true,"origins":["*:*"],"cookie_needed":false,"entropy":{entropy}}}"#);
        reply(200, Body::Text(info), "application/json; charset=UTF-8")
    } else if let Some(n) = number("/bytes/") {
        if n > MAX_BYTES {
            return text(400, Body::Text(format!("at most {MAX_BYTES} bytes\n")));
        }
        reply(200, Body::Repeat(n), "application/octet-stream")
    } else if let Some(ms) = number("/delay/") {
        Reply { delay: Duration::from_millis(ms.min(MAX_DELAY_MS)), ..text(200, Body::Static(b"OK")) }
    } else if let Some(code) = number("/status/").filter(|c| (200..600).contains(c)) {
        text(code as u16, Body::Text(format!("{code}\n")))
    } else {
        text(404, Body::Static(b"not found\n"))
    }
}

fn rand_entropy() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    t.subsec_nanos() ^ (t.as_secs() as u32).rotate_left(13)
}

/// Which DDP transport a WebSocket path asks for, if any (Meteor's routes, and `/echo` when
/// enabled).
fn ddp_framing(path: &str, echo: bool) -> Option<session::Framing> {
    let path = path.split('?').next().unwrap_or(path);
    match path {
        "/echo" if echo => Some(session::Framing::Echo),
        "/websocket" | "/websocket/" | "/sockjs/websocket" | "/sockjs/websocket/" => Some(session::Framing::Raw),
        _ => {
            let rest = path.strip_prefix("/sockjs/")?;
            let parts: Vec<&str> = rest.split('/').collect();
            let segment_ok = |s: &str| !s.is_empty() && !s.contains('.');
            match parts.as_slice() {
                [server, session, "websocket"] if segment_ok(server) && segment_ok(session) => {
                    Some(session::Framing::SockJs)
                }
                _ => None,
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        426 => "Upgrade Required",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// The parts of a request head that matter here, owned (so no header array is held across awaits).
#[derive(Default)]
struct RequestInfo {
    head_len: usize,
    path: String,
    is_head: bool,
    http10: bool,
    keep_alive: bool,
    body_len: u64,
    chunked: bool,
    bad_length: bool,
    upgrade_websocket: bool,
    ws_key: Option<String>,
    ws_version: Option<String>,
    ws_extensions: Option<String>,
    /// Forwarded here by a balancer (served here, never forwarded again).
    forwarded: bool,
}

/// Parses a complete head (`buf[..head_len]`); None when it is not HTTP.
fn parse_request(buf: &[u8], head_len: usize) -> Option<RequestInfo> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(req.parse(&buf[..head_len]), Ok(httparse::Status::Complete(_))) {
        return None;
    }
    let mut info = request_info(&req);
    info.head_len = head_len;
    info.path = req.path.unwrap_or("/").to_string();
    info.is_head = req.method == Some("HEAD");
    info.http10 = req.version == Some(0);
    Some(info)
}

fn request_info(req: &httparse::Request) -> RequestInfo {
    let mut info = RequestInfo { keep_alive: req.version != Some(0), ..RequestInfo::default() };
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "connection" => {
                let v = value.to_ascii_lowercase();
                if v.contains("close") {
                    info.keep_alive = false;
                } else if v.contains("keep-alive") {
                    info.keep_alive = true;
                }
            }
            "content-length" => match value.trim().parse() {
                Ok(n) => info.body_len = n,
                Err(_) => info.bad_length = true,
            },
            "transfer-encoding" => info.chunked = true,
            balance::MARKER => info.forwarded = true,
            "upgrade" => info.upgrade_websocket = value.to_ascii_lowercase().contains("websocket"),
            "sec-websocket-key" => info.ws_key = Some(value.trim().to_string()),
            "sec-websocket-version" => info.ws_version = Some(value.trim().to_string()),
            "sec-websocket-extensions" => {
                let joined = match info.ws_extensions.take() {
                    Some(prev) => format!("{prev}, {value}"),
                    None => value.into_owned(),
                };
                info.ws_extensions = Some(joined);
            }
            _ => {}
        }
    }
    info
}

/// A connection that asked for a WebSocket on a DDP path.
struct Upgrade {
    stream: TcpStream,
    /// The request head, as received, when this server balances (it passes it on); else empty.
    head: Vec<u8>,
    leftover: Vec<u8>,
    info: RequestInfo,
    framing: session::Framing,
}

/// Answers a WebSocket upgrade on a DDP path (or refuses it) and serves the session.
async fn upgrade(up: Upgrade, app: Arc<App>) -> io::Result<()> {
    let Upgrade { mut stream, leftover, info, framing, .. } = up;
    let refuse = |status: u16, extra: &str| {
        format!("HTTP/1.1 {status} {}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n", reason(status))
    };
    let version_ok = matches!(info.ws_version.as_deref(), Some("13") | Some("8"));
    let Some(key) = info.ws_key.as_deref().filter(|_| version_ok) else {
        stream.write_all(refuse(400, "Sec-WebSocket-Version: 13\r\n").as_bytes()).await?;
        return Ok(());
    };
    let Some(slot) = app.admit() else {
        stream.write_all(refuse(503, "").as_bytes()).await?;
        return Ok(());
    };
    let deflate = if app.config.compression {
        info.ws_extensions.as_deref().and_then(ddp::ws::server_accept_deflate)
    } else {
        None
    };
    let mut head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n",
        ddp::ws::accept_key(key)
    );
    if let Some((ext, _)) = &deflate {
        head.push_str(&format!("Sec-WebSocket-Extensions: {ext}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    drop(info);
    session::serve(stream, leftover, framing, deflate.is_some(), app, slot).await;
    Ok(())
}

/// Bytes `/bytes/N` is served from.
static FILLER: [u8; 16 * 1024] = [b'x'; 16 * 1024];

/// Serves requests on one connection until the client closes or asks to close; a WebSocket
/// request on a DDP path is handed back to the caller. Holds no large array across an await, so
/// the task stays small (it is every DDP session's task too).
async fn serve_connection(mut stream: TcpStream, shared: &Shared) -> io::Result<Option<Upgrade>> {
    let counters = &shared.counters;
    let request_timeout = shared.limits.request_timeout;
    let ws_echo = shared.app.config.ws_echo;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    loop {
        // Read until a whole head is buffered (pipelined requests may already be there), within
        // the request timeout.
        let deadline = tokio::time::Instant::now() + request_timeout;
        let head_len = loop {
            if let Some(at) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                break at + 4;
            }
            if buf.len() > HEAD_LIMIT {
                write_error(&mut stream, 431, request_timeout).await?;
                return Ok(None);
            }
            buf.reserve(4096);
            match tokio::time::timeout_at(deadline, stream.read_buf(&mut buf)).await {
                Ok(Ok(0)) => return Ok(None),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    counters.timed_out.fetch_add(1, Ordering::Relaxed);
                    if !buf.is_empty() {
                        write_error(&mut stream, 408, request_timeout).await?;
                    }
                    return Ok(None);
                }
            }
        };
        let Some(info) = parse_request(&buf, head_len) else {
            write_error(&mut stream, 400, request_timeout).await?;
            return Ok(None);
        };
        if info.bad_length {
            write_error(&mut stream, 400, request_timeout).await?;
            return Ok(None);
        }
        if info.chunked {
            write_error(&mut stream, 501, request_timeout).await?;
            return Ok(None);
        }
        if let Some(framing) = ddp_framing(&info.path, ws_echo) {
            counters.requests.fetch_add(1, Ordering::Relaxed);
            if info.upgrade_websocket {
                let leftover = buf[head_len..].to_vec();
                // Kept only for a balancer, which passes it on to a peer.
                let head = if shared.balancer.is_active() { buf[..head_len].to_vec() } else { Vec::new() };
                return Ok(Some(Upgrade { stream, head, leftover, info, framing }));
            }
            // sockjs-node answers a plain GET on a websocket route like this.
            let msg = "HTTP/1.1 400 Bad Request\r\nContent-Length: 34\r\nConnection: close\r\n\r\nCan \"Upgrade\" only to \"WebSocket\".";
            write_within(&mut stream, msg.as_bytes(), request_timeout).await?;
            return Ok(None);
        }
        let keep_alive = info.keep_alive;
        let mut body_len = info.body_len;
        let reply = if info.path == "/stats" {
            Reply {
                status: 200,
                body: Body::Text(shared.stats()),
                content_type: "application/json",
                delay: Duration::ZERO,
            }
        } else {
            route(&info.path)
        };
        buf.drain(..head_len);
        // Drop the request body.
        while body_len > 0 {
            if buf.is_empty() {
                buf.reserve(8192);
                if stream.read_buf(&mut buf).await? == 0 {
                    return Ok(None);
                }
            }
            let take = (buf.len() as u64).min(body_len) as usize;
            buf.drain(..take);
            body_len -= take as u64;
        }
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        let no_body = info.is_head || reply.status == 204 || reply.status == 304;
        out.clear();
        out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status)).as_bytes());
        if reply.status != 204 && reply.status != 304 {
            out.extend_from_slice(format!("Content-Length: {}\r\n", reply.body.len()).as_bytes());
        }
        out.extend_from_slice(format!("Content-Type: {}\r\n", reply.content_type).as_bytes());
        if !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if info.http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !no_body {
            match &reply.body {
                Body::Static(b) => out.extend_from_slice(b),
                Body::Text(s) => out.extend_from_slice(s.as_bytes()),
                Body::Repeat(n) => {
                    write_within(&mut stream, &out, request_timeout).await?;
                    out.clear();
                    let mut left = *n;
                    while left > 0 {
                        let take = left.min(FILLER.len() as u64) as usize;
                        write_within(&mut stream, &FILLER[..take], request_timeout).await?;
                        left -= take as u64;
                    }
                }
            }
        }
        if !out.is_empty() {
            write_within(&mut stream, &out, request_timeout).await?;
        }
        if !keep_alive {
            let _ = stream.shutdown().await;
            return Ok(None);
        }
    }
}

/// Writes all of `bytes`, each write making progress within `timeout` (a client that stops
/// reading is dropped, not waited for).
async fn write_within(stream: &mut TcpStream, bytes: &[u8], timeout: Duration) -> io::Result<()> {
    let mut at = 0;
    while at < bytes.len() {
        match tokio::time::timeout(timeout, stream.write(&bytes[at..])).await {
            Ok(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => at += n,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::ErrorKind::TimedOut.into()),
        }
    }
    Ok(())
}

async fn write_error(stream: &mut TcpStream, status: u16, timeout: Duration) -> io::Result<()> {
    let msg = format!("HTTP/1.1 {status} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", reason(status));
    write_within(stream, msg.as_bytes(), timeout).await?;
    let _ = stream.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn exchange(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn endpoints() {
        let server = Server::start(Config::default()).unwrap();
        // Each row: request path, expected status line, expected body.
        let rows = [
            ("/ok", "HTTP/1.1 200 OK", "OK".to_string()),
            ("/bytes/5", "HTTP/1.1 200 OK", "xxxxx".to_string()),
            ("/delay/20", "HTTP/1.1 200 OK", "OK".to_string()),
            ("/status/503", "HTTP/1.1 503 Service Unavailable", "503\n".to_string()),
            ("/nope", "HTTP/1.1 404 Not Found", "not found\n".to_string()),
        ];
        for (path, status, body) in rows {
            let resp = exchange(server.addr(), &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
            assert!(resp.starts_with(status), "{path}: {resp}");
            assert!(resp.ends_with(&format!("\r\n\r\n{body}")), "{path}: {resp}");
        }
        assert_eq!(server.requests(), 5);
        server.shutdown();
    }

    #[test]
    fn keep_alive_pipelining_and_head() {
        let server = Server::start(Config::default()).unwrap();
        let two = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nHEAD /bytes/100 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        let resp = exchange(server.addr(), two);
        assert_eq!(resp.matches("HTTP/1.1 200 OK").count(), 2, "{resp}");
        assert!(resp.contains("Content-Length: 100"), "{resp}");
        assert!(resp.ends_with("Connection: close\r\n\r\n"), "HEAD has no body: {resp}");
        assert_eq!(server.connections(), 1);
    }

    #[test]
    fn garbage_gets_400() {
        let server = Server::start(Config::default()).unwrap();
        let resp = exchange(server.addr(), "\x01\x02 nonsense\r\n\r\n");
        assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    }
}

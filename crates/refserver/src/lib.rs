//! bolide's reference target. For now: plain HTTP test endpoints, served by a small keep-alive
//! HTTP/1.1 server on a multi-threaded tokio runtime of its own. Its DDP side (the Meteor tasks app)
//! comes with the DDP protocol layer.
//!
//! Endpoints:
//! - `GET /ok`: 200 with the 2-byte body `OK`;
//! - `GET /bytes/N`: 200 with N bytes (at most 1 GiB);
//! - `GET /delay/MS`: 200 `OK` after MS milliseconds (at most 10 minutes);
//! - `GET /status/CODE`: that status (200-599) with a short body;
//! - `GET /`: a page listing these (the tasks page comes with the DDP server);
//! - any method works; HEAD answers headers only. Request bodies with Content-Length are read and
//!   dropped; chunked request bodies are refused with 501.
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
}

impl Default for Config {
    fn default() -> Self {
        Config { addr: SocketAddr::from(([127, 0, 0, 1], 0)), threads: 1 }
    }
}

/// Counters a test can read while the server runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered (complete responses written or being written).
    pub requests: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
}

/// A running server; stops on [`Server::shutdown`] or when dropped.
pub struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds (errors surface here, not later) and starts serving on a thread of its own.
    pub fn start(config: Config) -> io::Result<Server> {
        let listener = std::net::TcpListener::bind(config.addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads.max(1))
            .thread_name("refserver")
            .enable_all()
            .build()?;
        let counters = Arc::new(Counters::default());
        let (stop_tx, stop_rx) = watch::channel(false);
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new().name("refserver-main".into()).spawn(move || {
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => accept_loop(listener, c, stop_rx).await,
                    Err(e) => eprintln!("refserver: cannot listen: {e}"),
                }
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        })?;
        Ok(Server { addr, counters, stop: Some(stop_tx), thread: Some(thread) })
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

async fn accept_loop(listener: TcpListener, counters: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    counters.connections.fetch_add(1, Ordering::Relaxed);
                    let _ = stream.set_nodelay(true);
                    let c = Arc::clone(&counters);
                    tokio::spawn(async move {
                        let _ = serve_connection(stream, &c).await;
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

fn route(path: &str) -> Reply {
    let ok = |body| Reply { status: 200, body, delay: Duration::ZERO };
    let path = path.split('?').next().unwrap_or(path);
    let number = |prefix: &str| path.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
    if path == "/ok" {
        ok(Body::Static(b"OK"))
    } else if path == "/" {
        ok(Body::Static(INDEX.as_bytes()))
    } else if let Some(n) = number("/bytes/") {
        if n > MAX_BYTES {
            return Reply {
                status: 400,
                body: Body::Text(format!("at most {MAX_BYTES} bytes\n")),
                delay: Duration::ZERO,
            };
        }
        ok(Body::Repeat(n))
    } else if let Some(ms) = number("/delay/") {
        Reply { status: 200, body: Body::Static(b"OK"), delay: Duration::from_millis(ms.min(MAX_DELAY_MS)) }
    } else if let Some(code) = number("/status/").filter(|c| (200..600).contains(c)) {
        Reply { status: code as u16, body: Body::Text(format!("{code}\n")), delay: Duration::ZERO }
    } else {
        Reply { status: 404, body: Body::Static(b"not found\n"), delay: Duration::ZERO }
    }
}

const INDEX: &str = "<!doctype html><title>bolide reference server</title>\
<h1>bolide reference server</h1><ul>\
<li><a href=\"/ok\">/ok</a>: 200, 2-byte body\
<li>/bytes/N: N bytes<li>/delay/MS: answers after MS milliseconds<li>/status/CODE: that status</ul>\n";

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Serves requests on one connection until the client closes or asks to close.
async fn serve_connection(mut stream: TcpStream, counters: &Counters) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    loop {
        // Read until a whole head is buffered (pipelined requests may already be there).
        let head_len = loop {
            if let Some(at) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                break at + 4;
            }
            if buf.len() > HEAD_LIMIT {
                return write_error(&mut stream, 431).await;
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if !matches!(req.parse(&buf[..head_len]), Ok(httparse::Status::Complete(_))) {
            return write_error(&mut stream, 400).await;
        }
        let head = req.method == Some("HEAD");
        let http10 = req.version == Some(0);
        let mut keep_alive = !http10;
        let mut body_len: u64 = 0;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("connection") {
                let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                if v.contains("close") {
                    keep_alive = false;
                } else if v.contains("keep-alive") {
                    keep_alive = true;
                }
            } else if h.name.eq_ignore_ascii_case("content-length") {
                match std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok()) {
                    Some(n) => body_len = n,
                    None => return write_error(&mut stream, 400).await,
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return write_error(&mut stream, 501).await;
            }
        }
        let reply = route(req.path.unwrap_or("/"));
        buf.drain(..head_len);
        // Drop the request body.
        while body_len > 0 {
            if buf.is_empty() {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let take = (buf.len() as u64).min(body_len) as usize;
            buf.drain(..take);
            body_len -= take as u64;
        }
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        let no_body = head || reply.status == 204 || reply.status == 304;
        out.clear();
        out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status)).as_bytes());
        if reply.status != 204 && reply.status != 304 {
            out.extend_from_slice(format!("Content-Length: {}\r\n", reply.body.len()).as_bytes());
        }
        let ctype = if matches!(reply.body, Body::Static(b) if b == INDEX.as_bytes()) {
            "text/html"
        } else if matches!(reply.body, Body::Repeat(_)) {
            "application/octet-stream"
        } else {
            "text/plain"
        };
        out.extend_from_slice(format!("Content-Type: {ctype}\r\n").as_bytes());
        if !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !no_body {
            match &reply.body {
                Body::Static(b) => out.extend_from_slice(b),
                Body::Text(s) => out.extend_from_slice(s.as_bytes()),
                Body::Repeat(n) => {
                    stream.write_all(&out).await?;
                    out.clear();
                    let block = [b'x'; 16 * 1024];
                    let mut left = *n;
                    while left > 0 {
                        let take = left.min(block.len() as u64) as usize;
                        stream.write_all(&block[..take]).await?;
                        left -= take as u64;
                    }
                }
            }
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
        }
        if !keep_alive {
            let _ = stream.shutdown().await;
            return Ok(());
        }
    }
}

async fn write_error(stream: &mut TcpStream, status: u16) -> io::Result<()> {
    let msg = format!("HTTP/1.1 {status} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", reason(status));
    stream.write_all(msg.as_bytes()).await?;
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

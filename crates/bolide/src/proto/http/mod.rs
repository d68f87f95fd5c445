//! HTTP/1.1 over raw TCP (and rustls): targets, pre-built request bytes, connecting, and one
//! request/response exchange on a connection that the caller keeps for keep-alive.

pub mod expect;
pub mod h2;
pub mod parser;
pub mod tls;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::stats::ErrorClass;
use parser::{ParseError, Progress, Response, ResponseParser};

/// Largest response head accepted, in bytes (bodies are streamed and have no limit).
pub const HEAD_LIMIT_BYTES: usize = 64 * 1024;

/// One URL to load, resolved and with its request bytes built once.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as the user gave it (normalised by the URL parser).
    pub url: String,
    /// Host name for SNI and certificate checks.
    pub host: String,
    /// Resolved addresses; connections use the first and fall back to the others.
    pub addrs: Vec<SocketAddr>,
    /// `https://` or not.
    pub tls: bool,
    /// The whole request, head and body, sent as is for every request.
    pub request: Arc<[u8]>,
    /// False for HEAD, whose responses carry no body.
    pub expect_body: bool,
    /// The request as HTTP/2 sends it (`--http2`, `--h2c`); None for HTTP/1.1.
    pub h2: Option<Arc<h2::H2Request>>,
}

/// What the request head is made of, beyond the target's URL.
#[derive(Debug, Clone, Default)]
pub struct RequestSpec {
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub keep_alive: bool,
}

/// What an HTTP/1.1 request line and `Host` header say of `url`: its path with the query, and its
/// host with the port when the URL names one.
pub fn path_and_host(url: &url::Url) -> (String, String) {
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    (path, host)
}

/// Builds the request bytes for `url`: user headers replace the defaults of the same name.
pub fn build_request(url: &url::Url, spec: &RequestSpec) -> Vec<u8> {
    let (path, host) = path_and_host(url);
    let has = |name: &str| spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut head = format!("{} {path} HTTP/1.1\r\n", spec.method);
    if !has("host") {
        head.push_str(&format!("Host: {host}\r\n"));
    }
    if !has("user-agent") {
        head.push_str(concat!("User-Agent: bolide/", env!("CARGO_PKG_VERSION"), "\r\n"));
    }
    if !has("accept") {
        head.push_str("Accept: */*\r\n");
    }
    if !spec.keep_alive && !has("connection") {
        head.push_str("Connection: close\r\n");
    }
    for (name, value) in &spec.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body_method = !matches!(spec.method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS");
    if (!spec.body.is_empty() || body_method) && !has("content-length") {
        head.push_str(&format!("Content-Length: {}\r\n", spec.body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&spec.body);
    bytes
}

/// A failed exchange: its class for the counters and a description for the first-error report.
#[derive(Debug)]
pub struct Failure {
    pub class: ErrorClass,
    pub detail: String,
    /// Nothing of a response arrived: the connection was already dead when the request was sent
    /// (a kept-alive connection the server closed while idle), or an HTTP/2 GOAWAY refused it.
    /// Worth one retry on a new one.
    pub stale: bool,
    /// HTTP/2: the request never reached the connection (no stream was free, or the connection
    /// had ended): nothing of it was sent.
    pub unsent: bool,
    /// The server does not speak the protocol asked for (`--http2` answered in HTTP/1.1, or no
    /// ALPN h2): no request can succeed, and the run ends as one that could not start.
    pub wrong_protocol: bool,
}

impl Failure {
    pub fn new(class: ErrorClass, detail: impl Into<String>) -> Self {
        Failure { class, detail: detail.into(), stale: false, unsent: false, wrong_protocol: false }
    }

    pub(crate) fn wrong_protocol(mut self) -> Self {
        self.wrong_protocol = true;
        self
    }

    fn stale(mut self) -> Self {
        self.stale = true;
        self
    }

    fn unsent(mut self) -> Self {
        self.unsent = true;
        self
    }

    pub fn io(err: &io::Error, during: &str) -> Self {
        use io::ErrorKind::*;
        let class = match err.kind() {
            ConnectionRefused if during == "connect" => ErrorClass::Connect,
            ConnectionReset | ConnectionAborted | BrokenPipe => ErrorClass::Reset,
            UnexpectedEof => ErrorClass::Closed,
            TimedOut => ErrorClass::Timeout,
            _ if during == "connect" => ErrorClass::Connect,
            _ => ErrorClass::Other,
        };
        Failure::new(class, format!("{during}: {err}"))
    }
}

impl From<ParseError> for Failure {
    fn from(e: ParseError) -> Self {
        let class = if e == ParseError::ClosedEarly { ErrorClass::Closed } else { ErrorClass::Malformed };
        Failure::new(class, e.to_string())
    }
}

/// A plain or TLS byte stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// An open connection, the bytes it holds of a response not yet whole, and its parser.
pub struct Connection {
    stream: Stream,
    buf: BytesMut,
    parser: ResponseParser,
}

/// Timings of one exchange, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    /// TCP (and TLS) set-up; 0 on a reused keep-alive connection.
    pub connect_us: u64,
    /// From the request written to the first response byte.
    pub wait_us: u64,
}

/// Opens a TCP connection to the first address that answers, then TLS when `tls` is set.
pub async fn open_stream(
    host: &str,
    addrs: &[std::net::SocketAddr],
    tls: bool,
    connector: Option<&tls::Connector>,
) -> Result<Stream, Failure> {
    let mut last_err = None;
    let mut tcp = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let tcp = match (tcp, last_err) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(Failure::io(&e, "connect")),
        (None, None) => return Err(Failure::new(ErrorClass::Connect, "no address to connect to")),
    };
    let _ = tcp.set_nodelay(true);
    match (tls, connector) {
        (true, Some(connector)) => {
            let s = connector
                .connect(host, tcp)
                .await
                .map_err(|e| Failure::new(ErrorClass::Tls, format!("TLS handshake: {e}")))?;
            Ok(Stream::Tls(Box::new(s)))
        }
        (true, None) => Err(Failure::new(ErrorClass::Tls, "no TLS configuration")),
        (false, _) => Ok(Stream::Plain(tcp)),
    }
}

/// Opens a connection to `target` (TCP, then TLS when the URL is https).
pub async fn connect(target: &Target, tls: Option<&tls::Connector>) -> Result<Connection, Failure> {
    let stream = open_stream(&target.host, &target.addrs, target.tls, tls).await?;
    Ok(Connection { stream, buf: BytesMut::new(), parser: ResponseParser::new(HEAD_LIMIT_BYTES) })
}

impl tokio::io::AsyncRead for Stream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Stream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl Connection {
    /// Sends `target`'s request and reads its whole response.
    pub async fn exchange(&mut self, target: &Target, timings: &mut Timings) -> Result<Response, Failure> {
        self.parser.start(target.expect_body);
        if !self.buf.is_empty() {
            // Bytes nobody asked for arrived on an idle keep-alive connection.
            return Err(Failure::new(ErrorClass::Malformed, "unsolicited bytes before the request"));
        }
        send(&mut self.stream, target).await?;
        receive(&mut self.stream, &mut self.buf, &mut self.parser, Instant::now(), timings).await
    }
}

async fn send<S: AsyncWrite + Unpin>(stream: &mut S, target: &Target) -> Result<(), Failure> {
    stream.write_all(&target.request).await.map_err(|e| Failure::io(&e, "write").stale())?;
    stream.flush().await.map_err(|e| Failure::io(&e, "write").stale())
}

/// Reads the response through the thread's shared buffer; `held` keeps what the parser has not
/// used yet between reads, and is released once empty.
async fn receive<S: AsyncRead + Unpin>(
    stream: &mut S,
    held: &mut BytesMut,
    parser: &mut ResponseParser,
    written: Instant,
    timings: &mut Timings,
) -> Result<Response, Failure> {
    let mut first_byte = true;
    std::future::poll_fn(|cx| loop {
        let first = first_byte;
        let step = crate::proto::read::poll_read_with(&mut *stream, cx, |got| {
            if got.is_empty() {
                return match parser.eof() {
                    Ok(Some(response)) => Ok(Some(response)),
                    Ok(None) => Err(Failure::new(ErrorClass::Closed, "connection closed before the response").stale()),
                    Err(e) => Err(e.into()),
                };
            }
            if first_byte {
                timings.wait_us = micros(written.elapsed());
                first_byte = false;
            }
            take(parser, held, got)
        })
        .map(|read| {
            read.unwrap_or_else(|e| {
                let failure = Failure::io(&e, "read");
                Err(if first { failure.stale() } else { failure })
            })
        });
        match step {
            Poll::Ready(Ok(None)) => continue,
            Poll::Ready(Ok(Some(response))) => return Poll::Ready(Ok(response)),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}

/// Gives the parser the bytes just read (after those `held` from before): the response when it
/// ended; what it did not use stays in `held`.
fn take(parser: &mut ResponseParser, held: &mut BytesMut, got: &[u8]) -> Result<Option<Response>, Failure> {
    if held.is_empty() {
        let (consumed, done) = parse(parser, got)?;
        held.extend_from_slice(&got[consumed..]);
        return Ok(done);
    }
    held.extend_from_slice(got);
    let (consumed, done) = parse(parser, held)?;
    held.advance(consumed);
    if held.is_empty() {
        *held = BytesMut::new();
    }
    Ok(done)
}

/// One step of the parser over `bytes`: how many it used, and the response when it ended.
fn parse(parser: &mut ResponseParser, bytes: &[u8]) -> Result<(usize, Option<Response>), Failure> {
    Ok(match parser.advance(bytes)? {
        Progress::More { consumed } => (consumed, None),
        Progress::Done { consumed, response } => (consumed, Some(response)),
    })
}

/// Whole microseconds in `d`, saturating.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(method: &str, headers: &[(&str, &str)], body: &str, keep_alive: bool) -> RequestSpec {
        RequestSpec {
            method: method.into(),
            headers: headers.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            body: body.as_bytes().to_vec(),
            keep_alive,
        }
    }

    /// Responses that arrive in pieces (a head cut mid-line, a chunk-size line cut in two, a
    /// body over many reads) parse whole through the shared buffer, and a connection keeps no
    /// buffer of its own once each response ended.
    #[test]
    fn responses_in_pieces_leave_nothing_held() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let big = vec![b'x'; 150_000];
            let mut long = b"HTTP/1.1 200 OK\r\nContent-Length: 150000\r\n\r\n".to_vec();
            long.extend_from_slice(&big);
            // Each response as the pieces the server writes, a pause after each.
            let answers: Vec<Vec<Vec<u8>>> = vec![
                vec![b"HTTP/1.1 200 OK\r\nConte".to_vec(), b"nt-Length: 5\r\n\r\nhel".to_vec(), b"lo".to_vec()],
                vec![
                    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1".to_vec(),
                    b"0\r\n0123456789abcdef\r\n0\r".to_vec(),
                    b"\n\r\n".to_vec(),
                ],
                long.chunks(7_000).map(<[u8]>::to_vec).collect(),
            ];
            let server = tokio::spawn(async move {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut request = vec![0u8; 4096];
                for pieces in answers {
                    let _ = tokio::io::AsyncReadExt::read(&mut sock, &mut request).await.unwrap();
                    for piece in pieces {
                        sock.write_all(&piece).await.unwrap();
                        sock.flush().await.unwrap();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            });
            let url = url::Url::parse(&format!("http://{addr}/")).unwrap();
            let spec = RequestSpec { method: "GET".into(), keep_alive: true, ..Default::default() };
            let target = Target {
                url: url.to_string(),
                host: "127.0.0.1".into(),
                addrs: vec![addr],
                tls: false,
                request: build_request(&url, &spec).into(),
                expect_body: true,
                h2: None,
            };
            let mut conn = connect(&target, None).await.unwrap();
            let mut got = Vec::new();
            for _ in 0..3 {
                let mut timings = Timings::default();
                let r = conn.exchange(&target, &mut timings).await.unwrap();
                assert_eq!(conn.buf.capacity(), 0, "nothing held after {r:?}");
                got.push((r.status, r.body_bytes, r.keep_alive));
            }
            assert_eq!(got, [(200, 5, true), (201, 27, true), (200, 150_000, true)]);
            server.await.unwrap();
        });
    }

    #[test]
    fn request_heads() {
        // Each row: URL, request spec, expected bytes.
        let ua = concat!("User-Agent: bolide/", env!("CARGO_PKG_VERSION"), "\r\n");
        let rows = [
            (
                "http://127.0.0.1:8080/a?b=c",
                spec("GET", &[], "", true),
                format!("GET /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n{ua}Accept: */*\r\n\r\n"),
            ),
            (
                "http://localhost/",
                spec("GET", &[], "", false),
                format!("GET / HTTP/1.1\r\nHost: localhost\r\n{ua}Accept: */*\r\nConnection: close\r\n\r\n"),
            ),
            (
                // A user header replaces the default of the same name, in any case.
                "http://[::1]:9/x",
                spec("POST", &[("host", "example"), ("X-A", "1")], "hi", true),
                format!(
                    "POST /x HTTP/1.1\r\n{ua}Accept: */*\r\nhost: example\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi"
                ),
            ),
        ];
        for (url, spec, want) in rows {
            let got = build_request(&url::Url::parse(url).unwrap(), &spec);
            assert_eq!(String::from_utf8(got).unwrap(), want, "{url}");
        }
    }
}

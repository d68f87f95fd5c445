//! HTTP/2 (RFC 9113) over the same TCP and TLS streams as HTTP/1.1, by the `h2` crate (hyperium's
//! frame layer: SETTINGS, HPACK, flow control, GOAWAY and RST_STREAM): `--http2` (ALPN `h2` over
//! TLS, prior knowledge in clear) and `--h2c`. One connection carries `--streams N` requests at
//! once; the engine runs a task per stream over one shared `SendRequest`.
//!
//! Bytes counted per response are the DATA frames' payload (the header block is HPACK-compressed
//! inside the crate and not seen here).

use std::cell::Cell;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::parser::Response;
use super::{micros, open_stream, tls, Failure, RequestSpec, Target, Timings};
use crate::stats::ErrorClass;

/// What every request of a target sends, built once.
#[derive(Debug)]
pub struct H2Request {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl H2Request {
    /// The body's length in bytes.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    /// The request's head, as a stream sends it.
    pub fn head(&self) -> http::Request<()> {
        let mut request = http::Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Headers that belong to HTTP/1.1's connection and have no place in HTTP/2 (RFC 9113, 8.2.2);
/// `host` becomes the `:authority` of the URL.
const CONNECTION_HEADERS: [&str; 6] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"];

/// The request of `url` as HTTP/2 sends it: user headers replace the defaults of the same name.
pub fn build(url: &url::Url, spec: &RequestSpec) -> Result<H2Request, String> {
    let method =
        http::Method::from_bytes(spec.method.as_bytes()).map_err(|e| format!("method {:?}: {e}", spec.method))?;
    let uri: http::Uri = url.as_str().parse().map_err(|e| format!("URL {url}: {e}"))?;
    let mut headers = http::HeaderMap::new();
    let has = |name: &str| spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("user-agent") {
        headers.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("bolide/", env!("CARGO_PKG_VERSION"))),
        );
    }
    if !has("accept") {
        headers.insert(http::header::ACCEPT, http::HeaderValue::from_static("*/*"));
    }
    for (name, value) in &spec.headers {
        let lower = name.to_ascii_lowercase();
        if CONNECTION_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        let n = http::HeaderName::from_bytes(lower.as_bytes()).map_err(|e| format!("header {name:?}: {e}"))?;
        // Bytes past ASCII are allowed (as HTTP/1.1 writes them); control characters are not.
        let v = http::HeaderValue::from_bytes(value.as_bytes()).map_err(|e| format!("header {name:?}: {e}"))?;
        headers.append(n, v);
    }
    let body_method = !matches!(spec.method.as_str(), "GET" | "HEAD" | "DELETE" | "OPTIONS");
    if (!spec.body.is_empty() || body_method) && !has("content-length") {
        headers.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(spec.body.len()));
    }
    Ok(H2Request { method, uri, headers, body: Bytes::copy_from_slice(&spec.body) })
}

/// An open HTTP/2 connection: its request handle (cheap to clone: one per stream task) and what
/// was seen of the peer.
#[derive(Clone)]
pub struct Sender {
    send: ::h2::client::SendRequest<Bytes>,
    peer: Rc<Peer>,
}

impl Sender {
    /// Whether `other` is a handle of this same connection.
    pub fn same(&self, other: &Sender) -> bool {
        Rc::ptr_eq(&self.peer, &other.peer)
    }
}

/// What the first bytes from the peer said.
#[derive(Default)]
struct Peer {
    /// Bytes read so far (up to 5) and whether they began an HTTP/1.x status line.
    first: Cell<[u8; 5]>,
    seen: Cell<usize>,
}

impl Peer {
    fn http1(&self) -> bool {
        self.seen.get() >= 5 && &self.first.get() == b"HTTP/"
    }
}

/// The connection's stream, keeping the first five bytes the peer sent: a server that answers
/// HTTP/2's preface with an HTTP/1.1 status line is then named as such.
struct Sniff<S> {
    inner: S,
    peer: Rc<Peer>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniff<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.inner).poll_read(cx, buf);
        let seen = me.peer.seen.get();
        if seen < 5 {
            let new = &buf.filled()[before..];
            let mut first = me.peer.first.get();
            let take = new.len().min(5 - seen);
            first[seen..seen + take].copy_from_slice(&new[..take]);
            me.peer.first.set(first);
            me.peer.seen.set(seen + take);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniff<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Opens a connection to `target` and runs the HTTP/2 handshake ([`handshake`]).
pub async fn connect(target: &Target, tls: Option<&tls::Connector>) -> Result<Sender, Failure> {
    handshake(open_stream(&target.host, &target.addrs, target.tls, tls).await?).await
}

/// Runs the HTTP/2 handshake on an open connection (over TLS, one where the server agreed to
/// ALPN `h2`); the connection's own task (the frames in and out) is spawned on the current
/// `LocalSet`. Server push is refused (`SETTINGS_ENABLE_PUSH = 0`: a PUSH_PROMISE is then a
/// protocol error that ends the connection), and a response's header block is held to
/// HTTP/1.1's head limit.
pub async fn handshake(stream: super::Stream) -> Result<Sender, Failure> {
    if let super::Stream::Tls(s) = &stream {
        if s.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(Failure::new(
                ErrorClass::Tls,
                "the server did not agree to HTTP/2 (ALPN h2); drop --http2 to load it over HTTP/1.1",
            )
            .wrong_protocol());
        }
    }
    let peer = Rc::new(Peer::default());
    let (send, connection) = ::h2::client::Builder::new()
        // Larger windows than the protocol's 64 KiB: big bodies are not held back by updates.
        .initial_window_size(1 << 20)
        .initial_connection_window_size(16 << 20)
        .enable_push(false)
        .max_header_list_size(super::HEAD_LIMIT_BYTES as u32)
        .handshake::<_, Bytes>(Sniff { inner: stream, peer: Rc::clone(&peer) })
        .await
        .map_err(|e| failure(&e, "handshake", &peer))?;
    tokio::task::spawn_local(async move {
        // Its errors reach the streams, which count them.
        let _ = connection.await;
    });
    Ok(Sender { send, peer })
}

/// Sends `req` on a new stream of `conn` and waits for the response's head; its body is the
/// caller's to read ([`data`]). `on_sent` runs once the request is handed to the connection (a
/// stream was free and its HEADERS are queued): before that, nothing of it reached the server.
pub async fn request(
    conn: &Sender,
    req: &H2Request,
    on_sent: &dyn Fn(),
) -> Result<http::Response<::h2::RecvStream>, Failure> {
    let fail = |e: &::h2::Error, during: &str| failure(e, during, &conn.peer);
    // Waits for a stream the server allows (SETTINGS_MAX_CONCURRENT_STREAMS).
    let mut send = conn.send.clone().ready().await.map_err(|e| fail(&e, "waiting for a stream").unsent())?;
    let end = req.body.is_empty();
    let (response, mut stream) = send.send_request(req.head(), end).map_err(|e| fail(&e, "sending").unsent())?;
    on_sent();
    if !end {
        send_body(&mut stream, req.body.clone(), &conn.peer).await?;
    }
    response.await.map_err(|e| fail(&e, "reading the response"))
}

/// The next DATA of a response's body (None at its end), its room handed back to the server
/// (flow control: it may send more).
pub async fn data(body: &mut ::h2::RecvStream) -> Option<Result<Bytes, Failure>> {
    let chunk = std::future::poll_fn(|cx| body.poll_data(cx)).await?;
    Some(match chunk {
        Ok(chunk) => {
            let _ = body.flow_control().release_capacity(chunk.len());
            Ok(chunk)
        }
        Err(e) => Err(failure(&e, "reading the body", &Peer::default())),
    })
}

/// Sends one request on `conn` and reads its whole response; `on_sent` runs once the request is
/// handed to the connection (a stream was free and its HEADERS are queued): before that, nothing
/// of it reached the server.
pub async fn exchange(
    conn: &Sender,
    req: &H2Request,
    expect_body: bool,
    timings: &mut Timings,
    on_sent: &dyn Fn(),
) -> Result<Response, Failure> {
    let written = Cell::new(None);
    let sent = || {
        written.set(Some(Instant::now()));
        on_sent();
    };
    let response = request(conn, req, &sent).await?;
    timings.wait_us = written.get().map_or(0, |t| micros(t.elapsed()));
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut body_bytes = 0u64;
    if expect_body {
        while let Some(chunk) = data(&mut body).await {
            body_bytes += chunk?.len() as u64;
        }
    }
    Ok(Response { status, keep_alive: true, head_bytes: 0, body_bytes })
}

/// Sends a body within the stream's flow-control window, as the window opens.
async fn send_body(stream: &mut ::h2::SendStream<Bytes>, mut body: Bytes, peer: &Peer) -> Result<(), Failure> {
    while !body.is_empty() {
        stream.reserve_capacity(body.len());
        let granted = std::future::poll_fn(|cx| stream.poll_capacity(cx))
            .await
            .ok_or_else(|| Failure::new(ErrorClass::Reset, "the stream closed before its body was sent"))?
            .map_err(|e| failure(&e, "sending the body", peer))?;
        let chunk = body.split_to(granted.min(body.len()));
        stream.send_data(chunk, body.is_empty()).map_err(|e| failure(&e, "sending the body", peer))?;
    }
    Ok(())
}

/// An `h2` error as the counters class it. A GOAWAY or RST_STREAM the server sent gets a class of
/// its own (a request refused by a graceful GOAWAY was not processed: `stale`, worth one retry on a
/// new connection, RFC 9113 §6.8); a GOAWAY bolide's own frame layer sent because the server broke the
/// protocol (an oversized frame, DATA on stream 0, bad SETTINGS, a PUSH_PROMISE after push was
/// refused) is `malformed`, and a server that answered the preface in HTTP/1.1 is named as such.
fn failure(e: &::h2::Error, during: &str, peer: &Peer) -> Failure {
    if peer.http1() {
        return Failure::new(
            ErrorClass::Malformed,
            format!(
                "{during}: the server answered in HTTP/1.1, not HTTP/2; drop --http2/--h2c to load it over HTTP/1.1"
            ),
        )
        .wrong_protocol();
    }
    let reason = || e.reason().map(|r| format!("{r:?}")).unwrap_or_default();
    if e.is_go_away() && e.is_remote() {
        let mut f = Failure::new(ErrorClass::GoAway, format!("{during}: the server sent GOAWAY ({})", reason()));
        // A graceful GOAWAY (NO_ERROR) lets the streams at or below its last id finish: one that
        // fails with it was above, not processed. After an error code, any stream may have been.
        f.stale = e.reason() == Some(::h2::Reason::NO_ERROR);
        return f;
    }
    if e.is_go_away() || (e.is_reset() && !e.is_remote()) {
        return Failure::new(
            ErrorClass::Malformed,
            format!(
                "{during}: the server broke HTTP/2 ({}); bolide ended the {}",
                reason(),
                if e.is_go_away() { "connection" } else { "stream" }
            ),
        );
    }
    if e.is_reset() {
        return Failure::new(ErrorClass::StreamReset, format!("{during}: the server reset the stream ({})", reason()));
    }
    if let Some(io) = e.get_io() {
        return Failure::io(io, during);
    }
    if e.is_io() {
        return Failure::new(ErrorClass::Closed, format!("{during}: {e}"));
    }
    Failure::new(ErrorClass::Malformed, format!("{during}: HTTP/2 protocol error: {e}"))
}

/// Whether a failure ends the connection (a new one is needed) rather than one stream.
pub fn ends_connection(f: &Failure) -> bool {
    !matches!(f.class, ErrorClass::StreamReset)
}

/// The request of a target, shared by its connections.
pub fn shared(url: &url::Url, spec: &RequestSpec) -> Result<Arc<H2Request>, String> {
    build(url, spec).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_headers_are_left_out_and_user_headers_win() {
        let spec = RequestSpec {
            method: "POST".into(),
            headers: vec![
                ("Host".into(), "x".into()),
                ("Connection".into(), "close".into()),
                ("Accept".into(), "text/plain".into()),
            ],
            body: b"abc".to_vec(),
            keep_alive: true,
        };
        let r = build(&url::Url::parse("http://127.0.0.1:8080/p?q=1").unwrap(), &spec).unwrap();
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(r.uri.to_string(), "http://127.0.0.1:8080/p?q=1");
        assert!(r.headers.get("host").is_none() && r.headers.get("connection").is_none());
        assert_eq!(r.headers.get("accept").unwrap(), "text/plain");
        assert_eq!(r.headers.get("content-length").unwrap(), "3");
        assert_eq!(&r.body[..], b"abc");
        // Bytes past ASCII go as they are (an event id sent back as Last-Event-ID); control
        // characters do not.
        let spec = |v: &str| RequestSpec {
            method: "GET".into(),
            headers: vec![("Last-Event-ID".into(), v.into())],
            body: Vec::new(),
            keep_alive: true,
        };
        let url = url::Url::parse("http://127.0.0.1/").unwrap();
        let r = build(&url, &spec("évé-7")).unwrap();
        assert_eq!(r.headers.get("last-event-id").unwrap().as_bytes(), "évé-7".as_bytes());
        assert!(build(&url, &spec("a\u{1}b")).unwrap_err().starts_with("header \"Last-Event-ID\""));
    }
}

//! Server-Sent Events as a browser's `EventSource` reads them (the WHATWG HTML standard's
//! "event stream" format), over one HTTP/1.1 request (the request written, the response's head
//! read, its body unframed: chunked, a length, or until the close) or one HTTP/2 stream (its DATA
//! frames), the body cut into events.
//!
//! The event parser is pure ([`Parser::feed`]): lines end with CRLF, LF or CR (a CR at the end of
//! one read and an LF at the start of the next are one line end); `data` lines join with LF;
//! `event`, `id` (refused when it holds NUL) and `retry` (digits only) set the next event; a line
//! starting with `:` is a comment; a blank line dispatches the event when it has data. A leading
//! byte order mark is dropped.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::proto::http::{h2, Stream};
use crate::proto::link::Failure;

/// One event, as the parser dispatches it.
#[derive(Debug, PartialEq)]
pub struct Event<'a> {
    /// The `event` field, or `message`.
    pub name: &'a str,
    /// The `data` lines joined with LF.
    pub data: &'a str,
    /// The last event id the stream set (as EventSource keeps it, across events).
    pub id: Option<&'a str>,
}

/// The longest line, and the most data one event may carry: a server that sends more is broken
/// (or hostile), and the stream fails rather than holding it.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// The event stream's parser: the bytes of a line not yet ended and the event being built.
#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    data: String,
    name: String,
    /// The `id` field's value, committed to `last_id` at the end of its event (the standard's
    /// last event ID buffer).
    id_buffer: Option<String>,
    /// The last event id: sent back as `Last-Event-ID` on a reconnection.
    pub last_id: Option<String>,
    /// A line or an event's data went past [`MAX_EVENT_BYTES`]: nothing more is read.
    pub too_long: bool,
    /// The reconnection time the server set (`retry`), in ms.
    pub retry_ms: Option<u64>,
    /// A CR ended the last line: an LF first in the next bytes is part of its end.
    after_cr: bool,
    started: bool,
    /// Comment lines read (`:` first).
    pub comments: u64,
}

impl Parser {
    /// A parser for the stream asked again after this one: the last event id (its events
    /// without an id of their own keep it) and the server's retry.
    pub fn resume(&self) -> Parser {
        Parser {
            id_buffer: self.last_id.clone(),
            last_id: self.last_id.clone(),
            retry_ms: self.retry_ms,
            ..Parser::default()
        }
    }

    /// Reads `bytes`, dispatching each whole event to `on`.
    pub fn feed(&mut self, mut bytes: &[u8], on: &mut dyn FnMut(&Event<'_>)) {
        if bytes.is_empty() || self.too_long {
            return;
        }
        if !self.started {
            self.line.extend_from_slice(bytes);
            if self.line.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.line) {
                return;
            }
            self.started = true;
            let held = std::mem::take(&mut self.line);
            let rest = held.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&held);
            self.feed(rest, on);
            return;
        }
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let line = &bytes[..end];
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    None => self.after_cr = true,
                    _ => {}
                }
            }
            if self.line.is_empty() {
                self.line_done(line, on);
            } else {
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line);
                self.line_done(&whole, on);
                whole.clear();
                self.line = whole;
            }
            bytes = &bytes[next..];
            if self.too_long {
                return;
            }
        }
        if self.line.len() + bytes.len() > MAX_EVENT_BYTES {
            self.too_long = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn line_done(&mut self, line: &[u8], on: &mut dyn FnMut(&Event<'_>)) {
        if line.is_empty() {
            if self.last_id != self.id_buffer {
                self.last_id.clone_from(&self.id_buffer);
            }
            if !self.data.is_empty() {
                self.data.pop();
                let name = if self.name.is_empty() { "message" } else { &self.name };
                on(&Event { name, data: &self.data, id: self.last_id.as_deref() });
            }
            self.data.clear();
            self.name.clear();
            return;
        }
        if line[0] == b':' {
            self.comments += 1;
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" if self.data.len() + value.len() >= MAX_EVENT_BYTES => {
                self.too_long = true;
                self.data = String::new();
            }
            b"data" => {
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"event" => {
                self.name.clear();
                self.name.push_str(&value);
            }
            b"id" if !value.contains('\0') => self.id_buffer = Some(value.into_owned()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                // A wait past an hour is held to an hour (a number past u64's too).
                self.retry_ms = Some(value.parse::<u64>().unwrap_or(u64::MAX).min(3_600_000));
            }
            _ => {}
        }
    }
}

/// How a response's body is framed.
enum Framing {
    Length(u64),
    Chunked { state: Chunk, size: u64, line: Vec<u8> },
    Close,
}

#[derive(Clone, Copy, PartialEq)]
enum Chunk {
    Size,
    Data,
    DataEnd,
    Trailers,
}

/// The body of a response, unframed as it arrives.
pub struct Body {
    framing: Framing,
    done: bool,
}

impl Body {
    /// Hands the body's bytes in `input` to `out`; whether the body ended.
    fn unframe(&mut self, mut input: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<bool, String> {
        match &mut self.framing {
            Framing::Close => out(input),
            Framing::Length(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                out(&input[..n]);
                *left -= n as u64;
                self.done = *left == 0;
            }
            Framing::Chunked { state, size, line } => {
                while !input.is_empty() && !self.done {
                    match state {
                        Chunk::Size | Chunk::Trailers | Chunk::DataEnd => {
                            let Some(end) = memchr::memchr(b'\n', input) else {
                                line.extend_from_slice(input);
                                if line.len() > 4096 {
                                    return Err("a chunk's size line is over 4 KB".into());
                                }
                                return Ok(false);
                            };
                            // A line whole in this read is looked at where it is (the usual
                            // case: one per event); a line cut between reads is put together.
                            let text: &[u8] = if line.is_empty() {
                                &input[..end]
                            } else {
                                line.extend_from_slice(&input[..end]);
                                line
                            };
                            input = &input[end + 1..];
                            let text = text.strip_suffix(b"\r").unwrap_or(text);
                            match *state {
                                Chunk::DataEnd if text.is_empty() => *state = Chunk::Size,
                                Chunk::DataEnd => return Err("a chunk's data did not end with CRLF".into()),
                                Chunk::Trailers if text.is_empty() => self.done = true,
                                Chunk::Trailers => {}
                                _ => {
                                    *size = chunk_size(text)?;
                                    *state = if *size == 0 { Chunk::Trailers } else { Chunk::Data };
                                }
                            }
                            line.clear();
                        }
                        Chunk::Data => {
                            let n = (*size).min(input.len() as u64) as usize;
                            out(&input[..n]);
                            input = &input[n..];
                            *size -= n as u64;
                            if *size == 0 {
                                *state = Chunk::DataEnd;
                            }
                        }
                    }
                }
            }
        }
        Ok(self.done)
    }
}

/// A chunk's size line (without its line end): its hex digits, before any extension.
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line.split(|b| *b == b';').next().unwrap_or_default().trim_ascii();
    let bad = || format!("bad chunk size {:?}", crate::redact::printable(&String::from_utf8_lossy(digits)));
    if digits.is_empty() || digits.len() > 16 {
        return Err(bad());
    }
    digits.iter().try_fold(0u64, |n, b| Ok((n << 4) | u64::from((*b as char).to_digit(16).ok_or_else(bad)?)))
}

/// A request as a step makes it: written as HTTP/1.1 or sent on an HTTP/2 stream.
#[derive(Clone)]
pub struct Ask {
    pub method: String,
    pub url: url::Url,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Over HTTP/2 (ALPN `h2` for https://, prior knowledge for http://).
    pub http2: bool,
}

impl Ask {
    /// Whether `name` is among the request's own headers.
    fn has(&self, name: &str) -> bool {
        self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
    }

    /// What a stream's request carries unless it says otherwise: `Accept: text/event-stream`
    /// and `Cache-Control: no-cache`, as EventSource sends them.
    fn defaults(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        [("Accept", "text/event-stream"), ("Cache-Control", "no-cache")].into_iter().filter(|(k, _)| !self.has(k))
    }

    /// The request's HTTP/1.1 bytes: the method, the path (with its query) and host, the headers
    /// and the body.
    pub fn h1(&self) -> Vec<u8> {
        let (path, host) = crate::proto::http::path_and_host(&self.url);
        let mut out = format!("{} {path} HTTP/1.1\r\nHost: {host}\r\n", self.method);
        for (k, v) in self.defaults() {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        for (k, v) in &self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        if !self.body.is_empty() || self.method != "GET" {
            out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// The request as its protocol sends it, made before any connection is taken for it.
    pub fn prepare(&self) -> Result<Prepared, Failure> {
        Ok(match self.http2 {
            true => Prepared::H2(Box::new(self.h2()?)),
            false => Prepared::H1(self.h1()),
        })
    }

    /// The request as an HTTP/2 stream sends it (the URL's authority as `:authority`, the
    /// headers HTTP/2 has no place for left out).
    pub fn h2(&self) -> Result<h2::H2Request, Failure> {
        let mut headers: Vec<(String, String)> = self.defaults().map(|(k, v)| (k.into(), v.into())).collect();
        headers.extend(self.headers.iter().cloned());
        let spec = crate::proto::http::RequestSpec {
            method: self.method.clone(),
            headers,
            body: self.body.clone(),
            keep_alive: true,
        };
        h2::build(&self.url, &spec).map_err(|e| Failure::new("protocol", format!("a request HTTP/2 cannot carry: {e}")))
    }
}

/// A request ready to go: HTTP/1.1's bytes, or HTTP/2's head and body.
pub enum Prepared {
    H1(Vec<u8>),
    H2(Box<h2::H2Request>),
}

impl Prepared {
    /// The bytes it puts on the wire that bolide counts: HTTP/1.1's all, HTTP/2's body (the
    /// header block is compressed inside the frame layer).
    pub fn bytes(&self) -> usize {
        match self {
            Prepared::H1(b) => b.len(),
            Prepared::H2(r) => r.body_len(),
        }
    }
}

/// A response's head as a stream needs it.
pub struct Head {
    pub status: u16,
    pub content_type: String,
    /// The connection may carry another request once the body ends.
    pub keep_alive: bool,
}

/// One response being read: where its body comes from, and the event parser.
pub struct Response {
    src: Source,
    pub head: Head,
    pub parser: Parser,
    /// When the last byte arrived.
    pub last_data: Option<Instant>,
}

/// Where a response's body comes from.
enum Source {
    /// HTTP/1.1: the connection, the body's framing and the bytes the head left over.
    H1 { conn: Stream, body: Body, pending: Vec<u8> },
    /// HTTP/2: the stream's DATA (its connection is the session's), and whether it ended.
    H2 { body: ::h2::RecvStream, done: bool },
}

/// What one read gave.
pub enum Read {
    /// More may come.
    More,
    /// The body ended as its framing says: the connection may be reused when `keep_alive`.
    Ended,
    /// The server closed the connection.
    Closed,
}

/// Largest response head accepted.
const HEAD_LIMIT: usize = 64 * 1024;

/// Writes `req` on `conn` and reads the response's head (within `timeout`).
pub async fn send(mut conn: Stream, req: &[u8], timeout: Duration) -> Result<Response, Failure> {
    let exchange = async {
        conn.write_all(req).await.map_err(|e| Failure::new("closed", format!("writing the request: {e}")))?;
        let mut buf = Vec::new();
        loop {
            match parse_head(&buf, req)? {
                Some(Ok((head, framing, len))) => {
                    let pending = buf.split_off(len);
                    return Ok((head, framing, pending));
                }
                // An interim answer (100 Continue, 103 Early Hints): the real one follows.
                Some(Err(interim)) => {
                    buf.drain(..interim);
                    continue;
                }
                None => {}
            }
            let n = crate::proto::read::read_appending(&mut conn, &mut buf)
                .await
                .map_err(|e| Failure::new("closed", format!("reading the response: {e}")))?;
            if n == 0 {
                return Err(Failure::new("closed", "the server closed the connection before answering"));
            }
        }
    };
    let (head, framing, pending) = match tokio::time::timeout(timeout, exchange).await {
        Ok(r) => r?,
        Err(_) => return Err(Failure::new("timeout", format!("no response within {timeout:?}"))),
    };
    let done = matches!(framing, Framing::Length(0));
    let src = Source::H1 { conn, body: Body { framing, done }, pending };
    Ok(Response { src, head, parser: Parser::default(), last_data: None })
}

/// Sends `req` on a new stream of `conn` and waits for the response's head (within `timeout`).
/// The failure is HTTP/2's own, so that the caller sees one that sent nothing (worth one retry
/// on a new connection).
pub async fn send_h2(
    conn: &h2::Sender,
    req: &h2::H2Request,
    timeout: Duration,
) -> Result<Response, crate::proto::http::Failure> {
    let response = match tokio::time::timeout(timeout, h2::request(conn, req, &|| {})).await {
        Ok(r) => r?,
        Err(_) => {
            let f = format!("no response within {timeout:?}");
            return Err(crate::proto::http::Failure::new(crate::stats::ErrorClass::Timeout, f));
        }
    };
    let content_type = response.headers().get(http::header::CONTENT_TYPE);
    let head = Head {
        status: response.status().as_u16(),
        content_type: content_type
            .map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase())
            .unwrap_or_default(),
        keep_alive: true,
    };
    let body = response.into_body();
    let done = body.is_end_stream();
    Ok(Response { src: Source::H2 { body, done }, head, parser: Parser::default(), last_data: None })
}

/// A response's head in `buf`: its head, framing and length; an interim answer's length; or
/// nothing yet. A function of its own so that the header array (2 KB) is no part of a waiting
/// future.
#[allow(clippy::type_complexity)]
fn parse_head(buf: &[u8], req: &[u8]) -> Result<Option<Result<(Head, Framing, usize), usize>>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) if matches!(resp.code, Some(100..=199)) && resp.code != Some(101) => {
            Ok(Some(Err(len)))
        }
        Ok(httparse::Status::Complete(len)) => {
            let head = head_of(&resp)?;
            // No body: a HEAD's answer, a 204 or a 304.
            let bodiless = req.starts_with(b"HEAD ") || matches!(head.status, 204 | 304);
            let framing = if bodiless { Framing::Length(0) } else { framing_of(&resp)? };
            Ok(Some(Ok((head, framing, len))))
        }
        Ok(httparse::Status::Partial) if buf.len() > HEAD_LIMIT => {
            Err(Failure::new("protocol", "the response's head is over 64 KB"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(Failure::new("protocol", format!("not an HTTP response: {e}"))),
    }
}

fn head_of(resp: &httparse::Response<'_, '_>) -> Result<Head, Failure> {
    let status = resp.code.unwrap_or(0);
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
    };
    let closes = header("connection").is_some_and(|c| c.contains("close"));
    Ok(Head {
        status,
        content_type: header("content-type").unwrap_or_default(),
        keep_alive: resp.version == Some(1) && !closes,
    })
}

fn framing_of(resp: &httparse::Response<'_, '_>) -> Result<Framing, Failure> {
    let mut framing = Framing::Close;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if String::from_utf8_lossy(h.value).to_ascii_lowercase().contains("chunked") {
                return Ok(Framing::Chunked { state: Chunk::Size, size: 0, line: Vec::new() });
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok());
            framing = Framing::Length(n.ok_or_else(|| Failure::new("protocol", "a Content-Length that is no number"))?);
        }
    }
    Ok(framing)
}

impl Response {
    /// Whether this response is an event stream (a 200 of `text/event-stream`).
    pub fn is_stream(&self) -> bool {
        self.head.status == 200 && self.head.content_type.starts_with("text/event-stream")
    }

    /// Reads once (what the head left over first), handing each event to `on` with its arrival
    /// time and the bytes read to `bytes`.
    pub async fn read(&mut self, on: &mut dyn FnMut(&Event<'_>), bytes: &mut u64) -> Result<Read, Failure> {
        use crate::stats::ErrorClass::{Closed, GoAway, Reset, StreamReset};
        if self.parser.too_long {
            return Err(too_long());
        }
        let Response { src, parser, head, .. } = self;
        let got = match src {
            Source::H1 { body, .. } if body.done => return Ok(Read::Ended),
            Source::H1 { conn, body, pending } if pending.is_empty() => std::future::poll_fn(|cx| {
                crate::proto::read::poll_read_with(conn, cx, |got| {
                    if got.is_empty() {
                        return Ok(None);
                    }
                    *bytes += got.len() as u64;
                    body.unframe(got, &mut |b| parser.feed(b, on)).map(Some)
                })
            })
            .await
            .map_err(|e| Failure::new("closed", format!("reading the stream: {e}")))?,
            Source::H1 { body, pending, .. } => {
                let pending = std::mem::take(pending);
                *bytes += pending.len() as u64;
                body.unframe(&pending, &mut |b| parser.feed(b, on)).map(Some)
            }
            Source::H2 { done: true, .. } => return Ok(Read::Ended),
            Source::H2 { body, done } => match h2::data(body).await {
                None => {
                    *done = true;
                    Ok(Some(true))
                }
                Some(Ok(chunk)) => {
                    *bytes += chunk.len() as u64;
                    parser.feed(&chunk, on);
                    Ok(Some(false))
                }
                // The server closed the connection, sent GOAWAY or reset the stream: the stream
                // ended before its end, as a close does over HTTP/1.1 (asked again, or `closed`).
                Some(Err(f)) if matches!(f.class, Closed | Reset | GoAway | StreamReset) => Ok(None),
                Some(Err(f)) => return Err(Failure::new(f.class.name(), f.detail)),
            },
        };
        self.last_data = Some(Instant::now());
        if parser.too_long {
            return Err(too_long());
        }
        match got {
            Ok(None) => match src {
                Source::H1 { body, .. } if matches!(body.framing, Framing::Close) => {
                    body.done = true;
                    head.keep_alive = false;
                    Ok(Read::Ended)
                }
                _ => Ok(Read::Closed),
            },
            Ok(Some(true)) => Ok(Read::Ended),
            Ok(Some(false)) => Ok(Read::More),
            Err(e) => Err(Failure::new("protocol", e)),
        }
    }

    /// Whether the body has been read to its end (nothing of it left on the connection).
    pub fn ended(&self) -> bool {
        match &self.src {
            Source::H1 { body, pending, .. } => body.done && pending.is_empty(),
            Source::H2 { done, .. } => *done,
        }
    }

    /// The connection, free for another request: an HTTP/1.1 response read to its end on one
    /// that stays open (an HTTP/2 stream's connection is the session's, always free).
    pub fn into_idle(self) -> Option<Stream> {
        match self.src {
            Source::H1 { conn, .. } if self.head.keep_alive && self.ended() => Some(conn),
            _ => None,
        }
    }

    /// Reads what is left of the body (its events handed to `on`) until it ends, within
    /// `timeout`: whether it did, so that the connection can carry another request.
    pub async fn finish(&mut self, on: &mut dyn FnMut(&Event<'_>), bytes: &mut u64, timeout: Duration) -> bool {
        let reading = async {
            loop {
                match self.read(on, bytes).await {
                    Ok(Read::More) => {}
                    Ok(Read::Ended) => return true,
                    _ => return false,
                }
            }
        };
        tokio::time::timeout(timeout, reading).await.unwrap_or(false)
    }

    /// The body read to its end as text (an error's explanation), at most `limit` bytes of it
    /// kept, within `timeout`.
    pub async fn text(&mut self, limit: usize, timeout: Duration) -> String {
        let mut raw = Vec::new();
        let read = async {
            loop {
                let mut take = |b: &[u8]| {
                    let room = limit.saturating_sub(raw.len());
                    raw.extend_from_slice(&b[..b.len().min(room)]);
                };
                let done = match &mut self.src {
                    Source::H1 { conn, body, pending } if pending.is_empty() => {
                        let r = std::future::poll_fn(|cx| {
                            crate::proto::read::poll_read_with(conn, cx, |got| match got.is_empty() {
                                true => Ok(true),
                                false => body.unframe(got, &mut take),
                            })
                        })
                        .await;
                        !matches!(r, Ok(Ok(false)))
                    }
                    Source::H1 { body, pending, .. } => {
                        let pending = std::mem::take(pending);
                        !matches!(body.unframe(&pending, &mut take), Ok(false))
                    }
                    Source::H2 { body, done } => match h2::data(body).await {
                        Some(Ok(chunk)) => {
                            take(&chunk);
                            false
                        }
                        end => {
                            *done = end.is_none();
                            true
                        }
                    },
                };
                if done || raw.len() >= limit {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, read).await;
        String::from_utf8_lossy(&raw).into_owned()
    }
}

fn too_long() -> Failure {
    Failure::new("protocol", format!("a line or an event's data over {} MiB", MAX_EVENT_BYTES >> 20))
}

/// What a server's `chunks` (one read each) give the parser, without I/O (crates/fuzz drives it):
/// every event as (name, data, id), and the comments.
pub fn feed(chunks: &[&[u8]]) -> (Vec<(String, String, Option<String>)>, u64) {
    let mut p = Parser::default();
    let mut out = Vec::new();
    for c in chunks {
        p.feed(c, &mut |e| out.push((e.name.to_string(), e.data.to_string(), e.id.map(String::from))));
    }
    (out, p.comments)
}

/// What a chunked body cut into `reads` unframes to, and whether it ended (or the error).
pub fn unchunk(reads: &[&[u8]]) -> Result<(Vec<u8>, bool), String> {
    let mut b = Body { framing: Framing::Chunked { state: Chunk::Size, size: 0, line: Vec::new() }, done: false };
    let mut out = Vec::new();
    let mut done = false;
    for r in reads {
        done = b.unframe(r, &mut |x| out.extend_from_slice(x))?;
    }
    Ok((out, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, data: &str, id: Option<&str>) -> (String, String, Option<String>) {
        (name.into(), data.into(), id.map(String::from))
    }

    #[test]
    fn events_as_the_standard_reads_them() {
        let text = b"\xEF\xBB\xBF: hello\r\nevent: tick\r\nid: 7\r\nretry: 1500\r\ndata: a\r\ndata: b\r\n\r\n\
            data:no space\n\ndata\n\nid\n: only a comment\n\nevent: empty\n\nretry: x1\ndata: last\r\r";
        let (events, comments) = feed(&[text]);
        assert_eq!(
            events,
            vec![ev("tick", "a\nb", Some("7")), ev("message", "no space", Some("7")), ev("message", "", Some("7")),]
                .into_iter()
                .chain([ev("message", "last", Some(""))])
                .collect::<Vec<_>>()
        );
        assert_eq!(comments, 2);
        let mut p = Parser::default();
        p.feed(b"retry: 1500\n", &mut |_| {});
        p.feed(b"retry: 2x\n", &mut |_| {});
        assert_eq!(p.retry_ms, Some(1500));
    }

    #[test]
    fn a_stream_cut_anywhere_reads_the_same() {
        let text: &[u8] = b"\xEF\xBB\xBFevent: a\r\ndata: 1\r\n\r\n: c\r\ndata: 2\r\ndata: 3\n\rid: 9\rdata: x\r\n\r\n";
        let whole = feed(&[text]);
        assert_eq!(whole.0.len(), 3);
        for cut in 0..text.len() {
            for cut2 in cut..text.len() {
                assert_eq!(feed(&[&text[..cut], &text[cut..cut2], &text[cut2..]]), whole, "cut at {cut}, {cut2}");
            }
        }
    }

    #[test]
    fn an_id_counts_once_its_event_ends_and_a_huge_line_stops_the_stream() {
        let mut p = Parser::default();
        p.feed(b"id: 4\ndata: a\n\nid: 5\ndata: b\n", &mut |_| {});
        // Event 5 was cut before its blank line: a reconnection asks from 4.
        assert_eq!(p.last_id.as_deref(), Some("4"));
        p.feed(b"\n", &mut |_| {});
        assert_eq!(p.last_id.as_deref(), Some("5"));
        let next = p.resume();
        assert_eq!((next.last_id.as_deref(), next.comments), (Some("5"), 0));
        let mut p = Parser::default();
        p.feed(b"retry: 99999999999999999999999\n", &mut |_| {});
        assert_eq!(p.retry_ms, Some(3_600_000));
        let big = vec![b'x'; MAX_EVENT_BYTES / 4];
        let mut n = 0;
        p.feed(b"data: ", &mut |_| n += 1);
        for _ in 0..5 {
            p.feed(&big, &mut |_| n += 1);
        }
        p.feed(b"\n\n", &mut |_| n += 1);
        assert!(p.too_long && n == 0 && p.line.capacity() < MAX_EVENT_BYTES);
    }

    #[test]
    fn chunked_bodies_unframe_across_reads() {
        let body: &[u8] = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for cut in 0..body.len() {
            assert_eq!(unchunk(&[&body[..cut], &body[cut..]]).unwrap(), (b"hello world".to_vec(), true), "cut {cut}");
        }
        assert!(unchunk(&[b"zz\r\n"]).is_err());
        assert!(unchunk(&[b"+5\r\nhello\r\n"]).is_err());
        assert!(unchunk(&[b"2\r\nabX\r\n"]).is_err());
        assert_eq!(unchunk(&[b"3\r\nab"]).unwrap(), (b"ab".to_vec(), false));
        // Sizes as HTTP/1.1 writes them: hex of either case, an extension, spaces a server
        // leaves; nothing past 64 bits.
        assert_eq!(unchunk(&[b"A \r\n0123456789\r\n0\r\n\r\n"]).unwrap(), (b"0123456789".to_vec(), true));
        assert_eq!(chunk_size(b"1f;name=\"v\""), Ok(31));
        assert_eq!(chunk_size(b"FFFFFFFFFFFFFFFF"), Ok(u64::MAX));
        for bad in [&b""[..], b";x", b"1 2", b"10000000000000000", b"\xff", b"0x1"] {
            let e = chunk_size(bad).unwrap_err();
            assert!(e.starts_with("bad chunk size"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn requests_carry_the_stream_headers() {
        let url = url::Url::parse("http://127.0.0.1:8000/v1/chat?x=1").unwrap();
        let ask = Ask {
            method: "POST".into(),
            url,
            headers: vec![("X-A".into(), "b".into()), ("cache-control".into(), "max-age=0".into())],
            body: b"{}".to_vec(),
            http2: false,
        };
        let r = String::from_utf8(ask.h1()).unwrap();
        assert!(r.starts_with("POST /v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: text/event-stream\r\nX-A"));
        assert!(r.ends_with("X-A: b\r\ncache-control: max-age=0\r\nContent-Length: 2\r\n\r\n{}"));
        // HTTP/2: the same defaults and headers, lower-cased, the authority from the URL.
        let h = ask.h2().unwrap().head();
        assert_eq!(h.uri().to_string(), "http://127.0.0.1:8000/v1/chat?x=1");
        let got: Vec<(&str, &str)> = h.headers().iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
        for want in
            [("accept", "text/event-stream"), ("x-a", "b"), ("cache-control", "max-age=0"), ("content-length", "2")]
        {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
        assert!(!got.iter().any(|(k, v)| *k == "cache-control" && *v == "no-cache"), "{got:?}");
    }
}

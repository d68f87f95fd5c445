//! Incremental HTTP/1.1 response parser.
//!
//! The connection owns the receive buffer and hands the parser whatever bytes it has not consumed
//! yet; the parser answers how many it consumed and whether a response ended. The head is parsed
//! only once it is complete (`\r\n\r\n` seen, check before parse), bodies are counted and dropped as
//! they arrive, never buffered, so memory per connection stays at the head limit at most.
//!
//! Framing follows RFC 9112 section 6.3: no body for HEAD, 1xx, 204 and 304; chunked when
//! `Transfer-Encoding: chunked`; `Content-Length` otherwise; else the body ends when the server
//! closes the connection.

use memchr::memmem;

/// Longest chunk-size line (size, extensions, CRLF) accepted.
const MAX_CHUNK_LINE: usize = 1024;
/// Most headers in one response head.
const MAX_HEADERS: usize = 64;

/// What went wrong with a response; every variant is a "malformed response" to the recorder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The head grew past the limit before it was complete.
    HeadTooLarge { limit_bytes: usize },
    /// The status line or a header is not HTTP.
    BadHead(String),
    /// A Content-Length that is not a number, or several that disagree.
    BadContentLength,
    /// A chunk-size line that is not hex, or too long.
    BadChunk,
    /// The connection closed before the response was complete.
    ClosedEarly,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::HeadTooLarge { limit_bytes } => {
                write!(f, "response head larger than {limit_bytes} bytes")
            }
            ParseError::BadHead(why) => write!(f, "malformed response head: {why}"),
            ParseError::BadContentLength => write!(f, "malformed Content-Length"),
            ParseError::BadChunk => write!(f, "malformed chunked body"),
            ParseError::ClosedEarly => write!(f, "connection closed mid-response"),
        }
    }
}

/// A complete response, as the recorder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The final status code (1xx interim responses are skipped).
    pub status: u16,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
    /// Bytes of the final head, status line to blank line.
    pub head_bytes: u64,
    /// Bytes of the body as sent on the wire (chunk framing included).
    pub body_bytes: u64,
}

/// What one call to [`ResponseParser::advance`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// `consumed` bytes were used; the response needs more.
    More { consumed: usize },
    /// The response ended after `consumed` bytes; the rest belongs to the next one.
    Done { consumed: usize, response: Response },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Waiting for a chunk-size line.
    Size,
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer lines after the last chunk, until an empty line.
    Trailer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Looking for the end of the head; bytes already searched.
    Head {
        scanned: usize,
    },
    Body(Body),
}

/// Parser for one response at a time on one connection; call [`ResponseParser::start`] per request.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    head_limit: usize,
    expect_body: bool,
    status: u16,
    keep_alive: bool,
    head_bytes: u64,
    body_bytes: u64,
}

impl ResponseParser {
    /// A parser that refuses heads larger than `head_limit` bytes.
    pub fn new(head_limit: usize) -> Self {
        ResponseParser {
            state: State::Head { scanned: 0 },
            head_limit,
            expect_body: true,
            status: 0,
            keep_alive: true,
            head_bytes: 0,
            body_bytes: 0,
        }
    }

    /// Get ready for the response to a new request; `expect_body` is false for HEAD.
    pub fn start(&mut self, expect_body: bool) {
        self.state = State::Head { scanned: 0 };
        self.expect_body = expect_body;
        self.status = 0;
        self.keep_alive = true;
        self.head_bytes = 0;
        self.body_bytes = 0;
    }

    /// Whether any byte of the current response has been seen (an idle keep-alive connection that
    /// the server closes is not an error; one closed mid-response is).
    pub fn in_progress(&self) -> bool {
        !matches!(self.state, State::Head { scanned: 0 })
    }

    /// Feed the bytes not consumed so far (the same unconsumed bytes again if `More` consumed none).
    pub fn advance(&mut self, buf: &[u8]) -> Result<Progress, ParseError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Head { scanned } => {
                    let rest = &buf[pos..];
                    // Resume the search three bytes back so a terminator split across feeds is found.
                    let from = scanned.saturating_sub(3);
                    let Some(at) = memmem::find(&rest[from..], b"\r\n\r\n") else {
                        if rest.len() > self.head_limit {
                            return Err(ParseError::HeadTooLarge { limit_bytes: self.head_limit });
                        }
                        // A stray byte that can never start "HTTP/" means garbage: fail early. Empty
                        // lines before the status line are skipped, as the head parser skips them.
                        let start = rest.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(rest.len());
                        let line = &rest[start..];
                        if !line.is_empty() && !b"HTTP/"[..line.len().min(5)].eq(&line[..line.len().min(5)]) {
                            return Err(ParseError::BadHead(describe_garbage(rest)));
                        }
                        self.state = State::Head { scanned: rest.len() };
                        return Ok(Progress::More { consumed: pos });
                    };
                    let head_len = from + at + 4;
                    if head_len > self.head_limit {
                        return Err(ParseError::HeadTooLarge { limit_bytes: self.head_limit });
                    }
                    let interim = self.parse_head(&rest[..head_len])?;
                    pos += head_len;
                    if interim {
                        self.state = State::Head { scanned: 0 };
                        continue;
                    }
                    if let Some(done) = self.finish_if_empty(pos) {
                        return Ok(done);
                    }
                }
                State::Body(Body::Length(left)) => {
                    let take = left.min((buf.len() - pos) as u64);
                    pos += take as usize;
                    self.body_bytes += take;
                    if take == left {
                        return Ok(self.done(pos));
                    }
                    self.state = State::Body(Body::Length(left - take));
                    return Ok(Progress::More { consumed: pos });
                }
                State::Body(Body::UntilClose) => {
                    self.body_bytes += (buf.len() - pos) as u64;
                    return Ok(Progress::More { consumed: buf.len() });
                }
                State::Body(Body::Chunked(chunk)) => match self.advance_chunked(chunk, &buf[pos..])? {
                    (used, true) => {
                        pos += used;
                        return Ok(self.done(pos));
                    }
                    (used, false) => {
                        pos += used;
                        return Ok(Progress::More { consumed: pos });
                    }
                },
            }
        }
    }

    /// The connection reached end of file: completes a body that ends with the connection, or
    /// reports a response cut short. `Ok(None)` when no response had started.
    pub fn eof(&mut self) -> Result<Option<Response>, ParseError> {
        match self.state {
            State::Body(Body::UntilClose) => {
                self.keep_alive = false;
                let response = self.response();
                self.state = State::Head { scanned: 0 };
                Ok(Some(response))
            }
            State::Head { scanned: 0 } => Ok(None),
            _ => Err(ParseError::ClosedEarly),
        }
    }

    /// Parses a complete head; returns true for an interim (1xx) response to skip.
    fn parse_head(&mut self, head: &[u8]) -> Result<bool, ParseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut headers);
        match parsed.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err(ParseError::BadHead("incomplete head".into())),
            Err(e) => return Err(ParseError::BadHead(e.to_string())),
        }
        let status = parsed.code.unwrap_or(0);
        let version = parsed.version.unwrap_or(1);
        if (100..200).contains(&status) && status != 101 {
            return Ok(true);
        }
        let mut keep_alive = version >= 1;
        let mut length: Option<u64> = None;
        let mut chunked = false;
        for h in parsed.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(ParseError::BadContentLength)?;
                if length.is_some_and(|l| l != v) {
                    return Err(ParseError::BadContentLength);
                }
                length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        self.status = status;
        self.keep_alive = keep_alive;
        self.head_bytes = head.len() as u64;
        let no_body = !self.expect_body || status == 204 || status == 304 || status == 101;
        self.state = State::Body(if no_body {
            Body::Length(0)
        } else if chunked {
            Body::Chunked(Chunk::Size)
        } else if let Some(n) = length {
            Body::Length(n)
        } else {
            self.keep_alive = false;
            Body::UntilClose
        });
        Ok(false)
    }

    fn finish_if_empty(&mut self, pos: usize) -> Option<Progress> {
        (self.state == State::Body(Body::Length(0))).then(|| self.done(pos))
    }

    /// Steps through chunk framing; returns (bytes used, response complete).
    fn advance_chunked(&mut self, mut chunk: Chunk, buf: &[u8]) -> Result<(usize, bool), ParseError> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match chunk {
                Chunk::Size => {
                    let Some(line_len) = line_end(rest, MAX_CHUNK_LINE)? else {
                        break;
                    };
                    let size = parse_chunk_size(&rest[..line_len - 2])?;
                    pos += line_len;
                    self.body_bytes += line_len as u64;
                    chunk = if size == 0 { Chunk::Trailer } else { Chunk::Data(size) };
                }
                Chunk::Data(left) => {
                    let take = left.min(rest.len() as u64);
                    pos += take as usize;
                    self.body_bytes += take;
                    if take < left {
                        chunk = Chunk::Data(left - take);
                        break;
                    }
                    chunk = Chunk::DataEnd;
                }
                Chunk::DataEnd => {
                    if rest.len() < 2 {
                        break;
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ParseError::BadChunk);
                    }
                    pos += 2;
                    self.body_bytes += 2;
                    chunk = Chunk::Size;
                }
                Chunk::Trailer => {
                    let Some(line_len) = line_end(rest, MAX_CHUNK_LINE)? else {
                        break;
                    };
                    pos += line_len;
                    self.body_bytes += line_len as u64;
                    if line_len == 2 {
                        return Ok((pos, true));
                    }
                }
            }
        }
        self.state = State::Body(Body::Chunked(chunk));
        Ok((pos, false))
    }

    fn response(&self) -> Response {
        Response {
            status: self.status,
            keep_alive: self.keep_alive,
            head_bytes: self.head_bytes,
            body_bytes: self.body_bytes,
        }
    }

    fn done(&mut self, consumed: usize) -> Progress {
        let response = self.response();
        self.state = State::Head { scanned: 0 };
        Progress::Done { consumed, response }
    }
}

/// Length of the line at the start of `buf` including its CRLF, `None` if not complete yet.
fn line_end(buf: &[u8], limit: usize) -> Result<Option<usize>, ParseError> {
    match memchr::memchr(b'\n', buf) {
        Some(i) if i > 0 && buf[i - 1] == b'\r' && i < limit => Ok(Some(i + 1)),
        Some(_) => Err(ParseError::BadChunk),
        None if buf.len() >= limit => Err(ParseError::BadChunk),
        None => Ok(None),
    }
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, ParseError> {
    let end = memchr::memchr(b';', line).unwrap_or(line.len());
    let digits = line[..end].trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(ParseError::BadChunk);
    }
    let mut size: u64 = 0;
    for &b in digits {
        let d = (b as char).to_digit(16).ok_or(ParseError::BadChunk)?;
        size = size * 16 + u64::from(d);
    }
    Ok(size)
}

fn last_token(value: &[u8]) -> &[u8] {
    value.rsplit(|&b| b == b',').next().unwrap_or(value).trim_ascii()
}

fn describe_garbage(bytes: &[u8]) -> String {
    let shown: String =
        bytes.iter().take(16).map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' }).collect();
    format!("expected \"HTTP/\", got {shown:?}")
}

/// Whether `raw` begins with a whole response (interim 1xx ones skipped): a client that asked for
/// `Connection: close` stops reading there, not waiting on a server that keeps the connection open
/// anyway. A body that runs until the close is never whole before it.
pub fn is_whole(raw: &[u8]) -> bool {
    let mut p = ResponseParser::new(64 * 1024);
    p.start(true);
    let mut at = 0;
    loop {
        match p.advance(&raw[at..]) {
            Ok(Progress::Done { .. }) => return true,
            Ok(Progress::More { consumed }) if consumed > 0 => at += consumed,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 8192;

    /// Feeds `input` split at every possible point (and byte by byte), the way a connection would:
    /// unconsumed bytes stay at the front of the buffer. Returns responses and trailing leftovers.
    fn feed_in_pieces(input: &[u8], pieces: &[usize], expect_body: bool) -> Result<Vec<Response>, ParseError> {
        let mut p = ResponseParser::new(LIMIT);
        p.start(expect_body);
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        let mut offset = 0;
        let mut cuts = pieces.to_vec();
        cuts.push(input.len());
        for cut in cuts {
            buf.extend_from_slice(&input[offset..cut]);
            offset = cut;
            loop {
                match p.advance(&buf)? {
                    Progress::More { consumed } => {
                        buf.drain(..consumed);
                        break;
                    }
                    Progress::Done { consumed, response } => {
                        buf.drain(..consumed);
                        out.push(response);
                        p.start(expect_body);
                    }
                }
            }
        }
        if let Some(r) = p.eof()? {
            out.push(r);
        }
        Ok(out)
    }

    fn every_split(input: &[u8], expect_body: bool) -> Vec<Response> {
        let whole = feed_in_pieces(input, &[], expect_body).expect("whole input parses");
        for cut in 0..=input.len() {
            let split = feed_in_pieces(input, &[cut], expect_body).expect("split input parses");
            assert_eq!(split, whole, "split at {cut}");
        }
        let cuts: Vec<usize> = (1..input.len()).collect();
        assert_eq!(feed_in_pieces(input, &cuts, expect_body).unwrap(), whole, "byte by byte");
        whole
    }

    fn resp(status: u16, keep_alive: bool, head: usize, body: usize) -> Response {
        Response { status, keep_alive, head_bytes: head as u64, body_bytes: body as u64 }
    }

    #[test]
    fn content_length_at_every_split() {
        // nginx's answer to GET / in the benchmark configuration.
        let r = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nOK";
        let head = r.len() - 2;
        assert_eq!(every_split(r, true), vec![resp(200, true, head, 2)]);
    }

    #[test]
    fn two_pipelined_responses_at_every_split() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let two = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let both = [&one[..], &two[..]].concat();
        let got = every_split(&both, true);
        assert_eq!(got, vec![resp(200, true, one.len() - 5, 5), resp(404, true, two.len(), 0)]);
    }

    #[test]
    fn chunked_with_extensions_and_trailers_at_every_split() {
        // Chunk sizes in both cases, an extension, and a trailer header.
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n\r\n";
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".len();
        let got = every_split(r, true);
        assert_eq!(got, vec![resp(200, true, head, r.len() - head)]);
    }

    #[test]
    fn body_until_close_at_every_split() {
        // No length and no chunking: the body is everything until the server closes.
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this is body";
        let head = r.len() - 19;
        assert_eq!(every_split(r, true), vec![resp(200, false, head, 19)]);
    }

    #[test]
    fn interim_100_continue_is_skipped() {
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        let head = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n".len();
        assert_eq!(every_split(r, true), vec![resp(201, true, head, 2)]);
    }

    #[test]
    fn head_request_has_no_body_even_with_content_length() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(every_split(r, false), vec![resp(200, true, r.len(), 0)]);
    }

    #[test]
    fn no_body_for_204_and_304() {
        for status in ["204 No Content", "304 Not Modified"] {
            let r = format!("HTTP/1.1 {status}\r\nContent-Length: 10\r\n\r\n");
            let got = every_split(r.as_bytes(), true);
            assert_eq!(got.len(), 1, "{status}");
            assert_eq!(got[0].body_bytes, 0, "{status}");
        }
    }

    #[test]
    fn connection_close_and_http10_keep_alive() {
        // Each row: response head, expected keep_alive.
        let rows: &[(&[u8], bool)] = &[
            (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false),
            (b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Upgrade\r\nContent-Length: 0\r\n\r\n", true),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
            (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true),
        ];
        for (input, keep) in rows {
            let got = every_split(input, true);
            assert_eq!(got[0].keep_alive, *keep, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn malformed_inputs_are_errors() {
        // Each row: input, expected error. None of these may panic at any split.
        let rows: &[(&[u8], ParseError)] = &[
            (b"garbage\r\n\r\n", ParseError::BadHead(String::new())),
            (b"\x00\x01\x02", ParseError::BadHead(String::new())),
            (b"HTTP/1.1 abc OK\r\n\r\n", ParseError::BadHead(String::new())),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", ParseError::BadContentLength),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", ParseError::BadContentLength),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ParseError::BadChunk),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX", ParseError::BadChunk),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", ParseError::ClosedEarly),
            (b"HTTP/1.1 200 OK\r\nContent-", ParseError::ClosedEarly),
        ];
        for (input, want) in rows {
            for cut in 0..=input.len() {
                let err = feed_in_pieces(input, &[cut], true).expect_err("must fail");
                let same = std::mem::discriminant(&err) == std::mem::discriminant(want);
                assert!(same, "{:?} at {cut}: got {err:?}", String::from_utf8_lossy(input));
            }
        }
    }

    #[test]
    fn head_larger_than_limit_is_refused_before_it_completes() {
        let mut p = ResponseParser::new(64);
        p.start(true);
        let big = format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n", "a".repeat(100));
        assert_eq!(p.advance(big.as_bytes()), Err(ParseError::HeadTooLarge { limit_bytes: 64 }));
    }

    #[test]
    fn large_body_is_counted_not_buffered() {
        let mut p = ResponseParser::new(LIMIT);
        p.start(true);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
        assert_eq!(p.advance(head), Ok(Progress::More { consumed: head.len() }));
        let block = [b'x'; 4096];
        let mut total = 0;
        while total < 1_000_000 - 4096 {
            assert_eq!(p.advance(&block), Ok(Progress::More { consumed: 4096 }));
            total += 4096;
        }
        match p.advance(&block).unwrap() {
            Progress::Done { consumed, response } => {
                assert_eq!(consumed, 1_000_000 - total);
                assert_eq!(response.body_bytes, 1_000_000);
            }
            other => panic!("expected done, got {other:?}"),
        }
    }

    #[test]
    fn idle_close_is_not_an_error() {
        let mut p = ResponseParser::new(LIMIT);
        p.start(true);
        assert!(!p.in_progress());
        assert_eq!(p.eof(), Ok(None));
    }

    #[test]
    fn whole_answers_are_told_from_partial_ones() {
        assert!(is_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        assert!(!is_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok"));
        assert!(is_whole(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"));
        assert!(is_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"));
        assert!(!is_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"));
        assert!(!is_whole(b"HTTP/1.1 200 OK\r\n\r\nuntil the close"));
        assert!(!is_whole(b"HTTP/1.1 200 OK\r\nContent"));
        assert!(!is_whole(b"garbage"));
    }
}

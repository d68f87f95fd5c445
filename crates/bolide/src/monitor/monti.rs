//! `--monti [ADDR]`: bolide as a Monti APM engine. The Monti agent in a Meteor app (and Kadira's
//! before it) sends what it measures to the engine URL in `MONTI_OPTIONS_ENDPOINT`; pointed here
//! for a run, it needs no change to the app. bolide speaks the engine's side as the agent's
//! client library (`monti-apm-core`) uses it:
//!
//! - `/ping` (the app id and secret in `kadira-app-id`/`kadira-app-secret`): 200 with the features
//!   bolide accepts (`accept-features: json_line_traces`; no WebSocket jobs), 401 when bolide was
//!   given the app's id and secret and they differ;
//! - `GET /simplentp/sync`: bolide's clock in milliseconds, so that the agent's times are bolide's;
//! - `POST /` (a JSON payload every payload interval): the system, publication, method and HTTP
//!   route metrics since the agent's last post, kept as series on the run's seconds;
//! - `POST /traces` (JSON lines): counted, not kept; `/jobs`: answered empty.
//!
//! What is kept becomes an endpoint of the result document's `scrape` (named `monti`, series
//! `monti_*`), so that the summary, the report, `compare` and thresholds read it as they read a
//! scraped endpoint: counters grow by each post's counts, gauges take each post's values, and the
//! DDSketch histograms the agent sends (method, publication and route response times, event-loop
//! lag) become histograms with the sketch's bins as buckets.
//!
//! Bounded: 64 connections at once (an idle one closed after 15 s), a request head within 5 s and a body within 30 s, bodies up
//! to 16 MiB, series up to `--scrape-limit`; anything else is refused and counted. Plain threads
//! named `bolide-monti`, off the load threads.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::scrape::{dechunk_prefix, Kind, ScrapeResult, Scraper};

use crate::problem::Problem;

/// Where the endpoint listens when `--monti` names no address.
pub const DEFAULT_ADDR: &str = "127.0.0.1:11011";
/// The endpoint's name in the result document and in thresholds (`monti.pub["NAME"]...`).
pub const NAME: &str = "monti";
/// The largest request body read (the agent splits traces at 5 MiB).
const MAX_BODY: usize = 16 << 20;
/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 64;
/// A request head must arrive within this; its body within BODY_DEADLINE.
const HEAD_DEADLINE: Duration = Duration::from_secs(5);
const BODY_DEADLINE: Duration = Duration::from_secs(30);
/// An idle kept-alive connection is closed after this.
const IDLE: Duration = Duration::from_secs(15);
/// The longest wait after the load for the agent's post that covers its end.
const MAX_END_WAIT: Duration = Duration::from_secs(30);
/// Label values (publication, method and route names) are cut to this many characters.
const MAX_LABEL: usize = 200;
const THREAD_NAME: &str = "bolide-monti";

/// The app id and secret the agent must send, when bolide knows them (its environment's
/// `MONTI_APP_ID`/`MONTI_APP_SECRET`, or Kadira's names): the app's own, so that bolide answers
/// as the engine would.
#[derive(Clone, PartialEq)]
pub struct Credentials {
    pub id: String,
    secret: String,
}

impl std::fmt::Debug for Credentials {
    // The secret is never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials {{ id: {:?}, secret: <hidden> }}", self.id)
    }
}

impl Credentials {
    pub fn new(id: &str, secret: &str) -> Credentials {
        Credentials { id: id.trim().to_string(), secret: secret.trim().to_string() }
    }

    /// From the environment, when both are set.
    pub fn from_env() -> Option<Credentials> {
        let var = |names: [&str; 2]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
        Some(Credentials::new(
            &var(["MONTI_APP_ID", "KADIRA_APP_ID"])?,
            &var(["MONTI_APP_SECRET", "KADIRA_APP_SECRET"])?,
        ))
    }

    /// What a spawned app's agent gets when the environment names no app: any id and secret
    /// would do, the agent only connects with both.
    pub fn for_spawn() -> Credentials {
        Credentials::new("bolide", &format!("bolide-{:x}", std::process::id() as u64 * 2654435761 % (1 << 32)))
    }

    /// The environment a spawned app needs for its agent to send here.
    pub fn spawn_env(&self, addr: SocketAddr, interval: Duration) -> Vec<(String, String)> {
        let mut env = vec![("MONTI_OPTIONS_ENDPOINT".to_string(), format!("http://{addr}"))];
        if std::env::var_os("MONTI_APP_ID").is_none() {
            env.push(("MONTI_APP_ID".into(), self.id.clone()));
            env.push(("MONTI_APP_SECRET".into(), self.secret.clone()));
        }
        // A post each interval (the agent's default is 20 s), so that the run's seconds have it.
        if std::env::var_os("MONTI_OPTIONS_PAYLOAD_TIMEOUT").is_none() {
            env.push(("MONTI_OPTIONS_PAYLOAD_TIMEOUT".into(), interval.as_millis().max(1000).to_string()));
        }
        env
    }
}

/// Parses `--monti`'s address: loopback unless it says otherwise (then with a warning).
pub fn parse_addr(text: Option<&str>) -> Result<SocketAddr, Problem> {
    let text = text.filter(|t| !t.is_empty()).unwrap_or(DEFAULT_ADDR);
    text.parse::<SocketAddr>().or_else(|_| format!("127.0.0.1:{text}").parse::<SocketAddr>()).map_err(|_| {
        Problem::from(format!("--monti {text:?}: not HOST:PORT with an IP address (127.0.0.1:11011) or a port"))
    })
}

/// What came in, as the series are built from it.
struct State {
    scraper: Scraper,
    /// Counters' totals and histograms' bins (upper bound -> count) since the load began.
    counters: BTreeMap<Key, f64>,
    histograms: BTreeMap<Key, BTreeMap<u64, f64>>,
    /// The series kept and those left out (see `Sink`).
    known: std::collections::BTreeSet<Key>,
    dropped: std::collections::BTreeSet<Key>,
    limit: usize,
    /// Whether the load has begun (posts before are dropped: they tell of the time before).
    begun: Option<Instant>,
    /// When the load ended, once it has.
    ended: Option<Instant>,
    posts: u64,
    last_post: Option<Instant>,
    gaps: Vec<f64>,
    refused: u64,
    last_refusal: Option<String>,
}

type Key = (String, BTreeMap<String, String>);

struct Shared {
    state: Mutex<State>,
    posted: Condvar,
    credentials: Option<Credentials>,
    connections: AtomicUsize,
    stop: AtomicBool,
}

/// The running endpoint.
pub struct Monti {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Monti {
    /// Listens on `addr` and serves in the background.
    pub fn start(addr: SocketAddr, credentials: Option<Credentials>, limit: usize) -> Result<Monti, Problem> {
        let listener = TcpListener::bind(addr).map_err(|e| format!("--monti: cannot listen on {addr}: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("--monti: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("--monti: {e}"))?;
        let mut scraper = Scraper::new(spec(addr), None, limit);
        scraper.add(0.0, Vec::new());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                scraper,
                counters: BTreeMap::new(),
                histograms: BTreeMap::new(),
                known: Default::default(),
                dropped: Default::default(),
                limit,
                begun: None,
                ended: None,
                posts: 0,
                last_post: None,
                gaps: Vec::new(),
                refused: 0,
                last_refusal: None,
            }),
            posted: Condvar::new(),
            credentials,
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || accept_loop(listener, s))
            .map_err(|e| format!("--monti: {e}"))?;
        Ok(Monti { addr, shared, accept: Some(accept) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The load begins: what came before is dropped, the run's seconds count from now.
    pub fn begin(&self) {
        let mut st = lock(&self.shared);
        let limit = st.scraper.limit();
        st.scraper = Scraper::new(spec(self.addr), None, limit);
        st.scraper.add(0.0, Vec::new());
        st.counters.clear();
        st.histograms.clear();
        st.known.clear();
        st.dropped.clear();
        st.posts = 0;
        st.gaps.clear();
        st.begun = Some(Instant::now());
    }

    /// A handle on the series so far (for the live dashboard).
    pub fn live(&self) -> Live {
        Live { shared: Arc::clone(&self.shared) }
    }

    /// The load has ended: waits (bounded) for the agent's post that covers the end, stops, and
    /// hands back what was kept, with a warning when the end is not covered.
    pub fn finish(mut self) -> (ScrapeResult, Option<String>) {
        let end = Instant::now();
        let mut st = lock(&self.shared);
        st.ended = Some(end);
        // The agent posts each payload interval: wait one and a half of them for its next post.
        let wait = match (st.posts, median(&st.gaps)) {
            (0, _) => Duration::ZERO,
            (_, Some(gap)) => Duration::from_secs_f64(gap * 1.5 + 0.5).clamp(Duration::from_secs(2), MAX_END_WAIT),
            (_, None) => Duration::from_secs(5),
        };
        let covered = |st: &State| st.last_post.is_some_and(|p| p > end);
        while !covered(&st) && end.elapsed() < wait {
            let left = wait.saturating_sub(end.elapsed());
            st = self.shared.posted.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        let warning = (st.posts > 0 && !covered(&st)).then(|| {
            format!(
                "--monti: no post from the Monti agent within {:.0} s of the load's end; what the app did after its \
                 last post ({:.1} s before the end) is not in the result",
                wait.as_secs_f64(),
                st.last_post.map_or(0.0, |p| end.duration_since(p).as_secs_f64())
            )
        });
        let scraper = std::mem::replace(&mut st.scraper, Scraper::new(spec(self.addr), None, 1));
        let result = finish(&st, scraper);
        drop(st);
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        (result, warning)
    }
}

/// The series so far, on demand.
#[derive(Clone)]
pub struct Live {
    shared: Arc<Shared>,
}

impl Live {
    pub fn snapshot(&self) -> ScrapeResult {
        let st = lock(&self.shared);
        finish(&st, st.scraper.clone())
    }
}

impl Drop for Monti {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

fn spec(addr: SocketAddr) -> super::scrape::Spec {
    super::scrape::parse_spec(&format!("{NAME}=http://{addr}/")).expect("a socket address makes a URL")
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The endpoint's result: the series summed up, with what was refused and sent apart.
fn finish(st: &State, scraper: Scraper) -> ScrapeResult {
    let mut r = scraper.finish();
    r.url = r.url.trim_end_matches("/metrics").to_string();
    r.via = Some("monti".into());
    r.scrapes = st.posts;
    r.errors = st.refused;
    r.dropped_series = st.dropped.len() as u64;
    r.last_error = st.last_refusal.clone();
    // The baseline at 0 s is no post.
    if r.t.first() == Some(&0.0) && !r.t.is_empty() {
        r.t.remove(0);
        for s in &mut r.series {
            if !s.values.is_empty() {
                s.values.remove(0);
            }
        }
    }
    r
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.connections.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                    refuse(&shared, "more than 64 connections at once");
                    continue;
                }
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let s = Arc::clone(&shared);
                let spawned = std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
                    serve(stream, &s);
                    s.connections.fetch_sub(1, Ordering::Relaxed);
                });
                if spawned.is_err() {
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn refuse(shared: &Shared, why: &str) {
    let mut st = lock(shared);
    st.refused += 1;
    st.last_refusal = Some(why.to_string());
}

/// One request as read.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    close: bool,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read: the status to answer (None: just close).
struct Unread(Option<(u16, &'static str)>);

fn serve(mut stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let request = match read_request(&mut stream, &mut buf, shared) {
            Ok(r) => r,
            Err(Unread(Some((status, why)))) => {
                refuse(shared, why);
                let _ = respond(&mut stream, status, "text/plain", why.as_bytes(), &[], true);
                return;
            }
            Err(Unread(None)) => return,
        };
        let close = request.close;
        let (status, kind, body, extra) = handle(&request, shared);
        if respond(&mut stream, status, kind, body.as_bytes(), &extra, close).is_err() || close {
            return;
        }
    }
}

/// Reads one request (head and body) from the connection, keeping what follows it in `buf`.
fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> Result<Request, Unread> {
    let started = Instant::now();
    let mut chunk = [0u8; 16 * 1024];
    // The head: idle time allowed before its first byte, then HEAD_DEADLINE.
    let head_len = loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => break n,
            Ok(httparse::Status::Partial) if buf.len() > 64 * 1024 => {
                return Err(Unread(Some((431, "a request head larger than 64 KiB"))))
            }
            Ok(httparse::Status::Partial) => {}
            Err(_) => return Err(Unread(Some((400, "a request that is not HTTP")))),
        }
        let limit = if buf.is_empty() { IDLE } else { HEAD_DEADLINE };
        let left = limit.checked_sub(started.elapsed()).filter(|d| !d.is_zero());
        let Some(left) = left else {
            return Err(Unread(if buf.is_empty() { None } else { Some((408, "a request head that never ended")) }));
        };
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Unread(None)),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if shared.stop.load(Ordering::Relaxed) {
                    return Err(Unread(None));
                }
            }
            Err(_) => return Err(Unread(None)),
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let _ = req.parse(buf);
    let method = req.method.unwrap_or("").to_string();
    let path = req.path.unwrap_or("/").to_string();
    let version = req.version.unwrap_or(1);
    let headers: Vec<(String, String)> =
        req.headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).trim().to_string())).collect();
    let find = |n: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone());
    let close = version == 0 || find("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
    let chunked = find("transfer-encoding").is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    let length = match find("content-length") {
        Some(l) => Some(l.parse::<usize>().map_err(|_| Unread(Some((400, "a Content-Length that is no number"))))?),
        None => None,
    };
    if length.is_some_and(|l| l > MAX_BODY) {
        return Err(Unread(Some((413, "a body larger than 16 MiB"))));
    }
    buf.drain(..head_len);
    let body_started = Instant::now();
    let mut more = |buf: &mut Vec<u8>| -> Result<(), Unread> {
        let left = BODY_DEADLINE
            .checked_sub(body_started.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or(Unread(Some((408, "a request body that never ended"))))?;
        let _ = stream.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        match stream.read(&mut chunk) {
            Ok(0) => Err(Unread(None)),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if shared.stop.load(Ordering::Relaxed) {
                    Err(Unread(None))
                } else {
                    Ok(())
                }
            }
            Err(_) => Err(Unread(None)),
        }
    };
    let body = if chunked {
        // Chunks until the last: read until the whole body is in the buffer.
        loop {
            match dechunk_prefix(buf) {
                Ok(Some((body, used))) => {
                    buf.drain(..used);
                    break body;
                }
                Ok(None) if buf.len() > MAX_BODY + 64 * 1024 => {
                    return Err(Unread(Some((413, "a body larger than 16 MiB"))))
                }
                Ok(None) => more(buf)?,
                Err(why) => return Err(Unread(Some((400, why)))),
            }
        }
    } else {
        let n = length.unwrap_or(0);
        while buf.len() < n {
            more(buf)?;
        }
        buf.drain(..n).collect()
    };
    Ok(Request { method, path, headers, body, close })
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    kind: &str,
    body: &[u8],
    extra: &[(&str, String)],
    close: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{}",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out)
}

type Answer = (u16, &'static str, String, Vec<(&'static str, String)>);

/// Answers one request as the engine would.
fn handle(req: &Request, shared: &Shared) -> Answer {
    let path = req.path.split('?').next().unwrap_or("");
    let json = "application/json";
    // The clock: the agent's client asks without its headers.
    if path == "/simplentp/sync" {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis();
        return (200, "text/plain", now.to_string(), vec![]);
    }
    if let Some(c) = &shared.credentials {
        let (id, secret) = (req.header("kadira-app-id").unwrap_or(""), req.header("kadira-app-secret").unwrap_or(""));
        if id != c.id || !same(secret.as_bytes(), c.secret.as_bytes()) {
            let why = if id != c.id {
                format!("a request for another app (id {:?}, bolide has {:?})", cut(id), c.id)
            } else {
                "a request with the wrong app secret".to_string()
            };
            let mut st = lock(shared);
            st.refused += 1;
            st.last_refusal = Some(why);
            return (401, json, "{\"error\":\"unauthorized\"}".into(), vec![]);
        }
    }
    match (req.method.as_str(), path) {
        (_, "/ping") => (200, json, "{}".into(), vec![("accept-features", "json_line_traces".into())]),
        ("POST", "/traces") => {
            // Counted with the next post (traces are the agent's samples of slow calls).
            let lines = req.body.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count();
            let mut st = lock(shared);
            if st.begun.is_some() {
                *st.counters.entry(("monti_traces_total".into(), BTreeMap::new())).or_insert(0.0) += lines as f64;
            }
            (200, json, "{}".into(), vec![])
        }
        ("POST", "/jobs") => (200, json, "{}".into(), vec![]),
        ("POST", "/" | "") => match serde_json::from_slice::<Value>(&req.body) {
            Ok(Value::Object(payload)) => {
                post(shared, &payload);
                (200, json, "{}".into(), vec![])
            }
            Ok(_) => {
                refuse(shared, "a payload that is not a JSON object");
                (400, json, "{\"error\":\"not a JSON object\"}".into(), vec![])
            }
            Err(e) => {
                refuse(shared, &format!("a payload that is not JSON ({e})"));
                (400, json, "{\"error\":\"malformed JSON\"}".into(), vec![])
            }
        },
        (_, "/" | "/traces" | "/jobs") => (405, json, "{}".into(), vec![]),
        _ => (404, json, "{}".into(), vec![]),
    }
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A name or label the agent sent, as it may be kept: cut to its first characters, printable.
fn cut(s: &str) -> String {
    let cut: String = s.chars().take(MAX_LABEL).collect();
    crate::redact::printable(&cut).into_owned()
}

/// Keeps one metrics post.
fn post(shared: &Shared, payload: &serde_json::Map<String, Value>) {
    let now = Instant::now();
    let mut st = lock(shared);
    let Some(begun) = st.begun else {
        // Before the load: what it tells is of the time before.
        st.last_post = Some(now);
        return;
    };
    if let (Some(end), Some(last)) = (st.ended, st.last_post) {
        if last > end {
            // The end is covered already: this tells of the time after the run.
            return;
        }
    }
    let mut gauges = BTreeMap::new();
    let st_ref = &mut *st;
    let mut sink = Sink {
        counters: &mut st_ref.counters,
        histograms: &mut st_ref.histograms,
        gauges: &mut gauges,
        known: &mut st_ref.known,
        dropped: &mut st_ref.dropped,
        limit: st_ref.limit,
    };
    read_payload(payload, &mut sink);
    let mut parsed: super::scrape::Parsed = Vec::new();
    for ((m, l), v) in &st.counters {
        parsed.push((m.clone(), l.clone(), Kind::Counter, *v, vec![]));
    }
    for ((m, l), bins) in &st.histograms {
        let mut total = 0.0;
        let mut buckets: Vec<(f64, f64)> = bins
            .iter()
            .map(|(bits, c)| {
                total += c;
                (f64::from_bits(*bits), total)
            })
            .collect();
        buckets.push((f64::INFINITY, total));
        parsed.push((m.clone(), l.clone(), Kind::Histogram, total, buckets));
    }
    for ((m, l), v) in gauges {
        parsed.push((m, l, Kind::Gauge, v, vec![]));
    }
    let t = now.duration_since(begun).as_secs_f64();
    st.scraper.add(t, parsed);
    st.posts += 1;
    if let Some(p) = st.last_post {
        let gap = now.duration_since(p).as_secs_f64();
        st.gaps.push(gap);
    }
    st.last_post = Some(now);
    drop(st);
    shared.posted.notify_all();
}

/// Where a payload's figures go.
struct Sink<'a> {
    counters: &'a mut BTreeMap<Key, f64>,
    histograms: &'a mut BTreeMap<Key, BTreeMap<u64, f64>>,
    /// This post's gauges (of two entries of one post, two minutes' buckets, the later one).
    gauges: &'a mut BTreeMap<Key, f64>,
    /// The series let in (at most `limit`), and those left out (remembered up to MAX_DROPPED).
    known: &'a mut std::collections::BTreeSet<Key>,
    dropped: &'a mut std::collections::BTreeSet<Key>,
    limit: usize,
}

/// Distinct series left out that are remembered (to count them); past it they are left out
/// uncounted, so that posts of ever new names cannot grow memory.
const MAX_DROPPED: usize = 10_000;

impl Sink<'_> {
    fn key(metric: &str, labels: &[(&str, &str)]) -> Key {
        (metric.to_string(), labels.iter().map(|(k, v)| (k.to_string(), cut(v))).collect())
    }

    /// The series' key when it is kept (the first `limit` series are).
    fn admit(&mut self, metric: &str, labels: &[(&str, &str)]) -> Option<Key> {
        let key = Sink::key(metric, labels);
        if self.known.contains(&key) {
            return Some(key);
        }
        if self.known.len() < self.limit {
            self.known.insert(key.clone());
            return Some(key);
        }
        if self.dropped.len() < MAX_DROPPED {
            self.dropped.insert(key);
        }
        None
    }

    fn count(&mut self, metric: &str, labels: &[(&str, &str)], v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite() && *v >= 0.0) {
            if let Some(key) = self.admit(metric, labels) {
                *self.counters.entry(key).or_insert(0.0) += v;
            }
        }
    }

    fn gauge(&mut self, metric: &str, labels: &[(&str, &str)], v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            if let Some(key) = self.admit(metric, labels) {
                self.gauges.insert(key, v);
            }
        }
    }

    /// A DDSketch (`{gamma, bins: {index: count}}`) of milliseconds, into a histogram of seconds:
    /// bin i holds values in (gamma^(i-1), gamma^i].
    fn sketch(&mut self, metric: &str, labels: &[(&str, &str)], sketch: Option<&Value>) {
        let Some(s) = sketch else { return };
        let gamma = s.get("gamma").and_then(Value::as_f64).filter(|g| g.is_finite() && *g > 1.0);
        let (Some(gamma), Some(bins)) = (gamma, s.get("bins").and_then(Value::as_object)) else { return };
        let Some(key) = self.admit(metric, labels) else { return };
        let entry = self.histograms.entry(key).or_default();
        for (index, count) in bins {
            let Some(count) = count.as_f64().filter(|c| c.is_finite() && *c > 0.0) else { continue };
            // Zero lands in the "-Infinity" bin.
            let (lower, bound) = match index.parse::<f64>() {
                Ok(i) if i == f64::NEG_INFINITY => (0.0, 0.0),
                Ok(i) if i.is_finite() && i.abs() < 10_000.0 => (gamma.powf(i - 1.0) / 1000.0, gamma.powf(i) / 1000.0),
                _ => continue,
            };
            if bound.is_finite() {
                *entry.entry(bound.to_bits()).or_insert(0.0) += count;
                // The bin's lower edge, so that a quantile is placed inside the bin, not below it.
                entry.entry(lower.to_bits()).or_insert(0.0);
            }
        }
        if entry.is_empty() {
            self.histograms.retain(|_, bins| !bins.is_empty());
        }
    }
}

fn num(v: &Value, field: &str) -> Option<f64> {
    v.get(field).and_then(Value::as_f64)
}

fn entries<'a>(payload: &'a serde_json::Map<String, Value>, field: &str) -> impl Iterator<Item = &'a Value> {
    payload.get(field).and_then(Value::as_array).into_iter().flatten()
}

fn named<'a>(entry: &'a Value, field: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    entry.get(field).and_then(Value::as_object).into_iter().flatten()
}

/// The agent's payload (`lib/models/*.js` of monti-apm-agent: `systemMetrics`, `pubMetrics`,
/// `methodMetrics`, `httpMetrics`, `errors`) into series. Times are milliseconds, memory MiB;
/// the series are in seconds and bytes.
fn read_payload(payload: &serde_json::Map<String, Value>, sink: &mut Sink) {
    const MIB: f64 = 1024.0 * 1024.0;
    let ms = |v: Option<f64>| v.map(|v| v / 1000.0);
    for sys in entries(payload, "systemMetrics") {
        sink.gauge("monti_sessions", &[], num(sys, "sessions"));
        sink.count("monti_sessions_new_total", &[], num(sys, "newSessions"));
        for (field, kind) in [
            ("memory", "rss"),
            ("memoryHeapUsed", "heap_used"),
            ("memoryHeapTotal", "heap_total"),
            ("memoryExternal", "external"),
            ("memoryArrayBuffers", "array_buffers"),
        ] {
            sink.gauge("monti_memory_bytes", &[("kind", kind)], num(sys, field).map(|v| v * MIB));
        }
        sink.gauge("monti_cpu_percent", &[], num(sys, "pcpu"));
        sink.gauge("monti_active_handles", &[], num(sys, "activeHandles"));
        sink.gauge("monti_active_requests", &[], num(sys, "activeRequests"));
        sink.sketch("monti_eventloop_lag_seconds", &[], sys.get("evloopHistogram"));
        for (field, kind) in [
            ("gcMajorDuration", "major"),
            ("gcMinorDuration", "minor"),
            ("gcIncrementalDuration", "incremental"),
            ("gcWeakCBDuration", "weakcb"),
        ] {
            sink.count("monti_gc_seconds_total", &[("kind", kind)], ms(num(sys, field)));
        }
        sink.gauge("monti_mongo_pool_size", &[], num(sys, "mongoPoolSize"));
        sink.count("monti_mongo_pool_checkouts_total", &[("server", "primary")], num(sys, "mongoPoolPrimaryCheckouts"));
        sink.count("monti_mongo_pool_checkouts_total", &[("server", "other")], num(sys, "mongoPoolOtherCheckouts"));
        sink.count("monti_mongo_pool_checkout_seconds_total", &[], ms(num(sys, "mongoPoolCheckoutTime")));
        sink.gauge("monti_mongo_pool_max_checkout_seconds", &[], ms(num(sys, "mongoPoolMaxCheckoutTime")));
        sink.gauge("monti_mongo_pool_pending", &[], num(sys, "mongoPoolPending"));
        sink.gauge("monti_mongo_pool_checked_out", &[], num(sys, "mongoPoolCheckedOutConnections"));
        sink.count("monti_mongo_pool_created_total", &[], num(sys, "mongoPoolCreatedConnections"));
    }
    for minute in entries(payload, "pubMetrics") {
        for (name, p) in named(minute, "pubs") {
            let l: &[(&str, &str)] = &[("pub", name)];
            sink.count("monti_pub_subs_total", l, num(p, "subs"));
            sink.count("monti_pub_unsubs_total", l, num(p, "unsubs"));
            sink.count("monti_pub_errors_total", l, num(p, "errors"));
            sink.sketch("monti_pub_response_seconds", l, p.get("histogram"));
            sink.gauge("monti_pub_active_subs", l, num(p, "activeSubs"));
            sink.gauge("monti_pub_active_docs", l, num(p, "activeDocs"));
            // Observer handles the publication asked for, those that reused a running observer,
            // the observers started and stopped.
            sink.count("monti_pub_observer_handles_total", l, num(p, "totalObservers"));
            sink.count("monti_pub_observer_handles_reused_total", l, num(p, "cachedObservers"));
            sink.count("monti_pub_observers_created_total", l, num(p, "createdObservers"));
            sink.count("monti_pub_observers_deleted_total", l, num(p, "deletedObservers"));
            for (field, change) in [
                ("initiallyAddedDocuments", "initially_added"),
                ("liveAddedDocuments", "added"),
                ("liveChangedDocuments", "changed"),
                ("liveRemovedDocuments", "removed"),
            ] {
                sink.count("monti_pub_documents_total", &[("pub", name), ("change", change)], num(p, field));
            }
            for (field, op) in [
                ("oplogInsertedDocuments", "insert"),
                ("oplogUpdatedDocuments", "update"),
                ("oplogDeletedDocuments", "delete"),
            ] {
                sink.count("monti_pub_oplog_documents_total", &[("pub", name), ("op", op)], num(p, field));
            }
            sink.count("monti_pub_polled_documents_total", l, num(p, "polledDocuments"));
            for (field, phase) in [("initiallySentMsgSize", "initial"), ("liveSentMsgSize", "live")] {
                sink.count("monti_pub_sent_bytes_total", &[("pub", name), ("phase", phase)], num(p, field));
            }
            for (field, kind) in [
                ("initiallyFetchedDocSize", "initial"),
                ("liveFetchedDocSize", "live"),
                ("fetchedDocSize", "cursor"),
                ("polledDocSize", "polled"),
            ] {
                sink.count("monti_pub_fetched_bytes_total", &[("pub", name), ("kind", kind)], num(p, field));
            }
        }
    }
    for minute in entries(payload, "methodMetrics") {
        for (name, m) in named(minute, "methods") {
            let l: &[(&str, &str)] = &[("method", name)];
            let count = num(m, "count");
            sink.count("monti_method_calls_total", l, count);
            sink.count("monti_method_errors_total", l, num(m, "errors"));
            sink.sketch("monti_method_response_seconds", l, m.get("histogram"));
            // The agent sends each part's mean over the calls: the part's time is mean x count.
            for part in ["wait", "db", "http", "email", "async", "compute"] {
                let total = num(m, part).zip(count).map(|(mean, n)| mean * n / 1000.0);
                sink.count("monti_method_seconds_total", &[("method", name), ("part", part)], total);
            }
            sink.count("monti_method_sent_bytes_total", l, num(m, "sentMsgSize"));
            sink.count("monti_method_fetched_bytes_total", l, num(m, "fetchedDocSize"));
        }
    }
    for minute in entries(payload, "httpMetrics") {
        for (name, r) in named(minute, "routes") {
            let l: &[(&str, &str)] = &[("route", name)];
            sink.count("monti_http_requests_total", l, num(r, "count"));
            sink.count("monti_http_errors_total", l, num(r, "errors"));
            sink.sketch("monti_http_response_seconds", l, r.get("histogram"));
            for (class, n) in named(r, "statusCodes") {
                sink.count("monti_http_responses_total", &[("route", name), ("status", class)], n.as_f64());
            }
        }
    }
    let errors = entries(payload, "errors").count();
    if errors > 0 || payload.contains_key("errors") {
        sink.count("monti_errors_total", &[], Some(errors as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(raw).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn post_raw(addr: SocketAddr, body: &str, headers: &str) -> String {
        request(
            addr,
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    }

    fn sketch(values: &[f64]) -> Value {
        let gamma: f64 = 1.02 / 0.98;
        let mut bins = serde_json::Map::new();
        for v in values {
            let i = (v.log10() / gamma.log10()).ceil();
            let k = format!("{i}");
            let c = bins.get(&k).and_then(Value::as_f64).unwrap_or(0.0);
            bins.insert(k, Value::from(c + 1.0));
        }
        serde_json::json!({ "alpha": 0.02, "gamma": gamma, "bins": bins, "n": values.len() })
    }

    #[test]
    fn posts_become_series_summed_over_the_run() {
        let m = Monti::start("127.0.0.1:0".parse().unwrap(), None, 500).unwrap();
        let addr = m.addr();
        // Before the load: dropped.
        let early = serde_json::json!({ "methodMetrics": [{ "methods": { "insertTask": { "count": 100 } } }] });
        assert!(post_raw(addr, &early.to_string(), "").starts_with("HTTP/1.1 200"));
        m.begin();
        for i in 0..3 {
            let payload = serde_json::json!({
                "host": "h",
                "systemMetrics": [{ "sessions": 10 + i, "newSessions": 2, "memory": 100.0, "gcMinorDuration": 4.0,
                    "evloopHistogram": sketch(&[1.0, 1.0, 2.0]) }],
                "pubMetrics": [{ "pubs": { "fetchTasks": { "subs": 3, "unsubs": 1, "totalObservers": 3,
                    "cachedObservers": 2, "createdObservers": 1, "liveAddedDocuments": 5,
                    "histogram": sketch(&[10.0, 20.0, 200.0]) } } }],
                "methodMetrics": [{ "methods": { "insertTask": { "count": 4, "errors": 1, "db": 2.5,
                    "histogram": sketch(&[5.0, 5.0, 5.0, 50.0]) } } }],
                "errors": [{}],
            });
            assert!(post_raw(addr, &payload.to_string(), "").starts_with("HTTP/1.1 200"));
        }
        let (r, warning) = m.finish();
        assert!(warning.is_some(), "no post after the end");
        let find = |metric: &str, label: Option<(&str, &str)>| {
            r.series
                .iter()
                .find(|s| {
                    s.metric == metric && label.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v))
                })
                .unwrap_or_else(|| panic!("{metric}: {:?}", r.series.iter().map(|s| &s.metric).collect::<Vec<_>>()))
        };
        assert_eq!((r.scrapes, r.errors, r.t.len(), r.via.as_deref()), (3, 0, 3, Some("monti")));
        assert_eq!(find("monti_method_calls_total", None).increase, Some(12.0));
        assert_eq!(find("monti_method_errors_total", None).increase, Some(3.0));
        let db = find("monti_method_seconds_total", Some(("part", "db")));
        assert!((db.increase.unwrap() - 3.0 * 4.0 * 2.5 / 1000.0).abs() < 1e-12);
        assert_eq!(find("monti_pub_subs_total", None).increase, Some(9.0));
        assert_eq!(find("monti_pub_observer_handles_reused_total", None).increase, Some(6.0));
        assert_eq!(find("monti_pub_documents_total", Some(("change", "added"))).increase, Some(15.0));
        assert_eq!(find("monti_errors_total", None).increase, Some(3.0));
        assert_eq!(find("monti_sessions_new_total", None).increase, Some(6.0));
        let s = find("monti_sessions", None);
        assert_eq!((s.mean, s.max), (Some(11.0), Some(12.0)));
        assert_eq!(find("monti_memory_bytes", Some(("kind", "rss"))).max, Some(100.0 * 1024.0 * 1024.0));
        assert!((find("monti_gc_seconds_total", Some(("kind", "minor"))).increase.unwrap() - 0.012).abs() < 1e-12);
        // 12 calls: 9 of 5 ms, 3 of 50 ms, each within the sketch's 2% of its bin.
        let h = find("monti_method_response_seconds", None);
        assert_eq!(h.increase, Some(12.0));
        let [p50, _, p99] = h.quantiles.unwrap();
        assert!((p50 - 0.005).abs() <= 0.005 * 0.05, "{p50}");
        assert!((p99 - 0.050).abs() <= 0.050 * 0.05, "{p99}");
        assert_eq!(find("monti_pub_response_seconds", None).increase, Some(9.0));
    }

    #[test]
    fn the_engine_side_of_the_protocol_and_bad_requests() {
        let creds = Credentials::new("app", "s3cret");
        assert!(!format!("{creds:?}").contains("s3cret"));
        let m = Monti::start("127.0.0.1:0".parse().unwrap(), Some(creds), 500).unwrap();
        let addr = m.addr();
        m.begin();
        let ok = "kadira-app-id: app\r\nkadira-app-secret: s3cret\r\n";
        let ping = request(
            addr,
            format!("POST /ping HTTP/1.1\r\nHost: x\r\n{ok}Content-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert!(ping.starts_with("HTTP/1.1 200") && ping.contains("accept-features: json_line_traces"), "{ping}");
        let wrong = request(
            addr,
            b"POST /ping HTTP/1.1\r\nkadira-app-id: app\r\nkadira-app-secret: nope\r\nConnection: close\r\n\r\n",
        );
        assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
        let sync = request(addr, b"GET /simplentp/sync HTTP/1.1\r\nConnection: close\r\n\r\n");
        let ms: f64 = sync.rsplit("\r\n\r\n").next().unwrap().parse().unwrap();
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as f64;
        assert!((now - ms).abs() < 60_000.0);
        assert!(post_raw(addr, "{not json", ok).starts_with("HTTP/1.1 400"));
        assert!(post_raw(addr, "[1,2]", ok).starts_with("HTTP/1.1 400"));
        let huge = request(addr, format!("POST / HTTP/1.1\r\n{ok}Content-Length: {}\r\n\r\n", MAX_BODY + 1).as_bytes());
        assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
        assert!(request(addr, b"\x16\x03\x01garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        let traces = "{\"a\":1}\n{\"b\":2}\n";
        let t = request(
            addr,
            format!(
                "POST /traces HTTP/1.1\r\n{ok}Content-Length: {}\r\nConnection: close\r\n\r\n{traces}",
                traces.len()
            )
            .as_bytes(),
        );
        assert!(t.starts_with("HTTP/1.1 200"));
        // A chunked post on a kept-alive connection, then a second request on it.
        let body = serde_json::json!({ "methodMetrics": [{ "methods": { "m": { "count": 2 } } }] }).to_string();
        let raw = format!(
            "POST / HTTP/1.1\r\n{ok}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\nGET /nothing HTTP/1.1\r\n{ok}Connection: close\r\n\r\n",
            body.len()
        );
        let both = request(addr, raw.as_bytes());
        assert_eq!(both.matches("HTTP/1.1 ").count(), 2, "{both}");
        assert!(both.contains("HTTP/1.1 404"));
        let (r, _) = m.finish();
        // 401, two 400s, 413, garbage.
        assert_eq!((r.scrapes, r.errors), (1, 5));
        assert_eq!(r.series.iter().find(|s| s.metric == "monti_traces_total").unwrap().increase, Some(2.0));
        assert_eq!(r.series.iter().find(|s| s.metric == "monti_method_calls_total").unwrap().increase, Some(2.0));
        assert!(parse_addr(None).unwrap().ip().is_loopback());
        assert_eq!(parse_addr(Some("9000")).unwrap().port(), 9000);
        assert!(parse_addr(Some("nowhere:x")).is_err());
    }

    #[test]
    fn posts_of_ever_new_names_keep_at_most_the_limit() {
        let m = Monti::start("127.0.0.1:0".parse().unwrap(), None, 5).unwrap();
        m.begin();
        for round in 0..3 {
            let methods: serde_json::Map<String, Value> =
                (0..50).map(|i| (format!("m{round}-{i}"), serde_json::json!({ "count": 1 }))).collect();
            let payload = serde_json::json!({ "methodMetrics": [{ "methods": methods }] });
            assert!(post_raw(m.addr(), &payload.to_string(), "").starts_with("HTTP/1.1 200"));
        }
        let (r, _) = m.finish();
        assert_eq!(r.series.len(), 5);
        // 150 methods' calls (a series each: only their count was posted), 5 kept.
        assert_eq!(r.dropped_series, 150 - 5);
    }

    #[test]
    fn sketches_without_a_gamma_or_with_odd_bins_are_passed_over() {
        let mut counters = BTreeMap::new();
        let mut histograms = BTreeMap::new();
        let mut gauges = BTreeMap::new();
        let (mut known, mut dropped) = (Default::default(), Default::default());
        let mut sink = Sink {
            counters: &mut counters,
            histograms: &mut histograms,
            gauges: &mut gauges,
            known: &mut known,
            dropped: &mut dropped,
            limit: 500,
        };
        let payload = serde_json::json!({
            "systemMetrics": [{ "evloopHistogram": { "bins": { "1": 1 } }, "sessions": "many" }],
            "methodMetrics": [{ "methods": { "a": { "count": -3, "histogram": { "gamma": 1.04,
                "bins": { "-Infinity": 2, "NaN": 1, "x": 1, "99999": 1, "3": "x" } } } } }],
            "pubMetrics": "no",
        });
        read_payload(payload.as_object().unwrap(), &mut sink);
        assert!(gauges.is_empty() && counters.is_empty());
        // Zero-valued observations land at bound 0.
        let bins: Vec<_> = histograms.values().flat_map(|b| b.iter().map(|(k, v)| (f64::from_bits(*k), *v))).collect();
        assert_eq!(bins, vec![(0.0, 2.0)]);
    }
}

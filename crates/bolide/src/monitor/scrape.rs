//! `--scrape NAME=URL`: a server's Prometheus `/metrics` (the text exposition format, read a line
//! at a time, the series limit applied as it is read) fetched each interval while the load runs, on a thread of its own
//! so that a slow endpoint delays nothing else; once more when the load has ended, so that a
//! counter's increase covers the whole run. Kept per series (a metric and its labels): its value
//! at each scrape; in the result document with a summary (a counter's increase and rate, a
//! gauge's mean and peak, a histogram's count and quantiles over the run).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// The most of one `/metrics` answer read (a big exporter's is a few hundred KiB).
pub const MAX_BODY: usize = 16 << 20;
/// Series kept per endpoint unless `--scrape-limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 500;
/// How long one fetch may take before it counts as an error.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What to scrape, as the command line gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub name: String,
    pub url: String,
    /// `host:port` to connect to.
    addr: String,
    /// Host header and path.
    host: String,
    path: String,
}

/// Parses `NAME=URL` (an http:// URL; `/metrics` when it names no path).
pub fn parse_spec(text: &str) -> Result<Spec, Problem> {
    let (name, url) = text
        .split_once('=')
        .filter(|(n, u)| !n.is_empty() && !u.is_empty())
        .ok_or_else(|| format!("--scrape {text:?} must look like NAME=URL (app=http://127.0.0.1:9100/metrics)"))?;
    let u = url::Url::parse(url).map_err(|e| format!("--scrape {name}={url}: not a URL: {e}"))?;
    if u.scheme() != "http" {
        return Err(
            format!("--scrape {name}={url}: only http:// endpoints are read (the scheme is {:?})", u.scheme()).into()
        );
    }
    let host = u.host_str().ok_or_else(|| format!("--scrape {name}={url}: the URL names no host"))?;
    let port = u.port().unwrap_or(80);
    let mut path = u.path().to_string();
    if path.is_empty() || path == "/" {
        path = "/metrics".into();
    }
    if let Some(q) = u.query() {
        path = format!("{path}?{q}");
    }
    let url = format!("http://{host}:{port}{path}");
    Ok(Spec { name: name.to_string(), url, addr: format!("{host}:{port}"), host: format!("{host}:{port}"), path })
}

/// Parses `--probe NAME=HOST:PORT`: bolide-probe's `/metrics` on a loopback address.
pub fn probe_spec(text: &str) -> Result<Spec, Problem> {
    let (name, addr) = text
        .split_once('=')
        .filter(|(n, a)| !n.is_empty() && !a.is_empty())
        .ok_or_else(|| format!("--probe {text:?} must look like NAME=HOST:PORT (app=127.0.0.1:9465)"))?;
    let sock: std::net::SocketAddr = addr
        .parse()
        .map_err(|_| format!("--probe {name}={addr}: not HOST:PORT with an IP address (127.0.0.1:9465, [::1]:9465)"))?;
    if !sock.ip().is_loopback() {
        return Err(format!("--probe {name}={addr}: bolide-probe serves loopback addresses only").into());
    }
    let mut s = parse_spec(&format!("{name}=http://{sock}/metrics"))?;
    s.name = name.to_string();
    Ok(s)
}

/// GETs the endpoint once: its body, or why not.
pub fn fetch(spec: &Spec) -> Result<String, Problem> {
    let addrs: Vec<std::net::SocketAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(&spec.addr).map_err(|e| format!("{}: {e}", spec.addr))?.collect();
    let addr = addrs.first().ok_or_else(|| format!("{}: no address", spec.addr))?;
    let mut s = TcpStream::connect_timeout(addr, TIMEOUT).map_err(|e| format!("{}: {e}", spec.addr))?;
    let deadline = Instant::now() + TIMEOUT;
    s.set_read_timeout(Some(TIMEOUT)).ok();
    s.set_write_timeout(Some(TIMEOUT)).ok();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: text/plain;version=0.0.4\r\nUser-Agent: bolide/{}\r\nConnection: close\r\n\r\n",
        spec.path,
        spec.host,
        env!("CARGO_PKG_VERSION")
    );
    s.write_all(request.as_bytes()).map_err(|e| format!("sending the request: {e}"))?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if Instant::now() > deadline {
            return Err(format!("no whole answer within {} s", TIMEOUT.as_secs()).into());
        }
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&chunk[..n]);
                if raw.len() > MAX_BODY + 64 * 1024 {
                    return Err(format!("the answer is larger than {} MiB", MAX_BODY >> 20).into());
                }
                // A server that keeps the connection open after a whole answer is not waited for.
                if whole(&raw) {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return Err(format!("no whole answer within {} s", TIMEOUT.as_secs()).into())
            }
            Err(e) => return Err(format!("reading the answer: {e}").into()),
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut res = httparse::Response::new(&mut headers);
    let head = match res.parse(&raw) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return Err("the answer is not HTTP".into()),
    };
    let status = res.code.unwrap_or(0);
    if status != 200 {
        return Err(format!("HTTP {status} {}", crate::redact::printable(res.reason.unwrap_or(""))).into());
    }
    let chunked = res.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding") && String::from_utf8_lossy(h.value).contains("chunked")
    });
    let encoded = res.headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-encoding"));
    if let Some(e) = encoded.filter(|h| !h.value.eq_ignore_ascii_case(b"identity")) {
        let encoding = String::from_utf8_lossy(e.value);
        return Err(format!(
            "the answer is {}-encoded (bolide asks for plain text)",
            crate::redact::printable(&encoding)
        )
        .into());
    }
    // The body in place (no copy of up to 16 MiB), or the chunks' data (the raw answer freed).
    let body = if chunked {
        dechunk(&raw[head..])?
    } else {
        raw.drain(..head);
        raw
    };
    String::from_utf8(body).map_err(|_| Problem::from("the answer is not UTF-8 text"))
}

/// Whether `raw` holds a whole answer: its head, and its body by `Content-Length` or a chunked
/// body's last chunk; a body that runs until the close is never whole before it.
fn whole(raw: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut res = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(head)) = res.parse(raw) else { return false };
    let value = |name: &str| {
        res.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| String::from_utf8_lossy(h.value))
    };
    if value("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return raw[head..].ends_with(b"0\r\n\r\n");
    }
    match value("content-length").and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(n) => raw.len() - head >= n,
        None => false,
    }
}

/// A whole chunked body at the front of `data`: the body and the bytes it took; None when more is
/// needed (also the Monti endpoint's reader of chunked posts).
pub(super) fn dechunk_prefix(data: &[u8]) -> Result<Option<(Vec<u8>, usize)>, &'static str> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let Some(end) = memchr::memmem::find(&data[at..], b"\r\n") else { return Ok(None) };
        let line = std::str::from_utf8(&data[at..at + end]).map_err(|_| "a chunk size that is not text")?;
        let size = line.split(';').next().unwrap_or("").trim();
        let n = usize::from_str_radix(size, 16).map_err(|_| "a chunk size that is not hex")?;
        if n > MAX_BODY {
            return Err("a chunk larger than 16 MiB");
        }
        at += end + 2;
        if n == 0 {
            // Trailers end with an empty line.
            let Some(t) = memchr::memmem::find(&data[at..], b"\r\n") else { return Ok(None) };
            return Ok(Some((out, at + t + 2)));
        }
        if data.len() < at + n + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&data[at..at + n]);
        at += n + 2;
    }
}

/// A whole chunked body: its data, or why not.
fn dechunk(data: &[u8]) -> Result<Vec<u8>, Problem> {
    match dechunk_prefix(data)? {
        Some((body, _)) => Ok(body),
        None => Err("a chunked answer cut short".into()),
    }
}

/// What kind of series a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Counter,
    Gauge,
    Untyped,
    /// A histogram's observations (its `_count`), with quantiles from its buckets.
    Histogram,
    /// One quantile of a summary, as the server computed it.
    Summary,
}

/// One series of an endpoint over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub metric: String,
    /// Its labels (`le` and `quantile` aside), in name order.
    pub labels: BTreeMap<String, String>,
    pub kind: Option<Kind>,
    /// Its value at each scrape (`t` of the endpoint), null where a scrape did not have it.
    pub values: Vec<Option<f64>>,
    /// Counters and histograms: the increase from the first scrape to the last (a restart's
    /// drop counted from zero; a series born during the run from zero), and that per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increase: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Gauges, untyped values and summary quantiles: mean and peak over the scrapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Histograms: p50, p90, p99 of the observations made during the run, from the buckets'
    /// increase (each the upper bound of the bucket it falls in, as Prometheus's
    /// histogram_quantile interpolates within it).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient_quantiles")]
    pub quantiles: Option<[f64; 3]>,
    /// Histograms: each finite bucket's cumulative count at the last scrape minus the first
    /// (`(upper bound, count)`; the +Inf bucket's is `increase`), for reading other quantiles later.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "lenient_buckets")]
    pub buckets: Vec<(f64, f64)>,
}

/// Quantiles as written; `null`s (an older bolide wrote NaN so) read as none.
fn lenient_quantiles<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<[f64; 3]>, D::Error> {
    let q: Option<[Option<f64>; 3]> = Option::deserialize(d)?;
    Ok(q.and_then(|[a, b, c]| Some([a?, b?, c?])))
}

/// Buckets as written; one with a `null` (an older bolide wrote NaN so) is left out.
fn lenient_buckets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(f64, f64)>, D::Error> {
    let b: Vec<(Option<f64>, Option<f64>)> = Vec::deserialize(d)?;
    Ok(b.into_iter().filter_map(|(le, c)| Some((le?, c?))).collect())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One endpoint in a result document.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScrapeResult {
    pub name: String,
    pub url: String,
    /// Seconds since the start of each successful scrape.
    pub t: Vec<f64>,
    pub scrapes: u64,
    pub errors: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Series seen but not kept (past `--scrape-limit`, or not matching `--scrape-match`): each
    /// counted once while bolide remembers 4,096 of their names, at least as many as one scrape
    /// left out past that.
    pub dropped_series: u64,
    /// Histogram buckets left out of one scrape (the most): past 256 buckets a histogram keeps
    /// every k-th bound and its last, and buckets whose bound or count is not a number.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_buckets: u64,
    pub series: Vec<Series>,
    /// How the series came: absent for a scraped endpoint, `monti` for the Monti agent's posts
    /// (`--monti`; then `scrapes` counts its posts and `errors` the requests refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// The series of one parse: key -> (metric, labels, kind, value, buckets of a histogram).
pub type Parsed = Vec<(String, BTreeMap<String, String>, Kind, f64, Vec<(f64, f64)>)>;

/// The most buckets kept of one histogram. A histogram with more keeps every k-th bound and the
/// last (cumulative counts stay exact at the bounds kept; quantiles lose resolution, never
/// truth); the rest are counted in `dropped_buckets`.
pub const MAX_BUCKETS: usize = 256;
/// How many left-out series are remembered by name, so that each is counted once over the run;
/// past it, an endpoint whose series change names at every scrape costs a count, not memory.
const DROPPED_NAMES: usize = 4096;

/// One sample of an exposition text as [`each_sample`] hands it over: its series (metric and
/// labels, `le` and `quantile` aside but a summary's `quantile` kept), kind and value, and a
/// histogram's buckets.
pub struct Sample {
    pub metric: String,
    pub labels: BTreeMap<String, String>,
    pub kind: Kind,
    pub value: f64,
    pub buckets: Vec<(f64, f64)>,
}

/// Parses an exposition text into series values (all of them: for small texts and tests; a
/// scrape goes through [`each_sample`] and keeps only what its limit allows).
pub fn parse(text: &str) -> Result<Parsed, Problem> {
    let mut out = Vec::new();
    each_sample(text, &mut |s| out.push((s.metric, s.labels, s.kind, s.value, s.buckets)));
    Ok(out)
}

/// Reads the text exposition format (Prometheus 0.0.4) a line at a time, handing each sample to
/// `sink` as it is read; nothing of the whole text is held but the current histogram's buckets
/// (a metric family's lines come together, as the format requires). Lines that are no sample are
/// passed over. A histogram's `_sum` and `_count` are counters; its buckets become one series
/// whose value is the count.
pub fn each_sample(text: &str, sink: &mut dyn FnMut(Sample)) {
    // The family the last `# TYPE` named, and the histogram being gathered.
    let mut family: Option<(String, Kind, bool)> = None;
    let mut group: Option<Sample> = None;
    let flush = |group: &mut Option<Sample>, sink: &mut dyn FnMut(Sample)| {
        if let Some(mut g) = group.take() {
            g.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            // The count is the +Inf bucket's (a `le="NaN"` sorts past it and counts nothing).
            g.value = g.buckets.iter().rev().find(|b| !b.0.is_nan()).map_or(0.0, |b| b.1);
            sink(g);
        }
    };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                    flush(&mut group, sink);
                    let (kind, grouped) = match kind {
                        "counter" => (Kind::Counter, false),
                        "gauge" => (Kind::Gauge, false),
                        "histogram" => (Kind::Histogram, true),
                        "summary" => (Kind::Summary, true),
                        _ => (Kind::Untyped, false),
                    };
                    family = Some((name.to_string(), kind, grouped));
                }
            }
            continue;
        }
        let Some((metric, mut labels, value)) = sample_line(line) else { continue };
        let of_family =
            |suffix: &str| family.as_ref().is_some_and(|(f, _, _)| metric.strip_suffix(suffix).is_some_and(|b| b == f));
        let (kind, grouped) = family.as_ref().map_or((Kind::Untyped, false), |(_, k, g)| (*k, *g));
        let is_family = family.as_ref().is_some_and(|(f, _, _)| f == metric);
        if grouped && (of_family("_sum") || of_family("_count")) {
            flush(&mut group, sink);
            sink(Sample {
                metric: metric.to_string(),
                labels: labels.into_iter().collect(),
                kind: Kind::Counter,
                value,
                buckets: vec![],
            });
            continue;
        }
        if kind == Kind::Histogram && of_family("_bucket") {
            let le = labels.iter().position(|(k, _)| k == "le").map(|i| labels.remove(i).1);
            let Some(le) = le.and_then(|v| sample_value(&v)) else { continue };
            let labels: BTreeMap<String, String> = labels.into_iter().collect();
            let base = &metric[..metric.len() - "_bucket".len()];
            let same = group.as_ref().is_some_and(|g| g.metric == base && g.labels == labels);
            if !same {
                flush(&mut group, sink);
                group = Some(Sample {
                    metric: base.to_string(),
                    labels,
                    kind: Kind::Histogram,
                    value: 0.0,
                    buckets: vec![],
                });
            }
            if let Some(g) = group.as_mut() {
                g.buckets.push((le, value));
            }
            continue;
        }
        flush(&mut group, sink);
        let kind = match kind {
            Kind::Summary if is_family && labels.iter().any(|(k, _)| k == "quantile") => Kind::Summary,
            Kind::Counter if is_family || of_family("_total") => Kind::Counter,
            Kind::Gauge if is_family => Kind::Gauge,
            _ => Kind::Untyped,
        };
        if kind != Kind::Summary {
            labels.retain(|(k, _)| k != "le" && k != "quantile");
        }
        sink(Sample { metric: metric.to_string(), labels: labels.into_iter().collect(), kind, value, buckets: vec![] });
    }
    flush(&mut group, sink);
}

/// `name{label="value",...} value [timestamp]`: the name, the labels (escapes undone) and the
/// value; None when the line is not a sample.
fn sample_line(line: &str) -> Option<(&str, LabelPairs, f64)> {
    let name_end = line.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let (labels, rest) = match line[name_end..].trim_start().strip_prefix('{') {
        Some(inner) => label_set(inner)?,
        None => (Vec::new(), &line[name_end..]),
    };
    let value = sample_value(rest.split_whitespace().next()?)?;
    Some((name, labels, value))
}

/// A sample's labels in the order written.
type LabelPairs = Vec<(String, String)>;

/// The labels of `a="x",b="y"}` and what follows the `}`; None when malformed.
fn label_set(text: &str) -> Option<(LabelPairs, &str)> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < b.len() && (b[i] == b' ' || b[i] == b',') {
            i += 1;
        }
        if *b.get(i)? == b'}' {
            return Some((out, &text[i + 1..]));
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let key = &text[start..i];
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        if key.is_empty() || b.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        if b.get(i) != Some(&b'"') {
            return None;
        }
        i += 1;
        let mut value = Vec::new();
        loop {
            match *b.get(i)? {
                b'\\' => {
                    value.push(match *b.get(i + 1)? {
                        b'n' => b'\n',
                        c => c,
                    });
                    i += 2;
                }
                b'"' => {
                    i += 1;
                    break;
                }
                c => {
                    value.push(c);
                    i += 1;
                }
            }
        }
        // A label value is the server's text: kept printable.
        let value = String::from_utf8_lossy(&value);
        out.push((key.to_string(), crate::redact::printable(&value).into_owned()));
    }
}

/// A sample's value: a float, `NaN`, `+Inf`, `-Inf`.
fn sample_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t => t.parse().ok(),
    }
}

/// Reads an endpoint once.
pub fn read(spec: &Spec) -> Result<String, Problem> {
    fetch(spec)
}

/// A histogram's cumulative buckets: (upper bound, count).
type Buckets = Vec<(f64, f64)>;

/// One endpoint being scraped.
#[derive(Debug, Clone)]
pub struct Scraper {
    spec: Spec,
    matcher: Option<regex::Regex>,
    limit: usize,
    result: ScrapeResult,
    index: BTreeMap<(String, BTreeMap<String, String>), usize>,
    /// Series left out (past the limit, or not matching), remembered up to [`DROPPED_NAMES`].
    dropped: std::collections::BTreeSet<(String, BTreeMap<String, String>)>,
    /// Each histogram's buckets at its first and its last scrape.
    buckets: Vec<(Buckets, Buckets)>,
    /// The first read was taken before the load (a scraped endpoint's): gauges leave it out.
    first_before_load: bool,
}

impl Scraper {
    /// A scraper whose first read is taken before the load starts (as [`Scraping::start`] does):
    /// its gauges' mean and peak are of the reads taken during the load.
    pub fn before_the_load(mut self) -> Scraper {
        self.first_before_load = true;
        self
    }

    pub fn new(spec: Spec, matcher: Option<regex::Regex>, limit: usize) -> Scraper {
        let result = ScrapeResult { name: spec.name.clone(), url: spec.url.clone(), ..Default::default() };
        Scraper {
            spec,
            matcher,
            limit,
            result,
            index: BTreeMap::new(),
            dropped: Default::default(),
            buckets: Vec::new(),
            first_before_load: false,
        }
    }

    /// The most series kept.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Scrapes once, `t` seconds into the run.
    pub fn scrape(&mut self, t: f64) {
        let read = read(&self.spec);
        self.take_text(t, read);
    }

    /// Takes in an answer read `t` seconds into the run: its samples are read a line at a time
    /// and kept within the limit as they are read.
    pub fn take_text(&mut self, t: f64, read: Result<String, Problem>) {
        self.result.scrapes += 1;
        match read {
            Ok(text) => {
                let at = self.begin(t);
                let mut dropped = 0u64;
                each_sample(&text, &mut |s| self.put(at, s, &mut dropped));
                self.end(at, dropped);
            }
            Err(e) => {
                self.result.errors += 1;
                self.result.last_error = Some(e.to_string());
            }
        }
    }

    /// Takes in a reading made `t` seconds into the run.
    pub fn take(&mut self, t: f64, read: Result<Parsed, Problem>) {
        self.result.scrapes += 1;
        match read {
            Ok(parsed) => self.add(t, parsed),
            Err(e) => {
                self.result.errors += 1;
                self.result.last_error = Some(e.to_string());
            }
        }
    }

    /// Adds the series of one successful scrape at `t`.
    pub fn add(&mut self, t: f64, parsed: Parsed) {
        let at = self.begin(t);
        let mut dropped = 0u64;
        for (metric, labels, kind, value, buckets) in parsed {
            self.put(at, Sample { metric, labels, kind, value, buckets }, &mut dropped);
        }
        self.end(at, dropped);
    }

    /// A scrape begins at `t`: its index among the scrapes.
    fn begin(&mut self, t: f64) -> usize {
        self.result.t.push(t);
        self.result.t.len() - 1
    }

    /// One sample of scrape `at`: kept when its series is (or may become) one of the kept ones;
    /// else counted in `dropped` and, while there is room, remembered so that it is counted once.
    fn put(&mut self, at: usize, sample: Sample, dropped: &mut u64) {
        let Sample { metric, labels, kind, value, buckets } = sample;
        let key = (metric, labels);
        if self.dropped.contains(&key) {
            *dropped += 1;
            return;
        }
        let i = match self.index.get(&key) {
            Some(i) => *i,
            None if self.index.len() >= self.limit || self.matcher.as_ref().is_some_and(|m| !m.is_match(&key.0)) => {
                *dropped += 1;
                if self.dropped.len() < DROPPED_NAMES {
                    self.dropped.insert(key);
                }
                return;
            }
            None => {
                let i = self.result.series.len();
                self.index.insert(key.clone(), i);
                self.result.series.push(Series {
                    metric: key.0,
                    labels: key.1,
                    kind: Some(kind),
                    values: vec![None; at],
                    ..Default::default()
                });
                self.buckets.push((Vec::new(), Vec::new()));
                i
            }
        };
        let s = &mut self.result.series[i];
        s.values.resize(at, None);
        s.values.push(Some(value));
        if kind == Kind::Histogram {
            let (kept, left_out) = thin(buckets);
            self.result.dropped_buckets = self.result.dropped_buckets.max(left_out);
            // A series born after the first scrape (a labelled counter the load created) began
            // at zero: its first buckets are none.
            if at == 0 {
                self.buckets[i].0 = kept.clone();
            }
            self.buckets[i].1 = kept;
        }
    }

    /// Scrape `at` is in: series it lacked get no value for it; the left-out series counted
    /// (every one remembered, or at least as many as this scrape left out).
    fn end(&mut self, at: usize, dropped: u64) {
        for s in &mut self.result.series {
            s.values.resize(at + 1, None);
        }
        self.result.dropped_series = self.result.dropped_series.max(self.dropped.len() as u64).max(dropped);
    }

    /// The endpoint's result with each series summed up.
    pub fn finish(mut self) -> ScrapeResult {
        let span = match (self.result.t.first(), self.result.t.last()) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        for (s, (first, last)) in self.result.series.iter_mut().zip(&self.buckets) {
            let values: Vec<f64> = s.values.iter().flatten().copied().filter(|v| v.is_finite()).collect();
            match s.kind {
                Some(Kind::Counter | Kind::Histogram) => {
                    // Born after the first scrape: it began at zero.
                    let values: Vec<f64> = if s.values.first() == Some(&None) {
                        std::iter::once(0.0).chain(values).collect()
                    } else {
                        values
                    };
                    // A drop is a restart: the counter began again from zero.
                    let increase =
                        values.windows(2).map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] }).sum::<f64>();
                    s.increase = Some(increase);
                    s.rate_per_s = span.map(|d| increase / d);
                }
                _ if !values.is_empty() => {
                    // A gauge says what was while the load ran: the read before it (there to
                    // start counters' increases) is left out when there are others.
                    // Read 0 is the one before the load only when it was taken at 0 s (a failed
                    // first read leaves a read during the load first).
                    let first_is_before = self.first_before_load && self.result.t.first() == Some(&0.0);
                    let during: Vec<f64> = match first_is_before {
                        true => s.values.iter().skip(1).flatten().copied().filter(|v| v.is_finite()).collect(),
                        false => Vec::new(),
                    };
                    let values = if during.is_empty() { values } else { during };
                    s.mean = Some(values.iter().sum::<f64>() / values.len() as f64);
                    s.max = values.iter().copied().reduce(f64::max);
                }
                _ => {}
            }
            if s.kind == Some(Kind::Histogram) {
                // Both sorted by bound: one walk pairs each last bucket with its first.
                let mut j = 0;
                let grown: Vec<(f64, f64)> = last
                    .iter()
                    .map(|(le, c)| {
                        while j < first.len() && first[j].0 < *le {
                            j += 1;
                        }
                        let before = first.get(j).filter(|f| f.0 == *le).map_or(0.0, |x| x.1);
                        (*le, if *c >= before { c - before } else { *c })
                    })
                    .collect();
                s.quantiles = quantiles(&grown);
                // The +Inf bucket is the increase itself (and JSON has no infinity).
                s.buckets = grown.into_iter().filter(|(le, c)| le.is_finite() && c.is_finite()).collect();
            }
        }
        self.result
    }
}

/// A histogram's buckets as kept: the ones with a bound and a count that are numbers, sorted, at
/// most [`MAX_BUCKETS`] (every k-th and the last); and how many were left out.
fn thin(buckets: Buckets) -> (Buckets, u64) {
    let given = buckets.len();
    let mut b: Buckets = buckets.into_iter().filter(|(le, c)| !le.is_nan() && !c.is_nan()).collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    if b.len() > MAX_BUCKETS {
        let step = b.len().div_ceil(MAX_BUCKETS - 1);
        let last = b.len() - 1;
        b = b.iter().enumerate().filter(|(i, _)| i % step == 0 || *i == last).map(|(_, x)| *x).collect();
    }
    let kept = b.len();
    (b, (given - kept) as u64)
}

/// p50, p90, p99 of cumulative buckets (see [`quantile`]); None without observations, or when a
/// quantile is not a finite number (JSON has none other, and bolide reads back what it writes).
pub fn quantiles(buckets: &[(f64, f64)]) -> Option<[f64; 3]> {
    let q = [quantile(buckets, 0.5)?, quantile(buckets, 0.9)?, quantile(buckets, 0.99)?];
    q.iter().all(|v| v.is_finite()).then_some(q)
}

/// The `q` quantile (0 < q <= 1) of cumulative buckets `(upper bound, count)` ending with +Inf,
/// interpolated linearly inside the bucket it falls in (as Prometheus's histogram_quantile
/// does); None without observations. The +Inf bucket answers with the highest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(prev.0);
            }
            let within = count - prev.1;
            return Some(if within > 0.0 { prev.0 + (le - prev.0) * (rank - prev.1) / within } else { le });
        }
        prev = (le, count);
    }
    Some(prev.0)
}

/// Series of one endpoint summed into one (a metric over its labels): values at each read
/// (absent where none had one), increases and rates, histograms' buckets; the mean and peak of the
/// sums.
pub fn combine(series: &[&Series]) -> Series {
    let Some(first) = series.first() else { return Series::default() };
    if series.len() == 1 {
        return (*first).clone();
    }
    let len = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let values: Vec<Option<f64>> = (0..len)
        .map(|i| {
            let at: Vec<f64> = series.iter().filter_map(|s| s.values.get(i).copied().flatten()).collect();
            (!at.is_empty()).then(|| at.iter().sum())
        })
        .collect();
    let sum = |f: fn(&Series) -> Option<f64>| {
        let v: Vec<f64> = series.iter().filter_map(|s| f(s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let gauge = !matches!(first.kind, Some(Kind::Counter | Kind::Histogram));
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    let mut bounds: Vec<f64> = series.iter().flat_map(|s| s.buckets.iter().map(|b| b.0)).collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    // Each series' cumulative count at a bound it lacks is its count at the bound below.
    for le in bounds {
        let at = |s: &Series| s.buckets.iter().take_while(|b| b.0 <= le).last().map_or(0.0, |b| b.1);
        buckets.push((le, series.iter().map(|s| at(s)).sum()));
    }
    Series {
        metric: first.metric.clone(),
        labels: Default::default(),
        kind: first.kind,
        increase: sum(|s| s.increase),
        rate_per_s: sum(|s| s.rate_per_s),
        mean: (gauge && !present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64),
        max: if gauge { present.iter().copied().reduce(f64::max) } else { None },
        quantiles: None,
        buckets,
        values,
    }
}

/// Scrapes each endpoint on a thread of its own every `interval` until stopped, and once more
/// then.
pub struct Scraping {
    stop: Arc<AtomicBool>,
    scrapers: Vec<Arc<std::sync::Mutex<Scraper>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn locked(s: &std::sync::Mutex<Scraper>) -> std::sync::MutexGuard<'_, Scraper> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

impl Scraping {
    /// Returns once every endpoint was read a first time (or failed to be), so that a counter's
    /// increase covers the whole load.
    pub fn start(specs: &[Spec], matcher: Option<&regex::Regex>, limit: usize, interval: Duration) -> Scraping {
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let (first_done, first) = std::sync::mpsc::channel::<()>();
        let scrapers: Vec<_> = specs
            .iter()
            .map(|spec| {
                Arc::new(std::sync::Mutex::new(Scraper::new(spec.clone(), matcher.cloned(), limit).before_the_load()))
            })
            .collect();
        let threads: Vec<_> = scrapers
            .iter()
            .zip(specs)
            .map(|(s, spec)| {
                let s = Arc::clone(s);
                let spec = spec.clone();
                let stop = Arc::clone(&stop);
                let first_done = first_done.clone();
                // Each read is made unlocked (it may take seconds); only its taking in is locked.
                let scrape = move |s: &std::sync::Mutex<Scraper>, t: Option<f64>| {
                    let r = read(&spec);
                    locked(s).take_text(t.unwrap_or_else(|| start.elapsed().as_secs_f64()), r);
                };
                std::thread::spawn(move || {
                    scrape(&s, Some(0.0));
                    let _ = first_done.send(());
                    let mut next = start + interval;
                    loop {
                        let now = Instant::now();
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        if now >= next {
                            scrape(&s, None);
                            next += interval;
                            // A slow endpoint skips the scrapes it missed instead of bunching them.
                            while next < Instant::now() {
                                next += interval;
                            }
                        } else {
                            std::thread::sleep((next - now).min(Duration::from_millis(50)));
                        }
                    }
                    scrape(&s, None);
                })
            })
            .collect();
        drop(first_done);
        // Each thread says when its first reading is in (a thread that died closes the channel).
        for _ in 0..threads.len() {
            if first.recv().is_err() {
                break;
            }
        }
        Scraping { stop, scrapers, threads }
    }

    /// A handle on what the endpoints gave so far (for the live dashboard).
    pub fn live(&self) -> Live {
        Live { scrapers: self.scrapers.clone() }
    }

    /// Stops, scrapes each endpoint a last time, and hands back what was kept.
    pub fn finish(self) -> Vec<ScrapeResult> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        self.scrapers.iter().map(|s| locked(s).clone().finish()).collect()
    }
}

/// What the scraped endpoints gave so far, summed up on demand.
#[derive(Clone, Default)]
pub struct Live {
    scrapers: Vec<Arc<std::sync::Mutex<Scraper>>>,
}

impl Live {
    pub fn snapshot(&self) -> Vec<ScrapeResult> {
        self.scrapers.iter().map(|s| locked(s).clone().finish()).collect()
    }
}

/// The endpoints' lines of a terminal summary: per endpoint, its scrapes and errors, then up to
/// `most` series (those `--scrape-match` chose, else well-known ones first).
pub fn rows(results: &[ScrapeResult], most: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in results {
        // bolide-probe's endpoint and the Monti agent have more to say (Node and Meteor both).
        let rich = r.via.is_some() || r.series.iter().any(|s| s.metric.starts_with("probe_"));
        let most = if rich { most.max(16) } else { most };
        let (what, reads, failed) = match r.via.as_deref() {
            Some("monti") => ("The Monti agent's posts to", "posts", "requests refused"),
            _ => ("Scraped", "scrapes", "failed"),
        };
        let _ = writeln!(
            out,
            "\n  {what} {} ({}): {} {reads}, {} {failed}{}, {} series kept{}",
            r.name,
            r.url,
            r.scrapes,
            r.errors,
            r.last_error.as_ref().map(|e| format!(" (last: {e})")).unwrap_or_default(),
            r.series.len(),
            if r.dropped_series > 0 { format!(", {} left out", r.dropped_series) } else { String::new() }
        );
        let shown = shown(r);
        let hidden = r.series.len() - shown.len();
        for s in shown.iter().take(most) {
            let name = series_name(s);
            let figure = match s.kind {
                Some(Kind::Histogram) => match s.quantiles {
                    Some([p50, p90, p99]) => format!(
                        "{} observed, p50 {} p90 {} p99 {}",
                        number(s.increase.unwrap_or(0.0)),
                        number(p50),
                        number(p90),
                        number(p99)
                    ),
                    None => "no observations during the run".into(),
                },
                Some(Kind::Counter) => {
                    format!("+{} ({}/s)", number(s.increase.unwrap_or(0.0)), number(s.rate_per_s.unwrap_or(0.0)))
                }
                _ => match (s.mean, s.max) {
                    (Some(m), Some(x)) => format!("mean {} max {}", number(m), number(x)),
                    _ => "no value".into(),
                },
            };
            let _ = writeln!(out, "    {name:<48} {figure}");
        }
        let more = r.series.len().saturating_sub(most.min(shown.len()) + hidden) + hidden;
        if more > 0 {
            let _ = writeln!(out, "    ({more} more in the result document)");
        }
    }
    out
}

/// An endpoint's series in the order a reader wants them: those that tell something (a counter or
/// histogram that moved, a gauge), well-known ones first, then the rest, by name; a histogram's
/// `_sum` and `_count` are left to its own row.
pub fn shown(r: &ScrapeResult) -> Vec<&Series> {
    let grouped: Vec<&str> =
        r.series.iter().filter(|s| s.kind == Some(Kind::Histogram)).map(|s| s.metric.as_str()).collect();
    let mut shown: Vec<&Series> = r
        .series
        .iter()
        .filter(|s| {
            let base = s.metric.strip_suffix("_sum").or_else(|| s.metric.strip_suffix("_count"));
            !base.is_some_and(|b| grouped.contains(&b))
        })
        .collect();
    // Telling: a counter or histogram that moved, a gauge with a value.
    shown.sort_by_key(|s| {
        let telling = s.increase.is_some_and(|i| i > 0.0) || s.mean.is_some();
        (!telling, !WELL_KNOWN.iter().any(|w| s.metric == *w), s.metric.clone())
    });
    shown
}

/// A series as drawn: a counter's or histogram's increase per second between scrapes (None at the
/// first), other kinds' values.
pub fn per_scrape(r: &ScrapeResult, s: &Series) -> Vec<Option<f64>> {
    match s.kind {
        Some(Kind::Counter | Kind::Histogram) => (0..s.values.len())
            .map(|i| {
                let (prev, now) = (s.values.get(i.checked_sub(1)?).copied().flatten(), s.values[i]);
                let span = r.t.get(i)? - r.t.get(i - 1)?;
                match (prev, now) {
                    (Some(a), Some(b)) if span > 0.0 => Some(if b >= a { b - a } else { b } / span),
                    _ => None,
                }
            })
            .collect(),
        _ => s.values.clone(),
    }
}

/// Series shown first when present: what most exporters have and people look at.
const WELL_KNOWN: &[&str] = &[
    // bolide-probe's.
    "probe_eventloop_delay_p99_seconds",
    "probe_eventloop_active_seconds_total",
    "probe_gc_pause_seconds",
    "probe_heap_used_bytes",
    "probe_meteor_sessions",
    "probe_meteor_subscriptions",
    "probe_meteor_observers",
    "probe_meteor_observe_multiplexers",
    "probe_meteor_method_seconds",
    // The Monti agent's (--monti).
    "monti_pub_response_seconds",
    "monti_method_response_seconds",
    "monti_sessions",
    "monti_pub_active_subs",
    "monti_pub_observers_created_total",
    "monti_pub_observer_handles_reused_total",
    "monti_eventloop_lag_seconds",
    "monti_gc_seconds_total",
    "monti_mongo_pool_checkout_seconds_total",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "nodejs_eventloop_lag_p99_seconds",
    "nodejs_gc_duration_seconds",
    "nodejs_heap_size_used_bytes",
    "http_request_duration_seconds",
    "http_requests_total",
    "go_goroutines",
    "go_gc_duration_seconds",
];

/// `metric{label="value",...}`.
pub fn series_name(s: &Series) -> String {
    if s.labels.is_empty() {
        return s.metric.clone();
    }
    let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{}{{{}}}", s.metric, labels.join(","))
}

/// A value in a few significant digits.
fn number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if v.fract() == 0.0 && a < 1e4 {
        format!("{v:.0}")
    } else if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP hits_total Hits.\n# TYPE hits_total counter\nhits_total{route=\"/a\"} 3\nhits_total{route=\"/b\"} 1\n\
        # TYPE temp gauge\ntemp 21.5\n\
        # TYPE req_seconds histogram\nreq_seconds_bucket{le=\"0.1\"} 1\nreq_seconds_bucket{le=\"1\"} 3\nreq_seconds_bucket{le=\"+Inf\"} 4\nreq_seconds_sum 2.5\nreq_seconds_count 4\n\
        # TYPE lag summary\nlag{quantile=\"0.99\"} 0.02\nlag_sum 1\nlag_count 10\n";

    #[test]
    fn specs() {
        let s = parse_spec("app=http://127.0.0.1:9100").unwrap();
        assert_eq!(
            (s.name.as_str(), s.url.as_str(), s.path.as_str()),
            ("app", "http://127.0.0.1:9100/metrics", "/metrics")
        );
        assert_eq!(parse_spec("x=http://[::1]:9/m?a=1").unwrap().url, "http://[::1]:9/m?a=1");
        for bad in ["app", "=http://x", "app=", "app=https://x/metrics", "app=not a url"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn series_over_scrapes_with_increases_means_and_quantiles() {
        let mut s = Scraper::new(parse_spec("app=http://127.0.0.1:1/metrics").unwrap(), None, 100);
        s.add(0.0, parse(TEXT).unwrap());
        let later = TEXT
            .replace("hits_total{route=\"/a\"} 3", "hits_total{route=\"/a\"} 13")
            .replace("temp 21.5", "temp 23.5")
            .replace("le=\"0.1\"} 1", "le=\"0.1\"} 5")
            .replace("le=\"1\"} 3", "le=\"1\"} 13")
            .replace("le=\"+Inf\"} 4", "le=\"+Inf\"} 14")
            .replace("req_seconds_count 4", "req_seconds_count 14");
        s.add(2.0, parse(&later).unwrap());
        let r = s.finish();
        let find = |m: &str, l: Option<(&str, &str)>| {
            r.series
                .iter()
                .find(|s| s.metric == m && l.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v)))
                .unwrap_or_else(|| panic!("{m} {:?}", r.series))
        };
        let a = find("hits_total", Some(("route", "/a")));
        assert_eq!((a.increase, a.rate_per_s, a.values.clone()), (Some(10.0), Some(5.0), vec![Some(3.0), Some(13.0)]));
        assert_eq!(find("hits_total", Some(("route", "/b"))).increase, Some(0.0));
        let t = find("temp", None);
        assert_eq!((t.mean, t.max), (Some(22.5), Some(23.5)));
        // Read by a scraping thread, the first read is before the load: a gauge's figures are the
        // reads during it (bolide-probe's event-loop p99 is 0 before any load).
        let mut s = Scraper::new(parse_spec("app=http://127.0.0.1:1/metrics").unwrap(), None, 100).before_the_load();
        for (t, v) in [(0.0, 0.0), (1.0, 0.02), (2.0, 0.04)] {
            s.add(t, parse(&format!("# TYPE p99 gauge\np99 {v}\n")).unwrap());
        }
        let p = s.finish();
        assert!((p.series[0].mean.unwrap() - 0.03).abs() < 1e-12 && p.series[0].max == Some(0.04), "{:?}", p.series[0]);
        let h = find("req_seconds", None);
        // 10 observations in the run: 4 under 0.1, 6 in (0.1, 1].
        assert_eq!(h.increase, Some(10.0));
        let [p50, p90, p99] = h.quantiles.unwrap();
        assert!((p50 - (0.1 + 0.9 * (5.0 - 4.0) / 6.0)).abs() < 1e-9, "{p50}");
        assert!((p90 - (0.1 + 0.9 * (9.0 - 4.0) / 6.0)).abs() < 1e-9, "{p90}");
        assert!(p99 <= 1.0);
        assert_eq!(find("lag", Some(("quantile", "0.99"))).kind, Some(Kind::Summary));
        // A histogram's count and sum are counters.
        let c = find("req_seconds_count", None);
        assert_eq!((c.kind, c.increase), (Some(Kind::Counter), Some(10.0)));
        // A counter that drops began again: its new value is its increase since.
        let mut s = Scraper::new(parse_spec("app=http://127.0.0.1:1/metrics").unwrap(), None, 100);
        for (t, v) in [(0.0, 5.0), (1.0, 8.0), (2.0, 2.0)] {
            s.add(t, parse(&format!("# TYPE c counter\nc {v}\n")).unwrap());
        }
        assert_eq!(s.finish().series[0].increase, Some(5.0));
    }

    #[test]
    fn matching_and_the_limit_leave_series_out_and_count_them() {
        let m = regex::Regex::new("^hits").unwrap();
        let mut s = Scraper::new(parse_spec("app=http://127.0.0.1:1/metrics").unwrap(), Some(m), 1);
        s.add(0.0, parse(TEXT).unwrap());
        let r = s.finish();
        assert_eq!(r.series.len(), 1);
        // The second hits_total series (past the limit) and the seven that do not match, once each.
        assert_eq!(r.dropped_series, 8);
        assert_eq!(quantiles(&[(1.0, 0.0), (f64::INFINITY, 0.0)]), None);
        assert_eq!(quantiles(&[(1.0, 0.0), (f64::INFINITY, 4.0)]), Some([1.0, 1.0, 1.0]));
    }

    #[test]
    fn refusals_and_garbage_are_errors_not_panics() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let spec = parse_spec(&format!("x=http://127.0.0.1:{port}/metrics")).unwrap();
        let mut s = Scraper::new(spec, None, 10);
        s.scrape(0.0);
        let r = s.finish();
        assert_eq!((r.scrapes, r.errors, r.t.len()), (1, 1, 0));
        assert!(r.last_error.is_some());
        assert!(dechunk(b"zz\r\n").is_err());
        assert_eq!(dechunk(b"3\r\nabc\r\n0\r\n\r\n").unwrap(), b"abc");
        // Lines that are no samples are passed over.
        assert!(parse("garbage here\n\u{0}\u{1}\n{{{\n").unwrap().is_empty());
    }

    /// A sample with its numbers as text (so that NaN equals NaN).
    type Read = (String, BTreeMap<String, String>, Kind, String, Vec<(String, String)>);

    /// The prometheus-parse crate's reading of a text, in the same form as [`parse`]'s.
    fn reference(text: &str) -> Vec<Read> {
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
        let grouped: std::collections::HashSet<String> = scrape
            .samples
            .iter()
            .filter(|s| matches!(s.value, prometheus_parse::Value::Histogram(_) | prometheus_parse::Value::Summary(_)))
            .map(|s| s.metric.clone())
            .collect();
        let mut out = Vec::new();
        for s in scrape.samples {
            let labels: BTreeMap<String, String> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .filter(|(k, _)| k != "le" && k != "quantile")
                .collect();
            let group = s.metric.strip_suffix("_sum").or_else(|| s.metric.strip_suffix("_count"));
            let (kind, value, buckets) = match s.value {
                prometheus_parse::Value::Counter(v) => (Kind::Counter, v, vec![]),
                prometheus_parse::Value::Gauge(v) => (Kind::Gauge, v, vec![]),
                prometheus_parse::Value::Untyped(v) if group.is_some_and(|g| grouped.contains(g)) => {
                    (Kind::Counter, v, vec![])
                }
                prometheus_parse::Value::Untyped(v) => (Kind::Untyped, v, vec![]),
                prometheus_parse::Value::Histogram(b) => {
                    let mut b: Vec<(f64, f64)> = b.iter().map(|h| (h.less_than, h.count)).collect();
                    b.sort_by(|x, y| x.0.total_cmp(&y.0));
                    (Kind::Histogram, b.last().map_or(0.0, |x| x.1), b)
                }
                prometheus_parse::Value::Summary(qs) => {
                    for q in qs {
                        let mut l = labels.clone();
                        l.insert("quantile".into(), format!("{}", q.quantile));
                        out.push((s.metric.clone(), l, Kind::Summary, format!("{:?}", q.count), vec![]));
                    }
                    continue;
                }
            };
            let buckets = buckets.iter().map(|(a, b)| (format!("{a:?}"), format!("{b:?}"))).collect();
            out.push((s.metric, labels, kind, format!("{value:?}"), buckets));
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    #[test]
    fn the_line_reader_reads_what_prometheus_parse_reads() {
        let texts = [
            TEXT,
            // Labels and a timestamp.
            "# TYPE up gauge\nup{job=\"a\",path=\"/x\"} 1 1700000000000\nup{job=\"c\"} 0\n",
            // Untyped samples, values in every notation, comments that are no TYPE.
            "# HELP x nothing\n# random words\nx 1e3\ny -Inf\nz +Inf\nw 0.000001\n",
            // A labelled histogram of two series, and a summary with labels.
            "# TYPE h histogram\nh_bucket{a=\"1\",le=\"0.5\"} 1\nh_bucket{a=\"1\",le=\"+Inf\"} 2\nh_sum{a=\"1\"} 0.7\nh_count{a=\"1\"} 2\n\
             h_bucket{a=\"2\",le=\"0.5\"} 0\nh_bucket{a=\"2\",le=\"+Inf\"} 3\nh_sum{a=\"2\"} 9\nh_count{a=\"2\"} 3\n\
             # TYPE s summary\ns{m=\"GET\",quantile=\"0.5\"} 0.1\ns{m=\"GET\",quantile=\"0.99\"} 0.4\ns_sum{m=\"GET\"} 5\ns_count{m=\"GET\"} 20\n",
        ];
        for text in texts {
            let mut ours: Vec<_> = parse(text)
                .unwrap()
                .into_iter()
                .map(|(m, l, k, v, b)| {
                    let b = b.iter().map(|(a, c)| (format!("{a:?}"), format!("{c:?}"))).collect();
                    (m, l, k, format!("{v:?}"), b)
                })
                .collect();
            ours.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            assert_eq!(ours, reference(text), "{text}");
        }
        // What the crate drops and the format allows: a trailing comma in a label set, escapes,
        // commas and braces in label values.
        let p = parse("a{x=\"1\",} 2\nb{q=\"say \\\"hi\\\"\\n\",r=\"{a,b}\"} 3\n").unwrap();
        assert_eq!((p[0].0.as_str(), p[0].1["x"].as_str(), p[0].3), ("a", "1", 2.0));
        // The line break a label value holds is the server's text: kept printable, escaped.
        assert_eq!((p[1].1["q"].as_str(), p[1].1["r"].as_str(), p[1].3), ("say \"hi\"\\n", "{a,b}", 3.0));
    }

    #[test]
    fn hostile_endpoints_cost_a_count_not_memory() {
        let spec = || parse_spec("app=http://127.0.0.1:1/metrics").unwrap();
        // 20,000 series a scrape, of new names at every scrape: at most the limit kept, at most
        // 4,096 names remembered, and at least the 20,000 of one scrape counted.
        let mut s = Scraper::new(spec(), None, 10);
        for t in 0..5 {
            let text: String = (0..20_000).map(|i| format!("m_{t}_{i} 1\n")).collect();
            s.take_text(t as f64, Ok(text));
        }
        assert_eq!(s.result.series.len(), 10);
        assert_eq!(s.dropped.len(), DROPPED_NAMES);
        assert_eq!(s.finish().dropped_series, 20_000);
        // A histogram of 100,000 buckets: 256 kept (every k-th and the last), their counts exact.
        let mut s = Scraper::new(spec(), None, 10);
        for (t, scale) in [(0.0, 1.0), (1.0, 3.0)] {
            let mut text = String::from("# TYPE big histogram\n");
            for i in 1..=100_000 {
                text.push_str(&format!("big_bucket{{le=\"{i}\"}} {}\n", i as f64 * scale));
            }
            text.push_str(&format!("big_bucket{{le=\"+Inf\"}} {}\nbig_bucket{{le=\"NaN\"}} 1\n", 100_000.0 * scale));
            s.take_text(t, Ok(text));
        }
        let r = s.finish();
        let big = &r.series[0];
        assert_eq!(big.increase, Some(200_000.0));
        assert!(big.buckets.len() < MAX_BUCKETS && big.buckets.len() > MAX_BUCKETS / 2, "{}", big.buckets.len());
        assert!(big.buckets.iter().all(|(le, c)| *c == 2.0 * le), "each kept bucket's count is exact");
        assert!(r.dropped_buckets > 99_000, "{}", r.dropped_buckets);
        // The median of 200,000 observations spread evenly up to 100,000: about 50,000.
        let [p50, _, _] = big.quantiles.unwrap();
        assert!((p50 - 50_000.0).abs() < 500.0, "{p50}");
        // NaN bounds and counts are left out: the document holds numbers only and reads back.
        let mut s = Scraper::new(spec(), None, 10);
        s.take_text(
            0.0,
            Ok("# TYPE n histogram\nn_bucket{le=\"NaN\"} 1\nn_bucket{le=\"1\"} NaN\nn_bucket{le=\"+Inf\"} NaN\n"
                .into()),
        );
        s.take_text(
            1.0,
            Ok("# TYPE n histogram\nn_bucket{le=\"NaN\"} 2\nn_bucket{le=\"1\"} NaN\nn_bucket{le=\"+Inf\"} NaN\n"
                .into()),
        );
        let r = s.finish();
        let text = serde_json::to_string(&r).unwrap();
        let back = serde_json::from_str::<ScrapeResult>(&text).unwrap();
        // Buckets and quantiles come back as written (a NaN value reads back as no value).
        assert_eq!((&back.series[0].buckets, back.series[0].quantiles), (&r.series[0].buckets, r.series[0].quantiles));
        assert_eq!(back.series[0].values, [None, None]);
        assert_eq!(r.series[0].quantiles, None);
        // What an older bolide wrote of such a histogram (NaN as null) reads back too.
        let old =
            text.replace("\"values\":", "\"quantiles\":[null,1.0,null],\"buckets\":[[1.0,null],[2.0,3.0]],\"values\":");
        let back = serde_json::from_str::<ScrapeResult>(&old).unwrap();
        assert_eq!((back.series[0].quantiles, back.series[0].buckets.clone()), (None, vec![(2.0, 3.0)]));
    }

    #[test]
    fn a_whole_answer_is_told_without_waiting_for_the_close() {
        assert!(whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok"));
        assert!(whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"));
        assert!(!whole(b"HTTP/1.1 200 OK\r\n\r\nuntil the close"));
    }
}

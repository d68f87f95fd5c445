//! The result document: one versioned JSON file per run, the only contract between a run and
//! everything that reads it later (reports, comparisons, merges). `schema/result.schema.json` in
//! the repository describes it; a test validates real output against that schema.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::problem::Problem;
use crate::proto::http::expect::StatusSet;

pub use super::envelope::{Host, OutputResult, Tool, FORMAT, OLDEST_VERSION, VERSION};

super::envelope::result_document! {
    /// The result document of an HTTP (`bolide http`) run.
    pub struct ResultDoc {
        pub settings: HttpSettings,
        pub targets: Vec<String>,
        pub summary: Summary,
        pub per_target: Vec<TargetSummary>,
        pub timeline: Vec<Second>,
        pub histograms: Histograms,
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HttpSettings {
    pub connections: usize,
    pub threads: usize,
    /// Set when the run was bounded by time.
    pub duration_s: Option<f64>,
    /// Set when the run was bounded by a request count.
    pub requests: Option<u64>,
    /// Set for a fixed-rate (open model) run, requests per second across all connections.
    pub rate_per_s: Option<f64>,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body_bytes: usize,
    pub timeout_s: f64,
    pub keep_alive: bool,
    pub insecure: bool,
    /// Whether a request whose kept-alive connection turned out closed is sent again on a new
    /// one (GET, HEAD, PUT, DELETE, OPTIONS, TRACE; others with --retry-non-idempotent).
    #[serde(default)]
    pub retry_closed: bool,
    /// The statuses that count as success (`--expect-status`, `200-399` by default): a response
    /// of any other is a failed request of class `status`. Absent in documents written before
    /// failed statuses counted as failed requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
    /// The segment of the plan this instance ran (`--segment I/N`); absent for a whole plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<crate::segment::Segment>,
    /// HTTP/2: `h2` (over TLS, ALPN) or `h2c` (in clear, prior knowledge); absent for HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// HTTP/2: concurrent streams per connection (`--streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<usize>,
}

/// Latency statistics of a histogram, microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub max_us: u64,
    pub p50_us: u64,
    pub p75_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub p99_99_us: u64,
}

/// Distribution of the per-second response counts over the run's whole seconds (autocannon's
/// "Req/Sec" table).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RateDistribution {
    pub samples: usize,
    pub p1: f64,
    pub p2_5: f64,
    pub p50: f64,
    pub p97_5: f64,
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Complete responses, any status.
    pub responses: u64,
    /// Failed requests, all classes: transport errors (no complete response) and responses whose
    /// status was not expected (class `status`, also counted in `responses`).
    pub errors: u64,
    /// Requests in flight when a timed or interrupted run ended: neither response nor error.
    pub unfinished: u64,
    /// Requests sent (responses + transport errors + those cut off when the run ended).
    pub sent: u64,
    pub duration_s: f64,
    pub requests_per_s: f64,
    pub bytes_in: u64,
    pub bytes_in_per_s: f64,
    /// Connections opened.
    pub connects: u64,
    /// Requests sent a second time on a new connection after the kept-alive one turned out
    /// closed (the server read them twice, or not at all the first time).
    #[serde(default)]
    pub retries: u64,
    pub latency: Latency,
    pub rate: RateDistribution,
    /// Responses by status code.
    pub status: BTreeMap<String, u64>,
    /// Responses whose status is not 2xx or 3xx.
    pub non_2xx_3xx: u64,
    /// Failed requests by class (every class present, zeros included); `status`: responses whose
    /// status was not expected (their codes are in `status`).
    pub errors_by_class: BTreeMap<String, u64>,
    /// `--rps`: sends more than `late_threshold_us` behind their schedule.
    pub late_sends: u64,
    /// `--rps`: sends the schedule asked for that never went out before the run ended.
    pub missed_sends: u64,
    /// `--rps`: the worst delay of a send behind its schedule.
    pub max_lag_us: u64,
    /// `--rps`: the median and 99th percentile of the sends' delay behind their schedule (the
    /// generator's own precision).
    #[serde(default)]
    pub lag_p50_us: u64,
    #[serde(default)]
    pub lag_p99_us: u64,
    /// How far behind its schedule a send must be to count as late.
    #[serde(default)]
    pub late_threshold_us: u64,
}

impl Summary {
    /// Responses whose status was not expected (failed requests of class `status`).
    pub fn failed_statuses(&self) -> u64 {
        self.errors_by_class.get("status").copied().unwrap_or(0)
    }

    /// Requests that ended, answered or failed: the base of the error rate.
    pub fn finished(&self) -> u64 {
        self.responses + self.errors - self.failed_statuses().min(self.errors)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TargetSummary {
    pub url: String,
    pub responses: u64,
    pub errors: u64,
    pub requests_per_s: f64,
    pub bytes_in: u64,
    pub connects: u64,
    #[serde(default)]
    pub retries: u64,
    pub latency: Latency,
    pub status: BTreeMap<String, u64>,
    pub errors_by_class: BTreeMap<String, u64>,
    /// This target's latency histogram, HdrHistogram V2 deflate, base64.
    pub latency_histogram: String,
}

/// One second of the run, all targets together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Second {
    /// Seconds since the start at which this interval begins.
    pub t: u32,
    /// Length of the interval in seconds (the last one may be shorter).
    pub span_s: f64,
    pub responses: u64,
    pub errors: u64,
    pub bytes_in: u64,
    pub latency_mean_us: f64,
    pub latency_p50_us: u64,
    /// Absent (0) in documents of format version 1.
    #[serde(default)]
    pub latency_p90_us: u64,
    pub latency_p99_us: u64,
    pub latency_max_us: u64,
    /// The second's latency histogram (HdrHistogram V2 deflate, base64), kept by a segment's run
    /// (`--segment`) so that `bolide merge` computes the merged seconds' percentiles exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_histogram: Option<String>,
    /// What the outputs (`--out prometheus-rw=URL`, `otlp=URL`) send besides; never in the document.
    #[serde(skip)]
    pub detail: Option<Box<SecondDetail>>,
}

/// A second's breakdowns for the outputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecondDetail {
    /// Connections opened.
    pub connects: u64,
    /// Responses by status (0: outside 100-599).
    pub statuses: Vec<(u16, u64)>,
    /// Errors by class name, the classes with none left out.
    pub error_classes: Vec<(&'static str, u64)>,
    /// Each target's responses and latency histogram (HdrHistogram V2, base64), in the plan's
    /// order; empty for a run of one URL.
    pub targets: Vec<(u64, String)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Histograms {
    /// All targets' latency, HdrHistogram V2 deflate, base64.
    pub latency_us: String,
}

impl ResultDoc {
    /// A document written before failed statuses counted (format version 3 and older, no
    /// `expect_status`) read as this bolide counts: its responses outside 200-399 become failed
    /// requests of class `status`, overall and per URL, so that every reader (the report's band,
    /// thresholds judged again, compare, merge) says the same of an old run as of a new one. Its
    /// seconds keep the errors they had.
    pub fn counted_as_now(mut self) -> ResultDoc {
        if self.settings.expect_status.is_some() {
            return self;
        }
        let failed = |status: &BTreeMap<String, u64>| -> u64 {
            status
                .iter()
                .filter(|(c, _)| c.parse::<u16>().map_or(true, |c| !(200..400).contains(&c)))
                .map(|(_, n)| n)
                .sum()
        };
        let n = failed(&self.summary.status);
        self.summary.errors += n;
        self.summary.errors_by_class.insert("status".into(), n);
        for t in &mut self.per_target {
            let n = failed(&t.status);
            t.errors += n;
            t.errors_by_class.insert("status".into(), n);
        }
        self.settings.expect_status = Some(StatusSet::default().to_string());
        self
    }

    /// What failed, for people: each unexpected status as `status 500` with its count, then the
    /// transport errors' classes, most frequent first (classes with none left out).
    pub fn failures(&self) -> Vec<(String, u64)> {
        let s = &self.summary;
        let mut out: Vec<(String, u64)> = Vec::new();
        if s.failed_statuses() > 0 {
            let expected = self.settings.expect_status.as_deref().and_then(|e| StatusSet::parse(e).ok());
            let expected = expected.unwrap_or_default();
            for (code, n) in &s.status {
                let failed = code.parse::<u16>().map_or(true, |c| !expected.contains(c));
                if failed && *n > 0 {
                    out.push((format!("status {code}"), *n));
                }
            }
        }
        out.extend(classes_by_count(&s.errors_by_class, &["status"]));
        out
    }

    /// Reads a document, refusing other formats and newer versions with a clear reason.
    pub fn from_json(text: &str) -> Result<ResultDoc, Problem> {
        let head = Head::of(text)?;
        match head.format.as_deref() {
            Some(FORMAT) => {}
            other => return Err(format!("not a bolide result (format is {other:?})").into()),
        }
        check_version(head.version)?;
        serde_json::from_str(text)
            .map(ResultDoc::counted_as_now)
            .map_err(|e| Problem::from(format!("malformed result: {e}")))
    }
}

/// Failure classes that counted any, the most frequent first (`skip`: classes told otherwise).
pub fn classes_by_count(by_class: &BTreeMap<String, u64>, skip: &[&str]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> =
        by_class.iter().filter(|(c, n)| **n > 0 && !skip.contains(&c.as_str())).map(|(c, n)| (c.clone(), *n)).collect();
    out.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out
}

/// A document's format, kind and version, read without building the rest: the whole text is
/// parsed once more, typed, only when these say it is a result this bolide reads (so a large
/// document costs its text and its typed form, never a `Value` tree as well).
#[derive(Debug, Default, Deserialize)]
pub struct Head {
    pub format: Option<String>,
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub version: Option<u64>,
}

impl Head {
    pub fn of(text: &str) -> Result<Head, Problem> {
        serde_json::from_str(text).map_err(|e| Problem::from(format!("not JSON ({e})")))
    }

    /// A result document this bolide reads: its kind, `"http"` or `"ddp"`; else why not.
    pub fn check(&self) -> Result<&'static str, Problem> {
        match self.format.as_deref() {
            Some(FORMAT) => {}
            Some(other) => return Err(format!("not a bolide result (format {other:?})").into()),
            None => return Err("not a bolide result (no \"format\" field)".into()),
        }
        let kind = match self.kind.as_deref() {
            Some("http") => "http",
            Some("ddp") => "ddp",
            other => return Err(format!("a result of unknown kind {other:?}").into()),
        };
        check_version(self.version)?;
        Ok(kind)
    }
}

/// A version that is not a whole number reads as none (and is refused as such).
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(serde_json::Value::deserialize(d)?.as_u64())
}

/// Whether this bolide reads a result document's format version; the reason when it does not.
pub fn check_version(version: Option<u64>) -> Result<(), Problem> {
    match version {
        Some(v) if (u64::from(OLDEST_VERSION)..=u64::from(VERSION)).contains(&v) => Ok(()),
        Some(v) if v > u64::from(VERSION) => Err(format!(
            "written by a newer bolide (result format version {v}; this one reads versions {OLDEST_VERSION} to {VERSION}): upgrade bolide to read it"
        ).into()),
        Some(v) => Err(format!(
            "result format version {v} is older than any this bolide reads (versions {OLDEST_VERSION} to {VERSION})"
        ).into()),
        None => Err("the document has no format version (\"version\")".into()),
    }
}

impl super::view::Reading for ResultDoc {
    fn kind(&self) -> &'static str {
        "http"
    }

    fn segment(&self) -> Option<crate::segment::Segment> {
        self.settings.segment
    }

    fn threads(&self) -> usize {
        self.settings.threads
    }

    fn workload(&self) -> String {
        let paths: Vec<String> = self.targets.iter().map(|t| path_of(t)).collect();
        format!("http {}", paths.join(" "))
    }

    fn workload_parts(&self) -> Vec<(&'static str, String)> {
        let s = &self.settings;
        let bound = match (s.duration_s, s.requests) {
            (_, Some(n)) => format!("{n} requests"),
            (Some(t), None) => format!("{t} s"),
            (None, None) => "unbounded".into(),
        };
        vec![
            ("workload", self.workload()),
            ("connections", s.connections.to_string()),
            ("length", bound),
            ("rate", s.rate_per_s.map_or("as fast as possible".into(), |r| format!("{r} req/s"))),
            ("method", s.method.clone()),
            ("body", format!("{} bytes", s.body_bytes)),
            ("keep-alive", s.keep_alive.to_string()),
        ]
    }

    fn ended_and_failed(&self) -> (u64, u64) {
        (self.summary.finished(), self.summary.errors)
    }

    fn errors(&self) -> u64 {
        self.summary.errors
    }

    fn failures(&self) -> Vec<(String, u64)> {
        ResultDoc::failures(self)
    }

    fn errors_by_class(&self) -> &BTreeMap<String, u64> {
        &self.summary.errors_by_class
    }

    fn outcomes(&self) -> (&'static str, Vec<(String, u64)>) {
        (
            "Responses by status, errors by class",
            self.summary.status.iter().map(|(code, n)| (code.clone(), *n)).collect(),
        )
    }

    fn latency(&self) -> Result<Option<hdrhistogram::Histogram<u64>>, String> {
        let h = super::hist::decode(&self.histograms.latency_us)?;
        Ok((!h.is_empty()).then_some(h))
    }

    fn no_latency(&self) -> &'static str {
        "no response completed"
    }

    fn step_latency(&self, _name: &str) -> Result<hdrhistogram::Histogram<u64>, Problem> {
        Err("an HTTP run has no steps".into())
    }

    fn units_per_s(&self) -> Result<f64, Problem> {
        super::view::per_second(self.summary.responses, self.summary.duration_s)
    }

    fn time_s(&self) -> f64 {
        self.summary.duration_s
    }

    fn speed_s(&self) -> f64 {
        let rps = self.summary.requests_per_s;
        if rps > 0.0 {
            1.0 / rps
        } else {
            f64::INFINITY
        }
    }

    fn requests_per_s(&self) -> Option<f64> {
        Some(self.summary.requests_per_s)
    }

    fn mean_p99_ms(&self) -> (Option<f64>, Option<f64>) {
        let s = &self.summary;
        (
            (s.responses > 0).then(|| s.latency.mean_us / 1000.0),
            (s.responses > 0).then(|| s.latency.p99_us as f64 / 1000.0),
        )
    }

    fn unmeasured(&self) -> Option<String> {
        (self.summary.sent == 0).then(|| "no request went out".into())
    }

    /// Too few connections for the rate: by Little's law C connections at a mean latency of L
    /// carry at most C / L requests per second; past that, missed sends are bolide's shape, not
    /// the server failing.
    fn shape_limit(&self, max_p99_ms: Option<f64>) -> Option<String> {
        let s = &self.summary;
        let scheduled = s.sent + s.missed_sends;
        let rate = self.settings.rate_per_s.filter(|_| s.missed_sends * 100 > scheduled)?;
        let mean_s = s.latency.mean_us / 1e6;
        let connections = self.settings.connections as f64;
        let ceiling = if mean_s > 0.0 { connections / mean_s } else { f64::INFINITY };
        let errors_small = s.errors * 100 <= scheduled.max(1);
        let p99_within = max_p99_ms.is_none_or(|l| (s.latency.p99_us as f64) / 1e3 <= l);
        if !(ceiling < rate * 1.1 && errors_small && p99_within) {
            return None;
        }
        let need = (rate * mean_s * 1.5).ceil().max(connections + 1.0);
        Some(format!(
            "too few connections for the rate: {} connections at {:.2} ms mean latency carry at most {:.0} req/s (Little's law), below {rate} req/s; raise -c to at least {need:.0}",
            self.settings.connections,
            mean_s * 1e3,
            ceiling
        ))
    }

    fn shortfalls(&self) -> Vec<String> {
        Vec::new()
    }

    fn behind_schedule(&self) -> Option<super::view::Behind> {
        let s = &self.summary;
        let scheduled = s.sent + s.missed_sends;
        if s.missed_sends == 0 || s.missed_sends * 100 <= scheduled {
            return None;
        }
        let mean_s = s.latency.mean_us / 1e6;
        Some(super::view::Behind {
            missed: s.missed_sends,
            scheduled,
            rate_per_s: self.settings.rate_per_s,
            ceiling_per_s: if mean_s > 0.0 { self.settings.connections as f64 / mean_s } else { f64::INFINITY },
        })
    }

    fn over_time(&self, what: super::view::OverTime) -> Vec<(f64, f64)> {
        use super::view::OverTime;
        let seconds = self.timeline.iter();
        match what {
            OverTime::Responses => {
                seconds.filter(|s| s.span_s > 0.0).map(|s| (f64::from(s.t), s.responses as f64 / s.span_s)).collect()
            }
            OverTime::P99 => seconds
                .filter(|s| s.responses > 0)
                .map(|s| (f64::from(s.t), s.latency_p99_us as f64 / 1000.0))
                .collect(),
            OverTime::UsersAlive | OverTime::Steps => Vec::new(),
        }
    }
}

/// The path (and query) of a URL, `/` when it has none.
fn path_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        },
        Err(_) => url.to_string(),
    }
}

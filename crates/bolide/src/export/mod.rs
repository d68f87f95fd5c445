//! Sending a run's figures to the systems teams already run (`--out KIND=DEST`), each second as the
//! run makes it, of `http` and `run`: Prometheus remote write (`promrw.rs` encodes) and OTLP/HTTP
//! metrics (`otlp.rs` encodes); this keeps the run's series and sends them (`post.rs`).
//!
//! The load threads never wait for it: each second is encoded on the thread that collects the
//! seconds and handed to a sender thread of its own (`bolide-export`) through a bounded queue; a
//! slow or dead receiver fills the queue and the seconds that do not fit are dropped and counted.
//! A failed POST (refused, reset, timed out; for remote write 5xx and 429, for OTLP 429, 502, 503
//! and 504, as its specification says) is tried again after 0.2, 0.4 and 0.8 s; other answers
//! are not (the receiver will not take it). When the run ends the rest of its
//! seconds are sent and the queue is given up to 10 s to drain. What was sent, retried and dropped
//! goes into the result document (`outputs`).

pub mod otlp;
pub mod post;
pub mod promrw;
pub(crate) mod proto;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use promrw::NativeHistogram;

/// The kinds of receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `prometheus-rw=URL`.
    PrometheusRw,
    /// `otlp=URL`.
    Otlp,
}

impl Kind {
    /// How this kind of receiver is spoken to.
    pub fn receiver(self) -> &'static dyn Receiver {
        match self {
            Kind::PrometheusRw => &promrw::RemoteWrite,
            Kind::Otlp => &otlp::Otlp,
        }
    }

    /// As `--out` and the document name it.
    pub fn name(self) -> &'static str {
        self.receiver().name()
    }
}

/// A kind of receiver (`--out NAME=URL`): its name, the URL it is posted to, its headers and
/// authorization, which failures are worth another try, what its answer says was not taken, and
/// how the run's points are encoded. The queue, the sender thread, the retries and the counts are
/// [`Exporter`]'s, the same for every receiver; a new receiver is one implementation (its encoding
/// in a file of its own) and a name in `plan::outputs`.
pub trait Receiver: Send + Sync {
    /// As `--out` and the document name it.
    fn name(&self) -> &'static str;
    /// Environment variables naming a CA file an https:// receiver is checked against besides the
    /// Mozilla roots (the first set wins).
    fn ca_env(&self) -> &'static [&'static str];
    /// The URL posted to, from the one given.
    fn endpoint(&self, given: url::Url) -> url::Url {
        given
    }
    /// Headers besides the request's own (Authorization comes from [`Receiver::auth`]).
    fn headers(&self) -> Vec<(String, String)>;
    /// The Authorization header's value, from the environment or the URL's credentials.
    fn auth(&self, url: &url::Url) -> promrw::Auth;
    /// Whether an answer of this status (not 2xx) may pass on another try.
    fn retry(&self, status: u16) -> bool;
    /// What a 2xx answer's body says was not taken: how many points, and why.
    fn partial(&self, _body: &[u8]) -> Option<(i64, String)> {
        None
    }
    /// The run's own labels (remote write) or resource attributes (OTLP), before `testid` and the
    /// labels of the command.
    fn run_labels(&self) -> Vec<(String, String)>;
    /// One request of `points` at `ms` (ms since the epoch), the run started at `started_ns`,
    /// with the run's `labels`.
    fn encode(&self, labels: &[(String, String)], started_ns: u64, ms: i64, points: Vec<Point>) -> Vec<u8>;
}

/// One series' value at a moment: its remote write name, labels besides the run's, and value.
#[derive(Debug, Clone)]
pub struct Point {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub enum Value {
    /// A total since the run began.
    Counter(f64),
    Gauge(f64),
    /// Seconds, since the run began.
    Histogram(NativeHistogram),
}

pub use crate::stats::result::OutputResult;

/// The server's own series sent with each second, at most.
const SCRAPED: usize = 1000;
/// Requests waiting for the sender (a second each).
const QUEUE: usize = 120;
/// How long the end of a run waits for the queue to drain.
const DRAIN: Duration = Duration::from_secs(10);
/// One POST's time limit.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Waits before each try again.
const BACKOFF: [Duration; 3] = [Duration::from_millis(200), Duration::from_millis(400), Duration::from_millis(800)];

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    dropped: AtomicU64,
    retried: AtomicU64,
    samples_sent: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// One output of a run (`prometheus-rw` or `otlp`).
pub struct Exporter {
    kind: Kind,
    url: url::Url,
    testid: String,
    /// The run's labels (remote write) or resource attributes (OTLP).
    labels: Vec<(String, String)>,
    started: SystemTime,
    tx: Option<SyncSender<(Vec<u8>, u64)>>,
    done: mpsc::Receiver<()>,
    counts: Arc<Counts>,
    /// The run's seconds handed over, and the next one's number.
    seconds: u64,
    next_t: u32,
    /// The last timestamp sent, ms.
    last_ms: i64,
    /// The watched processes' latest CPU (% of one core) and RSS (bytes), sent with each second.
    processes: Vec<(String, f64, f64)>,
    /// The scraped, probed and Monti series' latest values, sent with each second as gauges.
    scraped: Vec<Point>,
    /// Counters' totals and histograms so far, by metric and extra labels.
    counters: BTreeMap<Key, f64>,
    histograms: BTreeMap<Key, NativeHistogram>,
    /// The run's URLs as `target` labels, when there are several (each its own series).
    targets: Vec<String>,
}

/// A URL as a label's value: without user, password, query or fragment (they may hold secrets).
pub fn target_label(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            let _ = u.set_username("");
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => crate::redact::text(url.split(['?', '#']).next().unwrap_or("")),
    }
}

/// The PEM file of the CA an https:// receiver's certificate is checked against besides the
/// Mozilla roots: `OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE`, else `OTEL_EXPORTER_OTLP_CERTIFICATE`
/// (OTLP), `BOLIDE_RW_CA_FILE` (remote write).
pub fn ca_file(kind: Kind) -> Option<std::path::PathBuf> {
    kind.receiver()
        .ca_env()
        .iter()
        .find_map(|n| std::env::var_os(n).filter(|v| !v.is_empty()))
        .map(std::path::PathBuf::from)
}

/// Where and how a sender posts.
struct Delivery {
    receiver: &'static dyn Receiver,
    url: url::Url,
    /// For an https:// receiver.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Headers besides the request's own (authorization among them: never shown).
    headers: Vec<(String, String)>,
}

impl Delivery {
    fn new(kind: Kind, url: &url::Url) -> Delivery {
        let receiver = kind.receiver();
        let mut target = url.clone();
        let _ = target.set_password(None);
        let _ = target.set_username("");
        let mut headers = receiver.headers();
        if let Some(v) = receiver.auth(url).value() {
            if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
                headers.push(("Authorization".into(), v));
            }
        }
        // Checked when the plan was made (`plan::outputs`); a file gone since is the POSTs' error.
        let tls = (url.scheme() == "https").then(|| post::tls_config(ca_file(kind).as_deref()).ok()).flatten();
        Delivery { receiver, url: target, tls, headers }
    }

    /// Posts a body: Ok when taken (a note when only partly), Err((why, try again?)).
    fn post(&self, body: &[u8]) -> Result<Option<String>, (String, bool)> {
        let headers: Vec<(&str, &str)> = self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        match post::post(&self.url, self.tls.as_ref(), &headers, body, TIMEOUT) {
            Err(f) => Err((f.why, f.retry)),
            Ok(a) if (200..300).contains(&a.code) => Ok(self.receiver.partial(&a.body).map(|(n, why)| {
                // The receiver's words, without what the user had bolide send it (a token it
                // echoes); bolide's own headers (the content's type) are no secret.
                let own = ["content-type", "content-encoding", "x-prometheus-remote-write-version"];
                let given: Vec<(String, String)> = self
                    .headers
                    .iter()
                    .filter(|(k, _)| !own.contains(&k.to_ascii_lowercase().as_str()))
                    .cloned()
                    .collect();
                let why = crate::redact::unechoed(&why, &given);
                format!(
                    "the receiver rejected {n} points{}",
                    if why.is_empty() { String::new() } else { format!(": {why}") }
                )
            })),
            Ok(a) => Err((format!("HTTP {}", a.code), self.receiver.retry(a.code))),
        }
    }
}

type Key = (String, Vec<(String, String)>);
/// Labels besides the run's.
type Labels = Vec<(String, String)>;

/// One second's figures, as a run hands them over: counters' increases, gauges' values, and
/// latency histograms (HdrHistogram V2, base64, as the document keeps them).
#[derive(Default)]
struct Second<'a> {
    t: u32,
    span_s: f64,
    increases: Vec<(&'static str, Labels, f64)>,
    gauges: Vec<(&'static str, f64)>,
    histograms: Vec<(&'static str, Labels, Option<&'a str>)>,
}

/// A DDP second's counters' increases, a protocol's own counts among them
/// (`bolide_ddp_events_total{event="llm.output_tokens"}`, from the second they first move).
fn ddp_increases(c: &crate::stats::vu::VuSecond) -> Vec<(&'static str, Labels, f64)> {
    let mut out: Vec<(&'static str, Labels, f64)> = vec![
        ("bolide_ddp_steps_total", vec![], c.steps as f64),
        ("bolide_ddp_step_errors_total", vec![], c.step_errors as f64),
        ("bolide_ddp_users_launched_total", vec![], c.launched as f64),
        ("bolide_ddp_users_completed_total", vec![], c.completed as f64),
        ("bolide_ddp_users_failed_total", vec![], c.failed as f64),
        ("bolide_ddp_messages_in_total", vec![], c.messages_in as f64),
        ("bolide_ddp_messages_out_total", vec![], c.messages_out as f64),
    ];
    let events =
        c.events.iter().map(|(name, n)| ("bolide_ddp_events_total", vec![("event".into(), name.clone())], *n as f64));
    out.extend(events);
    out
}

/// A DDP second's latency histograms: each step's (`step` label) and each of a protocol's own
/// latencies (`bolide_ddp_measure_seconds{measure="llm.ttft"}`).
fn ddp_histograms(s: &crate::stats::vu::DdpSecond) -> Vec<(&'static str, Labels, Option<&str>)> {
    let steps = s.step_latency.iter().map(|(name, l)| {
        ("bolide_ddp_step_latency_seconds", vec![("step".to_string(), name.clone())], l.histogram.as_deref())
    });
    let measures = s.measures.iter().map(|(name, l)| {
        ("bolide_ddp_measure_seconds", vec![("measure".to_string(), name.clone())], l.histogram.as_deref())
    });
    steps.chain(measures).collect()
}

impl Exporter {
    /// Starts the sender; the run's series carry `testid` and `extra` labels; `targets` (the
    /// run's URLs, when several) get series of their own.
    pub fn start(
        kind: Kind,
        url: url::Url,
        testid: String,
        extra: Vec<(String, String)>,
        targets: Vec<String>,
    ) -> Exporter {
        let url = kind.receiver().endpoint(url);
        let (tx, rx) = sync_channel::<(Vec<u8>, u64)>(QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel();
        let counts = Arc::new(Counts::default());
        let c = Arc::clone(&counts);
        let delivery = Delivery::new(kind, &url);
        let spawned = std::thread::Builder::new().name("bolide-export".into()).spawn(move || {
            for (body, samples) in rx {
                send(&delivery, &body, samples, &c);
            }
            let _ = done_tx.send(());
        });
        if let Err(e) = spawned {
            *counts.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("no sender thread: {e}"));
        }
        let mut labels = kind.receiver().run_labels();
        labels.push(("testid".to_string(), testid.clone()));
        labels.extend(extra);
        Exporter {
            kind,
            url,
            testid,
            labels,
            started: SystemTime::now(),
            tx: Some(tx),
            done,
            counts,
            seconds: 0,
            next_t: 0,
            last_ms: 0,
            processes: Vec::new(),
            scraped: Vec::new(),
            counters: BTreeMap::new(),
            histograms: BTreeMap::new(),
            targets: targets.iter().map(|t| target_label(t)).collect(),
        }
    }

    /// Hands over one second of an HTTP run (its histogram in `latency_histogram`), once.
    pub fn http_second(&mut self, s: &crate::stats::result::Second) {
        let mut increases = vec![
            ("bolide_http_responses_total", vec![], s.responses as f64),
            ("bolide_http_errors_total", vec![], s.errors as f64),
        ];
        let mut histograms = vec![("bolide_http_latency_seconds", vec![], s.latency_histogram.as_deref())];
        if let Some(d) = s.detail.as_deref() {
            increases.push(("bolide_http_connects_total", vec![], d.connects as f64));
            for (status, n) in &d.statuses {
                let status = if *status == 0 { "other".to_string() } else { status.to_string() };
                increases.push(("bolide_http_responses_by_status_total", vec![("status".into(), status)], *n as f64));
            }
            for (class, n) in &d.error_classes {
                increases.push((
                    "bolide_http_errors_by_class_total",
                    vec![("class".into(), class.to_string())],
                    *n as f64,
                ));
            }
            for ((n, h), target) in d.targets.iter().zip(&self.targets) {
                let label = vec![("target".to_string(), target.clone())];
                increases.push(("bolide_http_target_responses_total", label.clone(), *n as f64));
                histograms.push(("bolide_http_target_latency_seconds", label, Some(h.as_str())));
            }
        }
        self.second(Second { t: s.t, span_s: s.span_s, increases, gauges: vec![], histograms });
    }

    /// Hands over one second of a DDP run (each step's histogram in its `step_latency`, each of a
    /// protocol's measures in `measures`), once.
    pub fn ddp_second(&mut self, s: &crate::stats::vu::DdpSecond) {
        let histograms = ddp_histograms(s);
        self.second(Second {
            t: s.t,
            span_s: 1.0,
            increases: ddp_increases(&s.counts),
            gauges: vec![("bolide_ddp_users_alive", s.users_alive as f64)],
            histograms,
        });
    }

    /// The watched processes as last sampled (`--monitor`, `--spawn`): sent as gauges with the
    /// next seconds.
    pub fn watch(&mut self, processes: &[crate::monitor::MonitorResult]) {
        self.processes = processes
            .iter()
            .filter_map(|m| m.samples.last().map(|(_, cpu, rss)| (m.name.clone(), *cpu, *rss as f64)))
            .collect();
    }

    /// The server's own series as last read (`--scrape`, `--probe`, `--monti`): sent as gauges
    /// with the next seconds, each as `bolide_scraped_` and its name (a histogram's observations
    /// as `_count`; summaries' quantiles left out), with an `endpoint` label and its own labels (one
    /// named like a run label gets `scraped_` before it); at most [`SCRAPED`] of them.
    pub fn scraped(&mut self, endpoints: &[crate::monitor::scrape::ScrapeResult]) {
        use crate::monitor::scrape::Kind as K;
        let ours = ["testid", "job", "label", "target", "segment", "endpoint", "__name__", "process"];
        self.scraped.clear();
        for e in endpoints {
            for series in &e.series {
                let Some(value) = series.values.iter().rev().find_map(|v| *v) else { continue };
                let suffix = match series.kind {
                    Some(K::Summary) => continue,
                    Some(K::Histogram) => "_count",
                    _ => "",
                };
                if self.scraped.len() >= SCRAPED {
                    return;
                }
                let mut labels = vec![("endpoint".to_string(), e.name.clone())];
                for (k, v) in &series.labels {
                    let k = if ours.contains(&k.as_str()) { format!("scraped_{k}") } else { k.clone() };
                    labels.push((k, v.clone()));
                }
                let name = format!("bolide_scraped_{}{suffix}", series.metric);
                self.scraped.push(Point { name, labels, value: Value::Gauge(value) });
            }
        }
    }

    /// Adds a second to the totals and queues its request.
    fn second(&mut self, s: Second) {
        if s.t < self.next_t {
            return;
        }
        self.next_t = s.t + 1;
        for (name, labels, v) in s.increases {
            *self.counters.entry((name.to_string(), labels)).or_insert(0.0) += v;
        }
        for (name, labels, h) in s.histograms {
            let entry = self.histograms.entry((name.to_string(), labels)).or_default();
            if let Some(h) = h.and_then(|h| crate::stats::hist::decode(h).ok()) {
                entry.add_hdr(&h);
            }
        }
        // Each second's end on the wall clock, never in the future (a run's last second is partial,
        // and a DDP second's length is not kept), each after the one before.
        let at = (self.started + Duration::from_secs_f64(f64::from(s.t) + s.span_s)).min(SystemTime::now());
        let ms = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
        let ms = ms.max(self.last_ms + 1);
        self.last_ms = ms;
        let mut points = Vec::new();
        for ((name, labels), v) in &self.counters {
            points.push(Point { name: name.clone(), labels: labels.clone(), value: Value::Counter(*v) });
        }
        for (name, v) in s.gauges {
            points.push(Point { name: name.into(), labels: vec![], value: Value::Gauge(v) });
        }
        for (i, name) in ["bolide_server_cpu_percent", "bolide_server_rss_bytes"].into_iter().enumerate() {
            for (process, cpu, rss) in &self.processes {
                let value = Value::Gauge(if i == 0 { *cpu } else { *rss });
                points.push(Point { name: name.into(), labels: vec![("process".into(), process.clone())], value });
            }
        }
        points.extend(self.scraped.iter().cloned());
        for ((name, labels), h) in &self.histograms {
            points.push(Point { name: name.clone(), labels: labels.clone(), value: Value::Histogram(h.clone()) });
        }
        let samples = points.len() as u64;
        let started_ns = self.started.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        let body = self.kind.receiver().encode(&self.labels, started_ns, ms, points);
        self.seconds += 1;
        if let Some(tx) = &self.tx {
            if tx.try_send((body, samples)).is_err() {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Hands over the seconds of an HTTP run not handed over yet (each once).
    pub fn rest_http(&mut self, timeline: &[crate::stats::result::Second]) {
        for s in timeline {
            self.http_second(s);
        }
    }

    /// The same for a DDP run.
    pub fn rest_ddp(&mut self, timeline: &[crate::stats::vu::DdpSecond]) {
        for s in timeline {
            self.ddp_second(s);
        }
    }

    /// How delivery went, once the sender is done or `drained` says it is not.
    fn result(self, drained: bool) -> OutputResult {
        let sent = self.counts.sent.load(Ordering::Relaxed);
        let mut dropped = self.counts.dropped.load(Ordering::Relaxed);
        let mut last_error = self.counts.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !drained {
            // What is still queued or being sent is given up.
            dropped = self.seconds.saturating_sub(sent);
            last_error = Some(format!("the receiver did not take the last seconds within {} s", DRAIN.as_secs()));
        }
        let mut url = self.url.clone();
        let _ = url.set_password(None);
        let _ = url.set_username("");
        OutputResult {
            kind: self.kind.name().into(),
            url: url.to_string(),
            testid: self.testid,
            seconds: self.seconds,
            sent,
            dropped,
            retried: self.counts.retried.load(Ordering::Relaxed),
            samples_sent: self.counts.samples_sent.load(Ordering::Relaxed),
            last_error,
        }
    }
}

/// Ends a run's outputs: their queues get [`DRAIN`] together to empty; how each went.
pub fn finish(mut all: Vec<Exporter>) -> Vec<OutputResult> {
    for e in &mut all {
        drop(e.tx.take());
    }
    let until = Instant::now() + DRAIN;
    all.into_iter()
        .map(|e| {
            let drained = e.done.recv_timeout(until.saturating_duration_since(Instant::now())).is_ok();
            e.result(drained)
        })
        .collect()
}

/// POSTs one request, trying again after failures that may pass.
fn send(d: &Delivery, body: &[u8], samples: u64, c: &Counts) {
    let began = Instant::now();
    for attempt in 0..=BACKOFF.len() {
        let why = match d.post(body) {
            Ok(note) => {
                c.sent.fetch_add(1, Ordering::Relaxed);
                c.samples_sent.fetch_add(samples, Ordering::Relaxed);
                if let Some(note) = note {
                    *c.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(note);
                }
                return;
            }
            Err((why, false)) => {
                // The receiver will not take it: trying again would not help.
                c.dropped.fetch_add(1, Ordering::Relaxed);
                *c.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                return;
            }
            Err((why, true)) => why,
        };
        *c.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        match BACKOFF.get(attempt) {
            Some(wait) if began.elapsed() < Duration::from_secs(30) => {
                c.retried.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(*wait);
            }
            _ => break,
        }
    }
    c.dropped.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protocol's counts of the second are counters of their own, labelled by name.
    #[test]
    fn a_ddp_second_counts_a_protocols_events() {
        let mut c = crate::stats::vu::VuSecond { steps: 3, ..Default::default() };
        c.events.insert("llm.output_tokens".into(), 640);
        let got = ddp_increases(&c);
        assert!(got.contains(&("bolide_ddp_steps_total", vec![], 3.0)), "{got:?}");
        let events: Vec<_> = got.iter().filter(|(n, ..)| *n == "bolide_ddp_events_total").collect();
        assert_eq!(
            events,
            [&("bolide_ddp_events_total", vec![("event".to_string(), "llm.output_tokens".to_string())], 640.0)]
        );
        assert!(ddp_increases(&Default::default()).iter().all(|(n, ..)| *n != "bolide_ddp_events_total"));
    }

    #[test]
    fn a_ddp_second_carries_each_step_and_each_measure_histogram() {
        let mut s = crate::stats::vu::DdpSecond::default();
        let l = |h: &str| crate::stats::vu::SecondLatency { histogram: Some(h.into()), ..Default::default() };
        s.step_latency.insert("connect".into(), l("A"));
        s.measures.insert("llm.ttft".into(), l("B"));
        s.measures.insert("sse.gap".into(), l("C"));
        let label = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(
            ddp_histograms(&s),
            vec![
                ("bolide_ddp_step_latency_seconds", label("step", "connect"), Some("A")),
                ("bolide_ddp_measure_seconds", label("measure", "llm.ttft"), Some("B")),
                ("bolide_ddp_measure_seconds", label("measure", "sse.gap"), Some("C")),
            ]
        );
    }
}

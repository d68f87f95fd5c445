//! Sending a run's figures to the systems teams already run (`--out KIND=DEST`): Prometheus remote
//! write (`promrw.rs` encodes; this sends), each second as the run makes it, of `http` and `run`.
//!
//! The load threads never wait for it: each second is encoded on the thread that collects the
//! seconds and handed to a sender thread of its own (`bolide-export`) through a bounded queue; a
//! slow or dead receiver fills the queue and the seconds that do not fit are dropped and counted.
//! A failed POST (refused, reset, timed out, 5xx, 429) is tried again after 0.2, 0.4 and 0.8 s;
//! other 4xx answers are not (the receiver will not take it). When the run ends the rest of its
//! seconds are sent and the queue is given up to 10 s to drain. What was sent, retried and dropped
//! goes into the result document (`outputs`).

pub mod promrw;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use promrw::{NativeHistogram, Series};

pub use crate::stats::result::OutputResult;

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

/// The remote write output of one run.
pub struct Exporter {
    url: url::Url,
    testid: String,
    labels: Vec<(String, String)>,
    started: SystemTime,
    tx: Option<SyncSender<(Vec<u8>, u64)>>,
    done: Receiver<()>,
    counts: Arc<Counts>,
    /// The run's seconds handed over, and the next one's number.
    seconds: u64,
    next_t: u32,
    /// The last timestamp sent, ms.
    last_ms: i64,
    /// The watched processes' latest CPU (% of one core) and RSS (bytes), sent with each second.
    processes: Vec<(String, f64, f64)>,
    /// Counters' totals and histograms so far, by metric and extra labels.
    counters: BTreeMap<Key, f64>,
    histograms: BTreeMap<Key, NativeHistogram>,
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

impl Exporter {
    /// Starts the sender; the run's series carry `testid` and `extra` labels.
    pub fn start(url: url::Url, testid: String, extra: Vec<(String, String)>) -> Exporter {
        let (tx, rx) = sync_channel::<(Vec<u8>, u64)>(QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel();
        let counts = Arc::new(Counts::default());
        let c = Arc::clone(&counts);
        let auth = promrw::Auth::from_env_or(&url);
        let mut target = url.clone();
        let _ = target.set_password(None);
        let _ = target.set_username("");
        let spawned = std::thread::Builder::new().name("bolide-export".into()).spawn(move || {
            for (body, samples) in rx {
                send(&target, &auth, &body, samples, &c);
            }
            let _ = done_tx.send(());
        });
        if let Err(e) = spawned {
            *counts.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("no sender thread: {e}"));
        }
        let mut labels = vec![("testid".to_string(), testid.clone()), ("job".to_string(), "bolide".to_string())];
        labels.extend(extra);
        Exporter {
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
            counters: BTreeMap::new(),
            histograms: BTreeMap::new(),
        }
    }

    /// Hands over one second of an HTTP run (its histogram in `latency_histogram`), once.
    pub fn http_second(&mut self, s: &crate::stats::result::Second) {
        self.second(Second {
            t: s.t,
            span_s: s.span_s,
            increases: vec![
                ("bolide_http_responses_total", vec![], s.responses as f64),
                ("bolide_http_errors_total", vec![], s.errors as f64),
            ],
            gauges: vec![],
            histograms: vec![("bolide_http_latency_seconds", vec![], s.latency_histogram.as_deref())],
        });
    }

    /// Hands over one second of a DDP run (each step's histogram in its `step_latency`), once.
    pub fn ddp_second(&mut self, s: &crate::stats::vu::DdpSecond) {
        let c = &s.counts;
        let histograms = s
            .step_latency
            .iter()
            .map(|(name, l)| {
                ("bolide_ddp_step_latency_seconds", vec![("step".to_string(), name.clone())], l.histogram.as_deref())
            })
            .collect();
        self.second(Second {
            t: s.t,
            span_s: 1.0,
            increases: vec![
                ("bolide_ddp_steps_total", vec![], c.steps as f64),
                ("bolide_ddp_step_errors_total", vec![], c.step_errors as f64),
                ("bolide_ddp_users_launched_total", vec![], c.launched as f64),
                ("bolide_ddp_users_completed_total", vec![], c.completed as f64),
                ("bolide_ddp_users_failed_total", vec![], c.failed as f64),
                ("bolide_ddp_messages_in_total", vec![], c.messages_in as f64),
                ("bolide_ddp_messages_out_total", vec![], c.messages_out as f64),
            ],
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
        let series = |name: &str, extra: &[(String, String)]| {
            let mut labels = self.labels.clone();
            labels.extend(extra.iter().cloned());
            labels.push(("__name__".into(), name.into()));
            Series { labels, ..Default::default() }
        };
        let mut all = Vec::new();
        for ((name, labels), v) in &self.counters {
            let mut x = series(name, labels);
            x.samples.push((*v, ms));
            all.push(x);
        }
        for (name, v) in s.gauges {
            let mut x = series(name, &[]);
            x.samples.push((v, ms));
            all.push(x);
        }
        for (process, cpu, rss) in &self.processes {
            let label = [("process".to_string(), process.clone())];
            for (name, v) in [("bolide_server_cpu_percent", *cpu), ("bolide_server_rss_bytes", *rss)] {
                let mut x = series(name, &label);
                x.samples.push((v, ms));
                all.push(x);
            }
        }
        for ((name, labels), h) in &self.histograms {
            let mut x = series(name, labels);
            x.histograms.push((h.clone(), ms));
            all.push(x);
        }
        let samples = all.len() as u64;
        let body = promrw::compress(&promrw::write_request(&all));
        self.seconds += 1;
        if let Some(tx) = &self.tx {
            if tx.try_send((body, samples)).is_err() {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends the run's seconds not handed over yet, waits (bounded) for the queue, and says how
    /// delivery went.
    pub fn finish_http(mut self, timeline: &[crate::stats::result::Second]) -> OutputResult {
        for s in timeline {
            self.http_second(s);
        }
        self.finish()
    }

    /// The same for a DDP run.
    pub fn finish_ddp(mut self, timeline: &[crate::stats::vu::DdpSecond]) -> OutputResult {
        for s in timeline {
            self.ddp_second(s);
        }
        self.finish()
    }

    fn finish(mut self) -> OutputResult {
        drop(self.tx.take());
        let drained = self.done.recv_timeout(DRAIN).is_ok();
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
            kind: "prometheus-rw".into(),
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

/// POSTs one request, trying again after failures that may pass.
fn send(url: &url::Url, auth: &promrw::Auth, body: &[u8], samples: u64, c: &Counts) {
    let began = Instant::now();
    for attempt in 0..=BACKOFF.len() {
        let why = match promrw::post_as(url, auth, body, TIMEOUT) {
            Ok(code) if (200..300).contains(&code) => {
                c.sent.fetch_add(1, Ordering::Relaxed);
                c.samples_sent.fetch_add(samples, Ordering::Relaxed);
                return;
            }
            Ok(code) if code != 429 && (400..500).contains(&code) => {
                // The receiver will not take it: trying again would not help.
                c.dropped.fetch_add(1, Ordering::Relaxed);
                *c.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("HTTP {code}"));
                return;
            }
            Ok(code) => format!("HTTP {code}"),
            Err(e) => e,
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

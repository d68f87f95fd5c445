//! Recorders of virtual-user runs (one per worker, merged at the end) and the DDP run's result
//! document, which shares its header with the HTTP one (`format`, `version`, `kind: "ddp"`, ...).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::hist;
use super::result::Latency;
use super::summary::latency;

use crate::problem::Problem;

/// Measurements of one step name.
#[derive(Debug, Clone)]
pub struct StepRec {
    /// Steps done, successful or not.
    pub count: u64,
    pub errors: BTreeMap<String, u64>,
    /// The step's latency: to `ready`, to both `result` and `updated`, to the change awaited, ...
    pub latency_us: Histogram<u64>,
    /// Methods only: to `result`, and to `updated`.
    pub result_us: Option<Histogram<u64>>,
    pub updated_us: Option<Histogram<u64>>,
}

impl StepRec {
    fn new(is_call: bool) -> StepRec {
        StepRec {
            count: 0,
            errors: BTreeMap::new(),
            latency_us: hist::latency_us(),
            result_us: is_call.then(hist::latency_us),
            updated_us: is_call.then(hist::latency_us),
        }
    }

    fn merge(&mut self, o: &StepRec) {
        self.count += o.count;
        for (k, v) in &o.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.latency_us.add(&o.latency_us).expect("same shape");
        if let (Some(a), Some(b)) = (&mut self.result_us, &o.result_us) {
            a.add(b).expect("same shape");
        }
        if let (Some(a), Some(b)) = (&mut self.updated_us, &o.updated_us) {
            a.add(b).expect("same shape");
        }
    }

    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Counts of one second, for the timeline and the live line.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VuSecond {
    pub launched: u64,
    pub completed: u64,
    pub failed: u64,
    pub steps: u64,
    pub step_errors: u64,
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Users' reconnections (after a fault), and method calls sent again after one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconnects: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resent: u64,
    /// Audit checks that agreed with the truth, and that differed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub audit_agreed: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub audit_differed: u64,
    /// A protocol's counts in this second (`summary.events`' names: `llm.output_tokens`, ...),
    /// those that moved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl VuSecond {
    pub fn merge(&mut self, o: &VuSecond) {
        self.launched += o.launched;
        self.completed += o.completed;
        self.failed += o.failed;
        self.steps += o.steps;
        self.step_errors += o.step_errors;
        self.messages_in += o.messages_in;
        self.messages_out += o.messages_out;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.reconnects += o.reconnects;
        self.resent += o.resent;
        self.audit_agreed += o.audit_agreed;
        self.audit_differed += o.audit_differed;
        for (name, n) in &o.events {
            *self.events.entry(name.clone()).or_default() += n;
        }
    }
}

/// One second's latencies as a worker hands them over at its tick: [`hist::Sparse`] pairs per step
/// (by index), reactive, fan-out and a protocol's own latencies by name.
#[derive(Debug, Default)]
pub struct TickLatency {
    pub steps: Vec<(usize, hist::Sparse)>,
    /// Browser users' page timings, by vital index.
    pub vitals: Vec<(usize, hist::Sparse)>,
    pub reactive: hist::Sparse,
    pub fanout: hist::Sparse,
    /// A protocol's own latencies (`llm.ttft`, ...) measured in this second, by name.
    pub measures: Vec<(&'static str, hist::Sparse)>,
}

/// One second's latencies from every worker, merged exactly (the thread that collects the ticks
/// keeps one per second until the second is whole).
#[derive(Debug, Default)]
pub struct SecondLatencies {
    steps: Vec<Option<Histogram<u64>>>,
    vitals: [Option<Histogram<u64>>; 5],
    reactive: Option<Histogram<u64>>,
    fanout: Option<Histogram<u64>>,
    measures: BTreeMap<&'static str, Histogram<u64>>,
}

impl SecondLatencies {
    pub fn add(&mut self, tick: &TickLatency) {
        let add = |h: &mut Option<Histogram<u64>>, pairs: &[(u64, u64)]| {
            if !pairs.is_empty() {
                hist::add_sparse(h.get_or_insert_with(hist::latency_us), pairs);
            }
        };
        for (i, pairs) in &tick.steps {
            if self.steps.len() <= *i {
                self.steps.resize_with(i + 1, || None);
            }
            add(&mut self.steps[*i], pairs);
        }
        add(&mut self.reactive, &tick.reactive);
        add(&mut self.fanout, &tick.fanout);
        for (name, pairs) in &tick.measures {
            if !pairs.is_empty() {
                hist::add_sparse(self.measures.entry(name).or_insert_with(hist::latency_us), pairs);
            }
        }
        for (i, pairs) in &tick.vitals {
            if let Some(h) = self.vitals.get_mut(*i) {
                add(h, pairs);
            }
        }
    }

    /// Writes the second's percentiles into `sec`: every step together, each step by name
    /// (`names` as the recorders have them), reactive, fan-out and measures; with `keep_histograms` (a
    /// segment's run) each with its histogram, so that `bolide merge` stays exact.
    pub fn fill(&self, names: &[String], keep_histograms: bool, sec: &mut DdpSecond) {
        let mut all: Option<Histogram<u64>> = None;
        for (i, h) in self.steps.iter().enumerate() {
            let (Some(h), Some(name)) = (h, names.get(i)) else { continue };
            all.get_or_insert_with(hist::latency_us).add(h).expect("same shape");
            sec.step_latency.insert(name.clone(), SecondLatency::of(h, keep_histograms));
        }
        sec.latency = all.as_ref().map(|h| SecondLatency::of(h, keep_histograms));
        sec.reactive = self.reactive.as_ref().map(|h| SecondLatency::of(h, keep_histograms));
        sec.fanout = self.fanout.as_ref().map(|h| SecondLatency::of(h, keep_histograms));
        for (name, h) in &self.measures {
            sec.measures.insert(name.to_string(), SecondLatency::of(h, keep_histograms));
        }
        for (i, h) in self.vitals.iter().enumerate() {
            let name = super::browser::VITALS[i];
            if let Some(h) = h.as_ref().filter(|_| super::browser::is_time(name)) {
                sec.page.insert(name.to_string(), SecondLatency::of(h, keep_histograms));
            }
        }
    }
}

/// One second's latency (of every step, of one step, reactive or fan-out): how many were
/// measured, the median, p99 and the slowest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SecondLatency {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Kept by a segment's run (`--segment`): HdrHistogram V2 deflate, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

impl SecondLatency {
    pub fn of(h: &Histogram<u64>, keep_histogram: bool) -> SecondLatency {
        SecondLatency {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            histogram: keep_histogram.then(|| hist::encode(h)),
        }
    }
}

/// Everything one worker records about its users.
#[derive(Debug, Clone)]
pub struct VuRecorder {
    /// Step names in report order; `steps[i]` belongs to `names[i]`.
    pub names: Vec<String>,
    pub steps: Vec<StepRec>,
    pub launched: u64,
    pub completed: u64,
    pub failed: u64,
    pub skipped: u64,
    /// Users cut at the user timeout (also counted as failed).
    pub cut: u64,
    /// From a user's write (its last method call) to the change seen by its own `waitFor`.
    pub reactive_us: Histogram<u64>,
    pub first_errors: Vec<(String, String)>,
    pub second: VuSecond,
    /// This second's latency per step (by index; made at a step's first sample) and reactive
    /// latency: handed over and emptied at every tick ([`VuRecorder::drain_second`]).
    pub second_us: Vec<Option<Histogram<u64>>>,
    pub second_reactive_us: Option<Histogram<u64>>,
    /// Offsets from the run's start: first arrival, last user finished.
    pub first_arrival_s: Option<f64>,
    pub last_finish_s: Option<f64>,
    /// What the users found at their audit checkpoints.
    pub audit: super::audit::AuditRec,
    /// What browser users measured.
    pub browser: super::browser::BrowserRec,
    /// Each reconnection: when the connection it replaced closed, and when the user was back,
    /// seconds from the run's start (the first [`KEPT_RECONNECTIONS`]): a fault is credited with
    /// the reconnections of the connections it closed.
    pub reconnections: Vec<(f64, f64)>,
}

/// How many reconnections a run keeps the times of.
pub const KEPT_RECONNECTIONS: usize = 1 << 20;

/// `n` events over `duration_s` seconds, per minute (0 for a run of no length).
pub fn per_minute(n: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        n as f64 * 60.0 / duration_s
    } else {
        0.0
    }
}

impl VuRecorder {
    /// Steps done, successful or not, and those that failed.
    pub fn step_totals(&self) -> (u64, u64) {
        (self.steps.iter().map(|s| s.count).sum(), self.steps.iter().map(StepRec::error_total).sum())
    }

    /// Failures by class over every step, and the users cut at the user timeout as
    /// `user_timeout`.
    pub fn errors_by_class(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for s in &self.steps {
            for (class, n) in &s.errors {
                *out.entry(class.clone()).or_default() += n;
            }
        }
        if self.cut > 0 {
            out.insert("user_timeout".to_string(), self.cut);
        }
        out
    }

    pub fn new(names: &[(String, bool)]) -> VuRecorder {
        VuRecorder {
            names: names.iter().map(|(n, _)| n.clone()).collect(),
            steps: names.iter().map(|(_, call)| StepRec::new(*call)).collect(),
            launched: 0,
            completed: 0,
            failed: 0,
            skipped: 0,
            cut: 0,
            reactive_us: hist::latency_us(),
            first_errors: Vec::new(),
            second: VuSecond::default(),
            second_us: names.iter().map(|_| None).collect(),
            second_reactive_us: None,
            first_arrival_s: None,
            last_finish_s: None,
            audit: super::audit::AuditRec::default(),
            browser: super::browser::BrowserRec::default(),
            reconnections: Vec::new(),
        }
    }

    pub fn index(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).expect("step names are known before the run")
    }

    pub fn step_ok(&mut self, step: usize, latency_us: u64) {
        let s = &mut self.steps[step];
        s.count += 1;
        hist::record(&mut s.latency_us, latency_us);
        self.second.steps += 1;
        self.record_second(step, latency_us);
    }

    fn record_second(&mut self, step: usize, latency_us: u64) {
        if let Some(h) = self.second_us.get_mut(step) {
            hist::record(h.get_or_insert_with(hist::latency_us), latency_us);
        }
    }

    /// A reactive latency: from the user's write to the change its `waitFor` saw.
    pub fn reactive(&mut self, latency_us: u64) {
        hist::record(&mut self.reactive_us, latency_us);
        hist::record(self.second_reactive_us.get_or_insert_with(hist::latency_us), latency_us);
    }

    /// Hands this second's latencies over (into `tick`) and starts the next second empty.
    pub fn drain_second(&mut self, tick: &mut TickLatency) {
        for (i, h) in self.second_us.iter_mut().enumerate() {
            if let Some(h) = h.as_mut().filter(|h| !h.is_empty()) {
                tick.steps.push((i, hist::drain(h)));
            }
        }
        if let Some(h) = &mut self.second_reactive_us {
            tick.reactive.extend(hist::drain(h));
        }
        tick.vitals.extend(self.browser.drain_second());
    }

    pub fn call_ok(&mut self, step: usize, both_us: u64, result_us: u64, updated_us: u64) {
        self.step_ok(step, both_us);
        let s = &mut self.steps[step];
        if let Some(h) = &mut s.result_us {
            hist::record(h, result_us);
        }
        if let Some(h) = &mut s.updated_us {
            hist::record(h, updated_us);
        }
    }

    /// A step that timed out: an error of class `timeout` that stays in the step's latency at
    /// `latency_us` (how long it waited), so a stalling server worsens the percentiles.
    pub fn step_timed_out(&mut self, step: usize, latency_us: u64, detail: &str) {
        hist::record(&mut self.steps[step].latency_us, latency_us);
        self.record_second(step, latency_us);
        self.step_failed(step, "timeout", detail);
    }

    pub fn step_failed(&mut self, step: usize, class: &str, detail: &str) {
        let s = &mut self.steps[step];
        s.count += 1;
        *s.errors.entry(class.to_string()).or_default() += 1;
        self.second.steps += 1;
        self.second.step_errors += 1;
        if !self.first_errors.iter().any(|(c, _)| c == class) {
            // The step's name first, unless the detail already starts with it ("connect ...").
            let name = &self.names[step];
            // What the server said (an error reason, a close reason) is kept printable.
            let detail = crate::redact::printable(detail);
            let text =
                if detail.starts_with(name.as_str()) { detail.into_owned() } else { format!("{name}: {detail}") };
            self.first_errors.push((class.to_string(), text));
        }
    }

    /// An error of the user, not of a step (its connection closed once its steps were done).
    pub fn count_user_error(&mut self, class: &str, detail: &str) {
        if !self.first_errors.iter().any(|(c, _)| c == class) {
            self.first_errors.push((class.to_string(), crate::redact::printable(detail).into_owned()));
        }
    }

    pub fn merge(&mut self, o: &VuRecorder) {
        for (a, b) in self.steps.iter_mut().zip(&o.steps) {
            a.merge(b);
        }
        self.launched += o.launched;
        self.completed += o.completed;
        self.failed += o.failed;
        self.skipped += o.skipped;
        self.cut += o.cut;
        self.reactive_us.add(&o.reactive_us).expect("same shape");
        for (c, d) in &o.first_errors {
            if !self.first_errors.iter().any(|(x, _)| x == c) {
                self.first_errors.push((c.clone(), d.clone()));
            }
        }
        self.second.merge(&o.second);
        self.audit.merge(&o.audit);
        self.browser.merge(&o.browser);
        let room = KEPT_RECONNECTIONS.saturating_sub(self.reconnections.len());
        self.reconnections.extend(o.reconnections.iter().take(room));
        self.first_arrival_s = match (self.first_arrival_s, o.first_arrival_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_finish_s = match (self.last_finish_s, o.last_finish_s) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

super::envelope::result_document! {
    /// The result document of a DDP (`bolide run`) run.
    pub struct VuDoc {
        pub settings: DdpRunSettings,
        pub summary: DdpSummary,
        pub steps: Vec<StepSummary>,
        pub timeline: Vec<DdpSecond>,
        pub histograms: DdpHistograms,
        /// Each target's share, when the users were spread over several (absent with one).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub per_target: Vec<DdpTargetSummary>,
        /// The reactive-correctness audit (`--audit`, `audit:` steps); absent without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub audit: Option<super::audit::AuditSection>,
        /// The faults seeded into the run (`--fault`), as they happened; absent without one.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub faults: Vec<super::faults::FaultRecord>,
        /// Browser users (`engine: browser` flows): page timings, in-page DDP, what the
        /// browsers cost; absent without them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub browser: Option<super::browser::BrowserSection>,
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DdpRunSettings {
    /// Built-in name or file path.
    pub scenario: String,
    /// The first (or only) target.
    pub target: String,
    /// Every target, `URL=W` when weighted, when there are several (absent with one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<String>,
    pub transport: String,
    pub compression: bool,
    pub cache: bool,
    pub threads: usize,
    pub phases: Vec<PhaseSettings>,
    pub max_vusers: Option<u64>,
    pub step_timeout_s: f64,
    pub user_timeout_s: f64,
    /// The segment of the users this instance ran (`--segment I/N`); absent for a whole plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<crate::segment::Segment>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseSettings {
    /// Arrivals spaced as a Poisson process (1.0) or with gamma-distributed gaps of this shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    pub name: Option<String>,
    pub duration_s: f64,
    pub arrival_rate: Option<f64>,
    pub ramp_to: Option<f64>,
    pub arrival_count: Option<u64>,
    pub pause: bool,
    /// A closed phase: this many users looping their flow for the duration (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Users {
    pub launched: u64,
    pub completed: u64,
    pub failed: u64,
    /// Arrivals not started because `maxVusers` users were alive.
    pub skipped: u64,
    /// Users cut at the user timeout (included in `failed`).
    pub cut: u64,
}

impl Users {
    /// The users a recorder counted.
    pub fn of(rec: &VuRecorder) -> Users {
        Users {
            launched: rec.launched,
            completed: rec.completed,
            failed: rec.failed,
            skipped: rec.skipped,
            cut: rec.cut,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DdpSummary {
    pub users: Users,
    /// From the first arrival until the last user finished (the Meteor reports' "Time").
    pub total_time_s: f64,
    /// From the start until the run ended.
    pub duration_s: f64,
    pub steps: u64,
    pub step_errors: u64,
    /// Failed steps in percent of all steps.
    pub error_rate_pct: f64,
    pub errors_by_class: BTreeMap<String, u64>,
    pub messages_in: u64,
    pub messages_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub pings_answered: u64,
    /// Heartbeat pings bolide sent after silence (counted in `messages_out` too).
    #[serde(default)]
    pub pings_sent: u64,
    pub protocol_errors: u64,
    /// From a user's write to the change seen through its own subscription.
    pub reactive: Option<Latency>,
    /// From a document's server timestamp to its arrival at each subscriber.
    pub fanout: Option<Latency>,
    /// A protocol's own counts, other than DDP's (`socketio.emits`, `graphql.next`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events: BTreeMap<String, u64>,
    /// A protocol's own latencies (`llm.ttft`, `sse.first_event`, ...), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, Latency>,
    /// The counts of `events` that its protocol declared a throughput (compared per second of
    /// the run, higher is better; charted per second).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throughputs: Vec<String>,
    /// The latencies of `measures` whose p50's inverse is what one user receives a second, with
    /// that figure's name (a ladder's column), as its protocol declared them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_user: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StepSummary {
    pub name: String,
    /// Attempts, failed ones included.
    pub count: u64,
    /// Failed attempts (of `count`).
    pub errors: u64,
    pub errors_by_class: BTreeMap<String, u64>,
    /// Successful attempts per minute of the run (`count - errors`), as the per-target
    /// `subscriptions_per_min` and `calls_per_min` count them.
    pub per_minute: f64,
    /// From the step's start to its success; null when no attempt succeeded.
    pub latency: Option<Latency>,
    pub to_result: Option<Latency>,
    pub to_updated: Option<Latency>,
    /// HdrHistogram V2 deflate, base64.
    pub latency_histogram: String,
    /// Methods only: the histograms of `to_result` and `to_updated` (for exact merges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_histogram: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_histogram: Option<String>,
}

/// One second of a DDP run: when, users alive at its end, and its counts (flattened in JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DdpSecond {
    pub t: u32,
    pub users_alive: u64,
    #[serde(flatten)]
    pub counts: VuSecond,
    /// Every step's latency in this second, all steps together (absent when none finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<SecondLatency>,
    /// The same per step name (steps that finished in this second).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_latency: BTreeMap<String, SecondLatency>,
    /// Reactive latency (a user's write to the change it waited for) in this second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reactive: Option<SecondLatency>,
    /// Fan-out latency (the server's timestamp to each subscriber's receipt) in this second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout: Option<SecondLatency>,
    /// A protocol's own latencies (`llm.ttft`, ...) measured in this second, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, SecondLatency>,
    /// Browser users' page timings of the navigations timed in this second, by name (ttfb,
    /// fcp, lcp, inp; microseconds as every latency here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub page: BTreeMap<String, SecondLatency>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DdpHistograms {
    pub reactive_us: String,
    pub fanout_us: String,
    /// `summary.measures`' histograms by name (HdrHistogram V2 deflate, base64), for exact merges.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, String>,
}

/// One target of a run with several: its users and steps, as the whole run's are counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DdpTargetSummary {
    /// The server's URL (secrets in it redacted).
    pub url: String,
    pub weight: u32,
    /// The watched process (`--monitor NAME=:PORT`) serving this target: the one whose port is the
    /// target's, when the target is on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<String>,
    pub users: Users,
    pub steps: u64,
    pub step_errors: u64,
    pub errors_by_class: BTreeMap<String, u64>,
    /// Subscriptions made ready, per minute of the run.
    pub subscriptions_per_min: f64,
    /// Method calls answered (login included), per minute of the run.
    pub calls_per_min: f64,
    /// From `sub` to `ready`, all subscribe steps together (absent without any).
    pub subscribe_latency: Option<Latency>,
    /// Its histogram (HdrHistogram V2 deflate, base64), for exact merges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe_histogram: Option<String>,
    /// Every step, all kinds together.
    pub latency: Option<Latency>,
    pub per_step: Vec<StepSummary>,
}

/// The summary of one target's recorder over `duration_s`; `subs` and `calls` name the subscribe
/// and method-call steps.
pub fn target_summary(
    url: &str,
    weight: u32,
    rec: &VuRecorder,
    duration_s: f64,
    subs: &[String],
    calls: &[String],
) -> DdpTargetSummary {
    let done = |names: &[String]| -> u64 {
        rec.names
            .iter()
            .zip(&rec.steps)
            .filter(|(n, _)| names.contains(n))
            .map(|(_, s)| s.count - s.error_total())
            .sum()
    };
    let (mut all, mut ready) = (hist::latency_us(), hist::latency_us());
    for (name, s) in rec.names.iter().zip(&rec.steps) {
        all.add(&s.latency_us).expect("same shape");
        if subs.contains(name) {
            ready.add(&s.latency_us).expect("same shape");
        }
    }
    let nonempty = |h: &Histogram<u64>| (!h.is_empty()).then(|| latency(h));
    let (steps, step_errors) = rec.step_totals();
    DdpTargetSummary {
        url: url.to_string(),
        weight,
        monitor: None,
        users: Users::of(rec),
        steps,
        step_errors,
        errors_by_class: rec.errors_by_class(),
        subscriptions_per_min: per_minute(done(subs), duration_s),
        calls_per_min: per_minute(done(calls), duration_s),
        subscribe_latency: nonempty(&ready),
        subscribe_histogram: (!ready.is_empty()).then(|| hist::encode(&ready)),
        latency: nonempty(&all),
        per_step: step_summaries(rec, duration_s),
    }
}

/// A histogram's latency figures, or None when it holds no sample (a step that never succeeded
/// has no percentiles: `null` in the document, "no sample" in reports, never zeros).
pub fn sampled(h: &Histogram<u64>) -> Option<Latency> {
    (!h.is_empty()).then(|| latency(h))
}

/// Per-step summaries of merged recorders over `duration_s`.
pub fn step_summaries(rec: &VuRecorder, duration_s: f64) -> Vec<StepSummary> {
    rec.names
        .iter()
        .zip(&rec.steps)
        .map(|(name, s)| StepSummary {
            name: name.clone(),
            count: s.count,
            errors: s.error_total(),
            errors_by_class: s.errors.clone(),
            per_minute: per_minute(s.count - s.error_total(), duration_s),
            latency: sampled(&s.latency_us),
            to_result: s.result_us.as_ref().and_then(sampled),
            to_updated: s.updated_us.as_ref().and_then(sampled),
            latency_histogram: hist::encode(&s.latency_us),
            result_histogram: s.result_us.as_ref().map(hist::encode),
            updated_histogram: s.updated_us.as_ref().map(hist::encode),
        })
        .collect()
}

impl VuDoc {
    /// Reads a DDP result document, refusing other kinds with a reason.
    pub fn from_json(text: &str) -> Result<VuDoc, Problem> {
        let head = super::result::Head::of(text)?;
        if head.format.as_deref() != Some(super::result::FORMAT) {
            return Err("not a bolide result".into());
        }
        if head.kind.as_deref() != Some("ddp") {
            return Err(format!("a {:?} result, not a DDP one", head.kind).into());
        }
        super::result::check_version(head.version)?;
        serde_json::from_str(text).map_err(|e| Problem::from(format!("malformed result: {e}")))
    }
}

/// Every step's latency in one histogram, as thresholds read it (`Reading::latency`); None when
/// no step was timed or a step's histogram cannot be read (a table then says n/a, as a threshold
/// says why, rather than a figure of some steps only).
/// The unit of work of the transport built-ins and its step: `ddp-calls` counts its method
/// calls (`call METHOD`), `ddp-connect` its sessions (`connect`); None for other scenarios.
pub fn unit_step(d: &VuDoc) -> Option<(&'static str, &StepSummary)> {
    let (unit, wanted): (&str, fn(&str) -> bool) = match d.settings.scenario.as_str() {
        "ddp-calls" => ("calls", |n| n.starts_with("call ")),
        "ddp-connect" => ("connects", |n| n == "connect"),
        _ => return None,
    };
    d.steps.iter().find(|s| wanted(&s.name)).map(|s| (unit, s))
}

/// The transport built-ins' rate: their unit of work done per second of the run.
pub fn unit_rate(d: &VuDoc) -> Option<(&'static str, f64)> {
    let (unit, s) = unit_step(d)?;
    let ok = s.count.saturating_sub(s.errors);
    Some((unit, if d.summary.duration_s > 0.0 { ok as f64 / d.summary.duration_s } else { 0.0 }))
}

pub fn all_steps(d: &VuDoc) -> Option<hdrhistogram::Histogram<u64>> {
    super::view::Reading::latency(d).ok().flatten()
}

/// `tasks-reactive` for a built-in, the file stem for a scenario file.
pub fn scenario_name(source: &str) -> String {
    std::path::Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.to_string())
}

impl super::view::Reading for VuDoc {
    fn kind(&self) -> &'static str {
        "ddp"
    }

    fn segment(&self) -> Option<crate::segment::Segment> {
        self.settings.segment
    }

    fn threads(&self) -> usize {
        self.settings.threads
    }

    fn workload(&self) -> String {
        scenario_name(&self.settings.scenario)
    }

    fn workload_parts(&self) -> Vec<(&'static str, String)> {
        let s = &self.settings;
        let phases: Vec<String> = s
            .phases
            .iter()
            .map(|p| {
                let what = match (p.arrival_rate, p.ramp_to, p.arrival_count, p.users) {
                    (Some(r), Some(to), _, _) => format!("{r}->{to}/s"),
                    (Some(r), None, _, _) => format!("{r}/s"),
                    (_, _, Some(n), _) => format!("{n} users"),
                    (_, _, _, Some(n)) => format!("{n} users looping"),
                    _ => "pause".into(),
                };
                format!("{what} for {} s", p.duration_s)
            })
            .collect();
        vec![
            ("workload", self.workload()),
            ("phases", phases.join(", ")),
            ("transport", s.transport.clone()),
            ("compression", s.compression.to_string()),
        ]
    }

    /// Steps run and failed steps (a user cut at the user timeout is in [`Reading::errors`] and
    /// among the failed users, not a step).
    fn ended_and_failed(&self) -> (u64, u64) {
        (self.summary.steps, self.summary.step_errors)
    }

    fn errors(&self) -> u64 {
        self.summary.step_errors + self.summary.users.cut
    }

    /// Failed steps by class, most frequent first (users cut at the user timeout are the class
    /// `user_timeout`).
    fn failures(&self) -> Vec<(String, u64)> {
        super::result::classes_by_count(&self.summary.errors_by_class, &[])
    }

    fn errors_by_class(&self) -> &BTreeMap<String, u64> {
        &self.summary.errors_by_class
    }

    fn outcomes(&self) -> (&'static str, Vec<(String, u64)>) {
        (
            "Steps completed, failed steps by error class",
            vec![("completed".to_string(), self.summary.steps.saturating_sub(self.summary.step_errors))],
        )
    }

    fn latency(&self) -> Result<Option<Histogram<u64>>, String> {
        let mut all = hist::latency_us();
        for s in &self.steps {
            all.add(hist::decode(&s.latency_histogram)?).map_err(|e| e.to_string())?;
        }
        Ok((!all.is_empty()).then_some(all))
    }

    fn no_latency(&self) -> &'static str {
        "no step completed"
    }

    fn step_latency(&self, name: &str) -> Result<Histogram<u64>, Problem> {
        let no_sample = || format!("no sample of {name} (it never completed or never ran)");
        let Some(s) = self.steps.iter().find(|s| s.name == name) else { return Err(no_sample().into()) };
        let h = hist::decode(&s.latency_histogram)?;
        if h.is_empty() {
            return Err(no_sample().into());
        }
        Ok(h)
    }

    fn units_per_s(&self) -> Result<f64, Problem> {
        super::view::per_second(self.summary.steps, self.summary.duration_s)
    }

    fn time_s(&self) -> f64 {
        self.summary.total_time_s
    }

    fn speed_s(&self) -> f64 {
        self.summary.total_time_s
    }

    fn mean_p99_ms(&self) -> (Option<f64>, Option<f64>) {
        let all = all_steps(self);
        (all.as_ref().map(|h| h.mean() / 1000.0), all.as_ref().map(|h| h.value_at_quantile(0.99) as f64 / 1000.0))
    }

    fn unmeasured(&self) -> Option<String> {
        (self.summary.users.launched == 0).then(|| "no user arrived (the phases are shorter than one arrival)".into())
    }

    fn shortfalls(&self) -> Vec<String> {
        let u = &self.summary.users;
        if u.failed == 0 {
            return Vec::new();
        }
        let cut = if u.cut > 0 { format!(" ({} cut at the user timeout)", u.cut) } else { String::new() };
        vec![format!("{} of {} users failed{cut}", u.failed, u.launched)]
    }

    fn over_time(&self, what: super::view::OverTime) -> Vec<(f64, f64)> {
        use super::view::OverTime;
        let seconds = self.timeline.iter();
        match what {
            OverTime::UsersAlive => seconds.map(|s| (f64::from(s.t), s.users_alive as f64)).collect(),
            OverTime::Steps => seconds.map(|s| (f64::from(s.t), s.counts.steps as f64)).collect(),
            OverTime::Responses | OverTime::P99 => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seconds_measures_from_every_worker_merge_by_name() {
        // Two workers' ticks: the first token's latency from both, the gap from one.
        let tick = |ttft: &[u64], gap: &[u64]| {
            let mut t = crate::proto::ws::Traffic::default();
            ttft.iter().for_each(|us| t.measure("llm.ttft", *us));
            gap.iter().for_each(|us| t.measure("sse.gap", *us));
            let mut latency = TickLatency::default();
            for (name, h) in &mut t.measures_second {
                latency.measures.push((*name, hist::drain(h)));
            }
            latency
        };
        let mut second = SecondLatencies::default();
        second.add(&tick(&[1_000, 2_000], &[]));
        second.add(&tick(&[4_000], &[50]));
        let mut sec = DdpSecond::default();
        second.fill(&[], true, &mut sec);
        let ttft = &sec.measures["llm.ttft"];
        assert_eq!(ttft.count, 3);
        assert!((4_000..4_010).contains(&ttft.max_us), "{ttft:?}");
        assert!(ttft.histogram.is_some(), "kept for a segment's merge");
        assert_eq!(sec.measures["sse.gap"].count, 1);
        // A second without any writes none (and the document leaves the field out).
        let mut quiet = DdpSecond::default();
        SecondLatencies::default().fill(&[], false, &mut quiet);
        assert!(quiet.measures.is_empty());
        assert!(!serde_json::to_string(&quiet).unwrap().contains("measures"));
    }

    #[test]
    fn merge_and_summaries() {
        let names = vec![("connect".to_string(), false), ("call m".to_string(), true)];
        let mut a = VuRecorder::new(&names);
        let mut b = VuRecorder::new(&names);
        a.step_ok(0, 1000);
        a.call_ok(1, 3000, 2000, 3000);
        b.call_ok(1, 5000, 5000, 4000);
        b.step_failed(1, "timeout", "slow");
        a.launched = 2;
        b.launched = 3;
        a.first_arrival_s = Some(0.5);
        b.first_arrival_s = Some(0.1);
        b.last_finish_s = Some(9.0);
        a.merge(&b);
        assert_eq!(a.launched, 5);
        assert_eq!((a.first_arrival_s, a.last_finish_s), (Some(0.1), Some(9.0)));
        let s = step_summaries(&a, 60.0);
        assert_eq!((s[1].count, s[1].errors), (3, 1));
        // Successful attempts only, as the per-target figures count them.
        assert_eq!(s[1].per_minute, 2.0);
        // HDR keeps 3 significant digits: 5,000 µs reads back as its bucket's top, 5,003.
        let max = s[1].to_result.as_ref().unwrap().max_us;
        assert!((5000..=5003).contains(&max), "{max}");
        assert!(s[0].to_result.is_none());
        assert_eq!(a.first_errors, vec![("timeout".to_string(), "call m: slow".to_string())]);
    }
}

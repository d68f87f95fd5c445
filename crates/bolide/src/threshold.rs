//! Thresholds: one grammar for `--threshold EXPR` on every workload and for a scenario file's
//! `ensure`. An expression is a metric, a comparison and a bound with its unit:
//!
//! ```text
//! p99<200ms   p50<=20ms   max<1s   error_rate<1%   rps>=5000   errors<10
//! step["call insertTask"].p95<100ms   cpu.app<80%   cpu.app.max<150%   rss.app<500MB
//! scrape.app["nodejs_eventloop_lag_p99_seconds"].max<0.05   scrape.app['hits_total{route="/"}'].rate>100
//! ```
//!
//! This module parses and judges; reading a metric's value out of a result document is
//! `stats::verdict`'s job. Pure, so the grammar is table-tested.

use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// The metrics, as the error messages list them.
pub const METRICS: &str = "p50, p90, p95, p99, p99.9 (any pN), min, mean, max (latency: us, ms, s; a bare number \
    is ms), error_rate (%), errors (a count), rps (per second), step[\"NAME\"].p95 and the other latency \
    statistics of one DDP step, cpu.NAME (mean % of one core; cpu.NAME.max the peak) and rss.NAME (peak \
    resident memory in B, KB, MB, GB, KiB, MiB, GiB; rss.NAME.mean the mean) of a process watched with \
    --monitor NAME=... (or `server` with --spawn), and scrape.NAME[\"SERIES\"].STAT of a series read with \
    --scrape NAME=URL (STAT: increase, rate, mean, max, last, pN; in the series' own unit, a bare number), \
    probe.NAME.FIGURE of bolide-probe (eventloop_p99, eventloop_max, elu, gc, gc_p99, heap, rss, sessions, \
    subscriptions, observers, methods, method_errors) and the Monti agent's monti.system.FIGURE, \
    monti.pub[\"NAME\"].FIGURE and monti.method[\"NAME\"].FIGURE (restime_p95, errors, ...), and the \
    reactive-correctness audit's audit.failed, audit.incomplete, audit.differences and audit.checks (counts; \
    audit.failed==0), and browser users' browser.VITAL.STAT (ttfb, fcp, lcp, inp in time, cls a score; \
    browser.lcp.p75<2500ms), browser.step[\"NAME\"].STAT, browser.method[\"NAME\"].STAT (the page's DDP \
    method), browser.cpu, browser.cpu.max, browser.cpu_per_user (% of one core), browser.rss, \
    browser.rss_per_user, browser.console_errors, browser.failed_requests and browser.crashes, and the \
    fan-out latency of realtime runs, fanout.STAT (fanout.p99<50ms: from the time pushed data carries \
    to each user it reached), and a protocol's own latencies, NAME.STAT with NAME two dotted words as the \
    document's histograms.measures names them (its protocol's page lists them)";

/// A latency statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Min,
    Mean,
    Max,
    /// A percentile, 0 < p <= 100.
    Percentile(f64),
}

impl std::fmt::Display for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stat::Min => write!(f, "min"),
            Stat::Mean => write!(f, "mean"),
            Stat::Max => write!(f, "max"),
            Stat::Percentile(p) => write!(f, "p{p}"),
        }
    }
}

/// What a threshold measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// Response (HTTP) or step (DDP) latency, of everything or of one DDP step.
    Latency { step: Option<String>, stat: Stat },
    /// A realtime run's fan-out latency: from the time pushed data carries (a document's server
    /// timestamp, an event's send time) to each user it reached.
    Fanout(Stat),
    /// A protocol's own latency by its name of two dotted words (`llm.ttft`, `sse.first_event`):
    /// the document's `summary.measures`.
    Measure { name: String, stat: Stat },
    /// Failed requests (HTTP) or steps (DDP), percent.
    ErrorRate,
    /// Failed requests or steps (DDP: with users cut by the user timeout), a count.
    Errors,
    /// Responses (HTTP) or completed steps (DDP) per second.
    Rps,
    /// A watched process's CPU, percent of one core: its mean, or its peak.
    Cpu { process: String, peak: bool },
    /// A watched process's resident memory, bytes: its peak, or its mean.
    Rss { process: String, mean: bool },
    /// A series read with `--scrape`: `series` is `metric` or `metric{label="value",...}`.
    Scrape { endpoint: String, series: String, stat: ScrapeStat },
    /// A figure of bolide-probe's or the Monti agent's, by its name.
    Server(Box<Figure>),
    /// A count of the reactive-correctness audit (`audit.failed`).
    Audit(AuditFigure),
    /// A figure of the browser users (`browser.lcp.p75`, `browser.cpu`).
    Browser(BrowserFigure),
}

/// The page timings of browser users, in the order reports show them: time to first byte, first
/// and largest contentful paint, cumulative layout shift (a score), interaction to next paint.
pub const VITALS: [&str; 5] = ["ttfb", "fcp", "lcp", "cls", "inp"];

/// What of the browser users a threshold reads.
#[derive(Debug, Clone, PartialEq)]
pub enum BrowserFigure {
    /// A page timing over every navigation: ttfb, fcp, lcp, inp (time) or cls (a score).
    Vital { metric: &'static str, stat: Stat },
    /// The page's DDP method, `method` to `result` and `updated`.
    Method { name: String, stat: Stat },
    /// The browsers' CPU, % of one core: mean or peak, or the mean per browser user.
    Cpu { peak: bool, per_user: bool },
    /// The browsers' peak RSS, or per browser user.
    Rss { per_user: bool },
    /// console_errors, failed_requests or crashes.
    Count(&'static str),
}

impl BrowserFigure {
    const COUNTS: [&'static str; 3] = ["console_errors", "failed_requests", "crashes"];
    const FIGURES: &'static str = "ttfb, fcp, lcp, cls, inp (with a statistic: browser.lcp.p75), step[\"NAME\"], \
        method[\"NAME\"], cpu, cpu.max, cpu_per_user, rss, rss_per_user, console_errors, failed_requests, crashes";
}

/// What of the audit a threshold counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditFigure {
    /// Checks that found a difference.
    Failed,
    /// Checks that could not be made, and walks that stopped before their checkpoints.
    Incomplete,
    /// Differences found.
    Differences,
    /// Checks made or attempted.
    Checks,
}

impl AuditFigure {
    pub const NAMES: &'static str = "failed, incomplete, differences, checks";

    fn parse(word: &str) -> Option<AuditFigure> {
        Some(match word {
            "failed" => AuditFigure::Failed,
            "incomplete" => AuditFigure::Incomplete,
            "differences" => AuditFigure::Differences,
            "checks" => AuditFigure::Checks,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AuditFigure::Failed => "failed",
            AuditFigure::Incomplete => "incomplete",
            AuditFigure::Differences => "differences",
            AuditFigure::Checks => "checks",
        }
    }
}

/// What of a scraped series a threshold reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScrapeStat {
    /// A counter's or histogram's increase over the run.
    Increase,
    /// That per second.
    Rate,
    /// A gauge's mean or peak, or its last value.
    Mean,
    Max,
    Last,
    /// A histogram's quantile over the run, a percentile (p50, p95, p99.9), from its buckets.
    Quantile(f64),
}

impl ScrapeStat {
    pub const NAMES: &'static str = "increase, rate, mean, max, last or a percentile (p50, p95, p99.9)";

    fn parse(word: &str) -> Option<ScrapeStat> {
        Some(match word {
            "increase" => ScrapeStat::Increase,
            "rate" => ScrapeStat::Rate,
            "mean" => ScrapeStat::Mean,
            "max" => ScrapeStat::Max,
            "last" => ScrapeStat::Last,
            _ => match stat(word)? {
                Stat::Percentile(p) => ScrapeStat::Quantile(p),
                _ => return None,
            },
        })
    }

    pub fn name(self) -> String {
        match self {
            ScrapeStat::Increase => "increase".into(),
            ScrapeStat::Rate => "rate".into(),
            ScrapeStat::Mean => "mean".into(),
            ScrapeStat::Max => "max".into(),
            ScrapeStat::Last => "last".into(),
            ScrapeStat::Quantile(p) => format!("p{p}"),
        }
    }
}

/// A server-side figure named by what it means (`probe.app.eventloop_p99`,
/// `monti.pub["fetchTasks"].restime_p95`): a statistic of an endpoint's series of one metric
/// (those with `labels`, summed over their other labels), in a unit of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// As written: `probe.app.eventloop_p99`.
    pub name: String,
    /// What it is, for people: "event-loop delay p99 (mean over the run's seconds)".
    pub meaning: String,
    pub endpoint: String,
    pub metric: String,
    pub labels: Vec<(String, String)>,
    pub stat: ScrapeStat,
    /// A share: the statistic over the same statistic of this metric (then in percent).
    pub per: Option<String>,
    pub dim: Dim,
    /// From the series' unit into the dimension's: seconds to ms (1000), a ratio to % (100).
    pub scale: f64,
}

/// How a named figure is read: (word, metric, statistic, dimension, scale, meaning).
type Named = (&'static str, &'static str, ScrapeStat, Dim, f64, &'static str);

/// bolide-probe's figures (`probe.NAME.WORD`).
const PROBE_FIGURES: &[Named] = &[
    (
        "eventloop_p99",
        "probe_eventloop_delay_p99_seconds",
        ScrapeStat::Mean,
        Dim::Time,
        1000.0,
        "event-loop delay p99 (mean of the run's seconds)",
    ),
    (
        "eventloop_max",
        "probe_eventloop_delay_max_seconds",
        ScrapeStat::Max,
        Dim::Time,
        1000.0,
        "longest event-loop delay",
    ),
    ("elu", "probe_eventloop_active_seconds_total", ScrapeStat::Rate, Dim::Percent, 100.0, "event-loop utilisation"),
    ("gc", "probe_gc_pause_seconds_sum", ScrapeStat::Increase, Dim::Time, 1000.0, "GC pauses in all"),
    ("gc_p99", "probe_gc_pause_seconds", ScrapeStat::Quantile(99.0), Dim::Time, 1000.0, "GC pause p99"),
    ("heap", "probe_heap_used_bytes", ScrapeStat::Max, Dim::Bytes, 1.0, "peak heap used"),
    ("rss", "probe_rss_bytes", ScrapeStat::Max, Dim::Bytes, 1.0, "peak RSS"),
    ("sessions", "probe_meteor_sessions", ScrapeStat::Max, Dim::Count, 1.0, "most DDP sessions open"),
    ("subscriptions", "probe_meteor_subscriptions", ScrapeStat::Max, Dim::Count, 1.0, "most subscriptions open"),
    ("observers", "probe_meteor_observers", ScrapeStat::Max, Dim::Count, 1.0, "most observers live"),
    ("methods", "probe_meteor_method_calls_total", ScrapeStat::Increase, Dim::Count, 1.0, "method calls"),
    (
        "method_errors",
        "probe_meteor_method_errors_total",
        ScrapeStat::Increase,
        Dim::Count,
        1.0,
        "method calls that threw",
    ),
];

/// The Monti agent's system figures (`monti.system.WORD`).
const MONTI_SYSTEM: &[Named] = &[
    ("sessions", "monti_sessions", ScrapeStat::Max, Dim::Count, 1.0, "most DDP sessions open"),
    (
        "eventloop_p99",
        "monti_eventloop_lag_seconds",
        ScrapeStat::Quantile(99.0),
        Dim::Time,
        1000.0,
        "event-loop lag p99",
    ),
    ("gc", "monti_gc_seconds_total", ScrapeStat::Increase, Dim::Time, 1000.0, "GC time in all"),
    ("cpu", "monti_cpu_percent", ScrapeStat::Mean, Dim::Percent, 1.0, "mean CPU"),
    ("memory", "monti_memory_bytes", ScrapeStat::Max, Dim::Bytes, 1.0, "peak RSS"),
    (
        "mongo_checkout",
        "monti_mongo_pool_checkout_seconds_total",
        ScrapeStat::Increase,
        Dim::Time,
        1000.0,
        "time waited for MongoDB pool connections",
    ),
];

/// A publication's (`monti.pub["NAME"].WORD`); `restime_pN` besides.
const MONTI_PUB: &[Named] = &[
    ("subs", "monti_pub_subs_total", ScrapeStat::Increase, Dim::Count, 1.0, "subscriptions"),
    ("unsubs", "monti_pub_unsubs_total", ScrapeStat::Increase, Dim::Count, 1.0, "unsubscriptions"),
    ("errors", "monti_pub_errors_total", ScrapeStat::Increase, Dim::Count, 1.0, "subscription errors"),
    ("active_subs", "monti_pub_active_subs", ScrapeStat::Max, Dim::Count, 1.0, "most subscriptions open"),
    (
        "observers_created",
        "monti_pub_observers_created_total",
        ScrapeStat::Increase,
        Dim::Count,
        1.0,
        "observers started",
    ),
    (
        "observer_reuse",
        "monti_pub_observer_handles_reused_total",
        ScrapeStat::Increase,
        Dim::Percent,
        100.0,
        "observer handles that reused a running observer, %",
    ),
];

/// A method's (`monti.method["NAME"].WORD`); `restime_pN` besides.
const MONTI_METHOD: &[Named] = &[
    ("count", "monti_method_calls_total", ScrapeStat::Increase, Dim::Count, 1.0, "calls"),
    ("errors", "monti_method_errors_total", ScrapeStat::Increase, Dim::Count, 1.0, "calls that failed"),
];

fn words(table: &[Named], more: &str) -> String {
    let mut w: Vec<&str> = table.iter().map(|n| n.0).collect();
    if !more.is_empty() {
        w.push(more);
    }
    w.join(", ")
}

/// What a metric's value is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// Milliseconds.
    Time,
    Percent,
    PerSecond,
    Count,
    Bytes,
}

impl Dim {
    /// The unit values of this dimension are recorded in.
    pub fn unit(self) -> &'static str {
        match self {
            Dim::Time => "ms",
            Dim::Percent => "%",
            Dim::PerSecond => "/s",
            Dim::Count => "",
            Dim::Bytes => "B",
        }
    }
}

impl Metric {
    pub fn dim(&self) -> Dim {
        match self {
            Metric::Latency { .. } | Metric::Fanout(_) | Metric::Measure { .. } => Dim::Time,
            Metric::ErrorRate | Metric::Cpu { .. } => Dim::Percent,
            Metric::Errors | Metric::Audit(_) => Dim::Count,
            Metric::Browser(BrowserFigure::Vital { metric: "cls", .. }) => Dim::Count,
            Metric::Browser(BrowserFigure::Vital { .. } | BrowserFigure::Method { .. }) => Dim::Time,
            Metric::Browser(BrowserFigure::Cpu { .. }) => Dim::Percent,
            Metric::Browser(BrowserFigure::Rss { .. }) => Dim::Bytes,
            Metric::Browser(BrowserFigure::Count(_)) => Dim::Count,
            Metric::Rps => Dim::PerSecond,
            Metric::Rss { .. } => Dim::Bytes,
            Metric::Scrape { stat: ScrapeStat::Rate, .. } => Dim::PerSecond,
            Metric::Scrape { .. } => Dim::Count,
            Metric::Server(f) => f.dim,
        }
    }

    /// The process a metric reads, if any.
    pub fn process(&self) -> Option<&str> {
        match self {
            Metric::Cpu { process, .. } | Metric::Rss { process, .. } => Some(process),
            _ => None,
        }
    }

    /// What is measured, for people: "p99 of all requests", "p95 of call insertTask",
    /// "mean CPU of app (% of one core)".
    /// Whether the figure is the server's answer (errors, failed steps, the audit's outcome), to
    /// be judged at any machine load, rather than a speed or a resource that a busy machine or a
    /// saturated bolide can move.
    pub fn is_answer(&self) -> bool {
        matches!(self, Metric::ErrorRate | Metric::Errors | Metric::Audit(_))
    }

    pub fn describe(&self, ddp: bool) -> String {
        match self {
            Metric::Latency { step: Some(step), stat } => format!("{stat} of {step}"),
            Metric::Latency { step: None, stat } if ddp => format!("{stat} of all steps"),
            Metric::Latency { step: None, stat } => format!("{stat} of all requests"),
            Metric::Fanout(stat) => format!("{stat} of the fan-out latency"),
            Metric::Measure { name, stat } => format!("{stat} of {name}"),
            Metric::ErrorRate if ddp => "failed steps, % of steps".into(),
            Metric::ErrorRate => "failed requests, % of requests".into(),
            Metric::Errors if ddp => "failed steps and cut users".into(),
            Metric::Errors => "failed requests".into(),
            Metric::Rps if ddp => "steps per second".into(),
            Metric::Rps => "responses per second".into(),
            Metric::Cpu { process, peak: false } => format!("mean CPU of {process} (% of one core)"),
            Metric::Cpu { process, peak: true } => format!("peak CPU of {process} (% of one core)"),
            Metric::Rss { process, mean: false } => format!("peak RSS of {process}"),
            Metric::Rss { process, mean: true } => format!("mean RSS of {process}"),
            Metric::Scrape { endpoint, series, stat } => format!("{} of {series} at {endpoint}", stat.name()),
            Metric::Server(f) => format!("{} ({})", f.meaning, f.name),
            Metric::Audit(AuditFigure::Failed) => "audit checks that differed from the truth".into(),
            Metric::Audit(AuditFigure::Incomplete) => "audit checks not made and walks short of a checkpoint".into(),
            Metric::Audit(AuditFigure::Differences) => "differences the audit found".into(),
            Metric::Audit(AuditFigure::Checks) => "audit checks".into(),
            Metric::Browser(f) => match f {
                BrowserFigure::Vital { metric, stat } => format!("{stat} of the pages' {}", metric.to_uppercase()),
                BrowserFigure::Method { name, stat } => format!("{stat} of the pages' method {name}"),
                BrowserFigure::Cpu { peak: false, per_user: false } => {
                    "mean CPU of the browsers (% of one core)".into()
                }
                BrowserFigure::Cpu { peak: true, .. } => "peak CPU of the browsers (% of one core)".into(),
                BrowserFigure::Cpu { per_user: true, .. } => "mean CPU per browser user (% of one core)".into(),
                BrowserFigure::Rss { per_user: false } => "peak memory of the browsers".into(),
                BrowserFigure::Rss { per_user: true } => "peak memory per browser user".into(),
                BrowserFigure::Count(what) => format!("the pages' {}", what.replace('_', " ")),
            },
        }
    }
}

/// The comparison a value must pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

impl Op {
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Lt => value < bound,
            Op::Le => value <= bound,
            Op::Gt => value > bound,
            Op::Ge => value >= bound,
            Op::Eq => value == bound,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
        }
    }
}

/// Where a threshold was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Source {
    /// The scenario file's `ensure`.
    #[serde(rename = "ensure")]
    Ensure,
    /// `--threshold` on the command line.
    #[serde(rename = "--threshold")]
    Flag,
}

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The expression as written (trimmed).
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    /// In the metric's unit ([`Dim::unit`]): milliseconds, percent, per second, a count, bytes.
    pub bound: f64,
    pub source: Source,
}

/// Why an expression is not a threshold: where (1-based character column) and what.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

/// A threshold and how the run fared, as the result document records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdResult {
    /// The expression as written: `p99<200ms`.
    pub threshold: String,
    pub source: Source,
    /// What was measured: "p99 of all requests".
    pub metric: String,
    /// The measured value in `unit`; null when there was nothing to measure (then it fails).
    pub value: Option<f64>,
    /// The bound in `unit`.
    pub bound: f64,
    /// `ms`, `%`, `/s`, `B` or empty (a count).
    pub unit: String,
    pub ok: bool,
    /// Why there is no value ("no response completed", "app was never sampled").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The figure is the server's answer (errors, the audit), judged at any machine load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answer: bool,
}

impl ThresholdResult {
    /// The measured value as people read it, with its unit, or why there is none.
    pub fn shown(&self) -> String {
        match (self.value, &self.why) {
            (Some(v), _) => show(v, &self.unit),
            (None, Some(why)) => format!("no value: {why}"),
            (None, None) => "no value".into(),
        }
    }

    /// The bound as people read it.
    pub fn bound_shown(&self) -> String {
        show(self.bound, &self.unit)
    }
}

/// A value in its unit: `12.34 ms`, `0.50%`, `5012.3/s`, `3`, `412.0 MB`.
fn show(v: f64, unit: &str) -> String {
    match unit {
        "ms" => format!("{v:.2} ms"),
        "%" => format!("{v:.2}%"),
        "/s" => format!("{v:.1}/s"),
        "B" if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        "B" if v >= 1e6 => format!("{:.1} MB", v / 1e6),
        "B" if v >= 1e3 => format!("{:.1} KB", v / 1e3),
        "B" => format!("{v:.0} B"),
        _ => format!("{v}"),
    }
}

impl Threshold {
    /// The verdict on a measured value, or on the reason there is none (which fails).
    pub fn judge(&self, ddp: bool, value: Result<f64, Problem>) -> ThresholdResult {
        let (value, why) = match value {
            Ok(v) => (Some(v), None),
            Err(why) => (None, Some(why.to_string())),
        };
        ThresholdResult {
            threshold: self.text.clone(),
            source: self.source,
            metric: self.metric.describe(ddp),
            value,
            bound: self.bound,
            unit: self.metric.dim().unit().into(),
            ok: value.is_some_and(|v| self.op.holds(v, self.bound)),
            why,
            answer: self.metric.is_answer(),
        }
    }
}

/// Parses one expression.
pub fn parse(text: &str, source: Source) -> Result<Threshold, ParseError> {
    let mut p = Parser { chars: text.chars().collect(), at: 0 };
    p.skip_space();
    if p.at == p.chars.len() {
        return Err(p.error("an empty threshold; write METRIC<BOUND, e.g. p99<200ms"));
    }
    let metric = p.metric()?;
    p.skip_space();
    let op = p.op()?;
    p.skip_space();
    let start = p.at;
    let number = p.number()?;
    p.skip_space();
    let unit_at = p.at;
    let unit: String = p.chars[p.at..].iter().collect::<String>().trim_end().to_string();
    let scale = unit_scale(&metric, &unit).map_err(|m| ParseError { column: unit_at + 1, message: m.to_string() })?;
    let bound = number * scale;
    if !bound.is_finite() {
        return Err(ParseError { column: start + 1, message: "the bound is not a finite number".into() });
    }
    Ok(Threshold { text: text.trim().to_string(), metric, op, bound, source })
}

/// Parses an expression and says which one failed and why.
pub fn parse_flag(text: &str) -> Result<Threshold, Problem> {
    parse(text, Source::Flag).map_err(|e| Problem::from(format!("--threshold {text:?}: {e}")))
}

/// What one unit of the bound is in the metric's own unit; Err when the unit does not fit.
fn unit_scale(metric: &Metric, unit: &str) -> Result<f64, Problem> {
    let dim = metric.dim();
    let scale = match (dim, unit) {
        (Dim::Time, "" | "ms") => Some(1.0),
        (Dim::Time, "us" | "µs") => Some(0.001),
        (Dim::Time, "s") => Some(1000.0),
        (Dim::Time, "m" | "min") => Some(60_000.0),
        (Dim::Percent, "" | "%") => Some(1.0),
        (Dim::PerSecond, "" | "/s") => Some(1.0),
        (Dim::Count, "") => Some(1.0),
        (Dim::Bytes, "B") => Some(1.0),
        (Dim::Bytes, "KB" | "kB") => Some(1e3),
        (Dim::Bytes, "MB") => Some(1e6),
        (Dim::Bytes, "GB") => Some(1e9),
        (Dim::Bytes, "KiB") => Some(1024.0),
        (Dim::Bytes, "MiB") => Some(1024.0 * 1024.0),
        (Dim::Bytes, "GiB") => Some(1024.0 * 1024.0 * 1024.0),
        _ => None,
    };
    scale.ok_or_else(|| {
        let fits = match dim {
            Dim::Time => "us, ms, s or m (a bare number is ms)",
            Dim::Percent => "% (or none)",
            Dim::PerSecond => "/s (or none)",
            Dim::Count => "no unit",
            Dim::Bytes => "B, KB, MB, GB, KiB, MiB or GiB (memory needs a unit)",
        };
        let what = if unit.is_empty() { "no unit".to_string() } else { format!("unit {unit:?}") };
        Problem::from(format!("{what} does not fit {}: it takes {fits}", metric.describe(false)))
    })
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError { column: self.at + 1, message: message.into() }
    }

    fn skip_space(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// A name: letters, digits, `_`, `-` and `.` (percentiles such as p99.9).
    fn word(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    fn metric(&mut self) -> Result<Metric, ParseError> {
        let start = self.at;
        let word = self.word();
        let unknown =
            |what: &str| ParseError { column: start + 1, message: format!("{what}; the metrics are {METRICS}") };
        if word.is_empty() {
            return Err(unknown("expected a metric"));
        }
        if word == "step" || word.starts_with("step.") {
            self.at = start + 4;
            return self.step_metric();
        }
        if let Some(endpoint) = word.strip_prefix("scrape.") {
            if endpoint.is_empty() {
                return Err(unknown("scrape. needs the name of a --scrape endpoint: scrape.app[\"SERIES\"].rate"));
            }
            return self.scrape_metric(endpoint.to_string());
        }
        if word == "scrape" {
            return Err(unknown("scrape needs the name of a --scrape endpoint: scrape.app[\"SERIES\"].rate"));
        }
        if word == "probe" || word.starts_with("probe.") {
            return self.probe_metric(start, &word);
        }
        if word == "monti" || word.starts_with("monti.") {
            return self.monti_metric(start, &word);
        }
        if word == "browser" || word.starts_with("browser.") {
            return self.browser_metric(start, &word);
        }
        if word == "audit" || word.starts_with("audit.") {
            return match word.strip_prefix("audit.").and_then(AuditFigure::parse) {
                Some(f) => Ok(Metric::Audit(f)),
                None => Err(ParseError {
                    column: start + 1,
                    message: format!("the audit's figures are audit.FIGURE: {}", AuditFigure::NAMES),
                }),
            };
        }
        let (head, rest) = match word.split_once('.') {
            Some((h, r)) => (h, Some(r)),
            None => (word.as_str(), None),
        };
        match (head, rest) {
            ("error_rate", None) => Ok(Metric::ErrorRate),
            ("fanout", Some(rest)) => match stat(rest) {
                Some(stat) => Ok(Metric::Fanout(stat)),
                None => Err(unknown(&format!("fanout.{rest}: a latency statistic follows fanout (fanout.p99)"))),
            },
            ("fanout", None) => Err(unknown("fanout needs a latency statistic: fanout.p99")),
            ("errors", None) => Ok(Metric::Errors),
            ("rps", None) => Ok(Metric::Rps),
            ("cpu" | "rss", Some(rest)) => {
                let (process, stat) = match rest.rsplit_once('.') {
                    Some((p, s)) if matches!(s, "mean" | "max") => (p, Some(s)),
                    _ => (rest, None),
                };
                if process.is_empty() {
                    return Err(unknown(&format!("{head}. needs the name of a watched process: {head}.app")));
                }
                let process = process.to_string();
                Ok(match (head, stat) {
                    ("cpu", s) => Metric::Cpu { process, peak: s == Some("max") },
                    (_, s) => Metric::Rss { process, mean: s == Some("mean") },
                })
            }
            ("cpu" | "rss", None) => Err(unknown(&format!("{head} needs the name of a watched process: {head}.app"))),
            _ => match stat(&word) {
                Some(stat) => Ok(Metric::Latency { step: None, stat }),
                None => measure(&word).map_err(|why| unknown(&why)),
            },
        }
    }

    /// The `[` and the quoted name (in `"` or `'`) of `step["NAME"]` or `scrape.app["SERIES"]`,
    /// leaving the position after the closing quote; each error in the caller's words (`owner`:
    /// whose quote is never closed).
    fn bracketed_name(
        &mut self,
        no_bracket: &str,
        no_quote: &str,
        owner: &str,
        empty: &str,
    ) -> Result<String, ParseError> {
        if self.peek() != Some('[') {
            return Err(self.error(no_bracket));
        }
        self.at += 1;
        let Some(quote) = self.peek().filter(|c| matches!(c, '"' | '\'')) else {
            return Err(self.error(no_quote));
        };
        self.at += 1;
        let name_start = self.at;
        while self.peek().is_some_and(|c| c != quote) {
            self.at += 1;
        }
        if self.peek().is_none() {
            return Err(ParseError { column: name_start, message: format!("the {owner} {quote} is never closed") });
        }
        let name: String = self.chars[name_start..self.at].iter().collect();
        if name.trim().is_empty() {
            return Err(ParseError { column: name_start, message: empty.into() });
        }
        self.at += 1;
        Ok(name)
    }

    /// `["SERIES"].STAT` after `scrape.ENDPOINT`.
    fn scrape_metric(&mut self, endpoint: String) -> Result<Metric, ParseError> {
        let example = "scrape.app['hits_total{route=\"/\"}'].rate";
        let series = self.bracketed_name(
            &format!("expected [\"SERIES\"] after scrape.{endpoint}, e.g. {example}"),
            &format!("expected a quoted series, e.g. {example}"),
            "series'",
            "an empty series name",
        )?;
        if self.peek() != Some(']') || self.chars.get(self.at + 1) != Some(&'.') {
            return Err(self.error(format!("expected ].STAT after the series, e.g. {example}")));
        }
        self.at += 2;
        let stat_at = self.at;
        let word = self.word();
        match ScrapeStat::parse(&word) {
            Some(stat) => Ok(Metric::Scrape { endpoint, series: series.trim().to_string(), stat }),
            None => Err(ParseError {
                column: stat_at + 1,
                message: format!("{word:?} is not a statistic of a scraped series: {}", ScrapeStat::NAMES),
            }),
        }
    }

    /// `probe.NAME.FIGURE` (the whole word).
    fn probe_metric(&mut self, start: usize, word: &str) -> Result<Metric, ParseError> {
        let figures = words(PROBE_FIGURES, "");
        let err = |message: String| ParseError { column: start + 1, message };
        let Some((name, figure)) = word.strip_prefix("probe.").and_then(|r| r.rsplit_once('.')) else {
            return Err(err(format!(
                "probe needs the --probe endpoint's name and a figure: probe.app.eventloop_p99 (figures: {figures})"
            )));
        };
        if name.is_empty() {
            return Err(err(format!("probe. needs the name of a --probe endpoint: probe.app.{figure}")));
        }
        let Some(n) = PROBE_FIGURES.iter().find(|n| n.0 == figure) else {
            return Err(err(format!("{figure:?} is not a figure of bolide-probe: {figures}")));
        };
        Ok(figure_of(word, name, n, vec![], None))
    }

    /// `monti.system.FIGURE`, `monti.pub["NAME"].FIGURE`, `monti.method["NAME"].FIGURE`.
    fn monti_metric(&mut self, start: usize, word: &str) -> Result<Metric, ParseError> {
        let err = |message: String| ParseError { column: start + 1, message };
        let endpoint = crate::monitor::monti::NAME;
        if let Some(figure) = word.strip_prefix("monti.system.") {
            let Some(n) = MONTI_SYSTEM.iter().find(|n| n.0 == figure) else {
                return Err(err(format!(
                    "{figure:?} is not a system figure of the Monti agent: {}",
                    words(MONTI_SYSTEM, "")
                )));
            };
            let labels = if figure == "memory" { vec![("kind".to_string(), "rss".to_string())] } else { vec![] };
            return Ok(figure_of(word, endpoint, n, labels, None));
        }
        for family in ["monti.pub", "monti.method"] {
            if word.strip_prefix(family).is_some_and(|r| r.starts_with('.')) {
                return Err(ParseError {
                    column: start + family.len() + 1,
                    message: format!("expected [\"NAME\"] after {family}, e.g. {family}[\"NAME\"].errors"),
                });
            }
        }
        let (table, label, histogram, example) = match word {
            "monti.pub" => (MONTI_PUB, "pub", "monti_pub_response_seconds", "monti.pub[\"fetchTasks\"].restime_p95"),
            "monti.method" => {
                (MONTI_METHOD, "method", "monti_method_response_seconds", "monti.method[\"insertTask\"].errors")
            }
            _ => {
                return Err(err("the Monti agent's figures are monti.system.FIGURE, monti.pub[\"NAME\"].FIGURE and \
                     monti.method[\"NAME\"].FIGURE"
                    .into()))
            }
        };
        let name = self.bracketed_name(
            &format!("expected [\"NAME\"] after {word}, e.g. {example}"),
            &format!("expected a quoted name, e.g. {example}"),
            "name's",
            "an empty name",
        )?;
        if self.peek() != Some(']') || self.chars.get(self.at + 1) != Some(&'.') {
            return Err(self.error(format!("expected ].FIGURE after the name, e.g. {example}")));
        }
        self.at += 2;
        let figure_at = self.at;
        let figure = self.word();
        let written = format!("{word}[{name:?}].{figure}");
        let labels = vec![(label.to_string(), name.clone())];
        if let Some(Stat::Percentile(p)) = figure.strip_prefix("restime_").and_then(stat) {
            let n: Named = ("", histogram, ScrapeStat::Quantile(p), Dim::Time, 1000.0, "");
            let mut m = figure_of(&written, endpoint, &n, labels, None);
            if let Metric::Server(f) = &mut m {
                f.meaning = format!("p{p} of {name}'s response time");
            }
            return Ok(m);
        }
        let Some(n) = table.iter().find(|n| n.0 == figure) else {
            return Err(ParseError {
                column: figure_at + 1,
                message: format!(
                    "{figure:?} is not a figure of a {}: {}",
                    if label == "pub" { "publication" } else { "method" },
                    words(table, "restime_pN (p50, p95, p99.9)")
                ),
            });
        };
        let per = (figure == "observer_reuse").then(|| "monti_pub_observer_handles_total".to_string());
        let mut m = figure_of(&written, endpoint, n, labels, per);
        if let Metric::Server(f) = &mut m {
            f.meaning = format!("{name}: {}", f.meaning);
        }
        Ok(m)
    }

    /// `browser.FIGURE`: a page timing with its statistic, a browser step's or page method's
    /// latency, the browsers' cost, the pages' error counts.
    fn browser_metric(&mut self, start: usize, word: &str) -> Result<Metric, ParseError> {
        let err = |message: String| ParseError { column: start + 1, message };
        let figures = BrowserFigure::FIGURES;
        let rest = word.strip_prefix("browser.").unwrap_or_default();
        if rest == "step" || rest == "method" {
            if rest == "step" {
                self.at = start + "browser.step".len();
                return self.step_metric();
            }
            let name = self.bracketed_name(
                "expected [\"NAME\"] after browser.method, e.g. browser.method[\"insertTask\"].p95",
                "expected a quoted method name, e.g. browser.method[\"insertTask\"]",
                "method name's",
                "an empty method name",
            )?;
            if self.peek() != Some(']') || self.chars.get(self.at + 1) != Some(&'.') {
                return Err(
                    self.error("expected ].STATISTIC after the method, e.g. browser.method[\"insertTask\"].p95")
                );
            }
            self.at += 2;
            let stat_at = self.at;
            let w = self.word();
            return match stat(&w) {
                Some(stat) => Ok(Metric::Browser(BrowserFigure::Method { name, stat })),
                None => Err(ParseError {
                    column: stat_at + 1,
                    message: format!("{w:?} is not a latency statistic: min, mean, max or a percentile (p50, p95)"),
                }),
            };
        }
        let figure = match rest {
            "cpu" => BrowserFigure::Cpu { peak: false, per_user: false },
            "cpu.max" => BrowserFigure::Cpu { peak: true, per_user: false },
            "cpu_per_user" => BrowserFigure::Cpu { peak: false, per_user: true },
            "rss" => BrowserFigure::Rss { per_user: false },
            "rss_per_user" => BrowserFigure::Rss { per_user: true },
            _ => {
                if let Some(c) = BrowserFigure::COUNTS.iter().find(|c| **c == rest) {
                    return Ok(Metric::Browser(BrowserFigure::Count(c)));
                }
                let (vital, st) = rest.split_once('.').unwrap_or((rest, ""));
                let Some(metric) = VITALS.iter().find(|v| **v == vital) else {
                    return Err(err(format!(
                        "{word:?} is not a figure of the browser users: browser.FIGURE, {figures}"
                    )));
                };
                return match stat(st) {
                    Some(stat) => Ok(Metric::Browser(BrowserFigure::Vital { metric, stat })),
                    None => Err(err(format!(
                        "{word}: a page timing needs a statistic: browser.{vital}.p75 (min, mean, max, pN)"
                    ))),
                };
            }
        };
        Ok(Metric::Browser(figure))
    }

    /// `step["NAME"].STAT` (after `step`).
    fn step_metric(&mut self) -> Result<Metric, ParseError> {
        let name = self.bracketed_name(
            "expected [\"STEP NAME\"] after step, e.g. step[\"call insertTask\"].p95",
            "expected a quoted step name, e.g. step[\"call insertTask\"]",
            "step name's",
            "an empty step name",
        )?;
        if self.peek() != Some(']') {
            return Err(self.error("expected ] after the step name"));
        }
        self.at += 1;
        if self.peek() != Some('.') {
            return Err(self.error("expected .STATISTIC after step[...], e.g. step[\"call insertTask\"].p95"));
        }
        self.at += 1;
        let stat_at = self.at;
        let word = self.word();
        match stat(&word) {
            Some(stat) => Ok(Metric::Latency { step: Some(name), stat }),
            None => Err(ParseError {
                column: stat_at + 1,
                message: format!(
                    "{:?} is not a latency statistic of step {name:?}: min, mean, max or a percentile (p50, p95, p99.9)",
                    word
                ),
            }),
        }
    }

    fn op(&mut self) -> Result<Op, ParseError> {
        let op = match (self.peek(), self.chars.get(self.at + 1)) {
            (Some('<'), Some('=')) => Op::Le,
            (Some('>'), Some('=')) => Op::Ge,
            (Some('<'), _) => Op::Lt,
            (Some('>'), _) => Op::Gt,
            (Some('='), Some('=')) => Op::Eq,
            (Some('='), _) => return Err(self.error("= is no comparison here: use <, <=, >, >= or ==")),
            (None, _) => return Err(self.error("expected <, <=, > or >= and a bound after the metric")),
            (Some(c), _) => return Err(self.error(format!("expected <, <=, > or >=, found {c:?}"))),
        };
        self.at += op.symbol().len();
        Ok(op)
    }

    fn number(&mut self) -> Result<f64, ParseError> {
        let start = self.at;
        if matches!(self.peek(), Some('+' | '-')) {
            self.at += 1;
        }
        while self.peek().is_some_and(|c| c.is_ascii_digit() || matches!(c, '.' | '_')) {
            self.at += 1;
        }
        let text: String = self.chars[start..self.at].iter().filter(|c| **c != '_').collect();
        match text.parse::<f64>() {
            Ok(v) if v >= 0.0 => Ok(v),
            Ok(_) => Err(ParseError { column: start + 1, message: "the bound must not be negative".into() }),
            Err(_) => Err(ParseError {
                column: start + 1,
                message: match self.chars.get(start) {
                    Some(c) => format!("expected a number, found {c:?}"),
                    None => "expected a number after the comparison".into(),
                },
            }),
        }
    }
}

/// A protocol's own latency, `NAME.STAT` with NAME two dotted words (`llm.ttft.p99`,
/// `sse.first_event.p99.9`); the reason when `word` is not one.
fn measure(word: &str) -> Result<Metric, String> {
    let is_name = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-'));
    let mut parts = word.splitn(3, '.');
    let (a, b, rest) = (parts.next().unwrap_or(""), parts.next(), parts.next());
    // The grammar's own words keep their meaning: error_rate.x is a mistake, not a measure.
    if ["error_rate", "errors", "rps", "fanout", "cpu", "rss"].contains(&a) {
        return Err(format!("unknown metric {word:?}"));
    }
    match (b, rest) {
        (Some(b), Some(rest)) if is_name(a) && is_name(b) => match stat(rest) {
            Some(stat) => Ok(Metric::Measure { name: format!("{a}.{b}"), stat }),
            None => Err(format!("{word}: a latency statistic follows a measure's name ({a}.{b}.p99)")),
        },
        (Some(b), None) if is_name(a) && is_name(b) => {
            Err(format!("{word} needs a latency statistic: {word}.p99 (a protocol's measure is NAME.STAT)"))
        }
        _ => Err(format!("unknown metric {word:?}")),
    }
}

/// A latency statistic's name: min, mean, max, median, pN.
fn stat(word: &str) -> Option<Stat> {
    match word {
        "min" => Some(Stat::Min),
        "mean" | "avg" => Some(Stat::Mean),
        "max" => Some(Stat::Max),
        "median" => Some(Stat::Percentile(50.0)),
        _ => {
            let digits = word.strip_prefix('p')?;
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return None;
            }
            // p999 is p99.9, as in many tools; p99.9 says it plainly.
            let p: f64 = match digits {
                "999" => 99.9,
                "9999" => 99.99,
                d => d.parse().ok()?,
            };
            (p > 0.0 && p <= 100.0).then_some(Stat::Percentile(p))
        }
    }
}

fn figure_of(written: &str, endpoint: &str, n: &Named, labels: Vec<(String, String)>, per: Option<String>) -> Metric {
    Metric::Server(Box::new(Figure {
        name: written.to_string(),
        meaning: n.5.to_string(),
        endpoint: endpoint.to_string(),
        metric: n.1.to_string(),
        labels,
        stat: n.2,
        per,
        dim: n.3,
        scale: n.4,
    }))
}

/// A workload's names the thresholds may use: its DDP steps (None for HTTP) and the watched
/// processes.
pub struct Names<'a> {
    pub steps: Option<&'a [String]>,
    pub processes: &'a [String],
    /// The `--scrape` endpoints' names.
    pub scraped: &'a [String],
}

/// Whether a threshold can be judged on a workload with these names; the reason when not.
pub fn check(t: &Threshold, names: &Names) -> Result<(), Problem> {
    let list = |names: &[String]| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
        }
    };
    if let Metric::Latency { step: Some(step), .. } = &t.metric {
        match names.steps {
            None => {
                return Err(
                    format!("{}: step[...] applies to DDP runs (bolide run); an HTTP run has no steps", t.text).into()
                )
            }
            Some(steps) if !steps.iter().any(|s| s == step) => {
                return Err(format!("{}: no step is named {step:?}; the steps are {}", t.text, list(steps)).into())
            }
            Some(_) => {}
        }
    }
    if matches!(t.metric, Metric::Fanout(_)) && names.steps.is_none() {
        return Err(
            format!("{}: fanout applies to realtime runs (bolide run); an HTTP run pushes nothing", t.text).into()
        );
    }
    if let (Metric::Measure { name, .. }, None) = (&t.metric, names.steps) {
        return Err(format!(
            "{}: {name} is a realtime protocol's measure (bolide run); an HTTP run takes none",
            t.text
        )
        .into());
    }
    if let Metric::Server(f) = &t.metric {
        if !names.scraped.contains(&f.endpoint) {
            let add = if f.endpoint == crate::monitor::monti::NAME {
                "add --monti".to_string()
            } else {
                format!("add --probe {}=HOST:PORT", f.endpoint)
            };
            return Err(format!("{}: {} is not read in this run; {add}", t.text, f.endpoint).into());
        }
    }
    if let Metric::Scrape { endpoint, .. } = &t.metric {
        if !names.scraped.iter().any(|n| n == endpoint) {
            return Err(format!(
                "{}: no endpoint named {endpoint:?} is scraped (scraped: {}); add --scrape {endpoint}=URL",
                t.text,
                list(names.scraped)
            )
            .into());
        }
    }
    if let Some(p) = t.metric.process() {
        if !names.processes.iter().any(|n| n == p) {
            return Err(format!(
                "{}: no process named {p:?} is watched (watched: {}); add --monitor {p}=PID or {p}=:PORT",
                t.text,
                list(names.processes)
            )
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Threshold {
        parse(text, Source::Flag).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn valid_expressions_parse_to_metric_op_and_bound_in_the_metrics_unit() {
        let lat = |stat| Metric::Latency { step: None, stat };
        let measure = |name: &str, stat| Metric::Measure { name: name.into(), stat };
        let table: &[(&str, Metric, Op, f64)] = &[
            ("p99<200ms", lat(Stat::Percentile(99.0)), Op::Lt, 200.0),
            ("p50<=20ms", lat(Stat::Percentile(50.0)), Op::Le, 20.0),
            ("max<1s", lat(Stat::Max), Op::Lt, 1000.0),
            ("p99.9 < 2.5s", lat(Stat::Percentile(99.9)), Op::Lt, 2500.0),
            ("p999<900us", lat(Stat::Percentile(99.9)), Op::Lt, 0.9),
            ("mean<15", lat(Stat::Mean), Op::Lt, 15.0),
            ("min>=1ms", lat(Stat::Min), Op::Ge, 1.0),
            ("median<1m", lat(Stat::Percentile(50.0)), Op::Lt, 60_000.0),
            ("error_rate<1%", Metric::ErrorRate, Op::Lt, 1.0),
            ("fanout.p99<50ms", Metric::Fanout(Stat::Percentile(99.0)), Op::Lt, 50.0),
            ("fanout.max < 1s", Metric::Fanout(Stat::Max), Op::Lt, 1000.0),
            ("audit.failed==0", Metric::Audit(AuditFigure::Failed), Op::Eq, 0.0),
            ("audit.incomplete <= 2", Metric::Audit(AuditFigure::Incomplete), Op::Le, 2.0),
            ("audit.checks>=20", Metric::Audit(AuditFigure::Checks), Op::Ge, 20.0),
            (
                "browser.lcp.p75<2500ms",
                Metric::Browser(BrowserFigure::Vital { metric: "lcp", stat: Stat::Percentile(75.0) }),
                Op::Lt,
                2500.0,
            ),
            (
                "browser.cls.p75<0.1",
                Metric::Browser(BrowserFigure::Vital { metric: "cls", stat: Stat::Percentile(75.0) }),
                Op::Lt,
                0.1,
            ),
            (
                "browser.step[\"click #add\"].p99<1s",
                Metric::Latency { step: Some("click #add".into()), stat: Stat::Percentile(99.0) },
                Op::Lt,
                1000.0,
            ),
            (
                "browser.method['insertTask'].p50<20ms",
                Metric::Browser(BrowserFigure::Method { name: "insertTask".into(), stat: Stat::Percentile(50.0) }),
                Op::Lt,
                20.0,
            ),
            (
                "browser.cpu_per_user<50%",
                Metric::Browser(BrowserFigure::Cpu { peak: false, per_user: true }),
                Op::Lt,
                50.0,
            ),
            ("browser.rss<2GB", Metric::Browser(BrowserFigure::Rss { per_user: false }), Op::Lt, 2e9),
            ("browser.crashes==0", Metric::Browser(BrowserFigure::Count("crashes")), Op::Eq, 0.0),
            (
                "scrape.app['hits_total{route=\"/\"}'].rate>100",
                Metric::Scrape {
                    endpoint: "app".into(),
                    series: "hits_total{route=\"/\"}".into(),
                    stat: ScrapeStat::Rate,
                },
                Op::Gt,
                100.0,
            ),
            (
                "scrape.node-1[\"lag_seconds\"].p99 < 0.05",
                Metric::Scrape {
                    endpoint: "node-1".into(),
                    series: "lag_seconds".into(),
                    stat: ScrapeStat::Quantile(99.0),
                },
                Op::Lt,
                0.05,
            ),
            ("error_rate<=0.5", Metric::ErrorRate, Op::Le, 0.5),
            // A protocol's own latencies: two dotted words and a statistic, in time units.
            ("llm.ttft.p99<2s", measure("llm.ttft", Stat::Percentile(99.0)), Op::Lt, 2000.0),
            ("llm.itl.p99<100ms", measure("llm.itl", Stat::Percentile(99.0)), Op::Lt, 100.0),
            ("sse.first_event.p95<500ms", measure("sse.first_event", Stat::Percentile(95.0)), Op::Lt, 500.0),
            ("llm.tpot.mean<50ms", measure("llm.tpot", Stat::Mean), Op::Lt, 50.0),
            ("llm.e2el.max <= 1m", measure("llm.e2el", Stat::Max), Op::Le, 60_000.0),
            ("sse.gap.p99.9<1500us", measure("sse.gap", Stat::Percentile(99.9)), Op::Lt, 1.5),
            ("llm.ttft.median<800", measure("llm.ttft", Stat::Percentile(50.0)), Op::Lt, 800.0),
            ("errors<1", Metric::Errors, Op::Lt, 1.0),
            ("rps>=5000", Metric::Rps, Op::Ge, 5000.0),
            ("rps>1_000/s", Metric::Rps, Op::Gt, 1000.0),
            (
                "step[\"call insertTask\"].p95<100ms",
                Metric::Latency { step: Some("call insertTask".into()), stat: Stat::Percentile(95.0) },
                Op::Lt,
                100.0,
            ),
            (
                "step['add a task'].max<2s",
                Metric::Latency { step: Some("add a task".into()), stat: Stat::Max },
                Op::Lt,
                2000.0,
            ),
            ("cpu.app<80%", Metric::Cpu { process: "app".into(), peak: false }, Op::Lt, 80.0),
            ("cpu.app.max<150", Metric::Cpu { process: "app".into(), peak: true }, Op::Lt, 150.0),
            ("cpu.my-db.mean<5%", Metric::Cpu { process: "my-db".into(), peak: false }, Op::Lt, 5.0),
            ("rss.app<500MB", Metric::Rss { process: "app".into(), mean: false }, Op::Lt, 500e6),
            (
                "rss.app.mean<1.5GiB",
                Metric::Rss { process: "app".into(), mean: true },
                Op::Lt,
                1.5 * 1024.0 * 1024.0 * 1024.0,
            ),
            ("  rss.db <= 64KiB ", Metric::Rss { process: "db".into(), mean: false }, Op::Le, 65536.0),
            (
                "scrape.app['h'].p99.9<0.5",
                Metric::Scrape { endpoint: "app".into(), series: "h".into(), stat: ScrapeStat::Quantile(99.9) },
                Op::Lt,
                0.5,
            ),
        ];
        for (text, metric, op, bound) in table {
            let t = ok(text);
            assert_eq!(&t.metric, metric, "{text}");
            assert_eq!(t.op, *op, "{text}");
            assert!((t.bound - bound).abs() < 1e-9, "{text}: {} != {bound}", t.bound);
            assert_eq!(t.text, text.trim());
        }
    }

    #[test]
    fn named_server_figures_read_their_series_in_their_units() {
        let figure = |text: &str| match ok(text).metric {
            Metric::Server(f) => *f,
            m => panic!("{text}: {m:?}"),
        };
        let f = figure("probe.app.eventloop_p99<50ms");
        assert_eq!(
            (f.endpoint.as_str(), f.metric.as_str(), f.stat, f.dim, f.scale),
            ("app", "probe_eventloop_delay_p99_seconds", ScrapeStat::Mean, Dim::Time, 1000.0)
        );
        assert_eq!(ok("probe.node-1.elu<70%").bound, 70.0);
        assert_eq!(ok("probe.app.heap<200MB").bound, 200e6);
        let f = figure("monti.pub[\"fetchTasks\"].restime_p95<200ms");
        assert_eq!(
            (f.endpoint.as_str(), f.metric.as_str(), f.stat, f.labels.clone()),
            (
                "monti",
                "monti_pub_response_seconds",
                ScrapeStat::Quantile(95.0),
                vec![("pub".to_string(), "fetchTasks".to_string())]
            )
        );
        assert_eq!(ok("monti.pub[\"fetchTasks\"].restime_p95<0.2s").bound, 200.0);
        assert!(ok("monti.pub['fetchTasks'].restime_p95<200ms").metric.describe(true).contains("p95 of fetchTasks"));
        let f = figure("monti.pub['tasks'].observer_reuse>50%");
        assert_eq!((f.per.as_deref(), f.dim), (Some("monti_pub_observer_handles_total"), Dim::Percent));
        let f = figure("monti.method['insertTask'].errors<1");
        assert_eq!((f.metric.as_str(), f.stat), ("monti_method_errors_total", ScrapeStat::Increase));
        let f = figure("monti.system.memory<1GB");
        assert_eq!(f.labels, vec![("kind".to_string(), "rss".to_string())]);
        let names = Names { steps: None, processes: &[], scraped: &["app".to_string()] };
        assert!(check(&ok("probe.app.gc<100ms"), &names).is_ok());
        assert!(check(&ok("probe.db.gc<100ms"), &names).unwrap_err().to_string().contains("add --probe db=HOST:PORT"));
        assert!(check(&ok("monti.system.sessions<10"), &names).unwrap_err().to_string().contains("add --monti"));
    }

    #[test]
    fn invalid_expressions_name_the_column_and_what_was_expected() {
        // (expression, column, words the message holds)
        let table: &[(&str, usize, &[&str])] = &[
            ("", 1, &["empty"]),
            ("p99", 4, &["expected <"]),
            ("p99=200ms", 4, &["= is no comparison"]),
            ("audit.lost==0", 1, &["audit.FIGURE: failed, incomplete, differences, checks"]),
            ("browser.lcp<2s", 1, &["a page timing needs a statistic: browser.lcp.p75"]),
            ("browser.speed>1", 1, &["not a figure of the browser users", "cpu_per_user"]),
            ("p99<<200ms", 5, &["expected a number", "'<'"]),
            ("p99<", 5, &["expected a number after"]),
            ("p99<-5ms", 5, &["negative"]),
            ("p99<200ks", 8, &["unit \"ks\"", "us, ms, s or m"]),
            ("latency<200ms", 1, &["unknown metric \"latency\"", "error_rate", "step[\"NAME\"]", "rss.NAME"]),
            ("p0<1ms", 1, &["unknown metric"]),
            ("scrape.app<1", 11, &["expected [\"SERIES\"] after scrape.app"]),
            ("scrape.app[\"x\"].p0<1", 17, &["\"p0\" is not a statistic of a scraped series", "increase, rate"]),
            ("probe<1", 1, &["probe needs the --probe endpoint's name", "eventloop_p99"]),
            ("probe.app.lag<1ms", 1, &["\"lag\" is not a figure of bolide-probe", "eventloop_max, elu"]),
            ("probe..gc<1ms", 1, &["probe. needs the name"]),
            ("probe.app.heap<5", 17, &["memory needs a unit"]),
            ("monti.x<1", 1, &["monti.system.FIGURE, monti.pub[\"NAME\"].FIGURE"]),
            ("monti.system.lag<1", 1, &["\"lag\" is not a system figure", "eventloop_p99"]),
            ("monti.pub.subs<1", 10, &["expected [\"NAME\"] after monti.pub"]),
            ("monti.pub[\"a\"].restime<1", 16, &["\"restime\" is not a figure of a publication", "restime_pN"]),
            ("monti.method[\"a\"]count<1", 17, &["expected ].FIGURE"]),
            ("scrape.app[\"x\"].max<1ms", 22, &["unit \"ms\" does not fit"]),
            ("scrape[\"x\"].max<1", 1, &["scrape needs the name of a --scrape endpoint"]),
            ("p101<1ms", 1, &["unknown metric"]),
            ("error_rate<1MB", 13, &["does not fit", "% (or none)"]),
            ("rss.app<500", 12, &["no unit", "memory needs a unit"]),
            ("errors<1%", 9, &["takes no unit"]),
            ("cpu<80%", 1, &["cpu needs the name of a watched process"]),
            ("cpu.<80%", 1, &["cpu. needs the name"]),
            ("step.p95<1ms", 5, &["expected [\"STEP NAME\"]"]),
            ("step[p95]<1ms", 6, &["quoted step name"]),
            ("step[\"x].p95<1ms", 6, &["never closed"]),
            ("step[\"\"].p95<1ms", 6, &["empty step name"]),
            ("step[\"x\"]p95<1ms", 10, &["expected .STATISTIC"]),
            ("step[\"x\"].p<1ms", 11, &["not a latency statistic of step \"x\""]),
            // A measure: its name wants a statistic, its statistic a time.
            ("llm.ttft<2s", 1, &["llm.ttft needs a latency statistic: llm.ttft.p99"]),
            ("llm.ttft.p0<2s", 1, &["llm.ttft.p0: a latency statistic follows a measure's name (llm.ttft.p99)"]),
            ("llm.ttft.fast<2s", 1, &["a latency statistic follows", "NAME.STAT"]),
            ("llm.ttft.p99<2MB", 15, &["unit \"MB\" does not fit p99 of llm.ttft", "us, ms, s or m"]),
            (".ttft.p99<2s", 1, &["unknown metric \".ttft.p99\""]),
            ("llm..p99<2s", 1, &["unknown metric \"llm..p99\""]),
            // The grammar's own words are not measures.
            ("error_rate.x.p99<1", 1, &["unknown metric \"error_rate.x.p99\""]),
            ("rps.x<1", 1, &["unknown metric \"rps.x\""]),
        ];
        for (text, column, words) in table {
            let e = match parse(text, Source::Flag) {
                Ok(t) => panic!("{text:?} parsed: {t:?}"),
                Err(e) => e,
            };
            assert_eq!(e.column, *column, "{text:?}: {e}");
            for w in *words {
                assert!(e.message.contains(w), "{text:?}: {:?} lacks {w:?}", e.message);
            }
        }
        let huge = format!("rps>1{}", "0".repeat(400));
        assert!(parse(&huge, Source::Flag).unwrap_err().message.contains("finite"));
        assert_eq!(
            parse_flag("p99").unwrap_err(),
            "--threshold \"p99\": column 4: expected <, <=, > or >= and a bound after the metric".into()
        );
    }

    #[test]
    fn verdicts_compare_with_the_operator_and_fail_without_a_value() {
        let t = ok("p99<200ms");
        let r = t.judge(false, Ok(199.9));
        assert!(r.ok);
        assert_eq!((r.metric.as_str(), r.unit.as_str(), r.shown()), ("p99 of all requests", "ms", "199.90 ms".into()));
        assert!(!t.judge(false, Ok(200.0)).ok, "< is strict");
        assert!(ok("p99<=200ms").judge(false, Ok(200.0)).ok);
        assert!(ok("rps>=5000").judge(false, Ok(5000.0)).ok);
        assert!(!ok("rps>5000").judge(false, Ok(5000.0)).ok);
        let none = t.judge(true, Err("no step completed".into()));
        assert!(!none.ok);
        assert_eq!(none.metric, "p99 of all steps");
        assert_eq!(none.shown(), "no value: no step completed");
        assert_eq!(ok("rss.app<500MB").judge(false, Ok(412e6)).shown(), "412.0 MB");
        assert_eq!(ok("rss.app<500MB").judge(false, Ok(0.0)).bound_shown(), "500.0 MB");
    }

    #[test]
    fn names_are_checked_against_the_workload() {
        let steps = vec!["connect".to_string(), "call insertTask".to_string()];
        let processes = vec!["app".to_string()];
        let ddp = Names { steps: Some(&steps), processes: &processes, scraped: &[] };
        let http = Names { steps: None, processes: &[], scraped: &[] };
        assert!(check(&ok("step[\"call insertTask\"].p95<1s"), &ddp).is_ok());
        let e = check(&ok("step[\"call insertTsk\"].p95<1s"), &ddp).unwrap_err().to_string();
        assert!(
            e.contains("no step is named \"call insertTsk\"; the steps are \"connect\", \"call insertTask\""),
            "{e}"
        );
        let e = check(&ok("step[\"a\"].p95<1s"), &http).unwrap_err().to_string();
        assert!(e.contains("applies to DDP runs"), "{e}");
        assert!(check(&ok("cpu.app<80%"), &ddp).is_ok());
        let e = check(&ok("rss.db<1GB"), &ddp).unwrap_err().to_string();
        assert!(e.contains("no process named \"db\" is watched (watched: \"app\"); add --monitor db=PID"), "{e}");
        let e = check(&ok("cpu.app<80%"), &http).unwrap_err().to_string();
        assert!(e.contains("(watched: none)"), "{e}");
        assert!(check(&ok("p99<1s"), &http).is_ok());
        // A protocol's measure is known only once the run has taken it: a realtime run may.
        assert!(check(&ok("llm.ttft.p99<2s"), &ddp).is_ok());
        let e = check(&ok("llm.ttft.p99<2s"), &http).unwrap_err().to_string();
        assert!(e.contains("llm.ttft is a realtime protocol's measure (bolide run)"), "{e}");
    }
}

//! What each chart of a report plots, built from result documents only. The HTML report draws
//! these with uPlot; the tests snapshot them ([`Chart::outline`]).

use serde::Serialize;

use crate::monitor::generator::{GeneratorResult, MACHINE_IDLE_FLOOR_PCT, SATURATED_THREAD_PCT};
use crate::monitor::MonitorResult;
use crate::problem::Problem;
use crate::stats::doc::Doc;
use crate::stats::result::ResultDoc;
use crate::stats::vu::VuDoc;

/// Most points a series keeps; longer ones are bucketed (each bucket's mean, or its maximum for
/// series where a peak matters), so a report of an hours-long run stays small and fast.
pub const MAX_POINTS: usize = 2_000;

/// How a chart's x axis reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XKind {
    /// Seconds since the run started.
    Seconds,
    /// A percentile spectrum: x is 1 / (1 - q), drawn on a log scale and labelled as percentiles.
    Percentile,
    /// Run numbers of a series (1, 2, ...).
    Run,
    /// The levels of a capacity ladder (users or requests per second or minute).
    Level,
    /// Named places (labels of a history, steps of a scenario): x is 1, 2, ... and `x_names` says
    /// what each is.
    Label,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Style {
    Line,
    /// Marks only (e.g. the samples in which bolide itself was saturated).
    Points,
    /// Small marks, many of them (every request's response time).
    Dots,
    /// Bars from zero (counts by status or class).
    Bars,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub label: String,
    pub style: Style,
    /// One per x; `None` where the series has no value.
    pub values: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    /// Stable name (for tests and links).
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_kind: XKind,
    pub x: Vec<f64>,
    /// The name of each x, for [`XKind::Label`] charts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub x_names: Vec<String>,
    pub series: Vec<Series>,
    /// Why there is nothing to draw (then `x` and `series` are empty).
    pub empty: Option<String>,
    /// The heading the chart is drawn under with the charts of the same group (the server's
    /// internals of one endpoint), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// A colour per series (CSS `#rrggbb`), where a series means a verdict and is drawn in its
    /// tone (a ladder's passed, failed, no verdict); empty: the palette in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub colours: Vec<String>,
}

/// How a long series is bucketed.
#[derive(Clone, Copy)]
enum Reduce {
    Mean,
    Max,
}

impl Chart {
    fn new(id: &str, title: &str, x_label: &str, y_label: &str, x_kind: XKind) -> Chart {
        Chart {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_kind,
            x: Vec::new(),
            x_names: Vec::new(),
            series: Vec::new(),
            empty: None,
            group: None,
            colours: Vec::new(),
        }
    }

    /// A chart over named places (x is 1, 2, ... and `names` says what each is), series to add.
    pub fn labelled(id: &str, title: &str, x_label: &str, y_label: &str, x: Vec<f64>, names: Vec<String>) -> Chart {
        let mut c = Chart::new(id, title, x_label, y_label, XKind::Label);
        c.x = x;
        c.x_names = names;
        c
    }

    fn empty_because(mut self, why: &str) -> Chart {
        self.x.clear();
        self.series.clear();
        self.empty = Some(why.into());
        self
    }

    /// Points drawn: x values times series (what the page reports back to the tests).
    pub fn points(&self) -> usize {
        self.series.iter().map(|s| s.values.iter().flatten().count()).sum()
    }

    /// A short text of what the chart plots: title, axes, each series' point count, first and last
    /// values, minimum and maximum (the snapshot the tests keep).
    pub fn outline(&self) -> String {
        let mut out =
            format!("{} [{}] ({:?}) x: {}, y: {}\n", self.title, self.id, self.x_kind, self.x_label, self.y_label);
        if let Some(why) = &self.empty {
            out.push_str(&format!("  empty: {why}\n"));
            return out;
        }
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        out.push_str(&format!(
            "  x: {} points, {} .. {}\n",
            self.x.len(),
            fmt(self.x.first().copied()),
            fmt(self.x.last().copied())
        ));
        if !self.x_names.is_empty() {
            out.push_str(&format!("  x names: {}\n", self.x_names.join(", ")));
        }
        for s in &self.series {
            let vals: Vec<f64> = s.values.iter().flatten().copied().collect();
            let min = vals.iter().copied().reduce(f64::min);
            let max = vals.iter().copied().reduce(f64::max);
            out.push_str(&format!(
                "  {} ({:?}): {} points, first {}, last {}, min {}, max {}\n",
                s.label,
                s.style,
                vals.len(),
                fmt(vals.first().copied()),
                fmt(vals.last().copied()),
                fmt(min),
                fmt(max)
            ));
        }
        out
    }

    /// Adds a series, bucketing everything once the chart is complete ([`Chart::decimate`]).
    fn line(&mut self, label: &str, values: Vec<Option<f64>>) {
        self.series.push(Series { label: label.into(), style: Style::Line, values });
    }

    /// Keeps at most [`MAX_POINTS`] x values: each bucket's x is its first, each series' value the
    /// bucket's mean or maximum as `reduce` says (one per series, in order).
    fn decimate(mut self, reduce: &[Reduce]) -> Chart {
        let n = self.x.len();
        if n <= MAX_POINTS {
            return self;
        }
        let per = n.div_ceil(MAX_POINTS);
        self.x = self.x.chunks(per).map(|c| c[0]).collect();
        for (i, s) in self.series.iter_mut().enumerate() {
            let how = reduce.get(i).copied().unwrap_or(Reduce::Mean);
            s.values = s
                .values
                .chunks(per)
                .map(|c| {
                    let vals: Vec<f64> = c.iter().flatten().copied().collect();
                    if vals.is_empty() {
                        return None;
                    }
                    Some(match how {
                        Reduce::Mean => vals.iter().sum::<f64>() / vals.len() as f64,
                        Reduce::Max => vals.iter().copied().fold(f64::MIN, f64::max),
                    })
                })
                .collect();
        }
        self
    }
}

/// Every chart of one run, in the order a reader wants them.
pub fn single_run(doc: &Doc) -> Vec<Chart> {
    let mut charts = super::shown(doc).charts();
    let (monitor, generator) = (doc.monitor(), doc.generator());
    charts.push(outcomes(doc));
    charts.extend(server_charts(monitor));
    charts.extend(scrape_charts(doc.scrape()));
    charts.push(generator_chart(generator));
    charts
}

pub(super) fn http_charts(d: &ResultDoc) -> Vec<Chart> {
    // The run's last, partial second (a `-d 3s` run's last millisecond) is scaled by its span
    // below; one shorter than half a second holds too few requests to say a rate or a
    // percentile, and is left off rather than drawn as a collapse.
    let secs = match d.timeline.split_last() {
        Some((last, rest)) if !rest.is_empty() && last.span_s < 0.5 => rest,
        _ => &d.timeline[..],
    };
    let x: Vec<f64> = secs.iter().map(|s| f64::from(s.t)).collect();
    let per_s = |v: u64, span: f64| Some(if span > 0.0 { v as f64 / span } else { 0.0 });
    let mut rate = Chart::new("throughput", "Responses and errors per second", "seconds", "per second", XKind::Seconds);
    let mut lat = Chart::new("latency", "Latency per second", "seconds", "ms", XKind::Seconds);
    if secs.is_empty() {
        let why = "the run recorded no whole second";
        return vec![
            rate.empty_because(why),
            lat.empty_because(why),
            spectrum(&d.histograms.latency_us, "latency-spectrum", "Latency by percentile"),
        ];
    }
    rate.x = x.clone();
    rate.line("responses/s", secs.iter().map(|s| per_s(s.responses, s.span_s)).collect());
    rate.line("errors/s", secs.iter().map(|s| per_s(s.errors, s.span_s)).collect());
    lat.x = x;
    let ms = |us: f64, n: u64| (n > 0).then_some(us / 1000.0);
    lat.line("p50", secs.iter().map(|s| ms(s.latency_p50_us as f64, s.responses)).collect());
    // Documents of format version 1 have no per-second p90 (0 there): the line is left out.
    let has_p90 = secs.iter().any(|s| s.latency_p90_us > 0);
    if has_p90 {
        lat.line("p90", secs.iter().map(|s| ms(s.latency_p90_us as f64, s.responses)).collect());
    }
    lat.line("p99", secs.iter().map(|s| ms(s.latency_p99_us as f64, s.responses)).collect());
    lat.line("max", secs.iter().map(|s| ms(s.latency_max_us as f64, s.responses)).collect());
    lat.line("mean", secs.iter().map(|s| ms(s.latency_mean_us, s.responses)).collect());
    let reduce: &[Reduce] = if has_p90 {
        &[Reduce::Mean, Reduce::Max, Reduce::Max, Reduce::Max, Reduce::Mean]
    } else {
        &[Reduce::Mean, Reduce::Max, Reduce::Max, Reduce::Mean]
    };
    vec![
        rate.decimate(&[Reduce::Mean, Reduce::Mean]),
        lat.decimate(reduce),
        spectrum(&d.histograms.latency_us, "latency-spectrum", "Latency by percentile"),
    ]
}

pub(super) fn ddp_charts(d: &VuDoc) -> Vec<Chart> {
    let secs = &d.timeline;
    let x: Vec<f64> = secs.iter().map(|s| f64::from(s.t)).collect();
    let mut users =
        Chart::new("users", "Virtual users", "seconds", "users (per second; alive: at once)", XKind::Seconds);
    let mut steps = Chart::new("steps", "Steps and step errors per second", "seconds", "per second", XKind::Seconds);
    let mut msgs = Chart::new("messages", "Messages per second", "seconds", "messages per second", XKind::Seconds);
    let mut out = Vec::new();
    if secs.is_empty() {
        let why = "the run recorded no whole second";
        out.extend([users.empty_because(why), steps.empty_because(why), msgs.empty_because(why)]);
    } else {
        let col = |f: &dyn Fn(&crate::stats::vu::DdpSecond) -> u64| -> Vec<Option<f64>> {
            secs.iter().map(|s| Some(f(s) as f64)).collect()
        };
        users.x = x.clone();
        users.line("arrived/s", col(&|s| s.counts.launched));
        users.line("completed/s", col(&|s| s.counts.completed));
        users.line("failed/s", col(&|s| s.counts.failed));
        users.line("alive", col(&|s| s.users_alive));
        steps.x = x.clone();
        steps.line("steps/s", col(&|s| s.counts.steps));
        steps.line("step errors/s", col(&|s| s.counts.step_errors));
        msgs.x = x;
        msgs.line("in/s", col(&|s| s.counts.messages_in));
        msgs.line("out/s", col(&|s| s.counts.messages_out));
        out.push(users.decimate(&[Reduce::Mean, Reduce::Mean, Reduce::Mean, Reduce::Max]));
        out.push(response_time(d));
        out.push(step_response_time(d));
        out.push(steps.decimate(&[Reduce::Mean, Reduce::Mean]));
        out.push(msgs.decimate(&[Reduce::Mean, Reduce::Mean]));
        if let Some(c) = faults_and_audit(d) {
            out.push(c);
        }
        if let Some(c) = page_timings(d) {
            out.push(c);
        }
        if let Some(c) = measures(d) {
            out.push(c);
        }
        if let Some(c) = throughputs(d) {
            out.push(c);
        }
    }
    out.push(step_spectra(d));
    out.push(spectrum(
        &d.histograms.reactive_us,
        "reactive-spectrum",
        "Reactive latency by percentile (write to update)",
    ));
    out.push(spectrum(
        &d.histograms.fanout_us,
        "fanout-spectrum",
        "Fan-out latency by percentile (write or send to every subscriber)",
    ));
    if !d.histograms.measures.is_empty() {
        let each = d.histograms.measures.iter().map(|(name, h)| (name.clone(), h.as_str()));
        let mut c = spectra("measure-spectrum", "A protocol's own latencies by percentile", each);
        if c.series.is_empty() {
            c = c.empty_because("no measure was taken");
        }
        out.push(c);
    }
    out
}

/// A protocol's own latencies (llm.ttft, sse.first_event, ...): each one's p50 and p99 per
/// second. Only for runs that took some.
fn measures(d: &VuDoc) -> Option<Chart> {
    let secs = &d.timeline;
    let names: std::collections::BTreeSet<&str> =
        secs.iter().flat_map(|s| s.measures.keys().map(String::as_str)).collect();
    if names.is_empty() {
        return None;
    }
    let mut c = Chart::new("measures", "A protocol's own latencies per second", "seconds", "ms", XKind::Seconds);
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    let mut reduce = Vec::new();
    for name in names {
        c.line(&format!("{name} p50"), secs.iter().map(|s| second_ms(s.measures.get(name), |l| l.p50_us)).collect());
        c.line(&format!("{name} p99"), secs.iter().map(|s| second_ms(s.measures.get(name), |l| l.p99_us)).collect());
        reduce.extend([Reduce::Mean, Reduce::Max]);
    }
    Some(c.decimate(&reduce))
}

/// A protocol's throughputs per second (the counts it declared one, `summary.throughputs`: an
/// LLM run's output tokens, an SSE run's events). Only for runs that counted some.
fn throughputs(d: &VuDoc) -> Option<Chart> {
    let secs = &d.timeline;
    let names: Vec<&str> = d
        .summary
        .throughputs
        .iter()
        .map(String::as_str)
        .filter(|name| secs.iter().any(|s| s.counts.events.contains_key(*name)))
        .collect();
    if names.is_empty() {
        return None;
    }
    let mut c =
        Chart::new("throughputs", "A protocol's throughput per second", "seconds", "per second", XKind::Seconds);
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    for name in &names {
        let per_second = secs.iter().map(|s| Some(s.counts.events.get(*name).copied().unwrap_or(0) as f64));
        c.line(&format!("{name}/s"), per_second.collect());
    }
    Some(c.decimate(&vec![Reduce::Mean; names.len()]))
}

/// Each fault's mark on a chart of the run's seconds: at the second it was done, at `at(t)` (the
/// height of the chart's other series then), `None` elsewhere.
fn fault_marks(d: &VuDoc, at: impl Fn(usize) -> f64) -> Vec<Option<f64>> {
    d.timeline
        .iter()
        .enumerate()
        .map(|(i, s)| d.faults.iter().any(|f| f.at_s.floor() as u32 == s.t).then(|| at(i)))
        .collect()
}

/// The faults seeded into the run and what followed: users' reconnections and calls sent again
/// per second, the audit's checks that agreed and differed, and each fault marked where it was
/// done. Only for runs that had faults, reconnections or an audit.
fn faults_and_audit(d: &VuDoc) -> Option<Chart> {
    let secs = &d.timeline;
    let any = secs.iter().any(|s| s.counts.reconnects + s.counts.audit_agreed + s.counts.audit_differed > 0);
    if d.faults.is_empty() && d.audit.is_none() && !any {
        return None;
    }
    let mut c = Chart::new(
        "faults-and-audit",
        "Faults, reconnections and audit checks per second",
        "seconds",
        "per second",
        XKind::Seconds,
    );
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    let col = |f: fn(&crate::stats::vu::VuSecond) -> u64| secs.iter().map(|s| Some(f(&s.counts) as f64)).collect();
    c.line("reconnects/s", col(|c| c.reconnects));
    c.line("calls sent again/s", col(|c| c.resent));
    c.line("audit checks agreed/s", col(|c| c.audit_agreed));
    c.line("audit checks differed/s", col(|c| c.audit_differed));
    let mut reduce = vec![Reduce::Mean; 4];
    if !d.faults.is_empty() {
        let top = |i: usize| c.series.iter().filter_map(|s| s.values[i]).fold(0.0, f64::max);
        let marks = fault_marks(d, top);
        c.series.push(Series { label: "fault".into(), style: Style::Points, values: marks });
        reduce.push(Reduce::Max);
    }
    Some(c.decimate(&reduce))
}

/// Why a DDP document has no latency per second.
const NO_SECOND_LATENCY: &str = "the document has no latency per second (written before bolide kept it for DDP runs)";

/// A latency of one second in ms, where there is one.
fn second_ms(
    l: Option<&crate::stats::vu::SecondLatency>,
    pick: fn(&crate::stats::vu::SecondLatency) -> u64,
) -> Option<f64> {
    l.filter(|l| l.count > 0).map(|l| pick(l) as f64 / 1000.0)
}

/// Browser users' page timings per second (the navigations timed in each second): the median of
/// each timing; absent without browser users.
fn page_timings(d: &VuDoc) -> Option<Chart> {
    let secs = &d.timeline;
    d.browser.as_ref()?;
    let mut c = Chart::new("page-timings", "Page timings per second (browser users)", "seconds", "ms", XKind::Seconds);
    if !secs.iter().any(|s| !s.page.is_empty()) {
        return Some(c.empty_because("no page timing was read in a whole second"));
    }
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    let mut reduce = Vec::new();
    for m in crate::stats::browser::VITALS.iter().filter(|m| crate::stats::browser::is_time(m)) {
        if secs.iter().any(|s| s.page.contains_key(*m)) {
            let label = format!("{} p50", m.to_uppercase());
            c.line(&label, secs.iter().map(|s| second_ms(s.page.get(*m), |l| l.p50_us)).collect());
            reduce.push(Reduce::Mean);
        }
    }
    Some(c.decimate(&reduce))
}

/// Kadira's "Response time": every step's p50 and p99 per second, with the reactive and fan-out
/// latency of the same seconds beside them.
fn response_time(d: &VuDoc) -> Chart {
    let secs = &d.timeline;
    let mut c = Chart::new("response-time", "Response time per second", "seconds", "ms", XKind::Seconds);
    if !secs.iter().any(|s| s.latency.is_some()) {
        return c.empty_because(NO_SECOND_LATENCY);
    }
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    c.line("steps p50", secs.iter().map(|s| second_ms(s.latency.as_ref(), |l| l.p50_us)).collect());
    c.line("steps p99", secs.iter().map(|s| second_ms(s.latency.as_ref(), |l| l.p99_us)).collect());
    let mut reduce = vec![Reduce::Mean, Reduce::Max];
    if secs.iter().any(|s| s.reactive.is_some()) {
        c.line("reactive p50", secs.iter().map(|s| second_ms(s.reactive.as_ref(), |l| l.p50_us)).collect());
        c.line("reactive p99", secs.iter().map(|s| second_ms(s.reactive.as_ref(), |l| l.p99_us)).collect());
        reduce.extend([Reduce::Mean, Reduce::Max]);
    }
    if secs.iter().any(|s| s.fanout.is_some()) {
        c.line("fan-out p50", secs.iter().map(|s| second_ms(s.fanout.as_ref(), |l| l.p50_us)).collect());
        c.line("fan-out p99", secs.iter().map(|s| second_ms(s.fanout.as_ref(), |l| l.p99_us)).collect());
        reduce.extend([Reduce::Mean, Reduce::Max]);
    }
    // The faults where they were done, at that second's step p99.
    if !d.faults.is_empty() {
        let marks = fault_marks(d, |i| c.series[1].values[i].unwrap_or(0.0));
        c.series.push(Series { label: "fault".into(), style: Style::Points, values: marks });
        reduce.push(Reduce::Max);
    }
    c.decimate(&reduce)
}

/// Each step's p50 and p99 per second, steps in the scenario's order.
fn step_response_time(d: &VuDoc) -> Chart {
    let secs = &d.timeline;
    let mut c = Chart::new("step-response-time", "Response time per second, by step", "seconds", "ms", XKind::Seconds);
    let names: Vec<&str> = d
        .steps
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| secs.iter().any(|s| s.step_latency.contains_key(*n)))
        .collect();
    if names.is_empty() {
        return c.empty_because(NO_SECOND_LATENCY);
    }
    c.x = secs.iter().map(|s| f64::from(s.t)).collect();
    let mut reduce = Vec::new();
    for name in names {
        c.line(
            &format!("{name} p50"),
            secs.iter().map(|s| second_ms(s.step_latency.get(name), |l| l.p50_us)).collect(),
        );
        c.line(
            &format!("{name} p99"),
            secs.iter().map(|s| second_ms(s.step_latency.get(name), |l| l.p99_us)).collect(),
        );
        reduce.extend([Reduce::Mean, Reduce::Max]);
    }
    c.decimate(&reduce)
}

/// Responses by status code and failures by error class (HTTP), or steps completed and failed by
/// error class (DDP): one bar each, classes with no failure left out.
fn outcomes(doc: &Doc) -> Chart {
    let view = doc.view();
    let (title, mut bars) = view.outcomes();
    let classes = view.errors_by_class();
    bars.extend(classes.iter().filter(|(_, n)| **n > 0).map(|(class, n)| (format!("error: {class}"), *n)));
    bars.retain(|(_, n)| *n > 0);
    let mut c = Chart::new("outcomes", title, "outcome", "count", XKind::Label);
    if bars.is_empty() {
        return c.empty_because("no request or step finished");
    }
    c.x = (1..=bars.len()).map(|i| i as f64).collect();
    c.x_names = bars.iter().map(|(name, _)| name.clone()).collect();
    c.series.push(Series {
        label: "count".into(),
        style: Style::Bars,
        values: bars.iter().map(|b| Some(b.1 as f64)).collect(),
    });
    c
}

/// The Node-vs-nginx figure: every request's total time against the second it started, from a
/// per-request file (`--gnuplot`, or ab's `-g`), density-sampled ([`crate::stats::gnuplot::sample`]).
pub fn every_request(sample: &crate::stats::gnuplot::RequestSample) -> Chart {
    let drawn = sample.points.len();
    let title = if drawn as u64 == sample.requests {
        format!("Every request's response time ({} requests)", sample.requests)
    } else {
        format!(
            "Every request's response time ({drawn} of {} drawn, each second's slowest among them)",
            sample.requests
        )
    };
    let mut c = Chart::new("every-request", &title, "seconds", "ms", XKind::Seconds);
    if sample.points.is_empty() {
        return c.empty_because("the per-request file lists no request");
    }
    c.x = sample.points.iter().map(|p| f64::from(p.0)).collect();
    let values = sample.points.iter().map(|p| Some(f64::from(p.1))).collect();
    c.series.push(Series { label: "response time".into(), style: Style::Dots, values });
    c
}

/// Several per-request files on one chart: one y scale, a series of dots per file (x the union of
/// their seconds, each file's dots only at its own).
pub fn every_request_overlaid(files: &[(String, &crate::stats::gnuplot::RequestSample)]) -> Chart {
    if let [(_, one)] = files {
        return every_request(one);
    }
    let total: u64 = files.iter().map(|(_, s)| s.requests).sum();
    let drawn: usize = files.iter().map(|(_, s)| s.points.len()).sum();
    let title = if drawn as u64 == total {
        format!("Every request's response time ({total} requests, {} files)", files.len())
    } else {
        format!("Every request's response time ({drawn} of {total} drawn, each second's slowest among them)")
    };
    let mut c = Chart::new("every-request", &title, "seconds", "ms", XKind::Seconds);
    let mut all: Vec<(u32, usize, u32)> =
        files.iter().enumerate().flat_map(|(i, (_, s))| s.points.iter().map(move |p| (p.0, i, p.1))).collect();
    if all.is_empty() {
        return c.empty_because("the per-request files list no request");
    }
    all.sort_unstable();
    c.x = all.iter().map(|p| f64::from(p.0)).collect();
    for (i, (name, _)) in files.iter().enumerate() {
        let values = all.iter().map(|p| (p.1 == i).then_some(f64::from(p.2))).collect();
        c.series.push(Series { label: name.clone(), style: Style::Dots, values });
    }
    c
}

/// Most points of the every-request figure: enough to see the shape of millions of requests,
/// small enough for a report of a few hundred kilobytes.
pub const REQUEST_POINTS: usize = 20_000;

/// The every-request figure of a per-request file; a file that cannot be read gives a chart
/// that says why.
pub fn every_request_in(path: &std::path::Path) -> Chart {
    match crate::stats::gnuplot::sample(path, REQUEST_POINTS) {
        Ok(sample) => every_request(&sample),
        Err(why) => Chart::new("every-request", "Every request's response time", "seconds", "ms", XKind::Seconds)
            .empty_because(&why.to_string()),
    }
}

/// Percentiles drawn in a spectrum: from the median out to p99.999 (x = 1 / (1 - q) up to 100,000).
const SPECTRUM_MAX_X: f64 = 100_000.0;

/// The (x, ms) points of a histogram's percentile spectrum, or why there are none.
fn spectrum_points(encoded: &str) -> Result<Vec<(f64, f64)>, Problem> {
    if encoded.is_empty() {
        return Err("no histogram in the document".into());
    }
    let h = crate::stats::hist::decode(encoded).map_err(|e| format!("the histogram cannot be read: {e}"))?;
    if h.is_empty() {
        return Err("nothing was measured".into());
    }
    let mut points: Vec<(f64, f64)> = Vec::new();
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        if q >= 1.0 {
            break;
        }
        let x = 1.0 / (1.0 - q);
        if x > SPECTRUM_MAX_X {
            break;
        }
        let ms = h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        if points.last().is_some_and(|p| p.0 >= x) {
            continue;
        }
        points.push((x, ms));
    }
    // The maximum closes the curve at the last percentile the data can tell apart.
    let reach = (h.len() as f64).min(SPECTRUM_MAX_X);
    if points.last().is_none_or(|p| p.0 < reach) {
        points.push((reach, h.max() as f64 / 1000.0));
    }
    Ok(points)
}

fn spectrum(encoded: &str, id: &str, title: &str) -> Chart {
    let mut c = Chart::new(id, title, "percentile", "ms", XKind::Percentile);
    match spectrum_points(encoded) {
        Err(why) => c.empty_because(&why.to_string()),
        Ok(points) => {
            c.x = points.iter().map(|p| p.0).collect();
            c.line("latency", points.iter().map(|p| Some(p.1)).collect());
            c
        }
    }
}

/// Every step's latency spectrum on one chart (the percentiles differ per step, so the x values
/// are the union and each step has values only at its own).
fn step_spectra(d: &VuDoc) -> Chart {
    let each = d.steps.iter().map(|s| (s.name.clone(), s.latency_histogram.as_str()));
    let c = spectra("step-spectrum", "Step latency by percentile", each);
    match c.series.is_empty() {
        true => c.empty_because("no step was measured"),
        false => c,
    }
}

/// Named histograms' spectra on one chart (no series when none has a sample).
fn spectra<'a>(id: &str, title: &str, each: impl Iterator<Item = (String, &'a str)>) -> Chart {
    let mut c = Chart::new(id, title, "percentile", "ms", XKind::Percentile);
    let per_name: Vec<(String, Vec<(f64, f64)>)> =
        each.filter_map(|(name, h)| spectrum_points(h).ok().map(|p| (name, p))).collect();
    if per_name.is_empty() {
        return c;
    }
    let mut xs: Vec<f64> = per_name.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for (name, points) in &per_name {
        let values = xs.iter().map(|x| points.iter().find(|p| p.0 == *x).map(|p| p.1)).collect();
        c.series.push(Series { label: name.clone(), style: Style::Line, values });
    }
    c.x = xs;
    c
}

/// Merges sample series taken at their own times onto one x axis (times to the 0.1 s).
fn on_one_axis(chart: &mut Chart, series: Vec<(String, Vec<(f64, f64)>)>) {
    let key = |t: f64| (t * 10.0).round() as i64;
    let mut ts: Vec<i64> = series.iter().flat_map(|(_, s)| s.iter().map(|p| key(p.0))).collect();
    ts.sort_unstable();
    ts.dedup();
    chart.x = ts.iter().map(|&t| t as f64 / 10.0).collect();
    for (label, samples) in series {
        let mut values = vec![None; ts.len()];
        for (t, v) in samples {
            if let Ok(i) = ts.binary_search(&key(t)) {
                values[i] = Some(v);
            }
        }
        chart.series.push(Series { label, style: Style::Line, values });
    }
}

fn server_charts(monitor: &[MonitorResult]) -> Vec<Chart> {
    let mut cpu = Chart::new("server-cpu", "Server CPU", "seconds", "% of one core", XKind::Seconds);
    let mut ram = Chart::new("server-ram", "Server memory (RSS)", "seconds", "MB", XKind::Seconds);
    let watched: Vec<&MonitorResult> = monitor.iter().filter(|m| !m.samples.is_empty()).collect();
    if watched.is_empty() {
        let why = if monitor.is_empty() {
            "no process was watched (--monitor NAME=PID or NAME=:PORT, or --spawn)"
        } else {
            "the watched processes gave no sample"
        };
        return vec![cpu.empty_because(why), ram.empty_because(why)];
    }
    on_one_axis(
        &mut cpu,
        watched.iter().map(|m| (m.name.clone(), m.samples.iter().map(|s| (s.0, s.1)).collect())).collect(),
    );
    on_one_axis(
        &mut ram,
        watched.iter().map(|m| (m.name.clone(), m.samples.iter().map(|s| (s.0, s.2 as f64 / 1e6)).collect())).collect(),
    );
    let n = watched.len();
    vec![cpu.decimate(&vec![Reduce::Max; n]), ram.decimate(&vec![Reduce::Max; n])]
}

/// How a scraped metric is drawn: its title in words, its unit, the factor from its own unit
/// to that one, and what of its series is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub title: String,
    pub unit: &'static str,
    pub scale: f64,
    pub how: How,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum How {
    /// A gauge's value.
    Value,
    /// A counter's (or a histogram's count's) increase per second.
    Rate,
    /// A histogram's sum's increase per second (GC time per second).
    SumRate,
    /// A histogram's mean observation between scrapes: the sum's increase over the count's.
    Mean,
}

/// The metrics of bolide-probe, prom-client and the Monti agent in words and human units.
const READINGS: &[(&[&str], &str, &str, f64, How)] = &[
    (
        &["probe_eventloop_delay_p99_seconds", "nodejs_eventloop_lag_p99_seconds"],
        "Event-loop delay p99",
        "ms",
        1e3,
        How::Value,
    ),
    (
        &["probe_eventloop_delay_max_seconds", "nodejs_eventloop_lag_max_seconds"],
        "Event-loop delay max",
        "ms",
        1e3,
        How::Value,
    ),
    (&["monti_eventloop_lag_seconds", "nodejs_eventloop_lag_seconds"], "Event-loop lag", "ms", 1e3, How::Value),
    (&["probe_eventloop_active_seconds_total"], "Event loop busy", "% of the time", 100.0, How::Rate),
    (
        &["probe_gc_pause_seconds", "nodejs_gc_duration_seconds"],
        "Garbage collection",
        "ms of pauses per second",
        1e3,
        How::SumRate,
    ),
    (&["monti_gc_seconds_total"], "Garbage collection", "ms of pauses per second", 1e3, How::Rate),
    (&["probe_heap_used_bytes", "nodejs_heap_size_used_bytes"], "Heap used", "MB", 1e-6, How::Value),
    (&["probe_heap_total_bytes", "nodejs_heap_size_total_bytes"], "Heap total", "MB", 1e-6, How::Value),
    (&["probe_rss_bytes", "process_resident_memory_bytes"], "Memory (RSS)", "MB", 1e-6, How::Value),
    (&["probe_external_bytes", "nodejs_external_memory_bytes"], "External memory", "MB", 1e-6, How::Value),
    (&["probe_array_buffers_bytes"], "Array buffers", "MB", 1e-6, How::Value),
    (&["probe_cpu_seconds_total", "process_cpu_seconds_total"], "CPU", "% of one core", 100.0, How::Rate),
    (&["probe_active_resources"], "Active handles and requests", "resources", 1.0, How::Value),
    (&["probe_meteor_sessions", "monti_sessions"], "DDP sessions", "sessions", 1.0, How::Value),
    (&["probe_meteor_busy_sessions"], "Busy DDP sessions", "sessions", 1.0, How::Value),
    (&["probe_meteor_sessions_created_total"], "DDP sessions opened", "per second", 1.0, How::Rate),
    (&["probe_meteor_subscriptions", "monti_pub_active_subs"], "Subscriptions", "subscriptions", 1.0, How::Value),
    (&["probe_meteor_universal_subscriptions"], "Universal subscriptions", "subscriptions", 1.0, How::Value),
    (&["probe_meteor_subscriptions_started_total"], "Subscriptions started", "per second", 1.0, How::Rate),
    (&["probe_meteor_observers"], "Observers", "observers", 1.0, How::Value),
    (&["probe_meteor_observe_multiplexers"], "Observe multiplexers", "multiplexers", 1.0, How::Value),
    (&["probe_meteor_observe_handles"], "Observe handles", "handles", 1.0, How::Value),
    (
        &["probe_meteor_observers_started_total", "monti_pub_observers_created_total"],
        "Observers started",
        "per second",
        1.0,
        How::Rate,
    ),
    (&["monti_pub_observer_handles_reused_total"], "Observer handles reused", "per second", 1.0, How::Rate),
    (
        &["probe_meteor_method_seconds", "monti_method_response_seconds"],
        "Method time",
        "ms, mean per call",
        1e3,
        How::Mean,
    ),
    (&["monti_pub_response_seconds"], "Publication response time", "ms, mean per subscription", 1e3, How::Mean),
    (&["probe_meteor_method_calls_total"], "Method calls", "per second", 1.0, How::Rate),
    (&["probe_meteor_method_errors_total"], "Method errors", "per second", 1.0, How::Rate),
    (&["probe_meteor_methods_in_flight"], "Methods in flight", "methods", 1.0, How::Value),
    (&["probe_meteor_queued_messages"], "Queued DDP messages", "messages", 1.0, How::Value),
];

/// How `metric` (of `kind`) is drawn: by name for the metrics bolide knows, else by its unit
/// suffix (`_seconds` in ms, `_bytes` in MB, a counter per second), else its value as it is.
pub fn reading(metric: &str, kind: Option<crate::monitor::scrape::Kind>) -> Reading {
    use crate::monitor::scrape::Kind;
    if let Some((_, title, unit, scale, how)) = READINGS.iter().find(|r| r.0.contains(&metric)) {
        return Reading { title: title.to_string(), unit, scale: *scale, how: *how };
    }
    let counter = kind == Some(Kind::Counter);
    let base = metric.strip_suffix("_total").unwrap_or(metric);
    let title = base.to_string();
    let r = |unit, scale, how| Reading { title: title.clone(), unit, scale, how };
    match kind {
        Some(Kind::Histogram) if base.ends_with("_seconds") => r("ms, mean per observation", 1e3, How::Mean),
        Some(Kind::Histogram) => r("observations per second", 1.0, How::Rate),
        _ if counter && base.ends_with("_seconds") => r("ms per second", 1e3, How::Rate),
        _ if counter && base.ends_with("_bytes") => r("MB per second", 1e-6, How::Rate),
        _ if counter => r("per second", 1.0, How::Rate),
        _ if base.ends_with("_seconds") => r("ms", 1e3, How::Value),
        _ if base.ends_with("_bytes") => r("MB", 1e-6, How::Value),
        _ if base.ends_with("_ratio") => r("%", 100.0, How::Value),
        _ => r("value", 1.0, How::Value),
    }
}

/// A series' values as drawn (see [`How`]), in the reading's unit. A point over a stretch much
/// shorter than the others (the last, partial second of a run) is left out: a counter's increase
/// over a tenth of a second is no rate.
fn drawn(
    r: &crate::monitor::scrape::ScrapeResult,
    s: &crate::monitor::scrape::Series,
    how: How,
    scale: f64,
) -> Vec<Option<f64>> {
    use crate::monitor::scrape::per_scrape;
    let scaled = |v: Vec<Option<f64>>| v.into_iter().map(|x| x.map(|x| x * scale)).collect::<Vec<_>>();
    if how == How::Value {
        return scaled(s.values.clone());
    }
    let spans: Vec<f64> = r.t.windows(2).map(|w| w[1] - w[0]).collect();
    let typical = {
        let mut sorted = spans.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
    };
    // The histogram's `_sum` with the same labels.
    let sum = || {
        let name = format!("{}_sum", s.metric);
        r.series.iter().find(|x| x.metric == name && x.labels == s.labels)
    };
    let values = match how {
        How::Rate => per_scrape(r, s),
        How::SumRate => match sum() {
            Some(total) => per_scrape(r, &crate::monitor::scrape::Series { kind: s.kind, ..total.clone() }),
            None => vec![None; s.values.len()],
        },
        How::Mean => match sum() {
            Some(total) => (0..s.values.len())
                .map(|i| {
                    let d = |v: &[Option<f64>]| Some(v.get(i).copied()?? - v.get(i.checked_sub(1)?).copied()??);
                    let (count, time) = (d(&s.values)?, d(&total.values)?);
                    (count > 0.0 && time >= 0.0).then(|| time / count)
                })
                .collect(),
            None => vec![None; s.values.len()],
        },
        How::Value => unreachable!("returned above"),
    };
    let values: Vec<Option<f64>> = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.filter(|_| i == 0 || spans.get(i - 1).is_some_and(|span| *span >= 0.5 * typical)))
        .collect();
    scaled(values)
}

/// Scraped series (`--scrape`, `--probe`, `--monti`): under a heading of their own per endpoint
/// ("Server internals: app"), up to eight metrics each, a chart per metric in words and human
/// units (event-loop delay in ms, heap in MB, subscriptions by publication, method time by name),
/// a line per label set (up to eight).
fn scrape_charts(scraped: &[crate::monitor::scrape::ScrapeResult]) -> Vec<Chart> {
    use crate::monitor::scrape::shown;
    let mut out = Vec::new();
    for r in scraped.iter().filter(|r| !r.t.is_empty()) {
        let shown = shown(r);
        let mut metrics: Vec<&str> = Vec::new();
        for s in &shown {
            if !metrics.contains(&s.metric.as_str()) {
                metrics.push(&s.metric);
            }
        }
        for (i, metric) in metrics.into_iter().take(8).enumerate() {
            let series: Vec<_> = shown.iter().filter(|s| s.metric == metric).take(8).collect();
            let mut how = reading(metric, series[0].kind);
            // A histogram's values are its count of observations: drawn as a value, or as a mean
            // without a `_sum` beside it (the Monti agent's sketches have none), they would be no
            // figure of the metric. Its observations per second are.
            let sum_name = format!("{metric}_sum");
            let has_sum = r.series.iter().any(|x| x.metric == sum_name);
            if series[0].kind == Some(crate::monitor::scrape::Kind::Histogram)
                && (how.how == How::Value || (matches!(how.how, How::Mean | How::SumRate) && !has_sum))
            {
                how = Reading { unit: "observations per second", scale: 1.0, how: How::Rate, ..how };
            }
            let by: Vec<&String> = series[0].labels.keys().collect();
            let title = if by.is_empty() || series.len() == 1 && series[0].labels.is_empty() {
                how.title.clone()
            } else {
                format!("{} by {}", how.title, by.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))
            };
            let mut c = Chart::new(
                &format!("scrape-{}-{}", r.name, i + 1),
                &format!("{}: {title}", r.name),
                "seconds",
                how.unit,
                XKind::Seconds,
            );
            c.group = Some(format!("Server internals: {}", r.name));
            c.x = r.t.clone();
            for s in &series {
                let label = if s.labels.is_empty() {
                    how.title.clone()
                } else {
                    s.labels.values().cloned().collect::<Vec<_>>().join(", ")
                };
                c.line(&label, drawn(r, s, how.how, how.scale));
            }
            if c.series.iter().all(|l| l.values.iter().all(Option::is_none)) {
                out.push(c.empty_because("no two reads to draw a rate or a mean from"));
                continue;
            }
            let reduce = if how.how == How::Value { Reduce::Max } else { Reduce::Mean };
            let n = c.series.len();
            out.push(c.decimate(&vec![reduce; n]));
        }
    }
    out
}

fn generator_chart(g: Option<&GeneratorResult>) -> Chart {
    // The title carries bolide's CPU per request or message, when the document has it.
    let per = g.and_then(|g| match (g.cpu_us_per_request, g.cpu_us_per_message) {
        (Some(v), _) => Some(format!("{v:.2} µs of bolide's CPU per request")),
        (None, Some(v)) => Some(format!("{v:.2} µs of bolide's CPU per message")),
        _ => None,
    });
    let title = match &per {
        Some(p) => format!("bolide and the machine ({p})"),
        None => "bolide and the machine".to_string(),
    };
    let mut c = Chart::new("generator", &title, "seconds", "%", XKind::Seconds);
    let Some(g) = g.filter(|g| !g.samples.is_empty()) else {
        return c.empty_because("the document has no samples of bolide's own CPU");
    };
    c.x = g.samples.iter().map(|s| s.0).collect();
    c.line("bolide load threads, % of one core", g.samples.iter().map(|s| Some(s.1)).collect());
    c.line("busiest load thread", g.samples.iter().map(|s| Some(s.2)).collect());
    c.line("machine idle, % of all cores", g.samples.iter().map(|s| Some(s.3)).collect());
    let suspect = g
        .samples
        .iter()
        .map(|s| (s.2 >= SATURATED_THREAD_PCT || s.3 < MACHINE_IDLE_FLOOR_PCT).then_some(s.2.max(s.1)))
        .collect();
    c.series.push(Series { label: "suspect sample".into(), style: Style::Points, values: suspect });
    c.decimate(&[Reduce::Mean, Reduce::Max, Reduce::Mean, Reduce::Max])
}

/// One chart per measure with every run's value, a series per input (bench directory or file):
/// the spread between runs, and between series, at a glance.
pub fn across_runs(series: &[(String, Vec<crate::stats::doc::Measures>)]) -> Vec<Chart> {
    let most = series.iter().map(|(_, runs)| runs.len()).max().unwrap_or(0);
    let mut out = Vec::new();
    for (id, title, unit, pick) in MEASURES {
        let mut c = Chart::new(&format!("runs-{id}"), title, "run", unit, XKind::Run);
        c.x = (1..=most).map(|i| i as f64).collect();
        for (name, runs) in series {
            let mut values: Vec<Option<f64>> = runs.iter().map(pick).collect();
            values.resize(most, None);
            c.series.push(Series { label: name.clone(), style: Style::Points, values });
        }
        if c.points() == 0 {
            // A measure these runs do not have (e.g. CPU without --monitor) is left out.
            continue;
        }
        out.push(c);
    }
    out
}

/// A capacity ladder: each measure against the level, passing levels and the failing one as
/// two series (so the failure stands out in its own colour).
/// How a capacity level went, for its colour in the ladder's charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Passed,
    Failed,
    /// No verdict on the server (bolide, the machine or the load's shape was the limit, or
    /// nothing was measured).
    NoVerdict,
}

/// The report's tones as chart colours (`report.css`'s `tone-good`, `tone-bad`, `tone-warn`).
const TONE_GOOD: &str = "#0072B2";
const TONE_BAD: &str = "#D55E00";
const TONE_WARN: &str = "#B07800";

pub fn ladder(levels: &[(f64, crate::stats::doc::Measures, Level)], unit: &str) -> Vec<Chart> {
    let mut out = Vec::new();
    // A level with no verdict (the limit was bolide or the machine) is a series of its own, never
    // drawn as failed; the series appears only when such a level exists.
    // Each in the tone the ladder's table gives it: good, bad, warn (never the palette's green,
    // which would read as passed).
    let mut kinds = vec![(Level::Passed, "passed", TONE_GOOD), (Level::Failed, "failed", TONE_BAD)];
    if levels.iter().any(|l| l.2 == Level::NoVerdict) {
        kinds.push((Level::NoVerdict, "no verdict", TONE_WARN));
    }
    for (id, title, y, pick) in MEASURES {
        let mut c = Chart::new(&format!("ladder-{id}"), title, unit, y, XKind::Level);
        c.x = levels.iter().map(|l| l.0).collect();
        for (kind, label, colour) in &kinds {
            let values = levels.iter().map(|(_, m, k)| if k == kind { pick(m) } else { None }).collect();
            c.series.push(Series { label: (*label).into(), style: Style::Points, values });
            c.colours.push((*colour).into());
        }
        if c.points() > 0 {
            out.push(c);
        }
    }
    out
}

/// The runs' time series overlaid, a line per run (`series name #run`): for HTTP responses and
/// p99 per second, for DDP users alive and steps per second.
pub fn overlaid(series: &[(String, Vec<&Doc>)]) -> Vec<Chart> {
    use crate::stats::view::OverTime;
    let views: [(&str, &str, &str, OverTime); 4] = [
        ("over-time-rps", "Responses per second, every run (HTTP)", "per second", OverTime::Responses),
        ("over-time-p99", "Latency p99 per second, every run (HTTP)", "ms", OverTime::P99),
        ("over-time-alive", "Virtual users alive, every run (DDP)", "users", OverTime::UsersAlive),
        ("over-time-steps", "Steps per second, every run (DDP)", "per second", OverTime::Steps),
    ];
    let mut out = Vec::new();
    for (id, title, unit, what) in views {
        let mut lines = Vec::new();
        for (name, docs) in series {
            for (i, d) in docs.iter().enumerate() {
                let points = d.view().over_time(what);
                if !points.is_empty() {
                    lines.push((format!("{name} #{}", i + 1), points));
                }
            }
        }
        if lines.is_empty() {
            continue;
        }
        let n = lines.len();
        let mut c = Chart::new(id, title, "seconds", unit, XKind::Seconds);
        on_one_axis(&mut c, lines);
        out.push(c.decimate(&vec![Reduce::Mean; n]));
    }
    out
}

type Pick = fn(&crate::stats::doc::Measures) -> Option<f64>;

/// The measures the reports' tables compare, as charts: id, title, unit, value.
const MEASURES: [(&str, &str, &str, Pick); 6] = [
    ("time", "Time (DDP: first arrival to last user's end)", "s", |m| m.requests_per_s.is_none().then_some(m.time_s)),
    ("rps", "Responses per second (HTTP)", "per second", |m| m.requests_per_s),
    ("cpu", "Server CPU (mean)", "% of one core", |m| m.cpu_pct),
    ("ram", "Server memory (mean RSS)", "MB", |m| m.ram_bytes.map(|b| b / 1e6)),
    ("p99", "Latency p99", "ms", |m| m.p99_ms),
    ("errors", "Error rate", "%", |m| Some(m.error_rate_pct)),
];

/// The middle value (the mean of the two middle ones for an even count).
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

/// A history: one chart per measure across labels (releases, commits) in the order given, each
/// label's median over its runs as a line and its lowest and highest run as marks (the spread), as
/// Meteor's dashboard shows trends.
pub fn history(series: &[(String, Vec<crate::stats::doc::Measures>)]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (id, title, unit, pick) in MEASURES {
        let mut c = Chart::new(&format!("history-{id}"), title, "label", unit, XKind::Label);
        c.x = (1..=series.len()).map(|i| i as f64).collect();
        c.x_names = series.iter().map(|(name, _)| name.clone()).collect();
        let per_label: Vec<Vec<f64>> = series.iter().map(|(_, runs)| runs.iter().filter_map(pick).collect()).collect();
        let mid = per_label.iter().map(|v| median(&mut v.clone())).collect();
        let low = per_label.iter().map(|v| v.iter().copied().reduce(f64::min).filter(|_| v.len() > 1)).collect();
        let high = per_label.iter().map(|v| v.iter().copied().reduce(f64::max).filter(|_| v.len() > 1)).collect();
        c.line("median", mid);
        c.series.push(Series { label: "lowest run".into(), style: Style::Points, values: low });
        c.series.push(Series { label: "highest run".into(), style: Style::Points, values: high });
        if c.series[0].values.iter().flatten().count() > 0 {
            out.push(c);
        }
    }
    out
}

/// Per-step latency side by side: for p50 and p99, x the scenario's steps (in the first series'
/// order, then any others), a series per input with its median over its runs. Inputs without DDP
/// runs are left out; with fewer than two left, there is nothing to set side by side.
pub fn steps_side_by_side(series: &[(String, Vec<&VuDoc>)]) -> Vec<Chart> {
    let series: Vec<&(String, Vec<&VuDoc>)> = series.iter().filter(|(_, docs)| !docs.is_empty()).collect();
    if series.len() < 2 {
        return Vec::new();
    }
    let mut steps: Vec<String> = Vec::new();
    for (_, docs) in &series {
        for d in docs {
            for s in &d.steps {
                if !steps.contains(&s.name) {
                    steps.push(s.name.clone());
                }
            }
        }
    }
    if steps.is_empty() {
        return Vec::new();
    }
    type Quantile = fn(&crate::stats::result::Latency) -> u64;
    let views: [(&str, &str, Quantile); 2] = [
        ("steps-p50", "Step latency p50, side by side", |l| l.p50_us),
        ("steps-p99", "Step latency p99, side by side", |l| l.p99_us),
    ];
    let mut out = Vec::new();
    for (id, title, q) in views {
        let mut c = Chart::new(id, title, "step", "ms", XKind::Label);
        c.x = (1..=steps.len()).map(|i| i as f64).collect();
        c.x_names = steps.clone();
        for (name, docs) in &series {
            let values = steps
                .iter()
                .map(|step| {
                    let mut v: Vec<f64> = docs
                        .iter()
                        .filter_map(|d| d.steps.iter().find(|s| &s.name == step && s.count > 0))
                        .filter_map(|s| s.latency.as_ref())
                        .map(|l| q(l) as f64 / 1000.0)
                        .collect();
                    median(&mut v)
                })
                .collect();
            c.series.push(Series { label: name.clone(), style: Style::Points, values });
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::scrape::{Kind, ScrapeResult, Series};

    fn series(metric: &str, kind: Kind, labels: &[(&str, &str)], values: &[f64]) -> Series {
        Series {
            metric: metric.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            kind: Some(kind),
            values: values.iter().map(|v| Some(*v)).collect(),
            ..Series::default()
        }
    }

    /// A protocol's measures: each one's p50 and p99 per second, and their spectra on one chart.
    #[test]
    fn measures_are_drawn_per_second_and_by_percentile() {
        use crate::stats::vu::{DdpSecond, SecondLatency};
        let mut d = VuDoc::default();
        let l = |p50_us, p99_us| SecondLatency { count: 2, p50_us, p99_us, max_us: p99_us, histogram: None };
        let mut a = DdpSecond::default();
        a.measures.insert("llm.ttft".into(), l(100_000, 300_000));
        let mut b = DdpSecond { t: 1, ..Default::default() };
        b.measures.insert("llm.itl".into(), l(20_000, 40_000));
        d.timeline = vec![a, b];
        let mut h = crate::stats::hist::latency_us();
        crate::stats::hist::record(&mut h, 100_000);
        d.histograms.measures.insert("llm.ttft".into(), crate::stats::hist::encode(&h));
        let c = measures(&d).unwrap();
        let got: Vec<(&str, Vec<Option<f64>>)> =
            c.series.iter().map(|s| (s.label.as_str(), s.values.clone())).collect();
        assert_eq!(
            got,
            vec![
                ("llm.itl p50", vec![None, Some(20.0)]),
                ("llm.itl p99", vec![None, Some(40.0)]),
                ("llm.ttft p50", vec![Some(100.0), None]),
                ("llm.ttft p99", vec![Some(300.0), None]),
            ]
        );
        let spectrum = ddp_charts(&d).into_iter().find(|c| c.id == "measure-spectrum").unwrap();
        assert_eq!(spectrum.series.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["llm.ttft"]);
        // A run without measures draws neither.
        let none = ddp_charts(&VuDoc::default());
        assert!(none.iter().all(|c| c.id != "measures" && c.id != "measure-spectrum"));
    }

    /// A protocol's throughputs per second: the counts it declared one, each second's own (0 in
    /// a second without any); other counts, and a declared one never counted, are not drawn.
    #[test]
    fn throughputs_are_drawn_per_second() {
        use crate::stats::vu::DdpSecond;
        let mut d = VuDoc::default();
        d.summary.throughputs = vec!["llm.output_tokens".into(), "sse.events".into()];
        let mut a = DdpSecond::default();
        a.counts.events.insert("llm.output_tokens".into(), 640);
        a.counts.events.insert("sse.reconnects".into(), 3);
        let b = DdpSecond { t: 1, ..Default::default() };
        let mut c = DdpSecond { t: 2, ..Default::default() };
        c.counts.events.insert("llm.output_tokens".into(), 320);
        d.timeline = vec![a, b, c];
        let chart = ddp_charts(&d).into_iter().find(|c| c.id == "throughputs").unwrap();
        let got: Vec<(&str, Vec<Option<f64>>)> =
            chart.series.iter().map(|s| (s.label.as_str(), s.values.clone())).collect();
        assert_eq!(got, vec![("llm.output_tokens/s", vec![Some(640.0), Some(0.0), Some(320.0)])]);
        assert!(ddp_charts(&VuDoc::default()).iter().all(|c| c.id != "throughputs"));
        // Counted but not declared: no chart.
        d.summary.throughputs.clear();
        assert!(ddp_charts(&d).iter().all(|c| c.id != "throughputs"));
    }

    /// Scraped series in words and units; a last, partial second drawn as no spike.
    #[test]
    fn scraped_series_read_in_words_and_units_without_partial_seconds() {
        let r = ScrapeResult {
            name: "app".into(),
            // The last scrape a tenth of a second after the one before: the run's stop.
            t: vec![0.0, 1.0, 2.0, 3.0, 3.1],
            series: vec![
                series("probe_eventloop_delay_p99_seconds", Kind::Gauge, &[], &[0.001, 0.002, 0.004, 0.003, 0.002]),
                series("probe_eventloop_active_seconds_total", Kind::Counter, &[], &[0.0, 0.2, 0.5, 0.7, 0.72]),
                series(
                    "probe_meteor_method_seconds",
                    Kind::Histogram,
                    &[("name", "insertTask")],
                    &[0.0, 10.0, 30.0, 40.0, 41.0],
                ),
                series(
                    "probe_meteor_method_seconds_sum",
                    Kind::Untyped,
                    &[("name", "insertTask")],
                    &[0.0, 0.02, 0.08, 0.1, 0.2],
                ),
                series("probe_heap_used_bytes", Kind::Gauge, &[], &[2e7, 2.5e7, 3e7, 3e7, 3e7]),
                series("my_queue_wait_seconds_total", Kind::Counter, &[], &[0.0, 1.0, 2.0, 3.0, 3.0]),
            ],
            ..ScrapeResult::default()
        };
        let charts = scrape_charts(&[r]);
        let got = |title: &str| {
            let c = charts.iter().find(|c| c.title == title).unwrap_or_else(|| {
                panic!("{title} in {:?}", charts.iter().map(|c| c.title.as_str()).collect::<Vec<_>>())
            });
            assert_eq!(c.group.as_deref(), Some("Server internals: app"));
            let values: Vec<Option<f64>> =
                c.series[0].values.iter().map(|v| v.map(|x| (x * 1000.0).round() / 1000.0)).collect();
            (c.y_label.as_str(), c.series[0].label.as_str(), values)
        };
        assert_eq!(
            got("app: Event-loop delay p99"),
            ("ms", "Event-loop delay p99", vec![Some(1.0), Some(2.0), Some(4.0), Some(3.0), Some(2.0)])
        );
        // Seconds busy per second in %; the partial last second (0.02 s in 0.1 s: "20 %") left out.
        assert_eq!(
            got("app: Event loop busy"),
            ("% of the time", "Event loop busy", vec![None, Some(20.0), Some(30.0), Some(20.0), None])
        );
        // A method's mean time between scrapes, by its name.
        assert_eq!(
            got("app: Method time by name"),
            ("ms, mean per call", "insertTask", vec![None, Some(2.0), Some(3.0), Some(2.0), None])
        );
        assert_eq!(got("app: Heap used").0, "MB");
        // A metric bolide does not know, by its unit: seconds per second in ms per second.
        assert_eq!(
            got("app: my_queue_wait_seconds"),
            ("ms per second", "my_queue_wait_seconds", vec![None, Some(1000.0), Some(1000.0), Some(1000.0), None])
        );
        // A histogram without its `_sum` (the Monti agent's): its observations per second.
        let monti = ScrapeResult {
            name: "monti".into(),
            t: vec![0.0, 1.0, 2.0],
            series: vec![series("monti_eventloop_lag_seconds", Kind::Histogram, &[], &[0.0, 5.0, 15.0])],
            ..ScrapeResult::default()
        };
        let c = &scrape_charts(&[monti])[0];
        assert_eq!((c.title.as_str(), c.y_label.as_str()), ("monti: Event-loop lag", "observations per second"));
        assert_eq!(c.series[0].values, vec![None, Some(5.0), Some(10.0)]);
        assert_eq!(reading("requests_total", Some(Kind::Counter)).unit, "per second");
        assert_eq!(reading("build_info", Some(Kind::Gauge)).unit, "value");
    }
}

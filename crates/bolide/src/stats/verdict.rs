//! Thresholds judged on a result document: each metric's value read out of the document (the
//! latency statistics from its histograms, so any percentile is exact), or the reason there is
//! none. The grammar is `crate::threshold`'s.

use hdrhistogram::Histogram;

use super::doc::Doc;
use crate::problem::Problem;
use crate::threshold::{Metric, Stat, Threshold, ThresholdResult};

/// Every threshold's verdict on `doc`.
pub fn judge(doc: &Doc, thresholds: &[Threshold]) -> Vec<ThresholdResult> {
    let ddp = doc.kind() == "ddp";
    thresholds.iter().map(|t| t.judge(ddp, value(doc, &t.metric))).collect()
}

/// Judges `thresholds` on `doc` and records the verdicts in it; true when every one holds.
pub fn record(doc: &mut Doc, thresholds: &[Threshold]) -> bool {
    let verdicts = judge(doc, thresholds);
    let all = verdicts.iter().all(|v| v.ok);
    *doc.envelope_mut().thresholds = verdicts;
    all
}

/// The exit code of a document's verdicts: 1 when a threshold broke or the audit failed, 4 when
/// the audit was incomplete (never a pass), else 0. `held`: every threshold held.
pub fn exit_code(doc: &Doc, held: bool) -> i32 {
    use crate::console::exit;
    use crate::stats::audit::Outcome;
    match doc.ddp().and_then(|d| d.audit.as_ref()).map(|a| a.outcome) {
        _ if !held => exit::THRESHOLDS,
        Some(Outcome::Failed) => exit::THRESHOLDS,
        Some(Outcome::Incomplete) => exit::INCONCLUSIVE,
        _ => exit::OK,
    }
}

/// The thresholds a document was judged on, parsed again (to judge a merge of such documents).
pub fn thresholds_of(doc: &Doc) -> Result<Vec<Threshold>, Problem> {
    doc.thresholds()
        .iter()
        .map(|r| {
            crate::threshold::parse(&r.threshold, r.source)
                .map_err(|e| Problem::from(format!("threshold {:?}: {e}", r.threshold)))
        })
        .collect()
}

/// The value of `metric` in `doc`, in the metric's unit; Err says why there is none.
pub fn value(doc: &Doc, metric: &Metric) -> Result<f64, Problem> {
    match (metric, doc) {
        (Metric::Latency { step: None, stat }, doc) => {
            let v = doc.view();
            v.latency()?.and_then(|h| latency(&h, *stat)).ok_or_else(|| v.no_latency().into())
        }
        (Metric::Latency { step: Some(name), stat }, doc) => {
            let h = doc.view().step_latency(name)?;
            latency(&h, *stat)
                .ok_or_else(|| Problem::from(format!("no sample of {name} (it never completed or never ran)")))
        }
        (Metric::Fanout(stat), doc) => {
            let d = doc.ddp().ok_or("fanout applies to realtime runs (bolide run)")?;
            let h = super::hist::decode(&d.histograms.fanout_us).map_err(|e| format!("histograms.fanout_us: {e}"))?;
            latency(&h, *stat).ok_or_else(|| {
                "no fan-out latency: nothing pushed carried the time it was written or sent (fanoutField)".into()
            })
        }
        (Metric::Measure { name, stat }, doc) => measure(doc, name, *stat),
        (Metric::ErrorRate, doc) => doc.error_rate_pct().ok_or_else(|| "no request or step ended".into()),
        (Metric::Errors, doc) => Ok(doc.view().errors() as f64),
        (Metric::Rps, doc) => doc.view().units_per_s(),
        (Metric::Cpu { process, peak }, doc) => {
            let m = watched(doc, process)?;
            Ok(if *peak { m.peak_cpu_pct } else { m.avg_cpu_pct })
        }
        (Metric::Rss { process, mean }, doc) => {
            let m = watched(doc, process)?;
            Ok(if *mean { m.avg_rss_bytes } else { m.peak_rss_bytes as f64 })
        }
        (Metric::Scrape { endpoint, series, stat }, doc) => scraped(doc, endpoint, series, *stat),
        (Metric::Server(f), doc) => figure(doc, f),
        (Metric::Browser(f), doc) => browser(doc, f),
        (Metric::Audit(f), doc) => {
            use crate::threshold::AuditFigure;
            let a = doc.ddp().and_then(|d| d.audit.as_ref()).ok_or("the run had no audit (--audit, audit: steps)")?;
            Ok(match f {
                AuditFigure::Failed => a.failed,
                AuditFigure::Incomplete => a.incomplete + a.unreached,
                AuditFigure::Differences => a.differences,
                AuditFigure::Checks => a.checks,
            } as f64)
        }
    }
}

/// A statistic of a protocol's own latency (`llm.ttft`), from its histogram; when the run has no
/// such measure, the ones it has.
fn measure(doc: &Doc, name: &str, stat: Stat) -> Result<f64, Problem> {
    let d = doc.ddp().ok_or_else(|| format!("{name} is a realtime protocol's measure (bolide run)"))?;
    let h = match d.histograms.measures.get(name) {
        Some(text) => super::hist::decode(text).map_err(|e| format!("histograms.measures.{name}: {e}"))?,
        None => Histogram::new(1).expect("an empty histogram"),
    };
    latency(&h, stat).ok_or_else(|| {
        let took: Vec<&str> = d.histograms.measures.keys().map(String::as_str).collect();
        match took.as_slice() {
            [] => format!("no {name} in this run: it took no measure of its own (a protocol's steps take them)"),
            took => format!("no {name} in this run; its measures are {}", took.join(", ")),
        }
        .into()
    })
}

/// A statistic of a scraped series: the series named exactly (`metric{label="v"}` as the
/// summary writes it), or the only series of a metric named without labels.
fn scraped(doc: &Doc, endpoint: &str, series: &str, stat: crate::threshold::ScrapeStat) -> Result<f64, Problem> {
    use crate::monitor::scrape::series_name;
    let r = endpoint_read(doc, endpoint)?;
    let exact: Vec<_> = r.series.iter().filter(|s| series_name(s) == series).collect();
    let of_metric: Vec<_> = r.series.iter().filter(|s| s.metric == series).collect();
    let s = match (exact.as_slice(), of_metric.as_slice()) {
        ([one], _) | ([], [one]) => *one,
        ([], []) => return Err(format!("{endpoint} has no series {series}").into()),
        (_, many) => {
            let names: Vec<String> = many.iter().take(5).map(|s| series_name(s)).collect();
            return Err(format!(
                "{endpoint} has {} series of {series}; name one with its labels: {}",
                many.len(),
                names.join(", ")
            )
            .into());
        }
    };
    statistic(s, series, stat)
}

/// An endpoint of the document that was read at least once.
fn endpoint_read<'a>(doc: &'a Doc, endpoint: &str) -> Result<&'a crate::monitor::scrape::ScrapeResult, Problem> {
    let r = doc
        .scrape()
        .iter()
        .find(|r| r.name == endpoint)
        .ok_or_else(|| format!("no endpoint named {endpoint} was read (--scrape, --probe or --monti)"))?;
    if r.t.is_empty() {
        let why = r.last_error.as_deref().unwrap_or(if r.via.is_some() { "nothing was posted" } else { "no answer" });
        return Err(format!("{endpoint} was never read ({why})").into());
    }
    Ok(r)
}

/// A statistic of one series (`name` for the messages).
fn statistic(
    s: &crate::monitor::scrape::Series,
    name: &str,
    stat: crate::threshold::ScrapeStat,
) -> Result<f64, Problem> {
    use crate::threshold::ScrapeStat as S;
    let kind =
        |what: &str| Problem::from(format!("{name} has no {} (it is a {:?} series; {what})", stat.name(), s.kind));
    match stat {
        S::Increase => s.increase.ok_or_else(|| kind("increase and rate are for counters and histograms")),
        S::Rate => s.rate_per_s.ok_or_else(|| kind("rate needs a counter or histogram read twice or more")),
        S::Mean => s.mean.ok_or_else(|| kind("mean and max are for gauges")),
        S::Max => s.max.ok_or_else(|| kind("mean and max are for gauges")),
        S::Last => {
            s.values.iter().rev().flatten().next().copied().ok_or_else(|| Problem::from(format!("{name} has no value")))
        }
        S::Quantile(p) => {
            let none = || kind("quantiles are for histograms with observations during the run");
            if s.kind != Some(crate::monitor::scrape::Kind::Histogram) {
                return Err(none());
            }
            let total = s.increase.unwrap_or(0.0);
            let mut buckets = s.buckets.clone();
            buckets.push((f64::INFINITY, total));
            crate::monitor::scrape::quantile(&buckets, p / 100.0).ok_or_else(none)
        }
    }
}

/// A named figure of bolide-probe or the Monti agent: its series (of one metric, with the
/// figure's labels) summed, the statistic read, scaled into the figure's unit.
fn figure(doc: &Doc, f: &crate::threshold::Figure) -> Result<f64, Problem> {
    let r = endpoint_read(doc, &f.endpoint)?;
    let of = |metric: &str| -> Result<crate::monitor::scrape::Series, Problem> {
        let chosen: Vec<_> = r
            .series
            .iter()
            .filter(|s| s.metric == metric && f.labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
            .collect();
        if chosen.is_empty() {
            let labels: Vec<String> = f.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            let with = if labels.is_empty() { String::new() } else { format!(" with {}", labels.join(", ")) };
            return Err(format!("{} has no series {metric}{with}", f.endpoint).into());
        }
        Ok(crate::monitor::scrape::combine(&chosen))
    };
    let value = statistic(&of(&f.metric)?, &f.metric, f.stat)?;
    let value = match &f.per {
        Some(per) => {
            let whole = statistic(&of(per)?, per, f.stat)?;
            if whole <= 0.0 {
                return Err(format!("{per} did not grow during the run").into());
            }
            value / whole
        }
        None => value,
    };
    Ok(value * f.scale)
}

/// A watched process with samples; Err when it was not watched or never sampled.
fn watched<'a>(doc: &'a Doc, name: &str) -> Result<&'a crate::monitor::MonitorResult, Problem> {
    let m =
        doc.monitor().iter().find(|m| m.name == name).ok_or_else(|| format!("no process named {name} was watched"))?;
    if m.samples.is_empty() {
        return Err(format!("{name} was never sampled (not found, or gone before the first sample)").into());
    }
    Ok(m)
}

/// A figure of the browser users.
fn browser(doc: &Doc, f: &crate::threshold::BrowserFigure) -> Result<f64, Problem> {
    use crate::threshold::BrowserFigure;
    let b = doc.ddp().and_then(|d| d.browser.as_ref()).ok_or("the run had no browser users (engine: browser)")?;
    let cost = || b.cost.as_ref().ok_or("the browsers' processes were not watched");
    Ok(match f {
        BrowserFigure::Vital { metric, stat } => {
            let row = b.vitals.iter().find(|v| v.metric == *metric && v.step.is_none());
            let row = row.ok_or_else(|| format!("no page reported its {}", metric.to_uppercase()))?;
            let h = super::hist::decode(&row.histogram)?;
            let ms = latency(&h, *stat).ok_or_else(|| format!("no page reported its {}", metric.to_uppercase()))?;
            // Times are kept in microseconds, CLS in ten-thousandths.
            if crate::stats::browser::is_time(metric) {
                ms
            } else {
                ms * 1000.0 / crate::stats::browser::CLS_SCALE
            }
        }
        BrowserFigure::Method { name, stat } => {
            let m = b.methods.iter().find(|m| m.name == *name);
            let m = m.ok_or_else(|| format!("no page called the method {name:?}"))?;
            latency(&super::hist::decode(&m.histogram)?, *stat).ok_or_else(|| format!("no call of {name} ended"))?
        }
        BrowserFigure::Cpu { peak: true, .. } => cost()?.peak_cpu_pct,
        BrowserFigure::Cpu { per_user: true, .. } => cost()?.cpu_pct_per_user,
        BrowserFigure::Cpu { .. } => cost()?.avg_cpu_pct,
        BrowserFigure::Rss { per_user: true } => cost()?.rss_bytes_per_user,
        BrowserFigure::Rss { per_user: false } => cost()?.peak_rss_bytes as f64,
        BrowserFigure::Count(what) => {
            let n = match *what {
                "console_errors" => b.console_errors,
                "failed_requests" => b.failed_requests,
                _ => b.crashes,
            };
            n as f64
        }
    })
}

/// A latency statistic in milliseconds (None for an empty histogram).
fn latency(h: &Histogram<u64>, stat: Stat) -> Option<f64> {
    if h.is_empty() {
        return None;
    }
    let us = match stat {
        Stat::Min => h.min() as f64,
        Stat::Mean => h.mean(),
        Stat::Max => h.max() as f64,
        Stat::Percentile(p) => h.value_at_quantile(p / 100.0) as f64,
    };
    Some(us / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::result::ResultDoc;
    use crate::stats::vu::{StepSummary, VuDoc};
    use crate::threshold::{parse, Source};

    fn hist(values_us: &[u64]) -> String {
        let mut h = crate::stats::hist::latency_us();
        for v in values_us {
            crate::stats::hist::record(&mut h, *v);
        }
        crate::stats::hist::encode(&h)
    }

    fn verdicts(doc: &Doc, exprs: &[&str]) -> Vec<ThresholdResult> {
        let ts: Vec<_> = exprs.iter().map(|e| parse(e, Source::Flag).unwrap()).collect();
        judge(doc, &ts)
    }

    #[test]
    fn http_metrics_come_from_the_document() {
        let mut d = ResultDoc::default();
        // 100 responses of 1..=100 ms, 2 errors, over 4 s.
        d.histograms.latency_us = hist(&(1..=100).map(|ms| ms * 1000).collect::<Vec<_>>());
        d.summary.responses = 100;
        d.summary.errors = 2;
        d.summary.duration_s = 4.0;
        d.monitor = vec![crate::monitor::MonitorResult {
            name: "app".into(),
            avg_cpu_pct: 40.0,
            peak_cpu_pct: 90.0,
            avg_rss_bytes: 100e6,
            peak_rss_bytes: 150_000_000,
            samples: vec![(1.0, 40.0, 100_000_000)],
            ..Default::default()
        }];
        let doc = Doc::Http(Box::new(d));
        let v = verdicts(
            &doc,
            &[
                "p99<100ms",
                "p50<=50ms",
                "max<100ms",
                "error_rate<2%",
                "errors<3",
                "rps>=25",
                "cpu.app<50%",
                "cpu.app.max<80%",
                "rss.app<200MB",
                "rss.app.mean<90MB",
            ],
        );
        let got: Vec<(Option<f64>, bool)> =
            v.iter().map(|r| (r.value.map(|x| (x * 1000.0).round() / 1000.0), r.ok)).collect();
        let error_rate = (200.0_f64 / 102.0 * 1000.0).round() / 1000.0;
        assert_eq!(
            got,
            vec![
                (Some(99.007), true), // HdrHistogram's bucket for 99 ms at 3 significant digits
                (Some(50.015), false),
                (Some(100.031), false),
                (Some(error_rate), true),
                (Some(2.0), true),
                (Some(25.0), true),
                (Some(40.0), true),
                (Some(90.0), false),
                (Some(150e6), true),
                (Some(100e6), false),
            ]
        );
    }

    #[test]
    fn a_metric_without_samples_fails_and_says_why() {
        let mut d = ResultDoc::default();
        d.histograms.latency_us = hist(&[]);
        d.monitor = vec![crate::monitor::MonitorResult { name: "app".into(), ..Default::default() }];
        let doc = Doc::Http(Box::new(d));
        let v = verdicts(&doc, &["p99<1s", "error_rate<1%", "rps>=0", "cpu.app<80%", "rss.db<1GB"]);
        assert!(v.iter().all(|r| !r.ok && r.value.is_none()));
        let why: Vec<&str> = v.iter().map(|r| r.why.as_deref().unwrap()).collect();
        assert_eq!(
            why,
            vec![
                "no response completed",
                "no request or step ended",
                "the run lasted no time",
                "app was never sampled (not found, or gone before the first sample)",
                "no process named db was watched",
            ]
        );
    }

    #[test]
    fn ddp_latency_is_over_all_steps_or_one_step() {
        let mut d = VuDoc {
            steps: vec![
                StepSummary { name: "connect".into(), latency_histogram: hist(&[1000, 2000]), ..Default::default() },
                StepSummary {
                    name: "call insertTask".into(),
                    latency_histogram: hist(&[10_000, 20_000]),
                    ..Default::default()
                },
                StepSummary { name: "never".into(), latency_histogram: hist(&[]), ..Default::default() },
            ],
            ..Default::default()
        };
        d.summary.steps = 4;
        d.summary.step_errors = 1;
        d.summary.duration_s = 2.0;
        let doc = Doc::Ddp(Box::new(d));
        let v = verdicts(
            &doc,
            &[
                "max<=21ms",
                "step[\"connect\"].max<3ms",
                "step[\"call insertTask\"].min>5ms",
                "step[\"never\"].p95<1s",
                "error_rate<30%",
                "rps>=2",
            ],
        );
        let ok: Vec<bool> = v.iter().map(|r| r.ok).collect();
        assert_eq!(ok, vec![true, true, true, false, true, true], "{v:?}");
        assert_eq!(v[0].metric, "max of all steps");
        assert_eq!(v[3].why.as_deref(), Some("no sample of never (it never completed or never ran)"));
        assert_eq!(v[4].value, Some(25.0));
    }

    #[test]
    fn a_measure_is_read_from_its_histogram_or_the_verdict_names_those_the_run_took() {
        let mut d = VuDoc::default();
        d.histograms.measures.insert("llm.ttft".into(), hist(&[100_000, 200_000, 1_500_000]));
        d.histograms.measures.insert("llm.itl".into(), hist(&[20_000]));
        let doc = Doc::Ddp(Box::new(d));
        let v = verdicts(&doc, &["llm.ttft.p99<2s", "llm.ttft.max<1s", "llm.itl.mean<21ms", "sse.first_event.p95<1s"]);
        let ok: Vec<bool> = v.iter().map(|r| r.ok).collect();
        assert_eq!(ok, vec![true, false, true, false], "{v:?}");
        assert_eq!(v[0].metric, "p99 of llm.ttft");
        // 1.5 s, within the histogram's precision (three significant digits).
        assert!((v[1].value.unwrap() - 1500.0).abs() < 2.0, "{v:?}");
        assert_eq!(v[3].value, None);
        assert_eq!(v[3].why.as_deref(), Some("no sse.first_event in this run; its measures are llm.itl, llm.ttft"));
        // The document lists the threshold with its value, as every other.
        let mut doc = doc;
        assert!(record(&mut doc, &[parse("llm.ttft.p99<60s", Source::Flag).unwrap()]));
        let json: serde_json::Value = serde_json::to_value(doc.ddp().unwrap()).unwrap();
        let t = &json["thresholds"][0];
        assert_eq!(
            (t["threshold"].as_str(), t["metric"].as_str()),
            (Some("llm.ttft.p99<60s"), Some("p99 of llm.ttft"))
        );
        assert!((t["value"].as_f64().unwrap() - 1500.0).abs() < 2.0, "{t}");
        assert_eq!(t["ok"], true);
        // A run without any, and an HTTP run.
        let none = verdicts(&Doc::Ddp(Box::default()), &["llm.ttft.p99<2s"]);
        assert!(none[0].why.as_deref().unwrap().contains("it took no measure of its own"), "{none:?}");
        let http = verdicts(&Doc::Http(Box::default()), &["llm.ttft.p99<2s"]);
        assert!(http[0].why.as_deref().unwrap().contains("realtime protocol's measure"), "{http:?}");
    }

    #[test]
    fn recorded_thresholds_parse_back() {
        let mut doc = Doc::from(crate::stats::result::ResultDoc::default());
        let ts = vec![parse("p99<1s", Source::Flag).unwrap(), parse("rps>=1", Source::Ensure).unwrap()];
        assert!(!record(&mut doc, &ts));
        assert_eq!(thresholds_of(&doc).unwrap(), ts);
    }
}

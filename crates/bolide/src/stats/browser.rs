//! What browser users measure (`engine: browser`): the page timings of every navigation (TTFB,
//! FCP, LCP, CLS, INP) overall and per step, the DDP traffic the page made (its method round
//! trips and subscriptions' readiness, from its WebSocket frames), its console errors and failed
//! requests, and what the browsers cost (their processes' CPU and RSS, per browser user). The
//! recorder is one per worker and target, merged like the steps'; the section is the document's.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::hist;
use super::result::Latency;
use super::summary::latency;

use crate::problem::Problem;

/// The page timings, in the order reports show them (named where the threshold grammar names them).
pub use crate::threshold::VITALS;

/// CLS is a score; it is kept in histograms as ten-thousandths.
pub const CLS_SCALE: f64 = 10_000.0;

/// Whether a timing is a time (milliseconds) rather than a score.
pub fn is_time(vital: &str) -> bool {
    vital != "cls"
}

/// One worker's browser measurements.
#[derive(Debug, Clone, Default)]
pub struct BrowserRec {
    /// Browser users (walks of a browser flow) started.
    pub users: u64,
    /// Page timings by (step that navigated, vital index), microseconds (CLS: ten-thousandths).
    pub vitals: BTreeMap<(String, usize), Histogram<u64>>,
    /// In-page DDP methods by name: `method` to both `result` and `updated`, microseconds.
    pub methods: BTreeMap<String, Histogram<u64>>,
    /// In-page subscriptions by name: `sub` to `ready`, microseconds.
    pub subs: BTreeMap<String, Histogram<u64>>,
    pub console_errors: u64,
    pub failed_requests: u64,
    /// Dialogs (alert, confirm, prompt, beforeunload) the pages opened, each answered with OK.
    pub dialogs: u64,
    /// Pages that crashed and users whose browser died under them.
    pub crashes: u64,
    /// This second's timings by vital index, handed over at every tick.
    pub second: [Option<Histogram<u64>>; 5],
}

impl BrowserRec {
    /// A navigation's timings, filed under the step that made it.
    pub fn vitals(&mut self, step: &str, values: [Option<f64>; 5]) {
        for (i, v) in values.into_iter().enumerate() {
            let Some(v) = v else { continue };
            let scaled = if is_time(VITALS[i]) { v * 1000.0 } else { v * CLS_SCALE };
            let value = scaled.round().max(0.0) as u64;
            hist::record(self.vitals.entry((step.to_string(), i)).or_insert_with(hist::latency_us), value);
            hist::record(self.second[i].get_or_insert_with(hist::latency_us), value);
        }
    }

    pub fn method(&mut self, name: &str, us: u64) {
        hist::record(self.methods.entry(name.to_string()).or_insert_with(hist::latency_us), us);
    }

    pub fn sub(&mut self, name: &str, us: u64) {
        hist::record(self.subs.entry(name.to_string()).or_insert_with(hist::latency_us), us);
    }

    /// This second's timings, by vital index, emptied for the next.
    pub fn drain_second(&mut self) -> Vec<(usize, hist::Sparse)> {
        let mut out = Vec::new();
        for (i, h) in self.second.iter_mut().enumerate() {
            if let Some(h) = h.as_mut().filter(|h| !h.is_empty()) {
                out.push((i, hist::drain(h)));
            }
        }
        out
    }

    pub fn merge(&mut self, o: &BrowserRec) {
        self.users += o.users;
        let add = |into: &mut Histogram<u64>, from: &Histogram<u64>| into.add(from).expect("same shape");
        for (k, h) in &o.vitals {
            add(self.vitals.entry(k.clone()).or_insert_with(hist::latency_us), h);
        }
        for (k, h) in &o.methods {
            add(self.methods.entry(k.clone()).or_insert_with(hist::latency_us), h);
        }
        for (k, h) in &o.subs {
            add(self.subs.entry(k.clone()).or_insert_with(hist::latency_us), h);
        }
        self.console_errors += o.console_errors;
        self.failed_requests += o.failed_requests;
        self.dialogs += o.dialogs;
        self.crashes += o.crashes;
    }

    /// The document's section, with the protocol users' latency of each method beside the
    /// page's (`protocol`: method name -> histogram of the protocol users' calls to it).
    pub fn section(&self, protocol: &BTreeMap<String, Histogram<u64>>, run: Option<&BrowserRun>) -> BrowserSection {
        let mut vitals = Vec::new();
        for (i, name) in VITALS.iter().enumerate() {
            let mut all: Option<Histogram<u64>> = None;
            for ((step, j), h) in &self.vitals {
                if *j == i {
                    all.get_or_insert_with(hist::latency_us).add(h).expect("same shape");
                    vitals.push(VitalRow::of(name, Some(step.clone()), h));
                }
            }
            if let Some(h) = all {
                vitals.push(VitalRow::of(name, None, &h));
            }
        }
        let calls = |m: &BTreeMap<String, Histogram<u64>>, with_protocol: bool| -> Vec<PageCall> {
            m.iter()
                .map(|(name, h)| PageCall {
                    name: name.clone(),
                    count: h.len(),
                    latency: latency(h),
                    histogram: hist::encode(h),
                    protocol: protocol.get(name).filter(|p| with_protocol && !p.is_empty()).map(latency),
                })
                .collect()
        };
        let users = self.users;
        let cost = run.map(|r| {
            let per = |x: f64| if r.peak_pages > 0 { x / r.peak_pages as f64 } else { 0.0 };
            // CPU time over the samples' intervals (the first from the browser's start).
            let mut at = 0.0;
            let mut cpu_ms = 0.0;
            for (t, pct, _) in &r.watched.samples {
                cpu_ms += pct / 100.0 * (t - at).max(0.0) * 1000.0;
                at = *t;
            }
            BrowserCost {
                cpu_ms,
                cpu_ms_per_user: if users > 0 { cpu_ms / users as f64 } else { 0.0 },
                avg_cpu_pct: r.watched.avg_cpu_pct,
                peak_cpu_pct: r.watched.peak_cpu_pct,
                avg_rss_bytes: r.watched.avg_rss_bytes,
                peak_rss_bytes: r.watched.peak_rss_bytes,
                peak_pages: r.peak_pages,
                cpu_pct_per_user: per(r.watched.avg_cpu_pct),
                rss_bytes_per_user: per(r.watched.peak_rss_bytes as f64),
                samples: r.watched.samples.clone(),
            }
        });
        BrowserSection {
            users: self.users,
            executable: run.map(|r| r.executable.clone()).unwrap_or_default(),
            version: run.and_then(|r| r.version.clone()),
            vitals,
            methods: calls(&self.methods, true),
            subscriptions: calls(&self.subs, false),
            console_errors: self.console_errors,
            failed_requests: self.failed_requests,
            dialogs: self.dialogs,
            crashes: self.crashes,
            cost,
        }
    }
}

impl BrowserSection {
    /// Segments' sections as one (`bolide merge`): the page timings and the pages' DDP from
    /// their histograms, exactly; the counts added; the browsers' costs added (each segment ran
    /// its own), per user over the pages open at once in all. The protocol users' latency beside a
    /// method is the first segment's (their histograms are the steps').
    pub fn merge(parts: &[&BrowserSection]) -> Result<BrowserSection, Problem> {
        let mut rec = BrowserRec::default();
        let decode = |text: &str| hist::decode(text);
        for p in parts {
            rec.users += p.users;
            rec.console_errors += p.console_errors;
            rec.failed_requests += p.failed_requests;
            rec.dialogs += p.dialogs;
            rec.crashes += p.crashes;
            for v in p.vitals.iter().filter(|v| v.step.is_some()) {
                let Some(i) = VITALS.iter().position(|m| *m == v.metric) else { continue };
                let key = (v.step.clone().unwrap_or_default(), i);
                rec.vitals
                    .entry(key)
                    .or_insert_with(hist::latency_us)
                    .add(decode(&v.histogram)?)
                    .map_err(|e| e.to_string())?;
            }
            for (into, calls) in [(&mut rec.methods, &p.methods), (&mut rec.subs, &p.subscriptions)] {
                for c in calls {
                    into.entry(c.name.clone())
                        .or_insert_with(hist::latency_us)
                        .add(decode(&c.histogram)?)
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        let mut merged = rec.section(&BTreeMap::new(), None);
        let first = parts[0];
        merged.executable.clone_from(&first.executable);
        merged.version.clone_from(&first.version);
        for m in &mut merged.methods {
            m.protocol = first.methods.iter().find(|x| x.name == m.name).and_then(|x| x.protocol.clone());
        }
        let costs: Vec<&BrowserCost> = parts.iter().filter_map(|p| p.cost.as_ref()).collect();
        merged.cost = (!costs.is_empty()).then(|| {
            let sum = |f: fn(&BrowserCost) -> f64| costs.iter().map(|c| f(c)).sum::<f64>();
            let pages: u64 = costs.iter().map(|c| c.peak_pages).sum();
            let per = |x: f64| if pages > 0 { x / pages as f64 } else { 0.0 };
            BrowserCost {
                cpu_ms: sum(|c| c.cpu_ms),
                cpu_ms_per_user: if rec.users > 0 { sum(|c| c.cpu_ms) / rec.users as f64 } else { 0.0 },
                avg_cpu_pct: sum(|c| c.avg_cpu_pct),
                peak_cpu_pct: sum(|c| c.peak_cpu_pct),
                avg_rss_bytes: sum(|c| c.avg_rss_bytes),
                peak_rss_bytes: costs.iter().map(|c| c.peak_rss_bytes).sum(),
                peak_pages: pages,
                cpu_pct_per_user: per(sum(|c| c.avg_cpu_pct)),
                rss_bytes_per_user: per(costs.iter().map(|c| c.peak_rss_bytes as f64).sum()),
                samples: Vec::new(),
            }
        });
        Ok(merged)
    }
}

/// The browser of a run, as the engine hands it to the document: what ran, how many pages were
/// open at most, and its processes watched.
#[derive(Debug, Clone, Default)]
pub struct BrowserRun {
    pub executable: String,
    pub version: Option<String>,
    pub peak_pages: u64,
    pub watched: crate::monitor::MonitorResult,
}

/// The browser users of a DDP run's document.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BrowserSection {
    /// Browser users (walks of a browser flow) started.
    pub users: u64,
    /// The Chromium that ran them.
    pub executable: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Page timings: per step that navigated, then over every navigation (`step` absent).
    pub vitals: Vec<VitalRow>,
    /// The page's DDP methods (from its WebSocket frames), with the protocol users' latency of
    /// the same method beside when they called it.
    pub methods: Vec<PageCall>,
    /// The page's subscriptions, `sub` to `ready`.
    pub subscriptions: Vec<PageCall>,
    /// Console errors and uncaught exceptions (each also fails the step it happened in).
    pub console_errors: u64,
    /// Requests that failed or answered 400 or more (each also fails its step).
    pub failed_requests: u64,
    /// Dialogs (alert, confirm, prompt, beforeunload) the pages opened, each answered as a user
    /// pressing OK would (a prompt with its default text); the page goes on.
    #[serde(default)]
    pub dialogs: u64,
    /// Pages that crashed, and users whose browser died.
    pub crashes: u64,
    /// What the browsers' processes cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<BrowserCost>,
}

/// One page timing's distribution: milliseconds, or the CLS score.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VitalRow {
    /// ttfb, fcp, lcp, cls or inp.
    pub metric: String,
    /// The step whose navigation it timed (absent: every navigation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    pub count: u64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    /// HdrHistogram V2 deflate, base64 (microseconds; CLS in ten-thousandths).
    pub histogram: String,
}

impl VitalRow {
    fn of(metric: &str, step: Option<String>, h: &Histogram<u64>) -> VitalRow {
        let unit = if is_time(metric) { 1000.0 } else { CLS_SCALE };
        let q = |x: f64| h.value_at_quantile(x) as f64 / unit;
        VitalRow {
            metric: metric.to_string(),
            step,
            count: h.len(),
            p50: q(0.5),
            p75: q(0.75),
            p95: q(0.95),
            p99: q(0.99),
            max: h.max() as f64 / unit,
            histogram: hist::encode(h),
        }
    }

    /// The value at a named statistic (`p50`, `p75`, `p95`, `p99`, `max`).
    pub fn stat(&self, stat: &str) -> Option<f64> {
        Some(match stat {
            "p50" => self.p50,
            "p75" => self.p75,
            "p95" => self.p95,
            "p99" => self.p99,
            "max" => self.max,
            _ => return None,
        })
    }
}

/// An in-page DDP method or subscription.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PageCall {
    pub name: String,
    pub count: u64,
    pub latency: Latency,
    pub histogram: String,
    /// The protocol users' latency of the same method (their call steps to it), when they made any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Latency>,
}

/// The browsers' processes over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BrowserCost {
    /// Every browser process's CPU time over the run, milliseconds (sampled each interval).
    #[serde(default)]
    pub cpu_ms: f64,
    /// That CPU time per browser user (walk of a browser flow), milliseconds.
    #[serde(default)]
    pub cpu_ms_per_user: f64,
    /// Every browser process together, percent of one core.
    pub avg_cpu_pct: f64,
    pub peak_cpu_pct: f64,
    pub avg_rss_bytes: f64,
    pub peak_rss_bytes: u64,
    /// Most pages open at once.
    pub peak_pages: u64,
    /// Average CPU per page open at the peak, percent of one core.
    pub cpu_pct_per_user: f64,
    /// Peak RSS per page open at the peak, bytes.
    pub rss_bytes_per_user: f64,
    /// One sample per interval: seconds since the browser started, CPU% of one core, RSS bytes.
    pub samples: Vec<(f64, f64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lcp: &[f64], methods: &[u64]) -> BrowserRec {
        let mut r = BrowserRec { users: lcp.len() as u64, console_errors: 1, ..BrowserRec::default() };
        for v in lcp {
            r.vitals("goto /", [Some(3.0), Some(*v / 2.0), Some(*v), Some(0.01), None]);
        }
        for us in methods {
            r.method("insertTask", *us);
        }
        r
    }

    #[test]
    fn segments_merge_to_the_whole_run_s_figures() {
        let (a, b) = (rec(&[40.0, 60.0], &[900, 1100]), rec(&[500.0], &[20_000]));
        let mut whole = a.clone();
        whole.merge(&b);
        let none = BTreeMap::new();
        let merged = BrowserSection::merge(&[&a.section(&none, None), &b.section(&none, None)]).unwrap();
        let want = whole.section(&none, None);
        assert_eq!(merged.vitals, want.vitals);
        assert_eq!(merged.methods, want.methods);
        assert_eq!((merged.users, merged.console_errors), (3, 2));
        let lcp = merged.vitals.iter().find(|v| v.metric == "lcp" && v.step.is_none()).unwrap();
        assert_eq!((lcp.count, lcp.max.round()), (3, 500.0));
        let cls = merged.vitals.iter().find(|v| v.metric == "cls" && v.step.is_none()).unwrap();
        assert_eq!(cls.p50, 0.01, "a score, not a time");
        assert!(merged.vitals.iter().all(|v| v.metric != "inp"), "no page reported INP");
    }
}

//! Any result document (HTTP or DDP) as read back from disk, and the few measures that
//! `bench`, `compare` and `capacity` tabulate: the Meteor reports' Time, CPU and RAM, plus errors
//! and latency.

use std::path::Path;

use super::envelope::{Envelope, EnvelopeMut};
use super::result::ResultDoc;
use super::view::Reading;
use super::vu::VuDoc;

use crate::problem::Problem;

/// A result document of either kind (written as the document itself).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Doc {
    Http(Box<ResultDoc>),
    Ddp(Box<VuDoc>),
}

/// What one run measured, in the units the tables use.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measures {
    /// The Meteor reports' "Time": for DDP from the first arrival to the last user's end; for
    /// HTTP the run's duration.
    pub time_s: f64,
    /// Seconds per unit of work, the basis of "faster" and "slower": for DDP the Time (the
    /// workload is fixed), for HTTP the time per request (1 / requests per second).
    pub speed_s: f64,
    /// HTTP: completed responses per second (the figure that says "faster" for HTTP).
    pub requests_per_s: Option<f64>,
    /// Sum over the watched processes of their average CPU, percent of one core.
    pub cpu_pct: Option<f64>,
    /// Sum over the watched processes of their average resident memory (as the Meteor script
    /// reports memory), bytes.
    pub ram_bytes: Option<f64>,
    pub errors: u64,
    pub error_rate_pct: f64,
    pub mean_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Why the run may measure the tool or the machine rather than the server.
    pub suspect: Option<String>,
    /// bolide's own load thread was saturated: its speed figures bound the server's.
    pub saturated: bool,
    pub interrupted: bool,
    /// The server's event-loop delay p99, milliseconds: the mean over the run's reads of the
    /// per-second p99 that bolide-probe (`--probe`) or prom-client (`--scrape`) exports, else the
    /// p99 of the Monti agent's lag histogram over the run (`--monti`).
    pub eventloop_p99_ms: Option<f64>,
    /// The server's GC pauses over the run, milliseconds in all (bolide-probe's or prom-client's
    /// GC histogram's sum, or the Monti agent's GC time).
    pub gc_ms: Option<f64>,
    /// bolide's own CPU per unit of work, microseconds: per request (HTTP), per DDP message.
    pub bolide_cpu_us: Option<f64>,
    /// The transport built-ins (ddp-calls, ddp-connect): their unit ("calls", "connects") and
    /// how many were done per second.
    pub rate: Option<(String, f64)>,
    /// Runs with browser users: their pages' timings and what a browser user cost.
    pub browser: Option<PageFigures>,
    /// A protocol's own latencies at p50 and p99, milliseconds, by `NAME.p50` and `NAME.p99`
    /// (`llm.ttft.p99`); lower is better.
    pub measures_ms: std::collections::BTreeMap<String, f64>,
    /// The counts its protocol declared a throughput (`summary.throughputs`), per second of the
    /// run, by `NAME_per_s` (`llm.output_tokens_per_s`); higher is better.
    pub events_per_s: std::collections::BTreeMap<String, f64>,
    /// What one user receives a second, as its protocol declared it (`summary.per_user`): the
    /// key of a latency in `measures_ms` (`llm.tpot.p50`) whose inverse it is, and its name.
    pub per_user: std::collections::BTreeMap<String, String>,
}

/// What a run's browser users give the runs' tables and the gate: LCP and INP at p75 over every
/// navigation (the web's thresholds use p75), the browsers' CPU per browser user.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct PageFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lcp_p75_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inp_p75_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pct_per_user: Option<f64>,
}

/// The event-loop p99 and GC time a document's scraped endpoints give: the first endpoint that
/// exports each (bolide-probe's series, else prom-client's).
fn server_internals(scraped: &[crate::monitor::scrape::ScrapeResult]) -> (Option<f64>, Option<f64>) {
    let mean_of =
        |metric: &str| scraped.iter().find_map(|r| r.series.iter().find(|s| s.metric == metric).and_then(|s| s.mean));
    let total_of = |metric: &str| {
        scraped.iter().find_map(|r| {
            let v: Vec<f64> = r.series.iter().filter(|s| s.metric == metric).filter_map(|s| s.increase).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        })
    };
    // The Monti agent's lag histogram: its p99 over the run.
    let monti_p99 = || {
        scraped.iter().find_map(|r| {
            r.series.iter().find(|s| s.metric == "monti_eventloop_lag_seconds").and_then(|s| s.quantiles).map(|q| q[2])
        })
    };
    let eventloop = mean_of("probe_eventloop_delay_p99_seconds")
        .or_else(|| mean_of("nodejs_eventloop_lag_p99_seconds"))
        .or_else(monti_p99);
    let gc = total_of("probe_gc_pause_seconds_sum")
        .or_else(|| total_of("nodejs_gc_duration_seconds_sum"))
        .or_else(|| total_of("monti_gc_seconds_total"));
    (eventloop.map(|s| s * 1000.0), gc.map(|s| s * 1000.0))
}

/// The largest result document bolide reads (1 GiB): far above any run's (the histograms are
/// compressed; a day-long run with per-second histograms stays in the tens of MiB), and small
/// enough that reading one never takes the machine's memory.
pub const MAX_DOC_BYTES: u64 = 1 << 30;

impl Doc {
    /// Reads a result document of either kind; the error says why the file is not one.
    /// Reads a result document of either kind (at most [`MAX_DOC_BYTES`], checked before
    /// reading where the file has a size); the error says why the file is not one.
    ///
    /// A regular file is parsed from the file twice, streaming: its head, then the typed
    /// document, so memory holds the typed document alone (about the file's size, never a copy of
    /// the text or a `Value` tree besides). A pipe is read whole (up to the limit) once its first
    /// byte says JSON, so `/dev/zero` is refused at once.
    pub fn load(path: &Path) -> Result<Doc, Problem> {
        use std::io::{BufReader, Read};
        let cannot = |e: std::io::Error| format!("cannot read: {e}");
        let open = || std::fs::File::open(path).map(|f| BufReader::with_capacity(1 << 16, f.take(MAX_DOC_BYTES + 1)));
        let meta = std::fs::metadata(path).map_err(cannot)?;
        if !meta.is_file() {
            let mut reader = open().map_err(cannot)?;
            let mut first = [0u8; 1];
            loop {
                match reader.read(&mut first).map_err(cannot)? {
                    0 => return Err("not JSON (empty)".into()),
                    _ if first[0].is_ascii_whitespace() => continue,
                    _ if first[0] == b'{' => break,
                    _ => return Err("not a bolide result (not a JSON object)".into()),
                }
            }
            let mut text = vec![b'{'];
            reader.read_to_end(&mut text).map_err(cannot)?;
            if text.len() as u64 > MAX_DOC_BYTES {
                return Err(cannot(crate::files::too_large(MAX_DOC_BYTES)).into());
            }
            let text = String::from_utf8(text).map_err(|_| "not a bolide result (not UTF-8 text)".to_string())?;
            return Doc::from_json(&text);
        }
        if meta.len() > MAX_DOC_BYTES {
            return Err(cannot(crate::files::too_large(MAX_DOC_BYTES)).into());
        }
        let head: super::result::Head =
            serde_json::from_reader(open().map_err(cannot)?).map_err(|e| format!("not JSON ({e})"))?;
        let kind = head.check()?;
        let typed = |e: serde_json::Error| Problem::from(format!("malformed result: {e}"));
        match kind {
            "http" => serde_json::from_reader(open().map_err(cannot)?)
                .map(|d: ResultDoc| Doc::Http(Box::new(d.counted_as_now())))
                .map_err(typed),
            _ => serde_json::from_reader(open().map_err(cannot)?).map(|d| Doc::Ddp(Box::new(d))).map_err(typed),
        }
    }

    pub fn from_json(text: &str) -> Result<Doc, Problem> {
        let typed = |e: serde_json::Error| Problem::from(format!("malformed result: {e}"));
        match super::result::Head::of(text)?.check()? {
            "http" => {
                serde_json::from_str(text).map(|d: ResultDoc| Doc::Http(Box::new(d.counted_as_now()))).map_err(typed)
            }
            _ => serde_json::from_str(text).map(|d| Doc::Ddp(Box::new(d))).map_err(typed),
        }
    }

    /// The document read in the terms every reader shares.
    pub fn view(&self) -> &dyn Reading {
        match self {
            Doc::Http(d) => &**d,
            Doc::Ddp(d) => &**d,
        }
    }

    fn view_mut(&mut self) -> &mut dyn Reading {
        match self {
            Doc::Http(d) => &mut **d,
            Doc::Ddp(d) => &mut **d,
        }
    }

    /// The HTTP document, when this is one (for what only HTTP runs have: statuses, per-URL
    /// columns, ab's per-request file).
    pub fn http(&self) -> Option<&ResultDoc> {
        match self {
            Doc::Http(d) => Some(d),
            _ => None,
        }
    }

    /// The virtual-user document, when this is one (for what only user runs have: steps,
    /// per-target subscriptions and calls).
    pub fn ddp(&self) -> Option<&VuDoc> {
        match self {
            Doc::Ddp(d) => Some(d),
            _ => None,
        }
    }

    pub fn http_mut(&mut self) -> Option<&mut ResultDoc> {
        match self {
            Doc::Http(d) => Some(d),
            _ => None,
        }
    }

    pub fn ddp_mut(&mut self) -> Option<&mut VuDoc> {
        match self {
            Doc::Ddp(d) => Some(d),
            _ => None,
        }
    }

    /// What every document carries, whatever its workload.
    pub fn envelope(&self) -> Envelope<'_> {
        self.view().envelope()
    }

    pub fn envelope_mut(&mut self) -> EnvelopeMut<'_> {
        self.view_mut().envelope_mut()
    }

    pub fn label(&self) -> Option<&str> {
        self.envelope().label
    }

    pub fn started_at(&self) -> &str {
        self.envelope().started_at
    }

    /// `"http"` or `"ddp"`.
    pub fn kind(&self) -> &'static str {
        self.view().kind()
    }

    /// The segment of a plan the run was (`--segment`); None for a whole plan.
    pub fn segment(&self) -> Option<crate::segment::Segment> {
        self.view().segment()
    }

    pub fn interrupted(&self) -> bool {
        self.envelope().interrupted
    }

    /// The generator machine's cores and bolide's load threads there.
    pub fn cores(&self) -> usize {
        self.envelope().host.cores
    }

    pub fn threads(&self) -> usize {
        self.view().threads()
    }

    /// Every threshold's verdict (`--threshold`, a scenario's `ensure`).
    pub fn thresholds(&self) -> &[crate::threshold::ThresholdResult] {
        self.envelope().thresholds
    }

    pub fn monitor(&self) -> &[crate::monitor::MonitorResult] {
        self.envelope().monitor
    }

    pub fn scrape(&self) -> &[crate::monitor::scrape::ScrapeResult] {
        self.envelope().scrape
    }

    pub fn set_scrape(&mut self, scrape: Vec<crate::monitor::scrape::ScrapeResult>) {
        *self.envelope_mut().scrape = scrape;
    }

    pub fn generator(&self) -> Option<&crate::monitor::generator::GeneratorResult> {
        self.envelope().generator
    }

    /// The workload's name: a scenario, or `http` and the paths requested.
    pub fn workload(&self) -> String {
        self.view().workload()
    }

    /// The workload in named parts: two runs compare only when every part is equal. The target's
    /// address is not part of it (comparing two servers is the point); threads are bolide's own.
    pub fn workload_parts(&self) -> Vec<(&'static str, String)> {
        self.view().workload_parts()
    }

    /// The one error rate every reader uses (thresholds, the gate, the capacity ladder, the
    /// reports), percent: failed requests (transport errors and unexpected statuses) of the
    /// requests that ended (HTTP), failed steps of the steps run (DDP). None when nothing ended.
    pub fn error_rate_pct(&self) -> Option<f64> {
        let (of, failed) = self.view().ended_and_failed();
        (of > 0).then(|| failed as f64 * 100.0 / of as f64)
    }

    /// What failed, for people, most telling first: HTTP's unexpected statuses by code
    /// (`status 500`) then transport errors by class; a DDP run's step errors by class.
    pub fn failures(&self) -> Vec<(String, u64)> {
        self.view().failures()
    }

    pub fn measures(&self) -> Measures {
        // Only processes that were found and sampled count: a monitor that found nothing is n/a,
        // never a measured zero.
        let monitor: Vec<_> = self.monitor().iter().filter(|m| !m.samples.is_empty()).collect();
        let cpu_pct = (!monitor.is_empty()).then(|| monitor.iter().map(|m| m.avg_cpu_pct).sum());
        let ram_bytes = (!monitor.is_empty()).then(|| monitor.iter().map(|m| m.avg_rss_bytes).sum());
        let suspect = self.generator().and_then(|g| g.suspect.clone());
        let (eventloop_p99_ms, gc_ms) = server_internals(self.scrape());
        let bolide_cpu_us = self.generator().and_then(|g| g.cpu_us_per_request.or(g.cpu_us_per_message));
        let v = self.view();
        let (mean_ms, p99_ms) = v.mean_p99_ms();
        Measures {
            time_s: v.time_s(),
            speed_s: v.speed_s(),
            requests_per_s: v.requests_per_s(),
            cpu_pct,
            ram_bytes,
            errors: v.errors(),
            error_rate_pct: self.error_rate_pct().unwrap_or(0.0),
            mean_ms,
            p99_ms,
            suspect,
            saturated: self.generator().is_some_and(|g| g.saturated()),
            interrupted: self.interrupted(),
            eventloop_p99_ms,
            gc_ms,
            bolide_cpu_us,
            rate: self.ddp().and_then(super::vu::unit_rate).map(|(u, r)| (u.to_string(), r)),
            measures_ms: self.ddp().map(protocol_latencies).unwrap_or_default(),
            events_per_s: self.ddp().map(protocol_rates).unwrap_or_default(),
            per_user: self
                .ddp()
                .map(|d| d.summary.per_user.iter().map(|(m, name)| (format!("{m}.p50"), name.clone())).collect())
                .unwrap_or_default(),
            browser: self.ddp().and_then(|d| d.browser.as_ref()).map(|b| {
                let p75 = |m: &str| b.vitals.iter().find(|v| v.metric == m && v.step.is_none()).map(|v| v.p75);
                PageFigures {
                    lcp_p75_ms: p75("lcp"),
                    inp_p75_ms: p75("inp"),
                    cpu_pct_per_user: b.cost.as_ref().map(|c| c.cpu_pct_per_user),
                }
            }),
        }
    }
}

/// A realtime run's measures at p50 and p99, milliseconds (`llm.ttft.p50`, `llm.ttft.p99`).
fn protocol_latencies(d: &VuDoc) -> std::collections::BTreeMap<String, f64> {
    let ms = |us: u64| us as f64 / 1000.0;
    d.summary
        .measures
        .iter()
        .flat_map(|(name, l)| [(format!("{name}.p50"), ms(l.p50_us)), (format!("{name}.p99"), ms(l.p99_us))])
        .collect()
}

/// A realtime run's throughputs (the counts its protocol declared one) per second of the run
/// (none when it lasted no time).
fn protocol_rates(d: &VuDoc) -> std::collections::BTreeMap<String, f64> {
    let s = &d.summary;
    s.throughputs
        .iter()
        .filter(|_| s.duration_s > 0.0)
        .filter_map(|name| s.events.get(name).map(|n| (format!("{name}_per_s"), *n as f64 / s.duration_s)))
        .collect()
}

pub use super::vu::{all_steps, scenario_name};

/// The parts in which two workloads differ, as `name: a vs b`.
pub fn differences(a: &[(&'static str, String)], b: &[(&'static str, String)]) -> Vec<String> {
    a.iter().zip(b).filter(|((_, x), (_, y))| x != y).map(|((name, x), (_, y))| format!("{name}: {x} vs {y}")).collect()
}

#[cfg(test)]
mod tests {
    use crate::monitor::scrape::{Kind, ScrapeResult, Series};

    fn series(metric: &str, kind: Kind, f: impl FnOnce(&mut Series)) -> Series {
        let mut s = Series { metric: metric.into(), kind: Some(kind), ..Default::default() };
        f(&mut s);
        s
    }

    #[test]
    fn event_loop_and_gc_come_from_the_probe_first_then_prom_client_then_monti() {
        let monti = ScrapeResult {
            name: "monti".into(),
            series: vec![
                series("monti_eventloop_lag_seconds", Kind::Histogram, |s| s.quantiles = Some([0.001, 0.002, 0.004])),
                series("monti_gc_seconds_total", Kind::Counter, |s| s.increase = Some(0.25)),
                series("monti_gc_seconds_total", Kind::Counter, |s| s.increase = Some(0.05)),
            ],
            ..Default::default()
        };
        let (el, gc) = super::server_internals(std::slice::from_ref(&monti));
        assert_eq!(el, Some(4.0));
        assert!((gc.unwrap() - 300.0).abs() < 1e-9);
        let probe = ScrapeResult {
            name: "app".into(),
            series: vec![
                series("probe_eventloop_delay_p99_seconds", Kind::Gauge, |s| s.mean = Some(0.012)),
                series("probe_gc_pause_seconds_sum", Kind::Counter, |s| s.increase = Some(0.5)),
            ],
            ..Default::default()
        };
        let (el, gc) = super::server_internals(&[monti, probe]);
        assert_eq!((el, gc), (Some(12.0), Some(500.0)));
    }
}

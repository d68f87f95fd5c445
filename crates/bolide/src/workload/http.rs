//! The HTTP workload's part: `bolide http`'s plan run by the HTTP engine (HTTP/1.1 and HTTP/2
//! connections), its seconds and its result document.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::http::{Progress, RunOutput};
use crate::plan::{Common, HttpPlan};
use crate::report::progress::{self, Bar};
use crate::stats::envelope::Enveloped;
use crate::stats::result::{ResultDoc, Second};
use crate::stats::{doc::Doc, hist, result, summary};

impl From<ResultDoc> for Doc {
    fn from(d: ResultDoc) -> Doc {
        Doc::Http(Box::new(d))
    }
}

impl super::Describe for HttpPlan {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn writes_requests(&self) -> bool {
        self.gnuplot.is_some()
    }

    fn set_requests_file(&mut self, path: PathBuf) {
        self.gnuplot = Some(path);
    }

    /// A fixed rate (the open model), as `--rps` sets it.
    fn at_rate(&mut self, per_s: f64) -> Result<(), String> {
        let per_s = crate::scenario::check_rate(per_s).map_err(|why| format!("--rps {why}"))?;
        self.pacer = crate::engine::pacer::Pacer::Rate { per_s, slice: crate::engine::pacer::Slice::WHOLE };
        self.settings.rate_per_s = Some(per_s);
        Ok(())
    }

    fn slug(&self) -> String {
        "http".into()
    }

    fn planned(&self) -> Option<Duration> {
        self.stop.time
    }

    fn requests_file(&self) -> Option<&Path> {
        self.gnuplot.as_deref().filter(|g| g.is_file())
    }
}

impl super::Part for HttpPlan {
    type Tick = Progress;
    type Second = Second;
    type Output = RunOutput;
    type Document = ResultDoc;

    fn urls(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.url.clone()).collect()
    }

    fn header(&self) -> String {
        crate::report::http::header(&self.settings, &self.urls())
    }

    fn bar(&self, live: bool, stage: &str) -> Bar {
        progress::http_bar(live, stage, self.stop.time, self.stop.count)
    }

    fn run(&self, cancel: &CancellationToken, each: &mut dyn FnMut(&Progress)) -> Result<RunOutput, String> {
        crate::engine::http::run(self, cancel, each).map_err(|e| e.to_string())
    }

    fn show(bar: &Bar, tick: &Progress) {
        progress::http_update(bar, tick)
    }

    fn line(tick: &Progress) -> String {
        progress::http_line(tick)
    }

    fn second(tick: &Progress) -> &Second {
        &tick.second
    }

    fn export(e: &mut crate::export::Exporter, second: &Second) {
        e.http_second(second)
    }

    fn export_rest(e: &mut crate::export::Exporter, out: &RunOutput) {
        e.rest_http(&out.timeline)
    }

    fn live(timeline: Vec<Second>) -> ResultDoc {
        ResultDoc { timeline, ..Default::default() }
    }

    fn document(&self, o: &RunOutput, command_line: Vec<String>) -> ResultDoc {
        let duration_s = o.duration.as_secs_f64();
        let urls = self.urls();
        let (summary, all) = summary::overall(&o.merged, &o.timeline, duration_s, o.scheduled_sends);
        let mut doc = ResultDoc {
            settings: self.settings.clone(),
            per_target: summary::per_target(&urls, &o.merged, duration_s),
            targets: urls,
            summary,
            timeline: o.timeline.clone(),
            histograms: result::Histograms { latency_us: hist::encode(&all.latency_us) },
            ..Default::default()
        };
        doc.stamp("http", command_line, o.started_at, o.interrupted);
        doc
    }

    fn strip_for_document(&self, doc: &mut ResultDoc) {
        // The seconds' breakdowns were for the receivers; a segment's document keeps the
        // histograms for merge.
        for s in &mut doc.timeline {
            s.detail = None;
            if self.common.spread.segment.is_none() {
                s.latency_histogram = None;
            }
        }
    }

    fn work(doc: &ResultDoc) -> (u64, bool) {
        (doc.summary.finished(), false)
    }

    fn cpu_ns(out: &RunOutput) -> u64 {
        out.cpu_ns
    }

    fn first_errors(out: &RunOutput) -> Vec<(String, String)> {
        out.merged.first_errors.iter().map(|(c, d)| (c.name().to_string(), d.clone())).collect()
    }

    fn extra_files(&self, out: &RunOutput) -> Result<Option<(&'static str, PathBuf)>, String> {
        let Some(path) = &self.gnuplot else { return Ok(None) };
        match &out.gnuplot_error {
            // The result document is written regardless.
            Some(e) => Err(format!("cannot write {}: {e}", path.display())),
            None => crate::stats::gnuplot::assemble(path, &out.gnuplot_parts)
                .map(|()| Some(("Per-request data (ab -g layout)", path.clone())))
                .map_err(|e| format!("cannot write {}: {e}", path.display())),
        }
    }
}

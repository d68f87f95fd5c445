//! A workload: what differs between protocols, behind one seam. [`Workload`] is a validated
//! plan of either kind; [`Part`] is what the run lifecycle (`lifecycle::run`, the same for every
//! workload) asks of one: the line said before it starts, its progress bar, whether its targets
//! answer, its engine, each second handed to the outputs and the live page, and its result
//! document. A new protocol is a plan, an engine and a `Part` (with its document and report
//! parts), not edits across the lifecycle.

pub mod http;
pub mod vu;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::console::{Failed, Io};
use crate::plan::{Common, HttpPlan, RunPlanError, VuPlan};
use crate::problem::Problem;
use crate::report::progress::Bar;
use crate::stats::doc::Doc;

/// A validated workload of either kind.
#[derive(Debug, Clone)]
pub enum Workload {
    Http(Box<HttpPlan>),
    Ddp(Box<VuPlan>),
}

impl Workload {
    pub fn http(args: &crate::cli::HttpArgs) -> Result<Workload, RunPlanError> {
        let plan = crate::plan::http_plan(args).map_err(RunPlanError::Config)?;
        Ok(Workload::Http(Box::new(plan)))
    }

    pub fn ddp(args: &crate::cli::RunArgs) -> Result<Workload, RunPlanError> {
        crate::plan::run_plan(args).map(|p| Workload::Ddp(Box::new(p)))
    }

    /// The workload `bench` repeats (`bench http` or `bench run`); a scenario gets `variables`
    /// (a `--parameter-list` combination's values) as variables of their names.
    pub fn bench(b: &crate::cli::BenchWorkload, variables: &[(String, String)]) -> Result<Workload, RunPlanError> {
        match b {
            crate::cli::BenchWorkload::Http(h) => Workload::http(&h.args),
            crate::cli::BenchWorkload::Run(r) => {
                let mut args = r.args.clone();
                args.variables = variables.to_vec();
                Workload::ddp(&args)
            }
        }
    }

    /// The workload's own part, behind the seam.
    pub fn part(&self) -> &dyn Describe {
        match self {
            Workload::Http(p) => &**p,
            Workload::Ddp(p) => &**p,
        }
    }

    pub fn common(&self) -> &Common {
        self.part().common()
    }

    pub fn part_mut(&mut self) -> &mut dyn Describe {
        match self {
            Workload::Http(p) => &mut **p,
            Workload::Ddp(p) => &mut **p,
        }
    }

    pub fn common_mut(&mut self) -> &mut Common {
        self.part_mut().common_mut()
    }

    /// A short name for files and tables: the scenario, or `http`.
    pub fn slug(&self) -> String {
        self.part().slug()
    }

    /// How long one run is planned to last (None when bounded by a count of requests).
    pub fn planned(&self) -> Option<Duration> {
        self.part().planned()
    }

    /// The per-request file a finished run leaves (`--gnuplot`), for its report.
    pub fn requests_file(&self) -> Option<&std::path::Path> {
        self.part().requests_file()
    }

    /// Where the result document goes, under which label, and whether the run prints its summary
    /// (and no HTML report or CSV per run: the command writes the series').
    pub fn set_output(&mut self, json: Option<PathBuf>, label: Option<String>, quiet: bool) {
        let c = self.common_mut();
        // A repeated workload's report, CSV and verdicts cover every run; the command writes them
        // at the end.
        (c.json, c.html, c.csv, c.junit, c.label, c.quiet) = (json, None, None, None, label, quiet);
    }
}

/// A plan refused: its flags' problems, or its scenario file's (exit 2).
impl From<RunPlanError> for Failed {
    fn from(e: RunPlanError) -> Failed {
        match e {
            RunPlanError::Config(c) => Failed::usage(c.0),
            RunPlanError::Scenario(s) => Failed { file: Some(s.to_string()), ..Failed::usage(Vec::<Problem>::new()) },
        }
    }
}

/// What the commands that run a workload ask of it, whatever its kind.
pub trait Describe {
    /// Outputs, server, segment, thresholds, label.
    fn common(&self) -> &Common;
    fn common_mut(&mut self) -> &mut Common;
    /// A short name for files and tables.
    fn slug(&self) -> String;
    /// How long one run is planned to last (None when bounded by a count).
    fn planned(&self) -> Option<Duration>;
    /// The per-request file a finished run leaves, when it wrote one.
    fn requests_file(&self) -> Option<&std::path::Path> {
        None
    }
    /// Whether the run writes a per-request file (`--gnuplot`), so that a series gives each run
    /// its own.
    fn writes_requests(&self) -> bool {
        false
    }
    /// Where the next run writes its per-request file.
    fn set_requests_file(&mut self, _path: PathBuf) {}
    /// The same plan at `per_s` units of work arriving per second (requests sent, users arriving):
    /// a capacity ladder's level, made by changing the plan, never by reading flags again.
    fn at_rate(&mut self, per_s: f64) -> Result<(), String>;
}

/// What the run lifecycle asks of a workload: the seam a protocol implements.
pub trait Part: Describe {
    /// What the engine reports once a second.
    type Tick;
    /// One second as the result document's timeline has it.
    type Second: Clone + Send + 'static;
    /// What the engine measured.
    type Output;
    /// The workload's result document.
    type Document: crate::stats::envelope::Enveloped + Into<Doc>;

    /// The targets' URLs (as given; for the outputs' labels).
    fn urls(&self) -> Vec<String>;
    /// What the run will do, said before it starts.
    fn header(&self) -> String;
    /// The run's progress bar.
    fn bar(&self, live: bool, stage: &str) -> Bar;
    /// Whether the targets answer; says which does not on `io.err`.
    fn reachable(&self, _io: &mut Io) -> bool {
        true
    }
    /// Runs the engine to the end (or `cancel`), calling `each` about once a second.
    fn run(&self, cancel: &CancellationToken, each: &mut dyn FnMut(&Self::Tick)) -> Result<Self::Output, String>;
    /// A second on the bar.
    fn show(bar: &Bar, tick: &Self::Tick);
    /// A second in words, for the live page.
    fn line(tick: &Self::Tick) -> String;
    fn second(tick: &Self::Tick) -> &Self::Second;
    /// A second handed to an output (`--out prometheus-rw`, `otlp`).
    fn export(e: &mut crate::export::Exporter, second: &Self::Second);
    /// The seconds an output has not had yet, at the end.
    fn export_rest(e: &mut crate::export::Exporter, out: &Self::Output);
    /// A document of the seconds so far, for the live page.
    fn live(timeline: Vec<Self::Second>) -> Self::Document;
    /// The run's result document (the lifecycle adds what the envelope carries besides).
    fn document(&self, out: &Self::Output, command_line: Vec<String>) -> Self::Document;
    /// Leaves out of the document what only the outputs needed (a segment's run keeps the
    /// seconds' histograms, for `bolide merge`).
    fn strip_for_document(&self, doc: &mut Self::Document);
    /// The units of work bolide's CPU is counted per: (requests, false) or (messages, true).
    fn work(doc: &Self::Document) -> (u64, bool);
    /// The load threads' CPU time, nanoseconds.
    fn cpu_ns(out: &Self::Output) -> u64;
    /// The first failure of each class, for stderr.
    fn first_errors(out: &Self::Output) -> Vec<(String, String)>;
    /// A file of the workload's own beyond the document (ab's per-request file): what it is and
    /// where it was written, or why it could not be.
    fn extra_files(&self, _out: &Self::Output) -> Result<Option<(&'static str, PathBuf)>, String> {
        Ok(None)
    }
    /// The faults to seed into the run (`--fault`).
    fn faults(&self) -> crate::fault::Faults {
        crate::fault::Faults::new(Vec::new(), None)
    }
    /// Puts the faults as they happened on the document's timeline.
    fn record_faults(_doc: &mut Self::Document, _out: &Self::Output, _faults: Vec<crate::fault::FaultRecord>) {}
}

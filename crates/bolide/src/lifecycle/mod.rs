//! The run lifecycle that `http`, `run`, `bench`, `capacity` and `demo` share: start the server
//! (`--spawn`), check the target, run the engine with the server and bolide itself watched, stop
//! the server, assemble the result document (see [`document`]), print the summary and write the
//! files. A [`Workload`] is a validated plan of either kind; [`Workload::execute`] runs it once.

pub mod document;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::console::{exit, Io};
use crate::dashboard::Dashboard;
use crate::engine::http as engine;
use crate::plan::{self, DdpPlan, HttpPlan};
use crate::report::progress;
use crate::stats::doc::Doc;
use crate::stats::gnuplot;

/// A validated workload of either kind.
#[derive(Debug, Clone)]
pub enum Workload {
    Http(Box<HttpPlan>),
    Ddp(Box<DdpPlan>),
}

impl Workload {
    pub fn http(args: &crate::cli::HttpArgs) -> Result<Workload, String> {
        crate::plan::http_plan(args).map(|p| Workload::Http(Box::new(p))).map_err(|e| e.to_string())
    }

    pub fn ddp(args: &crate::cli::RunArgs) -> Result<Workload, String> {
        crate::plan::run_plan(args).map(|p| Workload::Ddp(Box::new(p))).map_err(|e| e.to_string())
    }

    /// A short name for files and tables: the scenario, or `http`.
    pub fn slug(&self) -> String {
        match self {
            Workload::Http(_) => "http".into(),
            Workload::Ddp(p) => crate::stats::doc::scenario_name(&p.source),
        }
    }

    /// The HTML report the command line asked for (`--html`).
    pub fn html(&self) -> Option<PathBuf> {
        match self {
            Workload::Http(p) => p.html.clone(),
            Workload::Ddp(p) => p.html.clone(),
        }
    }

    /// How long one run is planned to last (None when bounded by a count of requests).
    pub fn planned(&self) -> Option<Duration> {
        match self {
            Workload::Http(p) => p.stop.time,
            Workload::Ddp(p) => Some(p.arrivals_length()),
        }
    }

    /// Where the result document goes, under which label, and whether the run prints its summary
    /// (and no HTML report or CSV per run: the command writes the series').
    pub fn set_output(&mut self, json: Option<PathBuf>, label: Option<String>, quiet: bool) {
        match self {
            // A repeated workload's report covers every run; the command writes it at the end.
            Workload::Http(p) => {
                p.json = json;
                p.html = None;
                p.csv = None;
                p.label = label;
                p.quiet = quiet;
            }
            Workload::Ddp(p) => {
                p.json = json;
                p.html = None;
                p.csv = None;
                p.label = label;
                p.quiet = quiet;
            }
        }
    }

    /// This instance's segment and shared start (`--segment`, `--start-at`).
    pub fn spread(&self) -> plan::Spread {
        match self {
            Workload::Http(p) => p.spread,
            Workload::Ddp(p) => p.spread,
        }
    }

    /// Sets when the next run starts (a series' run or a ladder's level after the first).
    pub fn set_start_at(&mut self, at: Option<std::time::SystemTime>) {
        match self {
            Workload::Http(p) => p.spread.start_at = at,
            Workload::Ddp(p) => p.spread.start_at = at,
        }
    }

    /// Where the command's live dashboard listens (`--dashboard`).
    pub fn dashboard(&self) -> Option<std::net::SocketAddr> {
        match self {
            Workload::Http(p) => p.dashboard,
            Workload::Ddp(p) => p.dashboard,
        }
    }

    /// Runs it once, feeding `dashboard` (when the command serves one) every second.
    pub fn execute(
        &self,
        command_line: Vec<String>,
        io: &mut Io,
        cancel: &CancellationToken,
        dashboard: Option<&Dashboard>,
    ) -> Outcome {
        match self {
            Workload::Http(p) => run_http_plan(p, command_line, io, cancel, dashboard),
            Workload::Ddp(p) => run_ddp_plan(p, command_line, io, cancel, dashboard),
        }
    }
}

/// What running a workload left: the exit code, and the result document when it ran.
pub struct Outcome {
    pub code: i32,
    pub doc: Option<Doc>,
}

impl Outcome {
    fn failed(code: i32) -> Outcome {
        Outcome { code, doc: None }
    }
}

/// Starts the server if `--spawn` asked for it; the error is written and mapped to exit 3.
fn spawn_server(
    server: &plan::ServerPlan,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<Option<crate::monitor::spawn::Spawned>, i32> {
    let Some(spawn) = &server.spawn else { return Ok(None) };
    match crate::monitor::spawn::start(spawn, cancel) {
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            Err(exit::RUN)
        }
    }
}

/// Whether a run draws its progress: on a terminal, unless quiet; a run of a series (bench,
/// capacity: quiet so as not to print its own summary) still shows where it is.
fn shows_progress(io: &Io, quiet: bool) -> bool {
    io.live && (!quiet || !io.stage.is_empty())
}

/// What the watched processes and bolide itself did during a run.
struct Watch {
    monitor: Vec<crate::monitor::MonitorResult>,
    scrape: Vec<crate::monitor::scrape::ScrapeResult>,
    generator: crate::monitor::generator::GeneratorResult,
}

/// Starts the server if `--spawn` asked for it, checks `reachable`, runs `load` with the server and
/// bolide watched, then stops the server. Err is the exit code of a run that could not start or
/// whose engine failed (the reason already written).
fn watched<T, E: std::fmt::Display>(
    server: &plan::ServerPlan,
    spread: &plan::Spread,
    quiet: bool,
    io: &mut Io,
    cancel: &CancellationToken,
    reachable: impl FnOnce(&mut Io) -> bool,
    load: impl FnOnce(&crate::monitor::Monitor) -> Result<T, E>,
) -> Result<(T, Watch), i32> {
    // The Monti endpoint listens before the server starts, so that its agent finds it at once.
    let monti = match &server.monti {
        Some((addr, credentials)) => {
            match crate::monitor::monti::Monti::start(*addr, credentials.clone(), server.scrape_limit) {
                Ok(m) => Some(m),
                Err(e) => {
                    let _ = writeln!(io.err, "error: {e}");
                    return Err(exit::RUN);
                }
            }
        }
        None => None,
    };
    let spawned = spawn_server(server, io, cancel)?;
    if !reachable(io) {
        return Err(exit::RUN);
    }
    if let Some(at) = spread.start_at {
        if !wait_for_start(at, spread.segment, quiet, io, cancel) {
            stop_server(spawned, &[], io);
            return Err(exit::RUN);
        }
    }
    let mut monitor = crate::monitor::start_for(&server.monitors, spawned.as_ref(), server.interval, &mut *io.err);
    let matcher = server.scrape_match.as_deref().and_then(|m| regex::Regex::new(m).ok());
    let scraping = crate::monitor::scrape::Scraping::start(
        &server.scrapes,
        matcher.as_ref(),
        server.scrape_limit,
        server.interval,
    );
    monitor.scraped =
        crate::monitor::ServerSeries { scraped: scraping.live(), monti: monti.as_ref().map(|m| m.live()) };
    if let Some(m) = &monti {
        m.begin();
    }
    let out = load(&monitor);
    let (processes, own) = monitor.finish_all();
    let mut scrape = scraping.finish();
    for s in scrape.iter().filter(|s| s.t.is_empty()) {
        let why = s.last_error.as_deref().unwrap_or("no answer");
        let _ = writeln!(io.err, "warning: --scrape {}={}: never read ({why})", s.name, s.url);
    }
    if let Some(m) = monti {
        let (r, warning) = m.finish();
        if let Some(w) = warning {
            let _ = writeln!(io.err, "warning: {w}");
        }
        if r.scrapes == 0 {
            let refused = r.last_error.as_ref().map(|e| format!(" ({} refused, the last: {e})", r.errors));
            let _ = writeln!(
                io.err,
                "warning: --monti {}: no metrics came from a Monti agent during the run{}; is the app's \
                 MONTI_OPTIONS_ENDPOINT {} ?",
                r.url.trim_start_matches("http://"),
                refused.unwrap_or_default(),
                r.url
            );
        }
        scrape.push(r);
    }
    stop_server(spawned, &processes, io);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return Err(exit::RUN);
        }
    };
    Ok((out, Watch { monitor: processes.iter().map(Into::into).collect(), scrape, generator: own.result() }))
}

/// Waits for `--start-at`, saying so; false when stopped first. A start already past is made at
/// once, with a warning when it is late enough to shift this instance's timeline.
fn wait_for_start(
    at: std::time::SystemTime,
    segment: Option<crate::segment::Segment>,
    quiet: bool,
    io: &mut Io,
    cancel: &CancellationToken,
) -> bool {
    use crate::segment::{wait_until, Waited};
    let when = humantime::format_rfc3339_seconds(at);
    let who = segment.map(|s| format!("segment {s}: ")).unwrap_or_default();
    if let Some(left) = at.duration_since(std::time::SystemTime::now()).ok().filter(|_| !quiet) {
        let _ = writeln!(io.err, "{who}waiting for the shared start at {when} (in {:.1} s)", left.as_secs_f64());
    }
    match wait_until(at, &|| cancel.is_cancelled()) {
        Waited::Cancelled => {
            let _ = writeln!(io.err, "{who}stopped before the shared start at {when}; nothing was measured");
            false
        }
        Waited::Started { late } => {
            if late >= Duration::from_millis(500) {
                let _ = writeln!(
                    io.err,
                    "warning: {who}started {:.1} s after the shared start at {when}; its timeline is shifted against \
                     the other segments' (start them earlier or give a later --start-at)",
                    late.as_secs_f64()
                );
            }
            true
        }
    }
}

/// Stops the spawned server, if any, and says so when it had died during the run.
fn stop_server(spawned: Option<crate::monitor::spawn::Spawned>, watched: &[crate::monitor::Watched], io: &mut Io) {
    if let Some(s) = spawned {
        if let Some(t) = watched.iter().find(|w| w.pid == s.pid).and_then(|w| w.vanished_s) {
            let _ = writeln!(io.err, "warning: the spawned server was gone {t:.1} s into the run{}", s.tail());
        }
        s.stop();
    }
}

fn run_http_plan(
    plan: &HttpPlan,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&Dashboard>,
) -> Outcome {
    let urls: Vec<String> = plan.targets.iter().map(|t| t.url.clone()).collect();
    let announced = announce(io, plan.quiet, plan.json.as_deref(), &crate::report::term::header(&plan.settings, &urls));
    let bar = progress::http_bar(shows_progress(io, plan.quiet), &io.stage, plan.stop.time, plan.stop.count);
    let stage = live_title(&io.stage, &command_line);
    let mut exporters = exporters(&plan.exports, plan.label.as_deref(), plan.spread.segment, &urls);
    let run = watched(
        &plan.server,
        &plan.spread,
        plan.quiet,
        io,
        cancel,
        |_| true,
        |monitor| {
            let mut timeline = Vec::new();
            let out = engine::run(plan, cancel, &mut |p: &engine::Progress| {
                progress::http_update(&bar, p);
                hand_over(&mut exporters, monitor, |e| e.http_second(&p.second));
                if let Some(d) = dashboard {
                    timeline.push(p.second.clone());
                    let timeline = timeline.clone();
                    feed(d, monitor, &stage, progress::http_line(p), move |monitor, generator| {
                        let doc =
                            crate::stats::result::ResultDoc { timeline, monitor, generator, ..Default::default() };
                        Doc::Http(Box::new(doc))
                    });
                }
            });
            bar.clear();
            out
        },
    );
    let (output, watch) = match run {
        Ok(r) => r,
        Err(code) => return Outcome::failed(code),
    };
    let mut doc = document::http(plan, &output, command_line);
    if !exporters.is_empty() {
        for e in &mut exporters {
            e.rest_http(&output.timeline);
        }
        for r in crate::export::finish(exporters) {
            doc.outputs.push(delivered(io, r));
        }
        // The seconds' histograms and breakdowns were for the receivers; a segment's document
        // keeps the histograms for merge.
        for s in &mut doc.timeline {
            s.detail = None;
            if plan.spread.segment.is_none() {
                s.latency_histogram = None;
            }
        }
    }
    doc.monitor = watch.monitor;
    doc.scrape = watch.scrape;
    let mut generator = watch.generator;
    generator.set_cpu(output.cpu_ns, doc.summary.finished(), false);
    doc.generator = Some(generator);
    doc.label = plan.label.clone();
    let mut doc = Doc::Http(Box::new(doc));
    let held = crate::stats::verdict::record(&mut doc, &plan.thresholds);
    let first_errors = output.merged.first_errors.iter().map(|(c, d)| (c.name(), d.as_str()));
    let mut code = match present(io, plan.quiet, plan.json.as_deref(), &shown(&doc, announced), first_errors, &doc) {
        false => exit::RUN,
        true if !held => exit::THRESHOLDS,
        true => exit::OK,
    };
    let mut gnuplot_written = false;
    if let Some(path) = &plan.gnuplot {
        let assembled = match &output.gnuplot_error {
            // The result document above is written regardless.
            Some(e) => Err(std::io::Error::other(e.clone())),
            None => gnuplot::assemble(path, &output.gnuplot_parts),
        };
        gnuplot_written = assembled.is_ok();
        match assembled {
            Ok(()) if !plan.quiet => {
                let human =
                    if plan.json.as_deref().is_some_and(crate::files::is_stdout) { &mut *io.err } else { &mut *io.out };
                let _ = writeln!(human, "Per-request data (ab -g layout): {}", path.display());
            }
            Ok(()) => {}
            Err(e) => {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
                code = exit::RUN;
            }
        }
    }
    let requests = plan.gnuplot.as_deref().filter(|_| gnuplot_written);
    if !write_html(io, plan.quiet, plan.json.as_deref(), plan.html.as_deref(), &doc, requests) {
        code = exit::RUN;
    }
    if !write_csv(io, plan.csv.as_deref(), &doc) {
        code = exit::RUN;
    }
    Outcome { code, doc: Some(doc) }
}

/// The HTML report of one run; with `requests` (the per-request file of `--gnuplot`), every
/// request's response time as well.
pub fn run_page(doc: &Doc, requests: Option<&Path>) -> String {
    let title = format!("bolide {}: {}", doc.workload(), doc.started_at());
    let mut section = crate::report::html::run_section(doc, &doc.workload());
    if let Some(requests) = requests {
        crate::report::html::add_requests(&mut section, requests);
    }
    crate::report::html::page(&title, &[section])
}

/// Writes the HTML report of one run to `path`, whole or not at all; false when it could not be
/// written (the reason is on stderr). With `requests` (the per-request file of `--gnuplot`), the
/// report shows every request's response time as well.
fn write_html(
    io: &mut Io,
    quiet: bool,
    json: Option<&Path>,
    path: Option<&Path>,
    doc: &Doc,
    requests: Option<&Path>,
) -> bool {
    let Some(path) = path else { return true };
    let page = run_page(doc, requests);
    match crate::files::write_atomically(path, |w| w.write_all(page.as_bytes())) {
        Ok(()) => {
            if !quiet {
                // With `--json -`, stdout carries the document only.
                let human = if json.is_some_and(crate::files::is_stdout) { &mut *io.err } else { &mut *io.out };
                let _ = writeln!(human, "HTML report: {}", path.display());
            }
            true
        }
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            false
        }
    }
}

/// Shows the run: the summary (unless quiet), the first error of each class (always, on stderr),
/// and the result document, written whole or not at all to `json`. With `--json -` the document
/// is what goes to stdout, and the summary goes to stderr. False when the document could not be
/// written (the reason is on stderr).
/// Prints what a run will do before it starts (as wrk prints "Running 8s test @ URL"), on its
/// own (a run of bench, capacity or the demo has its stage line instead); true when printed.
fn announce(io: &mut Io, quiet: bool, json: Option<&Path>, line: &str) -> bool {
    if quiet || !io.stage.is_empty() {
        return false;
    }
    if json.is_some_and(crate::files::is_stdout) {
        let _ = writeln!(io.err, "{line}");
    } else {
        let _ = writeln!(io.out, "{line}");
        let _ = io.out.flush();
    }
    true
}

/// The summary to print at the end: without its first line (what the run did) when that was
/// printed before the run.
fn shown(doc: &Doc, announced: bool) -> String {
    let summary = crate::report::summary(doc);
    match summary.split_once('\n') {
        Some((_, rest)) if announced => rest.to_string(),
        _ => summary,
    }
}

fn present<'e>(
    io: &mut Io,
    quiet: bool,
    json: Option<&Path>,
    summary: &str,
    first_errors: impl Iterator<Item = (&'e str, &'e str)>,
    doc: &Doc,
) -> bool {
    let to_stdout = json.is_some_and(crate::files::is_stdout);
    if !quiet {
        if to_stdout {
            let _ = write!(io.err, "{summary}");
        } else {
            let _ = write!(io.out, "{}", progress::paint(summary, io.color));
        }
    }
    for (class, detail) in first_errors {
        let _ = writeln!(io.err, "first {class} error: {detail}");
    }
    // Quiet, a broken threshold still says why the exit code is 1 (on stderr, as errors are).
    if quiet && doc.thresholds().iter().any(|t| !t.ok) {
        let suspect = doc.generator().and_then(|g| g.suspect.as_deref());
        let _ = write!(io.err, "{}", crate::report::term::threshold_rows(doc.thresholds(), suspect));
    }
    let Some(path) = json else { return true };
    match crate::files::write_json(path, &mut *io.out, doc) {
        Ok(()) if to_stdout => true,
        Err(e) if to_stdout => {
            let _ = writeln!(io.err, "error: cannot write the result document to stdout: {e}");
            false
        }
        Ok(()) => {
            if !quiet {
                let _ = writeln!(io.out, "\nResult document: {}", path.display());
            }
            true
        }
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            false
        }
    }
}

/// Sends the dashboard the run so far: `doc` makes the partial document (the timeline so far, with
/// what the monitor sampled), on the dashboard's thread.
fn feed(
    d: &Dashboard,
    monitor: &crate::monitor::Monitor,
    stage: &str,
    line: String,
    doc: impl FnOnce(Vec<crate::monitor::MonitorResult>, Option<crate::monitor::generator::GeneratorResult>) -> Doc
        + Send
        + 'static,
) {
    let (processes, own) = monitor.snapshot();
    let scraped = monitor.scraped.clone();
    let stage = stage.to_string();
    d.update(move || {
        let mut doc = doc(processes, Some(own));
        doc.set_scrape(scraped.snapshot());
        vec![crate::report::html::live_section(&doc, &stage, line)]
    });
}

/// The title of a run's section on the live dashboard: the outer command's stage, or the
/// command line.
fn live_title(stage: &str, command_line: &[String]) -> String {
    if stage.is_empty() {
        std::iter::once("bolide").chain(command_line.iter().skip(1).map(String::as_str)).collect::<Vec<_>>().join(" ")
    } else {
        stage.to_string()
    }
}

/// Ties each target of a run over several to the watched process on its port (`--monitor
/// NAME=:PORT`), when the target is on this machine, so that its CPU and RAM show beside its load.
fn tie_monitors(plan: &DdpPlan, doc: &mut crate::stats::vu::DdpDoc) {
    for (t, summary) in plan.targets.iter().zip(&mut doc.per_target) {
        let local = t.endpoint.addrs.iter().any(|a| a.ip().is_loopback());
        let tied = plan
            .server
            .monitors
            .iter()
            .find(|(_, spec)| local && matches!(spec, crate::monitor::Spec::Port(p) if *p == t.endpoint.port));
        summary.monitor = tied.map(|(name, _)| name.clone());
    }
}

/// Runs a validated DDP plan and reports it.
fn run_ddp_plan(
    plan: &DdpPlan,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&Dashboard>,
) -> Outcome {
    // Nothing is measured against a target nobody answers at: every one must answer.
    let reachable = |io: &mut Io| {
        let mut all = true;
        for t in &plan.targets {
            let addrs = &t.endpoint.addrs;
            let up = addrs.iter().any(|a| std::net::TcpStream::connect_timeout(a, Duration::from_secs(5)).is_ok());
            if !up {
                let url = crate::redact::text(&t.url);
                let _ = writeln!(io.err, "error: nothing answers at {url} ({addrs:?}); is the server running?");
                all = false;
            }
        }
        all
    };
    let line = format!(
        "{}, arrivals over {}",
        crate::report::ddp::header(&document::settings(plan)),
        progress::eta(plan.arrivals_length())
    );
    let announced = announce(io, plan.quiet, plan.json.as_deref(), &line);
    let bar = progress::ddp_bar(shows_progress(io, plan.quiet), &io.stage, plan.arrivals_length());
    let stage = live_title(&io.stage, &command_line);
    let urls: Vec<String> = plan.targets.iter().map(|t| t.url.clone()).collect();
    let mut exporters = exporters(&plan.exports, plan.label.as_deref(), plan.spread.segment, &urls);
    let run = watched(&plan.server, &plan.spread, plan.quiet, io, cancel, reachable, |monitor| {
        let mut timeline = Vec::new();
        let out = crate::engine::vu::run(plan, cancel, &mut |p: &crate::engine::vu::VuProgress| {
            progress::ddp_update(&bar, p);
            hand_over(&mut exporters, monitor, |e| e.ddp_second(&p.second));
            if let Some(d) = dashboard {
                timeline.push(p.second.clone());
                let timeline = timeline.clone();
                feed(d, monitor, &stage, progress::ddp_line(p), move |monitor, generator| {
                    let doc = crate::stats::vu::DdpDoc { timeline, monitor, generator, ..Default::default() };
                    Doc::Ddp(Box::new(doc))
                });
            }
        });
        bar.clear();
        out
    });
    let (output, watch) = match run {
        Ok(r) => r,
        Err(code) => return Outcome::failed(code),
    };
    let mut doc = document::ddp(plan, &output, command_line);
    if !exporters.is_empty() {
        for e in &mut exporters {
            e.rest_ddp(&output.timeline);
        }
        for r in crate::export::finish(exporters) {
            doc.outputs.push(delivered(io, r));
        }
        // The seconds' histograms were for the receiver; a segment's document keeps them for merge.
        if plan.spread.segment.is_none() {
            for s in &mut doc.timeline {
                let all = s.latency.iter_mut().chain(s.step_latency.values_mut());
                for l in all.chain(s.reactive.iter_mut()).chain(s.fanout.iter_mut()) {
                    l.histogram = None;
                }
            }
        }
    }
    doc.monitor = watch.monitor;
    doc.scrape = watch.scrape;
    tie_monitors(plan, &mut doc);
    let mut generator = watch.generator;
    generator.set_cpu(output.cpu_ns, doc.summary.messages_in + doc.summary.messages_out, true);
    doc.generator = Some(generator);
    doc.label = plan.label.clone();
    let mut doc = Doc::Ddp(Box::new(doc));
    let held = crate::stats::verdict::record(&mut doc, &plan.thresholds);
    let first_errors = output.rec.first_errors.iter().map(|(c, d)| (c.as_str(), d.as_str()));
    let mut code = match present(io, plan.quiet, plan.json.as_deref(), &shown(&doc, announced), first_errors, &doc) {
        false => exit::RUN,
        true if !held => exit::THRESHOLDS,
        true => exit::OK,
    };
    if !write_html(io, plan.quiet, plan.json.as_deref(), plan.html.as_deref(), &doc, None) {
        code = exit::RUN;
    }
    if !write_csv(io, plan.csv.as_deref(), &doc) {
        code = exit::RUN;
    }
    Outcome { code, doc: Some(doc) }
}

/// The senders of `--out prometheus-rw=URL` and `--out otlp=URL` for a run: its series carry
/// `testid`, `label` (a bench series'), `target` (the URL, when one) and `segment`; a run of
/// several URLs sends each one's series too.
fn exporters(
    exports: &[(crate::export::Kind, url::Url)],
    label: Option<&str>,
    segment: Option<crate::segment::Segment>,
    urls: &[String],
) -> Vec<crate::export::Exporter> {
    let mut extra = Vec::new();
    if let Some(l) = label.filter(|l| !l.is_empty()) {
        extra.push(("label".to_string(), l.to_string()));
    }
    if let [one] = urls {
        extra.push(("target".to_string(), crate::export::target_label(one)));
    }
    if let Some(s) = segment {
        extra.push(("segment".to_string(), s.to_string()));
    }
    let several = if urls.len() > 1 { urls.to_vec() } else { Vec::new() };
    let testid = testid(label);
    exports
        .iter()
        .map(|(kind, u)| {
            crate::export::Exporter::start(*kind, u.clone(), testid.clone(), extra.clone(), several.clone())
        })
        .collect()
}

/// Hands a run's second to its outputs (`give`), with the watched processes and the server's
/// series as last read.
fn hand_over(
    exporters: &mut [crate::export::Exporter],
    monitor: &crate::monitor::Monitor,
    give: impl Fn(&mut crate::export::Exporter),
) {
    if exporters.is_empty() {
        return;
    }
    let watched = monitor.snapshot().0;
    let scraped = monitor.scraped.snapshot();
    for e in exporters {
        e.watch(&watched);
        e.scraped(&scraped);
        give(e);
    }
}

/// Says when seconds were not delivered; hands the result back.
fn delivered(io: &mut Io, r: crate::export::OutputResult) -> crate::export::OutputResult {
    if r.dropped > 0 {
        let why = r.last_error.as_deref().unwrap_or("no answer");
        let _ = writeln!(
            io.err,
            "warning: --out {}={}: {} of {} seconds not delivered ({why}); the run's own figures are whole",
            r.kind, r.url, r.dropped, r.seconds
        );
    }
    r
}

/// The `testid` label of a run's remote-written series: its label (a bench series'), else
/// `BOLIDE_TESTID`, else `bolide-` and the start time.
fn testid(label: Option<&str>) -> String {
    if let Some(l) = label.filter(|l| !l.is_empty()) {
        return l.to_string();
    }
    if let Some(t) = std::env::var("BOLIDE_TESTID").ok().filter(|t| !t.trim().is_empty()) {
        return t.trim().to_string();
    }
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    format!("bolide-{}", now.replace([':', '-'], ""))
}

/// `--out csv=PATH`: the run's seconds as CSV; false (said) when it cannot be written.
fn write_csv(io: &mut Io, path: Option<&Path>, doc: &Doc) -> bool {
    let Some(path) = path else { return true };
    match crate::report::csv::write(path, &crate::report::csv::rows(doc, "1")) {
        Ok(()) => true,
        Err(e) => {
            let _ = writeln!(io.err, "error: --out csv: {e}");
            false
        }
    }
}

//! The run lifecycle that `http`, `run`, `bench`, `capacity` and `demo` share, once for every
//! workload: start the server (`--spawn`), check the target, run the engine with the server and
//! bolide itself watched, stop the server, assemble the result document (the workload's part,
//! then the envelope), print the summary and write the files ([`artifacts`]). A [`Workload`] is
//! a validated plan of either kind; [`Workload::execute`] runs it once.

pub mod artifacts;

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::console::{exit, Io};
use crate::dashboard::Dashboard;
use crate::plan;
use crate::problem::Problem;
use crate::stats::doc::Doc;
use crate::stats::envelope::Enveloped;
use crate::workload::{Part, Workload};

impl Workload {
    /// Runs it once, feeding `dashboard` (when the command serves one) every second; its
    /// verdicts go to `--junit`, whether it ran or not.
    pub fn execute(
        &self,
        command_line: Vec<String>,
        io: &mut Io,
        cancel: &CancellationToken,
        dashboard: Option<&Dashboard>,
    ) -> Outcome {
        let started = std::time::SystemTime::now();
        let mut outcome = match self {
            Workload::Http(p) => run(&**p, command_line.clone(), io, cancel, dashboard),
            Workload::Ddp(p) => run(&**p, command_line.clone(), io, cancel, dashboard),
        };
        outcome.code =
            artifacts::verdicts(io, self.common(), outcome.doc.as_ref(), outcome.code, &command_line, started);
        outcome
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
            Problem::new(e.to_string()).print(io.err);
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
    /// The faults seeded into the run, as they happened.
    faults: Vec<crate::fault::FaultRecord>,
    monitor: Vec<crate::monitor::MonitorResult>,
    scrape: Vec<crate::monitor::scrape::ScrapeResult>,
    generator: crate::monitor::generator::GeneratorResult,
}

/// Starts the server if `--spawn` asked for it, checks `reachable`, runs `load` with the server and
/// bolide watched, then stops the server. Err is the exit code of a run that could not start or
/// whose engine failed (the reason already written).
#[allow(clippy::too_many_arguments)]
fn watched<T, E: std::fmt::Display>(
    server: &plan::ServerPlan,
    faults: &crate::fault::Faults,
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
                    e.print(io.err);
                    return Err(exit::RUN);
                }
            }
        }
        None => None,
    };
    let mut spawned = spawn_server(server, io, cancel)?;
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
    let follower = monitor.follower();
    let follow = |pid: u32| follower.follow("server", pid);
    let (out, faults) = faults.run(&mut spawned, server.spawn.as_ref(), cancel, &follow, || load(&monitor));
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
            Problem::new(e.to_string()).print(io.err);
            return Err(exit::RUN);
        }
    };
    Ok((out, Watch { faults, monitor: processes.iter().map(Into::into).collect(), scrape, generator: own.result() }))
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

/// One run of any workload, the same stages for every protocol: say what it will do, start the
/// server and the watchers, run the engine (each second to the bar, the outputs and the live
/// page), stop, assemble the document (the workload's part, then the envelope: outputs, watched
/// processes, scraped series, bolide's own load, label, thresholds), show it, write its files.
fn run<W: Part>(
    w: &W,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&Dashboard>,
) -> Outcome {
    let c = w.common();
    let announced = announce(io, c.quiet, c.json.as_deref(), &w.header());
    let bar = w.bar(shows_progress(io, c.quiet), &io.stage);
    let stage = live_title(&io.stage, &command_line);
    let mut exporters = exporters(&c.exports, c.label.as_deref(), c.spread.segment, &w.urls());
    let run = watched(
        &c.server,
        &w.faults(),
        &c.spread,
        c.quiet,
        io,
        cancel,
        |io| w.reachable(io),
        |monitor| {
            let mut timeline = Vec::new();
            let out = w.run(cancel, &mut |tick: &W::Tick| {
                W::show(&bar, tick);
                let second = W::second(tick);
                hand_over(&mut exporters, monitor, |e| W::export(e, second));
                if let Some(d) = dashboard {
                    timeline.push(second.clone());
                    let timeline = timeline.clone();
                    feed(d, monitor, &stage, W::line(tick), move || W::live(timeline).into());
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
    let mut doc = w.document(&output, command_line);
    W::record_faults(&mut doc, &output, watch.faults);
    let mut outputs = Vec::new();
    if !exporters.is_empty() {
        for e in &mut exporters {
            W::export_rest(e, &output);
        }
        outputs = crate::export::finish(exporters).into_iter().map(|r| delivered(io, r)).collect();
        w.strip_for_document(&mut doc);
    }
    let mut generator = watch.generator;
    let (work, messages) = W::work(&doc);
    generator.set_cpu(W::cpu_ns(&output), work, messages);
    let envelope = doc.envelope_mut();
    *envelope.outputs = outputs;
    *envelope.monitor = watch.monitor;
    *envelope.scrape = watch.scrape;
    *envelope.generator = Some(generator);
    envelope.label.clone_from(&c.label);
    let mut doc: Doc = doc.into();
    let held = crate::stats::verdict::record(&mut doc, &c.thresholds);
    let first_errors = W::first_errors(&output);
    let first_errors = first_errors.iter().map(|(c, d)| (c.as_str(), d.as_str()));
    let code = match present(io, c.quiet, c.json.as_deref(), &shown(&doc, announced), first_errors, &doc) {
        false => exit::RUN,
        true => crate::stats::verdict::exit_code(&doc, held),
    };
    let code = artifacts::after_run(io, c, &doc, w.extra_files(&output).map_err(Problem::from), code);
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
    let out = artifacts::human(io, json);
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
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
            let _ = write!(io.out, "{}", crate::report::progress::paint(summary, io.color));
        }
    }
    for (class, detail) in first_errors {
        let _ = writeln!(io.err, "first {class} error: {detail}");
    }
    // Quiet, a failed or incomplete audit still says why the exit code is 1 or 4.
    if let Some(a) =
        doc.ddp().and_then(|d| d.audit.as_ref()).filter(|a| quiet && a.outcome != crate::stats::audit::Outcome::Passed)
    {
        let _ = writeln!(io.err, "audit {}", a.line());
    }
    // Quiet, a broken threshold still says why the exit code is 1 (on stderr, as errors are).
    if quiet && doc.thresholds().iter().any(|t| !t.ok) {
        let suspect = doc.generator().and_then(|g| g.suspect.as_deref());
        let _ = write!(io.err, "{}", crate::report::term::threshold_rows(doc.thresholds(), suspect));
    }
    match artifacts::document(io, quiet, json, doc) {
        Ok(()) => true,
        Err(p) => {
            p.print(io.err);
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
    doc: impl FnOnce() -> Doc + Send + 'static,
) {
    let (processes, own) = monitor.snapshot();
    let scraped = monitor.scraped.clone();
    let stage = stage.to_string();
    d.update(move || {
        let mut doc = doc();
        let envelope = doc.envelope_mut();
        *envelope.monitor = processes;
        *envelope.generator = Some(own);
        *envelope.scrape = scraped.snapshot();
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

//! The commands that run load many times over: `bench` (the same workload N times, here),
//! `capacity` (rising levels until the server fails), `demo` and `demo cluster` (the Meteor
//! benchmark and the Cluster test on reference servers). Each run is one `lifecycle::Workload`;
//! what they print and compare comes from `results`, which reads the documents they write and
//! never calls back here.

pub mod capacity;
pub mod cluster;
pub mod demo;
pub mod levels;
pub mod params;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::console::{exit, Failed, Io};
use crate::problem::Problem;
use crate::report::table::{meteor_bytes, meteor_cpu, meteor_time, ms, Table};
use crate::results::{runs_table, table_notes, watched_names, BenchSummary, RunEntry, SUMMARY_FORMAT};
use crate::workload::Workload;

/// Reads a pause that may be zero (`0`, `10s`).
pub fn parse_pause(flag: &str, text: &str) -> Result<Duration, Problem> {
    if text.trim().parse::<f64>() == Ok(0.0) {
        return Ok(Duration::ZERO);
    }
    crate::plan::read_duration(flag, text)
}

/// Room a series leaves around each run of a shared schedule (`--start-at`) beside its planned
/// length and cooldown: starting and stopping a server, the last responses, the files.
pub const SLOT_MARGIN: Duration = Duration::from_secs(10);

/// With `--start-at T`, when run (or level) `i` (1-based) of a series starts on every instance:
/// T + (i - 1) x (the planned length + cooldown + [`SLOT_MARGIN`], in whole seconds), so that
/// segments on several machines run each level together. Err when runs have no planned length.
pub fn shared_starts(
    base: Option<std::time::SystemTime>,
    runs: usize,
    planned: Option<Duration>,
    cooldown: Duration,
) -> Result<Vec<Option<std::time::SystemTime>>, Problem> {
    let Some(base) = base else { return Ok(vec![None; runs]) };
    if runs <= 1 {
        return Ok(vec![Some(base)]);
    }
    let planned = planned.ok_or(Problem::new(
        "--start-at with several runs needs runs of a planned length (-d/--duration), not a request count (-n): \
         each run starts at its own shared time",
    ))?;
    let slot = Duration::from_secs((planned + cooldown + SLOT_MARGIN).as_secs_f64().ceil() as u64);
    Ok((0..runs).map(|i| Some(base + slot * i as u32)).collect())
}

/// Sleeps `d` (a cooldown) unless stopped first, counting it on a terminal's progress bar; false
/// when stopped.
pub fn pause(d: Duration, io: &Io, cancel: &CancellationToken) -> bool {
    crate::report::progress::pause(io.live, &io.stage, d, cancel)
}

/// The progress stage of part `i` of `n` under `outer`, with the time left when it can be told:
/// the parts done so far took `spent` (excluding pauses) or each is planned to take `planned`, and
/// a `pause` comes before every part but the first.
pub fn stage(
    outer: &str,
    what: &str,
    (i, n): (usize, usize),
    spent: Duration,
    planned: Option<Duration>,
    pause: Duration,
) -> String {
    let done = i.saturating_sub(1);
    let each = if done > 0 { Some(spent / done as u32) } else { planned };
    let left = (n + 1).saturating_sub(i);
    let pauses = if i <= 1 { left.saturating_sub(1) } else { left };
    let eta = each
        .map(|e| format!(", ETA {}", crate::report::progress::eta(e * left as u32 + pause * pauses as u32)))
        .unwrap_or_default();
    format!("{outer}{what} {i}/{n}{eta}")
}

/// The default label: the start time.
pub fn default_label() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-21T10:15:00Z -> run-20261121-101500
    let digits: String = now.chars().filter(|c| c.is_ascii_digit()).collect();
    format!("run-{}-{}", &digits[..8], &digits[8..14])
}

/// One series of a `bench`: a value of the parameter list (or the only one), its directory, and
/// what its runs gave so far.
struct Line {
    label: String,
    dir: std::path::PathBuf,
    workload: Workload,
    slug: String,
    runs: Vec<RunEntry>,
    done: Vec<crate::stats::doc::Measures>,
    done_lines: String,
    watched: String,
    csv_rows: String,
    command_line: Vec<String>,
}

/// A series to run: its label (None for a bench of one), its workload, and its command line as
/// recorded.
pub type Variant = (Option<String>, Workload, Vec<String>);

/// The order of the series in round `round` (1-based) of an interleaved bench: forward in odd
/// rounds, backward in even ones (A B, B A, A B, ...), so that no value always runs first, on a
/// colder or warmer machine.
pub fn round_order(round: u32, series: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..series).collect();
    if round.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// `bolide bench`: the workload `opts.runs` times, documents and a summary into the out
/// directory, the Meteor table on stdout. Ctrl-C keeps (and reports) the runs already done.
pub fn bench(
    workload: Workload,
    opts: &crate::cli::BenchOpts,
    junit: Option<&Path>,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<i32, Failed> {
    bench_series(vec![(None, workload, command_line)], opts, junit, io, cancel)
}

/// A bench planned: its series, and what every run of it shares. Made by [`plan_series`], which
/// checks everything before the first run.
struct Series {
    lines: Vec<Line>,
    /// Several series (`--parameter-list`), compared at the end.
    grid: bool,
    label: String,
    /// The out directory (each series' under it with a grid).
    top: std::path::PathBuf,
    cooldown: Duration,
    /// With `--start-at`, each run's shared start, in the order they run.
    starts: Vec<Option<std::time::SystemTime>>,
    /// Runs planned, every series' together.
    total: usize,
    /// `--json`: the summary document.
    json: Option<std::path::PathBuf>,
    /// `--html`: the series' report.
    html: Option<std::path::PathBuf>,
    title: String,
    /// The first series' command line (the JUnit file of a bench where no run started).
    first_command: Vec<String>,
}

/// What the rounds left: each run's verdicts (for `--junit`), the exit code so far, and whether a
/// run that could not complete stopped the series.
struct Rounds {
    suites: Vec<crate::report::junit::Suite>,
    code: i32,
    stopped: bool,
}

/// `bolide bench` of one workload (`label` None) or of each value of `--parameter-list` (`label`
/// `NAME=value`, each its own series in a directory of that name under the out directory): the
/// runs interleaved round by round ([`round_order`]), and with several series, every one compared
/// with the baseline at the end as `compare` does (gate and exit codes included). Err: the
/// problems that refused it before anything ran.
pub fn bench_series(
    variants: Vec<Variant>,
    opts: &crate::cli::BenchOpts,
    junit: Option<&Path>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<i32, Failed> {
    let Some(dashboard_addr) = variants.first().map(|(_, w, _)| w.common().dashboard) else {
        return Err(Failed::usage(Vec::<Problem>::new()));
    };
    let mut s = plan_series(variants, opts)?;
    let dashboard = match crate::dashboard::start_for(dashboard_addr, &s.title, io) {
        Ok(d) => d,
        Err(code) => return Ok(code),
    };
    // The comparison made at the end, for the live page's last report too.
    let mut compared = None;
    // The series; its every way out comes back here, so that the dashboard shows how it ended.
    let json = s.json.clone();
    let code = crate::console::with_document(io, json.as_deref(), |io| {
        announce(&s, opts, io);
        let rounds = run_rounds(&mut s, opts, io, cancel, dashboard.as_ref());
        let interrupted = cancel.is_cancelled();
        let code = write_rows(&s, rounds.suites, rounds.code, junit, opts, io);
        let (code, doc, comparison) = report_series(&s, opts, rounds.stopped, interrupted, code, io);
        compared = comparison;
        (code, doc)
    });
    if let Some(d) = &dashboard {
        d.finish(last_page(&s, compared));
    }
    Ok(code)
}

/// Every check before the first run, every problem at once; the series' directories made last,
/// so that a series refused for its flags leaves nothing behind.
fn plan_series(variants: Vec<Variant>, opts: &crate::cli::BenchOpts) -> Result<Series, Failed> {
    let mut problems = crate::plan::Problems::default();
    let grid = variants.len() > 1;
    let (first, first_command) = (&variants[0].1, variants[0].2.clone());
    if opts.runs == 0 {
        problems.push("--runs must be at least 1");
    }
    let cooldown = parse_pause("--cooldown", &opts.cooldown).map_err(|e| problems.push(e)).unwrap_or_default();
    let total = opts.runs as usize * variants.len();
    let starts = shared_starts(first.common().spread.start_at, total, first.planned(), cooldown)
        .map_err(|e| problems.push(e))
        .unwrap_or_default();
    let label = opts.label.clone().unwrap_or_else(default_label);
    if label.trim().is_empty() || label.contains(['/', '\\']) {
        problems.push(format!("--label {label:?} must be a plain name (no slashes)"));
    }
    let top = opts.out.clone().unwrap_or_else(|| Path::new("bolide-results").join(&label));
    // --json is the series' summary document (each run's goes into --out DIR).
    let (json, html) = (first.common().json.clone(), first.common().html.clone());
    let lines = lines(variants, &label, &top);
    check_comparison(&lines, opts, grid, &mut problems);
    if problems.is_empty() {
        make_dirs(&lines, opts.runs, &mut problems);
    }
    if !problems.is_empty() {
        return Err(Failed::usage(problems.0));
    }
    let title = format!("bolide bench: {label} ({})", lines[0].slug);
    Ok(Series { lines, grid, label, top, cooldown, starts, total, json, html, title, first_command })
}

/// Each variant as a series: its label and directory (`top`, or its own under it).
fn lines(variants: Vec<Variant>, label: &str, top: &Path) -> Vec<Line> {
    let mut lines = Vec::new();
    for (value, workload, command_line) in variants {
        let (label, dir) = match value {
            Some(v) => (v.clone(), top.join(&v)),
            None => (label.to_string(), top.to_path_buf()),
        };
        let slug = workload.slug();
        lines.push(Line {
            label,
            dir,
            workload,
            slug,
            runs: Vec::new(),
            done: Vec::new(),
            done_lines: String::new(),
            watched: String::new(),
            csv_rows: String::new(),
            command_line,
        });
    }
    lines
}

/// `--baseline`, `--fail-on` and `--detect`: for a grid, read as `compare` reads them.
fn check_comparison(lines: &[Line], opts: &crate::cli::BenchOpts, grid: bool, problems: &mut crate::plan::Problems) {
    if grid && opts.baseline.as_ref().is_some_and(|b| !lines.iter().any(|l| &l.label == b)) {
        let names: Vec<&str> = lines.iter().map(|l| l.label.as_str()).collect();
        problems.push(format!(
            "--baseline {:?} is none of the series: {}",
            opts.baseline.as_deref().unwrap_or_default(),
            names.join(", ")
        ));
    }
    for rule in &opts.fail_on {
        if let Err(e) = crate::results::gate::parse(rule) {
            problems.push(e);
        }
    }
    if let Some(d) = &opts.detect {
        if let Err(e) = crate::results::compare::parse_detect(d) {
            problems.push(e);
        }
    }
    if !grid && (opts.baseline.is_some() || !opts.fail_on.is_empty() || opts.detect.is_some()) {
        problems.push(
            "--baseline, --fail-on and --detect compare the series of a --parameter-list; a single series is \
             compared with `bolide compare` against another",
        );
    }
}

/// Each series' directory, made, and refused when it holds runs of the same workload already.
fn make_dirs(lines: &[Line], runs: u32, problems: &mut crate::plan::Problems) {
    for Line { dir, slug, .. } in lines {
        if let Err(e) = std::fs::create_dir_all(dir) {
            problems.push(format!("--out {}: cannot create it: {e}", dir.display()));
        } else if let Some(existing) = (1..=runs.max(1))
            .map(|i| dir.join(format!("{slug}-{i}.json")))
            .chain([dir.join(format!("{slug}-summary.json"))])
            .find(|p| p.exists())
        {
            problems.push(format!(
                "--out {} already holds runs of {slug} ({}); use another --out or --label, or move them away",
                dir.display(),
                existing.display()
            ));
        } else if let Err(e) = crate::files::check_writable(&dir.join(format!("{slug}-summary.json"))) {
            problems.push(e.context("--out"));
        }
    }
}

/// What the bench will do, said before the first run.
fn announce(s: &Series, opts: &crate::cli::BenchOpts, io: &mut Io) {
    let plural = if opts.runs == 1 { "" } else { "s" };
    let (slug, runs, top) = (&s.lines[0].slug, opts.runs, s.top.display());
    if s.grid {
        let names: Vec<&str> = s.lines.iter().map(|l| l.label.as_str()).collect();
        let _ = writeln!(
            io.out,
            "bolide bench: {slug}, {runs} run{plural} of each of {} ({}), interleaved, into {top}\n",
            names.len(),
            names.join(", "),
        );
    } else {
        let _ = writeln!(io.out, "bolide bench: {slug}, {runs} run{plural} labelled {:?}, into {top}\n", s.label);
    }
}

/// The runs, round by round ([`round_order`]), each after its cooldown or at its shared start,
/// until the last, a stop, or a run that could not complete.
fn run_rounds(
    s: &mut Series,
    opts: &crate::cli::BenchOpts,
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&crate::dashboard::Dashboard>,
) -> Rounds {
    let outer = io.stage.clone();
    let mut spent = Duration::ZERO;
    let mut rounds = Rounds { suites: Vec::new(), code: exit::OK, stopped: false };
    let mut started_runs = 0usize;
    'rounds: for round in 1..=opts.runs {
        for (position, which) in round_order(round, s.lines.len()).into_iter().enumerate() {
            let k = (round as usize - 1) * s.lines.len() + position;
            let line = &mut s.lines[which];
            let what = if s.grid { format!("run ({})", line.label) } else { "run".to_string() };
            io.stage = stage(&outer, &what, (k + 1, s.total), spent, line.workload.planned(), s.cooldown);
            // With a shared schedule, the wait for the run's start is its cooldown.
            let shared = s.starts.get(k).copied().flatten();
            line.workload.common_mut().spread.start_at = shared;
            if started_runs > 0 && !s.cooldown.is_zero() && shared.is_none() {
                let _ = writeln!(io.out, "  cooling down for {}", humantime::format_duration(s.cooldown));
                if !pause(s.cooldown, io, cancel) {
                    break 'rounds;
                }
            }
            if cancel.is_cancelled() {
                break 'rounds;
            }
            started_runs += 1;
            let began = Instant::now();
            let ran = run_once(line, round, (s.grid, opts.runs), io, cancel, dashboard, &mut rounds.suites);
            spent += began.elapsed();
            let Some(code) = ran else {
                let which = if s.grid { format!("{} ", line.label) } else { String::new() };
                let stops = format!("{which}run {round} of {} could not complete; the series stops here", opts.runs);
                Problem::new(stops).print(io.err);
                rounds.code = exit::RUN;
                rounds.stopped = true;
                break 'rounds;
            };
            rounds.code = rounds.code.max(code);
            if let Some(d) = dashboard {
                // Under the current run, the finished runs' values so far.
                d.keep(vec![so_far(&s.lines, &s.label, s.total)]);
            }
        }
    }
    io.stage = outer;
    rounds
}

/// Run `i` of one series: its document into the series' directory, its verdicts onto `suites`,
/// its line on the terminal and its rows for the CSV. Its exit code, or None when it could not
/// complete.
fn run_once(
    line: &mut Line,
    i: u32,
    (grid, runs): (bool, u32),
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&crate::dashboard::Dashboard>,
    suites: &mut Vec<crate::report::junit::Suite>,
) -> Option<i32> {
    let file = line.dir.join(format!("{}-{i}.json", line.slug));
    line.workload.set_output(Some(file.clone()), Some(line.label.clone()), true);
    if line.workload.part().writes_requests() {
        let tsv = line.dir.join(format!("{}-{i}.tsv", line.slug));
        line.workload.part_mut().set_requests_file(tsv);
    }
    let started = std::time::SystemTime::now();
    let outcome = line.workload.execute(line.command_line.clone(), io, cancel, dashboard);
    let mut suite = crate::report::junit::for_run(outcome.doc.as_ref(), outcome.code, &line.command_line, started);
    suite.name = format!("{} run {i} of {runs}", line.label);
    suites.push(suite);
    let run_id = if grid { format!("{} {i}", line.label) } else { i.to_string() };
    let doc = outcome.doc?;
    line.csv_rows.push_str(&crate::report::csv::rows(&doc, &run_id));
    let m = doc.measures();
    line.watched = watched_names(&doc);
    let mut entry = RunEntry::of(i, Some(file.file_name().unwrap_or_default().to_string_lossy().into_owned()), &m);
    entry.thresholds = doc.thresholds().to_vec();
    let who = if grid { format!("{} ", line.label) } else { String::new() };
    let text = format!("  {who}run {i}/{runs}: {}\n", run_line(&entry));
    let _ = write!(io.out, "{}", crate::report::progress::paint(&text, io.color));
    line.runs.push(entry);
    line.done.push(m);
    line.done_lines.push_str(&text);
    Some(outcome.code)
}

/// The live page's section under the current run: the finished runs' values so far.
fn so_far(lines: &[Line], label: &str, total: usize) -> crate::report::html::Section {
    let runs_so_far: usize = lines.iter().map(|l| l.done.len()).sum();
    crate::report::html::Section {
        title: format!("{label}: runs so far"),
        notes: vec![format!("{runs_so_far} of {total} runs finished")],
        text: lines.iter().map(|l| l.done_lines.as_str()).collect(),
        charts: crate::report::charts::across_runs(
            &lines.iter().map(|l| (l.label.clone(), l.done.clone())).collect::<Vec<_>>(),
        ),
        ..Default::default()
    }
}

/// `--out csv=PATH` (every series' rows) and `--junit` (every run's verdicts, or that none
/// started); the exit code `code`, made 3 when one could not be written.
fn write_rows(
    s: &Series,
    mut suites: Vec<crate::report::junit::Suite>,
    mut code: i32,
    junit: Option<&Path>,
    opts: &crate::cli::BenchOpts,
    io: &mut Io,
) -> i32 {
    if let Some(path) = &opts.csv {
        let rows: String = s.lines.iter().map(|l| l.csv_rows.as_str()).collect();
        if let Err(p) = crate::lifecycle::artifacts::csv(path, &rows) {
            p.print(io.err);
            code = exit::RUN;
        }
    }
    if let Some(path) = junit {
        if suites.is_empty() {
            let mut none =
                crate::report::junit::for_run(None, exit::RUN, &s.first_command, std::time::SystemTime::now());
            none.cases[0].name = "no run of the series started".into();
            suites.push(none);
        }
        if let Err(p) = crate::lifecycle::artifacts::junit(path, &suites) {
            p.print(io.err);
            code = exit::RUN;
        }
    }
    code
}

/// The end of a bench: each series' table and summary document, the comparison of a grid, the
/// HTML report; the exit code, the summary document for `--json`, and the comparison.
fn report_series(
    s: &Series,
    opts: &crate::cli::BenchOpts,
    stopped: bool,
    interrupted: bool,
    mut code: i32,
    io: &mut Io,
) -> (i32, Option<serde_json::Value>, Option<crate::results::compare::Report>) {
    let _ = writeln!(io.out);
    let finished: usize = s.lines.iter().map(|l| l.runs.len()).sum();
    if interrupted {
        let _ = writeln!(io.out, "Interrupted: {finished} of {} runs finished; they are kept and reported.\n", s.total);
    }
    if finished == 0 {
        let _ = writeln!(io.out, "No run finished; nothing to report.");
        return (if code == exit::OK { exit::RUN } else { code }, None, None);
    }
    let mut summaries = Vec::new();
    for line in &s.lines {
        let Some(summary) = summarize(line, opts, interrupted, s.grid, &mut code, io) else { continue };
        summaries.push(summary);
    }
    let _ = writeln!(io.out, "\nResult documents and summary: {}", s.top.display());
    let dirs: Vec<std::path::PathBuf> = s.lines.iter().filter(|l| !l.runs.is_empty()).map(|l| l.dir.clone()).collect();
    let comparison = compare_series(s, &dirs, opts, stopped, &mut code, io);
    if let Some(path) = &s.html {
        let ok = match s.grid {
            true => crate::results::report::write_compared_report(&dirs, comparison.clone(), path, &s.title, io),
            false => crate::results::report::write_dir_report(&s.top, path, &s.title, io),
        };
        if !ok {
            code = exit::RUN;
        }
    }
    let doc = match s.grid {
        false => serde_json::to_value(&summaries[0]).ok(),
        true => Some(serde_json::json!({
            "format": "bolide.bench-parameters",
            "version": 1,
            "series": summaries,
            "comparison": comparison,
        })),
    };
    (code, doc, comparison)
}

/// One series' table, notes and thresholds on the terminal, and its summary document beside its
/// runs' (`code` made 3 when it cannot be written); None when no run of it finished.
fn summarize(
    line: &Line,
    opts: &crate::cli::BenchOpts,
    interrupted: bool,
    grid: bool,
    code: &mut i32,
    io: &mut Io,
) -> Option<BenchSummary> {
    let summary = BenchSummary {
        format: SUMMARY_FORMAT.into(),
        version: 1,
        label: line.label.clone(),
        workload: line.slug.clone(),
        command_line: line.command_line.clone(),
        runs_planned: opts.runs,
        interrupted,
        mean: RunEntry::mean_of(&line.runs),
        runs: line.runs.clone(),
    };
    if summary.runs.is_empty() {
        let _ = writeln!(io.out, "{} ({}): no run finished.\n", line.label, line.slug);
        return None;
    }
    let _ = writeln!(io.out, "{} ({})\n", line.label, line.slug);
    let _ = write!(io.out, "{}", runs_table(&summary.runs, summary.mean.as_ref(), None).markdown());
    let _ = writeln!(io.out);
    for note in table_notes(&summary.runs, &line.watched, None) {
        let _ = writeln!(io.out, "{note}");
    }
    if let Some(t) = thresholds_table(&summary.runs) {
        let _ = write!(io.out, "\n{}", crate::report::progress::paint(&t, io.color));
    }
    let summary_path = line.dir.join(format!("{}-summary.json", line.slug));
    let written = crate::files::write_atomically(&summary_path, |w| {
        serde_json::to_writer_pretty(&mut *w, &summary).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    });
    if let Err(e) = written {
        Problem::new(format!("cannot write {}: {e}", summary_path.display())).print(io.err);
        *code = exit::RUN;
    }
    if grid {
        let _ = writeln!(io.out);
    }
    Some(summary)
}

/// A grid's series (their directories, `dirs`) compared with the baseline as `compare` does,
/// unless a run stopped the bench; a single series says how to compare it with another. `code`
/// takes the gate's verdict when nothing worse happened.
fn compare_series(
    s: &Series,
    dirs: &[std::path::PathBuf],
    opts: &crate::cli::BenchOpts,
    stopped: bool,
    code: &mut i32,
    io: &mut Io,
) -> Option<crate::results::compare::Report> {
    if !s.grid {
        let _ = writeln!(
            io.out,
            "Compare with another series: {} compare {} OTHER_DIR",
            crate::console::own_command(),
            s.top.display()
        );
        return None;
    }
    if dirs.len() < 2 || stopped {
        return None;
    }
    let args = crate::cli::CompareArgs {
        inputs: dirs.to_vec(),
        baseline: opts.baseline.clone(),
        format: crate::cli::Format::Term,
        fail_on: opts.fail_on.clone(),
        ignore_significance: opts.ignore_significance,
        allow_different_workloads: true,
        allow_inconclusive: opts.allow_inconclusive,
        junit: None,
        detect: opts.detect.clone(),
    };
    let _ = writeln!(io.out, "Comparison (also in {}):\n", s.top.join("comparison.md").display());
    let (compared, report) = crate::results::compare::compare_into(&args, io, Some(&s.top));
    // A run that could not complete (3) or broke a threshold (1) outranks the gate's verdict;
    // nothing comparable after runs that ran is a run's failure, not usage.
    if *code == exit::OK {
        *code = if compared == exit::USAGE { exit::RUN } else { compared };
    }
    report
}

/// The live page's last report: the series' (compared, for a grid), or why there is none.
fn last_page(s: &Series, compared: Option<crate::results::compare::Report>) -> String {
    let page = match s.grid {
        true => {
            let dirs: Vec<std::path::PathBuf> = s.lines.iter().map(|l| l.dir.clone()).collect();
            let (mut o, mut e) = (std::io::sink(), std::io::sink());
            match crate::results::compare::load_inputs(&dirs, &mut Io::plain(&mut o, &mut e)) {
                Ok((series, _)) if !series.is_empty() => {
                    let sections = crate::results::report::sections_with(&series, &[], compared);
                    Ok(Some(crate::report::html::page(&s.title, &sections)))
                }
                _ => Ok(None),
            }
        }
        false => crate::results::report::dir_page(&s.top, &s.title),
    };
    match page {
        Ok(Some(page)) => page,
        _ => crate::dashboard::no_report_page("no run of the series finished"),
    }
}

/// The thresholds of a series: each one's value in every run and its verdict over the series
/// (broken when any run broke it); None when no threshold was set.
pub fn thresholds_table(runs: &[RunEntry]) -> Option<String> {
    let first = runs.iter().find(|r| !r.thresholds.is_empty())?;
    let mut header = vec!["Threshold".to_string()];
    header.extend(runs.iter().map(|r| format!("Run {}", r.run)));
    header.push("Verdict".into());
    let mut t = Table::new(&header.iter().map(String::as_str).collect::<Vec<_>>());
    let mut broken = 0;
    for (k, th) in first.thresholds.iter().enumerate() {
        let mut row = vec![th.threshold.clone()];
        let mut failed = Vec::new();
        for r in runs {
            match r.thresholds.get(k) {
                Some(v) => {
                    row.push(v.shown());
                    if !v.ok {
                        failed.push(r.run.to_string());
                    }
                }
                None => row.push("n/a".into()),
            }
        }
        row.push(match failed.len() {
            0 => "ok".into(),
            _ => {
                broken += 1;
                format!("BROKEN in run {}", failed.join(", "))
            }
        });
        t.row(row);
    }
    let mut out = t.markdown();
    if broken > 0 {
        out.push_str(&format!("\n{broken} of {} thresholds broken in some run: exit code 1\n", first.thresholds.len()));
    }
    Some(out)
}

/// One run in one line: `2 minutes 6 seconds, CPU 43.67%, RAM 451 MB, 0 errors, p99 12.0 ms`.
pub fn run_line(r: &RunEntry) -> String {
    let mut s = meteor_time(r.time_s);
    if let Some(rps) = r.requests_per_s {
        s.push_str(&format!(", {} requests/s", crate::report::term::rate(rps)));
    }
    if let (Some(v), Some(unit)) = (r.per_s, &r.unit) {
        s.push_str(&format!(", {} {unit}/s", crate::report::term::rate(v)));
    }
    if let (Some(c), Some(m)) = (r.cpu_pct, r.ram_bytes) {
        s.push_str(&format!(", CPU {}, RAM {}", meteor_cpu(c), meteor_bytes(m)));
    }
    s.push_str(&format!(", {} errors", crate::report::term::grouped(r.errors, 0)));
    if let Some(p) = r.p99_ms {
        s.push_str(&format!(", p99 {}", ms(p)));
    }
    if r.interrupted {
        s.push_str(" (interrupted)");
    }
    if r.suspect.is_some() {
        s.push_str(" (suspect: see below)");
    }
    let broken: Vec<&str> = r.thresholds.iter().filter(|t| !t.ok).map(|t| t.threshold.as_str()).collect();
    if !broken.is_empty() {
        s.push_str(&format!(", thresholds BROKEN: {}", broken.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests;

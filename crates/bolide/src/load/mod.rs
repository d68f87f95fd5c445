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

use crate::console::{exit, Io};
use crate::report::table::{meteor_bytes, meteor_cpu, meteor_time, ms, Table};
use crate::results::{runs_table, table_notes, watched_names, BenchSummary, RunEntry, SUMMARY_FORMAT};
use crate::workload::Workload;

/// Reads a pause that may be zero (`0`, `10s`).
pub fn parse_pause(flag: &str, text: &str) -> Result<Duration, String> {
    if text.trim().parse::<f64>() == Ok(0.0) {
        return Ok(Duration::ZERO);
    }
    crate::plan::parse_duration(flag, text)
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
) -> Result<Vec<Option<std::time::SystemTime>>, String> {
    let Some(base) = base else { return Ok(vec![None; runs]) };
    if runs <= 1 {
        return Ok(vec![Some(base)]);
    }
    let planned = planned.ok_or(
        "--start-at with several runs needs runs of a planned length (-d/--duration), not a request count (-n): \
         each run starts at its own shared time",
    )?;
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
) -> i32 {
    bench_series(vec![(None, workload, command_line)], opts, junit, io, cancel)
}

/// `bolide bench` of one workload (`label` None) or of each value of `--parameter-list` (`label`
/// `NAME=value`, each its own series in a directory of that name under the out directory): the
/// runs interleaved round by round ([`round_order`]), and with several series, every one compared
/// with the baseline at the end as `compare` does (gate and exit codes included).
pub fn bench_series(
    variants: Vec<Variant>,
    opts: &crate::cli::BenchOpts,
    junit: Option<&Path>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> i32 {
    let mut problems = Vec::new();
    let Some((_, first, first_command)) = variants.first() else { return exit::USAGE };
    let grid = variants.len() > 1;
    // --json is the series' summary document (each run's goes into --out DIR).
    let json = first.common().json.clone();
    if opts.runs == 0 {
        problems.push("--runs must be at least 1".to_string());
    }
    let html = first.common().html.clone();
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
    let mut lines = Vec::new();
    for (value, workload, command_line) in variants.iter().cloned() {
        let (label, dir) = match value {
            Some(v) => (v.clone(), top.join(&v)),
            None => (label.clone(), top.clone()),
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
            problems.push(e.into());
        }
    }
    if let Some(d) = &opts.detect {
        if let Err(e) = crate::results::compare::parse_detect(d) {
            problems.push(e.into());
        }
    }
    if !grid && (opts.baseline.is_some() || !opts.fail_on.is_empty() || opts.detect.is_some()) {
        problems.push(
            "--baseline, --fail-on and --detect compare the series of a --parameter-list; a single series is \
             compared with `bolide compare` against another"
                .into(),
        );
    }
    // The directories last: a series refused for its flags leaves nothing behind.
    if problems.is_empty() {
        for Line { dir, slug, .. } in &lines {
            if let Err(e) = std::fs::create_dir_all(dir) {
                problems.push(format!("--out {}: cannot create it: {e}", dir.display()));
            } else if let Some(existing) = (1..=opts.runs.max(1))
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
                problems.push(format!("--out: {e}"));
            }
        }
    }
    if !problems.is_empty() {
        for p in problems {
            let _ = writeln!(io.err, "error: {p}");
        }
        return exit::USAGE;
    }
    let slug = lines[0].slug.clone();
    let title = format!("bolide bench: {label} ({slug})");
    let dashboard = match crate::dashboard::start_for(first.common().dashboard, &title, io) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let first_command = first_command.clone();
    // The comparison made at the end, for the live page's last report too.
    let mut compared_report = None;
    // The series; its every way out comes back here, so that the dashboard shows how it ended.
    let code = crate::console::with_document(io, json.as_deref(), |io| {
        let plural = |n: u32| if n == 1 { "" } else { "s" };
        if grid {
            let names: Vec<&str> = lines.iter().map(|l| l.label.as_str()).collect();
            let _ = writeln!(
                io.out,
                "bolide bench: {slug}, {} run{} of each of {} ({}), interleaved, into {}\n",
                opts.runs,
                plural(opts.runs),
                names.len(),
                names.join(", "),
                top.display()
            );
        } else {
            let _ = writeln!(
                io.out,
                "bolide bench: {slug}, {} run{} labelled {label:?}, into {}\n",
                opts.runs,
                plural(opts.runs),
                top.display()
            );
        }
        let mut code = exit::OK;
        let outer = io.stage.clone();
        let mut spent = Duration::ZERO;
        // Each run's verdicts, for --junit.
        let mut suites = Vec::new();
        let mut started_runs = 0usize;
        let mut stopped = false;
        'rounds: for round in 1..=opts.runs {
            for s in round_order(round, lines.len()) {
                let k = (round as usize - 1) * lines.len()
                    + round_order(round, lines.len()).iter().position(|x| *x == s).unwrap_or(0);
                let line = &mut lines[s];
                let what = if grid { format!("run ({})", line.label) } else { "run".to_string() };
                io.stage = stage(&outer, &what, (k + 1, total), spent, line.workload.planned(), cooldown);
                // With a shared schedule, the wait for the run's start is its cooldown.
                let shared = starts.get(k).copied().flatten();
                line.workload.common_mut().spread.start_at = shared;
                if started_runs > 0 && !cooldown.is_zero() && shared.is_none() {
                    let _ = writeln!(io.out, "  cooling down for {}", humantime::format_duration(cooldown));
                    if !pause(cooldown, io, cancel) {
                        break 'rounds;
                    }
                }
                if cancel.is_cancelled() {
                    break 'rounds;
                }
                started_runs += 1;
                let i = round;
                let file = line.dir.join(format!("{}-{i}.json", line.slug));
                line.workload.set_output(Some(file.clone()), Some(line.label.clone()), true);
                if line.workload.part().writes_requests() {
                    let tsv = line.dir.join(format!("{}-{i}.tsv", line.slug));
                    line.workload.part_mut().set_requests_file(tsv);
                }
                let began = Instant::now();
                let started = std::time::SystemTime::now();
                let outcome = line.workload.execute(line.command_line.clone(), io, cancel, dashboard.as_ref());
                spent += began.elapsed();
                let mut suite =
                    crate::report::junit::for_run(outcome.doc.as_ref(), outcome.code, &line.command_line, started);
                suite.name = format!("{} run {i} of {}", line.label, opts.runs);
                suites.push(suite);
                let run_id = if grid { format!("{} {i}", line.label) } else { i.to_string() };
                if let Some(d) = &outcome.doc {
                    line.csv_rows.push_str(&crate::report::csv::rows(d, &run_id));
                }
                let Some(doc) = outcome.doc else {
                    let which = if grid { format!("{} ", line.label) } else { String::new() };
                    let _ = writeln!(
                        io.err,
                        "error: {which}run {i} of {} could not complete; the series stops here",
                        opts.runs
                    );
                    code = exit::RUN;
                    stopped = true;
                    break 'rounds;
                };
                if outcome.code != exit::OK {
                    code = code.max(outcome.code);
                }
                let m = doc.measures();
                line.watched = watched_names(&doc);
                let mut entry =
                    RunEntry::of(i, Some(file.file_name().unwrap_or_default().to_string_lossy().into_owned()), &m);
                entry.thresholds = doc.thresholds().to_vec();
                let who = if grid { format!("{} ", line.label) } else { String::new() };
                let text = format!("  {who}run {i}/{}: {}\n", opts.runs, run_line(&entry));
                let _ = write!(io.out, "{}", crate::report::progress::paint(&text, io.color));
                line.runs.push(entry);
                line.done.push(m);
                line.done_lines.push_str(&text);
                if let Some(d) = &dashboard {
                    // Under the current run, the finished runs' values so far.
                    let runs_so_far: usize = lines.iter().map(|l| l.done.len()).sum();
                    d.keep(vec![crate::report::html::Section {
                        title: format!("{label}: runs so far"),
                        notes: vec![format!("{runs_so_far} of {total} runs finished")],
                        text: lines.iter().map(|l| l.done_lines.as_str()).collect(),
                        charts: crate::report::charts::across_runs(
                            &lines.iter().map(|l| (l.label.clone(), l.done.clone())).collect::<Vec<_>>(),
                        ),
                        ..Default::default()
                    }]);
                }
            }
        }
        io.stage = outer;
        let interrupted = cancel.is_cancelled();
        if let Some(path) = &opts.csv {
            let rows: String = lines.iter().map(|l| l.csv_rows.as_str()).collect();
            if !crate::lifecycle::artifacts::csv(io, path, &rows) {
                code = exit::RUN;
            }
        }
        if let Some(path) = junit {
            if suites.is_empty() {
                let mut s =
                    crate::report::junit::for_run(None, exit::RUN, &first_command, std::time::SystemTime::now());
                s.cases[0].name = "no run of the series started".into();
                suites.push(s);
            }
            if !crate::lifecycle::artifacts::junit(io, path, &suites) {
                code = exit::RUN;
            }
        }
        let _ = writeln!(io.out);
        let finished: usize = lines.iter().map(|l| l.runs.len()).sum();
        if interrupted {
            let _ = writeln!(io.out, "Interrupted: {finished} of {total} runs finished; they are kept and reported.\n");
        }
        if finished == 0 {
            let _ = writeln!(io.out, "No run finished; nothing to report.");
            return (if code == exit::OK { exit::RUN } else { code }, None);
        }
        let mut summaries = Vec::new();
        for line in &lines {
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
                continue;
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
                let _ = writeln!(io.err, "error: cannot write {}: {e}", summary_path.display());
                code = exit::RUN;
            }
            if grid {
                let _ = writeln!(io.out);
            }
            summaries.push(summary);
        }
        let _ = writeln!(io.out, "\nResult documents and summary: {}", top.display());
        let dirs: Vec<std::path::PathBuf> =
            lines.iter().filter(|l| !l.runs.is_empty()).map(|l| l.dir.clone()).collect();
        let mut comparison = None;
        if grid && dirs.len() > 1 && !stopped {
            let args = crate::cli::CompareArgs {
                inputs: dirs.clone(),
                baseline: opts.baseline.clone(),
                format: crate::cli::Format::Term,
                fail_on: opts.fail_on.clone(),
                ignore_significance: opts.ignore_significance,
                allow_different_workloads: true,
                allow_inconclusive: opts.allow_inconclusive,
                junit: None,
                detect: opts.detect.clone(),
            };
            let _ = writeln!(io.out, "Comparison (also in {}):\n", top.join("comparison.md").display());
            let (compared, report) = crate::results::compare::compare_into(&args, io, Some(&top));
            comparison = report;
            // A run that could not complete (3) or broke a threshold (1) outranks the gate's
            // verdict; nothing comparable after runs that ran is a run's failure, not usage.
            if code == exit::OK {
                code = if compared == exit::USAGE { exit::RUN } else { compared };
            }
        } else if !grid {
            let _ = writeln!(
                io.out,
                "Compare with another series: {} compare {} OTHER_DIR",
                crate::console::own_command(),
                top.display()
            );
        }
        if let Some(path) = html {
            let ok = match grid {
                true => crate::results::report::write_compared_report(&dirs, comparison.clone(), &path, &title, io),
                false => crate::results::report::write_dir_report(&top, &path, &title, io),
            };
            if !ok {
                code = exit::RUN;
            }
        }
        let doc = match grid {
            false => serde_json::to_value(&summaries[0]).ok(),
            true => Some(serde_json::json!({
                "format": "bolide.bench-parameters",
                "version": 1,
                "series": summaries,
                "comparison": comparison,
            })),
        };
        compared_report = comparison;
        (code, doc)
    });
    if let Some(d) = &dashboard {
        let page = match grid {
            true => {
                let dirs: Vec<std::path::PathBuf> = lines.iter().map(|l| l.dir.clone()).collect();
                let (mut o, mut e) = (std::io::sink(), std::io::sink());
                match crate::results::compare::load_inputs(&dirs, &mut Io::plain(&mut o, &mut e)) {
                    Ok((series, _)) if !series.is_empty() => {
                        let sections = crate::results::report::sections_with(&series, &[], compared_report);
                        Ok(Some(crate::report::html::page(&title, &sections)))
                    }
                    _ => Ok(None),
                }
            }
            false => crate::results::report::dir_page(&top, &title),
        };
        d.finish(match page {
            Ok(Some(page)) => page,
            _ => crate::dashboard::no_report_page("no run of the series finished"),
        });
    }
    code
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

//! The commands that run load many times over: `bench` (the same workload N times, here),
//! `capacity` (rising levels until the server fails), `demo` and `demo cluster` (the Meteor
//! benchmark and the Cluster test on reference servers). Each run is one `lifecycle::Workload`;
//! what they print and compare comes from `results`, which reads the documents they write and
//! never calls back here.

pub mod capacity;
pub mod cluster;
pub mod demo;

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

/// `bolide bench`: the workload `opts.runs` times, documents and a summary into the out
/// directory, the Meteor table on stdout. Ctrl-C keeps (and reports) the runs already done.
pub fn bench(
    mut workload: Workload,
    opts: &crate::cli::BenchOpts,
    junit: Option<&Path>,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> i32 {
    let mut problems = Vec::new();
    // --json is the series' summary document (each run's goes into --out DIR).
    let json = workload.common().json.clone();
    if opts.runs == 0 {
        problems.push("--runs must be at least 1".to_string());
    }
    let html = workload.common().html.clone();
    let cooldown = parse_pause("--cooldown", &opts.cooldown).map_err(|e| problems.push(e)).unwrap_or_default();
    let starts = shared_starts(workload.common().spread.start_at, opts.runs as usize, workload.planned(), cooldown)
        .map_err(|e| problems.push(e))
        .unwrap_or_default();
    let label = opts.label.clone().unwrap_or_else(default_label);
    if label.trim().is_empty() || label.contains(['/', '\\']) {
        problems.push(format!("--label {label:?} must be a plain name (no slashes)"));
    }
    let dir = opts.out.clone().unwrap_or_else(|| Path::new("bolide-results").join(&label));
    let slug = workload.slug();
    let gnuplot = workload.part().writes_requests();
    if let Err(e) = std::fs::create_dir_all(&dir) {
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
    if !problems.is_empty() {
        for p in problems {
            let _ = writeln!(io.err, "error: {p}");
        }
        return exit::USAGE;
    }
    let title = format!("bolide bench: {label} ({slug})");
    let dashboard = match crate::dashboard::start_for(workload.common().dashboard, &title, io) {
        Ok(d) => d,
        Err(code) => return code,
    };
    // The series; its every way out comes back here, so that the dashboard shows how it ended.
    let code = crate::console::with_document(io, json.as_deref(), |io| {
        let _ = writeln!(
            io.out,
            "bolide bench: {slug}, {} run{} labelled {label:?}, into {}\n",
            opts.runs,
            if opts.runs == 1 { "" } else { "s" },
            dir.display()
        );
        let mut runs = Vec::new();
        let mut watched = String::new();
        let mut code = exit::OK;
        let outer = io.stage.clone();
        let mut spent = Duration::ZERO;
        let (mut done, mut done_lines) = (Vec::new(), String::new());
        // Each run's verdicts, for --junit, and its rows, for --out csv=PATH.
        let mut suites = Vec::new();
        let mut csv_rows = String::new();
        for i in 1..=opts.runs {
            io.stage = stage(&outer, "run", (i as usize, opts.runs as usize), spent, workload.planned(), cooldown);
            // With a shared schedule, the wait for the run's start is its cooldown.
            let shared = starts.get(i as usize - 1).copied().flatten();
            workload.common_mut().spread.start_at = shared;
            if i > 1 && !cooldown.is_zero() && shared.is_none() {
                let _ = writeln!(io.out, "  cooling down for {}", humantime::format_duration(cooldown));
                if !pause(cooldown, io, cancel) {
                    break;
                }
            }
            if cancel.is_cancelled() {
                break;
            }
            let file = dir.join(format!("{slug}-{i}.json"));
            workload.set_output(Some(file.clone()), Some(label.clone()), true);
            if gnuplot {
                workload.part_mut().set_requests_file(dir.join(format!("{slug}-{i}.tsv")));
            }
            let began = Instant::now();
            let started = std::time::SystemTime::now();
            let outcome = workload.execute(command_line.clone(), io, cancel, dashboard.as_ref());
            spent += began.elapsed();
            let mut suite = crate::report::junit::for_run(outcome.doc.as_ref(), outcome.code, &command_line, started);
            suite.name = format!("{label} run {i} of {}", opts.runs);
            suites.push(suite);
            if let Some(d) = &outcome.doc {
                csv_rows.push_str(&crate::report::csv::rows(d, &i.to_string()));
            }
            let Some(doc) = outcome.doc else {
                let _ = writeln!(io.err, "error: run {i} of {} could not complete; the series stops here", opts.runs);
                code = exit::RUN;
                break;
            };
            if outcome.code != exit::OK {
                code = code.max(outcome.code);
            }
            let m = doc.measures();
            watched = watched_names(&doc);
            let mut entry =
                RunEntry::of(i, Some(file.file_name().unwrap_or_default().to_string_lossy().into_owned()), &m);
            entry.thresholds = doc.thresholds().to_vec();
            let line = format!("  run {i}/{}: {}\n", opts.runs, run_line(&entry));
            let _ = write!(io.out, "{}", crate::report::progress::paint(&line, io.color));
            runs.push(entry);
            done.push(m);
            done_lines.push_str(&line);
            if let Some(d) = &dashboard {
                // Under the current run, the finished runs' values so far.
                d.keep(vec![crate::report::html::Section {
                    title: format!("{label}: runs so far"),
                    notes: vec![format!("{} of {} runs finished", done.len(), opts.runs)],
                    text: done_lines.clone(),
                    charts: crate::report::charts::across_runs(&[(label.clone(), done.clone())]),
                    ..Default::default()
                }]);
            }
        }
        io.stage = outer;
        let interrupted = cancel.is_cancelled();
        if let Some(path) = &opts.csv {
            if !crate::lifecycle::artifacts::csv(io, path, &csv_rows) {
                code = exit::RUN;
            }
        }
        if let Some(path) = junit {
            if suites.is_empty() {
                let mut s = crate::report::junit::for_run(None, exit::RUN, &command_line, std::time::SystemTime::now());
                s.cases[0].name = "no run of the series started".into();
                suites.push(s);
            }
            if !crate::lifecycle::artifacts::junit(io, path, &suites) {
                code = exit::RUN;
            }
        }
        let summary = BenchSummary {
            format: SUMMARY_FORMAT.into(),
            version: 1,
            label: label.clone(),
            workload: slug.clone(),
            command_line,
            runs_planned: opts.runs,
            interrupted,
            mean: RunEntry::mean_of(&runs),
            runs,
        };
        let _ = writeln!(io.out);
        if interrupted {
            let _ = writeln!(
                io.out,
                "Interrupted: {} of {} runs finished; they are kept and reported.\n",
                summary.runs.len(),
                opts.runs
            );
        }
        if summary.runs.is_empty() {
            let _ = writeln!(io.out, "No run finished; nothing to report.");
            return (if code == exit::OK { exit::RUN } else { code }, None);
        }
        let _ = writeln!(io.out, "{label} ({slug})\n");
        let _ = write!(io.out, "{}", runs_table(&summary.runs, summary.mean.as_ref(), None).markdown());
        let _ = writeln!(io.out);
        for note in table_notes(&summary.runs, &watched, None) {
            let _ = writeln!(io.out, "{note}");
        }
        if let Some(t) = thresholds_table(&summary.runs) {
            let _ = write!(io.out, "\n{}", crate::report::progress::paint(&t, io.color));
        }
        let summary_path = dir.join(format!("{slug}-summary.json"));
        let written = crate::files::write_atomically(&summary_path, |w| {
            serde_json::to_writer_pretty(&mut *w, &summary).map_err(std::io::Error::other)?;
            w.write_all(b"\n")
        });
        match written {
            Ok(()) => {
                let _ = writeln!(io.out, "\nResult documents and summary: {}", dir.display());
                let _ = writeln!(
                    io.out,
                    "Compare with another series: {} compare {} OTHER_DIR",
                    crate::console::own_command(),
                    dir.display()
                );
            }
            Err(e) => {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", summary_path.display());
                code = exit::RUN;
            }
        }
        if let Some(path) = html {
            if !crate::results::report::write_dir_report(&dir, &path, &title, io) {
                code = exit::RUN;
            }
        }
        (code, Some(summary))
    });
    if let Some(d) = &dashboard {
        d.finish(match crate::results::report::dir_page(&dir, &title) {
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
        s.push_str(&format!(", {rps:.1} requests/s"));
    }
    if let (Some(c), Some(m)) = (r.cpu_pct, r.ram_bytes) {
        s.push_str(&format!(", CPU {}, RAM {}", meteor_cpu(c), meteor_bytes(m)));
    }
    s.push_str(&format!(", {} errors", r.errors));
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

//! `bolide run ddp-calls --users 1,10,50` and `bolide run ddp-connect --burst 1,10,100`: the
//! Meteor team's transport tables (meteor/meteor#14330, #14231) in one command. One run per
//! level, one after another, then a table of them: calls (or connects) per second, latency
//! percentiles, errors, and the server's CPU and memory when it is watched.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::console::{exit, Failed, Io};
use crate::problem::Problem;
use crate::report::table::ms;
pub use crate::results::levels::{table, Level, LevelsDoc, FORMAT};
use crate::stats::doc::Doc;
use crate::workload::Workload;

/// A level's figures from its document: the step that is the workload's unit (`call ...` for
/// ddp-calls, `connect` for ddp-connect).
pub fn level_of(level: u64, scenario: &str, doc: &Doc) -> Option<Level> {
    let d = doc.ddp()?;
    let wanted = |name: &str| if scenario == "ddp-connect" { name == "connect" } else { name.starts_with("call ") };
    let step = d.steps.iter().find(|s| wanted(&s.name))?;
    let ok = step.count.saturating_sub(step.errors);
    let ms = |us: u64| us as f64 / 1000.0;
    let monitor: Vec<_> = doc.monitor().iter().filter(|m| !m.samples.is_empty()).collect();
    let samples: Vec<f64> = monitor.iter().flat_map(|m| m.samples.iter().map(|s| s.2 as f64)).collect();
    Some(Level {
        level,
        step: step.name.clone(),
        per_s: if d.summary.duration_s > 0.0 { ok as f64 / d.summary.duration_s } else { 0.0 },
        ok,
        errors: step.errors,
        p50_ms: step.latency.as_ref().map(|l| ms(l.p50_us)),
        p99_ms: step.latency.as_ref().map(|l| ms(l.p99_us)),
        p99_9_ms: step.latency.as_ref().map(|l| ms(l.p99_9_us)),
        cpu_pct: (!monitor.is_empty()).then(|| monitor.iter().map(|m| m.avg_cpu_pct).sum()),
        rss_mean_bytes: (!monitor.is_empty()).then(|| monitor.iter().map(|m| m.avg_rss_bytes).sum()),
        rss_max_bytes: (!monitor.is_empty()).then(|| monitor.iter().map(|m| m.peak_rss_bytes).sum()),
        rss_samples: samples.len(),
        file: None,
        suspect: doc.measures().suspect,
    })
}

/// Whether `run` takes these arguments as levels, one run each.
pub fn wanted(args: &crate::cli::RunArgs) -> bool {
    match args.scenario.as_str() {
        "ddp-calls" => args.users.len() > 1,
        "ddp-connect" => args.burst.len() > 1,
        _ => false,
    }
}

/// Runs each level of `args` (`--users` or `--burst` with several values) and prints the table.
pub fn run(
    args: &crate::cli::RunArgs,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<i32, Failed> {
    let by_burst = args.scenario == "ddp-connect";
    let (flag, values) = if by_burst { ("burst", args.burst.clone()) } else { ("users", args.users.clone()) };
    // Every level is checked before the first runs.
    let mut workloads = Vec::new();
    for &n in &values {
        let mut a = args.clone();
        if by_burst {
            a.burst = vec![n];
        } else {
            a.users = vec![n];
        }
        workloads.push((n, Workload::ddp(&a)?));
    }
    let Some((_, first)) = workloads.first() else { return Ok(exit::USAGE) };
    let (dir, json) = (first.common().dir.clone(), first.common().json.clone());
    if let Some(d) = &dir {
        std::fs::create_dir_all(d)
            .map_err(|e| Failed::usage([format!("--out {}: cannot create it: {e}", d.display())]))?;
    }
    let scenario = args.scenario.clone();
    Ok(crate::console::with_document(io, json.as_deref(), |io| {
        let shown: Vec<String> = values.iter().map(u64::to_string).collect();
        let _ = writeln!(io.out, "bolide run {scenario}: --{flag} {}, one run each\n", shown.join(","));
        let mut levels = Vec::new();
        let mut code = exit::OK;
        let outer = io.stage.clone();
        for (i, (n, mut w)) in workloads.into_iter().enumerate() {
            if cancel.is_cancelled() {
                break;
            }
            io.stage = format!("{outer}{flag} {n} ({}/{}) ", i + 1, values.len());
            let file: Option<PathBuf> = dir.as_ref().map(|d| d.join(format!("{scenario}-{flag}-{n}.json")));
            w.set_output(file.clone(), Some(format!("{flag}={n}")), true);
            let outcome = w.execute(command_line.clone(), io, cancel, None);
            let Some(doc) = outcome.doc else {
                let stops = format!("the level {flag} {n} could not complete; the levels stop here");
                Problem::new(stops).print(io.err);
                code = exit::RUN;
                break;
            };
            code = code.max(outcome.code);
            match level_of(n, &scenario, &doc) {
                Some(mut l) => {
                    l.file = file.map(|f| f.display().to_string());
                    let _ = writeln!(
                        io.out,
                        "  {flag} {n}: {:.1} {} per second ({}), p50 {}, p99 {}, {} errors",
                        l.per_s,
                        if by_burst { "connects" } else { "calls" },
                        l.step,
                        l.p50_ms.map(ms).unwrap_or_else(|| "n/a".into()),
                        l.p99_ms.map(ms).unwrap_or_else(|| "n/a".into()),
                        l.errors
                    );
                    levels.push(l);
                }
                None => {
                    let _ = writeln!(io.out, "  {flag} {n}: no step of the workload ran");
                }
            }
        }
        io.stage = outer;
        let interrupted = cancel.is_cancelled();
        let _ = writeln!(io.out);
        if levels.is_empty() {
            let _ = writeln!(io.out, "No level finished; nothing to report.");
            return (if code == exit::OK { exit::RUN } else { code }, None);
        }
        let _ = write!(io.out, "{}", table(&scenario, &levels).markdown());
        if levels.iter().any(|l| l.suspect.is_some()) {
            let _ =
                writeln!(io.out, "\n(suspect): bolide or the machine was the limit at that level; see its document.");
        }
        if levels.iter().all(|l| l.cpu_pct.is_none()) {
            let _ = writeln!(
                io.out,
                "\nServer CPU and RSS: watch the server with --monitor NAME=:PORT or --spawn (every --monitor-interval, e.g. 500ms)."
            );
        }
        if let Some(d) = &dir {
            let _ = writeln!(io.out, "\nEach level's result document: {}", d.display());
        }
        let doc = LevelsDoc {
            format: FORMAT.into(),
            version: 1,
            scenario: scenario.clone(),
            by: if by_burst { "burst" } else { "users" }.into(),
            command_line,
            interrupted,
            levels,
        };
        (code, Some(doc))
    }))
}

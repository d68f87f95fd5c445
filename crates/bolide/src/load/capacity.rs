//! `bolide capacity`: the workload at rising arrival levels (users per second or minute for a
//! scenario, requests per second for HTTP) until a level fails, as the Meteor reports' connection
//! ladder (`# Connections | Time | CPU | RAM`, `x` for the levels that failed).

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::{parse_pause, pause, Workload};
use crate::cli::{CapacityWorkload, LadderOpts, Unit};
use crate::console::{exit, Failed, Io};
use crate::plan::RunPlanError;
use crate::problem::Problem;
use crate::report::table::Table;
use crate::results::ladder::{self, Rung};
pub use crate::results::ladder::{CapacitySummary, LevelEntry, Verdict, SUMMARY_FORMAT};
use crate::stats::doc::Doc;

/// The criteria a level must meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criteria {
    pub max_error_rate_pct: f64,
    pub max_p99_ms: Option<f64>,
    /// Judge a level even when the machine had no idle CPU (`--allow-busy-machine`); the level
    /// is still marked suspect.
    pub allow_busy_machine: bool,
}

/// Judges one level's result document. The server's answers (errors, failed users, a server
/// that vanished, thresholds on errors and the audit) are judged at any machine load: a server
/// that answers 503 fails its level however busy the machine. Speed and resources (p99, the other
/// thresholds, a schedule that fell behind) are judged only where bolide and the machine were not
/// the limit; a schedule that fell behind while bolide was short of CPU, or while its
/// connections had room to spare, is bolide's lateness: no verdict, never the server's failure.
pub fn judge(doc: &Doc, c: &Criteria) -> Verdict {
    let m = doc.measures();
    if m.interrupted {
        return Verdict::Interrupted;
    }
    let view = doc.view();
    if let Some(why) = view.unmeasured() {
        return Verdict::Unmeasured(why);
    }
    let mut answers = Vec::new();
    for w in doc.monitor() {
        if let Some(t) = w.vanished_s {
            answers.push(format!("{} was gone {t:.1} s into the run", w.name));
        }
    }
    if m.error_rate_pct > c.max_error_rate_pct {
        answers.push(format!("error rate {:.2}% > {:.2}%", m.error_rate_pct, c.max_error_rate_pct));
    }
    answers.extend(view.shortfalls());
    for t in doc.thresholds().iter().filter(|t| !t.ok && t.answer) {
        answers.push(format!("threshold {} broken: {}", t.threshold, t.shown()));
    }
    if !answers.is_empty() {
        return Verdict::Fail(answers);
    }
    let generator = doc.generator();
    if let Some(g) = generator.filter(|g| g.saturated()) {
        return Verdict::NotTheServer(format!(
            "a bolide load thread was saturated in {} of {} samples; give bolide more threads (-t) or another machine",
            g.saturated_samples,
            g.samples.len()
        ));
    }
    if let Some(g) = generator.filter(|g| g.machine_busy() && !c.allow_busy_machine) {
        return Verdict::NotTheServer(format!(
            "the machine had no idle CPU in {} of {} samples (server and bolide share it: min idle {:.0}%); run bolide on another machine or pin them to separate cores",
            g.machine_busy_samples,
            g.samples.len(),
            g.min_machine_idle_pct
        ));
    }
    if let Some(why) = view.shape_limit(c.max_p99_ms) {
        return Verdict::NotTheServer(why);
    }
    let mut why = Vec::new();
    if let Some(b) = view.behind_schedule() {
        let short_of_cpu = generator.is_some_and(|g| g.saturated_samples > 0 || g.machine_busy_samples > 0);
        let missed = format!("{} of {} scheduled requests never went out", b.missed, b.scheduled);
        if short_of_cpu {
            return Verdict::NotTheServer(format!(
                "{missed} while bolide was short of CPU (a saturated load thread or no idle CPU in some sample): its \
                 lateness cannot be told from the server's; run bolide on cores of its own"
            ));
        }
        if b.rate_per_s.is_some_and(|rate| b.ceiling_per_s >= 2.0 * rate) {
            return Verdict::NotTheServer(format!(
                "{missed}, yet the connections had room for {:.0} per second at the run's mean latency: bolide fell \
                 behind its own schedule, not the server",
                b.ceiling_per_s
            ));
        }
        why.push(format!("the server could not keep up: {missed}"));
    }
    for t in doc.thresholds().iter().filter(|t| !t.ok && !t.answer) {
        why.push(format!("threshold {} broken: {}", t.threshold, t.shown()));
    }
    if let (Some(limit), Some(p99)) = (c.max_p99_ms, m.p99_ms) {
        if p99 > limit {
            why.push(format!("p99 {p99:.1} ms > {limit:.1} ms"));
        }
    }
    if why.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(why)
    }
}

/// The levels from `from` to `to` by `step`.
pub fn levels(o: &LadderOpts) -> Result<Vec<f64>, Problem> {
    let ok = |v: f64| v.is_finite() && v > 0.0;
    if !ok(o.from) || !ok(o.step) || !o.to.is_finite() || o.to < o.from {
        return Err(Problem::new(format!(
            "--from {} --step {} --to {}: need 0 < from <= to and step > 0",
            o.from, o.step, o.to
        )));
    }
    let n = ((o.to - o.from) / o.step + 1e-9).floor() as usize + 1;
    if n > 1000 {
        return Err(Problem::new(format!(
            "--from {} --step {} --to {} makes {n} levels; at most 1000",
            o.from, o.step, o.to
        )));
    }
    Ok((0..n).map(|i| o.from + o.step * i as f64).collect())
}

/// The workload as its flags plan it at the first level's rate (`first`, per second), once; each
/// level is this plan at the level's rate ([`crate::workload::Describe::at_rate`]).
fn plan(w: &CapacityWorkload, first: f64) -> Result<Workload, Vec<Problem>> {
    let planned = match w {
        CapacityWorkload::Http(c) => {
            let mut args = c.args.clone();
            args.rps = Some(first);
            Workload::http(&args)
        }
        CapacityWorkload::Run(c) if crate::scenario::builtin::PROTOCOL.contains(&c.args.scenario.as_str()) => {
            return Err(vec![Problem::new(format!(
                "{} is a closed loop without an arrival rate to climb: its ladder is `bolide run {} {} 1,10,50`",
                c.args.scenario,
                c.args.scenario,
                if c.args.scenario == "ddp-calls" { "--users" } else { "--burst" }
            ))])
        }
        CapacityWorkload::Run(c) => {
            let mut args = c.args.clone();
            // A built-in's phase is the rate's (a scenario file's phases are scaled to it).
            if crate::scenario::builtin::is_builtin(&args.scenario) {
                args.arrival_rate = Some(first);
            }
            Workload::ddp(&args)
        }
    };
    planned.map_err(|e| match e {
        RunPlanError::Config(c) => c.0,
        RunPlanError::Scenario(s) => vec![Problem::new(s.to_string())],
    })
}

/// The plan at one level (per second).
fn plan_at(base: &Workload, per_s: f64) -> Result<Workload, Problem> {
    let mut w = base.clone();
    w.part_mut().at_rate(per_s)?;
    Ok(w)
}

/// The ladder as a JUnit suite: a case per level (a failed level fails, a level without a verdict
/// is an error), with its thresholds' verdicts in the message.
fn junit_suite(
    rows: &[(f64, Option<Doc>, Verdict)],
    slug: &str,
    unit: &str,
    conclusion: String,
) -> crate::report::junit::Suite {
    use crate::report::junit::{Case, Suite, Verdict as J};
    let cases = rows
        .iter()
        .map(|(level, doc, v)| {
            let verdict = match v {
                Verdict::Pass => J::Pass,
                Verdict::Fail(why) => J::Failure { kind: "level", message: why.join("; ") },
                Verdict::NotTheServer(why) | Verdict::Unmeasured(why) => {
                    J::Error { kind: "no verdict", message: why.clone() }
                }
                Verdict::Interrupted => J::Failure { kind: "interrupted", message: "stopped during this level".into() },
            };
            let mut c = Case::new(format!("level {level} {unit}"), "bolide.capacity", verdict);
            c.time_s = doc.as_ref().map_or(0.0, |d| d.measures().time_s);
            c
        })
        .collect::<Vec<_>>();
    let cases = if cases.is_empty() {
        vec![Case::new("no level ran", "bolide.capacity", J::Error { kind: "run", message: "no level ran".into() })]
    } else {
        cases
    };
    Suite {
        name: format!("bolide capacity {slug}"),
        package: "bolide.capacity".into(),
        started: std::time::SystemTime::now(),
        time_s: cases.iter().map(|c| c.time_s).sum(),
        properties: vec![("conclusion".into(), conclusion)],
        cases,
    }
}

/// A ladder planned: everything [`plan_ladder`] checked before the first level.
struct Ladder<'a> {
    opts: &'a LadderOpts,
    levels: Vec<f64>,
    cooldown: std::time::Duration,
    criteria: Criteria,
    /// The plan, made once at the first level's rate; each level is this plan at its own.
    whole: Workload,
    slug: String,
    /// What a level counts ("Requests", "Connections") and its unit ("per second").
    kind: &'static str,
    unit: &'static str,
    /// With `--start-at`, each level's shared start (segments climb together).
    starts: Vec<Option<std::time::SystemTime>>,
    /// How long a level is planned to last (for the ETA).
    planned: Option<std::time::Duration>,
}

impl Ladder<'_> {
    /// A level's rate per second.
    fn per_s(&self, level: f64) -> f64 {
        per_s(self.opts, level)
    }
}

/// A level's rate per second, for levels in `opts.unit`.
fn per_s(opts: &LadderOpts, level: f64) -> f64 {
    match opts.unit {
        Unit::PerSecond => level,
        Unit::PerMinute => level / 60.0,
    }
}

/// `bolide capacity`: the ladder, and its summary document where `--json` says. Err: the
/// problems that refused it before anything ran.
pub fn capacity(
    w: &CapacityWorkload,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<i32, Failed> {
    let ladder = plan_ladder(w)?;
    let json = w.common().output.json.clone();
    Ok(crate::console::with_document(io, json.as_deref(), |io| {
        let mut summary = None;
        let code = climb(w, &ladder, command_line, io, cancel, &mut summary);
        (code, summary)
    }))
}

/// Every check before the first level, every problem at once: the flags the ladder sets itself,
/// the levels and criteria, the plan at the first level (flag and scenario errors), `--out`, and
/// the levels' shared starts.
fn plan_ladder(w: &CapacityWorkload) -> Result<Ladder<'_>, Failed> {
    let (opts, kind) = match w {
        CapacityWorkload::Http(c) => (&c.ladder, "Requests"),
        CapacityWorkload::Run(c) => (&c.ladder, "Connections"),
    };
    let mut problems = overridden(w);
    let levels = levels(opts).map_err(|e| problems.push(e)).unwrap_or_default();
    let cooldown = parse_pause("--cooldown", &opts.cooldown).map_err(|e| problems.push(e)).unwrap_or_default();
    let max_p99_ms = opts.max_p99.as_ref().and_then(|t| {
        crate::plan::read_duration("--max-p99", t).map_err(|e| problems.push(e)).ok().map(|d| d.as_secs_f64() * 1e3)
    });
    if !(opts.max_error_rate >= 0.0 && opts.max_error_rate <= 100.0) {
        problems.push(format!("--max-error-rate {} must be a percentage, 0 to 100", opts.max_error_rate));
    }
    let unit = match opts.unit {
        Unit::PerSecond => "per second",
        Unit::PerMinute => "per minute",
    };
    let criteria =
        Criteria { max_error_rate_pct: opts.max_error_rate, max_p99_ms, allow_busy_machine: opts.allow_busy_machine };
    // Plan once, at the first level, so that flag and scenario errors stop us before anything
    // runs.
    let first = levels.first().map(|l| per_s(opts, *l));
    let whole = first.map(|r| plan(w, r).and_then(|b| plan_at(&b, r).map_err(|e| vec![e]).map(|_| b)));
    if let Some(Err(e)) = &whole {
        problems.extend(e.iter().cloned());
    }
    if let Some(dir) = &opts.out {
        if let Err(e) = std::fs::create_dir_all(dir) {
            problems.push(format!("--out {}: cannot create it: {e}", dir.display()));
        }
    }
    if !problems.is_empty() {
        return Err(Failed::usage(problems.0));
    }
    let (Some(Ok(whole)), Some(first)) = (whole, first) else { return Err(Failed::usage(Vec::<Problem>::new())) };
    let first = plan_at(&whole, first).ok();
    let planned = first.as_ref().and_then(|wl| wl.planned());
    let base = first.as_ref().and_then(|wl| wl.common().spread.start_at);
    let starts = super::shared_starts(base, levels.len(), planned, cooldown).map_err(|e| Failed::usage([e]))?;
    let slug = whole.slug();
    Ok(Ladder { opts, levels, cooldown, criteria, whole, slug, kind, unit, starts, planned })
}

/// The ladder sets each level's rate itself: a rate or a count given as well would be silently
/// overridden or would cut the levels short, so they are refused.
fn overridden(w: &CapacityWorkload) -> crate::plan::Problems {
    let mut problems = crate::plan::Problems::default();
    match w {
        CapacityWorkload::Http(c) => {
            if c.args.rps.is_some() {
                problems.push("--rps: capacity sets each level's rate from --from/--step/--to; drop --rps");
            }
            if c.args.requests.is_some() {
                problems.push("-n/--requests: each capacity level runs for -d/--duration (10s by default); drop -n");
            }
        }
        CapacityWorkload::Run(c) => {
            if c.args.arrival_rate.is_some() {
                problems.push(
                    "--arrival-rate: capacity sets each level's arrival rate from --from/--step/--to; drop --arrival-rate",
                );
            }
            if !c.args.users.is_empty() {
                problems.push(
                    "--users: capacity's levels are arrival rates (open model); drop --users, or run the closed \
                     model at several --users with bench",
                );
            }
        }
    }
    problems
}

/// Climbs the ladder; `summary` is set once the ladder has run.
fn climb(
    w: &CapacityWorkload,
    ladder: &Ladder,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
    summary: &mut Option<CapacitySummary>,
) -> i32 {
    let (levels, slug, unit) = (&ladder.levels, &ladder.slug, ladder.unit);
    let _ = writeln!(
        io.out,
        "bolide capacity: {slug}, {} levels of {} {unit} ({} to {}), until one fails\n",
        levels.len(),
        ladder.kind.to_lowercase(),
        levels[0],
        levels[levels.len() - 1]
    );
    let title = format!("bolide capacity: {slug}");
    let dashboard = match crate::dashboard::start_for(ladder.whole.common().dashboard, &title, io) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let rows = match run_levels(ladder, &command_line, io, cancel, dashboard.as_ref()) {
        Some(rows) => rows,
        None => {
            Problem::new("the first level could not run; nothing to report").print(io.err);
            if let Some(d) = &dashboard {
                d.finish(crate::dashboard::no_report_page("the first level could not run"));
            }
            return exit::RUN;
        }
    };
    *summary = Some(CapacitySummary {
        format: SUMMARY_FORMAT.into(),
        version: 1,
        workload: slug.clone(),
        kind: ladder.kind.into(),
        unit: unit.into(),
        command_line,
        levels: rows.iter().map(|(level, doc, v)| LevelEntry::of(*level, doc.as_ref(), v)).collect(),
        highest_passing: rows.iter().filter(|r| r.2 == Verdict::Pass).map(|r| r.0).reduce(f64::max),
        conclusion: conclusion(&rows, levels, unit),
        interrupted: cancel.is_cancelled(),
    });
    let notes = show_ladder(ladder, &rows, io);
    let kept = keep_summary(ladder, summary.as_ref(), io);
    let gate = gate(&rows, kept);
    let gate = write_rows(w, ladder, &rows, summary.as_ref(), gate, io);
    let html = &w.common().output.html;
    if html.is_none() && dashboard.is_none() {
        return gate;
    }
    let page = ladder_page(ladder, &rows, notes);
    let mut code = gate;
    if let Some(path) = html {
        if let Err(p) = crate::lifecycle::artifacts::page(io, false, None, path, &page) {
            p.print(io.err);
            code = exit::RUN;
        }
    }
    if let Some(d) = &dashboard {
        d.finish(page);
    }
    code
}

/// Each level in turn, after its cooldown or at its shared start, until one fails, a stop, or
/// the last; its line on the terminal and the ladder so far on the live page. None when the first
/// level could not run.
fn run_levels(
    ladder: &Ladder,
    command_line: &[String],
    io: &mut Io,
    cancel: &CancellationToken,
    dashboard: Option<&crate::dashboard::Dashboard>,
) -> Option<Vec<(f64, Option<Doc>, Verdict)>> {
    let (levels, unit, cooldown) = (&ladder.levels, ladder.unit, ladder.cooldown);
    let mut rows: Vec<(f64, Option<Doc>, Verdict)> = Vec::new();
    let outer = io.stage.clone();
    let mut spent = std::time::Duration::ZERO;
    for (i, level) in levels.iter().enumerate() {
        // The ETA is the most the ladder can take: it stops at the first level that fails.
        io.stage = super::stage(&outer, "level", (i + 1, levels.len()), spent, ladder.planned, cooldown);
        if i > 0 && !cooldown.is_zero() && ladder.starts[i].is_none() && !pause(cooldown, io, cancel) {
            break;
        }
        if cancel.is_cancelled() {
            break;
        }
        let mut wl = match plan_at(&ladder.whole, ladder.per_s(*level)) {
            Ok(wl) => wl,
            Err(e) => {
                e.context(format!("level {level}")).print(io.err);
                break;
            }
        };
        let file: Option<PathBuf> =
            ladder.opts.out.as_ref().map(|d| d.join(format!("{}-level-{level}.json", ladder.slug)));
        wl.set_output(file, None, true);
        wl.common_mut().spread.start_at = ladder.starts[i];
        let began = std::time::Instant::now();
        let outcome = wl.execute(command_line.to_vec(), io, cancel, dashboard);
        spent += began.elapsed();
        let verdict = match &outcome.doc {
            Some(d) => judge(d, &ladder.criteria),
            None if cancel.is_cancelled() => Verdict::Interrupted,
            None => Verdict::Fail(vec!["the run could not complete".into()]),
        };
        let line = format!("  {level} {unit}: {}\n", level_line(&verdict, outcome.doc.as_ref()));
        let _ = write!(io.out, "{}", crate::report::progress::paint(&line, io.color));
        let stop = verdict != Verdict::Pass;
        if i == 0 && outcome.doc.is_none() && !cancel.is_cancelled() {
            return None;
        }
        rows.push((*level, outcome.doc, verdict));
        if let Some(d) = dashboard {
            // Under the current level, the ladder so far.
            let so_far = ladder::section(&rungs(&rows), ladder.kind, unit, "the ladder so far".into(), String::new());
            d.keep(vec![so_far]);
        }
        if stop {
            break;
        }
    }
    io.stage = outer;
    Some(rows)
}

/// A level's verdict as its line says it.
fn level_line(verdict: &Verdict, doc: Option<&Doc>) -> String {
    match (verdict, doc) {
        (Verdict::Pass, Some(d)) => format!("ok, {}", super::run_line(&entry(d))),
        (Verdict::Fail(why), _) => format!("x: {}", why.join("; ")),
        (Verdict::NotTheServer(why), _) => format!("no verdict on the server: {why}"),
        (Verdict::Unmeasured(why), _) => format!("no verdict: nothing measured ({why})"),
        (Verdict::Interrupted, _) => "interrupted".into(),
        (Verdict::Pass, None) => unreachable!("a pass has a document"),
    }
}

/// The ladder's table, conclusion and notes on the terminal; the notes, for the page.
fn show_ladder(ladder: &Ladder, rows: &[(f64, Option<Doc>, Verdict)], io: &mut Io) -> String {
    let _ = writeln!(io.out);
    let _ = write!(io.out, "{}", ladder_table(ladder.kind, rows).markdown());
    let conclusion = conclusion(rows, &ladder.levels, ladder.unit);
    let _ = writeln!(io.out, "\n{}", crate::report::progress::paint(&conclusion, io.color));
    let notes = suspect_notes(rows, ladder.unit);
    if !notes.is_empty() {
        let _ = write!(io.out, "{notes}");
    }
    if let Some(dir) = &ladder.opts.out {
        let _ = writeln!(io.out, "Result documents: {}", dir.display());
    }
    notes
}

/// Beside the levels' documents, the ladder itself: `bolide report DIR` draws it from there.
/// Exit 3 when it could not be written.
fn keep_summary(ladder: &Ladder, summary: Option<&CapacitySummary>, io: &mut Io) -> i32 {
    let (Some(dir), Some(s)) = (&ladder.opts.out, summary) else { return exit::OK };
    let path = dir.join(format!("{}-capacity.json", ladder.slug));
    let written = crate::files::write_atomically(&path, |w| {
        serde_json::to_writer_pretty(&mut *w, s).map_err(std::io::Error::other)?;
        std::io::Write::write_all(w, b"\n")
    });
    match written {
        Ok(()) => exit::OK,
        Err(e) => {
            Problem::new(format!("cannot write {}: {e}", path.display())).print(io.err);
            exit::RUN
        }
    }
}

/// A server that fails even the first level breaks the ladder's criteria: a gate for CI. A
/// ladder that stopped without a verdict (the limit was not the server, or nothing was measured)
/// found no knee: inconclusive, as every other command says it. `kept`: whether the summary was
/// written.
fn gate(rows: &[(f64, Option<Doc>, Verdict)], kept: i32) -> i32 {
    match (rows.first().map(|r| &r.2), rows.last().map(|r| &r.2)) {
        _ if kept != exit::OK => kept,
        (Some(Verdict::Fail(_)), _) => exit::THRESHOLDS,
        (_, Some(Verdict::NotTheServer(_) | Verdict::Unmeasured(_))) => exit::INCONCLUSIVE,
        _ => exit::OK,
    }
}

/// `--out csv=PATH` (the levels' seconds) and `--junit` (a case per level); the exit code
/// `gate`, made 3 when one could not be written.
fn write_rows(
    w: &CapacityWorkload,
    ladder: &Ladder,
    rows: &[(f64, Option<Doc>, Verdict)],
    summary: Option<&CapacitySummary>,
    mut gate: i32,
    io: &mut Io,
) -> i32 {
    let unit = ladder.unit;
    if let Some(path) = &ladder.opts.csv {
        let rows: String = rows
            .iter()
            .filter_map(|(level, doc, _)| {
                Some(crate::report::csv::rows(doc.as_ref()?, &format!("level {level} {unit}")))
            })
            .collect();
        if let Err(p) = crate::lifecycle::artifacts::csv(path, &rows) {
            p.print(io.err);
            gate = exit::RUN;
        }
    }
    if let Some(path) = w.common().gate.junit.as_deref() {
        let conclusion = summary.map(|s| s.conclusion.clone()).unwrap_or_default();
        let suite = junit_suite(rows, &ladder.slug, unit, conclusion);
        if let Err(p) = crate::lifecycle::artifacts::junit(path, &[suite]) {
            p.print(io.err);
            gate = exit::RUN;
        }
    }
    gate
}

/// The ladder's page: the ladder as the page's summary, then every level's run (each level a
/// series of its own: levels are no repetitions of one run).
fn ladder_page(ladder: &Ladder, rows: &[(f64, Option<Doc>, Verdict)], notes: String) -> String {
    let (kind, unit) = (ladder.kind, ladder.unit);
    let summary = ladder::section(&rungs(rows), kind, unit, conclusion(rows, &ladder.levels, unit), notes);
    let series: Vec<crate::results::compare::Series> = rows
        .iter()
        .filter_map(|(level, doc, _)| {
            let name = format!("level {level} {unit}");
            let d = doc.clone()?;
            Some(crate::results::compare::Series {
                name: name.clone(),
                source: PathBuf::new(),
                runs: vec![(PathBuf::from(name), d)],
            })
        })
        .collect();
    let mut sections = vec![summary];
    sections.extend(crate::results::report::runs_sections(&series));
    crate::report::html::page("bolide capacity", &sections)
}

fn entry(d: &Doc) -> super::RunEntry {
    crate::results::RunEntry::of(1, None, &d.measures())
}

/// The levels run so far as the ladder shows them.
fn rungs(rows: &[(f64, Option<Doc>, Verdict)]) -> Vec<Rung> {
    rows.iter().map(|(level, doc, v)| (*level, doc.as_ref().map(Doc::measures), v.clone())).collect()
}

/// The reports' ladder table ([`ladder::table`]) of the levels run.
pub fn ladder_table(kind: &str, rows: &[(f64, Option<Doc>, Verdict)]) -> Table {
    ladder::table(kind, &rungs(rows))
}

/// The ladder's answer first ([`ladder::knee_facts`]).
#[cfg(test)]
pub(super) fn knee_facts(rows: &[(f64, Option<Doc>, Verdict)], unit: &str) -> Vec<crate::report::band::Fact> {
    ladder::knee_facts(&rungs(rows), unit)
}

/// The "(suspect: see below)" of the level lines, explained ([`ladder::suspect_notes`]).
pub fn suspect_notes(rows: &[(f64, Option<Doc>, Verdict)], unit: &str) -> String {
    ladder::suspect_notes(&rungs(rows), unit)
}

/// One sentence: the highest passing level, and what stopped the ladder ([`ladder::conclusion`]).
pub fn conclusion(rows: &[(f64, Option<Doc>, Verdict)], levels: &[f64], unit: &str) -> String {
    ladder::conclusion(&rungs(rows), levels, unit)
}

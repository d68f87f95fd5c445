//! `bolide compare`: series of saved runs against a baseline, in the Meteor reports' words
//! ("29.21% faster, 49.15% less cpu, 22.50% less ram"), with medians, spreads and whether each
//! difference stands out from run-to-run noise; for HTTP also the ab-style side-by-side table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::paired::{self, Role, Trust};
use super::stats;
use super::{runs_table, table_notes, watched_names, RunEntry};
use crate::cli::Format;
use crate::problem::Problem;
use crate::report::blocks::Block;
use crate::report::table::{
    change_pct, faster_slower, less_more, meteor_bytes, meteor_cpu, meteor_time, more_fewer, ms, Table, Tone,
};
use crate::report::term::grouped;
use crate::stats::doc::{differences, Doc};

/// One series: a directory from `bench`, or one file.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub source: PathBuf,
    /// Runs in order (file name order, run numbers compared as numbers).
    pub runs: Vec<(PathBuf, Doc)>,
}

/// A file left out, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    pub file: String,
    pub reason: String,
}

/// `tasks-reactive-10.json` sorts after `tasks-reactive-9.json`.
fn natural_key(p: &Path) -> (String, u64) {
    let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match stem.rsplit_once('-') {
        Some((head, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => {
            (head.to_string(), n.parse().unwrap_or(0))
        }
        _ => (stem, 0),
    }
}

/// Reads one input into a series; files that are not usable results are named in `skipped`.
pub fn load_series(input: &Path, skipped: &mut Vec<Skipped>) -> Result<Series, Problem> {
    let mut runs = Vec::new();
    let name_of_input =
        input.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| input.display().to_string());
    if input.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(input)
            .map_err(|e| format!("{}: cannot read the directory: {e}", input.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort_by_key(|p| natural_key(p));
        for f in &files {
            let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
            // What bolide writes beside a series' documents (its report, CSV rows, gnuplot data,
            // JUnit verdicts) and hidden files are no runs, and are passed over without a word.
            let companion = matches!(ext, "tsv" | "html" | "csv" | "xml");
            if companion || f.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            if ext != "json" {
                skipped.push(Skipped { file: f.display().to_string(), reason: "not a result document (.json)".into() });
                continue;
            }
            let read = crate::files::read_limited(f, crate::stats::doc::MAX_DOC_BYTES)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|b| String::from_utf8(b).map_err(|_| "not a result document (not UTF-8 text)".into()));
            let text = match read {
                Ok(t) => t,
                Err(reason) => {
                    skipped.push(Skipped { file: f.display().to_string(), reason });
                    continue;
                }
            };
            let head = crate::stats::result::Head::of(&text).unwrap_or_default();
            let summary = match head.format.as_deref() {
                Some("bolide.bench") => serde_json::from_str::<super::BenchSummary>(&text).ok(),
                _ => None,
            };
            // A capacity ladder's or a comparison's summary beside the runs: no run either.
            let other_summary = ["bolide.capacity", "bolide.comparison", "bolide.bench-parameters", "bolide.levels"];
            if head.format.as_deref().is_some_and(|f| other_summary.contains(&f)) {
                continue;
            }
            if let Some(summary) = summary {
                // A bench summary: its listed runs must be here.
                for r in &summary.runs {
                    if let Some(file) = &r.file {
                        if !input.join(file).exists() {
                            skipped.push(Skipped {
                                file: input.join(file).display().to_string(),
                                reason: format!("run {} is listed in {} but missing", r.run, f.display()),
                            });
                        }
                    }
                }
                continue;
            }
            match Doc::from_json(&text) {
                Ok(d) => runs.push((f.clone(), d)),
                Err(reason) => skipped.push(Skipped { file: f.display().to_string(), reason: reason.to_string() }),
            }
        }
    } else if input.exists() {
        match Doc::load(input) {
            Ok(d) => runs.push((input.to_path_buf(), d)),
            Err(reason) => skipped.push(Skipped { file: input.display().to_string(), reason: reason.to_string() }),
        }
    } else {
        return Err(format!("{}: no such file or directory", input.display()).into());
    }
    // The series is named by its runs' label when they agree, else by the directory or file.
    let labels: Vec<&str> = runs.iter().filter_map(|(_, d)| d.label()).collect();
    let name = match labels.first() {
        Some(l) if labels.len() == runs.len() && labels.iter().all(|x| x == l) => l.to_string(),
        _ => name_of_input,
    };
    Ok(Series { name, source: input.to_path_buf(), runs })
}

/// The runs of one workload in one series.
/// Whether every run of the series is of one workload.
fn single_workload(s: &Series) -> bool {
    let mut names = s.runs.iter().map(|(_, d)| d.workload());
    names.next().is_some_and(|first| names.all(|n| n == first))
}

fn runs_of<'a>(s: &'a Series, workload: &str) -> Vec<&'a Doc> {
    s.runs.iter().filter(|(_, d)| d.workload() == workload).map(|(_, d)| d).collect()
}

/// A metric compared between two series.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricRow {
    pub metric: String,
    pub baseline_median: f64,
    pub baseline_min: f64,
    pub baseline_max: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Change of the mean against the baseline's mean, percent.
    pub change_of_means_pct: Option<f64>,
    /// In the reports' words ("29.21% faster").
    pub words: String,
    /// The test's p-value: the paired t-test of interleaved runs, else Welch's t-test (absent
    /// with fewer than two runs or pairs).
    pub p_value: Option<f64>,
    /// `paired` (interleaved runs, judged within pairs) or `welch` (two samples).
    pub test: String,
    /// Paired: the estimated change, percent, and its 95% confidence interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_estimate_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_interval_pct: Option<[f64; 2]>,
    pub verdict: String,
    /// The verdict in one word: better, worse, same (no difference, or within run-to-run
    /// noise) or inconclusive (too few clean runs to tell).
    pub judgement: Judgement,
    /// The smallest change of the mean these runs could detect (80% power at p < 0.05, from
    /// the clean runs' own variance), percent of the baseline's mean; null with fewer than two
    /// clean runs a side.
    pub detectable_pct: Option<f64>,
    /// The noise the detectable change came from, for the runs a change would need.
    #[serde(skip)]
    pub spread: Option<Noise>,
    /// With `--detect`: the runs a side that would detect that change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detect: Option<Detect>,
}

/// The noise a metric's runs showed: the clean runs' variances and the baseline's clean mean
/// (two samples), or the within-pair spread (interleaved pairs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    Samples { va: f64, vb: f64, base_mean: f64 },
    Pairs { sd: f64, log: bool, base_mean: f64 },
}

impl Noise {
    /// No spread at all between the runs (or pairs) to measure.
    fn none(self) -> bool {
        match self {
            Noise::Samples { va, vb, .. } => va + vb == 0.0,
            Noise::Pairs { sd, .. } => sd == 0.0,
        }
    }

    /// Runs a side (pairs) that would detect a change of `pct` percent.
    fn needed(self, pct: f64) -> Option<usize> {
        match self {
            _ if self.none() => None,
            Noise::Samples { va, vb, base_mean } => stats::runs_needed(va, vb, pct / 100.0 * base_mean),
            Noise::Pairs { sd, log, base_mean } => stats::pairs_needed(sd, log, base_mean, pct),
        }
    }
}

/// How many runs a side would detect a given change of a metric (`--detect`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Detect {
    pub change_pct: f64,
    /// None: more than [`stats::MAX_RUNS`], or no spread measured to tell.
    pub runs_needed: Option<usize>,
}

/// A metric's verdict in one word.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Judgement {
    Better,
    Worse,
    Same,
    Inconclusive,
}

impl Judgement {
    pub fn word(self) -> &'static str {
        match self {
            Judgement::Better => "better",
            Judgement::Worse => "worse",
            Judgement::Same => "same",
            Judgement::Inconclusive => "inconclusive",
        }
    }

    pub fn tone(self) -> Tone {
        match self {
            Judgement::Better => Tone::Good,
            Judgement::Worse => Tone::Bad,
            Judgement::Same => Tone::Plain,
            Judgement::Inconclusive => Tone::Warn,
        }
    }

    /// From the test's p-value (None: no verdict, or no difference at all when `same`) and the
    /// change of the means; `higher_is_better` for throughput, lower for time, CPU, RAM, latency
    /// and errors.
    fn of(p: Option<f64>, no_difference: bool, change_pct: Option<f64>, higher_is_better: bool) -> Judgement {
        match p {
            None if no_difference => Judgement::Same,
            None => Judgement::Inconclusive,
            Some(p) if p >= stats::ALPHA => Judgement::Same,
            Some(_) => match change_pct {
                Some(c) if c > 0.0 => {
                    if higher_is_better {
                        Judgement::Better
                    } else {
                        Judgement::Worse
                    }
                }
                Some(c) if c < 0.0 => {
                    if higher_is_better {
                        Judgement::Worse
                    } else {
                        Judgement::Better
                    }
                }
                _ => Judgement::Same,
            },
        }
    }
}

/// Per-step latency side by side (DDP).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRow {
    pub step: String,
    pub baseline_p50_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub baseline_p99_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// One target's figures side by side (DDP runs over several servers), matched by position in
/// the target list: medians over the runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetRow {
    /// `#N URL` (the series' URL, and the baseline's when it differs).
    pub target: String,
    pub baseline_subs_per_min: Option<f64>,
    pub subs_per_min: Option<f64>,
    pub baseline_calls_per_min: Option<f64>,
    pub calls_per_min: Option<f64>,
    /// Time to `ready` p99 (every step's when the scenario has no subscription).
    pub baseline_p99_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub baseline_failed_users: Option<f64>,
    pub failed_users: Option<f64>,
}

/// One series against the baseline on one workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub workload: String,
    pub kind: String,
    pub baseline: String,
    pub series: String,
    pub baseline_runs: Vec<RunEntry>,
    pub runs: Vec<RunEntry>,
    /// Per run: the reports' sentence against the baseline's run of the same number.
    pub per_run: Vec<String>,
    /// The same on the means, the workload's own throughput first.
    pub on_means: String,
    /// Interleaved (`bench --parameter-list`): the runs judged in this many pairs, run `i` of
    /// each side together; absent when the series ran one after the other (two samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    /// Those pairs: (baseline run, series run), as indices into the runs.
    #[serde(skip)]
    pub pairing: Option<paired::Pairs>,
    pub metrics: Vec<MetricRow>,
    pub steps: Vec<StepRow>,
    /// Per target, when the runs spread their users over several servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetRow>,
    /// Settings that differ between the two workloads, compared on purpose
    /// (`--allow-different-workloads`); empty when they are the same workload.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
    /// Two values of one `bench --parameter-list`, as their documents record it: the values that
    /// differ (`d: 10 against 11`); compared as bench compared them, without the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
}

/// The whole comparison, as `--format json` writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub format: String,
    pub version: u32,
    pub baseline: String,
    pub series: Vec<SeriesInfo>,
    pub skipped: Vec<Skipped>,
    /// Workloads left out, with the difference that made them incomparable.
    pub refused: Vec<String>,
    pub comparisons: Vec<Comparison>,
    /// HTTP workloads: the ab-style table, one column per series.
    pub http_tables: Vec<HttpTable>,
    /// `--fail-on`: every rule judged on every comparison (absent without rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate: Vec<super::gate::GateResult>,
    /// The gate's outcome over every rule: pass, fail or inconclusive (absent without --fail-on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_outcome: Option<super::gate::Outcome>,
    /// `--allow-inconclusive` was given: an inconclusive gate exits 0.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_inconclusive: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeriesInfo {
    pub name: String,
    pub source: String,
    pub runs: usize,
}

/// The Node-vs-nginx form: one column per series (means over its runs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HttpTable {
    pub workload: String,
    pub columns: Vec<HttpColumn>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HttpColumn {
    pub series: String,
    pub runs: usize,
    pub requests: f64,
    pub time_taken_s: f64,
    pub requests_per_s: f64,
    /// Mean, across all concurrent requests (ab's second "Time per request").
    pub time_per_request_ms: f64,
    pub transfer_kbytes_per_s: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p99_9_ms: f64,
    pub max_ms: f64,
}

fn entries(docs: &[&Doc]) -> Vec<RunEntry> {
    docs.iter().enumerate().map(|(i, d)| RunEntry::of(i as u32 + 1, None, &d.measures())).collect()
}

/// "29.21% faster, 49.15% less cpu, 22.50% less ram" for `new` against `base`; CPU and RAM only
/// when both were watched. `speed` is each side's seconds per unit of work. For HTTP, throughput
/// and latency in their own words ("44.40% fewer requests/s, 12.00% more p99") instead of a
/// "faster" computed on time per request.
pub fn sentence(base: &RunEntry, new: &RunEntry, base_speed: f64, new_speed: f64) -> String {
    // HTTP's requests per second, or the units of work a closed loop of a fixed length did
    // (ddp-calls, ddp-connect: their Time is the run's length), then p99; else the Time.
    let throughput = match (base.requests_per_s, new.requests_per_s, base.per_s, new.per_s) {
        (Some(a), Some(b), _, _) => Some((a, b, "requests".to_string())),
        (_, _, Some(a), Some(b)) => Some((a, b, base.unit.clone().unwrap_or_else(|| "calls".into()))),
        _ => None,
    };
    let mut parts = match throughput {
        Some((a, b, unit)) => {
            let mut p = vec![more_fewer(a, b, &format!("{unit}/s"))];
            if let (Some(x), Some(y)) = (base.p99_ms, new.p99_ms) {
                p.push(less_more(x, y, "p99"));
            }
            p
        }
        None => vec![faster_slower(base_speed, new_speed)],
    };
    if let (Some(a), Some(b)) = (base.cpu_pct, new.cpu_pct) {
        parts.push(less_more(a, b, "cpu"));
    }
    if let (Some(a), Some(b)) = (base.ram_bytes, new.ram_bytes) {
        parts.push(less_more(a, b, "ram"));
    }
    parts.join(", ")
}

/// Which runs count for significance: those not marked suspect. Medians and ranges show every run.
#[derive(Clone, Copy)]
struct Clean<'a> {
    baseline: &'a [bool],
    series: &'a [bool],
}

/// The values of the runs that are not suspect.
fn keep(v: &[f64], ok: &[bool]) -> Vec<f64> {
    v.iter().zip(ok.iter().chain(std::iter::repeat(&true))).filter(|(_, ok)| **ok).map(|(x, _)| *x).collect()
}

/// The significance verdict over the runs that are not suspect, saying what was left out.
fn clean_verdict(a: &[f64], b: &[f64], clean: Clean) -> (Option<f64>, String) {
    let (ca, cb) = (keep(a, clean.baseline), keep(b, clean.series));
    let left_out = (a.len() - ca.len()) + (b.len() - cb.len());
    if ca.is_empty() || cb.is_empty() {
        let which = match (ca.is_empty(), cb.is_empty()) {
            (true, true) => "every run of both series is suspect",
            (true, false) => "every baseline run is suspect",
            _ => "every run of this series is suspect",
        };
        return (None, format!("no verdict: {which} (bolide or the machine was the limit)"));
    }
    let p = stats::welch(&ca, &cb).map(|w| w.p);
    let mut verdict = stats::verdict(&ca, &cb);
    if left_out > 0 {
        let runs = if left_out == 1 { "run" } else { "runs" };
        verdict.push_str(&format!("; without {left_out} suspect {runs}"));
    }
    (p, verdict)
}

/// Interleaved runs: their pairs, and each side's runs' trust.
type Paired<'a> = (&'a [(usize, usize)], &'a [Trust], &'a [Trust]);

/// How a comparison's runs are judged: as two samples without their suspect runs, or in
/// interleaved pairs with each run's trust.
#[derive(Clone, Copy)]
struct How<'a> {
    clean: Clean<'a>,
    paired: Option<Paired<'a>>,
}

fn metric(name: &str, a: &[f64], b: &[f64], how: How, role: Role, words: impl Fn(f64, f64) -> String) -> MetricRow {
    let (bmin, bmax) = stats::range(a);
    let (min, max) = stats::range(b);
    let (ma, mb) = (stats::mean(a), stats::mean(b));
    let higher_is_better = role.higher_is_better();
    // Every run of both sides the same (no errors on either side): the same, whatever the count of
    // runs; never "inconclusive" beside "no errors".
    let identical = a.first().is_some_and(|first| a.iter().chain(b).all(|v| v == first));
    let mut row = MetricRow {
        judgement: Judgement::Same,
        metric: name.into(),
        baseline_median: stats::median(a),
        baseline_min: bmin,
        baseline_max: bmax,
        median: stats::median(b),
        min,
        max,
        change_of_means_pct: change_pct(ma, mb),
        words: words(ma, mb),
        p_value: None,
        test: "welch".into(),
        change_estimate_pct: None,
        change_interval_pct: None,
        verdict: String::new(),
        detectable_pct: None,
        spread: None,
        detect: None,
    };
    if let Some((pairs, ta, tb)) = how.paired {
        let chosen = paired::choose(a, b, ta, tb, pairs, role);
        let judged = paired::judge(&chosen, role);
        row.test = "paired".into();
        row.verdict = judged.verdict;
        if let Some(t) = judged.test {
            row.p_value = Some(t.p);
            row.change_estimate_pct = Some(t.change_pct);
            row.change_interval_pct = Some([t.interval_pct.0, t.interval_pct.1]);
            row.detectable_pct = stats::paired_mde_pct(t.sd, t.pairs, t.log, t.base_mean, 1.0);
            row.spread = Some(Noise::Pairs { sd: t.sd, log: t.log, base_mean: t.base_mean });
        } else if chosen.a.len() >= 2 {
            // Every pair the same: no spread to measure.
            row.spread = Some(Noise::Pairs { sd: 0.0, log: true, base_mean: stats::mean(&chosen.a) });
        }
        row.judgement = match (identical, judged.decided, judged.test) {
            (true, _, _) => Judgement::Same,
            (false, false, _) => Judgement::Inconclusive,
            (false, true, t) => Judgement::of(
                t.map(|t| t.p),
                row.verdict.starts_with("no difference"),
                t.map(|t| t.change_pct),
                higher_is_better,
            ),
        };
        return row;
    }
    // Two samples: error rates are the server's answers and count in every run; everything else
    // without the suspect runs.
    let every = vec![true; a.len().max(b.len())];
    let clean = if role == Role::Answer { Clean { baseline: &every, series: &every } } else { how.clean };
    let (p_value, verdict) = clean_verdict(a, b, clean);
    let (ca, cb) = (keep(a, clean.baseline), keep(b, clean.series));
    row.spread = (ca.len() >= 2 && cb.len() >= 2).then(|| Noise::Samples {
        va: stats::variance(&ca),
        vb: stats::variance(&cb),
        base_mean: stats::mean(&ca),
    });
    row.judgement = match identical {
        true => Judgement::Same,
        false => Judgement::of(p_value, verdict.starts_with("no difference"), change_pct(ma, mb), higher_is_better),
    };
    row.p_value = p_value;
    row.verdict = verdict;
    row.detectable_pct = stats::detectable_pct(&ca, &cb);
    row
}

impl MetricRow {
    /// Fills in how many runs a side would detect a change of `pct` percent of the baseline.
    pub fn detecting(&mut self, pct: f64) {
        let runs_needed = self.spread.and_then(|n| n.needed(pct));
        self.detect = Some(Detect { change_pct: pct, runs_needed });
    }
}

fn compare_one(workload: &str, base_name: &str, base: &[&Doc], name: &str, new: &[&Doc]) -> Comparison {
    let kind = base.first().map_or("ddp", |d| d.kind());
    let baseline_runs = entries(base);
    let runs = entries(new);
    let ok = |rs: &[RunEntry]| rs.iter().map(|r| r.suspect.is_none()).collect::<Vec<bool>>();
    let (base_ok, new_ok) = (ok(&baseline_runs), ok(&runs));
    let (base_trust, new_trust) = (Trust::of_runs(&baseline_runs), Trust::of_runs(&runs));
    let starts = |d: &[&Doc]| d.iter().map(|d| paired::started(d.envelope().started_at)).collect::<Vec<_>>();
    let pairing = paired::interleaved(&starts(base), &starts(new));
    let how = How {
        clean: Clean { baseline: &base_ok, series: &new_ok },
        paired: pairing.as_deref().map(|p| (p, base_trust.as_slice(), new_trust.as_slice())),
    };
    let speed = |d: &[&Doc]| d.iter().map(|d| d.measures().speed_s).collect::<Vec<f64>>();
    let (bs, ns) = (speed(base), speed(new));
    let per_run = runs
        .iter()
        .enumerate()
        .map(|(i, r)| match baseline_runs.get(i) {
            Some(b) => sentence(b, r, bs[i], ns[i]),
            None => format!("no baseline run {}", i + 1),
        })
        .collect();
    let (bm, nm) = (RunEntry::mean_of(&baseline_runs), RunEntry::mean_of(&runs));
    let on_means = match (&bm, &nm) {
        (Some(b), Some(n)) => sentence(b, n, stats::mean(&bs), stats::mean(&ns)),
        _ => String::new(),
    };
    let faster = Role::Speed { higher_is_better: true };
    let slower = Role::Speed { higher_is_better: false };
    let mut metrics = Vec::new();
    if kind == "http" {
        let rps = |v: &[f64]| v.iter().map(|s| if *s > 0.0 { 1.0 / s } else { 0.0 }).collect::<Vec<f64>>();
        metrics.push(metric("Requests per second", &rps(&bs), &rps(&ns), how, faster, |a, b| {
            more_fewer(a, b, "requests/s")
        }));
    } else {
        // The transport built-ins: their calls (or connects) per second, the figure they are
        // about, first; their Time is the run's fixed length.
        let rate = |rs: &[RunEntry]| rs.iter().map(|r| r.per_s).collect::<Option<Vec<f64>>>();
        if let (Some(a), Some(b), Some(unit)) = (rate(&baseline_runs), rate(&runs), baseline_runs[0].unit.clone()) {
            let name = format!("{}{} per second", unit[..1].to_uppercase(), &unit[1..]);
            metrics.push(metric(&name, &a, &b, how, faster, |x, y| more_fewer(x, y, &format!("{unit}/s"))));
        }
        metrics.push(metric("Time (s)", &bs, &ns, how, slower, faster_slower));
    }
    let col = |rs: &[RunEntry], f: fn(&RunEntry) -> Option<f64>| -> Option<Vec<f64>> {
        let v: Vec<f64> = rs.iter().filter_map(f).collect();
        (!v.is_empty() && v.len() == rs.len()).then_some(v)
    };
    type Pick = fn(&RunEntry) -> Option<f64>;
    let other = Role::Other;
    let optional: [(&str, Pick, &str, Role); 10] = [
        ("CPU (%)", |r| r.cpu_pct, "cpu", other),
        ("RAM (MB)", |r| r.ram_bytes.map(|b| b / 1e6), "ram", other),
        ("p99 latency (ms)", |r| r.p99_ms, "p99", slower),
        ("Mean latency (ms)", |r| r.mean_ms, "mean latency", slower),
        ("Event-loop p99 (ms)", |r| r.eventloop_p99_ms, "event-loop p99", other),
        ("GC time (ms)", |r| r.gc_ms, "gc time", other),
        // The generator's own cost: whether bolide, not the server, moved.
        ("bolide CPU per request or message (µs)", |r| r.bolide_cpu_us, "bolide cpu", other),
        // Browser users: what the person at the page lives with, and what a browser costs.
        ("Page LCP p75 (ms)", |r| r.browser.as_ref().and_then(|b| b.lcp_p75_ms), "lcp", slower),
        ("Page INP p75 (ms)", |r| r.browser.as_ref().and_then(|b| b.inp_p75_ms), "inp", slower),
        ("Browser CPU per user (%)", |r| r.browser.as_ref().and_then(|b| b.cpu_pct_per_user), "browser cpu", other),
    ];
    for (name, pick, word, role) in optional {
        if let (Some(a), Some(b)) = (col(&baseline_runs, pick), col(&runs, pick)) {
            metrics.push(metric(name, &a, &b, how, role, |x, y| less_more(x, y, word)));
        }
    }
    // A protocol's own figures, each a metric of its own where every run of both sides has it:
    // its latencies at p50 and p99 (lower is better), its throughput counts per second (higher).
    let named = |rs: &[RunEntry], of: fn(&RunEntry) -> &BTreeMap<String, f64>, name: &str| -> Option<Vec<f64>> {
        rs.iter().map(|r| of(r).get(name).copied()).collect::<Option<Vec<f64>>>().filter(|v| !v.is_empty())
    };
    type Named = fn(&RunEntry) -> &BTreeMap<String, f64>;
    let protocol: [(Named, Role); 2] = [(|r| &r.measures_ms, slower), (|r| &r.events_per_s, faster)];
    for (of, role) in protocol {
        for name in baseline_runs.first().map(|r| of(r).keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            let (Some(a), Some(b)) = (named(&baseline_runs, of, &name), named(&runs, of, &name)) else { continue };
            metrics.push(if role.higher_is_better() {
                let unit = format!("{}/s", name.trim_end_matches("_per_s"));
                metric(&name, &a, &b, how, role, |x, y| more_fewer(x, y, &unit))
            } else {
                metric(&format!("{name} (ms)"), &a, &b, how, role, |x, y| less_more(x, y, &name))
            });
        }
    }
    let errs = |rs: &[RunEntry]| rs.iter().map(|r| r.error_rate_pct).collect::<Vec<f64>>();
    metrics.push(metric("Error rate (%)", &errs(&baseline_runs), &errs(&runs), how, Role::Answer, |x, y| {
        if x == 0.0 && y == 0.0 {
            "no errors".into()
        } else {
            format!("{x:.2}% -> {y:.2}%")
        }
    }));
    Comparison {
        workload: workload.into(),
        kind: kind.into(),
        baseline: base_name.into(),
        series: name.into(),
        baseline_runs,
        runs,
        per_run,
        on_means,
        pairs: pairing.as_ref().map(Vec::len),
        pairing,
        metrics,
        steps: step_rows(base, new),
        targets: target_rows(base, new),
        differences: Vec::new(),
        parameter: None,
    }
}

/// Per target position: the medians over the runs of subscriptions and calls per minute, time to
/// ready p99 and failed users.
fn target_rows(base: &[&Doc], new: &[&Doc]) -> Vec<TargetRow> {
    type Figures = (String, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
    fn per_target(docs: &[&Doc]) -> Vec<Figures> {
        let mut out: Vec<Figures> = Vec::new();
        for d in docs {
            let Some(d) = d.ddp() else { continue };
            for (i, t) in d.per_target.iter().enumerate() {
                if out.len() <= i {
                    out.push((t.url.clone(), Vec::new(), Vec::new(), Vec::new(), Vec::new()));
                }
                let f = &mut out[i];
                f.1.push(t.subscriptions_per_min);
                f.2.push(t.calls_per_min);
                if let Some(l) = t.subscribe_latency.as_ref().or(t.latency.as_ref()) {
                    f.3.push(l.p99_us as f64 / 1000.0);
                }
                f.4.push(t.users.failed as f64);
            }
        }
        out
    }
    let (a, b) = (per_target(base), per_target(new));
    let med = |v: Option<&Vec<f64>>| v.filter(|v| !v.is_empty()).map(|v| stats::median(v));
    (0..a.len().max(b.len()))
        .map(|i| {
            let (x, y) = (a.get(i), b.get(i));
            let target = match (x, y) {
                (Some(x), Some(y)) if x.0 != y.0 => format!("#{} {} (was {})", i + 1, y.0, x.0),
                (_, Some(f)) | (Some(f), None) => format!("#{} {}", i + 1, f.0),
                (None, None) => unreachable!("a position one of them has"),
            };
            TargetRow {
                target,
                baseline_subs_per_min: med(x.map(|f| &f.1)),
                subs_per_min: med(y.map(|f| &f.1)),
                baseline_calls_per_min: med(x.map(|f| &f.2)),
                calls_per_min: med(y.map(|f| &f.2)),
                baseline_p99_ms: med(x.map(|f| &f.3)),
                p99_ms: med(y.map(|f| &f.3)),
                baseline_failed_users: med(x.map(|f| &f.4)),
                failed_users: med(y.map(|f| &f.4)),
            }
        })
        .collect()
}

/// Median over runs of each step's p50 and p99, steps in the baseline's order.
fn step_rows(base: &[&Doc], new: &[&Doc]) -> Vec<StepRow> {
    fn per_step(docs: &[&Doc]) -> BTreeMap<String, (Vec<f64>, Vec<f64>)> {
        let mut out: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for d in docs {
            if let Some(d) = d.ddp() {
                for (s, l) in d.steps.iter().filter_map(|s| s.latency.as_ref().map(|l| (s, l))) {
                    let e = out.entry(s.name.clone()).or_default();
                    e.0.push(l.p50_us as f64 / 1000.0);
                    e.1.push(l.p99_us as f64 / 1000.0);
                }
            }
        }
        out
    }
    let (a, b) = (per_step(base), per_step(new));
    let mut order: Vec<String> = Vec::new();
    for d in base.iter().chain(new) {
        if let Some(d) = d.ddp() {
            for s in &d.steps {
                if !order.contains(&s.name) {
                    order.push(s.name.clone());
                }
            }
        }
    }
    let med = |m: &BTreeMap<String, (Vec<f64>, Vec<f64>)>, k: &str, p99: bool| {
        m.get(k).map(|(x, y)| stats::median(if p99 { y } else { x }))
    };
    order
        .into_iter()
        .filter(|k| a.contains_key(k) || b.contains_key(k))
        .map(|k| StepRow {
            baseline_p50_ms: med(&a, &k, false),
            p50_ms: med(&b, &k, false),
            baseline_p99_ms: med(&a, &k, true),
            p99_ms: med(&b, &k, true),
            step: k,
        })
        .collect()
}

fn http_column(series: &str, docs: &[&Doc]) -> Option<HttpColumn> {
    let docs: Vec<&crate::stats::result::ResultDoc> = docs.iter().filter_map(|d| d.http()).collect();
    if docs.is_empty() {
        return None;
    }
    let avg = |f: &dyn Fn(&crate::stats::result::ResultDoc) -> f64| {
        stats::mean(&docs.iter().map(|d| f(d)).collect::<Vec<f64>>())
    };
    let ms_of = |us: u64| us as f64 / 1000.0;
    Some(HttpColumn {
        series: series.into(),
        runs: docs.len(),
        requests: avg(&|d| d.summary.responses as f64),
        time_taken_s: avg(&|d| d.summary.duration_s),
        requests_per_s: avg(&|d| d.summary.requests_per_s),
        time_per_request_ms: avg(&|d| {
            if d.summary.responses > 0 {
                d.summary.duration_s * 1000.0 / d.summary.responses as f64
            } else {
                0.0
            }
        }),
        transfer_kbytes_per_s: avg(&|d| d.summary.bytes_in_per_s / 1024.0),
        p50_ms: avg(&|d| ms_of(d.summary.latency.p50_us)),
        p90_ms: avg(&|d| ms_of(d.summary.latency.p90_us)),
        p99_ms: avg(&|d| ms_of(d.summary.latency.p99_us)),
        p99_9_ms: avg(&|d| ms_of(d.summary.latency.p99_9_us)),
        max_ms: avg(&|d| ms_of(d.summary.latency.max_us)),
    })
}

/// When two series are two values of one `bench --parameter-list` (every run of each recording
/// the same command line and label): the values that differ, in words.
fn parameter_between(base: &Series, other: &Series) -> Option<String> {
    fn one(s: &Series) -> Option<(&[String], &str)> {
        let (_, first) = s.runs.first()?;
        let (line, label) = (first.envelope().command_line, first.label()?);
        s.runs
            .iter()
            .all(|(_, d)| d.envelope().command_line == line && d.label() == Some(label))
            .then_some((line, label))
    }
    super::parameters::between(one(base)?, one(other)?)
}

/// Builds the report: every workload of the baseline against every other series.
pub fn build(series: &[Series], baseline: usize, skipped: Vec<Skipped>) -> Report {
    build_with(series, baseline, skipped, false)
}

/// [`build`], comparing workloads whose settings differ when `allow_different` (keep-alive
/// against none, 10 connections against 100: a comparison people make on purpose), with the
/// difference recorded beside the comparison.
pub fn build_with(series: &[Series], baseline: usize, skipped: Vec<Skipped>, allow_different: bool) -> Report {
    let base = &series[baseline];
    let mut workloads: Vec<String> = Vec::new();
    for (_, d) in &base.runs {
        if !workloads.contains(&d.workload()) {
            workloads.push(d.workload());
        }
    }
    let mut refused = Vec::new();
    let mut comparisons = Vec::new();
    let mut http_tables = Vec::new();
    for w in &workloads {
        let base_runs = runs_of(base, w);
        let parts = base_runs[0].workload_parts();
        let mut columns: Vec<HttpColumn> = http_column(&base.name, &base_runs).into_iter().collect();
        for (i, s) in series.iter().enumerate() {
            if i == baseline {
                continue;
            }
            let parameter = parameter_between(base, s);
            let allowed = allow_different || parameter.is_some();
            let mut runs = runs_of(s, w);
            // Compared on purpose, a series of one workload stands against a baseline of one,
            // whatever their names (a parameter list's `/delay/0` against `/delay/3`).
            if runs.is_empty() && allowed && workloads.len() == 1 && single_workload(s) {
                runs = s.runs.iter().map(|(_, d)| d).collect();
            }
            if runs.is_empty() {
                // The flag would compare them when each side is one workload.
                let hint = if workloads.len() == 1 && single_workload(s) {
                    format!(" (it ran {}; --allow-different-workloads compares them anyway)", s.runs[0].1.workload())
                } else {
                    String::new()
                };
                refused.push(format!("{w}: {} has no runs of it{hint}", s.name));
                continue;
            }
            let diff = differences(&parts, &runs[0].workload_parts());
            if !diff.is_empty() && !allowed {
                refused.push(format!(
                    "{w}: {} ran a different workload than {} ({}); not compared (--allow-different-workloads \
                     compares them anyway)",
                    s.name,
                    base.name,
                    diff.join("; ")
                ));
                continue;
            }
            // Runs inside a series must agree with each other too.
            let own = runs[0].workload_parts();
            let (same, odd): (Vec<&Doc>, Vec<&Doc>) =
                runs.into_iter().partition(|d| differences(&own, &d.workload_parts()).is_empty());
            for d in odd {
                refused.push(format!(
                    "{w}: a run of {} started {} differs from the rest ({}); left out",
                    s.name,
                    d.started_at(),
                    differences(&own, &d.workload_parts()).join("; ")
                ));
            }
            columns.extend(http_column(&s.name, &same));
            let mut c = compare_one(w, &base.name, &base_runs, &s.name, &same);
            c.differences = diff;
            c.parameter = parameter;
            comparisons.push(c);
        }
        if columns.len() > 1 {
            http_tables.push(HttpTable { workload: w.clone(), columns });
        }
    }
    for s in series.iter().filter(|s| s.name != base.name) {
        let allowed = allow_different || parameter_between(base, s).is_some();
        if allowed && workloads.len() == 1 && single_workload(s) {
            continue;
        }
        for (_, d) in &s.runs {
            let w = d.workload();
            if !workloads.contains(&w) && !refused.iter().any(|r| r.starts_with(&format!("{w}: {}", s.name))) {
                refused.push(format!("{w}: {} has runs of it, the baseline {} has none", s.name, base.name));
            }
        }
    }
    Report {
        format: "bolide.comparison".into(),
        version: 1,
        baseline: base.name.clone(),
        series: series
            .iter()
            .map(|s| SeriesInfo { name: s.name.clone(), source: s.source.display().to_string(), runs: s.runs.len() })
            .collect(),
        skipped,
        refused,
        comparisons,
        http_tables,
        gate: Vec::new(),
        gate_outcome: None,
        allow_inconclusive: false,
    }
}

fn fmt_metric(metric: &str, v: f64) -> String {
    if metric.starts_with("Time") {
        meteor_time(v)
    } else if metric.starts_with("CPU") {
        meteor_cpu(v)
    } else if metric.starts_with("RAM") {
        meteor_bytes(v * 1e6)
    } else if metric.contains("latency") || metric.starts_with("Event-loop") || metric.starts_with("GC") {
        ms(v)
    } else if metric.starts_with("Error") {
        format!("{v:.2}%")
    } else {
        grouped(v, 1)
    }
}

/// The regression gate's outcome as a verdict block: which rules failed or could not be judged,
/// and the exit code that follows (`allow_inconclusive` as recorded in the report).
pub fn gate_verdict(r: &Report) -> Option<Block> {
    use super::gate::Outcome;
    let rules = |o: Outcome| {
        let mut v: Vec<&str> = r.gate.iter().filter(|g| g.outcome == o).map(|g| g.rule.as_str()).collect();
        v.dedup();
        v.join(", ")
    };
    let (head, rest, tone) = match super::gate::overall(&r.gate)? {
        Outcome::Fail => {
            let mut rest = format!(" ({} failed): exit code 1.", rules(Outcome::Fail));
            let unsure = rules(Outcome::Inconclusive);
            if !unsure.is_empty() {
                rest.push_str(&format!(" Inconclusive too: {unsure}."));
            }
            ("Regression gate: FAILED", rest, Tone::Bad)
        }
        Outcome::Inconclusive => (
            "Regression gate: INCONCLUSIVE",
            format!(
                " ({} could not be judged from these runs): exit code {}. More runs, a quieter machine, or \
                 --ignore-significance can decide it.",
                rules(Outcome::Inconclusive),
                if r.allow_inconclusive { "0 (--allow-inconclusive)" } else { "4" }
            ),
            Tone::Warn,
        ),
        Outcome::Pass => ("Regression gate: pass", format!(": every rule held ({} judged).", r.gate.len()), Tone::Good),
    };
    Some(Block::Verdict { head: head.into(), rest, tone })
}

/// A comparison's headline: `c=off against c=on (ddp-calls): 4.5x calls/s, 12.00% less p99, ...`.
pub fn headline(c: &Comparison) -> Block {
    Block::Verdict {
        head: format!("{} against {}", c.series, c.baseline),
        rest: format!(" ({}): {}.", c.workload, c.on_means),
        tone: Tone::Plain,
    }
}

/// How a comparison's runs were judged, in a line under its tables.
fn design_note(c: &Comparison) -> String {
    match c.pairs {
        Some(n) => format!(
            "The runs ran interleaved: each metric is judged in {n} pairs (a run of each side, back to back) by a \
             paired t-test on the pairs' ratios, so what the machine did to both sides cancels; a busy machine \
             widens the interval, it does not void the comparison. A run at bolide's own limit bounds its side's \
             speed (the server was at least that fast): its pair counts where that bound decides it, and is left out, \
             named, where nothing does. Error rates count every run."
        ),
        None => "These series did not run interleaved (one after the other, or from separate benches): each metric \
                 is judged as two samples by Welch's t-test without the suspect runs (error rates over every run). \
                 An interleaved `bench --parameter-list` judges through a busy machine."
            .to_string(),
    }
}

/// The report as text: Markdown headings for `md`, plain titles for `term`.
pub fn render(r: &Report, md: bool, watched: &str) -> String {
    crate::report::blocks::render(&blocks(r, watched), md)
}

/// The Node-vs-nginx form of an HTTP workload: ab's figures, one column per series.
fn http_table(t: &HttpTable) -> Table {
    let mut header = vec!["Result".to_string()];
    header.extend(t.columns.iter().map(|c| {
        if c.runs == 1 {
            c.series.clone()
        } else {
            format!("{} ({} runs)", c.series, c.runs)
        }
    }));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut tab = Table::new(&hdr).right(&(1..header.len()).collect::<Vec<_>>());
    type Cell = fn(&HttpColumn) -> String;
    let rows: [(&str, Cell); 10] = [
        ("Requests", |c| grouped(c.requests, 0)),
        ("Time taken (s)", |c| grouped(c.time_taken_s, 3)),
        ("Requests per second", |c| grouped(c.requests_per_s, 2)),
        ("Time per request (ms) (mean, across all concurrent requests)", |c| grouped(c.time_per_request_ms, 3)),
        ("Transfer rate (Kbytes/sec)", |c| grouped(c.transfer_kbytes_per_s, 2)),
        ("Latency p50 (ms)", |c| grouped(c.p50_ms, 3)),
        ("Latency p90 (ms)", |c| grouped(c.p90_ms, 3)),
        ("Latency p99 (ms)", |c| grouped(c.p99_ms, 3)),
        ("Latency p99.9 (ms)", |c| grouped(c.p99_9_ms, 3)),
        ("Latency max (ms)", |c| grouped(c.max_ms, 3)),
    ];
    for (name, cell) in rows {
        let mut row = vec![name.to_string()];
        row.extend(t.columns.iter().map(cell));
        tab.row(row);
    }
    tab
}

/// The report as blocks (the text, the Markdown and the HTML page are written from them): the
/// gate's verdict first, ab's table for HTTP, each comparison's runs, metrics, steps and targets,
/// the gate's rules, what was not compared and the files skipped.
pub fn blocks(r: &Report, watched: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // The verdict first: a PR comment's first line says pass, fail or inconclusive.
    out.extend(gate_verdict(r));
    // Then each comparison's headline, as the report's first card has it: the workload's own
    // throughput first.
    for c in r.comparisons.iter().filter(|c| !c.on_means.is_empty()) {
        out.push(headline(c));
    }
    let mut shown_baselines: Vec<String> = Vec::new();
    for t in &r.http_tables {
        out.push(Block::heading(2, format!("{} (ab's figures, mean over each series' runs)", t.workload)));
        out.push(Block::table(http_table(t)));
    }
    for c in &r.comparisons {
        if !shown_baselines.contains(&c.workload) {
            shown_baselines.push(c.workload.clone());
            out.push(Block::heading(2, &c.workload));
            out.push(Block::heading(3, &c.baseline));
            let mean = RunEntry::mean_of(&c.baseline_runs);
            out.push(Block::table(runs_table(&c.baseline_runs, mean.as_ref(), None)));
        }
        out.push(Block::heading(3, &c.series));
        let mean = RunEntry::mean_of(&c.runs);
        let mut extra = c.per_run.clone();
        extra.push(c.on_means.clone());
        let title = format!("Comparison with {}", c.baseline);
        out.push(Block::table(runs_table(&c.runs, mean.as_ref(), Some((&title, extra)))));
        out.push(Block::text(format!(
            "{} against {}: median (range) of each metric over the runs, and whether the difference stands out \
             from run-to-run noise.",
            c.series, c.baseline
        )));
        out.push(Block::table(metrics_table(c)));
        // How significance was judged, said once under the table, not in every row.
        out.extend(significance_lines(c).into_iter().map(Block::text));
        out.extend(detection_lines(c).map(Block::text));
        if !c.steps.is_empty() {
            out.push(Block::text("Per-step latency (median over the runs of each run's p50 and p99):"));
            let heads = [
                "Step".to_string(),
                format!("{} p50", c.baseline),
                format!("{} p50", c.series),
                format!("{} p99", c.baseline),
                format!("{} p99", c.series),
                "p99 change".to_string(),
            ];
            let hr: Vec<&str> = heads.iter().map(String::as_str).collect();
            let mut tab = Table::new(&hr).right(&[1, 2, 3, 4]);
            let o = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "n/a".into());
            for s in &c.steps {
                let change = match (s.baseline_p99_ms, s.p99_ms) {
                    (Some(a), Some(b)) => less_more(a, b, "p99").replace(" p99", ""),
                    _ => "n/a".into(),
                };
                tab.row(vec![
                    s.step.clone(),
                    o(s.baseline_p50_ms),
                    o(s.p50_ms),
                    o(s.baseline_p99_ms),
                    o(s.p99_ms),
                    change,
                ]);
            }
            out.push(Block::table(tab));
        }
        if !c.targets.is_empty() {
            out.push(Block::text("Per target (median over the runs; targets matched by their place in the list):"));
            out.push(Block::table(targets_table(c)));
        }
        // Notes say which series and run they are about; the baseline's once per workload.
        let mut notes = table_notes(&c.baseline_runs, watched, Some(&c.baseline));
        let series_notes = table_notes(&c.runs, watched, Some(&c.series));
        for n in series_notes {
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
        if c.pairs.is_some() || c.baseline_runs.iter().chain(&c.runs).any(|r| r.suspect.is_some()) {
            notes.push(design_note(c));
        }
        if let Some(p) = &c.parameter {
            notes.push(format!(
                "{} and {} are two values of one bench --parameter-list ({p}), as their documents record: compared \
                 as bench compared them.",
                c.series, c.baseline
            ));
        } else if !c.differences.is_empty() {
            notes.push(format!(
                "Different workloads, compared on purpose: {} against {}: {}.",
                c.series,
                c.baseline,
                c.differences.join("; ")
            ));
        }
        out.push(Block::Lines { lines: notes });
    }
    if !r.gate.is_empty() {
        out.push(Block::heading(2, "Regression gate (--fail-on)"));
        let mut t = Table::new(&["Rule", "Workload", "Series", "Change", "Outcome", "Verdict"]).right(&[3]);
        for g in &r.gate {
            let change = g.change_pct.map(crate::report::table::signed_change).unwrap_or_else(|| "n/a".into());
            t.row(vec![
                g.rule.clone(),
                g.workload.clone(),
                format!("{} vs {}", g.series, g.baseline),
                change,
                g.outcome.word().into(),
                g.verdict.clone(),
            ]);
            let tone = match g.outcome {
                super::gate::Outcome::Pass => Tone::Good,
                super::gate::Outcome::Fail => Tone::Bad,
                super::gate::Outcome::Inconclusive => Tone::Warn,
            };
            t.tone(t.rows.len() - 1, 4, tone);
        }
        out.push(Block::table(t));
        out.extend(gate_verdict(r));
    }
    if !r.refused.is_empty() {
        out.push(Block::heading(2, "Not compared"));
        out.push(Block::List { items: r.refused.clone() });
    }
    if !r.skipped.is_empty() {
        out.push(Block::heading(2, "Skipped files"));
        out.push(Block::List { items: r.skipped.iter().map(|s| format!("{}: {}", s.file, s.reason)).collect() });
    }
    out
}

/// A percentage as the detection lines write it: one decimal, or a whole number past 100.
fn pct_text(p: f64) -> String {
    if p >= 100.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// What a comparison could have seen, in words: the smallest change of each metric its runs
/// could detect ("with 5 runs a side this series detects changes of ±6.2% in time, ..."), and
/// with `--detect` the runs a side a given change would need.
fn detection_lines(c: &Comparison) -> impl Iterator<Item = String> {
    let clean = |rs: &[RunEntry]| rs.iter().filter(|r| r.suspect.is_none()).count();
    let (a, b) = (clean(&c.baseline_runs), clean(&c.runs));
    let runs = match c.pairs {
        Some(n) => format!("{n} interleaved pairs"),
        None if a == b => format!("{a} runs a side"),
        None => format!("{a} and {b} clean runs"),
    };
    let name = |m: &MetricRow| m.metric.split(" (").next().unwrap_or(&m.metric).to_lowercase();
    let seen: Vec<String> =
        c.metrics.iter().filter_map(|m| m.detectable_pct.map(|d| format!("±{} in {}", pct_text(d), name(m)))).collect();
    let mut lines = Vec::new();
    if !seen.is_empty() {
        lines.push(format!(
            "Smallest changes these runs could detect (80% power, p < 0.05): with {runs} this series detects \
             changes of {}.",
            seen.join(", ")
        ));
    }
    let needed: Vec<String> = c
        .metrics
        .iter()
        .filter_map(|m| {
            let d = m.detect.as_ref()?;
            Some(match d.runs_needed {
                Some(n) => format!("{} {n}", name(m)),
                None if m.spread.is_some_and(Noise::none) => {
                    format!("{} unknown (no spread between the runs to measure)", name(m))
                }
                None if m.spread.is_none() && c.pairs.is_some() => {
                    format!("{} unknown (needs two pairs that count to measure the noise)", name(m))
                }
                None if m.spread.is_none() => {
                    format!("{} unknown (needs two clean runs a side to measure the noise)", name(m))
                }
                None => format!("{} more than {}", name(m), stats::MAX_RUNS),
            })
        })
        .collect();
    if let Some(d) = c.metrics.iter().find_map(|m| m.detect.as_ref()) {
        lines.push(format!(
            "To detect a change of {}% (80% power, p < 0.05), runs a side needed: {}.",
            d.change_pct,
            needed.join(", ")
        ));
    }
    lines.into_iter()
}

/// A metric's significance in a few words, for its row: `significant, p = 0.004`, `not
/// significant, p = 0.186`, `no difference`, `too few runs`, `no verdict`; the test and what the
/// row leaves out are said once under the table ([`significance_lines`]).
fn significance_mark(m: &MetricRow) -> String {
    let v = m.verdict.as_str();
    let p = m.p_value.map(|p| format!(", {}", stats::p_text(p))).unwrap_or_default();
    let word = if v.starts_with("significant") {
        "significant"
    } else if v.starts_with("not significant") {
        "not significant"
    } else if v.starts_with("no difference") {
        return "no difference".into();
    } else if v.starts_with("cannot tell from noise") {
        return "too few runs".into();
    } else {
        "no verdict"
    };
    let more = if v.contains("; ") || word == "no verdict" { " (see below)" } else { "" };
    format!("{word}{p}{more}")
}

/// The significance column's long sentence, once: the test the comparison used and, for paired
/// runs, each metric's estimated change and its interval; then each row's own caveat (pairs left
/// out, no verdict and why).
fn significance_lines(c: &Comparison) -> Vec<String> {
    let name = |m: &MetricRow| m.metric.split(" (").next().unwrap_or(&m.metric).to_lowercase();
    let mut out = Vec::new();
    if let Some(m) = c.metrics.iter().find(|m| m.verdict.starts_with("cannot tell from noise")) {
        out.push(format!("Significance: {}.", m.verdict));
    }
    let tested: Vec<&MetricRow> =
        c.metrics.iter().filter(|m| m.p_value.is_some() && significance_mark(m).contains("significant")).collect();
    if !tested.is_empty() {
        let how = match c.pairs {
            Some(n) => format!(
                "a paired t-test on {n} interleaved pairs (on their log ratios, or their differences where a value is not positive)"
            ),
            None => "Welch's t-test on the runs that are not suspect (error rates on every run)".to_string(),
        };
        let mut line = format!("Significance: {how}; p < {} is significant.", stats::ALPHA);
        let estimates: Vec<String> = tested
            .iter()
            .filter_map(|m| {
                let (e, [lo, hi]) = (m.change_estimate_pct?, m.change_interval_pct?);
                Some(format!("{} {} [{} to {}]", name(m), paired::pct(e), paired::pct(lo), paired::pct(hi)))
            })
            .collect();
        if !estimates.is_empty() {
            line.push_str(&format!(" Estimated change [95% CI]: {}.", estimates.join(", ")));
        }
        out.push(line);
    }
    // Each caveat once, with the metrics it is about.
    let mut caveats: Vec<(String, Vec<&str>)> = Vec::new();
    for m in &c.metrics {
        let (v, metric) = (m.verdict.as_str(), m.metric.split(" (").next().unwrap_or(&m.metric));
        let caveat = if significance_mark(m).starts_with("no verdict") {
            v
        } else if let Some((_, caveat)) = v.split_once("; ") {
            caveat
        } else {
            continue;
        };
        match caveats.iter_mut().find(|(c, _)| c == caveat) {
            Some((_, metrics)) => metrics.push(metric),
            None => caveats.push((caveat.to_string(), vec![metric])),
        }
    }
    out.extend(caveats.into_iter().map(|(caveat, metrics)| format!("{}: {caveat}.", metrics.join(", "))));
    out
}

/// A comparison's metrics: median (range) on each side, the change, the significance; the change
/// and the verdict coloured by the judgement.
fn metrics_table(c: &Comparison) -> Table {
    let b_head = format!("{} median (range)", c.baseline);
    let n_head = format!("{} median (range)", c.series);
    let mut tab = Table::new(&["Metric", &b_head, &n_head, "Change (means)", "Significance", "Detectable"]);
    for m in &c.metrics {
        let f = |v: f64| fmt_metric(&m.metric, v);
        let spread = |med: f64, lo: f64, hi: f64| {
            if lo == hi {
                f(med)
            } else {
                format!("{} ({} to {})", f(med), f(lo), f(hi))
            }
        };
        let name = m.metric.split(" (").next().unwrap_or(&m.metric).to_string();
        tab.row(vec![
            name,
            spread(m.baseline_median, m.baseline_min, m.baseline_max),
            spread(m.median, m.min, m.max),
            m.words.clone(),
            // The test's long sentence is said once under the table.
            significance_mark(m),
            m.detectable_pct.map(|d| format!("±{}", pct_text(d))).unwrap_or_else(|| "n/a".into()),
        ]);
        let row = tab.rows.len() - 1;
        tab.tone(row, 3, m.judgement.tone());
        tab.tone(row, 4, m.judgement.tone());
    }
    tab
}

/// Per target position: subscriptions and calls per minute, time to ready p99 and failed users
/// on both sides.
fn targets_table(c: &Comparison) -> Table {
    let heads = [
        "Target".to_string(),
        format!("{} subs/min", c.baseline),
        format!("{} subs/min", c.series),
        format!("{} calls/min", c.baseline),
        format!("{} calls/min", c.series),
        format!("{} p99", c.baseline),
        format!("{} p99", c.series),
        "p99 change".to_string(),
        "failed users".to_string(),
    ];
    let hr: Vec<&str> = heads.iter().map(String::as_str).collect();
    let mut tab = Table::new(&hr).right(&[1, 2, 3, 4, 5, 6, 8]);
    let o = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "n/a".into());
    let rate = |v: Option<f64>| v.map(|v| grouped(v, 1)).unwrap_or_else(|| "n/a".into());
    let whole = |v: Option<f64>| v.map(|v| grouped(v, 0)).unwrap_or_else(|| "n/a".into());
    for t in &c.targets {
        let change = match (t.baseline_p99_ms, t.p99_ms) {
            (Some(a), Some(b)) => less_more(a, b, "p99").replace(" p99", ""),
            _ => "n/a".into(),
        };
        tab.row(vec![
            t.target.clone(),
            rate(t.baseline_subs_per_min),
            rate(t.subs_per_min),
            rate(t.baseline_calls_per_min),
            rate(t.calls_per_min),
            o(t.baseline_p99_ms),
            o(t.p99_ms),
            change,
            format!("{} -> {}", whole(t.baseline_failed_users), whole(t.failed_users)),
        ]);
    }
    tab
}

/// Every input as a series (names made unique); inputs without results are warned about and
/// unusable files named on stderr. `Err` (the exit code) when an input does not exist.
pub fn load_inputs(inputs: &[PathBuf], io: &mut crate::console::Io) -> Result<(Vec<Series>, Vec<Skipped>), i32> {
    let mut skipped = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for input in inputs {
        match load_series(input, &mut skipped) {
            Ok(s) if s.runs.is_empty() => {
                let _ = writeln!(io.err, "warning: {}: no usable result documents", input.display());
            }
            Ok(mut s) => {
                if series.iter().any(|x| x.name == s.name) {
                    s.name = format!("{} ({})", s.name, input.display());
                }
                series.push(s);
            }
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
                return Err(crate::console::exit::USAGE);
            }
        }
    }
    for s in &skipped {
        let _ = writeln!(io.err, "skipped {}: {}", s.file, s.reason);
    }
    Ok((series, skipped))
}

/// `--detect 5%`: the change to find the runs needed for, percent (positive).
pub fn parse_detect(text: &str) -> Result<f64, Problem> {
    let t = text.trim();
    let number = t.strip_suffix('%').unwrap_or(t).trim().trim_start_matches(['+', '-']);
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1000.0 => Ok(v),
        _ => Err(format!("--detect {text:?} is not a change in percent, e.g. 5%").into()),
    }
}

/// The comparison's verdicts as a JUnit suite: a case per rule and compared series (a failure past
/// the bound, an error when inconclusive), else a case per comparison made; what was refused, as
/// errors; never empty.
fn junit_suite(report: &Report, args: &crate::cli::CompareArgs) -> crate::report::junit::Suite {
    use crate::report::junit::{Case, Suite, Verdict};
    let mut cases: Vec<Case> = report
        .gate
        .iter()
        .map(|g| {
            let verdict = match g.outcome {
                super::gate::Outcome::Pass => Verdict::Pass,
                super::gate::Outcome::Fail => Verdict::Failure { kind: "rule", message: g.verdict.clone() },
                super::gate::Outcome::Inconclusive => {
                    Verdict::Error { kind: "inconclusive", message: g.verdict.clone() }
                }
            };
            let name = format!("{}: {} against {} ({})", g.rule, g.series, g.baseline, g.workload);
            Case::new(name, "bolide.compare.rules", verdict)
        })
        .collect();
    if report.gate.is_empty() {
        cases.extend(report.comparisons.iter().map(|c| {
            let name = format!("{} against {} ({}): {}", c.series, c.baseline, c.workload, c.on_means);
            Case::new(name, "bolide.compare", Verdict::Pass)
        }));
    }
    cases.extend(report.refused.iter().map(|why| {
        Case::new(
            format!("not compared: {why}"),
            "bolide.compare",
            Verdict::Error { kind: "refused", message: why.clone() },
        )
    }));
    if report.comparisons.is_empty() {
        let message = "nothing comparable between the series".to_string();
        cases.push(Case::new("compare", "bolide.compare", Verdict::Error { kind: "nothing comparable", message }));
    }
    let inputs: Vec<String> = args.inputs.iter().map(|p| p.display().to_string()).collect();
    Suite {
        name: format!("bolide compare {}", inputs.join(" ")),
        package: "bolide.compare".into(),
        started: std::time::SystemTime::now(),
        time_s: 0.0,
        properties: vec![("baseline".into(), report.baseline.clone()), ("fail_on".into(), args.fail_on.join(" "))],
        cases,
    }
}

/// `bolide compare`.
pub fn compare(args: &crate::cli::CompareArgs, io: &mut crate::console::Io) -> i32 {
    compare_into(args, io, None).0
}

/// [`compare`], and with `save` the comparison also written there as `comparison.md` and
/// `comparison.json` (a `bench --parameter-list` series' directory).
pub fn compare_into(
    args: &crate::cli::CompareArgs,
    io: &mut crate::console::Io,
    save: Option<&Path>,
) -> (i32, Option<Report>) {
    use crate::console::exit;
    let (series, skipped) = match load_inputs(&args.inputs, io) {
        Ok(loaded) => loaded,
        Err(code) => return (code, None),
    };
    if series.len() < 2 {
        let _ = writeln!(
            io.err,
            "error: compare needs two series with results (got {}); give bench directories or result files",
            series.len()
        );
        return (exit::USAGE, None);
    }
    let baseline = match &args.baseline {
        None => 0,
        Some(b) => match series.iter().position(|s| &s.name == b || s.source == Path::new(b)) {
            Some(i) => i,
            None => {
                let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
                let _ = writeln!(io.err, "error: --baseline {b:?} is none of the series: {}", names.join(", "));
                return (exit::USAGE, None);
            }
        },
    };
    let mut rules = Vec::new();
    for text in &args.fail_on {
        match super::gate::parse(text) {
            Ok(r) => rules.push(r),
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
            }
        }
    }
    if rules.len() < args.fail_on.len() {
        return (exit::USAGE, None);
    }
    let detect = match args.detect.as_deref().map(parse_detect).transpose() {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return (exit::USAGE, None);
        }
    };
    let mut report = build_with(&series, baseline, skipped, args.allow_different_workloads);
    if let Some(pct) = detect {
        for m in report.comparisons.iter_mut().flat_map(|c| c.metrics.iter_mut()) {
            m.detecting(pct);
        }
    }
    for rule in &rules {
        for c in &report.comparisons {
            let names = (c.workload.as_str(), c.baseline.as_str(), c.series.as_str());
            report.gate.push(super::gate::judge(
                rule,
                names,
                &c.baseline_runs,
                &c.runs,
                c.pairing.as_deref(),
                args.ignore_significance,
            ));
        }
    }
    report.gate_outcome = super::gate::overall(&report.gate);
    report.allow_inconclusive = args.allow_inconclusive;
    let watched = series[baseline].runs.first().map(|(_, d)| watched_names(d)).unwrap_or_default();
    match args.format {
        Format::Json => {
            let text = serde_json::to_string_pretty(&report).unwrap_or_default();
            let _ = writeln!(io.out, "{text}");
        }
        Format::Md | Format::Term => {
            let _ = write!(io.out, "{}", render(&report, args.format == Format::Md, &watched));
        }
    }
    if let Some(dir) = save {
        let md = render(&report, true, &watched);
        let json = serde_json::to_string_pretty(&report).unwrap_or_default() + "\n";
        for (name, text) in [("comparison.md", md), ("comparison.json", json)] {
            let path = dir.join(name);
            if let Err(e) = crate::files::write_atomically(&path, |w| std::io::Write::write_all(w, text.as_bytes())) {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
                return (exit::RUN, None);
            }
        }
    }
    if let Some(path) = &args.junit {
        if let Err(e) = crate::report::junit::write(path, &[junit_suite(&report, args)]) {
            let _ = writeln!(io.err, "error: --junit: {e}");
            return (exit::RUN, None);
        }
    }
    if report.comparisons.is_empty() {
        // The text and Markdown reports list the refusals already; JSON carries them in `refused`.
        if args.format == Format::Json {
            for x in &report.refused {
                let _ = writeln!(io.err, "not compared: {x}");
            }
        }
        // Refused for their workloads: the flag that compares them anyway is named.
        let hint = if report.refused.iter().any(|r| r.contains("--allow-different-workloads")) {
            ": they ran different workloads; --allow-different-workloads compares them anyway"
        } else {
            ""
        };
        let _ = writeln!(io.err, "error: nothing comparable between the series{hint}");
        return (exit::USAGE, None);
    }
    let code = match report.gate_outcome {
        Some(super::gate::Outcome::Fail) => exit::THRESHOLDS,
        Some(super::gate::Outcome::Inconclusive) if !args.allow_inconclusive => exit::INCONCLUSIVE,
        _ => exit::OK,
    };
    (code, Some(report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::result::Latency;
    use crate::stats::vu::VuDoc;

    /// A realtime run that took `llm.ttft` (p50, p99 in ms) and streamed `tokens` in 10 s, its
    /// protocol declaring the tokens a throughput (and its requests not).
    fn run(p50_ms: u64, p99_ms: u64, tokens: Option<u64>) -> Doc {
        let mut d = VuDoc { kind: "ddp".into(), ..Default::default() };
        d.summary.throughputs = vec!["llm.output_tokens".into()];
        d.summary.duration_s = 10.0;
        d.summary.total_time_s = 10.0;
        let l = Latency { p50_us: p50_ms * 1000, p99_us: p99_ms * 1000, ..Default::default() };
        d.summary.measures.insert("llm.ttft".into(), l);
        if let Some(n) = tokens {
            d.summary.events.insert("llm.output_tokens".into(), n);
        }
        d.summary.events.insert("llm.requests".into(), 7);
        Doc::Ddp(Box::new(d))
    }

    #[test]
    fn a_protocols_measures_and_throughput_are_metrics_of_their_own() {
        let base = [run(100, 400, Some(5_000)), run(110, 420, Some(5_200)), run(105, 410, Some(5_100))];
        let new = [run(200, 800, Some(2_500)), run(210, 820, Some(2_600)), run(205, 810, Some(2_550))];
        let c = compare_one("w", "a", &base.iter().collect::<Vec<_>>(), "b", &new.iter().collect::<Vec<_>>());
        let row = |name: &str| {
            c.metrics.iter().find(|m| m.metric == name).unwrap_or_else(|| {
                panic!("{name} in {:?}", c.metrics.iter().map(|m| m.metric.as_str()).collect::<Vec<_>>())
            })
        };
        // Slower first tokens are worse; fewer tokens per second are worse too.
        let ttft = row("llm.ttft.p99 (ms)");
        assert_eq!((ttft.baseline_median, ttft.median), (410.0, 810.0));
        assert_eq!(ttft.judgement, Judgement::Worse, "{ttft:?}");
        assert!(ttft.words.contains("more llm.ttft.p99"), "{}", ttft.words);
        assert_eq!(row("llm.ttft.p50 (ms)").judgement, Judgement::Worse);
        let tokens = row("llm.output_tokens_per_s");
        assert_eq!((tokens.baseline_median, tokens.median), (510.0, 255.0));
        assert_eq!(tokens.judgement, Judgement::Worse, "{tokens:?}");
        assert!(tokens.words.contains("fewer llm.output_tokens/s"), "{}", tokens.words);
        // Faster first tokens and more tokens per second, the other way round: better.
        let c = compare_one("w", "b", &new.iter().collect::<Vec<_>>(), "a", &base.iter().collect::<Vec<_>>());
        let better = |name: &str| c.metrics.iter().find(|m| m.metric == name).map(|m| m.judgement);
        assert_eq!(better("llm.ttft.p99 (ms)"), Some(Judgement::Better));
        assert_eq!(better("llm.output_tokens_per_s"), Some(Judgement::Better));
        // A count that is no throughput is no metric; one a side lacks is left out.
        assert!(c.metrics.iter().all(|m| !m.metric.contains("llm.requests")));
        let without = [run(100, 400, None), run(100, 400, None)];
        let c = compare_one("w", "a", &base.iter().collect::<Vec<_>>(), "b", &without.iter().collect::<Vec<_>>());
        assert!(c.metrics.iter().all(|m| m.metric != "llm.output_tokens_per_s"));
        assert!(c.metrics.iter().any(|m| m.metric == "llm.ttft.p99 (ms)"));
    }
}

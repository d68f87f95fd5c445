//! `compare --fail-on`: rules that fail a build when a metric moved past a bound against the
//! baseline, and the change stands out from run-to-run noise (Welch's t-test over the runs that
//! are not suspect), or regardless of noise with `--ignore-significance`.
//!
//! ```text
//! time>+10%   cpu>+15%   p99>+20%   rps<-5%   ram>+10%   mean>+20%   error_rate>+50%
//! llm.ttft.p99>+20%   llm.output_tokens_per_s<-10%
//! ```

use serde::Serialize;

use super::paired::{self, Role, Trust};
use super::stats;
use super::RunEntry;

use crate::problem::Problem;

/// The metrics a rule may name, as errors list them.
pub const METRICS: &str = "time (DDP: the Meteor reports' Time; HTTP: time per request), rps (HTTP), cpu, ram, \
    p99, mean (latency), error_rate, with browser users lcp, inp (their pages' p75) and browser_cpu (per \
    browser user), and a realtime protocol's own latencies NAME.p50 and NAME.p99 (NAME as the document's \
    histograms.measures names it) and its throughputs per second of the run, NAME_per_s";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateMetric {
    Time,
    Rps,
    Cpu,
    Ram,
    P99,
    Mean,
    ErrorRate,
    Lcp,
    Inp,
    BrowserCpu,
    /// A protocol's own latency at p50 or p99, ms, by its key (`llm.ttft.p99`): lower is better.
    Measure(String),
    /// A protocol's count per second of the run, by its key (`llm.output_tokens_per_s`): higher
    /// is better.
    PerSecond(String),
}

impl GateMetric {
    fn name(&self) -> &str {
        match self {
            GateMetric::Time => "time",
            GateMetric::Rps => "rps",
            GateMetric::Cpu => "cpu",
            GateMetric::Ram => "ram",
            GateMetric::P99 => "p99",
            GateMetric::Mean => "mean",
            GateMetric::ErrorRate => "error_rate",
            GateMetric::Lcp => "lcp",
            GateMetric::Inp => "inp",
            GateMetric::BrowserCpu => "browser_cpu",
            GateMetric::Measure(key) | GateMetric::PerSecond(key) => key,
        }
    }

    /// A protocol's figure: `NAME.p50` or `NAME.p99` with NAME two dotted words, or
    /// `NAME_per_s` of a dotted count.
    fn protocol(word: &str) -> Option<GateMetric> {
        let is_name = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-'));
        let two_words = |n: &str| n.split_once('.').is_some_and(|(a, b)| is_name(a) && is_name(b));
        if let Some(name) = word.strip_suffix(".p50").or_else(|| word.strip_suffix(".p99")) {
            return two_words(name).then(|| GateMetric::Measure(word.to_string()));
        }
        word.strip_suffix("_per_s").filter(|n| two_words(n)).map(|_| GateMetric::PerSecond(word.to_string()))
    }

    /// One run's value; Err says why a run has none.
    fn of(&self, r: &RunEntry) -> Result<f64, &'static str> {
        match self {
            GateMetric::Time => match r.requests_per_s {
                Some(rps) if rps > 0.0 => Ok(1.0 / rps),
                Some(_) => Err("no response completed"),
                None => Ok(r.time_s),
            },
            GateMetric::Rps => r
                .requests_per_s
                .or(r.per_s)
                .ok_or("rps applies to HTTP runs and to ddp-calls and ddp-connect (other DDP runs have time)"),
            GateMetric::Cpu => r.cpu_pct.ok_or("no server CPU was measured (--monitor or --spawn)"),
            GateMetric::Ram => r.ram_bytes.ok_or("no server RAM was measured (--monitor or --spawn)"),
            GateMetric::P99 => r.p99_ms.ok_or("no latency was measured"),
            GateMetric::Mean => r.mean_ms.ok_or("no latency was measured"),
            GateMetric::ErrorRate => Ok(r.error_rate_pct),
            GateMetric::Lcp => r.browser.as_ref().and_then(|b| b.lcp_p75_ms).ok_or("no page reported its LCP"),
            GateMetric::Inp => r.browser.as_ref().and_then(|b| b.inp_p75_ms).ok_or("no page reported its INP"),
            GateMetric::BrowserCpu => r
                .browser
                .as_ref()
                .and_then(|b| b.cpu_pct_per_user)
                .ok_or("no browser's CPU was measured (browser users)"),
            GateMetric::Measure(key) => {
                r.measures_ms.get(key).copied().ok_or("a run did not take this measure of its protocol")
            }
            GateMetric::PerSecond(key) => r.events_per_s.get(key).copied().ok_or("a run did not count it"),
        }
    }
}

impl GateMetric {
    /// What the metric is, for the suspect marks (see [`super::paired`]).
    fn role(&self) -> Role {
        match self {
            GateMetric::Rps | GateMetric::PerSecond(_) => Role::Speed { higher_is_better: true },
            GateMetric::Time
            | GateMetric::P99
            | GateMetric::Mean
            | GateMetric::Lcp
            | GateMetric::Inp
            | GateMetric::Measure(_) => Role::Speed { higher_is_better: false },
            GateMetric::ErrorRate => Role::Answer,
            GateMetric::Cpu | GateMetric::Ram | GateMetric::BrowserCpu => Role::Other,
        }
    }
}

/// A parsed `--fail-on` rule: fail when the change of the mean, percent, is past `bound_pct` in the
/// direction of `above`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub text: String,
    pub metric: GateMetric,
    /// `>`: fails when the change is above the bound; `<`: below it.
    pub above: bool,
    pub bound_pct: f64,
}

/// Parses `METRIC>+N%` or `METRIC<-N%`.
pub fn parse(text: &str) -> Result<Rule, Problem> {
    let bad = |column: usize, what: String| format!("--fail-on {text:?}: column {column}: {what}");
    let t = text.trim();
    let lead = text.len() - text.trim_start().len();
    let split = t.find(['<', '>']).ok_or_else(|| {
        bad(t.len() + lead + 1, "expected > or < and a change such as +10%, e.g. time>+10% or rps<-5%".into())
    })?;
    let word = t[..split].trim();
    let metric = match word {
        "time" => GateMetric::Time,
        "rps" => GateMetric::Rps,
        "cpu" => GateMetric::Cpu,
        "ram" | "rss" => GateMetric::Ram,
        "p99" => GateMetric::P99,
        "mean" => GateMetric::Mean,
        "error_rate" => GateMetric::ErrorRate,
        "lcp" => GateMetric::Lcp,
        "inp" => GateMetric::Inp,
        "browser_cpu" => GateMetric::BrowserCpu,
        other => match GateMetric::protocol(other) {
            Some(m) => m,
            None => {
                return Err(bad(
                    lead + 1,
                    format!(
                        "unknown metric {other:?}; the metrics are {METRICS}, and a protocol's own: \
                         NAME.p50 or NAME.p99 of a latency it measures (summary.measures), \
                         NAME_per_s of a count it declared a throughput (summary.throughputs)"
                    ),
                )
                .into())
            }
        },
    };
    let above = t[split..].starts_with('>');
    let rest = t[split + 1..].trim_start_matches('=');
    let rest_at = lead + t.len() - rest.len() + 1;
    let rest = rest.trim();
    let Some(number) = rest.strip_suffix('%') else {
        return Err(bad(rest_at, format!("expected a change in percent such as +10%, found {rest:?}")).into());
    };
    let bound_pct: f64 = number
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| bad(rest_at, format!("{number:?} is not a number")))?;
    Ok(Rule { text: t.to_string(), metric, above, bound_pct })
}

/// What a rule says of one comparison: one of three, and inconclusive is never a pass.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The change stayed within the bound.
    Pass,
    /// Past the bound and significant (or significance ignored), or the metric was not measured.
    Fail,
    /// The runs cannot tell: fewer than two clean (not suspect) runs a side, or a change past the
    /// bound that Welch's test cannot tell from noise.
    Inconclusive,
}

impl Outcome {
    /// The word people read: pass, FAILED, INCONCLUSIVE.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAILED",
            Outcome::Inconclusive => "INCONCLUSIVE",
        }
    }
}

/// A rule judged on one comparison.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct GateResult {
    pub rule: String,
    pub workload: String,
    pub series: String,
    pub baseline: String,
    /// The change of the means against the baseline, percent (null when it cannot be computed).
    pub change_pct: Option<f64>,
    /// Welch's t-test over the runs that are not suspect (null with fewer than two a side).
    pub p_value: Option<f64>,
    /// Runs that are not suspect, baseline and series.
    pub clean_runs: [usize; 2],
    /// The change went past the bound.
    pub past_bound: bool,
    pub significant: bool,
    /// The smallest change these runs could detect (80% power at p < 0.05), percent of the
    /// baseline's mean; a pass with a bound below it is inconclusive.
    pub detectable_pct: Option<f64>,
    /// pass, fail or inconclusive.
    pub outcome: Outcome,
    /// `outcome` is fail.
    pub failed: bool,
    /// In words: why it failed, held, or could not be judged, and what to do.
    pub verdict: String,
}

/// What to try when a rule could not be judged.
const INCONCLUSIVE_HINT: &str =
    "more runs (--runs), a quieter machine, or --ignore-significance to judge the means alone";

/// Judges `rule` on the runs of one comparison.
pub fn judge(
    rule: &Rule,
    (workload, baseline, series): (&str, &str, &str),
    base: &[RunEntry],
    new: &[RunEntry],
    pairs: Option<&[(usize, usize)]>,
    ignore_significance: bool,
) -> GateResult {
    let mut out = GateResult {
        rule: rule.text.clone(),
        workload: workload.into(),
        series: series.into(),
        baseline: baseline.into(),
        change_pct: None,
        p_value: None,
        clean_runs: [0, 0],
        past_bound: false,
        significant: false,
        detectable_pct: None,
        outcome: Outcome::Fail,
        failed: true,
        verdict: String::new(),
    };
    let values = |runs: &[RunEntry]| -> Result<Vec<(f64, bool)>, &'static str> {
        runs.iter().map(|r| rule.metric.of(r).map(|v| (v, r.suspect.is_none()))).collect()
    };
    let (a, b) = match (values(base), values(new)) {
        (Ok(a), Ok(b)) if !a.is_empty() && !b.is_empty() => (a, b),
        (Err(why), _) | (_, Err(why)) => {
            out.verdict = format!("FAILED: {} cannot be compared: {why}", rule.metric.name());
            return out;
        }
        _ => {
            out.verdict = "FAILED: no runs to compare".into();
            return out;
        }
    };
    let all = |v: &[(f64, bool)]| v.iter().map(|x| x.0).collect::<Vec<f64>>();
    let (ma, mb) = (stats::mean(&all(&a)), stats::mean(&all(&b)));
    let change = if ma != 0.0 {
        (mb - ma) / ma * 100.0
    } else if mb == 0.0 {
        0.0
    } else {
        f64::INFINITY.copysign(mb)
    };
    out.change_pct = change.is_finite().then_some(change);
    let moved = |change: f64| {
        if change.is_finite() {
            crate::report::table::signed_change(change)
        } else {
            format!("from 0 to {mb:.2}")
        }
    };
    let bound = format!("{}{:+}%", if rule.above { ">" } else { "<" }, rule.bound_pct);
    let judged = match pairs {
        Some(p) => judge_pairs(rule, &all(&a), &all(&b), (base, new, p), &mut out),
        None => judge_samples(rule, &a, &b, &mut out),
    };
    let Evidence { too_few, few, moves, noise, directional } = judged;
    let change = out.change_pct.unwrap_or(change);
    out.past_bound = if rule.above { change > rule.bound_pct } else { change < rule.bound_pct };
    out.significant = out.p_value.is_some_and(|p| p < stats::ALPHA);
    let moved = moved(change);
    let p = out.p_value.map_or_else(|| few.clone(), stats::p_text);
    (out.outcome, out.verdict) = match (out.past_bound, ignore_significance, too_few, out.significant) {
        (false, true, _, _) => (Outcome::Pass, format!("pass: {moved}, not {bound} (significance ignored)")),
        (true, true, _, _) => (Outcome::Fail, format!("FAILED: {moved} {bound} ({p}; significance ignored)")),
        (past, false, true, _) => (
            Outcome::Inconclusive,
            format!(
                "INCONCLUSIVE: {moved}{} but only {few}; try {INCONCLUSIVE_HINT}",
                if past { format!(" {bound}") } else { format!(", not {bound},") }
            ),
        ),
        (false, false, false, _) => (Outcome::Pass, format!("pass: {moved}, not {bound} ({p})")),
        (true, false, false, true) => (Outcome::Fail, format!("FAILED: {moved} {bound}, significant ({p})")),
        (true, false, false, false) => (
            Outcome::Inconclusive,
            format!("INCONCLUSIVE: {moved} {bound} but within the runs' noise ({p}); try {INCONCLUSIVE_HINT}"),
        ),
    };
    // Pairs at bolide's limit: the true change lies beyond the counted one, up or down. An
    // outcome stands only where that cannot turn it: a failure past an upper bound when the truth
    // can only be higher, a pass under it when the truth can only be lower.
    let (up, down) = moves;
    let toward = if rule.above { up } else { down };
    let away_from = if rule.above { down } else { up };
    let turned = match out.outcome {
        Outcome::Fail => !ignore_significance && out.p_value.is_some() && away_from,
        Outcome::Pass => !ignore_significance && toward,
        Outcome::Inconclusive => false,
    };
    if turned {
        out.outcome = Outcome::Inconclusive;
        out.verdict = format!(
            "INCONCLUSIVE: {moved} ({p}), but pairs at bolide's limit could turn it (their true figures are better \
             than counted); give bolide more threads (-t) or cores of its own"
        );
    }
    if let (Some(p), Some(_)) = (pairs, out.p_value) {
        out.verdict.push_str(&format!(" [paired, {} interleaved pairs]", p.len()));
    }
    // A pass means little when the runs could not have seen a change the size of the bound.
    // (A change that stands out from the noise away from the bound, on its good side, is a pass.)
    let away = out.significant && if rule.above { change < 0.0 } else { change > 0.0 };
    let detectable = match (pairs, directional) {
        (Some(_), Some(d)) => Some(d(rule.bound_pct)),
        _ => out.detectable_pct,
    };
    if let (Outcome::Pass, false, false, Some(d)) = (out.outcome, ignore_significance, away, detectable) {
        if d > rule.bound_pct.abs() {
            let needed = noise
                .and_then(|n| n(rule.bound_pct))
                .map_or_else(|| format!("more than {}", stats::MAX_RUNS), |n| n.to_string());
            out.outcome = Outcome::Inconclusive;
            out.verdict = format!(
                "INCONCLUSIVE: {moved}, not {bound}, but these runs detect only changes of ±{d:.1}% (80% power, \
                 p < 0.05): the bound is below what they can see; {needed} {} would detect {}%",
                if pairs.is_some() { "interleaved pairs" } else { "runs a side" },
                rule.bound_pct.abs()
            );
        }
    }
    out.failed = out.outcome == Outcome::Fail;
    out
}

/// What the runs give a rule: too few to judge (and in words), whether the suspect marks let the
/// test decide, and the runs a side (pairs) a change of N percent would need.
struct Evidence {
    too_few: bool,
    few: String,
    /// Which way the true change may lie beyond the counted one (pairs at bolide's limit): up, down.
    moves: (bool, bool),
    noise: Option<Box<dyn Fn(f64) -> Option<usize>>>,
    /// Paired: the detectable change in the direction of a bound (a fall and a rise of the same
    /// ratio differ in percent).
    directional: Option<Box<dyn Fn(f64) -> f64>>,
}

/// Two samples: Welch's test over the runs that are not suspect (error rates over every run).
fn judge_samples(rule: &Rule, a: &[(f64, bool)], b: &[(f64, bool)], out: &mut GateResult) -> Evidence {
    let answer = rule.metric.role() == Role::Answer;
    let clean = |v: &[(f64, bool)]| v.iter().filter(|x| x.1 || answer).map(|x| x.0).collect::<Vec<f64>>();
    let (ca, cb) = (clean(a), clean(b));
    out.clean_runs = [ca.len(), cb.len()];
    out.p_value = stats::welch(&ca, &cb).map(|w| w.p);
    out.detectable_pct = stats::detectable_pct(&ca, &cb);
    let (va, vb, mean) = (stats::variance(&ca), stats::variance(&cb), stats::mean(&ca));
    let few = match answer {
        true => format!("{} and {} runs (two a side are needed)", ca.len(), cb.len()),
        false => format!("{} and {} clean runs (suspect runs do not count; two a side are needed)", ca.len(), cb.len()),
    };
    Evidence {
        too_few: ca.len() < 2 || cb.len() < 2,
        few,
        moves: (false, false),
        noise: Some(Box::new(move |pct| stats::runs_needed(va, vb, pct / 100.0 * mean))),
        directional: None,
    }
}

/// Interleaved pairs: the paired t-test over the pairs the suspect marks let count; the change is
/// the paired estimate.
fn judge_pairs(
    rule: &Rule,
    a: &[f64],
    b: &[f64],
    (base, new, pairs): (&[RunEntry], &[RunEntry], &[(usize, usize)]),
    out: &mut GateResult,
) -> Evidence {
    let role = rule.metric.role();
    let chosen = paired::choose(a, b, &Trust::of_runs(base), &Trust::of_runs(new), pairs, role);
    let judged = paired::judge(&chosen, role);
    let n = chosen.a.len();
    out.clean_runs = [n, n];
    let mut noise: Option<Box<dyn Fn(f64) -> Option<usize>>> = None;
    let mut directional: Option<Box<dyn Fn(f64) -> f64>> = None;
    if let Some(t) = judged.test {
        out.p_value = Some(t.p);
        out.change_pct = t.change_pct.is_finite().then_some(t.change_pct);
        out.detectable_pct = stats::paired_mde_pct(t.sd, t.pairs, t.log, t.base_mean, 1.0);
        noise = Some(Box::new(move |pct| stats::pairs_needed(t.sd, t.log, t.base_mean, pct)));
        directional = Some(Box::new(move |bound| {
            stats::paired_mde_pct(t.sd, t.pairs, t.log, t.base_mean, bound).unwrap_or(f64::INFINITY)
        }));
    }
    let left = if chosen.left_out.is_empty() {
        String::new()
    } else {
        format!(", {} left out at bolide's limit", chosen.left_out.len())
    };
    Evidence {
        too_few: n < 2,
        few: format!("{n} interleaved pairs that count{left} (two are needed)"),
        moves: chosen.may_move(role),
        noise,
        directional,
    }
}

/// The gate's outcome over every judged rule: fail if any failed, else inconclusive if any was,
/// else pass (and None with no rule).
pub fn overall(results: &[GateResult]) -> Option<Outcome> {
    if results.is_empty() {
        None
    } else if results.iter().any(|g| g.outcome == Outcome::Fail) {
        Some(Outcome::Fail)
    } else if results.iter().any(|g| g.outcome == Outcome::Inconclusive) {
        Some(Outcome::Inconclusive)
    } else {
        Some(Outcome::Pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(values: &[f64]) -> Vec<RunEntry> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| RunEntry {
                run: i as u32 + 1,
                file: None,
                time_s: *v,
                requests_per_s: None,
                cpu_pct: Some(*v),
                ram_bytes: None,
                errors: 0.0,
                error_rate_pct: 0.0,
                p99_ms: Some(*v),
                mean_ms: Some(*v),
                suspect: None,
                saturated: false,
                interrupted: false,
                thresholds: Vec::new(),
                eventloop_p99_ms: None,
                gc_ms: None,
                bolide_cpu_us: None,
                per_s: None,
                unit: None,
                browser: None,
                measures_ms: Default::default(),
                events_per_s: Default::default(),
                per_user: Default::default(),
            })
            .collect()
    }

    fn judged(rule: &str, base: &[f64], new: &[f64], ignore: bool) -> GateResult {
        judge(&parse(rule).unwrap(), ("w", "a", "b"), &runs(base), &runs(new), None, ignore)
    }

    #[test]
    fn rules_parse_and_bad_ones_say_where() {
        let r = parse("time>+10%").unwrap();
        assert_eq!((r.metric, r.above, r.bound_pct), (GateMetric::Time, true, 10.0));
        let r = parse(" rps < -5.5% ").unwrap();
        assert_eq!((r.metric, r.above, r.bound_pct, r.text.as_str()), (GateMetric::Rps, false, -5.5, "rps < -5.5%"));
        assert_eq!(parse("p99>=20%").unwrap().bound_pct, 20.0);
        let e = parse("latency>+10%").unwrap_err().to_string();
        assert!(e.contains("column 1: unknown metric \"latency\"; the metrics are time"), "{e}");
        let e = parse("time+10%").unwrap_err().to_string();
        assert!(e.contains("column 9: expected > or <"), "{e}");
        let e = parse("time>+10").unwrap_err().to_string();
        assert!(e.contains("column 6: expected a change in percent"), "{e}");
        let e = parse("cpu>+x%").unwrap_err().to_string();
        assert!(e.contains("\"+x\" is not a number"), "{e}");
    }

    #[test]
    fn a_protocols_figures_are_rules_of_their_own() {
        let r = parse("llm.ttft.p99>+20%").unwrap();
        assert_eq!((r.metric, r.above, r.bound_pct), (GateMetric::Measure("llm.ttft.p99".into()), true, 20.0));
        let r = parse("llm.output_tokens_per_s<-10%").unwrap();
        assert_eq!(r.metric, GateMetric::PerSecond("llm.output_tokens_per_s".into()));
        assert_eq!(r.metric.role(), Role::Speed { higher_is_better: true });
        assert_eq!(parse("sse.first_event.p50>+5%").unwrap().metric.role(), Role::Speed { higher_is_better: false });
        // Only p50 and p99 are kept per run; a name is two dotted words.
        for bad in ["llm.ttft.p95>+5%", "llm.ttft>+5%", "ttft.p99>+5%", "tokens_per_s<-5%"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("unknown metric") && e.contains("NAME_per_s of a count it declared"), "{bad}: {e}");
        }
        let with = |key: &str, values: &[f64], per_s: bool| {
            let mut rs = runs(values);
            for (r, v) in rs.iter_mut().zip(values) {
                let map = if per_s { &mut r.events_per_s } else { &mut r.measures_ms };
                map.insert(key.to_string(), *v);
            }
            rs
        };
        let rule = parse("llm.ttft.p99>+10%").unwrap();
        let ttft = |a: &[f64], b: &[f64]| {
            judge(&rule, ("w", "a", "b"), &with("llm.ttft.p99", a, false), &with("llm.ttft.p99", b, false), None, false)
        };
        // First tokens 20% later, with little noise: fails; 20% sooner: passes.
        assert_eq!(ttft(&[100.0, 101.0, 99.0], &[120.0, 121.0, 119.0]).outcome, Outcome::Fail);
        assert_eq!(ttft(&[100.0, 101.0, 99.0], &[80.0, 81.0, 79.0]).outcome, Outcome::Pass);
        let rule = parse("llm.output_tokens_per_s<-10%").unwrap();
        let key = "llm.output_tokens_per_s";
        let g = judge(
            &rule,
            ("w", "a", "b"),
            &with(key, &[500.0, 505.0, 495.0], true),
            &with(key, &[400.0, 404.0, 396.0], true),
            None,
            false,
        );
        assert_eq!(g.outcome, Outcome::Fail, "{g:?}");
        // Runs that did not take it cannot be compared: a failure that says so.
        let g = judge(&rule, ("w", "a", "b"), &runs(&[1.0, 2.0]), &runs(&[1.0, 2.0]), None, false);
        assert_eq!(g.outcome, Outcome::Fail);
        assert!(g.verdict.contains("llm.output_tokens_per_s cannot be compared: a run did not count it"), "{g:?}");
    }

    #[test]
    fn a_significant_move_past_the_bound_fails() {
        // Known series: +20% with little noise (p far below 0.05).
        let g = judged("time>+10%", &[100.0, 101.0, 99.0], &[120.0, 121.0, 119.0], false);
        assert!(g.past_bound && g.significant && g.failed && g.outcome == Outcome::Fail, "{g:?}");
        assert!((g.change_pct.unwrap() - 20.0).abs() < 1e-9);
        assert!(g.verdict.starts_with("FAILED: +20.00% >+10%, significant (p < 0.001)"), "{}", g.verdict);
        // The same change in the other direction does not trip a > rule.
        let g = judged("time>+10%", &[120.0, 121.0, 119.0], &[100.0, 101.0, 99.0], false);
        assert!(!g.past_bound && !g.failed && g.outcome == Outcome::Pass, "{g:?}");
        assert!(g.verdict.starts_with("pass: -16.67%, not >+10%"), "{}", g.verdict);
        // A drop trips a < rule.
        assert!(judged("cpu<-10%", &[120.0, 121.0, 119.0], &[100.0, 101.0, 99.0], false).failed);
    }

    #[test]
    fn a_move_within_noise_is_inconclusive_unless_significance_is_ignored() {
        // Means 100 and 115 (+15%), but runs spread over 60..160: Welch's p is large.
        let (base, new) = ([60.0, 100.0, 140.0], [70.0, 115.0, 160.0]);
        let g = judged("time>+10%", &base, &new, false);
        assert!(g.past_bound && !g.significant && !g.failed, "{g:?}");
        assert_eq!(g.outcome, Outcome::Inconclusive);
        assert!(g.p_value.unwrap() > 0.5);
        assert!(g.verdict.starts_with("INCONCLUSIVE: +15.00% >+10% but within the runs' noise"), "{}", g.verdict);
        assert!(!g.verdict.contains("ok"), "{}", g.verdict);
        assert!(judged("time>+10%", &base, &new, true).failed);
        // One run a side: no test can tell; only --ignore-significance judges the means.
        let g = judged("p99>+20%", &[10.0], &[15.0], false);
        assert!(g.past_bound && g.p_value.is_none() && !g.failed, "{g:?}");
        assert_eq!((g.outcome, g.clean_runs), (Outcome::Inconclusive, [1, 1]));
        assert!(g.verdict.contains("only 1 and 1 clean runs"), "{}", g.verdict);
        assert!(judged("p99>+20%", &[10.0], &[15.0], true).failed);
        assert_eq!(judged("p99>+20%", &[10.0], &[11.0], true).outcome, Outcome::Pass);
    }

    #[test]
    fn all_suspect_series_never_pass() {
        // The probe's case: +887% on p99, every run suspect (a busy runner). Not "ok".
        let suspect = |v: &[f64]| {
            let mut r = runs(v);
            for x in &mut r {
                x.suspect = Some("the generator used 95% of a core".into());
            }
            r
        };
        let rule = parse("p99>+20%").unwrap();
        let names = ("w", "a", "b");
        let g = judge(&rule, names, &suspect(&[10.0, 10.1, 9.9]), &suspect(&[98.7, 98.6, 98.8]), None, false);
        assert_eq!((g.outcome, g.failed, g.clean_runs), (Outcome::Inconclusive, false, [0, 0]), "{g:?}");
        assert!(
            g.verdict.starts_with("INCONCLUSIVE: +887.00% (9.9x) >+20% but only 0 and 0 clean runs"),
            "{}",
            g.verdict
        );
        assert!(g.verdict.contains("--ignore-significance"), "{}", g.verdict);
        // Within the bound, but measured by a saturated generator: still not a pass.
        let g = judge(&rule, names, &suspect(&[10.0, 10.1]), &suspect(&[10.0, 10.1]), None, false);
        assert_eq!(g.outcome, Outcome::Inconclusive, "{g:?}");
        // The overall outcome: a failure outranks inconclusive, which outranks a pass.
        let pass = judged("time>+10%", &[1.0, 1.001], &[1.0, 1.001], false);
        assert_eq!(pass.outcome, Outcome::Pass);
        let fail = judged("time>+10%", &[100.0, 101.0, 99.0], &[120.0, 121.0, 119.0], false);
        assert_eq!(overall(&[pass.clone(), g.clone()]), Some(Outcome::Inconclusive));
        assert_eq!(overall(&[pass.clone(), g, fail]), Some(Outcome::Fail));
        assert_eq!(overall(&[pass]), Some(Outcome::Pass));
        assert_eq!(overall(&[]), None);
    }

    #[test]
    fn a_bound_below_what_the_runs_can_detect_is_not_a_pass() {
        // Within +10%, but runs this noisy (sd 10 on a mean of 100, 3 a side) detect only about
        // ±30%: a change of the bound's size would most likely have passed too.
        let g = judged("time>+10%", &[90.0, 100.0, 110.0], &[92.0, 102.0, 112.0], false);
        let d = g.detectable_pct.unwrap();
        // (t(0.975, 4) + t(0.8, 4)) x sqrt(100/3 + 100/3) / 100, t from tables: 2.776445 + 0.940965.
        assert!((d - (2.776_445 + 0.940_965) * (200.0f64 / 3.0).sqrt()).abs() < 1e-3, "{d}");
        assert_eq!(g.outcome, Outcome::Inconclusive, "{g:?}");
        assert!(g.verdict.contains("these runs detect only changes of ±30.4%"), "{}", g.verdict);
        assert!(g.verdict.contains("runs a side would detect 10%"), "{}", g.verdict);
        // Quiet runs of the same change pass; --ignore-significance judges the means alone.
        let g = judged("time>+10%", &[99.0, 100.0, 101.0], &[101.0, 102.0, 103.0], false);
        assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
        assert!(g.detectable_pct.unwrap() < 10.0);
        assert_eq!(judged("time>+10%", &[90.0, 100.0, 110.0], &[92.0, 102.0, 112.0], true).outcome, Outcome::Pass);
        // A change that stands out, away from the bound, passes however noisy the runs.
        let g = judged("time>+10%", &[90.0, 100.0, 110.0], &[20.0, 25.0, 30.0], false);
        assert!(g.significant && g.detectable_pct.unwrap() > 10.0, "{g:?}");
        assert_eq!(g.outcome, Outcome::Pass, "{g:?}");
        // Towards the bound, a significant +9% under a bound of +10% that the runs cannot resolve
        // is not a pass: +17% might hide in the same noise.
        let g = judged("time>+10%", &[96.5, 100.0, 103.5], &[105.5, 109.0, 112.5], false);
        assert!(g.significant && g.detectable_pct.unwrap() > 10.0, "{g:?}");
        assert_eq!(g.outcome, Outcome::Inconclusive, "{g:?}");
    }

    #[test]
    fn a_metric_that_was_not_measured_fails_and_says_why() {
        let g = judged("ram>+10%", &[1.0, 2.0], &[1.0, 2.0], false);
        assert!(g.failed && g.verdict.contains("no server RAM was measured"), "{g:?}");
        let g = judged("rps<-5%", &[1.0, 2.0], &[1.0, 2.0], false);
        assert!(g.failed && g.verdict.contains("rps applies to HTTP runs"), "{g:?}");
        // From no errors to some: an infinite change, past any bound.
        let mut new = runs(&[1.0, 1.0]);
        for r in &mut new {
            r.error_rate_pct = 2.0;
        }
        let g = judge(&parse("error_rate>+50%").unwrap(), ("w", "a", "b"), &runs(&[1.0, 1.0]), &new, None, true);
        assert!(g.past_bound && g.change_pct.is_none() && g.failed, "{g:?}");
        assert!(g.verdict.contains("from 0 to 2.00"), "{}", g.verdict);
    }
}

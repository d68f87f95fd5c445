//! Interleaved runs judged in pairs. `bench --parameter-list` runs its series round by round (A B,
//! B A, ...): run `i` of one side and run `i` of the other ran back to back, on the same machine
//! in the same state, so what a busy machine does to both cancels in their ratio. Here: whether
//! two series ran that way (from their documents' start times), which pairs a metric may use
//! given each run's suspect mark, and the paired verdict in words.
//!
//! A suspect mark voids only what it touches:
//! - a run on a busy machine (no idle CPU) stays in its pair: the pair's ratio cancels the
//!   machine, and the noise it adds widens the interval;
//! - a run whose own load thread was saturated bounds its side's speed (the server was at least
//!   that fast): its pair counts at the measured value, and a verdict stands only where every such
//!   bound pushes the truth further the way the verdict already goes (a verdict that a bound could
//!   pull back, or no verdict at all, is left undecided); a pair with both runs at bolide's limit is
//!   left out, named, as nothing decides it; for other figures (CPU, RAM) a saturated run's pair is
//!   left out. Pairs are kept or left out by their runs' marks, never by their values, so the
//!   choice cannot make a difference out of noise;
//! - error rates are the server's answers: every pair counts, whatever the marks.

use std::time::SystemTime;

use super::stats::{self, Paired};
use super::RunEntry;

/// How far a run's figures can be trusted in a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Clean,
    /// The machine had no idle CPU: both runs of a pair shared that machine.
    Busy,
    /// bolide's own load thread was saturated: the run's speed figures are a bound.
    Bound,
}

impl Trust {
    pub fn of(r: &RunEntry) -> Trust {
        match (r.saturated, r.suspect.is_some()) {
            (true, _) => Trust::Bound,
            (false, true) => Trust::Busy,
            (false, false) => Trust::Clean,
        }
    }

    /// Each run's trust, in order.
    pub fn of_runs(runs: &[RunEntry]) -> Vec<Trust> {
        runs.iter().map(Trust::of).collect()
    }
}

/// What a metric is, for the suspect marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Throughput, time or latency: a saturated run bounds it.
    Speed { higher_is_better: bool },
    /// Error rates: the server's answers, judged at any machine load.
    Answer,
    /// Anything else (the server's CPU and RAM, bolide's own cost): a saturated run says nothing.
    Other,
}

impl Role {
    /// Throughput: more is better. Time and latency (and every other figure): less.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Role::Speed { higher_is_better: true })
    }
}

/// Runs of one side and the other that ran back to back: (baseline run, series run), as indices.
pub type Pairs = Vec<(usize, usize)>;

/// The pairs of two series that ran interleaved: their runs in order of start time fall in
/// twos, one of each side (A B, B A, ... with any other series' runs between), so that each pair
/// ran back to back. None when a start time is missing, two runs of one side follow each other (a
/// series run after another is compared as two samples), or fewer than two pairs form. A last run
/// without a partner (an interrupted series) is left out.
pub fn interleaved(a: &[Option<SystemTime>], b: &[Option<SystemTime>]) -> Option<Pairs> {
    let mut runs: Vec<(SystemTime, bool, usize)> = Vec::with_capacity(a.len() + b.len());
    for (side, times) in [(false, a), (true, b)] {
        for (i, t) in times.iter().enumerate() {
            runs.push(((*t)?, side, i));
        }
    }
    runs.sort_by_key(|r| r.0);
    let mut pairs = Pairs::new();
    for two in runs.chunks(2) {
        match two {
            [x, y] if x.1 != y.1 && x.0 < y.0 => {
                let (a, b) = if x.1 { (y, x) } else { (x, y) };
                pairs.push((a.2, b.2));
            }
            [_] => {}
            _ => return None,
        }
    }
    (pairs.len() >= 2).then_some(pairs)
}

/// A document's start time, as its envelope records it.
pub fn started(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(text).ok().or_else(|| humantime::parse_rfc3339_weak(text).ok())
}

/// The pairs a metric uses, and what the marks did to the others.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chosen {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    /// Kept pairs whose baseline run was at bolide's limit (the baseline's truth is better than
    /// counted), and those whose series run was.
    pub bound_for_a: usize,
    pub bound_for_b: usize,
    /// Pair numbers (1-based) left out: nothing could decide them.
    pub left_out: Vec<usize>,
}

impl Chosen {
    /// Which way the true change (series against baseline, in the metric's own units) may lie
    /// beyond the counted one, for a speed metric: (up, down). A series run at its limit is better
    /// than counted: higher for throughput, lower for time; a baseline run the other way round.
    pub fn may_move(&self, role: Role) -> (bool, bool) {
        if !matches!(role, Role::Speed { .. }) {
            return (false, false);
        }
        let (b_better, a_better) = (self.bound_for_b > 0, self.bound_for_a > 0);
        if role.higher_is_better() {
            (b_better, a_better)
        } else {
            (a_better, b_better)
        }
    }
}

/// The `pairs` of `a` and `b` (values per run) that `role` lets count, chosen by the runs' marks
/// alone.
pub fn choose(a: &[f64], b: &[f64], ta: &[Trust], tb: &[Trust], pairs: &[(usize, usize)], role: Role) -> Chosen {
    let mut out = Chosen::default();
    for (k, &(i, j)) in pairs.iter().enumerate() {
        let (Some(&x), Some(&y)) = (a.get(i), b.get(j)) else { continue };
        let (sa, sb) = (ta.get(i) == Some(&Trust::Bound), tb.get(j) == Some(&Trust::Bound));
        let keep = match (role, sa, sb) {
            (Role::Answer, _, _) | (_, false, false) => true,
            (Role::Speed { .. }, true, false) => {
                out.bound_for_a += 1;
                true
            }
            (Role::Speed { .. }, false, true) => {
                out.bound_for_b += 1;
                true
            }
            _ => false,
        };
        if keep {
            out.a.push(x);
            out.b.push(y);
        } else {
            out.left_out.push(k + 1);
        }
    }
    out
}

/// A metric judged on its pairs: the test (None with fewer than two pairs), whether the bounds let
/// it decide, and the words.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub test: Option<Paired>,
    /// False when a pair counted at bolide's limit could move the verdict: the change is not
    /// significant, or a bound's truth lies against it.
    pub decided: bool,
    pub verdict: String,
}

/// A change in percent as the verdicts write it: "+12.3%", "-40.1%".
pub fn pct(v: f64) -> String {
    if !v.is_finite() {
        return if v > 0.0 { "+inf%".into() } else { "-inf%".into() };
    }
    if v.abs() >= 100.0 {
        format!("{v:+.0}%")
    } else {
        format!("{v:+.1}%")
    }
}

/// The paired verdict on `c`, in words: "significant (p = 0.004, paired t-test on the log ratios
/// of 4 interleaved pairs: +1234% [95% CI +300% to +4000%])", with what the suspect marks did.
pub fn judge(c: &Chosen, role: Role) -> Judged {
    let n = c.a.len();
    let first = c.a.first().or(c.b.first());
    let mut notes = Vec::new();
    let bounds = c.bound_for_a + c.bound_for_b;
    if bounds > 0 {
        notes.push(format!(
            "{bounds} {} at bolide's limit counted as measured (the server was at least that fast)",
            if bounds == 1 { "pair" } else { "pairs" },
        ));
    }
    if !c.left_out.is_empty() {
        let list: Vec<String> = c.left_out.iter().map(usize::to_string).collect();
        notes.push(format!(
            "{} {} left out (bolide's limit on {}, nothing decides {})",
            if c.left_out.len() == 1 { "pair" } else { "pairs" },
            list.join(", "),
            if role == Role::Other { "a side" } else { "both sides" },
            if c.left_out.len() == 1 { "it" } else { "them" }
        ));
    }
    let tail = if notes.is_empty() { String::new() } else { format!("; {}", notes.join("; ")) };
    if n > 0 && bounds == 0 && c.a.iter().chain(&c.b).all(|x| Some(x) == first) {
        return Judged { test: None, decided: true, verdict: format!("no difference in any run ({n} pairs){tail}") };
    }
    let Some(t) = stats::paired(&c.a, &c.b) else {
        return Judged {
            test: None,
            decided: false,
            verdict: format!("cannot tell from noise with {n} interleaved pairs (needs 2 or more){tail}"),
        };
    };
    let on = if t.log { "log ratios" } else { "differences" };
    let body = format!(
        "{}, paired t-test on the {on} of {n} interleaved pairs: {} [95% CI {} to {}]",
        stats::p_text(t.p),
        pct(t.change_pct),
        pct(t.interval_pct.0),
        pct(t.interval_pct.1)
    );
    let significant = t.p < stats::ALPHA;
    // Bounds push the truth one way or both: a verdict stands only where they all push it further
    // the way it goes.
    let (up, down) = c.may_move(role);
    let against = if t.mean > 0.0 { down } else { up };
    if bounds > 0 && (!significant || against) {
        let why = if significant {
            "a pair at bolide's limit lies on the side this change goes against (its truth would pull it back)"
        } else {
            "pairs at bolide's limit could move it (their truth is better than counted)"
        };
        return Judged { test: Some(t), decided: false, verdict: format!("no verdict: {body}, but {why}{tail}") };
    }
    let verdict = if significant {
        format!("significant ({body}){tail}")
    } else {
        format!("not significant ({body}): within the pairs' noise{tail}")
    };
    Judged { test: Some(t), decided: true, verdict }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s))
    }

    #[test]
    fn interleaved_series_are_told_from_series_run_one_after_the_other() {
        // A B, B A, A B: pairs of back-to-back runs.
        let three = Some(vec![(0, 0), (1, 1), (2, 2)]);
        assert_eq!(interleaved(&[at(0), at(30), at(40)], &[at(10), at(20), at(50)]), three);
        // Every run of A, then every run of B: two samples, not pairs.
        assert_eq!(interleaved(&[at(0), at(10), at(20)], &[at(30), at(40), at(50)]), None);
        // A start time missing, or a single run: no pairing.
        assert_eq!(interleaved(&[at(0), None], &[at(10), at(20)]), None);
        assert_eq!(interleaved(&[at(0)], &[at(10)]), None);
        // Runs started at the same instant cannot be ordered into pairs.
        assert_eq!(interleaved(&[at(0), at(0)], &[at(0), at(0)]), None);
        // An interrupted side: the pairs both have.
        assert_eq!(interleaved(&[at(0), at(30), at(40)], &[at(10), at(20)]), Some(vec![(0, 0), (1, 1)]));
        // A run of B left out of its series (another workload): the others still pair with the
        // run of A they ran beside, not by position.
        assert_eq!(interleaved(&[at(0), at(30), at(40)], &[at(10), at(50)]), None);
        assert_eq!(interleaved(&[at(0), at(30), at(40), at(70)], &[at(10), at(50), at(60)]), None);
        let kept = interleaved(&[at(0), at(30), at(40), at(70)], &[at(10), at(20), at(50), at(60)]);
        assert_eq!(kept, Some(vec![(0, 0), (1, 1), (2, 2), (3, 3)]));
        // A third series' runs between (a grid): A and C still pair.
        assert_eq!(interleaved(&[at(0), at(50)], &[at(20), at(30)]), Some(vec![(0, 0), (1, 1)]));
        assert!(started("2026-11-28T10:15:00.123Z").is_some() && started("").is_none());
    }

    #[test]
    fn suspect_marks_void_only_what_they_touch() {
        use Trust::*;
        let (a, b) = ([1.0, 1.0, 1.0, 1.0, 1.0], [2.0, 0.5, 2.0, 2.0, 3.0]);
        let (ta, tb) = ([Clean, Clean, Bound, Busy, Bound], [Bound, Bound, Clean, Busy, Bound]);
        let speed = Role::Speed { higher_is_better: true };
        let five: Pairs = (0..5).map(|i| (i, i)).collect();
        let c = choose(&a, &b, &ta, &tb, &five, speed);
        // Pairs with one side at its limit count as measured, whatever their values (a choice by
        // value would make a difference out of noise); a busy machine under both counts; both
        // sides at their limit: nothing decides it.
        assert_eq!((c.a.len(), c.bound_for_a, c.bound_for_b, c.left_out.clone()), (4, 1, 2, vec![5]));
        // Throughput: the series' truth is higher, the baseline's too: the change may move both ways.
        assert_eq!(c.may_move(speed), (true, true));
        // Error rates count every pair; other figures lose the saturated ones.
        assert_eq!(choose(&a, &b, &ta, &tb, &five, Role::Answer).a.len(), 5);
        assert_eq!(choose(&a, &b, &ta, &tb, &five, Role::Other).left_out, vec![1, 2, 3, 5]);
    }

    #[test]
    fn a_verdict_stands_where_its_bounds_agree_and_not_where_they_pull_back() {
        let faster = Role::Speed { higher_is_better: true };
        // B ahead (higher is better) in every pair, one pair at B's limit: the truth is more so.
        let c =
            Chosen { a: vec![1.0, 1.1, 0.9, 1.0], b: vec![2.0, 2.3, 1.8, 2.1], bound_for_b: 1, ..Default::default() };
        let j = judge(&c, faster);
        assert!(j.decided && j.verdict.starts_with("significant (p < 0.001, paired t-test"), "{}", j.verdict);
        assert!(j.verdict.contains("1 pair at bolide's limit counted as measured"), "{}", j.verdict);
        // The same change with a pair at A's limit: A's truth is better than counted, against it.
        let pulled = Chosen { bound_for_a: 1, bound_for_b: 0, ..c.clone() };
        let j = judge(&pulled, faster);
        assert!(!j.decided && j.verdict.starts_with("no verdict:"), "{}", j.verdict);
        // Within the noise with a pair at a limit: its truth could make it a change.
        let even =
            Chosen { a: vec![1.0, 1.1, 0.9, 1.0], b: vec![1.1, 1.0, 1.0, 0.9], bound_for_b: 1, ..Default::default() };
        assert!(!judge(&even, faster).decided);
        let one = Chosen { a: vec![1.0], b: vec![2.0], ..Default::default() };
        assert!(judge(&one, Role::Other).verdict.starts_with("cannot tell from noise with 1 interleaved pairs"));
    }
}

//! Statistics for comparing runs: medians, spreads, and Welch's t-test, so that a difference
//! between two versions is called significant only when it stands out from run-to-run noise.

/// Arithmetic mean (0 for no values).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Median (0 for no values).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Sample variance (n - 1 in the denominator; 0 for fewer than two values).
pub fn variance(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
}

/// (smallest, largest).
pub fn range(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(*x), hi.max(*x)))
}

/// Natural log of the gamma function (Lanczos approximation, g = 7, nine terms; about 15
/// significant digits for positive arguments).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The continued fraction of the incomplete beta function, evaluated by the modified Lentz
/// method; converges quickly for x < (a + 1) / (a + b + 2).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        // The even step, then the odd step, of the fraction's terms.
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// Two-sided p-value of Student's t with `df` degrees of freedom.
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// Welch's t-test of two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's unequal-variances t-test; None with fewer than two values on a side.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (variance(a) / na, variance(b) / nb);
    let diff = mean(b) - mean(a);
    let se2 = va + vb;
    if se2 == 0.0 {
        // No spread on either side: any difference is exact, none is none.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch { t: if diff == 0.0 { 0.0 } else { f64::INFINITY }, df: na + nb - 2.0, p });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Some(Welch { t, df, p: t_two_sided_p(t, df) })
}

/// Below this p-value a difference is called significant.
pub const ALPHA: f64 = 0.05;

/// The chance of detecting a real change that the minimum detectable effect is computed for.
pub const POWER: f64 = 0.8;

/// Student's t quantile: the `t` with P(T <= t) = `q` (0.5 <= q < 1) at `df` degrees of freedom,
/// by bisection on the two-sided p-value.
pub fn t_quantile(q: f64, df: f64) -> f64 {
    let target = 2.0 * (1.0 - q);
    let (mut lo, mut hi) = (0.0f64, 1e3f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_two_sided_p(mid, df) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The minimum detectable effect: the smallest true difference of the means (in the values'
/// units) that Welch's test at [`ALPHA`] finds with probability [`POWER`], for samples of `na`
/// and `nb` runs whose variances are `va` and `vb`: (t(1 - α/2) + t(power)) × the standard error,
/// at the Welch–Satterthwaite degrees of freedom. None with fewer than two runs a side.
pub fn mde(va: f64, vb: f64, na: usize, nb: usize) -> Option<f64> {
    if na < 2 || nb < 2 {
        return None;
    }
    let (sa, sb) = (va / na as f64, vb / nb as f64);
    let se2 = sa + sb;
    if se2 == 0.0 {
        return Some(0.0);
    }
    let df = se2 * se2 / (sa * sa / (na as f64 - 1.0) + sb * sb / (nb as f64 - 1.0));
    Some((t_quantile(1.0 - ALPHA / 2.0, df) + t_quantile(POWER, df)) * se2.sqrt())
}

/// The smallest change of the mean, percent of the baseline's, that the clean runs `a` (the
/// baseline) and `b` could detect (None with fewer than two a side, or a baseline mean of zero).
pub fn detectable_pct(a: &[f64], b: &[f64]) -> Option<f64> {
    let base = mean(a).abs();
    let m = mde(variance(a), variance(b), a.len(), b.len())?;
    (base > 0.0).then(|| m / base * 100.0)
}

/// The most runs a side [`runs_needed`] considers.
pub const MAX_RUNS: usize = 1000;

/// How many runs a side would detect a difference of `effect` (the values' units) with the
/// variances `va` and `vb` measured: the smallest n whose [`mde`] is at most `effect`; None past
/// [`MAX_RUNS`].
pub fn runs_needed(va: f64, vb: f64, effect: f64) -> Option<usize> {
    let effect = effect.abs();
    smallest_n(|n| mde(va, vb, n, n).is_some_and(|m| m <= effect))
}

/// The paired t-test of interleaved runs: pair `i` is run `i` of each side, taken one after the
/// other (A B, B A, ...), so what the machine did to both cancels in their difference.
///
/// Judged on the log ratios ln(b / a) when every value is positive (a change is a factor, and a
/// busy machine multiplies both sides alike), else on the differences b - a (an error rate that
/// is zero on a side).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    pub pairs: usize,
    /// The test ran on log ratios (true) or on differences.
    pub log: bool,
    /// Mean and sample standard deviation of the within-pair log ratios (or differences).
    pub mean: f64,
    pub sd: f64,
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// The estimated change, percent of the baseline (the geometric mean ratio, or the mean
    /// difference over the baseline's mean), and its 95% confidence interval.
    pub change_pct: f64,
    pub interval_pct: (f64, f64),
    /// The baseline's mean, for the differences' percentages.
    pub base_mean: f64,
}

/// A paired test's value (a log ratio or a difference) as a change in percent of the baseline.
fn paired_pct(log: bool, base_mean: f64, v: f64) -> f64 {
    if log {
        (v.exp() - 1.0) * 100.0
    } else if base_mean != 0.0 {
        v / base_mean.abs() * 100.0
    } else {
        f64::INFINITY.copysign(v)
    }
}

/// The paired t-test of `a[i]` against `b[i]`; None with fewer than two pairs.
pub fn paired(a: &[f64], b: &[f64]) -> Option<Paired> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let (a, b) = (&a[..n], &b[..n]);
    let log = a.iter().chain(b).all(|v| *v > 0.0 && v.is_finite());
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| if log { (y / x).ln() } else { y - x }).collect();
    let (m, sd) = (mean(&d), variance(&d).sqrt());
    let df = (n - 1) as f64;
    let se = sd / (n as f64).sqrt();
    let base_mean = mean(a);
    let (t, p) = if se == 0.0 {
        if m == 0.0 {
            (0.0, 1.0)
        } else {
            (f64::INFINITY.copysign(m), 0.0)
        }
    } else {
        (m / se, t_two_sided_p(m / se, df))
    };
    let half = t_quantile(1.0 - ALPHA / 2.0, df) * se;
    let pct = |v: f64| paired_pct(log, base_mean, v);
    Some(Paired {
        pairs: n,
        log,
        mean: m,
        sd,
        t,
        df,
        p,
        change_pct: pct(m),
        interval_pct: (pct(m - half), pct(m + half)),
        base_mean,
    })
}

/// The smallest change, percent of the baseline, that `pairs` interleaved pairs with this spread
/// of their within-pair log ratios (or differences, `log` false, over a baseline mean of
/// `base_mean`) detect with probability [`POWER`] at [`ALPHA`]: (t(1 - α/2) + t(power)) × sd / √n
/// at n - 1 degrees of freedom, as a rise (`direction` >= 0) or a fall (< 0) of the ratio, whose
/// percentages differ (a ratio of 1.1 is +10%, its inverse -9.1%). None with fewer than two pairs.
pub fn paired_mde_pct(sd: f64, pairs: usize, log: bool, base_mean: f64, direction: f64) -> Option<f64> {
    if pairs < 2 {
        return None;
    }
    let df = (pairs - 1) as f64;
    let m = (t_quantile(1.0 - ALPHA / 2.0, df) + t_quantile(POWER, df)) * sd / (pairs as f64).sqrt();
    let signed = if direction < 0.0 { -m } else { m };
    Some(paired_pct(log, base_mean, signed).abs())
}

/// The smallest n in 2..=[`MAX_RUNS`] for which `enough` holds (it holds from some n on); None
/// when even [`MAX_RUNS`] is not enough. By halving.
fn smallest_n(enough: impl Fn(usize) -> bool) -> Option<usize> {
    if !enough(MAX_RUNS) {
        return None;
    }
    let (mut lo, mut hi) = (2, MAX_RUNS);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// How many interleaved pairs would detect a change of `change_pct` percent (a rise, or a fall
/// when negative) with the measured spread: the smallest n whose [`paired_mde_pct`] in that
/// direction is at most it; None past [`MAX_RUNS`].
pub fn pairs_needed(sd: f64, log: bool, base_mean: f64, change_pct: f64) -> Option<usize> {
    smallest_n(|n| paired_mde_pct(sd, n, log, base_mean, change_pct).is_some_and(|m| m <= change_pct.abs()))
}

/// Whether the difference between `a` and `b` stands out from run-to-run noise, in plain words.
pub fn verdict(a: &[f64], b: &[f64]) -> String {
    let runs = match (a.len(), b.len()) {
        (1, 1) => "1 run each".to_string(),
        (x, y) if x == y => format!("{x} runs"),
        (x, y) => format!("{x} vs {y} runs"),
    };
    let first = a.first().or(b.first());
    if a.iter().chain(b).all(|x| Some(x) == first) {
        return format!("no difference in any run ({runs})");
    }
    match welch(a, b) {
        None => format!("cannot tell from noise with {runs} (needs 2 or more on each side)"),
        Some(w) if w.p < ALPHA => format!("significant ({}, Welch's t-test, {runs})", p_text(w.p)),
        Some(w) => format!("not significant with {runs} ({}): within run-to-run noise", p_text(w.p)),
    }
}

/// A p-value as the verdicts write it: `p = 0.012`, or `p < 0.001`.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".into()
    } else {
        format!("p = {p:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn basics() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert!(close(variance(&[1.0, 2.0, 3.0, 4.0, 5.0]), 2.5, 1e-12));
        assert_eq!(range(&[2.0, -1.0, 7.0]), (-1.0, 7.0));
        // Γ(5) = 24, Γ(0.5) = √π.
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-12));
    }

    #[test]
    fn t_distribution_against_closed_forms() {
        // df = 1 is the Cauchy distribution: P(|T| > 1) = 1/2; P(|T| > t) = 1 - 2 atan(t) / π.
        assert!(close(t_two_sided_p(1.0, 1.0), 0.5, 1e-12));
        assert!(close(t_two_sided_p(3.0, 1.0), 1.0 - 2.0 * 3f64.atan() / std::f64::consts::PI, 1e-12));
        // df = 2: P(|T| > t) = 1 - t / sqrt(t² + 2).
        for t in [0.5, 2.0, 10.0] {
            assert!(close(t_two_sided_p(t, 2.0), 1.0 - t / (t * t + 2.0).sqrt(), 1e-12), "{t}");
        }
        // Large df tends to the normal: P(|Z| > 1.959964) = 0.05.
        assert!(close(t_two_sided_p(1.959_964, 1e7), 0.05, 1e-5));
        assert_eq!(t_two_sided_p(0.0, 5.0), 1.0);
    }

    #[test]
    fn welch_on_samples_with_known_answers() {
        // Equal variances and sizes: Welch equals Student, t = -5, df = 8, p = 0.001053.
        let w = welch(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(w.t, 5.0, 1e-12) && close(w.df, 8.0, 1e-12), "{w:?}");
        assert!(close(w.p, 0.001_052_825, 2e-6), "{w:?}");
        // Unequal variances: df by the Welch–Satterthwaite formula. a: mean 2, var 1 (n 3);
        // b: mean 6, var 16 (n 3): se² = 17/3, t = 4 / sqrt(17/3), df = (17/3)² / ((1/3)²/2 + (16/3)²/2).
        let w = welch(&[1.0, 2.0, 3.0], &[2.0, 6.0, 10.0]).unwrap();
        let df = (17.0f64 / 3.0).powi(2) / ((1.0f64 / 3.0).powi(2) / 2.0 + (16.0f64 / 3.0).powi(2) / 2.0);
        assert!(close(w.df, df, 1e-9) && close(w.t, 4.0 / (17.0f64 / 3.0).sqrt(), 1e-12), "{w:?}");
        // p from numerical integration of the t density: 0.22095.
        assert!(close(w.p, 0.220_95, 1e-3), "{w:?}");
        assert!(welch(&[1.0], &[2.0, 3.0]).is_none());
        assert_eq!(welch(&[5.0, 5.0], &[5.0, 5.0]).unwrap().p, 1.0);
        assert_eq!(welch(&[5.0, 5.0], &[6.0, 6.0]).unwrap().p, 0.0);
    }

    #[test]
    fn detectable_effects_against_known_values() {
        // Large samples tend to the normal: (1.95996 + 0.84162) x sqrt(2/n) x sigma.
        let m = mde(1.0, 1.0, 10_000, 10_000).unwrap();
        assert!(close(m, 2.801_585 * (2.0f64 / 10_000.0).sqrt(), 1e-4), "{m}");
        // t quantiles from tables: t(0.975, 8) = 2.306004, t(0.8, 8) = 0.888890.
        assert!(close(t_quantile(0.975, 8.0), 2.306_004, 1e-5));
        assert!(close(t_quantile(0.8, 8.0), 0.888_890, 1e-5));
        // Equal variances and sizes: Welch's df is 2n - 2, so 5 runs a side use df 8.
        let m = mde(4.0, 4.0, 5, 5).unwrap();
        assert!(close(m, (2.306_004 + 0.888_890) * (8.0f64 / 5.0).sqrt(), 1e-4), "{m}");
        assert_eq!(mde(1.0, 1.0, 1, 5), None);
        assert_eq!(mde(0.0, 0.0, 3, 3), Some(0.0));
        // The runs needed are the first n whose MDE reaches the effect, and more for smaller ones.
        let n = runs_needed(4.0, 4.0, 2.0).unwrap();
        assert!(mde(4.0, 4.0, n, n).unwrap() <= 2.0 && mde(4.0, 4.0, n - 1, n - 1).unwrap() > 2.0);
        assert!(runs_needed(4.0, 4.0, 1.0).unwrap() > n);
        assert_eq!(runs_needed(1e9, 1e9, 1e-9), None);
    }

    #[test]
    fn verdicts_in_plain_words() {
        // The Meteor reports' reactive times: 2.16 vs 3.1.1, three runs each, clearly apart.
        let v = verdict(&[178.0, 176.0, 178.0], &[126.0, 124.0, 134.0]);
        assert!(v.starts_with("significant (p = 0.00"), "{v}");
        assert_eq!(verdict(&[0.0, 0.0], &[0.0, 0.0]), "no difference in any run (2 runs)");
        // Overlapping noise.
        let v = verdict(&[10.0, 12.0, 11.0], &[11.0, 10.5, 12.5]);
        assert!(v.starts_with("not significant with 3 runs"), "{v}");
        assert!(verdict(&[1.0], &[2.0]).contains("cannot tell from noise with 1 run each"));
        assert!(verdict(&[1.0, 2.0], &[2.0, 3.0, 4.0]).contains("2 vs 3 runs"));
    }

    #[test]
    fn paired_test_against_known_answers() {
        // Differences 1, 2, 3, 4 (a zero on a side: no log ratios): mean 2.5, sd sqrt(5/3),
        // t = 2.5 / (sd / 2) = 3.873, df 3, p = 0.0305 (tables).
        let p = paired(&[0.0, 0.0, 0.0, 0.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!(!p.log && close(p.mean, 2.5, 1e-12) && close(p.t, 3.872_983, 1e-5), "{p:?}");
        assert!(close(p.p, 0.030_5, 5e-4), "{p:?}");
        // Log ratios: every pair doubles, with a little noise; the change is about +100% and its
        // interval holds it.
        let a = [1.0, 2.0, 0.5, 4.0];
        let b = [2.1, 3.9, 1.0, 8.2];
        let p = paired(&a, &b).unwrap();
        assert!(p.log && p.p < 0.001 && close(p.change_pct, 100.0, 5.0), "{p:?}");
        assert!(p.interval_pct.0 < p.change_pct && p.change_pct < p.interval_pct.1, "{p:?}");
        // A machine that slows both sides of a pair by 10x cancels: the same values within pairs
        // give a clear verdict that Welch's test over the spread-out sides cannot.
        let a = [0.04, 0.42, 0.1, 0.3];
        let b: Vec<f64> = a.iter().map(|x| x * 30.0).collect();
        assert_eq!(paired(&a, &b).unwrap().p, 0.0);
        assert!(paired(&[1.0], &[2.0]).is_none());
        assert_eq!(paired(&[1.0, 2.0], &[1.0, 2.0]).unwrap().p, 1.0);
        // MDE: sd 0.1 over 4 pairs, log: (t(0.975, 3) + t(0.8, 3)) x 0.05 = (3.182446 + 0.978472) x 0.05.
        let m = paired_mde_pct(0.1, 4, true, 1.0, 1.0).unwrap();
        assert!(close(m, ((3.182_446 + 0.978_472) * 0.05f64).exp_m1() * 100.0, 1e-3), "{m}");
        // A fall of the same ratio is a smaller percentage.
        let fall = paired_mde_pct(0.1, 4, true, 1.0, -1.0).unwrap();
        assert!(close(fall, -(-(3.182_446 + 0.978_472) * 0.05f64).exp_m1() * 100.0, 1e-3), "{fall}");
        let n = pairs_needed(0.1, true, 1.0, 5.0).unwrap();
        let mde = |n| paired_mde_pct(0.1, n, true, 1.0, 1.0).unwrap();
        assert!(mde(n) <= 5.0 && mde(n - 1) > 5.0);
        // A fall of 5% is the larger log ratio: no more pairs than a rise of 5%.
        assert!(pairs_needed(0.1, true, 1.0, -5.0).unwrap() <= n);
        assert_eq!(pairs_needed(10.0, true, 1.0, 0.001), None);
    }
}

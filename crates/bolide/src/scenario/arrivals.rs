//! Phases -> arrival times, as a pure function: arrival `k` (0-based, over the whole run) is due
//! at [`Schedule::arrival`]`(k)`, whether or not the server keeps up (open model). Workers take
//! interleaved slices of the same schedule, as for fixed-rate HTTP. A closed `users` phase's
//! arrivals are its looping users, and [`Schedule::until`] says when they stop looping.

use std::time::Duration;

use super::{Phase, PhaseKind};

/// The arrival schedule of a list of phases.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Each phase with its start offset, arrival count and first arrival's global index.
    parts: Vec<(Duration, Phase, u64, u64)>,
    /// A Poisson (or gamma-spaced) phase's arrival times, by the phase's index, as fractions of
    /// its length: drawn once from a seed of the phase's own, so that every worker and every
    /// segment of a run has the same schedule.
    spaced: Vec<(usize, std::sync::Arc<[f32]>)>,
    total: u64,
    length: Duration,
}

/// The most arrivals a Poisson phase may hold (its times are drawn once: 4 bytes each).
pub const MAX_SPACED_ARRIVALS: u64 = 20_000_000;

/// Times of `n` arrivals in [0, 1) as a renewal process with gamma-distributed gaps of shape
/// `shape` (1: a Poisson process), scaled so that one gap more ends the phase: for a Poisson
/// process, the order statistics of `n` uniform draws.
pub fn spaced(n: u64, shape: f64, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut normal = || {
        let (u1, u2): (f64, f64) = (rng.random_range(f64::EPSILON..1.0), rng.random());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let mut uniforms = rand::rngs::StdRng::seed_from_u64(seed ^ 0x9E37_79B9_7F4A_7C15);
    // Marsaglia and Tsang's method; a shape below 1 through shape + 1 and a uniform's power.
    let mut gamma = |k: f64| -> f64 {
        let (k1, boost) = if k < 1.0 { (k + 1.0, true) } else { (k, false) };
        let d = k1 - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        let g = loop {
            let x = normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u: f64 = uniforms.random_range(f64::EPSILON..1.0);
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                break d * v;
            }
        };
        if boost {
            g * uniforms.random_range(f64::EPSILON..1.0).powf(1.0 / k)
        } else {
            g
        }
    };
    // The gaps first (4 bytes each), then their running sums as fractions of the whole, in place.
    let mut at: Vec<f32> = (0..n).map(|_| gamma(shape) as f32).collect();
    let end = at.iter().map(|g| f64::from(*g)).sum::<f64>() + gamma(shape);
    if !(end.is_finite() && end > 0.0) {
        // Gaps too small to add up (no shape the scenario reader accepts): evenly spaced.
        return (0..n).map(|i| (i as f64 / n as f64) as f32).collect();
    }
    let mut sum = 0.0f64;
    for t in at.iter_mut() {
        sum += f64::from(*t);
        *t = (sum / end) as f32;
    }
    at
}

/// Arrivals a phase produces.
fn count(p: &Phase) -> u64 {
    let d = p.duration.as_secs_f64();
    match p.kind {
        PhaseKind::Rate { per_s, ramp_to: None } => (per_s * d).ceil() as u64,
        PhaseKind::Rate { per_s, ramp_to: Some(to) } => ((per_s + to) / 2.0 * d).ceil() as u64,
        PhaseKind::Count(n) | PhaseKind::Users(n) => n,
        PhaseKind::Pause => 0,
    }
}

/// When, from the phase's start, its `i`-th arrival is due.
fn offset(p: &Phase, i: u64) -> Duration {
    let d = p.duration.as_secs_f64();
    let i = i as f64;
    let secs = match p.kind {
        PhaseKind::Rate { per_s, ramp_to: None } => i / per_s,
        PhaseKind::Rate { per_s: r0, ramp_to: Some(r1) } => {
            // Arrivals so far at t: N(t) = r0 t + (r1 - r0) t^2 / (2 d); arrival i is due at N(t) = i.
            let a = (r1 - r0) / (2.0 * d);
            if a.abs() < 1e-12 {
                i / r0
            } else {
                (-r0 + (r0 * r0 + 4.0 * a * i).max(0.0).sqrt()) / (2.0 * a)
            }
        }
        PhaseKind::Count(n) => i * d / n as f64,
        // Looping users start over the first second (or the whole phase, if shorter), not all at
        // one instant.
        PhaseKind::Users(n) => i * d.min(1.0) / n as f64,
        PhaseKind::Pause => 0.0,
    };
    Duration::from_secs_f64(secs.clamp(0.0, d))
}

impl Schedule {
    pub fn new(phases: &[Phase]) -> Schedule {
        let mut parts = Vec::new();
        let mut spaced_parts = Vec::new();
        let (mut start, mut first) = (Duration::ZERO, 0u64);
        for (i, p) in phases.iter().enumerate() {
            let n = count(p);
            let steady = matches!(p.kind, PhaseKind::Rate { ramp_to: None, .. } | PhaseKind::Count(_));
            // The scenario reader refuses a Poisson phase of more arrivals; one cut or re-rated
            // from the command line past it is spaced evenly.
            if let Some(shape) = p.burstiness.filter(|_| steady && n <= MAX_SPACED_ARRIVALS) {
                let times = spaced(n, shape, 0xB0_11DE ^ ((i as u64) << 32) ^ n);
                spaced_parts.push((i, std::sync::Arc::from(times)));
            }
            parts.push((start, p.clone(), n, first));
            start += p.duration;
            first += n;
        }
        Schedule { parts, spaced: spaced_parts, total: first, length: start }
    }

    /// Every arrival of the run.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Length of all phases together.
    pub fn length(&self) -> Duration {
        self.length
    }

    /// When arrival `k` is due, from the start of the run; None past the last one.
    pub fn arrival(&self, k: u64) -> Option<Duration> {
        let i = self.parts.iter().position(|(_, _, n, first)| k >= *first && k < first + n)?;
        let (start, phase, _, first) = &self.parts[i];
        if let Some((_, times)) = self.spaced.iter().find(|(p, _)| *p == i) {
            let at = times.get((k - first) as usize).copied().unwrap_or(1.0);
            return Some(*start + phase.duration.mul_f64(f64::from(at).clamp(0.0, 1.0)));
        }
        Some(*start + offset(phase, k - first))
    }

    /// For a user of a closed `users` phase: when it stops starting its flow again (the phase's
    /// end, from the start of the run). None for users who walk their flow once.
    pub fn until(&self, k: u64) -> Option<Duration> {
        let (start, phase, _, _) = self.parts.iter().find(|(_, _, n, first)| k >= *first && k < first + n)?;
        matches!(phase.kind, PhaseKind::Users(_)).then(|| *start + phase.duration)
    }

    /// The phase an arrival belongs to (its name, or its position).
    pub fn phase_of(&self, k: u64) -> Option<usize> {
        self.parts.iter().position(|(_, _, n, first)| k >= *first && k < first + n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(secs: u64, kind: PhaseKind) -> Phase {
        Phase { name: None, duration: Duration::from_secs(secs), kind, burstiness: None }
    }

    fn ms(d: Option<Duration>) -> Option<u128> {
        d.map(|d| d.as_millis())
    }

    #[test]
    fn constant_rate_ramp_count_and_pause() {
        let s = Schedule::new(&[
            phase(60, PhaseKind::Rate { per_s: 4.0, ramp_to: None }), // the Meteor benchmark: 240 users
            phase(10, PhaseKind::Pause),
            phase(10, PhaseKind::Count(5)),
            phase(10, PhaseKind::Rate { per_s: 0.0, ramp_to: Some(10.0) }),
        ]);
        assert_eq!(s.total(), 240 + 5 + 50);
        assert_eq!(s.length(), Duration::from_secs(90));
        // Each row: arrival index, due time in ms.
        let rows = [
            (0, Some(0)),
            (1, Some(250)),
            (239, Some(59_750)),
            // The pause: the next arrival is the count phase's first, at 70 s, then every 2 s.
            (240, Some(70_000)),
            (241, Some(72_000)),
            (244, Some(78_000)),
            // The ramp from 0 to 10/s over 10 s: N(t) = t^2 / 2, so arrival i at sqrt(2 i).
            (245, Some(80_000)),
            (247, Some(82_000)),
            (249, Some(80_000 + 2_828)),
            (294, Some(80_000 + 9_899)),
            (295, None),
        ];
        for (k, want) in rows {
            assert_eq!(ms(s.arrival(k)), want, "arrival {k}");
        }
        assert_eq!(s.phase_of(240), Some(2));
        assert_eq!(s.phase_of(300), None);
    }

    #[test]
    fn arrivals_are_in_order_and_inside_their_phase() {
        let s = Schedule::new(&[
            phase(7, PhaseKind::Rate { per_s: 3.3, ramp_to: Some(0.5) }),
            phase(3, PhaseKind::Rate { per_s: 9.0, ramp_to: None }),
        ]);
        let times: Vec<Duration> = (0..s.total()).map(|k| s.arrival(k).unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert!(times.iter().all(|t| *t < s.length()));
        assert_eq!(s.total(), 14 + 27);
    }

    #[test]
    fn poisson_arrivals_keep_their_count_order_and_phase() {
        let poisson = |secs, kind, b| Phase { burstiness: Some(b), ..phase(secs, kind) };
        let s = Schedule::new(&[
            poisson(100, PhaseKind::Rate { per_s: 50.0, ramp_to: None }, 1.0),
            phase(10, PhaseKind::Count(10)),
            poisson(100, PhaseKind::Count(5000), 0.25),
        ]);
        assert_eq!(s.total(), 5000 + 10 + 5000);
        let times: Vec<f64> = (0..s.total()).map(|k| s.arrival(k).unwrap().as_secs_f64()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!(times[..5000].iter().all(|t| *t <= 100.0) && times[5010..].iter().all(|t| (110.0..=210.0).contains(t)));
        // The same schedule every time (every worker and segment computes it).
        assert_eq!(Schedule::new(&s.parts.iter().map(|p| p.1.clone()).collect::<Vec<_>>()), s);
        // Poisson gaps: their mean is 1 / rate and their spread as large (an exponential's
        // coefficient of variation is 1); burstiness 0.25 spreads them twice as far (1 / sqrt(k)).
        let cv = |ts: &[f64]| {
            let gaps: Vec<f64> = ts.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            (mean, var.sqrt() / mean)
        };
        let (mean, v) = cv(&times[..5000]);
        assert!((mean - 0.02).abs() < 0.001 && (0.9..1.1).contains(&v), "{mean} {v}");
        let (_, v) = cv(&times[5010..]);
        assert!((1.8..2.2).contains(&v), "{v}");
    }

    #[test]
    fn closed_users_start_within_a_second_and_loop_to_the_phase_end() {
        let s = Schedule::new(&[
            phase(5, PhaseKind::Count(2)),
            phase(30, PhaseKind::Users(4)),
            phase(1, PhaseKind::Users(0)),
            phase(10, PhaseKind::Rate { per_s: 1.0, ramp_to: None }),
        ]);
        assert_eq!(s.total(), 2 + 4 + 10);
        // Each row: arrival index, due time in ms, looping until (ms).
        let rows = [
            (0, Some(0), None),
            (1, Some(2_500), None),
            (2, Some(5_000), Some(35_000)),
            (3, Some(5_250), Some(35_000)),
            (5, Some(5_750), Some(35_000)),
            (6, Some(36_000), None),
            (16, None, None),
        ];
        for (k, due, until) in rows {
            assert_eq!(ms(s.arrival(k)), due, "arrival {k}");
            assert_eq!(ms(s.until(k)), until, "until {k}");
        }
        // A closed phase shorter than a second spreads its users over itself.
        let short = Schedule::new(&[phase(0, PhaseKind::Users(3))]);
        assert_eq!(short.arrival(2), Some(Duration::ZERO));
    }
}

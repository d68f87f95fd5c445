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
    total: u64,
    length: Duration,
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
        let (mut start, mut first) = (Duration::ZERO, 0u64);
        for p in phases {
            let n = count(p);
            parts.push((start, p.clone(), n, first));
            start += p.duration;
            first += n;
        }
        Schedule { parts, total: first, length: start }
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
        let (start, phase, _, first) = self.parts.iter().find(|(_, _, n, first)| k >= *first && k < first + n)?;
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
        Phase { name: None, duration: Duration::from_secs(secs), kind }
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

//! Pacing and stopping as pure functions of (elapsed time, requests sent so far).
//!
//! The send loop asks [`next`] before each request: it answers when the request is due (now, for
//! the closed model; on the fixed-rate schedule for `--rps`) or that the run is over. Because the
//! answer is a function of its arguments only, the whole schedule is tested with tables and no clock.

use std::time::Duration;

/// When requests are due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacer {
    /// Closed model: each connection sends as soon as its previous response arrived.
    Closed,
    /// Open model: global request `k` is due at `k / per_s` seconds, whether or not the server
    /// keeps up. A worker sends its `slice` of the global schedule.
    Rate { per_s: f64, slice: Slice },
}

/// A worker's share of a global schedule: of every `stride` consecutive global slots, the `width`
/// starting at `offset` (the worker's connections among all connections). The workers' slices
/// together are exactly the global schedule, so splitting a run over threads changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    pub stride: u64,
    pub offset: u64,
    pub width: u64,
}

impl Slice {
    /// The whole schedule.
    pub const WHOLE: Slice = Slice { stride: 1, offset: 0, width: 1 };

    /// The global index of this slice's `local`-th slot.
    pub fn global(&self, local: u64) -> u64 {
        (local / self.width) * self.stride + self.offset + local % self.width
    }

    /// How many of the global slots `0..n` fall in this slice.
    pub fn count_below(&self, n: u64) -> u64 {
        let rem = n % self.stride;
        (n / self.stride) * self.width + rem.saturating_sub(self.offset).min(self.width)
    }
}

/// When the run ends; whichever limit is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stop {
    pub time: Option<Duration>,
    pub count: Option<u64>,
}

/// The answer to "may I send request number `sent`?".
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Send it at `due` after the start, which is `wait` from now (zero when due or overdue).
    Send { due: Duration, wait: Duration },
    /// No more requests.
    Stop,
}

/// Decides about request number `sent` (0-based) at `elapsed` since the start.
pub fn next(pacer: Pacer, stop: Stop, elapsed: Duration, sent: u64) -> Next {
    if stop.count.is_some_and(|n| sent >= n) {
        return Next::Stop;
    }
    let due = match pacer {
        Pacer::Closed => elapsed,
        Pacer::Rate { per_s, slice } => Duration::from_secs_f64(slice.global(sent) as f64 / per_s),
    };
    if stop.time.is_some_and(|t| due >= t) {
        return Next::Stop;
    }
    Next::Send { due, wait: due.saturating_sub(elapsed) }
}

/// How many sends a fixed-rate schedule asks for before `stop` (0 for the closed model, which
/// has no schedule to fall behind).
pub fn scheduled_sends(pacer: Pacer, stop: Stop) -> u64 {
    let Pacer::Rate { per_s, slice } = pacer else {
        return 0;
    };
    debug_assert_eq!(slice, Slice::WHOLE, "the whole schedule is counted, not a worker's slice");
    let by_time = stop.time.map(|t| (t.as_secs_f64() * per_s).ceil() as u64);
    match (by_time, stop.count) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) => a,
        (None, Some(b)) => b,
        (None, None) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn send(due_ms: u64, wait_ms: u64) -> Next {
        Next::Send { due: ms(due_ms), wait: ms(wait_ms) }
    }

    #[test]
    fn schedule_table() {
        let time = |t| Stop { time: Some(ms(t)), count: None };
        let count = |n| Stop { time: None, count: Some(n) };
        let rate = |per_s| Pacer::Rate { per_s, slice: Slice::WHOLE };
        // (pacer, stop, elapsed ms, sent, expected)
        let rows = [
            // Closed model: always now, until the time limit.
            (Pacer::Closed, time(1000), 0, 0, send(0, 0)),
            (Pacer::Closed, time(1000), 999, 5000, send(999, 0)),
            (Pacer::Closed, time(1000), 1000, 5000, Next::Stop),
            // Closed model with a count: exactly n sends.
            (Pacer::Closed, count(3), 10, 2, send(10, 0)),
            (Pacer::Closed, count(3), 10, 3, Next::Stop),
            // 100/s: request k is due at 10k ms; early askers wait.
            (rate(100.0), time(1000), 0, 0, send(0, 0)),
            (rate(100.0), time(1000), 0, 1, send(10, 10)),
            (rate(100.0), time(1000), 25, 5, send(50, 25)),
            // Behind schedule: due in the past, no wait, and nothing is skipped.
            (rate(100.0), time(1000), 500, 10, send(100, 0)),
            // The last slot before the end, then the end even if we are behind.
            (rate(100.0), time(1000), 990, 99, send(990, 0)),
            (rate(100.0), time(1000), 995, 100, Next::Stop),
            (rate(100.0), time(1000), 1500, 100, Next::Stop),
            // Rate with a count: the count ends it, not the clock.
            (rate(2.0), count(2), 0, 1, send(500, 500)),
            (rate(2.0), count(2), 0, 2, Next::Stop),
        ];
        for (i, (pacer, stop, elapsed, sent, want)) in rows.into_iter().enumerate() {
            assert_eq!(next(pacer, stop, ms(elapsed), sent), want, "row {i}");
        }
    }

    #[test]
    fn slices_partition_the_schedule() {
        // Connections split 2/1/3 over three workers: every global slot belongs to one slice.
        let slices = [
            Slice { stride: 6, offset: 0, width: 2 },
            Slice { stride: 6, offset: 2, width: 1 },
            Slice { stride: 6, offset: 3, width: 3 },
        ];
        let mut seen: Vec<u64> = slices.iter().flat_map(|s| (0..s.count_below(600)).map(|l| s.global(l))).collect();
        seen.sort();
        assert_eq!(seen, (0..600).collect::<Vec<_>>());
        for n in 0..40 {
            assert_eq!(slices.iter().map(|s| s.count_below(n)).sum::<u64>(), n, "n = {n}");
        }
        // The first slots of the middle slice: 2, 8, 14.
        assert_eq!([0, 1, 2].map(|l| slices[1].global(l)), [2, 8, 14]);
    }

    #[test]
    fn a_sliced_walk_sends_its_share_of_the_schedule() {
        // Two workers with one and two of three connections: 34 + 66 = 100 sends in one second.
        let stop = Stop { time: Some(Duration::from_secs(1)), count: None };
        let mut total = 0;
        for slice in [Slice { stride: 3, offset: 0, width: 1 }, Slice { stride: 3, offset: 1, width: 2 }] {
            let pacer = Pacer::Rate { per_s: 100.0, slice };
            let mut sent = 0;
            while let Next::Send { .. } = next(pacer, stop, Duration::ZERO, sent) {
                sent += 1;
            }
            total += sent;
        }
        assert_eq!(total, 100);
    }

    #[test]
    fn scheduled_send_counts() {
        let rate = Pacer::Rate { per_s: 100.0, slice: Slice::WHOLE };
        let both = Stop { time: Some(ms(1000)), count: Some(30) };
        assert_eq!(scheduled_sends(rate, Stop { time: Some(ms(1000)), count: None }), 100);
        assert_eq!(scheduled_sends(rate, Stop { time: Some(ms(1005)), count: None }), 101);
        assert_eq!(scheduled_sends(rate, both), 30);
        assert_eq!(scheduled_sends(Pacer::Closed, both), 0);
    }

    #[test]
    fn a_walk_through_a_fixed_rate_schedule_sends_exactly_the_scheduled_count() {
        // Drive the pure function like a send loop with a fake clock that jumps to each due time.
        let pacer = Pacer::Rate { per_s: 250.0, slice: Slice::WHOLE };
        let stop = Stop { time: Some(Duration::from_secs(2)), count: None };
        let (mut elapsed, mut sent) = (Duration::ZERO, 0u64);
        while let Next::Send { due, wait } = next(pacer, stop, elapsed, sent) {
            elapsed += wait;
            assert_eq!(elapsed, due.max(elapsed));
            sent += 1;
        }
        assert_eq!(sent, scheduled_sends(pacer, stop));
        assert_eq!(sent, 500);
    }
}

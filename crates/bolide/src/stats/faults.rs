//! The faults seeded into a run (`--fault`) as its document records them: when each was done and
//! what followed it, read from the run's seconds ([`follow`]). Doing them is `crate::fault`'s.

use serde::{Deserialize, Serialize};

/// A fault as it happened, on the run's timeline; with what followed it (filled from the
/// run's seconds once it ended).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// As given: `restart@20s`.
    pub fault: String,
    /// When it was done, seconds from the run's start.
    pub at_s: f64,
    /// What was done, in words ("killed the server's process group (pid 123)", ...).
    pub done: String,
    /// Whether it could be done (the server was there to kill, it started again, ...).
    pub ok: bool,
    /// Users' reconnections of the connections that closed from the fault until the next one
    /// (or the run's end), whenever the users came back.
    pub reconnects: u64,
    /// Method calls sent again after a reconnection in that window.
    pub resent: u64,
    /// From the fault until the last of those reconnections, seconds (to a tenth;
    /// absent with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_s: Option<f64>,
    /// From the fault until an audit check agreed with the truth again after the last of those
    /// reconnections (or after the fault, with none), seconds (whole seconds; absent when none
    /// did before the run's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_s: Option<f64>,
    /// When the faults' clock (`at_s`'s zero) started: the users' clock may start later (a
    /// browser launched first), so their times are moved onto this one before they are read.
    #[serde(skip)]
    pub clock: Option<std::time::SystemTime>,
}

/// How much earlier than its fault a connection may be seen to close and still be the fault's
/// (the two clocks' starts, read on two threads, told apart to within this).
const CLOCKS_APART_S: f64 = 0.02;

/// Fills each record's reconnects, resent methods, and times to back and to converged, from the
/// run's seconds (`(t, reconnects, resent, agreed checks)`) and its reconnections (when the
/// connection closed, when the user was back: seconds from the start). A reconnection is the
/// fault's whose time its connection closed after (and before the next fault's), whenever the
/// user came back: a user that finds its connection gone only at its next step, after the next
/// fault, still credits the fault that closed it.
pub fn follow(records: &mut [FaultRecord], seconds: &[(u32, u64, u64, u64)], reconnections: &[(f64, f64)]) {
    let ends: Vec<f64> = records.iter().skip(1).map(|r| r.at_s).chain([f64::INFINITY]).collect();
    for (r, end) in records.iter_mut().zip(ends) {
        // A second [t, t+1) belongs to the last fault done before its end.
        let window: Vec<&(u32, u64, u64, u64)> =
            seconds.iter().filter(|(t, ..)| f64::from(*t) + 1.0 > r.at_s && f64::from(*t) + 1.0 <= end).collect();
        let (from, to) = (r.at_s - CLOCKS_APART_S, end - CLOCKS_APART_S);
        let mine: Vec<&(f64, f64)> =
            reconnections.iter().filter(|(closed, _)| *closed >= from && *closed < to).collect();
        r.reconnects = mine.len() as u64;
        r.resent = window.iter().map(|s| s.2).sum();
        let last_back = mine.iter().map(|x| x.1).reduce(f64::max);
        r.back_s = last_back.map(|t| ((t - r.at_s) * 10.0).round().max(0.0) / 10.0);
        // The first agreed check in a second that ended after that.
        let from = last_back.unwrap_or(r.at_s);
        r.converged_s = seconds
            .iter()
            .filter(|s| s.3 > 0 && f64::from(s.0) + 1.0 > from && f64::from(s.0) + 1.0 > r.at_s)
            .map(|s| (f64::from(s.0) + 1.0 - r.at_s).max(0.0))
            .reduce(f64::min);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_credited_with_the_reconnections_of_the_connections_it_closed() {
        let mut records = vec![
            FaultRecord { fault: "drop@2s:50%".into(), at_s: 2.0, ..FaultRecord::default() },
            FaultRecord { fault: "restart@6s".into(), at_s: 6.0, ..FaultRecord::default() },
        ];
        // (t, reconnects, resent, agreed checks)
        let seconds =
            [(1, 1, 0, 5), (2, 2, 1, 0), (3, 0, 0, 0), (4, 0, 0, 4), (6, 1, 2, 0), (7, 1, 0, 0), (8, 0, 0, 3)];
        // (closed, back): one closed before any fault; one the drop closed whose user came
        // back only after the restart.
        let reconnections = [(1.0, 1.2), (2.01, 2.5), (2.02, 3.4), (5.5, 7.2), (6.05, 6.9)];
        follow(&mut records, &seconds, &reconnections);
        assert_eq!((records[0].reconnects, records[0].resent), (3, 1));
        assert_eq!((records[0].back_s, records[0].converged_s), (Some(5.2), Some(7.0)));
        assert_eq!((records[1].reconnects, records[1].resent), (1, 2));
        assert_eq!((records[1].back_s, records[1].converged_s), (Some(0.9), Some(3.0)));
        // A close seen a hair before its fault (two clocks read on two threads) is still its own.
        let mut records = vec![
            FaultRecord { fault: "restart@1s".into(), at_s: 1.0, ..FaultRecord::default() },
            FaultRecord { fault: "drop@2s:10%".into(), at_s: 2.0, ..FaultRecord::default() },
        ];
        follow(&mut records, &[(1, 1, 0, 0), (2, 1, 0, 0), (3, 0, 0, 7)], &[(0.99, 1.5), (1.99, 2.3)]);
        assert_eq!((records[0].reconnects, records[0].back_s, records[0].converged_s), (1, Some(0.5), Some(3.0)));
        assert_eq!((records[1].reconnects, records[1].back_s, records[1].converged_s), (1, Some(0.3), Some(2.0)));
        // No agreed check after it: no convergence.
        let mut records = vec![FaultRecord { fault: "kill@1s".into(), at_s: 1.0, ..FaultRecord::default() }];
        follow(&mut records, &[(0, 0, 0, 3), (1, 0, 0, 0)], &[]);
        assert_eq!((records[0].reconnects, records[0].back_s, records[0].converged_s), (0, None, None));
    }
}

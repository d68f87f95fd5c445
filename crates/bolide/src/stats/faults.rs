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
    /// Users' reconnections from the fault until the next one (or the run's end).
    pub reconnects: u64,
    /// Method calls sent again after a reconnection in that window.
    pub resent: u64,
    /// From the fault until the last of those reconnections, seconds (whole seconds of the
    /// timeline; absent with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_s: Option<f64>,
    /// From the fault until an audit check agreed with the truth again after the last of those
    /// reconnections (or after the fault, with none), seconds (whole seconds; absent when none
    /// did before the run's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub converged_s: Option<f64>,
}

/// Fills each record's reconnects, resent methods, and times to back and to converged from the
/// run's seconds (`(t, reconnects, resent, agreed checks)`).
pub fn follow(records: &mut [FaultRecord], seconds: &[(u32, u64, u64, u64)]) {
    let ends: Vec<f64> = records.iter().skip(1).map(|r| r.at_s).chain([f64::INFINITY]).collect();
    for (r, end) in records.iter_mut().zip(ends) {
        // A second [t, t+1) belongs to the last fault done before its end.
        let window: Vec<&(u32, u64, u64, u64)> =
            seconds.iter().filter(|(t, ..)| f64::from(*t) + 1.0 > r.at_s && f64::from(*t) + 1.0 <= end).collect();
        r.reconnects = window.iter().map(|s| s.1).sum();
        r.resent = window.iter().map(|s| s.2).sum();
        let last_back = window.iter().filter(|s| s.1 > 0).map(|s| s.0).max();
        r.back_s = last_back.map(|t| (f64::from(t) + 1.0 - r.at_s).max(0.0));
        // The first agreed check after that, even past the next fault.
        let from = last_back.unwrap_or(0);
        r.converged_s = seconds
            .iter()
            .filter(|s| s.3 > 0 && s.0 >= from && f64::from(s.0) + 1.0 > r.at_s)
            .map(|s| (f64::from(s.0) + 1.0 - r.at_s).max(0.0))
            .reduce(f64::min);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_is_followed_by_its_reconnects_until_the_next() {
        let mut records = vec![
            FaultRecord { fault: "drop@2s:50%".into(), at_s: 2.0, ..FaultRecord::default() },
            FaultRecord { fault: "restart@6s".into(), at_s: 6.0, ..FaultRecord::default() },
        ];
        // (t, reconnects, resent, agreed checks)
        let seconds = [(1, 0, 0, 5), (2, 3, 1, 0), (3, 2, 0, 0), (4, 0, 0, 4), (6, 5, 2, 0), (7, 0, 0, 0)];
        follow(&mut records, &seconds);
        assert_eq!((records[0].reconnects, records[0].resent), (5, 1));
        assert_eq!((records[0].back_s, records[0].converged_s), (Some(2.0), Some(3.0)));
        assert_eq!((records[1].reconnects, records[1].resent), (5, 2));
        assert_eq!((records[1].back_s, records[1].converged_s), (Some(1.0), None), "no check agreed after it");
        // A check that agreed only after the next fault still says when the first converged.
        let mut records = vec![
            FaultRecord { fault: "restart@1s".into(), at_s: 1.0, ..FaultRecord::default() },
            FaultRecord { fault: "drop@2s:10%".into(), at_s: 2.0, ..FaultRecord::default() },
        ];
        follow(&mut records, &[(1, 4, 0, 0), (2, 0, 0, 0), (3, 0, 0, 7)]);
        assert_eq!((records[0].back_s, records[0].converged_s), (Some(1.0), Some(3.0)));
        assert_eq!((records[1].reconnects, records[1].converged_s), (0, Some(2.0)));
    }
}

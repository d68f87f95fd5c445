//! One protocol-neutral reading of any result document: what its unit of work is, how many
//! ended and how many failed (what an error is, decided here once for every reader: the
//! terminal, thresholds, the `compare` gate, the capacity ladder, the report's band, CSV, JUnit),
//! its latency, its rates, its per-second series. Each workload's document implements
//! [`Reading`] beside its definition (`result.rs` for HTTP, `vu.rs` for DDP); readers go through
//! `Doc::view`, never through a `match` on the kind.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::envelope::Enveloped;

use crate::problem::Problem;

/// A per-second series a chart overlays across runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverTime {
    /// HTTP: responses per second.
    Responses,
    /// HTTP: the second's p99 latency, ms.
    P99,
    /// Virtual users alive at the second's end.
    UsersAlive,
    /// Virtual users' steps per second.
    Steps,
}

/// A result document read in the terms every reader shares.
pub trait Reading: Enveloped {
    /// `"http"` or `"ddp"`.
    fn kind(&self) -> &'static str;
    /// The segment of a plan the run was (`--segment`); None for a whole plan.
    fn segment(&self) -> Option<crate::segment::Segment>;
    /// bolide's load threads.
    fn threads(&self) -> usize;
    /// The workload's name: a scenario, or `http` and the paths requested.
    fn workload(&self) -> String;
    /// The workload in named parts: two runs compare only when every part is equal.
    fn workload_parts(&self) -> Vec<(&'static str, String)>;
    /// The units of work that ended and those that failed, the error rate's basis: requests that
    /// ended and failed requests (transport errors and unexpected statuses), or steps run and
    /// failed steps.
    fn ended_and_failed(&self) -> (u64, u64);
    /// The run's errors as every table and the `errors` threshold count them: failed requests, or
    /// failed steps and users cut at the user timeout.
    fn errors(&self) -> u64;
    /// What failed, for people, most telling first.
    fn failures(&self) -> Vec<(String, u64)>;
    /// Failures by class (every class the run counted).
    fn errors_by_class(&self) -> &BTreeMap<String, u64>;
    /// The outcomes chart's title and its bars before the failure classes: responses by status,
    /// or steps completed.
    fn outcomes(&self) -> (&'static str, Vec<(String, u64)>);
    /// Every unit of work's latency in one histogram (None when none was timed).
    fn latency(&self) -> Result<Option<Histogram<u64>>, String>;
    /// Why there is no latency: `no response completed`, `no step completed`.
    fn no_latency(&self) -> &'static str;
    /// One step's latency (a workload without steps says so).
    fn step_latency(&self, name: &str) -> Result<Histogram<u64>, Problem>;
    /// Units of work done per second over the run (responses, steps).
    fn units_per_s(&self) -> Result<f64, Problem>;
    /// The Meteor reports' "Time": the run's length (HTTP), from the first arrival to the last
    /// user's end (DDP).
    fn time_s(&self) -> f64;
    /// Seconds per unit of work, the basis of "faster": time per request (HTTP), the Time (DDP,
    /// whose workload is fixed).
    fn speed_s(&self) -> f64;
    /// Completed responses per second (HTTP).
    fn requests_per_s(&self) -> Option<f64> {
        None
    }
    /// Mean and p99 latency, ms.
    fn mean_p99_ms(&self) -> (Option<f64>, Option<f64>);
    /// Why the run measured nothing at all (no request went out, no user arrived).
    fn unmeasured(&self) -> Option<String>;
    /// bolide's own shape as the limit of a fixed-rate run (too few connections for the rate), to
    /// keep a ladder's level from blaming the server; `max_p99_ms` is the ladder's latency limit.
    fn shape_limit(&self, _max_p99_ms: Option<f64>) -> Option<String> {
        None
    }
    /// What the server failed at, beyond the error rate and latency: users that failed. These are
    /// the server's answers, judged at any machine load.
    fn shortfalls(&self) -> Vec<String>;
    /// A fixed-rate run whose schedule fell behind: more than 1% of its sends never went out.
    /// Whose lateness it was (the server's or bolide's) is the reader's to decide.
    fn behind_schedule(&self) -> Option<Behind> {
        None
    }
    /// One per-second series, `(t, value)`; empty when the workload has none of the kind.
    fn over_time(&self, _what: OverTime) -> Vec<(f64, f64)> {
        Vec::new()
    }
}

/// A fixed-rate run's sends that never went out, and what its connections could have carried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Behind {
    pub missed: u64,
    pub scheduled: u64,
    /// The rate asked for, per second.
    pub rate_per_s: Option<f64>,
    /// What the connections carry at the run's mean latency (Little's law: connections / mean
    /// latency), per second.
    pub ceiling_per_s: f64,
}

/// `n` over `duration_s` seconds, per second; Err for a run of no length.
pub fn per_second(n: u64, duration_s: f64) -> Result<f64, Problem> {
    if duration_s > 0.0 {
        Ok(n as f64 / duration_s)
    } else {
        Err("the run lasted no time".into())
    }
}

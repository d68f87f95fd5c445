//! The levels of `bolide run ddp-calls --users 1,10,50` and `run ddp-connect --burst 1,10,100` as
//! their document keeps them (`--json`) and the Meteor team's table shows them: written by
//! `load::levels`, drawn again from the document by `report`.

use serde::{Deserialize, Serialize};

use crate::report::table::{meteor_bytes, meteor_cpu, ms, Table};

/// Value of the `format` field of a levels document.
pub const FORMAT: &str = "bolide.levels";

/// One level's figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Level {
    /// Users (ddp-calls) or sessions per burst (ddp-connect).
    pub level: u64,
    /// The step measured: `call METHOD` or `connect`.
    pub step: String,
    /// Its successes per second of the run.
    pub per_s: f64,
    pub ok: u64,
    pub errors: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_9_ms: Option<f64>,
    /// The watched server's average CPU, percent of one core.
    pub cpu_pct: Option<f64>,
    /// The watched server's resident memory: mean and peak over the samples, bytes.
    pub rss_mean_bytes: Option<f64>,
    pub rss_max_bytes: Option<u64>,
    /// Samples of the server's memory behind those figures (every --monitor-interval).
    pub rss_samples: usize,
    /// The level's result document, when written (--out DIR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Why the level's figures may measure the machine rather than the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
}

/// The levels document (`--json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelsDoc {
    pub format: String,
    pub version: u32,
    pub scenario: String,
    /// `users` or `burst`.
    pub by: String,
    pub command_line: Vec<String>,
    pub interrupted: bool,
    pub levels: Vec<Level>,
}

/// The team's table: one row per level.
pub fn table(scenario: &str, levels: &[Level]) -> Table {
    let (who, what) = if scenario == "ddp-connect" { ("Burst", "Connects/s") } else { ("Clients", "Calls/s") };
    let mut t = Table::new(&[who, what, "p50", "p99", "p99.9", "Errors", "Server CPU", "Server RSS (mean / peak)"])
        .right(&[0, 1, 2, 3, 4, 5, 6]);
    let o = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "n/a".into());
    for l in levels {
        let rss = match (l.rss_mean_bytes, l.rss_max_bytes) {
            (Some(a), Some(b)) => format!("{} / {}", meteor_bytes(a), meteor_bytes(b as f64)),
            _ => "n/a".into(),
        };
        let mark = if l.suspect.is_some() { " (suspect)" } else { "" };
        t.row(vec![
            format!("{}{mark}", crate::report::term::count(l.level)),
            crate::report::term::grouped(l.per_s, 1),
            o(l.p50_ms),
            o(l.p99_ms),
            o(l.p99_9_ms),
            crate::report::term::count(l.errors),
            l.cpu_pct.map(meteor_cpu).unwrap_or_else(|| "n/a".into()),
            rss,
        ]);
    }
    t
}

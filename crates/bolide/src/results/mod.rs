//! The commands that read result documents, never the engine: `compare` (series against a
//! baseline, with statistics in `stats` and the `--fail-on` gate in `gate`), `report` (saved runs
//! as HTML, Markdown or SVG) and `merge` (segments' documents as one run). Here: a run as the
//! Meteor reports' tables show it (`RunEntry`), those tables, and the bench summary's format.
//! Running and reading are joined only by the documents: nothing here calls `load` or the engine.

pub mod compare;
pub mod gate;
pub mod ladder;
pub mod levels;
pub mod merge;
pub mod paired;
pub mod parameters;
pub mod report;
pub mod stats;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::table::{meteor_bytes, meteor_cpu, meteor_time, ms, Table};
use crate::report::term::grouped;
use crate::stats::doc::{Doc, Measures};

/// Value of the `format` field of a bench summary.
pub const SUMMARY_FORMAT: &str = "bolide.bench";

/// The summary `bench` writes beside the runs' result documents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchSummary {
    pub format: String,
    pub version: u32,
    pub label: String,
    pub workload: String,
    pub command_line: Vec<String>,
    pub runs_planned: u32,
    /// True when Ctrl-C ended the series early.
    pub interrupted: bool,
    pub runs: Vec<RunEntry>,
    /// Means over the runs (absent when none finished).
    pub mean: Option<RunEntry>,
}

/// One run in a bench summary (or the means, with `run` 0 and no file).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunEntry {
    pub run: u32,
    pub file: Option<String>,
    pub time_s: f64,
    /// HTTP runs: responses per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_s: Option<f64>,
    pub cpu_pct: Option<f64>,
    pub ram_bytes: Option<f64>,
    pub errors: f64,
    pub error_rate_pct: f64,
    pub p99_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub suspect: Option<String>,
    /// A bolide load thread was saturated (the suspect mark's first reason): the run's speed
    /// figures bound the server's rather than measure them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
    pub interrupted: bool,
    /// The run's thresholds and verdicts (absent when none was set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::threshold::ThresholdResult>,
    /// The server's event-loop delay p99 (ms) and GC time (ms in all), when `--probe` or `--scrape`
    /// read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eventloop_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_ms: Option<f64>,
    /// bolide's own CPU per request (HTTP) or DDP message, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bolide_cpu_us: Option<f64>,
    /// ddp-calls and ddp-connect: calls (or connects) done per second, and which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Runs with browser users: their pages' timings and what a browser user cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<crate::stats::doc::PageFigures>,
    /// A protocol's own latencies at p50 and p99, ms, by `NAME.p50`/`NAME.p99` (`llm.ttft.p99`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures_ms: BTreeMap<String, f64>,
    /// A protocol's throughput counts per second, by `NAME_per_s` (`llm.output_tokens_per_s`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub events_per_s: BTreeMap<String, f64>,
    /// What one user receives a second, as the protocol declared it: the key in `measures_ms`
    /// whose inverse it is (`llm.tpot.p50`), and its name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_user: BTreeMap<String, String>,
}

impl RunEntry {
    pub fn of(run: u32, file: Option<String>, m: &Measures) -> RunEntry {
        RunEntry {
            run,
            file,
            time_s: m.time_s,
            requests_per_s: m.requests_per_s,
            cpu_pct: m.cpu_pct,
            ram_bytes: m.ram_bytes,
            errors: m.errors as f64,
            error_rate_pct: m.error_rate_pct,
            p99_ms: m.p99_ms,
            mean_ms: m.mean_ms,
            suspect: m.suspect.clone(),
            saturated: m.saturated,
            interrupted: m.interrupted,
            thresholds: Vec::new(),
            eventloop_p99_ms: m.eventloop_p99_ms,
            gc_ms: m.gc_ms,
            bolide_cpu_us: m.bolide_cpu_us,
            per_s: m.rate.as_ref().map(|r| r.1),
            unit: m.rate.as_ref().map(|r| r.0.clone()),
            browser: m.browser.clone(),
            measures_ms: m.measures_ms.clone(),
            events_per_s: m.events_per_s.clone(),
            per_user: m.per_user.clone(),
        }
    }

    /// The run's figures as the tables and charts read them, back from a summary that kept them
    /// (what a summary does not keep, such as the error count's exact type, as near as it has).
    pub fn measures(&self) -> Measures {
        Measures {
            time_s: self.time_s,
            speed_s: match self.requests_per_s {
                Some(r) if r > 0.0 => 1.0 / r,
                _ => self.time_s,
            },
            requests_per_s: self.requests_per_s,
            cpu_pct: self.cpu_pct,
            ram_bytes: self.ram_bytes,
            errors: self.errors.max(0.0).round() as u64,
            error_rate_pct: self.error_rate_pct,
            mean_ms: self.mean_ms,
            p99_ms: self.p99_ms,
            suspect: self.suspect.clone(),
            saturated: self.saturated,
            interrupted: self.interrupted,
            eventloop_p99_ms: self.eventloop_p99_ms,
            gc_ms: self.gc_ms,
            bolide_cpu_us: self.bolide_cpu_us,
            rate: self.unit.clone().zip(self.per_s),
            browser: self.browser.clone(),
            measures_ms: self.measures_ms.clone(),
            events_per_s: self.events_per_s.clone(),
            per_user: self.per_user.clone(),
        }
    }

    /// The means of `runs` (None when empty).
    pub fn mean_of(runs: &[RunEntry]) -> Option<RunEntry> {
        if runs.is_empty() {
            return None;
        }
        let avg = |f: &dyn Fn(&RunEntry) -> f64| stats::mean(&runs.iter().map(f).collect::<Vec<_>>());
        let opt = |f: &dyn Fn(&RunEntry) -> Option<f64>| {
            let v: Vec<f64> = runs.iter().filter_map(f).collect();
            (v.len() == runs.len()).then(|| stats::mean(&v))
        };
        Some(RunEntry {
            run: 0,
            file: None,
            time_s: avg(&|r| r.time_s),
            requests_per_s: opt(&|r| r.requests_per_s),
            cpu_pct: opt(&|r| r.cpu_pct),
            ram_bytes: opt(&|r| r.ram_bytes),
            errors: avg(&|r| r.errors),
            error_rate_pct: avg(&|r| r.error_rate_pct),
            p99_ms: opt(&|r| r.p99_ms),
            mean_ms: opt(&|r| r.mean_ms),
            suspect: None,
            saturated: false,
            interrupted: runs.iter().any(|r| r.interrupted),
            thresholds: Vec::new(),
            eventloop_p99_ms: opt(&|r| r.eventloop_p99_ms),
            gc_ms: opt(&|r| r.gc_ms),
            bolide_cpu_us: opt(&|r| r.bolide_cpu_us),
            per_s: opt(&|r| r.per_s),
            unit: runs[0].unit.clone(),
            browser: {
                let of = |f: fn(&crate::stats::doc::PageFigures) -> Option<f64>| {
                    let v: Vec<f64> = runs.iter().filter_map(|r| r.browser.as_ref().and_then(f)).collect();
                    (v.len() == runs.len()).then(|| stats::mean(&v))
                };
                runs[0].browser.as_ref().map(|_| crate::stats::doc::PageFigures {
                    lcp_p75_ms: of(|b| b.lcp_p75_ms),
                    inp_p75_ms: of(|b| b.inp_p75_ms),
                    cpu_pct_per_user: of(|b| b.cpu_pct_per_user),
                })
            },
            measures_ms: mean_by_name(runs, |r| &r.measures_ms),
            events_per_s: mean_by_name(runs, |r| &r.events_per_s),
            per_user: runs.iter().flat_map(|r| r.per_user.clone()).collect(),
        })
    }
}

/// The mean of each named figure over `runs`, for the names every run has.
fn mean_by_name(runs: &[RunEntry], of: fn(&RunEntry) -> &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let first = runs.first().map(of).cloned().unwrap_or_default();
    first
        .into_keys()
        .filter_map(|k| {
            let v: Vec<f64> = runs.iter().filter_map(|r| of(r).get(&k).copied()).collect();
            (v.len() == runs.len()).then(|| (k, stats::mean(&v)))
        })
        .collect()
}

/// The Meteor reports' table, `# Run | Time | CPU | RAM`, with errors, p99 and mean latency per
/// run, and a Mean row. `compare` adds a last column (`extra`, one cell per row, Mean included).
pub fn runs_table(runs: &[RunEntry], mean: Option<&RunEntry>, extra: Option<(&str, Vec<String>)>) -> Table {
    // HTTP runs are about throughput: a Requests/s column after Time.
    let http = runs.iter().any(|r| r.requests_per_s.is_some());
    let mut header = vec!["# Run", "Time"];
    if http {
        header.push("Requests/s");
    }
    // The transport built-ins: their calls (or connects) per second.
    let rate = runs.iter().find_map(|r| r.unit.as_deref()).map(|u| format!("{}{}/s", u[..1].to_uppercase(), &u[1..]));
    if let Some(r) = &rate {
        header.push(r);
    }
    header.extend(["CPU", "RAM", "Errors", "p99", "Mean latency"]);
    // The server's internals, when a probe or a scrape read them.
    let eventloop = runs.iter().any(|r| r.eventloop_p99_ms.is_some());
    let gc = runs.iter().any(|r| r.gc_ms.is_some());
    if eventloop {
        header.push("Event loop p99");
    }
    if gc {
        header.push("GC");
    }
    // bolide's own CPU per unit of work: whether the generator was the limit, checkable.
    let bolide_cpu = runs.iter().any(|r| r.bolide_cpu_us.is_some());
    if bolide_cpu {
        header.push(if http { "bolide µs/req" } else { "bolide µs/msg" });
    }
    if let Some((title, _)) = &extra {
        header.push(title);
    }
    let mut t = Table::new(&header).right(&if http || rate.is_some() { vec![2, 5] } else { vec![4] });
    let na = || "n/a".to_string();
    let cells = |name: String, r: &RunEntry| {
        let errors = if r.errors.fract() == 0.0 { grouped(r.errors, 0) } else { grouped(r.errors, 1) };
        let mut row = vec![name, meteor_time(r.time_s)];
        if http {
            row.push(r.requests_per_s.map(|v| grouped(v, 1)).unwrap_or_else(na));
        }
        if rate.is_some() {
            row.push(r.per_s.map(|v| grouped(v, 1)).unwrap_or_else(na));
        }
        row.extend([
            r.cpu_pct.map(meteor_cpu).unwrap_or_else(na),
            r.ram_bytes.map(meteor_bytes).unwrap_or_else(na),
            errors,
            r.p99_ms.map(ms).unwrap_or_else(na),
            r.mean_ms.map(ms).unwrap_or_else(na),
        ]);
        if eventloop {
            row.push(r.eventloop_p99_ms.map(ms).unwrap_or_else(na));
        }
        if gc {
            row.push(r.gc_ms.map(ms).unwrap_or_else(na));
        }
        if bolide_cpu {
            row.push(r.bolide_cpu_us.map(|v| grouped(v, 2)).unwrap_or_else(na));
        }
        row
    };
    let mut extra_cells = extra.map(|(_, c)| c.into_iter());
    for r in runs {
        let mut name = r.run.to_string();
        if r.suspect.is_some() {
            name.push_str(" (suspect)");
        }
        if r.interrupted {
            name.push_str(" (interrupted)");
        }
        let mut row = cells(name, r);
        if let Some(e) = extra_cells.as_mut() {
            row.push(e.next().unwrap_or_default());
        }
        t.row(row);
        if r.suspect.is_some() || r.interrupted {
            t.tone_last_row(crate::report::table::Tone::Warn);
        }
    }
    if let (Some(m), true) = (mean, runs.len() > 1) {
        let mut row = cells("Mean".into(), m);
        if let Some(e) = extra_cells.as_mut() {
            row.push(e.next().unwrap_or_default());
        }
        t.row(row);
    }
    t
}

/// Notes under a runs table, one per line: what CPU and RAM are, and which runs are suspect and
/// why (naming the series when there are several).
pub fn table_notes(runs: &[RunEntry], watched: &str, series: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if runs.iter().all(|r| r.cpu_pct.is_none()) {
        out.push("CPU and RAM: n/a (no server watched; use --spawn or --monitor NAME=:PORT).".to_string());
    } else {
        out.push(format!("CPU: average over the run, percent of one core; RAM: average resident memory ({watched})."));
    }
    for r in runs.iter().filter(|r| r.suspect.is_some()) {
        let who = match series {
            Some(name) => format!("{name} run {}", r.run),
            None => format!("Run {}", r.run),
        };
        out.push(format!("{who} is suspect: {}.", r.suspect.as_deref().unwrap_or_default()));
    }
    out
}

/// The names of the watched processes of a document, for table notes.
pub fn watched_names(doc: &Doc) -> String {
    let names: Vec<&str> = doc.monitor().iter().map(|m| m.name.as_str()).collect();
    match names.len() {
        0 => "nothing watched".into(),
        1 => format!("{} and its descendants", names[0]),
        _ => format!("sum of {}", names.join(", ")),
    }
}

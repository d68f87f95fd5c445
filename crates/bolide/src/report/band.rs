//! The figures a page opens with (its summary band) and a run's tables, built from result
//! documents only: what was tested, the handful of figures people quote, whether it passed and
//! whether the result can be trusted.

use serde::Serialize;

use super::blocks::Block;
use super::table::{meteor_bytes, meteor_cpu, Table, Tone};
use super::term::{count, us};
use crate::stats::doc::Doc;

/// One figure of a summary band: what it is, its value, a line under it, its tone.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Fact {
    pub label: String,
    pub value: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    #[serde(skip_serializing_if = "Tone::is_plain")]
    pub tone: Tone,
}

impl Fact {
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Fact {
        Fact { label: label.into(), value: value.into(), detail: String::new(), tone: Tone::Plain }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Fact {
        self.detail = detail.into();
        self
    }

    pub fn tone(mut self, tone: Tone) -> Fact {
        self.tone = tone;
        self
    }
}

/// What a run tested, in one line: the first line of its summary ("bolide run tasks-reactive ->
/// http://127.0.0.1:3000 (websocket, ...)").
pub fn what(doc: &Doc) -> String {
    super::summary(doc).lines().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_string()
}

/// A latency in microseconds as people read it.
pub(super) fn lat(v: u64) -> String {
    us(v as f64)
}

/// The run's figures, in the order people quote them: throughput or users, p50 and p99, errors,
/// the server's CPU and RAM, thresholds, and whether the run can be trusted.
pub fn run_facts(doc: &Doc) -> Vec<Fact> {
    let m = doc.measures();
    let mut out = Vec::new();
    super::shown(doc).facts(&m, &mut out);
    out.push(errors_fact(doc, &m));
    out.extend(server_facts(doc));
    out.extend(threshold_fact(doc));
    out.push(trust_fact(doc));
    out
}

/// A live run's figures (the dashboard's band): its last whole second (throughput or users
/// alive, p50 and p99, errors) and the watched server's last sample.
pub fn live_facts(doc: &Doc) -> Vec<Fact> {
    let mut out = Vec::new();
    super::shown(doc).live_facts(&mut out);
    for m in doc.monitor() {
        if let Some(&(_, cpu, rss)) = m.samples.last() {
            out.push(
                Fact::new(format!("{} CPU", m.name), meteor_cpu(cpu))
                    .detail(format!("RSS {}", meteor_bytes(rss as f64))),
            );
        }
    }
    out
}

/// The failures' fact, one for every kind of run: none (good), or how many units of work failed
/// (requests, steps: the error rate's own count) with the one error rate and what they were (bad).
fn errors_fact(doc: &Doc, m: &crate::stats::doc::Measures) -> Fact {
    let label = super::shown(doc).errors_label();
    match doc.view().ended_and_failed().1 {
        0 => Fact::new(label, "none").tone(Tone::Good),
        n => Fact::new(label, format!("{} ({:.2}%)", count(n), m.error_rate_pct))
            .detail(error_detail(doc))
            .tone(Tone::Bad),
    }
}

/// What failed, most telling first, at most three: "status 500: 200, timeout: 3".
fn error_detail(doc: &Doc) -> String {
    doc.failures().iter().take(3).map(|(what, n)| format!("{what}: {}", count(*n))).collect::<Vec<_>>().join(", ")
}

/// The median over every step of a DDP run (None when no step was timed).
pub(super) fn all_steps_p50(d: &crate::stats::vu::VuDoc) -> Option<u64> {
    crate::stats::doc::all_steps(d).map(|h| h.value_at_quantile(0.5))
}

/// The watched server's CPU and RAM (sums over the processes, as the Meteor reports give them).
fn server_facts(doc: &Doc) -> Vec<Fact> {
    let m = doc.measures();
    let mut out = process_facts(doc, &m);
    // The server's insides when bolide-probe, prom-client or the Monti agent told them: its
    // event loop's delay (what users wait behind) and its GC time, beside its CPU and RAM.
    if let Some(p99) = m.eventloop_p99_ms {
        let gc = m.gc_ms.map(|g| format!("GC {g:.0} ms over the run")).unwrap_or_else(|| "no GC figure".into());
        let loop_fact = Fact::new("Event loop p99", format!("{p99:.1} ms")).detail(gc);
        out.push(if p99 >= 50.0 { loop_fact.tone(Tone::Warn) } else { loop_fact });
    } else if let Some(gc) = m.gc_ms {
        out.push(Fact::new("Server GC", format!("{gc:.0} ms")).detail("over the run"));
    }
    out
}

/// The watched server's CPU and RAM (sums over the processes).
fn process_facts(doc: &Doc, m: &crate::stats::doc::Measures) -> Vec<Fact> {
    let sampled: Vec<&crate::monitor::MonitorResult> = doc.monitor().iter().filter(|m| !m.samples.is_empty()).collect();
    let (Some(cpu), Some(ram)) = (m.cpu_pct, m.ram_bytes) else {
        return vec![Fact::new("Server CPU / RAM", "not watched").detail("--spawn or --monitor NAME=:PORT")];
    };
    let who = match sampled.len() {
        1 => sampled[0].name.clone(),
        n => format!("sum of {n} processes"),
    };
    let peak_cpu: f64 = sampled.iter().map(|m| m.peak_cpu_pct).sum();
    let peak_ram: u64 = sampled.iter().map(|m| m.peak_rss_bytes).sum();
    // Which part of the run the figures cover, where the process did not live through it.
    let mut part = String::new();
    for m in &sampled {
        for (t, pid) in &m.followed {
            part.push_str(&format!("; {} restarted at {t:.1} s (pid {pid}), followed", m.name));
        }
        if let Some(t) = m.vanished_s {
            part.push_str(&format!("; {} gone after {t:.1} s: the figures cover its first {t:.1} s", m.name));
        }
    }
    vec![
        Fact::new("Server CPU", meteor_cpu(cpu)).detail(format!("{who}; peak {}{part}", meteor_cpu(peak_cpu))),
        Fact::new("Server RAM", meteor_bytes(ram)).detail(format!("peak {}", meteor_bytes(peak_ram as f64))),
    ]
}

/// Thresholds passed and broken (none when the run set none).
fn threshold_fact(doc: &Doc) -> Option<Fact> {
    let t = doc.thresholds();
    if t.is_empty() {
        return None;
    }
    let broken: Vec<&str> = t.iter().filter(|t| !t.ok).map(|t| t.threshold.as_str()).collect();
    Some(if broken.is_empty() {
        Fact::new("Thresholds", format!("{} of {} passed", t.len(), t.len())).tone(Tone::Good)
    } else {
        Fact::new("Thresholds", format!("{} of {} broken", broken.len(), t.len()))
            .detail(broken.join(", "))
            .tone(Tone::Bad)
    })
}

/// Whether the figures measure the server: interrupted, suspect (bolide or the machine was the
/// limit), or clean.
pub fn trust_fact(doc: &Doc) -> Fact {
    let m = doc.measures();
    match (&m.suspect, trust(&m)) {
        (Some(why), _) => Fact::new("Trust", "SUSPECT").detail(why.clone()).tone(Tone::Warn),
        (None, ("interrupted", _)) => {
            Fact::new("Trust", "interrupted").detail("stopped before its end").tone(Tone::Warn)
        }
        (None, _) => match doc.generator() {
            // A run too short for one sample of the machine: nothing was checked, and says so.
            Some(g) if g.samples.is_empty() => Fact::new("Trust", "unchecked")
                .detail("the run ended before bolide's first sample of itself and the machine"),
            Some(g) => Fact::new("Trust", "clean")
                .detail(format!("bolide {:.0}% CPU, machine {:.0}% idle", g.avg_cpu_pct, g.avg_machine_idle_pct))
                .tone(Tone::Good),
            None => Fact::new("Trust", "unchecked").detail("no self-check in the document"),
        },
    }
}

/// Whether a run's figures measure the server, in a word and a tone: suspect (bolide or the
/// machine was the limit), interrupted, or clean.
pub fn trust(m: &crate::stats::doc::Measures) -> (&'static str, Tone) {
    match (&m.suspect, m.interrupted) {
        (Some(_), _) => ("suspect", Tone::Warn),
        (None, true) => ("interrupted", Tone::Warn),
        (None, false) => ("clean", Tone::Good),
    }
}

/// A run's tables: per step (DDP) or latency and outcomes (HTTP), the watched processes, the
/// thresholds.
pub fn run_blocks(doc: &Doc) -> Vec<Block> {
    let mut out = Vec::new();
    super::shown(doc).blocks(&mut out);
    let sampled: Vec<&crate::monitor::MonitorResult> = doc.monitor().iter().collect();
    if !sampled.is_empty() {
        let mut t = Table::new(&["Server", "CPU avg", "CPU peak", "RAM avg", "RAM peak"]).right(&[1, 2, 3, 4]);
        for m in sampled {
            if m.samples.is_empty() {
                t.row(vec![m.name.clone(), "n/a".into(), "n/a".into(), "n/a".into(), "n/a".into()]);
                t.tone_last_row(Tone::Warn);
            } else {
                t.row(vec![
                    m.name.clone(),
                    meteor_cpu(m.avg_cpu_pct),
                    meteor_cpu(m.peak_cpu_pct),
                    meteor_bytes(m.avg_rss_bytes),
                    meteor_bytes(m.peak_rss_bytes as f64),
                ]);
            }
        }
        out.push(Block::table(t));
    }
    let th = doc.thresholds();
    if !th.is_empty() {
        let mut t = Table::new(&["Threshold", "Measured", "Bound", "Result"]).right(&[1, 2]);
        for r in th {
            let value = r.value.map(|v| format!("{v:.2} {}", r.unit)).unwrap_or_else(|| "n/a".into());
            t.row(vec![
                r.threshold.clone(),
                value.trim().to_string(),
                format!("{:.2} {}", r.bound, r.unit).trim().to_string(),
                if r.ok { "passed".into() } else { "BROKEN".into() },
            ]);
            t.tone(t.rows.len() - 1, 3, if r.ok { Tone::Good } else { Tone::Bad });
        }
        out.push(Block::table(t));
    }
    out
}

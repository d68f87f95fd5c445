//! A capacity ladder as documents keep it and reports show it: each level's verdict
//! ([`Verdict`]), the summary `capacity --json` writes (and `--out DIR` keeps beside the levels'
//! documents), and the ladder's table, figures, notes and charts, drawn alike by `capacity` from
//! its levels and by `report` from a summary read back.

use crate::problem::Problem;
use crate::report::html::Section;
use crate::report::table::{meteor_bytes, meteor_cpu, meteor_time, Table, Tone};
use crate::stats::doc::{Doc, Measures};

/// How a level went.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    /// The server failed the criteria, for these reasons.
    Fail(Vec<String>),
    /// bolide itself, the machine, or the load's own shape was the limit: no verdict on the
    /// server. The text says which and what to change.
    NotTheServer(String),
    /// Nothing was measured at this level (no response, no user): no verdict either way.
    Unmeasured(String),
    /// Ctrl-C stopped it.
    Interrupted,
}

/// One level as the ladder shows it: the level, what it measured (absent when it did not run),
/// its verdict.
pub type Rung = (f64, Option<Measures>, Verdict);

/// Value of the `format` field of a capacity summary.
pub const SUMMARY_FORMAT: &str = "bolide.capacity";

/// The ladder as `--json` writes it: every level tried, its verdict and measures, and the
/// conclusion.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct CapacitySummary {
    pub format: String,
    pub version: u32,
    pub workload: String,
    /// `Requests` (HTTP rates) or `Connections` (user arrival rates).
    pub kind: String,
    /// `per second` or `per minute`.
    pub unit: String,
    pub command_line: Vec<String>,
    pub levels: Vec<LevelEntry>,
    /// The highest level that passed (absent when none did).
    pub highest_passing: Option<f64>,
    /// In words, as the terminal shows it.
    pub conclusion: String,
    pub interrupted: bool,
}

/// One level of the ladder.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct LevelEntry {
    pub level: f64,
    /// `pass`, `fail`, `no verdict` (the limit was not the server, or nothing was measured) or
    /// `interrupted`.
    pub verdict: String,
    /// Why it failed, or why there is no verdict.
    pub why: Vec<String>,
    /// The level's measures (absent when it did not run).
    pub measures: Option<super::RunEntry>,
    /// A `no verdict` because nothing was measured at the level (else the limit was bolide, the
    /// machine or the load's shape).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nothing_measured: bool,
}

impl LevelEntry {
    /// A level as the summary keeps it: its verdict in a word, why, its measures.
    pub fn of(level: f64, doc: Option<&Doc>, v: &Verdict) -> LevelEntry {
        let (verdict, why) = match v {
            Verdict::Pass => ("pass", vec![]),
            Verdict::Fail(why) => ("fail", why.clone()),
            Verdict::NotTheServer(why) | Verdict::Unmeasured(why) => ("no verdict", vec![why.clone()]),
            Verdict::Interrupted => ("interrupted", vec![]),
        };
        let measures = doc.map(|d| {
            let mut e = super::RunEntry::of(1, None, &d.measures());
            e.thresholds = d.thresholds().to_vec();
            e
        });
        let nothing_measured = matches!(v, Verdict::Unmeasured(_));
        LevelEntry { level, verdict: verdict.into(), why, measures, nothing_measured }
    }

    /// The level read back from a summary: its rung of the ladder, or why it cannot be one.
    pub fn rung(&self) -> Result<Rung, Problem> {
        let why = || self.why.join("; ");
        let verdict = match self.verdict.as_str() {
            "pass" => Verdict::Pass,
            "fail" => Verdict::Fail(self.why.clone()),
            "no verdict" if self.nothing_measured => Verdict::Unmeasured(why()),
            "no verdict" => Verdict::NotTheServer(why()),
            "interrupted" => Verdict::Interrupted,
            other => return Err(format!("level {}: unknown verdict {other:?}", self.level).into()),
        };
        Ok((self.level, self.measures.as_ref().map(super::RunEntry::measures), verdict))
    }
}

impl CapacitySummary {
    /// The summary's levels as rungs of the ladder.
    pub fn rungs(&self) -> Result<Vec<Rung>, Problem> {
        self.levels.iter().map(LevelEntry::rung).collect()
    }

    /// The ladder's section of a report, from the summary alone.
    pub fn section(&self) -> Result<Section, Problem> {
        let rungs = self.rungs()?;
        Ok(section(&rungs, &self.kind, &self.unit, self.conclusion.clone(), suspect_notes(&rungs, &self.unit)))
    }
}

/// The ladder's section of a report: its table, `note` (the verdict in words), its charts.
pub fn section(rows: &[Rung], kind: &str, unit: &str, note: String, more: String) -> Section {
    use crate::report::charts::Level;
    let outcome = |v: &Verdict| match v {
        Verdict::Pass => Level::Passed,
        Verdict::Fail(_) => Level::Failed,
        Verdict::NotTheServer(_) | Verdict::Unmeasured(_) | Verdict::Interrupted => Level::NoVerdict,
    };
    let measured: Vec<(f64, crate::stats::doc::Measures, Level)> = rows
        .iter()
        .filter_map(|(level, m, verdict)| m.as_ref().map(|m| (*level, m.clone(), outcome(verdict))))
        .collect();
    let mut blocks = vec![crate::report::blocks::Block::table(table(kind, rows))];
    if !more.is_empty() {
        blocks.push(crate::report::blocks::Block::Lines { lines: more.lines().map(str::to_string).collect() });
    }
    Section {
        kind: "capacity",
        title: "Capacity ladder".into(),
        notes: vec![note],
        band: knee_facts(rows, unit),
        blocks,
        text: String::new(),
        charts: crate::report::charts::ladder(&measured, &format!("level ({unit})")),
        folded: false,
    }
}

/// The ladder's answer first: the highest level that held, the level where it broke and why,
/// and what the limit was (the server, or bolide and the machine: then no verdict on the server).
pub fn knee_facts(rows: &[Rung], unit: &str) -> Vec<crate::report::band::Fact> {
    use crate::report::band::Fact;
    let level = |l: f64| if l.fract() == 0.0 { format!("{l:.0} {unit}") } else { format!("{l} {unit}") };
    let held = rows.iter().filter(|r| r.2 == Verdict::Pass).map(|r| r.0).reduce(f64::max);
    // No level held: because the first failed, or because it has no verdict on the server (the
    // machine or bolide was the limit, nothing measured, a stop): said as it was.
    let first = rows.first().map(|r| &r.2);
    let mut out = vec![match (held, first) {
        (Some(l), _) => Fact::new("Held up to", level(l)).tone(Tone::Good),
        (None, Some(Verdict::Fail(_))) => {
            Fact::new("Held up to", "no level").detail("the first level already failed").tone(Tone::Bad)
        }
        (None, Some(_)) => Fact::new("Held up to", "no verdict")
            .detail("the first level has no verdict on the server")
            .tone(Tone::Warn),
        (None, None) => Fact::new("Held up to", "no level").detail("no level ran").tone(Tone::Warn),
    }];
    let last = rows.last();
    out.push(match last {
        Some((l, _, Verdict::Fail(why))) => Fact::new("Broke at", level(*l)).detail(why.join("; ")).tone(Tone::Bad),
        Some((l, _, Verdict::NotTheServer(why))) => {
            Fact::new("Stopped at", level(*l)).detail(format!("no verdict: {why}")).tone(Tone::Warn)
        }
        Some((l, _, Verdict::Unmeasured(why))) => {
            Fact::new("Stopped at", level(*l)).detail(format!("nothing measured: {why}")).tone(Tone::Warn)
        }
        Some((l, _, Verdict::Interrupted)) => Fact::new("Stopped at", level(*l)).detail("interrupted").tone(Tone::Warn),
        Some((_, _, Verdict::Pass)) => Fact::new("Broke at", "not reached").detail("every level passed: raise --to"),
        None => Fact::new("Broke at", "no level ran"),
    });
    let limit = match last.map(|r| &r.2) {
        Some(Verdict::Fail(_)) => {
            Fact::new("Limit", "the server").detail("its criteria broke, bolide and the machine had room")
        }
        Some(Verdict::NotTheServer(why)) => {
            let which = if why.contains("machine") { "the machine" } else { "the generator" };
            Fact::new("Limit", which).detail("the server's limit is at or above this level").tone(Tone::Warn)
        }
        _ => Fact::new("Limit", "not found").detail("no level failed on the server"),
    };
    out.push(limit);
    let suspect = rows.iter().filter(|r| r.1.as_ref().is_some_and(|m| m.suspect.is_some())).count();
    out.push(if suspect == 0 {
        Fact::new("Trust", "clean").detail(format!("{} levels, none suspect", rows.len())).tone(Tone::Good)
    } else {
        Fact::new("Trust", format!("{suspect} suspect"))
            .detail(format!("of {} levels: see the notes", rows.len()))
            .tone(Tone::Warn)
    });
    out
}

/// The reports' ladder table.
pub fn table(kind: &str, rows: &[Rung]) -> Table {
    // The level's unit: HTTP levels are rates (requests per second); the Meteor reports' "#
    // Connections" counts arrivals at the level's rate.
    let head = match kind {
        "Requests" => "Requests/s".to_string(),
        k => format!("# {k}"),
    };
    // A protocol's throughput at each level (`llm.output_tokens/s`), and what one of its users
    // gets a second (an LLM user's tokens after its first: 1 / TPOT), where the levels measured
    // them.
    let mut rates: Vec<&str> =
        rows.iter().flat_map(|r| r.1.iter().flat_map(|m| m.events_per_s.keys())).map(|k| k.as_str()).collect();
    rates.sort();
    rates.dedup();
    let mut per_user: Vec<(&str, &str)> = rows
        .iter()
        .flat_map(|r| r.1.iter().flat_map(|m| m.per_user.iter()))
        .filter(|(key, _)| rows.iter().any(|r| r.1.as_ref().is_some_and(|m| m.measures_ms.contains_key(*key))))
        .map(|(key, name)| (key.as_str(), name.as_str()))
        .collect();
    per_user.sort();
    per_user.dedup();
    let mut heads: Vec<String> = vec![head, "Time".into(), "CPU".into(), "RAM".into()];
    heads.extend(rates.iter().map(|k| format!("{}/s", k.trim_end_matches("_per_s"))));
    heads.extend(per_user.iter().map(|(_, name)| name.to_string()));
    heads.push("Result".into());
    let result_col = heads.len() - 1;
    let mut t = Table::new(&heads.iter().map(String::as_str).collect::<Vec<_>>());
    for (level, doc, verdict) in rows {
        let level = if level.fract() == 0.0 { crate::report::term::grouped(*level, 0) } else { format!("{level}") };
        let x = || "x".to_string();
        // A level without a verdict was measured all the same, and its charts plot it: its
        // figures are shown (the Result says there is no verdict); a failed level is `x`, as the
        // Meteor reports mark it.
        let (time, cpu, ram) = match (verdict, doc) {
            (v, Some(m)) if !matches!(v, Verdict::Fail(_)) => {
                let na = || "n/a".to_string();
                (
                    meteor_time(m.time_s),
                    m.cpu_pct.map(meteor_cpu).unwrap_or_else(na),
                    m.ram_bytes.map(meteor_bytes).unwrap_or_else(na),
                )
            }
            _ => (x(), x(), x()),
        };
        let suspect = doc.as_ref().is_some_and(|m| m.suspect.is_some());
        let result = match verdict {
            Verdict::Pass if suspect => "ok (suspect: see below)".to_string(),
            Verdict::Pass => "ok".to_string(),
            Verdict::Fail(why) => format!("x ({})", why.join("; ")),
            Verdict::NotTheServer(_) => "no verdict (limit not the server: see below)".to_string(),
            Verdict::Unmeasured(why) => format!("no verdict ({why})"),
            Verdict::Interrupted => "interrupted".to_string(),
        };
        let mut row = vec![level, time, cpu, ram];
        let failed = matches!(verdict, Verdict::Fail(_));
        let figure = |v: Option<f64>| match (failed, v) {
            (true, _) => "x".to_string(),
            (false, Some(v)) => crate::report::term::grouped(v, 1),
            (false, None) => "n/a".to_string(),
        };
        for k in &rates {
            row.push(figure(doc.as_ref().and_then(|m| m.events_per_s.get(*k).copied())));
        }
        for (key, _) in &per_user {
            let per_unit = doc.as_ref().and_then(|m| m.measures_ms.get(*key).copied()).filter(|ms| *ms > 0.0);
            row.push(figure(per_unit.map(|ms| 1000.0 / ms)));
        }
        row.push(result);
        t.row(row);
        match verdict {
            Verdict::Pass if suspect => t.tone(t.rows.len() - 1, result_col, Tone::Warn),
            Verdict::Pass => t.tone(t.rows.len() - 1, result_col, Tone::Good),
            Verdict::Fail(_) => t.tone_last_row(Tone::Bad),
            _ => t.tone_last_row(Tone::Warn),
        }
    }
    t
}

/// The "(suspect: see below)" of the level lines, explained: one line per suspect level.
pub fn suspect_notes(rows: &[Rung], unit: &str) -> String {
    let mut out = String::new();
    for (level, doc, _) in rows {
        if let Some(why) = doc.as_ref().and_then(|m| m.suspect.as_ref()) {
            out.push_str(&format!("Level {level} {unit} is suspect: {why}.\n"));
        }
    }
    out
}

/// One sentence: the highest passing level, and what stopped the ladder.
pub fn conclusion(rows: &[Rung], levels: &[f64], unit: &str) -> String {
    let passed = rows
        .iter()
        .filter(|r| r.2 == Verdict::Pass)
        .map(|r| r.0)
        .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    let highest = match passed {
        Some(p) => format!("Highest passing level: {p} {unit}."),
        None => "No level passed.".to_string(),
    };
    let why = match rows.last().map(|r| &r.2) {
        Some(Verdict::Fail(_)) => {
            format!(" The server failed at {} {unit}.", rows.last().map(|r| r.0).unwrap_or_default())
        }
        Some(Verdict::NotTheServer(why)) => format!(
            " At {} {unit} the limit was not the server: {why}. The server's limit is at or above this level; no \
             verdict on it (exit code 4).",
            rows.last().map(|r| r.0).unwrap_or_default()
        ),
        Some(Verdict::Unmeasured(why)) => format!(
            " At {} {unit} nothing was measured ({why}); the ladder stopped without a verdict (exit code 4).",
            rows.last().map(|r| r.0).unwrap_or_default()
        ),
        Some(Verdict::Interrupted) => " Interrupted before the ladder ended.".to_string(),
        Some(Verdict::Pass) if rows.len() == levels.len() => {
            " Every level passed: the limit is above the last level; raise --to.".to_string()
        }
        _ => String::new(),
    };
    format!("{highest}{why}")
}

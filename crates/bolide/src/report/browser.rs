//! What browser users show (`engine: browser`): their page timings, the page's DDP methods beside
//! the protocol users' same methods, their page errors and what the browsers cost, in the
//! terminal summary and as the report's blocks.

use std::fmt::Write as _;

use super::blocks::Block;
use super::table::{Table, Tone};
use super::term::{bytes, count, us};
use crate::stats::browser::{is_time, BrowserSection, VitalRow, VITALS};

/// A timing's value as people read it: a time, or the CLS score.
pub fn value(metric: &str, v: f64) -> String {
    if is_time(metric) {
        us(v * 1000.0)
    } else {
        format!("{v:.3}")
    }
}

/// The metric's name as the web's tools write it.
pub fn label(metric: &str) -> String {
    metric.to_uppercase()
}

fn overall(b: &BrowserSection) -> impl Iterator<Item = &VitalRow> {
    VITALS.iter().filter_map(|m| b.vitals.iter().find(|v| v.metric == *m && v.step.is_none()))
}

/// The cost line: the browsers' CPU and memory, and per browser user.
fn cost(b: &BrowserSection) -> Option<String> {
    let c = b.cost.as_ref()?;
    Some(format!(
        "{:.0}% of a core on average ({:.0}% at peak), {} peak memory (PSS); per browser user {:.0} ms of CPU, {:.1}% of a core and {} while open ({} open at most)",
        c.avg_cpu_pct,
        c.peak_cpu_pct,
        bytes(c.peak_rss_bytes as f64),
        c.cpu_ms_per_user,
        c.cpu_pct_per_user,
        bytes(c.rss_bytes_per_user),
        match c.peak_pages {
            1 => "1 page".to_string(),
            n => format!("{} pages", count(n)),
        }
    ))
}

fn errors(b: &BrowserSection) -> String {
    let dialogs = match b.dialogs {
        0 => String::new(),
        1 => "; 1 dialog answered (OK)".to_string(),
        n => format!("; {} dialogs answered (OK)", count(n)),
    };
    format!(
        "{} console errors, {} failed requests, {} crashed pages or browsers{dialogs}",
        count(b.console_errors),
        count(b.failed_requests),
        count(b.crashes)
    )
}

/// The terminal summary's rows.
pub fn rows(b: &BrowserSection) -> String {
    let mut out = String::new();
    let version = b.version.as_deref().unwrap_or(&b.executable);
    let _ = writeln!(out, "\n  {:<14}{} browser users in {}", "Browsers", count(b.users), version);
    if let Some(c) = cost(b) {
        let _ = writeln!(out, "  {:<14}{c}", "");
    }
    let _ = writeln!(out, "  {:<14}{}", "", errors(b));
    let rows: Vec<&VitalRow> = overall(b).collect();
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "\n  {:<32}{:>9}{:>10}{:>10}{:>10}{:>10}",
            "Page timing", "count", "p50", "p75", "p95", "max"
        );
        for v in rows {
            let _ = writeln!(
                out,
                "  {:<32}{:>9}{:>10}{:>10}{:>10}{:>10}",
                label(&v.metric),
                count(v.count),
                value(&v.metric, v.p50),
                value(&v.metric, v.p75),
                value(&v.metric, v.p95),
                value(&v.metric, v.max)
            );
        }
    }
    if !b.methods.is_empty() {
        let _ = writeln!(
            out,
            "\n  {:<32}{:>9}{:>10}{:>10}{:>16}{:>10}",
            "In-page DDP method", "count", "p50", "p99", "protocol p50", "p99"
        );
        for m in &b.methods {
            let (pp50, pp99) = match &m.protocol {
                Some(p) => (us(p.p50_us as f64), us(p.p99_us as f64)),
                None => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                out,
                "  {:<32}{:>9}{:>10}{:>10}{:>16}{:>10}",
                m.name.chars().take(31).collect::<String>(),
                count(m.count),
                us(m.latency.p50_us as f64),
                us(m.latency.p99_us as f64),
                pp50,
                pp99
            );
        }
        out.push_str("  (the page's method to its result and updated, from its WebSocket frames; the protocol users' calls beside)\n");
    }
    out
}

/// The report's section.
pub fn blocks(b: &BrowserSection, out: &mut Vec<Block>) {
    out.push(Block::heading(3, "Browser users"));
    let version = b.version.as_deref().unwrap_or(&b.executable);
    let mut lines = vec![format!("{} browser users in {version}", count(b.users))];
    lines.extend(cost(b).map(|c| format!("The browsers: {c}")));
    lines.push(errors(b));
    out.push(Block::Lines { lines });
    let mut t =
        Table::new(&["Page timing", "Step", "Count", "p50", "p75", "p95", "p99", "max"]).right(&[2, 3, 4, 5, 6, 7]);
    for m in VITALS {
        // One step that navigated: its row is every navigation's too, shown once.
        let steps = b.vitals.iter().filter(|v| v.metric == m && v.step.is_some()).count();
        for v in b.vitals.iter().filter(|v| v.metric == m && !(steps == 1 && v.step.is_none())) {
            t.row(vec![
                label(&v.metric),
                match (&v.step, steps) {
                    (Some(step), 1) => format!("{step} (every navigation)"),
                    (Some(step), _) => step.clone(),
                    (None, _) => "every navigation".into(),
                },
                count(v.count),
                value(m, v.p50),
                value(m, v.p75),
                value(m, v.p95),
                value(m, v.p99),
                value(m, v.max),
            ]);
        }
    }
    if !t.rows.is_empty() {
        out.push(Block::table(t));
    }
    let mut t = Table::new(&["In-page DDP", "Count", "p50", "p90", "p99", "Protocol users p50", "p90", "p99"])
        .right(&[1, 2, 3, 4, 5, 6, 7]);
    for (kind, calls) in [("method", &b.methods), ("subscription", &b.subscriptions)] {
        for m in calls {
            let p = |f: fn(&crate::stats::result::Latency) -> u64| {
                m.protocol.as_ref().map_or_else(|| "-".to_string(), |p| us(f(p) as f64))
            };
            t.row(vec![
                format!("{kind} {}", m.name),
                count(m.count),
                us(m.latency.p50_us as f64),
                us(m.latency.p90_us as f64),
                us(m.latency.p99_us as f64),
                p(|l| l.p50_us),
                p(|l| l.p90_us),
                p(|l| l.p99_us),
            ]);
        }
    }
    if !t.rows.is_empty() {
        out.push(Block::table(t));
    }
    if b.console_errors + b.failed_requests + b.crashes > 0 {
        let mut t = Table::new(&["Page errors", "Count"]).right(&[1]);
        for (what, n) in [
            ("console errors", b.console_errors),
            ("failed requests", b.failed_requests),
            ("crashed pages or browsers", b.crashes),
        ] {
            t.row(vec![what.into(), count(n)]);
            if n > 0 {
                t.tone(t.rows.len() - 1, 1, Tone::Bad);
            }
        }
        out.push(Block::table(t));
    }
}

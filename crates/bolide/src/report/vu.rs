//! The virtual-user (DDP) workload's report part: what its runs show in the summary band, the live band,
//! the run's tables, the CSV seconds, and its terminal summary (the rows every summary shares are
//! `term.rs`'s).

use super::band::{all_steps_p50, lat, Fact};
use super::blocks::Block;
use super::table::{Table, Tone};
use super::term::{bytes, count, us};
use crate::stats::doc::Measures;
use crate::stats::result::Latency;
use crate::stats::vu::VuDoc;
use std::fmt::Write as _;

impl super::Shown for VuDoc {
    fn summary(&self) -> String {
        summary(self)
    }

    fn throughput(&self) -> String {
        format!("{} users", count(self.summary.users.completed))
    }

    fn errors_label(&self) -> &'static str {
        "Step errors"
    }

    fn charts(&self) -> Vec<super::charts::Chart> {
        super::charts::ddp_charts(self)
    }

    fn facts(&self, m: &Measures, out: &mut Vec<Fact>) {
        let d = self;
        let u = &d.summary.users;
        let users = Fact::new("Users", format!("{} of {} completed", count(u.completed), count(u.launched)))
            .detail(format!("{} failed; Time {:.1} s", count(u.failed), d.summary.total_time_s));
        out.push(if u.failed > 0 { users.tone(Tone::Bad) } else { users });
        match &d.browser {
            // A browser's steps are of every size (a waitFor of microseconds, a click of a
            // round trip): together they tell nothing. The page's own figures instead.
            Some(b) => browser_facts(d, b, out),
            None => {
                if let Some(p99) = m.p99_ms {
                    let p50 = all_steps_p50(d);
                    out.push(Fact::new("Step latency p50", p50.map(lat).unwrap_or_else(|| "n/a".into())));
                    out.push(Fact::new("Step latency p99", us(p99 * 1000.0)).detail("every step together"));
                }
            }
        }
        if let Some(r) = &d.summary.reactive {
            out.push(Fact::new("Reactive p99", lat(r.p99_us)).detail(format!("p50 {}", lat(r.p50_us))));
        }
        // A protocol's own latencies (llm.ttft, sse.first_event) at p99, and its throughputs
        // (the first declared, the others beside it): what its users quote first.
        for (name, l) in &d.summary.measures {
            let name = crate::redact::printable(name);
            out.push(Fact::new(format!("{name} p99"), lat(l.p99_us)).detail(format!("p50 {}", lat(l.p50_us))));
        }
        if let Some(((first, v), rest)) = rates(&d.summary).split_first() {
            let others: Vec<String> = rest.iter().map(|(name, v)| rate(name, *v)).collect();
            out.push(Fact::new("Throughput", rate(first, *v)).detail(others.join("; ")));
        }
        if let Some(a) = &d.audit {
            use crate::stats::audit::Outcome;
            let mut detail = format!(
                "{} difference(s); {} of {} checks agreed",
                count(a.differences),
                count(a.agreed),
                count(a.checks)
            );
            if a.violations > 0 {
                detail.push_str(&format!("; {} protocol violation(s)", count(a.violations)));
            }
            if a.unstable > 0 {
                detail.push_str(&format!("; {} with an unstable truth", count(a.unstable)));
            }
            let tone = if a.outcome == Outcome::Passed { Tone::Good } else { Tone::Bad };
            out.push(Fact::new("Audit", a.outcome.word().to_uppercase()).detail(detail).tone(tone));
        }
        for f in &d.faults {
            let value = if f.ok { format!("done at {:.1} s", f.at_s) } else { format!("NOT DONE at {:.1} s", f.at_s) };
            let back = f.back_s.map_or("no user reconnected".to_string(), |b| format!("users back in {b:.1} s"));
            let converged = match (f.converged_s, &d.audit) {
                (Some(c), _) => format!("; the audit agreed again in {c:.0} s"),
                (None, Some(_)) => "; no audit check agreed after it".into(),
                (None, None) => String::new(),
            };
            let detail = format!("{} reconnects; {back}{converged}", count(f.reconnects));
            let fact = Fact::new(format!("Fault {}", crate::redact::printable(&f.fault)), value).detail(detail);
            out.push(if f.ok { fact } else { fact.tone(Tone::Bad) });
        }
    }

    fn live_facts(&self, out: &mut Vec<Fact>) {
        let d = self;
        if let Some(s) = d.timeline.last() {
            out.push(Fact::new("Users alive", count(s.users_alive)).detail(format!("second {}", s.t + 1)));
            if let Some(l) = &s.latency {
                out.push(Fact::new("Step p50", lat(l.p50_us)));
                out.push(Fact::new("Step p99", lat(l.p99_us)));
            }
            let errors: u64 = d.timeline.iter().map(|s| s.counts.step_errors).sum();
            out.push(Fact::new("Step errors so far", count(errors)).tone(if errors > 0 {
                Tone::Bad
            } else {
                Tone::Good
            }));
        }
    }

    fn blocks(&self, out: &mut Vec<Block>) {
        let d = self;
        let mut t = Table::new(&["Step", "Count", "Errors", "p50", "p90", "p99", "max", "per minute"])
            .right(&[1, 2, 3, 4, 5, 6, 7]);
        for s in &d.steps {
            let l = s.latency.as_ref();
            let p = |f: fn(&crate::stats::result::Latency) -> u64| l.map(|l| lat(f(l))).unwrap_or_else(|| "-".into());
            t.row(vec![
                s.name.clone(),
                count(s.count),
                count(s.errors),
                p(|l| l.p50_us),
                p(|l| l.p90_us),
                p(|l| l.p99_us),
                p(|l| l.max_us),
                format!("{:.1}", s.per_minute),
            ]);
            if s.errors > 0 {
                t.tone(t.rows.len() - 1, 2, Tone::Bad);
            }
        }
        let shared = [
            ("reactive (write to update)", d.summary.reactive.as_ref()),
            ("fan-out (write or send to every subscriber)", d.summary.fanout.as_ref()),
        ];
        // A protocol's own latencies (llm.ttft, ...) by their names, beside fan-out.
        let measures = d.summary.measures.iter().map(|(name, l)| (name.as_str(), Some(l)));
        for (name, l) in shared.into_iter().chain(measures) {
            if let Some(l) = l {
                t.row(vec![
                    name.into(),
                    "".into(),
                    "".into(),
                    lat(l.p50_us),
                    lat(l.p90_us),
                    lat(l.p99_us),
                    lat(l.max_us),
                    "".into(),
                ]);
            }
        }
        if !t.rows.is_empty() {
            out.push(Block::table(t));
        }
        if let Some(a) = &d.audit {
            audit_blocks(a, out);
        }
        if let Some(b) = &d.browser {
            super::browser::blocks(b, out);
        }
    }

    fn csv_seconds(&self, row: &mut dyn FnMut(f64, &str, &str, f64)) {
        let d = self;
        let ms = |us: f64| us / 1000.0;
        for s in &d.timeline {
            let t = f64::from(s.t);
            let c = &s.counts;
            row(t, "users_alive", "", s.users_alive as f64);
            for (name, v) in [
                ("users_launched", c.launched),
                ("users_completed", c.completed),
                ("users_failed", c.failed),
                ("steps", c.steps),
                ("step_errors", c.step_errors),
                ("messages_in", c.messages_in),
                ("messages_out", c.messages_out),
                ("bytes_in", c.bytes_in),
                ("bytes_out", c.bytes_out),
            ] {
                row(t, name, "", v as f64);
            }
            // Faults' and the audit's counts: only the seconds that had some.
            for (name, v) in [
                ("reconnects", c.reconnects),
                ("resent", c.resent),
                ("audit_agreed", c.audit_agreed),
                ("audit_differed", c.audit_differed),
            ] {
                if v > 0 {
                    row(t, name, "", v as f64);
                }
            }
            // A protocol's counts that moved this second: llm.output_tokens as llm_output_tokens.
            for (name, v) in &c.events {
                row(t, &name.replace('.', "_"), "", *v as f64);
            }
            let mut latency = |prefix: &str, labels: &str, l: &crate::stats::vu::SecondLatency| {
                row(t, &format!("{prefix}_count"), labels, l.count as f64);
                row(t, &format!("{prefix}_p50_ms"), labels, ms(l.p50_us as f64));
                row(t, &format!("{prefix}_p99_ms"), labels, ms(l.p99_us as f64));
                row(t, &format!("{prefix}_max_ms"), labels, ms(l.max_us as f64));
            };
            if let Some(l) = &s.latency {
                latency("step_latency", "", l);
            }
            for (name, l) in &s.step_latency {
                latency("step_latency", &format!("step={name}"), l);
            }
            if let Some(l) = &s.reactive {
                latency("reactive_latency", "", l);
            }
            if let Some(l) = &s.fanout {
                latency("fanout_latency", "", l);
            }
            // A protocol's own: llm.ttft as llm_ttft_p50_ms, ...
            for (name, l) in &s.measures {
                latency(&name.replace('.', "_"), "", l);
            }
        }
    }
}

/// `1 min 12 s`, as the Meteor reports write times.
pub fn minutes(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 60 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{secs:.1} s")
    }
}

/// A protocol's own counts, a line per protocol (the name's first word, which names it):
/// `Socket.IO     20 connections, 50 emits, ...`.
pub fn protocol_rows(events: &std::collections::BTreeMap<String, u64>) -> String {
    let mut out = String::new();
    let mut prefixes: Vec<&str> = events.keys().filter_map(|k| k.split_once('.').map(|(p, _)| p)).collect();
    prefixes.dedup();
    for prefix in prefixes {
        let title = match prefix {
            "socketio" => "Socket.IO".to_string(),
            "graphql" => "GraphQL".to_string(),
            other => other.to_uppercase(),
        };
        let parts: Vec<String> = events
            .iter()
            .filter_map(|(k, n)| {
                let name = k.strip_prefix(prefix)?.strip_prefix('.')?;
                Some(format!("{} {}", count(*n), name.replace('_', " ")))
            })
            .collect();
        let _ = writeln!(out, "  {title:<14}{}", parts.join(", "));
    }
    out
}

/// The counts a run's protocol declared a throughput, each per second of the run, in the order
/// declared (none when the run lasted no time).
fn rates(s: &crate::stats::vu::DdpSummary) -> Vec<(&str, f64)> {
    s.throughputs
        .iter()
        .filter(|_| s.duration_s > 0.0)
        .filter_map(|name| Some((name.as_str(), *s.events.get(name)? as f64 / s.duration_s)))
        .collect()
}

/// A rate as the report says it: `320.4 llm.output_tokens/s`.
fn rate(name: &str, per_s: f64) -> String {
    format!("{} {name}/s", super::term::grouped(per_s, 1))
}

/// `Throughput    320.4 llm.output_tokens/s, ...`: each of [`rates`] (empty without any).
pub fn throughput_row(s: &crate::stats::vu::DdpSummary) -> String {
    let parts: Vec<String> = rates(s).into_iter().map(|(name, v)| rate(name, v)).collect();
    match parts.is_empty() {
        true => String::new(),
        false => format!("  {:<14}{}\n", "Throughput", parts.join(", ")),
    }
}

/// The whole summary, for stdout.
/// What a DDP run does, in one line: `bolide run SCENARIO -> URL (websocket, compression on, 2
/// threads)`. Printed before the run starts (with how long arrivals last), and heading its summary.
pub fn header(set: &crate::stats::vu::DdpRunSettings) -> String {
    let compression = if set.compression { "compression on" } else { "compression off" };
    format!(
        "bolide run {} -> {} ({}, {compression}, {} threads)",
        set.scenario,
        if set.targets.is_empty() { set.target.clone() } else { format!("{} targets", set.targets.len()) },
        set.transport,
        set.threads
    )
}

/// The band's cards of a run with browser users: LCP and INP over every navigation (p75, the
/// web's own statistic), the page's DDP methods together (method to result and updated), and the
/// slowest step by its p99, named.
fn browser_facts(d: &VuDoc, b: &crate::stats::browser::BrowserSection, out: &mut Vec<Fact>) {
    for metric in ["lcp", "inp"] {
        if let Some(v) = b.vitals.iter().find(|v| v.metric == metric && v.step.is_none()) {
            let detail = format!("p50 {}; {} pages", super::browser::value(metric, v.p50), count(v.count));
            out.push(
                Fact::new(format!("{} p75", super::browser::label(metric)), super::browser::value(metric, v.p75))
                    .detail(detail),
            );
        }
    }
    let mut methods: Option<hdrhistogram::Histogram<u64>> = None;
    for m in &b.methods {
        if let Ok(h) = crate::stats::hist::decode(&m.histogram) {
            let _ = methods.get_or_insert_with(crate::stats::hist::latency_us).add(&h);
        }
    }
    if let Some(h) = methods.filter(|h| !h.is_empty()) {
        let names =
            if b.methods.len() == 1 { b.methods[0].name.clone() } else { format!("{} methods", b.methods.len()) };
        let detail = format!("p50 {}; {} calls of {names}", lat(h.value_at_quantile(0.5)), count(h.len()));
        out.push(Fact::new("In-page method p99", lat(h.value_at_quantile(0.99))).detail(detail));
    }
    let slowest = d.steps.iter().filter_map(|s| s.latency.as_ref().map(|l| (s, l.p99_us))).max_by_key(|(_, p99)| *p99);
    if let Some((s, p99)) = slowest {
        let name = crate::redact::printable(&s.name).into_owned();
        out.push(Fact::new("Slowest step p99", lat(p99)).detail(format!("{name}, {} attempts", count(s.count))));
    }
}

pub fn summary(doc: &VuDoc) -> String {
    let s = &doc.summary;
    let set = &doc.settings;
    let mut out = String::new();
    let _ = writeln!(out, "{}", header(set));
    if doc.interrupted {
        out.push_str("  (interrupted: the figures cover what was done before the stop signal)\n");
    }
    out.push_str(&super::term::segment_note(set.segment, doc.merged.as_ref()));
    out.push('\n');
    let u = &s.users;
    // Users launched that neither completed nor failed were walking their flow when the run
    // stopped: a stopped run says how many the stop cut.
    let stopped = u.launched.saturating_sub(u.completed + u.failed);
    let _ = writeln!(
        out,
        "  {:<14}{} launched, {} completed, {} failed{}{}{}",
        "Users",
        count(u.launched),
        count(u.completed),
        count(u.failed),
        if u.cut > 0 { format!(" ({} cut at the user timeout)", count(u.cut)) } else { String::new() },
        if u.skipped > 0 { format!(", {} skipped (maxVusers)", count(u.skipped)) } else { String::new() },
        if doc.interrupted && stopped > 0 { format!(", {} cut by the stop", count(stopped)) } else { String::new() },
    );
    // The closed model: each launch above is one iteration of a looping user. A segment runs its
    // own share of the plan's looping users (every N-th): both are said.
    let looping: Vec<String> = set
        .phases
        .iter()
        .filter_map(|p| p.users)
        .map(|n| match set.segment {
            Some(seg) => format!("{} of the plan's {}", count(seg.arrivals(n)), count(n)),
            None => count(n),
        })
        .collect();
    if !looping.is_empty() {
        let _ = writeln!(
            out,
            "  {:<14}{} users looping{} (each iteration counted as a user above)",
            "",
            looping.join(", then "),
            if set.segment.is_some() { " in this segment" } else { "" }
        );
    }
    let until = if doc.interrupted { "the stop signal" } else { "the last user done" };
    let _ = writeln!(out, "  {:<14}{} from the first arrival to {until}", "Time", minutes(s.total_time_s));
    let _ = writeln!(
        out,
        "  {:<14}{} done, {} failed ({:.2}%)",
        "Steps",
        count(s.steps),
        count(s.step_errors),
        s.error_rate_pct
    );
    let _ = writeln!(
        out,
        "  {:<14}in {} messages ({}), out {} messages ({}); {} pings answered, {} sent",
        "Traffic",
        count(s.messages_in),
        bytes(s.bytes_in as f64),
        count(s.messages_out),
        bytes(s.bytes_out as f64),
        count(s.pings_answered),
        count(s.pings_sent)
    );
    out.push_str(&protocol_rows(&s.events));
    out.push_str(&throughput_row(s));
    out.push('\n');
    // The names' column fits the longest name (a method's whole name), up to 64 characters.
    let w = doc.steps.iter().map(|s| s.name.chars().count() + 1).max().unwrap_or(0).clamp(32, 64);
    let _ = writeln!(
        out,
        "  {:<w$}{:>9}{:>8}{:>10}{:>10}{:>10}{:>10}{:>12}{:>12}",
        "Step", "count", "errors", "p50", "p90", "p99", "max", "result p50", "updated p50"
    );
    for st in &doc.steps {
        let opt = |x: &Option<Latency>| x.as_ref().map_or("-".to_string(), |l| us(l.p50_us as f64));
        let Some(l) = &st.latency else {
            // No attempt succeeded: no percentile to show (never 0µs); a step no user reached
            // (the run could not connect, say) is said to be that.
            let why = if st.count == 0 { "not attempted" } else { "no sample: no attempt succeeded" };
            let _ = writeln!(
                out,
                "  {:<w$}{:>9}{:>8}  {why}",
                truncate(&st.name, w - 1),
                count(st.count),
                count(st.errors)
            );
            continue;
        };
        let _ = writeln!(
            out,
            "  {:<w$}{:>9}{:>8}{:>10}{:>10}{:>10}{:>10}{:>12}{:>12}",
            truncate(&st.name, w - 1),
            count(st.count),
            count(st.errors),
            us(l.p50_us as f64),
            us(l.p90_us as f64),
            us(l.p99_us as f64),
            us(l.max_us as f64),
            opt(&st.to_result),
            opt(&st.to_updated)
        );
    }
    out.push_str(&per_target(doc));
    if let Some(b) = &doc.browser {
        out.push_str(&super::browser::rows(b));
    }
    if let Some(r) = &s.reactive {
        let _ = writeln!(out, "\n  {:<24}{}", "Reactive latency", quad(r));
        out.push_str("  (from a user's write until that user sees the change through its subscription)\n");
    }
    if let Some(f) = &s.fanout {
        let _ = writeln!(out, "  {:<24}{}", "Fan-out latency", quad(f));
        out.push_str("  (from the time the data carries (a document's server timestamp, an event's send time) until each\n   subscriber receives it)\n");
    }
    if !s.measures.is_empty() {
        out.push('\n');
    }
    for (name, l) in &s.measures {
        let _ = writeln!(out, "  {name:<24}{}", quad(l));
    }
    let errors: Vec<String> =
        s.errors_by_class.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {}", count(*n))).collect();
    let _ =
        writeln!(out, "\n  {:<14}{}", "Errors", if errors.is_empty() { "none".to_string() } else { errors.join(", ") });
    if s.protocol_errors > 0 {
        let _ = writeln!(out, "  {:<14}{} protocol errors from the server", "", count(s.protocol_errors));
    }
    out.push_str(&fault_rows(doc));
    if let Some(a) = &doc.audit {
        out.push_str(&audit_rows(a));
    }
    out.push_str(&super::term::monitor_rows(&doc.monitor));
    out.push_str(&crate::monitor::scrape::rows(&doc.scrape, 8));
    out.push_str(&super::term::generator_rows(doc.generator.as_ref()));
    out.push_str(&super::term::threshold_rows(
        &doc.thresholds,
        doc.generator.as_ref().and_then(|g| g.suspect.as_deref()),
    ));
    out
}

/// The faults seeded into the run, each on a line, with what followed it: reconnections, methods
/// sent again, when the users were back and when the audit agreed again.
fn fault_rows(doc: &VuDoc) -> String {
    let mut out = String::new();
    let (reconnects, resent): (u64, u64) =
        doc.timeline.iter().fold((0, 0), |(a, b), s| (a + s.counts.reconnects, b + s.counts.resent));
    if doc.faults.is_empty() && reconnects == 0 {
        return out;
    }
    for (i, f) in doc.faults.iter().enumerate() {
        let label = if i == 0 { "Faults" } else { "" };
        let _ = writeln!(
            out,
            "  {label:<14}{} at {:.1} s: {}{}",
            f.fault,
            f.at_s,
            if f.ok { "" } else { "NOT DONE: " },
            crate::redact::printable(&f.done)
        );
        let back = f.back_s.map(|s| format!("; users back within {s:.1} s")).unwrap_or_default();
        let converged = match (f.converged_s, &doc.audit) {
            (Some(s), _) => format!("; the audit agreed again within {s:.0} s"),
            (None, Some(_)) => "; no audit check agreed after it".into(),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "  {:<14}  {} reconnects, {} methods sent again{back}{converged}",
            "",
            count(f.reconnects),
            count(f.resent)
        );
    }
    if doc.faults.is_empty() {
        let _ = writeln!(
            out,
            "  {:<14}{} reconnects, {} methods sent again",
            "Reconnects",
            count(reconnects),
            count(resent)
        );
    }
    out
}

/// How many differences the terminal summary lists (the document keeps 20 per checkpoint).
const SHOWN_DIFFERENCES: usize = 5;

/// The audit's lines in the terminal summary: the outcome, why when it did not pass, and the
/// first differences.
fn audit_rows(a: &crate::stats::audit::AuditSection) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  {:<14}{}", "Audit", a.line());
    for why in a.why.iter().skip(usize::from(a.outcome == crate::stats::audit::Outcome::Incomplete)) {
        let _ = writeln!(out, "  {:<14}{}", "", why);
    }
    if let Some(t) = &a.truth {
        let _ = writeln!(out, "  {:<14}{}", "", t.words());
    }
    let first = a.checkpoints.iter().flat_map(|c| &c.first_differences);
    for d in first.clone().take(SHOWN_DIFFERENCES) {
        let _ = writeln!(out, "  {:<14}{}", "", d.line());
    }
    if a.differences > SHOWN_DIFFERENCES as u64 {
        let _ = writeln!(
            out,
            "  {:<14}... {} more (the document's audit.checkpoints keeps the first 20 of each)",
            "",
            count(a.differences - first.take(SHOWN_DIFFERENCES).count() as u64)
        );
    }
    out
}

/// The report's audit section: each checkpoint's checks, and the first differences.
fn audit_blocks(a: &crate::stats::audit::AuditSection, out: &mut Vec<Block>) {
    use crate::stats::audit::Outcome;
    out.push(Block::heading(3, format!("Audit: {}", a.outcome.word())));
    out.push(Block::text(a.line()));
    for why in &a.why {
        out.push(Block::text(why.clone()));
    }
    if let Some(t) = &a.truth {
        out.push(Block::text(format!("The {}.", t.words())));
    }
    let mut t = Table::new(&["Checkpoint", "Checks", "Agreed", "Differed", "Incomplete", "Differences"])
        .right(&[1, 2, 3, 4, 5]);
    for c in &a.checkpoints {
        t.row(vec![
            c.name.clone(),
            count(c.checks),
            count(c.agreed),
            count(c.failed),
            count(c.incomplete),
            count(c.differences),
        ]);
        let row = t.rows.len() - 1;
        if c.failed > 0 {
            t.tone(row, 3, Tone::Bad);
        }
        if c.incomplete > 0 {
            t.tone(row, 4, Tone::Bad);
        }
    }
    if !t.rows.is_empty() {
        out.push(Block::table(t));
    }
    let mut d = Table::new(&["User", "Collection", "Document", "Difference", "Cache", "Truth"]).right(&[0]);
    for x in a.checkpoints.iter().flat_map(|c| &c.first_differences) {
        let printable = |t: &str| crate::redact::printable(t).into_owned();
        let shown =
            |v: &Option<serde_json::Value>| v.as_ref().map(|v| printable(&v.to_string())).unwrap_or_else(|| "-".into());
        let what = match x.kind {
            crate::stats::audit::Kind::Missing => "missing from the cache".to_string(),
            crate::stats::audit::Kind::Extra => "not in the truth".to_string(),
            crate::stats::audit::Kind::Field => format!("field {}", printable(x.field.as_deref().unwrap_or_default())),
        };
        let (collection, id) = (printable(&x.collection), printable(&x.id));
        d.row(vec![x.user.to_string(), collection, id, what, shown(&x.cache), shown(&x.truth)]);
    }
    if !d.rows.is_empty() && a.outcome == Outcome::Failed {
        out.push(Block::table(d));
    }
}

/// Each target's share of a run over several: users, subscriptions and calls per minute, time to
/// `ready` (all steps when there is no subscription), errors.
fn per_target(doc: &VuDoc) -> String {
    if doc.per_target.is_empty() {
        return String::new();
    }
    let subs = doc.per_target.iter().any(|t| t.subscribe_latency.is_some());
    let (p50, p99) = if subs { ("ready p50", "ready p99") } else { ("step p50", "step p99") };
    // The watched process serving each target (`--monitor NAME=:PORT`): its CPU and RAM.
    let watched = |t: &crate::stats::vu::DdpTargetSummary| {
        t.monitor.as_ref().and_then(|name| doc.monitor.iter().find(|m| &m.name == name))
    };
    let tied = doc.per_target.iter().any(|t| watched(t).is_some());
    let mut out = format!(
        "\n  {:<32}{:>7}{:>8}{:>8}{:>10}{:>11}{:>11}{:>11}{}  errors\n",
        "Target",
        "weight",
        "users",
        "failed",
        "subs/min",
        "calls/min",
        p50,
        p99,
        if tied { format!("{:>9}{:>10}", "CPU", "RAM") } else { String::new() }
    );
    for t in &doc.per_target {
        let resources = match (tied, watched(t)) {
            (false, _) => String::new(),
            (true, None) => format!("{:>9}{:>10}", "-", "-"),
            (true, Some(m)) => format!(
                "{:>9}{:>10}",
                format!("{:.0}%", m.avg_cpu_pct),
                crate::report::table::meteor_bytes(m.avg_rss_bytes)
            ),
        };
        let l = if subs { t.subscribe_latency.as_ref() } else { t.latency.as_ref() };
        let at = |f: fn(&Latency) -> u64| l.map_or("-".to_string(), |l| us(f(l) as f64));
        let errors: Vec<String> =
            t.errors_by_class.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {}", count(*n))).collect();
        let _ = writeln!(
            out,
            "  {:<32}{:>7}{:>8}{:>8}{:>10.1}{:>11.1}{:>11}{:>11}{resources}  {}",
            truncate(&t.url, 31),
            t.weight,
            count(t.users.launched),
            count(t.users.failed),
            t.subscriptions_per_min,
            t.calls_per_min,
            at(|l| l.p50_us),
            at(|l| l.p99_us),
            if errors.is_empty() { "none".to_string() } else { errors.join(", ") }
        );
    }
    out
}

fn quad(l: &Latency) -> String {
    format!(
        "p50 {}   p90 {}   p99 {}   max {}",
        us(l.p50_us as f64),
        us(l.p90_us as f64),
        us(l.p99_us as f64),
        us(l.max_us as f64)
    )
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use crate::segment::Segment;
    use crate::stats::vu::{PhaseSettings, VuDoc};

    #[test]
    fn a_segment_says_its_own_looping_users_and_the_plan_s() {
        // The probe against Meteor: each of 2 segments said "6 users looping" where it ran 3.
        let mut doc = VuDoc::default();
        doc.settings.phases = vec![PhaseSettings { users: Some(6), duration_s: 10.0, ..Default::default() }];
        assert!(super::summary(&doc).contains("6 users looping (each iteration"), "{}", super::summary(&doc));
        doc.settings.segment = Some(Segment { index: 2, count: 2 });
        let text = super::summary(&doc);
        assert!(text.contains("3 of the plan's 6 users looping in this segment"), "{text}");
        // 7 over 3 segments: 3, 2, 2.
        doc.settings.phases[0].users = Some(7);
        doc.settings.segment = Some(Segment { index: 1, count: 3 });
        assert!(super::summary(&doc).contains("3 of the plan's 7 users looping"));
    }

    #[test]
    fn a_stopped_run_says_how_many_users_the_stop_cut() {
        let mut doc = VuDoc::default();
        doc.summary.users = crate::stats::vu::Users { launched: 10, completed: 4, failed: 1, skipped: 0, cut: 0 };
        assert!(!super::summary(&doc).contains("cut by the stop"));
        doc.interrupted = true;
        assert!(super::summary(&doc).contains("10 launched, 4 completed, 1 failed, 5 cut by the stop"));
    }

    #[test]
    fn a_protocols_measures_show_beside_fan_out_and_in_the_seconds() {
        use crate::stats::result::Latency;
        use crate::stats::vu::{DdpSecond, SecondLatency};
        let mut doc = VuDoc::default();
        let l = Latency { p50_us: 120_000, p90_us: 300_000, p99_us: 900_000, max_us: 1_200_000, ..Default::default() };
        doc.summary.measures.insert("llm.ttft".into(), l);
        let text = super::summary(&doc);
        let row = text.lines().find(|l| l.trim_start().starts_with("llm.ttft")).unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("p50 ") && row.contains("p99 ") && row.contains("max "), "{row}");
        let mut sec = DdpSecond::default();
        sec.measures.insert("sse.first_event".into(), SecondLatency { count: 3, p50_us: 2_000, ..Default::default() });
        sec.counts.events.insert("llm.output_tokens".into(), 640);
        doc.timeline = vec![sec];
        let csv = super::super::csv::rows(&crate::stats::doc::Doc::Ddp(Box::new(doc)), "1");
        assert!(csv.contains("1,0,sse_first_event_count,,3\n"), "{csv}");
        assert!(csv.contains("1,0,sse_first_event_p50_ms,,2\n"), "{csv}");
        assert!(csv.contains("1,0,llm_output_tokens,,640\n"), "{csv}");
    }

    #[test]
    fn step_names_are_shown_whole_and_a_step_nobody_reached_says_so() {
        use crate::stats::vu::StepSummary;
        let mut doc = VuDoc::default();
        let long = "call /taskCollection/updateAsync";
        doc.steps = vec![
            StepSummary { name: "connect".into(), count: 2, errors: 2, ..Default::default() },
            StepSummary { name: long.into(), count: 0, ..Default::default() },
        ];
        let text = super::summary(&doc);
        let row = text.lines().find(|l| l.contains(long)).unwrap_or_else(|| panic!("{text}"));
        assert!(row.contains("not attempted"), "{row}");
        let row = text.lines().find(|l| l.trim_start().starts_with("connect")).unwrap();
        assert!(row.contains("no sample: no attempt succeeded"), "{row}");
        // The header's columns line up with the rows' past the longer name.
        let header = text.lines().find(|l| l.trim_start().starts_with("Step ")).unwrap();
        let end = header.find("count").unwrap() + 4;
        assert_eq!(&row[end..=end], "2", "{header}\n{row}");
    }
}

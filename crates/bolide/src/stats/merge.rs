//! Merging the result documents of one plan's segments (`--segment I/N`) into the document of the
//! whole run: counts add up, histograms merge (exact percentiles), per-second timelines align by
//! wall-clock second, per-step, per-target and monitor sections combine, and each segment's
//! generator verdict is kept (one suspect segment makes the merge suspect, naming it).

use std::collections::BTreeMap;
use std::time::SystemTime;

use hdrhistogram::Histogram;

use super::doc::Doc;
use super::merge_info::{MergeInfo, SegmentInfo};
use super::result::{ResultDoc, Second};
use super::summary::{latency, rate_distribution};
use super::vu::{DdpSecond, DdpTargetSummary, StepSummary, Users, VuDoc};
use super::{hist, vu};
use crate::monitor::generator::GeneratorResult;
use crate::monitor::MonitorResult;
use crate::problem::Problem;
use crate::segment::Segment;

/// The lines around a result document in a log (a Kubernetes pod's, read with `kubectl logs`):
/// `bolide merge` finds every document between them.
pub const LOG_BEGIN: &str = "=== bolide result begin ===";
pub const LOG_END: &str = "=== bolide result end ===";

/// The documents between [`LOG_BEGIN`] and [`LOG_END`] lines in `text`, in order; a block left
/// open at the end (a pod cut off) is reported as Err with its line number.
pub fn documents_in_log(text: &str) -> Vec<Result<String, Problem>> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (no, line) in text.lines().enumerate() {
        // `kubectl logs --prefix` puts "[pod/name/container] " before each line.
        let bare = line.trim_end();
        let bare = bare.rsplit_once("] ").map_or(bare, |(_, rest)| if bare.starts_with('[') { rest } else { bare });
        match (&mut open, bare) {
            (None, LOG_BEGIN) => open = Some((no + 1, String::new())),
            (Some((_, doc)), LOG_END) => {
                out.push(Ok(std::mem::take(doc)));
                open = None;
            }
            (Some((at, _)), LOG_BEGIN) => {
                out.push(Err(Problem::from(format!(
                    "line {at}: a result that never ended (a new one begins at line {})",
                    no + 1
                ))));
                open = Some((no + 1, String::new()));
            }
            (Some((_, doc)), _) => {
                doc.push_str(bare);
                doc.push('\n');
            }
            (None, _) => {}
        }
    }
    if let Some((at, _)) = open {
        out.push(Err(Problem::from(format!(
            "line {at}: a result that never ended (the log stops first; was the pod cut off?)"
        ))));
    }
    out
}

/// What the merge produced and what the user should be told.
pub struct Merged {
    pub doc: Doc,
    pub warnings: Vec<String>,
}

/// Merges the segment documents `inputs` (source, document). Err when they are not segments of
/// one plan, naming the difference.
pub fn merge(inputs: Vec<(String, Doc)>, command_line: Vec<String>) -> Result<Merged, Problem> {
    if inputs.is_empty() {
        return Err("no documents to merge".into());
    }
    let segs: Vec<(String, Segment)> = inputs
        .iter()
        .map(|(src, d)| {
            d.segment().map(|s| (src.clone(), s)).ok_or_else(|| {
                format!(
                    "{src}: not a segment's result (no settings.segment); merge combines the documents of runs \
                     made with --segment I/N"
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let n = segs[0].1.count;
    if let Some((src, s)) = segs.iter().find(|(_, s)| s.count != n) {
        return Err(format!(
            "{src} is segment {s} and {} is segment {}: segments of different splits of a plan do not merge",
            segs[0].0, segs[0].1
        )
        .into());
    }
    let first_kind = inputs[0].1.kind();
    for (src, d) in &inputs[1..] {
        if d.kind() != first_kind {
            return Err(format!(
                "{src} is a {} result and {} a {first_kind} one: not the same plan",
                d.kind(),
                inputs[0].0
            )
            .into());
        }
        let diff = plan_differences(&inputs[0].1, d);
        if !diff.is_empty() {
            return Err(
                format!("{src} and {} are not segments of the same plan: {}", inputs[0].0, diff.join("; ")).into()
            );
        }
    }
    // Segment order; the first document of a segment given twice is kept.
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| segs[i].1.index);
    let mut info = MergeInfo { segments_planned: n, ..MergeInfo::default() };
    let mut kept: Vec<usize> = Vec::new();
    for i in order {
        let idx = segs[i].1.index;
        if kept.iter().any(|&k| segs[k].1.index == idx) {
            if !info.duplicated.contains(&idx) {
                info.duplicated.push(idx);
            }
            info.warnings.push(format!("segment {idx}/{n} given twice: {} left out (the first was merged)", segs[i].0));
        } else {
            kept.push(i);
        }
    }
    info.missing = (1..=n).filter(|i| !kept.iter().any(|&k| segs[k].1.index == *i)).collect();
    if !info.missing.is_empty() {
        let list: Vec<String> = info.missing.iter().map(|i| format!("{i}/{n}")).collect();
        info.warnings.push(format!(
            "segment{} {} missing: the merged document covers {} of {n} segments, less than the plan",
            if list.len() == 1 { "" } else { "s" },
            list.join(", "),
            n - info.missing.len() as u32
        ));
    }
    // Wall-clock alignment: each segment's seconds move by its start after the earliest's.
    let starts: Vec<SystemTime> = kept
        .iter()
        .map(|&i| {
            humantime::parse_rfc3339_weak(inputs[i].1.started_at())
                .map_err(|e| format!("{}: started_at {:?} is not a time: {e}", inputs[i].0, inputs[i].1.started_at()))
        })
        .collect::<Result<_, _>>()?;
    let base = *starts.iter().min().expect("at least one document");
    let offsets: Vec<f64> = starts.iter().map(|s| s.duration_since(base).unwrap_or_default().as_secs_f64()).collect();
    for (&i, off) in kept.iter().zip(&offsets) {
        let (src, d) = &inputs[i];
        if *off >= 0.5 {
            info.warnings.push(format!(
                "segment {} ({src}) started {off:.1} s after the earliest: its seconds are moved by {}, and the \
                 segments did not load the server together the whole time (use --start-at)",
                segs[i].1,
                off.round()
            ));
        }
        if d.interrupted() {
            info.warnings.push(format!("segment {} ({src}) was interrupted: it covers less than its share", segs[i].1));
        }
        let generator = d.generator().cloned();
        if let Some(why) = generator.as_ref().and_then(|g| g.suspect.as_ref()) {
            info.warnings.push(format!("segment {} ({src}) is suspect: {why}", segs[i].1));
        }
        info.segments.push(SegmentInfo {
            index: segs[i].1.index,
            source: src.clone(),
            started_at: d.started_at().to_string(),
            offset_s: *off,
            interrupted: d.interrupted(),
            cores: d.cores(),
            threads: d.threads(),
            generator,
        });
    }
    let docs: Vec<(&Doc, u32)> =
        kept.iter().zip(&offsets).map(|(&i, off)| (&inputs[i].1, off.round() as u32)).collect();
    let started_at = humantime::format_rfc3339_millis(base).to_string();
    let monitor = merge_monitors(&docs, &mut info.warnings);
    // Every segment read the same endpoints over the same time: the first one's reading stands.
    let scrape = docs.first().map(|(d, _)| d.scrape().to_vec()).unwrap_or_default();
    let generator = merge_generators(&info.segments);
    let warnings = info.warnings.clone();
    // The kinds were checked above: every part is of the first document's kind.
    let shifted = docs.iter().zip(&offsets).map(|((d, t), off)| (*d, *t, *off));
    // The header of the whole run: the merge's command line, the earliest start, and the sections
    // made across the segments.
    macro_rules! whole {
        ($m:expr) => {{
            let mut m = $m;
            m.command_line = command_line;
            m.started_at = started_at;
            m.monitor = monitor;
            m.scrape = scrape;
            m.generator = generator;
            m.merged = Some(info);
            Box::new(m)
        }};
    }
    // The segments' thresholds (one plan: the same ones), judged again over the whole run.
    let thresholds = super::verdict::thresholds_of(&inputs[kept[0]].1)?;
    let mut doc = match &inputs[0].1 {
        Doc::Http(_) => {
            let parts: Vec<(&ResultDoc, u32, f64)> =
                shifted.filter_map(|(d, t, off)| d.http().map(|h| (h, t, off))).collect();
            Doc::Http(whole!(merge_http(&parts)?))
        }
        Doc::Ddp(_) => {
            let parts: Vec<(&VuDoc, u32, f64)> =
                shifted.filter_map(|(d, t, off)| d.ddp().map(|h| (h, t, off))).collect();
            Doc::Ddp(whole!(merge_ddp(&parts)?))
        }
    };
    super::verdict::record(&mut doc, &thresholds);
    Ok(Merged { doc, warnings })
}

/// What makes two documents' plans differ: their settings and targets, leaving out what is each
/// instance's own (segment, threads).
fn plan_differences(a: &Doc, b: &Doc) -> Vec<String> {
    let plan = |d: &Doc| -> serde_json::Value {
        let mut v = match d {
            Doc::Http(h) => serde_json::json!({ "settings": h.settings, "targets": h.targets, "label": h.label }),
            Doc::Ddp(d) => serde_json::json!({ "settings": d.settings, "label": d.label }),
        };
        if let Some(s) = v.get_mut("settings").and_then(|s| s.as_object_mut()) {
            s.remove("segment");
            s.remove("threads");
        }
        v
    };
    let (a, b) = (plan(a), plan(b));
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    out
}

fn diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                diff(&p, x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null), out);
            }
        }
        _ if a != b => out.push(format!("{path} is {a} in one and {b} in the other")),
        _ => {}
    }
}

/// Monitors by name; one process watched by several segments (the same name) is kept once, from
/// the first segment that has it.
fn merge_monitors(docs: &[(&Doc, u32)], warnings: &mut Vec<String>) -> Vec<MonitorResult> {
    let mut out: Vec<MonitorResult> = Vec::new();
    let mut twice = Vec::new();
    for (d, t) in docs {
        for m in d.monitor() {
            if out.iter().any(|o| o.name == m.name) {
                if !twice.contains(&m.name) {
                    twice.push(m.name.clone());
                }
                continue;
            }
            let mut m = m.clone();
            for s in &mut m.samples {
                s.0 += f64::from(*t);
            }
            m.vanished_s = m.vanished_s.map(|v| v + f64::from(*t));
            out.push(m);
        }
    }
    for name in twice {
        warnings.push(format!(
            "monitor {name:?} appears in several segments (one process watched from each): the first segment's \
             samples are kept"
        ));
    }
    out
}

/// The merged run's generator verdict: every segment's load threads together, suspect when any
/// segment was (naming which and why). Samples stay in each segment's record.
fn merge_generators(segments: &[SegmentInfo]) -> Option<GeneratorResult> {
    let gens: Vec<(u32, &GeneratorResult)> =
        segments.iter().filter_map(|s| s.generator.as_ref().map(|g| (s.index, g))).collect();
    if gens.is_empty() {
        return None;
    }
    let n = gens.len() as f64;
    let suspects: Vec<String> =
        gens.iter().filter_map(|(i, g)| g.suspect.as_ref().map(|why| format!("segment {i}: {why}"))).collect();
    // bolide's CPU over all segments' work, when every segment kept it: (seconds, units, per
    // message?), each segment's units being its CPU over its CPU per unit.
    let cpu = gens
        .iter()
        .map(|(_, g)| {
            let per = g.cpu_us_per_request.map(|v| (v, false)).or(g.cpu_us_per_message.map(|v| (v, true)));
            match (g.cpu_s, per) {
                (Some(s), Some((p, m))) if p > 0.0 => Some((s, s * 1e6 / p, m)),
                _ => None,
            }
        })
        .try_fold((0.0, 0.0, false), |acc, x| x.map(|(s, n, m)| (acc.0 + s, acc.1 + n, m)));
    Some(GeneratorResult {
        threads: gens.iter().map(|(_, g)| g.threads).sum(),
        avg_cpu_pct: gens.iter().map(|(_, g)| g.avg_cpu_pct).sum(),
        peak_cpu_pct: gens.iter().map(|(_, g)| g.peak_cpu_pct).fold(0.0, f64::max),
        peak_thread_pct: gens.iter().map(|(_, g)| g.peak_thread_pct).fold(0.0, f64::max),
        avg_machine_idle_pct: gens.iter().map(|(_, g)| g.avg_machine_idle_pct).sum::<f64>() / n,
        min_machine_idle_pct: gens.iter().map(|(_, g)| g.min_machine_idle_pct).fold(f64::INFINITY, f64::min),
        saturated_samples: gens.iter().map(|(_, g)| g.saturated_samples).sum(),
        machine_busy_samples: gens.iter().map(|(_, g)| g.machine_busy_samples).sum(),
        suspect: (!suspects.is_empty()).then(|| suspects.join("; ")),
        dashboard_cpu_pct: None,
        samples: Vec::new(),
        cpu_s: cpu.map(|(s, _, _)| s),
        cpu_us_per_request: cpu.and_then(|(s, n, message)| (!message && n > 0.0).then(|| s * 1e6 / n)),
        cpu_us_per_message: cpu.and_then(|(s, n, message)| (message && n > 0.0).then(|| s * 1e6 / n)),
        peak_rss_bytes: gens.iter().map(|(_, g)| g.peak_rss_bytes).sum(),
    })
}

fn add_map(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Decodes and adds a histogram into `into`.
fn add_hist(into: &mut Histogram<u64>, text: &str, what: &str) -> Result<(), Problem> {
    let h = hist::decode(text).map_err(|e| format!("{what}: {e}"))?;
    into.add(&h).map_err(|e| Problem::from(format!("{what}: {e:?}")))
}

/// The run's length once merged: the latest segment end after the earliest start.
fn span(parts: impl Iterator<Item = (f64, f64)>) -> f64 {
    parts.map(|(off, d)| off + d).fold(0.0, f64::max)
}

fn merge_http(parts: &[(&ResultDoc, u32, f64)]) -> Result<ResultDoc, Problem> {
    let first = parts[0].0;
    let mut m = first.clone();
    m.settings.segment = None;
    m.settings.threads = parts.iter().map(|(d, _, _)| d.settings.threads).sum();
    m.interrupted = parts.iter().any(|(d, _, _)| d.interrupted);
    let duration_s = span(parts.iter().map(|(d, _, off)| (*off, d.summary.duration_s)));
    // Totals.
    let s = &mut m.summary;
    *s = Default::default();
    s.late_threshold_us = first.summary.late_threshold_us;
    let mut all = hist::latency_us();
    for (d, _, _) in parts {
        let x = &d.summary;
        s.responses += x.responses;
        s.errors += x.errors;
        s.unfinished += x.unfinished;
        s.sent += x.sent;
        s.bytes_in += x.bytes_in;
        s.connects += x.connects;
        s.retries += x.retries;
        s.non_2xx_3xx += x.non_2xx_3xx;
        s.late_sends += x.late_sends;
        s.missed_sends += x.missed_sends;
        // The sends' lag is each instance's own precision: the worst segment's is kept.
        s.max_lag_us = s.max_lag_us.max(x.max_lag_us);
        s.lag_p50_us = s.lag_p50_us.max(x.lag_p50_us);
        s.lag_p99_us = s.lag_p99_us.max(x.lag_p99_us);
        add_map(&mut s.status, &x.status);
        add_map(&mut s.errors_by_class, &x.errors_by_class);
        add_hist(&mut all, &d.histograms.latency_us, "histograms.latency_us")?;
    }
    s.duration_s = duration_s;
    s.requests_per_s = if duration_s > 0.0 { s.responses as f64 / duration_s } else { 0.0 };
    s.bytes_in_per_s = if duration_s > 0.0 { s.bytes_in as f64 / duration_s } else { 0.0 };
    s.latency = latency(&all);
    m.histograms.latency_us = hist::encode(&all);
    // Per target, matched by URL (the plans are the same, so the same targets in the same order).
    for (ti, t) in m.per_target.iter_mut().enumerate() {
        let mut h = hist::latency_us();
        let mut sum = super::result::TargetSummary { url: t.url.clone(), ..Default::default() };
        for (d, _, _) in parts {
            let Some(x) = d.per_target.iter().find(|x| x.url == t.url).or_else(|| d.per_target.get(ti)) else {
                continue;
            };
            sum.responses += x.responses;
            sum.errors += x.errors;
            sum.bytes_in += x.bytes_in;
            sum.connects += x.connects;
            sum.retries += x.retries;
            add_map(&mut sum.status, &x.status);
            add_map(&mut sum.errors_by_class, &x.errors_by_class);
            add_hist(&mut h, &x.latency_histogram, "per_target.latency_histogram")?;
        }
        sum.requests_per_s = if duration_s > 0.0 { sum.responses as f64 / duration_s } else { 0.0 };
        sum.latency = latency(&h);
        sum.latency_histogram = hist::encode(&h);
        *t = sum;
    }
    // Seconds by wall clock.
    let len = parts.iter().map(|(d, t, _)| d.timeline.len() + *t as usize).max().unwrap_or(0);
    let mut hists: Vec<Option<Histogram<u64>>> = (0..len).map(|_| Some(hist::latency_us())).collect();
    let mut tl: Vec<Second> = (0..len).map(|t| Second { t: t as u32, ..Default::default() }).collect();
    for (d, shift, _) in parts {
        for sec in &d.timeline {
            let at = sec.t as usize + *shift as usize;
            let (slot, h) = (&mut tl[at], &mut hists[at]);
            slot.span_s = slot.span_s.max(sec.span_s);
            // Mean weighted by responses; kept exact through the sums.
            let before = slot.responses as f64;
            slot.latency_mean_us = if before + sec.responses as f64 > 0.0 {
                (slot.latency_mean_us * before + sec.latency_mean_us * sec.responses as f64)
                    / (before + sec.responses as f64)
            } else {
                0.0
            };
            slot.responses += sec.responses;
            slot.errors += sec.errors;
            slot.bytes_in += sec.bytes_in;
            slot.latency_max_us = slot.latency_max_us.max(sec.latency_max_us);
            match (h.as_mut(), &sec.latency_histogram) {
                (Some(h), Some(text)) => add_hist(h, text, "timeline latency_histogram")?,
                _ => *h = None,
            }
        }
    }
    for (slot, h) in tl.iter_mut().zip(&hists) {
        if let Some(h) = h {
            let l = latency(h);
            (slot.latency_p50_us, slot.latency_p90_us, slot.latency_p99_us) = (l.p50_us, l.p90_us, l.p99_us);
            slot.latency_histogram = Some(hist::encode(h));
        }
    }
    m.summary.rate = rate_distribution(&tl);
    m.timeline = tl;
    Ok(m)
}

fn merge_ddp(parts: &[(&VuDoc, u32, f64)]) -> Result<VuDoc, Problem> {
    let first = parts[0].0;
    let mut m = first.clone();
    m.settings.segment = None;
    m.settings.threads = parts.iter().map(|(d, _, _)| d.settings.threads).sum();
    m.interrupted = parts.iter().any(|(d, _, _)| d.interrupted);
    let duration_s = span(parts.iter().map(|(d, _, off)| (*off, d.summary.duration_s)));
    let s = &mut m.summary;
    let mut u = Users::default();
    let (mut reactive, mut fanout) = (hist::latency_us(), hist::latency_us());
    let mut measures: BTreeMap<String, Histogram<u64>> = BTreeMap::new();
    s.steps = 0;
    s.step_errors = 0;
    s.errors_by_class.clear();
    (s.messages_in, s.messages_out, s.bytes_in, s.bytes_out) = (0, 0, 0, 0);
    (s.pings_answered, s.pings_sent, s.protocol_errors) = (0, 0, 0);
    s.events.clear();
    for (d, _, _) in parts {
        let x = &d.summary;
        add_users(&mut u, &x.users);
        s.steps += x.steps;
        s.step_errors += x.step_errors;
        add_map(&mut s.errors_by_class, &x.errors_by_class);
        s.messages_in += x.messages_in;
        s.messages_out += x.messages_out;
        s.bytes_in += x.bytes_in;
        s.bytes_out += x.bytes_out;
        s.pings_answered += x.pings_answered;
        s.pings_sent += x.pings_sent;
        s.protocol_errors += x.protocol_errors;
        add_map(&mut s.events, &x.events);
        for t in &x.throughputs {
            if !s.throughputs.contains(t) {
                s.throughputs.push(t.clone());
            }
        }
        s.per_user.extend(x.per_user.iter().map(|(k, v)| (k.clone(), v.clone())));
        add_hist(&mut reactive, &d.histograms.reactive_us, "histograms.reactive_us")?;
        add_hist(&mut fanout, &d.histograms.fanout_us, "histograms.fanout_us")?;
        for (name, text) in &d.histograms.measures {
            let into = measures.entry(name.clone()).or_insert_with(hist::latency_us);
            add_hist(into, text, &format!("histograms.measures.{name}"))?;
        }
    }
    s.users = u;
    // The Meteor reports' Time: from the first arrival to the last user's end, over all segments.
    s.total_time_s = span(parts.iter().map(|(d, _, off)| (*off, d.summary.total_time_s)));
    s.duration_s = duration_s;
    s.error_rate_pct = if s.steps > 0 { s.step_errors as f64 * 100.0 / s.steps as f64 } else { 0.0 };
    let nonempty = |h: &Histogram<u64>| (!h.is_empty()).then(|| latency(h));
    s.reactive = nonempty(&reactive);
    s.fanout = nonempty(&fanout);
    m.histograms.reactive_us = hist::encode(&reactive);
    m.histograms.fanout_us = hist::encode(&fanout);
    s.measures = measures.iter().filter_map(|(k, h)| Some((k.clone(), nonempty(h)?))).collect();
    m.histograms.measures = measures.iter().map(|(k, h)| (k.clone(), hist::encode(h))).collect();
    m.steps = merge_steps(&parts.iter().map(|(d, _, _)| d.steps.as_slice()).collect::<Vec<_>>(), duration_s)?;
    // Browser users: their histograms merged exactly, their browsers' costs added.
    let browsers: Vec<&crate::stats::browser::BrowserSection> =
        parts.iter().filter_map(|(d, _, _)| d.browser.as_ref()).collect();
    m.browser = match browsers.is_empty() {
        true => None,
        false => Some(crate::stats::browser::BrowserSection::merge(&browsers)?),
    };
    // The audit: every segment's checks (a segment without one makes the whole incomplete).
    m.audit = None;
    if parts.iter().any(|(d, _, _)| d.audit.is_some()) {
        let mut audit = crate::stats::audit::AuditSection::default();
        for (d, _, _) in parts {
            match &d.audit {
                Some(a) => audit.merge(a),
                None => audit.why.push("a segment ran without the audit".into()),
            }
        }
        audit.judge();
        m.audit = Some(audit);
    }
    // Per target, in the plan's order.
    for (ti, t) in m.per_target.iter_mut().enumerate() {
        let mine: Vec<(&DdpTargetSummary, f64)> = parts
            .iter()
            .filter_map(|(d, _, _)| {
                let x = d.per_target.iter().find(|x| x.url == t.url).or_else(|| d.per_target.get(ti))?;
                Some((x, d.summary.duration_s))
            })
            .collect();
        *t = merge_target(&mine, duration_s)?;
    }
    // Seconds by wall clock.
    let len = parts.iter().map(|(d, t, _)| d.timeline.len() + *t as usize).max().unwrap_or(0);
    let mut tl: Vec<DdpSecond> = (0..len).map(|t| DdpSecond { t: t as u32, ..Default::default() }).collect();
    let mut lat: Vec<SecondHists> = (0..len).map(|_| SecondHists::default()).collect();
    for (d, shift, _) in parts {
        for sec in &d.timeline {
            let at = sec.t as usize + *shift as usize;
            let slot = &mut tl[at];
            slot.users_alive += sec.users_alive;
            slot.counts.merge(&sec.counts);
            lat[at].add(sec)?;
        }
    }
    for (slot, h) in tl.iter_mut().zip(&lat) {
        h.fill(slot);
    }
    m.timeline = tl;
    Ok(m)
}

/// One merged second's latencies: a histogram per series (every step, each step, reactive,
/// fan-out, each measure), or none once a segment's second lacks it (a percentile is never averaged).
#[derive(Default)]
struct SecondHists {
    all: Lat,
    steps: BTreeMap<String, Lat>,
    reactive: Lat,
    fanout: Lat,
    measures: BTreeMap<String, Lat>,
    page: BTreeMap<String, Lat>,
}

/// A series' merged histogram: not yet seen, merged so far, or not mergeable.
#[derive(Default)]
enum Lat {
    #[default]
    Unseen,
    Merged(Histogram<u64>),
    Lost,
}

impl Lat {
    fn add(&mut self, x: Option<&vu::SecondLatency>) -> Result<(), Problem> {
        let Some(x) = x else { return Ok(()) };
        match (&mut *self, &x.histogram) {
            (Lat::Lost, _) => {}
            (_, None) => *self = Lat::Lost,
            (Lat::Unseen, Some(text)) => {
                let mut h = hist::latency_us();
                add_hist(&mut h, text, "timeline latency histogram")?;
                *self = Lat::Merged(h);
            }
            (Lat::Merged(h), Some(text)) => add_hist(h, text, "timeline latency histogram")?,
        }
        Ok(())
    }

    fn get(&self) -> Option<vu::SecondLatency> {
        match self {
            Lat::Merged(h) => Some(vu::SecondLatency::of(h, true)),
            _ => None,
        }
    }
}

impl SecondHists {
    fn add(&mut self, sec: &DdpSecond) -> Result<(), Problem> {
        self.all.add(sec.latency.as_ref())?;
        self.reactive.add(sec.reactive.as_ref())?;
        self.fanout.add(sec.fanout.as_ref())?;
        for (name, l) in &sec.step_latency {
            self.steps.entry(name.clone()).or_default().add(Some(l))?;
        }
        for (name, l) in &sec.page {
            self.page.entry(name.clone()).or_default().add(Some(l))?;
        }
        for (name, l) in &sec.measures {
            self.measures.entry(name.clone()).or_default().add(Some(l))?;
        }
        Ok(())
    }

    fn fill(&self, slot: &mut DdpSecond) {
        slot.latency = self.all.get();
        slot.reactive = self.reactive.get();
        slot.fanout = self.fanout.get();
        slot.step_latency = self.steps.iter().filter_map(|(k, l)| l.get().map(|l| (k.clone(), l))).collect();
        slot.page = self.page.iter().filter_map(|(k, l)| l.get().map(|l| (k.clone(), l))).collect();
        slot.measures = self.measures.iter().filter_map(|(k, l)| l.get().map(|l| (k.clone(), l))).collect();
    }
}

fn add_users(into: &mut Users, x: &Users) {
    into.launched += x.launched;
    into.completed += x.completed;
    into.failed += x.failed;
    into.skipped += x.skipped;
    into.cut += x.cut;
}

/// Steps by name, in the first document's order (names only some segments saw follow).
fn merge_steps(lists: &[&[StepSummary]], duration_s: f64) -> Result<Vec<StepSummary>, Problem> {
    let mut names: Vec<&str> = Vec::new();
    for l in lists {
        for s in l.iter() {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let mine: Vec<&StepSummary> = lists.iter().filter_map(|l| l.iter().find(|s| s.name == name)).collect();
            let (mut lat, mut res, mut upd) = (hist::latency_us(), None::<Histogram<u64>>, None::<Histogram<u64>>);
            let mut out = StepSummary { name: name.to_string(), ..Default::default() };
            for s in &mine {
                out.count += s.count;
                out.errors += s.errors;
                add_map(&mut out.errors_by_class, &s.errors_by_class);
                add_hist(&mut lat, &s.latency_histogram, name)?;
                for (into, text) in [(&mut res, &s.result_histogram), (&mut upd, &s.updated_histogram)] {
                    if let Some(text) = text {
                        add_hist(into.get_or_insert_with(hist::latency_us), text, name)?;
                    }
                }
            }
            out.per_minute = vu::per_minute(out.count - out.errors, duration_s);
            out.latency = vu::sampled(&lat);
            out.latency_histogram = hist::encode(&lat);
            out.to_result = res.as_ref().and_then(vu::sampled);
            out.to_updated = upd.as_ref().and_then(vu::sampled);
            out.result_histogram = res.as_ref().map(hist::encode);
            out.updated_histogram = upd.as_ref().map(hist::encode);
            Ok(out)
        })
        .collect()
}

/// One target's summaries from the segments, each with its segment's duration (its per-minute
/// figures were counted over it).
fn merge_target(mine: &[(&DdpTargetSummary, f64)], duration_s: f64) -> Result<DdpTargetSummary, Problem> {
    let first = mine.first().map(|(t, _)| *t).ok_or("a target no segment measured")?;
    let mut out = DdpTargetSummary {
        url: first.url.clone(),
        weight: first.weight,
        monitor: first.monitor.clone(),
        ..Default::default()
    };
    let (mut subs_done, mut calls_done, mut ready, mut all) = (0u64, 0u64, hist::latency_us(), hist::latency_us());
    for (t, seg_s) in mine {
        add_users(&mut out.users, &t.users);
        out.steps += t.steps;
        out.step_errors += t.step_errors;
        add_map(&mut out.errors_by_class, &t.errors_by_class);
        // The per-minute figures were counts over the segment's own duration: back to counts.
        subs_done += (t.subscriptions_per_min * seg_s / 60.0).round() as u64;
        calls_done += (t.calls_per_min * seg_s / 60.0).round() as u64;
        if let Some(text) = &t.subscribe_histogram {
            add_hist(&mut ready, text, "per_target.subscribe_histogram")?;
        }
        for s in &t.per_step {
            add_hist(&mut all, &s.latency_histogram, &s.name)?;
        }
    }
    out.subscriptions_per_min = vu::per_minute(subs_done, duration_s);
    out.calls_per_min = vu::per_minute(calls_done, duration_s);
    out.per_step = merge_steps(&mine.iter().map(|(t, _)| t.per_step.as_slice()).collect::<Vec<_>>(), duration_s)?;
    let nonempty = |h: &Histogram<u64>| (!h.is_empty()).then(|| latency(h));
    out.subscribe_latency = nonempty(&ready);
    out.subscribe_histogram = (!ready.is_empty()).then(|| hist::encode(&ready));
    out.latency = nonempty(&all);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn merged_generator_cpu_is_all_segments_cpu_over_all_their_work() {
        let seg = |index, cpu_s, per| SegmentInfo {
            index,
            generator: Some(GeneratorResult {
                cpu_s: Some(cpu_s),
                cpu_us_per_request: Some(per),
                ..Default::default()
            }),
            ..Default::default()
        };
        // 1 s for 100,000 requests and 3 s for 100,000: 4 s for 200,000, 20 us each.
        let g = merge_generators(&[seg(1, 1.0, 10.0), seg(2, 3.0, 30.0)]).unwrap();
        assert_eq!(g.cpu_s, Some(4.0));
        assert!((g.cpu_us_per_request.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(g.cpu_us_per_message, None);
        // A segment without it: the merged run has none (a part would be a wrong figure).
        let mut old = seg(3, 1.0, 10.0);
        old.generator.as_mut().unwrap().cpu_s = None;
        let g = merge_generators(&[seg(1, 1.0, 10.0), old]).unwrap();
        assert_eq!((g.cpu_s, g.cpu_us_per_request), (None, None));
    }

    use super::*;

    #[test]
    fn documents_are_found_in_logs_with_and_without_pod_prefixes() {
        let log = format!(
            "starting\n{LOG_BEGIN}\n{{\"a\": 1}}\n{LOG_END}\n[pod/x-1/bolide] {LOG_BEGIN}\n[pod/x-1/bolide] {{\"b\": 2}}\n\
             [pod/x-1/bolide] {LOG_END}\nnoise\n{LOG_BEGIN}\n{{\"cut\""
        );
        let found = documents_in_log(&log);
        assert_eq!(found.len(), 3);
        assert_eq!(found[0].as_deref(), Ok("{\"a\": 1}\n"));
        assert_eq!(found[1].as_deref(), Ok("{\"b\": 2}\n"));
        assert!(found[2].as_ref().unwrap_err().to_string().contains("line 9"), "{:?}", found[2]);
        assert!(documents_in_log("no documents here").is_empty());
    }

    #[test]
    fn measures_merge_exactly_by_name_the_runs_and_the_seconds() {
        let h = |vals: &[u64]| {
            let mut h = hist::latency_us();
            vals.iter().for_each(|v| hist::record(&mut h, *v));
            h
        };
        let seg = |ttft: &[u64], itl: Option<&[u64]>| {
            let mut d = VuDoc::default();
            d.histograms.reactive_us = hist::encode(&h(&[]));
            d.histograms.fanout_us = hist::encode(&h(&[]));
            d.histograms.measures.insert("llm.ttft".into(), hist::encode(&h(ttft)));
            d.summary.measures.insert("llm.ttft".into(), latency(&h(ttft)));
            let mut sec = DdpSecond::default();
            sec.measures.insert("llm.ttft".into(), vu::SecondLatency::of(&h(ttft), true));
            if let Some(itl) = itl {
                d.histograms.measures.insert("llm.itl".into(), hist::encode(&h(itl)));
                d.summary.measures.insert("llm.itl".into(), latency(&h(itl)));
                sec.measures.insert("llm.itl".into(), vu::SecondLatency::of(&h(itl), true));
            }
            d.timeline = vec![sec];
            d
        };
        let (mut a, mut b) = (seg(&[1_000, 2_000], Some(&[50])), seg(&[3_000, 400_000], None));
        // What each segment's protocol declared, kept once in the order declared: both.
        a.summary.throughputs = vec!["llm.output_tokens".into(), "sse.events".into()];
        b.summary.throughputs = vec!["sse.events".into(), "x.more".into()];
        b.summary.per_user.insert("llm.tpot".into(), "Tokens/s per user".into());
        let m = merge_ddp(&[(&a, 0, 0.0), (&b, 0, 0.0)]).unwrap();
        // Four first tokens from both segments: the histograms added, not the percentiles averaged.
        let all = h(&[1_000, 2_000, 3_000, 400_000]);
        assert_eq!(m.summary.measures["llm.ttft"], latency(&all));
        assert_eq!(hist::decode(&m.histograms.measures["llm.ttft"]).unwrap(), all);
        assert_eq!(hist::decode(&m.histograms.measures["llm.ttft"]).unwrap().len(), 4);
        assert_eq!(m.timeline[0].measures["llm.ttft"], vu::SecondLatency::of(&all, true));
        // A measure only one segment took is that segment's.
        assert_eq!(m.summary.measures["llm.itl"], latency(&h(&[50])));
        assert_eq!(m.timeline[0].measures["llm.itl"].count, 1);
        // Through JSON and back, the merged document keeps them.
        assert_eq!(m.summary.throughputs, ["llm.output_tokens", "sse.events", "x.more"]);
        assert_eq!(m.summary.per_user["llm.tpot"], "Tokens/s per user");
        let back: VuDoc = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.summary.measures, m.summary.measures);
        assert_eq!((&back.summary.throughputs, &back.summary.per_user), (&m.summary.throughputs, &m.summary.per_user));
        assert_eq!(back.histograms.measures, m.histograms.measures);
    }

    #[test]
    fn plan_differences_name_the_setting() {
        let mut a = ResultDoc::default();
        a.settings.segment = Some(Segment { index: 1, count: 2 });
        a.settings.threads = 2;
        let mut b = a.clone();
        b.settings.segment = Some(Segment { index: 2, count: 2 });
        b.settings.threads = 8;
        let (da, db) = (Doc::Http(Box::new(a)), Doc::Http(Box::new(b.clone())));
        assert!(plan_differences(&da, &db).is_empty(), "segment and threads are each instance's own");
        b.settings.rate_per_s = Some(100.0);
        let d = plan_differences(&da, &Doc::Http(Box::new(b)));
        assert_eq!(d, ["settings.rate_per_s is null in one and 100.0 in the other"]);
    }
}

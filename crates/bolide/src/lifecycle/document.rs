//! Result documents assembled from a finished run: the plan's settings, the engine's output and
//! the host's facts, in the versioned form every report and `compare` reads.

use crate::engine::http::RunOutput;
use crate::plan::{DdpPlan, HttpPlan};
use crate::stats::{hist, result, summary};

/// Assembles the result document of a finished HTTP run.
pub fn http(plan: &HttpPlan, o: &RunOutput, command_line: Vec<String>) -> result::ResultDoc {
    let duration_s = o.duration.as_secs_f64();
    let urls: Vec<String> = plan.targets.iter().map(|t| t.url.clone()).collect();
    let (summary, all) = summary::overall(&o.merged, &o.timeline, duration_s, o.scheduled_sends);
    result::ResultDoc {
        format: result::FORMAT.to_string(),
        version: result::VERSION,
        tool: result::Tool { name: "bolide".into(), version: env!("CARGO_PKG_VERSION").into() },
        kind: "http".into(),
        command_line,
        started_at: humantime::format_rfc3339_millis(o.started_at).to_string(),
        interrupted: o.interrupted,
        host: host(),
        settings: plan.settings.clone(),
        per_target: summary::per_target(&urls, &o.merged, duration_s),
        targets: urls,
        summary,
        timeline: o.timeline.clone(),
        histograms: result::Histograms { latency_us: hist::encode(&all.latency_us) },
        monitor: Vec::new(),
        scrape: Vec::new(),
        outputs: Vec::new(),
        generator: None,
        label: None,
        merged: None,
        thresholds: Vec::new(),
    }
}

/// A DDP run's settings as its document records them (known before it starts).
pub fn settings(plan: &DdpPlan) -> crate::stats::vu::DdpRunSettings {
    use crate::scenario::PhaseKind;
    use crate::stats::vu::*;
    let config = &plan.scenario.config;
    let phases = config
        .phases
        .iter()
        .map(|p| {
            let (rate, ramp, count, pause, users) = match p.kind {
                PhaseKind::Rate { per_s, ramp_to } => (Some(per_s), ramp_to, None, false, None),
                PhaseKind::Count(n) => (None, None, Some(n), false, None),
                PhaseKind::Pause => (None, None, None, true, None),
                PhaseKind::Users(n) => (None, None, None, false, Some(n)),
            };
            PhaseSettings {
                name: p.name.clone(),
                duration_s: p.duration.as_secs_f64(),
                arrival_rate: rate,
                ramp_to: ramp,
                arrival_count: count,
                pause,
                users,
            }
        })
        .collect();
    DdpRunSettings {
        scenario: plan.source.clone(),
        target: config.targets.first().map(|t| crate::redact::text(&t.url)).unwrap_or_default(),
        targets: match config.targets.len() {
            1 => Vec::new(),
            _ => config.targets.iter().map(|t| crate::redact::text(&t.shown())).collect(),
        },
        transport: match plan.client.transport {
            crate::proto::ddp::Transport::WebSocket => "websocket".into(),
            crate::proto::ddp::Transport::SockJs => "sockjs".into(),
        },
        compression: plan.client.compression,
        cache: plan.client.cache,
        threads: plan.threads,
        phases,
        max_vusers: config.max_vusers,
        step_timeout_s: config.ddp.step_timeout.as_secs_f64(),
        user_timeout_s: config.ddp.user_timeout.as_secs_f64(),
        segment: plan.spread.segment,
    }
}

/// Assembles the result document of a DDP run (the lifecycle adds the thresholds' verdicts).
pub fn ddp(plan: &DdpPlan, o: &crate::engine::vu::VuOutput, command_line: Vec<String>) -> crate::stats::vu::DdpDoc {
    use crate::stats::vu::*;
    let duration_s = o.duration.as_secs_f64();
    let rec = &o.rec;
    let (steps_total, step_errors) = rec.step_totals();
    let errors_by_class = rec.errors_by_class();
    let error_rate_pct = if steps_total > 0 { step_errors as f64 * 100.0 / steps_total as f64 } else { 0.0 };
    let total_time_s = match (rec.first_arrival_s, rec.last_finish_s) {
        (Some(a), Some(b)) if b >= a => b - a,
        _ => 0.0,
    };
    let nonempty = |h: &hdrhistogram::Histogram<u64>| (!h.is_empty()).then(|| summary::latency(h));
    DdpDoc {
        format: result::FORMAT.to_string(),
        version: result::VERSION,
        tool: result::Tool { name: "bolide".into(), version: env!("CARGO_PKG_VERSION").into() },
        kind: "ddp".into(),
        command_line,
        started_at: humantime::format_rfc3339_millis(o.started_at).to_string(),
        interrupted: o.interrupted,
        host: host(),
        settings: settings(plan),
        summary: DdpSummary {
            users: Users::of(rec),
            total_time_s,
            duration_s,
            steps: steps_total,
            step_errors,
            error_rate_pct,
            errors_by_class,
            messages_in: o.traffic.messages_in,
            messages_out: o.traffic.messages_out,
            bytes_in: o.traffic.bytes_in,
            bytes_out: o.traffic.bytes_out,
            pings_answered: o.traffic.pings_answered,
            pings_sent: o.traffic.pings_sent,
            protocol_errors: o.traffic.protocol_errors,
            reactive: nonempty(&rec.reactive_us),
            fanout: nonempty(&o.traffic.fanout_us),
        },
        steps: step_summaries(rec, duration_s),
        timeline: o.timeline.clone(),
        histograms: DdpHistograms {
            reactive_us: hist::encode(&rec.reactive_us),
            fanout_us: hist::encode(&o.traffic.fanout_us),
        },
        per_target: match plan.targets.len() {
            1 => Vec::new(),
            _ => {
                let (subs, calls) = crate::engine::vu::subscribe_and_call_steps(&plan.scenario);
                plan.targets
                    .iter()
                    .zip(&o.per_target)
                    .map(|(t, r)| target_summary(&crate::redact::text(&t.url), t.weight, r, duration_s, &subs, &calls))
                    .collect()
            }
        },
        monitor: Vec::new(),
        scrape: Vec::new(),
        outputs: Vec::new(),
        generator: None,
        label: None,
        merged: None,
        thresholds: Vec::new(),
    }
}

/// Facts about this machine for the result document.
pub fn host() -> result::Host {
    result::Host {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
    }
}

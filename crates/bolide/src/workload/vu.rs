//! The virtual-user workload's part: `bolide run`'s plan (users walking a scenario's flows over
//! DDP) run by the VU engine, its seconds and its result document.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::vu::{VuOutput, VuProgress};
use crate::plan::{Common, VuPlan};
use crate::report::progress::{self, Bar};
use crate::stats::doc::Doc;
use crate::stats::envelope::Enveloped;
use crate::stats::vu::*;
use crate::stats::{hist, summary};

impl From<VuDoc> for Doc {
    fn from(d: VuDoc) -> Doc {
        Doc::Ddp(Box::new(d))
    }
}

impl super::Describe for VuPlan {
    fn common(&self) -> &Common {
        &self.common
    }

    fn common_mut(&mut self) -> &mut Common {
        &mut self.common
    }

    fn slug(&self) -> String {
        crate::stats::doc::scenario_name(&self.source)
    }

    fn planned(&self) -> Option<Duration> {
        Some(self.arrivals_length())
    }

    /// A built-in's phase at this arrival rate (as `--arrival-rate` sets it); a scenario file's
    /// arrival-rate phases scaled so that the first runs at it (its ramps and other phases in
    /// proportion).
    fn at_rate(&mut self, per_s: f64) -> Result<(), String> {
        let per_s = crate::scenario::check_rate(per_s).map_err(|why| format!("--arrival-rate {why}"))?;
        let phases = &mut self.scenario.config.phases;
        if crate::scenario::builtin::NAMES.contains(&self.source.as_str()) {
            for p in phases.iter_mut() {
                p.kind = crate::scenario::PhaseKind::Rate { per_s, ramp_to: None };
            }
        } else {
            scale_rates(phases, per_s)?;
        }
        // As planning checks it: at this rate every segment still has users of its own.
        if let Some(seg) = self.common.spread.segment {
            let total = crate::scenario::arrivals::Schedule::new(&self.scenario.config.phases).total();
            if seg.arrivals(total) == 0 {
                return Err(format!(
                    "--segment {seg}: at {per_s} users per second the plan has {total} user(s), fewer than {} \
                     segments; segment {} would have none",
                    seg.count, seg.index
                ));
            }
        }
        Ok(())
    }
}

/// Scales a scenario's arrival-rate phases so that the first one runs at `per_s`.
fn scale_rates(phases: &mut [crate::scenario::Phase], per_s: f64) -> Result<(), String> {
    use crate::scenario::PhaseKind;
    let first = phases.iter().find_map(|p| match p.kind {
        PhaseKind::Rate { per_s, .. } if per_s > 0.0 => Some(per_s),
        _ => None,
    });
    let Some(first) = first else {
        return Err("capacity needs a scenario with an arrivalRate phase (its levels are arrival rates)".into());
    };
    let f = per_s / first;
    for p in phases.iter_mut() {
        if let PhaseKind::Rate { per_s, ramp_to } = &mut p.kind {
            *per_s *= f;
            *ramp_to = ramp_to.map(|r| r * f);
        }
    }
    Ok(())
}

impl super::Part for VuPlan {
    type Tick = VuProgress;
    type Second = DdpSecond;
    type Output = VuOutput;
    type Document = VuDoc;

    fn urls(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.url.clone()).collect()
    }

    fn header(&self) -> String {
        format!(
            "{}, arrivals over {}",
            crate::report::vu::header(&settings(self)),
            progress::eta(self.arrivals_length())
        )
    }

    fn bar(&self, live: bool, stage: &str) -> Bar {
        progress::ddp_bar(live, stage, self.arrivals_length())
    }

    /// Nothing is measured against a target nobody answers at: every one must answer.
    fn reachable(&self, io: &mut crate::console::Io) -> bool {
        let mut all = true;
        for t in &self.targets {
            let addrs = &t.endpoint.addrs;
            let up = addrs.iter().any(|a| std::net::TcpStream::connect_timeout(a, Duration::from_secs(5)).is_ok());
            if !up {
                let url = crate::redact::text(&t.url);
                let _ = writeln!(io.err, "error: nothing answers at {url} ({addrs:?}); is the server running?");
                all = false;
            }
        }
        all
    }

    fn run(&self, cancel: &CancellationToken, each: &mut dyn FnMut(&VuProgress)) -> Result<VuOutput, String> {
        crate::engine::vu::run(self, cancel, each)
    }

    fn show(bar: &Bar, tick: &VuProgress) {
        progress::ddp_update(bar, tick)
    }

    fn line(tick: &VuProgress) -> String {
        progress::ddp_line(tick)
    }

    fn second(tick: &VuProgress) -> &DdpSecond {
        &tick.second
    }

    fn export(e: &mut crate::export::Exporter, second: &DdpSecond) {
        e.ddp_second(second)
    }

    fn export_rest(e: &mut crate::export::Exporter, out: &VuOutput) {
        e.rest_ddp(&out.timeline)
    }

    fn live(timeline: Vec<DdpSecond>) -> VuDoc {
        VuDoc { timeline, ..Default::default() }
    }

    fn document(&self, o: &VuOutput, command_line: Vec<String>) -> VuDoc {
        let mut doc = document(self, o);
        doc.stamp("ddp", command_line, o.started_at, o.interrupted);
        tie_monitors(self, &mut doc);
        doc
    }

    fn strip_for_document(&self, doc: &mut VuDoc) {
        // The seconds' histograms were for the receiver; a segment's document keeps them for merge.
        if self.common.spread.segment.is_none() {
            for s in &mut doc.timeline {
                let all = s.latency.iter_mut().chain(s.step_latency.values_mut());
                let all = all.chain(s.reactive.iter_mut()).chain(s.fanout.iter_mut());
                for l in all.chain(s.measures.values_mut()) {
                    l.histogram = None;
                }
            }
        }
    }

    fn work(doc: &VuDoc) -> (u64, bool) {
        (doc.summary.messages_in + doc.summary.messages_out, true)
    }

    fn cpu_ns(out: &VuOutput) -> u64 {
        out.cpu_ns
    }

    fn first_errors(out: &VuOutput) -> Vec<(String, String)> {
        out.rec.first_errors.clone()
    }

    fn extra_files(&self, _out: &VuOutput) -> Result<Option<(&'static str, PathBuf)>, String> {
        Ok(None)
    }

    fn faults(&self) -> crate::fault::Faults {
        crate::fault::Faults::new(self.faults.clone(), self.client.drops.clone())
    }

    fn record_faults(doc: &mut VuDoc, out: &VuOutput, mut faults: Vec<crate::fault::FaultRecord>) {
        let seconds: Vec<(u32, u64, u64, u64)> =
            doc.timeline.iter().map(|s| (s.t, s.counts.reconnects, s.counts.resent, s.counts.audit_agreed)).collect();
        // The users' times, moved onto the faults' clock (it started first, the users' after a
        // browser's launch, say).
        let shift = faults.first().and_then(|f| f.clock).and_then(|c| out.started_at.duration_since(c).ok());
        let shift = shift.map_or(0.0, |d| d.as_secs_f64());
        let reconnections: Vec<(f64, f64)> =
            out.rec.reconnections.iter().map(|(closed, back)| (closed + shift, back + shift)).collect();
        crate::stats::faults::follow(&mut faults, &seconds, &reconnections);
        doc.faults = faults;
    }
}

/// Ties each target of a run over several to the watched process on its port (`--monitor
/// NAME=:PORT`), when the target is on this machine, so that its CPU and RAM show beside its load.
fn tie_monitors(plan: &VuPlan, doc: &mut VuDoc) {
    for (t, summary) in plan.targets.iter().zip(&mut doc.per_target) {
        let local = t.endpoint.addrs.iter().any(|a| a.ip().is_loopback());
        let tied = plan
            .common
            .server
            .monitors
            .iter()
            .find(|(_, spec)| local && matches!(spec, crate::monitor::Spec::Port(p) if *p == t.endpoint.port));
        summary.monitor = tied.map(|(name, _)| name.clone());
    }
}

/// A DDP run's settings as its document records them (known before it starts).
pub fn settings(plan: &VuPlan) -> DdpRunSettings {
    use crate::scenario::PhaseKind;
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
                burstiness: p.burstiness,
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
        transport: protocols(plan),
        // None is offered where every flow speaks plain HTTP.
        compression: plan.client.compression && !plan.scenario.flows.iter().all(|f| f.engine.plain_http()),
        cache: plan.client.cache,
        threads: plan.threads,
        phases,
        max_vusers: config.max_vusers,
        step_timeout_s: config.step_timeout.as_secs_f64(),
        user_timeout_s: config.user_timeout.as_secs_f64(),
        segment: plan.common.spread.segment,
    }
}

/// How the run's users reach their server: DDP's transport, and the other protocols' (`websocket`,
/// `socketio polling+websocket`, another engine's name, joined by ` + ` in a run that mixes them).
fn protocols(plan: &VuPlan) -> String {
    use crate::scenario::settings::SioTransport;
    use crate::scenario::Engine;
    let s = &plan.scenario;
    let mut parts = Vec::new();
    if s.has_engine(Engine::Ddp) || s.has_engine(Engine::Browser) {
        parts.push(plan.client.transport.name().to_string());
    }
    if s.has_engine(Engine::SocketIo) {
        let t = &s.config.socketio.transports;
        parts.push(match (t.first(), t.contains(&SioTransport::WebSocket)) {
            (Some(SioTransport::Polling), true) => "socketio polling+websocket".into(),
            (Some(SioTransport::Polling), false) => "socketio polling".into(),
            _ => "socketio websocket".into(),
        });
    }
    // Any other protocol: its engine's name (`graphql-ws`, ...), once, in the flows' order.
    for f in &s.flows {
        let name = f.engine.name().to_string();
        if !matches!(f.engine, Engine::Ddp | Engine::Browser | Engine::SocketIo) && !parts.contains(&name) {
            parts.push(name);
        }
    }
    parts.join(" + ")
}

/// The workload's part of a DDP run's document (the envelope is stamped and filled by others).
fn document(plan: &VuPlan, o: &VuOutput) -> VuDoc {
    let duration_s = o.duration.as_secs_f64();
    let rec = &o.rec;
    let (steps_total, step_errors) = rec.step_totals();
    let errors_by_class = rec.errors_by_class();
    let error_rate_pct = if steps_total > 0 { step_errors as f64 * 100.0 / steps_total as f64 } else { 0.0 };
    // A run stopped by a signal ends at the stop, whoever was still walking (and whoever had
    // finished before: an interrupted run is not 0.0 s long).
    let total_time_s = match (rec.first_arrival_s, rec.last_finish_s) {
        (Some(a), b) if o.interrupted || b.is_none() => (b.unwrap_or(0.0).max(duration_s) - a).max(0.0),
        (Some(a), Some(b)) if b >= a => b - a,
        _ => 0.0,
    };
    let nonempty = |h: &hdrhistogram::Histogram<u64>| (!h.is_empty()).then(|| summary::latency(h));
    VuDoc {
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
            events: o.traffic.events.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            measures: o.traffic.measures.iter().filter_map(|(k, h)| Some((k.to_string(), nonempty(h)?))).collect(),
            throughputs: o.traffic.declared.throughputs.iter().map(|k| k.to_string()).collect(),
            per_user: o.traffic.declared.per_user.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        },
        steps: step_summaries(rec, duration_s),
        timeline: o.timeline.clone(),
        histograms: DdpHistograms {
            reactive_us: hist::encode(&rec.reactive_us),
            fanout_us: hist::encode(&o.traffic.fanout_us),
            measures: o.traffic.measures.iter().map(|(k, h)| (k.to_string(), hist::encode(h))).collect(),
        },
        per_target: match plan.targets.len() {
            1 => Vec::new(),
            _ => {
                let (subs, calls) = plan.scenario.subscribe_and_call_steps();
                plan.targets
                    .iter()
                    .zip(&o.per_target)
                    .map(|(t, r)| target_summary(&crate::redact::text(&t.url), t.weight, r, duration_s, &subs, &calls))
                    .collect()
            }
        },
        audit: plan.scenario.audits().then(|| {
            let mut a = crate::stats::audit::AuditSection::of(&rec.audit, o.interrupted);
            let (apart, at) = if plan.truth.is_empty() { (false, &plan.targets) } else { (true, &plan.truth) };
            let urls = at.iter().map(|t| crate::redact::text(&t.url)).collect();
            a.truth = Some(crate::stats::audit::TruthPath { urls, apart });
            let violation = |k: &&str| k.starts_with(crate::realtime::ddp::wire::VIOLATION);
            a.violations = o.traffic.events.iter().filter(|(k, _)| violation(k)).map(|(_, n)| n).sum();
            a.judge();
            a
        }),
        browser: o.browser.as_ref().map(|run| rec.browser.section(&protocol_methods(plan, rec), Some(run))),
        ..Default::default()
    }
}

/// The protocol users' latency of each method they call (their call steps to it together), to
/// set beside the same method called from browser pages.
fn protocol_methods(
    plan: &VuPlan,
    rec: &crate::stats::vu::VuRecorder,
) -> std::collections::BTreeMap<String, hdrhistogram::Histogram<u64>> {
    use crate::scenario::StepKind;
    fn walk(steps: &[crate::scenario::Step], out: &mut Vec<(String, String)>) {
        for s in steps {
            match &s.kind {
                StepKind::Call(c) => out.push((c.method.clone(), s.name.clone())),
                StepKind::Login(_) => out.push(("login".into(), s.name.clone())),
                StepKind::Loop(l) => walk(&l.steps, out),
                _ => {}
            }
        }
    }
    let mut calls = Vec::new();
    for f in plan.scenario.flows.iter().filter(|f| !f.is_browser()) {
        walk(&f.steps, &mut calls);
    }
    calls.sort();
    calls.dedup();
    let mut out = std::collections::BTreeMap::new();
    for (method, step) in calls {
        if let Some(i) = rec.names.iter().position(|n| *n == step) {
            out.entry(method).or_insert_with(hist::latency_us).add(&rec.steps[i].latency_us).expect("same shape");
        }
    }
    out
}

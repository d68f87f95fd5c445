//! The virtual-user engine: arrivals follow the scenario's phases (open model; the schedule is
//! split across worker threads in interleaved slices), each arrival starts a user on its worker's
//! single-threaded runtime, and the user walks its flow step by step, recording each step. A
//! closed `users` phase's user walks its flow again and again until the phase ends.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use rand::Rng;
use serde_json::Value;
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

use super::timer::{self, Timer};
use super::user::{Pages, Shared, Vu, Worker, FAILED_ITERATION_PAUSE};
use crate::plan::VuPlan;
use crate::proto::http::tls::Connector;
use crate::proto::ws::Traffic;
use crate::realtime::ddp::wire::Conn;
use crate::realtime::graphql::wire::GqlConn;
use crate::realtime::socketio::session::SioSession;
use crate::realtime::Steps;
use crate::scenario::arrivals::Schedule;
use crate::scenario::template::Vars;
use crate::scenario::{Engine, Flow, StepKind};
use crate::session::Session;

use crate::stats::vu::{DdpSecond, SecondLatencies, TickLatency, VuRecorder, VuSecond};

/// Once a second while users run.
#[derive(Debug, Clone, Default)]
pub struct VuProgress {
    pub elapsed: Duration,
    pub planned: Duration,
    pub alive: u64,
    pub launched: u64,
    pub completed: u64,
    pub failed: u64,
    pub step_errors: u64,
    /// The last whole second, as the result document's timeline will have it.
    pub second: crate::stats::vu::DdpSecond,
}

/// What a DDP run measured.
#[derive(Debug)]
pub struct VuOutput {
    /// Every user's steps, all targets together.
    pub rec: VuRecorder,
    /// The same, per target (in the plan's order).
    pub per_target: Vec<VuRecorder>,
    pub traffic: Traffic,
    /// Every whole second: users alive at its end, its counts and latencies.
    pub timeline: Vec<DdpSecond>,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub interrupted: bool,
    /// The load threads' CPU time over the run, nanoseconds (each thread's own clock).
    pub cpu_ns: u64,
    /// The browser of a run with browser flows: what ran, and what it cost.
    pub browser: Option<crate::stats::browser::BrowserRun>,
}

/// A worker's part of one second: its counts and its latencies (sparse, as handed over; made
/// into histograms once every worker's part is in).
#[derive(Default)]
struct Tick {
    counts: VuSecond,
    latencies: Vec<TickLatency>,
}

impl super::coordinator::Part for Tick {
    fn merge(&mut self, other: Tick) {
        self.counts.merge(&other.counts);
        self.latencies.extend(other.latencies);
    }
}

/// A worker's end: its recorders (one per target), its traffic, its thread's CPU time (ns).
struct Done {
    recs: Vec<VuRecorder>,
    traffic: Box<Traffic>,
    cpu_ns: u64,
}

type Msg = super::coordinator::Report<Tick, Done>;

/// Runs the plan; `progress` is called about once a second.
pub fn run(
    plan: &VuPlan,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&VuProgress),
) -> Result<VuOutput, String> {
    // Browser flows' Chromium, started before the clock (and stopped, whatever happens, when it
    // is dropped).
    let browser = match plan.scenario.has_browsers() {
        true => Some(crate::browser::Browser::launch(&plan.scenario.config.browser, plan.common.server.interval)?),
        false => None,
    };
    let pages = Arc::new(Pages::default());
    let endpoint = browser.as_ref().map(|b| (b.port, b.path.clone()));
    let schedule = Schedule::new(&plan.scenario.config.phases);
    // With a segment, this instance's users are every N-th arrival; they keep their global index.
    let seg = plan.common.spread.segment.unwrap_or(crate::segment::Segment { index: 1, count: 1 });
    let threads = plan.threads.clamp(1, seg.arrivals(schedule.total()).max(1) as usize);
    let names = plan.scenario.recorded_steps();
    let alive = Arc::new(AtomicU64::new(0));
    let started_at = SystemTime::now();
    let start = Instant::now();
    // The workers stop at the user's stop, or when one of them could not be started.
    let stop = cancel.child_token();
    let audit = plan.scenario.audits().then(|| Arc::new(super::audit::Shared::default()));
    // ddp-connect's bursts: the closed users meet at a barrier of their own before each walk.
    let users = seg.arrivals(schedule.total());
    let bursts = plan.scenario.config.ddp.bursts.then(|| Arc::new(super::audit::Shared::expecting(users)));
    let (handles, rx) = super::coordinator::spawn::<Tick, Done>("bolide-vu", threads, &stop, |w, tx| {
        let plan = plan.clone();
        let (cancel, alive, schedule, names) = (stop.clone(), Arc::clone(&alive), schedule.clone(), names.clone());
        let shared = Shared {
            audit: audit.clone(),
            bursts: bursts.clone(),
            browser: endpoint.clone(),
            pages: Arc::clone(&pages),
        };
        Box::new(move || worker(w, threads, plan, schedule, names, start, alive, shared, cancel, tx))
    })?;
    let mut rec = VuRecorder::new(&names);
    let mut per_target: Vec<VuRecorder> = plan.targets.iter().map(|_| VuRecorder::new(&names)).collect();
    let mut traffic = Traffic::default();
    let mut seconds = super::coordinator::Seconds::<Tick>::new(threads);
    let mut timeline: Vec<DdpSecond> = Vec::new();
    let step_names: Vec<String> = names.iter().map(|(n, _)| n.clone()).collect();
    // A segment keeps each second's histograms for merge; remote write sends them.
    let keep_histograms = plan.common.spread.segment.is_some() || !plan.common.exports.is_empty();
    let second = |t: u32, part: Tick| {
        let mut latencies = SecondLatencies::default();
        for l in &part.latencies {
            latencies.add(l);
        }
        let users_alive = alive.load(Ordering::Relaxed);
        let mut sec = DdpSecond { t, users_alive, counts: part.counts, ..DdpSecond::default() };
        latencies.fill(&step_names, keep_histograms, &mut sec);
        sec
    };
    let mut totals = VuProgress { planned: schedule.length(), ..VuProgress::default() };
    let mut cpu_ns = 0u64;
    for msg in rx {
        match msg {
            Msg::Tick { t, part } => {
                let c = &part.counts;
                totals.launched += c.launched;
                totals.completed += c.completed;
                totals.failed += c.failed;
                totals.step_errors += c.step_errors;
                seconds.add(t, part, |t, whole| {
                    let sec = second(t, whole);
                    totals.alive = sec.users_alive;
                    totals.elapsed = start.elapsed();
                    totals.second = sec.clone();
                    timeline.push(sec);
                    progress(&totals);
                });
            }
            Msg::Done(Done { recs, traffic: t, cpu_ns: cpu }) => {
                cpu_ns += cpu;
                for (i, r) in recs.iter().enumerate() {
                    rec.merge(r);
                    if let Some(p) = per_target.get_mut(i) {
                        p.merge(r);
                    }
                }
                traffic.merge(&t);
            }
        }
    }
    if let Some(why) = crate::engine::join_workers(handles) {
        return Err(why);
    }
    let browser = browser.map(|b| b.finish(pages.peak.load(Ordering::Relaxed)));
    // Seconds not every worker reported (a run cut short): kept as they are.
    for (t, part) in seconds.rest() {
        timeline.push(second(t, part));
    }
    Ok(VuOutput {
        rec,
        per_target,
        traffic,
        timeline,
        started_at,
        duration: start.elapsed(),
        interrupted: cancel.is_cancelled(),
        cpu_ns,
        browser,
    })
}

/// The flows' smooth weighted round-robin cycle, when their weights add up to at most
/// [`MAX_FLOW_CYCLE`] (else empty: flows are picked at random in proportion).
fn flow_cycle(flows: &[Flow]) -> Vec<usize> {
    let total: u64 = flows.iter().map(|f| u64::from(f.weight)).sum();
    if total == 0 || total > MAX_FLOW_CYCLE {
        return Vec::new();
    }
    crate::scenario::target_cycle(&flows.iter().map(|f| f.weight).collect::<Vec<_>>())
}

/// The largest sum of flow weights laid out as a cycle.
const MAX_FLOW_CYCLE: u64 = 10_000;

#[allow(clippy::too_many_arguments)]
fn worker(
    index: usize,
    threads: usize,
    plan: VuPlan,
    schedule: Schedule,
    names: Vec<(String, bool)>,
    start: Instant,
    alive: Arc<AtomicU64>,
    Shared { audit, bursts, browser, pages }: Shared,
    cancel: CancellationToken,
    tx: mpsc::Sender<Msg>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(_) => return,
    };
    let tls = plan.targets.iter().any(|t| t.endpoint.tls).then(|| Connector::new(plan.insecure));
    let w = Rc::new(Worker {
        recs: plan.targets.iter().map(|_| RefCell::new(VuRecorder::new(&names))).collect(),
        traffic: Rc::new(RefCell::new(Traffic::default())),
        tls,
        tls_h2: std::cell::OnceCell::new(),
        start,
        phases: schedule.length(),
        alive,
        closing: RefCell::new(Vec::new()),
        audit,
        audit_local: super::audit::Local::new(&plan),
        bursts,
        browser,
        pages,
        flow_cycle: flow_cycle(&plan.scenario.flows),
        plan,
    });
    let user_timeout = w.plan.scenario.config.user_timeout;
    let local = LocalSet::new();
    let mut ticks = 0u32;
    let mut last_traffic = (0u64, 0u64, 0u64, 0u64);
    let mut last_events: std::collections::BTreeMap<&'static str, u64> = Default::default();
    let mut tick = |w: &Worker, ticks: &mut u32| {
        let mut second = VuSecond::default();
        let mut latency = TickLatency::default();
        for r in &w.recs {
            let mut r = r.borrow_mut();
            second.merge(&std::mem::take(&mut r.second));
            r.drain_second(&mut latency);
        }
        let mut t = w.traffic.borrow_mut();
        if let Some(h) = &mut t.fanout_second_us {
            latency.fanout = crate::stats::hist::drain(h);
        }
        for (name, h) in &mut t.measures_second {
            let pairs = crate::stats::hist::drain(h);
            if !pairs.is_empty() {
                latency.measures.push((*name, pairs));
            }
        }
        second.messages_in = t.messages_in - last_traffic.0;
        second.messages_out = t.messages_out - last_traffic.1;
        second.bytes_in = t.bytes_in - last_traffic.2;
        second.bytes_out = t.bytes_out - last_traffic.3;
        last_traffic = (t.messages_in, t.messages_out, t.bytes_in, t.bytes_out);
        for (name, n) in &t.events {
            let before = last_events.insert(*name, *n).unwrap_or(0);
            if *n > before {
                second.events.insert(name.to_string(), n - before);
            }
        }
        let _ = tx.send(Msg::Tick { t: *ticks, part: Tick { counts: second, latencies: vec![latency] } });
        *ticks += 1;
    };
    // Arrivals keep to their schedule with the worker's high-resolution timer.
    let timer = {
        let _in_runtime = rt.enter();
        Timer::new().ok()
    };
    rt.block_on(local.run_until(async {
        if let Some(t) = &timer {
            tokio::task::spawn_local(t.clone().drive());
        }
        let arrivals = async {
            let mut users = Vec::new();
            // Worker `index` of `threads` in segment I of N: arrivals I-1 + N (index + threads j).
            let seg = w.plan.common.spread.segment.unwrap_or(crate::segment::Segment { index: 1, count: 1 });
            let mut k = u64::from(seg.index - 1) + u64::from(seg.count) * index as u64;
            // maxVusers is the whole plan's; each segment holds its share of it.
            let max = w.plan.scenario.config.max_vusers.map(|m| seg.arrivals(m).max(1));
            while let Some(due) = schedule.arrival(k) {
                timer::sleep_until(timer.as_ref(), start + due).await;
                let target = w.plan.target_of(k);
                if max.is_some_and(|m| w.alive.load(Ordering::SeqCst) >= m) {
                    w.recs[target].borrow_mut().skipped += 1;
                    // A user the bursts expected that never comes.
                    drop(w.bursts.as_deref().map(super::audit::Shared::expected));
                } else {
                    w.alive.fetch_add(1, Ordering::SeqCst);
                    // A closed phase's user walks its flow again until the phase ends.
                    let until = schedule.until(k).map(|u| start + u);
                    let every = schedule.total();
                    let w2 = Rc::clone(&w);
                    users.push(tokio::task::spawn_local(async move {
                        // In bursts, each walk starts once every closed user is at the barrier.
                        let _walking = w2.bursts.as_deref().map(super::audit::Shared::expected);
                        let bursts = w2.bursts.as_deref().filter(|_| until.is_some());
                        for round in 0u64.. {
                            if let (Some(b), Some(until)) = (bursts, until) {
                                match b.gather(until).await {
                                    Ok(seat) => b.leave(seat, until).await,
                                    Err(_) => break,
                                }
                                if Instant::now() >= until {
                                    break;
                                }
                            }
                            // A looping user's next connection goes to the next server in the
                            // cycle, as a reconnecting client behind DNS round-robin would: the
                            // iterations spread over the targets even when the users are fewer.
                            let target = if round == 0 { target } else { w2.plan.target_of(k + round * every) };
                            let ok = iteration(&w2, k, target, until, user_timeout).await;
                            let Some(until) = until.filter(|u| Instant::now() < *u) else { break };
                            if !ok {
                                // A server that refuses at once is not hammered in a tight loop.
                                let pause = FAILED_ITERATION_PAUSE.min(until.saturating_duration_since(Instant::now()));
                                tokio::time::sleep(pause).await;
                            }
                        }
                        w2.alive.fetch_sub(1, Ordering::SeqCst);
                    }));
                }
                k += u64::from(seg.count) * threads as u64;
            }
            for u in users {
                let _ = u.await;
            }
        };
        let ticker = async {
            loop {
                let at = start + Duration::from_secs(u64::from(ticks) + 1);
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                tick(&w, &mut ticks);
            }
        };
        tokio::select! {
            _ = arrivals => {}
            _ = ticker => {}
            _ = cancel.cancelled() => {}
        }
    }));
    // At the run's end, connections closing finish their handshakes (each within a second; all
    // within two, so that a server that stopped reading holds nothing up). A stopped run (Ctrl-C)
    // waits for none: its users still running are dropped with the LocalSet, connections closed.
    let closing = std::mem::take(&mut *w.closing.borrow_mut());
    if !cancel.is_cancelled() {
        rt.block_on(local.run_until(async {
            let all = async {
                for task in closing {
                    let _ = task.await;
                }
            };
            let _ = tokio::time::timeout(2 * crate::proto::ws::CLOSING_HANDSHAKE, all).await;
        }));
    }
    drop(local);
    tick(&w, &mut ticks);
    let mut recs: Vec<VuRecorder> = w.recs.iter().map(|r| r.borrow().clone()).collect();
    if let Some(r) = recs.first_mut() {
        let t = w.audit_local.traffic.borrow();
        r.audit.truth_reads += w.audit_local.reads.get();
        r.audit.messages_in += t.messages_in;
        r.audit.bytes_in += t.bytes_in;
    }
    let traffic = Box::new(std::mem::take(&mut *w.traffic.borrow_mut()));
    let cpu_ns = crate::engine::thread_cpu_ns();
    let _ = tx.send(Msg::Done(Done { recs, traffic, cpu_ns }));
}

/// One walk of the flow by user `k` (a user's only one, or one of a looping user's until the
/// closed phase ends at `until`), counted as a user launched and then completed, failed or cut at
/// the user timeout. True when it completed. The flow's engine says which session its user has:
/// the one place a protocol is chosen.
async fn iteration(w: &Worker, k: u64, target: usize, until: Option<Instant>, user_timeout: Duration) -> bool {
    {
        let mut r = w.recs[target].borrow_mut();
        r.launched += 1;
        r.second.launched += 1;
        let at = w.start.elapsed().as_secs_f64();
        r.first_arrival_s = Some(r.first_arrival_s.map_or(at, |f| f.min(at)));
    }
    // Whether the walk still has a checkpoint ahead (a walk cut off there did not reach it).
    let ahead = std::cell::Cell::new(false);
    let flow = pick_flow(w, k);
    let walk: Pin<Box<dyn Future<Output = bool> + '_>> = match flow.engine {
        Engine::Ddp | Engine::Browser => Box::pin(user::<Conn>(w, flow, k, target, until, &ahead)),
        Engine::SocketIo => Box::pin(user::<SioSession>(w, flow, k, target, until, &ahead)),
        Engine::GraphqlWs => Box::pin(user::<GqlConn>(w, flow, k, target, until, &ahead)),
        Engine::Sse => Box::pin(user::<crate::realtime::sse::session::SseSession>(w, flow, k, target, until, &ahead)),
    };
    let outcome = tokio::time::timeout(user_timeout, walk).await;
    let mut r = w.recs[target].borrow_mut();
    if outcome.is_err() && ahead.get() {
        r.audit.unreached(&format!("a user still running after {user_timeout:?} was cut off before its checkpoint"));
    }
    match outcome {
        Ok(true) => {
            r.completed += 1;
            r.second.completed += 1;
        }
        Ok(false) => {
            r.failed += 1;
            r.second.failed += 1;
        }
        Err(_) => {
            r.failed += 1;
            r.cut += 1;
            r.second.failed += 1;
            if !r.first_errors.iter().any(|(c, _)| c == "user_timeout") {
                r.first_errors
                    .push(("user_timeout".into(), format!("a user still running after {user_timeout:?} was cut off")));
            }
        }
    }
    let at = w.start.elapsed().as_secs_f64();
    r.last_finish_s = Some(r.last_finish_s.map_or(at, |f| f.max(at)));
    matches!(outcome, Ok(true))
}

/// The flow arrival `k` walks, by the flows' weights.
fn pick_flow(w: &Worker, arrival: u64) -> &Flow {
    let flows = &w.plan.scenario.flows;
    let turn = arrival / w.plan.targets_cycle_len().max(1);
    &flows[flow_of(flows, &w.flow_cycle, turn, || rand::rng().random_range(0..u64::MAX))]
}

/// The flow (its index) for the user arriving at `turn` of the targets' cycle: the turn-th of
/// the weights' smooth round-robin cycle, so that any N users split as evenly as the weights
/// allow (3:20 over 23 users is 3 and 20, not 3 on average); the flow turns once per turn of the
/// targets' cycle, so that flows and targets do not pair up (2 flows over 2 targets: each target
/// gets both). Weights too large for a cycle: picked from `random` in proportion.
fn flow_of(flows: &[Flow], cycle: &[usize], turn: u64, random: impl FnOnce() -> u64) -> usize {
    if !cycle.is_empty() {
        return cycle[(turn % cycle.len() as u64) as usize];
    }
    let total: u64 = flows.iter().map(|f| u64::from(f.weight)).sum();
    let mut pick = random() % total.max(1);
    for (i, f) in flows.iter().enumerate() {
        if pick < u64::from(f.weight) {
            return i;
        }
        pick -= u64::from(f.weight);
    }
    0
}

/// A virtual user: gets its variables, walks its flow against its target. True when every step
/// succeeded. `ahead` says while a checkpoint is still ahead of it.
async fn user<S: Steps>(
    w: &Worker,
    flow: &Flow,
    arrival: u64,
    target: usize,
    until: Option<Instant>,
    ahead: &std::cell::Cell<bool>,
) -> bool {
    let mut vars: Vars = HashMap::new();
    vars.insert("$vuId".into(), Value::String(ddp::id::random_id()));
    vars.insert("$arrival".into(), Value::from(arrival));
    let config = &w.plan.scenario.config;
    for (name, values) in &config.variables {
        if !values.is_empty() {
            vars.insert(name.clone(), values[rand::rng().random_range(0..values.len())].clone());
        }
    }
    if let Some(p) = &config.payload {
        if !p.rows.is_empty() {
            let row = &p.rows[(arrival as usize) % p.rows.len()];
            for (f, v) in p.fields.iter().zip(row) {
                vars.insert(f.clone(), Value::String(v.clone()));
            }
        }
    }
    if flow.is_browser() {
        w.recs[target].borrow_mut().browser.users += 1;
    }
    let mut vu = Vu::<S> {
        w,
        target,
        arrival,
        until,
        conn: None,
        page: None,
        vars,
        subs: crate::vecmap::VecMap::new(),
        last_write: None,
        step_began: Instant::now(),
        resending: false,
        checked: false,
        last_failure: RefCell::new(None),
    };
    // The top-level step that holds the walk's last checkpoint: a walk stopped at it or before
    // did not reach every checkpoint.
    let last_checkpoint = flow.steps.iter().rposition(|s| {
        let mut found = false;
        crate::scenario::each_in(std::slice::from_ref(s), &mut |s| found |= matches!(s.kind, StepKind::Audit(_)));
        found
    });
    // The barrier waits for the closed phase's users walking a flow with checkpoints.
    let _walking = match (&w.audit, until, last_checkpoint) {
        (Some(shared), Some(_), Some(_)) => Some(shared.walking()),
        _ => None,
    };
    let mut ok = true;
    for (i, s) in flow.steps.iter().enumerate() {
        ahead.set(last_checkpoint.is_some_and(|last| i <= last));
        if vu.steps(std::slice::from_ref(s)).await.is_err() {
            ok = false;
            if ahead.get() {
                let why = vu.last_failure.take().unwrap_or_else(|| format!("{} failed", s.name));
                w.recs[target].borrow_mut().audit.unreached(&why);
            }
            break;
        }
    }
    ahead.set(false);
    // A connection that died after the last step that used it (and that nothing makes again)
    // fails its user all the same, as one that died before a step; a server that ended the
    // session on purpose (Socket.IO's DISCONNECT) did not drop it.
    let dropped = vu.conn.as_ref().and_then(Session::gone).filter(|why| !why.starts_with("io server disconnect"));
    if let Some(why) = dropped.filter(|_| ok && !S::RECONNECTS) {
        ok = false;
        let mut r = w.recs[target].borrow_mut();
        r.count_user_error("disconnect", &format!("the connection closed after the user's last step on it: {why}"));
    }
    if let Some(c) = vu.conn.take() {
        w.close(c);
    }
    if let Some(page) = vu.page.take() {
        // Boxed: a browser user's end is held only while it runs (2 KB a protocol user need not hold).
        Box::pin(vu.leave(page)).await;
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(weights: &[u32]) -> Vec<Flow> {
        let mut s = crate::scenario::builtin::ddp_calls(&Default::default());
        let one = s.flows.remove(0);
        weights.iter().map(|&weight| Flow { weight, ..one.clone() }).collect()
    }

    #[test]
    fn users_split_over_flows_as_evenly_as_their_weights_allow() {
        let f = flows(&[3, 20]);
        let cycle = flow_cycle(&f);
        assert_eq!(cycle.len(), 23);
        let mut counts = [0; 2];
        for turn in 0..23 {
            counts[flow_of(&f, &cycle, turn, || unreachable!("a cycle needs no chance"))] += 1;
        }
        assert_eq!(counts, [3, 20]);
        // The cycle repeats: the next 23 users split the same way.
        let again: Vec<usize> = (23..46).map(|t| flow_of(&f, &cycle, t, || 0)).collect();
        assert_eq!(again, (0..23).map(|t| flow_of(&f, &cycle, t, || 0)).collect::<Vec<_>>());
    }

    #[test]
    fn weights_too_large_for_a_cycle_are_picked_in_proportion() {
        let f = flows(&[6_000, 6_000]);
        assert!(flow_cycle(&f).is_empty(), "12,000 is above the cycle's bound");
        assert_eq!(flow_of(&f, &[], 0, || 5_999), 0);
        assert_eq!(flow_of(&f, &[], 0, || 6_000), 1);
        assert_eq!(flow_of(&f, &[], 0, || 12_000 + 6_001), 1, "a draw wraps around the total");
        assert!(flow_cycle(&flows(&[0, 0])).is_empty());
        assert_eq!(flow_of(&flows(&[0, 0]), &[], 0, || 7), 0, "weights of 0 fall back to the first flow");
    }
}

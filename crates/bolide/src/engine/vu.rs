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
use crate::plan::DdpPlan;
use crate::proto::http::tls::Connector;
use crate::proto::ws::Traffic;
use crate::realtime::ddp::wire::Conn;
use crate::realtime::graphql::wire::GqlConn;
use crate::realtime::socketio::session::SioSession;
use crate::realtime::socketio::wire::Want;
use crate::scenario::arrivals::Schedule;
use crate::scenario::template::{self, Vars};
use crate::scenario::{
    Audit, Call, Capture, Emit, Engine, Expect, Flow, HttpStep, LoopOver, Reply, Scenario, Step, StepKind, Think,
    WaitFor,
};
use crate::session::{matches_fields, Failure, Session, Target};
use crate::stats::audit::Check;
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

/// Calls `f` with every step of the scenario's flows, loops' steps included, in order.
fn each_step<'s>(s: &'s Scenario, f: &mut dyn FnMut(&'s Step)) {
    for flow in &s.flows {
        each_in(&flow.steps, f);
    }
}

/// Calls `f` with every step of `steps`, loops' steps included, in order.
fn each_in<'s>(steps: &'s [Step], f: &mut dyn FnMut(&'s Step)) {
    for s in steps {
        if let StepKind::Loop(l) = &s.kind {
            each_in(&l.steps, f);
        } else {
            f(s);
        }
    }
}

/// Step names with whether each is a method call (whose result and updated times are kept).
pub fn step_names(s: &Scenario) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    each_step(s, &mut |step| {
        // A checkpoint is no step of the server's: its time (a barrier, quiet, the truth) is the
        // audit's, kept out of the steps' latency.
        let measured = !matches!(step.kind, StepKind::Think(_) | StepKind::Set(_) | StepKind::Audit(_));
        if measured && !out.iter().any(|(n, _)| n == &step.name) {
            out.push((step.name.clone(), matches!(step.kind, StepKind::Call(_) | StepKind::Login(_))));
        }
    });
    if s.config.ddp.reconnect {
        out.push(("reconnect".into(), false));
    }
    out
}

/// The names of the subscribe steps, and of the method-call steps (login included): what
/// subscriptions and calls per minute count.
pub fn subscribe_and_call_steps(s: &Scenario) -> (Vec<String>, Vec<String>) {
    let (mut subs, mut calls) = (Vec::new(), Vec::new());
    each_step(s, &mut |step| match step.kind {
        StepKind::Subscribe { .. } => subs.push(step.name.clone()),
        StepKind::Call(_) | StepKind::Login(_) => calls.push(step.name.clone()),
        _ => {}
    });
    (subs, calls)
}

/// Runs the plan; `progress` is called about once a second.
pub fn run(
    plan: &DdpPlan,
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
    let names = step_names(&plan.scenario);
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

/// Browser pages open now, and the most open at once (for the browsers' cost per user).
#[derive(Default)]
struct Pages {
    open: AtomicU64,
    peak: AtomicU64,
}

/// What every worker shares: the audit's and the bursts' barriers, the browser's DevTools
/// endpoint (port, path) and its pages.
struct Shared {
    audit: Option<Arc<super::audit::Shared>>,
    bursts: Option<Arc<super::audit::Shared>>,
    browser: Option<(u16, String)>,
    pages: Arc<Pages>,
}

/// One worker's state, shared by its users (one thread: `Rc` and `RefCell`).
struct Worker {
    plan: DdpPlan,
    /// One recorder per target: a user records into its target's.
    recs: Vec<RefCell<VuRecorder>>,
    traffic: Rc<RefCell<Traffic>>,
    tls: Option<Connector>,
    /// TLS offering ALPN `h2`, for `http2: true` steps to https:// URLs (made at the first).
    tls_h2: std::cell::OnceCell<Connector>,
    start: Instant,
    alive: Arc<AtomicU64>,
    /// Connections closing (their closing handshakes, a second at most): awaited before the
    /// worker ends, so that no user's last messages are lost to the end of the run.
    closing: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    /// The run's audit, when it has checkpoints: what every worker shares, and this one's part.
    audit: Option<Arc<super::audit::Shared>>,
    audit_local: super::audit::Local,
    /// The closed users' barrier before each walk, when the plan runs in bursts.
    bursts: Option<Arc<super::audit::Shared>>,
    /// The browser's DevTools endpoint (port, path), when the scenario has browser flows.
    browser: Option<(u16, String)>,
    pages: Arc<Pages>,
    /// Which flow each arrival walks, by the flows' weights (empty: weights too large, by chance).
    flow_cycle: Vec<usize>,
}

impl Worker {
    /// Lets `conn` close by itself, as a browser's page does, and keeps its task to await.
    fn close<S: Session>(&self, conn: S) {
        if let Some(task) = conn.close() {
            let mut closing = self.closing.borrow_mut();
            closing.retain(|t| !t.is_finished());
            closing.push(task);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn worker(
    index: usize,
    threads: usize,
    plan: DdpPlan,
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
    let user_timeout = w.plan.scenario.config.ddp.user_timeout;
    let local = LocalSet::new();
    let mut ticks = 0u32;
    let mut last_traffic = (0u64, 0u64, 0u64, 0u64);
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
        second.messages_in = t.messages_in - last_traffic.0;
        second.messages_out = t.messages_out - last_traffic.1;
        second.bytes_in = t.bytes_in - last_traffic.2;
        second.bytes_out = t.bytes_out - last_traffic.3;
        last_traffic = (t.messages_in, t.messages_out, t.bytes_in, t.bytes_out);
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
    match w.flow_cycle.is_empty() {
        // Arrival k takes the k-th flow of the weights' smooth round-robin cycle: any N users
        // split as evenly as the weights allow (3:20 over 23 users is 3 and 20, not 3 on average).
        // The flow turns once per turn of the targets' cycle, so that flows and targets do not
        // pair up (2 flows over 2 targets: each target gets both).
        false => {
            let turn = arrival / w.plan.targets_cycle_len().max(1);
            &flows[w.flow_cycle[(turn % w.flow_cycle.len() as u64) as usize]]
        }
        // Weights too large for a cycle: picked at random in proportion.
        true => {
            let total: u64 = flows.iter().map(|f| u64::from(f.weight)).sum();
            let mut pick = rand::rng().random_range(0..total.max(1));
            flows
                .iter()
                .find(|f| {
                    if pick < u64::from(f.weight) {
                        true
                    } else {
                        pick -= u64::from(f.weight);
                        false
                    }
                })
                .unwrap_or(&flows[0])
        }
    }
}

/// A virtual user: gets its variables, walks its flow against its target. True when every step
/// succeeded. `ahead` says while a checkpoint is still ahead of it.
async fn user<S: Session>(
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
        each_in(std::slice::from_ref(s), &mut |s| found |= matches!(s.kind, StepKind::Audit(_)));
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

/// A user cut at its timeout is dropped with its page: the page no longer counts as open.
impl<S> Drop for Vu<'_, S> {
    fn drop(&mut self) {
        if self.page.take().is_some() {
            self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

struct Vu<'w, S> {
    w: &'w Worker,
    /// The index of this user's server in the plan's targets.
    target: usize,
    /// Its arrival (the user's number in the audit's differences).
    arrival: u64,
    /// A closed phase's user: when the phase ends (its checkpoints are a barrier with the other
    /// users, and it stops trying to reconnect once the phase is over).
    until: Option<Instant>,
    /// Whether it made a check yet.
    checked: bool,
    /// The last step failure, for the audit (a walk that stopped before its checkpoint).
    last_failure: RefCell<Option<String>>,
    conn: Option<S>,
    /// A browser user's page (opened at its first action; boxed: a protocol user holds 8 bytes).
    page: Option<Box<crate::browser::page::Page>>,
    vars: Vars,
    /// Subscriptions by name (the latest of each name): id and params.
    subs: crate::vecmap::VecMap<String, (String, Vec<Value>)>,
    /// When this user last sent a method call (the start of reactive latency).
    last_write: Option<Instant>,
    /// When the step now running began: a step that times out stays in its latency at this age.
    step_began: Instant,
    /// A step is being sent again after a reconnection: a second cut is its failure.
    resending: bool,
}

/// A failed step: already recorded; the user stops (or reconnects, when the class is "closed"
/// and the scenario says so).
struct Stop {
    closed: bool,
}

/// How long a looping user waits after a failed iteration before the next.
const FAILED_ITERATION_PAUSE: Duration = Duration::from_millis(250);

/// Meteor's client's wait before try `attempt` to connect again (packages/retry: `minCount` 2
/// tries after 10 ms, then 1 s x 2.2^attempt, fuzzed by +-25%, at most 5 minutes): 10 ms, 10 ms,
/// 4.8 s, 10.6 s, 23.4 s, ...
pub fn retry_wait(attempt: u32) -> Duration {
    if attempt < 2 {
        return Duration::from_millis(10);
    }
    let base = 2.2f64.powi(attempt.min(20) as i32).min(300.0);
    Duration::from_secs_f64(base * rand::rng().random_range(0.75..=1.25))
}

/// How often a thinking user of a run that reconnects looks at its connection: a connection
/// that closed under it is made again at once, as Meteor's client does in the background.
const THINK_LOOK: Duration = Duration::from_millis(250);

/// A text with `{{ }}` rendered from the user's variables.
fn text_of(s: &str, vars: &Vars) -> String {
    match template::render_str(s, vars) {
        Value::String(t) => t,
        other => other.to_string(),
    }
}

fn brief(v: &Value) -> String {
    crate::redact::brief(v)
}

/// The value at a JSON path (`$.0.name`, `$[0].name`, `$.data.task.id`) of `v`.
fn json_path<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    let mut at = v;
    let rest = path.trim().strip_prefix('$').unwrap_or(path.trim());
    for part in rest.split(['.', '[', ']']).filter(|p| !p.is_empty()) {
        let part = part.trim_matches(|c| c == '\'' || c == '"');
        at = match at {
            Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            Value::Object(m) => m.get(part)?,
            _ => return None,
        };
    }
    Some(at)
}

fn micros(d: Duration) -> u64 {
    crate::proto::http::micros(d)
}

impl<S: Session> Vu<'_, S> {
    /// This user's recorder (its target's).
    fn rec(&self) -> std::cell::RefMut<'_, VuRecorder> {
        self.w.recs[self.target].borrow_mut()
    }

    fn endpoint(&self) -> &crate::proto::ws::Endpoint {
        &self.w.plan.targets[self.target].endpoint
    }

    /// Where this user's sessions go.
    fn session_target(&self) -> Target<'_> {
        Target {
            plan: &self.w.plan,
            target: self.target,
            tls: self.w.tls.as_ref(),
            traffic: &self.w.traffic,
            vars: Some(&self.vars),
            resume: None,
        }
    }

    /// Runs `steps` in order (a loop's are boxed where it recurses: the future a user holds is
    /// the size of one step's, not of the deepest loop's).
    async fn steps(&mut self, steps: &[Step]) -> Result<(), Stop> {
        for s in steps {
            self.step_began = Instant::now();
            match self.step(s).await {
                Ok(()) => {}
                Err(Stop { closed: true }) if self.may_reconnect(s) => {
                    // Boxed: held only while reconnecting.
                    Box::pin(self.reconnect(None)).await?;
                    // A call whose answer the closed connection lost is sent again (Meteor
                    // resends it), unless the scenario says `noRetry`.
                    if let StepKind::Call(Call { no_retry: true, .. }) = s.kind {
                        return Err(Stop { closed: true });
                    }
                    if matches!(s.kind, StepKind::Call(_) | StepKind::Login(_)) {
                        self.rec().second.resent += 1;
                    }
                    self.step_began = Instant::now();
                    self.resending = true;
                    let again = self.step(s).await;
                    self.resending = false;
                    again?;
                }
                Err(stop) => return Err(stop),
            }
        }
        Ok(())
    }

    fn fail(&self, step: &Step, f: &impl Failure) -> Stop {
        self.fail_with(step, f.class(), &f.detail())
    }

    fn fail_with(&self, step: &Step, class: &str, detail: &str) -> Stop {
        if self.w.audit.is_some() {
            self.last_failure.replace(Some(format!("{}: {class}: {detail}", step.name)));
        }
        if class == "closed" && !self.resending && self.will_resend(step) {
            // Counted apart: the reconnection and the resend (`resent`) are the fault's.
            return Stop { closed: true };
        }
        self.record_failure(step, class, detail)
    }

    /// Records a failed step as it is, resent or not.
    fn record_failure(&self, step: &Step, class: &str, detail: &str) -> Stop {
        let mut r = self.rec();
        let i = r.index(&step.name);
        if class == "timeout" {
            r.step_timed_out(i, micros(self.step_began.elapsed()), detail);
        } else {
            r.step_failed(i, class, detail);
        }
        Stop { closed: class == "closed" }
    }

    /// Whether a step that failed on a closed connection is retried after reconnecting.
    fn may_reconnect(&self, step: &Step) -> bool {
        let uses_connection = !matches!(
            step.kind,
            StepKind::Connect
                | StepKind::Disconnect
                | StepKind::Http(_)
                | StepKind::Loop(_)
                | StepKind::Set(_)
                | StepKind::Think(_)
                | StepKind::Browser(_)
        );
        S::RECONNECTS && self.w.plan.scenario.config.ddp.reconnect && uses_connection
    }

    /// Whether a step that failed on a closed connection will be made again after reconnecting
    /// (then its cut is no failure: the step counts as what its second try gets).
    fn will_resend(&self, step: &Step) -> bool {
        self.may_reconnect(step) && !matches!(step.kind, StepKind::Call(Call { no_retry: true, .. }))
    }

    /// A new session, with the user's live subscriptions started again (as Meteor's client does).
    async fn reconnect(&mut self, within: Option<Duration>) -> Result<(), Stop> {
        let closed_at = self.conn.as_ref().and_then(Session::gone_at).unwrap_or_else(Instant::now);
        let previous = self.conn.as_ref().and_then(Session::session_id);
        // Within the step timeout (or `within`, a checkpoint's); a looping user gives up once its
        // phase is over (a second's tries at least), so that a server gone for good does not hold
        // the run's end.
        let mut deadline = self.timeout(None).min(within.unwrap_or(Duration::MAX));
        if let Some(u) = self.until {
            deadline = deadline.min(u.saturating_duration_since(Instant::now()).max(Duration::from_secs(1)));
        }
        let step = Step { name: "reconnect".into(), kind: StepKind::Connect };
        let began = Instant::now();
        // Meteor's retry schedule (`retry_wait`), within the step timeout and the user's phase;
        // only the last failure counts. Checkpoints wait for a user while it is at it.
        let _reconnecting = self.w.audit.as_deref().map(super::audit::Shared::reconnecting);
        let mut attempt = 0u32;
        let conn = loop {
            let left = deadline.saturating_sub(began.elapsed());
            let to = Target { resume: previous.as_deref(), ..self.session_target() };
            match Box::pin(S::open(to, left)).await {
                Ok((c, _)) => break c,
                Err(f) => {
                    let wait = retry_wait(attempt);
                    attempt += 1;
                    if began.elapsed() + wait >= deadline {
                        return Err(self.fail(&step, &f));
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        };
        // Logged in again with the user's token, then subscribed again, as Meteor's client does;
        // the new session's cache holds what the server sends again, nothing else.
        if let Some(token) = self.vars.get("loginToken").cloned() {
            crate::redact::sent_payload(&token);
            let login = serde_json::json!({ "resume": token });
            let _write = self.w.audit.as_deref().map(super::audit::Shared::write);
            conn.call("login", vec![login], deadline.saturating_sub(began.elapsed()))
                .await
                .map_err(|f| self.fail(&step, &f))?;
        }
        let subs: Vec<(String, Vec<Value>)> =
            self.subs.iter().map(|(name, (_, params))| (name.clone(), params.clone())).collect();
        for (name, params) in subs {
            let (id, _) = conn
                .subscribe(&name, params.clone(), deadline.saturating_sub(began.elapsed()))
                .await
                .map_err(|f| self.fail(&step, &f))?;
            self.subs.insert(name, (id, params));
        }
        self.conn = Some(conn);
        self.ok(&step, began.elapsed());
        let since = |at: Instant| at.saturating_duration_since(self.w.start).as_secs_f64();
        let back = since(Instant::now());
        let mut r = self.rec();
        r.second.reconnects += 1;
        if r.reconnections.len() < crate::stats::vu::KEPT_RECONNECTIONS {
            r.reconnections.push((since(closed_at), back));
        }
        Ok(())
    }

    fn ok(&self, step: &Step, latency: Duration) {
        let mut r = self.rec();
        let i = r.index(&step.name);
        r.step_ok(i, micros(latency));
    }

    fn timeout(&self, t: Option<Duration>) -> Duration {
        t.unwrap_or(self.w.plan.scenario.config.ddp.step_timeout)
    }

    fn conn(&self, step: &Step) -> Result<&S, Stop> {
        self.conn.as_ref().ok_or_else(|| {
            // Nothing to reconnect: a flow without a connect step is the scenario's mistake.
            let _ = self.record_failure(step, "closed", "no connection: a connect step must come first");
            Stop { closed: false }
        })
    }

    /// A `connect` step: the session opened (the one before closed). With reconnection on, a
    /// refused connect is tried again on Meteor's schedule while the server is down, within the
    /// step timeout and the user's phase.
    async fn connect(&mut self, step: &Step) -> Result<(), Stop> {
        if let Some(old) = self.conn.take() {
            self.w.close(old);
        }
        let deadline = self.timeout(None);
        let began = Instant::now();
        let retries = S::RECONNECTS && self.w.plan.scenario.config.ddp.reconnect;
        let mut attempt = 0u32;
        // Checkpoints wait for a user while it tries again.
        let mut _reconnecting = None;
        loop {
            let left = deadline.saturating_sub(began.elapsed());
            match Box::pin(S::open(self.session_target(), left)).await {
                Ok((c, handshake)) => {
                    self.ok(step, handshake);
                    self.conn = Some(c);
                    return Ok(());
                }
                Err(f) => {
                    let wait = retry_wait(attempt);
                    attempt += 1;
                    let phase_over = self.until.is_some_and(|u| Instant::now() + wait >= u);
                    // Refused, or cut before `connected` (a drop, a server going down meanwhile).
                    let cut = matches!(f.class(), "connect" | "closed");
                    if !retries || !cut || began.elapsed() + wait >= deadline || phase_over {
                        return Err(self.fail(step, &f));
                    }
                    if _reconnecting.is_none() {
                        _reconnecting = self.w.audit.as_deref().map(super::audit::Shared::reconnecting);
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// A `think` step: the pause. With reconnection on, a connection that closes meanwhile is
    /// made again at once, as Meteor's client does in the background.
    async fn think(&mut self, t: &Think) -> Result<(), Stop> {
        let d = match *t {
            Think::Fixed(d) => d,
            Think::Between(a, b) => {
                let (lo, hi) = (a.as_secs_f64(), b.as_secs_f64().max(a.as_secs_f64()));
                Duration::from_secs_f64(rand::rng().random_range(lo..=hi))
            }
        };
        if !(S::RECONNECTS && self.w.plan.scenario.config.ddp.reconnect) {
            tokio::time::sleep(d).await;
            return Ok(());
        }
        let end = Instant::now() + d;
        loop {
            if self.conn.as_ref().and_then(Session::gone).is_some() {
                // Boxed: a thinking user holds the reconnection's future only while it runs.
                Box::pin(self.reconnect(None)).await?;
            }
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            tokio::time::sleep((end - now).min(THINK_LOOK)).await;
        }
    }

    /// Runs one step. The heavy ones (a connection's handshake, an HTTP request, a `waitFor`)
    /// are boxed for their duration, so the future a user holds while it thinks or waits for a
    /// method is about 500 bytes, not 2.5 KB: 10,000 idle sessions are 20 MB less.
    async fn step(&mut self, step: &Step) -> Result<(), Stop> {
        match &step.kind {
            // Boxed: its future (the handshake, the tries again) is held only while connecting.
            StepKind::Connect => Box::pin(self.connect(step)).await?,
            StepKind::Disconnect => {
                if let Some(c) = self.conn.take() {
                    self.w.close(c);
                }
                self.subs.clear();
                self.ok(step, Duration::ZERO);
            }
            StepKind::Think(t) => self.think(t).await?,
            StepKind::Set(values) => {
                for (name, v) in values {
                    let v = template::render(v, &self.vars);
                    self.vars.insert(name.clone(), v);
                }
            }
            StepKind::Loop(l) => {
                let items: Vec<Value> = match &l.over {
                    LoopOver::UntilPhaseEnd => {
                        let Some(until) = self.until else {
                            let why = "a loop until the phase ends needs a closed phase (--users)";
                            return Err(self.fail_with(step, "scenario", why));
                        };
                        let mut i = 0u64;
                        while Instant::now() < until {
                            self.vars.insert("$loopIndex".into(), Value::from(i));
                            self.vars.insert("$loopCount".into(), Value::from(i + 1));
                            Box::pin(self.steps(&l.steps)).await?;
                            i += 1;
                        }
                        return Ok(());
                    }
                    LoopOver::Count(n) => (0..*n).map(Value::from).collect(),
                    LoopOver::List(v) => match template::render(v, &self.vars) {
                        Value::Array(items) => items,
                        Value::Null => Vec::new(),
                        other => {
                            return Err(self.fail_with(step, "scenario", &format!("loop over {other}: not a list")))
                        }
                    },
                };
                for (i, item) in items.into_iter().enumerate() {
                    self.vars.insert("$loopIndex".into(), Value::from(i));
                    self.vars.insert("$loopCount".into(), Value::from(i + 1));
                    self.vars.insert("$loopElement".into(), item);
                    Box::pin(self.steps(&l.steps)).await?;
                }
            }
            StepKind::Call(c) => {
                let params: Vec<Value> = c.params.iter().map(|p| template::render(p, &self.vars)).collect();
                let timeout = self.timeout(c.timeout);
                self.last_write = Some(Instant::now());
                let _write = self.w.audit.as_deref().map(super::audit::Shared::write);
                let conn = self.conn(step)?;
                let out = conn.call(&c.method, params, timeout).await.map_err(|f| self.fail(step, &f))?;
                if let Some(e) = &c.expect {
                    self.check(step, e, out.result.as_ref())?;
                }
                if let Some(cap) = &c.capture {
                    self.capture(cap, out.result.clone().unwrap_or(Value::Null));
                }
                let mut r = self.rec();
                let i = r.index(&step.name);
                r.call_ok(i, micros(out.to_both), micros(out.to_result), micros(out.to_updated));
            }
            StepKind::Login(l) => {
                let params = self.login_params(l);
                let timeout = self.timeout(l.timeout);
                let _write = self.w.audit.as_deref().map(super::audit::Shared::write);
                let conn = self.conn(step)?;
                let out = conn.call("login", vec![params], timeout).await.map_err(|f| self.fail(step, &f))?;
                if let Some(token) = out.result.as_ref().and_then(|r| r.get("token")).cloned() {
                    self.vars.insert("loginToken".into(), token);
                }
                if let Some(id) = out.result.as_ref().and_then(|r| r.get("id")).cloned() {
                    self.vars.insert("userId".into(), id);
                }
                let mut r = self.rec();
                let i = r.index(&step.name);
                r.call_ok(i, micros(out.to_both), micros(out.to_result), micros(out.to_updated));
            }
            StepKind::Subscribe { name, params, capture, timeout } => {
                let params: Vec<Value> = params.iter().map(|p| template::render(p, &self.vars)).collect();
                let timeout = self.timeout(*timeout);
                let conn = self.conn(step)?;
                let (id, to_ready) =
                    conn.subscribe(name, params.clone(), timeout).await.map_err(|f| self.fail(step, &f))?;
                if let Some(var) = capture {
                    self.vars.insert(var.clone(), Value::String(id.clone()));
                }
                self.subs.insert(name.clone(), (id, params));
                self.ok(step, to_ready);
            }
            StepKind::Unsubscribe { name } => {
                let id = match self.subs.remove(name) {
                    Some((id, _)) => id,
                    None => match self.vars.get(name).and_then(Value::as_str) {
                        Some(id) => id.to_string(),
                        None => {
                            return Err(self.fail_with(step, "scenario", &format!("no subscription {name:?} to stop")))
                        }
                    },
                };
                self.conn(step)?.unsubscribe(&id).map_err(|f| self.fail(step, &f))?;
                self.ok(step, Duration::ZERO);
            }
            StepKind::WaitFor(wf) => Box::pin(self.wait_for(step, wf)).await?,
            StepKind::Http(h) => Box::pin(self.http(step, h)).await?,
            StepKind::Audit(a) => Box::pin(self.audit(step, a)).await,
            StepKind::Browser(a) => Box::pin(self.browser(step, a)).await?,
            StepKind::Emit(e) => Box::pin(self.emit(step, e)).await?,
            StepKind::Listen(l) => {
                let timeout = self.timeout(l.timeout);
                let began = Instant::now();
                let channel = text_of(&l.channel, &self.vars);
                let namespace = l.namespace.as_ref().map(|n| text_of(n, &self.vars));
                let conn = self.conn(step)?;
                // Boxed: a Socket.IO listen's future (3 KB) is held only while it listens.
                Box::pin(conn.listen(namespace.as_deref(), &channel, l.count, timeout))
                    .await
                    .map_err(|f| self.fail(step, &f))?;
                self.ok(step, began.elapsed());
            }
            StepKind::Execute(x) => {
                let variables = x.variables.as_ref().map(|v| template::render(v, &self.vars));
                let timeout = self.timeout(x.timeout);
                let conn = self.conn(step)?;
                // Boxed, as the live subscription below: held only while it runs.
                let (sent, done, result) =
                    Box::pin(conn.execute(&x.query, variables, timeout)).await.map_err(|f| self.fail(step, &f))?;
                self.last_write = Some(sent);
                if let Some(cap) = &x.capture {
                    self.capture(cap, result.get("data").cloned().unwrap_or(Value::Null));
                }
                self.ok(step, done - sent);
            }
            StepKind::GqlSubscribe(g) => {
                let variables = g.variables.as_ref().map(|v| template::render(v, &self.vars));
                let timeout = self.timeout(g.timeout);
                let conn = self.conn(step)?;
                let (id, to_first) = Box::pin(conn.live(&g.query, variables, g.count, timeout))
                    .await
                    .map_err(|f| self.fail(step, &f))?;
                let key = g.capture.clone().unwrap_or_else(|| step.name.clone());
                if let Some(var) = &g.capture {
                    self.vars.insert(var.clone(), Value::String(id.clone()));
                }
                self.subs.insert(key, (id, Vec::new()));
                self.ok(step, to_first);
            }
            StepKind::Complete { name } => {
                // The named subscription, or the user's latest.
                let id = match name {
                    Some(n) => self.subs.remove(n).map(|(id, _)| id),
                    None => {
                        let latest = self.subs.iter().max_by_key(|(_, (id, _))| id.parse::<u64>().unwrap_or(0));
                        let key = latest.map(|(k, _)| k.clone());
                        key.and_then(|k| self.subs.remove(&k)).map(|(id, _)| id)
                    }
                };
                let Some(id) = id else {
                    let what = name.as_deref().unwrap_or("any");
                    return Err(self.fail_with(step, "scenario", &format!("no subscription {what:?} to complete")));
                };
                self.conn(step)?.unsubscribe(&id).map_err(|f| self.fail(step, &f))?;
                self.ok(step, Duration::ZERO);
            }
        }
        Ok(())
    }

    /// A Socket.IO emit, and the acknowledgement or the response it waits for, judged as
    /// Artillery judges them; captures into the user's variables. Its latency is the emit's to
    /// its answer (none: 0).
    async fn emit(&mut self, step: &Step, e: &Emit) -> Result<(), Stop> {
        let args: Vec<Value> = e.args.iter().map(|a| template::render(a, &self.vars)).collect();
        let timeout = self.timeout(e.timeout);
        let answer = match &e.reply {
            Reply::None => None,
            Reply::Ack(a) | Reply::Event { answer: a, .. } => Some(a),
        };
        let want = Want::new(answer.and_then(|a| a.data.as_ref()).map(|d| template::render(d, &self.vars)));
        let channel = match &e.reply {
            Reply::Event { channel, .. } => text_of(channel, &self.vars),
            _ => String::new(),
        };
        let reply = match &e.reply {
            Reply::None => crate::session::Await::Nothing,
            Reply::Ack(_) => crate::session::Await::Ack,
            Reply::Event { .. } => crate::session::Await::Event { channel: &channel, want: want.clone() },
        };
        let namespace = e.namespace.as_ref().map(|n| text_of(n, &self.vars));
        let conn = self.conn(step)?;
        let out = conn.emit(namespace.as_deref(), args, reply, timeout).await.map_err(|f| self.fail(step, &f))?;
        if let Some(a) = answer {
            if matches!(e.reply, Reply::Ack(_)) && !want.answers(&out.args) {
                let got = brief(&Value::Array(out.args.clone()));
                return Err(self.fail_with(
                    step,
                    "response",
                    &format!("data is not valid: the acknowledgement was {got}"),
                ));
            }
            let got = Value::Array(out.args);
            for m in &a.matches {
                let expected = template::render(&m.value, &self.vars);
                let found = json_path(&got, &m.json);
                if found != Some(&expected) {
                    let shown = found.map_or("nothing".to_string(), brief);
                    let detail = format!("failed match: {} is {shown}, expected {expected}", m.json);
                    return Err(self.fail_with(step, "match", &detail));
                }
            }
            for (path, var) in &a.captures {
                let v = json_path(&got, path).cloned().unwrap_or(Value::Null);
                self.vars.insert(var.clone(), v);
            }
        }
        self.ok(step, out.answered.saturating_duration_since(out.sent));
        Ok(())
    }

    /// A browser action on the user's page (opened at the first), then what the page did
    /// meanwhile: its DDP round trips recorded, a console error or a failed request failing the
    /// step (the user goes on), a crash or a dead browser failing the user.
    async fn browser(&mut self, step: &Step, a: &crate::scenario::Action) -> Result<(), Stop> {
        use crate::scenario::Action;
        let timeout = self.timeout(match a {
            Action::WaitForSelector(s) | Action::Expect(s) => s.timeout,
            _ => None,
        });
        if self.page.is_none() {
            let Some((port, path)) = &self.w.browser else {
                return Err(self.fail_with(step, "browser", "no browser was started for this run"));
            };
            match crate::browser::page::Page::open(*port, path).await {
                Ok(p) => {
                    let n = self.w.pages.open.fetch_add(1, Ordering::SeqCst) + 1;
                    self.w.pages.peak.fetch_max(n, Ordering::SeqCst);
                    self.page = Some(Box::new(p));
                }
                Err(f) => {
                    self.rec().browser.crashes += 1;
                    return Err(self.fail_with(step, f.class, &f.detail));
                }
            }
        }
        let text = |v: &Value, vars: &Vars| match template::render(v, vars) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let render = |s: &str, vars: &Vars| text(&Value::String(s.to_string()), vars);
        let mut goto = String::new();
        if let Action::Goto(path) = a {
            let target = render(path, &self.vars);
            goto = url::Url::parse(&self.w.plan.targets[self.target].url)
                .and_then(|base| base.join(&target))
                .map_err(|e| self.fail_with(step, "scenario", &format!("goto {target:?}: {e}")))?
                .to_string();
            self.page_left().await;
            if let Some(p) = &mut self.page {
                p.shown_by = Some(step.name.clone());
            }
        }
        // The step's clock starts once its page is open and the last page's timings are read.
        let began = Instant::now();
        self.step_began = began;
        let vars = &self.vars;
        let Some(page) = self.page.as_mut() else { return Ok(()) };
        let out = match a {
            Action::Goto(_) => page.goto(&goto, timeout).await,
            Action::Click(sel) => page.click(&render(sel, vars), timeout).await,
            Action::Fill { selector, value } => page.fill(&render(selector, vars), &text(value, vars), timeout).await,
            Action::Press { selector, key } => page.press(&render(selector, vars), key, timeout).await,
            Action::WaitForSelector(s) | Action::Expect(s) => {
                let selector = render(&s.selector, vars);
                let wanted = s.text.as_ref().map(|t| text(t, vars));
                let want = crate::browser::page::Want {
                    selector: &selector,
                    count: s.count,
                    text: wanted.as_deref(),
                    state: s.state.name(),
                };
                page.wait_for(&want, timeout, matches!(a, Action::Expect(_))).await
            }
        };
        let happened = page.take();
        let mut trouble = None;
        {
            let mut r = self.rec();
            for (m, us) in &happened.methods {
                r.browser.method(m, *us);
            }
            for (s, us) in &happened.subs {
                r.browser.sub(s, *us);
            }
            r.browser.console_errors += happened.console_errors.count;
            r.browser.failed_requests += happened.failed_requests.count;
            r.browser.dialogs += happened.dialogs.count;
            if let Some(e) = happened.console_errors.first.first() {
                trouble = Some(("console", format!("the page logged an error: {e}")));
            } else if let Some(e) = happened.failed_requests.first.first() {
                trouble = Some(("request", format!("a request of the page failed: {e}")));
            }
        }
        match out {
            Err(f) => {
                if matches!(f.class, "browser" | "crash") {
                    self.rec().browser.crashes += 1;
                    // A dead page is closed now: nothing more is read from it.
                    if let Some(p) = self.page.take() {
                        self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
                        drop(p);
                    }
                }
                Err(self.fail_with(step, f.class, &f.detail))
            }
            Ok(()) => {
                match trouble {
                    // The step counts as failed; the user goes on, as a person would.
                    Some((class, detail)) => {
                        let _ = self.fail_with(step, class, &detail);
                    }
                    None => self.ok(step, began.elapsed()),
                }
                Ok(())
            }
        }
    }

    /// The page's timings of the navigation it shows, recorded under the step that made it.
    async fn page_left(&mut self) {
        let Some(page) = self.page.as_mut() else { return };
        let Some(step) = page.shown_by.clone() else { return };
        if let Some(v) = page.vitals().await {
            self.rec().browser.vitals(&step, [v.ttfb_ms, v.fcp_ms, v.lcp_ms, v.cls, v.inp_ms]);
        }
    }

    /// A browser user's end: the last page's timings, then its context closed.
    async fn leave(&mut self, page: Box<crate::browser::page::Page>) {
        self.page = Some(page);
        self.page_left().await;
        if let Some(p) = self.page.take() {
            self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
            p.close().await;
        }
    }

    /// A checkpoint: with the other users first in the closed model, then this user's cache
    /// against the truth once the run is quiet. What it found goes to the audit, not to the
    /// step's errors; the step's latency is the checkpoint's time.
    async fn audit(&mut self, step: &Step, a: &Audit) {
        let Some(shared) = self.w.audit.as_deref() else { return };
        let began = Instant::now();
        let check = if self.conn.is_none() {
            Check::Incomplete("no connection at the checkpoint (after a disconnect, or before a connect)".into())
        } else {
            let gathered = match self.until.is_some() {
                true => Some(shared.gather(began + a.timeout).await),
                false => None,
            };
            let mut opened = Instant::now();
            // However often the connection is cut and made again, the checkpoint ends by then.
            let last = opened + a.timeout + self.timeout(None);
            let generation = match &gathered {
                Some(Ok(seat)) => Some(seat.generation()),
                _ => None,
            };
            let check = match &gathered {
                Some(Err(why)) => Check::Incomplete(why.clone()),
                _ => loop {
                    // A user whose connection closed is made whole first, however long its
                    // reconnection takes; its check then has its own timeout.
                    let renewed = self.conn.as_ref().and_then(Session::gone).is_some();
                    if let Err(why) = self.renew().await {
                        break Check::Incomplete(why);
                    }
                    if renewed {
                        opened = Instant::now();
                    }
                    let check = self.compare(a, shared, opened, generation).await;
                    // A connection that a fault closed during the check: again, on a new one.
                    let again = self.conn.as_ref().and_then(Session::gone).is_some()
                        && self.w.plan.scenario.config.ddp.reconnect
                        && opened.elapsed() < a.timeout
                        && Instant::now() < last;
                    if !again {
                        break check;
                    }
                },
            };
            if let Some(Ok(seat)) = gathered {
                shared.leave(seat, opened + a.timeout + Duration::from_secs(1)).await;
            }
            check
        };
        let first = !std::mem::replace(&mut self.checked, true);
        {
            let mut r = self.rec();
            match check {
                Check::Agreed => r.second.audit_agreed += 1,
                Check::Differed(..) => r.second.audit_differed += 1,
                Check::Incomplete(_) | Check::Unstable(_) => {}
            }
            r.audit.record(&step.name, check);
            r.audit.users += u64::from(first);
        }
    }

    fn capture(&mut self, cap: &Capture, result: Value) {
        let mut v = result;
        if let Some(path) = &cap.path {
            for part in path.split('.') {
                v = match (&v, part.parse::<usize>()) {
                    (Value::Array(a), Ok(i)) => a.get(i).cloned().unwrap_or(Value::Null),
                    _ => v.get(part).cloned().unwrap_or(Value::Null),
                };
            }
        }
        if cap.append {
            match self.vars.entry(cap.var.clone()).or_insert_with(|| Value::Array(vec![])) {
                Value::Array(list) => list.push(v),
                slot => *slot = Value::Array(vec![v]),
            }
        } else {
            self.vars.insert(cap.var.clone(), v);
        }
    }

    fn check(&self, step: &Step, e: &Expect, result: Option<&Value>) -> Result<(), Stop> {
        let want: Vec<(String, Value)> =
            e.fields.iter().map(|(k, v)| (k.clone(), template::render(v, &self.vars))).collect();
        let docs = result.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        let found = docs.iter().any(|d| {
            let id = d.get("_id").and_then(Value::as_str).unwrap_or_default();
            d.as_object().is_some_and(|o| matches_fields(id, o, &want))
        });
        if found == e.contains {
            Ok(())
        } else {
            let shown: Vec<String> = want.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let what = if e.contains { "has no document with" } else { "still has a document with" };
            Err(self.fail_with(step, "expect", &format!("result {what} {}", shown.join(", "))))
        }
    }

    fn login_params(&self, l: &crate::scenario::Login) -> Value {
        let render = |v: &Option<Value>| v.as_ref().map(|v| template::render(v, &self.vars));
        if let Some(token) = render(&l.resume) {
            crate::redact::sent_payload(&token);
            return serde_json::json!({ "resume": token });
        }
        let user = match render(&l.user) {
            Some(Value::String(s)) if s.contains('@') => serde_json::json!({ "email": s }),
            Some(Value::String(s)) => serde_json::json!({ "username": s }),
            Some(other) => other,
            None => Value::Null,
        };
        let password = render(&l.password).map(|p| match p {
            Value::String(s) => s,
            other => other.to_string(),
        });
        let digest = password.map(|p| {
            use sha2::Digest;
            let hash = sha2::Sha256::digest(p.as_bytes());
            let digest = hash.iter().map(|b| format!("{b:02x}")).collect::<String>();
            // Meteor takes the digest for the password: neither is shown as a server echoes it.
            crate::redact::sent_secret(&p);
            crate::redact::sent_secret(&digest);
            digest
        });
        serde_json::json!({ "user": user, "password": { "digest": digest, "algorithm": "sha-256" } })
    }

    async fn wait_for(&mut self, step: &Step, wf: &WaitFor) -> Result<(), Stop> {
        let want: Vec<(String, Value)> =
            wf.fields.iter().map(|(k, v)| (k.clone(), template::render(v, &self.vars))).collect();
        let began = Instant::now();
        // "Appears" and "changes" count from the user's last action, not from this step: by DDP's
        // write fence a call completes (`updated`) only after its data arrived, so data caused by
        // the call just before this step is already in the cache when the step begins.
        let since = self.last_write.filter(|w| *w <= began).unwrap_or(began);
        let timeout = self.timeout(wf.timeout);
        let conn = self.conn(step)?;
        let seen = conn.wait_for(wf, &want, since, began, timeout).await.map_err(|f| self.fail(step, &f))?;
        self.ok(step, began.elapsed());
        if let Some(sent) = self.last_write {
            if seen >= sent {
                self.rec().reactive(micros(seen - sent));
            }
        }
        Ok(())
    }

    /// A connection a fault closed is made again before a check, as the user's next step would
    /// (when the run reconnects); Err says why it could not be.
    async fn renew(&mut self) -> Result<(), String> {
        let gone = self.conn.as_ref().and_then(Session::gone);
        let Some(why) = gone.filter(|_| self.w.plan.scenario.config.ddp.reconnect) else { return Ok(()) };
        self.reconnect(None).await.map_err(|_| {
            format!("the user's connection closed ({why}) and could not be made again within the step timeout or the user's phase")
        })
    }

    /// This user's cache against the truth, once the run is quiet.
    async fn compare(
        &self,
        a: &Audit,
        shared: &super::audit::Shared,
        opened: Instant,
        generation: Option<u64>,
    ) -> Check {
        let Some(conn) = &self.conn else { return Check::Incomplete("no connection at the checkpoint".into()) };
        let mut subs: Vec<(String, Vec<Value>)> = match &a.subscription {
            Some(name) => {
                let params = match &a.params {
                    Some(p) => p.iter().map(|p| template::render(p, &self.vars)).collect(),
                    None => self.subs.get(name).map(|(_, p)| p.clone()).unwrap_or_default(),
                };
                vec![(name.clone(), params)]
            }
            None => self.subs.iter().map(|(n, (_, p))| (n.clone(), p.clone())).collect(),
        };
        subs.sort_by(|x, y| x.0.cmp(&y.0));
        let ask = super::audit::Ask {
            user: self.arrival,
            conn,
            target: self.session_target(),
            subs,
            token: self.vars.get("loginToken"),
            audit: a,
            began: opened,
            generation,
        };
        let w = self.w;
        super::audit::check(ask, shared, &w.audit_local, &|c| w.close(c)).await
    }

    async fn http(&mut self, step: &Step, h: &HttpStep) -> Result<(), Stop> {
        use crate::proto::http as web;
        let url_text = template::render_str(&h.url, &self.vars);
        let url_text = url_text.as_str().unwrap_or_default().to_string();
        let base = url::Url::parse(&self.w.plan.targets[self.target].url)
            .map_err(|e| self.fail_with(step, "scenario", &e.to_string()))?;
        let url =
            base.join(&url_text).map_err(|e| self.fail_with(step, "scenario", &format!("URL {url_text:?}: {e}")))?;
        let host = url.host_str().unwrap_or_default().trim_matches(|c| c == '[' || c == ']').to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let ep = self.endpoint();
        let addrs = if host == ep.host && port == ep.port {
            ep.addrs.clone()
        } else {
            match tokio::net::lookup_host((host.as_str(), port)).await {
                Ok(a) => a.collect(),
                Err(e) => return Err(self.fail_with(step, "connect", &format!("cannot resolve {host}: {e}"))),
            }
        };
        let body = h.body.as_ref().map(|b| match template::render(b, &self.vars) {
            Value::String(s) => s.into_bytes(),
            other => other.to_string().into_bytes(),
        });
        let mut headers = Vec::new();
        if matches!(h.body, Some(Value::Object(_)) | Some(Value::Array(_))) {
            headers.push(("Content-Type".to_string(), "application/json".to_string()));
        }
        let spec =
            web::RequestSpec { method: h.method.clone(), headers, body: body.unwrap_or_default(), keep_alive: false };
        let h2 = match h.http2 {
            true => Some(web::h2::shared(&url, &spec).map_err(|e| self.fail_with(step, "scenario", &e))?),
            false => None,
        };
        let target = web::Target {
            url: url.to_string(),
            host: host.clone(),
            addrs,
            tls: url.scheme() == "https",
            request: Arc::from(web::build_request(&url, &spec)),
            expect_body: h.method != "HEAD",
            h2,
        };
        let began = Instant::now();
        let timeout = self.timeout(h.timeout);
        // A request other than GET or HEAD may write: the audit waits for it as for a call.
        let _write = self
            .w
            .audit
            .as_deref()
            .filter(|_| !matches!(h.method.as_str(), "GET" | "HEAD"))
            .map(super::audit::Shared::write);
        let exchange = async {
            let mut timings = web::Timings::default();
            if let Some(req) = &target.h2 {
                let tls = target
                    .tls
                    .then(|| self.w.tls_h2.get_or_init(|| Connector::with_alpn(self.w.plan.insecure, &[b"h2"])));
                let send = web::h2::connect(&target, tls).await?;
                return web::h2::exchange(&send, req, target.expect_body, &mut timings, &|| {}).await;
            }
            let mut conn = web::connect(&target, self.w.tls.as_ref()).await?;
            conn.exchange(&target, &mut timings).await
        };
        let resp = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(r)) => r,
            Ok(Err(f)) => return Err(self.fail_with(step, f.class.name(), &f.detail)),
            Err(_) => return Err(self.fail_with(step, "timeout", &format!("no response within {timeout:?}"))),
        };
        if !h.expect_status.contains(resp.status) {
            let want = &h.expect_status;
            return Err(self.fail_with(step, "status", &format!("status {}, expected {want}", resp.status)));
        }
        self.ok(step, began.elapsed());
        Ok(())
    }
}

//! The HTTP engine: one OS thread per worker, each with a single-threaded tokio runtime that owns
//! its connections, its recorder and its share of the schedule. Workers report once a second
//! (a tick carrying that second's counts and latency histogram) and once at the end (the full
//! recorder); the coordinator thread merges. Nothing is shared per request.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

use super::pacer::{self, Next, Pacer, Slice, Stop};
use super::timer::{self, Timer};
use crate::plan::HttpPlan;
use crate::proto::http::{self, micros, tls::Connector, Connection, Target, Timings};
use crate::stats::gnuplot::{Line, PartWriter};
use crate::stats::result::Second;
use crate::stats::{summary, ErrorClass, SecondRecorder, WorkerRecorder};

/// Longest pause between reconnect attempts after connection failures.
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_millis(50);

/// What the coordinator sees once a second while the run goes on.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub elapsed: Duration,
    /// The planned length, when the run is bounded by time.
    pub planned: Option<Duration>,
    /// The planned number of requests, when the run is bounded by count (`-n`).
    pub planned_requests: Option<u64>,
    pub responses: u64,
    /// Failed requests: transport errors and responses of a status not expected.
    pub errors: u64,
    /// Requests that ended: responses and transport errors (the count `-n` is reached by).
    pub finished: u64,
    /// Responses in the last whole second.
    pub last_second_responses: u64,
    /// That second, as the result document's timeline will have it.
    pub second: crate::stats::result::Second,
}

/// Everything a finished (or interrupted) run measured.
#[derive(Debug)]
pub struct RunOutput {
    pub merged: WorkerRecorder,
    pub timeline: Vec<Second>,
    pub started_at: SystemTime,
    pub duration: Duration,
    pub interrupted: bool,
    /// What a fixed-rate schedule asked for (0 for the closed model).
    pub scheduled_sends: u64,
    /// The gnuplot part files, one per worker, in order.
    pub gnuplot_parts: Vec<std::path::PathBuf>,
    /// Why the gnuplot file cannot be written (a part failed, e.g. a full disk); the parts are
    /// already removed and the run's other outputs are unaffected.
    pub gnuplot_error: Option<String>,
    /// The load threads' CPU time over the run, nanoseconds (each thread's own clock).
    pub cpu_ns: u64,
}

/// Why the run could not start.
#[derive(Debug)]
pub enum StartError {
    /// No target accepted a connection.
    Unreachable(Vec<String>),
    /// Setting up a worker or an output file failed.
    Setup(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Unreachable(why) => {
                write!(f, "no target is reachable, nothing was measured:")?;
                for w in why {
                    write!(f, "\n  {w}")?;
                }
                Ok(())
            }
            StartError::Setup(why) => write!(f, "{why}"),
        }
    }
}

/// A worker's part of one second: how long it was (the last, partial one is shorter) and what it
/// recorded.
#[derive(Default)]
struct Tick {
    span: Duration,
    rec: Box<SecondRecorder>,
}

impl super::coordinator::Part for Tick {
    fn merge(&mut self, other: Tick) {
        self.span = self.span.max(other.span);
        self.rec.merge(&other.rec);
    }

    fn whole(&self) -> bool {
        self.span >= Duration::from_millis(999)
    }
}

/// A worker's end: its recorder, its gnuplot part (or why it failed), and why the worker could
/// not run at all.
struct Done {
    worker: usize,
    rec: Box<WorkerRecorder>,
    part: Result<Option<std::path::PathBuf>, String>,
    error: Option<String>,
    /// The worker thread's CPU time, nanoseconds.
    cpu_ns: u64,
}

type Msg = super::coordinator::Report<Tick, Done>;

/// One worker's slice of the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// Global index of the worker's first connection (targets are assigned round-robin by it).
    pub first_connection: usize,
    pub connections: usize,
    pub pacer: Pacer,
    pub stop: Stop,
}

/// Splits this instance's connections (`mine`: the first one's global index and how many, of
/// `connections` in the whole plan), with their slots of the request count and of the schedule,
/// across `threads` workers, so that the shares add up exactly to the instance's part.
pub fn shares(connections: usize, mine: (usize, usize), threads: usize, pacer: Pacer, stop: Stop) -> Vec<Share> {
    let mut out = Vec::with_capacity(threads);
    let (mut first, count) = mine;
    for i in 0..threads {
        let conns = count / threads + usize::from(i < count % threads);
        let slice = Slice { stride: connections as u64, offset: first as u64, width: conns as u64 };
        let pacer = match pacer {
            Pacer::Closed => Pacer::Closed,
            Pacer::Rate { per_s, .. } => Pacer::Rate { per_s, slice },
        };
        let count = stop.count.map(|n| slice.count_below(n));
        out.push(Share { first_connection: first, connections: conns, pacer, stop: Stop { time: stop.time, count } });
        first += conns;
    }
    out
}

/// Checks that at least one target accepts a TCP connection; exits early with the reasons if none.
fn preflight(targets: &[Target], timeout: Duration) -> Result<(), StartError> {
    let mut why = Vec::new();
    for t in targets {
        let reached = t.addrs.iter().any(|a| match std::net::TcpStream::connect_timeout(a, timeout) {
            Ok(_) => true,
            Err(e) => {
                why.push(format!("{} ({a}): {e}", t.url));
                false
            }
        });
        if reached {
            return Ok(());
        }
    }
    Err(StartError::Unreachable(why))
}

/// Runs the plan to its end (or until `cancel`), calling `progress` about once a second.
pub fn run(
    plan: &HttpPlan,
    cancel: &CancellationToken,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunOutput, StartError> {
    preflight(&plan.targets, plan.timeout.min(Duration::from_secs(5)))?;
    let shares = shares(plan.connections, plan.my_connections(), plan.threads, plan.pacer, plan.stop);
    let started_at = SystemTime::now();
    let start = Instant::now();
    // The workers stop at the user's stop, or when one of them could not be started.
    let stop = cancel.child_token();
    let (handles, rx) = super::coordinator::spawn::<Tick, Done>("bolide-worker", shares.len(), &stop, |worker, tx| {
        let (plan, cancel, share) = (plan.clone(), stop.clone(), shares[worker]);
        Box::new(move || worker_main(worker, plan, share, start, started_at, &cancel, &tx))
    })
    .map_err(StartError::Setup)?;

    let workers = shares.len();
    let mut merged = WorkerRecorder::new(plan.targets.len());
    let mut parts: Vec<Option<std::path::PathBuf>> = vec![None; workers];
    // Each second is kept until whole; then only the timeline entry it makes (a recorder's
    // histogram is ~190 KB resident: kept for every second it made an hour-long run grow by a
    // gigabyte).
    let mut seconds = super::coordinator::Seconds::<Tick>::new(workers);
    let mut finished: Vec<Second> = Vec::new();
    let keep_histogram = plan.common.spread.segment.is_some() || !plan.common.exports.is_empty();
    let entry = |t: u32, span: Duration, rec: &SecondRecorder| {
        let mut second = summary::second(t, span.as_secs_f64(), rec);
        // A segment keeps each second's histogram: merged with the other segments' seconds, the
        // whole run's per-second percentiles come out exact.
        if keep_histogram {
            second.latency_histogram = Some(crate::stats::hist::encode(&rec.latency_us));
        }
        // The outputs send its histogram and breakdowns.
        if !plan.common.exports.is_empty() {
            for_outputs(&mut second, rec);
        }
        second
    };
    let mut worker_error = None;
    let mut gnuplot_error = None;
    let (mut responses, mut errors, mut ended) = (0u64, 0u64, 0u64);
    let mut cpu_ns = 0u64;
    for msg in rx {
        match msg {
            Msg::Tick { t, part } => {
                let rec = &part.rec;
                responses += rec.responses;
                errors += rec.errors;
                ended += rec.responses + rec.errors - rec.error_classes[ErrorClass::Status as usize];
                // A second is complete once every worker reported it: show it.
                seconds.add(t, part, |t, whole| {
                    let second = entry(t, whole.span, &whole.rec);
                    progress(&Progress {
                        elapsed: start.elapsed(),
                        planned: plan.stop.time,
                        planned_requests: plan.my_requests(),
                        responses,
                        errors,
                        finished: ended,
                        last_second_responses: whole.rec.responses,
                        second: second.clone(),
                    });
                    finished.push(second);
                });
            }
            Msg::Done(Done { worker, rec, part, error, cpu_ns: cpu }) => {
                cpu_ns += cpu;
                merged.merge(&rec);
                match part {
                    Ok(p) => parts[worker] = p,
                    Err(e) => gnuplot_error = Some(e),
                }
                if error.is_some() {
                    worker_error = error;
                }
            }
        }
    }
    let duration = start.elapsed();
    if let Some(why) = crate::engine::join_workers(handles) {
        worker_error = Some(why);
    }
    let mut gnuplot_parts: Vec<_> = parts.into_iter().flatten().collect();
    if let Some(e) = worker_error {
        crate::stats::gnuplot::discard(&gnuplot_parts);
        return Err(StartError::Setup(e));
    }
    if gnuplot_error.is_some() {
        // One part is missing: the others alone would be a wrong file.
        crate::stats::gnuplot::discard(&gnuplot_parts);
        gnuplot_parts.clear();
    }
    // The seconds shown as they ended, then those the run's end left (the last, partial one).
    let mut timeline = finished;
    for (t, part) in seconds.rest() {
        timeline.push(entry(t, part.span, &part.rec));
    }
    Ok(RunOutput {
        merged,
        timeline,
        started_at,
        duration,
        interrupted: cancel.is_cancelled(),
        // This instance's slots of the schedule (all of them without a segment).
        scheduled_sends: plan.my_slice().count_below(pacer::scheduled_sends(plan.pacer, plan.stop)),
        gnuplot_parts,
        gnuplot_error,
        cpu_ns,
    })
}

/// What the outputs send of a second besides its totals: its latency histogram and breakdowns.
fn for_outputs(second: &mut Second, rec: &SecondRecorder) {
    second.latency_histogram = Some(crate::stats::hist::encode(&rec.latency_us));
    let mut statuses = rec.statuses.clone();
    statuses.sort_unstable();
    second.detail = Some(Box::new(crate::stats::result::SecondDetail {
        connects: rec.connects,
        statuses,
        error_classes: ErrorClass::ALL
            .iter()
            .map(|c| (c.name(), rec.error_classes[*c as usize]))
            .filter(|(_, n)| *n > 0)
            .collect(),
        targets: rec.targets.iter().map(|(n, h)| (*n, crate::stats::hist::encode(h))).collect(),
    }));
}

/// State shared by the connection tasks of one worker (one thread, so `Rc` and `RefCell`).
struct Worker {
    plan: HttpPlan,
    share: Share,
    start: Instant,
    started_at: SystemTime,
    tls: Option<Connector>,
    /// The high-resolution timer of a fixed-rate schedule (none for the closed model).
    timer: Option<Timer>,
    /// Sends handed out so far (the pacer's `sent`).
    reserved: Cell<u64>,
    rec: RefCell<WorkerRecorder>,
    gnuplot: RefCell<Option<PartWriter>>,
    gnuplot_error: RefCell<Option<String>>,
    /// The workers' stop: a target that does not speak the protocol asked for stops them all.
    stop: CancellationToken,
    /// Why the run could not go on (a target answered `--http2` in HTTP/1.1): the run ends as
    /// one that could not start, naming it.
    fatal: RefCell<Option<String>>,
}

impl Worker {
    /// Reserves the next send, or None when the run is over for this worker.
    fn reserve(&self) -> Option<Instant> {
        let sent = self.reserved.get();
        match pacer::next(self.share.pacer, self.share.stop, self.start.elapsed(), sent) {
            Next::Stop => None,
            Next::Send { due, .. } => {
                self.reserved.set(sent + 1);
                Some(self.start + due)
            }
        }
    }

    fn log_line(&self, line: Line) {
        let mut g = self.gnuplot.borrow_mut();
        if let Some(w) = g.as_mut() {
            if let Err(e) = w.write(&line) {
                *self.gnuplot_error.borrow_mut() = Some(e.to_string());
                if let Some(w) = g.take() {
                    w.abandon();
                }
            }
        }
    }
}

fn worker_main(
    index: usize,
    plan: HttpPlan,
    share: Share,
    start: Instant,
    started_at: SystemTime,
    cancel: &CancellationToken,
    tx: &mpsc::Sender<Msg>,
) {
    let targets = plan.targets.len();
    let fail = |error: String| {
        let rec = Box::new(WorkerRecorder::new(targets));
        let cpu_ns = crate::engine::thread_cpu_ns();
        let _ = tx.send(Msg::Done(Done { worker: index, rec, part: Ok(None), error: Some(error), cpu_ns }));
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the worker's event loop: {e}")),
    };
    let gnuplot = match plan.gnuplot.as_deref().map(|p| PartWriter::create(p, index)).transpose() {
        Ok(g) => g,
        Err(e) => return fail(format!("cannot create the gnuplot part file: {e}")),
    };
    let needs_tls = plan.targets.iter().any(|t| t.tls);
    let timer = match share.pacer {
        Pacer::Rate { .. } => {
            let _in_runtime = rt.enter();
            match Timer::new() {
                Ok(t) => Some(t),
                Err(e) => return fail(format!("cannot create the worker's timer: {e}")),
            }
        }
        Pacer::Closed => None,
    };
    let mut rec = WorkerRecorder::new(targets);
    // The outputs of a run of several URLs send each one's latency.
    if !plan.common.exports.is_empty() && targets > 1 {
        rec.second = SecondRecorder::by_target(targets);
    }
    let worker = Rc::new(Worker {
        timer,
        tls: needs_tls.then(|| {
            if plan.http2 {
                Connector::with_alpn(plan.insecure, &[b"h2"])
            } else {
                Connector::new(plan.insecure)
            }
        }),
        rec: RefCell::new(rec),
        plan,
        share,
        start,
        started_at,
        reserved: Cell::new(0),
        gnuplot: RefCell::new(gnuplot),
        gnuplot_error: RefCell::new(None),
        stop: cancel.clone(),
        fatal: RefCell::new(None),
    });
    // Ticks at whole seconds since the common start; the last, partial one at the end.
    let mut ticks_sent = 0u32;
    let send_tick = |t: u32, span: Duration, w: &Worker| {
        let rec = Box::new(w.rec.borrow_mut().second.take());
        let _ = tx.send(Msg::Tick { t, part: Tick { span, rec } });
    };
    let local = LocalSet::new();
    rt.block_on(local.run_until(async {
        if let Some(t) = &worker.timer {
            tokio::task::spawn_local(t.clone().drive());
        }
        let mut tasks = Vec::with_capacity(share.connections);
        for c in 0..share.connections {
            let target = (share.first_connection + c) % targets;
            if worker.plan.http2 {
                // HTTP/2: a task per stream, all on the connection of this slot.
                let slot = Rc::new(H2Slot::default());
                for _ in 0..worker.plan.streams {
                    let (w, slot) = (Rc::clone(&worker), Rc::clone(&slot));
                    tasks.push(tokio::task::spawn_local(async move { h2_stream_loop(&w, target, &slot).await }));
                }
            } else {
                let w = Rc::clone(&worker);
                tasks.push(tokio::task::spawn_local(async move { connection_loop(&w, target).await }));
            }
        }
        let all_done = async {
            for t in tasks {
                let _ = t.await;
            }
        };
        let ticker = async {
            loop {
                let at = start + Duration::from_secs(u64::from(ticks_sent) + 1);
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
                send_tick(ticks_sent, Duration::from_secs(1), &worker);
                ticks_sent += 1;
            }
        };
        let deadline = async {
            match share.stop.time {
                Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(start + t)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = all_done => {}
            _ = ticker => {}
            _ = deadline => {}
            _ = cancel.cancelled() => {}
        }
    }));
    // Dropping the LocalSet cancels requests still in flight: a timed run ends on time.
    drop(local);
    let span = start.elapsed().saturating_sub(Duration::from_secs(u64::from(ticks_sent)));
    send_tick(ticks_sent, span, &worker);
    let Ok(worker) = Rc::try_unwrap(worker) else {
        return fail("internal error: a connection task outlived its worker".into());
    };
    let part = match worker.gnuplot_error.into_inner() {
        Some(e) => Err(e),
        None => worker.gnuplot.into_inner().map(PartWriter::finish).transpose().map_err(|e| e.to_string()),
    };
    let rec = Box::new(worker.rec.into_inner());
    let cpu_ns = crate::engine::thread_cpu_ns();
    let error = worker.fatal.into_inner();
    let _ = tx.send(Msg::Done(Done { worker: index, rec, part, error, cpu_ns }));
    drop(rt);
}

/// One connection slot: takes sends from the schedule until it says stop; reconnects as needed.
async fn connection_loop(w: &Worker, target_index: usize) {
    let target = &w.plan.targets[target_index];
    let mut conn: Option<Connection> = None;
    let mut backoff = Duration::ZERO;
    while let Some(due) = w.reserve() {
        if due > Instant::now() {
            timer::sleep_until(w.timer.as_ref(), due).await;
        }
        let sent_at = Instant::now();
        w.rec.borrow_mut().record_send(micros(sent_at.saturating_duration_since(due)));
        // A send the timer let go a little early (with its window's batch) is measured from when
        // it went out; a late one from when it was due.
        let due = due.min(sent_at);
        let mut timings = Timings::default();
        let outcome = tokio::time::timeout(w.plan.timeout, async {
            loop {
                let reused = conn.is_some();
                if !reused {
                    let c = http::connect(target, w.tls.as_ref()).await?;
                    timings.connect_us = micros(sent_at.elapsed());
                    w.rec.borrow_mut().record_connect(target_index);
                    conn = Some(c);
                }
                match conn.as_mut().expect("connected above").exchange(target, &mut timings).await {
                    // The server had closed the idle keep-alive connection: retry once on a new
                    // one, as browsers and HTTP clients do (idempotent methods only, unless asked),
                    // and count it. The time spent stays in the latency.
                    Err(f) if f.stale && reused && w.plan.retry_closed => {
                        w.rec.borrow_mut().targets[target_index].retries += 1;
                        conn = None;
                    }
                    other => return other,
                }
            }
        })
        .await;
        let done = Instant::now();
        match outcome {
            Ok(Ok(resp)) => {
                backoff = Duration::ZERO;
                let bytes = resp.head_bytes + resp.body_bytes;
                w.answered(target_index, (due, sent_at, done), resp.status, bytes, &timings);
                if !resp.keep_alive || !w.plan.keep_alive {
                    conn = None;
                }
            }
            Ok(Err(failure)) => {
                let connecting = conn.is_none();
                conn = None;
                w.rec.borrow_mut().record_error(target_index, failure.class, &failure.detail);
                if connecting || matches!(failure.class, ErrorClass::Connect | ErrorClass::Tls) {
                    backoff = next_backoff(backoff);
                    tokio::time::sleep(backoff).await;
                }
            }
            Err(_elapsed) => {
                conn = None;
                w.timed_out(target_index, due, done);
            }
        }
    }
}

/// Do not spin on a target that refuses: the wait before the next try doubles, within bounds.
fn next_backoff(last: Duration) -> Duration {
    (last * 2).clamp(Duration::from_millis(1), MAX_RECONNECT_BACKOFF)
}

impl Worker {
    /// A response to the send due at `due`, sent at `sent_at`, whole at `done`: recorded, and
    /// logged for `--gnuplot`.
    fn answered(
        &self,
        target: usize,
        (due, sent_at, done): (Instant, Instant, Instant),
        status: u16,
        bytes: u64,
        timings: &Timings,
    ) {
        let failed = !self.plan.expect_status.contains(status);
        self.rec.borrow_mut().record_response(target, micros(done - due), status, bytes, failed);
        if self.plan.gnuplot.is_some() {
            self.log_line(Line {
                start: self.started_at + (sent_at - self.start),
                connect_us: timings.connect_us,
                total_us: micros(done - sent_at),
                wait_us: timings.wait_us,
            });
        }
    }

    /// A request with no whole response within `--timeout`.
    fn timed_out(&self, target: usize, due: Instant, done: Instant) {
        let detail = format!("no complete response within {:?}", self.plan.timeout);
        self.rec.borrow_mut().record_timeout(target, micros(done - due), &detail);
    }
}

/// An HTTP/2 connection slot shared by its stream tasks: the connection (None until one of them
/// opens it, and again after it failed) and its number, so that one failure is one reconnect.
#[derive(Default)]
struct H2Slot {
    conn: tokio::sync::Mutex<Option<(u64, http::h2::Sender)>>,
    opened: Cell<u64>,
    /// The last connection that answered (a response, or a stream reset: it speaks HTTP/2), and
    /// the last one found dead (its back-off decided once, however many of its streams saw it end).
    answered: Cell<u64>,
    lost: Cell<u64>,
    /// Back-off after a connection that ended without answering, as HTTP/1.1's reconnects: the
    /// next one is opened no sooner than `next_open`.
    backoff: Cell<Duration>,
    next_open: Cell<Option<Instant>>,
    /// Woken when a connection answers for the first time or ends.
    changed: tokio::sync::Notify,
}

impl H2Slot {
    /// The slot's connection, or a new one opened by this stream after the back-off; `attempt`
    /// runs when this stream makes the attempt (its request then counts as sent: the attempt is
    /// on the wire). The opener's request goes alone on a new connection; the other streams join
    /// once it answered, so that a server that fails every connection fails one request each
    /// time, not one per stream.
    async fn connection(
        &self,
        w: &Worker,
        target_index: usize,
        timings: &mut Timings,
        attempt: &dyn Fn(),
    ) -> Result<(u64, http::h2::Sender, bool), http::Failure> {
        loop {
            let conn = self.conn.lock().await;
            match conn.as_ref() {
                Some((id, send)) if self.answered.get() >= *id => return Ok((*id, send.clone(), false)),
                Some(_) => {
                    // Not proven yet: wait for its first answer or its end.
                    let changed = self.changed.notified();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    drop(conn);
                    changed.await;
                }
                None => return self.open(conn, w, target_index, timings, attempt).await,
            }
        }
    }

    /// Opens the slot's next connection (the slot's lock held: the others wait for it).
    async fn open(
        &self,
        mut conn: tokio::sync::MutexGuard<'_, Option<(u64, http::h2::Sender)>>,
        w: &Worker,
        target_index: usize,
        timings: &mut Timings,
        attempt: &dyn Fn(),
    ) -> Result<(u64, http::h2::Sender, bool), http::Failure> {
        if let Some(at) = self.next_open.get() {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
        }
        attempt();
        let began = Instant::now();
        let opened = self.opened.get() + 1;
        self.opened.set(opened);
        match http::h2::connect(&w.plan.targets[target_index], w.tls.as_ref()).await {
            Ok(send) => {
                timings.connect_us = micros(began.elapsed());
                w.rec.borrow_mut().record_connect(target_index);
                *conn = Some((opened, send.clone()));
                Ok((opened, send, true))
            }
            Err(f) => {
                drop(conn);
                self.ended(opened);
                Err(f)
            }
        }
    }

    /// Connection `id` answered (a response or a stream reset): the slot's other streams may use it.
    fn answered(&self, id: u64) {
        if self.answered.get() < id {
            self.answered.set(id);
            self.backoff.set(Duration::ZERO);
            self.changed.notify_waiters();
        }
    }

    /// Connection `id` is done for: dropped from the slot (unless a newer one replaced it), and a
    /// connection that never answered makes the next one wait (doubling, within bounds).
    fn ended(&self, id: u64) {
        if let Ok(mut conn) = self.conn.try_lock() {
            if conn.as_ref().map(|(c, _)| *c) == Some(id) {
                *conn = None;
            }
        }
        if self.lost.get() >= id {
            return;
        }
        self.lost.set(id);
        if self.answered.get() == id {
            // A connection that worked and ended (nginx's GOAWAY after its keepalive_requests):
            // the next one opens at once.
            self.backoff.set(Duration::ZERO);
            self.next_open.set(None);
        } else {
            self.backoff.set(next_backoff(self.backoff.get()));
            self.next_open.set(Some(Instant::now() + self.backoff.get()));
        }
        self.changed.notify_waiters();
    }
}

/// One stream of an HTTP/2 connection slot: takes sends from the schedule like an HTTP/1.1
/// connection does (so a scheduled request waits for a free stream and its latency counts from its
/// schedule), opens the slot's connection when it has none.
///
/// A request counts as sent once it is handed to a connection, or once its own connection attempt
/// is on the wire; one whose timeout passed before either is tried again with its schedule kept
/// (under `--rps` it is late; at the run's end it was never sent). A connection attempt that fails
/// is one error of its class; a request a GOAWAY refused (above its last stream, not processed) is
/// sent once more on a new connection (idempotent methods, as HTTP/1.1 resends) and counted as a
/// retry; a stream that times out ends its connection, which the next request replaces.
async fn h2_stream_loop(w: &Worker, target_index: usize, slot: &H2Slot) {
    let target = &w.plan.targets[target_index];
    let Some(req) = target.h2.clone() else { return };
    let mut unsent = None;
    while let Some(due) = unsent.take().or_else(|| w.reserve()) {
        if due > Instant::now() {
            timer::sleep_until(w.timer.as_ref(), due).await;
        }
        let sent_at = Cell::new(None::<Instant>);
        let send = || {
            if sent_at.get().is_none() {
                let now = Instant::now();
                sent_at.set(Some(now));
                w.rec.borrow_mut().record_send(micros(now.saturating_duration_since(due)));
            }
        };
        let mut timings = Timings::default();
        let mut used = None;
        let outcome = tokio::time::timeout(w.plan.timeout, async {
            let mut resent = false;
            loop {
                let (id, conn, mine) = slot.connection(w, target_index, &mut timings, &send).await?;
                used = Some(id);
                match http::h2::exchange(&conn, &req, target.expect_body, &mut timings, &send).await {
                    Ok(r) => return Ok(r),
                    // The connection had ended before this request reached it: the next one.
                    Err(f) if f.unsent && !mine => slot.ended(id),
                    // Refused by a GOAWAY, not processed: once more on a new connection.
                    Err(f) if f.stale && !f.unsent && !resent && w.plan.retry_closed => {
                        slot.ended(id);
                        w.rec.borrow_mut().targets[target_index].retries += 1;
                        resent = true;
                    }
                    Err(f) => return Err(f),
                }
            }
        })
        .await;
        let done = Instant::now();
        let Some(sent) = sent_at.get() else {
            // Nothing of it went out within its timeout (no connection, no free stream): the same
            // request again, its schedule kept, unless the run is over.
            unsent = Some(due);
            continue;
        };
        // A send the timer let go a little early is measured from when it went out; a late one
        // from when it was due.
        let due = due.min(sent);
        match outcome {
            Ok(Ok(resp)) => {
                if let Some(id) = used {
                    slot.answered(id);
                }
                w.answered(target_index, (due, sent, done), resp.status, resp.body_bytes, &timings);
            }
            Ok(Err(failure)) => {
                match used {
                    Some(id) if http::h2::ends_connection(&failure) => slot.ended(id),
                    // A stream the server reset: the connection speaks HTTP/2 and stays.
                    Some(id) => slot.answered(id),
                    None => {}
                }
                w.rec.borrow_mut().record_error(target_index, failure.class, &failure.detail);
                if failure.wrong_protocol {
                    // The first such answer ends the run: every other request would fail alike.
                    w.fatal.borrow_mut().get_or_insert_with(|| {
                        format!(
                            "{} does not speak HTTP/2, nothing was measured: {}",
                            crate::redact::text(&target.url),
                            failure.detail
                        )
                    });
                    w.stop.cancel();
                }
            }
            Err(_elapsed) => {
                // The stream is given up (dropping it resets it), and so is its connection: a
                // server that stopped answering gets a new one.
                if let Some(id) = used {
                    slot.ended(id);
                }
                w.timed_out(target_index, due, done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_over_workers_and_segments() {
        // Each row: connections, threads, count, rate.
        let rows = [
            (10, 3, Some(1000), Some(300.0)),
            (7, 7, Some(3), None),
            (1000, 2, None, Some(1.0)),
            (5, 2, Some(1), None),
            (9, 2, Some(999), None),
        ];
        for (conns, threads, count, rate) in rows {
            let pacer = rate.map_or(Pacer::Closed, |per_s| Pacer::Rate { per_s, slice: Slice::WHOLE });
            for n in 1..=3u32 {
                // Every worker of every segment: together exactly the whole plan.
                let s: Vec<Share> = (1..=n)
                    .flat_map(|index| {
                        let mine = crate::segment::Segment { index, count: n }.connections(conns);
                        shares(conns, mine, threads.min(mine.1), pacer, Stop { time: None, count })
                    })
                    .collect();
                assert_eq!(s.iter().map(|x| x.connections).sum::<usize>(), conns);
                let firsts: Vec<usize> = s.iter().map(|x| x.first_connection).collect();
                assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
                assert_eq!(s.last().map(|x| x.first_connection + x.connections), Some(conns));
                if let Some(want) = count {
                    assert_eq!(s.iter().map(|x| x.stop.count.unwrap()).sum::<u64>(), want, "{conns} over {n}");
                }
                if rate.is_some() {
                    let widths: u64 = s
                        .iter()
                        .map(|x| match x.pacer {
                            Pacer::Rate { slice, .. } => slice.width,
                            _ => 0,
                        })
                        .sum();
                    assert_eq!(widths, conns as u64);
                }
            }
        }
        // -n 999 over three segments of -c 9: 333 each.
        let thirds: Vec<u64> = (1..=3)
            .map(|index| {
                let mine = crate::segment::Segment { index, count: 3 }.connections(9);
                let stop = Stop { time: None, count: Some(999) };
                shares(9, mine, 2, Pacer::Closed, stop).iter().map(|x| x.stop.count.unwrap()).sum()
            })
            .collect();
        assert_eq!(thirds, [333, 333, 333]);
    }
}

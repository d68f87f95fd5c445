//! The audit's checkpoints as users reach them: quiescence (no write of any user in flight, the
//! user's connection quiet for the settle time), the truth read over a connection of the audit's
//! own (subscribed as the user is, logged in with the user's token), and the comparison. In the
//! closed model the users of a checkpoint meet at a barrier first, so that nobody writes while
//! the others compare. What a check found is a [`Check`]; the VU engine records it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plan::VuPlan;
use crate::proto::ws::Traffic;
use crate::scenario::Audit;
use crate::session::{Failure, Session, Target};
use crate::stats::audit::{compare, Check, Snapshot, KEPT_DIFFERENCES, TRUTH_CHANGED};

/// How often a waiting check looks again when nothing wakes it (a user that died changes the
/// number alive without a word).
const LOOK_AGAIN: Duration = Duration::from_millis(20);

/// How long past its timeout a barrier waits for users that are reconnecting (Meteor's back-off
/// reaches 23 s at its fifth try; a server back within two minutes has every user back).
const RECONNECT_GRACE: Duration = Duration::from_secs(120);

/// What every user of a run shares for the audit, across the worker threads.
#[derive(Default)]
pub struct Shared {
    /// Method calls (logins included) sent and not yet complete (`result` and `updated`).
    in_flight: AtomicU64,
    /// Method calls sent since the run began: a check whose truth was read while this moved
    /// looks again.
    started: AtomicU64,
    /// Closed-phase users walking a flow that has checkpoints: whom the barrier waits for.
    walking: AtomicU64,
    /// Users making their connection again (a fault closed it): the barrier waits for them
    /// past its timeout, for as long as they try.
    reconnecting: AtomicU64,
    /// When the last of them was back: the barrier gives it its whole timeout from then to come.
    back_at: Mutex<Option<Instant>>,
    barrier: Mutex<Barrier>,
    /// Wakes the users at the barrier when it moves.
    moved: tokio::sync::Notify,
}

#[derive(Default)]
struct Barrier {
    generation: u64,
    arrived: u64,
    done: u64,
    /// Everyone alive arrived: the users of this generation are checking.
    open: bool,
}

/// A user reconnecting, for as long as it is held.
pub struct Reconnecting<'a>(&'a Shared);

impl Drop for Reconnecting<'_> {
    fn drop(&mut self) {
        *self.0.back_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.0.reconnecting.fetch_sub(1, Ordering::SeqCst);
        self.0.moved.notify_waiters();
    }
}

/// A method call in flight, for as long as it is held.
pub struct Write<'a>(&'a Shared);

impl Drop for Write<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    /// Counts a method call from its sending until the guard is dropped.
    pub fn write(&self) -> Write<'_> {
        self.started.fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Write(self)
    }

    fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Barrier> {
        self.barrier.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A barrier for `n` users known in advance (ddp-connect's bursts, whose users start over the
    /// first second): the first gathering waits for all of them, not for those started so far.
    pub fn expecting(n: u64) -> Shared {
        let s = Shared::default();
        s.walking.store(n, Ordering::SeqCst);
        s
    }

    /// A user of a barrier made by [`Shared::expecting`]: already counted, it leaves the count
    /// when the guard is dropped.
    pub fn expected(&self) -> Walking<'_> {
        Walking(self)
    }

    /// Counts a user making its connection again, for as long as it is held.
    pub fn reconnecting(&self) -> Reconnecting<'_> {
        self.reconnecting.fetch_add(1, Ordering::SeqCst);
        Reconnecting(self)
    }

    /// Counts a closed phase's user walking a flow with checkpoints, for as long as it is held:
    /// the users the barrier waits for.
    pub fn walking(&self) -> Walking<'_> {
        self.walking.fetch_add(1, Ordering::SeqCst);
        Walking(self)
    }

    /// The closed model's barrier: waits until every user walking a flow with checkpoints is at
    /// one; the seat to [`Shared::leave`] by. Err when the others did not all come by
    /// `deadline`. A seat dropped on the way (a user cut off) withdraws, so the barrier never
    /// waits for a user that is gone.
    pub async fn gather(&self, deadline: Instant) -> Result<Seat<'_>, String> {
        // A user back from a reconnection gets the whole timeout from then to come (it still has
        // to send again what was cut), within the grace past the deadline.
        let patience = deadline.saturating_duration_since(Instant::now());
        let last = deadline + RECONNECT_GRACE;
        let deadline = || {
            let back = *self.back_at.lock().unwrap_or_else(|p| p.into_inner());
            back.map_or(deadline, |b| deadline.max(b + patience)).min(last)
        };
        // A user arriving while the others check waits for them to leave first.
        let mut seat = loop {
            let moved = self.moved.notified();
            {
                let mut b = self.lock();
                if !b.open {
                    b.arrived += 1;
                    break Seat { shared: self, generation: b.generation, left: false };
                }
            }
            if Instant::now() >= deadline() {
                return Err("the users before it were still checking at the timeout".into());
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, moved).await;
        };
        self.moved.notify_waiters();
        loop {
            let moved = self.moved.notified();
            {
                let mut b = self.lock();
                let all = self.walking.load(Ordering::SeqCst);
                if b.generation != seat.generation {
                    // Released without this user's leave (counts a cut-off user left behind):
                    // it joins the next gathering.
                    b.arrived += 1;
                    seat.generation = b.generation;
                }
                if b.open || b.arrived >= all {
                    b.open = true;
                    drop(b);
                    self.moved.notify_waiters();
                    return Ok(seat);
                }
                let now = Instant::now();
                let waiting_for_reconnects = self.reconnecting.load(Ordering::SeqCst) > 0 && now < last;
                if now >= deadline() && !waiting_for_reconnects {
                    let came = b.arrived;
                    drop(b);
                    drop(seat);
                    return Err(format!("{came} of {all} users reached the checkpoint together"));
                }
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, moved).await;
        }
    }

    /// Done checking: the last of a generation lets them all go; the others wait for it (until
    /// `deadline`), so that none writes while another still compares.
    pub async fn leave(&self, mut seat: Seat<'_>, deadline: Instant) {
        let generation = seat.generation;
        seat.left = true;
        if self.count_leave(generation) {
            return;
        }
        loop {
            let moved = self.moved.notified();
            if self.lock().generation != generation || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, moved).await;
        }
    }

    /// A user of `generation` is done: true when it was the last (the barrier is released).
    fn count_leave(&self, generation: u64) -> bool {
        let mut b = self.lock();
        if b.generation != generation {
            return true;
        }
        b.done += 1;
        if b.done < b.arrived {
            return false;
        }
        *b = Barrier { generation: b.generation + 1, ..Barrier::default() };
        drop(b);
        self.moved.notify_waiters();
        true
    }
}

/// A closed phase's user walking a flow with checkpoints (see [`Shared::walking`]).
pub struct Walking<'a>(&'a Shared);

impl Drop for Walking<'_> {
    fn drop(&mut self) {
        self.0.walking.fetch_sub(1, Ordering::SeqCst);
        self.0.moved.notify_waiters();
    }
}

/// A user's place at the barrier, from its arrival until it leaves. Dropped before that (the
/// user was cut off), it withdraws its arrival, or counts its leave once the others are checking.
pub struct Seat<'a> {
    shared: &'a Shared,
    generation: u64,
    left: bool,
}

impl Seat<'_> {
    /// The barrier's generation this seat is in.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        let open = {
            let mut b = self.shared.lock();
            if b.generation != self.generation {
                return;
            }
            if !b.open {
                b.arrived = b.arrived.saturating_sub(1);
            }
            b.open
        };
        if open {
            self.shared.count_leave(self.generation);
        }
        self.shared.moved.notify_waiters();
    }
}

/// A worker's side of the audit: its truth connections' traffic, and the last truth read, which
/// the worker's other users at the same barrier (the closed model: every user paused there) reuse
/// while no write was sent since.
pub struct Local {
    pub traffic: Rc<RefCell<Traffic>>,
    pub reads: Cell<u64>,
    /// One truth read at a time per worker (the truth held is one checkpoint's).
    reading: tokio::sync::Mutex<()>,
    last: RefCell<Option<Truth>>,
    /// Where the truth is read: the run's plan with the truth's targets in place of the users'
    /// where `--audit-truth` gives them, its connections deaf to `--fault drop` (a fault of the
    /// users' connections, not the audit's). None in a run without an audit.
    plan: Option<Box<VuPlan>>,
    tls: Option<crate::proto::http::tls::Connector>,
}

struct Truth {
    /// What was read: the collection, the subscriptions, the login.
    key: String,
    /// `Shared::started` when it was read.
    epoch: u64,
    snapshot: Rc<Snapshot>,
}

impl Local {
    pub fn new(run: &VuPlan) -> Local {
        let plan = run.scenario.audits().then(|| {
            let mut plan = Box::new(run.clone());
            plan.client.drops = None;
            if !plan.truth.is_empty() {
                plan.targets = std::mem::take(&mut plan.truth);
            }
            plan
        });
        let tls = plan.as_ref().filter(|p| p.targets.iter().any(|t| t.endpoint.tls));
        let tls = tls.map(|p| crate::proto::http::tls::Connector::new(p.insecure));
        Local {
            traffic: Rc::new(RefCell::new(Traffic::default())),
            reads: Cell::new(0),
            reading: tokio::sync::Mutex::new(()),
            last: RefCell::new(None),
            plan,
            tls,
        }
    }
}

/// What a check needs of its user: where its sessions go, what it is subscribed to, its login.
pub struct Ask<'a, S: Session> {
    pub user: u64,
    pub conn: &'a S,
    pub target: Target<'a>,
    pub subs: Vec<(String, Vec<Value>)>,
    /// The user's login token, to read the truth as the user.
    pub token: Option<&'a Value>,
    pub audit: &'a Audit,
    pub began: Instant,
    /// The barrier's generation the user checks in (closed model): the users of one generation
    /// may share a truth read; without one, every check reads its own.
    pub generation: Option<u64>,
}

/// Checks a user's cache against the truth once the run is quiet; `close` takes the truth
/// connections when done with.
pub async fn check<S: Session>(ask: Ask<'_, S>, shared: &Shared, local: &Local, close: &dyn Fn(S)) -> Check {
    let audit = ask.audit;
    let deadline = ask.began + audit.timeout;
    let collection = audit.collection.as_deref();
    if ask.subs.is_empty() {
        return Check::Incomplete("nothing to compare: the user has no live subscription".into());
    }
    let key = format!("{} {:?} {collection:?} {:?} {:?}", ask.target.target, ask.generation, ask.subs, ask.token);
    // Why the last look did not settle it, for an incomplete check.
    let mut waiting = String::from("quiescence never came");
    let mut seen_once: Option<u64> = None;
    // The truth the difference was first seen against, and `Shared::started` when it was read.
    let mut first_truth: Option<(u64, Rc<Snapshot>)> = None;
    loop {
        if let Some(why) = ask.conn.gone() {
            return Check::Incomplete(format!("the user's connection closed: {why}"));
        }
        let now = Instant::now();
        if now >= deadline {
            let why = match seen_once {
                Some(n) => {
                    format!("{n} difference(s) seen once could not be looked at again within {:?}", audit.timeout)
                }
                None => format!("{waiting} within {:?}", audit.timeout),
            };
            return Check::Incomplete(why);
        }
        let writes = shared.in_flight();
        if writes > 0 {
            waiting = format!("quiescence never came ({writes} method call(s) still in flight)");
            tokio::time::sleep(LOOK_AGAIN.min(deadline - now)).await;
            continue;
        }
        let heard = ask.conn.last_data();
        let quiet = heard.map_or(audit.settle, |at| now.saturating_duration_since(at));
        if quiet < audit.settle {
            waiting = format!("the user's connection was never quiet for {:?}", audit.settle);
            tokio::time::sleep((audit.settle - quiet).min(deadline - now)).await;
            continue;
        }
        let epoch = shared.started();
        let truth = match truth(&ask, &key, epoch, local, close, deadline).await {
            Ok(t) => t,
            Err(why) => return Check::Incomplete(format!("the truth could not be read: {why}")),
        };
        if let Some(why) = ask.conn.gone() {
            return Check::Incomplete(format!("the user's connection closed: {why}"));
        }
        if shared.started() != epoch || shared.in_flight() > 0 || ask.conn.last_data() != heard {
            waiting = "quiescence never came (writes went on while the truth was read)".into();
            continue;
        }
        let cache = ask.conn.snapshot(collection);
        let (n, first) = compare(ask.user, &cache, &truth, KEPT_DIFFERENCES);
        if n == 0 {
            // The difference seen first is gone while no write was sent since: the truth changed
            // by itself (or the cache did without a word), so neither read can be trusted.
            if let Some((_, before)) = first_truth.as_ref().filter(|(at, _)| *at == epoch) {
                let (changed, _) = compare(ask.user, before, &truth, 0);
                if changed > 0 {
                    return Check::Unstable(format!(
                        "{TRUTH_CHANGED}: {changed} document field(s) or id(s) differed between two reads \
                         (the first read's {} difference(s) with the cache were gone at the second)",
                        seen_once.unwrap_or_default()
                    ));
                }
            }
            return Check::Agreed;
        }
        if seen_once.is_some() {
            return Check::Differed(n, first);
        }
        // A difference is looked at once more, over a fresh read, after another quiet spell.
        seen_once = Some(n);
        first_truth = Some((epoch, Rc::clone(&truth)));
        local.last.borrow_mut().take();
        tokio::time::sleep(audit.settle.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// The truth for this check: the worker's last read when it is the same and no write was sent
/// since, else a fresh one.
async fn truth<S: Session>(
    ask: &Ask<'_, S>,
    key: &str,
    epoch: u64,
    local: &Local,
    close: &dyn Fn(S),
    deadline: Instant,
) -> Result<Rc<Snapshot>, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    let Ok(_turn) = tokio::time::timeout(left, local.reading.lock()).await else {
        return Err("the worker's other truth reads took the whole timeout".into());
    };
    let shared = ask.generation.is_some();
    if let Some(t) = local.last.borrow().as_ref().filter(|t| shared && t.key == key && t.epoch == epoch) {
        return Ok(Rc::clone(&t.snapshot));
    }
    let snapshot = Rc::new(read(ask, local, close, deadline).await?);
    local.reads.set(local.reads.get() + 1);
    if shared {
        *local.last.borrow_mut() = Some(Truth { key: key.to_string(), epoch, snapshot: Rc::clone(&snapshot) });
    }
    Ok(snapshot)
}

/// Reads the truth over a new connection, made again while the connection is cut (a fault, a
/// server restarting) until the check's deadline.
async fn read<S: Session>(
    ask: &Ask<'_, S>,
    local: &Local,
    close: &dyn Fn(S),
    deadline: Instant,
) -> Result<Snapshot, String> {
    let mut pause = Duration::from_millis(50);
    loop {
        match read_once(ask, local, close, deadline).await {
            Err((_, true)) if Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err((why, _)) => return Err(why),
            Ok(s) => return Ok(s),
        }
    }
}

/// One truth read: logged in as the user, subscribed as the user is, then quiet for the settle
/// time (some servers send `ready` before a subscription's first documents). Err says whether
/// the connection was cut (worth making again).
async fn read_once<S: Session>(
    ask: &Ask<'_, S>,
    local: &Local,
    close: &dyn Fn(S),
    deadline: Instant,
) -> Result<Snapshot, (String, bool)> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let cut = |f: &S::Failure| matches!(f.class(), "connect" | "closed");
    let plan = local.plan.as_deref().unwrap_or(ask.target.plan);
    let to = Target { plan, tls: local.tls.as_ref(), traffic: &local.traffic, resume: None, ..ask.target };
    let (conn, _) = S::open(to, left()).await.map_err(|f| (format!("{}: {}", f.class(), f.detail()), cut(&f)))?;
    let result = async {
        conn.restore(ask.token, &ask.subs, left())
            .await
            .map_err(|(what, f)| (format!("{what}: {}", f.detail()), cut(&f)))?;
        let settle = ask.audit.settle;
        loop {
            if let Some(why) = conn.gone() {
                return Err((format!("the truth's connection closed: {why}"), true));
            }
            let now = Instant::now();
            let quiet = conn.last_data().map_or(settle, |at| now.saturating_duration_since(at));
            if quiet >= settle {
                return Ok(conn.snapshot(ask.audit.collection.as_deref()));
            }
            if now + (settle - quiet) > deadline {
                return Err((format!("the truth's connection was never quiet for {settle:?}"), false));
            }
            tokio::time::sleep(settle - quiet).await;
        }
    }
    .await;
    close(conn);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn the_barrier_opens_when_every_walking_user_came_and_forgets_the_ones_cut_off() {
        runtime().block_on(async {
            let shared = Shared::default();
            let (_a, _b) = (shared.walking(), shared.walking());
            let soon = Instant::now() + Duration::from_millis(100);
            // One of two came: not open by its deadline, and its arrival withdrawn.
            let alone = shared.gather(soon).await;
            assert_eq!(alone.err().as_deref(), Some("1 of 2 users reached the checkpoint together"));
            assert_eq!(shared.lock().arrived, 0);
            // A user cut off while waiting (its future dropped) withdraws too.
            let cut =
                tokio::time::timeout(Duration::from_millis(30), shared.gather(soon + Duration::from_secs(5))).await;
            assert!(cut.is_err());
            assert_eq!(shared.lock().arrived, 0);
            // Both come: open; one cut off while the other checks counts as left, so the last
            // leave releases the barrier for the next checkpoint.
            let later = Instant::now() + Duration::from_secs(5);
            let (x, y) = tokio::join!(shared.gather(later), shared.gather(later));
            let (x, y) = (x.unwrap(), y.unwrap());
            let generation = x.generation();
            assert!(shared.lock().open);
            drop(y);
            shared.leave(x, later).await;
            let b = shared.lock();
            assert_eq!((b.generation, b.open, b.arrived, b.done), (generation + 1, false, 0, 0));
        });
    }

    #[test]
    fn writes_are_in_flight_while_held() {
        let shared = Shared::default();
        let w = shared.write();
        assert_eq!((shared.in_flight(), shared.started()), (1, 1));
        drop(w);
        assert_eq!((shared.in_flight(), shared.started()), (0, 1));
    }
}

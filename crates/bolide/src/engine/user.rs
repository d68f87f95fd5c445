//! One virtual user as the engine walks it: its steps in order (a step that fails on a closed
//! connection resent after a reconnection, as Meteor's client does), connect and disconnect,
//! thinks, loops, `set`, captures, HTTP steps; everything else is its protocol's
//! (`realtime::Steps::perform`), through what a user lends a protocol's steps
//! ([`crate::session::User`], implemented here). A browser user's actions are in `page.rs`, an
//! audit checkpoint's in `audit.rs`.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::Value;

use crate::realtime::Steps;
use crate::scenario::template::{self, Vars};
use crate::scenario::{Capture, HttpStep, LoopOver, Step, StepKind, Think};
use crate::session::{Failure, Session, Stop, Target, User};
use crate::stats::vu::VuRecorder;

/// Browser pages open now, and the most open at once (for the browsers' cost per user).
#[derive(Default)]
pub(super) struct Pages {
    pub(super) open: std::sync::atomic::AtomicU64,
    pub(super) peak: std::sync::atomic::AtomicU64,
}

/// What every worker shares: the audit's and the bursts' barriers, the browser's DevTools
/// endpoint (port, path) and its pages.
pub(super) struct Shared {
    pub(super) audit: Option<std::sync::Arc<super::audit::Shared>>,
    pub(super) bursts: Option<std::sync::Arc<super::audit::Shared>>,
    pub(super) browser: Option<(u16, String)>,
    pub(super) pages: std::sync::Arc<Pages>,
}

/// One worker's state, shared by its users (one thread: `Rc` and `RefCell`).
pub(super) struct Worker {
    pub(super) plan: crate::plan::VuPlan,
    /// One recorder per target: a user records into its target's.
    pub(super) recs: Vec<RefCell<VuRecorder>>,
    pub(super) traffic: std::rc::Rc<RefCell<crate::proto::ws::Traffic>>,
    pub(super) tls: Option<crate::proto::http::tls::Connector>,
    /// TLS offering ALPN `h2`, for `http2: true` steps to https:// URLs (made at the first).
    pub(super) tls_h2: std::cell::OnceCell<crate::proto::http::tls::Connector>,
    pub(super) start: Instant,
    /// How long the phases last from `start` (arrivals end there).
    pub(super) phases: Duration,
    pub(super) alive: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Connections closing (their closing handshakes, a second at most): awaited before the
    /// worker ends, so that no user's last messages are lost to the end of the run.
    pub(super) closing: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    /// The run's audit, when it has checkpoints: what every worker shares, and this one's part.
    pub(super) audit: Option<std::sync::Arc<super::audit::Shared>>,
    pub(super) audit_local: super::audit::Local,
    /// The closed users' barrier before each walk, when the plan runs in bursts.
    pub(super) bursts: Option<std::sync::Arc<super::audit::Shared>>,
    /// The browser's DevTools endpoint (port, path), when the scenario has browser flows.
    pub(super) browser: Option<(u16, String)>,
    pub(super) pages: std::sync::Arc<Pages>,
    /// Which flow each arrival walks, by the flows' weights (empty: weights too large, by chance).
    pub(super) flow_cycle: Vec<usize>,
}

impl Worker {
    /// Lets `conn` close by itself, as a browser's page does, and keeps its task to await.
    pub(super) fn close<S: Session>(&self, conn: S) {
        if let Some(task) = conn.close() {
            let mut closing = self.closing.borrow_mut();
            closing.retain(|t| !t.is_finished());
            closing.push(task);
        }
    }
}

/// A user cut at its timeout is dropped with its page: the page no longer counts as open.
impl<S> Drop for Vu<'_, S> {
    fn drop(&mut self) {
        if self.page.take().is_some() {
            self.w.pages.open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A virtual user walking its flow: its session, its page, its variables and subscriptions.
pub(super) struct Vu<'w, S> {
    pub(super) w: &'w Worker,
    /// The index of this user's server in the plan's targets.
    pub(super) target: usize,
    /// Its arrival (the user's number in the audit's differences).
    pub(super) arrival: u64,
    /// A closed phase's user: when the phase ends (its checkpoints are a barrier with the other
    /// users, and it stops trying to reconnect once the phase is over).
    pub(super) until: Option<Instant>,
    /// Whether it made a check yet.
    pub(super) checked: bool,
    /// The last step failure, for the audit (a walk that stopped before its checkpoint).
    pub(super) last_failure: RefCell<Option<String>>,
    pub(super) conn: Option<S>,
    /// A browser user's page (opened at its first action; boxed: a protocol user holds 8 bytes).
    pub(super) page: Option<Box<crate::browser::page::Page>>,
    pub(super) vars: Vars,
    /// Subscriptions by name (the latest of each name): id and params.
    pub(super) subs: crate::vecmap::VecMap<String, (String, Vec<Value>)>,
    /// When this user last sent a method call (the start of reactive latency).
    pub(super) last_write: Option<Instant>,
    /// When the step now running began: a step that times out stays in its latency at this age.
    pub(super) step_began: Instant,
    /// A step is being sent again after a reconnection: a second cut is its failure.
    pub(super) resending: bool,
}

/// How long a looping user waits after a failed iteration before the next.
pub(super) const FAILED_ITERATION_PAUSE: Duration = Duration::from_millis(250);

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

fn micros(d: Duration) -> u64 {
    crate::proto::http::micros(d)
}

impl<S: Steps> Vu<'_, S> {
    /// This user's recorder (its target's).
    pub(super) fn rec(&self) -> std::cell::RefMut<'_, VuRecorder> {
        self.w.recs[self.target].borrow_mut()
    }

    fn endpoint(&self) -> &crate::proto::ws::Endpoint {
        &self.w.plan.targets[self.target].endpoint
    }

    /// Where this user's sessions go.
    pub(super) fn session_target(&self) -> Target<'_> {
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
    pub(super) async fn steps(&mut self, steps: &[Step]) -> Result<(), Stop> {
        for s in steps {
            self.step_began = Instant::now();
            match self.step(s).await {
                Ok(()) => {}
                Err(Stop { closed: true }) if self.may_reconnect(s) => {
                    // Boxed: held only while reconnecting.
                    Box::pin(self.reconnect(None)).await?;
                    // A call whose answer the closed connection lost is sent again (Meteor
                    // resends it), unless the scenario says `noRetry`.
                    if s.kind.no_retry() {
                        return Err(Stop { closed: true });
                    }
                    if s.kind.is_call() {
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

    pub(super) fn fail_with(&self, step: &Step, class: &str, detail: &str) -> Stop {
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
        self.may_reconnect(step) && !step.kind.no_retry()
    }

    /// A new session, with the user's live subscriptions started again (as Meteor's client does).
    pub(super) async fn reconnect(&mut self, within: Option<Duration>) -> Result<(), Stop> {
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
        // Logged in again with the user's token, then subscribed again, as Meteor's client does
        // (the session's `restore`); the new session's cache holds what the server sends again.
        let token = self.vars.get("loginToken").cloned();
        let subs: Vec<(String, Vec<Value>)> =
            self.subs.iter().map(|(name, (_, params))| (name.clone(), params.clone())).collect();
        let restored = {
            let _write = token.as_ref().and_then(|_| self.w.audit.as_deref().map(super::audit::Shared::write));
            conn.restore(token.as_ref(), &subs, deadline.saturating_sub(began.elapsed())).await
        };
        let ids = restored.map_err(|(_, f)| self.fail(&step, &f))?;
        for ((name, params), id) in subs.into_iter().zip(ids) {
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

    pub(super) fn ok(&self, step: &Step, latency: Duration) {
        let mut r = self.rec();
        let i = r.index(&step.name);
        r.step_ok(i, micros(latency));
    }

    pub(super) fn timeout(&self, t: Option<Duration>) -> Duration {
        t.unwrap_or(self.w.plan.scenario.config.step_timeout)
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
            StepKind::Http(h) => Box::pin(self.http(step, h)).await?,
            StepKind::Audit(a) => Box::pin(self.audit(step, a)).await,
            StepKind::Browser(a) => Box::pin(self.browser(step, a)).await?,
            // Everything else is the protocol's own (DDP's call, Socket.IO's emit, ...).
            // Boxed: a protocol step's future (a call in flight) is held only while it runs, so a
            // user that thinks or waits between steps holds a pointer, not the largest step.
            _ => Box::pin(S::perform(self, step)).await?,
        }
        Ok(())
    }

    pub(super) fn capture(&mut self, cap: &Capture, result: Value) {
        capture_into(&mut self.vars, cap, result);
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
            request: std::sync::Arc::from(web::build_request(&url, &spec)),
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
                let tls = target.tls.then(|| {
                    self.w
                        .tls_h2
                        .get_or_init(|| crate::proto::http::tls::Connector::with_alpn(self.w.plan.insecure, &[b"h2"]))
                });
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

/// What a protocol's steps may ask of this user.
impl<S: Steps> User for Vu<'_, S> {
    type Session = S;

    fn session(&self, step: &Step) -> Result<&S, Stop> {
        self.conn(step)
    }

    fn vars(&self) -> &Vars {
        &self.vars
    }

    fn vars_mut(&mut self) -> &mut Vars {
        &mut self.vars
    }

    fn timeout(&self, t: Option<Duration>) -> Duration {
        Vu::timeout(self, t)
    }

    fn phases_end(&self) -> Instant {
        self.w.start + self.w.phases
    }

    fn ok(&self, step: &Step, latency: Duration) {
        Vu::ok(self, step, latency)
    }

    fn called(&self, step: &Step, to_both: Duration, to_result: Duration, to_updated: Duration) {
        let mut r = self.rec();
        let i = r.index(&step.name);
        r.call_ok(i, micros(to_both), micros(to_result), micros(to_updated));
    }

    fn reactive(&self, micros: u64) {
        self.rec().reactive(micros);
    }

    fn fail_with(&self, step: &Step, class: &str, detail: &str) -> Stop {
        Vu::fail_with(self, step, class, detail)
    }

    fn capture(&mut self, cap: &Capture, value: Value) {
        Vu::capture(self, cap, value)
    }

    fn subs(&mut self) -> &mut crate::vecmap::VecMap<String, (String, Vec<Value>)> {
        &mut self.subs
    }

    fn last_write(&self) -> Option<Instant> {
        self.last_write
    }

    fn wrote(&mut self, at: Instant) {
        self.last_write = Some(at);
    }

    fn writing(&self) -> impl Sized + '_ {
        self.w.audit.as_deref().map(super::audit::Shared::write)
    }
}

/// A captured value into the user's variables: the part at the capture's path (`a.0.b`), set, or
/// appended to a list with `append`.
fn capture_into(vars: &mut Vars, cap: &Capture, result: Value) {
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
        match vars.entry(cap.var.clone()).or_insert_with(|| Value::Array(vec![])) {
            Value::Array(list) => list.push(v),
            slot => *slot = Value::Array(vec![v]),
        }
    } else {
        vars.insert(cap.var.clone(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cap(var: &str, path: Option<&str>, append: bool) -> Capture {
        Capture { var: var.into(), path: path.map(String::from), append }
    }

    #[test]
    fn a_capture_takes_its_path_and_sets_or_appends() {
        let mut vars = Vars::new();
        let result = json!([{ "_id": "a1", "tags": ["x", "y"] }]);
        capture_into(&mut vars, &cap("id", Some("0._id"), false), result.clone());
        assert_eq!(vars["id"], json!("a1"));
        capture_into(&mut vars, &cap("tag", Some("0.tags.1"), false), result.clone());
        assert_eq!(vars["tag"], json!("y"));
        capture_into(&mut vars, &cap("none", Some("3.x"), false), result.clone());
        assert_eq!(vars["none"], Value::Null, "a path that leads nowhere captures null");
        capture_into(&mut vars, &cap("ids", Some("0._id"), true), result.clone());
        capture_into(&mut vars, &cap("ids", Some("0._id"), true), result.clone());
        assert_eq!(vars["ids"], json!(["a1", "a1"]));
        // Appending to a value that is not a list makes it a list of the new value.
        capture_into(&mut vars, &cap("id", None, true), json!(5));
        assert_eq!(vars["id"], json!([5]));
    }

    #[test]
    fn reconnections_wait_as_meteors_client_does() {
        assert_eq!(retry_wait(0), Duration::from_millis(10));
        assert_eq!(retry_wait(1), Duration::from_millis(10));
        for (attempt, base) in [(2, 4.84), (3, 10.648), (30, 300.0)] {
            let w = retry_wait(attempt).as_secs_f64();
            assert!((base * 0.75..=base * 1.25).contains(&w), "attempt {attempt}: {w} s");
        }
    }
}

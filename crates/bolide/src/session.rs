//! The seam between the engine and the realtime protocols, below both. The VU engine
//! (`engine/vu.rs` and `engine/user.rs`: arrivals, users walking their flows, every step timed and
//! recorded, thinks, loops, captured values, reconnects, HTTP steps, audit checkpoints) holds a
//! user's [`Session`] and knows only what every protocol has: open it, whether it is gone and
//! since when, when data last came, what data it holds, what it must do again after a
//! reconnection, close it. A protocol's own steps (DDP's call, Socket.IO's emit, GraphQL's
//! execute) are performed by the protocol (`realtime::Steps::perform`), on its own session type,
//! through what a [`User`] lends them: its variables, its timeouts, its recorder, its failures.
//! A new realtime protocol is a folder under `realtime/` implementing both.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plan::VuPlan;
use crate::proto::http::tls::Connector;
use crate::proto::ws::Traffic;
use crate::scenario::template::Vars;
use crate::scenario::{Capture, Step};

/// A failed operation, as the recorder counts it.
pub trait Failure {
    /// The class in the result document's `errors_by_class` (`connect`, `closed`, `timeout`, ...).
    fn class(&self) -> &'static str;
    /// What failed, for people (a server's words in it made printable).
    fn detail(&self) -> String;
}

impl Failure for crate::proto::link::Failure {
    fn class(&self) -> &'static str {
        self.class
    }

    fn detail(&self) -> String {
        self.detail.clone()
    }
}

/// Where a session goes and what it counts into: the plan's target `target`, the worker's TLS
/// connector and its traffic counters; the user's variables, for settings that hold `{{ }}` (a
/// token in Socket.IO's `auth`, graphql-ws's `connectionParams`).
pub struct Target<'a> {
    pub plan: &'a VuPlan,
    pub target: usize,
    pub tls: Option<&'a Connector>,
    pub traffic: &'a Rc<RefCell<Traffic>>,
    pub vars: Option<&'a Vars>,
    /// The previous session's id, for a session that resumes it (a reconnection).
    pub resume: Option<&'a str>,
}

/// A failed step: already recorded; the user stops (or reconnects, when the connection closed
/// and the scenario says so).
#[derive(Debug)]
pub struct Stop {
    pub closed: bool,
}

/// One user's session with its server: what every realtime protocol has.
pub trait Session: Sized + 'static {
    type Failure: Failure;

    /// Whether a session closed under a user is made again with its subscriptions
    /// (`config.ddp.reconnect`, Meteor's client's behaviour); other protocols' users fail.
    const RECONNECTS: bool;

    /// Opens a session (transport and the protocol's handshake) within `timeout`; how long the
    /// handshake took.
    fn open(to: Target<'_>, timeout: Duration) -> impl Future<Output = Result<(Self, Duration), Self::Failure>>;

    /// When the server last sent data (a heartbeat aside), if it has: an audit's quiet time.
    fn last_data(&self) -> Option<Instant>;

    /// Whether the session is gone, and why.
    fn gone(&self) -> Option<String>;

    /// When the session closed, where the protocol keeps it.
    fn gone_at(&self) -> Option<Instant>;

    /// The server's id of the session, where the protocol has one (DDP's `connected`).
    fn session_id(&self) -> Option<String>;

    /// The data the server pushed, as the session holds it now (one collection or every one);
    /// empty for a protocol that keeps none.
    fn snapshot(&self, collection: Option<&str>) -> crate::stats::audit::Snapshot;

    /// Makes a new session hold what a user's held: logged in again with its token, its
    /// subscriptions (name and params) made again; their new ids, in order. A reconnection and
    /// the audit's read of the truth both ask it. A failure says what failed (`login`,
    /// `subscribe NAME`) beside the protocol's failure.
    fn restore(
        &self,
        token: Option<&Value>,
        subs: &[(String, Vec<Value>)],
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<String>, (String, Self::Failure)>>;

    /// Closes the session as a browser's page does; the task finishing the close, when one is
    /// left to await.
    fn close(self) -> Option<tokio::task::JoinHandle<()>>;
}

/// What a protocol's step may ask of the user performing it. The engine's user implements it;
/// the protocols' steps (`realtime/*/steps.rs`) see nothing else of the engine.
pub trait User {
    type Session: Session;

    /// The user's open session; a step before any `connect` fails (recorded) and stops it.
    fn session(&self, step: &Step) -> Result<&Self::Session, Stop>;
    /// The user's variables.
    fn vars(&self) -> &Vars;
    /// The user's variables, to set.
    fn vars_mut(&mut self) -> &mut Vars;
    /// A step's timeout, or the scenario's default.
    fn timeout(&self, t: Option<Duration>) -> Duration;
    /// When the run's phases end (as `-d` cut them): a step that reads for as long as the
    /// server sends stops there, so that the run's duration bounds it.
    fn phases_end(&self) -> Instant;
    /// The step succeeded in `latency`.
    fn ok(&self, step: &Step, latency: Duration);
    /// A call succeeded: its times to both its answer and its data (when a browser's callback
    /// would run), to the answer, and to the data the call changed being sent (DDP's `updated`).
    fn called(&self, step: &Step, to_both: Duration, to_result: Duration, to_updated: Duration);
    /// A reactive latency (a write to the data it changed arriving), in microseconds.
    fn reactive(&self, micros: u64);
    /// The step failed as `f` says; recorded, unless a reconnection resends it.
    fn fail(&self, step: &Step, f: &impl Failure) -> Stop {
        self.fail_with(step, f.class(), &f.detail())
    }
    /// The step failed with this class and detail.
    fn fail_with(&self, step: &Step, class: &str, detail: &str) -> Stop;
    /// A value captured into the user's variables.
    fn capture(&mut self, cap: &Capture, value: Value);
    /// The user's live subscriptions by name: their ids and params.
    fn subs(&mut self) -> &mut crate::vecmap::VecMap<String, (String, Vec<Value>)>;
    /// When the user last wrote (sent a method), the start of a reactive latency.
    fn last_write(&self) -> Option<Instant>;
    /// The user writes now (at `at`).
    fn wrote(&mut self, at: Instant);
    /// Held while a write is in flight: an audit's checkpoint waits for writes to end.
    fn writing(&self) -> impl Sized + '_;

    /// A value with the user's `{{ }}` rendered.
    fn render(&self, v: &Value) -> Value {
        crate::scenario::template::render(v, self.vars())
    }
    /// A text with the user's `{{ }}` rendered.
    fn text(&self, s: &str) -> String {
        match crate::scenario::template::render_str(s, self.vars()) {
            Value::String(t) => t,
            other => other.to_string(),
        }
    }
}

/// Whether a document (its id and fields) has every wanted field (`_id` compared with its id).
pub fn matches_fields(id: &str, fields: &serde_json::Map<String, Value>, want: &[(String, Value)]) -> bool {
    want.iter().all(|(k, v)| if k == "_id" { v.as_str() == Some(id) } else { fields.get(k) == Some(v) })
}

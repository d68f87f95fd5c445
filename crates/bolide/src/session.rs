//! The seam a realtime protocol implements: one virtual user's session with its server. The VU
//! engine (`engine/vu.rs`: arrivals, users walking their flows, every step timed and recorded,
//! thinks, loops, captured values, reconnects with the user's subscriptions, HTTP steps) talks to
//! a session only through [`Session`]: open it, call, subscribe and unsubscribe, wait for the data
//! the server pushes to show something, close it. DDP's is `ddp.rs` (`proto::ddp::Conn`, its
//! local collections behind `waitFor`); Socket.IO's is `socketio.rs` and graphql-ws's
//! `graphql.rs`. A new realtime protocol is a client under `proto/`, a `Session` here (the steps
//! other protocols have are methods whose defaults refuse), its steps' YAML in `scenario/`, and
//! its `scenario::Engine` chosen in `engine/vu.rs`'s `iteration`.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plan::DdpPlan;
use crate::proto::http::tls::Connector;
use crate::proto::ws::Traffic;
use crate::scenario::WaitFor;

/// A failed operation, as the recorder counts it.
pub trait Failure {
    /// The class in the result document's `errors_by_class` (`connect`, `closed`, `timeout`, ...).
    fn class(&self) -> &'static str;
    /// What failed, for people (a server's words in it made printable).
    fn detail(&self) -> String;
    /// A step this protocol has no such operation for (the scenario reader keeps each flow's
    /// steps to its engine's, so this is a mistake of ours, said as such).
    fn unsupported(what: &str) -> Self
    where
        Self: Sized;
}

impl Failure for crate::proto::link::Failure {
    fn class(&self) -> &'static str {
        self.class
    }

    fn detail(&self) -> String {
        self.detail.clone()
    }

    fn unsupported(what: &str) -> Self {
        crate::proto::link::Failure::new("scenario", format!("{what} is not a step of this protocol's flows"))
    }
}

/// What an emit waits for after it is sent.
pub enum Await<'a> {
    Nothing,
    /// The server's acknowledgement.
    Ack,
    /// Events named `channel`, until they answer `want`.
    Event {
        channel: &'a str,
        want: crate::realtime::socketio::wire::Want,
    },
}

/// An emit: when it was sent, when its answer came (when it was sent, for one that waits for
/// nothing), and the answer's arguments.
pub struct Emitted {
    pub sent: Instant,
    pub answered: Instant,
    pub args: Vec<Value>,
}

/// A call's answer and its times: to the answer, to the data the call changed being sent (DDP's
/// `updated`), and to both (when a browser's callback would run). The client's own type, so that a
/// session hands it over as it is (no wrapping future: a user's future stays as small as it was).
pub use crate::realtime::ddp::wire::CallOutcome as Called;

/// Where a session goes and what it counts into: the plan's target `target`, the worker's TLS
/// connector and its traffic counters; the user's variables, for settings that hold `{{ }}` (a
/// token in Socket.IO's `auth`, graphql-ws's `connectionParams`).
pub struct Target<'a> {
    pub plan: &'a DdpPlan,
    pub target: usize,
    pub tls: Option<&'a Connector>,
    pub traffic: &'a Rc<RefCell<Traffic>>,
    pub vars: Option<&'a crate::scenario::template::Vars>,
    /// The previous session's id, for a session that resumes it (a reconnection).
    pub resume: Option<&'a str>,
}

/// One user's session with its server.
pub trait Session: Sized + 'static {
    type Failure: Failure;

    /// Whether a session closed under a user is made again with its subscriptions
    /// (`config.ddp.reconnect`, Meteor's client's behaviour); other protocols' users fail.
    const RECONNECTS: bool = true;

    /// Opens a session (transport and the protocol's handshake) within `timeout`; how long the
    /// handshake took.
    fn open(to: Target<'_>, timeout: Duration) -> impl Future<Output = Result<(Self, Duration), Self::Failure>>;

    /// Calls a method (DDP `method`) and waits for its answer and its data.
    fn call(
        &self,
        method: &str,
        params: Vec<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Called, Self::Failure>> {
        let _ = (method, params, timeout);
        async { Err(Self::Failure::unsupported("call")) }
    }

    /// Subscribes and waits until the server says the first data is sent (DDP `ready`); the
    /// subscription's id and the time it took.
    fn subscribe(
        &self,
        name: &str,
        params: Vec<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(String, Duration), Self::Failure>> {
        let _ = (name, params, timeout);
        async { Err(Self::Failure::unsupported("a DDP subscribe")) }
    }

    /// Stops a subscription.
    fn unsubscribe(&self, id: &str) -> Result<(), Self::Failure> {
        let _ = id;
        Err(Self::Failure::unsupported("unsubscribe"))
    }

    /// Waits until the data the server pushed shows what `wf` asks (`want`: its fields rendered),
    /// counting changes from `since` (the user's last call); when it was seen. A timeout's failure
    /// says what the data held instead; `began` is when the step began.
    fn wait_for(
        &self,
        wf: &WaitFor,
        want: &[(String, Value)],
        since: Instant,
        began: Instant,
        timeout: Duration,
    ) -> impl Future<Output = Result<Instant, Self::Failure>> {
        let _ = (wf, want, since, began, timeout);
        async { Err(Self::Failure::unsupported("waitFor")) }
    }

    /// When the server last sent data (a heartbeat aside), if it has: an audit's quiet time.
    fn last_data(&self) -> Option<Instant>;

    /// The data the server pushed, as the session holds it now (one collection or every one).
    fn snapshot(&self, collection: Option<&str>) -> crate::stats::audit::Snapshot {
        let _ = collection;
        Default::default()
    }

    /// Whether the session is gone, and why.
    fn gone(&self) -> Option<String>;

    /// When the session closed, where the protocol keeps it.
    fn gone_at(&self) -> Option<Instant> {
        None
    }

    /// The server's id of the session, where the protocol has one (DDP's `connected`).
    fn session_id(&self) -> Option<String> {
        None
    }

    /// Closes the session as a browser's page does; the task finishing the close, when one is
    /// left to await.
    fn close(self) -> Option<tokio::task::JoinHandle<()>>;

    /// Sends an event (Socket.IO's emit: its name first in `args`) on namespace `to` (the target's
    /// own when None), then waits for what `reply` asks.
    fn emit(
        &self,
        to: Option<&str>,
        args: Vec<Value>,
        reply: Await<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Emitted, Self::Failure>> {
        let _ = (to, args, reply, timeout);
        async { Err(Self::Failure::unsupported("emit")) }
    }

    /// Waits until `count` events named `channel` on namespace `to` came that no earlier listen
    /// counted, and counts them; when the last was there.
    fn listen(
        &self,
        to: Option<&str>,
        channel: &str,
        count: u64,
        timeout: Duration,
    ) -> impl Future<Output = Result<Instant, Self::Failure>> {
        let _ = (to, channel, count, timeout);
        async { Err(Self::Failure::unsupported("listen")) }
    }

    /// A GraphQL query or mutation: when it was sent and completed, its result.
    fn execute(
        &self,
        query: &str,
        variables: Option<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(Instant, Instant, Value), Self::Failure>> {
        let _ = (query, variables, timeout);
        async { Err(Self::Failure::unsupported("execute")) }
    }

    /// A GraphQL subscription started and its first `count` `next` messages waited for: its id
    /// and the time to the first.
    fn live(
        &self,
        query: &str,
        variables: Option<Value>,
        count: u64,
        timeout: Duration,
    ) -> impl Future<Output = Result<(String, Duration), Self::Failure>> {
        let _ = (query, variables, count, timeout);
        async { Err(Self::Failure::unsupported("subscribe")) }
    }
}

/// Whether a document (its id and fields) has every wanted field (`_id` compared with its id).
pub fn matches_fields(id: &str, fields: &serde_json::Map<String, Value>, want: &[(String, Value)]) -> bool {
    want.iter().all(|(k, v)| if k == "_id" { v.as_str() == Some(id) } else { fields.get(k) == Some(v) })
}

//! The seam a realtime protocol implements: one virtual user's session with its server. The VU
//! engine (`engine/vu.rs`: arrivals, users walking their flows, every step timed and recorded,
//! thinks, loops, captured values, reconnects with the user's subscriptions, HTTP steps) talks to
//! a session only through [`Session`]: open it, call, subscribe and unsubscribe, wait for the data
//! the server pushes to show something, close it. DDP's is `ddp.rs` (`proto::ddp::Conn`, its
//! local collections behind `waitFor`). A new realtime protocol is a client under `proto/`, a
//! `Session` here, its steps' YAML in `scenario/`, and a choice of it where `engine/vu.rs`'s
//! `worker` starts each user (`iteration::<Conn>`).

pub mod ddp;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::plan::DdpPlan;
use crate::proto::ddp::Traffic;
use crate::proto::http::tls::Connector;
use crate::scenario::WaitFor;

/// A failed operation, as the recorder counts it.
pub trait Failure {
    /// The class in the result document's `errors_by_class` (`connect`, `closed`, `timeout`, ...).
    fn class(&self) -> &'static str;
    /// What failed, for people (a server's words in it made printable).
    fn detail(&self) -> String;
}

/// A call's answer and its times: to the answer, to the data the call changed being sent (DDP's
/// `updated`), and to both (when a browser's callback would run). The client's own type, so that a
/// session hands it over as it is (no wrapping future: a user's future stays as small as it was).
pub use crate::proto::ddp::CallOutcome as Called;

/// Where a session goes and what it counts into: the plan's target `target`, the worker's TLS
/// connector and its traffic counters.
pub struct Target<'a> {
    pub plan: &'a DdpPlan,
    pub target: usize,
    pub tls: Option<&'a Connector>,
    pub traffic: &'a Rc<RefCell<Traffic>>,
}

/// One user's session with its server.
pub trait Session: Sized + 'static {
    type Failure: Failure;

    /// Opens a session (transport and the protocol's handshake) within `timeout`; how long the
    /// handshake took.
    fn open(to: Target<'_>, timeout: Duration) -> impl Future<Output = Result<(Self, Duration), Self::Failure>>;

    /// Calls a method (DDP `method`) and waits for its answer and its data.
    fn call(
        &self,
        method: &str,
        params: Vec<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Called, Self::Failure>>;

    /// Subscribes and waits until the server says the first data is sent (DDP `ready`); the
    /// subscription's id and the time it took.
    fn subscribe(
        &self,
        name: &str,
        params: Vec<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(String, Duration), Self::Failure>>;

    /// Stops a subscription.
    fn unsubscribe(&self, id: &str) -> Result<(), Self::Failure>;

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
    ) -> impl Future<Output = Result<Instant, Self::Failure>>;

    /// When the server last sent data (a heartbeat aside), if it has: an audit's quiet time.
    fn last_data(&self) -> Option<Instant>;

    /// The data the server pushed, as the session holds it now (one collection or every one).
    fn snapshot(&self, collection: Option<&str>) -> crate::stats::audit::Snapshot;

    /// Whether the session is gone, and why.
    fn gone(&self) -> Option<String>;

    /// Closes the session as a browser's page does; the task finishing the close, when one is
    /// left to await.
    fn close(self) -> Option<tokio::task::JoinHandle<()>>;
}

/// Whether a document (its id and fields) has every wanted field (`_id` compared with its id).
pub fn matches_fields(id: &str, fields: &serde_json::Map<String, Value>, want: &[(String, Value)]) -> bool {
    want.iter().all(|(k, v)| if k == "_id" { v.as_str() == Some(id) } else { fields.get(k) == Some(v) })
}

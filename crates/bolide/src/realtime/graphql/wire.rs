//! GraphQL over WebSocket as the `graphql-ws` library's clients speak it (the
//! `graphql-transport-ws` subprotocol): `connection_init` with its payload (a token, say) and the
//! server's `connection_ack`; operations by id (`subscribe`), their `next` results, an `error` or
//! their `complete`; `ping` answered with `pong`; `complete` sent to stop a subscription. Queries
//! and mutations go over the same socket as subscriptions (one `next`, then `complete`).
//!
//! A `next` of a subscription that carries the configured field (a date the server stamped when
//! the data was written: a mutation of another user) gives a fan-out latency, as DDP's documents
//! do.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::proto::http::tls::Connector;
use crate::proto::link::{self, Failure, Link, Opening};
use crate::proto::ws::{Endpoint, Traffic};
use crate::scenario::settings::GraphqlConfig;

/// The subprotocol graphql-ws speaks.
pub const SUBPROTOCOL: &str = "graphql-transport-ws";

/// One operation in flight or done.
#[derive(Default)]
struct Op {
    subscription: bool,
    first: Option<Instant>,
    nexts: u64,
    taken: u64,
    /// A query's or mutation's result (`payload`; boxed: a live subscription holds 8 bytes for it).
    result: Option<Box<Value>>,
    errors: Option<String>,
    complete: bool,
}

#[derive(Default)]
pub struct State {
    acked: Option<Instant>,
    /// Operations in flight and live subscriptions by id (a handful: a list, not a table).
    ops: crate::vecmap::VecMap<String, Op>,
    /// Subscriptions bolide completed: a `next` the server sent before it saw the `complete`
    /// still gives its fan-out latency.
    completed: std::collections::HashSet<String>,
    pub closed: Option<String>,
    pub last_data: Option<Instant>,
}

pub struct Shared {
    pub state: RefCell<State>,
    pub notify: Notify,
    traffic: Rc<RefCell<Traffic>>,
    fanout_field: Option<String>,
}

/// The messages of GraphQL errors, joined.
fn messages(errors: &Value) -> String {
    match errors {
        Value::Array(list) => list
            .iter()
            .map(|e| e.get("message").and_then(Value::as_str).map(String::from).unwrap_or_else(|| e.to_string()))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

impl Shared {
    fn message(&self, text: &str, replies: &mut Vec<String>) {
        let now = Instant::now();
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            self.traffic.borrow_mut().protocol_errors += 1;
            return;
        };
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default();
        let mut st = self.state.borrow_mut();
        match msg.get("type").and_then(Value::as_str).unwrap_or_default() {
            "connection_ack" => st.acked = Some(now),
            "ping" => replies.push(json!({ "type": "pong" }).to_string()),
            "pong" => {}
            "next" => {
                st.last_data = Some(now);
                self.traffic.borrow_mut().count("graphql.next_received", 1);
                let Some(op) = st.ops.get_mut(id) else {
                    if st.completed.contains(id) {
                        self.fanout(msg.get("payload"));
                    }
                    drop(st);
                    self.notify.notify_waiters();
                    return;
                };
                op.nexts += 1;
                op.first.get_or_insert(now);
                let payload = msg.get("payload").cloned().unwrap_or(Value::Null);
                if let Some(e) = payload.get("errors").filter(|e| !e.is_null()) {
                    op.errors.get_or_insert_with(|| messages(e));
                }
                if op.subscription {
                    self.fanout(Some(&payload));
                } else {
                    op.result = Some(Box::new(payload));
                }
            }
            "error" => {
                self.traffic.borrow_mut().count("graphql.errors_received", 1);
                if let Some(op) = st.ops.get_mut(id) {
                    op.errors = Some(messages(msg.get("payload").unwrap_or(&Value::Null)));
                    op.complete = true;
                }
            }
            "complete" => {
                self.traffic.borrow_mut().count("graphql.complete_received", 1);
                if let Some(op) = st.ops.get_mut(id) {
                    op.complete = true;
                }
            }
            _ => self.traffic.borrow_mut().protocol_errors += 1,
        }
        drop(st);
        self.notify.notify_waiters();
    }

    fn gone(st: &State) -> Option<Failure> {
        st.closed.as_ref().map(|why| Failure::new("closed", why))
    }

    /// A subscription's `next` payload's age, from its data's stamped field.
    fn fanout(&self, payload: Option<&Value>) {
        let Some(field) = &self.fanout_field else { return };
        if let Some(ms) = payload.and_then(|p| p.get("data")).and_then(|d| link::stamped_ms(d, field, 3)) {
            link::record_fanout(&self.traffic, ms);
        }
    }
}

impl link::Receiver for Shared {
    fn text(&self, text: &str, replies: &mut Vec<String>) {
        self.message(text, replies);
    }

    fn ended(&self, why: String) {
        self.state.borrow_mut().closed.get_or_insert(why);
        self.notify.notify_waiters();
    }

    fn silence(&self) -> Option<Duration> {
        None
    }
}

/// What a server's `texts` do to a connection with subscription `1` and query `2` in flight and
/// subscription `3` stopped, without I/O (crates/fuzz drives it): its counts, its replies, and
/// `1`'s and `2`'s `next` messages and whether they completed.
pub fn feed(texts: &[&str]) -> (Traffic, Vec<String>, [(u64, bool); 2]) {
    let shared = Shared {
        state: Default::default(),
        notify: Notify::new(),
        traffic: Rc::default(),
        fanout_field: Some("createdAt".into()),
    };
    let mut st = shared.state.borrow_mut();
    st.ops.insert("1".into(), Op { subscription: true, ..Op::default() });
    st.ops.insert("2".into(), Op::default());
    st.completed.insert("3".into());
    drop(st);
    let mut replies = Vec::new();
    texts.iter().for_each(|text| shared.message(text, &mut replies));
    let st = shared.state.into_inner();
    let op = |id| st.ops.get(id).map_or((0, false), |op: &Op| (op.nexts, op.complete));
    (shared.traffic.take(), replies, [op("1"), op("2")])
}

/// An open graphql-ws connection (acknowledged).
pub struct GqlConn {
    shared: Rc<Shared>,
    link: Option<Link>,
    next_id: Cell<u64>,
    pub handshake: Duration,
}

/// Opens the WebSocket on `path`, sends `connection_init` and waits for `connection_ack`.
pub async fn connect(
    ep: &Endpoint,
    cfg: &GraphqlConfig,
    path: &str,
    tls: Option<&Connector>,
    traffic: Rc<RefCell<Traffic>>,
    timeout: Duration,
) -> Result<GqlConn, Failure> {
    let begin = Instant::now();
    // A server that echoes connectionParams or a header back does not get them shown.
    if let Some(p) = &cfg.init {
        crate::redact::sent_payload(p);
    }
    for (name, value) in &cfg.headers {
        crate::redact::sent_header(name, value);
    }
    let shared = Rc::new(Shared {
        state: RefCell::new(State::default()),
        notify: Notify::new(),
        traffic: Rc::clone(&traffic),
        fanout_field: cfg.fanout_field.clone(),
    });
    let opening =
        async {
            let how =
                Opening { path, headers: &cfg.headers, protocol: Some(SUBPROTOCOL), compression: cfg.compression };
            let l = Link::open(ep, &how, tls, traffic, shared.clone() as Rc<dyn link::Receiver>)
                .await
                .map_err(|f| if f.class == "timeout" { f } else { Failure { class: "connect", ..f } })?;
            let mut init = json!({ "type": "connection_init" });
            if let Some(p) = &cfg.init {
                init["payload"] = p.clone();
            }
            l.send(init.to_string());
            link::wait_on(&shared.state, &shared.notify, timeout, "connection_ack", Shared::gone, |st| st.acked)
                .await
                .map_err(|f| if f.class == "timeout" { f } else { Failure { class: "connect", ..f } })?;
            Ok::<_, Failure>(l)
        };
    let l = match tokio::time::timeout(timeout, opening).await {
        Ok(r) => r?,
        Err(_) => return Err(Failure::new("timeout", format!("no connection_ack within {timeout:?}"))),
    };
    shared.traffic.borrow_mut().count("graphql.connections", 1);
    Ok(GqlConn { shared, link: Some(l), next_id: Cell::new(1), handshake: begin.elapsed() })
}

impl GqlConn {
    fn send(&self, msg: Value) -> Result<(), Failure> {
        if let Some(f) = Shared::gone(&self.shared.state.borrow()) {
            return Err(f);
        }
        match self.link.as_ref().is_some_and(|l| l.send(msg.to_string())) {
            true => Ok(()),
            false => Err(Failure::new("closed", "the connection's task ended")),
        }
    }

    fn start(&self, query: &str, variables: Option<Value>, subscription: bool) -> Result<(String, Instant), Failure> {
        let id = self.next_id.get().to_string();
        self.next_id.set(self.next_id.get() + 1);
        self.shared.state.borrow_mut().ops.insert(id.clone(), Op { subscription, ..Op::default() });
        let mut payload = json!({ "query": query });
        if let Some(v) = variables {
            payload["variables"] = v;
        }
        let sent = Instant::now();
        self.send(json!({ "id": id, "type": "subscribe", "payload": payload }))?;
        let mut t = self.shared.traffic.borrow_mut();
        t.count("graphql.operations", 1);
        if subscription {
            t.count("graphql.subscriptions", 1);
        }
        drop(t);
        Ok((id, sent))
    }

    async fn wait<T>(
        &self,
        timeout: Duration,
        what: &str,
        ready: impl FnMut(&mut State) -> Option<T>,
    ) -> Result<T, Failure> {
        link::wait_on(&self.shared.state, &self.shared.notify, timeout, what, Shared::gone, ready).await
    }

    /// A query or a mutation: its result (`payload`: `data`, maybe `errors`), when it was sent and
    /// when it completed. GraphQL errors fail it (class `graphql`).
    pub async fn execute(
        &self,
        query: &str,
        variables: Option<Value>,
        timeout: Duration,
    ) -> Result<(Instant, Instant, Value), Failure> {
        let (id, sent) = self.start(query, variables, false)?;
        let done = self
            .wait(timeout, "the operation's result", |st| {
                let op = st.ops.get(&id)?;
                op.complete.then(|| st.ops.remove(&id).expect("present"))
            })
            .await;
        let op = match done {
            Ok(op) => op,
            Err(f) => {
                self.shared.state.borrow_mut().ops.remove(&id);
                return Err(f);
            }
        };
        if let Some(e) = op.errors {
            return Err(Failure::new("graphql", e));
        }
        Ok((sent, Instant::now(), op.result.map_or(Value::Null, |r| *r)))
    }

    /// Starts a subscription without waiting for anything: its id.
    pub fn subscribe_only(&self, query: &str, variables: Option<Value>) -> Result<String, Failure> {
        self.start(query, variables, true).map(|(id, _)| id)
    }

    /// Starts a subscription and waits for its first `next`: its id and the time to it.
    pub async fn subscribe(
        &self,
        query: &str,
        variables: Option<Value>,
        timeout: Duration,
    ) -> Result<(String, Duration), Failure> {
        let (id, sent) = self.start(query, variables, true)?;
        let first = self
            .wait(timeout, "the subscription's first next", |st| {
                let op = st.ops.get(&id)?;
                match (&op.errors, op.first) {
                    (Some(e), _) => Some(Err(e.clone())),
                    (None, Some(at)) => Some(Ok(at)),
                    (None, None) if op.complete => Some(Err("completed before any next".into())),
                    _ => None,
                }
            })
            .await;
        match first {
            Ok(Ok(at)) => Ok((id, at - sent)),
            Ok(Err(e)) => {
                self.shared.state.borrow_mut().ops.remove(&id);
                Err(Failure::new("graphql", e))
            }
            // Not answered in time: stopped, so that the server does not feed it on.
            Err(f) => {
                let _ = self.complete(&id);
                Err(f)
            }
        }
    }

    /// Waits until `count` `next` messages of subscription `id` not yet taken came, and takes them.
    pub async fn take_nexts(&self, id: &str, count: u64, timeout: Duration) -> Result<Instant, Failure> {
        let what = format!("{count} next messages");
        let got = self
            .wait(timeout, &what, |st| {
                let op = st.ops.get_mut(id)?;
                if op.nexts - op.taken >= count {
                    op.taken += count;
                    return Some(Ok(Instant::now()));
                }
                op.complete.then(|| Err(format!("the subscription completed after {} next messages", op.nexts)))
            })
            .await?;
        got.map_err(|e| Failure::new("graphql", e))
    }

    /// Stops a subscription (`complete`).
    pub fn complete(&self, id: &str) -> Result<(), Failure> {
        let mut st = self.shared.state.borrow_mut();
        if st.ops.remove(id).is_some_and(|op| op.subscription && !op.complete) {
            st.completed.insert(id.to_string());
        }
        drop(st);
        self.send(json!({ "id": id, "type": "complete" }))?;
        self.shared.traffic.borrow_mut().count("graphql.complete_sent", 1);
        Ok(())
    }

    pub fn shared(&self) -> &Rc<Shared> {
        &self.shared
    }

    pub fn close(mut self) -> Option<tokio::task::JoinHandle<()>> {
        self.link.take().and_then(Link::close)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_move_operations() {
        let shared = Shared {
            state: RefCell::new(State::default()),
            notify: Notify::new(),
            traffic: Rc::new(RefCell::new(Traffic::default())),
            fanout_field: Some("createdAt".into()),
        };
        shared.state.borrow_mut().ops.insert("1".into(), Op { subscription: true, ..Op::default() });
        shared.state.borrow_mut().ops.insert("2".into(), Op::default());
        let mut replies = Vec::new();
        shared.message(r#"{"type":"connection_ack"}"#, &mut replies);
        shared.message(r#"{"type":"ping"}"#, &mut replies);
        assert_eq!(replies, vec![r#"{"type":"pong"}"#.to_string()]);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        shared.message(
            &format!(r#"{{"id":"1","type":"next","payload":{{"data":{{"added":{{"createdAt":{now}}}}}}}}}"#),
            &mut replies,
        );
        shared.message(r#"{"id":"2","type":"next","payload":{"data":{"x":1}}}"#, &mut replies);
        shared.message(r#"{"id":"2","type":"complete"}"#, &mut replies);
        shared.message(r#"{"id":"1","type":"error","payload":[{"message":"boom"}]}"#, &mut replies);
        shared.message("not json", &mut replies);
        let st = shared.state.borrow();
        assert!(st.acked.is_some());
        assert_eq!(st.ops.get("1").unwrap().nexts, 1);
        assert_eq!(st.ops.get("1").unwrap().errors.as_deref(), Some("boom"));
        assert_eq!(st.ops.get("2").unwrap().result.as_ref().unwrap()["data"]["x"], 1);
        assert!(st.ops.get("2").unwrap().complete);
        assert_eq!(shared.traffic.borrow().fanout_us.len(), 1);
        assert_eq!(shared.traffic.borrow().protocol_errors, 1);
    }
}

//! DDP's session: `proto::ddp::Conn` (WebSocket or SockJS, Meteor's client's heartbeats,
//! compression and local collections), and `waitFor` over those collections: a document that
//! appears, changes, matches or disappears, looked for among the changes since the last look.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proto::ws::DdpFailure;
use crate::realtime::ddp::wire::{self as client, Conn};
use crate::scenario::{Until, WaitFor};
use crate::session::{matches_fields, Target};

impl crate::session::Failure for DdpFailure {
    fn class(&self) -> &'static str {
        DdpFailure::class(self)
    }

    fn detail(&self) -> String {
        DdpFailure::detail(self)
    }
}

impl crate::session::Session for Conn {
    type Failure = DdpFailure;
    const RECONNECTS: bool = true;

    async fn open(to: Target<'_>, timeout: Duration) -> Result<(Conn, Duration), DdpFailure> {
        let endpoint = &to.plan.targets[to.target].endpoint;
        let (cfg, traffic) = (&to.plan.client, std::rc::Rc::clone(to.traffic));
        // A reconnection names the session it resumes, as Meteor's client does.
        let resumed;
        let cfg = match to.resume {
            Some(id) => {
                resumed = crate::proto::ws::ClientConfig { resume: Some(id.to_string()), ..cfg.clone() };
                &resumed
            }
            None => cfg,
        };
        let conn = match cfg.transport {
            crate::proto::ws::Transport::XhrPolling | crate::proto::ws::Transport::XhrStreaming => {
                crate::realtime::ddp::xhr::connect(endpoint, cfg, to.tls, traffic, timeout).await?
            }
            _ => client::connect(endpoint, cfg, to.tls, traffic, timeout).await?,
        };
        let handshake = conn.handshake;
        Ok((conn, handshake))
    }

    fn last_data(&self) -> Option<Instant> {
        self.shared().state.borrow().last_data
    }

    fn snapshot(&self, collection: Option<&str>) -> crate::stats::audit::Snapshot {
        Conn::snapshot(self, collection)
    }

    fn gone(&self) -> Option<String> {
        self.closed()
    }

    fn gone_at(&self) -> Option<Instant> {
        self.closed_at()
    }

    fn session_id(&self) -> Option<String> {
        Conn::session_id(self)
    }

    /// Meteor's client after a reconnection: logged in again with the user's resume token, then
    /// subscribed again; the new session's cache holds what the server sends again, nothing else.
    async fn restore(
        &self,
        token: Option<&Value>,
        subs: &[(String, Vec<Value>)],
        timeout: Duration,
    ) -> Result<Vec<String>, (String, DdpFailure)> {
        let began = Instant::now();
        let left = || timeout.saturating_sub(began.elapsed());
        if let Some(token) = token {
            crate::redact::sent_payload(token);
            let login = serde_json::json!({ "resume": token });
            self.call("login", vec![login], left()).await.map_err(|f| ("login".to_string(), f))?;
        }
        let mut ids = Vec::with_capacity(subs.len());
        for (name, params) in subs {
            let (id, _) =
                self.subscribe(name, params.clone(), left()).await.map_err(|f| (format!("subscribe {name}"), f))?;
            ids.push(id);
        }
        Ok(ids)
    }

    fn close(self) -> Option<tokio::task::JoinHandle<()>> {
        Conn::close(self)
    }
}

/// DDP's `waitFor`, over the session's local collections.
impl Conn {
    /// Waits until the data the server pushed shows what `wf` asks (`want`: its fields rendered),
    /// counting changes from `since` (the user's last call); when it was seen. A timeout's failure
    /// says what the data held instead; `began` is when the step began.
    pub async fn wait_for(
        &self,
        wf: &WaitFor,
        want: &[(String, Value)],
        since: Instant,
        began: Instant,
        timeout: Duration,
    ) -> Result<Instant, DdpFailure> {
        let conn = self;
        let collection = wf.collection.clone();
        let until = wf.until;
        // The first look examines every document; later looks only those changed since.
        conn.shared().state.borrow_mut().reset_changes();
        let mut first = true;
        let seen = conn
            .wait(timeout, "matching change", |st| {
                let everything = std::mem::take(&mut first) || st.changes_overflowed;
                let changed: Vec<(std::rc::Rc<str>, std::rc::Rc<str>)> = std::mem::take(&mut st.changes);
                st.changes_overflowed = false;
                let docs = st.collections.get(collection.as_str());
                let ok = |id: &str, d: &client::Doc| match until {
                    Until::Matches => Some(d.changed_at),
                    Until::Appears => (d.added_at >= since).then_some(d.added_at),
                    Until::Changes => (d.changed_at >= since && d.changed_at > d.added_at).then_some(d.changed_at),
                    Until::Disappears => {
                        let _ = id;
                        None
                    }
                };
                if until != Until::Disappears {
                    if everything {
                        // Recent changes first (what a waitFor usually wants), then everything.
                        let recent = st
                            .recent
                            .iter()
                            .rev()
                            .filter(|(c, _)| **c == *collection)
                            .filter_map(|(_, id)| docs.and_then(|d| d.get_key_value(&**id)))
                            .filter(|(id, d)| matches_fields(id, &d.fields, want))
                            .find_map(|(id, d)| ok(id, d));
                        if recent.is_some() {
                            return recent;
                        }
                    }
                    let candidates: Box<dyn Iterator<Item = (&std::rc::Rc<str>, &client::Doc)>> = if everything {
                        Box::new(docs.into_iter().flat_map(|d| d.iter()))
                    } else {
                        Box::new(
                            changed
                                .iter()
                                .filter(|(c, _)| **c == *collection)
                                .filter_map(|(_, id)| docs.and_then(|d| d.get_key_value(&**id))),
                        )
                    };
                    return candidates
                        .filter(|(id, d)| matches_fields(id, &d.fields, want))
                        .filter_map(|(id, d)| ok(id, d))
                        .max();
                }
                // Disappears: look again only when a document of this collection went or came.
                if !everything && !changed.iter().any(|(c, _)| **c == *collection) {
                    return None;
                }
                let by_id = want.iter().find(|(k, _)| k == "_id").and_then(|(_, v)| v.as_str());
                let still = match (by_id, docs) {
                    (Some(id), Some(d)) => d.get(id).is_some_and(|doc| matches_fields(id, &doc.fields, want)),
                    (Some(_), None) => false,
                    (None, _) => {
                        docs.into_iter().flat_map(|d| d.iter()).any(|(id, d)| matches_fields(id, &d.fields, want))
                    }
                };
                if still {
                    return None;
                }
                // When the last matching document went (or now, if none ever came).
                let gone = st
                    .removed
                    .iter()
                    .filter(|(c, id, f, _)| *c == collection && matches_fields(id, f, want))
                    .map(|(_, _, _, at)| *at)
                    .max();
                Some(gone.unwrap_or_else(Instant::now))
            })
            .await;
        conn.shared().state.borrow_mut().stop_waiting();
        match seen {
            Err(DdpFailure::Timeout(why)) => {
                let held = what_the_cache_holds(&conn.shared().state.borrow(), wf, want, began, since);
                Err(DdpFailure::Timeout(format!("{why}: {held}")))
            }
            other => other,
        }
    }
}

/// For a waitFor that timed out: what the local cache holds that matches, and when it came, in
/// words ("taskCollection has 1 matching document, added 3 ms before this step began").
fn what_the_cache_holds(
    st: &client::State,
    wf: &WaitFor,
    want: &[(String, Value)],
    began: Instant,
    since: Instant,
) -> String {
    let when = |at: Instant| {
        if at >= began {
            format!("{} ms after this step began", (at - began).as_millis())
        } else {
            format!("{} ms before this step began", (began - at).as_millis())
        }
    };
    let matching: Vec<&client::Doc> = st
        .collections
        .get(wf.collection.as_str())
        .into_iter()
        .flat_map(|d| d.iter())
        .filter(|(id, d)| matches_fields(id, &d.fields, want))
        .map(|(_, d)| d)
        .collect();
    let Some(newest) = matching.iter().max_by_key(|d| d.added_at) else {
        return format!("{} has no matching document", wf.collection);
    };
    let n = matching.len();
    let plural = if n == 1 { "document" } else { "documents" };
    let mut text = format!("{} has {n} matching {plural}, ", wf.collection);
    if n > 1 {
        text.push_str("the newest ");
    }
    text.push_str(&format!("added {}", when(newest.added_at)));
    if newest.changed_at > newest.added_at {
        text.push_str(&format!(", last changed {}", when(newest.changed_at)));
    }
    match wf.until {
        Until::Appears | Until::Changes if since < began => {
            text.push_str(&format!(
                "; the step counts what came after the user's last call, sent {} ms before it began",
                (began - since).as_millis()
            ));
        }
        _ => {}
    }
    text
}

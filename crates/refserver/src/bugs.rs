//! Server bugs `bolide serve --inject-bug NAME` reproduces (off by default), of the kinds
//! Meteor's change-stream and merge-box reports describe, so that the audit can be shown to catch
//! each: a message lost, sent too early or twice, a stale or leaked document. Each acts on what
//! one session sends (its merge box's output), with a little state of its own per session.

use std::collections::HashMap;

use ddp::message::{Fields, Message};
use serde_json::Value;

/// One bug to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// The second `changed` of a document (two racing writes to it) is never sent.
    LostChanged,
    /// The session's first `removed` is never sent.
    LostRemoved,
    /// `ready` before a subscription's initial `added`s, which follow a second later.
    ReadyEarly,
    /// `ready` sent twice for one subscription.
    ReadyTwice,
    /// On a session the client resumed (its `connect` named its previous session), a document
    /// sent again carries its fields' first values, not their latest.
    StaleAfterReconnect,
    /// A removed document is sent again (`added`) when the session's next document is removed,
    /// as a limit window that moves back over it.
    LimitReappear,
    /// A document of another user's (no) publication is sent to every `fetchTasks` subscriber.
    Leak,
    /// The session's first `added` is sent twice (for a document the client holds).
    DupAdded,
}

impl Bug {
    pub const ALL: [Bug; 8] = [
        Bug::LostChanged,
        Bug::LostRemoved,
        Bug::ReadyEarly,
        Bug::ReadyTwice,
        Bug::StaleAfterReconnect,
        Bug::LimitReappear,
        Bug::Leak,
        Bug::DupAdded,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::LostChanged => "lost-changed",
            Bug::LostRemoved => "lost-removed",
            Bug::ReadyEarly => "ready-early",
            Bug::ReadyTwice => "ready-twice",
            Bug::StaleAfterReconnect => "stale-after-reconnect",
            Bug::LimitReappear => "limit-reappear",
            Bug::Leak => "leak",
            Bug::DupAdded => "dup-added",
        }
    }

    pub fn named(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// What a session's bug remembers.
#[derive(Debug, Default)]
pub struct BugState {
    /// The client resumed a previous session (its `connect` carried `session`).
    resumed: bool,
    /// `changed` messages sent per document id.
    changes: HashMap<String, u32>,
    /// The first `removed` was held back / the first `added` doubled.
    done_once: bool,
    /// The fields last sent per document (limit-reappear), and the first document removed.
    sent: HashMap<String, Fields>,
    first_removed: Option<(String, String, Fields)>,
}

impl BugState {
    /// A session's state; `resumed` when its client named its previous session.
    pub fn new(resumed: bool) -> BugState {
        BugState { resumed, ..BugState::default() }
    }
}

/// What the session sends of `out` with `bug` in it. `first_seen` holds every document's fields
/// as first sent by any session (what stale-after-reconnect sends again).
pub fn apply(
    bug: Bug,
    st: &mut BugState,
    first_seen: &std::sync::Mutex<HashMap<String, Fields>>,
    out: Vec<Message>,
) -> Vec<Message> {
    let mut sent = Vec::with_capacity(out.len() + 1);
    for m in out {
        match (bug, &m) {
            (Bug::LostChanged, Message::Changed { id, .. }) => {
                let n = st.changes.entry(id.clone()).or_default();
                *n += 1;
                if *n == 2 {
                    continue;
                }
            }
            (Bug::LostRemoved, Message::Removed { .. }) if !st.done_once => {
                st.done_once = true;
                continue;
            }
            (Bug::DupAdded, Message::Added { .. }) if !st.done_once => {
                st.done_once = true;
                sent.push(m.clone());
            }
            (Bug::StaleAfterReconnect, Message::Added { collection, id, fields }) => {
                let mut first = first_seen.lock().unwrap_or_else(|p| p.into_inner());
                let old = first.entry(id.clone()).or_insert_with(|| fields.clone());
                if st.resumed {
                    let mut stale = fields.clone();
                    for (k, v) in old.iter() {
                        if stale.contains_key(k) {
                            stale.insert(k.clone(), v.clone());
                        }
                    }
                    sent.push(Message::Added { collection: collection.clone(), id: id.clone(), fields: stale });
                    continue;
                }
            }
            (Bug::LimitReappear, Message::Added { id, fields, .. }) => {
                st.sent.insert(id.clone(), fields.clone());
            }
            (Bug::LimitReappear, Message::Changed { id, fields, cleared, .. }) => {
                if let Some(doc) = st.sent.get_mut(id) {
                    for (k, v) in fields {
                        doc.insert(k.clone(), v.clone());
                    }
                    for k in cleared {
                        doc.remove(k);
                    }
                }
            }
            (Bug::LimitReappear, Message::Removed { collection, id }) => {
                let fields = st.sent.remove(id).unwrap_or_default();
                match st.first_removed.take() {
                    None if !st.done_once => st.first_removed = Some((collection.clone(), id.clone(), fields)),
                    Some((c, first, f)) => {
                        // The window moved back over the first one removed.
                        st.done_once = true;
                        sent.push(m);
                        sent.push(Message::Added { collection: c, id: first, fields: f });
                        continue;
                    }
                    None => {}
                }
            }
            _ => {}
        }
        sent.push(m);
    }
    sent
}

/// The document leak sends to a `fetchTasks` subscriber of session `session`.
pub fn leaked(collection: &str, session: &str) -> Message {
    let mut fields = Fields::new();
    fields.insert("description".into(), Value::String("another user's private task".into()));
    fields.insert("sessionId".into(), Value::String(format!("not-{session}")));
    Message::Added { collection: collection.into(), id: format!("leaked-{session}"), fields }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn added(id: &str, d: &str) -> Message {
        let mut f = Fields::new();
        f.insert("description".into(), Value::String(d.into()));
        Message::Added { collection: "t".into(), id: id.into(), fields: f }
    }

    fn changed(id: &str, d: &str) -> Message {
        let mut f = Fields::new();
        f.insert("description".into(), Value::String(d.into()));
        Message::Changed { collection: "t".into(), id: id.into(), fields: f, cleared: vec![] }
    }

    fn removed(id: &str) -> Message {
        Message::Removed { collection: "t".into(), id: id.into() }
    }

    #[test]
    fn each_bug_changes_what_a_session_sends_as_its_name_says() {
        let first = std::sync::Mutex::new(HashMap::new());
        let run = |bug, msgs: Vec<Message>, st: &mut BugState| apply(bug, st, &first, msgs);
        let mut st = BugState::default();
        let out = run(
            Bug::LostChanged,
            vec![changed("a", "1"), changed("a", "2"), changed("a", "3"), changed("b", "1")],
            &mut st,
        );
        assert_eq!(out, [changed("a", "1"), changed("a", "3"), changed("b", "1")]);
        let mut st = BugState::default();
        assert_eq!(run(Bug::LostRemoved, vec![removed("a"), removed("b")], &mut st), [removed("b")]);
        let mut st = BugState::default();
        assert_eq!(
            run(Bug::DupAdded, vec![added("a", "x"), added("b", "y")], &mut st),
            [added("a", "x"), added("a", "x"), added("b", "y")]
        );
        let mut st = BugState::default();
        let out = run(
            Bug::LimitReappear,
            vec![added("a", "x"), added("b", "y"), removed("a"), removed("b"), removed("c")],
            &mut st,
        );
        assert_eq!(out, [added("a", "x"), added("b", "y"), removed("a"), removed("b"), added("a", "x"), removed("c")]);
        // Stale: a resumed session gets the first values of a document another session saw.
        let mut other = BugState::default();
        run(Bug::StaleAfterReconnect, vec![added("a", "first")], &mut other);
        let mut fresh = BugState::default();
        assert_eq!(run(Bug::StaleAfterReconnect, vec![added("a", "now")], &mut fresh), [added("a", "now")]);
        let mut resumed = BugState { resumed: true, ..BugState::default() };
        assert_eq!(run(Bug::StaleAfterReconnect, vec![added("a", "now")], &mut resumed), [added("a", "first")]);
        assert_eq!(Bug::ALL.map(|b| Bug::named(b.name())), Bug::ALL.map(Some));
    }
}

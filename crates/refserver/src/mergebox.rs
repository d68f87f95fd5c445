//! The merge box of one session (Meteor's SERVER_MERGE strategy): which documents the client has,
//! their fields, and which subscriptions cover each. A document is `added` when its first
//! subscription publishes it, `removed` when its last one drops it, `changed` only for real changes
//! in between. Every field carries the subscriptions that publish it, in precedence order, so
//! overlapping subscriptions with different fields merge as Meteor's do.

use std::collections::HashMap;

use ddp::message::{Fields, Message};
use serde_json::Value;

/// One field's value as each subscription publishes it; the first entry wins.
#[derive(Debug, Default)]
struct FieldView {
    by_sub: Vec<(String, Value)>,
}

#[derive(Debug, Default)]
struct DocView {
    subs: Vec<String>,
    fields: HashMap<String, FieldView>,
    /// Field names in first-seen order, so `added` keeps the publisher's order.
    order: Vec<String>,
}

impl DocView {
    fn visible(&self) -> Fields {
        self.order
            .iter()
            .filter_map(|k| self.fields.get(k).and_then(|f| f.by_sub.first()).map(|(_, v)| (k.clone(), v.clone())))
            .collect()
    }

    /// Sets `sub`'s value of `key`; returns the new visible value if it changed.
    fn set(&mut self, sub: &str, key: &str, value: Value) -> Option<Value> {
        if !self.fields.contains_key(key) {
            self.order.push(key.to_string());
        }
        let view = self.fields.entry(key.to_string()).or_default();
        let before = view.by_sub.first().map(|(_, v)| v.clone());
        match view.by_sub.iter_mut().find(|(s, _)| s == sub) {
            Some(slot) => slot.1 = value,
            None => view.by_sub.push((sub.to_string(), value)),
        }
        let after = view.by_sub.first().map(|(_, v)| v.clone());
        (after != before).then(|| after.expect("just set"))
    }

    /// Drops `sub`'s value of `key`; returns Some(new visible value or None if cleared) on change.
    fn unset(&mut self, sub: &str, key: &str) -> Option<Option<Value>> {
        let view = self.fields.get_mut(key)?;
        let before = view.by_sub.first().map(|(_, v)| v.clone());
        view.by_sub.retain(|(s, _)| s != sub);
        let after = view.by_sub.first().map(|(_, v)| v.clone());
        if view.by_sub.is_empty() {
            self.fields.remove(key);
            self.order.retain(|k| k != key);
        }
        (after != before).then_some(after)
    }
}

/// The client's view of every collection, for one session.
#[derive(Debug, Default)]
pub struct MergeBox {
    collections: HashMap<String, HashMap<String, DocView>>,
    /// Documents held, each counted once per subscription that publishes it.
    copies: usize,
}

impl MergeBox {
    /// Number of documents the client holds.
    pub fn len(&self) -> usize {
        self.collections.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Documents held, each counted once per subscription that publishes it (what a session's
    /// memory grows with).
    pub fn copies(&self) -> usize {
        self.copies
    }

    /// `sub` publishes document `id` with `fields`.
    pub fn added(&mut self, sub: &str, collection: &str, id: &str, fields: &Fields, out: &mut Vec<Message>) {
        let docs = self.collections.entry(collection.to_string()).or_default();
        match docs.get_mut(id) {
            None => {
                let mut doc = DocView { subs: vec![sub.to_string()], ..DocView::default() };
                self.copies += 1;
                for (k, v) in fields {
                    doc.set(sub, k, v.clone());
                }
                out.push(Message::Added { collection: collection.into(), id: id.into(), fields: doc.visible() });
                docs.insert(id.to_string(), doc);
            }
            Some(doc) => {
                if !doc.subs.iter().any(|s| s == sub) {
                    doc.subs.push(sub.to_string());
                    self.copies += 1;
                }
                let mut changed = Fields::new();
                for (k, v) in fields {
                    if let Some(now) = doc.set(sub, k, v.clone()) {
                        changed.insert(k.clone(), now);
                    }
                }
                if !changed.is_empty() {
                    out.push(Message::Changed {
                        collection: collection.into(),
                        id: id.into(),
                        fields: changed,
                        cleared: vec![],
                    });
                }
            }
        }
    }

    /// `sub` changes document `id`: new values in `fields`, removed fields in `cleared`.
    pub fn changed(
        &mut self,
        sub: &str,
        collection: &str,
        id: &str,
        fields: &Fields,
        cleared: &[String],
        out: &mut Vec<Message>,
    ) {
        let Some(doc) = self.collections.get_mut(collection).and_then(|d| d.get_mut(id)) else { return };
        let mut now = Fields::new();
        let mut gone = Vec::new();
        for (k, v) in fields {
            if let Some(v) = doc.set(sub, k, v.clone()) {
                now.insert(k.clone(), v);
            }
        }
        for k in cleared {
            match doc.unset(sub, k) {
                Some(Some(v)) => {
                    now.insert(k.clone(), v);
                }
                Some(None) => gone.push(k.clone()),
                None => {}
            }
        }
        if !now.is_empty() || !gone.is_empty() {
            out.push(Message::Changed { collection: collection.into(), id: id.into(), fields: now, cleared: gone });
        }
    }

    /// `sub` stops publishing document `id`.
    pub fn removed(&mut self, sub: &str, collection: &str, id: &str, out: &mut Vec<Message>) {
        let Some(docs) = self.collections.get_mut(collection) else { return };
        let Some(doc) = docs.get_mut(id) else { return };
        if !doc.subs.iter().any(|s| s == sub) {
            return;
        }
        doc.subs.retain(|s| s != sub);
        self.copies -= 1;
        if doc.subs.is_empty() {
            docs.remove(id);
            out.push(Message::Removed { collection: collection.into(), id: id.into() });
            return;
        }
        let keys: Vec<String> = doc.order.clone();
        let mut now = Fields::new();
        let mut gone = Vec::new();
        for k in keys {
            match doc.unset(sub, &k) {
                Some(Some(v)) => {
                    now.insert(k, v);
                }
                Some(None) => gone.push(k),
                None => {}
            }
        }
        if !now.is_empty() || !gone.is_empty() {
            out.push(Message::Changed { collection: collection.into(), id: id.into(), fields: now, cleared: gone });
        }
    }

    /// `sub` stops: every document only it covered is removed.
    pub fn drop_sub(&mut self, sub: &str, out: &mut Vec<Message>) {
        let mut targets = Vec::new();
        for (collection, docs) in &self.collections {
            for (id, doc) in docs {
                if doc.subs.iter().any(|s| s == sub) {
                    targets.push((collection.clone(), id.clone()));
                }
            }
        }
        targets.sort();
        for (collection, id) in targets {
            self.removed(sub, &collection, &id, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(v: Value) -> Fields {
        v.as_object().unwrap().clone()
    }

    fn texts(out: &mut Vec<Message>) -> Vec<String> {
        out.drain(..).map(|m| m.to_json()).collect()
    }

    #[test]
    fn two_subscriptions_covering_one_document() {
        let mut mb = MergeBox::default();
        let mut out = Vec::new();
        mb.added("a", "c", "1", &f(json!({"x": 1, "y": 2})), &mut out);
        assert_eq!(texts(&mut out), [r#"{"msg":"added","collection":"c","id":"1","fields":{"x":1,"y":2}}"#]);
        // The same document from a second subscription with the same fields: nothing to send.
        mb.added("b", "c", "1", &f(json!({"x": 1, "y": 2})), &mut out);
        assert!(out.is_empty());
        // The first drops it: still covered by b, nothing changes for the client.
        mb.removed("a", "c", "1", &mut out);
        assert!(out.is_empty());
        // The last drops it: removed.
        mb.drop_sub("b", &mut out);
        assert_eq!(texts(&mut out), [r#"{"msg":"removed","collection":"c","id":"1"}"#]);
        assert!(mb.is_empty());
    }

    #[test]
    fn field_precedence_and_cleared() {
        let mut mb = MergeBox::default();
        let mut out = Vec::new();
        mb.added("a", "c", "1", &f(json!({"x": 1})), &mut out);
        mb.added("b", "c", "1", &f(json!({"x": 9, "z": 3})), &mut out);
        // a's x wins (first); z is new.
        assert_eq!(texts(&mut out)[1], r#"{"msg":"changed","collection":"c","id":"1","fields":{"z":3}}"#);
        // a drops out: x falls back to b's value.
        mb.removed("a", "c", "1", &mut out);
        assert_eq!(texts(&mut out), [r#"{"msg":"changed","collection":"c","id":"1","fields":{"x":9}}"#]);
        // b clears z: the client is told with cleared, never a null.
        mb.changed("b", "c", "1", &Fields::new(), &["z".to_string()], &mut out);
        assert_eq!(texts(&mut out), [r#"{"msg":"changed","collection":"c","id":"1","cleared":["z"]}"#]);
        // A change to the same value is no change.
        mb.changed("b", "c", "1", &f(json!({"x": 9})), &[], &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn unknown_documents_and_subscriptions_are_ignored() {
        let mut mb = MergeBox::default();
        let mut out = Vec::new();
        mb.removed("a", "c", "nope", &mut out);
        mb.changed("a", "c", "nope", &f(json!({"x": 1})), &[], &mut out);
        mb.drop_sub("never", &mut out);
        assert!(out.is_empty());
        mb.added("a", "c", "1", &Fields::new(), &mut out);
        assert_eq!(texts(&mut out), [r#"{"msg":"added","collection":"c","id":"1"}"#]);
        mb.removed("other", "c", "1", &mut out);
        assert!(out.is_empty(), "a sub that never published it cannot remove it");
        assert_eq!(mb.len(), 1);
    }
}

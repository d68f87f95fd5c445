//! The benchmark's tasks app: the in-memory `taskCollection`, one shared observer of `find({})`
//! (Meteor's ObserveMultiplexer: every subscriber of `fetchTasks` on every session is a handle of
//! it), and the two ways writes reach it:
//!
//! - **push**, like the oplog driver or change streams: each write is delivered to every handle as
//!   it happens, so a method's write fence is already satisfied when the method returns;
//! - **poll**, Meteor's polling driver: a write marks the observer dirty; a re-poll (throttled to
//!   one per 50 ms after writes, and every 10 s regardless) re-runs the query over every document,
//!   diffs it against the last result and fans the differences out. A method's `updated` waits for
//!   the poll that includes its writes. Its cost grows with subscribers × documents, as in Meteor.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ddp::message::Fields;
use serde_json::Value;
use tokio::sync::{oneshot, Notify};

/// The collection's DDP name.
pub const COLLECTION: &str = "taskCollection";

/// How writes reach subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reactivity {
    Push,
    Poll { throttle: Duration, interval: Duration },
}

impl Reactivity {
    /// Meteor's polling driver defaults: 50 ms throttle, 10 s interval.
    pub const POLL: Reactivity =
        Reactivity::Poll { throttle: Duration::from_millis(50), interval: Duration::from_secs(10) };
}

/// One task document.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub session_id: String,
    pub description: String,
    pub created_at_ms: i64,
}

impl Task {
    /// The document's fields as DDP sends them (`_id` travels as the message's `id`).
    pub fn fields(&self) -> Fields {
        let mut f = Fields::new();
        f.insert("sessionId".into(), Value::String(self.session_id.clone()));
        f.insert("description".into(), Value::String(self.description.clone()));
        f.insert("createdAt".into(), ddp::Ejson::date_ms(self.created_at_ms).to_json());
        f
    }

    /// The whole document, `_id` included, as `fetchTasks` returns it.
    pub fn document(&self) -> Value {
        let mut d = Fields::new();
        d.insert("_id".into(), Value::String(self.id.clone()));
        d.extend(self.fields());
        Value::Object(d)
    }
}

/// Receives the observer's callbacks for one subscription (a session's merge box behind it).
pub trait Subscriber: Send + Sync {
    fn added(&self, sub_id: &str, id: &str, fields: &Fields);
    fn changed(&self, sub_id: &str, id: &str, fields: &Fields, cleared: &[String]);
    fn removed(&self, sub_id: &str, id: &str);
}

struct Handle {
    key: u64,
    subscriber: Arc<dyn Subscriber>,
    sub_id: String,
}

/// Documents in insertion order (Mongo's natural order for `find({})`).
#[derive(Default)]
struct Docs {
    order: Vec<String>,
    by_id: HashMap<String, Task>,
}

impl Docs {
    fn insert(&mut self, t: Task) {
        self.order.push(t.id.clone());
        self.by_id.insert(t.id.clone(), t);
    }

    fn remove(&mut self, id: &str) -> bool {
        if self.by_id.remove(id).is_some() {
            self.order.retain(|x| x != id);
            true
        } else {
            false
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Task> {
        self.order.iter().filter_map(|id| self.by_id.get(id))
    }
}

struct Inner {
    docs: Docs,
    handles: Vec<Handle>,
    next_key: u64,
    /// Poll mode: what subscribers were last told (the multiplexer's cache), and fences waiting
    /// for the next poll.
    published: HashMap<String, Fields>,
    published_order: Vec<String>,
    waiting: Vec<oneshot::Sender<()>>,
    polls: u64,
}

/// The collection with its observer; shared by every session.
pub struct Tasks {
    inner: Mutex<Inner>,
    reactivity: Reactivity,
    dirty: Notify,
}

/// Waits for a method's writes to reach every subscriber (Meteor's write fence).
#[derive(Default)]
pub struct Fence {
    waiting: Vec<oneshot::Receiver<()>>,
}

impl Fence {
    /// Resolves once every write made under this fence was delivered (at once in push mode).
    pub async fn committed(self) {
        for w in self.waiting {
            let _ = w.await;
        }
    }

    /// Whether nothing is owed (push mode, or no writes).
    pub fn is_clear(&self) -> bool {
        self.waiting.is_empty()
    }
}

impl Tasks {
    pub fn new(reactivity: Reactivity) -> Arc<Tasks> {
        Arc::new(Tasks {
            inner: Mutex::new(Inner {
                docs: Docs::default(),
                handles: Vec::new(),
                next_key: 0,
                published: HashMap::new(),
                published_order: Vec::new(),
                waiting: Vec::new(),
                polls: 0,
            }),
            reactivity,
            dirty: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn reactivity(&self) -> Reactivity {
        self.reactivity
    }

    /// Number of polls run so far (poll mode).
    pub fn polls(&self) -> u64 {
        self.lock().polls
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.lock().docs.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every task, in natural order.
    pub fn all(&self) -> Vec<Task> {
        self.lock().docs.iter().cloned().collect()
    }

    /// Adds a handle; its initial `added`s are delivered before this returns (from the current
    /// documents in push mode, from the multiplexer's cache in poll mode). Returns the handle key.
    pub fn observe(&self, subscriber: Arc<dyn Subscriber>, sub_id: &str) -> u64 {
        let mut inner = self.lock();
        match self.reactivity {
            Reactivity::Push => {
                for t in inner.docs.iter() {
                    subscriber.added(sub_id, &t.id, &t.fields());
                }
            }
            Reactivity::Poll { .. } => {
                for id in &inner.published_order {
                    subscriber.added(sub_id, id, &inner.published[id]);
                }
            }
        }
        inner.next_key += 1;
        let key = inner.next_key;
        inner.handles.push(Handle { key, subscriber, sub_id: sub_id.to_string() });
        key
    }

    /// Removes a handle (the caller's merge box sends the `removed`s).
    pub fn stop_observing(&self, key: u64) {
        self.lock().handles.retain(|h| h.key != key);
    }

    /// Inserts a task under `fence`; returns its id.
    pub fn insert(&self, session_id: &str, description: &str, fence: &mut Fence) -> String {
        let task = Task {
            id: ddp::id::random_id(),
            session_id: session_id.to_string(),
            description: description.to_string(),
            created_at_ms: now_ms(),
        };
        let id = task.id.clone();
        let mut inner = self.lock();
        if self.reactivity == Reactivity::Push {
            let fields = task.fields();
            for h in &inner.handles {
                h.subscriber.added(&h.sub_id, &id, &fields);
            }
        }
        inner.docs.insert(task);
        self.written(&mut inner, fence);
        id
    }

    /// Removes the tasks `which` selects; returns how many.
    pub fn remove_where(&self, which: impl Fn(&Task) -> bool, fence: &mut Fence) -> usize {
        let mut inner = self.lock();
        let ids: Vec<String> = inner.docs.iter().filter(|t| which(t)).map(|t| t.id.clone()).collect();
        for id in &ids {
            inner.docs.remove(id);
            if self.reactivity == Reactivity::Push {
                for h in &inner.handles {
                    h.subscriber.removed(&h.sub_id, id);
                }
            }
        }
        if !ids.is_empty() {
            self.written(&mut inner, fence);
        }
        ids.len()
    }

    /// Sets the description of task `id` under `fence`; returns how many tasks changed (0 or 1).
    pub fn update(&self, id: &str, description: &str, fence: &mut Fence) -> usize {
        let mut inner = self.lock();
        let Some(task) = inner.docs.by_id.get_mut(id) else { return 0 };
        if task.description == description {
            return 0;
        }
        task.description = description.to_string();
        if self.reactivity == Reactivity::Push {
            let mut changed = Fields::new();
            changed.insert("description".into(), Value::String(description.to_string()));
            for h in &inner.handles {
                h.subscriber.changed(&h.sub_id, id, &changed, &[]);
            }
        }
        self.written(&mut inner, fence);
        1
    }

    fn written(&self, inner: &mut Inner, fence: &mut Fence) {
        if let Reactivity::Poll { .. } = self.reactivity {
            let (tx, rx) = oneshot::channel();
            inner.waiting.push(tx);
            fence.waiting.push(rx);
            self.dirty.notify_one();
        }
    }

    /// Re-runs the query, diffs against what subscribers were told, fans the differences out, then
    /// releases the fences of the writes it covered.
    pub fn poll(&self) {
        let mut inner = self.lock();
        inner.polls += 1;
        let inner = &mut *inner;
        let current: Vec<(String, Fields)> = inner.docs.iter().map(|t| (t.id.clone(), t.fields())).collect();
        let mut next: HashMap<String, Fields> = HashMap::with_capacity(current.len());
        for (id, fields) in &current {
            match inner.published.get(id) {
                None => {
                    for h in &inner.handles {
                        h.subscriber.added(&h.sub_id, id, fields);
                    }
                }
                Some(old) if old != fields => {
                    let (changed, cleared) = diff(old, fields);
                    for h in &inner.handles {
                        h.subscriber.changed(&h.sub_id, id, &changed, &cleared);
                    }
                }
                Some(_) => {}
            }
            next.insert(id.clone(), fields.clone());
        }
        for id in &inner.published_order {
            if !next.contains_key(id) {
                for h in &inner.handles {
                    h.subscriber.removed(&h.sub_id, id);
                }
            }
        }
        inner.published = next;
        inner.published_order = current.into_iter().map(|(id, _)| id).collect();
        for w in inner.waiting.drain(..) {
            let _ = w.send(());
        }
    }

    /// Poll mode's driver: re-polls after writes (throttled) and on the interval, until dropped.
    pub async fn run_poller(self: Arc<Self>) {
        let Reactivity::Poll { throttle, interval } = self.reactivity else { return };
        loop {
            let _ = tokio::time::timeout(interval, self.dirty.notified()).await;
            self.poll();
            tokio::time::sleep(throttle).await;
        }
    }
}

/// Fields that changed value or appeared, and fields that disappeared.
pub fn diff(old: &Fields, new: &Fields) -> (Fields, Vec<String>) {
    let changed = new.iter().filter(|(k, v)| old.get(*k) != Some(v)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let cleared = old.keys().filter(|k| !new.contains_key(*k)).cloned().collect();
    (changed, cleared)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Subscriber for Log {
        fn added(&self, sub: &str, id: &str, f: &Fields) {
            self.0.lock().unwrap().push(format!("{sub} added {id} {}", f["description"]));
        }
        fn changed(&self, sub: &str, id: &str, _: &Fields, _: &[String]) {
            self.0.lock().unwrap().push(format!("{sub} changed {id}"));
        }
        fn removed(&self, sub: &str, id: &str) {
            self.0.lock().unwrap().push(format!("{sub} removed {id}"));
        }
    }

    impl Log {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    #[test]
    fn push_delivers_each_write_at_once() {
        let tasks = Tasks::new(Reactivity::Push);
        let log = Arc::new(Log::default());
        let mut fence = Fence::default();
        let first = tasks.insert("s1", "before", &mut fence);
        tasks.observe(log.clone(), "a");
        assert_eq!(log.take(), vec![format!("a added {first} \"before\"")], "initial adds");
        let second = tasks.insert("s1", "after", &mut fence);
        assert_eq!(log.take(), vec![format!("a added {second} \"after\"")]);
        assert!(fence.is_clear(), "push owes nothing");
        assert_eq!(tasks.remove_where(|t| t.session_id == "s1", &mut fence), 2);
        assert_eq!(log.take(), vec![format!("a removed {first}"), format!("a removed {second}")]);
    }

    #[test]
    fn poll_delivers_on_the_next_poll_and_then_releases_the_fence() {
        let tasks = Tasks::new(Reactivity::POLL);
        let log = Arc::new(Log::default());
        tasks.observe(log.clone(), "a");
        let mut fence = Fence::default();
        let id = tasks.insert("s1", "t", &mut fence);
        assert!(log.take().is_empty(), "nothing until the poll");
        assert!(!fence.is_clear());
        // A second subscriber before the poll sees the multiplexer's cache: still empty.
        let late = Arc::new(Log::default());
        tasks.observe(late.clone(), "b");
        assert!(late.take().is_empty());
        tasks.poll();
        assert_eq!(log.take(), vec![format!("a added {id} \"t\"")]);
        assert_eq!(late.take(), vec![format!("b added {id} \"t\"")]);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(fence.committed());
        tasks.remove_where(|_| true, &mut Fence::default());
        tasks.poll();
        assert_eq!(log.take(), vec![format!("a removed {id}")]);
        assert_eq!(tasks.polls(), 2);
    }

    #[test]
    fn diffs_name_changed_and_cleared_fields() {
        let old: Fields = serde_json::from_str(r#"{"a":1,"b":2,"c":3}"#).unwrap();
        let new: Fields = serde_json::from_str(r#"{"a":1,"b":5,"d":4}"#).unwrap();
        let (changed, cleared) = diff(&old, &new);
        assert_eq!(Value::Object(changed), serde_json::json!({"b": 5, "d": 4}));
        assert_eq!(cleared, vec!["c".to_string()]);
    }

    #[test]
    fn fields_carry_created_at_as_an_ejson_date() {
        let t =
            Task { id: "x".into(), session_id: "s".into(), description: "d".into(), created_at_ms: 1_700_000_000_123 };
        assert_eq!(
            Value::Object(t.fields()).to_string(),
            r#"{"sessionId":"s","description":"d","createdAt":{"$date":1700000000123}}"#
        );
        assert_eq!(t.document()["_id"], "x");
    }
}

//! The reactive-correctness audit's data: what a user's local cache and the truth hold
//! ([`Snapshot`]), how they are compared (ids missing and extra, field values by EJSON equality),
//! what each checkpoint found (counted by [`AuditRec`] in every worker, merged), and the result
//! document's `audit` section with its outcome: `passed`, `failed` (a difference) or `incomplete`
//! (something kept a checkpoint from being made; never a pass).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A collection's documents: id to fields.
pub type Docs = BTreeMap<String, Map<String, Value>>;
/// Collections by name.
pub type Snapshot = BTreeMap<String, Docs>;

/// How many differences each checkpoint keeps (all are counted).
pub const KEPT_DIFFERENCES: usize = 20;
/// How many reasons for incomplete checks each checkpoint keeps (each said once).
const KEPT_REASONS: usize = 5;
/// A value longer than this (as JSON) is kept as its size, not itself.
const SHOWN_VALUE: usize = 200;

/// What kind of difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The truth has the document; the user's cache does not.
    Missing,
    /// The user's cache has a document the truth does not.
    Extra,
    /// Both have it; a field's value differs (or one side lacks the field).
    Field,
}

/// One difference between a user's cache and the truth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The user (its arrival number).
    pub user: u64,
    pub collection: String,
    pub id: String,
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The user's value, and the truth's (absent where that side lacks the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<Value>,
}

impl Difference {
    /// For people, in one line: `taskCollection/abc: missing`, `.../abc.done: true, truth false`.
    pub fn line(&self) -> String {
        let at = crate::redact::printable(&format!("{}/{}", self.collection, self.id)).into_owned();
        let shown = |v: &Option<Value>| match v {
            Some(v) => crate::redact::printable(&v.to_string()).into_owned(),
            None => "(none)".into(),
        };
        match self.kind {
            Kind::Missing => format!("user {}: {at} missing from the cache", self.user),
            Kind::Extra => format!("user {}: {at} in the cache, not in the truth", self.user),
            Kind::Field => format!(
                "user {}: {at}.{} is {} in the cache, {} in the truth",
                self.user,
                crate::redact::printable(self.field.as_deref().unwrap_or_default()),
                shown(&self.cache),
                shown(&self.truth)
            ),
        }
    }
}

/// A value as kept in a difference: itself, or its size when long.
fn kept(v: &Value) -> Value {
    let text = v.to_string();
    if text.len() <= SHOWN_VALUE {
        v.clone()
    } else {
        Value::String(format!("({} bytes of JSON)", text.len()))
    }
}

/// EJSON equality, as Meteor's `EJSON.equals`: numbers by value (`1` is `1.0`), objects whatever
/// their keys' order, dates by their instant, binaries by their bytes.
pub fn ejson_equal(a: &Value, b: &Value) -> bool {
    use ddp::ejson::Ejson;
    fn eq(a: &Ejson, b: &Ejson) -> bool {
        match (a, b) {
            (Ejson::Number(x), Ejson::Number(y)) | (Ejson::Date(x), Ejson::Date(y)) => {
                x == y || x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y)
            }
            (Ejson::Array(x), Ejson::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| eq(x, y)),
            (Ejson::Object(x), Ejson::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| k == k2 && eq(v, v2)))
            }
            (Ejson::Custom { type_name: t1, value: v1 }, Ejson::Custom { type_name: t2, value: v2 }) => {
                t1 == t2 && ejson_equal(v1, v2)
            }
            _ => a == b,
        }
    }
    if a == b {
        return true;
    }
    match (Ejson::from_json(a), Ejson::from_json(b)) {
        (Ok(a), Ok(b)) => eq(&a, &b),
        _ => false,
    }
}

/// Compares a user's cache with the truth, collection by collection (both sides' collections):
/// how many differences, and the first `keep` of them in order (collection, id, field).
pub fn compare(user: u64, cache: &Snapshot, truth: &Snapshot, keep: usize) -> (u64, Vec<Difference>) {
    let empty = Docs::new();
    let mut count = 0u64;
    let mut first = Vec::new();
    let mut note = |d: Difference| {
        count += 1;
        if first.len() < keep {
            first.push(d);
        }
    };
    let names: std::collections::BTreeSet<&String> = cache.keys().chain(truth.keys()).collect();
    for name in names {
        let (mine, true_docs) = (cache.get(name).unwrap_or(&empty), truth.get(name).unwrap_or(&empty));
        let diff = |id: &str, kind, field: Option<&str>, cache: Option<&Value>, truth: Option<&Value>| Difference {
            user,
            collection: name.clone(),
            id: id.to_string(),
            kind,
            field: field.map(str::to_string),
            cache: cache.map(kept),
            truth: truth.map(kept),
        };
        let ids: std::collections::BTreeSet<&String> = mine.keys().chain(true_docs.keys()).collect();
        for id in ids {
            match (mine.get(id), true_docs.get(id)) {
                (Some(_), None) => note(diff(id, Kind::Extra, None, None, None)),
                (None, Some(_)) => note(diff(id, Kind::Missing, None, None, None)),
                (Some(a), Some(b)) => {
                    let fields: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                    for f in fields {
                        let (x, y) = (a.get(f), b.get(f));
                        let same = match (x, y) {
                            (Some(x), Some(y)) => ejson_equal(x, y),
                            _ => false,
                        };
                        if !same {
                            note(diff(id, Kind::Field, Some(f), x, y));
                        }
                    }
                }
                (None, None) => {}
            }
        }
    }
    (count, first)
}

/// What one user's checkpoint came to.
#[derive(Debug, Clone)]
pub enum Check {
    /// The cache and the truth agreed.
    Agreed,
    /// They differed: how many differences, and the first ones.
    Differed(u64, Vec<Difference>),
    /// The check could not be made, and why.
    Incomplete(String),
    /// Two truth reads with no write between them disagreed: the server's answers changed on
    /// their own, so no verdict on the cache (incomplete, counted apart).
    Unstable(String),
}

/// One checkpoint's tallies (by its step name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub name: String,
    /// Users' checks made or attempted at this checkpoint.
    pub checks: u64,
    pub agreed: u64,
    /// Checks that found a difference.
    pub failed: u64,
    /// Checks that could not be made.
    pub incomplete: u64,
    /// Of those, checks whose two truth reads disagreed with no write between them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unstable: u64,
    /// Differences found, all of them.
    pub differences: u64,
    /// The first differences (at most 20 per checkpoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_differences: Vec<Difference>,
    /// Why checks were incomplete (each reason once, the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl Checkpoint {
    fn add(&mut self, check: Check) {
        self.checks += 1;
        match check {
            Check::Agreed => self.agreed += 1,
            Check::Differed(n, first) => {
                self.failed += 1;
                self.differences += n;
                let room = KEPT_DIFFERENCES.saturating_sub(self.first_differences.len());
                self.first_differences.extend(first.into_iter().take(room));
            }
            Check::Incomplete(why) => {
                self.incomplete += 1;
                self.reason(why);
            }
            Check::Unstable(why) => {
                self.incomplete += 1;
                self.unstable += 1;
                self.reason(why);
            }
        }
    }

    fn reason(&mut self, why: String) {
        // A server's words (a close reason) are shown escaped wherever the reason goes.
        let why = crate::redact::printable(&why).into_owned();
        if self.reasons.len() < KEPT_REASONS && !self.reasons.contains(&why) {
            self.reasons.push(why);
        }
    }

    fn merge(&mut self, o: &Checkpoint) {
        self.checks += o.checks;
        self.agreed += o.agreed;
        self.failed += o.failed;
        self.incomplete += o.incomplete;
        self.unstable += o.unstable;
        self.differences += o.differences;
        let room = KEPT_DIFFERENCES.saturating_sub(self.first_differences.len());
        self.first_differences.extend(o.first_differences.iter().take(room).cloned());
        for r in &o.reasons {
            self.reason(r.clone());
        }
    }
}

/// Everything a worker's users found at their checkpoints.
#[derive(Debug, Clone, Default)]
pub struct AuditRec {
    pub checkpoints: Vec<Checkpoint>,
    /// Users (walks of a flow) that made at least one check.
    pub users: u64,
    /// Walks of a flow with checkpoints that stopped before their last one (a failed step, the
    /// user timeout), and the first reason.
    pub unreached: u64,
    pub unreached_first: Option<String>,
    /// Truth reads made (a read is shared by the users of a worker whose truth it is), and what
    /// their connections received.
    pub truth_reads: u64,
    pub messages_in: u64,
    pub bytes_in: u64,
}

impl AuditRec {
    pub fn record(&mut self, checkpoint: &str, check: Check) {
        let i = match self.checkpoints.iter().position(|c| c.name == checkpoint) {
            Some(i) => i,
            None => {
                self.checkpoints.push(Checkpoint { name: checkpoint.to_string(), ..Checkpoint::default() });
                self.checkpoints.len() - 1
            }
        };
        self.checkpoints[i].add(check);
    }

    pub fn unreached(&mut self, why: &str) {
        self.unreached += 1;
        if self.unreached_first.is_none() {
            self.unreached_first = Some(crate::redact::printable(why).into_owned());
        }
    }

    pub fn merge(&mut self, o: &AuditRec) {
        for c in &o.checkpoints {
            match self.checkpoints.iter_mut().find(|m| m.name == c.name) {
                Some(mine) => mine.merge(c),
                None => self.checkpoints.push(c.clone()),
            }
        }
        self.users += o.users;
        self.unreached += o.unreached;
        if self.unreached_first.is_none() {
            self.unreached_first.clone_from(&o.unreached_first);
        }
        self.truth_reads += o.truth_reads;
        self.messages_in += o.messages_in;
        self.bytes_in += o.bytes_in;
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where an audit read its truth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TruthPath {
    /// The URLs the truth connections went to (one per target).
    pub urls: Vec<String>,
    /// Read around the users' path (`--audit-truth`): a loss on the users' path is seen. False:
    /// through the users' own targets, where a loss every connection shares is not.
    pub apart: bool,
}

impl TruthPath {
    /// In words, for the summary: `the truth read at http://... (around the users' path)`.
    pub fn words(&self) -> String {
        let mut distinct = self.urls.iter().map(|u| crate::redact::printable(u).into_owned()).collect::<Vec<_>>();
        distinct.dedup();
        if self.apart {
            format!("truth read at {} (--audit-truth, around the users' path)", distinct.join(", "))
        } else {
            format!(
                "truth read through the users' own target(s) {} (a loss every connection there shares is not seen)",
                distinct.join(", ")
            )
        }
    }
}

/// The audit's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every checkpoint of every user agreed with the truth.
    Passed,
    /// A user's cache differed from the truth (exit 1).
    Failed,
    /// A checkpoint could not be made, or a user could not reach one (exit 4; never a pass).
    #[default]
    Incomplete,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Incomplete => "incomplete",
        }
    }
}

const NOTHING_CHECKED: &str = "no checkpoint was reached";
const NOT_MADE: &str = "check(s) could not be made";
const VIOLATIONS: &str =
    "protocol violation(s): messages Meteor's client throws on, or a second ready (summary.events: ddp.violation.*)";
/// The reason an unstable check gives, and the outcome's line counting them.
pub const TRUTH_CHANGED: &str = "the truth changed between reads with no write";
const UNSTABLE: &str = "check(s) found the truth changed between two reads with no write between them";

/// The result document's `audit` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditSection {
    pub outcome: Outcome,
    /// Users' checks made or attempted, over every checkpoint.
    pub checks: u64,
    /// Users (walks of a flow) that made at least one check.
    pub users: u64,
    pub agreed: u64,
    /// Checks that found a difference.
    pub failed: u64,
    /// Checks that could not be made.
    pub incomplete: u64,
    /// Of those, checks whose two truth reads disagreed with no write between them (a truth
    /// that changes on its own).
    #[serde(default)]
    pub unstable: u64,
    /// Walks of a flow that stopped before their last checkpoint.
    pub unreached: u64,
    /// Differences found, all of them.
    pub differences: u64,
    /// Messages the users' connections got that Meteor's client throws on, or a second `ready` (`added` for a
    /// document held, `changed` or `removed` for one not held) or a second `ready`: each a
    /// server (or path) bug, failing the audit; by kind in the document's `summary.events`.
    #[serde(default)]
    pub violations: u64,
    /// Truth reads made over connections of the audit's own.
    pub truth_reads: u64,
    /// Where the truth was read: the URLs, and whether around the users' path
    /// (`--audit-truth`) or through it (the users' own targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truth: Option<TruthPath>,
    /// The audit's own traffic (its truth connections), apart from the users'.
    pub messages_in: u64,
    pub bytes_in: u64,
    pub checkpoints: Vec<Checkpoint>,
    /// Why the outcome is what it is, for people (empty when passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<String>,
}

impl AuditSection {
    /// The section from the merged tallies; `interrupted`: the run was stopped before its end.
    pub fn of(rec: &AuditRec, interrupted: bool) -> AuditSection {
        let sum = |f: fn(&Checkpoint) -> u64| rec.checkpoints.iter().map(f).sum::<u64>();
        let mut s = AuditSection {
            checks: sum(|c| c.checks),
            users: rec.users,
            agreed: sum(|c| c.agreed),
            failed: sum(|c| c.failed),
            incomplete: sum(|c| c.incomplete),
            unstable: sum(|c| c.unstable),
            unreached: rec.unreached,
            differences: sum(|c| c.differences),
            truth_reads: rec.truth_reads,
            messages_in: rec.messages_in,
            bytes_in: rec.bytes_in,
            checkpoints: rec.checkpoints.clone(),
            ..AuditSection::default()
        };
        if let Some(why) = &rec.unreached_first {
            s.why.push(format!("{} walk(s) stopped before their last checkpoint; the first: {why}", rec.unreached));
        }
        if interrupted {
            s.why.push("the run was stopped before every user reached its checkpoints".into());
        }
        s.judge();
        s
    }

    /// Sets the outcome from the counts: failed on any difference; else incomplete when a check
    /// could not be made, a walk stopped short, nothing was checked or a reason says so.
    pub fn judge(&mut self) {
        // The reasons this works out are made again from the counts.
        self.why.retain(|w| w != NOTHING_CHECKED && !w.contains(NOT_MADE) && !w.contains(UNSTABLE));
        self.why.retain(|w| !w.contains(VIOLATIONS));
        if self.violations > 0 {
            self.why.push(format!("{} {VIOLATIONS}", self.violations));
        }
        self.outcome = if self.failed > 0 || self.violations > 0 {
            Outcome::Failed
        } else if self.incomplete > 0 || self.unreached > 0 || self.checks == 0 || !self.why.is_empty() {
            Outcome::Incomplete
        } else {
            Outcome::Passed
        };
        if self.checks == 0 {
            self.why.push(NOTHING_CHECKED.into());
        }
        if self.incomplete > 0 {
            let first = self.checkpoints.iter().flat_map(|c| c.reasons.first()).next();
            let line = format!(
                "{} {NOT_MADE}{}",
                self.incomplete,
                first.map(|r| format!("; the first: {r}")).unwrap_or_default()
            );
            self.why.push(line);
        }
        if self.unstable > 0 {
            self.why.push(format!("{} {UNSTABLE}", self.unstable));
        }
    }

    /// Adds another instance's section (`bolide merge` of segments).
    pub fn merge(&mut self, o: &AuditSection) {
        self.checks += o.checks;
        self.users += o.users;
        self.agreed += o.agreed;
        self.failed += o.failed;
        self.incomplete += o.incomplete;
        self.unstable += o.unstable;
        self.violations += o.violations;
        self.unreached += o.unreached;
        if self.truth.is_none() {
            self.truth.clone_from(&o.truth);
        }
        self.differences += o.differences;
        self.truth_reads += o.truth_reads;
        self.messages_in += o.messages_in;
        self.bytes_in += o.bytes_in;
        for c in &o.checkpoints {
            match self.checkpoints.iter_mut().find(|m| m.name == c.name) {
                Some(mine) => mine.merge(c),
                None => self.checkpoints.push(c.clone()),
            }
        }
        for w in &o.why {
            if !self.why.contains(w) {
                self.why.push(w.clone());
            }
        }
        self.judge();
    }

    /// The summary's line: `audit: passed (40 checks of 20 users at 1 checkpoint agreed)`.
    pub fn line(&self) -> String {
        let checkpoints = match self.checkpoints.len() {
            1 => "1 checkpoint".to_string(),
            n => format!("{n} checkpoints"),
        };
        match self.outcome {
            Outcome::Passed => {
                format!("passed: {} checks of {} users at {checkpoints} agreed with the truth", self.checks, self.users)
            }
            Outcome::Failed if self.failed == 0 => format!(
                "FAILED: {} protocol violation(s); {} of {} checks agreed with the truth",
                self.violations, self.agreed, self.checks
            ),
            Outcome::Failed => format!(
                "FAILED: {} of {} checks differed from the truth ({} differences{})",
                self.failed,
                self.checks,
                self.differences,
                if self.violations > 0 {
                    format!(", {} protocol violation(s)", self.violations)
                } else {
                    String::new()
                }
            ),
            Outcome::Incomplete => format!(
                "INCOMPLETE: {} of {} checks agreed; {}",
                self.agreed,
                self.checks,
                self.why.first().map(String::as_str).unwrap_or("not every check was made")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(v: Value) -> Snapshot {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn ejson_values_compare_as_values() {
        assert!(ejson_equal(&json!(1), &json!(1.0)));
        assert!(ejson_equal(&json!({"$date": 1700000000000u64}), &json!({"$date": 1700000000000.0})));
        assert!(ejson_equal(&json!({"a": 1, "b": [1, {"c": 2}]}), &json!({"b": [1, {"c": 2.0}], "a": 1})));
        assert!(ejson_equal(&json!({"$binary": "AAEC"}), &json!({"$binary": "AAEC"})));
        assert!(!ejson_equal(&json!({"$binary": "AAEC"}), &json!({"$binary": "AAED"})));
        assert!(!ejson_equal(&json!({"$date": 1}), &json!(1)));
        assert!(!ejson_equal(&json!([1, 2]), &json!([2, 1])));
        assert!(!ejson_equal(&json!("1"), &json!(1)));
        assert!(!ejson_equal(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    }

    #[test]
    fn missing_extra_and_changed_documents_are_each_named() {
        let cache = snap(json!({
            "tasks": {"a": {"t": "x", "n": 1}, "b": {"t": "y"}, "extra": {"t": "z"}},
            "other": {"o": {}}
        }));
        let truth = snap(json!({
            "tasks": {"a": {"t": "x", "n": 1.0}, "b": {"t": "Y", "done": true}, "lost": {"t": "w"}},
            "other": {"o": {}}
        }));
        let (n, first) = compare(7, &cache, &truth, 20);
        let seen: Vec<(Kind, &str, Option<&str>)> =
            first.iter().map(|d| (d.kind, d.id.as_str(), d.field.as_deref())).collect();
        assert_eq!(
            seen,
            [
                (Kind::Field, "b", Some("done")),
                (Kind::Field, "b", Some("t")),
                (Kind::Extra, "extra", None),
                (Kind::Missing, "lost", None),
            ]
        );
        assert_eq!(n, 4);
        assert_eq!(first[0].line(), "user 7: tasks/b.done is (none) in the cache, true in the truth");
        assert_eq!(first[3].line(), "user 7: tasks/lost missing from the cache");
        // Bounded: every difference counted, the first kept.
        let (n, first) = compare(7, &cache, &truth, 1);
        assert_eq!((n, first.len()), (4, 1));
        assert_eq!(compare(1, &cache, &cache, 20).0, 0);
    }

    #[test]
    fn outcomes_never_pass_what_was_not_checked() {
        let mut rec = AuditRec::default();
        assert_eq!(AuditSection::of(&rec, false).outcome, Outcome::Incomplete, "nothing checked");
        rec.record("audit", Check::Agreed);
        rec.users = 1;
        assert_eq!(AuditSection::of(&rec, false).outcome, Outcome::Passed);
        assert_eq!(AuditSection::of(&rec, true).outcome, Outcome::Incomplete, "stopped by the user");
        let mut short = rec.clone();
        short.unreached("call insertTask: closed");
        let s = AuditSection::of(&short, false);
        assert_eq!(s.outcome, Outcome::Incomplete);
        assert!(s.why[0].contains("call insertTask: closed"), "{:?}", s.why);
        rec.record("audit", Check::Incomplete("the truth could not be read: connect refused".into()));
        let s = AuditSection::of(&rec, false);
        assert_eq!((s.outcome, s.checks, s.incomplete), (Outcome::Incomplete, 2, 1));
        rec.record("audit", Check::Differed(3, vec![]));
        let s = AuditSection::of(&rec, false);
        assert_eq!((s.outcome, s.failed, s.differences), (Outcome::Failed, 1, 3), "a difference outranks the rest");
        let mut merged = AuditSection::of(&AuditRec::default(), false);
        merged.merge(&AuditSection::of(&rec, false));
        assert_eq!((merged.outcome, merged.checks), (Outcome::Failed, 3));
    }
}

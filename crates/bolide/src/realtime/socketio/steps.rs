//! Socket.IO's steps, as Artillery's engine takes them: an `emit` (with the acknowledgement or the
//! response it waits for, judged and captured) and a `listen` for events the server pushes.

use std::time::Instant;

use serde_json::Value;

use super::session::{Await, SioSession};
use crate::scenario::{Emit, Listen, Reply, Step, StepKind};
use crate::session::{Stop, User};

impl crate::realtime::Steps for SioSession {
    async fn perform<U: User<Session = SioSession>>(u: &mut U, step: &Step) -> Result<(), Stop> {
        match &step.kind {
            // Boxed: a Socket.IO step's future (3 KB) is held only while it runs.
            StepKind::Emit(e) => Box::pin(emit(u, step, e)).await,
            StepKind::Listen(l) => Box::pin(listen(u, step, l)).await,
            _ => Err(crate::realtime::not_ours(u, step, "Socket.IO")),
        }
    }
}

/// An emit, and the acknowledgement or the response it waits for, judged as Artillery judges
/// them; captures into the user's variables. Its latency is the emit's to its answer (none: 0).
async fn emit<U: User<Session = SioSession>>(u: &mut U, step: &Step, e: &Emit) -> Result<(), Stop> {
    let args: Vec<Value> = e.args.iter().map(|a| u.render(a)).collect();
    let timeout = u.timeout(e.timeout);
    let answer = match &e.reply {
        Reply::None => None,
        Reply::Ack(a) | Reply::Event { answer: a, .. } => Some(a),
    };
    let want = super::wire::Want::new(answer.and_then(|a| a.data.as_ref()).map(|d| u.render(d)));
    let channel = match &e.reply {
        Reply::Event { channel, .. } => u.text(channel),
        _ => String::new(),
    };
    let reply = match &e.reply {
        Reply::None => Await::Nothing,
        Reply::Ack(_) => Await::Ack,
        Reply::Event { .. } => Await::Event { channel: &channel, want: want.clone() },
    };
    let namespace = e.namespace.as_ref().map(|n| u.text(n));
    let conn = u.session(step)?;
    let out = conn.emit(namespace.as_deref(), args, reply, timeout).await.map_err(|f| u.fail(step, &f))?;
    if let Some(a) = answer {
        if matches!(e.reply, Reply::Ack(_)) && !want.answers(&out.args) {
            let got = crate::redact::brief(&Value::Array(out.args.clone()));
            return Err(u.fail_with(step, "response", &format!("data is not valid: the acknowledgement was {got}")));
        }
        let got = Value::Array(out.args);
        for m in &a.matches {
            let expected = u.render(&m.value);
            let found = json_path(&got, &m.json);
            if found != Some(&expected) {
                let shown = found.map_or("nothing".to_string(), crate::redact::brief);
                let detail = format!("failed match: {} is {shown}, expected {expected}", m.json);
                return Err(u.fail_with(step, "match", &detail));
            }
        }
        for (path, var) in &a.captures {
            let v = json_path(&got, path).cloned().unwrap_or(Value::Null);
            u.vars_mut().insert(var.clone(), v);
        }
    }
    u.ok(step, out.answered.saturating_duration_since(out.sent));
    Ok(())
}

/// Waits for `count` events on a channel that no earlier listen counted.
async fn listen<U: User<Session = SioSession>>(u: &mut U, step: &Step, l: &Listen) -> Result<(), Stop> {
    let timeout = u.timeout(l.timeout);
    let began = Instant::now();
    let channel = u.text(&l.channel);
    let namespace = l.namespace.as_ref().map(|n| u.text(n));
    let conn = u.session(step)?;
    conn.listen(namespace.as_deref(), &channel, l.count, timeout).await.map_err(|f| u.fail(step, &f))?;
    u.ok(step, began.elapsed());
    Ok(())
}

/// The value at a JSON path (`$.0.name`, `$[0].name`, `$.data.task.id`) of `v`.
pub fn json_path<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    let mut at = v;
    let rest = path.trim().strip_prefix('$').unwrap_or(path.trim());
    for part in rest.split(['.', '[', ']']).filter(|p| !p.is_empty()) {
        let part = part.trim_matches(|c| c == '\'' || c == '"');
        at = match at {
            Value::Array(items) => items.get(part.parse::<usize>().ok()?)?,
            Value::Object(m) => m.get(part)?,
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_path_reads_arrays_and_objects_in_both_spellings() {
        let v = serde_json::json!([{ "name": "a", "tags": ["x", "y"] }]);
        assert_eq!(json_path(&v, "$.0.name"), Some(&Value::from("a")));
        assert_eq!(json_path(&v, "$[0].tags[1]"), Some(&Value::from("y")));
        assert_eq!(json_path(&v, "$[0]['name']"), Some(&Value::from("a")));
        assert_eq!(json_path(&v, "$.1"), None);
        assert_eq!(json_path(&v, "$.0.name.x"), None);
    }
}

//! DDP's steps, as a Meteor app's page takes them: a method call (its result checked and
//! captured), a login (a method whose token the user keeps), a subscription started and stopped,
//! and a wait for the data the server pushes to show something.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::wire::Conn;
use crate::scenario::{Call, Expect, Login, Step, StepKind, WaitFor};
use crate::session::{matches_fields, Stop, User};

impl crate::realtime::Steps for Conn {
    async fn perform<U: User<Session = Conn>>(u: &mut U, step: &Step) -> Result<(), Stop> {
        match &step.kind {
            StepKind::Call(c) => call(u, step, c).await,
            StepKind::Login(l) => login(u, step, l).await,
            StepKind::Subscribe { name, params, capture, timeout } => {
                subscribe(u, step, name, params, capture.as_deref(), *timeout).await
            }
            StepKind::Unsubscribe { name } => unsubscribe(u, step, name),
            // Boxed: a waitFor's future is held only while it waits.
            StepKind::WaitFor(wf) => Box::pin(wait_for(u, step, wf)).await,
            _ => Err(crate::realtime::not_ours(u, step, "DDP")),
        }
    }
}

/// A method call: its result checked (`expect`) and captured; the user's last write.
async fn call<U: User<Session = Conn>>(u: &mut U, step: &Step, c: &Call) -> Result<(), Stop> {
    let params: Vec<Value> = c.params.iter().map(|p| u.render(p)).collect();
    let timeout = u.timeout(c.timeout);
    u.wrote(Instant::now());
    let out = {
        // Held while the call is in flight: a checkpoint waits for it.
        let _write = u.writing();
        let conn = u.session(step)?;
        conn.call(&c.method, params, timeout).await.map_err(|f| u.fail(step, &f))?
    };
    if let Some(e) = &c.expect {
        check(u, step, e, out.result.as_ref())?;
    }
    if let Some(cap) = &c.capture {
        u.capture(cap, out.result.clone().unwrap_or(Value::Null));
    }
    u.called(step, out.to_both, out.to_result, out.to_updated);
    Ok(())
}

/// A login: Meteor's `login` method with a password's digest or a resume token; the user keeps
/// the token (for a reconnection's login) and its id.
async fn login<U: User<Session = Conn>>(u: &mut U, step: &Step, l: &Login) -> Result<(), Stop> {
    let params = login_params(u, l);
    let timeout = u.timeout(l.timeout);
    let out = {
        let _write = u.writing();
        let conn = u.session(step)?;
        conn.call("login", vec![params], timeout).await.map_err(|f| u.fail(step, &f))?
    };
    if let Some(token) = out.result.as_ref().and_then(|r| r.get("token")).cloned() {
        u.vars_mut().insert("loginToken".into(), token);
    }
    if let Some(id) = out.result.as_ref().and_then(|r| r.get("id")).cloned() {
        u.vars_mut().insert("userId".into(), id);
    }
    u.called(step, out.to_both, out.to_result, out.to_updated);
    Ok(())
}

async fn subscribe<U: User<Session = Conn>>(
    u: &mut U,
    step: &Step,
    name: &str,
    params: &[Value],
    capture: Option<&str>,
    timeout: Option<Duration>,
) -> Result<(), Stop> {
    let params: Vec<Value> = params.iter().map(|p| u.render(p)).collect();
    let timeout = u.timeout(timeout);
    let conn = u.session(step)?;
    let (id, to_ready) = conn.subscribe(name, params.clone(), timeout).await.map_err(|f| u.fail(step, &f))?;
    if let Some(var) = capture {
        u.vars_mut().insert(var.to_string(), Value::String(id.clone()));
    }
    u.subs().insert(name.to_string(), (id, params));
    u.ok(step, to_ready);
    Ok(())
}

/// Stops the user's latest subscription of that name (or the one whose id a variable holds).
fn unsubscribe<U: User<Session = Conn>>(u: &mut U, step: &Step, name: &str) -> Result<(), Stop> {
    let id = match u.subs().remove(name) {
        Some((id, _)) => id,
        None => match u.vars().get(name).and_then(Value::as_str) {
            Some(id) => id.to_string(),
            None => return Err(u.fail_with(step, "scenario", &format!("no subscription {name:?} to stop"))),
        },
    };
    u.session(step)?.unsubscribe(&id).map_err(|f| u.fail(step, &f))?;
    u.ok(step, Duration::ZERO);
    Ok(())
}

async fn wait_for<U: User<Session = Conn>>(u: &mut U, step: &Step, wf: &WaitFor) -> Result<(), Stop> {
    let want: Vec<(String, Value)> = wf.fields.iter().map(|(k, v)| (k.clone(), u.render(v))).collect();
    let began = Instant::now();
    // "Appears" and "changes" count from the user's last action, not from this step: by DDP's
    // write fence a call completes (`updated`) only after its data arrived, so data caused by
    // the call just before this step is already in the cache when the step begins.
    let since = u.last_write().filter(|w| *w <= began).unwrap_or(began);
    let timeout = u.timeout(wf.timeout);
    let conn = u.session(step)?;
    let seen = conn.wait_for(wf, &want, since, began, timeout).await.map_err(|f| u.fail(step, &f))?;
    u.ok(step, began.elapsed());
    if let Some(sent) = u.last_write() {
        if seen >= sent {
            u.reactive(crate::proto::http::micros(seen - sent));
        }
    }
    Ok(())
}

/// A call's `expect`: the result (a list of documents) has, or no longer has, one with these fields.
fn check<U: User>(u: &U, step: &Step, e: &Expect, result: Option<&Value>) -> Result<(), Stop> {
    let want: Vec<(String, Value)> = e.fields.iter().map(|(k, v)| (k.clone(), u.render(v))).collect();
    let docs = result.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let found = docs.iter().any(|d| {
        let id = d.get("_id").and_then(Value::as_str).unwrap_or_default();
        d.as_object().is_some_and(|o| matches_fields(id, o, &want))
    });
    if found == e.contains {
        Ok(())
    } else {
        let shown: Vec<String> = want.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let what = if e.contains { "has no document with" } else { "still has a document with" };
        Err(u.fail_with(step, "expect", &format!("result {what} {}", shown.join(", "))))
    }
}

/// The `login` method's parameter: a resume token, or the user (an email when it has an `@`)
/// and the password's SHA-256 digest, as Meteor's client sends them. Every secret is registered,
/// so a server that echoes it never shows it.
pub fn login_params<U: User>(u: &U, l: &Login) -> Value {
    let render = |v: &Option<Value>| v.as_ref().map(|v| u.render(v));
    if let Some(token) = render(&l.resume) {
        crate::redact::sent_payload(&token);
        return serde_json::json!({ "resume": token });
    }
    let user = match render(&l.user) {
        Some(Value::String(s)) if s.contains('@') => serde_json::json!({ "email": s }),
        Some(Value::String(s)) => serde_json::json!({ "username": s }),
        Some(other) => other,
        None => Value::Null,
    };
    let password = render(&l.password).map(|p| match p {
        Value::String(s) => s,
        other => other.to_string(),
    });
    let digest = password.map(|p| {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(p.as_bytes());
        let digest = hash.iter().map(|b| format!("{b:02x}")).collect::<String>();
        // Meteor takes the digest for the password: neither is shown as a server echoes it.
        crate::redact::sent_secret(&p);
        crate::redact::sent_secret(&digest);
        digest
    });
    serde_json::json!({ "user": user, "password": { "digest": digest, "algorithm": "sha-256" } })
}

//! GraphQL's steps over graphql-ws: a query or mutation (`execute`), a subscription started with
//! its first results waited for (`subscribe`), and one completed (`complete`).

use std::time::Duration;

use serde_json::Value;

use super::wire::GqlConn;
use crate::scenario::{Execute, GqlSubscribe, Step, StepKind};
use crate::session::{Stop, User};

impl crate::realtime::Steps for GqlConn {
    async fn perform<U: User<Session = GqlConn>>(u: &mut U, step: &Step) -> Result<(), Stop> {
        match &step.kind {
            // Boxed, each: held only while it runs.
            StepKind::Execute(x) => Box::pin(execute(u, step, x)).await,
            StepKind::GqlSubscribe(g) => Box::pin(subscribe(u, step, g)).await,
            StepKind::Complete { name } => complete(u, step, name.as_deref()),
            _ => Err(crate::realtime::not_ours(u, step, "GraphQL")),
        }
    }
}

/// A query or mutation; its `data` captured. The user's last write is when it was sent.
async fn execute<U: User<Session = GqlConn>>(u: &mut U, step: &Step, x: &Execute) -> Result<(), Stop> {
    let variables = x.variables.as_ref().map(|v| u.render(v));
    let timeout = u.timeout(x.timeout);
    let conn = u.session(step)?;
    let (sent, done, result) = conn.execute(&x.query, variables, timeout).await.map_err(|f| u.fail(step, &f))?;
    u.wrote(sent);
    if let Some(cap) = &x.capture {
        u.capture(cap, result.get("data").cloned().unwrap_or(Value::Null));
    }
    u.ok(step, done - sent);
    Ok(())
}

/// A subscription started and its first `count` results waited for; kept under its capture's
/// name (or the step's) for a `complete`.
async fn subscribe<U: User<Session = GqlConn>>(u: &mut U, step: &Step, g: &GqlSubscribe) -> Result<(), Stop> {
    let variables = g.variables.as_ref().map(|v| u.render(v));
    let timeout = u.timeout(g.timeout);
    let conn = u.session(step)?;
    let (id, to_first) = conn.live(&g.query, variables, g.count, timeout).await.map_err(|f| u.fail(step, &f))?;
    let key = g.capture.clone().unwrap_or_else(|| step.name.clone());
    if let Some(var) = &g.capture {
        u.vars_mut().insert(var.clone(), Value::String(id.clone()));
    }
    u.subs().insert(key, (id, Vec::new()));
    u.ok(step, to_first);
    Ok(())
}

/// Completes the named subscription, or the user's latest.
fn complete<U: User<Session = GqlConn>>(u: &mut U, step: &Step, name: Option<&str>) -> Result<(), Stop> {
    let id = match name {
        Some(n) => u.subs().remove(n).map(|(id, _)| id),
        None => {
            let latest = u.subs().iter().max_by_key(|(_, (id, _))| id.parse::<u64>().unwrap_or(0));
            let key = latest.map(|(k, _)| k.clone());
            key.and_then(|k| u.subs().remove(&k)).map(|(id, _)| id)
        }
    };
    let Some(id) = id else {
        let what = name.unwrap_or("any");
        return Err(u.fail_with(step, "scenario", &format!("no subscription {what:?} to complete")));
    };
    u.session(step)?.complete(&id).map_err(|f| u.fail(step, &f))?;
    u.ok(step, Duration::ZERO);
    Ok(())
}

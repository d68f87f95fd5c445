//! An audit checkpoint as a user takes it: with the other users first in the closed model, its
//! connection made whole, then its cache against the truth once the run is quiet
//! (`audit.rs` holds what every worker shares and the truth's reads).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::audit::{check, Ask, Shared};
use crate::scenario::Audit;
use crate::session::Session;
use crate::stats::audit::Check;

/// An audit checkpoint as a user takes it.
impl<S: crate::realtime::Steps> super::user::Vu<'_, S> {
    /// A checkpoint: with the other users first in the closed model, then this user's cache
    /// against the truth once the run is quiet. What it found goes to the audit, not to the
    /// step's errors; the step's latency is the checkpoint's time.
    pub(super) async fn audit(&mut self, step: &crate::scenario::Step, a: &Audit) {
        let Some(shared) = self.w.audit.as_deref() else { return };
        let began = Instant::now();
        let check = if self.conn.is_none() {
            Check::Incomplete("no connection at the checkpoint (after a disconnect, or before a connect)".into())
        } else {
            let gathered = match self.until.is_some() {
                true => Some(shared.gather(began + a.timeout).await),
                false => None,
            };
            let mut opened = Instant::now();
            // However often the connection is cut and made again, the checkpoint ends by then.
            let last = opened + a.timeout + self.timeout(None);
            let generation = match &gathered {
                Some(Ok(seat)) => Some(seat.generation()),
                _ => None,
            };
            let check = match &gathered {
                Some(Err(why)) => Check::Incomplete(why.clone()),
                _ => loop {
                    // A user whose connection closed is made whole first, however long its
                    // reconnection takes; its check then has its own timeout.
                    let renewed = self.conn.as_ref().and_then(Session::gone).is_some();
                    if let Err(why) = self.renew().await {
                        break Check::Incomplete(why);
                    }
                    if renewed {
                        opened = Instant::now();
                    }
                    let check = self.compare(a, shared, opened, generation).await;
                    // A connection that a fault closed during the check: again, on a new one.
                    let again = self.conn.as_ref().and_then(Session::gone).is_some()
                        && self.w.plan.scenario.config.ddp.reconnect
                        && opened.elapsed() < a.timeout
                        && Instant::now() < last;
                    if !again {
                        break check;
                    }
                },
            };
            if let Some(Ok(seat)) = gathered {
                shared.leave(seat, opened + a.timeout + Duration::from_secs(1)).await;
            }
            check
        };
        let first = !std::mem::replace(&mut self.checked, true);
        {
            let mut r = self.rec();
            match check {
                Check::Agreed => r.second.audit_agreed += 1,
                Check::Differed(..) => r.second.audit_differed += 1,
                Check::Incomplete(_) | Check::Unstable(_) => {}
            }
            r.audit.record(&step.name, check);
            r.audit.users += u64::from(first);
        }
    }

    /// A connection a fault closed is made again before a check, as the user's next step would
    /// (when the run reconnects); Err says why it could not be.
    async fn renew(&mut self) -> Result<(), String> {
        let gone = self.conn.as_ref().and_then(Session::gone);
        let Some(why) = gone.filter(|_| self.w.plan.scenario.config.ddp.reconnect) else { return Ok(()) };
        self.reconnect(None).await.map_err(|_| {
            format!("the user's connection closed ({why}) and could not be made again within the step timeout or the user's phase")
        })
    }

    /// This user's cache against the truth, once the run is quiet.
    async fn compare(&self, a: &Audit, shared: &Shared, opened: Instant, generation: Option<u64>) -> Check {
        let Some(conn) = &self.conn else { return Check::Incomplete("no connection at the checkpoint".into()) };
        let mut subs: Vec<(String, Vec<Value>)> = match &a.subscription {
            Some(name) => {
                let params = match &a.params {
                    Some(p) => p.iter().map(|p| crate::scenario::template::render(p, &self.vars)).collect(),
                    None => self.subs.get(name).map(|(_, p)| p.clone()).unwrap_or_default(),
                };
                vec![(name.clone(), params)]
            }
            None => self.subs.iter().map(|(n, (_, p))| (n.clone(), p.clone())).collect(),
        };
        subs.sort_by(|x, y| x.0.cmp(&y.0));
        let ask = Ask {
            user: self.arrival,
            conn,
            target: self.session_target(),
            subs,
            token: self.vars.get("loginToken"),
            audit: a,
            began: opened,
            generation,
        };
        let w = self.w;
        check(ask, shared, &w.audit_local, &|c| w.close(c)).await
    }
}

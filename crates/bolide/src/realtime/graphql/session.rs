//! graphql-ws's session: one `proto::graphql_ws::GqlConn` (the `graphql-transport-ws`
//! subprotocol), queries and mutations (`execute`) and subscriptions (`subscribe`, `complete`)
//! over it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proto::link::Failure;
use crate::realtime::graphql::wire::{self, GqlConn};
use crate::session::Target;

impl crate::session::Session for GqlConn {
    type Failure = Failure;
    const RECONNECTS: bool = false;

    async fn open(to: Target<'_>, timeout: Duration) -> Result<(GqlConn, Duration), Failure> {
        let endpoint = &to.plan.targets[to.target].endpoint;
        // The user's variables in connectionParams and the headers (a token per user).
        let mut cfg = to.plan.scenario.config.graphql.clone();
        if let Some(vars) = to.vars {
            use crate::scenario::template;
            cfg.init = cfg.init.map(|p| template::render(&p, vars));
            for (_, v) in cfg.headers.iter_mut() {
                if let Value::String(t) = template::render_str(v, vars) {
                    *v = t;
                }
            }
            cfg.headers.retain(|(_, v)| !v.contains(['\r', '\n']));
        }
        let cfg = &cfg;
        // The target's URL may name the endpoint (`http://host/graphql`); else the configured path.
        let path = if endpoint.prefix.is_empty() { cfg.path.clone() } else { endpoint.prefix.clone() };
        let conn = wire::connect(endpoint, cfg, &path, to.tls, std::rc::Rc::clone(to.traffic), timeout).await?;
        let handshake = conn.handshake;
        Ok((conn, handshake))
    }

    fn last_data(&self) -> Option<Instant> {
        self.shared().state.borrow().last_data
    }

    fn gone(&self) -> Option<String> {
        self.shared().state.borrow().closed.clone()
    }

    fn close(self) -> Option<tokio::task::JoinHandle<()>> {
        GqlConn::close(self)
    }

    fn gone_at(&self) -> Option<Instant> {
        None
    }

    fn session_id(&self) -> Option<String> {
        None
    }

    fn snapshot(&self, _collection: Option<&str>) -> crate::stats::audit::Snapshot {
        Default::default()
    }

    /// A graphql-ws session is never made again (its users fail when it closes): its live
    /// subscriptions are not restored.
    async fn restore(
        &self,
        _: Option<&Value>,
        subs: &[(String, Vec<Value>)],
        _: Duration,
    ) -> Result<Vec<String>, (String, Failure)> {
        match subs.is_empty() {
            true => Ok(Vec::new()),
            false => Err((
                "subscribe".into(),
                Failure::new("closed", "graphql-ws subscriptions are not made again on a new connection"),
            )),
        }
    }
}

/// graphql-ws's own verbs, which its steps (`steps.rs`) use.
impl GqlConn {
    /// A subscription started and its first `count` `next` messages waited for: its id and
    /// the time to the first.
    pub async fn live(
        &self,
        query: &str,
        variables: Option<Value>,
        count: u64,
        timeout: Duration,
    ) -> Result<(String, Duration), Failure> {
        if count == 0 {
            return Ok((self.subscribe_only(query, variables)?, Duration::ZERO));
        }
        let began = Instant::now();
        let (id, first) = GqlConn::subscribe(self, query, variables, timeout).await?;
        if count > 0 {
            self.take_nexts(&id, count, timeout.saturating_sub(began.elapsed())).await?;
        }
        Ok((id, first))
    }
}

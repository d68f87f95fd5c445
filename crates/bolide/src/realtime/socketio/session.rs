//! Socket.IO's session: a user's connections, one per namespace as Artillery's users have them
//! (the target's own opened by `connect`, others at their first emit or listen), each a
//! `proto::socketio::SioConn` over polling, upgraded, or a WebSocket.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proto::http::tls::Connector;
use crate::proto::link::Failure;
use crate::proto::ws::{Endpoint, Traffic};
use crate::realtime::socketio::wire::{self, SioConn};
use crate::scenario::settings::SocketIoConfig;
use crate::session::Target;

/// What an emit waits for after it is sent.
pub enum Await<'a> {
    Nothing,
    /// The server's acknowledgement.
    Ack,
    /// Events named `channel`, until they answer `want`.
    Event {
        channel: &'a str,
        want: wire::Want,
    },
}

/// An emit: when it was sent, when its answer came (when it was sent, for one that waits for
/// nothing), and the answer's arguments.
pub struct Emitted {
    pub sent: Instant,
    pub answered: Instant,
    pub args: Vec<Value>,
}

/// What a user's later namespaces connect with.
struct Ctx {
    ep: Endpoint,
    cfg: SocketIoConfig,
    tls: Option<Connector>,
    traffic: Rc<RefCell<Traffic>>,
    /// The target's own namespace (its URL's path, `/` without one).
    main: String,
}

pub struct SioSession {
    ctx: Ctx,
    conns: RefCell<Vec<(String, Rc<SioConn>)>>,
}

impl SioSession {
    /// The connection to namespace `to` (relative to the target's), made now if it is the first use.
    async fn namespace(&self, to: Option<&str>, timeout: Duration) -> Result<Rc<SioConn>, Failure> {
        let nsp = match to {
            None => self.ctx.main.clone(),
            Some(n) if self.ctx.main == "/" => n.to_string(),
            Some(n) => format!("{}{n}", self.ctx.main),
        };
        if let Some((_, c)) = self.conns.borrow().iter().find(|(n, _)| *n == nsp) {
            return Ok(Rc::clone(c));
        }
        let c = &self.ctx;
        let conn = Rc::new(wire::connect(&c.ep, &c.cfg, &nsp, c.tls.as_ref(), Rc::clone(&c.traffic), timeout).await?);
        self.conns.borrow_mut().push((nsp, Rc::clone(&conn)));
        Ok(conn)
    }
}

/// `config.socketio` with the user's variables in its query, headers and auth.
fn rendered(cfg: &SocketIoConfig, vars: Option<&crate::scenario::template::Vars>) -> SocketIoConfig {
    use crate::scenario::template;
    let mut c = cfg.clone();
    let Some(vars) = vars else { return c };
    let text = |s: &str| match template::render_str(s, vars) {
        Value::String(t) => t,
        other => other.to_string(),
    };
    for (_, v) in c.query.iter_mut().chain(c.headers.iter_mut()) {
        *v = text(v);
    }
    // A rendered header value must stay one line.
    c.headers.retain(|(_, v)| !v.contains(['\r', '\n']));
    c.auth = c.auth.map(|a| template::render(&a, vars));
    c
}

impl crate::session::Session for SioSession {
    type Failure = Failure;
    const RECONNECTS: bool = false;

    async fn open(to: Target<'_>, timeout: Duration) -> Result<(SioSession, Duration), Failure> {
        let endpoint = &to.plan.targets[to.target].endpoint;
        let main = if endpoint.prefix.is_empty() { "/".to_string() } else { endpoint.prefix.clone() };
        let ctx = Ctx {
            ep: endpoint.clone(),
            cfg: rendered(&to.plan.scenario.config.socketio, to.vars),
            tls: to.tls.cloned(),
            traffic: Rc::clone(to.traffic),
            main,
        };
        let session = SioSession { ctx, conns: RefCell::new(Vec::new()) };
        let conn = session.namespace(None, timeout).await?;
        Ok((session, conn.handshake))
    }

    fn last_data(&self) -> Option<Instant> {
        self.conns.borrow().iter().filter_map(|(_, c)| c.shared().state.borrow().last_data).max()
    }

    fn gone(&self) -> Option<String> {
        self.conns.borrow().first().and_then(|(_, c)| c.shared().state.borrow().closed.clone())
    }

    fn close(self) -> Option<tokio::task::JoinHandle<()>> {
        let tasks: Vec<_> = self
            .conns
            .into_inner()
            .into_iter()
            .filter_map(|(_, c)| Rc::try_unwrap(c).ok())
            .filter_map(SioConn::close)
            .collect();
        if tasks.is_empty() {
            return None;
        }
        Some(tokio::task::spawn_local(async move {
            for t in tasks {
                let _ = t.await;
            }
        }))
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

    /// A Socket.IO session is never made again (its users fail when it closes), and has no
    /// login or subscriptions to restore.
    async fn restore(
        &self,
        _: Option<&Value>,
        _: &[(String, Vec<Value>)],
        _: Duration,
    ) -> Result<Vec<String>, (String, Failure)> {
        Ok(Vec::new())
    }
}

/// Socket.IO's own verbs, which its steps (`steps.rs`) use.
impl SioSession {
    pub async fn emit(
        &self,
        to: Option<&str>,
        args: Vec<Value>,
        reply: Await<'_>,
        timeout: Duration,
    ) -> Result<Emitted, Failure> {
        let began = Instant::now();
        let conn = self.namespace(to, timeout).await?;
        let left = timeout.saturating_sub(began.elapsed());
        let (sent, answered, args) = match reply {
            Await::Nothing => {
                let sent = conn.emit(&args)?;
                (sent, sent, Vec::new())
            }
            Await::Ack => conn.emit_with_ack(&args, left).await?,
            Await::Event { channel, want } => conn.emit_for_response(&args, channel, want, left).await?,
        };
        Ok(Emitted { sent, answered, args })
    }

    pub async fn listen(
        &self,
        to: Option<&str>,
        channel: &str,
        count: u64,
        timeout: Duration,
    ) -> Result<Instant, Failure> {
        let began = Instant::now();
        let conn = self.namespace(to, timeout).await?;
        conn.take_events(channel, count, timeout.saturating_sub(began.elapsed())).await
    }
}

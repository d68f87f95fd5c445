//! An SSE user's session: the connection its requests go over (opened by `connect`; over
//! HTTP/1.1 kept alive between streams that end cleanly, a new one when it is busy or gone; over
//! HTTP/2 one connection that carries every stream of the user at once, as a browser's does), and
//! the streams it keeps open after their step (`keep: true`), whose events `listen` steps count.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Notify;

use super::wire::{self, Ask, Prepared, Read, Response};
use crate::proto::http::tls::Connector;
use crate::proto::http::{h2, Stream};
use crate::proto::link::Failure;
use crate::proto::ws::{Endpoint, Traffic};
use crate::session::Target;
use crate::stats::ErrorClass;

/// What one read of a stream brought: its bytes, and its events (each a message in).
pub fn tally(traffic: &RefCell<Traffic>, bytes: u64, events: u64) -> std::cell::RefMut<'_, Traffic> {
    let mut t = traffic.borrow_mut();
    t.bytes_in += bytes;
    t.messages_in += events;
    t.count("sse.events", events);
    t
}

/// Events of the kept streams by name: how many came and how many `listen` steps took.
#[derive(Default)]
pub struct Heard {
    pub by_name: RefCell<crate::vecmap::VecMap<String, (u64, u64)>>,
    pub notify: Notify,
    /// Why the last kept stream ended for good, once none is left.
    pub ended: RefCell<Option<String>>,
    /// Kept streams still read (or being asked again).
    live: Cell<u32>,
}

impl Heard {
    /// A kept stream ended for good: once it was the last, `listen` stops waiting.
    fn gone(&self, why: String) {
        self.live.set(self.live.get().saturating_sub(1));
        if self.live.get() == 0 {
            *self.ended.borrow_mut() = Some(why);
        }
        self.notify.notify_waiters();
    }

    /// Distinct event names counted at most (a server inventing names does not grow it).
    const MAX_NAMES: usize = 256;

    pub fn heard(&self, name: &str) {
        let mut m = self.by_name.borrow_mut();
        let room = m.len() < Self::MAX_NAMES;
        match m.get_mut(name) {
            Some(n) => n.0 += 1,
            None if room => {
                m.insert(name.to_string(), (1, 0));
            }
            None => {}
        }
        drop(m);
        self.notify.notify_waiters();
    }
}

/// How a kept stream is asked again when the server ends it: its request, and the wait when the
/// server set no `retry`.
pub struct Again {
    pub ask: Ask,
    pub wait: Duration,
}

/// The target as every user of one worker thread reaches it: its URL, where it is and its TLS
/// connector, shared (a user holds a pointer, not copies of them).
pub struct Server {
    /// The target's URL (its path kept in front of a step's path).
    base: url::Url,
    ep: Endpoint,
    tls: Option<Connector>,
    /// TLS offering ALPN `h2`, for HTTP/2 over https:// (made at the first).
    tls_h2: std::cell::OnceCell<Connector>,
    insecure: bool,
}

/// A connection free for the user's next request.
enum Free {
    H1(Stream),
    /// An HTTP/2 connection: free however many streams it carries.
    H2(h2::Sender),
}

impl Server {
    /// A new connection (TCP, and TLS for https: offering ALPN `h2` for HTTP/2).
    async fn connect(&self, http2: bool) -> Result<Stream, Failure> {
        let tls = match http2 && self.ep.tls {
            true => Some(self.tls_h2.get_or_init(|| Connector::with_alpn(self.insecure, &[b"h2"]))),
            false => self.tls.as_ref(),
        };
        crate::proto::http::open_stream(&self.ep.host, &self.ep.addrs, self.ep.tls, tls)
            .await
            .map_err(|f| Failure::new(if f.class.name() == "tls" { "tls" } else { "connect" }, f.detail))
    }

    /// A new connection ready for `http2` or not, within `timeout`.
    async fn open(&self, http2: bool, timeout: Duration) -> Result<Free, Failure> {
        let opening = async {
            let conn = self.connect(http2).await?;
            match http2 {
                true => h2::handshake(conn).await.map(Free::H2).map_err(h2_failure),
                false => Ok(Free::H1(conn)),
            }
        };
        tokio::time::timeout(timeout, opening)
            .await
            .map_err(|_| Failure::new("timeout", format!("no connection within {timeout:?}")))?
    }

    /// `req` on a new connection; the connection too when it is HTTP/2 (free for more streams).
    async fn fresh(&self, req: &Prepared, timeout: Duration) -> Result<(Response, Option<h2::Sender>), Failure> {
        let began = Instant::now();
        let conn = self.open(matches!(req, Prepared::H2(_)), timeout).await?;
        send_on(conn, req, timeout.saturating_sub(began.elapsed())).await
    }

    /// This thread's [`Server`] for `url`, made once while its users hold it.
    fn shared(url: &str, ep: &Endpoint, tls: Option<&Connector>, insecure: bool) -> Result<Rc<Server>, Failure> {
        thread_local! {
            static SERVERS: RefCell<Vec<std::rc::Weak<Server>>> = const { RefCell::new(Vec::new()) };
        }
        SERVERS.with_borrow_mut(|all| {
            all.retain(|w| w.strong_count() > 0);
            let same = |s: &Server| {
                s.base.as_str() == url
                    && (s.ep.host.as_str(), s.ep.port, s.ep.tls, &s.ep.addrs)
                        == (ep.host.as_str(), ep.port, ep.tls, &ep.addrs)
                    && s.tls.is_some() == tls.is_some()
            };
            if let Some(s) = all.iter().filter_map(std::rc::Weak::upgrade).find(|s| same(s)) {
                return Ok(s);
            }
            let base = url::Url::parse(url).map_err(|e| Failure::new("connect", e.to_string()))?;
            let s = Rc::new(Server {
                base,
                ep: ep.clone(),
                tls: tls.cloned(),
                tls_h2: std::cell::OnceCell::new(),
                insecure,
            });
            all.push(Rc::downgrade(&s));
            Ok(s)
        })
    }
}

pub struct SseSession {
    server: Rc<Server>,
    pub traffic: Rc<RefCell<Traffic>>,
    /// A connection free for the next request. An HTTP/2 one stays here while it carries
    /// streams, shared with the kept streams' asking again, as a browser's one connection is.
    idle: Rc<RefCell<Option<Free>>>,
    kept: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    pub heard: Rc<Heard>,
    pub last_data: Rc<Cell<Option<Instant>>>,
}

impl SseSession {
    /// A step's URL: none is the target's own, a path joins the target's (its path kept), an
    /// absolute URL must be on the target's server (its scheme, host and port: the user's
    /// connection is to it).
    pub fn url(&self, text: &str) -> Result<url::Url, String> {
        let base = &self.server.base;
        if text.is_empty() {
            return Ok(base.clone());
        }
        if text.starts_with('/') {
            let mut u = base.clone();
            let prefix = base.path().trim_end_matches('/');
            let (path, query) = text.split_once('?').map_or((text, None), |(p, q)| (p, Some(q)));
            u.set_path(&format!("{prefix}{path}"));
            u.set_query(query);
            return Ok(u);
        }
        let u = url::Url::parse(text).map_err(|e| format!("URL {:?}: {e}", crate::redact::printable(text)))?;
        if u.origin() != base.origin() {
            return Err(format!(
                "URL {:?} is not on the target's server ({}): give a path, or the target's own URL",
                crate::redact::printable(text),
                base.origin().ascii_serialization()
            ));
        }
        Ok(u)
    }

    /// Sends `ask` on the free connection (a new one when none is free, or when the kept one
    /// turns out closed before any answer) and reads the response's head.
    pub async fn send(&self, ask: &Ask, timeout: Duration) -> Result<Response, Failure> {
        let began = Instant::now();
        // Made first: a request that cannot be made costs no connection.
        let req = ask.prepare()?;
        {
            let mut t = self.traffic.borrow_mut();
            t.messages_out += 1;
            t.bytes_out += req.bytes() as u64;
        }
        match &req {
            Prepared::H2(h2req) => {
                if let Some(send) = shared_h2(&self.idle) {
                    // None: a connection that had ended (or refused the stream unseen): a new one.
                    if let Some(r) = on_shared(&self.idle, &send, h2req, timeout).await {
                        return r.map_err(h2_failure);
                    }
                }
            }
            // A kept HTTP/1.1 connection is taken (an HTTP/2 one with an HTTP/1.1 request: closed).
            Prepared::H1(bytes) => {
                let idle = self.idle.borrow_mut().take();
                if let Some(Free::H1(conn)) = idle {
                    match wire::send(conn, bytes, timeout).await {
                        Err(f) if f.class == "closed" => {}
                        other => return other,
                    }
                }
            }
        }
        let (r, h2) = self.server.fresh(&req, timeout.saturating_sub(began.elapsed())).await?;
        if let Some(send) = h2 {
            *self.idle.borrow_mut() = Some(Free::H2(send));
        }
        Ok(r)
    }

    /// A response read to its end on a connection that stays open: free for the next request
    /// (any other is closed).
    pub fn done_with(&self, r: Response) {
        if let Some(conn) = r.into_idle() {
            *self.idle.borrow_mut() = Some(Free::H1(conn));
        }
    }

    /// Keeps reading `r` after its step, each event counted for `listen`; asked again as
    /// EventSource does when the server ends it (`again`: the request, its wait).
    pub fn keep(&self, mut r: Response, again: Option<Rc<Again>>) {
        let heard = Rc::clone(&self.heard);
        let traffic = Rc::clone(&self.traffic);
        let last = Rc::clone(&self.last_data);
        let server = Rc::clone(&self.server);
        let idle = Rc::clone(&self.idle);
        self.heard.live.set(self.heard.live.get() + 1);
        self.heard.ended.borrow_mut().take();
        // The task is as large as its largest state for as long as the stream is kept: asking
        // again (a connect and a response's head) is boxed, so that it takes room only while it
        // runs.
        let task = tokio::task::spawn_local(async move {
            loop {
                let why = read_kept(&mut r, &heard, &traffic, &last).await;
                let Some(again) = again.as_deref() else {
                    heard.gone(why);
                    return;
                };
                match Box::pin(ask_again(&r, again, &server, &idle, &traffic)).await {
                    Ok(next) => r = next,
                    Err(why) => {
                        heard.gone(why);
                        return;
                    }
                }
            }
        });
        let mut kept = self.kept.borrow_mut();
        kept.retain(|t| !t.is_finished());
        kept.push(task);
    }
}

/// Reads a kept stream until the server ends it (or it fails): why it ended.
async fn read_kept(
    r: &mut Response,
    heard: &Heard,
    traffic: &RefCell<Traffic>,
    last: &Cell<Option<Instant>>,
) -> String {
    loop {
        let mut bytes = 0;
        let mut n = 0u64;
        let read = r
            .read(
                &mut |e| {
                    n += 1;
                    heard.heard(e.name);
                },
                &mut bytes,
            )
            .await;
        tally(traffic, bytes, n);
        if n > 0 {
            last.set(Some(Instant::now()));
        }
        match read {
            Ok(Read::More) => {}
            Ok(_) => return "the server ended the stream".to_string(),
            Err(f) => return f.detail,
        }
    }
}

/// Asks again for a kept stream the server ended, after its retry (or the configured wait), as
/// often as it takes until the user leaves (its session's drop ends the task); the old response
/// is not read again. Over HTTP/2 it asks on the user's connection (`idle`), as a browser's
/// EventSource does; a connection opened for it becomes the user's when the user has none. Why
/// it stops asking: 204, or an answer that is no stream, as EventSource.
async fn ask_again(
    r: &Response,
    again: &Again,
    server: &Server,
    idle: &RefCell<Option<Free>>,
    traffic: &RefCell<Traffic>,
) -> Result<Response, String> {
    let wait = r.parser.retry_ms.map_or(again.wait, Duration::from_millis).max(Duration::from_millis(10));
    let mut ask = again.ask.clone();
    if let Some(id) = r.parser.last_id.as_ref().filter(|id| !id.is_empty()) {
        ask.headers.push(("Last-Event-ID".into(), id.clone()));
    }
    // A request that cannot be made (an id HTTP/2 cannot carry) is never asked.
    let req = ask.prepare().map_err(|f| f.detail)?;
    loop {
        tokio::time::sleep(wait).await;
        let timeout = Duration::from_secs(30);
        // Over HTTP/2, first on the user's connection; a new one when it has none or it is gone.
        let mut answer = None;
        if let (Some(send), Prepared::H2(h2req)) = (ask.http2.then(|| shared_h2(idle)).flatten(), &req) {
            if let Some(r) = on_shared(idle, &send, h2req, timeout).await {
                traffic.borrow_mut().count("sse.reconnects", 1);
                answer = Some(r.map_err(h2_failure));
            }
        }
        let answer = match answer {
            Some(a) => a,
            None => {
                let Ok(conn) = server.open(ask.http2, timeout).await else {
                    continue;
                };
                traffic.borrow_mut().count("sse.reconnects", 1);
                send_on(conn, &req, timeout).await.map(|(next, h2)| {
                    // A connection opened for it becomes the user's when the user has none.
                    if let Some(send) = h2 {
                        idle.borrow_mut().get_or_insert(Free::H2(send));
                    }
                    next
                })
            }
        };
        match answer {
            Ok(mut next) if next.is_stream() => {
                traffic.borrow_mut().count("sse.streams", 1);
                next.parser = r.parser.resume();
                return Ok(next);
            }
            Ok(next) => return Err(format!("the server answered {} to a reconnection", next.head.status)),
            Err(_) => {}
        }
    }
}

/// `req` as a new stream of the user's HTTP/2 connection `send`: its answer, or a failure that
/// leaves the connection as it was (a stream reset, no answer in time) or ended it (forgotten);
/// None when the connection had ended (or refused the stream unseen): forgotten, the request
/// not sent.
async fn on_shared(
    idle: &RefCell<Option<Free>>,
    send: &h2::Sender,
    req: &h2::H2Request,
    timeout: Duration,
) -> Option<Result<Response, crate::proto::http::Failure>> {
    match wire::send_h2(send, req, timeout).await {
        Ok(r) => Some(Ok(r)),
        Err(f) if f.unsent || f.stale => {
            forget(idle, send);
            None
        }
        Err(f) if matches!(f.class, ErrorClass::StreamReset | ErrorClass::Timeout) => Some(Err(f)),
        Err(f) => {
            forget(idle, send);
            Some(Err(f))
        }
    }
}

/// The user's HTTP/2 connection, if it has one: a handle of it.
fn shared_h2(idle: &RefCell<Option<Free>>) -> Option<h2::Sender> {
    match &*idle.borrow() {
        Some(Free::H2(send)) => Some(send.clone()),
        _ => None,
    }
}

/// Forgets the user's HTTP/2 connection when it is still `send` (failed: the next request opens
/// another).
fn forget(idle: &RefCell<Option<Free>>, send: &h2::Sender) {
    let mut idle = idle.borrow_mut();
    if matches!(&*idle, Some(Free::H2(s)) if s.same(send)) {
        *idle = None;
    }
}

/// `req` on a connection just opened for it; the connection too when it is HTTP/2.
async fn send_on(conn: Free, req: &Prepared, timeout: Duration) -> Result<(Response, Option<h2::Sender>), Failure> {
    match (conn, req) {
        (Free::H1(conn), Prepared::H1(bytes)) => Ok((wire::send(conn, bytes, timeout).await?, None)),
        (Free::H2(send), Prepared::H2(h2req)) => {
            let r = wire::send_h2(&send, h2req, timeout).await.map_err(h2_failure)?;
            Ok((r, Some(send)))
        }
        _ => Err(Failure::new("protocol", "a connection of the other HTTP version")),
    }
}

/// An HTTP/2 failure in the classes of a stream's failures.
fn h2_failure(f: crate::proto::http::Failure) -> Failure {
    if f.wrong_protocol {
        return Failure::new(
            "protocol",
            "the server does not speak HTTP/2 (no ALPN h2 over TLS, or an HTTP/1.1 answer to the preface \
             in clear): without http2: true (and config.sse.http2) the streams go over HTTP/1.1",
        );
    }
    Failure::new(f.class.name(), f.detail)
}

impl crate::session::Session for SseSession {
    type Failure = Failure;
    const RECONNECTS: bool = false;

    /// The connection the user's first request goes over (TCP, and TLS for https).
    async fn open(to: Target<'_>, timeout: Duration) -> Result<(SseSession, Duration), Failure> {
        let target = &to.plan.targets[to.target];
        let began = Instant::now();
        to.traffic.borrow_mut().declare(&super::THROUGHPUTS, &super::PER_USER);
        let s = SseSession {
            server: Server::shared(&target.url, &target.endpoint, to.tls, to.plan.insecure)?,
            traffic: Rc::clone(to.traffic),
            idle: Rc::default(),
            kept: RefCell::new(Vec::new()),
            heard: Rc::default(),
            last_data: Rc::default(),
        };
        let conn = s.server.open(over_h2(&to.plan.scenario), timeout).await?;
        *s.idle.borrow_mut() = Some(conn);
        Ok((s, began.elapsed()))
    }

    fn last_data(&self) -> Option<Instant> {
        self.last_data.get()
    }

    fn gone(&self) -> Option<String> {
        None
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

    /// An SSE session is never made again: it has no subscriptions to restore.
    async fn restore(
        &self,
        _: Option<&Value>,
        subs: &[(String, Vec<Value>)],
        _: Duration,
    ) -> Result<Vec<String>, (String, Failure)> {
        match subs.is_empty() {
            true => Ok(Vec::new()),
            false => Err(("stream".into(), Failure::new("closed", "SSE streams are not made again by a reconnection"))),
        }
    }

    /// Closes the kept streams and the free connection.
    fn close(self) -> Option<tokio::task::JoinHandle<()>> {
        drop(self);
        None
    }
}

/// Whether the first connection is HTTP/2: every `stream` and `chat` of the scenario is.
fn over_h2(scenario: &crate::scenario::Scenario) -> bool {
    use crate::scenario::StepKind;
    let (mut h2, mut h1) = (0, 0);
    for f in &scenario.flows {
        crate::scenario::each_in(&f.steps, &mut |s| match &s.kind {
            StepKind::Stream(s) if s.http2 => h2 += 1,
            StepKind::Chat(c) if c.http2 => h2 += 1,
            StepKind::Stream(_) | StepKind::Chat(_) => h1 += 1,
            _ => {}
        });
    }
    h2 > 0 && h1 == 0
}

/// A user dropped (closed, or cut at its timeout) stops reading its kept streams.
impl Drop for SseSession {
    fn drop(&mut self) {
        for t in self.kept.get_mut().drain(..) {
            t.abort();
        }
    }
}

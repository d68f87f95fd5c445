//! SockJS's HTTP fallbacks, the transports restrictive proxies force on a browser: `xhr-polling`
//! (each `POST .../xhr` answers one frame, then the client asks again) and `xhr-streaming` (one
//! `POST .../xhr_streaming` answers a stream of frames, after a 2 KB prelude, until the server
//! ends it and the client opens the next). Messages go out in `POST .../xhr_send`, a JSON array of
//! them. The session's messages reach the same shared state as over a WebSocket (`ddp::handle`),
//! so a user's steps, its cache and the audit are the same on every transport.
//!
//! Each request is one HTTP/1.1 exchange on a connection of its own (`Connection: close`): the
//! body read to its end, chunked or not.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ddp::sockjs::ServerFrame;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

use super::wire::{handle_text, Conn, Shared, State};
use crate::proto::http::tls::Connector;
use crate::proto::outbox;
use crate::proto::read::read_appending;
use crate::proto::ws::{ClientConfig, DdpFailure, Endpoint, Outgoing, Traffic, Transport};

/// The largest answer bolide reads from one poll (sockjs streams end at 128 KB).
const MAX_BODY: usize = 16 << 20;
/// How long a request may take to be answered (its head), and how long an answer may be silent:
/// a SockJS server sends a heartbeat every 25 s.
const SILENCE: Duration = Duration::from_secs(35);

/// A session's URL base: `<prefix>/sockjs/<server>/<session>`.
fn base(ep: &Endpoint) -> String {
    let server: u16 = rand::random::<u16>() % 1000;
    format!("{}/sockjs/{server:03}/{}", ep.prefix, crate::proto::ws::random_lower(8))
}

/// Sends `POST path` with `body` on a new connection; the stream, with the answer's head read
/// and the body bytes that came with it.
async fn post(
    ep: &Endpoint,
    tls: Option<&Connector>,
    path: &str,
    body: &[u8],
    traffic: &RefCell<Traffic>,
) -> Result<(crate::proto::http::Stream, bool, Vec<u8>), DdpFailure> {
    match tokio::time::timeout(SILENCE, post_within(ep, tls, path, body, traffic)).await {
        Ok(r) => r,
        Err(_) => Err(DdpFailure::Closed(format!("POST {path}: no answer within {SILENCE:?}"))),
    }
}

async fn post_within(
    ep: &Endpoint,
    tls: Option<&Connector>,
    path: &str,
    body: &[u8],
    traffic: &RefCell<Traffic>,
) -> Result<(crate::proto::http::Stream, bool, Vec<u8>), DdpFailure> {
    let mut s = crate::proto::ws::open(ep, tls).await?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: bolide/{}\r\n\r\n",
        crate::proto::ws::host_header(ep),
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    let mut wire = req.into_bytes();
    wire.extend_from_slice(body);
    s.write_all(&wire).await.map_err(|e| DdpFailure::Closed(format!("POST {path}: {e}")))?;
    traffic.borrow_mut().bytes_out += wire.len() as u64;
    let (head, rest) = crate::proto::ws::read_head(&mut s).await.map_err(|e| match e {
        DdpFailure::Connect(why) => DdpFailure::Closed(format!("POST {path}: {why}")),
        other => other,
    })?;
    traffic.borrow_mut().bytes_in += (head.len() + rest.len()) as u64;
    let status = head.lines().next().unwrap_or_default();
    if !(status.starts_with("HTTP/1.1 2") || status.starts_with("HTTP/1.0 2")) {
        return Err(DdpFailure::Closed(format!("POST {path} answered {}", crate::redact::printable(status))));
    }
    let chunked =
        crate::proto::ws::header(&head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    Ok((s, chunked, rest))
}

/// Takes what whole chunks `raw` holds into `out`; true once the last chunk came.
pub(crate) fn dechunk(raw: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<bool, DdpFailure> {
    loop {
        let Some(eol) = memchr::memmem::find(raw, b"\r\n") else { return Ok(false) };
        let line = String::from_utf8_lossy(&raw[..eol]);
        if eol > 64 {
            return Err(DdpFailure::Protocol("a chunk size line over 64 bytes".into()));
        }
        let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16)
            .ok()
            .filter(|n| *n <= MAX_BODY)
            .ok_or_else(|| {
                DdpFailure::Protocol(format!("a chunk size that is no number up to {MAX_BODY}: {line:?}"))
            })?;
        if size == 0 {
            return Ok(true);
        }
        if raw.len() < eol + 2 + size + 2 {
            return Ok(false);
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw.drain(..eol + 2 + size + 2);
    }
}

/// Reads an answer's body as it comes, handing each whole line (a SockJS frame) to `line`; until
/// its end (or `line` says stop).
async fn frames(
    mut s: crate::proto::http::Stream,
    chunked: bool,
    first: Vec<u8>,
    traffic: &RefCell<Traffic>,
    line: &mut dyn FnMut(&str) -> Result<(), DdpFailure>,
) -> Result<(), DdpFailure> {
    let (mut raw, mut body, mut total) = (first, Vec::new(), 0usize);
    loop {
        let ended = if chunked {
            dechunk(&mut raw, &mut body)?
        } else {
            body.append(&mut raw);
            false
        };
        while let Some(nl) = memchr::memchr(b'\n', &body) {
            let text = String::from_utf8_lossy(&body[..nl]).into_owned();
            body.drain(..=nl);
            line(&text)?;
        }
        if ended {
            return Ok(());
        }
        let n = match tokio::time::timeout(SILENCE, read_appending(&mut s, &mut raw)).await {
            Ok(r) => r.map_err(|e| DdpFailure::Closed(format!("reading: {e}")))?,
            Err(_) => return Err(DdpFailure::Closed(format!("the server was silent for {SILENCE:?}"))),
        };
        if n == 0 {
            return Ok(());
        }
        traffic.borrow_mut().bytes_in += n as u64;
        total += n;
        if total > MAX_BODY {
            return Err(DdpFailure::Protocol(format!("an answer over {MAX_BODY} bytes")));
        }
    }
}

/// Applies one SockJS frame: messages to the session's state; false for `o` and `h`.
fn apply(
    text: &str,
    shared: &Shared,
    cfg: &ClientConfig,
    traffic: &RefCell<Traffic>,
    replies: &mut Vec<String>,
) -> Result<(), DdpFailure> {
    if text.is_empty() || text.bytes().all(|b| b == b'h') {
        // The streaming prelude (2048 h's) and heartbeats.
        return Ok(());
    }
    match ddp::sockjs::parse_server_frame(text).map_err(|e| DdpFailure::Protocol(e.to_string()))? {
        ServerFrame::Open | ServerFrame::Heartbeat => Ok(()),
        ServerFrame::Messages(list) => {
            for m in list {
                handle_text(&m, shared, cfg, traffic, replies);
            }
            Ok(())
        }
        ServerFrame::Close { code, reason } => {
            Err(DdpFailure::Closed(format!("SockJS close {code} {}", crate::redact::printable(&reason))))
        }
    }
}

/// Opens a session over xhr-polling or xhr-streaming: the info request, the first poll (`o`),
/// `connect`, then `connected` within `deadline`.
pub async fn connect(
    ep: &Endpoint,
    cfg: &ClientConfig,
    tls: Option<&Connector>,
    traffic: Rc<RefCell<Traffic>>,
    deadline: Duration,
) -> Result<Conn, DdpFailure> {
    let begin = Instant::now();
    let shared = Rc::new(Shared { state: RefCell::new(State::default()), notify: Notify::new() });
    let (tx, rx) = outbox::channel();
    let opened = async {
        crate::proto::ws::sockjs_info(ep, tls, false).await?;
        let base = base(ep);
        let connect = ddp::message::Message::Connect {
            session: cfg.resume.clone(),
            version: super::wire::SUPPORTED[0].to_string(),
            support: super::wire::SUPPORTED.map(String::from).to_vec(),
        };
        let _ = tx.send(Outgoing::Ddp(connect.to_json()));
        let task = tokio::task::spawn_local(run(
            ep.clone(),
            tls.cloned(),
            base,
            rx,
            Rc::clone(&shared),
            cfg.clone(),
            Rc::clone(&traffic),
        ));
        Ok::<_, DdpFailure>(task)
    };
    let task = match tokio::time::timeout(deadline, opened).await {
        Ok(r) => r?,
        Err(_) => return Err(DdpFailure::Timeout(format!("no SockJS session within {deadline:?}"))),
    };
    let conn = Conn::from_parts(Rc::clone(&shared), tx, task, Duration::ZERO);
    let left = deadline.saturating_sub(begin.elapsed());
    conn.wait(left, "connected", |st| st.session.as_ref().map(|_| ())).await.map_err(|e| match e {
        DdpFailure::Timeout(_) => DdpFailure::Timeout(format!("no DDP session within {deadline:?}")),
        DdpFailure::Closed(why) => DdpFailure::Connect(why),
        other => other,
    })?;
    Ok(conn.handshake_took(begin.elapsed()))
}

/// The session's task: polls (or streams) what the server sends, and posts what the user sends
/// (and the answers to the server's pings), until either side ends it.
async fn run(
    ep: Endpoint,
    tls: Option<Connector>,
    base: String,
    mut rx: outbox::Receiver<Outgoing>,
    shared: Rc<Shared>,
    cfg: ClientConfig,
    traffic: Rc<RefCell<Traffic>>,
) {
    let (reply_tx, mut replies_rx) = outbox::channel::<String>();
    // Nothing is sent before the server opened the session (its `o`): it does not know it yet.
    let open = std::cell::Cell::new(false);
    let opened = Notify::new();
    let receive = async {
        let path = match cfg.transport {
            Transport::XhrStreaming => format!("{base}/xhr_streaming"),
            _ => format!("{base}/xhr"),
        };
        loop {
            let (s, chunked, first) = post(&ep, tls.as_ref(), &path, b"", &traffic).await?;
            let mut got = false;
            frames(s, chunked, first, &traffic, &mut |text| {
                if text == "o" {
                    open.set(true);
                    opened.notify_waiters();
                }
                let mut replies = Vec::new();
                apply(text, &shared, &cfg, &traffic, &mut replies)?;
                for r in replies {
                    let _ = reply_tx.send(r);
                }
                got = true;
                shared.notify.notify_waiters();
                Ok(())
            })
            .await?;
            if !got {
                // An answer without a frame: the server is going away.
                return Err::<(), _>(DdpFailure::Closed("the server ended the session".into()));
            }
        }
    };
    let send = async {
        while !open.get() {
            let wake = opened.notified();
            if open.get() {
                break;
            }
            wake.await;
        }
        loop {
            let mut batch = Vec::new();
            tokio::select! {
                out = rx.recv() => match out {
                    Some(Outgoing::Ddp(text)) => batch.push(text),
                    Some(Outgoing::Close) | None => return Ok::<String, DdpFailure>("closed by the client".into()),
                },
                Some(r) = replies_rx.recv() => batch.push(r),
            }
            let mut closing = false;
            loop {
                match rx.try_recv() {
                    Some(Outgoing::Ddp(more)) => batch.push(more),
                    Some(Outgoing::Close) => {
                        closing = true;
                        break;
                    }
                    None => break,
                }
            }
            while let Some(r) = replies_rx.try_recv() {
                batch.push(r);
            }
            let body = serde_json::to_string(&batch).unwrap_or_default();
            let (s, chunked, first) =
                post(&ep, tls.as_ref(), &format!("{base}/xhr_send"), body.as_bytes(), &traffic).await?;
            // The answer (204) is read to its end before the next send, so that messages keep
            // their order.
            frames(s, chunked, first, &traffic, &mut |_| Ok(())).await?;
            traffic.borrow_mut().messages_out += batch.len() as u64;
            if closing {
                return Ok("closed by the client".into());
            }
        }
    };
    // `--fault drop`: the session ends as a dropped WebSocket would.
    let dropped = async {
        let Some(d) = &cfg.drops else { return std::future::pending::<String>().await };
        let mut seen = d.round();
        loop {
            let wake = d.notify.notified();
            if d.hits(&mut seen) {
                return "dropped by bolide (--fault drop)".to_string();
            }
            wake.await;
        }
    };
    let why = tokio::select! {
        why = dropped => why,
        r = receive => match r {
            Err(DdpFailure::Protocol(why)) => {
                shared.state.borrow_mut().protocol_broken = true;
                traffic.borrow_mut().protocol_errors += 1;
                why
            }
            Err(f) => f.detail(),
            Ok(()) => "the server ended the session".into(),
        },
        r = send => match r {
            Ok(why) => why,
            Err(f) => f.detail(),
        },
    };
    {
        let mut st = shared.state.borrow_mut();
        st.closed = Some(why);
        st.closed_at = Some(std::time::Instant::now());
    }
    shared.notify.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_taken_whole_as_they_come() {
        let mut raw = b"5\r\nhello\r\n3;x=1\r\n ab\r\n".to_vec();
        let mut out = Vec::new();
        assert!(!dechunk(&mut raw, &mut out).unwrap());
        assert_eq!(out, b"hello ab");
        raw.extend_from_slice(b"2\r\nc");
        assert!(!dechunk(&mut raw, &mut out).unwrap(), "half a chunk waits");
        raw.extend_from_slice(b"d\r\n0\r\n\r\n");
        assert!(dechunk(&mut raw, &mut out).unwrap());
        assert_eq!(out, b"hello abcd");
        assert!(dechunk(&mut b"zz\r\n".to_vec(), &mut out).is_err());
    }
}

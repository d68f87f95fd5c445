//! The steps of an `engine: sse` flow: a `stream` read event by event, a `chat` (a streamed
//! completion of an OpenAI-compatible server), and `listen`, which counts the events of the
//! streams a user keeps open.
//!
//! Counts (the document's `summary.events`): `sse.streams` (responses that were event streams),
//! `sse.events` (events read), `sse.comments`, `sse.reconnects`; `llm.requests` (completions
//! read to their end), `llm.output_tokens` (chunks that carried text), `llm.usage_responses`,
//! `llm.usage_prompt_tokens` and `llm.usage_completion_tokens` (where the server sent its usage),
//! `llm.total_tokens` (their sum), `llm.good_requests` (with `config.llm.goodput`). Measures: `sse.first_event`, `sse.gap`;
//! `llm.ttft`, `llm.itl` (every gap between tokens), `llm.tpot`, `llm.e2el`.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::llm::{self, Completion};
use super::session::{tally, Again, SseSession};
use super::wire::{self, Read, Response};
use crate::proto::link::Failure;
use crate::scenario::{Chat, Listen, SseStream, Step, StepKind};
use crate::session::{Stop, User};

impl crate::realtime::Steps for SseSession {
    async fn perform<U: User<Session = SseSession>>(u: &mut U, step: &Step) -> Result<(), Stop> {
        match &step.kind {
            StepKind::Stream(s) => Box::pin(stream(u, step, s)).await,
            StepKind::Chat(c) => Box::pin(chat(u, step, c)).await,
            StepKind::Listen(l) => Box::pin(listen(u, step, l)).await,
            _ => Err(crate::realtime::not_ours(u, step, "SSE")),
        }
    }
}

/// Headers with the user's `{{ }}` rendered; one holding a line break is dropped.
fn headers<U: User>(u: &U, list: &[(String, String)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.clone(), u.text(v))).filter(|(_, v)| !v.contains(['\r', '\n'])).collect()
}

/// A body rendered: text as it is, JSON with its content type.
fn body<U: User>(u: &U, b: Option<&Value>, headers: &mut Vec<(String, String)>) -> Vec<u8> {
    match b.map(|b| u.render(b)) {
        None => Vec::new(),
        Some(Value::String(s)) => s.into_bytes(),
        Some(v) => {
            if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
                headers.push(("Content-Type".into(), "application/json".into()));
            }
            v.to_string().into_bytes()
        }
    }
}

/// A response that is no event stream, as a failure: its status and what its body says.
async fn refused(r: &mut Response) -> Failure {
    let text = r.text(512, Duration::from_secs(2)).await;
    let said = crate::redact::printable(text.trim()).into_owned();
    Failure::new(
        "status",
        format!(
            "status {}{}, not an event stream{}",
            r.head.status,
            match r.head.content_type.is_empty() {
                true => String::new(),
                false => format!(" ({})", crate::redact::printable(&r.head.content_type)),
            },
            if said.is_empty() { String::new() } else { format!(": {said}") }
        ),
    )
}

/// Where a stream step stands.
#[derive(Default)]
struct Read1 {
    events: u64,
    first: Option<Instant>,
    last_at: Option<Instant>,
    last_data: Option<String>,
    done: bool,
}

async fn stream<U: User<Session = SseSession>>(u: &mut U, step: &Step, s: &SseStream) -> Result<(), Stop> {
    let timeout = u.timeout(s.timeout);
    let began = Instant::now();
    let wanted = s.events.is_some() || s.until.is_some();
    // A stream read until the server ends it ends with the run's phases too (`-d` shortens it),
    // unless the user came at their very end; it has read what it was asked to then.
    let end = u.phases_end();
    let deadline = match began < end && !wanted && !s.keep {
        true => (began + timeout).min(end),
        false => began + timeout,
    };
    let sess = u.session(step)?;
    let url = sess.url(&u.text(&s.url)).map_err(|e| u.fail_with(step, "scenario", &e))?;
    let mut head = headers(u, &s.headers);
    let body = body(u, s.body.as_ref(), &mut head);
    let keep_data = s.capture.is_some() || !s.matches.is_empty();
    let mut st = Read1::default();
    // The previous stream's parser, when this one is asked again.
    let mut resumed: Option<wire::Parser> = None;
    let r = loop {
        let mut h = head.clone();
        if let Some(id) = resumed.as_ref().and_then(|p| p.last_id.clone()).filter(|id| !id.is_empty()) {
            h.push(("Last-Event-ID".into(), id));
        }
        let ask =
            wire::Ask { method: s.method.clone(), url: url.clone(), headers: h, body: body.clone(), http2: s.http2 };
        let left = deadline.saturating_duration_since(Instant::now());
        let mut r = match sess.send(&ask, left).await {
            Ok(r) => r,
            Err(f) if f.class == "timeout" && !wanted && st.first.is_some() => break None,
            Err(f) => return Err(u.fail(step, &f)),
        };
        if r.head.status == 204 && resumed.is_some() {
            // EventSource stops asking on a 204.
            if wanted && !st.done {
                let f = Failure::new("closed", format!("the server ended the stream (204) after {} events", st.events));
                return Err(u.fail(step, &f));
            }
            break None;
        }
        if !r.is_stream() {
            let f = refused(&mut r).await;
            return Err(u.fail(step, &f));
        }
        if let Some(p) = resumed.take() {
            r.parser = p;
            // The gap across a reconnection is the server's absence, not a gap of its stream.
            st.last_at = None;
        }
        sess.traffic.borrow_mut().count("sse.streams", 1);
        let how = read_stream(sess, &mut r, s, &mut st, keep_data, (began, deadline)).await;
        match how {
            Ok(Read::More) => break Some(r),
            Ok(_) => {
                if st.done || !wanted {
                    sess.done_with(r);
                    break None;
                }
                // Ended before the step had its events: asked again as EventSource does.
                let Some(wait) = s.reconnect else {
                    let f = Failure::new("closed", format!("the server ended the stream after {} events", st.events));
                    return Err(u.fail(step, &f));
                };
                let wait = r.parser.retry_ms.map_or(wait, Duration::from_millis);
                if Instant::now() + wait >= deadline {
                    let f = Failure::new("closed", format!("the server ended the stream after {} events", st.events));
                    return Err(u.fail(step, &f));
                }
                resumed = Some(r.parser.resume());
                sess.traffic.borrow_mut().count("sse.reconnects", 1);
                tokio::time::sleep(wait).await;
            }
            Err(f) if f.class == "timeout" && (!wanted || st.done) => break None,
            Err(f) => return Err(u.fail(step, &f)),
        }
    };
    if let Some(r) = r {
        if s.keep {
            let again = s.reconnect.map(|wait| {
                let ask = wire::Ask {
                    method: s.method.clone(),
                    url: url.clone(),
                    headers: head.clone(),
                    body,
                    http2: s.http2,
                };
                std::rc::Rc::new(Again { ask, wait })
            });
            sess.keep(r, again);
        }
    }
    if let Some(data) = st.last_data.filter(|_| keep_data) {
        let v = serde_json::from_str::<Value>(&data).unwrap_or(Value::String(data));
        if let Some((k, want)) = s.matches.iter().find(|(k, want)| path(&v, k) != Some(want)) {
            let got = path(&v, k).map_or("nothing".into(), |g| crate::redact::printable(&g.to_string()).into_owned());
            return Err(u.fail_with(step, "match", &format!("the last event's {k} is {got}, expected {want}")));
        }
        if let Some(cap) = &s.capture {
            u.capture(cap, v);
        }
    }
    u.ok(step, began.elapsed());
    Ok(())
}

/// A dotted path into a JSON value (`a.b.0`).
fn path<'v>(v: &'v Value, p: &str) -> Option<&'v Value> {
    p.split('.').try_fold(v, |v, k| match v {
        Value::Array(a) => a.get(k.parse::<usize>().ok()?),
        _ => v.get(k),
    })
}

/// Reads `r` until the step has what it waits for (`Read::More`: the stream is still open), the
/// body ends or the server closes, or `deadline` (a `timeout` failure).
async fn read_stream(
    sess: &SseSession,
    r: &mut Response,
    s: &SseStream,
    st: &mut Read1,
    keep_data: bool,
    (began, deadline): (Instant, Instant),
) -> Result<Read, Failure> {
    let first_before = st.first.is_some();
    let reading = async {
        loop {
            let (mut bytes, mut n) = (0u64, 0u64);
            let comments = r.parser.comments;
            let mut gaps = Vec::new();
            let read = r
                .read(
                    &mut |e| {
                        n += 1;
                        if st.done {
                            // Read with the events that ended the step: a kept stream's are
                            // `listen`'s.
                            if s.keep {
                                sess.heard.heard(e.name);
                            }
                            return;
                        }
                        let now = Instant::now();
                        match (st.last_at, st.first) {
                            (Some(l), _) => gaps.push(now.saturating_duration_since(l)),
                            (None, None) => st.first = Some(now),
                            (None, Some(_)) => {}
                        }
                        st.last_at = Some(now);
                        st.events += 1;
                        if keep_data {
                            st.last_data = Some(e.data.to_string());
                        }
                        let until = s.until.as_ref().is_some_and(|w| {
                            w.event.as_ref().is_none_or(|n| n == e.name)
                                && w.data.as_ref().is_none_or(|d| e.data.contains(d.as_str()))
                        });
                        st.done = until || s.events.is_some_and(|want| st.events >= want);
                    },
                    &mut bytes,
                )
                .await;
            let mut t = tally(&sess.traffic, bytes, n);
            if r.parser.comments > comments {
                t.count("sse.comments", r.parser.comments - comments);
            }
            for g in gaps {
                t.measure("sse.gap", crate::proto::http::micros(g));
            }
            drop(t);
            if n > 0 {
                sess.last_data.set(Some(Instant::now()));
            }
            match read? {
                Read::More if st.done => return Ok(Read::More),
                Read::More => {}
                end => return Ok(end),
            }
        }
    };
    let out = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), reading).await;
    if let (false, Some(first)) = (first_before, st.first) {
        let us = crate::proto::http::micros(first.saturating_duration_since(began));
        sess.traffic.borrow_mut().measure("sse.first_event", us);
    }
    match out {
        Ok(r) => r,
        Err(_) => {
            let want = s.events.map_or("its end event".to_string(), |n| format!("{n} events"));
            Err(Failure::new("timeout", format!("{} of {want} within the step's timeout", st.events)))
        }
    }
}

/// Counts `listen`'s events (by name; `*` any) of the streams the user keeps.
async fn listen<U: User<Session = SseSession>>(u: &mut U, step: &Step, l: &Listen) -> Result<(), Stop> {
    let timeout = u.timeout(l.timeout);
    let began = Instant::now();
    let sess = u.session(step)?;
    let heard = std::rc::Rc::clone(&sess.heard);
    let want = l.count.max(1);
    let wait = async {
        loop {
            let notified = heard.notify.notified();
            {
                let mut m = heard.by_name.borrow_mut();
                let mut left = want;
                let names: Vec<String> = m.iter().map(|(k, _)| k.clone()).collect();
                let fits = |k: &str| l.channel == "*" || l.channel == k;
                let have: u64 = m.iter().filter(|(k, _)| fits(k)).map(|(_, (seen, taken))| seen - taken).sum();
                if have >= want {
                    for k in names.iter().filter(|k| fits(k)) {
                        let e = m.get_mut(k.as_str()).expect("listed");
                        let take = (e.0 - e.1).min(left);
                        e.1 += take;
                        left -= take;
                    }
                    return Ok(());
                }
                if let Some(why) = heard.ended.borrow().clone() {
                    return Err(Failure::new("closed", format!("{why} after {have} of {want} {} events", l.channel)));
                }
            }
            notified.await;
        }
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Ok(())) => {
            u.ok(step, began.elapsed());
            Ok(())
        }
        Ok(Err(f)) => Err(u.fail(step, &f)),
        Err(_) => {
            let f = Failure::new("timeout", format!("fewer than {want} {} events within {timeout:?}", l.channel));
            Err(u.fail(step, &f))
        }
    }
}

/// A streamed completion: its measures, its tokens counted.
async fn chat<U: User<Session = SseSession>>(u: &mut U, step: &Step, c: &Chat) -> Result<(), Stop> {
    let timeout = u.timeout(c.timeout);
    let deadline = Instant::now() + timeout;
    let is_chat = c.prompt.is_none();
    let path =
        c.url.clone().unwrap_or_else(|| if is_chat { "/v1/chat/completions" } else { "/v1/completions" }.to_string());
    let mut head = headers(u, &c.headers);
    let sess = u.session(step)?;
    let url = sess.url(&u.text(&path)).map_err(|e| u.fail_with(step, "scenario", &e))?;
    let model = match &c.model {
        Some(m) => u.text(m),
        None => Box::pin(model(u, step, &head, c.http2, deadline)).await?,
    };
    let input = c.input_tokens.as_ref().map(|l| llm::synthetic_prompt(llm::draw(l)));
    let (messages, prompt) = match (&c.messages, &c.prompt, input) {
        (Some(m), _, _) => (Some(u.render(m)), None),
        (None, Some(p), _) => (None, Some(u.render(p))),
        (None, None, Some(words)) => (Some(serde_json::json!([{ "role": "user", "content": words }])), None),
        (None, None, None) => (Some(serde_json::json!([{ "role": "user", "content": "Say hello." }])), None),
    };
    let max_tokens = c.max_tokens.as_ref().map(llm::draw);
    // Extra keys rendered; a count that a template made text (a payload's) is sent as a number.
    let extra: Vec<(String, Value)> = c
        .extra
        .iter()
        .map(|(k, v)| match u.render(v) {
            Value::String(t) if k == "max_tokens" => {
                (k.clone(), t.parse::<u64>().map_or(Value::String(t), Value::from))
            }
            other => (k.clone(), other),
        })
        .collect();
    let sent_body = llm::body(&model, messages, prompt, max_tokens, &extra);
    let body = body(u, Some(&sent_body), &mut head);
    let ask = wire::Ask { method: "POST".into(), url, headers: head, body, http2: c.http2 };
    let mut done = Completion { text: c.capture.as_ref().map(|_| String::new()), ..Completion::default() };
    let sent = Instant::now();
    done.sent = Some(sent);
    let sess = u.session(step)?;
    let left = deadline.saturating_duration_since(sent);
    let mut r = sess.send(&ask, left).await.map_err(|f| u.fail(step, &f))?;
    if !r.is_stream() {
        let f = refused(&mut r).await;
        return Err(u.fail(step, &f));
    }
    sess.traffic.borrow_mut().count("sse.streams", 1);
    let mut counted = 0;
    let reading = async {
        loop {
            let (mut bytes, mut n) = (0u64, 0u64);
            let read = r
                .read(
                    &mut |e| {
                        n += 1;
                        if let Some(g) = done.chunk(e.data, Instant::now()) {
                            sess.traffic.borrow_mut().measure("llm.itl", crate::proto::http::micros(g));
                        }
                    },
                    &mut bytes,
                )
                .await;
            // Tokens count as they come, so that each second has its own.
            let mut t = tally(&sess.traffic, bytes, n);
            if done.tokens > counted {
                t.count("llm.output_tokens", done.tokens - counted);
                counted = done.tokens;
            }
            drop(t);
            match read? {
                Read::More if done.done || done.error.is_some() => return Ok::<bool, Failure>(true),
                Read::More => {}
                Read::Ended => return Ok(true),
                Read::Closed => return Ok(false),
            }
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let ended = match tokio::time::timeout(left, reading).await {
        Ok(Ok(clean)) => clean,
        Ok(Err(f)) => return Err(u.fail(step, &f)),
        Err(_) => {
            let f = Failure::new("timeout", format!("{} tokens and no end within {timeout:?}", done.tokens));
            return Err(u.fail(step, &f));
        }
    };
    let e2el = sent.elapsed();
    if let Some(e) = &done.error {
        let f = Failure::new("llm", crate::redact::printable(e));
        return Err(u.fail(step, &f));
    }
    if !ended && !done.done {
        let f =
            Failure::new("closed", format!("the server closed the stream after {} tokens, before [DONE]", done.tokens));
        return Err(u.fail(step, &f));
    }
    // What follows [DONE] (the chunked body's end) is read, so that the connection carries the
    // user's next request (an HTTP/2 stream's connection carries it anyway).
    if ended && !r.ended() && !c.http2 {
        let (mut bytes, mut n) = (0, 0);
        r.finish(&mut |_| n += 1, &mut bytes, Duration::from_secs(1)).await;
        tally(&sess.traffic, bytes, n);
    }
    sess.done_with(r);
    let mut t = sess.traffic.borrow_mut();
    t.count("llm.requests", 1);
    if let Some(us) = done.usage {
        t.count("llm.usage_responses", 1);
        t.count("llm.usage_prompt_tokens", us.prompt_tokens);
        t.count("llm.usage_completion_tokens", us.completion_tokens);
        // vLLM's total token throughput: the prompt's tokens and the answer's, as the server
        // counted them (without its usage no prompt is counted, and no total).
        t.count("llm.total_tokens", us.prompt_tokens + us.completion_tokens);
    }
    if let Some(ttft) = done.ttft() {
        t.measure("llm.ttft", crate::proto::http::micros(ttft));
    }
    if let Some(tpot) = done.tpot(e2el) {
        t.measure("llm.tpot", crate::proto::http::micros(tpot));
    }
    t.measure("llm.e2el", crate::proto::http::micros(e2el));
    if !c.goodput.is_empty() && done.good(e2el, &c.goodput) {
        t.count("llm.good_requests", 1);
    }
    drop(t);
    if let (Some(cap), Some(text)) = (&c.capture, done.text.take()) {
        u.capture(cap, Value::String(text));
    }
    u.ok(step, e2el);
    Ok(())
}

/// The model the server serves, asked once per worker (`GET /v1/models`); `default` when it
/// does not say.
async fn model<U: User<Session = SseSession>>(
    u: &U,
    step: &Step,
    head: &[(String, String)],
    http2: bool,
    deadline: Instant,
) -> Result<String, Stop> {
    let sess = u.session(step)?;
    let url = sess.url("/v1/models").map_err(|e| u.fail_with(step, "scenario", &e))?;
    if let Some(m) = llm::known_model(url.as_str()) {
        return Ok(m);
    }
    let mut h: Vec<(String, String)> = head.to_vec();
    h.push(("Accept".into(), "application/json".into()));
    let ask = wire::Ask { method: "GET".into(), url: url.clone(), headers: h, body: Vec::new(), http2 };
    let left = deadline.saturating_duration_since(Instant::now());
    let id = match sess.send(&ask, left).await {
        Ok(mut r) if r.head.status == 200 => llm::first_model(&r.text(4 << 20, left).await),
        _ => None,
    };
    // Only a server's answer is kept: one that failed is asked again by the next chat.
    match id {
        Some(id) => {
            llm::remember_model(url.as_str(), &id);
            Ok(id)
        }
        None => Ok("default".into()),
    }
}

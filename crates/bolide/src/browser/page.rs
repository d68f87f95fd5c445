//! One browser user's page: a browser context of its own (no cookies or storage shared with the
//! other users) holding one page, driven over its CDP session. The actions are Playwright's; each
//! ends when the page is settled as the action says. What the page does meanwhile is read from
//! CDP's events: the DDP messages of its WebSocket frames (method round trips, subscriptions'
//! readiness, timed by the browser's own clock), console errors, failed requests, a crash.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cdp::{Cdp, Event};

const VITALS: &str = include_str!("vitals.js");
const WAIT: &str = include_str!("wait.js");

/// How long opening a page (a context, a target, its session) may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// Closing a user's context: a little, never holding the run's end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A page's timings of one navigation, milliseconds (CLS: the score), from its Performance APIs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vitals {
    pub ttfb_ms: Option<f64>,
    pub fcp_ms: Option<f64>,
    pub lcp_ms: Option<f64>,
    pub cls: Option<f64>,
    pub inp_ms: Option<f64>,
}

/// Why an action failed: the class its step's error is counted under, and what happened.
#[derive(Debug, Clone)]
pub struct Failed {
    pub class: &'static str,
    pub detail: String,
}

fn failed(class: &'static str, detail: impl Into<String>) -> Failed {
    Failed { class, detail: detail.into() }
}

/// What the page did that the user's recorder keeps, taken after each step.
#[derive(Debug, Default)]
pub struct Happened {
    /// In-page DDP method round trips: method, microseconds from `method` to both `result` and
    /// `updated`.
    pub methods: Vec<(String, u64)>,
    /// Subscriptions made ready: name, microseconds from `sub` to `ready`.
    pub subs: Vec<(String, u64)>,
    /// Console errors and uncaught exceptions, as the page said them.
    pub console_errors: Noted,
    /// Requests that failed (no answer, or a status of 400 or more).
    pub failed_requests: Noted,
    /// Dialogs the page opened (alert, confirm, prompt, beforeunload), each answered with OK as
    /// it opened (`cdp`): their type and message.
    pub dialogs: Noted,
}

/// How many times something happened, and the first few as they were said: a page logging
/// 20,000 errors a second costs a count, not their text.
#[derive(Debug, Default, PartialEq)]
pub struct Noted {
    pub count: u64,
    pub first: Vec<String>,
}

impl Noted {
    /// The first ones kept.
    pub const KEPT: usize = 3;

    /// One more; its text is made only when it is kept.
    fn note(&mut self, text: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.len() < Noted::KEPT {
            self.first.push(text());
        }
    }
}

/// A method the page sent: its name, when it was sent, its `result` and its `updated` (the
/// browser's clock, seconds).
type InFlight = (String, f64, Option<f64>, Option<f64>);

#[derive(Debug, Default)]
struct State {
    /// Methods sent and not yet both answered, by (socket, id).
    methods: HashMap<(String, String), InFlight>,
    /// Subscriptions sent and not yet ready, by (socket, id): name, sent (s).
    subs: HashMap<(String, String), (String, f64)>,
    happened: Happened,
    /// URLs of requests under way, by id (for a failure's message).
    requests: HashMap<String, String>,
    /// The page's `load` since the last navigation began.
    loaded: bool,
    /// The main document's status of the last navigation.
    document_status: Option<u16>,
    crashed: Option<String>,
}

/// A browser user's page.
pub struct Page {
    cdp: Cdp,
    context: String,
    session: String,
    state: State,
    /// The step whose navigation the page now shows (its timings are filed under it).
    pub shown_by: Option<String>,
}

impl Page {
    /// A new browser context with one blank page, its events on.
    pub async fn open(port: u16, path: &str) -> Result<Page, Failed> {
        let cdp = Cdp::connect(port, path, keep, OPEN_TIMEOUT).await.map_err(|e| failed("browser", e))?;
        let t = OPEN_TIMEOUT;
        let call = |m: &'static str, p: Value| {
            let cdp = &cdp;
            async move { cdp.call(m, p, None, t).await.map_err(|e| failed("browser", e)) }
        };
        let ctx = call("Target.createBrowserContext", json!({ "disposeOnDetach": true })).await?;
        let context = ctx["browserContextId"].as_str().unwrap_or_default().to_string();
        let target = call("Target.createTarget", json!({ "url": "about:blank", "browserContextId": context })).await?;
        let target_id = target["targetId"].as_str().unwrap_or_default().to_string();
        let attached = call("Target.attachToTarget", json!({ "targetId": target_id, "flatten": true })).await?;
        let session = attached["sessionId"].as_str().unwrap_or_default().to_string();
        let page = Page { cdp, context, session, state: State::default(), shown_by: None };
        for (m, p) in [
            ("Page.enable", json!({})),
            ("Network.enable", json!({})),
            ("Runtime.enable", json!({})),
            ("Inspector.enable", json!({})),
            ("Page.addScriptToEvaluateOnNewDocument", json!({ "source": VITALS })),
            // Every page acts as the focused one, as each user's own window would be.
            ("Emulation.setFocusEmulationEnabled", json!({ "enabled": true })),
        ] {
            page.send(m, p, t).await?;
        }
        Ok(page)
    }

    async fn send(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, Failed> {
        self.cdp.call(method, params, Some(&self.session), timeout).await.map_err(|e| match self.cdp.closed() {
            // The browser is gone (its connection closed): nothing more comes from it.
            Some(why) => failed("browser", why),
            None if e.what.ends_with(super::cdp::CRASHED) => failed("crash", super::cdp::CRASHED),
            None if e.what.contains(super::cdp::NO_ANSWER) => failed("timeout", e),
            // The page refused the command (its context gone with a navigation, say).
            None => failed("page", e),
        })
    }

    /// Reads the events that arrived into the page's state.
    fn pump(&mut self) {
        for e in self.cdp.take_events() {
            if e.session.as_deref().is_some_and(|s| s != self.session) {
                continue;
            }
            self.state.event(e);
        }
        // What came past the queue's bound still counts.
        for (method, n) in self.cdp.take_dropped(&self.session) {
            let happened = &mut self.state.happened;
            match method.as_str() {
                "Runtime.consoleAPICalled" | "Runtime.exceptionThrown" => happened.console_errors.count += n,
                "Network.loadingFailed" => happened.failed_requests.count += n,
                "Page.javascriptDialogOpening" => happened.dialogs.count += n,
                _ => {}
            }
        }
    }

    /// What the page did since the last call.
    pub fn take(&mut self) -> Happened {
        self.pump();
        std::mem::take(&mut self.state.happened)
    }

    /// Fails when the page or the browser is gone.
    fn alive(&mut self) -> Result<(), Failed> {
        self.pump();
        if let Some(why) = &self.state.crashed {
            return Err(failed("crash", why.clone()));
        }
        if let Some(why) = self.cdp.closed() {
            return Err(failed("browser", why));
        }
        Ok(())
    }

    /// Waits until `done` holds of the page's state, at most until `deadline`.
    async fn until(&mut self, deadline: Instant, done: impl Fn(&State) -> bool) -> Result<bool, Failed> {
        loop {
            self.alive()?;
            if done(&self.state) {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.cdp.arrival(left.min(Duration::from_millis(100))).await;
        }
    }

    /// Evaluates `expression` in the page (awaiting a promise), its value as JSON. A page that
    /// navigated meanwhile (a link, a form, a reload) is given until its `load` and asked again.
    async fn eval(&mut self, expression: &str, timeout: Duration) -> Result<Value, Failed> {
        let deadline = Instant::now() + timeout;
        let params = json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let mut out = self.send("Runtime.evaluate", params.clone(), timeout + Duration::from_secs(5)).await;
        self.alive()?;
        if out.as_ref().is_err_and(|f| f.class == "page" && f.detail.contains("context")) {
            self.until(deadline, |s| s.loaded).await?;
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
            out = self.send("Runtime.evaluate", params, left + Duration::from_secs(5)).await;
            self.alive()?;
        }
        let out = out?;
        if let Some(ex) = out.get("exceptionDetails") {
            let text = ex["exception"]["description"].as_str().or(ex["text"].as_str()).unwrap_or("an exception");
            return Err(failed("page", format!("the page threw {}", first_line(text))));
        }
        Ok(out["result"]["value"].clone())
    }

    /// `goto`: navigates to `url` and waits for the page's `load` (its timings of the page left
    /// are read first: [`Page::vitals`]).
    pub async fn goto(&mut self, url: &str, timeout: Duration) -> Result<(), Failed> {
        let deadline = Instant::now() + timeout;
        self.pump();
        self.state.loaded = false;
        self.state.document_status = None;
        // What the page left behind answers nothing any more.
        self.state.methods.clear();
        self.state.subs.clear();
        let out = self.send("Page.navigate", json!({ "url": url }), timeout).await?;
        if let Some(err) = out.get("errorText").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            return Err(failed("connect", format!("{} could not be loaded: {err}", crate::redact::text(url))));
        }
        if !self.until(deadline, |s| s.loaded).await? {
            return Err(failed("timeout", format!("the page did not load within {timeout:?}")));
        }
        if let Some(status) = self.state.document_status.filter(|s| *s >= 400) {
            return Err(failed("status", format!("the page answered {status}")));
        }
        Ok(())
    }

    /// `waitForSelector` and `expect`: the page comes to show what `want` says within `timeout`.
    pub async fn wait_for(&mut self, want: &Want<'_>, timeout: Duration, expect: bool) -> Result<(), Failed> {
        let ms = timeout.as_millis() as u64;
        let expression = format!(
            "({WAIT})({}, {}, {}, {}, {ms})",
            Value::String(want.selector.to_string()),
            want.count.map_or(Value::Null, Value::from),
            want.text.map_or(Value::Null, |t| Value::String(t.to_string())),
            Value::String(want.state.to_string()),
        );
        let seen = self.eval(&expression, timeout).await?;
        let seen: Value = seen.as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or(Value::Null);
        if seen["ok"].as_bool() == Some(true) {
            return Ok(());
        }
        let sel = crate::redact::printable(want.selector);
        if let Some(bad) = seen["bad"].as_str() {
            return Err(failed(
                "scenario",
                format!("selector {sel:?} is not one the page can read: {}", first_line(bad)),
            ));
        }
        let n = seen["n"].as_u64().unwrap_or(0);
        let what = match (want.count, want.text, want.state) {
            (Some(c), _, _) => format!("{c} matching"),
            (None, Some(t), _) => format!("the text {:?}", crate::redact::printable(t)),
            (None, None, s) => s.to_string(),
        };
        let shown = match seen["text"].as_str() {
            Some(t) => format!("; it showed {:?}", crate::redact::printable(t)),
            None => String::new(),
        };
        let class = if expect { "expect" } else { "timeout" };
        Err(failed(class, format!("selector {sel:?} was not {what} within {timeout:?} ({n} matched{shown})")))
    }

    /// The middle of the first visible element matching `selector`, scrolled into view, once it
    /// is there (within `timeout`).
    async fn locate(&mut self, selector: &str, timeout: Duration) -> Result<(f64, f64), Failed> {
        let began = Instant::now();
        self.wait_for(&Want { selector, count: None, text: None, state: "visible" }, timeout, false).await?;
        let left = timeout.saturating_sub(began.elapsed()).max(Duration::from_millis(100));
        let expression = format!(
            "(() => {{ const e = Array.from(document.querySelectorAll({})).find(e => {{ const r = e.getBoundingClientRect(); \
             return r.width > 0 && r.height > 0; }}); if (!e) return null; e.scrollIntoView({{ block: 'center', inline: 'center' }}); \
             const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            Value::String(selector.to_string())
        );
        let at = self.eval(&expression, left).await?;
        match (at[0].as_f64(), at[1].as_f64()) {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(failed(
                "timeout",
                format!("selector {:?} left the page before it could be clicked", crate::redact::printable(selector)),
            )),
        }
    }

    /// `click`: the element's middle pressed and released, then the page settled.
    pub async fn click(&mut self, selector: &str, timeout: Duration) -> Result<(), Failed> {
        let deadline = Instant::now() + timeout;
        let (x, y) = self.locate(selector, timeout).await?;
        for (kind, buttons) in [("mouseMoved", 0), ("mousePressed", 1), ("mouseReleased", 0)] {
            let mut p = json!({ "type": kind, "x": x, "y": y, "button": "left", "buttons": buttons });
            if kind != "mouseMoved" {
                p["clickCount"] = json!(1);
            }
            self.send("Input.dispatchMouseEvent", p, timeout).await?;
        }
        self.settle(deadline).await
    }

    /// `fill`: the field focused, its text replaced by `value` as typing would (input events).
    pub async fn fill(&mut self, selector: &str, value: &str, timeout: Duration) -> Result<(), Failed> {
        let deadline = Instant::now() + timeout;
        self.focus(selector, timeout, true).await?;
        if !value.is_empty() {
            self.send("Input.insertText", json!({ "text": value }), timeout).await?;
        }
        self.settle(deadline).await
    }

    /// `press`: a key down and up in the focused element, then the page settled.
    pub async fn press(&mut self, selector: &str, name: &str, timeout: Duration) -> Result<(), Failed> {
        let deadline = Instant::now() + timeout;
        let Some(k) = key(name) else {
            return Err(failed("scenario", format!("press: key {name:?} is not one bolide knows")));
        };
        self.focus(selector, timeout, false).await?;
        let mut down = json!({ "type": if k.text.is_empty() { "rawKeyDown" } else { "keyDown" }, "key": k.key,
            "code": k.code, "windowsVirtualKeyCode": k.key_code });
        if !k.text.is_empty() {
            down["text"] = json!(k.text);
        }
        self.send("Input.dispatchKeyEvent", down, timeout).await?;
        let up = json!({ "type": "keyUp", "key": k.key, "code": k.code, "windowsVirtualKeyCode": k.key_code });
        self.send("Input.dispatchKeyEvent", up, timeout).await?;
        self.settle(deadline).await
    }

    async fn focus(&mut self, selector: &str, timeout: Duration, clear: bool) -> Result<(), Failed> {
        let began = Instant::now();
        self.wait_for(&Want { selector, count: None, text: None, state: "visible" }, timeout, false).await?;
        let left = timeout.saturating_sub(began.elapsed()).max(Duration::from_millis(100));
        let expression = format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); if ({clear}) {{ \
             if ('value' in e) {{ e.value = ''; e.dispatchEvent(new Event('input', {{ bubbles: true }})); }} \
             else if (e.isContentEditable) {{ e.textContent = ''; }} }} return true; }})()",
            Value::String(selector.to_string())
        );
        match self.eval(&expression, left).await? {
            Value::Bool(true) => Ok(()),
            _ => Err(failed(
                "timeout",
                format!("selector {:?} left the page before it could be focused", crate::redact::printable(selector)),
            )),
        }
    }

    /// After an action: the page has run what the action set off (a frame drawn), and every DDP
    /// method it sent has its `result` and `updated`; at most until `deadline`.
    async fn settle(&mut self, deadline: Instant) -> Result<(), Failed> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(100));
        self.eval("new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))", left).await?;
        if self.until(deadline, |s| s.methods.is_empty()).await? {
            return Ok(());
        }
        let waiting: Vec<String> = self.state.methods.values().map(|(m, ..)| m.clone()).collect();
        Err(failed(
            "timeout",
            format!(
                "the page's DDP method {} got no result and updated in time",
                crate::redact::printable(&waiting.join(", "))
            ),
        ))
    }

    /// The timings of the navigation the page shows (none before the first).
    pub async fn vitals(&mut self) -> Option<Vitals> {
        self.shown_by.as_ref()?;
        let expression = "JSON.stringify(Object.assign({ ttfb: (performance.getEntriesByType('navigation')[0] || {}).responseStart }, window.__bolideVitalsFlush ? window.__bolideVitalsFlush() : {}))";
        let v = self.eval(expression, Duration::from_secs(5)).await.ok()?;
        let v: Value = serde_json::from_str(v.as_str()?).ok()?;
        let ms = |k: &str| v[k].as_f64().filter(|x| x.is_finite() && *x >= 0.0);
        Some(Vitals { ttfb_ms: ms("ttfb"), fcp_ms: ms("fcp"), lcp_ms: ms("lcp"), cls: ms("cls"), inp_ms: ms("inp") })
    }

    /// Closes the user's context (its page with it), briefly.
    pub async fn close(self) {
        if self.cdp.closed().is_none() {
            let p = json!({ "browserContextId": self.context });
            let _ = self.cdp.call("Target.disposeBrowserContext", p, None, CLOSE_TIMEOUT).await;
        }
    }
}

fn first_line(s: &str) -> String {
    // Masked and escaped before the cut (a credential across it would show its beginning), then
    // kept to 300 characters.
    let line = crate::redact::printable(s.lines().next().unwrap_or_default()).into_owned();
    match line.char_indices().nth(300) {
        Some((cut, _)) => line[..cut].to_string(),
        None => line,
    }
}

/// An uncaught exception's words, first line.
fn exception_text(params: &Value) -> String {
    let d = &params["exceptionDetails"];
    let text = d["exception"]["description"].as_str().or(d["text"].as_str()).unwrap_or("an exception");
    format!("uncaught {}", first_line(text))
}

/// A console error's words: its arguments' values (or descriptions), first line.
fn console_text(params: &Value) -> String {
    let args: Vec<String> = params["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| match x["value"].as_str() {
                    Some(s) => s.to_string(),
                    None => x["description"].as_str().map_or_else(|| x["value"].to_string(), str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    first_line(&args.join(" "))
}

/// What `waitForSelector` and `expect` look for, rendered.
pub struct Want<'a> {
    pub selector: &'a str,
    pub count: Option<u64>,
    pub text: Option<&'a str>,
    /// attached, visible or hidden.
    pub state: &'a str,
}

impl State {
    fn event(&mut self, e: Event) {
        let p = &e.params;
        match e.method.as_str() {
            "Network.webSocketFrameSent" | "Network.webSocketFrameReceived" => {
                let sent = e.method.ends_with("Sent");
                let socket = p["requestId"].as_str().unwrap_or_default().to_string();
                let at = p["timestamp"].as_f64().unwrap_or(0.0);
                if p["response"]["opcode"].as_u64() != Some(1) {
                    return;
                }
                let msgs = match p.get("ddp") {
                    Some(Value::Array(kept)) => kept.clone(),
                    _ => ddp_messages(p["response"]["payloadData"].as_str().unwrap_or_default()),
                };
                for msg in msgs {
                    self.ddp(&socket, sent, at, &msg);
                }
            }
            "Page.loadEventFired" => self.loaded = true,
            // The main frame navigated (a link, a form, a reload, or goto): its load is awaited.
            "Page.frameNavigated" if p["frame"].get("parentId").is_none() => self.loaded = false,
            "Network.webSocketClosed" => {
                // Methods a closed socket never answered are sent again on the next (Meteor's
                // client does), as new messages: the old ones are dropped.
                let socket = p["requestId"].as_str().unwrap_or_default();
                self.methods.retain(|(s, _), _| s != socket);
                self.subs.retain(|(s, _), _| s != socket);
            }
            // Requests in flight, for the URL of one that fails: at most 10,000 (a page that
            // never lets its requests finish names fewer).
            "Network.requestWillBeSent" if self.requests.len() < 10_000 => {
                let id = p["requestId"].as_str().unwrap_or_default().to_string();
                self.requests.insert(id, p["request"]["url"].as_str().unwrap_or_default().to_string());
            }
            "Network.responseReceived" => {
                let status = p["response"]["status"].as_u64().unwrap_or(0) as u16;
                let url = p["response"]["url"].as_str().unwrap_or_default();
                if p["type"].as_str() == Some("Document") && self.document_status.is_none() {
                    self.document_status = Some(status);
                }
                // The browser asks for the site's icon by itself: that is not the app's request.
                if status >= 400 && !url.ends_with("/favicon.ico") {
                    let url = crate::redact::text(url);
                    self.happened.failed_requests.note(|| format!("{url} answered {status}"));
                }
            }
            "Network.loadingFinished" => {
                self.requests.remove(p["requestId"].as_str().unwrap_or_default());
            }
            "Network.loadingFailed" => {
                let url = self.requests.remove(p["requestId"].as_str().unwrap_or_default()).unwrap_or_default();
                if p["canceled"].as_bool() != Some(true) && !url.ends_with("/favicon.ico") {
                    let why = p["errorText"].as_str().unwrap_or("failed");
                    let url = crate::redact::text(&url);
                    self.happened.failed_requests.note(|| format!("{url}: {}", crate::redact::printable(why)));
                }
            }
            // Made small as they came ([`keep`]): their first line.
            "Runtime.consoleAPICalled" if p["type"].as_str() == Some("error") => {
                let text = p["text"].as_str().map_or_else(|| console_text(p), str::to_string);
                self.happened.console_errors.note(|| text);
            }
            "Runtime.exceptionThrown" => {
                let text = p["text"].as_str().map_or_else(|| exception_text(p), str::to_string);
                self.happened.console_errors.note(|| text);
            }
            "Page.javascriptDialogOpening" => {
                let kind = p["type"].as_str().unwrap_or("dialog");
                let message = first_line(p["message"].as_str().unwrap_or_default());
                self.happened.dialogs.note(|| format!("{kind}: {message}"));
            }
            "Inspector.targetCrashed" => self.crashed = Some("the page crashed".into()),
            "Inspector.detached" => {
                self.crashed
                    .get_or_insert_with(|| format!("the page was closed ({})", p["reason"].as_str().unwrap_or("")));
            }
            _ => {}
        }
    }

    /// One DDP message of the page's WebSocket, at the browser's `at` (seconds).
    fn ddp(&mut self, socket: &str, sent: bool, at: f64, msg: &Value) {
        let id = || (socket.to_string(), msg["id"].as_str().unwrap_or_default().to_string());
        match (sent, msg["msg"].as_str().unwrap_or_default()) {
            (true, "method") => {
                let name = crate::redact::printable(msg["method"].as_str().unwrap_or_default()).into_owned();
                self.methods.insert(id(), (name, at, None, None));
            }
            (true, "sub") => {
                let name = crate::redact::printable(msg["name"].as_str().unwrap_or_default()).into_owned();
                self.subs.insert(id(), (name, at));
            }
            (false, "result") => {
                if let Some(m) = self.methods.get_mut(&id()) {
                    m.2 = Some(at);
                }
                self.finish(&id());
            }
            (false, "updated") => {
                for m in msg["methods"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    let key = (socket.to_string(), m.to_string());
                    if let Some(x) = self.methods.get_mut(&key) {
                        x.3 = Some(at);
                    }
                    self.finish(&key);
                }
            }
            (false, "ready") => {
                for s in msg["subs"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if let Some((name, began)) = self.subs.remove(&(socket.to_string(), s.to_string())) {
                        self.happened.subs.push((name, micros(at - began)));
                    }
                }
            }
            (false, "nosub") => {
                self.subs.remove(&id());
            }
            _ => {}
        }
    }

    /// A method with both its `result` and `updated` is done.
    fn finish(&mut self, key: &(String, String)) {
        if let Some((_, _, Some(r), Some(u))) = self.methods.get(key) {
            let (r, u) = (*r, *u);
            if let Some((name, began, ..)) = self.methods.remove(key) {
                self.happened.methods.push((name, micros(r.max(u) - began)));
            }
        }
    }
}

/// The events a page reads, made small as they arrive: a WebSocket frame keeps only the DDP
/// messages that time a method or a subscription, and only their ids and names (documents a
/// subscription sends are dropped at once); other events the page does not read are dropped.
fn keep(method: &str, params: &mut Value) -> bool {
    match method {
        "Network.webSocketFrameSent" | "Network.webSocketFrameReceived" => {
            let text = params["response"]["payloadData"].as_str().unwrap_or_default();
            let kept: Vec<Value> = ddp_messages(text)
                .into_iter()
                .filter(|m| {
                    matches!(m["msg"].as_str(), Some("method" | "sub" | "result" | "updated" | "ready" | "nosub"))
                })
                .map(|m| {
                    let mut small = serde_json::Map::new();
                    for k in ["msg", "id", "method", "name", "methods", "subs"] {
                        if let Some(v) = m.get(k) {
                            small.insert(k.to_string(), v.clone());
                        }
                    }
                    Value::Object(small)
                })
                .collect();
            if kept.is_empty() {
                return false;
            }
            let opcode = params["response"]["opcode"].clone();
            *params = json!({
                "requestId": params["requestId"].take(),
                "timestamp": params["timestamp"].take(),
                "response": { "opcode": opcode },
                "ddp": kept,
            });
            true
        }
        "Network.requestWillBeSent" => {
            let url = params["request"]["url"].take();
            *params = json!({ "requestId": params["requestId"].take(), "request": { "url": url } });
            true
        }
        "Network.responseReceived" => {
            let (status, url) = (params["response"]["status"].take(), params["response"]["url"].take());
            *params = json!({ "type": params["type"].take(), "response": { "status": status, "url": url } });
            true
        }
        // Their first lines only: a page logging without end queues little while a user thinks.
        "Runtime.consoleAPICalled" if params["type"].as_str() == Some("error") => {
            *params = json!({ "type": "error", "text": console_text(params) });
            true
        }
        "Runtime.exceptionThrown" => {
            *params = json!({ "text": exception_text(params) });
            true
        }
        "Page.javascriptDialogOpening" => {
            let message = first_line(params["message"].as_str().unwrap_or_default());
            *params = json!({ "type": params["type"].take(), "message": message });
            true
        }
        "Page.loadEventFired"
        | "Page.frameNavigated"
        | "Network.webSocketClosed"
        | "Network.loadingFinished"
        | "Network.loadingFailed"
        | "Inspector.targetCrashed"
        | "Inspector.detached" => true,
        _ => false,
    }
}

fn micros(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e6).round() as u64
}

/// The DDP messages of one WebSocket text frame: a raw DDP message, or SockJS's framing (the
/// client's `["..."]`, the server's `a["..."]`).
fn ddp_messages(text: &str) -> Vec<Value> {
    let parsed = |s: &str| serde_json::from_str::<Value>(s).ok();
    let inner = |v: Value| -> Vec<Value> {
        match v {
            Value::Array(items) => items.iter().filter_map(|s| s.as_str().and_then(parsed)).collect(),
            Value::Object(_) => vec![v],
            _ => Vec::new(),
        }
    };
    match text.as_bytes().first() {
        Some(b'a') => parsed(&text[1..]).map(inner).unwrap_or_default(),
        Some(b'{') | Some(b'[') => parsed(text).map(inner).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A key as CDP's key events name it.
pub struct Key {
    pub key: String,
    pub code: String,
    pub key_code: u32,
    /// What it types (empty for keys that type nothing).
    pub text: String,
}

/// The key named `name` (`Enter`, `Tab`, `a`, ...), if bolide knows it.
pub fn key(name: &str) -> Option<Key> {
    let named: &[(&str, &str, u32, &str)] = &[
        ("Enter", "Enter", 13, "\r"),
        ("Tab", "Tab", 9, ""),
        ("Escape", "Escape", 27, ""),
        ("Backspace", "Backspace", 8, ""),
        ("Delete", "Delete", 46, ""),
        ("Space", "Space", 32, " "),
        ("ArrowUp", "ArrowUp", 38, ""),
        ("ArrowDown", "ArrowDown", 40, ""),
        ("ArrowLeft", "ArrowLeft", 37, ""),
        ("ArrowRight", "ArrowRight", 39, ""),
        ("Home", "Home", 36, ""),
        ("End", "End", 35, ""),
        ("PageUp", "PageUp", 33, ""),
        ("PageDown", "PageDown", 34, ""),
    ];
    if let Some((k, code, kc, text)) = named.iter().find(|(k, ..)| *k == name) {
        let key = if *k == "Space" { " " } else { k };
        return Some(Key { key: key.into(), code: (*code).into(), key_code: *kc, text: (*text).into() });
    }
    let mut chars = name.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else { return None };
    if c.is_control() {
        return None;
    }
    let (code, key_code) = match c {
        'a'..='z' | 'A'..='Z' => (format!("Key{}", c.to_ascii_uppercase()), c.to_ascii_uppercase() as u32),
        '0'..='9' => (format!("Digit{c}"), c as u32),
        _ => (String::new(), 0),
    };
    Some(Key { key: c.to_string(), code, key_code, text: c.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_s_ddp_frames_time_its_methods_and_subscriptions() {
        let mut s = State::default();
        let frame = |sent: bool, t: f64, text: &str| Event {
            method: if sent { "Network.webSocketFrameSent" } else { "Network.webSocketFrameReceived" }.into(),
            session: None,
            params: json!({ "requestId": "ws1", "timestamp": t, "response": { "opcode": 1, "payloadData": text } }),
        };
        s.event(frame(true, 10.0, r#"{"msg":"sub","id":"s1","name":"fetchTasks","params":[]}"#));
        s.event(frame(true, 10.5, r#"{"msg":"method","method":"insertTask","params":[],"id":"1"}"#));
        // SockJS framing both ways; `updated` before `result`, as Meteor may send them.
        s.event(frame(false, 10.502, r#"a["{\"msg\":\"updated\",\"methods\":[\"1\"]}"]"#));
        assert!(s.happened.methods.is_empty(), "a method is done only with both");
        s.event(frame(
            false,
            10.503,
            r#"a["{\"msg\":\"result\",\"id\":\"1\"}","{\"msg\":\"ready\",\"subs\":[\"s1\"]}"]"#,
        ));
        assert_eq!(s.happened.methods, [("insertTask".to_string(), 3000)]);
        assert_eq!(s.happened.subs, [("fetchTasks".to_string(), 503_000)]);
        assert!(s.methods.is_empty() && s.subs.is_empty());
        // A binary frame and garbage are not DDP.
        s.event(frame(false, 11.0, "not json"));
        assert_eq!(ddp_messages(r#"["{\"msg\":\"ping\"}"]"#).len(), 1);
        assert!(ddp_messages("o").is_empty());
    }

    #[test]
    fn failed_requests_and_console_errors_are_kept_but_not_the_icon() {
        let mut s = State::default();
        let ev = |m: &str, p: Value| Event { method: m.into(), session: None, params: p };
        s.event(ev(
            "Network.responseReceived",
            json!({ "type": "Other", "response": { "status": 404, "url": "http://h/favicon.ico" } }),
        ));
        s.event(ev(
            "Network.responseReceived",
            json!({ "type": "XHR", "response": { "status": 500, "url": "http://h/api" } }),
        ));
        s.event(ev("Network.requestWillBeSent", json!({ "requestId": "7", "request": { "url": "http://h/x.js" } })));
        s.event(ev("Network.loadingFailed", json!({ "requestId": "7", "errorText": "net::ERR_CONNECTION_REFUSED" })));
        s.event(ev(
            "Runtime.consoleAPICalled",
            json!({ "type": "error", "args": [{ "type": "string", "value": "boom\u{1b}[31m" }] }),
        ));
        s.event(ev(
            "Runtime.consoleAPICalled",
            json!({ "type": "log", "args": [{ "type": "string", "value": "fine" }] }),
        ));
        assert_eq!(
            s.happened.failed_requests.first,
            ["http://h/api answered 500", "http://h/x.js: net::ERR_CONNECTION_REFUSED"]
        );
        assert_eq!(s.happened.console_errors.count, 1);
        assert!(!s.happened.console_errors.first[0].contains('\u{1b}'), "a page's words are escaped");
        // A page that logs errors without end: counted, the first few kept.
        for i in 0..10_000 {
            s.event(ev("Runtime.consoleAPICalled", json!({ "type": "error", "args": [{ "value": format!("e{i}") }] })));
        }
        assert_eq!((s.happened.console_errors.count, s.happened.console_errors.first.len()), (10_001, Noted::KEPT));
    }

    #[test]
    fn a_frame_keeps_only_what_times_a_method_or_a_subscription() {
        let frame = |text: &str| json!({ "requestId": "ws1", "timestamp": 1.5, "response": { "opcode": 1, "payloadData": text } });
        let mut data =
            frame(r#"a["{\"msg\":\"added\",\"collection\":\"tasks\",\"id\":\"x\",\"fields\":{\"big\":\"...\"}}"]"#);
        assert!(!keep("Network.webSocketFrameReceived", &mut data), "documents are dropped at once");
        let mut call = frame(r#"{"msg":"method","method":"insertTask","params":[{"big":"..."}],"id":"7"}"#);
        assert!(keep("Network.webSocketFrameSent", &mut call));
        assert_eq!(call["ddp"], json!([{ "msg": "method", "method": "insertTask", "id": "7" }]));
        assert!(call["response"].get("payloadData").is_none());
        let mut s = State::default();
        s.event(Event { method: "Network.webSocketFrameSent".into(), session: None, params: call });
        assert_eq!(s.methods.len(), 1);
        // The socket closes: what it never answered is dropped (sent again on the next one).
        s.event(Event {
            method: "Network.webSocketClosed".into(),
            session: None,
            params: json!({ "requestId": "ws1" }),
        });
        assert!(s.methods.is_empty());
        assert!(!keep("Network.dataReceived", &mut json!({})));
        assert!(!keep("Runtime.consoleAPICalled", &mut json!({ "type": "log" })));
    }

    #[test]
    fn keys() {
        assert_eq!(key("Enter").unwrap().text, "\r");
        assert_eq!(key("a").unwrap().code, "KeyA");
        assert_eq!(key("Space").unwrap().key, " ");
        assert!(key("Hyper").is_none() && key("").is_none());
    }
}

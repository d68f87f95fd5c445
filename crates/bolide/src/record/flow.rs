//! A recorded DDP session as a scenario's flow: the browser's `connect`, `sub`, `unsub` and
//! `method` messages as steps, the pauses between a server's reply and the next action as
//! thinks, and deterministic correlation: a value the server returned (a method's result, a
//! login's token and user id) is captured by the step that received it and put where it comes
//! back; an id the browser made is a per-user variable. Every substitution is listed for review.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

use super::har::Message;
use crate::scenario::template::escape;

/// How to turn a session into steps.
#[derive(Debug, Clone)]
pub struct Options {
    /// Replace ids and results by variables (false: every value as recorded).
    pub correlate: bool,
    /// Recorded pauses multiplied by this (0 drops them).
    pub think_scale: f64,
    /// The longest think kept.
    pub think_max: Duration,
}

/// A step of the recorded flow.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Connect,
    Subscribe {
        name: String,
        /// The parameters, as JSON text.
        params: String,
    },
    Unsubscribe(String),
    Call {
        method: String,
        /// The parameters, as JSON text (a long session's calls cost their text).
        params: String,
        capture: Option<String>,
        /// Which call of this method it is, from 1 (what its capture is named by).
        nth: usize,
    },
    /// A password login (the user and password become payload columns).
    LoginPassword,
    /// A resume login (the token becomes a payload column).
    LoginResume,
    Think(Duration),
    /// A variable made for the user before its first use (`{{ $randomId }}`): an id the browser
    /// made, kept by every later step that sent it again.
    Set {
        var: String,
        value: String,
    },
    /// Wait for the document `id` of `collection` to be there (or, `gone`, to be removed).
    WaitFor {
        collection: String,
        id: Value,
        gone: bool,
    },
    Disconnect,
    /// The same steps, repeated: a run of them in the session folded into one loop.
    Loop {
        count: usize,
        steps: Vec<Step>,
    },
    /// A plain HTTP request of the page (`get` or `post`), its URL relative to the target.
    Http {
        method: String,
        url: String,
        body: Option<Box<HttpBody>>,
    },
}

/// A recorded request's body as the scenario sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum HttpBody {
    Json(Value),
    Text(String),
}

/// A plain request kept for the flow, at its time.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpAction {
    pub time_s: f64,
    /// When its answer was in.
    pub end_s: f64,
    pub method: String,
    pub url: String,
    pub body: Option<HttpBody>,
}

/// Which of a HAR's plain requests become steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpChoice {
    /// None at all (`--ddp-only`).
    pub ddp_only: bool,
    /// Scripts, styles, images and fonts too (`--keep-static`).
    pub keep_static: bool,
}

/// Names of JSON keys, form fields and query parameters whose values are secrets, read as words
/// (camelCase, snake_case, kebab-case): a word password, passwd, secret, token, digest, otp,
/// authorization or cookie (`newPassword`, `reset_token`, `emailDigest`); a key of credentials
/// (`apiKey`, `api_key`, `accessKey`, `privateKey`, `secretKey`, `sessionKey`); a session itself
/// (`session`, `userSession`); and DDP's `resume` (a login token). So `sessionId`, `taskKey`,
/// `sortKey`, a plain `key` and `author` stay as they were.
pub fn secret_name(key: &str) -> bool {
    let words = words_of(key);
    let last = words.last().map(String::as_str).unwrap_or_default();
    let before_last = words.len().checked_sub(2).and_then(|i| words.get(i)).map(String::as_str).unwrap_or_default();
    let k = key.to_ascii_lowercase();
    k == "resume"
        || k == "apikey"
        || words.iter().any(|w| {
            matches!(
                w.as_str(),
                "password" | "passwd" | "secret" | "token" | "digest" | "otp" | "authorization" | "cookie"
            )
        })
        || (last == "key" && matches!(before_last, "api" | "access" | "private" | "secret" | "session" | "auth"))
        || last == "session"
}

/// The words of a key: split at `_`, `-`, `.` and where a lower-case letter meets an upper-case
/// one, lower-cased.
fn words_of(key: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Meteor's accounts methods whose parameters are secrets by position (a password digest, a
/// reset or verification token), whatever their keys: every parameter of these.
pub const SECRET_METHODS: [&str; 4] = ["changePassword", "resetPassword", "verifyEmail", "_loginWithToken"];

/// A payload column the flow needs, listed once.
fn need_column(rec: &mut Recorded, column: &str) {
    if !rec.payload.iter().any(|c| c == column) {
        rec.payload.push(column.to_string());
    }
}

/// A payload column's name for a secret: letters, digits and `_` of `name` (a key, or
/// `method_N` for a positional parameter).
fn column_name(name: &str) -> String {
    let c: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if c.is_empty() || c.starts_with(|c: char| c.is_ascii_digit()) {
        format!("secret_{c}")
    } else {
        c
    }
}

/// A method's parameters with every secret made a payload column (`{{ newPassword }}`): values of
/// secret keys anywhere, and everything passed by position to [`SECRET_METHODS`] (a digest's
/// object: each of its values); listed in the substitutions, the recorded values never written.
fn hide_secrets(params: Value, method: &str, rec: &mut Recorded) -> Value {
    /// `forced`: inside a parameter that is secret by position, named by that position (the
    /// parameter itself when it is a value; the secret keys of an object in it, their columns
    /// named by the position: `changePassword_1_digest`).
    fn walk(v: Value, key: Option<&str>, forced: Option<&str>, method: &str, rec: &mut Recorded) -> Value {
        let secret = key.is_some_and(secret_name) || (forced.is_some() && key.is_none());
        match v {
            // A variable bolide already put there (the login's token, a captured result) stays.
            Value::String(ref t) if is_variable(t) => v,
            // A flag (remember me) is no secret: only text and numbers are.
            Value::String(_) | Value::Number(_) if secret => {
                let name = match (forced, key) {
                    (Some(p), Some(k)) => format!("{p}_{k}"),
                    (Some(p), None) => p.to_string(),
                    (None, k) => k.unwrap_or("secret").to_string(),
                };
                let column = rec.secret_column(&column_name(&name), &v);
                rec.substitutions.push(format!(
                    "{}: a secret ({name}) -> {{{{ {column} }}}}, a column of the payload file (the recorded value is not written)",
                    if method.starts_with("subscribe ") { method.to_string() } else { format!("call {method}") }
                ));
                Value::String(format!("{{{{ {column} }}}}"))
            }
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, x)| (k.clone(), walk(x, Some(&k), forced, method, rec))).collect())
            }
            Value::Array(a) => Value::Array(a.into_iter().map(|x| walk(x, key, forced, method, rec)).collect()),
            other => other,
        }
    }
    match params {
        Value::Array(a) if SECRET_METHODS.contains(&method) => Value::Array(
            a.into_iter()
                .enumerate()
                .map(|(i, x)| walk(x, None, Some(&format!("{method}_{}", i + 1)), method, rec))
                .collect(),
        ),
        other => walk(other, None, None, method, rec),
    }
}

/// Whether a value is one placeholder of a variable (`{{ loginToken }}`), not recorded text.
fn is_variable(t: &str) -> bool {
    let p = crate::scenario::template::placeholders(t);
    t.starts_with("{{") && t.ends_with("}}") && p.len() == 1 && crate::scenario::template::literal(&p[0]).is_none()
}

fn has_secret(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, x)| secret_name(k) || has_secret(x)),
        Value::Array(a) => a.iter().any(has_secret),
        _ => false,
    }
}

/// The HAR's requests to the DDP connection's server that the flow replays: those in
/// `(from_s, to_s]`, to `origin` (`http://host:port`), static assets and other hosts left out
/// unless `choice` says otherwise; what was left out is said in `notes`.
pub fn pick_requests(
    requests: &[super::har::Request],
    origin: &str,
    from_s: f64,
    to_s: f64,
    choice: HttpChoice,
    notes: &mut Vec<String>,
) -> Vec<HttpAction> {
    let mine: Vec<&super::har::Request> = requests.iter().filter(|r| r.time_s > from_s && r.time_s <= to_s).collect();
    if mine.is_empty() {
        return Vec::new();
    }
    if choice.ddp_only {
        notes.push(format!("{} plain HTTP requests left out (--ddp-only)", mine.len()));
        return Vec::new();
    }
    let (mut assets, mut elsewhere, mut methods, mut secret) = (0, 0, 0, Vec::new());
    let mut out = Vec::new();
    for r in mine {
        let Some(path) = r.url.strip_prefix(origin).filter(|p| p.is_empty() || p.starts_with(['/', '?'])) else {
            elsewhere += 1;
            continue;
        };
        let url = if path.is_empty() { "/".to_string() } else { path.to_string() };
        if r.is_static() && !choice.keep_static {
            assets += 1;
            continue;
        }
        if !matches!(r.method.as_str(), "GET" | "POST") {
            methods += 1;
            continue;
        }
        let query_secret = url::Url::parse(&r.url).is_ok_and(|u| u.query_pairs().any(|(k, _)| secret_name(&k)));
        let body = match &r.body {
            None => None,
            Some((mime, text)) if mime.contains("json") => match serde_json::from_str::<Value>(text) {
                Ok(v) => Some(HttpBody::Json(v)),
                Err(_) => Some(HttpBody::Text(text.clone())),
            },
            Some((_, text)) => Some(HttpBody::Text(text.clone())),
        };
        // Recorded text renders back to itself, `{{` in it too.
        fn escaped(v: Value) -> Value {
            match v {
                Value::String(s) => Value::String(escape(&s)),
                Value::Array(a) => Value::Array(a.into_iter().map(escaped).collect()),
                Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| (k, escaped(x))).collect()),
                other => other,
            }
        }
        let body_secret = match &body {
            Some(HttpBody::Json(v)) => has_secret(v),
            Some(HttpBody::Text(t)) => url::form_urlencoded::parse(t.as_bytes()).any(|(k, _)| secret_name(&k)),
            None => false,
        };
        if query_secret || body_secret {
            secret.push(format!("{} {}", r.method, url.split('?').next().unwrap_or("/")));
            continue;
        }
        let body = match body {
            Some(HttpBody::Json(v)) => Some(HttpBody::Json(escaped(v))),
            Some(HttpBody::Text(t)) => Some(HttpBody::Text(escape(&t))),
            None => None,
        };
        let (time_s, end_s, method) = (r.time_s, r.time_s + r.duration_s, r.method.clone());
        out.push(HttpAction { time_s, end_s, method, url: escape(&url), body });
    }
    if assets > 0 {
        notes.push(format!(
            "{assets} static asset{} (scripts, styles, images, fonts) left out (--keep-static keeps them)",
            if assets == 1 { "" } else { "s" }
        ));
    }
    if elsewhere > 0 {
        notes.push(format!("{elsewhere} requests to other hosts than {origin} left out"));
    }
    if methods > 0 {
        notes.push(format!("{methods} requests other than GET and POST left out"));
    }
    if !secret.is_empty() {
        notes.push(format!(
            "{} left out: a password or token in the URL or body (add them by hand with a {{{{ variable }}}} from a payload file)",
            secret.join(", ")
        ));
    }
    out
}

/// The flow and what was done to it.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub steps: Vec<Step>,
    /// Each substitution made, in words.
    pub substitutions: Vec<String>,
    /// What was left out or kept as it was, and why.
    pub notes: Vec<String>,
    /// The payload columns the flow needs: a login's `username, password` or `loginToken`, and
    /// each secret a call sent (`newPassword`, `resetPassword_1`), in order of first need.
    pub payload: Vec<String>,
    /// The user name of a password login, for the payload file's example row.
    pub username: Option<String>,
    /// Each secret's column and the recorded value it stands for (never written): one value,
    /// one column; a second value under the same name gets a column of its own (`apiKey_2`).
    secrets: Vec<(String, Value)>,
    /// Ids the browser made and the variables that stand for them (a `set` step at first use).
    client_ids: Vec<(String, String)>,
}

impl Recorded {
    /// The payload column for the secret `value` found under `name`.
    fn secret_column(&mut self, name: &str, value: &Value) -> String {
        if let Some((c, _)) =
            self.secrets.iter().find(|(c, v)| v == value && (c == name || c.starts_with(&format!("{name}_"))))
        {
            return c.clone();
        }
        let taken = |c: &str| self.secrets.iter().any(|(t, _)| t == c);
        let column = (1..)
            .map(|n| if n == 1 { name.to_string() } else { format!("{name}_{n}") })
            .find(|c| !taken(c))
            .unwrap_or_default();
        self.secrets.push((column.clone(), value.clone()));
        need_column(self, &column);
        column
    }
}

/// Where a value the browser sent came from.
#[derive(Debug, Clone)]
enum Source {
    /// The result of the call at this step.
    Result(usize),
    LoginToken,
    UserId,
    /// An id the server sent in `added` (subscription data: not captured).
    Added(String),
}

/// The ids the browser made (sent before the server ever sent them), and how they were used.
#[derive(Debug, Default)]
struct Made {
    /// How often each was sent.
    count: BTreeMap<String, usize>,
    /// The one that recurs most, never a document's `_id`: the page's own (`$vuId`).
    own: Option<String>,
    /// Those the server sent back at some point (in a result, a document, anything).
    returned: std::collections::HashSet<String>,
}

/// A Meteor id as `Random.id()` makes them: 17 of its 55 characters.
pub fn is_meteor_id(s: &str) -> bool {
    const ALPHABET: &str = "23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz";
    s.len() == 17 && s.chars().all(|c| ALPHABET.contains(c))
}

fn kind(msg: &serde_json::Map<String, Value>) -> &str {
    msg.get("msg").and_then(Value::as_str).unwrap_or("")
}

/// Every string inside a value.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Builds the flow of one connection's messages, with the plain requests `http` (from
/// [`pick_requests`]) in their places.
pub fn build(messages: &[Message], http: &[HttpAction], opts: &Options) -> Recorded {
    let mut rec = Recorded::default();
    // At most a think, a set, the step and a waitFor each: reserved once (pages never written to
    // cost nothing), so a long session's steps are not copied as they grow.
    rec.steps.reserve(2 * (messages.len() + http.len()) + 2);
    let mut flow = Flow::new(rec, made_ids(messages), opts);
    for event in in_time_order(messages, http).into_iter().map(Some).chain(std::iter::once(None)) {
        let action = match event {
            None | Some(Ok(_)) => true,
            Some(Err(m)) => m.sent && !matches!(m.kind().as_str(), "ping" | "pong"),
        };
        if action {
            flow.wait_for_touched();
        }
        match event {
            None => break,
            Some(Ok(h)) => flow.http(h),
            Some(Err(m)) => flow.message(m),
        }
    }
    flow.finish()
}

/// The ids the browser made: how often each appears in what it sent (the one that recurs most is
/// the user's own, `$vuId`; one that appears once is new each time, `$randomId`).
fn made_ids(messages: &[Message]) -> Made {
    let mut returned: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut made: BTreeMap<String, usize> = BTreeMap::new();
    // Made ids a document was given (its `_id`): new each time, never the page's own.
    let mut doc_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
    // The login's user id and token are the session's, even where the page sent them before the
    // login answered (Meteor's accounts client keeps the user id from the last session): never
    // made by the browser.
    let (mut logins, mut session_ids): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for m in messages {
        let mut s = Vec::new();
        let msg = m.msg();
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default();
        if m.sent && msg.get("method").and_then(Value::as_str) == Some("login") {
            logins.push(id.to_string());
        } else if !m.sent && kind(&msg) == "result" && logins.iter().any(|l| l == id) {
            for field in ["id", "token"] {
                if let Some(v) = msg.get("result").and_then(|r| r.get(field)).and_then(Value::as_str) {
                    session_ids.push(v.to_string());
                }
            }
        }
        if m.sent && matches!(kind(&msg), "method" | "sub") {
            let params = msg.get("params").unwrap_or(&Value::Null);
            strings(params, &mut s);
            // Made by the browser: sent before the server ever sent it (the server may echo it
            // back later, in a document's fields).
            for x in s.into_iter().filter(|x| is_meteor_id(x)) {
                if made.contains_key(x) || !returned.contains(x) {
                    *made.entry(x.to_string()).or_default() += 1;
                }
            }
            document_ids(params, &mut doc_ids);
        } else if !m.sent {
            for v in msg.values() {
                strings(v, &mut s);
            }
            returned.extend(s.into_iter().filter(|x| is_meteor_id(x)).map(str::to_string));
        }
    }
    for v in &session_ids {
        made.remove(v);
    }
    let own = made
        .iter()
        .filter(|(id, n)| **n >= 2 && !doc_ids.contains(*id))
        .max_by_key(|(_, n)| **n)
        .map(|(id, _)| id.clone());
    Made { own, returned: returned.into_iter().filter(|r| made.contains_key(r)).collect(), count: made }
}

/// The page's plain requests and the connection's messages, in time order.
fn in_time_order<'a>(messages: &'a [Message], http: &'a [HttpAction]) -> Vec<Result<&'a HttpAction, &'a Message>> {
    let mut requests = http.iter().peekable();
    let mut events: Vec<Result<&HttpAction, &Message>> = Vec::with_capacity(messages.len() + http.len());
    for m in messages {
        while let Some(h) = requests.next_if(|h| h.time_s <= m.time_s) {
            events.push(Ok(h));
        }
        events.push(Err(m));
    }
    events.extend(requests.map(Ok));
    events
}

/// The flow [`build`] writes as it reads one event at a time, and what it keeps between them.
struct Flow<'a> {
    rec: Recorded,
    made: Made,
    opts: &'a Options,
    /// Values the server sent, by where they came from.
    known: HashMap<String, Source>,
    /// The calls not yet answered: their DDP id and their step.
    calls: HashMap<String, usize>,
    login_call: Option<String>,
    /// The subscriptions by their DDP id.
    subs: HashMap<String, String>,
    per_method: HashMap<String, usize>,
    said: Said,
    last: Option<f64>,
    connected: bool,
    skipped_subs: usize,
    other: BTreeMap<String, usize>,
    /// The last call (its label, the strings it sent and the one it got back, its DDP id) and the
    /// documents added or removed since: a `waitFor` where the page's next action came after the
    /// call's own document arrived or left.
    last_call: Option<(String, Vec<String>, String)>,
    touched: Vec<(String, String, bool)>,
    waits: usize,
}

impl<'a> Flow<'a> {
    fn new(rec: Recorded, made: Made, opts: &'a Options) -> Flow<'a> {
        Flow {
            rec,
            made,
            opts,
            known: HashMap::new(),
            calls: HashMap::new(),
            login_call: None,
            subs: HashMap::new(),
            per_method: HashMap::new(),
            said: Said::new(),
            last: None,
            connected: false,
            skipped_subs: 0,
            other: BTreeMap::new(),
            last_call: None,
            touched: Vec::new(),
            waits: 0,
        }
    }

    /// Before the page's next action: a `waitFor` for each document the last call made arrive
    /// (or leave) since.
    fn wait_for_touched(&mut self) {
        if let (Some((label, ids, _)), true) = (self.last_call.take(), self.opts.correlate) {
            let mut seen: Vec<&str> = Vec::new();
            for id in &ids {
                let Some((collection, _, gone)) = self.touched.iter().rev().find(|(_, d, _)| d == id) else { continue };
                if seen.contains(&id.as_str()) {
                    continue;
                }
                seen.push(id);
                let id = substitute(
                    Value::String(id.clone()),
                    &format!("waitFor after {label}"),
                    &mut self.rec,
                    &self.known,
                    &self.made,
                    self.opts,
                    &mut self.said,
                );
                self.rec.steps.push(Step::WaitFor { collection: collection.clone(), id, gone: *gone });
                self.waits += 1;
            }
        }
        self.touched.clear();
    }

    /// A plain request of the page's.
    fn http(&mut self, h: &HttpAction) {
        if self.connected {
            think(&mut self.rec, self.last.map(|t| h.time_s - t), self.opts);
        }
        self.rec.steps.push(Step::Http {
            method: h.method.clone(),
            url: h.url.clone(),
            body: h.body.clone().map(Box::new),
        });
        self.last = Some(h.end_s);
    }

    /// A DDP message, sent or received.
    fn message(&mut self, m: &Message) {
        let msg = m.msg();
        let k = kind(&msg);
        if matches!(k, "ping" | "pong") {
            return; // heartbeats: bolide answers and sends its own
        }
        if m.sent {
            if self.connected && k != "connect" {
                think(&mut self.rec, self.last.map(|t| m.time_s - t), self.opts);
            }
            self.sent(&msg, k);
        } else {
            self.received(&msg, k);
        }
        self.last = Some(m.time_s);
    }

    /// A message the browser sent.
    fn sent(&mut self, msg: &serde_json::Map<String, Value>, k: &str) {
        match k {
            "connect" if !self.connected => {
                self.rec.steps.push(Step::Connect);
                self.connected = true;
            }
            "connect" => self.rec.notes.push("the browser connected again on this connection; kept once".into()),
            "sub" => self.subscribe(msg),
            "unsub" => {
                let id = msg.get("id").and_then(Value::as_str).unwrap_or_default();
                if let Some(name) = self.subs.get(id) {
                    self.rec.steps.push(Step::Unsubscribe(name.clone()));
                }
            }
            "method" => self.method(msg),
            other_kind => *self.other.entry(format!("sent {other_kind}")).or_default() += 1,
        }
    }

    fn subscribe(&mut self, msg: &serde_json::Map<String, Value>) {
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let name = msg.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        if let std::collections::hash_map::Entry::Vacant(slot) = self.subs.entry(id) {
            slot.insert(name.clone());
            let params = msg.get("params").cloned().unwrap_or(Value::Array(vec![]));
            let what = format!("subscribe {name}");
            let params = substitute(params, &what, &mut self.rec, &self.known, &self.made, self.opts, &mut self.said);
            let params = hide_secrets(params, &what, &mut self.rec);
            self.rec.steps.push(Step::Subscribe { name, params: params.to_string() });
        } else {
            self.skipped_subs += 1;
        }
    }

    fn method(&mut self, msg: &serde_json::Map<String, Value>) {
        let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_string();
        let id = msg.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let params = msg.get("params").cloned().unwrap_or(Value::Array(vec![]));
        if method == "login" {
            self.login(params.get(0).cloned().unwrap_or(Value::Null));
            self.login_call = Some(id);
        } else {
            let n = self.per_method.entry(method.clone()).or_default();
            *n += 1;
            let n = *n;
            let what = format!("call {method} #{n}");
            let params_raw = params.clone();
            let params = substitute(params, &what, &mut self.rec, &self.known, &self.made, self.opts, &mut self.said);
            let params = hide_secrets(params, &method, &mut self.rec);
            let mut sent = Vec::new();
            strings(&params_raw, &mut sent);
            self.last_call = Some((what.clone(), sent.into_iter().map(str::to_string).collect(), id.clone()));
            self.calls.insert(id, self.rec.steps.len());
            self.rec.steps.push(Step::Call { method, params: params.to_string(), capture: None, nth: n });
        }
        if msg.contains_key("randomSeed") && self.opts.correlate {
            note_once(
                &mut self.rec,
                &mut self.said,
                "randomSeed: bolide's calls send none; the server makes its own ids for inserts",
            );
        }
    }

    /// A login call, its first parameter `first`: a resume token or a user and password.
    fn login(&mut self, first: Value) {
        let rec = &mut self.rec;
        if first.get("resume").is_some() {
            rec.steps.push(Step::LoginResume);
            need_column(rec, "loginToken");
            rec.substitutions.push(
                "login: the resume token became {{ loginToken }}, a column of the payload file (the recorded token is not written)".into(),
            );
        } else {
            rec.steps.push(Step::LoginPassword);
            // Added to what the flow needs already: a second login keeps the first's.
            need_column(rec, "username");
            need_column(rec, "password");
            let user = first.get("user");
            rec.username = user
                .and_then(|u| u.get("username").or_else(|| u.get("email")))
                .and_then(Value::as_str)
                .map(str::to_string);
            rec.substitutions.push(
                "login: the user and password became {{ username }} and {{ password }}, columns of the payload file (the recorded digest is not written)".into(),
            );
        }
    }

    /// A message the server sent.
    fn received(&mut self, msg: &serde_json::Map<String, Value>, k: &str) {
        match k {
            "result" => {
                let id = msg.get("id").and_then(Value::as_str).unwrap_or_default();
                let result = msg.get("result");
                if self.login_call.as_deref() == Some(id) {
                    for (field, source) in [("token", Source::LoginToken), ("id", Source::UserId)] {
                        if let Some(v) = result.and_then(|r| r.get(field)).and_then(Value::as_str) {
                            // A value the recording proxy masked is no token of this session.
                            if v != crate::redact::MASK {
                                self.known.insert(v.to_string(), source);
                            }
                        }
                    }
                } else if let (Some(step), Some(Value::String(v))) = (self.calls.remove(id), result) {
                    self.known.insert(v.clone(), Source::Result(step));
                    if let Some((_, ids, _)) = self.last_call.as_mut().filter(|c| c.2 == id) {
                        ids.push(v.clone());
                    }
                }
            }
            "added" | "removed" => {
                if let (Some(id), Some(c)) =
                    (msg.get("id").and_then(Value::as_str), msg.get("collection").and_then(Value::as_str))
                {
                    if k == "added" {
                        self.known.entry(id.to_string()).or_insert_with(|| Source::Added(c.to_string()));
                    }
                    self.touched.push((c.to_string(), id.to_string(), k == "removed"));
                }
            }
            _ => {}
        }
    }

    /// The flow with its disconnect, its repeats folded and its notes on what was left out.
    fn finish(self) -> Recorded {
        let Flow { mut rec, opts, connected, waits, skipped_subs, other, .. } = self;
        if connected {
            // Neither HAR format says when the page closed: a short pause after the last message (as
            // a person reads what arrived), said, instead of a disconnect right on the last send.
            let before = rec.steps.len();
            think(&mut rec, Some(CLOSE_PAUSE_S), opts);
            if rec.steps.len() > before {
                rec.notes.push(format!(
                    "disconnect: the HAR does not say when the page closed; a {CLOSE_PAUSE_S:.0} s pause is written before it (edit it to taste)"
                ));
            }
            rec.steps.push(Step::Disconnect);
        }
        let (steps, folded) = fold(std::mem::take(&mut rec.steps));
        rec.steps = steps;
        if folded > 0 {
            let loops = rec.steps.iter().filter(|s| matches!(s, Step::Loop { .. })).count();
            rec.notes.push(format!(
                "{folded} steps that repeated the same steps in a row folded into {loops} loop{} (each loop's thinks the mean of those it stands for)",
                if loops == 1 { "" } else { "s" }
            ));
        }
        if waits > 0 {
            rec.notes.push(format!(
                "{waits} waitFor steps: after a call, the page acted again once the document the call made had \
                 arrived (or the one it removed had gone); each user waits for its own"
            ));
        }
        if skipped_subs > 0 {
            rec.notes.push(format!("{skipped_subs} repeated sub messages (an id already subscribed) kept once"));
        }
        for (what, n) in other {
            rec.notes.push(format!("{n} {what} messages left out"));
        }
        rec
    }
}

/// The longest run of steps [`fold`] looks for repeats of.
const FOLD_PERIOD: usize = 16;

/// The fewest repeats [`fold`] makes a loop of.
const FOLD_REPEATS: usize = 3;

/// Whether two steps are the same for [`fold`]: equal, or thinks within 20 % (or 50 ms) of each
/// other (a person's pauses are never equal).
fn alike(a: &Step, b: &Step) -> bool {
    match (a, b) {
        (Step::Think(x), Step::Think(y)) => {
            let (lo, hi) = (x.min(y).as_secs_f64(), x.max(y).as_secs_f64());
            hi - lo <= (0.2 * hi).max(0.05)
        }
        // Which call of its method it is names a capture only: the capture itself is compared.
        (
            Step::Call { method: m1, params: p1, capture: c1, .. },
            Step::Call { method: m2, params: p2, capture: c2, .. },
        ) => m1 == m2 && p1 == p2 && c1 == c2,
        _ => a == b,
    }
}

/// Runs of the same steps repeated at least [`FOLD_REPEATS`] times in a row (a page that polls,
/// a user adding item after item the same way) folded into `loop: { count }` steps, each loop's
/// thinks the mean of the ones it stands for; returns the steps and how many were folded.
pub fn fold(mut steps: Vec<Step>) -> (Vec<Step>, usize) {
    let n = steps.len();
    let mut folded = 0;
    // In place: what is placed goes to `w`, never past the step `i` being read (only later steps
    // are compared), so a long session is folded without a second list.
    let (mut w, mut i) = (0, 0);
    let take = |steps: &mut Vec<Step>, at: usize| std::mem::replace(&mut steps[at], Step::Disconnect);
    while i < n {
        // The period covering most steps from here (the shortest on a tie).
        let mut best: Option<(usize, usize)> = None;
        for p in 1..=FOLD_PERIOD.min((n - i) / FOLD_REPEATS) {
            let mut k = 1;
            while i + (k + 1) * p <= n && (0..p).all(|j| alike(&steps[i + j], &steps[i + k * p + j])) {
                k += 1;
            }
            if k >= FOLD_REPEATS && best.is_none_or(|(bp, bk)| k * p > bp * bk) {
                best = Some((p, k));
            }
        }
        let Some((p, k)) = best else {
            steps[w] = take(&mut steps, i);
            w += 1;
            i += 1;
            continue;
        };
        let mut body = Vec::with_capacity(p);
        for j in 0..p {
            if let Step::Think(_) = steps[i + j] {
                let total: f64 = (0..k)
                    .map(|r| match &steps[i + r * p + j] {
                        Step::Think(d) => d.as_secs_f64(),
                        _ => 0.0,
                    })
                    .sum();
                let ms = (total / k as f64 * 100.0).round() as u64 * 10;
                body.push(Step::Think(Duration::from_millis(ms)));
            } else {
                body.push(take(&mut steps, i + j));
            }
        }
        steps[w] = Step::Loop { count: k, steps: body };
        w += 1;
        folded += k * p;
        i += k * p;
    }
    steps.truncate(w);
    (steps, folded)
}

/// A think for the pause before an action, scaled, capped, to the 10 ms; none under 20 ms.
/// The pause written before a recorded session's `disconnect`, seconds (scaled and capped as the
/// recorded thinks are).
const CLOSE_PAUSE_S: f64 = 1.0;

fn think(rec: &mut Recorded, gap_s: Option<f64>, opts: &Options) {
    let Some(gap) = gap_s.filter(|g| *g > 0.0) else { return };
    let secs = (gap * opts.think_scale).min(opts.think_max.as_secs_f64());
    let ms = ((secs * 1000.0) / 10.0).round() as u64 * 10;
    if ms >= 20 {
        rec.steps.push(Step::Think(Duration::from_millis(ms)));
    }
}

/// What was said already (a note's text, `sub:` and a substituted value).
type Said = std::collections::HashSet<String>;

fn note_once(rec: &mut Recorded, said: &mut Said, text: &str) {
    if said.insert(text.to_string()) {
        rec.notes.push(text.to_string());
    }
}

/// The params of a step with correlated values replaced by variables.
#[allow(clippy::too_many_arguments)]
fn substitute(
    v: Value,
    step: &str,
    rec: &mut Recorded,
    known: &HashMap<String, Source>,
    made: &Made,
    opts: &Options,
    said: &mut Said,
) -> Value {
    match v {
        Value::Array(a) => {
            Value::Array(a.into_iter().map(|x| substitute(x, step, rec, known, made, opts, said)).collect())
        }
        Value::Object(o) => {
            Value::Object(o.into_iter().map(|(k, x)| (k, substitute(x, step, rec, known, made, opts, said))).collect())
        }
        Value::String(s) if opts.correlate => {
            let r = replace(&s, step, rec, known, made, said);
            // A recorded value kept as it is renders back to itself, `{{` in it too.
            Value::String(if r == s { escape(&s) } else { r })
        }
        // Values stay as recorded, but a secret (the login's token) never goes into the file.
        Value::String(s) if matches!(known.get(&s), Some(Source::LoginToken)) => "{{ loginToken }}".into(),
        Value::String(s) => Value::String(escape(&s)),
        other => other,
    }
}

fn replace(
    s: &str,
    step: &str,
    rec: &mut Recorded,
    known: &HashMap<String, Source>,
    made: &Made,
    said: &mut Said,
) -> String {
    let short = |s: &str| {
        if s.chars().count() > 24 {
            format!("{}…", s.chars().take(24).collect::<String>())
        } else {
            s.to_string()
        }
    };
    // The logged-in user's name or email, wherever the page sent it again: the payload's column.
    if !s.is_empty() && rec.username.as_deref() == Some(s) {
        note_once_sub(
            rec,
            said,
            s,
            format!("{step}: the logged-in user's name -> {{{{ username }}}} (the payload file's column)"),
        );
        return "{{ username }}".into();
    }
    // The login's token and user id are the session's, whoever sent them first (a page may send
    // the stored user id before the resume login's answer).
    match known.get(s) {
        Some(Source::LoginToken) => {
            note_once_sub(rec, said, s, format!("{step}: the login's token -> {{{{ loginToken }}}}"));
            return "{{ loginToken }}".into();
        }
        Some(Source::UserId) => {
            note_once_sub(rec, said, s, format!("{step}: the logged-in user's id -> {{{{ userId }}}}"));
            return "{{ userId }}".into();
        }
        _ => {}
    }
    // Then an id the browser made: the server returning it later (an insert's result, the
    // document it added) does not make it the server's.
    if let Some(&n) = made.count.get(s) {
        if made.own.as_deref() == Some(s) {
            let text =
                format!("{step}: {s}, an id the browser made and sent {n} times -> {{{{ $vuId }}}} (one per user)");
            note_once_sub(rec, said, s, text);
            return "{{ $vuId }}".into();
        }
        if let Some((_, var)) = rec.client_ids.iter().find(|(id, _)| id == s) {
            return format!("{{{{ {var} }}}}");
        }
        if n == 1 && !made.returned.contains(s) {
            rec.substitutions
                .push(format!("{step}: {s}, an id the browser made -> {{{{ $randomId }}}} (new each time)"));
            return "{{ $randomId }}".into();
        }
        // Used again (sent again, or a document the server added under it): one new id per
        // user, made before its first use, kept by every later use.
        let base = var_base(step);
        let var = (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|v| !rec.client_ids.iter().any(|(_, t)| t == v))
            .unwrap_or_default();
        rec.client_ids.push((s.to_string(), var.clone()));
        rec.steps.push(Step::Set { var: var.clone(), value: "{{ $randomId }}".into() });
        rec.substitutions.push(format!(
            "{step}: {s}, an id the browser made -> {{{{ {var} }}}}, a new {{{{ $randomId }}}} for each user set before it (every later use follows)"
        ));
        return format!("{{{{ {var} }}}}");
    }
    match known.get(s) {
        Some(Source::Result(at)) => {
            let name = capture_name(rec, *at);
            let text =
                format!("{step}: {}, the result of step {}, -> {{{{ {name} }}}} (captured there)", short(s), at + 1);
            note_once_sub(rec, said, &format!("{step}/{s}"), text);
            format!("{{{{ {name} }}}}")
        }
        Some(Source::LoginToken) => {
            note_once_sub(rec, said, s, format!("{step}: the login's token -> {{{{ loginToken }}}}"));
            "{{ loginToken }}".into()
        }
        Some(Source::UserId) => {
            note_once_sub(rec, said, s, format!("{step}: the logged-in user's id -> {{{{ userId }}}}"));
            "{{ userId }}".into()
        }
        Some(Source::Added(c)) => {
            note_once(
                rec,
                said,
                &format!(
                    "{step}: {} came from the server in a document of {c} (subscription data, which bolide does not capture): kept as recorded",
                    short(s)
                ),
            );
            s.to_string()
        }
        None => s.to_string(),
    }
}

/// The name of a variable for an id the browser made at `step` (`call /taskCollection/insertAsync
/// #1`): the collection a Meteor collection method names (`taskCollection_id`), or `clientId`.
fn var_base(step: &str) -> String {
    let method = step.strip_prefix("call ").map(|m| m.split(" #").next().unwrap_or(m)).unwrap_or("");
    match method.strip_prefix('/').and_then(|m| m.split_once('/')) {
        Some((collection, _)) if !collection.is_empty() => {
            let c: String = collection.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            // A variable's name starts with a letter (`/2fa/insertAsync`: `c_2fa_id`).
            if c.starts_with(|ch: char| ch.is_ascii_digit()) {
                format!("c_{c}_id")
            } else {
                format!("{c}_id")
            }
        }
        _ => "clientId".into(),
    }
}

/// The made ids a sent value gives documents: a string under `_id`, anywhere in it.
fn document_ids(v: &Value, out: &mut std::collections::HashSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match x {
                    Value::String(id) if k == "_id" && is_meteor_id(id) => {
                        out.insert(id.clone());
                    }
                    other => document_ids(other, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| document_ids(x, out)),
        _ => {}
    }
}

/// A substitution listed once per key (a value, or a step and a value).
fn note_once_sub(rec: &mut Recorded, said: &mut Said, value: &str, text: String) {
    let key = format!("sub:{value}");
    if said.insert(key) {
        rec.substitutions.push(text);
    }
}

/// The variable the call at `at` captures its result into (named the first time it is needed:
/// `insertTask_1` for the first call of insertTask).
fn capture_name(rec: &mut Recorded, at: usize) -> String {
    if let Step::Call { method, capture, nth, .. } = &mut rec.steps[at] {
        let name = capture
            .get_or_insert_with(|| format!("{}_{nth}", method.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
        return name.clone();
    }
    format!("result_{}", at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(sent: bool, t: f64, v: Value) -> Message {
        let Value::Object(msg) = v else { panic!() };
        Message::new(sent, t, &msg)
    }

    fn opts() -> Options {
        Options { correlate: true, think_scale: 1.0, think_max: Duration::from_secs(10) }
    }

    /// A session: connect, login, subscribe (twice with one id), insert with the browser's own
    /// session id, the server's result used by a remove, a client-made id used once, a 30 s pause.
    fn session() -> Vec<Message> {
        vec![
            at(true, 0.0, json!({"msg":"connect","version":"1","support":["1"]})),
            at(false, 0.01, json!({"msg":"connected","session":"S"})),
            at(
                true,
                0.02,
                json!({"msg":"method","method":"login","params":[{"user":{"username":"ada"},"password":{"digest":"d1gest","algorithm":"sha-256"}}],"id":"1"}),
            ),
            at(
                false,
                0.05,
                json!({"msg":"result","id":"1","result":{"id":"u5erIdAAAAAAAAAAA","token":"T0ken-secret","tokenExpires":{"$date":1}}}),
            ),
            at(true, 0.06, json!({"msg":"sub","id":"s1","name":"tasks","params":["u5erIdAAAAAAAAAAA"]})),
            at(true, 0.06, json!({"msg":"sub","id":"s1","name":"tasks","params":["u5erIdAAAAAAAAAAA"]})),
            at(false, 0.08, json!({"msg":"ready","subs":["s1"]})),
            at(
                true,
                0.58,
                json!({"msg":"method","method":"insertTask","params":[{"sessionId":"HRSDMy25RLcwGu9p6","n":1}],"id":"2","randomSeed":"x"}),
            ),
            at(
                false,
                0.59,
                json!({"msg":"added","collection":"tasks","id":"JzCEya3bA7yugdpTS","fields":{"sessionId":"HRSDMy25RLcwGu9p6"}}),
            ),
            at(false, 0.60, json!({"msg":"result","id":"2","result":"JzCEya3bA7yugdpTS"})),
            at(false, 0.61, json!({"msg":"ping"})),
            at(
                true,
                30.6,
                json!({"msg":"method","method":"insertTask","params":[{"sessionId":"HRSDMy25RLcwGu9p6","_id":"aaaaaaaaaaaaaaaaa"}],"id":"3"}),
            ),
            at(false, 30.7, json!({"msg":"added","collection":"tasks","id":"bbbbbbbbbbbbbbbbb","fields":{}})),
            at(
                true,
                30.8,
                json!({"msg":"method","method":"removeTask","params":["JzCEya3bA7yugdpTS","bbbbbbbbbbbbbbbbb","T0ken-secret"],"id":"4"}),
            ),
            at(true, 30.9, json!({"msg":"unsub","id":"s1"})),
        ]
    }

    #[test]
    fn secret_names_are_read_as_words() {
        for yes in [
            "password",
            "newPassword",
            "reset_token",
            "X-Api-Key",
            "apiKey",
            "api_key",
            "apikey",
            "accessKey",
            "otp",
            "emailDigest",
            "authorization",
            "cookie",
            "session",
            "userSession",
            "resume",
            "clientSecret",
        ] {
            assert!(secret_name(yes), "{yes}");
        }
        for no in ["sessionId", "taskKey", "sortKey", "key", "author", "description", "monkey", "keyboard"] {
            assert!(!secret_name(no), "{no}");
        }
        // A key naming a token is one, whatever follows (tokenExpires's value is a date: no harm).
        assert!(secret_name("tokenExpires"));
    }

    #[test]
    fn secrets_by_key_and_by_method_become_payload_columns_and_are_never_written() {
        let call = |t: f64, id: &str, method: &str, params: Value| {
            at(true, t, json!({"msg":"method","method":method,"params":params,"id":id}))
        };
        let messages = vec![
            at(true, 0.0, json!({"msg":"connect","version":"1","support":["1"]})),
            at(false, 0.01, json!({"msg":"connected","session":"S"})),
            call(
                0.02,
                "1",
                "login",
                json!([{"user":{"username":"ada"},"password":{"digest":"d1gest-one","algorithm":"sha-256"}}]),
            ),
            call(
                0.1,
                "2",
                "changePassword",
                json!([{"digest":"old-d1gest","algorithm":"sha-256"},{"digest":"new-d1gest","algorithm":"sha-256"}]),
            ),
            call(
                0.2,
                "3",
                "resetPassword",
                json!(["reset-t0ken-123", {"digest":"reset-d1gest","algorithm":"sha-256"}]),
            ),
            call(0.3, "4", "createUser", json!([{"username":"bob","password":"plain-passw0rd"}])),
            call(
                0.4,
                "5",
                "fetchReport",
                json!([{"apiKey":"k3y-value","otp":123456,"sessionId":"not-a-secret","name":"weekly"}]),
            ),
            // A second login: the first login's columns stay, the token's is added.
            call(0.5, "6", "login", json!([{"resume":"res-t0ken"}])),
        ];
        let rec = build(&messages, &[], &opts());
        let written = format!("{:?}", rec.steps);
        let listed = format!("{:?} {:?}", rec.substitutions, rec.notes);
        for secret in [
            "d1gest-one",
            "old-d1gest",
            "new-d1gest",
            "reset-t0ken-123",
            "reset-d1gest",
            "plain-passw0rd",
            "k3y-value",
            "123456",
            "res-t0ken",
        ] {
            assert!(!written.contains(secret), "{secret} written: {written}");
            assert!(!listed.contains(secret), "{secret} listed: {listed}");
        }
        // What is no secret stays as recorded; the digests' algorithm too.
        assert!(
            written.contains("not-a-secret") && written.contains("weekly") && written.contains("sha-256"),
            "{written}"
        );
        assert_eq!(
            rec.payload,
            [
                "username",
                "password",
                "changePassword_1_digest",
                "changePassword_2_digest",
                "resetPassword_1",
                "resetPassword_2_digest",
                "apiKey",
                "otp",
                "loginToken"
            ]
        );
        assert!(listed.contains("call resetPassword: a secret (resetPassword_1) -> {{ resetPassword_1 }}"), "{listed}");
        assert!(written.contains("{\\\"apiKey\\\":\\\"{{ apiKey }}\\\""), "{written}");
    }

    #[test]
    fn a_session_becomes_steps_with_its_values_correlated() {
        let rec = build(&session(), &[], &opts());
        let steps: Vec<String> = rec
            .steps
            .iter()
            .map(|s| match s {
                Step::Call { method, params, capture, .. } => format!("call {method} {params} {capture:?}"),
                Step::Subscribe { name, params } => format!("sub {name} {params}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            steps,
            [
                "Connect",
                "LoginPassword",
                "sub tasks [\"{{ userId }}\"]",
                "Think(500ms)",
                "call insertTask [{\"sessionId\":\"{{ $vuId }}\",\"n\":1}] Some(\"insertTask_1\")",
                // Its document came before the next action: waited for, by each user's own id.
                "WaitFor { collection: \"tasks\", id: String(\"{{ insertTask_1 }}\"), gone: false }",
                "Think(10s)",
                "call insertTask [{\"sessionId\":\"{{ $vuId }}\",\"_id\":\"{{ $randomId }}\"}] None",
                "Think(100ms)",
                "call removeTask [\"{{ insertTask_1 }}\",\"bbbbbbbbbbbbbbbbb\",\"{{ loginToken }}\"] None",
                "Think(100ms)",
                "Unsubscribe(\"tasks\")",
                // The HAR has no close time: a short pause, said in the notes.
                "Think(1s)",
                "Disconnect",
            ]
        );
        assert!(
            rec.notes.iter().any(|n| n.starts_with("disconnect: the HAR does not say when the page closed")),
            "{:?}",
            rec.notes
        );
        assert_eq!(
            (rec.payload.clone(), rec.username.as_deref()),
            (vec!["username".to_string(), "password".to_string()], Some("ada"))
        );
        let all = format!("{:?} {:?}", rec.substitutions, rec.notes);
        assert!(!all.contains("d1gest") && !all.contains("T0ken-secret"), "no secret is listed: {all}");
        assert!(all.contains("bbbbbbbbbbbbbbbbb came from the server in a document of tasks"), "{all}");
        assert!(all.contains("1 repeated sub messages"), "{all}");
        assert!(all.contains("randomSeed"), "{all}");
        // 30 s of pause capped at --think-max, pings never counted as an action.
        let plain =
            build(&session(), &[], &Options { correlate: false, think_scale: 0.0, think_max: Duration::from_secs(10) });
        assert!(!plain.steps.iter().any(|s| matches!(s, Step::Think(_))), "scale 0 drops the thinks");
        assert!(plain.substitutions.iter().all(|s| s.starts_with("login")), "{:?}", plain.substitutions);
        let Step::Call { params, .. } = &plain.steps[plain.steps.len() - 3] else { panic!("{:?}", plain.steps) };
        assert!(params.starts_with("[\"JzCEya3bA7yugdpTS\","), "--no-correlate keeps values: {params}");
    }

    #[test]
    fn ids_the_page_gave_new_documents_are_made_per_user_and_followed() {
        // Meteor's client inserting through a collection: the page picks the _id, the server
        // adds the document under it and returns it; the page then updates and removes it.
        let (x, y, session) = ("Xq3TnWpbYkR7aZc2d", "Yb8KmNpQr5StAvWx9", "HRSDMy25RLcwGu9p6");
        let call = |t: f64, id: &str, method: &str, params: Value| {
            at(true, t, json!({"msg":"method","method":method,"params":params,"id":id,"randomSeed":"r"}))
        };
        let messages = vec![
            at(true, 0.0, json!({"msg":"connect","version":"1","support":["1"]})),
            at(false, 0.01, json!({"msg":"connected","session":"S"})),
            call(0.1, "1", "/taskCollection/insertAsync", json!([{"_id":x,"description":"a","sessionId":session}])),
            at(false, 0.11, json!({"msg":"added","collection":"taskCollection","id":x,"fields":{"description":"a"}})),
            at(false, 0.12, json!({"msg":"result","id":"1","result":x})),
            call(0.2, "2", "/taskCollection/insertAsync", json!([{"_id":y,"description":"b","sessionId":session}])),
            at(false, 0.21, json!({"msg":"result","id":"2","result":y})),
            call(0.3, "3", "/taskCollection/updateAsync", json!([{"_id":x},{"$set":{"description":"c"}},{}])),
            at(false, 0.31, json!({"msg":"result","id":"3","result":1})),
            call(0.4, "4", "/taskCollection/removeAsync", json!([{"_id":x}])),
        ];
        let rec = build(&messages, &[], &Options { think_scale: 0.0, ..opts() });
        let steps: Vec<String> = rec
            .steps
            .iter()
            .map(|s| match s {
                Step::Call { method, params, .. } => format!("call {method} {params}"),
                other => format!("{other:?}"),
            })
            .collect();
        let set = |v: &str| format!("Set {{ var: \"{v}\", value: \"{{{{ $randomId }}}}\" }}");
        assert_eq!(
            steps,
            [
                "Connect".to_string(),
                set("taskCollection_id_1"),
                "call /taskCollection/insertAsync [{\"_id\":\"{{ taskCollection_id_1 }}\",\"description\":\"a\",\"sessionId\":\"{{ $vuId }}\"}]".into(),
                // The document it added arrived before the page acted again: waited for.
                "WaitFor { collection: \"taskCollection\", id: String(\"{{ taskCollection_id_1 }}\"), gone: false }".into(),
                set("taskCollection_id_2"),
                "call /taskCollection/insertAsync [{\"_id\":\"{{ taskCollection_id_2 }}\",\"description\":\"b\",\"sessionId\":\"{{ $vuId }}\"}]".into(),
                "call /taskCollection/updateAsync [{\"_id\":\"{{ taskCollection_id_1 }}\"},{\"$set\":{\"description\":\"c\"}},{}]".into(),
                "call /taskCollection/removeAsync [{\"_id\":\"{{ taskCollection_id_1 }}\"}]".into(),
                "Disconnect".into(),
            ]
        );
        let all = format!("{:?}", rec.substitutions);
        assert!(!all.contains("kept as recorded"), "{all}");
        assert!(all.contains(&format!("{x}, an id the browser made -> {{{{ taskCollection_id_1 }}}}")), "{all}");
        assert_eq!(var_base("call insertTask #2"), "clientId");
        assert_eq!(var_base("call /2fa/insertAsync #1"), "c_2fa_id");
    }

    #[test]
    fn repeated_steps_fold_into_loops_with_their_thinks_averaged() {
        let call = |m: &str| Step::Call { method: m.into(), params: "[]".into(), capture: None, nth: 1 };
        let think = |ms: u64| Step::Think(Duration::from_millis(ms));
        let mut steps = vec![Step::Connect, call("a")];
        for i in 0..5 {
            steps.extend([call("poll"), think(1000 + i * 20), call("tick"), think(200)]);
        }
        // Twice only: not folded. A think far from the others: not alike.
        steps.extend([call("b"), call("b"), think(5000), Step::Disconnect]);
        let (out, folded) = fold(steps);
        assert_eq!(folded, 20);
        assert_eq!(
            out,
            vec![
                Step::Connect,
                call("a"),
                Step::Loop { count: 5, steps: vec![call("poll"), think(1040), call("tick"), think(200)] },
                call("b"),
                call("b"),
                think(5000),
                Step::Disconnect,
            ]
        );
        // Calls that capture different variables are different steps.
        let captured =
            |c: &str| Step::Call { method: "m".into(), params: "[]".into(), capture: Some(c.into()), nth: 1 };
        let (out, folded) = fold(vec![captured("m_1"), captured("m_2"), captured("m_3")]);
        assert_eq!((out.len(), folded), (3, 0));
        assert!(alike(&think(1000), &think(1200)) && !alike(&think(1000), &think(1300)));
        assert!(alike(&think(20), &think(60)), "50 ms apart at most for short thinks");
    }

    #[test]
    fn the_login_s_user_id_stays_the_session_s_even_when_the_page_sent_it_first() {
        // Meteor's accounts client knows the stored user id before the resume login answers.
        let uid = "u5erIdAAAAAAAAAAA";
        let messages = vec![
            at(true, 0.0, json!({"msg":"connect","version":"1","support":["1"]})),
            at(true, 0.01, json!({"msg":"method","method":"login","params":[{"resume":"t"}],"id":"1"})),
            at(true, 0.02, json!({"msg":"sub","id":"a","name":"tasks","params":[uid]})),
            at(false, 0.05, json!({"msg":"result","id":"1","result":{"id":uid,"token":"T0ken"}})),
            at(true, 0.1, json!({"msg":"method","method":"mine","params":[uid],"id":"2"})),
        ];
        let rec = build(&messages, &[], &opts());
        let calls: Vec<String> = rec
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Call { params, .. } | Step::Subscribe { params, .. } => Some(params.clone()),
                _ => None,
            })
            .collect();
        // Before the login answered it is kept as recorded (no variable holds it yet); after, it
        // is the user's own.
        assert_eq!(calls, ["[\"u5erIdAAAAAAAAAAA\"]", "[\"{{ userId }}\"]"], "{:?}", rec.steps);
    }

    #[test]
    fn meteor_ids_are_told_from_other_strings() {
        assert!(is_meteor_id("HRSDMy25RLcwGu9p6"));
        assert!(!is_meteor_id("HRSDMy25RLcwGu9p"), "16 characters");
        assert!(!is_meteor_id("HRSDMy25RLcwGu9p0"), "0 is not in Random.id's alphabet");
        assert!(!is_meteor_id("New Task 1"));
    }
}

//! Scenarios: what virtual users do. The model here is plain data; [`yaml`] reads it from files in
//! Artillery's shape (with file:line:column errors), [`builtin`] builds the Meteor benchmark's
//! workloads, and [`arrivals`] turns phases into an arrival schedule.

pub mod arrivals;
pub mod builtin;
pub mod settings;
pub mod template;
pub mod yaml;

use std::time::Duration;

use serde_json::Value;

use crate::proto::ws::Transport;

/// The longest duration a flag or a scenario file may give: a run, a phase, a think time, a
/// timeout. Longer ones are refused with this range rather than overflowing a clock.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The highest rate a flag or a scenario file may give (users arriving, or requests, per second).
pub const MAX_RATE_PER_S: f64 = 1_000_000.0;
/// The lowest rate: one a day. Below it, the gap between two sends outlasts any run (and
/// overflows a duration at rates such as 1e-300).
pub const MIN_RATE_PER_S: f64 = 1.0 / 86_400.0;
/// The most users an `arrivalCount` phase may bring.
pub const MAX_ARRIVAL_COUNT: u64 = 1_000_000_000;

/// A step's timeout when the scenario gives none.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a user may run when the scenario does not say.
pub const DEFAULT_USER_TIMEOUT: Duration = Duration::from_secs(240);

/// The allowed range of durations, in words, for error messages.
pub fn duration_range() -> String {
    format!("between 0 and {} days", MAX_DURATION.as_secs() / 86_400)
}

/// A number of seconds as a duration, if finite, not negative and at most [`MAX_DURATION`].
pub fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0 && secs <= MAX_DURATION.as_secs_f64()).then(|| Duration::from_secs_f64(secs))
}

/// A rate, if at least [`MIN_RATE_PER_S`] (one a day) and at most [`MAX_RATE_PER_S`] (with the
/// range in words otherwise).
pub fn check_rate(per_s: f64) -> Result<f64, String> {
    if per_s.is_finite() && (MIN_RATE_PER_S..=MAX_RATE_PER_S).contains(&per_s) {
        Ok(per_s)
    } else {
        let shown =
            if per_s != 0.0 && !(1e-6..1e9).contains(&per_s.abs()) { format!("{per_s:e}") } else { per_s.to_string() };
        Err(format!(
            "must be at least one a day ({MIN_RATE_PER_S:.8} per second) and at most {MAX_RATE_PER_S:.0} per second, not {shown}"
        ))
    }
}

/// A whole scenario file (or built-in).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub config: Config,
    /// Weighted flows; each arriving user picks one.
    pub flows: Vec<Flow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `http(s)://host:port[/prefix]` of the app's servers, with their weights: users are spread
    /// over them (the first alone when there is one).
    pub targets: Vec<TargetSpec>,
    pub phases: Vec<Phase>,
    /// Arrivals while this many users are alive are skipped (and counted).
    pub max_vusers: Option<u64>,
    /// Per-user variables: a value picked at random from each list.
    pub variables: Vec<(String, Vec<Value>)>,
    pub payload: Option<Payload>,
    /// `ensure`: thresholds whose failure makes the exit code 1.
    pub ensure: Vec<crate::threshold::Threshold>,
    pub ddp: DdpSettings,
    /// Default timeout of a step, in any protocol (`config.timeout`; `config.ddp.stepTimeout`
    /// still read).
    pub step_timeout: Duration,
    /// A user still running after this long is cut off and counted as failed
    /// (`config.ddp.userTimeout`).
    pub user_timeout: Duration,
    /// `config.browser`: where browser flows' Chromium comes from.
    pub browser: crate::browser::BrowserPlan,
    /// `config.socketio`: how Socket.IO flows' users connect.
    pub socketio: crate::scenario::settings::SocketIoConfig,
    /// `config.graphql`: how graphql-ws flows' users connect.
    pub graphql: crate::scenario::settings::GraphqlConfig,
    /// `config.audit.truth`: where the audit reads the truth (one URL, or one per target);
    /// empty: through the users' own targets.
    pub audit_truth: Vec<String>,
}

/// One server of the app: its URL and its share of the users.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    pub url: String,
    /// Users go to the targets in proportion to their weights (1 unless `URL=W` says otherwise).
    pub weight: u32,
}

/// Most a target's weight may be (the round-robin cycle has the weights' sum in slots).
pub const MAX_WEIGHT: u32 = 1000;

impl TargetSpec {
    /// `URL` or `URL=WEIGHT` (a whole number from 1 to 1000). A `=` inside the URL's query is part
    /// of the URL.
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        let text = text.trim();
        let split = text
            .rsplit_once('=')
            .filter(|(head, tail)| !head.contains('?') && !tail.is_empty() && !tail.contains(['/', '&', '?', '#']));
        let (url, weight) = match split {
            Some((url, w)) => {
                let weight = match w.trim().parse::<u32>() {
                    Ok(n) if (1..=MAX_WEIGHT).contains(&n) => n,
                    _ => {
                        return Err(format!(
                            "target {text:?}: the weight {w:?} must be a whole number from 1 to {MAX_WEIGHT}"
                        ))
                    }
                };
                (url.trim(), weight)
            }
            None => (text, 1),
        };
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https" | "ws" | "wss") => {}
            Ok(u) => return Err(format!("target {url:?}: scheme {}:// is not http(s):// or ws(s)://", u.scheme())),
            Err(e) => return Err(format!("target {url:?} is not a URL: {e}")),
        }
        Ok(TargetSpec { url: url.to_string(), weight })
    }

    /// As given (`URL`, or `URL=W` when the weight is not 1).
    pub fn shown(&self) -> String {
        match self.weight {
            1 => self.url.clone(),
            w => format!("{}={w}", self.url),
        }
    }
}

/// Which target each user goes to: the smooth weighted round-robin order over one cycle of the
/// weights' sum (3:1 gives 0, 0, 1, 0; 1:1 alternates), so that any N users split as evenly as
/// the weights allow, whichever worker starts them.
pub fn target_cycle(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, w) in current.iter_mut().zip(weights) {
            *c += i64::from(*w);
        }
        let best = (0..weights.len()).max_by_key(|i| (current[*i], std::cmp::Reverse(*i))).unwrap_or(0);
        current[best] -= total;
        out.push(best);
    }
    out
}

/// Problems with a list of targets: duplicates (the same URL twice).
/// Linear in the number of targets, and one line per repeated URL however often it repeats.
pub fn check_targets(targets: &[TargetSpec]) -> Vec<String> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut order = Vec::new();
    for t in targets {
        let n = seen.entry(t.url.trim_end_matches('/')).or_insert(0);
        *n += 1;
        if *n == 2 {
            order.push(t);
        }
    }
    order
        .into_iter()
        .map(|t| {
            let times = match seen[t.url.trim_end_matches('/')] {
                2 => "twice".to_string(),
                n => format!("{n} times"),
            };
            format!("target {:?} is given {times}; give it once with a weight (URL=2) to send it more users", t.url)
        })
        .collect()
}

/// DDP settings of a run (our additions to Artillery's config).
#[derive(Debug, Clone, PartialEq)]
pub struct DdpSettings {
    pub transport: Transport,
    pub compression: bool,
    /// Keep a local collection cache (needed by `waitFor`).
    pub cache: bool,
    /// Server timestamp field for fan-out latency (none to skip).
    pub fanout_field: Option<String>,
    /// When a step fails because the connection closed, reconnect (and re-subscribe) and retry
    /// the step, as a browser's Meteor client would, on Meteor's back-off without a cap on tries
    /// (within the step timeout and the user's phase).
    pub reconnect: bool,
    /// The closed phase's users walk their flow in bursts: each walk starts when every user
    /// finished the last (`ddp-connect`: N sessions opened at once).
    pub bursts: bool,
}

impl Default for DdpSettings {
    fn default() -> Self {
        DdpSettings {
            transport: Transport::WebSocket,
            compression: true,
            cache: true,
            fanout_field: Some("createdAt".into()),
            reconnect: false,
            bursts: false,
        }
    }
}

/// A phase of arrivals, as in Artillery.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: Option<String>,
    pub duration: Duration,
    pub kind: PhaseKind,
    /// Arrivals spaced as a Poisson process brings them (`poisson: true`: 1.0), or with gaps
    /// drawn from a gamma distribution of this shape (`burstiness`, as vLLM's benchmark: below 1
    /// burstier, above 1 more even); None: evenly spaced. A steady `arrivalRate` or an
    /// `arrivalCount` phase only; its arrival count stays the phase's.
    pub burstiness: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PhaseKind {
    /// `arrivalRate` users per second, ramping linearly to `ramp_to` if set.
    Rate { per_s: f64, ramp_to: Option<f64> },
    /// `arrivalCount` users spread evenly over the duration.
    Count(u64),
    /// No arrivals.
    Pause,
    /// The closed model (MeteorDown's, k6's constant VUs): this many users start together (spread
    /// over the phase's first second) and each walks its flow again and again until the phase
    /// ends; an iteration under way then finishes. Each iteration counts as one user.
    Users(u64),
}

/// Shortens or re-rates a scenario file's phases from the command line (`--duration`,
/// `--arrival-rate`), as Artillery's overrides do: with `duration`, the phases are cut at that
/// time (a phase that crosses it ends there, an `arrivalCount` keeping its share of users, a
/// closed `users` phase its users, and later phases are dropped); with `rate`, every
/// arrival-rate phase arrives at that rate (its `rampTo` dropped), while count phases, closed
/// phases and pauses stay as written.
pub fn override_phases(phases: &mut Vec<Phase>, rate: Option<f64>, duration: Option<Duration>) {
    if let Some(limit) = duration {
        let mut at = Duration::ZERO;
        let mut kept = Vec::new();
        for mut p in phases.drain(..) {
            if at >= limit {
                break;
            }
            let left = limit - at;
            if p.duration > left {
                if let PhaseKind::Count(n) = p.kind {
                    let share = n as f64 * left.as_secs_f64() / p.duration.as_secs_f64();
                    p.kind = PhaseKind::Count(share.round() as u64);
                }
                if let PhaseKind::Rate { per_s, ramp_to: Some(to) } = p.kind {
                    // The ramp stops where the phase is cut.
                    let reached = per_s + (to - per_s) * left.as_secs_f64() / p.duration.as_secs_f64();
                    p.kind = PhaseKind::Rate { per_s, ramp_to: Some(reached) };
                }
                p.duration = left;
            }
            at += p.duration;
            kept.push(p);
        }
        *phases = kept;
    }
    if let Some(r) = rate {
        for p in phases.iter_mut() {
            if let PhaseKind::Rate { .. } = p.kind {
                p.kind = PhaseKind::Rate { per_s: r, ramp_to: None };
            }
        }
    }
}

/// CSV rows handed to users in turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub path: String,
    pub fields: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    pub weight: u32,
    pub steps: Vec<Step>,
    /// Which client its users are.
    pub engine: Engine,
}

/// One step, with the name its measurements are filed under.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    Connect,
    Login(Login),
    Call(Call),
    Subscribe {
        name: String,
        params: Vec<Value>,
        capture: Option<String>,
        timeout: Option<Duration>,
    },
    /// Stops the subscription whose id is in this variable (or the last one to that name).
    Unsubscribe {
        name: String,
    },
    WaitFor(WaitFor),
    Think(Think),
    /// Gives the user's variables values, in order (`set: { task: "{{ $randomId }}" }`): an id
    /// made once and used by every later step, as a page keeps the id it gave a new document.
    Set(Vec<(String, Value)>),
    Loop(Loop),
    Disconnect,
    Http(HttpStep),
    /// A checkpoint of the reactive-correctness audit (`audit:`, or added by `--audit`).
    Audit(Audit),
    /// A browser flow's action on its page (`engine: browser`).
    Browser(Action),
    /// A Socket.IO event sent (`engine: socketio`), and what answers it.
    Emit(Emit),
    /// Socket.IO events pushed to the user, waited for and counted (`engine: socketio`).
    Listen(Listen),
    /// A GraphQL query or mutation over the user's socket (`engine: graphql-ws`).
    Execute(Execute),
    /// A GraphQL subscription started, and its first `next` messages waited for.
    GqlSubscribe(GqlSubscribe),
    /// A GraphQL subscription stopped (`complete`): the one a `subscribe` captured under this
    /// name, or the user's latest.
    Complete {
        name: Option<String>,
    },
    /// A Server-Sent Events stream requested and read (`engine: sse`).
    Stream(SseStream),
    /// A streamed completion of an OpenAI-compatible server (`engine: sse`).
    Chat(Chat),
}

/// `stream: { url, method, headers, json | body, events, until, match, capture, keep, timeout }`:
/// one request whose `text/event-stream` answer is read event by event. It ends after `events`
/// events, at an `until` event, or (with neither) when the server ends the stream or at its
/// timeout; a server that ends it before is asked again as EventSource does (`Last-Event-ID`,
/// the server's `retry`).
#[derive(Debug, Clone, PartialEq)]
pub struct SseStream {
    pub method: String,
    /// A path (joined to the target's URL, its path kept), an absolute URL, or empty: the
    /// target's own URL.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
    pub events: Option<u64>,
    pub until: Option<StreamEnd>,
    /// Fields the last event's JSON data must have (`match: { status: done }`).
    pub matches: Vec<(String, Value)>,
    /// From the last event's data (its JSON, or the text).
    pub capture: Option<Capture>,
    /// The stream stays open after the step, its events counted for `listen` steps.
    pub keep: bool,
    pub timeout: Option<Duration>,
    /// Asked again when the server ends it early (`config.sse.reconnect`, true by default), after
    /// the server's `retry` or this wait (`config.sse.retry`, EventSource's 3 s).
    pub reconnect: Option<Duration>,
    /// Over HTTP/2 (`http2: true`, `config.sse.http2`): ALPN `h2` for https://, prior knowledge
    /// for http://; a user's streams then share one connection.
    pub http2: bool,
}

/// The event that ends a stream step: its name, and text its data holds.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEnd {
    pub event: Option<String>,
    pub data: Option<String>,
}

/// `chat: { model, messages | prompt, max_tokens, input_tokens, url, headers, capture, timeout,
/// ... }`: a streamed completion (`stream: true`). `messages` go to `/v1/chat/completions`,
/// `prompt` to `/v1/completions`; `input_tokens` makes a prompt of that many words. Other keys
/// (`temperature`, ...) are sent as they are.
#[derive(Debug, Clone, PartialEq)]
pub struct Chat {
    pub url: Option<String>,
    pub model: Option<String>,
    pub messages: Option<Value>,
    pub prompt: Option<Value>,
    pub input_tokens: Option<Length>,
    pub max_tokens: Option<Length>,
    pub extra: Vec<(String, Value)>,
    pub headers: Vec<(String, String)>,
    /// The whole generated text.
    pub capture: Option<Capture>,
    pub timeout: Option<Duration>,
    /// The service levels a request must meet to count as good (`config.llm.goodput`:
    /// `ttft`, `tpot`, `itl`, `e2el`), each request's own (its ITL: its slowest gap).
    pub goodput: Vec<(String, Duration)>,
    /// Over HTTP/2, as a stream's `http2`.
    pub http2: bool,
}

/// Request goodput's service levels as text, `ttft:500ms,tpot:50ms` (`config.llm.goodput` or
/// `--goodput`): each level's name and duration.
pub fn parse_goodput(text: &str) -> Result<Vec<(String, Duration)>, String> {
    text.split(',')
        .map(|p| {
            let (k, v) = p.split_once(':').unwrap_or((p, ""));
            let k = k.trim();
            match (GOODPUT_LEVELS.contains(&k), humantime::parse_duration(v.trim())) {
                (true, Ok(d)) => Ok((k.to_string(), d)),
                _ => Err(format!("{:?} is not a level with a duration", crate::redact::printable(p.trim()))),
            }
        })
        .collect()
}

/// The levels of request goodput: a request's TTFT, TPOT, slowest gap and end-to-end latency.
pub const GOODPUT_LEVELS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

impl Scenario {
    /// What a run's flags replace in the protocols' settings (`--transport`,
    /// `--no-compression`, `--goodput`); what refused them.
    pub fn set_by_flags(&mut self, args: &crate::cli::RunArgs) -> Vec<String> {
        use crate::cli::TransportArg;
        use crate::proto::ws::Transport;
        let mut problems = Vec::new();
        if let Some(t) = args.transport {
            self.config.ddp.transport = match t {
                TransportArg::Websocket => Transport::WebSocket,
                TransportArg::Sockjs => Transport::SockJs,
                TransportArg::XhrPolling => Transport::XhrPolling,
                TransportArg::XhrStreaming => Transport::XhrStreaming,
            };
        }
        if args.no_compression {
            self.config.ddp.compression = false;
        }
        if let Some(text) = &args.goodput {
            match parse_goodput(text) {
                Ok(levels) if self.set_goodput(&levels) => {}
                Ok(_) => problems.push("--goodput is for chat steps (engine: sse), and the scenario has none".into()),
                Err(e) => problems
                    .push(format!("--goodput: {e}; e.g. --goodput ttft:500ms,tpot:50ms (ttft, tpot, itl, e2el)")),
            }
        }
        problems
    }

    /// Every `chat` step's goodput levels set to `levels` (`--goodput` over `config.llm.goodput`);
    /// whether the scenario has a `chat` step at all.
    fn set_goodput(&mut self, levels: &[(String, Duration)]) -> bool {
        fn set(steps: &mut [Step], levels: &[(String, Duration)]) -> bool {
            let mut any = false;
            for s in steps {
                match &mut s.kind {
                    StepKind::Loop(l) => any |= set(&mut l.steps, levels),
                    StepKind::Chat(c) => {
                        c.goodput = levels.to_vec();
                        any = true;
                    }
                    _ => {}
                }
            }
            any
        }
        let mut any = false;
        for f in &mut self.flows {
            any |= set(&mut f.steps, levels);
        }
        any
    }
}

/// A length drawn for each request: `mean` (with `stddev`, a normal distribution), kept within
/// `min` and `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Length {
    pub mean: u64,
    pub stddev: u64,
    pub min: u64,
    pub max: u64,
}

/// Which client a flow's users are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// Meteor's browser client over DDP (the default).
    #[default]
    Ddp,
    /// A real Chromium page (`engine: browser`).
    Browser,
    /// socket.io-client 4 (`engine: socketio`).
    SocketIo,
    /// A graphql-ws client (`engine: graphql-ws`).
    GraphqlWs,
    /// Server-Sent Events and streamed LLM completions (`engine: sse`).
    Sse,
}

impl Engine {
    /// As a scenario names it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Ddp => "ddp",
            Engine::Browser => "browser",
            Engine::SocketIo => "socketio",
            Engine::GraphqlWs => "graphql-ws",
            Engine::Sse => "sse",
        }
    }

    /// Whether its users speak plain HTTP: no WebSocket, where compression would be offered.
    pub fn plain_http(self) -> bool {
        matches!(self, Engine::Sse)
    }
}

/// `emit: { channel, data }` (one argument) or `emit: [channel, arg, ...]`, with Artillery's
/// `namespace`, `response` and `acknowledge` beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Emit {
    /// The event's name, then its arguments (templates rendered per user).
    pub args: Vec<Value>,
    /// Relative to the target's own namespace (its URL's path).
    pub namespace: Option<String>,
    pub reply: Reply,
    pub timeout: Option<Duration>,
}

/// What an emit waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Nothing: sent, and done.
    None,
    /// The server's acknowledgement (`acknowledge`).
    Ack(Answer),
    /// Events named `channel` (`response`).
    Event { channel: String, answer: Answer },
}

/// What an answer (an acknowledgement's or the response events' arguments) must be, as Artillery
/// judges it: `data` (a list: every argument; a mapping: the last one; text: part of the last
/// one), `match`es on JSON paths, and what is captured from it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub data: Option<Value>,
    pub matches: Vec<JsonMatch>,
    pub captures: Vec<(String, String)>,
}

/// `{ json: "$.0.name", value: ... }`: the value at a JSON path of the answer's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonMatch {
    pub json: String,
    pub value: Value,
}

/// `listen: { channel, count, namespace, timeout }`: waits until `count` events named `channel`
/// came that no earlier `listen` counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Listen {
    pub channel: String,
    pub count: u64,
    pub namespace: Option<String>,
    pub timeout: Option<Duration>,
}

/// `execute: { query, variables, capture, timeout }`.
#[derive(Debug, Clone, PartialEq)]
pub struct Execute {
    pub query: String,
    pub variables: Option<Value>,
    /// From the result's `data`.
    pub capture: Option<Capture>,
    pub timeout: Option<Duration>,
}

/// `subscribe: { query, variables, count, capture, timeout }` in a graphql-ws flow.
#[derive(Debug, Clone, PartialEq)]
pub struct GqlSubscribe {
    pub query: String,
    pub variables: Option<Value>,
    /// `next` messages waited for (the first's time is the step's).
    pub count: u64,
    /// The name `complete` stops it by.
    pub capture: Option<String>,
    pub timeout: Option<Duration>,
}

/// A GraphQL operation's name for its step: `mutation AddTask`, or the operation's kind and its
/// first field (`subscription taskAdded`).
pub fn operation_name(query: &str) -> String {
    let q = query.trim_start();
    let kind = ["query", "mutation", "subscription"].into_iter().find(|k| q.starts_with(k)).unwrap_or("query");
    let after = q.strip_prefix(kind).unwrap_or(q).trim_start();
    let word = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let named = word(after);
    if !named.is_empty() {
        return format!("{kind} {named}");
    }
    // Anonymous: the first field selected.
    let body = after.split_once('{').map(|(_, b)| b.trim_start()).unwrap_or_default();
    match word(body) {
        f if f.is_empty() => kind.to_string(),
        f => format!("{kind} {f}"),
    }
}

/// What a browser user does on its page, named as Playwright names it. Selectors, paths and
/// values may hold `{{ variable }}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `goto: PATH`: navigates (a path joins the user's target), settled at the page's `load`.
    Goto(String),
    /// `click: SELECTOR`: waits for the element, clicks its middle, then waits until every DDP
    /// method the page sent meanwhile has its `result` and `updated`.
    Click(String),
    /// `fill: { selector, value }`: replaces the field's text, as typing it would.
    Fill { selector: String, value: Value },
    /// `press: { selector, key }`: a key pressed in the element (`Enter`, `Tab`, `a`).
    Press { selector: String, key: String },
    /// `waitForSelector: SELECTOR` or `{ selector, count, state, timeout }`.
    WaitForSelector(Selector),
    /// `expect: { selector, text | count, timeout }`: the page comes to show it within the timeout.
    Expect(Selector),
}

/// What a wait or a check looks for on the page.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub selector: String,
    /// Exactly this many matching elements.
    pub count: Option<u64>,
    /// The first match's text contains this.
    pub text: Option<Value>,
    pub state: Visibility,
    pub timeout: Option<Duration>,
}

impl Selector {
    /// What the step checks beyond the element being there, as its name says it: two checks of
    /// one selector (5 shown, then none) are two rows, not one.
    fn check(&self) -> String {
        let text = |v: &Value| match v {
            Value::String(t) => format!("{t:?}"),
            other => other.to_string(),
        };
        match (self.count, &self.text, self.state) {
            (Some(n), _, _) => format!(" count {n}"),
            (None, Some(t), _) => format!(" text {}", text(t)),
            (None, None, Visibility::Hidden) => " hidden".into(),
            (None, None, Visibility::Attached) => " attached".into(),
            (None, None, Visibility::Visible) => String::new(),
        }
    }
}

/// Which elements count as there (Playwright's `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// In the document, seen or not.
    Attached,
    /// In the document with a box of some size, not `visibility: hidden`.
    Visible,
    /// Not there, or not visible.
    Hidden,
}

impl Visibility {
    pub fn name(self) -> &'static str {
        match self {
            Visibility::Attached => "attached",
            Visibility::Visible => "visible",
            Visibility::Hidden => "hidden",
        }
    }
}

impl Action {
    /// The step's default name: the action and what it acts on (`click #add`).
    pub fn name(&self) -> String {
        match self {
            Action::Goto(path) => format!("goto {path}"),
            Action::Click(s) => format!("click {s}"),
            Action::Fill { selector, .. } => format!("fill {selector}"),
            Action::Press { selector, key } => format!("press {selector} {key}"),
            Action::WaitForSelector(s) => format!("waitForSelector {}{}", s.selector, s.check()),
            Action::Expect(s) => format!("expect {}{}", s.selector, s.check()),
        }
    }
}

impl Flow {
    /// Whether the flow drives a browser page (`engine: browser`): it has browser actions.
    pub fn is_browser(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|s| match &s.kind {
                StepKind::Browser(_) => true,
                StepKind::Loop(l) => any(&l.steps),
                _ => false,
            })
        }
        any(&self.steps)
    }
}

/// `audit: { collection, subscription, params, settle, timeout }`: once no write of any user is in
/// flight and the user's connection has been quiet for `settle`, its local cache (of `collection`,
/// or of every collection) is compared with the truth, read over a fresh connection of its own
/// that subscribes as the user did (to `subscription` alone when named, with `params` when given).
#[derive(Debug, Clone, PartialEq)]
pub struct Audit {
    pub collection: Option<String>,
    pub subscription: Option<String>,
    pub params: Option<Vec<Value>>,
    pub settle: Duration,
    pub timeout: Duration,
}

/// How long a user's connection must be quiet before its cache is compared (`settle:`).
pub const AUDIT_SETTLE: Duration = Duration::from_millis(200);
/// How long a checkpoint waits for quiescence and the truth (`timeout:`).
pub const AUDIT_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for Audit {
    fn default() -> Self {
        Audit { collection: None, subscription: None, params: None, settle: AUDIT_SETTLE, timeout: AUDIT_TIMEOUT }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    /// EJSON params; strings may hold `{{ variable }}`.
    pub params: Vec<Value>,
    pub capture: Option<Capture>,
    pub expect: Option<Expect>,
    pub timeout: Option<Duration>,
    /// `noRetry: true`: not sent again after a reconnection (Meteor's `noRetry` option); the
    /// step fails instead.
    pub no_retry: bool,
}

/// Where a method's result goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub var: String,
    /// A dotted path into the result (`a.b.0`), or the whole result.
    pub path: Option<String>,
    /// Append to a list instead of replacing.
    pub append: bool,
}

/// A check on a method's result (an array of documents): one matching `where` is there, or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    pub contains: bool,
    pub fields: Vec<(String, Value)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Login {
    pub user: Option<Value>,
    pub password: Option<Value>,
    pub resume: Option<Value>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WaitFor {
    pub collection: String,
    /// Field equalities a document must meet (`_id` matches the document id).
    pub fields: Vec<(String, Value)>,
    pub until: Until,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// A matching document is there (already, or when it arrives).
    Matches,
    /// A matching document arrives after the step starts.
    Appears,
    /// A matching document changes after the step starts.
    Changes,
    /// No matching document is left.
    Disappears,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    Fixed(Duration),
    Between(Duration, Duration),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Loop {
    pub over: LoopOver,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LoopOver {
    Count(u64),
    /// Again and again until the user's closed phase ends (`ddp-calls`' users).
    UntilPhaseEnd,
    /// A literal list, or a variable (`{{ name }}`) holding one.
    List(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpStep {
    pub method: String,
    /// Absolute, or a path joined to the target.
    pub url: String,
    pub body: Option<Value>,
    /// The statuses that pass the step (`expect: 200`, `expect: { status: 200-299,404 }`;
    /// 200-399 by default); any other fails it with class `status`.
    pub expect_status: crate::proto::http::expect::StatusSet,
    pub timeout: Option<Duration>,
    /// `http2: true`: HTTP/2 (ALPN `h2` for https://, prior knowledge for http://).
    pub http2: bool,
}

impl Scenario {
    /// Every step name in order of first appearance (for reports).
    pub fn step_names(&self) -> Vec<String> {
        fn walk(steps: &[Step], out: &mut Vec<String>) {
            for s in steps {
                if let StepKind::Loop(l) = &s.kind {
                    walk(&l.steps, out);
                } else if !matches!(s.kind, StepKind::Think(_) | StepKind::Set(_) | StepKind::Audit(_))
                    && !out.contains(&s.name)
                {
                    out.push(s.name.clone());
                }
            }
        }
        let mut out = Vec::new();
        for f in &self.flows {
            walk(&f.steps, &mut out);
        }
        out
    }

    /// Calls `f` with every step of the flows, loops' steps included, in order.
    pub fn each_step<'s>(&'s self, f: &mut dyn FnMut(&'s Step)) {
        for flow in &self.flows {
            each_in(&flow.steps, f);
        }
    }

    /// The recorders' step names with whether each is a method call (whose result and updated
    /// times are kept); a run that reconnects has a `reconnect` step too.
    pub fn recorded_steps(&self) -> Vec<(String, bool)> {
        let mut out: Vec<(String, bool)> = Vec::new();
        self.each_step(&mut |step| {
            // A checkpoint is no step of the server's: its time (a barrier, quiet, the truth) is
            // the audit's, kept out of the steps' latency.
            let measured = !matches!(step.kind, StepKind::Think(_) | StepKind::Set(_) | StepKind::Audit(_));
            if measured && !out.iter().any(|(n, _)| n == &step.name) {
                out.push((step.name.clone(), step.kind.is_call()));
            }
        });
        if self.config.ddp.reconnect {
            out.push(("reconnect".into(), false));
        }
        out
    }

    /// The names of the subscribe steps, and of the method-call steps (login included): what
    /// subscriptions and calls per minute count.
    pub fn subscribe_and_call_steps(&self) -> (Vec<String>, Vec<String>) {
        let (mut subs, mut calls) = (Vec::new(), Vec::new());
        self.each_step(&mut |step| match step.kind {
            StepKind::Subscribe { .. } => subs.push(step.name.clone()),
            _ if step.kind.is_call() => calls.push(step.name.clone()),
            _ => {}
        });
        (subs, calls)
    }
}

/// Calls `f` with every step of `steps`, loops' steps included, in order.
pub fn each_in<'s>(steps: &'s [Step], f: &mut dyn FnMut(&'s Step)) {
    for s in steps {
        if let StepKind::Loop(l) = &s.kind {
            each_in(&l.steps, f);
        } else {
            f(s);
        }
    }
}

impl StepKind {
    /// A method call (a login is one): its answer lost on a closed connection is resent after
    /// the reconnection, as Meteor's client resends it.
    pub fn is_call(&self) -> bool {
        matches!(self, StepKind::Call(_) | StepKind::Login(_))
    }

    /// A call the scenario says is never resent (`noRetry`).
    pub fn no_retry(&self) -> bool {
        matches!(self, StepKind::Call(Call { no_retry: true, .. }))
    }
}

/// The default metric name of a step.
pub fn default_step_name(kind: &StepKind) -> String {
    match kind {
        StepKind::Connect => "connect".into(),
        StepKind::Login(_) => "login".into(),
        StepKind::Call(c) => format!("call {}", c.method),
        StepKind::Subscribe { name, .. } => format!("subscribe {name}"),
        StepKind::Unsubscribe { name } => format!("unsubscribe {name}"),
        StepKind::WaitFor(w) => format!("waitFor {}", w.collection),
        StepKind::Think(_) => "think".into(),
        StepKind::Set(_) => "set".into(),
        StepKind::Loop(_) => "loop".into(),
        StepKind::Disconnect => "disconnect".into(),
        StepKind::Http(h) => format!("{} {}", h.method, h.url),
        StepKind::Audit(a) => match &a.collection {
            Some(c) => format!("audit {c}"),
            None => "audit".into(),
        },
        StepKind::Browser(a) => a.name(),
        StepKind::Emit(e) => {
            let channel = match e.args.first() {
                Some(Value::String(c)) => c.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            match &e.namespace {
                Some(n) => format!("emit {channel} {n}"),
                None => format!("emit {channel}"),
            }
        }
        StepKind::Listen(l) => format!("listen {}", l.channel),
        StepKind::Execute(x) => operation_name(&x.query),
        StepKind::GqlSubscribe(g) => {
            format!("subscribe {}", operation_name(&g.query).trim_start_matches("subscription "))
        }
        StepKind::Complete { name } => match name {
            Some(n) => format!("complete {n}"),
            None => "complete".into(),
        },
        StepKind::Stream(s) if s.url.is_empty() => "stream".into(),
        StepKind::Stream(s) => format!("stream {}", s.url),
        StepKind::Chat(c) => match (&c.url, c.prompt.is_some()) {
            (Some(u), _) => format!("chat {u}"),
            (None, true) => "completion".into(),
            (None, false) => "chat".into(),
        },
    }
}

impl Scenario {
    /// Whether any flow's users are of this engine.
    pub fn has_engine(&self, engine: Engine) -> bool {
        self.flows.iter().any(|f| f.engine == engine)
    }

    /// Whether any flow runs in a browser.
    pub fn has_browsers(&self) -> bool {
        self.flows.iter().any(Flow::is_browser)
    }
}

impl Scenario {
    /// Whether any flow has a checkpoint (an `audit` step, at any depth).
    pub fn audits(&self) -> bool {
        fn any(steps: &[Step]) -> bool {
            steps.iter().any(|s| match &s.kind {
                StepKind::Audit(_) => true,
                StepKind::Loop(l) => any(&l.steps),
                _ => false,
            })
        }
        self.flows.iter().any(|f| any(&f.steps))
    }

    /// `--audit`: a checkpoint of every collection before each `disconnect` of a flow that
    /// subscribes, and at the end of such a flow when it does not end with one (the user's cache
    /// is still there when the flow ends). A flow that already has a checkpoint just before is
    /// left as it is.
    pub fn add_audits(&mut self) {
        fn subscribes(steps: &[Step]) -> bool {
            steps.iter().any(|s| match &s.kind {
                StepKind::Subscribe { .. } => true,
                StepKind::Loop(l) => subscribes(&l.steps),
                _ => false,
            })
        }
        fn checkpoint() -> Step {
            let kind = StepKind::Audit(Audit::default());
            Step { name: default_step_name(&kind), kind }
        }
        fn before_disconnects(steps: &mut Vec<Step>) {
            let mut out = Vec::with_capacity(steps.len() + 1);
            for mut s in steps.drain(..) {
                if let StepKind::Loop(l) = &mut s.kind {
                    before_disconnects(&mut l.steps);
                }
                let audited = matches!(out.last(), Some(Step { kind: StepKind::Audit(_), .. }));
                if matches!(s.kind, StepKind::Disconnect) && !audited {
                    out.push(checkpoint());
                }
                out.push(s);
            }
            *steps = out;
        }
        /// Whether a walk of `steps` ends on a disconnect or a checkpoint (a loop's last step).
        fn ends_checked(steps: &[Step]) -> bool {
            match steps.last().map(|s| &s.kind) {
                Some(StepKind::Disconnect | StepKind::Audit(_)) => true,
                Some(StepKind::Loop(l)) => ends_checked(&l.steps),
                _ => false,
            }
        }
        for flow in &mut self.flows {
            if !subscribes(&flow.steps) {
                continue;
            }
            before_disconnects(&mut flow.steps);
            if !ends_checked(&flow.steps) {
                flow.steps.push(checkpoint());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_checks_of_one_selector_are_two_names() {
        let sel = |count, text: Option<&str>, state| Selector {
            selector: "#tasks li".into(),
            count,
            text: text.map(|t| Value::String(t.into())),
            state,
            timeout: None,
        };
        let names: Vec<String> = [
            Action::Expect(sel(Some(5), None, Visibility::Visible)),
            Action::Expect(sel(None, None, Visibility::Hidden)),
            Action::Expect(sel(None, Some("ok"), Visibility::Visible)),
            Action::WaitForSelector(sel(None, None, Visibility::Visible)),
            Action::WaitForSelector(sel(None, None, Visibility::Attached)),
        ]
        .iter()
        .map(Action::name)
        .collect();
        assert_eq!(
            names,
            [
                "expect #tasks li count 5",
                "expect #tasks li hidden",
                "expect #tasks li text \"ok\"",
                "waitForSelector #tasks li",
                "waitForSelector #tasks li attached"
            ]
        );
    }

    fn phase(secs: u64, kind: PhaseKind) -> Phase {
        Phase { name: None, duration: Duration::from_secs(secs), kind, burstiness: None }
    }

    #[test]
    fn phases_are_cut_and_re_rated() {
        let rate = |per_s, ramp_to| PhaseKind::Rate { per_s, ramp_to };
        let file = vec![
            phase(60, rate(4.0, None)),
            phase(30, rate(4.0, Some(8.0))),
            phase(10, PhaseKind::Count(50)),
            phase(5, PhaseKind::Pause),
        ];
        // (rate, duration s, expected phases)
        let rows: Vec<(Option<f64>, Option<u64>, Vec<Phase>)> = vec![
            // Nothing given: the file as written.
            (None, None, file.clone()),
            // Cut inside the first phase: only it, shortened.
            (None, Some(2), vec![phase(2, rate(4.0, None))]),
            // Cut half-way through the ramp: the ramp ends where it was cut.
            (None, Some(75), vec![phase(60, rate(4.0, None)), phase(15, rate(4.0, Some(6.0)))]),
            // Cut inside the count phase: its share of the users.
            (None, Some(94), vec![file[0].clone(), file[1].clone(), phase(4, PhaseKind::Count(20))]),
            // Longer than the file: unchanged.
            (None, Some(500), file.clone()),
            // A rate for every rate phase, ramps dropped; counts and pauses stay.
            (
                Some(2.0),
                None,
                vec![phase(60, rate(2.0, None)), phase(30, rate(2.0, None)), file[2].clone(), file[3].clone()],
            ),
            // Both: the README's example shortened for a test.
            (Some(3.0), Some(1), vec![phase(1, rate(3.0, None))]),
        ];
        for (i, (r, d, want)) in rows.into_iter().enumerate() {
            let mut phases = file.clone();
            override_phases(&mut phases, r, d.map(Duration::from_secs));
            assert_eq!(phases, want, "row {i}");
        }
    }
}

#[cfg(test)]
mod audit_tests {
    use super::*;

    fn step(kind: StepKind) -> Step {
        Step { name: default_step_name(&kind), kind }
    }

    fn names(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match &s.kind {
                StepKind::Loop(l) => format!("loop[{}]", names(&l.steps).join(", ")),
                _ => s.name.clone(),
            })
            .collect()
    }

    #[test]
    fn audit_adds_a_checkpoint_before_each_disconnect_and_at_the_end_of_flows_that_subscribe() {
        let sub = || step(StepKind::Subscribe { name: "tasks".into(), params: vec![], capture: None, timeout: None });
        let churn = vec![step(StepKind::Loop(Loop {
            over: LoopOver::Count(3),
            steps: vec![step(StepKind::Connect), sub(), step(StepKind::Disconnect)],
        }))];
        let open_ended = vec![step(StepKind::Connect), sub()];
        let audited =
            vec![step(StepKind::Connect), sub(), step(StepKind::Audit(Audit::default())), step(StepKind::Disconnect)];
        let no_subs = vec![step(StepKind::Connect), step(StepKind::Disconnect)];
        let flow = |steps| Flow { name: "f".into(), weight: 1, steps, engine: Engine::Ddp };
        let mut s = Scenario {
            config: builtin::tasks_reactive(&builtin::Knobs::default()).config,
            flows: vec![flow(churn), flow(open_ended), flow(audited), flow(no_subs)],
        };
        assert!(!Scenario { flows: vec![s.flows[0].clone()], ..s.clone() }.audits());
        s.add_audits();
        assert!(s.audits());
        let got: Vec<Vec<String>> = s.flows.iter().map(|f| names(&f.steps)).collect();
        assert_eq!(
            got,
            [
                vec!["loop[connect, subscribe tasks, audit, disconnect]".to_string()],
                vec!["connect".into(), "subscribe tasks".into(), "audit".into()],
                vec!["connect".into(), "subscribe tasks".into(), "audit".into(), "disconnect".into()],
                vec!["connect".into(), "disconnect".into()],
            ]
        );
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;

    #[test]
    fn targets_with_weights() {
        let t = TargetSpec::parse("http://127.0.0.1:3001=3").unwrap();
        assert_eq!((t.url.as_str(), t.weight), ("http://127.0.0.1:3001", 3));
        assert_eq!(t.shown(), "http://127.0.0.1:3001=3");
        assert_eq!(TargetSpec::parse("http://h:1/app?x=1").unwrap().weight, 1, "a query's = is the URL's");
        for bad in
            ["http://h:1=0", "http://h:1=-2", "http://h:1=1.5", "http://h:1=lots", "http://h:1=1001", "ftp://h/", "h:1"]
        {
            assert!(TargetSpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            TargetSpec::parse("http://h:1=abc").unwrap_err(),
            "target \"http://h:1=abc\": the weight \"abc\" must be a whole number from 1 to 1000"
        );
    }

    #[test]
    fn users_split_by_weight() {
        assert_eq!(target_cycle(&[1]), [0]);
        assert_eq!(target_cycle(&[1, 1]), [0, 1]);
        assert_eq!(target_cycle(&[3, 1]), [0, 0, 1, 0]);
        let c = target_cycle(&[5, 3, 2]);
        for (i, w) in [5, 3, 2].iter().enumerate() {
            assert_eq!(c.iter().filter(|t| **t == i).count(), *w);
        }
        let dup = [TargetSpec::parse("http://h:1/").unwrap(), TargetSpec::parse("http://h:1").unwrap()];
        assert_eq!(check_targets(&dup).len(), 1);
    }
}

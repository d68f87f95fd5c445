//! Scenario files: YAML in Artillery's shape, read into [`Scenario`] with every problem reported
//! at once as `file:line:column: what is wrong`, with what was expected and a hint where one helps
//! ("did you mean ...?"). Nothing runs until the whole file is valid.
//!
//! The YAML is read with saphyr-parser's event stream into a small tree that keeps each node's
//! position (anchors and aliases included), then converted by hand, so that errors can point at
//! the exact key or value.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

use super::template::all_placeholders;
use super::*;
use crate::proto::http::expect::StatusSet;
use crate::threshold::{Source, Threshold};

/// A YAML node with its position (line 1-based, column 1-based).
#[derive(Debug, Clone)]
pub struct Node {
    pub line: usize,
    pub col: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

/// One problem in a scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: usize,
    pub col: usize,
    pub message: String,
    pub hint: Option<String>,
}

/// Every problem of a file, shown one per line as `file:line:col: message (hint)`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    pub file: String,
    pub problems: Vec<Problem>,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            // A URL in a message may carry a password.
            write!(f, "{}:{}:{}: {}", self.file, p.line, p.col, crate::redact::text(&p.message))?;
            if let Some(h) = &p.hint {
                write!(f, "\n    hint: {h}")?;
            }
        }
        Ok(())
    }
}

fn resolve_plain(s: &str) -> Kind {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => Kind::Null,
        "true" | "True" | "TRUE" => Kind::Bool(true),
        "false" | "False" | "FALSE" => Kind::Bool(false),
        _ => {
            if let Ok(i) = s.parse::<i64>() {
                Kind::Int(i)
            } else if let (Ok(f), true) = (s.parse::<f64>(), s.chars().any(|c| c.is_ascii_digit())) {
                Kind::Float(f)
            } else {
                Kind::Str(s.to_string())
            }
        }
    }
}

/// The largest scenario file read, in bytes (payload rows live in their CSV file, not here).
pub const MAX_FILE_BYTES: usize = 4 << 20;
/// The most nodes a scenario may hold once aliases are expanded: a file of nested aliases
/// ("billion laughs") stops here instead of growing without bound.
pub const MAX_NODES: usize = 200_000;
/// The deepest nesting of lists and mappings.
pub const MAX_DEPTH: usize = 64;

/// Nodes in a tree (itself included) and its depth (1 for a scalar).
fn size(node: &Node) -> (usize, usize) {
    let children: Vec<(usize, usize)> = match &node.kind {
        Kind::Seq(items) => items.iter().map(size).collect(),
        Kind::Map(pairs) => pairs.iter().flat_map(|(k, v)| [size(k), size(v)]).collect(),
        _ => vec![],
    };
    (1 + children.iter().map(|c| c.0).sum::<usize>(), 1 + children.iter().map(|c| c.1).max().unwrap_or(0))
}

/// Parses YAML text into a tree; a syntax error comes back as a problem with its position. One
/// document per file, no duplicate keys, at most [`MAX_FILE_BYTES`] and [`MAX_NODES`].
pub fn parse(text: &str) -> Result<Node, Problem> {
    enum Open {
        Seq(Node, usize),
        /// The node, its pairs, a key waiting for its value, the anchor, the keys seen.
        Map(Node, Vec<(Node, Node)>, Option<Node>, usize, HashMap<String, (usize, usize)>),
    }
    if text.len() > MAX_FILE_BYTES {
        return Err(Problem {
            line: 1,
            col: 1,
            message: format!("the file has {} bytes; a scenario file may have at most {MAX_FILE_BYTES}", text.len()),
            hint: Some("large data belongs in a config.payload CSV file".into()),
        });
    }
    let mut stack: Vec<Open> = Vec::new();
    // Each anchor's node, its size and its depth.
    let mut anchors: HashMap<usize, (Node, (usize, usize))> = HashMap::new();
    let mut nodes = 0usize;
    let mut root: Option<Node> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| Problem {
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: format!("YAML syntax: {}", e.info()),
            hint: None,
        })?;
        let (line, col) = (span.start.line(), span.start.col() + 1);
        let done: Option<(Node, usize)> = match event {
            Event::DocumentStart(_) if root.is_some() => {
                return Err(Problem {
                    line,
                    col,
                    message: "a second YAML document begins here; a scenario file holds one".into(),
                    hint: Some("put each scenario in a file of its own, or list its flows under one scenarios:".into()),
                })
            }
            Event::Scalar(value, style, anchor, _) => {
                let kind =
                    if style == ScalarStyle::Plain { resolve_plain(&value) } else { Kind::Str(value.into_owned()) };
                Some((Node { line, col, kind }, anchor))
            }
            Event::Alias(id) => match anchors.get(&id) {
                Some((n, (n_size, n_depth))) => {
                    if stack.len() + n_depth > MAX_DEPTH {
                        return Err(Problem {
                            line,
                            col,
                            message: format!("this alias nests lists and mappings deeper than {MAX_DEPTH} levels"),
                            hint: None,
                        });
                    }
                    // The alias's copy counts; its own node is counted below.
                    nodes += n_size - 1;
                    if nodes >= MAX_NODES {
                        return Err(Problem {
                            line,
                            col,
                            message: format!(
                                "aliases expand this file beyond {MAX_NODES} values; a scenario file may hold at most that"
                            ),
                            hint: Some("nested anchors and aliases multiply; write the values out or use fewer".into()),
                        });
                    }
                    Some((Node { line, col, ..n.clone() }, 0))
                }
                None => return Err(Problem { line, col, message: "alias of an unknown anchor".into(), hint: None }),
            },
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(Problem {
                    line,
                    col,
                    message: format!("lists and mappings nest deeper than {MAX_DEPTH} levels here"),
                    hint: None,
                })
            }
            Event::SequenceStart(anchor, _) => {
                stack.push(Open::Seq(Node { line, col, kind: Kind::Seq(vec![]) }, anchor));
                None
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Open::Map(Node { line, col, kind: Kind::Null }, vec![], None, anchor, HashMap::new()));
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq(n, anchor)) => Some((n, anchor)),
                _ => None,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map(mut n, pairs, _, anchor, _)) => {
                    n.kind = Kind::Map(pairs);
                    Some((n, anchor))
                }
                _ => None,
            },
            _ => None,
        };
        let Some((node, anchor)) = done else { continue };
        nodes += 1;
        if nodes >= MAX_NODES {
            return Err(Problem {
                line,
                col,
                message: format!("this file holds more than {MAX_NODES} values; a scenario file may hold at most that"),
                hint: Some("large data belongs in a config.payload CSV file".into()),
            });
        }
        if anchor != 0 {
            anchors.insert(anchor, (node.clone(), size(&node)));
        }
        match stack.last_mut() {
            Some(Open::Seq(parent, _)) => {
                if let Kind::Seq(items) = &mut parent.kind {
                    items.push(node);
                }
            }
            Some(Open::Map(_, pairs, key, _, seen)) => match key.take() {
                None => {
                    if let Some((l, c)) = seen.insert(node.to_json().to_string(), (node.line, node.col)) {
                        return Err(Problem {
                            line: node.line,
                            col: node.col,
                            message: format!("duplicate key \"{}\" (first at line {l}, column {c})", node.key_text()),
                            hint: Some("a mapping may have each key once; the second would silently win".into()),
                        });
                    }
                    *key = Some(node)
                }
                Some(k) => pairs.push((k, node)),
            },
            None => {
                if root.is_none() {
                    root = Some(node);
                }
            }
        }
    }
    Ok(root.unwrap_or(Node { line: 1, col: 1, kind: Kind::Null }))
}

impl Node {
    fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "nothing",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) | Kind::Float(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }

    /// The node as JSON (for params and values).
    pub fn to_json(&self) -> Value {
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Int(i) => Value::from(*i),
            Kind::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Kind::Str(s) => Value::String(s.clone()),
            Kind::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Kind::Map(pairs) => Value::Object(pairs.iter().map(|(k, v)| (k.key_text(), v.to_json())).collect()),
        }
    }

    fn key_text(&self) -> String {
        match &self.kind {
            Kind::Str(s) => s.clone(),
            Kind::Null => String::new(),
            _ => self.to_json().to_string(),
        }
    }
}

/// Edit distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `options` to `word`, if close enough to be a likely typo.
fn closest<'a>(word: &str, options: &[&'a str]) -> Option<&'a str> {
    options
        .iter()
        .map(|o| (distance(word, o), *o))
        .filter(|(d, o)| *d <= 2.max(o.len() / 4) || o.to_lowercase() == word.to_lowercase())
        .min_by_key(|(d, _)| *d)
        .map(|(_, o)| o)
}

/// Collects problems while reading.
struct Reader {
    problems: Vec<Problem>,
    /// Variables a template may use (collected while reading, checked at the end).
    known_vars: Vec<String>,
    used_vars: Vec<(usize, usize, String)>,
    /// Which client the flow being read is for (`engine:`).
    engine: Engine,
    /// Whether the file gives the step timeout (`config.timeout`, `config.ddp.stepTimeout`).
    timeout_given: bool,
    /// `config.sse` and `config.llm`, which every SSE flow's steps carry.
    sse: SseDefaults,
}

/// What `config.sse` and `config.llm` give each `stream` and `chat` step.
#[derive(Default)]
struct SseDefaults {
    headers: Vec<(String, String)>,
    /// None: no reconnection (`reconnect: false`); EventSource's 3 s wait by default.
    reconnect: Option<Duration>,
    model: Option<String>,
    goodput: Vec<(String, Duration)>,
    /// `config.sse.http2`: streams and chats over HTTP/2 unless a step says otherwise.
    http2: bool,
}

/// A mapping being read: its pairs by key, and which keys were looked at.
struct Map<'a> {
    node: &'a Node,
    what: &'static str,
    pairs: Vec<(&'a str, &'a Node, &'a Node)>,
}

impl Reader {
    fn problem(&mut self, at: &Node, message: impl Into<String>, hint: Option<String>) {
        self.problems.push(Problem { line: at.line, col: at.col, message: message.into(), hint });
    }

    /// Reads `node` as a mapping with the allowed keys; unknown keys are reported with a hint.
    fn map<'a>(&mut self, node: &'a Node, what: &'static str, allowed: &[&str]) -> Option<Map<'a>> {
        let Kind::Map(pairs) = &node.kind else {
            self.problem(node, format!("{what} must be a mapping, not {}", node.type_name()), None);
            return None;
        };
        let mut out = Vec::new();
        for (k, v) in pairs {
            let Kind::Str(key) = &k.kind else {
                self.problem(k, format!("keys of {what} must be names"), None);
                continue;
            };
            if !allowed.contains(&key.as_str()) {
                let hint = match closest(key, allowed) {
                    Some(c) => format!("did you mean \"{c}\"? {what} takes: {}", allowed.join(", ")),
                    None => format!("{what} takes: {}", allowed.join(", ")),
                };
                self.problem(k, format!("unknown key \"{key}\" in {what}"), Some(hint));
                continue;
            }
            out.push((key.as_str(), k, v));
        }
        Some(Map { node, what, pairs: out })
    }

    fn templates(&mut self, node: &Node) {
        for name in all_placeholders(&node.to_json()) {
            self.used_vars.push((node.line, node.col, name));
        }
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match &node.kind {
            Kind::Str(s) => {
                self.templates(node);
                Some(s.clone())
            }
            Kind::Int(_) | Kind::Float(_) | Kind::Bool(_) => Some(node.to_json().to_string()),
            _ => {
                self.problem(node, format!("{what} must be a string, not {}", node.type_name()), None);
                None
            }
        }
    }

    fn number(&mut self, node: &Node, what: &str) -> Option<f64> {
        match node.kind {
            Kind::Int(i) => Some(i as f64),
            Kind::Float(f) => Some(f),
            _ => {
                self.problem(node, format!("{what} must be a number, not {}", node.type_name()), None);
                None
            }
        }
    }

    fn positive(&mut self, node: &Node, what: &str) -> Option<f64> {
        let n = self.number(node, what)?;
        if n > 0.0 && n.is_finite() {
            Some(n)
        } else {
            self.problem(node, format!("{what} must be above zero, not {n}"), None);
            None
        }
    }

    fn count(&mut self, node: &Node, what: &str) -> Option<u64> {
        match node.kind {
            Kind::Int(i) if i >= 0 => Some(i as u64),
            _ => {
                self.problem(
                    node,
                    format!("{what} must be a whole number of at least 0, not {}", node.type_name()),
                    None,
                );
                None
            }
        }
    }

    /// The statuses an HTTP step expects: `200`, text like `"200-299,404"`, or a list of codes
    /// and ranges (`[200-299, 404]`).
    fn status_set(&mut self, node: &Node) -> Option<StatusSet> {
        let one = |n: &Node| match &n.kind {
            Kind::Int(i) => Some(i.to_string()),
            Kind::Str(s) => Some(s.clone()),
            _ => None,
        };
        let text = match &node.kind {
            Kind::Seq(items) if !items.is_empty() => {
                items.iter().map(one).collect::<Option<Vec<_>>>().map(|v| v.join(","))
            }
            _ => one(node),
        };
        let Some(text) = text else {
            let what = format!(
                "expected statuses must be a code, text like \"200-299,404\" or a list, not {}",
                node.type_name()
            );
            self.problem(node, what, None);
            return None;
        };
        StatusSet::parse(&text)
            .map_err(|e| self.problem(node, format!("expected statuses {e}"), Some("e.g. 200, or 200-299,404".into())))
            .ok()
    }

    fn boolean(&mut self, node: &Node, what: &str) -> Option<bool> {
        match node.kind {
            Kind::Bool(b) => Some(b),
            _ => {
                self.problem(node, format!("{what} must be true or false, not {}", node.type_name()), None);
                None
            }
        }
    }

    /// A duration: a number of seconds, or text like `500ms`, `30s`, `2m`.
    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        let d = match &node.kind {
            Kind::Int(i) => Some(seconds(*i as f64)),
            Kind::Float(f) => Some(seconds(*f)),
            Kind::Str(s) => humantime::parse_duration(s.trim()).ok().map(|d| Some(d).filter(|d| *d <= MAX_DURATION)),
            _ => None,
        };
        match d {
            Some(Some(d)) => return Some(d),
            Some(None) => {
                self.problem(node, format!("{what} is out of range: a duration must be {}", duration_range()), None)
            }
            None => self.problem(node, format!("{what} must be a duration (seconds, or e.g. 500ms, 30s, 2m)"), None),
        }
        None
    }

    /// A rate per second within [`check_rate`]'s range (0 allowed when `zero_ok`).
    fn rate(&mut self, node: &Node, what: &str, zero_ok: bool) -> Option<f64> {
        let n = self.number(node, what)?;
        if zero_ok && n == 0.0 {
            return Some(0.0);
        }
        match check_rate(n) {
            Ok(n) => Some(n),
            Err(why) => {
                self.problem(node, format!("{what} {why}"), None);
                None
            }
        }
    }

    fn fields(&mut self, node: &Node, what: &'static str) -> Vec<(String, Value)> {
        let Kind::Map(pairs) = &node.kind else {
            self.problem(node, format!("{what} must be a mapping of field: value"), None);
            return vec![];
        };
        self.templates(node);
        pairs.iter().map(|(k, v)| (k.key_text(), v.to_json())).collect()
    }
}

impl<'a> Map<'a> {
    fn get(&self, key: &str) -> Option<&'a Node> {
        self.pairs.iter().find(|(k, _, _)| *k == key).map(|(_, _, v)| *v)
    }

    fn require(&self, r: &mut Reader, key: &str) -> Option<&'a Node> {
        let v = self.get(key);
        if v.is_none() {
            r.problem(self.node, format!("{} needs \"{key}\"", self.what), None);
        }
        v
    }
}

const CONFIG_KEYS: &[&str] = &[
    "target",
    "phases",
    "maxVusers",
    "variables",
    "payload",
    "ensure",
    "ddp",
    "browser",
    "socketio",
    "graphql",
    "sse",
    "llm",
    "timeout",
    "audit",
];
const SSE_KEYS: &[&str] = &["headers", "reconnect", "retry", "http2"];
const LLM_KEYS: &[&str] = &["model", "goodput"];
const SOCKETIO_KEYS: &[&str] =
    &["path", "query", "extraHeaders", "transports", "auth", "fanoutField", "perMessageDeflate"];
const GRAPHQL_KEYS: &[&str] = &["path", "connectionParams", "headers", "fanoutField", "perMessageDeflate"];
const PHASE_KEYS: &[&str] =
    &["duration", "arrivalRate", "rampTo", "arrivalCount", "users", "pause", "name", "poisson", "burstiness"];
const DDP_KEYS: &[&str] =
    &["transport", "compression", "cache", "fanoutField", "stepTimeout", "userTimeout", "reconnect"];
const ENSURE_KEYS: &[&str] = &["maxErrorRate", "max", "p95", "p99", "steps", "thresholds"];
const STEP_TYPES: &[&str] = &[
    "connect",
    "login",
    "call",
    "subscribe",
    "unsubscribe",
    "waitFor",
    "think",
    "set",
    "loop",
    "disconnect",
    "get",
    "post",
    "audit",
    "goto",
    "click",
    "fill",
    "press",
    "waitForSelector",
    "expect",
    "emit",
    "listen",
    "execute",
    "complete",
    "stream",
    "chat",
];
/// The steps of a Socket.IO flow, and of a graphql-ws flow, beyond the flow's own and HTTP's.
const SOCKETIO_STEPS: &[&str] = &["connect", "disconnect", "emit", "listen", "get", "post"];
const GRAPHQL_STEPS: &[&str] = &["connect", "disconnect", "execute", "subscribe", "complete", "get", "post"];
/// The steps of an SSE flow.
const SSE_STEPS: &[&str] = &["connect", "disconnect", "stream", "chat", "listen", "get", "post"];
/// A DDP flow's own steps.
const DDP_STEPS: &[&str] =
    &["connect", "login", "call", "subscribe", "unsubscribe", "waitFor", "disconnect", "get", "post", "audit"];
/// The steps of a browser flow (`engine: browser`): its page's actions, and the flow's own.
const BROWSER_STEPS: &[&str] = &["goto", "click", "fill", "press", "waitForSelector", "expect"];
const FLOW_STEPS: &[&str] = &["think", "set", "loop"];
/// Variables every user has.
const BUILTIN_VARS: &[&str] =
    &["$vuId", "$randomId", "$now", "$arrival", "$loopCount", "$loopIndex", "$loopElement", "loginToken", "userId"];

/// Reads a scenario file.
pub fn load_file(path: &Path) -> Result<Scenario, LoadError> {
    load_file_with(path, &[])
}

/// [`load_file`], with variables the command line gives (`bench --parameter-list`) known to the
/// templates besides the file's own.
pub fn load_file_with(path: &Path, given: &[String]) -> Result<Scenario, LoadError> {
    let file = path.display().to_string();
    let unreadable = |e: std::io::Error| LoadError {
        file: file.clone(),
        problems: vec![Problem { line: 1, col: 1, message: format!("cannot read the scenario file: {e}"), hint: None }],
    };
    // Read at most one byte past the limit, so that a huge file (or a device) is refused by
    // `parse` without being read whole.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_FILE_BYTES as u64 + 1), &mut bytes))
        .map_err(unreadable)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(LoadError {
            file,
            problems: vec![Problem {
                line: 1,
                col: 1,
                message: format!("the file is larger than {MAX_FILE_BYTES} bytes, the most a scenario file may have"),
                hint: Some("large data belongs in a config.payload CSV file".into()),
            }],
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        unreadable(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text ({e})")))
    })?;
    load_str_with(&text, &file, path.parent().unwrap_or(Path::new(".")), given)
}

/// Reads a scenario from text; `base` is where relative payload paths start.
pub fn load_str(text: &str, file: &str, base: &Path) -> Result<Scenario, LoadError> {
    load_str_with(text, file, base, &[])
}

fn load_str_with(text: &str, file: &str, base: &Path, given: &[String]) -> Result<Scenario, LoadError> {
    let fail = |problems| LoadError { file: file.to_string(), problems };
    let root = parse(text).map_err(|p| fail(vec![p]))?;
    let mut r = Reader {
        problems: vec![],
        known_vars: BUILTIN_VARS.iter().map(|s| s.to_string()).chain(given.iter().cloned()).collect(),
        used_vars: vec![],
        engine: Engine::Ddp,
        timeout_given: false,
        sse: SseDefaults { reconnect: Some(Duration::from_secs(3)), ..SseDefaults::default() },
    };
    let top = r.map(&root, "the scenario file", &["config", "scenarios"]);
    let config_node = top.as_ref().and_then(|m| m.require(&mut r, "config"));
    let scenarios_node = top.as_ref().and_then(|m| m.require(&mut r, "scenarios"));
    let config = config_node.and_then(|n| read_config(&mut r, n, base));
    let flows = scenarios_node.map(|n| read_flows(&mut r, n)).unwrap_or_default();
    // Templates may only use variables that exist.
    let known = r.known_vars.clone();
    for (line, col, name) in std::mem::take(&mut r.used_vars) {
        // A variable whose own name holds a dot or brackets is itself, not a path into another.
        if known.contains(&name) {
            continue;
        }
        if super::template::literal(&name).is_none() && super::template::path(&name).is_none() {
            r.problems.push(Problem {
                line,
                col,
                message: format!("\"{{{{ {name} }}}}\" is not a variable or a path into one"),
                hint: Some("an element is [N], a field .name: {{ ids[0] }}, {{ task.owner }}".into()),
            });
            continue;
        }
        let var = super::template::variable(&name).to_string();
        if !known.contains(&var) && super::template::literal(&name).is_none() {
            let name = var;
            let options: Vec<&str> = known.iter().map(String::as_str).collect();
            let hint = match closest(&name, &options) {
                Some(c) => format!("did you mean \"{{{{ {c} }}}}\"?"),
                None => format!(
                    "variables come from config.variables, config.payload fields, captures, and {}",
                    BUILTIN_VARS.join(", ")
                ),
            };
            r.problems.push(Problem {
                line,
                col,
                message: format!("\"{{{{ {name} }}}}\" is not a variable"),
                hint: Some(hint),
            });
        }
    }
    // Socket.IO's answers wait Artillery's 10 s unless the file says otherwise.
    let mut config = config;
    if let Some(c) = config.as_mut().filter(|_| !r.timeout_given && flows.iter().any(|f| f.engine == Engine::SocketIo))
    {
        c.step_timeout = Duration::from_secs(10);
    }
    if let (Some(config), true) = (config, r.problems.is_empty()) {
        if flows.is_empty() {
            let at = scenarios_node.unwrap_or(&root);
            r.problem(at, "scenarios must list at least one scenario with a flow", None);
        } else {
            return Ok(Scenario { config, flows });
        }
    }
    r.problems.sort_by_key(|p| (p.line, p.col));
    r.problems.dedup();
    Err(fail(r.problems))
}

fn read_config(r: &mut Reader, node: &Node, base: &Path) -> Option<Config> {
    let m = r.map(node, "config", CONFIG_KEYS)?;
    // One URL, or a list of them (users are spread over them; `URL=W` weighs one).
    let target_nodes: Vec<&Node> = match m.require(r, "target") {
        Some(Node { kind: Kind::Seq(items), .. }) if !items.is_empty() => items.iter().collect(),
        Some(n @ Node { kind: Kind::Seq(_), .. }) => {
            r.problem(n, "config.target must name at least one URL", None);
            Vec::new()
        }
        Some(n) => vec![n],
        None => Vec::new(),
    };
    let mut targets = Vec::new();
    for n in target_nodes {
        let Some(t) = r.string(n, "config.target") else { continue };
        let scheme = url::Url::parse(&t).map(|u| u.scheme().to_string());
        match (scheme, TargetSpec::parse(&t)) {
            (Ok(s), _) if s != "http" && s != "https" => r.problem(
                n,
                format!("config.target must be http:// or https://, not {s}://"),
                Some("the DDP endpoint is derived from it, as a browser would".into()),
            ),
            (_, Ok(spec)) => targets.push(spec),
            (_, Err(e)) => r.problem(n, format!("config.{e}"), None),
        }
    }
    if let Some(n) = m.get("target") {
        for e in check_targets(&targets) {
            r.problem(n, format!("config.{e}"), None);
        }
    }
    let target = (!targets.is_empty()).then_some(targets);
    let phases = match m.require(r, "phases") {
        Some(n @ Node { kind: Kind::Seq(items), .. }) if !items.is_empty() => {
            let phases: Vec<Phase> = items.iter().filter_map(|p| read_phase(r, p)).collect();
            let total: Duration = phases.iter().map(|p| p.duration).sum();
            if total > MAX_DURATION {
                r.problem(
                    n,
                    format!(
                        "the phases last {:.1} days in all; a run must last {}",
                        total.as_secs_f64() / 86_400.0,
                        duration_range()
                    ),
                    None,
                );
            }
            phases
        }
        Some(n) => {
            r.problem(
                n,
                "config.phases must be a non-empty list of phases",
                Some("e.g. - duration: 60\n            arrivalRate: 4".into()),
            );
            vec![]
        }
        None => vec![],
    };
    let max_vusers = m.get("maxVusers").and_then(|n| r.count(n, "config.maxVusers"));
    let mut variables = Vec::new();
    if let Some(n) = m.get("variables") {
        if let Kind::Map(pairs) = &n.kind {
            for (k, v) in pairs {
                let name = k.key_text();
                let values = match &v.kind {
                    Kind::Seq(items) => items.iter().map(Node::to_json).collect(),
                    _ => vec![v.to_json()],
                };
                r.known_vars.push(name.clone());
                variables.push((name, values));
            }
        } else {
            r.problem(n, "config.variables must be a mapping of name: [values]", None);
        }
    }
    let payload = m.get("payload").and_then(|n| read_payload(r, n, base));
    let ensure = m.get("ensure").map(|n| read_ensure(r, n)).unwrap_or_default();
    let (ddp, ddp_step_timeout, user_timeout) = m.get("ddp").map(|n| read_ddp(r, n)).unwrap_or_default();
    let mut browser = crate::browser::BrowserPlan::default();
    if let Some(m) = m.get("browser").and_then(|n| r.map(n, "config.browser", &["executable"])) {
        browser.executable = m.get("executable").and_then(|n| r.string(n, "config.browser.executable"));
    }
    // Artillery's `config.timeout` (seconds): how long a step may wait for its answer.
    let step_timeout = m
        .get("timeout")
        .and_then(|n| r.duration(n, "config.timeout"))
        .or(ddp_step_timeout)
        .unwrap_or(super::DEFAULT_STEP_TIMEOUT);
    r.timeout_given = m.get("timeout").is_some()
        || m.get("ddp")
            .is_some_and(|d| matches!(&d.kind, Kind::Map(p) if p.iter().any(|(k, _)| k.key_text() == "stepTimeout")));
    let socketio = m.get("socketio").map(|n| read_socketio(r, n)).unwrap_or_default();
    let graphql = m.get("graphql").map(|n| read_graphql(r, n)).unwrap_or_default();
    if let Some(n) = m.get("sse") {
        read_sse_config(r, n);
    }
    if let Some(n) = m.get("llm") {
        read_llm_config(r, n);
    }
    let audit_truth = m.get("audit").map(|n| read_audit_config(r, n)).unwrap_or_default();
    Some(Config {
        targets: target?,
        phases,
        max_vusers,
        variables,
        payload,
        ensure,
        ddp,
        step_timeout,
        user_timeout: user_timeout.unwrap_or(super::DEFAULT_USER_TIMEOUT),
        browser,
        socketio,
        graphql,
        audit_truth,
    })
}

/// Header names and values a config gives: a mapping of text, without CR or LF.
fn read_headers(r: &mut Reader, node: &Node, what: &str) -> Vec<(String, String)> {
    let Kind::Map(pairs) = &node.kind else {
        r.problem(node, format!("{what} must be a mapping of header: value"), None);
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in pairs {
        let name = k.key_text();
        let value = match &v.kind {
            Kind::Str(s) => s.clone(),
            Kind::Int(i) => i.to_string(),
            Kind::Float(f) => f.to_string(),
            Kind::Bool(b) => b.to_string(),
            _ => {
                r.problem(v, format!("{what}.{name} must be text"), None);
                continue;
            }
        };
        let token =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            r.problem(k, format!("{what}: {name:?} is not a header name"), None);
        } else if value.contains(['\r', '\n']) {
            r.problem(v, format!("{what}.{name} holds a line break"), None);
        } else {
            out.push((name, value));
        }
    }
    out
}

/// The keys `config.socketio` and `config.graphql` share: the path (a path, no query), the fan-out
/// field (`false`: none), whether permessage-deflate is offered; each None when not given.
#[allow(clippy::type_complexity)]
fn read_socket_keys(
    r: &mut Reader,
    m: &Map<'_>,
    what: &str,
    example: &str,
) -> (Option<String>, Option<Option<String>>, Option<bool>) {
    let path = m.get("path").and_then(|n| {
        let p = r.string(n, &format!("{what}.path"))?;
        if !p.starts_with('/') || p.contains(['?', '#', ' ']) {
            r.problem(n, format!("{what}.path {p:?} must be a path like {example}"), None);
        }
        Some(p)
    });
    let fanout = m.get("fanoutField").map(|n| match &n.kind {
        Kind::Null | Kind::Bool(false) => None,
        _ => r.string(n, "fanoutField"),
    });
    let deflate = m.get("perMessageDeflate").and_then(|n| r.boolean(n, "perMessageDeflate"));
    (path, fanout, deflate)
}

/// `config.socketio`: socket.io-client's options of the same names.
fn read_socketio(r: &mut Reader, node: &Node) -> crate::scenario::settings::SocketIoConfig {
    use crate::scenario::settings::{SioTransport, SocketIoConfig};
    let mut c = SocketIoConfig::default();
    let Some(m) = r.map(node, "config.socketio", SOCKETIO_KEYS) else { return c };
    let (path, fanout, deflate) = read_socket_keys(r, &m, "config.socketio", "/socket.io");
    c.path = path.unwrap_or(c.path);
    c.fanout_field = fanout.unwrap_or(c.fanout_field);
    c.compression = deflate.unwrap_or(c.compression);
    if let Some(q) = m.get("query") {
        c.query = match &q.kind {
            Kind::Str(s) => url::form_urlencoded::parse(s.trim_start_matches('?').as_bytes()).into_owned().collect(),
            Kind::Map(_) => read_headers(r, q, "config.socketio.query"),
            _ => {
                r.problem(q, "config.socketio.query must be text (a=1&b=2) or a mapping", None);
                Vec::new()
            }
        };
    }
    if let Some(h) = m.get("extraHeaders") {
        r.templates(h);
        c.headers = read_headers(r, h, "config.socketio.extraHeaders");
    }
    if let Some(t) = m.get("transports") {
        match &t.kind {
            Kind::Seq(items) if !items.is_empty() => {
                c.transports = Vec::new();
                for i in items {
                    match r.string(i, "a transport").as_deref().map(SioTransport::named) {
                        Some(Some(tr)) => c.transports.push(tr),
                        Some(None) => r.problem(i, "a Socket.IO transport is polling or websocket", None),
                        None => {}
                    }
                }
            }
            _ => r.problem(t, "config.socketio.transports must be a list: [websocket] or [polling, websocket]", None),
        }
    }
    if let Some(a) = m.get("auth") {
        if !matches!(a.kind, Kind::Map(_)) {
            r.problem(
                a,
                "config.socketio.auth must be a mapping (the CONNECT's payload)",
                Some("e.g. auth: { token: \"{{ token }}\" }".into()),
            );
        }
        r.templates(a);
        c.auth = Some(a.to_json());
    }
    c
}

/// `config.graphql`: the WebSocket's path, `connection_init`'s payload, headers.
fn read_graphql(r: &mut Reader, node: &Node) -> crate::scenario::settings::GraphqlConfig {
    let mut c = crate::scenario::settings::GraphqlConfig::default();
    let Some(m) = r.map(node, "config.graphql", GRAPHQL_KEYS) else { return c };
    let (path, fanout, deflate) = read_socket_keys(r, &m, "config.graphql", "/graphql");
    c.path = path.unwrap_or(c.path);
    c.fanout_field = fanout.unwrap_or(c.fanout_field);
    c.compression = deflate.unwrap_or(c.compression);
    if let Some(p) = m.get("connectionParams") {
        r.templates(p);
        c.init = Some(p.to_json());
    }
    if let Some(h) = m.get("headers") {
        r.templates(h);
        c.headers = read_headers(r, h, "config.graphql.headers");
    }
    c
}

fn read_phase(r: &mut Reader, node: &Node) -> Option<Phase> {
    let m = r.map(node, "a phase", PHASE_KEYS)?;
    let name = m.get("name").and_then(|n| r.string(n, "a phase's name"));
    if let Some(p) = m.get("pause") {
        for key in ["arrivalRate", "arrivalCount", "rampTo", "users", "poisson", "burstiness"] {
            if let Some(n) = m.get(key) {
                r.problem(n, format!("a pause phase cannot have \"{key}\""), None);
            }
        }
        let duration = r.duration(p, "pause")?;
        return Some(Phase { name, duration, kind: PhaseKind::Pause, burstiness: None });
    }
    let duration = m.require(r, "duration").and_then(|n| r.duration(n, "duration"));
    if let Some(users) = m.get("users") {
        // The closed model: these users loop their flow for the phase's duration.
        for key in ["arrivalRate", "arrivalCount", "rampTo", "poisson", "burstiness"] {
            if let Some(n) = m.get(key) {
                r.problem(n, format!("a phase of looping \"users\" cannot have \"{key}\""), None);
            }
        }
        let kind = match r.count(users, "users") {
            Some(0) => {
                r.problem(users, "users must be at least 1", None);
                None
            }
            Some(n) if n > MAX_ARRIVAL_COUNT => {
                r.problem(users, format!("users must be at most {MAX_ARRIVAL_COUNT}, not {n}"), None);
                None
            }
            n => n.map(PhaseKind::Users),
        };
        return Some(Phase { name, duration: duration?, kind: kind?, burstiness: None });
    }
    let kind = match (m.get("arrivalRate"), m.get("arrivalCount")) {
        (Some(rate), None) => {
            let per_s = r.rate(rate, "arrivalRate", true);
            let ramp_to = m.get("rampTo").and_then(|n| r.rate(n, "rampTo", true));
            match per_s {
                Some(per_s) if per_s > 0.0 || ramp_to.is_some_and(|t| t > 0.0) => {
                    Some(PhaseKind::Rate { per_s, ramp_to })
                }
                Some(_) => {
                    r.problem(rate, "arrivalRate must be above zero (or ramp to above zero)", None);
                    None
                }
                None => None,
            }
        }
        (None, Some(count)) => {
            if let Some(n) = m.get("rampTo") {
                r.problem(n, "rampTo goes with arrivalRate, not arrivalCount", None);
            }
            match r.count(count, "arrivalCount") {
                Some(n) if n > MAX_ARRIVAL_COUNT => {
                    r.problem(count, format!("arrivalCount must be at most {MAX_ARRIVAL_COUNT}, not {n}"), None);
                    None
                }
                n => n.map(PhaseKind::Count),
            }
        }
        (Some(_), Some(n)) => {
            r.problem(n, "a phase has either arrivalRate or arrivalCount, not both", None);
            None
        }
        (None, None) => {
            r.problem(
                node,
                "a phase needs \"arrivalRate\", \"arrivalCount\", \"users\" or \"pause\"",
                Some("e.g. arrivalRate: 4 (users per second), or users: 50 (looping for the duration)".into()),
            );
            None
        }
    };
    // `poisson: true` (burstiness 1) or `burstiness: B`: arrivals spaced as vLLM's benchmark
    // spaces its requests.
    let poisson = m.get("poisson").and_then(|n| r.boolean(n, "poisson")).unwrap_or(false);
    let burstiness = match m.get("burstiness") {
        Some(n) => match r.number(n, "burstiness") {
            Some(b) if (0.01..=100.0).contains(&b) => Some(b),
            Some(_) => {
                r.problem(n, "burstiness must be from 0.01 to 100 (1: a Poisson process)", None);
                return None;
            }
            None => return None,
        },
        None => poisson.then_some(1.0),
    };
    let kind = kind?;
    let at = m.get("poisson").or(m.get("burstiness")).unwrap_or(node);
    if let (Some(_), PhaseKind::Rate { ramp_to: Some(_), .. }) = (burstiness, &kind) {
        r.problem(at, "Poisson arrivals need a steady arrivalRate (no rampTo) or an arrivalCount", None);
        return None;
    }
    let arrivals = match (&kind, duration) {
        (PhaseKind::Rate { per_s, .. }, Some(d)) => (per_s * d.as_secs_f64()).ceil() as u64,
        (PhaseKind::Count(n), _) => *n,
        _ => 0,
    };
    if burstiness.is_some() && arrivals > crate::scenario::arrivals::MAX_SPACED_ARRIVALS {
        let most = crate::scenario::arrivals::MAX_SPACED_ARRIVALS;
        r.problem(at, format!("a Poisson phase brings at most {most} users; this one {arrivals}"), None);
        return None;
    }
    Some(Phase { name, duration: duration?, kind, burstiness })
}

fn read_payload(r: &mut Reader, node: &Node, base: &Path) -> Option<Payload> {
    let m = r.map(node, "config.payload", &["path", "fields", "skipHeader"])?;
    let path = m.require(r, "path").and_then(|n| r.string(n, "payload.path"))?;
    let fields: Vec<String> = match m.require(r, "fields") {
        Some(Node { kind: Kind::Seq(items), .. }) => {
            items.iter().filter_map(|i| r.string(i, "a payload field")).collect()
        }
        Some(n) => {
            r.problem(n, "payload.fields must be a list of names", None);
            return None;
        }
        None => return None,
    };
    let skip_header = m.get("skipHeader").and_then(|n| r.boolean(n, "payload.skipHeader")).unwrap_or(false);
    r.known_vars.extend(fields.iter().cloned());
    let full = base.join(&path);
    let bytes = match crate::files::read_limited(&full, crate::files::MAX_INPUT_BYTES) {
        Ok(b) => b,
        Err(e) => {
            r.problem(m.get("path").unwrap_or(node), format!("payload {}: {e}", full.display()), None);
            return None;
        }
    };
    let mut rows = Vec::new();
    // JSON Lines (a prompt file as LLM benchmarks keep them): each line an object, the fields
    // its keys (text as it is, any other value as JSON).
    let lower = path.to_ascii_lowercase();
    if lower.ends_with(".jsonl") || lower.ends_with(".ndjson") {
        let mut seen = vec![false; fields.len()];
        for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let o = match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(o)) => o,
                Ok(_) => {
                    r.problem(node, format!("payload {} line {}: not a JSON object", full.display(), i + 1), None);
                    return None;
                }
                Err(e) => {
                    r.problem(node, format!("payload {} line {}: {e}", full.display(), i + 1), None);
                    return None;
                }
            };
            for (s, f) in seen.iter_mut().zip(&fields) {
                *s |= o.contains_key(f);
            }
            let cell = |f: &String| match o.get(f) {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => String::new(),
            };
            rows.push(fields.iter().map(cell).collect());
        }
        if let Some(missing) = fields.iter().zip(&seen).find(|(_, s)| !**s).map(|(f, _)| f) {
            let at = m.get("fields").unwrap_or(node);
            r.problem(at, format!("payload {}: no line has the field {missing:?}", full.display()), None);
            return None;
        }
    }
    let mut reader = csv::ReaderBuilder::new().has_headers(skip_header).flexible(true).from_reader(&bytes[..]);
    let records = if rows.is_empty() { reader.records().collect() } else { Vec::new() };
    for (i, rec) in records.into_iter().enumerate() {
        match rec {
            Ok(rec) => rows.push(rec.iter().map(str::to_string).collect::<Vec<_>>()),
            Err(e) => {
                r.problem(node, format!("payload {} row {}: {e}", full.display(), i + 1), None);
                return None;
            }
        }
    }
    if rows.is_empty() {
        r.problem(node, format!("payload {} has no rows", full.display()), None);
        return None;
    }
    Some(Payload { path, fields, rows })
}

/// `max`, `p95`, `p99` of a map, as thresholds `STAT<=Nms` (of one step, or of all).
fn read_limits(r: &mut Reader, m: &Map<'_>, step: Option<&str>, out: &mut Vec<Threshold>) {
    for key in ["max", "p95", "p99"] {
        if let Some(n) = m.get(key) {
            if let Some(max_ms) = r.positive(n, key) {
                let metric = match step {
                    Some(step) => format!("step[{}].{key}", quote_step(step)),
                    None => key.to_string(),
                };
                push_threshold(r, n, &format!("{metric}<={max_ms}ms"), out);
            }
        }
    }
}

/// A step name inside `step[...]`: in double quotes, or single ones when it holds a double quote.
fn quote_step(name: &str) -> String {
    if name.contains('"') {
        format!("'{name}'")
    } else {
        format!("\"{name}\"")
    }
}

/// Parses one threshold expression found at `node`; a bad one is a problem at the node.
fn push_threshold(r: &mut Reader, node: &Node, text: &str, out: &mut Vec<Threshold>) {
    match crate::threshold::parse(text, Source::Ensure) {
        Ok(t) => out.push(t),
        Err(e) => r.problem(
            node,
            format!("ensure: {text:?}: {} at column {} of the expression", e.message, e.column),
            Some("e.g. - p99<200ms  - error_rate<1%  - step[\"call insertTask\"].p95<100ms".into()),
        ),
    }
}

/// `ensure`: a list of expressions (`- p99<200ms`), or Artillery's map (`maxErrorRate`, `max`,
/// `p95`, `p99`, `steps`) with, optionally, such a list under `thresholds`.
fn read_ensure(r: &mut Reader, node: &Node) -> Vec<Threshold> {
    let mut out = Vec::new();
    if let Kind::Seq(_) = &node.kind {
        read_expressions(r, node, &mut out);
        return out;
    }
    let Some(m) = r.map(node, "config.ensure", ENSURE_KEYS) else { return out };
    if let Some(n) = m.get("maxErrorRate") {
        if let Some(pct) = r.number(n, "maxErrorRate") {
            push_threshold(r, n, &format!("error_rate<={pct}%"), &mut out);
        }
    }
    read_limits(r, &m, None, &mut out);
    if let Some(steps) = m.get("steps") {
        if let Kind::Map(pairs) = &steps.kind {
            for (k, v) in pairs {
                if let Some(sm) = r.map(v, "a step's thresholds", &["max", "p95", "p99"]) {
                    read_limits(r, &sm, Some(&k.key_text()), &mut out);
                }
            }
        } else {
            r.problem(steps, "ensure.steps must map step names to thresholds", None);
        }
    }
    if let Some(list) = m.get("thresholds") {
        read_expressions(r, list, &mut out);
    }
    out
}

/// A list of threshold expressions.
fn read_expressions(r: &mut Reader, node: &Node, out: &mut Vec<Threshold>) {
    let Kind::Seq(items) = &node.kind else {
        r.problem(
            node,
            "ensure.thresholds must be a list of expressions",
            Some("e.g. [p99<200ms, error_rate<1%]".into()),
        );
        return;
    };
    for item in items {
        match &item.kind {
            Kind::Str(text) => push_threshold(r, item, text, out),
            _ => r.problem(
                item,
                format!("a threshold must be an expression such as p99<200ms, not {}", item.type_name()),
                None,
            ),
        }
    }
}

/// `config.audit: {truth: URL}` or `{truth: [URL, ...]}` (one per target): where the audit
/// reads the truth.
fn read_audit_config(r: &mut Reader, node: &Node) -> Vec<String> {
    let Some(m) = r.map(node, "config.audit", &["truth"]) else { return Vec::new() };
    let Some(n) = m.get("truth") else { return Vec::new() };
    let urls: Vec<(&Node, String)> = match &n.kind {
        Kind::Seq(items) => items.iter().filter_map(|i| Some((i, r.string(i, "config.audit.truth")?))).collect(),
        _ => r.string(n, "config.audit.truth").map(|u| (n, u)).into_iter().collect(),
    };
    for (at, u) in &urls {
        let scheme = u.split_once("://").map(|(s, _)| s);
        if !matches!(scheme, Some("http" | "https" | "ws" | "wss")) || url::Url::parse(u).is_err() {
            r.problem(at, format!("config.audit.truth {u:?} is not an http(s):// or ws(s):// URL"), None);
        }
    }
    urls.into_iter().map(|(_, u)| u).collect()
}

fn read_ddp(r: &mut Reader, node: &Node) -> (DdpSettings, Option<Duration>, Option<Duration>) {
    let mut d = DdpSettings::default();
    let Some(m) = r.map(node, "config.ddp", DDP_KEYS) else { return (d, None, None) };
    if let Some(n) = m.get("transport") {
        if let Some(name) = r.string(n, "transport") {
            match Transport::named(&name) {
                Some(t) => d.transport = t,
                None => r.problem(
                    n,
                    format!("transport {name:?} is not websocket, sockjs, xhr-polling or xhr-streaming"),
                    None,
                ),
            }
        }
    }
    if let Some(b) = m.get("compression").and_then(|n| r.boolean(n, "compression")) {
        d.compression = b;
    }
    if let Some(b) = m.get("cache").and_then(|n| r.boolean(n, "cache")) {
        d.cache = b;
    }
    if let Some(n) = m.get("fanoutField") {
        d.fanout_field = match &n.kind {
            Kind::Null | Kind::Bool(false) => None,
            _ => r.string(n, "fanoutField"),
        };
    }
    let step_timeout = m.get("stepTimeout").and_then(|n| r.duration(n, "stepTimeout"));
    let user_timeout = m.get("userTimeout").and_then(|n| r.duration(n, "userTimeout"));
    if let Some(b) = m.get("reconnect").and_then(|n| r.boolean(n, "reconnect")) {
        d.reconnect = b;
    }
    (d, step_timeout, user_timeout)
}

fn read_flows(r: &mut Reader, node: &Node) -> Vec<Flow> {
    let Kind::Seq(items) = &node.kind else {
        r.problem(node, "scenarios must be a list", Some("e.g. - name: main\n    flow: [...]".into()));
        return vec![];
    };
    let mut flows = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(m) = r.map(item, "a scenario", &["name", "weight", "flow", "engine"]) else { continue };
        r.engine = Engine::Ddp;
        if let Some(n) = m.get("engine") {
            match r.string(n, "engine").as_deref() {
                Some("browser") => r.engine = Engine::Browser,
                Some("socketio") => r.engine = Engine::SocketIo,
                Some("graphql-ws") => r.engine = Engine::GraphqlWs,
                Some("sse") => r.engine = Engine::Sse,
                Some("ddp") | None => {}
                Some(other) => r.problem(
                    n,
                    format!("engine {other:?} is not ddp, browser, socketio, graphql-ws or sse"),
                    Some("engine: browser runs the flow in a real Chromium page; socketio, graphql-ws and sse speak those protocols".into()),
                ),
            }
        }
        let name = m
            .get("name")
            .and_then(|n| r.string(n, "a scenario's name"))
            .unwrap_or_else(|| format!("scenario {}", i + 1));
        let weight = m.get("weight").and_then(|n| r.count(n, "weight")).unwrap_or(1) as u32;
        let mut steps = m.require(r, "flow").map(|n| read_steps(r, n)).unwrap_or_default();
        let flow_node = m.get("flow");
        let engine = r.engine;
        // Socket.IO's, graphql-ws's and SSE's users connect as their flow starts, as Artillery's do.
        if matches!(engine, Engine::SocketIo | Engine::GraphqlWs | Engine::Sse)
            && !steps.iter().any(|s| matches!(s.kind, StepKind::Connect))
        {
            steps.insert(0, named(StepKind::Connect, None));
        }
        if engine == Engine::Browser
            && !steps.is_empty()
            && !(Flow { name: String::new(), weight: 1, steps: steps.clone(), engine }).is_browser()
        {
            if let Some(n) = flow_node {
                r.problem(n, "a browser flow needs a page action", Some("start it with - goto: /".into()));
            }
        }
        if weight > 0 {
            flows.push(Flow { name, weight, steps, engine });
        }
    }
    flows
}

fn read_steps(r: &mut Reader, node: &Node) -> Vec<Step> {
    let Kind::Seq(items) = &node.kind else {
        r.problem(node, format!("a flow must be a list of steps, not {}", node.type_name()), None);
        return vec![];
    };
    items.iter().filter_map(|s| read_step(r, s)).collect()
}

/// The step type of a step mapping: its one key that names a step.
fn read_step(r: &mut Reader, node: &Node) -> Option<Step> {
    // A bare word is a step without options: `- connect`, `- disconnect`.
    if let Kind::Str(word) = &node.kind {
        if !r.fits_engine(node, word) {
            return None;
        }
        return match word.as_str() {
            "connect" => Some(named(StepKind::Connect, None)),
            "disconnect" => Some(named(StepKind::Disconnect, None)),
            "audit" => Some(named(StepKind::Audit(Audit::default()), None)),
            "complete" => Some(named(StepKind::Complete { name: None }, None)),
            "stream" => read_stream(r, node).map(|s| named(StepKind::Stream(s), None)),
            other => {
                let hint = closest(other, STEP_TYPES).map(|c| format!("did you mean \"{c}\"?"));
                r.problem(
                    node,
                    format!("unknown step \"{other}\""),
                    hint.or_else(|| Some(format!("steps: {}", STEP_TYPES.join(", ")))),
                );
                None
            }
        };
    }
    let Kind::Map(pairs) = &node.kind else {
        r.problem(node, format!("a step must be a mapping like `- call: {{...}}`, not {}", node.type_name()), None);
        return None;
    };
    let keys: Vec<String> = pairs.iter().map(|(k, _)| k.key_text()).collect();
    let types: Vec<&String> = keys.iter().filter(|k| STEP_TYPES.contains(&k.as_str())).collect();
    let ty = match types.as_slice() {
        [one] => one.as_str().to_string(),
        [] => {
            let first = &pairs[0].0;
            let word = first.key_text();
            let hint = match closest(&word, STEP_TYPES) {
                Some(c) => format!("did you mean \"{c}\"?"),
                None => format!("steps: {}", STEP_TYPES.join(", ")),
            };
            r.problem(first, format!("unknown step \"{word}\""), Some(hint));
            return None;
        }
        _ => {
            r.problem(
                node,
                format!(
                    "one step per list item, found {}",
                    types.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(" and ")
                ),
                None,
            );
            return None;
        }
    };
    if !r.fits_engine(node, &ty) {
        return None;
    }
    // Keys beside the type: loop's count/over, and a label for any step.
    let sibling_keys: &[&str] = match ty.as_str() {
        "loop" => &["loop", "count", "over", "label"],
        // Artillery's keys beside an emit.
        "emit" => &["emit", "namespace", "response", "acknowledge", "label"],
        _ => &[ty_static(&ty), "label"],
    };
    let m = r.map(node, "a step", sibling_keys)?;
    let label = m.get("label").and_then(|n| r.string(n, "label"));
    let body = m.get(&ty)?;
    let kind = match ty.as_str() {
        "connect" => Some(StepKind::Connect),
        "disconnect" => Some(StepKind::Disconnect),
        "think" => read_think(r, body).map(StepKind::Think),
        "set" => read_set(r, body).map(StepKind::Set),
        "loop" => {
            let steps = read_steps(r, body);
            let over = match (m.get("count"), m.get("over")) {
                (Some(c), None) => r.count(c, "loop count").map(LoopOver::Count),
                (None, Some(o)) => {
                    r.templates(o);
                    Some(LoopOver::List(o.to_json()))
                }
                (Some(_), Some(o)) => {
                    r.problem(o, "a loop has count or over, not both", None);
                    None
                }
                (None, None) => {
                    r.problem(node, "a loop needs \"count\" (times) or \"over\" (a list or \"{{ variable }}\")", None);
                    None
                }
            };
            over.map(|over| StepKind::Loop(Loop { over, steps }))
        }
        "call" => read_call(r, body).map(StepKind::Call),
        "login" => read_login(r, body).map(StepKind::Login),
        "subscribe" if r.engine == Engine::GraphqlWs => read_gql_subscribe(r, body).map(StepKind::GqlSubscribe),
        "subscribe" => read_subscribe(r, body),
        "emit" => read_emit(r, &m, body).map(StepKind::Emit),
        "listen" => read_listen(r, body).map(StepKind::Listen),
        "execute" => read_execute(r, body).map(StepKind::Execute),
        "stream" => read_stream(r, body).map(StepKind::Stream),
        "chat" => read_chat(r, body).map(StepKind::Chat),
        "complete" => match &body.kind {
            Kind::Null => Some(StepKind::Complete { name: None }),
            _ => r.string(body, "complete").map(|n| StepKind::Complete { name: Some(n) }),
        },
        "unsubscribe" => match &body.kind {
            Kind::Str(name) => Some(StepKind::Unsubscribe { name: name.clone() }),
            _ => r
                .map(body, "unsubscribe", &["name"])
                .and_then(|m| m.require(r, "name"))
                .and_then(|n| r.string(n, "name"))
                .map(|name| StepKind::Unsubscribe { name }),
        },
        "waitFor" => read_wait_for(r, body).map(StepKind::WaitFor),
        "get" | "post" => read_http(r, body, &ty.to_uppercase()).map(StepKind::Http),
        "audit" => read_audit(r, body).map(StepKind::Audit),
        "goto" | "click" | "fill" | "press" | "waitForSelector" | "expect" => {
            read_action(r, &ty, body).map(StepKind::Browser)
        }
        _ => None,
    }?;
    Some(named(kind, label))
}

impl Reader {
    /// Whether a step of type `ty` belongs in the flow being read (a page's actions in a browser
    /// flow, each protocol's steps in its own flows); a problem at `node` otherwise.
    fn fits_engine(&mut self, node: &Node, ty: &str) -> bool {
        if !STEP_TYPES.contains(&ty) || FLOW_STEPS.contains(&ty) {
            return true;
        }
        let own: &[&str] = match self.engine {
            Engine::Ddp => DDP_STEPS,
            Engine::Browser => BROWSER_STEPS,
            Engine::SocketIo => SOCKETIO_STEPS,
            Engine::GraphqlWs => GRAPHQL_STEPS,
            Engine::Sse => SSE_STEPS,
        };
        if own.contains(&ty) {
            return true;
        }
        let (message, hint) = match self.engine {
            Engine::Ddp if BROWSER_STEPS.contains(&ty) => (
                format!("\"{ty}\" is a browser action, and this flow runs over DDP"),
                "give the scenario engine: browser to run its flow in a real Chromium page".to_string(),
            ),
            Engine::Ddp => (
                format!("\"{ty}\" is a step of another protocol's flow, and this flow runs over DDP"),
                format!("emit and listen are engine: socketio's; execute and complete engine: graphql-ws's; stream and chat engine: sse's; a DDP flow's steps: {}", DDP_STEPS.join(", ")),
            ),
            Engine::Browser => (
                format!("a browser flow (engine: browser) drives its page; \"{ty}\" is a protocol user's step"),
                format!("a browser flow's steps: {}, {}", BROWSER_STEPS.join(", "), FLOW_STEPS.join(", ")),
            ),
            other => (
                format!("\"{ty}\" is not a step of an engine: {} flow", other.name()),
                format!("its steps: {}, {}", own.join(", "), FLOW_STEPS.join(", ")),
            ),
        };
        self.problem(node, message, Some(hint));
        false
    }
}

/// A browser action: `goto: PATH`, `click: SELECTOR`, `fill: { selector, value }`,
/// `press: { selector, key }`, `waitForSelector: SELECTOR | { selector, count, state, timeout }`,
/// `expect: { selector, text | count, state, timeout }`.
fn read_action(r: &mut Reader, ty: &str, body: &Node) -> Option<Action> {
    let nonempty = |r: &mut Reader, n: &Node, what: &str| -> Option<String> {
        let s = r.string(n, what)?;
        if s.trim().is_empty() {
            r.problem(n, format!("{what} is empty"), None);
            return None;
        }
        Some(s)
    };
    match ty {
        "goto" => {
            let path = nonempty(r, body, "goto")?;
            if let Ok(u) = url::Url::parse(&path) {
                if !matches!(u.scheme(), "http" | "https") {
                    r.problem(body, format!("goto {path:?}: a page is http:// or https://, or a path"), None);
                    return None;
                }
            }
            Some(Action::Goto(path))
        }
        "click" => nonempty(r, body, "click's selector").map(Action::Click),
        "fill" => {
            let m = r.map(body, "fill", &["selector", "value"])?;
            let selector = m.require(r, "selector").and_then(|n| nonempty(r, n, "fill's selector"));
            let value = m.require(r, "value").and_then(|n| match n.kind {
                Kind::Map(_) | Kind::Seq(_) => {
                    r.problem(n, format!("fill's value is the text to type, not {}", n.type_name()), None);
                    None
                }
                _ => {
                    r.templates(n);
                    Some(n.to_json())
                }
            });
            Some(Action::Fill { selector: selector?, value: value? })
        }
        "press" => {
            let m = r.map(body, "press", &["selector", "key"])?;
            let selector = m.require(r, "selector").and_then(|n| nonempty(r, n, "press's selector"));
            let key = m.require(r, "key").and_then(|n| nonempty(r, n, "press's key"));
            if let (Some(k), Some(n)) = (&key, m.get("key")) {
                if crate::browser::page::key(k).is_none() {
                    r.problem(
                        n,
                        format!("press: key {k:?} is not a key bolide knows"),
                        Some("one character, or Enter, Tab, Escape, Backspace, Delete, Space, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown".into()),
                    );
                    return None;
                }
            }
            Some(Action::Press { selector: selector?, key: key? })
        }
        "waitForSelector" | "expect" => {
            let what = if ty == "expect" { "expect" } else { "waitForSelector" };
            let mut sel = Selector {
                selector: String::new(),
                count: None,
                text: None,
                state: Visibility::Visible,
                timeout: None,
            };
            if let (Kind::Str(_), "waitForSelector") = (&body.kind, ty) {
                sel.selector = nonempty(r, body, "waitForSelector's selector")?;
                return Some(Action::WaitForSelector(sel));
            }
            let keys: &[&str] = if ty == "expect" {
                &["selector", "text", "count", "state", "timeout"]
            } else {
                &["selector", "count", "state", "timeout"]
            };
            let m = r.map(body, what, keys)?;
            sel.selector = m.require(r, "selector").and_then(|n| nonempty(r, n, "the selector"))?;
            sel.count = m.get("count").and_then(|n| r.count(n, "count"));
            if let Some(n) = m.get("text") {
                r.templates(n);
                sel.text = Some(n.to_json());
            }
            if let Some(n) = m.get("state") {
                sel.state = match r.string(n, "state").as_deref() {
                    Some("visible") => Visibility::Visible,
                    Some("hidden") => Visibility::Hidden,
                    Some("attached") => Visibility::Attached,
                    Some(other) => {
                        r.problem(n, format!("state {other:?} is not visible, hidden or attached"), None);
                        return None;
                    }
                    None => return None,
                };
            }
            sel.timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
            if ty == "expect" && sel.text.is_none() && sel.count.is_none() && m.get("state").is_none() {
                r.problem(
                    body,
                    "expect needs what the page must show: text, count or state",
                    Some("e.g. - expect: { selector: \"#count\", text: \"5\" }".into()),
                );
                return None;
            }
            if sel.state == Visibility::Hidden && (sel.count.is_some() || sel.text.is_some()) {
                let what = if sel.count.is_some() { "count" } else { "text" };
                r.problem(body, format!("{what} and state: hidden ask for opposite things; give one"), None);
                return None;
            }
            if sel.count.is_some() && sel.text.is_some() {
                r.problem(body, "expect checks one thing: text or count, not both (give two expect steps)", None);
                return None;
            }
            Some(if ty == "expect" { Action::Expect(sel) } else { Action::WaitForSelector(sel) })
        }
        _ => None,
    }
}

fn ty_static(ty: &str) -> &'static str {
    STEP_TYPES.iter().find(|t| **t == ty).copied().unwrap_or("step")
}

fn named(kind: StepKind, label: Option<String>) -> Step {
    Step { name: label.unwrap_or_else(|| default_step_name(&kind)), kind }
}

/// `set: { name: value, ... }`: variables of the user from here on (a value may use the ones
/// before it: `{{ $randomId }}` makes an id the later steps share).
fn read_set(r: &mut Reader, node: &Node) -> Option<Vec<(String, Value)>> {
    let Kind::Map(pairs) = &node.kind else {
        r.problem(
            node,
            format!("set must be a mapping of name: value, not {}", node.type_name()),
            Some("e.g. - set: { taskId: \"{{ $randomId }}\" }".into()),
        );
        return None;
    };
    let (mut out, mut refused) = (Vec::new(), false);
    for (k, v) in pairs {
        let name = k.key_text();
        let plain = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_alphanumeric() || c == '_');
        if BUILTIN_VARS.contains(&name.as_str()) {
            r.problem(k, format!("set {name}: a variable bolide gives every user; pick another name"), None);
            refused = true;
            continue;
        }
        if !plain {
            r.problem(k, format!("set {name:?}: a variable's name is letters, digits and _"), None);
            refused = true;
            continue;
        }
        r.templates(v);
        r.known_vars.push(name.clone());
        out.push((name, v.to_json()));
    }
    if out.is_empty() && !refused {
        r.problem(node, "set names no variable", Some("e.g. - set: { taskId: \"{{ $randomId }}\" }".into()));
        return None;
    }
    Some(out)
}

fn read_think(r: &mut Reader, node: &Node) -> Option<Think> {
    if let Kind::Map(_) = node.kind {
        let m = r.map(node, "think", &["min", "max"])?;
        let min = m.require(r, "min").and_then(|n| r.duration(n, "think min"));
        let max = m.require(r, "max").and_then(|n| r.duration(n, "think max"));
        let (min, max) = (min?, max?);
        if max < min {
            r.problem(node, "think max is below min", None);
            return None;
        }
        return Some(Think::Between(min, max));
    }
    r.duration(node, "think").map(Think::Fixed)
}

fn params(r: &mut Reader, m: &Map<'_>) -> Vec<Value> {
    match m.get("params") {
        None => vec![],
        Some(n @ Node { kind: Kind::Seq(items), .. }) => {
            r.templates(n);
            items.iter().map(Node::to_json).collect()
        }
        Some(n) => {
            // One argument is the common case: accept it without the list.
            r.templates(n);
            vec![n.to_json()]
        }
    }
}

fn read_capture(r: &mut Reader, node: &Node) -> Option<Capture> {
    let cap = match &node.kind {
        Kind::Str(var) => Capture { var: var.clone(), path: None, append: false },
        _ => {
            let m = r.map(node, "capture", &["as", "path", "append"])?;
            let var = m.require(r, "as").and_then(|n| r.string(n, "capture as"))?;
            let path = m.get("path").and_then(|n| r.string(n, "capture path"));
            let append = m.get("append").and_then(|n| r.boolean(n, "capture append")).unwrap_or(false);
            Capture { var, path, append }
        }
    };
    r.known_vars.push(cap.var.clone());
    Some(cap)
}

fn read_call(r: &mut Reader, node: &Node) -> Option<Call> {
    let m = r.map(node, "call", &["method", "params", "capture", "expect", "timeout", "noRetry"])?;
    let method = m.require(r, "method").and_then(|n| r.string(n, "method"));
    let params = params(r, &m);
    let capture = m.get("capture").and_then(|n| read_capture(r, n));
    let expect = match m.get("expect") {
        None => None,
        Some(n) => {
            let em = r.map(n, "expect", &["contains", "notContains"])?;
            match (em.get("contains"), em.get("notContains")) {
                (Some(c), None) => Some(Expect { contains: true, fields: r.fields(c, "expect.contains") }),
                (None, Some(c)) => Some(Expect { contains: false, fields: r.fields(c, "expect.notContains") }),
                _ => {
                    r.problem(n, "expect needs one of contains or notContains (a document's fields)", None);
                    None
                }
            }
        }
    };
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    let no_retry = m.get("noRetry").and_then(|n| r.boolean(n, "noRetry")).unwrap_or(false);
    Some(Call { method: method?, params, capture, expect, timeout, no_retry })
}

/// `emit`: `{ channel, data }` (data one argument, null when left out, as Artillery sends it) or
/// `[channel, arg, ...]`; `namespace`, `response` and `acknowledge` beside it (Artillery 2) or, as
/// Artillery 1 wrote them, inside the mapping.
fn read_emit(r: &mut Reader, step: &Map<'_>, body: &Node) -> Option<Emit> {
    r.templates(body);
    let (args, inner) = match &body.kind {
        Kind::Seq(items) if !items.is_empty() => (items.iter().map(Node::to_json).collect::<Vec<_>>(), None),
        Kind::Map(_) => {
            let m = r.map(body, "emit", &["channel", "data", "namespace", "response", "acknowledge"])?;
            let channel = m.require(r, "channel").and_then(|n| r.string(n, "emit channel"))?;
            let data = m.get("data").map(Node::to_json).unwrap_or(Value::Null);
            (vec![Value::String(channel), data], Some(m))
        }
        _ => {
            r.problem(body, "emit needs { channel, data } or a list [channel, argument, ...]", None);
            return None;
        }
    };
    if !args[0].is_string() {
        r.problem(body, "an emit's first element is the event's name, a text", None);
        return None;
    }
    let get = |key: &str| step.get(key).or_else(|| inner.as_ref().and_then(|m| m.get(key)));
    let namespace = match get("namespace") {
        Some(n) => {
            let ns = r.string(n, "namespace")?;
            if !ns.starts_with('/') {
                r.problem(n, format!("namespace {ns:?} must start with /"), Some("e.g. namespace: /chat".into()));
                return None;
            }
            Some(ns)
        }
        None => None,
    };
    let reply = match (get("response"), get("acknowledge")) {
        (Some(resp), Some(ack)) => {
            r.problem(ack, "an emit waits for a response or an acknowledgement, not both", None);
            let _ = resp;
            return None;
        }
        (Some(resp), None) => {
            let m = r.map(resp, "response", &["channel", "on", "data", "args", "match", "capture", "concat"])?;
            if let Some(n) = m.get("concat") {
                r.problem(
                    n,
                    "response.concat is not supported yet",
                    Some("compare the whole answer with data: [...]".into()),
                );
                return None;
            }
            let channel = match (m.get("channel"), m.get("on")) {
                (Some(n), _) | (None, Some(n)) => r.string(n, "response channel")?,
                (None, None) => {
                    r.problem(resp, "response needs \"channel\" (the event that answers)", None);
                    return None;
                }
            };
            Reply::Event { channel, answer: read_answer(r, &m, false)? }
        }
        (None, Some(ack)) => match &ack.kind {
            Kind::Null | Kind::Bool(true) => Reply::Ack(Answer::default()),
            _ => {
                let m = r.map(ack, "acknowledge", &["data", "args", "match", "capture"])?;
                Reply::Ack(read_answer(r, &m, true)?)
            }
        },
        (None, None) => Reply::None,
    };
    Some(Emit { args, namespace, reply, timeout: None })
}

/// An answer's `data` (or `args`), `match` and `capture`; an acknowledgement's JSON paths start at
/// its first argument when a mapping gives none (`$.0`), as Artillery's do.
fn read_answer(r: &mut Reader, m: &Map<'_>, ack: bool) -> Option<Answer> {
    let mut a = Answer::default();
    if let (Some(_), Some(args)) = (m.get("data"), m.get("args")) {
        r.problem(args, "give data or args, not both (they are one thing)", None);
        return None;
    }
    if let Some(d) = m.get("data").or_else(|| m.get("args")) {
        r.templates(d);
        a.data = Some(d.to_json());
    }
    let items = |n: &Node| -> Vec<Node> {
        match &n.kind {
            Kind::Seq(items) => items.clone(),
            _ => vec![n.clone()],
        }
    };
    if let Some(n) = m.get("match") {
        for item in items(n) {
            let mm = r.map(&item, "match", &["json", "value"])?;
            let json = match mm.get("json") {
                Some(j) => r.string(j, "match json")?,
                None if ack => "$.0".into(),
                None => {
                    r.problem(&item, "match needs \"json\" (a path like $.0.name)", None);
                    return None;
                }
            };
            let value = mm.require(r, "value")?;
            r.templates(value);
            a.matches.push(JsonMatch { json, value: value.to_json() });
        }
    }
    if let Some(n) = m.get("capture") {
        for item in items(n) {
            let cm = r.map(&item, "capture", &["json", "as"])?;
            let json = match cm.get("json") {
                Some(j) => r.string(j, "capture json")?,
                None if ack => "$.0".into(),
                None => {
                    r.problem(&item, "capture needs \"json\" (a path like $.0.id)", None);
                    return None;
                }
            };
            let var = cm.require(r, "as").and_then(|n| r.string(n, "capture as"))?;
            r.known_vars.push(var.clone());
            a.captures.push((json, var));
        }
    }
    Some(a)
}

/// `listen: CHANNEL` or `listen: { channel, count, namespace, timeout }`.
fn read_listen(r: &mut Reader, node: &Node) -> Option<Listen> {
    if let Kind::Str(channel) = &node.kind {
        return Some(Listen { channel: channel.clone(), count: 1, namespace: None, timeout: None });
    }
    let m = r.map(node, "listen", &["channel", "count", "namespace", "timeout"])?;
    let channel = m.require(r, "channel").and_then(|n| r.string(n, "listen channel"))?;
    let count = m.get("count").and_then(|n| r.count(n, "listen count")).unwrap_or(1);
    if count == 0 {
        if let Some(n) = m.get("count") {
            r.problem(n, "listen count must be at least 1", None);
        }
        return None;
    }
    let namespace = m.get("namespace").and_then(|n| r.string(n, "namespace"));
    if let (Some(ns), Some(n)) = (&namespace, m.get("namespace")) {
        if !ns.starts_with('/') {
            r.problem(n, format!("namespace {ns:?} must start with /"), None);
            return None;
        }
    }
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    Some(Listen { channel, count, namespace, timeout })
}

/// A GraphQL document's text: not empty, and its braces balanced.
fn read_query(r: &mut Reader, n: &Node) -> Option<String> {
    let q = r.string(n, "query")?;
    let depth = q.chars().try_fold(0i64, |d, c| match c {
        '{' => Some(d + 1),
        '}' if d == 0 => None,
        '}' => Some(d - 1),
        _ => Some(d),
    });
    if q.trim().is_empty() || depth != Some(0) || !q.contains('{') {
        r.problem(
            n,
            "query must be a GraphQL document with balanced { }",
            Some("e.g. query: \"{ tasks { id } }\"".into()),
        );
        return None;
    }
    Some(q)
}

/// `execute: { query, variables, capture, timeout }`.
fn read_execute(r: &mut Reader, node: &Node) -> Option<Execute> {
    let m = r.map(node, "execute", &["query", "variables", "capture", "timeout"])?;
    let query = m.require(r, "query").and_then(|n| read_query(r, n));
    let variables = m.get("variables").map(|n| {
        r.templates(n);
        n.to_json()
    });
    let capture = m.get("capture").and_then(|n| read_capture(r, n));
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    Some(Execute { query: query?, variables, capture, timeout })
}

/// `subscribe: { query, variables, count, capture, timeout }` in a graphql-ws flow.
fn read_gql_subscribe(r: &mut Reader, node: &Node) -> Option<GqlSubscribe> {
    let m = r.map(node, "subscribe", &["query", "variables", "count", "capture", "timeout"])?;
    let query = m.require(r, "query").and_then(|n| read_query(r, n));
    let variables = m.get("variables").map(|n| {
        r.templates(n);
        n.to_json()
    });
    // 0: started without waiting for anything (the user's own mutation may feed it next).
    let count = m.get("count").and_then(|n| r.count(n, "subscribe count")).unwrap_or(1);
    let capture = m.get("capture").and_then(|n| r.string(n, "capture"));
    if let Some(c) = &capture {
        r.known_vars.push(c.clone());
    }
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    Some(GqlSubscribe { query: query?, variables, count, capture, timeout })
}

fn read_login(r: &mut Reader, node: &Node) -> Option<Login> {
    let m = r.map(node, "login", &["user", "password", "resume", "timeout"])?;
    let get = |r: &mut Reader, k: &str| {
        m.get(k).map(|n| {
            r.templates(n);
            n.to_json()
        })
    };
    let (user, password, resume) = (get(r, "user"), get(r, "password"), get(r, "resume"));
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    match (&user, &password, &resume) {
        (Some(_), Some(_), None) | (None, None, Some(_)) => Some(Login { user, password, resume, timeout }),
        _ => {
            r.problem(node, "login takes user and password, or resume (a login token)", None);
            None
        }
    }
}

fn read_subscribe(r: &mut Reader, node: &Node) -> Option<StepKind> {
    if let Kind::Str(name) = &node.kind {
        return Some(StepKind::Subscribe { name: name.clone(), params: vec![], capture: None, timeout: None });
    }
    let m = r.map(node, "subscribe", &["name", "params", "capture", "timeout"])?;
    let name = m.require(r, "name").and_then(|n| r.string(n, "subscription name"));
    let params = params(r, &m);
    let capture = m.get("capture").and_then(|n| r.string(n, "capture"));
    if let Some(c) = &capture {
        r.known_vars.push(c.clone());
    }
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    Some(StepKind::Subscribe { name: name?, params, capture, timeout })
}

/// `audit: {}` or `audit: { collection, subscription, params, settle, timeout }` (`audit: NAME`
/// for one collection).
fn read_audit(r: &mut Reader, node: &Node) -> Option<Audit> {
    match &node.kind {
        Kind::Null => return Some(Audit::default()),
        Kind::Str(c) => return Some(Audit { collection: Some(c.clone()), ..Audit::default() }),
        _ => {}
    }
    let m = r.map(node, "audit", &["collection", "subscription", "params", "settle", "timeout"])?;
    let collection = m.get("collection").and_then(|n| r.string(n, "collection"));
    let subscription = m.get("subscription").and_then(|n| r.string(n, "subscription"));
    let params = m.get("params").is_some().then(|| params(r, &m));
    if params.is_some() && subscription.is_none() {
        r.problem(node, "audit params are the named subscription's: give subscription as well", None);
        return None;
    }
    let settle = m.get("settle").and_then(|n| r.duration(n, "settle")).unwrap_or(crate::scenario::AUDIT_SETTLE);
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout")).unwrap_or(crate::scenario::AUDIT_TIMEOUT);
    if settle >= timeout {
        let at = m.get("settle").unwrap_or(node);
        r.problem(at, format!("audit settle {settle:?} must be shorter than its timeout {timeout:?}"), None);
        return None;
    }
    Some(Audit { collection, subscription, params, settle, timeout })
}

fn read_wait_for(r: &mut Reader, node: &Node) -> Option<WaitFor> {
    let m = r.map(node, "waitFor", &["collection", "where", "until", "timeout"])?;
    let collection = m.require(r, "collection").and_then(|n| r.string(n, "collection"));
    let fields = m.get("where").map(|n| r.fields(n, "where")).unwrap_or_default();
    let until = match m.get("until") {
        None => Some(Until::Matches),
        Some(n) => match r.string(n, "until").as_deref() {
            Some("matches") => Some(Until::Matches),
            Some("appears") => Some(Until::Appears),
            Some("changes") => Some(Until::Changes),
            Some("disappears") => Some(Until::Disappears),
            Some(other) => {
                let hint = closest(other, &["matches", "appears", "changes", "disappears"])
                    .map(|c| format!("did you mean \"{c}\"?"));
                r.problem(n, format!("until {other:?} is not one of matches, appears, changes, disappears"), hint);
                None
            }
            None => None,
        },
    };
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    Some(WaitFor { collection: collection?, fields, until: until?, timeout })
}

/// `config.sse`: headers every SSE request carries (a token: `{{ }}` allowed), whether a stream
/// the server ends early is asked again (`reconnect`), the wait before that (`retry`) when the
/// server sets none, and whether requests go over HTTP/2 (`http2`).
fn read_sse_config(r: &mut Reader, node: &Node) {
    let Some(m) = r.map(node, "config.sse", SSE_KEYS) else { return };
    if let Some(h) = m.get("headers") {
        r.templates(h);
        r.sse.headers = read_headers(r, h, "config.sse.headers");
    }
    let wait = m.get("retry").and_then(|n| r.duration(n, "config.sse.retry")).unwrap_or(Duration::from_secs(3));
    let on = m.get("reconnect").and_then(|n| r.boolean(n, "config.sse.reconnect")).unwrap_or(true);
    r.sse.reconnect = on.then_some(wait);
    r.sse.http2 = m.get("http2").and_then(|n| r.boolean(n, "config.sse.http2")).unwrap_or(false);
}

/// `config.llm`: the model every `chat` names (else the server's first), and the service levels
/// of request goodput (`goodput: { ttft: 500ms, tpot: 50ms }` or `"ttft:500ms,tpot:50ms"`).
fn read_llm_config(r: &mut Reader, node: &Node) {
    let Some(m) = r.map(node, "config.llm", LLM_KEYS) else { return };
    if let Some(n) = m.get("model") {
        r.templates(n);
        r.sse.model = r.string(n, "config.llm.model");
    }
    let Some(g) = m.get("goodput") else { return };
    let pairs: Vec<(String, Option<Duration>)> = match &g.kind {
        Kind::Str(text) => match super::parse_goodput(text) {
            Ok(levels) => levels.into_iter().map(|(k, d)| (k, Some(d))).collect(),
            Err(e) => {
                let hint = Some("e.g. goodput: \"ttft:500ms,tpot:50ms\" (ttft, tpot, itl, e2el)".into());
                return r.problem(g, format!("config.llm.goodput: {e}"), hint);
            }
        },
        Kind::Map(pairs) => pairs.iter().map(|(k, v)| (k.key_text(), r.duration(v, "a goodput level"))).collect(),
        _ => vec![(String::new(), None)],
    };
    for (k, d) in pairs {
        match (super::GOODPUT_LEVELS.contains(&k.as_str()), d) {
            (true, Some(d)) => r.sse.goodput.push((k, d)),
            _ => r.problem(
                g,
                format!("config.llm.goodput: {k:?} is not a level with a duration"),
                Some("e.g. goodput: \"ttft:500ms,tpot:50ms\" (ttft, tpot, itl, e2el)".into()),
            ),
        }
    }
}

/// A length: a number, or `{ mean, stddev, min, max }`.
fn read_length(r: &mut Reader, node: &Node, what: &str) -> Option<Length> {
    if let Kind::Int(_) = node.kind {
        let n = r.count(node, what)?;
        return Some(Length { mean: n, stddev: 0, min: n, max: n });
    }
    let m = r.map(node, "a length", &["mean", "stddev", "min", "max"])?;
    let mean = m.require(r, "mean").and_then(|n| r.count(n, what))?;
    let stddev = m.get("stddev").and_then(|n| r.count(n, what)).unwrap_or(0);
    let min = m.get("min").and_then(|n| r.count(n, what)).unwrap_or(1);
    let max = m.get("max").and_then(|n| r.count(n, what)).unwrap_or(mean.saturating_mul(4).max(min));
    if max < min {
        r.problem(node, format!("{what}: max is below min"), None);
        return None;
    }
    Some(Length { mean, stddev, min, max })
}

/// `stream: PATH` or `stream: { url, method, headers, json | body, events, until, match, capture,
/// keep, timeout, http2 }`.
fn read_stream(r: &mut Reader, node: &Node) -> Option<SseStream> {
    let keys =
        ["url", "method", "headers", "json", "body", "events", "until", "match", "capture", "keep", "timeout", "http2"];
    let mut s = SseStream {
        method: "GET".into(),
        url: String::new(),
        headers: r.sse.headers.clone(),
        body: None,
        events: None,
        until: None,
        matches: Vec::new(),
        capture: None,
        keep: false,
        timeout: None,
        reconnect: r.sse.reconnect,
        http2: r.sse.http2,
    };
    match &node.kind {
        // `- stream`: the target's own URL.
        Kind::Str(word) if word == "stream" => return Some(s),
        Kind::Str(url) => {
            r.templates(node);
            s.url = url.clone();
            return Some(s);
        }
        _ => {}
    }
    let m = r.map(node, "stream", &keys)?;
    if let Some(url) = m.get("url") {
        r.templates(url);
        s.url = r.string(url, "url")?;
    }
    if let Some(n) = m.get("method") {
        s.method = r.string(n, "method")?.to_ascii_uppercase();
        if s.method.is_empty() || !s.method.bytes().all(|b| b.is_ascii_alphabetic()) {
            r.problem(n, "method must be a word such as GET or POST", None);
            return None;
        }
    }
    if let Some(h) = m.get("headers") {
        r.templates(h);
        s.headers.extend(read_headers(r, h, "stream headers"));
    }
    s.body = match (m.get("json"), m.get("body")) {
        (Some(j), None) => {
            r.templates(j);
            Some(j.to_json())
        }
        (None, Some(b)) => {
            r.templates(b);
            Some(Value::String(r.string(b, "body")?))
        }
        (Some(_), Some(b)) => {
            r.problem(b, "json or body, not both", None);
            return None;
        }
        (None, None) => None,
    };
    if s.body.is_some() && m.get("method").is_none() {
        s.method = "POST".into();
    }
    if let Some(n) = m.get("events") {
        s.events = Some(r.count(n, "events")?);
        if s.events == Some(0) {
            r.problem(n, "events must be at least 1 (without it, the stream is read to its end)", None);
            return None;
        }
    }
    if let Some(n) = m.get("until") {
        s.until = match &n.kind {
            Kind::Str(event) => Some(StreamEnd { event: Some(event.clone()), data: None }),
            _ => {
                let u = r.map(n, "until", &["event", "data"])?;
                let event = u.get("event").and_then(|e| r.string(e, "until event"));
                let data = u.get("data").and_then(|d| r.string(d, "until data"));
                if event.is_none() && data.is_none() {
                    r.problem(n, "until needs event or data", Some("e.g. until: { event: done }".into()));
                    return None;
                }
                Some(StreamEnd { event, data })
            }
        };
    }
    if let Some(n) = m.get("match") {
        let Kind::Map(pairs) = &n.kind else {
            r.problem(n, "match must be a mapping of path: value", Some("e.g. match: { status: done }".into()));
            return None;
        };
        s.matches = pairs.iter().map(|(k, v)| (k.key_text(), v.to_json())).collect();
    }
    s.capture = m.get("capture").and_then(|n| read_capture(r, n));
    s.keep = m.get("keep").and_then(|n| r.boolean(n, "keep")).unwrap_or(false);
    if let (true, None, None, Some(n)) = (s.keep, s.events, &s.until, m.get("keep")) {
        r.problem(
            n,
            "keep needs events or until: the step ends there and the stream stays open",
            Some("e.g. stream: { url: /feed, events: 1, keep: true }".into()),
        );
        return None;
    }
    s.timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    if let Some(n) = m.get("http2") {
        s.http2 = r.boolean(n, "http2")?;
    }
    Some(s)
}

/// `chat: { model, messages | prompt | input_tokens, max_tokens, url, headers, capture, timeout,
/// ... }`; other keys go into the request's body as they are.
fn read_chat(r: &mut Reader, node: &Node) -> Option<Chat> {
    let Kind::Map(pairs) = &node.kind else {
        r.problem(
            node,
            format!("chat must be a mapping, not {}", node.type_name()),
            Some("e.g. chat: { messages: [{ role: user, content: Hi }], max_tokens: 64 }".into()),
        );
        return None;
    };
    let mut c = Chat {
        url: None,
        model: r.sse.model.clone(),
        messages: None,
        prompt: None,
        input_tokens: None,
        max_tokens: None,
        extra: Vec::new(),
        headers: r.sse.headers.clone(),
        capture: None,
        timeout: None,
        goodput: r.sse.goodput.clone(),
        http2: r.sse.http2,
    };
    for (k, v) in pairs {
        match k.key_text().as_str() {
            "url" => c.url = Some(r.string(v, "url")?),
            "model" => {
                r.templates(v);
                c.model = Some(r.string(v, "model")?);
            }
            "messages" => {
                r.templates(v);
                if !matches!(v.kind, Kind::Seq(_)) {
                    r.problem(v, "messages must be a list of { role, content }", None);
                    return None;
                }
                c.messages = Some(v.to_json());
            }
            "prompt" => {
                r.templates(v);
                c.prompt = Some(v.to_json());
            }
            "input_tokens" => c.input_tokens = Some(read_length(r, v, "input_tokens")?),
            // A template (`"{{ max_tokens }}"`, from a payload) is rendered per request.
            "max_tokens" if matches!(v.kind, Kind::Str(_)) => {
                r.templates(v);
                c.extra.push(("max_tokens".into(), v.to_json()));
            }
            "max_tokens" => c.max_tokens = Some(read_length(r, v, "max_tokens")?),
            "headers" => {
                r.templates(v);
                c.headers.extend(read_headers(r, v, "chat headers"));
            }
            "capture" => c.capture = Some(read_capture(r, v)?),
            "timeout" => c.timeout = Some(r.duration(v, "timeout")?),
            "http2" => c.http2 = r.boolean(v, "http2")?,
            "stream" | "stream_options" => {
                r.problem(k, "chat always streams, with the usage asked for", None);
                return None;
            }
            other => {
                r.templates(v);
                c.extra.push((other.to_string(), v.to_json()));
            }
        }
    }
    let given = [c.messages.is_some(), c.prompt.is_some(), c.input_tokens.is_some()];
    if given.iter().filter(|g| **g).count() > 1 {
        r.problem(node, "chat has one of messages, prompt and input_tokens", None);
        return None;
    }
    Some(c)
}

fn read_http(r: &mut Reader, node: &Node, method: &str) -> Option<HttpStep> {
    let m = r.map(
        node,
        if method == "GET" { "get" } else { "post" },
        &["url", "json", "body", "expect", "timeout", "http2"],
    )?;
    let url = m.require(r, "url").and_then(|n| r.string(n, "url"));
    let body = match (m.get("json"), m.get("body")) {
        (Some(j), None) => {
            r.templates(j);
            Some(j.to_json())
        }
        (None, Some(b)) => r.string(b, "body").map(Value::String),
        (Some(_), Some(b)) => {
            r.problem(b, "json or body, not both", None);
            None
        }
        (None, None) => None,
    };
    let expect_status = match m.get("expect") {
        None => Some(StatusSet::default()),
        Some(n @ Node { kind: Kind::Map(_), .. }) => {
            let em = r.map(n, "expect", &["status", "statusCode"])?;
            match (em.get("status"), em.get("statusCode")) {
                (Some(s), None) | (None, Some(s)) => r.status_set(s),
                (Some(_), Some(b)) => {
                    r.problem(b, "status or statusCode, not both", None);
                    None
                }
                (None, None) => {
                    r.problem(n, "expect needs status", Some("e.g. expect: { status: 200-299,404 }".into()));
                    None
                }
            }
        }
        Some(n) => r.status_set(n),
    };
    let timeout = m.get("timeout").and_then(|n| r.duration(n, "timeout"));
    let http2 = match m.get("http2") {
        None => Some(false),
        Some(n) => r.boolean(n, "http2"),
    };
    Some(HttpStep {
        method: method.to_string(),
        url: url?,
        body,
        expect_status: expect_status?,
        timeout,
        http2: http2?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Scenario, LoadError> {
        load_str(text, "test.yml", Path::new("."))
    }

    #[test]
    fn positions_and_aliases() {
        let n = parse("a:\n  b: [1, x, \"2\"]\n  c: &anchor {d: true}\n  e: *anchor\n").unwrap();
        let Kind::Map(top) = &n.kind else { panic!() };
        let Kind::Map(inner) = &top[0].1.kind else { panic!() };
        assert_eq!((inner[0].0.line, inner[0].0.col), (2, 3));
        assert_eq!(inner[0].1.to_json(), serde_json::json!([1, "x", "2"]));
        assert_eq!(inner[2].1.to_json(), serde_json::json!({"d": true}));
        let err = parse("a: [1, 2\n").unwrap_err();
        assert!(err.message.starts_with("YAML syntax"), "{err:?}");
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("arivalRate", PHASE_KEYS), Some("arrivalRate"));
        assert_eq!(closest("cal", STEP_TYPES), Some("call"));
        assert_eq!(closest("zzzzzz", STEP_TYPES), None);
    }

    #[test]
    fn socketio_flows_read_as_artillery_writes_them() {
        let s = load(concat!(
            "config:\n  target: http://127.0.0.1:3000/admin\n  phases: [{duration: 1, arrivalRate: 1}]\n  timeout: 3\n",
            "  socketio: {transports: [websocket], query: \"a=1&b=x y\", extraHeaders: {x-id: abc}, auth: {token: t}}\n",
            "scenarios:\n  - engine: socketio\n    flow:\n",
            "      - emit: {channel: echo, data: hi}\n        response: {on: echoed, data: hi}\n",
            "      - namespace: /chat\n        emit: [\"join\", \"lobby\", 2]\n        acknowledge:\n          match: {value: joined}\n          capture: {json: \"$.1\", as: n}\n",
            "      - emit: {channel: bye}\n",
            "      - listen: {channel: chat, count: 3}\n",
        ))
        .unwrap();
        let c = &s.config;
        assert_eq!(c.step_timeout, Duration::from_secs(3));
        assert_eq!(c.socketio.transports, [crate::scenario::settings::SioTransport::WebSocket]);
        assert_eq!(c.socketio.query, [("a".into(), "1".into()), ("b".into(), "x y".into())]);
        assert_eq!(c.socketio.headers, [("x-id".to_string(), "abc".to_string())]);
        let f = &s.flows[0];
        assert_eq!(f.engine, Engine::SocketIo);
        // The connection is made as the flow starts, as Artillery's users make it.
        let names: Vec<&str> = f.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["connect", "emit echo", "emit join /chat", "emit bye", "listen chat"]);
        let StepKind::Emit(e) = &f.steps[1].kind else { panic!() };
        assert_eq!(e.args, [serde_json::json!("echo"), serde_json::json!("hi")]);
        assert!(
            matches!(&e.reply, Reply::Event { channel, answer } if channel == "echoed" && answer.data == Some(serde_json::json!("hi")))
        );
        let StepKind::Emit(e) = &f.steps[2].kind else { panic!() };
        assert_eq!(e.namespace.as_deref(), Some("/chat"));
        let Reply::Ack(a) = &e.reply else { panic!() };
        assert_eq!(a.matches, [JsonMatch { json: "$.0".into(), value: serde_json::json!("joined") }]);
        assert_eq!(a.captures, [("$.1".to_string(), "n".to_string())]);
        // Data left out is sent as null, as Artillery's client sends undefined.
        let StepKind::Emit(e) = &f.steps[3].kind else { panic!() };
        assert_eq!(e.args, [serde_json::json!("bye"), Value::Null]);
    }

    #[test]
    fn the_audits_truth_is_one_url_or_a_list_and_says_where_it_is_wrong() {
        let file = |audit: &str| {
            format!(
                "config:\n  target: http://h\n  phases: [{{duration: 1, arrivalRate: 1}}]\n  audit: {audit}\n\
                 scenarios:\n  - flow: [connect]\n"
            )
        };
        let one = load(&file("{truth: http://127.0.0.1:3000}")).unwrap();
        assert_eq!(one.config.audit_truth, ["http://127.0.0.1:3000"]);
        let two = load(&file("{truth: [http://a:1, https://b:2]}")).unwrap();
        assert_eq!(two.config.audit_truth, ["http://a:1", "https://b:2"]);
        assert!(load(&file("{}")).unwrap().config.audit_truth.is_empty());
        let problems = |audit: &str| -> Vec<String> {
            let e = load(&file(audit)).unwrap_err();
            e.problems.iter().map(|p| format!("{}:{} {}", p.line, p.col, p.message)).collect()
        };
        assert_eq!(
            problems("{truth: [http://a:1, ftp://x]}"),
            ["4:31 config.audit.truth \"ftp://x\" is not an http(s):// or ws(s):// URL"]
        );
        assert!(problems("{trut: http://x}")[0].contains("trut"), "{:?}", problems("{trut: http://x}"));
    }

    #[test]
    fn graphql_flows_and_each_engines_steps() {
        let s = load(concat!(
            "config:\n  target: http://127.0.0.1:4000/graphql\n  phases: [{duration: 1, arrivalRate: 1}]\n",
            "  graphql: {connectionParams: {token: s}}\n",
            "scenarios:\n  - engine: graphql-ws\n    flow:\n",
            "      - subscribe: {query: \"subscription { taskAdded { id } }\", count: 2, capture: feed}\n",
            "      - execute: {query: \"mutation Add($t: String!) { addTask(text: $t) { id } }\", variables: {t: x}}\n",
            "      - complete: feed\n      - complete\n",
        ))
        .unwrap();
        assert_eq!(s.config.graphql.init, Some(serde_json::json!({"token": "s"})));
        let names: Vec<&str> = s.flows[0].steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["connect", "subscribe taskAdded", "mutation Add", "complete feed", "complete"]);
        let head = "config:\n  target: http://h\n  phases: [{duration: 1, arrivalRate: 1}]\nscenarios:\n";
        let problems = |flows: &str| -> Vec<String> {
            load(&format!("{head}{flows}"))
                .unwrap_err()
                .problems
                .iter()
                .map(|p| format!("{}:{} {}", p.line, p.col, p.message))
                .collect()
        };
        assert_eq!(
            problems("  - engine: socketio\n    flow:\n      - call: {method: m}\n"),
            ["7:9 \"call\" is not a step of an engine: socketio flow"]
        );
        assert_eq!(
            problems("  - flow:\n      - emit: {channel: x}\n"),
            ["6:9 \"emit\" is a step of another protocol's flow, and this flow runs over DDP"]
        );
        assert_eq!(
            problems("  - engine: socketio\n    flow:\n      - emit: {data: 1}\n"),
            ["7:15 emit needs \"channel\""]
        );
        assert_eq!(
            problems("  - engine: graphql-ws\n    flow:\n      - execute: {query: \"{ a \"}\n"),
            ["7:26 query must be a GraphQL document with balanced { }"]
        );
        assert_eq!(
            problems("  - engine: socketio\n    flow:\n      - emit: [1, 2]\n"),
            ["7:15 an emit's first element is the event's name, a text"]
        );
        assert_eq!(
            problems("  - engine: mqtt\n    flow: [connect]\n")[0],
            "5:13 engine \"mqtt\" is not ddp, browser, socketio, graphql-ws or sse"
        );
    }

    #[test]
    fn sse_flows_and_their_config() {
        let s = load(concat!(
            "config:\n  target: http://h\n  phases: [{duration: 1, arrivalRate: 1}]\n",
            "  sse: { headers: { Authorization: \"Bearer {{ token }}\" }, retry: 250ms }\n",
            "  llm: { model: m1, goodput: \"ttft:500ms,tpot:50ms\" }\n",
            "  variables: { token: [t] }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - stream\n",
            "      - stream: { url: /feed, json: { a: 1 }, events: 3, until: done, match: { status: ok }, keep: true }\n",
            "      - listen: { channel: tick, count: 2 }\n",
            "      - chat: { messages: [{ role: user, content: hi }], max_tokens: { mean: 64, stddev: 8 }, temperature: 0 }\n",
            "      - chat: { prompt: Once, model: m2, max_tokens: 5 }\n",
        ))
        .unwrap();
        let f = &s.flows[0];
        assert_eq!(f.engine, Engine::Sse);
        let names: Vec<&str> = f.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["connect", "stream", "stream /feed", "listen tick", "chat", "completion"]);
        let StepKind::Stream(st) = &f.steps[2].kind else { panic!() };
        assert_eq!((st.method.as_str(), st.events, st.keep), ("POST", Some(3), true));
        assert_eq!(st.until, Some(StreamEnd { event: Some("done".into()), data: None }));
        assert_eq!(st.headers, [("Authorization".to_string(), "Bearer {{ token }}".to_string())]);
        assert_eq!(st.reconnect, Some(Duration::from_millis(250)));
        let StepKind::Chat(c) = &f.steps[4].kind else { panic!() };
        assert_eq!(c.model.as_deref(), Some("m1"));
        assert_eq!(c.max_tokens, Some(Length { mean: 64, stddev: 8, min: 1, max: 256 }));
        assert_eq!(c.extra, [("temperature".to_string(), serde_json::json!(0))]);
        assert_eq!(
            c.goodput,
            [("ttft".into(), Duration::from_millis(500)), ("tpot".into(), Duration::from_millis(50))]
        );
        let StepKind::Chat(c) = &f.steps[5].kind else { panic!() };
        assert_eq!((c.model.as_deref(), c.prompt.clone()), (Some("m2"), Some(serde_json::json!("Once"))));

        let head = "config:\n  target: http://h\n  phases: [{duration: 1, arrivalRate: 1}]\n";
        let problems = |text: &str| -> Vec<String> {
            load(&format!("{head}{text}"))
                .unwrap_err()
                .problems
                .iter()
                .map(|p| format!("{}:{} {}", p.line, p.col, p.message))
                .collect()
        };
        let flow = |steps: &str| problems(&format!("scenarios:\n  - engine: sse\n    flow:\n{steps}"));
        assert_eq!(
            flow("      - chat: { prompt: a, messages: [] }\n"),
            ["7:15 chat has one of messages, prompt and input_tokens"]
        );
        assert_eq!(flow("      - stream: { until: {} }\n"), ["7:26 until needs event or data"]);
        assert_eq!(flow("      - chat: { stream: false }\n"), ["7:17 chat always streams, with the usage asked for"]);
        assert_eq!(flow("      - emit: {channel: x}\n"), ["7:9 \"emit\" is not a step of an engine: sse flow"]);
        assert_eq!(
            flow("      - stream: { url: /a, keep: true }\n"),
            ["7:34 keep needs events or until: the step ends there and the stream stays open"]
        );
        assert_eq!(
            flow("      - stream: { events: 0 }\n"),
            ["7:27 events must be at least 1 (without it, the stream is read to its end)"]
        );
        assert_eq!(
            problems("  llm: { goodput: \"ttft:fast\" }\nscenarios:\n  - engine: sse\n    flow: [stream]\n"),
            ["4:19 config.llm.goodput: \"ttft:fast\" is not a level with a duration"]
        );
    }

    #[test]
    fn operation_names() {
        assert_eq!(operation_name("mutation Add($t: String!) { addTask(text: $t) { id } }"), "mutation Add");
        assert_eq!(operation_name("{ tasks { id } }"), "query tasks");
        assert_eq!(operation_name("subscription { taskAdded { id } }"), "subscription taskAdded");
        assert_eq!(operation_name("query Tasks { tasks { id } }"), "query Tasks");
    }

    #[test]
    fn a_small_valid_file() {
        let s = load(
            "config:\n  target: http://127.0.0.1:3000\n  phases:\n    - duration: 10\n      arrivalRate: 2\n      rampTo: 4\n    - pause: 5s\n  ddp: {transport: sockjs}\nscenarios:\n  - flow:\n      - connect\n      - call: {method: m, params: {a: \"{{ $vuId }}\"}, capture: x}\n      - think: {min: 1, max: 2}\n      - loop:\n          - get: {url: /ok, expect: 200}\n        count: 3\n",
        )
        .unwrap();
        assert_eq!(s.config.phases.len(), 2);
        assert_eq!(s.config.ddp.transport, Transport::SockJs);
        assert_eq!(s.flows[0].steps.len(), 4);
        assert_eq!(s.step_names(), ["connect", "call m", "GET /ok"]);
    }

    #[test]
    fn http_steps_choose_http2() {
        let file = |step: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases: [{{duration: 1, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - {step}\n")
        };
        let http2 = |s: &Scenario| match &s.flows[0].steps[0].kind {
            StepKind::Http(h) => h.http2,
            _ => panic!("not an HTTP step"),
        };
        assert!(http2(&load(&file("get: {url: /ok, http2: true}")).unwrap()));
        assert!(!http2(&load(&file("post: {url: /ok, json: {a: 1}}")).unwrap()));
        let err = load(&file("get: {url: /ok, http2: yes please}")).unwrap_err().to_string();
        assert!(err.contains("test.yml:6:32") && err.contains("http2 must be true or false"), "{err}");
    }

    #[test]
    fn http_steps_expect_statuses() {
        let file = |step: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases: [{{duration: 1, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - {step}\n")
        };
        let expected = |s: &Scenario| match &s.flows[0].steps[0].kind {
            StepKind::Http(h) => h.expect_status.to_string(),
            _ => panic!("not an HTTP step"),
        };
        // Each row: the step, the set it expects.
        let rows = [
            ("get: {url: /ok}", "200-399"),
            ("get: {url: /ok, expect: 201}", "201"),
            ("get: {url: /ok, expect: {statusCode: 404}}", "404"),
            ("get: {url: /ok, expect: {status: \"200-299,404\"}}", "200-299,404"),
            ("get: {url: /ok, expect: {status: [200-299, 404]}}", "200-299,404"),
        ];
        for (step, want) in rows {
            assert_eq!(expected(&load(&file(step)).unwrap()), want, "{step}");
        }
        // Each row: the step, the error's position and words.
        let rows = [
            ("get: {url: /ok, expect: 2xx}", "test.yml:6:33", "\"2xx\" is not a status code"),
            ("get: {url: /ok, expect: {status: 700}}", "test.yml:6:42", "\"700\" is not a status code"),
            ("get: {url: /ok, expect: {status: 200, statusCode: 200}}", "test.yml:6:59", "not both"),
            ("get: {url: /ok, expect: {}}", "test.yml:6:33", "expect needs status"),
        ];
        for (step, at, words) in rows {
            let e = load(&file(step)).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(words), "{step}: {e}");
        }
    }

    #[test]
    fn placeholders_reach_into_captured_values() {
        let file = |step: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases: [{{duration: 1, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      - call: {{method: fetchTasks, capture: ids}}\n      - {step}\n")
        };
        assert!(load(&file("call: {method: removeTask, params: [\"{{ ids[0] }}\"]}")).is_ok());
        assert!(load(&file("call: {method: removeTask, params: [\"{{ ids[0].taskId }}\"]}")).is_ok());
        let e = load(&file("call: {method: removeTask, params: [\"{{ ids[x] }}\"]}")).unwrap_err().to_string();
        assert!(e.contains("is not a variable or a path into one"), "{e}");
        let e = load(&file("call: {method: removeTask, params: [\"{{ idz[0] }}\"]}")).unwrap_err().to_string();
        assert!(e.contains("\"{{ idz }}\" is not a variable") && e.contains("did you mean \"{{ ids }}\""), "{e}");
    }

    #[test]
    fn set_gives_a_user_variables_for_later_steps() {
        let file = |step: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases: [{{duration: 1, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      - {step}\n      - call: {{method: removeTask, params: [\"{{{{ task }}}}\"]}}\n")
        };
        let s = load(&file("set: {task: \"{{ $randomId }}\", label: \"t-{{ task }}\"}")).unwrap();
        let StepKind::Set(values) = &s.flows[0].steps[1].kind else { panic!("{:?}", s.flows[0].steps[1]) };
        let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["task", "label"]);
        // A set is no measured step.
        assert_eq!(s.step_names(), ["connect", "call removeTask"]);
        // Each row: the step, the error's position and words.
        let rows = [
            ("set: [task]", "test.yml:7:14", "set must be a mapping of name: value"),
            ("set: {$vuId: x}", "test.yml:7:15", "a variable bolide gives every user"),
            ("set: {\"a b\": x}", "test.yml:7:15", "letters, digits and _"),
            ("set: {}", "test.yml:7:14", "set names no variable"),
            ("set: {other: \"{{ nope }}\"}", "test.yml:7:", "\"{{ nope }}\" is not a variable"),
        ];
        for (step, at, words) in rows {
            let e = load(&file(step)).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(words), "{step}: {e}");
        }
    }

    #[test]
    fn looping_users_phases() {
        let file = |phase: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases:\n    - {phase}\nscenarios:\n  - flow:\n      - connect\n")
        };
        let s = load(&file("{duration: 30, users: 50}")).unwrap();
        assert_eq!(s.config.phases[0].kind, PhaseKind::Users(50));
        let s = load(&file("{duration: 30, arrivalRate: 2, poisson: true}")).unwrap();
        assert_eq!(s.config.phases[0].burstiness, Some(1.0));
        let s = load(&file("{duration: 30, arrivalCount: 9, burstiness: 0.5}")).unwrap();
        assert_eq!(s.config.phases[0].burstiness, Some(0.5));
        // Each row: the phase, the error's position and words.
        let rows = [
            ("{duration: 30, users: 0}", "test.yml:4:29", "users must be at least 1"),
            ("{duration: 30, users: 5, arrivalRate: 2}", "test.yml:4:45", "cannot have \"arrivalRate\""),
            ("{pause: 5, users: 5}", "test.yml:4:25", "a pause phase cannot have \"users\""),
            ("{users: 5}", "test.yml:4:7", "duration"),
            ("{duration: 3, users: lots}", "test.yml:4:28", "users must be a whole number"),
            ("{duration: 3, users: 2, poisson: true}", "test.yml:4:40", "cannot have \"poisson\""),
            ("{duration: 3, arrivalRate: 2, burstiness: 0}", "test.yml:4:49", "burstiness must be from 0.01 to 100"),
            ("{duration: 3, arrivalRate: 2, rampTo: 4, poisson: true}", "test.yml:4:57", "need a steady arrivalRate"),
            ("{duration: 100000, arrivalRate: 1000, poisson: true}", "test.yml:4:54", "at most 20000000 users"),
        ];
        for (phase, at, words) in rows {
            let e = load(&file(phase)).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(words), "{phase}: {e}");
        }
    }

    #[test]
    fn audit_steps_read_every_form_and_say_what_is_wrong_where() {
        let file = |step: &str| {
            format!("config:\n  target: http://127.0.0.1:3000\n  phases: [{{duration: 1, arrivalCount: 1}}]\nscenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - {step}\n")
        };
        let audit = |step: &str| match load(&file(step)).unwrap().flows[0].steps[2].clone() {
            Step { name, kind: StepKind::Audit(a) } => (name, a),
            other => panic!("{other:?}"),
        };
        assert_eq!(audit("audit"), ("audit".to_string(), Audit::default()));
        assert_eq!(audit("audit: {}").1, Audit::default());
        let (name, a) = audit("audit: taskCollection");
        assert_eq!((name.as_str(), a.collection.as_deref()), ("audit taskCollection", Some("taskCollection")));
        let (name, a) =
            audit("audit: {collection: c, subscription: fetchTasks, params: [1], settle: 50ms, timeout: 3s}\n        label: mine");
        assert_eq!(name, "mine");
        assert_eq!(
            a,
            Audit {
                collection: Some("c".into()),
                subscription: Some("fetchTasks".into()),
                params: Some(vec![serde_json::json!(1)]),
                settle: Duration::from_millis(50),
                timeout: Duration::from_secs(3),
            }
        );
        // Each row: the step, the error's position and words.
        let rows = [
            ("audit: {collection: c, params: [1]}", "test.yml:8:16", "give subscription as well"),
            ("audit: {settle: 20s}", "test.yml:8:", "must be shorter than its timeout"),
            ("audit: {colection: c}", "test.yml:8:", "colection"),
            ("audit: [c]", "test.yml:8:16", "audit"),
        ];
        for (step, at, words) in rows {
            let e = load(&file(step)).unwrap_err().to_string();
            assert!(e.contains(at) && e.contains(words), "{step}: {e}");
        }
    }
}

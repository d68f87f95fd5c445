//! DDP version 1 messages as typed values. EJSON payloads (`params`, `fields`, `result`) stay in
//! their JSON form (`serde_json::Value`), decoded with [`crate::Ejson`] only where someone looks
//! inside; forwarding them costs nothing.
//!
//! Parsing follows Meteor's server: unknown fields are ignored; a message Meteor would reject gets
//! a [`ParseError`] that says which reply Meteor gives (`reply_reason`) and keeps the offending
//! message for that reply.

use serde_json::{Map, Value};

/// Document fields, in EJSON's JSON form, key order kept.
pub type Fields = Map<String, Value>;

/// A method or subscription error as Meteor sends it (`error` may be a string or a number).
#[derive(Debug, Clone, PartialEq)]
pub struct DdpError {
    pub error: Value,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub error_type: Option<String>,
    pub details: Option<Value>,
}

impl DdpError {
    /// A `Meteor.Error(error, reason)`, with the `message` and flags Meteor adds.
    pub fn meteor(error: impl Into<Value>, reason: &str) -> DdpError {
        let error = error.into();
        let shown = match &error {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        DdpError {
            message: Some(format!("{reason} [{shown}]")),
            error,
            reason: Some(reason.to_string()),
            error_type: Some("Meteor.Error".into()),
            details: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("isClientSafe".into(), Value::Bool(true));
        m.insert("error".into(), self.error.clone());
        if let Some(r) = &self.reason {
            m.insert("reason".into(), Value::String(r.clone()));
        }
        if let Some(msg) = &self.message {
            m.insert("message".into(), Value::String(msg.clone()));
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        if let Some(t) = &self.error_type {
            m.insert("errorType".into(), Value::String(t.clone()));
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Option<DdpError> {
        let obj = v.as_object()?;
        let text = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
        Some(DdpError {
            error: obj.get("error").cloned().unwrap_or(Value::Null),
            reason: text("reason"),
            message: text("message"),
            error_type: text("errorType"),
            details: obj.get("details").cloned(),
        })
    }

    /// `error` as text, whether it was sent as a string or a number.
    pub fn code(&self) -> String {
        match &self.error {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// Every message of DDP version 1.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Connect { session: Option<String>, version: String, support: Vec<String> },
    Connected { session: String },
    Failed { version: String },
    Ping { id: Option<String> },
    Pong { id: Option<String> },
    Sub { id: String, name: String, params: Vec<Value> },
    Unsub { id: String },
    Nosub { id: String, error: Option<DdpError> },
    Ready { subs: Vec<String> },
    Added { collection: String, id: String, fields: Fields },
    Changed { collection: String, id: String, fields: Fields, cleared: Vec<String> },
    Removed { collection: String, id: String },
    AddedBefore { collection: String, id: String, fields: Fields, before: Option<String> },
    MovedBefore { collection: String, id: String, before: Option<String> },
    Method { method: String, params: Vec<Value>, id: String, random_seed: Option<String> },
    Result { id: String, result: Option<Value>, error: Option<DdpError> },
    Updated { methods: Vec<String> },
    Error { reason: String, offending_message: Option<Value> },
}

/// Why a payload is not a message we can act on.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// Not JSON, or not a JSON object.
    BadJson(String),
    /// A JSON object without `msg`: Meteor's legacy `{"server_id": "0"}` greeting, for instance.
    NoMsg(Value),
    /// A `msg` this side does not know.
    UnknownMsg { msg: String, value: Value },
    /// A known message whose fields have the wrong shape.
    Malformed { msg: String, what: String, value: Value },
}

impl ParseError {
    /// The `reason` of Meteor's top-level `error` reply to this input.
    pub fn reply_reason(&self) -> &'static str {
        match self {
            ParseError::Malformed { msg, .. } if msg == "method" => "Malformed method invocation",
            ParseError::Malformed { msg, .. } if msg == "sub" => "Malformed subscription",
            _ => "Bad request",
        }
    }

    /// The message to echo as `offendingMessage` (none for unparsable JSON).
    pub fn offending(&self) -> Option<&Value> {
        match self {
            ParseError::BadJson(_) => None,
            ParseError::NoMsg(v) => Some(v),
            ParseError::UnknownMsg { value, .. } | ParseError::Malformed { value, .. } => Some(value),
        }
    }

    /// Meteor's reply to this input, as a message.
    pub fn reply(&self) -> Message {
        Message::Error { reason: self.reply_reason().to_string(), offending_message: self.offending().cloned() }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::BadJson(why) => write!(f, "not a JSON object: {why}"),
            ParseError::NoMsg(_) => write!(f, "message without a msg field"),
            ParseError::UnknownMsg { msg, .. } => write!(f, "unknown message type {msg:?}"),
            ParseError::Malformed { msg, what, .. } => write!(f, "malformed {msg}: {what}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Field readers that name what is wrong. The reader owns the message, so large payloads
/// (`fields`, `params`, `result`) are moved out rather than copied; they are taken last, after
/// every check, so an error can still show the whole message.
struct Reader<'a> {
    msg: &'a str,
    obj: Map<String, Value>,
}

impl Reader<'_> {
    fn bad(&self, what: String) -> ParseError {
        ParseError::Malformed { msg: self.msg.to_string(), what, value: Value::Object(self.obj.clone()) }
    }

    fn string(&self, key: &str) -> Result<String, ParseError> {
        match self.obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.bad(format!("{key} must be a string, not {}", kind(other)))),
            None => Err(self.bad(format!("{key} is missing"))),
        }
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, ParseError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.bad(format!("{key} must be a string, not {}", kind(other)))),
        }
    }

    fn strings(&self, key: &str, required: bool) -> Result<Vec<String>, ParseError> {
        match self.obj.get(key) {
            None if !required => Ok(Vec::new()),
            None => Err(self.bad(format!("{key} is missing"))),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or_else(|| self.bad(format!("{key} must hold strings"))))
                .collect(),
            Some(other) => Err(self.bad(format!("{key} must be an array of strings, not {}", kind(other)))),
        }
    }

    /// Checks that `key` is absent or an array (take it later with [`Reader::take_array`]).
    fn check_array(&self, key: &str) -> Result<(), ParseError> {
        match self.obj.get(key) {
            None | Some(Value::Array(_)) => Ok(()),
            Some(other) => Err(self.bad(format!("{key} must be an array, not {}", kind(other)))),
        }
    }

    fn check_fields(&self, key: &str) -> Result<(), ParseError> {
        match self.obj.get(key) {
            None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
            Some(other) => Err(self.bad(format!("{key} must be an object, not {}", kind(other)))),
        }
    }

    fn take_array(&mut self, key: &str) -> Vec<Value> {
        match self.obj.swap_remove(key) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        }
    }

    fn take_fields(&mut self, key: &str) -> Fields {
        match self.obj.swap_remove(key) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    fn error(&self, key: &str) -> Option<DdpError> {
        self.obj.get(key).and_then(DdpError::from_json)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Message {
    /// Parses one DDP message from its JSON text.
    pub fn parse(text: &str) -> Result<Message, ParseError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ParseError::BadJson(e.to_string()))?;
        Message::from_value(value)
    }

    /// Parses one DDP message from a JSON value.
    pub fn from_value(value: Value) -> Result<Message, ParseError> {
        let obj = match value {
            Value::Object(obj) => obj,
            other => return Err(ParseError::BadJson(format!("expected an object, got {}", kind(&other)))),
        };
        let msg = match obj.get("msg") {
            None => return Err(ParseError::NoMsg(Value::Object(obj))),
            Some(Value::String(m)) => m.clone(),
            Some(other) => return Err(ParseError::UnknownMsg { msg: other.to_string(), value: Value::Object(obj) }),
        };
        let mut r = Reader { msg: &msg, obj };
        Ok(match msg.as_str() {
            "connect" => Message::Connect {
                session: r.opt_string("session")?,
                version: r.string("version")?,
                support: r.strings("support", true)?,
            },
            "connected" => Message::Connected { session: r.string("session")? },
            "failed" => Message::Failed { version: r.string("version")? },
            "ping" => Message::Ping { id: r.opt_string("id")? },
            "pong" => Message::Pong { id: r.opt_string("id")? },
            "sub" => {
                let (id, name) = (r.string("id")?, r.string("name")?);
                r.check_array("params")?;
                Message::Sub { id, name, params: r.take_array("params") }
            }
            "unsub" => Message::Unsub { id: r.string("id")? },
            "nosub" => Message::Nosub { id: r.string("id")?, error: r.error("error") },
            "ready" => Message::Ready { subs: r.strings("subs", true)? },
            "added" => {
                let (collection, id) = (r.string("collection")?, r.string("id")?);
                r.check_fields("fields")?;
                Message::Added { collection, id, fields: r.take_fields("fields") }
            }
            "changed" => {
                let (collection, id) = (r.string("collection")?, r.string("id")?);
                let cleared = r.strings("cleared", false)?;
                r.check_fields("fields")?;
                Message::Changed { collection, id, fields: r.take_fields("fields"), cleared }
            }
            "removed" => Message::Removed { collection: r.string("collection")?, id: r.string("id")? },
            "addedBefore" => {
                let (collection, id, before) = (r.string("collection")?, r.string("id")?, r.opt_string("before")?);
                r.check_fields("fields")?;
                Message::AddedBefore { collection, id, fields: r.take_fields("fields"), before }
            }
            "movedBefore" => Message::MovedBefore {
                collection: r.string("collection")?,
                id: r.string("id")?,
                before: r.opt_string("before")?,
            },
            "method" => {
                let (method, id, random_seed) = (r.string("method")?, r.string("id")?, r.opt_string("randomSeed")?);
                r.check_array("params")?;
                Message::Method { method, params: r.take_array("params"), id, random_seed }
            }
            "result" => {
                let (id, error) = (r.string("id")?, r.error("error"));
                Message::Result { id, result: r.obj.swap_remove("result"), error }
            }
            "updated" => Message::Updated { methods: r.strings("methods", true)? },
            "error" => Message::Error {
                reason: r.opt_string("reason")?.unwrap_or_default(),
                offending_message: r.obj.swap_remove("offendingMessage"),
            },
            other => return Err(ParseError::UnknownMsg { msg: other.to_string(), value: Value::Object(r.obj) }),
        })
    }

    /// The JSON value of this message (`msg` first; empty `fields` and absent options left out).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        let s = |x: &str| Value::String(x.to_string());
        let list = |xs: &[String]| Value::Array(xs.iter().map(|x| Value::String(x.clone())).collect());
        match self {
            Message::Connect { session, version, support } => {
                put("msg", s("connect"));
                if let Some(sess) = session {
                    put("session", s(sess));
                }
                put("version", s(version));
                put("support", list(support));
            }
            Message::Connected { session } => {
                put("msg", s("connected"));
                put("session", s(session));
            }
            Message::Failed { version } => {
                put("msg", s("failed"));
                put("version", s(version));
            }
            Message::Ping { id } | Message::Pong { id } => {
                put("msg", s(if matches!(self, Message::Ping { .. }) { "ping" } else { "pong" }));
                if let Some(id) = id {
                    put("id", s(id));
                }
            }
            Message::Sub { id, name, params } => {
                put("msg", s("sub"));
                put("id", s(id));
                put("name", s(name));
                put("params", Value::Array(params.clone()));
            }
            Message::Unsub { id } => {
                put("msg", s("unsub"));
                put("id", s(id));
            }
            Message::Nosub { id, error } => {
                put("msg", s("nosub"));
                put("id", s(id));
                if let Some(e) = error {
                    put("error", e.to_json());
                }
            }
            Message::Ready { subs } => {
                put("msg", s("ready"));
                put("subs", list(subs));
            }
            Message::Added { collection, id, fields } => {
                put("msg", s("added"));
                put("collection", s(collection));
                put("id", s(id));
                if !fields.is_empty() {
                    put("fields", Value::Object(fields.clone()));
                }
            }
            Message::Changed { collection, id, fields, cleared } => {
                put("msg", s("changed"));
                put("collection", s(collection));
                put("id", s(id));
                if !fields.is_empty() {
                    put("fields", Value::Object(fields.clone()));
                }
                if !cleared.is_empty() {
                    put("cleared", list(cleared));
                }
            }
            Message::Removed { collection, id } => {
                put("msg", s("removed"));
                put("collection", s(collection));
                put("id", s(id));
            }
            Message::AddedBefore { collection, id, fields, before } => {
                put("msg", s("addedBefore"));
                put("collection", s(collection));
                put("id", s(id));
                if !fields.is_empty() {
                    put("fields", Value::Object(fields.clone()));
                }
                put("before", before.as_deref().map_or(Value::Null, s));
            }
            Message::MovedBefore { collection, id, before } => {
                put("msg", s("movedBefore"));
                put("collection", s(collection));
                put("id", s(id));
                put("before", before.as_deref().map_or(Value::Null, s));
            }
            Message::Method { method, params, id, random_seed } => {
                put("msg", s("method"));
                put("method", s(method));
                put("params", Value::Array(params.clone()));
                put("id", s(id));
                if let Some(seed) = random_seed {
                    put("randomSeed", s(seed));
                }
            }
            Message::Result { id, result, error } => {
                put("msg", s("result"));
                put("id", s(id));
                if let Some(e) = error {
                    put("error", e.to_json());
                } else if let Some(r) = result {
                    put("result", r.clone());
                }
            }
            Message::Updated { methods } => {
                put("msg", s("updated"));
                put("methods", list(methods));
            }
            Message::Error { reason, offending_message } => {
                put("msg", s("error"));
                put("reason", s(reason));
                if let Some(o) = offending_message {
                    put("offendingMessage", o.clone());
                }
            }
        }
        Value::Object(m)
    }

    /// The JSON text of this message.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Fields {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_message_round_trips() {
        let err = DdpError::meteor(404, "Method 'x' not found");
        let rows = vec![
            Message::Connect {
                session: None,
                version: "1".into(),
                support: vec!["1".into(), "pre2".into(), "pre1".into()],
            },
            Message::Connect { session: Some("s".into()), version: "1".into(), support: vec!["1".into()] },
            Message::Connected { session: "AbCdEfGhJkMnPqRsT".into() },
            Message::Failed { version: "1".into() },
            Message::Ping { id: None },
            Message::Ping { id: Some("x".into()) },
            Message::Pong { id: Some("x".into()) },
            Message::Sub { id: "a".into(), name: "fetchTasks".into(), params: vec![] },
            Message::Unsub { id: "a".into() },
            Message::Nosub { id: "a".into(), error: None },
            Message::Nosub { id: "a".into(), error: Some(DdpError::meteor(404, "Subscription 'x' not found")) },
            Message::Ready { subs: vec!["a".into()] },
            Message::Added {
                collection: "c".into(),
                id: "1".into(),
                fields: fields(json!({"createdAt": {"$date": 5}})),
            },
            Message::Added { collection: "c".into(), id: "1".into(), fields: Map::new() },
            Message::Changed {
                collection: "c".into(),
                id: "1".into(),
                fields: fields(json!({"a": 1})),
                cleared: vec!["b".into()],
            },
            Message::Removed { collection: "c".into(), id: "1".into() },
            Message::AddedBefore { collection: "c".into(), id: "1".into(), fields: Map::new(), before: None },
            Message::MovedBefore { collection: "c".into(), id: "1".into(), before: Some("2".into()) },
            Message::Method {
                method: "insertTask".into(),
                params: vec![json!({"description": "d"})],
                id: "1".into(),
                random_seed: Some("0123456789abcdef0123".into()),
            },
            Message::Result { id: "1".into(), result: Some(json!("newid")), error: None },
            Message::Result { id: "1".into(), result: None, error: None },
            Message::Result { id: "2".into(), result: None, error: Some(err) },
            Message::Updated { methods: vec!["1".into()] },
            Message::Error { reason: "Bad request".into(), offending_message: Some(json!({"msg": "nope"})) },
        ];
        for m in rows {
            let text = m.to_json();
            assert!(text.starts_with(r#"{"msg":"#), "msg first: {text}");
            assert_eq!(Message::parse(&text).unwrap(), m, "{text}");
        }
    }

    #[test]
    fn wire_forms_match_meteor() {
        // Empty fields are left out; a removal of fields is `cleared`, never null.
        let m =
            Message::Changed { collection: "c".into(), id: "1".into(), fields: Map::new(), cleared: vec!["x".into()] };
        assert_eq!(m.to_json(), r#"{"msg":"changed","collection":"c","id":"1","cleared":["x"]}"#);
        let e = DdpError::meteor(404, "Method 'nope' not found");
        let r = Message::Result { id: "7".into(), result: None, error: Some(e) };
        assert_eq!(
            r.to_json(),
            r#"{"msg":"result","id":"7","error":{"isClientSafe":true,"error":404,"reason":"Method 'nope' not found","message":"Method 'nope' not found [404]","errorType":"Meteor.Error"}}"#
        );
    }

    #[test]
    fn unknown_fields_are_ignored_and_errors_accept_strings_or_numbers() {
        let m = Message::parse(r#"{"msg":"ready","subs":["a"],"extra":{"x":1}}"#).unwrap();
        assert_eq!(m, Message::Ready { subs: vec!["a".into()] });
        for (text, code) in [
            (r#"{"msg":"nosub","id":"a","error":{"error":404}}"#, "404"),
            (r#"{"msg":"nosub","id":"a","error":{"error":"not-found"}}"#, "not-found"),
        ] {
            let Message::Nosub { error: Some(e), .. } = Message::parse(text).unwrap() else { panic!("{text}") };
            assert_eq!(e.code(), code);
        }
    }

    #[test]
    fn malformed_input_and_meteors_replies() {
        // Each row: input, Meteor's reply reason, whether the input is echoed as offendingMessage.
        let rows = [
            ("not json", "Bad request", false),
            ("[1,2]", "Bad request", false),
            (r#"{"server_id":"0"}"#, "Bad request", true),
            (r#"{"msg":"launch"}"#, "Bad request", true),
            (r#"{"msg":7}"#, "Bad request", true),
            (r#"{"msg":"method","method":"m","id":5}"#, "Malformed method invocation", true),
            (r#"{"msg":"method","method":"m","id":"1","params":{}}"#, "Malformed method invocation", true),
            (r#"{"msg":"method","method":"m","id":"1","randomSeed":3}"#, "Malformed method invocation", true),
            (r#"{"msg":"sub","id":"a","name":"x","params":"no"}"#, "Malformed subscription", true),
            (r#"{"msg":"sub","name":"x"}"#, "Malformed subscription", true),
            (r#"{"msg":"connect","version":"1"}"#, "Bad request", true),
        ];
        for (text, reason, echoed) in rows {
            let err = Message::parse(text).unwrap_err();
            assert_eq!(err.reply_reason(), reason, "{text}");
            assert_eq!(err.offending().is_some(), echoed, "{text}");
            let Message::Error { reason: r, .. } = err.reply() else { panic!() };
            assert_eq!(r, reason);
        }
    }

    #[test]
    fn numbers_survive_a_round_trip_exactly() {
        // Found by fuzzing: without exact float parsing this number came back one ulp off.
        let text = r#"{"msg":"changed","collection":"c","id":"1","fields":{"x":{"$type":-118446744073709551616}}}"#;
        let m = Message::parse(text).unwrap();
        assert_eq!(Message::parse(&m.to_json()).unwrap(), m);
    }

    #[test]
    fn garbage_never_panics() {
        let inputs = [
            "",
            "{",
            "null",
            "\"s\"",
            "{\"msg\":null}",
            "{\"msg\":\"added\"}",
            "{\"msg\":\"changed\",\"collection\":1}",
            "{\"msg\":\"result\"}",
            "\u{0}",
            "{\"msg\":\"ready\",\"subs\":[1]}",
        ];
        for input in inputs {
            assert!(Message::parse(input).is_err(), "{input:?}");
        }
    }
}

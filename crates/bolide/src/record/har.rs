//! A HAR file's WebSocket connections and their frames, as Chrome DevTools, Playwright
//! (`recordHar` with `content: "embed"`) and mitmproxy save them: entries whose
//! `_webSocketMessages` list `{type: send|receive, time, opcode, data}`; then the DDP messages of
//! each, unwrapped from SockJS's framing where the connection is SockJS.

use std::path::Path;

use serde_json::Value;

use crate::problem::Problem;

/// The largest HAR bolide reads (1 GiB): a browser session of hours; more is refused at once.
pub const MAX_HAR_BYTES: u64 = 1 << 30;

/// How a connection carries DDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    WebSocket,
    SockJs,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::SockJs => "sockjs",
        }
    }
}

/// One WebSocket connection of the HAR.
#[derive(Debug, Clone)]
pub struct Connection {
    pub url: String,
    /// Whether the server accepted permessage-deflate (None: the HAR does not say).
    pub compression: Option<bool>,
    /// Text frames, in time order.
    pub frames: Vec<Frame>,
    /// Binary frames, left out.
    pub binary: usize,
    /// The time of its last text frame (kept when the frames are turned into messages).
    pub last_s: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct Frame {
    pub sent: bool,
    /// Seconds since the epoch.
    pub time_s: f64,
    pub data: String,
}

/// A plain HTTP request of the HAR (no WebSocket): what a `get` or `post` step may replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Seconds since the epoch (from `startedDateTime`; 0 when the HAR has none).
    pub time_s: f64,
    /// How long it took, in seconds (the entry's `time`).
    pub duration_s: f64,
    pub method: String,
    pub url: String,
    pub status: u16,
    /// The answer's content type, without parameters.
    pub mime: String,
    /// Chrome's `_resourceType` (document, script, xhr, fetch, ...), when the HAR has it.
    pub resource_type: Option<String>,
    /// The request's body: its content type and text.
    pub body: Option<(String, String)>,
}

impl Request {
    /// A page's static asset (script, style, image, font, media, source map): left out of a
    /// scenario unless asked for; the document itself and API calls are not.
    pub fn is_static(&self) -> bool {
        if let Some(t) = &self.resource_type {
            if matches!(t.as_str(), "script" | "stylesheet" | "image" | "font" | "media" | "manifest" | "texttrack") {
                return true;
            }
        }
        let m = self.mime.as_str();
        if m.contains("javascript")
            || m == "text/css"
            || ["image/", "font/", "audio/", "video/"].iter().any(|p| m.starts_with(p))
        {
            return true;
        }
        let path = self.url.split(['?', '#']).next().unwrap_or("");
        let ext = path.rsplit('/').next().and_then(|f| f.rsplit_once('.')).map(|(_, e)| e.to_ascii_lowercase());
        matches!(
            ext.as_deref(),
            Some(
                "js" | "mjs"
                    | "css"
                    | "map"
                    | "png"
                    | "jpg"
                    | "jpeg"
                    | "gif"
                    | "svg"
                    | "ico"
                    | "webp"
                    | "avif"
                    | "woff"
                    | "woff2"
                    | "ttf"
                    | "otf"
                    | "eot"
                    | "mp4"
                    | "webm"
                    | "mp3"
            )
        )
    }
}

/// What bolide reads of a HAR: its WebSocket connections and its plain HTTP requests.
#[derive(Debug, Clone, Default)]
pub struct Har {
    pub connections: Vec<Connection>,
    pub requests: Vec<Request>,
}

/// A DDP message of a connection: sent by the browser or received, when, and the message.
#[derive(Debug, Clone)]
pub struct Message {
    pub sent: bool,
    pub time_s: f64,
    /// The message's JSON text, read again where it is needed: a long session's messages cost
    /// their text, not a tree of values each.
    text: Box<str>,
}

impl Message {
    pub fn new(sent: bool, time_s: f64, msg: &serde_json::Map<String, Value>) -> Message {
        Message { sent, time_s, text: Value::Object(msg.clone()).to_string().into() }
    }

    /// The message (an empty one if its text is no JSON object, which [`messages`] never keeps).
    pub fn msg(&self) -> serde_json::Map<String, Value> {
        match serde_json::from_str(&self.text) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        }
    }

    /// Its `msg` field: `connect`, `method`, `added`, ...
    pub fn kind(&self) -> String {
        #[derive(serde::Deserialize)]
        struct Kind {
            msg: Option<Value>,
        }
        serde_json::from_str::<Kind>(&self.text)
            .ok()
            .and_then(|k| k.msg)
            .and_then(|m| m.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// Reads the HAR at `path`: every WebSocket connection with its frames, and the plain HTTP
/// requests. The error says why the file is not a HAR (with the line and column of broken JSON).
/// A file is read as a stream, twice (its JSON first, then what bolide keeps of it), so that what
/// it holds besides the frames and requests (response bodies, headers, timings) costs no memory.
pub fn read(path: &Path) -> Result<Har, Problem> {
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let open = || std::fs::File::open(path).map(std::io::BufReader::new).map_err(at);
    let meta = std::fs::metadata(path).map_err(at)?;
    if !meta.is_file() {
        // A pipe or a device: read once, within the limit.
        let bytes = crate::files::read_limited(path, MAX_HAR_BYTES).map_err(at)?;
        return parse(&bytes).map_err(|e| Problem::from(format!("{}:{e}", path.display())));
    }
    if meta.len() > MAX_HAR_BYTES {
        return Err(
            format!("{}: larger than {} MiB, the most bolide reads", path.display(), MAX_HAR_BYTES >> 20).into()
        );
    }
    let syntax = serde_json::from_reader::<_, serde::de::IgnoredAny>(open()?);
    let kept = syntax
        .map_err(json_error)
        .and_then(|_| serde_json::from_reader::<_, HarFile>(open()?).map_err(json_error).and_then(HarFile::into_har));
    kept.map_err(|e| Problem::from(format!("{}:{e}", path.display())))
}

/// [`read`] on the file's bytes; errors start with `LINE:COLUMN: ` where they have a place.
pub fn parse(bytes: &[u8]) -> Result<Har, Problem> {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(json_error)?;
    serde_json::from_slice::<HarFile>(bytes).map_err(json_error)?.into_har()
}

fn json_error(e: serde_json::Error) -> Problem {
    let what = if e.is_eof() { "the file ends inside its JSON (truncated?)".to_string() } else { e.to_string() };
    // serde_json's own words end with " at line L column C": the place is said first.
    let what = what.split(" at line ").next().unwrap_or(&what).to_string();
    Problem::from(format!("{}:{}: not a HAR: {what}", e.line(), e.column()))
}

/// What bolide reads of a HAR file; anything else in it is skipped as it is read.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HarFile {
    log: Option<LogPart>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct LogPart {
    entries: Option<List<Entry>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Entry {
    request: Lenient<RequestPart>,
    response: Lenient<ResponsePart>,
    #[serde(rename = "startedDateTime")]
    started: Option<Value>,
    time: Option<Value>,
    #[serde(rename = "_resourceType")]
    resource_type: Option<Value>,
    #[serde(rename = "_webSocketMessages")]
    frames: Option<Frames>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct RequestPart {
    url: Option<Value>,
    method: Option<Value>,
    #[serde(rename = "postData")]
    post_data: Lenient<PostData>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PostData {
    #[serde(rename = "mimeType")]
    mime: Option<Value>,
    text: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct ResponsePart {
    status: Option<Value>,
    headers: Option<List<Header>>,
    content: Lenient<Content>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Header {
    name: Option<Value>,
    value: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Content {
    #[serde(rename = "mimeType")]
    mime: Option<Value>,
}

/// One `_webSocketMessages` item; only these fields are kept.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct WsMessage {
    #[serde(rename = "type")]
    kind: Option<Value>,
    time: Option<Value>,
    opcode: Option<Value>,
    data: Option<Value>,
}

/// A part of a HAR that is an object, or None when the file has something else there (`null`, a
/// string): skipped as it is read, as a lenient reader skips it, instead of refusing the file.
struct Lenient<T>(Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Lenient<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|t| Lenient(Some(t)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<T>, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Lenient<T>, E> {
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// A list of a HAR's objects, its items that are no object skipped (an empty list when the file
/// has no list there).
struct List<T>(Vec<T>);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for List<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(Lenient(item)) = seq.next_element::<Lenient<T>>()? {
                    out.extend(item);
                }
                Ok(List(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<List<T>, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(List(Vec::new()))
            }
            fn visit_unit<E>(self) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
            fn visit_str<E>(self, _: &str) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<List<T>, E> {
                Ok(List(Vec::new()))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// A connection's text frames, made as the list is read (no copy of the list is kept), and how
/// many binary frames were left out.
#[derive(Default)]
struct Frames {
    text: Vec<Frame>,
    binary: usize,
}

impl<'de> serde::Deserialize<'de> for Frames {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Frames;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of WebSocket messages")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Frames, A::Error> {
                let mut out = Frames::default();
                while let Some(m) = seq.next_element::<Lenient<WsMessage>>()? {
                    // A frame that is no object (null, a number) is skipped, as before.
                    let Lenient(Some(m)) = m else { continue };
                    let sent = match m.kind.as_ref().and_then(Value::as_str) {
                        Some("send") => true,
                        Some("receive") => false,
                        _ => continue,
                    };
                    if m.opcode.as_ref().and_then(Value::as_u64).unwrap_or(1) != 1 {
                        out.binary += 1;
                        continue;
                    }
                    let (Some(time), Some(Value::String(data))) = (m.time.as_ref().and_then(Value::as_f64), m.data)
                    else {
                        continue;
                    };
                    out.text.push(Frame { sent, time_s: time, data });
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Visit)
    }
}

impl HarFile {
    fn into_har(self) -> Result<Har, Problem> {
        let entries = self.log.and_then(|l| l.entries).ok_or_else(|| {
            " not a HAR: no log.entries (a HAR is JSON with {\"log\": {\"entries\": [...]}})".to_string()
        })?;
        let mut out = Vec::new();
        let mut requests = Vec::new();
        for e in entries.0 {
            let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).unwrap_or_default().to_string();
            let url = text(&e.request.0.as_ref().and_then(|r| r.url.clone()));
            let Some(frames) = e.frames else {
                if let Some(r) = request(e, url) {
                    requests.push(r);
                }
                continue;
            };
            let compression = e.response.0.as_ref().and_then(compression);
            let mut conn = Connection { url, compression, frames: frames.text, binary: frames.binary, last_s: None };
            // Chrome and mitmproxy write seconds since the epoch; Playwright milliseconds.
            if conn.frames.iter().any(|f| f.time_s > 1e11) {
                conn.frames.iter_mut().for_each(|f| f.time_s /= 1000.0);
            }
            conn.frames.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
            conn.last_s = conn.frames.last().map(|f| f.time_s);
            out.push(conn);
        }
        requests.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        Ok(Har { connections: out, requests })
    }
}

/// An entry without WebSocket frames as a plain request (None for a WebSocket handshake).
fn request(e: Entry, url: String) -> Option<Request> {
    let req = e.request.0?;
    let resp = e.response.0.unwrap_or_default();
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let status = resp.status.as_ref().and_then(Value::as_u64).unwrap_or(0) as u16;
    let resource_type = e.resource_type.as_ref().and_then(Value::as_str).map(str::to_string);
    if status == 101 || resource_type.as_deref() == Some("websocket") || url.starts_with("ws") {
        return None;
    }
    let mime = text(resp.content.0.as_ref().and_then(|c| c.mime.as_ref()));
    let mime = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let body = req.post_data.0.as_ref().and_then(|p| {
        let t = p.text.as_ref().and_then(Value::as_str)?;
        Some((text(p.mime.as_ref()), t.to_string()))
    });
    Some(Request {
        time_s: e.started.as_ref().and_then(Value::as_str).and_then(epoch_seconds).unwrap_or(0.0),
        duration_s: e.time.as_ref().and_then(Value::as_f64).filter(|t| *t >= 0.0).unwrap_or(0.0) / 1000.0,
        method: text(req.method.as_ref()).to_ascii_uppercase(),
        url,
        status,
        mime,
        resource_type,
        body,
    })
}

/// An ISO 8601 time as HARs write it (`2026-11-24T01:30:00.123Z`, or with an offset such as
/// `+01:00`, as mitmproxy writes it) in seconds since the epoch.
pub fn epoch_seconds(t: &str) -> Option<f64> {
    let t = t.trim();
    // The offset, if any, after the time of day.
    let (local, offset_s) = match t.get(19..).and_then(|rest| rest.find(['+', '-']).map(|i| 19 + i)) {
        Some(i) => {
            let (sign, hm) = (if &t[i..i + 1] == "-" { -1.0 } else { 1.0 }, &t[i + 1..]);
            let (h, m) = hm.split_once(':').unwrap_or((hm.get(..2)?, hm.get(2..).unwrap_or("0")));
            let off = h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0;
            (&t[..i], sign * off)
        }
        None => (t.trim_end_matches('Z'), 0.0),
    };
    let at = humantime::parse_rfc3339_weak(local).ok()?;
    let secs = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
    Some(secs - offset_s)
}

/// Whether the WebSocket handshake's answer accepted permessage-deflate.
fn compression(response: &ResponsePart) -> Option<bool> {
    let headers = &response.headers.as_ref()?.0;
    if headers.is_empty() {
        return None;
    }
    let text = |v: &Option<Value>| v.as_ref().and_then(Value::as_str).unwrap_or_default().to_string();
    Some(headers.iter().any(|h| {
        text(&h.name).eq_ignore_ascii_case("sec-websocket-extensions") && text(&h.value).contains("permessage-deflate")
    }))
}

/// The transport a connection's URL names: SockJS's `/sockjs/SERVER/SESSION/websocket`, or a raw
/// DDP WebSocket.
pub fn transport(url: &str) -> Transport {
    if url.contains("/sockjs/") {
        Transport::SockJs
    } else {
        Transport::WebSocket
    }
}

/// The server a connection's URL belongs to, as a scenario's target: `ws://host:3000/websocket`
/// -> `http://host:3000`; an error when the URL is none.
pub fn target(url: &str) -> Result<String, Problem> {
    let u = url::Url::parse(url).map_err(|e| format!("the connection's URL {url:?} is not a URL: {e}"))?;
    let scheme = match u.scheme() {
        "wss" | "https" => "https",
        "ws" | "http" => "http",
        other => return Err(format!("the connection's URL {url:?} has the scheme {other:?}, not ws or wss").into()),
    };
    let host = u.host_str().ok_or_else(|| format!("the connection's URL {url:?} names no host"))?;
    Ok(match u.port() {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// The DDP messages of a connection (SockJS frames unwrapped: `o`, `h`, `a[...]`, `c[...]` from
/// the server, `[...]` from the browser), its frames used up; frames that are no DDP message are
/// counted in `other`.
pub fn messages(conn: &mut Connection, other: &mut usize) -> Vec<Message> {
    let sockjs = transport(&conn.url) == Transport::SockJs;
    let mut out = Vec::new();
    for f in std::mem::take(&mut conn.frames) {
        let texts: Vec<String> = if sockjs {
            let body = if f.sent { Some(f.data.as_str()) } else { f.data.strip_prefix('a') };
            match body.map(serde_json::from_str::<Vec<String>>) {
                Some(Ok(v)) => v,
                // `o`, `h`, `c[...]`: framing, no DDP.
                None if matches!(f.data.chars().next(), Some('o' | 'h' | 'c')) => continue,
                _ => {
                    *other += 1;
                    continue;
                }
            }
        } else {
            vec![f.data]
        };
        for t in texts {
            #[derive(serde::Deserialize)]
            struct Kind {
                msg: Option<serde::de::IgnoredAny>,
            }
            // A JSON object with a `msg` (serde would read an array into the struct too).
            match serde_json::from_str::<Kind>(&t) {
                Ok(Kind { msg: Some(_) }) if t.trim_start().starts_with('{') => {
                    out.push(Message { sent: f.sent, time_s: f.time_s, text: t.into() })
                }
                // Meteor's legacy `{"server_id": ...}` greeting and anything else that is no DDP.
                _ => *other += 1,
            }
        }
    }
    out
}

/// Whether the browser opened DDP on this connection (it sent `connect`).
pub fn is_ddp(messages: &[Message]) -> bool {
    messages.iter().any(|m| m.sent && m.kind() == "connect")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_seconds_playwright_milliseconds_sockjs_unwrapped() {
        let har = r#"{"log":{"entries":[
          {"request":{"url":"http://x/"},"response":{"headers":[]}},
          {"request":{"url":"wss://app.example:8443/sockjs/123/abcd/websocket"},
           "response":{"headers":[{"name":"Sec-WebSocket-Extensions","value":"permessage-deflate"}]},
           "_webSocketMessages":[
             {"type":"receive","time":1795477935.7,"opcode":1,"data":"o"},
             {"type":"send","time":1795477935.6,"opcode":1,"data":"[\"{\\\"msg\\\":\\\"connect\\\",\\\"version\\\":\\\"1\\\"}\"]"},
             {"type":"receive","time":1795477935.8,"opcode":1,"data":"a[\"{\\\"msg\\\":\\\"connected\\\",\\\"session\\\":\\\"s\\\"}\"]"},
             {"type":"receive","time":1795477935.9,"opcode":2,"data":"AAEC"},
             {"type":"receive","time":1795477936.0,"opcode":1,"data":"h"}]},
          {"request":{"url":"ws://127.0.0.1:3000/websocket"},
           "_webSocketMessages":[
             {"type":"send","time":1795477935652.0,"opcode":1,"data":"{\"msg\":\"connect\"}"},
             {"type":"receive","time":1795477935656.5,"opcode":1,"data":"{\"server_id\":\"0\"}"}]}]}}"#;
        let conns = parse(har.as_bytes()).unwrap().connections;
        assert_eq!(conns.len(), 2);
        let mut conns = conns;
        let s = &mut conns[0];
        assert_eq!(
            (transport(&s.url), target(&s.url), s.compression, s.binary),
            (Transport::SockJs, Ok("https://app.example:8443".to_string()), Some(true), 1)
        );
        let mut other = 0;
        let m = messages(s, &mut other);
        // Out of order in the file, in time order here; `o` and `h` are framing.
        let kinds: Vec<String> = m.iter().map(Message::kind).collect();
        assert_eq!((kinds, other), (vec!["connect".to_string(), "connected".to_string()], 0));
        assert!(is_ddp(&m));
        let w = &mut conns[1];
        assert_eq!((transport(&w.url), w.compression), (Transport::WebSocket, None));
        assert!((w.frames[0].time_s - 1_795_477_935.652).abs() < 1e-6, "milliseconds read as such");
        let m = messages(w, &mut other);
        assert_eq!((m.len(), other), (1, 1), "the legacy greeting is no DDP message");
        // An array is no DDP message, even one serde could read as one.
        let mut arrays = Connection {
            url: "ws://x/websocket".into(),
            compression: None,
            frames: vec![Frame { sent: true, time_s: 1.0, data: "[\"connect\"]".into() }],
            binary: 0,
            last_s: None,
        };
        let mut other = 0;
        assert_eq!((messages(&mut arrays, &mut other).len(), other), (0, 1));
    }

    #[test]
    fn plain_requests_with_their_times_and_kinds() {
        let har = r#"{"log":{"entries":[
          {"startedDateTime":"2026-11-24T01:30:00.500+01:00","request":{"method":"post","url":"http://x/api","postData":{"mimeType":"application/json","text":"{}"}},
           "response":{"status":200,"content":{"mimeType":"application/json; charset=utf-8"}}},
          {"startedDateTime":"2026-11-24T00:30:00.250Z","_resourceType":"document","request":{"method":"GET","url":"http://x/"},
           "response":{"status":200,"content":{"mimeType":"text/html"}}},
          {"startedDateTime":"2026-11-24T00:30:00.300Z","request":{"method":"GET","url":"http://x/app.js?hash=1"},"response":{"status":200,"content":{"mimeType":"text/plain"}}},
          {"startedDateTime":"2026-11-24T00:30:00.300Z","request":{"method":"GET","url":"ws://x/websocket"},"response":{"status":101}}]}}"#;
        let r = parse(har.as_bytes()).unwrap().requests;
        let got: Vec<(&str, &str, bool)> =
            r.iter().map(|r| (r.method.as_str(), r.url.as_str(), r.is_static())).collect();
        assert_eq!(
            got,
            vec![("GET", "http://x/", false), ("GET", "http://x/app.js?hash=1", true), ("POST", "http://x/api", false)]
        );
        // 01:30:00.5 at +01:00 is 00:30:00.5 UTC: a quarter second after the document.
        assert!((r[2].time_s - r[0].time_s - 0.25).abs() < 1e-6, "{} {}", r[0].time_s, r[2].time_s);
        assert_eq!((r[2].mime.as_str(), r[2].body.as_ref().map(|b| b.1.as_str())), ("application/json", Some("{}")));
        assert_eq!(epoch_seconds("1970-01-01T00:00:01Z"), Some(1.0));
        assert_eq!(epoch_seconds("1970-01-01T01:00:01.5+0100"), Some(1.5));
        assert_eq!(epoch_seconds("yesterday"), None);
    }

    #[test]
    fn odd_parts_are_skipped_not_the_file() {
        // A null frame, headers as an object, an entry that is a string, a request that is a
        // number: each skipped, the rest read.
        let har = r#"{"log":{"entries":[
          "not an entry",
          {"request":7,"response":{"status":200}},
          {"request":{"url":"ws://127.0.0.1:3000/websocket"},"response":{"headers":{"x":1}},
           "_webSocketMessages":[null,3,{"type":"send","time":1.0,"opcode":1,"data":"{\"msg\":\"connect\"}"}]}]}}"#;
        let h = parse(har.as_bytes()).unwrap();
        assert_eq!(h.connections.len(), 1);
        assert_eq!((h.connections[0].frames.len(), h.connections[0].compression), (1, None));
        assert!(h.requests.is_empty());
    }

    #[test]
    fn broken_files_say_where_and_why() {
        let e = parse(b"{\"log\": {\"entries\": [").unwrap_err().to_string();
        assert!(e.starts_with("1:") && e.contains(": not a HAR: the file ends inside its JSON"), "{e}");
        let e = parse(b"{\n  \"log\": 3,\n}").unwrap_err().to_string();
        assert!(e.starts_with("3:1: not a HAR"), "{e}");
        assert!(target("ws://120.0000001.0.0.1:3000/websocket").unwrap_err().to_string().contains("is not a URL"));
        assert_eq!(target("ws://[::1]:3000/websocket"), Ok("http://[::1]:3000".to_string()));
        let e = parse(b"{\"log\": {}}").unwrap_err().to_string();
        assert!(e.contains("no log.entries"), "{e}");
        assert!(parse(b"{\"log\": {\"entries\": []}}").unwrap().connections.is_empty());
    }
}

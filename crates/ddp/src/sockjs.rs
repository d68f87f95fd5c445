//! SockJS framing over its websocket transport (sockjs-node 0.3.24, as Meteor pins it).
//! Server to client: `o` (open), `h` (heartbeat), `a[...]` (a JSON array of strings, each one DDP
//! message; several may be batched), `c[code,"reason"]` (close). Client to server: a JSON array of
//! strings (`["<json>"]`, one message per frame from sockjs-client), or a bare JSON string.

use serde_json::Value;

/// A frame from a SockJS server.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerFrame {
    Open,
    Heartbeat,
    /// The DDP messages of an `a[...]` frame, as JSON texts.
    Messages(Vec<String>),
    Close {
        code: u16,
        reason: String,
    },
}

/// Why a frame is not SockJS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad SockJS frame: {}", self.0)
    }
}

impl std::error::Error for FrameError {}

fn strings(value: Value, what: &str) -> Result<Vec<String>, FrameError> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s),
                other => Err(FrameError(format!("{what} holds {other}, not a string"))),
            })
            .collect(),
        other => Err(FrameError(format!("{what} is {other}, not an array"))),
    }
}

/// Parses a frame the server sent.
pub fn parse_server_frame(text: &str) -> Result<ServerFrame, FrameError> {
    // Frame types are one ASCII letter; anything else (a multi-byte character included) is not SockJS.
    let (kind, rest) = match text.as_bytes().first() {
        Some(b) if b.is_ascii() => text.split_at(1),
        _ => ("", text),
    };
    match (kind, rest) {
        ("o", "") => Ok(ServerFrame::Open),
        ("h", "") => Ok(ServerFrame::Heartbeat),
        ("a", body) => {
            let value = serde_json::from_str(body).map_err(|e| FrameError(format!("a-frame is not JSON: {e}")))?;
            Ok(ServerFrame::Messages(strings(value, "a-frame")?))
        }
        ("c", body) => {
            let value: Value =
                serde_json::from_str(body).map_err(|e| FrameError(format!("c-frame is not JSON: {e}")))?;
            match value.as_array().map(Vec::as_slice) {
                Some([Value::Number(code), Value::String(reason)]) => Ok(ServerFrame::Close {
                    code: code.as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
                    reason: reason.clone(),
                }),
                _ => Err(FrameError(format!("c-frame {body} is not [code, \"reason\"]"))),
            }
        }
        _ => Err(FrameError(format!("unknown frame {:?}", text.chars().take(20).collect::<String>()))),
    }
}

/// `a[...]` carrying the given DDP message texts.
pub fn encode_messages<S: AsRef<str>>(messages: &[S]) -> String {
    let list: Vec<Value> = messages.iter().map(|m| Value::String(m.as_ref().to_string())).collect();
    format!("a{}", Value::Array(list))
}

/// `c[code,"reason"]`.
pub fn encode_close(code: u16, reason: &str) -> String {
    format!("c[{code},{}]", Value::String(reason.to_string()))
}

/// A client frame carrying one DDP message: `["<json>"]`.
pub fn encode_client(message: &str) -> String {
    Value::Array(vec![Value::String(message.to_string())]).to_string()
}

/// Parses what a client sent: an array of message texts, or one bare string.
pub fn parse_client_frame(text: &str) -> Result<Vec<String>, FrameError> {
    let value: Value = serde_json::from_str(text).map_err(|e| FrameError(format!("not JSON: {e}")))?;
    match value {
        Value::String(s) => Ok(vec![s]),
        other => strings(other, "client frame"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_frames() {
        // Each row: frame text, parsed frame.
        let rows = [
            ("o", ServerFrame::Open),
            ("h", ServerFrame::Heartbeat),
            (
                r#"a["{\"msg\":\"connected\",\"session\":\"x\"}","{\"msg\":\"ready\",\"subs\":[\"a\"]}"]"#,
                ServerFrame::Messages(vec![
                    r#"{"msg":"connected","session":"x"}"#.to_string(),
                    r#"{"msg":"ready","subs":["a"]}"#.to_string(),
                ]),
            ),
            (r#"c[3000,"Go away!"]"#, ServerFrame::Close { code: 3000, reason: "Go away!".into() }),
            (
                r#"c[2010,"Another connection still open"]"#,
                ServerFrame::Close { code: 2010, reason: "Another connection still open".into() },
            ),
        ];
        for (text, frame) in rows {
            assert_eq!(parse_server_frame(text).unwrap(), frame, "{text}");
        }
    }

    #[test]
    fn bad_server_frames() {
        for text in ["", "x", "oo", "a", "a[1]", "a{}", "c[1]", "c[\"x\",1]", "hh", "é", "\u{1F600}a[]"] {
            assert!(parse_server_frame(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn encoding_round_trips() {
        let msgs = [r#"{"msg":"ping"}"#, r#"{"msg":"added","fields":{"s":"quote \" and \\ and é"}}"#];
        let frame = encode_messages(&msgs);
        assert!(frame.starts_with("a[\""));
        assert_eq!(parse_server_frame(&frame).unwrap(), ServerFrame::Messages(msgs.map(String::from).to_vec()));
        assert_eq!(
            parse_server_frame(&encode_close(3000, "Go away!")).unwrap(),
            ServerFrame::Close { code: 3000, reason: "Go away!".into() }
        );
        let client = encode_client(msgs[0]);
        assert_eq!(client, r#"["{\"msg\":\"ping\"}"]"#);
        assert_eq!(parse_client_frame(&client).unwrap(), vec![msgs[0].to_string()]);
        assert_eq!(parse_client_frame(r#""{\"msg\":\"ping\"}""#).unwrap(), vec![msgs[0].to_string()]);
        assert!(parse_client_frame("[1]").is_err());
        assert!(parse_client_frame("{").is_err());
    }
}

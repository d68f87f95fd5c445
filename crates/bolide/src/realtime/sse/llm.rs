//! The OpenAI-compatible streaming API that LLM servers share (vLLM, llama.cpp, TGI, Ollama,
//! LiteLLM, ...): a completion's request body, its chunks read (`data: {json}` events ending
//! with `data: [DONE]`), and the measures vLLM's `bench serve` names.
//!
//! A chunk whose choice carries text (`delta.content` of a chat, `text` of a completion) is one
//! output token; the role chunk, the finish chunk and the usage chunk (`choices: []`, sent with
//! `stream_options.include_usage`) are not. The server's `usage`, when it sends one, is kept
//! beside the count.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::scenario::Length;

/// One streamed chunk, as far as bolide reads it.
#[derive(Deserialize, Default)]
pub struct Chunk<'a> {
    /// The first choice alone is read (a completion streams one), the others skipped: no list
    /// is made for each chunk.
    #[serde(default, borrow, rename = "choices", deserialize_with = "first_choice")]
    choice: Option<Choice<'a>>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// `choices`' first element (none for `[]` or `null`); the rest skipped unread.
fn first_choice<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Choice<'de>>, D::Error> {
    struct First;
    impl<'de> serde::de::Visitor<'de> for First {
        type Value = Option<Choice<'de>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of choices")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element()?;
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    d.deserialize_any(First)
}

#[derive(Deserialize, Default)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Borrowed from the event's data unless it holds escapes.
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize, Default, Clone, Copy)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
}

impl Chunk<'_> {
    /// The text this chunk carries (empty for the role, finish and usage chunks).
    pub fn text(&self) -> &str {
        let Some(c) = &self.choice else { return "" };
        match (&c.delta, &c.text) {
            (Some(Delta { content: Some(t) }), _) => t,
            (_, Some(t)) => t,
            _ => "",
        }
    }
}

/// What one streamed completion measured.
#[derive(Default)]
pub struct Completion {
    pub sent: Option<Instant>,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    /// Chunks that carried text.
    pub tokens: u64,
    pub usage: Option<Usage>,
    pub slowest_gap: Duration,
    pub done: bool,
    pub text: Option<String>,
    pub error: Option<String>,
}

impl Completion {
    /// Reads one event's data; the gap since the previous token, for a token after the first.
    pub fn chunk(&mut self, data: &str, at: Instant) -> Option<Duration> {
        if data == "[DONE]" {
            self.done = true;
            return None;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                self.error.get_or_insert_with(|| format!("a chunk that is not the API's JSON: {e}"));
                return None;
            }
        };
        if let Some(e) = &chunk.error {
            let msg = e.get("message").and_then(Value::as_str).map_or_else(|| crate::redact::brief(e), String::from);
            self.error.get_or_insert(msg.chars().take(500).collect());
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u);
        }
        let text = chunk.text();
        if text.is_empty() {
            return None;
        }
        self.tokens += 1;
        // A captured answer is kept up to 1 MiB.
        if let Some(t) = self.text.as_mut().filter(|t| t.len() < 1 << 20) {
            t.push_str(text);
        }
        let gap = self.last.map(|l| at.saturating_duration_since(l));
        self.first.get_or_insert(at);
        self.last = Some(at);
        if let Some(g) = gap {
            self.slowest_gap = self.slowest_gap.max(g);
        }
        gap
    }

    /// Time to the first token.
    pub fn ttft(&self) -> Option<Duration> {
        Some(self.first?.saturating_duration_since(self.sent?))
    }

    /// Time per output token after the first, as vLLM computes it: (E2EL - TTFT) / (tokens - 1),
    /// the tokens being the server's count when it sent one.
    pub fn tpot(&self, e2el: Duration) -> Option<Duration> {
        let n = self.usage.map_or(self.tokens, |u| u.completion_tokens.max(self.tokens));
        let ttft = self.ttft()?;
        (n > 1).then(|| Duration::from_nanos((e2el.saturating_sub(ttft).as_nanos() / u128::from(n - 1)) as u64))
    }

    /// Whether the request met every service level of `goodput` (`ttft`, `tpot`, `itl`: its
    /// slowest gap, `e2el`).
    pub fn good(&self, e2el: Duration, goodput: &[(String, Duration)]) -> bool {
        goodput.iter().all(|(what, limit)| {
            let got = match what.as_str() {
                "ttft" => self.ttft(),
                "tpot" => Some(self.tpot(e2el).unwrap_or_default()),
                "itl" => Some(self.slowest_gap),
                _ => Some(e2el),
            };
            got.is_some_and(|g| g <= *limit)
        })
    }
}

/// A length drawn from its distribution.
pub fn draw(l: &Length) -> u64 {
    let mut rng = rand::rng();
    let v = if l.stddev == 0 {
        l.mean as f64
    } else {
        // Box-Muller: a standard normal from two uniforms.
        let (u1, u2): (f64, f64) = (rng.random_range(f64::EPSILON..1.0), rng.random());
        l.mean as f64 + l.stddev as f64 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    (v.round().max(0.0) as u64).clamp(l.min, l.max)
}

/// A prompt of `n` words (about a token each for the common tokenizers), different per request.
pub fn synthetic_prompt(n: u64) -> String {
    const WORDS: [&str; 16] = [
        "time", "people", "way", "water", "day", "part", "sound", "work", "place", "year", "back", "thing", "name",
        "sentence", "man", "line",
    ];
    let mut rng = rand::rng();
    let mut out = String::with_capacity(n as usize * 6);
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    out
}

/// A completion request's body: `model`, the messages or the prompt, `max_tokens`, streamed
/// with the usage asked for; `extra` keys added as they are.
pub fn body(
    model: &str,
    messages: Option<Value>,
    prompt: Option<Value>,
    max_tokens: Option<u64>,
    extra: &[(String, Value)],
) -> Value {
    let mut b = json!({ "model": model, "stream": true, "stream_options": { "include_usage": true } });
    match (messages, prompt) {
        (Some(m), _) => b["messages"] = m,
        (None, Some(p)) => b["prompt"] = p,
        (None, None) => {}
    }
    if let Some(n) = max_tokens {
        b["max_tokens"] = json!(n);
    }
    for (k, v) in extra {
        b[k.as_str()] = v.clone();
    }
    b
}

thread_local! {
    /// The model each server (by its models URL) named first, asked once per worker.
    static MODELS: RefCell<Vec<(String, String)>> = const { RefCell::new(Vec::new()) };
}

/// The model a server serves (`GET /v1/models`, its first `id`), asked once per worker and
/// server; `None` when the server does not say.
pub fn known_model(url: &str) -> Option<String> {
    MODELS.with_borrow(|m| m.iter().find(|(u, _)| u == url).map(|(_, id)| id.clone()))
}

pub fn remember_model(url: &str, id: &str) {
    MODELS.with_borrow_mut(|m| m.push((url.to_string(), id.to_string())));
}

/// The first model's id in a `/v1/models` answer.
pub fn first_model(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("data")?.as_array()?.first()?.get("id")?.as_str().map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first choice is read, any other skipped; no choices (`[]`, `null`, none) carry no
    /// text.
    #[test]
    fn a_chunk_s_first_choice_is_its_text() {
        let text = |json: &str| serde_json::from_str::<Chunk>(json).map(|c| c.text().to_string()).unwrap();
        assert_eq!(text(r#"{"choices":[{"text":"a\"b"},{"text":"other"}],"id":"x"}"#), "a\"b");
        assert_eq!(
            text(r#"{"id":"x","choices":[{"index":0,"delta":{"content":"hi"}},{"delta":{"content":"no"}}]}"#),
            "hi"
        );
        for none in [r#"{"choices":[]}"#, r#"{"choices":null}"#, r#"{"usage":{"completion_tokens":2}}"#] {
            assert_eq!(text(none), "", "{none}");
        }
        assert!(serde_json::from_str::<Chunk>(r#"{"choices":7}"#).is_err());
    }

    #[test]
    fn tokens_are_the_chunks_that_carry_text() {
        let t0 = Instant::now();
        let mut c = Completion { sent: Some(t0), text: Some(String::new()), ..Completion::default() };
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(c.chunk(r#"{"choices":[{"delta":{"role":"assistant"}}]}"#, at(5)), None);
        assert_eq!(c.chunk(r#"{"choices":[{"delta":{"content":"Hel"}}]}"#, at(10)), None);
        assert_eq!(c.chunk(r#"{"choices":[{"delta":{"content":""}}]}"#, at(12)), None);
        assert_eq!(c.chunk(r#"{"choices":[{"delta":{"content":"lo"}}]}"#, at(30)), Some(Duration::from_millis(20)));
        assert_eq!(c.chunk(r#"{"choices":[{"text":"!","index":0}]}"#, at(35)), Some(Duration::from_millis(5)));
        assert_eq!(c.chunk(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#, at(36)), None);
        c.chunk(r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#, at(37));
        c.chunk("[DONE]", at(38));
        assert_eq!((c.tokens, c.done, c.text.as_deref()), (3, true, Some("Hello!")));
        assert_eq!(c.usage.map(|u| (u.prompt_tokens, u.completion_tokens)), Some((7, 3)));
        assert_eq!(c.ttft(), Some(Duration::from_millis(10)));
        // vLLM's TPOT: (E2EL - TTFT) / (n - 1).
        assert_eq!(c.tpot(Duration::from_millis(40)), Some(Duration::from_millis(15)));
        assert!(c.good(Duration::from_millis(40), &[("ttft".into(), Duration::from_millis(10))]));
        assert!(!c.good(Duration::from_millis(40), &[("itl".into(), Duration::from_millis(19))]));
        c.chunk(r#"{"error":{"message":"model not found"}}"#, at(39));
        assert_eq!(c.error.as_deref(), Some("model not found"));
    }

    #[test]
    fn lengths_stay_within_bounds() {
        let l = Length { mean: 100, stddev: 50, min: 10, max: 120 };
        for _ in 0..1000 {
            assert!((10..=120).contains(&draw(&l)));
        }
        assert_eq!(draw(&Length { mean: 7, stddev: 0, min: 1, max: 100 }), 7);
        assert_eq!(synthetic_prompt(5).split(' ').count(), 5);
        let b = body("m", None, Some(json!("hi")), Some(4), &[("temperature".into(), json!(0))]);
        assert_eq!(b["prompt"], "hi");
        assert_eq!(b["max_tokens"], 4);
        assert_eq!(b["stream"], true);
        assert_eq!(b["temperature"], 0);
        assert_eq!(first_model(r#"{"object":"list","data":[{"id":"tiny"},{"id":"b"}]}"#).as_deref(), Some("tiny"));
    }
}

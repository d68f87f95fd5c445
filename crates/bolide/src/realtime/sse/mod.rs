//! Server-Sent Events: the event stream's reader over HTTP/1.1 (`wire.rs`), a user's session
//! (`session.rs`), the OpenAI-compatible streaming API of LLM servers (`llm.rs`) and the steps
//! its flows take (`steps.rs`: `stream`, `chat`, `listen`).

pub mod llm;
pub mod session;
pub mod steps;
pub mod wire;

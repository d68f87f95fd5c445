//! Server-Sent Events: the event stream's reader over HTTP/1.1 (`wire.rs`), a user's session
//! (`session.rs`), the OpenAI-compatible streaming API of LLM servers (`llm.rs`) and the steps
//! its flows take (`steps.rs`: `stream`, `chat`, `listen`).

pub mod llm;
pub mod session;
pub mod steps;
pub mod wire;

/// This protocol's counts that are a throughput, declared to the run's readers (a rate in the
/// report, compared per second of the run, higher is better, charted per second, a ladder's
/// columns), the first the report's headline: vLLM's output and total token throughput, request
/// throughput and request goodput, and the events read.
pub const THROUGHPUTS: [&str; 5] =
    ["llm.output_tokens", "llm.total_tokens", "llm.requests", "llm.good_requests", "sse.events"];

/// What one LLM user receives a second: the inverse of its TPOT's median, declared to a ladder's
/// table under this name.
pub const PER_USER: [(&str, &str); 1] = [("llm.tpot", "Tokens/s per user")];

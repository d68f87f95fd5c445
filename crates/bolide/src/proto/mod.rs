//! What every protocol stands on: HTTP/1.1 and HTTP/2 with TLS (`http/`), the WebSocket and
//! SockJS transport with the counters every protocol reports into (`ws.rs`), the link a protocol
//! of text messages rides (`link.rs`), the per-thread receive buffer (`read.rs`) and a user's
//! queue to its connection's task (`outbox.rs`). The realtime protocols themselves live in
//! `realtime/`.

pub mod http;
pub mod link;
pub mod outbox;
pub mod read;
pub mod ws;

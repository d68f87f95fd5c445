//! Each realtime protocol's settings as a scenario's `config` gives them (`config.socketio`,
//! `config.graphql`): data the scenario reader fills and the protocol's client reads, kept here
//! so that a scenario is data below the protocols that perform it.

use serde_json::Value;

/// How Engine.IO reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SioTransport {
    Polling,
    WebSocket,
}

impl SioTransport {
    /// As socket.io-client's `transports` option names it.
    pub fn named(name: &str) -> Option<SioTransport> {
        match name {
            "polling" => Some(SioTransport::Polling),
            "websocket" => Some(SioTransport::WebSocket),
            _ => None,
        }
    }
}

/// `config.socketio`: what every Socket.IO user of a run connects with (socket.io-client's
/// options of the same names).
#[derive(Debug, Clone, PartialEq)]
pub struct SocketIoConfig {
    /// Engine.IO's path on the server (`/socket.io`).
    pub path: String,
    /// Added to every request's query (`query`).
    pub query: Vec<(String, String)>,
    /// Added to every request (`extraHeaders`).
    pub headers: Vec<(String, String)>,
    /// Tried in order: polling first upgrades to a WebSocket when both are listed (the default).
    pub transports: Vec<SioTransport>,
    /// Sent with each namespace's CONNECT (`auth`).
    pub auth: Option<Value>,
    /// A field of a pushed event's data holding its emitter's send time (ms since the epoch, or an
    /// ISO date): each event carrying it gives a fan-out latency.
    pub fanout_field: Option<String>,
    /// permessage-deflate offered on the WebSocket (`perMessageDeflate`).
    pub compression: bool,
}

impl Default for SocketIoConfig {
    fn default() -> Self {
        SocketIoConfig {
            path: "/socket.io".into(),
            query: Vec::new(),
            headers: Vec::new(),
            transports: vec![SioTransport::Polling, SioTransport::WebSocket],
            auth: None,
            fanout_field: Some("sentAt".into()),
            compression: true,
        }
    }
}

/// `config.graphql`: what every GraphQL user of a run connects with.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphqlConfig {
    /// The WebSocket's path (`/graphql`), when the target's URL names none.
    pub path: String,
    /// `connection_init`'s payload (`connectionParams`: a token, say).
    pub init: Option<Value>,
    /// Added to the upgrade request.
    pub headers: Vec<(String, String)>,
    /// A field of a subscription's data holding when the server wrote it (ms since the epoch, or
    /// an ISO date): each `next` carrying it gives a fan-out latency.
    pub fanout_field: Option<String>,
    pub compression: bool,
}

impl Default for GraphqlConfig {
    fn default() -> Self {
        GraphqlConfig {
            path: "/graphql".into(),
            init: None,
            headers: Vec::new(),
            fanout_field: Some("createdAt".into()),
            compression: true,
        }
    }
}

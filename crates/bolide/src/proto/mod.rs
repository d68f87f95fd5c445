//! Wire protocols spoken by virtual users and connections.

pub mod ddp;
pub mod graphql_ws;
pub mod http;
pub mod link;
pub mod outbox;
pub mod read;
pub mod socketio;
pub mod xhr;

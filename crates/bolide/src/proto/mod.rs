//! Wire protocols spoken by virtual users and connections.

pub mod http;

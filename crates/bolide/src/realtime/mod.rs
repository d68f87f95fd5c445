//! The realtime protocols, one folder each: its wire, its session (an implementation of
//! [`crate::session::Session`]) and its steps.

pub mod ddp;
pub mod graphql;
pub mod socketio;

//! DDP version 1 as Meteor speaks it: typed messages ([`message`]), EJSON values ([`ejson`]),
//! SockJS framing ([`sockjs`]), WebSocket framing with permessage-deflate ([`ws`]) and Meteor's ids
//! ([`id`]). One definition shared by bolide's virtual
//! users and its reference server. Parsing never panics: malformed input is an error value that
//! says what is wrong (and, for the server, what Meteor would answer).

pub mod ejson;
pub mod id;
pub mod message;
pub mod sockjs;
pub mod ws;

pub use ejson::Ejson;
pub use message::{DdpError, Message, ParseError};

//! DDP, Meteor's protocol: the browser-like client (`wire.rs`, SockJS's HTTP transports in
//! `xhr.rs`), a user's session on it (`session.rs`) and the steps its flows take (`steps.rs`).

pub mod session;
pub mod steps;
pub mod wire;
pub mod xhr;

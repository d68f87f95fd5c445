//! Socket.IO 4 over Engine.IO: the client (`wire.rs`: packets, polling, the upgrade), a user's
//! session on it (`session.rs`) and the steps its flows take (`steps.rs`).

pub mod session;
pub mod steps;
pub mod wire;

//! GraphQL over graphql-ws: the client (`wire.rs`), a user's session on it (`session.rs`) and the
//! steps its flows take (`steps.rs`).

pub mod session;
pub mod steps;
pub mod wire;

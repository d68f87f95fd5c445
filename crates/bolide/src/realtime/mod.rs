//! The realtime protocols, one folder each: its wire (`wire.rs`), a user's session on it
//! (`session.rs`, an implementation of [`crate::session::Session`]) and the steps its flows take
//! (`steps.rs`, an implementation of [`Steps`]). The engine picks a flow's protocol once, in
//! `engine/vu.rs`'s `iteration`, and hands each step it does not know to the protocol.
//!
//! A flow's steps are data in `scenario/` (read from YAML in `scenario/yaml.rs`), below this
//! room: reports, the recorder and the workload read them without knowing any protocol's
//! behaviour, and a protocol's steps read the scenario's templates and captures without an import
//! back into this room.

pub mod ddp;
pub mod graphql;
pub mod socketio;
pub mod sse;

use std::future::Future;

use crate::scenario::Step;
use crate::session::{Session, Stop, User};

/// A protocol's own steps, performed on its session by a user.
pub trait Steps: Session {
    /// Performs `step`, one of this protocol's (the scenario reader keeps each flow's steps to
    /// its engine's; another's fails the step as the scenario's mistake).
    fn perform<'a, U: User<Session = Self>>(
        u: &'a mut U,
        step: &'a Step,
    ) -> impl Future<Output = Result<(), Stop>> + 'a;
}

/// The failure of a step that is not this protocol's (the scenario reader prevents it).
pub fn not_ours<U: User>(u: &U, step: &Step, protocol: &str) -> Stop {
    u.fail_with(step, "scenario", &format!("{} is not a step of a {protocol} flow", step.name))
}

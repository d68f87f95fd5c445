//! bolide: a load tester and benchmark harness for realtime web apps that speak DDP (Meteor) and
//! for plain HTTP servers.
//!
//! The data flows one way: flags ([`cli`]) -> [`plan`] -> [`engine`] (workers, pacing) ->
//! recorders ([`stats`]) -> the result document -> [`report`]s. [`app`] wires the stages for each
//! command; `main.rs` only maps its outcome to an exit code.

pub mod app;
pub mod browser;
pub mod cli;
pub mod console;
pub mod dashboard;
pub mod engine;
pub mod export;
pub mod fault;
pub mod files;
pub mod k8s;
pub mod lifecycle;
pub mod load;
pub mod manual;
pub mod monitor;
pub mod plan;
pub mod problem;
pub mod proto;
pub mod realtime;
pub mod record;
pub mod redact;
pub mod report;
pub mod results;
pub mod scenario;
pub mod segment;
pub mod serve;
pub mod session;
pub mod stats;
pub mod threshold;
pub mod vecmap;
pub mod workload;

//! Measurements: per-worker recorders (no locks, merged once a second and at the end), the
//! summary math, and the versioned result document that every report reads.

pub mod audit;
pub mod browser;
pub mod doc;
pub mod envelope;
pub mod faults;
pub mod hist;
pub mod merge;
pub mod merge_info;
pub mod recorder;
pub mod result;
pub mod summary;
pub mod verdict;
pub mod view;
pub mod vu;

pub use recorder::{ErrorClass, SecondRecorder, TargetRecorder, WorkerRecorder};
pub mod gnuplot;

//! Where a command writes and what it returns: the writers (`Io`) and the documented exit codes.
//! Every command takes these from its caller, so tests run whole commands in-process.

use std::io::Write;

/// Exit codes, the same for every command (see the README).
pub mod exit {
    /// The run was done.
    pub const OK: i32 = 0;
    /// Thresholds broken (reserved for `ensure` and capacity criteria).
    pub const THRESHOLDS: i32 = 1;
    /// Usage or configuration error: nothing ran.
    pub const USAGE: i32 = 2;
    /// The run could not start or complete (nothing reachable, an output file could not be written).
    pub const RUN: i32 = 3;
}

/// Where a command writes: results on `out`, diagnostics on `err`.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Progress may be drawn on stderr (it is a terminal).
    pub live: bool,
    /// Summaries on `out` may be coloured (stdout is a terminal and NO_COLOR is not set).
    pub color: bool,
    /// The outer command's part shown before a run's progress ("run 2/5, ETA 1m 5s"); empty for
    /// a single run.
    pub stage: String,
}

impl<'a> Io<'a> {
    /// Plain writers: no progress, no colour (tests, files).
    pub fn plain(out: &'a mut dyn Write, err: &'a mut dyn Write) -> Io<'a> {
        Io { out, err, live: false, color: false, stage: String::new() }
    }
}

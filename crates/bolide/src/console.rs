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

/// Runs a command whose summary document may go to `dest` (`--json PATH`, or `-` for stdout):
/// with `-`, everything `body` writes for people goes to stderr, uncoloured, and stdout carries
/// the document alone. The document `body` returns is written whole or not at all; a document
/// that cannot be written makes the exit code [`exit::RUN`].
pub fn with_document<T: serde::Serialize>(
    io: &mut Io,
    dest: Option<&std::path::Path>,
    body: impl FnOnce(&mut Io) -> (i32, Option<T>),
) -> i32 {
    let to_stdout = dest.is_some_and(crate::files::is_stdout);
    let (code, doc) = if to_stdout {
        let stderr = std::cell::RefCell::new(&mut *io.err);
        let (mut out, mut err) = (Shared(&stderr), Shared(&stderr));
        let mut human = Io { out: &mut out, err: &mut err, live: io.live, color: false, stage: io.stage.clone() };
        body(&mut human)
    } else {
        body(io)
    };
    let (Some(dest), Some(doc)) = (dest, doc) else { return code };
    match crate::files::write_json(dest, &mut *io.out, &doc) {
        Ok(()) => code,
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", dest.display());
            exit::RUN
        }
    }
}

/// One writer (stderr) behind both of a command's streams.
struct Shared<'a, 'b, 'c>(&'c std::cell::RefCell<&'b mut (dyn Write + 'a)>);

impl Write for Shared<'_, '_, '_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

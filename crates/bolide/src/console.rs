//! Where a command writes and what it returns: the writers (`Io`) and the documented exit codes.
//! Every command takes these from its caller, so tests run whole commands in-process.

use std::io::Write;

use crate::problem::Problem;

/// Exit codes, the same for every command (see the README).
pub mod exit {
    /// The run was done.
    pub const OK: i32 = 0;
    /// Thresholds broken (reserved for `ensure` and capacity criteria), or the audit found a
    /// user's cache different from the truth.
    pub const THRESHOLDS: i32 = 1;
    /// Usage or configuration error: nothing ran.
    pub const USAGE: i32 = 2;
    /// The run could not start or complete (nothing reachable, an output file could not be written).
    pub const RUN: i32 = 3;
    /// A verdict could not be reached (`compare --fail-on` over runs that cannot tell: suspect
    /// runs, too few runs, a change within the noise); `--allow-inconclusive` makes it 0. And an
    /// audit that could not check every checkpoint: an infrastructure failure is never a pass.
    pub const INCONCLUSIVE: i32 = 4;
}

/// How a command ended before its work was done: what went wrong, and the exit code that follows
/// ([`exit::USAGE`] when nothing ran, [`exit::RUN`] when it could not start). `app` prints it, the
/// one place a command's problems are printed.
#[derive(Debug)]
pub struct Failed {
    pub code: i32,
    /// Each printed as `error: ...` ([`Problem::print`]).
    pub problems: Vec<Problem>,
    /// A scenario file's problems in its own words (`FILE:LINE:COLUMN: ...`, each hint indented
    /// under its line), printed as they are.
    pub file: Option<String>,
}

impl Failed {
    /// Refused before anything ran: exit 2.
    pub fn usage(problems: impl IntoIterator<Item = impl Into<Problem>>) -> Failed {
        Failed { code: exit::USAGE, problems: problems.into_iter().map(Into::into).collect(), file: None }
    }

    /// Could not start or complete: exit 3.
    pub fn run(problem: impl Into<Problem>) -> Failed {
        Failed { code: exit::RUN, problems: vec![problem.into()], file: None }
    }
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
            Problem::new(format!("cannot write {}: {e}", dest.display())).print(io.err);
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

/// Under the npm wrapper (which sets `BOLIDE_PARENT_DEATH` to its own PID): on Linux, asks the
/// kernel for a SIGTERM when the wrapper dies, however it dies (SIGKILL of a cancelled CI job
/// included), so no load generator outlives it; SIGTERM stops a run as Ctrl-C does. Call first in
/// `main`, before any thread starts. The variable is removed, so that processes bolide starts
/// (`--spawn`, the demos' servers) do not inherit it.
pub fn die_with_parent() {
    let Some(parent) = std::env::var_os("BOLIDE_PARENT_DEATH") else { return };
    std::env::remove_var("BOLIDE_PARENT_DEATH");
    #[cfg(target_os = "linux")]
    {
        let Some(parent) = parent.to_str().and_then(|p| p.parse::<libc::pid_t>().ok()) else { return };
        // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and touches no memory of ours;
        // getppid cannot fail.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
            // The wrapper may have died before the request: then nobody will send the signal.
            if libc::getppid() != parent {
                libc::raise(libc::SIGTERM);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
}

/// How the person who started this process runs bolide, for the commands a summary suggests:
/// `cargo run --release --` when cargo started it (someone following the README from a clone,
/// with no `bolide` on their PATH), `bolide` when that name on the PATH is this executable, and
/// the executable's path otherwise.
pub fn own_command() -> String {
    let Ok(exe) = std::env::current_exe() else { return "bolide".into() };
    let exe = exe.canonicalize().unwrap_or(exe);
    // Inside another program (a test binary driving the library): the tool's own name.
    if exe.file_name().and_then(|n| n.to_str()) != Some("bolide") {
        return "bolide".into();
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("bolide")).find(|p| p.is_file()));
    if on_path.and_then(|p| p.canonicalize().ok()).is_some_and(|p| p == exe) {
        return "bolide".into();
    }
    // cargo run sets CARGO for the program it runs; the build profile is the executable's folder.
    if std::env::var_os("CARGO").is_some() && std::env::var_os("CARGO_MANIFEST_DIR").is_some() {
        let profile = exe.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).unwrap_or_default();
        return match profile {
            "release" => "cargo run --release --".into(),
            "debug" => "cargo run --".into(),
            other => format!("cargo run --profile {other} --"),
        };
    }
    let path = exe.display().to_string();
    if path.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c)) {
        path
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

//! Every file a run writes, written in one place after the run: the result document (`--json`,
//! or stdout), the HTML report (`--html`), the seconds as CSV (`--out csv=PATH`), the verdicts as
//! JUnit (`--junit`); a workload's own (ab's per-request file, `--gnuplot`, which the workload
//! assembles from its workers' parts) is said here, or why it failed. Each was checked
//! before the run (`plan::Common::artifacts`, every problem at once); each is written whole or not
//! at all (`files`), said on the terminal unless quiet, and a file that cannot be written is said
//! on stderr and makes the exit code 3 (the others are still written). The writers return what
//! went wrong as a [`Problem`]; the run's stage that called them says it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::console::{exit, Io};
use crate::plan::Common;
use crate::problem::Problem;
use crate::stats::doc::Doc;

/// Where people's lines go: stdout, or stderr when stdout carries the document (`--json -`).
pub(super) fn human<'a>(io: &'a mut Io, json: Option<&Path>) -> &'a mut dyn Write {
    if json.is_some_and(crate::files::is_stdout) {
        &mut *io.err
    } else {
        &mut *io.out
    }
}

/// The result document to `json` (none: nothing to write); the problem when it could not be
/// written.
pub fn document(io: &mut Io, quiet: bool, json: Option<&Path>, doc: &Doc) -> Result<(), Problem> {
    let Some(path) = json else { return Ok(()) };
    let to_stdout = crate::files::is_stdout(path);
    match crate::files::write_json(path, &mut *io.out, doc) {
        Ok(()) if to_stdout => Ok(()),
        Err(e) if to_stdout => Err(Problem::new(format!("cannot write the result document to stdout: {e}"))),
        Ok(()) => {
            if !quiet {
                let _ = writeln!(io.out, "\nResult document: {}", path.display());
            }
            Ok(())
        }
        Err(e) => Err(Problem::new(format!("cannot write {}: {e}", path.display()))),
    }
}

/// The files a finished run writes besides its document, in order: the workload's own (`own`:
/// what it is and where, or why it could not be written), the HTML report, the CSV seconds. The
/// exit code `code`, made 3 when one could not be written (each such problem said).
pub fn after_run(
    io: &mut Io,
    c: &Common,
    doc: &Doc,
    own: Result<Option<(&'static str, PathBuf)>, Problem>,
    mut code: i32,
) -> i32 {
    let requests = match own {
        Ok(Some((what, path))) => {
            if !c.quiet {
                let _ = writeln!(human(io, c.json.as_deref()), "{what}: {}", path.display());
            }
            Some(path)
        }
        Ok(None) => None,
        Err(p) => {
            p.print(io.err);
            code = exit::RUN;
            None
        }
    };
    let report = report(io, c.quiet, c.json.as_deref(), c.html.as_deref(), doc, requests.as_deref());
    for written in [report, seconds(c.csv.as_deref(), doc)] {
        if let Err(p) = written {
            p.print(io.err);
            code = exit::RUN;
        }
    }
    code
}

/// `--junit`: the run's verdicts (the run itself, then each threshold); the exit code `code`, made 3
/// when the file could not be written (said) and the run had nothing worse to say.
pub fn verdicts(
    io: &mut Io,
    c: &Common,
    doc: Option<&Doc>,
    code: i32,
    command_line: &[String],
    started: std::time::SystemTime,
) -> i32 {
    let Some(path) = &c.junit else { return code };
    let suite = crate::report::junit::for_run(doc, code, command_line, started);
    match junit(path, &[suite]) {
        Ok(()) => code,
        Err(p) => {
            p.print(io.err);
            if code == exit::OK {
                exit::RUN
            } else {
                code
            }
        }
    }
}

/// `--junit`: `suites` (a run's, a series' runs', a ladder's), whole or not at all.
pub fn junit(path: &Path, suites: &[crate::report::junit::Suite]) -> Result<(), Problem> {
    crate::report::junit::write(path, suites).map_err(|e| e.context("--junit"))
}

/// `--out csv=PATH`: `rows` (a run's seconds, a series' runs', a ladder's levels'), whole or not
/// at all.
pub fn csv(path: &Path, rows: &str) -> Result<(), Problem> {
    crate::report::csv::write(path, rows).map_err(|e| e.context("--out csv"))
}

/// An HTML report to `path`, whole or not at all; said on the terminal unless `quiet` (on stderr
/// when stdout carries the document, `json` being `-`).
pub fn page(io: &mut Io, quiet: bool, json: Option<&Path>, path: &Path, page: &str) -> Result<(), Problem> {
    crate::files::write_atomically(path, |w| w.write_all(page.as_bytes()))
        .map_err(|e| Problem::new(format!("cannot write {}: {e}", path.display())))?;
    if !quiet {
        let _ = writeln!(human(io, json), "HTML report: {}", path.display());
    }
    Ok(())
}

/// Writes the HTML report of one run to `path`, whole or not at all. With `requests` (the
/// per-request file of `--gnuplot`), the report shows every request's response time as well.
fn report(
    io: &mut Io,
    quiet: bool,
    json: Option<&Path>,
    path: Option<&Path>,
    doc: &Doc,
    requests: Option<&Path>,
) -> Result<(), Problem> {
    let Some(path) = path else { return Ok(()) };
    page(io, quiet, json, path, &super::run_page(doc, requests))
}

/// `--out csv=PATH`: the run's seconds as CSV.
fn seconds(path: Option<&Path>, doc: &Doc) -> Result<(), Problem> {
    let Some(path) = path else { return Ok(()) };
    csv(path, &crate::report::csv::rows(doc, "1"))
}

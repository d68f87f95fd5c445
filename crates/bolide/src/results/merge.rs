//! `bolide merge`: the segments' result documents (files, or pods' logs holding them) -> the whole
//! run's document, written whole; the merged summary and every warning shown.

use std::path::Path;

use crate::cli::MergeArgs;
use crate::console::{exit, Io};
use crate::problem::Problem;
use crate::stats::doc::Doc;
use crate::stats::merge::{documents_in_log, merge as merge_docs};

/// The most one input may weigh (a log of many pods is larger than a document).
const MAX_INPUT: u64 = 1 << 30;

pub fn merge(args: &MergeArgs, command_line: Vec<String>, io: &mut Io) -> i32 {
    if let Err(e) = crate::files::check_writable(&args.output) {
        let _ = writeln!(io.err, "{e}");
        return exit::USAGE;
    }
    let mut docs = Vec::new();
    let mut problems = Vec::new();
    for path in &args.inputs {
        match read(path) {
            Ok(found) => docs.extend(found),
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        for p in problems {
            let _ = writeln!(io.err, "{p}");
        }
        return exit::USAGE;
    }
    write_merged(docs, args, command_line, io)
}

/// Merges documents already read (source, document), shows the summary and every warning, writes
/// the merged document (and JUnit), and gives the exit code of the plan's verdicts.
pub fn write_merged(docs: Vec<(String, Doc)>, args: &MergeArgs, command_line: Vec<String>, io: &mut Io) -> i32 {
    let merged = match merge_docs(docs, command_line.clone()) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(io.err, "cannot merge: {e}");
            return exit::USAGE;
        }
    };
    let to_stdout = crate::files::is_stdout(&args.output);
    if !args.quiet {
        let text = crate::report::summary(&merged.doc);
        let human = if to_stdout { &mut *io.err } else { &mut *io.out };
        let _ = write!(human, "{text}");
    }
    for w in &merged.warnings {
        let _ = writeln!(io.err, "warning: {w}");
    }
    let written = crate::files::write_json(&args.output, &mut *io.out, &merged.doc);
    if let Err(e) = written {
        let _ = writeln!(io.err, "error: cannot write {}: {e}", args.output.display());
        return exit::RUN;
    }
    if !args.quiet && !to_stdout {
        let _ = writeln!(io.out, "\nMerged document: {}", args.output.display());
    }
    // The plan's thresholds and the audit, judged over the whole run, gate as a single run's would.
    let code = crate::stats::verdict::exit_code(&merged.doc, merged.doc.thresholds().iter().all(|t| t.ok));
    if let Some(path) = &args.junit {
        let started =
            humantime::parse_rfc3339_weak(merged.doc.started_at()).unwrap_or_else(|_| std::time::SystemTime::now());
        let suite = crate::report::junit::for_run(Some(&merged.doc), code, &command_line, started);
        if let Err(e) = crate::report::junit::write(path, &[suite]) {
            let _ = writeln!(io.err, "error: --junit: {e}");
            return exit::RUN;
        }
    }
    code
}

/// One input: a result document, or a log with documents between the marker lines (each named
/// `FILE#k`).
fn read(path: &Path) -> Result<Vec<(String, Doc)>, Problem> {
    let shown = path.display().to_string();
    let bytes = crate::files::read_limited(path, MAX_INPUT).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    if text.trim_start().starts_with('{') {
        return Doc::from_json(&text)
            .map(|d| vec![(shown.clone(), d)])
            .map_err(|e| Problem::from(format!("{shown}: {e}")));
    }
    let blocks = documents_in_log(&text);
    if blocks.is_empty() {
        return Err(format!(
            "{shown}: neither a result document nor a log holding one (between `{}` lines)",
            crate::stats::merge::LOG_BEGIN
        )
        .into());
    }
    blocks
        .into_iter()
        .enumerate()
        .map(|(k, b)| {
            let name = format!("{shown}#{}", k + 1);
            b.and_then(|text| Doc::from_json(&text))
                .map(|d| (name.clone(), d))
                .map_err(|e| Problem::from(format!("{name}: {e}")))
        })
        .collect()
}

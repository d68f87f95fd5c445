//! `bolide report`: saved runs (result documents, bench directories) as one HTML file with charts,
//! or as Markdown. Reads documents only, as `compare` does, and never runs anything.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::compare::{self, Series};
use crate::cli::{ReportArgs, ReportFormat};
use crate::console::{exit, Io};
use crate::files;
use crate::report::html::{self, Section};

/// The sections of a report of `series`: the comparison when there are several, every run's
/// value per measure when there is more than one run, then each run.
pub fn sections(series: &[Series]) -> Vec<Section> {
    let mut out = Vec::new();
    let runs: usize = series.iter().map(|s| s.runs.len()).sum();
    if series.len() >= 2 {
        out.push(Section {
            title: format!("{} compared with {}", others(series), series[0].name),
            notes: vec![],
            text: comparison(series, false),
            charts: Vec::new(),
        });
    }
    if runs >= 2 {
        let measures: Vec<(String, Vec<crate::stats::doc::Measures>)> =
            series.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d.measures()).collect())).collect();
        let docs: Vec<(String, Vec<&crate::stats::doc::Doc>)> =
            series.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d).collect())).collect();
        let mut charts = crate::report::charts::across_runs(&measures);
        charts.extend(crate::report::charts::overlaid(&docs));
        out.push(Section {
            title: "Every run".into(),
            notes: vec![format!("{runs} runs in {} series", series.len())],
            text: String::new(),
            charts,
        });
    }
    out.extend(run_sections(series));
    out
}

/// The series compared with the first, as `compare` writes it (Markdown tables or text).
fn comparison(series: &[Series], md: bool) -> String {
    let report = compare::build(series, 0, Vec::new());
    let watched = series[0].runs.first().map(|(_, d)| super::watched_names(d)).unwrap_or_default();
    compare::render(&report, md, &watched)
}

/// One section per run, named by its series (and its file when the series has several).
fn run_sections(series: &[Series]) -> Vec<Section> {
    let mut out = Vec::new();
    for s in series {
        for (path, doc) in &s.runs {
            let name = match s.runs.len() {
                1 => s.name.clone(),
                _ => format!("{}: {}", s.name, file_name(path)),
            };
            out.push(html::run_section(doc, &name));
        }
    }
    out
}

fn others(series: &[Series]) -> String {
    series[1..].iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| p.display().to_string())
}

/// The report in Markdown: the comparison's tables, then each run's summary as text.
pub fn markdown(title: &str, series: &[Series]) -> String {
    let mut out = format!("# {title}\n\n");
    if series.len() >= 2 {
        out.push_str(&comparison(series, true));
        out.push('\n');
    }
    for s in run_sections(series) {
        out.push_str(&format!("## {}\n\n", s.title));
        for n in &s.notes {
            out.push_str(&format!("- {n}\n"));
        }
        out.push_str(&format!("\n```text\n{}```\n\n", s.text));
    }
    out
}

/// Writes the HTML report of the result documents in `dir` (a bench series, a capacity ladder) to
/// `path`; false when it could not be written (the reason is on stderr).
pub fn write_dir_report(dir: &Path, path: &Path, title: &str, io: &mut Io) -> bool {
    let mut skipped = Vec::new();
    let series = match compare::load_series(dir, &mut skipped) {
        Ok(s) if !s.runs.is_empty() => s,
        Ok(_) => return true,
        Err(e) => {
            let _ = writeln!(io.err, "error: no HTML report: {e}");
            return false;
        }
    };
    let page = html::page(title, &sections(&[series]));
    match files::write_atomically(path, |w| w.write_all(page.as_bytes())) {
        Ok(()) => {
            let _ = writeln!(io.out, "HTML report: {}", path.display());
            true
        }
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            false
        }
    }
}

/// `bolide report`.
pub fn report(args: &ReportArgs, io: &mut Io) -> i32 {
    let output: Option<PathBuf> = match (&args.output, args.format) {
        (Some(p), _) => Some(p.clone()),
        (None, ReportFormat::Html) => Some(PathBuf::from("bolide-report.html")),
        (None, ReportFormat::Md) => None,
    };
    if let Some(p) = output.as_deref().filter(|p| !files::is_stdout(p)) {
        if let Err(e) = files::check_writable(p) {
            let _ = writeln!(io.err, "error: {e}");
            return exit::USAGE;
        }
    }
    let series = match compare::load_inputs(&args.inputs, io) {
        Ok((series, _)) => series,
        Err(code) => return code,
    };
    if series.is_empty() {
        let _ = writeln!(io.err, "error: nothing to report: no input holds a bolide result document");
        return exit::USAGE;
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        format!("bolide report: {}", names.join(", "))
    });
    let text = match args.format {
        ReportFormat::Html => html::page(&title, &sections(&series)),
        ReportFormat::Md => markdown(&title, &series),
    };
    match output {
        Some(p) if !files::is_stdout(&p) => {
            if let Err(e) = files::write_atomically(&p, |w| w.write_all(text.as_bytes())) {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", p.display());
                return exit::RUN;
            }
            let _ = writeln!(io.out, "report: {} ({} KB)", p.display(), text.len().div_ceil(1024));
        }
        _ => {
            let _ = write!(io.out, "{text}");
        }
    }
    exit::OK
}

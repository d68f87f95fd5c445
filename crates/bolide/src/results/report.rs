//! `bolide report`: saved runs (result documents, bench directories) as one HTML file with charts,
//! or as Markdown. Reads documents only, as `compare` does, and never runs anything.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::compare::{self, Series};
use crate::cli::{ReportArgs, ReportFormat};
use crate::console::{exit, Io};
use crate::files;
use crate::report::html::{self, Section};
use crate::report::svg;
use crate::report::table::{md_fence, md_text};
use crate::stats::gnuplot;

/// From this many series on, a report has a history: each measure's trend across the labels.
pub const HISTORY_FROM: usize = 3;

/// Puts the series in the order of their first run's start (`--order time`); ties keep their order.
pub fn by_start_time(series: &mut [Series]) {
    let first = |s: &Series| s.runs.iter().map(|(_, d)| d.started_at().to_string()).min().unwrap_or_default();
    series.sort_by_cached_key(first);
}

/// The sections of a report of `series`: the comparison when there are several (with per-step
/// latency side by side for DDP), a history from three series on, every run's value per measure
/// when there is more than one run, then each run, then each per-request file of `requests`.
pub fn sections(series: &[Series], requests: &[html::Requests]) -> Vec<Section> {
    let mut out = Vec::new();
    let runs: usize = series.iter().map(|s| s.runs.len()).sum();
    // A series is what was repeated: a directory holding two workloads (the demo's reactive and
    // non-reactive users) is two series in the charts across runs and labels, never "run 1,
    // run 2" of one.
    let repeated = by_workload(series);
    let series_for_charts = &repeated[..];
    if series.len() >= 2 {
        let ddp: Vec<(String, Vec<&crate::stats::vu::DdpDoc>)> = series
            .iter()
            .map(|s| {
                let docs = s.runs.iter().filter_map(|(_, d)| match d {
                    crate::stats::doc::Doc::Ddp(v) => Some(v.as_ref()),
                    crate::stats::doc::Doc::Http(_) => None,
                });
                (s.name.clone(), docs.collect())
            })
            .collect();
        out.push(Section {
            title: format!("{} compared with {}", others(series), series[0].name),
            notes: vec![],
            text: comparison(series, false),
            charts: crate::report::charts::steps_side_by_side(&ddp),
        });
    }
    if series.len() >= HISTORY_FROM {
        let measures: Vec<(String, Vec<crate::stats::doc::Measures>)> =
            series.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d.measures()).collect())).collect();
        out.push(Section {
            title: "History".into(),
            notes: vec![format!(
                "{} labels, in the order given (bolide report --order time sorts them by their first run's start)",
                series.len()
            )],
            text: String::new(),
            charts: crate::report::charts::history(&measures),
        });
    }
    if runs >= 2 {
        let measures: Vec<(String, Vec<crate::stats::doc::Measures>)> = series_for_charts
            .iter()
            .map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d.measures()).collect()))
            .collect();
        let docs: Vec<(String, Vec<&crate::stats::doc::Doc>)> =
            series_for_charts.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d).collect())).collect();
        let mut charts = crate::report::charts::across_runs(&measures);
        charts.extend(crate::report::charts::overlaid(&docs));
        out.push(Section {
            title: "Every run".into(),
            notes: vec![format!("{runs} runs in {} series", series_for_charts.len())],
            text: String::new(),
            charts,
        });
    }
    out.extend(run_sections(series));
    out.extend(requests.iter().map(html::requests_section));
    out
}

/// The series compared with the first, as `compare` writes it (Markdown tables or text).
fn comparison(series: &[Series], md: bool) -> String {
    let report = compare::build(series, 0, Vec::new());
    let watched = series[0].runs.first().map(|(_, d)| super::watched_names(d)).unwrap_or_default();
    compare::render(&report, md, &watched)
}

/// Each series cut by workload: a series holding runs of several workloads becomes one series
/// per workload, named `LABEL (WORKLOAD)`; the others stay as they are.
pub fn by_workload(series: &[Series]) -> Vec<Series> {
    let mut out = Vec::new();
    for s in series {
        let mut kinds: Vec<String> = Vec::new();
        for (_, d) in &s.runs {
            if !kinds.contains(&d.workload()) {
                kinds.push(d.workload());
            }
        }
        if kinds.len() <= 1 {
            out.push(s.clone());
            continue;
        }
        for w in kinds {
            let runs = s.runs.iter().filter(|(_, d)| d.workload() == w).cloned().collect();
            out.push(Series { name: format!("{} ({w})", s.name), source: s.source.clone(), runs });
        }
    }
    out
}

/// One section per run, named by its series (and its file when the series has several). An HTTP
/// run with a per-request file beside it (`NAME.tsv` next to `NAME.json`, as `bench --gnuplot`
/// writes them) shows every request's response time as well.
fn run_sections(series: &[Series]) -> Vec<Section> {
    let mut out = Vec::new();
    for s in series {
        for (path, doc) in &s.runs {
            let name = match s.runs.len() {
                1 => s.name.clone(),
                _ => format!("{}: {}", s.name, file_name(path)),
            };
            let mut section = html::run_section(doc, &name);
            let tsv = path.with_extension("tsv");
            if matches!(doc, crate::stats::doc::Doc::Http(_)) && gnuplot::is_requests_file(&tsv) {
                html::add_requests(&mut section, &tsv);
            }
            out.push(section);
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

/// The charts of a run a Markdown report shows as images (the rest are in the HTML report).
const MD_RUN_CHARTS: [&str; 7] =
    ["throughput", "latency", "every-request", "latency-spectrum", "users", "step-spectrum", "server-cpu"];

/// The report in Markdown: the comparison's tables, then each run's summary as text. With
/// `images` (a directory, and how the Markdown file reaches it), the charts are written there as
/// SVG and shown under their section: the comparison's, the history, and each run's main ones.
pub fn markdown(
    title: &str,
    series: &[Series],
    requests: &[html::Requests],
    images: Option<(&Path, &str)>,
) -> std::io::Result<String> {
    let mut out = format!("# {}\n\n", md_text(title));
    let mut n = 0;
    let mut show = |out: &mut String, charts: &[crate::report::charts::Chart]| -> std::io::Result<()> {
        let Some((dir, rel)) = images else { return Ok(()) };
        for c in charts.iter().filter(|c| c.empty.is_none()) {
            n += 1;
            let name = format!("{n:02}-{}.svg", c.id);
            files::write_atomically(&dir.join(&name), |w| w.write_all(svg::chart(c).as_bytes()))?;
            out.push_str(&format!("![{}]({rel}/{name})\n\n", md_text(&c.title)));
        }
        Ok(())
    };
    let all = sections(series, requests);
    if series.len() >= 2 {
        out.push_str(&comparison(series, true));
        out.push('\n');
        show(&mut out, &all[0].charts)?;
    }
    if let Some(history) = all.iter().find(|s| s.title == "History") {
        out.push_str("## History\n\n");
        show(&mut out, &history.charts)?;
    }
    let per_request = requests.iter().map(html::requests_section);
    for s in run_sections(series).into_iter().chain(per_request) {
        out.push_str(&format!("## {}\n\n", md_text(&s.title)));
        for n in &s.notes {
            out.push_str(&format!("- {}\n", md_text(n)));
        }
        if !s.text.is_empty() {
            // Fenced with more backticks than any run in the text: no string can close it.
            out.push_str(&format!("\n{}\n", md_fence("text", &s.text)));
        } else {
            out.push('\n');
        }
        let main: Vec<_> = s.charts.into_iter().filter(|c| MD_RUN_CHARTS.contains(&c.id.as_str())).collect();
        show(&mut out, &main)?;
    }
    Ok(out)
}

/// Every chart of `sections` in page order, each with a file name unique within the report.
fn chart_files(sections: &[Section]) -> Vec<(String, &crate::report::charts::Chart)> {
    let all = sections.iter().flat_map(|s| &s.charts);
    all.enumerate().map(|(i, c)| (format!("{:02}-{}.svg", i + 1, c.id), c)).collect()
}

/// `--format svg`: one chart (`--chart ID`) to a file or stdout, or every chart into a directory.
fn write_svg(args: &ReportArgs, series: &[Series], requests: &[html::Requests], io: &mut Io) -> i32 {
    let all = sections(series, requests);
    let files = chart_files(&all);
    if let Some(id) = &args.chart {
        let Some((_, c)) = files.iter().find(|(_, c)| &c.id == id) else {
            let mut ids: Vec<&str> = files.iter().map(|(_, c)| c.id.as_str()).collect();
            ids.dedup();
            let _ = writeln!(io.err, "error: --chart {id}: no such chart in this report; it has: {}", ids.join(", "));
            return exit::USAGE;
        };
        let text = svg::chart(c);
        return match args.output.as_deref() {
            Some(p) if !files::is_stdout(p) => match files::write_atomically(p, |w| w.write_all(text.as_bytes())) {
                Ok(()) => {
                    let _ = writeln!(io.out, "chart {id}: {}", p.display());
                    exit::OK
                }
                Err(e) => {
                    let _ = writeln!(io.err, "error: cannot write {}: {e}", p.display());
                    exit::RUN
                }
            },
            _ => {
                let _ = write!(io.out, "{text}");
                exit::OK
            }
        };
    }
    let dir = args.output.clone().unwrap_or_else(|| PathBuf::from("bolide-charts"));
    if files::is_stdout(&dir) {
        let _ = writeln!(io.err, "error: --format svg writes one file per chart: give -o DIR, or --chart ID for one");
        return exit::USAGE;
    }
    if let Err(e) = std::fs::create_dir_all(&dir) {
        let _ = writeln!(io.err, "error: cannot create {}: {e}", dir.display());
        return exit::RUN;
    }
    for (name, c) in &files {
        let path = dir.join(name);
        if let Err(e) = files::write_atomically(&path, |w| w.write_all(svg::chart(c).as_bytes())) {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            return exit::RUN;
        }
    }
    let _ = writeln!(io.out, "report: {} charts as SVG in {}", files.len(), dir.display());
    exit::OK
}

/// The HTML report of the result documents in `dir` (a bench series); None when it holds none.
pub fn dir_page(dir: &Path, title: &str) -> Result<Option<String>, String> {
    let mut skipped = Vec::new();
    let series = compare::load_series(dir, &mut skipped)?;
    Ok((!series.runs.is_empty()).then(|| html::page(title, &sections(&[series], &[]))))
}

/// Writes the HTML report of the result documents in `dir` (a bench series) to `path`; false when
/// it could not be written (the reason is on stderr).
pub fn write_dir_report(dir: &Path, path: &Path, title: &str, io: &mut Io) -> bool {
    let page = match dir_page(dir, title) {
        Ok(Some(p)) => p,
        Ok(None) => return true,
        Err(e) => {
            let _ = writeln!(io.err, "error: no HTML report: {e}");
            return false;
        }
    };
    write_page(&page, path, io)
}

/// Writes the HTML report of result documents (each its own series) to `path`; false when it
/// could not be written (the reason is on stderr).
pub fn write_docs_report(docs: &[PathBuf], path: &Path, title: &str, io: &mut Io) -> bool {
    let series = match compare::load_inputs(docs, io) {
        Ok((series, _)) => series,
        Err(_) => return false,
    };
    if series.is_empty() {
        return true;
    }
    let page = html::page(title, &sections(&series, &[]));
    write_page(&page, path, io)
}

/// Writes an HTML page whole (or not at all) and says where; false when it could not.
fn write_page(page: &str, path: &Path, io: &mut Io) -> bool {
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
    if args.chart.is_some() && args.format != ReportFormat::Svg {
        let _ = writeln!(io.err, "error: --chart goes with --format svg");
        return exit::USAGE;
    }
    let output: Option<PathBuf> = match (&args.output, args.format) {
        (Some(p), _) => Some(p.clone()),
        (None, ReportFormat::Html) => Some(PathBuf::from("bolide-report.html")),
        (None, ReportFormat::Md | ReportFormat::Svg) => None,
    };
    let svg_dir = args.format == ReportFormat::Svg && args.chart.is_none();
    if let Some(p) = output.as_deref().filter(|p| !files::is_stdout(p) && !svg_dir) {
        // A directory that does not exist yet is made, as `bench --out` makes its own.
        if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            if let Err(e) = std::fs::create_dir_all(parent) {
                let _ = writeln!(io.err, "error: -o {}: cannot create {}: {e}", p.display(), parent.display());
                return exit::USAGE;
            }
        }
        if let Err(e) = files::check_writable(p) {
            let _ = writeln!(io.err, "error: {e}");
            return exit::USAGE;
        }
    }
    // Per-request files (ab's -g layout, from `--gnuplot` or from ab) are drawn on their own.
    let (requests, docs): (Vec<PathBuf>, Vec<PathBuf>) =
        args.inputs.iter().cloned().partition(|p| p.is_file() && gnuplot::is_requests_file(p));
    let mut read = Vec::new();
    for path in requests {
        match gnuplot::sample(&path, crate::report::charts::REQUEST_POINTS) {
            Ok(sample) => read.push((path, sample)),
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
                return exit::USAGE;
            }
        }
    }
    let requests = read;
    let mut series = match compare::load_inputs(&docs, io) {
        Ok((series, _)) => series,
        Err(code) => return code,
    };
    if args.order == crate::cli::ReportOrder::Time {
        by_start_time(&mut series);
    }
    if series.is_empty() && requests.is_empty() {
        let _ =
            writeln!(io.err, "error: nothing to report: no input holds a bolide result document or a per-request file");
        return exit::USAGE;
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let mut names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
        names.extend(requests.iter().map(|(p, _)| file_name(p)));
        format!("bolide report: {}", names.join(", "))
    });
    let text = match args.format {
        ReportFormat::Html => html::page(&title, &sections(&series, &requests)),
        ReportFormat::Svg => return write_svg(args, &series, &requests, io),
        ReportFormat::Md => {
            // Written to a file, its charts go beside it as SVG images (FILE.md -> FILE-charts/).
            let images = output.as_deref().filter(|p| !files::is_stdout(p)).map(|p| {
                let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "report".into());
                let rel = format!("{stem}-charts");
                (p.with_file_name(&rel), rel)
            });
            if let Some((dir, _)) = &images {
                if let Err(e) = std::fs::create_dir_all(dir) {
                    let _ = writeln!(io.err, "error: cannot create {}: {e}", dir.display());
                    return exit::RUN;
                }
            }
            match markdown(&title, &series, &requests, images.as_ref().map(|(d, r)| (d.as_path(), r.as_str()))) {
                Ok(t) => t,
                Err(e) => {
                    let _ = writeln!(io.err, "error: cannot write the Markdown report's charts: {e}");
                    return exit::RUN;
                }
            }
        }
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

//! `bolide report`: saved runs (result documents, bench directories) as one HTML file with charts,
//! or as Markdown. Reads documents only, as `compare` does, and never runs anything.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::compare::{self, Series};
use crate::cli::{ReportArgs, ReportFormat};
use crate::console::{exit, Io};
use crate::files;
use crate::problem::Problem;
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

/// From this many runs on, each run's section starts folded (its heading opens it).
const FOLD_FROM: usize = 3;

/// The sections of a report of `series`: the summary first (the verdict of each comparison, or
/// the run's figures, or every run in one table), the comparison when there are several series
/// (with per-step latency side by side for DDP), a history per workload that three or more
/// labels ran, every run's value per measure when there is more than one run, then each run
/// (folded from three on), then the per-request files (overlaid on one chart).
pub fn sections(series: &[Series], requests: &[html::Requests]) -> Vec<Section> {
    let report = (series.len() >= 2).then(|| compare::build(series, 0, Vec::new()));
    sections_with(series, requests, report)
}

/// [`sections`] with the comparison already made (a `bench --parameter-list`'s, with its
/// baseline, gate and detectable changes).
pub fn sections_with(series: &[Series], requests: &[html::Requests], report: Option<compare::Report>) -> Vec<Section> {
    let mut out = Vec::new();
    let compared = report.as_ref().filter(|r| !r.comparisons.is_empty() || !r.http_tables.is_empty());
    let mut summary = summary_section(series, compared, requests);
    if let Some(r) = report.as_ref().filter(|r| compared.is_none() && !r.refused.is_empty()) {
        // Series given to be compared that could not be: said first, with the reasons.
        summary.blocks.insert(
            0,
            crate::report::blocks::Block::Verdict {
                head: "Not compared".into(),
                rest: format!(": {}", r.refused.join(" ")),
                tone: crate::report::table::Tone::Warn,
            },
        );
    }
    out.push(summary);
    if let Some(report) = compared {
        let ddp: Vec<(String, Vec<&crate::stats::vu::VuDoc>)> = series
            .iter()
            .map(|s| {
                let docs = s.runs.iter().filter_map(|(_, d)| d.ddp());
                (s.name.clone(), docs.collect())
            })
            .collect();
        let watched = series[0].runs.first().map(|(_, d)| super::watched_names(d)).unwrap_or_default();
        out.push(Section {
            kind: "comparison",
            title: format!("{} compared with {}", others(series), series[0].name),
            blocks: compare::blocks(report, &watched),
            charts: crate::report::charts::steps_side_by_side(&ddp),
            ..Section::default()
        });
    }
    // A history is a trend across labels of one workload; different workloads are no trend.
    for (workload, labels) in same_workload_labels(series) {
        if labels.len() < HISTORY_FROM {
            continue;
        }
        out.push(Section {
            kind: "history",
            title: format!("History: {workload}"),
            notes: vec![format!(
                "{} labels, in the order given (bolide report --order time sorts them by their first run's start)",
                labels.len()
            )],
            charts: crate::report::charts::history(&labels),
            ..Section::default()
        });
    }
    let mut each = runs_sections(series);
    // One run: the summary's band is that run's band; the run's section does not say it twice.
    if let [only] = each.as_mut_slice() {
        if !out[0].band.is_empty() && only.kind == "run" {
            only.band.clear();
        }
    }
    out.extend(each);
    if !requests.is_empty() {
        out.push(html::requests_section(requests));
    }
    out
}

/// Every run's value per measure and its time series overlaid (from two runs on; a series per
/// workload of each input), then each run's own section (folded from three on).
pub fn runs_sections(series: &[Series]) -> Vec<Section> {
    let mut out = Vec::new();
    let runs: usize = series.iter().map(|s| s.runs.len()).sum();
    // A series is what was repeated: a directory holding two workloads (the demo's reactive and
    // non-reactive users) is two series in the charts across runs and labels, never "run 1,
    // run 2" of one.
    let repeated = by_workload(series);
    if runs >= 2 {
        let measures: Vec<(String, Vec<crate::stats::doc::Measures>)> =
            repeated.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d.measures()).collect())).collect();
        let docs: Vec<(String, Vec<&crate::stats::doc::Doc>)> =
            repeated.iter().map(|s| (s.name.clone(), s.runs.iter().map(|(_, d)| d).collect())).collect();
        // Values per run only where a series has several (one run a series is the summary's
        // table); the time series of every run, overlaid, always.
        let mut charts = Vec::new();
        if repeated.iter().any(|s| s.runs.len() >= 2) {
            charts.extend(crate::report::charts::across_runs(&measures));
        }
        charts.extend(crate::report::charts::overlaid(&docs));
        out.push(Section {
            kind: "runs",
            title: "Every run".into(),
            notes: vec![format!("{runs} runs in {} series", repeated.len())],
            charts,
            ..Section::default()
        });
    }
    let mut each = run_sections(series);
    if each.len() >= FOLD_FROM {
        each.iter_mut().for_each(|s| s.folded = true);
    }
    out.extend(each);
    out
}

/// A label and its runs' measures.
type Labelled = (String, Vec<crate::stats::doc::Measures>);

/// For each workload, the labels (series) that ran it with their runs' measures, in the order
/// given.
fn same_workload_labels(series: &[Series]) -> Vec<(String, Vec<Labelled>)> {
    let mut out: Vec<(String, Vec<Labelled>)> = Vec::new();
    for s in series {
        for (_, d) in &s.runs {
            let w = d.workload();
            let at = match out.iter().position(|(x, _)| *x == w) {
                Some(i) => i,
                None => {
                    out.push((w.clone(), Vec::new()));
                    out.len() - 1
                }
            };
            let labels = &mut out[at].1;
            match labels.iter_mut().find(|(name, _)| *name == s.name) {
                Some((_, m)) => m.push(d.measures()),
                None => labels.push((s.name.clone(), vec![d.measures()])),
            }
        }
    }
    out
}

/// The page's first section: what was tested, did it pass, what changed and by how much, and
/// whether the result can be trusted, as a band of figures and (for several runs) one table.
fn summary_section(series: &[Series], report: Option<&compare::Report>, requests: &[html::Requests]) -> Section {
    use crate::report::band::{self, Fact};
    use crate::report::table::Tone;
    let docs: Vec<(&str, &crate::stats::doc::Doc)> =
        series.iter().flat_map(|s| s.runs.iter().map(move |(_, d)| (s.name.as_str(), d))).collect();
    let mut section = Section { kind: "summary", title: "Summary".into(), ..Section::default() };
    let suspect = docs.iter().filter(|(_, d)| d.measures().suspect.is_some()).count();
    let trust = |n: usize| match suspect {
        0 => Fact::new("Trust", "clean").detail(format!("none of the {n} runs is suspect")).tone(Tone::Good),
        k => Fact::new("Trust", format!("{k} of {n} runs suspect"))
            .detail("bolide or the machine was the limit: see each run")
            .tone(Tone::Warn),
    };
    if let Some(r) = report {
        // One line of figures per comparison: each metric's change in the reports' words, its
        // verdict in a word and a colour.
        for c in &r.comparisons {
            let who = if r.comparisons.len() > 1 { format!("{}: ", c.series) } else { String::new() };
            for m in &c.metrics {
                let name = m.metric.split(" (").next().unwrap_or(&m.metric);
                let p = m.p_value.map(|p| format!(", {}", super::stats::p_text(p))).unwrap_or_default();
                let detail = match m.judgement {
                    compare::Judgement::Same if m.p_value.is_some() => format!("same: within run-to-run noise{p}"),
                    compare::Judgement::Inconclusive if m.test == "paired" => format!("inconclusive: {}", m.verdict),
                    compare::Judgement::Inconclusive => "inconclusive: too few clean runs to tell".to_string(),
                    j => format!("{}{p}", j.word()),
                };
                section.band.push(Fact::new(format!("{who}{name}"), &m.words).detail(detail).tone(m.judgement.tone()));
            }
            section.notes.push(format!(
                "{}: {} ({} runs) against {} ({} runs)",
                c.workload,
                c.series,
                c.runs.len(),
                c.baseline,
                c.baseline_runs.len()
            ));
            if !c.on_means.is_empty() {
                section.blocks.push(compare::headline(c));
            }
        }
        section.band.push(trust(docs.len()));
        if !r.refused.is_empty() {
            section.notes.push(format!("{} pairs not compared (different workloads): see below", r.refused.len()));
        }
        return section;
    }
    if let [(_, doc)] = docs.as_slice() {
        section.notes.push(band::what(doc));
        section.band = band::run_facts(doc);
        return section;
    }
    if docs.is_empty() {
        for (path, sample) in requests {
            section.band.push(
                Fact::new(file_name(path), format!("{} requests", sample.requests))
                    .detail(format!("over {} seconds", sample.seconds)),
            );
        }
        return section;
    }
    // Several runs: how many, of what, errors and thresholds over all, and one row per run.
    let mut workloads: Vec<String> = docs.iter().map(|(_, d)| d.workload()).collect();
    workloads.dedup();
    section.notes.push(format!("{} runs of {}", docs.len(), workloads.join(", ")));
    section.band.push(Fact::new("Runs", docs.len().to_string()).detail(workloads.join(", ")));
    let errors: u64 = docs.iter().map(|(_, d)| d.measures().errors).sum();
    section.band.push(if errors == 0 {
        Fact::new("Errors", "none").tone(Tone::Good)
    } else {
        Fact::new("Errors", crate::report::term::count(errors)).detail("over every run").tone(Tone::Bad)
    });
    let (set, broken): (usize, usize) = docs
        .iter()
        .map(|(_, d)| (d.thresholds().len(), d.thresholds().iter().filter(|t| !t.ok).count()))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if set > 0 {
        section.band.push(match broken {
            0 => Fact::new("Thresholds", format!("{set} of {set} passed")).tone(Tone::Good),
            b => Fact::new("Thresholds", format!("{b} of {set} broken")).tone(Tone::Bad),
        });
    }
    section.band.push(trust(docs.len()));
    section.blocks.push(crate::report::blocks::Block::table(overview(&docs)));
    section
}

/// Every run in one table: its series, workload, the Meteor reports' Time (their headline
/// figure), the figure of its kind (requests/s or users), p99, errors, the server's CPU and RAM,
/// and whether it can be trusted.
fn overview(docs: &[(&str, &crate::stats::doc::Doc)]) -> crate::report::table::Table {
    use crate::report::table::{meteor_bytes, meteor_cpu, meteor_time, ms, Table, Tone};
    let mut t = Table::new(&["Run", "Workload", "Time", "Throughput", "p99", "Errors", "CPU", "RAM", "Trust"])
        .right(&[2, 3, 4, 5, 6, 7]);
    let na = || "n/a".to_string();
    for (i, (name, d)) in docs.iter().enumerate() {
        let m = d.measures();
        let throughput = crate::report::shown(d).throughput();
        // Runs of one series are told apart by their workload where that differs (the demo's
        // two), else by their place.
        let same_name: Vec<&crate::stats::doc::Doc> = docs.iter().filter(|(n, _)| n == name).map(|(_, d)| *d).collect();
        let run = match same_name.len() {
            1 => name.to_string(),
            _ if same_name.iter().filter(|x| x.workload() == d.workload()).count() == 1 => {
                format!("{name} ({})", d.workload())
            }
            _ => format!("{name} #{}", i + 1),
        };
        let trust = crate::report::band::trust(&m);
        t.row(vec![
            run,
            d.workload(),
            meteor_time(m.time_s),
            throughput,
            m.p99_ms.map(ms).unwrap_or_else(na),
            m.errors.to_string(),
            m.cpu_pct.map(meteor_cpu).unwrap_or_else(na),
            m.ram_bytes.map(meteor_bytes).unwrap_or_else(na),
            trust.0.to_string(),
        ]);
        let row = t.rows.len() - 1;
        t.tone(row, 8, trust.1);
        if m.errors > 0 {
            t.tone(row, 5, Tone::Bad);
        }
    }
    t
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
            if doc.http().is_some() && gnuplot::is_requests_file(&tsv) {
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
    markdown_of(title, &sections(series, requests), series, requests, images)
}

/// [`markdown`] of sections already made (`all`: a summary's first, then the series'); a
/// summary's own sections (a ladder, a comparison without its runs) come first, whole.
fn markdown_of(
    title: &str,
    all: &[Section],
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
    // What only a summary holds: its sections before the series' own (a ladder, a comparison
    // without its runs).
    let own = all.iter().take_while(|s| s.kind != "summary");
    for s in own.clone() {
        out.push_str(&format!("## {}\n\n", md_text(&s.title)));
        for n in &s.notes {
            out.push_str(&format!("- {}\n", md_text(n)));
        }
        out.push('\n');
        out.push_str(&crate::report::blocks::render(&s.blocks, true));
        show(&mut out, &s.charts)?;
    }
    let all: Vec<&Section> = all.iter().skip(own.count()).collect();
    if let Some(c) = all.iter().find(|s| s.kind == "comparison") {
        out.push_str(&crate::report::blocks::render(&c.blocks, true));
        show(&mut out, &c.charts)?;
    }
    for history in all.iter().filter(|s| s.kind == "history") {
        out.push_str(&format!("## {}\n\n", md_text(&history.title)));
        show(&mut out, &history.charts)?;
    }
    let per_request = (!requests.is_empty()).then(|| html::requests_section(requests));
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
fn write_svg(args: &ReportArgs, all: &[Section], io: &mut Io) -> i32 {
    let files = chart_files(all);
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
pub fn dir_page(dir: &Path, title: &str) -> Result<Option<String>, Problem> {
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
/// Writes the HTML report of the series in `dirs` with their comparison `report` (a `bench
/// --parameter-list`'s); false when it could not.
pub fn write_compared_report(
    dirs: &[PathBuf],
    report: Option<compare::Report>,
    path: &Path,
    title: &str,
    io: &mut Io,
) -> bool {
    let series = match compare::load_inputs(dirs, io) {
        Ok((series, _)) => series,
        Err(_) => return false,
    };
    if series.is_empty() {
        return true;
    }
    write_page(&html::page(title, &sections_with(&series, &[], report)), path, io)
}

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
        (None, ReportFormat::Md | ReportFormat::Svg | ReportFormat::Csv) => None,
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
    // The summaries bolide writes (a comparison, a bench's or a ladder's): their own sections
    // first, and the result documents they name where those are here.
    let (mut front, mut named) = (Vec::new(), Vec::new());
    let (mut inputs, mut kept, mut others) = (Vec::new(), None, false);
    for input in docs {
        let Some(file) = summary_file(&input) else {
            others = true;
            inputs.push(input);
            continue;
        };
        match read_summary(&file) {
            Ok(read) => {
                // Named in the title by its first section (the ladder, the levels, the comparison).
                named.extend(read.sections.first().map(|s| s.title.clone()));
                front.extend(read.sections);
                inputs.extend(read.inputs);
                kept = kept.or(read.comparison);
            }
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
                return exit::USAGE;
            }
        }
    }
    let mut series = match compare::load_inputs(&inputs, io) {
        Ok((series, _)) => series,
        Err(code) => return code,
    };
    if args.order == crate::cli::ReportOrder::Time {
        by_start_time(&mut series);
    }
    if series.is_empty() && requests.is_empty() && front.is_empty() {
        let _ =
            writeln!(io.err, "error: nothing to report: no input holds a bolide result document or a per-request file");
        return exit::USAGE;
    }
    let title = args.title.clone().unwrap_or_else(|| {
        let mut names = named;
        names.extend(series.iter().map(|s| s.name.clone()));
        names.extend(requests.iter().map(|(p, _)| file_name(p)));
        format!("bolide report: {}", names.join(", "))
    });
    let mut all = front;
    if !series.is_empty() || !requests.is_empty() {
        // A kept comparison is the series' own when nothing else was given beside its summary.
        all.extend(match kept.filter(|_| !others) {
            Some(report) => sections_with(&series, &requests, Some(report)),
            None => sections(&series, &requests),
        });
    }
    let text = match args.format {
        ReportFormat::Html => html::page(&title, &all),
        ReportFormat::Csv => {
            let mut text = crate::report::csv::HEADER.to_string();
            for s in &series {
                for (path, doc) in &s.runs {
                    text.push_str(&crate::report::csv::rows(doc, &file_name(path)));
                }
            }
            text
        }
        ReportFormat::Svg => return write_svg(args, &all, io),
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
            match markdown_of(&title, &all, &series, &requests, images.as_ref().map(|(d, r)| (d.as_path(), r.as_str())))
            {
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

/// The summaries bolide writes beside (or instead of) result documents: a comparison
/// (`comparison.json`, `compare --format json`), a `bench --parameter-list`'s `--json`, a bench
/// series' summary (`*-summary.json`, `bench --json`), a capacity ladder's (`capacity --json`,
/// `*-capacity.json` in its `--out DIR`) and the levels of `run ddp-calls --users 1,10,50`
/// (`--json`). None of them is a run; each is read back here.
const SUMMARY_FORMATS: [&str; 5] = [
    "bolide.comparison",
    "bolide.bench-parameters",
    super::SUMMARY_FORMAT,
    super::ladder::SUMMARY_FORMAT,
    super::levels::FORMAT,
];

/// A summary read back: sections of its own (a ladder, a comparison whose runs are gone), the
/// directories of result documents it names that are here, and the comparison it kept.
#[derive(Default)]
struct FromSummary {
    sections: Vec<Section>,
    inputs: Vec<PathBuf>,
    comparison: Option<compare::Report>,
}

/// The summary an input is or holds: a file of one of [`SUMMARY_FORMATS`], or a directory with a
/// comparison (a `bench --parameter-list`'s out directory) or a capacity ladder's summary in it.
/// None for result documents and their directories.
fn summary_file(input: &Path) -> Option<PathBuf> {
    if input.is_dir() {
        let entries = std::fs::read_dir(input).ok()?;
        // A bounded look at the names only: the documents themselves are read later, once.
        let mut names: Vec<PathBuf> = entries.flatten().take(100_000).map(|e| e.path()).collect();
        names.sort();
        let runs_here = names.iter().any(|p| {
            let n = file_name(p);
            n.ends_with(".json") && n != "comparison.json" && !n.ends_with("-capacity.json")
        });
        return names.into_iter().find(|p| {
            let n = file_name(p);
            (n.ends_with("-capacity.json") || (n == "comparison.json" && !runs_here)) && summary_format(p).is_some()
        });
    }
    summary_format(input).map(|_| input.to_path_buf())
}

/// The format of a summary file (one of [`SUMMARY_FORMATS`]); None for anything else.
fn summary_format(path: &Path) -> Option<&'static str> {
    if !path.is_file() || path.extension().and_then(|e| e.to_str()) != Some("json") {
        return None;
    }
    // The format comes first in every document bolide writes: a result document (which may be
    // large) is told apart by its first bytes, never read twice.
    let mut head = Vec::new();
    std::fs::File::open(path).ok()?.take(4096).read_to_end(&mut head).ok()?;
    let head = String::from_utf8_lossy(&head);
    if !SUMMARY_FORMATS.iter().any(|f| head.contains(&format!("\"{f}\""))) {
        return None;
    }
    let bytes = files::read_limited(path, crate::stats::doc::MAX_DOC_BYTES).ok()?;
    let head = crate::stats::result::Head::of(std::str::from_utf8(&bytes).ok()?).ok()?;
    SUMMARY_FORMATS.into_iter().find(|f| head.format.as_deref() == Some(*f))
}

/// Where a directory a summary names is now: as recorded (relative to where the command ran),
/// else beside the summary (a bench's out directory moved whole). None when it is in neither.
fn locate(recorded: &Path, beside: &Path) -> Option<PathBuf> {
    if recorded.is_dir() {
        return Some(recorded.to_path_buf());
    }
    let moved = beside.join(recorded.file_name()?);
    moved.is_dir().then_some(moved)
}

/// Reads the summary at `path` back into what the report draws.
fn read_summary(path: &Path) -> Result<FromSummary, Problem> {
    let shown = path.display();
    let bytes = files::read_limited(path, crate::stats::doc::MAX_DOC_BYTES).map_err(|e| format!("{shown}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8 text"))?;
    let beside = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let bad = |e: serde_json::Error| format!("{shown}: not a summary this bolide reads ({e})");
    let format = crate::stats::result::Head::of(&text).ok().and_then(|h| h.format).unwrap_or_default();
    match format.as_str() {
        "bolide.comparison" => {
            let report: compare::Report = serde_json::from_str(&text).map_err(bad)?;
            Ok(compared(report, beside, &shown.to_string()))
        }
        "bolide.bench-parameters" => {
            #[derive(serde::Deserialize)]
            struct Parameters {
                series: Vec<super::BenchSummary>,
                comparison: Option<compare::Report>,
            }
            let p: Parameters = serde_json::from_str(&text).map_err(bad)?;
            match p.comparison {
                Some(report) => Ok(compared(report, beside, &shown.to_string())),
                // No comparison (the grid stopped early): each series' runs as the summary keeps them.
                None => Ok(FromSummary {
                    sections: p.series.iter().map(|s| bench_section(s, "no comparison was made")).collect(),
                    ..FromSummary::default()
                }),
            }
        }
        super::SUMMARY_FORMAT => {
            let s: super::BenchSummary = serde_json::from_str(&text).map_err(bad)?;
            // Beside its runs (its series' directory): the runs themselves.
            let all_here =
                !s.runs.is_empty() && s.runs.iter().all(|r| r.file.as_ref().is_some_and(|f| beside.join(f).is_file()));
            if all_here {
                return Ok(FromSummary { inputs: vec![beside.to_path_buf()], ..FromSummary::default() });
            }
            Ok(FromSummary {
                sections: vec![bench_section(&s, "its runs' documents are not beside it")],
                ..FromSummary::default()
            })
        }
        super::ladder::SUMMARY_FORMAT => {
            let s: super::ladder::CapacitySummary = serde_json::from_str(&text).map_err(bad)?;
            let ladder = s.section().map_err(|e| format!("{shown}: {e}"))?;
            // The levels' documents, where its --out DIR kept them beside it.
            let mut levels = Vec::new();
            for l in &s.levels {
                let file = beside.join(format!("{}-level-{}.json", s.workload, l.level));
                if let Ok(d) = crate::stats::doc::Doc::load(&file) {
                    let name = format!("level {} {}", l.level, s.unit);
                    levels.push(Series { name: name.clone(), source: file, runs: vec![(PathBuf::from(name), d)] });
                }
            }
            let mut sections = vec![ladder];
            sections.extend(runs_sections(&levels));
            Ok(FromSummary { sections, ..FromSummary::default() })
        }
        super::levels::FORMAT => {
            let d: super::levels::LevelsDoc = serde_json::from_str(&text).map_err(bad)?;
            // Each level's document, where its --out DIR kept it beside the levels document.
            let levels: Vec<Series> = d
                .levels
                .iter()
                .filter_map(|l| {
                    // As recorded (relative to where it ran), else beside the levels document.
                    let recorded = Path::new(l.file.as_deref()?);
                    let file =
                        if recorded.is_file() { recorded.to_path_buf() } else { beside.join(recorded.file_name()?) };
                    let doc = crate::stats::doc::Doc::load(&file).ok()?;
                    let name = format!("{} {}", d.by, l.level);
                    Some(Series { name: name.clone(), source: file, runs: vec![(PathBuf::from(name), doc)] })
                })
                .collect();
            let mut notes = vec![format!("{} levels of {} by {}", d.levels.len(), d.scenario, d.by)];
            if d.interrupted {
                notes.push("interrupted before the last level".into());
            }
            if d.levels.iter().any(|l| l.suspect.is_some()) {
                notes.push("(suspect): bolide or the machine was the limit at that level; see its document".into());
            }
            let table = Section {
                kind: "levels",
                title: format!("{} levels", d.scenario),
                notes,
                blocks: vec![crate::report::blocks::Block::table(super::levels::table(&d.scenario, &d.levels))],
                ..Section::default()
            };
            let mut sections = vec![table];
            sections.extend(runs_sections(&levels));
            Ok(FromSummary { sections, ..FromSummary::default() })
        }
        _ => Err(format!("{shown}: not a summary this bolide reads (format {format:?})").into()),
    }
}

/// A comparison read back: with its series' directories when they are all here (the page then
/// has their runs and charts too), else its own tables alone.
fn compared(report: compare::Report, beside: &Path, shown: &str) -> FromSummary {
    let dirs: Option<Vec<PathBuf>> = report.series.iter().map(|s| locate(Path::new(&s.source), beside)).collect();
    if let Some(dirs) = dirs.filter(|d| d.len() >= 2) {
        return FromSummary { inputs: dirs, comparison: Some(report), ..FromSummary::default() };
    }
    let names: Vec<&str> = report.series.iter().map(|s| s.name.as_str()).collect();
    let baseline = report.baseline.clone();
    let others: Vec<&str> = names.iter().filter(|n| **n != baseline).copied().collect();
    let sources: Vec<&str> = report.series.iter().map(|s| s.source.as_str()).collect();
    FromSummary {
        sections: vec![Section {
            kind: "comparison",
            title: format!("{} compared with {baseline}", others.join(", ")),
            notes: vec![format!(
                "from {shown}; the series' result documents ({}) are not here: the comparison's tables without \
                 the runs' charts",
                sources.join(", ")
            )],
            blocks: compare::blocks(&report, "the server"),
            ..Section::default()
        }],
        ..FromSummary::default()
    }
}

/// A bench series' summary alone: its runs' table and notes, and why there is no more.
fn bench_section(s: &super::BenchSummary, why: &str) -> Section {
    use crate::report::blocks::Block;
    let mut lines = super::table_notes(&s.runs, "the server", None);
    if s.interrupted {
        lines.push(format!("Interrupted: {} of {} runs finished.", s.runs.len(), s.runs_planned));
    }
    Section {
        kind: "runs",
        title: format!("{} ({})", s.label, s.workload),
        notes: vec![format!("{} runs, from the series' summary ({why})", s.runs.len())],
        blocks: vec![Block::table(super::runs_table(&s.runs, s.mean.as_ref(), None)), Block::Lines { lines }],
        ..Section::default()
    }
}

//! The HTML report: one self-contained file (uPlot, styles and data inline; a Content Security
//! Policy that forbids every network request), readable offline and in print.

use serde::Serialize;

use super::band::Fact;
use super::blocks::Block;
use super::charts::Chart;
use crate::stats::doc::Doc;

const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");
/// Drawing code of ours: reads `REPORT`, draws each chart, reports what it drew on `<body>`.
const DRAW_JS: &str = include_str!("../../assets/report.js");
const STYLE: &str = include_str!("../../assets/report.css");
/// The live dashboard's own code: takes snapshots from `/events`, then the final report.
const LIVE_JS: &str = include_str!("../../assets/live.js");

/// One section of a report: a heading, its summary band, its tables, the terminal's text, charts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Section {
    /// What the section is: summary, comparison, history, runs, run, requests, capacity,
    /// cluster (for the page's navigation, and for the tests).
    pub kind: &'static str,
    pub title: String,
    /// Lines under the title (when, what, the verdict).
    pub notes: Vec<String>,
    /// The figures people quote, first: the page opens with the first section's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub band: Vec<Fact>,
    /// Headings, lines, verdicts and tables (drawn as HTML tables).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// Monospaced text as the terminal shows it (under the tables, folded, when there are some).
    pub text: String,
    pub charts: Vec<Chart>,
    /// Shown folded (one run among many): its heading opens it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub folded: bool,
}

/// The section of one run: its figures, its tables, its charts, and its summary as the terminal
/// shows it.
pub fn run_section(doc: &Doc, name: &str) -> Section {
    let envelope = doc.envelope();
    let (command, interrupted) = (envelope.command_line.join(" "), envelope.interrupted);
    let suspect = doc.generator().and_then(|g| g.suspect.clone());
    let mut notes = vec![format!("started {}", doc.started_at()), format!("command: {command}")];
    if interrupted {
        notes.push("interrupted: the run was stopped before its end".into());
    }
    if let Some(why) = suspect {
        notes.push(format!("suspect: {why}"));
    }
    Section {
        kind: "run",
        title: name.to_string(),
        notes,
        band: super::band::run_facts(doc),
        blocks: super::band::run_blocks(doc),
        text: super::summary(doc),
        charts: super::charts::single_run(doc),
        folded: false,
    }
}

/// Adds the every-request figure of a per-request file (`--gnuplot`) to a run's section, before
/// its latency spectrum.
pub fn add_requests(section: &mut Section, path: &std::path::Path) {
    let chart = super::charts::every_request_in(path);
    let at = section.charts.iter().position(|c| c.id == "latency-spectrum").unwrap_or(section.charts.len());
    section.charts.insert(at, chart);
}

/// A per-request file given on its own (ab's `-g` output, or bolide's), read.
pub type Requests = (std::path::PathBuf, crate::stats::gnuplot::RequestSample);

/// The section of the per-request files given on their own: every request of each, overlaid on
/// one chart (one y scale, a series per file).
pub fn requests_section(files: &[Requests]) -> Section {
    let name = |p: &std::path::Path| {
        p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| p.display().to_string())
    };
    let mut notes = Vec::new();
    for (path, sample) in files {
        notes.push(format!(
            "{}: {} requests over {} seconds (per-request file, ab -g layout)",
            path.display(),
            sample.requests,
            sample.seconds
        ));
    }
    let named: Vec<(String, &crate::stats::gnuplot::RequestSample)> = files.iter().map(|(p, s)| (name(p), s)).collect();
    let title = match files {
        [(path, _)] => format!("Every request: {}", name(path)),
        _ => format!("Every request: {} files", files.len()),
    };
    Section {
        kind: "requests",
        title,
        notes,
        charts: vec![super::charts::every_request_overlaid(&named)],
        ..Section::default()
    }
}

/// A run's section on the live dashboard: its progress in words and its charts so far (the
/// time series; the percentile spectra need the whole run and come with the final report).
pub fn live_section(doc: &Doc, title: &str, line: String) -> Section {
    // The time series only: the spectra need the whole run, and the outcome bars its totals
    // (the live document has the seconds so far, not the counts by status).
    let charts = super::charts::single_run(doc)
        .into_iter()
        .filter(|c| c.x_kind != super::charts::XKind::Percentile && c.id != "outcomes");
    Section {
        kind: "live",
        title: title.to_string(),
        band: super::band::live_facts(doc),
        notes: vec!["live: the charts grow every second; the final report replaces this page when the run ends".into()],
        text: format!("{line}\n"),
        charts: charts.collect(),
        ..Section::default()
    }
}

/// What the page's script reads (the report, or a dashboard's snapshot).
#[derive(Serialize)]
struct Data<'a> {
    title: &'a str,
    tool: String,
    sections: &'a [Section],
}

/// The report's data as JSON, as the page (and the dashboard's snapshots) carry it.
pub fn data_json(title: &str, sections: &[Section]) -> String {
    let data = Data { title, tool: format!("bolide {}", env!("CARGO_PKG_VERSION")), sections };
    serde_json::to_string(&data).unwrap_or_else(|_| "{}".into())
}

/// JSON made safe inside a `<script>` element: every `<`, `>` and `&` as a `\u` escape (in JSON
/// they only occur inside strings, where the escape means the same character), so no string can
/// close the element (`</script>`) or open a comment that changes how the HTML parser reads the
/// rest (`<!--<script>` blanked the page); U+2028 and U+2029 likewise.
pub fn script_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page.
pub fn page(title: &str, sections: &[Section]) -> String {
    let json = script_safe(&data_json(title, sections));
    let mut out = head(title, false);
    // The same content without scripts: the summaries as text.
    out.push_str("<noscript>\n");
    for s in sections {
        let text = if s.text.is_empty() { super::blocks::render(&s.blocks, false) } else { s.text.clone() };
        out.push_str(&format!("<h2>{}</h2>\n<pre>{}</pre>\n", escape(&s.title), escape(&text)));
    }
    out.push_str("</noscript>\n");
    out.push_str("<script>\n");
    out.push_str(UPLOT_JS);
    out.push_str("\n</script>\n<script>\nconst REPORT = ");
    out.push_str(&json);
    out.push_str(";\n</script>\n<script>\n");
    out.push_str(DRAW_JS);
    out.push_str("\n</script>\n</body>\n</html>\n");
    out
}

/// The live dashboard's page: the same drawing code, fed by the server it came from (the only
/// place it may connect to) until the run ends.
pub fn live_page(title: &str) -> String {
    let mut out = head(title, true);
    out.push_str("<p id=\"live-status\" class=\"live\">waiting for the first second of the run</p>\n");
    out.push_str("<noscript>The live dashboard needs JavaScript.</noscript>\n<script>\n");
    out.push_str(UPLOT_JS);
    out.push_str("\n</script>\n<script>\n");
    out.push_str(DRAW_JS);
    out.push_str("\n</script>\n<script>\n");
    out.push_str(LIVE_JS);
    out.push_str("\n</script>\n</body>\n</html>\n");
    out
}

/// From the doctype to the empty `<main>`: the Content Security Policy (no request at all, or
/// only to the page's own server for a live page), the styles, the heading.
fn head(title: &str, live: bool) -> String {
    let mut out = String::with_capacity(UPLOT_JS.len() + 65_536);
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    // Nothing may be fetched: no connection, no image, no font, no frame.
    let connect = if live { " connect-src 'self';" } else { "" };
    out.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';{connect} script-src 'unsafe-inline'; \
         style-src 'unsafe-inline'; img-src data:\">\n"
    ));
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{}</title>\n", escape(title)));
    out.push_str("<style>\n");
    out.push_str(UPLOT_CSS);
    out.push('\n');
    out.push_str(STYLE);
    out.push_str("</style>\n</head>\n<body>\n");
    out.push_str(&format!("<header><h1>{}</h1></header>\n<main id=\"report\"></main>\n", escape(title)));
    out
}

/// Text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_the_script_element_and_text_is_escaped() {
        let section = Section {
            title: "<b>run</b>".into(),
            notes: vec!["</script><script>alert(1)</script>".into()],
            text: "a < b & c".into(),
            ..Section::default()
        };
        let html = page("t & <t>", &[section]);
        assert_eq!(html.matches("</script>").count(), 3, "only the three script elements close");
        assert!(html.contains("<title>t &amp; &lt;t&gt;</title>"));
        assert!(html.contains("<pre>a &lt; b &amp; c</pre>"));
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "nothing is linked");
    }

    #[test]
    fn no_string_can_open_a_comment_or_a_tag_inside_the_data() {
        // The second probe: a header value, a title, a label or a step name holding "<!--<script>"
        // blanked the page (the HTML parser's "script data escaped" states).
        let hostile = "<!--<script>x</script>-->&amp;\u{2028}";
        let section = Section { title: hostile.into(), notes: vec![hostile.into()], ..Section::default() };
        let html = page(hostile, &[section]);
        let data = html.split("const REPORT = ").nth(1).unwrap().split(";\n</script>").next().unwrap();
        assert!(!data.contains('<') && !data.contains('>') && !data.contains('&'), "{data}");
        // The same JSON, read back, holds the string unchanged.
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["title"], hostile);
        assert_eq!(v["sections"][0]["notes"][0], hostile);
        assert_eq!(html.matches("<script>").count(), 3);
    }
}

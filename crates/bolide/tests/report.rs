//! Reports: what each chart plots for fixed result documents (snapshots), `bolide report` and
//! `--html` through the command line, and the HTML page in Debian's headless Chromium with every
//! network request refused. Chromium and node come from `.ci/run` (as for the tasks page test).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use bolide::report::charts;
use bolide::stats::doc::Doc;
use common::bolide;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Compares `text` with `tests/snapshots/NAME`; `BOLIDE_UPDATE_SNAPSHOTS=1` rewrites the file.
fn snapshot(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("BOLIDE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with BOLIDE_UPDATE_SNAPSHOTS=1 to create it", path.display()));
    assert_eq!(text, want, "{} differs; BOLIDE_UPDATE_SNAPSHOTS=1 rewrites it", path.display());
}

fn outlines(charts: &[charts::Chart]) -> String {
    charts.iter().map(|c| c.outline()).collect::<Vec<_>>().join("\n")
}

#[test]
fn what_the_charts_of_one_run_plot() {
    for (file, snap) in [("http-run.json", "charts-http-run.txt"), ("ddp-run.json", "charts-ddp-run.txt")] {
        let doc = Doc::load(&fixture(file)).unwrap();
        let charts = charts::single_run(&doc);
        // Every chart has data or says why not.
        for c in &charts {
            assert!(c.points() > 0 || c.empty.is_some(), "{}", c.outline());
        }
        snapshot(snap, &outlines(&charts));
    }
}

#[test]
fn charts_without_data_say_why() {
    let mut doc = Doc::load(&fixture("http-run.json")).unwrap();
    if let Doc::Http(d) = &mut doc {
        d.monitor.clear();
        d.generator = None;
        d.timeline.clear();
    }
    let charts = charts::single_run(&doc);
    let empty: Vec<(&str, &str)> =
        charts.iter().filter_map(|c| c.empty.as_deref().map(|why| (c.id.as_str(), why))).collect();
    assert_eq!(
        empty,
        [
            ("throughput", "the run recorded no whole second"),
            ("latency", "the run recorded no whole second"),
            ("server-cpu", "no process was watched (--monitor NAME=PID or NAME=:PORT, or --spawn)"),
            ("server-ram", "no process was watched (--monitor NAME=PID or NAME=:PORT, or --spawn)"),
            ("generator", "the document has no samples of bolide's own CPU"),
        ]
    );
}

#[test]
fn runs_are_compared_measure_by_measure() {
    let docs: Vec<Doc> = ["ddp-run.json", "ddp-run.json"].iter().map(|f| Doc::load(&fixture(f)).unwrap()).collect();
    let series = vec![
        ("3.1.1".to_string(), vec![docs[0].measures(), docs[1].measures()]),
        ("3.0.0".to_string(), vec![docs[0].measures()]),
    ];
    let mut charts = charts::across_runs(&series);
    charts.extend(charts::overlaid(&[
        ("3.1.1".to_string(), vec![&docs[0], &docs[1]]),
        ("3.0.0".to_string(), vec![&docs[0]]),
    ]));
    snapshot("charts-across-runs.txt", &outlines(&charts));
    // Every run's time series, a line each.
    let alive = charts.iter().find(|c| c.id == "over-time-alive").unwrap();
    let labels: Vec<&str> = alive.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["3.1.1 #1", "3.1.1 #2", "3.0.0 #1"]);
    // Two runs in the first series, one in the second (the missing one is no point).
    let time = charts.iter().find(|c| c.id == "runs-time").unwrap();
    assert_eq!(time.x, [1.0, 2.0]);
    assert_eq!(time.series[1].values[1], None);
    // An HTTP measure on DDP runs is left out, not drawn empty.
    assert!(charts.iter().all(|c| c.id != "runs-rps"));
}

#[test]
fn a_long_run_is_bucketed_to_a_few_thousand_points() {
    let mut doc = Doc::load(&fixture("http-run.json")).unwrap();
    if let Doc::Http(d) = &mut doc {
        let one = d.timeline[0].clone();
        d.timeline = (0..36_000u32).map(|t| bolide::stats::result::Second { t, ..one.clone() }).collect();
        d.timeline[20_000].latency_max_us = 9_999_000;
    }
    let charts = charts::single_run(&doc);
    let lat = charts.iter().find(|c| c.id == "latency").unwrap();
    assert!(lat.x.len() <= charts::MAX_POINTS, "{}", lat.x.len());
    // A peak survives bucketing in the max series.
    let max = lat.series.iter().find(|s| s.label == "max").unwrap();
    assert!(max.values.iter().flatten().any(|v| *v == 9_999.0));
    // An hour of one-second data stays well under 2 MB of HTML.
    let page = bolide::report::html::page("long", &[bolide::report::html::run_section(&doc, "long")]);
    assert!(page.len() < 2 << 20, "{} bytes", page.len());
}

#[test]
fn report_command_writes_html_and_markdown_and_refuses_what_is_not_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let http = fixture("http-run.json");
    let ddp = fixture("ddp-run.json");
    let o = bolide(&["report", http.to_str().unwrap(), ddp.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.starts_with(&format!("report: {} (", html.display())), "{}", o.out);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<title>bolide report: http-run, ddp-run</title>"), "title from the inputs");
    assert!(page.contains("default-src 'none'"), "a policy that refuses every request");
    // Markdown on stdout: the summaries as text.
    let o = bolide(&["report", ddp.to_str().unwrap(), "--format", "md", "--title", "PR 42"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.starts_with("# PR 42\n\n## ddp-run\n\n- started "), "{}", o.out);
    assert!(o.out.contains("```text\n"), "{}", o.out);
    // Not results: a clear reason, exit 2, nothing written.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"format\": \"k6\"}").unwrap();
    let out = dir.path().join("none.html");
    let o = bolide(&["report", junk.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("junk.json: not a bolide result (format \"k6\")"), "{}", o.err);
    assert!(o.err.contains("nothing to report"), "{}", o.err);
    assert!(!out.exists());
    let o = bolide(&["report", "/nonexistent/run.json"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("/nonexistent/run.json: no such file or directory"), "{}", o.err);
    // A document of a newer format version is refused with the reason.
    let text = std::fs::read_to_string(&http).unwrap().replacen("\"version\": 1,", "\"version\": 99,", 1);
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, text).unwrap();
    let o = bolide(&["report", newer.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 2);
    assert!(
        o.err.contains("newer.json: written by a newer bolide (result format version 99; this one reads version 1)"),
        "{}",
        o.err
    );
}

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../refserver/tests/node")
}

/// Opens `page` in headless Chromium (tests/node/report.mjs); what it drew, as JSON.
fn in_chromium(page: &Path, shot: &Path) -> serde_json::Value {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "this test needs Debian's chromium at {chromium} (apt-get install chromium; .ci/run does)"
    );
    if !node_dir().join("node_modules/playwright-core").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(node_dir())
            .status()
            .expect("npm is needed for this test");
        assert!(status.success(), "npm ci in {} failed", node_dir().display());
    }
    let out = Command::new("node")
        .args(["report.mjs", page.to_str().unwrap(), shot.to_str().unwrap()])
        .current_dir(node_dir())
        .output()
        .expect("node is needed for this test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "report.mjs failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_html_report_draws_every_chart_offline_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (http, ddp) = (fixture("http-run.json"), fixture("ddp-run.json"));
    let o = bolide(&["report", http.to_str().unwrap(), ddp.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let shot = std::env::temp_dir().join("bolide-report.png");
    let seen = in_chromium(&html, &shot);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["console"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "the page asked for nothing: {seen}");
    // Every chart the documents have data for is drawn with all its points.
    let mut want = Vec::new();
    let docs = [Doc::load(&http).unwrap(), Doc::load(&ddp).unwrap()];
    let measures =
        vec![("http-run".to_string(), vec![docs[0].measures()]), ("ddp-run".to_string(), vec![docs[1].measures()])];
    let mut every = charts::across_runs(&measures);
    every
        .extend(charts::overlaid(&[("http-run".to_string(), vec![&docs[0]]), ("ddp-run".to_string(), vec![&docs[1]])]));
    every.extend(docs.iter().flat_map(charts::single_run));
    for c in &every {
        want.push(serde_json::json!([c.id, c.points()]));
    }
    assert_eq!(seen["drawn"], serde_json::Value::Array(want), "{seen}");
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "screenshot at {}", shot.display());
}

#[test]
fn html_flag_on_http_run_bench_and_capacity_writes_the_report_at_the_end() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let ok = format!("{}/ok", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();

    let o = bolide(&["http", "-n", "300", "-c", "2", "-t", "1", "--html", &path("http.html"), &ok]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains(&format!("HTML report: {}", path("http.html"))), "{}", o.out);
    let page = read("http.html");
    assert!(page.contains("\"id\":\"latency-spectrum\"") && page.contains("Responses and errors per second"));
    // With --json -, stdout carries the document only; the report's path goes to stderr.
    let o = bolide(&["http", "-n", "50", "-c", "1", "-t", "1", "--json", "-", "--html", &path("h2.html"), &ok]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(serde_json::from_str::<serde_json::Value>(&o.out).is_ok(), "{}", o.out);
    assert!(o.err.contains("HTML report: "), "{}", o.err);

    let target = server.base_url();
    let html = path("run.html");
    let run = ["run", "tasks-reactive", "--target", &target, "--arrival-rate", "100", "-d", "20ms", "--tasks", "2"];
    let o = bolide(&[&run[..], &["--think", "10ms", "-t", "1", "--html", &html]].concat());
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(read("run.html").contains("\"id\":\"step-spectrum\""));

    // bench: one report of every run, not one per run.
    let out = path("series");
    let o = bolide(&[
        "bench",
        "http",
        "-n",
        "100",
        "-c",
        "1",
        "-t",
        "1",
        "--runs",
        "2",
        "--out",
        &out,
        "--html",
        &path("bench.html"),
        &ok,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let page = read("bench.html");
    assert!(page.contains("\"title\":\"Every run\"") && page.contains("http-2.json"), "both runs");
    assert_eq!(o.out.matches("HTML report: ").count(), 1, "{}", o.out);

    let url = format!("{}/delay/100", server.base_url());
    let o = bolide(&[
        "capacity",
        "http",
        "--from",
        "5",
        "--step",
        "5",
        "--to",
        "10",
        "-d",
        "1s",
        "-c",
        "2",
        "-t",
        "1",
        "--cooldown",
        "0",
        "--html",
        &path("cap.html"),
        &url,
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let page = read("cap.html");
    assert!(page.contains("\"title\":\"Capacity ladder\"") && page.contains("capacity: level 10 per second"));
    assert!(page.contains("\"id\":\"ladder-p99\""), "the ladder's charts");
    // A path that cannot be written is refused before anything runs.
    let o = bolide(&["http", "-n", "10", "--html", "/nonexistent/dir/r.html", &ok]);
    assert_eq!(o.code, 2, "{}", o.err);
}

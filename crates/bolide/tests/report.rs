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
    // ddp-run.json predates the latency per second (its charts say so); ddp-run-per-second.json
    // has it.
    for (file, snap) in [
        ("http-run.json", "charts-http-run.txt"),
        ("ddp-run.json", "charts-ddp-run.txt"),
        ("ddp-run-per-second.json", "charts-ddp-run-per-second.txt"),
    ] {
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
fn what_a_capacity_ladder_plots() {
    // Three levels of the fixture run, the server working harder at each, the third failing.
    let base = Doc::load(&fixture("http-run.json")).unwrap().measures();
    let level = |passed: bool| if passed { charts::Level::Passed } else { charts::Level::Failed };
    let levels: Vec<_> = [(100.0, 1.0_f64, true), (200.0, 1.8, true), (300.0, 2.5, false)]
        .into_iter()
        .map(|(at, k, passed)| {
            let mut m = base.clone();
            m.requests_per_s = m.requests_per_s.map(|r| r * k.min(2.0));
            m.cpu_pct = m.cpu_pct.map(|c| c * k);
            m.p99_ms = m.p99_ms.map(|p| p * k * k);
            m.error_rate_pct = if passed { 0.0 } else { 4.0 };
            (at, m, level(passed))
        })
        .collect();
    let charts = charts::ladder(&levels, "level (requests per second)");
    // The failing level is its own series in each chart: one point, at 300.
    for c in &charts {
        let failed = c.series.iter().find(|s| s.label == "failed").unwrap();
        let at: Vec<f64> = c.x.iter().zip(&failed.values).filter(|(_, v)| v.is_some()).map(|(x, _)| *x).collect();
        assert_eq!(at, [300.0], "{}", c.outline());
    }
    snapshot("charts-ladder.txt", &outlines(&charts));
    // A level with no verdict (the machine was the limit) is its own series, not "failed".
    let mut unjudged = levels.clone();
    unjudged[2].2 = charts::Level::NoVerdict;
    for c in charts::ladder(&unjudged, "level") {
        let points =
            |label: &str| c.series.iter().find(|s| s.label == label).map(|s| s.values.iter().flatten().count());
        assert_eq!((points("failed"), points("no verdict")), (Some(0), Some(1)), "{}", c.outline());
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
    // -o into a directory that does not exist yet: made, as bench --out makes its own.
    let nested = dir.path().join("new/dir/r.md");
    let o = bolide(&["report", ddp.to_str().unwrap(), "--format", "md", "-o", nested.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(std::fs::read_to_string(&nested).unwrap().starts_with("# bolide report: ddp-run"));
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
        o.err.contains(
            "newer.json: written by a newer bolide (result format version 99; this one reads versions 1 to 4)"
        ),
        "{}",
        o.err
    );
    // One older than any this bolide reads, too.
    let text = std::fs::read_to_string(&http).unwrap().replacen("\"version\": 1,", "\"version\": 0,", 1);
    let older = dir.path().join("older.json");
    std::fs::write(&older, text).unwrap();
    let o = bolide(&["report", older.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("older.json: result format version 0 is older than any this bolide reads"), "{}", o.err);
}

#[test]
fn markdown_reports_pass_no_raw_html_and_no_string_leaves_its_code_fence() {
    // The second probe: a title or a label holding HTML, or a line of three backticks, changed
    // the Markdown page (report --format md, and the PR comment path of compare).
    let dir = tempfile::tempdir().unwrap();
    let hostile = "x<img src=y onerror=alert(1)>\n```\n# not a heading [link](javascript:z)";
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("ddp-run.json")).unwrap()).unwrap();
    v["label"] = serde_json::json!(hostile);
    let doc = dir.path().join("hostile.json");
    std::fs::write(&doc, v.to_string()).unwrap();
    let o = bolide(&["report", doc.to_str().unwrap(), "--format", "md", "--title", hostile]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(!o.out.contains("<img") && o.out.contains("&lt;img src=y onerror=alert(1)&gt;"), "{}", o.out);
    assert!(!o.out.contains("[link](javascript:") && o.out.contains("\\[link\\](javascript:"), "{}", o.out);
    assert!(!o.out.lines().any(|l| l.starts_with("# not a heading")), "{}", o.out);
    // Every fence that opens closes with the same run of backticks, and nothing else inside it
    // is a run as long.
    let mut open: Option<&str> = None;
    for line in o.out.lines() {
        let ticks = &line[..line.len() - line.trim_start_matches('`').len()];
        match open {
            None if ticks.len() >= 3 => open = Some(ticks),
            Some(f) if line == f => open = None,
            Some(f) => assert!(!line.starts_with(f), "a line inside the fence closes it: {line}"),
            None => {}
        }
    }
    assert!(open.is_none(), "{}", o.out);
    // compare --format md: the label as text.
    let o = bolide(&["compare", doc.to_str().unwrap(), fixture("ddp-run.json").to_str().unwrap(), "--format", "md"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(!o.out.contains("<img") && o.out.contains("&lt;img"), "{}", o.out);
}

/// A run of an older bolide, whose errors left out its 500s: read as this bolide counts, its
/// failed statuses are failures in the band, the error rate and its thresholds judged again.
#[test]
fn an_old_document_s_failed_statuses_are_failures_when_read() {
    let mut raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("http-run.json")).unwrap()).unwrap();
    raw["summary"]["status"] = serde_json::json!({"200": 176_424, "500": 100});
    raw["summary"]["non_2xx_3xx"] = serde_json::json!(100);
    let doc = Doc::from_json(&raw.to_string()).unwrap();
    let Doc::Http(d) = &doc else { panic!("an HTTP document") };
    assert_eq!((d.summary.errors, d.summary.errors_by_class["status"]), (100, 100));
    assert_eq!(d.settings.expect_status.as_deref(), Some("200-399"));
    assert_eq!(doc.failures(), vec![("status 500".to_string(), 100)]);
    let rate = doc.error_rate_pct().unwrap();
    assert!((rate - 100.0 * 100.0 / 176_524.0).abs() < 1e-9, "{rate}");
    let band = bolide::report::band::run_facts(&doc);
    let errors = band.iter().find(|f| f.label == "Errors").unwrap();
    assert_eq!(errors.detail, "status 500: 100");
}

/// A report of one run opens with its band once: the run's own section does not repeat it.
#[test]
fn a_single_run_s_report_shows_its_band_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("one.html");
    let o = bolide(&["report", fixture("http-run.json").to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let data = report_data(&std::fs::read_to_string(&out).unwrap());
    let bands: Vec<&str> = data["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["band"].as_array().is_some_and(|b| !b.is_empty()))
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(bands, ["summary"]);
}

/// Several runs: the first screen's table has the Meteor reports' headline figure, Time.
#[test]
fn the_first_screen_s_table_has_the_time_of_each_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("two.html");
    let (a, b) = (fixture("http-run.json"), fixture("ddp-run.json"));
    let o = bolide(&["report", a.to_str().unwrap(), b.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let data = report_data(&std::fs::read_to_string(&out).unwrap());
    let summary = &data["sections"][0];
    let table = summary["blocks"].as_array().unwrap().iter().find_map(|b| b["table"].as_object()).expect("a table");
    let heads: Vec<&str> = table["header"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    assert_eq!(heads[..4], ["Run", "Workload", "Time", "Throughput"], "{heads:?}");
}

/// A run read with bolide-probe: the band shows the server's event-loop p99 and GC time beside its
/// CPU and RAM.
#[test]
fn the_band_shows_the_server_s_event_loop_and_gc() {
    use bolide::monitor::scrape::{Kind, ScrapeResult, Series};
    let mut doc = Doc::load(&fixture("http-run.json")).unwrap();
    let Doc::Http(d) = &mut doc else { panic!("an HTTP document") };
    let series = |metric: &str, kind: Kind, mean: Option<f64>, increase: Option<f64>| Series {
        metric: metric.into(),
        kind: Some(kind),
        values: vec![Some(0.0), Some(1.0)],
        mean,
        increase,
        ..Default::default()
    };
    d.scrape = vec![ScrapeResult {
        name: "app".into(),
        t: vec![0.0, 1.0],
        series: vec![
            series("probe_eventloop_delay_p99_seconds", Kind::Gauge, Some(0.0123), None),
            series("probe_gc_pause_seconds_sum", Kind::Counter, None, Some(0.25)),
        ],
        ..Default::default()
    }];
    let band = bolide::report::band::run_facts(&doc);
    let el = band.iter().find(|f| f.label == "Event loop p99").unwrap_or_else(|| panic!("{band:?}"));
    assert_eq!((el.value.as_str(), el.detail.as_str()), ("12.3 ms", "GC 250 ms over the run"));
}

/// A run too short for one sample of the machine: its trust is "unchecked", never "clean" with a
/// made-up "0% idle".
#[test]
fn a_run_without_a_sample_of_the_machine_is_unchecked() {
    let mut doc = Doc::load(&fixture("http-run.json")).unwrap();
    let Doc::Http(d) = &mut doc else { panic!("an HTTP document") };
    let g = d.generator.get_or_insert_with(Default::default);
    g.samples.clear();
    g.suspect = None;
    let trust = bolide::report::band::trust_fact(&doc);
    assert_eq!(trust.value, "unchecked", "{trust:?}");
    assert!(trust.detail.contains("before bolide's first sample"), "{trust:?}");
}

#[test]
fn documents_of_the_previous_format_version_are_still_read() {
    // The fixtures are of version 1 (no per-second p90): the latency chart goes without it, and a
    // document of today's run (version 3) has it.
    let v1 = Doc::load(&fixture("http-run.json")).unwrap();
    let lat = charts::single_run(&v1).into_iter().find(|c| c.id == "latency").unwrap();
    assert_eq!(lat.series.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["p50", "p99", "max", "mean"]);
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("v2.json");
    let url = format!("{}/ok", server.base_url());
    let o = bolide(&["http", "-d", "2s", "-c", "2", "-t", "1", "--json", json.to_str().unwrap(), &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    let v2 = Doc::load(&json).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(text.contains("\"version\": 4,") && text.contains("\"latency_p90_us\""), "{text:.400}");
    let lat = charts::single_run(&v2).into_iter().find(|c| c.id == "latency").unwrap();
    assert_eq!(lat.series.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["p50", "p90", "p99", "max", "mean"]);
    // Both in one report.
    let out = dir.path().join("both.html");
    let o = bolide(&[
        "report",
        fixture("http-run.json").to_str().unwrap(),
        json.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
}

/// Opens `page` in headless Chromium (tests/node/report.mjs); what it drew, as JSON.
fn in_chromium(page: &Path, shot: &Path) -> serde_json::Value {
    common::in_chromium_setup();
    let out = Command::new("node")
        .args(["report.mjs", page.to_str().unwrap(), shot.to_str().unwrap()])
        .current_dir(common::node_dir())
        .output()
        .expect("node is needed for this test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "report.mjs failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// A per-request file as ab -g writes it (ab prints local time; the tabs and numbers are what
/// count): `seconds` seconds of `per_second` requests, times 1..=9 ms, and one request of 750 ms
/// in the last second.
fn requests_file(dir: &Path, name: &str, seconds: u64, per_second: u64) -> PathBuf {
    let mut text = String::from("starttime\tseconds\tctime\tdtime\tttime\twait\n");
    for s in 0..seconds {
        for i in 0..per_second {
            let ttime = if s + 1 == seconds && i == per_second / 2 { 750 } else { i % 9 + 1 };
            text.push_str(&format!(
                "Mon Nov 23 10:00:0{s} 2026\t{}\t0\t{ttime}\t{ttime}\t{ttime}\n",
                1_795_428_000 + s
            ));
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_request_from_gnuplot_data_in_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    // http --gnuplot --html: the report shows every request of the run.
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let ok = format!("{}/ok", server.base_url());
    let o = bolide(&[
        "http",
        "-n",
        "300",
        "-c",
        "2",
        "-t",
        "1",
        "--gnuplot",
        &path("r.tsv"),
        "--html",
        &path("r.html"),
        &ok,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let page = std::fs::read_to_string(path("r.html")).unwrap();
    assert!(
        page.contains("\"id\":\"every-request\",\"title\":\"Every request's response time (300 requests)\""),
        "{page}"
    );

    // A bench series with --gnuplot: each run's NAME.tsv beside NAME.json is found by report.
    let o = bolide(&[
        "bench",
        "http",
        "-n",
        "120",
        "-c",
        "1",
        "-t",
        "1",
        "--runs",
        "2",
        "--gnuplot",
        "each-run.tsv",
        "--out",
        &path("s"),
        &ok,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let o = bolide(&["report", &path("s"), "-o", &path("s.html")]);
    assert_eq!(o.code, 0, "{}", o.err);
    let page = std::fs::read_to_string(path("s.html")).unwrap();
    assert_eq!(page.matches("Every request's response time (120 requests)").count(), 2, "one per run");

    // Thinned when there are many: each second keeps a sample and its slowest request.
    let big = requests_file(dir.path(), "big.tsv", 4, 9_000);
    let c = charts::every_request_in(&big);
    assert_eq!(c.points(), charts::REQUEST_POINTS - charts::REQUEST_POINTS % 4, "{}", c.outline());
    assert!(c.title.contains("of 36000 drawn"), "{}", c.title);
    assert_eq!(c.series[0].values.iter().flatten().copied().fold(0.0, f64::max), 750.0, "the outlier is kept");
    // In Markdown written to a file, it is an SVG image like the other main charts.
    let o = bolide(&["report", big.to_str().unwrap(), "--format", "md", "-o", &path("pr.md")]);
    assert_eq!(o.code, 0, "{}", o.err);
    let md = std::fs::read_to_string(path("pr.md")).unwrap();
    assert!(md.contains("## Every request: big.tsv") && md.contains("](pr-charts/01-every-request.svg)"), "{md}");
    let svg = std::fs::read_to_string(dir.path().join("pr-charts/01-every-request.svg")).unwrap();
    roxmltree::Document::parse(&svg).unwrap();

    // A damaged per-request file given to report is refused with its line.
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "starttime\tseconds\tctime\tdtime\tttime\twait\nx\t1\t0\t1\t1\t0\nx\t2\t0\n").unwrap();
    let o = bolide(&["report", bad.to_str().unwrap(), "-o", &path("bad.html")]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("bad.tsv:3: expected six tab-separated columns"), "{}", o.err);
    assert!(!dir.path().join("bad.html").exists());
}

#[test]
fn the_html_report_draws_every_chart_offline_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let (http, ddp) = (fixture("http-run.json"), fixture("ddp-run.json"));
    // Two more inputs (the HTTP run again, under other names) make a history of its workload;
    // the DDP run, another workload, is no part of it.
    let again = dir.path().join("http-again.json");
    std::fs::copy(&http, &again).unwrap();
    let third = dir.path().join("http-third.json");
    std::fs::copy(&http, &third).unwrap();
    // And a per-request file in ab's -g layout, drawn on its own.
    let tsv = requests_file(dir.path(), "ab.tsv", 3, 200);
    let inputs = [
        http.to_str().unwrap(),
        ddp.to_str().unwrap(),
        again.to_str().unwrap(),
        third.to_str().unwrap(),
        tsv.to_str().unwrap(),
    ];
    let o = bolide(&["report", inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], "-o", html.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let shot = std::env::temp_dir().join("bolide-report.png");
    let seen = in_chromium(&html, &shot);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["console"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "the page asked for nothing: {seen}");
    // Every chart the documents have data for is drawn with all its points.
    let mut want = Vec::new();
    let docs =
        [Doc::load(&http).unwrap(), Doc::load(&ddp).unwrap(), Doc::load(&again).unwrap(), Doc::load(&third).unwrap()];
    let names = ["http-run", "ddp-run", "http-again", "http-third"].map(String::from);
    let measures: Vec<_> = names.iter().zip(&docs).map(|(n, d)| (n.clone(), vec![d.measures()])).collect();
    let ddp_docs: Vec<_> = names
        .iter()
        .zip(&docs)
        .map(|(n, d)| (n.clone(), if let Doc::Ddp(v) = d { vec![v.as_ref()] } else { vec![] }))
        .collect();
    // The HTTP runs compared with http-run (the DDP run has no counterpart: not compared), then
    // the history of the HTTP workload's three labels.
    let mut every = charts::steps_side_by_side(&ddp_docs);
    let http_only: Vec<_> = measures.iter().filter(|(n, _)| n.starts_with("http")).cloned().collect();
    every.extend(charts::history(&http_only));
    // One run a series: no chart of values per run (the summary's table has them).
    let by_name: Vec<_> = names.iter().zip(&docs).map(|(n, d)| (n.clone(), vec![d])).collect();
    every.extend(charts::overlaid(&by_name));
    every.extend(docs.iter().flat_map(charts::single_run));
    every.push(charts::every_request_in(&tsv));
    assert_eq!(every.last().map(charts::Chart::points), Some(600), "every request drawn");
    // Charts with nothing to draw are left out (named in one line), never an empty box.
    for c in every.iter().filter(|c| c.empty.is_none()) {
        want.push(serde_json::json!([c.id, c.points()]));
    }
    assert_eq!(seen["drawn"], serde_json::Value::Array(want), "{seen}");
    // Each chart drawn with both axes' ticks, and paint on its canvas.
    for a in seen["axes"].as_array().unwrap() {
        assert!(a[1].as_u64().unwrap() >= 1 && a[2].as_u64().unwrap() >= 2, "{a}");
    }
    for p in seen["painted"].as_array().unwrap() {
        assert!(p[1].as_u64().unwrap() > 1_000, "{p}");
    }
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
    // On a busy machine level 5 may get no verdict (the machine had no idle CPU) or fail (a send
    // that went out late), and the ladder stops there (exit 4 without a verdict). Either way, the
    // page holds every level that ran.
    assert!([0, 1, 4].contains(&o.code), "{}\n{}", o.out, o.err);
    let page = read("cap.html");
    assert!(page.contains("\"title\":\"Capacity ladder\""), "{page}");
    let ran: Vec<&str> = ["5", "10"].into_iter().filter(|l| o.out.contains(&format!("  {l} per second: "))).collect();
    assert!(!ran.is_empty(), "{}", o.out);
    let data = report_data(&page);
    let ladder = data["sections"].as_array().unwrap().iter().find(|s| s["kind"] == "capacity").expect("ladder first");
    let rows: Vec<&str> =
        ladder["blocks"][0]["table"]["rows"].as_array().unwrap().iter().map(|r| r[0].as_str().unwrap()).collect();
    for level in ran {
        // Its row of the ladder's table.
        assert!(rows.contains(&level), "level {level}: {rows:?}");
    }
    // The knee first: what held, where it stopped, the limit, trust.
    let band: Vec<&str> = ladder["band"].as_array().unwrap().iter().map(|f| f["label"].as_str().unwrap()).collect();
    assert_eq!(band[..3], ["Held up to", if o.code == 1 { "Broke at" } else { band[1] }, "Limit"], "{band:?}");
    assert!(page.contains("\"id\":\"ladder-p99\""), "the ladder's charts");
    // A path that cannot be written is refused before anything runs.
    let o = bolide(&["http", "-n", "10", "--html", "/nonexistent/dir/r.html", &ok]);
    assert_eq!(o.code, 2, "{}", o.err);
}

/// The data a report page carries (`const REPORT = {...};`), parsed.
fn report_data(page: &str) -> serde_json::Value {
    let data =
        page.split("const REPORT = ").nth(1).and_then(|r| r.split(";\n</script>").next()).expect("the page's data");
    serde_json::from_str(data).unwrap()
}

#[test]
fn a_series_dashboard_shows_the_runs_so_far_under_the_current_one() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let raw = std::thread::spawn(move || common::follow_events(port));
    let run = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["bench", "http", "-d", "2s", "-c", "1", "-t", "1", "--runs", "2", "--cooldown", "0", "--label", "base"])
        .arg("--out")
        .arg(dir.path().join("s"))
        .arg(format!("--dashboard=127.0.0.1:{port}"))
        .arg(format!("{}/ok", server.base_url()))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let (snapshots, done, _, last) = raw.join().unwrap();
    assert!(snapshots >= 3 && done, "{snapshots} snapshots, done: {done}");
    // The last snapshot came during run 2: run 1 is shown under it with its values.
    let last: serde_json::Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last:.300}"));
    let titles: Vec<&str> = last["sections"].as_array().unwrap().iter().map(|s| s["title"].as_str().unwrap()).collect();
    assert_eq!(titles.last(), Some(&"base: runs so far"), "{titles:?}");
    let earlier = last["sections"].as_array().unwrap().last().unwrap();
    assert_eq!(earlier["notes"][0], "1 of 2 runs finished");
    let rps = earlier["charts"].as_array().unwrap().iter().find(|c| c["id"] == "runs-rps").unwrap();
    assert_eq!(rps["series"][0]["values"].as_array().unwrap().len(), 1, "{rps}");
}

#[test]
fn the_live_dashboard_updates_every_second_then_shows_the_final_report() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    // Chromium opens the page as soon as bolide listens, and follows it to the final report.
    common::in_chromium_setup();
    let shot = std::env::temp_dir().join(format!("bolide-dashboard-{port}.png"));
    let mut browser = Command::new("node")
        .args(["dashboard.mjs", &url, shot.to_str().unwrap()])
        .current_dir(common::node_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node is needed for this test");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(browser.stderr.take().unwrap()));
    let launched = lines.by_ref().map_while(Result::ok).any(|l| l == "launched");
    assert!(launched, "Chromium did not start");
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    let raw = std::thread::spawn(move || common::follow_events(port));
    let run = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-d", "5s", "-c", "2", "-t", "1", &format!("--dashboard=127.0.0.1:{port}")])
        .arg(format!("{}/ok", server.base_url()))
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains(&format!("Live dashboard: {url}")), "{err}");
    // Its cost is in bolide's own CPU figures.
    assert!(out.contains("the live dashboard's threads: "), "{out}");

    let (snapshots, done, report, _) = raw.join().unwrap();
    assert!(snapshots >= 3 && done, "{snapshots} snapshots, done: {done}");
    assert!(report.starts_with("HTTP/1.1 200 OK") && report.contains("<title>bolide http "), "{report:.300}");
    let seen = browser.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&seen.stdout);
    assert!(seen.status.success(), "dashboard.mjs: {stdout}\n{}", rest.join().unwrap());
    let seen: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(seen["updates"].as_u64().unwrap() >= 3, "{seen}");
    // Mid-run, the page shows the last second's figures first, and its charts with their axes.
    let mid = &seen["midRun"];
    let labels: Vec<&str> = mid["band"].as_array().unwrap().iter().map(|f| f[0].as_str().unwrap()).collect();
    assert_eq!(labels[..4], ["Requests/s", "p50", "p99", "Errors so far"], "{seen}");
    let rate: f64 = mid["band"][0][1].as_str().unwrap().parse().unwrap();
    assert!(rate > 0.0, "{seen}");
    let live: Vec<&str> = mid["drawn"].as_array().unwrap().iter().map(|d| d[0].as_str().unwrap()).collect();
    assert!(live.contains(&"throughput") && live.contains(&"latency"), "{seen}");
    for a in mid["axes"].as_array().unwrap() {
        assert!(a[1].as_u64().unwrap() >= 1 && a[2].as_u64().unwrap() >= 2, "{a}");
    }
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "screenshot {}", shot.display());
    let _ = std::fs::remove_file(&shot);
    assert_eq!(seen["final"], serde_json::json!(format!("{url}report")), "{seen}");
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["console"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "nothing from elsewhere: {seen}");
    // The final report is the run's: its spectrum is there (the live page has only time series).
    let drawn = seen["drawn"].as_array().unwrap();
    let spectrum = drawn.iter().find(|d| d[0] == "latency-spectrum").expect("the final report's spectrum");
    assert!(spectrum[1].as_u64().unwrap() > 10, "{seen}");
}

#[test]
fn slow_clients_cannot_lock_the_dashboard_and_a_page_that_never_reads_is_not_waited_for() {
    // The second probe: 40 clients sending their request head a byte at a time took every slot
    // (5 s per read, 32 slots), and a client that held /events without reading delayed the end.
    use std::io::Write;
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let run = std::thread::spawn(move || {
        Command::new(env!("CARGO_BIN_EXE_bolide"))
            .args(["http", "-d", "4s", "-c", "1", "-t", "1", &format!("--dashboard=127.0.0.1:{port}")])
            .arg(format!("{}/ok", server.base_url()))
            .output()
            .unwrap()
    });
    let connect = || {
        for _ in 0..200 {
            if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("the dashboard listens");
    };
    // A page that opens the event stream as a browser does and never reads it.
    let mut deaf = connect();
    deaf.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    // 40 clients that start a head and send a byte now and then.
    let mut slow: Vec<std::net::TcpStream> = (0..40).map(|_| connect()).collect();
    for s in &mut slow {
        let _ = s.write_all(b"G");
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    for s in &mut slow {
        let _ = s.write_all(b"E");
    }
    // A new client still gets the page.
    let page = common::get(port, "/");
    assert!(page.starts_with("HTTP/1.1 200 OK") && page.contains("live-status"), "{page:.200}");
    let out = run.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    drop((deaf, slow));
}

#[test]
fn the_dashboard_refuses_what_it_cannot_use() {
    let o = bolide(&["http", "-d", "1s", "--dashboard=localhost", "http://127.0.0.1:9/"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--dashboard=localhost: not an address to listen on"), "{}", o.err);
    // A port already taken (and named) is refused before anything runs.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let o = bolide(&["http", "-n", "10", &format!("--dashboard={port}"), &format!("{}/ok", server.base_url())]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains(&format!("cannot listen on 127.0.0.1:{port}")), "{}", o.err);
    assert!(!o.out.contains("Requests"), "nothing ran: {}", o.out);
}

#[test]
fn what_a_history_and_per_step_latency_side_by_side_plot() {
    let http = Doc::load(&fixture("http-run.json")).unwrap();
    let base = http.measures();
    // Three releases, with two, one and three runs.
    let run = |rps: f64, p99: f64| {
        let mut m = base.clone();
        m.requests_per_s = Some(rps);
        m.p99_ms = Some(p99);
        m
    };
    let history = charts::history(&[
        ("3.0".into(), vec![run(1000.0, 9.0), run(1100.0, 8.0)]),
        ("3.1".into(), vec![run(1500.0, 6.0)]),
        ("3.2".into(), vec![run(1400.0, 7.0), run(1600.0, 5.0), run(1550.0, 6.5)]),
    ]);
    let rps = history.iter().find(|c| c.id == "history-rps").unwrap();
    assert_eq!(rps.x_names, ["3.0", "3.1", "3.2"]);
    assert_eq!(rps.series[0].values, [Some(1050.0), Some(1500.0), Some(1550.0)], "medians");
    assert_eq!(rps.series[1].values, [Some(1000.0), None, Some(1400.0)], "lowest, where there are several");
    snapshot("charts-history.txt", &outlines(&history));

    let Doc::Ddp(ddp) = Doc::load(&fixture("ddp-run.json")).unwrap() else { panic!("a DDP fixture") };
    let steps = charts::steps_side_by_side(&[("before".into(), vec![&ddp]), ("after".into(), vec![&ddp, &ddp])]);
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].x_names, ddp.steps.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    assert_eq!(steps[1].series[0].values, steps[1].series[1].values, "the same runs, the same medians");
    snapshot("charts-steps.txt", &outlines(&steps));
}

#[test]
fn charts_as_svg_files_and_in_a_markdown_report() {
    let dir = tempfile::tempdir().unwrap();
    let (http, ddp) = (fixture("http-run.json"), fixture("ddp-run.json"));
    // Every chart into a directory, each a well-formed SVG document.
    let out = dir.path().join("charts");
    let o = bolide(&["report", ddp.to_str().unwrap(), "--format", "svg", "-o", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let doc = Doc::load(&ddp).unwrap();
    let want = charts::single_run(&doc).len();
    assert!(o.out.contains(&format!("report: {want} charts as SVG in ")), "{}", o.out);
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names.len(), want);
    assert_eq!(names[0], "01-users.svg");
    for n in &names {
        let text = std::fs::read_to_string(out.join(n)).unwrap();
        let tree = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(tree.root_element().tag_name().name(), "svg");
    }
    // One chart, named by its id.
    let one = dir.path().join("latency.svg");
    let o = bolide(&[
        "report",
        http.to_str().unwrap(),
        "--format",
        "svg",
        "--chart",
        "latency-spectrum",
        "-o",
        one.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let svg = std::fs::read_to_string(&one).unwrap();
    assert!(svg.contains("<title>Latency by percentile</title>") && svg.contains("99.9%"), "{svg:.400}");
    snapshot("svg-latency-spectrum.svg", &svg);
    let o = bolide(&["report", http.to_str().unwrap(), "--format", "svg", "--chart", "nope", "-o", "-"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--chart nope: no such chart in this report; it has: throughput, latency,"), "{}", o.err);
    let o = bolide(&["report", http.to_str().unwrap(), "--chart", "latency"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--chart goes with --format svg"), "{}", o.err);

    // Markdown to a file: its charts beside it, linked; to stdout: no images.
    let md = dir.path().join("pr.md");
    let o = bolide(&[
        "report",
        http.to_str().unwrap(),
        ddp.to_str().unwrap(),
        "--format",
        "md",
        "-o",
        md.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let text = std::fs::read_to_string(&md).unwrap();
    let links: Vec<&str> = text.lines().filter(|l| l.starts_with("![")).collect();
    assert!(links.iter().any(|l| l.ends_with("(pr-charts/01-throughput.svg)")), "{text}");
    assert!(links.iter().any(|l| l.contains("-latency-spectrum.svg)")), "{text}");
    for l in &links {
        let file = l.rsplit_once('(').unwrap().1.trim_end_matches(')');
        assert!(dir.path().join(file).exists(), "{file}");
    }
    let o = bolide(&["report", http.to_str().unwrap(), "--format", "md"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("```text") && !o.out.contains("!["), "{}", o.out);
}

/// What a person sees of a page, checked: nothing failed or was fetched, the first screen holds
/// the band with `labels` (in order, from its start), every table has cells and scrolls rather
/// than clips, every chart drawn has ticks on both axes and paint on its canvas. Returns what
/// Chromium saw.
fn looks_right(page: &Path, labels: &[&str]) -> serde_json::Value {
    let shot = page.with_extension("png");
    let seen = in_chromium(page, &shot);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["console"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["requests"], serde_json::json!([]), "{seen}");
    let band: Vec<&str> =
        seen["firstScreen"]["band"].as_array().unwrap().iter().map(|f| f[0].as_str().unwrap()).collect();
    assert!(band.len() >= labels.len() && band[..labels.len()] == *labels, "first screen: {band:?}; {seen}");
    for f in seen["firstScreen"]["band"].as_array().unwrap() {
        assert!(!f[1].as_str().unwrap().is_empty(), "a figure with no value: {f}");
    }
    let tables = seen["tables"].as_array().unwrap();
    assert!(!tables.is_empty(), "{seen}");
    for t in tables {
        assert_eq!(t["clipped"], false, "{t}");
        let width = t["header"].as_array().unwrap().len();
        assert!(t["rows"].as_array().unwrap().iter().all(|r| r.as_array().unwrap().len() == width), "{t}");
    }
    let drawn = seen["drawn"].as_array().unwrap();
    assert!(!drawn.is_empty(), "{seen}");
    assert_eq!(seen["axes"].as_array().unwrap().len(), drawn.len(), "{seen}");
    for a in seen["axes"].as_array().unwrap() {
        assert!(a[1].as_u64().unwrap() >= 1 && a[2].as_u64().unwrap() >= 2, "axes of {a}");
    }
    for p in seen["painted"].as_array().unwrap() {
        assert!(p[1].as_u64().unwrap() > 1_000, "nothing painted on {p}");
    }
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 10_000).unwrap_or(false), "screenshot {}", shot.display());
    seen
}

/// The rows of the first table whose header starts with `first`.
fn table_rows<'a>(seen: &'a serde_json::Value, first: &str) -> Vec<Vec<&'a str>> {
    let t = seen["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["header"][0] == first)
        .unwrap_or_else(|| panic!("no {first} table: {seen}"));
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect())
        .collect()
}

#[test]
fn the_key_pages_answer_on_their_first_screen_in_chromium() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let ok = format!("{}/ok", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();

    // One run: its figures first, in the order people quote them.
    let o = bolide(&["http", "-n", "2000", "-c", "2", "-t", "1", "--html", &path("run.html"), &ok]);
    assert_eq!(o.code, 0, "{}", o.err);
    let seen = looks_right(&dir.path().join("run.html"), &["Requests/s", "Latency p50", "Latency p99", "Errors"]);
    let outcomes = table_rows(&seen, "Outcome");
    assert_eq!(outcomes, [vec!["status 200", "2,000"]], "{seen}");

    // Two series of one workload: the comparison's verdict per metric, in words and a colour.
    for label in ["before", "after"] {
        let o = bolide(&[
            "bench",
            "http",
            "-n",
            "1500",
            "-c",
            "2",
            "-t",
            "1",
            "--runs",
            "2",
            "--cooldown",
            "0",
            "--label",
            label,
            "--out",
            &path(label),
            &ok,
        ]);
        assert_eq!(o.code, 0, "{}", o.err);
    }
    let o = bolide(&["report", &path("before"), &path("after"), "-o", &path("compare.html")]);
    assert_eq!(o.code, 0, "{}", o.err);
    let seen = looks_right(&dir.path().join("compare.html"), &["Requests per second"]);
    let band = seen["firstScreen"]["band"].as_array().unwrap();
    let rps = &band[0];
    assert!(rps[1].as_str().unwrap().contains("requests/s"), "{rps}");
    assert!(["good", "bad", "plain", "warn"].contains(&rps[2].as_str().unwrap()), "{rps}");
    assert_eq!(band.last().unwrap()[0], "Trust", "{seen}");
    let verdicts = seen["firstScreen"]["verdicts"].as_array().unwrap();
    assert!(verdicts.iter().any(|v| v.as_str().unwrap().starts_with("after against before")), "{seen}");
    // The metric table: every cell there, the change and significance columns whole.
    let metrics = table_rows(&seen, "Metric");
    assert_eq!(
        metrics.iter().map(|r| r[0]).collect::<Vec<_>>()[..2],
        ["Requests per second", "p99 latency"],
        "{metrics:?}"
    );
    assert!(metrics.iter().all(|r| !r[4].is_empty()), "{metrics:?}");
    let toc = seen["toc"].as_array().unwrap();
    assert_eq!(toc[1], "after compared with before", "{seen}");

    // A capacity ladder: the knee first.
    let o = bolide(&[
        "capacity",
        "http",
        "--from",
        "200",
        "--step",
        "200",
        "--to",
        "400",
        "-d",
        "1s",
        "-c",
        "2",
        "-t",
        "1",
        "--cooldown",
        "0",
        "--allow-busy-machine",
        "--html",
        &path("capacity.html"),
        &ok,
    ]);
    // Passed, failed, or no verdict (exit 4) where bolide itself fell behind its schedule on a
    // busy machine: the page is what is looked at here, and it opens on the ladder either way.
    assert!([0, 1, 4].contains(&o.code), "{}\n{}", o.out, o.err);
    let seen = looks_right(&dir.path().join("capacity.html"), &["Held up to"]);
    let ladder = table_rows(&seen, "Requests/s");
    assert!(!ladder.is_empty() && ladder[0][0] == "200", "{ladder:?}");
    // Levels are no repetitions of one run: no chart of "run 1, run 2".
    let drawn: Vec<&str> = seen["drawn"].as_array().unwrap().iter().map(|d| d[0].as_str().unwrap()).collect();
    assert!(drawn.iter().all(|d| !d.starts_with("runs-")) && drawn.contains(&"ladder-p99"), "{drawn:?}");
}

#[test]
fn the_cluster_test_has_its_own_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cluster");
    // The binary: the demo starts its servers as children of its own executable.
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["demo", "cluster", "--quick", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = looks_right(&out.join("report.html"), &["control subs/min", "Most subs/min in total", "Failed users"]);
    // The Cluster test's table, with the total beside the range per server.
    let rows = table_rows(&seen, "Scenario");
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), cluster_names());
    assert_eq!(rows[0][2], rows[0][3], "the control's one server is its total: {rows:?}");
    // Every server of every shape has its bar; shapes are no releases: no comparison, no history.
    let drawn = seen["drawn"].as_array().unwrap();
    assert_eq!(drawn[0], serde_json::json!(["cluster-subscriptions", 22]), "{seen}");
    let toc: Vec<&str> = seen["toc"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(toc[0], "Cluster test");
    assert!(!toc.iter().any(|t| t.contains("compared with") || t.starts_with("History")), "{toc:?}");
    // The entry points are named as such in the servers' CPU charts.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let data = report_data(&page);
    let cpu = data["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "run")
        .flat_map(|s| s["charts"].as_array().unwrap().iter().filter(|c| c["id"] == "server-cpu"))
        .flat_map(|c| c["series"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap().to_string()))
        .collect::<Vec<_>>();
    assert!(cpu.contains(&"s1-entry".to_string()) && cpu.contains(&"s2".to_string()), "{cpu:?}");
}

#[test]
fn the_demo_page_says_what_ran_and_whether_to_trust_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let o = Command::new(env!("CARGO_BIN_EXE_bolide")).args(["demo", "--quick", "--out"]).arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = looks_right(&out.join("report.html"), &["Runs", "Errors"]);
    assert_eq!(seen["firstScreen"]["band"].as_array().unwrap().last().unwrap()[0], "Trust", "{seen}");
    // The two workloads are two rows named by their workload, never run 1 and run 2 of one.
    let rows = table_rows(&seen, "Run");
    let workloads: Vec<&str> = rows.iter().map(|r| r[1]).collect();
    assert_eq!(workloads, ["tasks-nonreactive", "tasks-reactive"], "{rows:?}");
    assert!(rows.iter().all(|r| r[0].ends_with(&format!("({})", r[1]))), "{rows:?}");
    // Each run's response time per second is drawn.
    let drawn: Vec<&str> = seen["drawn"].as_array().unwrap().iter().map(|d| d[0].as_str().unwrap()).collect();
    assert_eq!(drawn.iter().filter(|d| **d == "response-time").count(), 2, "{drawn:?}");
}

fn cluster_names() -> Vec<&'static str> {
    vec![
        "control",
        "3 servers, one balancer",
        "3 servers, all balancers",
        "5 servers, all balancers",
        "10 servers, all balancers",
    ]
}

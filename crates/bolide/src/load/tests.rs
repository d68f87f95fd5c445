//! The tables of `bench`, `compare` and `capacity` on documents with known figures: the Meteor
//! reports' own numbers (../shared/reference/000), and snapshots of every table.

use std::path::PathBuf;

use super::capacity::{conclusion, judge, ladder_table, Criteria, Verdict};
use crate::monitor::MonitorResult;
use crate::results::compare::{build, build_with, render, Judgement, Series};
use crate::results::{runs_table, RunEntry};
use crate::stats::doc::Doc;
use crate::stats::result::{Latency, ResultDoc, FORMAT, VERSION};
use crate::stats::vu::{StepSummary, VuDoc};

/// Compares `text` with `tests/snapshots/NAME`; `BOLIDE_UPDATE_SNAPSHOTS=1` rewrites the file.
pub(super) fn snapshot(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("BOLIDE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with BOLIDE_UPDATE_SNAPSHOTS=1 to create it", path.display()));
    assert_eq!(text, want, "snapshot {name} differs (BOLIDE_UPDATE_SNAPSHOTS=1 rewrites it after review)");
}

fn watched(cpu: f64, ram_mb: f64) -> Vec<MonitorResult> {
    vec![MonitorResult {
        name: "app".into(),
        pid: 1,
        avg_cpu_pct: cpu,
        peak_cpu_pct: cpu,
        avg_rss_bytes: ram_mb * 1e6,
        peak_rss_bytes: (ram_mb * 1e6) as u64,
        samples: vec![(1.0, cpu, (ram_mb * 1e6) as u64)],
        ..Default::default()
    }]
}

fn ddp(scenario: &str, label: &str, time_s: f64, cpu: f64, ram_mb: f64) -> Doc {
    let mut d = VuDoc { format: FORMAT.into(), version: VERSION, kind: "ddp".into(), ..Default::default() };
    d.settings.scenario = scenario.into();
    d.settings.transport = "websocket".into();
    d.summary.total_time_s = time_s;
    d.summary.users.launched = 240;
    d.summary.users.completed = 240;
    d.monitor = watched(cpu, ram_mb);
    d.label = Some(label.into());
    Doc::Ddp(Box::new(d))
}

fn series(name: &str, docs: Vec<Doc>) -> Series {
    Series {
        name: name.into(),
        source: PathBuf::from(format!("results/{name}")),
        runs: docs.into_iter().enumerate().map(|(i, d)| (PathBuf::from(format!("run-{}.json", i + 1)), d)).collect(),
    }
}

/// (seconds, CPU %, RAM MB) per run, from the report.
type Runs = [(f64, f64, f64); 3];

const REACTIVE_2_16: Runs = [(178.0, 85.89, 582.0), (176.0, 90.95, 529.0), (178.0, 85.15, 597.0)];
const REACTIVE_3_1_1: Runs = [(126.0, 43.67, 451.0), (124.0, 42.94, 495.0), (134.0, 41.62, 463.0)];
const NONREACTIVE_2_16: Runs = [(156.0, 110.78, 421.0), (150.0, 109.39, 423.0), (148.0, 111.79, 437.0)];
const NONREACTIVE_3_1_1: Runs = [(126.0, 144.91, 551.0), (126.0, 139.99, 552.0), (116.0, 142.75, 523.0)];

fn meteor_series(label: &str, reactive: &Runs, nonreactive: &Runs) -> Series {
    let mut docs: Vec<Doc> = reactive.iter().map(|r| ddp("tasks-reactive", label, r.0, r.1, r.2)).collect();
    docs.extend(nonreactive.iter().map(|r| ddp("tasks-nonreactive", label, r.0, r.1, r.2)));
    series(label, docs)
}

/// The numbers of a sentence like "29.21% faster, 49.16% less cpu, 22.51% less ram", signed
/// (faster / less negative).
fn numbers(sentence: &str) -> Vec<f64> {
    sentence
        .split(", ")
        .map(|part| {
            let (n, rest) = part.split_once("% ").unwrap_or_else(|| panic!("{part:?}"));
            let v: f64 = n.parse().unwrap();
            if rest.starts_with("faster") || rest.starts_with("less") {
                -v
            } else {
                v
            }
        })
        .collect()
}

#[test]
fn compare_reproduces_the_meteor_reports_percentages() {
    let old = meteor_series("2.16", &REACTIVE_2_16, &NONREACTIVE_2_16);
    let new = meteor_series("3.1.1", &REACTIVE_3_1_1, &NONREACTIVE_3_1_1);
    let report = build(&[old, new], 0, Vec::new());
    assert!(report.refused.is_empty(), "{:?}", report.refused);
    // What the reports print (000_6b74258e15da7298.txt), signed as above. Their hand rounding is
    // not consistent, so each figure must match within 0.01 point.
    let printed: [(&str, [[f64; 3]; 3]); 2] = [
        ("tasks-reactive", [[-29.21, -49.15, -22.50], [-29.54, -52.79, -6.42], [-24.71, -51.12, -22.44]]),
        ("tasks-nonreactive", [[-19.23, 30.80, 30.87], [-16.0, 27.97, 30.49], [-21.62, 27.69, 19.67]]),
    ];
    for (workload, rows) in printed {
        let c = report.comparisons.iter().find(|c| c.workload == workload).unwrap();
        assert_eq!(c.per_run.len(), 3);
        for (i, want) in rows.iter().enumerate() {
            let got = numbers(&c.per_run[i]);
            for (g, w) in got.iter().zip(want) {
                assert!(
                    (g - w).abs() <= 0.01 + 1e-9,
                    "{workload} run {}: {} vs the report's {want:?}",
                    i + 1,
                    c.per_run[i]
                );
            }
        }
    }
    let reactive = report.comparisons.iter().find(|c| c.workload == "tasks-reactive").unwrap();
    assert_eq!(reactive.per_run[0], "29.21% faster, 49.16% less cpu, 22.51% less ram");
    // Times: 2:58 vs 2:06 in three runs each are far apart; RAM overlaps more.
    let time = &reactive.metrics[0];
    assert!(time.verdict.starts_with("significant"), "{time:?}");
    assert!(time.p_value.unwrap() < 0.01);
    assert_eq!(time.baseline_median, 178.0);
    assert_eq!((time.min, time.max), (124.0, 134.0));
    snapshot("compare-meteor.md", &render(&report, true, "app and its descendants"));
    snapshot("compare-meteor.txt", &render(&report, false, "app and its descendants"));
}

#[test]
fn incompatible_workloads_are_refused_with_the_difference() {
    let a = series("a", vec![ddp("tasks-reactive", "a", 10.0, 1.0, 1.0)]);
    let mut other = ddp("tasks-reactive", "b", 9.0, 1.0, 1.0);
    if let Some(d) = other.ddp_mut() {
        d.settings.transport = "sockjs".into();
    }
    let b = series("b", vec![other, ddp("sub-churn", "b", 5.0, 1.0, 1.0)]);
    let r = build(&[a.clone(), b.clone()], 0, Vec::new());
    assert!(r.comparisons.is_empty());
    assert_eq!(r.refused.len(), 2, "{:?}", r.refused);
    assert!(r.refused[0].contains("transport: websocket vs sockjs"), "{:?}", r.refused);
    assert!(r.refused[0].contains("--allow-different-workloads compares them anyway"), "{:?}", r.refused);
    assert!(r.refused[1].contains("sub-churn: b has runs of it, the baseline a has none"), "{:?}", r.refused);
    // On purpose (the loadtest seed's keep-alive against none): compared, the difference shown.
    let r = build_with(&[a, b], 0, Vec::new(), true);
    assert_eq!(r.comparisons.len(), 1, "{:?}", r.refused);
    assert_eq!(r.comparisons[0].differences, vec!["transport: websocket vs sockjs".to_string()]);
    let text = render(&r, false, "nothing watched");
    assert!(
        text.contains("Different workloads, compared on purpose: b against a: transport: websocket vs sockjs."),
        "{text}"
    );
}

fn http(label: &str, requests: u64, secs: f64, kbytes_per_s: f64, p50_ms: f64) -> Doc {
    let mut d = ResultDoc { format: FORMAT.into(), version: VERSION, kind: "http".into(), ..Default::default() };
    d.targets = vec![format!("http://{label}:3000/")];
    d.settings.connections = 100;
    d.settings.requests = Some(100_000);
    d.settings.method = "GET".into();
    d.settings.keep_alive = false;
    d.summary.responses = requests;
    d.summary.sent = requests;
    d.summary.duration_s = secs;
    d.summary.requests_per_s = requests as f64 / secs;
    d.summary.bytes_in_per_s = kbytes_per_s * 1024.0;
    d.summary.latency = Latency {
        p50_us: (p50_ms * 1000.0) as u64,
        p90_us: (p50_ms * 1500.0) as u64,
        p99_us: (p50_ms * 3000.0) as u64,
        p99_9_us: (p50_ms * 5000.0) as u64,
        max_us: (p50_ms * 9000.0) as u64,
        mean_us: p50_ms * 1100.0,
        ..Default::default()
    };
    d.label = Some(label.into());
    Doc::Http(Box::new(d))
}

#[test]
fn http_results_get_abs_side_by_side_table() {
    // ../shared/reference/004: the root path through Node.js, nginx as a proxy, nginx serving static.
    let node = series("node", vec![http("node", 100_000, 299.050, 269.41, 290.0)]);
    let proxy = series("nginx-proxy", vec![http("nginx-proxy", 100_000, 106.313, 806.51, 100.0)]);
    let stat = series("nginx-static", vec![http("nginx-static", 100_000, 108.380, 791.12, 104.0)]);
    let r = build(&[node, proxy, stat], 0, Vec::new());
    assert!(r.refused.is_empty(), "{:?}", r.refused);
    let t = &r.http_tables[0];
    assert_eq!(t.columns.len(), 3);
    // ab's figures: 334.39 requests per second and 2.991 ms per request across all concurrent ones.
    assert_eq!(format!("{:.2}", t.columns[0].requests_per_s), "334.39");
    // 299.050 s / 100,000 is 2.9905 ms; ab printed 2.991 from its unrounded total.
    assert!((t.columns[0].time_per_request_ms - 2.991).abs() <= 0.001);
    assert_eq!(format!("{:.2}", t.columns[1].requests_per_s), "940.62");
    assert_eq!(format!("{:.3}", t.columns[2].time_per_request_ms), "1.084");
    // HTTP is compared in requests per second and latency, never "faster" on time per request:
    // nginx as a proxy serves 940.62 / 334.39 = 2.8 times the requests per second (+181.29%,
    // which past +100% reads as a factor).
    let sentence = &r.comparisons[0].per_run[0];
    assert!(sentence.starts_with("2.8x requests/s, "), "{sentence}");
    assert!(!sentence.contains("faster") && !sentence.contains("slower"), "{sentence}");
    snapshot("compare-http.md", &render(&r, true, "nothing watched"));
}

/// An HTTP run at `rps` requests per second for 10 s, suspect when `suspect` says why.
fn http_run(label: &str, rps: f64, p50_ms: f64, suspect: Option<&str>) -> Doc {
    let mut d = http(label, (rps * 10.0) as u64, 10.0, rps / 10.0, p50_ms);
    if let Some(h) = d.http_mut() {
        h.generator = Some(crate::monitor::generator::GeneratorResult {
            suspect: suspect.map(String::from),
            ..Default::default()
        });
    }
    d
}

#[test]
fn compare_of_http_series_in_requests_per_second_with_suspect_runs_named() {
    let sat = Some("a bolide load thread was saturated in 3 of 10 samples");
    let node = series(
        "node",
        vec![
            http_run("node", 9_000.0, 1.0, None),
            http_run("node", 9_100.0, 1.0, None),
            http_run("node", 8_950.0, 1.1, None),
        ],
    );
    let nginx = series(
        "nginx",
        vec![
            http_run("nginx", 5_000.0, 2.0, None),
            http_run("nginx", 5_050.0, 2.0, sat),
            http_run("nginx", 4_980.0, 2.1, None),
        ],
    );
    let r = build(&[node, nginx], 0, Vec::new());
    let c = &r.comparisons[0];
    assert!(c.on_means.starts_with("44.") && c.on_means.contains("% fewer requests/s"), "{}", c.on_means);
    let rps = &c.metrics[0];
    assert_eq!(rps.metric, "Requests per second");
    assert!(rps.verdict.contains("without 1 suspect run") && rps.verdict.contains("3 vs 2 runs"), "{}", rps.verdict);
    let text = render(&r, true, "nothing watched");
    assert!(text.contains("nginx run 2 is suspect: a bolide load thread was saturated"), "{text}");
    assert!(text.contains("each metric is judged as two samples by Welch's t-test without the suspect runs"), "{text}");
    assert!(!text.contains("slower") && !text.contains("faster"), "{text}");
    snapshot("compare-http-suspect.md", &text);
}

#[test]
fn series_whose_runs_are_all_suspect_are_never_called_significantly_different() {
    let sat = Some("the machine had under 5% idle CPU in 10 of 10 samples");
    let a = series("a", vec![http_run("a", 9_000.0, 1.0, sat), http_run("a", 9_010.0, 1.0, sat)]);
    let b = series("b", vec![http_run("b", 4_000.0, 2.0, sat), http_run("b", 4_010.0, 2.0, sat)]);
    let r = build(&[a, b], 0, Vec::new());
    for m in &r.comparisons[0].metrics {
        if m.metric == "Error rate (%)" {
            // The server's answers count on any machine: no errors on either side.
            assert_eq!(m.verdict, "no difference in any run (2 runs)");
            continue;
        }
        assert!(!m.verdict.starts_with("significant"), "{}: {}", m.metric, m.verdict);
        assert!(m.verdict.contains("every run of both series is suspect"), "{}: {}", m.metric, m.verdict);
        assert_eq!(m.p_value, None);
    }
}

#[test]
fn per_step_latency_side_by_side() {
    let with_steps = |label: &str, connect_ms: f64, call_ms: f64| {
        let mut d = ddp("tasks-reactive", label, 60.0, 10.0, 100.0);
        if let Some(d) = d.ddp_mut() {
            for (name, ms) in [("connect", connect_ms), ("call insertTask", call_ms)] {
                d.steps.push(StepSummary {
                    name: name.into(),
                    count: 100,
                    latency: Some(Latency {
                        p50_us: (ms * 1000.0) as u64,
                        p99_us: (ms * 4000.0) as u64,
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
        }
        d
    };
    let a = series("before", vec![with_steps("before", 2.0, 10.0), with_steps("before", 4.0, 12.0)]);
    let b = series("after", vec![with_steps("after", 2.0, 5.0), with_steps("after", 2.0, 7.0)]);
    let r = build(&[a, b], 0, Vec::new());
    let steps = &r.comparisons[0].steps;
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].step, "connect");
    assert_eq!((steps[0].baseline_p50_ms, steps[0].p50_ms), (Some(3.0), Some(2.0)));
    assert_eq!((steps[1].baseline_p99_ms, steps[1].p99_ms), (Some(44.0), Some(24.0)));
    snapshot("compare-steps.txt", &render(&r, false, "app and its descendants"));
}

#[test]
fn bench_table_in_the_reports_form() {
    let runs: Vec<RunEntry> = REACTIVE_3_1_1
        .iter()
        .enumerate()
        .map(|(i, (t, cpu, ram))| RunEntry {
            run: i as u32 + 1,
            file: None,
            time_s: *t,
            requests_per_s: None,
            cpu_pct: Some(*cpu),
            ram_bytes: Some(ram * 1e6),
            errors: i as f64,
            error_rate_pct: 0.0,
            p99_ms: Some(120.0 + i as f64),
            mean_ms: Some(12.5),
            suspect: (i == 2).then(|| "a bolide load thread was saturated".to_string()),
            saturated: false,
            interrupted: false,
            thresholds: Vec::new(),
            eventloop_p99_ms: None,
            gc_ms: None,
            bolide_cpu_us: None,
            per_s: None,
            unit: None,
            browser: None,
            measures_ms: Default::default(),
            events_per_s: Default::default(),
            per_user: Default::default(),
        })
        .collect();
    let mean = RunEntry::mean_of(&runs).unwrap();
    assert_eq!(mean.time_s, (126.0 + 124.0 + 134.0) / 3.0);
    let text = runs_table(&runs, Some(&mean), None).markdown();
    assert!(text.contains("| 1           | 2 minutes 6 seconds  | 43.67% | 451 MB |"), "{text}");
    let notes = super::table_notes(&runs, "server and its descendants", None).join("\n");
    snapshot("bench-table.md", &(text + "\n" + &notes + "\n"));
}

#[test]
fn capacity_ladder_in_the_reports_form() {
    // The 3.1.1 AsyncQueue ladder: 240, 300 and 360 connections per minute pass, 420 fails.
    let c = Criteria { max_error_rate_pct: 1.0, max_p99_ms: None, allow_busy_machine: false };
    let mut rows = Vec::new();
    for (level, t, cpu, ram) in
        [(240.0, 144.0, 73.32, 767.0), (300.0, 152.0, 79.24, 827.0), (360.0, 190.0, 92.62, 1100.0)]
    {
        let d = ddp("tasks-reactive", "3.1.1", t, cpu, ram);
        assert_eq!(judge(&d, &c), Verdict::Pass);
        rows.push((level, Some(d), Verdict::Pass));
    }
    let mut failed = ddp("tasks-reactive", "3.1.1", 400.0, 99.0, 1500.0);
    if let Some(d) = failed.ddp_mut() {
        d.summary.users.failed = 31;
        d.summary.users.cut = 30;
        // 4% of the steps failed: the rate every reader takes from the counts.
        (d.summary.steps, d.summary.step_errors) = (10_000, 400);
    }
    let v = judge(&failed, &c);
    let Verdict::Fail(why) = &v else { panic!("{v:?}") };
    assert_eq!(why[0], "error rate 4.00% > 1.00%");
    assert_eq!(why[1], "31 of 240 users failed (30 cut at the user timeout)");
    rows.push((420.0, Some(failed), v));
    let levels = [240.0, 300.0, 360.0, 420.0, 480.0];
    let text = ladder_table("Connections", &rows).markdown();
    assert!(text.contains("| 360           | 3 minutes 10 seconds | 92.62% | 1.1 GB |"), "{text}");
    let end = conclusion(&rows, &levels, "per minute");
    assert_eq!(end, "Highest passing level: 360 per minute. The server failed at 420 per minute.");
    snapshot("capacity-ladder.md", &format!("{text}\n{end}\n"));
}

#[test]
fn a_saturated_generator_is_no_verdict_on_the_server() {
    let mut d = ddp("tasks-reactive", "x", 60.0, 10.0, 10.0);
    if let Some(doc) = d.ddp_mut() {
        doc.summary.users.failed = 5;
        doc.generator = Some(crate::monitor::generator::GeneratorResult {
            threads: 1,
            avg_cpu_pct: 97.0,
            peak_cpu_pct: 99.0,
            peak_thread_pct: 99.0,
            avg_machine_idle_pct: 40.0,
            min_machine_idle_pct: 30.0,
            saturated_samples: 8,
            machine_busy_samples: 0,
            suspect: Some("saturated".into()),
            dashboard_cpu_pct: None,
            samples: vec![(1.0, 97.0, 97.0, 40.0); 10],
            ..Default::default()
        });
    }
    let c = Criteria { max_error_rate_pct: 1.0, max_p99_ms: None, allow_busy_machine: false };
    // Failed users are the server's answers: judged however saturated bolide was.
    let v = judge(&d, &c);
    assert!(matches!(&v, Verdict::Fail(w) if w == &["5 of 240 users failed"]), "{v:?}");
    // Without them, the speed of a level measured by a saturated bolide is no verdict.
    if let Some(doc) = d.ddp_mut() {
        doc.summary.users.failed = 0;
    }
    assert!(matches!(judge(&d, &c), Verdict::NotTheServer(w) if w.contains("saturated in 8 of 10")));
}

/// A level of a fixed-rate HTTP run: `missed` of its 200 scheduled sends never went out, on a
/// machine that was (or was not) short of idle CPU in some sample.
fn behind(missed: u64, mean_ms: f64, busy_samples: usize) -> Doc {
    let mut d = http_run("x", 200.0, mean_ms, None);
    if let Some(h) = d.http_mut() {
        h.settings.connections = 10;
        h.settings.rate_per_s = Some(200.0);
        h.summary.sent = 200 - missed;
        h.summary.missed_sends = missed;
        h.summary.latency.mean_us = mean_ms * 1000.0;
        h.generator = Some(crate::monitor::generator::GeneratorResult {
            samples: vec![(1.0, 30.0, 30.0, if busy_samples > 0 { 1.0 } else { 50.0 }); 10],
            machine_busy_samples: busy_samples,
            ..Default::default()
        });
    }
    d
}

#[test]
fn capacity_tells_bolide_s_lateness_from_the_server_s() {
    let c = Criteria { max_error_rate_pct: 1.0, max_p99_ms: None, allow_busy_machine: true };
    // 10 of 200 sends missed at 5 ms mean latency: 10 connections carry 2,000 per second, ten
    // times the rate; the connections waited on bolide, not on the server.
    let v = judge(&behind(10, 5.0, 0), &c);
    assert!(matches!(&v, Verdict::NotTheServer(w) if w.contains("bolide fell behind its own schedule")), "{v:?}");
    // The same on a machine without idle CPU in one sample, even with --allow-busy-machine.
    let v = judge(&behind(10, 40.0, 1), &c);
    assert!(matches!(&v, Verdict::NotTheServer(w) if w.contains("while bolide was short of CPU")), "{v:?}");
    // At 40 ms the connections carry 250 per second, within 2x of the rate, on a machine with
    // CPU to spare: the server could not keep up.
    let v = judge(&behind(10, 40.0, 0), &c);
    assert!(matches!(&v, Verdict::Fail(w) if w[0].starts_with("the server could not keep up: 10 of 200")), "{v:?}");
    // 1% late is within the schedule's tolerance.
    assert_eq!(judge(&behind(2, 40.0, 0), &c), Verdict::Pass);
}

#[test]
fn a_server_that_answers_503_fails_its_level_on_any_machine() {
    // Every response a 503, on a machine without idle CPU, bolide saturated too: the error rate
    // is the server's answer.
    let mut d = behind(0, 1.0, 10);
    if let Some(h) = d.http_mut() {
        (h.summary.responses, h.summary.errors) = (200, 200);
        h.summary.errors_by_class.insert("status".into(), 200);
        h.summary.status.insert("503".into(), 200);
        if let Some(g) = h.generator.as_mut() {
            g.saturated_samples = 10;
        }
    }
    let c = Criteria { max_error_rate_pct: 1.0, max_p99_ms: None, allow_busy_machine: false };
    let v = judge(&d, &c);
    assert!(matches!(&v, Verdict::Fail(w) if w[0] == "error rate 100.00% > 1.00%"), "{v:?}");
}

#[test]
fn capacity_says_which_limit_was_not_the_server_and_explains_suspect_levels() {
    use super::capacity::suspect_notes;
    let c = Criteria { max_error_rate_pct: 1.0, max_p99_ms: None, allow_busy_machine: false };
    // (a) 10 connections at 50 ms mean latency carry at most 200 req/s: a 1,000 req/s level that
    // missed most sends is the connections' limit, not the server's.
    let mut few = http_run("x", 190.0, 45.45, None);
    if let Some(d) = few.http_mut() {
        d.settings.connections = 10;
        d.settings.rate_per_s = Some(1000.0);
        d.summary.sent = 1_900;
        d.summary.missed_sends = 8_100;
    }
    let v = judge(&few, &c);
    let Verdict::NotTheServer(why) = &v else { panic!("{v:?}") };
    assert!(why.contains("too few connections for the rate") && why.contains("Little's law"), "{why}");
    assert!(why.contains("raise -c to at least 75"), "{why}");
    // (b) A machine without idle CPU: no verdict on the server either, and the reason says so.
    let mut busy = ddp("tasks-reactive", "x", 60.0, 10.0, 10.0);
    if let Some(d) = busy.ddp_mut() {
        d.generator = Some(crate::monitor::generator::GeneratorResult {
            threads: 1,
            machine_busy_samples: 6,
            min_machine_idle_pct: 1.0,
            samples: vec![(1.0, 40.0, 40.0, 2.0); 10],
            suspect: Some("the machine had under 5% idle CPU in 6 of 10 samples".into()),
            ..Default::default()
        });
    }
    let v = judge(&busy, &c);
    let Verdict::NotTheServer(why) = &v else { panic!("{v:?}") };
    assert!(why.contains("the machine had no idle CPU in 6 of 10 samples"), "{why}");
    // --allow-busy-machine judges its speed all the same.
    let allowed = Criteria { allow_busy_machine: true, ..c };
    assert_eq!(judge(&busy, &allowed), Verdict::Pass);
    // Failed users are the server's answers: they fail the level on the busy machine anyway.
    let mut failing = busy.clone();
    if let Some(d) = failing.ddp_mut() {
        d.summary.users.failed = 3;
    }
    let v = judge(&failing, &c);
    assert!(matches!(&v, Verdict::Fail(w) if w[0].starts_with("3 of ")), "{v:?}");
    // (c) A level at which nothing happened is no "ok".
    let mut empty = ddp("tasks-reactive", "x", 0.0, 1.0, 1.0);
    if let Some(d) = empty.ddp_mut() {
        d.summary.users.launched = 0;
        d.summary.users.completed = 0;
    }
    assert!(matches!(judge(&empty, &c), Verdict::Unmeasured(_)));
    // A suspect level that passed is explained under the table.
    let mut suspect = ddp("tasks-reactive", "x", 60.0, 10.0, 10.0);
    if let Some(d) = suspect.ddp_mut() {
        d.generator = Some(crate::monitor::generator::GeneratorResult {
            suspect: Some("a bolide load thread was saturated in 1 of 60 samples".into()),
            ..Default::default()
        });
    }
    let rows = vec![(4.0, Some(suspect), Verdict::Pass), (6.0, Some(busy), Verdict::NotTheServer(why.clone()))];
    let text = ladder_table("Connections", &rows).markdown();
    let end = conclusion(&rows, &[4.0, 6.0, 8.0], "per second");
    let notes = suspect_notes(&rows, "per second");
    assert!(notes.contains("Level 4 per second is suspect: a bolide load thread was saturated"), "{notes}");
    assert!(end.contains("the limit was not the server: the machine had no idle CPU"), "{end}");
    snapshot("capacity-notes.md", &format!("{text}\n{end}\n{notes}"));
}

#[test]
fn per_target_figures_side_by_side() {
    use crate::stats::vu::DdpTargetSummary;
    // Runs over two servers: (subscriptions per minute, ready p99 ms, failed users) per target.
    let over = |label: &str, port_b: u16, figures: [(f64, f64, u64); 2]| {
        let mut d = ddp("cluster-churn", label, 60.0, 10.0, 100.0);
        if let Some(d) = d.ddp_mut() {
            for (i, (subs, p99, failed)) in figures.into_iter().enumerate() {
                let port = if i == 0 { 3001 } else { port_b };
                let mut t = DdpTargetSummary {
                    url: format!("http://127.0.0.1:{port}"),
                    weight: 1,
                    subscriptions_per_min: subs,
                    subscribe_latency: Some(Latency { p99_us: (p99 * 1000.0) as u64, ..Default::default() }),
                    ..Default::default()
                };
                t.users.failed = failed;
                d.per_target.push(t);
            }
        }
        d
    };
    let a = series(
        "before",
        vec![
            over("before", 3002, [(2700.0, 8.0, 0), (2600.0, 9.0, 0)]),
            over("before", 3002, [(2500.0, 6.0, 0), (2400.0, 7.0, 2)]),
        ],
    );
    let b = series(
        "after",
        vec![
            over("after", 3003, [(3000.0, 4.0, 0), (1000.0, 30.0, 5)]),
            over("after", 3003, [(3200.0, 6.0, 0), (1200.0, 50.0, 7)]),
        ],
    );
    let r = build(&[a, b], 0, Vec::new());
    let t = &r.comparisons[0].targets;
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].target, "#1 http://127.0.0.1:3001");
    assert_eq!(t[1].target, "#2 http://127.0.0.1:3003 (was http://127.0.0.1:3002)");
    assert_eq!((t[0].baseline_subs_per_min, t[0].subs_per_min), (Some(2600.0), Some(3100.0)));
    assert_eq!((t[1].baseline_p99_ms, t[1].p99_ms), (Some(8.0), Some(40.0)));
    assert_eq!((t[1].baseline_failed_users, t[1].failed_users), (Some(1.0), Some(6.0)));
    let text = render(&r, true, "app and its descendants");
    assert!(text.contains("| #2 http://127.0.0.1:3003 (was http://127.0.0.1:3002) |"), "{text}");
    snapshot("compare-targets.md", &text);
}

#[test]
fn shared_starts_give_every_run_of_a_series_its_own_slot() {
    use std::time::{Duration, SystemTime};
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let at = |s: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    // 60 s runs with a 5 s cooldown: each slot is 60 + 5 + 10 = 75 s.
    let starts = super::shared_starts(Some(t0), 3, Some(Duration::from_secs(60)), Duration::from_secs(5)).unwrap();
    assert_eq!(starts, [at(1_000), at(1_075), at(1_150)]);
    // A fraction of a second rounds the slot up to whole seconds.
    let starts = super::shared_starts(Some(t0), 2, Some(Duration::from_millis(500)), Duration::ZERO).unwrap();
    assert_eq!(starts, [at(1_000), at(1_011)]);
    assert_eq!(super::shared_starts(None, 2, None, Duration::ZERO).unwrap(), [None, None]);
    assert_eq!(super::shared_starts(Some(t0), 1, None, Duration::ZERO).unwrap(), [at(1_000)]);
    let e = super::shared_starts(Some(t0), 2, None, Duration::ZERO).unwrap_err();
    assert!(e.what.contains("planned length"), "{e}");
}

#[test]
fn runs_of_different_workloads_are_never_drawn_as_repetitions_of_one_series() {
    // The demo's directory holds one run of each of two workloads under one label: in the
    // charts across runs they are two series, not "run 1, run 2" of one.
    let demo = series(
        "demo",
        vec![ddp("tasks-reactive", "demo", 10.0, 1.0, 1.0), ddp("tasks-nonreactive", "demo", 9.0, 1.0, 1.0)],
    );
    let split = crate::results::report::by_workload(std::slice::from_ref(&demo));
    let names: Vec<&str> = split.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["demo (tasks-reactive)", "demo (tasks-nonreactive)"]);
    assert!(split.iter().all(|s| s.runs.len() == 1));
    let sections = crate::results::report::sections(&[demo], &[]);
    let every = sections.iter().find(|s| s.title == "Every run").expect("a section across runs");
    assert_eq!(every.notes, ["2 runs in 2 series"]);
    // A series of one workload stays as it is.
    let one = series("a", vec![ddp("tasks-reactive", "a", 10.0, 1.0, 1.0), ddp("tasks-reactive", "a", 11.0, 1.0, 1.0)]);
    assert_eq!(crate::results::report::by_workload(std::slice::from_ref(&one))[0].name, "a");
}

#[test]
fn a_ladder_says_why_no_level_held() {
    use super::capacity::knee_facts;
    let d = || Some(ddp("tasks-reactive", "x", 60.0, 10.0, 10.0));
    // Each row: the first level's verdict, what "Held up to" says and why.
    let rows = [
        (Verdict::Fail(vec!["error rate 100.00% > 1.00%".into()]), "no level", "the first level already failed"),
        (Verdict::NotTheServer("the machine had no idle CPU".into()), "no verdict", "no verdict on the server"),
        (Verdict::Interrupted, "no verdict", "no verdict on the server"),
    ];
    for (verdict, value, why) in rows {
        let band = knee_facts(&[(60.0, d(), verdict.clone())], "per minute");
        assert_eq!((band[0].label.as_str(), band[0].value.as_str()), ("Held up to", value), "{verdict:?}");
        assert!(band[0].detail.contains(why), "{verdict:?}: {}", band[0].detail);
    }
}

#[test]
fn identical_runs_are_the_same_never_inconclusive() {
    // One run a side, no errors on either: "no errors" and "same", not "inconclusive".
    let base = series("a", vec![http_run("x", 100.0, 1.0, None)]);
    let new = series("b", vec![http_run("x", 100.0, 1.0, None)]);
    let r = build(&[base, new], 0, Vec::new());
    let row = r.comparisons[0].metrics.iter().find(|m| m.metric == "Error rate (%)").unwrap();
    assert_eq!((row.words.as_str(), row.judgement.word()), ("no errors", "same"));
}

/// Stamps each document with a start time, seconds after a fixed instant.
fn started(mut docs: Vec<Doc>, at: &[u64]) -> Vec<Doc> {
    for (d, s) in docs.iter_mut().zip(at) {
        let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_790_000_000 + s);
        *d.envelope_mut().started_at = humantime::format_rfc3339_millis(t).to_string();
    }
    docs
}

/// An HTTP run of mean latency `mean_ms`, marked as bolide marks a run on a machine without idle
/// CPU (`busy`) or with its own load thread saturated (`saturated`).
fn marked(label: &str, mean_ms: f64, busy: bool, saturated: bool) -> Doc {
    let mut d = http_run(label, 400.0, mean_ms / 1.1, None);
    let mut why = Vec::new();
    if saturated {
        why.push("a bolide load thread was saturated (>= 90% of a core) in 10 of 10 samples");
    }
    if busy {
        why.push("the machine had under 5% idle CPU in 10 of 10 samples");
    }
    if let Some(h) = d.http_mut() {
        h.generator = Some(crate::monitor::generator::GeneratorResult {
            samples: vec![(1.0, 50.0, if saturated { 99.0 } else { 50.0 }, if busy { 1.0 } else { 50.0 }); 10],
            saturated_samples: if saturated { 10 } else { 0 },
            machine_busy_samples: if busy { 10 } else { 0 },
            suspect: (!why.is_empty()).then(|| why.join("; ")),
            ..Default::default()
        });
    }
    d
}

#[test]
fn interleaved_runs_are_judged_in_pairs_through_a_busy_machine() {
    use crate::results::gate::{judge as gate, parse, Outcome};
    // The A/B: /delay/0 against /delay/3 on a 2-core machine under load, every run on a
    // machine without idle CPU. Interleaved A B, B A, A B, B A.
    let zero = [0.04, 0.42, 0.1, 0.3];
    let three = [4.38, 10.9, 6.0, 8.0];
    let a_at = [0, 30, 40, 70];
    let b_at = [10, 20, 50, 60];
    let side = |label: &str, v: &[f64], at: &[u64]| {
        series(label, started(v.iter().map(|m| marked(label, *m, true, false)).collect(), at))
    };
    let r = build(&[side("d=0", &zero, &a_at), side("d=3", &three, &b_at)], 0, Vec::new());
    let c = &r.comparisons[0];
    assert_eq!(c.pairs, Some(4));
    let mean = c.metrics.iter().find(|m| m.metric == "Mean latency (ms)").unwrap();
    assert_eq!((mean.test.as_str(), mean.judgement), ("paired", Judgement::Worse), "{mean:?}");
    assert!(
        mean.verdict.starts_with("significant (p = 0.002, paired t-test on the log ratios of 4 interleaved pairs"),
        "{}",
        mean.verdict
    );
    let [lo, hi] = mean.change_interval_pct.unwrap();
    assert!(lo > 1000.0 && hi > lo, "{lo} {hi}");
    // The gate of the issue fails (exit 1), where the two-sample rules said "no verdict".
    let rule = parse("mean>+50%").unwrap();
    let g = gate(&rule, ("w", "d=0", "d=3"), &c.baseline_runs, &c.runs, c.pairing.as_deref(), false);
    assert_eq!(g.outcome, Outcome::Fail, "{}", g.verdict);
    assert!(g.verdict.contains("[paired, 4 interleaved pairs]"), "{}", g.verdict);
    let text = render(&r, true, "nothing watched");
    assert!(text.contains("each metric is judged in 4 pairs"), "{text}");
    // The same runs one series after the other: two samples, today's rules, and nothing to judge.
    let r = build(&[side("d=0", &zero, &[0, 10, 20, 30]), side("d=3", &three, &[40, 50, 60, 70])], 0, Vec::new());
    let c = &r.comparisons[0];
    assert_eq!(c.pairs, None);
    let mean = c.metrics.iter().find(|m| m.metric == "Mean latency (ms)").unwrap();
    assert_eq!((mean.test.as_str(), mean.judgement), ("welch", Judgement::Inconclusive), "{mean:?}");
    let g = gate(&rule, ("w", "d=0", "d=3"), &c.baseline_runs, &c.runs, c.pairing.as_deref(), false);
    assert_eq!(g.outcome, Outcome::Inconclusive, "{}", g.verdict);
    // An A/A on the busy machine: paired, within the noise; the gate passes or says why not.
    let noisy = [0.04, 0.42, 0.1, 0.3];
    let again = [0.05, 0.38, 0.12, 0.28];
    let r = build(&[side("a", &noisy, &a_at), side("a#2", &again, &b_at)], 0, Vec::new());
    let c = &r.comparisons[0];
    let g = gate(&rule, ("w", "a", "a#2"), &c.baseline_runs, &c.runs, c.pairing.as_deref(), false);
    assert_ne!(g.outcome, Outcome::Fail, "{}", g.verdict);
}

#[test]
fn a_saturated_run_bounds_its_side_and_a_pair_nothing_decides_is_named() {
    // Latency, lower is better; the series is about twice as slow in every pair. Pair 1: the
    // baseline at its limit: its truth is faster still, so the series is worse still: the verdict
    // stands. Pair 3: both at their limit: nothing decides it, left out.
    let docs = |label: &str, means: [f64; 4], limits: [bool; 4], at: &[u64]| {
        let runs = means.iter().zip(limits).map(|(m, l)| marked(label, *m, false, l)).collect();
        series(label, started(runs, at))
    };
    let (a_at, b_at) = ([0, 30, 40, 70], [10, 20, 50, 60]);
    let a = docs("a", [1.0, 1.1, 0.9, 1.0], [true, false, true, false], &a_at);
    let b = docs("b", [2.0, 2.3, 1.8, 2.1], [false, false, true, false], &b_at);
    let r = build(&[a.clone(), b], 0, Vec::new());
    let mean = r.comparisons[0].metrics.iter().find(|m| m.metric == "Mean latency (ms)").unwrap();
    assert_eq!(mean.judgement, Judgement::Worse, "{mean:?}");
    assert!(mean.verdict.contains("1 pair at bolide's limit counted as measured"), "{}", mean.verdict);
    assert!(mean.verdict.contains("pair 3 left out"), "{}", mean.verdict);
    // The server's CPU says nothing in a saturated run: pairs 1 and 3 are left out of it.
    let cpu = r.comparisons[0].metrics.iter().find(|m| m.metric == "Requests per second").unwrap();
    assert_eq!(cpu.test, "paired");
    // A series run at its limit in pair 2: its truth is faster than counted and could pull the
    // change back: no verdict, and a gate that would fail says INCONCLUSIVE.
    let b = docs("b", [2.0, 2.3, 1.8, 2.1], [false, true, false, false], &b_at);
    let r = build(&[a, b], 0, Vec::new());
    let c = &r.comparisons[0];
    let mean = c.metrics.iter().find(|m| m.metric == "Mean latency (ms)").unwrap();
    assert_eq!(mean.judgement, Judgement::Inconclusive, "{mean:?}");
    assert!(mean.verdict.starts_with("no verdict:"), "{}", mean.verdict);
    let rule = crate::results::gate::parse("mean>+50%").unwrap();
    let g = crate::results::gate::judge(&rule, ("w", "a", "b"), &c.baseline_runs, &c.runs, c.pairing.as_deref(), false);
    assert_eq!(g.outcome, crate::results::gate::Outcome::Inconclusive, "{}", g.verdict);
    assert!(g.verdict.contains("pairs at bolide's limit could turn it"), "{}", g.verdict);
}

#[test]
fn a_closed_loop_of_fixed_length_leads_with_its_throughput() {
    use crate::stats::vu::StepSummary;
    // ddp-calls, compression on against off: the same 10 s, 4.5 times the calls.
    let calls = |label: &str, n: u64| {
        let mut d = ddp("ddp-calls", label, 10.0, 50.0, 100.0);
        if let Some(d) = d.ddp_mut() {
            d.summary.duration_s = 10.0;
            d.steps.push(StepSummary { name: "call bench.echo".into(), count: n, ..Default::default() });
        }
        d
    };
    let on = series("c=on", started(vec![calls("c=on", 10_000), calls("c=on", 10_200)], &[0, 30]));
    let off = series("c=off", started(vec![calls("c=off", 45_000), calls("c=off", 45_900)], &[10, 20]));
    let r = build(&[on.clone(), off.clone()], 0, Vec::new());
    // The report's first card and its headline, as the HTML page shows them.
    let page = crate::results::report::sections_with(&[on, off], &[], Some(r.clone()));
    let first = &page[0].band[0];
    assert_eq!((first.label.as_str(), first.value.as_str()), ("Calls per second", "4.5x calls/s"), "{first:?}");
    let c = &r.comparisons[0];
    assert!(c.on_means.starts_with("4.5x calls/s"), "{}", c.on_means);
    assert!(c.per_run.iter().all(|s| s.starts_with("4.5x calls/s")), "{:?}", c.per_run);
    assert_eq!(c.metrics[0].metric, "Calls per second");
    let md = render(&r, true, "app");
    // The headline, after the gate's verdict (none here): the first line of comparison.md.
    assert!(md.starts_with("**c=off against c=on** (ddp-calls): 4.5x calls/s"), "{md}");
    assert!(!md.lines().next().unwrap().contains("faster"), "{md}");
}

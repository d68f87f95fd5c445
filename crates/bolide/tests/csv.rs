//! `--out csv=PATH` and `bolide report --format csv`: one row per second per series, whose sums are
//! the result document's own totals; the same rows from a saved document; a bench series' runs
//! numbered; `--out` values it cannot use refused before anything runs.

mod common;

use bolide::stats::result::ResultDoc;

/// The CSV's rows as (run, t_s, metric, labels, value), checked for five fields each.
fn rows(path: &std::path::Path) -> Vec<(String, f64, String, String, f64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("run,t_s,metric,labels,value"));
    lines
        .map(|l| {
            // No field of these runs is quoted (no comma in a label), so a split is exact.
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 5, "{l}");
            (f[0].to_string(), f[1].parse().unwrap(), f[2].to_string(), f[3].to_string(), f[4].parse().unwrap())
        })
        .collect()
}

fn sum(rows: &[(String, f64, String, String, f64)], run: &str, metric: &str) -> f64 {
    rows.iter().filter(|r| r.0 == run && r.2 == metric).map(|r| r.4).sum()
}

fn ok_server() -> common::Fake {
    common::fake(|s| common::answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

#[test]
fn an_http_run_s_seconds_sum_to_its_totals_and_report_writes_the_same_rows() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("run.csv"), dir.path().join("run.json"));
    let o = common::bolide(&[
        "http",
        "-n",
        "300",
        "-c",
        "2",
        "--monitor",
        &format!("self={}", std::process::id()),
        "--out",
        &format!("csv={}", csv.display()),
        "--json",
        json.to_str().unwrap(),
        &target.url("/"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = rows(&csv);
    assert_eq!(sum(&r, "1", "responses"), 300.0);
    assert_eq!(sum(&r, "1", "responses"), doc.timeline.iter().map(|s| s.responses as f64).sum::<f64>());
    assert_eq!(sum(&r, "1", "errors"), 0.0);
    // Each second's p99 as the document has it, in ms.
    let p99: Vec<f64> = r.iter().filter(|x| x.2 == "latency_p99_ms").map(|x| x.4).collect();
    let want: Vec<f64> =
        doc.timeline.iter().filter(|s| s.responses > 0).map(|s| s.latency_p99_us as f64 / 1000.0).collect();
    assert_eq!(p99, want);
    // The watched process's samples, labelled.
    let cpu = r.iter().filter(|x| x.2 == "cpu_pct" && x.3 == "process=self").count();
    assert_eq!(cpu, doc.monitor[0].samples.len());
    // From the saved document, the same rows (the run named by its file).
    let again = dir.path().join("again.csv");
    let o = common::bolide(&["report", "--format", "csv", json.to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let strip = |rows: Vec<(String, f64, String, String, f64)>| -> Vec<_> {
        rows.into_iter().map(|(_, t, m, l, v)| (t.to_bits(), m, l, v.to_bits())).collect()
    };
    let reported = rows(&again);
    assert!(reported.iter().all(|x| x.0 == "run.json"), "{:?}", &reported[..1]);
    assert_eq!(strip(reported), strip(r));
}

#[test]
fn a_ddp_run_s_steps_and_a_bench_series_runs() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("ddp.csv"), dir.path().join("ddp.json"));
    let o = common::bolide(&[
        "run",
        "tasks-reactive",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "5",
        "-d",
        "1s",
        "--tasks",
        "2",
        "--think",
        "0",
        "--out",
        &format!("csv={}", csv.display()),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = rows(&csv);
    assert_eq!(sum(&r, "1", "steps"), doc.summary.steps as f64);
    assert_eq!(sum(&r, "1", "users_completed"), doc.summary.users.completed as f64);
    let insert = sum(&r, "1", "step_latency_count") - {
        // The all-steps rows carry no label; the per-step ones do.
        r.iter().filter(|x| x.2 == "step_latency_count" && x.3.is_empty()).map(|x| x.4).sum::<f64>()
    };
    assert_eq!(insert, doc.summary.steps as f64, "each step counted once by name");
    assert!(r.iter().any(|x| x.3 == "step=call insertTask"), "per-step rows");

    // A bench series: each run's rows under its number.
    let target = ok_server();
    let series_csv = dir.path().join("series.csv");
    let o = common::bolide(&[
        "bench",
        "http",
        "-n",
        "40",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--out",
        dir.path().join("series").to_str().unwrap(),
        "--out",
        &format!("csv={}", series_csv.display()),
        &target.url("/"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let r = rows(&series_csv);
    assert_eq!((sum(&r, "1", "responses"), sum(&r, "2", "responses")), (40.0, 40.0));
    assert!(dir.path().join("series").is_dir(), "--out DIR is still the series' directory");
}

#[test]
fn out_values_it_cannot_use_are_usage_errors() {
    for (args, says) in [
        (vec!["--out", "/tmp/somewhere"], "a directory is where bench and capacity keep"),
        (vec!["--out", "otlp=ftp://127.0.0.1:4318"], "receivers are http:// or https://"),
        (vec!["--out", "otlp=not a url"], "not a URL"),
        (vec!["--out", "otlp=http://127.0.0.1:1", "--out", "otlp=http://127.0.0.1:2"], "given twice"),
        (vec!["--out", "csv=a.csv", "--out", "csv=b.csv"], "given twice"),
        (vec!["--out", "parquet=x"], "is no kind of output"),
        (vec!["--out", "csv="], "needs a file"),
    ] {
        let mut all = vec!["http", "-n", "1"];
        all.extend(args);
        all.push("http://127.0.0.1:9/");
        let o = common::bolide(&all);
        assert_eq!(o.code, 2, "{all:?}: {}", o.err);
        assert!(o.err.contains(says), "{all:?}: {}", o.err);
    }
}

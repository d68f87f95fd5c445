//! What an error is, and the error rate, read the same in every output of one run: the terminal,
//! the result document, the HTML report's band, JUnit, the CSV seconds and the seconds sent by
//! Prometheus remote write (read back from a real Prometheus). One HTTP run whose answers half
//! fail (a URL answering 500 beside one answering 200), one DDP run whose every user's call
//! fails (a method the server does not have), both against the reference server on loopback.

mod common;

use std::process::Command;
use std::time::SystemTime;

use bolide::stats::doc::Doc;
use common::prom::{prometheus, query};

/// The sum of a CSV's rows of `metric` (no labels).
fn csv_total(path: &std::path::Path, metric: &str) -> f64 {
    let needle = format!(",{metric},,");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(&needle).map(|(_, v)| v.parse::<f64>().unwrap()))
        .sum()
}

/// Runs bolide as a process (its own environment: the testid) in `dir`, with every output.
fn run(dir: &std::path::Path, prom_port: u16, testid: &str, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(args)
        .args(["--threshold", "errors<1", "--threshold", "error_rate<1%", "--json", "r.json", "--html", "r.html"])
        .args(["--junit", "r.xml", "--out", "csv=r.csv", "--out"])
        .arg(format!("prometheus-rw=http://127.0.0.1:{prom_port}/api/v1/write"))
        .current_dir(dir)
        .env("BOLIDE_TESTID", testid)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The checks both kinds share: the document's own reading, its thresholds, JUnit, the band.
fn shared(dir: &std::path::Path, errors: u64, rate_pct: f64, band_label: &str) -> Doc {
    let doc = Doc::load(&dir.join("r.json")).unwrap();
    // The document's reading: the count and the rate every reader takes.
    assert_eq!(doc.view().errors(), errors);
    assert_eq!(doc.error_rate_pct(), Some(rate_pct));
    assert_eq!(doc.measures().errors, errors);
    // The thresholds judged the same figures.
    let th = doc.thresholds();
    assert_eq!((th[0].value, th[1].value), (Some(errors as f64), Some(rate_pct)));
    assert!(!th[0].ok && !th[1].ok);
    // JUnit says the same values.
    let junit = std::fs::read_to_string(dir.join("r.xml")).unwrap();
    assert!(junit.contains(&format!(" was {errors}: errors&lt;1 does not hold")), "{junit}");
    assert!(junit.contains(&format!(" was {rate_pct:.2}%: error_rate&lt;1% does not hold")), "{junit}");
    // The report's band: the errors card, with the rate.
    let page = std::fs::read_to_string(dir.join("r.html")).unwrap();
    let card = format!("\"label\":\"{band_label}\",\"value\":\"{errors} ({rate_pct:.2}%)\"");
    assert!(page.contains(&card), "no {card} in the report");
    doc
}

#[test]
fn an_http_run_s_failed_requests_read_the_same_everywhere() {
    let p = prometheus();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ok, failing) = (format!("{}/", server.base_url()), format!("{}/status/500", server.base_url()));
    let (code, out) = run(dir.path(), p.port, "one-reading-http", &["http", "-n", "400", "-c", "2", &ok, &failing]);
    assert_eq!(code, 1, "the thresholds are broken:\n{out}");
    let d = Doc::load(&dir.path().join("r.json")).unwrap();
    let h = d.http().unwrap();
    // Every request ended; the 500s are the failed ones.
    let failed = h.summary.status["500"];
    assert_eq!((h.summary.responses, h.summary.errors), (400, failed));
    assert!(failed > 0 && failed < 400, "both URLs were asked: {:?}", h.summary.status);
    let rate = failed as f64 * 100.0 / 400.0;
    shared(dir.path(), failed, rate, "Errors");
    // The terminal.
    assert!(out.contains("400 responses in "), "{out}");
    assert!(out.contains(&format!(", {failed} failed (status 500: {failed})")), "{out}");
    // The CSV's seconds add up to the same count.
    assert_eq!(csv_total(&dir.path().join("r.csv"), "errors"), failed as f64);
    assert_eq!(csv_total(&dir.path().join("r.csv"), "responses"), 400.0);
    // And so do the seconds Prometheus received.
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let at_end = |m: &str| query(p.port, &format!("max_over_time({m}{{testid=\"one-reading-http\"}}[1h])"), end);
    assert_eq!(at_end("bolide_http_errors_total"), failed as f64);
    assert_eq!(at_end("bolide_http_responses_total"), 400.0);
}

#[test]
fn a_ddp_run_s_failed_steps_read_the_same_everywhere() {
    let p = prometheus();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Ten users; each connects, then calls a method the server does not have: that step fails and
    // the user with it.
    let scenario = format!(
        "config:\n  target: {}\n  phases: [{{duration: 1, arrivalCount: 10}}]\nscenarios:\n  - flow:\n      - connect\n      \
         - call: {{method: noSuchMethod}}\n      - subscribe: fetchTasks\n",
        server.base_url()
    );
    std::fs::write(dir.path().join("s.yml"), scenario).unwrap();
    let (code, out) = run(dir.path(), p.port, "one-reading-ddp", &["run", "s.yml"]);
    assert_eq!(code, 1, "the thresholds are broken:\n{out}");
    let d = Doc::load(&dir.path().join("r.json")).unwrap();
    let v = d.ddp().unwrap();
    assert_eq!((v.summary.users.launched, v.summary.users.failed, v.summary.users.cut), (10, 10, 0));
    // The connects and the calls ran (20), the calls failed (10); the subscriptions never came.
    assert_eq!((v.summary.steps, v.summary.step_errors), (20, 10));
    shared(dir.path(), 10, 50.0, "Step errors");
    // The terminal.
    assert!(out.contains("Steps         20 done, 10 failed (50.00%)"), "{out}");
    assert!(out.contains("10 launched, 0 completed, 10 failed"), "{out}");
    // The CSV's seconds.
    assert_eq!(csv_total(&dir.path().join("r.csv"), "step_errors"), 10.0);
    assert_eq!(csv_total(&dir.path().join("r.csv"), "steps"), 20.0);
    // Prometheus.
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let at_end = |m: &str| query(p.port, &format!("max_over_time({m}{{testid=\"one-reading-ddp\"}}[1h])"), end);
    assert_eq!(at_end("bolide_ddp_step_errors_total"), 10.0);
    assert_eq!(at_end("bolide_ddp_steps_total"), 20.0);
    assert_eq!(at_end("bolide_ddp_users_failed_total"), 10.0);
}

#[test]
fn users_cut_at_the_user_timeout_read_the_same_everywhere() {
    let p = prometheus();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Four users connect, then think past the user timeout: each is cut, no step failed.
    let scenario = format!(
        "config:\n  target: {}\n  phases: [{{duration: 1, arrivalCount: 4}}]\n  ddp: {{userTimeout: 1s}}\nscenarios:\n  \
         - flow:\n      - connect\n      - think: 3\n",
        server.base_url()
    );
    std::fs::write(dir.path().join("s.yml"), scenario).unwrap();
    let (code, out) = run(dir.path(), p.port, "one-reading-cut", &["run", "s.yml"]);
    assert_eq!(code, 1, "errors<1 is broken:\n{out}");
    let d = Doc::load(&dir.path().join("r.json")).unwrap();
    let v = d.ddp().unwrap();
    assert_eq!((v.summary.users.launched, v.summary.users.failed, v.summary.users.cut), (4, 4, 4));
    assert_eq!((v.summary.steps, v.summary.step_errors), (4, 0), "the connects ran; no step failed");
    // The run's errors are the cut users; its error rate is its steps', none of which failed.
    assert_eq!((d.view().errors(), d.measures().errors, d.error_rate_pct()), (4, 4, Some(0.0)));
    let th = d.thresholds();
    assert_eq!((th[0].value, th[0].ok, th[1].value, th[1].ok), (Some(4.0), false, Some(0.0), true));
    let junit = std::fs::read_to_string(dir.path().join("r.xml")).unwrap();
    assert!(junit.contains(" was 4: errors&lt;1 does not hold"), "{junit}");
    // The band: the users that failed, and no step error; the terminal the same.
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.contains("\"label\":\"Users\",\"value\":\"0 of 4 completed\""), "the users card");
    assert!(page.contains("\"label\":\"Step errors\",\"value\":\"none\""), "the step errors card");
    assert!(out.contains("4 launched, 0 completed, 4 failed (4 cut at the user timeout)"), "{out}");
    assert!(out.contains("Steps         4 done, 0 failed (0.00%)") && out.contains("user_timeout 4"), "{out}");
    // The CSV's seconds and Prometheus: the failed users.
    assert_eq!(csv_total(&dir.path().join("r.csv"), "users_failed"), 4.0);
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let at_end = |m: &str| query(p.port, &format!("max_over_time({m}{{testid=\"one-reading-cut\"}}[1h])"), end);
    assert_eq!(at_end("bolide_ddp_users_failed_total"), 4.0);
    assert_eq!(at_end("bolide_ddp_step_errors_total"), 0.0);
}

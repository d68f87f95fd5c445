//! Prometheus remote write, as bolide encodes it, read back from a real Prometheus (Debian's 2.42,
//! started by the test on a loopback port with its remote-write receiver and native histograms):
//! a counter's samples come back exact, and `histogram_quantile` over a native histogram made from
//! an HDR histogram lands within one bucket (2^(1/8), about 9%) of the HDR percentile.

mod common;

use common::prom::{get, prometheus, query};

use std::process::Command;
use std::time::{Duration, SystemTime};

use bolide::export::promrw::{compress, post, write_request, NativeHistogram, Series};

#[test]
fn counters_come_back_exact_and_native_histogram_quantiles_within_a_bucket() {
    let p = prometheus();
    let now_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64;
    let labels = |name: &str| vec![("__name__".to_string(), name.to_string()), ("testid".into(), "t1".into())];
    // Three seconds of a counter and of a latency histogram, cumulative as remote write wants.
    let mut hdr = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut native = NativeHistogram::default();
    let mut counter = Series { labels: labels("bolide_test_responses_total"), ..Default::default() };
    let mut latency = Series { labels: labels("bolide_test_latency_seconds"), ..Default::default() };
    let mut total = 0u64;
    for second in 0..3i64 {
        let mut this = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for i in 0..1000u64 {
            // 1 ms to 21 ms, and a tail at 80 ms.
            let us = if i % 100 == 99 { 80_000 } else { 1_000 + (i * 20) + second as u64 * 7 };
            this.record(us).unwrap();
        }
        hdr.add(&this).unwrap();
        native.add_hdr(&this);
        total += this.len();
        let t = now_ms - (3 - second) * 1000;
        counter.samples.push((total as f64, t));
        latency.histograms.push((native.clone(), t));
    }
    let body = compress(&write_request(&[counter, latency]));
    let url = url::Url::parse(&format!("http://127.0.0.1:{}/api/v1/write", p.port)).unwrap();
    let status = post(&url, &body, Duration::from_secs(10)).unwrap();
    assert!((200..300).contains(&status), "status {status}");
    let at = (now_ms - 1000) as f64 / 1000.0;
    assert_eq!(query(p.port, "bolide_test_responses_total{testid=\"t1\"}", at), 3000.0);
    assert_eq!(query(p.port, "histogram_count(bolide_test_latency_seconds{testid=\"t1\"})", at), 3000.0);
    for q in [0.5, 0.9, 0.99] {
        let got = query(p.port, &format!("histogram_quantile({q}, bolide_test_latency_seconds{{testid=\"t1\"}})"), at);
        let want = hdr.value_at_quantile(q) as f64 / 1e6;
        let bucket = 2f64.powf(1.0 / 8.0);
        assert!(got <= want * bucket && got >= want / bucket, "q{q}: {got} s from Prometheus, {want} s from HDR");
    }
    // A body that is not snappy is refused, and said.
    assert_eq!(post(&url, b"not snappy", Duration::from_secs(10)).unwrap(), 400);
}

fn ok_server() -> common::Fake {
    common::fake(|s| common::answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

#[test]
fn a_run_s_seconds_stream_to_prometheus_and_its_totals_come_back_by_promql() {
    let p = prometheus();
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // The run's testid from the environment (a child process: the environment is its own).
    // The server's own series too, from a metrics page (the dashboard draws them).
    let app = common::fake(metrics_page);
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "4000", "-c", "4", "--rps", "1500", "--monitor"])
        .arg(format!("tester={}", std::process::id()))
        .arg("--scrape")
        .arg(format!("app={}", app.url("/metrics")))
        .arg("--out")
        .arg(format!("prometheus-rw=http://127.0.0.1:{}/api/v1/write", p.port))
        .arg("--json")
        .arg(&json)
        .arg(target.url("/"))
        .env("BOLIDE_TESTID", "rw-e2e")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("result.schema.json", &text), Vec::<String>::new());
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&text).unwrap();
    let out = &doc.outputs[0];
    assert_eq!((out.kind.as_str(), out.testid.as_str(), out.dropped), ("prometheus-rw", "rw-e2e", 0), "{out:?}");
    assert_eq!(out.sent, out.seconds);
    assert_eq!(out.seconds as usize, doc.timeline.len());
    // The document keeps no per-second histograms for it (only segments do).
    assert!(doc.timeline.iter().all(|s| s.latency_histogram.is_none()));
    // PromQL at the run's end (the histogram's last sample, within the 5-minute lookback) gives back the document's totals exactly, and the p99 of the native
    // histogram is within a bucket of the document's.
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let sel = "{testid=\"rw-e2e\"}";
    assert_eq!(query(p.port, &format!("max_over_time(bolide_http_responses_total{sel}[1h])"), end), 4000.0);
    assert_eq!(query(p.port, &format!("max_over_time(bolide_http_errors_total{sel}[1h])"), end), 0.0);
    let count = query(p.port, &format!("histogram_count(bolide_http_latency_seconds{sel})"), end);
    assert_eq!(count, 4000.0);
    let p99 = query(p.port, &format!("histogram_quantile(0.99, bolide_http_latency_seconds{sel})"), end);
    let want = doc.summary.latency.p99_us as f64 / 1e6;
    let bucket = 2f64.powf(1.0 / 8.0);
    assert!(
        p99 <= want * bucket * 1.01 && p99 >= want / bucket / 1.01,
        "p99 {p99} s from Prometheus, {want} s in the document"
    );

    // The watched process's memory as a gauge beside the load.
    let rss = query(p.port, "bolide_server_rss_bytes{testid=\"rw-e2e\",process=\"tester\"}", end);
    assert!(rss > 0.0, "{rss}");

    // The Grafana dashboard's queries are these series': each of its HTTP and server panels'
    // expressions, with Grafana's variables as it would fill them, answers from this Prometheus
    // (the DDP panels are the DDP test's). Only the errors (none failed) and the idle watched
    // process's CPU may be zero.
    let exprs = dashboard_exprs();
    let http: Vec<&String> = exprs.iter().filter(|e| !e.contains("bolide_ddp_")).collect();
    assert!(http.len() >= 8, "{http:?}");
    for expr in http {
        let q = fill(expr, "rw-e2e");
        let v = query(p.port, &q, end);
        let zero = q.contains("bolide_http_errors_total") || q.contains("bolide_server_cpu_percent");
        assert!(v.is_finite() && (v > 0.0 || (zero && v == 0.0)), "{q}: {v}");
    }
    // Its responses stat is the document's total; its testid variable lists this run.
    let total = exprs.iter().find(|e| e.contains("max_over_time(bolide_http_responses_total")).unwrap();
    assert_eq!(query(p.port, &fill(total, "rw-e2e"), end), 4000.0);
    assert_eq!(testid_variable(), "{job=\"bolide\"}");
    let values = get(p.port, "/api/v1/label/testid/values?match[]={job=\"bolide\"}");
    assert!(values.contains("\"rw-e2e\""), "{values}");
}

#[test]
fn a_dead_receiver_leaves_the_run_whole_and_is_counted() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let port = common::free_port();
    let o = common::bolide(&[
        "http",
        "-n",
        "500",
        "-c",
        "2",
        "--rps",
        "400",
        "--out",
        &format!("prometheus-rw=http://127.0.0.1:{port}/api/v1/write"),
        "--json",
        json.to_str().unwrap(),
        &target.url("/"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.err.contains("not delivered"), "{}", o.err);
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc.summary.responses, 500);
    let out = &doc.outputs[0];
    assert_eq!((out.sent, out.dropped), (0, out.seconds), "{out:?}");
    assert!(out.retried >= out.seconds, "each second tried again: {out:?}");
    assert!(out.last_error.is_some());
}

#[test]
fn a_ddp_run_s_steps_and_users_come_back_by_promql() {
    let p = prometheus();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ddp.json");
    let begun = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["run", "tasks-reactive", "--target", &server.base_url(), "--arrival-rate", "5", "-d", "2s"])
        // Users that think stay alive across seconds' ends: the users-alive panel has some.
        .args(["--tasks", "2", "--think", "1s", "--out"])
        .arg(format!("prometheus-rw=http://127.0.0.1:{}/api/v1/write", p.port))
        .arg("--json")
        .arg(&json)
        .env("BOLIDE_TESTID", "ddp-e2e")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("ddp-result.schema.json", &text), Vec::<String>::new());
    let doc = bolide::stats::vu::VuDoc::from_json(&text).unwrap();
    let out = &doc.outputs[0];
    assert_eq!((out.dropped, out.sent), (0, out.seconds), "{out:?}");
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let sel = "{testid=\"ddp-e2e\"}";
    let at_end = |metric: &str| query(p.port, &format!("max_over_time({metric}{sel}[1h])"), end);
    assert_eq!(at_end("bolide_ddp_steps_total"), doc.summary.steps as f64);
    assert_eq!(at_end("bolide_ddp_users_completed_total"), doc.summary.users.completed as f64);
    // Each step's latency histogram counts that step's samples.
    let insert = doc.steps.iter().find(|s| s.name == "call insertTask").unwrap();
    let q = "histogram_count(bolide_ddp_step_latency_seconds{testid=\"ddp-e2e\",step=\"call insertTask\"})";
    assert_eq!(query(p.port, q, end), insert.count as f64);
    // The dashboard's DDP panels answer for this run (step errors may be none), and its testid
    // variable lists it.
    let exprs = dashboard_exprs();
    let ddp: Vec<&String> = exprs.iter().filter(|e| e.contains("bolide_ddp_")).collect();
    assert!(ddp.len() >= 4, "{ddp:?}");
    for expr in ddp {
        let q = fill(expr, "ddp-e2e");
        // As Grafana draws it: the largest value over the run's seconds (users alive is a gauge,
        // none alive after the run).
        let at = (0..=((end - begun).ceil() as u32)).map(|i| begun + f64::from(i));
        let v = at.filter_map(|t| common::prom::try_query(p.port, &q, t).ok()).fold(f64::NAN, f64::max);
        let zero = q.contains("bolide_ddp_step_errors_total");
        assert!(v.is_finite() && (v > 0.0 || (zero && v == 0.0)), "{q}: {v}");
        if q.contains("bolide_ddp_users_alive") {
            let most = doc.timeline.iter().map(|s| s.users_alive).max().unwrap_or(0);
            assert_eq!(v, most as f64, "{q}");
        }
    }
    let values = get(p.port, &format!("/api/v1/label/testid/values?match[]={}", testid_variable()));
    assert!(values.contains("\"ddp-e2e\""), "{values}");
}

/// Every panel's expression of the Grafana dashboard.
fn dashboard_exprs() -> Vec<String> {
    let path = format!("{}/../../docs/grafana/bolide.json", env!("CARGO_MANIFEST_DIR"));
    let board: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    board["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap().to_string()))
        .collect()
}

/// The series selector of the dashboard's `testid` variable (`label_values(SELECTOR, testid)`).
fn testid_variable() -> String {
    let path = format!("{}/../../docs/grafana/bolide.json", env!("CARGO_MANIFEST_DIR"));
    let board: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let q = board["templating"]["list"][1]["query"].as_str().unwrap().to_string();
    q.strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(", testid)"))
        .unwrap_or_else(|| panic!("{q}"))
        .to_string()
}

/// An expression with Grafana's variables as it fills them for run `testid`.
fn fill(expr: &str, testid: &str) -> String {
    expr.replace("$testid", testid).replace("$__rate_interval", "1m").replace("$__range", "1h")
}

/// Reads one request (head and body); its head, lowercased.
fn read_request(s: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return String::new(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    let mut have = got.len() - end;
    while have < length {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => have += n,
        }
    }
    head
}

fn answer(mut s: std::net::TcpStream, status: &str) {
    use std::io::Write;
    read_request(&mut s);
    let _ = s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
}

fn server_error(s: std::net::TcpStream) {
    answer(s, "500 Internal Server Error")
}

fn too_many(s: std::net::TcpStream) {
    answer(s, "429 Too Many Requests")
}

fn slow(mut s: std::net::TcpStream) {
    use std::io::Write;
    read_request(&mut s);
    std::thread::sleep(Duration::from_secs(6));
    let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
}

fn resets(mut s: std::net::TcpStream) {
    read_request(&mut s);
    common::reset(s);
}

fn wants_a_token(mut s: std::net::TcpStream) {
    use std::io::Write;
    let head = read_request(&mut s);
    let status =
        if head.contains("authorization: bearer s3cret-token\r\n") { "204 No Content" } else { "401 Unauthorized" };
    let _ = s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes());
}

#[test]
fn receivers_that_fail_answer_slowly_or_reset_never_change_the_run_and_are_counted() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let run = |out: Option<String>| {
        let json = dir.path().join("run.json");
        let mut args = vec!["http".to_string(), "-n".into(), "300".into(), "-c".into(), "2".into()];
        if let Some(o) = out {
            args.extend(["--out".into(), format!("prometheus-rw={o}")]);
        }
        args.extend(["--json".into(), json.display().to_string(), target.url("/")]);
        let o = common::bolide(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        let doc: bolide::stats::result::ResultDoc =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (doc.summary.responses, doc.summary.errors, doc.outputs.first().cloned())
    };
    let (responses, errors, _) = run(None);
    assert_eq!((responses, errors), (300, 0));
    for (behaviour, name, retried) in [
        (server_error as fn(std::net::TcpStream), "HTTP 500", true),
        (too_many, "HTTP 429", true),
        (resets, "reset", true),
        (slow, "slow", false),
    ] {
        let receiver = common::fake(behaviour);
        let (r, e, out) = run(Some(receiver.url("/api/v1/write")));
        // The run's own figures are those of a run without the output.
        assert_eq!((r, e), (responses, errors), "{name}");
        let out = out.unwrap();
        assert_eq!((out.sent, out.dropped), (0, out.seconds), "{name}: {out:?}");
        assert!(out.last_error.is_some(), "{name}");
        if retried {
            // Each second tried again three times (a long run's last seconds may be cut by the
            // 10 s the end gives the queue).
            assert!(out.retried >= 3 && out.retried <= 3 * out.seconds, "{name}: {out:?}");
        }
    }
}

#[test]
fn a_bearer_token_from_the_environment_is_sent_and_never_shown() {
    let target = ok_server();
    let receiver = common::fake(wants_a_token);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    for (token, sent) in [("s3cret-token", true), ("other-token", false)] {
        let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
            .args(["http", "-n", "100", "--out"])
            .arg(format!("prometheus-rw={}", receiver.url("/api/v1/write")))
            .arg("--json")
            .arg(&json)
            .arg(target.url("/"))
            .env("BOLIDE_RW_BEARER_TOKEN", token)
            .output()
            .unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{out}\n{err}");
        let text = std::fs::read_to_string(&json).unwrap();
        assert!(!text.contains(token) && !out.contains(token) && !err.contains(token), "the token shown");
        let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&text).unwrap();
        let r = &doc.outputs[0];
        if sent {
            assert_eq!((r.sent, r.dropped), (r.seconds, 0), "{r:?}");
        } else {
            // 401: refused, not tried again.
            assert_eq!((r.sent, r.dropped, r.retried), (0, r.seconds, 0), "{r:?}");
            assert_eq!(r.last_error.as_deref(), Some("HTTP 401"));
        }
    }
}

fn not_found(s: std::net::TcpStream) {
    common::answer_all(s, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
}

#[test]
fn statuses_error_classes_connections_and_each_url_come_back_by_promql() {
    let p = prometheus();
    let (ok, missing) = (ok_server(), common::fake(not_found));
    let broken = common::fake(resets);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let urls = [ok.url("/a?token=hidden"), missing.url("/b"), broken.url("/c")];
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "900", "-c", "3", "--out"])
        .arg(format!("prometheus-rw=http://127.0.0.1:{}/api/v1/write", p.port))
        .arg("--json")
        .arg(&json)
        .args(&urls)
        .env("BOLIDE_TESTID", "rw-breakdown")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc.summary.errors > 0, "the resetting target fails: {:?}", doc.summary.errors_by_class);
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let total = |metric: &str, labels: &str| {
        let q = format!("sum(max_over_time({metric}{{testid=\"rw-breakdown\"{labels}}}[1h]))");
        query(p.port, &q, end)
    };
    // Responses by status and errors by class are the document's, exactly.
    for (status, n) in &doc.summary.status {
        assert_eq!(total("bolide_http_responses_by_status_total", &format!(",status=\"{status}\"")), *n as f64);
    }
    for (class, n) in doc.summary.errors_by_class.iter().filter(|(_, n)| **n > 0) {
        assert_eq!(total("bolide_http_errors_by_class_total", &format!(",class=\"{class}\"")), *n as f64, "{class}");
    }
    assert_eq!(total("bolide_http_connects_total", ""), doc.summary.connects as f64);
    // Each URL its own series, labelled without its query string.
    for t in &doc.per_target {
        let label = t.url.split('?').next().unwrap();
        let sel = format!(",target=\"{label}\"");
        assert_eq!(total("bolide_http_target_responses_total", &sel), t.responses as f64, "{label}");
        if t.responses > 0 {
            let q = format!("histogram_count(bolide_http_target_latency_seconds{{testid=\"rw-breakdown\"{sel}}})");
            // Timed-out requests count in the histogram too; none here.
            assert_eq!(query(p.port, &q, end), t.responses as f64, "{label}");
        }
    }
    let values = get(p.port, "/api/v1/label/target/values");
    assert!(!values.contains("hidden"), "a query string in a label: {values}");
}

/// A metrics page on a server that keeps the connection open after each answer, whatever the
/// request asked: the scraper reads the whole answer and does not wait for a close.
fn metrics_page(s: std::net::TcpStream) {
    let body = "# TYPE app_queue gauge\napp_queue{job=\"worker\"} 7\n# TYPE app_requests_total counter\napp_requests_total 42\n";
    let head =
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n", body.len());
    common::answer_all(s, format!("{head}{body}").as_bytes())
}

#[test]
fn scraped_series_go_out_beside_the_load_as_gauges() {
    let p = prometheus();
    let target = ok_server();
    let app = common::fake(metrics_page);
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "2500", "-c", "2", "--rps", "1000", "--scrape"])
        .arg(format!("app={}", app.url("/metrics")))
        .arg("--out")
        .arg(format!("prometheus-rw=http://127.0.0.1:{}/api/v1/write", p.port))
        .arg(target.url("/"))
        .env("BOLIDE_TESTID", "rw-scraped")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    // The server's own label `job` is kept as `scraped_job` (job is the run's).
    let q =
        "max_over_time(bolide_scraped_app_queue{testid=\"rw-scraped\",endpoint=\"app\",scraped_job=\"worker\"}[1h])";
    assert_eq!(query(p.port, q, end), 7.0);
    let q = "max_over_time(bolide_scraped_app_requests_total{testid=\"rw-scraped\",endpoint=\"app\"}[1h])";
    assert_eq!(query(p.port, q, end), 42.0);
}

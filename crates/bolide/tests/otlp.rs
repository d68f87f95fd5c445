//! `--out otlp=URL` against a real receiver: the OpenTelemetry Collector (its OTLP receiver and
//! file exporter, built from the collector's Go modules by `tests/otelcol/`), run by the test on a
//! loopback port; the file it writes gives back bolide's totals exactly, and the exponential
//! histograms' 99th percentile falls in the bucket of the document's. The same run's remote write
//! to Prometheus agrees. Receivers that fail are counted and leave the run whole.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// The collector binary, built once per test run (`go build` is quick when nothing changed).
fn otelcol_binary() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = built.as_ref() {
        return p.clone();
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("otelcol-bolide");
    let src = format!("{}/tests/otelcol", env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .output()
        .expect("Go is needed to build the OpenTelemetry Collector for this test");
    assert!(o.status.success(), "go build in {src}: {}", String::from_utf8_lossy(&o.stderr));
    *built = Some(out.clone());
    out
}

struct Collector {
    child: Child,
    port: u16,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The collector on a free loopback port, its metrics written to a file, ready.
fn collector() -> Collector {
    collector_with("")
}

/// The same with `tls` (lines of its receiver's `tls:` section, indented) when not empty.
fn collector_with(tls: &str) -> Collector {
    let bin = otelcol_binary();
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics.jsonl");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n{tls}\
             exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n\
             \x20     receivers: [otlp]\n      exporters: [file]\n",
            file.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("collector.log")).unwrap();
    let child = Command::new(bin).arg("--config").arg(&config).stdout(Stdio::null()).stderr(log).spawn().unwrap();
    let c = Collector { child, port, file, _dir: dir };
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the collector never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    c
}

/// The requests the collector wrote, one JSON document per line.
fn written(c: &Collector) -> Vec<Value> {
    let text = std::fs::read_to_string(&c.file).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The data points of metric `name` under resources whose `testid` is `testid`, in order.
fn points(requests: &[Value], testid: &str, name: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for r in requests {
        for rm in r["resourceMetrics"].as_array().into_iter().flatten() {
            let attrs = rm["resource"]["attributes"].as_array().cloned().unwrap_or_default();
            let ours = attrs.iter().any(|a| a["key"] == "testid" && a["value"]["stringValue"] == testid);
            if !ours {
                continue;
            }
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten().filter(|m| m["name"] == name) {
                    for kind in ["sum", "gauge", "exponentialHistogram"] {
                        out.extend(m[kind]["dataPoints"].as_array().cloned().unwrap_or_default());
                    }
                }
            }
        }
    }
    out
}

fn int(v: &Value) -> u64 {
    v.as_str().and_then(|s| s.parse().ok()).or_else(|| v.as_u64()).unwrap_or(0)
}

/// A point's attribute `key`.
fn attribute<'a>(p: &'a Value, key: &str) -> Option<&'a str> {
    p["attributes"].as_array()?.iter().find(|a| a["key"] == key)?["value"]["stringValue"].as_str()
}

/// Waits (bounded) until the collector's file has a point of `name` for `testid` that `done` accepts.
fn wait_for(c: &Collector, testid: &str, name: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let all = written(c);
        if points(&all, testid, name).iter().any(&done) || Instant::now() > until {
            return all;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The bucket (lower, upper] in which an exponential histogram point's `q` quantile's rank falls.
fn quantile_bucket(p: &Value, q: f64) -> (f64, f64) {
    let scale = p["scale"].as_i64().unwrap() as i32;
    let base = 2f64.powf(2f64.powi(-scale));
    let count = int(&p["count"]) as f64;
    let offset = p["positive"]["offset"].as_i64().unwrap_or(0) as i32;
    let rank = (q * count).ceil();
    let mut seen = int(&p["zeroCount"]) as f64;
    for (i, n) in p["positive"]["bucketCounts"].as_array().unwrap().iter().enumerate() {
        seen += int(n) as f64;
        if seen >= rank {
            let index = offset + i as i32;
            return (base.powi(index), base.powi(index + 1));
        }
    }
    panic!("no bucket holds rank {rank}: {p}");
}

fn ok_server() -> common::Fake {
    common::fake(|s| common::answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

#[test]
fn an_http_run_s_totals_come_back_from_the_collector_s_file_and_agree_with_remote_write() {
    let c = collector();
    let p = common::prom::prometheus();
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "4000", "-c", "4", "--rps", "1500", "--monitor"])
        .arg(format!("tester={}", std::process::id()))
        .arg("--out")
        .arg(format!("otlp=http://127.0.0.1:{}", c.port))
        .arg("--out")
        .arg(format!("prometheus-rw=http://127.0.0.1:{}/api/v1/write", p.port))
        .arg("--json")
        .arg(&json)
        .arg(target.url("/"))
        .env("BOLIDE_TESTID", "otlp-e2e")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("result.schema.json", &text), Vec::<String>::new());
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&text).unwrap();
    let kinds: Vec<&str> = doc.outputs.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(kinds, ["otlp", "prometheus-rw"]);
    let out = &doc.outputs[0];
    assert_eq!((out.testid.as_str(), out.dropped, out.sent), ("otlp-e2e", 0, out.seconds), "{out:?}");
    assert_eq!(out.url, format!("http://127.0.0.1:{}/v1/metrics", c.port));
    assert_eq!(out.seconds as usize, doc.timeline.len());

    let all = wait_for(&c, "otlp-e2e", "bolide.http.responses", |p| int(&p["asInt"]) == 4000);
    // Cumulative sums: the last point is the run's total, exactly.
    let last = |name: &str| points(&all, "otlp-e2e", name).last().cloned().unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(int(&last("bolide.http.responses")["asInt"]), 4000);
    assert_eq!(int(&last("bolide.http.errors")["asInt"]), 0);
    assert_eq!(points(&all, "otlp-e2e", "bolide.http.responses").len() as u64, out.seconds);
    let h = last("bolide.http.latency");
    assert_eq!(int(&h["count"]), 4000);
    assert_eq!(h["scale"], 3);
    let (lo, hi) = quantile_bucket(&h, 0.99);
    let want = doc.summary.latency.p99_us as f64 / 1e6;
    assert!(lo < want * 1.000_001 && want <= hi * 1.000_001, "p99 {want} s outside ({lo}, {hi}]");
    // The histogram's sum is the run's latency total (microsecond HDR values, summed as seconds).
    let mean = h["sum"].as_f64().unwrap() / 4000.0;
    let doc_mean = doc.summary.latency.mean_us / 1e6;
    assert!((mean - doc_mean).abs() <= doc_mean * 0.01 + 2e-6, "mean {mean} vs {doc_mean}");
    // The watched process's memory as a gauge, its name an attribute.
    let rss = last("bolide.server.rss");
    assert_eq!(attribute(&rss, "process"), Some("tester"));
    assert!(rss["asDouble"].as_f64().unwrap() > 0.0, "{rss}");
    // The run's resource: service and testid.
    let resource = &all[0]["resourceMetrics"][0]["resource"]["attributes"];
    assert!(resource
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["key"] == "service.name" && a["value"]["stringValue"] == "bolide"));

    // The same run, by remote write: Prometheus has the same totals.
    let end = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let sel = "{testid=\"otlp-e2e\"}";
    let q = |e: &str| common::prom::query(p.port, e, end);
    assert_eq!(q(&format!("max_over_time(bolide_http_responses_total{sel}[1h])")), 4000.0);
    assert_eq!(q(&format!("histogram_count(bolide_http_latency_seconds{sel})")), 4000.0);
    assert_eq!(doc.outputs[1].sent, doc.outputs[1].seconds);
}

#[test]
fn a_ddp_run_s_steps_and_users_come_back_from_the_collector_s_file() {
    let c = collector();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ddp.json");
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["run", "tasks-reactive", "--target", &server.base_url(), "--arrival-rate", "5", "-d", "2s"])
        .args(["--tasks", "2", "--think", "0", "--out"])
        .arg(format!("otlp=http://127.0.0.1:{}/v1/metrics", c.port))
        .arg("--json")
        .arg(&json)
        .env("BOLIDE_TESTID", "otlp-ddp")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("ddp-result.schema.json", &text), Vec::<String>::new());
    let doc = bolide::stats::vu::VuDoc::from_json(&text).unwrap();
    let out = &doc.outputs[0];
    assert_eq!((out.kind.as_str(), out.dropped, out.sent), ("otlp", 0, out.seconds), "{out:?}");
    let steps = doc.summary.steps;
    let all = wait_for(&c, "otlp-ddp", "bolide.ddp.steps", |p| int(&p["asInt"]) == steps);
    let last = |name: &str| points(&all, "otlp-ddp", name).last().cloned().unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(int(&last("bolide.ddp.steps")["asInt"]), steps);
    assert_eq!(int(&last("bolide.ddp.users.completed")["asInt"]), doc.summary.users.completed);
    // Each step's histogram (its name an attribute) counts that step's samples.
    let insert = doc.steps.iter().find(|s| s.name == "call insertTask").unwrap();
    let hist = points(&all, "otlp-ddp", "bolide.ddp.step.latency");
    let last_insert = hist.iter().rev().find(|p| attribute(p, "step") == Some("call insertTask")).unwrap();
    assert_eq!(int(&last_insert["count"]), insert.count);
}

/// Reads a request; its head lowercased and its body.
fn read_request(s: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return (String::new(), Vec::new()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    while got.len() - end < length {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    (head, got[end..].to_vec())
}

fn answer(mut s: std::net::TcpStream, status: &str, body: &[u8]) {
    use std::io::Write;
    read_request(&mut s);
    let head =
        format!("HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n", body.len());
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
}

fn unavailable(s: std::net::TcpStream) {
    answer(s, "503 Service Unavailable", b"")
}

fn bad_request(s: std::net::TcpStream) {
    answer(s, "400 Bad Request", b"")
}

fn server_error(s: std::net::TcpStream) {
    // Not one of the codes OTLP says to try again.
    answer(s, "500 Internal Server Error", b"")
}

fn partly(s: std::net::TcpStream) {
    // partial_success { rejected_data_points: 2, error_message: "too old" }
    answer(s, "200 OK", &[0x0A, 11, 0x08, 2, 0x12, 7, b't', b'o', b'o', b' ', b'o', b'l', b'd'])
}

fn wants_a_token(mut s: std::net::TcpStream) {
    use std::io::Write;
    let (head, body) = read_request(&mut s);
    let ok = head.contains("authorization: bearer s3cret-otlp\r\n")
        && head.contains("content-type: application/x-protobuf\r\n")
        && head.starts_with("post /v1/metrics http/1.1")
        && !body.is_empty();
    let status = if ok { "200 OK" } else { "401 Unauthorized" };
    let _ = s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes());
}

/// A hostile receiver: takes the data, and says it rejected one point, echoing the authorization
/// it was sent, after a terminal escape that would retitle and clear a terminal.
fn echoes_the_token(mut s: std::net::TcpStream) {
    let (head, _) = read_request(&mut s);
    let auth = head.lines().find_map(|l| l.strip_prefix("authorization: ")).unwrap_or("none").trim().to_string();
    let message = format!("\u{1b}]0;pwned\u{7}\u{1b}[2Jrefused for {auth}");
    // partial_success(1) { rejected_data_points(1) = 1, error_message(2) = message }
    let mut inner = vec![0x08, 1, 0x12, message.len() as u8];
    inner.extend_from_slice(message.as_bytes());
    let mut body = vec![0x0A, inner.len() as u8];
    body.extend_from_slice(&inner);
    use std::io::Write;
    let head =
        format!("HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n", body.len());
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&body);
}

/// `bolide http -n 100 --out otlp=RECEIVER --json JSON TARGET` with `OTEL_EXPORTER_OTLP_HEADERS`
/// set, as a process (the variable is its own): the document's text, stdout and stderr.
fn run_with_headers(receiver: &str, json: &std::path::Path, target: &str, headers: &str) -> (String, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "100", "--out"])
        .arg(format!("otlp={receiver}"))
        .arg("--json")
        .arg(json)
        .arg(target)
        .env("OTEL_EXPORTER_OTLP_HEADERS", headers)
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "{out}\n{err}");
    (std::fs::read_to_string(json).unwrap(), out, err)
}

#[test]
fn a_receiver_that_echoes_the_token_keeps_neither_it_nor_its_escapes() {
    let target = ok_server();
    let receiver = common::fake(echoes_the_token);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let token = "s3cret-echoed";
    let (text, out, err) =
        run_with_headers(&receiver.url("/"), &json, &target.url("/"), &format!("Authorization=Bearer%20{token}"));
    for shown in [&text, &out, &err] {
        assert!(!shown.contains(token), "the echoed token was kept: {shown}");
        assert!(!shown.contains('\u{1b}') && !shown.contains("\\u001b"), "a raw escape was kept: {shown}");
    }
    let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&text).unwrap();
    let kept = doc.outputs[0].last_error.as_deref().unwrap_or_default();
    assert_eq!(kept, "the receiver rejected 1 points: \\u{1b}]0;pwned\\u{7}\\u{1b}[2Jrefused for <redacted>");
}

#[test]
fn receivers_that_fail_or_take_part_are_counted_and_the_run_is_whole() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str| {
        let json = dir.path().join("run.json");
        let o = common::bolide(&[
            "http",
            "-n",
            "300",
            "-c",
            "2",
            "--out",
            &format!("otlp={out}"),
            "--json",
            json.to_str().unwrap(),
            &target.url("/"),
        ]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        let doc: bolide::stats::result::ResultDoc =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (doc.summary.responses, doc.summary.errors, doc.outputs[0].clone(), o.err)
    };
    // 503 is tried again (three times a second); 400 and 500 are not.
    for (behaviour, name, retried) in [
        (unavailable as fn(std::net::TcpStream), "HTTP 503", true),
        (bad_request, "HTTP 400", false),
        (server_error, "HTTP 500", false),
    ] {
        let receiver = common::fake(behaviour);
        let (r, e, out, err) = run(&receiver.url("/v1/metrics"));
        assert_eq!((r, e), (300, 0), "{name}");
        assert_eq!((out.sent, out.dropped), (0, out.seconds), "{name}: {out:?}");
        assert_eq!(out.last_error.as_deref(), Some(name));
        assert!(err.contains("not delivered"), "{name}: {err}");
        if retried {
            assert!(out.retried >= 3 && out.retried <= 3 * out.seconds, "{name}: {out:?}");
        } else {
            assert_eq!(out.retried, 0, "{name}: {out:?}");
        }
    }
    // A partial success is delivery, and what was rejected is said.
    let receiver = common::fake(partly);
    let (_, _, out, _) = run(&receiver.url("/v1/metrics"));
    assert_eq!((out.sent, out.dropped), (out.seconds, 0), "{out:?}");
    assert_eq!(out.last_error.as_deref(), Some("the receiver rejected 2 points: too old"));
    // Down: every second dropped after its tries.
    let (r, _, out, _) = run(&format!("http://127.0.0.1:{}", common::free_port()));
    assert_eq!(r, 300);
    assert_eq!((out.sent, out.dropped), (0, out.seconds), "{out:?}");
}

#[test]
fn headers_from_the_environment_are_sent_and_never_shown() {
    let target = ok_server();
    let receiver = common::fake(wants_a_token);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    for (token, sent) in [("s3cret-otlp", true), ("other-otlp", false)] {
        let headers = format!("Authorization=Bearer%20{token},x-team=load");
        let (text, out, err) = run_with_headers(&receiver.url("/"), &json, &target.url("/"), &headers);
        assert!(!text.contains(token) && !out.contains(token) && !err.contains(token), "the token shown");
        let doc: bolide::stats::result::ResultDoc = serde_json::from_str(&text).unwrap();
        let r = &doc.outputs[0];
        if sent {
            assert_eq!((r.sent, r.dropped), (r.seconds, 0), "{r:?}");
        } else {
            assert_eq!((r.sent, r.dropped, r.retried), (0, r.seconds, 0), "{r:?}");
            assert_eq!(r.last_error.as_deref(), Some("HTTP 401"));
        }
    }
}

/// A CA and a certificate of it for 127.0.0.1, as PEM files in `dir`: (ca, cert, key).
fn certificates(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "bolide test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())];
    let cert = params.signed_by(&key, &issuer).unwrap();
    let paths = (dir.join("ca.pem"), dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

#[test]
fn an_https_receiver_is_written_to_with_its_ca_and_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let c = collector_with(&format!(
        "        tls:\n          cert_file: {}\n          key_file: {}\n",
        cert.display(),
        key.display()
    ));
    let target = ok_server();
    let json = dir.path().join("run.json");
    let run = |ca: Option<&PathBuf>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bolide"));
        cmd.args(["http", "-n", "300", "-c", "2", "--out"])
            .arg(format!("otlp=https://127.0.0.1:{}", c.port))
            .arg("--json")
            .arg(&json)
            .arg(target.url("/"))
            .env("BOLIDE_TESTID", "otlp-tls")
            .env_remove("OTEL_EXPORTER_OTLP_CERTIFICATE");
        if let Some(ca) = ca {
            cmd.env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let doc: bolide::stats::result::ResultDoc =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        doc.outputs[0].clone()
    };
    // With the CA: every second taken, and the collector has the run's total.
    let out = run(Some(&ca));
    assert_eq!((out.sent, out.dropped), (out.seconds, 0), "{out:?}");
    let all = wait_for(&c, "otlp-tls", "bolide.http.responses", |p| int(&p["asInt"]) == 300);
    let last = points(&all, "otlp-tls", "bolide.http.responses").last().cloned().unwrap();
    assert_eq!(int(&last["asInt"]), 300);
    // Without it the certificate is refused: every second dropped, none tried again, and said.
    let out = run(None);
    assert_eq!((out.sent, out.dropped, out.retried), (0, out.seconds, 0), "{out:?}");
    assert!(out.last_error.as_deref().unwrap_or("").contains("certificate"), "{out:?}");
    // A CA file that is not there is a usage error before the run.
    let o = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["http", "-n", "10", "--out"])
        .arg(format!("otlp=https://127.0.0.1:{}", c.port))
        .arg(target.url("/"))
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", dir.path().join("absent.pem"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the CA file") && err.contains("absent.pem"), "{err}");
}

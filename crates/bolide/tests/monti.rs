//! `--monti`: bolide as the Monti APM engine, driven by the agent's own client library
//! (`monti-apm-core` from npm, in `crates/refserver/tests/node/monti-agent.mjs`) with payloads
//! shaped as the agent's models build them: what it posted during the run is in the result
//! document and the report, counted exactly; wrong secrets, malformed and huge posts, clock-sync
//! floods and idle connections are refused or answered, and nothing of them is lost or kept.

mod common;

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bolide::stats::result::ResultDoc;

const BIN: &str = env!("CARGO_BIN_EXE_bolide");

/// The agent script, stopped when dropped.
struct Agent {
    child: Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent(port: u16, id: &str, secret: &str, busy: u32) -> Agent {
    common::in_node_setup();
    let mut child = Command::new("node")
        .args(["monti-agent.mjs", &format!("http://127.0.0.1:{port}"), id, secret, &busy.to_string(), "300"])
        .current_dir(common::node_dir())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node is needed for this test");
    let out = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    Agent { child, lines }
}

fn ok_server() -> common::Fake {
    common::fake(|s| common::answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

/// bolide as a child process (its environment is its own: the app's id and secret in it).
fn bolide_bin(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("MONTI_APP_ID")
        .env_remove("MONTI_APP_SECRET")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

fn finish(mut child: Child) -> (i32, String, String) {
    let mut out = String::new();
    let mut err = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code().unwrap_or(-1), out, err)
}

fn series<'a>(doc: &'a ResultDoc, metric: &str, label: (&str, &str)) -> &'a bolide::monitor::scrape::Series {
    let m = doc.scrape.iter().find(|r| r.name == "monti").expect("the monti endpoint in the document");
    m.series
        .iter()
        .find(|s| s.metric == metric && s.labels.get(label.0).map(String::as_str) == Some(label.1))
        .unwrap_or_else(|| panic!("{metric}{{{}={}}} in {:?}", label.0, label.1, m.series))
}

#[test]
fn what_monti_apm_core_posts_during_the_run_is_in_the_document_and_the_report() {
    let target = ok_server();
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let (json, html) = (dir.path().join("run.json"), dir.path().join("run.html"));
    // The agent starts first and retries its ping until bolide listens, as an app's agent does.
    let agent = agent(port, "app", "s3cret", 4);
    let dash = common::free_port();
    let events = std::thread::spawn(move || common::follow_events(dash));
    let run = bolide_bin(
        &[
            "http",
            "--rps",
            "20",
            "-c",
            "2",
            "-d",
            "8s",
            "--monti",
            &format!("127.0.0.1:{port}"),
            "--json",
            json.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            &format!("--dashboard=127.0.0.1:{dash}"),
            "--threshold",
            "monti.pub[\"fetchTasks\"].restime_p95<200ms",
            "--threshold",
            "monti.pub['fetchTasks'].observer_reuse>=50%",
            "--threshold",
            "monti.method['insertTask'].count>=12",
            &target.url("/"),
        ],
        &[("MONTI_APP_ID", "app"), ("MONTI_APP_SECRET", "s3cret")],
    );
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{out}\n{err}");
    let said: Vec<serde_json::Value> = agent.lines.try_iter().collect();
    assert_eq!(said.first().map(|v| v["connected"].clone()), Some(serde_json::Value::Bool(true)), "{said:?}");
    assert!(said.iter().any(|v| v["busy"] == 4), "the agent sent its four busy posts during the run: {said:?}");
    // The agent kept posting: its post after the load's end covers it.
    assert!(!err.contains("no post from the Monti agent"), "{err}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("result.schema.json", &text), Vec::<String>::new());
    let doc: ResultDoc = serde_json::from_str(&text).unwrap();
    let m = doc.scrape.iter().find(|r| r.name == "monti").unwrap();
    assert_eq!((m.via.as_deref(), m.errors, m.url.clone()), (Some("monti"), 0, format!("http://127.0.0.1:{port}")));
    assert!(m.scrapes >= 5, "four busy posts and idle ones: {}", m.scrapes);
    // Each busy post: insertTask 3 calls (4, 6, 40 ms), removeTask 2 (one failed), fetchTasks 2 subs
    // (12, 30 ms), one of two observer handles reused, 3 documents added live, a trace.
    let calls = |name| series(&doc, "monti_method_calls_total", ("method", name)).increase;
    assert_eq!((calls("insertTask"), calls("removeTask")), (Some(12.0), Some(8.0)));
    assert_eq!(series(&doc, "monti_method_errors_total", ("method", "removeTask")).increase, Some(4.0));
    assert_eq!(series(&doc, "monti_pub_subs_total", ("pub", "fetchTasks")).increase, Some(8.0));
    assert_eq!(series(&doc, "monti_pub_observer_handles_total", ("pub", "fetchTasks")).increase, Some(8.0));
    assert_eq!(series(&doc, "monti_pub_observer_handles_reused_total", ("pub", "fetchTasks")).increase, Some(4.0));
    assert_eq!(series(&doc, "monti_pub_documents_total", ("change", "added")).increase, Some(12.0));
    assert_eq!(series(&doc, "monti_pub_active_subs", ("pub", "fetchTasks")).max, Some(4.0));
    let traces = m.series.iter().find(|s| s.metric == "monti_traces_total").unwrap();
    assert_eq!(traces.increase, Some(4.0));
    // The sketches' observations, and their quantiles within the sketch's 2% (and the bucket's
    // interpolation): insertTask's 12 calls are 4 x (4, 6, 40) ms.
    let insert = series(&doc, "monti_method_response_seconds", ("method", "insertTask"));
    assert_eq!(insert.increase, Some(12.0));
    let [p50, _, p99] = insert.quantiles.unwrap();
    assert!((p50 - 0.006).abs() <= 0.006 * 0.05, "p50 {p50}");
    assert!((p99 - 0.040).abs() <= 0.040 * 0.05, "p99 {p99}");
    let pubs = series(&doc, "monti_pub_response_seconds", ("pub", "fetchTasks"));
    assert_eq!(pubs.increase, Some(8.0));
    // The system figures: sessions 4 in busy posts, 0 in idle ones; RSS 150.1 MiB rounded as sent.
    let sessions = m.series.iter().find(|s| s.metric == "monti_sessions").unwrap();
    assert_eq!(sessions.max, Some(4.0));
    assert_eq!(series(&doc, "monti_memory_bytes", ("kind", "rss")).max, Some(150.1 * 1024.0 * 1024.0));
    // Thresholds by name: fetchTasks's p95 (8 subscriptions, 4 of 30 ms), one handle of two reused.
    let verdict = |t: &str| doc.thresholds.iter().find(|v| v.threshold == t).unwrap_or_else(|| panic!("{t}"));
    let p95 = verdict("monti.pub[\"fetchTasks\"].restime_p95<200ms");
    assert!(p95.ok && (p95.value.unwrap() - 30.0).abs() <= 30.0 * 0.05, "{p95:?}");
    assert_eq!(verdict("monti.pub['fetchTasks'].observer_reuse>=50%").value, Some(50.0));
    assert_eq!(verdict("monti.method['insertTask'].count>=12").value, Some(12.0));
    // In the summary and the report.
    assert!(out.contains("The Monti agent's posts to monti"), "{out}");
    assert!(out.contains("monti_method_response_seconds{method=\"insertTask\"}"), "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("scrape-monti-1") && page.contains("monti_pub_response_seconds"), "the report's charts");
    // And on the live dashboard while the load ran: its last snapshot has the agent's series.
    let (snapshots, done, _, last) = events.join().unwrap();
    assert!(snapshots >= 3 && done, "{snapshots} snapshots, done: {done}");
    let last: serde_json::Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last:.300}"));
    let charts: Vec<&str> = last["sections"][0]["charts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .filter(|id| id.starts_with("scrape-monti-"))
        .collect();
    assert!(charts.len() >= 4, "the agent's series live: {charts:?}");
}

/// A raw request to the endpoint on a connection of its own; the status line's code.
fn status(port: u16, raw: &[u8]) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn wait_listening(port: u16) {
    let until = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "bolide never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn wrong_secrets_malformed_huge_posts_and_floods_are_refused_and_the_run_goes_on() {
    let target = ok_server();
    let port = common::free_port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let run = bolide_bin(
        &[
            "http",
            "--rps",
            "10",
            "-c",
            "1",
            // Room for a node agent's start and a thousand syncs on a busy machine before the
            // good post.
            "-d",
            "15s",
            "--monti",
            &format!("127.0.0.1:{port}"),
            "--threshold",
            "monti.method[\"insertTask\"].count>7",
            "--json",
            json.to_str().unwrap(),
            &target.url("/"),
        ],
        &[("MONTI_APP_ID", "app"), ("MONTI_APP_SECRET", "right")],
    );
    wait_listening(port);
    // The agent's own client with the wrong secret is told it is unauthorized and gives up.
    let wrong = agent(port, "app", "wrong", 1);
    let said = wrong.lines.recv_timeout(Duration::from_secs(30)).expect("the agent says how it went");
    assert_eq!(said["error"], "Unauthorized", "{said}");
    let auth = "kadira-app-id: app\r\nkadira-app-secret: right\r\n";
    let post = |body: &str| {
        format!("POST / HTTP/1.1\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    };
    // Idle connections beyond any agent's (a slot each, closed when idle too long).
    let idle: Vec<TcpStream> = (0..30).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    assert_eq!(status(port, post("{\"methodMetrics\": [").as_bytes()), 400);
    assert_eq!(status(port, post("\"a string\"").as_bytes()), 400);
    // 17 MiB announced: refused before it is read.
    let huge = format!("POST / HTTP/1.1\r\n{auth}Content-Length: {}\r\n\r\n", 17 << 20);
    assert_eq!(status(port, huge.as_bytes()), 413);
    // Clock-sync abuse: a thousand syncs on one kept-alive connection, each answered.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&b"GET /simplentp/sync HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000)).unwrap();
    s.write_all(b"GET /simplentp/sync HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut answers = String::new();
    let _ = s.read_to_string(&mut answers);
    assert_eq!(answers.matches("HTTP/1.1 200 OK").count(), 1001);
    // A good post after all that is kept.
    std::thread::sleep(Duration::from_millis(500));
    let good = serde_json::json!({ "methodMetrics": [{ "methods": { "insertTask": { "count": 7 } } }] });
    assert_eq!(status(port, post(&good.to_string()).as_bytes()), 200);
    drop(idle);
    let (code, out, err) = finish(run);
    // The threshold on what was posted judged it: 7 calls, not more than 7.
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("monti.method[\"insertTask\"].count>7"), "{out}");
    // Nothing of the refused requests is printed but why; never the secret.
    assert!(!err.contains("right") && !out.contains("right") && !err.contains("wrong"), "{err}");
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains("right"), "the secret is not in the document");
    let doc: ResultDoc = serde_json::from_str(&text).unwrap();
    let m = doc.scrape.iter().find(|r| r.name == "monti").unwrap();
    // The 401 of the agent's ping (it gives up after one), two 400s, the 413.
    assert_eq!((m.scrapes, m.errors), (1, 4), "{:?}", m.last_error);
    assert_eq!(series(&doc, "monti_method_calls_total", ("method", "insertTask")).increase, Some(7.0));
    assert_eq!(doc.summary.errors, 0);
}

#[test]
fn monti_s_flags_are_checked() {
    for (args, says) in [
        (vec!["--monti", "nowhere:x"], "not HOST:PORT"),
        (vec!["--monti", "127.0.0.1:1", "--scrape", "monti=http://127.0.0.1:9/metrics"], "monti is the name"),
    ] {
        let mut all = vec!["http", "-n", "1"];
        all.extend(args);
        all.push("http://127.0.0.1:9/");
        let o = common::bolide(&all);
        assert_eq!(o.code, 2, "{}", o.err);
        assert!(o.err.contains(says), "{}", o.err);
    }
}

#[test]
fn a_spawned_app_s_agent_is_given_the_endpoint_an_app_and_a_post_each_interval() {
    common::in_node_setup();
    let (port, app) = (common::free_port(), common::free_port());
    // The "app": the agent script reading its settings from the environment, beside a plain HTTP
    // server that answers the ready URL and the load.
    let spawn = format!(
        "cd '{}' && (node monti-agent.mjs env 2 &) && exec python3 -m http.server {app} --bind 127.0.0.1",
        common::node_dir().display()
    );
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let run = bolide_bin(
        &[
            "http",
            "--rps",
            "10",
            "-c",
            "1",
            "-d",
            "6s",
            "--spawn",
            &spawn,
            "--ready-url",
            &format!("http://127.0.0.1:{app}/"),
            "--monitor-interval",
            "500ms",
            "--monti",
            &format!("127.0.0.1:{port}"),
            "--json",
            json.to_str().unwrap(),
            &format!("http://127.0.0.1:{app}/"),
        ],
        &[],
    );
    let (code, out, err) = finish(run);
    assert_eq!(code, 0, "{out}\n{err}");
    let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let m = doc.scrape.iter().find(|r| r.name == "monti").unwrap();
    // Let in with the id and secret bolide gave it, posting each second (the monitor interval, a
    // second at least; the agent's own default is 20 s): several posts in six seconds.
    assert_eq!(m.errors, 0, "{:?}", m.last_error);
    // (At least two: how many fit in six seconds depends on how soon the agent is up.)
    assert!(m.scrapes >= 2, "{} posts", m.scrapes);
    assert!(m.series.iter().any(|s| s.metric == "monti_sessions"), "{:?}", m.series);
}

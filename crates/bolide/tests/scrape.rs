//! `--scrape`: a real Prometheus endpoint (a Node server exporting with prom-client, from npm)
//! read while bolide loads it, its counter's increase equal to the requests bolide made, its
//! histogram's quantiles where the server put its observations; endpoints that refuse or speak
//! garbage are said and the run goes on.

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use bolide::stats::result::ResultDoc;
use common::bolide;

/// The Node metrics server (`metrics.mjs`), stopped when dropped.
struct Exporter {
    child: std::process::Child,
    port: u16,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn exporter() -> Exporter {
    common::in_node_setup();
    let mut child = Command::new("node")
        .arg("metrics.mjs")
        .current_dir(common::node_dir())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node is needed for this test");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = serde_json::from_str::<serde_json::Value>(&line).unwrap()["port"].as_u64().unwrap() as u16;
    Exporter { child, port }
}

#[test]
fn a_prom_client_counter_grows_by_exactly_the_requests_made() {
    let e = exporter();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let base = format!("http://127.0.0.1:{}", e.port);
    let o = bolide(&[
        "http",
        "-n",
        "300",
        "-c",
        "4",
        "--scrape",
        &format!("app={base}/metrics"),
        "--monitor-interval",
        "200ms",
        "--json",
        json.to_str().unwrap(),
        &format!("{base}/hit"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&json).unwrap();
    // The document, scrape and all, is what the published schema says.
    assert_eq!(common::schema_problems("result.schema.json", &text), Vec::<String>::new());
    let doc: ResultDoc = serde_json::from_str(&text).unwrap();
    assert_eq!(doc.summary.responses, 300);
    let s = &doc.scrape[0];
    assert_eq!((s.name.as_str(), s.errors), ("app", 0), "{:?}", s.last_error);
    assert!(s.t.len() >= 2, "read before and after the load: {:?}", s.t);
    let find = |m: &str| s.series.iter().find(|x| x.metric == m).unwrap_or_else(|| panic!("{m} in {:?}", s.series));
    let hits = find("hits_total");
    assert_eq!(hits.labels.get("route").map(String::as_str), Some("/hit"));
    assert_eq!(hits.increase, Some(300.0), "the server counted what bolide sent");
    // 300 observations of 3 ms: all in the (2 ms, 5 ms] bucket.
    let h = find("hit_seconds");
    assert_eq!(h.increase, Some(300.0));
    let [p50, _, p99] = h.quantiles.unwrap();
    assert!((0.002..=0.005).contains(&p50) && (0.002..=0.005).contains(&p99), "{p50} {p99}");
    // prom-client's default metrics are kept too, with their kinds.
    assert_eq!(find("process_cpu_user_seconds_total").kind, Some(bolide::monitor::scrape::Kind::Counter));
    assert!(find("nodejs_heap_size_used_bytes").mean.is_some_and(|m| m > 0.0));
    // The summary says it.
    assert!(o.out.contains("Scraped app (") && o.out.contains("hits_total{route=\"/hit\"}"), "{}", o.out);
    assert!(o.out.contains("+300 ("), "{}", o.out);
    // The report draws them on the run's seconds.
    let html = dir.path().join("r.html");
    let r = bolide(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let page = std::fs::read_to_string(&html).unwrap();
    // Well-known series first (prom-client's process and Node.js ones), then what moved: the histogram.
    assert!(page.contains("\"scrape-app-1\"") && page.contains("\"title\":\"app: hit_seconds\""), "no scrape chart");

    // A second run of the same plan: compare puts the server's event-loop p99 and GC time (prom-client's) beside
    // the client's numbers.
    let json2 = dir.path().join("run2.json");
    let o2 = bolide(&[
        "http",
        "-n",
        "300",
        "-c",
        "4",
        "--scrape",
        &format!("app={base}/metrics"),
        "--monitor-interval",
        "200ms",
        "--json",
        json2.to_str().unwrap(),
        &format!("{base}/hit"),
    ]);
    assert_eq!(o2.code, 0, "{}", o2.err);
    let c = bolide(&["compare", json.to_str().unwrap(), json2.to_str().unwrap(), "--format", "md"]);
    assert_eq!(c.code, 0, "{}", c.err);
    let row = |name: &str| c.out.lines().find(|l| l.starts_with(&format!("| {name} "))).map(str::to_string);
    let el = row("Event-loop p99").unwrap_or_else(|| panic!("{}", c.out));
    assert!(el.contains(" ms ") && el.contains("event-loop p99"), "{el}");
    assert!(row("GC time").is_some(), "{}", c.out);
    assert!(c.out.contains("| Event loop p99 | GC "), "the runs' table has the columns: {}", c.out);

    // Only what --scrape-match names, up to --scrape-limit.
    let o = bolide(&[
        "http",
        "-n",
        "10",
        "--scrape",
        &format!("app={base}"),
        "--scrape-match",
        "^(hits|hit_seconds)",
        "--scrape-limit",
        "1",
        "--json",
        json.to_str().unwrap(),
        &format!("{base}/hit"),
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc.scrape[0].series.len(), 1);
    // The matching series past the limit (hits_total and three of hit_seconds) and prom-client's
    // defaults, each counted once.
    assert!(doc.scrape[0].dropped_series > 4, "{:?}", doc.scrape[0]);

    // Thresholds on scraped series: the counter's increase holds, the histogram's p99 (3 ms) is
    // over 1 ms: exit 1, both verdicts recorded with their values.
    let o = bolide(&[
        "http",
        "-n",
        "50",
        "--scrape",
        &format!("app={base}"),
        "--threshold",
        "scrape.app[\"hits_total\"].increase>=50",
        "--threshold",
        "scrape.app['hit_seconds'].p99<0.001",
        "--json",
        json.to_str().unwrap(),
        &format!("{base}/hit"),
    ]);
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let v: Vec<(bool, Option<f64>)> = doc.thresholds.iter().map(|t| (t.ok, t.value)).collect();
    assert_eq!(v[0], (true, Some(50.0)), "{:?}", doc.thresholds);
    assert!(!v[1].0 && v[1].1.is_some_and(|p99| p99 > 0.002 && p99 <= 0.005), "{:?}", doc.thresholds);
    let o = bolide(&["http", "-n", "1", "--threshold", "scrape.db[\"x\"].max<1", &format!("{base}/hit")]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("no endpoint named \"db\" is scraped"), "{}", o.err);
}

#[test]
fn endpoints_that_refuse_or_speak_garbage_are_said_and_the_run_goes_on() {
    let e = exporter();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{}", e.port);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "http",
        "-n",
        "20",
        "--scrape",
        &format!("gone=http://127.0.0.1:{closed}/metrics"),
        "--scrape",
        // The hit route answers "ok": no sample in it.
        &format!("odd={base}/hit"),
        "--json",
        json.to_str().unwrap(),
        &format!("{base}/hit"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(
        o.err.contains(&format!("warning: --scrape gone=http://127.0.0.1:{closed}/metrics: never read")),
        "{}",
        o.err
    );
    let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let gone = doc.scrape.iter().find(|s| s.name == "gone").unwrap();
    assert!(gone.errors >= 2 && gone.t.is_empty() && gone.last_error.is_some(), "{gone:?}");
    let odd = doc.scrape.iter().find(|s| s.name == "odd").unwrap();
    assert!(odd.series.is_empty() && odd.errors == 0, "{odd:?}");
    // Bad flags are usage errors.
    for (args, says) in [
        (vec!["--scrape", "app"], "must look like NAME=URL"),
        (vec!["--scrape", "app=https://127.0.0.1/metrics"], "only http:// endpoints"),
        (vec!["--scrape", &format!("app={base}"), "--scrape-match", "("], "is not a regular expression"),
    ] {
        let mut argv = vec!["http", "-n", "1"];
        argv.extend(args.iter().map(|s| &**s));
        let url = format!("{base}/hit");
        argv.push(&url);
        let o = bolide(&argv);
        assert_eq!(o.code, 2, "{argv:?}");
        assert!(o.err.contains(says), "{}", o.err);
    }
}

#[test]
fn a_ddp_run_keeps_the_scraped_series_too() {
    let e = exporter();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "run",
        "sub-churn",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "20",
        "-d",
        "300ms",
        "--scrape",
        &format!("exporter=http://127.0.0.1:{}/metrics", e.port),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(common::schema_problems("ddp-result.schema.json", &text), Vec::<String>::new());
    let doc = bolide::stats::vu::VuDoc::from_json(&text).unwrap();
    let s = &doc.scrape[0];
    assert!(s.t.len() >= 2 && s.errors == 0, "{s:?}");
    assert!(s.series.iter().any(|x| x.metric == "process_resident_memory_bytes" && x.max.is_some_and(|m| m > 1e6)));
    assert!(o.out.contains("Scraped exporter ("), "{}", o.out);
}

/// What an endpoint answers to its n-th scrape.
type Body = fn(u64) -> String;

/// A Prometheus endpoint on 127.0.0.1:0 that answers each scrape with `body(n)` (n counts the
/// scrapes from 0), whole, then closes.
fn hostile_endpoint(body: Body) -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/metrics", l.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { continue };
            let text = body(n as u64);
            std::thread::spawn(move || {
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head);
                let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", text.len());
                let _ = s.write_all(text.as_bytes());
            });
        }
    });
    url
}

/// Endpoints that would take bolide's memory or time: many series, series of new names at every
/// scrape, a histogram of hundreds of thousands of buckets, buckets bounded by NaN. Each run keeps
/// what its limits allow, counts the rest, and writes a document that `bolide report` reads back.
#[test]
fn hostile_endpoints_are_bounded_and_their_documents_read_back() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let target = format!("{}/ok", server.base_url());
    let cases: [(&str, Body); 4] = [
        ("many series", |_| (0..300_000).map(|i| format!("series_{i}{{a=\"{i}\"}} {i}\n")).collect()),
        ("new names", |n| (0..20_000).map(|i| format!("gen_{n}_{i} 1\n")).collect()),
        ("huge histogram", |n| {
            let mut t = String::from("# TYPE h histogram\n");
            for i in 1..=200_000u64 {
                t.push_str(&format!("h_bucket{{le=\"{i}\"}} {}\n", i * (n + 1)));
            }
            t + &format!("h_bucket{{le=\"+Inf\"}} {}\nh_count {}\n", 200_000 * (n + 1), 200_000 * (n + 1))
        }),
        ("NaN buckets", |n| {
            format!("# TYPE x histogram\nx_bucket{{le=\"NaN\"}} {n}\nx_bucket{{le=\"1\"}} NaN\nx_bucket{{le=\"+Inf\"}} {n}\n")
        }),
    ];
    for (name, body) in cases {
        let url = hostile_endpoint(body);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("run.json");
        let o = bolide(&[
            "http",
            "-d",
            "1s",
            "-c",
            "1",
            "--scrape",
            &format!("app={url}"),
            "--monitor-interval",
            "300ms",
            "--json",
            json.to_str().unwrap(),
            &target,
        ]);
        assert_eq!(o.code, 0, "{name}: {}\n{}", o.out, o.err);
        let doc: ResultDoc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let r = &doc.scrape[0];
        assert_eq!(r.errors, 0, "{name}: {:?}", r.last_error);
        assert!(r.series.len() <= 500, "{name}: {}", r.series.len());
        match name {
            "many series" => assert_eq!(r.dropped_series, 300_000 - 500, "{name}"),
            // Names change at every scrape: at least one scrape's worth counted, none kept past
            // the limit.
            "new names" => assert!(r.dropped_series >= 20_000 - 500, "{name}: {}", r.dropped_series),
            "huge histogram" => {
                let h = r.series.iter().find(|s| s.metric == "h").unwrap();
                assert!(h.buckets.len() <= 256, "{name}: {}", h.buckets.len());
                assert!(r.dropped_buckets >= 200_000 - 256, "{name}: {}", r.dropped_buckets);
            }
            _ => {
                let x = r.series.iter().find(|s| s.metric == "x").unwrap();
                assert!(x.buckets.iter().all(|(le, c)| le.is_finite() && c.is_finite()), "{name}: {:?}", x.buckets);
            }
        }
        // What bolide wrote, bolide reads: the report of the run is made.
        let html = dir.path().join("r.html");
        let o = bolide(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{name}: {}", o.err);
    }
}

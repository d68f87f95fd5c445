//! `bolide http` end to end, in-process, against servers started by the tests on 127.0.0.1.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

fn refserver() -> refserver::Server {
    refserver::Server::start(refserver::Config::default()).unwrap()
}

#[test]
fn exact_request_count_against_the_reference_server() {
    let server = refserver();
    let url = format!("{}/ok", server.base_url());
    let (o, doc) = http_json(&["-n", "1000", "-c", "10", "-t", "2", &url]);
    assert_eq!(doc.summary.responses, 1000);
    assert_eq!(doc.summary.errors, 0);
    assert_eq!(doc.summary.sent, 1000);
    assert_eq!(doc.summary.status["200"], 1000);
    assert_eq!(server.requests(), 1000, "the server saw exactly what bolide sent");
    // Keep-alive: one connection per slot, plus the reachability probe before the run.
    assert_eq!(doc.summary.connects, 10);
    assert_eq!(server.connections(), 11);
    // Each response to /ok is a head plus the 2-byte body.
    assert_eq!(doc.summary.bytes_in % 1000, 0);
    assert!(o.out.contains("1,000 responses"), "{}", o.out);
    let timeline_total: u64 = doc.timeline.iter().map(|s| s.responses).sum();
    assert_eq!(timeline_total, 1000, "the timeline accounts for every response");
}

#[test]
fn several_urls_share_the_connections_and_their_counts_add_up() {
    let server = refserver();
    let urls = [
        format!("{}/ok", server.base_url()),
        format!("{}/bytes/1000", server.base_url()),
        format!("{}/status/503", server.base_url()),
    ];
    let (o, doc) = http_json(&["-n", "900", "-c", "6", "-t", "2", &urls[0], &urls[1], &urls[2]]);
    assert_eq!(doc.per_target.len(), 3);
    let per: Vec<u64> = doc.per_target.iter().map(|t| t.responses).collect();
    assert_eq!(per.iter().sum::<u64>(), 900, "{per:?}");
    assert!(per.iter().all(|&n| n > 0), "round-robin gives every URL connections: {per:?}");
    assert_eq!(doc.per_target[2].status["503"], per[2]);
    assert_eq!(doc.summary.non_2xx_3xx, per[2]);
    assert!(doc.per_target[1].bytes_in >= per[1] * 1000);
    assert_eq!(server.requests(), 900);
    assert!(o.out.contains("/bytes/1000"), "per-URL table printed:\n{}", o.out);
}

#[test]
fn no_keepalive_opens_a_connection_per_request() {
    let server = refserver();
    let url = format!("{}/ok", server.base_url());
    let (_, doc) = http_json(&["-n", "200", "-c", "4", "--no-keepalive", &url]);
    assert_eq!(doc.summary.responses, 200);
    assert_eq!(doc.summary.connects, 200);
    assert_eq!(server.connections(), 201, "200 plus the reachability probe");
    assert!(!doc.settings.keep_alive);
}

#[test]
fn post_bodies_and_head_requests() {
    let server = refserver();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, br#"{"hello":"world"}"#).unwrap();
    let url = format!("{}/ok", server.base_url());
    let (_, doc) = http_json(&[
        "-n",
        "50",
        "-c",
        "2",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "-H",
        "Content-Type: application/json",
        &url,
    ]);
    assert_eq!((doc.summary.responses, doc.settings.body_bytes), (50, 17));
    // HEAD of a 100 kB resource: only heads come back, and the parser must not wait for a body.
    let url = format!("{}/bytes/100000", server.base_url());
    let (_, doc) = http_json(&["-n", "20", "-c", "2", "-m", "HEAD", "--timeout", "2s", &url]);
    assert_eq!((doc.summary.responses, doc.summary.errors), (20, 0));
    assert!(doc.summary.bytes_in < 20 * 1000, "heads only: {}", doc.summary.bytes_in);
    assert_eq!(server.requests(), 70);
}

#[test]
fn chunked_and_huge_bodies_are_streamed() {
    let chunked = fake(|s| {
        answer_all(s, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n")
    });
    let (_, doc) = http_json(&["-n", "100", "-c", "2", &chunked.url("/")]);
    assert_eq!((doc.summary.responses, doc.summary.errors), (100, 0));
    assert_eq!(chunked.accepted.load(std::sync::atomic::Ordering::Relaxed), 3, "keep-alive over chunked bodies");

    let server = refserver();
    let url = format!("{}/bytes/{}", server.base_url(), 64 << 20);
    let (_, doc) = http_json(&["-n", "4", "-c", "2", &url]);
    assert_eq!(doc.summary.responses, 4);
    assert!(doc.summary.bytes_in > 4 * (64 << 20), "{}", doc.summary.bytes_in);
}

#[test]
fn misbehaving_servers_are_counted_by_class_and_the_run_goes_on() {
    // Each row: server behaviour, error class expected for every request.
    type Behaviour = fn(TcpStream);
    let rows: [(Behaviour, &str); 6] = [
        // Garbage instead of a status line.
        (
            |mut s| {
                while read_head(&mut s) {
                    let _ = s.write_all(b"SSH-2.0-OpenSSH\r\n\r\n");
                }
            },
            "malformed",
        ),
        // A head far larger than the limit.
        (
            |mut s| {
                if read_head(&mut s) {
                    let _ =
                        s.write_all(format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "a".repeat(200_000)).as_bytes());
                }
            },
            "malformed",
        ),
        // Closes mid-body.
        (
            |mut s| {
                if read_head(&mut s) {
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this");
                }
            },
            "closed",
        ),
        // Closes right after reading the request.
        (
            |mut s| {
                read_head(&mut s);
            },
            "closed",
        ),
        // Resets after reading the request.
        (
            |mut s| {
                read_head(&mut s);
                reset(s);
            },
            "reset",
        ),
        // Reads and never answers.
        (
            |mut s| {
                read_head(&mut s);
                sleep_ms(3_000);
            },
            "timeout",
        ),
    ];
    for (i, (behaviour, want)) in rows.into_iter().enumerate() {
        let server = fake(behaviour);
        let (o, doc) = http_json(&["-n", "12", "-c", "3", "--timeout", "300ms", &server.url("/")]);
        assert_eq!(doc.summary.responses, 0, "row {i}");
        assert_eq!(class(&doc, want), 12, "row {i}: {:?}\n{}", doc.summary.errors_by_class, o.err);
        assert_eq!(doc.summary.errors, 12, "row {i}");
        assert!(o.err.contains(&format!("first {want} error")), "row {i}: {}", o.err);
        // Each failed connection was replaced by a new one.
        assert!(server.accepted.load(std::sync::atomic::Ordering::Relaxed) >= 12, "row {i}");
    }
}

#[test]
fn a_timed_run_against_a_stalled_server_ends_on_time() {
    let stall = fake(|mut s| {
        read_head(&mut s);
        sleep_ms(20_000);
    });
    let begin = Instant::now();
    let (_, doc) = http_json(&["-d", "1s", "-c", "4", "--timeout", "30s", &stall.url("/")]);
    // Well before the server's 20 s stall (or the 30 s timeout) would have ended it.
    assert!(begin.elapsed() < Duration::from_secs(15), "took {:?}", begin.elapsed());
    assert_eq!(doc.summary.responses, 0);
    assert_eq!(doc.summary.unfinished, 4, "the four stalled requests are reported as cut off");
}

#[test]
fn an_unreachable_url_among_others_is_counted_not_fatal() {
    let server = refserver();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/", dead.local_addr().unwrap());
    drop(dead);
    let ok = format!("{}/ok", server.base_url());
    let (_, doc) = http_json(&["-n", "100", "-c", "2", "-t", "1", &ok, &dead_url]);
    assert_eq!(doc.per_target[0].responses + doc.per_target[1].errors, 100);
    assert!(doc.per_target[0].responses > 0);
    assert_eq!(doc.per_target[1].errors_by_class["connect"], doc.per_target[1].errors);
    assert!(doc.per_target[1].errors > 0);
}

#[test]
fn gnuplot_file_has_ab_header_and_one_line_per_request() {
    let server = refserver();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot.tsv");
    let url = format!("{}/ok", server.base_url());
    let o = bolide(&["http", "-n", "500", "-c", "5", "-t", "2", "--gnuplot", plot.to_str().unwrap(), &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    let text = std::fs::read_to_string(&plot).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "starttime\tseconds\tctime\tdtime\tttime\twait");
    assert_eq!(lines.len(), 501);
    for line in &lines[1..] {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "{line}");
        let n: Vec<u64> = f[1..].iter().map(|x| x.parse().unwrap()).collect();
        assert_eq!(n[1] + n[2], n[3].max(n[1]), "ctime + dtime = ttime: {line}");
        assert!(n[4] <= n[3], "wait within total: {line}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no part files left behind");
}

#[test]
fn ctrl_c_stops_the_run_and_still_reports() {
    let server = refserver();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let plot = dir.path().join("p.tsv");
    let cancel = tokio_util::sync::CancellationToken::new();
    let c = cancel.clone();
    std::thread::spawn(move || {
        sleep_ms(700);
        c.cancel();
    });
    let url = format!("{}/delay/5", server.base_url());
    let begin = Instant::now();
    let o = bolide_with_cancel(
        &["http", "-d", "60s", "-c", "4", "--json", json.to_str().unwrap(), "--gnuplot", plot.to_str().unwrap(), &url],
        &cancel,
    );
    assert!(begin.elapsed() < Duration::from_secs(10), "stopped early: {:?}", begin.elapsed());
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("interrupted"), "{}", o.out);
    let doc = read_doc(&json);
    assert!(doc.interrupted);
    assert!(doc.summary.responses > 0);
    let lines = std::fs::read_to_string(&plot).unwrap().lines().count() as u64;
    assert_eq!(lines, doc.summary.responses + 1);
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad_json = dir.path().join("missing/dir/r.json");
    // Each row: arguments, text the message must contain.
    let rows: Vec<(Vec<&str>, &str)> = vec![
        (vec!["http", "--bogus", "http://127.0.0.1:1/"], "--bogus"),
        (vec!["http", "-d", "1s", "-n", "5", "http://127.0.0.1:1/"], "cannot be used with"),
        (vec!["http", "-b", "x", "--body-file", "f", "http://127.0.0.1:1/"], "cannot be used with"),
        (vec!["http", "not a url"], "no scheme"),
        (vec!["http", "-c", "x", "http://127.0.0.1:1/"], "invalid value 'x'"),
        (vec!["http", "--json", bad_json.to_str().unwrap(), "http://127.0.0.1:1/"], "missing/dir"),
        (vec!["http"], "URL"),
    ];
    for (args, needle) in rows {
        let o = bolide(&args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(needle), "{args:?}: {}", o.err);
    }
}

#[test]
fn nothing_reachable_exits_3() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", dead.local_addr().unwrap());
    drop(dead);
    let o = bolide(&["http", "-n", "10", &url]);
    assert_eq!(o.code, 3, "{}", o.err);
    assert!(o.err.contains("no target is reachable"), "{}", o.err);
    assert!(o.err.contains("refused"), "{}", o.err);
}

#[test]
fn keep_alive_connections_closed_while_idle_are_retried_and_counted() {
    // Like a server whose keep-alive timeout ends each connection after one answer: it promises
    // keep-alive, answers, then closes. The next request on that connection finds it dead before
    // any byte of a response; a client retries that on a new connection.
    let server = fake(|mut s| {
        if read_head(&mut s) {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nOK");
            sleep_ms(20);
        }
    });
    let (_, doc) = http_json(&["-n", "40", "-c", "2", "-t", "1", &server.url("/")]);
    assert_eq!((doc.summary.responses, doc.summary.errors), (40, 0), "{:?}", doc.summary.errors_by_class);
    assert_eq!(doc.summary.connects, 40, "one connection per answer");
    // Every resend is counted: 2 connections' first requests, then one retry per answer.
    assert!((36..=40).contains(&doc.summary.retries), "{}", doc.summary.retries);
    assert_eq!(doc.per_target[0].retries, doc.summary.retries);
    assert!(doc.settings.retry_closed);
}

/// Requests read by [`every_second_request_dropped`], over all its connections.
static READ_BY_DROPPER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Answers the first request of each connection (keep-alive), reads the second and closes
/// without an answer.
fn every_second_request_dropped(mut s: std::net::TcpStream) {
    use std::sync::atomic::Ordering::SeqCst;
    if read_head(&mut s) {
        READ_BY_DROPPER.fetch_add(1, SeqCst);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nOK");
        if read_head(&mut s) {
            READ_BY_DROPPER.fetch_add(1, SeqCst);
        }
    }
}

#[test]
fn every_request_on_the_wire_is_reported_and_posts_are_not_resent_unless_asked() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = fake(every_second_request_dropped);
    let url = server.url("/");
    // Each row: extra arguments, whether the dropped requests are resent.
    let rows: [(&[&str], bool); 3] = [
        (&["-m", "GET"], true),
        (&["-m", "POST", "-b", "x"], false),
        (&["-m", "POST", "-b", "x", "--retry-non-idempotent"], true),
    ];
    for (extra, resent) in rows {
        let before = READ_BY_DROPPER.load(SeqCst);
        let mut args = vec!["-n", "30", "-c", "1", "-t", "1"];
        args.extend_from_slice(extra);
        args.push(&url);
        let (o, doc) = http_json(&args);
        // The server has read every request before closing or answering.
        let read = READ_BY_DROPPER.load(SeqCst) - before;
        let s = &doc.summary;
        assert_eq!(read, s.responses + s.errors + s.retries, "{extra:?}: {:?}\n{}", s, o.out);
        assert_eq!(s.responses + s.errors, 30, "{extra:?}");
        if resent {
            assert_eq!((s.errors, s.responses), (0, 30), "{extra:?}");
            assert!(s.retries >= 25, "{extra:?}: {}", s.retries);
            assert!(o.out.contains("resent after a kept-alive connection closed"), "{}", o.out);
        } else {
            assert_eq!(s.retries, 0, "{extra:?}");
            assert!(s.errors >= 10, "{extra:?}: a POST on a closed connection is an error: {:?}", s.errors_by_class);
            assert!(!doc.settings.retry_closed);
        }
    }
}

#[test]
fn monitor_samples_the_server_by_port_and_reports_missing_ones() {
    // The reference server runs inside this test process: the port leads to our own pid.
    let server = refserver();
    let port = server.addr().port();
    let url = format!("{}/ok", server.base_url());
    let spec = format!("srv=:{port}");
    let (o, doc) = http_json(&[
        "-d",
        "1500ms",
        "-c",
        "4",
        "-t",
        "1",
        "--monitor",
        &spec,
        "--monitor",
        "ghost=4000000",
        "--monitor-interval",
        "250ms",
        &url,
    ]);
    assert_eq!(doc.monitor.len(), 2);
    let srv = &doc.monitor[0];
    assert_eq!((srv.name.as_str(), srv.pid), ("srv", std::process::id()));
    assert!(srv.samples.len() >= 4, "{:?}", srv.samples);
    assert!(srv.avg_cpu_pct > 1.0 && srv.peak_rss_bytes > 1 << 20, "{srv:?}");
    assert_eq!(srv.vanished_s, None);
    let ghost = &doc.monitor[1];
    assert_eq!((ghost.vanished_s, ghost.samples.len()), (Some(0.0), 0));
    assert!(o.err.contains("--monitor ghost=4000000: no process 4000000"), "{}", o.err);
    assert!(o.out.contains("Server") && o.out.contains("srv") && o.out.contains("(not found)"), "{}", o.out);
    // Not found is n/a, never figures that read as measured.
    let ghost_line = o.out.lines().find(|l| l.trim_start().starts_with("ghost")).unwrap();
    assert!(ghost_line.contains("n/a") && !ghost_line.contains('%') && !ghost_line.contains(" B"), "{ghost_line}");
    // The document with a monitor section still matches its schema.
    let value = serde_json::to_value(&doc).unwrap();
    let v = common::schema::validator("result.schema.json");
    let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Bad specs are usage errors.
    let o = bolide(&["http", "--monitor", "nonsense", &url]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("NAME=PID or NAME=:PORT"), "{}", o.err);
}

#[test]
fn timed_out_requests_stay_in_the_percentiles_at_their_timeout() {
    // Every tenth request the server reads is never answered (its connection stays open).
    static SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let server = fake(|mut s| {
        while read_head(&mut s) {
            if SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 10 == 9 {
                sleep_ms(2_000);
                return;
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                return;
            }
        }
    });
    let (_, doc) = http_json(&["-n", "50", "-c", "1", "--timeout", "250ms", &server.url("/")]);
    assert_eq!(doc.summary.responses, 45);
    assert_eq!(class(&doc, "timeout"), 5);
    assert_eq!(doc.summary.errors, 5);
    // 5 of 50 samples sit at the timeout: p99 and the max are at least 250 ms, p50 is far below.
    assert!(doc.summary.latency.p99_us >= 250_000, "{:?}", doc.summary.latency);
    assert!(doc.summary.latency.max_us >= 250_000, "{:?}", doc.summary.latency);
    assert!(doc.summary.latency.p50_us < 100_000, "{:?}", doc.summary.latency);
    let hist = bolide::stats::hist::decode(&doc.histograms.latency_us).unwrap();
    assert_eq!(hist.len(), 50, "every request, answered or timed out, is in the histogram");
}

#[test]
fn quiet_still_prints_errors_and_nothing_else() {
    let server = fake(|mut s| {
        read_head(&mut s);
    });
    let o = bolide(&["http", "-q", "-n", "4", "-c", "1", &server.url("/")]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(o.out, "", "no summary with -q");
    assert!(o.err.contains("first closed error:"), "{}", o.err);
}

#[test]
fn a_failed_status_is_a_failed_request_in_every_reading() {
    let server = refserver();
    let url = format!("{}/status/500", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let (junit, csv, html) = (dir.path().join("j.xml"), dir.path().join("s.csv"), dir.path().join("r.html"));
    let csv_out = format!("csv={}", csv.display());
    let json = dir.path().join("r.json");
    let o = bolide(&[
        "http",
        "--json",
        json.to_str().unwrap(),
        "-n",
        "200",
        "-c",
        "2",
        "--threshold",
        "error_rate<1%",
        "--junit",
        junit.to_str().unwrap(),
        "--out",
        &csv_out,
        "--html",
        html.to_str().unwrap(),
        &url,
    ]);
    let doc = read_doc(&json);
    // The terminal's first line, the document, the threshold and the exit code say one thing.
    assert!(o.out.contains("200 responses in "), "{}", o.out);
    assert!(o.out.contains(", 200 failed (status 500: 200)"), "{}", o.out);
    assert_eq!(o.code, 1, "error_rate<1% is broken by 200 failed of 200:\n{}", o.out);
    assert_eq!((doc.summary.responses, doc.summary.errors, doc.summary.sent), (200, 200, 200));
    assert_eq!(doc.summary.errors_by_class["status"], 200);
    assert_eq!(doc.summary.unfinished, 0, "a failed response is not a request in flight");
    assert_eq!(doc.settings.expect_status.as_deref(), Some("200-399"));
    assert_eq!(doc.thresholds[0].value, Some(100.0));
    assert!(!doc.thresholds[0].ok);
    assert_eq!(doc.timeline.iter().map(|s| s.errors).sum::<u64>(), 200);
    // JUnit's case for the threshold fails; the CSV's errors rows add up to the same 200.
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("was 100.00%: error_rate&lt;1% does not hold"), "{x}");
    let errors: f64 = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(",errors,,").map(|(_, v)| v.parse::<f64>().unwrap()))
        .sum();
    assert_eq!(errors, 200.0);
    // The report's band: its Errors card says 200 and what they were.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("status 500: 200"), "the report's errors card names the failed status");

    // Expected statuses change the verdict and nothing else: 500 expected, none failed.
    let (o, doc) =
        http_json(&["-n", "100", "-c", "2", "--expect-status", "200-299,500", "--threshold", "error_rate<1%", &url]);
    assert_eq!(o.code, 0, "{}", o.out);
    assert_eq!((doc.summary.responses, doc.summary.errors, doc.summary.errors_by_class["status"]), (100, 0, 0));
    assert!(o.out.contains("100 responses in ") && o.out.contains(", 0 failed\n"), "{}", o.out);
    assert!(o.out.contains("500: 100 (expected 200-299,500)"), "{}", o.out);
    // A bad set is a usage error naming the flag.
    let o = bolide(&["http", "-n", "1", "--expect-status", "2xx", &url]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--expect-status \"2xx\" is not a status code"), "{}", o.err);
}

#[test]
fn a_capacity_ladder_fails_the_level_whose_responses_failed() {
    let server = refserver();
    let url = format!("{}/status/503", server.base_url());
    // --allow-busy-machine: a busy machine would leave the level without a verdict; here the
    // verdict is the server's answers', whatever the machine.
    let args = ["capacity", "http", "--from", "50", "--step", "50", "--to", "100", "-d", "1s", "--allow-busy-machine"];
    let o = bolide(&[&args[..], &[url.as_str()]].concat());
    // Every response was a 503: the first level fails, so the ladder found nothing (exit 1).
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let all = format!("{}{}", o.out, o.err);
    assert!(all.contains("error rate 100.00% > 1.00%"), "{all}");
    assert!(all.contains("No level passed."), "{all}");
}

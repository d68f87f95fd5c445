//! Fixed-rate runs (coordinated omission), TLS, and the result document against its schema.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;

/// Requests seen by the stalling server, and the lock its stall holds.
static SEEN: AtomicU64 = AtomicU64::new(0);
static STALL: Mutex<()> = Mutex::new(());

/// Answers at once, except that the 100th request freezes every connection for 600 ms.
fn stalls_once(mut s: TcpStream) {
    while read_head(&mut s) {
        if SEEN.fetch_add(1, Ordering::SeqCst) == 100 {
            let _held = STALL.lock().unwrap();
            sleep_ms(600);
        } else {
            drop(STALL.lock().unwrap());
        }
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK").is_err() {
            return;
        }
    }
}

#[test]
fn a_stall_under_fixed_rate_shows_in_the_high_percentiles() {
    let server = fake(stalls_once);
    let (o, doc) = http_json(&["--rps", "200", "-d", "2s", "-c", "4", "-t", "1", &server.url("/")]);
    let l = &doc.summary.latency;
    // About 120 sends were due during the 600 ms stall; measured from their scheduled time they
    // waited up to 600 ms. Measured from when they were actually sent (coordinated omission),
    // only the 4 requests caught on the wire would show it, 1% of 400, and p90 would stay in µs.
    assert!(l.max_us >= 500_000, "max {} µs", l.max_us);
    assert!(l.p99_us >= 400_000, "p99 {} µs", l.p99_us);
    assert!(l.p90_us >= 100_000, "p90 {} µs", l.p90_us);
    assert!(doc.summary.late_sends >= 50, "late sends {}", doc.summary.late_sends);
    assert!(doc.summary.max_lag_us >= 400_000, "lag {}", doc.summary.max_lag_us);
    assert_eq!(doc.summary.sent + doc.summary.missed_sends, 400, "every scheduled send accounted for");
    assert!(o.out.contains("sends late"), "{}", o.out);
}

#[test]
fn fixed_rate_sends_exactly_the_schedule() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    // 100 sends on the schedule of 100 a second (a count, not a duration: a send due at 0.99 s
    // is never cut by a busy machine's stop).
    let (_, doc) = http_json(&["--rps", "100", "-n", "100", "-c", "3", "-t", "2", &url]);
    assert_eq!(doc.summary.sent, 100);
    assert_eq!(doc.summary.missed_sends, 0);
    assert_eq!(doc.summary.responses + doc.summary.unfinished, 100);
    assert_eq!(server.requests(), doc.summary.sent);
    // Closed model for comparison: as fast as the server answers, past the rate's 100 a second.
    let (_, closed) = http_json(&["-d", "1s", "-c", "3", "-t", "1", &url]);
    assert!(closed.summary.responses > 100, "{}", closed.summary.responses);
}

/// An HTTPS server with a fresh self-signed certificate for "localhost".
fn tls_server() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        while let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..at + 4);
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecure";
                            if tls.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
    });
    addr
}

#[test]
fn https_with_and_without_certificate_checks() {
    let addr = tls_server();
    let url = format!("https://localhost:{}/", addr.port());
    let (_, doc) = http_json(&["-n", "50", "-c", "2", "--insecure", &url]);
    assert_eq!((doc.summary.responses, doc.summary.errors), (50, 0));
    assert_eq!(doc.summary.connects, 2, "TLS sessions are kept alive");
    assert!(doc.summary.bytes_in >= 50 * 6);
    // The certificate is self-signed: with verification on, every request fails in the handshake.
    let (o, doc) = http_json(&["-n", "5", "-c", "1", &url]);
    assert_eq!(doc.summary.responses, 0);
    assert_eq!(class(&doc, "tls"), 5, "{:?}", doc.summary.errors_by_class);
    assert!(o.err.contains("first tls error"), "{}", o.err);
}

fn validator() -> jsonschema::Validator {
    common::schema::validator("result.schema.json")
}

fn errors(v: &jsonschema::Validator, doc: &serde_json::Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn result_documents_match_the_published_schema() {
    let v = validator();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A closed-model run over two URLs and a fixed-rate run with errors.
    let runs: [Vec<String>; 2] = [
        vec![
            "-n".into(),
            "300".into(),
            "-c".into(),
            "3".into(),
            format!("{}/ok", server.base_url()),
            format!("{}/status/404", server.base_url()),
        ],
        vec![
            "--rps".into(),
            "50".into(),
            "-d".into(),
            "1s".into(),
            "--timeout".into(),
            "100ms".into(),
            format!("{}/delay/200", server.base_url()),
        ],
    ];
    for (i, args) in runs.iter().enumerate() {
        let json = dir.path().join(format!("r{i}.json"));
        let mut argv = vec!["http", "--json", json.to_str().unwrap()];
        argv.extend(args.iter().map(String::as_str));
        assert_eq!(bolide(&argv).code, 0);
        let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(errors(&v, &value), Vec::<String>::new(), "run {i}");
        // The schema is strict enough to notice a broken document.
        let mut broken = value.clone();
        broken["summary"].as_object_mut().unwrap().remove("latency");
        broken["histograms"]["latency_us"] = "not base64!".into();
        assert_eq!(errors(&v, &broken).len(), 2, "run {i}");
        // And the histograms in it decode and merge back into the summary's figures.
        let doc = read_doc(&json);
        let mut merged = bolide::stats::hist::latency_us();
        for t in &doc.per_target {
            merged.add(bolide::stats::hist::decode(&t.latency_histogram).unwrap()).unwrap();
        }
        let overall = bolide::stats::hist::decode(&doc.histograms.latency_us).unwrap();
        // Every response, and every request that timed out (at its timeout).
        let timed_out = doc.summary.errors_by_class["timeout"];
        assert_eq!(merged.len(), doc.summary.responses + timed_out);
        assert_eq!(overall.len(), doc.summary.responses + timed_out);
        assert_eq!(overall.value_at_quantile(0.99), doc.summary.latency.p99_us);
    }
}

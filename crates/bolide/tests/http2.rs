//! HTTP/2 end to end (`--http2`, `--h2c`, `--streams`): against nginx (Debian's, `listen ... http2`,
//! started by the test) and against HTTP/2 servers made here with the `h2` crate's server side,
//! each misbehaving in one way: streams held to count how many are open at once, large bodies both
//! ways (flow control and window updates), RST_STREAM on some streams, GOAWAY after a few requests,
//! slow answers under a fixed rate, and TLS with and without ALPN `h2`. All on 127.0.0.1.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

/// How a test server treats each request (`n` counts the connection's requests from 1).
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers "ok" after a pause.
    Slow(Duration),
    /// Answers with this many bytes.
    Big(usize),
    /// Reads the whole request body, answers "ok".
    Drain,
    /// Resets every third stream (RST_STREAM, REFUSED_STREAM); answers the rest.
    ResetEveryThird,
    /// Answers two requests of a connection, then sends GOAWAY (the third is refused by it).
    GoAwayAfterTwo,
}

/// What a test server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicU64,
    requests: AtomicU64,
    resets: AtomicU64,
    body_bytes: AtomicU64,
    /// The most streams open at once on one connection.
    max_open: AtomicU64,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Server {
    fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}/", self.addr.port())
    }
}

/// An HTTP/2 server on 127.0.0.1:0 (TLS with `alpn` when `tls` is Some), in a thread of its own.
fn server(behaviour: Behaviour, tls: Option<Vec<Vec<u8>>>) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = Arc::clone(&seen);
    let acceptor = tls.map(|alpn| {
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = alpn;
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (s, acceptor) = (Arc::clone(&s), acceptor.clone());
                tokio::task::spawn_local(async move {
                    match acceptor {
                        Some(a) => {
                            let Ok(tls) = a.accept(tcp).await else { return };
                            serve(tls, behaviour, s).await;
                        }
                        None => serve(tcp, behaviour, s).await,
                    }
                });
            }
        });
    });
    Server { addr, seen }
}

async fn serve<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static>(
    io: T,
    behaviour: Behaviour,
    seen: Arc<Seen>,
) {
    let Ok(mut conn) = h2::server::handshake(io).await else { return };
    // Connections that speak HTTP/2 (bolide's reachability check before the run is a bare TCP one).
    seen.connections.fetch_add(1, Ordering::Relaxed);
    let open = Arc::new(AtomicU64::new(0));
    let mut n = 0u64;
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        n += 1;
        seen.requests.fetch_add(1, Ordering::Relaxed);
        if matches!(behaviour, Behaviour::GoAwayAfterTwo) && n == 2 {
            // GOAWAY (gracefully: this second request is still answered); a third one, sent
            // before or after the client reads it, is past its last stream and refused.
            conn.graceful_shutdown();
        }
        if matches!(behaviour, Behaviour::ResetEveryThird) && n.is_multiple_of(3) {
            seen.resets.fetch_add(1, Ordering::Relaxed);
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            continue;
        }
        let (seen, open) = (Arc::clone(&seen), Arc::clone(&open));
        let now = open.fetch_add(1, Ordering::Relaxed) + 1;
        seen.max_open.fetch_max(now, Ordering::Relaxed);
        tokio::task::spawn_local(async move {
            let mut body = request.into_body();
            while let Some(Ok(chunk)) = body.data().await {
                seen.body_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            if let Behaviour::Slow(d) = behaviour {
                tokio::time::sleep(d).await;
            }
            let payload = match behaviour {
                Behaviour::Big(size) => Bytes::from(vec![7u8; size]),
                _ => Bytes::from_static(b"ok"),
            };
            open.fetch_sub(1, Ordering::Relaxed);
            let response = http::Response::builder().status(200).body(()).unwrap();
            let Ok(mut stream) = respond.send_response(response, false) else { return };
            let mut payload = payload;
            // Within the client's window, as it opens (flow control).
            while !payload.is_empty() {
                stream.reserve_capacity(payload.len());
                let Some(Ok(granted)) = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await else { return };
                let chunk = payload.split_to(granted.min(payload.len()));
                if stream.send_data(chunk, false).is_err() {
                    return;
                }
            }
            let _ = stream.send_data(Bytes::new(), true);
        });
    }
}

/// `bolide http ARGS...`: the outcome and the document.
fn run(args: &[&str]) -> (common::Outcome, bolide::stats::result::ResultDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut all = vec!["http", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = common::bolide(&all);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document: {}\n{}", o.out, o.err));
    assert_eq!(common::schema_problems("result.schema.json", &text), Vec::<String>::new());
    (o, serde_json::from_str(&text).unwrap())
}

#[test]
fn streams_run_at_once_on_one_connection() {
    let s = server(Behaviour::Slow(Duration::from_millis(200)), None);
    let (o, doc) = run(&["--h2c", "--streams", "4", "-c", "1", "-n", "16", &s.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors), (16, 0));
    // One connection, four streams open at once (never more).
    assert_eq!(s.seen.connections.load(Ordering::Relaxed), 1);
    assert_eq!(doc.summary.connects, 1);
    assert_eq!(s.seen.max_open.load(Ordering::Relaxed), 4);
    assert_eq!(doc.settings.protocol.as_deref(), Some("h2c"));
    assert_eq!(doc.settings.streams, Some(4));
}

#[test]
fn large_bodies_flow_both_ways_within_the_windows() {
    // 3 MB answers: more than the client's 1 MiB stream window, so it must hand windows back.
    let big = server(Behaviour::Big(3_000_000), None);
    let (o, doc) = run(&["--h2c", "--streams", "2", "-c", "1", "-n", "6", &big.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors), (6, 0));
    assert_eq!(doc.summary.bytes_in, 6 * 3_000_000);
    // 200 KB uploads: more than the server's 64 KiB default window.
    let drain = server(Behaviour::Drain, None);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    std::fs::write(&body, vec![1u8; 200_000]).unwrap();
    let (o, doc) = run(&[
        "--h2c",
        "--streams",
        "3",
        "-c",
        "1",
        "-n",
        "9",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        &drain.url("http"),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors), (9, 0));
    assert_eq!(drain.seen.body_bytes.load(Ordering::Relaxed), 9 * 200_000);
}

#[test]
fn reset_streams_are_counted_as_rst_stream_and_the_connection_stays() {
    let s = server(Behaviour::ResetEveryThird, None);
    let (o, doc) = run(&["--h2c", "--streams", "2", "-c", "1", "-n", "30", &s.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let resets = s.seen.resets.load(Ordering::Relaxed);
    assert_eq!(resets, 10);
    assert_eq!(doc.summary.errors_by_class["rst_stream"], resets);
    assert_eq!((doc.summary.responses, doc.summary.errors), (30 - resets, resets));
    assert_eq!(doc.summary.connects, 1, "a reset stream keeps its connection");
    assert!(o.out.contains("rst_stream"), "{}", o.out);
}

#[test]
fn goaway_is_counted_and_a_new_connection_is_opened() {
    let s = server(Behaviour::GoAwayAfterTwo, None);
    let (o, doc) = run(&["--h2c", "--streams", "1", "-c", "1", "-n", "12", &s.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let e = &doc.summary.errors_by_class;
    // Each connection answers two requests; the third gets GOAWAY and a new connection follows.
    assert_eq!(doc.summary.responses + doc.summary.errors, 12);
    assert_eq!(e["goaway"], doc.summary.errors, "{e:?}\n{}\n{}", o.out, o.err);
    assert_eq!(doc.summary.responses, 8, "{e:?}");
    assert_eq!(doc.summary.connects, 4);
    assert_eq!(s.seen.connections.load(Ordering::Relaxed), 4);
}

#[test]
fn a_fixed_rate_waits_for_free_streams_and_counts_the_wait() {
    // Two streams of a server that answers in 100 ms hold 20 requests a second; 100 a second are
    // scheduled: each request waits for a stream, and its latency counts from its schedule.
    let s = server(Behaviour::Slow(Duration::from_millis(100)), None);
    let (o, doc) = run(&["--h2c", "--streams", "2", "-c", "1", "--rps", "100", "-n", "50", &s.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors), (50, 0));
    assert_eq!(doc.summary.sent, 50);
    // The last requests waited about (50 - 2) / 20 s behind their schedule: far more than 100 ms.
    assert!(doc.summary.latency.p99_us >= 1_000_000, "{:?}", doc.summary.latency);
    assert!(doc.summary.late_sends > 0);
}

#[test]
fn alpn_h2_over_tls_and_a_server_that_refuses_it() {
    let s = server(Behaviour::Slow(Duration::ZERO), Some(vec![b"h2".to_vec()]));
    let (o, doc) = run(&["--http2", "--insecure", "--streams", "4", "-c", "2", "-n", "200", &s.url("https")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors), (200, 0));
    assert_eq!(doc.settings.protocol.as_deref(), Some("h2"));
    // A TLS server that does not take part in ALPN (an HTTP/1.1 one): a TLS error that says so.
    let old = server(Behaviour::Slow(Duration::ZERO), Some(vec![]));
    let (o, doc) = run(&["--http2", "--insecure", "-c", "1", "-n", "3", &old.url("https")]);
    assert_eq!(doc.summary.errors_by_class["tls"], 3, "{}\n{}", o.out, o.err);
    assert!(format!("{}{}", o.out, o.err).contains("did not agree to HTTP/2"), "{}\n{}", o.out, o.err);
    // One that offers only http/1.1: the handshake itself fails, a TLS error too.
    let h1 = server(Behaviour::Slow(Duration::ZERO), Some(vec![b"http/1.1".to_vec()]));
    let (o, doc) = run(&["--http2", "--insecure", "-c", "1", "-n", "3", &h1.url("https")]);
    assert_eq!(doc.summary.errors_by_class["tls"], 3, "{}\n{}", o.out, o.err);
}

#[test]
fn flags_that_do_not_fit_are_usage_errors() {
    for (args, says) in [
        (vec!["--streams", "4"], "add --http2"),
        (vec!["--http2", "--streams", "0"], "at least 1"),
        (vec!["--http2", "--no-keepalive"], "HTTP/1.1's"),
        (vec!["--h2c", "https://127.0.0.1:9/"], "use --http2"),
    ] {
        let mut all = vec!["http", "-n", "1"];
        all.extend(&args);
        if !args.iter().any(|a| a.starts_with("https://")) {
            all.push("http://127.0.0.1:9/");
        }
        let o = common::bolide(&all);
        assert_eq!(o.code, 2, "{all:?}: {}", o.err);
        assert!(o.err.contains(says), "{all:?}: {}", o.err);
    }
}

/// nginx from Debian with an HTTP/2 listener in clear (1.22: `listen ... http2`), started here as one
/// process (no master), so that stopping it leaves no worker behind.
#[test]
fn nginx_serves_h2c_to_many_streams_and_large_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for d in ["www", "logs", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("www/big.bin"), vec![9u8; 300_000]).unwrap();
    let port = common::free_port();
    let conf = format!(
        "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {r}/nginx.pid;\nerror_log {r}/logs/error.log warn;\n\
         events {{ worker_connections 1024; }}\nhttp {{\n access_log off;\n\
         client_body_temp_path {r}/tmp/cb; proxy_temp_path {r}/tmp/p; fastcgi_temp_path {r}/tmp/f;\n\
         uwsgi_temp_path {r}/tmp/u; scgi_temp_path {r}/tmp/s;\n\
         server {{\n  listen 127.0.0.1:{port} http2;\n  root {r}/www;\n  location = / {{ return 200 \"OK\"; }}\n }}\n}}\n",
        r = root.display()
    );
    std::fs::write(root.join("nginx.conf"), conf).unwrap();
    let mut nginx = std::process::Command::new("nginx")
        .arg("-p")
        .arg(root)
        .arg("-c")
        .arg(root.join("nginx.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("nginx (Debian's nginx-light) is needed for this test");
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "nginx did not listen");
    let url = format!("http://127.0.0.1:{port}/");
    let (o, doc) = run(&["--h2c", "--streams", "8", "-c", "2", "-n", "2000", &url]);
    let (o2, doc2) = run(&["--h2c", "--streams", "4", "-c", "1", "-n", "40", &format!("{url}big.bin")]);
    let _ = nginx.kill();
    let _ = nginx.wait();
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!((doc.summary.responses, doc.summary.errors, doc.summary.connects), (2000, 0, 2));
    assert_eq!(doc.summary.status["200"], 2000);
    assert_eq!(o2.code, 0, "{}\n{}", o2.out, o2.err);
    assert_eq!((doc2.summary.responses, doc2.summary.bytes_in), (40, 40 * 300_000));
}

/// `bolide run SCENARIO --json TMP` (extra args after): the outcome and the document.
fn run_scenario(yaml: &str, extra: &[&str]) -> (common::Outcome, bolide::stats::vu::DdpDoc) {
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("s.yml"), dir.path().join("run.json"));
    std::fs::write(&file, yaml).unwrap();
    let mut all = vec!["run", file.to_str().unwrap(), "--json", json.to_str().unwrap()];
    all.extend_from_slice(extra);
    let o = common::bolide(&all);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document: {}\n{}", o.out, o.err));
    (o, bolide::stats::vu::DdpDoc::from_json(&text).unwrap())
}

/// Scenario `http` steps with `http2: true`: each step one request on an HTTP/2 connection of its
/// own, in clear (prior knowledge) and over TLS (ALPN h2); a server without h2 fails the step.
#[test]
fn scenario_steps_speak_http2() {
    let flow = |url: &str| {
        format!(
            "config:\n  target: {url}\n  phases: [{{duration: 1, arrivalCount: 2}}]\nscenarios:\n  - flow:\n      \
             - loop:\n          - post: {{url: /, json: {{a: 1}}, http2: true, expect: 200}}\n        count: 3\n"
        )
    };
    let clear = server(Behaviour::Drain, None);
    let (o, doc) = run_scenario(&flow(&clear.url("http")), &[]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let step = doc.steps.iter().find(|s| s.name == "POST /").expect("the post step");
    assert_eq!((step.count, step.errors), (6, 0));
    assert_eq!(clear.seen.requests.load(Ordering::Relaxed), 6);
    assert_eq!(clear.seen.connections.load(Ordering::Relaxed), 6);
    assert_eq!(clear.seen.body_bytes.load(Ordering::Relaxed), 6 * br#"{"a":1}"#.len() as u64);

    let tls = server(Behaviour::Drain, Some(vec![b"h2".to_vec()]));
    let (o, doc) = run_scenario(&flow(&tls.url("https")), &["--insecure"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let step = doc.steps.iter().find(|s| s.name == "POST /").expect("the post step");
    assert_eq!((step.count, step.errors), (6, 0));
    assert_eq!(tls.seen.requests.load(Ordering::Relaxed), 6);

    let no_h2 = server(Behaviour::Drain, Some(vec![b"http/1.1".to_vec()]));
    let (_, doc) = run_scenario(&flow(&no_h2.url("https")), &["--insecure"]);
    let step = doc.steps.iter().find(|s| s.name == "POST /").expect("the post step");
    assert_eq!(step.errors, 2, "each user stops at its first failed step");
    assert_eq!(step.errors_by_class.get("tls"), Some(&2), "{:?}", step.errors_by_class);
    assert_eq!(no_h2.seen.requests.load(Ordering::Relaxed), 0);
}

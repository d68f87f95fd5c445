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
    /// Answers the server's first N requests (over all connections), then never answers again.
    StallAfter(u64),
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
        if let Behaviour::StallAfter(answered) = behaviour {
            if seen.requests.load(Ordering::Relaxed) > answered {
                // Held, never answered: the stream lives as long as the connection.
                tokio::task::spawn_local(async move {
                    let _keep = (request, respond);
                    std::future::pending::<()>().await;
                });
                continue;
            }
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

/// `bolide http ARGS... --json TMP` for a run that cannot start: exit 3, and no document.
fn cannot_start(args: &[&str]) -> common::Outcome {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut all = vec!["http", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = common::bolide(&all);
    assert_eq!(o.code, 3, "{}\n{}", o.out, o.err);
    assert!(!json.exists(), "a run that could not start writes no document");
    o
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
fn a_request_refused_by_goaway_is_sent_again_on_a_new_connection() {
    let s = server(Behaviour::GoAwayAfterTwo, None);
    let (o, doc) = run(&["--h2c", "--streams", "1", "-c", "1", "-n", "12", &s.url("http")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    // Each connection answers two requests; the third, refused by its GOAWAY (or not yet sent when
    // the GOAWAY came), goes on a new connection: every request is answered (RFC 9113 §6.8).
    assert_eq!((doc.summary.responses, doc.summary.errors, doc.summary.sent), (12, 0, 12), "{}\n{}", o.out, o.err);
    assert_eq!(doc.summary.connects, 6);
    assert_eq!(s.seen.connections.load(Ordering::Relaxed), 6);
    // The server processed each request once: the refused ones it never read, their resends it did.
    assert_eq!(s.seen.requests.load(Ordering::Relaxed), 12);
    assert!(doc.summary.retries <= 5, "at most one resend per connection's third request: {}", doc.summary.retries);
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
    // A TLS server that does not take part in ALPN (an HTTP/1.1 one): no request could succeed,
    // so the first refusal ends the run as one that could not start, saying why.
    let old = server(Behaviour::Slow(Duration::ZERO), Some(vec![]));
    let o = cannot_start(&["--http2", "--insecure", "-c", "1", "-n", "3", &old.url("https")]);
    assert!(o.err.contains("did not agree to HTTP/2"), "{}\n{}", o.out, o.err);
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
         events {{ worker_connections 1024; }}\nhttp {{\n access_log {r}/logs/access.log;\n keepalive_requests 100;\n\
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
    // nginx ends each connection after 100 requests with GOAWAY (NO_ERROR): the requests past its
    // last stream were not processed, and go again on the next connection. None is an error.
    let s = &doc.summary;
    assert_eq!((s.responses, s.errors, s.sent), (2000, 0, 2000), "{:?}\n{}\n{}", s.errors_by_class, o.out, o.err);
    assert_eq!(s.status["200"], 2000);
    assert!(s.connects >= 20, "2,000 requests at 100 a connection: {}", s.connects);
    // nginx's own log: each answered request once (the refused ones it never processed), and the
    // large file's 40 after them.
    let log = std::fs::read_to_string(root.join("logs/access.log")).unwrap();
    assert_eq!(log.lines().filter(|l| l.contains("\"GET / HTTP/2.0\" 200")).count(), 2000);
    assert_eq!(log.lines().filter(|l| l.contains("\"GET /big.bin HTTP/2.0\" 200")).count(), 40);
    assert_eq!(o2.code, 0, "{}\n{}", o2.out, o2.err);
    assert_eq!((doc2.summary.responses, doc2.summary.bytes_in), (40, 40 * 300_000));
}

/// `bolide run SCENARIO --json TMP` (extra args after): the outcome and the document.
fn run_scenario(yaml: &str, extra: &[&str]) -> (common::Outcome, bolide::stats::vu::VuDoc) {
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("s.yml"), dir.path().join("run.json"));
    std::fs::write(&file, yaml).unwrap();
    let mut all = vec!["run", file.to_str().unwrap(), "--json", json.to_str().unwrap()];
    all.extend_from_slice(extra);
    let o = common::bolide(&all);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document: {}\n{}", o.out, o.err));
    (o, bolide::stats::vu::VuDoc::from_json(&text).unwrap())
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

/// A server's count, once its threads have taken in what the client did: the count when it equals
/// `want`, or the one it settled on (a connection opened as the run ended may reach the server's
/// thread a moment after bolide returned; the wait is bounded and decides nothing).
fn settled(count: &AtomicU64, want: u64) -> u64 {
    for _ in 0..100 {
        if count.load(Ordering::Relaxed) == want {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    count.load(Ordering::Relaxed)
}

/// What a hostile HTTP/2 peer does once a client connected (each a frame or bytes of its own
/// making, not the `h2` crate's, which would refuse to misbehave).
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// SETTINGS, then GOAWAY (last stream 0, NO_ERROR): nothing will be processed.
    GoAwayAtOnce,
    /// Bytes that are no HTTP/2 frame.
    Garbage,
    /// A DATA frame header announcing 16 MiB, past any frame size a client allows.
    OversizedFrame,
    /// DATA on stream 0, which only streams may carry.
    DataOnStreamZero,
    /// SETTINGS with an initial window size past 2^31-1.
    BadSettings,
    /// SETTINGS, then PUSH_PROMISE frames on stream 1 for as long as the connection lasts.
    PushFlood,
    /// An HTTP/1.1 server's answer to the preface.
    Http1,
}

/// One frame: length, type, flags, stream, payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A hostile peer on 127.0.0.1:0; counts the connections that sent HTTP/2's preface.
fn hostile(mode: Hostile) -> (String, Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
    let connections = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&connections);
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { continue };
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let mut preface = [0u8; 24];
                if tcp.read_exact(&mut preface).is_err() || &preface[..3] != b"PRI" {
                    return; // bolide's reachability check before the run: a bare TCP connect
                }
                counted.fetch_add(1, Ordering::Relaxed);
                let settings = frame(4, 0, 0, &[]);
                let out: Vec<u8> = match mode {
                    Hostile::GoAwayAtOnce => [settings, frame(7, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0])].concat(),
                    Hostile::Garbage => b"\x00\xff\x13garbage that is not a frame at all\r\n\r\n".repeat(4),
                    Hostile::OversizedFrame => [settings, vec![0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1]].concat(),
                    Hostile::DataOnStreamZero => [settings, frame(0, 0, 0, b"hello")].concat(),
                    Hostile::BadSettings => frame(4, 0, 0, &[0, 4, 0xff, 0xff, 0xff, 0xff]),
                    Hostile::PushFlood => settings,
                    Hostile::Http1 => {
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
                    }
                };
                if tcp.write_all(&out).is_err() {
                    return;
                }
                if let Hostile::PushFlood = mode {
                    // :method GET, :scheme http, :path /, :authority x (HPACK), promising even streams.
                    let block = [0x82u8, 0x86, 0x84, 0x01, 0x01, b'x'];
                    for promised in (2u32..20_000).step_by(2) {
                        let payload = [&promised.to_be_bytes()[..], &block].concat();
                        if tcp.write_all(&frame(5, 4, 1, &payload)).is_err() {
                            return;
                        }
                    }
                }
                // Read what comes until the client leaves.
                let mut sink = [0u8; 4096];
                while matches!(tcp.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    (url, connections)
}

/// Against every hostile peer: the failures are counted by class, one per request that went on the
/// wire (its own connection attempt, or written to a connection), the slot waits before each new
/// connection after one that never answered, and every connection the peer saw is one bolide
/// counted. Bounds, not timing: the numbers hold on a busy machine as on a quiet one.
#[test]
fn hostile_http2_peers_are_counted_once_per_attempt_and_backed_off() {
    for (mode, class, says) in [
        (Hostile::GoAwayAtOnce, "goaway", "the server sent GOAWAY (NO_ERROR)"),
        (Hostile::Garbage, "malformed", "broke HTTP/2"),
        (Hostile::OversizedFrame, "malformed", "broke HTTP/2 (FRAME_SIZE_ERROR)"),
        (Hostile::DataOnStreamZero, "malformed", "broke HTTP/2 (PROTOCOL_ERROR)"),
        (Hostile::BadSettings, "malformed", "broke HTTP/2 (PROTOCOL_ERROR)"),
        (Hostile::PushFlood, "malformed", "broke HTTP/2 (PROTOCOL_ERROR)"),
    ] {
        let (url, connections) = hostile(mode);
        let (o, doc) = run(&["--h2c", "-c", "4", "--streams", "2", "-d", "1s", "--timeout", "2s", &url]);
        let s = &doc.summary;
        let context = format!("{mode:?}: {:?}\n{}\n{}", s.errors_by_class, o.out, o.err);
        assert_eq!(o.code, 0, "{context}");
        assert_eq!(s.responses, 0, "{context}");
        assert!(s.errors > 0 && s.errors_by_class[class] == s.errors, "{context}");
        assert!(o.err.contains(says), "{context}");
        assert!(!o.err.contains("the server sent GOAWAY") || class == "goaway", "{context}");
        // Each failed request went on the wire once (its attempt or its stream), each was at most
        // resent once, and the peer saw every connection bolide counted.
        assert_eq!(s.sent, s.errors + s.unfinished, "{context}");
        assert!(s.connects <= 2 * s.sent, "{context}");
        // One error per connection attempt, however many streams wait for the connection (the
        // opener's request goes alone until the connection answered).
        assert!(s.errors <= s.connects, "{context}");
        assert_eq!(settled(&connections, s.connects), s.connects, "{context}");
        // Backed off between attempts: a handful per slot each second, never millions.
        assert!(s.errors < 2_000, "{context}");
    }
}

/// A server that stops answering: the stream that times out ends its connection, and the next
/// request opens a new one (which the stalled server does not answer either).
#[test]
fn a_connection_whose_stream_timed_out_is_replaced() {
    let s = server(Behaviour::StallAfter(20), None);
    let (o, doc) = run(&["--h2c", "-c", "1", "--streams", "1", "-d", "2s", "--timeout", "200ms", &s.url("http")]);
    let sum = &doc.summary;
    let context = format!("{:?}\n{}\n{}", sum.errors_by_class, o.out, o.err);
    assert_eq!(o.code, 0, "{context}");
    assert_eq!(sum.responses, 20, "{context}");
    let timeouts = sum.errors_by_class["timeout"];
    assert!(timeouts >= 1 && sum.errors == timeouts, "{context}");
    // The first connection, then one after each timeout but perhaps the last (the run may end
    // before the next request opened one).
    assert!(sum.connects >= timeouts && sum.connects <= 1 + timeouts, "{context}");
    assert_eq!(settled(&s.seen.connections, sum.connects), sum.connects, "{context}");
}

/// `--http2` against a server that speaks HTTP/1.1 only, in clear: the first answer ends the run
/// as one that could not start (exit 3, as when nothing answers), naming the server's protocol;
/// the server sent no GOAWAY, and bolide does not say it did. So does the hostile peer's HTTP/1.1
/// answer, however many connections and streams the run has.
#[test]
fn an_http1_server_is_named_as_such() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let o = cannot_start(&["--http2", "-c", "1", "-n", "3", &url]);
    assert!(o.err.contains("the server answered in HTTP/1.1, not HTTP/2"), "{}", o.err);
    assert!(!o.err.contains("GOAWAY"), "{}", o.err);
    let (url, _) = hostile(Hostile::Http1);
    let o = cannot_start(&["--h2c", "-c", "4", "--streams", "2", "-d", "1s", "--timeout", "2s", &url]);
    assert!(o.err.contains("answered in HTTP/1.1, not HTTP/2"), "{}", o.err);
}

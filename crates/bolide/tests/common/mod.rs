//! Helpers for integration tests: run bolide in-process, and small misbehaving HTTP servers on
//! 127.0.0.1:0 (one thread per connection, each behaviour a plain function).

#![allow(dead_code)]

pub mod meteor;
pub mod prom;
pub mod schema;

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bolide::stats::result::ResultDoc;
use tokio_util::sync::CancellationToken;

pub struct Outcome {
    pub code: i32,
    pub out: String,
    pub err: String,
}

/// Runs `bolide ARGS...` in-process.
pub fn bolide(args: &[&str]) -> Outcome {
    bolide_with_cancel(args, &CancellationToken::new())
}

pub fn bolide_with_cancel(args: &[&str], cancel: &CancellationToken) -> Outcome {
    let mut argv = vec!["bolide".into()];
    argv.extend(args.iter().map(|a| a.into()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = bolide::console::Io::plain(&mut out, &mut err);
    let code = bolide::app::main(argv, &mut io, cancel);
    let o = Outcome { code, out: String::from_utf8_lossy(&out).into(), err: String::from_utf8_lossy(&err).into() };
    assert!(!o.err.contains("panicked") && !o.err.contains("backtrace"), "{}", o.err);
    o
}

/// Runs `bolide http ARGS... --json TMP` and returns the outcome and the document.
pub fn http_json(args: &[&str]) -> (Outcome, ResultDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut argv = vec!["http", "--json", json.to_str().unwrap()];
    argv.extend_from_slice(args);
    let o = bolide(&argv);
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.out, o.err);
    let doc = read_doc(&json);
    (o, doc)
}

pub fn read_doc(path: &Path) -> ResultDoc {
    ResultDoc::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn class(doc: &ResultDoc, name: &str) -> u64 {
    doc.summary.errors_by_class[name]
}

/// A test server whose connections are handled by `behaviour`; counts accepted connections.
pub struct Fake {
    pub addr: SocketAddr,
    pub accepted: Arc<AtomicU64>,
}

impl Fake {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

pub fn fake(behaviour: fn(TcpStream)) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || behaviour(stream));
        }
    });
    Fake { addr, accepted }
}

/// Reads one request head; false when the client closed first.
pub fn read_head(s: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// Answers every request on the connection with `response` (keep-alive).
pub fn answer_all(mut s: TcpStream, response: &[u8]) {
    while read_head(&mut s) {
        if s.write_all(response).is_err() {
            return;
        }
    }
}

/// Closes with a TCP reset instead of a FIN.
pub fn reset(s: TcpStream) {
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    drop(s);
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// The Markdown table in `text` whose header's first cell is `first` (padding and alignment
/// ignored): its header and rows as trimmed cells. Tests read tables this way, never by their
/// padding, which a suspect run (a busy machine) widens.
#[allow(dead_code)]
pub fn md_table(text: &str, first: &str) -> Option<Vec<Vec<String>>> {
    let cells = |line: &str| -> Vec<String> {
        line.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut lines = text.lines().skip_while(|l| !(l.trim_start().starts_with('|') && cells(l)[0] == first));
    let header = cells(lines.next()?);
    let mut rows = vec![header];
    for line in lines.skip(1).take_while(|l| l.trim_start().starts_with('|')) {
        rows.push(cells(line));
    }
    Some(rows)
}

/// The Node scripts of the browser tests (crates/refserver/tests/node: playwright-core and the
/// third-party DDP clients).
pub fn node_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../refserver/tests/node")
}

/// Checks that Debian's Chromium is there and installs the Node packages (playwright-core) for the
/// Chromium tests when they are not there yet.
pub fn in_chromium_setup() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "this test needs Debian's chromium at {chromium} (apt-get install chromium; .ci/run does)"
    );
    in_node_setup();
}

/// Installs the Node packages of the tests' Node side (`npm ci`) when one of them is missing.
pub fn in_node_setup() {
    let lock = std::fs::read_to_string(node_dir().join("package.json")).expect("package.json");
    let deps: serde_json::Value = serde_json::from_str(&lock).expect("package.json is JSON");
    let missing = deps["dependencies"]
        .as_object()
        .is_some_and(|d| d.keys().any(|name| !node_dir().join("node_modules").join(name).exists()));
    if missing {
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(node_dir())
            .status()
            .expect("npm is needed for this test");
        assert!(status.success(), "npm ci in {} failed", node_dir().display());
    }
}

/// The real Meteor server of `../shared/meteor-server` (Meteor 3.0.4's server packages serving the
/// benchmark's tasks app), copied under the test build's temporary directory with its npm packages
/// installed (once): the directory holding its `server.js`.
pub fn meteor_server_dir() -> std::path::PathBuf {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/meteor-server");
    assert!(shared.join("server.js").exists(), "this test needs ../shared/meteor-server beside the repository");
    let node = std::process::Command::new("node").arg("--version").output().expect("node is needed for this test");
    let major: u32 = String::from_utf8_lossy(&node.stdout)
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    assert!(major >= 20, "the Meteor server needs Node.js 20 or later (.ci/run installs it from npm)");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("meteor-server");
    // One test at a time prepares it.
    static READY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = READY.lock().unwrap_or_else(|p| p.into_inner());
    if !dir.join("node_modules/sockjs").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let status = std::process::Command::new("cp").arg("-r").arg(&shared).arg(&dir).status().expect("cp");
        assert!(status.success(), "copying {} failed", shared.display());
        // bcrypt (optional, native) serves only --accounts.
        let status = std::process::Command::new("npm")
            .args(["ci", "--omit=optional", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm is needed for this test");
        assert!(status.success(), "npm ci in {} failed", dir.display());
    }
    dir
}

/// A TCP port free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Where a result document does not follow the published schema `file` (none: it does).
#[allow(dead_code)]
pub fn schema_problems(file: &str, text: &str) -> Vec<String> {
    let raw: serde_json::Value = serde_json::from_str(text).unwrap();
    let v = schema::validator(file);
    v.iter_errors(&raw).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

/// A raw client of the dashboard's event stream: (snapshots received, whether `done` came, and
/// then the answer to GET /report).
#[allow(dead_code)]
pub fn follow_events(port: u16) -> (usize, bool, String, String) {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = None;
    for _ in 0..200 {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            stream = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut stream = stream.expect("the dashboard listens");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    // As a page's EventSource asks: such a stream is waited for at the end, to fetch the report.
    stream.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let (mut snapshots, mut last) = (0, String::new());
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        if line == "event: snapshot" {
            snapshots += 1;
        }
        if let Some(data) = line.strip_prefix("data: ") {
            last = data.to_string();
        }
        if line == "event: done" {
            return (snapshots, true, get(port, "/report"), last);
        }
    }
    (snapshots, false, String::new(), last)
}

#[allow(dead_code)]
pub fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The npm servers of `tests/peers`.
pub const PEERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers");

/// A server of `tests/peers` (a node script that prints `{"port": N}` once it listens), killed
/// when dropped.
pub struct Peer {
    child: std::process::Child,
    pub port: u16,
    /// The whole first line the peer printed (its port, and what else it said).
    pub said: serde_json::Value,
}

impl Peer {
    pub fn start(script: &str) -> Peer {
        Peer::start_with(script, &[])
    }

    /// A peer given arguments after its port (a hostile server's mode).
    pub fn start_with(script: &str, args: &[&str]) -> Peer {
        assert!(
            std::path::Path::new(&format!("{PEERS}/node_modules/socket.io")).exists(),
            "the peers' npm packages are missing: cd crates/bolide/tests/peers && npm ci"
        );
        let mut child = std::process::Command::new("node")
            .arg(format!("{PEERS}/{script}"))
            .arg("0")
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("node runs the peer servers");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let said = serde_json::from_str::<serde_json::Value>(&line).unwrap_or_default();
        let port = said["port"].as_u64().unwrap_or_else(|| {
            let _ = child.kill();
            panic!("{script} did not say its port: {line:?}")
        }) as u16;
        Peer { child, port, said }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The server's own counts (`GET /counts`, on a connection that closes).
    pub fn counts(&self) -> serde_json::Value {
        let text = get(self.port, "/counts");
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|_| panic!("counts: {text}"))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The documented example of `page` under docs/ (in a ```yaml FENCE block) is the example file
/// `file` under examples/, byte for byte.
pub fn documented(page: &str, fence: &str, file: &str) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let text = std::fs::read_to_string(format!("{root}/docs/{page}")).unwrap();
    let block = text
        .split(&format!("```yaml {fence}\n"))
        .nth(1)
        .and_then(|b| b.split("```\n").next())
        .unwrap_or_else(|| panic!("{page} shows its example {fence}"));
    assert_eq!(block, std::fs::read_to_string(format!("{root}/examples/{file}")).unwrap(), "{page}: {fence}");
}

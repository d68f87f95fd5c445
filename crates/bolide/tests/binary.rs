//! The real `bolide` binary: exit codes, Ctrl-C (SIGINT) handling, output hygiene.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bolide() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bolide"))
}

#[test]
fn help_version_and_usage_errors() {
    let help = bolide().arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("bolide demo"));
    let version = bolide().arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), concat!("bolide ", env!("CARGO_PKG_VERSION")));
    let bad = bolide().args(["http", "-c", "0", "--timeout", "soon", "http://127.0.0.1:1/"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("-c/--connections") && err.contains("--timeout"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    assert!(bad.stdout.is_empty(), "errors go to stderr only");
}

#[test]
fn sigint_stops_the_run_and_writes_the_report() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let child = bolide()
        .args(["http", "-d", "60s", "-c", "2", "-t", "1", "--json", json.to_str().unwrap()])
        .arg(format!("{}/delay/2", server.base_url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let begin = Instant::now();
    let killed = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(begin.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("interrupted") && stdout.contains("Latency"), "{stdout}");
    let doc = bolide::stats::result::ResultDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(doc.interrupted);
    assert!(doc.summary.responses > 0);
    assert!(doc.summary.responses <= server.requests());
    // The live line is for terminals only: a pipe gets none of it.
    assert!(!String::from_utf8_lossy(&out.stderr).contains('\r'));
}

#[test]
fn serve_runs_until_sigint_and_stops_cleanly() {
    use std::io::{BufRead, BufReader};
    let mut child = bolide()
        .args(["serve", "--port", "0", "--reactivity", "poll"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("bolide reference server on http://127.0.0.1:"), "{first}");
    let addr = first.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    // It answers, then stops on SIGINT.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut s, b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let begin = Instant::now();
    let status = child.wait().unwrap();
    assert!(begin.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> = out.lines().map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.starts_with("stopped after 1 HTTP requests")), "{rest:?}");
}

//! Debian's Prometheus (2.42) started on a free loopback port with its remote-write receiver and
//! native histograms, and instant queries of its HTTP API.

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Prometheus {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prometheus on a free loopback port, or None when it is not installed (CI installs it).
pub fn prometheus() -> Prometheus {
    let port = super::free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 1h\n").unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .arg("--enable-feature=native-histograms")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian's package) is needed for this test");
    let p = Prometheus { child, port, _dir: dir };
    let until = Instant::now() + Duration::from_secs(60);
    while !get(port, "/-/ready").starts_with("HTTP/1.1 200") {
        assert!(Instant::now() < until, "prometheus never got ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

pub fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// An instant query's single value.
pub fn query(port: u16, promql: &str, at_s: f64) -> f64 {
    try_query(port, promql, at_s).unwrap_or_else(|v| panic!("{promql}: {v}"))
}

/// An instant query's single value, or the answer when it has none.
pub fn try_query(port: u16, promql: &str, at_s: f64) -> Result<f64, String> {
    let q: String = url::form_urlencoded::byte_serialize(promql.as_bytes()).collect();
    let answer = get(port, &format!("/api/v1/query?query={q}&time={at_s}"));
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    // Connection: close with a chunked body: the JSON is the line that starts with {.
    let json = body.lines().find(|l| l.starts_with('{')).unwrap_or(body);
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("{e}: {answer}"))?;
    let value = &v["data"]["result"][0]["value"][1];
    value.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| v.to_string())
}

//! The real Meteor server of `../shared/meteor-server` as a test peer: started on a free loopback
//! port, its own counters read at `/__stats`.

#![allow(dead_code)]

use std::time::Duration;

/// Meteor's server on a free port, its counters at `/__stats`; stopped when dropped.
pub struct Meteor {
    child: std::process::Child,
    pub port: u16,
}

impl Meteor {
    pub fn start() -> Meteor {
        Meteor::start_with(&["--compression", "on"])
    }

    /// Started with the server's own options (`--seed 10`, `--accounts`, ...).
    pub fn start_with(options: &[&str]) -> Meteor {
        let dir = super::meteor_server_dir();
        let port = super::free_port();
        let child = std::process::Command::new("node")
            .args(["server.js", "--port", &port.to_string(), "--quiet"])
            .args(options)
            .current_dir(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node runs the Meteor server");
        let up = (0..300).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "the Meteor server did not listen on {port}");
        Meteor { child, port }
    }

    /// The server's counters (`/__stats`).
    pub fn stats(&self) -> serde_json::Value {
        use std::io::{Read, Write};
        // HTTP/1.0: the whole body, then the end of the stream (no chunks, no keep-alive).
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(b"GET /__stats HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("/__stats: {e}: {answer}"))
    }
}

impl Drop for Meteor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

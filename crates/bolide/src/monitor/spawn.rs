//! `--spawn "COMMAND" --ready-url URL`: bolide starts the server under test, waits until it
//! answers 2xx, watches it while the load runs and stops it at the end. A server that fails to
//! start or never becomes ready is reported with the tail of its output.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// What `--spawn`, `--ready-url` and `--ready-timeout` asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnPlan {
    /// Run by `sh -c`.
    pub command: String,
    pub ready: ReadyUrl,
    pub timeout: Duration,
    /// Set in the command's environment: `BOLIDE_PROBE` (where bolide-probe, when the server loads
    /// it, serves), the Monti agent's endpoint and app (`--monti`).
    pub env: Vec<(String, String)>,
}

/// An http:// URL to poll until it answers 2xx.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadyUrl {
    pub url: String,
    host: String,
    addrs: Vec<SocketAddr>,
    path: String,
}

impl ReadyUrl {
    pub fn parse(text: &str) -> Result<ReadyUrl, String> {
        let u = url::Url::parse(text).map_err(|e| format!("--ready-url {text:?} is not a URL: {e}"))?;
        if u.scheme() != "http" {
            return Err(format!("--ready-url {text:?}: only http:// URLs are polled"));
        }
        let host = u.host_str().ok_or_else(|| format!("--ready-url {text:?} has no host"))?.to_string();
        let port = u.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = (host.trim_matches(|c| c == '[' || c == ']'), port)
            .to_socket_addrs()
            .map_err(|e| format!("--ready-url {text:?}: cannot resolve {host:?}: {e}"))?
            .collect();
        let path = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        Ok(ReadyUrl { url: text.to_string(), host: u.authority().to_string(), addrs, path })
    }

    /// The status code of one GET, or why there was none.
    pub fn status(&self, timeout: Duration) -> Result<u16, String> {
        let mut last = String::from("no address");
        for a in &self.addrs {
            match self.get(a, timeout) {
                Ok(code) => return Ok(code),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    fn get(&self, addr: &SocketAddr, timeout: Duration) -> std::io::Result<u16> {
        let mut s = TcpStream::connect_timeout(addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        write!(s, "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.path, self.host)?;
        let mut head = [0u8; 64];
        let mut n = 0;
        while n < 12 {
            let k = s.read(&mut head[n..])?;
            if k == 0 {
                break;
            }
            n += k;
        }
        // "HTTP/1.1 200"
        std::str::from_utf8(&head[..n])
            .ok()
            .filter(|t| t.starts_with("HTTP/"))
            .and_then(|t| t.get(9..12))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other("not an HTTP response"))
    }
}

/// A server bolide started; stopped (with everything it started) when dropped.
pub struct Spawned {
    child: Child,
    log: PathBuf,
    pub pid: u32,
}

/// Why the server could not be had.
#[derive(Debug)]
pub struct SpawnError(pub String);

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Starts the server and waits until it is ready (or fails, or the user gives up).
pub fn start(plan: &SpawnPlan, cancel: &CancellationToken) -> Result<Spawned, SpawnError> {
    use std::os::unix::process::CommandExt;
    // A server already answering there would be measured instead of ours.
    if let Ok(code) = plan.ready.status(Duration::from_millis(500)) {
        return Err(SpawnError(format!(
            "something already answers {} (status {code}) before --spawn started anything; stop it or use another port",
            plan.ready.url
        )));
    }
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!("bolide-spawn-{}-{seq}.log", std::process::id()));
    let file = std::fs::File::create(&log)
        .map_err(|e| SpawnError(format!("--spawn: cannot create its log {}: {e}", log.display())))?;
    let err_file = file.try_clone().map_err(|e| SpawnError(format!("--spawn: {e}")))?;
    // Its own process group, so stopping it ends everything it started.
    let mut command = Command::new("sh");
    command.envs(plan.env.iter().map(|(k, v)| (k, v)));
    let child = command
        .args(["-c", &plan.command])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err_file)
        .process_group(0)
        .spawn()
        .map_err(|e| SpawnError(format!("--spawn {:?}: cannot start sh: {e}", plan.command)))?;
    let pid = child.id();
    let mut s = Spawned { child, log, pid };
    let begin = Instant::now();
    loop {
        if let Ok(Some(status)) = s.child.try_wait() {
            return Err(SpawnError(format!(
                "--spawn {:?} ended ({status}) before {} answered{}",
                plan.command,
                plan.ready.url,
                s.tail()
            )));
        }
        match plan.ready.status(Duration::from_secs(1)) {
            Ok(code) if (200..300).contains(&code) => return Ok(s),
            _ if cancel.is_cancelled() => {
                return Err(SpawnError(format!("interrupted while waiting for {}", plan.ready.url)))
            }
            Ok(code) if begin.elapsed() >= plan.timeout => {
                return Err(SpawnError(format!(
                    "--spawn {:?}: {} still answers {code}, not 2xx, after {:?}{}",
                    plan.command,
                    plan.ready.url,
                    plan.timeout,
                    s.tail()
                )))
            }
            Err(e) if begin.elapsed() >= plan.timeout => {
                return Err(SpawnError(format!(
                    "--spawn {:?}: {} not ready after {:?} (last try: {e}){}",
                    plan.command,
                    plan.ready.url,
                    plan.timeout,
                    s.tail()
                )))
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

impl Spawned {
    /// The last lines the server wrote, for error messages.
    pub fn tail(&self) -> String {
        let text = std::fs::read(&self.log).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        if lines.is_empty() {
            return "; it wrote nothing".into();
        }
        let from = lines.len().saturating_sub(15);
        // The server's own words, shown escaped (colours and terminal sequences as text).
        let shown: Vec<String> = lines[from..].iter().map(|l| crate::redact::printable(l).into_owned()).collect();
        format!("; the last lines it wrote:\n  | {}", shown.join("\n  | "))
    }

    /// Stops the server and everything it started: SIGTERM to the whole process group, then a
    /// wait until every process of the group is gone (not only `sh`, which dies at once when the
    /// command was not `exec`ed), for up to [`STOP_GRACE`]; SIGKILL to what is left after that.
    pub fn stop(mut self) -> Option<std::process::ExitStatus> {
        self.end()
    }

    fn end(&mut self) -> Option<std::process::ExitStatus> {
        self.kill_group(libc::SIGTERM);
        let begin = Instant::now();
        let mut status = None;
        loop {
            if status.is_none() {
                status = self.child.try_wait().ok().flatten();
            }
            if status.is_some() && !group_alive(self.pid) {
                return status;
            }
            if begin.elapsed() >= STOP_GRACE {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_group(libc::SIGKILL);
        status.or_else(|| self.child.wait().ok())
    }

    /// Sends `signal` to the server's whole process group (a fault: SIGKILL, SIGSTOP, SIGCONT).
    pub fn signal(&self, signal: i32) {
        self.kill_group(signal);
    }

    /// After a SIGKILL: waits (a few seconds at most) until the server and everything it
    /// started are gone, so that its port is free for a new start.
    pub fn reap(&mut self) {
        let _ = self.child.wait();
        let begin = Instant::now();
        while group_alive(self.pid) && begin.elapsed() < STOP_GRACE {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill_group(&self, signal: i32) {
        // The child leads its own group (pgid == its pid); never signal a group that is ours.
        let pid = self.pid as i32;
        // SAFETY: getpgrp has no preconditions; kill only sends a signal.
        let ours = unsafe { libc::getpgrp() };
        if pid > 1 && pid != ours {
            unsafe {
                libc::kill(-pid, signal);
            }
        }
    }
}

/// How long a stopped server may take to shut down before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Whether any process of group `pgid` is still running (zombies, already dead, do not count).
pub fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|e| {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { return false };
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after it.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let pgrp = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
        pgrp == Some(pgid) && state != "Z" && state != "X"
    })
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.end();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_urls() {
        let r = ReadyUrl::parse("http://127.0.0.1:9/health?x=1").unwrap();
        assert_eq!(r.path, "/health?x=1");
        assert_eq!(r.host, "127.0.0.1:9");
        assert!(ReadyUrl::parse("https://127.0.0.1/").unwrap_err().contains("only http://"));
        assert!(ReadyUrl::parse("nope").unwrap_err().contains("not a URL"));
        assert_eq!(ReadyUrl::parse("http://[::1]:8/").unwrap().addrs[0], "[::1]:8".parse().unwrap());
    }
}

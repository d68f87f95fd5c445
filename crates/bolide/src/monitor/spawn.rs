//! `--spawn "COMMAND" --ready-url URL`: bolide starts the server under test, waits until it
//! answers 2xx, watches it while the load runs and stops it at the end. A server that fails to
//! start or never becomes ready is reported with the tail of its output.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::problem::Problem;

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
    pub fn parse(text: &str) -> Result<ReadyUrl, Problem> {
        let u = url::Url::parse(text).map_err(|e| format!("--ready-url {text:?} is not a URL: {e}"))?;
        if u.scheme() != "http" {
            return Err(format!("--ready-url {text:?}: only http:// URLs are polled").into());
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
    pub fn status(&self, timeout: Duration) -> Result<u16, Problem> {
        let mut last = String::from("no address");
        for a in &self.addrs {
            match self.get(a, timeout) {
                Ok(code) => return Ok(code),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last.into())
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
    /// `BOLIDE_SPAWNED`'s value in the server's environment, which every process it starts
    /// inherits: how its processes are found after they left its process group (`setsid`, a
    /// daemon's double fork).
    mark: String,
}

/// The environment variable that marks every process of a spawned server.
const MARK: &str = "BOLIDE_SPAWNED";

/// Starts `command` on a thread of its own that lives as long as bolide: a parent-death signal
/// fires when the thread that started the child ends, so no server is started from a thread that
/// ends before bolide does (a fault's thread, a run's).
fn spawn_child(command: Command) -> std::io::Result<Child> {
    type Job = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Option<std::sync::Mutex<std::sync::mpsc::Sender<Job>>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let started = std::thread::Builder::new().name("bolide-spawner".into()).spawn(move || {
            for (mut command, back) in rx {
                let _ = back.send(command.spawn());
            }
        });
        started.ok().map(|_| std::sync::Mutex::new(tx))
    });
    let gone = || std::io::Error::other("bolide's thread that starts servers is gone");
    let Some(tx) = spawner else { return Err(gone()) };
    let (back, answer) = std::sync::mpsc::channel();
    tx.lock().unwrap_or_else(|p| p.into_inner()).send((command, back)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
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
    // Its own process group, so stopping it ends everything it started; marked in its
    // environment, so that what left the group is found too; killed if bolide dies.
    let mark = format!("{}.{seq}", std::process::id());
    let mut command = Command::new("sh");
    command.envs(plan.env.iter().map(|(k, v)| (k, v))).env(MARK, &mark);
    command.args(["-c", &plan.command]).stdin(Stdio::null()).stdout(file).stderr(err_file).process_group(0);
    let parent = std::process::id() as i32;
    // SAFETY: between fork and exec only async-signal-safe calls (prctl, getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            // bolide died before the signal was asked for: nobody would send it.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let child = spawn_child(command).map_err(|e| {
        SpawnError(format!("--spawn {:?}: cannot start sh: {e}", crate::redact::spawn_command(&plan.command)))
    })?;
    let pid = child.id();
    let mut s = Spawned { child, log, pid, mark };
    let begin = Instant::now();
    loop {
        if let Ok(Some(status)) = s.child.try_wait() {
            return Err(SpawnError(format!(
                "--spawn {:?} ended ({status}) before {} answered{}",
                crate::redact::spawn_command(&plan.command),
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
                    crate::redact::spawn_command(&plan.command),
                    plan.ready.url,
                    plan.timeout,
                    s.tail()
                )))
            }
            Err(e) if begin.elapsed() >= plan.timeout => {
                return Err(SpawnError(format!(
                    "--spawn {:?}: {} not ready after {:?} (last try: {e}){}",
                    crate::redact::spawn_command(&plan.command),
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
        let members = self.members();
        self.kill_all(&members, libc::SIGTERM);
        let begin = Instant::now();
        let mut status = None;
        loop {
            if status.is_none() {
                status = self.child.try_wait().ok().flatten();
            }
            if status.is_some() && !group_alive(self.pid) && self.members().is_empty() {
                return status;
            }
            if begin.elapsed() >= STOP_GRACE {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let members = self.members();
        self.kill_all(&members, libc::SIGKILL);
        status.or_else(|| self.child.wait().ok())
    }

    /// Sends `signal` to the server's whole tree: its process group, and every process that
    /// carries its mark (those that left the group: `setsid`, a daemon). A fault: SIGKILL,
    /// SIGSTOP, SIGCONT.
    pub fn signal(&self, signal: i32) {
        let members = self.members();
        self.kill_all(&members, signal);
    }

    /// After a SIGKILL: waits (a few seconds at most) until the server and everything it
    /// started are gone, so that its port is free for a new start.
    pub fn reap(&mut self) {
        let _ = self.child.wait();
        let begin = Instant::now();
        while (group_alive(self.pid) || !self.members().is_empty()) && begin.elapsed() < STOP_GRACE {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's processes alive now that carry its mark or are in its group (zombies
    /// aside), bolide never among them.
    pub fn members(&self) -> Vec<u32> {
        let want = format!("{MARK}={}", self.mark);
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if pid == me {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            let mut fields = rest.split_whitespace();
            let state = fields.next().unwrap_or("Z");
            let pgrp = fields.nth(1).and_then(|f| f.parse::<u32>().ok());
            if state == "Z" || state == "X" {
                continue;
            }
            let marked = std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == want.as_bytes()));
            if marked || pgrp == Some(self.pid) {
                out.push(pid);
            }
        }
        out
    }

    /// What of the server outlived a SIGKILL to its tree, in words: a process of its tree still
    /// running, or one still listening where the server was ready (one that left its group and
    /// its environment behind). None when nothing did.
    pub fn survivor(&self, ready: &ReadyUrl) -> Option<String> {
        let name = |pid: u32| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("pid {pid} ({})", crate::redact::printable(comm.trim()))
        };
        if let Some(pid) = self.members().first() {
            return Some(format!("{} of the server's tree is still running", name(*pid)));
        }
        let port = ready.addrs.first().map(SocketAddr::port)?;
        let pid = crate::monitor::pid_listening_on(port)?;
        Some(format!("{} still listens on port {port}, where the server was ready", name(pid)))
    }

    fn kill_all(&self, members: &[u32], signal: i32) {
        self.kill_group(signal);
        for &pid in members {
            if pid > 1 && pid != std::process::id() {
                // SAFETY: kill only sends a signal.
                unsafe {
                    libc::kill(pid as i32, signal);
                }
            }
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
        assert!(ReadyUrl::parse("https://127.0.0.1/").unwrap_err().to_string().contains("only http://"));
        assert!(ReadyUrl::parse("nope").unwrap_err().to_string().contains("not a URL"));
        assert_eq!(ReadyUrl::parse("http://[::1]:8/").unwrap().addrs[0], "[::1]:8".parse().unwrap());
    }
}

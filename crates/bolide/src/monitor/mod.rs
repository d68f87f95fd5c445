//! Watching the server under test: CPU% (percent of one core, as `top` and pidusage report it, so
//! it may exceed 100) and resident memory of each watched process **and its descendants** (a
//! `meteor run` starts the app in a child node process beside MongoDB), sampled from /proc.
//!
//! Processes are named by PID, or by a port they listen on. CPU is the change of utime + stime
//! between two samples over the wall time between them; a process first seen in a sample counts from
//! that sample on. A watched process that exits is recorded with the time it vanished.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::problem::Problem;

pub mod generator;
pub mod monti;
pub mod probe;
pub mod scrape;
pub mod spawn;

/// What to watch, as given on the command line (`NAME=PID` or `NAME=:PORT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    Pid(u32),
    Port(u16),
}

/// Parses `NAME=PID` or `NAME=:PORT`.
pub fn parse_spec(text: &str) -> Result<(String, Spec), Problem> {
    let (name, what) = text
        .split_once('=')
        .filter(|(n, _)| !n.is_empty())
        .ok_or_else(|| format!("--monitor {text:?} must look like NAME=PID or NAME=:PORT"))?;
    let spec = match what.strip_prefix(':') {
        Some(port) => Spec::Port(port.parse().map_err(|_| format!("--monitor {text:?}: {port:?} is not a port"))?),
        None => Spec::Pid(what.parse().map_err(|_| format!("--monitor {text:?}: {what:?} is not a process id"))?),
    };
    Ok((name.to_string(), spec))
}

/// Clock ticks per second of /proc's CPU times.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// (parent pid, utime + stime in ticks) of a live process, from /proc/PID/stat.
pub fn stat(pid: u32) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some((stat_fields(&text)?.get(1)?.parse().ok()?, ticks_of_stat(&text)?))
}

/// The fields after the command name of a /proc stat line; None for a zombie (exited, not yet
/// reaped: no CPU or memory left, it is gone).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    // The command name is in parentheses and may hold spaces; fields after it are plain.
    let f: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split_whitespace().collect();
    (!matches!(f.first(), Some(&"Z") | Some(&"X") | None)).then_some(f)
}

/// utime + stime of a /proc stat line (a process's or a thread's), in clock ticks.
fn ticks_of_stat(text: &str) -> Option<u64> {
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let f = stat_fields(text)?;
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// utime + stime of a live process and cutime + cstime (its children that ended and were
/// reaped), in clock ticks.
fn ticks_with_reaped(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&text)?;
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok());
    Some((n(11)? + n(12)?, n(13)? + n(14)?))
}

/// Resident memory of a process in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Proportional memory of a process in bytes (Pss: its private pages, and its share of the pages
/// it shares), from /proc/PID/smaps_rollup: what a tree of processes sharing most of their pages
/// (a browser's) really holds, where summing their RSS counts the shared pages once per process.
pub fn pss_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Pss:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Every process on the machine with its parent.
fn parents() -> HashMap<u32, u32> {
    let mut out = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if let Some((ppid, _)) = stat(pid) {
                    out.insert(pid, ppid);
                }
            }
        }
    }
    out
}

/// `pid` and all its descendants that are alive now.
pub fn tree(pid: u32) -> Vec<u32> {
    let parents = parents();
    if !parents.contains_key(&pid) {
        return Vec::new();
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// The process listening on TCP `port` (IPv4 or IPv6), if this user can see it.
pub fn pid_listening_on(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex; st 0A is LISTEN; inode is field 9.
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else { continue };
            let listening = *state == "0A";
            let p = local.rsplit(':').next().and_then(|h| u16::from_str_radix(h, 16).ok());
            if listening && p == Some(port) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let dir = std::fs::read_dir("/proc").ok()?;
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                if inodes.iter().any(|i| link.to_str() == Some(i.as_str())) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// Resolves a spec to a live process id, or says why not.
pub fn resolve(name: &str, spec: &Spec) -> Result<u32, Problem> {
    match spec {
        Spec::Pid(pid) => {
            if stat(*pid).is_some() {
                Ok(*pid)
            } else {
                Err(format!("--monitor {name}={pid}: no process {pid}").into())
            }
        }
        Spec::Port(port) => pid_listening_on(*port).ok_or_else(|| {
            Problem::from(format!("--monitor {name}=:{port}: nobody (visible to this user) listens on port {port}"))
        }),
    }
}

/// One sample of one watched process tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since sampling started.
    pub t: f64,
    /// Percent of one core over the interval before this sample.
    pub cpu_pct: f64,
    pub rss_bytes: u64,
}

/// A watched process tree and its samples.
#[derive(Debug, Clone)]
pub struct Watched {
    pub name: String,
    pub pid: u32,
    pub samples: Vec<Sample>,
    /// Seconds since the start at which the process was found gone.
    pub vanished_s: Option<f64>,
    /// A tree of many short-lived helpers that it reaps itself (a browser's renderers): memory
    /// as the processes' proportional share (Pss), not their RSS summed; and the CPU of a helper
    /// that ended between two samples counted (it reappears in its reaper's cutime: that, less
    /// what was counted of the helper already).
    pub proportional: bool,
    /// The processes it followed after the first (a server restarted by a fault): from when
    /// (seconds since the start), which pid.
    pub followed: Vec<(f64, u32)>,
    last: HashMap<u32, u64>,
    last_at: Option<Instant>,
}

impl Watched {
    pub fn new(name: &str, pid: u32) -> Watched {
        Watched {
            name: name.to_string(),
            pid,
            samples: Vec::new(),
            vanished_s: None,
            proportional: false,
            followed: Vec::new(),
            last: HashMap::new(),
            last_at: None,
        }
    }

    /// Takes a sample at `now` (`start` is the run's start). The first call only sets the baseline.
    pub fn sample(&mut self, start: Instant, now: Instant) {
        if self.vanished_s.is_some() {
            return;
        }
        let members = tree(self.pid);
        if members.is_empty() {
            self.vanished_s = Some(now.duration_since(start).as_secs_f64());
            return;
        }
        let mut ticks_now = HashMap::new();
        let mut rss = 0;
        let mut delta_ticks = 0u64;
        // With `proportional`: helpers seen last time and gone now, counted up to then.
        let mut gone: u64 = 0;
        if self.proportional {
            gone = self.last.iter().filter(|(p, _)| !members.contains(p)).map(|(_, t)| *t).sum();
        }
        let mut grew: u64 = 0;
        for pid in members {
            let ticks = match self.proportional {
                true => ticks_with_reaped(pid).map(|(own, reaped)| own + reaped),
                false => stat(pid).map(|(_, t)| t),
            };
            if let Some(ticks) = ticks {
                if let Some(prev) = self.last.get(&pid) {
                    grew += ticks.saturating_sub(*prev);
                }
                ticks_now.insert(pid, ticks);
                let memory = if self.proportional { pss_bytes(pid).or_else(|| rss_bytes(pid)) } else { rss_bytes(pid) };
                rss += memory.unwrap_or(0);
            }
        }
        delta_ticks += grew.saturating_sub(gone);
        if let Some(at) = self.last_at {
            let wall = now.duration_since(at).as_secs_f64();
            if wall > 0.0 {
                let cpu_pct = delta_ticks as f64 / clock_ticks() / wall * 100.0;
                self.samples.push(Sample { t: now.duration_since(start).as_secs_f64(), cpu_pct, rss_bytes: rss });
            }
        }
        self.last = ticks_now;
        self.last_at = Some(now);
    }

    /// (average CPU%, peak CPU%, average RSS, peak RSS) over the samples.
    pub fn stats(&self) -> (f64, f64, f64, u64) {
        let n = self.samples.len().max(1) as f64;
        let avg_cpu = self.samples.iter().map(|s| s.cpu_pct).sum::<f64>() / n;
        let peak_cpu = self.samples.iter().map(|s| s.cpu_pct).fold(0.0, f64::max);
        let avg_rss = self.samples.iter().map(|s| s.rss_bytes as f64).sum::<f64>() / n;
        let peak_rss = self.samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0);
        (avg_cpu, peak_cpu, avg_rss, peak_rss)
    }
}

/// Samples every watched process, and bolide's own load threads, each `interval` on a thread of
/// its own until stopped. What it sampled so far can be read while it runs ([`Monitor::snapshot`]).
pub struct Monitor {
    /// The scraped endpoints' and the Monti endpoint's series so far, for the live dashboard.
    pub scraped: ServerSeries,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    shared: std::sync::Arc<std::sync::Mutex<(Vec<Watched>, generator::Generator)>>,
    handle: std::thread::JoinHandle<()>,
    start: Instant,
}

/// Points a watched name at a new process (a restarted server), from any thread.
#[derive(Clone)]
pub struct Follower {
    shared: std::sync::Arc<std::sync::Mutex<(Vec<Watched>, generator::Generator)>>,
    start: Instant,
}

impl Follower {
    /// From now on, `name` is process `pid` and its descendants: sampled afresh (its first
    /// sample a baseline), the time it changed kept in `followed`.
    pub fn follow(&self, name: &str, pid: u32) {
        let mut guard = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = guard.0.iter_mut().find(|w| w.name == name) {
            w.pid = pid;
            w.vanished_s = None;
            w.last.clear();
            w.last_at = None;
            w.followed.push((self.start.elapsed().as_secs_f64(), pid));
        }
    }
}

impl Monitor {
    pub fn start(watched: Vec<Watched>, interval: Duration) -> Monitor {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let shared = std::sync::Arc::new(std::sync::Mutex::new((watched, generator::Generator::default())));
        let state = std::sync::Arc::clone(&shared);
        let start = Instant::now();
        let handle = std::thread::spawn(move || {
            let sample_all = |start: Instant, now: Instant| {
                let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
                let (watched, own) = &mut *guard;
                own.sample(start, now);
                for w in watched.iter_mut() {
                    w.sample(start, now);
                }
            };
            sample_all(start, start);
            let mut next = start + interval;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let now = Instant::now();
                if now >= next {
                    sample_all(start, now);
                    next += interval;
                } else {
                    std::thread::sleep((next - now).min(Duration::from_millis(50)));
                }
            }
            // The tail after the last whole interval counts too when it is long enough to mean
            // something (a short run has little else).
            let now = Instant::now();
            let last = next - interval;
            let span = now.duration_since(last);
            if span >= interval / 2 || (last == start && span >= Duration::from_millis(100)) {
                sample_all(start, now);
            }
        });
        Monitor { scraped: ServerSeries::default(), stop, shared, handle, start }
    }

    /// What points a watched name at a new process while this samples.
    pub fn follower(&self) -> Follower {
        Follower { shared: std::sync::Arc::clone(&self.shared), start: self.start }
    }

    /// What was sampled so far, as the result document will have it (for the live dashboard).
    pub fn snapshot(&self) -> (Vec<MonitorResult>, generator::GeneratorResult) {
        let guard = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        (guard.0.iter().map(Into::into).collect(), guard.1.result())
    }

    /// Stops sampling and hands back what was sampled.
    pub fn finish(self) -> Vec<Watched> {
        self.finish_all().0
    }

    /// Stops sampling: the watched processes and bolide's own load threads.
    pub fn finish_all(self) -> (Vec<Watched>, generator::Generator) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.handle.join();
        let mut guard = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *guard)
    }
}

/// What the scraped endpoints and the Monti endpoint gave so far, read on demand (the live
/// dashboard's).
#[derive(Clone, Default)]
pub struct ServerSeries {
    pub scraped: scrape::Live,
    pub monti: Option<monti::Live>,
}

impl ServerSeries {
    pub fn snapshot(&self) -> Vec<scrape::ScrapeResult> {
        let mut out = self.scraped.snapshot();
        out.extend(self.monti.as_ref().map(monti::Live::snapshot));
        out
    }
}

/// One watched process in a result document.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MonitorResult {
    pub name: String,
    pub pid: u32,
    pub avg_cpu_pct: f64,
    pub peak_cpu_pct: f64,
    pub avg_rss_bytes: f64,
    pub peak_rss_bytes: u64,
    /// Seconds after the start at which the process was gone (or was never found).
    pub vanished_s: Option<f64>,
    /// One sample per interval: seconds since the start, CPU% of one core, RSS bytes.
    pub samples: Vec<(f64, f64, u64)>,
    /// The processes watched after the first (a server a fault restarted): from when (seconds
    /// since the start), which pid; absent when there was one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followed: Vec<(f64, u32)>,
}

impl From<&Watched> for MonitorResult {
    fn from(w: &Watched) -> Self {
        let (avg_cpu_pct, peak_cpu_pct, avg_rss_bytes, peak_rss_bytes) = w.stats();
        MonitorResult {
            name: w.name.clone(),
            pid: w.pid,
            avg_cpu_pct,
            peak_cpu_pct,
            avg_rss_bytes,
            peak_rss_bytes,
            vanished_s: w.vanished_s,
            samples: w.samples.iter().map(|s| (s.t, s.cpu_pct, s.rss_bytes)).collect(),
            followed: w.followed.clone(),
        }
    }
}

/// Starts watching what `--monitor` named, and the server bolide spawned (as "server"); bolide's
/// own load threads are always watched. A process that cannot be found is reported on `warn` and
/// recorded as gone from the start (the run goes on).
pub fn start_for(
    specs: &[(String, Spec)],
    spawned: Option<&spawn::Spawned>,
    interval: Duration,
    warn: &mut dyn std::io::Write,
) -> Monitor {
    let mut watched = Vec::new();
    if let Some(s) = spawned {
        watched.push(Watched::new("server", s.pid));
    }
    for (name, spec) in specs {
        match resolve(name, spec) {
            Ok(pid) => watched.push(Watched::new(name, pid)),
            Err(e) => {
                let _ = writeln!(warn, "warning: {e}; recorded as gone, the run goes on");
                let mut w = Watched::new(name, 0);
                w.vanished_s = Some(0.0);
                watched.push(w);
            }
        }
    }
    Monitor::start(watched, interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(parse_spec("app=123"), Ok(("app".into(), Spec::Pid(123))));
        assert_eq!(parse_spec("db=:27017"), Ok(("db".into(), Spec::Port(27017))));
        for bad in ["app", "=1", "app=x", "app=:99999", "app=:"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn own_process_is_seen() {
        let me = std::process::id();
        let (ppid, _) = stat(me).unwrap();
        assert!(ppid > 0);
        assert!(rss_bytes(me).unwrap() > 1 << 20);
        assert_eq!(tree(me)[0], me);
        assert!(tree(u32::MAX - 1).is_empty());
        assert!(resolve("x", &Spec::Pid(u32::MAX - 1)).unwrap_err().to_string().contains("no process"));
    }

    #[test]
    fn the_listening_process_is_found_by_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port), Some(std::process::id()));
        drop(l);
        assert_eq!(pid_listening_on(port), None);
        assert!(resolve("x", &Spec::Port(port)).unwrap_err().to_string().contains("nobody"));
    }
}

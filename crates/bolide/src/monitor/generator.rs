//! bolide watching itself: the CPU of its own load threads (named `bolide-worker-N` and
//! `bolide-vu-N`) and the machine's idle CPU, once per monitor interval. When a load thread is
//! saturated, or the machine has no idle CPU left, the numbers measure the tool (or the machine)
//! rather than the server, and the run is marked suspect.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// A load thread at or above this share of one core is saturated.
pub const SATURATED_THREAD_PCT: f64 = 90.0;
/// The machine is out of idle CPU below this share of all its cores.
pub const MACHINE_IDLE_FLOOR_PCT: f64 = 5.0;

/// Thread-name prefixes of bolide's load threads (/proc shows 15 characters of a name).
const LOAD_THREADS: [&str; 2] = ["bolide-worker-", "bolide-vu-"];
/// Thread-name prefix of the live dashboard's threads (`dashboard::THREAD_NAME`), counted apart.
const DASHBOARD_THREADS: &str = "bolide-dash";

/// One sample of the generator and the machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenSample {
    pub t: f64,
    /// All load threads together, percent of one core.
    pub cpu_pct: f64,
    /// The busiest load thread, percent of one core.
    pub busiest_pct: f64,
    /// Idle CPU of the whole machine, percent of all its cores.
    pub machine_idle_pct: f64,
    /// The live dashboard's threads, percent of one core (None: no dashboard).
    pub dashboard_pct: Option<f64>,
}

/// Flagged samples that make a run of `n` samples suspect: one in ten, at least one.
fn doubt_limit(n: usize) -> usize {
    n.div_ceil(10).max(1)
}

/// Samples of bolide's own load threads.
#[derive(Debug, Default)]
pub struct Generator {
    pub samples: Vec<GenSample>,
    threads_seen: std::collections::HashSet<u32>,
    last: HashMap<u32, u64>,
    last_dashboard: HashMap<u32, u64>,
    last_machine: Option<(u64, u64)>,
    last_at: Option<Instant>,
}

/// CPU ticks of each load thread of this process, and of each dashboard thread, by thread id.
fn thread_ticks() -> (HashMap<u32, u64>, HashMap<u32, u64>) {
    let (mut load, mut dashboard) = (HashMap::new(), HashMap::new());
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return (load, dashboard) };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else { continue };
        let into = if LOAD_THREADS.iter().any(|p| comm.starts_with(p)) {
            &mut load
        } else if comm.starts_with(DASHBOARD_THREADS) {
            &mut dashboard
        } else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        if let Some(ticks) = super::ticks_of_stat(&stat) {
            into.insert(tid, ticks);
        }
    }
    (load, dashboard)
}

/// (idle ticks, total ticks) of all cores, from the first line of /proc/stat.
fn machine_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line.split_whitespace().take(8).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal
    if v.len() < 8 {
        return None;
    }
    Some((v[3] + v[4], v.iter().sum()))
}

impl Generator {
    /// Takes a sample at `now`; the first call only sets the baseline.
    pub fn sample(&mut self, start: Instant, now: Instant) {
        let (ticks, dashboard) = thread_ticks();
        let machine = machine_ticks();
        // A load thread that ended since the last sample took its last ticks with it: such a
        // sample would undercount, so it is left out (this happens at the end of a run).
        let complete = self.last.keys().all(|tid| ticks.contains_key(tid));
        if let (Some(at), true) = (self.last_at, complete) {
            let wall = now.duration_since(at).as_secs_f64();
            if wall > 0.0 {
                let per_core = super::clock_ticks() * wall;
                let mut total = 0u64;
                let mut busiest = 0u64;
                for (tid, t) in &ticks {
                    // A thread born since the last sample spent all its ticks in this interval.
                    let d = t.saturating_sub(self.last.get(tid).copied().unwrap_or(0));
                    total += d;
                    busiest = busiest.max(d);
                }
                let machine_idle_pct = match (self.last_machine, machine) {
                    (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => (i1 - i0) as f64 * 100.0 / (t1 - t0) as f64,
                    _ => 100.0,
                };
                // A dashboard thread that ended since takes its ticks along: a small undercount.
                let dash: u64 = dashboard
                    .iter()
                    .map(|(tid, t)| t.saturating_sub(self.last_dashboard.get(tid).copied().unwrap_or(0)))
                    .sum();
                let served = !dashboard.is_empty() || !self.last_dashboard.is_empty();
                self.samples.push(GenSample {
                    t: now.duration_since(start).as_secs_f64(),
                    cpu_pct: total as f64 * 100.0 / per_core,
                    busiest_pct: busiest as f64 * 100.0 / per_core,
                    machine_idle_pct,
                    dashboard_pct: served.then(|| dash as f64 * 100.0 / per_core),
                });
            }
        }
        self.threads_seen.extend(ticks.keys());
        self.last = ticks;
        self.last_dashboard = dashboard;
        self.last_machine = machine;
        self.last_at = Some(now);
    }

    /// What the result document keeps, with the verdict.
    pub fn result(&self) -> GeneratorResult {
        let n = self.samples.len();
        let avg =
            |f: fn(&GenSample) -> f64| if n == 0 { 0.0 } else { self.samples.iter().map(f).sum::<f64>() / n as f64 };
        let saturated_samples = self.samples.iter().filter(|s| s.busiest_pct >= SATURATED_THREAD_PCT).count();
        let machine_busy_samples = self.samples.iter().filter(|s| s.machine_idle_pct < MACHINE_IDLE_FLOOR_PCT).count();
        let limit = doubt_limit(n);
        let mut reasons = Vec::new();
        if n > 0 && saturated_samples >= limit {
            reasons.push(format!(
                "a bolide load thread was saturated (>= {SATURATED_THREAD_PCT:.0}% of a core) in {saturated_samples} of {n} samples"
            ));
        }
        if n > 0 && machine_busy_samples >= limit {
            reasons.push(format!(
                "the machine had under {MACHINE_IDLE_FLOOR_PCT:.0}% idle CPU in {machine_busy_samples} of {n} samples"
            ));
        }
        GeneratorResult {
            threads: self.threads_seen.len(),
            avg_cpu_pct: avg(|s| s.cpu_pct),
            peak_cpu_pct: self.samples.iter().map(|s| s.cpu_pct).fold(0.0, f64::max),
            peak_thread_pct: self.samples.iter().map(|s| s.busiest_pct).fold(0.0, f64::max),
            avg_machine_idle_pct: avg(|s| s.machine_idle_pct),
            min_machine_idle_pct: self.samples.iter().map(|s| s.machine_idle_pct).fold(100.0, f64::min),
            saturated_samples,
            machine_busy_samples,
            suspect: (!reasons.is_empty()).then(|| reasons.join("; ")),
            dashboard_cpu_pct: {
                let dash: Vec<f64> = self.samples.iter().filter_map(|s| s.dashboard_pct).collect();
                (!dash.is_empty()).then(|| dash.iter().sum::<f64>() / dash.len() as f64)
            },
            samples: self.samples.iter().map(|s| (s.t, s.cpu_pct, s.busiest_pct, s.machine_idle_pct)).collect(),
            cpu_s: None,
            cpu_us_per_request: None,
            cpu_us_per_message: None,
            peak_rss_bytes: None,
        }
    }
}

/// bolide's own load in a result document.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GeneratorResult {
    /// Load threads seen.
    pub threads: usize,
    /// All load threads together, percent of one core.
    pub avg_cpu_pct: f64,
    pub peak_cpu_pct: f64,
    /// The busiest load thread in its busiest sample, percent of one core.
    pub peak_thread_pct: f64,
    /// Idle CPU of the whole machine, percent of all cores.
    pub avg_machine_idle_pct: f64,
    pub min_machine_idle_pct: f64,
    /// Samples in which a load thread was saturated.
    pub saturated_samples: usize,
    /// Samples in which the machine had (almost) no idle CPU.
    pub machine_busy_samples: usize,
    /// Why the numbers may measure the tool or the machine rather than the server (absent: no doubt).
    pub suspect: Option<String>,
    /// The live dashboard's threads (`--dashboard`), percent of one core on average; absent when
    /// no dashboard was served (and in documents of version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_cpu_pct: Option<f64>,
    /// Per sample: seconds since the start, load threads' CPU%, busiest thread's CPU%, machine idle%.
    pub samples: Vec<(f64, f64, f64, f64)>,
    /// The load threads' CPU time over the whole run, seconds, from each thread's own clock (exact,
    /// not sampled); absent in documents made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// HTTP: that CPU time per request (responses and errors), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// DDP: that CPU time per DDP message (received and sent), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_message: Option<f64>,
    /// bolide's peak resident memory when the run ended (the kernel's high-water mark of the
    /// process, VmHWM), bytes; a merged run's is the sum of its segments' (every process at its
    /// peak). Absent where the kernel does not say (and in documents made before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

impl GeneratorResult {
    /// Whether `flagged` of the run's samples are enough to doubt it: one in ten, at least one. A
    /// merged run keeps no samples of its own, only its segments' counts and suspect marks: any
    /// flagged sample there made a segment suspect.
    fn doubts(&self, flagged: usize) -> bool {
        match self.samples.len() {
            0 => flagged > 0 && self.suspect.is_some(),
            n => flagged >= doubt_limit(n),
        }
    }

    /// A load thread was saturated in enough samples that bolide, not the server, set the pace:
    /// the run's speed figures bound the server's (it was at least that fast).
    pub fn saturated(&self) -> bool {
        self.doubts(self.saturated_samples)
    }

    /// The machine had (almost) no idle CPU in enough samples to doubt absolute figures.
    pub fn machine_busy(&self) -> bool {
        self.doubts(self.machine_busy_samples)
    }

    /// Records the load threads' CPU time (`cpu_ns`) and what it was spent on: `units` requests
    /// (HTTP) or messages (DDP, `per_message`).
    pub fn set_cpu(&mut self, cpu_ns: u64, units: u64, per_message: bool) {
        self.peak_rss_bytes = own_peak_rss();
        if cpu_ns == 0 {
            return;
        }
        self.cpu_s = Some(cpu_ns as f64 / 1e9);
        let per = (units > 0).then(|| cpu_ns as f64 / 1e3 / units as f64);
        if per_message {
            self.cpu_us_per_message = per;
        } else {
            self.cpu_us_per_request = per;
        }
    }
}

/// This process's peak resident memory so far (`VmHWM` of /proc/self/status), bytes.
pub fn own_peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kb: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(samples: &[(f64, f64)]) -> Generator {
        Generator {
            samples: samples
                .iter()
                .enumerate()
                .map(|(i, (busiest, idle))| GenSample {
                    t: i as f64 + 1.0,
                    cpu_pct: *busiest,
                    busiest_pct: *busiest,
                    machine_idle_pct: *idle,
                    dashboard_pct: None,
                })
                .collect(),
            ..Generator::default()
        }
    }

    #[test]
    fn verdicts() {
        let calm = gen(&[(20.0, 60.0); 20]).result();
        assert_eq!(calm.suspect, None);
        assert_eq!((calm.saturated_samples, calm.machine_busy_samples), (0, 0));
        // One saturated second in twenty stays below one in ten.
        let mut rows = vec![(20.0, 60.0); 19];
        rows.push((99.0, 60.0));
        assert_eq!(gen(&rows).result().suspect, None);
        rows[3] = (95.0, 60.0);
        let r = gen(&rows).result();
        assert_eq!(r.saturated_samples, 2);
        assert!(
            r.suspect.as_deref().unwrap().contains("saturated") && r.suspect.as_deref().unwrap().contains("2 of 20")
        );
        let busy = gen(&[(30.0, 1.0); 3]).result();
        assert!(busy.suspect.unwrap().contains("under 5% idle CPU in 3 of 3"));
        assert_eq!(gen(&[]).result().suspect, None, "no samples, no verdict");
    }

    #[test]
    fn a_busy_load_thread_is_seen() {
        use std::sync::atomic::{AtomicU8, Ordering};
        // 0: wait, 1: spin, 2: spun enough (and still alive, so that it can be sampled), 3: leave.
        let state = std::sync::Arc::new(AtomicU8::new(0));
        let seen = state.clone();
        // The thread's own CPU time, which no load on the machine can fake.
        fn thread_cpu_s() -> f64 {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: clock_gettime writes the timespec it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        }
        let h = std::thread::Builder::new()
            .name("bolide-vu-99".into())
            .spawn(move || {
                let t = Instant::now();
                while seen.load(Ordering::SeqCst) == 0 && t.elapsed().as_secs() < 30 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                // Spin until 300 ms of CPU are used (bounded in wall time on a starved machine).
                let (cpu0, mut x) = (thread_cpu_s(), 0u64);
                while thread_cpu_s() - cpu0 < 0.3 && t.elapsed().as_secs() < 30 {
                    x = x.wrapping_add(1);
                    std::hint::black_box(x);
                }
                seen.store(2, Ordering::SeqCst);
                while seen.load(Ordering::SeqCst) != 3 && t.elapsed().as_secs() < 60 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            })
            .unwrap();
        let mut g = Generator::default();
        let start = Instant::now();
        g.sample(start, start);
        state.store(1, Ordering::SeqCst);
        while state.load(Ordering::SeqCst) != 2 && start.elapsed().as_secs() < 40 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        g.sample(start, Instant::now());
        state.store(3, Ordering::SeqCst);
        h.join().unwrap();
        let r = g.result();
        assert!(r.threads >= 1);
        // What the thread used between the samples, as /proc counted it (in 10 ms ticks): at least
        // most of its 300 ms, however busy the machine was.
        let (t, _, peak, _) = r.samples[0];
        assert!(peak / 100.0 * t >= 0.25, "{r:?}");
    }
}

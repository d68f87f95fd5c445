//! Monitoring against child processes with a known CPU burn and a known allocation.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use bolide::monitor::{Monitor, Watched};

/// A child that is killed (with its process group) when dropped: nothing outlives the test.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        // The child leads its own process group (pgid == its pid): signal that group only, and
        // never a group that could be ours.
        let pid = self.0.id() as i32;
        // SAFETY: getpgrp has no preconditions; kill only sends a signal.
        let ours = unsafe { libc::getpgrp() };
        if pid > 1 && pid != ours {
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(script: &str) -> Guard {
    use std::os::unix::process::CommandExt;
    // Its own process group, so the guard can end the whole tree.
    Guard(Command::new("sh").args(["-c", script]).process_group(0).spawn().unwrap())
}

fn watch(pid: u32, for_ms: u64) -> Watched {
    let m = Monitor::start(vec![Watched::new("x", pid)], Duration::from_millis(250));
    std::thread::sleep(Duration::from_millis(for_ms));
    m.finish().pop().unwrap()
}

/// CPU seconds a process has used, from its own /proc/PID/stat (utime + stime): the kernel's
/// count, the witness the monitor's figure is held against.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based over the whole line).
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The PIDs of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

#[test]
fn a_busy_grandchild_counts_as_one_core() {
    // The watched shell sleeps; the CPU is burnt by its child, which must be counted.
    // A pure builtin loop, bounded by count (and killed when the test ends).
    let g = spawn("sh -c 'i=0; while [ $i -lt 50000000 ]; do i=$((i+1)); done' & sleep 8");
    let shell = g.0.id();
    // Once the shell has started its child (whenever a busy machine gets there).
    let began = Instant::now();
    while children(shell).is_empty() && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = children(shell);
    assert!(!busy.is_empty(), "the busy child runs");
    let before: f64 = busy.iter().map(|p| cpu_seconds(*p)).sum();
    let began = Instant::now();
    let w = watch(shell, 2_300);
    let after: f64 = busy.iter().map(|p| cpu_seconds(*p)).sum();
    // What the kernel says the child used over the same window: about 100% of a core on a quiet
    // machine, less when other processes take the cores. The monitor must agree with it, however
    // busy the machine is.
    let witness = (after - before) / began.elapsed().as_secs_f64() * 100.0;
    let (avg, peak, _, _) = w.stats();
    // Every 250 ms over 2.3 s: 9 on a quiet machine, fewer when the sampler waits for a core.
    assert!(w.samples.len() >= 3, "{} samples", w.samples.len());
    assert!(witness > 5.0, "the child burnt CPU: {witness:.1}%");
    assert!(
        (avg - witness).abs() <= 10.0 + 0.2 * witness,
        "the monitor counts the grandchild: {avg:.1}% against the kernel's {witness:.1}% ({:?})",
        w.samples
    );
    assert!(peak <= 210.0, "{peak}");
}

#[test]
fn a_known_allocation_shows_in_rss() {
    let mb = 200;
    let dir = tempfile::tempdir().unwrap();
    let touched = dir.path().join("touched");
    let g = spawn(&format!(
        "python3 -c 'import time; b = bytearray({mb} * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen(\"{}\", \"w\").close()\ntime.sleep(8)'",
        touched.display()
    ));
    // Once every page is touched (python says so with a file), however long that takes.
    let began = Instant::now();
    while !touched.exists() && began.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let w = watch(g.0.id(), 1_200);
    let (_, _, _, peak) = w.stats();
    let peak_mb = peak as f64 / (1024.0 * 1024.0);
    assert!((mb as f64..mb as f64 + 60.0).contains(&peak_mb), "{peak_mb:.1} MB");
}

#[test]
fn a_process_that_exits_is_recorded_as_vanished() {
    let g = spawn("sleep 0.6");
    let begin = Instant::now();
    let w = watch(g.0.id(), 1_500);
    let gone = w.vanished_s.expect("recorded as vanished");
    // Within the watch (how long after its start depends on when the sleep began and ended).
    assert!(gone > 0.0 && gone <= begin.elapsed().as_secs_f64(), "{gone}");
    assert!(begin.elapsed() < Duration::from_secs(5));
    assert!(w.samples.iter().all(|s| s.t <= gone));
}

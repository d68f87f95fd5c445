//! Faults seeded into a run (`--fault`): the spawned server killed (`kill@20s`), killed and started
//! again (`restart@20s`), frozen for a while (`stall@20s:2s`, SIGSTOP then SIGCONT), or a share of
//! bolide's own users' connections dropped (`drop@20s:10%`). Each is done at its time by
//! [`Faults::run`] beside the load and recorded on the run's timeline (`stats::faults`), so that
//! the audit, the reconnects and the latency charts can be read against it.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::monitor::spawn::{SpawnPlan, Spawned};
use crate::problem::Problem;
use crate::proto::ws::Drops;
pub use crate::stats::faults::FaultRecord;

/// What a fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// SIGKILL to the spawned server's tree (its process group and every process carrying its
    /// mark); it stays dead. Not done, naming the survivor, when something of it still serves.
    Kill,
    /// SIGKILL as `Kill`, then the server started again with the same command (ready at its
    /// URL); after a `Kill`, only the start.
    Restart,
    /// SIGSTOP to the server's process group, SIGCONT after this long.
    Stall(Duration),
    /// bolide closes this share (0 to 1) of its users' connections, at once, without a word.
    Drop(f64),
}

/// One `--fault`: what, and when (from the run's start).
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub at: Duration,
    pub kind: Kind,
    /// As given: `restart@20s`.
    pub text: String,
}

impl Fault {
    /// Reads `kill@T`, `restart@T`, `stall@T:D` or `drop@T:P%`, its durations with `duration`
    /// (the flags' reader: `duration(flag, text)`).
    pub fn parse<E: std::fmt::Display>(
        text: &str,
        duration: fn(&str, &str) -> Result<Duration, E>,
    ) -> Result<Fault, Problem> {
        let t = text.trim();
        let form = "kill@T, restart@T, stall@T:DURATION or drop@T:PERCENT% (e.g. restart@20s, drop@10s:25%)";
        let Some((what, rest)) = t.split_once('@') else {
            return Err(format!("--fault {t:?}: expected {form}").into());
        };
        let (at, arg) = match rest.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (rest, None),
        };
        let at = duration("--fault", at).map_err(|e| format!("{e} (in {t:?})"))?;
        let kind = match (what, arg) {
            ("kill", None) => Kind::Kill,
            ("restart", None) => Kind::Restart,
            ("stall", Some(d)) => {
                let d = duration("--fault stall", d).map_err(|e| format!("{e} (in {t:?})"))?;
                if d.is_zero() {
                    return Err(format!("--fault {t:?}: a stall lasts longer than 0").into());
                }
                Kind::Stall(d)
            }
            ("drop", Some(p)) => match p.strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()) {
                Some(pct) if pct > 0.0 && pct <= 100.0 => Kind::Drop(pct / 100.0),
                _ => return Err(format!("--fault {t:?}: drop takes a share from 1% to 100%, e.g. drop@10s:25%").into()),
            },
            ("stall", None) => return Err(format!("--fault {t:?}: stall needs how long, e.g. stall@20s:2s").into()),
            ("drop", None) => return Err(format!("--fault {t:?}: drop needs a share, e.g. drop@20s:10%").into()),
            ("kill" | "restart", Some(_)) => {
                return Err(format!("--fault {t:?}: {what} takes only a time: {what}@20s").into())
            }
            _ => return Err(format!("--fault {t:?}: unknown fault {what:?}; expected {form}").into()),
        };
        Ok(Fault { at, kind, text: t.to_string() })
    }

    /// Whether it acts on the spawned server (and so needs `--spawn`).
    pub fn on_server(&self) -> bool {
        !matches!(self.kind, Kind::Drop(_))
    }
}

/// The faults of a run, done by a thread of their own beside the load.
pub struct Faults {
    list: Vec<Fault>,
    drops: Option<Arc<Drops>>,
}

/// Told to the fault thread when the load is over.
#[derive(Default)]
struct Over {
    done: Mutex<bool>,
    wake: Condvar,
}

impl Faults {
    pub fn new(list: Vec<Fault>, drops: Option<Arc<Drops>>) -> Faults {
        Faults { list, drops }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Runs `load` with the faults done at their times (from now), on `spawned` (the server
    /// `plan` started; a restart replaces it, and `follow` is told the new server's pid). The
    /// load's result, and what was done.
    pub fn run<T>(
        &self,
        spawned: &mut Option<Spawned>,
        plan: Option<&SpawnPlan>,
        cancel: &tokio_util::sync::CancellationToken,
        follow: &(dyn Fn(u32) + Sync),
        load: impl FnOnce() -> T,
    ) -> (T, Vec<FaultRecord>) {
        if self.list.is_empty() {
            return (load(), Vec::new());
        }
        let start = Instant::now();
        let clock = Some(std::time::SystemTime::now());
        let over = Over::default();
        let server = Mutex::new(spawned.take());
        let mut list = self.list.clone();
        list.sort_by_key(|f| f.at);
        let (out, records) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let mut records = Vec::new();
                for f in &list {
                    // Wait for the fault's time, or the load's end.
                    let mut done = over.done.lock().unwrap_or_else(|p| p.into_inner());
                    loop {
                        let left = (start + f.at).saturating_duration_since(Instant::now());
                        if *done || left.is_zero() {
                            break;
                        }
                        done = over.wake.wait_timeout(done, left).unwrap_or_else(|p| p.into_inner()).0;
                    }
                    if *done {
                        break;
                    }
                    drop(done);
                    let at_s = start.elapsed().as_secs_f64();
                    let (ok, what) = self.act(f, &server, plan, cancel, &over);
                    if let Some(s) = server.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                        if f.kind == Kind::Restart && ok {
                            follow(s.pid);
                        }
                    }
                    records.push(FaultRecord {
                        fault: f.text.clone(),
                        at_s,
                        done: what,
                        ok,
                        clock,
                        ..FaultRecord::default()
                    });
                }
                records
            });
            let out = load();
            *over.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
            over.wake.notify_all();
            (out, worker.join().unwrap_or_default())
        });
        *spawned = server.into_inner().unwrap_or_else(|p| p.into_inner());
        (out, records)
    }

    /// Does one fault; whether it was done, and what, in words.
    fn act(
        &self,
        f: &Fault,
        server: &Mutex<Option<Spawned>>,
        plan: Option<&SpawnPlan>,
        cancel: &tokio_util::sync::CancellationToken,
        over: &Over,
    ) -> (bool, String) {
        let mut guard = server.lock().unwrap_or_else(|p| p.into_inner());
        match &f.kind {
            Kind::Drop(share) => match &self.drops {
                Some(d) => {
                    d.throw(*share);
                    (true, format!("closed about {:.0}% of the users' connections", share * 100.0))
                }
                None => (false, "no user connection listens for drops in this workload".into()),
            },
            Kind::Kill | Kind::Restart => {
                let killed = match guard.take() {
                    Some(mut s) => {
                        let pid = s.pid;
                        s.signal(libc::SIGKILL);
                        s.reap();
                        if let Some(left) = plan.and_then(|p| s.survivor(&p.ready)) {
                            // Not done: the server (or a part of it) still serves.
                            *guard = Some(s);
                            return (false, format!("sent SIGKILL to the server (pid {pid}) and its tree, but {left}"));
                        }
                        // Gone: nothing signals its pid again (the system may give it to another process).
                        drop(s);
                        Some(pid)
                    }
                    None if f.kind == Kind::Restart && plan.is_some() => None,
                    None => {
                        return (false, "no spawned server to kill (it was killed before, or never started)".into())
                    }
                };
                let what = match killed {
                    Some(pid) => format!("killed the server (pid {pid}) and its tree"),
                    None => "the server was not running (killed before)".to_string(),
                };
                if f.kind == Kind::Kill {
                    return (true, format!("{what} for good"));
                }
                let Some(plan) = plan else {
                    return (false, format!("{what}; no command to start it again"));
                };
                let began = Instant::now();
                match crate::monitor::spawn::start(plan, cancel) {
                    Ok(new) => {
                        let text = format!(
                            "{what} and started it again (pid {}, ready after {:.1} s)",
                            new.pid,
                            began.elapsed().as_secs_f64()
                        );
                        *guard = Some(new);
                        (true, text)
                    }
                    Err(e) => (false, format!("{what}; it did not start again: {e}")),
                }
            }
            Kind::Stall(d) => {
                let Some(s) = guard.as_ref() else { return (false, "no spawned server to stall".into()) };
                s.signal(libc::SIGSTOP);
                // Frozen for the stall, or until the load ends; never left stopped.
                let done = over.done.lock().unwrap_or_else(|p| p.into_inner());
                let _ = over.wake.wait_timeout_while(done, *d, |done| !*done);
                s.signal(libc::SIGCONT);
                (true, format!("froze the server (pid {}) for {:?} (SIGSTOP, then SIGCONT)", s.pid, d))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_read_their_forms_and_refuse_the_rest_with_the_form() {
        // Durations as the flags read them (humantime, or seconds; not zero).
        fn duration(flag: &str, text: &str) -> Result<Duration, String> {
            let d = text.parse::<f64>().map(Duration::from_secs_f64).or_else(|_| humantime::parse_duration(text));
            match d {
                Ok(d) if !d.is_zero() => Ok(d),
                Ok(_) => Err(format!("{flag} {text:?} must be longer than zero")),
                Err(e) => Err(format!("{flag} {text:?}: {e}")),
            }
        }
        let ok = |t: &str| Fault::parse(t, duration).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(ok("restart@20s").kind, Kind::Restart);
        assert_eq!(ok("restart@20s").at, Duration::from_secs(20));
        assert_eq!(ok("kill@1.5s").at, Duration::from_millis(1500));
        assert_eq!(ok("stall@20s:2s").kind, Kind::Stall(Duration::from_secs(2)));
        assert_eq!(ok("drop@3s:25%").kind, Kind::Drop(0.25));
        assert!(!ok("drop@3s:25%").on_server() && ok("stall@1s:1s").on_server());
        for (bad, words) in [
            ("restart", "expected kill@T"),
            ("explode@2s", "unknown fault \"explode\""),
            ("drop@2s", "drop needs a share"),
            ("drop@2s:0%", "from 1% to 100%"),
            ("drop@2s:150%", "from 1% to 100%"),
            ("stall@2s", "stall needs how long"),
            ("stall@2s:0s", "longer than"),
            ("kill@2s:1s", "takes only a time"),
            ("kill@soon", "--fault"),
        ] {
            let e = Fault::parse(bad, duration).unwrap_err().to_string();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }
}

//! The engine: workers, pacing and stopping. Protocol code lives in `proto`, measurements in
//! `stats`; the engine only decides when things happen and who records them.

pub mod audit;
mod checkpoint;
pub mod coordinator;
pub mod http;
pub mod pacer;
mod page;
pub mod timer;
mod user;
pub mod vu;

/// The CPU time the calling thread has used, nanoseconds (its own clock: exact, whatever the
/// sampling); 0 where the clock cannot be read.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and reads nothing else.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if ok {
        (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
    } else {
        0
    }
}

/// What a panic said (its message, or "no message" when its payload is not text).
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Waits for every worker thread; a worker that panicked (a bug of bolide's) makes the whole run
/// fail: its share of the load and of the figures is missing, so the others alone must never be
/// reported as the run. Returns the reason, naming the thread and what it said.
pub fn join_workers(handles: Vec<std::thread::JoinHandle<()>>) -> Option<String> {
    let mut failed = None;
    for h in handles {
        let name = h.thread().name().unwrap_or("a load thread").to_string();
        if let Err(panic) = h.join() {
            let said = panic_text(panic.as_ref());
            failed.get_or_insert(format!(
                "internal error: the load thread {name} stopped ({said}); its share of the run is missing, so no \
                 figures are reported. This is a bug in bolide: please report it with the command line"
            ));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_worker_that_panics_fails_the_run_and_is_named() {
        let ok = std::thread::Builder::new().name("test-worker-0".into()).spawn(|| {}).unwrap();
        let bad =
            std::thread::Builder::new().name("test-worker-1".into()).spawn(|| panic!("overflow in the pacer")).unwrap();
        let why = super::join_workers(vec![ok, bad]).expect("a failure");
        assert!(why.contains("test-worker-1 stopped (overflow in the pacer)"), "{why}");
        let ok = std::thread::spawn(|| {});
        assert_eq!(super::join_workers(vec![ok]), None);
    }
}

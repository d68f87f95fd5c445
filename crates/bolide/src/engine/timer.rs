//! A worker's high-resolution timer for schedules (`--rps`, arrival phases).
//!
//! tokio's timer wheel has a 1 ms resolution and rounds every sleep up to the next millisecond, so
//! a fixed-rate request paced on it leaves up to 1 ms late, and since latency is measured from the
//! schedule, every request carried up to 1 ms of bolide's own lateness. Here each worker thread
//! owns one Linux `timerfd` registered with its runtime (nanosecond resolution, the thread's timer
//! slack set to 1 µs), armed for the earliest pending due time. When it fires, the earliest waiter
//! goes out on time and every waiter due within the next [`WINDOW`] goes out in the same wake-up,
//! a little early (the engine measures an early send's latency from when it went out). So at low
//! rates every send has its own precise wake-up, and at high rates wake-ups stay about one per
//! window, as with tokio's millisecond timer, but no send is ever held back to the next tick.
//! (Spinning on the clock for the last microseconds was tried: it starves the runtime's I/O
//! polling at high rates and costs a core; see BENCHMARKS.md, "Pacing".)
//!
//! Single-threaded like the worker that owns it (`Rc`, `Cell`, `RefCell`): no locks.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// When the timer fires for the earliest waiter, the waiters due within this window after it go
/// out in the same wake-up (a little early, and measured from when they went out). Wake-ups cost
/// tens of microseconds of CPU each on virtual machines, so this bounds them to about one per
/// window, as tokio's millisecond timer did, while the first send of each window is on time.
pub const WINDOW: Duration = Duration::from_millis(1);

/// Pending waiters, earliest first; `seq` keeps equal due times in arrival order.
type Heap = BinaryHeap<Reverse<(Instant, u64)>>;

struct Inner {
    fd: AsyncFd<OwnedFd>,
    heap: RefCell<Heap>,
    wakers: RefCell<std::collections::HashMap<u64, Waker>>,
    /// The due time the timerfd is armed for, if any.
    armed: Cell<Option<Instant>>,
    /// The end of the window opened by the last firing: waiters due before it go out at once.
    window_end: Cell<Option<Instant>>,
    next_seq: Cell<u64>,
}

/// One worker's timer; clones share it. Create it inside the worker's runtime and spawn
/// [`Timer::drive`] on the worker's `LocalSet`.
#[derive(Clone)]
pub struct Timer(Rc<Inner>);

impl Timer {
    /// A timer on a new timerfd; also sets this thread's timer slack to 1 µs (the default 50 µs
    /// would be the floor of every wake-up's precision).
    pub fn new() -> std::io::Result<Timer> {
        // SAFETY: plain syscalls with valid constant arguments; the fd is owned right away.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer; it affects only this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        }
        // SAFETY: the timer owns the descriptor for as long as it is registered (AsyncFd holds
        // the OwnedFd and deregisters it before closing it).
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Timer(Rc::new(Inner {
            fd,
            heap: RefCell::new(BinaryHeap::new()),
            wakers: RefCell::new(Default::default()),
            armed: Cell::new(None),
            window_end: Cell::new(None),
            next_seq: Cell::new(0),
        })))
    }

    /// Resolves at `due` (at once if it has passed).
    pub fn sleep_until(&self, due: Instant) -> Sleep {
        Sleep { timer: self.clone(), due, seq: None }
    }

    /// Wakes the waiters as their times come; runs until the worker's runtime stops.
    pub async fn drive(self) {
        let inner = &self.0;
        loop {
            let Ok(mut guard) = inner.fd.readable().await else { return };
            let mut expirations = [0u8; 8];
            // SAFETY: reads 8 bytes into a buffer of 8; the fd is non-blocking.
            let _ = unsafe { libc::read(inner.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            guard.clear_ready();
            inner.armed.set(None);
            self.wake_due();
        }
    }

    /// Wakes everything due within the window that the earliest waiter opens, and arms the
    /// timer for the first waiter after it.
    fn wake_due(&self) {
        let inner = &self.0;
        let now = Instant::now();
        let mut heap = inner.heap.borrow_mut();
        let mut wakers = inner.wakers.borrow_mut();
        // Dropped sleeps leave entries without a waker: they open no window.
        while heap.peek().is_some_and(|Reverse((_, seq))| !wakers.contains_key(seq)) {
            heap.pop();
        }
        let Some(Reverse((first, _))) = heap.peek().copied() else { return };
        if first > now {
            drop((heap, wakers));
            self.arm(first);
            return;
        }
        // The window is anchored at the earliest due time, so a late firing never lets later
        // waiters go early; everything already overdue goes at once.
        let horizon = (first + WINDOW).max(now + Duration::from_nanos(1));
        inner.window_end.set(Some(horizon));
        while let Some(Reverse((due, seq))) = heap.peek().copied() {
            if due >= horizon {
                self.arm(due);
                break;
            }
            heap.pop();
            if let Some(w) = wakers.remove(&seq) {
                w.wake();
            }
        }
    }

    /// Arms the timerfd for `due` unless it already fires earlier.
    fn arm(&self, due: Instant) {
        let inner = &self.0;
        if inner.armed.get().is_some_and(|a| a <= due) {
            return;
        }
        let wait = due.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: wait.as_secs().min(i32::MAX as u64) as _,
                tv_nsec: wait.subsec_nanos() as _,
            },
        };
        // SAFETY: a valid timerfd and a valid itimerspec; the old value is not asked for.
        unsafe {
            libc::timerfd_settime(inner.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
        inner.armed.set(Some(due));
    }
}

/// Waits until `due` on `timer`, or on tokio's millisecond timer when the worker has none.
pub async fn sleep_until(timer: Option<&Timer>, due: Instant) {
    match timer {
        Some(t) => t.sleep_until(due).await,
        None => tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await,
    }
}

/// The future of [`Timer::sleep_until`].
pub struct Sleep {
    timer: Timer,
    due: Instant,
    /// Set once registered with the timer.
    seq: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= self.due {
            return Poll::Ready(());
        }
        // Due within the window now open: it goes out with this wake-up's batch.
        if self.timer.0.window_end.get().is_some_and(|end| self.due < end && now < end) {
            return Poll::Ready(());
        }
        // Registered and still pending in the heap (a waiter that was woken and polled again
        // before its time registers anew, so it can never be left without an entry).
        let pending = self.seq.filter(|s| self.timer.0.wakers.borrow().contains_key(s));
        let seq = match pending {
            Some(seq) => seq,
            None => {
                let inner = &self.timer.0;
                let seq = inner.next_seq.get();
                inner.next_seq.set(seq + 1);
                inner.heap.borrow_mut().push(Reverse((self.due, seq)));
                self.seq = Some(seq);
                seq
            }
        };
        self.timer.0.wakers.borrow_mut().insert(seq, cx.waker().clone());
        self.timer.arm(self.due);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // A sleep dropped before its time (the run ended) leaves no waker behind; its heap entry
        // is skipped when it comes up.
        if let Some(seq) = self.seq {
            self.timer.0.wakers.borrow_mut().remove(&seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn sleepers_wake_in_due_order_and_never_early() {
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        let order = local.block_on(&rt, async {
            let timer = Timer::new().unwrap();
            tokio::task::spawn_local(timer.clone().drive());
            let start = Instant::now();
            let woke = Rc::new(RefCell::new(Vec::new()));
            // Registered out of order; due at 4.5, 1.5, 3 and 0.01 ms: over a window apart, so
            // each is its own wake-up, in due order.
            let mut tasks = Vec::new();
            for (name, us) in [("c", 4_500), ("a", 1_500), ("b", 3_000), ("first", 10)] {
                let (timer, woke) = (timer.clone(), Rc::clone(&woke));
                let due = start + Duration::from_micros(us);
                tasks.push(tokio::task::spawn_local(async move {
                    timer.sleep_until(due).await;
                    assert!(Instant::now() >= due, "{name} woke early");
                    woke.borrow_mut().push(name);
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
            // A due time in the past resolves at once.
            timer.sleep_until(start).await;
            let got = woke.borrow().clone();
            got
        });
        assert_eq!(order, ["first", "a", "b", "c"]);
    }

    #[test]
    fn a_dropped_sleep_leaves_no_waker_behind() {
        let rt = runtime();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let timer = Timer::new().unwrap();
            tokio::task::spawn_local(timer.clone().drive());
            let far = timer.sleep_until(Instant::now() + Duration::from_secs(3600));
            let near = Instant::now() + Duration::from_millis(2);
            tokio::select! {
                _ = far => panic!("an hour did not pass"),
                _ = timer.sleep_until(near) => {}
            }
            assert!(timer.0.wakers.borrow().is_empty());
        });
    }
}

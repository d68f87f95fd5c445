//! The coordinating thread's side of a run, the same for every engine: the named worker threads
//! started, what they send (a part of a second at each tick, their whole recorders at the end),
//! each second released once every worker has reported it (in order, whole), and the seconds a
//! run's end left. An engine says what a second's part is ([`Part`]: how two merge, when one is
//! whole) and what its end is; the loop over the channel is its own, and so is the join
//! (`engine::join_workers`: a worker that panicked fails the run, named).

use std::sync::mpsc;
use std::thread::JoinHandle;

/// What a worker sends the coordinating thread.
pub enum Report<P, D> {
    /// Its part of second `t`.
    Tick { t: u32, part: P },
    /// Its end: whatever it measured over the whole run.
    Done(D),
}

/// A worker's part of one second, merged with the other workers' parts of the same second.
pub trait Part: Default {
    fn merge(&mut self, other: Self);
    /// Whether the second it makes (every worker's part merged) is whole, not a run's last and
    /// partial one.
    fn whole(&self) -> bool {
        true
    }
}

/// Starts `workers` threads named `PREFIX-N`, each running `body(N, sender)`; the receiver gets
/// every report, and closes once every worker has ended. When a thread cannot be started, the
/// ones already running are stopped (`stop`, the token their bodies watch) and joined: no load
/// goes on after a run that failed to start.
#[allow(clippy::type_complexity)]
pub fn spawn<P: Send + 'static, D: Send + 'static>(
    prefix: &str,
    workers: usize,
    stop: &tokio_util::sync::CancellationToken,
    body: impl Fn(usize, mpsc::Sender<Report<P, D>>) -> Box<dyn FnOnce() + Send>,
) -> Result<(Vec<JoinHandle<()>>, mpsc::Receiver<Report<P, D>>), String> {
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::with_capacity(workers);
    for n in 0..workers {
        let run = body(n, tx.clone());
        match std::thread::Builder::new().name(format!("{prefix}-{n}")).spawn(run) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                stop.cancel();
                drop((tx, rx));
                let _ = super::join_workers(handles);
                return Err(format!("cannot start worker thread: {e}"));
            }
        }
    }
    Ok((handles, rx))
}

/// The run's seconds as the workers report them: each kept until every worker has reported it,
/// then released in order (a second's memory is held only while it is being assembled).
pub struct Seconds<P> {
    workers: usize,
    /// Per second not yet released: how many workers reported it, and their parts merged.
    slots: Vec<(usize, Option<P>)>,
    released: usize,
}

impl<P: Part> Seconds<P> {
    pub fn new(workers: usize) -> Seconds<P> {
        Seconds { workers, slots: Vec::new(), released: 0 }
    }

    /// Adds a worker's part of second `t`; hands each second that is now complete to `release`,
    /// in order.
    pub fn add(&mut self, t: u32, part: P, mut release: impl FnMut(u32, P)) {
        let t = t as usize;
        while self.slots.len() <= t {
            self.slots.push((0, None));
        }
        let slot = &mut self.slots[t];
        slot.0 += 1;
        match &mut slot.1 {
            Some(p) => p.merge(part),
            None => slot.1 = Some(part),
        }
        while let Some((reported, part)) = self.slots.get_mut(self.released) {
            if *reported < self.workers || !part.as_ref().is_some_and(P::whole) {
                break;
            }
            let part = part.take().unwrap_or_default();
            release(self.released as u32, part);
            self.released += 1;
        }
    }

    /// How many seconds were released whole.
    pub fn released(&self) -> usize {
        self.released
    }

    /// The seconds not released (not every worker reported them, or the last was partial): as
    /// far as they got, in order.
    pub fn rest(self) -> impl Iterator<Item = (u32, P)> {
        let released = self.released;
        self.slots.into_iter().enumerate().skip(released).map(|(t, (_, p))| (t as u32, p.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Count(u64, bool);

    impl Part for Count {
        fn merge(&mut self, other: Count) {
            self.0 += other.0;
            self.1 |= other.1;
        }

        fn whole(&self) -> bool {
            !self.1
        }
    }

    #[test]
    fn seconds_are_released_in_order_once_every_worker_reported_them() {
        let mut s = Seconds::new(2);
        let mut out = Vec::new();
        s.add(0, Count(1, false), |t, p| out.push((t, p.0)));
        s.add(1, Count(2, false), |t, p| out.push((t, p.0)));
        assert!(out.is_empty(), "one worker of two");
        s.add(1, Count(3, false), |t, p| out.push((t, p.0)));
        assert!(out.is_empty(), "second 0 still waits");
        s.add(0, Count(4, false), |t, p| out.push((t, p.0)));
        assert_eq!(out, [(0, 5), (1, 5)]);
        // A partial last second is not released; the run's end hands it over as it got.
        s.add(2, Count(1, true), |t, p| out.push((t, p.0)));
        s.add(2, Count(1, false), |t, p| out.push((t, p.0)));
        assert_eq!(s.released(), 2);
        let rest: Vec<_> = s.rest().collect();
        assert_eq!(rest, [(2, Count(2, true))]);
    }

    #[test]
    fn workers_are_named_and_their_reports_arrive() {
        let stop = tokio_util::sync::CancellationToken::new();
        let (handles, rx) = spawn::<u32, String>("test-coord", 3, &stop, |n, tx| {
            Box::new(move || {
                let _ = tx.send(Report::Tick { t: 0, part: n as u32 });
                let _ = tx.send(Report::Done(std::thread::current().name().unwrap_or("").to_string()));
            })
        })
        .unwrap();
        let mut names: Vec<String> = rx
            .iter()
            .filter_map(|r| match r {
                Report::Done(name) => Some(name),
                Report::Tick { .. } => None,
            })
            .collect();
        names.sort();
        assert_eq!(names, ["test-coord-0", "test-coord-1", "test-coord-2"]);
        assert_eq!(crate::engine::join_workers(handles), None);
    }
}

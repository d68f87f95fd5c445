//! Recorders owned by one worker thread: plain counters and histograms, no atomics.

use hdrhistogram::Histogram;

use super::hist;

/// The closed set of ways a request can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    /// The TCP connection could not be opened (refused, unreachable).
    Connect,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// The peer reset the connection (or a write hit a broken pipe).
    Reset,
    /// The peer closed the connection before the response was complete.
    Closed,
    /// No complete response within `--timeout`.
    Timeout,
    /// The response was not HTTP: bad status line, bad framing, head over the limit.
    Malformed,
    /// Anything else the operating system reported.
    Other,
    /// HTTP/2: the server sent GOAWAY for the connection the request was on.
    GoAway,
    /// HTTP/2: the server reset the request's stream (RST_STREAM).
    StreamReset,
    /// A complete response whose status is not among the expected ones (200-399 unless
    /// `--expect-status` says otherwise): the request failed, the response is counted too.
    Status,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 10] = [
        ErrorClass::Connect,
        ErrorClass::Tls,
        ErrorClass::Reset,
        ErrorClass::Closed,
        ErrorClass::Timeout,
        ErrorClass::Malformed,
        ErrorClass::Other,
        ErrorClass::GoAway,
        ErrorClass::StreamReset,
        ErrorClass::Status,
    ];

    /// The stable name used in result documents.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Tls => "tls",
            ErrorClass::Reset => "reset",
            ErrorClass::Closed => "closed",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Malformed => "malformed",
            ErrorClass::Other => "other",
            ErrorClass::GoAway => "goaway",
            ErrorClass::StreamReset => "rst_stream",
            ErrorClass::Status => "status",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Status codes are counted in a flat table; anything outside 100..=599 lands in slot 0.
const STATUS_SLOTS: usize = 600;

/// Counts for one target (URL) on one worker.
#[derive(Debug, Clone)]
pub struct TargetRecorder {
    /// Latency of complete responses, from intended send time to last byte, and of timed-out
    /// requests at their timeout.
    pub latency_us: Histogram<u64>,
    /// Complete responses, whatever their status.
    pub responses: u64,
    /// Bytes received for complete responses (head and body).
    pub bytes_in: u64,
    /// Connections opened successfully.
    pub connects: u64,
    /// Requests sent again on a new connection because the kept-alive one turned out closed
    /// (each also went on the wire once before).
    pub retries: u64,
    /// Failed requests by class, indexed by `ErrorClass as usize`.
    pub errors: [u64; ErrorClass::ALL.len()],
    status: Vec<u64>,
}

impl Default for TargetRecorder {
    fn default() -> Self {
        TargetRecorder {
            latency_us: hist::latency_us(),
            responses: 0,
            bytes_in: 0,
            connects: 0,
            retries: 0,
            errors: [0; ErrorClass::ALL.len()],
            status: vec![0; STATUS_SLOTS],
        }
    }
}

impl TargetRecorder {
    pub fn record_response(&mut self, latency_us: u64, status: u16, bytes: u64) {
        hist::record(&mut self.latency_us, latency_us);
        self.responses += 1;
        self.bytes_in += bytes;
        let slot = if (100..600).contains(&status) { status as usize } else { 0 };
        self.status[slot] += 1;
    }

    pub fn record_error(&mut self, class: ErrorClass) {
        self.errors[class.index()] += 1;
    }

    /// All failed requests: transport errors and responses of a failed status.
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Requests that got no complete response (every class but `status`).
    pub fn transport_errors(&self) -> u64 {
        self.error_total() - self.errors[ErrorClass::Status.index()]
    }

    /// (status, count) for every status seen, ascending; status 0 means out of range.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status.iter().enumerate().filter(|(_, &n)| n > 0).map(|(s, &n)| (s as u16, n))
    }

    pub fn merge(&mut self, other: &TargetRecorder) {
        self.latency_us.add(&other.latency_us).expect("latency histograms share one shape");
        self.responses += other.responses;
        self.bytes_in += other.bytes_in;
        self.connects += other.connects;
        self.retries += other.retries;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        for (a, b) in self.status.iter_mut().zip(&other.status) {
            *a += b;
        }
    }
}

/// What one worker did during one second of the run (all targets together).
#[derive(Debug, Clone)]
pub struct SecondRecorder {
    pub responses: u64,
    pub errors: u64,
    pub bytes_in: u64,
    pub latency_us: Histogram<u64>,
    /// Connections opened.
    pub connects: u64,
    /// Responses by status (few: searched in order), and errors by class.
    pub statuses: Vec<(u16, u64)>,
    pub error_classes: [u64; ErrorClass::ALL.len()],
    /// Each target's responses and latency, kept only when asked for ([`SecondRecorder::by_target`]:
    /// the outputs of a run of several URLs); empty otherwise.
    pub targets: Vec<(u64, Histogram<u64>)>,
}

impl Default for SecondRecorder {
    fn default() -> Self {
        SecondRecorder {
            responses: 0,
            errors: 0,
            bytes_in: 0,
            latency_us: hist::latency_us(),
            connects: 0,
            statuses: Vec::new(),
            error_classes: [0; ErrorClass::ALL.len()],
            targets: Vec::new(),
        }
    }
}

impl SecondRecorder {
    /// Keeps each of `targets` targets' responses and latency too.
    pub fn by_target(targets: usize) -> SecondRecorder {
        SecondRecorder { targets: (0..targets).map(|_| (0, hist::latency_us())).collect(), ..Default::default() }
    }

    pub fn merge(&mut self, other: &SecondRecorder) {
        self.responses += other.responses;
        self.errors += other.errors;
        self.bytes_in += other.bytes_in;
        self.latency_us.add(&other.latency_us).expect("latency histograms share one shape");
        self.connects += other.connects;
        for &(status, n) in &other.statuses {
            self.count_status(status, n);
        }
        for (a, b) in self.error_classes.iter_mut().zip(other.error_classes) {
            *a += b;
        }
        if self.targets.len() < other.targets.len() {
            self.targets.resize_with(other.targets.len(), || (0, hist::latency_us()));
        }
        for (a, b) in self.targets.iter_mut().zip(&other.targets) {
            a.0 += b.0;
            a.1.add(&b.1).expect("latency histograms share one shape");
        }
    }

    fn count_status(&mut self, status: u16, n: u64) {
        match self.statuses.iter_mut().find(|(s, _)| *s == status) {
            Some(slot) => slot.1 += n,
            None => self.statuses.push((status, n)),
        }
    }

    /// Hands out what was recorded and starts over, keeping the histogram's allocation.
    pub fn take(&mut self) -> SecondRecorder {
        let out = self.clone();
        self.responses = 0;
        self.errors = 0;
        self.bytes_in = 0;
        self.latency_us.reset();
        self.connects = 0;
        self.statuses.clear();
        self.error_classes = [0; ErrorClass::ALL.len()];
        for (n, h) in &mut self.targets {
            *n = 0;
            h.reset();
        }
        out
    }
}

/// Everything one worker records; merged with the other workers' at the end.
#[derive(Debug, Clone)]
pub struct WorkerRecorder {
    pub targets: Vec<TargetRecorder>,
    pub second: SecondRecorder,
    /// Requests sent (a response or an error followed, or the run ended first).
    pub sent: u64,
    /// Sends that left more than [`LATE_THRESHOLD_US`] after their scheduled time (`--rps`).
    pub late_sends: u64,
    /// The worst delay of a send behind its schedule, in microseconds.
    pub max_lag_us: u64,
    /// Every send's delay behind its schedule (`--rps`): the generator's own precision.
    pub send_lag_us: Histogram<u64>,
    /// The first error message seen per class, to show the user what went wrong.
    pub first_errors: Vec<(ErrorClass, String)>,
}

/// A send this far behind its schedule counts as late: well past what the worker's timer keeps to
/// on an idle core (tens of microseconds; see BENCHMARKS.md, "Pacing"), so a late send means the
/// generator could not keep up, not that a timer is coarse.
pub const LATE_THRESHOLD_US: u64 = 200;

impl WorkerRecorder {
    pub fn new(targets: usize) -> Self {
        WorkerRecorder {
            targets: vec![TargetRecorder::default(); targets],
            second: SecondRecorder::default(),
            sent: 0,
            late_sends: 0,
            max_lag_us: 0,
            send_lag_us: hist::latency_us(),
            first_errors: Vec::new(),
        }
    }

    /// A send `lag_us` behind its schedule.
    pub fn record_send(&mut self, lag_us: u64) {
        self.sent += 1;
        if lag_us > LATE_THRESHOLD_US {
            self.late_sends += 1;
        }
        self.max_lag_us = self.max_lag_us.max(lag_us);
        hist::record(&mut self.send_lag_us, lag_us);
    }

    /// A complete response; `failed` when its status is not an expected one (also counted as a
    /// failed request of class `status`).
    pub fn record_response(&mut self, target: usize, latency_us: u64, status: u16, bytes: u64, failed: bool) {
        self.targets[target].record_response(latency_us, status, bytes);
        if failed {
            // The detail is made for the first of its class only (no allocation per response).
            let first = !self.first_errors.iter().any(|(c, _)| *c == ErrorClass::Status);
            let detail = if first { format!("status {status}") } else { String::new() };
            self.record_error(target, ErrorClass::Status, &detail);
        }
        self.second.responses += 1;
        self.second.bytes_in += bytes;
        hist::record(&mut self.second.latency_us, latency_us);
        let status = if (100..600).contains(&status) { status } else { 0 };
        self.second.count_status(status, 1);
        if let Some((n, h)) = self.second.targets.get_mut(target) {
            *n += 1;
            hist::record(h, latency_us);
        }
    }

    /// A connection opened to `target`.
    pub fn record_connect(&mut self, target: usize) {
        self.targets[target].connects += 1;
        self.second.connects += 1;
    }

    /// A request that got no complete response within the timeout: an error of class `timeout`
    /// that stays in the latency histograms at `latency_us` (its timeout, from the intended send),
    /// so a server stalling past the timeout makes the percentiles worse, never better.
    pub fn record_timeout(&mut self, target: usize, latency_us: u64, detail: &str) {
        hist::record(&mut self.targets[target].latency_us, latency_us);
        hist::record(&mut self.second.latency_us, latency_us);
        if let Some((_, h)) = self.second.targets.get_mut(target) {
            hist::record(h, latency_us);
        }
        self.record_error(target, ErrorClass::Timeout, detail);
    }

    pub fn record_error(&mut self, target: usize, class: ErrorClass, detail: &str) {
        self.targets[target].record_error(class);
        self.second.errors += 1;
        self.second.error_classes[class.index()] += 1;
        if !self.first_errors.iter().any(|(c, _)| *c == class) {
            // What the server said is kept printable.
            self.first_errors.push((class, crate::redact::printable(detail).into_owned()));
        }
    }

    pub fn merge(&mut self, other: &WorkerRecorder) {
        for (a, b) in self.targets.iter_mut().zip(&other.targets) {
            a.merge(b);
        }
        self.second.merge(&other.second);
        self.sent += other.sent;
        self.late_sends += other.late_sends;
        self.max_lag_us = self.max_lag_us.max(other.max_lag_us);
        self.send_lag_us.add(&other.send_lag_us).expect("lag histograms share one shape");
        for (class, detail) in &other.first_errors {
            if !self.first_errors.iter().any(|(c, _)| c == class) {
                self.first_errors.push((*class, detail.clone()));
            }
        }
        self.first_errors.sort_by_key(|(c, _)| *c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_statuses_and_errors() {
        let mut a = WorkerRecorder::new(2);
        let mut b = WorkerRecorder::new(2);
        a.record_response(0, 100, 200, 10, false);
        a.record_response(1, 200, 404, 20, true);
        b.record_response(0, 300, 200, 30, false);
        b.record_error(1, ErrorClass::Timeout, "slow");
        b.record_error(1, ErrorClass::Timeout, "slower");
        a.record_send(5_000);
        b.record_send(10);
        // Exactly at the threshold is on time; one microsecond past it is late.
        b.record_send(LATE_THRESHOLD_US);
        b.record_send(LATE_THRESHOLD_US + 1);
        a.merge(&b);
        assert_eq!(a.targets[0].responses, 2);
        assert_eq!(a.targets[0].statuses().collect::<Vec<_>>(), vec![(200, 2)]);
        assert_eq!(a.targets[1].statuses().collect::<Vec<_>>(), vec![(404, 1)]);
        // The 404 was a failed request (class status) beside the two timeouts.
        assert_eq!(a.targets[1].error_total(), 3);
        assert_eq!(a.targets[1].transport_errors(), 2);
        assert_eq!(a.second.responses, 3);
        assert_eq!(a.second.errors, 3);
        assert_eq!(a.sent, 4);
        assert_eq!(a.late_sends, 2);
        assert_eq!(a.max_lag_us, 5_000);
        // Every send's lag is in the merged histogram: the generator's precision, p50 and p99.
        assert_eq!(a.send_lag_us.len(), 4);
        assert_eq!(a.send_lag_us.value_at_quantile(0.25), 10);
        assert!(a.send_lag_us.equivalent(a.send_lag_us.value_at_quantile(0.99), 5_000));
        assert_eq!(
            a.first_errors,
            vec![(ErrorClass::Timeout, "slow".to_string()), (ErrorClass::Status, "status 404".to_string())]
        );
    }
}

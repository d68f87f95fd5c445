//! Progress on the terminal while a command runs (indicatif, stderr, terminals only), and the
//! colours of the summaries (only where they carry meaning: errors, suspect numbers, broken
//! thresholds, failed levels).
//!
//! The bar is redrawn from the coordinating thread when the engine reports a second (no ticker
//! thread: `main` holds stderr's lock for the whole process, and the lock is re-entrant only on
//! its own thread). Its cost is one short write to stderr per second.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::term::count;
use crate::engine::http::Progress;
use crate::engine::vu::VuProgress;

/// One progress bar on stderr, or nothing when stderr is not a terminal (or the run is quiet).
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    /// A bar for a run of `len` units (seconds or requests); `stage` is the outer command's part
    /// (e.g. "run 2/5, ETA 1m 5s"), shown first.
    pub fn new(live: bool, stage: &str, len: Option<u64>) -> Bar {
        if !live {
            return Bar { bar: None };
        }
        let bar = match len {
            Some(n) => ProgressBar::with_draw_target(Some(n.max(1)), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = match len {
            Some(_) => "{prefix}[{bar:24}] {msg}",
            None => "{prefix}{msg}",
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        if !stage.is_empty() {
            bar.set_prefix(format!("{stage}  "));
        }
        Bar { bar: Some(bar) }
    }

    /// Moves the bar to `pos` (never past its length) and shows `msg`.
    pub fn set(&self, pos: u64, msg: String) {
        if let Some(b) = &self.bar {
            let pos = b.length().map_or(pos, |n| pos.min(n));
            b.set_message(msg);
            b.set_position(pos);
        }
    }

    /// Removes the bar from the terminal.
    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.clear();
    }
}

/// "elapsed/planned", never past the planned length: a run that goes on after it (users finishing,
/// the last responses) shows the planned length and says what it waits for.
pub fn clock(elapsed: Duration, planned: Duration) -> String {
    let planned_s = planned.as_secs();
    let e = elapsed.as_secs();
    if e > planned_s {
        format!("{planned_s}s/{planned_s}s, finishing")
    } else {
        format!("{e}s/{planned_s}s")
    }
}

/// An HTTP run's bar: by time (`-d`), by requests (`-n`), or a line without a bar.
pub fn http_bar(live: bool, stage: &str, planned: Option<Duration>, requests: Option<u64>) -> Bar {
    Bar::new(live, stage, planned.map(|d| d.as_secs().max(1)).or(requests))
}

/// Shows an HTTP run's second on its bar.
pub fn http_update(bar: &Bar, p: &Progress) {
    let pos = match (p.planned, p.planned_requests) {
        (Some(_), _) => p.elapsed.as_secs(),
        (None, Some(_)) => p.finished,
        (None, None) => 0,
    };
    bar.set(pos, http_line(p));
}

/// An HTTP run's second in words: the clock, the rate, that second's p50 and p99 (as oha shows
/// them live), the counts.
pub fn http_line(p: &Progress) -> String {
    let clock = match (p.planned, p.planned_requests) {
        (Some(planned), _) => clock(p.elapsed, planned),
        (None, Some(n)) => format!("{}s, {}/{}", p.elapsed.as_secs(), count(p.finished), count(n)),
        (None, None) => format!("{}s", p.elapsed.as_secs()),
    };
    let latency = if p.second.responses > 0 {
        format!(
            "  p50 {}  p99 {}",
            super::term::us(p.second.latency_p50_us as f64),
            super::term::us(p.second.latency_p99_us as f64)
        )
    } else {
        String::new()
    };
    format!(
        "{clock}  {} req/s{latency}  {} responses  {} failed",
        count(p.last_second_responses),
        count(p.responses),
        count(p.errors)
    )
}

/// A DDP run's bar, by the planned arrival time.
pub fn ddp_bar(live: bool, stage: &str, planned: Duration) -> Bar {
    Bar::new(live, stage, Some(planned.as_secs().max(1)))
}

/// Shows a DDP run's second on its bar.
pub fn ddp_update(bar: &Bar, p: &VuProgress) {
    bar.set(p.elapsed.as_secs(), ddp_line(p));
}

/// A DDP run's second in words: the clock, the users, that second's p50 and p99 over every step,
/// the counts.
pub fn ddp_line(p: &VuProgress) -> String {
    let latency = match p.second.latency.as_ref().filter(|l| l.count > 0) {
        Some(l) => format!("  p50 {}  p99 {}", super::term::us(l.p50_us as f64), super::term::us(l.p99_us as f64)),
        None => String::new(),
    };
    format!(
        "{}  {} users alive{latency}  {} arrived  {} done  {} failed  {} step errors",
        clock(p.elapsed, p.planned),
        count(p.alive),
        count(p.launched),
        count(p.completed),
        count(p.failed),
        count(p.step_errors)
    )
}

/// A pause between runs (`--cooldown`) as a bar counting the seconds; false when stopped.
pub fn pause(live: bool, stage: &str, d: Duration, cancel: &tokio_util::sync::CancellationToken) -> bool {
    let bar = Bar::new(live, stage, Some(d.as_secs().max(1)));
    let start = std::time::Instant::now();
    let until = start + d;
    while std::time::Instant::now() < until {
        if cancel.is_cancelled() {
            return false;
        }
        let e = start.elapsed();
        bar.set(e.as_secs(), format!("cooling down, {}", clock(e, d)));
        std::thread::sleep((until - std::time::Instant::now()).min(Duration::from_millis(200)));
    }
    !cancel.is_cancelled()
}

/// "1m 5s" for an estimate of the time left.
pub fn eta(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

/// The summary `text` with colour where it carries meaning, when `on`: the SUSPECT line yellow,
/// errors (an Errors line that is not "none", failed requests) red, BROKEN thresholds
/// and failed capacity levels (`: x: `, "failed at") red. Off, the text is returned as it is.
pub fn paint(text: &str, on: bool) -> String {
    if !on {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let t = body.trim_start();
        let colour = if t.starts_with("SUSPECT") || t.contains(" suspect") {
            Some(YELLOW)
        } else if (t.starts_with("Errors") && !t.ends_with("none"))
            || (t.starts_with("Requests") && t.contains(" failed ("))
            || t.ends_with("BROKEN")
            || t.contains("failed at")
            || t.contains(": x: ")
            || t.starts_with("error:")
        {
            Some(RED)
        } else {
            None
        };
        match colour {
            Some(c) if !body.is_empty() => out.push_str(&format!("{c}{body}{RESET}{nl}")),
            _ => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_counts_past_the_plan() {
        assert_eq!(clock(Duration::from_millis(3_200), Duration::from_secs(10)), "3s/10s");
        assert_eq!(clock(Duration::from_secs(10), Duration::from_secs(10)), "10s/10s");
        assert_eq!(clock(Duration::from_secs(30), Duration::from_secs(10)), "10s/10s, finishing");
    }

    #[test]
    fn paint_marks_what_carries_meaning_only() {
        let text = "  Requests      10 responses\n  Requests      9 responses, 1 failed (status 500: 1)\n  Errors        none\n  Errors        timeout 3\n  SUSPECT       x\n  Ensure        p99: 5 (limit 2.00) BROKEN\n";
        assert_eq!(paint(text, false), text);
        let painted = paint(text, true);
        assert!(painted.starts_with("  Requests      10 responses\n\x1b[31m  Requests      9 responses, 1 failed (status 500: 1)\x1b[0m\n  Errors        none\n"));
        assert!(painted.contains("\x1b[31m  Errors        timeout 3\x1b[0m\n"));
        assert!(painted.contains("\x1b[33m  SUSPECT       x\x1b[0m\n"));
        assert!(painted.contains("\x1b[31m  Ensure        p99: 5 (limit 2.00) BROKEN\x1b[0m\n"));
        // Without colour codes, the painted text is the text.
        assert_eq!(painted.replace(RED, "").replace(YELLOW, "").replace(RESET, ""), text);
    }

    #[test]
    fn the_live_line_shows_the_last_second_s_latency() {
        let mut p = Progress {
            elapsed: Duration::from_secs(3),
            planned: Some(Duration::from_secs(10)),
            responses: 3000,
            last_second_responses: 1000,
            ..Progress::default()
        };
        // No response in that second: no percentile to show.
        assert_eq!(http_line(&p), "3s/10s  1,000 req/s  3,000 responses  0 failed");
        p.second.responses = 1000;
        p.second.latency_p50_us = 850;
        p.second.latency_p99_us = 12_500;
        assert_eq!(http_line(&p), "3s/10s  1,000 req/s  p50 850µs  p99 12.50ms  3,000 responses  0 failed");
    }

    #[test]
    fn the_ddp_live_line_shows_the_last_second_s_latency() {
        let mut p = VuProgress {
            elapsed: Duration::from_secs(4),
            planned: Duration::from_secs(60),
            alive: 12,
            launched: 20,
            completed: 8,
            ..VuProgress::default()
        };
        assert_eq!(ddp_line(&p), "4s/60s  12 users alive  20 arrived  8 done  0 failed  0 step errors");
        p.second.latency = Some(crate::stats::vu::SecondLatency {
            count: 40,
            p50_us: 2_100,
            p99_us: 48_000,
            max_us: 51_000,
            histogram: None,
        });
        assert_eq!(
            ddp_line(&p),
            "4s/60s  12 users alive  p50 2.10ms  p99 48.00ms  20 arrived  8 done  0 failed  0 step errors"
        );
    }

    #[test]
    fn bars_off_the_terminal_draw_nothing() {
        let bar = http_bar(false, "", Some(Duration::from_secs(5)), None);
        http_update(&bar, &Progress { elapsed: Duration::from_secs(9), ..Progress::default() });
        assert!(bar.bar.is_none());
    }
}

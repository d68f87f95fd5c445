//! Execution segments: one plan run as N cooperating instances (`--segment I/N`), each doing an
//! exact share, and a shared wall-clock start (`--start-at`) so that their timelines line up.
//!
//! A segment owns a contiguous range of the plan's connections (HTTP: with them, their slots of
//! the fixed-rate schedule and of the request count) or every N-th arrival of the users' schedule
//! (DDP: users keep their global index, so ids, targets and payload rows are those of the
//! unsegmented run). Segments 1..N together are exactly the whole plan.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::problem::Problem;

/// Segment `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub index: u32,
    pub count: u32,
}

/// The most segments one plan may be split into.
pub const MAX_SEGMENTS: u32 = 10_000;

/// The environment variable Kubernetes sets in each pod of an Indexed Job (0-based).
pub const K8S_INDEX_VAR: &str = "JOB_COMPLETION_INDEX";

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Segment {
    /// Reads `I/N` (1 <= I <= N), or `auto/N`, which takes the index from Kubernetes'
    /// `JOB_COMPLETION_INDEX` (0-based: pod 0 runs segment 1) as `env` returns it.
    pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Segment, Problem> {
        let bad = |why: &str| format!("--segment {text}: {why}; give I/N, e.g. --segment 2/3 (the second of three)");
        let (i, n) = text.trim().split_once('/').ok_or_else(|| bad("not I/N"))?;
        // Read wide, so that a number too large is named as such, not as "not a whole number".
        let count: u64 = n.trim().parse().map_err(|_| bad("N is not a whole number"))?;
        if count == 0 || count > u64::from(MAX_SEGMENTS) {
            return Err(bad(&format!("N must be 1 to {MAX_SEGMENTS}, not {count}")).into());
        }
        let count = count as u32;
        let index = if i.trim() == "auto" {
            let raw = env(K8S_INDEX_VAR).ok_or_else(|| {
                format!("--segment {text}: `auto` takes the index from {K8S_INDEX_VAR}, which is not set (it is set in the pods of a Kubernetes Indexed Job)")
            })?;
            let zero: u64 = raw
                .trim()
                .parse()
                .map_err(|_| format!("--segment {text}: {K8S_INDEX_VAR}={raw:?} is not a whole number"))?;
            if zero >= u64::from(count) {
                return Err(format!(
                    "--segment {text}: {K8S_INDEX_VAR}={zero} is out of range: pods are numbered 0 to {} for {count} \
                     segments; the Job's completions and auto/N must be the same number",
                    count - 1
                )
                .into());
            }
            zero as u32 + 1
        } else {
            let index: u64 = i.trim().parse().map_err(|_| bad("I is not a whole number"))?;
            if index == 0 || index > u64::from(count) {
                return Err(bad(&format!("I must be 1 to {count}")).into());
            }
            index as u32
        };
        Ok(Segment { index, count })
    }

    /// This segment's connections of `total`: the first one's global index and how many. The
    /// first `total % count` segments get one more.
    pub fn connections(&self, total: usize) -> (usize, usize) {
        let (i, n) = ((self.index - 1) as usize, self.count as usize);
        let (base, extra) = (total / n, total % n);
        (i * base + i.min(extra), base + usize::from(i < extra))
    }

    /// Whether global arrival `k` is this segment's (every N-th, from `index - 1`).
    pub fn owns(&self, k: u64) -> bool {
        k % u64::from(self.count) == u64::from(self.index - 1)
    }

    /// How many of the arrivals `0..total` are this segment's.
    pub fn arrivals(&self, total: u64) -> u64 {
        let (i, n) = (u64::from(self.index - 1), u64::from(self.count));
        total / n + u64::from(total % n > i)
    }
}

/// Reads `--start-at`: an RFC 3339 time (`2026-11-23T10:00:00Z`, `...+01:00`) or `+DURATION`
/// from `now` (`+5s`, `+1m`) rounded up to the next whole second. Instances on several machines
/// need one absolute time; the relative form suits one machine, or the script that computes that
/// time once and hands it to every instance.
/// The latest start `--start-at` accepts, from now: a shared start is minutes away, and a time
/// days ahead is a mistake (a wrong year or zone) that would leave the instances waiting.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);

pub fn parse_start_at(text: &str, now: SystemTime) -> Result<SystemTime, Problem> {
    let t = text.trim();
    let bad = |why: String| {
        format!("--start-at {text}: {why}; give an RFC 3339 time (2026-11-23T10:00:00Z) or +DURATION (+5s)")
    };
    let at = if let Some(rel) = t.strip_prefix('+') {
        let d = humantime::parse_duration(rel.trim()).map_err(|e| bad(e.to_string()))?;
        let at = now.checked_add(d).ok_or_else(|| bad("out of range".into()))?;
        let since = at.duration_since(SystemTime::UNIX_EPOCH).map_err(|e| bad(e.to_string()))?;
        let whole = if since.subsec_nanos() == 0 { since.as_secs() } else { since.as_secs() + 1 };
        SystemTime::UNIX_EPOCH + Duration::from_secs(whole)
    } else {
        // humantime reads UTC times; the zone is required (as RFC 3339 requires it) and applied here.
        let (base, offset_s) = split_offset(t)
            .ok_or_else(|| bad("no time zone: end it with Z for UTC or with the offset, such as +01:00".into()))?;
        let utc = humantime::parse_rfc3339_weak(base).map_err(|e| bad(e.to_string()))?;
        let at = if offset_s >= 0 {
            utc.checked_sub(Duration::from_secs(offset_s as u64))
        } else {
            utc.checked_add(Duration::from_secs(offset_s.unsigned_abs()))
        };
        at.ok_or_else(|| bad("out of range".into()))?
    };
    if at.duration_since(now).is_ok_and(|ahead| ahead > MAX_START_AHEAD) {
        return Err(bad(format!(
            "{} is more than a day ahead (now is {}); a shared start is minutes away",
            format_start(at),
            format_start(now)
        ))
        .into());
    }
    Ok(at)
}

/// `at` as `--start-at` reads it back (RFC 3339, UTC, whole seconds).
pub fn format_start(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Splits `+HH:MM` / `-HH:MM` / `Z` off an RFC 3339 time: the rest and the offset in seconds;
/// None without a zone (or with one out of range).
fn split_offset(t: &str) -> Option<(&str, i64)> {
    if let Some(base) = t.strip_suffix('Z').or_else(|| t.strip_suffix('z')) {
        return Some((base, 0));
    }
    // An offset is the last 6 characters when they read ±HH:MM after the time's seconds.
    if t.len() > 6 && t.is_char_boundary(t.len() - 6) {
        let (base, zone) = t.split_at(t.len() - 6);
        let sign = match zone.as_bytes()[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let (h, m) = zone[1..].split_once(':')?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        if h > 23 || m > 59 {
            return None;
        }
        return Some((base, sign * (h * 3600 + m * 60)));
    }
    None
}

/// How a wait for the shared start ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Waited {
    /// The start time came (or had passed by less than this much: the run started late by it).
    Started { late: Duration },
    /// Stopped (Ctrl-C) before the start.
    Cancelled,
}

/// Sleeps until `at` unless `cancelled` says stop first (checked every 50 ms).
pub fn wait_until(at: SystemTime, cancelled: &dyn Fn() -> bool) -> Waited {
    loop {
        if cancelled() {
            return Waited::Cancelled;
        }
        match at.duration_since(SystemTime::now()) {
            Ok(left) if !left.is_zero() => std::thread::sleep(left.min(Duration::from_millis(50))),
            Ok(_) => return Waited::Started { late: Duration::ZERO },
            Err(e) => return Waited::Started { late: e.duration() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn parses_segments_and_refuses_the_rest() {
        assert_eq!(Segment::parse("2/3", no_env), Ok(Segment { index: 2, count: 3 }));
        assert_eq!(Segment::parse(" 1 / 1 ", no_env), Ok(Segment { index: 1, count: 1 }));
        let k8s = |v: &str| (v == K8S_INDEX_VAR).then(|| "2".to_string());
        assert_eq!(Segment::parse("auto/4", k8s), Ok(Segment { index: 3, count: 4 }));
        for (text, says) in [
            ("3", "not I/N"),
            ("0/3", "I must be 1 to 3"),
            ("4/3", "I must be 1 to 3"),
            ("1/0", "N must be 1 to"),
            ("a/3", "I is not a whole number"),
            ("1/x", "N is not a whole number"),
            // The second probe: a number too large is named as such.
            ("1/4294967296", "N must be 1 to 10000, not 4294967296"),
            ("99999999999/3", "I must be 1 to 3"),
            ("auto/3", "JOB_COMPLETION_INDEX, which is not set"),
        ] {
            let e = Segment::parse(text, no_env).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let e = Segment::parse("auto/2", |_| Some("2".into())).unwrap_err().to_string();
        assert!(e.contains("JOB_COMPLETION_INDEX=2 is out of range: pods are numbered 0 to 1 for 2 segments"), "{e}");
        let e = Segment::parse("auto/2", |_| Some("99999999999".into())).unwrap_err().to_string();
        assert!(e.contains("JOB_COMPLETION_INDEX=99999999999 is out of range"), "{e}");
    }

    #[test]
    fn segments_partition_connections_and_arrivals() {
        for total in [3usize, 7, 10, 100] {
            for n in 1..=5u32 {
                let segs: Vec<Segment> = (1..=n).map(|index| Segment { index, count: n }).collect();
                let mut next = 0;
                for s in &segs {
                    let (first, width) = s.connections(total);
                    assert_eq!(first, next, "total {total}, {s}");
                    next += width;
                }
                assert_eq!(next, total);
                for arrivals in [0u64, 1, 5, 999, 1000] {
                    assert_eq!(segs.iter().map(|s| s.arrivals(arrivals)).sum::<u64>(), arrivals);
                    for k in 0..arrivals.min(50) {
                        assert_eq!(segs.iter().filter(|s| s.owns(k)).count(), 1);
                    }
                    for s in &segs {
                        assert_eq!((0..arrivals).filter(|&k| s.owns(k)).count() as u64, s.arrivals(arrivals));
                    }
                }
            }
        }
        // -c 10 over 3: 4 + 3 + 3, in order.
        assert_eq!(Segment { index: 1, count: 3 }.connections(10), (0, 4));
        assert_eq!(Segment { index: 3, count: 3 }.connections(10), (7, 3));
    }

    #[test]
    fn start_times() {
        let epoch = |s: u64, ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms);
        // 2026-11-23T07:46:40.3Z
        let now = epoch(1_795_420_000, 300);
        assert_eq!(parse_start_at("+5s", now), Ok(epoch(1_795_420_006, 0)));
        assert_eq!(parse_start_at("+0s", epoch(10, 0)), Ok(epoch(10, 0)));
        let z = parse_start_at("2026-11-23T10:00:00Z", now).unwrap();
        assert_eq!(parse_start_at("2026-11-23T11:30:00+01:30", now), Ok(z));
        assert_eq!(parse_start_at("2026-11-23T08:00:00-02:00", now), Ok(z));
        assert_eq!(z.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(), 1_795_428_000);
        assert_eq!(format_start(z), "2026-11-23T10:00:00Z");
        // The second probe: the year 9999 was accepted, and a time without a zone read as UTC.
        let e = parse_start_at("9999-01-01T00:00:00Z", now).unwrap_err().to_string();
        assert!(e.contains("9999-01-01T00:00:00Z is more than a day ahead (now is 2026-11-23T07:46:40Z"), "{e}");
        assert!(parse_start_at("+2d", now).unwrap_err().to_string().contains("more than a day ahead"));
        assert!(parse_start_at("+23h", now).is_ok());
        let e = parse_start_at("2026-11-23T10:00:00", now).unwrap_err().to_string();
        assert!(e.contains("no time zone: end it with Z for UTC"), "{e}");
        for bad in ["tomorrow", "+soon", "2026-13-01T00:00:00Z", "2026-11-23T10:00:00+25:00", "+99999999999999999999y"]
        {
            let e = parse_start_at(bad, now).unwrap_err().to_string();
            assert!(e.contains("--start-at") && e.contains("RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn waits_for_a_past_time_return_at_once_and_say_how_late() {
        let past = SystemTime::now() - Duration::from_secs(2);
        match wait_until(past, &|| false) {
            Waited::Started { late } => assert!(late >= Duration::from_secs(2)),
            w => panic!("{w:?}"),
        }
        let future = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(wait_until(future, &|| true), Waited::Cancelled);
    }
}

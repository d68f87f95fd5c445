//! ApacheBench's `-g` per-request TSV (starttime, seconds, ctime, dtime, ttime, wait; times in
//! whole milliseconds), the one output that lists every request. Each worker streams its lines to
//! its own part file beside the destination; [`assemble`] joins them under ab's header and moves
//! the result into place in one rename.
//!
//! ab prints `starttime` with the local time zone; bolide prints UTC so files from different
//! machines line up. The `seconds` column (Unix time) is what gnuplot scripts plot.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::files;
use crate::problem::Problem;

/// ab's header line.
pub const HEADER: &str = "starttime\tseconds\tctime\tdtime\tttime\twait\n";

/// One worker's share of the lines.
pub struct PartWriter {
    out: BufWriter<File>,
    path: PathBuf,
    /// The last second formatted, and its text, so the date is formatted once a second.
    cached: (u64, String),
}

/// One request's timings, microseconds.
#[derive(Debug, Clone, Copy)]
pub struct Line {
    pub start: SystemTime,
    pub connect_us: u64,
    pub total_us: u64,
    pub wait_us: u64,
}

impl PartWriter {
    /// A part file for worker `worker` beside `dest`.
    pub fn create(dest: &Path, worker: usize) -> io::Result<PartWriter> {
        let path = files::sibling(dest, &format!("part{worker}"));
        let out = BufWriter::with_capacity(64 * 1024, File::create(&path)?);
        Ok(PartWriter { out, path, cached: (u64::MAX, String::new()) })
    }

    pub fn write(&mut self, line: &Line) -> io::Result<()> {
        let secs = line.start.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
        if self.cached.0 != secs {
            self.cached = (secs, ctime_utc(secs));
        }
        let ms = |us: u64| (us + 500) / 1000;
        let (ctime, ttime) = (ms(line.connect_us), ms(line.total_us));
        writeln!(
            self.out,
            "{}\t{secs}\t{ctime}\t{}\t{ttime}\t{}",
            self.cached.1,
            ttime.saturating_sub(ctime),
            ms(line.wait_us)
        )
    }

    /// Flushes and hands back the part's path; on failure the part is removed.
    pub fn finish(mut self) -> io::Result<PathBuf> {
        match self.out.flush() {
            Ok(()) => Ok(self.path),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Removes the part (after a write failed: the file would be incomplete).
    pub fn abandon(self) {
        let PartWriter { out, path, .. } = self;
        // Dropping the writer retries its flush; the file goes either way.
        drop(out.into_parts());
        let _ = std::fs::remove_file(path);
    }
}

/// Writes `dest` atomically: ab's header, then every part in order; removes the parts.
pub fn assemble(dest: &Path, parts: &[PathBuf]) -> io::Result<()> {
    let result = files::write_atomically(dest, |w| {
        w.write_all(HEADER.as_bytes())?;
        for part in parts {
            io::copy(&mut File::open(part)?, w)?;
        }
        Ok(())
    });
    discard(parts);
    result
}

/// Removes part files (after a failure, or once assembled).
pub fn discard(parts: &[PathBuf]) {
    for part in parts {
        let _ = std::fs::remove_file(part);
    }
}

/// `Sat Nov 21 04:55:00 2026`, as C's ctime() without the newline, in UTC.
pub fn ctime_utc(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {y}",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        d,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Every request of a per-request file, thinned for drawing (the Node-vs-nginx figure: each
/// request's total time against the second it started).
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSample {
    /// Requests in the file.
    pub requests: u64,
    /// Seconds from the first request's second to the last's, plus one.
    pub seconds: u64,
    /// (seconds since the first request's second, total time in ms), by second then time. Every
    /// second's slowest request is among them.
    pub points: Vec<(u32, u32)>,
}

/// A second's requests while reading: how many, the slowest, and a uniform random sample.
#[derive(Default)]
struct SecondSample {
    count: u64,
    slowest: u32,
    kept: Vec<u32>,
}

/// xorshift64*: a fixed seed, so that the same file always gives the same points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Calls `each(second, total ms)` for every request of a per-request file; errors name the file
/// and line.
fn read_requests(path: &Path, mut each: impl FnMut(u64, u32)) -> Result<(), Problem> {
    use std::io::BufRead;
    let file = File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let mut lines = io::BufReader::new(file).lines();
    let header = lines.next().transpose().map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if header.as_deref().map(str::trim_end) != Some(HEADER.trim_end()) {
        return Err(format!(
            "{}:1: not a per-request file (ab -g layout): the first line should be {:?}",
            path.display(),
            HEADER.trim_end()
        )
        .into());
    }
    for (n, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("{}:{}: cannot read: {e}", path.display(), n + 2))?;
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let parsed = match cols.as_slice() {
            [_, secs, _, _, ttime, _] => secs.trim().parse::<u64>().ok().zip(ttime.trim().parse::<u32>().ok()),
            _ => None,
        };
        let Some((second, total_ms)) = parsed else {
            return Err(format!(
                "{}:{}: expected six tab-separated columns (starttime, seconds, ctime, dtime, ttime, wait) with \
                 whole numbers for seconds and ttime",
                path.display(),
                n + 2
            )
            .into());
        };
        each(second, total_ms);
    }
    Ok(())
}

/// Reads a per-request file in ab's `-g` layout (written by bolide or by ab) and keeps about
/// `budget` points spread evenly over its seconds: each second a uniform random sample of its
/// requests (reservoir sampling), and always its slowest, so that stalls and outliers stay
/// visible when there are millions. Two passes: the first counts the seconds, so that the second
/// keeps no more than it draws. Errors name the file and line.
pub fn sample(path: &Path, budget: usize) -> Result<RequestSample, Problem> {
    let mut seconds = std::collections::BTreeSet::new();
    let mut requests = 0u64;
    read_requests(path, |second, _| {
        requests += 1;
        seconds.insert(second);
    })?;
    let (Some(first), Some(last)) = (seconds.first().copied(), seconds.last().copied()) else {
        return Ok(RequestSample { requests: 0, seconds: 0, points: Vec::new() });
    };
    let keep = (budget / seconds.len()).max(1);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut by_second: std::collections::BTreeMap<u64, SecondSample> = Default::default();
    read_requests(path, |second, total_ms| {
        let s = by_second.entry(second).or_default();
        s.count += 1;
        s.slowest = s.slowest.max(total_ms);
        if s.kept.len() < keep {
            s.kept.push(total_ms);
        } else {
            let j = rng.below(s.count) as usize;
            if j < keep {
                s.kept[j] = total_ms;
            }
        }
    })?;
    let mut points = Vec::new();
    for (second, mut s) in by_second {
        if !s.kept.contains(&s.slowest) {
            s.kept[0] = s.slowest;
        }
        s.kept.sort_unstable();
        points.extend(s.kept.into_iter().map(|ms| ((second - first) as u32, ms)));
    }
    Ok(RequestSample { requests, seconds: last - first + 1, points })
}

/// Whether `path` is a per-request file (its first line is ab's `-g` header).
pub fn is_requests_file(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 64];
    let Ok(mut f) = File::open(path) else { return false };
    let n = f.read(&mut head).unwrap_or(0);
    head[..n].starts_with(b"starttime\tseconds\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(dir: &Path, body: &str) -> PathBuf {
        let p = dir.join("r.tsv");
        std::fs::write(&p, format!("{HEADER}{body}")).unwrap();
        p
    }

    #[test]
    fn sample_keeps_every_request_under_the_budget_and_each_seconds_slowest_over_it() {
        let dir = tempfile::tempdir().unwrap();
        // Three seconds (the middle one empty), 1,000 requests each; second 2 has one slow one.
        let mut body = String::new();
        for (sec, slow) in [(100u64, false), (102, true)] {
            for i in 0..1000 {
                let ttime = if slow && i == 517 { 900 } else { i % 7 + 1 };
                body.push_str(&format!("x\t{sec}\t0\t{ttime}\t{ttime}\t0\n"));
            }
        }
        let p = write_file(dir.path(), &body);
        let all = sample(&p, 10_000).unwrap();
        assert_eq!((all.requests, all.seconds, all.points.len()), (2000, 3, 2000));
        let thin = sample(&p, 100).unwrap();
        assert_eq!((thin.requests, thin.seconds, thin.points.len()), (2000, 3, 100));
        assert!(thin.points.iter().all(|(x, _)| *x == 0 || *x == 2));
        assert_eq!(thin.points.iter().filter(|(x, _)| *x == 2).map(|p| p.1).max(), Some(900));
        assert_eq!(thin, sample(&p, 100).unwrap(), "the same file gives the same points");
    }

    #[test]
    fn sample_names_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_file(dir.path(), "x\t100\t0\t1\t1\t0\nx\t100\tzero\n");
        let e = sample(&p, 100).unwrap_err().to_string();
        assert!(e.ends_with(":3: expected six tab-separated columns (starttime, seconds, ctime, dtime, ttime, wait) with whole numbers for seconds and ttime"), "{e}");
        std::fs::write(&p, "{}").unwrap();
        assert!(sample(&p, 100).unwrap_err().to_string().contains(":1: not a per-request file"));
        assert!(!is_requests_file(&p));
    }

    #[test]
    fn ctime_format() {
        // Each row: Unix seconds, what C's ctime() prints in UTC.
        let rows = [
            (0, "Thu Jan  1 00:00:00 1970"),
            (951_782_400, "Tue Feb 29 00:00:00 2000"),
            (1_795_240_500, "Sat Nov 21 05:55:00 2026"),
        ];
        for (secs, want) in rows {
            assert_eq!(ctime_utc(secs), want);
        }
    }

    #[test]
    fn parts_assemble_under_the_header() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.tsv");
        let start = UNIX_EPOCH + Duration::from_secs(1_795_240_500);
        let mut parts = Vec::new();
        for worker in 0..2 {
            let mut p = PartWriter::create(&dest, worker).unwrap();
            p.write(&Line { start, connect_us: 1_400, total_us: 5_600, wait_us: 3_000 }).unwrap();
            parts.push(p.finish().unwrap());
        }
        assemble(&dest, &parts).unwrap();
        let text = std::fs::read_to_string(&dest).unwrap();
        let line = "Sat Nov 21 05:55:00 2026\t1795240500\t1\t5\t6\t3\n";
        assert_eq!(text, format!("{HEADER}{line}{line}"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "parts removed");
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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

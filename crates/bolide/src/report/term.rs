//! The rows and units every terminal summary shares (each workload's own summary is its report
//! part's, `http.rs` and `vu.rs`): counts, times, rates and bytes as people read them, the
//! thresholds, the watched processes, bolide's own CPU, a segment's note.

use std::fmt::Write as _;

/// `812µs`, `12.34ms`, `1.20s`.
pub fn us(v: f64) -> String {
    if v < 1_000.0 {
        format!("{v:.0}µs")
    } else if v < 1_000_000.0 {
        format!("{:.2}ms", v / 1_000.0)
    } else {
        format!("{:.2}s", v / 1_000_000.0)
    }
}

/// `171,800.8`: a rate with grouped digits and one decimal.
pub fn rate(v: f64) -> String {
    grouped(v, 1)
}

/// `26,825`, `1,312.50`: a number with `decimals` places and its whole part's digits grouped by
/// thousands (a negative one keeps its sign; what is not finite is written as it is).
pub fn grouped(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let text = format!("{:.decimals$}", v.abs());
    let (whole, fraction) = text.split_once('.').map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    // The whole part as written (rounded with the decimals), grouped; past u64 it stays as it is.
    let whole = whole.parse::<u64>().map_or_else(|_| whole.to_string(), count);
    let sign = if v < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') { "-" } else { "" };
    match fraction {
        Some(f) => format!("{sign}{whole}.{f}"),
        None => format!("{sign}{whole}"),
    }
}

/// `1.23 MB` (decimal units, as the rates are).
pub fn bytes(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2} GB", v / 1e9),
        v if v >= 1e6 => format!("{:.2} MB", v / 1e6),
        v if v >= 1e3 => format!("{:.2} kB", v / 1e3),
        v => format!("{v:.0} B"),
    }
}

/// Digits grouped by thousands: `1,234,567`.
pub fn count(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Every threshold, its value and its verdict, one per line, a broken one ending in BROKEN:
///
/// ```text
///   Thresholds    p99<200ms        12.34 ms      ok
///                 cpu.app<80%      no value: app was never sampled   BROKEN
/// ```
///
/// A broken threshold of a suspect run (the generator or the machine may have been the limit)
/// says so: the exit code stays 1, but the verdict is not the server's alone.
pub fn threshold_rows(results: &[crate::threshold::ThresholdResult], suspect: Option<&str>) -> String {
    let mut out = String::new();
    if results.is_empty() {
        return out;
    }
    let width = results.iter().map(|r| r.threshold.chars().count()).max().unwrap_or(0) + 3;
    let value_width = results.iter().map(|r| r.shown().chars().count()).max().unwrap_or(0) + 3;
    out.push('\n');
    for (i, r) in results.iter().enumerate() {
        let label = if i == 0 { "Thresholds" } else { "" };
        let verdict = if r.ok { "ok" } else { "BROKEN" };
        let _ = writeln!(out, "  {label:<14}{:<width$}{:<value_width$}{verdict}", r.threshold, r.shown());
    }
    let broken = results.iter().filter(|r| !r.ok).count();
    if broken > 0 {
        let _ = writeln!(out, "  {:<14}{broken} of {} thresholds broken: exit code 1", "", results.len());
        if let Some(why) = suspect {
            let _ = writeln!(
                out,
                "  {:<14}the run is suspect ({why}): bolide or the machine, not only the server, may have broken them; \
                 run again on a quieter machine before blaming the server",
                ""
            );
        }
    }
    out
}

/// The server processes' CPU and RAM, as the Meteor reports give them.
/// The line under a summary's title that says the run is one segment of a plan, or the merge of
/// several (with what is missing or suspect); empty for a whole run.
pub fn segment_note(
    segment: Option<crate::segment::Segment>,
    merged: Option<&crate::stats::merge_info::MergeInfo>,
) -> String {
    if let Some(s) = segment {
        return format!(
            "  (segment {s} of the plan: this instance's share; `bolide merge` makes the whole run of the segments)\n"
        );
    }
    let Some(m) = merged else { return String::new() };
    let mut out = format!("  (merged from {} of {} segments", m.segments.len(), m.segments_planned);
    if !m.missing.is_empty() {
        let list: Vec<String> = m.missing.iter().map(|i| format!("{i}/{}", m.segments_planned)).collect();
        let _ = write!(out, "; MISSING {}", list.join(", "));
    }
    if !m.duplicated.is_empty() {
        let list: Vec<String> = m.duplicated.iter().map(|i| format!("{i}/{}", m.segments_planned)).collect();
        let _ = write!(out, "; given twice {}", list.join(", "));
    }
    let suspect: Vec<String> = m
        .segments
        .iter()
        .filter(|s| s.generator.as_ref().is_some_and(|g| g.suspect.is_some()))
        .map(|s| s.index.to_string())
        .collect();
    if !suspect.is_empty() {
        let _ = write!(out, "; suspect segment {}", suspect.join(", "));
    }
    out.push_str(")\n");
    out
}

pub fn monitor_rows(monitor: &[crate::monitor::MonitorResult]) -> String {
    let mut out = String::new();
    if monitor.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n  {:<14}{:>10}{:>10}{:>12}{:>12}", "Server", "CPU avg", "CPU peak", "RAM avg", "RAM peak");
    for m in monitor {
        if m.samples.is_empty() {
            // Never measured: no figure at all, rather than zeros that read as measured.
            let _ = writeln!(out, "  {:<14}{:>10}{:>10}{:>12}{:>12}   (not found)", m.name, "n/a", "n/a", "n/a", "n/a");
            continue;
        }
        let _ = write!(
            out,
            "  {:<14}{:>9.2}%{:>9.2}%{:>12}{:>12}",
            m.name,
            m.avg_cpu_pct,
            m.peak_cpu_pct,
            bytes(m.avg_rss_bytes),
            bytes(m.peak_rss_bytes as f64)
        );
        for (t, pid) in &m.followed {
            let _ = write!(out, "   (restarted at {t:.1} s: pid {pid})");
        }
        if let Some(t) = m.vanished_s {
            let _ = write!(out, "   (gone after {t:.1} s)");
        }
        out.push('\n');
    }
    out.push_str("  (CPU in percent of one core, process and descendants, sampled once a second)\n");
    out
}

/// The load threads' CPU for the work: "1.52 µs of CPU per request (0.030 s in all)".
pub fn cpu_line(g: &crate::monitor::generator::GeneratorResult) -> Option<String> {
    let (per, what) = match (g.cpu_us_per_request, g.cpu_us_per_message) {
        (Some(v), _) => (v, "request"),
        (None, Some(v)) => (v, "message"),
        _ => return None,
    };
    Some(format!("{per:.2} µs of bolide's CPU per {what} ({:.3} s in all, its load threads' own clocks)", g.cpu_s?))
}

/// bolide's own load and the machine's idle CPU, and the warning when the run is suspect.
pub fn generator_rows(g: Option<&crate::monitor::generator::GeneratorResult>) -> String {
    let mut out = String::new();
    let Some(g) = g else { return out };
    if let Some(cpu) = cpu_line(g) {
        let _ = writeln!(out, "  {:<14}{cpu}", "Generator CPU");
    }
    if g.samples.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:<14}{} load thread{}, {:.1}% CPU on average (busiest thread peak {:.0}%); machine idle CPU {:.0}% on average, {:.0}% at least",
        "Generator",
        g.threads,
        if g.threads == 1 { "" } else { "s" },
        g.avg_cpu_pct,
        g.peak_thread_pct,
        g.avg_machine_idle_pct,
        g.min_machine_idle_pct
    );
    if let Some(d) = g.dashboard_cpu_pct {
        let _ = writeln!(out, "  {:<14}the live dashboard's threads: {d:.1}% CPU on average", "");
    }
    if let Some(why) = &g.suspect {
        let _ =
            writeln!(out, "  SUSPECT       {why}: these numbers may measure bolide or this machine, not the server");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_threshold_of_a_suspect_run_says_the_run_is_suspect() {
        let t = crate::threshold::parse("p99<10ms", crate::threshold::Source::Flag).unwrap();
        let broken = vec![t.judge(false, Ok(25.0))];
        let clean = threshold_rows(&broken, None);
        assert!(clean.contains("1 of 1 thresholds broken: exit code 1") && !clean.contains("suspect"), "{clean}");
        let busy = threshold_rows(&broken, Some("the machine had under 5% idle CPU in 3 of 4 samples"));
        assert!(busy.contains("the run is suspect (the machine had under 5% idle CPU in 3 of 4 samples)"), "{busy}");
        // A run whose thresholds held says nothing more, suspect or not.
        let held =
            vec![crate::threshold::parse("p99<10ms", crate::threshold::Source::Flag).unwrap().judge(false, Ok(5.0))];
        assert!(!threshold_rows(&held, Some("x")).contains("suspect"));
    }
    #[test]
    fn number_formats() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(100), "100");
        assert_eq!(us(812.0), "812µs");
        assert_eq!(us(12_345.0), "12.35ms");
        assert_eq!(us(1_200_000.0), "1.20s");
        assert_eq!(bytes(1_234_567.0), "1.23 MB");
        assert_eq!(bytes(999.0), "999 B");
        assert_eq!(rate(171_800.84), "171,800.8");
        assert_eq!(rate(0.0), "0.0");
        // Grouped at any precision; rounding carries into the whole part; a sign only on a
        // number that is not zero as written.
        assert_eq!(grouped(26825.0, 0), "26,825");
        assert_eq!(grouped(1312.456, 2), "1,312.46");
        assert_eq!(grouped(999.96, 1), "1,000.0");
        assert_eq!(grouped(-1234.5, 1), "-1,234.5");
        assert_eq!(grouped(-0.01, 1), "0.0");
        assert_eq!(grouped(f64::NAN, 1), "NaN");
        assert_eq!(crate::report::table::ms(1312.4), "1,312 ms");
        assert_eq!(crate::report::table::ms(12.34), "12.3 ms");
    }
}

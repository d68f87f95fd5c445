//! The terminal summary of an HTTP run, and the live progress line.

use std::fmt::Write as _;

use crate::engine::http::Progress;
use crate::stats::result::{Latency, ResultDoc};

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

fn row(out: &mut String, label: &str, cells: &[String]) {
    let _ = write!(out, "  {label:<14}");
    for c in cells {
        let _ = write!(out, "{c:>10}");
    }
    out.push('\n');
}

fn latency_rows(out: &mut String, l: &Latency) {
    let h = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    row(out, "Latency", &h(&["min", "mean", "stdev", "max"]));
    row(out, "", &[us(l.min_us as f64), us(l.mean_us), us(l.stdev_us), us(l.max_us as f64)]);
    row(out, "Percentiles", &h(&["p50", "p75", "p90", "p99", "p99.9", "p99.99"]));
    let p = [l.p50_us, l.p75_us, l.p90_us, l.p99_us, l.p99_9_us, l.p99_99_us];
    row(out, "", &p.map(|v| us(v as f64)));
}

/// The whole summary, for stdout.
pub fn summary(doc: &ResultDoc) -> String {
    let s = &doc.summary;
    let set = &doc.settings;
    let mut out = String::new();
    let bound = match (set.duration_s, set.requests) {
        (_, Some(n)) => format!("{} requests", count(n)),
        (Some(d), None) => format!("{d}s"),
        (None, None) => String::new(),
    };
    let model = match set.rate_per_s {
        Some(r) => format!("fixed rate {r} req/s"),
        None => "as fast as answered".to_string(),
    };
    let keep = if set.keep_alive { "keep-alive" } else { "new connection per request" };
    let urls = if doc.targets.len() == 1 { doc.targets[0].clone() } else { format!("{} URLs", doc.targets.len()) };
    let _ = writeln!(
        out,
        "bolide http {urls}: {} connections, {} threads, {bound}, {model}, {keep}",
        set.connections, set.threads
    );
    if doc.interrupted {
        out.push_str("  (interrupted: the figures cover what was done before Ctrl-C)\n");
    }
    out.push('\n');
    let _ = write!(
        out,
        "  {:<14}{} responses in {:.2}s, {} errors",
        "Requests",
        count(s.responses),
        s.duration_s,
        count(s.errors)
    );
    if s.unfinished > 0 {
        let _ = write!(out, ", {} in flight at the end", count(s.unfinished));
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "  {:<14}{:.1} req/s, {}/s in ({} total, {} connections opened)",
        "Throughput",
        s.requests_per_s,
        bytes(s.bytes_in_per_s),
        bytes(s.bytes_in as f64),
        count(s.connects)
    );
    out.push('\n');
    latency_rows(&mut out, &s.latency);
    out.push('\n');
    let r = &s.rate;
    row(&mut out, "Req/s", &["1%", "2.5%", "50%", "97.5%", "avg", "stdev", "min"].map(String::from));
    let label = format!("({} s)", r.samples);
    row(&mut out, &label, &[r.p1, r.p2_5, r.p50, r.p97_5, r.mean, r.stdev, r.min].map(|v| format!("{v:.0}")));
    out.push('\n');
    let status: Vec<String> = s.status.iter().map(|(k, v)| format!("{k}: {}", count(*v))).collect();
    let status = if status.is_empty() { "none".to_string() } else { status.join(", ") };
    let _ = writeln!(out, "  {:<14}{status}", "Status");
    if s.non_2xx_3xx > 0 {
        let _ = writeln!(out, "  {:<14}{} responses not 2xx or 3xx", "", count(s.non_2xx_3xx));
    }
    let errors: Vec<String> =
        s.errors_by_class.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {}", count(*v))).collect();
    let errors = if errors.is_empty() { "none".to_string() } else { errors.join(", ") };
    let _ = writeln!(out, "  {:<14}{errors}", "Errors");
    if let Some(rate) = set.rate_per_s {
        let _ = writeln!(
            out,
            "  {:<14}{rate} req/s: {} sends late by more than 1 ms, {} never sent, worst lag {}",
            "Schedule",
            count(s.late_sends),
            count(s.missed_sends),
            us(s.max_lag_us as f64)
        );
    }
    if doc.per_target.len() > 1 {
        out.push('\n');
        let _ = writeln!(
            out,
            "  {:<40}{:>12}{:>10}{:>12}{:>10}{:>10}",
            "URL", "responses", "errors", "req/s", "p50", "p99"
        );
        for t in &doc.per_target {
            let _ = writeln!(
                out,
                "  {:<40}{:>12}{:>10}{:>12.1}{:>10}{:>10}",
                t.url,
                count(t.responses),
                count(t.errors),
                t.requests_per_s,
                us(t.latency.p50_us as f64),
                us(t.latency.p99_us as f64)
            );
        }
    }
    out
}

/// The live line (stderr, terminals only), redrawn in place.
pub fn live_line(p: &Progress) -> String {
    let elapsed = p.elapsed.as_secs();
    let clock = match p.planned {
        Some(planned) => format!("{elapsed}s/{}s", planned.as_secs()),
        None => format!("{elapsed}s"),
    };
    format!(
        "\r\x1b[K  {clock}  {} responses  {} req/s  {} errors",
        count(p.responses),
        count(p.last_second_responses),
        count(p.errors)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

//! The terminal summary of an HTTP run, and the live progress line.

use std::fmt::Write as _;

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

/// `171,800.8`: a rate with grouped digits and one decimal.
pub fn rate(v: f64) -> String {
    let tenths = (v * 10.0).round() as u64;
    format!("{}.{}", count(tenths / 10), tenths % 10)
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

/// What an HTTP run does, in one line: `bolide http URL: 20 connections, 2 threads, 8s, as fast
/// as answered, keep-alive`. Printed before the run starts, and heading its summary.
pub fn header(set: &crate::stats::result::HttpSettings, targets: &[String]) -> String {
    let bound = match (set.duration_s, set.requests) {
        (_, Some(n)) => format!("{} requests", count(n)),
        (Some(d), None) => format!("{d}s"),
        (None, None) => String::new(),
    };
    let model = match set.rate_per_s {
        Some(r) => format!("fixed rate {r} req/s"),
        None => "as fast as answered".to_string(),
    };
    let keep = match (&set.protocol, set.streams) {
        (Some(p), Some(n)) => {
            format!("HTTP/2 ({p}), {} per connection", if n == 1 { "1 stream".into() } else { format!("{n} streams") })
        }
        (Some(p), None) => format!("HTTP/2 ({p})"),
        _ if set.keep_alive => "keep-alive".to_string(),
        _ => "new connection per request".to_string(),
    };
    let urls = if targets.len() == 1 { targets[0].clone() } else { format!("{} URLs", targets.len()) };
    let plural = |n: usize, word: &str| if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") };
    format!(
        "bolide http {urls}: {}, {}, {bound}, {model}, {keep}",
        plural(set.connections, "connection"),
        plural(set.threads, "thread")
    )
}

/// The whole summary, for stdout.
pub fn summary(doc: &ResultDoc) -> String {
    let s = &doc.summary;
    let set = &doc.settings;
    let mut out = String::new();
    let _ = writeln!(out, "{}", header(set, &doc.targets));
    if doc.interrupted {
        out.push_str("  (interrupted: the figures cover what was done before the stop signal)\n");
    }
    out.push_str(&segment_note(set.segment, doc.merged.as_ref()));
    out.push('\n');
    let _ = write!(
        out,
        "  {:<14}{} responses in {:.2}s, {} failed",
        "Requests",
        count(s.responses),
        s.duration_s,
        count(s.errors)
    );
    let failures = doc.failures();
    if !failures.is_empty() {
        let parts: Vec<String> = failures.iter().map(|(what, n)| format!("{what}: {}", count(*n))).collect();
        let _ = write!(out, " ({})", parts.join(", "));
    }
    if s.unfinished > 0 {
        let _ = write!(out, ", {} in flight at the end", count(s.unfinished));
    }
    if s.retries > 0 {
        // Each went on the wire twice: the server may have read it twice.
        let why = match set.protocol {
            Some(_) => "resent on a new connection after a GOAWAY refused them",
            None => "resent after a kept-alive connection closed",
        };
        let _ = write!(out, "\n{:<16}{} {why}", "", count(s.retries));
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "  {:<14}{} req/s, {}/s in ({} total, {} connections opened)",
        "Throughput",
        rate(s.requests_per_s),
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
    let mut status = if status.is_empty() { "none".to_string() } else { status.join(", ") };
    if let Some(expected) = set.expect_status.as_deref().filter(|e| *e != "200-399") {
        let _ = write!(status, " (expected {expected})");
    }
    let _ = writeln!(out, "  {:<14}{status}", "Status");
    let errors: Vec<String> =
        s.errors_by_class.iter().filter(|(_, v)| **v > 0).map(|(k, v)| format!("{k} {}", count(*v))).collect();
    let errors = if errors.is_empty() { "none".to_string() } else { errors.join(", ") };
    let _ = writeln!(out, "  {:<14}{errors}", "Errors");
    if let Some(rate) = set.rate_per_s {
        let _ = writeln!(
            out,
            "  {:<14}{rate} req/s: send lag p50 {}, p99 {}, max {}; {} sends late by more than {}, {} never sent",
            "Schedule",
            us(s.lag_p50_us as f64),
            us(s.lag_p99_us as f64),
            us(s.max_lag_us as f64),
            count(s.late_sends),
            us(s.late_threshold_us as f64),
            count(s.missed_sends)
        );
    }
    out.push_str(&monitor_rows(&doc.monitor));
    out.push_str(&crate::monitor::scrape::rows(&doc.scrape, 8));
    out.push_str(&generator_rows(doc.generator.as_ref()));
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
    out.push_str(&threshold_rows(&doc.thresholds, doc.generator.as_ref().and_then(|g| g.suspect.as_deref())));
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
        (None, Some(v)) => (v, "DDP message"),
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
    use crate::stats::result::{Histograms, Host, HttpSettings, RateDistribution, Summary, TargetSummary, Tool};
    use std::collections::BTreeMap;

    fn latency(base: u64) -> Latency {
        Latency {
            min_us: base / 4,
            mean_us: base as f64 * 1.1,
            stdev_us: base as f64 / 3.0,
            max_us: base * 40,
            p50_us: base,
            p75_us: base * 2,
            p90_us: base * 3,
            p99_us: base * 10,
            p99_9_us: base * 20,
            p99_99_us: base * 30,
        }
    }

    fn doc() -> ResultDoc {
        let classes = |timeouts: u64| -> BTreeMap<String, u64> {
            ["closed", "connect", "malformed", "other", "reset", "timeout", "tls"]
                .iter()
                .map(|c| (c.to_string(), if *c == "timeout" { timeouts } else { 0 }))
                .collect()
        };
        let target = |url: &str, responses: u64, errors: u64, p50: u64| TargetSummary {
            url: url.into(),
            responses,
            errors,
            requests_per_s: responses as f64 / 10.0,
            bytes_in: responses * 100,
            connects: 5,
            retries: 0,
            latency: latency(p50),
            status: BTreeMap::from([("200".to_string(), responses)]),
            errors_by_class: classes(errors),
            latency_histogram: String::new(),
        };
        ResultDoc {
            format: "bolide.result".into(),
            version: 1,
            tool: Tool { name: "bolide".into(), version: "0.1.0".into() },
            kind: "http".into(),
            command_line: vec![],
            started_at: "2026-11-21T05:00:00.000Z".into(),
            interrupted: false,
            host: Host { cores: 2, os: "linux".into(), arch: "x86_64".into(), kernel: "6".into() },
            settings: HttpSettings {
                connections: 10,
                threads: 2,
                duration_s: Some(10.0),
                requests: None,
                rate_per_s: Some(2000.0),
                method: "GET".into(),
                headers: vec![],
                body_bytes: 0,
                timeout_s: 10.0,
                keep_alive: true,
                insecure: false,
                retry_closed: true,
                expect_status: Some("200-399".into()),
                segment: None,
                protocol: None,
                streams: None,
            },
            targets: vec!["http://127.0.0.1:8080/".into(), "http://127.0.0.1:8080/api".into()],
            summary: Summary {
                responses: 19_990,
                // 7 timeouts and the 990 responses of status 503.
                errors: 997,
                unfinished: 3,
                sent: 20_000,
                duration_s: 10.0,
                requests_per_s: 1999.0,
                bytes_in: 1_999_000,
                bytes_in_per_s: 199_900.0,
                connects: 10,
                retries: 3,
                latency: latency(850),
                rate: RateDistribution {
                    samples: 10,
                    p1: 1990.0,
                    p2_5: 1990.0,
                    p50: 2000.0,
                    p97_5: 2010.0,
                    mean: 1999.0,
                    stdev: 5.5,
                    min: 1990.0,
                    max: 2010.0,
                },
                status: BTreeMap::from([("200".to_string(), 19_000), ("503".to_string(), 990)]),
                non_2xx_3xx: 990,
                errors_by_class: {
                    let mut c = classes(7);
                    c.insert("status".into(), 990);
                    c
                },
                late_sends: 12,
                missed_sends: 0,
                max_lag_us: 2_500,
                lag_p50_us: 14,
                lag_p99_us: 90,
                late_threshold_us: 200,
            },
            per_target: vec![
                target("http://127.0.0.1:8080/", 9_995, 0, 800),
                target("http://127.0.0.1:8080/api", 9_995, 7, 900),
            ],
            timeline: vec![],
            histograms: Histograms { latency_us: String::new() },
            monitor: vec![],
            scrape: vec![],
            outputs: vec![],
            generator: None,
            label: None,
            merged: None,
            thresholds: vec![
                crate::threshold::parse("p99<10ms", crate::threshold::Source::Flag).unwrap().judge(false, Ok(8.5)),
                crate::threshold::parse("error_rate<0.01%", crate::threshold::Source::Flag)
                    .unwrap()
                    .judge(false, Ok(997.0 * 100.0 / 19_997.0)),
            ],
        }
    }

    #[test]
    fn summary_snapshot() {
        let want = "\
bolide http 2 URLs: 10 connections, 2 threads, 10s, fixed rate 2000 req/s, keep-alive

  Requests      19,990 responses in 10.00s, 997 failed (status 503: 990, timeout: 7), 3 in flight at the end
                3 resent after a kept-alive connection closed
  Throughput    1,999.0 req/s, 199.90 kB/s in (2.00 MB total, 10 connections opened)

  Latency              min      mean     stdev       max
                     212µs     935µs     283µs   34.00ms
  Percentiles          p50       p75       p90       p99     p99.9    p99.99
                     850µs    1.70ms    2.55ms    8.50ms   17.00ms   25.50ms

  Req/s                 1%      2.5%       50%     97.5%       avg     stdev       min
  (10 s)              1990      1990      2000      2010      1999         6      1990

  Status        200: 19,000, 503: 990
  Errors        status 990, timeout 7
  Schedule      2000 req/s: send lag p50 14µs, p99 90µs, max 2.50ms; 12 sends late by more than 200µs, 0 never sent

  URL                                        responses    errors       req/s       p50       p99
  http://127.0.0.1:8080/                         9,995         0       999.5     800µs    8.00ms
  http://127.0.0.1:8080/api                      9,995         7       999.5     900µs    9.00ms

  Thresholds    p99<10ms           8.50 ms   ok
                error_rate<0.01%   4.99%     BROKEN
                1 of 2 thresholds broken: exit code 1
";
        assert_eq!(summary(&doc()), want);
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
    }
}

//! The HTTP workload's report part: what its runs show in the summary band, the live band,
//! the run's tables, the CSV seconds, and its terminal summary (the rows every summary shares are
//! `term.rs`'s).

use super::band::{lat, Fact};
use super::blocks::Block;
use super::table::{Table, Tone};
use super::term::{bytes, count, generator_rows, monitor_rows, rate, segment_note, threshold_rows, us};
use crate::stats::doc::Measures;
use crate::stats::result::{Latency, ResultDoc};
use std::fmt::Write as _;

impl super::Shown for ResultDoc {
    fn summary(&self) -> String {
        summary(self)
    }

    fn throughput(&self) -> String {
        format!("{:.1} req/s", self.summary.requests_per_s)
    }

    fn errors_label(&self) -> &'static str {
        "Errors"
    }

    fn charts(&self) -> Vec<super::charts::Chart> {
        super::charts::http_charts(self)
    }

    fn facts(&self, _m: &Measures, out: &mut Vec<Fact>) {
        let d = self;
        let s = &d.summary;
        out.push(Fact::new("Requests/s", format!("{:.1}", s.requests_per_s)).detail(format!(
            "{} responses in {:.1} s",
            count(s.responses),
            s.duration_s
        )));
        if s.responses > 0 {
            out.push(Fact::new("Latency p50", lat(s.latency.p50_us)));
            out.push(Fact::new("Latency p99", lat(s.latency.p99_us)).detail(format!("max {}", lat(s.latency.max_us))));
        }
    }

    fn live_facts(&self, out: &mut Vec<Fact>) {
        let d = self;
        if let Some(s) = d.timeline.last() {
            let rate = if s.span_s > 0.0 { s.responses as f64 / s.span_s } else { 0.0 };
            out.push(Fact::new("Requests/s", format!("{rate:.0}")).detail(format!("second {}", s.t + 1)));
            if s.responses > 0 {
                out.push(Fact::new("p50", lat(s.latency_p50_us)));
                out.push(Fact::new("p99", lat(s.latency_p99_us)));
            }
            let errors: u64 = d.timeline.iter().map(|s| s.errors).sum();
            out.push(Fact::new("Errors so far", count(errors)).tone(if errors > 0 { Tone::Bad } else { Tone::Good }));
        }
    }

    fn blocks(&self, out: &mut Vec<Block>) {
        let d = self;
        let l = &d.summary.latency;
        let mut t = Table::new(&["", "p50", "p75", "p90", "p99", "p99.9", "max", "mean"]).right(&[1, 2, 3, 4, 5, 6, 7]);
        if d.summary.responses > 0 {
            t.row(vec![
                "Latency".into(),
                lat(l.p50_us),
                lat(l.p75_us),
                lat(l.p90_us),
                lat(l.p99_us),
                lat(l.p99_9_us),
                lat(l.max_us),
                us(l.mean_us),
            ]);
            out.push(Block::table(t));
        }
        let mut o = Table::new(&["Outcome", "Count"]).right(&[1]);
        for (code, n) in &d.summary.status {
            o.row(vec![format!("status {code}"), count(*n)]);
            if !code.starts_with('2') && !code.starts_with('3') {
                o.tone_last_row(Tone::Bad);
            }
        }
        for (class, n) in d.summary.errors_by_class.iter().filter(|(_, n)| **n > 0) {
            o.row(vec![format!("error: {class}"), count(*n)]);
            o.tone_last_row(Tone::Bad);
        }
        if !o.rows.is_empty() {
            out.push(Block::table(o));
        }
    }

    fn csv_seconds(&self, row: &mut dyn FnMut(f64, &str, &str, f64)) {
        let d = self;
        let ms = |us: f64| us / 1000.0;
        for s in &d.timeline {
            let t = f64::from(s.t);
            row(t, "span_s", "", s.span_s);
            row(t, "responses", "", s.responses as f64);
            row(t, "errors", "", s.errors as f64);
            row(t, "bytes_in", "", s.bytes_in as f64);
            if s.responses > 0 {
                row(t, "latency_mean_ms", "", ms(s.latency_mean_us));
                row(t, "latency_p50_ms", "", ms(s.latency_p50_us as f64));
                row(t, "latency_p90_ms", "", ms(s.latency_p90_us as f64));
                row(t, "latency_p99_ms", "", ms(s.latency_p99_us as f64));
                row(t, "latency_max_ms", "", ms(s.latency_max_us as f64));
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
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
}

//! `--out csv=PATH` and `bolide report --format csv`: a run's seconds as CSV, one row per second
//! per series, for people who post-process (pandas, R, a spreadsheet). Long ("tidy") form, the
//! same columns for every kind of run:
//!
//! ```text
//! run,t_s,metric,labels,value
//! 1,0,responses,,5012
//! 1,0,latency_p99_ms,,1.84
//! 1,0.5,cpu_pct,process=app,43.1
//! ```
//!
//! `run` names the run (1 for a single run, the run's number in a bench series, the level in a
//! capacity ladder, the file in `report`); `t_s` is seconds since the run's start (the start of the
//! second for the load's own series, the sample's time for monitored processes and scraped
//! series); `labels` is `key=value` pairs joined by `;`. Written per RFC 4180 (fields with a comma,
//! quote or line break are quoted).

use std::fmt::Write as _;

use crate::stats::doc::Doc;

/// The header line.
pub const HEADER: &str = "run,t_s,metric,labels,value\n";

/// A document's rows (without the header), each starting with `run`; written with the `csv`
/// crate (quoting as RFC 4180 says).
pub fn rows(doc: &Doc, run: &str) -> String {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
    let mut row = |t: f64, metric: &str, labels: &str, value: f64| {
        if value.is_finite() {
            let _ = w.write_record([run, &num(t), metric, labels, &num(value)]);
        }
    };
    let ms = |us: f64| us / 1000.0;
    match doc {
        Doc::Http(d) => {
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
        Doc::Ddp(d) => {
            for s in &d.timeline {
                let t = f64::from(s.t);
                let c = &s.counts;
                row(t, "users_alive", "", s.users_alive as f64);
                for (name, v) in [
                    ("users_launched", c.launched),
                    ("users_completed", c.completed),
                    ("users_failed", c.failed),
                    ("steps", c.steps),
                    ("step_errors", c.step_errors),
                    ("messages_in", c.messages_in),
                    ("messages_out", c.messages_out),
                    ("bytes_in", c.bytes_in),
                    ("bytes_out", c.bytes_out),
                ] {
                    row(t, name, "", v as f64);
                }
                let mut latency = |prefix: &str, labels: &str, l: &crate::stats::vu::SecondLatency| {
                    row(t, &format!("{prefix}_count"), labels, l.count as f64);
                    row(t, &format!("{prefix}_p50_ms"), labels, ms(l.p50_us as f64));
                    row(t, &format!("{prefix}_p99_ms"), labels, ms(l.p99_us as f64));
                    row(t, &format!("{prefix}_max_ms"), labels, ms(l.max_us as f64));
                };
                if let Some(l) = &s.latency {
                    latency("step_latency", "", l);
                }
                for (name, l) in &s.step_latency {
                    latency("step_latency", &format!("step={name}"), l);
                }
                if let Some(l) = &s.reactive {
                    latency("reactive_latency", "", l);
                }
                if let Some(l) = &s.fanout {
                    latency("fanout_latency", "", l);
                }
            }
        }
    }
    for m in doc.monitor() {
        let labels = format!("process={}", m.name);
        for (t, cpu, rss) in &m.samples {
            row(*t, "cpu_pct", &labels, *cpu);
            row(*t, "rss_bytes", &labels, *rss as f64);
        }
    }
    if let Some(g) = doc.generator() {
        for (t, load, busiest, idle) in &g.samples {
            row(*t, "bolide_load_threads_cpu_pct", "", *load);
            row(*t, "bolide_busiest_thread_cpu_pct", "", *busiest);
            row(*t, "machine_idle_pct", "", *idle);
        }
    }
    for r in doc.scrape() {
        for s in &r.series {
            let mut labels = format!("endpoint={}", r.name);
            for (k, v) in &s.labels {
                let _ = write!(labels, ";{k}={v}");
            }
            for (t, v) in r.t.iter().zip(&s.values) {
                if let Some(v) = v {
                    row(*t, &s.metric, &labels, *v);
                }
            }
        }
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// A number as CSV readers take it: integers without a fraction, others in full precision.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Writes `HEADER` and `rows` to `path` whole (or not at all).
pub fn write(path: &std::path::Path, rows: &str) -> Result<(), String> {
    crate::files::write_atomically(path, |w| {
        use std::io::Write;
        w.write_all(HEADER.as_bytes())?;
        w.write_all(rows.as_bytes())
    })
    .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_they_must_be_and_numbers_are_plain() {
        let mut doc = crate::stats::result::ResultDoc::default();
        doc.monitor.push(crate::monitor::MonitorResult {
            name: "a,b \"c\"".into(),
            samples: vec![(0.5, 12.0, 1024)],
            ..Default::default()
        });
        let text = rows(&Doc::Http(Box::new(doc)), "1");
        assert_eq!(
            text,
            "1,0.5,cpu_pct,\"process=a,b \"\"c\"\"\",12\n1,0.5,rss_bytes,\"process=a,b \"\"c\"\"\",1024\n"
        );
        assert_eq!((num(3.0), num(0.25), num(1e20)), ("3".into(), "0.25".into(), "100000000000000000000".into()));
    }
}

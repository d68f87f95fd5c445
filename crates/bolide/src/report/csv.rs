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

use crate::problem::Problem;
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
    super::shown(doc).csv_seconds(&mut row);
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
pub fn write(path: &std::path::Path, rows: &str) -> Result<(), Problem> {
    crate::files::write_atomically(path, |w| {
        use std::io::Write;
        w.write_all(HEADER.as_bytes())?;
        w.write_all(rows.as_bytes())
    })
    .map_err(|e| Problem::from(format!("cannot write {}: {e}", path.display())))
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

//! The HTTP workload's report part: what its runs show in the summary band, the live band,
//! the run's tables and the CSV seconds (its terminal summary is `term.rs`'s).

use super::band::{lat, Fact};
use super::blocks::Block;
use super::table::{Table, Tone};
use super::term::{count, us};
use crate::stats::doc::Measures;
use crate::stats::result::ResultDoc;

impl super::Shown for ResultDoc {
    fn summary(&self) -> String {
        super::term::summary(self)
    }

    fn throughput(&self) -> String {
        format!("{:.1} req/s", self.summary.requests_per_s)
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

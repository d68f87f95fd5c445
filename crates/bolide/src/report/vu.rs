//! The virtual-user (DDP) workload's report part: what its runs show in the summary band, the live band,
//! the run's tables and the CSV seconds (its terminal summary is `ddp.rs`'s).

use super::band::{all_steps_p50, lat, Fact};
use super::blocks::Block;
use super::table::{Table, Tone};
use super::term::{count, us};
use crate::stats::doc::Measures;
use crate::stats::vu::DdpDoc;

impl super::Shown for DdpDoc {
    fn summary(&self) -> String {
        super::ddp::summary(self)
    }

    fn throughput(&self) -> String {
        format!("{} users", count(self.summary.users.completed))
    }

    fn charts(&self) -> Vec<super::charts::Chart> {
        super::charts::ddp_charts(self)
    }

    fn facts(&self, m: &Measures, out: &mut Vec<Fact>) {
        let d = self;
        let u = &d.summary.users;
        let users = Fact::new("Users", format!("{} of {} completed", count(u.completed), count(u.launched)))
            .detail(format!("{} failed; Time {:.1} s", count(u.failed), d.summary.total_time_s));
        out.push(if u.failed > 0 { users.tone(Tone::Bad) } else { users });
        if let Some(p99) = m.p99_ms {
            let p50 = all_steps_p50(d);
            out.push(Fact::new("Step latency p50", p50.map(lat).unwrap_or_else(|| "n/a".into())));
            out.push(Fact::new("Step latency p99", us(p99 * 1000.0)).detail("every step together"));
        }
        if let Some(r) = &d.summary.reactive {
            out.push(Fact::new("Reactive p99", lat(r.p99_us)).detail(format!("p50 {}", lat(r.p50_us))));
        }
    }

    fn live_facts(&self, out: &mut Vec<Fact>) {
        let d = self;
        if let Some(s) = d.timeline.last() {
            out.push(Fact::new("Users alive", count(s.users_alive)).detail(format!("second {}", s.t + 1)));
            if let Some(l) = &s.latency {
                out.push(Fact::new("Step p50", lat(l.p50_us)));
                out.push(Fact::new("Step p99", lat(l.p99_us)));
            }
            let errors: u64 = d.timeline.iter().map(|s| s.counts.step_errors).sum();
            out.push(Fact::new("Step errors so far", count(errors)).tone(if errors > 0 {
                Tone::Bad
            } else {
                Tone::Good
            }));
        }
    }

    fn blocks(&self, out: &mut Vec<Block>) {
        let d = self;
        let mut t = Table::new(&["Step", "Count", "Errors", "p50", "p90", "p99", "max", "per minute"])
            .right(&[1, 2, 3, 4, 5, 6, 7]);
        for s in &d.steps {
            let l = s.latency.as_ref();
            let p = |f: fn(&crate::stats::result::Latency) -> u64| l.map(|l| lat(f(l))).unwrap_or_else(|| "-".into());
            t.row(vec![
                s.name.clone(),
                count(s.count),
                count(s.errors),
                p(|l| l.p50_us),
                p(|l| l.p90_us),
                p(|l| l.p99_us),
                p(|l| l.max_us),
                format!("{:.1}", s.per_minute),
            ]);
            if s.errors > 0 {
                t.tone(t.rows.len() - 1, 2, Tone::Bad);
            }
        }
        for (name, l) in [
            ("reactive (write to update)", &d.summary.reactive),
            ("fan-out (insert to every subscriber)", &d.summary.fanout),
        ] {
            if let Some(l) = l {
                t.row(vec![
                    name.into(),
                    "".into(),
                    "".into(),
                    lat(l.p50_us),
                    lat(l.p90_us),
                    lat(l.p99_us),
                    lat(l.max_us),
                    "".into(),
                ]);
            }
        }
        if !t.rows.is_empty() {
            out.push(Block::table(t));
        }
    }

    fn csv_seconds(&self, row: &mut dyn FnMut(f64, &str, &str, f64)) {
        let d = self;
        let ms = |us: f64| us / 1000.0;
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

//! Summary math: latency statistics from histograms, the per-second rate distribution, and the
//! assembly of merged recorders into the result document's summary parts.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::recorder::{ErrorClass, SecondRecorder, TargetRecorder, WorkerRecorder};
use super::result::{Latency, RateDistribution, Second, Summary, TargetSummary};

/// Latency statistics of `h` (all zeros for an empty histogram).
pub fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    Latency {
        min_us: h.min(),
        mean_us: h.mean(),
        stdev_us: h.stdev(),
        max_us: h.max(),
        p50_us: h.value_at_quantile(0.50),
        p75_us: h.value_at_quantile(0.75),
        p90_us: h.value_at_quantile(0.90),
        p99_us: h.value_at_quantile(0.99),
        p99_9_us: h.value_at_quantile(0.999),
        p99_99_us: h.value_at_quantile(0.9999),
    }
}

/// Distribution of per-second counts. Uses the whole seconds only, unless there are none (a run
/// shorter than a second), then the rate of the partial interval.
pub fn rate_distribution(timeline: &[Second]) -> RateDistribution {
    let mut samples: Vec<f64> = timeline.iter().filter(|s| s.span_s >= 0.999).map(|s| s.responses as f64).collect();
    if samples.is_empty() {
        samples = timeline.iter().filter(|s| s.span_s > 0.0).map(|s| s.responses as f64 / s.span_s).collect();
    }
    if samples.is_empty() {
        return RateDistribution::default();
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    RateDistribution {
        samples: samples.len(),
        p1: nearest_rank(&samples, 1.0),
        p2_5: nearest_rank(&samples, 2.5),
        p50: nearest_rank(&samples, 50.0),
        p97_5: nearest_rank(&samples, 97.5),
        mean,
        stdev: var.sqrt(),
        min: samples[0],
        max: samples[samples.len() - 1],
    }
}

/// The `pct` percentile of sorted `samples` by the nearest-rank method.
fn nearest_rank(sorted: &[f64], pct: f64) -> f64 {
    let rank = ((pct / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One timeline entry from the merged recorders of one second.
pub fn second(t: u32, span_s: f64, rec: &SecondRecorder) -> Second {
    let l = latency(&rec.latency_us);
    Second {
        t,
        span_s,
        responses: rec.responses,
        errors: rec.errors,
        bytes_in: rec.bytes_in,
        latency_mean_us: l.mean_us,
        latency_p50_us: l.p50_us,
        latency_p90_us: l.p90_us,
        latency_p99_us: l.p99_us,
        latency_max_us: l.max_us,
        latency_histogram: None,
        detail: None,
    }
}

fn statuses(t: &TargetRecorder) -> BTreeMap<String, u64> {
    t.statuses().map(|(s, n)| (s.to_string(), n)).collect()
}

fn errors_by_class(t: &TargetRecorder) -> BTreeMap<String, u64> {
    ErrorClass::ALL.iter().map(|c| (c.name().to_string(), t.errors[*c as usize])).collect()
}

fn per_s(count: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        count as f64 / duration_s
    } else {
        0.0
    }
}

/// Per-target summaries (with their histograms encoded).
pub fn per_target(urls: &[String], merged: &WorkerRecorder, duration_s: f64) -> Vec<TargetSummary> {
    urls.iter()
        .zip(&merged.targets)
        .map(|(url, t)| TargetSummary {
            url: url.clone(),
            responses: t.responses,
            errors: t.error_total(),
            requests_per_s: per_s(t.responses, duration_s),
            bytes_in: t.bytes_in,
            connects: t.connects,
            retries: t.retries,
            latency: latency(&t.latency_us),
            status: statuses(t),
            errors_by_class: errors_by_class(t),
            latency_histogram: super::hist::encode(&t.latency_us),
        })
        .collect()
}

/// The overall summary; `expected_sends` is what a fixed-rate schedule asked for (0 otherwise).
pub fn overall(
    merged: &WorkerRecorder,
    timeline: &[Second],
    duration_s: f64,
    expected_sends: u64,
) -> (Summary, TargetRecorder) {
    let mut all = TargetRecorder::default();
    for t in &merged.targets {
        all.merge(t);
    }
    let non_2xx_3xx = all.statuses().filter(|(s, _)| !(200..400).contains(s)).map(|(_, n)| n).sum();
    let summary = Summary {
        responses: all.responses,
        errors: all.error_total(),
        unfinished: merged.sent.saturating_sub(all.responses + all.transport_errors()),
        sent: merged.sent,
        duration_s,
        requests_per_s: per_s(all.responses, duration_s),
        bytes_in: all.bytes_in,
        bytes_in_per_s: per_s(all.bytes_in, duration_s),
        connects: all.connects,
        retries: all.retries,
        latency: latency(&all.latency_us),
        rate: rate_distribution(timeline),
        status: statuses(&all),
        non_2xx_3xx,
        errors_by_class: errors_by_class(&all),
        late_sends: merged.late_sends,
        missed_sends: expected_sends.saturating_sub(merged.sent),
        max_lag_us: merged.max_lag_us,
        lag_p50_us: merged.send_lag_us.value_at_quantile(0.5),
        lag_p99_us: merged.send_lag_us.value_at_quantile(0.99),
        late_threshold_us: super::recorder::LATE_THRESHOLD_US,
    };
    (summary, all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(t: u32, span_s: f64, responses: u64) -> Second {
        Second {
            t,
            span_s,
            responses,
            errors: 0,
            bytes_in: 0,
            latency_mean_us: 0.0,
            latency_p50_us: 0,
            latency_p90_us: 0,
            latency_p99_us: 0,
            latency_max_us: 0,
            latency_histogram: None,
            detail: None,
        }
    }

    #[test]
    fn rate_distribution_uses_whole_seconds() {
        // 1..=100 responses in 100 whole seconds, then a partial second that must be left out.
        let mut tl: Vec<Second> = (1..=100).map(|i| sec(i as u32, 1.0, i)).collect();
        tl.push(sec(101, 0.3, 1));
        let d = rate_distribution(&tl);
        assert_eq!(d.samples, 100);
        assert_eq!((d.p1, d.p2_5, d.p50, d.p97_5), (1.0, 3.0, 50.0, 98.0));
        assert_eq!((d.min, d.max, d.mean), (1.0, 100.0, 50.5));
        assert!((d.stdev - 28.866).abs() < 0.001);
    }

    #[test]
    fn rate_distribution_of_a_short_run() {
        // Only a partial second: its rate stands in.
        let d = rate_distribution(&[sec(0, 0.5, 100)]);
        assert_eq!((d.samples, d.p50, d.min), (1, 200.0, 200.0));
        assert_eq!(rate_distribution(&[]), RateDistribution::default());
    }

    #[test]
    fn latency_of_known_values() {
        let mut h = crate::stats::hist::latency_us();
        for v in 1..=1000 {
            crate::stats::hist::record(&mut h, v);
        }
        let l = latency(&h);
        assert_eq!((l.min_us, l.max_us, l.p50_us, l.p90_us, l.p99_us), (1, 1000, 500, 900, 990));
        assert!((l.mean_us - 500.5).abs() < 0.5);
        assert_eq!(latency(&crate::stats::hist::latency_us()), Latency::default());
    }
}

//! Latency histograms: one shape everywhere (1 µs to 1 h, 3 significant digits) and the standard
//! HdrHistogram V2 compressed form, base64, so documents from different runs merge exactly.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use crate::problem::Problem;

/// Highest latency a histogram holds, in microseconds (one hour); larger values saturate.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// An empty latency histogram in microseconds.
pub fn latency_us() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("static histogram bounds are valid")
}

/// Records `value_us`, clamped into the histogram's range.
pub fn record(h: &mut Histogram<u64>, value_us: u64) {
    h.saturating_record(value_us.clamp(1, MAX_LATENCY_US));
}

/// A histogram's recorded values as (value, count) pairs: how a worker hands one second's
/// latencies to the thread that merges them (a few pairs, never the whole bucket array).
pub type Sparse = Vec<(u64, u64)>;

/// Takes what `h` recorded as [`Sparse`] pairs and empties it.
pub fn drain(h: &mut Histogram<u64>) -> Sparse {
    if h.is_empty() {
        return Sparse::new();
    }
    let out = h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
    h.reset();
    out
}

/// Adds [`Sparse`] pairs from [`drain`] (into a histogram of the same shape: exact).
pub fn add_sparse(h: &mut Histogram<u64>, pairs: &[(u64, u64)]) {
    for &(v, n) in pairs {
        let _ = h.record_n(v.clamp(1, MAX_LATENCY_US), n);
    }
}

/// The V2 deflate serialization, base64-encoded (as HdrHistogram's `encodeIntoCompressedByteBuffer`
/// followed by base64, the form its log files and other ports read).
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing into a Vec cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Reads back what [`encode`] wrote (or any V2 / V2 deflate histogram in base64).
pub fn decode(text: &str) -> Result<Histogram<u64>, Problem> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| Problem::from(format!("histogram does not decode: {e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_merge() {
        let mut a = latency_us();
        let mut b = latency_us();
        for v in [1, 50, 1_000, 250_000, 10_000_000] {
            record(&mut a, v);
        }
        record(&mut b, 7);
        record(&mut b, u64::MAX); // saturates at one hour instead of failing
        let mut merged = decode(&encode(&a)).unwrap();
        merged.add(decode(&encode(&b)).unwrap()).unwrap();
        assert_eq!(merged.len(), 7);
        assert_eq!(merged.min(), 1);
        assert!(merged.equivalent(merged.max(), MAX_LATENCY_US));
        assert!(decode("not base64!").is_err());
    }

    #[test]
    fn drained_pairs_rebuild_the_same_percentiles() {
        let mut a = latency_us();
        for v in 1..=10_000u64 {
            record(&mut a, v * 37);
        }
        let before = (a.len(), a.value_at_quantile(0.5), a.value_at_quantile(0.99), a.max());
        let pairs = drain(&mut a);
        assert!(a.is_empty(), "drain empties the histogram");
        let mut b = latency_us();
        add_sparse(&mut b, &pairs);
        add_sparse(&mut b, &drain(&mut a));
        assert_eq!((b.len(), b.value_at_quantile(0.5), b.value_at_quantile(0.99), b.max()), before);
    }
}

//! Prometheus remote write (protocol 1.0): a `WriteRequest` of time series, protobuf-encoded by
//! hand (the few messages it needs: `prompb/types.proto`, `remote.proto`) and snappy-compressed,
//! POSTed to the receiver. Latency goes as native histograms: exponential buckets of schema
//! [`SCHEMA`] (each bucket 2^(1/8) wide, about 9%), made from the exact HDR histograms bolide keeps,
//! so that `histogram_quantile` over them is within one bucket of the document's percentiles.
//!
//! `export::Exporter` feeds it each second of a run; `tests/promrw.rs` reads what it wrote back
//! from a real Prometheus.

use std::collections::BTreeMap;

use super::proto::{bytes, double, int, sint32, string, uint, varint, zigzag};

use crate::problem::Problem;

/// Native histogram schema: bucket i holds values in (2^((i-1)/8), 2^(i/8)].
pub const SCHEMA: i32 = 3;

/// A cumulative native histogram of seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeHistogram {
    pub count: u64,
    pub sum: f64,
    /// Observations of exactly zero.
    pub zero_count: u64,
    /// Bucket index -> observations.
    pub buckets: BTreeMap<i32, u64>,
}

impl NativeHistogram {
    /// The bucket of a positive value.
    pub fn index(value: f64) -> i32 {
        let scale = f64::from(1 << SCHEMA);
        let i = (value.log2() * scale).ceil();
        // A value a rounding below a boundary stays in the bucket below it.
        let i = if 2f64.powf((i - 1.0) / scale) >= value { i - 1.0 } else { i };
        i.clamp(f64::from(i32::MIN / 2), f64::from(i32::MAX / 2)) as i32
    }

    /// Adds `n` observations of `value` seconds.
    pub fn add(&mut self, value: f64, n: u64) {
        if n == 0 || !value.is_finite() || value < 0.0 {
            return;
        }
        self.count += n;
        self.sum += value * n as f64;
        if value == 0.0 {
            self.zero_count += n;
        } else {
            *self.buckets.entry(NativeHistogram::index(value)).or_insert(0) += n;
        }
    }

    /// Adds an HDR histogram of microseconds (each recorded value at its bucket's highest
    /// equivalent value, as HDR reports percentiles).
    pub fn add_hdr(&mut self, h: &hdrhistogram::Histogram<u64>) {
        for v in h.iter_recorded() {
            self.add(v.value_iterated_to() as f64 / 1e6, v.count_at_value());
        }
    }

    /// The `Histogram` message at `timestamp_ms`.
    fn encode(&self, timestamp_ms: i64, out: &mut Vec<u8>) {
        uint(out, 1, self.count);
        double(out, 3, self.sum);
        sint32(out, 4, SCHEMA);
        double(out, 5, 0.0);
        uint(out, 6, self.zero_count);
        // Spans of consecutive buckets, then each bucket's count as a delta to the one before.
        let mut spans: Vec<(i32, u32)> = Vec::new();
        let mut prev_index: Option<i32> = None;
        let mut deltas = Vec::new();
        let mut prev_count = 0i64;
        for (&i, &c) in &self.buckets {
            match prev_index {
                Some(p) if i == p + 1 => spans.last_mut().expect("a span is open").1 += 1,
                Some(p) => spans.push((i - p - 1, 1)),
                None => spans.push((i, 1)),
            }
            prev_index = Some(i);
            deltas.push(c as i64 - prev_count);
            prev_count = c as i64;
        }
        for (offset, length) in spans {
            let mut span = Vec::new();
            sint32(&mut span, 1, offset);
            uint(&mut span, 2, u64::from(length));
            bytes(out, 11, &span);
        }
        if !deltas.is_empty() {
            let mut packed = Vec::new();
            for d in deltas {
                varint(&mut packed, zigzag(d));
            }
            bytes(out, 12, &packed);
        }
        int(out, 15, timestamp_ms);
    }
}

/// One series of a request: its labels (with `__name__`), and its samples or histograms.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub samples: Vec<(f64, i64)>,
    pub histograms: Vec<(NativeHistogram, i64)>,
}

/// The `WriteRequest` of `series`, protobuf-encoded (labels sorted by name, as receivers want).
pub fn write_request(series: &[Series]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in series {
        let mut ts = Vec::new();
        let mut labels = s.labels.clone();
        labels.sort();
        for (name, value) in &labels {
            let mut l = Vec::new();
            string(&mut l, 1, name);
            string(&mut l, 2, value);
            bytes(&mut ts, 1, &l);
        }
        for (value, t) in &s.samples {
            let mut m = Vec::new();
            double(&mut m, 1, *value);
            int(&mut m, 2, *t);
            bytes(&mut ts, 2, &m);
        }
        for (h, t) in &s.histograms {
            let mut m = Vec::new();
            h.encode(*t, &mut m);
            bytes(&mut ts, 4, &m);
        }
        bytes(&mut out, 1, &ts);
    }
    out
}

/// The body as remote write sends it: snappy's block format.
pub fn compress(body: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(body).unwrap_or_default()
}

/// How a receiver wants the sender to identify itself.
#[derive(Clone, Default, PartialEq)]
pub enum Auth {
    #[default]
    None,
    /// `Authorization: Bearer TOKEN`.
    Bearer(String),
    /// `Authorization: Basic base64(user:password)`.
    Basic(String, String),
}

impl std::fmt::Debug for Auth {
    // Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::None => write!(f, "Auth::None"),
            Auth::Bearer(_) => write!(f, "Auth::Bearer(<hidden>)"),
            Auth::Basic(user, _) => write!(f, "Auth::Basic({user:?}, <hidden>)"),
        }
    }
}

impl Auth {
    /// From the environment (`BOLIDE_RW_BEARER_TOKEN`, or `BOLIDE_RW_USERNAME` and
    /// `BOLIDE_RW_PASSWORD`), else the URL's own user and password.
    pub fn from_env_or(url: &url::Url) -> Auth {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        if let Some(t) = var("BOLIDE_RW_BEARER_TOKEN") {
            return Auth::Bearer(t);
        }
        if let (Some(u), Some(p)) = (var("BOLIDE_RW_USERNAME"), var("BOLIDE_RW_PASSWORD")) {
            return Auth::Basic(u, p);
        }
        Auth::from_url(url)
    }

    /// The URL's own user and password, if it has them.
    pub fn from_url(url: &url::Url) -> Auth {
        match (url.username(), url.password()) {
            (u, Some(p)) if !u.is_empty() => Auth::Basic(u.to_string(), p.to_string()),
            _ => Auth::None,
        }
    }

    /// The `Authorization` header's value, if any.
    pub(crate) fn value(&self) -> Option<String> {
        use base64::Engine as _;
        match self {
            Auth::None => None,
            Auth::Bearer(t) => Some(format!("Bearer {t}")),
            Auth::Basic(u, p) => {
                Some(format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))))
            }
        }
    }
}

/// POSTs a compressed request to an http:// URL; the status, or why there is none.
pub fn post(url: &url::Url, body: &[u8], timeout: std::time::Duration) -> Result<u16, Problem> {
    post_as(url, &Auth::None, body, timeout)
}

/// The same, identified as `auth` says.
pub fn post_as(url: &url::Url, auth: &Auth, body: &[u8], timeout: std::time::Duration) -> Result<u16, Problem> {
    let authorization = auth.value();
    let mut headers = vec![
        ("Content-Encoding", "snappy"),
        ("Content-Type", "application/x-protobuf"),
        ("X-Prometheus-Remote-Write-Version", "0.1.0"),
    ];
    if let Some(a) = authorization.as_deref() {
        headers.push(("Authorization", a));
    }
    super::post::post(url, None, &headers, body, timeout).map(|a| a.code).map_err(|f| Problem::from(f.why))
}

/// Prometheus remote write (`--out prometheus-rw=URL`): protobuf `WriteRequest`, snappy, version
/// 0.1.0 headers; Authorization from `BOLIDE_RW_*` or the URL; 5xx and 429 tried again.
pub struct RemoteWrite;

impl super::Receiver for RemoteWrite {
    fn name(&self) -> &'static str {
        "prometheus-rw"
    }

    fn ca_env(&self) -> &'static [&'static str] {
        &["BOLIDE_RW_CA_FILE"]
    }

    fn headers(&self) -> Vec<(String, String)> {
        vec![
            ("Content-Encoding".into(), "snappy".into()),
            ("Content-Type".into(), "application/x-protobuf".into()),
            ("X-Prometheus-Remote-Write-Version".into(), "0.1.0".into()),
        ]
    }

    fn auth(&self, url: &url::Url) -> Auth {
        Auth::from_env_or(url)
    }

    fn retry(&self, status: u16) -> bool {
        status == 429 || !(400..500).contains(&status)
    }

    fn run_labels(&self) -> Vec<(String, String)> {
        vec![("job".to_string(), "bolide".to_string())]
    }

    /// Points as remote write's series: the run's labels and `__name__` with each.
    fn encode(&self, labels: &[(String, String)], _started_ns: u64, ms: i64, points: Vec<super::Point>) -> Vec<u8> {
        let series: Vec<Series> = points
            .into_iter()
            .map(|p| {
                let mut all = labels.to_vec();
                all.extend(p.labels);
                all.push(("__name__".into(), p.name));
                let mut x = Series { labels: all, ..Default::default() };
                match p.value {
                    super::Value::Counter(v) | super::Value::Gauge(v) => x.samples.push((v, ms)),
                    super::Value::Histogram(h) => x.histograms.push((h, ms)),
                }
                x
            })
            .collect();
        compress(&write_request(&series))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_schema_3_and_boundaries_belong_below() {
        // 1 s is 2^0: the top of bucket 0; a hair above is bucket 1.
        assert_eq!(NativeHistogram::index(1.0), 0);
        assert_eq!(NativeHistogram::index(1.0001), 1);
        assert_eq!(NativeHistogram::index(2.0), 8);
        assert_eq!(NativeHistogram::index(0.5), -8);
        // 1 ms.
        let i = NativeHistogram::index(0.001);
        assert!(2f64.powf(f64::from(i - 1) / 8.0) < 0.001 && 0.001 <= 2f64.powf(f64::from(i) / 8.0));
    }

    #[test]
    fn varints_zigzag_and_a_request_s_bytes() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xAC, 0x02]);
        assert_eq!((zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)), (0, 1, 2, 3));
        let s = Series { labels: vec![("__name__".into(), "x".into())], samples: vec![(1.0, 5)], histograms: vec![] };
        let r = write_request(&[s]);
        // timeseries(1, len) { labels(1, len) { name(1) "__name__" value(2) "x" } sample(2) {...} }
        assert_eq!(r[0], 0x0A);
        assert_eq!(&r[2..4], &[0x0A, 13]);
        assert_eq!(&r[4..6], &[0x0A, 8]);
        assert_eq!(&r[6..14], b"__name__");
        // A histogram's spans: buckets 3, 4 and 7 make spans (3, 2) and (2, 1), deltas 1, +1, -1.
        let mut h = NativeHistogram::default();
        for (i, n) in [(3, 1u64), (4, 2), (7, 1)] {
            h.buckets.insert(i, n);
        }
        let mut m = Vec::new();
        h.encode(0, &mut m);
        let spans: Vec<u8> = vec![0x5A, 4, 0x08, 6, 0x10, 2, 0x5A, 4, 0x08, 4, 0x10, 1];
        assert!(m.windows(spans.len()).any(|w| w == spans.as_slice()), "{m:x?}");
        assert!(m.windows(5).any(|w| w == [0x62, 3, 2, 2, 1]), "{m:x?}");
    }
}

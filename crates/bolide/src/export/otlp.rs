//! OTLP/HTTP metrics (protobuf): an `ExportMetricsServiceRequest` encoded by hand (the messages
//! of `opentelemetry/proto/metrics/v1` and `collector/metrics/v1` it needs), the same series as
//! remote write: counters as cumulative monotonic sums, gauges, latency as **exponential
//! histograms** of scale [`super::promrw::SCHEMA`] (the native histograms' buckets, each 2^(1/8)
//! wide), the run's labels as resource attributes.
//!
//! Names follow OpenTelemetry's habits and turn back into the remote write names under
//! Prometheus' own translation: `bolide_http_responses_total` is the sum `bolide.http.responses`,
//! `bolide_http_latency_seconds` the histogram `bolide.http.latency` of unit `s`.

use super::promrw::{NativeHistogram, SCHEMA};
use super::proto::{bytes, double, fixed64, sfixed64, sint32, string, uint, varint};
use super::{Point, Value};

/// Cumulative, as Prometheus and most backends want sums and histograms.
const CUMULATIVE: u64 = 2;

/// An OTLP metric's name and unit for a remote write name.
pub fn name_and_unit(prom: &str) -> (String, &'static str) {
    let (base, unit) = if let Some(b) = prom.strip_suffix("_total") {
        (b, "")
    } else if let Some(b) = prom.strip_suffix("_seconds") {
        (b, "s")
    } else if let Some(b) = prom.strip_suffix("_bytes") {
        (b, "By")
    } else if let Some(b) = prom.strip_suffix("_percent") {
        (b, "%")
    } else {
        (prom, "")
    };
    (base.replace('_', "."), unit)
}

/// The request for one moment: `points` grouped into metrics by name, under a resource with
/// `resource` attributes; sums and histograms count from `start_ns`.
pub fn request(resource: &[(String, String)], start_ns: u64, time_ns: u64, points: &[Point]) -> Vec<u8> {
    // A metric per name, its points in the order given.
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    let metrics: Vec<Vec<u8>> = names
        .iter()
        .map(|n| {
            let of: Vec<&Point> = points.iter().filter(|p| p.name == *n).collect();
            metric(&of, start_ns, time_ns)
        })
        .collect();
    let mut res = Vec::new();
    for (k, v) in resource {
        bytes(&mut res, 1, &key_value(k, v));
    }
    let mut scope = Vec::new();
    string(&mut scope, 1, "bolide");
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    let mut scope_metrics = Vec::new();
    bytes(&mut scope_metrics, 1, &scope);
    for m in &metrics {
        bytes(&mut scope_metrics, 2, m);
    }
    let mut resource_metrics = Vec::new();
    bytes(&mut resource_metrics, 1, &res);
    bytes(&mut resource_metrics, 2, &scope_metrics);
    let mut out = Vec::new();
    bytes(&mut out, 1, &resource_metrics);
    out
}

/// A `Metric` of points of one name (and kind).
fn metric(points: &[&Point], start_ns: u64, time_ns: u64) -> Vec<u8> {
    let (name, unit) = name_and_unit(&points[0].name);
    let mut m = Vec::new();
    string(&mut m, 1, &name);
    if !unit.is_empty() {
        string(&mut m, 3, unit);
    }
    let mut data = Vec::new();
    match points[0].value {
        Value::Counter(_) | Value::Gauge(_) => {
            for p in points {
                let mut d = Vec::new();
                fixed64(&mut d, 3, time_ns);
                match p.value {
                    Value::Counter(v) => {
                        fixed64(&mut d, 2, start_ns);
                        number(&mut d, v);
                    }
                    Value::Gauge(v) => double(&mut d, 4, v),
                    Value::Histogram(_) => continue,
                }
                for (k, v) in &p.labels {
                    bytes(&mut d, 7, &key_value(k, v));
                }
                bytes(&mut data, 1, &d);
            }
        }
        Value::Histogram(_) => {
            for p in points {
                if let Value::Histogram(h) = &p.value {
                    bytes(&mut data, 1, &exponential_point(h, &p.labels, start_ns, time_ns));
                }
            }
        }
    }
    match points[0].value {
        Value::Counter(_) => {
            uint(&mut data, 2, CUMULATIVE);
            uint(&mut data, 3, 1);
            bytes(&mut m, 7, &data);
        }
        Value::Gauge(_) => bytes(&mut m, 5, &data),
        Value::Histogram(_) => {
            uint(&mut data, 2, CUMULATIVE);
            bytes(&mut m, 10, &data);
        }
    }
    m
}

/// A count as an integer when it is one, else as a double.
fn number(d: &mut Vec<u8>, v: f64) {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        sfixed64(d, 6, v as i64);
    } else {
        double(d, 4, v);
    }
}

/// An `ExponentialHistogramDataPoint`: native bucket k, (2^((k-1)/8), 2^(k/8)], is OTLP's
/// bucket k-1, (base^(k-1), base^k], at the same scale.
fn exponential_point(h: &NativeHistogram, labels: &[(String, String)], start_ns: u64, time_ns: u64) -> Vec<u8> {
    let mut d = Vec::new();
    for (k, v) in labels {
        bytes(&mut d, 1, &key_value(k, v));
    }
    fixed64(&mut d, 2, start_ns);
    fixed64(&mut d, 3, time_ns);
    fixed64(&mut d, 4, h.count);
    double(&mut d, 5, h.sum);
    sint32(&mut d, 6, SCHEMA);
    fixed64(&mut d, 7, h.zero_count);
    if let (Some((&lo, _)), Some((&hi, _))) = (h.buckets.first_key_value(), h.buckets.last_key_value()) {
        let mut b = Vec::new();
        sint32(&mut b, 1, lo - 1);
        let mut counts = Vec::new();
        for k in lo..=hi {
            varint(&mut counts, h.buckets.get(&k).copied().unwrap_or(0));
        }
        bytes(&mut b, 2, &counts);
        bytes(&mut d, 8, &b);
    }
    d
}

fn key_value(k: &str, v: &str) -> Vec<u8> {
    let mut any = Vec::new();
    string(&mut any, 1, v);
    let mut kv = Vec::new();
    string(&mut kv, 1, k);
    bytes(&mut kv, 2, &any);
    kv
}

/// What an `ExportMetricsServiceResponse` says of points the receiver did not take:
/// (rejected data points, its message), when it says anything.
pub fn partial_success(body: &[u8]) -> Option<(i64, String)> {
    let fields = super::proto::fields(body)?;
    let (_, _, partial) = fields.iter().find(|(f, _, _)| *f == 1)?;
    let mut rejected = 0i64;
    let mut message = String::new();
    for (f, v, raw) in super::proto::fields(partial)? {
        match f {
            1 => rejected = v as i64,
            2 => message = String::from_utf8_lossy(raw).into_owned(),
            _ => {}
        }
    }
    (rejected != 0 || !message.is_empty()).then_some((rejected, message))
}

/// `OTEL_EXPORTER_OTLP_METRICS_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs
/// separated by commas, values percent-decoded, as OpenTelemetry's exporters read them. Never
/// printed: they carry tokens.
pub fn headers_from_env() -> Vec<(String, String)> {
    let text = ["OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"]
        .iter()
        .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
    text.map(|t| parse_headers(&t)).unwrap_or_default()
}

/// The pairs of a headers variable; pairs without a key or `=` are left out.
pub fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            let valid = !k.is_empty() && k.bytes().all(|b| b.is_ascii_graphic() && b != b':');
            let v: String = url::form_urlencoded::parse(format!("v={}", v.trim().replace('+', "%2B")).as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            valid.then(|| (k.to_string(), v))
        })
        .collect()
}

/// The URL requests go to: the one given, with `/v1/metrics` when it names no path (as
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
pub fn metrics_url(mut url: url::Url) -> url::Url {
    if url.path().is_empty() || url.path() == "/" {
        url.set_path("/v1/metrics");
    }
    url
}

/// OTLP/HTTP metrics (`--out otlp=URL`): protobuf `ExportMetricsServiceRequest` to `/v1/metrics`,
/// headers from `OTEL_EXPORTER_OTLP_HEADERS`; 429, 502, 503 and 504 tried again, as the
/// specification says; a partial success's rejected points said.
pub struct Otlp;

impl super::Receiver for Otlp {
    fn name(&self) -> &'static str {
        "otlp"
    }

    fn ca_env(&self) -> &'static [&'static str] {
        &["OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"]
    }

    fn endpoint(&self, given: url::Url) -> url::Url {
        metrics_url(given)
    }

    fn headers(&self) -> Vec<(String, String)> {
        let mut h = vec![("Content-Type".to_string(), "application/x-protobuf".to_string())];
        h.extend(headers_from_env().into_iter().filter(|(k, _)| {
            !["content-type", "content-length", "host", "connection", "user-agent"]
                .contains(&k.to_ascii_lowercase().as_str())
        }));
        h
    }

    fn auth(&self, url: &url::Url) -> super::promrw::Auth {
        super::promrw::Auth::from_url(url)
    }

    fn retry(&self, status: u16) -> bool {
        matches!(status, 429 | 502 | 503 | 504)
    }

    fn partial(&self, body: &[u8]) -> Option<(i64, String)> {
        partial_success(body)
    }

    fn run_labels(&self) -> Vec<(String, String)> {
        vec![
            ("service.name".to_string(), "bolide".to_string()),
            ("service.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ]
    }

    fn encode(&self, labels: &[(String, String)], started_ns: u64, ms: i64, points: Vec<Point>) -> Vec<u8> {
        request(labels, started_ns, ms as u64 * 1_000_000, &points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_turn_back_into_remote_write_names() {
        assert_eq!(name_and_unit("bolide_http_responses_total"), ("bolide.http.responses".into(), ""));
        assert_eq!(name_and_unit("bolide_http_latency_seconds"), ("bolide.http.latency".into(), "s"));
        assert_eq!(name_and_unit("bolide_ddp_measure_seconds"), ("bolide.ddp.measure".into(), "s"));
        assert_eq!(name_and_unit("bolide_server_rss_bytes"), ("bolide.server.rss".into(), "By"));
        assert_eq!(name_and_unit("bolide_ddp_users_alive"), ("bolide.ddp.users.alive".into(), ""));
    }

    #[test]
    fn headers_are_pairs_percent_decoded() {
        assert_eq!(
            parse_headers("Authorization=Bearer%20abc, x-team = a+b ,bad,=v"),
            vec![("Authorization".into(), "Bearer abc".into()), ("x-team".into(), "a+b".into())]
        );
    }

    #[test]
    fn a_url_without_a_path_gets_the_metrics_path() {
        let u = |s: &str| metrics_url(url::Url::parse(s).unwrap()).to_string();
        assert_eq!(u("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(u("http://127.0.0.1:4318/custom/path"), "http://127.0.0.1:4318/custom/path");
    }

    #[test]
    fn partial_success_is_read_and_an_empty_answer_is_none() {
        // partial_success(1) { rejected_data_points(1) = 3, error_message(2) = "no" }
        let body = [0x0A, 6, 0x08, 3, 0x12, 2, b'n', b'o'];
        assert_eq!(partial_success(&body), Some((3, "no".into())));
        assert_eq!(partial_success(&[]), None);
        assert_eq!(partial_success(&[0x0A, 0]), None);
        assert_eq!(partial_success(b"{\"partialSuccess\":{}}"), None);
    }

    #[test]
    fn an_exponential_point_has_native_buckets_one_index_down() {
        let mut h = NativeHistogram::default();
        h.add(1.0, 2); // native bucket 0
        h.add(2.0, 1); // native bucket 8
        let d = exponential_point(&h, &[], 5, 6);
        let f = crate::export::proto::fields(&d).unwrap();
        let positive = f.iter().find(|(n, _, _)| *n == 8).unwrap().2;
        let b = crate::export::proto::fields(positive).unwrap();
        // offset -1 (zigzag 1), then 9 counts: 2, 0 x 7, 1.
        assert_eq!(b[0], (1, 1, &[][..]));
        assert_eq!(b[1].2, &[2, 0, 0, 0, 0, 0, 0, 0, 1]);
    }
}

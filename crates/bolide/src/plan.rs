//! Flags -> Plan: every check happens here, before anything runs, and every problem is reported
//! at once with the flag that caused it and what to do about it.

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::cli::HttpArgs;
use crate::engine::pacer::{Pacer, Slice, Stop};
use crate::files;
use crate::problem::Problem;
use crate::proto::http::{build_request, RequestSpec, Target};
use crate::stats::result::HttpSettings;
use crate::threshold::Threshold;

/// Default run length when neither -d nor -n is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A complete, validated description of an HTTP run.
#[derive(Debug, Clone)]
pub struct HttpPlan {
    pub targets: Vec<Target>,
    pub connections: usize,
    pub threads: usize,
    pub pacer: Pacer,
    pub stop: Stop,
    pub timeout: Duration,
    pub keep_alive: bool,
    /// Resend a request once on a new connection when the kept-alive one turns out closed.
    pub retry_closed: bool,
    /// The statuses that count as success (`--expect-status`); any other is a failed request.
    pub expect_status: crate::proto::http::expect::StatusSet,
    pub insecure: bool,
    /// HTTP/2 (`--http2`, `--h2c`): `streams` requests at once on each connection.
    pub http2: bool,
    pub streams: usize,
    /// `--gnuplot`: every request's line in ab's -g layout.
    pub gnuplot: Option<PathBuf>,
    /// The settings as recorded in the result document.
    pub settings: HttpSettings,
    /// What every run has: outputs, the server under test, the segment, the thresholds.
    pub common: Common,
}

/// What every run's plan has, whatever its workload: where its results go, the server under
/// test, this instance's share of the plan, its thresholds and its label. Made once from the
/// shared flags ([`common`]); commands that run a plan many times change these fields, never
/// the flags.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// `--json`: the result document.
    pub json: Option<PathBuf>,
    /// `--html`: the HTML report of the run.
    pub html: Option<PathBuf>,
    /// `--out csv=PATH`: the run's seconds as CSV.
    pub csv: Option<PathBuf>,
    /// `--out DIR`: where `bench` and `capacity` keep their runs' documents.
    pub dir: Option<PathBuf>,
    /// `--out prometheus-rw=URL` and `--out otlp=URL`: where each second is sent.
    pub exports: Vec<(crate::export::Kind, url::Url)>,
    /// Where the live dashboard listens (`--dashboard`).
    pub dashboard: Option<std::net::SocketAddr>,
    pub quiet: bool,
    /// The server under test.
    pub server: ServerPlan,
    /// The `bolide bench` label recorded in the result document.
    pub label: Option<String>,
    /// This instance's segment of the plan (`--segment`) and the shared start (`--start-at`).
    pub spread: Spread,
    /// A scenario's `ensure`, then `--threshold`s, judged on the result document.
    pub thresholds: Vec<Threshold>,
    /// `--junit`: the verdicts as JUnit XML.
    pub junit: Option<PathBuf>,
}

/// Reads the flags every run shares, adding problems to `problems`; the thresholds are left to
/// the workload (they are checked against its steps, [`thresholds`]).
pub fn common(args: &crate::cli::CommonArgs, problems: &mut Problems) -> Common {
    let o = &args.output;
    let dashboard = o.dashboard.as_deref().and_then(|a| dashboard_addr(a).map_err(|e| problems.push(e)).ok());
    let server = server_plan(&args.server, problems);
    let spread = spread(&args.segment, problems);
    let outs = outputs(&o.outs).map_err(|e| problems.push(e)).unwrap_or_default();
    let common = Common {
        json: o.json.clone(),
        html: o.html.clone(),
        csv: outs.csv,
        dir: outs.dir,
        exports: outs.exports,
        dashboard,
        quiet: o.quiet,
        server,
        label: None,
        spread,
        thresholds: Vec::new(),
        junit: args.gate.junit.clone(),
    };
    // Every file the run will write, checked before it starts; one inside `--out DIR` (bench's and
    // capacity's directory, made before their first run) once the directory is there.
    for path in common.artifacts() {
        if common.dir.as_deref().is_some_and(|d| path.starts_with(d) && !d.exists()) {
            continue;
        }
        if let Err(e) = files::check_writable(path) {
            problems.push(e);
        }
    }
    common
}

impl Common {
    /// Every file a run of this plan writes (the workload's own aside): the result document, the
    /// HTML report, the CSV seconds, the JUnit verdicts. `bench` and `capacity` write the series'
    /// own where these say, and each run's document into their directory.
    pub fn artifacts(&self) -> impl Iterator<Item = &std::path::Path> {
        [&self.json, &self.html, &self.csv, &self.junit].into_iter().flatten().map(PathBuf::as_path)
    }
}

/// Where one instance stands among several running one plan.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    pub segment: Option<crate::segment::Segment>,
    pub start_at: Option<std::time::SystemTime>,
}

/// Reads `--segment` and `--start-at`, adding problems to `problems`.
pub fn spread(args: &crate::cli::SegmentArgs, problems: &mut Problems) -> Spread {
    let segment = args
        .segment
        .as_deref()
        .and_then(|s| crate::segment::Segment::parse(s, |v| std::env::var(v).ok()).map_err(|e| problems.push(e)).ok());
    let start_at = args.start_at.as_deref().and_then(|t| {
        crate::segment::parse_start_at(t, std::time::SystemTime::now()).map_err(|e| problems.push(e)).ok()
    });
    Spread { segment, start_at }
}

impl HttpPlan {
    /// This instance's connections: the first one's global index and how many.
    pub fn my_connections(&self) -> (usize, usize) {
        self.common.spread.segment.map_or((0, self.connections), |s| s.connections(self.connections))
    }

    /// This instance's slots of the global schedule (the whole one without a segment).
    pub fn my_slice(&self) -> Slice {
        let (first, width) = self.my_connections();
        Slice { stride: self.connections as u64, offset: first as u64, width: width as u64 }
    }

    /// This instance's share of `-n`.
    pub fn my_requests(&self) -> Option<u64> {
        self.stop.count.map(|n| self.my_slice().count_below(n))
    }
}

/// The thresholds of a run: `given` (a scenario's `ensure`) and `--threshold`s, each checked
/// against the workload's step names (None for HTTP) and watched processes; problems are added to
/// `problems`.
pub fn thresholds(
    flags: &[String],
    given: &[Threshold],
    steps: Option<&[String]>,
    server: &ServerPlan,
    problems: &mut Problems,
) -> Vec<Threshold> {
    let mut processes: Vec<String> = server.monitors.iter().map(|(name, _)| name.clone()).collect();
    if server.spawn.is_some() {
        processes.push("server".into());
    }
    let mut scraped: Vec<String> = server.scrapes.iter().map(|s| s.name.clone()).collect();
    if server.monti.is_some() {
        scraped.push(crate::monitor::monti::NAME.into());
    }
    let names = crate::threshold::Names { steps, processes: &processes, scraped: &scraped };
    let mut out = Vec::new();
    for t in given.iter().cloned().map(Ok).chain(flags.iter().map(|f| crate::threshold::parse_flag(f))) {
        match t.and_then(|t| crate::threshold::check(&t, &names).map(|()| t)).map_err(String::from) {
            Ok(t) => out.push(t),
            Err(e) => match Problem::from(e) {
                e if e.to_string().starts_with("--threshold") => problems.push(e),
                e => problems.push(format!("threshold {e}")),
            },
        }
    }
    out
}

/// The server under test: processes to watch, how often, and the command that starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPlan {
    pub monitors: Vec<(String, crate::monitor::Spec)>,
    pub interval: Duration,
    pub spawn: Option<crate::monitor::spawn::SpawnPlan>,
    /// `--scrape` endpoints, read each `interval`.
    pub scrapes: Vec<crate::monitor::scrape::Spec>,
    /// `--scrape-match`: the metric names kept (a regular expression, checked).
    pub scrape_match: Option<String>,
    pub scrape_limit: usize,
    /// `--monti`: where the Monti endpoint listens, and the app id and secret it lets in (None:
    /// any).
    pub monti: Option<(std::net::SocketAddr, Option<crate::monitor::monti::Credentials>)>,
}

impl Default for ServerPlan {
    fn default() -> Self {
        ServerPlan {
            monitors: Vec::new(),
            interval: Duration::from_secs(1),
            spawn: None,
            scrapes: Vec::new(),
            scrape_match: None,
            scrape_limit: crate::monitor::scrape::DEFAULT_LIMIT,
            monti: None,
        }
    }
}

/// `--out`: where the run's figures go besides its document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outputs {
    /// A plain directory (bench's and capacity's result documents).
    pub dir: Option<PathBuf>,
    /// `csv=PATH`.
    pub csv: Option<PathBuf>,
    /// `prometheus-rw=URL` (a remote write receiver) and `otlp=URL` (an OTLP/HTTP one), http:// or
    /// https://.
    pub exports: Vec<(crate::export::Kind, url::Url)>,
}

/// Reads `--out` values: `csv=PATH`, or a directory.
pub fn outputs(outs: &[String]) -> Result<Outputs, Problem> {
    let mut o = Outputs::default();
    for text in outs {
        let kind = text
            .split_once('=')
            .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-'));
        match kind {
            Some(("csv", "")) => return Err("--out csv= needs a file: --out csv=run.csv".into()),
            Some(("csv", path)) => {
                if o.csv.replace(PathBuf::from(path)).is_some() {
                    return Err("--out csv=PATH is given twice; one CSV file per run".into());
                }
            }
            Some((name @ ("prometheus-rw" | "otlp"), url)) => {
                let kind = if name == "otlp" { crate::export::Kind::Otlp } else { crate::export::Kind::PrometheusRw };
                let u = url::Url::parse(url).map_err(|e| format!("--out {name}={url}: not a URL: {e}"))?;
                match u.scheme() {
                    "http" => {}
                    "https" => {
                        crate::export::post::tls_config(crate::export::ca_file(kind).as_deref())
                            .map_err(|e| format!("--out {name}={url}: the CA file: {e}"))?;
                    }
                    other => {
                        return Err(format!(
                            "--out {name}={url}: receivers are http:// or https:// (the scheme is {other:?})"
                        )
                        .into())
                    }
                }
                if o.exports.iter().any(|(k, _)| *k == kind) {
                    return Err(format!("--out {name}=URL is given twice; one receiver of a kind per run").into());
                }
                o.exports.push((kind, u));
            }
            Some((k, _)) => {
                return Err(format!(
                    "--out {text:?}: {k:?} is no kind of output; the kinds are csv=PATH, prometheus-rw=URL and otlp=URL"
                )
                .into())
            }
            None if text.is_empty() => return Err("--out needs KIND=DEST or a directory".into()),
            None => {
                if o.dir.replace(PathBuf::from(text)).is_some() {
                    return Err("--out names two directories; give one".into());
                }
            }
        }
    }
    Ok(o)
}

/// Reads `--monitor`, `--monitor-interval` and `--spawn` with its options, adding problems to
/// `problems`.
pub fn server_plan(args: &crate::cli::ServerArgs, problems: &mut Problems) -> ServerPlan {
    let monitors =
        args.monitors.iter().filter_map(|s| crate::monitor::parse_spec(s).map_err(|e| problems.push(e)).ok()).collect();
    let interval = read_duration("--monitor-interval", &args.monitor_interval)
        .map_err(|e| problems.push(e))
        .unwrap_or(Duration::from_secs(1));
    let timeout = read_duration("--ready-timeout", &args.ready_timeout)
        .map_err(|e| problems.push(e))
        .unwrap_or(Duration::from_secs(30));
    let monti = args.monti.as_deref().and_then(|a| {
        let addr = crate::monitor::monti::parse_addr(Some(a)).map_err(|e| problems.push(e)).ok()?;
        // The app's own id and secret when bolide has them; for a spawned app, ones of bolide's.
        let credentials = crate::monitor::monti::Credentials::from_env()
            .or_else(|| args.spawn.is_some().then(crate::monitor::monti::Credentials::for_spawn));
        Some((addr, credentials))
    });
    // `--probe NAME` alone: bolide loads the probe into the server it spawns, on a free loopback
    // port; `--probe NAME=HOST:PORT`: the server loads it, served there.
    let probes: Vec<String> = args
        .probes
        .iter()
        .filter_map(|p| {
            if p.contains('=') {
                return Some(p.clone());
            }
            if args.spawn.is_none() {
                problems.push(format!(
                    "--probe {p} names no address: with --spawn bolide loads the probe into the server it starts; \
                     otherwise load it yourself (NODE_OPTIONS=\"--require $(bolide probe path)\" BOLIDE_PROBE=127.0.0.1:9465) \
                     and give --probe {p}=127.0.0.1:9465"
                ));
                return None;
            }
            match free_loopback_port() {
                Ok(port) => Some(format!("{p}=127.0.0.1:{port}")),
                Err(e) => {
                    problems.push(format!("--probe {p}: no free loopback port for the probe: {e}"));
                    None
                }
            }
        })
        .collect();
    // The spawned server serves one probe (BOLIDE_PROBE is one address): a bare --probe is the
    // first and only one.
    let bare = args.probes.iter().filter(|p| !p.contains('=')).count();
    if bare > 1 || (bare == 1 && args.probes.first().is_some_and(|p| p.contains('='))) {
        problems.push(
            "--probe NAME without an address loads the probe into the spawned server: give one such --probe, first, \
             and the others with their addresses (NAME=HOST:PORT)",
        );
    }
    let loaded_by_us = args.spawn.is_some() && args.probes.first().is_some_and(|p| !p.contains('='));
    let probe_file = match loaded_by_us {
        true => crate::monitor::probe::write().map_err(|e| problems.push(format!("--probe: {e}"))).ok(),
        false => None,
    };
    let spawn = match (&args.spawn, &args.ready_url) {
        (Some(command), Some(url)) if command.trim().is_empty() => {
            problems.push(format!(
                "--spawn {command:?} is empty; give the command that starts the server (ready at {url})"
            ));
            None
        }
        (Some(command), Some(url)) => match crate::monitor::spawn::ReadyUrl::parse(url) {
            Ok(ready) => Some(crate::monitor::spawn::SpawnPlan {
                command: command.clone(),
                ready,
                timeout,
                env: spawn_env(probes.first(), probe_file.as_deref(), monti.as_ref(), interval)
                    .into_iter()
                    .chain(args.spawn_env.iter().filter_map(|e| match e.split_once('=') {
                        Some((name, value)) if !name.is_empty() && !name.contains(char::is_whitespace) => {
                            crate::redact::sent_env(name, value);
                            Some((name.to_string(), value.to_string()))
                        }
                        _ => {
                            problems.push(format!("--spawn-env {e:?} is not NAME=VALUE"));
                            None
                        }
                    }))
                    .collect(),
            }),
            Err(e) => {
                problems.push(e);
                None
            }
        },
        _ => None,
    };
    let mut scrapes: Vec<crate::monitor::scrape::Spec> = args
        .scrapes
        .iter()
        .filter_map(|s| crate::monitor::scrape::parse_spec(s).map_err(|e| problems.push(e)).ok())
        .collect();
    // `--probe NAME=HOST:PORT`: bolide-probe's endpoint, read like any other.
    for p in &probes {
        match crate::monitor::scrape::probe_spec(p) {
            Ok(s) => scrapes.push(s),
            Err(e) => problems.push(e),
        }
    }
    for (i, s) in scrapes.iter().enumerate() {
        if scrapes[..i].iter().any(|o| o.name == s.name) {
            problems.push(format!("{} is named twice among --scrape and --probe: give each its own name", s.name));
        }
        if monti.is_some() && s.name == crate::monitor::monti::NAME {
            problems.push("monti is the name of --monti's series: give the other --scrape or --probe another name");
        }
    }
    if let Some(m) = &args.scrape_match {
        if let Err(e) = regex::Regex::new(m) {
            problems.push(format!("--scrape-match {m:?} is not a regular expression: {e}"));
        }
    }
    if args.scrape_limit == 0 {
        problems.push("--scrape-limit 0 would keep nothing; leave --scrape out instead");
    }
    ServerPlan {
        monitors,
        interval,
        spawn,
        scrapes,
        scrape_match: args.scrape_match.clone(),
        scrape_limit: args.scrape_limit,
        monti,
    }
}

/// What `--spawn`'s command gets in its environment: where bolide-probe serves (the first
/// `--probe`, `NAME=HOST:PORT`), the probe itself in `NODE_OPTIONS` when bolide loads it
/// (`probe_file`), and where the Monti agent sends (`--monti`).
fn spawn_env(
    probe: Option<&String>,
    probe_file: Option<&std::path::Path>,
    monti: Option<&(std::net::SocketAddr, Option<crate::monitor::monti::Credentials>)>,
    interval: Duration,
) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some((_, addr)) = probe.and_then(|p| p.split_once('=')) {
        env.push(("BOLIDE_PROBE".to_string(), addr.to_string()));
    }
    if let Some(file) = probe_file {
        let existing = std::env::var("NODE_OPTIONS").ok();
        env.push(("NODE_OPTIONS".to_string(), crate::monitor::probe::node_options(existing.as_deref(), file)));
    }
    if let Some((addr, Some(credentials))) = monti {
        env.extend(credentials.spawn_env(*addr, interval));
    }
    env
}

/// A TCP port free on 127.0.0.1 a moment ago (for a probe bolide loads into its spawned server).
fn free_loopback_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The most connections one bolide process holds (`-c`); more belong in several processes.
pub const MAX_CONNECTIONS: usize = 1_000_000;
/// Descriptors a run needs beside its connections: stdio, each worker's runtime and timer,
/// the monitor's /proc files, output files.
fn descriptor_overhead(threads: usize) -> u64 {
    64 + 8 * threads as u64
}

/// Makes room for `need` open files: raises the soft limit towards the hard one when it is
/// lower (as servers and load tools do at start), and says what stands in the way otherwise.
pub fn descriptor_room(need: u64) -> Result<(), Problem> {
    // SAFETY: getrlimit/setrlimit only read and write the struct handed to them.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(());
    }
    if lim.rlim_cur >= need {
        return Ok(());
    }
    let raised = libc::rlimit { rlim_cur: need.min(lim.rlim_max), rlim_max: lim.rlim_max };
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0;
    let now = if ok { raised.rlim_cur } else { lim.rlim_cur };
    if now >= need {
        return Ok(());
    }
    Err(format!(
        "needs about {need} open files, and this process may open {now} (hard limit {}); raise it \
         with `ulimit -n {need}` (as root, or in /etc/security/limits.conf), or use fewer connections",
        lim.rlim_max
    )
    .into())
}

/// Raises the soft open-file limit to the hard one (for runs whose connection count is not
/// known in advance, such as virtual users).
pub fn descriptor_room_all() {
    let _ = descriptor_room(u64::MAX);
}

/// Every problem planning found, gathered so that all are said at once. A problem is pushed as
/// a [`Problem`] or as the words of a parser that returns text.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn push(&mut self, p: impl Into<Problem>) {
        self.0.push(p.into());
    }

    pub fn extend<P: Into<Problem>>(&mut self, ps: impl IntoIterator<Item = P>) {
        self.0.extend(ps.into_iter().map(Into::into));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Configuration problems, all of them; shown one per line.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub Vec<Problem>);

impl ConfigError {
    /// The problems, each with what a URL in it may carry (a password) masked.
    pub fn of(problems: Problems) -> ConfigError {
        let mask = |t: &str| crate::redact::text(t);
        ConfigError(
            problems
                .0
                .into_iter()
                .map(|p| Problem {
                    what: mask(&p.what),
                    flag: p.flag.as_deref().map(mask),
                    hint: p.hint.as_deref().map(mask),
                })
                .collect(),
        )
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {p}")?;
        }
        Ok(())
    }
}

/// Parses `30s`, `2m`, `1m30s`, `500ms`; a bare number means seconds. Longer than
/// [`crate::scenario::MAX_DURATION`] is refused with the allowed range. The error is a
/// [`Problem`], or its words for a caller that still gathers text (`serve`, `fault`).
pub fn parse_duration<E: From<Problem>>(flag: &str, text: &str) -> Result<Duration, E> {
    read_duration(flag, text).map_err(E::from)
}

/// [`parse_duration`], its problem as a value.
pub fn read_duration(flag: &str, text: &str) -> Result<Duration, Problem> {
    use crate::scenario::{duration_range, MAX_DURATION};
    let text = text.trim();
    let parsed = match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Ok(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX).min(MAX_DURATION + Duration::from_secs(1)))
        }
        Ok(_) => Err("not a valid number of seconds".to_string()),
        Err(_) => humantime::parse_duration(text).map_err(|e| e.to_string()),
    };
    match parsed {
        Ok(d) if d.is_zero() => Err(Problem::new(format!("{flag} {text:?} must be longer than zero"))),
        Ok(d) if d > MAX_DURATION => {
            Err(Problem::new(format!("{flag} {text:?} is out of range: a duration must be {}", duration_range())))
        }
        Ok(d) => Ok(d),
        Err(why) => {
            Err(Problem::new(format!("{flag} {text:?} is not a duration ({why}); use e.g. 30s, 2m, 1m30s, 500ms")))
        }
    }
}

/// Checks and resolves one URL.
fn target(raw: &str, spec: &RequestSpec, http2: bool) -> Result<Target, Problem> {
    let url = url::Url::parse(raw).map_err(|e| {
        if !raw.contains("://") {
            format!("URL {raw:?} has no scheme; did you mean http://{raw} ?")
        } else {
            format!("URL {raw:?} is not valid: {e}")
        }
    })?;
    let tls = match url.scheme() {
        "http" => false,
        "https" => true,
        other if !raw.contains("://") => {
            return Err(format!("URL {raw:?} has no scheme ({other:?} read as one); did you mean http://{raw} ?").into())
        }
        other => return Err(format!("URL {raw:?}: scheme {other}:// is not supported; use http:// or https://").into()),
    };
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| format!("URL {raw:?} has no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    // Brackets of an IPv6 literal are URL syntax, not part of the address.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<_> =
        (bare, port).to_socket_addrs().map_err(|e| format!("cannot resolve host {bare:?} of {raw:?}: {e}"))?.collect();
    if addrs.is_empty() {
        return Err(format!("host {bare:?} of {raw:?} resolves to no address").into());
    }
    // user:password@ in the URL becomes Basic auth, as curl does (unless -H Authorization says
    // otherwise); the password is never shown.
    let mut spec = spec.clone();
    let has_credentials = !url.username().is_empty() || url.password().is_some();
    if has_credentials && !spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization")) {
        use base64::Engine;
        let credentials =
            format!("{}:{}", percent_decode(url.username()), percent_decode(url.password().unwrap_or("")));
        let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials));
        spec.headers.push(("Authorization".into(), value));
    }
    for (name, value) in &spec.headers {
        crate::redact::sent_header(name, value);
    }
    if let Some(p) = url.password() {
        crate::redact::sent_secret(&percent_decode(p));
    }
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some(crate::redact::MASK));
    }
    let mut request_url = url.clone();
    let _ = request_url.set_username("");
    let _ = request_url.set_password(None);
    Ok(Target {
        url: crate::redact::text(shown.as_str()),
        host: bare.to_string(),
        addrs,
        tls,
        request: Arc::from(build_request(&request_url, &spec)),
        expect_body: spec.method != "HEAD",
        h2: if http2 { Some(crate::proto::http::h2::shared(&request_url, &spec)?) } else { None },
    })
}

fn header(raw: &str, redactor: &crate::redact::Redactor) -> Result<(String, String), Problem> {
    let shown = redactor.header_arg(raw);
    match raw.split_once(':') {
        Some((name, value)) if is_token(name.trim()) => {
            // CR or LF would start a header line (or the body) of the user's own making.
            if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(format!(
                    "header {shown:?}: its value holds a control character (CR, LF, NUL...), which would end the \
                     header line on the wire; send each header with its own -H"
                )
                .into());
            }
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(format!("header {shown:?} must look like 'Name: value'").into()),
    }
}

/// `%XX` escapes of a URL's userinfo decoded (invalid ones kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).and_then(|c| hex(*c)), b.get(i + 2).and_then(|c| hex(*c))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Builds the plan for `bolide http`, or every reason it cannot be built.
pub fn http_plan(args: &HttpArgs) -> Result<HttpPlan, ConfigError> {
    let mut problems = Problems::default();

    if args.connections == 0 {
        problems.push("-c/--connections must be at least 1");
    }
    if args.threads == Some(0) {
        problems.push("-t/--threads must be at least 1");
    }
    if args.requests == Some(0) {
        problems.push("-n/--requests must be at least 1");
    }
    if let Some(r) = args.rps {
        if let Err(why) = crate::scenario::check_rate(r) {
            problems.push(format!("--rps {why}"));
        }
    }
    let method = args.method.trim().to_string();
    if !is_token(&method) {
        problems.push(format!("-m/--method {method:?} is not an HTTP method"));
    } else if method.bytes().all(|b| b.is_ascii_digit()) {
        // h2load's -m N is streams per connection; here it would send N as the method.
        problems.push(format!(
            "-m/--method {method:?} is not an HTTP method (GET, POST, ...); streams per connection (h2load's -m) \
             is --streams {method}"
        ));
    }
    let duration = match &args.duration {
        Some(text) => read_duration("-d/--duration", text).map_err(|e| problems.push(e)).ok(),
        None if args.requests.is_none() => Some(DEFAULT_DURATION),
        None => None,
    };
    let timeout = read_duration("--timeout", &args.timeout).map_err(|e| problems.push(e)).ok();
    let expect_status = crate::proto::http::expect::StatusSet::parse(&args.expect_status)
        .map_err(|e| problems.push(format!("--expect-status {e}")))
        .unwrap_or_default();
    let redactor = crate::redact::Redactor::new(&args.redact);
    let headers: Vec<(String, String)> =
        args.headers.iter().filter_map(|h| header(h, &redactor).map_err(|e| problems.push(e)).ok()).collect();
    for (_, value) in headers.iter().filter(|(n, _)| redactor.sensitive(n)) {
        crate::redact::sent_secret(value);
    }
    let body = match (&args.body, &args.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(path)) => files::read_limited(path, files::MAX_INPUT_BYTES)
            .map_err(|e| problems.push(format!("--body-file {}: {e}", path.display())))
            .unwrap_or_default(),
        (None, None) => Vec::new(),
    };
    if let Some(path) = &args.gnuplot {
        if let Err(e) = files::check_writable(path) {
            problems.push(e);
        }
    }
    let spec = RequestSpec { method: method.clone(), headers: headers.clone(), body, keep_alive: !args.no_keepalive };
    let http2 = args.http2 || args.h2c;
    if args.streams == 0 {
        problems.push("--streams must be at least 1");
    } else if args.streams > 1 && !http2 {
        problems.push(format!(
            "--streams {} is for HTTP/2 (several requests at once on one connection); add --http2 (or --h2c)",
            args.streams
        ));
    }
    if http2 && args.no_keepalive {
        problems.push("--no-keepalive is HTTP/1.1's; an HTTP/2 connection carries many requests");
    }
    if args.h2c {
        if let Some(u) = args.urls.iter().find(|u| u.starts_with("https://")) {
            problems
                .push(format!("--h2c is HTTP/2 in clear (prior knowledge); {u} is https://: use --http2 (ALPN h2)"));
        }
    }
    let targets: Vec<Target> =
        args.urls.iter().filter_map(|u| target(u, &spec, http2).map_err(|e| problems.push(e)).ok()).collect();
    let mut common = common(&args.common, &mut problems);
    common.thresholds = thresholds(&args.common.gate.thresholds, &[], None, &common.server, &mut problems);
    let spread = common.spread;
    // One process holds its own segment's connections, not the whole plan's.
    if spread.segment.map_or(args.connections, |s| s.connections(args.connections).1) > MAX_CONNECTIONS {
        problems.push(format!(
            "-c/--connections {} is more than one bolide process holds (at most {MAX_CONNECTIONS}); spread the \
             load over several processes or machines (--segment I/N)",
            args.connections
        ));
    }
    if let Some(seg) = spread.segment {
        if (seg.count as usize) > args.connections && args.connections > 0 {
            problems.push(format!(
                "--segment {seg}: {} segments need at least {} connections (-c {}), one each at least",
                seg.count, seg.count, args.connections
            ));
        }
    }

    if !problems.is_empty() {
        return Err(ConfigError::of(problems));
    }
    let connections = args.connections;
    let mine = spread.segment.map_or(connections, |s| s.connections(connections).1);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let threads = args.threads.unwrap_or(cores).min(mine);
    descriptor_room(mine as u64 + descriptor_overhead(threads))
        .map_err(|why| ConfigError(vec![Problem::new(format!("-c/--connections {connections} {why}"))]))?;
    let timeout = timeout.expect("checked above");
    let idempotent = matches!(method.as_str(), "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE");
    let retry_closed = idempotent || args.retry_non_idempotent;
    let settings = HttpSettings {
        connections,
        threads,
        duration_s: duration.map(|d| d.as_secs_f64()),
        requests: args.requests,
        rate_per_s: args.rps,
        method,
        // Recorded in the document: secrets' values masked, names kept.
        headers: headers.iter().map(|(n, v)| (n.clone(), redactor.value(n, v))).collect(),
        body_bytes: spec.body.len(),
        timeout_s: timeout.as_secs_f64(),
        keep_alive: !args.no_keepalive,
        insecure: args.insecure,
        retry_closed,
        expect_status: Some(expect_status.to_string()),
        segment: spread.segment,
        protocol: http2.then(|| {
            if args.h2c || args.urls.iter().all(|u| !u.starts_with("https://")) { "h2c" } else { "h2" }.to_string()
        }),
        streams: http2.then_some(args.streams),
    };
    Ok(HttpPlan {
        targets,
        connections,
        threads,
        pacer: args.rps.map_or(Pacer::Closed, |per_s| Pacer::Rate { per_s, slice: Slice::WHOLE }),
        stop: Stop { time: duration, count: args.requests },
        timeout,
        keep_alive: !args.no_keepalive,
        retry_closed,
        expect_status,
        insecure: args.insecure,
        http2,
        streams: args.streams.max(1),
        gnuplot: args.gnuplot.clone(),
        settings,
        common,
    })
}

/// One server of a DDP run.
#[derive(Debug, Clone)]
pub struct DdpTarget {
    pub url: String,
    pub weight: u32,
    pub endpoint: crate::proto::ws::Endpoint,
}

impl VuPlan {
    /// The length of the targets' round-robin cycle (the targets' weights' sum).
    pub fn targets_cycle_len(&self) -> u64 {
        self.cycle.len() as u64
    }

    /// The index of the target user `k` (by arrival) goes to.
    pub fn target_of(&self, k: u64) -> usize {
        match self.cycle.len() {
            0 => 0,
            n => self.cycle[(k % n as u64) as usize],
        }
    }
}

/// A validated DDP run.
#[derive(Debug, Clone)]
pub struct VuPlan {
    pub scenario: crate::scenario::Scenario,
    /// Built-in name or file path, for reports.
    pub source: String,
    /// The app's servers (one or more); users are spread over them by `cycle`.
    pub targets: Vec<DdpTarget>,
    /// The target of user k is `targets[cycle[k % cycle.len()]]` (smooth weighted round-robin).
    pub cycle: Vec<usize>,
    pub client: crate::proto::ws::ClientConfig,
    pub threads: usize,
    pub insecure: bool,
    /// What every run has: outputs, the server under test, the segment of the users, the
    /// scenario's `ensure` and `--threshold`s.
    pub common: Common,
    /// `--fault`s seeded into the run.
    pub faults: Vec<crate::fault::Fault>,
    /// Where the audit reads the truth, one per target (`--audit-truth`, `config.audit.truth`);
    /// empty: through the users' own targets.
    pub truth: Vec<DdpTarget>,
}

/// Reads `--dashboard`'s address: `IP:PORT`, `:PORT` or `PORT` (loopback).
pub fn dashboard_addr(text: &str) -> Result<std::net::SocketAddr, Problem> {
    let t = text.trim();
    let full = if t.parse::<u16>().is_ok() {
        format!("127.0.0.1:{t}")
    } else if let Some(port) = t.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        t.to_string()
    };
    full.parse().map_err(|_| {
        Problem::new(format!(
            "--dashboard={text}: not an address to listen on; give PORT, :PORT or IP:PORT (e.g. 127.0.0.1:5665)"
        ))
    })
}

impl VuPlan {
    /// How long users keep arriving (the phases' total length).
    pub fn arrivals_length(&self) -> std::time::Duration {
        crate::scenario::arrivals::Schedule::new(&self.scenario.config.phases).length()
    }
}

/// Why a workload cannot be planned (`http`, `run`, and the commands that repeat them): its flags'
/// problems, or its scenario file's (exit 2 either way).
#[derive(Debug)]
pub enum RunPlanError {
    Config(ConfigError),
    Scenario(crate::scenario::yaml::LoadError),
}

/// The problems as one, in their words as printed (for a command that says them inside its own).
impl From<RunPlanError> for Problem {
    fn from(e: RunPlanError) -> Problem {
        Problem::new(e.to_string())
    }
}

impl std::fmt::Display for RunPlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunPlanError::Config(e) => write!(f, "{e}"),
            RunPlanError::Scenario(e) => write!(f, "{e}"),
        }
    }
}

/// Where a DDP app lives, from its `http(s)://host:port[/prefix]` URL.
pub fn endpoint(target: &str) -> Result<crate::proto::ws::Endpoint, Problem> {
    let url = url::Url::parse(target).map_err(|e| format!("target {target:?} is not a URL: {e}"))?;
    let tls = match url.scheme() {
        "http" | "ws" => false,
        "https" | "wss" => true,
        other => return Err(format!("target {target:?}: scheme {other}:// is not http(s):// or ws(s)://").into()),
    };
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| format!("target {target:?} has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let port = url.port_or_known_default().unwrap_or(if tls { 443 } else { 80 });
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve host {host:?} of {target:?}: {e}"))?
        .collect();
    let mut prefix = url.path().trim_end_matches('/').to_string();
    // A ws:// URL may name the endpoint itself; the app's prefix is what comes before it.
    for tail in ["/websocket", "/sockjs"] {
        if let Some(p) = prefix.strip_suffix(tail) {
            prefix = p.to_string();
        }
    }
    Ok(crate::proto::ws::Endpoint { host, port, addrs, tls, prefix })
}

/// Several targets on this machine: a watched port (`--monitor NAME=:PORT`) that is no target's
/// and where nothing listens is a mistake (exit 2, the targets' ports named); without any
/// `--monitor`, the process listening on each target's port is watched as `s1`, `s2`, ... when
/// each is a process of its own (in-process test servers share one, and are not).
fn tie_local_targets(targets: &[DdpTarget], server: &mut ServerPlan, problems: &mut Problems) {
    use crate::monitor::{pid_listening_on, Spec};
    let local: Vec<(usize, u16)> = targets
        .iter()
        .enumerate()
        .filter(|(_, t)| t.endpoint.addrs.iter().any(|a| a.ip().is_loopback()))
        .map(|(i, t)| (i, t.endpoint.port))
        .collect();
    let ports: Vec<String> = local.iter().map(|(_, p)| p.to_string()).collect();
    for (name, spec) in &server.monitors {
        if let Spec::Port(p) = spec {
            if !local.iter().any(|(_, lp)| lp == p) && pid_listening_on(*p).is_none() {
                problems.push(format!(
                    "--monitor {name}=:{p}: no target is on port {p} and nothing listens there (the local targets' \
                     ports: {})",
                    if ports.is_empty() { "none".to_string() } else { ports.join(", ") }
                ));
            }
        }
    }
    if server.monitors.is_empty() && local.len() == targets.len() {
        let pids: Vec<Option<u32>> = local.iter().map(|(_, p)| pid_listening_on(*p)).collect();
        let distinct = pids.iter().enumerate().all(|(i, p)| p.is_some() && !pids[..i].contains(p));
        if distinct {
            server.monitors = local.iter().map(|(i, p)| (format!("s{}", i + 1), Spec::Port(*p))).collect();
        }
    }
}

/// A flag's JSON array (`--params`, `--publication-args`): empty when not given; the error says
/// what is wrong, with an `example`.
fn json_array(text: Option<&str>, example: &str) -> Result<Vec<serde_json::Value>, Problem> {
    match text.map(serde_json::from_str::<serde_json::Value>) {
        None => Ok(Vec::new()),
        Some(Ok(serde_json::Value::Array(items))) => Ok(items),
        Some(Ok(_)) => Err(format!("must be a JSON array, e.g. {example}").into()),
        Some(Err(e)) => Err(format!("is not JSON ({e})").into()),
    }
}

/// Builds the plan for `bolide run`, or every reason it cannot be built: the flags checked, the
/// scenario made (a built-in from its knobs, or a file) and changed by the flags, the faults, then
/// the targets and what every run has.
pub fn run_plan(args: &crate::cli::RunArgs) -> Result<VuPlan, RunPlanError> {
    let mut problems = Problems::default();
    run_flags(args, &mut problems);
    // --arrival-rate and --duration: the built-ins' knobs, or a file's phases shortened or
    // re-rated (see override_phases).
    let rate = args.arrival_rate.and_then(|r| {
        crate::scenario::check_rate(r).map_err(|why| problems.push(format!("--arrival-rate {why}"))).ok()
    });
    let duration =
        args.duration.as_deref().and_then(|d| read_duration("-d/--duration", d).map_err(|e| problems.push(e)).ok());
    let is_builtin = crate::scenario::builtin::is_builtin(&args.scenario);
    if !is_builtin && args.publication.is_some() {
        problems
            .push("--publication: a scenario file names its own subscriptions (it is for sub-churn and cluster-churn)");
    }
    let mut scenario = match is_builtin {
        true => builtin_scenario(args, rate, duration, &mut problems),
        false => file_scenario(args, rate, duration, &mut problems)?,
    };
    let duplicates = apply_run_flags(args, &mut scenario, &mut problems);
    let faults = faults(args, &mut scenario, &mut problems);
    ddp_plan(args, scenario, faults, duplicates, problems)
}

/// The flags that belong to some scenarios only, or that `run` takes as levels.
fn run_flags(args: &crate::cli::RunArgs, problems: &mut Problems) {
    use crate::scenario::builtin;
    // Levels (--users 1,10,50, --burst 1,10,100) are run one after another by `run`; a plan is one.
    for (flag, levels) in [("--users", &args.users), ("--burst", &args.burst)] {
        if levels.len() > 1 {
            problems.push(format!(
                "{flag} {}: levels, one run each, are for `bolide run ddp-calls` and `ddp-connect`; here give one \
                 (or bench --parameter-list n {} with {flag} {{n}})",
                levels.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
                levels.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            ));
        }
    }
    let protocol = builtin::PROTOCOL.contains(&args.scenario.as_str());
    for (flag, set, owner) in [
        ("--method", args.method.is_some(), "ddp-calls"),
        ("--params", args.params.is_some(), "ddp-calls"),
        ("--burst", !args.burst.is_empty(), "ddp-connect"),
        ("--login", args.login.is_some(), "ddp-connect"),
    ] {
        if set && args.scenario != owner {
            problems.push(format!("{flag} is for the built-in {owner}, not {}", args.scenario));
        }
    }
    if protocol && args.arrival_rate.is_some() {
        problems.push(format!(
            "{} is a closed loop: give {} instead of --arrival-rate",
            args.scenario,
            if args.scenario == "ddp-calls" { "--users N" } else { "--burst N" }
        ));
    }
    if args.scenario == "ddp-connect" && !args.users.is_empty() {
        problems.push("ddp-connect: the sessions per burst are --burst N, not --users");
    }
}

/// A built-in scenario made from its knobs (`--arrival-rate`, `--users`, `--method`, `--burst`,
/// `--login`, `-d`, `--think`, `--tasks`, `--publication`).
fn builtin_scenario(
    args: &crate::cli::RunArgs,
    rate: Option<f64>,
    duration: Option<Duration>,
    problems: &mut Problems,
) -> crate::scenario::Scenario {
    use crate::scenario::builtin;
    let users = args.users.first().copied();
    let mut knobs = builtin::Knobs { arrival_rate: rate, users, ..builtin::Knobs::default() };
    if let Some(method) = &args.method {
        if method.trim().is_empty() {
            problems.push("--method is empty; give the method's name");
        }
        match json_array(args.params.as_deref(), "'[\"hello\"]'") {
            Ok(params) => knobs.method = Some((method.clone(), params)),
            Err(why) => problems.push(format!("--params {why}")),
        }
    } else if args.params.is_some() {
        problems.push("--params goes with --method");
    }
    match args.burst.first() {
        Some(0) => problems.push("--burst must be at least 1"),
        Some(n) if *n > crate::scenario::MAX_ARRIVAL_COUNT => {
            problems.push(format!("--burst must be at most {}, not {n}", crate::scenario::MAX_ARRIVAL_COUNT))
        }
        b => knobs.burst = b.copied(),
    }
    if let Some(login) = &args.login {
        match login.split_once(':') {
            Some((user, password)) if !user.is_empty() => knobs.login = Some((user.to_string(), password.to_string())),
            _ => problems.push("--login is NAME:PASSWORD"),
        }
    }
    if let Some(d) = duration {
        knobs.duration = d;
    }
    if let Some(t) = &args.think {
        // 0 is allowed here (no pause), unlike other durations.
        match t.trim().parse::<f64>() {
            Ok(0.0) => knobs.think = Duration::ZERO,
            _ => match read_duration("--think", t) {
                Ok(d) => knobs.think = d,
                Err(e) => problems.push(e),
            },
        }
    }
    if let Some(n) = args.tasks {
        knobs.tasks = n;
    }
    if let Some(name) = &args.publication {
        if !builtin::CHURN.contains(&args.scenario.as_str()) && args.scenario != "ddp-connect" {
            problems.push(format!(
                "--publication: {} does not take it (sub-churn, cluster-churn and ddp-connect do; a scenario file \
                 names its own)",
                args.scenario
            ));
        }
        match json_array(args.publication_args.as_deref(), "'[\"room-1\", 50]'") {
            Ok(params) => knobs.publication = Some((name.clone(), params)),
            Err(why) => problems.push(format!("--publication-args {why}")),
        }
    }
    builtin::by_name(&args.scenario, &knobs).expect("a known built-in")
}

/// A scenario file read, its phases shortened, re-rated or made one closed phase by the flags;
/// Err when there is no such file, or for the file's own problems.
fn file_scenario(
    args: &crate::cli::RunArgs,
    rate: Option<f64>,
    duration: Option<Duration>,
    problems: &mut Problems,
) -> Result<crate::scenario::Scenario, RunPlanError> {
    use crate::scenario::builtin;
    let users = args.users.first().copied();
    let path = std::path::Path::new(&args.scenario);
    if !path.exists() {
        let close = builtin::NAMES.iter().find(|n| {
            let (a, b) = (n.as_bytes(), args.scenario.as_bytes());
            a.iter().zip(b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len()) <= 3
        });
        let hint = match close {
            Some(n) => format!("; did you mean the built-in {n:?}?"),
            None => format!("; built-ins: {}, {}", builtin::NAMES.join(", "), builtin::PROTOCOL.join(", ")),
        };
        return Err(RunPlanError::Config(ConfigError(vec![Problem::new(format!(
            "{:?} is neither a built-in scenario nor a file{hint}",
            args.scenario
        ))])));
    }
    for (flag, set) in [("--think", args.think.is_some()), ("--tasks", args.tasks.is_some())] {
        if set {
            problems.push(format!("{flag} is for built-in scenarios; a scenario file sets it in its flow"));
        }
    }
    let given: Vec<String> = args.variables.iter().map(|(name, _)| name.clone()).collect();
    let mut scenario = crate::scenario::yaml::load_file_with(path, &given).map_err(RunPlanError::Scenario)?;
    crate::scenario::override_phases(&mut scenario.config.phases, rate, duration);
    if let Some(n) = users {
        // One closed phase as long as the phases were (after --duration).
        let length = crate::scenario::arrivals::Schedule::new(&scenario.config.phases).length();
        scenario.config.phases = vec![crate::scenario::Phase {
            name: Some("users".into()),
            duration: length,
            kind: crate::scenario::PhaseKind::Users(n),
            burstiness: None,
        }];
    }
    Ok(scenario)
}

/// What the flags change in a scenario of either kind: its variables, targets, the
/// protocols' settings (Scenario::set_by_flags) and audit; true when `--target` names a server twice.
fn apply_run_flags(
    args: &crate::cli::RunArgs,
    scenario: &mut crate::scenario::Scenario,
    problems: &mut Problems,
) -> bool {
    use crate::scenario::builtin;
    let users = args.users.first().copied();
    // `bench --parameter-list`: each value is the variable of its name, one value only.
    for (name, value) in &args.variables {
        let vars = &mut scenario.config.variables;
        vars.retain(|(n, _)| n != name);
        vars.push((name.clone(), vec![serde_json::Value::String(value.clone())]));
    }
    match users {
        Some(0) => problems.push("--users must be at least 1"),
        Some(n) if n > crate::scenario::MAX_ARRIVAL_COUNT => {
            problems.push(format!("--users must be at most {}, not {n}", crate::scenario::MAX_ARRIVAL_COUNT))
        }
        _ => {}
    }
    let duplicates = target_flags(args, scenario, problems);
    problems.extend(scenario.set_by_flags(args));
    if args.audit {
        // A built-in that keeps no cache (tasks-nonreactive) keeps one to be audited.
        if builtin::is_builtin(&args.scenario) {
            scenario.config.ddp.cache = true;
        }
        scenario.add_audits();
        if !scenario.audits() {
            problems.push("--audit: no flow subscribes, so no user has a cache to check");
        }
    }
    if scenario.audits() && !scenario.config.ddp.cache {
        problems.push("the audit compares each user's local cache: it needs config.ddp.cache (not false)");
    }
    if args.threads == Some(0) {
        problems.push("-t/--threads must be at least 1");
    }
    if scenario.has_browsers() {
        if let Err(e) = crate::browser::executable(&scenario.config.browser) {
            problems.push(e);
        }
    }
    duplicates
}

/// `--target`s, each checked, in place of the scenario's; true when one is named twice.
fn target_flags(args: &crate::cli::RunArgs, scenario: &mut crate::scenario::Scenario, problems: &mut Problems) -> bool {
    if args.target.is_empty() {
        return false;
    }
    let given: Vec<_> = args.target.iter().map(|t| crate::scenario::TargetSpec::parse(t)).collect();
    for e in given.iter().filter_map(|g| g.as_ref().err()) {
        problems.push(format!("--{e}"));
    }
    let specs: Vec<_> = given.into_iter().flatten().collect();
    let repeated = crate::scenario::check_targets(&specs);
    let duplicates = !repeated.is_empty();
    problems.extend(repeated.into_iter().map(|e| format!("--{e}")));
    if !specs.is_empty() {
        scenario.config.targets = specs;
    }
    duplicates
}

/// `--fault`s, checked against the server bolide starts.
fn faults(
    args: &crate::cli::RunArgs,
    scenario: &mut crate::scenario::Scenario,
    problems: &mut Problems,
) -> Vec<crate::fault::Fault> {
    let mut faults = Vec::new();
    for text in &args.fault {
        match crate::fault::Fault::parse(text, read_duration) {
            Ok(f) => faults.push(f),
            Err(e) => problems.push(e),
        }
    }
    if let Some(f) = faults.iter().find(|f| f.on_server()).filter(|_| args.common.server.spawn.is_none()) {
        problems.push(format!(
            "--fault {}: acts on the server bolide starts; give --spawn CMD --ready-url URL (drop@T:P% needs none)",
            f.text
        ));
    }
    // Users reconnect after a fault, as Meteor's client does.
    if !faults.is_empty() {
        scenario.config.ddp.reconnect = true;
    }
    faults
}

/// Each distinct target URL resolved once (a list of the same URL repeated is refused with the
/// flags, and must not cost a resolution, nor a /proc scan, per repetition).
fn resolve_targets(scenario: &crate::scenario::Scenario, problems: &mut Problems) -> Vec<DdpTarget> {
    let mut targets = Vec::new();
    // Each distinct URL is resolved once (a list of the same URL repeated is refused above, and
    // must not cost a resolution, nor a /proc scan below, per repetition).
    let mut resolved: std::collections::HashMap<&str, Result<_, Problem>> = std::collections::HashMap::new();
    for spec in &scenario.config.targets {
        let first = !resolved.contains_key(spec.url.as_str());
        match resolved.entry(spec.url.as_str()).or_insert_with(|| endpoint(&spec.url)) {
            Ok(endpoint) => {
                targets.push(DdpTarget { url: spec.url.clone(), weight: spec.weight, endpoint: endpoint.clone() })
            }
            Err(e) if first => problems.push(e.clone()),
            Err(_) => {}
        }
    }
    targets
}

/// The DDP client's settings: the scenario's, and the switch a `--fault drop` throws.
fn client(scenario: &crate::scenario::Scenario, faults: &[crate::fault::Fault]) -> crate::proto::ws::ClientConfig {
    let d = &scenario.config.ddp;
    crate::proto::ws::ClientConfig {
        transport: d.transport,
        compression: d.compression,
        cache: d.cache,
        fanout_field: d.fanout_field.clone(),
        drops: faults
            .iter()
            .any(|f| matches!(f.kind, crate::fault::Kind::Drop(_)))
            .then(|| std::sync::Arc::new(crate::proto::ws::Drops::default())),
        ..crate::proto::ws::ClientConfig::default()
    }
}

/// The plan once the scenario is made: what every run has, the targets and the audit's truth,
/// the thresholds, the segment; or every problem found.
fn ddp_plan(
    args: &crate::cli::RunArgs,
    mut scenario: crate::scenario::Scenario,
    faults: Vec<crate::fault::Fault>,
    duplicates: bool,
    mut problems: Problems,
) -> Result<VuPlan, RunPlanError> {
    let mut common = common(&args.common, &mut problems);
    let spread = common.spread;
    let targets = resolve_targets(&scenario, &mut problems);
    if !args.audit_truth.is_empty() {
        scenario.config.audit_truth = args.audit_truth.clone();
    }
    let truth = truth_targets(&scenario, &targets, &mut problems);
    if targets.len() > 1 && common.server.spawn.is_none() && !duplicates {
        tie_local_targets(&targets, &mut common.server, &mut problems);
    }
    let steps = scenario.step_names();
    common.thresholds =
        thresholds(&args.common.gate.thresholds, &scenario.config.ensure, Some(&steps), &common.server, &mut problems);
    if let Some(seg) = spread.segment {
        let total = crate::scenario::arrivals::Schedule::new(&scenario.config.phases).total();
        if seg.arrivals(total) == 0 {
            problems.push(format!(
                "--segment {seg}: the plan has {total} user(s), fewer than {} segments; segment {} would have none",
                seg.count, seg.index
            ));
        }
    }
    if !problems.is_empty() {
        return Err(RunPlanError::Config(ConfigError::of(problems)));
    }
    let client = client(&scenario, &faults);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    // Each user holds a connection; how many at once is not known before the run.
    descriptor_room_all();
    Ok(VuPlan {
        source: args.scenario.clone(),
        cycle: crate::scenario::target_cycle(&targets.iter().map(|t| t.weight).collect::<Vec<_>>()),
        targets,
        client,
        threads: args.threads.unwrap_or(cores),
        insecure: args.insecure,
        common,
        scenario,
        faults,
        truth,
    })
}

/// The audit's truth targets: one URL for every target, or one per target in their order.
fn truth_targets(
    scenario: &crate::scenario::Scenario,
    targets: &[DdpTarget],
    problems: &mut Problems,
) -> Vec<DdpTarget> {
    let urls = &scenario.config.audit_truth;
    if urls.is_empty() {
        return Vec::new();
    }
    if !scenario.audits() {
        problems.push("--audit-truth: the run has no audit to read a truth for (give --audit or audit steps)");
        return Vec::new();
    }
    if urls.len() != 1 && urls.len() != targets.len() {
        problems.push(format!(
            "--audit-truth: {} URLs for {} targets; give one for all, or one per target in their order",
            urls.len(),
            targets.len()
        ));
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let url = &urls[if urls.len() == 1 { 0 } else { i }];
        match endpoint(url) {
            Ok(endpoint) => out.push(DdpTarget { url: url.clone(), weight: t.weight, endpoint }),
            Err(e) => {
                problems.push(format!("--audit-truth: {e}"));
                return Vec::new();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn plan(args: &[&str]) -> Result<HttpPlan, ConfigError> {
        let mut argv = vec!["bolide", "http"];
        argv.extend_from_slice(args);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Http(a) => http_plan(&a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn durations() {
        // Each row: text, expected seconds (None: an error).
        let rows = [
            ("30s", Some(30.0)),
            ("2m", Some(120.0)),
            ("1m30s", Some(90.0)),
            ("500ms", Some(0.5)),
            ("15", Some(15.0)),
            ("0", None),
            ("-1", None),
            ("soon", None),
            ("5 parsecs", None),
        ];
        for (text, want) in rows {
            let got = read_duration("-d", text).ok().map(|d| d.as_secs_f64());
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn defaults() {
        let p = plan(&["http://127.0.0.1:9/"]).unwrap();
        assert_eq!(p.connections, 10);
        assert_eq!(p.stop, Stop { time: Some(DEFAULT_DURATION), count: None });
        assert_eq!(p.pacer, Pacer::Closed);
        assert_eq!(p.timeout, Duration::from_secs(10));
        assert!(p.keep_alive);
        let p = plan(&["-n", "5", "-c", "1", "-t", "4", "--rps", "50", "http://127.0.0.1:9/"]).unwrap();
        assert_eq!(p.stop, Stop { time: None, count: Some(5) });
        assert_eq!(p.threads, 1, "never more threads than connections");
        assert_eq!(p.pacer, Pacer::Rate { per_s: 50.0, slice: Slice::WHOLE });
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = plan(&["-c", "0", "--rps", "-5", "--timeout", "x", "-H", "novalue", "ftp://h/", "localhost:80"])
            .unwrap_err();
        let text = err.to_string();
        for needle in [
            "-c/--connections",
            "--rps must be at least one a day",
            "--timeout \"x\"",
            "header \"novalue\"",
            "scheme ftp://",
            "did you mean http://localhost:80",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert_eq!(err.0.len(), 6, "{text}");
    }

    #[test]
    fn unresolvable_host_and_unreadable_body_file() {
        let err = plan(&["--body-file", "/no/such/file", "http://no-such-host.invalid/"]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--body-file /no/such/file"), "{text}");
        assert!(text.contains("cannot resolve host \"no-such-host.invalid\""), "{text}");
    }

    #[test]
    fn ipv6_literal_resolves() {
        let p = plan(&["http://[::1]:9/x"]).unwrap();
        assert_eq!(p.targets[0].addrs[0], "[::1]:9".parse().unwrap());
        assert!(String::from_utf8_lossy(&p.targets[0].request).contains("Host: [::1]:9\r\n"));
    }
}

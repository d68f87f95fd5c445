//! Commands: wires plan -> engine -> result document -> reports for each subcommand, and maps
//! outcomes to the documented exit codes. Writers and the stop token come from the caller, so
//! tests run whole commands in-process.

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, DemoArgs, ServeArgs};
use crate::engine::http::{self as engine, RunOutput, StartError};
use crate::plan::{self, HttpPlan};
use crate::report::term;
use crate::stats::doc::Doc;
use crate::stats::{gnuplot, hist, result, summary};

/// Exit codes, the same for every command (see the README).
pub mod exit {
    /// The run was done.
    pub const OK: i32 = 0;
    /// Thresholds broken (reserved for `ensure` and capacity criteria).
    pub const THRESHOLDS: i32 = 1;
    /// Usage or configuration error: nothing ran.
    pub const USAGE: i32 = 2;
    /// The run could not start or complete (nothing reachable, an output file could not be written).
    pub const RUN: i32 = 3;
}

/// Where a command writes: results on `out`, diagnostics on `err`; `live` allows the progress line.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    pub live: bool,
}

/// Runs the command line `args` (program name first); returns the exit code.
pub fn main(args: Vec<OsString>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let args = capacity_shorthand(args);
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => exit::OK,
                _ => exit::USAGE,
            };
            let text = e.render().ansi().to_string();
            let text = if io.live { text } else { e.render().to_string() };
            let _ = if code == exit::OK { write!(io.out, "{text}") } else { write!(io.err, "{text}") };
            return code;
        }
    };
    let command_line: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    match cli.command {
        Command::Http(a) => once(crate::bench::Workload::http(&a), command_line, io, cancel),
        Command::Run(a) => once(crate::bench::Workload::ddp(&a), command_line, io, cancel),
        Command::Serve(a) => serve(&a, io, cancel),
        Command::Bench(a) => {
            let (workload, opts) = match &a.workload {
                crate::cli::BenchWorkload::Http(b) => (crate::bench::Workload::http(&b.args), &b.bench),
                crate::cli::BenchWorkload::Run(b) => (crate::bench::Workload::ddp(&b.args), &b.bench),
            };
            match workload {
                Ok(w) => crate::bench::bench(w, opts, command_line, io, cancel),
                Err(e) => {
                    let _ = writeln!(io.err, "{e}");
                    exit::USAGE
                }
            }
        }
        Command::Compare(a) => crate::bench::compare::compare(&a, io),
        Command::Capacity(a) => crate::bench::capacity::capacity(&a.workload, command_line, io, cancel),
        Command::Demo(a) => demo(&a, command_line, io, cancel),
    }
}

/// `bolide capacity SCENARIO ...` is short for `bolide capacity run SCENARIO ...`.
fn capacity_shorthand(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "capacity") {
        if let Some(next) = args.get(2).and_then(|a| a.to_str()) {
            if !["http", "run", "help"].contains(&next) && !next.starts_with('-') {
                args.insert(2, "run".into());
            }
        }
    }
    args
}

/// `bolide http` and `bolide run`: a workload planned from its flags, run once; a planning error
/// is a usage error.
fn once(
    workload: Result<crate::bench::Workload, String>,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> i32 {
    match workload {
        Ok(w) => w.execute(command_line, io, cancel).code,
        Err(e) => {
            let _ = writeln!(io.err, "{e}");
            exit::USAGE
        }
    }
}

/// What running a workload left: the exit code, and the result document when it ran.
pub struct Outcome {
    pub code: i32,
    pub doc: Option<Doc>,
}

impl Outcome {
    fn failed(code: i32) -> Outcome {
        Outcome { code, doc: None }
    }
}

/// Starts the server if `--spawn` asked for it; the error is written and mapped to exit 3.
fn spawn_server(
    server: &plan::ServerPlan,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<Option<crate::monitor::spawn::Spawned>, i32> {
    let Some(spawn) = &server.spawn else { return Ok(None) };
    match crate::monitor::spawn::start(spawn, cancel) {
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            Err(exit::RUN)
        }
    }
}

/// Writes the live line when the run shows one.
fn show_live(live: bool, err: &mut dyn Write, line: &str) {
    if live {
        let _ = write!(err, "{line}");
        let _ = err.flush();
    }
}

/// What the watched processes and bolide itself did during a run.
struct Watch {
    monitor: Vec<crate::monitor::MonitorResult>,
    generator: crate::monitor::generator::GeneratorResult,
}

/// Starts the server if `--spawn` asked for it, checks `reachable`, runs `load` (given stderr for
/// its live line) with the server and bolide watched, then stops the server. Err is the exit code
/// of a run that could not start (the reason already written).
fn watched<T>(
    server: &plan::ServerPlan,
    io: &mut Io,
    cancel: &CancellationToken,
    reachable: impl FnOnce(&mut Io) -> bool,
    load: impl FnOnce(&mut dyn Write) -> T,
) -> Result<(T, Watch), i32> {
    let spawned = spawn_server(server, io, cancel)?;
    if !reachable(io) {
        return Err(exit::RUN);
    }
    let monitor = crate::monitor::start_for(&server.monitors, spawned.as_ref(), server.interval, &mut *io.err);
    let out = load(&mut *io.err);
    let (processes, own) = monitor.finish_all();
    stop_server(spawned, &processes, io);
    Ok((out, Watch { monitor: processes.iter().map(Into::into).collect(), generator: own.result() }))
}

/// Stops the spawned server, if any, and says so when it had died during the run.
fn stop_server(spawned: Option<crate::monitor::spawn::Spawned>, watched: &[crate::monitor::Watched], io: &mut Io) {
    if let Some(s) = spawned {
        if let Some(t) = watched.iter().find(|w| w.pid == s.pid).and_then(|w| w.vanished_s) {
            let _ = writeln!(io.err, "warning: the spawned server was gone {t:.1} s into the run{}", s.tail());
        }
        s.stop();
    }
}

pub fn run_http_plan(plan: &HttpPlan, command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> Outcome {
    let live = io.live && !plan.quiet;
    let run = watched(
        &plan.server,
        io,
        cancel,
        |_| true,
        |err| engine::run(plan, cancel, &mut |p: &engine::Progress| show_live(live, err, &term::live_line(p))),
    );
    let (output, watch) = match run {
        Ok(r) => r,
        Err(code) => return Outcome::failed(code),
    };
    let output = match output {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return Outcome::failed(match e {
                StartError::Unreachable(_) | StartError::Setup(_) => exit::RUN,
            });
        }
    };
    if live {
        let _ = write!(io.err, "\r\x1b[K");
    }
    let mut doc = result_doc(plan, &output, command_line);
    doc.monitor = watch.monitor;
    doc.generator = Some(watch.generator);
    doc.label = plan.label.clone();
    let mut code = exit::OK;
    if !plan.quiet {
        let _ = write!(io.out, "{}", term::summary(&doc));
        for (class, detail) in &output.merged.first_errors {
            let _ = writeln!(io.err, "first {} error: {detail}", class.name());
        }
    }
    if let Some(path) = &plan.json {
        if !write_document(path, &doc, plan.quiet, io) {
            code = exit::RUN;
        }
    }
    if let Some(path) = &plan.gnuplot {
        match gnuplot::assemble(path, &output.gnuplot_parts) {
            Ok(()) if !plan.quiet => {
                let _ = writeln!(io.out, "Per-request data (ab -g layout): {}", path.display());
            }
            Ok(()) => {}
            Err(e) => {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
                code = exit::RUN;
            }
        }
    }
    Outcome { code, doc: Some(Doc::Http(Box::new(doc))) }
}

/// Writes a result document whole or not at all; says where (unless quiet) or why not.
fn write_document(path: &std::path::Path, doc: &impl serde::Serialize, quiet: bool, io: &mut Io) -> bool {
    let written = crate::files::write_atomically(path, |w| {
        serde_json::to_writer_pretty(&mut *w, doc).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    });
    match written {
        Ok(()) => {
            if !quiet {
                let _ = writeln!(io.out, "\nResult document: {}", path.display());
            }
            true
        }
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            false
        }
    }
}

/// Assembles the result document of a finished HTTP run.
pub fn result_doc(plan: &HttpPlan, o: &RunOutput, command_line: Vec<String>) -> result::ResultDoc {
    let duration_s = o.duration.as_secs_f64();
    let urls: Vec<String> = plan.targets.iter().map(|t| t.url.clone()).collect();
    let (summary, all) = summary::overall(&o.merged, &o.timeline, duration_s, o.scheduled_sends);
    result::ResultDoc {
        format: result::FORMAT.to_string(),
        version: result::VERSION,
        tool: result::Tool { name: "bolide".into(), version: env!("CARGO_PKG_VERSION").into() },
        kind: "http".into(),
        command_line,
        started_at: humantime::format_rfc3339_millis(o.started_at).to_string(),
        interrupted: o.interrupted,
        host: host(),
        settings: plan.settings.clone(),
        per_target: summary::per_target(&urls, &o.merged, duration_s),
        targets: urls,
        summary,
        timeline: o.timeline.clone(),
        histograms: result::Histograms { latency_us: hist::encode(&all.latency_us) },
        monitor: Vec::new(),
        generator: None,
        label: None,
    }
}

/// Runs a validated DDP plan and reports it.
pub fn run_ddp_plan(
    plan: &crate::engine::vu::DdpPlan,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Outcome {
    // Nothing is measured against a target nobody answers at.
    let reachable = |io: &mut Io| {
        let up =
            plan.endpoint.addrs.iter().any(|a| std::net::TcpStream::connect_timeout(a, Duration::from_secs(5)).is_ok());
        if !up {
            let _ = writeln!(
                io.err,
                "error: nothing answers at {} ({:?}); is the server running?",
                plan.scenario.config.target, plan.endpoint.addrs
            );
        }
        up
    };
    let live = io.live && !plan.quiet;
    let run = watched(&plan.server, io, cancel, reachable, |err| {
        crate::engine::vu::run(plan, cancel, &mut |p: &crate::engine::vu::VuProgress| {
            show_live(live, err, &crate::report::ddp::live_line(p))
        })
    });
    let (output, watch) = match run {
        Ok(r) => r,
        Err(code) => return Outcome::failed(code),
    };
    let output = match output {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return Outcome::failed(exit::RUN);
        }
    };
    if live {
        let _ = write!(io.err, "\r\x1b[K");
    }
    let mut doc = ddp_doc(plan, &output, command_line);
    doc.monitor = watch.monitor;
    doc.generator = Some(watch.generator);
    doc.label = plan.label.clone();
    if !plan.quiet {
        let _ = write!(io.out, "{}", crate::report::ddp::summary(&doc));
        for (class, detail) in &output.rec.first_errors {
            let _ = writeln!(io.err, "first {class} error: {detail}");
        }
    }
    let mut code = if doc.summary.ensure.iter().all(|e| e.ok) { exit::OK } else { exit::THRESHOLDS };
    if let Some(path) = &plan.json {
        if !write_document(path, &doc, plan.quiet, io) {
            code = exit::RUN;
        }
    }
    Outcome { code, doc: Some(Doc::Ddp(Box::new(doc))) }
}

/// Assembles the result document of a DDP run, with the `ensure` verdicts.
pub fn ddp_doc(
    plan: &crate::engine::vu::DdpPlan,
    o: &crate::engine::vu::VuOutput,
    command_line: Vec<String>,
) -> crate::stats::vu::DdpDoc {
    use crate::scenario::{LatencyStat, PhaseKind};
    use crate::stats::vu::*;
    let duration_s = o.duration.as_secs_f64();
    let rec = &o.rec;
    let config = &plan.scenario.config;
    let steps_total: u64 = rec.steps.iter().map(|s| s.count).sum();
    let step_errors: u64 = rec.steps.iter().map(|s| s.error_total()).sum();
    let mut errors_by_class = std::collections::BTreeMap::new();
    for s in &rec.steps {
        for (k, v) in &s.errors {
            *errors_by_class.entry(k.clone()).or_insert(0) += v;
        }
    }
    if rec.cut > 0 {
        errors_by_class.insert("user_timeout".to_string(), rec.cut);
    }
    let error_rate_pct = if steps_total > 0 { step_errors as f64 * 100.0 / steps_total as f64 } else { 0.0 };
    // ensure: over all steps together, or one step.
    let mut ensure = Vec::new();
    if let Some(limit) = config.ensure.max_error_rate {
        ensure.push(EnsureResult {
            what: "error rate %".into(),
            limit,
            value: error_rate_pct,
            ok: error_rate_pct <= limit,
        });
    }
    for l in &config.ensure.limits {
        let mut h = crate::stats::hist::latency_us();
        for (name, s) in rec.names.iter().zip(&rec.steps) {
            if l.step.as_deref().is_none_or(|want| want == name) {
                h.add(&s.latency_us).expect("same shape");
            }
        }
        let us = match l.stat {
            LatencyStat::Max => h.max(),
            LatencyStat::P95 => h.value_at_quantile(0.95),
            LatencyStat::P99 => h.value_at_quantile(0.99),
        };
        let value = us as f64 / 1000.0;
        let what = match &l.step {
            Some(step) => format!("{} of {step} (ms)", l.stat.name()),
            None => format!("{} of all steps (ms)", l.stat.name()),
        };
        ensure.push(EnsureResult { what, limit: l.max_ms, value, ok: value <= l.max_ms });
    }
    let total_time_s = match (rec.first_arrival_s, rec.last_finish_s) {
        (Some(a), Some(b)) if b >= a => b - a,
        _ => 0.0,
    };
    let phases = config
        .phases
        .iter()
        .map(|p| {
            let (rate, ramp, count, pause) = match p.kind {
                PhaseKind::Rate { per_s, ramp_to } => (Some(per_s), ramp_to, None, false),
                PhaseKind::Count(n) => (None, None, Some(n), false),
                PhaseKind::Pause => (None, None, None, true),
            };
            PhaseSettings {
                name: p.name.clone(),
                duration_s: p.duration.as_secs_f64(),
                arrival_rate: rate,
                ramp_to: ramp,
                arrival_count: count,
                pause,
            }
        })
        .collect();
    let nonempty = |h: &hdrhistogram::Histogram<u64>| (!h.is_empty()).then(|| summary::latency(h));
    DdpDoc {
        format: result::FORMAT.to_string(),
        version: result::VERSION,
        tool: result::Tool { name: "bolide".into(), version: env!("CARGO_PKG_VERSION").into() },
        kind: "ddp".into(),
        command_line,
        started_at: humantime::format_rfc3339_millis(o.started_at).to_string(),
        interrupted: o.interrupted,
        host: host(),
        settings: DdpRunSettings {
            scenario: plan.source.clone(),
            target: config.target.clone(),
            transport: match plan.client.transport {
                crate::proto::ddp::Transport::WebSocket => "websocket".into(),
                crate::proto::ddp::Transport::SockJs => "sockjs".into(),
            },
            compression: plan.client.compression,
            cache: plan.client.cache,
            threads: plan.threads,
            phases,
            max_vusers: config.max_vusers,
            step_timeout_s: config.ddp.step_timeout.as_secs_f64(),
            user_timeout_s: config.ddp.user_timeout.as_secs_f64(),
        },
        summary: DdpSummary {
            users: Users {
                launched: rec.launched,
                completed: rec.completed,
                failed: rec.failed,
                skipped: rec.skipped,
                cut: rec.cut,
            },
            total_time_s,
            duration_s,
            steps: steps_total,
            step_errors,
            error_rate_pct,
            errors_by_class,
            messages_in: o.traffic.messages_in,
            messages_out: o.traffic.messages_out,
            bytes_in: o.traffic.bytes_in,
            bytes_out: o.traffic.bytes_out,
            pings_answered: o.traffic.pings_answered,
            protocol_errors: o.traffic.protocol_errors,
            reactive: nonempty(&rec.reactive_us),
            fanout: nonempty(&o.traffic.fanout_us),
            ensure,
        },
        steps: step_summaries(rec, duration_s),
        timeline: o
            .timeline
            .iter()
            .enumerate()
            .map(|(t, (alive, s))| DdpSecond { t: t as u32, users_alive: *alive, counts: s.clone() })
            .collect(),
        histograms: DdpHistograms {
            reactive_us: hist::encode(&rec.reactive_us),
            fanout_us: hist::encode(&o.traffic.fanout_us),
        },
        monitor: Vec::new(),
        generator: None,
        label: None,
    }
}

/// Facts about this machine for the result document.
pub fn host() -> result::Host {
    result::Host {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
    }
}

/// `bolide serve`: the reference server until Ctrl-C.
pub fn serve(args: &ServeArgs, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let Ok(ip) = args.host.parse::<std::net::IpAddr>() else {
        let _ = writeln!(io.err, "error: --host {:?} is not an IP address (e.g. 127.0.0.1 or ::1)", args.host);
        return exit::USAGE;
    };
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let reactivity = match args.reactivity {
        crate::cli::ReactivityArg::Push => refserver::Reactivity::Push,
        crate::cli::ReactivityArg::Poll => refserver::Reactivity::POLL,
    };
    if args.max_sessions == 0 || args.max_message_bytes < 1024 {
        let _ = writeln!(io.err, "error: --max-sessions must be at least 1 and --max-message-bytes at least 1024");
        return exit::USAGE;
    }
    let mut users = Vec::new();
    for u in &args.users {
        match u.split_once(':') {
            Some((name, password)) if !name.is_empty() => users.push((name.to_string(), password.to_string())),
            _ => {
                let _ = writeln!(io.err, "error: --user {u:?} must look like NAME:PASSWORD");
                return exit::USAGE;
            }
        }
    }
    let ddp = refserver::DdpConfig {
        users,
        reactivity,
        compression: args.compression == crate::cli::Toggle::On,
        compression_threshold: args.compression_threshold,
        max_sessions: args.max_sessions,
        max_message_bytes: args.max_message_bytes,
        ..refserver::DdpConfig::default()
    };
    let config = refserver::Config { addr: (ip, args.port).into(), threads: args.threads.unwrap_or(cores).max(1), ddp };
    let server = match refserver::Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot listen on {}:{}: {e}", args.host, args.port);
            return exit::RUN;
        }
    };
    let compression = match args.compression {
        crate::cli::Toggle::On => format!("on, threshold {} bytes", args.compression_threshold),
        crate::cli::Toggle::Off => "off".into(),
    };
    let _ = writeln!(io.out, "bolide reference server on {} (Ctrl-C stops it)", server.base_url());
    let _ = writeln!(io.out, "  tasks page:  {}/", server.base_url());
    let _ =
        writeln!(io.out, "  DDP:         {} (raw), {}/sockjs/... (SockJS)", server.websocket_url(), server.base_url());
    let _ = writeln!(io.out, "  reactivity:  {:?}, compression {compression}", args.reactivity);
    let _ = writeln!(io.out, "  HTTP:        /ok  /bytes/N  /delay/MS  /status/CODE");
    let _ = io.out.flush();
    while !cancel.is_cancelled() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let sessions = server.app().sessions_started.load(std::sync::atomic::Ordering::Relaxed);
    let served = server.requests();
    server.shutdown();
    let _ = writeln!(
        io.out,
        "stopped after {} HTTP requests and {} DDP sessions",
        term::count(served),
        term::count(sessions)
    );
    exit::OK
}

/// `bolide demo`: the reference server as a watched child process (poll reactivity, as in the
/// Meteor reports), the Meteor benchmark's two workloads against it, and the reports' tables.
pub fn demo(args: &DemoArgs, _command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot find bolide's own executable to start the server: {e}");
            return exit::RUN;
        }
    };
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => {
            let _ = writeln!(io.err, "error: no free port on 127.0.0.1: {e}");
            return exit::RUN;
        }
    };
    let quoted = format!("'{}'", exe.display().to_string().replace('\'', r"'\''"));
    let spawn = format!("exec {quoted} serve --port {port} --reactivity poll");
    let target = format!("http://127.0.0.1:{port}");
    let label = crate::bench::default_label();
    let dir = args.out.clone().unwrap_or_else(|| std::path::Path::new("bolide-demo").join(&label));
    // Users per second, seconds of arrivals, pause before each action, tasks per user.
    let (rate, secs, think, tasks) = if args.quick { ("3", "6s", "100ms", "10") } else { ("3", "30s", "500ms", "20") };
    let _ = writeln!(
        io.out,
        "bolide demo: the reference tasks server (poll reactivity) started by bolide on {target}, watched while\n\
         the Meteor benchmark's users run against it: {rate} users per second for {secs}, each adding and\n\
         removing {tasks} tasks with {think} between actions; tasks-reactive, then tasks-nonreactive.\n"
    );
    let mut code = exit::OK;
    for scenario in ["tasks-reactive", "tasks-nonreactive"] {
        if cancel.is_cancelled() {
            break;
        }
        let argv = [
            "bolide",
            "run",
            scenario,
            "--target",
            &target,
            "--arrival-rate",
            rate,
            "-d",
            secs,
            "--think",
            think,
            "--tasks",
            tasks,
            "-t",
            "1",
            "--spawn",
            &spawn,
            "--ready-url",
            &format!("{target}/ok"),
        ];
        let run_args = match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(a)) => a,
            _ => unreachable!("the demo's own command line parses"),
        };
        let workload = match crate::bench::Workload::ddp(&run_args) {
            Ok(w) => w,
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
                return exit::RUN;
            }
        };
        let opts =
            crate::cli::BenchOpts { runs: 1, label: Some(label.clone()), out: Some(dir.clone()), cooldown: "0".into() };
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        code = code.max(crate::bench::bench(workload, &opts, argv, io, cancel));
        let _ = writeln!(io.out);
    }
    let _ = writeln!(
        io.out,
        "Run the demo again later (or after a change) and compare the two series:\n  bolide compare {} bolide-demo/<later>",
        dir.display()
    );
    code
}

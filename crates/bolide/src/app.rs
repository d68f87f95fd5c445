//! Commands: wires plan -> engine -> result document -> reports for each subcommand, and maps
//! outcomes to the documented exit codes. Writers and the stop token come from the caller, so
//! tests run whole commands in-process.

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, DemoArgs, HttpArgs, ServeArgs};
use crate::engine::http::{self as engine, RunOutput, StartError};
use crate::plan::{self, HttpPlan};
use crate::report::term;
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
        Command::Http(a) => http(&a, command_line, io, cancel),
        Command::Serve(a) => serve(&a, io, cancel),
        Command::Demo(a) => demo(&a, command_line, io, cancel),
    }
}

/// `bolide http`.
pub fn http(args: &HttpArgs, command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let plan = match plan::http_plan(args) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(io.err, "{e}");
            return exit::USAGE;
        }
    };
    run_http_plan(&plan, command_line, io, cancel)
}

fn run_http_plan(plan: &HttpPlan, command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let live = io.live && !plan.quiet;
    let err = &mut *io.err;
    let mut progress = |p: &engine::Progress| {
        if live {
            let _ = write!(err, "{}", term::live_line(p));
            let _ = err.flush();
        }
    };
    let output = match engine::run(plan, cancel, &mut progress) {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return match e {
                StartError::Unreachable(_) | StartError::Setup(_) => exit::RUN,
            };
        }
    };
    if live {
        let _ = write!(io.err, "\r\x1b[K");
    }
    let doc = result_doc(plan, &output, command_line);
    let mut code = exit::OK;
    if !plan.quiet {
        let _ = write!(io.out, "{}", term::summary(&doc));
        for (class, detail) in &output.merged.first_errors {
            let _ = writeln!(io.err, "first {} error: {detail}", class.name());
        }
    }
    if let Some(path) = &plan.json {
        let written = crate::files::write_atomically(path, |w| {
            serde_json::to_writer_pretty(&mut *w, &doc).map_err(std::io::Error::other)?;
            w.write_all(b"\n")
        });
        match written {
            Ok(()) if !plan.quiet => {
                let _ = writeln!(io.out, "\nResult document: {}", path.display());
            }
            Ok(()) => {}
            Err(e) => {
                let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
                code = exit::RUN;
            }
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
    code
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
    let ddp = refserver::DdpConfig {
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

/// `bolide demo`: the reference server in-process and a short HTTP benchmark against it.
pub fn demo(args: &DemoArgs, command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    if let Err(e) = plan::parse_duration("-d/--duration", &args.duration) {
        let _ = writeln!(io.err, "error: {e}");
        return exit::USAGE;
    }
    let server = match refserver::Server::start(refserver::Config::default()) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot start the reference server: {e}");
            return exit::RUN;
        }
    };
    let url = format!("{}/ok", server.base_url());
    let _ = writeln!(
        io.out,
        "bolide demo: reference server on {} (in-process, one thread); HTTP load on {url}\n",
        server.base_url()
    );
    let mut argv = vec!["bolide".to_string(), "http".into(), "-c".into(), args.connections.to_string()];
    argv.extend(["-d".into(), args.duration.clone(), "-t".into(), "1".into(), url]);
    let http_args = match Cli::try_parse_from(&argv).map(|c| c.command) {
        Ok(Command::Http(a)) => *a,
        _ => {
            let _ = writeln!(io.err, "error: -c/--connections {} is not usable", args.connections);
            return exit::USAGE;
        }
    };
    let code = http(&http_args, command_line, io, cancel);
    let served = server.requests();
    server.shutdown();
    let _ = writeln!(io.out, "\nThe server counted {} requests.", term::count(served));
    code
}

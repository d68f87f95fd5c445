//! `bolide serve`: the reference server in the foreground until stopped.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::ServeArgs;
use crate::console::{exit, Io};
use crate::problem::Problem;
use crate::report::term;

/// Hands back to the system the memory this thread's heap holds free. mimalloc keeps the pages
/// of blocks freed by other threads (a session's messages are often freed on another worker)
/// until the owning thread collects; without this, `bolide serve` kept about half of what an
/// attack had made it grow (BENCHMARKS.md, "The reference server under attack").
fn release_memory() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
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
    let mut problems = Vec::new();
    if args.max_sessions == 0 || args.max_message_bytes < 1024 {
        problems.push("--max-sessions must be at least 1 and --max-message-bytes at least 1024".to_string());
    }
    if args.max_connections == Some(0)
        || args.max_subs_per_session == 0
        || args.max_session_documents == 0
        || args.payload_docs == 0
    {
        problems.push(
            "--max-connections, --max-subs-per-session, --max-session-documents and --payload-docs must be at least 1"
                .to_string(),
        );
    }
    if args.payload_bytes > 100_000_000 || args.payload_docs > 100_000 {
        problems.push(format!(
            "--payload-bytes {} and --payload-docs {} must be at most 100000000 and 100000",
            args.payload_bytes, args.payload_docs
        ));
    }
    if args.max_pending_bytes < 64 * 1024 {
        problems.push(format!("--max-pending-bytes {} must be at least 65536", args.max_pending_bytes));
    }
    let request_timeout = crate::plan::parse_duration("--request-timeout", &args.request_timeout)
        .map_err(|e| problems.push(e))
        .unwrap_or_default();
    let handshake_timeout = crate::plan::parse_duration("--handshake-timeout", &args.handshake_timeout)
        .map_err(|e| problems.push(e))
        .unwrap_or_default();
    if !problems.is_empty() {
        for p in problems {
            let _ = writeln!(io.err, "error: {p}");
        }
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
        handshake_timeout,
        max_subs_per_session: args.max_subs_per_session,
        max_session_documents: args.max_session_documents,
        max_pending_bytes: args.max_pending_bytes,
        ws_echo: args.ws_echo,
        bug: args.inject_bug.as_deref().and_then(refserver::Bug::named),
        payload_bytes: args.payload_bytes,
        payload_docs: args.payload_docs,
        ..refserver::DdpConfig::default()
    };
    let mut peers = Vec::new();
    for url in &args.balance {
        match peer_addr(url) {
            Ok(a) if a.port() == args.port && (a.ip() == ip || ip.is_unspecified()) => {
                let _ = writeln!(io.err, "error: --balance {url}: that is this server; give its peers");
                return exit::USAGE;
            }
            Ok(a) if peers.contains(&a) => {
                let _ = writeln!(io.err, "error: --balance {url} is given twice");
                return exit::USAGE;
            }
            Ok(a) => peers.push(a),
            Err(e) => {
                let _ = writeln!(io.err, "error: --balance {e}");
                return exit::USAGE;
            }
        }
    }
    let config = refserver::Config {
        addr: (ip, args.port).into(),
        threads: args.threads.unwrap_or(cores).max(1),
        ddp,
        max_connections: args.max_connections.unwrap_or(0),
        request_timeout,
        on_idle: Some(release_memory),
        balance: peers.clone(),
    };
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
    // As the flag spells it (--reactivity push|poll).
    let named = clap::ValueEnum::to_possible_value(&args.reactivity).map(|v| v.get_name().to_string());
    let _ = writeln!(io.out, "  reactivity:  {}, compression {compression}", named.unwrap_or_default());
    let _ = writeln!(io.out, "  HTTP:        /ok  /bytes/N  /delay/MS  /status/CODE  /stats");
    if let Some(bug) = &args.inject_bug {
        let _ = writeln!(
            io.out,
            "  BUG:         {bug} injected (--inject-bug): a faulty server, for audits; never measure it"
        );
    }
    if !peers.is_empty() {
        let shown: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
        let _ = writeln!(
            io.out,
            "  balancing:   1 DDP connection in {} kept, the others forwarded to {}",
            peers.len() + 1,
            shown.join(", ")
        );
    }
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

/// A peer of `--balance`: `http://HOST:PORT` (or `HOST:PORT`), resolved to one address.
fn peer_addr(text: &str) -> Result<std::net::SocketAddr, Problem> {
    use std::net::ToSocketAddrs;
    let full = if text.contains("://") { text.to_string() } else { format!("http://{text}") };
    let url = url::Url::parse(&full).map_err(|e| format!("{text:?} is not a peer's URL (http://HOST:PORT): {e}"))?;
    if url.scheme() != "http" {
        return Err(format!("{text:?}: a peer is reached over http://, not {}://", url.scheme()).into());
    }
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_string();
    let port = url.port().ok_or_else(|| format!("{text:?} has no port (http://HOST:PORT)"))?;
    (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Problem::from(format!("{text:?}: cannot resolve {host:?}")))
}

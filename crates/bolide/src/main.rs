//! The `bolide` binary: parse, run, exit with the documented code.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// mimalloc: the DDP client allocates per message (JSON maps, ids), and glibc's malloc was a third
/// of the generator's CPU in profiles of the Meteor workload.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A second stop signal this soon after the first is the same stop delivered twice (`timeout`
/// signals the child and then its process group; some terminals send two), not "leave at once".
const SAME_STOP: Duration = Duration::from_secs(1);

fn main() {
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    let began = Instant::now();
    // Milliseconds after `began` when the first stop signal came (0: none yet).
    let first_ms = AtomicU64::new(0);
    // SIGINT, SIGTERM, SIGHUP: the first stops the run, which still reports and writes its files;
    // a later one leaves at once (files already written are whole: they are renamed into place).
    let _ = ctrlc::set_handler(move || {
        let now_ms = began.elapsed().as_millis() as u64 + 1;
        match first_ms.compare_exchange(0, now_ms, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => on_signal.cancel(),
            Err(first) if now_ms - first < SAME_STOP.as_millis() as u64 => {}
            Err(_) => std::process::exit(130),
        }
    });
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    // NO_COLOR turns colours off, not the progress.
    let color = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let live = stderr.is_terminal();
    let mut io =
        bolide::console::Io { out: &mut stdout.lock(), err: &mut stderr.lock(), live, color, stage: String::new() };
    let code = bolide::app::main(std::env::args_os().collect(), &mut io, &cancel);
    std::process::exit(code);
}

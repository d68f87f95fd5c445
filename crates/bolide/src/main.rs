//! The `bolide` binary: parse, run, exit with the documented code.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// mimalloc: the DDP client allocates per message (JSON maps, ids), and glibc's malloc was a third
/// of the generator's CPU in profiles of the Meteor workload. (The feature `system-alloc` builds
/// with the system's malloc instead, for heaptrack, which sees only malloc.)
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's option `arena_eager_commit` (its number in mimalloc.h).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Runs before `main` and before the first allocation: mimalloc reserves its first arena then,
/// and by default commits it whole at once (16 MB resident for a run that uses 2 MB of heap).
/// Committed as used, `bolide http -c 10` holds 12 MB instead of 23; requests cost the same
/// (BENCHMARKS.md). The setting is final: `MIMALLOC_ARENA_EAGER_COMMIT` does not change it.
#[used]
#[link_section = ".init_array"]
static COMMIT_AS_USED: extern "C" fn() = commit_as_used;

extern "C" fn commit_as_used() {
    // SAFETY: sets one option by its number; mimalloc allows it at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) };
}

/// A second stop signal this soon after the first is the same stop delivered twice (`timeout`
/// signals the child and then its process group; some terminals send two), not "leave at once".
const SAME_STOP: Duration = Duration::from_secs(1);

fn main() {
    bolide::console::die_with_parent();
    // A bug of bolide's reads as one line that says so, never a backtrace; the run it breaks
    // fails with its own message and exit code.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let said = bolide::engine::panic_text(info.payload());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let line = format!("bolide: internal error in {}: {said}{at}\n", thread.name().unwrap_or("a thread"));
        // Straight to file descriptor 2: the main thread holds stderr's lock for the whole
        // command (its `Io`), and eprintln! from another thread would wait for it forever.
        // SAFETY: write reads `line.len()` bytes from a live buffer.
        unsafe {
            libc::write(2, line.as_ptr().cast(), line.len());
        }
    }));
    let cancel = tokio_util::sync::CancellationToken::new();
    // The first stop signal's number (0: none yet), for the exit code of an interrupted run.
    let stopped_by = Arc::new(AtomicI32::new(0));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    watch_signals(cancel.clone(), stopped_by.clone(), bolide::app::stops_at_once(&args));
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    // NO_COLOR turns colours off, not the progress.
    let color = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let live = stderr.is_terminal();
    let mut io =
        bolide::console::Io { out: &mut stdout.lock(), err: &mut stderr.lock(), live, color, stage: String::new() };
    let code = bolide::app::main(args.clone(), &mut io, &cancel);
    std::process::exit(bolide::app::exit_after_signal(&args, code, stopped_by.load(Ordering::SeqCst)));
}

/// SIGINT, SIGTERM, SIGHUP: the first stops the run, which still reports and writes its files;
/// a later one leaves at once (files already written are whole: they are renamed into place).
/// With `at_once` (commands that read saved results), the first signal leaves at once.
fn watch_signals(cancel: tokio_util::sync::CancellationToken, stopped_by: Arc<AtomicI32>, at_once: bool) {
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: cannot watch for Ctrl-C and SIGTERM ({e}); a signal will stop bolide at once");
            return;
        }
    };
    let began = Instant::now();
    // Milliseconds after `began` when the first stop signal came (0: none yet).
    let first_ms = AtomicU64::new(0);
    let spawned = std::thread::Builder::new().name("bolide-signals".into()).spawn(move || {
        for signal in signals.forever() {
            let now_ms = began.elapsed().as_millis() as u64 + 1;
            match first_ms.compare_exchange(0, now_ms, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) if at_once => std::process::exit(128 + signal),
                Ok(_) => {
                    stopped_by.store(signal, Ordering::SeqCst);
                    cancel.cancel();
                }
                Err(first) if now_ms - first < SAME_STOP.as_millis() as u64 => {}
                Err(_) => std::process::exit(128 + signal),
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!("warning: cannot watch for Ctrl-C and SIGTERM ({e})");
    }
}

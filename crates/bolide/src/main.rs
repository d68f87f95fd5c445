//! The `bolide` binary: parse, run, exit with the documented code.

use std::io::IsTerminal;

/// mimalloc: the DDP client allocates per message (JSON maps, ids), and glibc's malloc was a third
/// of the generator's CPU in profiles of the Meteor workload.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_signal = cancel.clone();
    // First Ctrl-C: stop the run and still report. Second: leave at once.
    let _ = ctrlc::set_handler(move || {
        if on_signal.is_cancelled() {
            std::process::exit(130);
        }
        on_signal.cancel();
    });
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let live = stderr.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut io = bolide::console::Io { out: &mut stdout.lock(), err: &mut stderr.lock(), live };
    let code = bolide::app::main(std::env::args_os().collect(), &mut io, &cancel);
    std::process::exit(code);
}

//! `bolide completions SHELL` and `bolide man`: shell completion scripts and manual pages, made
//! from the command-line definitions (`cli.rs`) so that they cannot drift from the flags.

use std::io::Write;
use std::path::Path;

use clap::CommandFactory;

use crate::console::{exit, Io};

/// Prints the completion script of `shell`.
pub fn completions(shell: clap_complete::Shell, io: &mut Io) -> i32 {
    let mut cmd = crate::cli::Cli::command();
    // Made whole first (clap_complete panics on a failed write), then written: a reader that
    // stopped early (`| head -3`) ends it quietly, as a broken pipe should.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "bolide", &mut script);
    match io.out.write_all(&script).and_then(|()| io.out.flush()) {
        Ok(()) => exit::OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(e) => {
            let _ = writeln!(io.err, "error: cannot write the completion script: {e}");
            exit::RUN
        }
    }
}

/// One manual page as roff, its examples kept as written: in the EXTRA section (the help's
/// examples and exit codes), lines indented by two spaces are commands, set without filling so
/// that groff neither joins nor wraps them; the prose around them is filled as usual.
fn page(cmd: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut roff)?;
    let text = String::from_utf8_lossy(&roff);
    let mut out = String::with_capacity(text.len() + 64);
    let (mut extra, mut verbatim) = (false, false);
    for line in text.lines() {
        if line.starts_with(".SH ") {
            if verbatim {
                out.push_str(".fi\n");
                verbatim = false;
            }
            extra = line == ".SH EXTRA";
        }
        let command = extra && line.starts_with("  ");
        if command && !verbatim {
            out.push_str(".nf\n");
            verbatim = true;
        } else if !command && verbatim {
            out.push_str(".fi\n");
            verbatim = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    if verbatim {
        out.push_str(".fi\n");
    }
    Ok(out.into_bytes())
}

/// Prints the manual page of `bolide` (its commands listed), or writes `bolide.1` and a page per
/// command (`bolide-http.1`, ...) into `dir`, each whole or not at all.
pub fn man(dir: Option<&Path>, io: &mut Io) -> i32 {
    let cmd = crate::cli::Cli::command();
    let Some(dir) = dir else {
        let written = page(cmd).and_then(|p| io.out.write_all(&p)).and_then(|()| io.out.flush());
        return match written {
            Ok(()) => exit::OK,
            Err(e) => {
                let _ = writeln!(io.err, "error: cannot write the manual page: {e}");
                exit::RUN
            }
        };
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        let _ = writeln!(io.err, "error: --dir {}: cannot create it: {e}", dir.display());
        return exit::RUN;
    }
    // A page for every command, nested ones too (`bolide-bench-http`), since each page refers to
    // its subcommands' pages by those names.
    // No `help` subcommand in the pages: `--help` is documented on each, and a `help` page per
    // command would only repeat the list.
    let mut pages = vec![("bolide".to_string(), cmd.clone().disable_help_subcommand(true))];
    let mut next = 0;
    while next < pages.len() {
        let (name, page) = pages[next].clone();
        for sub in page.get_subcommands() {
            let sub_name = format!("{name}-{}", sub.get_name());
            pages.push((sub_name.clone(), sub.clone().name(sub_name).disable_help_subcommand(true)));
        }
        next += 1;
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        if let Err(e) = crate::files::write_atomically(&path, |w| w.write_all(&self::page(page.clone())?)) {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            return exit::RUN;
        }
        let _ = writeln!(io.out, "{}", path.display());
    }
    exit::OK
}

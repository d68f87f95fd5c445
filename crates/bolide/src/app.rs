//! Commands: parses the command line and dispatches each subcommand to the module that owns it
//! (the run lifecycle for `http` and `run`; `load/` for bench, capacity and the demos, which run
//! load; `results/` for compare, report and merge, which read result documents; `serve`). Writers and the stop token come from the caller, so tests run whole commands
//! in-process.

use std::ffi::OsString;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command};
use crate::console::{exit, Failed, Io};
use crate::problem::Problem;
use crate::workload::Workload;

/// Runs the command line `args` (program name first); returns the exit code. A command that
/// fails returns its problems here, the one place they are printed.
pub fn main(args: Vec<OsString>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let args = capacity_shorthand(args);
    if let Some((arg, hint)) = misread_by_clap(&args) {
        let misread = Problem::new(format!("unexpected argument '{arg}' found")).hint(hint);
        return say(io, Failed::usage([misread]));
    }
    let cli = match parse(&args, io) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match dispatch(cli, &args, io, cancel) {
        Ok(code) => code,
        Err(failed) => say(io, failed),
    }
}

/// Prints what a command failed on, the one place it is printed, and returns its exit code.
fn say(io: &mut Io, failed: Failed) -> i32 {
    for p in &failed.problems {
        p.print(io.err);
    }
    if let Some(file) = &failed.file {
        let _ = writeln!(io.err, "{file}");
    }
    failed.code
}

/// The command line read by clap; Err(exit code) when clap said why not (or printed the help or
/// the version), in clap's own words.
fn parse(args: &[OsString], io: &mut Io) -> Result<Cli, i32> {
    // With --parameter-list, `{NAME}` may stand in a typed flag (`--users {n}`, `-c {c}`): the
    // command line is read as its first combination has it (each is read again before it runs).
    let e = match Cli::try_parse_from(crate::load::params::first_combination(args)) {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    use clap::error::ErrorKind;
    let code = match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => exit::OK,
        _ => exit::USAGE,
    };
    let text = e.render().ansi().to_string();
    let mut text = if io.color { text } else { e.render().to_string() };
    if let Some(hint) = other_tools_flag(&e) {
        // Clap's "use -- -k" tip is wrong for these: what the flag means in bolide instead.
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("tip:")).collect();
        let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        lines.insert(1, format!("\n  hint: {hint}"));
        text = lines.join("\n").replace("\n\n\n", "\n\n") + "\n";
    }
    let _ = if code == exit::OK { write!(io.out, "{text}") } else { write!(io.err, "{text}") };
    Err(code)
}

/// Each subcommand to the room that owns it.
fn dispatch(cli: Cli, args: &[OsString], io: &mut Io, cancel: &CancellationToken) -> Result<i32, Failed> {
    // Recorded in result documents, so without secrets.
    let command_line = crate::redact::Redactor::command_line(
        &args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
    );
    Ok(match cli.command {
        Command::Http(a) => once(one_run(Workload::http(&a), &a.common)?, command_line, io, cancel),
        Command::Run(a) if crate::load::levels::wanted(&a) => crate::load::levels::run(&a, command_line, io, cancel)?,
        Command::Run(a) => once(one_run(Workload::ddp(&a), &a.common)?, command_line, io, cancel),
        Command::Serve(a) => crate::serve::serve(&a, io, cancel),
        Command::Bench(a) => bench(&a, args, command_line, io, cancel)?,
        Command::Compare(a) => crate::results::compare::compare(&a, io),
        Command::Report(a) => crate::results::report::report(&a, io),
        Command::Merge(a) => crate::results::merge::merge(&a, command_line, io),
        Command::Record(a) => crate::record::record(&a, io, cancel),
        Command::K8s(a) => crate::k8s::command(&a, command_line, io, cancel),
        Command::Capacity(a) => {
            // --out DIR keeps the levels' documents, --out csv=PATH their rows.
            let mut w = a.workload.clone();
            if let Ok(o) = crate::plan::outputs(&a.workload.common().output.outs) {
                let ladder = w.ladder_mut();
                (ladder.out, ladder.csv) = (o.dir, o.csv);
            }
            crate::load::capacity::capacity(&w, command_line, io, cancel)?
        }
        Command::Demo(a) if a.which == crate::cli::DemoWhich::Cluster => crate::load::cluster::demo(&a, io, cancel)?,
        Command::Demo(a) => crate::load::demo::demo(&a, io, cancel)?,
        Command::Probe(a) => match a.what {
            crate::cli::ProbeCommand::Path => {
                let path = crate::monitor::probe::write().map_err(Failed::run)?;
                let _ = writeln!(io.out, "{}", path.display());
                exit::OK
            }
        },
        Command::Completions(a) => crate::manual::completions(a.shell, io),
        Command::Man(a) => crate::manual::man(a.dir.as_deref(), io),
    })
}

/// `bolide bench`: one series, or with --parameter-list one per combination of values.
fn bench(
    a: &crate::cli::BenchArgs,
    args: &[OsString],
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<i32, Failed> {
    // With --parameter-list, as its first combination has it (each is made again later).
    let first = crate::load::params::first_values(&a.workload.opts().parameter_list);
    let w = Workload::bench(&a.workload, &first)?;
    // --out DIR is the series' directory, --out csv=PATH its rows.
    let mut opts = a.workload.opts().clone();
    let c = w.common();
    (opts.out, opts.csv) = (c.dir.clone(), c.csv.clone());
    let junit = c.junit.clone();
    if opts.parameter_list.is_empty() {
        return crate::load::bench(w, &opts, junit.as_deref(), command_line, io, cancel);
    }
    // --parameter-list: the command line again for each value.
    let argv: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let variants = crate::load::params::lists(&opts.parameter_list)
        .and_then(|lists| crate::load::params::variants(&argv, &lists, cancel))
        .map_err(|e| Failed::usage([e]))?;
    if cancel.is_cancelled() {
        // Stopped while planning: nothing ran, nothing was written.
        let _ = writeln!(io.err, "bench: stopped while planning the series; nothing ran");
        return Ok(exit::OK);
    }
    crate::load::bench_series(variants, &opts, junit.as_deref(), io, cancel)
}

/// The exit code of a command that a stop signal (number `signal`, 0 for none) ended: a run,
/// bench, capacity or demo stopped by a signal exits 128 + the signal (130 for Ctrl-C, 143 for
/// SIGTERM, 129 for SIGHUP) after writing its report, as k6 and shells do, so that a script can
/// tell an interrupted run from a finished one. Usage errors and failures to run keep their own
/// codes; `serve` and the commands that read files end with their own code (a signal is how a
/// server is meant to stop).
pub fn exit_after_signal(args: &[OsString], code: i32, signal: i32) -> i32 {
    let command = args.get(1).and_then(|a| a.to_str()).unwrap_or_default();
    let waits_for_pods = command == "k8s" && args.iter().any(|a| a == "--wait");
    let runs_load = ["http", "run", "bench", "capacity", "demo"].contains(&command) || waits_for_pods;
    if signal > 0 && runs_load && ![exit::USAGE, exit::RUN].contains(&code) {
        128 + signal
    } else {
        code
    }
}

/// Commands with no run to report (compare, report, merge, k8s, ...) leave at once on a stop
/// signal, with 128 + the signal: what they write is renamed into place whole, so nothing half
/// written is left. `serve` and the load commands stop through the stop token instead.
pub fn stops_at_once(args: &[OsString]) -> bool {
    let command = args.get(1).and_then(|a| a.to_str()).unwrap_or_default();
    // The recording proxy writes its scenario on Ctrl-C.
    let proxy = command == "record" && args.iter().any(|a| a.to_str().is_some_and(|a| a.starts_with("--listen")));
    // `k8s --wait` stops its Job on Ctrl-C and still merges what the pods printed.
    let waiting = command == "k8s" && args.iter().any(|a| a == "--wait");
    !["http", "run", "bench", "capacity", "demo", "serve"].contains(&command) && !proxy && !waiting
}

/// What another tool's flag is in bolide, for an unknown argument that people bring from ab,
/// wrk, wrk2, oha or hey.
fn other_tools_flag(e: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let flag = arg.split('=').next().unwrap_or(arg);
    Some(match flag {
        "-k" => "bolide keeps connections alive by default (ab's -k); --no-keepalive closes each after one request",
        "-R" => {
            "did you mean --rps (wrk2's -R)? A fixed rate, with latency measured from each request's intended send time"
        }
        "-z" => "did you mean -d/--duration (oha's and hey's -z)? e.g. -d 30s",
        "--latency" => {
            "bolide always prints the latency percentiles (wrk's --latency); --json keeps the whole histogram"
        }
        "-g" => "did you mean --gnuplot FILE (ab's -g)? One line per request in ab's TSV layout",
        "-e" => "the percentiles are in --json's document and the summary (ab's -e CSV is not written)",
        "--vus" => "did you mean -c/--connections N (bolide http) or --users N (bolide run)? (k6's --vus)",
        "-p" => "did you mean -m POST --body-file FILE (ab's -p)?",
        "-s" => "did you mean --timeout (ab's -s)? e.g. --timeout 30s",
        "-x" => "bolide connects to the URL itself; it has no proxy option (hey's -x)",
        _ => return None,
    })
}

/// Another tool's arguments that clap would misread rather than refuse (a value taken as the
/// argument of a bolide flag of the same letter, a word taken as a cluster of short flags): the
/// argument as typed and bolide's answer, before clap reads anything. Arguments after `--` are
/// another command's (`bolide k8s ... -- bolide http ...`) and are left alone.
fn misread_by_clap(args: &[OsString]) -> Option<(String, &'static str)> {
    let words: Vec<&str> = args.iter().skip(1).map_while(|a| a.to_str()).take_while(|a| *a != "--").collect();
    for (i, word) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        let number = !next.is_empty() && next.parse::<f64>().is_ok();
        let hint = match *word {
            "-disable-keepalive" | "--disable-keepalive" => "did you mean --no-keepalive (hey's -disable-keepalive)?",
            "-q" if number => "-q is --quiet here; oha's -q (requests per second) is --rps N",
            "-t" if next.contains("://") => "-t is --threads here; Artillery's -t (the target) is --target URL",
            "-m" if !next.is_empty() && next.bytes().all(|b| b.is_ascii_digit()) => {
                "-m is the HTTP method here (as in ab and curl); h2load's -m (streams per connection) is --streams N"
            }
            _ => continue,
        };
        let shown = if hint.starts_with("did you mean") { word.to_string() } else { format!("{word} {next}") };
        return Some((shown, hint));
    }
    None
}

/// `bolide capacity SCENARIO ...` is short for `bolide capacity run SCENARIO ...`.
pub fn capacity_shorthand(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.get(1).is_some_and(|a| a == "capacity") {
        if let Some(next) = args.get(2).and_then(|a| a.to_str()) {
            if !["http", "run", "help"].contains(&next) && !next.starts_with('-') {
                args.insert(2, "run".into());
            }
        }
    }
    args
}

/// A single run's workload: a plain `--out DIR` belongs to bench and capacity (said before the
/// plan's own problems).
fn one_run(
    workload: Result<Workload, crate::plan::RunPlanError>,
    common: &crate::cli::CommonArgs,
) -> Result<Workload, Failed> {
    match crate::plan::outputs(&common.output.outs) {
        Ok(o) if o.dir.is_some() => Err(Failed::usage([format!(
            "--out {}: a directory is where bench and capacity keep their result documents; one run \
             writes its document with --json FILE (and --out csv=PATH for its seconds as CSV)",
            o.dir.unwrap_or_default().display()
        )])),
        _ => Ok(workload?),
    }
}

/// `bolide http` and `bolide run`: a workload planned from its flags, run once.
fn once(w: Workload, command_line: Vec<String>, io: &mut Io, cancel: &CancellationToken) -> i32 {
    let dashboard = match crate::dashboard::start_for(w.common().dashboard, &format!("bolide {} (live)", w.slug()), io)
    {
        Ok(d) => d,
        Err(code) => return code,
    };
    let outcome = w.execute(command_line, io, cancel, dashboard.as_ref());
    if let Some(d) = &dashboard {
        d.finish(match &outcome.doc {
            Some(doc) => crate::lifecycle::run_page(doc, w.requests_file()),
            None => crate::dashboard::no_report_page("the run could not start or complete"),
        });
    }
    outcome.code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_after_a_stop_signal() {
        let argv = |c: &str| vec![OsString::from("bolide"), OsString::from(c)];
        // Each row: command, the code it returned, the signal, the exit code.
        let rows = [
            // A finished run: its own code.
            ("http", exit::OK, 0, exit::OK),
            // Ctrl-C, SIGTERM, SIGHUP during a run: 128 + the signal, over 0, 1 and 4.
            ("http", exit::OK, 2, 130),
            ("run", exit::THRESHOLDS, 15, 143),
            ("bench", exit::OK, 1, 129),
            ("capacity", exit::INCONCLUSIVE, 2, 130),
            ("demo", exit::OK, 15, 143),
            // A run that could not start keeps saying so.
            ("http", exit::RUN, 2, exit::RUN),
            // A server stops on a signal: that is its normal end.
            ("serve", exit::OK, 15, exit::OK),
        ];
        for (command, code, signal, expected) in rows {
            assert_eq!(exit_after_signal(&argv(command), code, signal), expected, "{command} {code} {signal}");
        }
        assert!(stops_at_once(&argv("compare")) && stops_at_once(&argv("report")) && stops_at_once(&argv("merge")));
        assert!(!stops_at_once(&argv("http")) && !stops_at_once(&argv("serve")));
    }

    #[test]
    fn a_command_s_problems_are_said_once_each_and_a_scenario_file_s_in_its_own_words() {
        let run = |args: &[&str]| {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let argv: Vec<OsString> = ["bolide"].iter().chain(args).map(OsString::from).collect();
            let code = main(argv, &mut Io::plain(&mut out, &mut err), &CancellationToken::new());
            (code, String::from_utf8(err).unwrap())
        };
        // Every flag's problem at once, each on its line with "error: " once.
        let (code, err) = run(&["http", "-c", "0", "--streams", "0", "http://127.0.0.1:9/"]);
        assert_eq!(code, exit::USAGE);
        assert_eq!(err, "error: -c/--connections must be at least 1\nerror: --streams must be at least 1\n");
        // A scenario file's problems start with its file:line:column, as docs/run.md shows them.
        let file = std::env::temp_dir().join(format!("bolide-app-test-{}.yml", std::process::id()));
        std::fs::write(&file, "- just\n- a list\n").unwrap();
        let (code, err) = run(&["run", file.to_str().unwrap()]);
        let _ = std::fs::remove_file(&file);
        assert_eq!(code, exit::USAGE);
        assert!(!err.starts_with("error:") && err.contains(":1:1: the scenario file must be a mapping"), "{err}");
        // A bench refused before its first run: said once, nothing ran.
        let (code, err) = run(&["bench", "http", "--runs", "0", "http://127.0.0.1:9/"]);
        assert_eq!(code, exit::USAGE);
        assert_eq!(err.matches("error: --runs must be at least 1").count(), 1, "{err}");
    }

    #[test]
    fn flags_of_other_tools_get_bolide_s_answer_not_clap_s_tip() {
        // Each row: the flag as people type it for ab, wrk, wrk2, oha or hey; what the answer says.
        let rows = [
            ("-k", "keeps connections alive by default"),
            ("-R", "did you mean --rps (wrk2's -R)?"),
            ("-z", "did you mean -d/--duration"),
            ("--latency", "always prints the latency percentiles"),
            ("-g", "did you mean --gnuplot FILE (ab's -g)?"),
            ("--vus", "(k6's --vus)"),
            ("-p", "--body-file FILE (ab's -p)"),
            ("-s", "--timeout (ab's -s)"),
            ("-x", "no proxy option (hey's -x)"),
        ];
        for (flag, says) in rows {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let mut io = Io::plain(&mut out, &mut err);
            let argv = ["bolide", "http", flag, "100", "http://127.0.0.1:9/"].map(OsString::from).to_vec();
            let code = main(argv, &mut io, &CancellationToken::new());
            let err = String::from_utf8(err).unwrap();
            assert_eq!(code, exit::USAGE, "{flag}");
            assert!(err.contains(says) && !err.contains("tip:") && !err.contains("use '--"), "{flag}: {err}");
            assert!(err.starts_with(&format!("error: unexpected argument '{flag}' found")), "{flag}: {err}");
        }
        // Arguments clap would misread as bolide's own: answered before clap reads them.
        let rows: [(&[&str], &str, &str); 5] = [
            (&["http", "-m", "10", "--h2c"], "-m 10", "--streams N"),
            (&["http", "-q", "500"], "-q 500", "--rps N"),
            (&["http", "-disable-keepalive"], "-disable-keepalive", "--no-keepalive"),
            (&["run", "tasks-reactive", "-t", "http://127.0.0.1:9"], "-t http://127.0.0.1:9", "--target URL"),
            (&["http", "-n", "5", "--", "-q", "500"], "", ""),
        ];
        for (args, shown, says) in rows {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let mut io = Io::plain(&mut out, &mut err);
            let argv: Vec<OsString> =
                ["bolide"].iter().chain(args).chain(&["http://127.0.0.1:9/"]).map(OsString::from).collect();
            let code = main(argv, &mut io, &CancellationToken::new());
            let err = String::from_utf8(err).unwrap();
            assert_eq!(code, exit::USAGE, "{args:?}");
            if shown.is_empty() {
                // After `--`, another command's: clap's own refusal, not a hint of ours.
                assert!(!err.contains("hint:"), "{args:?}: {err}");
            } else {
                assert!(err.starts_with(&format!("error: unexpected argument '{shown}' found")), "{args:?}: {err}");
                assert!(err.contains(says), "{args:?}: {err}");
            }
        }
    }
}

//! `bolide demo`: the Meteor benchmark on a fresh machine, against the reference server.

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, DemoArgs};
use crate::console::{exit, Failed, Io};
use crate::problem::Problem;
use crate::workload::Workload;

/// bolide's own executable, which the demos start reference servers from.
pub(super) fn own_exe() -> Result<std::path::PathBuf, Problem> {
    std::env::current_exe()
        .map_err(|e| Problem::new(format!("cannot find bolide's own executable to start the servers: {e}")))
}

/// `n` different ports free on 127.0.0.1 now (bound together, then let go for the servers).
pub(super) fn free_ports(n: usize) -> Result<Vec<u16>, Problem> {
    let held = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<Result<Vec<_>, _>>();
    let ports = held.and_then(|h| h.iter().map(|l| l.local_addr().map(|a| a.port())).collect());
    ports.map_err(|e| Problem::new(format!("no free port on 127.0.0.1: {e}")))
}

/// `bolide demo`: the reference server as a watched child process (poll reactivity, as in the
/// Meteor reports), the Meteor benchmark's two workloads against it, and the reports' tables.
pub fn demo(args: &DemoArgs, io: &mut Io, cancel: &CancellationToken) -> Result<i32, Failed> {
    let exe = own_exe().map_err(Failed::run)?;
    let port = free_ports(1).map_err(Failed::run)?[0];
    let quoted = format!("'{}'", exe.display().to_string().replace('\'', r"'\''"));
    let spawn = format!("exec {quoted} serve --port {port} --reactivity poll");
    let target = format!("http://127.0.0.1:{port}");
    let label = super::default_label();
    let dir = args.out.clone().unwrap_or_else(|| std::path::Path::new("bolide-demo").join(&label));
    // Users per second, seconds of arrivals, pause before each action, tasks per user.
    let (rate, secs, think, tasks) = if args.quick { ("3", "6s", "100ms", "10") } else { ("3", "30s", "500ms", "20") };
    // One sentence a line, never wrapped by hand: the URL and the figures vary in length.
    let _ = writeln!(
        io.out,
        "bolide demo: the Meteor benchmark against the reference tasks server (poll reactivity).\n\
         Server: started and watched by bolide on {target}.\n\
         Users: {rate} per second for {secs}, each adding and removing {tasks} tasks with {think} between actions.\n\
         Workloads: tasks-reactive, then tasks-nonreactive.\n\
         Results: {}\n",
        dir.display()
    );
    let mut code = exit::OK;
    let scenarios = ["tasks-reactive", "tasks-nonreactive"];
    for (k, scenario) in scenarios.iter().enumerate() {
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
        let workload = Workload::ddp(&run_args).map_err(|e| Failed::run(Problem::from(e)))?;
        let opts = crate::cli::BenchOpts {
            runs: 1,
            label: Some(label.clone()),
            out: Some(dir.clone()),
            csv: None,
            cooldown: "0".into(),
            parameter_list: Vec::new(),
            baseline: None,
            fail_on: Vec::new(),
            ignore_significance: false,
            allow_inconclusive: false,
            detect: None,
        };
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        io.stage = format!("demo {}/{} {scenario}, ", k + 1, scenarios.len());
        let series = super::bench(workload, &opts, None, argv, io, cancel);
        io.stage.clear();
        code = code.max(series?);
        let _ = writeln!(io.out);
    }
    let html = args.html.clone().unwrap_or_else(|| dir.join("report.html"));
    if !crate::results::report::write_dir_report(&dir, &html, &format!("bolide demo: {label}"), io) {
        code = code.max(exit::RUN);
    }
    let me = crate::console::own_command();
    // The later run must be the same workload (a --quick series against a full one is refused).
    let again = if args.quick { "demo --quick" } else { "demo" };
    let _ = writeln!(
        io.out,
        "Run the demo again later (or after a change) and compare the two series:\n  {me} {again}\n  {me} compare {} {}",
        dir.display(),
        dir.with_file_name("<later>").display()
    );
    Ok(code)
}

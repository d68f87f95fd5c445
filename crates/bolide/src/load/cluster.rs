//! `bolide demo cluster`: MeteorHacks' Cluster performance test on one machine. Reference
//! servers started as child processes (one runtime thread each, like the test's single-core
//! servers) in the test's five shapes, the Cluster test's closed churn against the entry points,
//! each server's own count of subscriptions read from its `/stats` (as Kadira read it from inside
//! the app), its CPU and RAM watched by port, and the test's table.

use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, DemoArgs};
use crate::console::{exit, Failed, Io};
use crate::problem::Problem;
use crate::report::table::{meteor_bytes, meteor_cpu, ms, Table};
use crate::report::term::count;
use crate::stats::doc::Doc;
use crate::workload::Workload;

/// How the servers of a shape pass connections on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balancing {
    /// One server, no balancer (the control test).
    None,
    /// The first server is the only entry point and balances over the others.
    One,
    /// Every server is an entry point and balances over the others.
    All,
}

/// One of the Cluster test's scenarios.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub name: &'static str,
    pub servers: usize,
    pub balancing: Balancing,
}

/// The test's five scenarios, in its order.
pub const SHAPES: [Shape; 5] = [
    Shape { name: "control", servers: 1, balancing: Balancing::None },
    Shape { name: "3 servers, one balancer", servers: 3, balancing: Balancing::One },
    Shape { name: "3 servers, all balancers", servers: 3, balancing: Balancing::All },
    Shape { name: "5 servers, all balancers", servers: 5, balancing: Balancing::All },
    Shape { name: "10 servers, all balancers", servers: 10, balancing: Balancing::All },
];

impl Shape {
    /// Whether server `i` takes connections from the users.
    fn is_entry(&self, i: usize) -> bool {
        self.balancing == Balancing::All || i == 0
    }

    /// A file name: `3-servers-one-balancer`.
    fn slug(&self) -> String {
        self.name.replace(", ", "-").replace(' ', "-")
    }
}

/// What one server did during a shape's run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ServerFigures {
    /// The port it listened on.
    pub port: u16,
    pub entry: bool,
    /// Subscriptions it made ready, from its own `/stats`.
    pub subscriptions: u64,
    pub avg_cpu_pct: Option<f64>,
    pub avg_rss_bytes: Option<f64>,
}

/// One row of the table: a shape's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShapeRow {
    pub name: String,
    pub servers: Vec<ServerFigures>,
    pub duration_s: f64,
    /// Subscribe -> ready at the users, p50 and p99 (µs).
    pub response_p50_us: u64,
    pub response_p99_us: u64,
    pub failed_users: u64,
    /// Why its figures may not measure the servers (bolide or the machine was the limit), as
    /// every run's document says; none when clean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Subscriptions per minute of each server of a shape, by its own count.
fn per_minute(r: &ShapeRow) -> Vec<f64> {
    r.servers.iter().map(|s| s.subscriptions as f64 * 60.0 / r.duration_s.max(1e-9)).collect()
}

/// The Cluster test's table: scenario | servers | subscriptions/min per server (min-max) | in
/// total | response time p50/p99 | CPU of the entry points | CPU of the others | RAM (mean per
/// server).
pub fn table(rows: &[ShapeRow]) -> Table {
    let mut t = Table::new(&[
        "Scenario",
        "Servers",
        "Subs/min per server",
        "Subs/min total",
        "Response p50 / p99",
        "CPU entry point",
        "CPU others",
        "RAM per server",
        "Trust",
    ])
    .right(&[1, 2, 3, 4, 5, 6, 7]);
    for r in rows {
        let per_min = per_minute(r);
        let lo = per_min.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = per_min.iter().copied().fold(0.0, f64::max);
        let whole = |v: f64| count(v.round() as u64);
        let subs = if per_min.len() == 1 || (hi - lo).abs() < 0.5 {
            whole(hi)
        } else {
            format!("{}-{}", whole(lo), whole(hi))
        };
        let cpu = |entry: bool| {
            mean(r.servers.iter().filter(|s| s.entry == entry).filter_map(|s| s.avg_cpu_pct))
                .map_or("-".to_string(), meteor_cpu)
        };
        let ram = mean(r.servers.iter().filter_map(|s| s.avg_rss_bytes)).map_or("-".to_string(), meteor_bytes);
        t.row(vec![
            r.name.clone(),
            r.servers.len().to_string(),
            subs,
            whole(per_min.iter().sum()),
            format!("{} / {}", ms(r.response_p50_us as f64 / 1e3), ms(r.response_p99_us as f64 / 1e3)),
            cpu(true),
            cpu(false),
            ram,
            if r.suspect.is_some() { "suspect".into() } else { "clean".into() },
        ]);
        if r.failed_users > 0 {
            t.tone(t.rows.len() - 1, 4, crate::report::table::Tone::Bad);
        }
        if r.suspect.is_some() {
            t.tone(t.rows.len() - 1, 8, crate::report::table::Tone::Warn);
        }
    }
    t
}

/// The lines that say why suspect scenarios are: one each ("" when none is).
pub fn suspect_notes(rows: &[ShapeRow]) -> String {
    rows.iter().filter_map(|r| r.suspect.as_ref().map(|why| format!("{} is suspect: {why}.\n", r.name))).collect()
}

/// A shape's name in a few characters, for the bars' labels: `3, one` (3 servers, one balancer).
fn short_name(name: &str) -> String {
    match name.split_once(" servers, ") {
        Some((n, rest)) => format!("{n}, {}", rest.split(' ').next().unwrap_or(rest)),
        None => name.to_string(),
    }
}

/// A server's name in the figures and charts: `s1-entry` for an entry point, `s2` for a server
/// behind one.
fn server_name(shape: &Shape, i: usize) -> String {
    if shape.is_entry(i) {
        format!("s{}-entry", i + 1)
    } else {
        format!("s{}", i + 1)
    }
}

/// The Cluster test's page: its table, subscriptions per minute of every server of every shape
/// (entry points apart), the response time per shape, then each shape's run with its servers'
/// CPU over time. Shapes are no releases of one another: no comparison with the control, no
/// history.
pub fn page_sections(rows: &[ShapeRow], docs: &[PathBuf]) -> Vec<crate::report::html::Section> {
    use crate::report::band::Fact;
    use crate::report::charts::{Chart, Series as Line, Style};
    use crate::report::table::Tone;
    let mut names = Vec::new();
    let (mut entry, mut behind) = (Vec::new(), Vec::new());
    for r in rows {
        for (i, (s, v)) in r.servers.iter().zip(per_minute(r)).enumerate() {
            names.push(format!("{}: s{}", short_name(&r.name), i + 1));
            entry.push(s.entry.then_some(v));
            behind.push((!s.entry).then_some(v));
        }
    }
    let x: Vec<f64> = (1..=names.len()).map(|i| i as f64).collect();
    let mut bars = Chart::labelled(
        "cluster-subscriptions",
        "Subscriptions per minute, each server of each scenario (its own count)",
        "scenario (servers, balancers): server",
        "subscriptions / min",
        x,
        names,
    );
    bars.series.push(Line { label: "entry point".into(), style: Style::Bars, values: entry });
    if behind.iter().any(Option::is_some) {
        bars.series.push(Line { label: "behind a balancer".into(), style: Style::Bars, values: behind });
    }
    let mut response = Chart::labelled(
        "cluster-response",
        "Response time (subscribe to ready) per scenario",
        "scenario",
        "ms",
        (1..=rows.len()).map(|i| i as f64).collect(),
        rows.iter().map(|r| r.name.clone()).collect(),
    );
    response.series.push(Line {
        label: "p50".into(),
        style: Style::Line,
        values: rows.iter().map(|r| Some(r.response_p50_us as f64 / 1e3)).collect(),
    });
    response.series.push(Line {
        label: "p99".into(),
        style: Style::Line,
        values: rows.iter().map(|r| Some(r.response_p99_us as f64 / 1e3)).collect(),
    });
    let total = |r: &ShapeRow| per_minute(r).iter().sum::<f64>();
    let mut band = Vec::new();
    if let Some(control) = rows.first() {
        band.push(
            Fact::new(format!("{} subs/min", control.name), count(total(control).round() as u64)).detail("one server"),
        );
    }
    if let Some(best) = rows.iter().skip(1).max_by(|a, b| total(a).total_cmp(&total(b))) {
        band.push(Fact::new("Most subs/min in total", count(total(best).round() as u64)).detail(format!(
            "{} ({} servers)",
            best.name,
            best.servers.len()
        )));
    }
    let failed: u64 = rows.iter().map(|r| r.failed_users).sum();
    band.push(if failed == 0 {
        Fact::new("Failed users", "none").tone(Tone::Good)
    } else {
        Fact::new("Failed users", count(failed)).detail("the run documents say why").tone(Tone::Bad)
    });
    let suspect: Vec<&str> = rows.iter().filter(|r| r.suspect.is_some()).map(|r| r.name.as_str()).collect();
    band.push(if suspect.is_empty() {
        Fact::new("Trust", "clean").detail("no scenario's run was limited by bolide or the machine").tone(Tone::Good)
    } else {
        Fact::new("Trust", format!("{} of {} suspect", suspect.len(), rows.len()))
            .detail(format!("{}: bolide or the machine was the limit (the notes say why)", suspect.join(", ")))
            .tone(Tone::Warn)
    });
    band.push(
        Fact::new("Machine", "shared").detail(
            "every server and the users share this machine's cores: per-server figures fall as servers are added",
        ),
    );
    let mut notes =
        vec!["Subscriptions per server are each server's own count over the run; the response time is subscribe -> \
         ready at the users; CPU is % of one core, averaged over the run; entry points take the users' \
         connections, the others get them from a balancer."
            .to_string()];
    notes.extend(suspect_notes(rows).lines().map(|l| format!("suspect: {l}")));
    let mut out = vec![crate::report::html::Section {
        kind: "cluster",
        title: "Cluster test".into(),
        notes,
        band,
        blocks: vec![crate::report::blocks::Block::table(table(rows))],
        charts: vec![bars, response],
        ..Default::default()
    }];
    let series: Vec<crate::results::compare::Series> = docs
        .iter()
        .zip(rows)
        .filter_map(|(path, r)| {
            let doc = Doc::load(path).ok()?;
            Some(crate::results::compare::Series {
                name: r.name.clone(),
                source: path.clone(),
                runs: vec![(path.clone(), doc)],
            })
        })
        .collect();
    out.extend(crate::results::report::runs_sections(&series));
    out
}

/// The servers of one shape, stopped when dropped.
struct Servers {
    children: Vec<Child>,
    ports: Vec<u16>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A plain GET on loopback: the status and the body, within a few seconds.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.take(1 << 20).read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_string()))
}

/// Subscriptions a server made ready so far, from its `/stats`.
fn subscriptions(port: u16) -> Option<u64> {
    let (_, body) = get(port, "/stats")?;
    serde_json::from_str::<serde_json::Value>(&body).ok()?["subscriptions_ready"].as_u64()
}

/// Starts a shape's servers and waits until each answers `/ok`.
fn start(exe: &Path, shape: &Shape, cancel: &CancellationToken) -> Result<Servers, Problem> {
    let ports = super::demo::free_ports(shape.servers)?;
    let mut servers = Servers { children: Vec::new(), ports: ports.clone() };
    for (i, port) in ports.iter().enumerate() {
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--port", &port.to_string(), "--threads", "1"]);
        let balances = match shape.balancing {
            Balancing::None => false,
            Balancing::One => i == 0,
            Balancing::All => true,
        };
        if balances {
            cmd.arg("--balance");
            cmd.args(ports.iter().filter(|p| *p != port).map(|p| format!("http://127.0.0.1:{p}")));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start a reference server ({}): {e}", exe.display()))?;
        servers.children.push(child);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for port in &ports {
        while get(*port, "/ok").map(|(s, _)| s) != Some(200) {
            if Instant::now() > deadline || cancel.is_cancelled() {
                return Err(Problem::new(format!(
                    "the reference server on port {port} did not answer /ok within 15 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(servers)
}

/// Users and seconds per shape: full and `--quick`.
fn scale(quick: bool) -> (u64, &'static str) {
    if quick {
        (20, "4s")
    } else {
        (20, "15s")
    }
}

/// Runs one shape: its servers, the churn, the figures.
fn run_shape(
    exe: &Path,
    shape: &Shape,
    quick: bool,
    json: &Path,
    io: &mut Io,
    cancel: &CancellationToken,
) -> Result<ShapeRow, Problem> {
    let servers = start(exe, shape, cancel)?;
    let (users, secs) = scale(quick);
    let users = users.to_string();
    let mut argv: Vec<String> =
        ["bolide", "run", "cluster-churn", "--users", &users, "-d", secs, "-t", "1", "-q"].map(String::from).to_vec();
    for (i, port) in servers.ports.iter().enumerate() {
        if shape.is_entry(i) {
            argv.extend(["--target".into(), format!("http://127.0.0.1:{port}")]);
        }
        argv.extend(["--monitor".into(), format!("{}=:{port}", server_name(shape, i))]);
    }
    argv.extend(["--json".into(), json.display().to_string()]);
    let run_args = match Cli::try_parse_from(&argv).map(|c| c.command) {
        Ok(crate::cli::Command::Run(a)) => a,
        _ => unreachable!("the demo's own command line parses"),
    };
    let workload = Workload::ddp(&run_args)?;
    let before: Vec<u64> = servers.ports.iter().map(|p| subscriptions(*p).unwrap_or(0)).collect();
    let outcome = workload.execute(argv.clone(), io, cancel, None);
    let suspect = outcome.doc.as_ref().and_then(|d| d.measures().suspect);
    let Some(doc) = outcome.doc.as_ref().and_then(Doc::ddp) else {
        return Err(Problem::new(format!("the {} run did not finish (exit {})", shape.name, outcome.code)));
    };
    let mut figures = Vec::new();
    for (i, port) in servers.ports.iter().enumerate() {
        let after =
            subscriptions(*port).ok_or_else(|| format!("the server on port {port} stopped answering /stats"))?;
        let watched = doc.monitor.iter().find(|m| m.name == server_name(shape, i)).filter(|m| m.vanished_s.is_none());
        figures.push(ServerFigures {
            port: *port,
            entry: shape.is_entry(i),
            subscriptions: after.saturating_sub(before[i]),
            avg_cpu_pct: watched.map(|m| m.avg_cpu_pct),
            avg_rss_bytes: watched.map(|m| m.avg_rss_bytes),
        });
    }
    drop(servers);
    let step = doc.steps.iter().find(|s| s.name == "subscribe payload");
    Ok(ShapeRow {
        name: shape.name.to_string(),
        servers: figures,
        duration_s: doc.summary.duration_s,
        response_p50_us: step.and_then(|s| s.latency.as_ref()).map_or(0, |l| l.p50_us),
        response_p99_us: step.and_then(|s| s.latency.as_ref()).map_or(0, |l| l.p99_us),
        failed_users: doc.summary.users.failed,
        suspect,
    })
}

/// `bolide demo cluster`.
pub fn demo(args: &DemoArgs, io: &mut Io, cancel: &CancellationToken) -> Result<i32, Failed> {
    let exe = super::demo::own_exe().map_err(Failed::run)?;
    let label = super::default_label();
    let dir = args.out.clone().unwrap_or_else(|| Path::new("bolide-demo").join(format!("cluster-{label}")));
    std::fs::create_dir_all(&dir).map_err(|e| Failed::run(format!("cannot create {}: {e}", dir.display())))?;
    let (users, secs) = scale(args.quick);
    let _ = writeln!(
        io.out,
        "bolide demo cluster: MeteorHacks' Cluster performance test on this machine. For each of its five\n\
         scenarios, reference servers (one thread each) are started on 127.0.0.1, {users} users loop connect ->\n\
         subscribe to the ~200 kB payload publication -> ready -> disconnect for {secs} against the entry\n\
         points, and each server's own count of subscriptions, CPU and RAM are read.\n"
    );
    let mut rows = Vec::new();
    let mut docs: Vec<PathBuf> = Vec::new();
    for (k, shape) in SHAPES.iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let json = dir.join(format!("{}.json", shape.slug()));
        io.stage = format!("cluster {}/{} {}, ", k + 1, SHAPES.len(), shape.name);
        let _ = writeln!(io.out, "{}/{} {} ...", k + 1, SHAPES.len(), shape.name);
        let _ = io.out.flush();
        let row = run_shape(&exe, shape, args.quick, &json, io, cancel);
        io.stage.clear();
        rows.push(row.map_err(Failed::run)?);
        docs.push(json);
    }
    let text = table(&rows).markdown();
    let _ = writeln!(io.out, "\n{text}");
    let failed: u64 = rows.iter().map(|r| r.failed_users).sum();
    if failed > 0 {
        let _ = writeln!(io.out, "{failed} user iterations failed; the run documents say why.");
    }
    let _ = write!(io.out, "{}", suspect_notes(&rows));
    let _ = writeln!(
        io.out,
        "Subscriptions per server are each server's own count over the run; the response time is subscribe\n\
         -> ready at the users; CPU is % of one core, averaged over the run. The Cluster test ran each server\n\
         on its own single-core machine (2,700 subscriptions/min for the control, over 2,500 per server with\n\
         all balancers); here every server and the users share this machine's cores, so figures per server\n\
         fall as servers are added."
    );
    let md = dir.join("cluster.md");
    let page = format!("# bolide demo cluster: {label}\n\n{text}");
    let figures = serde_json::json!({ "label": label, "users": users, "duration": secs, "shapes": rows });
    let mut code = exit::OK;
    for (path, bytes) in [(md.clone(), page.into_bytes()), (dir.join("cluster.json"), figures.to_string().into_bytes())]
    {
        if let Err(e) = crate::files::write_atomically(&path, |w| w.write_all(&bytes)) {
            Problem::new(format!("cannot write {}: {e}", path.display())).print(io.err);
            code = exit::RUN;
        }
    }
    let html = args.html.clone().unwrap_or_else(|| dir.join("report.html"));
    let page = crate::report::html::page(&format!("bolide demo cluster: {label}"), &page_sections(&rows, &docs));
    match crate::files::write_atomically(&html, |w| w.write_all(page.as_bytes())) {
        Ok(()) => {
            let _ = writeln!(io.out, "HTML report: {}", html.display());
        }
        Err(e) => {
            Problem::new(format!("cannot write {}: {e}", html.display())).print(io.err);
            code = exit::RUN;
        }
    }
    let _ = writeln!(io.out, "Results: {} (the table: {})", dir.display(), md.display());
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(entry: bool, subscriptions: u64, cpu: f64, rss_mb: f64) -> ServerFigures {
        ServerFigures { port: 0, entry, subscriptions, avg_cpu_pct: Some(cpu), avg_rss_bytes: Some(rss_mb * 1e6) }
    }

    /// The seed's table, from figures like the Cluster test's own (a minute per scenario).
    #[test]
    fn the_cluster_table() {
        let row = |name: &str, servers: Vec<ServerFigures>, p50: u64, p99: u64| ShapeRow {
            name: name.into(),
            servers,
            duration_s: 60.0,
            response_p50_us: p50,
            response_p99_us: p99,
            failed_users: 0,
            suspect: None,
        };
        let rows = vec![
            row("control", vec![server(true, 2700, 92.5, 81.0)], 6_100, 7_900),
            row(
                "3 servers, one balancer",
                vec![server(true, 1300, 98.0, 84.0), server(false, 1300, 41.0, 80.0), server(false, 1310, 43.0, 80.0)],
                5_200,
                7_400,
            ),
            row(
                "3 servers, all balancers",
                vec![server(true, 2550, 95.0, 82.0), server(true, 2600, 96.0, 82.0), server(true, 2580, 94.0, 82.0)],
                5_800,
                7_700,
            ),
        ];
        let text = table(&rows).markdown();
        crate::load::tests::snapshot("cluster-table.md", &text);
        assert!(text.contains(" 2,550-2,600 |"), "{text}");
        let control: Vec<&str> = text.lines().nth(2).unwrap().split('|').map(str::trim).collect();
        assert_eq!(control[4], "2,700", "the control's total is its one server's: {text}");
        assert_eq!(control[7], "-", "no other servers in the control: {text}");
        let all: Vec<&str> = text.lines().nth(4).unwrap().split('|').map(str::trim).collect();
        assert_eq!(all[4], "7,730", "three servers' counts added: {text}");
        assert_eq!(all[9], "clean", "{text}");
        // A suspect scenario is marked as every other command marks it: in the table, a line
        // saying why, the page's band and notes.
        let mut rows = rows;
        rows[1].suspect = Some("bolide's busiest thread at 97% of a core".into());
        let t = table(&rows);
        assert_eq!((t.rows[1][8].as_str(), t.rows[0][8].as_str()), ("suspect", "clean"));
        assert_eq!(
            suspect_notes(&rows),
            "3 servers, one balancer is suspect: bolide's busiest thread at 97% of a core.\n"
        );
        let page = page_sections(&rows, &[]);
        let trust = page[0].band.iter().find(|f| f.label == "Trust").unwrap();
        assert_eq!(trust.value, "1 of 3 suspect");
        assert!(page[0].notes.iter().any(|n| n.starts_with("suspect: 3 servers, one balancer is suspect")));
        // The bars' labels are short enough to be read whole.
        let names = &page[0].charts[0].x_names;
        assert_eq!(names[0], "control: s1");
        assert_eq!(names[1], "3, one: s1");
        assert!(names.iter().all(|n| n.len() <= 28), "{names:?}");
    }

    #[test]
    fn shapes_and_their_entry_points() {
        let entries: Vec<usize> = SHAPES.iter().map(|s| (0..s.servers).filter(|i| s.is_entry(*i)).count()).collect();
        assert_eq!(entries, [1, 1, 3, 5, 10]);
        assert_eq!(SHAPES[1].slug(), "3-servers-one-balancer");
    }
}

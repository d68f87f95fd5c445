//! `bolide record`: a real browser session, saved as a HAR (Chrome DevTools, Playwright's
//! `recordHar`, mitmproxy), turned into a runnable DDP scenario in bolide's YAML: the DDP
//! connection's frames read (`har`), its messages made steps with thinks and correlated values
//! (`flow`), the file written here with the substitutions listed for review.

pub mod flow;
pub mod har;
pub mod proxy;

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::cli::RecordArgs;
use crate::console::{exit, Io};
use crate::problem::Problem;
use flow::{Options, Recorded, Step};

/// mimalloc's option `purge_delay` (its number in mimalloc.h): milliseconds before freed memory
/// is returned (10 by default).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `bolide record FILE.har`, or `bolide record --listen ADDR --to URL` (the recording proxy,
/// stopped by `cancel` or its `--duration`).
pub fn record(args: &RecordArgs, io: &mut Io, cancel: &tokio_util::sync::CancellationToken) -> i32 {
    // Freed memory goes back at once: a long session's frames are let go as its messages are
    // made, and its messages as its steps are (BENCHMARKS.md: memory within 2x the HAR's size).
    // SAFETY: sets one option by its number (`mi_option_purge_delay`); allowed at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    match run(args, io, cancel) {
        Ok(code) => code,
        Err(stop) => {
            stop.problem.print(io.err);
            stop.code
        }
    }
}

/// Why `bolide record` stops before it writes a scenario: the problem, said once by [`record`],
/// and the exit code.
struct Stop {
    problem: Problem,
    code: i32,
}

impl Stop {
    /// A problem with what the user gave (exit 2).
    fn usage(problem: impl Into<Problem>) -> Stop {
        Stop { problem: problem.into(), code: exit::USAGE }
    }

    /// A problem while recording or writing (exit 3).
    fn run(problem: impl Into<Problem>) -> Stop {
        Stop { problem: problem.into(), code: exit::RUN }
    }
}

/// The DDP connections of a session, each with its messages, in the HAR's order.
type Connections = Vec<(har::Connection, Vec<har::Message>)>;

/// [`record`]'s stages: the options read, the session read (from a file or through the proxy),
/// its DDP connections made flows, the scenario checked, written, and what was done said.
fn run(args: &RecordArgs, io: &mut Io, cancel: &tokio_util::sync::CancellationToken) -> Result<i32, Stop> {
    let opts = options(args)?;
    let output = args.output.clone().unwrap_or_else(|| "-".into());
    let to_stdout = crate::files::is_stdout(&output);
    for path in std::iter::once(&output).chain(args.har_out.as_ref()) {
        crate::files::check_writable(path).map_err(Stop::usage)?;
    }
    let Some((recorded, har_path)) = session(args, io, cancel)? else { return Ok(exit::OK) };
    let har_path = &har_path;
    let ddp = ddp_connections(recorded.connections, har_path)?;
    let picks = picks(args, ddp.len())?;
    let choice = flow::HttpChoice { ddp_only: args.ddp_only, keep_static: args.keep_static };
    let (flows, target) = flows(&ddp, &recorded.requests, &picks, &opts, choice, har_path)?;
    let text = checked_scenario(&flows, &ddp[picks[0] - 1].0, &target, har_path, ddp.len())?;
    let said = summary(args, &ddp, &picks, &flows, har_path);
    if to_stdout {
        let _ = write!(io.out, "{text}");
        let _ = write!(io.err, "{said}");
        return Ok(exit::OK);
    }
    crate::files::write_atomically(&output, |w| w.write_all(text.as_bytes()))
        .map_err(|e| Stop::run(format!("cannot write {}: {e}", output.display())))?;
    let _ = write!(io.out, "{said}");
    let _ = writeln!(
        io.out,
        "Scenario: {} (run it: bolide run {} --arrival-rate 5 -d 30s)",
        output.display(),
        output.display()
    );
    Ok(exit::OK)
}

/// The flow's options: `--no-correlate`, `--think-scale` and `--think-max`.
fn options(args: &RecordArgs) -> Result<Options, Stop> {
    let think_max = match humantime::parse_duration(&args.think_max) {
        // A think past what a scenario may hold would make a scenario `bolide run` refuses.
        Ok(d) if d > crate::scenario::MAX_DURATION => {
            return Err(Stop::usage(format!(
                "--think-max {}: at most 30 days (a scenario's longest pause)",
                args.think_max
            )));
        }
        Ok(d) => d,
        Err(e) => {
            return Err(Stop::usage(format!("--think-max {}: {e} (a duration such as 10s or 500ms)", args.think_max)));
        }
    };
    if !(args.think_scale.is_finite() && args.think_scale >= 0.0) {
        return Err(Stop::usage(format!(
            "--think-scale {}: a factor of 0 or more (0 drops the thinks)",
            args.think_scale
        )));
    }
    Ok(Options { correlate: !args.no_correlate, think_scale: args.think_scale, think_max })
}

/// The session and where it came from: the HAR file, or what passed through the proxy (None:
/// nothing passed, said).
fn session(
    args: &RecordArgs,
    io: &mut Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<(har::Har, std::path::PathBuf)>, Stop> {
    if let Some(listen) = &args.listen {
        let conns = listen_and_record(args, listen, io, cancel)?;
        return Ok(conns.map(|c| (c, args.har_out.clone().unwrap_or_else(|| "the proxy".into()))));
    }
    let Some(har_path) = &args.har else {
        return Err(Stop::usage(
            "give the HAR file to turn into a scenario (bolide record session.har -o s.yml), or record \
             through the proxy (bolide record --listen 127.0.0.1:3100 --to http://127.0.0.1:3000 -o s.yml)",
        ));
    };
    let c = har::read(har_path).map_err(Stop::usage)?;
    Ok(Some((c, har_path.clone())))
}

/// The DDP connections, in the HAR's order (their frames become messages as they go); none is a
/// problem that says why.
fn ddp_connections(connections: Vec<har::Connection>, har_path: &Path) -> Result<Connections, Stop> {
    let total = connections.len();
    let mut other = 0;
    let ddp: Connections = connections
        .into_iter()
        .map(|mut c| {
            let m = har::messages(&mut c, &mut other);
            (c, m)
        })
        .filter(|(_, m)| har::is_ddp(m))
        .collect();
    if ddp.is_empty() {
        let why = if total == 0 {
            "this HAR has no WebSocket messages: Chrome saves them only when DevTools was open during the \
             session, Playwright only with recordHar's content: \"embed\""
                .to_string()
        } else {
            format!("none of its {total} WebSocket connections speaks DDP (no connect message from the browser)")
        };
        return Err(Stop::usage(format!("{}: {why}", har_path.display())));
    }
    Ok(ddp)
}

/// Which connections (numbered from 1): one (the first by default), or all of them as flows of
/// their own.
fn picks(args: &RecordArgs, n: usize) -> Result<Vec<usize>, Stop> {
    match args.connection.as_deref().map(str::trim) {
        None => Ok(vec![1]),
        Some("all") => Ok((1..=n).collect()),
        Some(text) => match text.parse::<usize>() {
            Ok(pick) if pick >= 1 && pick <= n => Ok(vec![pick]),
            _ => Err(Stop::usage(format!("--connection {text}: the HAR has {n} DDP connections (1 to {n}, or all)"))),
        },
    }
}

/// The flow of each picked connection, with the page's plain requests of its time, and the
/// scenario's target (the first connection's).
fn flows(
    ddp: &Connections,
    requests: &[har::Request],
    picks: &[usize],
    opts: &Options,
    choice: flow::HttpChoice,
    har_path: &Path,
) -> Result<(Vec<(usize, Recorded)>, String), Stop> {
    // The page's plain requests of a connection's time: after the one before it ended, up to its end.
    let end = |i: usize| ddp[i].0.last_s.unwrap_or(f64::INFINITY);
    let mut flows: Vec<(usize, Recorded)> = Vec::new();
    let mut target = String::new();
    for &pick in picks {
        let conn = &ddp[pick - 1].0;
        let this = har::target(&conn.url).map_err(|e| {
            Stop::usage(format!("{}: connection {pick}: {}", har_path.display(), crate::redact::text(&e.to_string())))
        })?;
        let from = if pick >= 2 { end(pick - 2) } else { f64::NEG_INFINITY };
        let mut http_notes = Vec::new();
        let http = flow::pick_requests(requests, &this, from, end(pick - 1), choice, &mut http_notes);
        let mut rec = flow::build(&ddp[pick - 1].1, &http, opts);
        rec.notes.extend(http_notes);
        if target.is_empty() {
            target = this;
        } else if this != target {
            rec.notes.push(format!(
                "this connection went to {}; its flow runs against the scenario's target like the others",
                crate::redact::text(&this)
            ));
        }
        flows.push((pick, rec));
    }
    Ok((flows, target))
}

/// The scenario's text, once `bolide run` would take it.
fn checked_scenario(
    flows: &[(usize, Recorded)],
    conn: &har::Connection,
    target: &str,
    har_path: &Path,
    of: usize,
) -> Result<String, Stop> {
    let text = scenario(flows, conn, target, har_path, of, false);
    // What `bolide run` would say of it, with the payload's columns as variables: a scenario it
    // refuses is never written. Too large for a scenario (in bytes or in values) is the session's
    // size, said as such; anything else would be a bug of bolide's.
    let limit = crate::scenario::yaml::MAX_FILE_BYTES;
    let refused = if text.len() > limit {
        None
    } else {
        let check = scenario(flows, conn, target, har_path, of, true);
        crate::scenario::yaml::load_str(&check, "the recorded scenario", Path::new(".")).err()
    };
    let too_many =
        refused.as_ref().is_some_and(|e| e.problems.iter().any(|p| p.message.starts_with("this file holds more than")));
    if text.len() > limit || too_many {
        let steps: usize = flows.iter().map(|(_, r)| count_steps(&r.steps)).sum();
        let what = if text.len() > limit {
            format!("more than the {} MiB a scenario may hold", limit >> 20)
        } else {
            format!("more than the {} values a scenario may hold", crate::scenario::yaml::MAX_NODES)
        };
        return Err(Stop::usage(format!(
            "{}: the session makes a scenario of {steps} steps (its repeats already folded into loops), \
             {what}; nothing written. Record a shorter session, or one connection of several (--connection N)",
            har_path.display(),
        )));
    }
    if let Some(e) = refused {
        return Err(Stop::run(format!(
            "bolide record made a scenario bolide run refuses (a bug of bolide's; nothing written):\n{}",
            crate::redact::printable(&e.to_string())
        )));
    }
    Ok(text)
}

/// What was done, for stdout (stderr when the scenario goes to stdout): the connections, each
/// flow's substitutions and notes, and the payload columns the flows need.
fn summary(
    args: &RecordArgs,
    ddp: &Connections,
    picks: &[usize],
    flows: &[(usize, Recorded)],
    har_path: &Path,
) -> String {
    let mut said = String::new();
    if ddp.len() > 1 {
        said.push_str(&format!("bolide record: {} DDP connections in {}:\n", ddp.len(), har_path.display()));
        for (i, (c, m)) in ddp.iter().enumerate() {
            said.push_str(&format!("  connection {}: {} ({} messages)\n", i + 1, crate::redact::text(&c.url), m.len()));
        }
        said.push_str(if picks.len() > 1 {
            "  each became a flow of its own; a user runs one of them (weight 1 each: edit the weights to mix them)\n"
        } else {
            "  (--connection N records another, --connection all each as a flow of its own)\n"
        });
    }
    let mut payload: Vec<&str> = Vec::new();
    for (pick, rec) in flows {
        let (c, messages) = &ddp[pick - 1];
        said.push_str(&format!(
            "bolide record: connection {pick} of {} ({}, {}), {} DDP messages -> {} steps\n",
            ddp.len(),
            crate::redact::text(&c.url),
            har::transport(&c.url).name(),
            messages.len(),
            rec.steps.len()
        ));
        if rec.substitutions.is_empty() {
            said.push_str(if args.no_correlate {
                "Substitutions: none (--no-correlate)\n"
            } else {
                "Substitutions: none\n"
            });
        } else {
            said.push_str("Substitutions (review them):\n");
            for s in &rec.substitutions {
                said.push_str(&format!("  - {s}\n"));
            }
        }
        for n in &rec.notes {
            said.push_str(&format!("Note: {n}\n"));
        }
        if c.binary > 0 {
            said.push_str(&format!("Note: {} binary frames left out\n", c.binary));
        }
        for f in &rec.payload {
            if !payload.contains(&f.as_str()) {
                payload.push(f);
            }
        }
    }
    if !payload.is_empty() {
        said.push_str(&format!(
            "The flow needs secrets it does not write: write users.csv beside the scenario, one user a row, columns {} (a header row first)\n",
            payload.join(",")
        ));
    }
    said
}

/// The recording proxy: listens, forwards until Ctrl-C or `--duration`, writes the HAR when
/// asked, and hands back the WebSocket connections that passed (None: nothing passed, said).
fn listen_and_record(
    args: &RecordArgs,
    listen: &str,
    io: &mut Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<har::Har>, Stop> {
    let Some(to) = &args.to else {
        return Err(Stop::usage("--listen forwards to the app's server: give it with --to http://127.0.0.1:3000"));
    };
    let upstream = proxy::Upstream::parse(to).map_err(Stop::usage)?;
    let until = match &args.duration {
        None => None,
        Some(d) => match humantime::parse_duration(d) {
            Ok(d) => Some(std::time::Instant::now() + d),
            Err(e) => return Err(Stop::usage(format!("--duration {d}: {e} (a duration such as 60s or 5m)"))),
        },
    };
    if std::net::ToSocketAddrs::to_socket_addrs(listen).is_err() {
        return Err(Stop::usage(format!("--listen {listen}: not an address to listen on, such as 127.0.0.1:3100")));
    }
    // An address that cannot be bound (a port in use, say) is a run that could not start, as
    // for `bolide serve`: exit 3.
    let p = proxy::Proxy::bind(listen, upstream.clone()).map_err(|e| Stop::run(format!("cannot listen: {e}")))?;
    if !p.addr.ip().is_loopback() {
        let _ = writeln!(
            io.err,
            "warning: listening on {}: anyone who can reach it passes through to {} (a loopback address keeps it to this machine)",
            p.addr, upstream.authority
        );
    }
    let _ = writeln!(
        io.out,
        "bolide record: recording at http://{}/ -> http://{}; open the page there and use it, then Ctrl-C writes the scenario",
        p.addr, upstream.authority
    );
    let _ = io.out.flush();
    let addr = p.addr;
    let (doc, log) = p.run(|| cancel.is_cancelled(), until);
    for problem in &log.problems {
        let _ = writeln!(io.err, "warning: {problem}");
    }
    let text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    if let Some(path) = &args.har_out {
        crate::files::write_atomically(path, |w| w.write_all(&text))
            .map_err(|e| Stop::run(format!("cannot write {}: {e}", path.display())))?;
        let entries = doc["log"]["entries"].as_array().map_or(0, Vec::len);
        let _ = writeln!(io.out, "HAR: {} ({entries} requests, secrets masked)", path.display());
    }
    let conns = har::parse(&text).map_err(|e| Stop::usage(e.context("the proxy's own HAR")))?;
    if log.connections == 0 {
        let _ = writeln!(io.err, "bolide record: nothing passed through http://{addr}/; no scenario written");
        return Ok(None);
    }
    Ok(Some(conns))
}

/// A value in YAML's flow style: JSON, which YAML reads as it is.
fn flow_value(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A string as a YAML double-quoted scalar.
fn quoted(s: &str) -> String {
    flow_value(&Value::String(s.to_string()))
}

/// The scenario file (`target` from [`har::target`]): config (target, a short phase, the transport
/// and compression as recorded by `conn`, the payload for a login) and a flow for each recorded
/// connection (`flows`: its number in the HAR, of `of`, and its flow).
pub fn scenario(
    flows: &[(usize, Recorded)],
    conn: &har::Connection,
    target: &str,
    har_path: &Path,
    of: usize,
    payload_as_variables: bool,
) -> String {
    let mut out = String::new();
    let name = har_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let which = match flows {
        [(pick, _)] => format!("DDP connection {pick} of {of}"),
        _ => format!("{} DDP connections of {of}, a flow each", flows.len()),
    };
    out.push_str(&format!(
        "# Recorded by bolide record from {} ({which}). Review the substitutions it\n\
         # listed. The phase below (60 s, a user a second) is a start: --arrival-rate changes its rate\n\
         # and -d cuts it shorter on the command line; edit it for longer.\n",
        name.replace('\n', " ")
    ));
    out.push_str("config:\n");
    out.push_str(&format!("  target: {}\n", quoted(&crate::redact::text(target))));
    out.push_str("  phases:\n    - duration: 60\n      arrivalRate: 1\n");
    out.push_str("  ddp:\n");
    out.push_str(&format!("    transport: {}\n", har::transport(&conn.url).name()));
    if let Some(c) = conn.compression {
        out.push_str(&format!("    compression: {c}\n"));
    }
    let mut payload: Vec<&str> = Vec::new();
    for f in flows.iter().flat_map(|(_, r)| r.payload.iter()) {
        if !payload.contains(&f.as_str()) {
            payload.push(f);
        }
    }
    if !payload.is_empty() && payload_as_variables {
        // For checking the scenario without its payload file: each column a variable.
        out.push_str("  variables:\n");
        for c in &payload {
            out.push_str(&format!("    {c}: [\"x\"]\n"));
        }
    } else if !payload.is_empty() {
        out.push_str(&format!(
            "  payload:\n    path: users.csv\n    fields: [{}]\n    skipHeader: true\n",
            payload.join(", ")
        ));
    }
    out.push_str("scenarios:\n");
    for (pick, rec) in flows {
        if flows.len() == 1 {
            out.push_str("  - name: recorded\n    flow:\n");
        } else {
            out.push_str(&format!("  - name: \"connection {pick}\"\n    weight: 1\n    flow:\n"));
        }
        steps(&rec.steps, "      ", &mut out);
    }
    out
}

/// How many steps a flow has, loops' steps counted once.
fn count_steps(steps: &[Step]) -> usize {
    steps
        .iter()
        .map(|s| match s {
            Step::Loop { steps, .. } => 1 + count_steps(steps),
            _ => 1,
        })
        .sum()
}

/// A flow's steps as the scenario's lines, each item at `indent`.
fn steps(list: &[Step], indent: &str, out: &mut String) {
    for s in list {
        // Past what a scenario may hold, the rest is not written: the scenario is refused.
        if out.len() > crate::scenario::yaml::MAX_FILE_BYTES {
            return;
        }
        let line = match s {
            Step::Loop { count, steps: body } => {
                out.push_str(&format!("{indent}- loop:\n"));
                steps(body, &format!("{indent}    "), out);
                out.push_str(&format!("{indent}  count: {count}\n"));
                continue;
            }
            Step::Connect => "connect".to_string(),
            Step::Disconnect => "disconnect".to_string(),
            Step::Think(d) => format!("think: {}ms", d.as_millis()),
            Step::Set { var, value } => format!("set: {{ {var}: {} }}", quoted(value)),
            Step::Subscribe { name, params } => {
                format!("subscribe: {{ name: {}, params: {params} }}", quoted(name))
            }
            Step::Unsubscribe(name) => format!("unsubscribe: {}", quoted(name)),
            Step::Call { method, params, capture, .. } => {
                let capture = capture.as_ref().map(|c| format!(", capture: {c}")).unwrap_or_default();
                format!("call: {{ method: {}, params: {params}{capture} }}", quoted(method))
            }
            Step::LoginPassword => "login: { user: \"{{ username }}\", password: \"{{ password }}\" }".to_string(),
            Step::LoginResume => "login: { resume: \"{{ loginToken }}\" }".to_string(),
            Step::WaitFor { collection, id, gone } => format!(
                "waitFor: {{ collection: {}, where: {{ _id: {} }}{} }}",
                quoted(collection),
                flow_value(id),
                if *gone { ", until: disappears" } else { "" }
            ),
            Step::Http { method, url, body } => {
                let body = match body.as_deref() {
                    None => String::new(),
                    Some(flow::HttpBody::Json(v)) => format!(", json: {}", flow_value(v)),
                    Some(flow::HttpBody::Text(t)) => format!(", body: {}", quoted(t)),
                };
                format!("{}: {{ url: {}{body} }}", method.to_ascii_lowercase(), quoted(url))
            }
        };
        out.push_str(&format!("{indent}- {line}\n"));
    }
}

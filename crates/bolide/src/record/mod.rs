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
    let think_max = match humantime::parse_duration(&args.think_max) {
        // A think past what a scenario may hold would make a scenario `bolide run` refuses.
        Ok(d) if d > crate::scenario::MAX_DURATION => {
            let _ =
                writeln!(io.err, "error: --think-max {}: at most 30 days (a scenario's longest pause)", args.think_max);
            return exit::USAGE;
        }
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(io.err, "error: --think-max {}: {e} (a duration such as 10s or 500ms)", args.think_max);
            return exit::USAGE;
        }
    };
    if !(args.think_scale.is_finite() && args.think_scale >= 0.0) {
        let _ =
            writeln!(io.err, "error: --think-scale {}: a factor of 0 or more (0 drops the thinks)", args.think_scale);
        return exit::USAGE;
    }
    let output = args.output.clone().unwrap_or_else(|| "-".into());
    let to_stdout = crate::files::is_stdout(&output);
    for path in std::iter::once(&output).chain(args.har_out.as_ref()) {
        if let Err(e) = crate::files::check_writable(path) {
            let _ = writeln!(io.err, "error: {e}");
            return exit::USAGE;
        }
    }
    let (recorded, har_path) = if let Some(listen) = &args.listen {
        match listen_and_record(args, listen, io, cancel) {
            Ok(Some(conns)) => (conns, args.har_out.clone().unwrap_or_else(|| "the proxy".into())),
            Ok(None) => return exit::OK,
            Err(code) => return code,
        }
    } else {
        let Some(har_path) = &args.har else {
            let _ = writeln!(
                io.err,
                "error: give the HAR file to turn into a scenario (bolide record session.har -o s.yml), or record \
                 through the proxy (bolide record --listen 127.0.0.1:3100 --to http://127.0.0.1:3000 -o s.yml)"
            );
            return exit::USAGE;
        };
        match har::read(har_path) {
            Ok(c) => (c, har_path.clone()),
            Err(e) => {
                let _ = writeln!(io.err, "error: {e}");
                return exit::USAGE;
            }
        }
    };
    let har_path = &har_path;
    let total = recorded.connections.len();
    // The DDP connections, in the HAR's order (their frames become messages as they go).
    let mut other = 0;
    let ddp: Vec<(har::Connection, Vec<har::Message>)> = recorded
        .connections
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
        let _ = writeln!(io.err, "error: {}: {why}", har_path.display());
        return exit::USAGE;
    }
    // Which connections: one (the first by default), or all of them as flows of their own.
    let picks: Vec<usize> = match args.connection.as_deref().map(str::trim) {
        None => vec![1],
        Some("all") => (1..=ddp.len()).collect(),
        Some(n) => match n.parse::<usize>() {
            Ok(pick) if pick >= 1 && pick <= ddp.len() => vec![pick],
            _ => {
                let _ = writeln!(
                    io.err,
                    "error: --connection {n}: the HAR has {} DDP connections (1 to {}, or all)",
                    ddp.len(),
                    ddp.len()
                );
                return exit::USAGE;
            }
        },
    };
    let opts = Options { correlate: !args.no_correlate, think_scale: args.think_scale, think_max };
    let choice = flow::HttpChoice { ddp_only: args.ddp_only, keep_static: args.keep_static };
    // The page's plain requests of a connection's time: after the one before it ended, up to its end.
    let end = |i: usize| ddp[i].0.last_s.unwrap_or(f64::INFINITY);
    let mut flows: Vec<(usize, Recorded)> = Vec::new();
    let mut target = String::new();
    for &pick in &picks {
        let conn = &ddp[pick - 1].0;
        let this = match har::target(&conn.url) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(
                    io.err,
                    "error: {}: connection {pick}: {}",
                    har_path.display(),
                    crate::redact::text(&e.to_string())
                );
                return exit::USAGE;
            }
        };
        let from = if pick >= 2 { end(pick - 2) } else { f64::NEG_INFINITY };
        let mut http_notes = Vec::new();
        let http = flow::pick_requests(&recorded.requests, &this, from, end(pick - 1), choice, &mut http_notes);
        let mut rec = flow::build(&ddp[pick - 1].1, &http, &opts);
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
    let conn = &ddp[picks[0] - 1].0;
    let text = scenario(&flows, conn, &target, har_path, ddp.len(), false);
    // What `bolide run` would say of it, with the payload's columns as variables: a scenario it
    // refuses is never written. Too large for a scenario (in bytes or in values) is the session's
    // size, said as such; anything else would be a bug of bolide's.
    let limit = crate::scenario::yaml::MAX_FILE_BYTES;
    let refused = if text.len() > limit {
        None
    } else {
        let check = scenario(&flows, conn, &target, har_path, ddp.len(), true);
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
        let _ = writeln!(
            io.err,
            "error: {}: the session makes a scenario of {steps} steps (its repeats already folded into loops), \
             {what}; nothing written. Record a shorter session, or one connection of several (--connection N)",
            har_path.display(),
        );
        return exit::USAGE;
    }
    if let Some(e) = refused {
        let _ = writeln!(
            io.err,
            "error: bolide record made a scenario bolide run refuses (a bug of bolide's; nothing written):\n{}",
            crate::redact::printable(&e.to_string())
        );
        return exit::RUN;
    }
    // What was done, on stderr when the scenario goes to stdout.
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
    for (pick, rec) in &flows {
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
    if to_stdout {
        let _ = write!(io.out, "{text}");
        let _ = write!(io.err, "{said}");
        return exit::OK;
    }
    if let Err(e) = crate::files::write_atomically(&output, |w| w.write_all(text.as_bytes())) {
        let _ = writeln!(io.err, "error: cannot write {}: {e}", output.display());
        return exit::RUN;
    }
    let _ = write!(io.out, "{said}");
    let _ = writeln!(
        io.out,
        "Scenario: {} (run it: bolide run {} --arrival-rate 5 -d 30s)",
        output.display(),
        output.display()
    );
    exit::OK
}

/// The recording proxy: listens, forwards until Ctrl-C or `--duration`, writes the HAR when
/// asked, and hands back the WebSocket connections that passed (None: nothing passed, said).
fn listen_and_record(
    args: &RecordArgs,
    listen: &str,
    io: &mut Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<har::Har>, i32> {
    let usage = |io: &mut Io, text: String| {
        let _ = writeln!(io.err, "error: {text}");
        exit::USAGE
    };
    let Some(to) = &args.to else {
        return Err(usage(io, "--listen forwards to the app's server: give it with --to http://127.0.0.1:3000".into()));
    };
    let upstream = proxy::Upstream::parse(to).map_err(|e| usage(io, e.to_string()))?;
    let until = match &args.duration {
        None => None,
        Some(d) => match humantime::parse_duration(d) {
            Ok(d) => Some(std::time::Instant::now() + d),
            Err(e) => return Err(usage(io, format!("--duration {d}: {e} (a duration such as 60s or 5m)"))),
        },
    };
    if std::net::ToSocketAddrs::to_socket_addrs(listen).is_err() {
        return Err(usage(io, format!("--listen {listen}: not an address to listen on, such as 127.0.0.1:3100")));
    }
    // An address that cannot be bound (a port in use, say) is a run that could not start, as
    // for `bolide serve`: exit 3.
    let p = proxy::Proxy::bind(listen, upstream.clone()).map_err(|e| {
        let _ = writeln!(io.err, "error: cannot listen: {e}");
        exit::RUN
    })?;
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
        if let Err(e) = crate::files::write_atomically(path, |w| w.write_all(&text)) {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", path.display());
            return Err(exit::RUN);
        }
        let entries = doc["log"]["entries"].as_array().map_or(0, Vec::len);
        let _ = writeln!(io.out, "HAR: {} ({entries} requests, secrets masked)", path.display());
    }
    let conns = har::parse(&text).map_err(|e| usage(io, format!("the proxy's own HAR: {e}")))?;
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

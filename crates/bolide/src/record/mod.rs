//! `bolide record`: a real browser session, saved as a HAR (Chrome DevTools, Playwright's
//! `recordHar`, mitmproxy), turned into a runnable DDP scenario in bolide's YAML: the DDP
//! connection's frames read (`har`), its messages made steps with thinks and correlated values
//! (`flow`), the file written here with the substitutions listed for review.

pub mod flow;
pub mod har;

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::cli::RecordArgs;
use crate::console::{exit, Io};
use flow::{Options, Recorded, Step};

/// `bolide record FILE.har`.
pub fn record(args: &RecordArgs, io: &mut Io) -> i32 {
    if args.listen.is_some() {
        let _ = writeln!(
            io.err,
            "error: --listen (the recording proxy) is not built yet; record a HAR instead: Chrome DevTools \
             (Network, Export HAR) or Playwright (recordHar with content: \"embed\")"
        );
        return exit::USAGE;
    }
    let Some(har_path) = &args.har else {
        let _ =
            writeln!(io.err, "error: give the HAR file to turn into a scenario: bolide record session.har -o s.yml");
        return exit::USAGE;
    };
    let think_max = match humantime::parse_duration(&args.think_max) {
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
    if !to_stdout {
        if let Err(e) = crate::files::check_writable(&output) {
            let _ = writeln!(io.err, "error: {e}");
            return exit::USAGE;
        }
    }
    let conns = match har::read(har_path) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return exit::USAGE;
        }
    };
    // The DDP connections, in the HAR's order.
    let mut other = 0;
    let ddp: Vec<(&har::Connection, Vec<har::Message>)> =
        conns.iter().map(|c| (c, har::messages(c, &mut other))).filter(|(_, m)| har::is_ddp(m)).collect();
    if ddp.is_empty() {
        let why = if conns.is_empty() {
            "this HAR has no WebSocket messages: Chrome saves them only when DevTools was open during the \
             session, Playwright only with recordHar's content: \"embed\""
                .to_string()
        } else {
            format!(
                "none of its {} WebSocket connections speaks DDP (no connect message from the browser)",
                conns.len()
            )
        };
        let _ = writeln!(io.err, "error: {}: {why}", har_path.display());
        return exit::USAGE;
    }
    let pick = args.connection.unwrap_or(1);
    if pick == 0 || pick > ddp.len() {
        let _ = writeln!(
            io.err,
            "error: --connection {pick}: the HAR has {} DDP connections (1 to {})",
            ddp.len(),
            ddp.len()
        );
        return exit::USAGE;
    }
    let (conn, messages) = &ddp[pick - 1];
    let target = match har::target(&conn.url) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(io.err, "error: {}: connection {pick}: {}", har_path.display(), crate::redact::text(&e));
            return exit::USAGE;
        }
    };
    let opts = Options { correlate: !args.no_correlate, think_scale: args.think_scale, think_max };
    let rec = flow::build(messages, &opts);
    let text = scenario(&rec, conn, &target, har_path, pick, ddp.len());
    // What was done, on stderr when the scenario goes to stdout.
    let mut said = String::new();
    said.push_str(&format!(
        "bolide record: connection {pick} of {} ({}, {}), {} DDP messages -> {} steps\n",
        ddp.len(),
        crate::redact::text(&conn.url),
        har::transport(&conn.url).name(),
        messages.len(),
        rec.steps.len()
    ));
    if ddp.len() > 1 {
        for (i, (c, m)) in ddp.iter().enumerate() {
            said.push_str(&format!("  connection {}: {} ({} messages)\n", i + 1, crate::redact::text(&c.url), m.len()));
        }
        said.push_str("  (--connection N records another)\n");
    }
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
    if conn.binary > 0 {
        said.push_str(&format!("Note: {} binary frames left out\n", conn.binary));
    }
    if !rec.payload.is_empty() {
        said.push_str(&format!(
            "The flow logs in: write users.csv beside the scenario, one user a row, columns {} (a header row first)\n",
            rec.payload.join(",")
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

/// A value in YAML's flow style: JSON, which YAML reads as it is.
fn flow_value(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// A string as a YAML double-quoted scalar.
fn quoted(s: &str) -> String {
    flow_value(&Value::String(s.to_string()))
}

/// The scenario file (`target` from [`har::target`]): config (target, a short phase, the transport and compression as
/// recorded, the payload for a login) and one flow.
pub fn scenario(
    rec: &Recorded,
    conn: &har::Connection,
    target: &str,
    har_path: &Path,
    pick: usize,
    of: usize,
) -> String {
    let mut out = String::new();
    let name = har_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.push_str(&format!(
        "# Recorded by bolide record from {} (DDP connection {pick} of {of}). Review the substitutions it\n\
         # listed; the phase below is a start: --arrival-rate and -d change it on the command line.\n",
        name.replace('\n', " ")
    ));
    out.push_str("config:\n");
    out.push_str(&format!("  target: {}\n", quoted(&crate::redact::text(target))));
    out.push_str("  phases:\n    - duration: 10\n      arrivalRate: 1\n");
    out.push_str("  ddp:\n");
    out.push_str(&format!("    transport: {}\n", har::transport(&conn.url).name()));
    if let Some(c) = conn.compression {
        out.push_str(&format!("    compression: {c}\n"));
    }
    if !rec.payload.is_empty() {
        let fields: Vec<String> = rec.payload.iter().map(|f| f.to_string()).collect();
        out.push_str(&format!(
            "  payload:\n    path: users.csv\n    fields: [{}]\n    skipHeader: true\n",
            fields.join(", ")
        ));
    }
    out.push_str("scenarios:\n  - name: recorded\n    flow:\n");
    for s in &rec.steps {
        let line = match s {
            Step::Connect => "connect".to_string(),
            Step::Disconnect => "disconnect".to_string(),
            Step::Think(d) => format!("think: {}ms", d.as_millis()),
            Step::Subscribe { name, params } => {
                format!("subscribe: {{ name: {}, params: {} }}", quoted(name), flow_value(params))
            }
            Step::Unsubscribe(name) => format!("unsubscribe: {}", quoted(name)),
            Step::Call { method, params, capture } => {
                let capture = capture.as_ref().map(|c| format!(", capture: {c}")).unwrap_or_default();
                format!("call: {{ method: {}, params: {}{capture} }}", quoted(method), flow_value(params))
            }
            Step::LoginPassword => "login: { user: \"{{ username }}\", password: \"{{ password }}\" }".to_string(),
            Step::LoginResume => "login: { resume: \"{{ loginToken }}\" }".to_string(),
        };
        out.push_str(&format!("      - {line}\n"));
    }
    out
}

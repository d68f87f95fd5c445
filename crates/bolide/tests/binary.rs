//! The real `bolide` binary: exit codes, Ctrl-C (SIGINT) handling, output hygiene.

#[path = "common/schema.rs"]
mod schema;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bolide() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bolide"))
}

#[test]
fn help_version_and_usage_errors() {
    let help = bolide().arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("bolide demo"));
    let version = bolide().arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), concat!("bolide ", env!("CARGO_PKG_VERSION")));
    let bad = bolide().args(["http", "-c", "0", "--timeout", "soon", "http://127.0.0.1:1/"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("-c/--connections") && err.contains("--timeout"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    assert!(bad.stdout.is_empty(), "errors go to stderr only");
}

#[test]
fn serve_runs_until_sigint_and_stops_cleanly() {
    use std::io::{BufRead, BufReader};
    let mut child = bolide()
        .args(["serve", "--port", "0", "--reactivity", "poll"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.starts_with("bolide reference server on http://127.0.0.1:"), "{first}");
    let addr = first.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    // It answers, then stops on SIGINT.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut s, b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let begin = Instant::now();
    let status = child.wait().unwrap();
    assert!(begin.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> = out.lines().map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.starts_with("stopped after 1 HTTP requests")), "{rest:?}");
}

/// Starts `bolide http` for a minute against a slow endpoint, sends `signals` (with `gap_ms`
/// between them) once the server has answered, and returns (exit code, stdout, stderr, the JSON document text).
fn stop_with(signals: &[&str], gap_ms: u64) -> (Option<i32>, String, String, String) {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let child = bolide()
        .args(["http", "-d", "60s", "-c", "2", "-t", "1", "--json", json.to_str().unwrap()])
        .arg(format!("{}/delay/2", server.base_url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the load is under way (a response in, so the run has something to report), whenever a
    // busy machine gets it there.
    let began = Instant::now();
    while server.requests() < 3 && began.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let begin = Instant::now();
    for (i, sig) in signals.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(gap_ms));
        }
        assert!(Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap().success());
    }
    let out = child.wait_with_output().unwrap();
    assert!(begin.elapsed() < Duration::from_secs(10));
    let text = std::fs::read_to_string(&json).unwrap_or_default();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        text,
    )
}

fn valid_http_document(text: &str) {
    let value: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let validator = schema::validator("result.schema.json");
    let errors: Vec<String> = validator.iter_errors(&value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(value["interrupted"], true);
}

#[test]
fn sigint_sigterm_sighup_and_a_doubled_sigint_stop_the_run_and_keep_the_report() {
    // Each row: the signals sent, the gap between them.
    // Each row: the signals sent, the gap between them, the exit code (128 + the first signal).
    let rows: [(&[&str], u64, i32); 4] = [
        // Ctrl-C.
        (&["INT"], 0, 130),
        // What timeout, CI cancellation and docker stop send.
        (&["TERM"], 0, 143),
        // A closed terminal.
        (&["HUP"], 0, 129),
        // timeout -s INT signals the child and then its process group: one stop, delivered twice.
        (&["INT", "INT"], 10, 130),
    ];
    for (signals, gap, exit) in rows {
        let (code, stdout, stderr, json) = stop_with(signals, gap);
        assert_eq!(code, Some(exit), "{signals:?}: {stderr}");
        assert!(stdout.contains("interrupted") && stdout.contains("Latency"), "{signals:?}: {stdout}");
        valid_http_document(&json);
        let doc = bolide::stats::result::ResultDoc::from_json(&json).unwrap();
        assert!(doc.summary.responses > 0, "{signals:?}");
        // The live line is for terminals only: a pipe gets none of it.
        assert!(!stderr.contains('\r'), "{signals:?}");
    }
}

#[test]
fn json_dash_writes_the_document_to_stdout_and_the_summary_to_stderr() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let out = bolide()
        .args(["http", "-n", "20", "-c", "2", "--json", "-"])
        .arg(format!("{}/ok", server.base_url()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc = bolide::stats::result::ResultDoc::from_json(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(doc.summary.responses, 20);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Latency"), "the summary went to stderr");
}

#[test]
fn json_into_a_fifo_reaches_its_reader() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("results");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo only creates a file system node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = bolide()
        .args(["http", "-n", "10", "-c", "1", "--json", fifo.to_str().unwrap()])
        .arg(format!("{}/ok", server.base_url()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = bolide::stats::result::ResultDoc::from_json(&reader.join().unwrap()).unwrap();
    assert_eq!(doc.summary.responses, 10);
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
}

#[test]
fn a_spawned_server_that_is_not_execed_gets_to_finish_its_shutdown() {
    // A server behind `cd ... &&` (so sh stays its parent) that needs a second to shut down and
    // says when it is done.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("shutdown.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let script = dir.path().join("server.py");
    std::fs::write(
        &script,
        format!(
            r#"
import http.server, signal, sys, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", {port}), H)
def term(*_):
    time.sleep(1)
    open({log:?}, "w").write("clean exit\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
srv.serve_forever()
"#,
            log = log.to_str().unwrap()
        ),
    )
    .unwrap();
    let spawn = format!("cd {} && python3 server.py", dir.path().display());
    let out = bolide()
        .args(["http", "-n", "5", "-c", "1", "--spawn", &spawn, "--ready-url"])
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), "clean exit\n");
}

/// Runs bolide with a terminal for stdout and stderr (util-linux `script`), `NO_COLOR` as given;
/// returns what the terminal received.
fn on_a_terminal(args: &[String], no_color: bool) -> String {
    let exe = env!("CARGO_BIN_EXE_bolide");
    let line = std::iter::once(exe.to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"]).env_remove("NO_COLOR");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().expect("util-linux script runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn on_a_terminal_progress_is_drawn_and_never_counts_past_the_plan() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let args: Vec<String> = ["http", "-d", "3s", "-c", "2", "-t", "1", &url].iter().map(|s| s.to_string()).collect();
    let shown = on_a_terminal(&args, true);
    // A bar with the clock, redrawn in place, and cleared before the summary.
    assert!(shown.contains("[========") && shown.contains("s/3s  "), "{shown}");
    for past in ["4s/3s", "5s/3s"] {
        assert!(!shown.contains(past), "{shown}");
    }
    assert!(shown.contains("Latency"), "{shown}");
    // NO_COLOR turns colours off, not the progress.
    assert!(!shown.contains("\x1b[31m") && !shown.contains("\x1b[33m"), "{shown}");

    // A bench says which run it is and how long is left.
    let args: Vec<String> =
        ["bench", "http", "--runs", "2", "--cooldown", "1s", "-d", "2s", "-c", "2", "-t", "1", "--out"]
            .iter()
            .map(|s| s.to_string())
            .chain([tempfile::tempdir().unwrap().keep().join("b").display().to_string(), url])
            .collect();
    let shown = on_a_terminal(&args, true);
    assert!(shown.contains("run 1/2, ETA 5s"), "{shown}");
    assert!(shown.contains("run 2/2, ETA "), "{shown}");
}

#[test]
fn on_a_terminal_colours_mark_errors_unless_no_color() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let args: Vec<String> = ["http", "-n", "50", "-c", "2", &format!("{}/no-such-page", server.base_url())]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // Every request failed (status 404): the first line and the errors' line are red.
    let shown = on_a_terminal(&args, false);
    assert!(shown.contains("\x1b[31m  Errors        status 50\x1b[0m"), "{shown}");
    assert!(shown.contains("50 failed (status 404: 50)\x1b[0m"), "{shown}");
    let plain = on_a_terminal(&args, true);
    assert!(plain.contains("50 failed (status 404: 50)") && !plain.contains("\x1b[31m"), "{plain}");
    // Not a terminal: no escape code at all.
    let out = bolide().args(&args).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains('\x1b'));
    assert!(!String::from_utf8_lossy(&out.stderr).contains('\x1b'));
}

#[test]
fn completion_scripts_complete_commands_and_flags() {
    let script = |shell: &str| {
        let o = bolide().args(["completions", shell]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // bash: the script, sourced, completes a command and a flag.
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("bolide.bash");
    std::fs::write(&bash, script("bash")).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(bolide ht); COMP_CWORD=1; _bolide bolide ht bolide; echo \"${{COMPREPLY[@]}}\"; \
         COMP_WORDS=(bolide http --thr); COMP_CWORD=2; _bolide bolide --thr http; echo \"${{COMPREPLY[@]}}\"",
        bash.display()
    );
    let o = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let lines = String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect::<Vec<_>>();
    assert_eq!(lines, ["http", "--threads --threshold"], "{}", String::from_utf8_lossy(&o.stderr));
    // zsh, when installed (CI installs it): the script is valid zsh.
    let zsh = script("zsh");
    assert!(zsh.starts_with("#compdef bolide") && zsh.contains("--threshold"), "{zsh:.200}");
    if Command::new("zsh").arg("--version").output().is_ok() {
        let path = dir.path().join("_bolide");
        std::fs::write(&path, &zsh).unwrap();
        let o = Command::new("zsh").args(["-n", path.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert!(script("fish").contains("complete -c bolide -n \"__fish_bolide_using_subcommand http\" -l threshold"));
    assert!(script("powershell").contains("Register-ArgumentCompleter -Native -CommandName 'bolide'"));
    let bad = bolide().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn manual_pages_render_with_every_command_and_flag() {
    let page = bolide().arg("man").output().unwrap();
    assert_eq!(page.status.code(), Some(0));
    let text = String::from_utf8(page.stdout).unwrap();
    assert!(text.contains(".TH bolide 1") && text.contains("completions"), "{text:.300}");
    let dir = tempfile::tempdir().unwrap();
    let o = bolide().args(["man", "--dir", dir.path().to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for want in ["bolide.1", "bolide-http.1", "bolide-run.1", "bolide-compare.1", "bolide-merge.1"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let http = std::fs::read_to_string(dir.path().join("bolide-http.1")).unwrap();
    assert!(http.contains(".TH bolide-http 1") && http.contains("threshold"), "{http:.300}");
    // Every page another page refers to (`bolide-bench-http(1)`) is written.
    for n in &names {
        let page = std::fs::read_to_string(dir.path().join(n)).unwrap().replace("\\-", "-");
        for (at, _) in page.match_indices("bolide-") {
            let name: String = page[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if page[at + name.len()..].starts_with("(1)") {
                assert!(names.contains(&format!("{name}.1")), "{n} refers to {name}(1), which is not written");
            }
        }
    }
    assert!(names.iter().any(|n| n == "bolide-bench-http.1") && names.iter().any(|n| n == "bolide-capacity-run.1"));
    // Examples are set as written (no fill): groff neither joins nor wraps a command line.
    assert!(http.contains("Examples:\n.nf\n  bolide http \\-c 100"), "{http}");
    assert_eq!(http.matches("\n.nf\n").count(), http.matches("\n.fi\n").count());
    // groff, when installed, reads every page without a warning.
    if Command::new("groff").arg("--version").output().is_ok() {
        for n in &names {
            let o = Command::new("groff").args(["-z", "-ww", "-man"]).arg(dir.path().join(n)).output().unwrap();
            assert!(o.status.success() && o.stderr.is_empty(), "{n}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

#[test]
fn the_release_script_names_every_missing_prerequisite_before_building() {
    // A PATH with the shell's basic tools only: no cargo, npm, musl-gcc or cross compiler.
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for tool in ["bash", "sed", "head", "dirname", "mkdir", "grep"] {
        let found = ["/usr/bin", "/bin"].iter().map(|d| std::path::Path::new(d).join(tool)).find(|p| p.exists());
        std::os::unix::fs::symlink(found.unwrap(), bin.join(tool)).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../release/build.sh");
    let out = Command::new(bin.join("bash"))
        .arg(script)
        .args(["--out", tmp.path().join("dist").to_str().unwrap()])
        .env("PATH", &bin)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    for says in [
        "missing before anything is built",
        "npm (Debian: apt-get install npm)",
        "cargo (a Rust toolchain: rustup)",
        "musl-gcc (Debian: apt-get install musl-tools)",
        "aarch64-linux-gnu-gcc (Debian: apt-get install gcc-aarch64-linux-gnu)",
    ] {
        assert!(err.contains(says), "{says}: {err}");
    }
    assert_eq!(err.matches("cargo (").count(), 1, "each named once: {err}");
    assert!(!tmp.path().join("dist/npm").exists(), "nothing was built");
}

/// A reader that stops early (`bolide completions zsh | head -3`) ends the command quietly: exit
/// 0, no panic, no message.
#[test]
fn a_closed_pipe_ends_the_completions_quietly() {
    use std::io::Read;
    let mut child =
        bolide().args(["completions", "zsh"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {err}", o.status);
    assert!(err.is_empty(), "{err}");
}

/// `-q` keeps the summary to itself, not the reason for exit code 1: a broken threshold is said
/// on stderr.
#[test]
fn quiet_still_says_which_threshold_broke() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/status/500", server.base_url());
    let o = bolide().args(["http", "-q", "-n", "20", "--threshold", "error_rate<1%", &url]).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("error_rate<1%") && err.contains("BROKEN"), "{err}");
}

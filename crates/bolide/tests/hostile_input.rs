//! Hostile and absurd input, met where a user meets it: through the binary, with a deadline, so
//! that a panic, a hang or a secret on the screen fails the test. Each case ends as a clear
//! message with exit code 2 (or a run that counts what went wrong).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the binary did: exit code (None: killed at the deadline), stdout, stderr.
struct Ran {
    code: Option<i32>,
    out: String,
    err: String,
}

/// Runs the binary with `args` (through `sh -c 'ulimit ...; exec bolide ...'` when `ulimit` is
/// given), killing it after `deadline`.
fn run(args: &[&str], ulimit: Option<&str>, deadline: Duration) -> Ran {
    let bin = env!("CARGO_BIN_EXE_bolide");
    let mut cmd = match ulimit {
        Some(u) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("ulimit {u} && exec \"$0\" \"$@\"")).arg(bin).args(args);
            c
        }
        None => {
            let mut c = Command::new(bin);
            c.args(args);
            c
        }
    };
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let ran = Ran {
        code,
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!ran.err.contains("panicked") && !ran.err.contains("RUST_BACKTRACE"), "{args:?}: {}", ran.err);
    ran
}

fn scenario(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
    path.to_str().unwrap().to_string()
}

const HEAD: &str = "config:\n  target: http://127.0.0.1:9\n  phases:\n";

#[test]
fn out_of_range_numbers_in_scenario_files_are_refused_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    // Each row: the file's phases and flow, what the message says (after file:line:column).
    let rows = [
        (
            "    - {duration: 1, arrivalCount: 1}\nscenarios:\n  - flow:\n      - think: 1e20\n",
            "7:16: think is out of range: a duration must be between 0 and 30 days",
        ),
        (
            "    - {duration: 1, arrivalCount: 1}\nscenarios:\n  - flow:\n      - call: {method: m, timeout: 1e20}\n",
            "7:36: timeout is out of range",
        ),
        (
            "    - {duration: 1, arrivalCount: 1}\nscenarios:\n  - flow:\n      - think: {min: 1, max: 999999h}\n",
            "7:30: think max is out of range",
        ),
        ("    - pause: 1e20\nscenarios:\n  - flow: [connect]\n", ":4:14: pause is out of range"),
        (
            "    - {duration: 1, arrivalRate: 1e308}\nscenarios:\n  - flow: [connect]\n",
            ":4:34: arrivalRate must be at least one a day (0.00001157 per second) and at most 1000000 per second, not 1e308",
        ),
        ("    - {duration: 1, arrivalRate: 1, rampTo: .inf}\nscenarios:\n  - flow: [connect]\n", "rampTo must be"),
        ("    - {duration: 1, arrivalCount: 99999999999999}\nscenarios:\n  - flow: [connect]\n", "arrivalCount must be at most"),
        ("    - {duration: -5, arrivalCount: 1}\nscenarios:\n  - flow: [connect]\n", "duration is out of range"),
        (
            "    - {duration: 20d, arrivalCount: 1}\n    - {duration: 20d, arrivalCount: 1}\nscenarios:\n  - flow: [connect]\n",
            ":4:5: the phases last 40.0 days in all; a run must last between 0 and 30 days",
        ),
    ];
    for (i, (body, want)) in rows.iter().enumerate() {
        let path = scenario(&dir, &format!("s{i}.yml"), &format!("{HEAD}{body}"));
        let r = run(&["run", &path], None, Duration::from_secs(20));
        assert_eq!(r.code, Some(2), "row {i}: {}", r.err);
        assert!(r.err.contains(want), "row {i}: want {want:?} in\n{}", r.err);
    }
}

#[test]
fn out_of_range_flags_are_refused() {
    let url = "http://127.0.0.1:9/";
    // Each row: arguments, what the message says.
    let rows: [(&[&str], &str); 11] = [
        (&["http", "-d", "1e20", url], "-d/--duration \"1e20\" is out of range"),
        (&["http", "--timeout", "9999999999999999999999s", url], "--timeout"),
        (
            &["http", "--rps", "1e308", url],
            "--rps must be at least one a day (0.00001157 per second) and at most 1000000 per second, not 1e308",
        ),
        (&["http", "--rps", "NaN", url], "--rps must be at least one a day"),
        // The second probe: a rate this low overflowed the pacer's gap in a worker (a panic, then
        // "1 responses, 0 errors" and exit 0). Refused before anything runs.
        (
            &["http", "--rps", "1e-300", url],
            "--rps must be at least one a day (0.00001157 per second) and at most 1000000 per second, not 1e-300",
        ),
        (&["http", "--rps", "0.00001", url], "not 0.00001"),
        (
            &["run", "tasks-reactive", "--target", url, "--arrival-rate", "1e-300"],
            "--arrival-rate must be at least one a day",
        ),
        (&["run", "tasks-reactive", "--target", url, "--arrival-rate", "1e308"], "--arrival-rate must be"),
        (&["run", "tasks-reactive", "--target", url, "--think", "1e20"], "--think \"1e20\" is out of range"),
        (&["http", "--monitor-interval", "1e30", url], "--monitor-interval"),
        // A body without end is refused after 64 MiB, not read until memory runs out.
        (&["http", "--body-file", "/dev/zero", url], "--body-file /dev/zero: larger than 64 MiB"),
    ];
    for (args, want) in rows {
        let r = run(args, None, Duration::from_secs(20));
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.err);
        assert!(r.err.contains(want), "{args:?}: want {want:?} in\n{}", r.err);
    }
}

#[test]
fn yaml_bombs_duplicate_keys_and_several_documents_are_refused_with_a_location() {
    let dir = tempfile::tempdir().unwrap();
    // Nine levels of ten aliases each: a billion values once expanded.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
    }
    let deep = format!("config: {}{}\n", "[".repeat(200), "]".repeat(200));
    // Each row: file text, what the message says.
    let rows = [
        (bomb, "aliases expand this file beyond 200000 values"),
        (
            format!("{HEAD}    - {{duration: 1, arrivalCount: 1}}\n  target: http://127.0.0.1:8\nscenarios:\n  - flow: [connect]\n"),
            ":5:3: duplicate key \"target\" (first at line 2, column 3)",
        ),
        (
            format!("{HEAD}    - {{duration: 1, arrivalCount: 1}}\nscenarios:\n  - flow: [connect]\n---\nconfig: {{}}\n"),
            ":7:1: a second YAML document begins here",
        ),
        (deep, "nest deeper than 64 levels"),
    ];
    for (i, (text, want)) in rows.iter().enumerate() {
        let path = scenario(&dir, &format!("y{i}.yml"), text);
        let started = Instant::now();
        let r = run(&["run", &path], None, Duration::from_secs(20));
        assert_eq!(r.code, Some(2), "row {i}: {}", r.err);
        assert!(r.err.contains(want), "row {i}: want {want:?} in\n{}", r.err);
        assert!(r.err.starts_with(&path), "row {i}: the message names the file: {}", r.err);
        assert!(started.elapsed() < Duration::from_secs(20), "row {i}");
    }
    // A file far over the size limit is refused without being read whole.
    let big = scenario(&dir, "big.yml", &"# padding\n".repeat(600_000));
    let r = run(&["run", &big], None, Duration::from_secs(20));
    assert_eq!(r.code, Some(2), "{}", r.err);
    assert!(r.err.contains("larger than 4194304 bytes"), "{}", r.err);
}

#[test]
fn connections_beyond_the_descriptor_limit_are_refused_or_made_room_for() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    // A soft limit below -c with room under the hard one: raised, and every connection opens.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let r = run(
        &["http", "-c", "300", "-n", "3000", "-t", "1", "--json", json.to_str().unwrap(), &url],
        Some("-Sn 128"),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{}", r.err);
    let doc = common::read_doc(&json);
    assert_eq!((doc.summary.responses, doc.summary.errors, doc.summary.connects), (3000, 0, 300), "{}", r.out);
    // A hard limit below -c: a clear message naming ulimit -n, before anything runs.
    let r = run(&["http", "-c", "300", "-n", "10", &url], Some("-n 128"), Duration::from_secs(20));
    assert_eq!(r.code, Some(2), "{}", r.err);
    assert!(r.err.contains("may open 128") && r.err.contains("ulimit -n"), "{}", r.err);
    // Absurd counts: refused at once, not allocated.
    let started = Instant::now();
    let r = run(&["http", "-c", "10000000", "-n", "10", &url], None, Duration::from_secs(20));
    assert_eq!(r.code, Some(2), "{}", r.err);
    assert!(r.err.contains("at most 1000000"), "{}", r.err);
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn header_injection_is_refused() {
    let url = "http://127.0.0.1:9/";
    // Each row: arguments, what the message says.
    let rows: [(&[&str], &str); 4] = [
        (&["http", "-H", "X-A: a\r\nX-Evil: 1", url], "control character"),
        (&["http", "-H", "X-A: a\nGET /evil HTTP/1.1", url], "control character"),
        (&["http", "-H", "X-A: a\x01b", url], "control character"),
        (&["http", "-m", "GET /evil HTTP/1.1\r\nX:", url], "is not an HTTP method"),
    ];
    for (args, want) in rows {
        let r = run(args, None, Duration::from_secs(20));
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.err);
        assert!(r.err.contains(want), "{args:?}: {}", r.err);
    }
}

/// Request heads read by [`capture_heads`].
static HEADS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Answers every request (keep-alive), keeping each request head.
fn capture_heads(mut s: std::net::TcpStream) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        buf.clear();
        while !buf.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte) {
                Ok(1) => buf.push(byte[0]),
                _ => return,
            }
        }
        HEADS.lock().unwrap().push(String::from_utf8_lossy(&buf).into_owned());
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK").is_err() {
            return;
        }
    }
}

/// Every file under `dir`, as text.
fn all_files(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            text.push_str(&all_files(&p));
        } else {
            text.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    text
}

#[test]
fn secrets_never_reach_the_terminal_documents_or_bench_summaries() {
    let server = common::fake(capture_heads);
    let port = server.addr.port();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // URL credentials become Basic auth (as curl sends them), percent-escapes decoded.
    let url = format!("http://ann:SECRET%40PW@127.0.0.1:{port}/x");
    let o = common::bolide(&[
        "http",
        "-n",
        "3",
        "-c",
        "1",
        "--json",
        json.to_str().unwrap(),
        "-H",
        "Cookie: session=SECRET-COOKIE",
        "-H",
        "X-Tenant: SECRET-TENANT",
        "--redact",
        "x-tenant",
        "-H",
        "X-Visible: shown",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let heads = HEADS.lock().unwrap().clone();
    assert_eq!(heads.len(), 3);
    // base64("ann:SECRET@PW")
    assert!(heads[0].contains("Authorization: Basic YW5uOlNFQ1JFVEBQVw==\r\n"), "{}", heads[0]);
    assert!(heads[0].starts_with("GET /x HTTP/1.1\r\n") && heads[0].contains("Cookie: session=SECRET-COOKIE\r\n"));
    let doc = std::fs::read_to_string(&json).unwrap();
    for text in [&o.out, &o.err, &doc] {
        assert!(!text.contains("SECRET"), "a secret leaked:\n{text}");
    }
    assert!(doc.contains("X-Visible") && doc.contains("shown") && doc.contains("\"Cookie\""), "names stay: {doc}");
    assert!(o.out.contains("http://ann:<redacted>@127.0.0.1"), "{}", o.out);

    // bench: every run's document and the series summary.
    let out = dir.path().join("bench");
    let o = common::bolide(&[
        "bench",
        "http",
        "--runs",
        "2",
        "--cooldown",
        "0",
        "--out",
        out.to_str().unwrap(),
        "-n",
        "3",
        "-c",
        "1",
        "-H",
        "Authorization: Bearer SECRET-TOKEN",
        "-HX-Api-Key: SECRET-KEY",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let files = all_files(&out);
    assert!(files.contains("Authorization"), "the bench directory has the documents");
    for text in [&o.out, &o.err, &files] {
        assert!(!text.contains("SECRET"), "a secret leaked:\n{text}");
    }
}

#[test]
fn login_passwords_tokens_and_target_passwords_stay_out_of_ddp_reports() {
    let server = refserver::Server::start(refserver::Config {
        ddp: refserver::DdpConfig { users: vec![("ann".into(), "SECRET-PW".into())], ..Default::default() },
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = server.base_url().replace("http://", "http://u:SECRET-TARGET@");
    let path = scenario(
        &dir,
        "login.yml",
        &format!(
            "config:\n  target: {target}\n  phases: [{{duration: 100ms, arrivalCount: 2}}]\nscenarios:\n  - flow:\n      - connect\n      - login: {{user: ann, password: SECRET-PW}}\n      - login: {{resume: \"{{{{ loginToken }}}}\"}}\n      - login: {{user: ann, password: SECRET-WRONG}}\n"
        ),
    );
    let json = dir.path().join("r.json");
    let o = common::bolide(&["run", &path, "--json", json.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let doc = std::fs::read_to_string(&json).unwrap();
    let tokens = server.app().accounts.tokens();
    assert_eq!(tokens.len(), 4, "two logins per user, each with a token");
    for text in [&o.out, &o.err, &doc] {
        assert!(!text.contains("SECRET"), "a secret leaked:\n{text}");
        for t in &tokens {
            assert!(!text.contains(t.as_str()), "a login token leaked:\n{text}");
        }
    }
    assert!(o.err.contains("first ddp_error error"), "the wrong password is counted: {}", o.err);
}

#[test]
fn a_full_disk_for_the_gnuplot_file_costs_neither_the_document_nor_a_stray_file() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let bin = env!("CARGO_BIN_EXE_bolide");

    // /dev/full: every write fails with "no space left on device".
    let out = Command::new(bin)
        .args(["http", "-n", "2000", "-c", "2", "--gnuplot", "/dev/full", "--json", json.to_str().unwrap(), &url])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("cannot write /dev/full") && err.contains("No space left"), "{err}");
    assert_eq!(common::read_doc(&json).summary.responses, 2000, "the document is whole");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "no part file left behind");

    // A real file system that fills up while the parts are written (a 64 KiB tmpfs, mounted in
    // a private mount namespace): the parts go, the document stays.
    std::fs::remove_file(&json).unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    let script = "mount -t tmpfs -o size=64k tmpfs \"$1\" || exit 99; shift; \"$@\"; rc=$?; echo \"left on the disk: [$(ls -A \"$FULL\")]\"; exit $rc";
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", script, "sh", full.to_str().unwrap(), bin, "http", "-n", "20000", "-c", "2"])
        .args(["--gnuplot", full.join("g.tsv").to_str().unwrap(), "--json", json.to_str().unwrap(), &url])
        .env("FULL", &full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(99), "this test needs a private mount namespace (unshare -rm): {err}");
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("g.tsv") && err.contains("No space left"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("left on the disk: []"), "files left on the full disk:\n{stdout}");
    assert_eq!(common::read_doc(&json).summary.responses, 20000, "the document is whole");
}

#[test]
fn report_and_compare_refuse_endless_and_oversized_inputs_at_once() {
    // The second probe: /dev/zero grew until the machine stopped it, and a 330 MB document took
    // 6 GB (read without limit, parsed twice). Now: a pipe is refused at its first byte, a file
    // larger than the limit by its size, before anything is read.
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.json");
    // Sparse: 1 GiB and one byte of nothing, on no disk.
    std::fs::File::create(&huge).unwrap().set_len((1 << 30) + 1).unwrap();
    let rows: [(&[&str], &str); 4] = [
        (&["report", "/dev/zero"], "/dev/zero: not a bolide result (not a JSON object)"),
        (&["compare", "/dev/zero", "/dev/zero"], "not a bolide result (not a JSON object)"),
        (&["report", huge.to_str().unwrap()], "larger than 1024 MiB, the most bolide reads from one file"),
        (&["merge", huge.to_str().unwrap(), "-o", "-"], "larger than 1024 MiB"),
    ];
    for (args, want) in rows {
        // A 512 MiB address-space limit: reading either input whole could not fit under it.
        let r = run(args, Some("-v 524288"), Duration::from_secs(20));
        assert!(matches!(r.code, Some(2)), "{args:?}: {:?} {}", r.code, r.err);
        assert!(r.err.contains(want), "{args:?}: want {want:?} in\n{}", r.err);
    }
}

#[test]
fn every_file_a_run_writes_is_checked_before_it_starts() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let url = format!("{}/ok", server.base_url());
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let path = |name: &str| missing.join(name).to_str().unwrap().to_string();
    let (json, html, csv, junit) = (path("r.json"), path("r.html"), path("r.csv"), path("r.xml"));
    let csv = format!("csv={csv}");
    // Each of them, and all of them at once: a usage error naming each, before any request.
    for args in [
        vec!["--json", json.as_str()],
        vec!["--html", html.as_str()],
        vec!["--out", csv.as_str()],
        vec!["--junit", junit.as_str()],
        vec!["--json", json.as_str(), "--html", html.as_str(), "--out", csv.as_str(), "--junit", junit.as_str()],
    ] {
        let before = server.requests();
        let o = common::bolide(&[&["http", "-n", "50", "-c", "1"][..], &args, &[url.as_str()]].concat());
        assert_eq!(o.code, 2, "{args:?}: {}\n{}", o.out, o.err);
        let named = args.iter().filter(|a| a.contains("no-such-dir")).count();
        assert_eq!(o.err.matches("cannot write").count(), named, "{args:?}: {}", o.err);
        assert_eq!(server.requests(), before, "{args:?}: nothing was sent");
    }
    // A DDP run's as well.
    let o = common::bolide(&["run", "tasks-reactive", "--target", &server.base_url(), "--junit", &junit]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains(&format!("cannot write {junit}")), "{}", o.err);
    // Files inside bench's --out DIR, which bench makes before its first run, are not refused.
    let out = dir.path().join("series");
    let inside = |name: &str| out.join(name).to_str().unwrap().to_string();
    let (junit, csv) = (inside("j.xml"), format!("csv={}", inside("s.csv")));
    let args = ["bench", "http", "--runs", "1", "--cooldown", "0", "-n", "20", "-c", "1", "--junit", &junit];
    let o = common::bolide(&[&args[..], &["--out", out.to_str().unwrap(), "--out", &csv, &url]].concat());
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(out.join("j.xml").is_file() && out.join("s.csv").is_file());
}

//! The npm package, built by release/build.sh around this build's binary, packed, installed from
//! its tarballs into a fresh directory and run through npx: the platform's binary is picked, and
//! arguments, stdin, stdout and the exit code pass through the wrapper untouched. Needs node and
//! npm; without them the test says so and passes, unless BOLIDE_NPM_TEST=1 (CI) makes it fail.

use std::path::Path;
use std::process::{Command, Stdio};

fn have_npm() -> bool {
    let found = Command::new("npm").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(std::env::var("BOLIDE_NPM_TEST").is_err(), "BOLIDE_NPM_TEST is set but npm is not installed");
        eprintln!("npm is not installed: the npm package test is skipped");
    }
    found
}

fn run(dir: &Path, program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program).args(args).current_dir(dir).stdin(Stdio::null()).output().unwrap()
}

fn npx(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--offline", "bolide"];
    all.extend_from_slice(args);
    run(dir, "npx", &all)
}

#[test]
fn npx_bolide_runs_the_platform_binary_from_the_packed_tarballs() {
    if !have_npm() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    let (arch, cpu) = match std::env::consts::ARCH {
        "aarch64" => ("aarch64", "arm64"),
        _ => ("x86_64", "x64"),
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../release/build.sh");
    let binary = format!("{arch}={}", env!("CARGO_BIN_EXE_bolide"));
    let o = Command::new("bash").args([script, "--binary", &binary, "--out", dist.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // Every artefact is in SHA256SUMS, and the sums hold.
    let sums = run(&dist, "sha256sum", &["-c", "SHA256SUMS"]);
    assert!(sums.status.success(), "{}", String::from_utf8_lossy(&sums.stdout));
    let listed = String::from_utf8_lossy(&sums.stdout).to_string();
    let version = env!("CARGO_PKG_VERSION");
    for f in [
        format!("bolide-{version}-{arch}-unknown-linux-musl.tar.gz"),
        format!("npm/bolide-{version}.tgz"),
        format!("npm/bolide-linux-{cpu}-{version}.tgz"),
        format!("npm/bolide-probe-{version}.tgz"),
    ] {
        assert!(listed.contains(&format!("{f}: OK")), "{f} not checked: {listed}");
    }

    // A fresh project installs both tarballs, offline: the platform package satisfies the
    // wrapper's optional dependency.
    let app = tmp.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("package.json"), r#"{"name": "app", "version": "1.0.0", "private": true}"#).unwrap();
    let platform = dist.join(format!("npm/bolide-linux-{cpu}-{version}.tgz"));
    let main = dist.join(format!("npm/bolide-{version}.tgz"));
    let o = run(
        &app,
        "npm",
        &["install", "--offline", "--no-audit", "--no-fund", platform.to_str().unwrap(), main.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let installed = app.join(format!("node_modules/@bolide/linux-{cpu}/bin/bolide"));
    assert_eq!(std::fs::read(&installed).unwrap(), std::fs::read(env!("CARGO_BIN_EXE_bolide")).unwrap());

    let o = npx(&app, &["--version"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("bolide {version}\n"));
    // Exit codes: a usage error, a target that refuses, a broken threshold.
    assert_eq!(npx(&app, &["http", "-c", "0", "http://127.0.0.1:1/"]).status.code(), Some(2));
    assert_eq!(npx(&app, &["http", "-n", "1", "http://127.0.0.1:1/"]).status.code(), Some(3));
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let o = npx(&app, &["http", "-n", "3", "--json", "-", "--threshold", "rps>1e9", &server.base_url()]);
    assert_eq!(o.status.code(), Some(2), "rps>1e9 is not a number bolide reads: a usage error");
    let o = npx(&app, &["http", "-n", "3", "--json", "-", "--threshold", "rps>1000000000", &server.base_url()]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout through npx is the document alone");
    assert_eq!(doc["summary"]["responses"], 3);
    assert_eq!(server.requests(), 3);

    // Arguments (spaces, quotes, empty), stdin and the exit code, through a stand-in binary.
    let fake = tmp.path().join("fake.sh");
    std::fs::write(&fake, "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\ncat\nexit 7\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut child = Command::new("npx")
        .args(["--offline", "bolide", "a b", "it's", "", "--x=\"y\""])
        .current_dir(&app)
        .env("BOLIDE_BINARY", &fake)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"from stdin\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "[a b]\n[it's]\n[]\n[--x=\"y\"]\nfrom stdin\n");

    // The wrapper killed by SIGKILL (a cancelled CI job): bolide goes with it, not left running.
    let wrapper = app.join("node_modules/bolide/bin/bolide.js");
    let mut node = Command::new("node")
        .arg(&wrapper)
        .args(["serve", "--port", "0"])
        .current_dir(&app)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(node.stdout.as_mut().unwrap()), &mut first).unwrap();
    assert!(first.starts_with("bolide reference server on "), "{first}");
    let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", node.id())).unwrap();
    let bolide_pid: u32 = kids.split_whitespace().next().expect("bolide runs under the wrapper").parse().unwrap();
    node.kill().unwrap();
    node.wait().unwrap();
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Gone, or a zombie whose parent (init) has not reaped it yet.
        std::fs::read_to_string(format!("/proc/{bolide_pid}/stat")).map_or(true, |s| s.contains(") Z "))
    });
    assert!(gone, "bolide (pid {bolide_pid}) outlived its killed wrapper");

    // The main job, as the README's first line gives it for people with npm only.
    let out = tmp.path().join("demo");
    let o = npx(&app, &["demo", "--quick", "--out", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&o.stderr));
    // The Meteor reports' table (its padding depends on whether a run was suspect), the documents
    // and the page.
    assert!(text.lines().any(|l| l.split('|').nth(1).is_some_and(|c| c.trim() == "# Run")), "{text}");
    for f in ["tasks-reactive-summary.json", "tasks-nonreactive-summary.json", "report.html"] {
        assert!(out.join(f).exists(), "{f}: {text}");
    }
}

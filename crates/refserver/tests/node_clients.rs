//! The reference server driven by programs nobody here wrote: three npm DDP clients (simpleddp and
//! ddp.js over /websocket, node-ddp over SockJS) and the tasks page in Debian's headless Chromium.
//! Needs `node` and `npm` (the packages of tests/node are installed on first use) and
//! `/usr/bin/chromium` (or $CHROMIUM); `.ci/run` installs both.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Once;

use refserver::Reactivity;

fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

fn install_node_packages() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if node_dir().join("node_modules/playwright-core").exists() {
            return;
        }
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(node_dir())
            .status()
            .expect("npm is needed for these tests (Node.js 18 or later)");
        assert!(status.success(), "npm ci in {} failed", node_dir().display());
    });
}

/// Runs a script of tests/node against `base`; returns its output, failing the test on exit != 0.
fn node(script: &str, args: &[&str]) -> String {
    install_node_packages();
    let out = Command::new("node").arg(script).args(args).current_dir(node_dir()).output().expect("node is needed");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn third_party_ddp_clients_push_and_poll() {
    for reactivity in [Reactivity::Push, Reactivity::POLL] {
        let server = common::server(reactivity, true);
        let out = node("clients.mjs", &[&server.base_url()]);
        // 9 checks per client, 3 clients.
        assert!(out.contains("27 passed, 0 failed"), "{reactivity:?}:\n{out}");
        for client in ["simpleddp", "ddp.js", "node-ddp (SockJS)"] {
            assert!(out.contains(&format!("ok {client}: sees another client's removal")), "{out}");
        }
        assert_eq!(server.app().tasks.len(), 0, "every scenario cleans up after itself");
    }
}

#[test]
fn tasks_page_in_headless_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "this test needs Debian's chromium at {chromium} (apt-get install chromium; .ci/run does)"
    );
    let server = common::server(Reactivity::POLL, true);
    let shot = std::env::temp_dir().join(format!("bolide-tasks-page-{}.png", std::process::id()));
    let out = node("page.mjs", &[&server.base_url(), shot.to_str().unwrap()]);
    assert!(out.contains("4 passed, 0 failed"), "{out}");
    assert!(std::fs::metadata(&shot).map(|m| m.len() > 1000).unwrap_or(false), "screenshot written");
    assert_eq!(server.app().tasks.len(), 0, "Remove all tasks emptied the collection");
    assert!(server.app().methods_called.load(std::sync::atomic::Ordering::Relaxed) >= 6);
    let _ = std::fs::remove_file(shot);
}

//! Real browsers beside protocol users: one headless Chromium per run (Debian's `chromium`, or
//! `config.browser.executable`), driven over the DevTools protocol (CDP over WebSocket, `cdp.rs`),
//! each browser user a browser context of its own with one page (`page.rs`: the Playwright-named
//! actions, the page's timings and the DDP traffic it makes, read from CDP's WebSocket frames).
//!
//! The browser never outlives bolide: it leads its own process group (stopped whole at the end,
//! after Ctrl-C, or when the engine fails), and the kernel kills it when bolide dies without a
//! word (`PR_SET_PDEATHSIG`); its helpers (zygote, renderers, GPU) end with it.

pub mod cdp;
pub mod page;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::problem::Problem;

/// Where a run's browser comes from (a scenario's `config.browser`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrowserPlan {
    /// `config.browser.executable`: a path, or a name looked up on the PATH.
    pub executable: Option<String>,
}

/// The names a Chromium goes by on the PATH, in the order they are tried.
const NAMES: [&str; 4] = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// How long a stopped Chromium may take to close by itself before it is killed.
const GRACE: Duration = Duration::from_secs(3);

/// How long Chromium may take to open its DevTools endpoint.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The browser's executable: the scenario's, or the first Chromium on the PATH; a clear error
/// naming the package otherwise.
pub fn executable(plan: &BrowserPlan) -> Result<PathBuf, Problem> {
    if let Some(given) = &plan.executable {
        let found = if given.contains('/') { Some(PathBuf::from(given)) } else { on_path(given) };
        return match found.filter(|p| is_executable(p)) {
            Some(p) => Ok(p),
            None => Err(format!("config.browser.executable {given:?}: no such executable file").into()),
        };
    }
    NAMES.iter().find_map(|n| on_path(n)).ok_or_else(|| {
        "a browser flow (engine: browser) needs Chromium, and none is on the PATH (chromium, chromium-browser, \
         google-chrome); install Debian's package with `apt-get install chromium`, or give its path as \
         config.browser.executable"
            .into()
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A running headless Chromium: its process (leading its own group), its profile directory
/// (removed at the end) and the DevTools endpoint every browser user connects to.
pub struct Browser {
    child: Child,
    pid: u32,
    dir: PathBuf,
    /// `ws://127.0.0.1:PORT/devtools/browser/ID`.
    pub endpoint: String,
    /// `PORT` and `/devtools/browser/ID` of the endpoint.
    pub port: u16,
    pub path: String,
    /// The executable that runs.
    pub executable: PathBuf,
    /// Its processes watched, as bolide watches a server.
    watch: Option<crate::monitor::Monitor>,
}

impl Browser {
    /// Starts Chromium headless with a fresh profile, waits for its DevTools endpoint, and
    /// watches its processes every `interval`.
    pub fn launch(plan: &BrowserPlan, interval: Duration) -> Result<Browser, Problem> {
        let mut b = Browser::start(plan)?;
        let mut watched = crate::monitor::Watched::new("browser", b.pid);
        // Chromium's processes share most of their pages: their proportional share is counted.
        watched.proportional = true;
        b.watch = Some(crate::monitor::Monitor::start(vec![watched], interval));
        Ok(b)
    }

    /// Stops the browser, with what it cost; `peak_pages`: the most pages open at once.
    pub fn finish(mut self, peak_pages: u64) -> crate::stats::browser::BrowserRun {
        let watched = self.watch.take().map(|m| m.finish()).unwrap_or_default();
        let version = self.version();
        let run = crate::stats::browser::BrowserRun {
            executable: self.executable.display().to_string(),
            version,
            peak_pages,
            watched: watched.first().map(Into::into).unwrap_or_default(),
        };
        self.stop();
        run
    }

    fn start(plan: &BrowserPlan) -> Result<Browser, Problem> {
        let exe = executable(plan)?;
        remove_stale_profiles();
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("bolide-browser-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("browser profile {}: {e}", dir.display()))?;
        let gone = |e: String| {
            let _ = std::fs::remove_dir_all(&dir);
            e
        };
        let log = std::fs::File::create(dir.join("chromium.log")).map_err(|e| gone(format!("browser log: {e}")))?;
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--headless=new",
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-background-timer-throttling",
            "--disable-backgrounding-occluded-windows",
            "--disable-renderer-backgrounding",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-sync",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--metrics-recording-only",
            "--mute-audio",
            "--password-store=basic",
            "--use-mock-keychain",
        ]);
        cmd.arg(format!("--user-data-dir={}", dir.display()));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // Chromium refuses to run as root inside its sandbox.
            cmd.arg("--no-sandbox");
        }
        cmd.arg("about:blank").stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).process_group(0);
        // SAFETY: between fork and exec only async-signal-safe calls: prctl and getppid.
        unsafe {
            let parent = libc::getpid();
            cmd.pre_exec(move || {
                // Dies with bolide, even when bolide is killed outright.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| gone(format!("cannot start {}: {e}", exe.display())))?;
        let pid = child.id();
        let mut b = Browser {
            child,
            pid,
            dir,
            endpoint: String::new(),
            port: 0,
            path: String::new(),
            executable: exe,
            watch: None,
        };
        let begin = Instant::now();
        let active = b.dir.join("DevToolsActivePort");
        loop {
            if let Ok(Some(status)) = b.child.try_wait() {
                return Err(format!(
                    "{} ended ({status}) before it opened DevTools{}",
                    b.executable.display(),
                    b.tail()
                )
                .into());
            }
            if let Ok(text) = std::fs::read_to_string(&active) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next().and_then(|p| p.trim().parse().ok()), lines.next()) {
                    b.port = port;
                    b.path = path.trim().to_string();
                    b.endpoint = format!("ws://127.0.0.1:{port}{}", b.path);
                    return Ok(b);
                }
            }
            if begin.elapsed() >= START_TIMEOUT {
                return Err(format!(
                    "{} did not open DevTools within {START_TIMEOUT:?}{}",
                    b.executable.display(),
                    b.tail()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The browser's process (the one to watch: its helpers are its descendants).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Chromium's own version line (`Chromium 156.0...`), asked of the executable.
    pub fn version(&self) -> Option<String> {
        let out = Command::new(&self.executable).arg("--version").stderr(Stdio::null()).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!text.is_empty()).then(|| crate::redact::printable(&text).into_owned())
    }

    /// The last lines Chromium wrote that are not its usual noise, for error messages.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("chromium.log")).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.contains("dbus") && !l.trim().is_empty() && !l.contains("unexpected operator"))
            .collect();
        if lines.is_empty() {
            return String::new();
        }
        let from = lines.len().saturating_sub(8);
        let shown: Vec<String> = lines[from..].iter().map(|l| crate::redact::printable(l).into_owned()).collect();
        format!("; the last lines it wrote:\n  | {}", shown.join("\n  | "))
    }

    /// Whether the browser process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the browser and every helper it started, and removes its profile.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        let pid = self.pid as i32;
        // The helpers a zygote forked may have left the group: the tree is taken while the
        // browser still holds it, and killed too.
        let tree = crate::monitor::tree(self.pid);
        // First as a person closes it (SIGTERM: Chromium ends its pages and reaps its helpers, so
        // their CPU is accounted to it), briefly; then whatever is left is killed.
        if self.alive() && pid > 1 {
            // SAFETY: kill only sends a signal, to the browser's own process.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let begin = Instant::now();
            while begin.elapsed() < GRACE && self.alive() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // SAFETY: getpgrp has no preconditions; kill only sends signals, never to our own group.
        let ours = unsafe { libc::getpgrp() };
        if pid > 1 && pid != ours {
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        for p in tree {
            if p as i32 != pid && p != std::process::id() {
                unsafe {
                    libc::kill(p as i32, libc::SIGKILL);
                }
            }
        }
        let _ = self.child.wait();
        let begin = Instant::now();
        while crate::monitor::spawn::group_alive(self.pid) && begin.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() || self.dir.exists() {
            self.end();
        }
    }
}

/// Profiles of browsers whose bolide was killed outright (its Drop never ran): removed at the
/// next launch, each once its bolide's process is gone.
fn remove_stale_profiles() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("bolide-browser-")) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_browser_is_named_with_its_package() {
        let e = executable(&BrowserPlan { executable: Some("/nonexistent/chromium".into()) }).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/chromium") && e.contains("no such executable"), "{e}");
        let e =
            executable(&BrowserPlan { executable: Some("no-such-browser-anywhere".into()) }).unwrap_err().to_string();
        assert!(e.contains("no-such-browser-anywhere"), "{e}");
    }
}

//! `--dashboard [ADDR]`: a page served while `http`, `run`, `bench` or `capacity` runs, redrawn
//! every second from the run's per-second snapshots (the same chart code as the HTML report,
//! sent as Server-Sent Events), then showing the final report.
//!
//! The server is a few plain threads named `bolide-dash` (one accepting, one per connection), off
//! the load threads; bolide's own CPU figures count them apart (`monitor::generator`). It binds
//! loopback unless the address says otherwise. Paths: `/` the live page, `/events` the stream,
//! `/report` the final report once the run has ended.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::console::{exit, Io};
use crate::report::html::{self, Section};

/// Where the dashboard listens when `--dashboard` names no address (k6's port).
pub const DEFAULT_ADDR: &str = "127.0.0.1:5665";
/// Thread-name prefix of the dashboard's threads (for bolide's own CPU figures).
pub const THREAD_NAME: &str = "bolide-dash";
/// Connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 32;
/// How long the end of the run waits for open pages to fetch the final report.
const FINAL_GRACE: Duration = Duration::from_secs(5);
/// A comment on the event stream this often keeps proxies and browsers from closing it.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Builds a snapshot's sections (on the dashboard's own thread, so that its cost is counted apart
/// from the command's threads).
type Build = Box<dyn FnOnce() -> Vec<Section> + Send>;

#[derive(Default)]
struct State {
    /// The newest snapshot to build; an older one not yet built is dropped.
    pending: Option<Build>,
    /// The latest snapshot (the report's data as JSON) and its number (0: none yet).
    snapshot: String,
    seq: u64,
    /// Sections shown under the current run's: what a series or a ladder has finished so far.
    earlier: Vec<Section>,
    /// The final report, once the run has ended.
    final_page: Option<Arc<String>>,
    connections: usize,
    /// Event streams open now, and those that were open when the run ended and have not yet
    /// fetched the final report.
    streams: usize,
    awaiting_final: usize,
}

struct Shared {
    title: String,
    page: String,
    state: Mutex<State>,
    changed: Condvar,
}

/// A running dashboard; commands feed it with [`Dashboard::update`] and end it with
/// [`Dashboard::finish`].
pub struct Dashboard {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl Dashboard {
    /// Listens on `addr` and serves in the background. When the default address is taken (another
    /// bolide is serving its dashboard), any free loopback port is used instead.
    pub fn start(addr: SocketAddr, title: &str) -> Result<Dashboard, String> {
        let listener = match TcpListener::bind(addr) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && addr.to_string() == DEFAULT_ADDR => {
                TcpListener::bind((addr.ip(), 0)).map_err(|e| format!("--dashboard: cannot listen on {addr}: {e}"))?
            }
            Err(e) => return Err(format!("--dashboard: cannot listen on {addr}: {e}")),
        };
        let addr = listener.local_addr().map_err(|e| format!("--dashboard: {e}"))?;
        let shared = Arc::new(Shared {
            title: title.to_string(),
            page: html::live_page(title),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || accept(listener, s))
            .map_err(|e| format!("--dashboard: cannot start its thread: {e}"))?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || build(&s))
            .map_err(|e| format!("--dashboard: cannot start its thread: {e}"))?;
        Ok(Dashboard { shared, addr })
    }

    /// The page's address, to print.
    pub fn url(&self) -> String {
        let host = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => format!("127.0.0.1:{}", a.port()),
            SocketAddr::V6(a) if a.ip().is_unspecified() => format!("[::1]:{}", a.port()),
            a => a.to_string(),
        };
        format!("http://{host}/")
    }

    /// Sends the page a new snapshot of the run: `sections` is called on the dashboard's thread.
    pub fn update(&self, sections: impl FnOnce() -> Vec<Section> + Send + 'static) {
        let mut st = lock(&self.shared);
        st.pending = Some(Box::new(sections));
        self.shared.changed.notify_all();
    }

    /// Shows `sections` under the current run from the next snapshot on (a series' or a ladder's
    /// runs so far), in place of what was kept before.
    pub fn keep(&self, sections: Vec<Section>) {
        lock(&self.shared).earlier = sections;
    }

    /// The run has ended: open pages switch to `page` (the final report). Waits, at most a few
    /// seconds, until every page that was watching has fetched it.
    pub fn finish(&self, page: String) {
        let mut st = lock(&self.shared);
        st.final_page = Some(Arc::new(page));
        st.awaiting_final = st.streams;
        self.shared.changed.notify_all();
        let until = Instant::now() + FINAL_GRACE;
        while st.awaiting_final > 0 {
            let now = Instant::now();
            if now >= until {
                break;
            }
            st = match self.shared.changed.wait_timeout(st, until - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// The thread that turns updates into snapshots, until the final report is there.
fn build(shared: &Shared) {
    loop {
        let job = {
            let mut st = lock(shared);
            while st.pending.is_none() && st.final_page.is_none() {
                st = match shared.changed.wait(st) {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
            }
            if st.final_page.is_some() {
                return;
            }
            st.pending.take().map(|job| (job, st.earlier.clone()))
        };
        let Some((job, earlier)) = job else { continue };
        let mut sections = job();
        sections.extend(earlier);
        let json = html::data_json(&shared.title, &sections);
        let mut st = lock(shared);
        st.snapshot = json;
        st.seq += 1;
        shared.changed.notify_all();
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        {
            let mut st = lock(&shared);
            if st.connections >= MAX_CONNECTIONS {
                continue;
            }
            st.connections += 1;
        }
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
            let _ = serve(stream, &s);
            lock(&s).connections -= 1;
        });
        if spawned.is_err() {
            lock(&shared).connections -= 1;
        }
    }
}

/// The path of a GET request (None for anything else); reads the head, at most 8 KiB.
fn request_path(stream: &TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.take(8192));
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?, parts.next()?);
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return None,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    (method == "GET").then(|| path.split('?').next().unwrap_or("/").to_string())
}

fn respond(mut stream: &TcpStream, status: &str, kind: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()
}

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let Some(path) = request_path(&stream) else {
        return respond(&stream, "400 Bad Request", "text/plain", b"bolide's dashboard answers GET only\n");
    };
    match path.as_str() {
        "/" => respond(&stream, "200 OK", "text/html; charset=utf-8", shared.page.as_bytes()),
        "/report" => {
            let page = lock(shared).final_page.clone();
            match page {
                Some(p) => {
                    let sent = respond(&stream, "200 OK", "text/html; charset=utf-8", p.as_bytes());
                    let mut st = lock(shared);
                    st.awaiting_final = st.awaiting_final.saturating_sub(1);
                    shared.changed.notify_all();
                    sent
                }
                None => respond(&stream, "404 Not Found", "text/plain", b"the run has not ended yet\n"),
            }
        }
        "/events" => events(stream, shared),
        _ => respond(&stream, "404 Not Found", "text/plain", b"not found\n"),
    }
}

/// The event stream: every new snapshot, then `done` when the final report is there.
fn events(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
    )?;
    lock(shared).streams += 1;
    let result = (|| {
        let mut seen = 0;
        loop {
            let (snapshot, done) = {
                let mut st = lock(shared);
                let until = Instant::now() + KEEPALIVE;
                while st.seq == seen && st.final_page.is_none() && Instant::now() < until {
                    st = match shared.changed.wait_timeout(st, until.saturating_duration_since(Instant::now())) {
                        Ok((g, _)) => g,
                        Err(p) => p.into_inner().0,
                    };
                }
                let snapshot = (st.seq != seen).then(|| st.snapshot.clone());
                seen = st.seq;
                (snapshot, st.final_page.is_some())
            };
            match &snapshot {
                Some(json) => write!(stream, "event: snapshot\ndata: {json}\n\n")?,
                None if !done => stream.write_all(b": still running\n\n")?,
                None => {}
            }
            if done {
                stream.write_all(b"event: done\ndata: /report\n\n")?;
                return stream.flush();
            }
            stream.flush()?;
        }
    })();
    let mut st = lock(shared);
    st.streams -= 1;
    if result.is_err() {
        // A page that went away will not fetch the final report.
        st.awaiting_final = st.awaiting_final.saturating_sub(1);
        shared.changed.notify_all();
    }
    result
}

/// The page shown at the end when there is no report (the run could not start, no run finished).
pub fn no_report_page(why: &str) -> String {
    let section = Section {
        title: "No report".into(),
        notes: vec![format!("{why}: the reason is on bolide's standard error")],
        text: String::new(),
        charts: Vec::new(),
    };
    html::page("bolide: no report", &[section])
}

/// Starts the dashboard a command asked for (`--dashboard`) and prints its URL on stderr; Err is
/// the exit code when it cannot listen (the reason written).
pub fn start_for(addr: Option<SocketAddr>, title: &str, io: &mut Io) -> Result<Option<Dashboard>, i32> {
    let Some(addr) = addr else { return Ok(None) };
    match Dashboard::start(addr, title) {
        Ok(d) => {
            let _ = writeln!(io.err, "Live dashboard: {}", d.url());
            Ok(Some(d))
        }
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            Err(exit::RUN)
        }
    }
}

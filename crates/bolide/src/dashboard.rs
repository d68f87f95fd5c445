//! `--dashboard [ADDR]`: a page served while `http`, `run`, `bench` or `capacity` runs, redrawn
//! every second from the run's per-second snapshots (the same chart code as the HTML report,
//! sent as Server-Sent Events), then showing the final report.
//!
//! The server is a few plain threads named `bolide-dash` (one accepting, one per connection), off
//! the load threads; bolide's own CPU figures count them apart (`monitor::generator`). It binds
//! loopback unless the address says otherwise. Paths: `/` the live page, `/events` the stream,
//! `/report` the final report once the run has ended.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::console::{exit, Io};
use crate::problem::Problem;
use crate::report::html::{self, Section};

/// Where the dashboard listens when `--dashboard` names no address (k6's port).
pub const DEFAULT_ADDR: &str = "127.0.0.1:5665";
/// Thread-name prefix of the dashboard's threads (for bolide's own CPU figures).
pub const THREAD_NAME: &str = "bolide-dash";
/// Connections served at once (pages, event streams); more are closed at once.
const MAX_CONNECTIONS: usize = 32;
/// Connections still sending their request head; more are closed at once. Apart from the served
/// ones, so that clients that never finish a head cannot keep the page from a new client.
const MAX_READING: usize = 64;
/// The whole request head must arrive within this (a client sending a byte now and then cannot
/// hold a slot longer).
const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// A write to a page that does not read gives up after this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// A page with more than this sent to it and unread is skipped until it reads (bytes).
const MAX_BACKLOG: usize = 256 << 10;
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
    /// Connections still reading their request head.
    reading: usize,
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
    pub fn start(addr: SocketAddr, title: &str) -> Result<Dashboard, Problem> {
        let listener = match TcpListener::bind(addr) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && addr.to_string() == DEFAULT_ADDR => {
                TcpListener::bind((addr.ip(), 0)).map_err(|e| format!("--dashboard: cannot listen on {addr}: {e}"))?
            }
            Err(e) => return Err(format!("--dashboard: cannot listen on {addr}: {e}").into()),
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
            if st.reading >= MAX_READING {
                continue;
            }
            st.reading += 1;
        }
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name(THREAD_NAME.into()).spawn(move || {
            let path = request_path(&stream, Instant::now() + HEAD_DEADLINE);
            {
                // A served slot is taken only once the head has arrived whole.
                let mut st = lock(&s);
                st.reading -= 1;
                if st.connections >= MAX_CONNECTIONS {
                    return;
                }
                st.connections += 1;
            }
            let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
            let _ = serve(stream, path, &s);
            lock(&s).connections -= 1;
        });
        if spawned.is_err() {
            lock(&shared).reading -= 1;
        }
    }
}

/// A GET request's path, and whether it asks for an event stream the way a browser's
/// EventSource does (`Accept: text/event-stream`).
type Request = (String, bool);

/// The path of a GET request (None for anything else): the head, at most 8 KiB, whole before
/// `deadline`.
fn request_path(mut stream: &TcpStream, deadline: Instant) -> Option<Request> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).ok()?;
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > 8192 {
            return None;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.lines().next()?.split_whitespace();
    let (method, path) = (parts.next()?, parts.next()?);
    let browser = text.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.to_ascii_lowercase().contains("text/event-stream")
        })
    });
    (method == "GET").then(|| (path.split('?').next().unwrap_or("/").to_string(), browser))
}

/// Bytes sent on `stream` that the page has not read yet: what the kernel still holds unsent or
/// unacknowledged on this side, plus, when the page is on this machine (the dashboard listens on
/// loopback by default), what waits unread in the page's own receive queue (`/proc/net/tcp`).
/// A page that reads drains both at once; one that does not read leaves them there.
fn unread_bytes(stream: &TcpStream) -> usize {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut n: libc::c_int = 0;
        // SAFETY: TIOCOUTQ writes one int into `n`, which lives through the call.
        let ours = if unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut n) } == 0 { n.max(0) } else { 0 };
        // A dashboard listening on `[::]` sees a client of 127.0.0.1 as ::ffff:127.0.0.1, while
        // the client's own socket is an IPv4 one: both sides are read in their plain form.
        let plain = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
        let theirs = match (stream.peer_addr().map(plain), stream.local_addr().map(plain)) {
            (Ok(peer), Ok(me)) if peer.ip().is_loopback() => receive_queue(peer, me).unwrap_or(0),
            _ => 0,
        };
        ours as usize + theirs
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        0
    }
}

/// The receive queue (bytes not yet read) of this machine's TCP socket bound to `local` and
/// connected to `remote`, from `/proc/net/tcp` or `/proc/net/tcp6`.
#[cfg(target_os = "linux")]
fn receive_queue(local: SocketAddr, remote: SocketAddr) -> Option<usize> {
    // The kernel writes each address as the bytes of its 32-bit words in host order, in hex, then
    // the port: 127.0.0.1:8080 is 0100007F:1F90 on little-endian machines.
    fn hex(addr: SocketAddr) -> String {
        let words: Vec<u32> = match addr.ip() {
            std::net::IpAddr::V4(v4) => vec![u32::from_ne_bytes(v4.octets())],
            std::net::IpAddr::V6(v6) => {
                v6.octets().chunks(4).map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
            }
        };
        let ip: String = words.iter().map(|w| format!("{w:08X}")).collect();
        format!("{ip}:{:04X}", addr.port())
    }
    let find = |file: &str, local: SocketAddr, remote: SocketAddr| -> Option<usize> {
        let (want_local, want_remote) = (hex(local), hex(remote));
        let table = std::fs::read_to_string(file).ok()?;
        table.lines().skip(1).find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 4 && f[1] == want_local && f[2] == want_remote {
                let rx = f[4].split_once(':')?.1;
                usize::from_str_radix(rx, 16).ok()
            } else {
                None
            }
        })
    };
    match (local, remote) {
        // An IPv4 peer's socket is an IPv4 one, or a dual-stack IPv6 one with mapped addresses.
        (SocketAddr::V4(l), SocketAddr::V4(r)) => find("/proc/net/tcp", local, remote).or_else(|| {
            let mapped = |a: std::net::SocketAddrV4| SocketAddr::new(a.ip().to_ipv6_mapped().into(), a.port());
            find("/proc/net/tcp6", mapped(l), mapped(r))
        }),
        _ => find("/proc/net/tcp6", local, remote),
    }
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

fn serve(stream: TcpStream, request: Option<Request>, shared: &Shared) -> std::io::Result<()> {
    let Some((path, browser)) = request else {
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
        "/events" => events(stream, browser, shared),
        _ => respond(&stream, "404 Not Found", "text/plain", b"not found\n"),
    }
}

/// The event stream: every new snapshot, then `done` when the final report is there. The end of
/// the run waits (a few seconds at most) for the pages watching to fetch the report: streams a
/// browser opened (`browser`), never a bare client, which would not fetch it.
fn events(mut stream: TcpStream, browser: bool, shared: &Shared) -> std::io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
    )?;
    if browser {
        lock(shared).streams += 1;
    }
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
                // A page still holding an earlier snapshot unread is not sent another (each is
                // whole): its thread never blocks behind it, and it gets the newest once it reads.
                Some(_) if unread_bytes(&stream) > MAX_BACKLOG => {}
                Some(json) => write!(stream, "event: snapshot\ndata: {json}\n\n")?,
                None if !done => stream.write_all(b": still running\n\n")?,
                None => {}
            }
            if done {
                stream.write_all(b"event: done\ndata: /report\n\n")?;
                stream.flush()?;
                // A page that reads fetches the report at once; one that has not read what was
                // sent will not, and the run's end does not wait for it.
                let until = Instant::now() + Duration::from_millis(500);
                while browser && unread_bytes(&stream) > 0 && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if browser && unread_bytes(&stream) > 0 {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the page does not read"));
                }
                return Ok(());
            }
            stream.flush()?;
        }
    })();
    if !browser {
        return result;
    }
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
        ..Section::default()
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_local_peer_s_unread_bytes_are_seen() {
        unread_bytes_seen("127.0.0.1:0");
        // On [::], a client of 127.0.0.1 is ::ffff:127.0.0.1 (its unread bytes were not seen,
        // and the end of a run waited its whole grace for such a page).
        if std::net::TcpListener::bind("[::]:0").is_ok() {
            unread_bytes_seen("[::]:0");
        }
    }

    fn unread_bytes_seen(listen: &str) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind(listen).unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert_eq!(super::unread_bytes(&server), 0);
        server.write_all(&[b'x'; 1000]).unwrap();
        // Not read yet: the page's receive queue holds them.
        let mut seen = 0;
        for _ in 0..100 {
            seen = super::unread_bytes(&server);
            if seen == 1000 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(seen, 1000);
        let mut buf = [0u8; 1000];
        client.read_exact(&mut buf).unwrap();
        assert_eq!(super::unread_bytes(&server), 0);
    }
}

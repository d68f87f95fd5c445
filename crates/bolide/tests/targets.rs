//! Several targets (the Cluster test's shapes): users spread over in-process reference servers
//! on 127.0.0.1, round-robin or by weight, each server's own counters agreeing with the per-target
//! figures of the result document; bad target lists refused before anything runs.

mod common;

use std::sync::atomic::Ordering;

use bolide::stats::vu::{DdpTargetSummary, VuDoc};
use common::{bolide, Outcome};
use refserver::{Config, Server};

fn run(args: &[&str]) -> (Outcome, VuDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[args, &["--json", json.to_str().unwrap()]].concat());
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (o, doc)
}

/// Subscriptions made ready and calls answered at one target, from its per-step counts.
fn done(t: &DdpTargetSummary, prefix: &str) -> u64 {
    t.per_step.iter().filter(|s| s.name.starts_with(prefix)).map(|s| s.count - s.errors).sum()
}

#[test]
fn users_split_round_robin_and_each_server_agrees() {
    let servers: Vec<Server> = (0..2).map(|_| Server::start(Config::default()).unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    // Each server watched by its port: tied to its target, its CPU and RAM beside its load.
    let watch: Vec<String> = servers.iter().enumerate().map(|(i, s)| format!("s{i}=:{}", s.addr().port())).collect();
    let (o, doc) = run(&[
        "run",
        "tasks-reactive",
        "--target",
        &urls[0],
        "--target",
        &urls[1],
        "--monitor",
        &watch[0],
        "--monitor",
        &watch[1],
        "--arrival-rate",
        "10",
        "-d",
        "1s",
        "--tasks",
        "2",
        "--think",
        "10ms",
    ]);
    assert_eq!(doc.summary.users.launched, 10);
    assert_eq!(doc.settings.targets, urls);
    assert_eq!(doc.per_target.len(), 2);
    for (t, server) in doc.per_target.iter().zip(&servers) {
        let app = server.app();
        assert_eq!((t.users.launched, t.users.completed, t.users.failed), (5, 5, 0), "{}", o.out);
        // Each user holds one session; its subscriptions and calls are the server's own counts.
        assert_eq!(app.sessions_started.load(Ordering::SeqCst), 5);
        assert_eq!(done(t, "subscribe "), app.subscriptions_ready.load(Ordering::SeqCst));
        assert_eq!(done(t, "call "), app.methods_called.load(Ordering::SeqCst));
        assert_eq!(done(t, "subscribe "), 10, "two subscriptions per user");
        let per_min = t.subscriptions_per_min * doc.summary.duration_s / 60.0;
        assert!((per_min - 10.0).abs() < 1e-6, "subscriptions per minute over the run: {per_min}");
        assert!(o.out.contains(&t.url), "the terminal shows the target: {}", o.out);
    }
    assert!(o.out.contains("subs/min") && o.out.contains("-> 2 targets"), "{}", o.out);
    let tied: Vec<Option<&str>> = doc.per_target.iter().map(|t| t.monitor.as_deref()).collect();
    assert_eq!(tied, [Some("s0"), Some("s1")]);
    let header = o.out.lines().find(|l| l.trim_start().starts_with("Target")).unwrap();
    assert!(header.contains("CPU") && header.contains("RAM"), "{header}");
    // The per-target sections are in the published schema.
    let value = serde_json::to_value(&doc).unwrap();
    let v = common::schema::validator("ddp-result.schema.json");
    let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn weights_split_users_in_proportion() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start(Config::default()).unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let (w0, w2) = (format!("{}=3", urls[0]), format!("{}=2", urls[2]));
    let (_, doc) = run(&[
        "run",
        "tasks-nonreactive",
        "--target",
        &w0,
        "--target",
        &urls[1],
        "--target",
        &w2,
        "--arrival-rate",
        "12",
        "-d",
        "1s",
        "--tasks",
        "1",
    ]);
    let users: Vec<u64> = doc.per_target.iter().map(|t| t.users.launched).collect();
    assert_eq!(users, [6, 2, 4], "12 users over weights 3:1:2");
    let weights: Vec<u32> = doc.per_target.iter().map(|t| t.weight).collect();
    assert_eq!(weights, [3, 1, 2]);
    for (t, server) in doc.per_target.iter().zip(&servers) {
        assert_eq!(server.app().sessions_started.load(Ordering::SeqCst), t.users.launched);
    }
    assert_eq!(doc.settings.targets[0], w0);
}

#[test]
fn a_scenario_file_may_list_its_targets() {
    let servers: Vec<Server> = (0..2).map(|_| Server::start(Config::default()).unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.yml");
    let text = format!(
        "config:\n  target:\n    - {}\n    - {}=3\n  phases:\n    - duration: 1\n      arrivalRate: 8\n\
         scenarios:\n  - flow:\n      - connect\n      - subscribe: fetchTasks\n      - disconnect\n",
        servers[0].base_url(),
        servers[1].base_url()
    );
    std::fs::write(&file, text).unwrap();
    let (_, doc) = run(&["run", file.to_str().unwrap()]);
    let users: Vec<u64> = doc.per_target.iter().map(|t| t.users.launched).collect();
    assert_eq!(users, [2, 6]);
    assert_eq!(servers[1].app().subscriptions_ready.load(Ordering::SeqCst), 6);
}

#[test]
fn bad_target_lists_are_refused_before_anything_runs() {
    let server = Server::start(Config::default()).unwrap();
    let url = server.base_url();
    let (same, slash) = (url.clone(), format!("{url}/"));
    let rows: [(&[&str], i32, &str); 4] = [
        (&["--target", &same, "--target", &slash], 2, "is given twice"),
        (&["--target", &format!("{url}=0")], 2, "must be a whole number from 1 to 1000"),
        (&["--target", &format!("{url}=-1.5")], 2, "must be a whole number from 1 to 1000"),
        // A member nobody answers at is named; the run does not start.
        (&["--target", &url, "--target", "http://127.0.0.1:9"], 3, "nothing answers at http://127.0.0.1:9"),
    ];
    for (targets, code, words) in rows {
        let args = [&["run", "tasks-nonreactive", "--arrival-rate", "2", "-d", "1s"][..], targets].concat();
        let o = bolide(&args);
        assert_eq!(o.code, code, "{targets:?}: {}", o.err);
        assert!(o.err.contains(words), "{targets:?}: {}", o.err);
    }
    // The second probe: 1,000 copies of one target took 22 s to refuse, with 999 lines. Now one
    // line, and no resolution or /proc scan per copy.
    let mut args = vec!["run", "tasks-nonreactive", "--arrival-rate", "2", "-d", "1s"];
    for _ in 0..1000 {
        args.extend(["--target", &same]);
    }
    let o = bolide(&args);
    assert_eq!(o.code, 2, "{}", o.err);
    assert_eq!(o.err.matches("is given").count(), 1, "{}", o.err);
    assert!(o.err.contains(&format!("--target {same:?} is given 1000 times")), "{}", o.err);
    assert_eq!(server.app().sessions_started.load(Ordering::SeqCst), 0, "nothing ran");
}

#[test]
fn the_payload_publication_sends_its_bytes_on_every_subscription() {
    // The Cluster test's publication: every subscriber gets the same initial data before `ready`.
    let ddp = refserver::DdpConfig { payload_bytes: 50_000, payload_docs: 10, ..refserver::DdpConfig::default() };
    let server = Server::start(Config { ddp, ..Config::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("churn.yml");
    let text = format!(
        "config:\n  target: {}\n  phases:\n    - duration: 1\n      arrivalRate: 4\n\
         scenarios:\n  - flow:\n      - connect\n      - subscribe: payload\n      - disconnect\n",
        server.base_url()
    );
    std::fs::write(&file, text).unwrap();
    let (_, doc) = run(&["run", file.to_str().unwrap(), "--no-compression"]);
    assert_eq!(doc.summary.step_errors, 0);
    assert_eq!(server.app().subscriptions_ready.load(Ordering::SeqCst), 4);
    // Four subscriptions of 50,000 bytes of bodies each, with their DDP framing (ids, field names).
    let bytes = doc.summary.bytes_in;
    assert!((200_000..230_000).contains(&bytes), "{bytes} bytes in");
    assert_eq!(server.app().payload.len(), 10);
    let total: usize = server.app().payload.iter().map(|(_, f)| f["body"].as_str().unwrap().len()).sum();
    assert_eq!(total, 50_000);
}

#[test]
fn cluster_churn_loops_a_fixed_number_of_users() {
    // MeteorDown's closed loop: 4 users, each connect -> subscribe payload -> ready -> disconnect
    // and again until the second is over, spread over two servers (two users each).
    let ddp = refserver::DdpConfig { payload_bytes: 20_000, payload_docs: 5, ..refserver::DdpConfig::default() };
    let servers: Vec<Server> =
        (0..2).map(|_| Server::start(Config { ddp: ddp.clone(), ..Config::default() }).unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let (o, doc) =
        run(&["run", "cluster-churn", "--users", "4", "-d", "1s", "--target", &urls[0], "--target", &urls[1]]);
    assert_eq!(doc.settings.phases.len(), 1);
    assert_eq!(doc.settings.phases[0].users, Some(4));
    assert!(o.out.contains("4 users looping"), "{}", o.out);
    let users = &doc.summary.users;
    assert!(users.launched > 4, "the users came back for more: {} iterations", users.launched);
    assert_eq!((users.completed, users.failed), (users.launched, 0), "{}", o.out);
    let most_alive = doc.timeline.iter().map(|s| s.users_alive).max().unwrap();
    assert!(most_alive <= 4, "never more than the 4 users at once: {most_alive}");
    for (t, server) in doc.per_target.iter().zip(&servers) {
        let app = server.app();
        // Every iteration is a session of its own, and each made one subscription ready.
        assert_eq!(app.sessions_started.load(Ordering::SeqCst), t.users.launched);
        assert_eq!(app.subscriptions_ready.load(Ordering::SeqCst), t.users.launched);
        assert_eq!(done(t, "subscribe payload"), t.users.launched);
        assert!(t.users.launched >= 2, "two looping users at each server");
    }
    // The response time is subscribe -> ready, from every iteration.
    let sub = doc.steps.iter().find(|s| s.name == "subscribe payload").unwrap();
    assert_eq!(sub.count, users.launched);
}

#[test]
fn looping_users_refuse_what_does_not_fit() {
    let rows: [(&[&str], &str); 4] = [
        (&["run", "cluster-churn", "--users", "0"], "--users must be at least 1"),
        (&["run", "cluster-churn", "--users", "5", "--arrival-rate", "3"], "cannot be used with"),
        (
            &["capacity", "run", "cluster-churn", "--users", "5", "--from", "1", "--step", "1", "--to", "2"],
            "--users: capacity's levels are arrival rates",
        ),
        (&["run", "cluster-churn", "--users", "many"], "invalid value 'many'"),
    ];
    for (args, words) in rows {
        let o = bolide(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(words), "{args:?}: {}", o.err);
    }
}

/// Ports free on 127.0.0.1 now (bound and let go: the servers below take them at once).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// A reference server on `port` balancing over `peers` (ports), with a small payload.
fn balancer(port: u16, peers: &[u16]) -> Server {
    let ddp = refserver::DdpConfig { payload_bytes: 10_000, payload_docs: 5, ..refserver::DdpConfig::default() };
    let addr = |p: u16| std::net::SocketAddr::from(([127, 0, 0, 1], p));
    let balance = peers.iter().map(|p| addr(*p)).collect();
    Server::start(Config { addr: addr(port), ddp, balance, ..Config::default() }).unwrap()
}

fn sessions(s: &Server) -> u64 {
    s.app().sessions_started.load(Ordering::SeqCst)
}

#[test]
fn all_balancers_share_the_sessions_in_thirds() {
    let ports = free_ports(3);
    let servers: Vec<Server> = (0..3)
        .map(|i| {
            let peers: Vec<u16> = ports.iter().copied().filter(|p| *p != ports[i]).collect();
            balancer(ports[i], &peers)
        })
        .collect();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let (_, doc) = run(&[
        "run",
        "cluster-churn",
        "--arrival-rate",
        "60",
        "-d",
        "1s",
        "--target",
        &urls[0],
        "--target",
        &urls[1],
        "--target",
        &urls[2],
    ]);
    assert_eq!((doc.summary.users.completed, doc.summary.users.failed), (60, 0));
    let total: u64 = servers.iter().map(sessions).sum();
    assert_eq!(total, 60, "every session served once, none twice");
    for (t, s) in doc.per_target.iter().zip(&servers) {
        // Each entry point got 20 users: it kept every third and forwarded the others in turn.
        assert_eq!(t.users.launched, 20);
        let b = s.balance_counters();
        assert_eq!((b.kept.load(Ordering::SeqCst), b.forwarded.load(Ordering::SeqCst)), (7, 13));
        let own = sessions(s) as f64;
        assert!((own - 20.0).abs() <= 2.0, "each server within a third +-10%: {own} of 60");
        assert_eq!(s.app().subscriptions_ready.load(Ordering::SeqCst), sessions(s));
    }
}

#[test]
fn one_balancer_forwards_and_the_others_serve() {
    let ports = free_ports(3);
    let entry = balancer(ports[0], &ports[1..]);
    let others: Vec<Server> = ports[1..].iter().map(|p| balancer(*p, &[])).collect();
    let (_, doc) = run(&["run", "cluster-churn", "--arrival-rate", "30", "-d", "1s", "--target", &entry.base_url()]);
    assert_eq!(doc.summary.users.completed, 30);
    assert_eq!(sessions(&entry), 10, "the entry point serves its own turns");
    for s in &others {
        assert_eq!(sessions(s), 10, "each peer serves the connections forwarded to it");
        assert_eq!(s.connections(), 10);
    }
    // The server's own counts, as a monitoring agent would read them.
    let stats = http_get(entry.addr(), "/stats");
    let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(v["sessions_started"], 10);
    assert_eq!(v["subscriptions_ready"], 10);
    assert_eq!(v["balance"]["forwarded"], 20);
    assert_eq!(v["balance"]["kept"], 10);
    assert_eq!(v["balance"]["peers"], 2);
}

#[test]
fn a_balancer_whose_peer_is_down_serves_the_connection_itself() {
    let ports = free_ports(2);
    // ports[1] has no server: the entry point's connections there come back to it.
    let entry = balancer(ports[0], &ports[1..]);
    let (_, doc) = run(&["run", "cluster-churn", "--arrival-rate", "4", "-d", "1s", "--target", &entry.base_url()]);
    assert_eq!((doc.summary.users.completed, doc.summary.users.failed), (4, 0));
    assert_eq!(sessions(&entry), 4);
    let b = entry.balance_counters();
    assert_eq!((b.kept.load(Ordering::SeqCst), b.peer_failures.load(Ordering::SeqCst)), (2, 2));
}

#[test]
fn serve_refuses_bad_peers() {
    let rows: [(&[&str], &str); 4] = [
        (&["serve", "--port", "3999", "--balance", "http://127.0.0.1:3999"], "that is this server"),
        (&["serve", "--port", "3999", "--balance", "127.0.0.1:4001", "http://127.0.0.1:4001"], "given twice"),
        (&["serve", "--port", "3999", "--balance", "https://127.0.0.1:4001"], "over http://"),
        (&["serve", "--port", "3999", "--balance", "http://127.0.0.1"], "has no port"),
    ];
    for (args, words) in rows {
        let o = bolide(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(words), "{args:?}: {}", o.err);
    }
}

/// The body of a plain GET.
fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

#[test]
fn a_server_that_dies_mid_run_fails_its_own_users_only() {
    let servers: Vec<Server> = (0..2).map(|_| Server::start(Config::default()).unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    let mut servers = servers.into_iter();
    let (alive, doomed) = (servers.next().unwrap(), servers.next().unwrap());
    // The second server stops once the run is under way (the first has seen sessions).
    let killer = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while doomed.app().sessions_started.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let served = doomed.app().sessions_started.load(Ordering::SeqCst);
        doomed.shutdown();
        served
    });
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "run",
        "sub-churn",
        "--users",
        "4",
        "-d",
        "3s",
        "--target",
        &urls[0],
        "--target",
        &urls[1],
        "--json",
        json.to_str().unwrap(),
    ]);
    let served = killer.join().unwrap();
    assert!(served >= 3, "the second server served before it stopped");
    assert_eq!(o.code, 0, "the run goes on and ends normally: {}", o.err);
    let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let (a, b) = (&doc.per_target[0], &doc.per_target[1]);
    assert_eq!(a.users.failed, 0, "the first server's users did not notice: {}", o.out);
    // sub-churn connects ten times per iteration.
    assert_eq!(alive.app().sessions_started.load(Ordering::SeqCst), 10 * a.users.launched);
    assert!(b.users.failed > 0, "the second server's users failed: {}", o.out);
    // By class: refused connections after it stopped, closed ones as it stopped.
    let classes: Vec<&String> = b.errors_by_class.keys().collect();
    assert!(!classes.is_empty() && classes.iter().all(|c| ["connect", "closed"].contains(&c.as_str())), "{classes:?}");
    assert!(a.errors_by_class.is_empty(), "{:?}", a.errors_by_class);
    let row = o.out.lines().find(|l| l.contains(&urls[1])).unwrap();
    assert!(row.contains("connect") || row.contains("closed"), "the target's row names its errors: {row}");
}

/// `bolide serve` child processes on the given ports, stopped when dropped.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn serve_children(ports: &[u16]) -> Children {
    let children = Children(
        ports
            .iter()
            .map(|p| {
                std::process::Command::new(env!("CARGO_BIN_EXE_bolide"))
                    .args(["serve", "--port", &p.to_string(), "--threads", "1"])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for p in ports {
        while std::net::TcpStream::connect(("127.0.0.1", *p)).is_err() {
            assert!(std::time::Instant::now() < deadline, "the server on {p} did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    children
}

#[test]
fn local_servers_of_their_own_are_watched_without_being_asked() {
    let ports = free_ports(2);
    let children = serve_children(&ports);
    let urls: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let (_, doc) =
        run(&["run", "cluster-churn", "--users", "2", "-d", "1s", "--target", &urls[0], "--target", &urls[1]]);
    let watched: Vec<(&str, u32)> = doc.monitor.iter().map(|m| (m.name.as_str(), m.pid)).collect();
    let pids: Vec<u32> = children.0.iter().map(|c| c.id()).collect();
    assert_eq!(watched, [("s1", pids[0]), ("s2", pids[1])]);
    let tied: Vec<Option<&str>> = doc.per_target.iter().map(|t| t.monitor.as_deref()).collect();
    assert_eq!(tied, [Some("s1"), Some("s2")]);
    // A watched port with no target and nothing listening is a mistake, named before the run.
    let o = bolide(&["run", "cluster-churn", "--target", &urls[0], "--target", &urls[1], "--monitor", "s3=:9"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--monitor s3=:9: no target is on port 9 and nothing listens there"), "{}", o.err);
    assert!(o.err.contains(&format!("ports: {}, {}", ports[0], ports[1])), "{}", o.err);
}

#[test]
fn a_balancer_skips_a_peer_that_accepts_and_never_answers() {
    // The second probe: `serve --balance` sent connections to a peer that accepted and never
    // answered, and half the users failed. The peer's answer is timed now, and a silent peer
    // skipped: every user is served, by the entry point or the live peer.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let live = Server::start(Config::default()).unwrap();
    let entry = Server::start(Config {
        balance: vec![silent.local_addr().unwrap(), live.base_url().trim_start_matches("http://").parse().unwrap()],
        ..Config::default()
    })
    .unwrap();
    let (_, doc) = run(&["run", "sub-churn", "--target", &entry.base_url(), "--arrival-rate", "6", "-d", "2s"]);
    let users = &doc.summary.users;
    assert_eq!(users.failed, 0, "{users:?}");
    assert!(users.completed >= 10, "{users:?}");
    let c = entry.balance_counters();
    // The live peer served its turns and the silent one's (after its first failure, without
    // waiting for it again).
    assert!(c.forwarded.load(Ordering::Relaxed) >= 5, "{c:?}");
    assert_eq!(c.peer_failures.load(Ordering::Relaxed), 0, "{c:?}");
    drop(silent);
}

//! Socket.IO and GraphQL over WebSocket users against the real servers from npm (`socket.io` 4,
//! and `graphql-ws` 6 with `graphql` 16, in `tests/peers`), started on loopback by each test:
//! what bolide counts (connections, emits, acknowledgements, responses, events, `next` messages)
//! against what the servers count, over each Socket.IO transport; one of Artillery's own
//! documented Socket.IO scenarios run unchanged; an independent graphql-ws client's view of the
//! same fan-out; errors by class; the documented examples are the example files.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use bolide::stats::vu::VuDoc;
use common::*;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Runs `bolide run FILE --json TMP ARGS...`; the outcome and the document (checked against its
/// schema).
fn run(file: &str, extra: &[&str]) -> (Outcome, VuDoc) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut argv = vec!["run", file, "--json", json.to_str().unwrap()];
    argv.extend_from_slice(extra);
    let o = bolide(&argv);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document; {}\n{}", o.out, o.err));
    let problems = schema_problems("ddp-result.schema.json", &text);
    assert!(problems.is_empty(), "{problems:?}");
    (o, VuDoc::from_json(&text).unwrap())
}

/// A scenario file of `text` in `dir`.
fn scenario(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("scenario.yml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn step(doc: &VuDoc, name: &str) -> u64 {
    doc.steps.iter().find(|s| s.name == name).map_or(0, |s| s.count)
}

fn event(doc: &VuDoc, name: &str) -> u64 {
    doc.summary.events.get(name).copied().unwrap_or(0)
}

/// How many fan-out latencies the run recorded (its histogram's count).
fn fanouts(doc: &VuDoc) -> u64 {
    bolide::stats::hist::decode(&doc.histograms.fanout_us).unwrap().len()
}

fn n(v: &Value, path: &str) -> u64 {
    path.split('.').fold(v, |v, k| &v[k]).as_u64().unwrap_or(0)
}

#[test]
fn the_documented_examples_are_the_example_files() {
    documented("socketio.md", "socketio", "socketio-chat.yml");
    documented("graphql.md", "graphql", "graphql-tasks.yml");
}

#[test]
fn the_socketio_example_counts_what_the_server_counts() {
    let server = Peer::start("sio-server.mjs");
    let file = format!("{ROOT}/examples/socketio-chat.yml");
    let (o, doc) = run(&file, &["--target", &server.url("")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let c = server.counts();
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (20, 20, 0), "{}", o.out);
    assert_eq!(doc.summary.step_errors, 0, "{}", o.out);
    assert_eq!(doc.settings.transport, "socketio polling+websocket");
    // Every connection began on polling and was upgraded, as socket.io-client's are.
    assert_eq!(n(&c, "connections"), 20);
    assert_eq!(event(&doc, "socketio.connections"), 20);
    assert_eq!((n(&c, "by_transport.polling"), n(&c, "upgrades")), (20, 20));
    assert_eq!(event(&doc, "socketio.upgrades"), 20);
    // Each user: join, echo, 3 chats, whoami.
    let received: u64 = c["received"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
    assert_eq!(received, 20 * 6);
    assert_eq!(event(&doc, "socketio.emits"), received);
    assert_eq!((step(&doc, "emit chat"), step(&doc, "listen chat")), (60, 60));
    // Acknowledgements (join, whoami) and echoes, as the server sent them.
    assert_eq!(n(&c, "acks"), 40);
    assert_eq!(event(&doc, "socketio.acks_received"), 40);
    assert_eq!(n(&c, "responses"), 20);
    // The room's chats reached every member; bolide read those that came before each user left.
    assert!(event(&doc, "socketio.events_received") >= 20 + 60, "{:?}", doc.summary.events);
    assert!(event(&doc, "socketio.events_received") <= n(&c, "responses") + n(&c, "delivered"));
    // Each chat read carried its sender's time: a fan-out latency per event of the room read.
    assert_eq!(fanouts(&doc), event(&doc, "socketio.events_received") - 20, "{}", o.out);
    assert!(o.out.contains("Socket.IO     40 acks received, 20 connections, 120 emits,"), "{}", o.out);
}

#[test]
fn socketio_over_a_websocket_alone_and_over_polling_alone() {
    for (transports, shown, upgrades) in
        [("[websocket]", "socketio websocket", 0), ("[polling]", "socketio polling", 0)]
    {
        let server = Peer::start("sio-server.mjs");
        let dir = tempfile::tempdir().unwrap();
        let file = scenario(
            dir.path(),
            &format!(
                r#"config:
  target: "{}"
  phases: [{{ duration: 1, arrivalRate: 6 }}]
  socketio: {{ transports: {transports}, auth: {{ token: "t-{{{{ $arrival }}}}" }}, extraHeaders: {{ x-client-id: "c-{{{{ $arrival }}}}" }} }}
scenarios:
  - engine: socketio
    flow:
      - emit: {{ channel: whoami }}
        acknowledge:
          match: [{{ json: "$.0.auth.token", value: "t-{{{{ $arrival }}}}" }}, {{ json: "$.0.header", value: "c-{{{{ $arrival }}}}" }}]
      - emit: ["join", "room-{{{{ $vuId }}}}"]
        acknowledge: {{ data: joined }}
      - emit: ["chat", "room-{{{{ $vuId }}}}", {{ sentAt: "{{{{ $now }}}}" }}]
      - listen: chat
      - emit: {{ channel: echo, data: "x" }}
        response: {{ channel: echoed, data: "x" }}
"#,
                server.url("")
            ),
        );
        let (o, doc) = run(&file, &[]);
        assert_eq!(o.code, 0, "{transports}: {}\n{}", o.out, o.err);
        let c = server.counts();
        assert_eq!(doc.settings.transport, shown);
        assert_eq!((doc.summary.users.completed, doc.summary.step_errors), (6, 0), "{}", o.out);
        let first = if transports == "[polling]" { "polling" } else { "websocket" };
        assert_eq!(n(&c, &format!("by_transport.{first}")), 6, "{c}");
        assert_eq!(n(&c, "upgrades"), upgrades, "{c}");
        assert_eq!(event(&doc, &format!("socketio.on_{first}")), 6);
        // One room per user: each chat reached exactly its sender, who read it.
        assert_eq!((n(&c, "delivered"), event(&doc, "socketio.events_received")), (6, 12), "{c}");
        // Each user's own token and header, rendered from its variables, reached the server.
        assert_eq!((n(&c, "acks"), event(&doc, "socketio.acks_received")), (12, 12));
        assert_eq!(event(&doc, "socketio.emits"), 24);
        assert_eq!(fanouts(&doc), 6);
    }
}

/// Artillery's own example (`examples/socket-io/socket-io.yml` in artilleryio/artillery, as
/// published: its target and phases are overridden by flags, the file is not touched).
#[test]
fn artillerys_own_socketio_example_runs_unchanged() {
    let server = Peer::start("sio-server.mjs");
    let file = format!("{PEERS}/artillery-socket-io.yml");
    let (o, doc) = run(&file, &["--target", &server.url(""), "--duration", "2s", "--arrival-rate", "5"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let c = server.counts();
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (10, 10, 0), "{}", o.out);
    // Each user connects the target's namespace as it starts, then /personalised at its emit.
    assert_eq!((n(&c, "namespaces./"), n(&c, "namespaces./personalised")), (10, 10), "{c}");
    assert_eq!(event(&doc, "socketio.connections"), 20);
    // Half echo (and check the response), half ask for the user's details (and match the ack).
    assert_eq!((n(&c, "received.echo"), n(&c, "received.userDetails")), (5, 5), "{c}");
    assert_eq!((step(&doc, "emit echo /personalised"), step(&doc, "emit userDetails /personalised")), (5, 5));
    assert_eq!((n(&c, "responses"), n(&c, "acks")), (5, 5));
    assert_eq!((event(&doc, "socketio.events_received"), event(&doc, "socketio.acks_received")), (5, 5));
    assert_eq!(doc.summary.step_errors, 0);
}

#[test]
fn socketio_failures_are_errors_by_class() {
    let server = Peer::start("sio-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let run_one = |flow: &str, config: &str, target: &str| {
        let file = scenario(
            dir.path(),
            &format!(
                "config:\n  target: \"{target}\"\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\n  timeout: 2\n{config}scenarios:\n  - engine: socketio\n    flow:\n{flow}"
            ),
        );
        let (o, doc) = run(&file, &[]);
        (format!("{}\n{}", o.out, o.err), doc)
    };
    // A namespace the server does not have: its CONNECT_ERROR.
    let (_, doc) =
        run_one("      - namespace: /nowhere\n        emit: { channel: echo, data: 1 }\n", "", &server.url(""));
    assert_eq!(doc.summary.errors_by_class.get("connect"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert_eq!(event(&doc, "socketio.connect_errors"), 2);
    // The server disconnects the user: the emit's wait ends with its reason.
    let (said, doc) = run_one(
        "      - think: 0.3\n      - emit: { channel: echo, data: 1 }\n        response: { channel: echoed }\n",
        "  socketio: { auth: { token: refuse }, transports: [websocket] }\n",
        &server.url(""),
    );
    assert_eq!(doc.summary.errors_by_class.get("disconnect"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("io server disconnect"), "{said}");
    // An answer that never comes: a timeout; a wrong answer: `response` (Artillery's "data is not valid").
    let (_, doc) = run_one(
        "      - emit: { channel: echo, data: 1 }\n        response: { channel: never }\n",
        "",
        &server.url(""),
    );
    assert_eq!(doc.summary.errors_by_class.get("timeout"), Some(&2), "{:?}", doc.summary.errors_by_class);
    let (said, doc) = run_one(
        "      - emit: { channel: echo, data: a }\n        response: { channel: echoed, data: b }\n",
        "",
        &server.url(""),
    );
    assert_eq!(doc.summary.errors_by_class.get("response"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("data is not valid"), "{said}");
    let (said, doc) = run_one(
        "      - emit: { channel: ack, data: 1 }\n        acknowledge: { match: { json: \"$.0.ok\", value: false } }\n",
        "",
        &server.url(""),
    );
    assert_eq!(doc.summary.errors_by_class.get("match"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("failed match: $.0.ok is true, expected false"), "{said}");
    // Nothing listening: the run is refused before it starts, named.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let text = format!(
        "config:\n  target: \"{nobody}\"\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\nscenarios:\n  - engine: socketio\n    flow:\n      - emit: {{ channel: echo, data: 1 }}\n"
    );
    let o = bolide(&["run", &scenario(dir.path(), &text)]);
    assert_ne!(o.code, 0);
    assert!(o.err.contains("nothing answers"), "{}", o.err);
}

#[test]
fn graphql_subscriptions_fed_by_mutations_count_as_the_server_counts() {
    let server = Peer::start("gql-server.mjs");
    // An independent graphql-ws client (the library's own, in node) watches the same tasks.
    let mut watcher = Command::new("node")
        .arg(format!("{PEERS}/gql-watch.mjs"))
        .arg(server.url("/graphql").replace("http", "ws"))
        .arg("24")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    let mut lines = BufReader::new(watcher.stdout.take().unwrap());
    lines.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "subscribed");
    let file = format!("{ROOT}/examples/graphql-tasks.yml");
    // A fan-out bound no run can meet (every latency is at least 1 µs) and one any run meets.
    let (o, doc) = run(
        &file,
        &["--target", &server.url("/graphql"), "--threshold", "fanout.p50<1us", "--threshold", "fanout.max<10m"],
    );
    assert_eq!(o.code, 1, "{}\n{}", o.out, o.err);
    let verdicts: Vec<(&str, bool)> = doc.thresholds.iter().map(|t| (t.threshold.as_str(), t.ok)).collect();
    assert_eq!(verdicts, [("fanout.p50<1us", false), ("fanout.max<10m", true)]);
    let mut seen = String::new();
    lines.read_line(&mut seen).unwrap();
    let _ = watcher.wait();
    let c = server.counts();
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed), (16, 16, 0), "{}", o.out);
    assert_eq!(doc.settings.transport, "graphql-ws");
    // bolide's connections, subscriptions, queries and mutations, and every `next`, as the
    // server counted them (the independent client's one connection and subscription aside).
    assert_eq!(n(&c, "connections"), event(&doc, "graphql.connections") + 1);
    assert_eq!(n(&c, "subscriptions"), event(&doc, "graphql.subscriptions") + 1);
    assert_eq!((n(&c, "mutations"), step(&doc, "mutation Add")), (24, 24));
    assert_eq!((n(&c, "queries"), step(&doc, "query Tasks")), (8 + 1, 8));
    let independent: Value = serde_json::from_str(&seen).unwrap_or_else(|_| panic!("watcher said {seen:?}"));
    assert_eq!(independent["tasks"], 24, "the independent client saw every mutation: {independent}");
    // The independent client's: its 24 tasks and its own query's answer.
    assert_eq!(n(&c, "nexts"), event(&doc, "graphql.next_received") + 24 + 1, "{c} {:?}", doc.summary.events);
    // Each watcher waited for 3 tasks; each of its `next`s gave a fan-out latency.
    assert_eq!(step(&doc, "subscribe taskAdded"), 8);
    let fanout = doc.summary.fanout.as_ref().expect("fan-out latency");
    assert_eq!(fanouts(&doc), event(&doc, "graphql.next_received") - 24 - 8, "{}", o.out);
    eprintln!(
        "fan-out p50: bolide's watchers {} µs, the independent client {} µs",
        fanout.p50_us, independent["p50_us"]
    );
}

#[test]
fn graphql_refusals_and_errors_are_errors_by_class() {
    let server = Peer::start("gql-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let run_one = |flow: &str, config: &str| {
        let file = scenario(
            dir.path(),
            &format!(
                "config:\n  target: \"{}\"\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\n  timeout: 2\n{config}scenarios:\n  - engine: graphql-ws\n    flow:\n{flow}",
                server.url("/graphql")
            ),
        );
        let (o, doc) = run(&file, &[]);
        (format!("{}\n{}", o.out, o.err), doc)
    };
    // No token in connection_init: the server closes with 4403.
    let (said, doc) = run_one("      - execute: { query: \"{ hello }\" }\n", "");
    assert_eq!(doc.summary.errors_by_class.get("connect"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("4403"), "{said}");
    let auth = "  graphql: { connectionParams: { token: secret } }\n";
    // A field the schema does not have: the server's GraphQL error.
    let (said, doc) = run_one("      - execute: { query: \"{ nothing }\" }\n", auth);
    assert_eq!(doc.summary.errors_by_class.get("graphql"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("Cannot query field"), "{said}");
    // `complete` with no subscription to stop.
    let (said, doc) = run_one("      - execute: { query: \"{ hello }\" }\n      - complete\n", auth);
    assert_eq!(doc.summary.errors_by_class.get("scenario"), Some(&2), "{:?}", doc.summary.errors_by_class);
    assert!(said.contains("no subscription"), "{said}");
}

/// Two segments of the Socket.IO example as processes of their own, started together, merged:
/// the merged document's counts are the server's.
#[test]
fn segments_of_a_socketio_run_merge_to_the_servers_counts() {
    let server = Peer::start("sio-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{ROOT}/examples/socketio-chat.yml");
    let at = bolide::segment::format_start(std::time::SystemTime::now() + std::time::Duration::from_secs(2));
    let target = server.url("");
    let children: Vec<_> = (1..=2)
        .map(|i| {
            let json = dir.path().join(format!("seg-{i}.json"));
            let child = Command::new(env!("CARGO_BIN_EXE_bolide"))
                .args(["run", &file, "--target", &target, "--start-at", &at, "--segment", &format!("{i}/2")])
                .args(["--json", json.to_str().unwrap(), "-q"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, json)
        })
        .collect();
    let docs: Vec<String> = children
        .into_iter()
        .map(|(child, json)| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            json.display().to_string()
        })
        .collect();
    let merged = dir.path().join("merged.json");
    let o = bolide(&["merge", &docs[0], &docs[1], "-o", merged.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&merged).unwrap();
    assert!(schema_problems("ddp-result.schema.json", &text).is_empty());
    let m = VuDoc::from_json(&text).unwrap();
    let c = server.counts();
    assert_eq!((m.summary.users.launched, m.summary.users.completed), (20, 20));
    assert_eq!(event(&m, "socketio.connections"), n(&c, "connections"));
    let received: u64 = c["received"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
    assert_eq!(event(&m, "socketio.emits"), received);
    assert_eq!(event(&m, "socketio.acks_received"), n(&c, "acks"));
    assert_eq!(step(&m, "emit chat"), 60);
    assert_eq!(fanouts(&m), event(&m, "socketio.events_received") - 20);
}

/// A Socket.IO run goes where a DDP run goes: `bench` repeats it, `compare` reads the series, the
/// CSV seconds, the JUnit verdicts and the HTML report are written from its document.
#[test]
fn socketio_runs_through_bench_compare_and_the_outputs() {
    let server = Peer::start("sio-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{ROOT}/examples/socketio-chat.yml");
    let (csv, junit, html) = (dir.path().join("s.csv"), dir.path().join("j.xml"), dir.path().join("r.html"));
    let (o, doc) = run(
        &file,
        &[
            "--target",
            &server.url(""),
            "--duration",
            "1s",
            "--out",
            &format!("csv={}", csv.display()),
            "--junit",
            junit.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--threshold",
            "error_rate<1%",
        ],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!(doc.summary.users.completed, 4);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().count() > 1 && csv.contains("emit echo"), "{csv}");
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(junit.contains("error_rate&lt;1%") || junit.contains("error_rate<1%"), "{junit}");
    assert!(std::fs::read_to_string(&html).unwrap().contains("emit echo"));
    // Two series of two runs each, compared.
    let series: Vec<String> = ["a", "b"]
        .iter()
        .map(|label| {
            let out = dir.path().join(label);
            let o = bolide(&[
                "bench",
                "run",
                &file,
                "--target",
                &server.url(""),
                "--duration",
                "1s",
                "--runs",
                "2",
                "--label",
                label,
                "--out",
                out.to_str().unwrap(),
            ]);
            assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
            out.display().to_string()
        })
        .collect();
    let o = bolide(&["compare", &series[0], &series[1], "--format", "json"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let cmp: Value = serde_json::from_str(&o.out).unwrap_or_else(|_| panic!("{}", o.out));
    assert!(cmp.to_string().contains("\"b\""), "{cmp}");
    let c = server.counts();
    // 4 users in the first run, then 4 in each of the 4 bench runs.
    assert_eq!(n(&c, "connections"), 4 * 5, "{c}");
}

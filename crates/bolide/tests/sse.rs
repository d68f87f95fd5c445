//! Server-Sent Events and streamed LLM completions (`engine: sse`) against a real SSE server
//! from PyPI (`sse-starlette` on `uvicorn`, `tests/peers/sse_server.py`), started on loopback by
//! each test: what bolide counts (streams, events, reconnections, requests, tokens, the server's
//! usage) against what the server counts it streamed; the documented examples are the example
//! files, and each runs unchanged against the server given by `--target`.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bolide::stats::vu::VuDoc;
use common::*;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The Python that has sse-starlette, uvicorn and hypercorn: `BOLIDE_SSE_PYTHON`, the virtual
/// environment `.ci/run` makes (`target/sse-venv`), or `python3`.
fn python() -> String {
    let candidates = [
        std::env::var("BOLIDE_SSE_PYTHON").unwrap_or_default(),
        format!("{ROOT}/target/sse-venv/bin/python"),
        "python3".to_string(),
    ];
    for p in candidates.iter().filter(|p| !p.is_empty()) {
        let ok = Command::new(p)
            .args(["-c", "import sse_starlette, uvicorn, hypercorn"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return p.clone();
        }
    }
    panic!("no Python with sse-starlette, uvicorn and hypercorn: python3 -m venv target/sse-venv && target/sse-venv/bin/pip install sse-starlette uvicorn hypercorn (as .ci/run does)")
}

/// The SSE peer on a loopback port, stopped when dropped.
struct SsePeer {
    child: Child,
    port: u16,
    /// Where it speaks TLS (hypercorn given a certificate); `port` is then in clear.
    tls_port: Option<u16>,
}

impl SsePeer {
    /// The peer on uvicorn (HTTP/1.1).
    fn start() -> SsePeer {
        SsePeer::on("uvicorn")
    }

    /// The same app on `server`: `uvicorn` (HTTP/1.1) or `hypercorn` (HTTP/1.1, and HTTP/2 in
    /// clear by prior knowledge); over TLS too when given a directory for a self-signed
    /// certificate (`hypercorn:DIR`: HTTP/2 by ALPN, its stats in clear on another port;
    /// `uvicorn:DIR`: HTTP/1.1 alone).
    fn on(server: &str) -> SsePeer {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (port, mut tls_port) = (free(), None);
        let mut cmd = Command::new(python());
        let certify = |dir: &str| {
            let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
            std::fs::write(format!("{dir}/cert.pem"), cert.cert.pem()).unwrap();
            std::fs::write(format!("{dir}/key.pem"), cert.signing_key.serialize_pem()).unwrap();
        };
        match server.split_once(':') {
            // uvicorn over TLS (no HTTP/2, no ALPN h2), on its one port: no stats in clear.
            Some(("uvicorn", dir)) => {
                certify(dir);
                tls_port = Some(port);
                cmd.args(["-m", "uvicorn", "sse_server:app", "--host", "127.0.0.1", "--log-level", "warning"])
                    .args(["--port", &port.to_string()])
                    .args(["--ssl-certfile", &format!("{dir}/cert.pem"), "--ssl-keyfile", &format!("{dir}/key.pem")])
            }
            Some(("hypercorn", dir)) => {
                certify(dir);
                let tls = *tls_port.insert(free());
                cmd.args(["-m", "hypercorn", "sse_server:app", "--log-level", "warning", "--workers", "0"])
                    .args(["--bind", &format!("127.0.0.1:{tls}"), "--insecure-bind", &format!("127.0.0.1:{port}")])
                    .args(["--certfile", &format!("{dir}/cert.pem"), "--keyfile", &format!("{dir}/key.pem")])
            }
            _ if server == "hypercorn" => cmd
                .args(["-m", "hypercorn", "sse_server:app", "--log-level", "warning", "--workers", "0"])
                .args(["--bind", &format!("127.0.0.1:{port}")]),
            _ => cmd
                .args(["-m", "uvicorn", "sse_server:app", "--host", "127.0.0.1", "--log-level", "warning"])
                .args(["--port", &port.to_string()]),
        };
        let child = cmd
            .current_dir(format!("{ROOT}/crates/bolide/tests/peers"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("python runs {server}: {e}"));
        let began = Instant::now();
        for p in [Some(port), tls_port].into_iter().flatten() {
            while TcpStream::connect(("127.0.0.1", p)).is_err() {
                assert!(began.elapsed() < Duration::from_secs(30), "{server} did not listen on {p}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        SsePeer { child, port, tls_port }
    }

    fn url(&self, path: &str) -> String {
        match self.tls_port {
            Some(p) => format!("https://127.0.0.1:{p}{path}"),
            None => format!("http://127.0.0.1:{}{path}", self.port),
        }
    }

    /// What the server says it streamed.
    fn stats(&self) -> Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        use std::io::{Read, Write};
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    }
}

impl Drop for SsePeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `bolide run FILE --json TMP ARGS...`; the outcome and the document (checked against its
/// schema).
fn run(file: &str, extra: &[&str]) -> (Outcome, VuDoc, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut argv = vec!["run", file, "--json", json.to_str().unwrap()];
    argv.extend_from_slice(extra);
    let o = bolide(&argv);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no document; {}\n{}", o.out, o.err));
    let problems = schema_problems("ddp-result.schema.json", &text);
    assert!(problems.is_empty(), "{problems:?}");
    (o, VuDoc::from_json(&text).unwrap(), serde_json::from_str(&text).unwrap())
}

fn scenario(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("scenario.yml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn event(doc: &VuDoc, name: &str) -> u64 {
    doc.summary.events.get(name).copied().unwrap_or(0)
}

fn step(doc: &VuDoc, name: &str) -> (u64, u64) {
    doc.steps.iter().find(|s| s.name == name).map_or((0, 0), |s| (s.count, s.errors))
}

/// How many samples a measure of the run took (its histogram's count).
fn measured(doc: &VuDoc, name: &str) -> u64 {
    doc.histograms.measures.get(name).map_or(0, |h| bolide::stats::hist::decode(h).unwrap().len())
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap()
}

#[test]
fn streams_count_what_the_server_streamed() {
    let peer = SsePeer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 4}]\n",
            "  sse: { retry: 50ms }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - stream: \"/events?n=6&gap_ms=2\"\n",
            // Ended by the server after 3 events: asked again with Last-Event-ID, resumed at 3.
            "      - stream: { url: \"/events?n=10&drop_after=3\", events: 10, capture: { as: last, path: i } }\n",
            "      - stream: { url: \"/events?n=5\", until: { data: done }, match: { status: done } }\n",
            "      - stream: { url: \"/events?n=7\", events: 2, keep: true }\n",
            "      - listen: { channel: tick, count: 5 }\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url("")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let s = peer.stats();
    assert_eq!(doc.summary.users.completed, 4, "{}", o.out);
    // Four users, each: 6, 3 + 7 (two streams), 5, and 7 (kept, listened to its end).
    assert_eq!(n(&s, "events"), 4 * (6 + 10 + 5 + 7));
    assert_eq!(event(&doc, "sse.events"), n(&s, "events"), "{:?}", doc.summary.events);
    assert_eq!(event(&doc, "sse.streams"), n(&s, "streams"));
    assert_eq!(event(&doc, "sse.reconnects"), n(&s, "resumed"));
    assert_eq!(n(&s, "resumed"), 4);
    // One comment a stream.
    assert_eq!(event(&doc, "sse.comments"), n(&s, "streams"));
    for name in ["stream /events?n=6&gap_ms=2", "stream /events?n=10&drop_after=3", "listen tick"] {
        assert_eq!(step(&doc, name), (4, 0), "{name}");
    }
    assert_eq!(measured(&doc, "sse.first_event"), 4 * 4, "{:?}", doc.summary.measures);
    // A gap between every two events a step read, not across a reconnection (the kept stream's
    // events after its step are listen's): 5, 2 + 6, 4 and 1 a user.
    assert_eq!(measured(&doc, "sse.gap"), 4 * (5 + 8 + 4 + 1), "{:?}", doc.summary.measures);
}

#[test]
fn chat_and_completion_tokens_are_the_servers() {
    let peer = SsePeer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 3}]\n",
            "  llm: { goodput: \"ttft:60s,tpot:60s\" }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - chat: { messages: [{ role: user, content: \"hi {{ $vuId }}\" }], max_tokens: 5, capture: said }\n",
            // At least 2 tokens each: every request has a TPOT.
            "      - chat: { prompt: \"Once\", max_tokens: { mean: 4, stddev: 2, min: 2, max: 6 } }\n",
            "      - chat: { model: named, input_tokens: 12, max_tokens: 3, temperature: 0 }\n",
        ),
    );
    let (o, doc, v) = run(&file, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let s = peer.stats();
    assert_eq!(event(&doc, "llm.requests"), 9, "{:?}", doc.summary.events);
    assert_eq!(n(&s, "chat_requests"), 9);
    // Tokens are the chunks that carried text: the server's own count, and its usage's.
    assert_eq!(event(&doc, "llm.output_tokens"), n(&s, "chat_tokens"));
    assert_eq!(event(&doc, "llm.usage_completion_tokens"), n(&s, "chat_tokens"));
    assert_eq!(event(&doc, "llm.usage_responses"), n(&s, "usage_chunks"));
    assert_eq!(event(&doc, "llm.good_requests"), 9);
    // vLLM's total tokens: the prompts' and the answers', as the server's usage counted them.
    assert_eq!(
        event(&doc, "llm.total_tokens"),
        event(&doc, "llm.usage_prompt_tokens") + event(&doc, "llm.usage_completion_tokens")
    );
    assert!(event(&doc, "llm.usage_prompt_tokens") > 0);
    // The report says each throughput per second of the run, as vLLM's benchmark does.
    let line = o.out.lines().find(|l| l.trim_start().starts_with("Throughput")).unwrap_or_else(|| panic!("{}", o.out));
    for name in ["llm.requests", "llm.output_tokens", "llm.total_tokens", "llm.good_requests", "sse.events"] {
        let want = event(&doc, name) as f64 / doc.summary.duration_s;
        let said = line.split(", ").find_map(|p| {
            p.trim().strip_suffix(&format!(" {name}/s")).map(|v| v.rsplit(' ').next().unwrap().replace(',', ""))
        });
        let said: f64 = said.unwrap_or_else(|| panic!("{name} in {line}")).parse().unwrap();
        assert!((said - want).abs() <= 0.05, "{name}: {said} against {want} in {line}");
    }
    // The report's first screen: each measure at p99, and the first declared throughput (tokens)
    // as the headline.
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("run.json");
    std::fs::write(&json, serde_json::to_string(&v).unwrap()).unwrap();
    let html = tmp.path().join("run.html");
    let r = bolide(&["report", json.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.err);
    let page = std::fs::read_to_string(&html).unwrap();
    for m in ["llm.ttft", "llm.itl", "llm.tpot", "llm.e2el"] {
        assert!(page.contains(&format!("{{\"label\":\"{m} p99\",\"value\":")), "{m} p99 on the first screen");
    }
    let tokens = event(&doc, "llm.output_tokens") as f64 / doc.summary.duration_s;
    let headline = format!("{{\"label\":\"Throughput\",\"value\":\"{tokens:.1} llm.output_tokens/s\"");
    assert!(page.contains(&headline), "{headline}");
    // No WebSocket in an SSE run: none was offered compression.
    assert!(!doc.settings.compression && o.out.contains("compression off"), "{}", o.out);
    // Each second has the tokens that came in it: the timeline adds up to the run's.
    let per_second = |name: &str| doc.timeline.iter().filter_map(|s| s.counts.events.get(name)).sum::<u64>();
    assert_eq!(per_second("llm.output_tokens"), n(&s, "chat_tokens"));
    assert_eq!(per_second("sse.events"), event(&doc, "sse.events"));
    // The model the server lists, asked once per worker; a chat that names one sends it.
    let models: Vec<&str> = s["models"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(models.iter().filter(|m| **m == "named").count(), 3, "{models:?}");
    assert_eq!(models.iter().filter(|m| **m == "peer-model").count(), 6, "{models:?}");
    assert_eq!(measured(&doc, "llm.ttft"), 9, "{:?}", doc.summary.measures);
    assert_eq!(measured(&doc, "llm.e2el"), 9);
    assert_eq!(measured(&doc, "llm.tpot"), 9);
    // ITL: every gap between tokens, n - 1 per request.
    assert_eq!(measured(&doc, "llm.itl"), n(&s, "chat_tokens") - 9);

    // A server that sends no usage: tokens counted from the chunks alone, and the document says
    // so (no usage responses).
    let (o, doc, _) = run(&file, &["--target", &peer.url("/nousage")]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let s2 = peer.stats();
    assert_eq!(event(&doc, "llm.output_tokens"), n(&s2, "chat_tokens") - n(&s, "chat_tokens"));
    assert_eq!(event(&doc, "llm.usage_responses"), 0);

    // --goodput replaces config.llm.goodput: no first token comes within a nanosecond, so no
    // request is good; every one is within a minute of it.
    let (o, doc, _) = run(&file, &["--target", &peer.url(""), "--goodput", "ttft:1ns"]);
    assert_eq!((o.code, event(&doc, "llm.requests"), event(&doc, "llm.good_requests")), (0, 9, 0), "{}", o.err);
    let (_, doc, _) = run(&file, &["--target", &peer.url(""), "--goodput", " e2el:60s , itl:60s"]);
    assert_eq!(event(&doc, "llm.good_requests"), 9);
    for (bad, says) in [
        ("ttft", "--goodput: \"ttft\" is not a level with a duration"),
        ("ttft:fast", "\"ttft:fast\" is not a level"),
        ("speed:1s", "\"speed:1s\" is not a level"),
    ] {
        let o = bolide(&["run", &file, "--target", &peer.url(""), "--goodput", bad]);
        assert_eq!(o.code, 2, "{bad}: {}", o.err);
        assert!(o.err.contains(says) && o.err.contains("e.g. --goodput ttft:500ms,tpot:50ms"), "{bad}: {}", o.err);
    }
    let streams = scenario(dir.path(), "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 1}]\nscenarios:\n  - engine: sse\n    flow: [{ stream: / }]\n");
    let o = bolide(&["run", &streams, "--goodput", "ttft:1s"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--goodput is for chat steps (engine: sse), and the scenario has none"), "{}", o.err);
}

/// After the users, an LLM run is read as any other: a capacity ladder of the documented
/// example has each level's output tokens per second in all beside what one user gets (from the
/// counts and latency the protocol declared, kept in each document), a summary it is drawn again
/// from, and compare sets the levels' TTFT and tokens per second side by side.
#[test]
fn an_llm_ladder_and_compare_read_what_the_protocol_declared() {
    let peer = SsePeer::start();
    let tmp = tempfile::tempdir().unwrap();
    let (cap, summary) = (tmp.path().join("CAP"), tmp.path().join("C.json"));
    let example = format!("{ROOT}/examples/llm-chat.yml");
    let o = bolide(&[
        "capacity",
        &example,
        "--target",
        &peer.url(""),
        "--from",
        "2",
        "--step",
        "2",
        "--to",
        "4",
        "-d",
        "1s",
        "--threshold",
        "llm.ttft.p99<60s",
        "--out",
        cap.to_str().unwrap(),
        "--json",
        summary.to_str().unwrap(),
    ]);
    // Passed, or no verdict where this shared machine was the limit (4): a ladder either way.
    assert!([0, 4].contains(&o.code), "{}\n{}", o.out, o.err);
    let docs: Vec<std::path::PathBuf> = std::fs::read_dir(&cap)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains("-level-"))
        .collect();
    // Both levels ran, unless the first had no verdict on a busy machine (the ladder stops there).
    assert!(docs.len() == 2 || (o.code == 4 && docs.len() == 1), "{docs:?}\n{}", o.out);
    // The documents' tokens are the server's, and each says what its protocol declared.
    let mut tokens = 0;
    for d in &docs {
        let doc = VuDoc::from_json(&std::fs::read_to_string(d).unwrap()).unwrap();
        let declared = ["llm.output_tokens", "llm.total_tokens", "llm.requests", "llm.good_requests", "sse.events"];
        assert_eq!(doc.summary.throughputs, declared, "{}", d.display());
        assert_eq!(doc.summary.per_user.get("llm.tpot").map(String::as_str), Some("Tokens/s per user"));
        tokens += event(&doc, "llm.output_tokens");
    }
    assert_eq!(tokens, n(&peer.stats(), "chat_tokens"));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    for l in s["levels"].as_array().unwrap() {
        let m = &l["measures"];
        assert!(m["events_per_s"]["llm.output_tokens_per_s"].as_f64().is_some_and(|x| x > 0.0), "{l}");
        assert_eq!(m["per_user"]["llm.tpot.p50"], "Tokens/s per user", "{l}");
    }
    // The table capacity printed, and the same drawn again from its summary: a column of tokens
    // in all and one of a user's, a figure in each level's row (unless the level failed).
    let (code, again, err) = {
        let o = bolide(&["report", summary.to_str().unwrap(), "--format", "md", "-o", "-"]);
        (o.code, o.out, o.err)
    };
    assert_eq!(code, 0, "{err}");
    for text in [&o.out, &again] {
        let table = common::md_table(text, "# Connections").expect("the ladder's table");
        // (Markdown escapes the underscore.)
        let col = |name: &str| {
            table[0].iter().position(|h| h.replace("\\_", "_") == name).unwrap_or_else(|| panic!("{name}: {text}"))
        };
        let (all, one) = (col("llm.output_tokens/s"), col("Tokens/s per user"));
        for row in &table[1..] {
            for c in [all, one] {
                assert!(row[c] == "x" || row[c].replace(',', "").parse::<f64>().is_ok_and(|x| x > 0.0), "{row:?}");
            }
        }
    }
    // compare: the levels' TTFT and output tokens per second, each a row of its own.
    let (first, last) = (docs[0].to_str().unwrap(), docs[docs.len() - 1].to_str().unwrap());
    let o = bolide(&["compare", first, last, "--allow-different-workloads"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    for row in ["llm.ttft.p99", "llm.output_tokens_per_s"] {
        assert!(o.out.contains(row), "{row}: {}", o.out);
    }
}

/// Segments and an exact merge: two `--segment I/2` processes of the documented LLM example
/// against one server, sharing a start; the merged document's requests and tokens are the
/// server's, its TTFT and ITL histograms hold every request's, each second's tokens add up, and
/// it keeps what the protocol declared.
#[test]
fn llm_segments_merge_to_the_servers_counts() {
    let peer = SsePeer::start();
    let tmp = tempfile::tempdir().unwrap();
    let start = bolide::segment::parse_start_at("+2s", std::time::SystemTime::now()).unwrap();
    let at = bolide::segment::format_start(start);
    let example = format!("{ROOT}/examples/llm-chat.yml");
    let target = peer.url("");
    let children: Vec<(Child, std::path::PathBuf)> = (1..=2)
        .map(|i| {
            let json = tmp.path().join(format!("seg-{i}.json"));
            let args = ["run", &example, "--target", &target, "-d", "1s", "--arrival-rate", "6", "--start-at", &at];
            let child = Command::new(env!("CARGO_BIN_EXE_bolide"))
                .args(args)
                .args(["--segment", &format!("{i}/2"), "--json", json.to_str().unwrap(), "-q"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, json)
        })
        .collect();
    let mut docs = Vec::new();
    for (child, json) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}: {}", json.display(), String::from_utf8_lossy(&out.stderr));
        docs.push(json);
    }
    let merged = tmp.path().join("merged.json");
    let o = bolide(&["merge", docs[0].to_str().unwrap(), docs[1].to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&merged).unwrap();
    let problems = schema_problems("ddp-result.schema.json", &text);
    assert!(problems.is_empty(), "{problems:?}");
    let m = VuDoc::from_json(&text).unwrap();
    let s = peer.stats();
    assert_eq!(event(&m, "llm.requests"), 6, "{:?}", m.summary.events);
    assert_eq!(n(&s, "chat_requests"), 6);
    assert_eq!(event(&m, "llm.output_tokens"), n(&s, "chat_tokens"));
    assert_eq!(measured(&m, "llm.ttft"), 6);
    assert_eq!(measured(&m, "llm.itl"), n(&s, "chat_tokens") - 6);
    let per_second: u64 = m.timeline.iter().filter_map(|sec| sec.counts.events.get("llm.output_tokens")).sum();
    assert_eq!(per_second, n(&s, "chat_tokens"));
    let declared = ["llm.output_tokens", "llm.total_tokens", "llm.requests", "llm.good_requests", "sse.events"];
    assert_eq!(m.summary.throughputs, declared);
    assert_eq!(m.summary.per_user.get("llm.tpot").map(String::as_str), Some("Tokens/s per user"));
}

/// Over HTTP/2 (`config.sse.http2`, hypercorn speaking it in clear): the same counts as over
/// HTTP/1.1, every request an HTTP/2 stream, and a user's streams on one connection: its chats,
/// the model lookup, the stream asked again and the stream it keeps open while it goes on.
#[test]
fn streams_and_chats_go_over_http2() {
    let peer = SsePeer::on("hypercorn");
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            // A second between arrivals: the last user's streams end well before the phases do.
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 3, arrivalCount: 3}]\n",
            "  sse: { retry: 50ms, http2: true }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            // Kept open for 1.2 s while the other steps go, then listened to its end.
            "      - stream: { url: \"/events?n=30&gap_ms=40\", events: 2, keep: true }\n",
            "      - stream: \"/events?n=6&gap_ms=2\"\n",
            "      - stream: { url: \"/events?n=10&drop_after=3\", events: 10 }\n",
            "      - chat: { messages: [{ role: user, content: hi }], max_tokens: 5 }\n",
            "      - chat: { prompt: Once, max_tokens: 3 }\n",
            "      - listen: { channel: tick, count: 28 }\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let s = peer.stats();
    assert_eq!(n(&s, "events"), 3 * (30 + 6 + 10));
    // A chat's events: its tokens, and the role, empty, finish, usage and [DONE] chunks (a
    // completion has no role chunk).
    assert_eq!(event(&doc, "sse.events"), n(&s, "events") + n(&s, "chat_tokens") + 3 * (5 + 4), "{s}");
    assert_eq!(event(&doc, "sse.streams"), n(&s, "streams") + n(&s, "chat_requests"));
    assert_eq!(event(&doc, "sse.reconnects"), n(&s, "resumed"));
    assert_eq!((n(&s, "resumed"), n(&s, "chat_requests")), (3, 6));
    assert_eq!(event(&doc, "llm.output_tokens"), n(&s, "chat_tokens"));
    assert_eq!(n(&s, "chat_tokens"), 3 * (5 + 3));
    // Every request an HTTP/2 stream (the streams, the chats, the model asked once per worker),
    // each user's on one connection.
    assert_eq!(n(&s, "http2_requests"), n(&s, "requests"), "{s}");
    assert!(n(&s, "requests") > n(&s, "streams") + n(&s, "chat_requests"), "{s}");
    assert_eq!(n(&s, "http2_connections"), 3, "{s}");

    // A step may say otherwise: this one over HTTP/1.1 on the same server.
    let other = tempfile::tempdir().unwrap();
    let mixed = scenario(
        other.path(),
        "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 2}]\n  sse: { http2: true }\n\
         scenarios:\n  - engine: sse\n    flow:\n      - stream: { url: \"/events?n=2\", http2: false }\n      - stream: \"/events?n=3\"\n",
    );
    let before = peer.stats();
    let (o, doc, _) = run(&mixed, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let after = peer.stats();
    assert_eq!(n(&after, "http2_requests") - n(&before, "http2_requests"), 2);
    assert_eq!(n(&after, "requests") - n(&before, "requests"), 4);
    assert_eq!(event(&doc, "sse.events"), n(&after, "events") - n(&before, "events"));

    // A stream cut by its step (two events of a thousand) is reset, and the connection carries
    // the next: the server ended that stream unfinished, one connection a user.
    let cut = scenario(
        other.path(),
        "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 2}]\n  sse: { http2: true }\n\
         scenarios:\n  - engine: sse\n    flow:\n      - stream: { url: \"/events?n=1000&gap_ms=5\", events: 2 }\n      - think: 1\n      - stream: \"/events?n=3\"\n",
    );
    let before = peer.stats();
    let (o, doc, _) = run(&cut, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let after = peer.stats();
    let delta = |k: &str| n(&after, k) - n(&before, k);
    assert_eq!((delta("streams"), delta("completed"), delta("http2_connections")), (4, 2, 2), "{after}");
    // Not reset, each cut stream would have gone on for the second the user thinks (200 events).
    assert!(delta("events") < 2 * (3 + 50) && event(&doc, "sse.events") <= delta("events"), "{after}");

    // Over TLS: HTTP/2 by ALPN, the same counts.
    let tls = SsePeer::on(&format!("hypercorn:{}", other.path().display()));
    let (o, doc, _) = run(&file, &["--target", &tls.url(""), "--insecure"]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let s = tls.stats();
    assert_eq!((n(&s, "http2_requests"), n(&s, "http2_connections")), (n(&s, "requests"), 3), "{s}");
    assert_eq!(event(&doc, "llm.output_tokens"), n(&s, "chat_tokens"));
    assert_eq!(event(&doc, "sse.events"), n(&s, "events") + n(&s, "chat_tokens") + 3 * (5 + 4), "{s}");

    // A server that speaks HTTP/1.1 alone: each user's step fails and says why.
    let h1 = SsePeer::start();
    let (o, doc, _) = run(&file, &["--target", &h1.url("")]);
    assert_eq!(doc.summary.users.completed, 0, "{}\n{}", o.out, o.err);
    let said = format!("{}{}", o.out, o.err);
    assert!(said.contains("does not speak HTTP/2") && said.contains("without http2: true"), "{said}");
    assert_eq!(n(&h1.stats(), "streams"), 0);
    // Over TLS, a server that does not agree to ALPN h2: the users' connections fail, saying so.
    let tls_dir = tempfile::tempdir().unwrap();
    let h1_tls = SsePeer::on(&format!("uvicorn:{}", tls_dir.path().display()));
    let (o, doc, _) = run(&file, &["--target", &h1_tls.url(""), "--insecure"]);
    assert_eq!((doc.summary.users.completed, doc.summary.users.failed), (0, 3), "{}\n{}", o.out, o.err);
    let said = format!("{}{}", o.out, o.err);
    assert!(said.contains("does not speak HTTP/2") && said.contains("without http2: true"), "{said}");
}

/// Over HTTP/2, a stream the server resets before its events are in is asked again with
/// Last-Event-ID, as a closed connection is over HTTP/1.1 (node's http2 server resets it).
#[test]
fn a_stream_reset_over_http2_is_asked_again() {
    let peer = Peer::start_with("sse-hold.mjs", &["h2c"]);
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 2}]\n",
            "  sse: { http2: true, retry: 10ms }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - stream: { url: /reset, events: 5, capture: { as: last } }\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    assert_eq!((event(&doc, "sse.events"), event(&doc, "sse.reconnects"), event(&doc, "sse.streams")), (10, 2, 4));
    // A stream read until the server ends it: the reset ends it, as a close does, no error.
    let other = tempfile::tempdir().unwrap();
    let to_end = scenario(other.path(), &std::fs::read_to_string(&file).unwrap().replace(", events: 5", ""));
    let (o, doc, _) = run(&to_end, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    assert_eq!((event(&doc, "sse.events"), event(&doc, "sse.reconnects")), (4, 0));

    // A kept stream the server resets is asked again on the user's own connection, as a
    // browser's EventSource asks: the server sees one connection a user, however many times the
    // stream is asked again (events 2 to 5 counted by listen: the first reset, then its resumption).
    let counts = || {
        let text = common::get(peer.said["counts_port"].as_u64().unwrap() as u16, "/counts");
        serde_json::from_str::<Value>(text.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    };
    let before = counts();
    let kept = tempfile::tempdir().unwrap();
    let file = scenario(
        kept.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 2}]\n",
            "  sse: { http2: true, retry: 10ms }\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - stream: { url: /reset, events: 1, keep: true }\n",
            "      - listen: { channel: \"*\", count: 4, timeout: 10s }\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    assert!(event(&doc, "sse.reconnects") >= 2, "{:?}", doc.summary.events);
    let after = counts();
    let asked = n(&after, "requests") - n(&before, "requests");
    assert_eq!(asked, 2 + event(&doc, "sse.reconnects"), "every stream asked: {after}");
    // One connection a user, and the one bolide opens to see that the target is up.
    assert_eq!(n(&after, "connections") - n(&before, "connections"), 2 + 1, "one connection a user: {after}");

    // A connection the server ends (GOAWAY) takes no new stream: the kept stream is asked again on
    // a new one at once, which is the user's from then on.
    let goaway = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&file).unwrap().replace("/reset", "/goaway");
    let (o, doc, _) = run(&scenario(goaway.path(), &text), &["--target", &peer.url("")]);
    assert_eq!((o.code, doc.summary.step_errors), (0, 0), "{}\n{}", o.out, o.err);
    let last = counts();
    assert_eq!(n(&last, "requests") - n(&after, "requests"), 2 + event(&doc, "sse.reconnects"), "{last}");
    assert_eq!(n(&last, "connections") - n(&after, "connections"), 2 * 2 + 1, "two connections a user: {last}");
}

/// A stream read until the server ends it ends with the run's phases (`-d` shortens the run):
/// the step is done, not failed, with what it read.
#[test]
fn a_stream_without_end_ends_with_the_run() {
    let peer = SsePeer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 60, arrivalRate: 1}]\n",
            "scenarios:\n  - engine: sse\n    flow:\n",
            "      - stream: { url: \"/events?n=1000000&gap_ms=20\", timeout: 10m }\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url(""), "-d", "2s"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let u = &doc.summary.users;
    assert_eq!((u.launched, u.completed, u.failed, doc.summary.step_errors), (2, 2, 0, 0), "{}", o.out);
    // Both users read until the phases' end, 2 s after the start: not the step's 10 minutes.
    assert!(doc.summary.duration_s < 120.0, "{}", doc.summary.duration_s);
    let read = event(&doc, "sse.events");
    assert!(read > 0 && read <= n(&peer.stats(), "events"), "{read} {:?}", peer.stats());
}

#[test]
fn a_stream_that_is_none_fails_with_the_servers_words() {
    let peer = SsePeer::start();
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        concat!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{duration: 1, arrivalCount: 2}]\n",
            "scenarios:\n  - engine: sse\n    flow:\n      - stream: /nowhere\n",
        ),
    );
    let (o, doc, _) = run(&file, &["--target", &peer.url("")]);
    assert_eq!(doc.summary.errors_by_class["status"], 2, "{}\n{}", o.out, o.err);
    let said = format!("{}{}", o.out, o.err);
    assert!(said.contains("status 404") && said.contains("Not Found"), "{said}");
}

#[test]
fn the_documented_examples_are_the_example_files() {
    documented("sse.md", "sse-stream", "sse-stream.yml");
    documented("sse.md", "sse-notifications", "sse-notifications.yml");
    documented("sse.md", "llm-chat", "llm-chat.yml");
    documented("sse.md", "llm-synthetic", "llm-synthetic.yml");
    documented("sse.md", "llm-prompts", "llm-prompts.yml");
}

#[test]
fn the_examples_run_unchanged_against_the_target() {
    let peer = SsePeer::start();
    for (file, target) in [("sse-stream.yml", "/events?n=4"), ("sse-notifications.yml", "/events?n=4")] {
        let before = peer.stats();
        let path = format!("{ROOT}/examples/{file}");
        let (o, doc, _) = run(&path, &["--target", &peer.url(target), "-d", "1s", "--arrival-rate", "2"]);
        assert_eq!(o.code, 0, "{file}\n{}\n{}", o.out, o.err);
        assert_eq!(doc.summary.users.completed, 2, "{file}");
        let s = peer.stats();
        assert_eq!(event(&doc, "sse.events"), n(&s, "events") - n(&before, "events"), "{file}");
    }
    for file in ["llm-chat.yml", "llm-synthetic.yml", "llm-prompts.yml"] {
        let before = peer.stats();
        let path = format!("{ROOT}/examples/{file}");
        let (o, doc, v) = run(
            &path,
            &[
                "--target",
                &peer.url(""),
                "-d",
                "1s",
                "--arrival-rate",
                "3",
                "--threshold",
                "llm.ttft.p99<60s",
                "--threshold",
                "llm.itl.p99<60s",
            ],
        );
        assert_eq!(o.code, 0, "{file}\n{}\n{}", o.out, o.err);
        let s = peer.stats();
        let requests = n(&s, "chat_requests") - n(&before, "chat_requests");
        assert_eq!(requests, 3, "{file}");
        assert_eq!(event(&doc, "llm.requests"), requests, "{file}");
        assert_eq!(event(&doc, "llm.output_tokens"), n(&s, "chat_tokens") - n(&before, "chat_tokens"), "{file}");
        // Both thresholds listed, each with its value.
        let listed: Vec<&Value> = v["thresholds"].as_array().unwrap().iter().collect();
        for t in ["llm.ttft.p99<60s", "llm.itl.p99<60s"] {
            let e = listed.iter().find(|e| e["threshold"] == t).unwrap_or_else(|| panic!("{t} in {listed:?}"));
            assert!(e["value"].as_f64().is_some_and(|x| x > 0.0), "{e}");
            assert_eq!(e["ok"], true, "{e}");
        }
    }
}

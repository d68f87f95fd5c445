//! Execution segments on one machine: N bolide processes each run `--segment I/N` of one plan at
//! one shared start against a reference server on 127.0.0.1, and `bolide merge` makes the whole
//! run of their documents. The server's own counts say that nothing was lost or doubled.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use bolide::stats::result::ResultDoc;
use bolide::stats::vu::VuDoc;
use common::bolide;
use refserver::{Config, Server};

/// A start time every process reads the same: whole seconds, `secs` from now.
fn shared_start(secs: u64) -> String {
    let at = bolide::segment::parse_start_at(&format!("+{secs}s"), SystemTime::now()).unwrap();
    bolide::segment::format_start(at)
}

/// Starts `bolide ARGS --segment I/N --json DIR/seg-I.json` for every I as separate processes.
fn spawn_segments(n: u32, args: &[&str], dir: &Path) -> Vec<(Child, PathBuf)> {
    (1..=n)
        .map(|i| {
            let json = dir.join(format!("seg-{i}.json"));
            let child = Command::new(env!("CARGO_BIN_EXE_bolide"))
                .args(args)
                .args(["--segment", &format!("{i}/{n}"), "--json", json.to_str().unwrap(), "-q"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, json)
        })
        .collect()
}

/// Waits for every segment (each bounded by its own plan) and returns their documents' paths.
fn finish(children: Vec<(Child, PathBuf)>) -> Vec<PathBuf> {
    children
        .into_iter()
        .map(|(child, json)| {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{}: {err}", json.display());
            assert!(!err.contains("panicked"), "{err}");
            json
        })
        .collect()
}

fn merge(inputs: &[PathBuf], out: &Path) -> common::Outcome {
    let mut args = vec!["merge".to_string()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    bolide(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn http_doc(path: &Path) -> ResultDoc {
    ResultDoc::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn three_segments_of_a_request_count_are_exactly_the_count() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/";
    let at = shared_start(2);
    let docs =
        finish(spawn_segments(3, &["http", "-c", "9", "-t", "2", "-n", "999", "--start-at", &at, &url], dir.path()));
    for path in &docs {
        let d = http_doc(path);
        assert_eq!((d.summary.responses, d.summary.sent, d.summary.errors), (333, 333, 0), "{}", path.display());
        assert_eq!(d.settings.connections, 9, "the plan's connections, not the segment's");
        assert!(d.timeline.iter().all(|s| s.latency_histogram.is_some()), "a segment keeps each second's histogram");
    }
    assert_eq!(server.requests(), 999, "the server counted every request once");
    let merged = dir.path().join("merged.json");
    let o = merge(&docs, &merged);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("merged from 3 of 3 segments"), "{}", o.out);
    let m = http_doc(&merged);
    assert_eq!((m.summary.responses, m.summary.sent, m.summary.errors), (999, 999, 0));
    assert_eq!(m.settings.segment, None);
    assert_eq!(m.settings.threads, 6, "every segment's threads");
    assert_eq!(m.summary.status["200"], 999);
    assert_eq!(m.per_target[0].responses, 999);
    assert_eq!(m.timeline.iter().map(|s| s.responses).sum::<u64>(), 999);
    // The merged histogram holds every response: its count is the responses'.
    let h = bolide::stats::hist::decode(&m.histograms.latency_us).unwrap();
    assert_eq!(h.len(), 999);
    let info = m.merged.as_ref().unwrap();
    assert_eq!(info.segments.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(info.missing.is_empty() && info.duplicated.is_empty());
    // The merged document is a result document like any other: compare and report read it.
    let c = bolide(&["compare", docs[0].to_str().unwrap(), merged.to_str().unwrap()]);
    assert_eq!(c.code, 0, "{}\n{}", c.out, c.err);
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    let v = common::schema::validator("result.schema.json");
    let errors: Vec<String> = v.iter_errors(&value).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn segments_of_a_fixed_rate_add_up_to_the_rate_and_keep_the_schedule() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // 300/s for 2 s over 6 connections: 600 scheduled sends, 200 per segment; each response
    // waits 20 ms at the server.
    let url = server.base_url() + "/delay/20";
    // Far enough ahead that three processes are up before it on a busy machine.
    let at = shared_start(5);
    let args = ["http", "-c", "6", "-t", "1", "--rps", "300", "-d", "2s", "--start-at", &at, &url];
    let docs = finish(spawn_segments(3, &args, dir.path()));
    for path in &docs {
        let d = http_doc(path);
        assert_eq!(d.summary.sent + d.summary.missed_sends, 200, "{}", path.display());
    }
    let merged = dir.path().join("merged.json");
    let o = merge(&docs, &merged);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let m = http_doc(&merged);
    assert_eq!(m.settings.rate_per_s, Some(300.0), "the merged run is the plan at its whole rate");
    assert_eq!(m.summary.sent + m.summary.missed_sends, 600);
    assert_eq!(m.summary.responses + m.summary.errors + m.summary.unfinished, m.summary.sent);
    assert_eq!(server.requests(), m.summary.responses + m.summary.unfinished + m.summary.errors);
    // Latency is measured from each request's scheduled time: never below the server's 20 ms.
    assert!(m.summary.latency.min_us >= 20_000, "{:?}", m.summary.latency);
    // One shared start: the segments' seconds line up, so the merge is as long as one segment.
    assert!(m.timeline.len() <= 3, "{} seconds", m.timeline.len());
    let per_second: u64 = m.timeline.iter().map(|s| s.responses).sum();
    assert_eq!(per_second, m.summary.responses);
}

#[test]
fn segments_of_virtual_users_are_the_unsegmented_users_with_unique_ids() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("ids.yml");
    std::fs::write(
        &scenario,
        format!(
            "config:\n  target: {}\n  phases:\n    - duration: 2\n      arrivalRate: 10\n\
             scenarios:\n  - flow:\n      - connect\n      - call:\n          method: insertTask\n          \
             params: [{{ description: \"user {{{{ $arrival }}}}\", sessionId: \"{{{{ $vuId }}}}\" }}]\n      - disconnect\n",
            server.base_url()
        ),
    )
    .unwrap();
    let at = shared_start(2);
    let docs = finish(spawn_segments(3, &["run", scenario.to_str().unwrap(), "--start-at", &at], dir.path()));
    let launched: Vec<u64> = docs
        .iter()
        .map(|p| VuDoc::from_json(&std::fs::read_to_string(p).unwrap()).unwrap().summary.users.launched)
        .collect();
    assert_eq!(launched, [7, 7, 6], "every third arrival, from the segment's own");
    // Each user wrote its arrival index: 0..20, each once, as the unsegmented plan's users would.
    let tasks = server.app().tasks.all();
    let seen: Vec<String> = tasks.iter().map(|t| t.description.clone()).collect();
    let want: BTreeSet<String> = (0..20).map(|k| format!("user {k}")).collect();
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(seen.len(), 20);
    let sessions: BTreeSet<&str> = tasks.iter().map(|t| t.session_id.as_str()).collect();
    assert_eq!(sessions.len(), 20, "user ids are unique across the segments");
    let merged = dir.path().join("merged.json");
    let o = merge(&docs, &merged);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let m = VuDoc::from_json(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!((m.summary.users.launched, m.summary.users.completed), (20, 20));
    let call = m.steps.iter().find(|s| s.name == "call insertTask").unwrap();
    assert_eq!((call.count, call.errors), (20, 0));
    assert_eq!(bolide::stats::hist::decode(&call.latency_histogram).unwrap().len(), 20);
    assert!(call.to_result.is_some(), "method figures merge from their own histograms");
    assert_eq!(m.timeline.iter().map(|s| s.counts.launched).sum::<u64>(), 20);
    // Each segment kept its seconds' histograms: the merged response time per second is exact.
    let per_second: u64 =
        m.timeline.iter().filter_map(|s| s.step_latency.get("call insertTask")).map(|l| l.count).sum();
    assert_eq!(per_second, 20);
    let all: u64 = m.steps.iter().map(|s| bolide::stats::hist::decode(&s.latency_histogram).unwrap().len()).sum();
    assert_eq!(m.timeline.iter().filter_map(|s| s.latency.as_ref()).map(|l| l.count).sum::<u64>(), all);
}

#[test]
fn merge_refuses_other_plans_and_marks_missing_and_doubled_segments() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/";
    let run = |n: &str, seg: &str, file: &str| {
        let path = dir.path().join(file);
        let o = bolide(&[
            "http",
            "-c",
            "4",
            "-t",
            "1",
            "-n",
            n,
            "--segment",
            seg,
            "--json",
            path.to_str().unwrap(),
            "-q",
            &url,
        ]);
        assert_eq!(o.code, 0, "{}", o.err);
        path
    };
    let (a1, a2, b2) = (run("100", "1/3", "a1.json"), run("100", "2/3", "a2.json"), run("200", "2/3", "b2.json"));
    let out = dir.path().join("m.json");
    // Different plans: refused, naming the difference, nothing written.
    let o = merge(&[a1.clone(), b2], &out);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("not segments of the same plan") && o.err.contains("settings.requests"), "{}", o.err);
    assert!(!out.exists());
    // Segment 3 missing, segment 2 given twice: merged, warned, marked.
    let o = merge(&[a1.clone(), a2.clone(), a2.clone()], &out);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.err.contains("segment 3/3 missing") && o.err.contains("given twice"), "{}", o.err);
    assert!(o.out.contains("MISSING 3/3"), "{}", o.out);
    let m = http_doc(&out);
    let info = m.merged.unwrap();
    assert_eq!((info.missing, info.duplicated), (vec![3], vec![2]));
    // Two segments' shares of -n 100 over -c 4: 2 + 1 connections -> 50 + 25.
    assert_eq!(m.summary.responses, 75);
    // A whole run is not a segment; a file that is no document is named.
    let whole = dir.path().join("whole.json");
    assert_eq!(bolide(&["http", "-n", "10", "-c", "1", "--json", whole.to_str().unwrap(), "-q", &url]).code, 0);
    let o = merge(&[a1.clone(), whole], &out);
    assert!(o.code == 2 && o.err.contains("not a segment's result"), "{}", o.err);
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello").unwrap();
    let o = merge(&[a1, junk], &out);
    assert!(o.code == 2 && o.err.contains("neither a result document nor a log"), "{}", o.err);
}

#[test]
fn bad_segments_and_start_times_are_refused_before_anything_runs() {
    for (args, says) in [
        (&["http", "-c", "2", "--segment", "1/3", "http://127.0.0.1:9/"][..], "3 segments need at least 3 connections"),
        (&["http", "--segment", "4/3", "http://127.0.0.1:9/"][..], "I must be 1 to 3"),
        // One process holds its segment's connections: half of 2,000,001 is still too many.
        (&["http", "-c", "2000001", "--segment", "1/2", "http://127.0.0.1:9/"][..], "(--segment I/N)"),
        (&["http", "--start-at", "noon", "http://127.0.0.1:9/"][..], "--start-at noon"),
        (&["run", "sub-churn", "--arrival-rate", "1", "-d", "2s", "--segment", "3/3"][..], "segment 3 would have none"),
        (
            &["bench", "http", "-n", "10", "--runs", "2", "--start-at", "+5s", "http://127.0.0.1:9/"][..],
            "planned length",
        ),
    ] {
        let o = bolide(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.err);
        assert!(o.err.contains(says), "{args:?}: {}", o.err);
    }
}

#[test]
fn a_late_segment_starts_at_once_and_says_its_timeline_is_shifted() {
    let server = Server::start(Config::default()).unwrap();
    let past = bolide::segment::format_start(SystemTime::now() - Duration::from_secs(3));
    let url = server.base_url() + "/";
    let o = bolide(&["http", "-c", "1", "-n", "5", "--segment", "1/1", "--start-at", &past, &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.err.contains("after the shared start") && o.err.contains("timeline is shifted"), "{}", o.err);
    assert!(o.out.contains("segment 1/1 of the plan"), "{}", o.out);
}

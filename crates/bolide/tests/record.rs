//! `bolide record`: a real browser session on the reference server's tasks page, recorded by
//! Playwright's recordHar in Debian's headless Chromium, turned into a scenario whose replay makes
//! the server count the session's calls and subscriptions once per user; and bad HARs refused with
//! their reason. Chromium and node come from `.ci/run`.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;

use bolide::stats::vu::DdpDoc;
use common::bolide;

#[test]
fn a_recorded_browser_session_replays_once_per_user() {
    common::in_chromium_setup();
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let app = server.app();
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("session.har");
    let (calls0, subs0) = (app.methods_called.load(Ordering::Relaxed), app.subscriptions_ready.load(Ordering::Relaxed));
    let out = Command::new("node")
        .args(["record.mjs", &server.base_url(), har.to_str().unwrap()])
        .current_dir(common::node_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let session_id = seen["sessionId"].as_str().unwrap().to_string();
    // What the browser's session cost the server.
    let calls = app.methods_called.load(Ordering::Relaxed) - calls0;
    let subs = app.subscriptions_ready.load(Ordering::Relaxed) - subs0;
    assert_eq!((calls, subs), (3, 2), "two inserts and a remove; the page's two subscriptions");

    let yml = dir.path().join("s.yml");
    let o = bolide(&["record", har.to_str().unwrap(), "-o", yml.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    // The substitutions, listed: the page's own id per user, the insert's result where it returns.
    assert!(
        o.out.contains(&format!("{session_id}, an id the browser made and sent 2 times -> {{{{ $vuId }}}}")),
        "{}",
        o.out
    );
    assert!(o.out.contains("the result of step") && o.out.contains("{{ insertTask_1 }}"), "{}", o.out);
    let text = std::fs::read_to_string(&yml).unwrap();
    assert!(!text.contains(&session_id), "no recorded id is left: {text}");
    assert!(text.contains("capture: insertTask_1") && text.contains("\"taskId\":\"{{ insertTask_1 }}\""), "{text}");
    assert!(text.contains(&format!("target: \"{}\"", server.base_url())), "{text}");

    // Replayed by 5 users: 5 times the session's calls and subscriptions, every user's own tasks
    // removed by the id its own insert returned.
    let (calls0, subs0) = (app.methods_called.load(Ordering::Relaxed), app.subscriptions_ready.load(Ordering::Relaxed));
    let json = dir.path().join("run.json");
    let o = bolide(&[
        "run",
        yml.to_str().unwrap(),
        "--arrival-rate",
        "100",
        "-d",
        "50ms",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = DdpDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let users = doc.summary.users.completed;
    assert_eq!((users, doc.summary.users.failed, doc.summary.step_errors), (5, 0, 0), "{}", o.out);
    assert_eq!(app.methods_called.load(Ordering::Relaxed) - calls0, users * calls);
    assert_eq!(app.subscriptions_ready.load(Ordering::Relaxed) - subs0, users * subs);
    // Each user removed its first task: what is left is each user's second, under its own id.
    let left: Vec<_> = app.tasks.all().into_iter().filter(|t| t.session_id != session_id).collect();
    assert_eq!(left.len() as u64, users, "{left:?}");
    assert!(left.iter().all(|t| t.description == "New Task 2"), "{left:?}");
    let owners: std::collections::BTreeSet<_> = left.iter().map(|t| t.session_id.clone()).collect();
    assert_eq!(owners.len() as u64, users, "one $vuId per user");
}

#[test]
fn a_har_with_a_login_keeps_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("login.har");
    // Chrome's shape (seconds), SockJS framing, a password login and a resume token used later.
    let frame = |t: &str, time: f64, msg: serde_json::Value| {
        let data = if t == "send" {
            serde_json::to_string(&vec![msg.to_string()]).unwrap()
        } else {
            format!("a{}", serde_json::to_string(&vec![msg.to_string()]).unwrap())
        };
        serde_json::json!({ "type": t, "time": time, "opcode": 1, "data": data })
    };
    let messages = vec![
        serde_json::json!({"type":"receive","time":1.0,"opcode":1,"data":"o"}),
        frame("send", 1.1, serde_json::json!({"msg":"connect","version":"1","support":["1"]})),
        frame("receive", 1.2, serde_json::json!({"msg":"connected","session":"x"})),
        frame(
            "send",
            1.3,
            serde_json::json!({"msg":"method","method":"login","id":"1","params":[{"user":{"email":"ada@example.com"},"password":{"digest":"5ecretd1gest","algorithm":"sha-256"}}]}),
        ),
        frame(
            "receive",
            1.4,
            serde_json::json!({"msg":"result","id":"1","result":{"id":"u5erIdAAAAAAAAAAA","token":"T0kenS3cret"}}),
        ),
        frame(
            "send",
            2.4,
            serde_json::json!({"msg":"method","method":"profile","id":"2","params":["T0kenS3cret","u5erIdAAAAAAAAAAA"]}),
        ),
    ];
    let doc = serde_json::json!({"log":{"entries":[
        {"request":{"url":"http://app.test/"},"response":{"headers":[]}},
        {"request":{"url":"ws://127.0.0.1:3000/sockjs/1/abc/websocket"},"response":{"headers":[]},"_webSocketMessages":messages}
    ]}});
    std::fs::write(&har, doc.to_string()).unwrap();
    let yml = dir.path().join("s.yml");
    let o = bolide(&["record", har.to_str().unwrap(), "-o", yml.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&yml).unwrap();
    for secret in ["5ecretd1gest", "T0kenS3cret"] {
        assert!(!text.contains(secret) && !o.out.contains(secret) && !o.err.contains(secret), "{secret} leaked");
    }
    assert!(text.contains("transport: sockjs") && text.contains("target: \"http://127.0.0.1:3000\""), "{text}");
    assert!(text.contains("login: { user: \"{{ username }}\", password: \"{{ password }}\" }"), "{text}");
    assert!(text.contains("fields: [username, password]"), "{text}");
    assert!(text.contains("params: [\"{{ loginToken }}\",\"{{ userId }}\"]"), "{text}");
    assert!(o.out.contains("write users.csv beside the scenario"), "{}", o.out);
    // Nor with every value kept as recorded.
    let o = bolide(&["record", har.to_str().unwrap(), "--no-correlate"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(
        !o.out.contains("T0kenS3cret") && o.out.contains("\"{{ loginToken }}\",\"u5erIdAAAAAAAAAAA\""),
        "{}",
        o.out
    );
    // The scenario reads back as bolide's own YAML (the payload file is the user's to write).
    std::fs::write(dir.path().join("users.csv"), "username,password\nada@example.com,pw\n").unwrap();
    let scenario = bolide::scenario::yaml::load_file(&yml).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    assert_eq!(scenario.config.targets.len(), 1);
}

#[test]
fn hars_bolide_cannot_use_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let no_ws = write("page.har", r#"{"log":{"entries":[{"request":{"url":"http://x/"},"response":{}}]}}"#);
    let o = bolide(&["record", &no_ws]);
    assert_eq!(o.code, 2);
    assert!(
        o.err.contains("this HAR has no WebSocket messages: Chrome saves them only when DevTools was open"),
        "{}",
        o.err
    );
    let cut = write("cut.har", "{\"log\": {\"entries\": [\n  {\"request\": ");
    let o = bolide(&["record", &cut]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("cut.har:2:") && o.err.contains("the file ends inside its JSON"), "{}", o.err);
    let other = write(
        "chat.har",
        r#"{"log":{"entries":[{"request":{"url":"ws://x/chat"},"_webSocketMessages":[{"type":"send","time":1,"opcode":1,"data":"hello"}]}]}}"#,
    );
    let o = bolide(&["record", &other]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("none of its 1 WebSocket connections speaks DDP"), "{}", o.err);
    let ddp = write(
        "ddp.har",
        r#"{"log":{"entries":[{"request":{"url":"ws://x/websocket"},"_webSocketMessages":[{"type":"send","time":1,"opcode":1,"data":"{\"msg\":\"connect\"}"}]}]}}"#,
    );
    let o = bolide(&["record", &ddp, "--connection", "2"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--connection 2: the HAR has 1 DDP connections"), "{}", o.err);
    let o = bolide(&["record", "--listen", "127.0.0.1:3100"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--listen (the recording proxy) is not built yet"), "{}", o.err);
    let o = bolide(&["record", &dir.path().join("missing.har").to_string_lossy()]);
    assert_eq!(o.code, 2, "{}", o.err);
}

#[test]
fn a_har_in_chrome_devtools_shape_records_the_same_flow() {
    // tests/fixtures/chrome-devtools.har: a real session of the tasks page (add two tasks, remove
    // one), kept in the shape Chrome's DevTools exports: times in seconds, `_resourceType`, the page
    // and its script beside the WebSocket.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chrome-devtools.har");
    let dir = tempfile::tempdir().unwrap();
    let yml = dir.path().join("s.yml");
    let o = bolide(&["record", fixture.to_str().unwrap(), "-o", yml.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&yml).unwrap();
    let flow: Vec<&str> = text.lines().skip_while(|l| !l.contains("flow:")).skip(1).map(str::trim).collect();
    assert_eq!(
        flow,
        [
            "- connect",
            "- subscribe: { name: \"meteor_autoupdate_clientVersions\", params: [] }",
            "- subscribe: { name: \"fetchTasks\", params: [] }",
            "- think: 320ms",
            "- call: { method: \"insertTask\", params: [{\"description\":\"New Task 1\",\"sessionId\":\"{{ $vuId }}\"}], capture: insertTask_1 }",
            "- think: 50ms",
            "- call: { method: \"insertTask\", params: [{\"description\":\"New Task 2\",\"sessionId\":\"{{ $vuId }}\"}] }",
            "- think: 60ms",
            "- call: { method: \"removeTask\", params: [{\"taskId\":\"{{ insertTask_1 }}\"}] }",
            "- disconnect",
        ],
        "{text}"
    );
    // Replayed against another server (--target), three users: three times the session's work.
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let app = server.app();
    let o =
        bolide(&["run", yml.to_str().unwrap(), "--target", &server.base_url(), "--arrival-rate", "100", "-d", "30ms"]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!(app.methods_called.load(Ordering::Relaxed), 9, "{}", o.out);
    assert_eq!(app.subscriptions_ready.load(Ordering::Relaxed), 6, "{}", o.out);
    assert_eq!(app.tasks.len(), 3, "each user's second task stays");
}

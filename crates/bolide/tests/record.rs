//! `bolide record`: a real browser session on the reference server's tasks page, recorded by
//! Playwright's recordHar in Debian's headless Chromium, turned into a scenario whose replay makes
//! the server count the session's calls and subscriptions once per user; and bad HARs refused with
//! their reason. Chromium and node come from `.ci/run`.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;

use bolide::stats::vu::VuDoc;
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
    let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
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
            serde_json::json!({"msg":"method","method":"profile","id":"2","params":["T0kenS3cret","u5erIdAAAAAAAAAAA","ada@example.com"]}),
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
    // The user's own values: the token and id the login returned, the name it logged in with.
    assert!(text.contains("params: [\"{{ loginToken }}\",\"{{ userId }}\",\"{{ username }}\"]"), "{text}");
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

/// Meteor's accounts methods (changePassword, resetPassword, createUser), secret keys (apiKey,
/// otp) and two logins: no secret reaches the scenario, the terminal or the substitutions; each
/// becomes a payload column, and the scenario reads back with its users.csv.
#[test]
fn accounts_methods_and_secret_keys_become_payload_columns() {
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("accounts.har");
    let send = |time: f64, id: &str, method: &str, params: serde_json::Value| {
        let msg = serde_json::json!({"msg":"method","method":method,"id":id,"params":params});
        serde_json::json!({ "type": "send", "time": time, "opcode": 1, "data": msg.to_string() })
    };
    let messages = vec![
        serde_json::json!({"type":"send","time":1.0,"opcode":1,"data":"{\"msg\":\"connect\",\"version\":\"1\",\"support\":[\"1\"]}"}),
        serde_json::json!({"type":"receive","time":1.1,"opcode":1,"data":"{\"msg\":\"connected\",\"session\":\"x\"}"}),
        send(
            1.2,
            "1",
            "login",
            serde_json::json!([{"user":{"username":"ada"},"password":{"digest":"l0gin-d1gest","algorithm":"sha-256"}}]),
        ),
        send(
            1.3,
            "2",
            "changePassword",
            serde_json::json!([{"digest":"0ld-d1gest","algorithm":"sha-256"},{"digest":"n3w-d1gest","algorithm":"sha-256"}]),
        ),
        send(
            1.4,
            "3",
            "resetPassword",
            serde_json::json!(["r3set-t0ken-abc",{"digest":"r3set-d1gest","algorithm":"sha-256"}]),
        ),
        send(1.5, "4", "createUser", serde_json::json!([{"username":"bob","password":"pl41n-passw0rd"}])),
        send(1.6, "5", "report", serde_json::json!([{"apiKey":"ap1-k3y","otp":"987654"}])),
        send(1.7, "6", "login", serde_json::json!([{"resume":"r3sume-t0ken"}])),
    ];
    let doc = serde_json::json!({"log":{"entries":[
        {"request":{"url":"ws://127.0.0.1:3000/websocket"},"response":{"headers":[]},"_webSocketMessages":messages}
    ]}});
    std::fs::write(&har, doc.to_string()).unwrap();
    let yml = dir.path().join("s.yml");
    let o = bolide(&["record", har.to_str().unwrap(), "-o", yml.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&yml).unwrap();
    for secret in [
        "l0gin-d1gest",
        "0ld-d1gest",
        "n3w-d1gest",
        "r3set-t0ken-abc",
        "r3set-d1gest",
        "pl41n-passw0rd",
        "ap1-k3y",
        "987654",
        "r3sume-t0ken",
    ] {
        assert!(
            !text.contains(secret) && !o.out.contains(secret) && !o.err.contains(secret),
            "{secret} leaked:\n{text}\n{}",
            o.out
        );
    }
    let columns = "username, password, changePassword_1_digest, changePassword_2_digest, resetPassword_1, \
                   resetPassword_2_digest, apiKey, otp, loginToken";
    assert!(text.contains(&format!("fields: [{columns}]")), "{text}");
    assert!(o.out.contains("a secret (resetPassword_1) -> {{ resetPassword_1 }}"), "{}", o.out);
    // Two logins: both kept, the columns of both in one list; the scenario reads back.
    let header = columns.replace(", ", ",");
    let row = vec!["x"; header.split(',').count()].join(",");
    std::fs::write(dir.path().join("users.csv"), format!("{header}\n{row}\n")).unwrap();
    bolide::scenario::yaml::load_file(&yml).unwrap_or_else(|e| panic!("{e}\n{text}"));
}

#[test]
fn a_think_max_past_what_a_scenario_holds_is_refused() {
    let o = bolide(&["record", "nothing.har", "--think-max", "40days"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("--think-max 40days: at most 30 days"), "{}", o.err);
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
    // The proxy needs the server it forwards to, a plain http:// one.
    let o = bolide(&["record", "--listen", "127.0.0.1:0"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("give it with --to http://127.0.0.1:3000"), "{}", o.err);
    let o = bolide(&["record", "--listen", "127.0.0.1:0", "--to", "https://127.0.0.1:3000"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("forwards to plain http:// servers only"), "{}", o.err);
    let o = bolide(&["record", "--listen", "127.0.0.1:0", "--to", "http://127.0.0.1:3000", "-d", "soon"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("--duration soon"), "{}", o.err);
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
    // docs/record.md shows this very output and file.
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/record.md")).unwrap();
    let block = |first: &str| -> String {
        let at = doc.find(&format!("```text\n{first}")).unwrap_or_else(|| panic!("docs/record.md shows {first:?}"));
        let body = &doc[at + "```text\n".len()..];
        body[..body.find("```").unwrap()].to_string()
    };
    let printed: String = o.out.lines().filter(|l| !l.starts_with("Scenario: ")).map(|l| format!("{l}\n")).collect();
    assert_eq!(block("bolide record: connection"), printed);
    assert_eq!(block("scenarios:"), text[text.find("scenarios:").unwrap()..]);
    let flow: Vec<&str> = text.lines().skip_while(|l| !l.contains("flow:")).skip(1).map(str::trim).collect();
    assert_eq!(
        flow,
        [
            // The page itself; its script is a static asset, left out.
            "- get: { url: \"/\" }",
            "- connect",
            "- subscribe: { name: \"meteor_autoupdate_clientVersions\", params: [] }",
            "- subscribe: { name: \"fetchTasks\", params: [] }",
            "- think: 320ms",
            "- call: { method: \"insertTask\", params: [{\"description\":\"New Task 1\",\"sessionId\":\"{{ $vuId }}\"}], capture: insertTask_1 }",
            // The page added its next task once the first was on screen: each user waits for its own.
            "- waitFor: { collection: \"taskCollection\", where: { _id: \"{{ insertTask_1 }}\" } }",
            "- think: 50ms",
            "- call: { method: \"insertTask\", params: [{\"description\":\"New Task 2\",\"sessionId\":\"{{ $vuId }}\"}], capture: insertTask_2 }",
            "- waitFor: { collection: \"taskCollection\", where: { _id: \"{{ insertTask_2 }}\" } }",
            "- think: 60ms",
            "- call: { method: \"removeTask\", params: [{\"taskId\":\"{{ insertTask_1 }}\"}] }",
            "- waitFor: { collection: \"taskCollection\", where: { _id: \"{{ insertTask_1 }}\" }, until: disappears }",
            // The HAR has no close time: a short pause before the disconnect, said in a note.
            "- think: 1000ms",
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

/// The flow of a scenario file without its thinks (timing differs from one recording to another).
fn flow_without_thinks(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.contains("flow:"))
        .skip(1)
        .map(|l| l.trim().to_string())
        .filter(|l| !l.starts_with("- think:"))
        .collect()
}

/// The text frames of a HAR's WebSocket connections, in order: (sent by the browser, data).
fn frames(har: &serde_json::Value) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for e in har["log"]["entries"].as_array().unwrap() {
        for m in e["_webSocketMessages"].as_array().into_iter().flatten() {
            if m["opcode"] == 1 {
                out.push((m["type"] == "send", m["data"].as_str().unwrap().to_string()));
            }
        }
    }
    out
}

#[test]
fn the_recording_proxy_records_the_same_session_and_writes_on_ctrl_c() {
    common::in_chromium_setup();
    // Every server message compressed, so that the proxy reads permessage-deflate frames.
    let mut config = refserver::Config::default();
    config.ddp.compression_threshold = 0;
    let server = refserver::Server::start(config).unwrap();
    let app = server.app();
    let dir = tempfile::tempdir().unwrap();
    let (yml, proxy_har, browser_har) =
        (dir.path().join("s.yml"), dir.path().join("proxy.har"), dir.path().join("browser.har"));
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(["record", "--listen", "127.0.0.1:0", "--to", &server.base_url(), "-d", "120s", "-o"])
        .arg(&yml)
        .arg("--har")
        .arg(&proxy_har)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(proxy.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    let at = first.split("recording at ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or_else(|| {
        panic!("the proxy says where it listens: {first:?}");
    });
    let base = at.trim_end_matches('/').to_string();
    // The browser uses the page through the proxy, and keeps its own HAR of the same session.
    let out = Command::new("node")
        .args(["record.mjs", &base, browser_har.to_str().unwrap()])
        .current_dir(common::node_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(app.methods_called.load(Ordering::Relaxed), 3, "the session passed through the proxy");
    // Ctrl-C writes the scenario and the HAR.
    // SAFETY: kill sends a signal to the child this test started.
    unsafe {
        libc::kill(proxy.id() as i32, libc::SIGINT);
    }
    let began = std::time::Instant::now();
    let status = loop {
        if let Some(s) = proxy.try_wait().unwrap() {
            break s;
        }
        assert!(began.elapsed() < std::time::Duration::from_secs(60), "the proxy did not stop on SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut said).unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut proxy.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{said}\n{err}");
    assert!(said.contains("{{ insertTask_1 }}") && said.contains("HAR: "), "{said}");
    let text = std::fs::read_to_string(&yml).unwrap();
    // It aims at the server, not at the proxy.
    assert!(text.contains(&format!("target: \"{}\"", server.base_url())), "{text}");

    // The proxy saw the frames the browser saw, inflated, in the same order each way (between the
    // two ways, a frame may cross another on the wire: the browser and the proxy see the crossing
    // at different places).
    let proxied: serde_json::Value = serde_json::from_slice(&std::fs::read(&proxy_har).unwrap()).unwrap();
    let browsed: serde_json::Value = serde_json::from_slice(&std::fs::read(&browser_har).unwrap()).unwrap();
    let way = |frames: &[(bool, String)], sent: bool| -> Vec<String> {
        frames.iter().filter(|f| f.0 == sent).map(|f| f.1.clone()).collect()
    };
    let (p, b) = (frames(&proxied), frames(&browsed));
    assert!(p.len() >= 20, "{p:?}");
    assert_eq!((way(&p, true), way(&p, false)), (way(&b, true), way(&b, false)));
    assert!(!err.contains("warning:"), "{err}");

    // The browser's HAR records to the same flow.
    let from_browser = dir.path().join("b.yml");
    let o = bolide(&["record", browser_har.to_str().unwrap(), "-o", from_browser.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    let flow = flow_without_thinks(&text);
    assert_eq!(flow, flow_without_thinks(&std::fs::read_to_string(&from_browser).unwrap()));
    assert_eq!(flow.iter().filter(|l| l.starts_with("- call:")).count(), 3, "{flow:?}");

    // Replayed by 4 users: 4 times the session's calls and subscriptions, and its page load.
    let (calls0, subs0) = (app.methods_called.load(Ordering::Relaxed), app.subscriptions_ready.load(Ordering::Relaxed));
    let read0 = app.messages_in.load(Ordering::Relaxed);
    let json = dir.path().join("run.json");
    let o =
        bolide(&["run", yml.to_str().unwrap(), "--arrival-rate", "80", "-d", "50ms", "--json", json.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let users = doc.summary.users.completed;
    assert_eq!((users, doc.summary.users.failed, doc.summary.step_errors), (4, 0, 0), "{}", o.out);
    assert_eq!(app.methods_called.load(Ordering::Relaxed) - calls0, users * 3);
    assert_eq!(app.subscriptions_ready.load(Ordering::Relaxed) - subs0, users * 2);
    let count = |name: &str| doc.steps.iter().find(|s| s.name == name).map(|s| (s.count, s.errors));
    assert_eq!(count("GET /"), Some((users, 0)));
    assert_eq!(count("waitFor taskCollection"), Some((users * 3, 0)));
    // connect, two subs, three methods: what the server read from each user.
    assert_eq!(app.messages_in.load(Ordering::Relaxed) - read0, users * 6);
}

#[test]
fn what_passes_the_proxy_keeps_no_secret() {
    // bolide's own DDP client through the proxy, over SockJS: a password login, a resume login
    // with the token it got, and a POST whose JSON body holds a password.
    let server = refserver::Server::start(refserver::Config {
        ddp: refserver::DdpConfig { users: vec![("ann".into(), "pw-ann".into())], ..Default::default() },
        ..Default::default()
    })
    .unwrap();
    let app = server.app();
    let upstream = bolide::record::proxy::Upstream::parse(&server.base_url()).unwrap();
    let proxy = bolide::record::proxy::Proxy::bind("127.0.0.1:0", upstream).unwrap();
    let base = format!("http://{}", proxy.addr);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let watching = stop.clone();
    let running = std::thread::spawn(move || proxy.run(|| watching.load(Ordering::SeqCst), Some(deadline)));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), "ann,pw-ann\n").unwrap();
    let scenario = dir.path().join("login.yml");
    std::fs::write(
        &scenario,
        format!(
            "config:\n  target: {base}\n  phases:\n    - arrivalCount: 1\n      duration: 1s\n  payload:\n    path: users.csv\n    fields: [username, password]\n  ddp:\n    transport: sockjs\nscenarios:\n  - flow:\n      - get: {{ url: /ok }}\n      - post: {{ url: /status/201, json: {{ user: ann, password: hunter2 }} }}\n      - connect\n      - login: {{ user: \"{{{{ username }}}}\", password: \"{{{{ password }}}}\" }}\n      - login: {{ resume: \"{{{{ loginToken }}}}\" }}\n      - subscribe: fetchTasks\n      - disconnect\n"
        ),
    )
    .unwrap();
    let o = bolide(&["run", scenario.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    stop.store(true, Ordering::SeqCst);
    let (har, log) = running.join().unwrap();
    assert!(log.problems.is_empty(), "{:?}", log.problems);
    let text = serde_json::to_string(&har).unwrap();
    let tokens = app.accounts.tokens();
    assert_eq!(tokens.len(), 2, "two logins passed");
    let digest = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(b"pw-ann"));
    for secret in tokens.iter().map(String::as_str).chain([digest.as_str(), "hunter2"]) {
        assert!(!text.contains(secret), "{secret} is in the proxy's HAR");
    }
    // The frames are there all the same (SockJS, masked inside), and so are the two requests.
    assert!(text.contains("login") && text.contains("resume") && text.contains("<redacted>"), "{text}");
    assert!(text.contains("/status/201") && text.contains("/ok"));

    // Recorded: the logins from the payload file, the POST with a password left out and said.
    let har_path = dir.path().join("proxy.har");
    std::fs::write(&har_path, &text).unwrap();
    let o = bolide(&["record", har_path.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.out.contains("login: { user: \"{{ username }}\", password: \"{{ password }}\" }"), "{}", o.out);
    assert!(o.out.contains("login: { resume: \"{{ loginToken }}\" }") && o.out.contains("get: { url: \"/ok\" }"));
    assert!(!o.out.contains("/status/201"), "{}", o.out);
    assert!(o.err.contains("POST /status/201 left out: a password or token"), "{}", o.err);
    assert!(o.out.contains(&format!("target: \"{}\"", server.base_url())), "{}", o.out);
}

#[test]
fn two_tabs_become_two_flows_with_connection_all() {
    let dir = tempfile::tempdir().unwrap();
    let tab = |t0: f64, method: &str| {
        let frame = |sent: bool, t: f64, msg: serde_json::Value| serde_json::json!({"type": if sent { "send" } else { "receive" }, "time": t, "opcode": 1, "data": msg.to_string()});
        serde_json::json!({"startedDateTime": "2026-11-24T00:00:00Z", "request": {"method": "GET", "url": "ws://127.0.0.1:3000/websocket"},
          "response": {"status": 101, "headers": []}, "_webSocketMessages": [
            frame(true, t0, serde_json::json!({"msg": "connect", "version": "1", "support": ["1"]})),
            frame(false, t0 + 0.01, serde_json::json!({"msg": "connected", "session": "s"})),
            frame(true, t0 + 0.5, serde_json::json!({"msg": "method", "method": method, "params": [], "id": "1"})),
            frame(false, t0 + 0.51, serde_json::json!({"msg": "result", "id": "1", "result": 1})),
        ]})
    };
    let har = dir.path().join("tabs.har");
    let doc = serde_json::json!({"log": {"entries": [tab(1000.0, "first"), tab(2000.0, "second")]}});
    std::fs::write(&har, doc.to_string()).unwrap();
    let o = bolide(&["record", har.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.err.contains("2 DDP connections") && o.err.contains("--connection all"), "{}", o.err);
    assert!(o.out.contains("\"first\"") && !o.out.contains("\"second\""), "{}", o.out);
    let o = bolide(&["record", har.to_str().unwrap(), "--connection", "all"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.err.contains("each became a flow of its own"), "{}", o.err);
    let scenario =
        bolide::scenario::yaml::load_str(&o.out, "tabs.yml", dir.path()).unwrap_or_else(|e| panic!("{e}\n{}", o.out));
    let flows: Vec<(String, Vec<String>)> = scenario
        .flows
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                f.steps
                    .iter()
                    .filter(|s| !matches!(s.kind, bolide::scenario::StepKind::Think(_)))
                    .map(|s| s.name.clone())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        flows,
        [
            ("connection 1".to_string(), vec!["connect".to_string(), "call first".into(), "disconnect".into()]),
            ("connection 2".to_string(), vec!["connect".to_string(), "call second".into(), "disconnect".into()]),
        ]
    );
    let o = bolide(&["record", har.to_str().unwrap(), "--connection", "3"]);
    assert_eq!(o.code, 2);
    assert!(o.err.contains("(1 to 2, or all)"), "{}", o.err);
}

/// Meteor's client inserting through a collection (`/taskCollection/insertAsync`) picks the new
/// document's `_id` itself, then updates and removes it by that id. Replayed against Meteor
/// 3.0.4's own server (../shared/meteor-server) by several users: each user's inserts get new ids
/// of its own and its update and remove follow them, so the server counts no error; kept as
/// recorded (--no-correlate), every user after the first inserts an id that is already there.
#[test]
fn ids_a_page_gave_its_inserts_are_new_per_user_against_meteor() {
    let meteor = common::meteor::Meteor::start_with(&[]);
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("inserts.har");
    let (x, y, session) = ("Xq3TnWpbYkR7aZc2d", "Yb8KmNpQr5StAvWx9", "HRSDMy25RLcwGu9p6");
    let frame = |t: &str, time: f64, msg: serde_json::Value| serde_json::json!({ "type": t, "time": time, "opcode": 1, "data": msg.to_string() });
    let method = |time: f64, id: &str, name: &str, params: serde_json::Value| {
        frame(
            "send",
            time,
            serde_json::json!({"msg":"method","method":name,"params":params,"id":id,"randomSeed":"s33d"}),
        )
    };
    let answer = |time: f64, id: &str, result: serde_json::Value| {
        frame("receive", time, serde_json::json!({"msg":"result","id":id,"result":result}))
    };
    let added = |time: f64, id: &str, text: &str| {
        frame(
            "receive",
            time,
            serde_json::json!({"msg":"added","collection":"taskCollection","id":id,"fields":{"description":text,"sessionId":session}}),
        )
    };
    let t0 = 1_795_477_935.0;
    let messages = vec![
        frame("send", t0, serde_json::json!({"msg":"connect","version":"1","support":["1","pre2","pre1"]})),
        frame("receive", t0 + 0.01, serde_json::json!({"msg":"connected","session":"s"})),
        frame("send", t0 + 0.02, serde_json::json!({"msg":"sub","id":"a","name":"fetchTasks","params":[]})),
        frame("receive", t0 + 0.03, serde_json::json!({"msg":"ready","subs":["a"]})),
        method(
            t0 + 0.1,
            "1",
            "/taskCollection/insertAsync",
            serde_json::json!([{"_id":x,"description":"one","sessionId":session}]),
        ),
        added(t0 + 0.11, x, "one"),
        answer(t0 + 0.12, "1", serde_json::json!(x)),
        method(
            t0 + 0.2,
            "2",
            "/taskCollection/insertAsync",
            serde_json::json!([{"_id":y,"description":"two","sessionId":session}]),
        ),
        added(t0 + 0.21, y, "two"),
        answer(t0 + 0.22, "2", serde_json::json!(y)),
        method(
            t0 + 0.3,
            "3",
            "/taskCollection/updateAsync",
            serde_json::json!([{"_id":x},{"$set":{"description":"done"}},{}]),
        ),
        answer(t0 + 0.31, "3", serde_json::json!(1)),
        method(t0 + 0.4, "4", "/taskCollection/removeAsync", serde_json::json!([{"_id":x}])),
        answer(t0 + 0.41, "4", serde_json::json!(1)),
    ];
    let url = format!("ws://127.0.0.1:{}/websocket", meteor.port);
    let doc = serde_json::json!({"log":{"entries":[
        {"request":{"url":url},"response":{"status":101,"headers":[]},"_webSocketMessages":messages}
    ]}});
    std::fs::write(&har, doc.to_string()).unwrap();

    let replay = |extra: &[&str], name: &str| {
        let yml = dir.path().join(format!("{name}.yml"));
        let json = dir.path().join(format!("{name}.json"));
        let mut args = vec!["record", har.to_str().unwrap(), "--think-scale", "0.2", "-o", yml.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = bolide(&args);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        let text = std::fs::read_to_string(&yml).unwrap();
        let before = meteor.stats();
        let o = bolide(&[
            "run",
            yml.to_str().unwrap(),
            "--arrival-rate",
            "100",
            "-d",
            "40ms",
            "--json",
            json.to_str().unwrap(),
        ]);
        let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let after = meteor.stats();
        let diff = |group: &str, name: &str| {
            after[group][name].as_u64().unwrap_or(0) - before[group][name].as_u64().unwrap_or(0)
        };
        let errors = ["insertAsync", "updateAsync", "removeAsync"]
            .map(|m| diff("methodErrors", &format!("/taskCollection/{m}")));
        (o, text, doc, errors, diff("methods", "/taskCollection/insertAsync"))
    };

    let (o, text, doc, errors, inserts) = replay(&[], "followed");
    assert_eq!(o.code, 0, "{}\n{}\n{text}", o.out, o.err);
    assert!(!text.contains(x) && !text.contains(y) && !text.contains(session), "no recorded id is left: {text}");
    assert!(text.contains("- set: { taskCollection_id_1: \"{{ $randomId }}\" }"), "{text}");
    assert!(
        text.contains("params: [{\"_id\":\"{{ taskCollection_id_1 }}\"}]") && text.contains("taskCollection_id_2"),
        "the update and the remove follow the insert's id: {text}"
    );
    let users = doc.summary.users.completed;
    assert!(users >= 2, "{}", o.out);
    assert_eq!((doc.summary.users.failed, doc.summary.step_errors), (0, 0), "{}", o.out);
    assert_eq!(errors, [0, 0, 0], "Meteor's server saw no failed insert, update or remove");
    assert_eq!(inserts, 2 * users, "two inserts a user reached the server");

    // As recorded, the second insert's id is already taken for every user after the first.
    let (o, _, doc, errors, _) = replay(&["--no-correlate"], "as-recorded");
    let users = doc.summary.users.completed + doc.summary.users.failed;
    assert!(users >= 2, "{}", o.out);
    assert!(errors[0] >= users - 1, "duplicate ids refused by Meteor: {errors:?}\n{}", o.out);
}

/// A WebSocket entry of a HAR with these messages (`(sent, seconds, DDP message)`).
fn ws_entry(url: &str, messages: &[(bool, f64, serde_json::Value)]) -> serde_json::Value {
    let frames: Vec<serde_json::Value> = messages
        .iter()
        .map(|(sent, t, m)| {
            let data = if m.is_string() { m.as_str().unwrap().to_string() } else { m.to_string() };
            serde_json::json!({"type": if *sent { "send" } else { "receive" }, "time": t, "opcode": 1, "data": data})
        })
        .collect();
    serde_json::json!({"request": {"method": "GET", "url": url}, "response": {"status": 101, "headers": []}, "_webSocketMessages": frames})
}

/// A session of `calls` calls of `method`, a second apart, each with `params(i)`.
fn polling_har(calls: usize, method: &str, params: &dyn Fn(usize) -> serde_json::Value) -> serde_json::Value {
    let mut m = vec![
        (true, 1000.0, serde_json::json!({"msg": "connect", "version": "1", "support": ["1"]})),
        (false, 1000.01, serde_json::json!({"msg": "connected", "session": "s"})),
    ];
    for i in 0..calls {
        let t = 1000.1 + i as f64 + (i % 5) as f64 * 0.01;
        let id = (i + 1).to_string();
        m.push((true, t, serde_json::json!({"msg": "method", "method": method, "params": params(i), "id": id})));
        m.push((false, t + 0.004, serde_json::json!({"msg": "result", "id": id, "result": {"n": i}})));
    }
    serde_json::json!({"log": {"entries": [ws_entry("ws://127.0.0.1:3000/websocket", &m)]}})
}

/// Every HAR these tests know (the Chrome fixture, and HARs that hostile or odd pages make:
/// control characters, `{{`, unicode and empty names, SockJS garbage, Playwright's milliseconds,
/// days-long pauses, secrets, two tabs, a long polling session) is recorded into a scenario that
/// `bolide run` accepts and runs against the reference server: users start, nothing is refused.
#[test]
fn every_har_records_a_scenario_that_runs() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let j = |v: serde_json::Value| v;
    let connect = || (true, 1.0, j(serde_json::json!({"msg": "connect", "version": "1", "support": ["1"]})));
    let connected = || (false, 1.01, j(serde_json::json!({"msg": "connected", "session": "s"})));
    let method = |t: f64, id: &str, name: &str, params: serde_json::Value| {
        (true, t, serde_json::json!({"msg": "method", "method": name, "params": params, "id": id}))
    };
    let mut hars: Vec<(String, serde_json::Value, Vec<&str>)> = Vec::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chrome-devtools.har");
    hars.push((
        "chrome-devtools".into(),
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap(),
        vec![],
    ));
    let odd = vec![
        connect(),
        connected(),
        method(
            1.1,
            "1",
            "fetchTasks\u{1b}[2J\r\nX-Evil: 1",
            serde_json::json!([{"q": "{{ not a variable }}", "n": "line\nbreak\u{7}"}]),
        ),
        method(1.2, "2", "", serde_json::json!([])),
        method(1.3, "3", "tâches/ajouter ✓", serde_json::json!(["{{", "}}", "{{ '{{' }}"])),
        (true, 1.4, serde_json::json!({"msg": "sub", "id": "a", "name": "fetchTasks", "params": [{"$date": 1}]})),
        (true, 1.5, serde_json::json!({"msg": "unsub", "id": "never-subscribed"})),
        (false, 1.6, serde_json::json!({"msg": "result", "id": "99", "result": "ZZZZZZZZZZZZZZZZZ"})),
        (true, 1.7, serde_json::json!({"msg": "connect", "version": "1"})),
        (true, 1.8, serde_json::json!({"msg": "nosuchmessage"})),
        (true, 1.9, serde_json::json!("not json at all {")),
        (true, 400_000.0, serde_json::json!({"msg": "method", "method": "fetchTasks", "params": [], "id": "4"})),
    ];
    hars.push((
        "odd".into(),
        serde_json::json!({"log": {"entries": [ws_entry("ws://127.0.0.1:3000/websocket", &odd)]}}),
        vec![],
    ));
    // SockJS with its framing and a garbage frame; times in milliseconds as Playwright writes them.
    let sockjs_frames = serde_json::json!([
        {"type": "receive", "time": 1_795_000_000_000.0_f64, "opcode": 1, "data": "o"},
        {"type": "send", "time": 1_795_000_000_001.0_f64, "opcode": 1, "data": "[\"{\\\"msg\\\":\\\"connect\\\",\\\"version\\\":\\\"1\\\",\\\"support\\\":[\\\"1\\\"]}\"]"},
        {"type": "receive", "time": 1_795_000_000_002.0_f64, "opcode": 1, "data": "a[\"{\\\"msg\\\":\\\"connected\\\",\\\"session\\\":\\\"s\\\"}\"]"},
        {"type": "receive", "time": 1_795_000_000_003.0_f64, "opcode": 1, "data": "a[garbage"},
        {"type": "send", "time": 1_795_000_000_300.0_f64, "opcode": 1, "data": "[\"{\\\"msg\\\":\\\"method\\\",\\\"method\\\":\\\"fetchTasks\\\",\\\"params\\\":[],\\\"id\\\":\\\"1\\\"}\"]"},
        {"type": "receive", "time": 1_795_000_000_400.0_f64, "opcode": 2, "data": "AAEC"},
        {"type": "receive", "time": 1_795_000_000_500.0_f64, "opcode": 1, "data": "c[3000,\"Go away!\"]"}
    ]);
    hars.push((
        "sockjs-playwright".into(),
        serde_json::json!({"log": {"entries": [{"request": {"url": "ws://127.0.0.1:3000/sockjs/1/x/websocket"}, "_webSocketMessages": sockjs_frames}]}}),
        vec![],
    ));
    let secrets = vec![
        connect(),
        connected(),
        method(
            1.1,
            "1",
            "login",
            serde_json::json!([{"user": {"username": "ada"}, "password": {"digest": "d", "algorithm": "sha-256"}}]),
        ),
        (
            false,
            1.2,
            serde_json::json!({"msg": "result", "id": "1", "result": {"id": "u5erIdAAAAAAAAAAA", "token": "T0ken"}}),
        ),
        method(
            1.3,
            "2",
            "changePassword",
            serde_json::json!([{"digest": "a", "algorithm": "sha-256"}, {"digest": "b", "algorithm": "sha-256"}]),
        ),
        method(1.4, "3", "report", serde_json::json!([{"apiKey": "k", "sessionId": "x", "token": "T0ken"}])),
        method(1.5, "4", "login", serde_json::json!([{"resume": "T0ken"}])),
    ];
    hars.push((
        "secrets".into(),
        serde_json::json!({"log": {"entries": [ws_entry("ws://127.0.0.1:3000/websocket", &secrets)]}}),
        vec![],
    ));
    let tab = |t0: f64, name: &str| {
        ws_entry(
            "ws://127.0.0.1:3000/websocket",
            &[
                (true, t0, serde_json::json!({"msg": "connect", "version": "1", "support": ["1"]})),
                (true, t0 + 0.5, serde_json::json!({"msg": "method", "method": name, "params": [], "id": "1"})),
            ],
        )
    };
    hars.push((
        "tabs".into(),
        serde_json::json!({"log": {"entries": [tab(1.0, "a"), tab(5.0, "b")]}}),
        vec!["--connection", "all"],
    ));
    hars.push((
        "polling".into(),
        polling_har(40, "fetchTasks", &|_| serde_json::json!([])),
        vec!["--think-scale", "0.01"],
    ));

    for (name, har, extra) in &hars {
        let path = dir.path().join(format!("{name}.har"));
        std::fs::write(&path, har.to_string()).unwrap();
        let yml = dir.path().join(format!("{name}.yml"));
        let mut args = vec!["record", path.to_str().unwrap(), "-o", yml.to_str().unwrap()];
        args.extend(extra.iter().copied());
        let o = bolide(&args);
        assert_eq!(o.code, 0, "{name}: {}\n{}", o.out, o.err);
        let text = std::fs::read_to_string(&yml).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{name}: control characters written:\n{text}");
        assert!(!text.contains("T0ken") && !o.out.contains("T0ken"), "{name}: a token written");
        // The payload file the scenario asks for, with a row.
        if let Some(fields) = text.lines().find_map(|l| l.trim().strip_prefix("fields: [")) {
            let header = fields.trim_end_matches(']').replace(", ", ",");
            let row = vec!["x"; header.split(',').count()].join(",");
            std::fs::write(dir.path().join("users.csv"), format!("{header}\n{row}\n")).unwrap();
        }
        let json = dir.path().join(format!("{name}.json"));
        let o = bolide(&[
            "run",
            yml.to_str().unwrap(),
            "--target",
            &server.base_url(),
            "--arrival-rate",
            "20",
            "-d",
            "100ms",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            o.code == 0 || o.code == 1,
            "{name}: bolide run refused it ({}):\n{}\n{}\n{text}",
            o.code,
            o.out,
            o.err
        );
        let doc = VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let users = &doc.summary.users;
        assert!(users.launched >= 1, "{name}: no user ran\n{}", o.out);
    }
}

/// Peak memory of `bolide ARGS` as a process of its own (kB), and its exit code.
// Reaped by wait4, which gives this child's own peak (RUSAGE_CHILDREN would give the largest of
// every child of the test process: a browser of another test).
#[allow(clippy::zombie_processes)]
fn peak_kb(args: &[&str]) -> (u64, i32, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.unwrap(), &mut err).unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child; both pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    (usage.ru_maxrss as u64, libc::WEXITSTATUS(status), err)
}

/// A long session (hours of a page polling a method) is folded into a loop; one whose steps never
/// repeat makes a scenario past the 4 MiB a scenario may hold, and is refused with the reason,
/// nothing written. Either way the memory it takes stays within twice the HAR's size (over what
/// recording a small HAR takes).
#[test]
fn long_sessions_fold_into_loops_or_are_refused_within_twice_their_size() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let calls = 30_000;
    let same = write("same.har", polling_har(calls, "status", &|_| serde_json::json!([{"room": "lobby"}])));
    let vary = write(
        "vary.har",
        polling_har(calls, "say", &|i| serde_json::json!([{"room": "lobby", "text": format!("message number {i}")}])),
    );
    let small = write("small.har", polling_har(3, "status", &|_| serde_json::json!([])));
    let out = dir.path().join("s.yml");
    let o = out.to_str().unwrap();
    let (base, code, err) = peak_kb(&["record", small.to_str().unwrap(), "-o", o]);
    assert_eq!(code, 0, "{err}");

    let (peak, code, err) = peak_kb(&["record", same.to_str().unwrap(), "-o", o]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains(&format!("        count: {calls}")), "{text}");
    assert!(text.lines().count() < 30, "{text}");
    let size_kb = std::fs::metadata(&same).unwrap().len() / 1024;
    assert!(
        peak.saturating_sub(base) <= 2 * size_kb,
        "{peak} kB at most (a small HAR: {base} kB) for a HAR of {size_kb} kB"
    );
    bolide::scenario::yaml::load_file(&out).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(&out).unwrap();

    let (peak, code, err) = peak_kb(&["record", vary.to_str().unwrap(), "-o", o]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a scenario may hold; nothing written") && err.contains("60003 steps"), "{err}");
    assert!(!out.exists(), "nothing written");
    let size_kb = std::fs::metadata(&vary).unwrap().len() / 1024;
    assert!(
        peak.saturating_sub(base) <= 2 * size_kb,
        "{peak} kB at most (a small HAR: {base} kB) for a HAR of {size_kb} kB"
    );
}

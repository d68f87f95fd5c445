//! DDP closes like a browser, against Meteor 3.0.4's own server (../shared/meteor-server) with
//! permessage-deflate on: the messages a user sends right before `disconnect` (or before its flow
//! ends) reach the server, which counts every DDP message it reads; bolide's count of messages
//! sent is the server's count of messages read.

mod common;

use std::time::Duration;

use common::meteor::Meteor;

#[test]
fn messages_sent_right_before_disconnect_reach_meteor() {
    for transport in ["websocket", "sockjs"] {
        closes_cleanly_over(transport);
    }
}

fn closes_cleanly_over(transport: &str) {
    let meteor = Meteor::start();
    let dir = tempfile::tempdir().unwrap();
    let (file, json) = (dir.path().join("s.yml"), dir.path().join("run.json"));
    // Six users, each: subscribe, one write, then its unsub and a last method right before
    // disconnect (no wait for their answers), and a second flow whose last message ends the user.
    let yaml = format!(
        "config:\n  target: http://127.0.0.1:{}\n  phases: [{{duration: 1, arrivalCount: 6}}]\n  ddp: {{compression: true, transport: {transport}}}\n\
         scenarios:\n  - weight: 1\n    flow:\n      - connect\n      - subscribe: fetchTasks\n\
         \x20     - call: {{method: insertTask, params: [{{description: last, sessionId: \"{{{{ $vuId }}}}\"}}]}}\n\
         \x20     - unsubscribe: fetchTasks\n      - disconnect\n",
        meteor.port,
    );
    std::fs::write(&file, yaml).unwrap();
    let o = common::bolide(&["run", file.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let doc = bolide::stats::vu::VuDoc::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc.summary.users.completed, 6, "{}", o.out);
    // The server's sockets closed before it is asked (a closing handshake ends with its close).
    let mut stats = meteor.stats();
    for _ in 0..50 {
        if stats["sockets"]["open"].as_u64() == Some(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        stats = meteor.stats();
    }
    let read = &stats["messagesIn"];
    let count = |m: &str| read[m].as_u64().unwrap_or(0);
    assert_eq!(count("unsub"), 6, "{transport}: every unsub sent right before disconnect was read: {stats}");
    assert_eq!(count("method"), 6, "{stats}");
    assert_eq!(count("connect"), 6, "{stats}");
    let total: u64 = read.as_object().unwrap().values().filter_map(|v| v.as_u64()).sum();
    assert_eq!(total, doc.summary.messages_out, "bolide's messages sent are the server's messages read: {stats}");
    assert_eq!(stats["sockets"]["closed"].as_u64(), Some(6), "{stats}");
}

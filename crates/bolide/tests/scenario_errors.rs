//! The wording of scenario-file errors, as a user sees it (snapshots): every problem at once, each
//! with file:line:column, what was expected, and a hint where one helps.

use std::path::Path;

use bolide::scenario::yaml::load_str;

fn errors(text: &str) -> String {
    load_str(text, "bench.yml", Path::new(".")).unwrap_err().to_string()
}

#[test]
fn many_problems_in_one_file() {
    let text = r#"config:
  target: http://127.0.0.1:3000
  phases:
    - duration: 60
      arivalRate: 4
    - duration: soon
      arrivalRate: 2
  maxVusers: many
  ddp:
    transport: carrier-pigeon
scenarios:
  - flow:
      - conect
      - call:
          params: [{ sessionId: "{{ sesionId }}" }]
      - waitFor: { collection: tasks, until: vanishes }
      - subscribe: { name: fetchTasks, timeout: 2 parsecs }
      - loop:
          - think: 1
"#;
    let want = r#"bench.yml:4:7: a phase needs "arrivalRate", "arrivalCount", "users" or "pause"
    hint: e.g. arrivalRate: 4 (users per second), or users: 50 (looping for the duration)
bench.yml:5:7: unknown key "arivalRate" in a phase
    hint: did you mean "arrivalRate"? a phase takes: duration, arrivalRate, rampTo, arrivalCount, users, pause, name, poisson, burstiness
bench.yml:6:17: duration must be a duration (seconds, or e.g. 500ms, 30s, 2m)
bench.yml:8:14: config.maxVusers must be a whole number of at least 0, not a string
bench.yml:10:16: transport "carrier-pigeon" is not websocket, sockjs, xhr-polling or xhr-streaming
bench.yml:13:9: unknown step "conect"
    hint: did you mean "connect"?
bench.yml:15:11: call needs "method"
bench.yml:15:19: "{{ sesionId }}" is not a variable
    hint: variables come from config.variables, config.payload fields, captures, and $vuId, $randomId, $now, $arrival, $loopCount, $loopIndex, $loopElement, loginToken, userId
bench.yml:16:46: until "vanishes" is not one of matches, appears, changes, disappears
bench.yml:17:49: timeout must be a duration (seconds, or e.g. 500ms, 30s, 2m)
bench.yml:18:9: a loop needs "count" (times) or "over" (a list or "{{ variable }}")"#;
    assert_eq!(errors(text), want);
}

#[test]
fn close_variable_names_get_a_suggestion() {
    let text = "config:\n  target: http://h\n  phases: [{duration: 1, arrivalCount: 1}]\n  variables: {sessionName: [a]}\nscenarios:\n  - flow:\n      - call: {method: m, params: [\"{{ sesionName }}\"]}\n";
    assert_eq!(
        errors(text),
        "bench.yml:7:35: \"{{ sesionName }}\" is not a variable\n    hint: did you mean \"{{ sessionName }}\"?"
    );
}

#[test]
fn syntax_and_shape_errors() {
    // Each row: file text, the whole message.
    let rows = [
        ("config: [1, 2\n", "bench.yml:2:1: YAML syntax: while parsing a flow sequence, expected ',' or ']'"),
        ("- just\n- a list\n", "bench.yml:1:1: the scenario file must be a mapping, not a list"),
        ("config:\n  target: ftp://x\n  phases: []\nscenarios: []\n",
         "bench.yml:2:11: config.target must be http:// or https://, not ftp://\n    hint: the DDP endpoint is derived from it, as a browser would\nbench.yml:3:11: config.phases must be a non-empty list of phases\n    hint: e.g. - duration: 60\n            arrivalRate: 4"),
        ("config:\n  target: http://h\n  phases: [{duration: 1, arrivalCount: 1}]\n  payload: {path: no-such.csv, fields: [a]}\nscenarios:\n  - flow: [connect]\n",
         "bench.yml:4:19: payload ./no-such.csv: No such file or directory (os error 2)"),
        ("config:\n  target: http://h\n  phases: [{duration: 1, arrivalCount: 1}]\nscenarios:\n  - flow:\n      - call: {method: m}\n        subscribe: x\n",
         "bench.yml:6:9: one step per list item, found call and subscribe"),
    ];
    for (text, want) in rows {
        let got = errors(text);
        assert!(got.starts_with(want), "for:\n{text}\ngot:\n{got}\nwant:\n{want}");
    }
}

#[test]
fn a_payload_file_without_end_is_refused_not_read_forever() {
    let text = "config:\n  target: http://h\n  phases: [{duration: 1, arrivalCount: 1}]\n  payload:\n    path: /dev/zero\n    fields: [a]\nscenarios:\n  - flow:\n      - think: 1\n";
    assert_eq!(
        errors(text),
        "bench.yml:5:11: payload /dev/zero: larger than 64 MiB, the most bolide reads from one file"
    );
}

//! bolide's own CPU per unit of work: each load thread's own clock at its end, summed, over the
//! requests (HTTP) or DDP messages of the run, in the terminal summary, the document, the bench
//! table and compare's metrics.

mod common;

use common::*;

fn ok_server() -> Fake {
    fake(|s| answer_all(s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
}

#[test]
fn an_http_run_says_its_cpu_per_request_and_keeps_it() {
    let target = ok_server();
    let (o, doc) = http_json(&["-n", "3000", "-c", "2", "-t", "2", &target.url("/")]);
    let g = doc.generator.as_ref().unwrap();
    let cpu_s = g.cpu_s.expect("the load threads' CPU time");
    assert!(cpu_s > 0.0 && cpu_s < 600.0, "{cpu_s}");
    let per = g.cpu_us_per_request.unwrap();
    let requests = doc.summary.responses + doc.summary.errors;
    assert_eq!(requests, 3000);
    assert!((per - cpu_s * 1e6 / requests as f64).abs() <= per * 1e-9, "{per} vs {cpu_s}");
    assert!(g.cpu_us_per_message.is_none());
    // The summary's line shows the same figure.
    let line =
        o.out.lines().find(|l| l.contains("µs of bolide's CPU per request")).unwrap_or_else(|| panic!("{}", o.out));
    assert!(line.contains(&format!("{per:.2} µs")), "{line}");
    let text = serde_json::to_string(&doc).unwrap();
    assert_eq!(schema_problems("result.schema.json", &text), Vec::<String>::new());
}

#[test]
fn a_ddp_run_says_its_cpu_per_message() {
    let server = refserver::Server::start(refserver::Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ddp.json");
    let o = bolide(&[
        "run",
        "tasks-reactive",
        "--target",
        &server.base_url(),
        "--arrival-rate",
        "5",
        "-d",
        "1s",
        "--tasks",
        "2",
        "--think",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let text = std::fs::read_to_string(&json).unwrap();
    assert_eq!(schema_problems("ddp-result.schema.json", &text), Vec::<String>::new());
    let doc = bolide::stats::vu::VuDoc::from_json(&text).unwrap();
    let g = doc.generator.as_ref().unwrap();
    let messages = doc.summary.messages_in + doc.summary.messages_out;
    assert!(messages > 0);
    let per = g.cpu_us_per_message.expect("per message");
    assert!((per - g.cpu_s.unwrap() * 1e6 / messages as f64).abs() <= per * 1e-9);
    assert!(o.out.contains(&format!("{per:.2} µs of bolide's CPU per message")), "{}", o.out);
}

#[test]
fn bench_tables_and_compare_carry_it() {
    let target = ok_server();
    let dir = tempfile::tempdir().unwrap();
    for label in ["base", "new"] {
        let out = dir.path().join(label);
        let o = bolide(&[
            "bench",
            "http",
            "--runs",
            "2",
            "--cooldown",
            "0",
            "--label",
            label,
            "-n",
            "300",
            "-c",
            "1",
            "--out",
            out.to_str().unwrap(),
            &target.url("/"),
        ]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
        // The runs table has the column, each run's figure as its document says.
        let table = md_table(&o.out, "# Run").unwrap_or_else(|| panic!("{}", o.out));
        let col = table[0].iter().position(|h| h == "bolide µs/req").unwrap_or_else(|| panic!("{:?}", table[0]));
        let doc = read_doc(&out.join("http-1.json"));
        let per = doc.generator.unwrap().cpu_us_per_request.unwrap();
        assert_eq!(table[1][col], format!("{per:.2}"));
    }
    let o = bolide(&["compare", dir.path().join("base").to_str().unwrap(), dir.path().join("new").to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.out.contains("| bolide CPU per request or message "), "{}", o.out);
}

//! Every file bolide writes is read back by `report`, `compare` or `merge`: a `bench
//! --parameter-list`'s series (compared again as bench compared them), its `comparison.json` and
//! `--json` summary, a bench series' summary, a capacity ladder's summary and `--out DIR`, and the
//! levels document of `run ddp-calls --users`. The readers run as the real binary (exit codes and
//! stderr as users get them); the load runs in-process against the reference server on
//! 127.0.0.1:0. Also: a `--parameter-list` grid is bounded and a stop is honoured while it is
//! planned, and the tables these files feed (a ladder's level without a verdict, the comparison's
//! significance, counts past a thousand) read as the charts and the other tables do.

mod common;

use std::path::Path;
use std::process::Command;

use common::{bolide, bolide_with_cancel};
use refserver::{Config, Server};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_bolide");

/// Runs the real binary in `dir`: (exit code, stdout, stderr); never a panic or a backtrace.
fn binary(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN).args(args).current_dir(dir).output().expect("bolide runs");
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
    (o.status.code().unwrap_or(-1), out, err)
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_parameter_grid_is_compared_again_and_its_summaries_are_reported() {
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/delay/{{d}}", server.base_url());
    let (out, json_path) = (tmp.path().join("OUT"), tmp.path().join("B.json"));
    let (out, json_path) = (out.to_str().unwrap(), json_path.to_str().unwrap());
    let args = ["bench", "http", "-L", "d", "10,11", "--runs", "2", "--cooldown", "0", "-n", "20", "-c", "2"];
    let mut args = args.to_vec();
    args.extend(["--out", out, "--json", json_path, &url]);
    let o = bolide(&args);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let dir = tmp.path();

    // compare of bench's own series: the documents record the parameter, so they are compared as
    // bench did (exit 0), with the parameter named, not refused as different workloads.
    let (code, out, err) = binary(dir, &["compare", "OUT/d=10", "OUT/d=11", "--format", "json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(c["refused"], serde_json::json!([]), "{c}");
    let compared = c["comparisons"].as_array().unwrap();
    assert_eq!(compared.len(), 1);
    assert_eq!((compared[0]["baseline"].as_str(), compared[0]["series"].as_str()), (Some("d=10"), Some("d=11")));
    assert_eq!(compared[0]["parameter"], "d: 10 against 11");
    assert_eq!(
        (compared[0]["baseline_runs"].as_array().unwrap().len(), compared[0]["runs"].as_array().unwrap().len()),
        (2, 2)
    );
    // Each side's column of ab's table: the mean over its 2 runs of 20 responses each.
    let columns = c["http_tables"][0]["columns"].as_array().unwrap();
    assert_eq!(
        columns.iter().map(|k| (k["runs"].as_u64(), k["requests"].as_f64())).collect::<Vec<_>>(),
        [(Some(2), Some(20.0)); 2]
    );
    let (code, text, _) = binary(dir, &["compare", "OUT/d=10", "OUT/d=11"]);
    assert_eq!(code, 0);
    assert!(text.contains("two values of one bench --parameter-list (d: 10 against 11)"), "{text}");

    // The significance column is short: the test's sentence comes once, under the table.
    let table = common::md_table(&text, "Metric").expect("the metrics table");
    let significance = table[0].iter().position(|h| h == "Significance").unwrap();
    for row in &table[1..] {
        assert!(row[significance].len() <= 40, "{:?}", row[significance]);
        assert!(!row[significance].contains("t-test"), "{:?}", row[significance]);
    }
    assert_eq!(text.matches("Significance: a paired t-test on 2 interleaved pairs").count(), 1, "{text}");

    // comparison.json and bench's --json each make a page, with the runs (found where bench
    // wrote them) and the comparison bench made.
    for input in ["OUT/comparison.json", "B.json", "OUT", "OUT/d=10/http-summary.json"] {
        let (code, out, err) = binary(dir, &["report", input, "-o", "page.html"]);
        assert_eq!(code, 0, "{input}: {out}\n{err}");
        let page = read(&dir.join("page.html"));
        if input == "OUT/d=10/http-summary.json" {
            // A series' summary beside its runs: the runs' page.
            assert!(page.contains("http-1.json") && page.contains("http-2.json"), "{input}");
        } else {
            assert!(page.contains("d=11 compared with d=10") && page.contains("Detectable"), "{input}");
            assert!(!page.contains("has no runs of it"), "{input}");
        }
    }
    // The summaries alone, their runs moved away: the comparison's own tables, said so.
    std::fs::rename(dir.join("OUT"), dir.join("moved")).unwrap();
    std::fs::create_dir(dir.join("alone")).unwrap();
    std::fs::copy(dir.join("moved/comparison.json"), dir.join("alone/comparison.json")).unwrap();
    for input in ["alone/comparison.json", "B.json"] {
        let (code, out, err) = binary(dir, &["report", input, "--format", "md", "-o", "-"]);
        assert_eq!(code, 0, "{input}: {out}\n{err}");
        assert!(out.contains("are not here") && out.contains("Comparison with d=10"), "{input}: {out}");
    }
    let (code, out, err) = binary(dir, &["report", "moved/d=11/http-summary.json", "--format", "md", "-o", "-"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("d=11") && !out.contains("are not here"), "{out}");
}

#[test]
fn different_workloads_are_refused_naming_the_flag_that_compares_them() {
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for d in ["1", "2"] {
        let path = tmp.path().join(format!("d{d}.json"));
        let url = format!("{}/delay/{d}", server.base_url());
        let o = bolide(&["http", "-n", "10", "-c", "1", "--json", path.to_str().unwrap(), &url]);
        assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    }
    // Two separate runs record no parameter: refused, exit 2, and the error names the flag.
    let (code, out, err) = binary(tmp.path(), &["compare", "d1.json", "d2.json"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("error: nothing comparable between the series") && err.contains("--allow-different-workloads"),
        "{err}"
    );
    let (code, out, err) = binary(tmp.path(), &["compare", "d1.json", "d2.json", "--allow-different-workloads"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Different workloads, compared on purpose"), "{out}");
}

#[test]
fn a_capacity_ladder_is_drawn_again_from_its_out_directory_and_its_summary() {
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (cap, summary) = (tmp.path().join("CAP"), tmp.path().join("C.json"));
    let o = bolide(&[
        "capacity",
        "http",
        "--from",
        "20",
        "--step",
        "20",
        "--to",
        "40",
        "-d",
        "1s",
        "--out",
        cap.to_str().unwrap(),
        "--json",
        summary.to_str().unwrap(),
        &format!("{}/ok", server.base_url()),
    ]);
    // Passed, or no verdict where this shared machine was the limit (4): a ladder either way.
    assert!([0, 4].contains(&o.code), "{}\n{}", o.out, o.err);
    let s = json(&summary);
    assert_eq!(s["format"], "bolide.capacity");
    let levels = s["levels"].as_array().unwrap();
    assert!(!levels.is_empty() && levels.len() <= 2, "{s}");
    // The same summary beside the levels' documents, one document per level run.
    assert_eq!(json(&cap.join("http-capacity.json")), s);
    for l in levels {
        assert!(cap.join(format!("http-level-{}.json", l["level"].as_f64().unwrap())).is_file(), "{l}");
    }
    for input in ["CAP", "C.json"] {
        let (code, out, err) = binary(tmp.path(), &["report", input, "--format", "md", "-o", "-"]);
        assert_eq!(code, 0, "{input}: {out}\n{err}");
        assert!(out.contains("## Capacity ladder"), "{input}: {out}");
        // One row of the ladder per level the summary holds, as capacity printed it.
        let table = common::md_table(&out, "Requests/s").expect("the ladder's table");
        assert_eq!(table.len() - 1, levels.len(), "{input}: {out}");
        for (row, l) in table[1..].iter().zip(levels) {
            assert_eq!(row[0], l["level"].as_f64().unwrap().to_string());
            assert!(o.out.contains(&format!("| {} ", row[0])), "{}", o.out);
        }
        let (code, _, err) = binary(tmp.path(), &["report", input, "-o", "ladder.html"]);
        assert_eq!(code, 0, "{err}");
        assert!(read(&tmp.path().join("ladder.html")).contains("ladder-rps"), "{input}: the ladder's chart");
    }
    // compare reads the directory's runs and passes over the ladder's summary without a word.
    let (_, _, err) = binary(tmp.path(), &["compare", "CAP", "CAP"]);
    assert!(!err.contains("http-capacity.json"), "{err}");
}

#[test]
fn the_levels_document_of_ddp_calls_is_reported() {
    let server = Server::start(Config { threads: 1, ..Config::default() }).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = bolide(&[
        "run",
        "ddp-calls",
        "--users",
        "1,2",
        "-d",
        "500ms",
        "--target",
        &server.base_url(),
        "--out",
        tmp.path().join("LV").to_str().unwrap(),
        "--json",
        tmp.path().join("L.json").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert_eq!(json(&tmp.path().join("L.json"))["format"], "bolide.levels");
    let (code, out, err) = binary(tmp.path(), &["report", "L.json", "--format", "md", "-o", "-"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let table = common::md_table(&out, "Clients").expect("the levels' table");
    assert_eq!(table[0][0], "Clients");
    let levels: Vec<&str> = table[1..].iter().map(|r| r[0].split(' ').next().unwrap()).collect();
    assert_eq!(levels, ["1", "2"]);
    // Each level's own document, found where --out kept it.
    assert!(out.contains("## users 1") && out.contains("## users 2"), "{out}");
}

#[test]
fn a_parameter_grid_past_the_bound_is_refused_and_a_stop_while_planning_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("grid");
    // The million series: refused at once, the bound stated, nothing created.
    let million: Vec<String> = (0..1_000_000).map(|i| i.to_string()).collect();
    let million = million.join(",");
    let o = bolide(&["bench", "http", "-L", "a", &million, "--out", out.to_str().unwrap(), "http://127.0.0.1:9/"]);
    assert_eq!(o.code, 2, "{}", o.err);
    assert!(o.err.contains("more than 256 series (1000000 values); at most 256"), "{}", o.err);
    assert!(!out.exists());
    // Two lists of 20 and 13: 260 series, past the bound, as the real binary says it.
    let (a, b) =
        ((0..20).map(|i| i.to_string()).collect::<Vec<_>>(), (0..13).map(|i| i.to_string()).collect::<Vec<_>>());
    let (code, _, err) = binary(
        tmp.path(),
        &["bench", "http", "-L", "a", &a.join(","), "-L", "b", &b.join(","), "--out", "grid", "http://127.0.0.1:9/"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("(20 x 13 values); at most 256"), "{err}");
    assert!(!out.exists());
    // A value that stands in a typed flag (`-c {c}`): the bound is still what is said, not a
    // flag that cannot read `{c}`.
    let c: Vec<String> = (1..=300).map(|i| i.to_string()).collect();
    let (code, _, err) = binary(
        tmp.path(),
        &["bench", "http", "-L", "c", &c.join(","), "-c", "{c}", "--out", "grid", "http://127.0.0.1:9/"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("more than 256 series (300 values)"), "{err}");
    assert!(!out.exists());
    // A stop before the series are planned: nothing runs, nothing is written.
    let stopped = tokio_util::sync::CancellationToken::new();
    stopped.cancel();
    let o = bolide_with_cancel(
        &["bench", "http", "-L", "v", "1,2", "--out", out.to_str().unwrap(), "http://127.0.0.1:9/"],
        &stopped,
    );
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(o.err.contains("stopped while planning the series; nothing ran"), "{}", o.err);
    assert!(!out.exists() && o.out.is_empty(), "{}", o.out);
}

#[test]
fn a_ladder_level_without_a_verdict_reads_the_same_in_its_table_and_its_chart() {
    use bolide::report::charts::{ladder, Level};
    use bolide::results::ladder::{table, Verdict};
    use bolide::stats::doc::Measures;
    let m =
        |rps: f64| Measures { time_s: 10.0, requests_per_s: Some(rps), p99_ms: Some(1312.4), ..Measures::default() };
    let rungs = vec![
        (1000.0, Some(m(999.0)), Verdict::Pass),
        (2000.0, Some(m(1900.0)), Verdict::NotTheServer("the machine had no idle CPU".into())),
    ];
    let text = table("Requests", &rungs).markdown();
    // Measured and plotted: its figures are in the table, its Result says no verdict.
    let row = text.lines().find(|l| l.starts_with("| 2,000")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("10 seconds") && row.contains("no verdict") && !row.contains("| x"), "{row}");
    let charts = ladder(&[(1000.0, m(999.0), Level::Passed), (2000.0, m(1900.0), Level::NoVerdict)], "level");
    let rps = charts.iter().find(|c| c.id == "ladder-rps").unwrap();
    let labels: Vec<&str> = rps.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["passed", "failed", "no verdict"]);
    // Passed in the good tone, failed in the bad, no verdict in the warning's: never green.
    assert_eq!(rps.colours, ["#0072B2", "#D55E00", "#B07800"]);
    let svg = bolide::report::svg::chart(rps);
    assert!(svg.contains("fill=\"#B07800\"") && !svg.contains("#009E73"), "{svg}");
}

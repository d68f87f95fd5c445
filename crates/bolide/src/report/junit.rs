//! `--junit PATH`: a command's verdicts as JUnit XML, the report CI systems show (Jenkins, GitLab,
//! GitHub Actions' test reporters). One test suite per run (or per comparison, per ladder), one
//! test case per threshold or rule with the measured value and the bound in its message, and one
//! for the run itself (completed; interrupted is a failure, suspect a passing case that says so in its name, a run that could not start
//! an error), so that the file is never empty and says why when nothing was judged.
//!
//! The layout satisfies both schemas CI tools are written against: Apache Ant's (every suite with
//! its name, package, id, timestamp without a zone, hostname, counts, time, properties and
//! system-out/err; failures and errors with a type; no `skipped`) and Jenkins'.

use std::fmt::Write as _;
use std::time::SystemTime;

use crate::problem::Problem;
use crate::stats::doc::Doc;
use crate::threshold::ThresholdResult;

/// One test suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    /// Dotted, as JUnit's classnames: `bolide.http`.
    pub package: String,
    pub started: SystemTime,
    pub time_s: f64,
    /// Shown beside the cases: the command line, the workload (never secrets: the command line is
    /// redacted before it reaches a document).
    pub properties: Vec<(String, String)>,
    pub cases: Vec<Case>,
}

/// One test case.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: String,
    pub classname: String,
    pub time_s: f64,
    pub verdict: Verdict,
}

/// How a case fared: passed, failed (a bound broken, a run interrupted), or could not
/// be judged (an error: the run did not start, a comparison was inconclusive).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    Failure { kind: &'static str, message: String },
    Error { kind: &'static str, message: String },
}

impl Case {
    pub fn new(name: impl Into<String>, classname: impl Into<String>, verdict: Verdict) -> Case {
        Case { name: name.into(), classname: classname.into(), time_s: 0.0, verdict }
    }
}

/// The cases of a run's thresholds: each one's expression, what it measured, its value and bound.
pub fn threshold_cases(results: &[ThresholdResult], classname: &str, prefix: &str) -> Vec<Case> {
    results
        .iter()
        .map(|t| {
            let verdict = if t.ok {
                Verdict::Pass
            } else {
                Verdict::Failure {
                    kind: "threshold",
                    message: format!("{} was {}: {} does not hold", t.metric, t.shown(), t.threshold),
                }
            };
            let mut c = Case::new(format!("{prefix}{}", t.threshold), classname, verdict);
            if t.ok {
                // A passing case says its value too (in the name's place CI tools show).
                c.name = format!("{prefix}{} ({})", t.threshold, t.shown());
            }
            c
        })
        .collect()
}

/// The case of a run itself: completed (a suspect run too, named so, as its exit code is 0);
/// interrupted runs fail; no document (the run
/// could not start or its engine failed) is an error with the exit code.
pub fn run_case(doc: Option<&Doc>, code: i32, classname: &str, name: &str) -> Case {
    let verdict = match doc {
        None => Verdict::Error {
            kind: "run",
            message: format!("the run could not start or did not complete (exit code {code}); nothing was measured"),
        },
        Some(d) if d.interrupted() => Verdict::Failure {
            kind: "interrupted",
            message: format!("the run was stopped before its end, after {:.1} s", d.measures().time_s),
        },
        Some(_) => Verdict::Pass,
    };
    // A suspect run is a warning, as its exit code (0) says: the case passes, under its usual name
    // (CI's history follows one test), and the suite's `suspect` property says why.
    let mut c = Case::new(name, classname, verdict);
    c.time_s = doc.map_or(0.0, |d| d.measures().time_s);
    c
}

/// The suite of one run (`http`, `run`, a merged document): the run's case, then its thresholds'.
pub fn for_run(doc: Option<&Doc>, code: i32, command_line: &[String], started: SystemTime) -> Suite {
    let command = command_line.get(1).map(String::as_str).unwrap_or("run");
    let package = format!("bolide.{command}");
    let mut cases = vec![run_case(doc, code, &package, "the run completed and measured the server")];
    if let Some(d) = doc {
        cases.extend(threshold_cases(d.thresholds(), &format!("{package}.thresholds"), ""));
        if let Some(a) = d.ddp().and_then(|d| d.audit.as_ref()) {
            cases.extend(audit_cases(a, &format!("{package}.audit")));
        }
    }
    let mut properties = vec![("command".to_string(), command_line.join(" "))];
    if let Some(d) = doc {
        properties.push(("workload".into(), d.workload()));
        properties.push(("started_at".into(), d.started_at().to_string()));
        if let Some(why) = d.measures().suspect {
            properties.push(("suspect".into(), format!("the figures may measure bolide or the machine: {why}")));
        }
    }
    Suite {
        name: command_line.join(" "),
        package,
        started,
        time_s: doc.map_or(0.0, |d| d.measures().time_s),
        properties,
        cases,
    }
}

/// The audit's cases: one per checkpoint (a difference fails it, a check not made is an error),
/// and one for the walks that never reached their checkpoints when some did not.
pub fn audit_cases(a: &crate::stats::audit::AuditSection, classname: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = a
        .checkpoints
        .iter()
        .map(|c| {
            let verdict = if c.failed > 0 {
                let first = c.first_differences.first().map(|d| format!("; the first: {}", d.line()));
                Verdict::Failure {
                    kind: "audit",
                    message: format!(
                        "{} of {} checks differed from the truth ({} differences){}",
                        c.failed,
                        c.checks,
                        c.differences,
                        first.unwrap_or_default()
                    ),
                }
            } else if c.incomplete > 0 {
                let first = c.reasons.first().map(|r| format!("; the first: {r}"));
                Verdict::Error {
                    kind: "audit-incomplete",
                    message: format!(
                        "{} of {} checks could not be made{}",
                        c.incomplete,
                        c.checks,
                        first.unwrap_or_default()
                    ),
                }
            } else {
                Verdict::Pass
            };
            Case::new(format!("{} ({} checks)", c.name, c.checks), classname, verdict)
        })
        .collect();
    let said = cases.iter().any(|c| c.verdict != Verdict::Pass);
    if a.unreached > 0 || a.checkpoints.is_empty() || (a.outcome != crate::stats::audit::Outcome::Passed && !said) {
        let message = a.why.first().cloned().unwrap_or_else(|| "no checkpoint was reached".into());
        cases.push(Case::new(
            "every user reached its checkpoints",
            classname,
            Verdict::Error { kind: "audit-incomplete", message },
        ));
    }
    cases
}

/// The XML of the suites.
pub fn xml(suites: &[Suite]) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string());
    let host = host.filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into());
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for (id, s) in suites.iter().enumerate() {
        let failures = s.cases.iter().filter(|c| matches!(c.verdict, Verdict::Failure { .. })).count();
        let errors = s.cases.iter().filter(|c| matches!(c.verdict, Verdict::Error { .. })).count();
        let stamp = humantime::format_rfc3339_seconds(s.started).to_string();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" package=\"{}\" id=\"{id}\" timestamp=\"{}\" hostname=\"{}\" tests=\"{}\" \
             failures=\"{failures}\" errors=\"{errors}\" time=\"{:.3}\">",
            attr(&s.name),
            attr(&s.package),
            stamp.trim_end_matches('Z'),
            attr(&host),
            s.cases.len(),
            seconds(s.time_s)
        );
        out.push_str("    <properties>\n");
        let _ = writeln!(out, "      <property name=\"bolide\" value=\"{}\"/>", env!("CARGO_PKG_VERSION"));
        for (k, v) in &s.properties {
            let _ = writeln!(out, "      <property name=\"{}\" value=\"{}\"/>", attr(k), attr(v));
        }
        out.push_str("    </properties>\n");
        for c in &s.cases {
            let head = format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
                attr(&c.name),
                attr(&c.classname),
                seconds(c.time_s)
            );
            match &c.verdict {
                Verdict::Pass => {
                    let _ = writeln!(out, "{head}/>");
                }
                Verdict::Failure { kind, message } | Verdict::Error { kind, message } => {
                    let tag = if matches!(c.verdict, Verdict::Failure { .. }) { "failure" } else { "error" };
                    let _ = writeln!(
                        out,
                        "{head}>\n      <{tag} type=\"{kind}\" message=\"{}\">{}</{tag}>\n    </testcase>",
                        attr(message),
                        text(message)
                    );
                }
            }
        }
        out.push_str("    <system-out/>\n    <system-err/>\n  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Writes the suites to `path` whole (or not at all).
pub fn write(path: &std::path::Path, suites: &[Suite]) -> Result<(), Problem> {
    let body = xml(suites);
    crate::files::write_atomically(path, |w| std::io::Write::write_all(w, body.as_bytes()))
        .map_err(|e| Problem::from(format!("cannot write {}: {e}", path.display())))
}

/// A time JUnit reads: finite and not negative.
fn seconds(s: f64) -> f64 {
    if s.is_finite() && s > 0.0 {
        s
    } else {
        0.0
    }
}

/// Text XML 1.0 can hold (other control characters are dropped), escaped as the HTML report
/// escapes (its references are XML's too), line breaks and tabs kept as references.
fn attr(s: &str) -> String {
    let allowed = |c: &char| {
        let control = (*c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r');
        !control && !matches!(c, '\u{FFFE}' | '\u{FFFF}')
    };
    let kept: String = s.chars().filter(allowed).collect();
    super::html::escape(&kept).replace('\n', "&#10;").replace('\t', "&#9;").replace('\r', "&#13;")
}

/// The same, for element text.
fn text(s: &str) -> String {
    attr(s).replace("&#10;", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_case_agrees_with_the_exit_code() {
        let mut doc = crate::stats::result::ResultDoc::default();
        let clean = Doc::Http(Box::new(doc.clone()));
        assert_eq!(run_case(Some(&clean), 0, "c", "the run completed").verdict, Verdict::Pass);
        // Suspect: exit code 0, so a passing case whose name says why.
        doc.generator = Some(crate::monitor::generator::GeneratorResult {
            suspect: Some("a bolide load thread was saturated".into()),
            ..Default::default()
        });
        let suspect = Doc::Http(Box::new(doc.clone()));
        let c = run_case(Some(&suspect), 0, "c", "the run completed");
        assert_eq!((c.verdict, c.name.as_str()), (Verdict::Pass, "the run completed"));
        let suite = for_run(Some(&suspect), 0, &["bolide".into(), "http".into()], SystemTime::UNIX_EPOCH);
        let why = suite.properties.iter().find(|(k, _)| k == "suspect").map(|(_, v)| v.as_str());
        assert!(why.is_some_and(|w| w.ends_with("a bolide load thread was saturated")), "{:?}", suite.properties);
        // Interrupted: exit code 130, a failure.
        doc.interrupted = true;
        let c = run_case(Some(&Doc::Http(Box::new(doc))), 130, "c", "the run completed");
        assert!(matches!(c.verdict, Verdict::Failure { kind: "interrupted", .. }), "{:?}", c.verdict);
    }

    #[test]
    fn verdicts_make_cases_and_text_is_escaped() {
        let suite = Suite {
            name: "bolide http -H 'X: <&>' http://127.0.0.1/".into(),
            package: "bolide.http".into(),
            started: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000),
            time_s: 2.5,
            properties: vec![("command".into(), "a \"quoted\"\u{1} thing".into())],
            cases: vec![
                Case::new("p99<50ms (12.00 ms)", "bolide.http.thresholds", Verdict::Pass),
                Case::new(
                    "error_rate<1%",
                    "bolide.http.thresholds",
                    Verdict::Failure {
                        kind: "threshold",
                        message: "failed requests was 2.00%: error_rate<1% does not hold".into(),
                    },
                ),
                Case::new("run", "bolide.http", Verdict::Error { kind: "run", message: "no <run>".into() }),
            ],
        };
        let x = xml(&[suite]);
        assert!(x.contains("timestamp=\"2027-01-15T08:00:00\""), "{x}");
        assert!(x.contains("tests=\"3\" failures=\"1\" errors=\"1\" time=\"2.500\""), "{x}");
        assert!(x.contains("name=\"bolide http -H &#39;X: &lt;&amp;&gt;&#39; http://127.0.0.1/\""), "{x}");
        assert!(x.contains("value=\"a &quot;quoted&quot; thing\""), "a control character dropped: {x}");
        assert!(x.contains(
            "<failure type=\"threshold\" message=\"failed requests was 2.00%: error_rate&lt;1% does not hold\">"
        ));
        assert!(x.contains("<error type=\"run\" message=\"no &lt;run&gt;\">no &lt;run&gt;</error>"));
        assert!(x.contains(
            "<testcase name=\"p99&lt;50ms (12.00 ms)\" classname=\"bolide.http.thresholds\" time=\"0.000\"/>"
        ));
    }

    #[test]
    fn a_measure_threshold_is_a_case_with_its_value() {
        let mut d = crate::stats::vu::VuDoc::default();
        let mut h = crate::stats::hist::latency_us();
        crate::stats::hist::record(&mut h, 1_500_000);
        d.histograms.measures.insert("llm.ttft".into(), crate::stats::hist::encode(&h));
        let ts: Vec<_> = ["llm.ttft.p99<2s", "llm.ttft.p99<1s", "sse.gap.p99<1s"]
            .iter()
            .map(|t| crate::threshold::parse(t, crate::threshold::Source::Flag).unwrap())
            .collect();
        let results = crate::stats::verdict::judge(&Doc::Ddp(Box::new(d)), &ts);
        let cases = threshold_cases(&results, "bolide.ddp.thresholds", "");
        assert!(cases[0].name.starts_with("llm.ttft.p99<2s (1500."), "{:?}", cases[0]);
        assert_eq!(cases[0].verdict, Verdict::Pass);
        assert!(
            matches!(&cases[1].verdict, Verdict::Failure { message, .. } if message.starts_with("p99 of llm.ttft was 1500.")),
            "{:?}",
            cases[1]
        );
        assert!(
            matches!(&cases[2].verdict, Verdict::Failure { message, .. } if message.contains("sse.gap.p99<1s does not hold")),
            "{:?}",
            cases[2]
        );
    }

    #[test]
    fn a_run_that_did_not_start_is_an_error_case_never_an_empty_file() {
        let s = for_run(None, 3, &["bolide".into(), "http".into(), "http://127.0.0.1:1/".into()], SystemTime::now());
        assert_eq!(s.cases.len(), 1);
        assert!(matches!(&s.cases[0].verdict, Verdict::Error { message, .. } if message.contains("exit code 3")));
    }
}

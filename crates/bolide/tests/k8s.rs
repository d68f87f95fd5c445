//! `bolide k8s`: the manifests an Indexed Job needs, checked against Kubernetes' own schemas
//! (kubernetes-validate, when installed; CI installs it and sets BOLIDE_K8S_VALIDATE=1 so that
//! its absence fails), and the pods' command run here as the cluster would run it: one shell per
//! completion index, their logs concatenated as `kubectl logs -l job-name=...` prints them, merged
//! by `bolide merge` into exactly the plan.

mod common;

use std::process::{Command, Stdio};
use std::time::SystemTime;

use bolide::stats::result::ResultDoc;
use common::bolide;
use refserver::{Config, Server};

/// The values of the YAML flow sequence on the `command:` line and of the block list under
/// `args:` (both written as JSON strings by bolide).
fn command_and_args(yaml: &str) -> (Vec<String>, Vec<String>) {
    let line = yaml.lines().find(|l| l.trim_start().starts_with("command: ")).unwrap();
    let command: Vec<String> = serde_json::from_str(line.trim_start().trim_start_matches("command: ")).unwrap();
    let args = yaml
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("- \""))
        .map(|l| serde_json::from_str::<String>(l.trim_start().trim_start_matches("- ")).unwrap())
        .collect();
    (command, args)
}

fn validate(path: &std::path::Path) {
    let run = Command::new("kubernetes-validate").args(["--strict", "--quiet"]).arg(path).output();
    match run {
        Ok(out) => assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if std::env::var_os("BOLIDE_K8S_VALIDATE").is_some() => panic!("kubernetes-validate: {e}"),
        Err(_) => eprintln!("kubernetes-validate is not installed: the manifests' schema check is skipped here"),
    }
}

#[test]
fn the_jobs_pods_run_their_segments_and_their_logs_merge_into_the_plan() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.yaml");
    let at = bolide::segment::format_start(bolide::segment::parse_start_at("+2s", SystemTime::now()).unwrap());
    let url = server.base_url() + "/";
    let o = bolide(&[
        "k8s",
        "--segments",
        "3",
        "--name",
        "load",
        "--start-at",
        &at,
        "-o",
        job.to_str().unwrap(),
        "--",
        "http",
        "-c",
        "6",
        "-t",
        "1",
        "-n",
        "600",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let yaml = std::fs::read_to_string(&job).unwrap();
    assert!(
        yaml.contains("completionMode: Indexed") && yaml.contains("completions: 3") && yaml.contains("parallelism: 3")
    );
    assert!(!yaml.contains("kind: ConfigMap"), "an http plan needs no scenario file");
    validate(&job);
    let (command, args) = command_and_args(&yaml);
    assert_eq!(&args[args.len() - 4..], ["--segment", "auto/3", "--start-at", at.as_str()]);
    // Each "pod": the manifest's command and args, JOB_COMPLETION_INDEX set, its own /tmp.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_bolide")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let tmp = dir.path().join(format!("pod-{i}"));
            std::fs::create_dir(&tmp).unwrap();
            Command::new(&command[0])
                .args(&command[1..])
                .args(&args)
                .env("PATH", &path)
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .env("TMPDIR", &tmp)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut log = String::new();
    for pod in pods {
        let out = pod.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        log.push_str(&String::from_utf8_lossy(&out.stdout));
        log.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(log.matches(bolide::stats::merge::LOG_BEGIN).count(), 3, "{log}");
    let logs = dir.path().join("pods.log");
    std::fs::write(&logs, &log).unwrap();
    let merged = dir.path().join("merged.json");
    let o = bolide(&["merge", logs.to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    let m = ResultDoc::from_json(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!((m.summary.responses, m.summary.errors), (600, 0));
    assert_eq!(server.requests(), 600);
    let info = m.merged.unwrap();
    assert_eq!(info.segments.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(info.segments.iter().all(|s| s.source.contains("pods.log#")), "{:?}", info.segments);
}

#[test]
fn a_scenario_file_and_its_payload_travel_in_a_config_map() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("users.yml");
    std::fs::write(dir.path().join("people.csv"), "ann\nbob\n").unwrap();
    std::fs::write(
        &scenario,
        "config:\n  target: http://127.0.0.1:3000\n  phases:\n    - duration: 10\n      arrivalRate: 2\n  payload:\n    \
         path: people.csv\n    fields: [name]\nscenarios:\n  - flow:\n      - connect\n      - call:\n          method: \
         hello\n          params: [\"{{ name }}\"]\n",
    )
    .unwrap();
    let job = dir.path().join("job.yaml");
    let o = bolide(&[
        "k8s",
        "--segments",
        "2",
        "--cpu",
        "500m",
        "--memory",
        "256Mi",
        "--namespace",
        "load",
        "-o",
        job.to_str().unwrap(),
        "--",
        "run",
        scenario.to_str().unwrap(),
        "--target",
        "http://app.load.svc:3000",
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let yaml = std::fs::read_to_string(&job).unwrap();
    assert!(yaml.contains("kind: ConfigMap") && yaml.contains("\"people.csv\": \"ann\\nbob\\n\""), "{yaml}");
    assert!(yaml.contains("namespace: \"load\"") && yaml.contains("cpu: \"500m\""), "{yaml}");
    let (_, args) = command_and_args(&yaml);
    assert_eq!(args[1], "/bolide/scenario/users.yml", "the pods read the mounted file");
    validate(&job);
    // What a pod cannot do is refused before anything is written.
    for (extra, says) in [
        (&["--json", "x.json"][..], "drop --json"),
        (&["--segment", "1/2"][..], "drop --segment"),
        (&["--monitor", "app=:3000"][..], "drop --spawn and --monitor"),
    ] {
        let mut argv = vec!["k8s", "--segments", "2", "--", "run", "sub-churn"];
        argv.extend_from_slice(extra);
        let o = bolide(&argv);
        assert!(o.code == 2 && o.err.contains(says), "{extra:?}: {}", o.err);
    }
    let o = bolide(&["k8s", "--segments", "2", "--name", "Bad_Name", "--", "run", "sub-churn"]);
    assert!(o.code == 2 && o.err.contains("a Job name is lowercase"), "{}", o.err);
}

#[test]
fn any_file_name_or_string_makes_manifests_that_parse() {
    // The second probe: DEL and C1 controls went raw into the YAML (parsers refused it), and a
    // ConfigMap key took the file's name whatever it was.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("my users (v2).yml");
    std::fs::write(dir.path().join("people list.csv"), "ann\u{7f}\nbob\u{85}\n").unwrap();
    std::fs::write(
        &scenario,
        "config:\n  target: http://127.0.0.1:3000\n  phases:\n    - duration: 10\n      arrivalRate: 2\n  payload:\n    \
         path: people list.csv\n    fields: [name]\nscenarios:\n  - flow:\n      - connect\n",
    )
    .unwrap();
    let job = dir.path().join("job.yaml");
    let o = bolide(&[
        "k8s",
        "--segments",
        "2",
        "-o",
        job.to_str().unwrap(),
        "--",
        "run",
        scenario.to_str().unwrap(),
        "--target",
        "http://app.load.svc:3000",
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let yaml = std::fs::read_to_string(&job).unwrap();
    assert!(!yaml.contains('\u{7f}') && !yaml.contains('\u{85}'), "{yaml}");
    assert!(yaml.contains("\"ann\\u007f\\nbob\\u0085\\n\""), "{yaml}");
    // Keys of the allowed characters, each mapped back to the file's own name in the pod.
    assert!(yaml.contains("  \"my_users__v2_.yml\": "), "{yaml}");
    assert!(yaml.contains("- key: \"people_list.csv\"\n                path: \"people list.csv\""), "{yaml}");
    let (_, args) = command_and_args(&yaml);
    assert_eq!(args[1], "/bolide/scenario/my users (v2).yml");
    validate(&job);
}

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
    let (_, args) = command_and_args(&yaml);
    assert_eq!(&args[args.len() - 4..], ["--segment", "auto/3", "--start-at", at.as_str()]);
    let pods: Vec<_> = (0..3).map(|i| pod(&yaml, dir.path(), i)).collect();
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

/// What a real cluster showed the manifests lacked (bench/k8s-local.sh): the pull policy of an
/// image made on the node, the host network, a failed pod that failed the whole Job (a Job-wide
/// backoffLimit of 0) where it should fail its own index, an API token the pods never use, the
/// finished Job kept forever.
#[test]
fn what_a_real_cluster_needed_is_in_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.yaml");
    let o = bolide(&[
        "k8s",
        "--segments",
        "4",
        "--image",
        "docker.io/local/bolide:dev",
        "--image-pull-policy",
        "Never",
        "--host-network",
        "--retries",
        "2",
        "--service-account",
        "loader",
        "--ttl",
        "10m",
        "-o",
        job.to_str().unwrap(),
        "--",
        "http",
        "-n",
        "100",
        "http://127.0.0.1:3000/",
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let yaml = std::fs::read_to_string(&job).unwrap();
    for wanted in [
        "  backoffLimitPerIndex: 2\n",
        "  ttlSecondsAfterFinished: 600\n",
        "      - action: FailJob\n        onExitCodes:\n          containerName: bolide\n          operator: In\n          values: [2]\n",
        "      automountServiceAccountToken: false\n",
        "      serviceAccountName: \"loader\"\n",
        "      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n",
        "          imagePullPolicy: \"Never\"\n",
        "            - name: scratch\n              mountPath: \"/tmp\"\n",
        "        - name: scratch\n          emptyDir: {}\n",
    ] {
        assert!(yaml.contains(wanted), "{wanted:?} missing in\n{yaml}");
    }
    assert!(!yaml.contains("backoffLimit:"), "no Job-wide limit: one lost pod must not stop the others\n{yaml}");
    validate(&job);
    // Without the new flags: Kubernetes' own defaults, no host network.
    let o = bolide(&["k8s", "--segments", "2", "--", "http", "-n", "10", "http://app:3000/"]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert!(!o.out.contains("imagePullPolicy") && !o.out.contains("hostNetwork"), "{}", o.out);
    assert!(
        o.out.contains("  backoffLimitPerIndex: 0\n  ") && o.out.contains("ttlSecondsAfterFinished: 86400"),
        "{}",
        o.out
    );
    // Mistakes are named.
    let o = bolide(&["k8s", "--segments", "2", "--image-pull-policy", "never", "--", "http", "http://a/"]);
    assert!(o.code == 2 && o.err.contains("IfNotPresent"), "{}", o.err);
    let o = bolide(&["k8s", "--segments", "2", "--ttl", "soon", "--", "http", "http://a/"]);
    assert!(o.code == 2 && o.err.contains("--ttl \"soon\""), "{}", o.err);
    let o = bolide(&["k8s", "--segments", "2", "--json", "m.json", "--", "http", "http://a/"]);
    assert!(o.code == 2 && o.err.contains("--wait"), "{}", o.err);
}

/// PATH with this build's bolide first, as the image has it.
fn path_with_bolide() -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_bolide")).parent().unwrap().to_path_buf();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

/// Pod `index` of the manifests in `yaml`: their command and args, started as the kubelet starts
/// them (JOB_COMPLETION_INDEX set, its own /tmp).
fn pod(yaml: &str, dir: &std::path::Path, index: u32) -> std::process::Child {
    let (command, args) = command_and_args(yaml);
    let tmp = dir.join(format!("pod-{index}"));
    std::fs::create_dir_all(&tmp).unwrap();
    Command::new(&command[0])
        .args(&command[1..])
        .args(&args)
        .env("PATH", path_with_bolide())
        .env("JOB_COMPLETION_INDEX", index.to_string())
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A pod deleted mid-run gets the kubelet's SIGTERM, sent to the container's first process: the
/// pod's shell. bolide in it must stop as on Ctrl-C and print its partial document, so that the
/// pod's last words say exactly what it did; the merge then names the segment interrupted.
#[test]
fn a_pod_stopped_mid_run_prints_what_it_did_and_the_merge_says_so() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let at = bolide::segment::format_start(bolide::segment::parse_start_at("+1s", SystemTime::now()).unwrap());
    let url = server.base_url() + "/";
    let o =
        bolide(&["k8s", "--segments", "2", "--start-at", &at, "--", "http", "-c", "2", "-t", "1", "-d", "60s", &url]);
    assert_eq!(o.code, 0, "{}", o.err);
    let child = pod(&o.out, dir.path(), 1);
    // Once its load has reached the server (at most 30 s).
    let began = std::time::Instant::now();
    while server.requests() < 50 {
        assert!(began.elapsed() < std::time::Duration::from_secs(30), "the pod's load never came");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(143),
        "the pod fails (its index is not done): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log.matches(bolide::stats::merge::LOG_BEGIN).count(), 1, "{log}");
    let logs = dir.path().join("pods.log");
    std::fs::write(&logs, &log).unwrap();
    let merged = dir.path().join("merged.json");
    let o = bolide(&["merge", logs.to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}\n{}", o.out, o.err);
    assert!(o.err.contains("segment 2/2") && o.err.contains("was interrupted"), "{}", o.err);
    assert!(o.err.contains("segment 1/2 missing"), "{}", o.err);
    let m = ResultDoc::from_json(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    // Every request the pod made is in its last document: answered, or cut off by the stop (at
    // most one per connection), none lost with the pod.
    let s = &m.summary;
    assert_eq!(s.responses + s.errors + s.unfinished, s.sent, "{s:?}");
    assert!(s.unfinished <= 2, "{s:?}");
    let seen = server.requests();
    assert!(s.responses <= seen && seen <= s.sent, "server {seen}, document {s:?}");
    let info = m.merged.unwrap();
    assert!(info.segments[0].interrupted);
}

/// Thresholds broken are a result the merge judges, not a failed pod (which the Job would run
/// again, or count against the Job): the pod succeeds and its document holds the verdict.
#[test]
fn a_pod_whose_thresholds_break_succeeds_with_its_verdict_in_its_document() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/";
    let o = bolide(&[
        "k8s",
        "--segments",
        "1",
        "--start-in",
        "1s",
        "--",
        "http",
        "-c",
        "1",
        "-n",
        "20",
        "--threshold",
        "p99<1us",
        &url,
    ]);
    assert_eq!(o.code, 0, "{}", o.err);
    let out = pod(&o.out, dir.path(), 0).wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    let logs = dir.path().join("pods.log");
    std::fs::write(&logs, &log).unwrap();
    let merged = dir.path().join("merged.json");
    let o = bolide(&["merge", logs.to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert_eq!(o.code, 1, "the merge judges the plan's threshold: {}\n{}", o.out, o.err);
    assert_eq!(server.requests(), 20);
}

/// `bolide k8s --wait` against tests/peers/kubectl_standin.py: kubectl's answers, the pods as
/// processes here (bench/k8s-local.sh runs the same against a real cluster). Started in a process
/// group of its own, as a terminal's foreground job.
fn wait_run(dir: &std::path::Path, extra: &[&str], command: &[&str]) -> std::process::Child {
    let state = dir.join("cluster");
    std::fs::create_dir_all(&state).unwrap();
    let kubectl = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/kubectl_standin.py");
    let mut argv =
        vec!["k8s", "--segments", "3", "--name", "load", "--start-in", "2s", "--wait", "--kubectl", &kubectl];
    let json = dir.join("merged.json");
    let logs = dir.join("pods.log");
    argv.extend(["--json", json.to_str().unwrap(), "--logs", logs.to_str().unwrap()]);
    argv.extend_from_slice(extra);
    argv.push("--");
    argv.extend_from_slice(command);
    use std::os::unix::process::CommandExt;
    Command::new(env!("CARGO_BIN_EXE_bolide"))
        .args(&argv)
        // A process group of its own, as a terminal's foreground job: Ctrl-C goes to the group.
        .process_group(0)
        .env("PATH", path_with_bolide())
        .env("STANDIN_DIR", &state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn wait_runs_the_job_follows_its_pods_and_merges_them() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/";
    let out = wait_run(dir.path(), &[], &["http", "-c", "6", "-t", "1", "-n", "600", &url]).wait_with_output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{o}\n{e}");
    assert!(e.contains("Job load created: 3 pods") && e.contains("Job load: Complete"), "{e}");
    let m = ResultDoc::from_json(&std::fs::read_to_string(dir.path().join("merged.json")).unwrap()).unwrap();
    assert_eq!((m.summary.responses, server.requests()), (600, 600));
    let info = m.merged.unwrap();
    assert_eq!(info.segments.iter().map(|s| s.index).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(info.segments.iter().all(|s| s.source.starts_with("pod/load-")), "{:?}", info.segments);
    // The logs as collected, which `bolide merge` reads again into the same run.
    let logs = std::fs::read_to_string(dir.path().join("pods.log")).unwrap();
    assert_eq!(logs.matches(bolide::stats::merge::LOG_BEGIN).count(), 3);
    assert!(logs.lines().all(|l| l.starts_with("[pod/load-")), "kubectl's --prefix form");
    let again = dir.path().join("again.json");
    let o = bolide(&["merge", dir.path().join("pods.log").to_str().unwrap(), "-o", again.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.err);
    assert_eq!(ResultDoc::from_json(&std::fs::read_to_string(&again).unwrap()).unwrap().summary.responses, 600);
    // The Job was deleted after: the stand-in's record of it is gone.
    assert!(!dir.path().join("cluster/load.job").exists());
    // A Job of that name already there is named, not patched.
    std::fs::write(dir.path().join("cluster/load.job"), "3").unwrap();
    let out = wait_run(dir.path(), &[], &["http", "-n", "10", &url]).wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{e}");
    assert!(e.contains("already exists") && e.contains("`kubectl delete job load`"), "{e}");
    assert_eq!(server.requests(), 600, "nothing ran");
}

#[test]
fn wait_keeps_a_deleted_pods_last_words_and_ctrl_c_merges_what_the_pods_did() {
    let server = Server::start(Config::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url() + "/";
    let child = wait_run(dir.path(), &["--keep"], &["http", "-c", "3", "-t", "1", "-d", "60s", &url]);
    // Once the load runs, pod 1 is deleted as the kubelet does it: SIGTERM to its first process.
    let pod = dir.path().join("cluster/load-1");
    let began = std::time::Instant::now();
    while server.requests() < 100 || !pod.join("pid").exists() {
        assert!(began.elapsed() < std::time::Duration::from_secs(30), "the pods' load never came");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(pod.join("deleted"), "").unwrap();
    let pid: i32 = std::fs::read_to_string(pod.join("pid")).unwrap().trim().parse().unwrap();
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    // Then the run stopped as a user stops it at a terminal (the other pods would run 60 s):
    // SIGINT to bolide's whole process group, kubectl's followers of the logs included had they
    // been in it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(e.contains("stopped (Ctrl-C): deleting the Job"), "{e}");
    assert!(e.contains("segment 2/3 (pod/load-1) was interrupted"), "{e}");
    assert!(e.contains("load-1 (segment 2/3): deleted while "), "{e}");
    assert!(e.contains("Job load kept (--keep)"), "{e}");
    assert_eq!(out.status.code(), Some(130), "stopped by Ctrl-C: {o}\n{e}");
    let m = ResultDoc::from_json(&std::fs::read_to_string(dir.path().join("merged.json")).unwrap()).unwrap();
    let info = m.merged.as_ref().unwrap();
    assert_eq!(info.segments.len(), 3, "every pod's last document, the deleted one's too");
    assert!(info.segments.iter().all(|s| s.interrupted));
    // Nothing lost with the pods: every request the server saw is in the merged run.
    let s = &m.summary;
    let seen = server.requests();
    assert!(s.responses <= seen && seen <= s.sent && s.unfinished <= 3, "server {seen}, document {s:?}");
}

//! `bolide k8s`: one plan as a Kubernetes Indexed Job. Each pod runs segment
//! `JOB_COMPLETION_INDEX + 1` of N (`--segment auto/N`) from one shared start, and prints its
//! result document between marker lines that `bolide merge` finds in `kubectl logs`. A scenario
//! file (and its payload CSV) travel in a ConfigMap mounted at [`MOUNT`].
//!
//! The manifests are text built here (no YAML library: every scalar is written as a JSON string,
//! which YAML reads as a double-quoted scalar). With `--wait`, [`wait`] applies them through
//! kubectl, follows the pods' logs, waits for the Job and merges what the pods printed.

pub mod wait;

use std::fmt::Write as _;
use std::path::Path;

use crate::problem::Problem;
use crate::stats::merge::{LOG_BEGIN, LOG_END};

/// Where the scenario files are mounted in each pod.
pub const MOUNT: &str = "/bolide/scenario";
/// Where a pod writes its result document before printing it (under `$TMPDIR`, else /tmp).
pub const RESULT: &str = "bolide-result.json";
/// A ConfigMap holds at most 1 MiB.
const MAX_CONFIG_BYTES: usize = 1 << 20;

/// What the Job runs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub namespace: Option<String>,
    pub image: String,
    pub segments: u32,
    /// `--start-at` as every pod reads it.
    pub start_at: String,
    /// The bolide command line after `bolide` (`run /bolide/scenario/x.yml ...` or `http ...`),
    /// without `--segment`, `--start-at` and `--json`, which the Job adds.
    pub args: Vec<String>,
    /// Files for the ConfigMap.
    pub files: Files,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    /// The containers' `imagePullPolicy` (Kubernetes' default when None).
    pub pull_policy: Option<String>,
    /// Pods on their node's network.
    pub host_network: bool,
    /// A failed index runs again this many times (`backoffLimitPerIndex`).
    pub retries: u32,
    pub service_account: Option<String>,
    /// `ttlSecondsAfterFinished`.
    pub ttl_s: u64,
}

/// The shell each pod runs: bolide with the arguments given after it, then its result document
/// between the marker lines (when the run wrote one), then its exit code.
/// - The kubelet's SIGTERM (the pod deleted, evicted, the Job stopped) goes to bolide, which stops
///   as on Ctrl-C and still writes its document: the pod's last words are its partial result.
///   (The shell is the container's first process, which the kernel sends no signal it has no
///   handler for.) The trap is set before bolide starts, and one that came before its start
///   stops it at once; `wait` is asked again after each signal (a trapped signal ends it early)
///   until it returns with no signal between: bolide's own exit code (127, "already reaped",
///   never taken for it).
/// - Thresholds broken (exit 1) are a result, not a failed pod: the document holds the verdicts
///   and the merge judges the whole run; the pod succeeds, so the Job does not run it again.
pub fn pod_script() -> String {
    format!(
        "r=\"${{TMPDIR:-/tmp}}/{RESULT}\"; pid=; n=0; trap 'n=$((n+1)); [ -n \"$pid\" ] && kill -TERM $pid 2>/dev/null' TERM INT; \
         bolide \"$@\" --json \"$r\" & pid=$!; [ $n -gt 0 ] && kill -TERM $pid 2>/dev/null; \
         code=127; while :; do m=$n; wait $pid; c=$?; [ $c -ne 127 ] && code=$c; [ $m -eq $n ] && break; done; \
         if [ -f \"$r\" ]; then echo '{LOG_BEGIN}'; cat \"$r\"; echo '{LOG_END}'; [ $code -eq 1 ] && code=0; fi; exit $code"
    )
}

/// A YAML double-quoted scalar: JSON's escapes (YAML reads them alike), and every character YAML
/// does not allow raw (DEL, the C1 controls, U+FFFE/U+FFFF) as a `\u` escape, so that any name or
/// file content makes a manifest that parsers accept.
fn q(s: &str) -> String {
    let json = serde_json::to_string(s).expect("a string serializes");
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c as u32 {
            0x7f..=0x9f | 0xfffe | 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            _ => out.push(c),
        }
    }
    out
}

/// A ConfigMap key for a file name: keys match `[-._a-zA-Z0-9]+`, so any other character becomes
/// `_`, and a name that is all dots gets a prefix. The file keeps its own name in the pod (the
/// volume's `items` map each key back to it).
pub fn config_key(name: &str, taken: &[String]) -> String {
    let mut key: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-._".contains(c) { c } else { '_' }).collect();
    if key.chars().all(|c| c == '.') {
        key = format!("file{key}");
    }
    key.truncate(240);
    let base = key.clone();
    let mut n = 2;
    while taken.contains(&key) {
        key = format!("{n}-{base}");
        n += 1;
    }
    key
}

/// The ConfigMap (when there are files) and the Job, as one YAML stream.
pub fn manifests(spec: &JobSpec) -> String {
    let mut out = String::new();
    let ns = spec.namespace.as_ref().map(|n| format!("\n  namespace: {}", q(n))).unwrap_or_default();
    let labels = format!("\n  labels:\n    app.kubernetes.io/name: bolide\n    bolide/plan: {}", q(&spec.name));
    let config = format!("{}-scenario", spec.name);
    if !spec.files.is_empty() {
        let _ = write!(out, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}{ns}{labels}\ndata:\n", q(&config));
        let mut keys = Vec::new();
        for (name, content) in &spec.files {
            let key = config_key(name, &keys);
            let _ = writeln!(out, "  {}: {}", q(&key), q(content));
            keys.push(key);
        }
        out.push_str("---\n");
    }
    let mut args = spec.args.clone();
    args.extend(["--segment".into(), format!("auto/{}", spec.segments), "--start-at".into(), spec.start_at.clone()]);
    // - backoffLimitPerIndex: a failed pod fails its own index (run again --retries times), not
    //   the Job: with a Job-wide backoffLimit of 0, one pod lost stops every other pod's load.
    // - A usage error (exit 2) would fail every pod alike: the Job fails at once.
    // - No API token in the pods: bolide does not talk to the cluster.
    // - /tmp an emptyDir: the pod writes its document there, whatever the image holds.
    let _ = write!(
        out,
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {}{ns}{labels}\nspec:\n  completionMode: Indexed\n  \
         completions: {n}\n  parallelism: {n}\n  backoffLimitPerIndex: {}\n  podFailurePolicy:\n    rules:\n      \
         - action: FailJob\n        onExitCodes:\n          containerName: bolide\n          operator: In\n          \
         values: [{}]\n  ttlSecondsAfterFinished: {}\n  template:\n    metadata:\n      labels:\n        \
         app.kubernetes.io/name: bolide\n        bolide/plan: {}\n    spec:\n      restartPolicy: Never\n      \
         automountServiceAccountToken: false\n",
        q(&spec.name),
        spec.retries,
        crate::console::exit::USAGE,
        spec.ttl_s,
        q(&spec.name),
        n = spec.segments,
    );
    if let Some(sa) = &spec.service_account {
        let _ = writeln!(out, "      serviceAccountName: {}", q(sa));
    }
    if spec.host_network {
        // The cluster's resolver still, as a pod on the pod network has (not the node's).
        out.push_str("      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n");
    }
    let _ = write!(out, "      containers:\n        - name: bolide\n          image: {}\n", q(&spec.image),);
    if let Some(p) = &spec.pull_policy {
        let _ = writeln!(out, "          imagePullPolicy: {}", q(p));
    }
    let _ =
        write!(out, "          command: [\"/bin/sh\", \"-c\", {}, \"bolide\"]\n          args:\n", q(&pod_script()),);
    for a in &args {
        let _ = writeln!(out, "            - {}", q(a));
    }
    if spec.cpu.is_some() || spec.memory.is_some() {
        out.push_str("          resources:\n            requests:\n");
        for (k, v) in [("cpu", &spec.cpu), ("memory", &spec.memory)] {
            if let Some(v) = v {
                let _ = writeln!(out, "              {k}: {}", q(v));
            }
        }
        out.push_str("            limits:\n");
        for (k, v) in [("cpu", &spec.cpu), ("memory", &spec.memory)] {
            if let Some(v) = v {
                let _ = writeln!(out, "              {k}: {}", q(v));
            }
        }
    }
    out.push_str("          volumeMounts:\n            - name: scratch\n              mountPath: \"/tmp\"\n");
    if !spec.files.is_empty() {
        let _ = writeln!(
            out,
            "            - name: scenario\n              mountPath: {}\n              readOnly: true",
            q(MOUNT)
        );
    }
    out.push_str("      volumes:\n        - name: scratch\n          emptyDir: {}\n");
    if !spec.files.is_empty() {
        let _ = write!(
            out,
            "        - name: scenario\n          configMap:\n            name: {}\n            items:\n",
            q(&config)
        );
        // Each key back to its file's own name, which the scenario refers to.
        let mut keys = Vec::new();
        for (name, _) in &spec.files {
            let key = config_key(name, &keys);
            let _ = writeln!(out, "              - key: {}\n                path: {}", q(&key), q(name));
            keys.push(key);
        }
    }
    out
}

/// Files for a ConfigMap: (key, content).
pub type Files = Vec<(String, String)>;

/// Checks the command line a Job's pods will run and moves a scenario file (and its payload CSV)
/// into the ConfigMap: (args with the file's pod path, files). Every problem at once.
pub fn prepare(args: &[String]) -> Result<(Vec<String>, Files), Vec<String>> {
    use clap::Parser;
    let mut problems = Vec::new();
    let argv = std::iter::once("bolide".to_string()).chain(args.iter().cloned());
    let argv: Vec<String> = argv.collect();
    let parsed = match crate::cli::Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("not a bolide command").to_string();
            return Err(vec![format!("the command after --: {first}")]);
        }
    };
    let common = match &parsed.command {
        crate::cli::Command::Http(a) => &a.common,
        crate::cli::Command::Run(a) => &a.common,
        _ => return Err(vec!["the command after -- must be `http ...` or `run ...` (what each pod runs)".into()]),
    };
    let (segment, server) = (&common.segment, &common.server);
    let crate::cli::OutputArgs { json, html, dashboard, .. } = &common.output;
    if segment.segment.is_some() || segment.start_at.is_some() {
        problems.push(
            "drop --segment and --start-at after --: the Job gives each pod its segment and the shared start".into(),
        );
    }
    if json.is_some() || html.is_some() {
        problems.push(
            "drop --json and --html after --: each pod prints its document into its log; `bolide merge` then \
             `bolide report` make the whole run's"
                .into(),
        );
    }
    if dashboard.is_some() {
        problems.push("drop --dashboard after --: a pod's dashboard is out of reach (watch the merged report)".into());
    }
    if server.spawn.is_some() || !server.monitors.is_empty() {
        problems.push(
            "drop --spawn and --monitor after --: a pod cannot start or watch the server under test; watch it \
             where it runs"
                .into(),
        );
    }
    let mut out = args.to_vec();
    let mut files = Vec::new();
    if let crate::cli::Command::Run(a) = &parsed.command {
        let path = Path::new(&a.scenario);
        if !crate::scenario::builtin::NAMES.contains(&a.scenario.as_str()) {
            match scenario_files(path) {
                Ok(f) => {
                    let pod_path = format!("{MOUNT}/{}", f[0].0);
                    // The scenario argument by its place on the command line, not the first
                    // argument equal to it (`--target users.yml users.yml`): the one whose
                    // replacement changes what clap reads as the scenario.
                    let is_scenario = |i: usize| {
                        let mut trial = argv.clone();
                        trial[i + 1] = pod_path.clone();
                        matches!(crate::cli::Cli::try_parse_from(&trial).map(|c| c.command),
                            Ok(crate::cli::Command::Run(r)) if r.scenario == pod_path)
                    };
                    match (0..out.len()).find(|&i| out[i] == a.scenario && is_scenario(i)) {
                        Some(i) => out[i] = pod_path,
                        None => problems.push(format!("cannot find the scenario {:?} on the command line", a.scenario)),
                    }
                    files = f;
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
    }
    if problems.is_empty() {
        Ok((out, files))
    } else {
        Err(problems)
    }
}

/// A scenario file and the payload CSV beside it: (name in the ConfigMap, content).
fn scenario_files(path: &Path) -> Result<Files, Problem> {
    let shown = path.display();
    let scenario = crate::scenario::yaml::load_file(path).map_err(|e| e.to_string())?;
    let read = |p: &Path| -> Result<String, Problem> {
        let bytes =
            crate::files::read_limited(p, MAX_CONFIG_BYTES as u64).map_err(|e| format!("{}: {e}", p.display()))?;
        String::from_utf8(bytes)
            .map_err(|_| Problem::from(format!("{}: not UTF-8 text, which a ConfigMap's data holds", p.display())))
    };
    let key = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut files = vec![(key(path), read(path)?)];
    if let Some(p) = &scenario.config.payload {
        let rel = Path::new(&p.path);
        if rel.is_absolute() || rel.components().count() != 1 {
            return Err(format!(
                "{shown}: payload {:?} must be a file beside the scenario (a plain name) to travel in the ConfigMap",
                p.path
            )
            .into());
        }
        let full = path.parent().unwrap_or(Path::new(".")).join(rel);
        files.push((p.path.clone(), read(&full)?));
    }
    let total: usize = files.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_CONFIG_BYTES {
        return Err(format!(
            "{shown}: the scenario and its payload weigh {total} bytes, more than a ConfigMap holds (1 MiB); build \
             them into the image or mount a volume"
        )
        .into());
    }
    Ok(files)
}

/// `bolide k8s`: checks everything, then writes the manifests whole; with `--wait`, runs them
/// ([`wait::run`]).
pub fn command(
    a: &crate::cli::K8sArgs,
    command_line: Vec<String>,
    io: &mut crate::console::Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> i32 {
    use std::io::Write;
    let mut problems = Vec::new();
    if a.segments == 0 || a.segments > crate::segment::MAX_SEGMENTS {
        problems.push(format!("--segments must be 1 to {}", crate::segment::MAX_SEGMENTS));
    }
    if let Err(e) = check_name("--name", "a Job name", &a.name) {
        problems.push(e.to_string());
    }
    if let Some(sa) = &a.service_account {
        if let Err(e) = check_name("--service-account", "a service account name", sa) {
            problems.push(e.to_string());
        }
    }
    let now = std::time::SystemTime::now();
    let start = match &a.start_at {
        Some(t) => crate::segment::parse_start_at(t, now),
        None => crate::segment::parse_start_at(&format!("+{}", a.start_in.trim()), now)
            .map_err(|e| Problem::from(e.to_string().replace("--start-at +", "--start-in "))),
    };
    let start = start.map_err(|e| problems.push(e.to_string())).ok();
    let ttl = crate::plan::read_duration("--ttl", &a.ttl).map_err(|e| problems.push(e.to_string())).ok();
    let timeout = crate::plan::read_duration("--timeout", &a.timeout).map_err(|e| problems.push(e.to_string())).ok();
    let prepared = prepare(&a.command).map_err(|e| problems.extend(e)).ok();
    let defaults = wait::Paths::of(a);
    let mut outputs: Vec<&Path> = a.output.iter().map(|p| p.as_path()).collect();
    if a.wait {
        outputs.extend([defaults.json.as_path(), defaults.logs.as_path()]);
    }
    for out in outputs {
        if let Err(e) = crate::files::check_writable(out) {
            problems.push(e.to_string());
        }
    }
    let (Some(start), Some(ttl), Some(timeout), Some((args, files)), true) =
        (start, ttl, timeout, prepared, problems.is_empty())
    else {
        for p in problems {
            let _ = writeln!(io.err, "error: {p}");
        }
        return crate::console::exit::USAGE;
    };
    let spec = JobSpec {
        name: a.name.clone(),
        namespace: a.namespace.clone(),
        image: a.image.clone().unwrap_or_else(|| format!("bolide:{}", env!("CARGO_PKG_VERSION"))),
        segments: a.segments,
        start_at: crate::segment::format_start(start),
        args,
        files,
        cpu: a.cpu.clone(),
        memory: a.memory.clone(),
        pull_policy: a.image_pull_policy.clone(),
        host_network: a.host_network,
        retries: a.retries,
        service_account: a.service_account.clone(),
        ttl_s: ttl.as_secs().max(1),
    };
    let text = manifests(&spec);
    // Without --wait the manifests go to stdout unless -o says otherwise; with it, only to -o.
    let dest = a.output.clone().or_else(|| (!a.wait).then(|| std::path::PathBuf::from("-")));
    if let Some(dest) = &dest {
        let written = if crate::files::is_stdout(dest) {
            io.out.write_all(text.as_bytes()).and_then(|()| io.out.flush())
        } else {
            crate::files::write_atomically(dest, |w| w.write_all(text.as_bytes()))
        };
        if let Err(e) = written {
            let _ = writeln!(io.err, "error: cannot write {}: {e}", dest.display());
            return crate::console::exit::RUN;
        }
    }
    if a.wait {
        return wait::run(&spec, &text, a, defaults, start, timeout, command_line, io, cancel);
    }
    let _ = writeln!(
        io.err,
        "{} pods, one segment each, start their load at {} (kubectl apply -f, then collect: kubectl logs -l \
         job-name={} --tail=-1 --max-log-requests={} > pods.log && bolide merge pods.log -o merged.json; or let \
         bolide do all of it: --wait)",
        spec.segments,
        spec.start_at,
        spec.name,
        spec.segments.max(5)
    );
    crate::console::exit::OK
}

/// Whether `name` (given by `flag`, `what` it names) is a Kubernetes object name (a DNS-1123
/// label, short enough for the pods' names).
pub fn check_name(flag: &str, what: &str, name: &str) -> Result<(), Problem> {
    let ok = !name.is_empty()
        && name.len() <= 52
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{flag} {name:?}: {what} is lowercase letters, digits and '-', at most 52 characters, starting and \
             ending with a letter or digit"
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_strings_and_config_map_keys_take_any_name() {
        // DEL and C1 controls are not allowed raw in YAML: escaped, as JSON's controls are.
        assert_eq!(q("a\u{7f}b\u{85}c\u{9f}\n\u{1}"), "\"a\\u007fb\\u0085c\\u009f\\n\\u0001\"");
        assert_eq!(q("ok é ✓"), "\"ok é ✓\"");
        let none: Vec<String> = Vec::new();
        assert_eq!(config_key("users.yml", &none), "users.yml");
        assert_eq!(config_key("my users (v2).yml", &none), "my_users__v2_.yml");
        assert_eq!(config_key("données.csv", &none), "donn_es.csv");
        assert_eq!(config_key("..", &none), "file..");
        assert_eq!(config_key("a b", &["a_b".to_string()]), "2-a_b");
    }

    #[test]
    fn names() {
        assert!(check_name("--name", "a Job name", "bolide-load-1").is_ok());
        for bad in ["", "Bolide", "-x", "x-", "a_b", &"a".repeat(53)] {
            assert!(check_name("--name", "a Job name", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_after_the_dashes_is_checked() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (args, files) = prepare(&v(&["http", "-c", "30", "http://app:3000/"])).unwrap();
        assert_eq!(args, v(&["http", "-c", "30", "http://app:3000/"]));
        assert!(files.is_empty());
        let e = prepare(&v(&["http", "--json", "x.json", "--segment", "1/2", "--monitor", "a=1", "http://a/"]))
            .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        let e = prepare(&v(&["serve"])).unwrap_err();
        assert!(e[0].contains("`http ...` or `run ...`"), "{e:?}");
        let e = prepare(&v(&["http", "--no-such-flag"])).unwrap_err();
        assert!(e[0].contains("--no-such-flag"), "{e:?}");
        // The scenario is the positional argument, even when an option's value equals it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.yml");
        let text = "config:\n  target: http://a:3000\n  phases:\n    - {duration: 1, arrivalRate: 1}\nscenarios:\n  - flow: [connect]\n";
        std::fs::write(&path, text).unwrap();
        let p = path.to_str().unwrap();
        let (args, files) = prepare(&v(&["run", "--target", p, p])).unwrap();
        assert_eq!(args, v(&["run", "--target", p, "/bolide/scenario/users.yml"]));
        assert_eq!(files[0].0, "users.yml");
        // A built-in scenario needs no ConfigMap.
        let (_, files) = prepare(&v(&["run", "sub-churn", "--target", "http://app:3000"])).unwrap();
        assert!(files.is_empty());
    }
}

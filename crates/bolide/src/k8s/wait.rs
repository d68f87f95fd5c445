//! `bolide k8s --wait`: the Job run to its end through kubectl.
//! - `kubectl create` of the manifests (an existing Job of that name is an error, not patched);
//! - each pod's log followed from its start (`kubectl logs -f`), so that a pod deleted or evicted
//!   mid-run still gives its last words: bolide in it stops on the kubelet's SIGTERM and prints
//!   its partial document, which reaches us before the pod and its log are gone;
//! - the Job's own conditions decide the end (Complete, Failed), as Kubernetes judges them;
//! - Ctrl-C or `--timeout` deletes the Job: its pods stop and print what they did;
//! - the logs are written whole, their documents merged as `bolide merge` does, the Job deleted.
//!
//! Every kubectl call is bounded in time; every loop ends by the Job's end, the timeout or Ctrl-C.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::JobSpec;
use crate::console::{exit, Io};
use crate::redact::printable;
use crate::stats::doc::Doc;
use crate::stats::merge::documents_in_log;

/// Where `--wait` writes the merged document and the collected logs.
pub struct Paths {
    pub json: PathBuf,
    pub logs: PathBuf,
}

impl Paths {
    pub fn of(a: &crate::cli::K8sArgs) -> Paths {
        Paths {
            json: a.json.clone().unwrap_or_else(|| PathBuf::from(format!("{}.json", a.name))),
            logs: a.logs.clone().unwrap_or_else(|| PathBuf::from(format!("{}-pods.log", a.name))),
        }
    }
}

/// The longest one kubectl call (other than a followed log) may take.
const CALL_LIMIT: Duration = Duration::from_secs(60);
/// How long the pods get, once the Job ended or was deleted, to finish printing.
const LAST_WORDS: Duration = Duration::from_secs(60);
/// How often the Job and its pods are looked at.
const POLL: Duration = Duration::from_secs(1);

struct Kubectl {
    exe: PathBuf,
    namespace: Option<String>,
}

impl Kubectl {
    /// kubectl in a process group of its own, so that a Ctrl-C at the terminal (sent to bolide's
    /// group) leaves the followed logs streaming while the pods print their last words; killed
    /// if the thread that started it dies.
    fn command(&self, args: &[&str]) -> Command {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(&self.exe);
        if let Some(ns) = &self.namespace {
            c.args(["--namespace", ns]);
        }
        c.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        c.process_group(0);
        // SAFETY: one prctl in the child before exec, async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                Ok(())
            });
        }
        c
    }

    /// Runs kubectl to its end (at most [`CALL_LIMIT`], its input written within that time):
    /// whether it succeeded, its stdout, its stderr (printable); Err when it could not run.
    fn exec(&self, args: &[&str], input: Option<&str>) -> Result<(bool, String, String), String> {
        let mut c = self.command(args);
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        let shown = format!("kubectl {}", args.join(" "));
        let mut child = c.spawn().map_err(|e| format!("{shown}: cannot start {}: {e}", self.exe.display()))?;
        let pid = child.id();
        let text = input.map(str::to_owned);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if let (Some(text), Some(mut stdin)) = (text, child.stdin.take()) {
                let _ = stdin.write_all(text.as_bytes());
            }
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(CALL_LIMIT) {
            Ok(out) => out.map_err(|e| format!("{shown}: {e}"))?,
            Err(_) => {
                // Not yet reaped (the waiting thread holds it): the pid is still this child's.
                kill(pid);
                return Err(format!("{shown}: no answer in {} s", CALL_LIMIT.as_secs()));
            }
        };
        let err = String::from_utf8_lossy(&out.stderr);
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            format!("{shown}: {}", printable(err.trim())),
        ))
    }

    /// [`exec`](Self::exec): its stdout when it succeeded, else what went wrong.
    fn call(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        match self.exec(args, input)? {
            (true, out, _) => Ok(out),
            (false, _, err) => Err(err),
        }
    }

    fn json(&self, args: &[&str]) -> Result<Value, String> {
        let text = self.call(args, None)?;
        serde_json::from_str(&text).map_err(|e| format!("kubectl {}: not JSON: {e}", args.join(" ")))
    }
}

fn kill(pid: u32) {
    // SAFETY: a signal to a child process of ours, by its id.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

/// One pod, as the Job's pod list shows it.
#[derive(Debug, Clone)]
struct Pod {
    name: String,
    index: Option<u32>,
    created: String,
    phase: String,
    /// The container's end: exit code and reason, when it ended.
    ended: Option<(i64, String)>,
    /// Why its container has not started (ContainerCreating, ImagePullBackOff, ...).
    waiting: Option<String>,
    /// Gone from the Job's pods before it ended (deleted, evicted): its last state as seen.
    gone: bool,
}

fn pods_of(list: &Value) -> Vec<Pod> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|p| {
            let meta = &p["metadata"];
            let index =
                meta["annotations"]["batch.kubernetes.io/job-completion-index"].as_str().and_then(|i| i.parse().ok());
            let state = &p["status"]["containerStatuses"][0]["state"];
            let term = &state["terminated"];
            let waiting = state["waiting"]["reason"].as_str().map(|r| printable(r).into_owned());
            let ended = term["exitCode"].as_i64().map(|c| (c, term["reason"].as_str().unwrap_or_default().to_string()));
            Pod {
                name: meta["name"].as_str().unwrap_or_default().to_string(),
                index,
                created: meta["creationTimestamp"].as_str().unwrap_or_default().to_string(),
                phase: p["status"]["phase"].as_str().unwrap_or("Unknown").to_string(),
                ended,
                waiting,
                gone: false,
            }
        })
        .filter(|p| !p.name.is_empty())
        .collect()
}

/// The Job's end as Kubernetes judged it: `Some((condition, reason: message))` once Complete or
/// Failed.
fn job_end(job: &Value) -> Option<(String, String)> {
    let conditions = job["status"]["conditions"].as_array()?;
    conditions.iter().find_map(|c| {
        let kind = c["type"].as_str()?;
        (matches!(kind, "Complete" | "Failed") && c["status"] == "True").then(|| {
            let why = [c["reason"].as_str(), c["message"].as_str()].into_iter().flatten().collect::<Vec<_>>();
            (kind.to_string(), printable(&why.join(": ")).into_owned())
        })
    })
}

/// A pod's log, followed from its container's start to its end.
struct Follow {
    pod: String,
    text: Mutex<String>,
    done: AtomicBool,
    /// The running `kubectl logs -f`, to be killed when we stop waiting.
    pid: AtomicU32,
    stop: AtomicBool,
    /// The pod is gone from the Job's pods: no use asking again.
    gone: AtomicBool,
}

fn follow(kubectl: Arc<Kubectl>, pod: String) -> Arc<Follow> {
    let f = Arc::new(Follow {
        pod,
        text: Mutex::default(),
        done: AtomicBool::new(false),
        pid: AtomicU32::new(0),
        stop: AtomicBool::new(false),
        gone: AtomicBool::new(false),
    });
    let me = f.clone();
    std::thread::spawn(move || {
        // Until the container has started, `kubectl logs` fails ("waiting to start"): asked again,
        // 1 s and then up to 5 s apart, until it streams, the pod is gone, or we stop.
        let mut pause = POLL;
        while !me.stop.load(Ordering::SeqCst) && !me.gone.load(Ordering::SeqCst) {
            let Ok(mut child) = kubectl.command(&["logs", "-f", "-c", "bolide", &me.pod]).spawn() else { break };
            me.pid.store(child.id(), Ordering::SeqCst);
            // Stopped while it started: the killing pass may have run before the pid was known.
            if me.stop.load(Ordering::SeqCst) {
                let _ = child.kill();
            }
            let mut got = false;
            if let Some(out) = child.stdout.take() {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    got = true;
                    let mut t = me.text.lock().unwrap_or_else(|e| e.into_inner());
                    t.push_str(&line);
                    t.push('\n');
                }
            }
            let ok = child.wait().map(|s| s.success()).unwrap_or(false);
            me.pid.store(0, Ordering::SeqCst);
            // A stream cut before the pod's end (an idle timeout, an apiserver restart) is made
            // whole at the end from a plain `kubectl logs` ([`collect`]).
            if ok || got {
                break;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(POLL * 5);
        }
        me.done.store(true, Ordering::SeqCst);
    });
    f
}

/// Applies the Job and follows it to its end; then merges. See the module's text.
#[allow(clippy::too_many_arguments)]
pub fn run(
    spec: &JobSpec,
    manifests: &str,
    a: &crate::cli::K8sArgs,
    paths: Paths,
    start: SystemTime,
    timeout: Duration,
    command_line: Vec<String>,
    io: &mut Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> i32 {
    let kubectl = Arc::new(Kubectl { exe: a.kubectl.clone(), namespace: spec.namespace.clone() });
    let n = spec.segments;
    let Some(selector) = create(&kubectl, spec, manifests, io) else { return exit::RUN };
    let _ = writeln!(
        io.err,
        "Job {} created: {n} pods, their load from {}; following their logs (Ctrl-C stops them and merges what they did)",
        spec.name, spec.start_at
    );
    let until = start.duration_since(SystemTime::now()).unwrap_or_default() + timeout;
    let Seen { pods, follows, end } = watch(&kubectl, spec, &selector, until, io, cancel);
    let (state, why) = end.unwrap_or_else(|| ("Unknown".into(), "the Job's end was not seen".into()));
    let _ = writeln!(
        io.err,
        "Job {}: {state}{}",
        spec.name,
        if why.is_empty() { String::new() } else { format!(" ({why})") }
    );
    let Collected { order, log, docs, problems } = collect(&kubectl, &pods, &follows);
    if let Err(e) = crate::files::write_atomically(&paths.logs, |w| w.write_all(log.as_bytes())) {
        let _ = writeln!(io.err, "error: cannot write {}: {e}", paths.logs.display());
    }
    for p in &problems {
        let _ = writeln!(io.err, "warning: {p}");
    }
    let as_planned = each_index_once(&order, n, io);
    let cleanup = |io: &mut Io| {
        if a.keep {
            let _ = writeln!(
                io.err,
                "Job {} kept (--keep); Kubernetes deletes it {} s after its end",
                spec.name, spec.ttl_s
            );
        } else if let Err(e) =
            kubectl.call(&["delete", "-f", "-", "--wait=false", "--ignore-not-found"], Some(manifests))
        {
            let _ = writeln!(io.err, "warning: the Job was not deleted: {e}");
        }
    };
    if docs.is_empty() {
        let _ = writeln!(io.err, "error: no pod printed a result document; their logs are in {}", paths.logs.display());
        cleanup(io);
        return exit::RUN;
    }
    let merge = crate::cli::MergeArgs {
        inputs: vec![paths.logs.clone()],
        output: paths.json.clone(),
        quiet: false,
        junit: None,
    };
    let code = crate::results::merge::write_merged(docs, &merge, command_line, io);
    let _ = writeln!(io.out, "Pods' logs: {}", paths.logs.display());
    cleanup(io);
    let whole = state == "Complete" && as_planned && problems.is_empty();
    match code {
        // Stopped by Ctrl-C: 128 + the signal, as for any run stopped (main.rs).
        exit::OK | exit::THRESHOLDS if !whole && !cancel.is_cancelled() => {
            let _ = writeln!(
                io.err,
                "the run is not the whole plan as planned (a segment lost, interrupted or re-run): exit {}",
                exit::RUN
            );
            exit::RUN
        }
        c => c,
    }
}

/// Creates the manifests (`kubectl create`: an object already there is an error, not patched);
/// on a failure, deletes what it did create (a Job must not run unwatched). Then gives the
/// ConfigMap the Job as its owner, so that whatever deletes the Job (its TTL included) deletes
/// it too. The selector of the Job's own pods (its uid: an earlier Job of that name may still
/// have pods terminating), or None after saying why.
fn create(kubectl: &Kubectl, spec: &JobSpec, manifests: &str, io: &mut Io) -> Option<String> {
    let (ok, out, err) = match kubectl.exec(&["create", "-f", "-"], Some(manifests)) {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(io.err, "error: {e}");
            return None;
        }
    };
    if !ok {
        for made in out.lines().filter_map(|l| l.trim().strip_suffix(" created")) {
            if let Err(e) = kubectl.call(&["delete", made, "--wait=false", "--ignore-not-found"], None) {
                let _ = writeln!(io.err, "warning: {e}");
            }
        }
        let hint = if err.contains("AlreadyExists") || err.contains("already exists") {
            format!(
                " (objects of that name are there: `kubectl delete job {0}` and `kubectl delete configmap \
                 {0}-scenario`, or another --name)",
                spec.name
            )
        } else {
            String::new()
        };
        let _ = writeln!(io.err, "error: {err}{hint}");
        return None;
    }
    let uid = kubectl
        .json(&["get", "job", &spec.name, "-o", "json"])
        .ok()
        .and_then(|j| j["metadata"]["uid"].as_str().map(str::to_owned));
    let Some(uid) = uid else {
        let _ = writeln!(io.err, "warning: the Job's uid was not read: its pods are found by its name");
        return Some(format!("job-name={}", spec.name));
    };
    if !spec.files.is_empty() {
        let owner = serde_json::json!({"metadata": {"ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": spec.name, "uid": uid}
        ]}});
        let config = format!("{}-scenario", spec.name);
        if let Err(e) =
            kubectl.call(&["patch", "configmap", &config, "--type", "merge", "-p", &owner.to_string()], None)
        {
            let _ = writeln!(io.err, "warning: the ConfigMap stays after the Job: {e}");
        }
    }
    Some(format!("batch.kubernetes.io/controller-uid={uid}"))
}

/// What [`watch`] saw: the Job's pods (each as last seen), their logs, the Job's end.
struct Seen {
    pods: Vec<Pod>,
    follows: Vec<Arc<Follow>>,
    end: Option<(String, String)>,
}

/// Follows the Job until Kubernetes ends it (or, after Ctrl-C or `until`, until it is deleted and
/// its pods have printed their last words), each new pod's log from its start.
fn watch(
    kubectl: &Arc<Kubectl>,
    spec: &JobSpec,
    selector: &str,
    until: Duration,
    io: &mut Io,
    cancel: &tokio_util::sync::CancellationToken,
) -> Seen {
    let n = spec.segments;
    let began = Instant::now();
    let mut follows: Vec<Arc<Follow>> = Vec::new();
    let mut pods: Vec<Pod> = Vec::new();
    let mut shown = String::new();
    let mut end: Option<(String, String)> = None;
    let mut stopped: Option<(String, Instant)> = None;
    // Since when a pod has been waiting on what it cannot get by itself.
    let mut stuck_since: Option<Instant> = None;
    let mut complaint = String::new();
    loop {
        let stuck = cannot_start(&pods);
        stuck_since = if stuck.is_some() { stuck_since.or(Some(Instant::now())) } else { None };
        let why = if cancel.is_cancelled() {
            Some("stopped (Ctrl-C)".to_string())
        } else if began.elapsed() > until {
            Some("past --timeout".to_string())
        } else {
            stuck.filter(|_| stuck_since.is_some_and(|t| t.elapsed() > STUCK))
        };
        if let (None, Some(why)) = (&stopped, why) {
            let _ = writeln!(io.err, "{why}: deleting the Job; its pods stop and print what they did");
            if let Err(e) = kubectl.call(&["delete", "job", &spec.name, "--wait=false"], None) {
                let _ = writeln!(io.err, "warning: {e}");
            }
            stopped = Some((why, Instant::now()));
        }
        if let Err(e) = look(kubectl, selector, &mut pods, &mut follows) {
            if e != complaint {
                let _ = writeln!(io.err, "warning: {e}");
                complaint = e;
            }
        }
        let line = progress(&pods, n);
        if line != shown {
            let _ = writeln!(io.err, "  {line}");
            shown = line;
        }
        match kubectl.json(&["get", "job", &spec.name, "-o", "json"]) {
            Ok(job) => end = end.or_else(|| job_end(&job)),
            Err(e) if e.contains("NotFound") || e.contains("not found") => {
                end = end.or_else(|| Some(vanished(&pods, n, stopped.as_ref().map(|s| s.0.as_str()))))
            }
            Err(e) if e != complaint => {
                let _ = writeln!(io.err, "warning: {e}");
                complaint = e;
            }
            Err(_) => {}
        }
        let all_done = follows.iter().all(|f| f.done.load(Ordering::SeqCst));
        if end.is_some() && all_done {
            break;
        }
        // Once ended or stopped, the pods get a bounded time for their last words.
        if stopped.as_ref().is_some_and(|(_, at)| at.elapsed() > LAST_WORDS) {
            break;
        }
        if end.is_some() && stopped.is_none() {
            stopped = Some(("ended".into(), Instant::now()));
        }
        std::thread::sleep(POLL);
    }
    // The pods as they are now: which are gone, how the others ended.
    let _ = look(kubectl, selector, &mut pods, &mut follows);
    for f in &follows {
        f.stop.store(true, Ordering::SeqCst);
        let pid = f.pid.load(Ordering::SeqCst);
        if pid != 0 && !f.done.load(Ordering::SeqCst) {
            kill(pid);
        }
    }
    Seen { pods, follows, end }
}

/// The Job's pods now: each new one's log followed, each known one's state updated, those no
/// longer listed marked gone.
fn look(
    kubectl: &Arc<Kubectl>,
    selector: &str,
    pods: &mut Vec<Pod>,
    follows: &mut Vec<Arc<Follow>>,
) -> Result<(), String> {
    let now = pods_of(&kubectl.json(&["get", "pods", "-l", selector, "-o", "json"])?);
    for p in pods.iter_mut() {
        p.gone = !now.iter().any(|q| q.name == p.name);
    }
    for f in follows.iter() {
        if !now.iter().any(|q| q.name == f.pod) {
            f.gone.store(true, Ordering::SeqCst);
        }
    }
    for p in now {
        if !follows.iter().any(|f| f.pod == p.name) {
            follows.push(follow(kubectl.clone(), p.name.clone()));
        }
        match pods.iter_mut().find(|q| q.name == p.name) {
            Some(q) => *q = p,
            None => pods.push(p),
        }
    }
    Ok(())
}

/// Why a pod's container cannot start by itself: an image that cannot be had, a container that
/// cannot be made. A pod waiting on one of these for [`STUCK`] stops the run (not `--timeout`,
/// an hour later).
const CANNOT_START: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];
const STUCK: Duration = Duration::from_secs(60);

/// The first pod waiting on what it cannot get by itself, in words.
fn cannot_start(pods: &[Pod]) -> Option<String> {
    pods.iter().filter(|p| !p.gone).find_map(|p| {
        let why = p.waiting.as_deref().filter(|w| CANNOT_START.contains(w))?;
        Some(format!("pod {} cannot start its container ({why})", p.name))
    })
}

/// The Job gone without our seeing its end: deleted by us (`stopped`), by its TTL after every
/// index succeeded (a short `--ttl` can be quicker than a look), or by someone else.
fn vanished(pods: &[Pod], n: u32, stopped: Option<&str>) -> (String, String) {
    if let Some(why) = stopped {
        return ("Deleted".into(), why.into());
    }
    let done = (0..n).all(|i| pods.iter().any(|p| p.index == Some(i) && p.phase == "Succeeded"));
    if done {
        ("Complete".into(), "every index succeeded; then the Job was deleted, by its TTL or by hand".into())
    } else {
        ("Deleted".into(), "deleted before its end, not by bolide".into())
    }
}

/// The logs and documents of [`collect`].
struct Collected<'a> {
    /// The pods, each index's that succeeded first, then by creation.
    order: Vec<&'a Pod>,
    /// Every line each pod printed, prefixed as `kubectl logs --prefix` does.
    log: String,
    docs: Vec<(String, Doc)>,
    problems: Vec<String>,
}

/// The pods' logs, pod by pod: each index's pods that succeeded first (the merge keeps the first
/// of a segment given twice), then by creation; their documents.
fn collect<'a>(kubectl: &Kubectl, pods: &'a [Pod], follows: &[Arc<Follow>]) -> Collected<'a> {
    let rank = |p: &Pod| (p.index.unwrap_or(u32::MAX), p.phase != "Succeeded", p.created.clone());
    let mut order: Vec<&Pod> = pods.iter().collect();
    order.sort_by_key(|p| rank(p));
    let (mut log, mut docs, mut problems) = (String::new(), Vec::new(), Vec::new());
    for p in &order {
        let Some(f) = follows.iter().find(|f| f.pod == p.name) else { continue };
        let mut text = f.text.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // A followed stream cut before the pod's end: the pod's whole log once more, if it is
        // still there.
        let whole = |t: &str| documents_in_log(t).iter().any(|b| b.is_ok());
        if !whole(&text) && !p.gone {
            if let Ok(again) = kubectl.call(&["logs", "-c", "bolide", &p.name], None) {
                if again.len() > text.len() {
                    text = again;
                }
            }
        }
        for line in text.lines() {
            log.push_str(&format!("[pod/{}/bolide] {line}\n", p.name));
        }
        let blocks = documents_in_log(&text);
        if blocks.is_empty() {
            problems.push(format!("pod {} ({}) printed no document", p.name, describe(p)));
        }
        for (k, b) in blocks.into_iter().enumerate() {
            let source = format!("pod/{}{}", p.name, if k == 0 { String::new() } else { format!("#{}", k + 1) });
            match b.and_then(|t| Doc::from_json(&t)) {
                Ok(d) => docs.push((source, d)),
                Err(e) => problems.push(format!("{source}: {e}")),
            }
        }
    }
    Collected { order, log, docs, problems }
}

/// Says what Kubernetes did with each index (runs, re-runs, failures); true when every index ran
/// once and succeeded.
fn each_index_once(order: &[&Pod], n: u32, io: &mut Io) -> bool {
    let mut once = true;
    for i in 0..n {
        let of: Vec<&&Pod> = order.iter().filter(|p| p.index == Some(i)).collect();
        if of.len() > 1 {
            once = false;
            let runs: Vec<String> = of.iter().map(|p| format!("{} {}", p.name, describe(p))).collect();
            let _ = writeln!(io.err, "segment {}/{n} ran {} times: {}", i + 1, of.len(), runs.join("; "));
        }
    }
    let failed: Vec<String> = order
        .iter()
        .filter(|p| p.phase != "Succeeded")
        .map(|p| {
            format!("{} (segment {}/{n}): {}", p.name, p.index.map_or("?".into(), |i| (i + 1).to_string()), describe(p))
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(io.err, "pods that did not succeed: {}", failed.join("; "));
    }
    once && failed.is_empty()
}

/// A pod's state in words: its phase, and its container's end when it ended.
fn describe(p: &Pod) -> String {
    let phase = if p.gone { format!("deleted while {}", p.phase.to_lowercase()) } else { p.phase.clone() };
    match &p.ended {
        Some((code, reason)) if reason.is_empty() => format!("{phase}, exit {code}"),
        Some((code, reason)) => format!("{phase}, exit {code} ({})", printable(reason)),
        None => phase,
    }
}

/// `3 of 4 pods: 1 pending (ContainerCreating), 2 running` (phases in Kubernetes' order; the
/// pods gone are not counted; `5 pods for 4 segments` once an index ran again).
fn progress(pods: &[Pod], n: u32) -> String {
    let here: Vec<&Pod> = pods.iter().filter(|p| !p.gone).collect();
    let mut parts = Vec::new();
    for phase in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
        let of: Vec<&&Pod> = here.iter().filter(|p| p.phase == phase).collect();
        if of.is_empty() {
            continue;
        }
        let mut why: Vec<&str> = of.iter().filter_map(|p| p.waiting.as_deref()).collect();
        why.sort_unstable();
        why.dedup();
        let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
        parts.push(format!("{} {}{why}", of.len(), phase.to_lowercase()));
    }
    let what = if parts.is_empty() { "none yet".into() } else { parts.join(", ") };
    if here.len() as u64 > n as u64 {
        format!("{} pods for {n} segments: {what}", here.len())
    } else {
        format!("{} of {n} pods: {what}", here.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jobs_end_and_its_pods_are_read_from_kubectls_json() {
        let job: Value = serde_json::from_str(
            r#"{"status":{"conditions":[{"type":"FailureTarget","status":"True"},
               {"type":"Failed","status":"True","reason":"FailedIndexes","message":"Job has failed indexes"}]}}"#,
        )
        .unwrap();
        assert_eq!(job_end(&job), Some(("Failed".into(), "FailedIndexes: Job has failed indexes".into())));
        let running: Value = serde_json::from_str(r#"{"status":{"active":4}}"#).unwrap();
        assert_eq!(job_end(&running), None);
        let list: Value = serde_json::from_str(
            r#"{"items":[{"metadata":{"name":"j-2-abc","creationTimestamp":"2026-11-28T10:00:00Z",
               "annotations":{"batch.kubernetes.io/job-completion-index":"2"}},
               "status":{"phase":"Failed","containerStatuses":[{"state":{"terminated":{"exitCode":143,"reason":"Error"}}}]}},
               {"metadata":{"name":"j-0-def","annotations":{}},"status":{"phase":"Pending"}}]}"#,
        )
        .unwrap();
        let pods = pods_of(&list);
        assert_eq!(pods.len(), 2);
        assert_eq!((pods[0].index, pods[0].ended.clone()), (Some(2), Some((143, "Error".into()))));
        assert_eq!(describe(&pods[0]), "Failed, exit 143 (Error)");
        assert_eq!(pods[1].index, None);
        let gone = Pod { gone: true, ..pods[0].clone() };
        assert_eq!(describe(&gone), "deleted while failed, exit 143 (Error)");
        let waiting: Value = serde_json::from_str(
            r#"{"items":[{"metadata":{"name":"a"},"status":{"phase":"Pending","containerStatuses":[{"state":{"waiting":{"reason":"ImagePullBackOff"}}}]}},
               {"metadata":{"name":"b"},"status":{"phase":"Pending"}},{"metadata":{"name":"c"},"status":{"phase":"Running"}},
               {"metadata":{"name":"d"},"status":{"phase":"Running"}}, {"metadata":{"name":"e"},"status":{"phase":"Running"}}]}"#,
        )
        .unwrap();
        assert_eq!(progress(&pods_of(&waiting), 4), "5 pods for 4 segments: 2 pending (ImagePullBackOff), 3 running");
        assert_eq!(
            cannot_start(&pods_of(&waiting)).as_deref(),
            Some("pod a cannot start its container (ImagePullBackOff)")
        );
        assert_eq!(cannot_start(&pods), None, "ContainerCreating, Running: on their way");
        assert_eq!(vanished(&pods, 4, None).0, "Deleted");
        assert_eq!(progress(&pods, 4), "2 of 4 pods: 1 pending, 1 failed");
    }
}

//! Command-line definitions (clap derive) and nothing else: the doc comments are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bolide",
    version,
    about = "Load tester and benchmark harness for DDP (Meteor) and HTTP servers",
    after_help = "Examples:\n  bolide demo\n  bolide http -c 50 -d 30s http://127.0.0.1:8080/\n  bolide serve --port 3000"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load HTTP/1.1 and HTTP/2 servers: fixed connections or a fixed rate, keep-alive or not.
    Http(Box<HttpArgs>),
    /// Run DDP virtual users: a built-in Meteor workload or an Artillery-shaped scenario file.
    Run(Box<RunArgs>),
    /// Run the reference server (the Meteor tasks app over DDP, and HTTP test endpoints) until Ctrl-C.
    Serve(ServeArgs),
    /// Run a workload several times; tabulate Time, the server's CPU and RAM, errors and p99 per run.
    Bench(BenchArgs),
    /// Compare saved runs (directories or files): "29.21% faster, 49.15% less cpu", with significance.
    Compare(CompareArgs),
    /// Write a report of saved runs: one HTML file with charts (offline, self-contained), or Markdown.
    Report(ReportArgs),
    /// Run a workload at rising arrival levels until the server fails; report the highest passing.
    Capacity(CapacityArgs),
    /// Merge the result documents of one plan's segments (--segment I/N) into the whole run's.
    Merge(MergeArgs),
    /// Turn a browser session (a HAR from Chrome DevTools, Playwright or mitmproxy) into a DDP scenario.
    Record(RecordArgs),
    /// Write the Kubernetes manifests that run one plan as N pods (an Indexed Job), one segment each.
    K8s(K8sArgs),
    /// Start the reference server and run the Meteor benchmark against it: works on a fresh machine.
    Demo(DemoArgs),
    /// bolide-probe, carried in this binary: `bolide probe path` writes it and prints its path.
    Probe(ProbeArgs),
    /// Print a shell completion script: bash, zsh, fish, powershell or elvish.
    Completions(CompletionsArgs),
    /// Print the manual page (roff), or write one page per command into a directory.
    Man(ManArgs),
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    BOLIDE_PROBE=127.0.0.1:9465 NODE_OPTIONS=\"--require $(bolide probe path)\" node main.js\n  \
    bolide run tasks-reactive --target http://127.0.0.1:3000 --probe app=127.0.0.1:9465 -d 60s\n  \
    bolide run tasks-reactive --target http://127.0.0.1:3000 --spawn 'node main.js' \\\n    \
    --ready-url http://127.0.0.1:3000/ --probe app -d 60s     # bolide loads the probe itself")]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub what: ProbeCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ProbeCommand {
    /// Write the probe (once per bolide version, into ~/.cache/bolide) and print its path, for
    /// NODE_OPTIONS="--require PATH" with BOLIDE_PROBE=HOST:PORT (a loopback address).
    Path,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide completions bash > /etc/bash_completion.d/bolide\n  \
    bolide completions zsh > \"${fpath[1]}/_bolide\"\n  \
    bolide completions fish > ~/.config/fish/completions/bolide.fish\n  \
    bolide completions powershell >> $PROFILE")]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide man > bolide.1 && man ./bolide.1\n  \
    bolide man --dir /usr/local/share/man/man1     # bolide.1, bolide-http.1, bolide-run.1, ...")]
pub struct ManArgs {
    /// Write bolide.1 and one page per command (bolide-http.1, ...) into this directory instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide bench run tasks-reactive --arrival-rate 4 -d 60s --spawn 'meteor run --port 3000' \\\n    \
    --ready-url http://127.0.0.1:3000/ --runs 3 --label 3.1.1 --out results/3.1.1\n  \
    bolide bench http -c 100 -n 100000 --monitor app=:3000 --runs 3 --label node --out results/node \\\n    \
    http://127.0.0.1:3000/\n\n\
    Exit codes: 0 done, 1 a threshold (--threshold, ensure) broken in a run, 2 usage error, 3 a run could not\n    complete.")]
pub struct BenchArgs {
    #[command(subcommand)]
    pub workload: BenchWorkload,
}

/// The workload `bench` repeats.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchWorkload {
    /// Repeat an HTTP load (every `bolide http` flag applies).
    Http(Box<BenchHttp>),
    /// Repeat DDP virtual users (every `bolide run` flag applies).
    Run(Box<BenchRun>),
}

impl BenchWorkload {
    pub fn opts(&self) -> &BenchOpts {
        match self {
            BenchWorkload::Http(b) => &b.bench,
            BenchWorkload::Run(b) => &b.bench,
        }
    }
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Every `bolide http` flag applies to each run.\n\n\
    Examples:\n  \
    bolide bench http --runs 5 --label nginx --out results/nginx -c 50 -d 20s http://127.0.0.1:8080/\n  \
    bolide bench http --runs 3 --spawn 'node server.js' --ready-url http://127.0.0.1:3000/ -d 10s http://127.0.0.1:3000/\n\n\
    Exit codes: 0 done, 1 a --threshold broken in any run, 2 usage error, 3 a run could not start, 130/143 stopped \
    by Ctrl-C/SIGTERM (the finished runs are kept).")]
pub struct BenchHttp {
    #[command(flatten)]
    pub bench: BenchOpts,
    #[command(flatten)]
    pub args: HttpArgs,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Every `bolide run` flag applies to each run.\n\n\
    Examples:\n  \
    bolide bench run tasks-reactive --target http://127.0.0.1:3000 --runs 3 --label 3.1.1 --out results/3.1.1\n\n\
    Exit codes: 0 done, 1 a --threshold or ensure broken in any run, 2 usage error, 3 a run could not start, \
    130/143 stopped by Ctrl-C/SIGTERM (the finished runs are kept).")]
pub struct BenchRun {
    #[command(flatten)]
    pub bench: BenchOpts,
    #[command(flatten)]
    pub args: RunArgs,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Repetition")]
pub struct BenchOpts {
    /// How many times to run the workload.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: u32,

    /// The name of this series (a version, a configuration) in tables and comparisons
    /// [default: the start time, e.g. run-20261121-101500].
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,

    /// Directory for the result documents and the summary [default: bolide-results/LABEL]: the
    /// --out DIR of the workload's flags.
    #[arg(skip)]
    pub out: Option<PathBuf>,

    /// The series' CSV (--out csv=PATH): every run's rows, numbered.
    #[arg(skip)]
    pub csv: Option<PathBuf>,

    /// Pause between runs, so the server settles (0 for none).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub cooldown: String,

    /// Run the workload for each value of NAME (hyperfine's -L; repeat for a grid): `{NAME}` in
    /// any argument (--spawn, --spawn-env, --ready-url, the target, the URL) becomes the value,
    /// and scenarios get it as the variable NAME. Runs are interleaved (A B, B A, ...), each
    /// value a series labelled NAME=value under --out, compared with the first at the end.
    #[arg(long = "parameter-list", short = 'L', num_args = 2, value_names = ["NAME", "V1,V2"])]
    pub parameter_list: Vec<String>,

    /// With --parameter-list: the series the others are compared with, NAME=value [default: the
    /// first value].
    #[arg(long, value_name = "NAME=VALUE", help_heading = "Comparison (with --parameter-list)")]
    pub baseline: Option<String>,

    /// With --parameter-list: exit 1 when a metric moved past this bound against the baseline
    /// and the change is significant (as `bolide compare --fail-on`): time>+10%, rps<-5%, p99>+20%.
    /// Repeatable.
    #[arg(long = "fail-on", value_name = "RULE", help_heading = "Comparison (with --parameter-list)")]
    pub fail_on: Vec<String>,

    /// With --fail-on: judge the means alone (as `bolide compare --ignore-significance`).
    #[arg(long, requires = "fail_on", help_heading = "Comparison (with --parameter-list)")]
    pub ignore_significance: bool,

    /// With --fail-on: exit 0 rather than 4 when a rule is inconclusive.
    #[arg(long, requires = "fail_on", help_heading = "Comparison (with --parameter-list)")]
    pub allow_inconclusive: bool,

    /// With --parameter-list: say how many runs a side would detect a change of this size in
    /// each metric, e.g. 5%.
    #[arg(long, value_name = "PCT", help_heading = "Comparison (with --parameter-list)")]
    pub detect: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Each DIR_OR_FILE is one series (a directory written by `bolide bench`, or result files);\n\
    runs are matched by workload, and run i of each series is compared with run i of the baseline.\n\n\
    Examples:\n  \
    bolide compare results/2.16 results/3.1.1\n  \
    bolide compare --format md node.json nginx.json > comparison.md\n  \
    bolide compare base/ pr/ --fail-on 'time>+10%' --fail-on 'cpu>+15%' --fail-on 'p99>+20%'\n\n\
    Exit codes: 0 done (every --fail-on rule passed), 1 a --fail-on rule failed, 2 usage error or nothing \
    comparable, 4 a rule was inconclusive (the runs cannot tell; see --allow-inconclusive).")]
pub struct CompareArgs {
    /// Result directories (from `bolide bench`) or result files.
    #[arg(required = true, value_name = "DIR_OR_FILE")]
    pub inputs: Vec<PathBuf>,

    /// The series the others are compared with (a label, or a directory's or file's name)
    /// [default: the first].
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Term)]
    pub format: Format,

    /// Exit 1 when a metric moved past this bound against the baseline and the change is
    /// significant: time>+10%, cpu>+15%, ram>+10%, p99>+20%, mean>+20%, rps<-5% (HTTP),
    /// error_rate>+50%, and with browser users lcp>+20%, inp>+20%, browser_cpu>+15% (change of
    /// the means, percent); exit 4 when the runs cannot tell (inconclusive: fewer than two clean
    /// runs a side, or a change within the noise). Repeatable.
    #[arg(long = "fail-on", value_name = "RULE")]
    pub fail_on: Vec<String>,

    /// With --fail-on: fail on a change past its bound even when the runs cannot tell it from
    /// noise (single runs, where no test can).
    #[arg(long, requires = "fail_on")]
    pub ignore_significance: bool,

    /// Compare workloads whose settings differ (keep-alive against none, 10 connections against
    /// 100), on purpose: the difference is shown beside the comparison. Without it they are
    /// refused, naming the difference.
    #[arg(long)]
    pub allow_different_workloads: bool,

    /// With --fail-on: exit 0 rather than 4 when a rule is inconclusive (fewer than two clean
    /// runs a side, or a change past its bound within the noise). The verdict still says so.
    #[arg(long, requires = "fail_on")]
    pub allow_inconclusive: bool,

    /// Write the --fail-on verdicts as JUnit XML for CI: a test case per rule and compared
    /// series (failed, or an error when inconclusive), or one saying what could not be compared.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Say how many runs a side would detect a change of this size in each metric (80% power,
    /// p < 0.05), from the runs' own variance: e.g. 5%.
    #[arg(long, value_name = "PCT")]
    pub detect: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide k8s --segments 4 --image registry.example/bolide:0.1.0 -- run tasks-reactive --target \
    http://app.default.svc:3000 --arrival-rate 40 -d 60s > job.yaml\n  \
    kubectl apply -f job.yaml && kubectl wait --for=condition=complete job/bolide --timeout=15m\n  \
    kubectl logs -l job-name=bolide --tail=-1 --max-log-requests=4 > pods.log && bolide merge pods.log -o merged.json\n  \
    bolide k8s --segments 4 --image registry.example/bolide:0.1.0 --wait --json merged.json -- run tasks-reactive \
    --target http://app.default.svc:3000 -d 60s\n\n\
    Exit codes: 0 written (with --wait: the whole plan ran and passed), 1 a threshold broken over the merged run, \
    2 usage error (the command after -- is checked as bolide would run it) or pods' documents that do not \
    merge, 3 kubectl failed, or a segment was lost, interrupted or re-run; 130 stopped by Ctrl-C (what the \
    pods did is merged).")]
pub struct K8sArgs {
    /// How many pods (segments) run the plan together.
    #[arg(long, value_name = "N")]
    pub segments: u32,

    /// The Job's name (and the ConfigMap's prefix).
    #[arg(long, value_name = "NAME", default_value = "bolide")]
    pub name: String,

    /// The container image holding bolide (built from the repository's Dockerfile)
    /// [default: bolide:VERSION].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// The namespace of the Job and ConfigMap [default: kubectl's current].
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// When every pod starts its load, from now: room for the pods to be scheduled and pull the image.
    #[arg(long, value_name = "DURATION", default_value = "2m", conflicts_with = "start_at")]
    pub start_in: String,

    /// When every pod starts its load, as an RFC 3339 time (instead of --start-in).
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,

    /// CPU each pod requests and is limited to (e.g. 1 or 500m): a segment on a crowded node
    /// measures the node.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<String>,

    /// Memory each pod requests and is limited to (e.g. 512Mi).
    #[arg(long, value_name = "BYTES")]
    pub memory: Option<String>,

    /// The pods' image pull policy: Never for an image made on the node itself (imported with
    /// ctr, loaded into kind), IfNotPresent, Always [default: Kubernetes' own].
    #[arg(long, value_name = "POLICY", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub image_pull_policy: Option<String>,

    /// Run the pods on their node's network (hostNetwork): no pod network between the load and the
    /// server, and a server on the node's loopback in reach.
    #[arg(long)]
    pub host_network: bool,

    /// How many times a failed pod's segment runs again (the Job's backoffLimitPerIndex). A re-run
    /// starts after the shared start and the merge says how late; with 0 a lost pod's segment is
    /// reported interrupted or missing, the other pods go on either way.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub retries: u32,

    /// The service account the pods run as [default: the namespace's]; they get no API token.
    #[arg(long, value_name = "NAME")]
    pub service_account: Option<String>,

    /// How long Kubernetes keeps the finished Job, its pods and their logs before deleting them
    /// (the ConfigMap too with --wait, which makes the Job its owner).
    #[arg(long, value_name = "DURATION", default_value = "1d")]
    pub ttl: String,

    /// Apply the manifests (kubectl, with its current context), follow each pod's log, wait for
    /// the Job to end, merge the pods' documents, show the report, then delete the Job. Ctrl-C
    /// stops the pods, which still print their documents, and merges them; so does a pod that
    /// cannot start its container (an image it cannot pull) for a minute.
    #[arg(long)]
    pub wait: bool,

    /// With --wait: where the merged document goes [default: NAME.json].
    #[arg(long, value_name = "PATH", requires = "wait")]
    pub json: Option<PathBuf>,

    /// With --wait: where the pods' logs go, as collected (`bolide merge` reads them again)
    /// [default: NAME-pods.log].
    #[arg(long, value_name = "PATH", requires = "wait")]
    pub logs: Option<PathBuf>,

    /// With --wait: the kubectl to run.
    #[arg(long, value_name = "PATH", default_value = "kubectl", requires = "wait")]
    pub kubectl: PathBuf,

    /// With --wait: leave the Job and its pods in place (--ttl still deletes them).
    #[arg(long, requires = "wait")]
    pub keep: bool,

    /// With --wait: how long after the shared start to wait for the Job at most; then its pods are
    /// stopped and what they printed is merged.
    #[arg(long, value_name = "DURATION", default_value = "1h", requires = "wait")]
    pub timeout: String,

    /// Where the manifests go (`-` for stdout) [default: stdout, none with --wait].
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// What each pod runs: `http ...` or `run ...`, as on the command line (without --segment,
    /// --start-at, --json).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide merge seg-1.json seg-2.json seg-3.json -o merged.json\n  \
    kubectl logs -l job-name=bolide --tail=-1 > pods.log && bolide merge pods.log -o merged.json\n\n\
    Exit codes: 0 merged (warnings, such as a missing segment, are printed and recorded), 1 a threshold of the \
    plan broken over the merged run, 2 usage error or \
    documents that are not segments of one plan.")]
pub struct MergeArgs {
    /// Segments' result documents, or logs holding them between the lines
    /// `=== bolide result begin ===` and `=== bolide result end ===` (Kubernetes pods' logs).
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,

    /// Where the merged document goes (`-` for stdout, with the summary on stderr).
    #[arg(short = 'o', long, visible_alias = "json", value_name = "PATH", required = true)]
    pub output: PathBuf,

    /// Print only warnings and errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Write the merged run's verdicts as JUnit XML for CI: the run itself and each of the plan's
    /// thresholds judged over the whole run.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide record session.har -o s.yml && bolide run s.yml --arrival-rate 5 -d 30s\n  \
    bolide record session.har --connection 2 --think-scale 0.5 -o s.yml\n  \
    bolide record session.har --no-correlate        # every value as recorded, on stdout\n  \
    bolide record --listen 127.0.0.1:3100 --to http://127.0.0.1:3000 -o s.yml --har s.har\n\n\
    Exit codes: 0 written, 2 usage error or a file that is not a HAR with a DDP connection, 3 the scenario \
    could not be written.")]
pub struct RecordArgs {
    /// The HAR file: Chrome DevTools (Network, Export HAR with the page's WebSocket open while
    /// recording), Playwright (recordHar with content "embed") or mitmproxy.
    #[arg(value_name = "FILE.har")]
    pub har: Option<PathBuf>,

    /// Where the scenario goes (`-`, the default, for stdout; what was done goes to stderr then).
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Which DDP connection of the HAR to record (1, the first, by default; the others are
    /// listed), or `all`: each a flow of its own, a user running one of them.
    #[arg(long, value_name = "N|all")]
    pub connection: Option<String>,

    /// Keep every value as recorded: no variable for ids the browser made or results it got back.
    #[arg(long)]
    pub no_correlate: bool,

    /// Leave out the page's plain HTTP requests (by default the document, `/sockjs/info` and API
    /// calls to the app's server are kept as `get`/`post` steps).
    #[arg(long)]
    pub ddp_only: bool,

    /// Keep the page's static assets (scripts, styles, images, fonts) as `get` steps too.
    #[arg(long, conflicts_with = "ddp_only")]
    pub keep_static: bool,

    /// Multiply the recorded pauses by this (0 drops them).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub think_scale: f64,

    /// The longest think kept (longer pauses are cut to it).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub think_max: String,

    /// Record through a proxy instead of a HAR: listen here (127.0.0.1:3100 when no address is
    /// given; port 0 picks a free one), forward to --to, and on Ctrl-C (or after --duration) write
    /// the scenario of what passed.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:3100", conflicts_with = "har")]
    pub listen: Option<String>,

    /// The app's server the proxy forwards to (plain http://).
    #[arg(long, value_name = "URL", requires = "listen")]
    pub to: Option<String>,

    /// With --listen: also write a HAR of what passed (secrets masked), for `bolide record FILE.har` later.
    #[arg(long = "har", value_name = "PATH", requires = "listen")]
    pub har_out: Option<PathBuf>,

    /// With --listen: stop by itself after this long (Ctrl-C stops it before).
    #[arg(short = 'd', long, value_name = "DURATION", requires = "listen")]
    pub duration: Option<String>,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide report run.json                       # writes bolide-report.html\n  \
    bolide report results/3.1.1 results/3.0.0 -o meteor.html\n  \
    bolide report run.json --format md -o -      # Markdown on stdout, for a pull request\n  \
    bolide report results/* --order time         # a history: each measure's trend across labels\n  \
    bolide report run.json --format svg --chart latency-spectrum -o latency.svg")]
pub struct ReportArgs {
    /// Result documents, or directories of them (from `bolide bench`), named and matched as
    /// `compare` does.
    #[arg(required = true, value_name = "DIR_OR_FILE")]
    pub inputs: Vec<PathBuf>,

    /// Where to write (`-`: standard output) [default: bolide-report.html; standard output for
    /// Markdown; a directory, bolide-charts, for SVG].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// html: one self-contained file with interactive charts; md: Markdown for a pull request
    /// (with -o FILE, its charts as SVG files beside it); svg: every chart as an SVG file into
    /// the -o directory, or the one `--chart` names into -o FILE.
    #[arg(long, value_enum, default_value_t = ReportFormat::Html)]
    pub format: ReportFormat,

    /// With --format svg: only this chart (its id, e.g. latency-spectrum; the first with that id).
    #[arg(long, value_name = "ID")]
    pub chart: Option<String>,

    /// The report's title [default: from the inputs].
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// The order of the inputs in tables and in the history (from three inputs on): as given, or
    /// by the start time of each one's first run.
    #[arg(long, value_enum, default_value_t = ReportOrder::Given)]
    pub order: ReportOrder,
}

/// How `report` orders its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportOrder {
    Given,
    Time,
}

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Html,
    Md,
    Svg,
    /// The documents' seconds, one row per second per series (`run` names the file).
    Csv,
}

/// Output formats of `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Term,
    Md,
    Json,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "A level fails when users fail or are cut by the user timeout, the error rate exceeds\n\
    --max-error-rate, a threshold (--threshold, ensure) or --max-p99 is broken, the server stops answering, or\n\
    (HTTP) the server cannot keep up with the rate. A level at which bolide itself was saturated\n\
    stops the ladder without a verdict on the server.\n\n\
    Examples:\n  \
    bolide capacity tasks-reactive --from 180 --step 60 --to 600 --unit per-minute \\\n    \
    --spawn 'meteor run' --ready-url http://127.0.0.1:3000/\n  \
    bolide capacity http --from 1000 --step 1000 --to 10000 -d 10s http://127.0.0.1:8080/\n\n\
    Exit codes: 0 the ladder ran, 1 the server failed even the first level, 2 usage error, 3 the first level\n    could not run at all.")]
pub struct CapacityArgs {
    #[command(subcommand)]
    pub workload: CapacityWorkload,
}

/// The workload `capacity` climbs with.
#[derive(Debug, Clone, Subcommand)]
pub enum CapacityWorkload {
    /// Levels are request rates (--rps) of an HTTP load.
    Http(Box<CapacityHttp>),
    /// Levels are user arrival rates of a scenario (`bolide capacity SCENARIO` means this).
    Run(Box<CapacityRun>),
}

impl CapacityWorkload {
    /// The shared flags of the workload climbed with.
    pub fn common(&self) -> &CommonArgs {
        match self {
            CapacityWorkload::Http(c) => &c.args.common,
            CapacityWorkload::Run(c) => &c.args.common,
        }
    }

    pub fn ladder(&self) -> &LadderOpts {
        match self {
            CapacityWorkload::Http(c) => &c.ladder,
            CapacityWorkload::Run(c) => &c.ladder,
        }
    }

    pub fn ladder_mut(&mut self) -> &mut LadderOpts {
        match self {
            CapacityWorkload::Http(c) => &mut c.ladder,
            CapacityWorkload::Run(c) => &mut c.ladder,
        }
    }
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "The `bolide http` flags apply to every level, except the ones the ladder sets: --rps \
    (each level's rate) and -n/--requests (each level lasts -d) are refused.\n\n\
    Examples:\n  \
    bolide capacity http --from 1000 --step 1000 --to 10000 -c 100 -d 10s --max-p99 50ms http://127.0.0.1:8080/\n\n\
    Exit codes: 0 done, 1 the first level failed, 2 usage error, 3 the run could not start, 130/143 stopped by \
    Ctrl-C/SIGTERM (the finished levels are reported).")]
pub struct CapacityHttp {
    #[command(flatten)]
    pub ladder: LadderOpts,
    #[command(flatten)]
    pub args: HttpArgs,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "The `bolide run` flags apply to every level, except the ones the ladder sets: \
    --arrival-rate (each level's rate) and --users are refused.\n\n\
    Examples:\n  \
    bolide capacity tasks-reactive --target http://127.0.0.1:3000 --from 60 --step 60 --to 600 --unit per-minute -d 60s\n\n\
    Exit codes: 0 done, 1 the first level failed, 2 usage error, 3 the run could not start, 130/143 stopped by \
    Ctrl-C/SIGTERM (the finished levels are reported).")]
pub struct CapacityRun {
    #[command(flatten)]
    pub ladder: LadderOpts,
    #[command(flatten)]
    pub args: RunArgs,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Ladder")]
pub struct LadderOpts {
    /// First level (users or requests per --unit).
    #[arg(long, value_name = "N")]
    pub from: f64,

    /// Added at each level.
    #[arg(long, value_name = "N")]
    pub step: f64,

    /// Last level to try.
    #[arg(long, value_name = "N")]
    pub to: f64,

    /// What a level counts.
    #[arg(long, value_enum, default_value_t = Unit::PerSecond)]
    pub unit: Unit,

    /// A level fails above this share of failed steps or requests, percent.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub max_error_rate: f64,

    /// A level fails when the p99 latency (all steps, or all requests) exceeds this.
    #[arg(long, value_name = "DURATION")]
    pub max_p99: Option<String>,

    /// Pause between levels.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub cooldown: String,

    /// Judge a level on the server even when the machine had no idle CPU (server and bolide on
    /// one busy machine, such as a 2-core CI runner): by default such a level gets no verdict,
    /// since the limit may be the machine. The level is still marked suspect.
    #[arg(long)]
    pub allow_busy_machine: bool,

    /// Keep each level's result document in this directory: the --out DIR of the workload's
    /// flags.
    #[arg(skip)]
    pub out: Option<PathBuf>,

    /// The ladder's CSV (--out csv=PATH): every level's rows.
    #[arg(skip)]
    pub csv: Option<PathBuf>,
}

/// Unit of a capacity level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    PerSecond,
    PerMinute,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Examples:\n  \
    bolide http -c 100 -d 30s http://127.0.0.1:8080/\n  \
    bolide http -n 10000 --no-keepalive http://127.0.0.1:8080/\n  \
    bolide http --rps 2000 -d 1m --json run.json http://127.0.0.1:8080/ http://127.0.0.1:8080/api\n  \
    bolide http -m POST -H 'Content-Type: application/json' -b '{\"a\":1}' http://127.0.0.1:8080/api\n  \
    bolide http --rps 500 -d 30s --threshold 'p99<50ms' --threshold 'error_rate<0.1%' http://127.0.0.1:8080/\n\n\
    Exit codes: 0 done, 1 a --threshold broken, 2 usage or configuration error, 3 the run could not start.")]
pub struct HttpArgs {
    /// URLs to load (http:// or https://); several are spread over the connections round-robin.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,

    /// Concurrent connections.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10)]
    pub connections: usize,

    /// How long to run, e.g. 30s, 2m, 1m30s [default: 10s unless -n is given].
    #[arg(short = 'd', long, value_name = "DURATION", conflicts_with = "requests")]
    pub duration: Option<String>,

    /// Total requests to send, then stop.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Worker threads [default: the number of cores].
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,

    /// Fixed rate in requests per second across all connections (open model); latency is
    /// measured from each request's scheduled time, so server stalls show in the percentiles.
    #[arg(long, value_name = "REQ_PER_S", allow_negative_numbers = true)]
    pub rps: Option<f64>,

    /// HTTP method.
    #[arg(short = 'm', long, value_name = "METHOD", default_value = "GET")]
    pub method: String,

    /// Extra request header, repeatable.
    #[arg(short = 'H', long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,

    /// Also keep this header's value out of the terminal, documents and reports (repeatable);
    /// Authorization, Cookie, API keys and names with auth, token, secret or password in them
    /// are always kept out.
    #[arg(long = "redact", value_name = "NAME")]
    pub redact: Vec<String>,

    /// Request body.
    #[arg(short = 'b', long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long, value_name = "PATH")]
    pub body_file: Option<PathBuf>,

    /// Per-request timeout, e.g. 10s, 500ms.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub timeout: String,

    /// The statuses that count as success, codes and ranges: `200-299,404`. A response of any
    /// other status is a failed request (class `status`): in the errors, the error rate, the
    /// thresholds, the capacity ladder's verdict and every output.
    #[arg(long, value_name = "CODES", default_value = "200-399")]
    pub expect_status: String,

    /// Open a new connection for every request (sends `Connection: close`).
    #[arg(long)]
    pub no_keepalive: bool,

    /// HTTP/2: over TLS (https://) by ALPN `h2`; for http:// URLs, in clear with prior knowledge
    /// (as --h2c).
    #[arg(long)]
    pub http2: bool,

    /// HTTP/2 in clear with prior knowledge (h2c), for http:// URLs.
    #[arg(long)]
    pub h2c: bool,

    /// HTTP/2: requests at once on each connection (h2load's -m; -m here is the method, as in
    /// ab) [default: 1].
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub streams: usize,

    /// Accept any TLS certificate.
    #[arg(long)]
    pub insecure: bool,

    /// When a kept-alive connection turns out closed before any response, send the request
    /// again on a new one (counted as a retry) even for POST, PATCH and other methods that are
    /// not idempotent. Without it, only GET, HEAD, PUT, DELETE, OPTIONS and TRACE are resent;
    /// others count as errors.
    #[arg(long)]
    pub retry_non_idempotent: bool,

    /// Write one line per request in ApacheBench's -g (gnuplot TSV) layout to this file.
    #[arg(long, value_name = "PATH")]
    pub gnuplot: Option<PathBuf>,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// The flags every load command shares (`http`, `run`, and through them `bench` and
/// `capacity`): where the results go, the server under test, this instance's segment and the
/// thresholds. Declared once; `plan::common` reads them once.
#[derive(Debug, Clone, Default, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub server: ServerArgs,

    #[command(flatten)]
    pub segment: SegmentArgs,

    #[command(flatten)]
    pub gate: ThresholdArgs,
}

/// Where a run's results go: the result document, the report, the live page, the terminal, and
/// other tools.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Write the result document (JSON) to this file (`-`: stdout, the summary then on stderr).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Write the HTML report of the run (charts, self-contained, opens offline) to this file.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,

    /// Serve a live dashboard while the load runs: charts redrawn every second, then the final
    /// report. Its URL is printed; `--dashboard=ADDR` (PORT, :PORT or IP:PORT) picks where it
    /// listens [default: 127.0.0.1:5665, loopback]
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true, default_missing_value = "127.0.0.1:5665")]
    pub dashboard: Option<String>,

    /// Print only errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Send or write the run's figures elsewhere too: prometheus-rw=URL (each second by
    /// Prometheus remote write, latency as native histograms; testid from BOLIDE_TESTID),
    /// otlp=URL (the same as OTLP/HTTP metrics, headers from OTEL_EXPORTER_OTLP_HEADERS), csv=PATH (one row per second per series: the load's, the watched processes', the scraped
    /// endpoints'). Repeatable. For bench and capacity, a plain DIR is where the result documents
    /// go (bench: default bolide-results/LABEL).
    #[arg(long = "out", value_name = "KIND=DEST|DIR")]
    pub outs: Vec<String>,
}

/// Pass/fail criteria of a run: a broken one makes the exit code 1.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Thresholds")]
pub struct ThresholdArgs {
    /// Fail (exit code 1) unless this holds, e.g. p99<200ms, p50<=20ms, max<1s, error_rate<1%,
    /// rps>=5000, errors<1, step["call insertTask"].p95<100ms (DDP), cpu.app<80% (mean; cpu.app.max
    /// the peak), rss.app<500MB (peak) of a process watched as app. Repeatable; every threshold,
    /// its value and its verdict are printed and recorded in the result document.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,

    /// Write the verdicts as JUnit XML for CI: a test case for the run itself (completed,
    /// interrupted, suspect, could not start) and one per threshold with its value.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
}

/// Several instances producing one load: each runs its segment of the plan.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Segments (one plan over several instances)")]
pub struct SegmentArgs {
    /// Run only segment I of N of the plan (1-based): its share of the connections, the rate, the
    /// request count or the users. Segments 1..N together are exactly the whole plan; merge
    /// their result documents with `bolide merge`. `auto/N` takes I from Kubernetes'
    /// JOB_COMPLETION_INDEX (pod 0 runs segment 1).
    #[arg(long, value_name = "I/N")]
    pub segment: Option<String>,

    /// Start the load at this wall-clock time, so that every segment's timeline lines up: an RFC
    /// 3339 time (2026-11-23T10:00:00Z) or +DURATION from now (+5s), rounded up to a whole second.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

/// The server under test: which processes to watch, or the command that starts it.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Server under test")]
pub struct ServerArgs {
    /// Sample a server process's CPU and RAM (with its descendants) while the load runs:
    /// NAME=PID, or NAME=:PORT for the process listening on that port. Repeatable.
    #[arg(long = "monitor", value_name = "NAME=PID|NAME=:PORT")]
    pub monitors: Vec<String>,

    /// How often the server (and bolide itself) is sampled.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub monitor_interval: String,

    /// Start the server with this shell command before the load, watch it as "server", and stop
    /// it (with everything it started) at the end. Needs --ready-url.
    #[arg(long, value_name = "COMMAND", requires = "ready_url")]
    pub spawn: Option<String>,

    /// With --spawn: the load starts once a GET of this http:// URL answers 2xx.
    #[arg(long, value_name = "URL", requires = "spawn")]
    pub ready_url: Option<String>,

    /// With --spawn: an environment variable of the started server, NAME=VALUE (Meteor 3.5's
    /// DDP_TRANSPORT=uws, SERVER_WEBSOCKET_COMPRESSION=false). Repeatable.
    #[arg(long = "spawn-env", value_name = "NAME=VALUE", requires = "spawn")]
    pub spawn_env: Vec<String>,

    /// With --spawn: how long to wait for --ready-url.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub ready_timeout: String,

    /// Read a server's Prometheus metrics (the text format at an http:// URL, /metrics when it
    /// names no path) each --monitor-interval while the load runs, and once more at its end:
    /// NAME=URL. Repeatable. Counters' increases, gauges' means and histograms' quantiles over the
    /// run go into the summary and the result document.
    #[arg(long = "scrape", value_name = "NAME=URL")]
    pub scrapes: Vec<String>,

    /// Read bolide-probe (`bolide probe path`, or npm/bolide-probe; loaded into a Node.js or Meteor
    /// server with NODE_OPTIONS=--require PATH and BOLIDE_PROBE=HOST:PORT) at this loopback address;
    /// `--probe NAME` alone, with --spawn: bolide loads it into the spawned server on a free port:
    /// NAME=HOST:PORT. Event-loop delay, GC, memory, and Meteor's sessions, subscriptions, methods
    /// and observers, read as --scrape reads. With --spawn, the command gets BOLIDE_PROBE set.
    #[arg(long = "probe", value_name = "NAME[=HOST:PORT]")]
    pub probes: Vec<String>,

    /// Be the Monti APM engine for the run: a Meteor app whose Monti agent sends to this address
    /// (MONTI_OPTIONS_ENDPOINT=http://ADDR; with --spawn bolide sets it) has its publications',
    /// methods' and system metrics kept beside the load, as the endpoint `monti`. Loopback port
    /// 11011 unless ADDR says otherwise. MONTI_APP_ID and MONTI_APP_SECRET in bolide's environment,
    /// when set, are the only app let in.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "", require_equals = false)]
    pub monti: Option<String>,

    /// Keep only the scraped series whose metric name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub scrape_match: Option<String>,

    /// The most series kept per scraped endpoint (the others are counted, not kept).
    #[arg(long, value_name = "N", default_value_t = crate::monitor::scrape::DEFAULT_LIMIT)]
    pub scrape_limit: usize,
}

#[derive(Debug, Clone, Args)]
#[command(after_help = "Built-in scenarios:\n  \
    tasks-reactive     the Meteor benchmark's reactive user (subscribe, add and remove 20 tasks)\n  \
    tasks-nonreactive  the same actions, the list fetched by a method after each one\n  \
    ddp-calls          N users (--users, 10) each calling --method again as soon as it answered\n  \
    ddp-connect        bursts of N sessions (--burst, 10) opened at once, closed, again\n  \
    sub-churn          connect, subscribe, disconnect, again and again (MeteorDown's pattern)\n  \
    cluster-churn      the Cluster test: 50 users (--users) looping connect, subscribe to the\n                     \
    ~200 kB payload publication, wait for ready, disconnect\n\n\
    Examples:\n  \
    bolide run tasks-reactive --target http://127.0.0.1:3000 --arrival-rate 4 --duration 60s\n  \
    bolide run examples/tasks-reactive.yml --json run.json\n\n\
    Exit codes: 0 done, 1 a threshold (ensure, --threshold) broken or the audit failed, 2 usage or scenario\n    error, 3 the run could not start, 4 the audit incomplete.")]
pub struct RunArgs {
    /// A built-in scenario name, or a scenario file (YAML).
    #[arg(value_name = "SCENARIO")]
    pub scenario: String,

    /// The app's URL (http:// or https://); replaces the scenario's config.target. Repeat it for
    /// several servers: users are spread over them round-robin, or by weight with URL=W
    #[arg(long, value_name = "URL[=W]")]
    pub target: Vec<String>,

    /// Users arriving per second. Built-ins: the rate; scenario files: every arrival-rate phase
    /// arrives at this rate (rampTo dropped).
    #[arg(long, value_name = "PER_S")]
    pub arrival_rate: Option<f64>,

    /// The closed model: N users each walk the flow again and again for the duration (the
    /// phases replaced by one of N looping users); each iteration counts as a user. `run`
    /// takes levels, 1,10,50: one run per level, one after another, and a table of them.
    #[arg(long, value_name = "N[,N...]", conflicts_with = "arrival_rate", value_delimiter = ',')]
    pub users: Vec<u64>,

    /// How long users keep arriving (or looping, with --users). Scenario files: the phases are
    /// cut at this time.
    #[arg(short = 'd', long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Built-ins: pause before each action (default 500ms, the browser benchmark's slow motion).
    #[arg(long, value_name = "DURATION")]
    pub think: Option<String>,

    /// Built-ins: tasks each user adds and removes (default 20).
    #[arg(long, value_name = "N")]
    pub tasks: Option<u64>,

    /// sub-churn and cluster-churn: the publication to subscribe to (theirs are fetchTasks and
    /// payload, which the reference server publishes; name one your app publishes).
    #[arg(long, value_name = "NAME")]
    pub publication: Option<String>,

    /// ddp-calls: the method each user calls again and again [default: bench.echo].
    #[arg(long, value_name = "NAME")]
    pub method: Option<String>,

    /// ddp-calls: the method's parameters, a JSON array [default: ["hello"]].
    #[arg(long, value_name = "JSON")]
    pub params: Option<String>,

    /// ddp-connect: sessions opened at once per burst (10); levels 1,10,100 run one after another,
    /// with a table of them.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',')]
    pub burst: Vec<u64>,

    /// ddp-connect: log in after each connect, NAME:PASSWORD (a user the server has).
    #[arg(long, value_name = "NAME:PASSWORD")]
    pub login: Option<String>,

    /// With --publication: its arguments, a JSON array (e.g. '["room-1", 50]').
    #[arg(long, value_name = "JSON", requires = "publication")]
    pub publication_args: Option<String>,

    /// How DDP reaches the server (replaces config.ddp.transport).
    #[arg(long, value_enum)]
    pub transport: Option<TransportArg>,

    /// Do not offer WebSocket compression.
    #[arg(long)]
    pub no_compression: bool,

    /// The service levels of LLM request goodput, for every chat step (replaces
    /// config.llm.goodput): a request that meets them all counts in llm.good_requests
    /// (ttft, tpot, itl: its slowest gap, e2el; e.g. ttft:500ms,tpot:50ms).
    #[arg(long, value_name = "LEVELS")]
    pub goodput: Option<String>,

    /// Variables the command gives the scenario (`bench --parameter-list`), each a single value.
    #[arg(skip)]
    pub variables: Vec<(String, String)>,

    /// Worker threads [default: the number of cores].
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,

    /// Accept any TLS certificate.
    #[arg(long)]
    pub insecure: bool,

    /// Check that each user's local cache matches the server's truth: a checkpoint before every
    /// disconnect (and at the end) of a flow that subscribes. Exit 1 on a difference, 4 when a
    /// check could not be made (docs/audit.md).
    #[arg(long)]
    pub audit: bool,

    /// Read the audit's truth from this URL, straight from a server, around the balancer or
    /// proxy the users go through (a loss there is then seen). One for every target, or one per
    /// --target in their order; config.audit.truth in a file. Repeatable
    #[arg(long = "audit-truth", value_name = "URL")]
    pub audit_truth: Vec<String>,

    /// A fault seeded into the run, at a time from its start: kill@T or restart@T (the --spawn'ed
    /// server, SIGKILL; restart starts it again), stall@T:DURATION (SIGSTOP, then SIGCONT),
    /// drop@T:PERCENT% (bolide closes that share of its users' connections). Users reconnect as
    /// Meteor's client does. Repeatable
    #[arg(long, value_name = "FAULT")]
    pub fault: Vec<String>,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportArg {
    Websocket,
    Sockjs,
    /// SockJS's HTTP fallback: a POST per frame received
    XhrPolling,
    /// SockJS's HTTP fallback: frames streamed in long POST answers
    XhrStreaming,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one).
    #[arg(long, value_name = "PORT", default_value_t = 3000)]
    pub port: u16,

    /// Address to listen on; loopback unless you say otherwise.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: String,

    /// How writes reach subscribers: push (like the oplog driver) or poll (Meteor's polling
    /// driver: re-run and diff, 50 ms after writes, every 10 s otherwise).
    #[arg(long, value_enum, default_value_t = ReactivityArg::Push)]
    pub reactivity: ReactivityArg,

    /// WebSocket permessage-deflate (Meteor 3.1.1's defaults: fastest level, no context takeover).
    #[arg(long, value_enum, default_value_t = Toggle::On)]
    pub compression: Toggle,

    /// Messages shorter than this are sent uncompressed.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub compression_threshold: usize,

    /// Most DDP sessions at once; more are refused with 503.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_sessions: usize,

    /// Largest incoming DDP message.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_message_bytes: usize,

    /// Most connections open at once (HTTP and DDP); more are answered 503 and closed
    /// [default: the open-file limit, raised to its hard limit, less 64].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// A connection that has not sent a complete request head this long after opening (or
    /// after its last answer) is closed: idle keep-alive connections and slowloris clients.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub request_timeout: String,

    /// A DDP connection that has not sent `connect` this long after the upgrade is closed.
    #[arg(long, value_name = "DURATION", default_value = "45s")]
    pub handshake_timeout: String,

    /// Most live subscriptions of one DDP session; more get `nosub` with error 429.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_subs_per_session: usize,

    /// Most documents one session's merge box holds (each counted once per subscription that
    /// publishes it); a session past it is closed.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_session_documents: usize,

    /// Most bytes waiting to be written to one DDP client; a client that reads too slowly to
    /// stay under it is cut off instead of buffered without bound.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_pending_bytes: usize,

    /// The `payload` publication's initial data in bytes (document bodies), sent on every
    /// subscription: MeteorHacks' Cluster test used about 200 kB
    #[arg(long, value_name = "BYTES", default_value_t = 200_000)]
    pub payload_bytes: usize,

    /// Documents the `payload` publication spreads its bytes over
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub payload_docs: usize,

    /// Balance like MeteorHacks' Cluster: of the DDP connections arriving here, keep one in
    /// (peers + 1) and forward the others to these peers (http://HOST:PORT) in turn, before the
    /// WebSocket upgrade. A connection a peer forwarded is served where it lands
    #[arg(long, value_name = "PEER_URL", num_args = 1..)]
    pub balance: Vec<String>,

    /// Also serve `/echo`: a WebSocket that sends every message back, through the same framing,
    /// compression, ping and close handling as the DDP routes (for conformance suites such as
    /// Autobahn's).
    #[arg(long)]
    pub ws_echo: bool,

    /// Reproduce a server bug, for showing that the audit catches it (off by default): the second
    /// of two changes to a document never sent (lost-changed), a `removed` never sent
    /// (lost-removed), `ready` before the initial documents (ready-early), `ready` twice
    /// (ready-twice), a resumed session sent old values (stale-after-reconnect), a removed document
    /// sent again (limit-reappear), a document of no publication of the user's (leak), `added`
    /// twice (dup-added). Never measure a server started with it
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(refserver::Bug::ALL.map(refserver::Bug::name)))]
    pub inject_bug: Option<String>,

    /// Runtime threads [default: the number of cores].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// A user that exists from the start, for DDP `login` (repeatable).
    #[arg(long = "user", value_name = "NAME:PASSWORD")]
    pub users: Vec<String>,
}

/// `--reactivity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReactivityArg {
    Push,
    Poll,
}

/// An on/off switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Toggle {
    On,
    Off,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Which demo: the Meteor benchmark (tasks-reactive and tasks-nonreactive), or MeteorHacks'
    /// Cluster test (five server shapes, about two minutes)
    #[arg(value_enum, default_value_t = DemoWhich::Meteor)]
    pub which: DemoWhich,

    /// A 20-second version (fewer users, shorter pauses).
    #[arg(long)]
    pub quick: bool,

    /// Where the result documents go [default: bolide-demo/<start time>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where the HTML report goes [default: report.html in the results directory].
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

/// `bolide demo WHICH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoWhich {
    Meteor,
    Cluster,
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}

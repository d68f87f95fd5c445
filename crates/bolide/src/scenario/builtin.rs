//! The built-in scenarios: the Meteor benchmark's reactive and non-reactive users
//! (meteor/performance `tests/test-helpers.js`, see ddp-brief section 4.2) and MeteorDown's
//! subscription churn, open (`sub-churn`) and closed as in the Cluster test (`cluster-churn`). Each also ships as a YAML file under `examples/` that loads to the same
//! scenario (a test checks that).

use std::time::Duration;

use serde_json::{json, Value};

use super::*;

/// Names of the built-ins, for help and errors.
pub const NAMES: [&str; 4] = ["tasks-reactive", "tasks-nonreactive", "sub-churn", "cluster-churn"];

/// The built-ins made from flags alone (the method or the burst size), with no YAML twin: the
/// Meteor team's transport benchmarks' loads.
pub const PROTOCOL: [&str; 2] = ["ddp-calls", "ddp-connect"];

/// Whether `name` is a built-in of either kind.
pub fn is_builtin(name: &str) -> bool {
    NAMES.contains(&name) || PROTOCOL.contains(&name)
}

/// Looping users of `ddp-calls` when `--users` is not given.
pub const CALL_USERS: u64 = 10;

/// Sessions per burst of `ddp-connect` when `--burst` is not given.
pub const BURST: u64 = 10;

/// The open built-ins' load when neither `--users` nor `--arrival-rate` is given.
const OPEN: PhaseKind = PhaseKind::Rate { per_s: ARRIVAL_RATE, ramp_to: None };

/// Looping users of `cluster-churn` when neither `--users` nor `--arrival-rate` is given.
pub const CLUSTER_USERS: u64 = 50;

/// What the command line may change in a built-in.
#[derive(Debug, Clone)]
pub struct Knobs {
    pub target: String,
    /// Users arriving per second (None: the built-in's own load, 4 per second for the open ones).
    pub arrival_rate: Option<f64>,
    /// The closed model: this many users looping the flow for the duration, instead of arrivals.
    pub users: Option<u64>,
    pub duration: Duration,
    /// Pause before each action (the browser benchmark's 500 ms slow motion).
    pub think: Duration,
    /// Tasks each user adds and removes (the benchmark's TASK_COUNT).
    pub tasks: u64,
    /// Connect-subscribe-disconnect rounds per user (sub-churn).
    pub rounds: u64,
    /// The publication the churn built-ins subscribe to, and its arguments (None: their own,
    /// `fetchTasks` and `payload`, which the reference server publishes).
    pub publication: Option<(String, Vec<Value>)>,
    /// `ddp-calls`: the method and its parameters.
    pub method: Option<(String, Vec<Value>)>,
    /// `ddp-connect`: sessions opened at once per burst.
    pub burst: Option<u64>,
    /// `ddp-connect`: a login after each connect (user, password).
    pub login: Option<(String, String)>,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            target: "http://localhost:3000".into(),
            arrival_rate: None,
            users: None,
            duration: Duration::from_secs(60),
            think: Duration::from_millis(500),
            tasks: 20,
            rounds: 10,
            publication: None,
            method: None,
            burst: None,
            login: None,
        }
    }
}

fn step(kind: StepKind) -> Step {
    Step { name: default_step_name(&kind), kind }
}

fn call(method: &str, params: Vec<Value>) -> Call {
    Call { method: method.into(), params, capture: None, expect: None, timeout: None, no_retry: false }
}

fn think(knobs: &Knobs) -> Option<Step> {
    (!knobs.think.is_zero()).then(|| step(StepKind::Think(Think::Fixed(knobs.think))))
}

fn subscribe(name: &str) -> Step {
    step(StepKind::Subscribe { name: name.into(), params: vec![], capture: None, timeout: None })
}

/// The churn built-ins' subscription: `--publication` when given, else `default`.
fn churn_subscription(knobs: &Knobs, default: &str) -> Step {
    match &knobs.publication {
        Some((name, params)) => {
            step(StepKind::Subscribe { name: name.clone(), params: params.clone(), capture: None, timeout: None })
        }
        None => subscribe(default),
    }
}

/// The built-ins whose subscription `--publication` replaces.
pub const CHURN: [&str; 2] = ["sub-churn", "cluster-churn"];

/// Users arriving per second in the open built-ins when `--arrival-rate` is not given.
pub const ARRIVAL_RATE: f64 = 4.0;

/// The phase's kind: looping users when asked for, else arrivals at the given rate, else
/// `default`.
fn load(knobs: &Knobs, default: PhaseKind) -> PhaseKind {
    match (knobs.users, knobs.arrival_rate) {
        (Some(n), _) => PhaseKind::Users(n),
        (None, Some(per_s)) => PhaseKind::Rate { per_s, ramp_to: None },
        (None, None) => default,
    }
}

fn config(knobs: &Knobs, name: &str, default: PhaseKind) -> Config {
    Config {
        targets: vec![TargetSpec { url: knobs.target.clone(), weight: 1 }],
        phases: vec![Phase {
            name: Some(name.into()),
            duration: knobs.duration,
            kind: load(knobs, default),
            burstiness: None,
        }],
        max_vusers: None,
        variables: vec![],
        payload: None,
        ensure: Vec::new(),
        ddp: DdpSettings::default(),
        step_timeout: super::DEFAULT_STEP_TIMEOUT,
        user_timeout: super::DEFAULT_USER_TIMEOUT,
        browser: Default::default(),
        socketio: Default::default(),
        graphql: Default::default(),
        audit_truth: Vec::new(),
    }
}

fn own_task(description: &str) -> Vec<(String, Value)> {
    vec![("description".into(), json!(description)), ("sessionId".into(), json!("{{ $vuId }}"))]
}

/// A browser opening the tasks page: autoupdate subscription, then the reactive list.
fn page_load() -> Vec<Step> {
    vec![step(StepKind::Connect), subscribe("meteor_autoupdate_clientVersions"), subscribe("fetchTasks")]
}

/// Steps with a think before each action.
fn acting(knobs: &Knobs, actions: Vec<Step>) -> Vec<Step> {
    let mut out = Vec::new();
    for a in actions {
        out.extend(think(knobs));
        out.push(a);
    }
    out
}

/// `tasks-reactive`: remove own tasks, add `tasks` one by one (each seen through the subscription),
/// remove each (each seen gone), remove all. 42 method calls with the default 20 tasks.
pub fn tasks_reactive(knobs: &Knobs) -> Scenario {
    let session = json!({"sessionId": "{{ $vuId }}"});
    let insert = Call {
        capture: Some(Capture { var: "taskIds".into(), path: None, append: true }),
        ..call("insertTask", vec![json!({"description": "New Task {{ $loopCount }}", "sessionId": "{{ $vuId }}"})])
    };
    let mut steps = page_load();
    steps.extend(acting(knobs, vec![step(StepKind::Call(call("removeAllTasks", vec![session.clone()])))]));
    let mut add = acting(knobs, vec![step(StepKind::Call(insert))]);
    add.push(step(StepKind::WaitFor(WaitFor {
        collection: "taskCollection".into(),
        fields: own_task("New Task {{ $loopCount }}"),
        until: Until::Matches,
        timeout: None,
    })));
    steps.push(step(StepKind::Loop(Loop { over: LoopOver::Count(knobs.tasks), steps: add })));
    let mut remove =
        acting(knobs, vec![step(StepKind::Call(call("removeTask", vec![json!({"taskId": "{{ $loopElement }}"})])))]);
    remove.push(step(StepKind::WaitFor(WaitFor {
        collection: "taskCollection".into(),
        fields: vec![("_id".into(), json!("{{ $loopElement }}"))],
        until: Until::Disappears,
        timeout: None,
    })));
    steps.push(step(StepKind::Loop(Loop { over: LoopOver::List(json!("{{ taskIds }}")), steps: remove })));
    steps.extend(acting(knobs, vec![step(StepKind::Call(call("removeAllTasks", vec![session])))]));
    steps.push(step(StepKind::Disconnect));
    Scenario {
        config: config(knobs, "tasks-reactive", OPEN),
        flows: vec![Flow { name: "tasks-reactive".into(), weight: 1, steps, engine: Engine::Ddp }],
    }
}

/// `tasks-nonreactive`: the same actions, but the list comes from the `fetchTasks` method after each
/// one, with no live subscription. 85 method calls with the default 20 tasks.
pub fn tasks_nonreactive(knobs: &Knobs) -> Scenario {
    let session = json!({"sessionId": "{{ $vuId }}"});
    let fetch = |expect: Option<Expect>| step(StepKind::Call(Call { expect, ..call("fetchTasks", vec![]) }));
    let has = |description: &str, contains: bool| Some(Expect { contains, fields: own_task(description) });
    let by_id = |contains: bool| Some(Expect { contains, fields: vec![("_id".into(), json!("{{ $loopElement }}"))] });
    let mut steps = page_load();
    // Switching to "No Reactive" unmounts the reactive list and fetches once.
    steps.push(step(StepKind::Unsubscribe { name: "fetchTasks".into() }));
    steps.push(fetch(None));
    steps.extend(think(knobs));
    steps.push(step(StepKind::Call(call("removeAllTasks", vec![session.clone()]))));
    steps.push(fetch(None));
    let insert = Call {
        capture: Some(Capture { var: "taskIds".into(), path: None, append: true }),
        ..call("insertTask", vec![json!({"description": "New Task {{ $loopCount }}", "sessionId": "{{ $vuId }}"})])
    };
    let mut add = acting(knobs, vec![step(StepKind::Call(insert))]);
    add.push(fetch(has("New Task {{ $loopCount }}", true)));
    steps.push(step(StepKind::Loop(Loop { over: LoopOver::Count(knobs.tasks), steps: add })));
    let mut remove =
        acting(knobs, vec![step(StepKind::Call(call("removeTask", vec![json!({"taskId": "{{ $loopElement }}"})])))]);
    remove.push(fetch(by_id(false)));
    steps.push(step(StepKind::Loop(Loop { over: LoopOver::List(json!("{{ taskIds }}")), steps: remove })));
    steps.extend(think(knobs));
    steps.push(step(StepKind::Call(call("removeAllTasks", vec![session]))));
    steps.push(fetch(None));
    steps.push(step(StepKind::Disconnect));
    let mut config = config(knobs, "tasks-nonreactive", OPEN);
    config.ddp.cache = false;
    Scenario { config, flows: vec![Flow { name: "tasks-nonreactive".into(), weight: 1, steps, engine: Engine::Ddp }] }
}

/// `sub-churn`: MeteorDown's Cluster test pattern: connect, subscribe, wait for ready,
/// disconnect, `rounds` times per user.
pub fn sub_churn(knobs: &Knobs) -> Scenario {
    let round = vec![step(StepKind::Connect), churn_subscription(knobs, "fetchTasks"), step(StepKind::Disconnect)];
    let steps = vec![step(StepKind::Loop(Loop { over: LoopOver::Count(knobs.rounds), steps: round }))];
    let mut config = config(knobs, "sub-churn", OPEN);
    config.ddp.cache = false;
    Scenario { config, flows: vec![Flow { name: "sub-churn".into(), weight: 1, steps, engine: Engine::Ddp }] }
}

/// `cluster-churn`: the Cluster test's load (MeteorDown's closed loop): each user connects,
/// subscribes to the `payload` publication (about 200 kB of documents on the reference server),
/// waits until it is ready, disconnects, and starts again until the duration ends. The
/// subscribe step's time is the test's response time (subscribe -> ready). Closed with
/// [`CLUSTER_USERS`] users unless the knobs say otherwise (`--arrival-rate` makes it open, one
/// round per arriving user).
pub fn cluster_churn(knobs: &Knobs) -> Scenario {
    let steps = vec![step(StepKind::Connect), churn_subscription(knobs, "payload"), step(StepKind::Disconnect)];
    let mut config = config(knobs, "cluster-churn", PhaseKind::Users(CLUSTER_USERS));
    config.ddp.cache = false;
    Scenario { config, flows: vec![Flow { name: "cluster-churn".into(), weight: 1, steps, engine: Engine::Ddp }] }
}

/// `ddp-calls`: the Meteor team's method benchmark: each of N users (10 by default) connects once
/// and calls the method again as soon as its answer (`result` and `updated`) came back, until the
/// duration ends. Each user's walk is one iteration; its calls are the step `call METHOD`.
pub fn ddp_calls(knobs: &Knobs) -> Scenario {
    let (method, params) = knobs.method.clone().unwrap_or_else(|| ("bench.echo".into(), vec![json!("hello")]));
    let calls = step(StepKind::Loop(Loop {
        over: LoopOver::UntilPhaseEnd,
        steps: vec![step(StepKind::Call(call(&method, params)))],
    }));
    let steps = vec![step(StepKind::Connect), calls, step(StepKind::Disconnect)];
    let mut config = config(knobs, "ddp-calls", PhaseKind::Users(CALL_USERS));
    config.ddp.cache = false;
    config.ddp.fanout_field = None;
    // A user's one walk lasts the whole run.
    config.user_timeout = knobs.duration + config.user_timeout;
    Scenario { config, flows: vec![Flow { name: "ddp-calls".into(), weight: 1, steps, engine: Engine::Ddp }] }
}

/// `ddp-connect`: the Meteor team's connection benchmark: bursts of N sessions (10 by default)
/// opened at once (connect until `connected`, then a login and a subscription when asked for),
/// closed, and the next burst once every session of the last was done, until the duration ends.
pub fn ddp_connect(knobs: &Knobs) -> Scenario {
    let mut steps = vec![step(StepKind::Connect)];
    if let Some((user, password)) = &knobs.login {
        steps.push(step(StepKind::Login(Login {
            user: Some(json!(user)),
            password: Some(json!(password)),
            resume: None,
            timeout: None,
        })));
    }
    if let Some((name, params)) = &knobs.publication {
        steps.push(step(StepKind::Subscribe {
            name: name.clone(),
            params: params.clone(),
            capture: None,
            timeout: None,
        }));
    }
    steps.push(step(StepKind::Disconnect));
    let burst = knobs.burst.unwrap_or(BURST);
    let mut config = config(&Knobs { users: Some(burst), arrival_rate: None, ..knobs.clone() }, "ddp-connect", OPEN);
    config.ddp.cache = false;
    config.ddp.bursts = true;
    Scenario { config, flows: vec![Flow { name: "ddp-connect".into(), weight: 1, steps, engine: Engine::Ddp }] }
}

/// A built-in by name.
pub fn by_name(name: &str, knobs: &Knobs) -> Option<Scenario> {
    match name {
        "ddp-calls" => Some(ddp_calls(knobs)),
        "ddp-connect" => Some(ddp_connect(knobs)),
        "tasks-reactive" => Some(tasks_reactive(knobs)),
        "tasks-nonreactive" => Some(tasks_nonreactive(knobs)),
        "sub-churn" => Some(sub_churn(knobs)),
        "cluster-churn" => Some(cluster_churn(knobs)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Method calls one user makes, by walking the flow.
    fn calls(steps: &[Step], list_len: u64) -> u64 {
        steps
            .iter()
            .map(|s| match &s.kind {
                StepKind::Call(_) => 1,
                StepKind::Loop(l) => {
                    let n = match l.over {
                        LoopOver::Count(n) => n,
                        LoopOver::List(_) => list_len,
                        LoopOver::UntilPhaseEnd => 1,
                    };
                    n * calls(&l.steps, list_len)
                }
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn method_counts_match_the_benchmark() {
        let k = Knobs::default();
        assert_eq!(calls(&tasks_reactive(&k).flows[0].steps, 20), 42);
        assert_eq!(calls(&tasks_nonreactive(&k).flows[0].steps, 20), 85);
        assert_eq!(calls(&sub_churn(&k).flows[0].steps, 20), 0);
        assert_eq!(tasks_reactive(&k).config.phases[0].kind, PhaseKind::Rate { per_s: 4.0, ramp_to: None });
    }

    #[test]
    fn think_zero_leaves_no_pauses() {
        let k = Knobs { think: Duration::ZERO, ..Knobs::default() };
        let s = tasks_reactive(&k);
        assert!(!format!("{s:?}").contains("Think"));
        assert!(format!("{:?}", tasks_reactive(&Knobs::default())).contains("Think"));
    }
}

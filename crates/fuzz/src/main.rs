//! `bolide-fuzz`: coverage-guided fuzzing of bolide's parsers on stable Rust.
//!
//! Built with SanitizerCoverage (`fuzz/run` sets the flags), every edge of the instrumented code
//! bumps a counter (`coverage.c`); an input that reaches a new edge, or an edge a new number of
//! times (in libFuzzer's buckets), joins the corpus and is mutated further. Built without the
//! flags it still runs, mutating the seeds blindly, and says so.
//!
//! A panic, or an input that runs longer than `--timeout`, stops the run: the input is saved under
//! `--artifacts` and the exit code is 1.

mod targets;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use targets::{Target, TARGETS};

extern "C" {
    fn bolide_fuzz_merge(seen: *mut u8) -> u64;
    fn bolide_fuzz_edges() -> u32;
    fn bolide_fuzz_reset();
}

const USAGE: &str = "usage: bolide-fuzz [TARGET|all] [--runs N] [--seconds S] [--seed N] [--timeout S] \
[--artifacts DIR] [--corpus DIR] [--replay FILE] [--list]";

struct Options {
    targets: Vec<&'static Target>,
    runs: u64,
    seconds: Option<f64>,
    seed: u64,
    timeout: Duration,
    artifacts: PathBuf,
    corpus: Option<PathBuf>,
    replay: Option<PathBuf>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        targets: TARGETS.iter().collect(),
        runs: 100_000,
        seconds: None,
        seed: 1,
        timeout: Duration::from_secs(2),
        artifacts: PathBuf::from("fuzz/artifacts"),
        corpus: None,
        replay: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value\n{USAGE}"));
        match a.as_str() {
            "--runs" => o.runs = value("--runs")?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--seconds" => o.seconds = Some(value("--seconds")?.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--seed" => o.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--timeout" => {
                let s: f64 = value("--timeout")?.parse().map_err(|e| format!("--timeout: {e}"))?;
                o.timeout = Duration::try_from_secs_f64(s).map_err(|e| format!("--timeout: {e}"))?;
            }
            "--artifacts" => o.artifacts = PathBuf::from(value("--artifacts")?),
            "--corpus" => o.corpus = Some(PathBuf::from(value("--corpus")?)),
            "--replay" => o.replay = Some(PathBuf::from(value("--replay")?)),
            "--list" => {
                for t in TARGETS {
                    println!("{:<14} {}", t.name, t.about);
                }
                std::process::exit(0);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "all" => o.targets = TARGETS.iter().collect(),
            name if !name.starts_with('-') => {
                let t = TARGETS.iter().find(|t| t.name == name).ok_or_else(|| {
                    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                    format!("no target {name:?}; targets: {}", names.join(", "))
                })?;
                o.targets = vec![t];
            }
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// What the watchdog needs to save an input that hangs.
struct Current {
    input: Mutex<Vec<u8>>,
    started_ns: AtomicU64,
    busy: AtomicBool,
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bolide-fuzz: {e}");
            std::process::exit(2);
        }
    };
    // Panics are findings, reported once with their input; the default hook's text would repeat.
    let last_panic = Arc::new(Mutex::new(String::new()));
    {
        let last_panic = Arc::clone(&last_panic);
        std::panic::set_hook(Box::new(move |info| {
            *last_panic.lock().unwrap_or_else(|p| p.into_inner()) = info.to_string();
        }));
    }
    let instrumented = unsafe { bolide_fuzz_edges() } > 0;
    if !instrumented {
        eprintln!("bolide-fuzz: built without coverage instrumentation: mutating blindly (use fuzz/run)");
    }
    if let Some(path) = &o.replay {
        std::process::exit(replay_one(&o, path, &last_panic));
    }
    let mut failed = false;
    for target in &o.targets {
        match fuzz(target, &o, &last_panic) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
                break;
            }
        }
    }
    std::process::exit(if failed { 1 } else { 0 });
}

fn fuzz(target: &'static Target, o: &Options, last_panic: &Mutex<String>) -> Result<String, String> {
    let mut rng = StdRng::seed_from_u64(o.seed ^ hash(target.name.as_bytes()));
    let mut corpus: Vec<Vec<u8>> = (target.seeds)();
    if let Some(dir) = &o.corpus {
        corpus.extend(read_corpus(&dir.join(target.name)));
    }
    let edges = unsafe { bolide_fuzz_edges() } as usize;
    let mut seen = vec![0u8; edges + 1];
    let mut features = 0u64;
    let current = Arc::new(Current {
        input: Mutex::new(Vec::new()),
        started_ns: AtomicU64::new(0),
        busy: AtomicBool::new(false),
    });
    let epoch = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (current, done, timeout) = (Arc::clone(&current), Arc::clone(&done), o.timeout);
        let dir = o.artifacts.join(target.name);
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                let started = Duration::from_nanos(current.started_ns.load(Ordering::Relaxed));
                if current.busy.load(Ordering::Relaxed) && epoch.elapsed().saturating_sub(started) > timeout {
                    let input = current.input.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let path = save(&dir, "timeout", &input);
                    eprintln!(
                        "{}: an input ran longer than {timeout:?}; saved as {path}\nreplay: {}",
                        target.name,
                        replay(target.name, &path)
                    );
                    std::process::exit(1);
                }
            }
        })
    };

    let started = Instant::now();
    let mut runs = 0u64;
    let mut initial = corpus.clone().into_iter();
    let mut new_corpus = Vec::new();
    let result = loop {
        if runs >= o.runs || o.seconds.is_some_and(|s| started.elapsed().as_secs_f64() >= s) {
            break Ok(());
        }
        let input = match initial.next() {
            Some(seed) => seed,
            None => mutate(&mut rng, &corpus, target),
        };
        *current.input.lock().unwrap_or_else(|p| p.into_inner()) = input.clone();
        current.started_ns.store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        current.busy.store(true, Ordering::Relaxed);
        unsafe { bolide_fuzz_reset() };
        let outcome = std::panic::catch_unwind(|| (target.run)(&input));
        current.busy.store(false, Ordering::Relaxed);
        runs += 1;
        if outcome.is_err() {
            let path = save(&o.artifacts.join(target.name), "crash", &input);
            let why = last_panic.lock().unwrap_or_else(|p| p.into_inner()).clone();
            break Err(format!(
                "{}: panic after {runs} inputs: {why}\ninput saved as {path}\nreplay: {}",
                target.name,
                replay(target.name, &path)
            ));
        }
        if edges > 0 && new_features(&mut seen, &mut features) {
            corpus.push(input.clone());
            new_corpus.push(input);
        }
    };
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    result?;
    if let Some(dir) = &o.corpus {
        for input in &new_corpus {
            save(&dir.join(target.name), "cov", input);
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let covered = seen.iter().filter(|&&b| b != 0).count();
    Ok(format!(
        "{:<14} {runs:>10} inputs in {secs:>7.1} s ({:>7.0}/s), corpus {:>5}, edges {}, no panic, no hang",
        target.name,
        runs as f64 / secs.max(1e-9),
        corpus.len(),
        if edges > 0 { format!("{covered} of {edges} instrumented") } else { "not measured".into() }
    ))
}

/// Folds this input's counters into `seen`; true when it reached something new.
fn new_features(seen: &mut [u8], features: &mut u64) -> bool {
    debug_assert_eq!(seen.len(), unsafe { bolide_fuzz_edges() } as usize + 1);
    let fresh = unsafe { bolide_fuzz_merge(seen.as_mut_ptr()) };
    *features += fresh;
    fresh > 0
}

fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>], target: &Target) -> Vec<u8> {
    let mut data = corpus[rng.random_range(0..corpus.len())].clone();
    for _ in 0..rng.random_range(1..=6) {
        let len = data.len();
        match rng.random_range(0..10) {
            0 if len > 0 => {
                let at = rng.random_range(0..len);
                data[at] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let at = rng.random_range(0..len);
                data[at] = rng.random();
            }
            2 if len > 0 => {
                const INTERESTING: &[u8] = b"\x00\x01\x7e\x7f\x80\xff\r\n\"\\:{}[],-0 \t";
                let at = rng.random_range(0..len);
                data[at] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            3 => {
                let at = rng.random_range(0..=len);
                let n = rng.random_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                data.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let at = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - at).min(64));
                data.drain(at..at + n);
            }
            5 if len > 0 => {
                // Copy a piece of the input somewhere else in it.
                let from = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - from).min(64));
                let piece = data[from..from + n].to_vec();
                let at = rng.random_range(0..=len);
                data.splice(at..at, piece);
            }
            6 if !target.dictionary.is_empty() => {
                let word = target.dictionary[rng.random_range(0..target.dictionary.len())].as_bytes();
                let at = rng.random_range(0..=len);
                if rng.random::<bool>() && at + word.len() <= len {
                    data[at..at + word.len()].copy_from_slice(word);
                } else {
                    data.splice(at..at, word.iter().copied());
                }
            }
            7 if len >= 2 => {
                // A big-endian length field's favourite values, anywhere.
                const SIZES: &[u64] = &[0, 1, 125, 126, 127, 0xffff, 0x1_0000, u32::MAX as u64, u64::MAX];
                let v = SIZES[rng.random_range(0..SIZES.len())].to_be_bytes();
                let width = [2usize, 8][rng.random_range(0..2)].min(len);
                let at = rng.random_range(0..=len - width);
                data[at..at + width].copy_from_slice(&v[8 - width..]);
            }
            8 => {
                // Replace a run of digits with an awkward number.
                const NUMBERS: &[&str] =
                    &["0", "-1", "1e308", "-1e308", "1e20", "18446744073709551616", "0.0000001", "NaN", ".inf"];
                let number = NUMBERS[rng.random_range(0..NUMBERS.len())].as_bytes();
                let start = rng.random_range(0..=len);
                match data[start..].iter().position(u8::is_ascii_digit) {
                    Some(p) => {
                        let from = start + p;
                        let to = from + data[from..].iter().take_while(|b| b.is_ascii_digit()).count();
                        data.splice(from..to, number.iter().copied());
                    }
                    None => data.splice(start..start, number.iter().copied()).for_each(drop),
                }
            }
            _ if corpus.len() > 1 => {
                // Splice: the front of this input, the back of another.
                let other = &corpus[rng.random_range(0..corpus.len())];
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..=other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            _ => {}
        }
    }
    data.truncate(target.max_len);
    data
}

fn hash(bytes: &[u8]) -> u64 {
    // FNV-1a: names artifacts by content, stable across runs.
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn save(dir: &std::path::Path, kind: &str, input: &[u8]) -> String {
    let path = dir.join(format!("{kind}-{:016x}", hash(input)));
    let shown = path.display().to_string();
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, input)) {
        return format!("(not saved: {e}) {shown}");
    }
    shown
}

fn read_corpus(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut names: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return Vec::new(),
    };
    names.sort();
    let mut unique = HashSet::new();
    names.into_iter().filter_map(|p| std::fs::read(p).ok()).filter(|d| unique.insert(d.clone())).collect()
}

fn replay(target: &str, path: &str) -> String {
    format!("fuzz/run {target} --replay {path}")
}

/// Runs one saved input through one target: exit 0 if it passes, 1 if it panics.
fn replay_one(o: &Options, path: &std::path::Path, last_panic: &Mutex<String>) -> i32 {
    let [target] = o.targets[..] else {
        eprintln!("bolide-fuzz: --replay needs one target name");
        return 2;
    };
    let input = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bolide-fuzz: {}: {e}", path.display());
            return 2;
        }
    };
    match std::panic::catch_unwind(|| (target.run)(&input)) {
        Ok(()) => {
            println!("{}: {} passes", target.name, path.display());
            0
        }
        Err(_) => {
            eprintln!("{}: {}: {}", target.name, path.display(), last_panic.lock().unwrap_or_else(|p| p.into_inner()));
            1
        }
    }
}

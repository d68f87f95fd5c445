//! `bench --parameter-list NAME V1,V2` (hyperfine's `-L`): the command line once per value (or
//! combination of values, for several lists), `{NAME}` replaced in every argument, each a series
//! labelled `NAME=value`. The interleaving and the comparison are `bench`'s.

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command};
use crate::problem::Problem;
use crate::results::parameters::raw_pairs;
use crate::workload::Workload;

/// The most series one `--parameter-list` grid may make (the product of its lists' lengths): each
/// series is a directory, a command line parsed again and at least one run, all planned before the
/// first starts; a larger grid is refused at once rather than planned for minutes.
pub const MAX_SERIES: usize = 256;

/// One list: a name and its values, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct List {
    pub name: String,
    pub values: Vec<String>,
}

/// Reads `--parameter-list` pairs (name, comma-separated values).
pub fn lists(pairs: &[String]) -> Result<Vec<List>, Problem> {
    let mut out: Vec<List> = Vec::new();
    for pair in pairs.chunks(2) {
        let [name, values] = pair else {
            return Err("--parameter-list takes two values: NAME and V1,V2,...".into());
        };
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
        if name.is_empty() || !name.chars().all(ok) {
            return Err(Problem::new(format!(
                "--parameter-list {name:?}: a name is letters, digits, '_', '-' or '.' (it is written {{{name}}})"
            )));
        }
        if out.iter().any(|l| &l.name == name) {
            return Err(Problem::new(format!(
                "--parameter-list {name} is given twice: give each name once, with all its values"
            )));
        }
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            return Err(Problem::new(format!("--parameter-list {name} {:?}: a value is empty", values.join(","))));
        }
        if let Some(v) = values.iter().find(|v| v.contains(['/', '\\']) || v.chars().any(char::is_control)) {
            return Err(Problem::new(format!(
                "--parameter-list {name}: the value {v:?} names a directory of results; no slashes or control characters"
            )));
        }
        out.push(List { name: name.clone(), values });
    }
    // Checked: many long lists would overflow the product itself.
    let combos = out.iter().try_fold(1usize, |n, l| n.checked_mul(l.values.len()).filter(|n| *n <= MAX_SERIES));
    let Some(combos) = combos else {
        let sizes: Vec<String> = out.iter().map(|l| l.values.len().to_string()).collect();
        return Err(Problem::new(format!(
            "--parameter-list makes more than {MAX_SERIES} series ({} values); at most {MAX_SERIES}: split the grid \
             into several benches, or give fewer values",
            sizes.join(" x ")
        )));
    };
    if combos < 2 {
        return Err("--parameter-list needs at least two values to compare (an A/A test gives one twice: v a,a)".into());
    }
    Ok(out)
}

/// Every combination of the lists' values, the first list outermost: (label, (name, value) pairs).
/// A value given twice (an A/A test) gets `#2` in its label, so that each is its own series.
pub fn combinations(lists: &[List]) -> Vec<(String, Vec<(String, String)>)> {
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for l in lists {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                l.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((l.name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let mut labels: Vec<String> = Vec::new();
    combos
        .into_iter()
        .map(|c| {
            // Shown on screens and in file names: a value's control characters and bidirectional
            // overrides escaped (the command line gets the value as it was given).
            let base = c
                .iter()
                .map(|(n, v)| crate::redact::printable(&format!("{n}={v}")).into_owned())
                .collect::<Vec<_>>()
                .join(",");
            let mut label = base.clone();
            let mut k = 1;
            while labels.contains(&label) {
                k += 1;
                label = format!("{base}#{k}");
            }
            labels.push(label.clone());
            (label, c)
        })
        .collect()
}

/// The command line with `{NAME}` replaced by each value, except in `--parameter-list`'s own
/// arguments.
pub fn substitute(args: &[String], values: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = 0;
    for a in args {
        if skip > 0 {
            skip -= 1;
            out.push(a.clone());
            continue;
        }
        if a == "--parameter-list" || a == "-L" {
            skip = 2;
            out.push(a.clone());
            continue;
        }
        let mut a = a.clone();
        for (name, value) in values {
            a = a.replace(&format!("{{{name}}}"), value);
        }
        out.push(a);
    }
    out
}

/// The first combination's (name, value) pairs. When the lists are refused (their error comes
/// when they are read), each list's first value as given, so that a typed flag (`-c {c}`) still
/// parses and the lists' own error is the one said; none when a first value is empty.
pub fn first_values(pairs: &[String]) -> Vec<(String, String)> {
    if let Some((_, values)) = lists(pairs).ok().and_then(|l| combinations(&l).into_iter().next()) {
        return values;
    }
    let firsts: Vec<(String, String)> = pairs
        .chunks(2)
        .filter_map(|p| match p {
            [name, values] => Some((name.clone(), values.split(',').next().unwrap_or_default().trim().to_string())),
            _ => None,
        })
        .collect();
    if firsts.iter().any(|(_, v)| v.is_empty()) {
        return Vec::new();
    }
    firsts
}

/// The command line as its first combination of `--parameter-list` values has it (unchanged
/// without one, or when the lists are wrong: their error comes when they are read).
pub fn first_combination(args: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let pairs = raw_pairs(&text);
    let values = first_values(&pairs);
    if pairs.is_empty() || values.is_empty() {
        return args.to_vec();
    }
    substitute(&text, &values).into_iter().map(Into::into).collect()
}

/// The workloads of every combination, each parsed again from its own command line: (label,
/// workload, the command line as recorded, without secrets). Scenarios get each value as a
/// variable of the same name. A stop (`cancel`) ends the planning: the combinations planned so
/// far come back, and the caller sees the token.
pub fn variants(args: &[String], lists: &[List], cancel: &CancellationToken) -> Result<Vec<super::Variant>, Problem> {
    let mut out = Vec::new();
    for (label, values) in combinations(lists) {
        if cancel.is_cancelled() {
            break;
        }
        let argv = substitute(args, &values);
        let cli = Cli::try_parse_from(&argv).map_err(|e| format!("{label}: {}", e.render()))?;
        let Command::Bench(b) = cli.command else { return Err("--parameter-list belongs to bench".into()) };
        let workload = Workload::bench(&b.workload, &values).map_err(|e| format!("{label}: {e}"))?;
        let recorded = crate::redact::Redactor::command_line(&argv);
        // A value that lands where a secret goes (a password, a token, a secret's variable) would
        // be a series' label, its directory's name and in every document: refused.
        let outside = |line: &[String], v: &str| {
            let mut skip = 0u8;
            line.iter().any(|a| {
                let listed = skip > 0;
                skip = if a == "--parameter-list" || a == "-L" { 2 } else { skip.saturating_sub(1) };
                !listed && a.contains(v)
            })
        };
        for (name, value) in &values {
            if outside(&argv, value) && !outside(&recorded, value) {
                return Err(Problem::new(format!(
                    "--parameter-list {name}: its value goes where a secret goes (a password, a token, a secret's \
                     variable); a value names its series, its directory and its documents, so a secret cannot be \
                     one: give it in the environment instead"
                )));
            }
        }
        out.push((Some(label), workload, recorded));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_grid_in_order_with_labels() {
        let l = lists(&s(&["transport", "sockjs,uws", "c", "1,10"])).unwrap();
        let labels: Vec<String> = combinations(&l).into_iter().map(|c| c.0).collect();
        assert_eq!(
            labels,
            ["transport=sockjs,c=1", "transport=sockjs,c=10", "transport=uws,c=1", "transport=uws,c=10"]
        );
        // A/A: the same value twice is two series.
        let l = lists(&s(&["v", "a,a"])).unwrap();
        let labels: Vec<String> = combinations(&l).into_iter().map(|c| c.0).collect();
        assert_eq!(labels, ["v=a", "v=a#2"]);
        // A value that would reorder or colour what a terminal shows is shown escaped.
        let l = vec![List { name: "v".into(), values: vec!["a\u{202e}b".into(), "\u{1b}[2Jc".into()] }];
        let labels: Vec<String> = combinations(&l).into_iter().map(|c| c.0).collect();
        assert_eq!(labels, ["v=a\\u{202e}b", "v=\\u{1b}[2Jc"]);
    }

    #[test]
    fn bad_lists_are_named() {
        assert!(lists(&s(&["v", "a"])).unwrap_err().what.contains("at least two values"));
        assert!(lists(&s(&["v", "a,,b"])).unwrap_err().what.contains("empty"));
        assert!(lists(&s(&["v", "a/b,c"])).unwrap_err().what.contains("no slashes"));
        assert!(lists(&s(&["a b", "1,2"])).unwrap_err().what.contains("a name is"));
        assert!(lists(&s(&["v", "1,2", "v", "3,4"])).unwrap_err().what.contains("twice"));
        // A grid past the bound is refused with the bound, before any combination is made.
        let thousand: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let e = lists(&s(&["a", &thousand.join(","), "b", "1,2"])).unwrap_err();
        assert!(e.what.contains("more than 256 series (1000 x 2 values)"), "{e}");
        // 257 = the bound plus one; the bound itself is allowed.
        let values = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        assert!(lists(&s(&["a", &values(257)])).is_err());
        assert_eq!(combinations(&lists(&s(&["a", &values(128), "b", "x,y"])).unwrap()).len(), MAX_SERIES);
        // Lists whose product overflows a usize are refused too, not wrapped.
        let many: Vec<String> = (0..12).flat_map(|i| [format!("n{i}"), values(100)]).collect();
        assert!(lists(&many).unwrap_err().what.contains("at most 256"));
    }

    #[test]
    fn substitution_leaves_the_lists_alone() {
        let args = s(&["bolide", "bench", "http", "-L", "d", "0,3", "--spawn", "srv --delay {d}", "http://h/{d}/{x}"]);
        let out = substitute(&args, &[("d".into(), "3".into())]);
        assert_eq!(
            out,
            s(&["bolide", "bench", "http", "-L", "d", "0,3", "--spawn", "srv --delay 3", "http://h/3/{x}"])
        );
    }
}

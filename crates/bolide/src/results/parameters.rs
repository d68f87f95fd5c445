//! A series of `bench --parameter-list` read back from its documents: the lists its recorded
//! command line gave, the values its label names (`NAME=value,...`), and whether two series are
//! the same bench's command line with other values, which `compare` then compares as bench did.

/// The `--parameter-list` (`-L`) pairs of a command line, as given: name, values, name, ...
pub fn raw_pairs(args: &[String]) -> Vec<String> {
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if (args[i] == "--parameter-list" || args[i] == "-L") && i + 2 < args.len() {
            pairs.extend([args[i + 1].clone(), args[i + 2].clone()]);
            i += 3;
        } else {
            i += 1;
        }
    }
    pairs
}

/// The values a series' label (`d=10`, `a=1,b=x`, `v=a#2` for an A/A test's second) gives each
/// list of its command line, in the lists' order; None when the label is not one of the grid's.
fn values(command_line: &[String], label: &str) -> Option<Vec<(String, String)>> {
    let pairs = raw_pairs(command_line);
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return None;
    }
    let base = label.rsplit_once('#').filter(|(_, k)| k.parse::<u32>().is_ok()).map_or(label, |(b, _)| b);
    let given: Vec<(&str, &str)> = base.split(',').map(|p| p.split_once('=')).collect::<Option<_>>()?;
    if given.len() != pairs.len() / 2 {
        return None;
    }
    let mut out = Vec::new();
    for ((name, value), list) in given.into_iter().zip(pairs.chunks(2)) {
        if name != list[0] || !list[1].split(',').any(|v| v.trim() == value) {
            return None;
        }
        out.push((name.to_string(), value.to_string()));
    }
    Some(out)
}

/// Longest argument compared piece by piece; longer ones must be equal (the matching below is
/// quadratic in the lengths).
const MAX_MATCHED_BYTES: usize = 4096;

/// Whether `x` and `y` are one template with `{NAME}` written as `a`'s values in `x` and as `b`'s
/// in `y`: read left to right, each place is the same byte on both sides or a name's value on
/// each.
fn explained(x: &str, y: &str, a: &[(String, String)], b: &[(String, String)]) -> bool {
    if x == y {
        return true;
    }
    let (x, y) = (x.as_bytes(), y.as_bytes());
    if x.len().max(y.len()) > MAX_MATCHED_BYTES {
        return false;
    }
    // reach[i][j]: the first i bytes of x and j of y are explained alike.
    let width = y.len() + 1;
    let mut reach = vec![false; (x.len() + 1) * width];
    reach[0] = true;
    for i in 0..=x.len() {
        for j in 0..=y.len() {
            if !reach[i * width + j] {
                continue;
            }
            if i < x.len() && j < y.len() && x[i] == y[j] {
                reach[(i + 1) * width + j + 1] = true;
            }
            for ((_, va), (_, vb)) in a.iter().zip(b) {
                let (va, vb) = (va.as_bytes(), vb.as_bytes());
                if x[i..].starts_with(va) && y[j..].starts_with(vb) {
                    reach[(i + va.len()) * width + j + vb.len()] = true;
                }
            }
        }
    }
    reach[x.len() * width + y.len()]
}

/// When two series (each one command line and label, as their documents record them) are two
/// values of one `bench --parameter-list`: the same lists, each a value of them, and command lines
/// that differ only where the values stand. Their difference in words (`d: 10 against 11`), or
/// None.
pub fn between(base: (&[String], &str), other: (&[String], &str)) -> Option<String> {
    let (a, b) = (values(base.0, base.1)?, values(other.0, other.1)?);
    if raw_pairs(base.0) != raw_pairs(other.0) || base.0.len() != other.0.len() {
        return None;
    }
    if !base.0.iter().zip(other.0).all(|(x, y)| explained(x, y, &a, &b)) {
        return None;
    }
    let changed: Vec<String> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x.1 != y.1)
        .map(|((n, va), (_, vb))| crate::redact::printable(&format!("{n}: {va} against {vb}")).into_owned())
        .collect();
    Some(if changed.is_empty() { "the same values (an A/A test)".to_string() } else { changed.join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn two_values_of_one_grid_are_told_apart_from_two_commands() {
        let line = |port: &str, d: &str| {
            s(&[
                "bolide",
                "bench",
                "http",
                "-L",
                "d",
                "10,11",
                "--out",
                "OUT",
                &format!("http://127.0.0.1:{port}/delay/{d}"),
            ])
        };
        // A port that holds a value ("41011") is no value's place: matched byte for byte.
        let (a, b) = (line("41011", "10"), line("41011", "11"));
        assert_eq!(between((&a, "d=10"), (&b, "d=11")).as_deref(), Some("d: 10 against 11"));
        // The same lists, another target: not one bench.
        assert_eq!(between((&a, "d=10"), (&line("41012", "11"), "d=11")), None);
        // A label that is no value of the lists, or no lists at all.
        assert_eq!(between((&a, "d=12"), (&b, "d=11")), None);
        let plain = s(&["bolide", "bench", "http", "http://127.0.0.1:1/delay/10"]);
        assert_eq!(between((&plain, "d=10"), (&b, "d=11")), None);
        // An A/A test: the same value twice, the second labelled #2.
        let aa = s(&["bolide", "bench", "http", "-L", "v", "a,a", "http://h/"]);
        assert_eq!(between((&aa, "v=a"), (&aa, "v=a#2")).as_deref(), Some("the same values (an A/A test)"));
        // Two lists, one value changed; values of different lengths in one argument.
        let grid =
            |c: &str, p: &str| s(&["bolide", "bench", "http", "-L", "c", "1,100", "-L", "p", "a,bb", "-c", c, p]);
        assert_eq!(
            between((&grid("1", "/a/a"), "c=1,p=a"), (&grid("100", "/bb/bb"), "c=100,p=bb")).as_deref(),
            Some("c: 1 against 100, p: a against bb")
        );
        assert_eq!(between((&grid("1", "/a/a"), "c=1,p=a"), (&grid("100", "/bb/c"), "c=100,p=bb")), None);
    }
}

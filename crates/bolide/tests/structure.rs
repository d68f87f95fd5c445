//! The shape docs/ARCHITECTURE.md promises, held by the source itself: the engine's files short
//! enough to read, no function longer than a screenful or three, the session seam small and
//! refusing nothing, problems as values rather than bare text, and the engine free of any
//! protocol's verbs. Read from the files, so that a change that breaks the shape fails here.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's text before its test module (a file that is a test module counts as empty).
fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Each function's name and length in lines, its braces matched (strings and comments aside).
fn functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub(super) ")).unwrap_or(t);
        let t = t.strip_prefix("pub ").unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else { continue };
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            let l = without_strings(l);
            if !opened && l.contains(';') && !l.contains('{') {
                break;
            }
            depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
            opened |= l.contains('{');
            if opened && depth <= 0 {
                out.push((name.clone(), j - i + 1));
                break;
            }
        }
    }
    out
}

/// A line without its string and char literals and its comment.
fn without_strings(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' if chars.clone().nth(1) == Some('\'') => {
                chars.next();
                chars.next();
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

fn all_code() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    files.into_iter().map(|p| (p.clone(), code(&p))).collect()
}

#[test]
fn the_engines_files_are_short_and_its_users_are_tested() {
    let mut files = Vec::new();
    rust_files(&src().join("engine"), &mut files);
    for path in &files {
        let lines = code(path).lines().count();
        assert!(lines <= 800, "{}: {lines} lines before its tests (800 at most)", path.display());
    }
    for name in ["vu.rs", "user.rs"] {
        let text = std::fs::read_to_string(src().join("engine").join(name)).unwrap();
        assert!(text.contains("#[cfg(test)]\nmod tests"), "engine/{name} has no unit tests");
    }
}

#[test]
fn no_function_is_longer_than_150_lines() {
    let mut long = Vec::new();
    for (path, code) in all_code() {
        for (name, lines) in functions(&code) {
            if lines > 150 {
                long.push(format!("{}: {name} ({lines} lines)", path.display()));
            }
        }
    }
    assert!(long.is_empty(), "functions over 150 lines: {long:#?}");
    // The counter counts: this file's own helpers are found with their lengths.
    let me = std::fs::read_to_string(file!()).unwrap_or_default();
    if !me.is_empty() {
        let found = functions(&me);
        assert!(found.iter().any(|(n, l)| n == "functions" && *l > 20), "{found:?}");
    }
}

#[test]
fn the_session_seam_has_at_most_8_methods_and_refuses_nothing() {
    let text = std::fs::read_to_string(src().join("session.rs")).unwrap();
    let start = text.find("pub trait Session").expect("session.rs declares the Session trait");
    let body = &text[start..];
    let end = body.find("\n}\n").expect("the trait ends");
    let body = &body[..end];
    let methods: Vec<&str> = body.lines().filter(|l| l.trim_start().starts_with("fn ")).collect();
    assert!(!methods.is_empty() && methods.len() <= 8, "{} methods: {methods:#?}", methods.len());
    // No default bodies: every protocol answers every method itself.
    let bodies = functions(body).into_iter().filter(|(_, lines)| *lines > 1).count();
    assert_eq!(bodies, 0, "a Session method with a default body:\n{body}");
}

#[test]
fn problems_are_values_not_bare_text() {
    let mut count = 0;
    let mut by_file = Vec::new();
    for (path, code) in all_code() {
        let results = code.match_indices("Result<").filter(|(at, _)| {
            // The Result's own error type: its last top-level argument.
            let rest = &code[at + 7..];
            let mut depth = 1;
            let mut last_comma = None;
            for (i, c) in rest.char_indices() {
                match c {
                    '<' | '(' | '[' => depth += 1,
                    '>' | ')' | ']' => {
                        depth -= 1;
                        if depth == 0 {
                            return last_comma.is_some_and(|c: usize| rest[c + 1..i].trim() == "String");
                        }
                    }
                    ',' if depth == 1 => last_comma = Some(i),
                    _ => {}
                }
            }
            false
        });
        let k = results.count();
        if k > 0 {
            by_file.push(format!("{k} {}", path.display()));
        }
        count += k;
    }
    assert!(count < 40, "{count} Result<_, String> (fewer than 40): {by_file:#?}");
}

#[test]
fn the_engine_knows_no_protocols_verbs() {
    let mut files = Vec::new();
    rust_files(&src().join("engine"), &mut files);
    for path in files {
        let code = code(&path);
        for verb in ["conn.call(", "conn.subscribe(", "conn.emit(", "conn.listen(", "conn.execute(", "conn.live("] {
            assert!(!code.contains(verb), "{} calls a protocol's {verb}", path.display());
        }
        for step in
            ["Call", "Login", "Subscribe", "Unsubscribe", "WaitFor", "Emit", "Listen", "Execute", "GqlSubscribe"]
        {
            let named = format!("StepKind::{step}");
            let found = code.match_indices(&named).any(|(at, _)| {
                // StepKind::Subscribe is not StepKind::SubscribeX.
                !code[at + named.len()..].starts_with(|c: char| c.is_alphanumeric())
            });
            assert!(!found, "{} performs a protocol's step ({named})", path.display());
        }
    }
}

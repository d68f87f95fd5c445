//! Keeping secrets out of everything bolide prints or writes: the values of sensitive headers
//! (Authorization, Cookie, API keys, and any name given to `--redact`), passwords in URLs, and
//! the password of `serve --user NAME:PASSWORD`. Names stay, so a reader sees what was sent.
//! And text a server sent, made safe to show: its control characters escaped ([`printable`]),
//! and what bolide itself sent it taken out of what it echoes ([`unechoed`]).

/// What replaces a secret.
pub const MASK: &str = "<redacted>";

/// Header names whose values are secrets, compared without case; a name containing one of
/// [`SENSITIVE_PARTS`] is one too.
const SENSITIVE_NAMES: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "apikey"];
const SENSITIVE_PARTS: &[&str] = &["auth", "cookie", "token", "secret", "password", "passwd", "api-key", "apikey"];

/// Which headers to redact: the built-in list plus names from `--redact`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Redactor {
    extra: Vec<String>,
}

impl Redactor {
    pub fn new(extra: &[String]) -> Redactor {
        Redactor { extra: extra.iter().map(|n| n.trim().to_ascii_lowercase()).filter(|n| !n.is_empty()).collect() }
    }

    /// Whether the value of header `name` is a secret.
    pub fn sensitive(&self, name: &str) -> bool {
        let name = name.trim().to_ascii_lowercase();
        SENSITIVE_NAMES.contains(&name.as_str())
            || SENSITIVE_PARTS.iter().any(|p| name.contains(p))
            || self.extra.contains(&name)
    }

    /// A header's value as it may be shown.
    pub fn value(&self, name: &str, value: &str) -> String {
        if self.sensitive(name) {
            MASK.to_string()
        } else {
            text(value)
        }
    }

    /// A `Name: value` argument as it may be shown.
    pub fn header_arg(&self, raw: &str) -> String {
        match raw.split_once(':') {
            Some((name, _)) if self.sensitive(name) => format!("{name}: {MASK}"),
            _ => text(raw),
        }
    }

    /// A command line as it may be recorded: header values of sensitive headers (`-H`,
    /// `--header`, in any of clap's spellings, and names given to `--redact` on that line),
    /// `serve --user` passwords and passwords in URLs anywhere in an argument.
    pub fn command_line(args: &[String]) -> Vec<String> {
        let mut extra = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            if arg == "--redact" {
                extra.extend(args.get(i + 1).cloned());
            } else if let Some(name) = arg.strip_prefix("--redact=") {
                extra.push(name.to_string());
            }
        }
        Redactor::new(&extra).line(args)
    }

    fn line(&self, args: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(args.len());
        let mut next_is: Option<&str> = None;
        for arg in args {
            let shown = match next_is.take() {
                Some("header") => self.header_arg(arg),
                Some("user") => user_arg(arg),
                Some("env") => env_arg(arg),
                Some("spawn") => spawn_command(arg),
                _ => {
                    if arg == "-H" || arg == "--header" {
                        next_is = Some("header");
                        arg.clone()
                    } else if arg == "--user" || arg == "--login" {
                        next_is = Some("user");
                        arg.clone()
                    } else if arg == "--spawn-env" {
                        next_is = Some("env");
                        arg.clone()
                    } else if arg == "--spawn" {
                        next_is = Some("spawn");
                        arg.clone()
                    } else if let Some(c) = arg.strip_prefix("--spawn=") {
                        format!("--spawn={}", spawn_command(c))
                    } else if let Some(e) = arg.strip_prefix("--spawn-env=") {
                        format!("--spawn-env={}", env_arg(e))
                    } else if let Some(h) = arg.strip_prefix("--header=") {
                        format!("--header={}", self.header_arg(h))
                    } else if let Some(u) = arg.strip_prefix("--user=") {
                        format!("--user={}", user_arg(u))
                    } else if let Some(u) = arg.strip_prefix("--login=") {
                        format!("--login={}", user_arg(u))
                    } else if let Some(h) = arg.strip_prefix("-H").filter(|h| !h.is_empty() && !arg.starts_with("--")) {
                        format!("-H{}", self.header_arg(h.strip_prefix('=').unwrap_or(h)))
                    } else {
                        text(arg)
                    }
                }
            };
            out.push(shown);
        }
        out
    }
}

/// `NAME:PASSWORD` as `NAME:<redacted>`.
/// `--spawn-env NAME=VALUE`: the value hidden when the name says it is a secret (a password,
/// token, key, secret, credential, cookie or authorization), URL passwords hidden otherwise.
fn env_arg(raw: &str) -> String {
    match raw.split_once('=') {
        Some((name, _)) if secret_name(name) => format!("{name}={MASK}"),
        _ => text(raw),
    }
}

/// A `--spawn` shell command as it may be shown: the value of every assignment whose name says
/// it is a secret (`API_PASSWORD=x exec server`, `export TOKEN="a b"`) hidden, URL passwords
/// hidden.
pub fn spawn_command(command: &str) -> String {
    let b = command.as_bytes();
    let mut out = String::with_capacity(command.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        let starts_word =
            i == 0 || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b'{' | b'`' | b'\'' | b'"');
        let name_len = b[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
        let is_name = name_len > 0 && !b[i].is_ascii_digit();
        if !(starts_word && is_name && b.get(i + name_len) == Some(&b'=')) {
            i += 1;
            continue;
        }
        let value = i + name_len + 1;
        // The value: quoted up to its closing quote, else up to a blank or a separator.
        let mut end = value;
        while end < b.len() && !matches!(b[end], b' ' | b'\t' | b'\n' | b';' | b'&' | b'|') {
            if let q @ (b'\'' | b'"') = b[end] {
                end = b[end + 1..].iter().position(|&c| c == q).map_or(b.len(), |p| end + 1 + p + 1);
            } else {
                end += 1;
            }
        }
        if secret_name(&command[i..i + name_len]) {
            out.push_str(&command[copied..value]);
            out.push_str(MASK);
            copied = end;
        }
        i = end.max(i + 1);
    }
    out.push_str(&command[copied..]);
    text(&out)
}

/// Whether an environment variable's name says it holds a secret.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    // METEOR_SETTINGS: a Meteor app's settings, JSON that holds its keys.
    ["PASS", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "COOKIE", "AUTH", "PWD", "SETTINGS"].iter().any(|w| n.contains(w))
}

fn user_arg(raw: &str) -> String {
    match raw.split_once(':') {
        Some((name, _)) => format!("{name}:{MASK}"),
        None => text(raw),
    }
}

/// Text with the password of every `scheme://user:password@` in it replaced.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', '?', '#' or whitespace; its userinfo at the last '@'.
        let end = tail.find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace()).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@').map(|at| (&authority[..at], &authority[at..])) {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(MASK);
                    out.push_str(host);
                }
                None => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The credentials bolide sent in this process, in any protocol (header values that are
/// secrets, Socket.IO `auth` payloads and query tokens, GraphQL `connectionParams`, DDP login
/// passwords, digests and resume tokens), lowercased: a server that echoes one back in its text
/// has it masked wherever the text is shown ([`printable`]).
struct Sent {
    values: std::collections::HashSet<String>,
    /// The values' first four bytes: a place in a text is looked at further only when its four
    /// bytes begin a value (one lookup a byte, whatever the values' lengths).
    heads: std::collections::HashSet<[u8; 4]>,
    /// The lengths of the values, longest first.
    lengths: Vec<usize>,
    /// The values' bytes in all.
    bytes: usize,
}

static SENT: std::sync::RwLock<Option<Sent>> = std::sync::RwLock::new(None);

/// At most this many bytes of credentials are kept (a distinct token per user of a large run):
/// past it, the first ones still are.
const MAX_SENT_BYTES: usize = 8 << 20;

/// Shorter values are not taken for credentials (masking `1` or `yes` everywhere hides data).
const MIN_SECRET: usize = 4;

/// Records a credential bolide is about to send: it will never be shown as a server echoes it.
pub fn sent_secret(value: &str) {
    let value = value.trim();
    if value.len() < MIN_SECRET {
        return;
    }
    let lower = value.to_ascii_lowercase();
    if SENT.read().is_ok_and(|s| s.as_ref().is_some_and(|s| s.values.contains(&lower))) {
        return;
    }
    let Ok(mut guard) = SENT.write() else { return };
    let sent = guard.get_or_insert_with(|| Sent {
        values: Default::default(),
        heads: Default::default(),
        lengths: Vec::new(),
        bytes: 0,
    });
    if sent.bytes + lower.len() > MAX_SENT_BYTES {
        return;
    }
    if !sent.lengths.contains(&lower.len()) {
        sent.lengths.push(lower.len());
        sent.lengths.sort_unstable_by(|a, b| b.cmp(a));
    }
    let b = lower.as_bytes();
    sent.heads.insert([b[0], b[1], b[2], b[3]]);
    sent.bytes += lower.len();
    sent.values.insert(lower);
}

/// Records a credential as it is sent, and, for `Bearer x` (or any scheme word before it), `x`
/// alone too; a `Cookie`'s `a=x; b=y`, each cookie's value too.
fn sent_credential(value: &str) {
    let value = value.trim();
    sent_secret(value);
    if let Some((scheme, rest)) = value.split_once(' ') {
        if scheme.chars().all(|c| c.is_ascii_alphabetic()) {
            sent_secret(rest);
        }
    }
    if value.contains('=') {
        for pair in value.split(';') {
            if let Some((_, v)) = pair.split_once('=') {
                sent_secret(v);
            }
        }
    }
}

/// Whether a name (a header's, a query parameter's, a payload's key) says its value is a secret.
fn secret_key(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    Redactor::default().sensitive(&n)
        || ["key", "jwt", "session", "sig", "pass", "credential", "bearer"].iter().any(|w| n.contains(w))
}

/// Records a `--spawn-env` value as a credential when its name says it is one: the spawned
/// server's last lines, shown when it fails, do not show it.
pub fn sent_env(name: &str, value: &str) {
    if secret_name(name) {
        sent_secret(value);
    }
}

/// Records a header's (or a query parameter's) value as a credential when its name says it is one.
pub fn sent_header(name: &str, value: &str) {
    if secret_key(name) {
        sent_credential(value);
    }
}

/// Records the credentials of a payload bolide sends (an `auth` payload, `connectionParams`): the
/// values under a key that says it holds a secret, and any text long enough to be a token (a short
/// word like `user` is not masked everywhere it appears).
pub fn sent_payload(v: &serde_json::Value) {
    payload(None, v);
}

fn payload(key: Option<&str>, v: &serde_json::Value) {
    let secret = key.is_some_and(secret_key);
    match v {
        serde_json::Value::String(s) if secret || s.trim().len() >= 12 => sent_credential(s),
        serde_json::Value::Number(n) if secret => sent_secret(&n.to_string()),
        serde_json::Value::Array(items) => items.iter().for_each(|i| payload(key, i)),
        serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| payload(Some(k), v)),
        _ => {}
    }
}

/// `text` with every credential bolide sent (ASCII case ignored) replaced by the mask, when it
/// holds one.
fn unsent(text: &str) -> Option<String> {
    if text.len() < MIN_SECRET {
        return None;
    }
    let guard = SENT.read().ok()?;
    let sent = guard.as_ref()?;
    let lower = text.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut out: Option<String> = None;
    let (mut at, mut copied) = (0, 0);
    while at + MIN_SECRET <= b.len() {
        let head = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        let found = sent.heads.contains(&head).then(|| {
            sent.lengths.iter().copied().find(|&n| lower.get(at..at + n).is_some_and(|w| sent.values.contains(w)))
        });
        match found.flatten() {
            Some(n) => {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..at]);
                o.push_str(MASK);
                at += n;
                copied = at;
            }
            None => at += lower[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

/// Text a peer sent (an error reason, a status line, a receiver's message, a label value), as it
/// may reach a terminal, a document, a report or a log: every credential bolide sent masked (a
/// server may echo a token back), control characters (C0, DEL, C1: an escape sequence would
/// retitle or clear a terminal) and the bidirectional overrides (which reorder what a reader
/// sees) written as escapes (`\n`, `\u{1b}`); everything else as it is.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    match unsent(text) {
        Some(masked) => std::borrow::Cow::Owned(escaped(&masked).into_owned()),
        None => escaped(text),
    }
}

/// A server's value as JSON text in an error's detail: made [`printable`] (masked before the cut,
/// so a credential across it does not show its beginning), then cut at 200 characters.
pub fn brief(v: &serde_json::Value) -> String {
    let text = printable(&v.to_string()).into_owned();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// What a receiver said, as it may be kept: every value bolide sent it in a header (a bearer
/// token a hostile receiver echoes back) replaced by the mask, then made [`printable`].
pub fn unechoed(text: &str, sent: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (_, value) in sent {
        // The whole value, and its secret part after a scheme word (`Bearer abc` -> `abc`), in
        // any case (a receiver may echo it lowercased).
        let parts = [value.trim(), value.trim().split_once(' ').map_or("", |(_, v)| v.trim())];
        for part in parts.into_iter().filter(|p| p.len() >= 4) {
            out = replace_ignoring_case(&out, part, MASK);
        }
    }
    printable(&out).into_owned()
}

/// `text` with every occurrence of `what` (ASCII case ignored) replaced by `with`.
fn replace_ignoring_case(text: &str, what: &str, with: &str) -> String {
    // ASCII lowercasing keeps every byte where it was, so positions found in the lowered text are
    // positions in the text.
    let (lower, what) = (text.to_ascii_lowercase(), what.to_ascii_lowercase());
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(&what) {
        out.push_str(&text[at..at + i]);
        out.push_str(with);
        at += i + what.len();
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_server_sends_is_shown_escaped() {
        // Each row: text from a server, as shown.
        let rows = [
            ("plain words, ünïcödé", "plain words, ünïcödé"),
            // An OSC window title, a clear screen, colours and a bell.
            ("\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred", "\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{1b}[31mred"),
            ("two\nlines\r\tand", "two\\nlines\\r\\tand"),
            // C1's CSI and a right-to-left override.
            ("\u{9b}31m \u{202e}txt", "\\u{9b}31m \\u{202e}txt"),
            ("\u{0}\u{7f}", "\\u{0}\\u{7f}"),
        ];
        for (from, shown) in rows {
            assert_eq!(printable(from), shown, "{from:?}");
        }
        assert!(matches!(printable("nothing to do"), std::borrow::Cow::Borrowed(_)));
        // A receiver echoing the bearer token bolide sent it: the token is not kept.
        let sent = vec![("Authorization".to_string(), "Bearer s3cr3t-token".to_string())];
        let kept = unechoed("bad auth for Bearer s3cr3t-token (token S3CR3T-TOKEN)\u{1b}[2J", &sent);
        assert_eq!(kept, "bad auth for <redacted> (token <redacted>)\\u{1b}[2J");
    }

    #[test]
    fn credentials_bolide_sent_are_masked_in_what_a_server_says() {
        sent_header("Authorization", "Bearer tok-AbC123xyz");
        sent_header("X-Trace", "not-a-secret-value");
        sent_header("Cookie", "sid=ck-77aa55; theme=dark-mode-on");
        sent_payload(&serde_json::json!({
            "token": "auth-Tok-99", "apiKey": 98765431, "user": "someone", "n": 12345678,
            "note": "a-long-opaque-value-xyz", "ok": true
        }));
        let said = "refused: {\"token\":\"AUTH-TOK-99\"} Bearer tok-abc123xyz / 98765431 \
            not-a-secret-value someone 12345678 ck-77aa55 a-long-opaque-value-xyz \u{1b}";
        assert_eq!(
            printable(said),
            "refused: {\"token\":\"<redacted>\"} <redacted> / <redacted> not-a-secret-value someone 12345678 \
             <redacted> <redacted> \\u{1b}"
        );
        // A short word of a payload is not masked wherever it appears.
        assert!(matches!(printable("the user's last step"), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(printable("nothing sent here"), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(printable("ünï"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_spawn_commands_secret_assignments_are_hidden() {
        let rows = [
            ("API_PASSWORD=hunter22 exec node server.js", "API_PASSWORD=<redacted> exec node server.js"),
            (
                "export TOKEN='a b;c' PORT=3000; MONGO_URL=mongodb://u:pw@h/db exec x --secret=no",
                "export TOKEN=<redacted> PORT=3000; MONGO_URL=mongodb://u:<redacted>@h/db exec x --secret=no",
            ),
            (
                "cd app && METEOR_SETTINGS=\"{\\\"k\\\": 1}\" exec main",
                "cd app && METEOR_SETTINGS=<redacted> exec main",
            ),
            ("exec server a=b 9X=1", "exec server a=b 9X=1"),
            ("sh -c 'TOKEN=x node s'", "sh -c 'TOKEN=<redacted> node s'"),
        ];
        for (from, shown) in rows {
            assert_eq!(spawn_command(from), shown, "{from}");
        }
        let line = Redactor::command_line(&["--spawn".into(), "PASS=x exec s".into(), "--spawn=KEY=y s".into()]);
        assert_eq!(line, ["--spawn", "PASS=<redacted> exec s", "--spawn=KEY=<redacted> s"]);
    }

    #[test]
    fn a_spawned_servers_secret_in_its_last_lines_is_masked() {
        sent_env("MONTI_APP_SECRET", "m0nti-s3cr3t-value");
        sent_env("PORT", "31337");
        assert_eq!(printable("boot with m0nti-s3cr3t-value on 31337"), "boot with <redacted> on 31337");
    }

    #[test]
    fn spawned_servers_secrets_are_not_kept() {
        let line = |v: &[&str]| Redactor::command_line(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        let shown = line(&[
            "bolide",
            "--spawn-env",
            "MONTI_APP_SECRET=s3cr3t",
            "--spawn-env=MONGO_URL=mongodb://u:pw@127.0.0.1/db",
            "--spawn-env",
            "DDP_TRANSPORT=uws",
        ]);
        assert_eq!(
            shown,
            [
                "bolide",
                "--spawn-env",
                "MONTI_APP_SECRET=<redacted>",
                "--spawn-env=MONGO_URL=mongodb://u:<redacted>@127.0.0.1/db",
                "--spawn-env",
                "DDP_TRANSPORT=uws"
            ]
        );
    }

    #[test]
    fn urls_in_text() {
        // Each row: text, as shown.
        let rows = [
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
            ("http://ann:s3cret@127.0.0.1/x?y", "http://ann:<redacted>@127.0.0.1/x?y"),
            ("http://ann@127.0.0.1/", "http://ann@127.0.0.1/"),
            ("http://a:b@c@host", "http://a:<redacted>@host"),
            (
                "MONGO_URL=mongodb://u:p@db:27017/app node main.js",
                "MONGO_URL=mongodb://u:<redacted>@db:27017/app node main.js",
            ),
            ("two http://a:1@h/ and ws://b:2@k", "two http://a:<redacted>@h/ and ws://b:<redacted>@k"),
            ("no scheme a:b@c", "no scheme a:b@c"),
        ];
        for (raw, want) in rows {
            assert_eq!(text(raw), want, "{raw}");
        }
    }

    #[test]
    fn command_lines() {
        let args: Vec<String> = [
            "bolide",
            "http",
            "--redact",
            "x-tenant",
            "-H",
            "Authorization: Bearer abc",
            "-HCookie: a=b",
            "--header=x-api-key: k",
            "--header",
            "X-Tenant: t1",
            "-H",
            "Accept: text/html",
            "--user",
            "ann:pw",
            "http://u:pw@127.0.0.1/",
            "--spawn",
            "env DB=postgres://x:y@h/db ./server",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let shown = Redactor::command_line(&args).join(" ");
        for secret in ["abc", "a=b", ": k", "t1", "ann:pw", "u:pw", "x:y"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        for kept in ["Authorization: <redacted>", "Accept: text/html", "X-Tenant: <redacted>", "-HCookie: <redacted>"] {
            assert!(shown.contains(kept), "{kept} missing in {shown}");
        }
    }

    #[test]
    fn sensitive_names() {
        let r = Redactor::default();
        for name in ["Authorization", "proxy-authorization", "COOKIE", "X-Api-Key", "X-Auth-Token", "X-CSRF-Token"] {
            assert!(r.sensitive(name), "{name}");
        }
        for name in ["Accept", "Content-Type", "X-Request-Id"] {
            assert!(!r.sensitive(name), "{name}");
        }
    }
}

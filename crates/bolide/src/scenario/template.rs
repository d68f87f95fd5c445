//! `{{ name }}` in scenario values: a string that is exactly one placeholder takes the variable's
//! value (any JSON type); placeholders inside longer strings are replaced by the value as text.
//! A placeholder may reach into a captured value: `{{ ids[0] }}` (a list's first element),
//! `{{ task.owner }}` (an object's field), `{{ tasks[1].id }}`.

use std::collections::HashMap;

use serde_json::Value;

/// A user's variables.
pub type Vars = HashMap<String, Value>;

/// The names of the placeholders in `s`, in order.
pub fn placeholders(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push(rest[start + 2..start + 2 + len].trim().to_string());
        rest = &rest[start + 2 + len + 2..];
    }
    out
}

/// Every placeholder name anywhere in `v`.
pub fn all_placeholders(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => placeholders(s),
        Value::Array(items) => items.iter().flat_map(all_placeholders).collect(),
        Value::Object(m) => m.values().flat_map(all_placeholders).collect(),
        _ => Vec::new(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The text of a quoted placeholder, `{{ '...' }}`: literal text, not a variable (how a value
/// that itself holds `{{` is written: `{{ '{{' }}`).
pub fn literal(name: &str) -> Option<&str> {
    name.strip_prefix('\'')?.strip_suffix('\'')
}

/// A recorded text as a scenario value that renders back to it: each `{{` written `{{ '{{' }}`.
pub fn escape(s: &str) -> String {
    s.replace("{{", "{{ '{{' }}")
}

/// The variable a placeholder names: `ids` of `ids[0]` and of `ids.first`.
pub fn variable(placeholder: &str) -> &str {
    let end = placeholder.find(['[', '.']).filter(|i| *i > 0).unwrap_or(placeholder.len());
    placeholder[..end].trim_end()
}

/// The steps into a value after the variable: `[0]` an element, `.name` a field; None when the
/// placeholder's path is malformed (`ids[x`, `a..b`).
pub fn path(placeholder: &str) -> Option<Vec<Step>> {
    let mut rest = placeholder[variable(placeholder).len()..].trim();
    let mut out = Vec::new();
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']')?;
            out.push(Step::Index(inner[..close].trim().parse().ok()?));
            rest = inner[close + 1..].trim_start();
        } else if let Some(field) = rest.strip_prefix('.') {
            let end = field.find(['[', '.']).unwrap_or(field.len());
            let name = field[..end].trim();
            if name.is_empty() {
                return None;
            }
            out.push(Step::Field(name.to_string()));
            rest = &field[end..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// One step into a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Index(usize),
    Field(String),
}

/// The value of a variable (through its path, when it has one; null where the path leads
/// nowhere); `$randomId` is a fresh Meteor id each time, `$now` the time in ms since the epoch.
fn lookup(name: &str, vars: &Vars) -> Value {
    if let Some(text) = literal(name) {
        return Value::String(text.to_string());
    }
    if name == "$randomId" {
        return Value::String(ddp::id::random_id());
    }
    if name == "$now" {
        // Milliseconds since the epoch, as `Date.now()` gives them: an event's send time, for the
        // fan-out latency its listeners measure.
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        return Value::from(ms as u64);
    }
    // A variable whose own name holds a dot (a payload column `user.email`) is itself first.
    if let Some(v) = vars.get(name) {
        return v.clone();
    }
    let Some(value) = vars.get(variable(name)) else { return Value::Null };
    let mut at = value;
    for step in path(name).unwrap_or_default() {
        let next = match (&step, at) {
            (Step::Index(i), Value::Array(items)) => items.get(*i),
            (Step::Field(f), Value::Object(m)) => m.get(f),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return Value::Null,
        }
    }
    at.clone()
}

/// Renders a string.
pub fn render_str(s: &str, vars: &Vars) -> Value {
    if !s.contains("{{") {
        return Value::String(s.to_string());
    }
    let trimmed = s.trim();
    if trimmed.starts_with("{{") && trimmed.ends_with("}}") && trimmed.matches("{{").count() == 1 {
        return lookup(trimmed[2..trimmed.len() - 2].trim(), vars);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push_str(&rest[..start]);
        out.push_str(&text(&lookup(rest[start + 2..start + 2 + len].trim(), vars)));
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// Renders every string inside `v`.
pub fn render(v: &Value, vars: &Vars) -> Value {
    match v {
        Value::String(s) => render_str(s, vars),
        Value::Array(items) => Value::Array(items.iter().map(|i| render(i, vars)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), render(v, vars))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escaped_braces_render_back() {
        let vars = Vars::new();
        for s in ["{{ y }}", "{{", "a {{{ b }} c", "{{ '{{' }}", "x}}"] {
            assert_eq!(render_str(&escape(s), &vars), json!(s), "{s}");
            assert!(all_placeholders(&json!(escape(s))).iter().all(|p| literal(p).is_some()), "{s}");
        }
    }

    #[test]
    fn rendering() {
        let vars: Vars =
            [("n".to_string(), json!(3)), ("s".to_string(), json!("abc")), ("list".to_string(), json!([1, 2]))]
                .into_iter()
                .collect();
        // Each row: template, rendered.
        let rows = [
            (json!("New Task {{ n }}"), json!("New Task 3")),
            (json!("{{n}}"), json!(3)),
            (json!(" {{ list }} "), json!([1, 2])),
            (json!({"a": ["{{ s }}-{{ n }}", 5]}), json!({"a": ["abc-3", 5]})),
            (json!("{{ missing }}"), json!(null)),
            (json!("x{{ missing }}y"), json!("xy")),
            (json!("no placeholders"), json!("no placeholders")),
            (json!("unclosed {{ n"), json!("unclosed {{ n")),
        ];
        for (template, want) in rows {
            assert_eq!(render(&template, &vars), want, "{template}");
        }
        assert!(ddp::id::is_random_id(render(&json!("{{ $randomId }}"), &vars).as_str().unwrap()));
        // Into a captured value: elements and fields, null where the path leads nowhere.
        let vars: Vars = [("ids".to_string(), json!(["a", "b"])), ("t".to_string(), json!({"tasks": [{"id": "x"}]}))]
            .into_iter()
            .collect();
        let rows = [
            ("{{ ids[0] }}", json!("a")),
            ("{{ ids[1] }}-{{ ids[0] }}", json!("b-a")),
            ("{{ t.tasks[0].id }}", json!("x")),
            ("{{ ids[2] }}", json!(null)),
            ("{{ t.nothing.id }}", json!(null)),
        ];
        for (template, want) in rows {
            assert_eq!(render(&json!(template), &vars), want, "{template}");
        }
        assert_eq!((variable("ids[0]"), variable("t.tasks[0].id"), variable("plain")), ("ids", "t", "plain"));
        assert_eq!(
            path("t.tasks[0].id"),
            Some(vec![Step::Field("tasks".into()), Step::Index(0), Step::Field("id".into())])
        );
        assert_eq!((path("ids[x]"), path("a..b"), path("ids[1")), (None, None, None));
        assert_eq!(all_placeholders(&json!({"a": "{{x}} {{ y }}", "b": ["{{z}}"]})), ["x", "y", "z"]);
    }
}

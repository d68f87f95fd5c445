//! `{{ name }}` in scenario values: a string that is exactly one placeholder takes the variable's
//! value (any JSON type); placeholders inside longer strings are replaced by the value as text.

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

/// The value of a variable; `$randomId` is a fresh Meteor id each time.
fn lookup(name: &str, vars: &Vars) -> Value {
    if let Some(text) = literal(name) {
        return Value::String(text.to_string());
    }
    if name == "$randomId" {
        return Value::String(ddp::id::random_id());
    }
    vars.get(name).cloned().unwrap_or(Value::Null)
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
        assert_eq!(all_placeholders(&json!({"a": "{{x}} {{ y }}", "b": ["{{z}}"]})), ["x", "y", "z"]);
    }
}

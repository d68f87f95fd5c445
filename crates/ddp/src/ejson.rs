//! EJSON: JSON plus tagged objects for dates, binary, special numbers, regular expressions and
//! user types. A tagged object has exactly its tag keys (`{"$date": 1700000000000}`); a plain object
//! that would look like one travels inside `{"$escape": {...}}`, which makes the keys one level down
//! literal. Encoding what was decoded gives the same JSON back (canonical EJSON round-trips exactly).

use base64::Engine as _;
use serde_json::{Map, Number, Value};

/// An EJSON value. Objects keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ejson {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Ejson>),
    Object(Vec<(String, Ejson)>),
    /// `{"$date": ms}`: milliseconds since the Unix epoch, as sent (Meteor sends integers).
    Date(Number),
    /// `{"$binary": base64}`.
    Binary(Vec<u8>),
    /// `{"$InfNaN": 1 | -1 | 0}`: +Infinity, -Infinity, NaN.
    InfNaN(i8),
    /// `{"$regexp": source, "$flags": flags}`.
    RegExp {
        source: String,
        flags: String,
    },
    /// `{"$type": name, "$value": json}`: a user-defined type (`oid`, `Decimal`, ...), kept as sent.
    Custom {
        type_name: String,
        value: Value,
    },
}

/// Why a JSON value is not valid EJSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EjsonError(pub String);

impl std::fmt::Display for EjsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid EJSON: {}", self.0)
    }
}

impl std::error::Error for EjsonError {}

/// Which tag a JSON object carries, by Meteor's rule: the tag's keys and no others.
fn tag_of(obj: &Map<String, Value>) -> Option<&'static str> {
    let has = |k: &str| obj.contains_key(k);
    match obj.len() {
        1 if has("$date") => Some("$date"),
        1 if has("$binary") => Some("$binary"),
        1 if has("$InfNaN") => Some("$InfNaN"),
        1 if has("$escape") => Some("$escape"),
        2 if has("$regexp") && has("$flags") => Some("$regexp"),
        2 if has("$type") && has("$value") => Some("$type"),
        _ => None,
    }
}

impl Ejson {
    /// Decodes EJSON from its JSON form.
    pub fn from_json(v: &Value) -> Result<Ejson, EjsonError> {
        Ok(match v {
            Value::Null => Ejson::Null,
            Value::Bool(b) => Ejson::Bool(*b),
            Value::Number(n) => Ejson::Number(n.clone()),
            Value::String(s) => Ejson::String(s.clone()),
            Value::Array(items) => Ejson::Array(items.iter().map(Ejson::from_json).collect::<Result<_, _>>()?),
            Value::Object(obj) => match tag_of(obj) {
                None => Ejson::Object(decode_members(obj)?),
                Some("$date") => match &obj["$date"] {
                    Value::Number(n) => Ejson::Date(n.clone()),
                    other => return Err(EjsonError(format!("$date must be a number, not {other}"))),
                },
                Some("$binary") => {
                    let text = obj["$binary"].as_str().ok_or_else(|| EjsonError("$binary must be a string".into()))?;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_err(|e| EjsonError(format!("$binary is not base64: {e}")))?;
                    Ejson::Binary(bytes)
                }
                Some("$InfNaN") => match obj["$InfNaN"].as_i64() {
                    Some(s @ (-1..=1)) => Ejson::InfNaN(s as i8),
                    _ => return Err(EjsonError("$InfNaN must be 1, -1 or 0".into())),
                },
                Some("$escape") => match &obj["$escape"] {
                    Value::Object(inner) => Ejson::Object(decode_members(inner)?),
                    _ => return Err(EjsonError("$escape must hold an object".into())),
                },
                Some("$regexp") => match (&obj["$regexp"], &obj["$flags"]) {
                    (Value::String(source), Value::String(flags)) => {
                        Ejson::RegExp { source: source.clone(), flags: flags.clone() }
                    }
                    _ => return Err(EjsonError("$regexp and $flags must be strings".into())),
                },
                Some(_) => match &obj["$type"] {
                    Value::String(name) => Ejson::Custom { type_name: name.clone(), value: obj["$value"].clone() },
                    _ => return Err(EjsonError("$type must be a string".into())),
                },
            },
        })
    }

    /// Encodes to the JSON form, escaping plain objects that would read as tags.
    pub fn to_json(&self) -> Value {
        match self {
            Ejson::Null => Value::Null,
            Ejson::Bool(b) => Value::Bool(*b),
            Ejson::Number(n) => Value::Number(n.clone()),
            Ejson::String(s) => Value::String(s.clone()),
            Ejson::Array(items) => Value::Array(items.iter().map(Ejson::to_json).collect()),
            Ejson::Object(members) => {
                let obj: Map<String, Value> = members.iter().map(|(k, v)| (k.clone(), v.to_json())).collect();
                if tag_of(&obj).is_some() {
                    tagged([("$escape", Value::Object(obj))])
                } else {
                    Value::Object(obj)
                }
            }
            Ejson::Date(ms) => tagged([("$date", Value::Number(ms.clone()))]),
            Ejson::Binary(bytes) => {
                tagged([("$binary", Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)))])
            }
            Ejson::InfNaN(sign) => tagged([("$InfNaN", Value::from(*sign))]),
            Ejson::RegExp { source, flags } => {
                tagged([("$regexp", Value::String(source.clone())), ("$flags", Value::String(flags.clone()))])
            }
            Ejson::Custom { type_name, value } => {
                tagged([("$type", Value::String(type_name.clone())), ("$value", value.clone())])
            }
        }
    }

    /// A date from milliseconds since the epoch.
    pub fn date_ms(ms: i64) -> Ejson {
        Ejson::Date(Number::from(ms))
    }

    /// The milliseconds of a date, if this is one.
    pub fn as_date_ms(&self) -> Option<f64> {
        match self {
            Ejson::Date(n) => n.as_f64(),
            _ => None,
        }
    }
}

fn decode_members(obj: &Map<String, Value>) -> Result<Vec<(String, Ejson)>, EjsonError> {
    obj.iter().map(|(k, v)| Ok((k.clone(), Ejson::from_json(v)?))).collect()
}

fn tagged<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// Milliseconds since the epoch of an EJSON date in JSON form (`{"$date": ms}`), if it is one.
pub fn json_date_ms(v: &Value) -> Option<f64> {
    match v {
        Value::Object(obj) if tag_of(obj) == Some("$date") => obj["$date"].as_f64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_ejson_round_trips_exactly() {
        // Each row is canonical EJSON: decoding then encoding must give it back byte for byte.
        let rows = [
            json!({"_id": "abc", "createdAt": {"$date": 1700000000123u64}, "n": 1.5, "ok": true, "none": null}),
            json!({"blob": {"$binary": "AAEC/w=="}}),
            json!([{"$InfNaN": 1}, {"$InfNaN": -1}, {"$InfNaN": 0}]),
            json!({"re": {"$regexp": "^a.*b$", "$flags": "gi"}}),
            json!({"oid": {"$type": "oid", "$value": "5f1d7f8e9b1e8b3a4c2d1e0f"}}),
            // A plain object that looks like a tag travels escaped, values inside still decoded.
            json!({"$escape": {"$date": {"$date": 5}}}),
            json!({"$escape": {"$type": "x", "$value": [1, 2]}}),
            // Keys that start with $ but match no tag need no escape.
            json!({"$set": {"a": 1}, "$inc": 2}),
            json!({"z": 1, "a": 2, "m": [3, {"y": 4, "b": 5}]}),
        ];
        for row in rows {
            let decoded = Ejson::from_json(&row).unwrap();
            assert_eq!(decoded.to_json(), row);
            assert_eq!(serde_json::to_string(&decoded.to_json()).unwrap(), serde_json::to_string(&row).unwrap());
        }
    }

    #[test]
    fn values_round_trip_through_json() {
        let value = Ejson::Object(vec![
            ("when".into(), Ejson::date_ms(1_700_000_000_000)),
            ("bytes".into(), Ejson::Binary(vec![0, 1, 2, 255])),
            ("inf".into(), Ejson::InfNaN(1)),
            ("re".into(), Ejson::RegExp { source: "x+".into(), flags: "i".into() }),
            ("tricky".into(), Ejson::Object(vec![("$binary".into(), Ejson::String("not really".into()))])),
        ]);
        let text = serde_json::to_string(&value.to_json()).unwrap();
        let back = Ejson::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, value);
        assert!(text.contains(r#""tricky":{"$escape":{"$binary":"not really"}}"#), "{text}");
        assert_eq!(back.to_json()["when"], json!({"$date": 1_700_000_000_000u64}));
    }

    #[test]
    fn invalid_tags_are_errors() {
        // Each row: malformed EJSON, words of the error.
        let rows = [
            (json!({"$date": "yesterday"}), "$date must be a number"),
            (json!({"$binary": "@@@"}), "not base64"),
            (json!({"$InfNaN": 7}), "$InfNaN"),
            (json!({"$escape": 3}), "$escape"),
            (json!({"$regexp": 1, "$flags": ""}), "$regexp"),
            (json!({"$type": 5, "$value": 1}), "$type"),
            (json!([1, {"deep": {"$date": null}}]), "$date"),
        ];
        for (value, words) in rows {
            let err = Ejson::from_json(&value).unwrap_err();
            assert!(err.to_string().contains(words), "{value}: {err}");
        }
    }

    #[test]
    fn dates_in_json_form() {
        assert_eq!(json_date_ms(&json!({"$date": 12})), Some(12.0));
        assert_eq!(json_date_ms(&json!({"$date": 12, "x": 1})), None);
        assert_eq!(json_date_ms(&json!(12)), None);
        assert_eq!(Ejson::date_ms(5).as_date_ms(), Some(5.0));
    }
}

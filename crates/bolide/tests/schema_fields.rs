//! Every field of both result documents is described in its JSON Schema (what it is, with its
//! unit), so that people reading a document from another tool need nothing else.

fn undescribed(schema: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    match schema {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::Object(props)) = map.get("properties") {
                for (name, p) in props {
                    if p.get("description").and_then(|d| d.as_str()).is_none_or(|d| d.trim().is_empty()) {
                        out.push(format!("{path}/{name}"));
                    }
                }
            }
            for (k, v) in map {
                undescribed(v, &format!("{path}/{k}"), out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                undescribed(v, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_field_of_both_documents_is_described() {
    for file in ["envelope.schema.json", "result.schema.json", "ddp-result.schema.json"] {
        let path = format!("{}/../../schema/{file}", env!("CARGO_MANIFEST_DIR"));
        let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut missing = Vec::new();
        undescribed(&schema, "", &mut missing);
        assert!(missing.is_empty(), "{file}: {} fields without a description: {missing:?}", missing.len());
    }
}

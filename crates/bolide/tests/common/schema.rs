//! The published JSON Schemas of the result documents (`schema/` in the repository), as
//! validators: each refers to `envelope.schema.json` (what every document carries), read from the
//! same folder, never fetched.

/// The schema file `file` as a validator, its references read from `schema/`.
pub fn validator(file: &str) -> jsonschema::Validator {
    let schema: serde_json::Value = serde_json::from_str(&read(file)).unwrap();
    jsonschema::options().with_retriever(SchemaFolder).build(&schema).unwrap()
}

fn read(file: &str) -> String {
    let path = format!("{}/../../schema/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Answers a schema's reference to `https://bolide.invalid/schema/NAME` with the file `NAME`.
struct SchemaFolder;

impl jsonschema::Retrieve for SchemaFolder {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        let name = uri
            .as_str()
            .strip_prefix("https://bolide.invalid/schema/")
            .filter(|n| !n.contains('/'))
            .ok_or_else(|| format!("{uri} is not one of bolide's schemas"))?;
        Ok(serde_json::from_str(&read(name))?)
    }
}

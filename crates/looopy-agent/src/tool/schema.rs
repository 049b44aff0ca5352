//! Argument schemas: generated from the Rust type with schemars, and checked with the
//! jsonschema crate before a tool runs, so the model gets a precise error it can fix.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The JSON Schema of a tool's arguments, in the plain shape providers accept: an object
/// schema with subschemas inlined and without `$schema`/`title` noise.
pub fn schema_for_args<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        map.remove("title");
        if !map.contains_key("type") {
            map.insert("type".into(), Value::from("object"));
        }
        if map.get("type") == Some(&Value::from("object")) && !map.contains_key("properties") {
            map.insert("properties".into(), Value::Object(Default::default()));
        }
    }
    schema
}

/// A compiled argument schema. A schema that does not compile (only possible for
/// hand-written [`DynTool`](super::DynTool) schemas) validates nothing; the tool's own
/// deserialization still rejects bad arguments.
pub struct ArgumentValidator {
    validator: Option<jsonschema::Validator>,
}

impl std::fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentValidator")
            .field("compiled", &self.validator.is_some())
            .finish()
    }
}

/// At most this many schema violations are listed in one error message.
const MAX_REPORTED_ERRORS: usize = 5;

impl ArgumentValidator {
    /// Compiles `schema`.
    pub fn new(schema: &Value) -> Self {
        let validator = match jsonschema::validator_for(schema) {
            Ok(v) => Some(v),
            Err(error) => {
                tracing::warn!(%error, "tool schema does not compile; arguments not validated");
                None
            }
        };
        Self { validator }
    }

    /// `Ok` when `args` satisfies the schema; otherwise a readable list of what is wrong,
    /// e.g. `"expression" is a required property`.
    pub fn validate(&self, args: &Value) -> Result<(), String> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let mut problems = Vec::new();
        let mut total = 0usize;
        for error in validator.iter_errors(args) {
            total += 1;
            if problems.len() < MAX_REPORTED_ERRORS {
                let path = error.instance_path.to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                problems.push(format!("at {path}: {}", error.masked()));
            }
        }
        if total == 0 {
            return Ok(());
        }
        if total > problems.len() {
            problems.push(format!("and {} more", total - problems.len()));
        }
        Err(problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// The query.
        query: String,
        limit: Option<u32>,
    }

    #[derive(Deserialize, JsonSchema)]
    struct NoArgs {}

    #[test]
    fn schema_is_a_plain_object_schema() {
        let schema = schema_for_args::<Args>();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("$schema").is_none());
        assert!(schema.get("title").is_none());
        assert_eq!(schema["required"], json!(["query"]));
        assert_eq!(schema["properties"]["query"]["description"], "The query.");
        let empty = schema_for_args::<NoArgs>();
        assert_eq!(empty["type"], "object");
        assert!(empty["properties"].is_object());
    }

    #[test]
    fn validation_explains_what_is_wrong() {
        let v = ArgumentValidator::new(&schema_for_args::<Args>());
        assert!(v.validate(&json!({"query": "x"})).is_ok());
        assert!(v.validate(&json!({"query": "x", "limit": 3})).is_ok());
        let missing = v.validate(&json!({})).unwrap_err();
        assert!(missing.contains("query"), "{missing}");
        let wrong = v.validate(&json!({"query": 5, "limit": -1})).unwrap_err();
        assert!(
            wrong.contains("/query") && wrong.contains("/limit"),
            "{wrong}"
        );
        assert!(v.validate(&json!("not an object")).is_err());
    }

    #[test]
    fn a_broken_schema_validates_nothing() {
        let v = ArgumentValidator::new(&json!({"type": 12}));
        assert!(v.validate(&json!({"anything": true})).is_ok());
    }
}

//! Argument schemas: generated from the Rust type with schemars, compiled with the
//! jsonschema crate when a tool is registered (a hand-written schema that does not compile
//! is refused there), and checked before a tool runs, so the model gets a precise error it
//! can fix.

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

/// A JSON Schema that does not compile. Only hand-written schemas can be broken — a
/// [`DynTool`](super::DynTool)'s parameters, an input request's schema — because schemars
/// always generates valid ones. A broken schema is refused where it is given (a tool at
/// registration, see [`ToolRegistry::try_add_dyn`](super::ToolRegistry::try_add_dyn)),
/// never turned into a validator that accepts everything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct SchemaError {
    tool: Option<String>,
    reason: String,
}

impl SchemaError {
    /// The tool whose argument schema this is, when it is one.
    pub fn tool(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// What the JSON Schema compiler said.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The same error, attributed to the tool `name`.
    pub(crate) fn for_tool(mut self, name: &str) -> Self {
        self.tool = Some(name.to_string());
        self
    }

    fn describe(&self) -> String {
        match &self.tool {
            Some(tool) => format!(
                "tool {tool:?}: its argument schema is not a valid JSON Schema: {}",
                self.reason
            ),
            None => format!("not a valid JSON Schema: {}", self.reason),
        }
    }
}

/// A compiled argument schema: checks arguments before a tool runs.
pub struct ArgumentValidator {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentValidator").finish_non_exhaustive()
    }
}

/// At most this many schema violations are listed in one error message.
const MAX_REPORTED_ERRORS: usize = 5;

impl ArgumentValidator {
    /// Compiles `schema`; an invalid JSON Schema (`{"type": 12}`) is an error.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        let validator = jsonschema::validator_for(schema).map_err(|error| SchemaError {
            tool: None,
            reason: error.to_string(),
        })?;
        Ok(Self { validator })
    }

    /// `Ok` when `args` satisfies the schema; otherwise a readable list of what is wrong,
    /// e.g. `"expression" is a required property`.
    pub fn validate(&self, args: &Value) -> Result<(), String> {
        let validator = &self.validator;
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
        let v = ArgumentValidator::new(&schema_for_args::<Args>()).unwrap();
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
    fn a_broken_schema_is_an_error_not_a_validator() {
        for broken in [
            json!({"type": 12}),
            json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
            json!({"type": "object", "required": "a"}),
        ] {
            let error = ArgumentValidator::new(&broken).unwrap_err();
            assert_eq!(error.tool(), None);
            assert!(!error.reason().is_empty());
            assert!(
                error.to_string().starts_with("not a valid JSON Schema: "),
                "{error}"
            );
            let named = error.for_tool("upper");
            assert_eq!(named.tool(), Some("upper"));
            assert!(named.to_string().starts_with("tool \"upper\": "), "{named}");
        }
    }
}

//! The set of tools an agent offers, by name, with their compiled argument validators.

use std::collections::HashMap;
use std::sync::Arc;

use looopy_llm::ToolDefinition;

use super::dynamic::TypedTool;
use super::{ArgumentValidator, AskUser, Calculator, CurrentTime, DynTool, IntoDynTool, Tool};

/// One registered tool: the tool and its compiled argument schema.
#[derive(Clone)]
pub(crate) struct RegisteredTool {
    pub(crate) tool: Arc<dyn DynTool>,
    pub(crate) validator: Arc<ArgumentValidator>,
}

/// Tools by name, in the order they were added (the order the model sees them).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools: `calculator`, `current_time` and `ask_user`.
    pub fn builtin() -> Self {
        Self::new().with(Calculator).with(CurrentTime).with(AskUser)
    }

    /// Adds a typed tool, replacing any tool of the same name.
    pub fn add<T: Tool>(&mut self, tool: T) -> &mut Self {
        self.add_dyn(Arc::new(TypedTool::new(tool)))
    }

    /// Adds a typed tool (builder style).
    pub fn with<T: Tool>(mut self, tool: T) -> Self {
        self.add(tool);
        self
    }

    /// Adds any kind of tool (typed, [`tool_fn`](super::tool_fn), `#[tool]`, or type-erased),
    /// replacing any tool of the same name.
    pub fn add_tool(&mut self, tool: impl IntoDynTool) -> &mut Self {
        self.add_dyn(tool.into_dyn_tool())
    }

    /// Adds any kind of tool (builder style).
    pub fn with_tool(mut self, tool: impl IntoDynTool) -> Self {
        self.add_tool(tool);
        self
    }

    /// Adds a type-erased tool, replacing any tool of the same name.
    pub fn add_dyn(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        let validator = Arc::new(ArgumentValidator::new(&tool.parameters()));
        let name = tool.name().to_string();
        let entry = RegisteredTool { tool, validator };
        match self.by_name.get(&name) {
            Some(&i) => self.tools[i] = entry,
            None => {
                self.by_name.insert(name, self.tools.len());
                self.tools.push(entry);
            }
        }
        self
    }

    /// The registered tools, in order, type-erased.
    pub fn entries(&self) -> impl Iterator<Item = Arc<dyn DynTool>> + '_ {
        self.tools.iter().map(|e| Arc::clone(&e.tool))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.entry(name).map(|e| &e.tool)
    }

    pub(crate) fn entry(&self, name: &str) -> Option<&RegisteredTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Tool names in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|e| e.tool.name())
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What the model is told about each tool (name, description, argument schema).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|e| ToolDefinition {
                name: e.tool.name().to_string(),
                description: e.tool.description(),
                parameters: e.tool.parameters(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_has_three_tools_with_object_schemas() {
        let reg = ToolRegistry::builtin();
        assert_eq!(
            reg.names().collect::<Vec<_>>(),
            ["calculator", "current_time", "ask_user"]
        );
        for def in reg.definitions() {
            assert_eq!(def.parameters["type"], "object", "{}", def.name);
            assert!(!def.description.is_empty());
        }
        assert!(reg.get("calculator").is_some());
        assert!(reg.get("nope").is_none());
    }

    /// A tool defined at run time, with a hand-written schema.
    struct Upper;

    impl DynTool for Upper {
        fn name(&self) -> &str {
            "upper"
        }
        fn description(&self) -> String {
            "Upper-cases text.".into()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })
        }
        fn call_json<'a>(
            &'a self,
            args: serde_json::Value,
            _ctx: crate::tool::ToolContext,
        ) -> crate::tool::ToolFuture<'a> {
            Box::pin(async move {
                let text = args["text"].as_str().unwrap_or_default();
                Ok(serde_json::Value::from(text.to_uppercase()))
            })
        }
    }

    #[tokio::test]
    async fn dynamic_tools_are_validated_and_called() {
        let mut reg = ToolRegistry::new();
        reg.add_dyn(Arc::new(Upper));
        let entry = reg.entry("upper").unwrap();
        assert!(entry.validator.validate(&serde_json::json!({})).is_err());
        assert!(
            entry
                .validator
                .validate(&serde_json::json!({"text": "a"}))
                .is_ok()
        );
        let out = entry
            .tool
            .call_json(
                serde_json::json!({"text": "abc"}),
                crate::tool::ToolContext::new("c"),
            )
            .await;
        assert_eq!(out, Ok(serde_json::Value::from("ABC")));
        assert_eq!(reg.definitions()[0].parameters["required"][0], "text");
    }

    #[tokio::test]
    async fn typed_tools_map_their_failures() {
        let reg = ToolRegistry::builtin();
        let calc = reg.get("calculator").unwrap();
        let ctx = || crate::tool::ToolContext::new("c");
        let ok = calc
            .call_json(serde_json::json!({"expression": "6*7"}), ctx())
            .await;
        assert_eq!(ok, Ok(serde_json::json!(42)));
        let err = calc
            .call_json(serde_json::json!({"expression": "1/0"}), ctx())
            .await;
        assert_eq!(
            err,
            Err(crate::tool::ToolFailure::failed("division by zero"))
        );
        let bad = calc.call_json(serde_json::json!({"nope": 1}), ctx()).await;
        assert!(matches!(
            bad,
            Err(crate::tool::ToolFailure::InvalidArguments(_))
        ));
        let ask = reg.get("ask_user").unwrap();
        let paused = ask
            .call_json(serde_json::json!({"question": "?"}), ctx())
            .await;
        assert!(matches!(
            paused,
            Err(crate::tool::ToolFailure::NeedsInput(_))
        ));
    }

    #[test]
    fn adding_a_tool_twice_replaces_it() {
        let mut reg = ToolRegistry::new();
        reg.add(Calculator).add(Calculator);
        assert_eq!(reg.len(), 1);
    }
}

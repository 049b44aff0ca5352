//! The set of tools an agent offers, by name, with their compiled argument validators.
//! A tool is registered only with a schema that compiles.
//!
//! Besides its own tools a registry can hold [`LiveTools`]: sets that change while the
//! agent runs (an MCP server's tools). Every read — [`definitions`](ToolRegistry::definitions)
//! for a model call, [`get`](ToolRegistry::get) for a tool call — sees them as they are
//! then, which is why the readers return owned values rather than borrows.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use looopy_llm::ToolDefinition;

use super::{
    ArgumentValidator, AskUser, Calculator, CurrentTime, DynTool, IntoDynTool, LiveTools,
    SchemaError, Tool,
};

/// One registered tool: the tool and its compiled argument schema.
#[derive(Clone)]
pub(crate) struct RegisteredTool {
    pub(crate) tool: Arc<dyn DynTool>,
    pub(crate) validator: Arc<ArgumentValidator>,
}

/// A live set as one registry sees it: all of it, or only the named tools (a sub-agent's
/// share of its parent's tools).
#[derive(Clone)]
struct LiveSource {
    tools: LiveTools,
    only: Option<Arc<HashSet<String>>>,
}

impl LiveSource {
    fn admits(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(name))
    }

    fn same_as(&self, other: &LiveSource) -> bool {
        self.tools.same_as(&other.tools) && self.only == other.only
    }
}

/// Tools by name, in the order they were added (the order the model sees them), then the
/// tools of its live sets in the order the sets were added. A name the registry already
/// has hides a live tool of the same name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<RegisteredTool>,
    by_name: HashMap<String, usize>,
    live: Vec<LiveSource>,
    /// Tools that answer calls to names nobody has, by prefix (not offered to the model):
    /// an MCP server that cannot list its tools before the user authorizes takes every
    /// `{server}__…` call.
    routes: Vec<(String, RegisteredTool)>,
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

    /// Adds a typed tool, replacing any tool of the same name. Its schema comes from
    /// schemars, which always compiles.
    pub fn add<T: Tool>(&mut self, tool: T) -> &mut Self {
        self.add_tool(tool)
    }

    /// Adds a typed tool (builder style).
    pub fn with<T: Tool>(mut self, tool: T) -> Self {
        self.add(tool);
        self
    }

    /// Adds a tool whose schema is generated (typed, [`tool_fn`](super::tool_fn),
    /// `#[tool]`), replacing any tool of the same name. A hand-written
    /// [`DynTool`] goes through [`try_add_dyn`](Self::try_add_dyn) instead.
    pub fn add_tool(&mut self, tool: impl IntoDynTool) -> &mut Self {
        let tool = tool.into_dyn_tool();
        if let Err(error) = self.try_add_dyn(tool) {
            // Not reachable with schemars' output, which is what every `IntoDynTool`
            // carries; if it ever happens the tool stays out rather than unchecked.
            tracing::error!(%error, "generated tool schema does not compile; tool not registered");
        }
        self
    }

    /// Adds a tool whose schema is generated (builder style).
    pub fn with_tool(mut self, tool: impl IntoDynTool) -> Self {
        self.add_tool(tool);
        self
    }

    /// Adds a type-erased tool, replacing any tool of the same name, once its argument
    /// schema compiles. A schema that does not is refused here, so a broken tool is found
    /// when the agent is assembled, not by the model's first call.
    pub fn try_add_dyn(&mut self, tool: Arc<dyn DynTool>) -> Result<&mut Self, SchemaError> {
        let validator = ArgumentValidator::new(&tool.parameters())
            .map_err(|error| error.for_tool(tool.name()))?;
        self.insert(RegisteredTool {
            tool,
            validator: Arc::new(validator),
        });
        Ok(self)
    }

    /// Adds a type-erased tool (builder style); see [`try_add_dyn`](Self::try_add_dyn).
    pub fn try_with_dyn(mut self, tool: Arc<dyn DynTool>) -> Result<Self, SchemaError> {
        self.try_add_dyn(tool)?;
        Ok(self)
    }

    /// Adds every tool of `other` (already checked), replacing tools of the same names,
    /// and its live sets.
    pub fn merge(&mut self, other: ToolRegistry) -> &mut Self {
        for entry in other.tools {
            self.insert(entry);
        }
        for source in other.live {
            self.add_source(source);
        }
        for (prefix, entry) in other.routes {
            self.insert_route(prefix, entry);
        }
        self
    }

    /// Routes calls to any unknown name starting with `prefix` to `tool` (which sees the
    /// name with [`ToolContext::tool_name`](super::ToolContext::tool_name)); its schema
    /// validates their arguments. Routes are not offered to the model.
    pub fn add_route(
        &mut self,
        prefix: impl Into<String>,
        tool: Arc<dyn DynTool>,
    ) -> Result<&mut Self, SchemaError> {
        let validator = Arc::new(ArgumentValidator::new(&tool.parameters())?);
        self.insert_route(prefix.into(), RegisteredTool { tool, validator });
        Ok(self)
    }

    fn insert_route(&mut self, prefix: String, entry: RegisteredTool) {
        self.routes.retain(|(p, _)| *p != prefix);
        self.routes.push((prefix, entry));
    }

    /// Adds a live set: its tools are offered as they are whenever the registry is read.
    pub fn add_live(&mut self, tools: LiveTools) -> &mut Self {
        self.add_source(LiveSource { tools, only: None });
        self
    }

    /// Adds a live set (builder style).
    pub fn with_live(mut self, tools: LiveTools) -> Self {
        self.add_live(tools);
        self
    }

    fn add_source(&mut self, source: LiveSource) {
        if !self.live.iter().any(|s| s.same_as(&source)) {
            self.live.push(source);
        }
    }

    /// The tools as they are now, live sets read, as a registry with no live sets.
    pub fn snapshot(&self) -> ToolRegistry {
        let mut out = ToolRegistry::new();
        for entry in self.resolved().iter() {
            out.insert(entry.clone());
        }
        for (prefix, entry) in &self.routes {
            out.insert_route(prefix.clone(), entry.clone());
        }
        for source in &self.live {
            for (prefix, entry) in &source.tools.current().routes {
                out.insert_route(prefix.clone(), entry.clone());
            }
        }
        out
    }

    /// Every tool as it is now: the registry's own, then each live set's not hidden by an
    /// earlier name.
    fn resolved(&self) -> Cow<'_, [RegisteredTool]> {
        if self.live.is_empty() {
            return Cow::Borrowed(&self.tools);
        }
        let mut out = self.tools.clone();
        let mut seen: HashSet<String> = self.by_name.keys().cloned().collect();
        for source in &self.live {
            let current = source.tools.current();
            for entry in &current.tools {
                let name = entry.tool.name();
                if source.admits(name) && seen.insert(name.to_owned()) {
                    out.push(entry.clone());
                }
            }
        }
        Cow::Owned(out)
    }

    fn insert(&mut self, entry: RegisteredTool) {
        let name = entry.tool.name().to_string();
        match self.by_name.get(&name) {
            Some(&i) => self.tools[i] = entry,
            None => {
                self.by_name.insert(name, self.tools.len());
                self.tools.push(entry);
            }
        }
    }

    /// The registered tools as they are now, in order, type-erased.
    pub fn entries(&self) -> impl Iterator<Item = Arc<dyn DynTool>> {
        let tools: Vec<_> = self
            .resolved()
            .iter()
            .map(|e| Arc::clone(&e.tool))
            .collect();
        tools.into_iter()
    }

    /// The tool called `name`, if there is one now.
    pub fn get(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        self.entry(name).map(|e| e.tool)
    }

    pub(crate) fn entry(&self, name: &str) -> Option<RegisteredTool> {
        if let Some(&i) = self.by_name.get(name) {
            return self.tools.get(i).cloned();
        }
        self.live
            .iter()
            .filter(|source| source.admits(name))
            .find_map(|source| {
                let current = source.tools.current();
                let i = *current.by_name.get(name)?;
                current.tools.get(i).cloned()
            })
            .or_else(|| self.route(name))
    }

    /// The route taking an unknown `name`: the registry's own, then its live sets'.
    fn route(&self, name: &str) -> Option<RegisteredTool> {
        let own = self
            .routes
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix.as_str()))
            .map(|(_, entry)| entry.clone());
        own.or_else(|| {
            self.live.iter().find_map(|source| {
                source
                    .tools
                    .current()
                    .routes
                    .iter()
                    .find(|(prefix, _)| name.starts_with(prefix.as_str()))
                    .map(|(_, entry)| entry.clone())
            })
        })
    }

    /// Tool names in order, as they are now.
    pub fn names(&self) -> impl Iterator<Item = String> {
        let names: Vec<String> = self
            .resolved()
            .iter()
            .map(|e| e.tool.name().to_string())
            .collect();
        names.into_iter()
    }

    /// How many tools there are now.
    pub fn len(&self) -> usize {
        self.resolved().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tools of this registry named in `names`, in this registry's order (a
    /// sub-agent's share of its parent's tools); names it does not hold are ignored. Live
    /// sets stay live, narrowed to those names.
    pub(crate) fn subset<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> ToolRegistry {
        let wanted: HashSet<&str> = names.into_iter().collect();
        let mut out = ToolRegistry::new();
        for entry in self.tools.iter().filter(|e| wanted.contains(e.tool.name())) {
            out.insert(entry.clone());
        }
        for source in &self.live {
            let only: HashSet<String> = wanted
                .iter()
                .filter(|name| source.admits(name))
                .map(|name| (*name).to_owned())
                .collect();
            if !only.is_empty() {
                out.add_source(LiveSource {
                    tools: source.tools.clone(),
                    only: Some(Arc::new(only)),
                });
            }
        }
        out
    }

    /// What the model is told about each tool (name, description, argument schema).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.resolved()
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
        reg.try_add_dyn(Arc::new(Upper)).unwrap();
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

    /// A hand-written tool whose schema is not a valid JSON Schema.
    struct Broken;

    impl DynTool for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn description(&self) -> String {
            "Has a schema with a typo.".into()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "strng"}}
            })
        }
        fn call_json<'a>(
            &'a self,
            _args: serde_json::Value,
            _ctx: crate::tool::ToolContext,
        ) -> crate::tool::ToolFuture<'a> {
            Box::pin(async { Ok(serde_json::Value::Null) })
        }
    }

    #[test]
    fn a_tool_whose_schema_does_not_compile_is_refused_at_registration() {
        let mut reg = ToolRegistry::builtin();
        let error = reg.try_add_dyn(Arc::new(Broken)).err().unwrap();
        assert_eq!(error.tool(), Some("broken"));
        assert!(error.reason().contains("strng"), "{error}");
        assert!(
            error
                .to_string()
                .starts_with("tool \"broken\": its argument schema is not a valid JSON Schema"),
            "{error}"
        );
        // Not registered, and nothing else changed.
        assert!(reg.get("broken").is_none());
        assert_eq!(reg.len(), 3);
        assert!(ToolRegistry::new().try_with_dyn(Arc::new(Broken)).is_err());
        // A tool with a good schema is accepted the same way.
        let reg = ToolRegistry::new().try_with_dyn(Arc::new(Upper)).unwrap();
        assert_eq!(reg.names().collect::<Vec<_>>(), ["upper"]);
    }

    #[test]
    fn merging_keeps_order_and_replaces_by_name() {
        let mut reg = ToolRegistry::new().try_with_dyn(Arc::new(Upper)).unwrap();
        reg.add(Calculator);
        reg.merge(ToolRegistry::builtin());
        assert_eq!(
            reg.names().collect::<Vec<_>>(),
            ["upper", "calculator", "current_time", "ask_user"]
        );
        let entry = reg.entry("calculator").unwrap();
        assert!(entry.validator.validate(&serde_json::json!({})).is_err());
    }
}

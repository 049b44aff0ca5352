//! Client-side tools: tools a turn's caller owns and runs itself (AG-UI frontend tools,
//! OpenAI `function` tools a client executes, the protocol's `inputType: tool-execution`).
//!
//! They are offered to the model like the agent's own tools, for one turn. When the model
//! calls one, nothing runs here: the call asks for input of type `tool-execution` (its
//! `input-required` names the call in `metadata.toolCallId` / `toolName`; `tool-start`
//! carries the arguments), the turn pauses durably like any question, and the caller's
//! answer — the tool's result — resumes it as the call's result. The definitions are kept
//! with the pause, so a turn resumed after a restart still offers them.

use std::sync::Arc;

use looopy_llm::ToolDefinition;
use looopy_protocol::event::InputType;
use serde_json::Value;

use super::{DynTool, InputRequest, SchemaError, ToolContext, ToolFuture, ToolRegistry};

/// The client-side tools of one turn, their schemas checked.
#[derive(Clone, Default)]
pub struct ClientTools {
    definitions: Vec<ToolDefinition>,
    registry: ToolRegistry,
}

impl std::fmt::Debug for ClientTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.definitions.iter().map(|d| &d.name))
            .finish()
    }
}

impl ClientTools {
    /// Checks every definition's parameter schema (it must compile; none means "no
    /// arguments"). A later definition of a name replaces an earlier one.
    pub fn new(definitions: Vec<ToolDefinition>) -> Result<Self, SchemaError> {
        let mut registry = ToolRegistry::new();
        let mut checked: Vec<ToolDefinition> = Vec::with_capacity(definitions.len());
        for mut definition in definitions {
            if definition.parameters.is_null() {
                definition.parameters = serde_json::json!({"type": "object", "properties": {}});
            }
            checked.retain(|d| d.name != definition.name);
            registry.try_add_dyn(Arc::new(ClientTool {
                definition: definition.clone(),
            }))?;
            checked.push(definition);
        }
        Ok(Self {
            definitions: checked,
            registry,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    pub fn definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// `agent`'s tools plus these, where the agent's own win a name clash (a client cannot
    /// replace a server tool).
    pub(crate) fn with_agent_tools(&self, agent: &ToolRegistry) -> ToolRegistry {
        let mut merged = self.registry.clone();
        merged.merge(agent.clone());
        merged
    }
}

/// One client-side tool: asks for its result instead of running.
struct ClientTool {
    definition: ToolDefinition,
}

impl DynTool for ClientTool {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn description(&self) -> String {
        self.definition.description.clone()
    }

    fn parameters(&self) -> Value {
        self.definition.parameters.clone()
    }

    fn call_json<'a>(&'a self, _args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match ctx.provided_input() {
                Some(result) => Ok(result.clone()),
                None => Err(ctx.require_input(
                    InputRequest::new(
                        InputType::ToolExecution,
                        format!("Run the client tool {} and send its result", self.name()),
                    )
                    .require_user(true),
                )),
            }
        })
    }

    fn metadata(&self) -> looopy_protocol::Metadata {
        let mut metadata = looopy_protocol::Metadata::new();
        metadata.insert("provider".into(), Value::from("client"));
        metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolFailure;
    use serde_json::json;

    fn def(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: format!("{name} on the client"),
            parameters,
        }
    }

    #[tokio::test]
    async fn a_client_tool_asks_for_its_result_then_returns_it() {
        let tools = ClientTools::new(vec![def(
            "get_weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )])
        .unwrap();
        let tool = tools.registry.get("get_weather").unwrap();
        assert_eq!(tool.metadata()["provider"], "client");
        match tool
            .call_json(json!({"city": "Oslo"}), ToolContext::new("c1"))
            .await
        {
            Err(ToolFailure::NeedsInput(request)) => {
                assert_eq!(request.input_type, InputType::ToolExecution);
                assert!(request.require_user);
                assert!(request.prompt.contains("get_weather"));
            }
            other => panic!("expected an input request, got {other:?}"),
        }
        let answered = ToolContext::new("c1").with_provided_input(json!("sunny"));
        assert_eq!(
            tool.call_json(json!({"city": "Oslo"}), answered)
                .await
                .unwrap(),
            json!("sunny")
        );
    }

    #[test]
    fn bad_schemas_are_refused_duplicates_replaced_and_agent_tools_win() {
        assert!(ClientTools::new(vec![def("x", json!({"type": 12}))]).is_err());
        let twice = ClientTools::new(vec![def("x", Value::Null), def("x", json!({}))]).unwrap();
        assert_eq!(twice.definitions().len(), 1);
        assert_eq!(twice.definitions()[0].parameters, json!({}));
        let tools =
            ClientTools::new(vec![def("calculator", Value::Null), def("y", Value::Null)]).unwrap();
        let merged = tools.with_agent_tools(&ToolRegistry::builtin());
        assert!(merged.get("y").is_some());
        assert!(merged.get("calculator").unwrap().metadata().is_empty());
    }
}

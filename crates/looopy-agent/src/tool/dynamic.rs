//! The object-safe form of a tool: JSON in, JSON out, boxed future. Lets the registry hold
//! tools of different types, and lets tools be defined at run time (e.g. from a config).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::{Tool, ToolContext, ToolFailure, schema_for_args};

/// The boxed future of a [`DynTool`] call.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolFailure>> + Send + 'a>>;

/// A tool with its types erased. Every [`Tool`] is one (through the registry's wrapper);
/// implement it directly for tools whose schema is only known at run time.
pub trait DynTool: Send + Sync {
    /// The name the model calls the tool by.
    fn name(&self) -> &str;
    /// What the tool does, written for the model.
    fn description(&self) -> String;
    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    /// Runs the tool with already-validated JSON arguments.
    fn call_json<'a>(&'a self, args: Value, ctx: ToolContext) -> ToolFuture<'a>;
    /// What `tool-start` says about the tool besides its name (where it comes from, e.g.
    /// `{"provider": "mcp", "server": "docs"}`). None by default.
    fn metadata(&self) -> looopy_protocol::Metadata {
        looopy_protocol::Metadata::new()
    }
}

/// Adapts a typed [`Tool`] to [`DynTool`], with its schema generated once.
pub(crate) struct TypedTool<T: Tool> {
    tool: T,
    schema: Value,
}

impl<T: Tool> TypedTool<T> {
    pub(crate) fn new(tool: T) -> Self {
        Self {
            tool,
            schema: schema_for_args::<T::Args>(),
        }
    }
}

impl<T: Tool> DynTool for TypedTool<T> {
    fn name(&self) -> &str {
        self.tool.name()
    }

    fn description(&self) -> String {
        self.tool.description()
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: T::Args = serde_json::from_value(args)
                .map_err(|e| ToolFailure::InvalidArguments(e.to_string()))?;
            let result = self.tool.call(args, ctx.clone()).await;
            into_tool_result(result, &ctx)
        })
    }
}

/// Turns what a typed tool returned into the JSON result or the [`ToolFailure`] the agent
/// acts on: an input request made through the context wins over the error's text, and a
/// `ToolFailure` error keeps its meaning.
pub(crate) fn into_tool_result<O, E>(
    result: Result<O, E>,
    ctx: &ToolContext,
) -> Result<Value, ToolFailure>
where
    O: serde::Serialize,
    E: std::fmt::Display + 'static,
{
    match result {
        Ok(output) => serde_json::to_value(output)
            .map_err(|e| ToolFailure::Failed(format!("result is not valid JSON: {e}"))),
        Err(error) => Err(match (ctx.take_auth_request(), ctx.take_input_request()) {
            (Some(request), _) => ToolFailure::NeedsAuth(Box::new(request)),
            (None, Some(request)) => ToolFailure::NeedsInput(request),
            (None, None) => match (&error as &dyn Any).downcast_ref::<ToolFailure>() {
                Some(failure) => failure.clone(),
                None => ToolFailure::Failed(error.to_string()),
            },
        }),
    }
}

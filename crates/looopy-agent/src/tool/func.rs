//! Tools from closures: [`tool_fn`] gives a tool its name once, next to the code, with the
//! arguments' type (and so the JSON Schema the model sees) inferred from the closure.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::dynamic::{TypedTool, into_tool_result};
use super::{DynTool, Tool, ToolContext, ToolFailure, ToolFuture, schema_for_args};

/// A tool made by [`tool_fn`].
pub struct FnTool<A, F> {
    name: String,
    description: String,
    schema: Value,
    f: F,
    _args: PhantomData<fn(A)>,
}

impl<A, F> std::fmt::Debug for FnTool<A, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A tool from an async closure taking the typed arguments and the [`ToolContext`].
///
/// `A` is any `Deserialize + JsonSchema` type: its schema is what the model sees and what
/// the agent validates calls against. The closure's error is shown to the model as the
/// call's error result; return a [`ToolFailure`] (e.g. from
/// [`ToolContext::require_input`]) to keep its meaning.
///
/// ```
/// use looopy_agent::tool::{ToolContext, ToolFailure, ToolRegistry, tool_fn};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Greet {
///     /// Who to greet.
///     name: String,
/// }
///
/// let greet = tool_fn("greet", "Greets someone by name.", |args: Greet, _ctx: ToolContext| async move {
///     Ok::<_, ToolFailure>(format!("Hello, {}!", args.name))
/// });
/// let tools = ToolRegistry::new().with_tool(greet);
/// assert_eq!(tools.names().collect::<Vec<_>>(), ["greet"]);
/// ```
pub fn tool_fn<A, F, Fut, O, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    f: F,
) -> FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Serialize + 'static,
    E: std::fmt::Display + 'static,
{
    FnTool {
        name: name.into(),
        description: description.into(),
        schema: schema_for_args::<A>(),
        f,
        _args: PhantomData,
    }
}

impl<A, F, Fut, O, E> DynTool for FnTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Serialize + 'static,
    E: std::fmt::Display + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        let args: A = match serde_json::from_value(args) {
            Ok(args) => args,
            Err(e) => {
                return Box::pin(async move { Err(ToolFailure::InvalidArguments(e.to_string())) });
            }
        };
        let call = (self.f)(args, ctx.clone());
        Box::pin(async move { into_tool_result(call.await, &ctx) })
    }
}

/// A tool whose argument schema is generated from its Rust types, so it always compiles:
/// a typed [`Tool`], a [`tool_fn`] closure tool, or a tool made by `#[looopy_agent::tool]`.
/// (A hand-written [`DynTool`] is registered with
/// [`ToolRegistry::try_add_dyn`](super::ToolRegistry::try_add_dyn), which checks its schema.)
///
/// Sealed: implemented only for the kinds above, which is what lets registering them be
/// infallible.
pub trait IntoDynTool: sealed::Sealed {
    /// The type-erased tool.
    fn into_dyn_tool(self) -> Arc<dyn DynTool>;
}

mod sealed {
    pub trait Sealed {}
}

impl<T: Tool> sealed::Sealed for T {}

impl<A, F> sealed::Sealed for FnTool<A, F> {}

impl<T: Tool> IntoDynTool for T {
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        Arc::new(TypedTool::new(self))
    }
}

impl<A, F> IntoDynTool for FnTool<A, F>
where
    FnTool<A, F>: DynTool + 'static,
{
    fn into_dyn_tool(self) -> Arc<dyn DynTool> {
        Arc::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolRegistry;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    struct AddArgs {
        a: i64,
        b: i64,
    }

    #[tokio::test]
    async fn a_closure_tool_has_its_name_schema_and_result() {
        let add = tool_fn(
            "add",
            "Adds two integers.",
            |args: AddArgs, _ctx: ToolContext| async move { Ok::<_, ToolFailure>(args.a + args.b) },
        );
        let tools = ToolRegistry::new().with_tool(add);
        let tool = tools.get("add").unwrap();
        assert_eq!(tool.description(), "Adds two integers.");
        let schema = tool.parameters();
        assert_eq!(schema["properties"]["a"]["type"], "integer");
        let out = tool
            .call_json(serde_json::json!({"a": 2, "b": 40}), ToolContext::new("c1"))
            .await
            .unwrap();
        assert_eq!(out, serde_json::json!(42));
        let bad = tool
            .call_json(serde_json::json!({"a": "x"}), ToolContext::new("c2"))
            .await
            .unwrap_err();
        assert!(matches!(bad, ToolFailure::InvalidArguments(_)));
    }

    #[tokio::test]
    async fn a_closure_tool_error_is_a_failure_and_require_input_pauses() {
        let fails = tool_fn(
            "fails",
            "Always fails.",
            |_: AddArgs, _ctx: ToolContext| async move { Err::<i64, _>("no luck") },
        );
        let asks = tool_fn("asks", "Asks.", |_: AddArgs, ctx: ToolContext| async move {
            Err::<i64, ToolFailure>(
                ctx.require_input(crate::tool::InputRequest::clarification("which?")),
            )
        });
        let args = serde_json::json!({"a": 1, "b": 2});
        let failure = fails
            .call_json(args.clone(), ToolContext::new("c1"))
            .await
            .unwrap_err();
        assert_eq!(failure, ToolFailure::Failed("no luck".into()));
        let paused = asks
            .call_json(args, ToolContext::new("c2"))
            .await
            .unwrap_err();
        assert!(matches!(paused, ToolFailure::NeedsInput(r) if r.prompt == "which?"));
    }
}

//! Tools the model can call.
//!
//! A tool is a typed Rust value implementing [`Tool`]: its arguments are a `Deserialize +
//! JsonSchema` type, so the JSON Schema the model sees and the validation the agent applies
//! come from the same definition. The agent works with tools through the object-safe
//! [`DynTool`] form, kept by name in a [`ToolRegistry`].
//!
//! A tool whose schema is known only at run time implements [`DynTool`] by hand; its
//! schema is compiled when it is registered ([`ToolRegistry::try_add_dyn`],
//! `AgentBuilder::dyn_tool`), and one that does not compile is a [`SchemaError`] there,
//! never a validator that lets every argument through.

mod artifacts;
mod builtin;
mod client;
mod context;
mod dynamic;
pub(crate) mod exec;
mod func;
mod live;
mod registry;
mod schema;
pub mod workspace;

use std::future::Future;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub(crate) use artifacts::sink::TurnArtifacts;
pub use artifacts::{
    ArtifactError, ArtifactInfo, ArtifactLimits, ArtifactSink, DatasetWriter, FileWriter,
};
pub use builtin::{AskUser, AskUserArgs, Calculator, CalculatorArgs, CurrentTime, CurrentTimeArgs};
pub use builtin::{CalcError, evaluate};
pub use client::ClientTools;
pub use context::{InputRequest, ProgressSink, ToolContext};
pub use dynamic::{DynTool, ToolFuture};
pub use func::{FnTool, IntoDynTool, tool_fn};
pub use live::{LiveTools, WeakLiveTools};
pub use looopy_auth::{AuthRequest, AuthType, Credential, OAuthClient, Secret};
/// What [`ClientTools::new`] takes: a tool's name, description and argument schema.
pub use looopy_llm::ToolDefinition;
pub use registry::ToolRegistry;
pub use schema::{ArgumentValidator, SchemaError, schema_for_args};
pub use workspace::{Workspace, WorkspaceError, WorkspaceLimits};

/// A tool the model can call, shaped like rig's `Tool`: typed arguments, typed output, and
/// an error that is shown to the model as the call's (error) result.
///
/// The future returned by [`call`](Tool::call) runs on its own tokio task, so a panic in it
/// becomes an error result instead of taking the turn down, and it is aborted when the turn
/// is cancelled or the tool times out (watch [`ToolContext::cancellation`] to stop cleanly).
///
/// ```
/// use looopy_agent::tool::{Tool, ToolContext};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct EchoArgs {
///     /// The text to send back.
///     text: String,
/// }
///
/// struct Echo;
///
/// impl Tool for Echo {
///     const NAME: &'static str = "echo";
///     type Args = EchoArgs;
///     type Output = String;
///     type Error = std::convert::Infallible;
///
///     fn description(&self) -> String {
///         "Returns its input unchanged.".into()
///     }
///
///     async fn call(&self, args: EchoArgs, _ctx: ToolContext) -> Result<String, Self::Error> {
///         Ok(args.text)
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls the tool by (`[A-Za-z0-9_-]`, as providers require).
    const NAME: &'static str;
    /// The arguments object; its JSON Schema is generated with schemars.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The result, serialized to JSON for the model (a string result is sent as is).
    type Output: Serialize;
    /// A failure, shown to the model as an error result. A [`ToolFailure`] keeps its
    /// meaning (e.g. [`ToolFailure::NeedsInput`] pauses the turn).
    type Error: std::fmt::Display + 'static;

    /// The tool's name; defaults to [`Tool::NAME`].
    fn name(&self) -> &str {
        Self::NAME
    }

    /// What the tool does, written for the model.
    fn description(&self) -> String;

    /// Runs the tool. To pause the turn until someone answers a question, return
    /// `Err(ctx.require_input(..).into())` (see [`ToolContext::require_input`]).
    fn call(
        &self,
        args: Self::Args,
        ctx: ToolContext,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// Why a tool call produced no value. Also usable as a tool's `Error` type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolFailure {
    /// The arguments did not match the tool's schema or type.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The tool needs input before it can finish; the turn pauses (`input-required`) and
    /// the call is made again with [`ToolContext::provided_input`] set once input arrives.
    #[error("waiting for input: {}", .0.prompt)]
    NeedsInput(InputRequest),
    /// The tool needs a credential; the turn pauses (`auth-required`, `waiting-auth`) and
    /// the call is made again once the user has provided it
    /// ([`ToolContext::credential`] finds it then).
    #[error("waiting for authorization: {}", .0.message)]
    NeedsAuth(Box<looopy_auth::AuthRequest>),
}

impl ToolFailure {
    /// A plain failure with a message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

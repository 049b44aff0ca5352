//! Tools that exercise the runner: one that takes time (and reports progress, and records
//! how many copies run at once), one that fails, one that panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use looopy_agent::tool::{Tool, ToolContext, ToolFailure};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
pub struct SleepArgs {
    /// How long to take, in milliseconds.
    pub ms: u64,
    /// Returned as the result.
    #[serde(default)]
    pub label: String,
}

/// Sleeps (cancellably), reporting progress half way; tracks peak concurrency.
#[derive(Default, Clone)]
pub struct Sleep {
    pub running: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
}

impl Tool for Sleep {
    const NAME: &'static str = "sleep";
    type Args = SleepArgs;
    type Output = String;
    type Error = ToolFailure;

    fn description(&self) -> String {
        "Waits for the given number of milliseconds.".into()
    }

    async fn call(&self, args: SleepArgs, ctx: ToolContext) -> Result<String, ToolFailure> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let half = Duration::from_millis(args.ms / 2);
        let result = async {
            tokio::select! {
                () = tokio::time::sleep(half) => {}
                () = ctx.cancellation().cancelled() => return Err(ToolFailure::failed("stopped")),
            }
            ctx.progress(0.5, format!("{} half way", args.label)).await;
            tokio::select! {
                () = tokio::time::sleep(half) => Ok(args.label.clone()),
                () = ctx.cancellation().cancelled() => Err(ToolFailure::failed("stopped")),
            }
        }
        .await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct NoArgs {}

/// Always fails with a message.
pub struct Fail;

impl Tool for Fail {
    const NAME: &'static str = "fail";
    type Args = NoArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Always fails.".into()
    }

    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<String, String> {
        Err("the disk is on fire".to_string())
    }
}

/// Always panics.
pub struct Panic;

impl Tool for Panic {
    const NAME: &'static str = "panic";
    type Args = NoArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Always panics.".into()
    }

    #[allow(unreachable_code, clippy::diverging_sub_expression)]
    async fn call(&self, _args: NoArgs, _ctx: ToolContext) -> Result<String, String> {
        panic!("tool bug: index out of range");
    }
}

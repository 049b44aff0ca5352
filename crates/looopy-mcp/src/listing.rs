//! Keeping a server's tools current: when the server says `notifications/tools/list_changed`
//! (or a crashed server comes back), its tools are listed again and its live tool set
//! ([`LiveTools`]) replaced, so the agent's next model call offers the new set.
//!
//! The notification is noticed twice. The transport wrapper ([`crate::watch::Watched`])
//! sets a flag as the message is read, in wire order, before anything after it (such as the result of the call
//! that changed the tools) reaches its caller; rmcp's handler, which runs on a task of its
//! own and may run late, starts a refresh for a change that no call is waiting on. A call
//! whose server announced a change before answering waits for the new list before its result
//! goes back to the model ([`McpServer::settle_tools`]), so on stdio the model's next call
//! sees the change for certain; over HTTP, where the notification may travel on another
//! stream, within one listing round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use looopy_agent::tool::{DynTool, LiveTools, ToolRegistry};
use serde_json::Value;

use crate::McpError;
use crate::server::McpServer;
use crate::tool::McpTool;

/// How long a call waits for its server's new tool list before answering anyway (the
/// change is then listed by the next call).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Listings in a row for changes announced while listing, before leaving the rest to the
/// next call or notification.
const MAX_RELISTS: usize = 3;

/// The agent tools for `listed` (a server's `tools/list` entries). A tool without a usable
/// name or whose schema does not compile is left out (logged).
pub(crate) fn registry_of(server: &Arc<McpServer>, listed: &[Value]) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in listed
        .iter()
        .filter_map(|t| McpTool::from_listing(server, t))
    {
        let tool: Arc<dyn DynTool> = Arc::new(tool);
        let name = tool.name().to_owned();
        if let Err(error) = registry.try_add_dyn(tool) {
            tracing::warn!(%error, tool = %name, "MCP tool skipped: its schema does not compile");
        }
    }
    registry
}

/// Puts the flag back if a listing is abandoned (its caller timed out), so the change is
/// listed by the next call instead of being forgotten.
struct Unsettled<'a> {
    flag: &'a AtomicBool,
    done: bool,
}

impl Drop for Unsettled<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.flag.store(true, Ordering::Release);
        }
    }
}

impl McpServer {
    /// Lists the tools and puts them in the server's live set; how many there are now.
    pub(crate) async fn refresh_tools(self: &Arc<Self>) -> Result<usize, McpError> {
        let flag = self.tools_changed_flag();
        let mut guard = Unsettled { flag, done: false };
        // Cleared before listing: a change announced from now on is listed again.
        flag.store(false, Ordering::Release);
        let listed = self.list_tools().await;
        guard.done = true;
        let listed = listed.inspect_err(|_| flag.store(true, Ordering::Release))?;
        let registry = registry_of(self, &listed);
        let count = registry.len();
        if let Some(live) = self.live_tools() {
            live.replace(registry);
        }
        Ok(count)
    }

    /// If the server announced a change to its tools, lists them again (after any listing
    /// already under way), so what the agent offers next is the server's new set. Waits at
    /// most [`SETTLE_TIMEOUT`]; never fails (a failed listing is logged, and repeated by the
    /// next call).
    pub(crate) async fn settle_tools(self: &Arc<Self>) {
        let settle = async {
            let _one_at_a_time = self.refreshing.lock().await;
            for _ in 0..MAX_RELISTS {
                if !self.tools_changed_flag().load(Ordering::Acquire) {
                    return;
                }
                match self.refresh_tools().await {
                    Ok(count) => {
                        tracing::info!(server = %self.name(), tools = count, "MCP server's tools changed; listed again");
                    }
                    Err(error) => {
                        tracing::warn!(%error, server = %self.name(), "MCP server's tools changed but could not be listed; the old list stays");
                        return;
                    }
                }
            }
        };
        if tokio::time::timeout(SETTLE_TIMEOUT, settle).await.is_err() {
            tracing::warn!(server = %self.name(), "listing the MCP server's changed tools is slow; answering with the old list");
        }
    }

    /// The server's tools follow `live` from now on (it is refreshed when they change), and
    /// `live` keeps the server: a server whose tools are all gone can still add some.
    pub(crate) fn follow(self: &Arc<Self>, live: &LiveTools) {
        *crate::server::lock(&self.live) = live.downgrade();
        live.keep_alive(Arc::clone(self) as _);
    }

    pub(crate) fn live_tools(&self) -> Option<LiveTools> {
        crate::server::lock(&self.live).upgrade()
    }
}

//! Tool sets that change while an agent runs.
//!
//! An agent's [`ToolRegistry`] is assembled once, but some tools come and go: an MCP
//! server that says `tools/list_changed` adds and removes tools while turns run. Rebuilding
//! the agent for that would drop its running turns, so instead a registry can hold
//! [`LiveTools`] handles besides its own tools. The registry resolves them whenever it is
//! read — the definitions of every model call, the lookup of every tool call — so a change
//! reaches the next model call, and a tool that is gone is an unknown tool from then on.
//!
//! The handle is a shared, replaceable snapshot (`RwLock<Arc<ToolRegistry>>`): readers take
//! the current `Arc` and never wait for a writer building the next set.

use std::any::Any;
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::ToolRegistry;

/// A replaceable set of tools, shared by every registry (and agent) it was added to with
/// [`ToolRegistry::add_live`]. Cloning it clones the handle, not the tools.
///
/// ```
/// use looopy_agent::tool::{Calculator, CurrentTime, LiveTools, ToolRegistry};
///
/// let live = LiveTools::new(ToolRegistry::new().with(Calculator));
/// let registry = ToolRegistry::new().with_live(live.clone());
/// assert!(registry.get("calculator").is_some());
/// live.replace(ToolRegistry::new().with(CurrentTime));
/// assert!(registry.get("calculator").is_none());
/// assert!(registry.get("current_time").is_some());
/// ```
#[derive(Clone, Default)]
pub struct LiveTools {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    tools: RwLock<Arc<ToolRegistry>>,
    /// What updates the set, kept as long as the set is (see [`LiveTools::keep_alive`]).
    owner: Mutex<Option<Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for LiveTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveTools").field(&self.current()).finish()
    }
}

impl LiveTools {
    /// A live set holding `tools` for now.
    pub fn new(tools: ToolRegistry) -> Self {
        let live = Self::default();
        live.replace(tools);
        live
    }

    /// Replaces the whole set. `tools` is resolved first (its own live sets are read now),
    /// so a live set never refers to another and can never refer to itself.
    pub fn replace(&self, tools: ToolRegistry) {
        let tools = Arc::new(tools.snapshot());
        // A writer that panicked left a whole `Arc` behind: the value is still consistent.
        *self
            .inner
            .tools
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tools;
    }

    /// The tools as they are now.
    pub fn current(&self) -> Arc<ToolRegistry> {
        Arc::clone(
            &self
                .inner
                .tools
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Whether `other` is a handle to the same set.
    pub fn same_as(&self, other: &LiveTools) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Keeps `owner` — whatever updates the set, such as an MCP server connection — alive as
    /// long as the set is, even while the set is empty (a server with no tools yet can still
    /// announce some). Replaces an earlier owner. The owner should hold the set through
    /// [`downgrade`](Self::downgrade), or the two keep each other alive.
    pub fn keep_alive(&self, owner: Arc<dyn Any + Send + Sync>) {
        *self
            .inner
            .owner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(owner);
    }

    /// A handle that does not keep the set alive, for whatever updates it while the set
    /// keeps that updater alive.
    pub fn downgrade(&self) -> WeakLiveTools {
        WeakLiveTools(Arc::downgrade(&self.inner))
    }
}

/// A [`LiveTools`] handle that does not keep the set alive; see [`LiveTools::downgrade`].
#[derive(Clone, Default)]
pub struct WeakLiveTools(Weak<Inner>);

impl std::fmt::Debug for WeakLiveTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakLiveTools")
    }
}

impl WeakLiveTools {
    /// The set, unless every [`LiveTools`] handle (and so every registry holding it) is gone.
    pub fn upgrade(&self) -> Option<LiveTools> {
        self.0.upgrade().map(|inner| LiveTools { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{AskUser, Calculator, CurrentTime};

    fn names(registry: &ToolRegistry) -> Vec<String> {
        registry.names().collect()
    }

    #[test]
    fn a_registry_reads_its_live_sets_every_time() {
        let live = LiveTools::new(ToolRegistry::new().with(Calculator));
        let registry = ToolRegistry::new().with(AskUser).with_live(live.clone());
        assert_eq!(names(&registry), ["ask_user", "calculator"]);
        assert_eq!(registry.len(), 2);
        live.replace(ToolRegistry::new().with(CurrentTime));
        assert_eq!(names(&registry), ["ask_user", "current_time"]);
        let definitions: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
        assert_eq!(definitions, ["ask_user", "current_time"]);
        assert!(registry.get("calculator").is_none());
        assert!(registry.entry("current_time").is_some());
        live.replace(ToolRegistry::new());
        assert_eq!(names(&registry), ["ask_user"]);
        assert!(!registry.is_empty());
    }

    #[test]
    fn own_tools_hide_live_tools_of_the_same_name_and_earlier_sets_later_ones() {
        let first = LiveTools::new(ToolRegistry::new().with(Calculator).with(CurrentTime));
        let second = LiveTools::new(ToolRegistry::new().with(CurrentTime).with(AskUser));
        let mut registry = ToolRegistry::new().with(Calculator);
        registry
            .add_live(first.clone())
            .add_live(second)
            .add_live(first);
        assert_eq!(names(&registry), ["calculator", "current_time", "ask_user"]);
        assert_eq!(registry.len(), 3, "the same set added twice counts once");
    }

    #[test]
    fn snapshots_are_flat_and_merges_and_subsets_stay_live() {
        let live = LiveTools::new(ToolRegistry::new().with(Calculator).with(CurrentTime));
        let registry = ToolRegistry::new().with_live(live.clone());
        let snapshot = registry.snapshot();
        let mut merged = ToolRegistry::new().with(AskUser);
        merged.merge(registry.clone());
        let share = merged.subset(["calculator", "ask_user"]);
        live.replace(ToolRegistry::new().with(Calculator));
        assert_eq!(names(&snapshot), ["calculator", "current_time"]);
        assert_eq!(names(&merged), ["ask_user", "calculator"]);
        assert_eq!(names(&share), ["ask_user", "calculator"]);
        live.replace(ToolRegistry::new().with(CurrentTime));
        assert_eq!(names(&share), ["ask_user"], "a subset keeps to its names");
        // A live set holding a registry with live sets holds what they held then.
        let outer = LiveTools::new(registry);
        live.replace(ToolRegistry::new());
        assert_eq!(names(&outer.current()), ["current_time"]);
    }

    #[test]
    fn a_weak_handle_does_not_keep_the_set_alive() {
        let live = LiveTools::new(ToolRegistry::new().with(Calculator));
        let weak = live.downgrade();
        let registry = ToolRegistry::new().with_live(live);
        let upgraded = weak.upgrade().expect("the registry holds the set");
        upgraded.replace(ToolRegistry::new());
        assert!(registry.is_empty());
        drop((registry, upgraded));
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn the_owner_lives_as_long_as_the_set() {
        let owner: Arc<dyn Any + Send + Sync> = Arc::new("an MCP connection");
        let watch = Arc::downgrade(&owner);
        let live = LiveTools::default();
        live.keep_alive(owner);
        let registry = ToolRegistry::new().with_live(live);
        assert!(watch.upgrade().is_some(), "kept while the set is empty");
        drop(registry);
        assert!(watch.upgrade().is_none());
    }
}

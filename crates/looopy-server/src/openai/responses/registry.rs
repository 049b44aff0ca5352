//! What a response's requests said that the log does not keep — `model`, `instructions`,
//! `metadata`, `previous_response_id`, `background`, `tools` — and which responses were deleted.
//! Kept in memory for this process (bounded): after a restart a response still streams,
//! resumes and retrieves from the log, with `model` `looopy` and these fields empty.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

/// Responses remembered; the oldest are forgotten first.
const REMEMBERED: usize = 10_000;

/// The request fields of one response.
#[derive(Debug, Clone, Default)]
pub(crate) struct Echo {
    pub(crate) created_at: i64,
    pub(crate) model: String,
    pub(crate) instructions: Option<String>,
    pub(crate) metadata: Map<String, Value>,
    pub(crate) previous_response_id: Option<String>,
    pub(crate) background: bool,
    pub(crate) tools: Vec<Value>,
}

/// Shared by the Responses routes (an axum extension).
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    echoes: HashMap<String, Echo>,
    order: VecDeque<String>,
    deleted: HashSet<String>,
    deleted_order: VecDeque<String>,
}

impl Registry {
    pub(crate) fn remember(&self, id: &str, echo: Echo) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.echoes.insert(id.to_owned(), echo).is_none() {
            inner.order.push_back(id.to_owned());
        }
        while inner.order.len() > REMEMBERED {
            if let Some(old) = inner.order.pop_front() {
                inner.echoes.remove(&old);
            }
        }
    }

    pub(crate) fn echo(&self, id: &str) -> Option<Echo> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.echoes.get(id).cloned()
    }

    pub(crate) fn delete(&self, id: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.echoes.remove(id);
        if inner.deleted.insert(id.to_owned()) {
            inner.deleted_order.push_back(id.to_owned());
        }
        while inner.deleted_order.len() > REMEMBERED {
            if let Some(old) = inner.deleted_order.pop_front() {
                inner.deleted.remove(&old);
            }
        }
    }

    pub(crate) fn is_deleted(&self, id: &str) -> bool {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.deleted.contains(id)
    }
}

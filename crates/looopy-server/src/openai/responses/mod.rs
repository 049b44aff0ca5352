//! The Responses API: a response is the stretch of one Looopy task's log from where the
//! response started to where it settled or paused; see the [parent module](super) docs.

mod frames;
pub mod mapping;
mod registry;
pub(crate) mod request;
pub(crate) mod routes;

pub(crate) use frames::ResponseFrames;
pub use mapping::ResponseMapper;
pub(crate) use registry::{Echo, Registry};

use serde_json::{Map, Value};

/// What every event's response object repeats: set when the response is created.
#[derive(Debug, Clone)]
pub struct Header {
    pub id: String,
    /// Unix seconds.
    pub created_at: i64,
    pub model: String,
    pub instructions: Option<String>,
    pub metadata: Map<String, Value>,
    pub previous_response_id: Option<String>,
    pub background: bool,
    /// The declared `function` tools, as echoed.
    pub tools: Vec<Value>,
}

/// A response id, `resp_<taskId>_<startSeq>`: the root task whose log events make the
/// response, and the log position just before its first event (a turn's start, or the
/// answer that resumed a paused task). It carries everything needed to find the response
/// again in the log, also after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseId {
    pub task_id: String,
    pub start_seq: u64,
}

impl ResponseId {
    pub const PREFIX: &'static str = "resp_";

    /// Parses an id this server made; `None` for anything else.
    pub fn parse(id: &str) -> Option<Self> {
        let rest = id.strip_prefix(Self::PREFIX)?;
        let (task_id, seq) = rest.rsplit_once('_')?;
        if task_id.is_empty() || seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !looopy_protocol::ids::is_valid_id(task_id) {
            return None;
        }
        Some(Self {
            task_id: task_id.to_string(),
            start_seq: seq.parse().ok()?,
        })
    }
}

impl std::fmt::Display for ResponseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}_{}", Self::PREFIX, self.task_id, self.start_seq)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod id_tests {
    use super::*;

    #[test]
    fn response_ids_round_trip_and_refuse_others() {
        let id = ResponseId {
            task_id: "task-a_b".into(),
            start_seq: 17,
        };
        assert_eq!(id.to_string(), "resp_task-a_b_17");
        assert_eq!(ResponseId::parse("resp_task-a_b_17"), Some(id));
        for bad in [
            "resp_17",
            "resp__17",
            "task_1",
            "resp_t_",
            "resp_t_1x",
            "resp_t/x_1",
        ] {
            assert_eq!(ResponseId::parse(bad), None, "{bad}");
        }
    }
}

//! The Looopy event protocol: every event an agent emits, the task states and conversation
//! messages. Pure data — no I/O — so every other layer, and other programs, can depend on
//! it cheaply. The mapping to A2A lives in its own crate, `looopy-a2a`.
//!
//! ```
//! use looopy_protocol::{EventPayload, Sequencer, Stamp, event::ContentDelta};
//!
//! let seq = Sequencer::starting_after(0);
//! let stamp = Stamp::new("ctx-1", "task-1");
//! let event = stamp.stamp(&seq, EventPayload::ContentDelta(ContentDelta { delta: "Hi".into(), index: 0 }));
//! let json = serde_json::to_value(&event).unwrap();
//! assert_eq!(json["kind"], "content-delta");
//! assert_eq!(json["contextId"], "ctx-1");
//! assert_eq!(json["seq"], 1);
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod error_code;
pub mod event;
pub mod ids;
pub mod message;
pub mod schema;
mod stamp;
mod state;

pub use error_code::ErrorCode;
pub use event::{Event, EventPayload, Metadata};
pub use message::{Message, ReasoningBlock, Role, ToolCall};
pub use stamp::{Sequencer, Stamp};
pub use state::TaskState;

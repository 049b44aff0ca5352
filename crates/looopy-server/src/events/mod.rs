//! Event delivery: the [`EventRouter`] fans committed events out to subscribers, and each
//! subscriber reads an [`EventStream`] (log replay, then live) shaped by an
//! [`EventFilter`] and a [`CloseRule`].

mod filter;
mod mailbox;
mod router;
mod stream;

pub use filter::{CloseRule, EventFilter, parse_kinds};
pub use router::{EventRouter, LiveEvent, RouterStats};
pub(crate) use router::{Registration, Subscription};
#[cfg(test)]
pub(crate) use stream::REPLAY_PAGE;
pub(crate) use stream::StreamSource;
pub use stream::{EndReason, EventFrames, EventStream, StreamedEvent};

#[cfg(test)]
mod tests;

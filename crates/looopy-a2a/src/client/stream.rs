//! [`EventStream`]: a task's events as the client hands them out, with A2A's end-of-stream
//! rule applied — the stream ends after a terminal or interrupted state (or a lone
//! message), and a connection that closes before that is an error
//! ([`ClientError::StreamEnded`]), never a silent end that looks like success.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};

use super::error::ClientError;
use super::transport::{RawEvents, StreamEvent};
use crate::v1;

enum State {
    Opening(BoxFuture<'static, Result<RawEvents, ClientError>>),
    Open(RawEvents),
    Done,
}

/// The events of one task (from [`A2aClient::send_streaming`](super::A2aClient::send_streaming)
/// or [`A2aClient::subscribe`](super::A2aClient::subscribe)). The request is sent when the
/// stream is first polled. Items are `Ok` until the first error, which is the last item.
pub struct EventStream {
    state: State,
    /// A follow-up to an interrupted task: its first `task` snapshot may still show the
    /// interrupted state it is leaving, which does not end the stream.
    follow_up: bool,
    seen: usize,
    task_id: Option<String>,
    context_id: Option<String>,
    last_state: Option<v1::TaskState>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("task_id", &self.task_id)
            .field("context_id", &self.context_id)
            .field("last_state", &self.last_state)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) fn new(
        open: BoxFuture<'static, Result<RawEvents, ClientError>>,
        follow_up: bool,
    ) -> Self {
        Self {
            state: State::Opening(open),
            follow_up,
            seen: 0,
            task_id: None,
            context_id: None,
            last_state: None,
        }
    }

    /// The task the events are about, once an event named it.
    pub fn task_id(&self) -> Option<&str> {
        self.task_id.as_deref()
    }

    /// The task's context, once an event named it.
    pub fn context_id(&self) -> Option<&str> {
        self.context_id.as_deref()
    }

    /// The last state announced.
    pub fn last_state(&self) -> Option<v1::TaskState> {
        self.last_state
    }

    /// Notes what an item says about the task; whether the stream ends after it.
    fn observe(&mut self, item: &StreamEvent) -> bool {
        self.seen += 1;
        let context = match item {
            StreamEvent::Task(t) => Some(&t.context_id),
            StreamEvent::StatusUpdate(s) => Some(&s.context_id),
            StreamEvent::ArtifactUpdate(a) => Some(&a.context_id),
            StreamEvent::Message(m) => m.context_id.as_ref(),
        };
        if let Some(c) = context.filter(|c| !c.is_empty()) {
            self.context_id = Some(c.clone());
        }
        if let Some(t) = item.task_id().filter(|t| !t.is_empty()) {
            self.task_id = Some(t.to_owned());
        }
        if let Some(state) = item.state() {
            self.last_state = Some(state);
        }
        let leaving_pause = self.follow_up
            && self.seen == 1
            && matches!(item, StreamEvent::Task(t) if t.status.state.is_interrupted());
        item.ends_stream() && !leaving_pause
    }
}

impl Stream for EventStream {
    type Item = Result<StreamEvent, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Opening(open) => match open.poll_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(events)) => this.state = State::Open(events),
                    Poll::Ready(Err(e)) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                State::Open(events) => {
                    return match events.poll_next_unpin(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(Some(Ok(item))) => {
                            if this.observe(&item) {
                                // Close the connection now; the protocol says nothing follows.
                                this.state = State::Done;
                            }
                            Poll::Ready(Some(Ok(item)))
                        }
                        Poll::Ready(Some(Err(e))) => {
                            this.state = State::Done;
                            Poll::Ready(Some(Err(e)))
                        }
                        Poll::Ready(None) => {
                            this.state = State::Done;
                            Poll::Ready(Some(Err(ClientError::StreamEnded {
                                task_id: this.task_id.clone(),
                                last_state: this.last_state,
                            })))
                        }
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    fn status(state: v1::TaskState) -> StreamEvent {
        StreamEvent::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: v1::TaskStatus::new(state),
            metadata: None,
        })
    }

    fn task(state: v1::TaskState) -> StreamEvent {
        StreamEvent::Task(v1::Task {
            id: "t".into(),
            context_id: "c".into(),
            status: v1::TaskStatus::new(state),
            artifacts: None,
            history: None,
            metadata: None,
        })
    }

    fn run(
        items: Vec<Result<StreamEvent, ClientError>>,
        follow_up: bool,
    ) -> Vec<Result<StreamEvent, ClientError>> {
        let raw: RawEvents = stream::iter(items).boxed();
        let s = EventStream::new(async move { Ok(raw) }.boxed(), follow_up);
        futures::executor::block_on(s.collect())
    }

    #[test]
    fn ends_after_a_terminal_state_and_ignores_what_follows() {
        let out = run(
            vec![
                Ok(task(v1::TaskState::Submitted)),
                Ok(status(v1::TaskState::Completed)),
                Ok(status(v1::TaskState::Working)),
            ],
            false,
        );
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(Result::is_ok));
    }

    #[test]
    fn a_stream_closed_early_is_an_error_that_names_the_task() {
        let out = run(
            vec![
                Ok(task(v1::TaskState::Submitted)),
                Ok(status(v1::TaskState::Working)),
            ],
            false,
        );
        match out.last() {
            Some(Err(ClientError::StreamEnded {
                task_id,
                last_state,
            })) => {
                assert_eq!(task_id.as_deref(), Some("t"));
                assert_eq!(*last_state, Some(v1::TaskState::Working));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_follow_up_goes_past_the_snapshot_of_the_pause_it_leaves() {
        let items = || {
            vec![
                Ok(task(v1::TaskState::InputRequired)),
                Ok(status(v1::TaskState::Working)),
                Ok(status(v1::TaskState::Completed)),
            ]
        };
        assert_eq!(run(items(), true).len(), 3);
        assert_eq!(run(items(), false).len(), 1);
    }

    #[test]
    fn an_error_ends_the_stream() {
        let out = run(
            vec![
                Err(ClientError::Unsupported("x".into())),
                Ok(status(v1::TaskState::Completed)),
            ],
            false,
        );
        assert_eq!(out.len(), 1);
        let failed = EventStream::new(
            async { Err(ClientError::Unsupported("y".into())) }.boxed(),
            false,
        );
        let out: Vec<_> = futures::executor::block_on(failed.collect());
        assert_eq!(out.len(), 1);
    }
}

//! Reading what a call's answer depends on in wire order.
//!
//! rmcp hands each server notification to the client handler on a task of its own, so a
//! call's last `notifications/progress`, or the `notifications/tools/list_changed` sent
//! just before its result, can reach the handler after the result has reached the caller.
//! This transport wrapper looks at every incoming message as it is read, before the message
//! after it: progress goes to its call's channel at once, and a changed tool list raises the
//! server's flag. So when a call returns, everything the server said before answering is
//! already in its progress channel and in the flag.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::server::{Progress, ProgressRoutes, lock};

/// A transport that routes progress and notes `tools/list_changed` as it reads them.
pub(crate) struct Watched<T> {
    pub(crate) inner: T,
    pub(crate) tools_changed: Arc<AtomicBool>,
    pub(crate) progress: ProgressRoutes,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Watched<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let flag = Arc::clone(&self.tools_changed);
        let routes = Arc::clone(&self.progress);
        let next = self.inner.receive();
        async move {
            let message = next.await;
            if let Some(JsonRpcMessage::Notification(note)) = &message {
                match &note.notification {
                    ServerNotification::ToolListChangedNotification(_) => {
                        flag.store(true, Ordering::Release);
                    }
                    ServerNotification::ProgressNotification(note) => {
                        let params = &note.params;
                        let route = lock(&routes).get(&params.progress_token).cloned();
                        if let Some(route) = route {
                            // Progress is a hint: a call that reads slowly misses some; the
                            // connection never waits for it.
                            let _ = route.try_send(Progress {
                                progress: params.progress,
                                total: params.total,
                                message: params.message.clone(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

//! [`A2aGrpc`]: `lf.a2a.v1.A2AService` over an [`A2aHost`], running the very operations the
//! JSON-RPC endpoint runs ([`crate::http::ops`]): a request is converted to its v1.0 wire
//! type, checked by the same validation, served, and the answer converted back.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::FromRequestParts;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use futures::Stream;
use tonic::{Request, Response, Status};

use super::convert::ConvertError;
use super::proto::{self, a2a_service_server::A2aService};
use super::status::{from_rpc, status};
use crate::http::card::base_url;
use crate::http::ops::{self, Caller};
use crate::http::rpc::send_params_v1;
use crate::http::stream::{A2aItems, Binding, StreamItem};
use crate::http::{RpcError, list};
use crate::jsonrpc::ErrorKind;
use crate::{A2aHost, ProtocolVersion, RequestId, v1};

/// The A2A gRPC service over `host`; serve it with
/// [`proto::a2a_service_server::A2aServiceServer`] (see [`super::service()`]).
#[derive(Debug, Clone)]
pub struct A2aGrpc<H> {
    host: H,
    /// The port of the host's HTTP endpoint: large artifacts in `Task.artifacts` are links
    /// to its download route, under the host name the gRPC client used.
    http_port: Option<u16>,
}

impl<H: A2aHost> A2aGrpc<H> {
    /// The service over `host`. Artifact links use the host's address
    /// ([`A2aHost::fallback_authority`]) unless [`with_http_port`](Self::with_http_port)
    /// says where its HTTP endpoint listens.
    pub fn new(host: H) -> Self {
        Self {
            host,
            http_port: None,
        }
    }

    /// Links large artifacts to `http://<the host name the gRPC client used>:<port>`.
    pub fn with_http_port(mut self, port: u16) -> Self {
        self.http_port = Some(port);
        self
    }

    /// Who is calling, through the host's own extraction (the principal its authentication
    /// put in the request's extensions, the connection), and the request's message.
    async fn caller<T>(&self, request: Request<T>) -> Result<(Caller<H>, T), Status> {
        let (metadata, extensions, message) = request.into_parts();
        let headers = metadata.into_headers();
        check_version(&headers)?;
        let base_url = self.links_base(&headers);
        let (mut parts, ()) = axum::http::Request::new(()).into_parts();
        parts.headers = headers;
        parts.extensions = extensions;
        let who = H::Caller::from_request_parts(&mut parts, &self.host)
            .await
            .map_err(|rejection| refused(rejection.into_response().status()))?;
        let caller = Caller {
            host: self.host.clone(),
            who,
            version: ProtocolVersion::V1_0,
            id: RequestId::Null,
            base_url,
            binding: Binding::JsonRpc,
        };
        Ok((caller, message))
    }

    /// `scheme://host:port` of the HTTP endpoint, under the name the client used for gRPC.
    fn links_base(&self, headers: &HeaderMap) -> String {
        let fallback = self.host.fallback_authority();
        let Some(port) = self.http_port else {
            return format!("http://{fallback}");
        };
        let base = base_url(headers, &Uri::default(), &fallback);
        with_port(&base, port)
    }
}

/// `base` (`scheme://host[:port]`) with its port replaced.
pub(super) fn with_port(base: &str, port: u16) -> String {
    let (scheme, authority) = base.split_once("://").unwrap_or(("http", base));
    let host = match authority.rfind(':') {
        // `[::1]:8080` or `name:8080`, but not the colons inside `[::1]`.
        Some(i) if !authority[i..].contains(']') => &authority[..i],
        _ => authority,
    };
    format!("{scheme}://{host}:{port}")
}

/// The gRPC binding speaks v1.0 only (v0.3's gRPC service is another package): an absent
/// `a2a-version` means 1.0, anything but 1.x is `VERSION_NOT_SUPPORTED`.
fn check_version(headers: &HeaderMap) -> Result<(), Status> {
    let Some(value) = headers.get("a2a-version") else {
        return Ok(());
    };
    let text = value.to_str().unwrap_or("?").trim();
    match ProtocolVersion::from_header(Some(text)) {
        _ if text.is_empty() => Ok(()),
        Ok(ProtocolVersion::V1_0) => Ok(()),
        _ => Err(status(
            ErrorKind::VersionNotSupported,
            format!(
                "The requested A2A protocol version {:?} is not supported over gRPC; \
                 supported: 1.0 (v0.3 clients use JSON-RPC)",
                text.chars().take(32).collect::<String>()
            ),
        )),
    }
}

/// The host refused to say who is calling.
fn refused(http: StatusCode) -> Status {
    match http {
        StatusCode::UNAUTHORIZED => {
            Status::unauthenticated("a valid `authorization: Bearer <token>` is required")
        }
        StatusCode::FORBIDDEN => Status::permission_denied("not allowed"),
        other => Status::internal(format!("the caller could not be identified ({other})")),
    }
}

/// A request the protobuf model cannot carry into the v1.0 one.
fn invalid(e: ConvertError) -> Status {
    status(ErrorKind::InvalidParams, format!("Invalid parameters: {e}"))
}

/// A result the service cannot express in protobuf (never for what the host produces).
fn unsendable(e: ConvertError) -> Status {
    tracing::error!(error = %e, "an A2A result could not be converted to protobuf");
    status(
        ErrorKind::InternalError,
        "internal error while encoding the result",
    )
}

fn validate(call: &v1::Call) -> Result<(), Status> {
    call.validate().map_err(|e| from_rpc(e.into()))
}

fn history(length: Option<i32>) -> Option<usize> {
    length.and_then(|n| usize::try_from(n).ok())
}

fn reply<V, P>(value: Result<V, RpcError>) -> Result<Response<P>, Status>
where
    P: TryFrom<V, Error = ConvertError>,
{
    let value = value.map_err(from_rpc)?;
    P::try_from(value).map(Response::new).map_err(unsendable)
}

/// A task's stream items as gRPC messages. An item that ends the task ends the stream; a
/// stream the host ended early (the client fell behind, shutdown) ends with `UNAVAILABLE`,
/// and the client resubscribes with `SubscribeToTask` to continue.
pub struct ItemStream<H: A2aHost> {
    items: A2aItems<H>,
    done: bool,
}

impl<H: A2aHost> Stream for ItemStream<H> {
    type Item = Result<proto::StreamResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        Pin::new(&mut this.items).poll_next(cx).map(|item| {
            let out = match item? {
                StreamItem::Item(item) => proto::StreamResponse::try_from(item).map_err(unsendable),
                StreamItem::Ended(note) => Err(Status::unavailable(format!(
                    "{note}; resubscribe with SubscribeToTask to continue"
                ))),
            };
            this.done = out.is_err();
            Some(out)
        })
    }
}

#[tonic::async_trait]
impl<H: A2aHost> A2aService for A2aGrpc<H> {
    async fn send_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<proto::SendMessageResponse>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::SendMessage(request.try_into().map_err(invalid)?);
        validate(&call)?;
        let v1::Call::SendMessage(request) = call else {
            return Err(Status::internal("unreachable"));
        };
        let params = send_params_v1(request).map_err(from_rpc)?;
        reply(
            ops::send(&caller, params)
                .await
                .map(v1::SendMessageResponse::Task),
        )
    }

    type SendStreamingMessageStream = ItemStream<H>;

    async fn send_streaming_message(
        &self,
        request: Request<proto::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::SendStreamingMessage(request.try_into().map_err(invalid)?);
        validate(&call)?;
        let v1::Call::SendStreamingMessage(request) = call else {
            return Err(Status::internal("unreachable"));
        };
        let params = send_params_v1(request).map_err(from_rpc)?;
        let items = ops::send_streaming_items(&caller, params)
            .await
            .map_err(from_rpc)?;
        Ok(Response::new(ItemStream { items, done: false }))
    }

    async fn get_task(
        &self,
        request: Request<proto::GetTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::GetTask(request.into());
        validate(&call)?;
        let v1::Call::GetTask(r) = call else {
            return Err(Status::internal("unreachable"));
        };
        reply(ops::get(&caller, &r.id, history(r.history_length)).await)
    }

    async fn list_tasks(
        &self,
        request: Request<proto::ListTasksRequest>,
    ) -> Result<Response<proto::ListTasksResponse>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::ListTasks(request.try_into().map_err(invalid)?);
        validate(&call)?;
        let v1::Call::ListTasks(r) = call else {
            return Err(Status::internal("unreachable"));
        };
        reply(list::list(&caller, r).await)
    }

    async fn cancel_task(
        &self,
        request: Request<proto::CancelTaskRequest>,
    ) -> Result<Response<proto::Task>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::CancelTask(request.into());
        validate(&call)?;
        let v1::Call::CancelTask(r) = call else {
            return Err(Status::internal("unreachable"));
        };
        reply(ops::cancel(&caller, &r.id).await)
    }

    type SubscribeToTaskStream = ItemStream<H>;

    async fn subscribe_to_task(
        &self,
        request: Request<proto::SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        let (caller, request) = self.caller(request).await?;
        let call = v1::Call::SubscribeToTask(request.into());
        validate(&call)?;
        let v1::Call::SubscribeToTask(r) = call else {
            return Err(Status::internal("unreachable"));
        };
        let items = ops::subscribe_items(&caller, &r.id)
            .await
            .map_err(from_rpc)?;
        Ok(Response::new(ItemStream { items, done: false }))
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<proto::TaskPushNotificationConfig>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let (caller, request) = self.caller(request).await?;
        super::push::create(&caller, request)
            .await
            .map(Response::new)
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<proto::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<proto::TaskPushNotificationConfig>, Status> {
        let (caller, request) = self.caller(request).await?;
        super::push::get(&caller, request).await.map(Response::new)
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<proto::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<proto::ListTaskPushNotificationConfigsResponse>, Status> {
        let (caller, request) = self.caller(request).await?;
        super::push::list(&caller, request).await.map(Response::new)
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<proto::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        let (caller, request) = self.caller(request).await?;
        super::push::delete(&caller, request)
            .await
            .map(Response::new)
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<proto::GetExtendedAgentCardRequest>,
    ) -> Result<Response<proto::AgentCard>, Status> {
        self.caller(request).await?;
        Err(status(
            ErrorKind::ExtendedAgentCardNotConfigured,
            "Extended agent card not configured: the public card is complete",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_clients_host_name_with_the_http_port() {
        assert_eq!(
            with_port("http://localhost:50051", 8080),
            "http://localhost:8080"
        );
        assert_eq!(
            with_port("https://agent.example", 443),
            "https://agent.example:443"
        );
        assert_eq!(with_port("http://[::1]:7", 8), "http://[::1]:8");
        assert_eq!(with_port("http://[::1]", 8), "http://[::1]:8");
    }

    #[test]
    fn only_version_1_is_spoken() {
        let mut h = HeaderMap::new();
        assert!(check_version(&h).is_ok());
        for ok in ["1.0", "1", " 1.0 ", ""] {
            h.insert("a2a-version", ok.parse().unwrap());
            assert!(check_version(&h).is_ok(), "{ok}");
        }
        for bad in ["0.3", "2.0", "x"] {
            h.insert("a2a-version", bad.parse().unwrap());
            let s = check_version(&h).unwrap_err();
            assert_eq!(s.code(), tonic::Code::FailedPrecondition, "{bad}");
        }
    }
}

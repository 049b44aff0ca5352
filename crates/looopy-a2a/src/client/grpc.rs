//! The gRPC binding (`lf.a2a.v1.A2AService`, feature `grpc-client`): the generated tonic
//! client over a lazily connected cleartext HTTP/2 channel, requests and answers converted
//! with [`crate::grpc::convert`], the bearer token and `a2a-version` as metadata, and
//! `google.rpc.Status` errors read back into [`ClientError`] by their `ErrorInfo` reason.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

use super::card::Binding;
use super::error::{ClientError, RemoteError, kind_of_reason};
use super::transport::{Http, RawEvents, SendResponse, Transport};
use crate::grpc::proto;
use crate::grpc::proto::a2a_service_client::A2aServiceClient;
use crate::jsonrpc::ErrorKind;
use crate::{ProtocolVersion, v1};

/// A gRPC endpoint (v1.0; the v0.3 gRPC service had other messages).
#[derive(Debug)]
pub(crate) struct Grpc {
    url: String,
    client: A2aServiceClient<Channel>,
    http: Arc<Http>,
    tenant: Option<String>,
}

impl Grpc {
    pub(crate) fn new(
        http: Arc<Http>,
        url: String,
        tenant: Option<String>,
        connect_timeout: Duration,
    ) -> Result<Self, ClientError> {
        if url.starts_with("https:") {
            return Err(ClientError::Unsupported(format!(
                "gRPC over TLS ({url}): this build speaks cleartext HTTP/2 only"
            )));
        }
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|e| ClientError::InvalidUrl {
                url: url.clone(),
                reason: e.to_string(),
            })?
            .connect_timeout(connect_timeout);
        let limit = http
            .limits
            .max_response_bytes
            .max(http.limits.max_event_bytes);
        let client =
            A2aServiceClient::new(endpoint.connect_lazy()).max_decoding_message_size(limit);
        Ok(Self {
            url,
            client,
            http,
            tenant,
        })
    }

    /// A request with the bearer token, the version and the unary deadline.
    fn request<T>(&self, message: T, unary: bool) -> Request<T> {
        let mut request = Request::new(message);
        if unary {
            request.set_timeout(self.http.limits.timeout);
        }
        let metadata = request.metadata_mut();
        metadata.insert(
            "a2a-version",
            tonic::metadata::MetadataValue::from_static("1.0"),
        );
        if let Some(token) = &self.http.bearer {
            if let Ok(v) = format!("Bearer {token}").parse() {
                metadata.insert("authorization", v);
            }
        }
        request
    }

    fn tenant(&self, tenant: Option<String>) -> Option<String> {
        tenant.or_else(|| self.tenant.clone())
    }

    fn error(&self, status: &Status) -> ClientError {
        status_error(&self.url, status, self.http.limits.timeout)
    }

    fn invalid(&self, why: impl std::fmt::Display) -> ClientError {
        ClientError::InvalidResponse {
            url: self.url.clone(),
            reason: why.to_string(),
        }
    }

    /// The server stream as v1.0 items, with the idle timeout between messages.
    fn events(&self, stream: tonic::Streaming<proto::StreamResponse>) -> RawEvents {
        let url = self.url.clone();
        let idle = self.http.limits.stream_idle_timeout;
        let timeout = self.http.limits.timeout;
        futures::stream::unfold(Some(stream), move |state| {
            let url = url.clone();
            async move {
                let mut stream = state?;
                let next = match idle {
                    Some(d) => match tokio::time::timeout(d, stream.next()).await {
                        Ok(n) => n,
                        Err(_) => {
                            let e = ClientError::Timeout { url, after: d };
                            return Some((Err(e), None));
                        }
                    },
                    None => stream.next().await,
                };
                match next {
                    None => None,
                    Some(Err(status)) => Some((Err(status_error(&url, &status, timeout)), None)),
                    Some(Ok(item)) => {
                        let item = v1::StreamResponse::try_from(item).map_err(|e| {
                            ClientError::InvalidResponse {
                                url: url.clone(),
                                reason: e.to_string(),
                            }
                        });
                        Some((item, Some(stream)))
                    }
                }
            }
        })
        .boxed()
    }
}

/// A gRPC status as a client error: credentials, deadlines and unreachable servers by code,
/// A2A errors by their `ErrorInfo` reason (or, without one, by the code where §5.4 is
/// unambiguous).
fn status_error(url: &str, status: &Status, timeout: Duration) -> ClientError {
    let message = status.message().to_owned();
    let kind = crate::grpc::status::error_info(status)
        .and_then(|info| kind_of_reason(&info.reason))
        .or(match status.code() {
            Code::NotFound => Some(ErrorKind::TaskNotFound),
            Code::InvalidArgument => Some(ErrorKind::InvalidParams),
            Code::Unimplemented => Some(ErrorKind::UnsupportedOperation),
            _ => None,
        });
    match (status.code(), kind) {
        (Code::Unauthenticated, None) => ClientError::Unauthorized {
            url: url.to_owned(),
            status: 401,
            message,
        },
        (Code::PermissionDenied, None) => ClientError::Unauthorized {
            url: url.to_owned(),
            status: 403,
            message,
        },
        (Code::DeadlineExceeded, None) => ClientError::Timeout {
            url: url.to_owned(),
            after: timeout,
        },
        (Code::Unavailable, None) => ClientError::Connect {
            url: url.to_owned(),
            message,
        },
        (_, kind) => ClientError::Remote(RemoteError {
            kind,
            code: kind.map_or(ErrorKind::InternalError.code(), ErrorKind::code),
            message,
            http_status: None,
            details: Some(serde_json::json!({"grpcCode": status.code() as i32})),
        }),
    }
}

impl Transport for Grpc {
    fn binding(&self) -> Binding {
        Binding::Grpc
    }

    fn version(&self) -> ProtocolVersion {
        ProtocolVersion::V1_0
    }

    fn url(&self) -> &str {
        &self.url
    }

    fn send(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<SendResponse, ClientError>> {
        async move {
            request.tenant = self.tenant(request.tenant);
            let message =
                proto::SendMessageRequest::try_from(request).map_err(|e| self.invalid(e))?;
            let reply = self
                .client
                .clone()
                .send_message(self.request(message, true))
                .await
                .map_err(|s| self.error(&s))?;
            v1::SendMessageResponse::try_from(reply.into_inner()).map_err(|e| self.invalid(e))
        }
        .boxed()
    }

    fn send_streaming(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            request.tenant = self.tenant(request.tenant);
            let message =
                proto::SendMessageRequest::try_from(request).map_err(|e| self.invalid(e))?;
            let mut client = self.client.clone();
            let call = client.send_streaming_message(self.request(message, false));
            let stream = tokio::time::timeout(self.http.limits.timeout, call)
                .await
                .map_err(|_| ClientError::Timeout {
                    url: self.url.clone(),
                    after: self.http.limits.timeout,
                })?
                .map_err(|s| self.error(&s))?;
            Ok(self.events(stream.into_inner()))
        }
        .boxed()
    }

    fn get_task(
        &self,
        mut request: v1::GetTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            request.tenant = self.tenant(request.tenant);
            let reply = self
                .client
                .clone()
                .get_task(self.request(proto::GetTaskRequest::from(request), true))
                .await
                .map_err(|s| self.error(&s))?;
            v1::Task::try_from(reply.into_inner()).map_err(|e| self.invalid(e))
        }
        .boxed()
    }

    fn cancel_task(
        &self,
        mut request: v1::CancelTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            request.tenant = self.tenant(request.tenant);
            let reply = self
                .client
                .clone()
                .cancel_task(self.request(proto::CancelTaskRequest::from(request), true))
                .await
                .map_err(|s| self.error(&s))?;
            v1::Task::try_from(reply.into_inner()).map_err(|e| self.invalid(e))
        }
        .boxed()
    }

    fn subscribe(
        &self,
        mut request: v1::SubscribeToTaskRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            request.tenant = self.tenant(request.tenant);
            let mut client = self.client.clone();
            let call = client.subscribe_to_task(
                self.request(proto::SubscribeToTaskRequest::from(request), false),
            );
            let stream = tokio::time::timeout(self.http.limits.timeout, call)
                .await
                .map_err(|_| ClientError::Timeout {
                    url: self.url.clone(),
                    after: self.http.limits.timeout,
                })?
                .map_err(|s| self.error(&s))?;
            Ok(self.events(stream.into_inner()))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_by_reason_then_code() {
        let t = Duration::from_secs(1);
        let e = status_error(
            "u",
            &crate::grpc::status::status(ErrorKind::TaskNotCancelable, "no"),
            t,
        );
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotCancelable));
        let e = status_error("u", &Status::not_found("gone"), t);
        assert!(e.is_task_not_found());
        let e = status_error("u", &Status::unauthenticated("token"), t);
        assert!(
            matches!(e, ClientError::Unauthorized { status: 401, .. }),
            "{e}"
        );
        let e = status_error("u", &Status::unavailable("down"), t);
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
        let e = status_error("u", &Status::internal("boom"), t);
        assert_eq!(e.kind(), None);
        assert!(matches!(e, ClientError::Remote(_)));
    }
}

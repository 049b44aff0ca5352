//! The JSON-RPC binding, v1.0 (`SendMessage`, … with `A2A-Version: 1.0`) or v0.3
//! (`message/send`, … with `kind`-tagged objects), always answering in v1.0 types: v0.3
//! results go through [`crate::convert`], so callers see one model whichever the agent
//! speaks.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::card::Binding;
use super::error::{ClientError, RemoteError};
use super::transport::{Body, Http, RawEvents, SendResponse, StreamEvent, Transport};
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};
use crate::{ProtocolVersion, v1, v03};

/// A JSON-RPC endpoint speaking one protocol version.
#[derive(Debug)]
pub(crate) struct JsonRpc {
    http: Arc<Http>,
    url: String,
    version: ProtocolVersion,
    tenant: Option<String>,
    next_id: AtomicI64,
}

impl JsonRpc {
    pub(crate) fn new(
        http: Arc<Http>,
        url: String,
        version: ProtocolVersion,
        tenant: Option<String>,
    ) -> Self {
        Self {
            http,
            url,
            version,
            tenant,
            next_id: AtomicI64::new(1),
        }
    }

    fn request(&self, method: &str, params: impl Serialize) -> Result<JsonRpcRequest, ClientError> {
        let params = serde_json::to_value(params).map_err(|e| ClientError::InvalidResponse {
            url: self.url.clone(),
            reason: format!("cannot encode the request: {e}"),
        })?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        Ok(JsonRpcRequest::new(id, method, params))
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<T, ClientError> {
        let request = self.request(method, params)?;
        let builder = self.http.client.post(&self.url).json(&request);
        let body = self.http.unary(&self.url, builder, self.version).await?;
        let result = envelope(&self.url, &body)?;
        decode(&self.url, result)
    }

    async fn stream(&self, method: &str, params: impl Serialize) -> Result<RawEvents, ClientError> {
        let request = self.request(method, params)?;
        let builder = self.http.client.post(&self.url).json(&request);
        let url = self.url.clone();
        let version = self.version;
        match self.http.stream(&self.url, builder, self.version).await? {
            Ok(data) => Ok(data
                .map(move |item| item.and_then(|data| stream_item(&url, version, &data)))
                .boxed()),
            // Not a stream: an error (or, from a lenient server, one result).
            Err(body) => {
                let result = envelope(&self.url, &body)?;
                let item = item_of(&self.url, version, result)?;
                Ok(futures::stream::iter([Ok(item)]).boxed())
            }
        }
    }

    fn tenant(&self, tenant: Option<String>) -> Option<String> {
        tenant.or_else(|| self.tenant.clone())
    }
}

/// v0.3 options from v1.0 ones (`returnImmediately` is v0.3's `blocking: false`).
fn v03_params(request: v1::SendMessageRequest) -> v03::MessageSendParams {
    let configuration = request.configuration.unwrap_or_default();
    v03::MessageSendParams {
        message: request.message.into(),
        configuration: Some(v03::MessageSendConfiguration {
            accepted_output_modes: (!configuration.accepted_output_modes.is_empty())
                .then_some(configuration.accepted_output_modes),
            history_length: configuration.history_length,
            push_notification_config: None,
            blocking: Some(!configuration.return_immediately),
        }),
        metadata: request.metadata,
    }
}

impl Transport for JsonRpc {
    fn binding(&self) -> Binding {
        Binding::JsonRpc
    }

    fn version(&self) -> ProtocolVersion {
        self.version
    }

    fn url(&self) -> &str {
        &self.url
    }

    fn send(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<SendResponse, ClientError>> {
        async move {
            match self.version {
                ProtocolVersion::V0_3 => {
                    let result: v03::SendMessageResult =
                        self.call("message/send", v03_params(request)).await?;
                    Ok(match result {
                        v03::SendMessageResult::Task(t) => SendResponse::Task(t.into()),
                        v03::SendMessageResult::Message(m) => SendResponse::Message(m.into()),
                    })
                }
                _ => {
                    request.tenant = self.tenant(request.tenant);
                    self.call("SendMessage", request).await
                }
            }
        }
        .boxed()
    }

    fn send_streaming(
        &self,
        mut request: v1::SendMessageRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            match self.version {
                ProtocolVersion::V0_3 => self.stream("message/stream", v03_params(request)).await,
                _ => {
                    request.tenant = self.tenant(request.tenant);
                    self.stream("SendStreamingMessage", request).await
                }
            }
        }
        .boxed()
    }

    fn get_task(
        &self,
        mut request: v1::GetTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            match self.version {
                ProtocolVersion::V0_3 => {
                    let params = v03::TaskQueryParams {
                        id: request.id,
                        history_length: request.history_length,
                        metadata: None,
                    };
                    let task: v03::Task = self.call("tasks/get", params).await?;
                    Ok(task.into())
                }
                _ => {
                    request.tenant = self.tenant(request.tenant);
                    self.call("GetTask", request).await
                }
            }
        }
        .boxed()
    }

    fn cancel_task(
        &self,
        mut request: v1::CancelTaskRequest,
    ) -> BoxFuture<'_, Result<v1::Task, ClientError>> {
        async move {
            match self.version {
                ProtocolVersion::V0_3 => {
                    let params = v03::TaskIdParams {
                        id: request.id,
                        metadata: request.metadata,
                    };
                    let task: v03::Task = self.call("tasks/cancel", params).await?;
                    Ok(task.into())
                }
                _ => {
                    request.tenant = self.tenant(request.tenant);
                    self.call("CancelTask", request).await
                }
            }
        }
        .boxed()
    }

    fn subscribe(
        &self,
        mut request: v1::SubscribeToTaskRequest,
    ) -> BoxFuture<'_, Result<RawEvents, ClientError>> {
        async move {
            match self.version {
                ProtocolVersion::V0_3 => {
                    let params = v03::TaskIdParams {
                        id: request.id,
                        metadata: None,
                    };
                    self.stream("tasks/resubscribe", params).await
                }
                _ => {
                    request.tenant = self.tenant(request.tenant);
                    self.stream("SubscribeToTask", request).await
                }
            }
        }
        .boxed()
    }
}

/// The `result` of a JSON-RPC response body, or the error it carries. A JSON-RPC error
/// wins over the HTTP status (servers answer 413 or 408 with one); a body that is not
/// JSON-RPC is judged by its status.
pub(crate) fn envelope(url: &str, body: &Body) -> Result<Value, ClientError> {
    let parsed = serde_json::from_slice::<JsonRpcResponse<Value>>(&body.bytes);
    match parsed {
        Ok(response) => response
            .into_result()
            .map_err(|e| ClientError::Remote(RemoteError::from(e))),
        Err(e) => Err(
            http_failure(url, body).unwrap_or_else(|| ClientError::InvalidResponse {
                url: url.to_owned(),
                reason: format!("not a JSON-RPC response ({e}): {}", body.snippet()),
            }),
        ),
    }
}

/// The error for a non-2xx response that carries no A2A error, if it is one.
pub(crate) fn http_failure(url: &str, body: &Body) -> Option<ClientError> {
    if (200..300).contains(&body.status) {
        return None;
    }
    // A `{"error": {"message": …}}` body (Looopy's own errors) gives the reason.
    let message = serde_json::from_slice::<Value>(&body.bytes)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.snippet());
    Some(match body.status {
        401 | 403 => ClientError::Unauthorized {
            url: url.to_owned(),
            status: body.status,
            message,
        },
        status => ClientError::Http {
            url: url.to_owned(),
            status,
            body: message,
        },
    })
}

fn decode<T: DeserializeOwned>(url: &str, value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|e| ClientError::InvalidResponse {
        url: url.to_owned(),
        reason: format!("unexpected result: {e}"),
    })
}

/// One stream item from a `result` in the version spoken.
fn item_of(url: &str, version: ProtocolVersion, result: Value) -> Result<StreamEvent, ClientError> {
    match version {
        ProtocolVersion::V0_3 => decode::<v03::StreamResponse>(url, result).map(Into::into),
        _ => decode(url, result),
    }
}

/// One SSE `data` payload: a JSON-RPC response whose result is a stream item.
fn stream_item(
    url: &str,
    version: ProtocolVersion,
    data: &str,
) -> Result<StreamEvent, ClientError> {
    let response: JsonRpcResponse<Value> =
        serde_json::from_str(data).map_err(|e| ClientError::InvalidResponse {
            url: url.to_owned(),
            reason: format!("malformed stream event ({e})"),
        })?;
    let result = response
        .into_result()
        .map_err(|e| ClientError::Remote(RemoteError::from(e)))?;
    item_of(url, version, result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::ErrorKind;

    fn body(status: u16, text: &str) -> Body {
        Body {
            status,
            bytes: text.as_bytes().to_vec().into(),
        }
    }

    #[test]
    fn envelopes_give_results_remote_errors_or_http_errors() {
        let ok = envelope(
            "u",
            &body(200, r#"{"jsonrpc":"2.0","id":1,"result":{"a":1}}"#),
        )
        .unwrap();
        assert_eq!(ok["a"], 1);
        let e = envelope(
            "u",
            &body(
                413,
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"too big"}}"#,
            ),
        )
        .unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidParams));
        let e = envelope(
            "u",
            &body(
                401,
                r#"{"error":{"code":"unauthorized","message":"missing token"}}"#,
            ),
        )
        .unwrap_err();
        assert!(
            matches!(&e, ClientError::Unauthorized { status: 401, message, .. } if message == "missing token"),
            "{e}"
        );
        let e = envelope("u", &body(502, "<html>bad gateway</html>")).unwrap_err();
        assert!(matches!(e, ClientError::Http { status: 502, .. }));
        let e = envelope("u", &body(200, "{not json")).unwrap_err();
        assert!(matches!(e, ClientError::InvalidResponse { .. }), "{e}");
    }

    #[test]
    fn stream_items_read_both_versions_and_errors() {
        let v1_item = r#"{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}"#;
        let item = stream_item("u", ProtocolVersion::V1_0, v1_item).unwrap();
        assert_eq!(item.state(), Some(v1::TaskState::Working));
        let v03_item = r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"completed"},"final":true}}"#;
        let item = stream_item("u", ProtocolVersion::V0_3, v03_item).unwrap();
        assert_eq!(item.state(), Some(v1::TaskState::Completed));
        let err = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#;
        assert!(
            stream_item("u", ProtocolVersion::V1_0, err)
                .unwrap_err()
                .is_task_not_found()
        );
        let e = stream_item(
            "u",
            ProtocolVersion::V1_0,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        )
        .unwrap_err();
        assert!(e.to_string().contains("found 0"), "{e}");
        assert!(stream_item("u", ProtocolVersion::V1_0, "data").is_err());
    }

    #[test]
    fn v03_params_say_blocking_unless_return_immediately() {
        let mut request = v1::SendMessageRequest {
            tenant: None,
            message: v1::Message::new("m", v1::Role::User, vec![v1::Part::text("hi")]),
            configuration: None,
            metadata: None,
        };
        let p = serde_json::to_value(v03_params(request.clone())).unwrap();
        assert_eq!(p["configuration"]["blocking"], true);
        assert_eq!(p["message"]["kind"], "message");
        assert_eq!(p["message"]["role"], "user");
        request.configuration = Some(v1::SendMessageConfiguration {
            return_immediately: true,
            history_length: Some(2),
            ..Default::default()
        });
        let p = serde_json::to_value(v03_params(request)).unwrap();
        assert_eq!(p["configuration"]["blocking"], false);
        assert_eq!(p["configuration"]["historyLength"], 2);
    }
}

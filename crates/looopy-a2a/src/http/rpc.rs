//! `POST /a2a`: reads the JSON-RPC request, decides the protocol version, dispatches the
//! call to [`super::ops`] and writes the answer — a JSON-RPC response, or an SSE stream for
//! the streaming methods.
//!
//! The version is the `A2A-Version` header (or query parameter); without one, a v1.0
//! method name means v1.0 and anything else v0.3, as the specification asks. A method of
//! the other version's table is "method not found". Every failure is a JSON-RPC error
//! (streaming calls that fail before their stream starts answer it as JSON too), echoing
//! the request id. A notification (a request without `id`) is run and never answered:
//! `204 No Content` (see [`notify`]).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::error::RpcError;
use super::list;
use super::ops::{self, Caller, SendParams};
use super::stream::Binding;
use crate::{
    A2aHost, ErrorKind, JsonRpcError, JsonRpcFailure, JsonRpcRequest, JsonRpcSuccess,
    ProtocolVersion, RequestId, user_input_from_v1, user_input_from_v03, v1, v03,
};

/// What a call answers with.
pub(crate) enum Reply {
    Json(Value),
    Stream(Response),
}

pub(crate) async fn handle<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(refused) = require_json(&headers) {
        let mut response = failure(RequestId::Null, refused);
        response
            .headers_mut()
            .insert("accept-post", HeaderValue::from_static("application/json"));
        return response;
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            let error = JsonRpcError::new(
                ErrorKind::InvalidRequest,
                format!(
                    "Request payload validation error: {}",
                    rejection.body_text()
                ),
            );
            return failure(RequestId::Null, RpcError { error, status });
        }
    };
    let request = match JsonRpcRequest::parse(&body) {
        Ok(request) => request,
        Err(failed) => return (StatusCode::OK, Json(*failed)).into_response(),
    };
    let id = request.reply_id();
    let version = match resolve_version(&headers, &uri, &request.method) {
        Ok(version) => version,
        Err(error) if request.id.is_none() => {
            unanswered(&request.method, &error.into());
            return StatusCode::NO_CONTENT.into_response();
        }
        Err(error) => return failure(id, error.into()),
    };
    tracing::debug!(method = %request.method, version = version.as_str(), "A2A call");
    // Large artifacts are linked under the same base as the agent card's URL.
    let base_url = super::card::base_url(&headers, &uri, &host.fallback_authority());
    let caller = Caller {
        host,
        who,
        version,
        id: id.clone(),
        base_url,
        binding: Binding::JsonRpc,
    };
    if request.id.is_none() {
        notify(&caller, &request).await;
        return StatusCode::NO_CONTENT.into_response();
    }
    let reply = match version {
        ProtocolVersion::V1_0 => call_v1(&caller, &request).await,
        _ => call_v03(&caller, &request).await,
    };
    match reply {
        Ok(Reply::Json(result)) => {
            (StatusCode::OK, Json(JsonRpcSuccess::new(id, result))).into_response()
        }
        Ok(Reply::Stream(response)) => response,
        Err(error) => failure(id, error),
    }
}

/// A notification — a request without `id` — is run like the same request with an id,
/// and nothing is answered (JSON-RPC 2.0 §4.1: the server MUST NOT reply), neither its
/// result nor its error: the HTTP answer is `204 No Content`. As nobody waits for a result,
/// a send never blocks on its task (`returnImmediately`) and a streaming send starts its
/// task without a stream (fire and forget; a push-notification config in the message still
/// reports the outcome); a subscription has nothing to deliver and is only validated. The
/// official SDK's server runs them too, answering them as if their id were `null`.
async fn notify<H: A2aHost>(caller: &Caller<H>, request: &JsonRpcRequest) {
    let outcome = match caller.version {
        ProtocolVersion::V1_0 => notify_v1(caller, request).await,
        _ => notify_v03(caller, request).await,
    };
    match outcome {
        Ok(()) => tracing::debug!(method = %request.method, "A2A notification run"),
        Err(error) => unanswered(&request.method, &error),
    }
}

/// A notification that failed gets no answer either (the client finds out otherwise, e.g.
/// with `ListTasks`); the refusal is logged for the operator, as a client's fault.
fn unanswered(method: &str, error: &RpcError) {
    tracing::debug!(
        method,
        code = error.error.code,
        message = %error.error.message,
        "A2A notification refused (not answered)"
    );
}

async fn notify_v1<H: A2aHost>(
    caller: &Caller<H>,
    request: &JsonRpcRequest,
) -> Result<(), RpcError> {
    match v1::Call::from_request(request)? {
        v1::Call::SendMessage(r) | v1::Call::SendStreamingMessage(r) => {
            let params = SendParams {
                return_immediately: true,
                ..send_params_v1(r)?
            };
            ops::send(caller, params).await.map(drop)
        }
        v1::Call::SubscribeToTask(_) => Ok(()),
        _ => call_v1(caller, request).await.map(drop),
    }
}

async fn notify_v03<H: A2aHost>(
    caller: &Caller<H>,
    request: &JsonRpcRequest,
) -> Result<(), RpcError> {
    match v03::Call::from_request(request)? {
        v03::Call::MessageSend(p) | v03::Call::MessageStream(p) => {
            let params = SendParams {
                return_immediately: true,
                ..send_params_v03(p)?
            };
            ops::send(caller, params).await.map(drop)
        }
        v03::Call::TasksResubscribe(_) => Ok(()),
        _ => call_v03(caller, request).await.map(drop),
    }
}

fn failure(id: RequestId, e: RpcError) -> Response {
    (e.status, Json(JsonRpcFailure::new(id, e.error))).into_response()
}

fn json<T: Serialize>(value: &T) -> Result<Reply, RpcError> {
    serde_json::to_value(value)
        .map(Reply::Json)
        .map_err(|e| RpcError::internal("serializing an A2A result", &e))
}

/// The protocol version of a request (see the module docs).
fn resolve_version(
    headers: &HeaderMap,
    uri: &Uri,
    method: &str,
) -> Result<ProtocolVersion, JsonRpcError> {
    let declared = match headers.get("a2a-version") {
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| {
                    JsonRpcError::new(
                        ErrorKind::VersionNotSupported,
                        "A2A-Version is not readable text",
                    )
                })?
                .to_owned(),
        ),
        None => version_query(uri),
    };
    match declared.filter(|v| !v.trim().is_empty()) {
        Some(version) => ProtocolVersion::from_header(Some(&version)),
        None => Ok(ProtocolVersion::of_method(method).unwrap_or(ProtocolVersion::V0_3)),
    }
}

/// Refuses a body declared as something other than JSON (`415`, `-32005`) instead of
/// parsing it anyway: `application/json`, `application/json-rpc`, `application/jsonrequest`
/// and any `application/*+json` are JSON (parameters such as `charset` are ignored). A
/// request without `Content-Type` is read as JSON, as HTTP lets a recipient assume a type.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), RpcError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(());
    };
    let declared = value.to_str().unwrap_or_default();
    let essence = declared
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let json = matches!(
        essence.as_str(),
        "application/json" | "application/json-rpc" | "application/jsonrequest"
    ) || (essence.starts_with("application/") && essence.ends_with("+json"));
    if json {
        return Ok(());
    }
    let shown: String = declared.chars().take(64).collect();
    Err(RpcError {
        error: JsonRpcError::new(
            ErrorKind::ContentTypeNotSupported,
            format!(
                "Incompatible content types: a JSON-RPC request must be sent as application/json, not {shown:?}"
            ),
        )
        .with_info("contentType", shown),
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
    })
}

/// The `A2A-Version` query parameter, which the specification allows instead of the header.
pub(crate) fn version_query(uri: &Uri) -> Option<String> {
    uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
            .map(|(_, v)| v.to_owned())
    })
}

fn history(length: Option<i32>) -> Option<usize> {
    length.and_then(|n| usize::try_from(n).ok())
}

fn no_extended_card() -> RpcError {
    RpcError::new(
        ErrorKind::ExtendedAgentCardNotConfigured,
        "Extended agent card not configured: the public card is complete",
    )
}

/// The version-neutral send parameters of a v1.0 request (JSON-RPC, gRPC).
pub(crate) fn send_params_v1(request: v1::SendMessageRequest) -> Result<SendParams, RpcError> {
    let input = user_input_from_v1(&request.message).map_err(JsonRpcError::from)?;
    let config = request.configuration.unwrap_or_default();
    Ok(SendParams {
        message: request.message,
        input,
        history_length: history(config.history_length),
        return_immediately: config.return_immediately,
        push: config.task_push_notification_config.map(Into::into),
    })
}

fn send_params_v03(params: v03::MessageSendParams) -> Result<SendParams, RpcError> {
    let input = user_input_from_v03(&params.message).map_err(JsonRpcError::from)?;
    let config = params.configuration.unwrap_or_default();
    Ok(SendParams {
        message: params.message.into(),
        input,
        history_length: history(config.history_length),
        // v0.3 blocks unless the client says `blocking: false`.
        return_immediately: config.blocking == Some(false),
        push: config.push_notification_config.map(Into::into),
    })
}

pub(crate) async fn call_v1<H: A2aHost>(
    caller: &Caller<H>,
    request: &JsonRpcRequest,
) -> Result<Reply, RpcError> {
    match v1::Call::from_request(request)? {
        v1::Call::SendMessage(r) => {
            let task = ops::send(caller, send_params_v1(r)?).await?;
            json(&v1::SendMessageResponse::Task(task))
        }
        v1::Call::SendStreamingMessage(r) => Ok(Reply::Stream(
            ops::send_streaming(caller, send_params_v1(r)?).await?,
        )),
        v1::Call::GetTask(r) => json(&ops::get(caller, &r.id, history(r.history_length)).await?),
        v1::Call::ListTasks(r) => json(&list::list(caller, r).await?),
        v1::Call::CancelTask(r) => json(&ops::cancel(caller, &r.id).await?),
        v1::Call::SubscribeToTask(r) => Ok(Reply::Stream(ops::subscribe(caller, &r.id).await?)),
        v1::Call::PushNotificationConfig(m) => crate::push::call_v1(caller, m, request)
            .await
            .map(Reply::Json),
        v1::Call::GetExtendedAgentCard => Err(no_extended_card()),
    }
}

async fn call_v03<H: A2aHost>(
    caller: &Caller<H>,
    request: &JsonRpcRequest,
) -> Result<Reply, RpcError> {
    match v03::Call::from_request(request)? {
        v03::Call::MessageSend(p) => {
            let task = ops::send(caller, send_params_v03(p)?).await?;
            json(&v03::SendMessageResult::from(
                v1::SendMessageResponse::Task(task),
            ))
        }
        v03::Call::MessageStream(p) => Ok(Reply::Stream(
            ops::send_streaming(caller, send_params_v03(p)?).await?,
        )),
        v03::Call::TasksGet(p) => {
            let task = ops::get(caller, &p.id, history(p.history_length)).await?;
            json(&v03::Task::from(task))
        }
        v03::Call::TasksCancel(p) => json(&v03::Task::from(ops::cancel(caller, &p.id).await?)),
        v03::Call::TasksResubscribe(p) => Ok(Reply::Stream(ops::subscribe(caller, &p.id).await?)),
        v03::Call::PushNotificationConfig(m) => crate::push::call_v03(caller, m, request)
            .await
            .map(Reply::Json),
        v03::Call::GetAuthenticatedExtendedCard => Err(no_extended_card()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(version: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = version {
            h.insert("a2a-version", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_json_bodies_are_read() {
        let with = |ct: &str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, ct.parse().unwrap());
            require_json(&h)
        };
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/json-rpc",
            "application/vnd.a2a+json",
        ] {
            assert!(with(ok).is_ok(), "{ok}");
        }
        assert!(require_json(&HeaderMap::new()).is_ok());
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
        ] {
            let e = with(bad).unwrap_err();
            assert_eq!((e.error.code, e.status.as_u16()), (-32005, 415), "{bad}");
        }
    }

    #[test]
    fn version_comes_from_header_query_or_method_name() {
        let plain: Uri = "/a2a".parse().unwrap();
        let v = |h: Option<&str>, uri: &Uri, m: &str| resolve_version(&headers(h), uri, m);
        assert_eq!(
            v(None, &plain, "message/send").unwrap(),
            ProtocolVersion::V0_3
        );
        assert_eq!(
            v(None, &plain, "SendMessage").unwrap(),
            ProtocolVersion::V1_0
        );
        assert_eq!(v(None, &plain, "nope").unwrap(), ProtocolVersion::V0_3);
        assert_eq!(
            v(Some("1.0"), &plain, "message/send").unwrap(),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            v(Some("0.3"), &plain, "SendMessage").unwrap(),
            ProtocolVersion::V0_3
        );
        assert_eq!(
            v(Some(" "), &plain, "SendMessage").unwrap(),
            ProtocolVersion::V1_0
        );
        assert_eq!(
            v(Some("2.0"), &plain, "SendMessage").unwrap_err().code,
            -32009
        );
        let query: Uri = "/a2a?x=1&A2A-Version=1.0".parse().unwrap();
        assert_eq!(
            v(None, &query, "message/send").unwrap(),
            ProtocolVersion::V1_0
        );
    }
}

//! The HTTP+JSON/REST binding of A2A v1.0 (specification §11), mounted under
//! [`REST_PATH`] (`/a2a/rest`): the base URL the agent card declares for
//! `protocolBinding: "HTTP+JSON"`, to which clients append the specification's routes.
//!
//! | route | operation |
//! |---|---|
//! | `POST /a2a/rest/message:send` | `SendMessage`: `{"task": …}` |
//! | `POST /a2a/rest/message:stream` | `SendStreamingMessage`: SSE, `data: <StreamResponse>` |
//! | `GET /a2a/rest/tasks/{id}?historyLength=N` | `GetTask` |
//! | `GET /a2a/rest/tasks?contextId=…&status=…&pageSize=…&pageToken=…&historyLength=…&statusTimestampAfter=…&includeArtifacts=…` | `ListTasks` |
//! | `POST /a2a/rest/tasks/{id}:cancel` | `CancelTask` |
//! | `POST` (or `GET`) `/a2a/rest/tasks/{id}:subscribe` | `SubscribeToTask`: SSE |
//! | `POST`/`GET /a2a/rest/tasks/{id}/pushNotificationConfigs`, `GET`/`DELETE …/{configId}` | push-notification configs |
//! | `GET /a2a/rest/extendedAgentCard` | `GetExtendedAgentCard` |
//!
//! **One behaviour, many doors.** A route only translates: the path, query and body become
//! the `params` of the v1.0 JSON-RPC method it stands for, and the call goes through the
//! same [`v1::Call`] validation and the same dispatch
//! ([`crate::http`]'s operations over the [`A2aHost`]) as `POST /a2a`. Task state, stream
//! items, ownership, stream slots and limits are therefore identical on both bindings; only
//! the envelope differs — bare ProtoJSON objects instead of JSON-RPC responses, SSE frames
//! carrying bare `StreamResponse`s, and errors as HTTP statuses with a `google.rpc.Status`
//! body ([`error`]; `application/json`, where answers are `application/a2a+json`: see
//! [`ERROR_JSON`]). That includes the push-notification routes: they call the JSON-RPC
//! binding's `*TaskPushNotificationConfig` methods ([`crate::push`]), so whatever those
//! answer — configs, or `PushNotificationNotSupportedError` (400) when the host delivers no
//! push notifications — these answer too.
//!
//! Bodies are ProtoJSON (`application/a2a+json` or `application/json`; a body of another
//! declared type is `415` with `ContentTypeNotSupportedError`, the JSON-RPC endpoint's rule);
//! query parameters are camelCase (proto field names are accepted too). The binding speaks
//! v1.0 only: a request without `A2A-Version` is read as 1.0, an explicit other version is
//! `VersionNotSupportedError`. Authentication, principal isolation and body limits are the
//! server's, as for every route; its refusals (401, 408, 413) use [`transport_error`].
//!
//! Why `/a2a/rest`: `/v1/…` is the server's own REST API and `/a2a` its JSON-RPC endpoint;
//! v0.3's REST binding put its routes under a `/v1` prefix, so mounting v1.0 at `/a2a/rest`
//! also leaves `/a2a/rest/v1/…` free should v0.3 REST ever be served.

pub mod error;
mod request;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{any, get, post};
use serde_json::{Map, Value};

use crate::http::RpcError;
use crate::http::ops::Caller;
use crate::http::rpc::{Reply, call_v1};
use crate::http::stream::Binding;
use crate::{A2aHost, ErrorKind, JsonRpcError, JsonRpcRequest, ProtocolVersion, RequestId, v1};

pub use error::{
    A2A_JSON, ERROR_JSON, HttpMapping, error_response, http_mapping, status_body, transport_error,
};

/// Where the HTTP+JSON binding is mounted: the `url` of the card's `HTTP+JSON` interface
/// is the server's base URL followed by this path.
pub const REST_PATH: &str = "/a2a/rest";

/// The HTTP+JSON routes over any [`A2aHost`], to merge into the host's router (the A2A
/// [`routes`](crate::routes) include them).
pub fn routes<H: A2aHost>() -> Router<H> {
    let at = |path: &str| format!("{REST_PATH}{path}");
    Router::new()
        .route(&at("/message:send"), post(message_send::<H>))
        .route(&at("/message:stream"), post(message_stream::<H>))
        .route(&at("/tasks"), get(list_tasks::<H>))
        .route(
            &at("/tasks/{task}"),
            get(task_get::<H>).post(task_post::<H>),
        )
        .route(
            &at("/tasks/{task}/pushNotificationConfigs"),
            get(push_configs::<H>).post(push_configs::<H>),
        )
        .route(
            &at("/tasks/{task}/pushNotificationConfigs/{config}"),
            get(push_config::<H>).delete(push_config::<H>),
        )
        .route(&at("/extendedAgentCard"), get(extended_card::<H>))
        // Anything else under the prefix is an unknown method, in the binding's own shape.
        .route(&at("/{*rest}"), any(unknown_route))
        .route(REST_PATH, any(unknown_route))
}

/// Whether `path` is one of this binding's (so a refusal made before routing, such as a
/// missing bearer token, can answer in its shape: [`transport_error`]).
pub fn is_rest_path(path: &str) -> bool {
    path.strip_prefix(REST_PATH)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What every handler receives, before the route decides the method.
struct Incoming<H: A2aHost> {
    host: H,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
}

impl<H: A2aHost> Incoming<H> {
    /// Runs `method` with `params` through the shared dispatch and writes the answer.
    async fn call(
        self,
        method: v1::Method,
        params: Result<Map<String, Value>, RpcError>,
    ) -> Response {
        let result = async {
            request::check_version(&self.headers, &self.uri)?;
            let params = params?;
            let base_url = crate::http::card::base_url(
                &self.headers,
                &self.uri,
                &self.host.fallback_authority(),
            );
            let caller = Caller {
                host: self.host,
                who: self.who,
                version: ProtocolVersion::V1_0,
                id: RequestId::Null,
                base_url,
                binding: Binding::HttpJson,
            };
            tracing::debug!(method = method.as_str(), "A2A HTTP+JSON call");
            let request =
                JsonRpcRequest::new(RequestId::Null, method.as_str(), Value::Object(params));
            call_v1(&caller, &request).await
        }
        .await;
        match result {
            // `google.protobuf.Empty` (a deleted config) is `{}`.
            Ok(Reply::Json(Value::Null)) => {
                error::json_response(StatusCode::OK, &Value::Object(Map::new()))
            }
            Ok(Reply::Json(value)) => error::json_response(StatusCode::OK, &value),
            Ok(Reply::Stream(response)) => response,
            Err(error) => error::error_response(&error),
        }
    }
}

macro_rules! incoming {
    ($host:ident, $who:ident, $uri:ident, $headers:ident) => {
        Incoming {
            host: $host,
            who: $who,
            uri: $uri,
            headers: $headers,
        }
    };
}

/// `POST /message:send`.
async fn message_send<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let params = request::body_object(&headers, body);
    incoming!(host, who, uri, headers)
        .call(v1::Method::SendMessage, params)
        .await
}

/// `POST /message:stream`.
async fn message_stream<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let params = request::body_object(&headers, body);
    incoming!(host, who, uri, headers)
        .call(v1::Method::SendStreamingMessage, params)
        .await
}

/// `GET /tasks`: `ListTasks` from the query.
async fn list_tasks<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let params = request::query_object(&uri);
    incoming!(host, who, uri, headers)
        .call(v1::Method::ListTasks, params)
        .await
}

/// A task route's last segment: `{id}`, `{id}:cancel` or `{id}:subscribe`. Task ids may
/// contain `:`, so only these two verbs after the last colon are verbs.
fn split_verb(segment: &str) -> (&str, Option<&str>) {
    match segment.rsplit_once(':') {
        Some((id, verb @ ("cancel" | "subscribe"))) => (id, Some(verb)),
        _ => (segment, None),
    }
}

/// `GET /tasks/{id}` (`GetTask`, query `historyLength`) and `GET /tasks/{id}:subscribe`
/// (the verb `a2a.proto`'s annotation gives `SubscribeToTask`).
async fn task_get<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    Path(segment): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let (id, verb) = split_verb(&segment);
    let (method, params) = match verb {
        Some("subscribe") => (v1::Method::SubscribeToTask, Ok(Map::new())),
        Some(_) => return method_not_allowed(&Method::GET),
        None => (v1::Method::GetTask, request::query_object(&uri)),
    };
    let params = params.and_then(|mut p| request::set_from_path(&mut p, "id", id).map(|()| p));
    incoming!(host, who, uri, headers)
        .call(method, params)
        .await
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe` (the specification's text).
async fn task_post<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    Path(segment): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (id, verb) = split_verb(&segment);
    let method = match verb {
        Some("cancel") => v1::Method::CancelTask,
        Some("subscribe") => v1::Method::SubscribeToTask,
        _ => return method_not_allowed(&Method::POST),
    };
    let params = request::body_object(&headers, body)
        .and_then(|mut p| request::set_from_path(&mut p, "id", id).map(|()| p));
    incoming!(host, who, uri, headers)
        .call(method, params)
        .await
}

/// `POST` (create) and `GET` (list) `/tasks/{id}/pushNotificationConfigs`.
async fn push_configs<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    Path(task): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, params) = if method == Method::POST {
        (
            v1::Method::CreateTaskPushNotificationConfig,
            request::body_object(&headers, body),
        )
    } else {
        (
            v1::Method::ListTaskPushNotificationConfigs,
            request::query_object(&uri),
        )
    };
    let params =
        params.and_then(|mut p| request::set_from_path(&mut p, "taskId", &task).map(|()| p));
    incoming!(host, who, uri, headers).call(call, params).await
}

/// `GET` and `DELETE /tasks/{id}/pushNotificationConfigs/{configId}`.
async fn push_config<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    Path((task, config)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let call = if method == Method::DELETE {
        v1::Method::DeleteTaskPushNotificationConfig
    } else {
        v1::Method::GetTaskPushNotificationConfig
    };
    let params = request::query_object(&uri).and_then(|mut p| {
        request::set_from_path(&mut p, "taskId", &task)?;
        request::set_from_path(&mut p, "id", &config)?;
        Ok(p)
    });
    incoming!(host, who, uri, headers).call(call, params).await
}

/// `GET /extendedAgentCard`.
async fn extended_card<H: A2aHost>(
    State(host): State<H>,
    who: H::Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    incoming!(host, who, uri, headers)
        .call(v1::Method::GetExtendedAgentCard, Ok(Map::new()))
        .await
}

/// A path under [`REST_PATH`] that is no route of the binding.
async fn unknown_route(method: Method, uri: Uri) -> Response {
    let error = JsonRpcError::new(
        ErrorKind::MethodNotFound,
        format!(
            "no HTTP+JSON operation is {method} {}",
            uri.path().chars().take(200).collect::<String>()
        ),
    );
    error::error_response(&error.into())
}

/// A task route with a verb that the HTTP method does not take.
fn method_not_allowed(method: &Method) -> Response {
    let error = JsonRpcError::new(
        ErrorKind::MethodNotFound,
        format!("this task route does not take {method}"),
    );
    let (_, mut body) = error::status_body(&error.into());
    body["error"]["code"] = Value::from(StatusCode::METHOD_NOT_ALLOWED.as_u16());
    error::error_json_response(StatusCode::METHOD_NOT_ALLOWED, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_paths_are_the_prefix_and_below() {
        assert!(is_rest_path("/a2a/rest"));
        assert!(is_rest_path("/a2a/rest/tasks/t1:cancel"));
        assert!(!is_rest_path("/a2a/restless"));
        assert!(!is_rest_path("/a2a"));
        assert!(!is_rest_path("/v1/tasks"));
    }

    #[test]
    fn verbs_split_off_the_last_colon_only() {
        assert_eq!(split_verb("t1"), ("t1", None));
        assert_eq!(split_verb("t1:cancel"), ("t1", Some("cancel")));
        assert_eq!(split_verb("a:b:subscribe"), ("a:b", Some("subscribe")));
        assert_eq!(split_verb("a:b"), ("a:b", None));
        assert_eq!(split_verb(":cancel"), ("", Some("cancel")));
    }
}

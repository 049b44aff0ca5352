//! JSON-RPC 2.0 envelope for A2A: requests, responses, error objects with the standard and
//! A2A error codes, and a request reader that turns any body into either a request or the
//! exact error response the specification asks for.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

use super::serde_util::constant_tag;

constant_tag!(
    /// The `"jsonrpc": "2.0"` member.
    JsonRpcVersion = "2.0"
);

/// A request id: a string, a number, or `null`. Numbers are kept as written so the
/// response echoes exactly what the client sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(serde_json::Number),
    String(String),
    Null,
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n.into())
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

/// A JSON-RPC request. `id: None` is a notification (A2A clients always send an id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcRequest {
    pub jsonrpc: JsonRpcVersion,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl JsonRpcRequest {
    /// A request with an id.
    pub fn new(id: impl Into<RequestId>, method: impl Into<String>, params: Value) -> Self {
        Self {
            jsonrpc: JsonRpcVersion,
            id: Some(id.into()),
            method: method.into(),
            params: Some(params),
        }
    }

    /// Reads a request body. Invalid JSON is a parse error (`-32700`); valid JSON that is
    /// not a request object (wrong `jsonrpc`, no `method`, a batch, a bad `id`) is an
    /// invalid request (`-32600`) that echoes the id whenever one could be read.
    pub fn parse(body: &[u8]) -> Result<Self, Box<JsonRpcFailure>> {
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            Box::new(JsonRpcFailure::new(
                RequestId::Null,
                JsonRpcError::new(ErrorKind::ParseError, format!("Invalid JSON payload: {e}")),
            ))
        })?;
        Self::from_value(value)
    }

    /// As [`Self::parse`], for an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, Box<JsonRpcFailure>> {
        let invalid = |id: RequestId, why: &str| {
            Box::new(JsonRpcFailure::new(
                id,
                JsonRpcError::new(
                    ErrorKind::InvalidRequest,
                    format!("Request payload validation error: {why}"),
                ),
            ))
        };
        let Value::Object(mut obj) = value else {
            return Err(invalid(
                RequestId::Null,
                "expected a JSON-RPC request object",
            ));
        };
        let id = match obj.remove("id") {
            None => None,
            Some(Value::Null) => Some(RequestId::Null),
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(Value::Number(n)) => Some(RequestId::Number(n)),
            Some(_) => {
                return Err(invalid(
                    RequestId::Null,
                    "`id` must be a string, number or null",
                ));
            }
        };
        let reply_id = id.clone().unwrap_or(RequestId::Null);
        if obj.get("jsonrpc").and_then(Value::as_str) != Some(JsonRpcVersion::TAG) {
            return Err(invalid(reply_id, "`jsonrpc` must be \"2.0\""));
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) if !m.is_empty() => m,
            _ => return Err(invalid(reply_id, "`method` must be a non-empty string")),
        };
        let params = match obj.remove("params") {
            None | Some(Value::Null) => None,
            Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
            Some(_) => return Err(invalid(reply_id, "`params` must be an object or an array")),
        };
        Ok(Self {
            jsonrpc: JsonRpcVersion,
            id,
            method,
            params,
        })
    }

    /// The id to answer with (`null` for a notification).
    pub fn reply_id(&self) -> RequestId {
        self.id.clone().unwrap_or(RequestId::Null)
    }

    /// Reads `params` as `T`; a mismatch is an invalid-params error (`-32602`) that says
    /// what was wrong. Absent params read as an empty object.
    pub fn params_as<T: DeserializeOwned>(&self) -> Result<T, JsonRpcError> {
        let empty = Value::Object(Map::new());
        let params = self.params.as_ref().unwrap_or(&empty);
        T::deserialize(params).map_err(|e| JsonRpcError::invalid_params(e.to_string()))
    }
}

/// The error kinds of the JSON-RPC binding: the five standard ones and A2A's own
/// (`-32001`…`-32009`, specification §5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: &'static [ErrorKind] = &[
        Self::ParseError,
        Self::InvalidRequest,
        Self::MethodNotFound,
        Self::InvalidParams,
        Self::InternalError,
        Self::TaskNotFound,
        Self::TaskNotCancelable,
        Self::PushNotificationNotSupported,
        Self::UnsupportedOperation,
        Self::ContentTypeNotSupported,
        Self::InvalidAgentResponse,
        Self::ExtendedAgentCardNotConfigured,
        Self::ExtensionSupportRequired,
        Self::VersionNotSupported,
    ];

    /// The numeric JSON-RPC code.
    pub fn code(self) -> i64 {
        match self {
            Self::ParseError => -32700,
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::InvalidParams => -32602,
            Self::InternalError => -32603,
            Self::TaskNotFound => -32001,
            Self::TaskNotCancelable => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation => -32004,
            Self::ContentTypeNotSupported => -32005,
            Self::InvalidAgentResponse => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired => -32008,
            Self::VersionNotSupported => -32009,
        }
    }

    /// The kind of a numeric code, if it is one of ours.
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.code() == code)
    }

    /// The standard message of the specification's tables.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::ParseError => "Invalid JSON payload",
            Self::InvalidRequest => "Request payload validation error",
            Self::MethodNotFound => "Method not found",
            Self::InvalidParams => "Invalid parameters",
            Self::InternalError => "Internal error",
            Self::TaskNotFound => "Task not found",
            Self::TaskNotCancelable => "Task cannot be canceled",
            Self::PushNotificationNotSupported => "Push Notification is not supported",
            Self::UnsupportedOperation => "This operation is not supported",
            Self::ContentTypeNotSupported => "Incompatible content types",
            Self::InvalidAgentResponse => "Invalid agent response type",
            Self::ExtendedAgentCardNotConfigured => "Extended agent card not configured",
            Self::ExtensionSupportRequired => "Extension support required",
            Self::VersionNotSupported => "Protocol version not supported",
        }
    }

    /// The `google.rpc.ErrorInfo` reason for A2A-specific kinds (`None` for the standard
    /// JSON-RPC ones).
    pub fn reason(self) -> Option<&'static str> {
        Some(match self {
            Self::TaskNotFound => "TASK_NOT_FOUND",
            Self::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            Self::ParseError
            | Self::InvalidRequest
            | Self::MethodNotFound
            | Self::InvalidParams
            | Self::InternalError => return None,
        })
    }
}

/// The `error` member of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl std::fmt::Display for JsonRpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for JsonRpcError {}

/// The `type.googleapis.com/google.rpc.ErrorInfo` detail v1.0 attaches to A2A errors.
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

impl JsonRpcError {
    /// An error of `kind` with a specific message. A2A-specific kinds get a
    /// `google.rpc.ErrorInfo` detail (`reason`, `domain`) in `data`, as v1.0 asks; v0.3
    /// clients accept any `data`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let data = kind.reason().map(|reason| {
            json!([{ "@type": ERROR_INFO_TYPE, "reason": reason, "domain": "a2a-protocol.org" }])
        });
        Self {
            code: kind.code(),
            message: message.into(),
            data,
        }
    }

    /// An error of `kind` with the standard message.
    pub fn of(kind: ErrorKind) -> Self {
        Self::new(kind, kind.default_message())
    }

    /// Adds a metadata entry to the `ErrorInfo` detail (e.g. `taskId`).
    pub fn with_info(mut self, key: &str, value: impl Into<String>) -> Self {
        if let Some(info) = self
            .data
            .as_mut()
            .and_then(Value::as_array_mut)
            .and_then(|details| details.first_mut())
            .and_then(Value::as_object_mut)
        {
            let meta = info
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(key.to_owned(), Value::String(value.into()));
            }
        }
        self
    }

    /// The kind of this error, when its code is one of ours.
    pub fn kind(&self) -> Option<ErrorKind> {
        ErrorKind::from_code(self.code)
    }

    /// `-32602` with the reason.
    pub fn invalid_params(why: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorKind::InvalidParams,
            format!("Invalid parameters: {why}"),
        )
    }

    /// `-32601` naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            ErrorKind::MethodNotFound,
            format!("Method not found: {method}"),
        )
    }

    /// `-32001` for a task id.
    pub fn task_not_found(task_id: &str) -> Self {
        Self::of(ErrorKind::TaskNotFound).with_info("taskId", task_id)
    }

    /// `-32002` for a task id.
    pub fn task_not_cancelable(task_id: &str) -> Self {
        Self::of(ErrorKind::TaskNotCancelable).with_info("taskId", task_id)
    }

    /// `-32004` with the reason.
    pub fn unsupported_operation(why: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorKind::UnsupportedOperation,
            format!("This operation is not supported: {why}"),
        )
    }

    /// `-32603`; the message should not leak internals.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InternalError, message)
    }
}

/// A successful response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcSuccess<T> {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub result: T,
}

impl<T> JsonRpcSuccess<T> {
    pub fn new(id: RequestId, result: T) -> Self {
        Self {
            jsonrpc: JsonRpcVersion,
            id,
            result,
        }
    }
}

/// A failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcFailure {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub error: JsonRpcError,
}

impl JsonRpcFailure {
    pub fn new(id: RequestId, error: JsonRpcError) -> Self {
        Self {
            jsonrpc: JsonRpcVersion,
            id,
            error,
        }
    }
}

/// A response as a client reads it: `error` present means failure, otherwise `result`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum JsonRpcResponse<T> {
    Success(JsonRpcSuccess<T>),
    Failure(JsonRpcFailure),
}

impl<T> JsonRpcResponse<T> {
    /// A success response.
    pub fn success(id: RequestId, result: T) -> Self {
        Self::Success(JsonRpcSuccess::new(id, result))
    }

    /// A failure response.
    pub fn failure(id: RequestId, error: JsonRpcError) -> Self {
        Self::Failure(JsonRpcFailure::new(id, error))
    }

    /// The result, or the error the server sent.
    pub fn into_result(self) -> Result<T, JsonRpcError> {
        match self {
            Self::Success(s) => Ok(s.result),
            Self::Failure(f) => Err(f.error),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for JsonRpcResponse<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(d)?;
        let is_failure = value.get("error").is_some_and(|e| !e.is_null());
        if is_failure {
            JsonRpcFailure::deserialize(value)
                .map(Self::Failure)
                .map_err(D::Error::custom)
        } else {
            JsonRpcSuccess::deserialize(value)
                .map(Self::Success)
                .map_err(D::Error::custom)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(body: &str) -> JsonRpcFailure {
        *JsonRpcRequest::parse(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn reads_a_request_and_keeps_the_id_as_written() {
        let r = JsonRpcRequest::parse(
            br#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"t"}}"#,
        )
        .unwrap();
        assert_eq!(r.reply_id(), RequestId::from(7));
        assert_eq!(r.method, "GetTask");
        let r =
            JsonRpcRequest::parse(br#"{"jsonrpc":"2.0","id":"r2","method":"tasks/get"}"#).unwrap();
        assert_eq!(r.reply_id(), RequestId::from("r2"));
        assert_eq!(r.params, None);
        let r = JsonRpcRequest::parse(br#"{"jsonrpc":"2.0","method":"x"}"#).unwrap();
        assert_eq!((r.reply_id(), r.id), (RequestId::Null, None));
    }

    #[test]
    fn malformed_bodies_get_the_specified_errors() {
        let e = parse_err("{not json");
        assert_eq!((e.error.code, e.id.clone()), (-32700, RequestId::Null));
        assert_eq!(parse_err("[]").error.code, -32600);
        assert_eq!(parse_err("42").error.code, -32600);
        let e = parse_err(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#);
        assert_eq!((e.error.code, e.id), (-32600, RequestId::from(3)));
        let e = parse_err(r#"{"jsonrpc":"2.0","id":"a","method":5}"#);
        assert_eq!((e.error.code, e.id), (-32600, RequestId::from("a")));
        assert_eq!(
            parse_err(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)
                .error
                .code,
            -32600
        );
        assert_eq!(
            parse_err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#)
                .error
                .code,
            -32600
        );
        assert_eq!(parse_err("").error.code, -32700);
        assert_eq!(parse_err("\u{FFFD}").error.code, -32700);
    }

    #[test]
    fn bad_params_are_invalid_params_with_a_reason() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            id: String,
        }
        let r = JsonRpcRequest::parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1}}"#)
            .unwrap();
        let e = r.params_as::<P>().unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("missing field `id`"), "{}", e.message);
    }

    #[test]
    fn a2a_errors_carry_error_info() {
        let e = JsonRpcError::task_not_found("t-1");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["code"], -32001);
        assert_eq!(v["message"], "Task not found");
        assert_eq!(v["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["data"][0]["metadata"]["taskId"], "t-1");
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
        assert_eq!(JsonRpcError::of(ErrorKind::InternalError).data, None);
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
        }
    }

    #[test]
    fn responses_round_trip_and_are_told_apart_by_error() {
        let ok: JsonRpcResponse<Value> =
            JsonRpcResponse::success(RequestId::from(1), json!({"a": 1}));
        let fail: JsonRpcResponse<Value> =
            JsonRpcResponse::failure(RequestId::Null, JsonRpcError::of(ErrorKind::ParseError));
        for r in [ok, fail] {
            let v = serde_json::to_value(&r).unwrap();
            assert_eq!(v["jsonrpc"], "2.0");
            let back: JsonRpcResponse<Value> = serde_json::from_value(v).unwrap();
            assert_eq!(back, r);
        }
        let e = serde_json::from_value::<JsonRpcResponse<Value>>(
            json!({"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}),
        )
        .unwrap()
        .into_result()
        .unwrap_err();
        assert_eq!(e.kind(), Some(ErrorKind::TaskNotFound));
    }
}

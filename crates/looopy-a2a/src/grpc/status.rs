//! A2A errors as gRPC statuses: the status code of the specification's table (§5.4), the
//! message, and a `google.rpc.ErrorInfo` detail (`reason` such as `TASK_NOT_FOUND`, domain
//! `a2a-protocol.org`, the error's metadata) in `grpc-status-details-bin`, as §10.6 asks
//! and as the official SDKs read it.
//!
//! The mapping starts from the same [`RpcError`] the JSON-RPC endpoint answers with, so both
//! bindings refuse the same calls for the same reasons. Standard JSON-RPC kinds (invalid
//! params, internal error) get an `ErrorInfo` too (`INVALID_PARAMS`, `INTERNAL_ERROR`, as the
//! official Python server does); "come back later" refusals, which JSON-RPC sends as
//! internal errors with HTTP 429/503, are `RESOURCE_EXHAUSTED`/`UNAVAILABLE` here.
//!
//! A request that is not valid protobuf is refused by [`RequestCodec`], the server's codec,
//! as `INVALID_ARGUMENT` (`INVALID_PARAMS`) rather than tonic's `INTERNAL`; and
//! [`is_server_fault`] tells the host which statuses are its own faults, worth an error in
//! its log, and which the client's.

use std::marker::PhantomData;

use axum::http::StatusCode;
use prost::Message as _;
use serde_json::Value;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::ProstEncoder;

use crate::http::RpcError;
use crate::jsonrpc::{ErrorKind, JsonRpcError};

/// The domain of A2A's `ErrorInfo` reasons.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// `google.rpc.Status`, the message carried in `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<prost_types::Any>,
}

/// `google.rpc.ErrorInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorInfo {
    #[prost(string, tag = "1")]
    pub reason: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(map = "string, string", tag = "3")]
    pub metadata: std::collections::HashMap<String, String>,
}

/// The `Any` type URL of [`ErrorInfo`].
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// The gRPC code of an A2A error kind (the specification's table, §5.4).
pub fn code_of(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::TaskNotFound => Code::NotFound,
        ErrorKind::TaskNotCancelable
        | ErrorKind::PushNotificationNotSupported
        | ErrorKind::UnsupportedOperation
        | ErrorKind::ExtendedAgentCardNotConfigured
        | ErrorKind::ExtensionSupportRequired
        | ErrorKind::VersionNotSupported => Code::FailedPrecondition,
        ErrorKind::ContentTypeNotSupported
        | ErrorKind::InvalidParams
        | ErrorKind::InvalidRequest
        | ErrorKind::ParseError => Code::InvalidArgument,
        ErrorKind::MethodNotFound => Code::Unimplemented,
        ErrorKind::InvalidAgentResponse | ErrorKind::InternalError => Code::Internal,
    }
}

/// The `ErrorInfo.reason` of a kind: A2A's own, or the official SDKs' names for the
/// standard JSON-RPC ones.
pub fn reason_of(kind: ErrorKind) -> &'static str {
    kind.reason().unwrap_or(match kind {
        ErrorKind::ParseError => "PARSE_ERROR",
        ErrorKind::InvalidRequest => "INVALID_REQUEST",
        ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
        ErrorKind::InvalidParams => "INVALID_PARAMS",
        _ => "INTERNAL_ERROR",
    })
}

/// An A2A error of `kind` as a status with its `ErrorInfo`.
pub fn status(kind: ErrorKind, message: impl Into<String>) -> Status {
    with_info(
        code_of(kind),
        message.into(),
        reason_of(kind),
        Default::default(),
    )
}

/// The status of a refused or failed operation (see the module docs).
pub(crate) fn from_rpc(e: RpcError) -> Status {
    let RpcError { error, status } = e;
    let kind = ErrorKind::from_code(error.code).unwrap_or(ErrorKind::InternalError);
    let code = match status {
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        _ => code_of(kind),
    };
    let metadata = info_metadata(&error);
    with_info(code, error.message, reason_of(kind), metadata)
}

/// The `metadata` of the JSON-RPC error's `ErrorInfo` detail (e.g. `taskId`), as strings.
fn info_metadata(error: &JsonRpcError) -> std::collections::HashMap<String, String> {
    error
        .data
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|details| details.first())
        .and_then(|info| info.get("metadata"))
        .and_then(Value::as_object)
        .map(|meta| {
            meta.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    (k.clone(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn with_info(
    code: Code,
    message: String,
    reason: &str,
    metadata: std::collections::HashMap<String, String>,
) -> Status {
    let info = ErrorInfo {
        reason: reason.to_owned(),
        domain: ERROR_DOMAIN.to_owned(),
        metadata,
    };
    let details = RpcStatus {
        code: code as i32,
        message: message.clone(),
        details: vec![prost_types::Any {
            type_url: ERROR_INFO_TYPE.to_owned(),
            value: info.encode_to_vec(),
        }],
    };
    Status::with_details(code, message, details.encode_to_vec().into())
}

/// The `ErrorInfo` a status carries, if any (for clients and tests).
pub fn error_info(status: &Status) -> Option<ErrorInfo> {
    let details = RpcStatus::decode(status.details()).ok()?;
    details
        .details
        .iter()
        .find(|any| any.type_url == ERROR_INFO_TYPE)
        .and_then(|any| ErrorInfo::decode(any.value.as_slice()).ok())
}

/// Whether a status the server answered with is its own fault (`INTERNAL`, `UNKNOWN`,
/// `DATA_LOSS`): an error for the operator. Every other code is a client's doing or an
/// expected condition — a malformed or refused request, a missing task, no credentials,
/// a deadline or cancellation, "come back later" — which any client can cause at will, so
/// a host logs those below error level lest clients fill its log.
pub fn is_server_fault(code: Code) -> bool {
    matches!(code, Code::Internal | Code::Unknown | Code::DataLoss)
}

/// The gRPC server's codec (`proto::a2a_service_server` is generated with it): protobuf
/// via prost, like `tonic_prost::ProstCodec`, except that a request message that does not
/// decode is `INVALID_ARGUMENT` with an `INVALID_PARAMS` `ErrorInfo` — the client sent a
/// malformed argument — where tonic answers `INTERNAL`, which reads as a server bug (and
/// is what gRPC's status-code guide lists for "error parsing request proto"; Armeria
/// changed it to `INVALID_ARGUMENT` for the same reason). The generated client keeps
/// tonic's codec, so a malformed *answer* stays `INTERNAL` for a client.
#[derive(Debug, Clone, Copy)]
pub struct RequestCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for RequestCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for RequestCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder(PhantomData)
    }
}

/// [`RequestCodec`]'s decoder.
#[derive(Debug, Clone, Copy)]
pub struct RequestDecoder<U>(PhantomData<U>);

impl<U: prost::Message + Default> Decoder for RequestDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            status(
                ErrorKind::InvalidParams,
                format!("Invalid parameters: the request is not a valid protobuf message ({e})"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_maps_to_the_specification_table() {
        let table = [
            (-32001, Code::NotFound, "TASK_NOT_FOUND"),
            (-32002, Code::FailedPrecondition, "TASK_NOT_CANCELABLE"),
            (
                -32003,
                Code::FailedPrecondition,
                "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ),
            (-32004, Code::FailedPrecondition, "UNSUPPORTED_OPERATION"),
            (-32005, Code::InvalidArgument, "CONTENT_TYPE_NOT_SUPPORTED"),
            (-32006, Code::Internal, "INVALID_AGENT_RESPONSE"),
            (
                -32007,
                Code::FailedPrecondition,
                "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ),
            (
                -32008,
                Code::FailedPrecondition,
                "EXTENSION_SUPPORT_REQUIRED",
            ),
            (-32009, Code::FailedPrecondition, "VERSION_NOT_SUPPORTED"),
            (-32602, Code::InvalidArgument, "INVALID_PARAMS"),
            (-32603, Code::Internal, "INTERNAL_ERROR"),
        ];
        for (code, grpc, reason) in table {
            let kind = ErrorKind::from_code(code).unwrap();
            let s = from_rpc(JsonRpcError::new(kind, "m").into());
            assert_eq!(s.code(), grpc, "{code}");
            assert_eq!(s.message(), "m");
            let info = error_info(&s).unwrap();
            assert_eq!(
                (info.reason.as_str(), info.domain.as_str()),
                (reason, ERROR_DOMAIN)
            );
        }
    }

    #[test]
    fn only_server_faults_are_server_faults() {
        let server = [Code::Internal, Code::Unknown, Code::DataLoss];
        for code in server {
            assert!(is_server_fault(code), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::NotFound,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::ResourceExhausted,
            Code::Unavailable,
            Code::Cancelled,
            Code::DeadlineExceeded,
            Code::AlreadyExists,
            Code::Aborted,
        ] {
            assert!(!is_server_fault(code), "{code:?}");
        }
    }

    #[test]
    fn retry_later_refusals_keep_their_meaning_and_metadata_travels() {
        let busy = RpcError {
            error: JsonRpcError::internal("full"),
            status: StatusCode::SERVICE_UNAVAILABLE,
        };
        assert_eq!(from_rpc(busy).code(), Code::Unavailable);
        let limited = RpcError {
            error: JsonRpcError::internal("too many"),
            status: StatusCode::TOO_MANY_REQUESTS,
        };
        assert_eq!(from_rpc(limited).code(), Code::ResourceExhausted);
        let missing = JsonRpcError::new(ErrorKind::TaskNotFound, "no").with_info("taskId", "t-1");
        let info = error_info(&from_rpc(missing.into())).unwrap();
        assert_eq!(info.metadata.get("taskId").map(String::as_str), Some("t-1"));
    }
}

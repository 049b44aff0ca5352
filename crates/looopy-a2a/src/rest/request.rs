//! Reading an HTTP+JSON request into the parameters of the equivalent v1.0 call: the
//! `A2A-Version` check, the body's media type and JSON, and query parameters (specification
//! §11.5) — all turned into the one `params` object the JSON-RPC binding would receive, so
//! both bindings validate through the same [`v1::Call`](crate::v1::Call).

use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, Uri};
use serde_json::{Map, Value};

use crate::http::RpcError;
use crate::{ErrorKind, JsonRpcError, ProtocolVersion};

/// Query parameters that are booleans (ProtoJSON `bool`), sent as `true`/`false`.
const BOOLEAN_PARAMS: &[&str] = &["includeArtifacts"];

/// Checks the `A2A-Version` header (or query parameter). This binding speaks v1.0 only, and
/// its routes only exist in the v1.0 shape (v0.3's REST routes had a `/v1` prefix), so a
/// request without a version is read as v1.0, like a JSON-RPC request naming a v1.0
/// method; an explicit `0.3`, or any version this server does not know, is
/// `VersionNotSupportedError`.
pub(crate) fn check_version(headers: &HeaderMap, uri: &Uri) -> Result<(), RpcError> {
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
        None => query_pairs(uri)
            .ok()
            .and_then(|pairs| {
                pairs
                    .into_iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("A2A-Version"))
            })
            .map(|(_, v)| v),
    };
    let Some(declared) = declared.filter(|v| !v.trim().is_empty()) else {
        return Ok(());
    };
    match ProtocolVersion::from_header(Some(&declared))? {
        ProtocolVersion::V1_0 => Ok(()),
        _ => Err(JsonRpcError::new(
            ErrorKind::VersionNotSupported,
            "The HTTP+JSON binding speaks A2A 1.0; v0.3 clients use the JSON-RPC interface",
        )
        .into()),
    }
}

/// The request body as a JSON object: empty for no body; otherwise it must be JSON (by its
/// `Content-Type`, when it declares one: the JSON-RPC endpoint's rule) and an object.
pub(crate) fn body_object(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Map<String, Value>, RpcError> {
    let body = body.map_err(|rejection| {
        RpcError::from(JsonRpcError::new(
            ErrorKind::InvalidRequest,
            format!(
                "the request body could not be read: {}",
                rejection.body_text()
            ),
        ))
    })?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    // The same media-type rule as the JSON-RPC endpoint: `415` with
    // `ContentTypeNotSupportedError` for a body declared as something other than JSON.
    crate::http::rpc::require_json(headers)?;
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(JsonRpcError::new(
            ErrorKind::InvalidRequest,
            "the request body must be a JSON object",
        )
        .into()),
        Err(e) => Err(JsonRpcError::new(
            ErrorKind::ParseError,
            format!("the request body is not valid JSON: {e}"),
        )
        .into()),
    }
}

/// The query parameters as a params object: names in camelCase (proto field names are
/// converted, `history_length` → `historyLength`), booleans as JSON booleans, everything
/// else as strings (integers in strings are valid ProtoJSON and read as such). A repeated
/// name keeps its last value; `A2A-Version` is not a parameter.
pub(crate) fn query_object(uri: &Uri) -> Result<Map<String, Value>, RpcError> {
    let pairs = query_pairs(uri).map_err(|e| {
        RpcError::invalid_params(format_args!("the query string is not valid: {e}"))
    })?;
    let mut params = Map::new();
    for (name, value) in pairs {
        if name.eq_ignore_ascii_case("A2A-Version") {
            continue;
        }
        let name = camel_case(&name);
        let value = if BOOLEAN_PARAMS.contains(&name.as_str()) {
            match value.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => Value::String(value),
            }
        } else {
            Value::String(value)
        };
        params.insert(name, value);
    }
    Ok(params)
}

fn query_pairs(uri: &Uri) -> Result<Vec<(String, String)>, String> {
    Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|Query(pairs)| pairs)
        .map_err(|e| e.body_text())
}

/// `history_length` → `historyLength`; camelCase names are unchanged.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Sets `key` to the path's value. The path names the resource, so a body that names
/// another one is a contradiction (invalid params) rather than silently overridden.
pub(crate) fn set_from_path(
    params: &mut Map<String, Value>,
    key: &str,
    value: &str,
) -> Result<(), RpcError> {
    let snake = snake_case(key);
    for name in [key, snake.as_str()] {
        match params.get(name) {
            Some(Value::String(s)) if s == value || s.is_empty() => {}
            None | Some(Value::Null) => {}
            Some(other) => {
                return Err(RpcError::invalid_params(format_args!(
                    "{name} {other} in the request differs from {value:?} in the path"
                )));
            }
        }
    }
    params.remove(snake.as_str());
    params.insert(key.to_owned(), Value::String(value.to_owned()));
    Ok(())
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn versions_absent_or_1_0_pass_and_others_are_refused() {
        let uri: Uri = "/a2a/rest/tasks".parse().unwrap();
        assert!(check_version(&HeaderMap::new(), &uri).is_ok());
        assert!(check_version(&headers(&[("a2a-version", "1.0")]), &uri).is_ok());
        assert!(check_version(&headers(&[("a2a-version", "1.0.3")]), &uri).is_ok());
        for bad in ["0.3", "2.0", "x"] {
            let e = check_version(&headers(&[("a2a-version", bad)]), &uri).unwrap_err();
            assert_eq!(e.error.code, -32009, "{bad}");
        }
        let query: Uri = "/a2a/rest/tasks?A2A-Version=0.3".parse().unwrap();
        assert!(check_version(&HeaderMap::new(), &query).is_err());
    }

    #[test]
    fn bodies_must_be_json_objects_of_a_json_type() {
        let json_type = headers(&[("content-type", "application/json")]);
        let ok = body_object(&json_type, Ok(Bytes::from_static(b"{\"a\":1}"))).unwrap();
        assert_eq!(Value::Object(ok), json!({"a": 1}));
        assert!(
            body_object(&json_type, Ok(Bytes::new()))
                .unwrap()
                .is_empty()
        );
        let e = body_object(&json_type, Ok(Bytes::from_static(b"{"))).unwrap_err();
        assert_eq!(e.error.code, -32700);
        let e = body_object(&json_type, Ok(Bytes::from_static(b"[1]"))).unwrap_err();
        assert_eq!(e.error.code, -32600);
        let form = headers(&[("content-type", "text/plain")]);
        let e = body_object(&form, Ok(Bytes::from_static(b"{}"))).unwrap_err();
        assert_eq!(e.error.code, -32005);
        // No Content-Type: read as JSON.
        assert!(body_object(&HeaderMap::new(), Ok(Bytes::from_static(b"{}"))).is_ok());
    }

    #[test]
    fn query_names_become_camel_case_and_booleans_booleans() {
        let uri: Uri =
            "/t?context_id=c%201&pageSize=5&includeArtifacts=true&A2A-Version=1.0&history_length=2"
                .parse()
                .unwrap();
        assert_eq!(
            Value::Object(query_object(&uri).unwrap()),
            json!({"contextId": "c 1", "pageSize": "5", "includeArtifacts": true, "historyLength": "2"})
        );
    }

    #[test]
    fn the_path_names_the_resource() {
        let mut params = Map::new();
        set_from_path(&mut params, "taskId", "t1").unwrap();
        assert_eq!(params["taskId"], "t1");
        let mut params = json!({"task_id": "t1", "id": ""})
            .as_object()
            .unwrap()
            .clone();
        set_from_path(&mut params, "taskId", "t1").unwrap();
        set_from_path(&mut params, "id", "t1").unwrap();
        assert_eq!(Value::Object(params), json!({"taskId": "t1", "id": "t1"}));
        let mut params = json!({"id": "other"}).as_object().unwrap().clone();
        assert_eq!(
            set_from_path(&mut params, "id", "t1")
                .unwrap_err()
                .error
                .code,
            -32602
        );
    }
}

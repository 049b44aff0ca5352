//! A2A conformance, the agent card (issue 11, failure 8) and the official Python SDK as
//! the peer (`tests/e2e/conformance_sdk.py`): the v1.0 card checked against a JSON Schema
//! of the specification's `AgentCard` and parsed strictly by the SDK (also without
//! `A2A-Version`), the v0.3 card that `A2A-Version: 0.3` and the legacy `agent.json` get,
//! caching headers, and a paused task subscribed to,
//! answered and finished with the SDK's own client (v1.0 and its v0.3 transport). Rules
//! 1–7: `conformance.rs`.
//!
//! The SDK test skips (with a message) when python3 or the SDK is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`.

#[path = "../../looopy-server/tests/e2e/support.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};
use support::*;

/// The v1.0 `AgentCard` as a JSON Schema, written from the specification's `a2a.proto`
/// (`AgentCard`, `AgentInterface`, `AgentCapabilities`, `AgentSkill`, `SecurityScheme`,
/// `SecurityRequirement`): its ProtoJSON field names only (`additionalProperties: false`),
/// the fields marked REQUIRED, and the scheme oneof.
fn v1_card_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let requirement = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"schemes": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": false,
            "properties": {"list": strings}}}}
    });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "description", "supportedInterfaces", "version", "capabilities",
                     "defaultInputModes", "defaultOutputModes", "skills"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "description": {"type": "string", "minLength": 1},
            "supportedInterfaces": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["url", "protocolBinding", "protocolVersion"],
                "properties": {
                    "url": {"type": "string", "pattern": "^https?://"},
                    "protocolBinding": {"type": "string", "minLength": 1},
                    "tenant": {"type": "string"},
                    "protocolVersion": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"}
                }}},
            "provider": {"type": "object", "additionalProperties": false,
                "required": ["url", "organization"],
                "properties": {"url": {"type": "string"}, "organization": {"type": "string"}}},
            "version": {"type": "string", "minLength": 1},
            "documentationUrl": {"type": "string"},
            "capabilities": {"type": "object", "additionalProperties": false, "properties": {
                "streaming": {"type": "boolean"},
                "pushNotifications": {"type": "boolean"},
                "extensions": {"type": "array"},
                "extendedAgentCard": {"type": "boolean"}
            }},
            "securitySchemes": {"type": "object", "additionalProperties": {
                "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": false,
                "properties": {
                    "apiKeySecurityScheme": {"type": "object"},
                    "httpAuthSecurityScheme": {"type": "object", "additionalProperties": false,
                        "required": ["scheme"],
                        "properties": {"description": {"type": "string"}, "scheme": {"type": "string"},
                                       "bearerFormat": {"type": "string"}}},
                    "oauth2SecurityScheme": {"type": "object"},
                    "openIdConnectSecurityScheme": {"type": "object"},
                    "mtlsSecurityScheme": {"type": "object"}
                }}},
            "securityRequirements": {"type": "array", "items": requirement},
            "defaultInputModes": strings,
            "defaultOutputModes": strings,
            "skills": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["id", "name", "description", "tags"],
                "properties": {
                    "id": {"type": "string"}, "name": {"type": "string"},
                    "description": {"type": "string"}, "tags": strings, "examples": strings,
                    "inputModes": strings, "outputModes": strings,
                    "securityRequirements": {"type": "array", "items": requirement}
                }}},
            "signatures": {"type": "array"},
            "iconUrl": {"type": "string"}
        }
    })
}

async fn card(server: &TestServer, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = server
        .client
        .get(server.url("/.well-known/agent-card.json"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    within("the agent card", req.send()).await.unwrap()
}

// 8. The v1.0 card is schema-valid and the default; the v0.3 card on request; caching.
#[tokio::test]
async fn the_v1_card_is_schema_valid_and_v03_clients_get_theirs() {
    let schema = jsonschema::validator_for(&v1_card_schema()).unwrap();
    for tokens in [vec![], vec!["card-token".to_owned()]] {
        let bearer = !tokens.is_empty();
        let server = TestServer::with_config(|c| c.tokens = tokens).await;
        let url = format!("http://{}/a2a", server.addr);
        for header in [("A2A-Version", "1.0"), ("A2A-Version", "1.0.3")] {
            let r = card(&server, &[header]).await;
            assert_eq!(r.status(), 200);
            let v1: Value = r.json().await.unwrap();
            let errors: Vec<String> = schema
                .iter_errors(&v1)
                .map(|e| format!("{e} at {}", e.instance_path))
                .collect();
            assert!(errors.is_empty(), "{errors:#?}\n{v1:#}");
            assert_eq!(v1["supportedInterfaces"][0]["url"], url.as_str());
            assert_eq!(v1["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
            assert_eq!(v1["supportedInterfaces"][0]["protocolVersion"], "1.0");
            let last = v1["supportedInterfaces"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(
                last,
                json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})
            );
            assert_eq!(v1.get("securitySchemes").is_some(), bearer);
        }
        // The query parameter works like the header.
        let r = server
            .client
            .get(server.url("/.well-known/agent-card.json?A2A-Version=1.0"))
            .send()
            .await
            .unwrap();
        let by_query: Value = r.json().await.unwrap();
        assert!(schema.is_valid(&by_query));

        // No header: the v1.0 card (what the TCK and a2a-sdk 1.x resolvers read).
        let plain: Value = card(&server, &[]).await.json().await.unwrap();
        assert!(schema.is_valid(&plain), "{plain:#}");
        assert_eq!(plain["supportedInterfaces"][0]["url"], url.as_str());

        // 0.3, or no header on the legacy path: the v0.3 card, which the v1.0 schema refuses.
        let legacy = || async {
            let r = server
                .client
                .get(server.url("/.well-known/agent.json"))
                .send();
            within("the legacy card", r).await.unwrap()
        };
        for response in [
            card(&server, &[("A2A-Version", "0.3")]).await,
            legacy().await,
        ] {
            let old: Value = response.json().await.unwrap();
            assert!(!schema.is_valid(&old));
            assert_eq!(old["url"], url.as_str());
            assert_eq!(old["preferredTransport"], "JSONRPC");
            assert_eq!(old["protocolVersion"], "0.3.0");
            assert_eq!(old["capabilities"]["streaming"], true);
            assert!(old.get("supportedInterfaces").is_none());
            assert_eq!(old.get("security").is_some(), bearer);
        }
        server.shutdown().await;
    }

    // Caching: ETag, Last-Modified, Cache-Control, Vary; 304 on either validator.
    let server = TestServer::start().await;
    let r = card(&server, &[("A2A-Version", "1.0")]).await;
    let h = r.headers().clone();
    let etag = h["etag"].to_str().unwrap().to_owned();
    let modified = h["last-modified"].to_str().unwrap().to_owned();
    assert!(h["cache-control"].to_str().unwrap().contains("max-age="));
    assert!(h["vary"].to_str().unwrap().contains("A2A-Version"));
    assert!(modified.ends_with(" GMT"), "{modified}");
    let old = card(&server, &[("A2A-Version", "0.3")]).await;
    assert_ne!(
        old.headers()["etag"].to_str().unwrap(),
        etag,
        "the two cards are two entities"
    );
    for (validators, expected) in [
        (vec![("If-None-Match", etag.clone())], 304),
        (vec![("If-None-Match", format!("W/{etag}"))], 304),
        (vec![("If-None-Match", "\"other\"".to_owned())], 200),
        (vec![("If-Modified-Since", modified.clone())], 304),
        (
            vec![(
                "If-Modified-Since",
                "Thu, 01 Jan 1970 00:00:00 GMT".to_owned(),
            )],
            200,
        ),
        // If-None-Match decides when both are sent.
        (
            vec![
                ("If-None-Match", "\"other\"".to_owned()),
                ("If-Modified-Since", modified.clone()),
            ],
            200,
        ),
    ] {
        let mut headers = vec![("A2A-Version", "1.0")];
        headers.extend(validators.iter().map(|(k, v)| (*k, v.as_str())));
        let r = card(&server, &headers).await;
        assert_eq!(r.status().as_u16(), expected, "{validators:?}");
        if expected == 304 {
            assert_eq!(r.headers()["etag"].to_str().unwrap(), etag);
            assert_eq!(r.headers()["last-modified"].to_str().unwrap(), modified);
            assert!(r.bytes().await.unwrap().is_empty());
        }
    }
    server.shutdown().await;
}

fn sdk_missing() -> Option<String> {
    let probe = std::process::Command::new("python3")
        .args([
            "-c",
            "import a2a.client, a2a.types, a2a.compat.v0_3.types, a2a.compat.v0_3.jsonrpc_transport, httpx",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Err(e) => Some(format!("python3 is not available ({e})")),
        Ok(out) if !out.status.success() => Some(format!(
            "the a2a-sdk Python package (1.x) is not installed (python3 -m pip install 'a2a-sdk>=1.3,<2' httpx): {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )),
        Ok(_) => None,
    }
}

/// The official SDK: the v1.0 card through a strict ProtoJSON parse, the v0.3 card through
/// the SDK's v0.3 model, and a paused task subscribed to, answered and finished, over v1.0
/// and the SDK's v0.3 transport.
#[tokio::test]
async fn conformance_python_sdk() {
    if skip_without(sdk_missing()) {
        return;
    }
    const TOKEN: &str = "conformance-token";
    let server = TestServer::with_config(|c| c.tokens = vec![TOKEN.into()]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/conformance_sdk.py");
    let child = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(format!("http://{}", server.addr))
        .arg(TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = within(
        "the Python SDK conformance client",
        child.wait_with_output(),
    )
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let step = |name: &str| -> &Value {
        lines
            .iter()
            .find(|l| l["step"] == name)
            .unwrap_or_else(|| panic!("no {name} step in\n{stdout}\n{stderr}"))
    };
    assert_eq!(lines.last().unwrap()["step"], "done", "{stdout}");

    // The v1.0 card parses strictly (unknown fields are errors) into the SDK's AgentCard.
    let v1 = step("card-v1");
    assert_eq!(v1["strict"], true, "{v1}");
    let url = format!("http://{}/a2a", server.addr);
    assert_eq!(
        v1["interfaces"][0],
        json!({"url": url, "binding": "JSONRPC", "version": "1.0"})
    );
    assert_eq!(v1["bearer"], "bearer");
    // Without a header, `agent-card.json` is the same strict v1.0 card.
    let plain = step("card-plain");
    assert_eq!(plain["strict"], true, "{plain}");
    assert_eq!(plain["interfaces"], v1["interfaces"]);
    // The card a v0.3 client fetches at the legacy path (no header) is a valid v0.3 card for
    // the SDK's model, and the v1.0 SDK's own resolver reads it too (as a 0.3 interface).
    let old = step("card-v03");
    assert_eq!(old["valid"], true, "{old}");
    assert_eq!(old["url"], url.as_str());
    assert_eq!(old["resolved"][0]["version"], "0.3.0");
    // ClientFactory.create_from_url sends A2A-Version: 1.0 and gets the v1.0 card.
    let factory = step("factory");
    assert_eq!(factory["interfaces"][0]["version"], "1.0", "{factory}");

    for prefix in ["v1", "v03"] {
        let sub = step(&format!("{prefix}-subscribe"));
        let states: Vec<&str> = sub["states"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert_eq!(
            states.first(),
            Some(&"TASK_STATE_INPUT_REQUIRED"),
            "{prefix}: {sub}"
        );
        assert!(states.contains(&"TASK_STATE_WORKING"), "{prefix}: {sub}");
        assert_eq!(
            states.last(),
            Some(&"TASK_STATE_COMPLETED"),
            "{prefix}: {sub}"
        );
        assert_eq!(sub["text"], "Thanks, Ada!", "{prefix}: {sub}");
        let history = step(&format!("{prefix}-history"));
        let ids: Vec<&str> = history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["messageId"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids.first(),
            Some(&format!("{prefix}-question").as_str()),
            "{history}"
        );
        assert!(
            ids.contains(&format!("{prefix}-answer").as_str()),
            "{history}"
        );
        let answer = history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["messageId"] == format!("{prefix}-answer"))
            .unwrap();
        assert_eq!(answer["role"], "ROLE_USER");
        assert_eq!(answer["text"], "Ada");
    }
    server.shutdown().await;
}

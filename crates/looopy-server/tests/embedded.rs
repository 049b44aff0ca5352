//! `looopy_server::router(agent)` nested inside someone else's axum application, served by
//! `axum::serve` on loopback: the agent's routes work under the prefix, next to the
//! application's own, with a custom closure tool, over a real socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_stream::sse::SseDecoder;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct OrderArgs {
    order_id: u64,
}

#[tokio::test]
async fn the_router_serves_an_agent_with_custom_tools_inside_another_app() {
    let order_status = tool_fn(
        "order_status",
        "Looks up an order.",
        |args: OrderArgs, _ctx: ToolContext| async move {
            Ok::<_, ToolFailure>(format!("order {} shipped", args.order_id))
        },
    );
    let model = ScriptedProvider::from_responses(vec![
        Response::new().tool_call("order_status", serde_json::json!({"order_id": 7})),
        Response::new().text("Status: {{last_tool_result}}."),
    ]);
    let agent = Agent::builder()
        .provider(model)
        .tool(order_status)
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "my service" }))
        .nest("/agent", looopy_server::router(agent).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = reqwest::Client::new();
    assert_eq!(
        client
            .get(&base)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "my service"
    );
    let health = client
        .get(format!("{base}/agent/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // The web page is served under the prefix too, and calls the API relative to itself.
    for page in ["/agent"] {
        let response = client.get(format!("{base}{page}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{page}");
        let html = response.text().await.unwrap();
        assert!(html.contains("API + \"v1/contexts/\""), "{page}");
    }

    let body = client
        .post(format!("{base}/agent/v1/contexts/ctx-embed/messages"))
        .header("accept", "text/event-stream")
        .json(&serde_json::json!({"message": "where is order 7?"}))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let events = SseDecoder::new().push(&body);
    let data: Vec<serde_json::Value> = events
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    let tool = data
        .iter()
        .find(|e| e["kind"] == "tool-complete")
        .expect("the custom tool ran");
    assert_eq!(tool["result"], "order 7 shipped");
    let last = data.last().unwrap();
    assert_eq!(last["kind"], "task-complete");
    assert_eq!(last["content"], "Status: order 7 shipped.");
    server.abort();
}

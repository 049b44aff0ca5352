//! Serving a Looopy agent with your own tools inside your own axum application: the agent's
//! routes (SSE streams, REST, A2A, the web page) are nested under `/agent`, next to a route
//! of the application.
//!
//! Run with `cargo run -p looopy-server --example serve_embedded`, then open
//! http://127.0.0.1:8080/agent in a browser (the scripted model answers offline).

use looopy_agent::Agent;
use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_llm::scripted::ScriptedProvider;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct OrderArgs {
    /// The order number.
    order_id: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let order_status = tool_fn(
        "order_status",
        "Looks up the shipping status of an order.",
        |args: OrderArgs, _ctx: ToolContext| async move {
            Ok::<_, ToolFailure>(serde_json::json!({"orderId": args.order_id, "status": "shipped"}))
        },
    );
    let agent = Agent::builder()
        .provider(ScriptedProvider::builtin())
        .builtin_tools()
        .tool(order_status)
        .build()?;

    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async { "my service; the agent is at /agent" }),
        )
        .nest("/agent", looopy_server::router(agent)?);
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("serving on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

//! The cost of calling a tool over MCP (stdio) instead of natively.
//!
//! One call at a time, each timed from `DynTool::call_json` to its result — the path the
//! agent's tool runner takes — for:
//! - a native Looopy tool (`tool_fn`) doing what the servers' `echo` does;
//! - `echo` of the Python test server (`tests/e2e/mcp_server.py`, the official `mcp`
//!   package) through Looopy's MCP tool;
//! - `echo` of the npm reference server (`@modelcontextprotocol/server-everything`, node)
//!   through Looopy's MCP tool;
//! - the same two servers called with the rmcp client directly (`Peer::call_tool`), which is
//!   the floor: the pipe, JSON-RPC and the server's own work. The difference to the row
//!   above is what Looopy adds (progress routing, the tool-list check, result mapping).
//!
//! A server that is not installed is left out (with a note). Calls per case:
//! `LOOOPY_BENCH_CALLS` (default 2,000), after 200 warm-up calls.
//!
//! ```text
//! cargo bench -p looopy-mcp --bench mcp_call
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use looopy_agent::tool::{ToolContext, ToolFailure, tool_fn};
use looopy_mcp::{McpServerSpec, McpTools};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const WARM_UP: usize = 200;

fn main() {
    let calls: usize = std::env::var("LOOOPY_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(calls));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

async fn run(calls: usize) {
    println!("{calls} sequential calls per case ({WARM_UP} warm-up calls first)\n");
    println!("| case | p50 | p90 | p99 | mean |\n|---|---|---|---|---|");
    let native = tool_fn(
        "echo",
        "Returns the text it is given.",
        |a: EchoArgs, _ctx: ToolContext| async move {
            Ok::<_, ToolFailure>(format!("echo: {}", a.text))
        },
    );
    let native = looopy_agent::tool::IntoDynTool::into_dyn_tool(native);
    let args = json!({"text": "hello"});
    let mut i = 0u64;
    row("native tool", calls, || {
        i += 1;
        native.call_json(args.clone(), ToolContext::new(format!("c{i}")))
    })
    .await;

    let python = support::python_missing().is_none();
    if python {
        let spec = McpServerSpec::stdio(
            "py",
            "python3",
            vec![support::python_script().display().to_string()],
        );
        via_looopy("MCP stdio, Python server", spec, "py__echo", &args, calls).await;
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(support::python_script());
        direct("rmcp directly, Python server", cmd, &args, calls).await;
    } else {
        println!("| MCP stdio, Python server | not installed | | | |");
    }
    match support::everything() {
        Ok(program) => {
            let spec = McpServerSpec::stdio(
                "everything",
                program.display().to_string(),
                vec!["stdio".into()],
            );
            let args = json!({"message": "hello"});
            via_looopy(
                "MCP stdio, server-everything (node)",
                spec,
                "everything__echo",
                &args,
                calls,
            )
            .await;
            direct(
                "rmcp directly, server-everything",
                command(&program),
                &args,
                calls,
            )
            .await;
        }
        Err(why) => println!("| MCP stdio, server-everything | not installed ({why}) | | | |"),
    }
}

fn command(program: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("stdio");
    cmd
}

async fn via_looopy(label: &str, spec: McpServerSpec, tool: &str, args: &Value, calls: usize) {
    let mcp = McpTools::connect(vec![spec]).await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let tool = mcp.registry().get(tool).unwrap();
    let mut i = 0u64;
    row(label, calls, || {
        i += 1;
        tool.call_json(args.clone(), ToolContext::new(format!("c{i}")))
    })
    .await;
}

async fn direct(label: &str, cmd: tokio::process::Command, args: &Value, calls: usize) {
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.unwrap();
    let Value::Object(arguments) = args.clone() else {
        unreachable!()
    };
    let peer = client.peer().clone();
    row(label, calls, || {
        let peer = peer.clone();
        let params = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
        async move { peer.call_tool(params).await.map(|_| ()) }
    })
    .await;
    let _ = client.cancel().await;
}

/// Times `calls` sequential calls of `call` (after the warm-up) and prints one table row.
async fn row<F, T, E>(label: &str, calls: usize, mut call: impl FnMut() -> F)
where
    F: Future<Output = Result<T, E>>,
    E: std::fmt::Debug,
{
    for _ in 0..WARM_UP {
        call().await.unwrap();
    }
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        call().await.unwrap();
        times.push(started.elapsed());
    }
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let mean = times.iter().sum::<Duration>() / u32::try_from(times.len()).unwrap();
    println!(
        "| {label} | {} | {} | {} | {} |",
        show(at(0.50)),
        show(at(0.90)),
        show(at(0.99)),
        show(mean)
    );
}

fn show(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 1_000.0 {
        format!("{micros:.1} µs")
    } else {
        format!("{:.2} ms", micros / 1_000.0)
    }
}

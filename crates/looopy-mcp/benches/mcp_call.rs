//! The cost of calling a tool over MCP (stdio) instead of natively.
//!
//! One call at a time, each timed from `DynTool::call_json` to its result — the path the
//! agent's tool runner takes — for:
//! - a native Looopy tool (`tool_fn`) doing what the servers' `echo` does;
//! - `echo` of the Python test server (`tests/e2e/mcp_server.py`, the official `mcp`
//!   package) through Looopy's MCP tool;
//! - `echo` of the npm reference server (`@modelcontextprotocol/server-everything`, node)
//!   through Looopy's MCP tool;
//! - the same two server programs called with the rmcp client directly (`Peer::call_tool`),
//!   which is the floor: the pipe, JSON-RPC and the server's own work. The difference is
//!   what Looopy adds (progress routing, the tool-list check, result mapping). The two
//!   clients take turns call by call, so both see the same machine load.
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
    let mut native_times = Times::default();
    for i in 0..WARM_UP + calls {
        let started = Instant::now();
        native
            .call_json(args.clone(), ToolContext::new(format!("c{i}")))
            .await
            .unwrap();
        native_times.record(i, started);
    }
    native_times.print("native tool");

    if support::python_missing().is_none() {
        let spec = McpServerSpec::stdio(
            "py",
            "python3",
            vec![support::python_script().display().to_string()],
        );
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(support::python_script());
        compare("Python server", spec, "py__echo", cmd, &args, calls).await;
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
            let mut cmd = tokio::process::Command::new(&program);
            cmd.arg("stdio");
            let args = json!({"message": "hello"});
            compare(
                "server-everything (node)",
                spec,
                "everything__echo",
                cmd,
                &args,
                calls,
            )
            .await;
        }
        Err(why) => println!("| MCP stdio, server-everything | not installed ({why}) | | | |"),
    }
}

/// `echo` of one server program through Looopy's MCP tool and through a plain rmcp client
/// (each with a process of its own), call for call in turn, so both see the same load.
async fn compare(
    label: &str,
    spec: McpServerSpec,
    tool: &str,
    mut cmd: tokio::process::Command,
    args: &Value,
    calls: usize,
) {
    let mcp = McpTools::connect(vec![spec]).await;
    assert!(mcp.failures().is_empty(), "{:?}", mcp.failures());
    let tool = mcp.registry().get(tool).unwrap();

    cmd.stderr(std::process::Stdio::null());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.unwrap();
    let peer = client.peer().clone();
    let Value::Object(arguments) = args.clone() else {
        unreachable!()
    };

    let (mut looopy, mut direct) = (Times::default(), Times::default());
    for i in 0..WARM_UP + calls {
        let started = Instant::now();
        tool.call_json(args.clone(), ToolContext::new(format!("c{i}")))
            .await
            .unwrap();
        looopy.record(i, started);
        let started = Instant::now();
        let params = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
        peer.call_tool(params).await.unwrap();
        direct.record(i, started);
    }
    looopy.print(&format!("MCP stdio through Looopy, {label}"));
    direct.print(&format!("MCP stdio, rmcp client directly, {label}"));
    let _ = client.cancel().await;
}

/// Call durations after the warm-up.
#[derive(Default)]
struct Times(Vec<Duration>);

impl Times {
    fn record(&mut self, i: usize, started: Instant) {
        let took = started.elapsed();
        if i >= WARM_UP {
            self.0.push(took);
        }
    }

    /// One table row: p50, p90, p99 and mean.
    fn print(mut self, label: &str) {
        let times = &mut self.0;
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
}

fn show(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 1_000.0 {
        format!("{micros:.1} µs")
    } else {
        format!("{:.2} ms", micros / 1_000.0)
    }
}

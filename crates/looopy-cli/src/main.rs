//! `looopy`: the command-line face of the runtime — parse, run, chat, resume, serve, tail.

mod agent_setup;
mod chat_cmd;
mod cli;
mod parse_cmd;
mod render;
mod run_cmd;
mod serve_cmd;
mod serve_config;
mod tail_cmd;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn init_tracing() {
    // Diagnostics go to stderr so stdout stays a clean event stream; RUST_LOG controls them.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    if let Command::Parse(args) = &cli.command {
        // `parse` buffers its output itself and flushes when its input runs dry.
        let stdin = std::io::stdin().lock();
        let stdout = std::io::stdout().lock();
        return match parse_cmd::run(args, stdin, stdout) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("looopy parse: {e}");
                ExitCode::from(2)
            }
        };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("looopy: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Parse(_) => Ok(ExitCode::SUCCESS),
            Command::Run(args) => run_cmd::run(args).await,
            Command::Resume(args) => run_cmd::resume(args).await,
            Command::Chat(args) => chat_cmd::run(args).await,
            Command::Serve(args) => serve_cmd::run(args).await,
            Command::Tail(args) => tail_cmd::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        // One writer per database, or a damaged one: a usage error, like clap's.
        Err(e) if e.downcast_ref::<agent_setup::DatabaseRefused>().is_some() => {
            eprintln!("looopy: {e:#}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("looopy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

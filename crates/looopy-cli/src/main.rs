//! `looopy`: the command-line face of the runtime — parse, run, chat, resume, serve, tail,
//! artifacts, a2a, mcp, db.

mod a2a_cmd;
mod agent_setup;
mod artifact_line;
mod artifacts_cmd;
mod artifacts_out;
mod artifacts_remote;
mod auth_prompt;
mod chat_cmd;
mod cli;
mod db_cmd;
mod errors;
mod file_config;
mod interrupts;
mod mcp_cmd;
mod parse_cmd;
mod remote;
mod render;
mod run_cmd;
mod serve_cmd;
mod serve_config;
mod status;
mod tail_cmd;
mod telemetry;
mod waterfall;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// jemalloc, not the system allocator: with glibc's malloc a server that has parsed a few
/// large request bodies keeps hundreds of MB it no longer uses (freed chunks stay in its
/// arenas), while jemalloc's background threads hand them back to the OS within seconds
/// (BENCHMARKS.md, "RSS after large payloads"). Unprefixed, so the C code in the binary
/// (SQLite) allocates from it too. `--no-default-features` builds with the system allocator.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// What the command asks for besides log lines: an OTLP endpoint, the `--verbose` waterfall.
fn telemetry_options(command: &Command) -> telemetry::Options {
    let agent = match command {
        Command::Run(args) => Some(&args.agent),
        Command::Chat(args) => Some(&args.agent),
        Command::Resume(args) => Some(&args.agent),
        Command::Serve(args) => Some(&args.agent),
        Command::Mcp(args) => Some(&args.agent),
        Command::Parse(_)
        | Command::Tail(_)
        | Command::Artifacts(_)
        | Command::A2a(_)
        | Command::Db(_) => None,
    };
    // The config file's `otlp_endpoint` when no flag or variable gives one; a broken file
    // is reported by the command itself, with its exit status.
    let otlp_endpoint = agent.and_then(|a| {
        a.otlp_endpoint.clone().or_else(|| {
            file_config::load_file_config(a.config.as_deref())
                .ok()
                .and_then(|file| file.otlp_endpoint)
        })
    });
    let verbose = matches!(command, Command::Run(args) if args.verbose);
    telemetry::Options {
        otlp_endpoint,
        waterfall: verbose,
        interactive: matches!(
            command,
            Command::Run(_) | Command::Chat(_) | Command::Resume(_)
        ),
        verbose,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Parse(args) = &cli.command {
        if let Err(e) = telemetry::init(telemetry::Options::default()) {
            eprintln!("looopy: {}", errors::one_line(&e));
        }
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
    // Inside the runtime: the OTLP exporter sends its requests on it.
    let telemetry = {
        let _entered = runtime.enter();
        match telemetry::init(telemetry_options(&cli.command)) {
            Ok(telemetry) => telemetry,
            Err(e) => {
                eprintln!("looopy: {}", errors::one_line(&e));
                return ExitCode::from(2);
            }
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Parse(_) => Ok(ExitCode::SUCCESS),
            // Through the server holding the database, if one does (remote/mod.rs).
            Command::Run(args) => remote::run(args).await,
            Command::Resume(args) => remote::resume(args).await,
            Command::Chat(args) => remote::chat(args).await,
            Command::Serve(args) => serve_cmd::run(*args).await,
            Command::Tail(args) => tail_cmd::run(args).await,
            Command::Artifacts(args) => artifacts_cmd::run(args).await,
            Command::A2a(args) => a2a_cmd::run(args).await,
            Command::Mcp(args) => mcp_cmd::run(args).await,
            Command::Db(args) => db_cmd::run(args).await,
        }
    });
    // After the run, from this thread: the last spans are exported on the runtime's workers
    // while this waits for them.
    if let Some(waterfall) = telemetry.waterfall() {
        eprint!("{}", waterfall.render());
    }
    telemetry.shutdown();
    match result {
        Ok(code) => code,
        // A usage or input error (config file, unknown task, database in use or damaged)
        // exits 2 like clap's own; anything else 1 (docs/configuration.md, "Exit codes").
        Err(e) => {
            eprintln!("looopy: {}", errors::one_line(&e));
            errors::exit_code(&e)
        }
    }
}

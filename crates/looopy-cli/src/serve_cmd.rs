//! `looopy serve`: the agent behind HTTP. Shuts down gracefully on SIGINT or SIGTERM.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::ServeArgs;
use crate::{agent_setup, serve_config};

/// Reports a usage error the way clap does (exit status 2).
fn usage_error(message: &str) -> ExitCode {
    eprintln!("looopy serve: {message}");
    ExitCode::from(2)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested");
}

pub async fn run(args: ServeArgs) -> Result<ExitCode> {
    // Settings are checked before the database is opened: a usage error (exit 2) must
    // not leave side effects or wait for anything.
    let tokens = match serve_config::resolve_tokens(
        args.tokens.clone(),
        std::env::var_os(serve_config::TOKENS_ENV),
    ) {
        Ok(tokens) => tokens,
        Err(message) => return Ok(usage_error(&message)),
    };
    let peer_tokens = match serve_config::resolve_peer_tokens(
        args.peer_tokens.clone(),
        std::env::var_os(serve_config::PEER_TOKENS_ENV),
    ) {
        Ok(tokens) => tokens,
        Err(message) => return Ok(usage_error(&message)),
    };
    let file = agent_setup::load_file_config(args.agent.config.as_deref())?;
    let mut config = match serve_config::server_config(&args, &file, tokens, peer_tokens) {
        Ok(config) => config,
        Err(error) => return Ok(usage_error(&error.0)),
    };
    if let Err(error) = config.validate() {
        return Ok(usage_error(&error.to_string()));
    }
    let nats = args.nats.clone().or_else(|| file.nats.clone());
    let (agent, _) = agent_setup::build(&args.agent).await?;
    let store = agent.store().clone();
    if store.is_shared() {
        looopy_server::metrics::set_replica_label(store.replica_id());
        let bus = match &nats {
            Some(url) => {
                let mut options = looopy_store::BusOptions::default();
                // Deployments (and test runs) sharing one NATS server keep apart by prefix.
                if let Ok(prefix) = std::env::var("LOOOPY_NATS_PREFIX") {
                    options.prefix = prefix;
                }
                looopy_store::Bus::nats(&store, url, options)
                    .await
                    .with_context(|| format!("connecting to NATS at {url}"))?
            }
            None => looopy_store::Bus::postgres(&store)
                .await
                .context("listening for other replicas (PostgreSQL LISTEN/NOTIFY)")?,
        };
        eprintln!(
            "looopy replica {} on {} (bus: {})",
            store.replica_id(),
            store.location(),
            bus.kind()
        );
        config.bus = Some(bus);
    } else if nats.is_some() {
        return Ok(usage_error(
            "--nats needs a PostgreSQL --db (replicas share the database; a SQLite file has one writer)",
        ));
    }
    let bound = looopy_server::bind(config, agent).await?;
    let url = format!("http://{}", bound.local_addr());
    // So a second process refused the database can point its user here.
    if let Err(error) = bound.state().store().set_holder_address(&url) {
        tracing::warn!(%error, "could not record the server's address in the lock file");
    }
    eprintln!("looopy serving on {url}");
    if let Some(grpc) = bound.grpc_addr() {
        eprintln!("looopy serving A2A over gRPC on {grpc}");
    }
    bound.serve(shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

//! `deploy/compose.yaml` and `deploy/nginx.conf` as the README's scale-out walk-through uses
//! them, minus Docker (which CI does not have): each replica service's own command line and
//! environment start a real `looopy serve` — with the compose host names pointed at this
//! machine's PostgreSQL (a schema of the test's own) and NATS, and the listen address at a
//! loopback port — all three are ready, and a turn started through one streams gapless from
//! another. The nginx config balances over exactly those replicas, on the port they listen
//! on, without buffering streams. Needs the machine's PostgreSQL and NATS: skips without
//! them unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::Command;

use looopy_testkit::services::{self, TestSchema};
use serde_yaml::Value as Yaml;

use support::{context_events, done, ids, post_message, read_until};

fn deploy_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The replica services (`looopy-N`) of the compose file: name and command line.
fn replica_services(compose: &Yaml) -> Vec<(String, Vec<String>)> {
    let services = compose["services"].as_mapping().unwrap();
    let mut replicas: Vec<(String, Vec<String>)> = services
        .iter()
        .filter_map(|(name, service)| {
            let name = name.as_str()?;
            name.starts_with("looopy-").then(|| {
                let command = service["command"].as_sequence().unwrap();
                let args = command.iter().map(|a| a.as_str().unwrap().to_string());
                (name.to_string(), args.collect())
            })
        })
        .collect();
    replicas.sort();
    replicas
}

/// The value of `--flag=value` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let prefix = format!("{flag}=");
    args.iter().find_map(|a| a.strip_prefix(prefix.as_str()))
}

#[test]
fn the_balancer_spreads_over_exactly_the_replicas_without_buffering_streams() {
    let compose: Yaml = serde_yaml::from_str(&deploy_file("compose.yaml")).unwrap();
    let nginx = deploy_file("nginx.conf");
    let replicas = replica_services(&compose);
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    for (name, args) in &replicas {
        let port = flag(args, "--addr").unwrap().rsplit(':').next().unwrap();
        assert!(
            nginx.contains(&format!("server {name}:{port} ")),
            "nginx must balance over {name}:{port}"
        );
        assert_eq!(flag(args, "--replica-id"), Some(name.as_str()));
        // The same arguments but for the replica's name.
        let others: Vec<&String> = args
            .iter()
            .filter(|a| !a.starts_with("--replica-id="))
            .collect();
        let first: Vec<&String> = replicas[0]
            .1
            .iter()
            .filter(|a| !a.starts_with("--replica-id="))
            .collect();
        assert_eq!(others, first, "{name}");
    }
    assert_eq!(nginx.matches("server looopy-").count(), replicas.len());
    for setting in [
        "proxy_buffering off;",
        "proxy_http_version 1.1;",
        "proxy_set_header Connection \"\";",
    ] {
        assert!(nginx.contains(setting), "nginx.conf lacks {setting}");
    }
    // Readiness, not liveness, gates the balancer.
    let check = compose["x-looopy"]["healthcheck"]["test"]
        .as_sequence()
        .unwrap();
    assert!(
        check
            .iter()
            .any(|a| a.as_str().is_some_and(|a| a.ends_with("/readyz")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_replicas_command_lines_run_a_working_cluster() {
    let Some(schema) = TestSchema::create("compose").await else {
        return;
    };
    let Some(nats) = services::nats().await else {
        return;
    };
    let compose: Yaml = serde_yaml::from_str(&deploy_file("compose.yaml")).unwrap();
    let environment = compose["x-looopy"]["environment"].as_mapping().unwrap();
    let prefix = services::unique_name("compose");
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Vec::new();
    for (name, args) in replica_services(&compose) {
        // What only Docker's network provides, replaced; everything else as written.
        let args: Vec<String> = args
            .into_iter()
            .map(|arg| {
                if arg.starts_with("--addr=") {
                    "--addr=127.0.0.1:0".to_string()
                } else if arg.starts_with("--db=") {
                    format!("--db={}", schema.url_with_schema())
                } else if arg.starts_with("--nats=") {
                    format!("--nats={nats}")
                } else {
                    arg
                }
            })
            .collect();
        let home = dir.path().join(&name);
        std::fs::create_dir_all(&home).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_looopy"));
        command.args(&args);
        for (key, value) in environment {
            command.env(key.as_str().unwrap(), value.as_str().unwrap());
        }
        support::isolate(&mut command, &home).env("LOOOPY_NATS_PREFIX", &prefix);
        servers.push((name, support::start(command)));
    }

    for (name, server) in &servers {
        let ready = reqwest::get(format!("{}/readyz", server.base))
            .await
            .unwrap();
        assert_eq!(ready.status(), 200, "{name}");
        let body: serde_json::Value = ready.json().await.unwrap();
        assert_eq!(body["replica"], name.as_str(), "{body}");
        assert_eq!(body["bus"]["kind"], "nats", "{body}");
    }

    // A turn through looopy-1, followed on looopy-2 from the start, is the log as
    // looopy-3 replays it afterwards: every event once, in order (internal events, such as
    // checkpoints, are not served, so their seqs are absent from both).
    let (r1, r2, r3) = (&servers[0].1, &servers[1].1, &servers[2].1);
    let accepted = post_message(&r1.base, "ctx-compose", "What is 6*7?").await;
    assert_eq!(accepted.status(), 202);
    let events = read_until(context_events(&r2.base, "ctx-compose", 0).await, done).await;
    let replayed = read_until(context_events(&r3.base, "ctx-compose", 0).await, done).await;
    assert_eq!(ids(&events), ids(&replayed));
    assert!(ids(&events).windows(2).all(|w| w[0] < w[1]));
    assert!(events.iter().any(|e| e.event == "content-delta"));
    let end: serde_json::Value = serde_json::from_str(&events.last().unwrap().data).unwrap();
    assert_eq!(end["status"], "completed", "{end}");
}

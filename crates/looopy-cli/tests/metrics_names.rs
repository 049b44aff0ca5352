//! Every metric of the metrics table in docs/observability.md is in `GET /metrics` of a fresh `looopy serve`,
//! before any request: Prometheus cannot tell a missing series from one that never moved,
//! so alert rules (`looopy_sse_streams == 0`) need every metric from the start. The names
//! are read from that table, so the table and the server cannot drift apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use support::start_default;

/// `(name, type)` of each row of the metrics table in docs/observability.md (the table after
/// `## Metrics`, rows whose first cell is a `looopy_*` name).
fn readme_metrics() -> Vec<(String, String)> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/observability.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let section = text
        .split_once("\n## Metrics\n")
        .expect("docs/observability.md has a ## Metrics section")
        .1;
    let rows: Vec<(String, String)> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.trim_matches('`');
            name.starts_with("looopy_")
                .then(|| (name.to_owned(), cells.get(2).unwrap_or(&"").to_string()))
        })
        .collect();
    assert!(
        rows.len() >= 10,
        "the metrics table of docs/observability.md: {rows:?}"
    );
    rows
}

#[tokio::test]
async fn a_fresh_server_exports_every_metric_of_the_readme_table() {
    let metrics = readme_metrics();
    let dir = tempfile::tempdir().unwrap();
    let server = start_default(&dir.path().join("m.db"), &[]);
    let response = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();

    // `# TYPE name kind` lines and the names of the samples.
    let typed: BTreeSet<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_owned(), k.to_owned()))
        .collect();
    let sampled: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    for (name, kind) in &metrics {
        assert!(
            typed.contains(&(name.clone(), kind.clone())),
            "{name} ({kind}) is not declared in /metrics of a fresh server:\n{text}"
        );
        let sample = match kind.as_str() {
            "histogram" => format!("{name}_count"),
            _ => name.clone(),
        };
        assert!(
            sampled.contains(sample.as_str()),
            "{name} has no sample in /metrics of a fresh server:\n{text}"
        );
    }
    // Nothing has happened yet: the stream gauge and the turn counters read 0.
    assert!(text.contains("\nlooopy_sse_streams 0\n"), "{text}");
    assert!(
        text.contains("\nlooopy_turns_total{state=\"failed\"} 0\n"),
        "{text}"
    );
    // The scripted agent's tools are there, at 0.
    assert!(
        text.contains("looopy_tool_calls_total{tool=\"calculator\",outcome=\"error\"} 0\n"),
        "{text}"
    );
}

//! `looopy run --verbose`: after the turn, the span tree with timings on stderr — the run,
//! its model calls and its tool call, indented by nesting, each with its start offset,
//! duration and key attributes.

use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v.db");
    Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .env("LOOOPY_DB", &db)
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LOOOPY_PROVIDER")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The name column of a waterfall line: what follows the bar, with its indentation.
fn name_column(line: &str) -> &str {
    line.rsplit_once('|').unwrap().1
}

fn indent(line: &str) -> usize {
    let name = name_column(line);
    name.len() - name.trim_start().len()
}

/// `12.3 ms` → 12.3
fn millis(field: &str) -> f64 {
    field.trim().strip_suffix(" ms").unwrap().parse().unwrap()
}

#[test]
fn verbose_prints_the_span_tree_of_the_turn_after_it_ends() {
    let out = run(&["run", "--verbose", "What is 6*7?"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("6*7 = 42"), "{stdout}");

    let lines: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("spans of the turn"))
        .collect();
    assert!(!lines.is_empty(), "no waterfall in:\n{stderr}");
    let spans: Vec<&str> = lines[1..]
        .iter()
        .copied()
        .filter(|l| l.contains('|'))
        .collect();
    assert_eq!(spans.len(), 4, "{stderr}");

    // The run first, its children below it in the order they started, one level deeper.
    let turn = spans[0];
    assert!(
        name_column(turn)
            .trim_start()
            .starts_with("invoke_agent looopy"),
        "{turn}"
    );
    assert!(turn.contains("state=completed"), "{turn}");
    assert!(turn.contains("iterations=2"), "{turn}");
    let children = &spans[1..];
    let names: Vec<&str> = children
        .iter()
        .map(|l| name_column(l).split_whitespace().next().unwrap())
        .collect();
    assert_eq!(names, ["chat", "execute_tool", "chat"], "{stderr}");
    for child in children {
        assert_eq!(indent(child), indent(turn) + 2, "{stderr}");
    }
    assert!(children[0].contains("finish=tool_calls"), "{stderr}");
    assert!(children[0].contains("ttft="), "{stderr}");
    assert!(children[0].contains(" in="), "{stderr}");
    assert!(children[1].contains("execute_tool calculator"), "{stderr}");
    assert!(children[1].contains("outcome=success"), "{stderr}");
    assert!(children[2].contains("finish=stop"), "{stderr}");

    // Start offsets and durations: the run starts at 0 and spans everything; children
    // start in order within it.
    let columns = |line: &str| -> (f64, f64) {
        let head = line.split('|').next().unwrap();
        let fields: Vec<&str> = head.split(" ms").collect();
        (
            millis(&format!("{} ms", fields[0])),
            millis(&format!("{} ms", fields[1])),
        )
    };
    let (turn_start, turn_took) = columns(turn);
    assert_eq!(turn_start, 0.0);
    let mut last_start = 0.0;
    for child in children {
        let (start, took) = columns(child);
        assert!(start >= last_start, "{stderr}");
        assert!(start + took <= turn_start + turn_took + 0.1, "{stderr}");
        last_start = start;
    }
    assert!(!stderr.contains("(open)"), "{stderr}");
}

#[test]
fn without_verbose_there_is_no_waterfall() {
    let out = run(&["run", "What is 6*7?"]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("spans of the turn"));
}

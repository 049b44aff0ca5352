//! The README is a landing page whose promises hold: at most 300 lines, every relative link
//! in it and in `docs/*.md` reaches a file (and a heading, for `#anchor` links), every docs
//! page has a table of contents, its Rust block is a compiling example, its quick start's
//! first command answers offline, and its three "connect a real model" lines, run as written
//! with the real `looopy` binary, stream an answer from an OpenAI- or Anthropic-compatible
//! server (a loopback fake sending real SSE transcripts).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../looopy-llm/tests/support/mod.rs"]
mod llm_fake;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llm_fake::{Reply, TestServer};

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn readme() -> String {
    read(&root().join("README.md"))
}

/// `README.md` and every `docs/*.md`.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 10, "docs/ has a page per area: {docs:?}");
    pages.extend(docs);
    pages
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut inside = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                inside = !inside;
                return false;
            }
            !inside
        })
        .collect()
}

/// The fenced blocks of `text` with the given info string, in order.
fn blocks(text: &str, info: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(tag)) if tag.trim() == info => current = Some(String::new()),
            (None, Some(_)) => current = Some(String::from("\u{0}")), // another block: skipped
            (Some(_), Some(_)) => {
                let block = current.take().unwrap();
                if !block.starts_with('\u{0}') {
                    out.push(block);
                }
            }
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `(level, text)` of every heading outside code blocks.
fn headings(text: &str) -> Vec<(usize, String)> {
    prose(text)
        .into_iter()
        .filter_map(|line| {
            let level = line.chars().take_while(|c| *c == '#').count();
            let rest = line.get(level..)?.strip_prefix(' ')?;
            (level > 0).then(|| (level, rest.trim().to_string()))
        })
        .collect()
}

/// Every anchor a page has, with GitHub's `-1`, `-2` suffixes for repeated headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, heading) in headings(text) {
        let base = slug(&heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of `[text](target)` links outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn the_readme_is_a_landing_page_of_at_most_300_lines() {
    let lines = readme().lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; the manual belongs in docs/"
    );
    // It links every docs page.
    let linked: BTreeSet<String> = links(&readme()).into_iter().collect();
    for page in pages().iter().skip(1) {
        let name = format!("docs/{}", page.file_name().unwrap().to_string_lossy());
        assert!(linked.contains(&name), "README.md does not link {name}");
    }
}

#[test]
fn every_relative_link_reaches_a_file_and_every_anchor_a_heading() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        for target in links(&text) {
            let target = target.split_whitespace().next().unwrap_or_default();
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if !anchor.is_empty()
                && file.extension().is_some_and(|e| e == "md")
                && !anchors(&read(&file)).contains(anchor)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(checked > 100, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_docs_page_has_a_table_of_contents_linking_each_section() {
    for page in pages().iter().skip(1) {
        let text = read(page);
        let toc: Vec<&str> = text
            .split_once("**Contents**")
            .unwrap_or_else(|| panic!("{} has no **Contents**", page.display()))
            .1
            .lines()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.starts_with("- "))
            .collect();
        let toc_targets: Vec<String> = toc.iter().flat_map(|l| links(l)).collect();
        let sections: Vec<String> = headings(&text)
            .into_iter()
            .filter(|(level, _)| *level == 2)
            .map(|(_, h)| format!("#{}", slug(&h)))
            .collect();
        assert!(!sections.is_empty(), "{} has no sections", page.display());
        assert_eq!(
            toc_targets,
            sections,
            "{}: the contents list every section, in order",
            page.display()
        );
    }
}

#[test]
fn the_readme_rust_block_is_the_readme_example() {
    let example = read(&root().join("crates/looopy-agent/examples/readme.rs"));
    let code: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let readme = readme();
    let rust = blocks(&readme, "rust");
    assert_eq!(rust.len(), 1, "one Rust block in the README");
    assert_eq!(
        rust[0], code,
        "README's Rust block and examples/readme.rs differ"
    );
}

/// `looopy` with a clean environment: a fresh home (no config file, the database in it) and
/// no provider variables from the machine running the tests.
fn looopy(home: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_looopy"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("OPENAI_")
            || name.starts_with("ANTHROPIC_")
            || name.starts_with("LOOOPY_")
            || name.starts_with("OTEL_")
            || name == "RUST_LOG"
        {
            command.env_remove(name.as_ref());
        }
    }
    command
        .env("HOME", home)
        .current_dir(home)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs a command line of the README (`VAR=value … looopy args…`), returning stdout and
/// stderr; fails the test unless it exits 0 within a minute.
async fn run_line(line: &str, home: &Path, extra_env: &[(&str, String)]) -> (String, String) {
    let words = shell_words(line);
    let mut command = looopy(home);
    let mut rest = words.iter();
    for word in rest.by_ref() {
        match word.split_once('=') {
            Some((name, value)) if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                command.env(name, value);
            }
            _ => {
                assert_eq!(word, "looopy", "a README line runs `looopy`: {line}");
                break;
            }
        }
    }
    command.args(rest);
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("`{line}` did not finish within 60 s"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "`{line}` exited {:?}\nstdout: {stdout}\nstderr: {stderr}",
        output.status.code()
    );
    (stdout, stderr)
}

/// Splits a shell line into words: whitespace-separated, `"…"` quoted, a `#` word starts a
/// comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in line.chars() {
        match c {
            '"' => (quoted, any) = (!quoted, true),
            '#' if !quoted && !any => break,
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// The README's `sh` block that follows `heading`.
fn block_after(heading: &str) -> Vec<String> {
    let readme = readme();
    let section = readme
        .split_once(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("README has a `## {heading}` section"))
        .1;
    let block = blocks(section, "sh").into_iter().next().unwrap();
    block.lines().map(str::to_owned).collect()
}

fn transcript(name: &str) -> Vec<u8> {
    std::fs::read(
        root()
            .join("crates/looopy-llm/tests/transcripts")
            .join(name),
    )
    .unwrap()
}

#[tokio::test]
async fn the_quick_start_answers_offline_and_runs_the_workspace_tests() {
    let lines = block_after("Quick start");
    assert_eq!(lines.len(), 2, "the quick start is two commands: {lines:?}");
    assert_eq!(
        lines[1], "cargo test --workspace",
        "CI runs the README's test command"
    );
    let command = lines[0]
        .strip_prefix("cargo run -p looopy-cli -- ")
        .expect("the first command runs the `looopy` binary from the checkout");
    let home = tempfile::tempdir().unwrap();
    let (stdout, stderr) = run_line(&format!("looopy {command}"), home.path(), &[]).await;
    assert!(stdout.contains("42"), "the answer streams: {stdout}");
    assert!(
        stderr.to_lowercase().contains("scripted"),
        "it says it runs the scripted model: {stderr}"
    );
}

/// The three lines under "Connect a real model": OpenAI, Anthropic, a local server.
fn model_lines() -> [String; 3] {
    let lines = block_after("Connect a real model");
    let [openai, anthropic, local] = <[String; 3]>::try_from(lines).expect("three lines");
    assert!(openai.starts_with("OPENAI_API_KEY="), "{openai}");
    assert!(anthropic.starts_with("ANTHROPIC_API_KEY="), "{anthropic}");
    assert!(local.starts_with("OPENAI_BASE_URL="), "{local}");
    [openai, anthropic, local]
}

#[tokio::test]
async fn the_local_server_line_streams_an_answer_from_an_openai_compatible_server() {
    let [_, _, line] = model_lines();
    let server = TestServer::start(vec![Reply::sse(transcript("openai_text.sse"))]).await;
    // The line as written, with the fake's address for the local server's.
    let url = shell_words(&line)[0]
        .strip_prefix("OPENAI_BASE_URL=")
        .unwrap()
        .to_string();
    assert!(
        url.ends_with("/v1"),
        "the README's base URL ends in /v1: {url}"
    );
    let origin = url.trim_end_matches("/v1");
    let line = line.replacen(origin, &server.url(), 1);
    let home = tempfile::tempdir().unwrap();
    let (stdout, _) = run_line(&line, home.path(), &[]).await;
    assert!(
        stdout.contains("Bonjour from the café"),
        "the streamed answer: {stdout}"
    );
    let request = &server.requests()[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    let model = shell_words(&line)
        .windows(2)
        .find(|w| w[0] == "--model")
        .map(|w| w[1].clone())
        .unwrap();
    assert_eq!(request.json()["model"], model.as_str());
    assert_eq!(request.json()["stream"], true);
}

#[tokio::test]
async fn the_openai_line_sends_its_key_and_streams_the_answer() {
    let [line, _, _] = model_lines();
    let key = shell_words(&line)[0]
        .strip_prefix("OPENAI_API_KEY=")
        .unwrap()
        .to_string();
    let server = TestServer::start(vec![Reply::sse(transcript("openai_text.sse"))]).await;
    let home = tempfile::tempdir().unwrap();
    // api.openai.com stands behind a loopback fake: the one variable added to the line.
    let base = format!("{}/v1", server.url());
    let (stdout, _) = run_line(&line, home.path(), &[("OPENAI_BASE_URL", base)]).await;
    assert!(
        stdout.contains("Bonjour from the café"),
        "the streamed answer: {stdout}"
    );
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {key}").as_str())
    );
    assert_eq!(
        request.json()["model"],
        "gpt-4o-mini",
        "the README's default"
    );
}

#[tokio::test]
async fn the_anthropic_line_sends_its_key_and_streams_the_answer() {
    let [_, line, _] = model_lines();
    let key = shell_words(&line)[0]
        .strip_prefix("ANTHROPIC_API_KEY=")
        .unwrap()
        .to_string();
    let server = TestServer::start(vec![Reply::sse(transcript("anthropic_text.sse"))]).await;
    let home = tempfile::tempdir().unwrap();
    let (stdout, _) = run_line(&line, home.path(), &[("ANTHROPIC_BASE_URL", server.url())]).await;
    assert!(
        stdout.contains("naïve wörld"),
        "the streamed answer: {stdout}"
    );
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(key.as_str()));
    assert_eq!(
        request.json()["model"],
        "claude-sonnet-4-5",
        "the README's default"
    );
}

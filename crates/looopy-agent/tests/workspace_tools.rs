//! The workspace tools against a real directory: behaviour, bounds, every escape on every
//! tool, and the shell's timeout and cancellation killing its process group.

use std::path::Path;

use looopy_agent::tool::workspace::{
    EditFile, EditFileArgs, ListFiles, ListFilesArgs, ReadFile, ReadFileArgs, SearchFiles,
    SearchFilesArgs, Shell, ShellArgs, WriteFile, WriteFileArgs,
};
use looopy_agent::tool::{
    Tool, ToolContext, ToolRegistry, Workspace, WorkspaceError, WorkspaceLimits,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn ctx() -> ToolContext {
    ToolContext::new("call-1")
}

/// A workspace `work/` next to an `outside/` directory holding `secret.txt`, with a symlink
/// to the secret file and one to the outside directory inside the workspace.
struct Setup {
    _dir: tempfile::TempDir,
    workspace: Workspace,
    outside: std::path::PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    let root = dir.path().join("work");
    let workspace = Workspace::open(&root).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("linkdir")).unwrap();
    Setup {
        _dir: dir,
        workspace,
        outside,
    }
}

fn to_json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap()
}

async fn write(ws: &Workspace, path: &str, content: &str) -> Result<Value, WorkspaceError> {
    let args = WriteFileArgs {
        path: path.into(),
        content: content.into(),
    };
    WriteFile(ws.clone()).call(args, ctx()).await.map(to_json)
}

async fn read(
    ws: &Workspace,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> Result<Value, WorkspaceError> {
    let args = ReadFileArgs {
        path: path.into(),
        offset,
        limit,
    };
    ReadFile(ws.clone()).call(args, ctx()).await.map(to_json)
}

async fn edit(ws: &Workspace, path: &str, old: &str, new: &str) -> Result<Value, WorkspaceError> {
    let args = EditFileArgs {
        path: path.into(),
        old: old.into(),
        new: new.into(),
    };
    EditFile(ws.clone()).call(args, ctx()).await.map(to_json)
}

async fn list(ws: &Workspace, path: Option<&str>) -> Result<Value, WorkspaceError> {
    let args = ListFilesArgs {
        path: path.map(Into::into),
    };
    ListFiles(ws.clone()).call(args, ctx()).await.map(to_json)
}

async fn search(
    ws: &Workspace,
    pattern: &str,
    path: Option<&str>,
) -> Result<Value, WorkspaceError> {
    let args = SearchFilesArgs {
        pattern: pattern.into(),
        path: path.map(Into::into),
    };
    SearchFiles(ws.clone()).call(args, ctx()).await.map(to_json)
}

#[tokio::test]
async fn write_read_list_edit_a_file() {
    let s = setup();
    let ws = &s.workspace;
    let written = write(ws, "notes/poem.txt", "an old silent pond\n")
        .await
        .unwrap();
    assert_eq!(written["path"], "notes/poem.txt");
    assert_eq!(written["bytes"], 19);
    assert!(!written["artifact_id"].as_str().unwrap().is_empty());
    assert_eq!(
        std::fs::read_to_string(ws.root().join("notes/poem.txt")).unwrap(),
        "an old silent pond\n"
    );
    let slice = read(ws, "notes/poem.txt", None, None).await.unwrap();
    assert_eq!(
        slice,
        json!({"content": "an old silent pond\n", "offset": 0, "size": 19})
    );

    let listing = list(ws, Some("notes")).await.unwrap();
    assert_eq!(
        listing,
        json!({"entries": [{"name": "poem.txt", "kind": "file", "size": 19}], "truncated": false})
    );
    let root = list(ws, None).await.unwrap();
    let names: Vec<&str> = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["link.txt", "linkdir", "notes"]);

    edit(ws, "notes/poem.txt", "silent", "quiet").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.root().join("notes/poem.txt")).unwrap(),
        "an old quiet pond\n"
    );
    // Writing again replaces the content (shorter content leaves no tail behind).
    write(ws, "notes/poem.txt", "frog\n").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.root().join("notes/poem.txt")).unwrap(),
        "frog\n"
    );
}

#[tokio::test]
async fn edit_needs_an_exact_unique_match() {
    let s = setup();
    let ws = &s.workspace;
    write(ws, "a.txt", "one two one\n").await.unwrap();
    let missing = edit(ws, "a.txt", "three", "3").await.unwrap_err();
    assert!(missing.to_string().contains("not found"), "{missing}");
    let twice = edit(ws, "a.txt", "one", "1").await.unwrap_err();
    assert!(twice.to_string().contains("occurs 2 times"), "{twice}");
    let empty = edit(ws, "a.txt", "", "x").await.unwrap_err();
    assert!(matches!(empty, WorkspaceError::Edit(_)));
    assert_eq!(
        std::fs::read_to_string(ws.root().join("a.txt")).unwrap(),
        "one two one\n"
    );
    let absent = edit(ws, "nope.txt", "a", "b").await.unwrap_err();
    assert!(matches!(absent, WorkspaceError::NotFound(_)), "{absent}");
}

#[tokio::test]
async fn reads_are_bounded_and_page_with_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut limits = WorkspaceLimits::default();
    limits.read_bytes = 10;
    let ws = Workspace::open(dir.path()).unwrap().with_limits(limits);
    std::fs::write(dir.path().join("big.txt"), "0123456789abcdefghijXYZ").unwrap();
    let first = read(&ws, "big.txt", None, Some(1000)).await.unwrap();
    assert_eq!(
        first,
        json!({"content": "0123456789", "offset": 0, "size": 23, "next_offset": 10})
    );
    let second = read(&ws, "big.txt", Some(10), None).await.unwrap();
    assert_eq!(second["content"], "abcdefghij");
    assert_eq!(second["next_offset"], 20);
    let last = read(&ws, "big.txt", Some(20), Some(5)).await.unwrap();
    assert_eq!(last, json!({"content": "XYZ", "offset": 20, "size": 23}));
    // The default bound: 256 KiB of a 1 MiB file.
    let ws = Workspace::open(dir.path()).unwrap();
    std::fs::write(dir.path().join("huge.txt"), vec![b'x'; 1 << 20]).unwrap();
    let slice = read(&ws, "huge.txt", None, None).await.unwrap();
    assert_eq!(slice["content"].as_str().unwrap().len(), 256 * 1024);
    assert_eq!(slice["next_offset"], 256 * 1024);
}

#[tokio::test]
async fn search_finds_lines_skips_binary_and_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/a.rs"),
        "fn main() {}\nfn helper() {}\nstruct X;\n",
    )
    .unwrap();
    std::fs::write(root.join("b.txt"), "nothing here\nfn in text\n").unwrap();
    std::fs::write(root.join("bin.dat"), b"fn \0 binary fn\n").unwrap();
    let ws = Workspace::open(root).unwrap();
    let found = search(&ws, r"^fn \w+", None).await.unwrap();
    assert_eq!(
        found,
        json!({"matches": [
            {"path": "b.txt", "line": 2, "text": "fn in text"},
            {"path": "src/a.rs", "line": 1, "text": "fn main() {}"},
            {"path": "src/a.rs", "line": 2, "text": "fn helper() {}"},
        ], "truncated": false})
    );
    let scoped = search(&ws, "struct", Some("src")).await.unwrap();
    assert_eq!(scoped["matches"][0]["line"], 3);
    let bad = search(&ws, "(", None).await.unwrap_err();
    assert!(matches!(bad, WorkspaceError::Pattern(_)));

    let mut limits = WorkspaceLimits::default();
    limits.search_matches = 2;
    limits.search_file_bytes = 64;
    let ws = ws.with_limits(limits);
    std::fs::write(root.join("many.txt"), "hit\n".repeat(100)).unwrap();
    let capped = search(&ws, "hit", Some("many.txt")).await.unwrap();
    assert_eq!(capped["matches"].as_array().unwrap().len(), 2);
    assert_eq!(capped["truncated"], true);
    // Only the first 64 bytes of a file are scanned.
    std::fs::write(
        root.join("late.txt"),
        format!("{}\nlate\n", "x".repeat(100)),
    )
    .unwrap();
    let late = search(&ws, "late", Some("late.txt")).await.unwrap();
    assert_eq!(late["matches"], json!([]));
}

fn assert_escape(result: Result<Value, WorkspaceError>, what: &str) {
    match result {
        Err(WorkspaceError::Escape(_)) => {}
        other => panic!("{what}: expected an escape error, got {other:?}"),
    }
}

#[tokio::test]
async fn every_tool_refuses_every_escape() {
    let s = setup();
    let ws = &s.workspace;
    let secret = s.outside.join("secret.txt");
    let absolute = secret.to_str().unwrap().to_string();
    let escapes = [
        "../outside/secret.txt".to_string(),
        "notes/../../outside/secret.txt".to_string(),
        absolute,
        "link.txt".to_string(),
        "linkdir/secret.txt".to_string(),
    ];
    for path in &escapes {
        assert_escape(
            read(ws, path, None, None).await,
            &format!("read_file {path}"),
        );
        assert_escape(
            write(ws, path, "pwned").await,
            &format!("write_file {path}"),
        );
        assert_escape(
            edit(ws, path, "top", "pwned").await,
            &format!("edit_file {path}"),
        );
        assert_escape(
            search(ws, "secret", Some(path)).await,
            &format!("search_files {path}"),
        );
        assert_escape(list(ws, Some(path)).await, &format!("list_files {path}"));
    }
    for dir in ["..", "../outside", "linkdir", s.outside.to_str().unwrap()] {
        assert_escape(list(ws, Some(dir)).await, &format!("list_files {dir}"));
        assert_escape(
            search(ws, "secret", Some(dir)).await,
            &format!("search_files {dir}"),
        );
        assert_escape(
            write(ws, &format!("{dir}/new.txt"), "x").await,
            &format!("write_file {dir}/new.txt"),
        );
    }
    // A whole-workspace search does not follow the links out.
    let all = search(ws, "secret", None).await.unwrap();
    assert_eq!(all["matches"], json!([]));
    // Nothing outside changed or appeared.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    let outside: Vec<_> = std::fs::read_dir(&s.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["secret.txt"]);
}

/// A FIFO made by mkfifo(1) (the workspace forbids the `unsafe` mkfifo(3) call).
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Bounds a tool call: a call that blocks (as `read_file` on a FIFO once did) fails the
/// test instead of hanging it.
async fn bounded<T>(call: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), call)
        .await
        .expect("the tool call did not return within 30 s")
}

fn assert_hard_linked(result: Result<Value, WorkspaceError>, what: &str) {
    match result {
        Err(error @ WorkspaceError::HardLinked { .. }) => {
            assert!(error.to_string().contains("hard links"), "{what}: {error}");
        }
        other => panic!("{what}: expected a hard-link refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_refused_by_every_tool() {
    let s = setup();
    let ws = &s.workspace;
    let secret = s.outside.join("secret.txt");
    std::fs::create_dir(ws.root().join("sub")).unwrap();
    std::fs::hard_link(&secret, ws.root().join("sub/hard.txt")).unwrap();
    let path = "sub/hard.txt";
    assert_hard_linked(read(ws, path, None, None).await, "read_file");
    assert_hard_linked(write(ws, path, "pwned").await, "write_file");
    assert_hard_linked(edit(ws, path, "top", "pwned").await, "edit_file");
    assert_hard_linked(search(ws, "secret", Some(path)).await, "search_files");
    // A directory search passes over it and says so.
    write(ws, "sub/plain.txt", "no secret here\n")
        .await
        .unwrap();
    let all = search(ws, "secret", None).await.unwrap();
    assert_eq!(
        all["matches"],
        json!([{"path": "sub/plain.txt", "line": 1, "text": "no secret here"}])
    );
    assert_eq!(all["skipped"][0]["path"], path);
    assert!(
        all["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("hard links"),
        "{all}"
    );
    assert_eq!(all["skipped"].as_array().unwrap().len(), 1);
    // The outside file is untouched, through either name.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret\n");
    assert_eq!(
        std::fs::read_to_string(ws.root().join(path)).unwrap(),
        "top secret\n"
    );
}

#[tokio::test]
async fn special_files_are_refused_promptly_and_listed_as_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    let root = ws.root().to_path_buf();
    mkfifo(&root.join("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    std::fs::write(root.join("a.txt"), "findme\n").unwrap();

    // No writer on the FIFO: the read must come back (refused), not wait for one.
    let read_fifo = bounded(read(&ws, "pipe", None, None)).await;
    match read_fifo {
        Err(error @ WorkspaceError::NotRegular { kind: "fifo", .. }) => {
            assert!(error.to_string().contains("not a regular file"), "{error}");
        }
        other => panic!("read_file on a FIFO: expected a refusal, got {other:?}"),
    }
    for (path, kind) in [("pipe", "fifo"), ("sock", "socket")] {
        for (tool, result) in [
            ("read_file", bounded(read(&ws, path, None, None)).await),
            ("write_file", bounded(write(&ws, path, "x")).await),
            ("edit_file", bounded(edit(&ws, path, "a", "b")).await),
            ("search_files", bounded(search(&ws, "x", Some(path))).await),
        ] {
            match result {
                Err(WorkspaceError::NotRegular { kind: k, .. }) => assert_eq!(k, kind, "{tool}"),
                other => panic!("{tool} on {path}: expected a refusal, got {other:?}"),
            }
        }
    }
    let found = bounded(search(&ws, "findme", None)).await.unwrap();
    assert_eq!(found["matches"][0]["path"], "a.txt");
    let skipped: Vec<&str> = found["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["pipe", "sock"]);

    let listing = list(&ws, None).await.unwrap();
    let kinds: Vec<(&str, &str)> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [("a.txt", "file"), ("pipe", "fifo"), ("sock", "socket")]
    );
    // Still a FIFO: nothing was created or replaced in its place.
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(root.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[tokio::test]
async fn a_symlink_inside_the_workspace_is_followed() {
    let s = setup();
    let ws = &s.workspace;
    write(ws, "real.txt", "inside\n").await.unwrap();
    std::os::unix::fs::symlink(ws.root().join("real.txt"), ws.root().join("alias.txt")).unwrap();
    let slice = read(ws, "alias.txt", None, None).await.unwrap();
    assert_eq!(slice["content"], "inside\n");
}

#[test]
fn resolve_keeps_paths_inside() {
    let s = setup();
    let ws = &s.workspace;
    assert_eq!(ws.resolve("").unwrap(), ws.root());
    assert_eq!(ws.resolve("./a/b.txt").unwrap(), ws.root().join("a/b.txt"));
    assert!(matches!(
        ws.resolve("a/../b"),
        Err(WorkspaceError::Escape(_))
    ));
    assert!(matches!(
        ws.resolve("/etc/passwd"),
        Err(WorkspaceError::Escape(_))
    ));
    assert!(matches!(
        ws.resolve("linkdir/new/deeper.txt"),
        Err(WorkspaceError::Escape(_))
    ));
}

#[test]
fn registration_offers_shell_only_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    let names = |r: ToolRegistry| r.names().collect::<Vec<_>>();
    assert_eq!(
        names(ws.tools()),
        [
            "list_files",
            "read_file",
            "write_file",
            "edit_file",
            "search_files"
        ]
    );
    let with_shell = names(ToolRegistry::builtin().with_workspace(ws.allow_shell(true)));
    assert!(with_shell.contains(&"shell".to_string()));
    assert!(with_shell.contains(&"calculator".to_string()));
}

async fn shell(
    ws: &Workspace,
    command: &str,
    timeout_s: Option<u64>,
    ctx: ToolContext,
) -> Result<Value, WorkspaceError> {
    let args = ShellArgs {
        command: command.into(),
        timeout_s,
    };
    Shell(ws.clone()).call(args, ctx).await.map(to_json)
}

/// Whether process `pid` still runs (a zombie does not count).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !(state.starts_with('Z') || state.starts_with('X'))
        }
        Err(_) => false,
    }
}

/// Whether `pid` is gone within a few seconds: a signal to a process group is delivered
/// asynchronously, so a killed process may still show as running for a moment.
fn gone_soon(pid: u32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive(pid) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn shell_runs_in_the_workspace_with_capped_output() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    let refused = shell(&ws, "echo hi", None, ctx()).await.unwrap_err();
    assert!(matches!(refused, WorkspaceError::ShellDisabled));

    let mut limits = WorkspaceLimits::default();
    limits.shell_output_bytes = 100;
    let ws = ws.allow_shell(true).with_limits(limits);
    let out = shell(&ws, "pwd; echo oops >&2; exit 3", None, ctx())
        .await
        .unwrap();
    assert_eq!(
        out["stdout"].as_str().unwrap().trim(),
        ws.root().to_str().unwrap()
    );
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["timed_out"], false);
    let big = shell(&ws, "head -c 100000 /dev/zero | tr '\\0' a", None, ctx())
        .await
        .unwrap();
    assert_eq!(big["stdout"].as_str().unwrap().len(), 100);
    assert_eq!(big["truncated"], true);
    assert_eq!(big["exit_code"], 0);
}

#[tokio::test]
async fn shell_timeout_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap().allow_shell(true);
    let out = shell(
        &ws,
        "sleep 300 & echo $! > bg.pid; sleep 300",
        Some(1),
        ctx(),
    )
    .await
    .unwrap();
    assert_eq!(out["timed_out"], true);
    assert_eq!(out["exit_code"], Value::Null);
    let pid = read_pid(&dir.path().join("bg.pid"));
    assert!(
        gone_soon(pid),
        "background process {pid} survived the timeout"
    );
}

#[tokio::test]
async fn shell_cancellation_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap().allow_shell(true);
    let cancel = CancellationToken::new();
    let call_ctx = ctx().with_cancellation(cancel.clone());
    let ws2 = ws.clone();
    let call = tokio::spawn(async move {
        shell(
            &ws2,
            "sleep 300 & echo $! > bg.tmp; mv bg.tmp bg.pid; sleep 300",
            Some(600),
            call_ctx,
        )
        .await
    });
    let pid_file = dir.path().join("bg.pid");
    while !pid_file.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let pid = read_pid(&pid_file);
    assert!(alive(pid));
    cancel.cancel();
    let out = call.await.unwrap().unwrap();
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["exit_code"], Value::Null);
    assert!(
        gone_soon(pid),
        "background process {pid} survived cancellation"
    );
}

#[tokio::test]
async fn aborting_the_shell_call_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap().allow_shell(true);
    let ws2 = ws.clone();
    let call = tokio::spawn(async move {
        shell(
            &ws2,
            "sleep 300 & echo $! > bg.tmp; mv bg.tmp bg.pid; sleep 300",
            Some(600),
            ctx(),
        )
        .await
    });
    let pid_file = dir.path().join("bg.pid");
    while !pid_file.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let pid = read_pid(&pid_file);
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    // kill(2) returns before the signalled process is gone: wait for it to die (bounded,
    // so a survivor fails the test instead of hanging it).
    let mut tries = 0;
    while alive(pid) && tries < 1000 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        tries += 1;
    }
    assert!(
        !alive(pid),
        "background process {pid} survived the aborted call"
    );
}

#[tokio::test]
async fn per_context_workspaces_keep_conversations_apart() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::per_context(dir.path()).unwrap();
    let in_ctx = |c: &str| ToolContext::new("call").with_context_id(c);
    for (context, content) in [("ctx-a", "from a"), ("ctx-b", "from b")] {
        let args = WriteFileArgs {
            path: "note.txt".into(),
            content: content.into(),
        };
        WriteFile(ws.clone())
            .call(args, in_ctx(context))
            .await
            .unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ctx-a/note.txt")).unwrap(),
        "from a"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ctx-b/note.txt")).unwrap(),
        "from b"
    );
    let listed = ListFiles(ws.clone())
        .call(ListFilesArgs { path: None }, in_ctx("ctx-a"))
        .await
        .unwrap();
    assert_eq!(
        to_json(listed)["entries"],
        json!([{"name": "note.txt", "kind": "file", "size": 6}])
    );
    // A context cannot reach another context's directory, nor the base.
    let other = ReadFile(ws.clone())
        .call(
            ReadFileArgs {
                path: "../ctx-b/note.txt".into(),
                offset: None,
                limit: None,
            },
            in_ctx("ctx-a"),
        )
        .await
        .unwrap_err();
    assert!(matches!(other, WorkspaceError::Escape(_)));
    for context in ["..", "."] {
        let bad = ListFiles(ws.clone())
            .call(ListFilesArgs { path: None }, in_ctx(context))
            .await
            .unwrap_err();
        assert!(matches!(bad, WorkspaceError::Escape(_)), "{context}: {bad}");
    }
    // Without a context id there is no workspace to pick.
    let none = ListFiles(ws)
        .call(ListFilesArgs { path: None }, ctx())
        .await
        .unwrap_err();
    assert!(matches!(none, WorkspaceError::Escape(_)));
}

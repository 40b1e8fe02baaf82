//! The hostile-input suite: every command and every MCP tool over a vault
//! of special files, hostile names, links out and hostile frontmatter.
//! Nothing may hang (each run has a deadline), panic, exit other than as
//! documented, or print anything from a file the walker skips.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::World;
use common::mcp_client::Client;
use serde_json::json;

/// Strings planted where ctxpack must never read; none may be printed.
const MARKERS: [&str; 10] = [
    "MARKER_DOTENV",
    "MARKER_GIT",
    "MARKER_RAW",
    "MARKER_AGENTS",
    "MARKER_LOG",
    "MARKER_OUTSIDE",
    "MARKER_IGNORED",
    "MARKER_OKIGNORE_OUTSIDE",
    "MARKER_BINARY_TAIL",
    "MARKER_CONTROL_NAME",
];

/// A run must end within this; past it the run is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(90);

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo");
}

fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// Writes the hostile vault and the folder beside it that links lead to.
fn hostile_vault(world: &World) -> PathBuf {
    let outside = world.path().join("outside");
    common::write(
        &outside.join("secret.md"),
        b"# Secret\n\nMARKER_OUTSIDE alpha\n",
    );
    common::write(&outside.join("okignore"), b"MARKER_OKIGNORE_OUTSIDE[\n!x\n");

    let root = world.vault(
        "vault",
        &[
            ("notes/ok.md", "---\ntitle: Fine note\n---\n# Fine\n\nalpha beta gamma live here.\n"),
            ("notes/second.md", "# Second\n\nalpha again, with [[ok]] linked.\n"),
            (".env", "OPENAI_API_KEY=MARKER_DOTENV\n"),
            (".git/notes.md", "MARKER_GIT alpha\n"),
            ("_raw/raw.md", "MARKER_RAW alpha\n"),
            ("AGENTS.md", "MARKER_AGENTS alpha\n"),
            ("log.md", "MARKER_LOG alpha\n"),
            (".okignore", "ignored.md\n"),
            ("ignored.md", "MARKER_IGNORED alpha\n"),
            (
                "notes/frontmatter.md",
                "---\ntitle: \"\\e]0;owned\\a title \\x1b[31m red\"\nsummary: \"one\\ntwo\\u0007\"\n---\nalpha body\n",
            ),
            (
                "notes/broken.md",
                "---\ntitle: x\ntags: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n---\nalpha broken\n",
            ),
            (
                "notes/bomb.md",
                "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                 c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
                 e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n\
                 g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n---\n\
                 alpha bomb\n",
            ),
            ("notes/list.md", "---\n- a\n- b\n---\nalpha list frontmatter\n"),
        ],
    );
    // Deep nesting, for parsers that recurse.
    let nested = format!(
        "{}alpha deep\n{}\n",
        "> ".repeat(20_000),
        "[".repeat(50_000)
    );
    common::write(&root.join("notes/nested.md"), nested.as_bytes());
    // A NUL far past the first 8 KB makes the file binary, whole.
    let mut binary = "alpha ".repeat(2_000).into_bytes();
    binary.extend_from_slice(b"\0MARKER_BINARY_TAIL\n");
    common::write(&root.join("notes/late-nul.md"), &binary);
    common::write(&root.join("notes/latin1.md"), b"alpha caf\xe9\n");
    common::write(&root.join("notes/huge.md"), &vec![b'a'; 11 * 1024 * 1024]);
    common::write(
        &root.join("notes/evil\x1b[31m\nname\x07.md"),
        b"MARKER_CONTROL_NAME alpha\n",
    );
    mkfifo(&root.join("notes/pipe.md"));
    mkfifo(&root.join("pipe-dir-name.md"));
    let socket = std::os::unix::net::UnixListener::bind(root.join("notes/sock.md")).unwrap();
    std::mem::forget(socket);
    symlink(root.join(".env"), &root.join("notes/env.md"));
    symlink(root.join("_raw/raw.md"), &root.join("notes/raw-link.md"));
    symlink(root.join("ignored.md"), &root.join("notes/ignored-link.md"));
    symlink(root.join("AGENTS.md"), &root.join("notes/agents-link.md"));
    symlink(outside.join("secret.md"), &root.join("notes/out.md"));
    symlink(root.join("notes/pipe.md"), &root.join("notes/pipe-link.md"));
    symlink(root.join("notes"), &root.join("notes-alias.md"));
    fs::create_dir_all(root.join("sub")).unwrap();
    symlink(outside.join("okignore"), &root.join("sub/.okignore"));
    common::write(&root.join("sub/n.md"), b"alpha in sub\n");
    fs::create_dir_all(root.join("fifo-dir")).unwrap();
    mkfifo(&root.join("fifo-dir/.okignore"));
    common::write(
        &root.join("fifo-dir/note.md"),
        b"alpha behind a FIFO okignore\n",
    );
    root
}

/// Runs `command` to its end or kills it at the deadline (and fails).
fn bounded(mut command: Command) -> Output {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ctxpack");
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "{command:?} did not end within {DEADLINE:?}; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nothing a run prints may hold a marker, a raw control character or a
/// panic.
fn assert_clean(what: &str, text: &str) {
    for marker in MARKERS {
        assert!(!text.contains(marker), "{what} printed {marker}:\n{text}");
    }
    for control in ['\u{1b}', '\u{7}', '\0'] {
        assert!(
            !text.contains(control),
            "{what} printed control character {control:?}:\n{text}"
        );
    }
    assert!(!text.contains("panicked"), "{what} panicked:\n{text}");
}

fn check(what: &str, output: &Output, codes: &[i32]) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.code().is_some_and(|c| codes.contains(&c)),
        "{what}: exit {:?}, expected one of {codes:?}; stderr: {stderr}",
        output.status.code()
    );
    assert_clean(what, &stdout);
    assert_clean(what, &stderr);
    stdout
}

#[test]
fn every_command_over_a_hostile_vault_ends_cleanly() {
    let world = World::new();
    let vault = hostile_vault(&world);
    let index = world.path().join("index");
    let run = |args: &[&str], codes: &[i32]| -> String {
        let mut command = world.cmd();
        command
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index);
        check(&args.join(" "), &bounded(command), codes)
    };
    let built = run(&["index"], &[0]);
    assert!(built.contains("added"), "{built}");
    run(&["index", "--rebuild"], &[0]);
    let status = run(&["status", "--format", "json"], &[0]);
    for skipped in [
        "notes/pipe.md",
        "notes/sock.md",
        "notes/late-nul.md",
        "notes/latin1.md",
        "notes/huge.md",
        "notes/out.md",
        "notes/env.md",
        "notes/raw-link.md",
        "notes/ignored-link.md",
        "sub/.okignore",
        "fifo-dir/.okignore",
    ] {
        assert!(status.contains(skipped), "status names {skipped}: {status}");
    }
    assert!(status.contains("a FIFO, not a regular file"), "{status}");
    assert!(status.contains("a socket, not a regular file"), "{status}");
    assert!(
        status.contains("file name contains control characters"),
        "{status}"
    );
    run(&["status"], &[0]);

    let files = run(
        &["search", "alpha", "--limit", "50", "--format", "files"],
        &[0],
    );
    for found in ["notes/ok.md", "notes/second.md"] {
        assert!(files.contains(found), "{found} not found: {files}");
    }
    for never in [
        // Their folders' `.okignore` cannot be read: nothing there is.
        "sub/n.md",
        "fifo-dir/note.md",
        "notes/env.md",
        "notes/out.md",
        "ignored.md",
        "notes/ignored-link.md",
        "notes/raw-link.md",
        "notes/pipe.md",
        "notes/late-nul.md",
    ] {
        assert!(!files.contains(never), "{never} searched: {files}");
    }
    run(&["search", "alpha", "--explain"], &[0]);
    run(&["search", "alpha", "--format", "json"], &[0]);
    run(&["search", "\u{1b}[31malpha\u{7}"], &[0]);
    for tokenizer in ["chars4", "o200k"] {
        run(
            &[
                "pack",
                "alpha",
                "--tokenizer",
                tokenizer,
                "--no-log",
                "--budget",
                "3000",
            ],
            &[0],
        );
        run(
            &[
                "pack",
                "alpha",
                "--format",
                "json",
                "--tokenizer",
                tokenizer,
                "--no-log",
            ],
            &[0],
        );
    }
    run(&["pack", "--recent", "--no-log", "--dailies", "3"], &[0]);
    run(
        &[
            "pack",
            "alpha",
            "--subquery",
            "beta",
            "--subquery",
            "\u{1b}x",
            "--no-log",
        ],
        &[0],
    );
    // The query with control characters is logged as one clean line.
    run(&["pack", "alpha\u{1b}[2J\nbeta"], &[0]);
    let log = fs::read_to_string(vault.join("log.md")).unwrap();
    let appended = log.lines().last().unwrap();
    assert!(appended.contains("alpha [2J beta"), "{appended}");
    assert!(!appended.contains('\u{1b}'), "{appended}");

    run(&["mark-useful", "notes/ok.md"], &[0]);
    for refused in [
        "notes/env.md",
        ".env",
        "_raw/raw.md",
        "AGENTS.md",
        "log.md",
        "notes/pipe.md",
        "notes/out.md",
        "../outside/secret.md",
    ] {
        run(&["mark-useful", refused], &[1, 2]);
    }
    let long_query = "word ".repeat(1_000);
    let refused = run(&["search", &long_query], &[2]);
    assert!(refused.is_empty());
    run(&["pack", &long_query, "--no-log"], &[2]);
    run(
        &["pack", "alpha", "--budget", "99999999999999999999999"],
        &[2],
    );
    run(&["search", "alpha", "--limit", "0"], &[2]);
}

#[test]
fn every_mcp_tool_over_a_hostile_vault_answers_and_leaks_nothing() {
    let world = World::new();
    let vault = hostile_vault(&world);
    let mut client = Client::start(&world, &vault);
    let mut seen = String::new();
    let mut call = |client: &mut Client, tool: &str, arguments: serde_json::Value| {
        let (is_error, text) = client.call(tool, arguments.clone());
        assert_clean(&format!("{tool} {arguments}"), &text);
        seen.push_str(&text);
        (is_error, text)
    };
    for path in [
        ".env",
        "notes/env.md",
        ".git/notes.md",
        "_raw/raw.md",
        "notes/raw-link.md",
        "AGENTS.md",
        "log.md",
        "ignored.md",
        "notes/ignored-link.md",
        "notes/agents-link.md",
        "notes/out.md",
        "notes/pipe.md",
        "notes/pipe-link.md",
        "pipe-dir-name.md",
        "notes/sock.md",
        "notes/late-nul.md",
        "notes/huge.md",
        "notes-alias.md/ok.md",
        "sub/.okignore",
        "../outside/secret.md",
        "/etc/passwd",
        "notes/../../outside/secret.md",
    ] {
        let (is_error, text) = call(&mut client, "get_note", json!({"path": path}));
        assert!(is_error, "get_note {path} answered: {text}");
    }
    let (is_error, text) = call(
        &mut client,
        "get_note",
        json!({"path": "notes/../notes/ok.md"}),
    );
    assert!(!is_error && text.contains("alpha beta gamma"), "{text}");
    call(
        &mut client,
        "search",
        json!({"query": "alpha", "limit": 100, "explain": true}),
    );
    call(
        &mut client,
        "context_pack",
        json!({"query": "alpha", "budget_tokens": 100000}),
    );
    call(
        &mut client,
        "context_pack",
        json!({"recent": true, "recent_dailies": 30, "tokenizer": "o200k", "format": "json"}),
    );
    let (is_error, text) = call(
        &mut client,
        "context_pack",
        json!({"query": "x ".repeat(5000)}),
    );
    assert!(is_error && text.contains("at most 4096"), "{text}");
    call(&mut client, "status", json!({}));
    let (is_error, _) = call(
        &mut client,
        "mark_useful",
        json!({"path": "notes/env.md", "useful": true}),
    );
    assert!(is_error);
    // Not a writing project: assemble is not offered at all.
    let (is_error, text) = call(
        &mut client,
        "assemble",
        json!({"work": "../../outside", "scenario": "x", "chapter": 1, "intent": "y"}),
    );
    assert_eq!((is_error, text.as_str()), (true, "tool not found"));
    // The MCP client's view of the vault is the CLI's: the same notes.
    assert!(seen.contains("notes/ok.md"));
}

#[test]
fn malformed_and_oversized_messages_get_json_rpc_errors() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let mut client = Client::start(&world, &vault);
    let wait = Duration::from_secs(30);

    client.send_raw(b"this is not json\n");
    let error = client.receive(wait).expect("an answer to a malformed line");
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], serde_json::Value::Null);

    let mut huge = br#"{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"search","arguments":{"query":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 9 * 1024 * 1024));
    huge.extend_from_slice(b"\"}}}\n");
    client.send_raw(&huge);
    let error = client
        .receive(wait)
        .expect("an answer to an oversized line");
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert_eq!(error["id"], "big-1");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the limit")
    );

    // The server goes on.
    let (is_error, text) = client.call("search", json!({"query": "alpha"}));
    assert!(!is_error && text.contains("a.md"), "{text}");
}

#[test]
fn special_files_created_while_serving_block_nothing() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let index = world.path().join("index");
    let mut client = Client::start(&world, &vault);
    mkfifo(&vault.join("late.md"));
    let socket = std::os::unix::net::UnixListener::bind(vault.join("late-socket.md")).unwrap();
    common::write(&vault.join("fresh.md"), b"# Fresh\n\nzebracorn arrives\n");
    // The watcher re-indexes after 300 ms of quiet; poll until it has.
    let started = Instant::now();
    loop {
        let (_, text) = client.call("search", json!({"query": "zebracorn"}));
        if text.contains("fresh.md") {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the server never saw fresh.md"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (is_error, text) = client.call("get_note", json!({"path": "late.md"}));
    assert!(is_error, "{text}");
    // A CLI call on the same index is not stuck behind the server's lock.
    let mut command = world.cmd();
    command
        .args(["search", "zebracorn", "--format", "files", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index);
    let found = check("search", &bounded(command), &[0]);
    assert_eq!(found, "fresh.md\n");
    drop(socket);
}

#[test]
fn fifos_in_config_files_are_refused_without_blocking() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "alpha\n")]);
    mkfifo(&world.work().join(".env"));
    let mut command = world.cmd();
    command.args(["search", "alpha"]);
    let output = bounded(command);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("a FIFO, not a regular file"));
    let mut command = world.cmd();
    command.args(["search", "alpha", "--vault"]).arg(&vault);
    check("search --vault", &bounded(command), &[0]);
}

#[test]
fn a_hand_edited_feedback_file_is_named_by_status() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let index = world.path().join("index");
    let status = || {
        let mut command = world.cmd();
        command
            .args(["status", "--format", "json", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index);
        check("status", &bounded(command), &[0])
    };
    status();
    fs::write(
        index.join("feedback.json"),
        r#"{"notes": {"a.md": {"useful": -3, "not_useful": 1}}}"#,
    )
    .unwrap();
    let text = status();
    assert!(
        text.contains("the counts of 'a.md' are not non-negative integers"),
        "{text}"
    );
}

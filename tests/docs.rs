//! The documentation cannot drift from the program.
//!
//! - Every shell block marked runnable (a fence whose info string is
//!   `sh runnable`) in README.md, docs/ and skills/ is run, as one script,
//!   with the built `ctxpack` first on `PATH`, in a fresh copy of the
//!   examples (see `Sandbox`). A failing command fails the test with the
//!   file and line it is written on.
//! - Every `json` block parses as JSON and every `toml` block as TOML.
//! - Every MCP client snippet (JSON `mcpServers`/`servers`, TOML
//!   `mcp_servers`, `claude mcp add … -- COMMAND`) starts a server that
//!   answers `initialize` and lists the `context_pack` tool.
//! - The agent skill has the front matter the Agent Skills format asks for,
//!   and every shell block it shows is runnable (so every one is run).
//!
//! The convention is documented for contributors in docs/contributing.md.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// The info string that marks a shell block as runnable.
const RUNNABLE: &str = "sh runnable";
/// How long one runnable block may take (it indexes a small vault: a
/// debug build does that in about a second).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);
/// The vault path the snippets show, replaced by the sandbox's vault.
const SNIPPET_VAULT: &str = "/path/to/vault";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documentation files checked: README.md, every Markdown file under
/// docs/ and skills/, in path order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    for dir in ["docs", "skills"] {
        collect_markdown(&root().join(dir), &mut files);
    }
    files
}

fn collect_markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|entry| entry.unwrap().path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            collect_markdown(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// One fenced block: its info string, the 1-based line of its first
/// content line, and its lines.
struct Block {
    info: String,
    first_line: usize,
    lines: Vec<String>,
}

/// The fenced blocks of a Markdown text (backtick fences of three or more,
/// at any indentation, closed by a fence at least as long).
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String, Block)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match &mut open {
            None if ticks >= 3 => {
                let indent = line.len() - trimmed.len();
                let info = trimmed[ticks..].trim().to_string();
                let block = Block {
                    info,
                    first_line: index + 2,
                    lines: Vec::new(),
                };
                open = Some((ticks, " ".repeat(indent), block));
            }
            None => {}
            Some((fence, _, _)) if ticks >= *fence && trimmed[ticks..].trim().is_empty() => {
                out.push(open.take().unwrap().2);
            }
            Some((_, indent, block)) => {
                let line = line.strip_prefix(indent.as_str()).unwrap_or(line);
                block.lines.push(line.to_string());
            }
        }
    }
    assert!(open.is_none(), "an unclosed code fence");
    out
}

/// A fresh copy of the examples with the built binary first on `PATH`:
/// the current folder stands for the repository's root (so commands say
/// `--vault examples/vault`), `$HOME` and the XDG folders are empty
/// folders of the sandbox, and the global config names the example vault
/// (so a command without `--vault` uses it).
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        for example in ["vault", "novel", "software"] {
            copy_dir(
                &root().join("examples").join(example),
                &dir.path().join("examples").join(example),
            );
        }
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ctxpack"), bin.join("ctxpack")).unwrap();
        let config = dir.path().join("home/.config/obsidian-wiki");
        fs::create_dir_all(&config).unwrap();
        fs::write(
            config.join("config"),
            format!(
                "OBSIDIAN_VAULT_PATH={}\n",
                dir.path().join("examples/vault").display()
            ),
        )
        .unwrap();
        Sandbox { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn vault(&self) -> PathBuf {
        self.path().join("examples/vault")
    }

    /// A command run in the sandbox, with nothing of the caller's
    /// configuration inherited.
    fn command(&self, program: &str) -> Command {
        let path = format!(
            "{}:{}",
            self.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(program);
        cmd.current_dir(self.path())
            .env("PATH", path)
            .env("HOME", self.path().join("home"))
            .env("XDG_CONFIG_HOME", self.path().join("home/.config"))
            .env("XDG_CACHE_HOME", self.path().join("home/.cache"))
            .env("XDG_DATA_HOME", self.path().join("home/.local/share"))
            .stdin(Stdio::null());
        for (key, _) in std::env::vars() {
            if key.starts_with("CTXPACK_")
                || key.starts_with("QMD_")
                || key == "OBSIDIAN_VAULT_PATH"
                || key == "SOURCE_DATE_EPOCH"
            {
                cmd.env_remove(key);
            }
        }
        cmd
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The commands of a shell block: (1-based line, text), a line ending in
/// `\` joined with the next; blank lines and comment lines left out.
fn commands(block: &Block) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (offset, line) in block.lines.iter().enumerate() {
        let number = block.first_line + offset;
        let (start, mut text) = pending.take().unwrap_or((number, String::new()));
        match line.strip_suffix('\\') {
            Some(head) => {
                text.push_str(head);
                pending = Some((start, text));
            }
            None => {
                text.push_str(line);
                let trimmed = text.trim();
                if !trimmed.is_empty() && !trimmed.starts_with('#') {
                    out.push((start, text));
                }
            }
        }
    }
    assert!(pending.is_none(), "a runnable block ends in a backslash");
    out
}

/// The script for a runnable block: each command preceded by a marker on
/// stderr naming its line, so a failure can be placed; `set -e` stops at the
/// first failure.
fn script(commands: &[(usize, String)]) -> String {
    let mut script = String::from("set -e\n");
    for (line, command) in commands {
        script.push_str(&format!("echo '@@docs-line {line}' >&2\n{command}\n"));
    }
    script
}

/// Runs `cmd` to its end or `timeout`: (exit code, stdout, stderr).
fn run_bounded(mut cmd: Command, timeout: Duration) -> (Option<i32>, String, String) {
    let output_dir = tempfile::tempdir().unwrap();
    let out_path = output_dir.path().join("stdout");
    let err_path = output_dir.path().join("stderr");
    cmd.stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().expect("spawn sh");
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |path: &Path| String::from_utf8_lossy(&fs::read(path).unwrap()).into_owned();
    (code, read(&out_path), read(&err_path))
}

/// Runs one runnable block; an error names the file and line of the
/// command that failed.
fn run_block(file: &Path, block: &Block) -> Result<(), String> {
    let commands = commands(block);
    if commands.is_empty() {
        return Err(format!(
            "{}:{}: a runnable block without commands",
            relative(file),
            block.first_line
        ));
    }
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command("sh");
    cmd.arg("-c").arg(script(&commands));
    let (code, stdout, stderr) = run_bounded(cmd, BLOCK_TIMEOUT);
    if code == Some(0) {
        return Ok(());
    }
    let line = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("@@docs-line "))
        .next_back()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(block.first_line);
    let command = commands
        .iter()
        .find(|(l, _)| *l == line)
        .map(|(_, c)| c.trim().to_string())
        .unwrap_or_default();
    let stderr: String = stderr
        .lines()
        .filter(|l| !l.starts_with("@@docs-line "))
        .collect::<Vec<_>>()
        .join("\n");
    let how = match code {
        Some(code) => format!("exited {code}"),
        None => format!("did not end within {} s", BLOCK_TIMEOUT.as_secs()),
    };
    Err(format!(
        "{}:{line}: `{command}` {how}\n--- stdout (end)\n{}\n--- stderr\n{stderr}",
        relative(file),
        tail(&stdout, 2000),
    ))
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[test]
fn every_runnable_block_runs_against_the_examples() {
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut in_readme = 0;
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        for block in blocks(&text).iter().filter(|b| b.info == RUNNABLE) {
            ran += 1;
            if file.ends_with("README.md") {
                in_readme += 1;
            }
            if let Err(message) = run_block(&file, block) {
                failures.push(message);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} runnable blocks failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The convention is in use: a README without a runnable block would
    // pass this test by checking nothing.
    assert!(in_readme >= 2, "README.md has {in_readme} runnable blocks");
    assert!(ran >= 10, "only {ran} runnable blocks in the docs");
}

/// A failing command is reported with its file and line, and the commands
/// after it do not run.
#[test]
fn a_failing_command_is_placed_by_file_and_line() {
    let text = "# Doc\n\n```sh runnable\nctxpack status\nctxpack pack --budget 0 \\\n  raft\ntouch after\n```\n";
    let block = &blocks(text)[0];
    assert_eq!(block.first_line, 4);
    assert_eq!(
        commands(block),
        vec![
            (4, "ctxpack status".to_string()),
            (5, "ctxpack pack --budget 0   raft".to_string()),
            (7, "touch after".to_string()),
        ]
    );
    let error = run_block(Path::new("doc.md"), block).unwrap_err();
    assert!(
        error.starts_with("doc.md:5: `ctxpack pack --budget 0   raft` exited 2"),
        "{error}"
    );
    assert!(error.contains("budget"), "{error}");
}

#[test]
fn every_json_and_toml_block_parses() {
    let mut checked = (0, 0);
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        for block in blocks(&text) {
            let body = block.lines.join("\n");
            let place = format!("{}:{}", relative(&file), block.first_line);
            match block.info.as_str() {
                "json" => {
                    checked.0 += 1;
                    if let Err(e) = serde_json::from_str::<Value>(&body) {
                        panic!("{place}: not JSON: {e}");
                    }
                }
                "toml" => {
                    checked.1 += 1;
                    if let Err(e) = body.parse::<toml_edit::DocumentMut>() {
                        panic!("{place}: not TOML: {e}");
                    }
                }
                _ => {}
            }
        }
    }
    assert!(checked.0 >= 3, "only {} JSON blocks", checked.0);
    assert!(checked.1 >= 1, "only {} TOML blocks", checked.1);
}

/// A server command a client snippet registers: where it is written, the
/// program and its arguments.
struct ServerSnippet {
    place: String,
    command: String,
    args: Vec<String>,
}

/// Every MCP client snippet of the docs, in each client's own format.
fn server_snippets() -> Vec<ServerSnippet> {
    let mut out = Vec::new();
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        for block in blocks(&text) {
            let body = block.lines.join("\n");
            let place = format!("{}:{}", relative(&file), block.first_line);
            let mut push = |command: &str, args: Vec<String>| {
                out.push(ServerSnippet {
                    place: place.clone(),
                    command: command.to_string(),
                    args,
                })
            };
            match block.info.as_str() {
                "json" => {
                    let value: Value = serde_json::from_str(&body).unwrap();
                    // Claude Desktop and Cursor: `mcpServers`; VS Code:
                    // `servers`, each with its transport `type`.
                    for (key, vscode) in [("mcpServers", false), ("servers", true)] {
                        let Some(servers) = value.get(key).and_then(Value::as_object) else {
                            continue;
                        };
                        for server in servers.values() {
                            if vscode {
                                assert_eq!(server["type"], "stdio", "{place}: VS Code's `type`");
                            }
                            let args = server["args"]
                                .as_array()
                                .unwrap_or_else(|| panic!("{place}: `args` is a list"))
                                .iter()
                                .map(|a| a.as_str().unwrap().to_string())
                                .collect();
                            push(server["command"].as_str().unwrap(), args);
                        }
                    }
                }
                "toml" => {
                    let doc: toml_edit::DocumentMut = body.parse().unwrap();
                    let Some(servers) = doc.get("mcp_servers").and_then(|s| s.as_table()) else {
                        continue;
                    };
                    for (_, server) in servers.iter() {
                        let command = server["command"].as_str().unwrap();
                        let args = server["args"]
                            .as_array()
                            .unwrap_or_else(|| panic!("{place}: `args` is an array"))
                            .iter()
                            .map(|a| a.as_str().unwrap().to_string())
                            .collect();
                        push(command, args);
                    }
                }
                _ => {
                    for line in &block.lines {
                        let Some(rest) = line.trim().strip_prefix("claude mcp add ") else {
                            continue;
                        };
                        let (_, server) = rest
                            .split_once(" -- ")
                            .unwrap_or_else(|| panic!("{place}: `claude mcp add NAME -- COMMAND`"));
                        let mut words = server.split_whitespace().map(str::to_string);
                        let command = words.next().unwrap();
                        push(&command, words.collect());
                    }
                }
            }
        }
    }
    out
}

/// Starts `snippet`'s server in a sandbox (its vault path replaced by the
/// example vault) and checks that it answers `initialize` and lists the
/// `context_pack` tool.
fn check_server(snippet: &ServerSnippet) {
    let sandbox = Sandbox::new();
    let vault = sandbox.vault().display().to_string();
    let args: Vec<String> = snippet
        .args
        .iter()
        .map(|a| a.replace(SNIPPET_VAULT, &vault))
        .collect();
    let place = &snippet.place;
    assert_eq!(snippet.command, "ctxpack", "{place}: the program");
    let mut child = sandbox
        .command(&snippet.command)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{place}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let next = |id: u64| -> Value {
        loop {
            let line = receive
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{place}: no answer from `ctxpack {}`", args.join(" ")));
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    };
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "docs", "version": "0"}}});
    writeln!(stdin, "{initialize}").unwrap();
    let answer = next(1);
    assert_eq!(
        answer["result"]["serverInfo"]["name"], "ctxpack",
        "{place}: {answer}"
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    let tools = next(2);
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{place}: {tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"context_pack"), "{place}: tools {names:?}");
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn every_mcp_snippet_starts_a_working_server() {
    let snippets = server_snippets();
    // Claude Code, Claude Desktop, Cursor, VS Code and Codex at least.
    assert!(snippets.len() >= 5, "{} MCP snippets", snippets.len());
    for snippet in &snippets {
        check_server(snippet);
    }
}

/// The front matter of a skill: the text between the first two `---`
/// lines, as YAML.
fn front_matter(text: &str) -> yaml_serde::Value {
    let rest = text
        .strip_prefix("---\n")
        .expect("SKILL.md starts with a `---` line");
    let (yaml, _) = rest.split_once("\n---\n").expect("a closing `---` line");
    yaml_serde::from_str(yaml).expect("the front matter is YAML")
}

#[test]
fn the_skill_has_agent_skills_front_matter_and_runnable_commands() {
    let path = root().join("skills/ctxpack/SKILL.md");
    let text = fs::read_to_string(&path).unwrap();
    let matter = front_matter(&text);
    // The format's rules: the name is the folder's, lower-case letters,
    // digits and hyphens, at most 64 characters; a description of at most
    // 1024 characters says what the skill does and when to use it.
    let name = matter["name"].as_str().expect("a `name`");
    assert_eq!(name, "ctxpack");
    let description = matter["description"].as_str().expect("a `description`");
    assert!(
        (1..=1024).contains(&description.chars().count()),
        "{description}"
    );
    assert!(description.contains("ctxpack pack"), "{description}");
    // Every command the skill shows is run by the runnable-blocks test.
    let shell: Vec<Block> = blocks(&text)
        .into_iter()
        .filter(|b| b.info.starts_with("sh") || b.info.starts_with("bash"))
        .collect();
    assert!(shell.len() >= 3, "{} shell blocks", shell.len());
    for block in &shell {
        assert_eq!(
            block.info, RUNNABLE,
            "skills/ctxpack/SKILL.md:{}: every shell block of the skill is runnable",
            block.first_line
        );
    }
}

#[test]
fn front_matter_is_read_as_the_format_has_it() {
    let matter = front_matter("---\nname: a-skill\ndescription: Does a thing.\n---\nbody\n");
    assert_eq!(matter["name"].as_str(), Some("a-skill"));
    assert_eq!(matter["description"].as_str(), Some("Does a thing."));
}

/// Every source file of the crate and its tests, as one text to search.
fn all_sources() -> String {
    fn collect(dir: &Path, out: &mut String) {
        let mut paths: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                collect(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push_str(&fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = String::new();
    collect(&root().join("src"), &mut out);
    collect(&root().join("tests"), &mut out);
    out
}

/// ARCHITECTURE.md names a test for every invariant and files for the
/// code map: each test named (a backticked identifier with at least three
/// underscores) is a function of the crate or its tests, and each
/// `src/….rs` or `tests/….rs` file named exists.
#[test]
fn architecture_names_only_tests_and_files_that_exist() {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    assert!(
        text.lines().count() <= 450,
        "ARCHITECTURE.md is over 450 lines"
    );
    let sources = all_sources();
    let mut tests = 0;
    for name in text.split('`').skip(1).step_by(2) {
        let is_test_name = name.matches('_').count() >= 3
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if is_test_name {
            tests += 1;
            assert!(
                sources.contains(&format!("fn {name}(")),
                "ARCHITECTURE.md names `{name}`, which is no function"
            );
        }
        let is_file = (name.starts_with("src/") || name.starts_with("tests/"))
            && name.ends_with(".rs")
            && !name.contains(' ');
        if is_file {
            assert!(root().join(name).is_file(), "ARCHITECTURE.md names {name}");
        }
    }
    assert!(tests >= 30, "only {tests} tests named");
}

/// The anchors GitHub gives a Markdown file's headings (outside code
/// blocks): lower case, punctuation other than `-` and `_` dropped, spaces
/// as `-`, a repeated heading suffixed `-1`, `-2`…
fn anchors(text: &str) -> Vec<String> {
    let mut code_lines = std::collections::HashSet::new();
    for block in blocks(text) {
        // The fence lines themselves, and every line inside.
        for line in block.first_line - 1..=block.first_line + block.lines.len() {
            code_lines.insert(line);
        }
    }
    let mut out: Vec<String> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if code_lines.contains(&(index + 1)) {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let repeats = out
            .iter()
            .filter(|a| **a == slug || a.starts_with(&format!("{slug}-")))
            .count();
        out.push(if repeats == 0 {
            slug
        } else {
            format!("{slug}-{repeats}")
        });
    }
    out
}

/// Every relative link of the docs (README.md, ARCHITECTURE.md, docs/,
/// skills/) leads to a file that exists, and an anchor to a heading of it.
#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut files = doc_files();
    files.push(root().join("ARCHITECTURE.md"));
    let mut checked = 0;
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (index, line) in text.lines().enumerate() {
            for piece in line.split("](").skip(1) {
                let Some(end) = piece.find(')') else { continue };
                let target = &piece[..end];
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let place = format!("{}:{}", relative(file), index + 1);
                assert!(linked.exists(), "{place}: {target} does not exist");
                if !anchor.is_empty() {
                    let anchors = anchors(&fs::read_to_string(&linked).unwrap());
                    assert!(
                        anchors.iter().any(|a| a == anchor),
                        "{place}: no heading #{anchor} in {}",
                        relative(&linked)
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} links");
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# Title\n## `ctxpack index`, `status`\n## Output styles (`--style`)\n```\n# not a heading\n```\n## Title\n## Bird's-eye view\n";
    assert_eq!(
        anchors(text),
        [
            "title",
            "ctxpack-index-status",
            "output-styles---style",
            "title-1",
            "birds-eye-view"
        ]
    );
}

/// A policy shown as a `yaml .ctxpack.yaml` block is one ctxpack accepts:
/// written to the example vault, `ctxpack audit` reads it and exits 0 (a
/// key the program does not know would stop it with exit 2).
#[test]
fn every_policy_file_shown_is_accepted() {
    let mut checked = 0;
    for file in doc_files() {
        let text = fs::read_to_string(&file).unwrap();
        for block in blocks(&text)
            .iter()
            .filter(|b| b.info == "yaml .ctxpack.yaml")
        {
            checked += 1;
            let sandbox = Sandbox::new();
            fs::write(
                sandbox.vault().join(".ctxpack.yaml"),
                block.lines.join("\n"),
            )
            .unwrap();
            let output = sandbox
                .command("ctxpack")
                .args(["audit", "--vault", "examples/vault"])
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{}:{}: the policy is refused: {}",
                relative(&file),
                block.first_line,
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    assert!(checked >= 1, "no policy file shown");
}

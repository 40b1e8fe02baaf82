//! The MCP server over stdio, driven by a minimal JSON-RPC client.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::World;
use common::mcp_client::Client;
use serde_json::{Value, json};

#[test]
fn tools_are_listed_with_schemas() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let tools = client.request("tools/list", json!({}));
    let mut names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "context_pack",
            "get_note",
            "grep_pack",
            "mark_useful",
            "read_pack",
            "search",
            "status"
        ]
    );
    let pack = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "context_pack")
        .unwrap();
    assert!(pack["inputSchema"]["properties"]["budget_tokens"].is_object());
    assert!(
        pack["description"]
            .as_str()
            .unwrap()
            .contains("token-budgeted")
    );
    check_listing(&client.init, &tools);
    let instructions = client.init["result"]["instructions"].as_str().unwrap();
    assert!(!instructions.contains("assemble"), "{instructions}");
    // A client that calls it anyway is told there is no such tool.
    let refused = client.request(
        "tools/call",
        json!({"name": "assemble", "arguments": {"work": "w", "scenario": "continuation", "chapter": 1, "intent": "x"}}),
    );
    assert_eq!(refused["error"]["message"], "tool not found", "{refused}");
}

/// A misspelt or unknown argument is refused, never ignored: `budget` for
/// `budget_tokens` once packed 8000 tokens without a word.
#[test]
fn unknown_arguments_are_refused_and_every_schema_says_so() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let tools = client.request("tools/list", json!({}));
    for tool in tools["result"]["tools"].as_array().unwrap() {
        assert_eq!(
            tool["inputSchema"]["additionalProperties"],
            json!(false),
            "{}",
            tool["name"]
        );
    }
    for (tool, arguments, unknown) in [
        (
            "context_pack",
            json!({"query": "raft", "budget": 200}),
            "budget",
        ),
        (
            "context_pack",
            json!({"query": "raft", "folder": "entities"}),
            "folder",
        ),
        (
            "search",
            json!({"query": "raft", "tag": "databases"}),
            "tag",
        ),
        (
            "get_note",
            json!({"path": "concepts/raft.md", "section": "x"}),
            "section",
        ),
        ("status", json!({"verbose": true}), "verbose"),
    ] {
        let (is_error, text) = client.call(tool, arguments.clone());
        assert!(is_error, "{tool} {arguments}: {text}");
        assert!(
            text.contains(&format!("unknown field `{unknown}`")),
            "{tool}: {text}"
        );
    }
    // The filters, flattened into the same arguments, are still read.
    let (is_error, text) = client.call(
        "search",
        json!({"query": "raft", "tags": "nosuchtag", "folders": ["concepts"]}),
    );
    assert!(!is_error, "{text}");
    let (is_error, text) = client.call(
        "context_pack",
        json!({"query": "raft", "budget_tokens": 300}),
    );
    assert!(!is_error && text.contains("# Budget: 300 tokens"), "{text}");
}

/// A budget too small for the pack's header gives an empty pack and says
/// why, over MCP as on the command line.
#[test]
fn an_empty_pack_says_why() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let response = client.request(
        "tools/call",
        json!({"name": "context_pack", "arguments": {"query": "raft", "budget_tokens": 10}}),
    );
    assert_eq!(
        response["result"]["content"],
        json!([
            {"type": "text", "text": ""},
            {"type": "text", "text": "warning: a budget of 10 tokens is too small for even the pack header"}
        ]),
        "{response}"
    );
}

/// `get_note` takes a path without its `.md`, as `mark_useful` and
/// `--note` do; a private or missing note still gets the one message.
#[test]
fn get_note_takes_a_path_without_its_extension() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let (is_error, with) = client.call("get_note", json!({"path": "concepts/raft.md"}));
    assert!(!is_error, "{with}");
    let (is_error, without) = client.call("get_note", json!({"path": "concepts/raft"}));
    assert!(!is_error, "{without}");
    assert_eq!(with, without);
    let (is_error, missing) = client.call("get_note", json!({"path": "concepts/nothing"}));
    assert!(is_error);
    assert!(
        missing.starts_with("no note 'concepts/nothing' in the vault"),
        "{missing}"
    );
}

/// What every tool declares it does, as (readOnly, destructive,
/// idempotent, openWorld) hints.
fn annotations(tool: &str) -> [bool; 4] {
    match tool {
        "search" | "get_note" | "status" | "read_pack" | "grep_pack" => [true, false, true, false],
        // A log.md line, a vote: each call adds one.
        "context_pack" | "mark_useful" => [false, false, false, false],
        // The review copy, replaced by the same bytes on a repeat.
        "assemble" => [false, false, true, false],
        other => panic!("no annotations expected for {other}"),
    }
}

/// Checks each listed tool's annotations, the schemas' integer bounds
/// (equal to the limits the server enforces), that no tool takes
/// `generated_at`, and that the instructions name every tool.
fn check_listing(init: &Value, tools: &Value) {
    let instructions = init["result"]["instructions"].as_str().unwrap();
    let bounds = [
        ("search", "limit", 1, 100),
        ("context_pack", "budget_tokens", 1, 100_000),
        ("context_pack", "recent_dailies", 0, 30),
        ("context_pack", "depth", 0, 3),
        ("context_pack", "graph_depth", 0, 3),
        ("grep_pack", "context", 0, 20),
        ("assemble", "budget", 1, 100_000),
        ("assemble", "chapter", 1, -1),
    ];
    for tool in tools["result"]["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let hints = &tool["annotations"];
        let got = [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ]
        .map(|hint| {
            hints[hint]
                .as_bool()
                .unwrap_or_else(|| panic!("{name}: {hint}"))
        });
        assert_eq!(got, annotations(name), "{name}");
        assert!(instructions.contains(name), "the instructions name {name}");
        let properties = &tool["inputSchema"]["properties"];
        assert!(properties.get("generated_at").is_none(), "{name}");
        for (_, argument, min, max) in bounds.iter().filter(|b| b.0 == name) {
            let schema = &properties[argument];
            assert_eq!(schema["minimum"], json!(min), "{name}.{argument}");
            let expected_max = if *max < 0 { Value::Null } else { json!(max) };
            assert_eq!(schema["maximum"], expected_max, "{name}.{argument}");
        }
    }
}

#[test]
fn assemble_is_offered_over_a_writing_project() {
    let world = World::new();
    let project = world.example("novel");
    let mut client = Client::start(&world, &project);
    let tools = client.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"assemble"), "{names:?}");
    assert_eq!(names.len(), 8, "{names:?}");
    check_listing(&client.init, &tools);
    let assemble = names.iter().position(|n| *n == "assemble").unwrap();
    let description = tools["result"]["tools"][assemble]["description"]
        .as_str()
        .unwrap();
    // No internal words: no seed numbers, no recipe file names.
    assert!(
        !description.contains("seed") && !description.contains("recipe.yaml"),
        "{description}"
    );
}

/// The server stamps packs from `SOURCE_DATE_EPOCH`, as `pack` does; a
/// value that is no time stops it before it serves, as the configuration
/// error it is for `pack` (exit 2).
#[test]
fn a_bad_source_date_epoch_is_refused_at_start() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = world
        .cmd()
        .env("SOURCE_DATE_EPOCH", "soon")
        .args(["serve", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "ctxpack: error: SOURCE_DATE_EPOCH 'soon' is not a number of seconds\n"
    );
}

#[test]
fn tools_answer_like_the_command_line() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start_reproducible(&world, &vault, &[]);

    let (error, text) = client.call("search", json!({"query": "paxos", "limit": 3}));
    assert!(!error, "{text}");
    let hits: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(hits["hits"][0]["path"], "concepts/paxos.md");
    assert!(hits["hits"][0].get("explanation").is_none());

    // The same bundle as `ctxpack pack` with the same inputs.
    let (error, bundle) = client.call(
        "context_pack",
        json!({"query": "raft consensus", "budget_tokens": 1500, "format": "json"}),
    );
    assert!(!error, "{bundle}");
    let pack: Value = serde_json::from_str(&bundle).unwrap();
    let out = world
        .cmd()
        .args([
            "pack",
            "raft consensus",
            "--budget",
            "1500",
            "--format",
            "json",
            "--no-log",
            "--generated-at",
            "2026-06-01T00:00:00Z",
            "--vault",
        ])
        .arg(&vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .output()
        .unwrap();
    let cli: Value = serde_json::from_str(&common::ok(&out)).unwrap();
    assert_eq!(pack["bundle"], cli["bundle"]);
    assert_eq!(pack["pages"], cli["pages"]);

    let (error, note) = client.call(
        "get_note",
        json!({"path": "concepts/quorum.md", "heading": "Key Ideas"}),
    );
    assert!(!error);
    assert!(
        note.starts_with("## Key Ideas\n\n- Read and write quorums"),
        "{note}"
    );
    let (error, lines) = client.call(
        "get_note",
        json!({"path": "concepts/quorum.md", "lines": "1-2"}),
    );
    assert!(!error);
    assert_eq!(lines, "---\ntitle: Quorum");

    let (error, text) = client.call(
        "mark_useful",
        json!({"path": "concepts/quorum.md", "useful": true}),
    );
    assert!(!error, "{text}");
    assert!(text.contains("\"useful\": 1"));

    let (error, text) = client.call("status", json!({}));
    assert!(!error);
    let status: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["notes"], 20);
    // The example's notes are dated by their properties or names but one,
    // dated by its file's time: one time is no checkout's.
    assert_eq!(
        status["dates"],
        json!({"own": 19, "file_time": 1, "shared_file_time": 0, "none": 0})
    );
}

#[test]
fn assemble_answers_like_the_command_line() {
    let world = World::new();
    let project = world.example("novel");
    let mut client = Client::start(&world, &project);
    let (error, text) = client.call(
        "assemble",
        json!({"work": "青灯录", "scenario": "validation", "chapter": 9, "intent": "检查第9章",
               "candidate": "works/青灯录/草稿/第009章.md", "format": "json"}),
    );
    assert!(!error, "{text}");
    let served: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(served["agent"], "detector");
    let out = world
        .cmd()
        .current_dir(&project)
        .args([
            "assemble",
            "--work",
            "青灯录",
            "--scenario",
            "validation",
            "--chapter",
            "9",
            "--intent",
            "检查第9章",
            "--candidate",
            "works/青灯录/草稿/第009章.md",
            "--no-write",
        ])
        .output()
        .unwrap();
    assert_eq!(served["text"].as_str().unwrap(), common::ok(&out));
    let review = project.join("works/青灯录/评审/上下文-第009章-detection.md");
    assert_eq!(
        std::fs::read_to_string(review).unwrap(),
        served["text"].as_str().unwrap()
    );

    let (error, xml) = client.call(
        "assemble",
        json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "写第9章",
               "style": "xml"}),
    );
    assert!(!error, "{xml}");
    let cli_xml = world
        .cmd()
        .current_dir(&project)
        .args([
            "assemble",
            "--work",
            "青灯录",
            "--scenario",
            "continuation",
            "--chapter",
            "9",
            "--intent",
            "写第9章",
            "--style",
            "xml",
            "--no-write",
        ])
        .output()
        .unwrap();
    assert_eq!(xml, common::ok(&cli_xml));
    assert!(xml.starts_with("<context recipe="), "{xml}");

    for (arguments, message) in [
        (
            json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "x", "style": "plain"}),
            "does not fit assemble",
        ),
        (
            json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "x", "style": "html"}),
            "unknown style",
        ),
        (
            json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "x", "agent": "ghost"}),
            "unknown agent",
        ),
        (
            json!({"work": "青灯录", "scenario": "validation", "chapter": 9, "intent": "x", "candidate": "../../etc/passwd"}),
            "leaves the project root",
        ),
        (
            json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "x", "budget": 50}),
            "never cut",
        ),
        (
            json!({"work": "青灯录", "scenario": "continuation", "chapter": 0, "intent": "x"}),
            "chapter must be",
        ),
    ] {
        let (error, text) = client.call("assemble", arguments);
        assert!(error && text.contains(message), "{text}");
    }
    let (error, _) = client.call("status", json!({}));
    assert!(!error, "the server goes on");
}

#[test]
fn libraries_no_work_binds_are_outside_the_vault_tools() {
    let world = World::new();
    let project = world.example("novel");
    // 青灯录 binds 打斗范式 only; 言情范式 is bound by no work.
    common::write(
        &project.join("knowledge/打斗范式/open-card.md"),
        "# Open card\n\nThe zebrafinch signal is shown to every agent.\n".as_bytes(),
    );
    common::write(
        &project.join("knowledge/言情范式/closed-card.md"),
        "# Closed card\n\nThe zebrafinch cipher is HIDDEN-BY-BINDINGS.\n".as_bytes(),
    );
    let mut client = Client::start(&world, &project);
    let (error, text) = client.call("search", json!({"query": "zebrafinch"}));
    assert!(!error, "{text}");
    assert!(text.contains("knowledge/打斗范式/open-card.md"), "{text}");
    assert!(!text.contains("言情范式"), "{text}");
    let (error, text) = client.call(
        "context_pack",
        json!({"query": "zebrafinch cipher", "budget_tokens": 4000}),
    );
    assert!(!error, "{text}");
    assert!(text.contains("zebrafinch signal"), "{text}");
    assert!(
        !text.contains("HIDDEN-BY-BINDINGS") && !text.contains("言情范式"),
        "{text}"
    );
    let (error, text) = client.call(
        "get_note",
        json!({"path": "knowledge/言情范式/closed-card.md"}),
    );
    assert!(error && !text.contains("HIDDEN-BY-BINDINGS"), "{text}");
    let (error, text) = client.call(
        "get_note",
        json!({"path": "knowledge/言情范式/借物传情.md"}),
    );
    assert!(error, "{text}");
    drop(client);

    // A work's bindings that cannot be read hide every library.
    assert_eq!(
        ctxpack::unbound_libraries(&project).unwrap(),
        ["knowledge/言情范式"]
    );
    common::write(
        &project.join("works/青灯录/装配.yaml"),
        "libraries: [打斗范式\n".as_bytes(),
    );
    assert_eq!(
        ctxpack::unbound_libraries(&project).unwrap(),
        ["knowledge/打斗范式", "knowledge/言情范式"]
    );
    // A folder that is not a writing project hides nothing.
    assert!(
        ctxpack::unbound_libraries(&world.example_vault("vault"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn bad_arguments_and_escapes_are_tool_errors_and_the_server_goes_on() {
    let world = World::new();
    let outside = world.vault("outside", &[("secret.md", "TOP SECRET")]);
    let vault = world.example_vault("vault");
    std::os::unix::fs::symlink(outside.join("secret.md"), vault.join("leak.md")).unwrap();
    let mut client = Client::start(&world, &vault);
    for (tool, arguments, message) in [
        (
            "context_pack",
            json!({"query": "raft", "budget_tokens": 0}),
            "budget_tokens must be between 1 and 100000",
        ),
        (
            "context_pack",
            json!({"query": "raft", "budget_tokens": 100001}),
            "budget_tokens must be between",
        ),
        ("context_pack", json!({"query": "  "}), "query is required"),
        (
            "context_pack",
            json!({"query": "x", "subqueries": ["a", "b", "c", "d", "e", "f"]}),
            "at most 5 subqueries",
        ),
        (
            "context_pack",
            json!({"query": "x", "tokenizer": "gpt2"}),
            "unknown tokenizer",
        ),
        ("search", json!({"query": ""}), "query is empty"),
        (
            "search",
            json!({"query": "x", "limit": 0}),
            "limit must be between 1 and 100",
        ),
        (
            "get_note",
            json!({"path": "../outside/secret.md"}),
            "no note '../outside/secret.md' in the vault",
        ),
        (
            "get_note",
            json!({"path": "/etc/passwd"}),
            "no note '/etc/passwd' in the vault",
        ),
        (
            "get_note",
            json!({"path": "leak.md"}),
            "no note 'leak.md' in the vault",
        ),
        (
            "get_note",
            json!({"path": "missing.md"}),
            "no note 'missing.md' in the vault",
        ),
        (
            "mark_useful",
            json!({"path": "../x.md", "useful": true}),
            "no note '../x.md' in the vault",
        ),
        (
            "mark_useful",
            json!({"path": "missing.md", "useful": true}),
            "no note 'missing.md'",
        ),
    ] {
        let (error, text) = client.call(tool, arguments.clone());
        assert!(error, "{tool} {arguments} should fail");
        assert!(text.contains(message), "{tool} {arguments}: {text}");
        assert!(!text.contains("TOP SECRET"));
    }
    // Still serving.
    let (error, _) = client.call("search", json!({"query": "raft"}));
    assert!(!error);
}

/// A request the library refuses gets the same message from the command
/// line and from a tool call: the rule and its words live in one place.
#[test]
fn a_bad_pack_request_gets_one_message_in_both_faces() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let (error, text) = client.call(
        "context_pack",
        json!({"query": "raft", "subqueries": ["a", "b", "c", "d", "e", "f"]}),
    );
    assert!(error, "{text}");
    assert_eq!(text, "at most 5 subqueries, got 6");
    let mut args = vec!["pack", "raft"];
    for subquery in ["a", "b", "c", "d", "e", "f"] {
        args.extend(["--subquery", subquery]);
    }
    let out = world
        .cmd()
        .args(&args)
        .arg("--vault")
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.lines().next(),
        Some(format!("ctxpack: error: {text}").as_str()),
        "{stderr}"
    );
}

#[test]
fn a_note_pack_answers_like_the_command_line() {
    let world = World::new();
    let outside = world.vault("outside", &[("secret.md", "TOP SECRET")]);
    let vault = world.example_vault("vault");
    std::os::unix::fs::symlink(outside.join("secret.md"), vault.join("leak.md")).unwrap();
    let mut client = Client::start_reproducible(&world, &vault, &[]);
    let (error, bundle) = client.call(
        "context_pack",
        json!({"note": "concepts/raft.md", "depth": 2, "include_self": false, "budget_tokens": 1500,
               "format": "json"}),
    );
    assert!(!error, "{bundle}");
    let pack: Value = serde_json::from_str(&bundle).unwrap();
    assert_eq!(pack["mode"], "note");
    assert_eq!(pack["graph"]["anchor"], "concepts/raft.md");
    assert!(!pack["graph"]["neighbours"].as_array().unwrap().is_empty());
    let out = world
        .cmd()
        .args([
            "pack",
            "--note",
            "concepts/raft.md",
            "--depth",
            "2",
            "--no-self",
            "--budget",
            "1500",
            "--format",
            "json",
            "--no-log",
            "--generated-at",
            "2026-06-01T00:00:00Z",
            "--vault",
        ])
        .arg(&vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .output()
        .unwrap();
    let cli: Value = serde_json::from_str(&common::ok(&out)).unwrap();
    assert_eq!(pack["bundle"], cli["bundle"]);
    assert_eq!(pack["graph"], cli["graph"]);
    assert!(
        !pack["pages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"] == "concepts/raft.md")
    );
    for (arguments, message) in [
        (
            json!({"note": "../outside/secret.md"}),
            "no note '../outside/secret.md' in the vault",
        ),
        (json!({"note": "leak.md"}), "no note 'leak.md' in the vault"),
        (
            json!({"note": "/etc/passwd"}),
            "no note '/etc/passwd' in the vault",
        ),
        (
            json!({"note": "missing.md"}),
            "no note 'missing.md' in the vault",
        ),
        (json!({"note": "log.md"}), "no note 'log.md' in the vault"),
        (
            json!({"note": "concepts/raft.md", "query": "raft"}),
            "give one of note, query or recent",
        ),
        (
            json!({"note": "concepts/raft.md", "depth": 4}),
            "depth must be between 0 and 3",
        ),
        (
            json!({"note": "concepts/raft.md", "graph_depth": 1}),
            "not note",
        ),
        (
            json!({"query": "raft", "depth": 1}),
            "depth and include_self need a note",
        ),
        (
            json!({"query": "raft", "graph_direction": "up"}),
            "direction must be out, in or both",
        ),
        (
            json!({"recent": true, "graph_depth": 1}),
            "graph_depth needs a query",
        ),
    ] {
        let (error, text) = client.call("context_pack", arguments.clone());
        assert!(error, "{arguments} should fail");
        assert!(text.contains(message), "{arguments}: {text}");
        assert!(!text.contains("TOP SECRET"));
    }
    let (error, text) = client.call(
        "context_pack",
        json!({"query": "raft consensus", "graph_depth": 1, "format": "json"}),
    );
    assert!(!error, "{text}");
    let pack: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(pack["graph"]["depth"], 1);
}

#[test]
fn many_calls_in_flight_are_all_answered() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let queries = ["raft", "paxos", "quorum", "crdt", "etcd"];
    for i in 0..50u64 {
        let query = queries[i as usize % queries.len()];
        client.send(json!({
            "jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": query, "limit": 1}}
        }));
    }
    let mut answered = std::collections::BTreeMap::new();
    while answered.len() < 50 {
        let message = client
            .receive(std::time::Duration::from_secs(60))
            .expect("all answers");
        let id = message["id"].as_u64().unwrap();
        let text = message["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        answered.insert(id, text);
    }
    for (id, text) in answered {
        let query = queries[(id - 1000) as usize % queries.len()];
        let hits: Value = serde_json::from_str(&text).unwrap();
        let top = hits["hits"][0]["path"].as_str().unwrap();
        assert!(
            top.contains(query) || query == "crdt" && top == "concepts/crdt.md",
            "{query}: {top}"
        );
    }
}

/// Runs `ctxpack serve` over `root`, sends `messages` and collects what it
/// prints until the responses to `ids` arrive or it exits: (stdout lines,
/// exit code if it exited, stderr).
fn serve_raw(
    world: &World,
    root: &std::path::Path,
    messages: &[Value],
    ids: &[u64],
) -> (Vec<String>, Option<i32>, String) {
    let mut child = world
        .cmd()
        .args(["serve", "--vault"])
        .arg(root)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    for message in messages {
        // A server that refused to start has closed its input.
        if writeln!(stdin, "{message}").is_err() {
            break;
        }
    }
    let _ = stdin.flush();
    let mut printed = Vec::new();
    let mut waiting: Vec<u64> = ids.to_vec();
    while !waiting.is_empty() {
        let Ok(line) = lines.recv_timeout(std::time::Duration::from_secs(60)) else {
            break;
        };
        if let Ok(message) = serde_json::from_str::<Value>(&line) {
            waiting.retain(|id| message["id"] != *id);
        }
        printed.push(line);
    }
    // A closed output may come a moment before the exit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut status = child.try_wait().unwrap();
    while status.is_none() && !waiting.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        status = child.try_wait().unwrap();
    }
    let code = match status {
        Some(status) => status.code(),
        None => {
            let _ = child.kill();
            child.wait().unwrap();
            None
        }
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (printed, code, stderr)
}

#[test]
fn a_project_whose_recipe_does_not_parse_is_not_served() {
    let world = World::new();
    let project = world.example("novel");
    // A custom libraries folder: the fallback `knowledge` would hide nothing.
    std::fs::rename(project.join("knowledge"), project.join("资料库")).unwrap();
    let recipe = project.join("meta/recipe.yaml");
    let text = std::fs::read_to_string(&recipe)
        .unwrap()
        .replace("libraries_dir: knowledge", "libraries_dir: 资料库");
    std::fs::write(&recipe, &text).unwrap();
    common::write(
        &project.join("资料库/言情范式/closed-card.md"),
        "# Closed card\n\nThe quokka ledger is UNBOUND-MARKER.\n".as_bytes(),
    );
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}});
    let messages = [
        initialize,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "quokka ledger"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_note", "arguments": {"path": "资料库/言情范式/closed-card.md"}}}),
    ];
    // With the recipe intact, the unbound library is hidden.
    let (printed, code, _) = serve_raw(&world, &project, &messages, &[1, 2, 3]);
    assert_eq!(code, None, "served");
    assert_eq!(printed.len(), 3, "{printed:?}");
    assert!(!printed.concat().contains("UNBOUND-MARKER"), "{printed:?}");

    // Broken (an unknown key), it is refused: nothing is served.
    std::fs::write(&recipe, format!("{text}\nunknown_key: 1\n")).unwrap();
    let (printed, code, stderr) = serve_raw(&world, &project, &messages, &[1, 2, 3]);
    assert!(!printed.concat().contains("UNBOUND-MARKER"), "{printed:?}");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("meta/recipe.yaml") && stderr.contains("unknown_key"),
        "{stderr}"
    );
    assert!(ctxpack::unbound_libraries(&project).is_err());
}

#[test]
fn no_assemble_route_lets_the_vault_tools_serve_an_unbound_card() {
    let world = World::new();
    let project = world.example("novel");
    common::write(
        &project.join("knowledge/言情范式/密卷.md"),
        "---\n类型: 人物\n名称: 林砚\n场景类型: [悬疑, 对峙, 追逐]\n---\n## 要点\n\n\
         The quokka cipher is UNBOUND-MARKER.\n"
            .as_bytes(),
    );
    std::os::unix::fs::symlink(
        "../../knowledge/言情范式/密卷.md",
        project.join("works/青灯录/草稿.md"),
    )
    .unwrap();
    let mut client = Client::start(&world, &project);
    for candidate in ["knowledge/言情范式/密卷.md", "works/青灯录/草稿.md"] {
        let (error, text) = client.call(
            "assemble",
            json!({"work": "青灯录", "scenario": "validation", "chapter": 9, "intent": "x", "candidate": candidate}),
        );
        assert!(error, "{candidate}: {text}");
        assert!(
            text.contains("leads into library knowledge/言情范式")
                && !text.contains("UNBOUND-MARKER"),
            "{text}"
        );
    }
    let (error, text) = client.call(
        "assemble",
        json!({"work": "青灯录", "scenario": "continuation", "chapter": 9, "intent": "x", "format": "json"}),
    );
    assert!(!error && !text.contains("UNBOUND-MARKER"), "{text}");
    let review: Value = serde_json::from_str(&text).unwrap();
    let review = review["review_file"].as_str().unwrap().to_string();
    assert!(
        std::fs::read_to_string(project.join(&review))
            .unwrap()
            .contains("not_authorized · knowledge/言情范式")
    );
    // The review copy is a note like any other: it holds nothing gated.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (error, text) = client.call("search", json!({"query": "quokka cipher"}));
    assert!(!error && !text.contains("UNBOUND-MARKER"), "{text}");
    let (error, text) = client.call("get_note", json!({"path": review}));
    assert!(!text.contains("UNBOUND-MARKER"), "{error} {text}");
    let (error, text) = client.call("get_note", json!({"path": "works/青灯录/草稿.md"}));
    assert!(error && !text.contains("UNBOUND-MARKER"), "{text}");
}

/// A vault with one long note: packing it whole at the largest budget is
/// the slowest call a client can make.
fn long_note_vault(world: &World) -> std::path::PathBuf {
    // Every sentence its own, so that none is a repeat the pack leaves out:
    // packing it takes seconds (a pack of 2,000 copies of one paragraph
    // was its summary alone, quick enough on a fast run to beat the
    // timeout this vault is for).
    let body: String = (0..200)
        .map(|i| {
            let sentences: Vec<String> = (0..12)
                .map(|j| {
                    format!(
                        "Raft elects leader {i} in term {j} and the leader replicates log \
                         entry {} to every follower.",
                        i * 12 + j
                    )
                })
                .collect();
            format!("## Part {i}\n\n{}\n\n", sentences.join(" "))
        })
        .collect();
    world.vault(
        "vault",
        &[
            ("long.md", &format!("# Long\n\n{body}")),
            ("short.md", "# Short\n\nalpha\n"),
        ],
    )
}

#[test]
fn a_slow_call_stalls_no_other_and_is_abandoned_at_the_timeout() {
    let world = World::new();
    let vault = long_note_vault(&world);
    // The slow pack takes minutes in a debug build; five seconds leave the
    // quick search room on a machine loaded by the other tests (one second
    // did not, on a slower day, with the abandoned pack still running).
    let mut client = Client::start_with(&world, &vault, &["--call-timeout", "5"]);
    // The index is built first: on a loaded machine a debug build of it
    // can take most of the time the quick search is timed against.
    let (is_error, text) = client.call("search", json!({"query": "alpha"}));
    assert!(!is_error && text.contains("short.md"), "{text}");
    let slow = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
        "name": "context_pack",
        "arguments": {"query": "raft leader log", "budget_tokens": 100000, "tokenizer": "o200k"}
    }});
    client.send(slow);
    client.send(
        json!({"jsonrpc": "2.0", "id": "quick", "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "alpha"}
        }}),
    );
    let wait = std::time::Duration::from_secs(60);
    let first = client.receive(wait).expect("an answer");
    assert_eq!(
        first["id"], "quick",
        "the search waited for the pack: {first}"
    );
    let second = client.receive(wait).expect("an answer");
    assert_eq!(second["id"], "slow");
    assert_eq!(second["result"]["isError"], true, "{second}");
    let text = second["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("took longer than 5 s"), "{text}");
    // The server goes on answering.
    let (is_error, text) = client.call("search", json!({"query": "alpha"}));
    assert!(!is_error && text.contains("short.md"), "{text}");
}

/// A pack over `--max-result-tokens` comes in parts that join to the CLI's
/// pack; each part within the limit and ending at a line end.
#[test]
fn a_large_pack_is_read_back_in_parts() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let expected = common::ok(&world.pack(&vault, &["raft consensus", "--budget", "6000"]));
    let mut client = Client::start_reproducible(&world, &vault, &["--max-result-tokens", "1000"]);
    let arguments = json!({
        "query": "raft consensus",
        "budget_tokens": 6000,
    });
    let response = client.request(
        "tools/call",
        json!({"name": "context_pack", "arguments": arguments}),
    );
    let mut content = response["result"]["content"].as_array().unwrap().clone();
    let mut whole = String::new();
    let mut parts = 0;
    loop {
        let part = content[0]["text"].as_str().unwrap();
        assert!(part.chars().count().div_ceil(4) <= 1000);
        assert!(part.ends_with('\n'));
        whole.push_str(part);
        parts += 1;
        let note: Value = serde_json::from_str(content[1]["text"].as_str().unwrap()).unwrap();
        let Some(offset) = note["next_offset"].as_u64() else {
            break;
        };
        let handle = note["pack_handle"].as_str().unwrap();
        let response = client.request(
            "tools/call",
            json!({"name": "read_pack", "arguments": {"pack_handle": handle, "offset": offset}}),
        );
        content = response["result"]["content"].as_array().unwrap().clone();
    }
    assert!(parts >= 3, "{parts}");
    assert_eq!(whole, expected);
    let (error, message) = client.call(
        "read_pack",
        json!({"pack_handle": "pack-7-0000000000000000", "offset": 0}),
    );
    assert!(error);
    assert!(message.contains("unknown or expired"), "{message}");
}

/// A number or flag an agent quotes is read as what it spells; a value
/// that spells neither is still refused.
#[test]
fn quoted_numbers_and_flags_are_taken() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    let (is_error, quoted) = client.call(
        "context_pack",
        json!({"query": "raft", "budget_tokens": "300", "include_backlinks": "false"}),
    );
    assert!(!is_error, "{quoted}");
    let (_, plain) = client.call(
        "context_pack",
        json!({"query": "raft", "budget_tokens": 300, "include_backlinks": false}),
    );
    let without_date = |text: &str| {
        text.lines()
            .filter(|line| !line.starts_with("# Generated:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_date(&quoted), without_date(&plain));
    let (is_error, refused) = client.call(
        "context_pack",
        json!({"query": "raft", "budget_tokens": "1.5k"}),
    );
    assert!(is_error, "{refused}");
    assert!(refused.contains("expected a whole number"), "{refused}");
    let (is_error, limited) = client.call("search", json!({"query": "raft", "limit": "2"}));
    assert!(!is_error, "{limited}");
}

/// A note over `--max-result-tokens` comes from `get_note` in parts too,
/// which join to the note; a note within it comes whole, in one block.
#[test]
fn a_long_note_is_read_back_in_parts() {
    let world = World::new();
    let paragraph = "Leases bound how long a leader may act without hearing from a quorum. ";
    let long = format!(
        "# Leases\n\n{}\n",
        paragraph.repeat(150).trim_end().replace(". ", ".\n")
    );
    let vault = world.vault(
        "v",
        &[("leases.md", &long), ("short.md", "# Short\n\nA line.\n")],
    );
    let mut client = Client::start_with(&world, &vault, &["--max-result-tokens", "1000"]);
    let response = client.request(
        "tools/call",
        json!({"name": "get_note", "arguments": {"path": "leases.md"}}),
    );
    let content = response["result"]["content"].as_array().unwrap().clone();
    assert_eq!(content.len(), 2, "{response}");
    let first = content[0]["text"].as_str().unwrap();
    assert!(first.chars().count().div_ceil(4) <= 1000);
    let mut whole = first.to_string();
    let mut note: Value = serde_json::from_str(content[1]["text"].as_str().unwrap()).unwrap();
    while let Some(offset) = note["next_offset"].as_u64() {
        let handle = note["pack_handle"].as_str().unwrap().to_string();
        let response = client.request(
            "tools/call",
            json!({"name": "read_pack", "arguments": {"pack_handle": handle, "offset": offset}}),
        );
        let content = response["result"]["content"].as_array().unwrap().clone();
        whole.push_str(content[0]["text"].as_str().unwrap());
        note = serde_json::from_str(content[1]["text"].as_str().unwrap()).unwrap();
    }
    assert_eq!(whole, long);
    let (is_error, short) = client.call("get_note", json!({"path": "short.md"}));
    assert!(!is_error);
    assert_eq!(short, "# Short\n\nA line.\n");
}

/// Notes are resources read like `get_note`: nothing hidden, skipped or
/// outside the vault comes back through a resource URI.
#[test]
fn resources_and_the_prompt() {
    let world = World::new();
    let vault = world.example_vault("vault");
    std::fs::write(world.path().join("outside.md"), "SECRET-OUTSIDE").unwrap();
    let mut client = Client::start(&world, &vault);
    let listed = client.request("resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris.len(), 20, "{uris:?}");
    assert!(uris.contains(&"ctxpack://note/concepts/raft.md"));
    assert!(
        !uris
            .iter()
            .any(|u| u.contains("_raw") || u.contains("AGENTS"))
    );
    let read = client.request(
        "resources/read",
        json!({"uri": "ctxpack://note/concepts/raft.md"}),
    );
    let (_, note) = client.call("get_note", json!({"path": "concepts/raft.md"}));
    assert_eq!(
        read["result"]["contents"][0]["text"].as_str(),
        Some(note.as_str())
    );
    for uri in [
        "ctxpack://note/%2E%2E/outside.md",
        "ctxpack://note/../outside.md",
        "ctxpack://note/_raw/raft-paper-notes.md",
        "ctxpack://note/AGENTS.md",
        "ctxpack://note/%2Fetc%2Fpasswd",
        "ctxpack://pack/pack-1-0000000000000000",
        "file:///etc/passwd",
    ] {
        let response = client.request("resources/read", json!({"uri": uri}));
        assert!(response["error"].is_object(), "{uri}: {response}");
        assert!(!response.to_string().contains("SECRET-OUTSIDE"));
    }
    let prompt = client.request(
        "prompts/get",
        json!({"name": "context_pack", "arguments": {"topic": "raft consensus", "budget": "500"}}),
    );
    let message = &prompt["result"]["messages"][0];
    assert_eq!(message["role"], "user");
    let text = message["content"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("# Context Pack: raft consensus\n"),
        "{text}"
    );
    assert!(text.chars().count().div_ceil(4) <= 500);
    let refused = client.request(
        "prompts/get",
        json!({"name": "context_pack", "arguments": {}}),
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs a topic")
    );
}

/// Starts `ctxpack serve` over `vault` with raw pipes (no reader thread:
/// the test decides when stdout is read) and completes the handshake.
fn serve_piped(
    world: &World,
    vault: &std::path::Path,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let mut child = world
        .cmd()
        .args(["serve", "--vault"])
        .arg(vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}});
    writeln!(stdin, "{initialize}").unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 0, "{answer}");
    (child, stdin, stdout)
}

#[test]
fn notifications_and_stray_responses_are_never_answered_nor_fatal() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}});
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "alpha"}}});
    let messages = [
        // Before `initialize`: a notification, and a response nobody asked for.
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 99, "result": {}}),
        initialize,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        // After it: the same, an unknown notification and one that does not decode.
        json!({"jsonrpc": "2.0", "id": 98, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 97, "error": {"code": 1, "message": "x"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/made_up"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"}),
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": "x"}}),
        search,
    ];
    let (printed, code, stderr) = serve_raw(&world, &vault, &messages, &[1, 2]);
    assert_eq!(code, None, "the server must keep serving: {stderr}");
    let ids: Vec<Value> = printed
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(2)], "{printed:?}");
    let answer: Value = serde_json::from_str(&printed[1]).unwrap();
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("a.md"), "{text}");
}

#[test]
fn undecodable_requests_are_answered_under_their_ids() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "# A\n\nalpha\n")]);
    let mut client = Client::start(&world, &vault);
    let wait = std::time::Duration::from_secs(60);
    for (line, code) in [
        // Valid JSON the protocol layer cannot decode (a lone surrogate).
        (
            r#"{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":"search","arguments":{"query":"\ud800"}}}"#,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"u2","method":"tools/call","params":"x"}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"u3","method":"resources/read","params":{"url":"x"}}"#,
            -32602,
        ),
        (r#"{"jsonrpc":"2.0","id":"u4"}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":"u5","method":"no/such"}"#, -32601),
        (r#"{"jsonrpc":"2.0","id":"u6","method":7}"#, -32600),
        (r#"{"jsonrpc":"2.0","id":4.5,"method":"ping"}"#, -32600),
    ] {
        client.send_raw(format!("{line}\n").as_bytes());
        let answer = client.receive(wait).expect("an answer");
        let sent: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let id = match sent["id"].clone() {
            Value::Null => json!("u1"),
            id => id,
        };
        assert_eq!(answer["id"], id, "{line}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{line}: {answer}");
    }
    // The server goes on.
    let (is_error, text) = client.call("search", json!({"query": "alpha"}));
    assert!(!is_error && text.contains("a.md"), "{text}");
}

#[test]
fn requests_in_flight_sharing_an_id_are_each_answered() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);
    for query in ["paxos", "quorum", "crdt"] {
        client.send(json!({
            "jsonrpc": "2.0", "id": 77, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": query, "limit": 1}}
        }));
    }
    let mut tops = Vec::new();
    for _ in 0..3 {
        let answer = client
            .receive(std::time::Duration::from_secs(60))
            .expect("an answer to each request");
        assert_eq!(answer["id"], 77, "{answer}");
        let hits: Value =
            serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        tops.push(hits["hits"][0]["path"].as_str().unwrap().to_string());
    }
    tops.sort();
    assert_eq!(
        tops,
        [
            "concepts/crdt.md",
            "concepts/paxos.md",
            "concepts/quorum.md"
        ]
    );
}

/// The resident memory of process `pid`, in bytes.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A client that writes many requests and reads no answer: the server
/// stops reading (its memory stays bounded) and, once the client reads,
/// every answer arrives.
#[test]
fn a_client_that_stops_reading_costs_bounded_memory() {
    const REQUESTS: u64 = 1_500;
    let world = World::new();
    // Each answer is a 100 KB note: unread answers kept in memory would
    // cost 150 MB and more.
    let line = "Raft elects a leader and the leader replicates the log.\n";
    let body = line.repeat(100_000 / line.len());
    let vault = world.vault("vault", &[("big.md", &format!("# Big\n\n{body}"))]);
    let (mut child, mut stdin, mut stdout) = serve_piped(&world, &vault);
    let pid = child.id();
    let read_note = |id: u64| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "get_note", "arguments": {"path": "big.md"}}
        })
    };
    // Warm: the index is open and a few answers went out.
    for id in 0..4 {
        writeln!(stdin, "{}", read_note(1_000_000 + id)).unwrap();
    }
    stdin.flush().unwrap();
    let mut line = String::new();
    for _ in 0..4 {
        line.clear();
        stdout.read_line(&mut line).unwrap();
    }
    let before = resident_bytes(pid);

    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = std::sync::Arc::clone(&written);
    let writer = std::thread::spawn(move || {
        for id in 0..REQUESTS {
            if writeln!(stdin, "{}", read_note(id)).is_err() {
                break;
            }
            count.store(id + 1, std::sync::atomic::Ordering::SeqCst);
        }
        let _ = stdin.flush();
        stdin
    });
    // Until the writer is stuck (the server stopped reading) or done, and
    // a while after, the server's memory is sampled.
    let mut peak = before;
    let mut last = (0, std::time::Instant::now());
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        peak = peak.max(resident_bytes(pid));
        let now = written.load(std::sync::atomic::Ordering::SeqCst);
        if now != last.0 {
            last = (now, std::time::Instant::now());
        } else if last.1.elapsed() > std::time::Duration::from_secs(3) {
            break;
        }
    }
    // Its pipe full, the writer waits: the server stopped reading.
    assert!(
        written.load(std::sync::atomic::Ordering::SeqCst) < REQUESTS,
        "the server read every request while none was answered"
    );
    let growth = peak.saturating_sub(before);
    assert!(
        growth < 200 << 20,
        "{} MB more with {} requests unread",
        growth >> 20,
        written.load(std::sync::atomic::Ordering::SeqCst)
    );

    // Reading again: every answer arrives, each under its id.
    let mut answered = std::collections::BTreeSet::new();
    while (answered.len() as u64) < REQUESTS {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the server stopped"
        );
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(
            answer["result"]["content"][0]["text"].is_string(),
            "{answer}"
        );
        answered.insert(answer["id"].as_u64().unwrap());
    }
    assert_eq!(answered, (0..REQUESTS).collect());
    drop(writer.join().unwrap());
    let _ = child.kill();
    let _ = child.wait();
}

/// Every path that is not a readable listed note gets one answer, the same
/// but for the path the caller sent: it tells neither where the vault is,
/// nor whether a hidden file exists, nor where a symlink points.
#[test]
fn a_note_that_cannot_be_read_gets_one_answer_whatever_the_reason() {
    let world = World::new();
    let outside = world.vault("outside", &[("secret.md", "# Secret\n\nTOP SECRET\n")]);
    let vault = world.vault(
        "vault",
        &[
            ("a.md", "# A\n\nalpha\n"),
            (".hidden/notes.md", "# Hidden\n\nHIDDEN-TEXT\n"),
            ("_raw/dump.md", "# Dump\n\nRAW-TEXT\n"),
            (
                "private.md",
                "---\nprivate: true\n---\n# Private\n\nPRIVATE-TEXT\n",
            ),
        ],
    );
    std::os::unix::fs::symlink(outside.join("secret.md"), vault.join("leak.md")).unwrap();
    let vault = vault.canonicalize().unwrap();
    let mut client = Client::start(&world, &vault);
    let root = vault.display().to_string();
    let outside_root = outside.canonicalize().unwrap().display().to_string();
    let mut answers = Vec::new();
    for path in [
        format!("{root}/missing.md"),
        format!("{root}/.hidden/notes.md"),
        format!("{root}/_raw/dump.md"),
        format!("{root}/private.md"),
        format!("{root}/leak.md"),
        format!("{outside_root}/secret.md"),
        "/etc/passwd".to_string(),
        "missing.md".to_string(),
        ".hidden/notes.md".to_string(),
        "private.md".to_string(),
        "leak.md".to_string(),
        "../outside/secret.md".to_string(),
    ] {
        for (tool, arguments) in [
            ("context_pack", json!({"note": path})),
            ("get_note", json!({"path": path})),
        ] {
            let (is_error, text) = client.call(tool, arguments);
            assert!(is_error, "{tool} {path}: {text}");
            let general = text.replace(&format!("'{path}'"), "'P'");
            assert!(
                !general.contains(&root) && !general.contains(&outside_root),
                "{tool} {path}: {text}"
            );
            for marker in ["TOP SECRET", "HIDDEN-TEXT", "RAW-TEXT", "PRIVATE-TEXT"] {
                assert!(!text.contains(marker), "{tool} {path}: {text}");
            }
            answers.push(general);
        }
        let (is_error, text) = client.call("mark_useful", json!({"path": path, "useful": true}));
        assert!(is_error, "mark_useful {path}: {text}");
        answers.push(text.replace(&format!("'{path}'"), "'P'"));
        // A note resource names the path the same way.
        let encoded: String = path
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect();
        let read = client.request(
            "resources/read",
            json!({"uri": format!("ctxpack://note/{encoded}")}),
        );
        let message = read["error"]["message"].as_str().unwrap_or_default();
        answers.push(message.replace(&format!("'{path}'"), "'P'"));
    }
    answers.dedup();
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert!(
        answers[0].starts_with("no note 'P' in the vault"),
        "{}",
        answers[0]
    );
    // A listed note is read by its path inside the vault, or its absolute one.
    let (is_error, text) = client.call("context_pack", json!({"note": format!("{root}/a.md")}));
    assert!(!is_error && text.contains("alpha"), "{text}");
    let (is_error, text) = client.call("get_note", json!({"path": "a.md"}));
    assert!(!is_error && text.contains("alpha"), "{text}");
}

/// `index.md` and `hot.md`, read as notes or resources, drop the lines
/// that link to a note the vault does not list (private, skipped, missing).
#[test]
fn role_files_never_name_notes_a_client_cannot_read() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("raft.md", "# Raft\n\nconsensus\n"),
            ("merger.md", "---\nprivate: true\n---\n# Merger\n\nsecret\n"),
            ("_raw/leak.md", "# Leak\n\nraw\n"),
            (
                "index.md",
                "# Index\n\n- [[raft]] the replicated log\n- [[merger]] ACME-MERGER-2027 talks\n\
                 - [Dump](_raw/leak.md) RAW-DUMP notes\nAll notes of the team.\n",
            ),
            ("hot.md", "# Hot\n\n- [[raft]]\n- [[merger]] HOT-MERGER\n"),
        ],
    );
    let mut client = Client::start(&world, &vault);
    let (is_error, index) = client.call("get_note", json!({"path": "index.md"}));
    assert!(!is_error, "{index}");
    assert_eq!(
        index,
        "# Index\n\n- [[raft]] the replicated log\nAll notes of the team.\n"
    );
    let read = client.request("resources/read", json!({"uri": "ctxpack://note/hot.md"}));
    assert_eq!(
        read["result"]["contents"][0]["text"], "# Hot\n\n- [[raft]]\n",
        "{read}"
    );
    let (is_error, lines) = client.call("get_note", json!({"path": "index.md", "lines": "3-4"}));
    assert!(!is_error, "{lines}");
    assert_eq!(
        lines,
        "- [[raft]] the replicated log\nAll notes of the team."
    );
}

/// The server answers `initialize` without waiting for its vault and model
/// to open (calls wait for them); a vault it then cannot open ends it as
/// the command line would: the reason on stderr, the usage exit code, and
/// no call answered.
#[test]
fn a_vault_the_server_cannot_open_ends_it_with_the_reason() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("a.md", "raft\n"),
            (".ctxpack.yaml", "private:\n  tagz: [private]\n"),
        ],
    );
    let messages = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "raft"}}}),
    ];
    let (printed, code, stderr) = serve_raw(&world, &vault, &messages, &[0, 1]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(".ctxpack.yaml") && stderr.contains("tagz"),
        "{stderr}"
    );
    // At most the greeting (the opening may fail before it is read).
    assert!(printed.len() <= 1, "{printed:?}");
    for line in &printed {
        let answer: Value = serde_json::from_str(line).unwrap();
        assert_eq!(answer["id"], 0, "{answer}");
        assert_eq!(
            answer["result"]["serverInfo"]["name"], "ctxpack",
            "{answer}"
        );
    }
}

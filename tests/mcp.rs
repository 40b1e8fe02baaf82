//! The MCP server over stdio, driven by a minimal JSON-RPC client.

mod common;

use common::World;
use common::mcp_client::Client;
use serde_json::json;

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
            "assemble",
            "context_pack",
            "get_note",
            "mark_useful",
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
}

#[test]
fn tools_answer_like_the_command_line() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let mut client = Client::start(&world, &vault);

    let (error, text) = client.call("search", json!({"query": "paxos", "limit": 3}));
    assert!(!error, "{text}");
    let hits: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(hits["hits"][0]["path"], "concepts/paxos.md");
    assert!(hits["hits"][0].get("explanation").is_none());

    // The same bundle as `ctxpack pack` with the same inputs.
    let (error, bundle) = client.call(
        "context_pack",
        json!({"query": "raft consensus", "budget_tokens": 1500, "format": "json", "generated_at": "2026-06-01T00:00:00Z"}),
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

    for (arguments, message) in [
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
    let (error, text) = client.call("search", json!({"query": "zebrafinch", "format": "json"}));
    assert!(!error, "{text}");
    assert!(text.contains("knowledge/打斗范式/open-card.md"), "{text}");
    assert!(!text.contains("言情范式"), "{text}");
    let (error, text) = client.call(
        "context_pack",
        json!({"query": "zebrafinch cipher", "budget": 4000}),
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
        ctxpack::assemble::unbound_libraries(&project),
        ["knowledge/言情范式"]
    );
    common::write(
        &project.join("works/青灯录/装配.yaml"),
        "libraries: [打斗范式\n".as_bytes(),
    );
    assert_eq!(
        ctxpack::assemble::unbound_libraries(&project),
        ["knowledge/打斗范式", "knowledge/言情范式"]
    );
    // A folder that is not a writing project hides nothing.
    assert!(ctxpack::assemble::unbound_libraries(&world.example_vault("vault")).is_empty());
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
            "leads outside the vault",
        ),
        ("get_note", json!({"path": "/etc/passwd"}), "is absolute"),
        (
            "get_note",
            json!({"path": "leak.md"}),
            "leads outside the vault",
        ),
        (
            "get_note",
            json!({"path": "missing.md"}),
            "no readable note",
        ),
        (
            "mark_useful",
            json!({"path": "../x.md", "useful": true}),
            "leads outside the vault",
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
        let line = client
            .lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("all answers");
        let message: Value = serde_json::from_str(&line).unwrap();
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

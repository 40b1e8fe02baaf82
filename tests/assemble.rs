//! `ctxpack assemble`: the layered per-agent context of seed 003, run on
//! copies of the example projects shipped in `examples/`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::{World, ok, stderr, stdout};
use ctxpack::Style;
use ctxpack::Tokenizer;
use ctxpack::{AssembleError, AssembleRequest, assemble};
use proptest::prelude::*;
use serde_json::Value;

const WORK: &str = "青灯录";

fn run(world: &World, root: &Path, args: &[&str]) -> Output {
    world
        .cmd()
        .current_dir(root)
        .arg("assemble")
        .args(args)
        .output()
        .expect("run ctxpack")
}

fn novel_args<'a>(scenario: &'a str, chapter: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--work",
        WORK,
        "--scenario",
        scenario,
        "--chapter",
        chapter,
        "--intent",
        "写这一章，节奏紧一些",
    ];
    args.extend_from_slice(extra);
    args
}

fn json(output: &Output) -> Value {
    serde_json::from_str(&ok(output)).expect("JSON output")
}

/// The five agents of the seed's pipeline and a scenario each serves.
const PIPELINE: [(&str, &str); 5] = [
    ("writer", "continuation"),
    ("planner", "planning"),
    ("extractor", "extraction"),
    ("detector", "validation"),
    ("judge", "quality_gate"),
];

fn request(
    agent: &str,
    scenario: &str,
    unit: i64,
    budget: usize,
    tokenizer: Tokenizer,
    index_dir: &Path,
) -> AssembleRequest {
    AssembleRequest {
        work: WORK.into(),
        scenario: scenario.into(),
        unit,
        intent: "写这一章，节奏紧一些".into(),
        agent: Some(agent.into()),
        budget,
        tokenizer,
        index_dir: Some(index_dir.to_path_buf()),
        ..AssembleRequest::default()
    }
}

#[test]
fn writer_pack_for_the_next_chapter() {
    let world = World::new();
    let root = world.example("novel");
    let pack = ok(&run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--no-write"]),
    ));
    insta::assert_snapshot!("novel_writer_chapter_9", pack);
    let again = ok(&run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--no-write"]),
    ));
    assert_eq!(pack, again, "the same inputs give the same bytes");
}

#[test]
fn every_agent_of_a_chapter_shares_a_byte_identical_baseline() {
    let world = World::new();
    let root = world.example("novel");
    let mut prefixes = BTreeSet::new();
    let mut hashes = BTreeSet::new();
    for (agent, scenario) in PIPELINE {
        let report = json(&run(
            &world,
            &root,
            &novel_args(
                scenario,
                "8",
                &["--agent", agent, "--format", "json", "--no-write"],
            ),
        ));
        assert_eq!(report["agent"], agent);
        assert_eq!(report["baseline"]["shared"], true, "{agent}");
        let text = report["text"].as_str().unwrap();
        let prefix_len = report["shared_prefix_bytes"].as_u64().unwrap() as usize;
        assert!(prefix_len < text.len());
        prefixes.insert(text.as_bytes()[..prefix_len].to_vec());
        hashes.insert(report["baseline"]["blake3"].as_str().unwrap().to_string());
        // The intent is the last thing before the report.
        let (body, _report) = text
            .rsplit_once("\n---\n\n# 裁剪回显")
            .expect("report at the end");
        assert!(
            body.ends_with("## 用户意图\n\n写这一章，节奏紧一些\n"),
            "{agent}"
        );
    }
    assert_eq!(prefixes.len(), 1, "one shared prefix for all five agents");
    assert_eq!(hashes.len(), 1);
}

/// The sections of a pack printed in `style`, as (name, text) pairs, read
/// back with a real parser; markdown is one section.
fn sections(style: Style, text: &str) -> Vec<(String, String)> {
    match style {
        Style::Xml => {
            let document = roxmltree::Document::parse(text).expect("the XML parses");
            let root = document.root_element();
            assert_eq!(root.tag_name().name(), "context");
            root.children()
                .filter(|n| n.is_element())
                .map(|n| {
                    assert!(n.has_tag_name("section"));
                    let text = n.text().unwrap_or_default();
                    let body = text.strip_prefix('\n').and_then(|t| t.strip_suffix('\n'));
                    (
                        n.attribute("name").unwrap().to_string(),
                        body.expect("a section's text sits on lines of its own")
                            .to_string(),
                    )
                })
                .collect()
        }
        Style::Json => {
            let value: Value = serde_json::from_str(text).expect("the JSON parses");
            value["sections"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap().to_string(),
                        s["text"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        }
        _ => vec![("markdown".into(), text.to_string())],
    }
}

#[test]
fn every_style_keeps_the_budget_the_content_and_the_shared_prefix() {
    // The chapter is Chinese, counted a token a character: at 7,000
    // tokens every agent's never-cut parts fit beside the shared baseline
    // (at 6,000 the extractor's do not, and its baseline is cut), and the
    // budget still leaves parts out, so the report's omissions are tested.
    const BUDGET: &str = "7000";
    let world = World::new();
    let root = world.example("novel");
    let markdown: BTreeMap<&str, String> = PIPELINE
        .iter()
        .map(|(agent, scenario)| {
            let args = novel_args(
                scenario,
                "8",
                &["--agent", agent, "--budget", BUDGET, "--no-write"],
            );
            (*agent, ok(&run(&world, &root, &args)))
        })
        .collect();
    for style in [Style::Xml, Style::Json] {
        let mut prefixes = BTreeSet::new();
        for (agent, scenario) in PIPELINE {
            let args = novel_args(
                scenario,
                "8",
                &[
                    "--agent",
                    agent,
                    "--budget",
                    BUDGET,
                    "--style",
                    style.name(),
                    "--format",
                    "json",
                    "--no-write",
                ],
            );
            let report = json(&run(&world, &root, &args));
            let text = report["text"].as_str().unwrap();
            let tokens = Tokenizer::Chars4.count(text);
            assert!(tokens <= 7000, "{style:?} {agent}: {tokens}");
            assert_eq!(report["tokens"], tokens);
            let prefix_len = report["shared_prefix_bytes"].as_u64().unwrap() as usize;
            assert_eq!(report["baseline"]["shared"], true, "{agent}");
            prefixes.insert(text.as_bytes()[..prefix_len].to_vec());
            let printed = sections(style, text);
            let names: Vec<&str> = printed.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names[..2], ["system", "baseline"], "{style:?} {agent}");
            assert_eq!(names[names.len() - 2..], ["volatile", "report"]);
            // Counted honestly, the Chinese pack stays within 10% of its
            // budget in o200k tokens too.
            assert!(
                Tokenizer::O200k.count(text) <= 7700,
                "{style:?} {agent}: {} o200k tokens",
                Tokenizer::O200k.count(text)
            );
            // Each section holds, unescaped, text the markdown pack prints:
            // whole where the budget left the same parts out; else line by
            // line, since a style's markup takes its share of the budget and
            // its pack may summarise or leave out parts the markdown pack
            // kept (the report's lines counting them differ then too).
            for (name, body) in &printed {
                assert!(!body.is_empty(), "{style:?} {agent} {name}");
                if markdown[agent].contains(body.as_str()) {
                    continue;
                }
                assert!(
                    name == "increment" || name == "report",
                    "{style:?} {agent} {name}"
                );
                for line in body.lines() {
                    assert!(
                        line.starts_with("- token_budget · ") || markdown[agent].contains(line),
                        "{style:?} {agent} {name}: {line}"
                    );
                }
            }
            assert!(printed.iter().any(
                |(n, t)| n == "volatile" && t.ends_with("## 用户意图\n\n写这一章，节奏紧一些")
            ));
            let again = json(&run(&world, &root, &args));
            assert_eq!(
                again["text"], report["text"],
                "the same inputs give the same bytes"
            );
        }
        assert_eq!(
            prefixes.len(),
            1,
            "{style:?}: one shared prefix for all five agents"
        );
    }
    let plain = run(
        &world,
        &root,
        &novel_args("continuation", "8", &["--style", "plain", "--no-write"]),
    );
    assert_eq!(plain.status.code(), Some(2));
    assert!(stderr(&plain).contains("--style plain does not fit assemble"));
}

/// Unique strings planted in every field some purpose may not see.
const HIDDEN_FIELDS: [(&str, &[&str]); 7] = [
    ("创作备忘", &[]),
    ("成长弧线", &["planning", "detection"]),
    ("演变历程", &["detection", "extraction"]),
    ("谜底与真相", &["planning", "detection"]),
    ("结局方向", &["planning", "detection"]),
    ("弃案记录", &["planning"]),
    ("未来卷粗纲", &["planning"]),
];

fn marker(field: &str, n: usize) -> String {
    format!("MARK{n:03}·{field}")
}

/// Plants a marker at the start of every section named like a hidden field
/// (and in the future volume of the outline); returns field → markers.
fn plant_markers(root: &Path) -> BTreeMap<String, Vec<String>> {
    let mut planted: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut n = 0;
    let mut files = Vec::new();
    collect_md(&root.join("works"), &mut files);
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let mut out = String::new();
        for line in text.split_inclusive('\n') {
            out.push_str(line);
            let heading = line.trim_end();
            let field = if heading.starts_with("## ") && heading.ends_with("（粗纲）") {
                Some("未来卷粗纲")
            } else {
                HIDDEN_FIELDS
                    .iter()
                    .map(|(f, _)| *f)
                    .find(|f| heading == format!("## {f}"))
            };
            if let Some(field) = field {
                n += 1;
                let mark = marker(field, n);
                out.push_str(&format!("{mark}。\n"));
                planted.entry(field.to_string()).or_default().push(mark);
            }
        }
        fs::write(&file, out).unwrap();
    }
    planted
}

fn collect_md(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_md(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn visibility(agent: &str) -> &'static str {
    match agent {
        "writer" | "judge" => "generation",
        "planner" => "planning",
        "extractor" => "extraction",
        _ => "detection",
    }
}

#[test]
fn nothing_hidden_for_a_purpose_reaches_its_pack() {
    let world = World::new();
    let root = world.example("novel");
    let planted = plant_markers(&root);
    assert_eq!(
        planted.len(),
        HIDDEN_FIELDS.len(),
        "every hidden field was planted: {planted:?}"
    );
    let mut seen: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for budget in ["1500", "4000", "16000", "60000"] {
        for (agent, scenario) in PIPELINE {
            let output = run(
                &world,
                &root,
                &novel_args(
                    scenario,
                    "8",
                    &["--agent", agent, "--budget", budget, "--no-write"],
                ),
            );
            if output.status.code() == Some(2) {
                assert!(stderr(&output).contains("never cut"), "{}", stderr(&output));
                continue;
            }
            let pack = ok(&output);
            for (field, allowed) in HIDDEN_FIELDS {
                for mark in &planted[field] {
                    if pack.contains(mark.as_str()) {
                        assert!(
                            allowed.contains(&visibility(agent)),
                            "{agent} ({}) sees {field}: {mark}",
                            visibility(agent)
                        );
                        seen.entry(agent).or_default().insert(field.to_string());
                    }
                }
            }
        }
    }
    // Not vacuous: the purposes that may see a field do see it.
    let expect = |agent: &str, fields: &[&str]| {
        for field in fields {
            assert!(
                seen.get(agent).is_some_and(|s| s.contains(*field)),
                "{agent} should see {field}: {seen:?}"
            );
        }
    };
    expect(
        "planner",
        &[
            "谜底与真相",
            "结局方向",
            "弃案记录",
            "未来卷粗纲",
            "成长弧线",
        ],
    );
    expect(
        "detector",
        &["谜底与真相", "结局方向", "成长弧线", "演变历程"],
    );
    expect("extractor", &["演变历程"]);
    assert!(
        !seen.contains_key("writer") && !seen.contains_key("judge"),
        "{seen:?}"
    );
}

#[test]
fn increments_only_add_and_the_judge_sees_exactly_the_writer_baseline() {
    let world = World::new();
    let root = world.example("novel");
    let mut baseline_keys: Option<BTreeSet<String>> = None;
    for (agent, scenario) in PIPELINE {
        let report = json(&run(
            &world,
            &root,
            &novel_args(
                scenario,
                "8",
                &[
                    "--agent",
                    agent,
                    "--format",
                    "json",
                    "--no-write",
                    "--budget",
                    "60000",
                ],
            ),
        ));
        let items = report["items"].as_array().unwrap();
        let keys_of = |segment: &str| -> BTreeSet<String> {
            items
                .iter()
                .filter(|i| i["segment"] == segment)
                .map(|i| i["key"].as_str().unwrap().to_string())
                .collect()
        };
        let baseline = keys_of("baseline");
        let increment = keys_of("increment");
        assert!(
            baseline.is_disjoint(&increment),
            "{agent}: the increment repeats the baseline"
        );
        match &baseline_keys {
            None => baseline_keys = Some(baseline.clone()),
            Some(writer) => assert_eq!(
                writer, &baseline,
                "{agent}: the writer's visible set is in every pack"
            ),
        }
        if agent == "judge" {
            assert_eq!(
                increment,
                BTreeSet::from([
                    "meta/rubrics/judge.md".to_string(),
                    format!("candidate:works/{WORK}/正文/第008章.md")
                ]),
                "the judge gets the rubric and the candidate, nothing else"
            );
        }
        if agent == "extractor" {
            assert!(
                !increment.iter().any(|k| k.starts_with("knowledge/")),
                "L3 is closed for the extractor"
            );
        }
    }
}

/// Runs `command` to its end, failing with `hung` if it takes over a
/// minute (a read of a FIFO would block it for ever).
fn within_a_minute(command: &mut std::process::Command, hung: impl Fn() -> String) -> Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            panic!("{}", hung());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn unbound_library_is_never_opened() {
    let world = World::new();
    let root = world.example("novel");
    let unbound = root.join("knowledge/言情范式");
    // A FIFO blocks whoever opens it for reading: a read would hang the run.
    for entry in fs::read_dir(&unbound).unwrap() {
        let path = entry.unwrap().path();
        fs::remove_file(&path).unwrap();
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    }
    fs::write(unbound.join("sub.txt"), "x").ok();
    for (agent, scenario) in PIPELINE {
        let mut command = world.cmd();
        command.current_dir(&root).arg("assemble").args(novel_args(
            scenario,
            "8",
            &["--agent", agent, "--format", "json", "--no-write"],
        ));
        let output = within_a_minute(&mut command, || {
            format!("{agent}: assemble hung: it opened the unbound library")
        });
        let report = json(&output);
        let read: Vec<&str> = report["read"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(
            read.iter().all(|p| !p.starts_with("knowledge/言情范式")),
            "{agent} read {read:?}"
        );
        let omitted = report["omittedSources"].as_array().unwrap();
        assert!(
            omitted
                .iter()
                .any(|o| o["source"] == "knowledge/言情范式" && o["reason"] == "not_authorized"),
            "{agent}: {omitted:?}"
        );
    }
}

#[test]
fn the_writer_gets_cast_cards_and_scene_type_paradigms_only() {
    let world = World::new();
    let root = world.example("novel");
    let report = json(&run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--format", "json", "--no-write"]),
    ));
    let text = report["text"].as_str().unwrap();
    for cast in [
        "#### 人物 · 林砚",
        "#### 人物 · 沈青",
        "#### 人物 · 厉无咎",
        "#### 关系 · 林砚与沈青",
    ] {
        assert!(text.contains(cast), "{cast}");
    }
    assert!(
        !text.contains("#### 人物 · 周慎之"),
        "not in chapter 9's cast"
    );
    let omitted = report["omittedSources"].as_array().unwrap();
    let cards = omitted
        .iter()
        .find(|o| o["source"] == format!("works/{WORK}/知识"))
        .unwrap();
    assert!(
        cards["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == "人物 · 周慎之")
    );
    assert_eq!(cards["reason"], "not_relevant");
    // Paradigm cards: at most the recipe's limit, all of this chapter's scene types.
    let l3: BTreeSet<&str> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["layer"] == "L3")
        .map(|i| i["key"].as_str().unwrap().split('#').next().unwrap())
        .collect();
    assert!(!l3.is_empty() && l3.len() <= 3, "{l3:?}");
    for card in &l3 {
        let text = fs::read_to_string(root.join(card)).unwrap();
        assert!(
            ["悬疑", "对峙", "追逐"].iter().any(|t| text.contains(t)),
            "{card}"
        );
    }
    // The previous chapter's last scenes verbatim, the one before as its summary.
    let chapter8 = fs::read_to_string(root.join(format!("works/{WORK}/正文/第008章.md"))).unwrap();
    let last_scene = chapter8.rsplit("\n## ").next().unwrap();
    let last_body = last_scene.split_once('\n').unwrap().1.trim();
    assert!(
        text.contains(last_body),
        "the previous chapter's last scene, verbatim"
    );
    assert!(text.contains("### 前章摘要\n\n#### 第7章\n\n- 一句话概要："));
}

#[test]
fn review_copy_is_the_only_write() {
    let world = World::new();
    let root = world.example("novel");
    let before = snapshot(&root);
    let output = run(&world, &root, &novel_args("continuation", "9", &[]));
    let pack = ok(&output);
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
    let after = snapshot(&root);
    let review = format!("works/{WORK}/评审/上下文-第009章-generation.md");
    let added: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    assert_eq!(added, [&review]);
    assert!(
        before
            .iter()
            .all(|(path, hash)| after.get(path) == Some(hash)),
        "nothing else changed"
    );
    assert_eq!(fs::read_to_string(root.join(&review)).unwrap(), pack);

    // Without the work's .gitignore, the run warns that the copy is not ignored.
    fs::remove_file(root.join(format!("works/{WORK}/.gitignore"))).unwrap();
    let output = run(&world, &root, &novel_args("continuation", "9", &[]));
    assert!(stderr(&ok_status(&output)).contains("not excluded by a .gitignore"));
}

fn ok_status(output: &Output) -> Output {
    assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    output.clone()
}

fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    files
}

#[test]
fn bad_requests_exit_2_with_a_message() {
    let world = World::new();
    let root = world.example("novel");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            novel_args("dreaming", "9", &[]),
            "unknown scenario 'dreaming'",
        ),
        (
            novel_args("continuation", "9", &["--agent", "ghost"]),
            "unknown agent 'ghost'",
        ),
        (
            novel_args("continuation", "9", &["--agent", "judge"]),
            "does not serve scenario",
        ),
        (novel_args("rewrite", "8", &[]), "requires --selection"),
        (
            novel_args("rewrite", "8", &["--selection", "第一段"]),
            "requires --expected-revision",
        ),
        (
            novel_args(
                "rewrite",
                "8",
                &["--selection", "第一段", "--expected-revision", "99"],
            ),
            "not the expected 99",
        ),
        (
            novel_args("continuation", "42", &[]),
            "no entry for unit 42",
        ),
        (novel_args("validation", "9", &[]), "pass --candidate"),
        (
            novel_args("validation", "9", &["--candidate", "../../etc/passwd"]),
            "leaves the project root",
        ),
        (
            novel_args("continuation", "9", &["--budget", "100"]),
            "never cut",
        ),
        (
            novel_args("continuation", "9", &["--budget", "0"]),
            "budget must be between",
        ),
        (
            vec![
                "--work",
                "无此书",
                "--scenario",
                "continuation",
                "--chapter",
                "1",
                "--intent",
                "x",
            ],
            "does not exist",
        ),
        (
            vec![
                "--work",
                WORK,
                "--scenario",
                "continuation",
                "--chapter",
                "9",
                "--intent",
                "  ",
            ],
            "intent is empty",
        ),
    ];
    for (args, message) in cases {
        let output = run(&world, &root, &args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty());
    }
    let output = run(
        &world,
        world.work().as_path(),
        &novel_args("continuation", "9", &[]),
    );
    common::fails(&output, 2, "meta/recipe.yaml");
}

#[test]
fn a_rewrite_with_the_current_revision_carries_selection_and_comments_last() {
    let world = World::new();
    let root = world.example("novel");
    let chapter = fs::read_to_string(root.join(format!("works/{WORK}/正文/第008章.md"))).unwrap();
    let revision = chapter
        .lines()
        .find_map(|l| l.strip_prefix("修订: "))
        .unwrap()
        .trim()
        .to_string();
    let pack = ok(&run(
        &world,
        &root,
        &novel_args(
            "rewrite",
            "8",
            &[
                "--selection",
                "第二场开头",
                "--expected-revision",
                &revision,
                "--comment",
                "对白再短一些",
                "--no-write",
            ],
        ),
    ));
    let tail = pack
        .split("\n# 本回合\n")
        .nth(1)
        .expect("the volatile part");
    assert!(
        tail.contains("- 选区：第二场开头") && tail.contains(&format!("- 期望修订：{revision}"))
    );
    let comments = tail.find("## 修改意见\n\n- 对白再短一些").unwrap();
    let intent = tail.find("## 用户意图").unwrap();
    assert!(
        comments < intent,
        "revision comments, then the intent, last"
    );
}

#[test]
fn a_schema_that_would_leak_through_the_baseline_is_refused() {
    let world = World::new();
    let root = world.example("novel");
    let schema = root.join("meta/schemas/人物.yaml");
    let text = fs::read_to_string(&schema).unwrap().replace(
        "身份:     {aiContext: true",
        "身份:     {aiContext: [generation]",
    );
    fs::write(&schema, text).unwrap();
    let output = run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--no-write"]),
    );
    common::fails(&output, 1, "the baseline would leak it");
}

#[test]
fn schemas_fail_closed_when_missing_or_misspelt() {
    let world = World::new();
    let root = world.example("novel");
    let writer = novel_args("continuation", "9", &["--no-write"]);
    // A type the recipe reads by name needs its schema.
    let settings = root.join("meta/schemas/设定.yaml");
    let kept = fs::read(&settings).unwrap();
    fs::remove_file(&settings).unwrap();
    let output = run(&world, &root, &writer);
    common::fails(
        &output,
        1,
        "source 'settings' reads type '设定', but no schema in meta/schemas defines it",
    );
    assert!(!stdout(&output).contains("谜底与真相"));
    fs::write(&settings, kept).unwrap();
    // A card of a type no schema defines shows no field, and says so.
    fs::write(
        root.join(format!("works/{WORK}/知识/人物/无名.md")),
        "---\n类型: 无名类\n名称: 无名\n---\n## 身份\n\nUNSCHEMATIZED-7c1\n",
    )
    .unwrap();
    let output = ok_status(&run(
        &world,
        &root,
        &novel_args("extraction", "8", &["--no-write"]),
    ));
    assert!(!stdout(&output).contains("UNSCHEMATIZED-7c1"));
    assert!(
        stderr(&output).contains("no schema in meta/schemas defines type '无名类'")
            || stdout(&output).contains("no schema in meta/schemas defines type '无名类'"),
        "{}",
        stderr(&output)
    );
    // A purpose no agent has is a misspelling, not a rule.
    let person = root.join("meta/schemas/人物.yaml");
    let text = fs::read_to_string(&person).unwrap();
    fs::write(&person, text.replacen("planning", "planing", 1)).unwrap();
    common::fails(
        &run(&world, &root, &writer),
        1,
        "names purpose 'planing', which no agent of the recipe has",
    );
}

#[test]
fn a_candidate_read_field_by_field_is_refused() {
    let world = World::new();
    let root = world.example("novel");
    for candidate in [
        format!("works/{WORK}/设定.md"),
        format!("works/{WORK}/大纲.md"),
        format!("works/{WORK}/知识/人物/林砚.md"),
        format!("./works/{WORK}/知识/人物/林砚.md"),
        "knowledge/打斗范式/对峙蓄势.md".to_string(),
    ] {
        let output = run(
            &world,
            &root,
            &novel_args(
                "quality_gate",
                "9",
                &["--candidate", &candidate, "--no-write"],
            ),
        );
        common::fails(&output, 2, "is read field by field under a schema");
        assert!(stdout(&output).is_empty(), "{candidate}");
    }
}

#[test]
fn a_review_file_replaces_nothing_but_an_earlier_copy() {
    let world = World::new();
    let root = world.example("novel");
    let recipe = root.join("meta/recipe.yaml");
    let original = fs::read_to_string(&recipe).unwrap();
    let line = original
        .lines()
        .find(|l| l.starts_with("review_file:"))
        .unwrap()
        .to_string();
    fs::write(root.join(".ctxpack.yaml"), "").unwrap();
    for (target, why) in [
        (".ctxpack.yaml", "is a hidden file"),
        (".git/hooks/pre-commit", "is a hidden file"),
        ("meta/agents/writer.md", "is the recipe's folder"),
        ("works/{work}/设定.md", "is a sections source"),
        ("works/{work}/正文/第{unit:03}章.md", "is the unit's file"),
        (
            "works/{work}/正文/第008章.md",
            "does not begin as this review copy does",
        ),
        ("notes.txt", "is not a Markdown file"),
    ] {
        fs::write(
            &recipe,
            original.replace(&line, &format!("review_file: \"{target}\"")),
        )
        .unwrap();
        let before = snapshot(&root);
        let output = run(&world, &root, &novel_args("continuation", "9", &[]));
        common::fails(&output, 2, why);
        assert_eq!(snapshot(&root), before, "{target} changed the project");
    }
    // A FIFO where the copy goes is refused, not waited on.
    fs::write(
        &recipe,
        original.replace(&line, "review_file: \"works/{work}/fifo-{unit}.md\""),
    )
    .unwrap();
    let fifo = root.join(format!("works/{WORK}/fifo-9.md"));
    let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let mut command = world.cmd();
    command
        .current_dir(&root)
        .arg("assemble")
        .args(novel_args("continuation", "9", &[]));
    let output = within_a_minute(&mut command, || {
        "assemble waited on a FIFO at the review copy's path".into()
    });
    common::fails(&output, 2, "is a FIFO");
    fs::remove_file(&fifo).unwrap();
    // An earlier copy is replaced.
    fs::write(&recipe, &original).unwrap();
    ok_status(&run(&world, &root, &novel_args("continuation", "9", &[])));
    ok_status(&run(&world, &root, &novel_args("continuation", "9", &[])));
}

#[test]
fn secrets_in_what_the_request_says_are_redacted() {
    let world = World::new();
    let root = world.example("novel");
    let token = "ghp_R8x2kQ9mZ7vL3pN5tW1yB6cD4fG0hJ2sK8aE";
    let intent = format!("写 password=Zq8#Lm2vXk9p {token}");
    let comment = format!("token {token}");
    let output = ok_status(&run(
        &world,
        &root,
        &[
            "--work",
            WORK,
            "--scenario",
            "continuation",
            "--chapter",
            "9",
            "--intent",
            &intent,
            "--comment",
            &comment,
            "--selection",
            token,
            "--no-write",
        ],
    ));
    let out = stdout(&output);
    assert!(
        !out.contains(token) && !out.contains("Zq8#Lm2vXk9p"),
        "{out}"
    );
    assert!(out.contains("[REDACTED:github_token]"), "{out}");
}

#[test]
fn a_second_field_of_the_same_name_is_kept() {
    let world = World::new();
    let root = world.example("novel");
    let settings = root.join(format!("works/{WORK}/设定.md"));
    let mut text = fs::read_to_string(&settings).unwrap();
    text.push_str("\n## 世界与规则\n\nDUP-WORLD-9d2\n");
    fs::write(&settings, text).unwrap();
    let card = root.join(format!("works/{WORK}/知识/人物/沈青.md"));
    let text = fs::read_to_string(&card).unwrap();
    fs::write(
        &card,
        text.replacen("---\n## ", "当前状态: FM-STATE-4b8\n---\n## ", 1),
    )
    .unwrap();
    let output = ok_status(&run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--no-write"]),
    ));
    let out = stdout(&output);
    assert!(
        out.contains("DUP-WORLD-9d2"),
        "the second section was dropped"
    );
    assert!(
        out.contains("FM-STATE-4b8"),
        "the frontmatter field was dropped"
    );
    assert!(
        out.contains("收到巡灯司密令"),
        "the section named like the frontmatter key was dropped"
    );
}

#[test]
fn a_card_that_leads_nowhere_readable_is_reported() {
    let world = World::new();
    let root = world.example("novel");
    let outside = world.path().join("outside.md");
    fs::write(
        &outside,
        "---\n类型: 人物\n名称: 外人\n---\n## 身份\n\nOUTSIDE-5e2\n",
    )
    .unwrap();
    let cards = root.join(format!("works/{WORK}/知识/人物"));
    std::os::unix::fs::symlink(&outside, cards.join("外人.md")).unwrap();
    std::os::unix::fs::symlink(world.path().join("missing.md"), cards.join("断.md")).unwrap();
    let output = ok_status(&run(
        &world,
        &root,
        &novel_args("extraction", "8", &["--no-write"]),
    ));
    let out = stdout(&output);
    assert!(!out.contains("OUTSIDE-5e2"));
    assert!(
        out.contains(&format!(
            "unreadable · works/{WORK}/知识/人物/外人.md: leads outside the project root; not read"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "unreadable · works/{WORK}/知识/人物/断.md: a symlink that leads nowhere; not read"
        )),
        "{out}"
    );
}

#[test]
fn the_vault_tools_over_a_project_show_only_what_every_purpose_may_see() {
    let world = World::new();
    let root = world.example("novel");
    let index = world.path().join("index");
    let vault_cmd = |args: &[&str]| {
        world
            .cmd()
            .args(args)
            .arg("--vault")
            .arg(&root)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap()
    };
    // Fields only some purposes see: 创作备忘 (no purpose), 谜底与真相
    // (not the writer), the outline's future volume.
    for query in ["顾砚", "谜底", "周衍", "青灯照骨"] {
        let output = ok_status(&vault_cmd(&[
            "pack", query, "--no-log", "--budget", "20000",
        ]));
        // The header repeats the topic; the pages below it are checked.
        let pages = stdout(&output)
            .lines()
            .filter(|line| !line.starts_with("# Context Pack:"))
            .collect::<Vec<_>>()
            .join("\n");
        for hidden in ["顾家遗孤顾砚", "周衍", "韩彰", "第三卷"] {
            assert!(!pages.contains(hidden), "pack {query} shows {hidden}");
        }
        let output = ok_status(&vault_cmd(&["search", query, "--format", "json"]));
        assert!(!stdout(&output).contains("顾家遗孤"), "search {query}");
    }
    // The fields every purpose sees stay.
    let output = ok_status(&vault_cmd(&[
        "pack",
        "--note",
        &format!("works/{WORK}/知识/人物/沈青.md"),
        "--no-log",
    ]));
    assert!(stdout(&output).contains("巡灯司"), "{}", stdout(&output));
    let audit = ok_status(&vault_cmd(&["audit"]));
    assert!(stdout(&audit).contains("private section '创作备忘' cut"));
    // The assembler still shows each purpose its own fields.
    let planner = ok_status(&run(
        &world,
        &root,
        &novel_args("planning", "9", &["--no-write"]),
    ));
    assert!(stdout(&planner).contains("谜底与真相"));
}

#[test]
fn the_engine_serves_a_software_project_from_its_own_recipe() {
    let world = World::new();
    let root = world.example("software");
    let args = |scenario: &'static str| -> Vec<&'static str> {
        vec![
            "--work",
            "ledger-api",
            "--scenario",
            scenario,
            "--chapter",
            "7",
            "--intent",
            "Implement T7",
            "--format",
            "json",
            "--no-write",
        ]
    };
    let coder = json(&run(&world, &root, &args("implement")));
    let text = coder["text"].as_str().unwrap();
    assert!(
        text.contains("#### component · jobs")
            && text.contains("#### decision · adr-005-postgres-job-queue")
    );
    assert!(
        !text.contains("#### component · auth"),
        "auth is not in T7's components"
    );
    assert!(!text.contains("**Internal notes**") && !text.contains("**History**"));
    assert!(!text.contains("#### Security findings"));
    let reviewer_output = run(
        &world,
        &root,
        &[
            "--work",
            "ledger-api",
            "--scenario",
            "review",
            "--chapter",
            "6",
            "--intent",
            "Review T6",
            "--format",
            "json",
            "--no-write",
        ],
    );
    let reviewer = json(&reviewer_output);
    let text = reviewer["text"].as_str().unwrap();
    assert!(text.contains("**History**") && text.contains("#### Security findings"));
    assert!(!text.contains("**Internal notes**"));
    assert_eq!(reviewer["visibility"], "review");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Under any budget: never over it, L0 intact, and degradation follows
    /// the budget order (L3 before L2 before L1, L0 never).
    #[test]
    fn budget_order_and_l0_hold_under_any_budget(
        budget in prop_oneof![200usize..2000, 2000usize..12000, 12000usize..40000],
        agent in 0usize..5,
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
        style in prop::sample::select(&[Style::Markdown, Style::Xml, Style::Json][..]),
    ) {
        let root = common::example_dir("novel");
        let index = tempfile::tempdir().unwrap();
        let (agent, scenario) = PIPELINE[agent];
        let request = AssembleRequest { style, ..request(agent, scenario, 8, budget, tokenizer, index.path()) };
        match assemble(&root, &request) {
            Err(AssembleError::Usage(message)) => prop_assert!(message.contains("never cut"), "{}", message),
            Err(other) => prop_assert!(false, "{}", other),
            Ok(pack) => {
                prop_assert!(tokenizer.count(&pack.text) <= budget);
                prop_assert_eq!(pack.tokens, tokenizer.count(&pack.text));
                let content: String = sections(style, &pack.text)
                    .into_iter()
                    .map(|(_, text)| text + "\n")
                    .collect();
                prop_assert!(content.contains("## 用户意图\n\n写这一章，节奏紧一些\n"));
                let outline = fs::read_to_string(root.join(format!("works/{WORK}/大纲.md"))).unwrap();
                let entry = outline.split("### 第8章 ").nth(1).unwrap().split("\n### ").next().unwrap();
                let entry_body = entry.split_once('\n').unwrap().1.trim();
                prop_assert!(content.contains(entry_body), "the outline entry is intact");
                for segment in ["baseline", "increment"] {
                    let forms: Vec<(&str, &str)> = pack.items.iter()
                        .filter(|i| i.segment == segment)
                        .map(|i| (layer_name(i.layer), i.form))
                        .collect();
                    let degraded = |layer: &str| forms.iter().any(|(l, f)| *l == layer && *f != "full");
                    let all_dropped = |layer: &str| forms.iter().all(|(l, f)| *l != layer || *f == "dropped");
                    prop_assert!(!degraded("L0"));
                    if forms.iter().any(|(l, f)| *l == "L2" && *f == "dropped") || degraded("L1") {
                        prop_assert!(all_dropped("L3"), "{:?}", forms);
                    }
                    if degraded("L1") {
                        prop_assert!(all_dropped("L2"), "{:?}", forms);
                    }
                }
            }
        }
    }
}

fn layer_name(layer: ctxpack::Layer) -> &'static str {
    match layer {
        ctxpack::Layer::L0 => "L0",
        ctxpack::Layer::L1 => "L1",
        ctxpack::Layer::L2 => "L2",
        ctxpack::Layer::L3 => "L3",
    }
}

#[test]
fn a_review_folder_leading_outside_the_project_is_refused_before_anything_is_created() {
    let world = World::new();
    let root = world.example("novel");
    let outside = world.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    // The recipe writes its review copies under `reviews/`, a symlink to a
    // folder outside the project.
    let recipe = root.join("meta/recipe.yaml");
    let text = fs::read_to_string(&recipe).unwrap().replace(
        "review_file: \"works/{work}/评审/上下文-第{unit:03}章-{purpose}.md\"",
        "review_file: \"reviews/{work}/第{unit:03}章.md\"",
    );
    fs::write(&recipe, text).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("reviews")).unwrap();
    let output = run(&world, &root, &novel_args("continuation", "9", &[]));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("leads outside the project root"),
        "{}",
        stderr(&output)
    );
    assert!(
        fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing was created outside"
    );
}

/// A string planted only in an unbound library: no route may carry it out.
const SECRET: &str = "SECRET-言情-7f3a";

/// Plants a card in the unbound library 言情范式 that every route would pick
/// (a cast member's name, every scene type), and symlinks into it.
fn plant_secret_library(root: &Path) {
    common::write(
        &root.join("knowledge/言情范式/密卷.md"),
        format!(
            "---\n类型: 人物\n名称: 林砚\n场景类型: [日常, 对峙, 悬疑, 追逐]\n范式类别: trope\n---\n\
             ## 要点\n\n{SECRET} 要点。\n\n## 示例\n\n{SECRET} 示例。\n\n## 失效风险\n\n{SECRET} 风险。\n\n\
             ## 身份\n\n{SECRET} 身份。\n"
        )
        .as_bytes(),
    );
    let card = root.join("knowledge/言情范式/借物传情.md");
    let text = fs::read_to_string(&card).unwrap();
    fs::write(&card, format!("{text}\n## 失效风险\n\n{SECRET} 借物。\n")).unwrap();
    let link = |target: &str, link: &str| {
        std::os::unix::fs::symlink(target, root.join(link)).unwrap();
    };
    link("言情范式", "knowledge/alias");
    link(
        "../../../../knowledge/言情范式/密卷.md",
        &format!("works/{WORK}/知识/人物/内鬼.md"),
    );
    link(
        "../../../knowledge/言情范式",
        &format!("works/{WORK}/知识/借"),
    );
    link(
        "../../knowledge/言情范式/密卷.md",
        &format!("works/{WORK}/草稿.md"),
    );
    link(
        "../../knowledge/言情范式/密卷.md",
        &format!("works/{WORK}/身份.md"),
    );
    let chapter6 = root.join(format!("works/{WORK}/正文/第006章.md"));
    fs::remove_file(&chapter6).unwrap();
    std::os::unix::fs::symlink("../../../knowledge/言情范式/密卷.md", &chapter6).unwrap();
}

#[test]
fn no_route_reaches_an_unbound_library() {
    let world = World::new();
    let root = world.example("novel");
    plant_secret_library(&root);
    let secret_dir = root.join("knowledge/言情范式").canonicalize().unwrap();
    // Bindings: a bound alias of the unbound library, identity slots into it.
    fs::write(
        root.join(format!("works/{WORK}/装配.yaml")),
        format!(
            "libraries: [打斗范式, alias]\nslots:\n  writer: knowledge/言情范式/借物传情.md\n  \
             judge: works/{WORK}/身份.md\n  detector: knowledge/alias/密卷.md\n"
        ),
    )
    .unwrap();
    // The recipe: sources of every path kind pointing into it.
    let recipe = root.join("meta/recipe.yaml");
    let text = fs::read_to_string(&recipe)
        .unwrap()
        .replace(
            "sources: [settings, outline, cast_cards, prev_tail, ledger, prev_summary, paradigms]",
            "sources: [settings, outline, cast_cards, prev_tail, ledger, prev_summary, paradigms, \
             leak_file, leak_sections, leak_cards, leak_index]",
        )
        .replace(
            "sources:\n  settings:",
            "sources:\n  leak_file: {kind: file, layer: L2, title: 泄露文件, path: \"knowledge/言情范式/密卷.md\"}\n  \
             leak_sections: {kind: sections, layer: L2, title: 泄露段落, path: \"knowledge/alias/密卷.md\", schema: 设定}\n  \
             leak_cards: {kind: cards, layer: L2, title: 资料全集, dir: knowledge, scope: all}\n  \
             leak_index: {kind: card_index, layer: L2, title: 资料索引, dir: knowledge/alias, summary_field: 要点}\n  \
             settings:",
        );
    assert!(text.contains("leak_index]") && text.contains("leak_file: {"));
    fs::write(&recipe, text).unwrap();

    // The object under review: refused before anything is read.
    for candidate in [
        "knowledge/言情范式/密卷.md",
        "knowledge/alias/密卷.md",
        "knowledge/言情范式/not-there.md",
        &format!("works/{WORK}/草稿.md"),
    ] {
        let output = run(
            &world,
            &root,
            &novel_args("validation", "8", &["--candidate", candidate]),
        );
        common::fails(&output, 2, "leads into library knowledge/言情范式");
        assert!(!stderr(&output).contains(SECRET), "{candidate}");
    }

    let mut reviews = 0;
    for (agent, scenario) in PIPELINE {
        let output = run(
            &world,
            &root,
            &novel_args(scenario, "8", &["--agent", agent, "--format", "json"]),
        );
        let stdout = ok(&output);
        assert!(
            !stdout.contains(SECRET),
            "{agent}: the secret is in the pack or report"
        );
        assert!(!stderr(&output).contains(SECRET), "{agent}");
        let report: Value = serde_json::from_str(&stdout).unwrap();
        for path in report["read"].as_array().unwrap() {
            let path = path.as_str().unwrap().trim_end_matches('/');
            let real = root.join(path).canonicalize().unwrap();
            assert!(!real.starts_with(&secret_dir), "{agent} read {path}");
        }
        let not_authorized: BTreeSet<&str> = report["omittedSources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["reason"] == "not_authorized")
            .map(|o| o["source"].as_str().unwrap())
            .collect();
        // Every route tried is reported as refused, so none was vacuous.
        let mut expected: BTreeSet<String> = [
            "knowledge/言情范式",
            "knowledge/言情范式/密卷.md",
            "knowledge/alias/密卷.md",
            "works/青灯录/知识/借",
            "works/青灯录/正文/第006章.md",
        ]
        .map(String::from)
        .into();
        match agent {
            "writer" => {
                expected.insert("knowledge/alias".into());
                expected.insert("knowledge/言情范式/借物传情.md".into());
            }
            "judge" => {
                expected.insert(format!("works/{WORK}/身份.md"));
            }
            "extractor" => {
                expected.insert(format!("works/{WORK}/知识/人物/内鬼.md"));
            }
            _ => {}
        }
        let missing: Vec<&String> = expected
            .iter()
            .filter(|s| !not_authorized.contains(s.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{agent}: {missing:?} not in {not_authorized:?}"
        );
        reviews += 1;
    }
    let mut copies = Vec::new();
    collect_md(&root.join(format!("works/{WORK}/评审")), &mut copies);
    assert_eq!(copies.len(), reviews, "one review copy per purpose");
    for copy in copies {
        assert!(
            !fs::read_to_string(&copy).unwrap().contains(SECRET),
            "{copy:?}"
        );
    }
}

#[test]
fn malformed_cards_are_skipped_and_reported_not_fatal() {
    let world = World::new();
    let root = world.example("novel");
    let cards = root.join(format!("works/{WORK}/知识/人物"));
    fs::write(
        cards.join("坏编码.md"),
        b"---\n\xff\xfe: x\n---\n## \xc3\x28\n",
    )
    .unwrap();
    fs::write(
        cards.join("坏头.md"),
        "---\n类型: [人物\n名称: 坏\n---\n## 身份\n\nx\n",
    )
    .unwrap();
    fs::write(
        cards.join("列表头.md"),
        "---\n- 人物\n- 坏\n---\n## 身份\n\nx\n",
    )
    .unwrap();
    let fifo =
        std::ffi::CString::new(cards.join("管道.md").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // A neighbouring chapter (chapter 9's summary source) and a library card.
    fs::write(
        root.join(format!("works/{WORK}/正文/第007章.md")),
        "---\n修订: [\n---\n## 场景\n\nx\n",
    )
    .unwrap();
    fs::write(root.join("knowledge/打斗范式/坏卡.md"), b"\xff\xff").unwrap();
    let expected = [
        (format!("works/{WORK}/知识/人物/坏编码.md"), "UTF-8"),
        (format!("works/{WORK}/知识/人物/坏头.md"), ""),
        (format!("works/{WORK}/知识/人物/列表头.md"), ""),
        (format!("works/{WORK}/知识/人物/管道.md"), "FIFO"),
        (format!("works/{WORK}/正文/第007章.md"), ""),
        ("knowledge/打斗范式/坏卡.md".to_string(), "UTF-8"),
    ];
    for (agent, scenario, chapter) in [
        ("writer", "continuation", "9"),
        ("extractor", "extraction", "8"),
        ("detector", "validation", "8"),
    ] {
        let report = json(&run(
            &world,
            &root,
            &novel_args(
                scenario,
                chapter,
                &["--agent", agent, "--format", "json", "--no-write"],
            ),
        ));
        let unreadable: BTreeMap<&str, &str> = report["omittedSources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["reason"] == "unreadable")
            .map(|o| (o["source"].as_str().unwrap(), o["detail"].as_str().unwrap()))
            .collect();
        for (path, why) in &expected {
            let needed = match agent {
                "writer" => !path.contains("第007章") || chapter == "9",
                "extractor" => !path.starts_with("knowledge/") && !path.contains("正文"),
                _ => !path.contains("正文"),
            };
            if !needed {
                continue;
            }
            let detail = unreadable
                .get(path.as_str())
                .unwrap_or_else(|| panic!("{agent}: {path} not reported: {unreadable:?}"));
            assert!(
                detail.contains(why) && detail.ends_with("skipped"),
                "{path}: {detail}"
            );
        }
        let text = report["text"].as_str().unwrap();
        assert!(
            text.contains("- unreadable · "),
            "{agent}: the report lists them"
        );
        if agent != "writer" {
            assert!(
                text.contains("#### 人物 · 周慎之"),
                "{agent}: the other cards are read"
            );
        }
    }
    // The unit's own file is required when it is the object under review.
    fs::write(root.join(format!("works/{WORK}/正文/第008章.md")), b"\xff").unwrap();
    let output = run(
        &world,
        &root,
        &novel_args("quality_gate", "8", &["--no-write"]),
    );
    common::fails(&output, 1, "第008章.md: not valid UTF-8");
}

#[test]
fn recipe_numbers_are_bounded_and_never_panic() {
    let world = World::new();
    let root = world.example("novel");
    let recipe = root.join("meta/recipe.yaml");
    let original = fs::read_to_string(&recipe).unwrap();
    let refused = [
        (
            "file: \"works/{work}/正文/第{unit:65536}章.md\"",
            "is too large: at most 16 digits",
        ),
        (
            "heading: \"第{unit:99999}章\"",
            "is too large: at most 16 digits",
        ),
        (
            "file: \"works/{work}/正文/第{unit:+3}章.md\"",
            "bad width '+3'",
        ),
        (
            "file: \"works/{work:3}/正文/第{unit:03}章.md\"",
            "only {unit} takes a width",
        ),
    ];
    for (replacement, message) in refused {
        let key = replacement.split(':').next().unwrap();
        let line = original
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}:")))
            .unwrap();
        let indent = &line[..line.len() - line.trim_start().len()];
        fs::write(
            &recipe,
            original.replace(line, &format!("{indent}{replacement}")),
        )
        .unwrap();
        let output = run(
            &world,
            &root,
            &novel_args("continuation", "9", &["--no-write"]),
        );
        common::fails(&output, 2, message);
    }
    // Offsets and counts at the ends of their types: nothing to show, no overflow.
    let extreme = original
        .replace(
            "offset: -1, last: 2",
            "offset: -9223372036854775808, last: 18446744073709551615",
        )
        .replace("offset: -2}", "offset: 9223372036854775807}")
        .replace("recent: 3,", "recent: 9223372036854775808,");
    assert_ne!(extreme, original);
    fs::write(&recipe, extreme).unwrap();
    for (agent, scenario) in PIPELINE {
        let output = run(
            &world,
            &root,
            &novel_args(scenario, "8", &["--agent", agent, "--no-write"]),
        );
        ok(&output);
    }
}

#[test]
fn names_that_are_not_names_are_refused_as_such() {
    let world = World::new();
    let root = world.example("novel");
    let bindings = root.join(format!("works/{WORK}/装配.yaml"));
    for library in ["../x", "/etc", "a/b", "..", ""] {
        fs::write(&bindings, format!("libraries: [打斗范式, \"{library}\"]\n")).unwrap();
        let output = run(
            &world,
            &root,
            &novel_args("continuation", "9", &["--no-write"]),
        );
        common::fails(&output, 2, &format!("'{library}' is not a library name"));
    }
    fs::write(&bindings, "libraries: [打斗范式]\n").unwrap();
    let work_args = |work: &'static str| {
        vec![
            "--work",
            work,
            "--scenario",
            "continuation",
            "--chapter",
            "9",
            "--intent",
            "x",
        ]
    };
    for work in ["../../etc", "..", ".", "/etc", "a/b"] {
        let output = run(&world, &root, &work_args(work));
        common::fails(&output, 2, "a work is one folder name");
    }
    let output = run(&world, &root, &novel_args("../continuation", "9", &[]));
    common::fails(&output, 2, "unknown scenario '../continuation'");
    let output = run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--agent", "../writer"]),
    );
    common::fails(&output, 2, "unknown agent '../writer'");
    // Names in the recipe fill path templates: they must be names too.
    let recipe = root.join("meta/recipe.yaml");
    let original = fs::read_to_string(&recipe).unwrap();
    let cases = [
        (
            original
                .replace("  judge:\n", "  ../judge:\n")
                .replace("agent: judge,", "agent: ../judge,"),
            "agent '../judge' is not a name",
        ),
        (
            original.replace("  polish: {", "  \"a/b\": {"),
            "scenario 'a/b' is not a name",
        ),
        (
            original.replace("libraries_dir: knowledge", "libraries_dir: ../knowledge"),
            "libraries_dir '../knowledge' must be a folder inside the project",
        ),
    ];
    for (text, message) in cases {
        assert_ne!(text, original);
        fs::write(&recipe, text).unwrap();
        let output = run(
            &world,
            &root,
            &novel_args("continuation", "9", &["--no-write"]),
        );
        common::fails(&output, 2, message);
    }
}

#[test]
fn serving_a_project_whose_recipe_is_broken_is_refused() {
    let world = World::new();
    let root = world.example("novel");
    fs::write(root.join("meta/recipe.yaml"), "name: [unclosed\n").unwrap();
    let output = world
        .cmd()
        .args(["serve", "--vault"])
        .arg(&root)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    common::fails(&output, 2, "meta/recipe.yaml");
    assert!(stderr(&output).contains("nothing is served until that is fixed"));
}

#[test]
fn assembly_reads_cards_through_the_privacy_policy() {
    let world = World::new();
    let root = world.example("novel");
    let card = root.join(format!("works/{WORK}/知识/人物/沈青.md"));
    let text = std::fs::read_to_string(&card).unwrap();
    std::fs::write(
        &card,
        text.replacen(
            "## 身份\n\n",
            "## 身份\n\n%%PRIVATECOMMENTMARK%% 钥匙 ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b 在灯楼。",
            1,
        ),
    )
    .unwrap();
    let private = root.join(format!("works/{WORK}/知识/人物/厉无咎.md"));
    let text = std::fs::read_to_string(&private).unwrap();
    std::fs::write(
        &private,
        text.replacen("---\n", "---\nprivate: true\n", 1).replacen(
            "## 身份",
            "## 身份\n\nPRIVATECARDMARK",
            1,
        ),
    )
    .unwrap();
    let output = run(
        &world,
        &root,
        &novel_args("continuation", "9", &["--no-write", "--format", "json"]),
    );
    let json = ok(&output);
    for leaked in [
        "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b",
        "PRIVATECOMMENTMARK",
        "PRIVATECARDMARK",
    ] {
        assert!(!json.contains(leaked), "{leaked} leaked");
    }
    let assembly: Value = serde_json::from_str(&json).unwrap();
    let text = assembly["text"].as_str().unwrap();
    assert!(text.contains("[REDACTED:github_token]"), "{text}");
    let card_path = format!("works/{WORK}/知识/人物/沈青.md");
    assert!(
        text.contains(&format!("- {card_path}:"))
            && text.contains("secret (github_token) redacted"),
        "the report lists the redaction:\n{text}"
    );
    assert_eq!(assembly["redactions"][0]["path"], card_path.as_str());
    assert_eq!(assembly["redactions"][0]["kind"], "github_token");
    let private_path = format!("works/{WORK}/知识/人物/厉无咎.md");
    let omitted = assembly["omittedSources"].as_array().unwrap();
    assert!(
        omitted
            .iter()
            .any(|o| o["reason"] == "private" && o["source"] == private_path.as_str()),
        "{omitted:?}"
    );
}

#[test]
fn candidates_and_slots_pass_the_same_gate_as_every_read() {
    let world = World::new();
    let root = world.example("novel");
    const LEAK: &str = "GATELEAKMARK";
    let planted = [
        (".env", format!("TOKEN={LEAK}\n")),
        (".git/config", format!("[remote]\nurl = {LEAK}\n")),
        ("_raw/clip.md", format!("# Clip\n\n{LEAK}\n")),
        ("notes.txt", format!("{LEAK}\n")),
        (
            "drafts/CAPS.MD",
            format!("---\nprivate: true\n---\n# Caps\n\n{LEAK}\n"),
        ),
        ("drafts/ignored.md", format!("# Ignored\n\n{LEAK}\n")),
    ];
    for (path, text) in &planted {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    fs::write(root.join("drafts/.okignore"), "ignored.md\n").unwrap();
    for (candidate, _) in &planted {
        let output = run(
            &world,
            &root,
            &novel_args("validation", "8", &["--candidate", candidate, "--no-write"]),
        );
        assert!(!stdout(&output).contains(LEAK), "{candidate}");
        assert!(!stderr(&output).contains(LEAK), "{candidate}");
        // A private note and any other path the project does not list get
        // one answer, before anything is read: no oracle for what exists.
        common::fails(
            &output,
            2,
            &format!(
                "no candidate {candidate} to review: it does not exist, or is not a note the \
                 project may read"
            ),
        );
    }
    // A slot naming a file the walk skips: its text never reaches the pack.
    fs::write(
        root.join(format!("works/{WORK}/装配.yaml")),
        "libraries: [打斗范式, 言情范式]\nslots:\n  writer: .env\n  detector: _raw/clip.md\n",
    )
    .unwrap();
    for (agent, scenario) in [("writer", "continuation"), ("detector", "validation")] {
        let output = run(
            &world,
            &root,
            &novel_args(scenario, "8", &["--agent", agent, "--no-write"]),
        );
        assert!(!stdout(&output).contains(LEAK), "{agent}");
        assert!(!stderr(&output).contains(LEAK), "{agent}");
    }
}

/// A hidden field written however a reader would still read it as that
/// field (emphasis, a block id, a link, an indent, invisible or full-width
/// letters, another case, a remark, a Dataview field inside a shown
/// section, a frontmatter key) and an outline entry of a future volume that
/// numbers its chapters from 1 again never reach a purpose the schema hides
/// them from; the purpose allowed to see them still does.
#[test]
fn a_hidden_field_however_spelt_and_a_future_entry_however_numbered_stay_hidden() {
    let world = World::new();
    let root = world.example("novel");
    let card = root.join("works/青灯录/知识/人物/苏小满.md");
    let mut text = fs::read_to_string(&card).unwrap();
    let variants = [
        "## **成长弧线**",
        "## 成长弧线 ^arc",
        "## [[成长弧线]]",
        "   ## 成长弧线",
        "## 成长\u{200b}弧线",
        "## 成长&shy;弧线",
        "## 成长弧线：旧稿",
        "## 成长弧线 (old)",
    ];
    let mut marks = Vec::new();
    for (n, heading) in variants.iter().enumerate() {
        let mark = format!("VARIANT{n:02}");
        text.push_str(&format!("\n{heading}\n\n{mark}。\n"));
        marks.push(mark);
    }
    text.push_str("\n## 身份补充\n\n成长弧线:: INLINEFIELD。\n");
    marks.push("INLINEFIELD".into());
    let text = text.replacen("---\n类型", "---\n成长弧线 : FRONTKEY\n类型", 1);
    marks.push("FRONTKEY".into());
    fs::write(&card, text).unwrap();
    let outline = root.join("works/青灯录/大纲.md");
    let mut plan = fs::read_to_string(&outline).unwrap();
    plan.push_str("\n### 第5章 重来\n\nFUTUREENTRY。\n");
    fs::write(&outline, plan).unwrap();
    marks.push("FUTUREENTRY".into());

    let pack = |agent: &str, scenario: &str| {
        ok(&run(
            &world,
            &root,
            &novel_args(
                scenario,
                "8",
                &["--agent", agent, "--budget", "60000", "--no-write"],
            ),
        ))
    };
    let writer = pack("writer", "continuation");
    for mark in &marks {
        assert!(!writer.contains(mark.as_str()), "the writer sees {mark}");
    }
    let planner = pack("planner", "planning");
    for mark in &marks {
        assert!(planner.contains(mark.as_str()), "the planner misses {mark}");
    }
}

/// A file in a private folder under a cards folder is never opened, so
/// neither the pack, its omission report nor the JSON list of what was read
/// names it.
#[test]
fn a_file_in_a_private_folder_is_not_named_by_assemble() {
    let world = World::new();
    let root = world.example("novel");
    let folder = root.join("works/青灯录/知识/人物/私密");
    fs::create_dir_all(&folder).unwrap();
    fs::write(
        folder.join("lawyer-meeting-2024.md"),
        "---\n类型: 人物\n名称: 某律师\n---\n## 身份\n\nPRIVATEFOLDERTEXT\n",
    )
    .unwrap();
    fs::write(
        root.join(".ctxpack.yaml"),
        "private:\n  folders: [\"works/青灯录/知识/人物/私密/\"]\n",
    )
    .unwrap();
    for format in ["markdown", "json"] {
        let output = run(
            &world,
            &root,
            &novel_args(
                "planning",
                "8",
                &[
                    "--agent",
                    "planner",
                    "--budget",
                    "60000",
                    "--no-write",
                    "--format",
                    format,
                ],
            ),
        );
        let pack = ok(&output);
        assert!(!pack.contains("PRIVATEFOLDERTEXT"), "{format}");
        assert!(!pack.contains("lawyer-meeting"), "{format}: {pack}");
    }
}

/// The vault tools on the command line over a writing project see what
/// some work may read, as `serve` does: a library no work binds is not
/// searched, packed or read by `get_note`'s door.
#[test]
fn the_command_line_vault_tools_do_not_see_an_unbound_library() {
    let world = World::new();
    let root = world.example("novel");
    let vault = root.to_str().unwrap();
    let search = ok(&world
        .cmd()
        .args(["search", "借物传情", "--format", "json", "--vault", vault])
        .output()
        .unwrap());
    assert!(!search.contains("言情范式"), "{search}");
    let pack = ok(&world
        .cmd()
        .args(["pack", "借物传情 随身小物", "--no-log", "--vault", vault])
        .output()
        .unwrap());
    assert!(!pack.contains("随身小物承载"), "{pack}");
    // Not vacuous: a bound library's card is found the same way.
    let bound = ok(&world
        .cmd()
        .args(["search", "范式", "--format", "json", "--vault", vault])
        .output()
        .unwrap());
    assert!(bound.contains("knowledge/"), "{bound}");
}

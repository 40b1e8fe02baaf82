//! Which notes a request may draw on (issue 41, parts 1-4): `--where`,
//! `--since`/`--until`, folders and tags in and out, quoted phrases and
//! `-term`, on `search`, every `pack` mode and the MCP tools, over the
//! embedded index (the PostgreSQL store's parity is in tests/postgres.rs).

mod common;

use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use common::mcp_client::Client;
use common::{GENERATED_AT, World, cloned_vault, fails, ok, set_mtime, stderr, write};
use ctxpack::Filters;
use ctxpack::request::{RankOptions, SearchInput, Spelling};
use ctxpack::{IndexChoice, ModelChoice, Session};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Six notes and a private one. Dates are before GENERATED_AT
/// (2026-06-01).
fn vault(world: &World) -> PathBuf {
    world.vault(
        "vault",
        &[
            (
                "projects/alpha.md",
                "---\nstatus: active\npriority: 3\nowner: \"[[People/Ada Lovelace|Ada]]\"\n\
                 tags: [work, work/client]\nupdated: 2026-05-28\n---\n\
                 # Alpha\n\nRaft leader election for the alpha service. The leader election uses terms.\n",
            ),
            (
                "projects/beta.md",
                "---\nstatus: done\npriority: 10\ntags: [work, draft]\nupdated: 2026-04-01\n---\n\
                 # Beta\n\nRaft election of a leader, compared with Paxos.\n",
            ),
            (
                "projects/archive/gamma.md",
                "---\nstatus: active\ntopics: [raft, storage]\ntags: [old]\nupdated: 2025-01-01\n---\n\
                 # Gamma\n\nOld raft leader election notes, archived.\n",
            ),
            (
                "areas/delta.md",
                "---\npriority: 7\ntags: [work]\ndate: 2026-05-20\n---\n\
                 # Delta\n\nRaft log-based replication; leader-election timeouts.\n",
            ),
            (
                "journal/2026-05-30.md",
                "# 2026-05-30\n\nRead about raft again.\n",
            ),
            (
                "areas/epsilon.md",
                "---\nstatus: Active\nupdated: 2026-05-31T10:00\n---\n\
                 # Epsilon\n\n分布式事务 and raft 共识算法 notes.\n",
            ),
            (
                "secret/zeta.md",
                "---\nprivate: true\nstatus: classified\ntags: [hidden]\n---\n\
                 # Zeta\n\nraft leader election PRIVATEMARK\n",
            ),
        ],
    )
}

fn run(world: &World, vault: &Path, args: &[&str]) -> std::process::Output {
    // The vault and model go before a `--` (after which a query may start
    // with a hyphen).
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    world
        .cmd()
        .args(&args[..split])
        .arg("--vault")
        .arg(vault)
        .args(["--model", "none"])
        .args(&args[split..])
        .output()
        .unwrap()
}

/// The paths a search finds, in order.
fn found(world: &World, vault: &Path, args: &[&str]) -> Vec<String> {
    let mut full = vec!["search", "raft", "--limit", "50", "--format", "files"];
    full.extend_from_slice(args);
    ok(&run(world, vault, &full))
        .lines()
        .map(str::to_string)
        .collect()
}

fn sorted(mut paths: Vec<String>) -> Vec<String> {
    paths.sort();
    paths
}

/// The pages of a pack (its `## [[...]]` lines), in order.
fn pages(world: &World, vault: &Path, args: &[&str]) -> Vec<String> {
    let mut full = vec![
        "pack",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
        "--budget",
        "4000",
    ];
    full.extend_from_slice(args);
    ok(&run(world, vault, &full))
        .lines()
        .filter_map(|line| line.strip_prefix("## [["))
        .filter_map(|line| line.split("]]").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn where_conditions_compare_as_text_numbers_dates_lists_and_links() {
    let world = World::new();
    let vault = vault(&world);
    let set = |args: &[&str]| sorted(found(&world, &vault, args));
    assert_eq!(
        set(&["--where", "status=active"]),
        [
            "areas/epsilon.md",
            "projects/alpha.md",
            "projects/archive/gamma.md"
        ]
    );
    // != holds for a note without the key.
    assert_eq!(
        set(&["--where", "status!=active"]),
        [
            "areas/delta.md",
            "journal/2026-05-30.md",
            "projects/beta.md"
        ]
    );
    // Numbers: 10 >= 5 although "10" < "5" as text.
    assert_eq!(
        set(&["--where", "priority>=5"]),
        ["areas/delta.md", "projects/beta.md"]
    );
    assert_eq!(set(&["--where", "priority<=3"]), ["projects/alpha.md"]);
    // Dates, by the day.
    assert_eq!(
        set(&["--where", "updated>=2026-05-28"]),
        ["areas/epsilon.md", "projects/alpha.md"]
    );
    // A link matches by the name it shows; a list by any item.
    assert_eq!(set(&["--where", "owner=ada"]), ["projects/alpha.md"]);
    assert_eq!(
        set(&["--where", "topics=storage"]),
        ["projects/archive/gamma.md"]
    );
    assert_eq!(
        set(&["--where", "owner~love"]),
        Vec::<String>::new(),
        "the shown name is Ada"
    );
    // Present, absent, and all conditions at once.
    assert_eq!(
        set(&["--where", "priority", "--where", "!status"]),
        ["areas/delta.md"]
    );
    assert_eq!(
        set(&["--where", "status=active", "--where", "priority"]),
        ["projects/alpha.md"]
    );
}

#[test]
fn every_pack_mode_keeps_to_the_filter() {
    let world = World::new();
    let vault = vault(&world);
    let filter = ["--where", "status=active"];
    let with = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&filter);
        pages(&world, &vault, &all)
    };
    assert_eq!(
        sorted(with(&["raft leader"])),
        ["areas/epsilon", "projects/alpha", "projects/archive/gamma"]
    );
    assert_eq!(
        sorted(with(&["raft", "--subquery", "paxos"])),
        ["areas/epsilon", "projects/alpha", "projects/archive/gamma"]
    );
    assert_eq!(
        with(&["--recent"]),
        ["areas/epsilon", "projects/alpha", "projects/archive/gamma"]
    );
    assert_eq!(
        sorted(with(&["raft", "--ranker", "frontmatter"])),
        Vec::<String>::new(),
        "no title, tag or summary says raft"
    );
    // The note asked for is packed whatever the filter; its neighbours
    // and similar notes pass the filter (epsilon passes it too, but shares
    // only "raft" with beta: below the note pack's floor of two words).
    assert_eq!(
        sorted(with(&["--note", "projects/beta.md"])),
        ["projects/alpha", "projects/archive/gamma", "projects/beta"]
    );
    let unfiltered = pages(&world, &vault, &["--note", "projects/beta.md"]);
    assert!(
        unfiltered.contains(&"areas/delta".to_string()),
        "{unfiltered:?}"
    );
}

#[test]
fn since_and_until_window_by_the_notes_own_date() {
    let world = World::new();
    let vault = vault(&world);
    let set = |args: &[&str]| sorted(found(&world, &vault, args));
    // date:, a daily note's name, updated: with a time.
    assert_eq!(
        set(&["--since", "2026-05-20", "--until", "2026-05-30"]),
        [
            "areas/delta.md",
            "journal/2026-05-30.md",
            "projects/alpha.md"
        ]
    );
    assert_eq!(
        set(&["--until", "2026-04-01"]),
        ["projects/archive/gamma.md", "projects/beta.md"]
    );
    // A span back from the pack's own time (--generated-at 2026-06-01).
    assert_eq!(
        sorted(pages(&world, &vault, &["--recent", "--since", "3d"])),
        ["areas/epsilon", "journal/2026-05-30"]
    );
    assert_eq!(
        sorted(pages(
            &world,
            &vault,
            &["--recent", "--since", "2w", "--until", "1w"]
        )),
        ["areas/delta"]
    );
}

/// A vault whose files were all written at once (a `git clone`, a copy):
/// their shared time dates none of the notes that have no date of their
/// own, in recent order, in date windows and in `status`; a note touched
/// since is dated by its own time again.
#[test]
fn a_file_time_most_notes_share_dates_no_note() {
    let world = World::new();
    let vault = cloned_vault(
        &world,
        &[
            (
                "dated/old.md",
                "---\nupdated: 2026-03-01\n---\n# Old\n\nRaft then.\n",
            ),
            (
                "dated/new.md",
                "---\nupdated: 2026-05-01\n---\n# New\n\nRaft now.\n",
            ),
        ],
    );
    let stub_pages: Vec<String> = (0..6).map(|i| format!("stubs/s{i}")).collect();
    assert_eq!(
        pages(&world, &vault, &["--recent"]),
        [
            vec!["dated/new".to_string(), "dated/old".to_string()],
            stub_pages.clone()
        ]
        .concat()
    );
    assert_eq!(
        found(&world, &vault, &["--since", "2026-04-15"]),
        ["dated/new.md"]
    );
    // The pack says why the stubs come last, in that order.
    let recent = run(&world, &vault, &["pack", "--recent", "--no-log"]);
    assert!(
        stderr(&recent).contains(
            "ctxpack: warning: 6 of the 8 pages have no date of their own, and their file time \
             is one most of the vault's notes share (a checkout, a copy or a sync wrote them): \
             they follow the dated pages in tier and path order\n"
        ),
        "{}",
        stderr(&recent)
    );
    let status = ok(&run(&world, &vault, &["status"]));
    assert!(
        status.contains(
            "\ndates:        2 by their properties or names, 0 by their file's time, 6 undated \
             (6 of them on a file time most notes share: a checkout, a copy or a sync)\n"
        ),
        "{status}"
    );
    // Touched an hour before the clone: its own time again, the newest
    // date; five notes still share the clone's.
    let touched = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    set_mtime(&vault.join("stubs/s3.md"), touched);
    let mut expected = vec![
        "stubs/s3".to_string(),
        "dated/new".into(),
        "dated/old".into(),
    ];
    expected.extend(stub_pages.iter().filter(|p| *p != "stubs/s3").cloned());
    assert_eq!(pages(&world, &vault, &["--recent"]), expected);
    assert_eq!(
        sorted(found(&world, &vault, &["--since", "2026-04-15"])),
        ["dated/new.md", "stubs/s3.md"]
    );
    assert!(ok(&run(&world, &vault, &["status"])).contains(
        "\ndates:        2 by their properties or names, 1 by their file's time, 5 undated \
             (5 of them on a file time most notes share: a checkout, a copy or a sync)\n"
    ));
}

#[test]
fn folders_and_tags_include_and_exclude_with_nested_tags() {
    let world = World::new();
    let vault = vault(&world);
    let set = |args: &[&str]| sorted(found(&world, &vault, args));
    assert_eq!(
        set(&[
            "--folder",
            "projects",
            "--exclude-folder",
            "projects/archive"
        ]),
        ["projects/alpha.md", "projects/beta.md"]
    );
    assert_eq!(
        set(&["--folder", "areas", "--folder", "journal/"]),
        [
            "areas/delta.md",
            "areas/epsilon.md",
            "journal/2026-05-30.md"
        ]
    );
    assert_eq!(
        set(&["--tag", "#work", "--exclude-tag", "draft"]),
        ["areas/delta.md", "projects/alpha.md"]
    );
    // Nested: excluding work leaves out work/client too.
    assert_eq!(
        set(&["--exclude-tag", "work"]),
        [
            "areas/epsilon.md",
            "journal/2026-05-30.md",
            "projects/archive/gamma.md"
        ]
    );
    assert_eq!(
        pages(
            &world,
            &vault,
            &[
                "--recent",
                "--exclude-folder",
                "projects",
                "--exclude-folder",
                "journal"
            ]
        ),
        ["areas/epsilon", "areas/delta"]
    );
}

#[test]
fn what_the_vault_lacks_is_a_warning_not_silence() {
    let world = World::new();
    let vault = vault(&world);
    let out = run(
        &world,
        &vault,
        &[
            "search",
            "raft",
            "--folder",
            "projcts",
            "--tag",
            "wrk",
            "--where",
            "stauts=active",
            "--exclude-tag",
            "nope",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    for warning in [
        "ctxpack: warning: no folder 'projcts' in the vault (--folder / folders)",
        "ctxpack: warning: no note has the tag 'wrk' (--tag / tags)",
        "ctxpack: warning: no note has the tag 'nope' (--exclude-tag / exclude_tags)",
        "ctxpack: warning: no note has a value for the property 'stauts' (--where / where)",
    ] {
        assert!(err.contains(warning), "{warning}\n{err}");
    }
    // A folder left out on purpose is named as such, not as missing.
    write(
        &vault.join(".obsidian/templates.json"),
        br#"{"folder": "Templates"}"#,
    );
    write(
        &vault.join("Templates/Meeting.md"),
        b"# Meeting\n\nraft agenda\n",
    );
    let out = run(
        &world,
        &vault,
        &["search", "raft", "--folder", "Templates/"],
    );
    assert!(
        stderr(&out).contains(
            "ctxpack: warning: folder 'Templates' is Obsidian's templates folder, which is not \
             searched or packed (`obsidian: templates: false` in .ctxpack.yaml reads it) \
             (--folder / folders)"
        ),
        "{}",
        stderr(&out)
    );
    let pack = run(
        &world,
        &vault,
        &["pack", "raft", "--no-log", "--where", "stauts"],
    );
    assert!(
        stderr(&pack).contains("no note has a value for the property 'stauts'"),
        "{}",
        stderr(&pack)
    );
    // A pack the filter leaves empty says so, not that the vault has no
    // notes or none on the topic.
    for (args, said) in [
        (
            &["pack", "--recent", "--no-log", "--folder", "projcts"][..],
            "No recent pages found. The filter lets no note through.",
        ),
        (
            &["pack", "raft", "--no-log", "--folder", "projcts"],
            "No relevant pages found. No note the filter lets through matches this topic.",
        ),
    ] {
        let pack = stdout_of(&run(&world, &vault, args));
        assert!(pack.contains(said), "{args:?}: {pack}");
    }
}

#[test]
fn a_filter_matching_only_private_notes_answers_as_one_matching_nothing() {
    let world = World::new();
    let vault = vault(&world);
    let answers = |args: &[&str]| {
        let mut all = vec!["search", "raft", "--format", "json"];
        all.extend_from_slice(args);
        let out = run(&world, &vault, &all);
        (out.status.code(), stdout_of(&out), stderr(&out))
    };
    let private = answers(&[
        "--where",
        "status=classified",
        "--tag",
        "hidden",
        "--folder",
        "secret",
    ]);
    let nothing = answers(&[
        "--where",
        "status=nosuchvalue",
        "--tag",
        "hidden",
        "--folder",
        "secret",
    ]);
    assert_eq!(private, nothing);
    assert!(!private.1.contains("zeta") && !private.2.contains("zeta"));
    // A key only a private note has reads as a key no note has.
    let only_private_key = world.vault(
        "v2",
        &[
            ("a.md", "# A\n\nraft\n"),
            ("b.md", "---\nprivate: true\nsecretkey: 1\n---\nraft\n"),
        ],
    );
    let a = run(
        &world,
        &only_private_key,
        &["search", "raft", "--where", "secretkey"],
    );
    let b = run(
        &world,
        &only_private_key,
        &["search", "raft", "--where", "otherkey"],
    );
    assert_eq!(stdout_of(&a), stdout_of(&b));
    assert_eq!(
        stderr(&a).replace("secretkey", "KEY"),
        stderr(&b).replace("otherkey", "KEY")
    );
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn phrases_and_exclusions_constrain_what_ranks() {
    let world = World::new();
    let vault = vault(&world);
    let set = |query: &str| {
        sorted(
            ok(&run(
                &world,
                &vault,
                &["search", query, "--limit", "50", "--format", "files"],
            ))
            .lines()
            .map(str::to_string)
            .collect(),
        )
    };
    // "leader election" in that order; delta's "leader-election" holds it
    // too (punctuation is not a word).
    assert_eq!(
        set("\"leader election\""),
        [
            "areas/delta.md",
            "projects/alpha.md",
            "projects/archive/gamma.md"
        ]
    );
    assert_eq!(set("\"election leader\""), Vec::<String>::new());
    assert_eq!(
        set("raft -paxos -\"old raft\""),
        [
            "areas/delta.md",
            "areas/epsilon.md",
            "journal/2026-05-30.md",
            "projects/alpha.md"
        ]
    );
    // A hyphen inside a word is part of it.
    assert!(set("log-based").contains(&"areas/delta.md".to_string()));
    // CJK phrases.
    assert_eq!(set("\"分布式事务\""), ["areas/epsilon.md"]);
    assert_eq!(set("\"事务分布\""), Vec::<String>::new());
    // Packs: the topic and each subquery.
    assert_eq!(
        sorted(pages(&world, &vault, &["raft -paxos -old -\"分布式\""])),
        ["areas/delta", "journal/2026-05-30", "projects/alpha"]
    );
    let explained = ok(&run(
        &world,
        &vault,
        &["search", "raft \"leader election\" -paxos", "--explain"],
    ));
    assert!(
        explained.starts_with(
            "query: ranked by: raft leader election; phrases: \"leader election\"; without: paxos\n"
        ),
        "{explained}"
    );
    // Without syntax, --explain shows no query line.
    let plain = ok(&run(&world, &vault, &["search", "raft", "--explain"]));
    assert!(!plain.contains("query: "), "{plain}");
}

#[test]
fn bad_filters_and_exclusion_only_queries_are_usage_errors() {
    let world = World::new();
    let vault = vault(&world);
    let unknown =
        "unknown operator '>'; use =, !=, >=, <=, ~ (contains), KEY (present) or !KEY (absent)";
    for (args, message) in [
        (
            vec!["search", "raft", "--where", "priority>5"],
            format!("ctxpack: error: --where 'priority>5': {unknown}"),
        ),
        (
            vec!["pack", "raft", "--where", "=x"],
            "ctxpack: error: --where '=x': the key is empty".to_string(),
        ),
        (
            vec!["search", "raft", "--since", "last tuesday"],
            "ctxpack: error: --since 'last tuesday': is neither a date (2026-11-01) nor a span \
             back from now (14d, 2w, 3m, 1y)"
                .to_string(),
        ),
        (
            vec![
                "pack",
                "--recent",
                "--since",
                "2026-05-02",
                "--until",
                "2026-05-01",
            ],
            "ctxpack: error: --since '2026-05-02': is after the until date (2026-05-01): no note \
             can be in that window"
                .to_string(),
        ),
        (
            vec!["search", "--", "-paxos -\"old raft\""],
            "ctxpack: error: the query only excludes (-term, -\"a phrase\"); give at least one \
             word or \"phrase\" to look for"
                .to_string(),
        ),
        (
            vec!["pack", "raft", "--subquery=-paxos"],
            "ctxpack: error: a --subquery only excludes".to_string(),
        ),
        (
            vec!["search", "raft", "--exclude-tag", "#"],
            "ctxpack: error: --exclude-tag '#': is empty".to_string(),
        ),
    ] {
        fails(&run(&world, &vault, &args), 2, &message);
    }
}

#[test]
fn mcp_search_and_context_pack_take_the_same_filters() {
    let world = World::new();
    let vault = vault(&world);
    let mut client = Client::start_reproducible(&world, &vault, &["--model", "none"]);
    let tools = client.request("tools/list", json!({}));
    for tool in ["search", "context_pack"] {
        let schema = tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool)
            .unwrap()["inputSchema"]["properties"]
            .clone();
        for argument in [
            "where",
            "since",
            "until",
            "folders",
            "tags",
            "exclude_folders",
            "exclude_tags",
        ] {
            assert!(
                schema[argument]["description"].is_string(),
                "{tool}.{argument}: {schema}"
            );
        }
    }
    let (error, text) = client.call(
        "search",
        json!({"query": "raft", "limit": 50, "where": ["status=active"], "exclude_folders": ["projects/archive"]}),
    );
    assert!(!error, "{text}");
    let results: Value = serde_json::from_str(&text).unwrap();
    let paths: Vec<&str> = results["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        sorted(paths.iter().map(|p| p.to_string()).collect()),
        ["areas/epsilon.md", "projects/alpha.md"]
    );
    // `folder` is one more folder of the filter: a misspelt one warns as
    // `folders` does, and with `folders` either is let through.
    let (error, text) = client.call("search", json!({"query": "raft", "folder": "projcts"}));
    assert!(!error, "{text}");
    assert!(
        text.contains("no folder 'projcts' in the vault (--folder / folders)"),
        "{text}"
    );
    let (_, both) = client.call(
        "search",
        json!({"query": "raft", "folder": "projcts", "folders": ["areas"]}),
    );
    assert!(both.contains("areas/epsilon.md"), "{both}");
    // tags: one tag (as before) or a list.
    let (_, one) = client.call("search", json!({"query": "raft", "tags": "draft"}));
    let (_, many) = client.call("search", json!({"query": "raft", "tags": ["draft"]}));
    assert_eq!(one, many);
    assert!(
        one.contains("projects/beta.md") && !one.contains("alpha"),
        "{one}"
    );
    let (error, pack) = client.call(
        "context_pack",
        json!({"recent": true, "since": "3d", "exclude_tags": ["nothing-here"]}),
    );
    assert!(!error, "{pack}");
    let paged: Vec<&str> = pack
        .lines()
        .filter_map(|l| l.strip_prefix("## [["))
        .collect();
    assert_eq!(paged.len(), 2, "{pack}");
    assert!(
        pack.contains("## [[areas/epsilon]]") && pack.contains("## [[journal/2026-05-30]]"),
        "{pack}"
    );
    let response = client.request(
        "tools/call",
        json!({"name": "context_pack", "arguments": {"recent": true, "exclude_tags": ["nothing-here"]}}),
    );
    let content = response["result"]["content"].as_array().unwrap();
    assert_eq!(
        content.last().unwrap()["text"],
        "warning: no note has the tag 'nothing-here' (--exclude-tag / exclude_tags)"
    );
    for (arguments, message) in [
        (
            json!({"query": "raft", "where": ["a>b"]}),
            "where 'a>b': unknown operator '>'",
        ),
        (
            json!({"query": "raft", "since": "soon"}),
            "since 'soon': is neither a date",
        ),
        (json!({"query": "-raft"}), "query only excludes"),
    ] {
        for tool in ["search", "context_pack"] {
            let (error, text) = client.call(tool, arguments.clone());
            assert!(error, "{tool} {arguments}: {text}");
            assert!(text.contains(message), "{tool}: {text}");
        }
    }
}

#[test]
fn property_values_survive_an_incremental_update() {
    let world = World::new();
    let vault = vault(&world);
    let before = sorted(found(&world, &vault, &["--where", "status=active"]));
    write(
        &vault.join("projects/beta.md"),
        b"---\nstatus: active\ntags: [work]\n---\n# Beta\n\nRaft again.\n",
    );
    let after = sorted(found(&world, &vault, &["--where", "status=active"]));
    let mut expected = before.clone();
    expected.push("projects/beta.md".into());
    assert_eq!(after, sorted(expected));
    std::fs::remove_file(vault.join("projects/alpha.md")).unwrap();
    let removed = sorted(found(&world, &vault, &["--where", "status=active"]));
    assert_eq!(
        removed,
        [
            "areas/epsilon.md",
            "projects/archive/gamma.md",
            "projects/beta.md"
        ]
    );
}

// The property test: random vaults and random filters; the notes a search
// returns are exactly those a plain reimplementation of the rules accepts.

const STATUSES: &[&str] = &["active", "Done", "paused"];
const TAGS: &[&str] = &["work", "work/client", "home", "draft"];
const FOLDERS: &[&str] = &["", "projects", "projects/old", "areas"];

#[derive(Clone, Debug)]
struct Generated {
    folder: usize,
    status: Option<usize>,
    priority: Option<u32>,
    tags: Vec<usize>,
    /// Day of May 2026.
    day: Option<u32>,
    private: bool,
}

fn generated() -> impl Strategy<Value = Generated> {
    (
        0..FOLDERS.len(),
        prop::option::of(0..STATUSES.len()),
        prop::option::of(0u32..20),
        prop::collection::vec(0..TAGS.len(), 0..3),
        prop::option::of(1u32..31),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(folder, status, priority, tags, day, private)| Generated {
            folder,
            status,
            priority,
            tags,
            day,
            private,
        })
}

#[derive(Clone, Debug)]
struct Chosen {
    status: Option<(bool, usize)>,
    priority_at_least: Option<u32>,
    no_priority: bool,
    since_day: Option<u32>,
    folder: Option<usize>,
    exclude_folder: Option<usize>,
    tag: Option<usize>,
    exclude_tag: Option<usize>,
}

fn chosen() -> impl Strategy<Value = Chosen> {
    (
        prop::option::of((any::<bool>(), 0..STATUSES.len())),
        prop::option::of(0u32..20),
        prop::bool::weighted(0.2),
        prop::option::of(1u32..31),
        prop::option::of(1..FOLDERS.len()),
        prop::option::of(1..FOLDERS.len()),
        prop::option::of(0..TAGS.len()),
        prop::option::of(0..TAGS.len()),
    )
        .prop_map(
            |(
                status,
                priority_at_least,
                no_priority,
                since_day,
                folder,
                exclude_folder,
                tag,
                exclude_tag,
            )| Chosen {
                status,
                priority_at_least,
                no_priority,
                since_day,
                folder,
                exclude_folder,
                tag,
                exclude_tag,
            },
        )
}

/// The rules written out plainly, on the generated values.
/// `undated_are_shared`: the notes without a date of their own are five or
/// more, so their file time (all written at once) dates none of them.
fn plainly_accepted(note: &Generated, path: &str, c: &Chosen, undated_are_shared: bool) -> bool {
    if note.private {
        return false;
    }
    let under = |folder: &str| path.starts_with(&format!("{folder}/"));
    let tagged = |tag: &str| {
        note.tags
            .iter()
            .any(|&t| TAGS[t] == tag || TAGS[t].starts_with(&format!("{tag}/")))
    };
    if let Some((equal, s)) = c.status {
        let same = note
            .status
            .is_some_and(|n| STATUSES[n].eq_ignore_ascii_case(STATUSES[s]));
        if same != equal {
            return false;
        }
    }
    if let Some(at_least) = c.priority_at_least
        && note.priority.is_none_or(|p| p < at_least)
    {
        return false;
    }
    if c.no_priority && note.priority.is_some() {
        return false;
    }
    if let Some(day) = c.since_day
        && note.day.map_or(undated_are_shared, |d| d < day)
    {
        return false;
    }
    if let Some(f) = c.folder
        && !under(FOLDERS[f])
    {
        return false;
    }
    if let Some(f) = c.exclude_folder
        && under(FOLDERS[f])
    {
        return false;
    }
    if let Some(t) = c.tag
        && !tagged(TAGS[t])
    {
        return false;
    }
    if let Some(t) = c.exclude_tag
        && tagged(TAGS[t])
    {
        return false;
    }
    true
}

fn note_text(note: &Generated) -> String {
    let mut text = String::from("---\n");
    if let Some(s) = note.status {
        text.push_str(&format!("status: {}\n", STATUSES[s]));
    }
    if let Some(p) = note.priority {
        text.push_str(&format!("priority: {p}\n"));
    }
    let tags: Vec<&str> = note.tags.iter().map(|&t| TAGS[t]).collect();
    text.push_str(&format!("tags: [{}]\n", tags.join(", ")));
    // Notes without a date of their own are dated by their file time,
    // which is now: after every --since day chosen (unless five or more
    // share it).
    if let Some(day) = note.day {
        text.push_str(&format!("updated: 2026-05-{day:02}\n"));
    }
    if note.private {
        text.push_str("private: true\n");
    }
    text.push_str("---\nCommon words in every note.\n");
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_search_returns_exactly_the_notes_every_filter_accepts(
        notes in prop::collection::vec(generated(), 1..14),
        c in chosen(),
    ) {
        let world = World::new();
        let files: Vec<(String, String)> = notes
            .iter()
            .enumerate()
            .map(|(i, note)| {
                let folder = FOLDERS[note.folder];
                let path = if folder.is_empty() {
                    format!("n{i}.md")
                } else {
                    format!("{folder}/n{i}.md")
                };
                (path, note_text(note))
            })
            .collect();
        let borrowed: Vec<(&str, &str)> =
            files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
        let root = world.vault("vault", &borrowed);
        let session = Session::open(
            &root,
            &IndexChoice {
                dir: Some(world.path().join("index")),
                model: ModelChoice::Off,
                ..IndexChoice::default()
            },
        )
        .unwrap();
        let mut filters = Filters::default();
        if let Some((equal, s)) = c.status {
            let op = if equal { "=" } else { "!=" };
            filters.conditions.push(format!("status{op}{}", STATUSES[s].to_uppercase()));
        }
        if let Some(p) = c.priority_at_least {
            filters.conditions.push(format!("priority>={p}"));
        }
        if c.no_priority {
            filters.conditions.push("!priority".into());
        }
        filters.since = c.since_day.map(|d| format!("2026-05-{d:02}"));
        filters.folders.extend(c.folder.map(|f| FOLDERS[f].to_string()));
        filters.exclude_folders.extend(c.exclude_folder.map(|f| FOLDERS[f].to_string()));
        filters.tags.extend(c.tag.map(|t| TAGS[t].to_string()));
        filters.exclude_tags.extend(c.exclude_tag.map(|t| TAGS[t].to_string()));
        let request = SearchInput {
            spelling: Spelling::Flags,
            query: "common words".into(),
            limit: 1000,
            rank: RankOptions::new(Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap()),
            filters,
        }
        .validate()
        .unwrap();
        let results = session.search(&request);
        let got: Vec<String> = sorted(results.hits.iter().map(|h| h.path.clone()).collect());
        let undated_are_shared =
            notes.iter().filter(|n| !n.private && n.day.is_none()).count() >= 5;
        let want: Vec<String> = sorted(
            files
                .iter()
                .zip(&notes)
                .filter(|((path, _), note)| plainly_accepted(note, path, &c, undated_are_shared))
                .map(|((path, _), _)| path.clone())
                .collect(),
        );
        prop_assert_eq!(got, want);
    }
}

/// `--dailies` adds the newest daily notes the filter lets through: a
/// filter holds for every note a pack draws on.
#[test]
fn dailies_keep_to_the_filter_too() {
    let world = World::new();
    let vault = world.vault(
        "dailies",
        &[
            (
                "projects/alpha.md",
                "---\nstatus: active\nupdated: 2026-05-01\n---\n# Alpha\n\nRaft leader election.\n",
            ),
            ("journal/2026-05-31.md", "# 2026-05-31\n\nA quiet day.\n"),
            (
                "journal/2026-05-30.md",
                "---\nstatus: active\n---\n# 2026-05-30\n\nAn active day.\n",
            ),
            ("journal/2026-05-29.md", "# 2026-05-29\n\nAnother day.\n"),
        ],
    );
    let dailies = |args: &[&str]| {
        let mut full = vec!["leader election", "--dailies", "2"];
        full.extend_from_slice(args);
        pages(&world, &vault, &full)
    };
    assert_eq!(
        dailies(&[]),
        ["projects/alpha", "journal/2026-05-31", "journal/2026-05-30"]
    );
    assert_eq!(
        dailies(&["--where", "status=active"]),
        ["projects/alpha", "journal/2026-05-30"]
    );
    assert_eq!(
        dailies(&["--since", "2026-05-30"]),
        ["journal/2026-05-31", "journal/2026-05-30"]
    );
    assert_eq!(
        dailies(&["--exclude-folder", "journal"]),
        ["projects/alpha"]
    );
}

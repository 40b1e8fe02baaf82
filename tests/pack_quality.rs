//! Query-aware packing: relevant excerpts instead of heads, and a budget
//! used to the full when there is more relevant content than fits.

mod common;

use chrono::{TimeZone, Utc};
use common::World;
use ctxpack::RankOptions;
use ctxpack::Tokenizer;
use ctxpack::{IndexChoice, ModelChoice, PackRequest, Ranker, Session};
use ctxpack::{PackMode, PackOptions};

const NEEDLE: &str = "The lighthouse keeper's bicycle is painted vermilion.";

/// Deterministic filler prose without the needle's words.
fn filler(seed: u64, words: usize) -> String {
    const VOCAB: &[&str] = &[
        "harbour",
        "tide",
        "rope",
        "gull",
        "netting",
        "schooner",
        "breakwater",
        "pier",
        "fog",
        "anchor",
        "ballast",
        "mast",
        "keel",
        "current",
        "shoal",
        "reef",
        "cargo",
        "dock",
        "winch",
        "sail",
        "compass",
        "chart",
        "beacon",
        "signal",
        "storm",
        "quay",
        "hull",
    ];
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::new();
    for i in 0..words {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push_str(VOCAB[(state % VOCAB.len() as u64) as usize]);
        out.push(if i % 12 == 11 { '.' } else { ' ' });
        if i % 12 == 11 {
            out.push(' ');
        }
        if i % 120 == 119 {
            out.push_str("\n\n");
        }
    }
    out
}

fn needle_vault(world: &World, depth: f64) -> std::path::PathBuf {
    // ~20,000 tokens (chars / 4) for the note with the needle.
    let words = 20_000 * 4 / 7;
    let before = (words as f64 * depth) as usize;
    let mut files = vec![(
        "long/ledger.md".to_string(),
        format!(
            "---\ntitle: Harbour ledger\n---\n# Harbour ledger\n\n{}\n\n{NEEDLE}\n\n{}\n",
            filler(1, before),
            filler(2, words - before)
        ),
    )];
    for i in 0..40 {
        let mention = if i % 5 == 0 {
            " The lighthouse keeper rows to the pier."
        } else {
            ""
        };
        files.push((
            format!("other/note-{i:02}.md"),
            format!(
                "---\ntitle: Log {i}\n---\n{}{mention}\n\n{}\n",
                filler(10 + i, 300),
                filler(100 + i, 2500)
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    world.vault(&format!("needle-{}", (depth * 100.0) as u32), &refs)
}

/// The vault opened with its index in `dir` and no semantic arm.
fn open_lexical(vault: &std::path::Path, dir: std::path::PathBuf) -> Session {
    Session::open(
        vault,
        &IndexChoice {
            dir: Some(dir),
            progress: Default::default(),
            model: ModelChoice::Off,
            ..IndexChoice::default()
        },
    )
    .unwrap()
}

fn pack(session: &Session, topic: &str, budget: usize) -> ctxpack::Pack {
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
    session.pack(&PackRequest {
        mode: PackMode::Topic(topic.into()),
        ranker: Ranker::Hybrid,
        rank: RankOptions::new(now),
        options: PackOptions::new(budget, Tokenizer::Chars4, now),
        subqueries: Vec::new(),
        backlinks: true,
        filter: Default::default(),
    })
}

#[test]
fn the_needle_is_found_at_any_depth() {
    let world = World::new();
    for depth in [0.25, 0.5, 0.75] {
        let vault = needle_vault(&world, depth);
        let session = open_lexical(&vault, world.path().join(format!("index-{depth}")));
        let pack = pack(
            &session,
            "What colour is the lighthouse keeper's bicycle?",
            2000,
        );
        assert!(pack.actual <= 2000);
        assert!(
            pack.bundle.contains(NEEDLE),
            "needle at {depth} missing:\n{}",
            pack.bundle
        );
        assert_eq!(pack.pages[0].path, "long/ledger.md");
        assert_eq!(pack.pages[0].body_mode, ctxpack::BodyMode::Excerpt);
        assert!(pack.bundle.contains("[…]"));
    }
    // Where far more relevant text exists than fits, the budget is used.
    let vault = needle_vault(&world, 0.5);
    let session = open_lexical(&vault, world.path().join("index-fill"));
    for budget in [1000, 2000, 5000] {
        let pack = pack(&session, "schooner breakwater", budget);
        assert!(pack.actual <= budget);
        assert!(
            pack.actual * 10 >= budget * 9,
            "only {} of {budget} tokens used",
            pack.actual
        );
    }
}

#[test]
fn excerpts_follow_the_query_and_keep_document_order() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[(
            "guide.md",
            "---\ntitle: Guide\nsummary: A long guide.\n---\n# Guide\n\nIntro words about nothing in particular at all.\n\n\
             ## Part one\n\nAlpha filler sentence here. The zebra sleeps standing up. More alpha filler.\n\n\
             ## Part two\n\nBeta filler sentence. Gamma filler sentence. Delta filler sentence.\n\n\
             ## Part three\n\nA zebra herd crosses the river at dawn. Epsilon filler closes it.\n",
        )],
    );
    let session = open_lexical(&vault, world.path().join("index"));
    let pack = pack(&session, "zebra", 110);
    let body = pack
        .bundle
        .split("summary: A long guide.\n\n")
        .nth(1)
        .expect("a body");
    assert_eq!(
        body,
        "[…]\n\n## Part one\n\nAlpha filler sentence here. The zebra sleeps standing up. More alpha filler.\n\n## Part two\n\n[…] Delta filler sentence.\n\n## Part three\n\nA zebra herd crosses the river at dawn. […]\n"
    );
    // The matching sentences come first, then their neighbours, nearest
    // first: a smaller budget keeps only the matches.
    let pack = super_small(&session);
    assert!(
        pack.bundle
            .contains("[…] The zebra sleeps standing up. […]"),
        "{}",
        pack.bundle
    );
    assert!(
        pack.bundle
            .contains("A zebra herd crosses the river at dawn. […]")
    );
    assert!(!pack.bundle.contains("filler"));
    assert!(pack.actual <= 110);
}

fn super_small(session: &Session) -> ctxpack::Pack {
    pack(session, "zebra", 90)
}

fn cli_pack(world: &World, vault: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = world.pack(vault, &[args, &["--format", "json"]].concat());
    serde_json::from_str(&common::ok(&out)).unwrap()
}

fn paths(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn subqueries_get_coverage_slots_and_a_trace() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let pack = cli_pack(
        &world,
        &vault,
        &[
            "raft",
            "--subquery",
            "How are transactions committed across shards?",
            "--subquery",
            "  RAFT ",
            "--subquery",
            "who described paxos",
            "--subquery",
            "zzzz qqqq",
            "--budget",
            "3000",
        ],
    );
    let pages = paths(&pack["pages"]);
    // The topic's best hit, then each subquery's best new hit.
    assert_eq!(
        pages[..3],
        [
            "concepts/raft.md",
            "concepts/two-phase-commit.md",
            "concepts/paxos.md"
        ]
    );
    let research = &pack["research"];
    assert_eq!(research["strategy"], "coverage_slots");
    let queries: Vec<&str> = research["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["query"].as_str().unwrap())
        .collect();
    // "  RAFT " repeats the topic (ignoring case and spaces) and is dropped.
    assert_eq!(
        queries,
        [
            "raft",
            "How are transactions committed across shards?",
            "who described paxos",
            "zzzz qqqq"
        ]
    );
    assert_eq!(research["no_hits"], serde_json::json!(["zzzz qqqq"]));
    assert_eq!(
        research["queries"][1]["contributed"][0],
        "concepts/two-phase-commit.md"
    );
    let out = world.pack(
        &vault,
        &[
            "raft",
            "--subquery",
            "a",
            "--subquery",
            "b",
            "--subquery",
            "c",
            "--subquery",
            "d",
            "--subquery",
            "e",
            "--subquery",
            "f",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(common::stderr(&out).contains("at most 5 subqueries, got 6"));
}

#[test]
fn backlinks_follow_the_top_pages_inside_the_budget() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let pack = cli_pack(&world, &vault, &["quorum", "--budget", "3000"]);
    let top = &pack["pages"][0];
    assert_eq!(top["path"], "concepts/quorum.md");
    let lines: Vec<&str> = top["backlinks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "- [[concepts/leader-election]]: A leader needs votes from a [[concepts/quorum]], so two leaders of the same term cannot exist.",
            "- [[concepts/paxos]]: Any two majorities intersect, so a chosen value can never be replaced; see [[concepts/quorum]].",
            "- [[concepts/raft]]: An entry is committed once a [[concepts/quorum|majority]] of servers store it.",
        ]
    );
    let bundle = pack["bundle"].as_str().unwrap();
    assert!(bundle.contains(&format!("backlinks:\n{}\n", lines.join("\n"))));
    assert!(pack["parts"]["backlinks"].as_u64().unwrap() > 0);
    let without = cli_pack(
        &world,
        &vault,
        &["quorum", "--budget", "3000", "--no-backlinks"],
    );
    assert!(!without["bundle"].as_str().unwrap().contains("backlinks:"));
    assert_eq!(without["parts"]["backlinks"], 0);
    // A tiny budget has no room for them, and stays within it.
    let tiny = cli_pack(&world, &vault, &["quorum", "--budget", "150"]);
    assert!(tiny["actual"].as_u64().unwrap() <= 150);
}

#[test]
fn recent_dailies_come_after_the_pages_newest_first() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let pack = cli_pack(
        &world,
        &vault,
        &["paxos", "--dailies", "5", "--budget", "4000"],
    );
    assert_eq!(
        paths(&pack["dailies"]),
        ["journal/2026-05-14.md", "journal/2026-05-12.md"]
    );
    let bundle = pack["bundle"].as_str().unwrap();
    let first_daily = bundle.find("## [[journal/2026-05-14]] (daily, ~").unwrap();
    assert!(bundle.find("## [[concepts/paxos]]").unwrap() < first_daily);
    assert!(bundle.contains("Follow-ups"), "daily content is included");
    assert!(pack["parts"]["dailies"].as_u64().unwrap() > 0);
    // A daily already among the pages is not repeated.
    let crdt = cli_pack(&world, &vault, &["crdt", "--dailies", "2"]);
    assert!(paths(&crdt["pages"]).contains(&"journal/2026-05-14.md".to_string()));
    assert_eq!(paths(&crdt["dailies"]), ["journal/2026-05-12.md"]);
    // A daily the ranking found but the pages had no room for is still one
    // of the dailies asked for.
    let crowded = cli_pack(
        &world,
        &vault,
        &[
            "raft",
            "--subquery",
            "leader election",
            "--dailies",
            "2",
            "--budget",
            "1200",
        ],
    );
    assert!(paths(&crowded["pages"]).contains(&"journal/2026-05-12.md".to_string()));
    assert_eq!(paths(&crowded["dailies"]), ["journal/2026-05-14.md"]);
    assert!(
        paths(&crowded["dropped"])
            .iter()
            .all(|p| !p.starts_with("journal/"))
    );
    assert!(crowded["actual"].as_u64().unwrap() <= 1200);
    // A topic nothing matches still gets the dailies asked for.
    let unmatched = cli_pack(&world, &vault, &["zzzqqq", "--dailies", "2"]);
    assert!(paths(&unmatched["pages"]).is_empty());
    assert_eq!(
        paths(&unmatched["dailies"]),
        ["journal/2026-05-14.md", "journal/2026-05-12.md"]
    );
    assert!(
        unmatched["bundle"]
            .as_str()
            .unwrap()
            .contains("| Pages: 0 / 0\n")
    );
    let out = world.pack(&vault, &["paxos", "--dailies", "31"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn notes_beyond_the_candidates_are_reported_below_threshold() {
    let world = World::new();
    let files: Vec<(String, String)> = (0..25)
        .map(|i| {
            (
                format!("n{i:02}.md"),
                format!("---\ntitle: Note {i}\n---\nThe walrus rests on the ice, note {i}.\n"),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let vault = world.vault("vault", &refs);
    let pack = cli_pack(&world, &vault, &["walrus", "--budget", "100000"]);
    assert_eq!(pack["candidates"], 20);
    assert_eq!(pack["pages"].as_array().unwrap().len(), 20);
    assert_eq!(pack["below_threshold"], 5);
    let below: Vec<&serde_json::Value> = pack["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"] == "below_threshold")
        .collect();
    assert_eq!(below.len(), 5);
}

#[test]
fn a_long_top_page_does_not_fill_a_small_pack_alone() {
    // The long note ranks first (its title is the query), but beyond its one
    // matching sentence it is filler: the other notes' matching sentences
    // are worth more than its context.
    let world = World::new();
    // Filler cut into short sentences, so that its context competes
    // sentence by sentence.
    let sentences = |seed: u64, words: usize| -> String {
        filler(seed, words)
            .split(". ")
            .map(|s| {
                let mut chars = s.chars();
                chars.next().map_or(String::new(), |c| {
                    c.to_uppercase().chain(chars).collect::<String>()
                })
            })
            .collect::<Vec<_>>()
            .join(". ")
    };
    let long = format!(
        "---\ntitle: Lantern\n---\n# Lantern\n\nThe lantern hangs by the door.\n\n{}",
        sentences(1, 6_000)
    );
    let short = |n: u64, fact: &str| {
        format!(
            "---\nsummary: Harbour notes, part {n}.\n---\n# Note {n}\n\n{}\n\n{fact}\n\n{}",
            sentences(n + 10, 40),
            sentences(n + 20, 40)
        )
    };
    let (a, b, c) = (
        short(1, "A brass lantern lights the quay at night."),
        short(2, "Each lantern on the pier burns whale oil."),
        short(3, "The lantern room was rebuilt after the storm."),
    );
    let vault = world.vault(
        "long-page",
        &[
            ("lantern.md", long.as_str()),
            ("a.md", a.as_str()),
            ("b.md", b.as_str()),
            ("c.md", c.as_str()),
        ],
    );
    let session = open_lexical(&vault, world.path().join("index"));
    let pack = pack(&session, "lantern", 600);
    assert!(pack.actual <= 600);
    assert_eq!(pack.pages[0].path, "lantern.md");
    for fact in [
        "The lantern hangs by the door.",
        "A brass lantern lights the quay at night.",
        "Each lantern on the pier burns whale oil.",
        "The lantern room was rebuilt after the storm.",
    ] {
        assert!(
            pack.bundle.contains(fact),
            "{fact} missing:\n{}",
            pack.bundle
        );
    }
}

#[test]
fn repeated_sentences_are_shown_once_and_a_page_of_repeats_says_so() {
    let world = World::new();
    let shared = "The tide gauge at the north pier records every six minutes.";
    let first = format!(
        "---\nsummary: Harbour instruments.\n---\n# Gauge\n\nInstalled in spring. {shared}\n"
    );
    let copy = format!("---\nsummary: Copied notes.\n---\n# Gauge copy\n\n{shared}\n");
    let vault = world.vault(
        "repeats",
        &[("gauge.md", first.as_str()), ("copy.md", copy.as_str())],
    );
    let session = open_lexical(&vault, world.path().join("index"));
    let mut duplicates = 0;
    for budget in (40..200).step_by(4) {
        let pack = pack(&session, "tide gauge north pier", budget);
        assert!(pack.bundle.matches(shared).count() <= 1, "{}", pack.bundle);
        for dropped in &pack.dropped {
            if dropped.path == "copy.md" && pack.bundle.contains(shared) {
                assert_eq!(dropped.reason, "duplicate", "{}", pack.bundle);
                duplicates += 1;
            }
        }
    }
    assert!(
        duplicates > 0,
        "some budget leaves the copy out as a duplicate"
    );
}

#[test]
fn a_lead_in_keeps_the_block_it_introduces() {
    let world = World::new();
    let remarks: String = (0..40)
        .map(|i| format!("Image delete remark {i} is here. "))
        .collect();
    let text = format!(
        "---\ntitle: Images\n---\n# Images\n\nNotes on container images.\n\n\
         ## Cleaning up\n\n{remarks}To delete an image:\n\n```\ndocker rmi NAME\n```\n"
    );
    let vault = world.vault("vault", &[("images.md", text.as_str())]);
    let session = open_lexical(&vault, world.path().join("index"));
    let pack = pack(&session, "delete docker image", 160);
    assert!(pack.actual <= 160);
    assert!(
        pack.bundle
            .contains("To delete an image:\n\n```\ndocker rmi NAME\n```"),
        "{}",
        pack.bundle
    );
}

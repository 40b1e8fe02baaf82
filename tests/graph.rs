//! Links as context: note-anchored packs (`pack --note`) and graph
//! neighbourhoods in topic packs (`--graph-depth`), with hubs suppressed.

mod common;

use common::{World, fails, ok};
use serde_json::Value;

/// A small linked vault, written for these tests. Around `notes/Raft.md`:
/// it links to Leader election and Log replication (one hop), Leader
/// election links to Terms (two hops), etcd links to Raft (a backlink),
/// Paxos is about the same things without a link, Gardening is unrelated.
const LINKED: &[(&str, &str)] = &[
    (
        "notes/Raft.md",
        "Raft is a consensus protocol: a leader appends entries to a replicated log \
         and a quorum of followers acknowledges them.\n\n\
         See [[Leader election]] for how the leader is chosen and \
         [[Log replication]] for how entries reach the followers.\n",
    ),
    (
        "notes/Leader election.md",
        "A follower that hears no heartbeat becomes a candidate, increments its \
         term and asks for votes; see [[Terms]].\n",
    ),
    (
        "notes/Log replication.md",
        "The leader sends append requests; an entry is committed once a quorum \
         stores it.\n",
    ),
    (
        "notes/Terms.md",
        "A term is a logical clock: every election starts a new one.\n",
    ),
    (
        "notes/etcd.md",
        "etcd stores cluster state and replicates it with [[Raft]] consensus.\n",
    ),
    (
        "notes/Paxos.md",
        "Paxos reaches consensus on a replicated log with proposers, acceptors \
         and a quorum of ballots; a leader makes it faster.\n",
    ),
    (
        "notes/Gardening.md",
        "Tomatoes want sun, water and patience.\n",
    ),
    (
        "notes/Diary.md",
        "---\nprivate: true\n---\nMy private thoughts on [[Raft]] consensus and quorum logs.\n",
    ),
    (
        "_raw/Raft draft.md",
        "A raw draft about Raft consensus, never packed.\n",
    ),
];

fn json_pack(world: &World, vault: &std::path::Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    serde_json::from_str(&ok(&world.pack(vault, &all))).unwrap()
}

fn pages(pack: &Value) -> Vec<String> {
    pack["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_note_pack_shows_the_note_its_links_and_backlinks() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    let out = ok(&world.pack(&vault, &["--note", "notes/Raft.md", "--budget", "600"]));
    insta::assert_snapshot!(out);
}

#[test]
fn depth_decides_how_far_the_links_go() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    let at = |depth: &str| {
        let pack = json_pack(
            &world,
            &vault,
            &["--note", "notes/Raft.md", "--depth", depth],
        );
        let linked: Vec<(String, u64)> = pack["graph"]["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["path"].as_str().unwrap().to_string(),
                    n["hops"].as_u64().unwrap(),
                )
            })
            .collect();
        (pages(&pack), linked)
    };
    let (pages0, linked0) = at("0");
    assert!(linked0.is_empty());
    assert_eq!(pages0[0], "notes/Raft.md", "the note itself comes first");
    assert!(pages0.contains(&"notes/Paxos.md".to_string()), "{pages0:?}");
    assert!(!pages0.contains(&"notes/Gardening.md".to_string()));

    let (_, linked1) = at("1");
    assert_eq!(
        linked1,
        vec![
            ("notes/Log replication.md".to_string(), 1),
            ("notes/etcd.md".to_string(), 1),
            ("notes/Leader election.md".to_string(), 1),
        ]
    );
    let (pages2, linked2) = at("2");
    assert!(
        linked2.contains(&("notes/Terms.md".to_string(), 2)),
        "{linked2:?}"
    );
    assert!(pages2.contains(&"notes/Terms.md".to_string()));
    for pages in [&pages0, &pages2] {
        assert!(
            !pages
                .iter()
                .any(|p| p.contains("Diary") || p.starts_with("_raw"))
        );
    }
}

#[test]
fn no_self_leaves_the_note_out() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    let with = json_pack(&world, &vault, &["--note", "notes/Raft", "--depth", "1"]);
    let without = json_pack(
        &world,
        &vault,
        &["--note", "notes/Raft", "--depth", "1", "--no-self"],
    );
    assert_eq!(with["mode"], "note");
    assert_eq!(pages(&with)[0], "notes/Raft.md");
    assert!(!pages(&without).contains(&"notes/Raft.md".to_string()));
    assert_eq!(pages(&without)[..], pages(&with)[1..]);
    assert_eq!(with["topic"], "around Raft (notes/Raft.md)");
}

#[test]
fn a_note_pack_is_deterministic_and_never_over_budget() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    for budget in ["40", "120", "300", "2000"] {
        let args = [
            "--note",
            "notes/Raft.md",
            "--depth",
            "2",
            "--budget",
            budget,
        ];
        let first = json_pack(&world, &vault, &args);
        let second = json_pack(&world, &vault, &args);
        assert_eq!(first["bundle"], second["bundle"]);
        assert!(first["actual"].as_u64().unwrap() <= budget.parse().unwrap());
    }
}

#[test]
fn notes_outside_the_vault_or_hidden_are_refused() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    common::write(
        &world.path().join("outside.md"),
        b"Raft outside the vault.\n",
    );
    let outside = world.path().join("outside.md");
    for given in [
        "../outside.md",
        outside.to_str().unwrap(),
        "notes/Diary.md",
        "_raw/Raft draft.md",
        "notes/Missing.md",
        "log.md",
        " ",
    ] {
        let out = world.pack(&vault, &["--note", given]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{given}: {}",
            common::stderr(&out)
        );
        assert!(common::stdout(&out).is_empty());
    }
    fails(
        &world.pack(&vault, &["--note", "notes/Diary.md"]),
        2,
        "no note 'notes/Diary.md' in the vault",
    );
    fails(
        &world.pack(&vault, &["--note", "../outside.md"]),
        2,
        "leads outside the vault",
    );
    // An absolute path inside the vault is fine.
    let inside = vault.join("notes/Raft.md");
    let pack = json_pack(&world, &vault, &["--note", inside.to_str().unwrap()]);
    assert_eq!(pages(&pack)[0], "notes/Raft.md");
    // Options that only make sense with a note, or without one.
    fails(&world.pack(&vault, &["raft", "--no-self"]), 2, "--note");
    fails(
        &world.pack(&vault, &["--note", "notes/Raft.md", "raft"]),
        2,
        "cannot be used with",
    );
    fails(
        &world.pack(&vault, &["--note", "notes/Raft.md", "--depth", "4"]),
        2,
        "depth must be between 0 and 3",
    );
}

/// A vault with a hub: 24 notes each link to `Home`, which links back to
/// them all; the topic's best note links to the hub and to one detail.
fn hub_vault(world: &World) -> std::path::PathBuf {
    let mut files: Vec<(String, String)> = (0..24)
        .map(|i| {
            (
                format!("topics/t{i:02}.md"),
                format!("Topic {i} is about its own subject. Back to [[Home]].\n"),
            )
        })
        .collect();
    files.push((
        "Home.md".into(),
        (0..24).map(|i| format!("- [[t{i:02}]]\n")).collect(),
    ));
    files.push((
        "zebra.md".into(),
        "Zebras have stripes. See [[stripe patterns]] and the [[Home]].\n".into(),
    ));
    files.push((
        "stripe patterns.md".into(),
        "Each stripe pattern is unique to one animal.\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    world.vault("hub", &refs)
}

#[test]
fn hubs_are_not_expanded() {
    let world = World::new();
    let vault = hub_vault(&world);
    let plain = json_pack(&world, &vault, &["zebras"]);
    assert!(plain.get("graph").is_none());
    assert_eq!(pages(&plain), vec!["zebra.md"]);
    for depth in ["1", "2"] {
        let pack = json_pack(&world, &vault, &["zebras", "--graph-depth", depth]);
        assert_eq!(pack["graph"]["hubs"], serde_json::json!(["Home.md"]));
        assert_eq!(pack["graph"]["hub_threshold"], 20);
        let added: Vec<&str> = pack["graph"]["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["path"].as_str().unwrap())
            .collect();
        assert_eq!(added, vec!["stripe patterns.md"], "depth {depth}");
        assert_eq!(pages(&pack), vec!["zebra.md", "stripe patterns.md"]);
    }
    // Following only incoming links, nothing links to the best note.
    let incoming = json_pack(
        &world,
        &vault,
        &["zebras", "--graph-depth", "1", "--graph-direction", "in"],
    );
    assert_eq!(pages(&incoming), vec!["zebra.md"]);
}

#[test]
fn graph_depth_adds_linked_notes_to_a_topic_pack() {
    let world = World::new();
    let vault = world.vault("linked", LINKED);
    let plain = json_pack(&world, &vault, &["heartbeat candidate votes"]);
    let expanded = json_pack(
        &world,
        &vault,
        &["heartbeat candidate votes", "--graph-depth", "1"],
    );
    assert!(!pages(&plain).contains(&"notes/Terms.md".to_string()));
    let neighbours = &expanded["graph"]["neighbours"];
    assert_eq!(neighbours[0]["via"], "notes/Leader election.md");
    assert!(pages(&expanded).contains(&"notes/Terms.md".to_string()));
    fails(
        &world.pack(
            &vault,
            &["raft", "--graph-depth", "1", "--ranker", "frontmatter"],
        ),
        2,
        "hybrid ranker",
    );
    fails(
        &world.pack(
            &vault,
            &["raft", "--graph-depth", "1", "--graph-direction", "up"],
        ),
        2,
        "direction must be out, in or both",
    );
}

/// Links written in properties (`author: "[[Kevin Kelly]]"`, as kepano's
/// vault and many others write them) are links: the note they point to
/// gets the linking note as a neighbour and a backlink reading the
/// property as a reader sees it.
#[test]
fn links_in_properties_are_links_and_backlinks() {
    let world = World::new();
    let vault = world.vault(
        "properties",
        &[
            (
                "People/Kevin Kelly.md",
                "Kevin Kelly writes about technology and culture.\n",
            ),
            (
                "Books/Out of Control.md",
                "---\nauthor: \"[[Kevin Kelly]]\"\ngenre: [Nonfiction]\nyear: 1994\n---\n\
                 A book about decentralised systems and emergent behaviour.\n",
            ),
            (
                "Books/Unquoted.md",
                "---\nauthor: [[Kevin Kelly]]\n---\nYAML reads the unquoted link as a list.\n",
            ),
            ("Gardening.md", "Tomatoes want sun.\n"),
        ],
    );
    let pack = json_pack(&world, &vault, &["--note", "People/Kevin Kelly.md"]);
    let neighbours: Vec<&str> = pack["graph"]["neighbours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(neighbours, ["Books/Out of Control.md"]);

    let topic = ok(&world.pack(&vault, &["Kevin Kelly", "--budget", "2000"]));
    assert!(
        topic.contains("- [[Books/Out of Control]]: author: Kevin Kelly\n"),
        "{topic}"
    );
    // The unquoted link is no link (no backlink entry), though its value
    // reads `Kevin Kelly` and is searched as such.
    assert!(!topic.contains("- [[Books/Unquoted]]"), "{topic}");
}

/// A long note asked for takes at most half the budget while the notes
/// around it want the rest (here they want more than half), and shows its
/// shape: each section's opening, down to the last section, rather than
/// its first sections whole.
#[test]
fn a_long_anchor_takes_half_the_budget_as_an_outline() {
    let world = World::new();
    let mut long = String::from(
        "# Handbook\n\nA handbook of the harbour, linking [[Tides]] and [[Pilots]].\n\n",
    );
    for section in 1..=12 {
        long.push_str(&format!(
            "## Part {section}\n\nOpening sentence of part {section} about the harbour.\n\n"
        ));
        for line in 0..6 {
            long.push_str(&format!(
                "Detail {line} of part {section}: berths, buoys, cranes and harbour ropes in order.\n\n"
            ));
        }
    }
    let neighbour = |name: &str| {
        let lines: String = (0..24)
            .map(|i| format!("{name} berth {i} of the harbour opens at hour {i} with crane {i}. "))
            .collect();
        format!(
            "# {name}\n\nThe {name} of the harbour, as the [[Handbook]] describes them. {lines}\n"
        )
    };
    let (tides, pilots) = (neighbour("Tides"), neighbour("Pilots"));
    let vault = world.vault(
        "harbour",
        &[
            ("Handbook.md", &long),
            ("Tides.md", &tides),
            ("Pilots.md", &pilots),
        ],
    );
    let budget = 1200;
    let pack = json_pack(
        &world,
        &vault,
        &["--note", "Handbook.md", "--budget", &budget.to_string()],
    );
    assert_eq!(pages(&pack)[0], "Handbook.md", "{pack}");
    assert!(pages(&pack).contains(&"Tides.md".to_string()), "{pack}");
    assert!(pages(&pack).contains(&"Pilots.md".to_string()), "{pack}");
    let anchor = &pack["pages"][0];
    assert!(anchor["tokens"].as_u64().unwrap() <= budget / 2, "{anchor}");
    let body = pack["bundle"].as_str().unwrap();
    assert!(
        body.contains("Opening sentence of part 12 about the harbour."),
        "the last section's opening: {body}"
    );
    assert!(!body.contains("Detail 5 of part 1:"), "{body}");
}

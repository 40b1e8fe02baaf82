//! The persistent index: incremental updates, recovery, crash safety,
//! concurrency, query robustness and the ranking pipeline.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use common::{World, ok, stderr, stdout};
use ctxpack::RankOptions;
use ctxpack::{IndexChoice, ModelChoice, SearchRequest, Session};
use ctxpack::{IndexConfig, VaultIndex};

fn search_paths(world: &World, vault: &Path, index: &Path, query: &str) -> Vec<String> {
    let out = world
        .cmd()
        .args([
            "search", query, "--format", "files", "--limit", "50", "--vault",
        ])
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .output()
        .unwrap();
    ok(&out).lines().map(str::to_string).collect()
}

fn index_cmd(world: &World, vault: &Path, index: &Path, extra: &[&str]) -> std::process::Output {
    world
        .cmd()
        .arg("index")
        .args(extra)
        .arg("--vault")
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .output()
        .unwrap()
}

fn note(title: &str, body: &str) -> String {
    format!("---\ntitle: {title}\n---\n{body}\n")
}

#[test]
fn incremental_updates_follow_edits_adds_deletes_and_renames() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "a.md",
                &note("Alpha", "The zebra crossing is painted white."),
            ),
            ("b.md", &note("Beta", "Giraffes eat acacia leaves.")),
            ("c.md", &note("Gamma", "Penguins cannot fly.")),
        ],
    );
    let index = world.path().join("index");
    let first = stdout(&index_cmd(&world, &vault, &index, &[]));
    assert!(first.contains("3 notes"), "{first}");
    assert!(
        first.contains("3 added, 0 changed, 0 removed, 0 unchanged"),
        "{first}"
    );
    assert_eq!(search_paths(&world, &vault, &index, "zebra"), ["a.md"]);

    // A no-op update changes nothing.
    let again = stdout(&index_cmd(&world, &vault, &index, &[]));
    assert!(
        again.contains("0 added, 0 changed, 0 removed, 3 unchanged"),
        "{again}"
    );

    // Edit: the term moves from a.md to b.md.
    fs::write(vault.join("a.md"), note("Alpha", "Nothing striped here.")).unwrap();
    fs::write(
        vault.join("b.md"),
        note("Beta", "A zebra ate acacia leaves."),
    )
    .unwrap();
    assert_eq!(search_paths(&world, &vault, &index, "zebra"), ["b.md"]);
    // Add.
    fs::write(vault.join("d.md"), note("Delta", "Zebra herds migrate.")).unwrap();
    let mut hits = search_paths(&world, &vault, &index, "zebra");
    hits.sort();
    assert_eq!(hits, ["b.md", "d.md"]);
    // Delete.
    fs::remove_file(vault.join("b.md")).unwrap();
    assert_eq!(search_paths(&world, &vault, &index, "zebra"), ["d.md"]);
    // Rename.
    fs::rename(vault.join("d.md"), vault.join("renamed.md")).unwrap();
    assert_eq!(
        search_paths(&world, &vault, &index, "zebra"),
        ["renamed.md"]
    );
    let status = stdout(&index_cmd(&world, &vault, &index, &[]));
    assert!(status.contains("3 notes"), "{status}");

    // The log line a pack appends (to an existing log.md) is not a change
    // to the vault.
    fs::write(vault.join("log.md"), "# Wiki Log\n\n").unwrap();
    let out = world
        .cmd()
        .args(["pack", "zebra", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    ok(&out);
    assert!(
        fs::read_to_string(vault.join("log.md"))
            .unwrap()
            .contains("CONTEXT_PACK")
    );
    let after_log = stdout(&index_cmd(&world, &vault, &index, &[]));
    assert!(
        after_log.contains("0 added, 0 changed, 0 removed, 3 unchanged"),
        "{after_log}"
    );

    // Touching a file without changing it is confirmed by its hash.
    let text = fs::read_to_string(vault.join("c.md")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    fs::write(vault.join("c.md"), text).unwrap();
    let touched = stdout(&index_cmd(&world, &vault, &index, &[]));
    assert!(
        touched.contains("0 added, 0 changed, 0 removed, 3 unchanged"),
        "{touched}"
    );
}

#[test]
fn the_index_lives_outside_the_vault() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let before = listing(&vault);
    let out = world
        .cmd()
        .args(["search", "raft", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(listing(&vault), before, "the vault was modified");
    let cache = world.home().join(".cache/ctxpack");
    let dirs: Vec<_> = fs::read_dir(&cache).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 1);
    assert!(dirs[0].file_name().to_string_lossy().starts_with("vault-"));
    // CTXPACK_INDEX_DIR moves it.
    let custom = world.path().join("custom-index");
    let out = world
        .cmd()
        .env("CTXPACK_INDEX_DIR", &custom)
        .args(["status", "--format", "json", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(status["index"].as_str().unwrap(), custom.to_str().unwrap());
    assert_eq!(status["notes"], 20);
    assert!(status["sections"].as_u64().unwrap() > 20);
    assert_eq!(status["arms"]["bm25"], "available");
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in common::files_under(dir) {
        let bytes = fs::read(&entry).unwrap_or_default();
        out.push((
            entry.strip_prefix(dir).unwrap().display().to_string(),
            bytes,
        ));
    }
    out.sort();
    out
}

#[test]
fn another_format_version_is_rebuilt() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let meta = index.join("tantivy/meta.json");
    let text = fs::read_to_string(&meta).unwrap();
    assert!(text.contains("\\\"format\\\":11"), "{text}");
    fs::write(&meta, text.replace("\\\"format\\\":11", "\\\"format\\\":0")).unwrap();
    let out = index_cmd(&world, &vault, &index, &[]);
    ok(&out);
    assert!(
        stderr(&out).contains("rebuilt the index (the index is in format 0"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        search_paths(&world, &vault, &index, "paxos")[0],
        "concepts/paxos.md"
    );
}

/// The catalog blob of the index at `index`.
fn catalog_blob(index: &Path) -> PathBuf {
    fs::read_dir(index)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("catalog-") && name.ends_with(".bin")
        })
        .unwrap()
}

/// Dates `blob`'s last write an hour back, so a passed check is remembered.
fn settle(blob: &Path) {
    fs::File::options()
        .write(true)
        .open(blob)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

#[test]
fn a_checked_catalog_is_trusted_only_while_its_file_is_unchanged() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let catalog = catalog_blob(&index);
    let marker = catalog.with_extension("checked");
    // Just written: not trusted yet, whatever a check finds.
    ok(&index_cmd(&world, &vault, &index, &[]));
    assert!(!marker.exists());
    // Settled (last written an hour ago): the next check is remembered.
    settle(&catalog);
    ok(&index_cmd(&world, &vault, &index, &[]));
    assert!(marker.exists());
    // Damaged in place, same size, still decodable: a title changes.
    let mut bytes = fs::read(&catalog).unwrap();
    let at = bytes.windows(5).position(|w| w == b"Paxos").unwrap();
    bytes[at + 4] = b'z';
    fs::write(&catalog, &bytes).unwrap();
    let out = index_cmd(&world, &vault, &index, &[]);
    ok(&out);
    assert!(stderr(&out).contains("damaged"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rebuilt the index"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_fifo_in_place_of_the_checked_marker_neither_blocks_nor_counts() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let catalog = catalog_blob(&index);
    settle(&catalog);
    let marker = catalog.with_extension("checked");
    let c_path = std::ffi::CString::new(marker.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let mut child = world
        .cmd()
        .args(["search", "paxos", "--format", "files", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("search blocked on a FIFO marker");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some("concepts/paxos.md")
    );
}

#[test]
fn a_damaged_index_is_rebuilt() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    // A corrupted catalog.
    for entry in fs::read_dir(&index).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("catalog-") {
            fs::write(entry.path(), b"garbage").unwrap();
        }
    }
    let out = index_cmd(&world, &vault, &index, &[]);
    ok(&out);
    assert!(
        stderr(&out).contains("rebuilt the index"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("damaged"), "{}", stderr(&out));
    assert_eq!(
        search_paths(&world, &vault, &index, "paxos")[0],
        "concepts/paxos.md"
    );
    // A full-text index with its files gone.
    for entry in fs::read_dir(index.join("tantivy")).unwrap().flatten() {
        if entry.file_name() != "meta.json" {
            let _ = fs::remove_file(entry.path());
        }
    }
    let out = world
        .cmd()
        .args(["search", "paxos", "--format", "files", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    assert_eq!(ok(&out).lines().next(), Some("concepts/paxos.md"));
    // An index of another vault in the same folder.
    let other = world.vault("other", &[("x.md", &note("X", "paxos elsewhere"))]);
    let out = index_cmd(&world, &other, &index, &[]);
    assert!(
        stderr(&out).contains("belongs to another vault"),
        "{}",
        stderr(&out)
    );
    assert_eq!(search_paths(&world, &other, &index, "paxos"), ["x.md"]);
}

fn big_vault(world: &World, notes: usize) -> std::path::PathBuf {
    let root = world.path().join("big");
    fs::create_dir_all(&root).unwrap();
    for i in 0..notes {
        let words: String = (0..400)
            .map(|w| format!("word{} ", (i * 7 + w * 13) % 997))
            .collect();
        fs::write(
            root.join(format!("n{i:05}.md")),
            format!("---\ntitle: Note {i}\ntags: [t{}]\n---\n# Note {i}\n\n{words}\n\n## Part\n\nunique{i} text\n", i % 10),
        )
        .unwrap();
    }
    root
}

#[test]
fn killing_the_indexer_never_leaves_a_broken_index() {
    let world = World::new();
    let vault = big_vault(&world, 1500);
    let index = world.path().join("index");
    let bin = env!("CARGO_BIN_EXE_ctxpack");
    for delay_ms in [5u64, 40, 120, 300, 700] {
        let mut child = Command::new(bin)
            .args(["index", "--rebuild", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // Whatever state the kill left, the next call works and is complete.
        let out = world
            .cmd()
            .args(["search", "unique777", "--format", "files", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap();
        assert_eq!(
            ok(&out).lines().next(),
            Some("n00777.md"),
            "after a kill at {delay_ms} ms"
        );
        let status: serde_json::Value = serde_json::from_str(&ok(&world
            .cmd()
            .args(["status", "--format", "json", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap()))
        .unwrap();
        assert_eq!(status["notes"], 1500, "after a kill at {delay_ms} ms");
    }
}

/// Appends a line holding `word` to 60 notes of a `big_vault` of `notes`
/// notes (a different 60 for each `round`); their paths, sorted.
fn append_to_notes(vault: &Path, notes: usize, round: usize, word: &str) -> Vec<String> {
    let mut changed: Vec<String> = (0..60)
        .map(|i| format!("n{:05}.md", (round * 7 + i * 25) % notes))
        .collect();
    for path in &changed {
        let mut text = fs::read_to_string(vault.join(path)).unwrap();
        text.push_str(&format!("\nan appended line with {word} in it\n"));
        fs::write(vault.join(path), text).unwrap();
    }
    changed.sort();
    changed
}

/// When a test kills an indexer.
#[derive(Clone, Copy, Debug)]
enum Kill {
    After(Duration),
    /// As soon as a delete file of the commit appears: tantivy writes them
    /// just before `meta.json`, so the kill lands inside the commit.
    AtTheCommit,
}

/// Starts `ctxpack index` and SIGKILLs it at `kill`.
fn kill_an_update(vault: &Path, index: &Path, kill: Kill) {
    let tantivy = index.join("tantivy");
    let before = tantivy_files(index);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxpack"))
        .args(["index", "--vault"])
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    match kill {
        Kill::After(delay) => std::thread::sleep(delay),
        Kill::AtTheCommit => {
            while child.try_wait().unwrap().is_none() {
                let new_delete_file = fs::read_dir(&tantivy).unwrap().flatten().any(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".del") && !before.contains(&name)
                });
                if new_delete_file {
                    break;
                }
            }
        }
    }
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

#[test]
fn killing_an_incremental_update_never_breaks_later_updates() {
    let world = World::new();
    let notes = 1500;
    let vault = big_vault(&world, notes);
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let mut kills = vec![Kill::AtTheCommit; 4];
    kills.extend(
        [
            5u64, 15, 25, 35, 50, 65, 80, 100, 120, 150, 180, 220, 270, 350,
        ]
        .map(|ms| Kill::After(Duration::from_millis(ms))),
    );
    for (round, kill) in kills.into_iter().enumerate() {
        let word = format!("appended{round}");
        let changed = append_to_notes(&vault, notes, round, &word);
        kill_an_update(&vault, &index, kill);
        // The next call completes the update, with the full text: only
        // the changed notes hold the word, and nothing is reported.
        let out = world
            .cmd()
            .args(["search", &word, "--format", "files", "--limit", "100"])
            .arg("--vault")
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap();
        let mut found: Vec<String> = ok(&out).lines().map(str::to_string).collect();
        found.sort();
        assert_eq!(found, changed, "after a kill {kill:?}");
        assert_eq!(stderr(&out), "", "after a kill {kill:?}");
    }
}

/// The files of the full-text index in `index`.
fn tantivy_files(index: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(index.join("tantivy"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn copy_folder(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &to.join(entry.file_name()));
        } else {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn library_search(index: &VaultIndex, text: &str) -> Vec<String> {
    index
        .search_notes(text, 10)
        .unwrap()
        .into_iter()
        .map(|(note, _)| index.catalog.metas[note].path.clone())
        .collect()
}

/// The files an update of `index` (for the vault as it now is) writes,
/// found by updating a copy of it.
fn files_an_update_writes(world: &World, root: &Path, index: &Path) -> Vec<String> {
    let copy = world.path().join("index-copy");
    let _ = fs::remove_dir_all(&copy);
    copy_folder(index, &copy);
    let before = tantivy_files(index);
    VaultIndex::open(root, &IndexConfig::new(copy.clone())).unwrap();
    tantivy_files(&copy)
        .into_iter()
        .filter(|name| !before.contains(name) && !name.starts_with('.'))
        .collect()
}

/// A two-note vault indexed, then one note edited: the vault root, the
/// index folder and its config, with an update pending.
fn indexed_then_edited(world: &World) -> (PathBuf, PathBuf, IndexConfig) {
    let vault = world.vault(
        "vault",
        &[
            (
                "a.md",
                &note("Alpha", "The zebra crossing is painted white."),
            ),
            ("b.md", &note("Beta", "Giraffes eat acacia leaves.")),
        ],
    );
    let root = vault.canonicalize().unwrap();
    let index = world.path().join("index");
    let config = IndexConfig::new(index.clone());
    VaultIndex::open(&root, &config).unwrap();
    fs::write(
        vault.join("a.md"),
        note("Alpha", "The zebra crossing is now blue."),
    )
    .unwrap();
    (root, index, config)
}

#[test]
fn files_a_killed_update_left_behind_do_not_stop_the_next_one() {
    let world = World::new();
    let (root, index, config) = indexed_then_edited(&world);
    // What a writer killed just before its commit leaves: the delete file
    // it wrote for the old segment (under the very name the next update
    // writes), and segment files of its own.
    let written = files_an_update_writes(&world, &root, &index);
    assert!(
        written.iter().any(|name| name.ends_with(".del")),
        "{written:?}"
    );
    for name in &written {
        fs::write(index.join("tantivy").join(name), b"half written").unwrap();
    }
    let orphan_segment = "0123456789abcdef0123456789abcdef.idx";
    fs::write(index.join("tantivy").join(orphan_segment), b"orphan").unwrap();
    let (opened, report) = VaultIndex::open(&root, &config).unwrap();
    assert_eq!((report.changed, report.rebuilt), (1, None));
    assert_eq!(library_search(&opened, "blue"), ["a.md"]);
    assert!(!tantivy_files(&index).contains(&orphan_segment.to_string()));
}

#[test]
fn an_update_that_still_fails_rebuilds_the_index() {
    let world = World::new();
    let (root, index, config) = indexed_then_edited(&world);
    // A folder where the update writes its delete file is not removed as a
    // leftover (it is no file tantivy writes), so the update fails.
    let written = files_an_update_writes(&world, &root, &index);
    let delete_file = written.iter().find(|name| name.ends_with(".del")).unwrap();
    fs::create_dir(index.join("tantivy").join(delete_file)).unwrap();
    let (opened, report) = VaultIndex::open(&root, &config).unwrap();
    let reason = report.rebuilt.unwrap_or_default();
    assert!(reason.starts_with("the update failed: "), "{reason}");
    assert_eq!(report.added, 2);
    assert_eq!(library_search(&opened, "blue"), ["a.md"]);
    assert_eq!(library_search(&opened, "giraffes"), ["b.md"]);
}

#[test]
fn readers_and_a_writer_run_at_once() {
    let world = World::new();
    let vault = big_vault(&world, 1000);
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let bin = env!("CARGO_BIN_EXE_ctxpack");
    let started = Instant::now();
    let mut writer = Command::new(bin)
        .args(["index", "--rebuild", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let readers: Vec<_> = (0..6)
        .map(|i| {
            Command::new(bin)
                .args([
                    "search",
                    &format!("unique{}", i * 100),
                    "--format",
                    "files",
                    "--vault",
                ])
                .arg(&vault)
                .arg("--index-dir")
                .arg(&index)
                .env("HOME", world.home())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, reader) in readers.into_iter().enumerate() {
        let out = reader.wait_with_output().unwrap();
        assert!(out.status.success());
        let first = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            first.lines().next(),
            Some(format!("n{:05}.md", i * 100).as_str())
        );
    }
    assert!(writer.wait().unwrap().success());
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "took too long: deadlock?"
    );
    assert_eq!(
        search_paths(&world, &vault, &index, "unique999")[0],
        "n00999.md"
    );
}

#[test]
fn query_text_is_always_literal() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    for query in [
        "\"raft",
        "raft:",
        "title:raft",
        // `-raft` alone is an exclusion with nothing to rank, a usage error
        // (tests/filters.rs); a hyphen elsewhere stays text.
        "raft-",
        "raft AND paxos",
        "raft OR",
        "NOT raft",
        "[raft]",
        "(raft",
        "raft)",
        "{raft}",
        "raft*",
        "raft~2",
        "raft^3",
        "\\raft",
        "a/b",
        "+raft",
        "raft && paxos || x",
        "!",
        "''",
        "🦀 raft",
        "分布式\"事务",
        "* ? :",
    ] {
        let out = world
            .cmd()
            .args(["search", "--format", "json", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .args(["--", query])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
        if query.contains("raft") && !query.contains("paxos") {
            assert_eq!(
                json["hits"][0]["path"], "concepts/raft.md",
                "query {query:?}"
            );
        }
    }
    // Words are combined as a ranked OR, not AND.
    let hits = search_paths(&world, &vault, &index, "penguin raft");
    assert!(hits.contains(&"concepts/raft.md".to_string()));
}

#[test]
fn chinese_queries_find_chinese_notes() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    assert_eq!(
        search_paths(&world, &vault, &index, "分布式事务")[0],
        "concepts/分布式事务.md"
    );
    let hits = search_paths(&world, &vault, &index, "协调者");
    assert_eq!(hits[0], "concepts/分布式事务.md");
    assert_eq!(
        search_paths(&world, &vault, &index, "Region 分裂")[0],
        "entities/tidb.md"
    );
}

/// `query`'s first `limit` hits, through the library, ranked now.
fn search(session: &Session, query: &str, limit: usize) -> ctxpack::SearchResults {
    session.search(&SearchRequest {
        query: query.into(),
        limit,
        rank: RankOptions::new(Utc::now()),
        filter: Default::default(),
    })
}

fn session(vault: &Path, index: &Path) -> Session {
    Session::open(
        vault,
        &IndexChoice {
            dir: Some(index.to_path_buf()),
            progress: Default::default(),
            model: ModelChoice::Off,
            ..IndexChoice::default()
        },
    )
    .unwrap()
}

fn ranked(session: &Session, query: &str, options: &RankOptions) -> Vec<String> {
    session
        .rank(query, options, &|_| true)
        .hits
        .iter()
        .map(|h| session.vault.metas[h.note].path.clone())
        .collect()
}

#[test]
fn recency_rerank_is_a_no_op_at_weight_zero_and_works_above() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("old.md", "---\ntitle: Old\nupdated: 2020-01-01\n---\nlighthouse lighthouse lighthouse keeper\n"),
            ("new.md", "---\ntitle: New\nupdated: 2026-05-01\n---\nlighthouse mentioned once among many other words here\n"),
        ],
    );
    let session = session(&vault, &world.path().join("index"));
    let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
    let base = RankOptions::new(now);
    let baseline = session.rank("lighthouse", &base, &|_| true);
    assert_eq!(ranked(&session, "lighthouse", &base), ["old.md", "new.md"]);
    let mut zero = base.clone();
    zero.stale_days = 1.0;
    zero.recency_weight = 0.0;
    assert_eq!(session.rank("lighthouse", &zero, &|_| true), baseline);
    let mut strong = base.clone();
    strong.recency_weight = 0.9;
    strong.stale_days = 30.0;
    assert_eq!(
        ranked(&session, "lighthouse", &strong),
        ["new.md", "old.md"]
    );
    let top = &session.rank("lighthouse", &strong, &|_| true).hits[0];
    let adjustment = top.explanation.recency.as_ref().unwrap();
    assert!((adjustment.signal - 0.5f64.powf(31.0 / 30.0)).abs() < 1e-9);
}

#[test]
fn feedback_rerank_is_a_no_op_at_weight_zero_and_works_above() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "strong.md",
                &note("Strong", "kestrel kestrel kestrel kestrel"),
            ),
            (
                "weak.md",
                &note(
                    "Weak",
                    "a kestrel, once, in a long sentence about other birds and fields",
                ),
            ),
        ],
    );
    let index = world.path().join("index");
    let query = |extra: &[&str]| -> Vec<String> {
        let out = world
            .cmd()
            .args(["search", "kestrel", "--format", "files", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .args(extra)
            .output()
            .unwrap();
        ok(&out).lines().map(str::to_string).collect()
    };
    assert_eq!(query(&[]), ["strong.md", "weak.md"]);
    for _ in 0..3 {
        let out = world
            .cmd()
            .args(["mark-useful", "weak.md", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap();
        assert!(ok(&out).contains("weak.md: useful"));
    }
    let out = world
        .cmd()
        .args(["mark-useful", "strong", "--not-useful", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    assert!(ok(&out).contains("strong.md: useful 0, not useful 1"));
    assert_eq!(query(&["--feedback-weight", "0"]), ["strong.md", "weak.md"]);
    assert_eq!(
        query(&["--feedback-weight", "0.8"]),
        ["weak.md", "strong.md"]
    );
    // Feedback survives a rebuild.
    ok(&index_cmd(&world, &vault, &index, &["--rebuild"]));
    assert_eq!(
        query(&["--feedback-weight", "0.8"]),
        ["weak.md", "strong.md"]
    );
    // An unknown note is a usage error.
    let out = world
        .cmd()
        .args(["mark-useful", "missing.md", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn pack_and_search_rank_identically() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    for (query, extra) in [
        ("raft consensus", vec![]),
        (
            "transactions",
            vec!["--recency-weight", "0.5", "--now", "2026-06-01"],
        ),
        (
            "leader",
            vec!["--weight", "frontmatter=0.5", "--rrf-k", "20"],
        ),
        ("replication", vec!["--fusion", "score"]),
    ] {
        let out = world
            .cmd()
            .args([
                "search", query, "--format", "json", "--limit", "20", "--vault",
            ])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .args(&extra)
            .output()
            .unwrap();
        let search: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
        let out = world
            .cmd()
            .args([
                "pack", query, "--format", "json", "--budget", "100000", "--no-log", "--vault",
            ])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .args(&extra)
            .output()
            .unwrap();
        let pack: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
        let paths = |list: &serde_json::Value| -> Vec<String> {
            list.as_array()
                .unwrap()
                .iter()
                .map(|h| h["path"].as_str().unwrap().to_string())
                .collect()
        };
        let searched = paths(&search["hits"]);
        assert!(!searched.is_empty());
        assert_eq!(paths(&pack["pages"]), searched, "query {query:?}");
    }
}

#[test]
fn score_fusion_adds_weighted_normalised_scores() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = world
        .cmd()
        .args([
            "search",
            "raft",
            "--fusion",
            "score",
            "--weight",
            "frontmatter=0.5",
        ])
        .args(["--explain", "--format", "json", "--limit", "100", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    let results: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let hits = results["hits"].as_array().unwrap();
    assert!(hits.len() >= 3);
    let mut by_arm: std::collections::BTreeMap<String, Vec<(f64, f64, f64)>> = Default::default();
    for hit in hits {
        let explanation = &hit["explanation"];
        let arms = explanation["arms"].as_array().unwrap();
        let sum: f64 = arms
            .iter()
            .map(|a| a["contribution"].as_f64().unwrap())
            .sum();
        assert!((sum - explanation["fused"].as_f64().unwrap()).abs() < 1e-12);
        for arm in arms {
            by_arm
                .entry(arm["arm"].as_str().unwrap().into())
                .or_default()
                .push((
                    arm["score"].as_f64().unwrap(),
                    arm["weight"].as_f64().unwrap(),
                    arm["contribution"].as_f64().unwrap(),
                ));
        }
    }
    for (arm, rows) in &by_arm {
        // Each arm's best hit adds its whole weight, its worst nothing, and
        // the rest in proportion to their scores.
        let low = rows.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        let high = rows.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max);
        for &(score, weight, contribution) in rows {
            let expected = if high > low {
                weight * (score - low) / (high - low)
            } else {
                weight
            };
            assert!(
                (contribution - expected).abs() < 1e-9,
                "{arm}: {score} {contribution}"
            );
        }
        let expected_weight = if arm == "frontmatter" { 0.5 } else { 1.0 };
        assert!(rows.iter().all(|r| r.1 == expected_weight), "{arm}");
    }
    assert!(by_arm.contains_key("bm25") && by_arm.contains_key("frontmatter"));
}

#[test]
fn backlinks_are_read_from_the_index() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let root = vault.canonicalize().unwrap();
    let (index, _) =
        VaultIndex::open(&root, &IndexConfig::new(world.path().join("index"))).unwrap();
    let v = index.vault();
    let backlinks = index.backlinks(&v, "concepts/quorum.md");
    let sources: Vec<&str> = backlinks
        .iter()
        .map(|b| v.metas[b.source].path.as_str())
        .collect();
    assert_eq!(
        sources,
        [
            "concepts/leader-election.md",
            "concepts/paxos.md",
            "concepts/raft.md"
        ]
    );
    let from_raft = &backlinks[2];
    assert_eq!(
        from_raft.context,
        "- An entry is committed once a [[concepts/quorum|majority]] of servers store it."
    );
}

#[test]
fn search_filters_and_formats() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let index = world.path().join("index");
    let run = |extra: &[&str]| {
        let out = world
            .cmd()
            .arg("search")
            .args(extra)
            .arg("--vault")
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .output()
            .unwrap();
        ok(&out)
    };
    let entities = run(&["raft", "--folder", "entities", "--format", "files"]);
    assert!(
        entities.lines().all(|l| l.starts_with("entities/")),
        "{entities}"
    );
    assert!(entities.lines().count() >= 3);
    let tagged = run(&["raft", "--tag", "#people", "--format", "files"]);
    assert_eq!(tagged, "entities/diego-ongaro.md\n");
    let cli = run(&["paxos", "--limit", "2", "--explain"]);
    assert!(
        cli.starts_with("  1. concepts/paxos.md  Paxos (core, "),
        "{cli}"
    );
    assert!(cli.contains("bm25         rank   1"), "{cli}");
    assert!(cli.contains("frontmatter  rank   1"), "{cli}");
    let json: serde_json::Value =
        serde_json::from_str(&run(&["paxos", "--format", "json"])).unwrap();
    assert_eq!(
        json["hits"][0]["explanation"]["arms"][0]["arm"],
        "frontmatter"
    );
    assert!(
        json["hits"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("Paxos")
    );
    let none = run(&["xylophone"]);
    assert_eq!(none, "No notes match 'xylophone'.\n");
}

/// The ranking keeps its best 100 notes: a search says when more match,
/// never counting 100 as all of them.
#[test]
fn a_search_says_when_more_notes_match_than_it_ranked() {
    let world = World::new();
    let vault = big_vault(&world, 130);
    let search = |extra: &[&str]| {
        ok(&world
            .cmd()
            .args(["search", "text"])
            .args(extra)
            .arg("--vault")
            .arg(&vault)
            .output()
            .unwrap())
    };
    assert!(
        search(&[]).ends_with(
            "(10 of the 100 best-ranked matching notes shown; more match: --limit shows more)\n"
        ),
        "{}",
        search(&[])
    );
    let all: serde_json::Value =
        serde_json::from_str(&search(&["--limit", "200", "--format", "json"])).unwrap();
    assert_eq!(all["total"], 130);
    assert!(all.get("more").is_none(), "{all}");
    let capped: serde_json::Value = serde_json::from_str(&search(&["--format", "json"])).unwrap();
    assert_eq!(
        (capped["total"].as_u64(), capped["more"].as_bool()),
        (Some(100), Some(true))
    );
}

/// An opened index is read in place: a search decodes the metadata of the
/// notes it returns (and of those a path lookup visits), not the vault's.
#[test]
fn a_search_decodes_only_the_notes_it_touches() {
    let world = World::new();
    let vault = big_vault(&world, 400);
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    let session = session(&vault, &index);
    assert_eq!(session.vault.metas.len(), 400);
    assert_eq!(session.vault.metas.decoded(), 0, "opening decodes no note");
    let results = search(&session, "unique123", 5);
    assert_eq!(results.hits[0].path, "n00123.md");
    let decoded = session.vault.metas.decoded();
    assert!(
        (1..=40).contains(&decoded),
        "{decoded} of 400 notes decoded"
    );
}

#[test]
fn library_search_request() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let session = session(&vault, &world.path().join("index"));
    let results = search(&session, "gossip", 3);
    assert_eq!(results.hits[0].path, "concepts/gossip-protocols.md");
    let snippet = &results.hits[0].snippet;
    for range in &results.hits[0].highlights {
        assert_eq!(snippet[range.clone()].to_lowercase(), "gossip");
    }
}

/// A section that is its heading alone (its text in the subsections
/// below) can be the one that matched best: the snippet then comes from
/// the note's body, never an empty line.
#[test]
fn a_snippet_under_a_bare_heading_comes_from_the_body() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "setup.md",
                "# Setup\n\nInstall the tools first.\n\n### Configuration\n\n\
                 #### Charset\n\nThe configuration file sets the charset to utf8.\n",
            ),
            ("other.md", "# Other\n\nNothing related here.\n"),
        ],
    );
    let session = session(&vault, &world.path().join("index"));
    let results = search(&session, "configuration", 3);
    assert_eq!(results.hits[0].path, "setup.md");
    assert_eq!(
        results.hits[0].snippet,
        "The configuration file sets the charset to utf8."
    );
}

/// A note found by its title alone shows a line of its prose, not a
/// rule or a code fence; a command matching the query is shown when no
/// prose does.
#[test]
fn a_snippet_is_prose_before_rules_and_code() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "Nginx Material.md",
                "---\n\n```shell\nls /srv\n```\n\nA list of links to read later.\n",
            ),
            (
                "Setup.md",
                "Nothing about servers here.\n\n```shell\nmkdir nginx-files\n```\n",
            ),
        ],
    );
    let session = session(&vault, &world.path().join("index"));
    let results = search(&session, "nginx", 3);
    let snippet_of = |path: &str| {
        results
            .hits
            .iter()
            .find(|hit| hit.path == path)
            .map(|hit| hit.snippet.clone())
    };
    assert_eq!(
        snippet_of("Nginx Material.md").as_deref(),
        Some("A list of links to read later.")
    );
    assert_eq!(snippet_of("Setup.md").as_deref(), Some("mkdir nginx-files"));
}

#[test]
fn watch_keeps_the_index_current() {
    use std::io::{BufRead, BufReader};
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", &note("Alpha", "nothing special"))]);
    let index = world.path().join("index");
    let mut child = world
        .cmd()
        .args(["index", "--watch", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let first = received.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(first.contains("1 notes"), "{first}");
    std::thread::sleep(Duration::from_millis(300));
    fs::write(vault.join("b.md"), note("Beta", "the narwhal surfaced")).unwrap();
    let update = received.recv_timeout(Duration::from_secs(30)).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        update,
        "updated: 1 added, 0 changed, 0 removed, 1 unchanged"
    );
    // The watcher's update is committed: a reader finds the new note.
    let root = vault.canonicalize().unwrap();
    let committed = VaultIndex::open_committed(&root, &index, &Default::default()).unwrap();
    assert_eq!(committed.search_notes("narwhal", 5).unwrap().len(), 1);
}

/// Every file under `dir` with its bytes, for before/after comparisons.
fn snapshot_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    listing(dir)
}

#[test]
fn an_index_folder_in_or_around_the_vault_or_of_the_user_is_refused_untouched() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "a.md",
                &note("Alpha", "The zebra crossing is painted white."),
            ),
            ("tantivy/mine.md", &note("Mine", "A note about tantivy.")),
        ],
    );
    std::os::unix::fs::symlink(&vault, world.path().join("link")).unwrap();
    let before = snapshot_of(&vault);
    let inside = [
        (vault.clone(), "is the vault"),
        (vault.join("tantivy"), "is inside the vault"),
        (vault.join("sub/index"), "is inside the vault"),
        (world.path().join("link/.index"), "is inside the vault"),
        (
            world.path().join("else/../vault/idx"),
            "is inside the vault",
        ),
        (world.path().to_path_buf(), "contains the vault"),
    ];
    for (dir, relation) in &inside {
        for command in [
            &["search", "zebra"][..],
            &["index", "--rebuild"],
            &["status"],
        ] {
            let out = world
                .cmd()
                .args(command)
                .arg("--vault")
                .arg(&vault)
                .arg("--index-dir")
                .arg(dir)
                .output()
                .unwrap();
            common::fails(&out, 2, relation);
            assert_eq!(snapshot_of(&vault), before, "{command:?} {}", dir.display());
        }
    }
    // CTXPACK_INDEX_DIR is held to the same rule.
    let out = world
        .cmd()
        .env("CTXPACK_INDEX_DIR", &vault)
        .args(["search", "zebra", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    common::fails(&out, 2, "is the vault");

    // A folder of the user's outside the vault, not empty and unmarked,
    // with a `tantivy/` folder of its own, is refused and left whole.
    let foreign = world.vault(
        "foreign",
        &[("tantivy/keep.md", "keep me"), ("notes.txt", "mine too")],
    );
    let foreign_before = snapshot_of(&foreign);
    for command in [
        &["index"][..],
        &["index", "--rebuild"],
        &["search", "zebra"],
    ] {
        let out = index_like(&world, command, &vault, &foreign);
        common::fails(&out, 2, "is not empty and is not a ctxpack index");
        assert_eq!(snapshot_of(&foreign), foreign_before, "{command:?}");
    }

    // An empty folder is taken, marked, and serves.
    let empty = world.path().join("empty");
    fs::create_dir(&empty).unwrap();
    ok(&index_cmd(&world, &vault, &empty, &[]));
    assert!(empty.join(".ctxpack-index").is_file());
    assert_eq!(search_paths(&world, &vault, &empty, "zebra"), ["a.md"]);
    assert_eq!(snapshot_of(&vault), before);
}

fn index_like(world: &World, command: &[&str], vault: &Path, index: &Path) -> std::process::Output {
    world
        .cmd()
        .args(command)
        .arg("--vault")
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .output()
        .unwrap()
}

/// The blobs the commit in `index` names: catalog, links, backlinks.
fn committed_blobs(index: &Path) -> Vec<String> {
    let meta: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(index.join("tantivy/meta.json")).unwrap())
            .unwrap();
    let payload: serde_json::Value =
        serde_json::from_str(meta["payload"].as_str().unwrap()).unwrap();
    ["catalog", "links", "backlinks"]
        .iter()
        .map(|kind| format!("{kind}-{}.bin", payload[kind].as_str().unwrap()))
        .collect()
}

/// The content-addressed files in `index` (blobs and their side files).
fn blob_files(index: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(index)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| {
            ["catalog-", "links-", "backlinks-"]
                .iter()
                .any(|kind| name.starts_with(kind))
        })
        .collect();
    names.sort();
    names
}

#[test]
fn stale_blobs_of_every_kind_are_collected_keeping_the_previous_commit() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("a.md", &note("Alpha", "Alpha links to [[b]] today.")),
            ("b.md", &note("Beta", "Beta is here.")),
        ],
    );
    let index = world.path().join("index");
    ok(&index_cmd(&world, &vault, &index, &[]));
    // Left by an older run: blobs and a check file no commit names.
    let stray = "0123456789abcdef0123456789abcdef";
    for name in [
        format!("backlinks-{stray}.bin"),
        format!("links-{stray}.bin"),
        format!("catalog-{stray}.bin"),
        format!("catalog-{stray}.checked"),
    ] {
        fs::write(index.join(name), b"old").unwrap();
    }
    let mut previous = committed_blobs(&index);
    for round in 0..5 {
        // Every round changes the link graph: new backlinks, links, catalog.
        fs::write(
            vault.join(format!("c{round}.md")),
            note(&format!("C{round}"), "A new note."),
        )
        .unwrap();
        fs::write(
            vault.join("a.md"),
            note("Alpha", &format!("Alpha links to [[c{round}]] now.")),
        )
        .unwrap();
        ok(&index_cmd(&world, &vault, &index, &[]));
        let current = committed_blobs(&index);
        assert_ne!(current, previous, "round {round}");
        let mut expected: Vec<String> = current.iter().chain(&previous).cloned().collect();
        expected.sort();
        assert_eq!(blob_files(&index), expected, "round {round}");
        previous = current;
    }
    assert_eq!(search_paths(&world, &vault, &index, "alpha"), ["a.md"]);
}

/// `ctxpack ARGS` run with no room to write any file (`RLIMIT_FSIZE` 0,
/// SIGXFSZ ignored, so each write fails with EFBIG as on a full disk).
fn without_room(world: &World, args: &[&str], vault: &Path, index: &Path) -> std::process::Output {
    let cmd = world.cmd();
    let program = cmd.get_program().to_owned();
    Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 0 && trap '' XFSZ && exec \"$0\" \"$@\"")
        .arg(program)
        .args(args)
        .arg("--vault")
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .envs(
            cmd.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env_remove("CTXPACK_INDEX_DIR")
        .current_dir(world.work())
        .output()
        .unwrap()
}

#[test]
fn an_update_that_cannot_be_written_keeps_the_last_commit_and_heals() {
    let world = World::new();
    let (root, index, _) = indexed_then_edited(&world);
    let out = without_room(
        &world,
        &["search", "zebra", "--format", "files"],
        &root,
        &index,
    );
    assert_eq!(
        stdout(&out).lines().next(),
        Some("a.md"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("the index could not be updated"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("no index"), "{}", stderr(&out));
    // `index` itself says it could not do what it was asked.
    let out = without_room(&world, &["index"], &root, &index);
    common::fails(&out, 1, "the index could not be updated");
    // The last good commit is whole: the old text, every note.
    let policy = ctxpack::Policy::default();
    let stale = VaultIndex::open_committed(&root, &index, &policy).unwrap();
    assert_eq!(stale.catalog.metas.len(), 2);
    assert_eq!(library_search(&stale, "white"), ["a.md"]);
    assert_eq!(library_search(&stale, "blue"), Vec::<String>::new());
    drop(stale);
    // With room again, the next command updates.
    let out = world
        .cmd()
        .args(["search", "blue", "--format", "files", "--vault"])
        .arg(&root)
        .arg("--index-dir")
        .arg(&index)
        .output()
        .unwrap();
    assert_eq!(ok(&out).lines().collect::<Vec<_>>(), ["a.md"]);
    assert_eq!(stderr(&out), "");
    let out = index_cmd(&world, &root, &index, &[]);
    assert!(
        ok(&out).contains("0 added, 0 changed, 0 removed, 2 unchanged"),
        "{}",
        stdout(&out)
    );
}

/// Runs `cmd` to its end, failing the test if it takes more than `limit`
/// (a command stuck for ever is killed, not waited for).
fn finish_within(mut cmd: Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("still running after {limit:?}: {}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_stuck_lock_holder_is_named_and_waited_for_a_bounded_time() {
    let world = World::new();
    let vault = big_vault(&world, 3000);
    let index = world.path().join("index");
    // A cold build, stopped while it holds the lock: no commit exists yet.
    let mut holder = world
        .cmd()
        .args(["index", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = holder.id();
    // A failed assertion must not leave a stopped process behind.
    struct KillOnDrop<'a>(&'a mut std::process::Child);
    impl Drop for KillOnDrop<'_> {
        fn drop(&mut self) {
            if self.0.try_wait().ok().flatten().is_none() {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
    let holder = KillOnDrop(&mut holder);
    let started = Instant::now();
    while fs::read_to_string(index.join("ctxpack.lock")).unwrap_or_default()
        != format!("{pid} ctxpack index")
    {
        assert!(started.elapsed() < Duration::from_secs(60), "no holder");
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(pid, "-STOP");
    let named = format!("held by pid {pid} (ctxpack index)");
    let run = |args: &[&str]| {
        let mut cmd = world.cmd();
        cmd.env("CTXPACK_LOCK_WAIT", "1")
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index);
        finish_within(cmd, Duration::from_secs(60))
    };
    let gave_up = format!("stayed locked by pid {pid} (ctxpack index) for 1 s");
    // A search goes on without the index, saying why.
    let out = run(&["search", "unique7", "--format", "files"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.matches(&named).count(), 1, "{err}");
    assert!(err.contains(&gave_up), "{err}");
    assert!(err.contains("ranking without full-text search"), "{err}");
    for args in [&["status"][..], &["index", "--rebuild"]] {
        let out = run(args);
        common::fails(&out, 1, &gave_up);
        assert_eq!(stderr(&out).matches(&named).count(), 1, "{}", stderr(&out));
    }
    signal(pid, "-CONT");
    assert!(holder.0.wait().unwrap().success());
    assert_eq!(
        search_paths(&world, &vault, &index, "unique7")[0],
        "n00007.md"
    );
}

#[test]
fn a_vault_deleted_during_a_cold_index_is_an_error_and_nothing_is_committed() {
    let world = World::new();
    let vault = big_vault(&world, 3000);
    let index = world.path().join("index");
    let indexer = world
        .cmd()
        .args(["index", "--vault"])
        .arg(&vault)
        .arg("--index-dir")
        .arg(&index)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = indexer.id();
    // Once it holds the lock, it is indexing.
    let started = Instant::now();
    while fs::read_to_string(index.join("ctxpack.lock")).unwrap_or_default()
        != format!("{pid} ctxpack index")
    {
        assert!(started.elapsed() < Duration::from_secs(60), "never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Stopped while it holds the lock (a 3000-note build is far from its
    // commit then), so the vault is gone before the build ends, however
    // busy the machine is.
    signal(pid, "-STOP");
    let removed = fs::remove_dir_all(&vault);
    signal(pid, "-CONT");
    removed.unwrap();
    let out = indexer.wait_with_output().unwrap();
    common::fails(
        &out,
        1,
        "vanished (moved or deleted) while it was being indexed",
    );
    assert!(!stdout(&out).contains("added"), "{}", stdout(&out));
    let committed = fs::read_to_string(index.join("tantivy/meta.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|meta| meta["payload"].is_string());
    assert!(!committed, "a commit was made");
}

#[test]
fn notes_of_equal_score_rank_the_same_after_every_build() {
    let world = World::new();
    let files: Vec<(String, String)> = (0..400)
        .map(|n| {
            (
                format!("n{n:03}.md"),
                "The zebra grazes here.\n".to_string(),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let vault = world.vault("vault", &refs);
    let expected: Vec<String> = (0..50).map(|n| format!("n{n:03}.md")).collect();
    for build in 0..3 {
        let index = world.path().join(format!("index-{build}"));
        ok(&index_cmd(&world, &vault, &index, &[]));
        assert_eq!(
            search_paths(&world, &vault, &index, "zebra"),
            expected,
            "cold build {build}"
        );
        ok(&index_cmd(&world, &vault, &index, &["--rebuild"]));
        assert_eq!(
            search_paths(&world, &vault, &index, "zebra"),
            expected,
            "rebuild {build}"
        );
    }
}

#[test]
fn indexing_reports_its_progress_to_the_callback_it_is_given() {
    use ctxpack::progress::{Event, Progress, Stage};
    use std::sync::{Arc, Mutex};
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("a.md", "# A\n\nLinks to [[b]].\n"),
            ("b.md", "# B\n\nPlain.\n"),
            ("notes/c.md", "# C\n\nNested.\n"),
        ],
    );
    let root = vault.canonicalize().unwrap();
    let notes = 3;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let mut config = IndexConfig::new(world.path().join("index"));
    config.progress = Progress::new(move |event| sink.lock().unwrap().push(event));
    VaultIndex::open(&root, &config).unwrap();
    let stage = Stage::Indexing;
    let events = seen.lock().unwrap().clone();
    assert_eq!(
        events.first(),
        Some(&Event::Started {
            stage,
            total: notes
        })
    );
    assert_eq!(events.last(), Some(&Event::Finished { stage }));
    let advanced: u64 = events
        .iter()
        .map(|event| match event {
            Event::Advanced { count, .. } => *count,
            _ => 0,
        })
        .sum();
    assert_eq!(advanced, notes);
    // A second open finds nothing to read: no stage starts.
    seen.lock().unwrap().clear();
    VaultIndex::open(&root, &config).unwrap();
    assert_eq!(*seen.lock().unwrap(), []);
}

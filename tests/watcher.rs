//! The watcher endpoint: with `index --watch` running, commands ask it what
//! changed instead of walking the vault, and still never answer stale.

#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::World;
use common::mcp_client::Client;

fn note(title: &str, body: &str) -> String {
    format!("---\ntitle: {title}\n---\n\n{body}\n")
}

/// `ctxpack index --watch`, killed when dropped.
struct Watcher {
    child: Child,
}

impl Watcher {
    fn start(world: &World, vault: &Path, index: &Path) -> Watcher {
        let mut child = world
            .cmd()
            .args(["index", "--watch", "--vault"])
            .arg(vault)
            .arg("--index-dir")
            .arg(index)
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
        // The first line is the first index; the socket follows it.
        received.recv_timeout(Duration::from_secs(60)).unwrap();
        let socket = index.join("watch.sock");
        let started = Instant::now();
        while !socket.exists() {
            assert!(started.elapsed() < Duration::from_secs(30), "no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        Watcher { child }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `search` for `word`: the files found, and whether the changes came
/// from the watcher (its timing line says so).
fn search(world: &World, vault: &Path, index: &Path, word: &str) -> (String, bool) {
    let output = world
        .cmd()
        .args([
            "search", word, "--format", "files", "--model", "none", "--vault",
        ])
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .env("CTXPACK_TIMINGS", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        String::from_utf8(output.stdout).unwrap(),
        stderr.contains("index.changes")
            && stderr.contains("watcher: ")
            && !stderr.contains("token unknown"),
    )
}

/// Whether one of a few searches is answered through the watcher.
fn watcher_answers(world: &World, vault: &Path, index: &Path) -> bool {
    (0..30).any(|_| search(world, vault, index, "anything").1)
}

fn vault_with_notes(world: &World) -> (PathBuf, PathBuf) {
    let vault = world.vault(
        "vault",
        &[
            ("a.md", &note("Alpha", "the first note")),
            ("deep/b.md", &note("Beta", "the second note")),
        ],
    );
    (vault.canonicalize().unwrap(), world.path().join("index"))
}

#[test]
fn an_edit_saved_just_before_a_command_is_in_its_answer() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    let _watcher = Watcher::start(&world, &vault, &index);
    let mut from_watcher = 0;
    let rounds = 12;
    for round in 0..rounds {
        let word = format!("quokka{round}x");
        match round % 4 {
            // A plain edit.
            0 => fs::write(vault.join("a.md"), note("Alpha", &word)).unwrap(),
            // A new note in a new folder.
            1 => {
                fs::create_dir_all(vault.join(format!("new{round}/inner"))).unwrap();
                fs::write(
                    vault.join(format!("new{round}/inner/n.md")),
                    note("New", &word),
                )
                .unwrap();
            }
            // An editor saving by rename-over.
            2 => {
                fs::write(vault.join(".b.md.swp"), note("Beta", &word)).unwrap();
                fs::rename(vault.join(".b.md.swp"), vault.join("deep/b.md")).unwrap();
            }
            // A rename.
            _ => {
                fs::write(vault.join("deep/b.md"), note("Beta", &word)).unwrap();
                fs::rename(vault.join("deep/b.md"), vault.join("deep/b2.md")).unwrap();
                fs::rename(vault.join("deep/b2.md"), vault.join("deep/b.md")).unwrap();
            }
        }
        let (found, used) = search(&world, &vault, &index, &word);
        assert_ne!(found, "", "round {round}: {word} not found");
        from_watcher += usize::from(used);
    }
    // The fast path was taken (a loaded machine may miss the deadline now
    // and then, and walk instead; the answers are right either way).
    assert!(from_watcher > 0 || watcher_answers(&world, &vault, &index));
}

#[test]
fn deletions_renames_and_folder_moves_are_seen() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    fs::write(vault.join("deep/c.md"), note("Gamma", "wombat lives here")).unwrap();
    let _watcher = Watcher::start(&world, &vault, &index);
    assert_eq!(search(&world, &vault, &index, "wombat").0, "deep/c.md\n");

    fs::rename(vault.join("deep"), vault.join("moved")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "moved/c.md\n");

    fs::remove_file(vault.join("moved/c.md")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "");

    fs::write(vault.join("moved/d.md"), note("Delta", "wombat returns")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "moved/d.md\n");

    fs::remove_dir_all(vault.join("moved")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "");

    // A folder the walk skips stays skipped, and dot files are not notes.
    fs::create_dir_all(vault.join("_raw")).unwrap();
    fs::write(vault.join("_raw/e.md"), note("Raw", "wombat raw")).unwrap();
    fs::write(vault.join(".hidden.md"), note("Hidden", "wombat hidden")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "");

    // An .okignore written later is obeyed.
    fs::write(vault.join("f.md"), note("F", "wombat f")).unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "f.md\n");
    fs::write(vault.join(".okignore"), "f.md\n").unwrap();
    assert_eq!(search(&world, &vault, &index, "wombat").0, "");
}

#[test]
fn the_index_kept_by_the_watcher_equals_a_fresh_one() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    let _watcher = Watcher::start(&world, &vault, &index);
    for i in 0..20 {
        let dir = vault.join(format!("d{}", i % 3));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join(format!("n{i}.md")),
            note(&format!("N{i}"), "lemur lemur"),
        )
        .unwrap();
        if i % 5 == 4 {
            fs::remove_file(dir.join(format!("n{}.md", i - 3))).unwrap_or(());
        }
        if i % 7 == 6 {
            fs::rename(
                dir.join(format!("n{i}.md")),
                vault.join(format!("top{i}.md")),
            )
            .unwrap();
        }
        search(&world, &vault, &index, "lemur");
    }
    let fresh = world.path().join("fresh-index");
    let watched = search(&world, &vault, &index, "lemur").0;
    let walked = search(&world, &vault, &fresh, "lemur").0;
    assert_eq!(watched, walked);
    let status = |dir: &Path| {
        let output = world
            .cmd()
            .args(["status", "--format", "json", "--model", "none", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(dir)
            .output()
            .unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        // Where the index lives and when it changed differ by nature.
        for key in ["index", "index_bytes", "last_update", "this_update"] {
            json.as_object_mut().unwrap().remove(key);
        }
        json
    };
    assert_eq!(status(&index), status(&fresh));
}

#[test]
fn a_dead_or_restarted_watcher_means_a_walk() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    {
        let _watcher = Watcher::start(&world, &vault, &index);
        fs::write(vault.join("a.md"), note("Alpha", "capybara one")).unwrap();
        assert_eq!(search(&world, &vault, &index, "capybara").0, "a.md\n");
    }
    // Killed: its socket is left behind, and answers nothing.
    assert!(index.join("watch.sock").exists());
    fs::write(vault.join("a.md"), note("Alpha", "capybara two")).unwrap();
    let (found, used) = search(&world, &vault, &index, "two");
    assert_eq!((found.as_str(), used), ("a.md\n", false));
    // A new watcher does not know the old one's token: one walk, then fast.
    let _watcher = Watcher::start(&world, &vault, &index);
    fs::write(vault.join("a.md"), note("Alpha", "capybara three")).unwrap();
    assert_eq!(search(&world, &vault, &index, "three").0, "a.md\n");
    fs::write(vault.join("a.md"), note("Alpha", "capybara four")).unwrap();
    assert_eq!(search(&world, &vault, &index, "four").0, "a.md\n");
}

#[test]
fn the_socket_is_for_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    let _watcher = Watcher::start(&world, &vault, &index);
    let mode = fs::metadata(index.join("watch.sock"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_serving_mcp_server_answers_commands_too() {
    let world = World::new();
    let (vault, _) = vault_with_notes(&world);
    // The MCP client's server keeps its index in world/index.
    let index = world.path().join("index");
    let _client = Client::start(&world, &vault);
    let socket = index.join("watch.sock");
    let started = Instant::now();
    while !socket.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut used = false;
    for round in 0..5 {
        let word = format!("okapi{round}y");
        fs::write(vault.join("a.md"), note("Alpha", &word)).unwrap();
        let (found, from_watcher) = search(&world, &vault, &index, &word);
        assert_eq!(found, "a.md\n");
        used |= from_watcher;
    }
    assert!(used || watcher_answers(&world, &vault, &index));
}

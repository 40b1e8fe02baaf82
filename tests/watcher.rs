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

/// The pids of background watchers of `index` (their command line names it).
fn background_watchers(index: &Path) -> Vec<u32> {
    let index = index.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "--background") && args.contains(&index) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits (up to 30 s) until `done` holds.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the background watchers of an index left by a failed test.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in background_watchers(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

fn stop(world: &World, vault: &Path, index: &Path) -> std::process::Output {
    world
        .cmd()
        .args(["index", "--stop", "--vault"])
        .arg(vault)
        .arg("--index-dir")
        .arg(index)
        .output()
        .unwrap()
}

#[test]
fn daemon_starts_one_background_watcher_and_stop_ends_it() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    let _reaper = Reaper(index.clone());
    let daemon_search = |env: Option<(&str, &str)>, flag: bool| {
        let mut cmd = world.cmd();
        cmd.args(["search", "first", "--format", "files", "--model", "none"])
            .args(flag.then_some("--daemon"))
            .arg("--vault")
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((key, value)) = env {
            cmd.env(key, value);
        }
        cmd.spawn().unwrap()
    };
    // Without the flag, nothing starts.
    let plain = daemon_search(None, false).wait_with_output().unwrap();
    assert!(plain.status.success());
    assert!(!index.join("watch.sock").exists());
    assert!(background_watchers(&index).is_empty());

    // Two commands at once start one watcher between them.
    let first = daemon_search(None, true);
    let second = daemon_search(None, true);
    for child in [first, second] {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout), "a.md\n");
    }
    wait_until("no socket", || index.join("watch.sock").exists());
    wait_until("not exactly one watcher", || {
        background_watchers(&index).len() == 1
    });
    // Later commands ask it, and see an edit made just before them.
    fs::write(vault.join("deep/b.md"), note("Beta", "wombat")).unwrap();
    let (found, from_watcher) = search(&world, &vault, &index, "wombat");
    assert_eq!(found, "deep/b.md\n");
    assert!(from_watcher || watcher_answers(&world, &vault, &index));

    let stopped = stop(&world, &vault, &index);
    assert!(stopped.status.success(), "{stopped:?}");
    assert_eq!(
        String::from_utf8_lossy(&stopped.stdout),
        "stopped the watcher of this vault\n"
    );
    assert!(!index.join("watch.sock").exists());
    wait_until("the watcher did not exit", || {
        background_watchers(&index).is_empty()
    });
    let again = stop(&world, &vault, &index);
    assert!(again.status.success());
    assert_eq!(
        String::from_utf8_lossy(&again.stdout),
        "no watcher runs for this vault\n"
    );

    // The environment variable does the same, and so does the line in a
    // vault's config (here `.env` in the working folder).
    let output = daemon_search(Some(("CTXPACK_DAEMON", "1")), false)
        .wait_with_output()
        .unwrap();
    assert!(output.status.success());
    wait_until("CTXPACK_DAEMON started nothing", || {
        background_watchers(&index).len() == 1
    });
    // A watcher still indexing has no socket yet, and `--stop` can only
    // stop one that answers (it would say none runs, and this one would
    // then run on).
    wait_until("no socket", || index.join("watch.sock").exists());
    assert!(stop(&world, &vault, &index).status.success());
    wait_until("the watcher did not exit", || {
        background_watchers(&index).is_empty()
    });
    let output = daemon_search(Some(("CTXPACK_DAEMON", "0")), false)
        .wait_with_output()
        .unwrap();
    assert!(output.status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(background_watchers(&index).is_empty());

    // A `.env` found by walking up may come from a checkout the user does
    // not trust: its line starts nothing (and says so).
    let config_line = format!(
        "OBSIDIAN_VAULT_PATH={}\nCTXPACK_DAEMON=yes\n",
        vault.display()
    );
    fs::create_dir_all(world.work()).unwrap();
    fs::write(world.work().join(".env"), &config_line).unwrap();
    let search = || {
        world
            .cmd()
            .args(["search", "first", "--model", "none", "--index-dir"])
            .arg(&index)
            .output()
            .unwrap()
    };
    let output = search();
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("CTXPACK_DAEMON in "),
        "{output:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(background_watchers(&index).is_empty());
    // The same line in the user's own config starts one.
    fs::remove_file(world.work().join(".env")).unwrap();
    let config = world.home().join(".config/obsidian-wiki/config");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(&config, &config_line).unwrap();
    let output = search();
    assert!(output.status.success(), "{output:?}");
    wait_until("the config line started nothing", || {
        background_watchers(&index).len() == 1
    });
    wait_until("no socket", || index.join("watch.sock").exists());
    assert!(stop(&world, &vault, &index).status.success());
    wait_until("the watcher did not exit", || {
        background_watchers(&index).is_empty()
    });
}

#[test]
fn a_serving_mcp_server_does_not_stop_on_request() {
    let world = World::new();
    let (vault, _) = vault_with_notes(&world);
    let index = world.path().join("index");
    let _client = Client::start(&world, &vault);
    wait_until("no socket", || index.join("watch.sock").exists());
    let refused = stop(&world, &vault, &index);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("ctxpack serve"));
    assert!(index.join("watch.sock").exists());
}

#[test]
fn a_vault_folder_replaced_under_a_watch_is_never_trusted_stale() {
    let world = World::new();
    let (vault, index) = vault_with_notes(&world);
    // Killed when dropped, should an assertion fail first.
    let mut watch = Watcher {
        child: world
            .cmd()
            .args(["index", "--watch", "--vault"])
            .arg(&vault)
            .arg("--index-dir")
            .arg(&index)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    };
    let mut first = String::new();
    BufReader::new(watch.child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    wait_until("the socket", || index.join("watch.sock").exists());
    assert!(watcher_answers(&world, &vault, &index));
    // The vault moved away and a copy put in its place, then edited.
    fs::rename(&vault, world.path().join("vault.old")).unwrap();
    fs::create_dir_all(vault.join("deep")).unwrap();
    fs::write(vault.join("deep/b.md"), note("Beta", "the second note")).unwrap();
    fs::write(vault.join("a.md"), note("Alpha", "an okapi")).unwrap();
    assert_eq!(search(&world, &vault, &index, "okapi").0, "a.md\n");
    fs::write(vault.join("a.md"), note("Alpha", "a quokka")).unwrap();
    assert_eq!(search(&world, &vault, &index, "quokka").0, "a.md\n");
    // The watch of the old folder ends, saying why.
    let started = Instant::now();
    let status = loop {
        if let Some(status) = watch.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the watch of the old folder goes on"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(watch.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("was moved, deleted or replaced; the watch stopped"),
        "{stderr}"
    );
    fs::write(vault.join("a.md"), note("Alpha", "a tapir")).unwrap();
    assert_eq!(search(&world, &vault, &index, "tapir").0, "a.md\n");
}

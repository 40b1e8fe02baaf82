//! How far a call without a watcher is above what this machine allows.
//!
//! Without a watcher, every `search`, `pack` and `index` must stat every
//! note to know the index is current. This bench measures the floor that
//! sets on this machine: starting and ending the process (`ctxpack
//! --version`), and listing and stat-ing the vault with nothing else done
//! (`getdents` + `fstatat` by name under an open folder, on one thread and
//! on two), then the whole commands, all alternating. What a command costs
//! above `exec + raw walk` is ctxpack's own work.
//!
//! Run with `cargo bench --bench walk_floor`; `CTXPACK_BENCH_VAULT=DIR`
//! measures another vault (default: the synthetic 10k vault),
//! `CTXPACK_BENCH_QUERY` the query searched and packed (default one the
//! synthetic vault's notes match), `CTXPACK_BENCH_ROUNDS` the rounds
//! (default 21).

#[path = "support/process.rs"]
mod process;
#[path = "support/synth.rs"]
mod synth;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use process::{measure, ms};

fn main() {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-vaults");
    let vault = match std::env::var_os("CTXPACK_BENCH_VAULT") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let dir = base.join("walk-floor-10000");
            if !dir.join(".complete").exists() {
                let _ = std::fs::remove_dir_all(&dir);
                synth::generate(&dir, 10_000, 42).expect("write the synthetic vault");
                std::fs::write(dir.join(".complete"), "").expect("mark the vault complete");
            }
            dir
        }
    };
    let rounds: usize = std::env::var("CTXPACK_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(21)
        .max(1);
    let query = std::env::var("CTXPACK_BENCH_QUERY").unwrap_or_else(|_| "kalo mine".into());
    let index = base.join("walk-floor-index");
    let _ = std::fs::remove_dir_all(&index);
    let args = |command: &[&str]| -> Vec<String> {
        let mut all = process::on_vault(command, &vault, &index);
        all.extend(["--model".into(), "none".into()]);
        all
    };
    // Built once, and the vault's pages in the page cache, before timing.
    measure(&args(&["index"]), 1);
    let folders = folders_of(&vault);
    let files = raw_walk(&folders, 1);

    let version = vec!["--version".to_string()];
    let noop = args(&["index"]);
    let search = args(&["search", &query]);
    let pack = args(&["pack", &query, "--no-log"]);
    let mut times: [Vec<Duration>; 6] = Default::default();
    for _ in 0..rounds {
        times[0].push(measure(&version, 1).0);
        times[1].push(timed(|| raw_walk(&folders, 1)));
        times[2].push(timed(|| raw_walk(&folders, 2)));
        times[3].push(measure(&noop, 1).0);
        times[4].push(measure(&search, 1).0);
        times[5].push(measure(&pack, 1).0);
    }
    let [exec, walk1, walk2, noop, search, pack] = times.map(median);
    let floor = exec + walk1.min(walk2);
    println!(
        "{} ({files} files listed, {} folders), query {query:?}; medians of {rounds} \
         alternating rounds, wall ms",
        vault.display(),
        folders.len()
    );
    println!("{:<44} {:>8}", "case", "ms");
    for (label, time) in [
        ("process start and exit (ctxpack --version)", exec),
        ("raw walk: getdents + fstatat, 1 thread", walk1),
        ("raw walk: getdents + fstatat, 2 threads", walk2),
        ("floor: process + fastest raw walk", floor),
    ] {
        println!("{label:<44} {:>8.1}", ms(time));
    }
    for (label, time) in [
        ("ctxpack index (no-op update)", noop),
        ("ctxpack search", search),
        ("ctxpack pack", pack),
    ] {
        println!(
            "{label:<44} {:>8.1}   above the floor {:>5.1}",
            ms(time),
            ms(time.saturating_sub(floor))
        );
    }
}

fn timed<T>(work: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    std::hint::black_box(work());
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The vault's folders, its root first (hidden ones left out, as the walk
/// leaves them).
fn folders_of(root: &Path) -> Vec<PathBuf> {
    let mut folders = vec![root.to_path_buf()];
    let mut at = 0;
    while at < folders.len() {
        let mut below: Vec<PathBuf> = std::fs::read_dir(&folders[at])
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| !e.file_name().as_bytes().starts_with(b"."))
            .map(|e| e.path())
            .collect();
        below.sort();
        folders.extend(below);
        at += 1;
    }
    folders
}

/// Lists every folder and stats each entry by name under the open folder,
/// on `threads` threads taking folders in turn; the number of entries.
fn raw_walk(folders: &[PathBuf], threads: usize) -> usize {
    let next = AtomicUsize::new(0);
    let count = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, Ordering::Relaxed);
                    let Some(folder) = folders.get(at) else { break };
                    count.fetch_add(stat_folder(folder), Ordering::Relaxed);
                }
            });
        }
    });
    count.into_inner()
}

fn stat_folder(folder: &Path) -> usize {
    let Ok(path) = CString::new(folder.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    if fd < 0 {
        return 0;
    }
    let mut stated = 0;
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if name.as_bytes().starts_with(b".") {
            continue;
        }
        let Ok(name) = CString::new(name.as_bytes()) else {
            continue;
        };
        // SAFETY: stat is plain data fstatat fills in; fd is an open folder.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        let done =
            unsafe { libc::fstatat(fd, name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) };
        if done == 0 {
            stated += 1;
        }
    }
    // SAFETY: fd was opened above and is not used after this.
    unsafe { libc::close(fd) };
    stated
}

//! End-to-end benchmark of the `ctxpack pack` process on synthetic vaults
//! of 1k and 10k notes: wall time (median and min of several runs) and
//! peak resident memory. Run with `cargo bench --bench pack`.

#[path = "support/synth.rs"]
mod synth;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 7;

fn main() {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-vaults");
    println!("ctxpack pack, whole process, {RUNS} runs each (release build)");
    println!(
        "{:<8} {:<28} {:>10} {:>10} {:>12}",
        "notes", "command", "median", "min", "peak RSS"
    );
    for notes in [1_000usize, 10_000] {
        let vault = ensure_vault(&base, notes);
        let cases: [(&str, Vec<&str>); 3] = [
            ("pack \"kalo mine\"", vec!["pack", "kalo mine"]),
            (
                "pack \"kalo mine\" --tok o200k",
                vec!["pack", "kalo mine", "--tokenizer", "o200k"],
            ),
            ("pack --recent", vec!["pack", "--recent"]),
        ];
        for (label, args) in cases {
            let (median, min, peak_kb) = measure(&vault, &args);
            println!(
                "{notes:<8} {label:<28} {:>8.1}ms {:>8.1}ms {:>9.1} MB",
                ms(median),
                ms(min),
                peak_kb as f64 / 1024.0
            );
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ensure_vault(base: &Path, notes: usize) -> PathBuf {
    let dir = base.join(format!("synth-{notes}"));
    let done = dir.join(".complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let bytes = synth::generate(&dir, notes, 42).expect("write synthetic vault");
        std::fs::write(&done, bytes.to_string()).expect("mark vault complete");
    }
    let bytes = std::fs::read_to_string(&done).unwrap_or_default();
    eprintln!("vault {} ({notes} notes, {bytes} bytes)", dir.display());
    dir
}

/// Median and minimum wall time, and the largest peak RSS (KiB) of the runs.
// The child is reaped by `wait4`, which also reports its peak memory.
#[allow(clippy::zombie_processes)]
fn measure(vault: &Path, args: &[&str]) -> (Duration, Duration, i64) {
    let mut times = Vec::with_capacity(RUNS);
    let mut peak = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_ctxpack"))
            .args(args)
            .arg("--vault")
            .arg(vault)
            .args(["--no-log", "--quiet"])
            .stdout(Stdio::null())
            .spawn()
            .expect("start ctxpack");
        let (status, max_rss) = wait_with_rusage(child.id() as libc::pid_t);
        times.push(start.elapsed());
        assert!(status == 0, "ctxpack failed with status {status}");
        peak = peak.max(max_rss);
    }
    times.sort();
    (times[RUNS / 2], times[0], peak)
}

fn wait_with_rusage(pid: libc::pid_t) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in for the child we spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet reaped; the pointers are valid.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 failed");
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

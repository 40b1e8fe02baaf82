//! Timing whole `ctxpack` processes: wall time and peak resident memory.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Runs `ctxpack args` (in `dir`, if given) `runs` times: the median and
/// minimum wall time and the peak resident memory in KB.
// The child is reaped by `wait4`, which also reports its peak memory.
#[allow(clippy::zombie_processes)]
pub fn measure_in(
    dir: Option<&std::path::Path>,
    args: &[String],
    runs: usize,
) -> (Duration, Duration, i64) {
    let mut times = Vec::with_capacity(runs);
    let mut peak = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ctxpack"));
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("start ctxpack");
        let (status, max_rss) = wait_with_rusage(child.id() as libc::pid_t);
        times.push(start.elapsed());
        assert!(status == 0, "ctxpack {args:?} failed with status {status}");
        peak = peak.max(max_rss);
    }
    times.sort();
    (times[runs / 2], times[0], peak)
}

/// `args`, then the vault and its index folder, quietly.
#[allow(dead_code)]
pub fn on_vault(args: &[&str], vault: &std::path::Path, index: &std::path::Path) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend([
        "--vault".into(),
        vault.display().to_string(),
        "--index-dir".into(),
        index.display().to_string(),
        "--quiet".into(),
    ]);
    all
}

#[allow(dead_code)]
pub fn measure(args: &[String], runs: usize) -> (Duration, Duration, i64) {
    measure_in(None, args, runs)
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

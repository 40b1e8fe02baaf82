"""Whole-process wall time of `ctxpack pack --note` on the 10k-note vault
(index already built), median and spread of N runs, against a topic pack:

    python3 ../shared/bench/qmd/gen_notes.py 10000 /tmp/vault10000
    python3 scripts/note_pack_time.py target/release/ctxpack /tmp/vault10000 /tmp/idx10000 15
"""
import subprocess, sys, time, statistics, os
BIN, VAULT, IDX = sys.argv[1], sys.argv[2], sys.argv[3]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 15
env = dict(os.environ, CTXPACK_INDEX_DIR=IDX)
def run(args):
    t = time.perf_counter()
    subprocess.run([BIN, "pack", *args, "--vault", VAULT, "--no-log", "-q", "--model", "none"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    return (time.perf_counter() - t) * 1000
cases = [
    ("topic pack 'reciprocal rank fusion'", ["reciprocal rank fusion"]),
    ("topic pack, --graph-depth 1", ["reciprocal rank fusion", "--graph-depth", "1"]),
    ("topic pack, --graph-depth 2", ["reciprocal rank fusion", "--graph-depth", "2"]),
    ("--note depth 0", ["--note", "concepts/authentication-patterns-049.md", "--depth", "0"]),
    ("--note depth 1 (default)", ["--note", "concepts/authentication-patterns-049.md"]),
    ("--note depth 2", ["--note", "concepts/authentication-patterns-049.md", "--depth", "2"]),
    ("--note depth 1, o200k", ["--note", "concepts/authentication-patterns-049.md", "--tokenizer", "o200k"]),
]
for _ in range(2):
    run(cases[0][1])
for name, args in cases:
    times = sorted(run(args) for _ in range(N))
    print(f"{name:40s} median {statistics.median(times):6.1f} ms  min {times[0]:6.1f}  max {times[-1]:6.1f}  (n={N})")

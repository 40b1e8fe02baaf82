"""Whole `ctxpack` processes with and without a live watcher, interleaved:

    python3 scripts/watcher_latency.py path/to/ctxpack VAULT [RUNS]

Indexes VAULT into a temporary folder, times search, pack and an o200k pack
RUNS times walking the vault, then starts `ctxpack index --watch` and times
them again (the watcher answers what changed). Prints median and best.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

binary, vault = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 11
index = tempfile.mkdtemp(prefix="ctxpack-watcher-latency-")
cases = {
    "search": ["search", "kalo mine", "--format", "files"],
    "pack": ["pack", "kalo mine", "--no-log"],
    "pack o200k": ["pack", "kalo mine", "--no-log", "--tokenizer", "o200k"],
}


def run(args):
    command = [binary] + args + ["--vault", vault, "--index-dir", index, "--model", "none", "--quiet"]
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


run(["index"])
results = {}
for mode in ["walk", "watcher"]:
    watcher = None
    if mode == "watcher":
        watcher = subprocess.Popen(
            [binary, "index", "--watch", "--vault", vault, "--index-dir", index, "--model", "none"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not os.path.exists(os.path.join(index, "watch.sock")):
            time.sleep(0.05)
        run(["index"])  # records the watcher's token
    for _ in range(runs):
        for case, args in cases.items():
            results.setdefault((mode, case), []).append(run(args))
    if watcher:
        watcher.kill()
        watcher.wait()
for (mode, case), times in results.items():
    print(f"{mode:8} {case:12} median {statistics.median(times):7.1f} ms  best {min(times):7.1f} ms  n={len(times)}")

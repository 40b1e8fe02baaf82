"""What a user meets right after turning semantic search on, over a vault
not yet embedded: the first `search` from the command line, then
`ctxpack serve` answering `initialize` and calls (official MCP Python SDK,
stdio) while it embeds the vault in the background.

    python3 scripts/embedding_latency.py path/to/ctxpack VAULT INDEX_DIR [SECONDS] [RUNS]

The model is the default one (`ctxpack model import ... --default`); the
index folder should hold a lexical index only (`ctxpack index --model
none`). It is never changed: each run works on a fresh copy of it, so every
first search and every server starts from nothing embedded (cold, as a new
user's). RUNS (default 9) first searches and RUNS servers answering
`initialize` are timed (wall time, and the search's CPU time), then one
server is watched for SECONDS (default 60) while it embeds, with a search
every 5 s, and stopped.
"""
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# Words of the generated 10k benchmark vault (scripts/bench-store makes one).
QUERIES = ["obsidian vault 7871", "event sourcing", "oauth tokens", "notes about the vault"]


def fresh_copy(index_dir):
    scratch = tempfile.mkdtemp(prefix="ctxpack-latency-")
    copy = os.path.join(scratch, "index")
    shutil.copytree(index_dir, copy)
    return scratch, copy


def spread(values):
    values = sorted(values)
    return f"median {statistics.median(values):.0f} ms, min {values[0]:.0f}, max {values[-1]:.0f} (n={len(values)})"


def first_search(binary, vault, index_dir, query):
    scratch, copy = fresh_copy(index_dir)
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [binary, "search", query, "--format", "json", "--vault", vault, "--index-dir", copy],
            capture_output=True,
            text=True,
            check=True,
        )
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        semantic = json.loads(done.stdout)["semantic"]
        return elapsed * 1000, cpu * 1000, semantic
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def params(binary, vault, index_dir):
    # The whole environment: the model folder may be set in it.
    return StdioServerParameters(
        command=binary, args=["serve", "--vault", vault, "--index-dir", index_dir], env=dict(os.environ)
    )


async def initialize_once(binary, vault, index_dir):
    """How long a fresh server takes to answer `initialize`, and its first search."""
    scratch, copy = fresh_copy(index_dir)
    try:
        start = time.perf_counter()
        async with stdio_client(params(binary, vault, copy)) as (read, write):
            async with ClientSession(read, write) as session:
                sent = time.perf_counter()
                await session.initialize()
                answered = time.perf_counter()
                await session.call_tool("search", {"query": QUERIES[1]})
                searched = time.perf_counter()
        return (answered - sent) * 1000, (answered - start) * 1000, (searched - answered) * 1000
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def watched(binary, vault, index_dir, seconds):
    scratch, copy = fresh_copy(index_dir)
    took_all = []
    try:
        start = time.perf_counter()
        async with stdio_client(params(binary, vault, copy)) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                i = 0
                while time.perf_counter() - start < seconds:
                    query = QUERIES[i % len(QUERIES)]
                    called = time.perf_counter()
                    result = await session.call_tool("search", {"query": query})
                    took = (time.perf_counter() - called) * 1000
                    took_all.append(took)
                    semantic = json.loads(result.content[0].text)["semantic"]
                    print(f"  t={called - start:5.1f} s  search {took:5.0f} ms  {semantic[:60]}")
                    i += 1
                    await asyncio.sleep(5)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"searches while embedding: {spread(took_all)}")


def main():
    binary, vault, index_dir = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 9
    walls, cpus = [], []
    for run in range(runs):
        wall, cpu, semantic = first_search(binary, vault, index_dir, QUERIES[run % len(QUERIES)])
        walls.append(wall)
        cpus.append(cpu)
        print(f"first search {run + 1}: {wall:.0f} ms wall, {cpu:.0f} ms CPU; {semantic[:50]}")
    print(f"first search (CLI), wall: {spread(walls)}")
    print(f"first search (CLI), CPU:  {spread(cpus)}")
    sent, started, searched = [], [], []
    for run in range(runs):
        after_sent, after_start, search = asyncio.run(initialize_once(binary, vault, index_dir))
        sent.append(after_sent)
        started.append(after_start)
        searched.append(search)
        print(
            f"serve {run + 1}: initialize {after_sent:.0f} ms after it was sent "
            f"({after_start:.0f} ms after the start); first search {search:.0f} ms"
        )
    print(f"initialize after it was sent: {spread(sent)}")
    print(f"initialize after the start:   {spread(started)}")
    print(f"first call after initialize:  {spread(searched)}")
    asyncio.run(watched(binary, vault, index_dir, seconds))


if __name__ == "__main__":
    main()

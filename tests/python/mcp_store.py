"""Two stateless `ctxpack serve --http --store` processes, one sync running
while they serve, and sixteen concurrent clients of the official MCP
Python SDK.

    python3 tests/python/mcp_store.py path/to/ctxpack STORE_URL path/to/vault

Every answer must be the CLI's answer for the store's state at that moment:
the old one before the sync commits, the new one after; once the sync has
finished, every server must answer with the new note. Prints one line per
check and "N passed, N failed" at the end.
"""
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

passed = 0
failed = 0
VAULT_ID = "mcp-store"
CLIENTS = 16
QUERIES = ["raft consensus", "leader election", "quorum", "共识算法", "vector clocks"]


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ctxpack(binary, store, *args):
    result = subprocess.run(
        [binary, *args, "--store", store, "--vault-id", VAULT_ID, "--model", "none"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"ctxpack {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def top_paths(binary, store, query):
    hits = json.loads(ctxpack(binary, store, "search", query, "--format", "json", "--limit", "5"))
    return [hit["path"] for hit in hits["hits"]]


def wait_for(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"no server on port {port}")


async def client(number, url, synced, observed, results):
    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            rounds = 0
            while True:
                done = synced.is_set()
                for query in QUERIES:
                    result = await session.call_tool("search", {"query": query, "limit": 5})
                    paths = [hit["path"] for hit in json.loads(result.content[0].text)["hits"]]
                    observed.append((number, query, paths))
                pack = await session.call_tool("context_pack", {"query": "raft consensus", "budget_tokens": 1200})
                if (
                    pack.is_error
                    or "# Context Pack: raft consensus" not in pack.content[0].text
                    or "# Budget: 1200 tokens" not in pack.content[0].text
                ):
                    results.append((number, "context_pack", pack.content[0].text[:200]))
                rounds += 1
                if done:
                    break
            # After the sync: the new note, from whichever server this is.
            result = await session.call_tool("search", {"query": "zebracorn", "limit": 3})
            found = [hit["path"] for hit in json.loads(result.content[0].text)["hits"]]
            if found[:1] != ["concepts/zebracorn.md"]:
                results.append((number, "zebracorn", found))
            return rounds


async def main(binary, store, vault):
    print(ctxpack(binary, store, "index", "--vault", vault).strip())
    expected_before = {q: top_paths(binary, store, q) for q in QUERIES}
    ports = [free_port(), free_port()]
    servers = [
        subprocess.Popen(
            [binary, "serve", "--http", f"127.0.0.1:{port}", "--store", store, "--vault-id", VAULT_ID,
             "--model", "none"],
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port in ports:
            wait_for(port)
        # The change the sync will bring: a new note, and an edit that moves
        # the "quorum" ranking.
        with open(os.path.join(vault, "concepts", "zebracorn.md"), "w") as f:
            f.write("---\ntitle: Zebracorn quorum\n---\nA zebracorn quorum needs a majority of quorum members.\n")
        synced = asyncio.Event()
        results = []
        observed = []
        tasks = [
            asyncio.create_task(client(n, f"http://127.0.0.1:{ports[n % 2]}/mcp", synced, observed, results))
            for n in range(CLIENTS)
        ]
        await asyncio.sleep(0.5)
        sync = await asyncio.create_subprocess_exec(
            binary, "index", "--vault", vault, "--store", store, "--vault-id", VAULT_ID, "--model", "none",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await sync.communicate()
        check("the sync ran while clients were served", sync.returncode == 0, out)
        synced.set()
        rounds = await asyncio.gather(*tasks)
        expected_after = {q: top_paths(binary, store, q) for q in QUERIES}
        check("the sync changed a ranking", expected_after != expected_before)
        wrong = [o for o in observed if o[2] not in (expected_before[o[1]], expected_after[o[1]])]
        check(f"{len(observed)} searches by {CLIENTS} clients on 2 servers ({sum(rounds)} rounds) all correct",
              not wrong, wrong[:5])
        check("every context pack was whole", not [r for r in results if r[1] == "context_pack"], results[:3])
        check("the new note is found on every server after the sync",
              not [r for r in results if r[1] == "zebracorn"], results[:3])
        check("every server is still running", all(s.poll() is None for s in servers))
    finally:
        for server in servers:
            server.terminate()
            server.wait()
    print(f"{passed} passed, {failed} failed")
    return failed == 0


if __name__ == "__main__":
    binary, store, vault = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.exit(0 if asyncio.run(main(binary, store, vault)) else 1)

"""What a user meets right after turning semantic search on, over a vault
not yet embedded: the first `search` from the command line, then
`ctxpack serve` answering `initialize` and calls (official MCP Python SDK,
stdio) while it embeds the vault in the background.

    python3 scripts/embedding_latency.py path/to/ctxpack VAULT INDEX_DIR [SECONDS]

The model is the default one (`ctxpack model import ... --default`); the
index folder should hold a lexical index only (`ctxpack index --model
none`), and is left with whatever was embedded meanwhile. The server is
watched for SECONDS (default 60), then stopped.
"""
import asyncio
import json
import os
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

# Words of the generated 10k benchmark vault (scripts/bench-store makes one).
QUERIES = ["obsidian vault 7871", "event sourcing", "oauth tokens", "notes about the vault"]


def first_search(binary, vault, index_dir):
    start = time.perf_counter()
    done = subprocess.run(
        [binary, "search", QUERIES[0], "--format", "json", "--vault", vault, "--index-dir", index_dir],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - start
    semantic = json.loads(done.stdout)["semantic"]
    print(f"first search (CLI): {elapsed * 1000:.0f} ms; semantic: {semantic}")


async def served(binary, vault, index_dir, seconds):
    # The whole environment: the model folder may be set in it.
    params = StdioServerParameters(
        command=binary, args=["serve", "--vault", vault, "--index-dir", index_dir], env=dict(os.environ)
    )
    start = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            sent = time.perf_counter()
            await session.initialize()
            answered = time.perf_counter()
            print(
                f"serve: initialize answered {(answered - sent) * 1000:.0f} ms after it was sent, "
                f"{(answered - start) * 1000:.0f} ms after the server was started"
            )
            i = 0
            while time.perf_counter() - start < seconds:
                query = QUERIES[i % len(QUERIES)]
                called = time.perf_counter()
                result = await session.call_tool("search", {"query": query})
                took = time.perf_counter() - called
                semantic = json.loads(result.content[0].text)["semantic"]
                print(f"  t={called - start:5.1f} s  search {took * 1000:5.0f} ms  {semantic[:60]}")
                i += 1
                await asyncio.sleep(5)


def main():
    binary, vault, index_dir = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 60
    first_search(binary, vault, index_dir)
    asyncio.run(served(binary, vault, index_dir, seconds))


if __name__ == "__main__":
    main()

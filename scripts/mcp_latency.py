"""Latency of `ctxpack serve` tools with a warm server, over stdio, with the
official MCP Python SDK:

    python3 scripts/mcp_latency.py path/to/ctxpack VAULT [INDEX_DIR] [CALLS]

Prints p50/p90/p99 of `search` and of `context_pack` at the default budget,
then the same for CLIENTS concurrent callers.
"""
import asyncio
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

QUERIES = ["kalo mine", "vozi quasto", "derruru samon", "talmon linka", "stopra gor", "benqua sapra"]


def percentiles(samples):
    samples = sorted(samples)
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] * 1000
    return f"p50 {pick(0.5):6.1f} ms  p90 {pick(0.9):6.1f} ms  p99 {pick(0.99):6.1f} ms  (n={len(samples)})"


async def timed(session, tool, arguments):
    start = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    elapsed = time.perf_counter() - start
    error = getattr(result, "is_error", getattr(result, "isError", False))
    if error:
        raise RuntimeError(result.content[0].text)
    return elapsed


async def main(binary, vault, index_dir, calls):
    args = ["serve", "--vault", vault] + (["--index-dir", index_dir] if index_dir else [])
    async with stdio_client(StdioServerParameters(command=binary, args=args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await timed(session, "search", {"query": "warm up"})
            for tool, make in [
                ("search", lambda q: {"query": q}),
                ("context_pack", lambda q: {"query": q}),
            ]:
                samples = [await timed(session, tool, make(QUERIES[i % len(QUERIES)])) for i in range(calls)]
                print(f"{tool:<13} sequential  {percentiles(samples)}")
            clients = 50
            start = time.perf_counter()
            samples = await asyncio.gather(
                *[timed(session, "context_pack", {"query": QUERIES[i % len(QUERIES)]}) for i in range(clients)]
            )
            print(f"context_pack {clients} at once  {percentiles(samples)}  all answered in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    asyncio.run(
        main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None, int(sys.argv[4]) if len(sys.argv) > 4 else 100)
    )

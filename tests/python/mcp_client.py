"""Drives `ctxpack serve` with the official MCP Python SDK, over stdio and
over streamable HTTP.

    python3 tests/python/mcp_client.py path/to/ctxpack path/to/vault [path/to/novel]

Checks, on both transports: initialize, the tool list, every tool, the error
cases and a path escape; on HTTP also the bearer token and the Origin check.
Given a copy of examples/novel, also the `assemble` tool over stdio.
Prints one line per check and "N passed, N failed" at the end.
"""
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

passed = 0
failed = 0


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def field(obj, snake, camel):
    """SDK 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


# What each tool declares it does: (read-only, destructive, idempotent, open-world).
ANNOTATIONS = {
    "search": (True, False, True, False),
    "get_note": (True, False, True, False),
    "status": (True, False, True, False),
    "read_pack": (True, False, True, False),
    "grep_pack": (True, False, True, False),
    "context_pack": (False, False, False, False),
    "mark_useful": (False, False, False, False),
    "assemble": (False, False, True, False),
}

# The integer arguments' bounds, as the server enforces them.
BOUNDS = {
    ("search", "limit"): (1, 100),
    ("context_pack", "budget_tokens"): (1, 100000),
    ("context_pack", "recent_dailies"): (0, 30),
    ("context_pack", "depth"): (0, 3),
    ("context_pack", "graph_depth"): (0, 3),
    ("grep_pack", "context"): (0, 20),
    ("assemble", "budget"): (1, 100000),
}


def annotations_of(tool):
    a = tool.annotations
    if a is None:
        return None
    return (
        field(a, "read_only_hint", "readOnlyHint"),
        field(a, "destructive_hint", "destructiveHint"),
        field(a, "idempotent_hint", "idempotentHint"),
        field(a, "open_world_hint", "openWorldHint"),
    )


def check_listing(init, tools):
    """Every listed tool carries its annotations and its bounds, and the
    server's instructions name it."""
    instructions = init.instructions or ""
    for tool in tools.tools:
        check(f"{tool.name} is annotated", annotations_of(tool) == ANNOTATIONS[tool.name], annotations_of(tool))
        check(f"the instructions name {tool.name}", tool.name in instructions)
        properties = field(tool, "input_schema", "inputSchema").get("properties", {})
        for (name, argument), (low, high) in BOUNDS.items():
            if name == tool.name:
                schema = properties[argument]
                got = (schema.get("minimum"), schema.get("maximum"))
                check(f"{name}.{argument} is bounded {low}-{high}", got == (low, high), got)
    pack = next(t for t in tools.tools if t.name == "context_pack")
    check("context_pack has no generated_at argument",
          "generated_at" not in field(pack, "input_schema", "inputSchema")["properties"])


def text_of(result):
    return result.content[0].text if result.content else ""


def is_error(result):
    return bool(field(result, "is_error", "isError"))


async def exercise(session, transport):
    global passed, failed
    before = (passed, failed)
    await checks(session)
    print(f"-- {transport}: {passed - before[0]} passed, {failed - before[1]} failed")


async def checks(session):
    init = await session.initialize()
    check("initialize names the server", field(init, "server_info", "serverInfo").name == "ctxpack")

    tools = await session.list_tools()
    names = sorted(tool.name for tool in tools.tools)
    check(
        "tools are listed",
        names == ["context_pack", "get_note", "grep_pack", "mark_useful", "read_pack", "search", "status"],
        names,
    )
    check_listing(init, tools)
    check("the instructions leave assemble out on a plain vault", "assemble" not in (init.instructions or ""))
    for tool in tools.tools:
        check(f"{tool.name} has a description", bool(tool.description))
        check(f"{tool.name} has an input schema", field(tool, "input_schema", "inputSchema").get("type") == "object")

    result = await session.call_tool("search", {"query": "paxos", "limit": 3})
    hits = json.loads(text_of(result))
    check("search finds the paxos note", hits["hits"][0]["path"] == "concepts/paxos.md")

    result = await session.call_tool(
        "context_pack", {"query": "raft consensus", "budget_tokens": 800}
    )
    bundle = text_of(result)
    check("context_pack returns a pack", bundle.startswith("# Context Pack: raft consensus\n"))
    check("context_pack stays within budget", "| Actual: " in bundle and not is_error(result))

    result = await session.call_tool(
        "context_pack",
        {"query": "raft", "subqueries": ["who described paxos"], "format": "json", "budget_tokens": 2000},
    )
    pack = json.loads(text_of(result))
    check("context_pack json has a research trace", pack["research"]["strategy"] == "coverage_slots")
    check("context_pack json is within budget", pack["actual"] <= 2000)

    result = await session.call_tool("context_pack", {"recent": True, "recent_dailies": 2, "format": "json"})
    pack = json.loads(text_of(result))
    check("recent pack", pack["mode"] == "recent" and not is_error(result))

    result = await session.call_tool("get_note", {"path": "concepts/quorum.md", "heading": "Key Ideas"})
    check("get_note returns a section", text_of(result).startswith("## Key Ideas"))

    result = await session.call_tool("mark_useful", {"path": "concepts/quorum.md", "useful": True})
    check("mark_useful records a vote", json.loads(text_of(result))["useful"] >= 1)

    result = await session.call_tool("status", {})
    check("status counts the notes", json.loads(text_of(result))["notes"] == 20)

    for tool, arguments, message in [
        ("context_pack", {"query": "raft", "budget_tokens": 0}, "budget_tokens must be between"),
        ("context_pack", {"query": "x", "subqueries": ["a", "b", "c", "d", "e", "f"]}, "at most 5 subqueries"),
        ("search", {"query": ""}, "query is empty"),
        ("get_note", {"path": "../../etc/passwd"}, "no note '../../etc/passwd' in the vault"),
        ("get_note", {"path": "/etc/passwd"}, "no note '/etc/passwd' in the vault"),
    ]:
        result = await session.call_tool(tool, arguments)
        check(
            f"{tool} refuses {arguments}",
            is_error(result) and message in text_of(result),
            text_of(result),
        )

    result = await session.call_tool("search", {"query": "raft"})
    check("the server still serves after errors", not is_error(result))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url, headers):
    request = urllib.request.Request(
        url,
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


async def assemble_checks(binary, project, index):
    """The layered assembly over a writing project: every agent of a chapter
    shares the baseline, and hidden fields stay hidden."""
    params = StdioServerParameters(command=binary, args=["serve", "--vault", project, "--index-dir", index])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            check("assemble is offered over a writing project", "assemble" in [t.name for t in tools.tools])
            check_listing(init, tools)
            packs = {}
            for agent, scenario in [("writer", "continuation"), ("detector", "validation"), ("judge", "quality_gate")]:
                arguments = {"work": "青灯录", "scenario": scenario, "chapter": 9, "intent": "第9章",
                             "candidate": "works/青灯录/草稿/第009章.md", "format": "json"}
                if agent == "writer":
                    del arguments["candidate"]
                result = await session.call_tool("assemble", arguments)
                check(f"assemble for the {agent}", not is_error(result), text_of(result)[:300])
                if not is_error(result):
                    packs[agent] = json.loads(text_of(result))
            if len(packs) == 3:
                prefixes = {p["text"].encode()[: p["shared_prefix_bytes"]] for p in packs.values()}
                check("the three agents share one byte-identical prefix", len(prefixes) == 1)
                check("the writer's pack hides the truth", "## 谜底与真相" not in packs["writer"]["text"])
                check("the detector's pack holds the truth", "谜底与真相" in packs["detector"]["text"])
                check("the pack is within budget", all(p["tokens"] <= p["budget"] for p in packs.values()))
            result = await session.call_tool(
                "assemble", {"work": "青灯录", "scenario": "rewrite", "chapter": 8, "intent": "改"}
            )
            check("assemble refuses a rewrite without a selection",
                  is_error(result) and "requires --selection" in text_of(result), text_of(result))


async def main(binary, vault, project=None):
    index = tempfile.mkdtemp(prefix="ctxpack-mcp-index-")
    if project:
        await assemble_checks(binary, project, tempfile.mkdtemp(prefix="ctxpack-mcp-index-"))
    params = StdioServerParameters(command=binary, args=["serve", "--vault", vault, "--index-dir", index])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")

    port = free_port()
    token = "test-token-123"
    server = subprocess.Popen(
        [binary, "serve", "--http", f"127.0.0.1:{port}", "--token", token, "--vault", vault, "--index-dir", index],
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        auth = {"Authorization": f"Bearer {token}"}
        check("http refuses a missing token", http_status(url, {}) == 401)
        check("http refuses a wrong token", http_status(url, {"Authorization": "Bearer nope"}) == 401)
        status = http_status(url, {**auth, "Origin": "http://evil.example"})
        check("http refuses a foreign Origin", status == 403, status)
        async with create_mcp_http_client(headers=auth) as http_client:
            async with streamable_http_client(url, http_client=http_client) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    await exercise(session, "http")
    finally:
        server.terminate()
        server.wait(timeout=10)
    result = subprocess.run(
        [binary, "serve", "--http", "0.0.0.0:0", "--vault", vault, "--index-dir", index],
        capture_output=True, text=True, timeout=30,
    )
    check("a non-loopback bind needs a token", result.returncode == 2 and "needs --token" in result.stderr, result.stderr)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)

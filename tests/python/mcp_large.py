"""Large packs, resources and prompts through the official MCP Python SDK.

    python3 tests/python/mcp_large.py path/to/ctxpack [ROUNDS]

Writes a vault big enough for a 60,000-token pack, then checks over stdio:
the pack read back through read_pack equals the CLI's output byte for
byte, each part within --max-result-tokens; grep_pack; a stale handle is a
clear error; notes listed (with pagination) and read as resources; a pack
read as a resource; path escapes through resource URIs refused; the
context_pack prompt. Then times the read_pack round trip against one
context_pack call of the same pack (a server whose limit lets the whole
pack through) and prints the figures (median of ROUNDS, default 5).
Prints "N passed, N failed" at the end.
"""
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

passed = 0
failed = 0
GENERATED_AT = "2026-06-01T00:00:00Z"
# The same time for the server: its packs are stamped as the CLI's are.
SERVER_ENV = {**os.environ, "SOURCE_DATE_EPOCH": "1780272000"}
BUDGET = 60000
LIMIT = 20000
TOPIC = "raft consensus"


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {str(detail)[:500]}")


def field(obj, snake, camel):
    """SDK 2.x names fields in snake_case, 1.x in camelCase."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def is_error(result):
    return bool(field(result, "is_error", "isError"))


def chars4(text):
    return (len(text) + 3) // 4


def write_vault(root):
    """24 notes of about 4,000 tokens each on the topic, and a few others."""
    words = ["leader", "follower", "term", "log", "commit", "quorum", "election", "heartbeat",
             "snapshot", "replica", "index", "vote", "timeout", "entry", "state", "machine"]
    for i in range(24):
        lines = []
        for j in range(160):
            picked = " ".join(words[(i * 7 + j * 3 + k) % len(words)] for k in range(12))
            lines.append(f"Raft consensus note {i} line {j}: the {picked}.")
        body = "\n\n".join("\n".join(lines[p:p + 8]) for p in range(0, len(lines), 8))
        text = (f"---\ntitle: Raft part {i}\ntags: [raft, consensus]\n"
                f"summary: \"Raft consensus, part {i}.\"\nupdated: 2026-05-01\n---\n{body}\n")
        os.makedirs(os.path.join(root, "raft"), exist_ok=True)
        with open(os.path.join(root, "raft", f"part-{i:02}.md"), "w") as f:
            f.write(text)
    for name in ["paxos", "gossip", "clocks"]:
        with open(os.path.join(root, f"{name}.md"), "w") as f:
            f.write(f"---\ntitle: {name.title()}\n---\nAbout {name}.\n")
    with open(os.path.join(root, "AGENTS.md"), "w") as f:
        f.write("Agent instructions, never a note.\n")


def part_and_note(result):
    text = result.content[0].text
    note = json.loads(result.content[1].text) if len(result.content) > 1 else None
    return text, note


async def read_whole(session, arguments):
    """A context_pack call and the read_pack calls after it: the pack, the
    parts, the handle."""
    result = await session.call_tool("context_pack", arguments)
    if is_error(result):
        return result.content[0].text, [], None
    first, note = part_and_note(result)
    parts = [first]
    handle = note["pack_handle"] if note else None
    offset = note.get("next_offset") if note else None
    while offset is not None:
        result = await session.call_tool("read_pack", {"pack_handle": handle, "offset": offset})
        part, note = part_and_note(result)
        parts.append(part)
        offset = note.get("next_offset")
    return "".join(parts), parts, handle


def pack_arguments():
    return {"query": TOPIC, "budget_tokens": BUDGET}


async def functional_checks(binary, vault, index, expected):
    params = StdioServerParameters(
        command=binary,
        args=["serve", "--vault", vault, "--index-dir", index, "--max-result-tokens", str(LIMIT)],
        env=SERVER_ENV,
    )
    updated = asyncio.Queue()

    async def on_message(message):
        # SDK 1.x wraps notifications in a root model, 2.x does not.
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            await updated.put(str(root.params.uri))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            check("read_pack and grep_pack are tools", "read_pack" in tools and "grep_pack" in tools, tools)

            whole, parts, handle = await read_whole(session, pack_arguments())
            check("the pack is split into parts", len(parts) >= 3, len(parts))
            check("every part is within --max-result-tokens",
                  all(chars4(p) <= LIMIT for p in parts), [chars4(p) for p in parts])
            check("every part ends at a line end", all(p.endswith("\n") for p in parts))
            check("read back through read_pack equals the CLI's pack byte for byte",
                  whole.encode() == expected.encode(), (len(whole), len(expected)))

            result = await session.call_tool(
                "grep_pack", {"pack_handle": handle, "pattern": r"note 3 line 17:", "context": 1})
            found = json.loads(result.content[0].text)
            check("grep_pack finds a line with its context",
                  len(found["matches"]) == 1 and found["matches"][0]["text"].count("\n") == 3, found)
            offset = found["matches"][0]["offset"]
            result = await session.call_tool("read_pack", {"pack_handle": handle, "offset": offset})
            check("a grep offset is a read_pack offset",
                  result.content[0].text == expected[len(expected.encode()[:offset].decode()):][:len(result.content[0].text)])
            for arguments, message in [
                ({"pack_handle": "pack-999-0123456789abcdef", "offset": 0}, "unknown or expired"),
                ({"pack_handle": handle, "offset": 3}, "not at the start of a line"),
            ]:
                result = await session.call_tool("read_pack", arguments)
                check(f"read_pack refuses {arguments}",
                      is_error(result) and message in result.content[0].text, result.content[0].text)
            result = await session.call_tool("grep_pack", {"pack_handle": handle, "pattern": "(", "context": 1})
            check("grep_pack refuses a broken pattern", is_error(result) and "invalid pattern" in result.content[0].text)

            # Resources: every note, paginated; read as get_note reads it.
            uris, cursor, pages = [], None, 0
            while True:
                listed = await session.list_resources(cursor) if cursor else await session.list_resources()
                uris += [str(r.uri) for r in listed.resources]
                pages += 1
                cursor = field(listed, "next_cursor", "nextCursor")
                if not cursor or pages > 100:
                    break
            check("every note is a resource", len(uris) == 27 and all(u.startswith("ctxpack://note/") for u in uris),
                  (len(uris), uris[:3]))
            check("AGENTS.md is not a resource", not any("AGENTS" in u for u in uris))
            uri = "ctxpack://note/raft/part-03.md"
            read = await session.read_resource(uri)
            note = await session.call_tool("get_note", {"path": "raft/part-03.md"})
            check("a note read as a resource is get_note's text",
                  read.contents[0].text == note.content[0].text, read.contents[0].text[:100])
            read = await session.read_resource(f"ctxpack://pack/{handle}")
            check("a pack read as a resource by its handle is the whole pack", read.contents[0].text == expected)
            for bad in ["ctxpack://note/%2E%2E/%2E%2E/etc/passwd", "ctxpack://note/%2Fetc%2Fpasswd",
                        "ctxpack://note/AGENTS.md", "file:///etc/passwd", "ctxpack://pack/pack-1-nope"]:
                try:
                    await session.read_resource(bad)
                    check(f"resource {bad} is refused", False, "it was read")
                except Exception as error:  # the SDK raises McpError
                    check(f"resource {bad} is refused", True, error)

            prompts = await session.list_prompts()
            check("the context_pack prompt is listed", [p.name for p in prompts.prompts] == ["context_pack"])
            prompt = await session.get_prompt("context_pack", {"topic": TOPIC, "budget": "3000"})
            message = prompt.messages[0]
            check("the prompt returns the pack as a user message",
                  message.role == "user" and message.content.text.startswith(f"# Context Pack: {TOPIC}\n")
                  and chars4(message.content.text) <= 3000, message.content.text[:200])
            try:
                await session.get_prompt("context_pack", {"topic": TOPIC, "budget": "0"})
                check("the prompt refuses a bad budget", False)
            except Exception:
                check("the prompt refuses a bad budget", True)

            # A subscribed note that changes is announced (the same text is
            # written again, so the packs stay the same).
            await session.subscribe_resource("ctxpack://note/paxos.md")
            try:
                await session.subscribe_resource("ctxpack://note/%2E%2E/outside.md")
                check("a subscription outside the vault is refused", False)
            except Exception:
                check("a subscription outside the vault is refused", True)
            path = os.path.join(vault, "paxos.md")
            with open(path) as f:
                text = f.read()
            await asyncio.sleep(0.5)
            with open(path, "w") as f:
                f.write(text)
            try:
                uri = await asyncio.wait_for(updated.get(), timeout=10)
            except asyncio.TimeoutError:
                uri = None
            check("a change to a subscribed note is notified", uri == "ctxpack://note/paxos.md", uri)


async def timed(binary, vault, index, limit, rounds):
    params = StdioServerParameters(
        command=binary,
        args=["serve", "--vault", vault, "--index-dir", index, "--max-result-tokens", str(limit)],
        env=SERVER_ENV,
    )
    times = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await read_whole(session, pack_arguments())  # warm up
            for _ in range(rounds):
                start = time.perf_counter()
                whole, parts, _ = await read_whole(session, pack_arguments())
                times.append(time.perf_counter() - start)
    return statistics.median(times), len(parts), whole


async def main(binary, rounds=5):
    vault = tempfile.mkdtemp(prefix="ctxpack-large-vault-")
    index = tempfile.mkdtemp(prefix="ctxpack-large-index-")
    write_vault(vault)
    expected = subprocess.run(
        [binary, "pack", TOPIC, "--budget", str(BUDGET), "--vault", vault, "--index-dir", index,
         "--generated-at", GENERATED_AT, "--no-log"],
        capture_output=True, text=True, check=True,
    ).stdout
    check("the CLI's pack is about 60,000 tokens", 55000 <= chars4(expected) <= BUDGET, chars4(expected))
    await functional_checks(binary, vault, index, expected)

    rounds = int(rounds)
    single, single_parts, single_text = await timed(binary, vault, index, 1_000_000, rounds)
    split, split_parts, split_text = await timed(binary, vault, index, LIMIT, rounds)
    check("one call and the round trip give the same pack", single_text == split_text == expected)
    ratio = split / single
    print(f"figures: pack {chars4(expected)} tokens, {len(expected.encode())} bytes; "
          f"one context_pack call {single * 1000:.1f} ms ({single_parts} part); "
          f"context_pack + read_pack round trip {split * 1000:.1f} ms ({split_parts} parts); "
          f"ratio {ratio:.2f} (median of {rounds})")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)

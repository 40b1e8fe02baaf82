#!/usr/bin/env python3
"""Counts search snippets cut inside a link, an embed or a URL (issue 40).

Runs 20 searches (10 on each real vault) and prints, per query, how many
of its snippets end or start inside link markup: an unclosed `[[` or `](`,
a `[` label never closed, or a URL cut at a dot (`https://docker.`).

usage: scripts/snippet_cuts.py CTXPACK VAULTS_DIR
(VAULTS_DIR holds itnotes-zh and kepano-obsidian; copy it to /tmp first:
searching builds an index, never writes into the vault.)
"""

import json
import re
import subprocess
import sys

QUERIES = {
    "itnotes-zh": [
        "docker 镜像",
        "如何删除 docker 镜像",
        "vim 替换",
        "git 分支",
        "nginx 配置",
        "mysql 索引",
        "linux 代理",
        "python 虚拟环境",
        "java maven 仓库",
        "php 扩展",
    ],
    "kepano-obsidian": [
        "evergreen notes",
        "daily notes",
        "books",
        "Kevin Kelly",
        "Steph Ango",
        "templates",
        "recipes",
        "clippings",
        "movies",
        "file over app",
    ],
}

URL_CUT = re.compile(r"https?://\S*\.$")


def cut_inside(snippet: str) -> bool:
    """Whether the snippet ends (or starts) inside link or URL markup."""
    text = snippet.strip()
    if text.count("[[") > text.count("]]"):
        return True
    if text.count("](") > len(re.findall(r"\]\([^)]*\)", text)):
        return True
    if text.count("[") > text.count("]"):
        return True
    if URL_CUT.search(text) or text.endswith("!"):
        return True
    if text.startswith(("]]", "](", "//")):
        return True
    return False


def main() -> None:
    ctxpack, vaults = sys.argv[1], sys.argv[2]
    cut = total = 0
    for vault, queries in QUERIES.items():
        for query in queries:
            out = subprocess.run(
                [ctxpack, "search", query, "--vault", f"{vaults}/{vault}",
                 "--format", "json", "--limit", "10", "--model", "none", "-q"],
                capture_output=True, text=True, check=True,
            ).stdout
            snippets = [h["snippet"] for h in json.loads(out)["hits"] if h.get("snippet")]
            bad = [s for s in snippets if cut_inside(s)]
            cut += len(bad)
            total += len(snippets)
            for s in bad:
                print(f"  {vault} {query!r}: {s!r}")
    print(f"snippets cut inside a link or URL: {cut} of {total} (20 searches)")


if __name__ == "__main__":
    main()

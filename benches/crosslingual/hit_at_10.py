#!/usr/bin/env python3
"""Cross-lingual hit@10: 40 short English notes (corpus.jsonl, written for
ctxpack), a Chinese and a Japanese question for each (queries.zh.tsv,
queries.ja.tsv; qrels.tsv). Writes the notes into a temporary vault, runs
`ctxpack search` for every question and prints, per language, the share of
questions whose note is in the top 10 (and top 1), hybrid and dense-only.

usage: hit_at_10.py CTXPACK_BINARY [--model NAME] [extra search args...]
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
binary, extra = sys.argv[1], sys.argv[2:]

with tempfile.TemporaryDirectory() as tmp:
    vault = os.path.join(tmp, "vault")
    os.mkdir(vault)
    with open(os.path.join(here, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            with open(os.path.join(vault, doc["_id"] + ".md"), "w", encoding="utf-8") as note:
                note.write(f"---\ntitle: {doc['title']}\n---\n{doc['text']}\n")
    index = os.path.join(tmp, "index")
    for mode, weights in (("hybrid", []), ("dense only", ["--weight", "bm25=0", "--weight", "frontmatter=0"])):
        for lang in ("zh", "ja"):
            hits1 = hits10 = total = 0
            with open(os.path.join(here, f"queries.{lang}.tsv"), encoding="utf-8") as f:
                for line in f:
                    qid, text = line.rstrip("\n").split("\t")
                    want = "n" + qid[len(lang):] + ".md"
                    out = subprocess.run(
                        [binary, "search", text, "--format", "json", "--limit", "10",
                         "--vault", vault, "--index-dir", index, *weights, *extra],
                        check=True, capture_output=True, text=True).stdout
                    paths = [h["path"] for h in json.loads(out)["hits"]]
                    total += 1
                    hits10 += want in paths[:10]
                    hits1 += paths[:1] == [want]
            print(f"{mode:10} {lang}: hit@10 {hits10 / total:.3f}  hit@1 {hits1 / total:.3f}  ({total} questions)")

"""Checks that `ctxpack model embed` gives the same vectors as the model's
own reference implementation (the Python extension inside the
tokenlearn-static-model wheel), on texts written for this check.

    python tests/python/static_model_parity.py path/to/ctxpack

Run in a virtualenv where the wheel is installed, with CTXPACK_MODELS_DIR
pointing at a store the wheel was imported into.
"""
import json
import math
import subprocess
import sys

from static_model import get_embeddings

TEXTS = [
    "distributed consensus",
    "Raft elects a leader and replicates the log.",
    "分布式共识算法选举领导者",
    "混合 mixed text with 中文 and English, numbers 12345!",
    "  leading spaces\tand\ttabs  ",
    "Ünïcödé façade naïve café",
    "emoji 🚀 rocket",
    "runes ᚠᚢᚦ are unknown pieces",
    "a",
    "The quick brown fox jumps over the lazy dog. " * 40,
    "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ",
    "x" * 3000,
]


def main(binary):
    worst = 1.0
    for text in TEXTS:
        reference = get_embeddings(text)
        result = subprocess.run([binary, "model", "embed", text], capture_output=True, text=True, check=True)
        ours = json.loads(result.stdout)["vector"]
        norm = math.sqrt(sum(a * a for a in reference)) * math.sqrt(sum(b * b for b in ours))
        cosine = sum(a * b for a, b in zip(reference, ours)) / norm
        worst = min(worst, cosine)
        print(f"{cosine:.6f}  {text[:50]!r}")
    print(f"worst cosine {worst:.6f} over {len(TEXTS)} texts")
    return 0 if worst > 0.9999 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))

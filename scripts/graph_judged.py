"""Precision of the neighbours --graph-depth adds, on a hand-judged set of
queries over examples/vault (relevant notes chosen by reading the notes,
before any run):

    python3 scripts/graph_judged.py target/release/ctxpack examples/vault
"""
import json, subprocess, sys, shutil, tempfile, os
BIN, VAULT = sys.argv[1], sys.argv[2]
JUDGED = {
    "how raft replicates the log": ["concepts/raft.md", "concepts/log-replication.md", "concepts/quorum.md"],
    "leader election": ["concepts/leader-election.md", "concepts/raft.md", "concepts/paxos.md", "entities/etcd.md"],
    "paxos acceptors": ["concepts/paxos.md", "concepts/quorum.md", "entities/leslie-lamport.md", "concepts/共识算法.md"],
    "merging replicas without consensus": ["concepts/crdt.md", "concepts/vector-clocks.md", "concepts/gossip-protocols.md"],
    "atomic commit across shards": ["concepts/two-phase-commit.md", "concepts/分布式事务.md", "entities/cockroachdb.md", "entities/tidb.md"],
    "consistent hashing ring": ["concepts/consistent-hashing.md", "concepts/gossip-protocols.md"],
    "which consensus library to use": ["synthesis/choosing-a-consensus-library.md", "entities/etcd.md", "concepts/raft.md"],
    "happened-before ordering of events": ["concepts/vector-clocks.md", "entities/leslie-lamport.md", "concepts/crdt.md"],
    "分布式数据库": ["entities/tidb.md", "entities/cockroachdb.md", "concepts/分布式事务.md"],
    "quorum overlap": ["concepts/quorum.md", "concepts/paxos.md", "concepts/raft.md", "concepts/leader-election.md"],
}
tmp = tempfile.mkdtemp()
vault = os.path.join(tmp, "vault"); shutil.copytree(VAULT, vault)
def pack(q, budget, depth, direction="both"):
    out = subprocess.run([BIN, "pack", q, "--vault", vault, "--index-dir", os.path.join(tmp, "idx"), "--no-log",
        "--budget", str(budget), "--graph-depth", str(depth), "--graph-direction", direction, "--format", "json",
        "--generated-at", "2026-06-01T00:00:00Z", "-q"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
for budget in [1000, 2000]:
  for depth, direction in [(1, "both"), (1, "out"), (2, "both")]:
    added = rel_added = cand = rel_cand = 0; recall0 = recall1 = 0.0; pages0 = pages1 = 0; rows = []
    for q, rel in JUDGED.items():
        p0 = pack(q, budget, 0); p1 = pack(q, budget, depth, direction)
        n = [x["path"] for x in p1.get("graph", {}).get("neighbours", [])]
        pg0 = [x["path"] for x in p0["pages"]]; pg1 = [x["path"] for x in p1["pages"]]
        # an added neighbour counts if it reached the pack's pages
        shown = [x for x in n if x in pg1 and x not in pg0]
        cand += len(n); rel_cand += sum(1 for x in n if x in rel)
        added += len(shown); rel_added += sum(1 for x in shown if x in rel)
        recall0 += sum(1 for x in rel if x in pg0) / len(rel); recall1 += sum(1 for x in rel if x in pg1) / len(rel)
        pages0 += len(pg0); pages1 += len(pg1)
        rows.append((q, shown))
    k = len(JUDGED)
    print(f"budget {budget} depth {depth} {direction}: neighbours added/moved up {cand}, relevant {rel_cand} (precision {rel_cand/max(cand,1):.2f}); newly in the pack {added}, relevant {rel_added}"
          f" (precision {rel_added/max(added,1):.2f}); recall of relevant notes in pages {recall0/k:.3f} -> {recall1/k:.3f};"
          f" pages/pack {pages0/k:.1f} -> {pages1/k:.1f}")
    for q, shown in rows:
        if shown: print("   ", q, "->", shown)

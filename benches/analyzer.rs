//! The index analyzer's speed, in process, on one thread: the texts of a
//! synthetic vault (benches/support/synth.rs, 1,000 notes) tokenized as the
//! index and the store tokenize them, then counted into a note's terms as
//! a store sync counts them. Prints MB/s, tokens/s and ns per token. Run
//! with `cargo bench --bench analyzer`.

#[path = "support/synth.rs"]
mod synth;

use std::time::Instant;

use ctxpack::internals::NoteTerms;
use ctxpack::internals::analyzer;
use tantivy::tokenizer::TokenStream;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    synth::generate(dir.path(), 1_000, 42).expect("the synthetic vault");
    let mut notes = Vec::new();
    for entry in walkdir(dir.path()) {
        let text = std::fs::read_to_string(&entry).expect("a note");
        let rel = entry
            .strip_prefix(dir.path())
            .unwrap()
            .to_string_lossy()
            .to_string();
        notes.push(ctxpack::parse_note(&rel, &text, None).0);
    }
    let bytes: usize = notes.iter().map(|n| n.body.len()).sum();
    let mut analyzer = analyzer();
    for round in 0..3 {
        let started = Instant::now();
        let mut tokens = 0usize;
        for note in &notes {
            let mut stream = analyzer.token_stream(&note.body);
            while stream.advance() {
                tokens += 1;
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "round {round}: tokenize {} notes' bodies: {:.1} MB/s, {:.2} M tokens/s, {:.0} ns/token",
            notes.len(),
            bytes as f64 / seconds / 1e6,
            tokens as f64 / seconds / 1e6,
            seconds * 1e9 / tokens as f64,
        );
    }
    for round in 0..3 {
        let started = Instant::now();
        let mut terms = 0usize;
        for note in &notes {
            terms += NoteTerms::of(&mut analyzer, note).dictionary.len();
        }
        let seconds = started.elapsed().as_secs_f64();
        println!(
            "round {round}: count {} notes' terms: {:.1} MB/s of body, {:.0} µs/note ({terms} terms)",
            notes.len(),
            bytes as f64 / seconds / 1e6,
            seconds * 1e6 / notes.len() as f64,
        );
    }
}

/// Every Markdown file under `root`, in path order.
fn walkdir(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

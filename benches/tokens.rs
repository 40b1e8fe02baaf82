//! Exact token counting, in process, on one thread: the notes of a
//! synthetic vault (benches/support/synth.rs, 1,000 notes) and Chinese
//! prose (the CMRC corpus beside the project, if there) counted with ctxpack's prepared vocabularies and with the
//! `bpe-openai` library, which must agree. Prints load times and MB/s. Run
//! with `cargo bench --bench tokens`.

#[path = "support/synth.rs"]
mod synth;

use std::time::Instant;

use ctxpack::Tokenizer;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    synth::generate(dir.path(), 1_000, 42).expect("the synthetic vault");
    let mut english = String::new();
    for entry in walkdir(dir.path()) {
        english.push_str(&std::fs::read_to_string(&entry).expect("a note"));
    }
    // Real Chinese prose when the benchmark data is beside the project
    // (the CMRC corpus's texts, ~2.5 MB), else one sentence repeated.
    let chinese = std::fs::read_to_string("../shared/bench/cmrc/corpus.jsonl")
        .map(|corpus| {
            let mut text = String::new();
            for line in corpus.lines() {
                if let Ok(doc) = serde_json::from_str::<serde_json::Value>(line)
                    && let Some(body) = doc["text"].as_str()
                {
                    text.push_str(body);
                    text.push('\n');
                }
                if text.len() > 2_500_000 {
                    break;
                }
            }
            text
        })
        .unwrap_or_else(|_| {
            "分布式系统中的一致性协议，例如两阶段提交与共识算法，决定了故障时数据是否可靠。\n"
                .repeat(20_000)
        });
    let started = Instant::now();
    Tokenizer::O200k.count("");
    println!(
        "o200k load (prepared, or from the built-in vocabulary the first time): {:.1} ms",
        ms(started)
    );
    let started = Instant::now();
    let library = bpe_openai::o200k_base();
    println!("o200k load (library): {:.1} ms", ms(started));
    for (name, text) in [("synthetic notes", &english), ("Chinese", &chinese)] {
        let mb = text.len() as f64 / 1e6;
        for round in 0..2 {
            let started = Instant::now();
            let prepared = Tokenizer::O200k.count(text);
            let prepared_s = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let reference = library.count(text.as_str());
            let library_s = started.elapsed().as_secs_f64();
            assert_eq!(prepared, reference, "the counters disagree on {name}");
            println!(
                "{name} ({mb:.1} MB, {prepared} tokens), round {round}: prepared {:.1} MB/s, library {:.1} MB/s",
                mb / prepared_s,
                mb / library_s
            );
        }
    }
}

fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn walkdir(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

//! `ctxpack assemble` on the example novel: the whole process per agent
//! (median and minimum of several runs) and the share of each pack that is
//! the prefix every agent of the chapter shares (what a prompt cache can
//! reuse). Run with `cargo bench --bench assemble`.

#[path = "support/process.rs"]
mod process;

use std::path::PathBuf;
use std::process::Command;

use process::{measure_in, ms};

/// The five agents of the pipeline, each on chapter 8 (written, so the
/// extractor has a chapter to process and the others review it).
const AGENTS: [(&str, &str); 5] = [
    ("writer", "continuation"),
    ("planner", "planning"),
    ("extractor", "extraction"),
    ("detector", "validation"),
    ("judge", "quality_gate"),
];

fn main() {
    let project = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/novel");
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-assemble-index");
    println!("ctxpack assemble on examples/novel, chapter 8 (release build; times: median / min)");
    println!(
        "{:<10} {:<8} {:>4} {:>9} {:>9} {:>8} {:>8} {:>9} {:>8}",
        "agent", "counter", "N", "median", "min", "tokens", "budget", "prefix", "shared"
    );
    for tokenizer in ["chars4", "o200k"] {
        for (agent, scenario) in AGENTS {
            let args: Vec<String> = [
                "--index-dir",
                &cache.display().to_string(),
                "assemble",
                "--work",
                "青灯录",
                "--scenario",
                scenario,
                "--agent",
                agent,
                "--chapter",
                "8",
                "--intent",
                "第8章",
                "--tokenizer",
                tokenizer,
                "--no-write",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let (median, min, _) = measure_in(Some(&project), &args, 9);
            let mut json_args = args.clone();
            json_args.extend(["--format".to_string(), "json".to_string()]);
            let output = Command::new(env!("CARGO_BIN_EXE_ctxpack"))
                .current_dir(&project)
                .args(&json_args)
                .output()
                .expect("run ctxpack");
            let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
            let bytes = report["text"].as_str().unwrap().len() as f64;
            let prefix = report["shared_prefix_bytes"].as_f64().unwrap();
            println!(
                "{agent:<10} {tokenizer:<8} {:>4} {:>7.1}ms {:>7.1}ms {:>8} {:>8} {:>8.0}B {:>7.1}%",
                9,
                ms(median),
                ms(min),
                report["tokens"],
                report["budget"],
                prefix,
                100.0 * prefix / bytes
            );
        }
    }
}

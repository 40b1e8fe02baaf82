//! Counts what the secret detectors find in real text, to measure false positives and speed.
//!
//! `cargo run --release --example redaction_scan -- [--personal] PATH...` walks each path
//! (`.md` files scanned whole, `.jsonl` files line by line over every string field) and
//! prints the findings per kind, the first few of each (masked) with file:line, and MB/s.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ctxpack::secrets::{self, DetectorOptions};

const SHOWN_PER_KIND: usize = 5;

#[derive(Default)]
struct Tally {
    counts: BTreeMap<&'static str, usize>,
    examples: BTreeMap<&'static str, Vec<String>>,
    bytes: usize,
    detecting: Duration,
}

impl Tally {
    fn scan(&mut self, text: &str, options: &DetectorOptions, place: &str, first_line: usize) {
        let started = Instant::now();
        let findings = secrets::find(text, options);
        self.detecting += started.elapsed();
        self.bytes += text.len();
        for finding in findings {
            *self.counts.entry(finding.kind).or_default() += 1;
            let shown = self.examples.entry(finding.kind).or_default();
            if shown.len() < SHOWN_PER_KIND {
                let line = first_line + text[..finding.range.start].matches('\n').count();
                let context_start = text[..finding.range.start]
                    .char_indices()
                    .rev()
                    .nth(39)
                    .map_or(0, |(index, _)| index);
                let context = text[context_start..finding.range.start].replace(['\n', '\r'], " ");
                shown.push(format!(
                    "{place}:{line}  …{context}[{}]",
                    secrets::mask(&text[finding.range.clone()])
                ));
            }
        }
    }
}

fn files_under(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        children.sort();
        for child in children {
            files_under(&child, files);
        }
    } else if matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("md" | "jsonl")
    ) {
        files.push(path.to_path_buf());
    }
}

fn strings_in(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => out.push(text.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|item| strings_in(item, out)),
        serde_json::Value::Object(fields) => {
            fields.values().for_each(|field| strings_in(field, out))
        }
        _ => {}
    }
}

fn main() {
    let mut options = DetectorOptions::default();
    let mut files = Vec::new();
    for argument in std::env::args().skip(1) {
        if argument == "--personal" {
            options.personal_data = true;
        } else {
            files_under(Path::new(&argument), &mut files);
        }
    }
    // The first call compiles the patterns; keep that out of the speed figure.
    secrets::find("", &options);
    let mut tally = Tally::default();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            eprintln!("skipped (not UTF-8 or unreadable): {}", file.display());
            continue;
        };
        let place = file.display().to_string();
        if file.extension().is_some_and(|e| e == "jsonl") {
            for (index, line) in text.lines().enumerate() {
                let mut fields = Vec::new();
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
                    strings_in(&value, &mut fields);
                }
                for field in fields {
                    tally.scan(&field, &options, &place, index + 1);
                }
            }
        } else {
            tally.scan(&text, &options, &place, 1);
        }
    }
    // A closed pipe (`| head`) ends the listing quietly.
    let _ = print_report(&tally, &options, files.len());
}

fn print_report(
    tally: &Tally,
    options: &DetectorOptions,
    file_count: usize,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let seconds = tally.detecting.as_secs_f64();
    writeln!(
        out,
        "{} files, {:.2} MB, detectors {:.3} s, {:.0} MB/s, personal data {}",
        file_count,
        tally.bytes as f64 / 1e6,
        seconds,
        tally.bytes as f64 / 1e6 / seconds.max(1e-9),
        if options.personal_data { "on" } else { "off" }
    )?;
    let total: usize = tally.counts.values().sum();
    writeln!(out, "findings: {total}")?;
    for (kind, count) in &tally.counts {
        writeln!(out, "{kind}: {count}")?;
        for example in &tally.examples[kind] {
            writeln!(out, "    {example}")?;
        }
    }
    Ok(())
}

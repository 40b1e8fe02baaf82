//! A cold index built on one thread and on several answers the same: the
//! same search results (scores, ties in path order), the same packs and
//! the same link tables, whatever segment each document landed in; and two
//! builds on several threads answer alike too.

mod common;

#[path = "../benches/support/synth.rs"]
#[allow(dead_code)]
mod synth;

use std::fs;
use std::path::{Path, PathBuf};

use common::{GENERATED_AT, World, ok};

/// Notes of a synthetic vault: with four writer threads, several segments.
const NOTES: usize = 300;

fn build(world: &World, vault: &Path, name: &str, threads: &str) -> PathBuf {
    let index = world.path().join(name);
    ok(&world
        .cmd()
        .args(["index", "--vault"])
        .arg(vault)
        .arg("--index-dir")
        .arg(&index)
        .env("CTXPACK_INDEX_THREADS", threads)
        .output()
        .unwrap());
    index
}

/// Every answer compared: searches (JSON, with scores), topic packs, a
/// note's pack with its backlinks, and the names of the content-addressed
/// link and backlink blobs (the catalog holds the time it was written).
fn answers(world: &World, vault: &Path, index: &Path, queries: &[String]) -> Vec<String> {
    let run = |args: &[&str]| {
        ok(&world
            .cmd()
            .args(args)
            .arg("--vault")
            .arg(vault)
            .arg("--index-dir")
            .arg(index)
            .output()
            .unwrap())
    };
    let mut out = Vec::new();
    for query in queries {
        out.push(run(&["search", query, "--format", "json", "--limit", "40"]));
        out.push(run(&[
            "pack",
            query,
            "--budget",
            "3000",
            "--no-log",
            "--generated-at",
            GENERATED_AT,
        ]));
    }
    out.push(run(&[
        "pack",
        "--note",
        "ties/tie-03.md",
        "--no-log",
        "--generated-at",
        GENERATED_AT,
    ]));
    let mut blobs: Vec<String> = fs::read_dir(index)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("links") || name.starts_with("backlinks"))
        .collect();
    blobs.sort();
    out.push(blobs.join("\n"));
    out
}

fn segments(index: &Path) -> usize {
    let meta = fs::read_to_string(index.join("tantivy/meta.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    meta["segments"].as_array().unwrap().len()
}

#[test]
fn one_thread_and_many_build_indexes_that_answer_alike() {
    let world = World::new();
    let vault = world.path().join("vault");
    synth::generate(&vault, NOTES, 7).unwrap();
    // Notes of equal text score alike: their order is the path order,
    // whichever segment each is in.
    for i in 0..12 {
        common::write(
            &vault.join(format!("ties/tie-{i:02}.md")),
            b"---\ntitle: Quokka\n---\nThe quokka smiles at [[ties/tie-00]] and [[ties/tie-03]].\n",
        );
    }
    // Queries from the vault's own titles (the generator's words).
    let mut queries = vec!["quokka".to_string(), "quokka smiles".to_string()];
    let mut notes: Vec<PathBuf> = fs::read_dir(vault.join("concepts"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    notes.sort();
    for note in notes.iter().step_by(17).take(4) {
        let text = fs::read_to_string(note).unwrap();
        let title = text
            .lines()
            .find_map(|line| line.strip_prefix("title: "))
            .unwrap();
        queries.push(title.to_string());
    }

    let single = build(&world, &vault, "single", "1");
    let many = build(&world, &vault, "many", "4");
    let again = build(&world, &vault, "again", "4");
    assert_eq!(segments(&single), 1);
    assert!(segments(&many) > 1, "{} segments", segments(&many));

    let expected = answers(&world, &vault, &single, &queries);
    let search: serde_json::Value = serde_json::from_str(&expected[0]).unwrap();
    let hits: Vec<&str> = search["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["path"].as_str().unwrap())
        .collect();
    let ties: Vec<String> = (0..12).map(|i| format!("ties/tie-{i:02}.md")).collect();
    assert_eq!(hits, ties);
    same_answers(
        &answers(&world, &vault, &many, &queries),
        &expected,
        "four threads",
    );
    same_answers(
        &answers(&world, &vault, &again, &queries),
        &expected,
        "four threads again",
    );
}

/// Equal answers, or a failure naming the first line that differs (the
/// whole answers are long).
fn same_answers(got: &[String], expected: &[String], what: &str) {
    assert_eq!(got.len(), expected.len());
    for (n, (got, expected)) in got.iter().zip(expected).enumerate() {
        if got != expected {
            let (line, (g, e)) = got
                .lines()
                .zip(expected.lines())
                .enumerate()
                .find(|(_, (g, e))| g != e)
                .unwrap_or((0, ("(lengths differ)", "")));
            panic!("{what}: answer {n}, line {line}:\n  got      {g}\n  expected {e}");
        }
    }
}

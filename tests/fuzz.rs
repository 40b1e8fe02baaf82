//! The smoke pass of the fuzz targets in `ctxpack::fuzz`: every target runs
//! a few hundred cases (`CTXPACK_FUZZ_CASES=N` for more, and
//! `CTXPACK_FUZZ_SEED=N` for other cases than the fixed default) built from
//! the project's own examples, mutated, from soups of the fragments that
//! make each format interesting, and from random bytes. A target that
//! panics fails with the smallest input proptest finds. The long,
//! coverage-guided runs are in `fuzz/` (see `docs/fuzzing.md`).

#[path = "common/tiny_model.rs"]
mod tiny_model;

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn cases() -> u32 {
    std::env::var("CTXPACK_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn rng() -> TestRng {
    let seed: u64 = std::env::var("CTXPACK_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Runs target `name` on the inputs of `strategy`.
fn fuzz(name: &str, strategy: BoxedStrategy<Vec<u8>>) {
    let target = ctxpack::fuzz::target(name).expect("a fuzz target of that name");
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng());
    if let Err(err) = runner.run(&strategy, |data| {
        (target.run)(&data);
        Ok(())
    }) {
        panic!("fuzz target '{name}' failed: {err}");
    }
}

/// Fragments that matter to every text format here.
const COMMON: &[&str] = &[
    "\n",
    "\r\n",
    "\t",
    " ",
    "  ",
    "\u{feff}",
    "\0",
    "\\",
    "\"",
    "'",
    "共识",
    "检查模型",
    "領導",
    "🙂",
    "\u{200b}",
    "é",
    "\u{301}",
    "18446744073709551616",
    "-1",
    "1e999",
    "NaN",
    "0x7fffffff",
    "99999999999999999999",
    "{unit:99999}",
    "{",
    "}",
    "[",
    "]",
    ":",
    ": ",
    "- ",
    "#",
    "%%",
    "\n---\n",
];

const MARKDOWN: &[&str] = &[
    "---\n",
    "---",
    "[[",
    "]]",
    "![[",
    "|",
    "#",
    "# ",
    "## ",
    "###### ",
    "####### ",
    "%%",
    "```",
    "```rust\n",
    "~~~",
    "`",
    "*",
    "**",
    "_",
    "> ",
    "- [ ] ",
    "1. ",
    "<!--",
    "-->",
    "<div>",
    "</div>",
    "<",
    ">",
    "](",
    ")",
    "[x](",
    ".md)",
    "[[a|b]]",
    "[[a#h]]",
    "[[#^b]]",
    "^block",
    "[^1]",
    "[^1]: ",
    "$$",
    "#tag",
    "#中文",
    "| a | b |\n|---|---|\n",
    "    ",
    "title: ",
    "tags: ",
    "tags: [",
    "aliases: ",
    "tier: ",
    "updated: ",
    "created: ",
    "summary: ",
    "2026-02-30",
    "9999-12-31T25:61:61Z",
    "&a ",
    "*a",
    "!!binary ",
    "? ",
    "|-\n",
    ">-\n",
    "~",
    "null",
    "{a: [",
    "\\\n",
    "=",
    "===\n",
    "***\n",
    "<https://x>",
];

const ENV: &[&str] = &[
    "=",
    "export ",
    "export",
    "#",
    " #",
    "KEY",
    "OBSIDIAN_VAULT_PATH=",
    "CTXPACK_VAULT=",
    "\"",
    "'",
    "\\\"",
    "\\\\",
    "\n",
    " = ",
    "\t",
    "==",
    "@",
    "~/",
    "$HOME",
    "${X}",
];

const OKIGNORE: &[&str] = &[
    "*",
    "**",
    "**/",
    "/",
    "!",
    "?",
    "[",
    "]",
    "[!a]",
    "[a-",
    "\\",
    "\\#",
    "#",
    "*.md",
    "notes/",
    "/notes",
    "notes/**/c.md",
    "中文/",
    "with space/",
    "_raw",
    "!_raw/",
    ".hidden",
    "{a,b}",
    "a/**/b",
    "***",
    "[[",
    "\n",
    "\r\n",
    "  ",
    "\t",
];

const YAML: &[&str] = &[
    "---\n",
    "...\n",
    "name: ",
    "agents:\n",
    "sources:\n",
    "scenarios:\n",
    "  ",
    "    ",
    "- ",
    ": ",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!str ",
    "!!map ",
    "!tag ",
    "? ",
    "|\n",
    ">\n",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'",
    "~",
    "null",
    "true",
    "no",
    "1.5",
    "-0",
    ".inf",
    ".nan",
    "0o777",
    "kind: file\n",
    "kind: library\n",
    "layer: L9\n",
    "share: ",
    "aiContext: ",
    "type: ",
    "fields:\n",
    "default: ",
    "{unit:99999}",
    "{unit:03}",
    "{work}",
    "priority: ",
    "limit: ",
    "offset: ",
];

/// `seed` edited a few times: fragments inserted, ranges deleted or
/// doubled, bytes overwritten.
fn mutated(seeds: Vec<Vec<u8>>, fragments: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    let edit = (
        0..4u8,
        any::<u32>(),
        0..fragments.len(),
        1..64usize,
        any::<u8>(),
    );
    (0..seeds.len(), prop::collection::vec(edit, 0..8))
        .prop_map(move |(seed, edits)| {
            let mut data = seeds[seed].clone();
            for (op, at, fragment, len, byte) in edits {
                let at = at as usize % (data.len() + 1);
                let end = (at + len).min(data.len());
                match op {
                    0 => {
                        data.splice(at..at, fragments[fragment].bytes());
                    }
                    1 => {
                        data.drain(at..end);
                    }
                    2 => {
                        let copy = data[at..end].to_vec();
                        data.splice(at..at, copy);
                    }
                    _ if at < data.len() => data[at] = byte,
                    _ => data.push(byte),
                }
            }
            data
        })
        .boxed()
}

/// Texts made of fragments, short words and any characters.
fn soup(fragments: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    let piece = prop_oneof![
        4 => prop::sample::select(fragments).prop_map(str::to_string),
        2 => prop::sample::select(COMMON).prop_map(str::to_string),
        2 => "[a-z0-9_]{1,8}",
        1 => any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..80)
        .prop_map(|pieces| pieces.concat().into_bytes())
        .boxed()
}

fn random_bytes() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..600).boxed()
}

/// Mutated seeds, soups and random bytes, mostly the first.
fn inputs(seeds: Vec<Vec<u8>>, fragments: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        5 => mutated(seeds, fragments),
        4 => soup(fragments),
        1 => random_bytes(),
    ]
    .boxed()
}

fn example_files(folder: &str, accept: impl Fn(&Path) -> bool) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(folder)];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if accept(&path) {
                found.push(fs::read(&path).unwrap());
            }
        }
    }
    assert!(!found.is_empty(), "no seeds in {folder}");
    found.sort();
    found
}

fn note_seeds() -> Vec<Vec<u8>> {
    let mut seeds = example_files("examples/vault", |p| {
        p.extension().is_some_and(|e| e == "md")
    });
    seeds.extend(
        [
            "---\ntitle: [unclosed\n---\nbody",
            "---\n---\n",
            "---\ntags: a, b c\naliases: [x]\ntier: core\nupdated: 2026-01-01\n---\n# T\n\n[[x|y]] ![[z]] [a](b.md)\n",
            "# A\n## B\n### C\n#### D\n##### E\n###### F\n",
            "```\n[[not a link]]\n```\n%% [[hidden]] %%\n<!-- [[c]] -->\n",
            "| [[a]] | b |\n|---|---|\n| c | [[d]] |\n",
            "---\na: &x [*x]\n---\n",
        ]
        .map(|s| s.as_bytes().to_vec()),
    );
    seeds
}

#[test]
fn note() {
    fuzz("note", inputs(note_seeds(), MARKDOWN));
}

#[test]
fn pack() {
    fuzz("pack", inputs(note_seeds(), MARKDOWN));
}

#[test]
fn env() {
    let seeds = [
        "CTXPACK_VAULT=~/notes\n",
        "export OBSIDIAN_VAULT_PATH=\"/a b/c\" # comment\n",
        "A='single' \nB=\"esc\\\"aped\\\\\"\n# c\n\nC = spaced value #x\n",
        "=\n==\nexport\nexport =\n",
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec();
    fuzz("env", inputs(seeds, ENV));
}

#[test]
fn okignore() {
    let mut seeds = example_files("examples/vault", |p| {
        p.file_name().is_some_and(|n| n == ".okignore")
    });
    seeds.extend(
        [
            "*\n!notes/\n",
            "**/*.md\n!中文/笔记.md\n",
            "[z-a]\n\\\n/\n!",
            "notes/deep\n#x\n",
        ]
        .map(|s| s.as_bytes().to_vec()),
    );
    fuzz("okignore", inputs(seeds, OKIGNORE));
}

#[test]
fn recipe() {
    let seeds = example_files("examples", |p| p.ends_with("meta/recipe.yaml"));
    fuzz("recipe", inputs(seeds, YAML));
}

#[test]
fn schema() {
    let mut seeds = example_files("examples", |p| {
        p.parent().is_some_and(|d| d.ends_with("meta/schemas"))
    });
    seeds.push(
        b"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: &d [*c, *c, *c, *c]\ne: [*d, *d, *d, *d]\n"
            .to_vec(),
    );
    fuzz("schema", inputs(seeds, YAML));
}

#[test]
fn template() {
    let seeds = [
        "works/{work}/正文/第{unit:03}章.md",
        "{agent}/{scenario}/{purpose}/{unit}",
        "{unit:99999}",
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec();
    fuzz("template", inputs(seeds, YAML));
}

/// Zips whose model files are each the tiny model's, mutated.
fn wheels_of_mutated_files() -> BoxedStrategy<Vec<u8>> {
    let files = tiny_model::files();
    let strategies: Vec<BoxedStrategy<Vec<u8>>> = files
        .iter()
        .map(|(_, bytes)| {
            prop_oneof![
                2 => Just(bytes.clone()),
                3 => mutated(vec![bytes.clone()], COMMON),
            ]
            .boxed()
        })
        .collect();
    (strategies, any::<bool>())
        .prop_map(move |(contents, deflated)| {
            let entries: Vec<(String, Vec<u8>)> = files
                .iter()
                .zip(contents)
                .map(|((name, _), bytes)| (format!("m/model/{name}"), bytes))
                .collect();
            tiny_model::zip(&entries, deflated)
        })
        .boxed()
}

#[test]
fn wheel() {
    let stored = tiny_model::wheel(false);
    let seeds = vec![
        stored.clone(),
        tiny_model::wheel(true),
        tiny_model::with_declared_size(&stored, u64::MAX / 2),
        tiny_model::with_declared_size(&stored, u32::MAX as u64 - 2),
        tiny_model::with_declared_size(&stored, 3),
    ];
    let strategy = prop_oneof![
        3 => mutated(seeds, COMMON),
        3 => wheels_of_mutated_files(),
        1 => random_bytes(),
    ]
    .boxed();
    fuzz("wheel", strategy);
}

fn model_seed() -> Vec<u8> {
    let [(_, config), (_, tensors), (_, tokenizer)] = tiny_model::files();
    ctxpack::fuzz::model_input(&config, &tokenizer, &tensors)
}

#[test]
fn model() {
    fuzz("model", inputs(vec![model_seed()], COMMON));
}

/// Fragments of MCP tool arguments.
const MCP_ARGUMENTS: &[&str] = &[
    "{",
    "}",
    "\"query\": ",
    "\"raft\"",
    "\"path\": ",
    "\"../a.md\"",
    "\"a.md\"",
    "\"heading\": ",
    "\"lines\": ",
    "\"1-2\"",
    "\"0-99999999999\"",
    "\"budget_tokens\": ",
    "100000",
    "0",
    "-1",
    "1e308",
    "\"subqueries\": ",
    "[",
    "]",
    "\"recent\": ",
    "true",
    "null",
    "\"tokenizer\": ",
    "\"o200k\"",
    "\"format\": ",
    "\"json\"",
    "\"limit\": ",
    "\"recent_dailies\": ",
    "\"useful\": ",
    "\"work\": ",
    "\"chapter\": ",
    ", ",
    "\"generated_at\": ",
    "\"2026-01-01T00:00:00Z\"",
    "\"\\u0000\"",
    "\"%%\"",
];

#[test]
fn mcp() {
    let seeds: Vec<Vec<u8>> = [
        "\u{0}{\"query\": \"raft\", \"limit\": 5, \"explain\": true}",
        "\u{1}{\"query\": \"raft\", \"subqueries\": [\"paxos\"], \"budget_tokens\": 200, \"recent_dailies\": 2}",
        "\u{1}{\"recent\": true, \"tokenizer\": \"o200k\", \"format\": \"json\"}",
        "\u{2}{\"path\": \"b.md\", \"heading\": \"Part\"}",
        "\u{2}{\"path\": \"a.md\", \"lines\": \"1-3\"}",
        "\u{3}{\"path\": \"a.md\", \"useful\": true}",
        "\u{4}{}",
        "\u{5}{\"work\": \"w\", \"scenario\": \"s\", \"chapter\": 1, \"intent\": \"i\"}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("mcp", inputs(seeds, MCP_ARGUMENTS));
}

#[test]
fn privacy() {
    let seeds: Vec<Vec<u8>> = [
        "---\nprivate: true\n---\nsecret",
        "# T\n\n%%hidden%% text <!-- c -->\n\n## Private\n\nx\n\n## Public\n\ny\n",
        "key ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b\n-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----\n",
        "private:\n  tags: [a]\n  folders: [\"x/\"]\nredact:\n  personal_data: true\n",
        "`%%code%%` %% open",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("privacy", inputs(seeds, MARKDOWN));
}

/// Adding a target to `ctxpack::fuzz::TARGETS` means adding its smoke
/// pass here too.
#[test]
fn every_target_has_a_smoke_pass() {
    let smoked = [
        "note", "pack", "env", "okignore", "recipe", "schema", "template", "wheel", "model", "mcp",
        "privacy",
    ];
    let targets: Vec<&str> = ctxpack::fuzz::TARGETS.iter().map(|t| t.name).collect();
    assert_eq!(targets, smoked);
}

/// `--afl-seeds DIR`-style helper for the long runs: writes a few seed
/// inputs per target into `fuzz/seeds/<target>/` (see `docs/fuzzing.md`).
#[test]
#[ignore = "writes the AFL seed corpus; run by hand"]
fn write_afl_seeds() {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let stored = tiny_model::wheel(false);
    let sets: Vec<(&str, Vec<Vec<u8>>)> = vec![
        ("note", note_seeds()),
        ("pack", note_seeds()),
        ("env", vec![b"export A=\"b c\" # d\nB='e'\n".to_vec()]),
        (
            "okignore",
            vec![b"drafts/\n*.txt\n!keep.md\n**/deep/\n".to_vec()],
        ),
        (
            "recipe",
            example_files("examples", |p| p.ends_with("meta/recipe.yaml")),
        ),
        (
            "schema",
            example_files("examples", |p| {
                p.parent().is_some_and(|d| d.ends_with("meta/schemas"))
            }),
        ),
        (
            "template",
            vec![b"works/{work}/\xe6\xad\xa3/{unit:03}.md".to_vec()],
        ),
        ("wheel", vec![stored.clone(), tiny_model::wheel(true)]),
        ("model", vec![model_seed()]),
    ];
    for (target, seeds) in sets {
        let dir = out.join(target);
        fs::create_dir_all(&dir).unwrap();
        for (i, seed) in seeds.iter().enumerate() {
            fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
        }
    }
}

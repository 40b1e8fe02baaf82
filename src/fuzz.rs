//! Fuzz targets: functions of arbitrary bytes that must never panic, hang
//! or abort, whatever the bytes. The same functions are run by the smoke
//! pass in `tests/fuzz.rs` (proptest, seconds, part of `cargo test`) and by
//! the coverage-guided runs of the `fuzz/` crate (AFL++; see
//! `docs/fuzzing.md`). A new target is one function here and one line in
//! [`TARGETS`]; both runners pick it up by name.

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};

/// One fuzz target: its name (used by both runners) and its function.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    Target {
        name: "note",
        run: note,
    },
    Target {
        name: "pack",
        run: pack,
    },
    Target {
        name: "env",
        run: env,
    },
    Target {
        name: "okignore",
        run: okignore,
    },
    Target {
        name: "recipe",
        run: recipe,
    },
    Target {
        name: "schema",
        run: schema,
    },
    Target {
        name: "template",
        run: template,
    },
    Target {
        name: "wheel",
        run: wheel,
    },
    Target {
        name: "model",
        run: model,
    },
    Target {
        name: "mcp",
        run: mcp,
    },
    Target {
        name: "privacy",
        run: privacy,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|target| target.name == name)
}

/// Input as text: invalid UTF-8 becomes U+FFFD, as nothing in ctxpack
/// parses bytes that are not UTF-8.
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A note's parse (frontmatter, Markdown, links), then every range it
/// reports is sliced, as the index and the packer slice them.
pub fn note(data: &[u8]) {
    let text = text(data);
    let (note, _problems) = crate::parse::parse_note("fuzz/note.md", &text, None);
    for block in &note.blocks {
        let _ = note.block_text(block);
    }
    for section in note.sections() {
        let _ = &note.body[section.range.clone()];
        if let Some(heading) = section.heading {
            let _ = note.heading_path(heading);
        }
    }
    for link in &note.links {
        assert!(
            note.body.get(link.range.clone()).is_some(),
            "link range {:?} is not a slice of the body",
            link.range
        );
    }
    let _ = note.meta.updated_at();
    let _ = note.name();
}

/// A topic pack over a vault of the input as two notes (one of them
/// linking to the other), so compression, excerpts, de-duplication and the
/// render see hostile text.
pub fn pack(data: &[u8]) {
    let text = text(data);
    let topic: String = text
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let files = vec![
        ("a.md".to_string(), text.clone().into_owned()),
        ("b.md".to_string(), format!("See [[a]].\n\n{text}")),
    ];
    let vault = crate::Vault::from_texts(PathBuf::from("/fuzz-vault"), &files);
    let generated_at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let options = crate::PackOptions::new(300, crate::Tokenizer::Chars4, generated_at);
    let topic = if topic.is_empty() { "a".into() } else { topic };
    let pack = crate::build_pack(&vault, &crate::PackMode::Topic(topic), &options);
    assert!(!pack.bundle.is_empty());
}

/// An MCP tool call with the input as its arguments: the first byte picks
/// the tool, the rest is the JSON a client would send, decoded and run by
/// a server over a small vault (written once per thread).
pub fn mcp(data: &[u8]) {
    const TOOLS: [&str; 6] = [
        "search",
        "context_pack",
        "get_note",
        "mark_useful",
        "status",
        "assemble",
    ];
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let Ok(arguments) = serde_json::from_str::<serde_json::Value>(&text(rest)) else {
        return;
    };
    let tool = TOOLS[first as usize % TOOLS.len()];
    MCP_SERVER.with(|cell| {
        let mut cell = cell.borrow_mut();
        let (_, server) = cell.get_or_insert_with(|| {
            let dir = tempfile::tempdir().expect("a temporary folder");
            let vault = dir.path().join("vault");
            for (path, body) in [
                (
                    "a.md",
                    "---\ntitle: Alpha\n---\n# Alpha\n\nRaft elects a leader. See [[b]].\n",
                ),
                (
                    "b.md",
                    "# B\n\nPaxos and [[a|raft]] agree.\n\n## Part\n\nMore text.\n",
                ),
                ("2026-01-02.md", "daily note\n"),
            ] {
                let path = vault.join(path);
                fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
                fs::write(&path, body).expect("a note");
            }
            let server = crate::mcp::CtxpackServer::open(crate::mcp::ServeOptions {
                root: vault.canonicalize().expect("the vault"),
                index_dir: Some(dir.path().join("index")),
                model: crate::session::ModelChoice::Off,
                qmd: None,
                reranker: None,
                ann: Default::default(),
                vectors: None,
                limits: crate::mcp::ServeLimits::default(),
                store: None,
                log: false,
            })
            .expect("a server over the fuzz vault");
            (dir, server)
        });
        let _ = server.call_blocking(tool, arguments);
    });
}

/// A note's text through the default privacy policy, and the input as a
/// policy file.
pub fn privacy(data: &[u8]) {
    let text = text(data);
    let policy = crate::privacy::Policy::default();
    if let Some(prepared) = policy.prepare("fuzz/private.md", &text, None) {
        for redaction in &prepared.note.redactions {
            assert!(redaction.line >= 1, "lines count from 1");
        }
    }
    let _ = crate::audit::audit_text(&policy, "fuzz/private.md", &text);
    let _ = crate::privacy::Policy::parse(&text);
}

/// A `.env` file's parse.
pub fn env(data: &[u8]) {
    let _ = crate::config::parse_env(&text(data));
}

thread_local! {
    /// One small vault per thread, written once; each case only rewrites
    /// its `.okignore`.
    static OKIGNORE_VAULT: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
    static SCRATCH: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
    static MCP_SERVER: RefCell<Option<(tempfile::TempDir, crate::mcp::CtxpackServer)>> =
        const { RefCell::new(None) };
}

const OKIGNORE_VAULT_FILES: [&str; 8] = [
    "a.md",
    "notes/b.md",
    "notes/deep/c.md",
    "中文/笔记.md",
    "with space/d e.md",
    "_raw/f.md",
    ".hidden/g.md",
    "notes/h.txt",
];

/// A walk of a small vault whose `.okignore` holds the input.
pub fn okignore(data: &[u8]) {
    OKIGNORE_VAULT.with(|cell| {
        let mut cell = cell.borrow_mut();
        let root = cell
            .get_or_insert_with(|| {
                let dir = tempfile::tempdir().expect("a temporary folder");
                for file in OKIGNORE_VAULT_FILES {
                    let path = dir.path().join(file);
                    fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
                    fs::write(&path, "# note\n").expect("a file");
                }
                dir
            })
            .path()
            .to_path_buf();
        fs::write(root.join(".okignore"), data).expect("write .okignore");
        let walked = crate::vault::walk::walk(&root, &[]);
        for found in &walked.files {
            assert!(
                OKIGNORE_VAULT_FILES.contains(&found.rel_path.as_str()),
                "the walk listed {} which is not in the vault",
                found.rel_path
            );
        }
    });
}

/// A recipe's parse and cross-reference checks.
pub fn recipe(data: &[u8]) {
    let _ = crate::assemble::recipe::Recipe::parse(&text(data));
}

/// A recipe's path template expanded (`{work}`, `{unit:03}`, …).
pub fn template(data: &[u8]) {
    let values = crate::assemble::recipe::Placeholders {
        work: "书",
        unit: -7,
        agent: "writer",
        scenario: "s",
        purpose: "generation",
    };
    let _ = crate::assemble::recipe::expand(&text(data), &values);
}

/// Runs `f` with this thread's scratch folder, emptied first.
fn with_scratch(f: impl FnOnce(&Path)) {
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dir = cell
            .get_or_insert_with(|| tempfile::tempdir().expect("a temporary folder"))
            .path()
            .to_path_buf();
        for entry in fs::read_dir(&dir)
            .expect("list the scratch folder")
            .flatten()
        {
            let path = entry.path();
            let _ = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
        }
        f(&dir);
    });
}

/// A project's schemas loaded from one schema file holding the input.
pub fn schema(data: &[u8]) {
    with_scratch(|dir| {
        let schemas = dir.join("meta/schemas");
        fs::create_dir_all(&schemas).expect("a folder");
        fs::write(schemas.join("fuzz.yaml"), data).expect("write the schema");
        let project = crate::assemble::project::Project::open(dir).expect("open the project");
        if let Ok(loaded) = crate::assemble::schema::Schemas::load(&project, "meta/schemas") {
            for (type_name, schema) in &loaded.by_type {
                for (field, _) in &schema.rules {
                    let _ = loaded.rule(type_name, field).allows("generation");
                }
            }
        }
    });
}

/// `model import` of the input as a wheel, into an empty model store.
pub fn wheel(data: &[u8]) {
    with_scratch(|dir| {
        let path = dir.join("fuzz_model-0.1-py3-none-any.whl");
        fs::write(&path, data).expect("write the wheel");
        let store = dir.join("store");
        if let Ok(manifest) = crate::embed::import(&store, &path, None, false) {
            let model = crate::embed::load(&store, &manifest.name).expect("load what was imported");
            assert_eq!(model.embed("raft 共识").len(), model.dims());
        }
    });
}

/// The input of [`model`] holding these three files.
pub fn model_input(config: &[u8], tokenizer: &[u8], safetensors: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&(config.len() as u16).to_le_bytes());
    data.extend_from_slice(&(tokenizer.len() as u32).to_le_bytes());
    data.extend_from_slice(config);
    data.extend_from_slice(tokenizer);
    data.extend_from_slice(safetensors);
    data
}

/// Splits off the first `len` bytes (or all there are).
fn split(data: &[u8], len: usize) -> (&[u8], &[u8]) {
    data.split_at(len.min(data.len()))
}

/// `model import` of a model folder whose files are cut from the input
/// (see [`model_input`]): the model's own parsers (safetensors, the
/// tokenizer's JSON and trie, the embeddings table), which a wheel's
/// checksums keep a coverage-guided fuzzer from reaching.
pub fn model(data: &[u8]) {
    let (config_len, rest) = split(data, 2);
    let (tokenizer_len, rest) = split(rest, 4);
    let config_len = config_len
        .iter()
        .rev()
        .fold(0usize, |n, &b| n << 8 | b as usize);
    let tokenizer_len = tokenizer_len
        .iter()
        .rev()
        .fold(0usize, |n, &b| n << 8 | b as usize);
    let (config, rest) = split(rest, config_len);
    let (tokenizer, safetensors) = split(rest, tokenizer_len);
    with_scratch(|dir| {
        let folder = dir.join("fuzz-model");
        fs::create_dir_all(&folder).expect("a folder");
        for (name, bytes) in [
            ("config.json", config),
            ("tokenizer.json", tokenizer),
            ("model.safetensors", safetensors),
        ] {
            fs::write(folder.join(name), bytes).expect("write a model file");
        }
        let store = dir.join("store");
        if let Ok(manifest) = crate::embed::import(&store, &folder, None, false) {
            let model = crate::embed::load(&store, &manifest.name).expect("load what was imported");
            assert_eq!(model.embed("raft 共识").len(), model.dims());
        }
    });
}

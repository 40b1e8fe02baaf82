//! A cross-encoder reranker (a BERT classification head): it reads the
//! query and a passage together and scores how well the passage answers.
//! It runs on our own encoder (`bert.rs`). Built only with the `bert`
//! feature.

use std::path::Path;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::Config;
use tokenizers::Tokenizer;

use super::ModelError;
use super::bert::{Dense, Encoder};
use crate::retrieve::fusion::Reranker;

/// Pairs are scored this many at a time.
const BATCH: usize = 8;
/// Tokens read of a query and passage together.
const MAX_TOKENS: usize = 512;

pub(crate) struct CrossEncoder {
    encoder: Encoder,
    pooler: Dense,
    classifier: Dense,
    tokenizer: Tokenizer,
    pub name: String,
}

fn candle(context: &str) -> impl Fn(candle_core::Error) -> ModelError + '_ {
    move |err| ModelError::Invalid(format!("{context}: {err}"))
}

impl CrossEncoder {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` of a
    /// BERT sequence-classification model from `dir`.
    pub(crate) fn load(dir: &Path) -> Result<CrossEncoder, ModelError> {
        // Read like any model file: regular files only, within the limits.
        let read = |f: &str| {
            let limit = if f.ends_with(".safetensors") {
                super::MAX_WEIGHTS_BYTES
            } else {
                super::MAX_OTHER_FILE_BYTES
            };
            crate::safe_fs::read_bytes(&dir.join(f), limit)
                .map(|(bytes, _)| bytes)
                .map_err(|err| {
                    ModelError::Io(format!(
                        "reranker {}: cannot read {f}: {err}",
                        dir.display()
                    ))
                })
        };
        let config_bytes = read("config.json")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|err| ModelError::Invalid(format!("reranker config.json: {err}")))?;
        let raw: serde_json::Value = serde_json::from_slice(&config_bytes).unwrap_or_default();
        if raw["model_type"].as_str().is_some_and(|t| t != "bert") {
            return Err(ModelError::Unsupported(format!(
                "reranker {}: a {} model; only BERT cross-encoders are supported",
                dir.display(),
                raw["model_type"]
            )));
        }
        let vb = VarBuilder::from_buffered_safetensors(
            read("model.safetensors")?,
            DType::F32,
            &Device::Cpu,
        )
        .map_err(candle("reranker model.safetensors"))?;
        let encoder =
            Encoder::load(vb.pp("bert"), &config).map_err(|err| err.in_source("reranker"))?;
        let hidden = encoder.hidden();
        let pooler = Dense::load(vb.pp("bert.pooler.dense"), hidden, hidden)
            .map_err(candle("reranker pooler"))?;
        let classifier =
            Dense::load(vb.pp("classifier"), hidden, 1).map_err(candle("reranker classifier"))?;
        let tokenizer = super::bert::tokenizer(
            &read("tokenizer.json")?,
            MAX_TOKENS.min(encoder.max_positions),
        )
        .map_err(|err| err.in_source("reranker tokenizer.json"))?;
        Ok(CrossEncoder {
            encoder,
            pooler,
            classifier,
            tokenizer,
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
    }

    /// One relevance score per passage for `query`: the classifier over
    /// the pooled (tanh) output of each pair's first token.
    pub(crate) fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let h = self.encoder.hidden();
        let mut scores = Vec::with_capacity(passages.len());
        for batch in passages.chunks(BATCH) {
            let (mut ids, mut types, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
            for passage in batch {
                let encoding = self
                    .tokenizer
                    .encode((query, *passage), true)
                    .map_err(|err| ModelError::Run(format!("reranker tokenizing: {err}")))?;
                let (pair_ids, pair_types) = self
                    .encoder
                    .inputs(&encoding)
                    .map_err(|err| ModelError::Run(format!("reranker: {err}")))?;
                lengths.push(pair_ids.len());
                ids.extend(pair_ids);
                types.extend(pair_types);
            }
            let outputs = self.encoder.forward(&ids, &types, &lengths);
            let mut first_rows = Vec::with_capacity(batch.len() * h);
            let mut offset = 0;
            for &length in &lengths {
                match length {
                    0 => first_rows.extend(std::iter::repeat_n(0.0, h)),
                    _ => first_rows.extend_from_slice(&outputs[offset * h..(offset + 1) * h]),
                }
                offset += length;
            }
            let mut pooled = vec![0f32; batch.len() * h];
            self.pooler
                .apply(&first_rows, batch.len(), &mut pooled, false);
            for value in &mut pooled {
                *value = value.tanh();
            }
            let mut batch_scores = vec![0f32; batch.len()];
            self.classifier
                .apply(&pooled, batch.len(), &mut batch_scores, false);
            scores.extend(batch_scores);
        }
        Ok(scores)
    }
}

impl Reranker for CrossEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        CrossEncoder::score(self, query, passages)
    }
}

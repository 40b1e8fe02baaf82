//! Static embeddings in the model2vec format: a vector per vocabulary
//! piece, mean-pooled over a text's tokens (weighted, when the model
//! carries weights), then normalised.

use safetensors::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};

use super::ModelError;
use super::unigram::{Unigram, UnigramParts};

/// Texts are cut to this many tokens, as model2vec does by default.
const MAX_TOKENS: usize = 512;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Table {
    F32(Vec<f32>),
    I8(Vec<i8>),
}

/// The compiled model, as stored by `model import`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StaticParts {
    pub tokenizer: UnigramParts,
    pub dims: usize,
    pub rows: usize,
    pub table: Table,
    /// Token id → table row (vocabulary-quantized models).
    pub mapping: Option<Vec<u32>>,
    /// Token id → weight.
    pub weights: Option<Vec<f32>>,
    pub normalize: bool,
}

pub(crate) struct StaticModel {
    tokenizer: Unigram,
    dims: usize,
    table: Table,
    mapping: Option<Vec<u32>>,
    weights: Option<Vec<f32>>,
    normalize: bool,
}

impl StaticModel {
    /// Compiles the three files of a model2vec folder.
    pub(crate) fn compile(
        config_json: &[u8],
        safetensors: &[u8],
        tokenizer_json: &[u8],
    ) -> Result<(Vec<u8>, StaticParts), ModelError> {
        let config: serde_json::Value = serde_json::from_slice(config_json)
            .map_err(|err| ModelError::Invalid(format!("config.json is not JSON: {err}")))?;
        let normalize = config["normalize"].as_bool().unwrap_or(true);
        let tensors = SafeTensors::deserialize(safetensors).map_err(|err| {
            ModelError::Invalid(format!("model.safetensors cannot be read: {err}"))
        })?;
        let embeddings = ["embeddings", "0", "embedding.weight"]
            .iter()
            .find_map(|name| tensors.tensor(name).ok())
            .ok_or_else(|| {
                ModelError::Invalid("model.safetensors has no `embeddings` tensor".into())
            })?;
        let [rows, dims]: [usize; 2] = embeddings.shape().try_into().map_err(|_| {
            ModelError::Invalid("the embeddings tensor is not two-dimensional".into())
        })?;
        if dims == 0 || rows == 0 {
            return Err(ModelError::Invalid("the embeddings tensor is empty".into()));
        }
        let raw = embeddings.data();
        let table = match embeddings.dtype() {
            Dtype::F32 => Table::F32(
                raw.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
            Dtype::F16 => Table::F32(
                raw.chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
            ),
            Dtype::I8 => Table::I8(raw.iter().map(|&b| b as i8).collect()),
            other => {
                return Err(ModelError::Unsupported(format!(
                    "embeddings of type {other:?} are not supported"
                )));
            }
        };
        let mapping = match tensors.tensor("mapping") {
            Ok(t) => Some(match t.dtype() {
                Dtype::I64 => t
                    .data()
                    .chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as u32)
                    .collect::<Vec<u32>>(),
                Dtype::I32 => t
                    .data()
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as u32)
                    .collect(),
                other => {
                    return Err(ModelError::Unsupported(format!(
                        "a mapping of type {other:?} is not supported"
                    )));
                }
            }),
            Err(_) => None,
        };
        if let Some(mapping) = &mapping
            && mapping.iter().any(|&row| row as usize >= rows)
        {
            return Err(ModelError::Invalid(
                "the mapping points outside the embeddings".into(),
            ));
        }
        let weights = match tensors.tensor("weights") {
            Ok(t) => Some(match t.dtype() {
                Dtype::F32 => t
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
                    .collect::<Vec<f32>>(),
                Dtype::F64 => t
                    .data()
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
                    .collect(),
                other => {
                    return Err(ModelError::Unsupported(format!(
                        "weights of type {other:?} are not supported"
                    )));
                }
            }),
            Err(_) => None,
        };
        let (vocab, tokenizer) = Unigram::compile(tokenizer_json)?;
        let vocabulary = tokenizer.scores.len();
        let addressable = mapping.as_ref().map_or(rows, Vec::len);
        if weights.as_ref().is_some_and(|w| w.len() < vocabulary) {
            return Err(ModelError::Invalid(format!(
                "the tokenizer has {vocabulary} pieces but the model weights fewer"
            )));
        }
        if addressable < vocabulary {
            return Err(ModelError::Invalid(format!(
                "the tokenizer has {vocabulary} pieces but the model embeds only {addressable}"
            )));
        }
        let parts = StaticParts {
            tokenizer,
            dims,
            rows,
            table,
            mapping,
            weights,
            normalize,
        };
        Ok((vocab, parts))
    }

    pub(crate) fn load(vocab: Vec<u8>, parts: StaticParts) -> Result<StaticModel, ModelError> {
        let expected = parts.rows * parts.dims;
        let len = match &parts.table {
            Table::F32(t) => t.len(),
            Table::I8(t) => t.len(),
        };
        if len != expected {
            return Err(ModelError::Invalid(
                "damaged model: the table has the wrong size".into(),
            ));
        }
        Ok(StaticModel {
            tokenizer: Unigram::load(vocab, parts.tokenizer)?,
            dims: parts.dims,
            table: parts.table,
            mapping: parts.mapping,
            weights: parts.weights,
            normalize: parts.normalize,
        })
    }

    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    /// The embedding of one text (all zeros when no token is known).
    pub(crate) fn embed(&self, text: &str) -> Vec<f32> {
        let limit = MAX_TOKENS * self.tokenizer.parts().median_piece_len;
        let text = match text.char_indices().nth(limit) {
            Some((cut, _)) => &text[..cut],
            None => text,
        };
        let ids = self.tokenizer.encode(text);
        let unk = self
            .tokenizer
            .parts()
            .skip_unk
            .then(|| self.tokenizer.unk_id());
        let mut sum = vec![0.0f32; self.dims];
        let mut count = 0usize;
        for &id in ids.iter().filter(|&&id| Some(id) != unk).take(MAX_TOKENS) {
            let id = id as usize;
            let row = self.mapping.as_ref().map_or(id, |m| m[id] as usize);
            let scale = self.weights.as_ref().map_or(1.0, |w| w[id]);
            let start = row * self.dims;
            match &self.table {
                Table::F32(table) => {
                    for (s, v) in sum.iter_mut().zip(&table[start..start + self.dims]) {
                        *s += v * scale;
                    }
                }
                Table::I8(table) => {
                    for (s, &v) in sum.iter_mut().zip(&table[start..start + self.dims]) {
                        *s += f32::from(v) * scale;
                    }
                }
            }
            count += 1;
        }
        let count = count.max(1) as f32;
        for s in &mut sum {
            *s /= count;
        }
        if self.normalize {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            for s in &mut sum {
                *s /= norm;
            }
        }
        sum
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::embed::unigram::tests::tiny_tokenizer_json;

    /// A model2vec folder's three files for the tiny tokenizer: 18 pieces,
    /// 4 dimensions, written by the test.
    pub(crate) fn tiny_model_files() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let rows = 18usize;
        let dims = 4usize;
        let mut data = Vec::with_capacity(rows * dims * 4);
        for row in 0..rows {
            for d in 0..dims {
                let v = if d == row % dims {
                    1.0f32
                } else {
                    0.1 * d as f32
                };
                data.extend_from_slice(&v.to_le_bytes());
            }
        }
        let view =
            safetensors::tensor::TensorView::new(Dtype::F32, vec![rows, dims], &data).unwrap();
        let tensors = safetensors::serialize([("embeddings", view)], &None).unwrap();
        (
            br#"{"normalize": true}"#.to_vec(),
            tensors,
            tiny_tokenizer_json().into_bytes(),
        )
    }

    #[test]
    fn embeds_normalised_mean_vectors() {
        let (config, tensors, tokenizer) = tiny_model_files();
        let (vocab, parts) = StaticModel::compile(&config, &tensors, &tokenizer).unwrap();
        let model = StaticModel::load(vocab, parts).unwrap();
        let v = model.embed("raft leader");
        assert_eq!(v.len(), 4);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert_eq!(model.embed("raft leader"), v, "deterministic");
        assert_ne!(model.embed("共识"), v);
    }
}

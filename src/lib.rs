//! ctxpack turns a Markdown knowledge vault into a token-budgeted context pack.
//!
//! The data flows one way: [`vault`] finds and reads the files, [`parse`]
//! turns each into a [`Note`], [`retrieve`] ranks notes for a query,
//! [`pack`] selects, compresses and fits them to a budget and renders the
//! result. The binary (`main.rs`, [`cli`]) is a thin layer over these.
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

pub mod analysis;
pub mod assemble;
pub mod audit;
pub mod cli;
pub mod config;
pub mod embed;
pub mod eval;
pub mod filter;
pub mod fuzz;
pub mod index;
pub mod mcp;
pub mod note;
pub mod note_tables;
pub mod pack;
pub mod parse;
pub mod privacy;
pub mod progress;
pub mod request;
pub mod retrieve;
pub mod safe_fs;
pub mod session;
pub mod store;
pub mod text;
pub mod timings;
pub mod tokens;
pub mod vault;
pub mod xdg;

pub use note::{Diagnostic, Note, Tier};
pub use pack::{Pack, PackMode, PackOptions, build_pack};
pub use tokens::Tokenizer;
pub use vault::{Vault, VaultOptions};

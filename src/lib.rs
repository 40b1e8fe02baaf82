//! ctxpack turns a Markdown knowledge vault into a token-budgeted context pack.
//!
//! The data flows one way: [`vault`] finds and reads the files, [`parse`]
//! turns each into a [`Note`], [`retrieve`] ranks notes for a query,
//! [`pack`] selects, compresses and fits them to a budget and renders the
//! result. The binary (`main.rs`, [`cli`]) is a thin layer over these.

pub mod cli;
pub mod config;
pub mod note;
pub mod pack;
pub mod parse;
pub mod retrieve;
pub mod text;
pub mod tokens;
pub mod vault;

pub use note::{Diagnostic, Note, Tier};
pub use pack::{Pack, PackMode, PackOptions, build_pack};
pub use tokens::Tokenizer;
pub use vault::{Vault, VaultOptions};

//! Keeping secrets and personal data out of packs.

pub mod secrets;

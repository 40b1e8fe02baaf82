//! Three jobs done before ctxpack compiles:
//!
//! - The o200k and cl100k vocabularies in a compact form (each token's
//!   length, then their bytes, deflated: 1.4 MB for both), which
//!   `src/tokens` embeds and decodes on first use. The `bpe-openai` crate
//!   embeds its own serialized tables (47 MB, two thirds of a stripped
//!   binary), so it is only a build (and test) dependency here.
//! - A `cfg` for each test environment variable that is set, so that tests
//!   needing a PostgreSQL server or a downloaded model are *ignored, with
//!   the reason*, when it is absent, rather than passing without running.

use std::env;
use std::fs;
use std::io::Write;
use std::path::Path;

/// Test environment variables and the `cfg` each sets when it is present
/// and not empty (read by `tests/*.rs`; `.ci/run` sets them all).
const TEST_VARIABLES: [(&str, &str); 7] = [
    ("CTXPACK_TEST_PG", "ctxpack_test_pg"),
    ("CTXPACK_TEST_PG_TLS", "ctxpack_test_pg_tls"),
    ("CTXPACK_TEST_PG_TLS_CA", "ctxpack_test_pg_tls_ca"),
    ("CTXPACK_TEST_STATIC_MODEL", "ctxpack_test_static_model"),
    ("CTXPACK_TEST_MINILM", "ctxpack_test_minilm"),
    ("CTXPACK_TEST_E5", "ctxpack_test_e5"),
    ("CTXPACK_TEST_E5_REFERENCE", "ctxpack_test_e5_reference"),
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    link_without_pie();
    for (variable, cfg) in TEST_VARIABLES {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={variable}");
        if env::var_os(variable).is_some_and(|value| !value.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }

    let out = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let out = Path::new(&out);
    write_vocabulary(&out.join("o200k.vocab"), bpe_openai::o200k_base);
    write_vocabulary(&out.join("cl100k.vocab"), bpe_openai::cl100k_base);
}

/// A position-independent executable is relocated by the dynamic loader
/// at every start: 54,000 pointers in ctxpack's tables and vtables, written
/// into 1.1 MB of copy-on-write pages. A CLI call without a watcher pays
/// that on every agent turn (0.75 ms of a 2.4 ms `--version`, 270 of its
/// 540 page faults; docs/benchmarks.md). Linked at a fixed address, the
/// executable needs no relocation; the libraries, heap, stacks and
/// mappings keep their random addresses, only ctxpack's own code and
/// statics lose theirs. Only the binaries: tests and benches keep PIE.
fn link_without_pie() {
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-bins=-no-pie");
    }
}

/// Writes the tokens of a vocabulary by id (their rank): the count as a
/// little-endian `u32`, then, deflated, one length byte per token followed
/// by all the tokens' bytes (the lengths apart from the bytes compress
/// better). Written on every run (~1.5 s of CPU unoptimised), so that a
/// change to this format can never meet an earlier run's file.
fn write_vocabulary(path: &Path, library: fn() -> &'static bpe_openai::Tokenizer) {
    let bpe = &library().bpe;
    let count = bpe.num_tokens();
    let mut plain = Vec::new();
    for id in 0..count {
        let len = bpe.token_len(id as u32);
        plain.push(u8::try_from(len).expect("no token is longer than 255 bytes"));
    }
    for id in 0..count {
        plain.extend_from_slice(bpe.token_bytes(id as u32));
    }
    let mut out = (count as u32).to_le_bytes().to_vec();
    let mut encoder = flate2::write::DeflateEncoder::new(&mut out, flate2::Compression::best());
    encoder.write_all(&plain).expect("deflating into memory");
    encoder.finish().expect("deflating into memory");
    fs::write(path, &out).expect("writing the vocabulary into OUT_DIR");
}

//! Writes a synthetic vault for trying ctxpack at scale:
//! `cargo run --release --example gen_vault -- 10000 /tmp/vault10k [seed]`

#[path = "../benches/support/synth.rs"]
mod synth;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: gen_vault NOTES OUT_DIR [SEED]");
        std::process::exit(2);
    }
    let notes: usize = args[1].parse().unwrap_or_else(|_| {
        eprintln!("NOTES must be a number");
        std::process::exit(2)
    });
    let seed = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(42);
    let out = std::path::Path::new(&args[2]);
    match synth::generate(out, notes, seed) {
        Ok(bytes) => println!("{notes} notes, {bytes} bytes written to {}", out.display()),
        Err(err) => {
            eprintln!("cannot write the vault: {err}");
            std::process::exit(1);
        }
    }
}

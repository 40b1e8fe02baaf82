//! One AFL++ harness for every target of `ctxpack::fuzz::TARGETS`:
//! `ctxpack-fuzz NAME` runs target `NAME` on each input AFL gives it.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = ctxpack::fuzz::target(&name) else {
        let names: Vec<&str> = ctxpack::fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("usage: ctxpack-fuzz TARGET (one of {})", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| {
        (target.run)(data);
    });
}

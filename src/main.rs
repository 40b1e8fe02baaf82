fn main() {
    std::process::exit(ctxpack::cli::run(std::env::args_os().collect()));
}

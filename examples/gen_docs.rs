//! Writes the generated documentation (man pages and shell completions) under a repository root:
//! `cargo run --example gen_docs -- DIR`. `scripts/gen-docs.sh` runs it on the working tree; the
//! test suite compares its output with the committed files.

fn main() {
    let root = std::env::args_os()
        .nth(1)
        .map_or_else(|| std::path::PathBuf::from("."), std::path::PathBuf::from);
    match mcpguard::cli::docgen::write_all(&root) {
        Ok(files) => {
            for f in files {
                println!("{}", root.join(f).display());
            }
        }
        Err(e) => {
            eprintln!("gen_docs: {e}");
            std::process::exit(1);
        }
    }
}

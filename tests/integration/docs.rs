//! The generated documentation is current: the committed man pages and completions equal what
//! `scripts/gen-docs.sh` writes now, every flag of every subcommand is in `mcpguard(1)`, and every
//! key of the shipped policies is in `mcpguard-policy(5)`. This is the CI check that a new flag
//! cannot ship undocumented.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Roff source as text to search: the escapes the generator writes are undone.
fn plain(roff: &str) -> String {
    roff.replace("\\-", "-").replace("\\e", "\\")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn committed_man_pages_and_completions_are_current() {
    let generated = mcpguard::cli::docgen::generated_files();
    let mut stale = Vec::new();
    for (rel, text) in &generated {
        let committed = std::fs::read_to_string(root().join(rel)).unwrap_or_default();
        if committed != *text {
            stale.push(rel.display().to_string());
        }
    }
    // A page or completion that is no longer generated (a removed command) is stale too.
    let known: BTreeSet<PathBuf> = generated.iter().map(|(p, _)| p.clone()).collect();
    for dir in ["man", "completions"] {
        for entry in std::fs::read_dir(root().join(dir)).into_iter().flatten() {
            let rel = Path::new(dir).join(entry.unwrap().file_name());
            let is_page = rel.extension().is_some_and(|e| e == "1" || e == "5");
            if (dir == "completions" || is_page) && !known.contains(&rel) {
                stale.push(format!("{} (no longer generated)", rel.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "the generated documentation is out of date: {}; run scripts/gen-docs.sh and commit the result",
        stale.join(", ")
    );
}

#[test]
fn every_subcommand_and_flag_is_in_the_man_page() {
    let page = plain(&read("man/mcpguard.1"));
    let mut missing = Vec::new();
    let mut root_cmd = mcpguard::cli::flags::Cli::command();
    root_cmd.build();
    let mut todo = vec![(String::from("mcpguard"), root_cmd)];
    while let Some((name, cmd)) = todo.pop() {
        if name != "mcpguard" && !page.contains(&format!(".SS \"{name}\"")) {
            missing.push(format!("the subcommand `{name}`"));
        }
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                if !page.contains(&format!("--{long}")) {
                    missing.push(format!("`{name} --{long}`"));
                }
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                todo.push((format!("{name} {}", sub.get_name()), sub.clone()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "man/mcpguard.1 lacks {}; run scripts/gen-docs.sh",
        missing.join(", ")
    );
}

/// Every key of a policy file, as (dotted table path, key, is a table). The names of
/// `[writes.tools.<name>]` tables are the user's tool names, not keys, so only their contents count.
fn policy_keys(table: &toml::Table, path: &str, out: &mut BTreeSet<(String, String, bool)>) {
    for (key, value) in table {
        match value {
            toml::Value::Table(t) if path == "writes.tools" => policy_keys(t, path, out),
            toml::Value::Table(t) => {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                out.insert((path.to_string(), key.clone(), true));
                policy_keys(t, &here, out);
            }
            _ => {
                out.insert((path.to_string(), key.clone(), false));
            }
        }
    }
}

#[test]
fn every_key_of_the_shipped_policies_is_in_the_policy_page() {
    let page = plain(&read("man/mcpguard-policy.5"));
    let mut keys = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("policies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let table: toml::Table = text
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            policy_keys(&table, "", &mut keys);
        }
    }
    assert!(keys.len() > 40, "too few policy keys found: {keys:?}");
    let missing: Vec<String> = keys
        .iter()
        .filter(|(path, key, is_table)| {
            if *is_table {
                let full = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                !page.contains(&format!("[{full}]"))
            } else {
                // Each key is the tag of its own entry in the key tables.
                !page.contains(&format!(".TP\n\\fB{key}\\fR\n"))
            }
        })
        .map(|(path, key, _)| format!("{path}.{key}"))
        .collect();
    assert!(
        missing.is_empty(),
        "man/mcpguard-policy.5 does not document {missing:?}: describe them in docs/policy.md and run scripts/gen-docs.sh"
    );
}

#[test]
fn the_completions_know_every_subcommand() {
    let cmd = mcpguard::cli::flags::Cli::command();
    for file in [
        "completions/mcpguard.bash",
        "completions/_mcpguard",
        "completions/mcpguard.fish",
    ] {
        let text = read(file);
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                text.contains(sub.get_name()),
                "{file} lacks `{}`",
                sub.get_name()
            );
        }
    }
}

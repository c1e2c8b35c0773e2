//! The rule of dependencies between the folders of the workspace (ARCHITECTURE.md, "Layers"),
//! where the compiler cannot hold it. The crate graph holds the rest: `mcpguard-core` depends on
//! no crate of ours, so nothing on the message path can reach the sandbox, the approval channels,
//! the process driver or the command line; `mcpguard-approvals` depends on no crate of ours;
//! `mcpguard-sandbox` only on the core. `the_crate_graph_is_the_one_documented` keeps those
//! manifests as the table says.
//!
//! What remains is checked here: every `crate::…`, `super::…` and `mcpguard_core::…` path in
//! every source file of the core, the sandbox and the binary is checked against the table below
//! (the folders inside the core — `gate` may not reach `wire::sink` or `audit::log` —, which parts
//! of the core the sandbox may use, and that `process` never reaches `cli`), and the imports
//! between modules must form no circle. A forbidden import fails here with the file, the line
//! and the rule it breaks.
//!
//! The table is the one in ARCHITECTURE.md; change both together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// For each folder, the paths it may import besides its own folder. An entry names a folder
/// (`snapshot`) or one module of it (`audit::event`). `*` is everything. Folder names are unique
/// across the workspace, and the binary re-exports every crate's folders under the same names,
/// so a path means the same module wherever it is written.
const RULES: &[(&str, &[&str])] = &[
    // mcpguard-core
    ("protocol", &[]),
    ("wire", &["protocol"]),
    (
        "snapshot",
        &["protocol", "wire::sanitize", "wire::injection"],
    ),
    ("policy", &["protocol"]),
    ("audit", &["protocol", "snapshot", "policy"]),
    (
        "gate",
        &[
            "protocol",
            "wire::frame",
            "wire::message",
            "wire::envelope",
            "wire::id_table",
            "wire::sanitize",
            "wire::injection",
            "wire::secrets",
            "snapshot",
            "policy",
            "audit::event",
        ],
    ),
    // mcpguard-sandbox (depends on the core, so the compiler cannot keep it to these two)
    ("sandbox", &["policy"]),
    // mcpguard, the binary (one crate, so the compiler cannot keep `process` from `cli`)
    (
        "process",
        &[
            "protocol",
            "wire",
            "snapshot",
            "policy",
            "audit",
            "gate",
            "sandbox",
            "approvals",
        ],
    ),
    ("cli", &["*"]),
];

/// The crates whose folders the table governs, by their source folder. `mcpguard-approvals`
/// is not read: it depends on no crate of ours, so it can import nothing of ours.
const SOURCES: &[&str] = &[
    "crates/mcpguard-core/src",
    "crates/mcpguard-sandbox/src",
    "src",
];

/// Each crate of the workspace and the crates of ours it may depend on (ARCHITECTURE.md,
/// "Crates").
const CRATES: &[(&str, &[&str])] = &[
    ("crates/mcpguard-core", &[]),
    ("crates/mcpguard-sandbox", &["mcpguard-core"]),
    ("crates/mcpguard-approvals", &[]),
    (
        ".",
        &["mcpguard-core", "mcpguard-sandbox", "mcpguard-approvals"],
    ),
];

/// The crate paths that name our own modules: `crate::` in any crate, and each of our crates'
/// names wherever it is used (the sandbox crate's root re-exports `mcpguard_core::policy`;
/// `mcpguard_sandbox::sandbox::…` is the folder `sandbox`, since each crate's root declares its
/// folders).
const ROOTS: &[&str] = &[
    "crate::",
    "mcpguard_core::",
    "mcpguard_sandbox::",
    "mcpguard_approvals::",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file from its crate's `src/`: `gate/session/mod.rs` → `gate::session`;
/// `lib.rs` and `main.rs` → the root (empty).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The source with comments and the contents of string and character literals blanked out
/// (newlines kept, so that offsets still give line numbers).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#, … (or an `r#ident`, which is left alone).
            let mut j = i + 1;
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.extend(std::iter::repeat_n(' ', j + 1 - i));
            i = j + 1;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), which stays.
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(k) => {
                    out.extend(std::iter::repeat_n(' ', k + 1 - i));
                    i = k + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Expands the path (or use tree) that starts at `i` into full paths, e.g.
/// `a::{b, c::{self, D}}` → `a::b`, `a::c`, `a::c::D`.
fn expand(b: &[char], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        while *i < b.len() && b[*i].is_whitespace() {
            *i += 1;
        }
        if *i < b.len() && b[*i] == '{' {
            *i += 1;
            loop {
                expand(b, i, path.clone(), out);
                while *i < b.len() && b[*i].is_whitespace() {
                    *i += 1;
                }
                match b.get(*i) {
                    Some(',') => {
                        *i += 1;
                        while *i < b.len() && b[*i].is_whitespace() {
                            *i += 1;
                        }
                        if b.get(*i) == Some(&'}') {
                            *i += 1;
                            return;
                        }
                    }
                    Some('}') => {
                        *i += 1;
                        return;
                    }
                    _ => return,
                }
            }
        }
        let start = *i;
        while *i < b.len() && (b[*i].is_alphanumeric() || b[*i] == '_') {
            *i += 1;
        }
        let segment: String = b[start..*i].iter().collect();
        if segment == "*" || segment.is_empty() {
            if b.get(*i) == Some(&'*') {
                *i += 1;
            }
            out.push(path);
            return;
        }
        if segment != "self" {
            path.push(segment);
        }
        if b.get(*i) == Some(&':') && b.get(*i + 1) == Some(&':') {
            *i += 2;
        } else {
            out.push(path);
            return;
        }
    }
}

/// Every `crate::`, `super::` and `mcpguard_core::` path of a file, resolved from the crate
/// root, with its line.
fn imports(module: &[String], code: &str) -> Vec<(usize, Vec<String>)> {
    let b: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary =
            i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_' || b[i - 1] == ':');
        let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| b.get(i + k) == Some(&c));
        let root = ROOTS.iter().copied().find(|&r| at(i, r));
        if boundary && (root.is_some() || at(i, "super::")) {
            let line = b[..i].iter().filter(|&&c| c == '\n').count() + 1;
            let mut base: Vec<String> = Vec::new();
            if at(i, "super::") {
                base = module.to_vec();
                while at(i, "super::") {
                    base.pop();
                    i += "super::".len();
                }
            } else if let Some(root) = root {
                i += root.len();
            }
            let mut paths = Vec::new();
            expand(&b, &mut i, base, &mut paths);
            found.extend(paths.into_iter().map(|p| (line, p)));
        } else {
            i += 1;
        }
    }
    found
}

/// Re-exports at a crate's root (`pub use process::diag;`, `pub use mcpguard_core::{gate, …};`)
/// resolved to what they name; a crate's own name is dropped (folder names are unique).
fn aliases(lib: &str) -> BTreeMap<String, Vec<String>> {
    let mut map = BTreeMap::new();
    let code: Vec<char> = code_only(lib).chars().collect();
    let text: String = code.iter().collect();
    for (at, _) in text.match_indices("use ") {
        let starts_line = text[..at]
            .rsplit('\n')
            .next()
            .is_some_and(|l| l.trim().starts_with("pub"));
        if !starts_line {
            continue;
        }
        let mut i = text[..at + "use ".len()].chars().count();
        let mut paths = Vec::new();
        expand(&code, &mut i, Vec::new(), &mut paths);
        for mut path in paths {
            if path.first().is_some_and(|c| c.starts_with("mcpguard_")) {
                path.remove(0);
            }
            if let Some(last) = path.last() {
                map.insert(last.clone(), path.clone());
            }
        }
    }
    map
}

struct Module {
    rel: PathBuf,
    path: Vec<String>,
    imports: Vec<(usize, Vec<String>)>,
}

fn modules() -> Vec<Module> {
    let mut out = Vec::new();
    for source in SOURCES {
        let root = repo().join(source);
        let alias = aliases(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
        let mut files = Vec::new();
        rust_files(&root, &mut files);
        out.extend(files.into_iter().map(|p| {
            let path = module_of(p.strip_prefix(&root).unwrap());
            let rel = p.strip_prefix(repo()).unwrap().to_path_buf();
            let text = std::fs::read_to_string(&p).unwrap();
            let imports = imports(&path, &code_only(&text))
                .into_iter()
                .map(|(line, mut target)| {
                    if let Some(real) = target.first().and_then(|t| alias.get(t)) {
                        target.splice(0..1, real.iter().cloned());
                    }
                    (line, target)
                })
                .collect();
            Module { rel, path, imports }
        }));
    }
    out
}

/// The breaches of the rule table, one line each.
fn breaches(modules: &[Module]) -> Vec<String> {
    let rules: BTreeMap<&str, &[&str]> = RULES.iter().copied().collect();
    let mut found = Vec::new();
    for m in modules {
        let Some(folder) = m.path.first() else {
            continue; // a crate's lib.rs, and main.rs: the crate's edge may use everything.
        };
        let Some(allowed) = rules.get(folder.as_str()) else {
            found.push(format!(
                "{}: the folder {folder:?} has no row in the rule table",
                m.rel.display()
            ));
            continue;
        };
        for (line, target) in &m.imports {
            let Some(top) = target.first() else { continue };
            if top == folder || allowed.contains(&"*") {
                continue;
            }
            let ok = allowed.iter().any(|entry| {
                let entry: Vec<&str> = entry.split("::").collect();
                entry.len() <= target.len() && entry.iter().zip(target).all(|(a, b)| a == b)
            });
            if !ok {
                found.push(format!(
                    "{}:{line}: `{folder}` imports `crate::{}`, but may import only {}",
                    m.rel.display(),
                    target.join("::"),
                    if allowed.is_empty() {
                        "nothing of ours".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ));
            }
        }
    }
    found
}

#[test]
fn every_import_follows_the_rule_table() {
    let modules = modules();
    assert!(modules.len() > 30, "read only {} files", modules.len());
    let found = breaches(&modules);
    assert!(
        found.is_empty(),
        "forbidden imports (see the rule table in ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}

/// The checker reads `crate::`, `super::` and `mcpguard_…::` paths: a crate renamed by `as`, or
/// reached by an absolute `::mcpguard_…` path, would slip past it, so neither is allowed.
#[test]
fn no_crate_of_ours_is_renamed_or_reached_by_an_absolute_path() {
    let mut found = Vec::new();
    for source in SOURCES {
        let mut files = Vec::new();
        rust_files(&repo().join(source), &mut files);
        for p in files {
            let code = code_only(&std::fs::read_to_string(&p).unwrap());
            for (n, line) in code.lines().enumerate() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let renamed = words.windows(2).any(|w| {
                    w[0].trim_start_matches("::").starts_with("mcpguard_") && w[1] == "as"
                });
                if renamed || line.contains("::mcpguard_") {
                    found.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a crate of ours renamed or reached by an absolute path (the layering checks would not see it):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_crate_graph_is_the_one_documented() {
    let mut dirs: Vec<String> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| format!("crates/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    dirs.push(".".to_string());
    dirs.sort();
    let mut listed: Vec<String> = CRATES.iter().map(|(d, _)| d.to_string()).collect();
    listed.sort();
    assert_eq!(
        dirs, listed,
        "every crate of the workspace has a row in CRATES"
    );
    for (dir, allowed) in CRATES {
        let file = repo().join(dir).join("Cargo.toml");
        let manifest: toml::Table = std::fs::read_to_string(&file).unwrap().parse().unwrap();
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(table).and_then(|t| t.as_table()) else {
                continue;
            };
            for name in deps.keys().filter(|n| n.starts_with("mcpguard")) {
                assert!(
                    allowed.contains(&name.as_str()),
                    "{dir}/Cargo.toml: [{table}] names {name}, but the crate may depend only on {allowed:?} (ARCHITECTURE.md, \"Crates\")"
                );
            }
        }
    }
    // The core's dependencies are exactly those ARCHITECTURE.md gives a reason for: a crate
    // added to the trusted base (a command-line parser, a D-Bus stack) fails here until the
    // table says why it is there.
    let manifest: toml::Table =
        std::fs::read_to_string(repo().join("crates/mcpguard-core/Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
    let mut in_manifest: Vec<String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    in_manifest.sort();
    let arch = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let table = arch
        .split("The core's direct dependencies and why each is there")
        .nth(1)
        .expect("ARCHITECTURE.md has the table of the core's direct dependencies");
    let mut documented: Vec<String> = table
        .lines()
        .skip_while(|l| !l.starts_with("| dependency"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|row| {
            // The names, without the features in parentheses: "serde, serde_json (`raw_value`, …)".
            let first = row.split('|').nth(1).unwrap_or_default();
            let mut names = String::new();
            let mut depth = 0;
            for c in first.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ if depth == 0 => names.push(c),
                    _ => {}
                }
            }
            names
                .split(',')
                .map(|name| name.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|n| !n.is_empty())
        .collect();
    documented.sort();
    assert_eq!(
        in_manifest, documented,
        "crates/mcpguard-core/Cargo.toml's [dependencies] against ARCHITECTURE.md's table of the core's direct dependencies"
    );
    // The message path holds no `unsafe`, and the compiler keeps it so.
    let core = std::fs::read_to_string(repo().join("crates/mcpguard-core/src/lib.rs")).unwrap();
    assert!(
        code_only(&core)
            .lines()
            .any(|l| l.trim() == "#![forbid(unsafe_code)]"),
        "crates/mcpguard-core/src/lib.rs must forbid unsafe code"
    );
}

#[test]
fn the_rule_table_has_no_circle() {
    // A folder that may import another must not be importable by it, directly or not.
    let graph: BTreeMap<&str, Vec<&str>> = RULES
        .iter()
        .map(|(f, allowed)| {
            let deps = allowed
                .iter()
                .map(|e| e.split("::").next().unwrap())
                .filter(|d| *d != "*")
                .collect();
            (*f, deps)
        })
        .collect();
    let names: Vec<&str> = graph.keys().copied().collect();
    let edges: Vec<(String, String)> = graph
        .iter()
        .flat_map(|(f, deps)| deps.iter().map(|d| (f.to_string(), d.to_string())))
        .collect();
    let names: Vec<String> = names.into_iter().map(str::to_string).collect();
    assert_eq!(circle(&names, &edges), None);
    assert!(
        graph.values().all(|deps| !deps.contains(&"cli")),
        "nothing may import cli"
    );
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let modules = modules();
    let known: BTreeSet<Vec<String>> = modules.iter().map(|m| m.path.clone()).collect();
    // The module a path lands in: its longest prefix that is a module of ours.
    let owner = |target: &[String]| -> Option<Vec<String>> {
        (1..=target.len())
            .rev()
            .map(|n| target[..n].to_vec())
            .find(|p| known.contains(p))
    };
    let mut edges = BTreeSet::new();
    for m in &modules {
        if m.path.is_empty() {
            continue;
        }
        for (_, target) in &m.imports {
            let Some(to) = owner(target) else { continue };
            // A module and the modules inside it are one unit (a type split over sibling
            // files, tests that see their parent): only edges between unrelated modules count.
            if to.starts_with(&m.path) || m.path.starts_with(&to) {
                continue;
            }
            edges.insert((m.path.join("::"), to.join("::")));
        }
    }
    let names: Vec<String> = known.iter().map(|p| p.join("::")).collect();
    let edges: Vec<(String, String)> = edges.into_iter().collect();
    if let Some(c) = circle(&names, &edges) {
        panic!("modules import each other in a circle: {}", c.join(" → "));
    }
}

/// A circle in the directed graph, if there is one, as the list of its nodes (first repeated).
fn circle(names: &[String], edges: &[(String, String)]) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &[(String, String)],
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| s == n).unwrap();
                let mut c = stack[from..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for (_, to) in edges.iter().filter(|(f, _)| f == n) {
            if let Some(c) = visit(to, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    names
        .iter()
        .find_map(|n| visit(n, edges, &mut state, &mut Vec::new()))
}

#[test]
fn the_checker_sees_use_trees_and_super_paths() {
    let code = code_only(
        "use crate::{wire::{self, frame::Frame}, gate::pin};\n\
         // crate::cli in a comment\n\
         let s = \"crate::cli in a string\";\n\
         let c = '\"'; let t = super::super::sandbox::Prepared;\n\
         use mcpguard_core::audit::log::AuditLog;\n",
    );
    let paths: Vec<String> = imports(&["gate".into(), "session".into()], &code)
        .into_iter()
        .map(|(line, p)| format!("{line}:{}", p.join("::")))
        .collect();
    assert_eq!(
        paths,
        [
            "1:wire",
            "1:wire::frame::Frame",
            "1:gate::pin",
            "4:sandbox::Prepared",
            "5:audit::log::AuditLog"
        ]
    );
}

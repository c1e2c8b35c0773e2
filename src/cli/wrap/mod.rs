//! `mcpguard wrap`: rewrites a host's MCP configuration so that every local server runs under
//! mcpguard.
//!
//! The hosts and their files (`hosts` knows where each keeps its servers and how it spells an
//! entry): `{"mcpServers": {...}}` (Claude Desktop, Claude Code, Cursor, Gemini CLI, Windsurf),
//! `{"servers": {...}}` (VS Code's `.vscode/mcp.json`), `{"mcp": {"servers": {...}}}` (VS Code's
//! `settings.json`), `{"context_servers": {...}}` (Zed's `settings.json`), all read as JSONC
//! (`jsonc`); `mcp: servers:` (fast-agent) and `extensions:` (Goose) in YAML (`yaml`); Codex's
//! `[mcp_servers.NAME]` in TOML (`codex`). Anything else is refused whole, because a rewrite of
//! a file we only half understand could leave a server unguarded while the user believes it is
//! guarded.
//!
//! One procedure (`rewrite`) decides for every format, over the JSON view of the entries; the
//! file is then changed only where the values changed (`edit` for JSON and YAML, `toml_edit` for
//! TOML), so comments, trailing commas, key order and indentation stay as they were.
//!
//! Fail closed: a freshly wrapped entry pins the placeholder digest [`PENDING`], and mcpguard
//! refuses to start a server with that pin, printing the capture and review steps. `wrap --pin`
//! then records the digest of each reviewed snapshot. There is no state in which a wrapped
//! server runs with tools nobody reviewed.
//!
//! Every write keeps a backup of the original bytes (the first and the latest backup are kept,
//! the ones between removed) and is atomic (temporary file, fsync, rename), with the original file's permissions, since these files
//! often hold API keys (`files`).

mod codex;
mod edit;
mod files;
mod grants;
mod hosts;
mod jsonc;
mod tree;
mod yaml;

pub use files::unified_diff;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::cli::commands::CmdResult;
use hosts::Syntax;

/// The digest a freshly wrapped entry carries until its snapshot is reviewed and pinned. It is not
/// hexadecimal, so it can never match a real snapshot.
pub const PENDING: &str = "PENDING-REVIEW";

/// Options of `mcpguard wrap`.
pub struct WrapArgs<'a> {
    pub config: &'a Path,
    pub dry_run: bool,
    pub snapshot_dir: Option<&'a Path>,
    pub mcpguard: Option<&'a Path>,
    pub policy: Option<&'a Path>,
    pub pin: bool,
    /// The one entry `grants` are for (`--entry NAME`); needed when there are several.
    pub entry: Option<&'a str>,
    /// `--sandbox-read`, `--sandbox-write` and `--sandbox-env` for that entry.
    pub grants: &'a crate::cli::flags::SandboxGrants,
    /// With `pin`: pin only the wrapped servers whose `--manifest` is this snapshot (the one
    /// `mcpguard update --config` just wrote); it is an error when none is.
    pub only: Option<&'a Path>,
    /// `--from-lock`: write an entry per server of this lock file.
    pub from_lock: Option<&'a Path>,
    /// `--yes`: apply the grants wrap proposes (`grants`) without asking.
    pub yes: bool,
}

/// When the host configuration still pins [`PENDING`], the message mcpguard refuses to start
/// with: the exact commands that capture, review and pin this server.
pub fn pending_pin(
    sha256: &str,
    manifest: &Path,
    key: &str,
    server: &[OsString],
) -> Option<String> {
    if sha256 != PENDING {
        return None;
    }
    let command: Vec<String> = server
        .iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect();
    let snap = shell_quote(&manifest.display().to_string());
    let key_q = shell_quote(key);
    Some(format!(
        "refusing to start the server: no reviewed snapshot is pinned for server {key:?} yet \
         (the host configuration was written by `mcpguard wrap` and pins {PENDING}). \
         Capture, review and pin it, then restart the server in the host:\n  \
         mcpguard capture --server {key_q} --out {snap} -- {}\n  \
         mcpguard show {snap}\n  \
         mcpguard review {snap} --server {key_q} --tool NAME --reviewer YOU --assert ... --channel ...\n  \
         mcpguard wrap --pin <the host configuration file>",
        command.join(" ")
    ))
}

pub use crate::cli::shell_quote;

/// Claude Code's `~/.claude.json` also keeps servers per project (`projects.PATH.mcpServers`,
/// its "local" scope). `wrap` rewrites the user-scope `mcpServers` only, and says so for each
/// project that has servers, so that nothing is left unguarded without a word.
pub(super) fn unwrapped_claude_code_projects(doc: &Value) -> Vec<String> {
    let Some(projects) = doc.get("projects").and_then(Value::as_object) else {
        return Vec::new();
    };
    projects
        .iter()
        .filter_map(|(path, p)| {
            let servers = p.get("mcpServers")?.as_object()?;
            (!servers.is_empty()).then(|| {
                format!(
                    "left alone: {} local-scope server(s) of Claude Code project {path:?} (projects.{path}.mcpServers: {}); move them to the project's .mcp.json and wrap that file",
                    servers.len(),
                    servers.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })
        })
        .collect()
}

/// What one server entry is.
#[derive(Debug)]
enum Entry {
    /// A local stdio server: wrapped by `wrap`.
    Local { command: String, args: Vec<String> },
    /// Already runs under mcpguard; its options before `--`.
    Wrapped { options: Vec<String> },
    /// A remote server (`url`, `type: "http"` or `"sse"`): not something a stdio sidecar can guard.
    Remote(String),
}

fn is_mcpguard(command: &str, ours: &Path) -> bool {
    Path::new(command) == ours
        || Path::new(command)
            .file_name()
            .is_some_and(|n| n == "mcpguard")
}

fn classify(name: &str, v: &Value, ours: &Path) -> Result<Entry, String> {
    let Some(obj) = v.as_object() else {
        return Err(format!("server {name:?} is not a JSON object"));
    };
    let kind = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(_) => return Err(format!("server {name:?}: `type` is not a string")),
    };
    let remote = match kind {
        None | Some("stdio") => false,
        Some("http" | "sse" | "streamable-http" | "streamableHttp" | "ws") => true,
        Some(other) => {
            return Err(format!(
                "server {name:?} has type {other:?}, which mcpguard does not know"
            ))
        }
    };
    let command = obj.get("command");
    // Gemini CLI names a streamable-HTTP server's address `httpUrl`.
    if remote || obj.contains_key("url") || obj.contains_key("httpUrl") {
        if command.is_some() {
            return Err(format!(
                "server {name:?} has both a remote type or url and a command"
            ));
        }
        let what = obj
            .get("url")
            .or_else(|| obj.get("httpUrl"))
            .and_then(Value::as_str)
            .map_or_else(
                || format!("type {}", kind.unwrap_or("?")),
                |u| u.to_string(),
            );
        return Ok(Entry::Remote(what));
    }
    let command = match command {
        Some(Value::String(c)) if !c.is_empty() => c.clone(),
        Some(_) => {
            return Err(format!(
                "server {name:?}: `command` is not a non-empty string"
            ))
        }
        None => return Err(format!("server {name:?} has neither `command` nor `url`")),
    };
    let args = match obj.get("args") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("server {name:?}: `args` holds something other than strings"))?,
        Some(_) => return Err(format!("server {name:?}: `args` is not an array")),
    };
    if is_mcpguard(&command, ours) {
        return match args.iter().position(|a| a == "--") {
            Some(end) => Ok(Entry::Wrapped {
                options: args[..end].to_vec(),
            }),
            None => Err(format!(
                "server {name:?} runs mcpguard without `-- <server command>`, a form wrap does not know"
            )),
        };
    }
    Ok(Entry::Local { command, args })
}

/// The value of `--name VALUE` or `--name=VALUE` among mcpguard options.
fn option<'a>(options: &'a [String], name: &str) -> Option<(usize, &'a str)> {
    let long = format!("--{name}");
    let eq = format!("--{name}=");
    for (i, o) in options.iter().enumerate() {
        if *o == long {
            return options.get(i + 1).map(|v| (i + 1, v.as_str()));
        }
        if let Some(v) = o.strip_prefix(&eq) {
            return Some((i, v));
        }
    }
    None
}

/// A file name for a server's snapshot: the server's name with everything but letters, digits,
/// `.`, `_` and `-` replaced, so that a name cannot climb out of the snapshot directory.
fn snapshot_file_name(name: &str) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() || safe.starts_with('.') {
        safe.insert_str(0, "server");
    }
    safe
}

/// The default snapshot folder of one host configuration: `snapshots/STEM-HASH`, where STEM is
/// the configuration's file name without its extension and HASH the first 8 bytes (hex) of the
/// SHA-256 of its resolved absolute path. Two host configurations that both have a server
/// `notes` (Claude Desktop and Cursor, say) get two snapshots: a capture, review or update for
/// one never changes the file the other pins. Sharing one snapshot would make every `update`
/// break the other configuration's pinned digest, and the two entries need not even run the
/// same server.
fn default_snapshot_dir(config: &Path) -> Result<PathBuf, String> {
    use sha2::{Digest, Sha256};
    let resolved = std::fs::canonicalize(config)
        .or_else(|_| std::path::absolute(config))
        .map_err(|e| format!("cannot resolve {}: {e}", config.display()))?;
    let digest = Sha256::digest(resolved.as_os_str().as_encoded_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let stem = resolved
        .file_stem()
        .map(|s| snapshot_file_name(&s.to_string_lossy()))
        .unwrap_or_else(|| "config".into());
    Ok(snapshot_root()?.join(format!("{stem}-{hash}")))
}

fn snapshot_root() -> Result<PathBuf, String> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        })
        .ok_or(
            "neither XDG_CONFIG_HOME nor HOME is set to an absolute path; give --snapshot-dir",
        )?;
    Ok(config.join("mcpguard").join("snapshots"))
}

/// Hosts start servers from a directory of their choosing, so every path written into the
/// configuration is made absolute. A bare program name (no `/`) is left for `PATH` to resolve.
fn absolute(p: &Path, bare_ok: bool) -> Result<PathBuf, String> {
    if p.is_absolute() || (bare_ok && p.components().count() == 1 && !p.starts_with(".")) {
        return Ok(p.to_path_buf());
    }
    std::path::absolute(p).map_err(|e| format!("cannot make {} absolute: {e}", p.display()))
}

fn set_args(entry: &mut Value, command: &str, args: Vec<String>) {
    let Some(obj) = entry.as_object_mut() else {
        return;
    };
    let args = Value::Array(args.into_iter().map(Value::String).collect());
    if obj.contains_key("args") {
        obj.insert("command".into(), Value::String(command.to_string()));
        obj.insert("args".into(), args);
        return;
    }
    // Put the new `args` right after `command`, where a reader looks for it.
    let old = std::mem::take(obj);
    for (k, v) in old {
        if k == "command" {
            obj.insert(k, Value::String(command.to_string()));
            obj.insert("args".into(), args.clone());
        } else {
            obj.insert(k, v);
        }
    }
}

/// `mcpguard wrap CONFIG [--dry-run] [--snapshot-dir DIR] [--mcpguard PATH] [--policy FILE] [--pin]`
pub fn run(args: &WrapArgs<'_>) -> CmdResult {
    let shown = args.config.display().to_string();
    let original = std::fs::read(args.config).map_err(|e| format!("cannot read {shown}: {e}"))?;
    // The file is edited in place, byte for byte, so it must be text.
    let text = String::from_utf8(original.clone()).map_err(|e| {
        format!(
            "{shown} is not UTF-8 text (invalid at byte {}), so mcpguard will not rewrite it; nothing was changed",
            e.utf8_error().valid_up_to()
        )
    })?;
    // Codex keeps its servers in TOML, fast-agent and Goose in YAML, every other host in JSON
    // (with comments where the host allows them). Either way the entries are rewritten as JSON
    // values by one procedure, and the file gets them back with its layout and comments kept.
    let (updated, outcome) = match Syntax::of(args.config) {
        None => {
            let mut tdoc: toml_edit::DocumentMut = text.parse().map_err(|e| {
                format!("{shown} is not valid TOML, so mcpguard will not rewrite it ({e}); nothing was changed")
            })?;
            let mut servers = codex::toml_servers(&tdoc)
                .map_err(|why| format!("refusing to change {shown}: {why}; nothing was changed"))?;
            let outcome = rewrite(&mut servers, args, &shown)?;
            codex::set_toml_servers(&mut tdoc, &servers);
            (tdoc.to_string(), outcome)
        }
        Some(syntax) => edit::run(&text, syntax, args, &shown)?,
    };
    let Rewritten {
        notes,
        next_steps,
        unpinned,
    } = outcome;
    for n in &notes {
        eprintln!("{n}");
    }
    // `--pin` exits 1 while a wrapped server still cannot start, so that a script notices.
    let code = u8::from(unpinned > 0);
    if updated == text {
        eprintln!("{shown}: nothing to change");
        return Ok(code);
    }
    if args.dry_run {
        print!(
            "{}",
            unified_diff(&text, &updated, &shown, &format!("{shown} (wrapped)"))
        );
        eprintln!("dry run: {shown} was not changed");
        return Ok(code);
    }
    let backup = files::write_with_backup(args.config, &original, updated.as_bytes())?;
    eprintln!(
        "{shown}: updated (the original is kept as {})",
        backup.display()
    );
    if !next_steps.is_empty() {
        eprintln!(
            "The wrapped servers refuse to start until their snapshots are reviewed and pinned. For each:\n{}\nthen pin the reviewed snapshots and restart the host:\n  mcpguard wrap --pin {}",
            next_steps.join("\n"),
            shell_quote(&shown)
        );
    }
    Ok(code)
}

/// Decides which proposed grants of server `name` are applied: all with `--yes`; on a terminal,
/// the ones the person accepts (read-write, read-only or none, the proposal as the default);
/// otherwise none, and the proposal is printed with the command that applies it.
fn accept(
    name: &str,
    proposals: Vec<grants::Proposal>,
    args: &WrapArgs<'_>,
    shown: &str,
    notes: &mut Vec<String>,
) -> Vec<grants::Proposal> {
    use std::io::{BufRead, IsTerminal, Write};
    if proposals.is_empty() {
        return proposals;
    }
    let say = |p: &grants::Proposal| format!("{} {} (from {})", p.flag(), p.path.display(), p.from);
    if args.yes {
        for p in &proposals {
            notes.push(format!("granted to {name:?}: {} (--yes)", say(p)));
        }
        return proposals;
    }
    if !args.dry_run && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        let mut kept = Vec::new();
        let stdin = std::io::stdin();
        for mut p in proposals {
            let default = if p.write { "w" } else { "r" };
            eprint!(
                "{name:?} names {} ({}). Let it [w]rite there, only [r]ead, or [n]either? [{default}] ",
                p.path.display(),
                p.from
            );
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            match line.trim() {
                "" => {}
                "w" | "W" => p.write = true,
                "r" | "R" => p.write = false,
                _ => continue,
            }
            notes.push(format!("granted to {name:?}: {}", say(&p)));
            kept.push(p);
        }
        return kept;
    }
    let flags: Vec<String> = proposals
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p.flag(),
                shell_quote(&p.path.display().to_string())
            )
        })
        .collect();
    notes.push(format!(
        "proposed for {name:?}, not applied (no terminal to ask, and no --yes):\n{}\n  apply them with: mcpguard wrap {} --entry {} {}",
        proposals.iter().map(|p| format!("  {}", say(p))).collect::<Vec<_>>().join("\n"),
        shell_quote(shown),
        shell_quote(name),
        flags.join(" ")
    ));
    Vec::new()
}

/// `wrap --entry NAME --sandbox-...` on an entry already wrapped: the grants are added to its
/// mcpguard options (before `--`), each once; the pinned digest stays valid, because the
/// snapshot does not depend on the sandbox's grants.
fn regrant(
    entry: &mut Value,
    name: &str,
    options: &[String],
    grants: &crate::cli::flags::SandboxGrants,
    notes: &mut Vec<String>,
) {
    let has = |flag: &str, value: &str| {
        options.windows(2).any(|w| w[0] == flag && w[1] == value)
            || options.contains(&format!("{flag}={value}"))
    };
    let mut added: Vec<String> = Vec::new();
    let wanted = grants
        .read
        .iter()
        .map(|p| ("--sandbox-read", p.display().to_string()))
        .chain(
            grants
                .write
                .iter()
                .map(|p| ("--sandbox-write", p.display().to_string())),
        )
        .chain(grants.env.iter().map(|v| ("--sandbox-env", v.clone())))
        .chain(
            grants
                .connect
                .iter()
                .map(|d| ("--sandbox-connect", d.to_string())),
        );
    for (flag, value) in wanted {
        if !has(flag, &value) && !added.windows(2).any(|w| w[0] == flag && w[1] == value) {
            added.extend([flag.to_string(), value]);
        }
    }
    if added.is_empty() {
        notes.push(format!(
            "already wrapped: {name:?} (it already has these grants)"
        ));
        return;
    }
    let Some(all) = entry.get("args").and_then(Value::as_array) else {
        return;
    };
    let mut new_args: Vec<Value> = options.iter().cloned().map(Value::String).collect();
    new_args.extend(added.iter().cloned().map(Value::String));
    new_args.extend(all.iter().skip(options.len()).cloned());
    entry["args"] = Value::Array(new_args);
    notes.push(format!(
        "changed the mcpguard options of {name:?}: added {} (its pinned snapshot stays valid; capture and update with the same options)",
        added.join(" ")
    ));
}

/// What [`rewrite`] did, for the person.
pub(super) struct Rewritten {
    notes: Vec<String>,
    next_steps: Vec<String>,
    /// Wrapped servers still pinning [`PENDING`] after `--pin`.
    unpinned: usize,
}

/// Wraps (or, with `--pin`, pins) the entries of one servers object, whatever file it came from.
pub(super) fn rewrite(
    servers: &mut Map<String, Value>,
    args: &WrapArgs<'_>,
    shown: &str,
) -> Result<Rewritten, String> {
    let ours = match args.mcpguard {
        Some(p) => absolute(p, true)?,
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this executable ({e}); give --mcpguard PATH"))?,
    };
    // Classify everything first, so that one entry we do not understand leaves the whole file
    // untouched rather than half wrapped.
    let mut entries = Vec::new();
    for (name, v) in servers.iter() {
        let entry = classify(name, v, &ours)
            .map_err(|why| format!("refusing to change {shown}: {why}; nothing was changed"))?;
        entries.push((name.clone(), entry));
    }
    let has_grants = !(args.grants.read.is_empty()
        && args.grants.write.is_empty()
        && args.grants.env.is_empty()
        && args.grants.connect.is_empty());
    let local: Vec<&str> = entries
        .iter()
        .filter(|(_, e)| matches!(e, Entry::Local { .. }))
        .map(|(n, _)| n.as_str())
        .collect();
    // Grants are for one server: a write grant for every server of a host would give each the
    // others' data.
    let granted: Option<&str> = match (args.entry, has_grants) {
        (Some(name), _) => match entries.iter().find(|(n, _)| n == name) {
            // An entry already wrapped gets the grants added to its mcpguard options.
            Some((_, Entry::Local { .. } | Entry::Wrapped { .. })) => Some(name),
            Some(_) => return Err(format!(
                "refusing to change {shown}: --entry {name:?} is a remote server, which mcpguard does not run, so it has no sandbox to grant anything in; nothing was changed"
            )),
            None => return Err(format!(
                "refusing to change {shown}: it has no server {name:?} (servers: {}); nothing was changed",
                entries.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
            )),
        },
        (None, true) if local.len() == 1 => Some(local[0]),
        (None, true) => return Err(format!(
            "refusing to change {shown}: --sandbox-read/--sandbox-write/--sandbox-env are for one server; name it with --entry NAME (local servers: {}); nothing was changed",
            local.join(", ")
        )),
        (None, false) => None,
    };
    let mut notes = Vec::new();
    let mut next_steps = Vec::new();
    let mut unpinned = 0;
    if let Some(lock) = args.from_lock {
        from_lock(servers, lock, &ours, &mut notes)?;
    } else if args.pin {
        unpinned = pin_entries(servers, &entries, &mut notes, args.only)?;
        if let (Some(only), true) = (args.only, notes.is_empty()) {
            return Err(format!(
                "no server in {shown} runs under mcpguard with the snapshot {}; wrap it first (`mcpguard wrap {}`), or pin by hand",
                only.display(),
                shell_quote(shown)
            ));
        }
    } else {
        let dir = match args.snapshot_dir {
            Some(d) => absolute(d, false)?,
            None => default_snapshot_dir(args.config)?,
        };
        let policy = args.policy.map(|p| absolute(p, false)).transpose()?;
        // What guards the servers, never proposed as a grant (`grants::propose`).
        let mut protected = vec![absolute(args.config, false)?, dir.clone()];
        protected.extend(policy.clone());
        let mut taken: Vec<PathBuf> = entries
            .iter()
            .filter_map(|(_, e)| match e {
                Entry::Wrapped { options } => {
                    option(options, "manifest").map(|(_, p)| PathBuf::from(p))
                }
                _ => None,
            })
            .collect();
        for (name, entry) in &entries {
            match entry {
                Entry::Remote(what) => notes.push(format!(
                    "left alone: {name:?} is a remote server ({what}); mcpguard guards local stdio servers"
                )),
                Entry::Wrapped { options } if granted == Some(name.as_str()) => {
                    regrant(&mut servers[name.as_str()], name, options, args.grants, &mut notes);
                }
                Entry::Wrapped { options } => notes.push(match option(options, "sha256") {
                    Some((_, PENDING)) => format!(
                        "already wrapped: {name:?} (not pinned yet: capture, review, then `mcpguard wrap --pin {}`)",
                        shell_quote(shown)
                    ),
                    Some(_) => format!("already wrapped: {name:?}"),
                    None => format!("already wrapped: {name:?} (without a pinned snapshot; left as it is)"),
                }),
                Entry::Local { command, args: server_args } => {
                    let base = snapshot_file_name(name);
                    let mut snap = dir.join(format!("{base}.snapshot.json"));
                    let mut n = 2;
                    while taken.contains(&snap) {
                        snap = dir.join(format!("{base}-{n}.snapshot.json"));
                        n += 1;
                    }
                    taken.push(snap.clone());
                    let snap_s = snap.display().to_string();
                    let mut new_args = vec![
                        "--manifest".to_string(),
                        snap_s.clone(),
                        "--sha256".to_string(),
                        PENDING.to_string(),
                        "--server".to_string(),
                        name.clone(),
                    ];
                    if let Some(p) = &policy {
                        new_args.push("--policy".into());
                        new_args.push(p.display().to_string());
                    }
                    // What the sandbox gives this server beyond the policy: the grants named
                    // for it, and its `env` by name (the host sets the values, in mcpguard's
                    // environment; the sandbox would otherwise remove them).
                    let mut sandbox_opts: Vec<String> = Vec::new();
                    if granted == Some(name.as_str()) {
                        for p in &args.grants.read {
                            sandbox_opts.extend(["--sandbox-read".into(), p.display().to_string()]);
                        }
                        for p in &args.grants.write {
                            sandbox_opts.extend(["--sandbox-write".into(), p.display().to_string()]);
                        }
                        for d in &args.grants.connect {
                            sandbox_opts.extend(["--sandbox-connect".into(), d.to_string()]);
                        }
                    }
                    // The paths the entry names, proposed as grants: applied when the person
                    // accepts them (a terminal, or --yes), otherwise only printed.
                    let explicit: Vec<PathBuf> = if granted == Some(name.as_str()) {
                        args.grants.read.iter().chain(&args.grants.write).cloned().collect()
                    } else {
                        Vec::new()
                    };
                    let (proposals, left_out, narrowed) = grants::propose(
                        server_args,
                        servers[name.as_str()].get("env").and_then(Value::as_object),
                        &explicit,
                        &protected,
                    );
                    for why in left_out {
                        notes.push(format!(
                            "not proposed for {name:?}: {why}; grant it with `mcpguard wrap {} --entry {} --sandbox-read PATH` only if you mean it",
                            shell_quote(shown),
                            shell_quote(name)
                        ));
                    }
                    for n in narrowed {
                        let regrant = format!(
                            "mcpguard wrap {} --entry {}",
                            shell_quote(shown),
                            shell_quote(name)
                        );
                        notes.push(format!("note: {}", n.say(name, &regrant)));
                    }
                    for p in accept(name, proposals, args, shown, &mut notes) {
                        sandbox_opts.extend([p.flag().to_string(), p.path.display().to_string()]);
                    }
                    let mut env_names: Vec<String> = servers[name.as_str()]
                        .get("env")
                        .and_then(Value::as_object)
                        .map(|e| e.keys().cloned().collect())
                        .unwrap_or_default();
                    if granted == Some(name.as_str()) {
                        // A name the entry's `env` already sets is passed once.
                        for var in &args.grants.env {
                            if !env_names.contains(var) {
                                env_names.push(var.clone());
                            }
                        }
                    }
                    let mut passed = Vec::new();
                    for var in &env_names {
                        if crate::cli::flags::env_name(var).is_ok() {
                            sandbox_opts.extend(["--sandbox-env".into(), var.clone()]);
                            passed.push(var.clone());
                        } else {
                            notes.push(format!(
                                "note: {name:?} sets the variable {var:?}, which the sandbox cannot pass by name; the server will not see it"
                            ));
                        }
                    }
                    new_args.extend(sandbox_opts.iter().cloned());
                    new_args.push("--".into());
                    new_args.push(command.clone());
                    new_args.extend(server_args.iter().cloned());
                    set_args(&mut servers[name.as_str()], &ours.display().to_string(), new_args);
                    notes.push(format!("wrapped: {name:?} (snapshot {snap_s}, not pinned yet)"));
                    if !passed.is_empty() {
                        notes.push(format!(
                            "note: {name:?} sets environment variables ({}): passed to the server by name (--sandbox-env); when you capture it, set them as the host configuration does",
                            passed.join(", ")
                        ));
                    }
                    // The capture runs the server under the same sandbox options as the host
                    // will, so that copying the command works.
                    let cmd: Vec<String> = sandbox_opts
                        .iter()
                        .map(|a| shell_quote(a))
                        .chain(std::iter::once("--".to_string()))
                        .chain(std::iter::once(command).chain(server_args).map(|a| shell_quote(a)))
                        .collect();
                    let policy_opt = policy
                        .as_ref()
                        .map(|p| format!("--policy {} ", shell_quote(&p.display().to_string())))
                        .unwrap_or_default();
                    next_steps.push(format!(
                        "  mcpguard capture --server {} --out {} {policy_opt}{}\n  mcpguard show {}\n  mcpguard review {} --server {} ...",
                        shell_quote(name),
                        shell_quote(&snap_s),
                        cmd.join(" "),
                        shell_quote(&snap_s),
                        shell_quote(&snap_s),
                        shell_quote(name),
                    ));
                }
            }
        }
        if !next_steps.is_empty() && !args.dry_run {
            std::fs::create_dir_all(&dir).map_err(|e| {
                format!(
                    "cannot create the snapshot directory {}: {e}",
                    dir.display()
                )
            })?;
        }
    }
    Ok(Rewritten {
        notes,
        next_steps,
        unpinned,
    })
}

/// `--from-lock`: an entry per server of the lock, pinned to the lock's snapshot and digest, so
/// that every machine of a team runs what the team reviewed. Entries of other names are kept.
fn from_lock(
    servers: &mut Map<String, Value>,
    lock_path: &Path,
    ours: &Path,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let lock = super::lock::Lockfile::load(lock_path)?;
    for (key, s) in &lock.servers {
        let mut args = vec![
            "--manifest".to_string(),
            lock.resolve(&s.snapshot).display().to_string(),
            "--sha256".to_string(),
            s.sha256.clone(),
            "--server".to_string(),
            key.clone(),
        ];
        if let Some(p) = &s.policy {
            args.push("--policy".into());
            args.push(lock.resolve(p).display().to_string());
        }
        for r in &s.sandbox_read {
            args.push("--sandbox-read".into());
            args.push(r.display().to_string());
        }
        for w in &s.sandbox_write {
            args.push("--sandbox-write".into());
            args.push(w.display().to_string());
        }
        for name in &s.sandbox_env {
            args.push("--sandbox-env".into());
            args.push(name.clone());
        }
        args.push("--".into());
        args.extend(s.command.iter().cloned());
        let replaced = servers.contains_key(key);
        let entry = servers
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        if let Some(obj) = entry.as_object_mut() {
            // A remote entry of the same name becomes the locked local one.
            for k in ["url", "type", "headers"] {
                obj.remove(k);
            }
            // `set_args` puts `args` after an existing `command`.
            obj.entry("command")
                .or_insert_with(|| Value::String(String::new()));
        }
        set_args(entry, &ours.display().to_string(), args);
        notes.push(format!(
            "{}: {key:?} from {} (snapshot {}, sha256 {})",
            if replaced { "replaced" } else { "added" },
            lock_path.display(),
            lock.resolve(&s.snapshot).display(),
            s.sha256
        ));
    }
    Ok(())
}

/// `--pin`: for each wrapped entry with a snapshot on disk that verifies (reviews complete and
/// acceptable to the entry's policy, at least one tool reviewed), records its digest. Returns how
/// many wrapped servers still pin [`PENDING`].
fn pin_entries(
    servers: &mut Map<String, Value>,
    entries: &[(String, Entry)],
    notes: &mut Vec<String>,
    only: Option<&Path>,
) -> Result<usize, String> {
    let same_file = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b))
    {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    };
    let mut pending = 0;
    for (name, entry) in entries {
        let Entry::Wrapped { options } = entry else {
            if let (Entry::Local { .. }, None) = (entry, only) {
                notes.push(format!("not wrapped: {name:?} (run `mcpguard wrap` first)"));
            }
            continue;
        };
        if let Some(only) = only {
            match option(options, "manifest") {
                Some((_, snap)) if same_file(Path::new(snap), only) => {}
                _ => continue,
            }
        }
        let (Some((_, snap)), Some((sha_at, sha)), Some((_, key))) = (
            option(options, "manifest"),
            option(options, "sha256"),
            option(options, "server"),
        ) else {
            notes.push(format!(
                "not pinned: {name:?} has no --manifest, --sha256 and --server"
            ));
            continue;
        };
        pending += usize::from(sha == PENDING);
        let snap = Path::new(snap);
        if !snap.exists() {
            notes.push(format!(
                "not pinned: {name:?}: {} does not exist yet (capture and review it first)",
                snap.display()
            ));
            continue;
        }
        let policy =
            crate::policy::load_layered(option(options, "policy").map(|(_, p)| Path::new(p)))
                .map(|l| l.policy)
                .map_err(|e| format!("server {name:?}: {e}"))?;
        let acceptance = crate::snapshot::manifest::Acceptance {
            allow_model_backed: policy.review.allow_model_backed,
            forbidden_side_effects: policy.review.forbidden_side_effects.clone(),
            max_validity: policy.review.max_validity,
        };
        let verified = crate::snapshot::manifest::load(snap).and_then(|m| {
            crate::gate::pin::pin_from_manifest(m, key, jiff::Timestamp::now(), &acceptance)
                .map(|pin| (pin.digest, pin.tools.len()))
        });
        match verified {
            Err(e) => notes.push(format!("not pinned: {name:?}: {e}")),
            Ok((_, 0)) => notes.push(format!(
                "not pinned: {name:?}: no tool of server {key:?} is reviewed in {} yet",
                snap.display()
            )),
            Ok((digest, _)) if digest == sha => {
                notes.push(format!("already pinned: {name:?} ({digest})"))
            }
            Ok((digest, count)) => {
                let mut new_options = options.clone();
                new_options[sha_at] = if new_options[sha_at].starts_with("--sha256=") {
                    format!("--sha256={digest}")
                } else {
                    digest.clone()
                };
                if let Some(Value::Array(args)) = servers[name.as_str()].get_mut("args") {
                    for (slot, value) in args.iter_mut().zip(new_options) {
                        *slot = Value::String(value);
                    }
                }
                notes.push(format!(
                    "pinned: {name:?} {digest} ({count} reviewed tools)"
                ));
                pending -= usize::from(sha == PENDING);
            }
        }
    }
    Ok(pending)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_are_classified() {
        let ours = Path::new("/opt/mcpguard");
        let local = |v: Value| matches!(classify("s", &v, ours), Ok(Entry::Local { .. }));
        let wrapped = |v: Value| matches!(classify("s", &v, ours), Ok(Entry::Wrapped { .. }));
        let remote = |v: Value| matches!(classify("s", &v, ours), Ok(Entry::Remote(_)));
        let refused = |v: Value| classify("s", &v, ours).is_err();
        assert!(local(json!({"command": "npx", "args": ["-y", "x"]})));
        assert!(local(
            json!({"type": "stdio", "command": "uvx", "env": {"A": "b"}})
        ));
        assert!(wrapped(
            json!({"command": "/usr/bin/mcpguard", "args": ["--", "x"]})
        ));
        assert!(wrapped(
            json!({"command": "/opt/mcpguard", "args": ["--allow-unpinned", "--", "x"]})
        ));
        assert!(remote(json!({"url": "https://example.test/mcp"})));
        assert!(remote(
            json!({"type": "http", "url": "https://example.test/mcp"})
        ));
        assert!(remote(
            json!({"type": "sse", "url": "https://example.test/sse"})
        ));
        assert!(refused(json!({"type": "pipe", "command": "x"})));
        assert!(refused(json!({"command": ["x"]})));
        assert!(refused(json!({"command": "x", "args": [1]})));
        assert!(refused(
            json!({"command": "x", "url": "https://example.test"})
        ));
        assert!(refused(json!({"env": {}})));
        assert!(refused(json!("npx x")));
        assert!(refused(
            json!({"command": "mcpguard", "args": ["hash", "f"]})
        ));
    }

    #[test]
    fn snapshot_names_stay_in_their_directory() {
        let cases = [
            ("files", "files"),
            ("my server", "my_server"),
            ("../../etc/passwd", "server.._.._etc_passwd"),
            ("..", "server.."),
            ("", "server"),
            ("ünï", "_n_"),
        ];
        for (name, want) in cases {
            assert_eq!(snapshot_file_name(name), want, "{name}");
        }
    }

    #[test]
    fn options_are_found_in_both_spellings() {
        let o: Vec<String> = ["--manifest", "/a", "--sha256=abc", "--server", "s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(option(&o, "manifest"), Some((1, "/a")));
        assert_eq!(option(&o, "sha256"), Some((2, "abc")));
        assert_eq!(option(&o, "policy"), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("npx"), "npx");
        assert_eq!(shell_quote("/a b"), "'/a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}

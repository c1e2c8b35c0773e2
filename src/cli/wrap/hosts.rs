//! The hosts whose JSON, JSONC or YAML configuration `wrap` knows: where each keeps its servers
//! and how it spells an entry, so that one procedure (`super::rewrite`) can wrap them all.
//!
//! Every entry is read into the *view* the JSON hosts write (`command`, `args`, `env`, `type`,
//! `url`), and the few keys `wrap` changes are written back where the host keeps them
//! ([`Dialect`]). Entries a host starts by other means (a Zed extension's server, a Goose
//! builtin) are named and left alone, like remote servers.

use serde_json::{Map, Value};

/// Where the servers live in the file, and so which host it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `{"mcpServers": {...}}`: Claude Desktop, Claude Code, Cursor, Gemini CLI, Windsurf.
    McpServers,
    /// `{"servers": {...}}`: VS Code's mcp.json.
    VsCode,
    /// `{"mcp": {"servers": {...}}}`: VS Code's settings.json.
    VsCodeSettings,
    /// `{"context_servers": {...}}`: Zed's settings.json.
    Zed,
    /// `mcp: servers:` in YAML: fast-agent's fastagent.config.yaml.
    FastAgent,
    /// `extensions:` in YAML: Goose's config.yaml.
    Goose,
}

/// Whether the file is read as JSON (with comments) or YAML; Codex's TOML has its own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Syntax {
    Json,
    Yaml,
}

impl Syntax {
    /// The syntax of a configuration file, from its name; `None` for TOML (Codex's
    /// `config.toml`), which `super::codex` edits.
    pub fn of(config: &std::path::Path) -> Option<Syntax> {
        match config.extension().and_then(|e| e.to_str()) {
            Some("toml") => None,
            Some("yaml" | "yml") => Some(Syntax::Yaml),
            _ => Some(Syntax::Json),
        }
    }
}

impl Format {
    pub fn describe(self) -> &'static str {
        match self {
            Format::McpServers => {
                "`mcpServers` (Claude Desktop, Claude Code, Cursor, Gemini CLI, Windsurf)"
            }
            Format::VsCode => "`servers` (VS Code mcp.json)",
            Format::VsCodeSettings => "`mcp.servers` (VS Code settings.json)",
            Format::Zed => "`context_servers` (Zed settings.json)",
            Format::FastAgent => "`mcp.servers` (fast-agent fastagent.config.yaml)",
            Format::Goose => "`extensions` (Goose config.yaml)",
        }
    }

    /// The member names from the top of the document to the servers object.
    pub fn path(self) -> &'static [&'static str] {
        match self {
            Format::McpServers => &["mcpServers"],
            Format::VsCode => &["servers"],
            Format::VsCodeSettings | Format::FastAgent => &["mcp", "servers"],
            Format::Zed => &["context_servers"],
            Format::Goose => &["extensions"],
        }
    }
}

/// Which host a document is for, from its shape.
pub(super) fn detect(doc: &Value, syntax: Syntax) -> Result<Format, String> {
    let Some(obj) = doc.as_object() else {
        return Err(match syntax {
            Syntax::Json => "the top level is not a JSON object".into(),
            Syntax::Yaml => "the top level is not a YAML mapping".into(),
        });
    };
    let candidates: &[Format] = match syntax {
        Syntax::Json => &[
            Format::McpServers,
            Format::VsCode,
            Format::VsCodeSettings,
            Format::Zed,
        ],
        Syntax::Yaml => &[Format::FastAgent, Format::Goose],
    };
    let found: Vec<Format> = candidates
        .iter()
        .copied()
        .filter(|f| f.path().iter().try_fold(doc, |v, k| v.get(k)).is_some())
        .collect();
    match found.as_slice() {
        [] => {
            let mut why = format!(
                "it has no {} object",
                candidates
                    .iter()
                    .map(|f| f.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if syntax == Syntax::Yaml && obj.get("mcp").is_some_and(|m| m.get("targets").is_some())
            {
                why.push_str(
                    "; its `mcp.targets` shorthand is not rewritten: write each server as an entry of `mcp.servers` (command, args) and wrap again",
                );
            }
            Err(why)
        }
        [one] => Ok(*one),
        several => Err(format!(
            "it has more than one servers object ({}); which one the host reads is unclear",
            several
                .iter()
                .map(|f| f.describe())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Where an entry of a host keeps the keys `wrap` writes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Dialect {
    pub command: &'static [&'static str],
    pub args: &'static [&'static str],
}

/// `command`, `args` (and `env`) at the entry's top: the JSON hosts, Zed's custom servers,
/// fast-agent.
pub(super) const PLAIN: Dialect = Dialect {
    command: &["command"],
    args: &["args"],
};
/// Zed's older custom form: `"command": {"path", "args", "env"}`.
pub(super) const ZED_NESTED: Dialect = Dialect {
    command: &["command", "path"],
    args: &["command", "args"],
};
/// Goose: `cmd`, `args`, `envs`.
pub(super) const GOOSE: Dialect = Dialect {
    command: &["cmd"],
    args: &["args"],
};

impl Dialect {
    /// The path of a key of the view in the host's entry.
    pub fn path(&self, view_key: &str) -> Option<&'static [&'static str]> {
        match view_key {
            "command" => Some(self.command),
            "args" => Some(self.args),
            _ => None,
        }
    }
}

/// One entry as `wrap` sees it.
pub(super) enum Viewed {
    /// An entry to classify and maybe wrap: its view and where its keys go back.
    Entry {
        view: Value,
        dialect: &'static Dialect,
    },
    /// An entry the host starts by other means, left alone with this note.
    Skip(String),
}

/// The view of one entry of a host's servers object.
pub(super) fn view(format: Format, name: &str, native: &Value) -> Result<Viewed, String> {
    let plain = || Viewed::Entry {
        view: native.clone(),
        dialect: &PLAIN,
    };
    let Some(obj) = native.as_object() else {
        // `classify` words the refusal of an entry that is not an object.
        return Ok(plain());
    };
    Ok(match format {
        Format::McpServers | Format::VsCode | Format::VsCodeSettings => plain(),
        // Zed starts a `"remote": true` server on the machine of a remote-development project,
        // where the mcpguard path written here need not exist.
        Format::Zed if obj.get("remote") == Some(&Value::Bool(true)) => Viewed::Skip(format!(
            "left alone: {name:?} runs on the remote-development machine (`\"remote\": true`); mcpguard guards the servers this machine starts"
        )),
        Format::Zed => match obj.get("command") {
            Some(Value::Object(cmd)) => {
                let mut v = Map::new();
                for (from, to) in [("path", "command"), ("args", "args"), ("env", "env")] {
                    if let Some(x) = cmd.get(from) {
                        v.insert(to.into(), x.clone());
                    }
                }
                if !cmd.contains_key("path") {
                    return Err(format!("server {name:?}: its `command` object has no `path`"));
                }
                Viewed::Entry {
                    view: Value::Object(v),
                    dialect: &ZED_NESTED,
                }
            }
            None if !obj.contains_key("url")
                || obj.get("source").and_then(Value::as_str) == Some("extension") =>
            {
                Viewed::Skip(format!(
                    "left alone: {name:?} is a server a Zed extension provides (no `command` of its own); to guard it, give it `\"source\": \"custom\"` with the extension's command and args, and wrap again"
                ))
            }
            _ => plain(),
        },
        Format::FastAgent => {
            if obj.contains_key("target") {
                return Err(format!(
                    "server {name:?} uses the `target` shorthand, which wrap does not rewrite: write it as `command` and `args` (and `env`), then wrap again"
                ));
            }
            if obj.get("management").and_then(Value::as_str) == Some("provider") {
                return Ok(Viewed::Skip(format!(
                    "left alone: {name:?} is run by the model provider (`management: provider`), not started here"
                )));
            }
            let mut v = obj.clone();
            if let Some(t) = v.remove("transport") {
                if v.contains_key("type") {
                    return Err(format!("server {name:?} has both `transport` and `type`"));
                }
                // fast-agent's (and its predecessor mcp-agent's) names for the remote
                // transports, in the words `classify` knows.
                let t = match t.as_str() {
                    Some("streamable_http") => Value::from("http"),
                    Some("websocket") => Value::from("ws"),
                    _ => t,
                };
                v.insert("type".into(), t);
            }
            Viewed::Entry {
                view: Value::Object(v),
                dialect: &PLAIN,
            }
        }
        Format::Goose => match obj.get("type").and_then(Value::as_str) {
            Some("stdio") => {
                let mut v = Map::new();
                v.insert("type".into(), "stdio".into());
                for (from, to) in [("cmd", "command"), ("args", "args"), ("envs", "env")] {
                    if let Some(x) = obj.get(from) {
                        v.insert(to.into(), x.clone());
                    }
                }
                // `env_keys` names variables whose values Goose keeps in its secret store and
                // sets for the server: they must pass the sandbox too. Only the names are used.
                if let Some(keys) = obj.get("env_keys").and_then(Value::as_array) {
                    let env = v
                        .entry("env")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(env) = env.as_object_mut() {
                        for k in keys.iter().filter_map(Value::as_str) {
                            env.entry(k).or_insert(Value::Null);
                        }
                    }
                }
                if !v.contains_key("command") {
                    return Err(format!("extension {name:?} has type stdio but no `cmd`"));
                }
                Viewed::Entry {
                    view: Value::Object(v),
                    dialect: &GOOSE,
                }
            }
            Some(remote @ ("sse" | "streamable_http")) => Viewed::Skip(format!(
                "left alone: {name:?} is a remote server (Goose type {remote}); mcpguard guards local stdio servers"
            )),
            Some(other @ ("builtin" | "platform" | "frontend" | "inline_python")) => Viewed::Skip(format!(
                "left alone: {name:?} is a Goose {other} extension, not a server Goose starts from a command"
            )),
            Some(other) => {
                return Err(format!(
                    "extension {name:?} has type {other:?}, which mcpguard does not know"
                ))
            }
            None => return Err(format!("extension {name:?} has no `type`")),
        },
    })
}

/// A whole entry in the host's own shape, for an entry `--from-lock` adds or replaces; `None`
/// where `wrap` writes only the command and arguments of existing entries (YAML).
pub(super) fn native_entry(format: Format, view: &Value) -> Option<Value> {
    match format {
        Format::McpServers | Format::VsCode | Format::VsCodeSettings => Some(view.clone()),
        Format::Zed => {
            let mut v = Map::new();
            v.insert("source".into(), "custom".into());
            for (k, x) in view.as_object()? {
                v.insert(k.clone(), x.clone());
            }
            Some(Value::Object(v))
        }
        Format::FastAgent | Format::Goose => None,
    }
}

/// Sets `value` at `path` in `native`, making the objects on the way.
pub(super) fn set_at(native: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = native;
    for key in parents {
        if !at.get(*key).is_some_and(Value::is_object) {
            if let Some(obj) = at.as_object_mut() {
                obj.insert((*key).into(), Value::Object(Map::new()));
            }
        }
        let Some(next) = at.get_mut(*key) else {
            return;
        };
        at = next;
    }
    if let Some(obj) = at.as_object_mut() {
        obj.insert((*last).into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_are_detected_or_refused() {
        let cases = [
            (
                json!({"mcpServers": {}}),
                Syntax::Json,
                Ok(Format::McpServers),
            ),
            (
                json!({"servers": {}, "inputs": []}),
                Syntax::Json,
                Ok(Format::VsCode),
            ),
            (
                json!({"editor.fontSize": 12, "mcp": {"servers": {}}}),
                Syntax::Json,
                Ok(Format::VsCodeSettings),
            ),
            (
                json!({"theme": "One", "context_servers": {}}),
                Syntax::Json,
                Ok(Format::Zed),
            ),
            (
                json!({"mcp": {"servers": {}}}),
                Syntax::Yaml,
                Ok(Format::FastAgent),
            ),
            (
                json!({"GOOSE_MODEL": "x", "extensions": {}}),
                Syntax::Yaml,
                Ok(Format::Goose),
            ),
            (json!({"mcp": {}}), Syntax::Json, Err(())),
            (
                json!({"mcpServers": {}, "servers": {}}),
                Syntax::Json,
                Err(()),
            ),
            (json!({"mcpServers": {}}), Syntax::Yaml, Err(())),
            (
                json!({"mcp": {"servers": {}}, "extensions": {}}),
                Syntax::Yaml,
                Err(()),
            ),
            (json!([]), Syntax::Json, Err(())),
        ];
        for (doc, syntax, want) in cases {
            assert_eq!(detect(&doc, syntax).map_err(|_| ()), want, "{doc}");
        }
        let why = detect(&json!({"mcp": {"targets": []}}), Syntax::Yaml).unwrap_err();
        assert!(why.contains("`mcp.targets` shorthand"), "{why}");
    }

    #[test]
    fn each_host_spelling_has_the_common_view() {
        let entry = |f, v: Value| match view(f, "s", &v).unwrap() {
            Viewed::Entry { view, dialect } => Some((view, dialect)),
            Viewed::Skip(_) => None,
        };
        let (v, d) = entry(
            Format::Zed,
            json!({"command": {"path": "npx", "args": ["-y", "x"], "env": {"K": "v"}}, "settings": {}}),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"command": "npx", "args": ["-y", "x"], "env": {"K": "v"}})
        );
        assert_eq!(d, &ZED_NESTED);
        let (_, d) = entry(
            Format::Zed,
            json!({"source": "custom", "command": "npx", "args": []}),
        )
        .unwrap();
        assert_eq!(d, &PLAIN);
        assert!(entry(Format::Zed, json!({"source": "extension", "settings": {}})).is_none());
        assert!(entry(Format::Zed, json!({"settings": {"k": 1}})).is_none());
        assert!(entry(Format::Zed, json!({"url": "https://example.test/mcp"})).is_some());
        let (v, _) = entry(
            Format::FastAgent,
            json!({"transport": "http", "url": "https://e.test"}),
        )
        .unwrap();
        assert_eq!(v, json!({"type": "http", "url": "https://e.test"}));
        let (v, d) = entry(
            Format::Goose,
            json!({"type": "stdio", "name": "G", "cmd": "npx", "args": ["x"], "envs": {"T": "1"}, "enabled": true}),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"type": "stdio", "command": "npx", "args": ["x"], "env": {"T": "1"}})
        );
        assert_eq!(d, &GOOSE);
        let (v, _) = entry(
            Format::Goose,
            json!({"type": "stdio", "cmd": "npx", "envs": {"A": "1"}, "env_keys": ["TOKEN", "A"]}),
        )
        .unwrap();
        assert_eq!(
            v["env"],
            json!({"A": "1", "TOKEN": null}),
            "env_keys are passed by name"
        );
        assert!(entry(Format::Zed, json!({"command": "x", "remote": true})).is_none());
        assert!(entry(
            Format::FastAgent,
            json!({"management": "provider", "url": "https://e.test"})
        )
        .is_none());
        assert!(view(
            Format::FastAgent,
            "s",
            &json!({"target": "uvx mcp-server-fetch"})
        )
        .is_err());
        let (v, _) = entry(
            Format::FastAgent,
            json!({"transport": "streamable_http", "url": "https://e.test"}),
        )
        .unwrap();
        assert_eq!(v["type"], "http");
        for skipped in ["builtin", "platform", "sse", "streamable_http"] {
            assert!(entry(Format::Goose, json!({"type": skipped, "name": "d"})).is_none());
        }
        assert!(view(Format::Goose, "s", &json!({"type": "pipe"})).is_err());
    }

    #[test]
    fn values_are_set_along_a_path() {
        let mut v = json!({"command": {"path": "x"}, "k": 1});
        set_at(&mut v, &["command", "args"], json!(["a"]));
        set_at(&mut v, &["command", "path"], json!("y"));
        assert_eq!(v, json!({"command": {"path": "y", "args": ["a"]}, "k": 1}));
    }
}

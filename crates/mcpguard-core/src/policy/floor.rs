//! The managed policy floor: a system policy (`/etc/mcpguard/policy.toml`, or the file
//! `MCPGUARD_SYSTEM_POLICY` names) that every run reads first, and that a user's `--policy` can
//! only tighten.
//!
//! The floor binds the keys it writes; a key it leaves out is the user's to choose (an
//! administrator who wants a default kept writes it in the floor). For each key both files
//! write, the user's value must be at least as strict as the floor's, by the key's own order
//! (`Rule`): a looser one is refused with the floor's file and line and the user's. A key
//! without a known order must keep the floor's value exactly, so a key added to the policy later
//! is fixed by a floor until someone says which way is stricter. Lists the user can only add to
//! (`review.refused_tools`) are joined; lists of grants (`sandbox.read`) may only shrink.
//!
//! Pure except [`load_layered`], which reads the two files, and [`floor_path`], which reads the
//! environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::*;

/// Where the floor is read from when `MCPGUARD_SYSTEM_POLICY` is not set. Packages ship the
/// directory; configuration management fills it.
pub const SYSTEM_POLICY: &str = "/etc/mcpguard/policy.toml";

/// The environment variable that names another floor file, honoured only where no managed floor
/// exists at [`SYSTEM_POLICY`] (for tests, and for machines without one). Whoever can set a
/// variable for mcpguard — a host configuration's `env` — could otherwise replace the floor an
/// administrator installed with a looser file (a shipped `observe.toml`, say), and the floor is
/// exactly what no user setting may loosen. Where no floor exists, the same person could pass any
/// `--policy` anyway, so the variable gives nothing away there.
pub const SYSTEM_POLICY_ENV: &str = "MCPGUARD_SYSTEM_POLICY";

/// The floor's path, and whether it was named explicitly (then a missing file is an error, not
/// the absence of a floor). Refuses a variable naming another file while a managed floor exists.
pub fn floor_path() -> Result<(PathBuf, bool), PolicyError> {
    floor_path_from(
        std::env::var_os(SYSTEM_POLICY_ENV),
        Path::new(SYSTEM_POLICY),
    )
}

/// [`floor_path`] for a given variable value and managed floor path. Anything at the managed
/// path counts as a floor (a dangling link too: it is not for the variable to say what the
/// administrator meant).
fn floor_path_from(
    env: Option<std::ffi::OsString>,
    managed: &Path,
) -> Result<(PathBuf, bool), PolicyError> {
    let named = env.filter(|v| !v.is_empty()).map(PathBuf::from);
    let exists = managed.symlink_metadata().is_ok();
    match named {
        Some(p) if exists && p != managed => Err(PolicyError::FloorReplaced {
            named: p.display().to_string(),
            floor: managed.display().to_string(),
        }),
        Some(p) => Ok((p, true)),
        None => Ok((managed.to_path_buf(), false)),
    }
}

/// A policy and where each value came from.
#[derive(Debug, Clone)]
pub struct Layered {
    pub policy: Policy,
    /// The floor file, when one was read.
    pub floor: Option<String>,
    /// Dotted key → `FILE:LINE` of each value a file wrote (keys not listed are defaults).
    pub origins: BTreeMap<String, String>,
    /// Dotted key → `FILE:LINE` of each key the floor writes.
    pub floor_keys: BTreeMap<String, String>,
}

impl Layered {
    /// Where the floor sets `key` (`FILE:LINE`), if it does.
    pub fn floor_sets(&self, key: &str) -> Option<&str> {
        self.floor_keys.get(key).map(String::as_str)
    }

    /// Checks the command line's per-run overrides against the floor: `--audit-log` may not
    /// replace a log the floor names, `--max-message-bytes` may not exceed the floor's bound, and
    /// `--sandbox-read`/`--sandbox-write` may not grant beyond a list the floor sets (only paths
    /// it lists, as written, are accepted).
    pub fn check_overrides(
        &self,
        audit_log: Option<&Path>,
        max_message_bytes: Option<u64>,
        read: &[PathBuf],
        write: &[PathBuf],
        env: &[String],
    ) -> Result<(), String> {
        let refuse = |flag: &str, key: &str, at: &str| {
            format!("{flag} cannot loosen {key}, which the managed policy floor sets at {at}; run without {flag}, or ask the administrator to change the floor")
        };
        if let (Some(_), Some(at)) = (audit_log, self.floor_sets("audit.path")) {
            return Err(refuse("--audit-log", "audit.path", at));
        }
        if let (Some(n), Some(at)) = (
            max_message_bytes,
            self.floor_sets("limits.max_message_bytes"),
        ) {
            if usize::try_from(n).map_or(true, |n| n > self.policy.limits.max_message_bytes) {
                return Err(refuse(
                    "--max-message-bytes",
                    "limits.max_message_bytes",
                    at,
                ));
            }
        }
        let listed =
            |list: &[PolicyPath], p: &Path| list.iter().any(|l| Path::new(&l.to_string()) == p);
        for (flag, key, grants, list) in [
            (
                "--sandbox-read",
                "sandbox.read",
                read,
                &self.policy.sandbox.read,
            ),
            (
                "--sandbox-write",
                "sandbox.read_write",
                write,
                &self.policy.sandbox.read_write,
            ),
        ] {
            if let Some(at) = self.floor_sets(key) {
                if let Some(p) = grants.iter().find(|p| !listed(list, p)) {
                    return Err(format!("{} ({})", refuse(flag, key, at), p.display()));
                }
            }
        }
        if let Some(at) = self.floor_sets("sandbox.env") {
            if let Some(name) = env.iter().find(|n| !self.policy.sandbox.env.contains(n)) {
                return Err(format!(
                    "{} ({name})",
                    refuse("--sandbox-env", "sandbox.env", at)
                ));
            }
        }
        Ok(())
    }

    /// Holds the TCP destinations (the policy's `sandbox.connect` and `--sandbox-connect`) to
    /// the floor: their ports become connect grants, so where the floor sets
    /// `sandbox.tcp_connect` each destination's port must be one it lists (or the destination
    /// one the floor's `sandbox.connect` lists), and where it sets `sandbox.connect` a flag may
    /// name only a destination of that list.
    pub fn check_connect(&self, flags: &[Destination]) -> Result<(), String> {
        let s = &self.policy.sandbox;
        if let Some(at) = self.floor_sets("sandbox.connect") {
            if let Some(d) = flags.iter().find(|d| !s.connect.contains(d)) {
                return Err(format!("--sandbox-connect cannot loosen sandbox.connect, which the managed policy floor sets at {at}; run without --sandbox-connect, or ask the administrator to change the floor ({d})"));
            }
        }
        if let Some(at) = self.floor_sets("sandbox.tcp_connect") {
            let floor_lists = |d: &Destination| {
                self.floor_sets("sandbox.connect").is_some() && s.connect.contains(d)
            };
            for (origin, d) in s
                .connect
                .iter()
                .map(|d| ("sandbox.connect", d))
                .chain(flags.iter().map(|d| ("--sandbox-connect", d)))
            {
                if !s.tcp_connect.contains(&d.port) && !floor_lists(d) {
                    return Err(format!("{origin} {d} cannot loosen sandbox.tcp_connect, which the managed policy floor sets at {at} without port {}; leave it out, or ask the administrator to change the floor", d.port));
                }
            }
        }
        Ok(())
    }

    /// `policy check`'s view: the effective policy, then where each value came from.
    pub fn effective_toml(&self) -> String {
        let mut out = self.policy.effective_toml();
        out.push_str(&match &self.floor {
            Some(f) => format!("\n# Managed floor: {f} (a user policy can only tighten it).\n"),
            None => format!("\n# No managed floor ({SYSTEM_POLICY} does not exist).\n"),
        });
        out.push_str("# Where each value came from (a key not listed is a default):\n");
        for (key, origin) in &self.origins {
            out.push_str(&format!("#   {key} = {origin}\n"));
        }
        out
    }
}

/// Reads the floor (when there is one) and the user's policy (when given) and layers them.
/// Without either, the built-in default applies.
pub fn load_layered(user: Option<&Path>) -> Result<Layered, PolicyError> {
    let (path, explicit) = floor_path()?;
    let floor = match std::fs::read_to_string(&path) {
        Ok(text) => Some((text, path.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => None,
        Err(source) => {
            return Err(PolicyError::Read {
                origin: format!("{} (the managed policy floor)", path.display()),
                source,
            })
        }
    };
    let user = match user {
        None => None,
        Some(p) => {
            let origin = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|source| PolicyError::Read {
                origin: origin.clone(),
                source,
            })?;
            Some((text, origin))
        }
    };
    layer(
        floor.as_ref().map(|(t, o)| (t.as_str(), o.as_str())),
        user.as_ref().map(|(t, o)| (t.as_str(), o.as_str())),
    )
}

/// Layers a user policy over a floor, both given as (text, origin).
pub fn layer(
    floor: Option<(&str, &str)>,
    user: Option<(&str, &str)>,
) -> Result<Layered, PolicyError> {
    let mut origins = BTreeMap::new();
    let (f_text, f_origin) = match floor {
        None => {
            let policy = match user {
                None => builtin()?,
                Some((text, origin)) => {
                    let p = parse(text, origin)?;
                    record_origins(text, origin, &mut origins);
                    p
                }
            };
            return Ok(Layered {
                policy,
                floor: None,
                origins,
                floor_keys: BTreeMap::new(),
            });
        }
        Some(f) => f,
    };
    // Each file must be a valid policy on its own, so its errors point into it.
    parse(f_text, f_origin)?;
    record_origins(f_text, f_origin, &mut origins);
    let floor_keys = origins.clone();
    let Some((u_text, u_origin)) = user else {
        return Ok(Layered {
            policy: parse(f_text, f_origin)?,
            floor: Some(f_origin.to_string()),
            origins,
            floor_keys,
        });
    };
    parse(u_text, u_origin)?;
    let table = |text: &str, origin: &str| -> Result<Table, PolicyError> {
        text.parse::<Table>().map_err(|e| PolicyError::Invalid {
            origin: origin.to_string(),
            line: 1,
            column: 1,
            message: e.to_string(),
        })
    };
    let mut merged = table(f_text, f_origin)?;
    let user_table = table(u_text, u_origin)?;
    let ctx = Ctx {
        f_text,
        f_origin,
        u_text,
        u_origin,
    };
    overlay(
        &mut merged,
        &user_table,
        &mut Vec::new(),
        &ctx,
        &mut origins,
    )?;
    let text = toml::to_string(&merged).map_err(|e| PolicyError::Invalid {
        origin: format!("{f_origin} + {u_origin}"),
        line: 1,
        column: 1,
        message: format!("cannot combine the two policies: {e}"),
    })?;
    let policy = parse(
        &text,
        &format!("the effective policy of {f_origin} and {u_origin}"),
    )?;
    let layered = Layered {
        policy,
        floor: Some(f_origin.to_string()),
        origins,
        floor_keys,
    };
    // A destination of the user's `sandbox.connect` becomes a connect grant of its port, which
    // the key-by-key overlay cannot see against the floor's `sandbox.tcp_connect` (another key).
    // It is checked here, where every command reads the policy (the proxy, capture, check,
    // sandbox-check, wrap), so that no path can start a server with a port the floor leaves out.
    layered.check_connect(&[]).map_err(|message| {
        let line = line_of(u_text, &["sandbox".to_string(), "connect".to_string()]);
        PolicyError::Invalid {
            origin: u_origin.to_string(),
            line,
            column: 1,
            message,
        }
    })?;
    Ok(layered)
}

struct Ctx<'a> {
    f_text: &'a str,
    f_origin: &'a str,
    u_text: &'a str,
    u_origin: &'a str,
}

/// Every leaf key a file writes, with its line, into `origins` (later files overwrite).
fn record_origins(text: &str, origin: &str, origins: &mut BTreeMap<String, String>) {
    let Ok(table) = text.parse::<Table>() else {
        return;
    };
    fn walk(
        t: &Table,
        path: &mut Vec<String>,
        text: &str,
        origin: &str,
        out: &mut BTreeMap<String, String>,
    ) {
        for (k, v) in t {
            path.push(k.clone());
            match v {
                Value::Table(sub) => walk(sub, path, text, origin, out),
                _ => {
                    out.insert(path.join("."), format!("{origin}:{}", line_of(text, path)));
                }
            }
            path.pop();
        }
    }
    walk(&table, &mut Vec::new(), text, origin, origins);
}

/// The 1-based line of the value at `path` in `text` (1 when it cannot be found).
fn line_of(text: &str, path: &[String]) -> usize {
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return 1;
    };
    let mut table = doc.get_ref();
    let Some((last, parents)) = path.split_last() else {
        return 1;
    };
    for key in parents {
        match table.get(key.as_str()).and_then(|v| v.get_ref().as_table()) {
            Some(t) => table = t,
            None => return 1,
        }
    }
    table
        .get(last.as_str())
        .map_or(1, |v| line_column(text, v.span().start).0)
}

/// How a key's values are ordered from strict to loose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// A boolean whose `loose` value is the looser one.
    Bool { loose: bool },
    /// A number, a duration or `"unlimited"`: larger is looser.
    Larger,
    /// One of these values, strictest first.
    Ordered(&'static [&'static str]),
    /// A side-effect class: anything but `read` is a write; a write may not become a read.
    SideEffect,
    /// A list the user may only add to: the two are joined.
    Join,
    /// A list of grants: the user's must be part of the floor's.
    Within,
    /// Must keep the floor's value.
    Fixed,
}

fn rule(path: &[String]) -> Rule {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["capabilities", "pass_meta"] => Rule::Within,
        ["capabilities", _] => Rule::Bool { loose: true },
        ["review", "max_validity"] => Rule::Larger,
        ["review", "allow_model_backed"] => Rule::Bool { loose: true },
        ["review", "forbidden_side_effects" | "refused_tools"] => Rule::Join,
        ["review", "require_bounded_write_schemas"] => Rule::Bool { loose: false },
        ["writes", "default"] => Rule::Ordered(&["refuse", "write"]),
        // Trusting reviewed classes lets a reviewed read pass without a policy table.
        ["writes", "trust_reviews"] => Rule::Bool { loose: true },
        ["writes", "tools", _, "side_effect"] => Rule::SideEffect,
        ["writes", "tools", _, "confirmation"] => {
            Rule::Ordered(&["trusted-confirmation-required", "not-required"])
        }
        ["arguments", "closed"] | ["arguments", "tools", _, "closed"] => {
            Rule::Bool { loose: false }
        }
        ["confirmation", "mode"] => Rule::Ordered(&["deny", "elicit", "allow"]),
        ["confirmation", "timeout"] => Rule::Larger,
        // Fewer channels are fewer ways to approve (a floor may take out the terminal, which an
        // agent's own shell could reach); standing approvals let calls through unasked.
        ["confirmation", "channels"] => Rule::Within,
        ["confirmation", "allow_identical" | "allow_tool_for_session"] => {
            Rule::Bool { loose: true }
        }
        ["confirmation", "identical_for"] => Rule::Larger,
        ["errors", "max_length"] => Rule::Larger,
        ["errors", "text"] => Rule::Ordered(&["redacted", "sanitized"]),
        ["output", "mode"] => Rule::Ordered(&["structured-only", "as-sent"]),
        ["limits", _] => Rule::Larger,
        ["audit", "sink"] => Rule::Join,
        ["sandbox", "mode"] => Rule::Ordered(&["require", "best-effort", "off"]),
        ["sandbox", "read" | "read_write" | "execute" | "tcp_connect" | "connect" | "tcp_bind" | "env"] => {
            Rule::Within
        }
        ["sandbox", "allow_udp" | "allow_unix_sockets" | "allow_other_sockets"] => {
            Rule::Bool { loose: true }
        }
        ["sandbox", "scope_signals" | "scope_abstract_unix_sockets"] => Rule::Bool { loose: false },
        ["sandbox", "limits", "core_dumps"] => Rule::Bool { loose: true },
        ["sandbox", "limits", _] => Rule::Larger,
        _ => Rule::Fixed,
    }
}

/// A number, a duration or `"unlimited"` as one comparable quantity.
fn magnitude(v: &Value) -> Option<i128> {
    match v {
        Value::Integer(i) => Some(i128::from(*i)),
        Value::String(s) if s == "unlimited" => Some(i128::MAX),
        Value::String(s) => parse_duration(s).ok().map(|d| d.as_millis()),
        _ => None,
    }
}

/// Why `user` is looser than `floor` under `rule`, or the combined value.
fn combine(rule: Rule, floor: &Value, user: &Value) -> Result<Value, String> {
    let show = |v: &Value| v.to_string();
    let looser = || {
        Err(format!(
            "{} is looser than the floor's {}",
            show(user),
            show(floor)
        ))
    };
    match rule {
        Rule::Bool { loose } => match (floor.as_bool(), user.as_bool()) {
            (Some(f), Some(u)) if u == loose && f != loose => looser(),
            _ => Ok(user.clone()),
        },
        Rule::Larger => match (magnitude(floor), magnitude(user)) {
            (Some(f), Some(u)) if u > f => looser(),
            (Some(_), Some(_)) => Ok(user.clone()),
            _ if floor == user => Ok(user.clone()),
            _ => Err(format!(
                "{} cannot be compared with the floor's {}",
                show(user),
                show(floor)
            )),
        },
        Rule::Ordered(order) => {
            let rank = |v: &Value| v.as_str().and_then(|s| order.iter().position(|o| *o == s));
            match (rank(floor), rank(user)) {
                (Some(f), Some(u)) if u > f => looser(),
                _ => Ok(user.clone()),
            }
        }
        Rule::SideEffect => {
            if floor.as_str() != Some("read") && user.as_str() == Some("read") {
                Err(format!(
                    "{} would make a write a read; the floor classifies it {}",
                    show(user),
                    show(floor)
                ))
            } else {
                Ok(user.clone())
            }
        }
        Rule::Join => {
            let (Some(f), Some(u)) = (floor.as_array(), user.as_array()) else {
                return Ok(user.clone());
            };
            let mut joined = f.clone();
            joined.extend(u.iter().filter(|x| !f.contains(x)).cloned());
            Ok(Value::Array(joined))
        }
        Rule::Within => {
            let (Some(f), Some(u)) = (floor.as_array(), user.as_array()) else {
                return Ok(user.clone());
            };
            let extra: Vec<String> = u.iter().filter(|x| !f.contains(x)).map(show).collect();
            if extra.is_empty() {
                Ok(user.clone())
            } else {
                Err(format!(
                    "it grants {} beyond the floor's list",
                    extra.join(", ")
                ))
            }
        }
        Rule::Fixed if floor == user => Ok(user.clone()),
        Rule::Fixed => Err(format!(
            "{} differs from the floor's {}, and the floor fixes this key",
            show(user),
            show(floor)
        )),
    }
}

fn overlay(
    floor: &mut Table,
    user: &Table,
    path: &mut Vec<String>,
    ctx: &Ctx<'_>,
    origins: &mut BTreeMap<String, String>,
) -> Result<(), PolicyError> {
    for (k, u) in user {
        path.push(k.clone());
        match (floor.get_mut(k), u) {
            (Some(Value::Table(f)), Value::Table(u)) => overlay(f, u, path, ctx, origins)?,
            (None, u) => {
                floor.insert(k.clone(), u.clone());
                record_subtree(u, path, ctx, origins);
            }
            (Some(f), u) => {
                let key = path.join(".");
                let u_line = line_of(ctx.u_text, path);
                let f_line = line_of(ctx.f_text, path);
                let combined = combine(rule(path), f, u).map_err(|why| PolicyError::Invalid {
                    origin: ctx.u_origin.to_string(),
                    line: u_line,
                    column: 1,
                    message: format!(
                        "{key} cannot be loosened: {why}, which the managed policy floor sets at {}:{f_line}; only a stricter value is accepted (ask the administrator to change the floor)",
                        ctx.f_origin
                    ),
                })?;
                if combined != *u {
                    origins.insert(
                        key,
                        format!("{}:{f_line} + {}:{u_line}", ctx.f_origin, ctx.u_origin),
                    );
                } else {
                    origins.insert(key, format!("{}:{u_line}", ctx.u_origin));
                }
                *f = combined;
            }
        }
        path.pop();
    }
    Ok(())
}

/// Records the user's origin for every leaf of a value the floor did not set.
fn record_subtree(
    v: &Value,
    path: &mut Vec<String>,
    ctx: &Ctx<'_>,
    origins: &mut BTreeMap<String, String>,
) {
    match v {
        Value::Table(t) => {
            for (k, sub) in t {
                path.push(k.clone());
                record_subtree(sub, path, ctx, origins);
                path.pop();
            }
        }
        _ => {
            origins.insert(
                path.join("."),
                format!("{}:{}", ctx.u_origin, line_of(ctx.u_text, path)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: &str = "[capabilities]\nsampling = false\n\n[review]\nrefused_tools = [\"a\"]\nmax_validity = \"7d\"\n\n[sandbox]\nread = [\"/usr\", \"/etc/ssl\"]\n";

    fn layered(user: &str) -> Result<Layered, String> {
        layer(Some((FLOOR, "floor.toml")), Some((user, "user.toml"))).map_err(|e| e.to_string())
    }

    #[test]
    fn the_variable_names_a_floor_only_where_no_managed_floor_exists() {
        let dir = tempfile::tempdir().unwrap();
        let managed = dir.path().join("policy.toml");
        let env = |s: &str| Some(std::ffi::OsString::from(s));
        assert_eq!(
            floor_path_from(env("/t/floor.toml"), &managed).unwrap(),
            (PathBuf::from("/t/floor.toml"), true)
        );
        assert_eq!(
            floor_path_from(None, &managed).unwrap(),
            (managed.clone(), false)
        );
        std::os::unix::fs::symlink("/nonexistent", &managed).unwrap();
        let e = floor_path_from(env("/t/floor.toml"), &managed)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MCPGUARD_SYSTEM_POLICY=/t/floor.toml") && e.contains("exists"),
            "{e}"
        );
        // Naming the managed floor itself changes nothing.
        assert_eq!(
            floor_path_from(Some(managed.clone().into_os_string()), &managed).unwrap(),
            (managed.clone(), true)
        );
    }

    #[test]
    fn a_user_policy_can_tighten_but_not_loosen() {
        let e = layered("# mine\n[capabilities]\nsampling = true\n").unwrap_err();
        assert_eq!(e, "user.toml:3:1: capabilities.sampling cannot be loosened: true is looser than the floor's false, which the managed policy floor sets at floor.toml:2; only a stricter value is accepted (ask the administrator to change the floor)");
        let e = layered("[review]\nmax_validity = \"30d\"\n").unwrap_err();
        assert!(e.starts_with("user.toml:2:1: review.max_validity cannot be loosened: \"30d\" is looser than the floor's \"7d\""), "{e}");
        let e = layered("[sandbox]\nread = [\"/usr\", \"/home\"]\n").unwrap_err();
        assert!(
            e.contains(
                "sandbox.read cannot be loosened: it grants \"/home\" beyond the floor's list"
            ),
            "{e}"
        );
        let e = layered("[review]\nallowed_signers = \"/tmp/mine\"\n").unwrap();
        assert_eq!(
            e.policy.review.allowed_signers.map(|p| p.to_string()),
            Some("/tmp/mine".into()),
            "a key the floor leaves out is the user's"
        );

        let l = layered("[review]\nrefused_tools = [\"b\"]\nmax_validity = \"1d\"\n[sandbox]\nread = [\"/usr\"]\n[confirmation]\nmode = \"deny\"\n").unwrap();
        assert_eq!(
            l.policy.review.refused_tools,
            ["a", "b"],
            "lists of refusals are joined"
        );
        assert_eq!(l.policy.review.max_validity.as_secs(), 86_400);
        assert!(!l.policy.capabilities.sampling);
        assert_eq!(
            l.origins["review.refused_tools"],
            "floor.toml:5 + user.toml:2"
        );
        assert_eq!(l.origins["review.max_validity"], "user.toml:3");
        assert_eq!(l.origins["capabilities.sampling"], "floor.toml:2");
        assert_eq!(l.origins["confirmation.mode"], "user.toml:7");
        assert!(l
            .effective_toml()
            .contains("#   review.max_validity = user.toml:3\n"));
    }

    #[test]
    fn orders_of_the_keys() {
        let f = |r: Rule, a: Value, b: Value| combine(r, &a, &b).is_ok();
        assert!(!f(
            rule(&["confirmation".into(), "mode".into()]),
            "elicit".into(),
            "allow".into()
        ));
        assert!(f(
            rule(&["confirmation".into(), "mode".into()]),
            "elicit".into(),
            "deny".into()
        ));
        assert!(!f(
            rule(&["sandbox".into(), "mode".into()]),
            "require".into(),
            "best-effort".into()
        ));
        assert!(!f(Rule::SideEffect, "delete".into(), "read".into()));
        assert!(f(Rule::SideEffect, "read".into(), "delete".into()));
        assert!(!f(
            rule(&["limits".into(), "max_pages".into()]),
            10.into(),
            11.into()
        ));
        assert!(!f(
            rule(&["sandbox".into(), "limits".into(), "processes".into()]),
            10.into(),
            "unlimited".into()
        ));
        assert!(
            !f(
                rule(&["audit".into(), "path".into()]),
                "/var/log/a".into(),
                "/tmp/a".into()
            ),
            "unknown keys are fixed"
        );
        assert!(f(
            rule(&["arguments".into(), "closed".into()]),
            true.into(),
            true.into()
        ));
        let channels = || rule(&["confirmation".into(), "channels".into()]);
        let list = |names: &[&str]| {
            Value::Array(names.iter().map(|n| Value::String(n.to_string())).collect())
        };
        assert!(f(
            channels(),
            list(&["host", "desktop"]),
            list(&["desktop", "host"])
        ));
        assert!(!f(channels(), list(&["host"]), list(&["host", "terminal"])));
        assert!(!f(
            rule(&["confirmation".into(), "allow_tool_for_session".into()]),
            false.into(),
            true.into()
        ));
        assert!(!f(
            rule(&["confirmation".into(), "identical_for".into()]),
            "5m".into(),
            "10m".into()
        ));
        assert!(!f(
            rule(&["arguments".into(), "closed".into()]),
            true.into(),
            false.into()
        ));
    }

    #[test]
    fn command_line_overrides_cannot_loosen_the_floor() {
        let floor = "[audit]\npath = \"/var/log/mcpguard.jsonl\"\n[limits]\nmax_message_bytes = 65536\n[sandbox]\nread_write = [\"/srv/shared\"]\n";
        let user = "[audit]\npath = \"/var/log/mcpguard.jsonl\"\n";
        let l = layer(Some((floor, "floor.toml")), Some((user, "user.toml"))).unwrap();
        let e = l
            .check_overrides(Some(Path::new("/tmp/mine")), None, &[], &[], &[])
            .unwrap_err();
        assert!(
            e.starts_with("--audit-log cannot loosen audit.path, which the managed policy floor sets at floor.toml:2"),
            "{e}"
        );
        let e = l
            .check_overrides(None, Some(70_000), &[], &[], &[])
            .unwrap_err();
        assert!(e.contains("limits.max_message_bytes"), "{e}");
        assert!(l.check_overrides(None, Some(4096), &[], &[], &[]).is_ok());
        let e = l
            .check_overrides(None, None, &[], &[PathBuf::from("/home")], &[])
            .unwrap_err();
        assert!(
            e.contains("--sandbox-write cannot loosen sandbox.read_write")
                && e.ends_with("(/home)"),
            "{e}"
        );
        let ok = l.check_overrides(
            None,
            None,
            &[PathBuf::from("/anything")],
            &[PathBuf::from("/srv/shared")],
            &["MEMORY_FILE_PATH".to_string()],
        );
        assert!(ok.is_ok(), "the floor sets no read or env list: {ok:?}");
        let floor = "[sandbox]\nenv = [\"PATH\", \"HOME\"]\n";
        let l = layer(Some((floor, "floor.toml")), None).unwrap();
        let e = l
            .check_overrides(None, None, &[], &[], &["AWS_SECRET_ACCESS_KEY".to_string()])
            .unwrap_err();
        assert!(
            e.contains("--sandbox-env cannot loosen sandbox.env")
                && e.ends_with("(AWS_SECRET_ACCESS_KEY)"),
            "{e}"
        );
        assert!(l
            .check_overrides(None, None, &[], &[], &["HOME".to_string()])
            .is_ok());
    }

    #[test]
    fn layering_refuses_a_user_destination_beyond_the_floors_ports() {
        let floor = "[sandbox]\ntcp_connect = [5432]\n";
        let user = "# mine\n[sandbox]\nconnect = [\"127.0.0.1:22\"]\n";
        let e = layer(Some((floor, "floor.toml")), Some((user, "user.toml")))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("user.toml:3:")
                && e.contains("sandbox.connect 127.0.0.1:22 cannot loosen sandbox.tcp_connect")
                && e.contains("floor.toml:2"),
            "{e}"
        );
        let user = "[sandbox]\nconnect = [\"127.0.0.1:5432\"]\n";
        assert!(layer(Some((floor, "floor.toml")), Some((user, "user.toml"))).is_ok());
    }

    #[test]
    fn a_destination_cannot_loosen_the_floors_connect_ports() {
        let l = Layered {
            policy: crate::policy::parse(
                "[sandbox]\ntcp_connect = [5432]\nconnect = [\"127.0.0.1:22\"]\n",
                "u",
            )
            .unwrap(),
            floor: None,
            floor_keys: [("sandbox.tcp_connect".to_string(), "floor:3".to_string())].into(),
            origins: Default::default(),
        };
        let e = l.check_connect(&[]).unwrap_err();
        assert!(
            e.contains("sandbox.connect 127.0.0.1:22") && e.contains("floor:3"),
            "{e}"
        );
        let l = Layered {
            policy: crate::policy::parse("[sandbox]\ntcp_connect = [5432]\n", "u").unwrap(),
            ..l
        };
        assert!(l
            .check_connect(&[Destination::parse("localhost:5432").unwrap()])
            .is_ok());
        let e = l
            .check_connect(&[Destination::parse("localhost:6379").unwrap()])
            .unwrap_err();
        assert!(e.contains("--sandbox-connect localhost:6379"), "{e}");
    }
}

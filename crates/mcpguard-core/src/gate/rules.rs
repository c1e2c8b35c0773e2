//! Local rules for argument values: the policy's `[arguments.tools.<name>.rules]` (paths within
//! folders, URL schemes and hosts, no shell metacharacters, a pattern, a length) and the rule
//! every call gets (`arguments.refuse_metadata_urls`: no URL to a cloud metadata address), and
//! the shapes of a download run as code that every call is asked about
//! (`arguments.confirm_remote_code`).
//!
//! A reviewed `inputSchema` says what shape an argument has; it rarely says which values the
//! person running mcpguard means to allow, and a model can be talked into any value the schema
//! admits. These rules are the person's own, checked on the parsed arguments before dispatch.
//!
//! Pure: the rules are compiled once from the policy with the paths already resolved, and every
//! check is lexical. Nothing here touches the file system or resolves a host name, so a symlink
//! inside an allowed folder, or a name that resolves to a private address, is not seen here (the
//! sandbox is what holds the server to its folders and its network).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Component, Path, PathBuf};

use regex::Regex;
use serde_json::Value;

use crate::policy::ArgumentRule;

/// A pointer pattern: RFC 6901 segments, `None` for a `*` segment (any index or member name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointerPattern {
    pub text: String,
    segments: Vec<Option<String>>,
}

impl PointerPattern {
    /// Parses `""`, `/a`, `/a/*/b` (with `~0` and `~1` escapes).
    pub fn parse(text: &str) -> Result<PointerPattern, String> {
        if text.is_empty() {
            return Ok(PointerPattern {
                text: String::new(),
                segments: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "{text:?} is not a JSON pointer: it must be empty or start with /"
            ));
        };
        let segments = rest
            .split('/')
            .map(|s| {
                if s == "*" {
                    None
                } else {
                    Some(s.replace("~1", "/").replace("~0", "~"))
                }
            })
            .collect();
        Ok(PointerPattern {
            text: text.to_string(),
            segments,
        })
    }

    /// Whether the concrete pointer `segments` is this pattern or lies under it.
    pub fn covers(&self, segments: &[String]) -> bool {
        self.segments.len() <= segments.len()
            && self
                .segments
                .iter()
                .zip(segments)
                .all(|(want, got)| want.as_ref().is_none_or(|w| w == got))
    }

    /// Every value the pattern selects in `root`, with its concrete pointer.
    pub fn select<'v>(&self, root: &'v Value) -> Vec<(String, &'v Value)> {
        let mut out = Vec::new();
        select(root, &self.segments, String::new(), &mut out);
        out
    }
}

fn select<'v>(
    v: &'v Value,
    segments: &[Option<String>],
    at: String,
    out: &mut Vec<(String, &'v Value)>,
) {
    let Some((first, rest)) = segments.split_first() else {
        out.push((at, v));
        return;
    };
    match (first, v) {
        (Some(name), Value::Object(o)) => {
            if let Some(child) = o.get(name) {
                select(child, rest, format!("{at}/{}", escape(name)), out);
            }
        }
        (Some(index), Value::Array(a)) => {
            if let Some(child) = index.parse::<usize>().ok().and_then(|i| a.get(i)) {
                select(child, rest, format!("{at}/{index}"), out);
            }
        }
        (None, Value::Object(o)) => {
            for (name, child) in o {
                select(child, rest, format!("{at}/{}", escape(name)), out);
            }
        }
        (None, Value::Array(a)) => {
            for (i, child) in a.iter().enumerate() {
                select(child, rest, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// One RFC 6901 segment, escaped.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// One rule of the policy, ready to check: folders resolved, the pattern compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub pointer: PointerPattern,
    folders: Option<Vec<PathBuf>>,
    /// The directory a relative path is taken from (mcpguard's, which the server inherits).
    cwd: Option<PathBuf>,
    schemes: Option<Vec<String>>,
    hosts: Option<Vec<String>>,
    deny_hosts: Vec<String>,
    url: bool,
    private_addresses: bool,
    command: bool,
    pattern: Option<Regex>,
    max_length: Option<usize>,
}

/// Why a value breaks a rule, in words that never quote the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The policy key that the value breaks (`paths`, `hosts`, …).
    pub key: &'static str,
    pub why: String,
}

impl Rule {
    /// Compiles the policy's rule for `pointer`; `folders` are its `paths`, already resolved.
    pub fn new(
        pointer: &str,
        rule: &ArgumentRule,
        folders: Option<Vec<PathBuf>>,
        cwd: Option<PathBuf>,
    ) -> Result<Rule, String> {
        let pattern = match &rule.pattern {
            Some(p) => Some(
                crate::wire::secrets::compile(&format!("^(?:{p})$"))
                    .map_err(|e| format!("pattern of rule {pointer:?}: {e}"))?,
            ),
            None => None,
        };
        let lower = |v: &Vec<String>| v.iter().map(|h| h.to_ascii_lowercase()).collect();
        Ok(Rule {
            pointer: PointerPattern::parse(pointer)?,
            folders: folders.map(|f| f.iter().map(|p| normalize(p)).collect()),
            cwd,
            schemes: rule.url_schemes.as_ref().map(lower),
            hosts: rule.hosts.as_ref().map(lower),
            deny_hosts: lower(&rule.deny_hosts),
            url: rule.is_url_rule(),
            private_addresses: rule.private_addresses,
            command: rule.command,
            pattern,
            max_length: rule.max_length,
        })
    }

    /// Checks one selected value.
    pub fn check(&self, value: &Value) -> Result<(), Broken> {
        let Some(s) = value.as_str() else {
            return Err(Broken {
                key: "rules",
                why: "the value is not a string, and the rule checks strings".into(),
            });
        };
        if let Some(max) = self.max_length {
            let n = s.chars().count();
            if n > max {
                return Err(Broken {
                    key: "max_length",
                    why: format!("it is {n} characters long; the rule allows {max}"),
                });
            }
        }
        if self.command {
            if let Some(c) = s.chars().find(|&c| is_shell_meta(c)) {
                return Err(Broken {
                    key: "command",
                    why: format!(
                        "it contains the shell metacharacter {}",
                        crate::wire::sanitize::clean(
                            &c.to_string(),
                            crate::wire::sanitize::Clean::LINE
                        )
                        .escape_debug()
                    ),
                });
            }
        }
        if let Some(p) = &self.pattern {
            if !p.is_match(s) {
                return Err(Broken {
                    key: "pattern",
                    why: "it does not match the rule's pattern".into(),
                });
            }
        }
        if let Some(folders) = &self.folders {
            within_folders(s, folders, self.cwd.as_deref())?;
        }
        if self.url {
            self.check_url(s)?;
        }
        Ok(())
    }

    fn check_url(&self, s: &str) -> Result<(), Broken> {
        let Some(url) = Url::parse(s) else {
            return Err(Broken {
                key: "url_schemes",
                why: "it is not a URL of the form scheme://host/…".into(),
            });
        };
        if let Some(schemes) = &self.schemes {
            if !schemes.contains(&url.scheme) {
                return Err(Broken {
                    key: "url_schemes",
                    why: format!("its scheme is not one of {}", schemes.join(", ")),
                });
            }
        }
        if let Some(kind) = metadata_host(&url.host) {
            return Err(Broken {
                key: "hosts",
                why: format!("its host is {kind}, which no rule admits"),
            });
        }
        if self.deny_hosts.iter().any(|h| host_matches(h, &url.host)) {
            return Err(Broken {
                key: "deny_hosts",
                why: "its host is in the rule's deny_hosts".into(),
            });
        }
        if let Some(hosts) = &self.hosts {
            if !hosts.iter().any(|h| host_matches(h, &url.host)) {
                return Err(Broken {
                    key: "hosts",
                    why: "its host is not in the rule's hosts".into(),
                });
            }
        }
        if !self.private_addresses {
            if let Some(kind) = private_host(&url.host) {
                return Err(Broken {
                    key: "private_addresses",
                    why: format!("its host is {kind}"),
                });
            }
        }
        Ok(())
    }
}

/// Characters a shell gives meaning to: command separators and pipes, substitution and
/// expansion, redirection, grouping, escapes and line breaks. A command-like argument with any
/// of them can run a second command.
pub fn is_shell_meta(c: char) -> bool {
    matches!(
        c,
        ';' | '&'
            | '|'
            | '$'
            | '`'
            | '<'
            | '>'
            | '('
            | ')'
            | '{'
            | '}'
            | '\\'
            | '\n'
            | '\r'
            | '\0'
            | '!'
    )
}

/// `path` with `.` removed and `..` applied lexically (never above the root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether the path `s` lies within one of `folders`, lexically: a relative path is taken from
/// `cwd`, a `file://` URL by its path, `~` is not expanded (a server does not expand it either),
/// and `..` is applied before the comparison, component by component.
fn within_folders(s: &str, folders: &[PathBuf], cwd: Option<&Path>) -> Result<(), Broken> {
    let text = s.strip_prefix("file://").unwrap_or(s);
    if text.contains('\0') {
        return Err(Broken {
            key: "paths",
            why: "it contains a NUL character".into(),
        });
    }
    let path = Path::new(text);
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else if let Some(cwd) = cwd {
        cwd.join(path)
    } else {
        return Err(Broken {
            key: "paths",
            why: "it is a relative path and the working directory is unknown".into(),
        });
    };
    let normal = normalize(&absolute);
    if folders.iter().any(|f| normal.starts_with(f)) {
        return Ok(());
    }
    let listed: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
    Err(Broken {
        key: "paths",
        why: format!(
            "the path, with `.` and `..` applied, is not within {} (a lexical check: symbolic links are not followed)",
            listed.join(", ")
        ),
    })
}

/// The parts of a URL the rules read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Lowercase.
    pub scheme: String,
    /// Lowercase, without brackets, userinfo, port or a trailing dot.
    pub host: String,
}

impl Url {
    /// Reads `scheme://[userinfo@]host[:port][/…]`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Url> {
        let (scheme, rest) = s.trim().split_once("://")?;
        if scheme.is_empty()
            || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return None;
        }
        // Browsers and most HTTP clients treat a backslash like a slash here.
        let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let host = if let Some(inner) = host_port.strip_prefix('[') {
            inner.split(']').next().unwrap_or_default()
        } else {
            host_port.split(':').next().unwrap_or_default()
        };
        let host = percent_decode(host).to_ascii_lowercase();
        Some(Url {
            scheme: scheme.to_ascii_lowercase(),
            host: host.trim_end_matches('.').to_string(),
        })
    }
}

/// Decodes `%XX` escapes (a host written `169.254.169.%32%35%34` is the same host).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |c: u8| (c as char).to_digit(16);
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(hi), Some(lo)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `pattern` is `name` (exact) or `*.name` (any subdomain of name, not name itself).
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(base) => host.ends_with(base) && host[..host.len() - base.len()].ends_with('.'),
        None => pattern.trim_end_matches('.') == host,
    }
}

/// Host names that cloud providers serve instance metadata (and credentials) on.
const METADATA_NAMES: &[&str] = &[
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.com",
    "metadata.platformequinix.com",
];

/// What kind of metadata address `host` is, if it is one: the link-local instance metadata
/// address of AWS, GCP, Azure and others (in any IPv4 spelling, and IPv4-mapped), AWS's IPv6
/// one, Alibaba's and Oracle's, and the providers' metadata host names.
pub fn metadata_host(host: &str) -> Option<&'static str> {
    if METADATA_NAMES.contains(&host) {
        return Some("a cloud metadata host name");
    }
    let ip = parse_ip(host)?;
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => {
            if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                return Some("the AWS IPv6 metadata address");
            }
            v6.to_ipv4_mapped()?
        }
    };
    match v4.octets() {
        [169, 254, 169, 254] | [169, 254, 170, 2] | [169, 254, 169, 253] => {
            Some("a cloud metadata address")
        }
        [100, 100, 100, 200] => Some("the Alibaba Cloud metadata address"),
        [192, 0, 0, 192] => Some("the Oracle Cloud metadata address"),
        _ => None,
    }
}

/// What kind of non-public address `host` is, if it is one (lexically: a name is only
/// recognized as `localhost` or under it).
pub fn private_host(host: &str) -> Option<&'static str> {
    if host == "localhost" || host.ends_with(".localhost") {
        return Some("a loopback name");
    }
    let ip = parse_ip(host)?;
    let v4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => {
            if v6.is_loopback() || v6.is_unspecified() {
                return Some("a loopback or unspecified address");
            }
            let seg = v6.segments()[0];
            if seg & 0xfe00 == 0xfc00 {
                return Some("a unique-local address");
            }
            if seg & 0xffc0 == 0xfe80 {
                return Some("a link-local address");
            }
            v6.to_ipv4_mapped()
        }
    }?;
    let o = v4.octets();
    if v4.is_loopback() || v4.is_unspecified() || o[0] == 0 {
        Some("a loopback or unspecified address")
    } else if v4.is_private() {
        Some("a private address")
    } else if v4.is_link_local() {
        Some("a link-local address")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("a shared (carrier-grade NAT) address")
    } else {
        None
    }
}

/// An IP address in any spelling a resolver accepts: IPv6, dotted IPv4, and the inet_aton forms
/// (`2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376`, `169.254.43518`) that SSRF filters miss.
fn parse_ip(host: &str) -> Option<IpAddr> {
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return Some(IpAddr::V6(v6));
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts
        .iter()
        .map(|p| inet_number(p))
        .collect::<Option<Vec<u64>>>()?;
    let (last, head) = nums.split_last()?;
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let width = 8 * (4 - head.len() as u32);
    if *last >= 1u64 << width {
        return None;
    }
    let mut v: u64 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i as u32);
    }
    v |= last;
    Some(IpAddr::V4(Ipv4Addr::from(u32::try_from(v).ok()?)))
}

/// One inet_aton number: decimal, `0x` hexadecimal or `0` octal.
fn inet_number(p: &str) -> Option<u64> {
    if p.is_empty() {
        return None;
    }
    if let Some(hex) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        return if hex.is_empty() {
            Some(0)
        } else {
            u64::from_str_radix(hex, 16).ok()
        };
    }
    if p.len() > 1 && p.starts_with('0') {
        return u64::from_str_radix(&p[1..], 8).ok();
    }
    if p.len() > 12 {
        return None;
    }
    p.parse().ok()
}

/// The metadata addresses named by URLs inside `s` (anywhere in it: a command line can carry
/// one), as the kind of address; `None` when there is none. Only text with `://` is read.
pub fn metadata_url_in(s: &str) -> Option<&'static str> {
    let mut from = 0;
    while let Some(at) = s[from..].find("://") {
        let sep = from + at;
        let start = s[..sep]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        if let Some(url) = Url::parse(&s[start..]) {
            let host = url
                .host
                .trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == ':'));
            if let Some(kind) = metadata_host(host) {
                return Some(kind);
            }
        }
        from = sep + 3;
    }
    None
}

/// The shape of a command that downloads code and runs it, anywhere in `s`: a download piped
/// into a shell or an interpreter (`curl … | sh`, `wget -qO- … | sudo bash`, `iwr … | iex`), or
/// a command substitution that downloads (`$(curl …)`, `` `wget …` ``). `None` for every other
/// text, a download alone (`curl … | jq .`) or a substitution of anything else (`$(date)`)
/// included. Linear-time expressions, compiled once.
pub fn remote_code_in(s: &str) -> Option<&'static str> {
    static SHAPES: std::sync::OnceLock<Option<[(Regex, &'static str); 2]>> =
        std::sync::OnceLock::new();
    static NAMES: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    const DOWNLOADERS: [&str; 6] = [
        "curl",
        "wget",
        "iwr",
        "invoke-webrequest",
        "invoke-restmethod",
        "irm",
    ];
    // Only a text that names a downloader can hold either shape. This runs on every string
    // argument of every call, so the names are looked for in the text as it is (ASCII case
    // ignored) and only a text that has one is lowercased for the shapes.
    let names = NAMES.get_or_init(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(DOWNLOADERS)
            .ok()
    });
    if names.as_ref().is_some_and(|ac| !ac.is_match(s)) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let shapes = SHAPES.get_or_init(|| {
        const DOWNLOADER: &str = r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod)";
        let piped = Regex::new(&format!(
            r"\b{DOWNLOADER}\b[^\n|;&]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:sh|bash|zsh|dash|ksh|fish|python[0-9.]*|perl|ruby|node|php|iex|invoke-expression|pwsh|powershell)\b"
        ))
        .ok()?;
        let substituted = Regex::new(&format!(r"(?:\$\(|`)\s*{DOWNLOADER}\b")).ok()?;
        Some([
            (piped, "a download piped into a shell or an interpreter"),
            (substituted, "a command substitution that downloads"),
        ])
    });
    match shapes {
        Some(shapes) => shapes
            .iter()
            .find(|(re, _)| re.is_match(&lower))
            .map(|(_, what)| *what),
        // The expressions are constant and compile; should they not, a text naming a downloader
        // is asked about rather than let through.
        None => DOWNLOADERS
            .iter()
            .any(|d| lower.contains(d))
            .then_some("a download (the check's expressions did not compile)"),
    }
}

#[cfg(test)]
mod tests;

//! The generated documentation: the man pages and the shell completions.
//!
//! `mcpguard(1)` and the completions come from the clap definitions in `cli`, the same ones
//! `--help` prints, so a flag cannot exist without being documented. `mcpguard-policy(5)` and
//! `mcpguard-manifest(5)` come from `docs/policy.md` and `docs/manifest.md` through a small
//! Markdown-to-roff converter, so the reference is written once. `examples/gen_docs.rs` (run by
//! `scripts/gen-docs.sh`) writes the files, and the test suite
//! regenerates them and compares with the committed copies. The code lives in the library so that
//! the test can call it; the `mcpguard` binary does not use it, so none of it is linked into the
//! installed program.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::flags::Cli;

const POLICY_MD: &str = include_str!("../../docs/policy.md");
const MANIFEST_MD: &str = include_str!("../../docs/manifest.md");

/// Every generated file, as (path relative to the repository root, contents).
pub fn generated_files() -> Vec<(PathBuf, String)> {
    let mut files = vec![
        (PathBuf::from("man/mcpguard.1"), man_page()),
        (
            PathBuf::from("man/mcpguard-policy.5"),
            markdown_page(
                POLICY_MD,
                "MCPGUARD-POLICY",
                "5",
                "mcpguard-policy \\- the local policy file of mcpguard",
            ),
        ),
        (
            PathBuf::from("man/mcpguard-manifest.5"),
            markdown_page(
                MANIFEST_MD,
                "MCPGUARD-MANIFEST",
                "5",
                "mcpguard-manifest \\- the reviewed tool snapshot enforced by mcpguard",
            ),
        ),
    ];
    files.extend(completions());
    files
}

/// Writes every generated file under `root` (creating `man/` and `completions/`).
pub fn write_all(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for (rel, text) in generated_files() {
        let path = root.join(&rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(rel);
    }
    Ok(written)
}

/// The command tree as `--help` shows it, without clap's `help` subcommand (every command has
/// `--help`).
fn command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// `cmd` rebuilt without its hidden subcommands (`demo-server`), which clap_complete would
/// otherwise offer: clap has no way to remove a subcommand, so the top level is built anew with
/// the same version, arguments and visible subcommands.
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new("mcpguard")
        .disable_help_subcommand(true)
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if cmd.get_version().is_some() {
        out = out.version(env!("CARGO_PKG_VERSION"));
    }
    if let Some(a) = cmd.get_about() {
        out = out.about(a.clone());
    }
    out.build();
    out
}

/// Every visible subcommand, depth first, with its full name (`policy check`).
pub fn visible_subcommands(cmd: &clap::Command) -> Vec<(String, clap::Command)> {
    fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{prefix} {}", sub.get_name());
            out.push((name.clone(), sub.clone()));
            walk(&name, sub, out);
        }
    }
    let mut out = Vec::new();
    walk(cmd.get_name(), cmd, &mut out);
    out
}

/// `mcpguard(1)`: clap_mangen renders the proxy's synopsis and options; every subcommand then
/// gets a subsection with its own synopsis and options, so that the one page documents every
/// flag (clap_mangen alone would only list the subcommands' names).
pub fn man_page() -> String {
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone())
        .title("MCPGUARD")
        .section("1")
        .manual("mcpguard manual");
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    out.extend_from_slice(DESCRIPTION.as_bytes());
    let _ = man.render_options_section(&mut out);
    let mut page = String::from_utf8_lossy(&out).into_owned();
    page.push_str(".SH COMMANDS\n");
    // Global options and --help are documented once, under OPTIONS, not again per command.
    let globals: Vec<clap::Id> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().clone())
        .chain([clap::Id::from("help")])
        .collect();
    for (name, sub) in visible_subcommands(&cmd) {
        page.push_str(&format!(".SS \"{}\"\n", roff_escape(&name)));
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            page.push_str(&roff_text(&about.to_string()));
            page.push('\n');
        }
        let mut sub = sub.clone().bin_name(name.clone());
        for id in &globals {
            if sub.get_arguments().any(|a| a.get_id() == id) {
                sub = sub.mut_arg(id.clone(), |a| a.hide(true));
            }
        }
        let sub_man = clap_mangen::Man::new(sub.clone());
        let mut buf = Vec::new();
        let _ = sub_man.render_synopsis_section(&mut buf);
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            let _ = sub_man.render_options_section(&mut buf);
        }
        // The subsection reuses clap_mangen's synopsis and option list without their `.SH`
        // headings, which would otherwise end the COMMANDS section.
        for line in String::from_utf8_lossy(&buf).lines() {
            if line.starts_with(".SH") {
                page.push_str(".PP\n");
            } else {
                page.push_str(line);
                page.push('\n');
            }
        }
    }
    page.push_str(TRAILER);
    page
}

/// The parts of `mcpguard(1)` that are prose rather than flags.
const DESCRIPTION: &str = r#".SH DESCRIPTION
mcpguard sits between an MCP host (Claude Desktop, VS Code, Cursor, a coding agent) and one local
MCP server, which it starts as its child from the command after \fB\-\-\fR. It relays
newline\-delimited JSON\-RPC in both directions and lets through only what a person reviewed: the
pinned protocol version, the pinned server identity and the exact Tool objects of a snapshot whose
SHA\-256 digest the host configuration carries (\fB\-\-manifest\fR, \fB\-\-sha256\fR,
\fB\-\-server\fR). The snapshot is verified before the server is started; a mismatch never starts
it.
.PP
Standard output carries only JSON\-RPC. Diagnostics, and the server's own standard error
(sanitized), go to standard error. mcpguard exits the way the server exited: with the same code,
or by the same signal.
.PP
The usual sequence is \fBcapture\fR (record the live catalogue), \fBshow\fR (see every field the
model will see, hidden characters made visible), \fBreview\fR (record a reviewer's assertions),
then run the server as \fBmcpguard \-\-manifest\fR \fIFILE\fR \fB\-\-sha256\fR \fIHEX\fR
\fB\-\-server\fR \fIKEY\fR \fB\-\-\fR \fIcommand...\fR. \fBwrap\fR rewrites a host's configuration
file into that form. On a terminal, \fBreview\fR \fIFILE\fR \fB\-\-server\fR \fIKEY\fR without
\fB\-\-tool\fR asks about every unreviewed tool, one question at a time, each with a default that
Enter accepts; \fB\-\-side\-effect\fR records what a tool does (read, create, update or delete),
which the policy uses to tell reads from writes.
.PP
When the server changes, \fBupdate\fR \fIFILE\fR \fB\-\-config\fR \fIHOST.json\fR \fB\-\-\fR
\fIcommand...\fR captures it again: every tool that did not change keeps its review, every
changed or new tool is unreviewed (and not served) until it is reviewed again, what changed is
printed tool by tool with its JSON pointer, the old snapshot is kept as \fIFILE\fR\fB.prev\fR,
and the new digest is pinned into the host configuration. On a terminal it asks about the
changed tools only, with the previous answers as the defaults; with \fB\-\-yes\fR, or without a
terminal, it never asks.
"#;

const TRAILER: &str = r#".SH ENVIRONMENT
.TP
\fBMCPGUARD_LOG\fR
Level of the diagnostics on standard error: \fBerror\fR, \fBwarn\fR (the proxy's default: errors,
refusals and warnings only, so a healthy start prints nothing a host would record as an error),
\fBinfo\fR (the subcommands' default; for the proxy, what is enforced, the sandbox's summary, the
negotiated versions) or \fBdebug\fR.
.TP
\fBMCPGUARD_SYSTEM_POLICY\fR
The managed policy floor to read where \fI/etc/mcpguard/policy.toml\fR does not exist (for
tests); a file it names must exist. While that file exists, a variable naming another file is
refused, so no environment can replace the administrator's floor. See \fBmcpguard\-policy\fR(5), THE MANAGED FLOOR.
.SH EXIT STATUS
As a proxy, the server's exit status (or its signal). 3 when the host closed the connection and the
server did not exit within \fB\-\-grace\fR, so that mcpguard ended it itself (SIGTERM, then SIGKILL):
mcpguard then exits 3 rather than die of the signal it sent. 70 after an internal error (a bug in
mcpguard): the server is killed and every pending request answered with an error. 1 when mcpguard refuses to start the
server (a snapshot that does not verify, an unacceptable policy) or fails; 2 when no server command
is given. The subcommands exit 0 on success and 1 on failure; \fBdiff\fR exits 1 when the snapshots
differ. \fBlock check\fR exits 0 when every locked server is current, 1 when any drifted, 2 when
any failed or the lock file is unusable.
.SH FILES
.TP
\fI/usr/share/mcpguard/policies/*.toml\fR
The shipped policies (the built\-in default is \fBdefault.toml\fR).
.TP
\fI/etc/mcpguard/policy.toml\fR
The managed policy floor, read first by every run when it exists; a user's \fB\-\-policy\fR can
only tighten the keys it sets.
.TP
\fImcpguard.lock\fR
A team's lock file (\fBlock check\fR, \fBlock add\fR, \fBwrap \-\-from\-lock\fR).
.SH SEE ALSO
\fBmcpguard\-policy\fR(5), \fBmcpguard\-manifest\fR(5)
"#;

/// Shell completions for bash, zsh and fish, from the same definitions.
pub fn completions() -> Vec<(PathBuf, String)> {
    use clap_complete::Shell;
    [
        (Shell::Bash, "completions/mcpguard.bash"),
        (Shell::Zsh, "completions/_mcpguard"),
        (Shell::Fish, "completions/mcpguard.fish"),
    ]
    .into_iter()
    .map(|(shell, path)| {
        let mut cmd = without_hidden_subcommands(&Cli::command().disable_help_subcommand(true));
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "mcpguard", &mut buf);
        (
            PathBuf::from(path),
            String::from_utf8_lossy(&buf).into_owned(),
        )
    })
    .collect()
}

/// Escapes text for roff: backslashes, hyphens that must stay minus signs, and a leading control
/// character. Typographic characters get their portable roff names so that any troff renders
/// them.
pub fn roff_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' => out.push_str("\\-"),
            '—' => out.push_str("\\(em"),
            '–' => out.push_str("\\(en"),
            '…' => out.push_str("..."),
            '→' => out.push_str("\\(->"),
            '←' => out.push_str("\\(<-"),
            '≤' => out.push_str("\\(<="),
            '≥' => out.push_str("\\(>="),
            '×' => out.push_str("\\(mu"),
            '“' | '”' => out.push('"'),
            '‘' | '’' => out.push('\''),
            _ => out.push(c),
        }
    }
    out
}

/// A line of running text: escaped, and protected when it would start with a control character.
fn roff_text(s: &str) -> String {
    let t = roff_escape(s);
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Inline Markdown to roff: `code` and **strong** become bold, *emphasis* italic, links keep
/// their text. Code spans are taken first so that `*` inside them stays literal.
fn inline(md: &str) -> String {
    let mut out = String::new();
    let mut rest = md;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`') {
            if let Some(end) = after.find('`') {
                out.push_str("\\fB");
                out.push_str(&roff_escape(&after[..end]));
                out.push_str("\\fR");
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("**") {
            if let Some(end) = after.find("**") {
                out.push_str("\\fB");
                out.push_str(&inline(&after[..end]));
                out.push_str("\\fR");
                rest = &after[end + 2..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('*') {
            if let Some(end) = after
                .find('*')
                .filter(|&e| e > 0 && !after.starts_with(' '))
            {
                out.push_str("\\fI");
                out.push_str(&inline(&after[..end]));
                out.push_str("\\fR");
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix('[') {
            if let Some(close) = after.find("](") {
                if let Some(end) = after[close..].find(')') {
                    out.push_str(&inline(&after[..close]));
                    rest = &after[close + end + 1..];
                    continue;
                }
            }
        }
        let next = rest[1..]
            .find(['`', '*', '['])
            .map_or(rest.len(), |i| i + 1);
        out.push_str(&roff_escape(&rest[..next]));
        rest = &rest[next..];
    }
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}

/// Splits a Markdown table row into its cells (outer pipes removed; pipes inside code spans are
/// kept).
fn table_cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut in_code = false;
    for c in inner.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => cells.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    cells.push(cell.trim().to_string());
    cells
}

/// Converts the Markdown subset the reference documents use (headings, paragraphs, bullet and
/// numbered lists, fenced code, tables) into a man page. The first `#` heading is the document's
/// title and is replaced by the NAME section. A table becomes a tagged list: the first cell is the
/// tag, the middle cells are labelled by their column header, the last cell is the body.
pub fn markdown_page(md: &str, title: &str, section: &str, name_line: &str) -> String {
    let mut out = format!(
        ".TH {title} {section} \"\" \"mcpguard\" \"mcpguard manual\"\n.SH NAME\n{name_line}\n.SH DESCRIPTION\n"
    );
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    let mut seen_title = false;
    let mut paragraph: Vec<String> = Vec::new();
    // The documents say which man page they are the source of; the man page itself need not.
    let flush = |paragraph: &mut Vec<String>, out: &mut String| {
        if paragraph
            .first()
            .is_some_and(|l| l.starts_with("This text is the source of"))
        {
            paragraph.clear();
        }
        if !paragraph.is_empty() {
            out.push_str(".PP\n");
            out.push_str(&inline(&paragraph.join(" ")));
            out.push('\n');
            paragraph.clear();
        }
    };
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            flush(&mut paragraph, &mut out);
            i += 1;
        } else if let Some(h) = line.strip_prefix("# ") {
            flush(&mut paragraph, &mut out);
            if seen_title {
                out.push_str(&format!(".SH \"{}\"\n", inline(&heading_case(h))));
            }
            seen_title = true;
            i += 1;
        } else if let Some(h) = line.strip_prefix("## ") {
            flush(&mut paragraph, &mut out);
            out.push_str(&format!(".SH \"{}\"\n", inline(&heading_case(h))));
            i += 1;
        } else if let Some(h) = line.strip_prefix("### ") {
            flush(&mut paragraph, &mut out);
            out.push_str(&format!(".SS \"{}\"\n", inline(h)));
            i += 1;
        } else if trimmed.starts_with("```") {
            flush(&mut paragraph, &mut out);
            out.push_str(".PP\n.RS 4\n.nf\n");
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                out.push_str(&roff_text(lines[i]));
                out.push('\n');
                i += 1;
            }
            out.push_str(".fi\n.RE\n");
            i += 1;
        } else if trimmed.starts_with('|') {
            flush(&mut paragraph, &mut out);
            let header = table_cells(line);
            i += 1;
            // The separator row (`| --- | --- |`).
            if i < lines.len() && lines[i].trim_start().starts_with("| -") {
                i += 1;
            }
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                let cells = table_cells(lines[i]);
                out.push_str(".TP\n");
                out.push_str(&inline(cells.first().map_or("", String::as_str)));
                out.push('\n');
                let last = cells.len().saturating_sub(1);
                for (k, cell) in cells.iter().enumerate().skip(1) {
                    if k == last {
                        out.push_str(&inline(cell));
                        out.push('\n');
                    } else {
                        let label = header.get(k).map_or("", String::as_str);
                        out.push_str(&format!("{}: {}\n.br\n", inline(label), inline(cell)));
                    }
                }
                i += 1;
            }
        } else if let Some(item) = list_item(trimmed) {
            flush(&mut paragraph, &mut out);
            let (mark, text) = item;
            let mut body = vec![text.to_string()];
            i += 1;
            // Continuation lines are indented; a new item, a blank line or anything else ends it.
            while i < lines.len()
                && lines[i].starts_with("  ")
                && list_item(lines[i].trim_start()).is_none()
            {
                body.push(lines[i].trim().to_string());
                i += 1;
            }
            out.push_str(&format!(".IP {mark} 4\n{}\n", inline(&body.join(" "))));
        } else {
            paragraph.push(line.trim().to_string());
            i += 1;
        }
    }
    flush(&mut paragraph, &mut out);
    out
}

/// Upper case for a section heading, except inside code spans: `[review]` names a TOML table and
/// must keep its spelling.
fn heading_case(h: &str) -> String {
    h.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.to_uppercase()
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// A bullet (`- `) or numbered (`1. `) list item: its roff mark and its text.
fn list_item(line: &str) -> Option<(String, &str)> {
    if let Some(text) = line.strip_prefix("- ") {
        return Some(("\\(bu".to_string(), text));
    }
    let digits = line.find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
    if digits > 0 {
        if let Some(text) = line[digits..].strip_prefix(". ") {
            return Some((format!("{}.", &line[..digits]), text));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_markup() {
        let cases = [
            ("plain", "plain"),
            ("`--out` file", "\\fB\\-\\-out\\fR file"),
            ("**strong** and *soft*", "\\fBstrong\\fR and \\fIsoft\\fR"),
            ("`\"LC_*\"` prefix", "\\fB\"LC_*\"\\fR prefix"),
            ("a [link](https://x.test) here", "a link here"),
            (".starts with a dot", "\\&.starts with a dot"),
            ("back\\slash", "back\\eslash"),
        ];
        for (md, want) in cases {
            assert_eq!(inline(md), want, "{md}");
        }
    }

    #[test]
    fn tables_become_tagged_lists() {
        let md =
            "# T\n\n| key | type | meaning |\n| --- | --- | --- |\n| `a` | boolean | Does a. |\n";
        let page = markdown_page(md, "X", "5", "x \\- y");
        assert!(
            page.contains(".TP\n\\fBa\\fR\ntype: boolean\n.br\nDoes a.\n"),
            "{page}"
        );
    }

    #[test]
    fn lists_and_code() {
        let md = "# T\n\n- one\n  more\n- two\n\n```\n.x\n```\n";
        let page = markdown_page(md, "X", "5", "x");
        assert!(
            page.contains(".IP \\(bu 4\none more\n.IP \\(bu 4\ntwo\n"),
            "{page}"
        );
        assert!(page.contains(".nf\n\\&.x\n.fi\n"), "{page}");
    }
}

//! Package installers a sandboxed server starts at run time (issue 33): `npm install`, `pip
//! install`, `uv pip install`, `npx PKG` … started by the server (mcp-server-fetch's markdown
//! mode runs readabilipy, which runs `npm install` into its own package folder at its first
//! call). Under a sandbox that grants neither port 443 nor 80 such an install can only wait
//! for the registry: npm retries for more than a minute, so the host's call hangs until it times out
//! and nothing says why.
//!
//! This module owns recognising an installer from the program and arguments of an `execve`
//! (which `sandbox::observe` reads from the server's memory) and the wording of what the person
//! is told. The observer refuses an *install* at once with `EACCES` when the run cannot reach a
//! registry (`observe::Grants::registry_unreachable`; the call then fails fast, with this explanation at the default level), and only names
//! a package *runner* (`npx`, `uvx`), which works offline from its cache when the package is
//! there. The refusal is safe to make on a value read with the time-of-check gap of seccomp
//! user notification: a server that races it can only turn the refusal into `CONTINUE`, which
//! leaves the exec to the sandbox's own rules, as before this module existed.

use std::path::Path;

/// What an exec was recognised as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installer {
    /// The program and its subcommand, as shown to the person: `npm install`, `pip install`,
    /// `npx`. The packages and options are never shown (an index URL can hold a token).
    pub shown: String,
    /// The registry it reaches, as a destination for `--sandbox-connect`.
    pub registry: &'static str,
    /// An install (refused when no registry is reachable), rather than a package runner.
    pub installs: bool,
}

const NPM: &str = "registry.npmjs.org:443";
const PYPI: &str = "pypi.org:443";

/// The base name of a program without a version suffix: `python3.11` → `python`, `pip3` →
/// `pip`.
fn base(program: &str) -> &str {
    let name = Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program);
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
}

/// Recognises an installer from the path an exec names and its argument vector.
pub fn recognise(path: &str, argv: &[String]) -> Option<Installer> {
    let mut name = base(if path.is_empty() {
        argv.first().map_or("", String::as_str)
    } else {
        path
    })
    .to_string();
    let mut rest: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    // `node …/npm-cli.js install`, `python -m pip install`: the interpreter runs the installer.
    if name == "node" && rest.first().is_some_and(|a| base(a) == "npm-cli.js") {
        name = "npm".into();
        rest.remove(0);
    } else if name == "python" && rest.first() == Some(&"-m") && rest.len() > 1 {
        name = rest[1].to_string();
        rest.drain(..2);
    }
    let words: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    let first = words.first().copied();
    let install = |registry| {
        Some(Installer {
            shown: format!("{name} {}", first.unwrap_or("install")),
            registry,
            installs: true,
        })
    };
    let runner = |registry| {
        Some(Installer {
            shown: name.clone(),
            registry,
            installs: false,
        })
    };
    match name.as_str() {
        "npm" | "pnpm" | "bun" if matches!(first, Some("install" | "i" | "ci" | "add" | "in")) => {
            install(NPM)
        }
        // `yarn` with no command installs the project's dependencies.
        "yarn" if matches!(first, None | Some("install" | "add")) => install(NPM),
        "pip" if first == Some("install") => install(PYPI),
        "uv" => match words.as_slice() {
            ["pip", "install", ..] | ["tool", "install", ..] => Some(Installer {
                shown: format!("uv {} install", words[0]),
                registry: PYPI,
                installs: true,
            }),
            ["add", ..] | ["sync", ..] => install(PYPI),
            _ => None,
        },
        "pipx" if first == Some("install") => install(PYPI),
        "npx" | "pnpx" | "bunx" => runner(NPM),
        "uvx" => runner(PYPI),
        _ => None,
    }
}

impl Installer {
    /// The line said when the install was refused (`pid` is the process that tried it).
    pub fn refused(&self, pid: u32) -> String {
        let shown = &self.shown;
        let registry = self.registry;
        format!(
            "sandbox refused `{shown}`, which the server started at run time (process {pid}): an install needs the package registry, which this sandbox does not let the server reach (port 443 is not granted), so it could only wait for the network until the call timed out; the exec failed at once (EACCES) instead, and so does the call that needed it. \
             Install what the server needs before wrapping it, or use the server's option that needs no install (mcp-server-fetch: `raw: true`); to let the install try the registry under the sandbox's other rules, grant it: --sandbox-connect {registry} (sandbox.connect = [\"{registry}\"], with sandbox.allow_udp = true for the name's DNS)"
        )
    }

    /// The line said when a package runner started (not refused: it runs from its cache).
    pub fn named(&self, pid: u32) -> String {
        let shown = &self.shown;
        let registry = self.registry;
        format!(
            "the server started `{shown}` at run time (process {pid}): it runs a package from its cache, and when the package is not there it asks the registry, which this sandbox does not let the server reach; if the call hangs until it times out, that is why. Install the package before wrapping the server, or grant the registry: --sandbox-connect {registry} (sandbox.connect in the policy)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(path: &str, argv: &[&str]) -> Option<Installer> {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        recognise(path, &argv)
    }

    #[test]
    fn installs_are_recognised_without_their_packages() {
        let npm = r(
            "/usr/bin/npm",
            &["npm", "install", "--no-audit", "left-pad"],
        )
        .unwrap();
        assert_eq!(
            (npm.shown.as_str(), npm.registry, npm.installs),
            ("npm install", NPM, true)
        );
        assert_eq!(r("/usr/bin/npm", &["npm", "ci"]).unwrap().shown, "npm ci");
        assert_eq!(r("/usr/bin/yarn", &["yarn"]).unwrap().shown, "yarn install");
        let pip = r("/v/bin/pip3.11", &["pip3.11", "install", "x"]).unwrap();
        assert_eq!((pip.shown.as_str(), pip.registry), ("pip install", PYPI));
        let m = r(
            "/usr/bin/python3",
            &["python3", "-m", "pip", "install", "-q", "x"],
        );
        assert_eq!(m.unwrap().shown, "pip install");
        let cli = r(
            "/usr/bin/node",
            &["node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "i", "x"],
        );
        assert_eq!(cli.unwrap().shown, "npm i");
        assert_eq!(
            r("/bin/uv", &["uv", "pip", "install", "x"]).unwrap().shown,
            "uv pip install"
        );
        assert!(r("/bin/uv", &["uv", "sync"]).unwrap().installs);
        let npx = r("/usr/bin/npx", &["npx", "-y", "pkg"]).unwrap();
        assert!(!npx.installs);
        assert!(!r("/bin/uvx", &["uvx", "pkg"]).unwrap().installs);
        // Not installs: npm asked for its version, a plain node or python, other programs.
        assert_eq!(r("/usr/bin/npm", &["npm", "version"]), None);
        assert_eq!(r("/usr/bin/node", &["node", "ExtractArticle.js"]), None);
        assert_eq!(r("/usr/bin/python3", &["python3", "-c", "print(1)"]), None);
        assert_eq!(r("/bin/uv", &["uv", "run", "x"]), None);
        assert_eq!(r("/bin/sh", &["sh", "-c", "npm install"]), None);
        // An exec by descriptor (execveat with an empty path) is named by argv[0].
        assert!(r("", &["pip", "install", "x"]).unwrap().installs);
    }

    #[test]
    fn the_lines_name_the_flag_and_never_the_packages() {
        let i = r(
            "/usr/bin/pip",
            &[
                "pip",
                "install",
                "--index-url",
                "https://u:tok@x/simple",
                "p",
            ],
        )
        .unwrap();
        let line = i.refused(7);
        assert!(
            line.contains("`pip install`")
                && line.contains("--sandbox-connect pypi.org:443")
                && line.contains("EACCES")
                && !line.contains("tok"),
            "{line}"
        );
    }
}

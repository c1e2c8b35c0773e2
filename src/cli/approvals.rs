//! `mcpguard approvals`: the terminal confirmation channel. `list` shows what every running
//! mcpguard of this user holds for a person's approval, `approve` and `deny` answer one, `watch`
//! asks about each as it arrives. The talking is `approvals::client`'s; this file only words it.

// This module's `unsafe`: the terminal's echo switched off for a typed answer (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::io::Write;
use std::time::Duration;

use serde_json::{json, Value};

use crate::approvals::client;
use crate::cli::commands::CmdResult;
use crate::cli::flags::ApprovalsCommand;

pub fn run(cmd: &ApprovalsCommand) -> CmdResult {
    match cmd {
        ApprovalsCommand::List { json } => list(*json),
        ApprovalsCommand::Approve { id, scope } => answer(id, true, scope),
        ApprovalsCommand::Deny { id } => answer(id, false, "once"),
        ApprovalsCommand::Watch => watch(),
    }
}

fn pending() -> Result<(Vec<Value>, Vec<String>), String> {
    client::list_all().map_err(|e| e.to_string())
}

fn list(as_json: bool) -> CmdResult {
    let (items, problems) = pending()?;
    let mut stdout = std::io::stdout().lock();
    if as_json {
        let doc = json!({"pending": items, "problems": problems});
        writeln!(stdout, "{doc}").map_err(|e| e.to_string())?;
        return Ok(0);
    }
    for p in &problems {
        eprintln!("mcpguard: warning: {p}");
    }
    if items.is_empty() {
        writeln!(stdout, "No approvals are pending.").map_err(|e| e.to_string())?;
    }
    for item in &items {
        write!(stdout, "{}", block(item, false)).map_err(|e| e.to_string())?;
    }
    Ok(0)
}

/// One pending approval for the terminal: a heading with the id and the time left, the three
/// lines of the question, and (when asked for) the details.
fn block(item: &Value, details: bool) -> String {
    let s = |k: &str| item[k].as_str().unwrap_or_default().to_string();
    let left = item["expiresInMs"].as_u64().unwrap_or(0).div_ceil(1000);
    let mut text = format!(
        "Approval {}  {} / {}  ({left} s left)\n",
        s("id"),
        s("server"),
        s("tool")
    );
    for line in item["lines"].as_array().into_iter().flatten() {
        text.push_str(&format!("  {}\n", line.as_str().unwrap_or_default()));
    }
    let scopes: Vec<&str> = item["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| *s != "once")
        .collect();
    if !scopes.is_empty() {
        text.push_str(&format!(
            "  (may also be approved with --scope {})\n",
            scopes.join(" or --scope ")
        ));
    }
    if let Some(note) = item["hostNote"].as_str() {
        text.push_str(&format!("  (asked here because {note})\n"));
    }
    if details {
        for line in s("details").lines() {
            text.push_str(&format!("    {line}\n"));
        }
    }
    text
}

/// Whether a person could be typing this command: its standard input and error are a terminal.
/// This is a courtesy, not the protection (a program gives itself a terminal with `script`):
/// what approves is the person's authentication through polkit, which the proxy asks for.
fn at_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

const NOT_AT_TERMINAL: &str = "refusing to approve: `mcpguard approvals approve` and `watch` must be run by a person at a terminal (standard input and error a TTY), where the password prompt of the approval appears. Run it in a terminal, or answer the desktop notification; `mcpguard approvals deny ID` works anywhere";

fn answer(id: &str, approve: bool, scope: &str) -> CmdResult {
    if !approve {
        println!("{}", client::deny(id)?);
        return Ok(0);
    }
    if !at_terminal() {
        // Whether this user may see the approvals at all is said first (another user's
        // directory is refused with its owner), then why this one may not approve from here.
        pending()?;
        return Err(NOT_AT_TERMINAL.into());
    }
    let said = authenticate(id, scope)?;
    println!("{said}");
    Ok(0)
}

/// Approval `id`, approved only through the person's authentication: the question is shown
/// first, so the password prompt that follows stands for this call.
fn authenticate(id: &str, scope: &str) -> Result<String, String> {
    if let Ok((items, _)) = pending() {
        if let Some(item) = items.iter().find(|i| i["id"] == id) {
            eprint!("{}", block(item, false));
        }
    }
    eprintln!(
        "mcpguard: to approve {id}, authenticate as yourself (polkit asks for your password)"
    );
    client::approve(id, scope, &mut |line| {
        if !line.is_empty() {
            eprintln!("mcpguard: {line}");
        }
    })
}

/// Discards what was typed before a question is shown (`TCIFLUSH`): an answer counts only when
/// it is typed after the person saw the question.
fn discard_type_ahead() {
    // SAFETY: tcflush on descriptor 0 has no memory preconditions; on a descriptor that is not
    // a terminal it fails harmlessly.
    unsafe {
        libc::tcflush(0, libc::TCIFLUSH);
    }
}

/// Waits for one typed line while `still_pending` holds (checked every 300 ms): `Ok(Some)` the
/// line, `Ok(None)` when the question ended first, `Err(())` at end of input.
fn read_answer(still_pending: impl Fn() -> bool) -> Result<Option<String>, ()> {
    loop {
        let mut pfd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 300) };
        if ready > 0 {
            let mut buf = [0u8; 256];
            // SAFETY: `buf` is valid for writes of its length. In canonical mode one read
            // returns one typed line.
            let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return Err(());
            }
            let n = usize::try_from(n).unwrap_or(0);
            return Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned()));
        }
        if !still_pending() {
            return Ok(None);
        }
    }
}

/// Asks about each approval as it appears, until standard input ends. Ids are never reused, so
/// an approval answered or skipped once is not asked about again. A question that ends while
/// it is shown (answered elsewhere, expired) is taken down.
fn watch() -> CmdResult {
    if !at_terminal() {
        return Err(NOT_AT_TERMINAL.into());
    }
    let mut seen = std::collections::HashSet::new();
    eprintln!("mcpguard: watching for approvals (end with Ctrl-D)");
    loop {
        let (items, _) = pending()?;
        for item in items {
            let id = item["id"].as_str().unwrap_or_default().to_string();
            if !seen.insert(id.clone()) {
                continue;
            }
            discard_type_ahead();
            // The question goes to the terminal (standard error), where the person is; what
            // was decided goes to standard output.
            eprint!(
                "{}approve {id}? [a]pprove (asks for your password), [d]eny, [s]kip: ",
                block(&item, true)
            );
            std::io::stderr().flush().map_err(|e| e.to_string())?;
            let still_pending = || {
                pending()
                    .map(|(items, _)| items.iter().any(|i| i["id"] == id.as_str()))
                    .unwrap_or(false)
            };
            let line = match read_answer(still_pending) {
                Ok(Some(line)) => line,
                Ok(None) => {
                    eprintln!(
                        "\n{id} is no longer pending (answered elsewhere, or its time ran out)"
                    );
                    continue;
                }
                Err(()) => {
                    eprintln!();
                    return Ok(0);
                }
            };
            let verdict = match line.trim() {
                "a" | "approve" | "y" | "yes" => Some(true),
                "d" | "deny" | "n" | "no" => Some(false),
                _ => None,
            };
            let said = match verdict {
                Some(true) => authenticate(&id, "once"),
                Some(false) => client::deny(&id),
                None => {
                    eprintln!("skipped {id}; it stays pending for the other channels");
                    continue;
                }
            };
            match said {
                Ok(said) => println!("{said}"),
                Err(e) => eprintln!("not answered: {e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

//! `mcpguard approvals`: the terminal confirmation channel. `list` shows what every running
//! mcpguard of this user holds for a person's approval, `approve` and `deny` answer one, `watch`
//! asks about each as it arrives. The talking is `approvals::client`'s; this file only words it.

use std::io::{BufRead, Write};
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
        "{}  {} / {}  ({left} s left)\n",
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
/// An agent's shell tool runs commands without one, so an approval from a program that has no
/// terminal is refused; a denial is never refused, since it can only stop a call.
fn at_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

const NOT_AT_TERMINAL: &str = "refusing to approve: `mcpguard approvals approve` and `watch` must be run by a person at a terminal (standard input and error a TTY), so that a program without one, such as an agent's shell tool, cannot approve its own call. Run it in a terminal, or answer the desktop notification; `mcpguard approvals deny ID` works anywhere";

fn answer(id: &str, approve: bool, scope: &str) -> CmdResult {
    if approve && !at_terminal() {
        // Whether this user may see the approvals at all is said first (another user's
        // directory is refused with its owner), then why this one may not approve from here.
        pending()?;
        return Err(NOT_AT_TERMINAL.into());
    }
    let said = client::answer(id, approve, scope)?;
    println!("{said}");
    Ok(0)
}

/// Asks about each approval as it appears, until standard input ends. Ids are never reused, so
/// an approval answered or skipped once is not asked about again.
fn watch() -> CmdResult {
    if !at_terminal() {
        return Err(NOT_AT_TERMINAL.into());
    }
    let mut seen = std::collections::HashSet::new();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    eprintln!("mcpguard: watching for approvals (end with Ctrl-D)");
    loop {
        let (items, _) = pending()?;
        for item in items {
            let id = item["id"].as_str().unwrap_or_default().to_string();
            if !seen.insert(id.clone()) {
                continue;
            }
            print!(
                "{}approve this call? [a]pprove, [d]eny, [s]kip: ",
                block(&item, true)
            );
            std::io::stdout().flush().map_err(|e| e.to_string())?;
            let mut line = String::new();
            if input.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                println!();
                return Ok(0);
            }
            let verdict = match line.trim() {
                "a" | "approve" | "y" | "yes" => Some(true),
                "d" | "deny" | "n" | "no" => Some(false),
                _ => None,
            };
            match verdict {
                Some(approve) => match client::answer(&id, approve, "once") {
                    Ok(said) => println!("{said}"),
                    Err(e) => println!("not answered: {e}"),
                },
                None => println!("skipped {id}; it stays pending for the other channels"),
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

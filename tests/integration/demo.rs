//! `mcpguard demo` runs the whole story on its bundled example server and checks every step
//! itself; here it must finish with its success line, with no colour when not on a terminal.

use std::process::Command;

use crate::support::{mcpguard, run_bounded};

#[test]
fn the_demo_runs_every_step_as_shown() {
    let out = run_bounded(Command::new(mcpguard()).arg("demo"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("The demo went as shown"), "{stdout}");
    for step in [
        "only the three reviewed tools are listed",
        "the unreviewed tool is refused",
        "waited for the person's approval",
        "the person declined never reached the server",
        "the sandbox kept a reviewed read away from a private file",
        "caught before dispatch",
        "only save_note was asked about",
        "[1/1] tool save_note",
        "input schema widened at /inputSchema/properties/body/maxLength: bound raised: 2000 -> 8000",
        "= 2 unchanged, review carried: lookup, read_file",
        "the longer note is saved",
        "the edited copy is caught",
    ] {
        assert!(stdout.contains(step), "missing step {step:?}:\n{stdout}");
    }
    assert!(!stdout.contains('\x1b'), "no colour codes off a terminal");
}

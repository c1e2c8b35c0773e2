# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_mcpguard_global_optspecs
    string join \n log-format= max-message-bytes= policy= audit-log= grace= manifest= sha256= server= sandbox-read= sandbox-write= sandbox-env= sandbox-connect= allow-unpinned dry-run h/help V/version
end

function __fish_mcpguard_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_mcpguard_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_mcpguard_using_subcommand
    set -l cmd (__fish_mcpguard_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c mcpguard -n "__fish_mcpguard_needs_command" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l max-message-bytes -d 'Largest accepted JSON-RPC message, in bytes, in either direction (default: the policy\'s limits.max_message_bytes, 16 MiB unless changed)' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l policy -d 'The local policy (TOML); without it the built-in default policy applies' -r -F
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l audit-log -d 'Append the hash-chained audit log here (overrides the policy\'s audit.path)' -r -F
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l grace -d 'How long to wait after closing the server\'s stdin before SIGTERM, and after SIGTERM before SIGKILL (e.g. 2s, 500ms)' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l manifest -d 'The reviewed snapshot to enforce (with --sha256 and --server)' -r -F
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l sha256 -d 'The digest the snapshot must have (`mcpguard hash FILE`); checked before the server starts' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l server -d 'Which server of the snapshot this is' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l allow-unpinned -d 'Without a snapshot, relay tools unpinned instead of serving none. Handshake ordering, capability blocking and error hygiene still apply'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -l dry-run -d 'Check, classify and (for writes) confirm calls exactly as usual, but never dispatch them: the host gets {dryRun, validatedInput, operationPolicy, operationSummary} instead'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -s V -l version -d 'Print version'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "canonicalize" -d 'Write the RFC 8785 canonical form of a JSON document to stdout'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "hash" -d 'Print the lowercase SHA-256 of a JSON document\'s RFC 8785 canonical form'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "capture" -d 'Capture a live server\'s tool catalogue into a new snapshot'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "review" -d 'Record a reviewer\'s assertions and input-channel classification for a tool'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "update" -d 'Capture a reviewed server again and write a new snapshot in which every tool that did not change (RFC 8785-identical) keeps its review and every changed or new tool is unreviewed; print what changed, tool by tool. On a terminal it then asks about the changed tools only. The old snapshot is kept as FILE.prev; the new digest is printed'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "show" -d 'The reviewer\'s view: every field the model will see, hidden characters made visible'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "check" -d 'Validate a snapshot offline and, with a server command, against the live server'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "diff" -d 'The semantic difference between two snapshots (exit 1 when they differ)'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "policy" -d 'Work with local policy files'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "audit" -d 'Work with audit logs'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "approvals" -d 'List and answer the writes your running mcpguard processes hold for a person\'s approval (the terminal confirmation channel; see `[confirmation] channels`)'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "lock" -d 'Work with a team\'s lock file (mcpguard.lock): servers, launch commands, reviewed snapshots and their digests, package pins'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "demo" -d 'Show the whole story on a bundled example server, with no set-up: capture, review, a guarded call, an unreviewed tool refused, a write held for the person\'s approval, the sandbox, a rug pull caught before dispatch, and the audit log verified'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "wrap" -d 'Rewrite a host\'s MCP configuration (Claude Desktop, Claude Code, Cursor, VS Code, Zed, Gemini CLI, Windsurf, Codex, fast-agent, Goose) so that every local server runs under mcpguard, changing only each wrapped entry\'s command and arguments (comments and layout are kept). A wrapped server refuses to start until its snapshot is captured, reviewed and pinned (`wrap --pin`). Keeps a backup; idempotent'
complete -c mcpguard -n "__fish_mcpguard_needs_command" -a "sandbox-check" -d 'Show the kernel\'s Landlock ABI, what the policy\'s sandbox asks and what this kernel will enforce; with a command, run it under that sandbox (stdio inherited, its exit status becomes mcpguard\'s). Exit 1 when sandbox.mode = "require" would refuse to start'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand canonicalize" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand canonicalize" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand hash" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand hash" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l server -d 'Symbolic key of the server in the snapshot (the host config names it with --server)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l out -d 'The snapshot file to write' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l expires-in -d 'How long the snapshot stays valid (at most the policy\'s maximum, 30 days by default)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l protocol-version -d 'The protocol version to capture at: up to 2025-11-25 through the initialize handshake, 2026-07-28 through server/discover and per-request envelopes' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l policy -d 'The local policy whose sandbox the server is captured in (default: the built-in policy), so that an untrusted server is confined from its very first run' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l build-from-source -d 'A PyPI package (a dependency of a `uvx` server) that is built from its source distribution (even when it also publishes a wheel), for packages that publish none. Building runs the package\'s own build script outside the sandbox with your rights, so each such package is named by you; every other package is installed from wheels only. Recorded in the snapshot\'s package record (`builtFromSource`), but never carried over: give it again to every later `update` (a new release\'s build is new code)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l timeout -d 'How long to wait for each answer of the server' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l max-pages -d 'The most tools/list pages followed before giving up' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l max-message-bytes -d 'Largest accepted message from the server, in bytes' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -l force -d 'Replace FILE if it exists (its reviews are lost)'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand capture" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l server -d 'The server of the snapshot (needed only when it has several)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l tool -d 'The tool reviewed (or use --from for many tools at once). On a terminal, without --assert, --channel and --side-effect, the questions are asked one at a time: about this tool (its current review giving the defaults), or without --tool about every unreviewed tool' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l reviewer -d 'Who reviewed (an e-mail address or another stable identity)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l assert -d 'An assertion: headless, independentCalls, modelBacked, referenceBasedIO = true|false; sideEffects = comma list (empty for none); concurrency = safe|serialize' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l channel -d 'An input channel: an RFC 6901 pointer into the arguments = data|instruction|authority' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l side-effect -d 'What the tool does, in seed 004\'s operation classes: read, create, update or delete (recorded as the review\'s sideEffect). With `[writes] trust_reviews` (the default) the policy classifies the tool by it; anything but read is a write, and a read with an authority channel is a write too' -r -f -a "read\t''
create\t''
update\t''
delete\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l reviewed-at -d 'The review time (RFC 3339); now by default' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l from -d 'A file of reviews to record at once: the TOML that --template writes (edited), or JSON {tool: {reviewer?, sideEffect?, assertions, inputChannels}}; a top-level reviewer string applies to every tool. Every review is checked; one bad review records nothing' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l sign -d 'Sign each recorded review with this SSH private key (Ed25519, without a passphrase; SSH signature format, namespace mcpguard-review). The signature covers the Tool object, the server entry (identity, package record, instructions, capabilities) and the review, and is stored in the review' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l signature -d 'Add a signature made elsewhere (`ssh-keygen -Y sign` over --signed-data) to the existing review of --tool; it is checked before it is recorded' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l template -d 'Record nothing: write to stdout a TOML review of every unreviewed tool with each answer proposed (from the tool\'s name, annotations, argument names and formats) and a comment saying where it came from; edit it, then record it with --from. Answers that rest on the server\'s own claims are marked `!!`, and a class the server\'s claims contradict is left for you to write'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -l signed-data -d 'Record nothing: write the bytes that a signature of the existing review of --tool covers to stdout, for `ssh-keygen -Y sign -n mcpguard-review`'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand review" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l server -d 'Which server of the snapshot the command runs (needed when there are several)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l config -d 'A host configuration written by `mcpguard wrap`: pin the new digest into the entry that uses FILE, atomically and with a backup, as `wrap --pin` does' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l expires-in -d 'How long the new snapshot stays valid (default: as long as the old one was, at most the policy\'s maximum)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l reviewer -d 'Who reviews the changed tools on a terminal (asked when not given)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l policy -d 'The local policy whose sandbox the server runs in (default: the built-in policy)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l build-from-source -d 'A PyPI package (a dependency of a `uvx` server) that is built from its source distribution (even when it also publishes a wheel), for packages that publish none. Building runs the package\'s own build script outside the sandbox with your rights, so each such package is named by you; every other package is installed from wheels only. Recorded in the snapshot\'s package record (`builtFromSource`), but never carried over: give it again to every later `update` (a new release\'s build is new code)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l timeout -d 'How long to wait for each answer of the server' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l max-pages -d 'The most tools/list pages followed before giving up' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l max-message-bytes -d 'Largest accepted message from the server, in bytes' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -l yes -d 'Never ask: carry the reviews of identical tools and leave the rest unreviewed (what happens anyway without a terminal)'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand update" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -l server -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -l tool -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -l policy -d 'Check review signatures against this policy\'s review.allowed_signers (default: the built-in policy, which names none)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -l report -d 'Print the content-trust report instead: each reviewed tool\'s input-channel map and the value capability of each output location (free_text, constrained_scalar, composite, unknown)'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand show" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l sha256 -d 'The digest the snapshot must have' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l server -d 'Which server of the snapshot the command runs (needed when there are several)' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l policy -d 'Judge the reviews by this local policy (default: the built-in policy)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l timeout -d 'How long to wait for each answer of the server' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l max-pages -d 'The most tools/list pages followed before giving up' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l max-message-bytes -d 'Largest accepted message from the server, in bytes' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand check" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand diff" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand diff" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand policy; and not __fish_seen_subcommand_from check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand policy; and not __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand policy; and not __fish_seen_subcommand_from check" -f -a "check" -d 'Validate a policy file and print the effective policy (every default filled in), layered over the managed floor (/etc/mcpguard/policy.toml, or $MCPGUARD_SYSTEM_POLICY where that does not exist), with the file and line each value came from. Without FILE: the floor alone, or the built-in default'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand policy; and __fish_seen_subcommand_from check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand policy; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand audit; and not __fish_seen_subcommand_from verify" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand audit; and not __fish_seen_subcommand_from verify" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand audit; and not __fish_seen_subcommand_from verify" -f -a "verify" -d 'Verify an audit log\'s hash chain; names the first edited, removed or reordered line'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand audit; and __fish_seen_subcommand_from verify" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand audit; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -f -a "list" -d 'Show each pending approval: its id, the server and tool, the readable argument summary and the time left'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -f -a "approve" -d 'Approve the one call waiting under ID; it then goes on (after the usual live check). Only at a terminal: a program without one (an agent\'s shell tool) cannot approve'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -f -a "deny" -d 'Refuse the one call waiting under ID; it never reaches the server'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and not __fish_seen_subcommand_from list approve deny watch" -f -a "watch" -d 'Ask about each approval as it arrives (a for approve, d for deny, s to skip) until standard input ends. Only at a terminal'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from list" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from list" -l json -d 'Print one JSON document (`{"pending": [...], "problems": [...]}`) instead of text'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from approve" -l scope -d 'What the approval covers: `once` (this call), `identical` (identical calls, same tool and arguments, for `confirmation.identical_for`) or `tool` (every call of the tool until that mcpguard ends). The policy must allow a standing one (`confirmation.allow_identical`, `allow_tool_for_session`); otherwise it is this call only, and the answer says so' -r -f -a "once\t''
identical\t''
tool\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from approve" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from approve" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from deny" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from deny" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from watch" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand approvals; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and not __fish_seen_subcommand_from add check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and not __fish_seen_subcommand_from add check" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and not __fish_seen_subcommand_from add check" -f -a "add" -d 'Add a server to the lock file, or replace its entry: the launch command, the reviewed snapshot and its digest (computed now), and optionally the package pin, the policy and sandbox grants. The file is rewritten (comments are not kept); run `lock check` after'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and not __fish_seen_subcommand_from add check" -f -a "check" -d 'Run every server of the lock live under the sandbox and compare it with its reviewed snapshot: current, drifted (with the difference) or failed. Exit 0 when all are current, 1 when some drifted, 2 when some failed or the lock file is unusable'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l snapshot -d 'The reviewed snapshot of this server' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l lock -d 'The lock file (default: mcpguard.lock in the current directory; created if missing)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l package -d 'The package and version the command runs: npm:NAME@VERSION or pypi:NAME==VERSION (then the command must name it exactly), or any other SCHEME:TEXT to record' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l policy -d 'The policy this server runs under' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from check" -l format -d 'The report on stdout: text lines, one JSON object, or JUnit XML for CI' -r -f -a "text\t''
json\t''
junit\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from check" -l timeout -d 'How long to wait for each answer of a server' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand lock; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand demo" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand demo" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l snapshot-dir -d 'Where the wrapped servers\' snapshots live (default: a folder per host configuration, $XDG_CONFIG_HOME/mcpguard/snapshots/STEM-HASH, else under ~/.config, so that two host configurations with a server of the same name never share a snapshot; a DIR given here is used as it is, so give each host configuration its own)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l mcpguard -d 'The mcpguard the host should run (default: this executable)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l policy -d 'A policy file every wrapped server is started with (--policy)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l entry -d 'The server the sandbox options below are for (needed when the configuration has more than one local server). On an entry already wrapped, they are added to its mcpguard options' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l from-lock -d 'Instead of wrapping: write an entry for every server of this lock file, pinned to the lock\'s snapshot and digest (entries of the same name are replaced, others kept)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l dry-run -d 'Print the changes as a diff and write nothing'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l pin -d 'Instead of wrapping: pin the digest of each wrapped server\'s reviewed snapshot'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -l yes -d 'Apply the grants wrap proposes without asking: each existing path in a server\'s arguments or `env` values, read-write when its flag or variable names data (db, data, dir, storage, ...), else read-only. Without it wrap asks on a terminal, and otherwise prints the proposal and the command that applies it'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand wrap" -s h -l help -d 'Print help'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l policy -d 'The local policy (default: the built-in policy)' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l sandbox-read -d 'Let the server read PATH (a file, or a directory and everything beneath it). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l sandbox-write -d 'Let the server read, write, create and remove under PATH (for example the one directory a filesystem server is given). Repeatable' -r -F
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l sandbox-env -d 'Pass the environment variable NAME to the server (by exact name; its value is never logged), on top of the policy\'s sandbox.env. `mcpguard wrap` writes one for each variable a host configuration sets for the server. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l sandbox-connect -d 'Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432, localhost:8080, [::1]:80), on top of the policy\'s sandbox.connect. Address and port are enforced: mcpguard makes each connect to that port itself, to that address only (a host name: the addresses mcpguard\'s resolver gives for it). Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l call -d 'With --learn: call tool NAME with the JSON object ARGUMENTS. Repeatable' -r
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l log-format -d 'Diagnostics on stderr as text lines or as one JSON object per line (levels from MCPGUARD_LOG=error|warn|info|debug)' -r -f -a "text\t''
json\t''"
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -l learn -d 'Run the command as an MCP server under the sandbox: initialize it, list its tools, make the calls --call names, then print the grants the sandbox refused it (as --sandbox-read/--sandbox-write/--sandbox-connect flags and as a policy)'
complete -c mcpguard -n "__fish_mcpguard_using_subcommand sandbox-check" -s h -l help -d 'Print help'

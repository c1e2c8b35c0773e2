//! The binary edge: parse the command line, run, and turn the outcome into an exit status.

use std::process::ExitCode;

use clap::Parser;
use mcpguard::cli::commands;
use mcpguard::cli::flags::{AuditCommand, Cli, Command, LiveArgs, LockCommand, PolicyCommand};
use mcpguard::gate::session::Mode;
use mcpguard::policy;
use mcpguard::process::capture::Limits;
use mcpguard::process::diag;
use mcpguard::process::proxy::{self, Outcome};
use mcpguard::protocol::Level;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The proxy's stderr is read by hosts, a subcommand's by a person (see `init_from_env`).
    diag::init_from_env(if cli.command.is_some() {
        Level::Info
    } else {
        Level::Warn
    });
    diag::set_json(cli.log_format == mcpguard::cli::flags::LogFormat::Json);
    match cli.command {
        Some(cmd) => run_command(cmd),
        None => run_proxy(cli.proxy),
    }
}

fn extra(grants: &mcpguard::cli::flags::SandboxGrants) -> mcpguard::sandbox::Extra {
    mcpguard::sandbox::Extra {
        read: grants.read.clone(),
        read_write: grants.write.clone(),
        env: grants.env.clone(),
        connect: grants.connect.clone(),
    }
}

/// Holds the per-run grant flags (`--sandbox-read/-write/-env/-connect`) to the managed floor.
/// The policy loaded before, so loading it again succeeds.
fn held_to_floor(
    policy_file: Option<&std::path::Path>,
    grants: &mcpguard::cli::flags::SandboxGrants,
) -> Result<(), String> {
    if grants.read.is_empty()
        && grants.write.is_empty()
        && grants.env.is_empty()
        && grants.connect.is_empty()
    {
        return Ok(());
    }
    let layered = policy::load_layered(policy_file).map_err(|e| e.to_string())?;
    layered
        .check_overrides(None, None, &grants.read, &grants.write, &grants.env)
        .and_then(|()| layered.check_connect(&grants.connect))
}

/// Prepares the sandbox of the server, or says why it will not start. `Ok(None)` when the
/// policy turns the sandbox off. `missing` reports a server program that cannot be found: the
/// proxy exits the way a shell would (127, 126), `capture` and `check` with their own failure.
fn sandbox_for(
    policy: &policy::Policy,
    policy_file: Option<&std::path::Path>,
    command: &[std::ffi::OsString],
    grants: &mcpguard::cli::flags::SandboxGrants,
    missing: impl FnOnce(mcpguard::process::child::SpawnError) -> ExitCode,
) -> Result<Option<mcpguard::sandbox::Setup>, ExitCode> {
    use mcpguard::sandbox;
    // The per-run grants are held to the managed floor here too (capture, check, lock check),
    // not only in the proxy. (The policy's own `sandbox.connect` was held to it when it loaded.)
    held_to_floor(policy_file, grants)
        .map_err(|why| fail(&format!("refusing to start the server: {why}")))?;
    if policy.sandbox.mode == policy::SandboxMode::Off {
        return Ok(None);
    }
    let program = mcpguard::process::child::resolve_program(command).map_err(missing)?;
    if let Some(runtime) = sandbox::container_runtime(&program) {
        // The server runs in a container the daemon starts, outside mcpguard's reach: under
        // `require` that is refused, under `best-effort` the gate still applies and the
        // container's own isolation is all the confinement there is.
        let why = format!(
            "the server command runs {runtime}, which asks the {runtime} daemon to start the server in a container; \
             the daemon is outside any sandbox mcpguard can apply, so Landlock and seccomp would confine only the {runtime} client"
        );
        if policy.sandbox.mode == policy::SandboxMode::Require {
            return Err(fail(&format!(
                "refusing to start the server: {why}. Set sandbox.mode = \"best-effort\" in the policy (--policy) to run it gated but confined only by the container, or run the server without a container"
            )));
        }
        diag::emit(
            Level::Warn,
            &format!("sandbox (best-effort): NOT applied: {why}; the gate still applies, and the container's own isolation is the only confinement"),
        );
        return Ok(None);
    }
    let kernel = sandbox::Kernel::probe();
    let setup = sandbox::setup(
        &policy.sandbox,
        policy_file,
        &program,
        &command[1..],
        &extra(grants),
        &kernel,
    )
    .map_err(|e| fail(&format!("refusing to start the server: {}", e.0)))?;
    if let Some(s) = &setup {
        let report = &s.prepared.report;
        for line in report.dropped() {
            if let sandbox::Status::Dropped(why) = &line.status {
                diag::emit(
                    Level::Warn,
                    &format!("sandbox (best-effort): NOT enforced: {} ({why})", line.rule),
                );
            }
        }
        // Not a dropped rule (require mode still starts), but a weaker sandbox than the default
        // one, which the person should hear about without running sandbox-check.
        if let Err(why) = &kernel.namespaces {
            diag::emit(
                Level::Warn,
                &format!("sandbox: no PID or mount namespace for this user ({why}): a descendant that calls setsid() can outlive the server, and metadata changes and ld.so of writable files stay possible; `mcpguard sandbox-check` lists every residual risk"),
            );
        }
        diag::emit(Level::Info, &report.summary());
        // Which variables reach the server, by name (never values), so that a person can see
        // that a host's `env` arrived: read from the environment the server is given.
        let names: Vec<String> = s
            .prepared
            .env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        let names = if names.is_empty() {
            "nothing".to_string()
        } else {
            names.join(", ")
        };
        diag::emit(Level::Info, &format!("sandbox: passed: {names}"));
        // A variable set for this server (a host configuration's `env`) that the allowlist
        // withheld is named at the default level: otherwise the server fails in ways that do
        // not point here (the memory server answering from an empty graph).
        let ours: Vec<_> = std::env::vars_os().collect();
        let parent = sandbox::parent_environment();
        let withheld: Vec<String> =
            sandbox::withheld_notable(&ours, &s.prepared.env, parent.as_deref())
                .iter()
                .map(|n| mcpguard::wire::sanitize::clean(n, mcpguard::wire::sanitize::Clean::LINE))
                .collect();
        if !withheld.is_empty() {
            let flags: Vec<String> = withheld
                .iter()
                .map(|n| format!("--sandbox-env {n}"))
                .collect();
            diag::emit(
                Level::Warn,
                &format!(
                    "sandbox: withheld from the server {} variable(s) set for it in mcpguard's environment (a host configuration's `env`?): {}. The sandbox passes only sandbox.env; pass each the server needs with {} (or list it in sandbox.env)",
                    withheld.len(),
                    withheld.join(", "),
                    flags.join(" ")
                ),
            );
        }
        if diag::enabled(Level::Debug) {
            for line in report.text().lines() {
                diag::emit(Level::Debug, line);
            }
        }
    }
    Ok(setup)
}

fn run_command(cmd: Command) -> ExitCode {
    // The policy's `limits.max_pages` bounds every live walk, not only the proxy's: a flag can
    // lower it for one run but never raise it past what the policy allows.
    let limits = |live: &LiveArgs, p: &policy::Policy| Limits {
        max_pages: live.max_pages.min(p.limits.max_pages),
        ..Limits::default()
    };
    let result = match &cmd {
        Command::Canonicalize { file } => commands::canonicalize(file.as_deref()),
        Command::Hash { file } => commands::hash(file),
        Command::Capture {
            server,
            out,
            expires_in,
            protocol_version,
            force,
            policy,
            build_from_source,
            live,
            server_command,
        } => {
            // A package runner is resolved and pinned first, outside the sandbox; what runs
            // under the sandbox is the install.
            let (server_command, package) =
                match pinned_for_capture(server_command, build_from_source, "capture") {
                    Ok(c) => c,
                    Err(code) => return code,
                };
            let server_command = &server_command;
            // A server that cannot be found is a capture failure (exit 1) like any other.
            let (p, setup) = match load_policy(policy.as_deref())
                .map_err(|e| fail(&e))
                .and_then(|p| {
                    let s =
                        sandbox_for(&p, policy.as_deref(), server_command, &live.grants, |e| {
                            fail(&format!("capture failed: {e}"))
                        })?;
                    Ok((p, s))
                }) {
                Ok(s) => s,
                Err(code) => return code,
            };
            commands::capture(commands::CaptureArgs {
                server,
                out,
                expires_in: *expires_in,
                max_validity: p.review.max_validity,
                protocol_version,
                force: *force,
                limits: limits(live, &p),
                timeout: live.timeout,
                max_message_bytes: live.max_message_bytes,
                command: server_command,
                package,
                sandbox: setup.as_ref().map(|s| s.prepared.clone()),
            })
        }
        Command::Review {
            file,
            server,
            reviewer,
            template: true,
            ..
        } => {
            let server = match commands::review_server(file, server.as_deref()) {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            match mcpguard::cli::template::render(file, &server, reviewer.as_deref()) {
                Ok((text, summary)) => {
                    print!("{text}");
                    eprintln!("{summary}");
                    Ok(0)
                }
                Err(e) => Err(e),
            }
        }
        Command::Review {
            file,
            server,
            tool,
            reviewer,
            asserts,
            channels,
            side_effect,
            reviewed_at,
            from,
            sign,
            signed_data,
            signature,
            ..
        } if from.is_none()
            && sign.is_none()
            && !*signed_data
            && signature.is_none()
            && asserts.is_empty()
            && channels.is_empty()
            && side_effect.is_none()
            && reviewed_at.is_none()
            && std::io::IsTerminal::is_terminal(&std::io::stdin())
            && std::io::IsTerminal::is_terminal(&std::io::stderr()) =>
        {
            let server = match commands::review_server(file, server.as_deref()) {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            mcpguard::cli::interactive::review_unreviewed(
                file,
                &server,
                tool.as_deref(),
                reviewer.as_deref(),
            )
        }
        Command::Review {
            file,
            server,
            tool,
            reviewer,
            asserts,
            channels,
            side_effect,
            reviewed_at,
            from,
            sign,
            signed_data,
            signature,
            ..
        } => match commands::review_server(file, server.as_deref()) {
            Err(e) => Err(e),
            Ok(server) => {
                let server = &server;
                match (tool, signed_data, signature) {
                    (Some(tool), true, _) => {
                        mcpguard::cli::signed::print_signed_data(file, server, tool)
                    }
                    (Some(tool), _, Some(sig)) => {
                        mcpguard::cli::signed::attach_signature(file, server, tool, sig)
                    }
                    _ => commands::review(commands::ReviewArgs {
                        file,
                        server,
                        tool: tool.as_deref(),
                        reviewer: reviewer.as_deref(),
                        asserts,
                        channels,
                        side_effect: side_effect.as_deref(),
                        reviewed_at: reviewed_at.as_deref(),
                        from: from.as_deref(),
                        sign: sign.as_deref(),
                    }),
                }
            }
        },
        Command::Show {
            file,
            server,
            report: true,
            ..
        } => commands::trust_report(file, server.as_deref()),
        Command::Show {
            file,
            server,
            tool,
            policy,
            ..
        } => {
            let signers = match load_policy(policy.as_deref())
                .and_then(|p| mcpguard::cli::signed::allowed_signers(&p))
            {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            commands::show(file, server.as_deref(), tool.as_deref(), signers.as_ref())
        }
        Command::Check {
            file,
            sha256,
            server,
            policy,
            live,
            server_command,
        } => {
            let p = match load_policy(policy.as_deref()) {
                Ok(p) => p,
                Err(e) => return fail(&e),
            };
            // A live check runs a pinned package's install, as the proxy would.
            // Its package record is compared with the snapshot's (issue 32).
            let (server_command, package) = match server.as_deref() {
                Some(key) if !server_command.is_empty() => {
                    match mcpguard::cli::launch::for_check(server_command, file, key) {
                        Ok(c) => c,
                        Err(e) => return fail(&format!("live check failed: {e}")),
                    }
                }
                _ => (server_command.clone(), None),
            };
            let server_command = &server_command;
            // Offline checks start nothing; a live check runs the server sandboxed.
            let setup = if server_command.is_empty() {
                None
            } else {
                match sandbox_for(&p, policy.as_deref(), server_command, &live.grants, |e| {
                    fail(&format!("live check failed: {e}"))
                }) {
                    Ok(s) => s,
                    Err(code) => return code,
                }
            };
            let signers = match mcpguard::cli::signed::allowed_signers(&p) {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            commands::check(commands::CheckArgs {
                acceptance: acceptance(&p),
                signers,
                file,
                sha256: sha256.as_deref(),
                server: server.as_deref(),
                command: server_command,
                timeout: live.timeout,
                max_message_bytes: live.max_message_bytes,
                limits: limits(live, &p),
                sandbox: setup.as_ref().map(|s| s.prepared.clone()),
                package,
            })
        }
        Command::Update {
            file,
            server,
            yes,
            config,
            expires_in,
            reviewer,
            policy,
            build_from_source,
            live,
            server_command,
        } => {
            // A package runner is resolved again, so that a new release gets in only here.
            let (server_command, package) =
                match pinned_for_capture(server_command, build_from_source, "update") {
                    Ok(c) => c,
                    Err(code) => return code,
                };
            let server_command = &server_command;
            let (p, setup) = match load_policy(policy.as_deref())
                .map_err(|e| fail(&e))
                .and_then(|p| {
                    let s =
                        sandbox_for(&p, policy.as_deref(), server_command, &live.grants, |e| {
                            fail(&format!("update failed: {e}"))
                        })?;
                    Ok((p, s))
                }) {
                Ok(s) => s,
                Err(code) => return code,
            };
            mcpguard::cli::update::run(mcpguard::cli::update::UpdateArgs {
                file,
                server: server.as_deref(),
                yes: *yes,
                config: config.as_deref(),
                expires_in: *expires_in,
                reviewer: reviewer.as_deref(),
                acceptance: acceptance(&p),
                limits: limits(live, &p),
                timeout: live.timeout,
                max_message_bytes: live.max_message_bytes,
                command: server_command,
                package,
                sandbox: setup.as_ref().map(|s| s.prepared.clone()),
            })
        }
        Command::Diff { old, new } => commands::diff(old, new),
        Command::Policy(PolicyCommand::Check { file }) => commands::policy_check(file.as_deref()),
        Command::Audit(AuditCommand::Verify { file }) => commands::audit_verify(file),
        Command::Approvals(a) => mcpguard::cli::approvals::run(a),
        Command::Lock(LockCommand::Add { grants, .. }) if !grants.connect.is_empty() => {
            // A lock entry records paths and variable names, not destinations: refused rather
            // than dropped, so that `lock check` never runs the server with less than was asked.
            Err("lock add refused --sandbox-connect: a lock file does not record TCP destinations yet; put them in the policy the entry names (`[sandbox] connect = [\"HOST:PORT\"]`, with `lock add --policy FILE`)".to_string())
        }
        Command::Lock(LockCommand::Add {
            key,
            snapshot,
            lock,
            package,
            policy,
            grants,
            command,
        }) => mcpguard::cli::lock::add(&mcpguard::cli::lock::AddArgs {
            key,
            snapshot,
            lock: lock.as_deref(),
            package: package.as_deref(),
            policy: policy.as_deref(),
            read: &grants.read,
            write: &grants.write,
            env: &grants.env,
            command,
        }),
        Command::Lock(LockCommand::Check {
            file,
            format,
            timeout,
        }) => {
            let policy = |p: Option<&std::path::Path>| load_policy(p);
            let sandbox = |p: &policy::Policy,
                           file: Option<&std::path::Path>,
                           command: &[std::ffi::OsString],
                           grants: &mcpguard::cli::flags::SandboxGrants| {
                let missing = std::cell::RefCell::new(None);
                sandbox_for(p, file, command, grants, |e| {
                    *missing.borrow_mut() = Some(e.to_string());
                    ExitCode::from(1)
                })
                .map_err(|_| {
                    missing.take().map_or_else(
                        || "the sandbox refused to start the server (the reason is on stderr above)".to_string(),
                        |why| format!("the server cannot start: {why}"),
                    )
                })
            };
            mcpguard::cli::lock::check(
                file.as_deref(),
                *format,
                &mcpguard::cli::lock::Env {
                    policy: &policy,
                    sandbox: &sandbox,
                    timeout: *timeout,
                },
            )
        }
        Command::Demo => mcpguard::cli::demo::run(),
        Command::DemoServer {
            notes,
            rug_pull_after,
            next_release,
        } => mcpguard::cli::demo::serve(notes, *rug_pull_after, *next_release),
        Command::SandboxCheck {
            policy,
            grants,
            learn,
            call,
            command,
        } => {
            let learn = match learn.then(|| commands::learn_calls(call)).transpose() {
                Ok(l) => l,
                Err(e) => return fail(&e),
            };
            // The command runs under the sandbox it reports, so its per-run grants are held to
            // the managed floor as for every other command that starts a server.
            match load_policy(policy.as_deref())
                .and_then(|p| held_to_floor(policy.as_deref(), grants).map(|()| p))
            {
                Ok(p) => commands::sandbox_check(
                    &p,
                    &extra(grants),
                    command,
                    diag::is_json(),
                    learn.as_deref(),
                ),
                Err(e) => return fail(&e),
            }
        }
        Command::Wrap {
            config,
            dry_run,
            snapshot_dir,
            mcpguard,
            policy,
            pin,
            entry,
            grants,
            from_lock,
            yes,
        } => mcpguard::cli::wrap::run(&mcpguard::cli::wrap::WrapArgs {
            config,
            dry_run: *dry_run,
            snapshot_dir: snapshot_dir.as_deref(),
            mcpguard: mcpguard.as_deref(),
            policy: policy.as_deref(),
            pin: *pin,
            entry: entry.as_deref(),
            grants,
            only: None,
            from_lock: from_lock.as_deref(),
            yes: *yes,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            diag::emit(Level::Error, &msg);
            ExitCode::from(1)
        }
    }
}

/// `cli::launch::for_capture` for `capture` and `update` (`what` names the command in the
/// failure).
fn pinned_for_capture(
    command: &[std::ffi::OsString],
    build_from_source: &[String],
    what: &str,
) -> Result<(Vec<std::ffi::OsString>, Option<serde_json::Value>), ExitCode> {
    mcpguard::cli::launch::for_capture(command, build_from_source)
        .map_err(|e| fail(&format!("{what} failed: {e}")))
}

fn fail(msg: &str) -> ExitCode {
    diag::emit(Level::Error, msg);
    ExitCode::from(1)
}

fn load_policy(path: Option<&std::path::Path>) -> Result<policy::Policy, String> {
    // The managed floor, when there is one, is read first; the user's file can only tighten it.
    let p = policy::load_layered(path)
        .map_err(|e| e.to_string())?
        .policy;
    for w in p.warnings() {
        diag::emit(Level::Warn, &format!("policy: {w}"));
    }
    Ok(p)
}

fn acceptance(p: &policy::Policy) -> mcpguard::snapshot::manifest::Acceptance {
    mcpguard::snapshot::manifest::Acceptance {
        allow_model_backed: p.review.allow_model_backed,
        forbidden_side_effects: p.review.forbidden_side_effects.clone(),
        max_validity: p.review.max_validity,
    }
}

fn capabilities(p: &policy::Policy) -> mcpguard::gate::capabilities::Capabilities {
    let c = &p.capabilities;
    mcpguard::gate::capabilities::Capabilities {
        sampling: c.sampling,
        elicitation: c.elicitation,
        roots: c.roots,
        tasks: c.tasks,
        prompts: c.prompts,
        resources: c.resources,
        logging: c.logging,
    }
}

fn open_audit(
    args: &mcpguard::cli::flags::ProxyArgs,
    p: &policy::Policy,
    server: &str,
    digest: Option<String>,
) -> Result<Option<std::sync::Arc<mcpguard::audit::AuditLog>>, String> {
    use mcpguard::audit::system::{self, Kind, Target};
    let ctx = policy::PathContext::from_process(None);
    // `--audit-log` always writes a file; `audit.path` does when the file sink is chosen.
    let path = match (&args.audit_log, &p.audit.path) {
        (Some(path), _) => Some(path.clone()),
        (None, Some(pp)) if p.audit.sink.contains(&policy::AuditSink::File) => Some(
            pp.expand(&ctx)
                .map_err(|e| format!("policy audit.path: {e}"))?,
        ),
        _ => None,
    };
    let socket = |key: &str, given: &Option<policy::PolicyPath>, default: &str| {
        given
            .as_ref()
            .map_or(Ok(std::path::PathBuf::from(default)), |pp| {
                pp.expand(&ctx)
                    .map_err(|e| format!("policy audit.{key}: {e}"))
            })
    };
    let mut targets = Vec::new();
    for sink in &p.audit.sink {
        let (kind, path) = match sink {
            policy::AuditSink::File => continue,
            policy::AuditSink::Journal => (
                Kind::Journal,
                socket(
                    "journal_socket",
                    &p.audit.journal_socket,
                    system::JOURNAL_SOCKET,
                )?,
            ),
            policy::AuditSink::Syslog => (
                Kind::Syslog,
                socket(
                    "syslog_socket",
                    &p.audit.syslog_socket,
                    system::SYSLOG_SOCKET,
                )?,
            ),
        };
        targets.push(Target::new(kind, &path).map_err(|e| {
            format!(
                "cannot create a socket for the audit sink {}: {e}",
                path.display()
            )
        })?);
    }
    let payload = match p.audit.payload {
        policy::AuditPayload::Digests => mcpguard::audit::Payload::Digests,
        policy::AuditPayload::Full => mcpguard::audit::Payload::Full,
    };
    let log = match path {
        Some(path) => mcpguard::audit::AuditLog::open(&path, server, digest, payload)
            .map_err(|e| e.to_string())?,
        None if targets.is_empty() => return Ok(None),
        None => mcpguard::audit::AuditLog::system_only(server, digest, payload),
    };
    Ok(Some(std::sync::Arc::new(log.with_system(targets))))
}

/// The value a scoped helper thread returned; its panic goes on in this thread.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// How the proxy reports a server program that cannot be found: as a shell would (127, 126).
fn missing_program(e: mcpguard::process::child::SpawnError) -> ExitCode {
    diag::emit(Level::Error, &e.to_string());
    ExitCode::from(u8::try_from(e.exit_code).unwrap_or(1))
}

/// The content checks of the policy. The value checks read the environment variables the
/// policy names as secrets now, once; the session only ever sees the compiled detector.
fn content_for(
    policy: &policy::Policy,
) -> Result<std::sync::Arc<mcpguard::gate::content::Content>, ExitCode> {
    match mcpguard::gate::content::Content::new(
        policy,
        &policy::PathContext::from_process(None),
        |name| std::env::var(name).ok(),
    ) {
        Ok((content, warnings)) => {
            for w in warnings {
                diag::emit(Level::Warn, &w);
            }
            Ok(std::sync::Arc::new(content))
        }
        Err(e) => Err(fail(&format!("refusing to start the server: {e}"))),
    }
}

/// The mode the proxy enforces and the command it runs: a verified snapshot with its schemas
/// compiled (a pinned package runs from its checked install), or a mode without one. Says on
/// stderr why the start is refused, or what is not served.
fn verify_snapshot(
    args: &mcpguard::cli::flags::ProxyArgs,
    policy: &policy::Policy,
) -> Result<(Mode, Vec<std::ffi::OsString>), ExitCode> {
    let (Some(path), Some(sha), Some(key)) = (&args.manifest, &args.sha256, &args.server_key)
    else {
        if args.allow_unpinned {
            diag::emit(Level::Warn, "running without a reviewed snapshot (--allow-unpinned): tools are relayed unpinned");
            return Ok((Mode::Unpinned, args.server.clone()));
        }
        diag::emit(
            Level::Warn,
            "no reviewed snapshot: this server's tools will not be served. Capture and review them \
             (`mcpguard capture --server KEY --out FILE -- <server command>`, then `mcpguard review FILE ...`) \
             and start mcpguard with --manifest FILE --sha256 HEX --server KEY",
        );
        return Ok((Mode::NoManifest, args.server.clone()));
    };
    if let Some(why) = mcpguard::cli::wrap::pending_pin(sha, path, key, &args.server) {
        return Err(fail(&why));
    }
    let refuse = |e: &dyn std::fmt::Display| fail(&format!("refusing to start the server: {e}"));
    let now = jiff::Timestamp::now();
    // An expired snapshot is refused by `load_pin`; this names the command that renews it (and
    // warns before it expires), since renewal needs no second review when nothing changed.
    let expiry =
        mcpguard::cli::update::expiry_notice(mcpguard::cli::update::expires_at(path), now, || {
            mcpguard::cli::update::renew_command(
                path,
                key,
                args.policy.as_deref(),
                &args.grants,
                &args.server,
            )
        });
    let mut loaded = match mcpguard::gate::pin::load_pin(path, sha, key, now, &acceptance(policy)) {
        Ok(l) => l,
        Err(e) => {
            return Err(match expiry {
                Err(renew) => refuse(&format!("{e}\n{renew}")),
                Ok(_) => refuse(&e),
            })
        }
    };
    if let Ok(Some(warning)) = &expiry {
        diag::emit(Level::Warn, warning);
    }
    // A pinned package runs from its checked install, never from the registry.
    let command = mcpguard::cli::launch::for_run_with(&args.server, loaded.pin().package.as_ref())
        .map_err(|e| refuse(&e))?;
    for why in loaded
        .pin_mut()
        .apply_policy(|t| policy.refusal(&t.name, t.side_effect))
    {
        diag::emit(Level::Warn, &format!("not serving a reviewed tool: {why}"));
    }
    if policy.review.require_bounded_write_schemas {
        let is_write =
            |t: &mcpguard::gate::pin::ReviewedTool| policy.classify(&t.name, t.reviewed()).is_write;
        for why in loaded.pin_mut().withhold_unbounded_writes(is_write) {
            diag::emit(Level::Warn, &format!("not serving a reviewed tool: {why}"));
        }
    }
    match mcpguard::cli::signed::allowed_signers(policy) {
        Err(e) => return Err(refuse(&e)),
        Ok(None) => {}
        Ok(Some(signers)) => {
            let now = jiff::Timestamp::now();
            for why in mcpguard::cli::signed::check_pin(loaded.pin_mut(), &signers, now) {
                diag::emit(Level::Warn, &format!("not serving a reviewed tool: {why}"));
            }
        }
    }
    diag::emit(
        Level::Info,
        &format!(
            "enforcing snapshot {} (server {key:?}: {} reviewed tools, {} unreviewed and not served)",
            path.display(),
            loaded.pin().tools.len(),
            loaded.pin().unreviewed.len()
        ),
    );
    // Only the tools still served are compiled (`pin::Loaded`); the validator's one-time set-up
    // has been running on its own thread since the start (`schema::warm_up`).
    let pin = loaded.compile().map_err(|e| refuse(&e))?;
    Ok((Mode::Pinned(std::sync::Arc::new(pin)), command))
}

fn run_proxy(mut args: mcpguard::cli::flags::ProxyArgs) -> ExitCode {
    if args.server.is_empty() {
        diag::emit(
            Level::Error,
            "no server command given: run `mcpguard [OPTIONS] -- <server command...>` (see --help)",
        );
        return ExitCode::from(2);
    }
    if args.manifest.is_some() {
        // Started first so that it overlaps the policy, the snapshot and the sandbox's
        // preparation (`schema::warm_up`).
        std::thread::spawn(mcpguard::gate::schema::warm_up);
    }
    let policy = match policy::load_layered(args.policy.as_deref()) {
        Ok(layered) => {
            if let Err(why) = layered
                .check_overrides(
                    args.audit_log.as_deref(),
                    args.max_message_bytes,
                    &args.grants.read,
                    &args.grants.write,
                    &args.grants.env,
                )
                .and_then(|()| layered.check_connect(&args.grants.connect))
            {
                return fail(&format!("refusing to start the server: {why}"));
            }
            for w in layered.policy.warnings() {
                diag::emit(Level::Warn, &format!("policy: {w}"));
            }
            layered.policy
        }
        Err(e) => return fail(&format!("refusing to start the server: {e}")),
    };
    // The snapshot is verified, and its schemas compiled, before the server is spawned: a
    // mismatch never starts it. The sandbox and the content checks do not depend on the snapshot
    // (unless it pins a package, which changes the command), so two more threads prepare them
    // meanwhile. Their diagnostics are held back and printed after the snapshot's, in the order
    // a start one step at a time prints them; a refused snapshot drops them unprinted.
    let prepare_sandbox = |command: &[std::ffi::OsString]| {
        sandbox_for(
            &policy,
            args.policy.as_deref(),
            command,
            &args.grants,
            missing_program,
        )
    };
    let (snapshot, sandbox, content) = std::thread::scope(|scope| {
        let sandbox = scope.spawn(|| diag::captured(|| prepare_sandbox(&args.server)));
        let content = scope.spawn(|| diag::captured(|| content_for(&policy)));
        let snapshot = verify_snapshot(&args, &policy);
        (snapshot, joined(sandbox), joined(content))
    });
    let (mode, command) = match snapshot {
        Ok(verified) => verified,
        Err(code) => return code,
    };
    if args.dry_run {
        diag::emit(
            Level::Warn,
            "dry run (--dry-run): calls are checked, classified and confirmed but never dispatched",
        );
    }
    let (sandbox, said) = sandbox;
    let sandbox = if command == args.server {
        said.replay();
        sandbox
    } else {
        // The snapshot pins a package: the server runs from its checked install, so the sandbox
        // prepared for the command as given is dropped (with what it said) and prepared again.
        drop((sandbox, said));
        let again = prepare_sandbox(&command);
        args.server = command;
        again
    };
    let sandbox = match sandbox {
        Ok(s) => s,
        Err(code) => return code,
    };
    let max_message_bytes = args
        .max_message_bytes
        .map_or(policy.limits.max_message_bytes, |b| {
            usize::try_from(b).unwrap_or(usize::MAX)
        });
    let (content, said) = content;
    said.replay();
    let content = match content {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (server, digest) = match &mode {
        Mode::Pinned(pin) => (pin.server_key.clone(), Some(pin.digest.clone())),
        _ => ("unpinned".to_string(), None),
    };
    let audit = match open_audit(&args, &policy, &server, digest) {
        Ok(a) => a,
        Err(e) => return fail(&format!("refusing to start the server: {e}")),
    };
    if let Some(log) = &audit {
        use mcpguard::audit::EventKind;
        use mcpguard::gate::session::AuditNote;
        // The first records prove every sink works before the server is spawned: a sink that
        // refuses them would refuse every decision, so the server is not started at all.
        let mut ok = proxy::record_note(log, &AuditNote::new(EventKind::Start));
        if ok && matches!(mode, Mode::Pinned(_)) {
            ok = proxy::record_note(log, &AuditNote::new(EventKind::SnapshotVerified));
        }
        if !ok {
            return fail(&format!(
                "refusing to start the server: the audit record could not be written to {} (see above); every decision must be recorded (fail closed)",
                log.describe()
            ));
        }
    }
    // Every piece of server error text the session passes on is cut to errors.max_length.
    mcpguard::gate::refusal::set_max_error_length(policy.errors.max_length);
    let opts = proxy::Options {
        command: args.server,
        max_message_bytes,
        grace: args.grace,
        mode,
        capabilities: capabilities(&policy),
        max_pages: policy.limits.max_pages,
        max_calls_in_flight: policy.limits.max_calls_in_flight,
        call_timeout: std::time::Duration::try_from(policy.limits.call_timeout).unwrap_or_default(),
        redact_errors: policy.errors.text == policy::ErrorText::Redacted,
        structured_only: policy.output.mode == policy::OutputMode::StructuredOnly,
        audit,
        dry_run: args.dry_run,
        policy: std::sync::Arc::new(policy),
        sandbox: sandbox.as_ref().map(|s| s.prepared.clone()),
        content,
    };
    let outcome = proxy::run(opts);
    // The server has exited: its private temporary directory goes now, before mcpguard may end
    // itself with the server's signal.
    drop(sandbox);
    match outcome {
        Ok(Outcome::Child(status)) => mirror_exit(status),
        Ok(Outcome::Stopped { signal }) => {
            diag::emit(
                Level::Info,
                &format!("mcpguard ended the server with {signal} after the host closed the connection; exiting with status {EXIT_SERVER_STOPPED}"),
            );
            ExitCode::from(EXIT_SERVER_STOPPED)
        }
        Ok(Outcome::SpawnFailed(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Ok(Outcome::InternalError) => ExitCode::from(proxy::EXIT_INTERNAL_ERROR),
        Err(e) => {
            diag::emit(Level::Error, &format!("the proxy failed: {e}"));
            ExitCode::from(1)
        }
    }
}

/// The exit status when the host closed the connection and mcpguard had to end the server itself
/// (SIGTERM, then SIGKILL, after `--grace`): the shutdown was ordinary, so mcpguard does not die of
/// the signal it sent. Documented in mcpguard(1), EXIT STATUS.
const EXIT_SERVER_STOPPED: u8 = 3;

/// Ends mcpguard the way the server ended: the same exit code, or death by the same signal.
fn mirror_exit(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1));
    }
    if let Some(sig) = status.signal() {
        // Restores the default action (our handler replaced it) and raises the signal. For
        // signals whose default is to be ignored it returns, and the shell convention applies.
        let _ = signal_hook::low_level::emulate_default_handler(sig);
        return ExitCode::from(u8::try_from(128 + sig).unwrap_or(1));
    }
    ExitCode::from(1)
}

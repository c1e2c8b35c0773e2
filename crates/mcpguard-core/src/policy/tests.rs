use std::path::{Path, PathBuf};

use jiff::SignedDuration;

use super::*;

/// The repository's root: this crate is `crates/mcpguard-core` in it.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn policies_dir() -> PathBuf {
    repo_root().join("policies")
}

fn shipped() -> Vec<(String, Policy)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(policies_dir()).expect("policies/ is readable") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            match load(&path) {
                Ok(p) => out.push((name, p)),
                Err(e) => panic!("shipped policy does not load: {e}"),
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn shipped_one(name: &str) -> Policy {
    shipped()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("policies/{name} is missing"))
        .1
}

#[test]
fn every_shipped_policy_loads_and_round_trips() {
    let all = shipped();
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    for required in ["default.toml", "strict.toml", "observe.toml"] {
        assert!(
            names.contains(&required),
            "{required} missing from {names:?}"
        );
    }
    for (name, policy) in &all {
        let text = policy.effective_toml();
        let again = parse(&text, name).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(&again, policy, "{name} does not round-trip:\n{text}");
    }
}

/// The reference must keep up with the code: every key of the effective policy is described
/// in docs/policy.md, and every TOML example there parses.
#[test]
fn the_reference_documents_every_key_and_its_examples_parse() {
    let doc_path = repo_root().join("docs/policy.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/policy.md is readable");
    let full = full_policy();
    for line in full.effective_toml().lines() {
        let line = line.trim();
        if let Some(table) = line.strip_prefix('[') {
            let table = table
                .trim_end_matches(']')
                .replace("tools.the_tool", "tools.<name>");
            assert!(
                doc.contains(&format!("`[{table}]`")),
                "[{table}] is not documented"
            );
        } else if let Some((key, _)) = line.split_once(" = ") {
            assert!(
                doc.contains(&format!("| `{key}` |")),
                "key {key} is not documented"
            );
        }
    }
    let mut examples = 0;
    for block in doc.split("```toml\n").skip(1) {
        let Some((example, _)) = block.split_once("```") else {
            panic!("unterminated example in docs/policy.md");
        };
        if let Err(e) = parse(example, "docs/policy.md example") {
            panic!("{e}\n{example}");
        }
        examples += 1;
    }
    assert!(examples > 0);
}

#[test]
fn builtin_is_the_shipped_default() {
    assert_eq!(builtin().unwrap(), shipped_one("default.toml"));
}

/// A policy that leaves out `[sandbox]` (or some of its keys) gets default.toml's profile, so
/// a small policy about tools runs the server confined rather than not at all.
#[test]
fn an_omitted_sandbox_section_is_the_shipped_profile() {
    let default = shipped_one("default.toml");
    assert_eq!(parse("", "t.toml").unwrap().sandbox, default.sandbox);
    let p = parse("[review]\nrefused_tools = [\"echo\"]\n", "t.toml").unwrap();
    assert_eq!(p.sandbox, default.sandbox);
    let p = parse("[sandbox]\nallow_udp = true\n", "t.toml").unwrap();
    assert!(p.sandbox.allow_udp);
    assert_eq!(
        p.sandbox.read, default.sandbox.read,
        "other keys keep their defaults"
    );
}

#[test]
fn shipped_policies_behave_as_documented() {
    let default = shipped_one("default.toml");
    assert_eq!(default.confirmation.mode, ConfirmationMode::Elicit);
    assert_eq!(default.sandbox.mode, SandboxMode::Require);
    assert_eq!(
        default.classify("anything", Reviewed::NONE).decision,
        Decision::Confirm
    );
    assert!(default.warnings().is_empty(), "{:?}", default.warnings());

    let strict = shipped_one("strict.toml");
    assert!(!strict.review.allow_model_backed);
    assert_eq!(strict.output.mode, OutputMode::StructuredOnly);
    assert_eq!(strict.errors.text, ErrorText::Redacted);
    assert!(strict.limits.max_message_bytes < default.limits.max_message_bytes);
    assert!(strict.limits.call_timeout < default.limits.call_timeout);
    assert!(matches!(
        strict.classify("anything", Reviewed::NONE).decision,
        Decision::Refuse(_)
    ));
    assert!(strict.warnings().is_empty(), "{:?}", strict.warnings());

    let observe = shipped_one("observe.toml");
    let c = observe.classify("anything", Reviewed::AUTHORITY);
    assert!(c.is_write && c.needs_confirmation);
    assert_eq!(c.decision, Decision::ForwardUnconfirmed);
    assert_eq!(observe.sandbox.mode, SandboxMode::Off);
    assert!(observe.audit.path.is_some());
    let caps = &observe.capabilities;
    assert!(
        caps.sampling
            && caps.elicitation
            && caps.roots
            && !caps.tasks
            && caps.prompts
            && caps.resources
    );
    assert!(observe
        .warnings()
        .iter()
        .any(|w| w.contains("confirmation.mode = \"allow\"")));

    for (name, preset) in [("node.toml", Preset::Node), ("python.toml", Preset::Python)] {
        let p = shipped_one(name);
        assert_eq!(p.sandbox.preset, preset, "{name}");
        assert_eq!(p.sandbox.mode, SandboxMode::Require, "{name}");
        assert!(p.warnings().is_empty(), "{name}: {:?}", p.warnings());
    }
}

/// Unknown keys at every level, written in the ways TOML allows (table headers, dotted keys,
/// inline tables): each names the key, lists the valid ones and points at the key.
#[test]
fn unknown_keys_are_rejected_where_they_stand() {
    let cases: &[(&str, &str, &str)] = &[
        ("colour = 1\n", "t.toml:1:1:", "unknown key `colour`; the valid keys here are `review`, `writes`"),
        ("\n\n[reveiw]\n", "t.toml:3:2:", "unknown key `reveiw`"),
        ("[review]\nmax_validity = \"1d\"\nmax_valdity = \"2d\"\n", "t.toml:3:1:", "unknown key `max_valdity`; the valid keys here are `max_validity`, `allow_model_backed`"),
        ("review.allow_modelbacked = true\n", "t.toml:1:8:", "unknown key `allow_modelbacked`"),
        ("[writes]\ndefualt = \"write\"\n", "t.toml:2:1:", "unknown key `defualt`; the valid keys here are `default`, `trust_reviews`, `tools`"),
        ("[writes.tools.echo]\nside_effect = \"read\"\nconfirmed = true\n", "t.toml:3:1:", "unknown key `confirmed`; the valid keys here are `side_effect`, `idempotency`"),
        ("[writes]\ntools = { echo = { side_effect = \"read\", retry = \"never\" } }\n", "t.toml:2:42:", "unknown key `retry`"),
        ("[arguments]\nclose = true\n", "t.toml:2:1:", "unknown key `close`; the valid keys here are `closed`, `refuse_metadata_urls`, `confirm_credential_paths`, `confirm_remote_code`, `tools`"),
        ("[arguments.tools.echo]\nclosed = false\nopen = true\n", "t.toml:3:1:", "unknown key `open`; the valid keys here are `closed`, `rules`"),
        ("[confirmation]\nmode = \"elicit\"\ntimeout_s = 5\n", "t.toml:3:1:", "unknown key `timeout_s`; the valid keys here are `mode`, `timeout`"),
        ("[capabilities]\nsampling = false\ncompletions = true\n", "t.toml:3:1:", "unknown key `completions`"),
        ("[errors]\nmax_len = 10\n", "t.toml:2:1:", "unknown key `max_len`; the valid keys here are `max_length`, `text`"),
        ("[output]\nformat = \"as-sent\"\n", "t.toml:2:1:", "unknown key `format`; the only valid key here is `mode`"),
        ("[limits]\n\n\nmax_message_size = 1\n", "t.toml:4:1:", "unknown key `max_message_size`"),
        ("[audit]\nfile = \"/var/log/x\"\n", "t.toml:2:1:", "unknown key `file`; the valid keys here are `path`, `payload`"),
        ("[sandbox]\nmode = \"require\"\nread_only = []\n", "t.toml:3:1:", "unknown key `read_only`"),
        ("[sandbox.limits]\nopen_files = 64\ncpu_seconds = 10\n", "t.toml:3:1:", "unknown key `cpu_seconds`; the valid keys here are `open_files`, `processes`"),
        ("[sandbox]\nlimits = { nofile = 10 }\n", "t.toml:2:12:", "unknown key `nofile`"),
        // The policy has no way to add a tool: there is no such key anywhere.
        ("[tools.extra]\nside_effect = \"read\"\n", "t.toml:1:2:", "unknown key `tools`"),
        ("[review]\nadd_tools = [\"extra\"]\n", "t.toml:2:1:", "unknown key `add_tools`"),
    ];
    for (text, prefix, fragment) in cases {
        check_error(text, prefix, fragment);
    }
}

/// Values that are well-formed TOML but not acceptable.
#[test]
fn bad_values_are_rejected_with_their_position() {
    let cases: &[(&str, &str, &str)] = &[
        ("[review]\nmax_validity = \"366d\"\n", "t.toml:2:16:", "the longest accepted validity is 365d"),
        ("[review]\nmax_validity = \"0d\"\n", "t.toml:2:16:", "must be positive"),
        ("[review]\nmax_validity = 30\n", "t.toml:2:16:", "expected a duration string"),
        ("[review]\nforbidden_side_effects = [\"x\", \"\"]\n", "t.toml:2:32:", "review.forbidden_side_effects has an empty entry"),
        ("[writes]\ndefault = \"read\"\n", "t.toml:2:11:", "unknown value `read`, expected `write` or `refuse`"),
        ("[writes.tools.echo]\nidempotency = \"idempotent\"\n", "t.toml:1:1:", "missing key `side_effect`"),
        ("[writes.tools.\"\"]\nside_effect = \"read\"\n", "t.toml:1:", "writes.tools has an entry with an empty tool name"),
        ("[writes.tools.echo]\nside_effect = \"write\"\n", "t.toml:2:15:", "expected one of `read`, `create`, `update`, `delete`"),
        ("[writes.tools.echo]\nside_effect = \"read\"\nautomatic_retry = \"on-timeout\"\n", "t.toml:3:19:", "expected `never`"),
        ("[writes.tools.echo]\nside_effect = \"read\"\nunknown_outcome = \"retry\"\n", "t.toml:3:19:", "expected `stop-and-reconcile`"),
        ("[writes.tools.echo]\nside_effect = \"read\"\nconfirmation = \"upload-confirmation-required\"\n", "t.toml:3:16:", "expected `not-required` or `trusted-confirmation-required`"),
        ("[confirmation]\nmode = \"ask\"\n", "t.toml:2:8:", "expected one of `elicit`, `deny`, `allow`"),
        ("[confirmation]\ntimeout = \"2h\"\n", "t.toml:2:11:", "confirmation.timeout is 2h; the longest is 1h"),
        ("[confirmation]\nchannels = [\"host\", \"email\"]\n", "t.toml:2:21:", "expected one of `host`, `desktop`, `terminal`"),
        ("[confirmation]\nchannels = [\"terminal\", \"host\", \"terminal\"]\n", "t.toml:2:12:", "confirmation.channels names \"terminal\" twice"),
        ("[capabilities]\nsampling = \"yes\"\n", "t.toml:2:12:", "expected a boolean"),
        ("[errors]\nmax_length = 10\n", "t.toml:2:14:", "at least 64"),
        ("[errors]\nmax_length = -1\n", "t.toml:2:14:", "expected a non-negative integer"),
        ("[errors]\nmax_length = 8192\n[limits]\nmax_message_bytes = 4096\n", "t.toml:2:14:", "errors.max_length (8192) exceeds limits.max_message_bytes (4096)"),
        ("[limits]\nmax_message_bytes = 100\n", "t.toml:2:21:", "between 4096"),
        ("[limits]\nmax_calls_in_flight = 0\n", "t.toml:2:23:", "between 1 and 4096"),
        ("[limits]\ncall_timeout = \"2d\"\n", "t.toml:2:16:", "the longest is 1d"),
        ("[limits]\nmax_pages = 0\n", "t.toml:2:13:", "between 1 and 100000"),
        ("[audit]\npath = \"audit.jsonl\"\n", "t.toml:2:8:", "is relative"),
        ("[audit]\npath = \"$TMPDIR/audit.jsonl\"\n", "t.toml:2:8:", "must not be under $TMPDIR"),
        ("[audit]\npath = \"~/logs/\"\n", "t.toml:2:8:", "names a directory"),
        ("[audit]\npayload = \"values\"\n", "t.toml:2:11:", "expected `digests` or `full`"),
        ("[sandbox]\nmode = \"on\"\n", "t.toml:2:8:", "expected one of `require`, `best-effort`, `off`"),
        ("[sandbox]\npreset = \"ruby\"\n", "t.toml:2:10:", "expected one of `none`, `auto`, `node`, `python`"),
        ("[sandbox]\nread = [\"/usr\", \"lib\"]\n", "t.toml:2:17:", "path \"lib\" is relative"),
        ("[sandbox]\nread_write = [\"$HOME/x\"]\n", "t.toml:2:15:", "unknown placeholder $HOME"),
        ("[sandbox]\nexecute = [\"~/bin/../.ssh\"]\n", "t.toml:2:12:", "contains \"..\""),
        ("[sandbox]\nread = [\"~user/x\"]\n", "t.toml:2:9:", "is relative"),
        ("[sandbox]\nread = [\"/a\\u0007b\"]\n", "t.toml:2:9:", "control character"),
        ("[sandbox]\ntcp_connect = [443, 65536]\n", "t.toml:2:21:", "expected a port number from 0 to 65535"),
        ("[sandbox]\ntcp_connect = [22, 0]\n", "t.toml:2:20:", "cannot contain port 0"),
        ("[sandbox]\nenv = [\"PATH\", \"*\"]\n", "t.toml:2:16:", "would pass every variable"),
        ("[sandbox]\nenv = [\"1PASSWORD\"]\n", "t.toml:2:8:", "is not a variable name"),
        ("[sandbox]\nenv = [\n  \"A\",\n  \"A-B\",\n]\n", "t.toml:4:3:", "is not a variable name"),
        ("[sandbox.limits]\nopen_files = 3\n", "t.toml:2:14:", "sandbox.limits.open_files must be at least 16"),
        ("[sandbox.limits]\nprocesses = -4\n", "t.toml:2:13:", "must not be negative"),
        ("[sandbox.limits]\naddress_space_mb = \"unlimited\"\n", "t.toml:2:20:", "expected a positive integer or \"inherit\""),
        ("[sandbox.limits]\ncore_dumps = 1\n", "t.toml:2:14:", "expected a boolean"),
        ("review = 3\n", "t.toml:1:10:", "expected a table"),
        // Dotted keys and inline tables are located like table headers.
        ("review.max_validity = \"400d\"\n", "t.toml:1:23:", "the longest accepted validity is 365d"),
        ("review = { max_validity = \"400d\" }\n", "t.toml:1:27:", "the longest accepted validity is 365d"),
        ("errors.max_length = 5000\nlimits = { max_message_bytes = 4096 }\n", "t.toml:1:21:", "exceeds limits.max_message_bytes"),
        ("[review\n", "t.toml:1:8:", ""),
        ("[review]\n[review]\n", "t.toml:2:", "duplicate key"),
    ];
    for (text, prefix, fragment) in cases {
        check_error(text, prefix, fragment);
    }
}

fn check_error(text: &str, prefix: &str, fragment: &str) {
    match parse(text, "t.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            let shown = e.to_string();
            assert!(
                shown.starts_with(prefix) && shown.contains(fragment),
                "for:\n{text}\nwanted {prefix} … {fragment}\ngot    {shown}"
            );
        }
    }
}

#[test]
fn columns_count_characters_not_bytes() {
    let e = parse("# é€😀\n[review]\n  \"ünknown\" = 1\n", "t.toml").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("t.toml:3:3: unknown key `ünknown`"),
        "{e}"
    );
    assert_eq!(line_column("ab\ncd", 4), (2, 2));
    assert_eq!(line_column("ab", 99), (1, 3));
}

#[test]
fn missing_file_names_the_path() {
    let e = load(Path::new("/nonexistent/mcpguard/policy.toml")).unwrap_err();
    assert!(matches!(e, PolicyError::Read { .. }));
    assert!(
        e.to_string()
            .starts_with("/nonexistent/mcpguard/policy.toml: cannot read the policy"),
        "{e}"
    );
}

#[test]
fn an_empty_file_is_every_default() {
    let p = parse("", "empty").unwrap();
    assert_eq!(p, Policy::default());
    assert_eq!(p.review.max_validity, SignedDuration::from_hours(30 * 24));
    assert!(p.review.allow_model_backed);
    assert!(p.review.forbidden_side_effects.is_empty());
    assert_eq!(p.writes.default, Unclassified::Write);
    assert!(p.writes.tools.is_empty());
    assert_eq!(p.confirmation.mode, ConfirmationMode::Elicit);
    assert_eq!(p.confirmation.timeout, SignedDuration::from_secs(60));
    let c = &p.capabilities;
    assert!(!(c.sampling || c.elicitation || c.roots || c.tasks || c.prompts || c.resources));
    assert!(c.logging);
    assert!(c.pass_meta.is_empty());
    assert_eq!(p.errors.max_length, 2048);
    assert_eq!(p.errors.text, ErrorText::Sanitized);
    assert_eq!(p.output.mode, OutputMode::AsSent);
    assert_eq!(p.limits.max_message_bytes, 16 * 1024 * 1024);
    assert_eq!(p.limits.max_calls_in_flight, 64);
    assert_eq!(p.limits.call_timeout, SignedDuration::from_secs(120));
    assert_eq!(p.limits.max_pages, 1000);
    assert_eq!(p.audit.path, None);
    assert_eq!(p.audit.payload, AuditPayload::Digests);
    let s = &p.sandbox;
    assert_eq!(s.mode, SandboxMode::Require);
    assert_eq!(s.preset, Preset::Auto);
    assert_eq!(s.read.len(), SYSTEM_READ.len());
    assert_eq!(s.execute.len(), SYSTEM_EXECUTE.len());
    let rw: Vec<&str> = s.read_write.iter().map(PolicyPath::as_str).collect();
    assert_eq!(rw, ["$TMPDIR", "/dev/null"]);
    assert!(s.tcp_connect.is_empty() && s.tcp_bind.is_empty());
    assert!(!s.allow_udp && !s.allow_other_sockets);
    assert!(s.scope_signals && s.scope_abstract_unix_sockets);
    assert!(s.env.iter().any(|e| e == "PATH") && !s.env.iter().any(|e| e.contains("TOKEN")));
    assert_eq!(s.limits.open_files, Limit::Max(1024));
    assert_eq!(s.limits.processes, Limit::Max(512));
    assert_eq!(s.limits.address_space_mb, Limit::Inherit);
    assert_eq!(s.limits.data_mb, Limit::Max(4096));
    assert_eq!(s.limits.tmp_mb, Limit::Max(512));
    assert!(!s.limits.core_dumps);
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    // A profile that names no program path still draws the warning.
    let p = parse(
        "[sandbox]\npreset = \"none\"\nread = []\nexecute = []\n",
        "t",
    )
    .unwrap();
    assert!(p
        .warnings()
        .iter()
        .any(|w| w.contains("cannot run any program")));
}

#[test]
fn tool_defaults_follow_the_side_effect() {
    let p = parse(
        "[writes.tools.get]\nside_effect = \"read\"\n[writes.tools.put]\nside_effect = \"update\"\n",
        "t",
    )
    .unwrap();
    let get = &p.writes.tools["get"];
    assert_eq!(get.confirmation, ConfirmationRequirement::NotRequired);
    assert_eq!(get.idempotency, Idempotency::Unknown);
    assert_eq!(get.automatic_retry, AutomaticRetry::Never);
    assert_eq!(get.unknown_outcome, UnknownOutcome::StopAndReconcile);
    let put = &p.writes.tools["put"];
    assert_eq!(
        put.confirmation,
        ConfirmationRequirement::TrustedConfirmationRequired
    );
}

/// (policy text, tool, has authority channel, expected side effect, is_write,
/// needs_confirmation, basis, decision kind).
#[test]
fn classification_rules() {
    let text = r#"
        [writes.tools.read_file]
        side_effect = "read"
        idempotency = "idempotent"
        [writes.tools.careful_read]
        side_effect = "read"
        confirmation = "trusted-confirmation-required"
        [writes.tools.append_log]
        side_effect = "create"
        confirmation = "not-required"
        [writes.tools.delete_file]
        side_effect = "delete"
    "#;
    let p = parse(text, "t").unwrap();
    use Basis::*;
    use SideEffect::*;
    type Case = (
        &'static str,
        bool,
        Option<SideEffect>,
        bool,
        bool,
        Basis,
        &'static str,
    );
    let cases: &[Case] = &[
        // A read needs no confirmation.
        (
            "read_file",
            false,
            Some(Read),
            false,
            false,
            Policy,
            "forward",
        ),
        // An authority channel turns a read into a write that needs confirmation.
        (
            "read_file",
            true,
            None,
            true,
            true,
            AuthorityChannel,
            "confirm",
        ),
        // A read may still ask for confirmation when the policy says so.
        (
            "careful_read",
            false,
            Some(Read),
            false,
            true,
            Policy,
            "confirm",
        ),
        // An unclassified tool is a write, with or without an authority channel.
        (
            "unknown_tool",
            false,
            None,
            true,
            true,
            Unclassified,
            "confirm",
        ),
        (
            "unknown_tool",
            true,
            None,
            true,
            true,
            Unclassified,
            "confirm",
        ),
        // A classified write keeps its own confirmation choice.
        (
            "append_log",
            false,
            Some(Create),
            true,
            false,
            Policy,
            "forward",
        ),
        (
            "append_log",
            true,
            Some(Create),
            true,
            false,
            Policy,
            "forward",
        ),
        (
            "delete_file",
            false,
            Some(Delete),
            true,
            true,
            Policy,
            "confirm",
        ),
    ];
    for &(tool, authority, side_effect, is_write, needs, basis, decision) in cases {
        let c = p.classify(
            tool,
            Reviewed {
                side_effect: None,
                authority,
            },
        );
        let what = format!("{tool} (authority: {authority}): {c:?}");
        assert_eq!(c.side_effect, side_effect, "{what}");
        assert_eq!(c.is_write, is_write, "{what}");
        assert_eq!(c.needs_confirmation, needs, "{what}");
        assert_eq!(c.basis, basis, "{what}");
        assert_eq!(kind(&c.decision), decision, "{what}");
    }
    assert_eq!(
        p.classify("read_file", Reviewed::NONE).idempotency,
        Idempotency::Idempotent
    );
}

fn kind(d: &Decision) -> &'static str {
    match d {
        Decision::Forward => "forward",
        Decision::Confirm => "confirm",
        Decision::ForwardUnconfirmed => "unconfirmed",
        Decision::Refuse(_) => "refuse",
    }
}

#[test]
fn confirmation_mode_decides_what_happens_to_a_write() {
    for (mode, expected) in [
        ("elicit", "confirm"),
        ("deny", "refuse"),
        ("allow", "unconfirmed"),
    ] {
        let p = parse(
            &format!(
                "[confirmation]\nmode = \"{mode}\"\n[writes.tools.r]\nside_effect = \"read\"\n"
            ),
            "t",
        )
        .unwrap();
        assert_eq!(
            kind(&p.classify("w", Reviewed::NONE).decision),
            expected,
            "{mode}"
        );
        // Reads pass in every mode.
        assert_eq!(
            kind(&p.classify("r", Reviewed::NONE).decision),
            "forward",
            "{mode}"
        );
    }
    let deny = parse("[confirmation]\nmode = \"deny\"\n", "t").unwrap();
    let Decision::Refuse(why) = deny.classify("w", Reviewed::NONE).decision else {
        panic!("deny mode must refuse a write");
    };
    assert!(
        why.contains("confirmation.mode = \"deny\"") && why.contains("[writes.tools.w]"),
        "{why}"
    );
}

#[test]
fn the_policy_can_refuse_reviewed_tools() {
    let p = parse(
        "[review]\nrefused_tools = [\"rm\"]\n[writes]\ndefault = \"refuse\"\n[writes.tools.ls]\nside_effect = \"read\"\n[writes.tools.rm]\nside_effect = \"read\"\n",
        "t",
    )
    .unwrap();
    assert!(p.refusal("ls", None).is_none());
    assert!(p
        .refusal("rm", None)
        .is_some_and(|r| r.contains("review.refused_tools")));
    assert!(p
        .refusal("cat", None)
        .is_some_and(|r| r.contains("writes.default = \"refuse\"")));
    assert!(matches!(
        p.classify("rm", Reviewed::NONE).decision,
        Decision::Refuse(_)
    ));
    assert!(matches!(
        p.classify("cat", Reviewed::NONE).decision,
        Decision::Refuse(_)
    ));
    assert_eq!(p.classify("ls", Reviewed::NONE).decision, Decision::Forward);
    assert!(p
        .warnings()
        .iter()
        .any(|w| w.contains("\"rm\" is in review.refused_tools")));
}

#[test]
fn durations() {
    let good = [
        ("1s", 1),
        ("90s", 90),
        ("30m", 1_800),
        ("12h", 43_200),
        ("30d", 2_592_000),
        ("365d", 31_536_000),
        ("007s", 7),
    ];
    for (text, secs) in good {
        assert_eq!(
            parse_duration(text),
            Ok(SignedDuration::from_secs(secs)),
            "{text}"
        );
    }
    let bad = [
        ("", "empty"),
        ("s", "not a duration"),
        ("10", "no unit"),
        ("10 s", "not a duration"),
        ("1.5h", "not a duration"),
        ("-5m", "not a duration"),
        ("+5m", "not a duration"),
        ("1h30m", "not a duration"),
        ("5w", "no unit"),
        ("5S", "no unit"),
        ("0s", "must be positive"),
        ("99999999999999999999d", "too long"),
        ("999999999999999d", "too long"),
        ("5é", "no unit"),
    ];
    for (text, fragment) in bad {
        match parse_duration(text) {
            Ok(d) => panic!("{text:?} parsed as {d:?}"),
            Err(e) => assert!(e.contains(fragment), "{text:?}: {e}"),
        }
    }
    for (secs, text) in [
        (1, "1s"),
        (60, "1m"),
        (90, "90s"),
        (3_600, "1h"),
        (5_400, "90m"),
        (86_400, "1d"),
        (90_000, "25h"),
    ] {
        let d = SignedDuration::from_secs(secs);
        assert_eq!(format_duration(d), text);
        assert_eq!(parse_duration(text), Ok(d));
    }
}

#[test]
fn effective_toml_round_trips_a_policy_with_every_key_changed() {
    let text = r#"
        [review]
        max_validity = "90m"
        allow_model_backed = false
        forbidden_side_effects = ["sends_email"]
        refused_tools = ["rm", "weird tool.name"]
        require_bounded_write_schemas = true
        [writes]
        default = "refuse"
        [writes.tools."a.b"]
        side_effect = "update"
        idempotency = "at-most-once"
        confirmation = "not-required"
        [writes.tools.get]
        side_effect = "read"
        idempotency = "non-idempotent"
        [arguments]
        closed = false
        [arguments.tools."x.y"]
        closed = true
        [confirmation]
        mode = "allow"
        timeout = "45s"
        [capabilities]
        sampling = true
        elicitation = true
        roots = true
        tasks = false
        prompts = true
        resources = true
        logging = false
        pass_meta = ["traceparent", "progressToken"]
        [errors]
        max_length = 100
        text = "redacted"
        [output]
        mode = "structured-only"
        [limits]
        max_message_bytes = 65536
        max_calls_in_flight = 2
        call_timeout = "1d"
        max_pages = 3
        [audit]
        path = "$XDG_STATE_HOME/mcpguard/a.jsonl"
        payload = "full"
        [sandbox]
        mode = "best-effort"
        preset = "python"
        read = ["/", "~"]
        read_write = ["~", "$CWD/data", "$TMPDIR"]
        execute = ["$XDG_DATA_HOME/uv"]
        tcp_connect = [443, 443]
        tcp_bind = [0, 8080]
        allow_udp = true
        allow_other_sockets = true
        scope_signals = false
        scope_abstract_unix_sockets = false
        env = ["PATH", "LC_ALL", "GITHUB_TOKEN"]
        [sandbox.limits]
        open_files = 16
        processes = 100
        address_space_mb = 4096
        core_dumps = true
    "#;
    let p = parse(text, "t").unwrap();
    assert_ne!(p, Policy::default());
    let effective = p.effective_toml();
    assert_eq!(parse(&effective, "effective").unwrap(), p, "{effective}");
    // The effective policy states defaults that the file left out.
    assert!(
        effective.contains("unknown_outcome = \"stop-and-reconcile\""),
        "{effective}"
    );
    assert!(
        effective.contains("automatic_retry = \"never\""),
        "{effective}"
    );
    // Every weakening choice above is named.
    let w = p.warnings().join("\n");
    for fragment in [
        "confirmation.mode = \"allow\"",
        "arguments.closed = false",
        "capabilities.sampling",
        "capabilities.roots",
        "prompts or capabilities.resources",
        "progressToken",
        "audit.payload = \"full\"",
        "best-effort",
        "sandbox.read_write contains \"~\"",
        "\"GITHUB_TOKEN\"",
        "sandbox.tcp_connect lists \"443\" more than once",
        "classified as a read but non-idempotent",
    ] {
        assert!(
            w.contains(fragment),
            "no warning with {fragment:?} in:\n{w}"
        );
    }
    // Default values round-trip too.
    let d = Policy::default();
    assert_eq!(parse(&d.effective_toml(), "d").unwrap(), d);
}

#[test]
fn sandbox_off_says_the_rest_is_ignored() {
    let p = parse("[sandbox]\nmode = \"off\"\n", "t").unwrap();
    assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
    let p = parse("[sandbox]\nmode = \"off\"\nallow_udp = true\n", "t").unwrap();
    assert!(p.warnings().iter().any(|w| w.contains("no effect")));
}

#[test]
fn a_destination_name_without_udp_mentions_dns() {
    let p = parse(
        "[sandbox]\nconnect = [\"api.example:443\"]\nread = [\"/usr\"]\n",
        "t",
    )
    .unwrap();
    assert!(
        p.warnings().iter().any(|w| w.contains("DNS")),
        "{:?}",
        p.warnings()
    );
}

#[test]
fn elicitation_passing_while_confirming_is_flagged() {
    let p = parse("[capabilities]\nelicitation = true\n", "t").unwrap();
    assert!(p
        .warnings()
        .iter()
        .any(|w| w.contains("look like mcpguard's own approval")));
}

#[test]
fn paths_and_placeholders() {
    let ctx = PathContext {
        home: Some("/home/u".into()),
        tmpdir: Some("/tmp/mcpguard-1".into()),
        cwd: Some("/work".into()),
        cache_home: None,
        config_home: Some("/cfg".into()),
        data_home: None,
        state_home: None,
    };
    let cases = [
        ("/usr", PathBase::Root, "/usr"),
        ("/", PathBase::Root, "/"),
        ("/usr/lib/", PathBase::Root, "/usr/lib"),
        ("~", PathBase::Home, "/home/u"),
        ("~/.npm", PathBase::Home, "/home/u/.npm"),
        ("$TMPDIR", PathBase::TmpDir, "/tmp/mcpguard-1"),
        ("$TMPDIR/x", PathBase::TmpDir, "/tmp/mcpguard-1/x"),
        ("$CWD/data", PathBase::Cwd, "/work/data"),
        (
            "$XDG_CACHE_HOME/uv",
            PathBase::CacheHome,
            "/home/u/.cache/uv",
        ),
        ("$XDG_CONFIG_HOME/app", PathBase::ConfigHome, "/cfg/app"),
        (
            "$XDG_DATA_HOME/uv",
            PathBase::DataHome,
            "/home/u/.local/share/uv",
        ),
        (
            "$XDG_STATE_HOME",
            PathBase::StateHome,
            "/home/u/.local/state",
        ),
    ];
    for (text, base, expanded) in cases {
        let p = PolicyPath::parse(text).unwrap();
        assert_eq!(p.base(), base, "{text}");
        assert_eq!(p.as_str(), text);
        assert_eq!(p.expand(&ctx).unwrap(), PathBuf::from(expanded), "{text}");
    }
    let unknown = PathContext::default();
    assert!(PolicyPath::parse("~/x").unwrap().expand(&unknown).is_err());
    assert!(PolicyPath::parse("$TMPDIR")
        .unwrap()
        .expand(&unknown)
        .is_err());
    assert_eq!(
        PolicyPath::parse("/etc").unwrap().expand(&unknown).unwrap(),
        PathBuf::from("/etc")
    );
    for bad in [
        "",
        "usr",
        "./x",
        "~x",
        "$HOME",
        "$TMPDIRX/a",
        "/a/../b",
        "/a/..",
        "$TMPDIR/..",
        "/a\nb",
    ] {
        assert!(PolicyPath::parse(bad).is_err(), "{bad:?} accepted");
    }
    // A ".." inside a name is not a parent reference.
    assert!(PolicyPath::parse("/a/..b/c..").is_ok());
}

#[test]
fn env_patterns() {
    for good in ["PATH", "_X", "LC_ALL", "npm_config_cache", "A1"] {
        assert_eq!(env_pattern_problem(good), None, "{good}");
    }
    let prefix = env_pattern_problem("LC_*").unwrap();
    assert!(prefix.contains("LC_SECRET_TOKEN"), "{prefix}");
    assert!(prefix.contains("\"LC_ALL\""), "{prefix}");
    for bad in ["*", "", "1A", "A-B", "A B", "A*B", "**", "É", "LC_*"] {
        assert!(env_pattern_problem(bad).is_some(), "{bad:?} accepted");
    }
}

/// The operation class a review records classifies the tool when the policy has no table for it
/// (`trust_reviews`, on by default); a table overrides it; a reviewed read with an authority
/// channel stays a write; `trust_reviews = false` ignores the review.
#[test]
fn reviewed_classes_classify_unless_the_policy_says_otherwise() {
    use SideEffect::*;
    let p = parse("[writes.tools.overridden]\nside_effect = \"delete\"\n", "t").unwrap();
    assert!(p.writes.trust_reviews, "on by default");
    let c = p.classify("lookup", Reviewed::class(Read, false));
    assert_eq!(
        (
            c.side_effect,
            c.is_write,
            c.needs_confirmation,
            c.basis,
            kind(&c.decision)
        ),
        (Some(Read), false, false, Basis::Review, "forward")
    );
    for effect in [Create, Update, Delete] {
        let c = p.classify("save", Reviewed::class(effect, false));
        assert_eq!(
            (
                c.side_effect,
                c.is_write,
                c.needs_confirmation,
                c.basis,
                kind(&c.decision)
            ),
            (Some(effect), true, true, Basis::Review, "confirm"),
            "{effect:?}"
        );
    }
    // The authority exception holds for a class from the review as for one from the policy.
    let c = p.classify("fetch", Reviewed::class(Read, true));
    assert_eq!(
        (
            c.side_effect,
            c.is_write,
            c.needs_confirmation,
            c.basis,
            kind(&c.decision)
        ),
        (None, true, true, Basis::AuthorityChannel, "confirm")
    );
    // A table wins over the review, both ways.
    let c = p.classify("overridden", Reviewed::class(Read, false));
    assert_eq!((c.side_effect, c.basis), (Some(Delete), Basis::Policy));
    let reads = parse("[writes.tools.w]\nside_effect = \"read\"\n", "t").unwrap();
    let c = reads.classify("w", Reviewed::class(Delete, false));
    assert_eq!(
        (c.side_effect, c.basis, kind(&c.decision)),
        (Some(Read), Basis::Policy, "forward")
    );

    let distrust = parse("[writes]\ntrust_reviews = false\n", "t").unwrap();
    let c = distrust.classify("lookup", Reviewed::class(Read, false));
    assert_eq!(
        (c.side_effect, c.basis, kind(&c.decision)),
        (None, Basis::Unclassified, "confirm")
    );

    // With writes.default = "refuse", a reviewed class counts as a classification.
    let refuse = parse("[writes]\ndefault = \"refuse\"\n", "t").unwrap();
    assert!(refuse.refusal("lookup", Some(Read)).is_none());
    assert!(refuse
        .refusal("lookup", None)
        .is_some_and(|r| r.contains("--side-effect")));
    let refuse_distrust = parse(
        "[writes]\ndefault = \"refuse\"\ntrust_reviews = false\n",
        "t",
    )
    .unwrap();
    assert!(refuse_distrust
        .refusal("lookup", Some(Read))
        .is_some_and(|r| !r.contains("--side-effect")));

    assert_eq!(SideEffect::parse("update"), Some(Update));
    assert_eq!(SideEffect::parse("write"), None);
    // The shipped strict profile does not take reviews on their word.
    assert!(!shipped_one("strict.toml").writes.trust_reviews);
    assert!(shipped_one("default.toml").writes.trust_reviews);
}

#[test]
fn tasks_true_is_refused_with_its_location_and_why() {
    let e = parse("[capabilities]\ntasks = true\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("t.toml:2:"), "{e}");
    assert!(
        e.contains("tasks/result") && e.contains("tasks = false"),
        "{e}"
    );
}

/// A policy that sets every optional key, so that its effective form names every key of the
/// document.
fn full_policy() -> Policy {
    let mut full = Policy::default();
    full.audit.path = PolicyPath::parse("~/audit.jsonl").ok();
    full.review.allowed_signers = PolicyPath::parse("~/signers").ok();
    full.writes.tools.insert(
        "the_tool".into(),
        ToolClass::from(RawToolClass {
            side_effect: SideEffect::Read,
            idempotency: Idempotency::Unknown,
            automatic_retry: AutomaticRetry::Never,
            confirmation: None,
            unknown_outcome: UnknownOutcome::StopAndReconcile,
        }),
    );
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(
        "/path".to_string(),
        ArgumentRule {
            paths: Some(vec![PolicyPath::parse("~/notes").unwrap()]),
            url_schemes: Some(vec!["https".into()]),
            hosts: Some(vec!["example.com".into()]),
            deny_hosts: vec!["evil.example".into()],
            pattern: Some("[a-z/]+".into()),
            max_length: Some(100),
            ..ArgumentRule::default()
        },
    );
    full.arguments.tools.insert(
        "the_tool".into(),
        ArgumentsTool {
            closed: Some(false),
            rules,
        },
    );
    full.secrets.env = vec!["MY_TOKEN".into()];
    full.secrets.tools.insert(
        "the_tool".into(),
        SecretsTool {
            allow_arguments: vec!["/password".into()],
        },
    );
    full
}

/// Every key of the policy document as a dotted name (`[writes.tools.<name>]` keys with
/// `<name>`), read off the effective policy of a policy that sets every optional key.
fn every_key() -> Vec<String> {
    let full = full_policy();
    let mut table = String::new();
    let mut keys = Vec::new();
    for line in full.effective_toml().lines() {
        let line = line.trim();
        if let Some(t) = line.strip_prefix('[') {
            table = t
                .trim_end_matches(']')
                .replace("tools.the_tool", "tools.<name>")
                .replace("rules.\"/path\"", "rules.<pointer>");
        } else if let Some((key, _)) = line.split_once(" = ") {
            keys.push(format!("{table}.{key}"));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The mechanism of issue 32: docs/policy.md's table "Every key and the test that proves it"
/// has one row per key of the policy document, and each test it names exists in the tests
/// tree (`module::function`, a `fn function(` in `tests/integration/module.rs`). A key
/// without a test fails: a key that cannot be proven is removed rather than claimed.
#[test]
fn every_policy_key_has_a_row_naming_an_existing_test() {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/policy.md")).unwrap();
    let (_, table) = doc
        .split_once("## Every key and the test that proves it")
        .expect("docs/policy.md has the table of keys and tests");
    let rows: std::collections::BTreeMap<String, String> = table
        .lines()
        .take_while(|l| l.starts_with('|') || l.trim().is_empty() || !l.starts_with('#'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let key = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((key.to_string(), cells.get(3)?.to_string()))
        })
        .collect();
    let mut problems = Vec::new();
    for key in every_key() {
        let Some(tests) = rows.get(&key) else {
            problems.push(format!("{key}: no row"));
            continue;
        };
        if tests.is_empty() || tests == "none" {
            problems.push(format!("{key}: names no test"));
            continue;
        }
        for named in tests.split(", ") {
            let named = named.trim_matches('`');
            let Some((module, function)) = named.rsplit_once("::") else {
                problems.push(format!("{key}: {named:?} is not module::function"));
                continue;
            };
            let file = root.join(format!("tests/integration/{module}.rs"));
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if !text.contains(&format!("fn {function}(")) {
                problems.push(format!("{key}: no test {named} in {}", file.display()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn connect_destinations_parse_and_only_a_name_draws_the_udp_warning() {
    let p = parse(
        "[sandbox]\nconnect = [\"127.0.0.1:5432\", \"localhost:8080\", \"[::1]:80\"]\n",
        "t.toml",
    )
    .unwrap();
    let shown: Vec<String> = p.sandbox.connect.iter().map(|d| d.to_string()).collect();
    assert_eq!(shown, ["127.0.0.1:5432", "localhost:8080", "[::1]:80"]);
    assert!(
        !p.warnings().iter().any(|w| w.contains("UDP")),
        "{:?}",
        p.warnings()
    );
    let p = parse("[sandbox]\ntcp_connect = [443]\n", "t.toml").unwrap();
    assert!(
        !p.warnings().iter().any(|w| w.contains("UDP")),
        "{:?}",
        p.warnings()
    );
    let p = parse("[sandbox]\nconnect = [\"db.example:5432\"]\n", "t.toml").unwrap();
    assert!(
        p.warnings()
            .iter()
            .any(|w| w.contains("db.example:5432") && w.contains("allow_udp")),
        "{:?}",
        p.warnings()
    );
    for bad in [
        "127.0.0.1",
        "127.0.0.1:0",
        "::1:80",
        "[::1]80",
        "a b:1",
        "host:99999",
    ] {
        let e = parse(&format!("[sandbox]\nconnect = [\"{bad}\"]\n"), "t.toml").unwrap_err();
        assert!(e.to_string().contains("HOST:PORT"), "{bad}: {e}");
    }
}

/// A call that names a credential file needs confirmation whatever the tool's class: a read
/// the policy would forward is asked about (or refused or forwarded unconfirmed, by the mode,
/// with the key named), while a refusal and a call already asked about stay as they were.
#[test]
fn a_credential_file_in_the_arguments_makes_a_read_need_confirmation() {
    use SideEffect::*;
    let reads =
        "[writes.tools.r]\nside_effect = \"read\"\n[writes.tools.w]\nside_effect = \"create\"\n";
    for (mode, want) in [
        ("elicit", "confirm"),
        ("allow", "unconfirmed"),
        ("deny", "refuse"),
    ] {
        let p = parse(&format!("{reads}[confirmation]\nmode = \"{mode}\"\n"), "t").unwrap();
        let read = p.classify("r", Reviewed::NONE);
        assert_eq!(kind(&read.decision), "forward");
        let c = p.confirm_argument("r", read, Basis::CredentialPath);
        assert_eq!(
            (
                c.side_effect,
                c.needs_confirmation,
                c.basis,
                kind(&c.decision)
            ),
            (Some(Read), true, Basis::CredentialPath, want),
            "{mode}"
        );
        if let Decision::Refuse(why) = &c.decision {
            assert!(why.contains("arguments.confirm_credential_paths"), "{why}");
        }
        // A write is asked about for what it is.
        let write = p.classify("w", Reviewed::NONE);
        assert_eq!(
            p.confirm_argument("w", write.clone(), Basis::RemoteCode),
            write
        );
    }
    let refusing = parse("[writes]\ndefault = \"refuse\"\n", "t").unwrap();
    let refused = refusing.classify("unknown", Reviewed::NONE);
    assert_eq!(kind(&refused.decision), "refuse");
    assert_eq!(
        refusing.confirm_argument("unknown", refused.clone(), Basis::CredentialPath),
        refused
    );
    assert!(Policy::default().arguments.confirm_credential_paths);
}

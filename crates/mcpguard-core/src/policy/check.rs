//! What `mcpguard policy check` reports: the rules across keys that a value's type cannot express
//! (validation), the warnings, and the effective policy as TOML.

use std::collections::BTreeSet;

use super::*;

impl Policy {
    /// Rules a single value's type cannot express: ranges and rules across keys. The first
    /// problem is reported; fixing it and checking again shows the next.
    pub(super) fn validate(&self) -> Result<(), Problem> {
        if self.capabilities.tasks {
            // A task's real result comes back through `tasks/result`, which the gate would relay
            // without the checks a call's result gets (output schema, redaction, labels, error
            // hygiene). Until it runs them, tasks cannot be let through at all.
            return Err(Problem::at(
                &["capabilities", "tasks"],
                "capabilities.tasks = true is not accepted: the result of a task-augmented call (tasks/result) would reach the host without the output-schema, secret, label and error-text checks every call result gets. Set tasks = false or remove the key; task-augmented calls and tasks/* are refused, and the tasks capability is withheld from both sides",
            ));
        }
        if self.review.max_validity > MAX_REVIEW_VALIDITY {
            return Err(Problem::at(
                &["review", "max_validity"],
                format!(
                    "review.max_validity is {}; the longest accepted validity is 365d",
                    format_duration(self.review.max_validity)
                ),
            ));
        }
        non_empty_entries(
            &self.review.forbidden_side_effects,
            &["review", "forbidden_side_effects"],
        )?;
        non_empty_entries(&self.review.refused_tools, &["review", "refused_tools"])?;
        if self.writes.tools.keys().any(String::is_empty) {
            return Err(Problem::at(
                &["writes", "tools"],
                "writes.tools has an entry with an empty tool name",
            ));
        }
        if self.arguments.tools.keys().any(String::is_empty) {
            return Err(Problem::at(
                &["arguments", "tools"],
                "arguments.tools has an entry with an empty tool name",
            ));
        }
        if self.confirmation.timeout > MAX_CONFIRMATION_TIMEOUT {
            return Err(Problem::at(
                &["confirmation", "timeout"],
                format!(
                    "confirmation.timeout is {}; the longest is 1h",
                    format_duration(self.confirmation.timeout)
                ),
            ));
        }
        if self.confirmation.identical_for > MAX_CONFIRMATION_TIMEOUT {
            return Err(Problem::at(
                &["confirmation", "identical_for"],
                format!(
                    "confirmation.identical_for is {}; the longest is 1h, so a standing approval is of a situation the person still remembers",
                    format_duration(self.confirmation.identical_for)
                ),
            ));
        }
        let channels = &self.confirmation.channels;
        if let Some((_, c)) = channels
            .iter()
            .enumerate()
            .find(|(i, c)| channels[..*i].contains(c))
        {
            return Err(Problem::at(
                &["confirmation", "channels"],
                format!(
                    "confirmation.channels names \"{}\" twice; list each channel once, in the order they are offered",
                    c.name()
                ),
            ));
        }
        non_empty_entries(&self.capabilities.pass_meta, &["capabilities", "pass_meta"])?;
        let (min_bytes, max_bytes) = MESSAGE_BYTES_RANGE;
        if !(min_bytes..=max_bytes).contains(&self.limits.max_message_bytes) {
            return Err(Problem::at(
                &["limits", "max_message_bytes"],
                format!(
                    "limits.max_message_bytes must be between {min_bytes} (4 KiB) and {max_bytes} (1 GiB)"
                ),
            ));
        }
        if !(1..=4096).contains(&self.limits.max_calls_in_flight) {
            return Err(Problem::at(
                &["limits", "max_calls_in_flight"],
                "limits.max_calls_in_flight must be between 1 and 4096",
            ));
        }
        if self.limits.call_timeout > MAX_CALL_TIMEOUT {
            return Err(Problem::at(
                &["limits", "call_timeout"],
                format!(
                    "limits.call_timeout is {}; the longest is 1d",
                    format_duration(self.limits.call_timeout)
                ),
            ));
        }
        if !(1..=100_000).contains(&self.limits.max_pages) {
            return Err(Problem::at(
                &["limits", "max_pages"],
                "limits.max_pages must be between 1 and 100000",
            ));
        }
        if self.errors.max_length < 64 {
            return Err(Problem::at(
                &["errors", "max_length"],
                "errors.max_length must be at least 64 characters, or the error says nothing useful",
            ));
        }
        if self.errors.max_length > self.limits.max_message_bytes {
            return Err(Problem::at_any(
                &[&["errors", "max_length"], &["limits", "max_message_bytes"]],
                format!(
                    "errors.max_length ({}) exceeds limits.max_message_bytes ({}): the error could never be delivered",
                    self.errors.max_length, self.limits.max_message_bytes
                ),
            ));
        }
        if let Some(path) = &self.audit.path {
            if path.base() == PathBase::TmpDir {
                return Err(Problem::at(
                    &["audit", "path"],
                    "audit.path must not be under $TMPDIR: that directory is removed when the server exits, and the log with it",
                ));
            }
            if path.as_str().ends_with('/') || path.rest.is_empty() {
                return Err(Problem::at(
                    &["audit", "path"],
                    format!(
                        "audit.path {:?} names a directory; name the log file",
                        path.as_str()
                    ),
                ));
            }
        }
        self.validate_content()?;
        self.validate_sandbox()
    }

    /// `[secrets]`, `[results]` and the argument rules: patterns that compile (with the bound
    /// the detectors use), pointers that are pointers, label names that exist.
    fn validate_content(&self) -> Result<(), Problem> {
        let compiles = |p: &str| {
            regex::RegexBuilder::new(p)
                .size_limit(PATTERN_SIZE_LIMIT)
                .dfa_size_limit(PATTERN_SIZE_LIMIT)
                .build()
                .map(|_| ())
        };
        let pointer = |p: &str| p.is_empty() || p.starts_with('/');
        for (name, pattern) in &self.secrets.patterns {
            if name.is_empty() {
                return Err(Problem::at(
                    &["secrets", "patterns"],
                    "secrets.patterns has an entry with an empty name",
                ));
            }
            if let Err(e) = compiles(pattern) {
                return Err(Problem::at(
                    &["secrets", "patterns"],
                    format!("secrets.patterns.{name} is not a valid pattern: {e}"),
                ));
            }
        }
        non_empty_entries(&self.secrets.env, &["secrets", "env"])?;
        for (tool, t) in &self.secrets.tools {
            if let Some(p) = t.allow_arguments.iter().find(|p| !pointer(p)) {
                return Err(Problem::at(&["secrets", "tools"], format!("secrets.tools.{tool}.allow_arguments: {p:?} is not a JSON pointer (it must be empty or start with /)")));
            }
        }
        for (tool, t) in &self.arguments.tools {
            for (p, rule) in &t.rules {
                if !pointer(p) {
                    return Err(Problem::at(&["arguments", "tools"], format!("arguments.tools.{tool}.rules: {p:?} is not a JSON pointer (it must be empty or start with /)")));
                }
                if let Some(pattern) = &rule.pattern {
                    if let Err(e) = compiles(&format!("^(?:{pattern})$")) {
                        return Err(Problem::at(&["arguments", "tools"], format!("arguments.tools.{tool}.rules.{p:?}.pattern is not a valid pattern: {e}")));
                    }
                }
                if rule.paths.as_ref().is_some_and(Vec::is_empty)
                    || rule.hosts.as_ref().is_some_and(Vec::is_empty)
                    || rule.url_schemes.as_ref().is_some_and(Vec::is_empty)
                {
                    return Err(Problem::at(&["arguments", "tools"], format!("arguments.tools.{tool}.rules.{p:?}: an empty paths, hosts or url_schemes list would refuse every value; leave the key out, or list what is allowed")));
                }
            }
        }
        if let Some(label) = self
            .results
            .labels
            .iter()
            .find(|l| !RESULT_LABEL_NAMES.contains(&l.as_str()))
        {
            return Err(Problem::at(
                &["results", "labels"],
                format!(
                    "results.labels: unknown label {label:?}; the labels are {}",
                    RESULT_LABEL_NAMES.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Choices that are valid but weaken or surprise, for `mcpguard policy check` and the start-up
    /// diagnostics. Each is a full sentence.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.confirmation.mode == ConfirmationMode::Elicit
            && self.confirmation.channels.is_empty()
        {
            w.push("confirmation.channels is empty: nobody can be asked, so every write that needs confirmation is refused".to_string());
        }
        if self.confirmation.allow_tool_for_session {
            w.push("confirmation.allow_tool_for_session = true: one answer may let every later call of a tool through, whatever its arguments, until mcpguard ends (never for tools whose review marks an argument as authority)".to_string());
        }
        match self.confirmation.mode {
            ConfirmationMode::Allow => w.push(
                "confirmation.mode = \"allow\": writes are forwarded without asking anyone; each is audited as unconfirmed".to_string(),
            ),
            ConfirmationMode::Elicit if self.capabilities.elicitation => w.push(
                "capabilities.elicitation = true while confirmations are elicited: the server can show the user prompts that look like mcpguard's own approval requests".to_string(),
            ),
            _ => {}
        }
        if self.capabilities.sampling {
            w.push("capabilities.sampling = true: the server can ask the host's model to generate text, with prompts of its own making".to_string());
        }
        if self.capabilities.roots {
            w.push("capabilities.roots = true: the server learns the host's roots, and some servers widen their file access to them".to_string());
        }
        if self.capabilities.prompts || self.capabilities.resources {
            w.push("capabilities.prompts or capabilities.resources is true: that content reaches the model without being part of the reviewed snapshot".to_string());
        }
        if self
            .capabilities
            .pass_meta
            .iter()
            .any(|k| k == "progressToken")
        {
            w.push("capabilities.pass_meta lists progressToken, which always passes; the entry has no effect".to_string());
        }
        if !self.arguments.closed {
            w.push("arguments.closed = false: calls may carry arguments the reviewed inputSchema does not declare, and the server gets them unseen by the reviewer".to_string());
        }
        if !self.arguments.confirm_remote_code {
            w.push("arguments.confirm_remote_code = false: a call may download code and run it (curl ... | sh) without anyone being asked".to_string());
        }
        if !self.arguments.confirm_credential_paths {
            w.push("arguments.confirm_credential_paths = false: a call may name one of your credential files (~/.ssh/id_rsa, .env, .aws/credentials) without anyone being asked".to_string());
        }
        if !self.arguments.refuse_metadata_urls {
            w.push("arguments.refuse_metadata_urls = false: a call may send the server a URL to a cloud metadata address, which hands out this machine's cloud credentials".to_string());
        }
        if self.secrets.results == SecretInResults::Off {
            w.push("secrets.results = \"off\": credentials in tool results and error text reach the model unredacted".to_string());
        }
        if self.secrets.arguments == SecretInArguments::Off {
            w.push("secrets.arguments = \"off\": the model can send credentials to the server in any argument".to_string());
        }
        if !self.secrets.builtin && self.secrets.patterns.is_empty() && self.secrets.env.is_empty()
        {
            w.push("secrets.builtin = false with no patterns and no env: no secret-shaped value is looked for".to_string());
        }
        if self.results.injection == Injection::Off {
            w.push("results.injection = \"off\": instruction-like text in tool results reaches the model without a note".to_string());
        }
        if self.audit.payload == AuditPayload::Full {
            w.push("audit.payload = \"full\": argument and result values, which may include secrets, are written to the audit log".to_string());
        }
        if self.audit.path.is_some() && !self.audit.sink.contains(&AuditSink::File) {
            w.push("audit.path is set but audit.sink has no \"file\": the file is not written (only --audit-log would write one)".to_string());
        }
        if self.audit.sink.is_empty() {
            w.push(
                "audit.sink = []: no decision is recorded anywhere unless --audit-log names a file"
                    .to_string(),
            );
        }
        for tool in &self.review.refused_tools {
            if self.writes.tools.contains_key(tool) {
                w.push(format!("tool {tool:?} is in review.refused_tools, so its [writes.tools] classification has no effect"));
            }
        }
        for (name, class) in &self.writes.tools {
            if class.side_effect == SideEffect::Read
                && class.idempotency == Idempotency::NonIdempotent
            {
                w.push(format!("tool {name:?} is classified as a read but non-idempotent; check the classification"));
            }
        }
        for (key, list) in [
            (
                "review.forbidden_side_effects",
                &self.review.forbidden_side_effects,
            ),
            ("review.refused_tools", &self.review.refused_tools),
            ("capabilities.pass_meta", &self.capabilities.pass_meta),
            ("sandbox.env", &self.sandbox.env),
        ] {
            duplicates(key, list.iter().map(String::as_str), &mut w);
        }
        self.sandbox_warnings(&mut w);
        w
    }

    /// The effective policy as TOML, every default written out, for `mcpguard policy check`.
    /// Parsing the result gives this policy back.
    pub fn effective_toml(&self) -> String {
        let mut out =
            String::from("# The effective mcpguard policy: every key, defaults filled in.\n");
        if self.audit.path.is_none() {
            out.push_str(
                "# audit.path is not set: no audit log file unless --audit-log names one.\n",
            );
        }
        out.push('\n');
        match toml::to_string_pretty(self) {
            Ok(body) => out.push_str(&body),
            // Every value here has a TOML form, so this is not expected; the text still says what
            // went wrong instead of printing half a policy.
            Err(e) => out.push_str(&format!("# mcpguard could not render the policy: {e}\n")),
        }
        out
    }
}

pub(super) fn non_empty_entries(list: &[String], path: &[&'static str]) -> Result<(), Problem> {
    if let Some(i) = list.iter().position(|s| s.trim().is_empty()) {
        return Err(Problem::at_item(
            path,
            i,
            format!("{} has an empty entry", path.join(".")),
        ));
    }
    Ok(())
}

pub(super) fn duplicates<'a>(key: &str, items: impl Iterator<Item = &'a str>, w: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for item in items {
        if !seen.insert(item) && reported.insert(item) {
            w.push(format!("{key} lists {item:?} more than once"));
        }
    }
}

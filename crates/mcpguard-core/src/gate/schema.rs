//! JSON Schema validation of tool arguments (`inputSchema`) and structured results
//! (`outputSchema`).
//!
//! A reviewed tool's schemas are compiled once, when the snapshot is loaded, and every
//! `tools/call` is checked against them before it is forwarded (SPEC §3 items 4 and 5). The
//! schemas come from the server, so they are treated as hostile input even though a person
//! reviewed them:
//!
//! - The dialect is 2020-12 unless the schema declares one mcpguard knows; any other `$schema` is
//!   refused, because guessing a dialect could turn a keyword the author meant as a constraint
//!   into one that is silently ignored.
//! - References are resolved only inside the schema document. A retriever that refuses every URI
//!   is installed, so compiling never touches the network or the file system, and a schema that
//!   needs an outside document is refused with the URI named.
//! - `pattern` and `patternProperties` run on the `regex` crate's linear-time engine. Patterns it
//!   cannot express (lookaround, backreferences) are refused rather than handed to a backtracking
//!   engine that a crafted pattern and argument could keep busy for hours.
//! - Size is bounded before the schema reaches the compiler: nesting depth and the number of
//!   subschemas. After compiling, the number of subschemas that `$ref` expansion makes a
//!   validator visit is bounded too (thirty small definitions that each reference the next one
//!   twice made a single validation run for a minute).
//! - Time is bounded per validation: jsonschema evaluates a subschema once for every path that
//!   reaches it, so a recursive schema can take time exponential in the depth of the instance.
//!   Before each validation mcpguard counts, on a graph of the schema, how many evaluations it can
//!   take at most, and refuses instances that need more than a budget proportional to their size
//!   (see `Graph`).
//! - `format` is an annotation, never an assertion (see `build_options`).
//!
//! Violation messages are built from the kind of error and never contain the instance's values:
//! tool arguments can carry secrets, and these messages go to the host, to stderr and to the audit
//! log.
//!
//! Pure; knows JSON Schema and nothing of the session, the snapshot file, processes or IO.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{
    Draft, PatternOptions, ReferencingError, Retrieve, Uri, ValidationError, Validator,
};
use referencing::{Registry, Resolver};
use serde_json::Value;

/// The deepest nesting of JSON arrays and objects a schema may have (the root object is level 1).
pub const MAX_DEPTH: usize = 64;

/// The most JSON objects a schema may contain, counted wherever they appear.
pub const MAX_SUBSCHEMAS: usize = 10_000;

/// The most subschemas a schema may reach when every `$ref` is followed as if it were inlined.
///
/// References let a small document describe an exponentially large schema, which makes every
/// validation expensive whatever the instance. The per-call bound below would refuse every call;
/// this refuses the schema when the tool is reviewed instead, with a message the reviewer can act
/// on. A million subschemas is far above what any tool plausibly needs.
pub const MAX_EXPANDED_SUBSCHEMAS: u64 = 1_000_000;

/// The (subschema, instance location) evaluations every validation may make, whatever the size
/// of the instance. Counting them and jsonschema's boolean check each take a few tens of
/// nanoseconds per evaluation at most, so this is a few tens of milliseconds at worst.
pub const WORK_BASE: u64 = 1_000_000;

/// The evaluations a validation may make for each value in the instance, on top of
/// [`WORK_BASE`], so that large but ordinary instances are not refused: work that grows with the
/// size of the input is what any proxy pays.
pub const WORK_PER_VALUE: u64 = 64;

/// The evaluations up to which an invalid instance gets detailed violations. Collecting errors
/// costs up to a microsecond per evaluation when failed `anyOf` or `oneOf` branches pile up (an
/// expression tree nested fourteen deep took a third of a second), so past this the instance is
/// refused with a single violation that does not say where: about a tenth of a second at worst.
pub const DETAIL_WORK_LIMIT: u64 = 100_000;

/// The most violations one validation reports. Collecting stops there so that a huge invalid
/// instance cannot produce a huge error message.
pub const MAX_VIOLATIONS: usize = 10;

/// The size limit handed to the regex engine for one compiled pattern, in bytes. Counted
/// repetitions such as `a{1000}{1000}` compile to very large programs; tool schemas never need
/// one anywhere near this big.
const MAX_REGEX_BYTES: usize = 1 << 20;

/// How many characters of schema text (a URI, a pattern, a pointer) a message quotes at most.
const MAX_QUOTED_CHARS: usize = 200;

/// The base URI jsonschema gives a schema without `$id`; the bounds check resolves references
/// against the same base so that both agree on what every `$ref` means.
const DEFAULT_BASE_URI: &str = "json-schema:///";

/// A JSON Schema dialect mcpguard compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Draft4,
    Draft6,
    Draft7,
    Draft201909,
    Draft202012,
}

impl Dialect {
    fn draft(self) -> Draft {
        match self {
            Dialect::Draft4 => Draft::Draft4,
            Dialect::Draft6 => Draft::Draft6,
            Dialect::Draft7 => Draft::Draft7,
            Dialect::Draft201909 => Draft::Draft201909,
            Dialect::Draft202012 => Draft::Draft202012,
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dialect::Draft4 => "draft-04",
            Dialect::Draft6 => "draft-06",
            Dialect::Draft7 => "draft-07",
            Dialect::Draft201909 => "2019-09",
            Dialect::Draft202012 => "2020-12",
        })
    }
}

/// Why a schema was refused at compile time. Every refusal is final: mcpguard does not fall back
/// to a weaker check, so a tool whose schema is refused cannot be called through the gate.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// `$schema` names a dialect other than 2020-12, 2019-09, draft-07, draft-06 or draft-04.
    #[error(
        "The schema declares \"$schema\": {declared}, which is not a JSON Schema dialect mcpguard \
         supports (2020-12, 2019-09, draft-07, draft-06, draft-04). mcpguard refuses unknown \
         dialects rather than guess how to read them; the server must declare a supported dialect \
         or omit \"$schema\" (which means 2020-12)."
    )]
    UnknownDialect { declared: String },

    /// A `$ref` needs a document other than the schema itself.
    #[error(
        "The schema refers to \"{uri}\", which is outside the schema document. mcpguard never \
         fetches remote or local files for a schema; the server must inline the referenced schema \
         (for example under \"$defs\") and the tool must be captured and reviewed again."
    )]
    RemoteRef { uri: String },

    /// A `pattern` or `patternProperties` key the linear-time engine cannot compile.
    #[error(
        "The regular expression \"{pattern}\" at \"{pointer}\" cannot be compiled by mcpguard's \
         linear-time regex engine (lookaround, backreferences and very large patterns are not \
         supported). mcpguard refuses such patterns because a backtracking engine can be made to \
         run for hours; the server must simplify the pattern."
    )]
    BadRegex { pointer: String, pattern: String },

    /// The schema nests arrays and objects deeper than [`MAX_DEPTH`].
    #[error(
        "The schema is nested {depth} levels deep, more than the limit of {limit}. mcpguard bounds \
         schema nesting so that compiling and validating cannot exhaust the stack; the server must \
         flatten the schema (for example with \"$defs\" and \"$ref\")."
    )]
    TooDeep { depth: usize, limit: usize },

    /// The schema has more than [`MAX_SUBSCHEMAS`] objects.
    #[error(
        "The schema contains {count} objects (subschemas and object values), more than the limit \
         of {limit}. mcpguard bounds schema size so that compiling and validating stay fast; the \
         server must simplify the schema."
    )]
    TooLarge { count: usize, limit: usize },

    /// `$ref` expansion reaches more than [`MAX_EXPANDED_SUBSCHEMAS`] subschemas.
    #[error(
        "Following the schema's \"$ref\" references reaches more than {limit} subschemas, so \
         validating one call could take exponential time. mcpguard refuses such schemas; the \
         server must simplify the schema (for example by not referencing the same definition \
         from several branches of a chain of anyOf, oneOf or allOf)."
    )]
    TooComplex { limit: u64 },

    /// The schema breaks its dialect's meta-schema, has a broken local reference, or is not an
    /// object or a boolean.
    #[error(
        "The schema is not a valid {dialect} JSON Schema: at \"{pointer}\", {reason}. The server \
         must fix the tool's schema, and the tool must be captured and reviewed again."
    )]
    Invalid {
        dialect: Dialect,
        pointer: String,
        reason: String,
    },
}

/// One way an instance fails its schema. None of the fields contains a value taken from the
/// instance, apart from the object keys and array indices that make up `instance_pointer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// RFC 6901 pointer to the offending part of the instance (empty for the whole instance),
    /// with invisible and control characters escaped and cut to 200 characters for display.
    pub instance_pointer: String,
    /// RFC 6901 pointer to the schema keyword that failed, escaped and cut the same way.
    pub schema_pointer: String,
    /// A short description derived from the kind of error, without instance values.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instance_pointer.is_empty() {
            write!(f, "(root): {}", self.message)
        } else {
            write!(f, "{}: {}", self.instance_pointer, self.message)
        }
    }
}

/// One line for people: how many violations there are and what each one is.
pub fn summary(violations: &[Violation]) -> String {
    let listed: Vec<String> = violations.iter().map(Violation::to_string).collect();
    match violations.len() {
        0 => "no schema violations".to_owned(),
        1 => format!("1 schema violation: {}", listed[0]),
        n if n >= MAX_VIOLATIONS => format!(
            "{n} or more schema violations (only the first {MAX_VIOLATIONS} are reported): {}",
            listed.join("; ")
        ),
        n => format!("{n} schema violations: {}", listed.join("; ")),
    }
}

/// A compiled schema, ready to validate any number of instances from any thread.
pub struct CompiledSchema {
    validator: Validator,
    graph: Graph,
    dialect: Dialect,
}

impl fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

/// Compiles a tool's `inputSchema` or `outputSchema`, refusing anything mcpguard cannot validate
/// safely (see the module documentation).
pub fn compile(schema: &Value) -> Result<CompiledSchema, SchemaError> {
    // The bounds come first: jsonschema's compiler recurses over the document, and a hostile
    // schema must not reach it before its shape is known to be reasonable.
    check_bounds(schema)?;
    let dialect = dialect_of(schema)?;
    if !schema.is_object() && !schema.is_boolean() {
        return Err(SchemaError::Invalid {
            dialect,
            pointer: String::new(),
            reason: "a schema must be a JSON object or a boolean".to_owned(),
        });
    }
    let options = build_options(dialect);
    // jsonschema does not panic on bad schemas as far as we know, but it is third-party code fed
    // with input from the server: a panic here must refuse the schema, not take the proxy down.
    let built = catch_unwind(AssertUnwindSafe(|| options.build(schema))).map_err(|_| {
        SchemaError::Invalid {
            dialect,
            pointer: String::new(),
            reason: "the schema compiler failed internally".to_owned(),
        }
    })?;
    let validator = built.map_err(|err| build_error(&err, dialect))?;
    // The graph is built after a successful build, which has already proven that every
    // reference resolves inside the document.
    let graph = build_graph(schema, dialect)?;
    graph.check_expansion()?;
    Ok(CompiledSchema {
        validator,
        graph,
        dialect,
    })
}

/// Does the validator's one-time set-up (building its meta-schemas, 1.3 to 2.4 ms on the
/// benchmark machine, paid by the first compile in a process). The proxy runs it on a thread of
/// its own at start, so that it overlaps reading the policy, hashing the snapshot and preparing
/// the sandbox instead of following them; the first tool's compile (after the snapshot is
/// verified, see `pin::Loaded`) then finds it done, or waits for the rest of it.
pub fn warm_up() {
    let _ = compile(&serde_json::json!({"type": "object"}));
}

impl CompiledSchema {
    /// The dialect the schema was compiled as.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Validates `instance`, reporting at most [`MAX_VIOLATIONS`] violations.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<Violation>> {
        let limit = WORK_BASE.saturating_add(WORK_PER_VALUE.saturating_mul(count_values(instance)));
        let Some(evaluations) = self.graph.evaluations(instance, limit) else {
            return Err(vec![whole_value_violation(
                "value is too complex to validate against this schema in bounded time, so it is \
                 refused",
            )]);
        };
        // As in `compile`: a panic in the validator refuses the instance (fail closed) instead of
        // unwinding through the proxy.
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // The boolean check stops at the first failure and costs a few nanoseconds per
            // evaluation; errors are only collected once the instance is known to be invalid.
            if self.validator.is_valid(instance) {
                return Ok(());
            }
            // Collecting errors explores every branch and keeps the errors of failed `anyOf` and
            // `oneOf` branches, which costs up to a microsecond per evaluation: past the detail
            // limit the instance is refused without saying where.
            if evaluations > DETAIL_WORK_LIMIT {
                return Err(vec![whole_value_violation(
                    "value does not match the schema (no details: finding them would take too \
                     long)",
                )]);
            }
            let mut violations: Vec<Violation> = self
                .validator
                .iter_errors(instance)
                .take(MAX_VIOLATIONS)
                .map(|err| violation(&err))
                .collect();
            if violations.is_empty() {
                // The two entry points disagreeing would be a jsonschema bug; the instance was
                // still judged invalid, so it stays refused.
                violations.push(internal_violation());
            }
            Err(violations)
        }));
        outcome.unwrap_or_else(|_| Err(vec![internal_violation()]))
    }
}

impl CompiledSchema {
    /// The members of `instance` that the schema does not declare, as RFC 6901 pointers (at most
    /// [`MAX_VIOLATIONS`], escaped and cut like [`Violation::instance_pointer`]; never a value):
    /// the closed-arguments check, run on arguments that [`Self::validate`] accepted.
    ///
    /// At each object in the instance, the subschemas that apply there are gathered as
    /// validation would reach them (`properties`, `patternProperties`, `additionalProperties`,
    /// `unevaluatedProperties`, items, and in place `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`,
    /// `dependentSchemas` and local `$ref`), every branch counted whether it matched or not.
    /// The object is *closed* when one of them declares members (`properties` or
    /// `patternProperties`) and none opens it (`additionalProperties` or
    /// `unevaluatedProperties` other than `false`). A member of a closed object is declared when
    /// one of them names it in `properties`, `required` or `dependentRequired` or matches it with a
    /// `patternProperties` pattern; any other member is undeclared. Subschemas under `not`
    /// neither declare nor open. An object no subschema declares members for (`{"type":
    /// "object"}`) stays free-form.
    pub fn undeclared(&self, instance: &Value) -> Vec<String> {
        let mut found = Vec::new();
        if self.graph.nodes.is_empty() {
            return found;
        }
        let mut pending: Vec<(String, &Value, Vec<usize>)> =
            vec![(String::new(), instance, vec![0])];
        while let Some((pointer, value, roots)) = pending.pop() {
            let nodes = self.graph.in_place_closure(roots);
            match value {
                Value::Object(map) => {
                    let members = |id: &usize| &self.graph.nodes[*id].members;
                    let closed = nodes.iter().any(|id| members(id).declares)
                        && !nodes.iter().any(|id| members(id).opens);
                    for (name, member) in map {
                        let (declared, children) = self.graph.member_targets(&nodes, name);
                        if closed && !declared {
                            found.push(quote_text(&child_pointer(&pointer, name)));
                            if found.len() >= MAX_VIOLATIONS {
                                return found;
                            }
                        } else if member.is_object() || member.is_array() {
                            pending.push((child_pointer(&pointer, name), member, children));
                        }
                    }
                }
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        if !(item.is_object() || item.is_array()) {
                            continue;
                        }
                        let mut children = Vec::new();
                        for &id in &nodes {
                            let node = &self.graph.nodes[id];
                            children.extend(node.positional.get(index).copied());
                            children.extend_from_slice(&node.every_item);
                        }
                        pending.push((child_pointer(&pointer, &index.to_string()), item, children));
                    }
                }
                _ => {}
            }
        }
        found
    }
}

/// `pointer` extended by one reference token, escaped as RFC 6901 says.
fn child_pointer(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

impl Graph {
    /// The subschemas that apply at the location where `roots` apply: `roots` and, transitively,
    /// their in-place subschemas except those under `not`; each once.
    ///
    /// The work is proportional to the subschemas found (not to the size of the schema), so the
    /// whole check costs no more than the (subschema, location) evaluations that
    /// [`CompiledSchema::validate`] has already bounded.
    fn in_place_closure(&self, roots: Vec<usize>) -> Vec<usize> {
        let mut seen = std::collections::HashSet::new();
        let mut all = Vec::new();
        let mut pending = roots;
        while let Some(id) = pending.pop() {
            if !seen.insert(id) {
                continue;
            }
            all.push(id);
            let node = &self.nodes[id];
            let applied = node.in_place.iter().copied();
            pending.extend(applied.filter(|t| !node.members.negated.contains(t)));
        }
        all
    }

    /// Whether one of `nodes` (the subschemas that apply at an object) declares the member
    /// `name`, and the subschemas that apply to its value.
    fn member_targets(&self, nodes: &[usize], name: &str) -> (bool, Vec<usize>) {
        let mut declared = false;
        let mut children = Vec::new();
        let mut key: Option<Value> = None;
        for &id in nodes {
            let node = &self.nodes[id];
            let mut named = node.members.required.iter().any(|r| r == name);
            if let Some(&target) = node.properties.get(name) {
                children.push(target);
                named = true;
            }
            for (matcher, target) in &node.members.patterns {
                let key = key.get_or_insert_with(|| Value::String(name.to_owned()));
                if matcher.is_valid(key) {
                    children.push(*target);
                    named = true;
                }
            }
            if !named {
                children.extend_from_slice(&node.other_members);
            }
            declared |= named;
        }
        if !declared {
            for &id in nodes {
                children.extend_from_slice(&self.nodes[id].members.unevaluated);
            }
        }
        (declared, children)
    }
}

/// The member names a `dependentRequired` (or draft-07 `dependencies`) object mentions: its keys
/// and the names in its array values.
fn required_names(value: &Value) -> Vec<String> {
    let Some(map) = value.as_object() else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for (key, list) in map {
        if let Some(list) = list.as_array() {
            names.push(key.clone());
            names.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
        }
    }
    names
}

/// A `patternProperties` pattern compiled by jsonschema with the options of every schema, so
/// that it matches member names exactly as validation matches them.
fn pattern_matcher(pattern: &str, draft: Draft) -> Result<Validator, SchemaError> {
    jsonschema::options()
        .with_draft(draft)
        .with_retriever(RefuseRetriever)
        .with_pattern_options(PatternOptions::regex().size_limit(MAX_REGEX_BYTES))
        .build(&serde_json::json!({ "pattern": pattern }))
        .map_err(|_| SchemaError::BadRegex {
            pointer: "patternProperties".to_owned(),
            pattern: quote_text(pattern),
        })
}

/// Builds the jsonschema options every schema is compiled with.
fn build_options(dialect: Dialect) -> jsonschema::ValidationOptions<'static> {
    jsonschema::options()
        // The dialect is decided by `dialect_of`, never by jsonschema's own detection, which
        // would treat an unknown `$schema` as a custom meta-schema to be retrieved.
        .with_draft(dialect.draft())
        .with_retriever(RefuseRetriever)
        // Setting a size limit also makes jsonschema compile every pattern with the engine at
        // build time, so a pattern the engine rejects fails the build instead of a later call.
        .with_pattern_options(PatternOptions::regex().size_limit(MAX_REGEX_BYTES))
        // `format` is an annotation, as the 2020-12 default says. Older drafts let validators
        // assert it, but format checkers disagree on details (what a valid "uri" or "date-time"
        // is), and refusing a call because mcpguard's checker is stricter than the server's would
        // break reviewed tools without making anything safer: the server validates its own input.
        .should_validate_formats(false)
}

/// Refuses every URI, so that compiling a schema never performs network or file access.
struct RefuseRetriever;

impl Retrieve for RefuseRetriever {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("mcpguard does not fetch schema documents (asked for {uri})").into())
    }
}

/// Reads the dialect from `$schema`: absent means 2020-12, a known meta-schema URI (http or
/// https, with or without the empty fragment) means that draft, anything else is refused.
fn dialect_of(schema: &Value) -> Result<Dialect, SchemaError> {
    let Some(declared) = schema.as_object().and_then(|obj| obj.get("$schema")) else {
        return Ok(Dialect::Draft202012);
    };
    let unknown = || SchemaError::UnknownDialect {
        declared: quote_text(&declared.to_string()),
    };
    let uri = declared.as_str().ok_or_else(unknown)?;
    let uri = uri.strip_suffix('#').unwrap_or(uri);
    let path = uri
        .strip_prefix("https://json-schema.org/")
        .or_else(|| uri.strip_prefix("http://json-schema.org/"))
        .ok_or_else(unknown)?;
    match path {
        "draft/2020-12/schema" => Ok(Dialect::Draft202012),
        "draft/2019-09/schema" => Ok(Dialect::Draft201909),
        "draft-07/schema" => Ok(Dialect::Draft7),
        "draft-06/schema" => Ok(Dialect::Draft6),
        "draft-04/schema" => Ok(Dialect::Draft4),
        _ => Err(unknown()),
    }
}

/// Measures nesting depth and counts objects without recursion, so that even a value built in
/// memory deeper than serde_json's parser would allow cannot overflow the stack here.
fn check_bounds(schema: &Value) -> Result<(), SchemaError> {
    let mut max_depth = 0;
    let mut objects = 0;
    let mut pending: Vec<(&Value, usize)> = vec![(schema, 1)];
    while let Some((value, depth)) = pending.pop() {
        match value {
            Value::Object(map) => {
                objects += 1;
                max_depth = max_depth.max(depth);
                pending.extend(map.values().map(|child| (child, depth + 1)));
            }
            Value::Array(items) => {
                max_depth = max_depth.max(depth);
                pending.extend(items.iter().map(|child| (child, depth + 1)));
            }
            _ => {}
        }
    }
    if max_depth > MAX_DEPTH {
        return Err(SchemaError::TooDeep {
            depth: max_depth,
            limit: MAX_DEPTH,
        });
    }
    if objects > MAX_SUBSCHEMAS {
        return Err(SchemaError::TooLarge {
            count: objects,
            limit: MAX_SUBSCHEMAS,
        });
    }
    Ok(())
}

/// The schema as a graph of subschemas, kept beside the validator to bound the work of each
/// validation before jsonschema starts it.
///
/// jsonschema does not memoize: a subschema reached along several paths is evaluated once per
/// path, and a recursive schema whose branches descend into the same part of the instance (an
/// expression tree written as `anyOf` of object shapes, say) takes time exponential in the
/// instance's depth. An ordinary-looking schema of that kind and an argument nested twenty levels
/// deep kept jsonschema busy for half a minute. jsonschema has no step limit, so mcpguard counts
/// beforehand, on this graph, how many (subschema, instance location) evaluations a validation can
/// make at most, and refuses instances that would need too many.
#[derive(Debug, Default)]
struct Graph {
    nodes: Vec<GraphNode>,
}

/// One subschema and the subschemas its keywords apply, grouped by where they apply.
#[derive(Debug, Default)]
struct GraphNode {
    /// Applied to the same instance location: `allOf`, `anyOf`, `oneOf`, `not`, `if`, `then`,
    /// `else`, `dependentSchemas`, schema-valued `dependencies`, and reference targets.
    in_place: Vec<usize>,
    /// `properties`: applied to the member with that name.
    properties: HashMap<String, usize>,
    /// `patternProperties` and `unevaluatedProperties`: counted as applying to every member,
    /// since matching the patterns here would cost as much as validating.
    every_member: Vec<usize>,
    /// `additionalProperties`: applied to every member not named in `properties`.
    other_members: Vec<usize>,
    /// `propertyNames`: applied to each member name, a string.
    member_names: Vec<usize>,
    /// `prefixItems` and array-valued `items`: applied to the item at the same position.
    positional: Vec<usize>,
    /// Schema-valued `items`, `additionalItems`, `contains`, `unevaluatedItems`: applied to every
    /// item.
    every_item: Vec<usize>,
    /// `unevaluatedProperties` and `unevaluatedItems` need the annotations of the in-place
    /// subschemas, which may evaluate them a second time; they are counted twice.
    revisits: bool,
    /// What the closed-arguments check (`CompiledSchema::undeclared`) reads; the counting above
    /// does not.
    members: Members,
}

/// What one subschema says about the members an object may have, for
/// [`CompiledSchema::undeclared`].
#[derive(Debug, Default)]
struct Members {
    /// The subschema has `properties` or `patternProperties`: it declares members.
    declares: bool,
    /// The subschema has `additionalProperties` or `unevaluatedProperties` other than `false`:
    /// the reviewer saw that other members are allowed.
    opens: bool,
    /// Member names it declares besides `properties` (whose names are `GraphNode::properties`):
    /// the names in `required`, `dependentRequired` and draft-07 array-valued `dependencies`.
    required: Vec<String>,
    /// `patternProperties`: each pattern, compiled by jsonschema so that it matches exactly as
    /// validation does, and the subschema it applies.
    patterns: Vec<(Validator, usize)>,
    /// `unevaluatedProperties`: applied to members no subschema declares.
    unevaluated: Vec<usize>,
    /// The target of `not`: a schema a value must *not* match neither declares nor opens.
    negated: Vec<usize>,
}

impl GraphNode {
    /// Every subschema this one applies, wherever it applies.
    fn targets(&self) -> Vec<usize> {
        let mut all = self.in_place.clone();
        all.extend(self.properties.values().copied());
        for group in [
            &self.every_member,
            &self.other_members,
            &self.member_names,
            &self.positional,
            &self.every_item,
        ] {
            all.extend_from_slice(group);
        }
        all
    }
}

/// Builds the graph with the same reference resolver jsonschema uses, so that both agree on the
/// target of every `$ref`.
struct GraphBuilder<'r> {
    ids: HashMap<usize, usize>,
    graph: Graph,
    to_visit: Vec<(usize, &'r Value, Resolver<'r>, Draft)>,
}

impl<'r> GraphBuilder<'r> {
    /// The id of a subschema, seen for the first time or not.
    fn intern(&mut self, value: &'r Value, resolver: Resolver<'r>, draft: Draft) -> usize {
        let next = self.graph.nodes.len();
        let id = *self.ids.entry(address(value)).or_insert(next);
        if id == next {
            self.graph.nodes.push(GraphNode::default());
            self.to_visit.push((id, value, resolver, draft));
        }
        id
    }

    /// The id of a subschema nested in the current one, which starts a new base URI for the
    /// references inside it when it has its own `$id`.
    fn child(&mut self, value: &'r Value, resolver: &Resolver<'r>, draft: Draft) -> Option<usize> {
        if !value.is_object() && !value.is_boolean() {
            return None;
        }
        let inner = resolver
            .in_subresource(draft.create_resource_ref(value))
            .unwrap_or_else(|_| resolver.clone());
        Some(self.intern(value, inner, draft))
    }

    /// The ids of the subschemas in an array (`allOf`, `prefixItems`) or in the values of an
    /// object (`patternProperties`, `dependentSchemas`).
    fn children(&mut self, value: &'r Value, resolver: &Resolver<'r>, draft: Draft) -> Vec<usize> {
        let members: Vec<&'r Value> = match value {
            Value::Array(items) => items.iter().collect(),
            Value::Object(map) => map.values().collect(),
            _ => Vec::new(),
        };
        members
            .into_iter()
            .filter_map(|member| self.child(member, resolver, draft))
            .collect()
    }

    /// Records the subschemas that `value`'s keywords apply.
    fn visit(
        &mut self,
        id: usize,
        value: &'r Value,
        resolver: &Resolver<'r>,
        draft: Draft,
    ) -> Result<(), SchemaError> {
        let Some(map) = value.as_object() else {
            return Ok(());
        };
        // An embedded resource may declare its own dialect. jsonschema reads one it does not
        // know with the dialect around it; mcpguard refuses it, as it refuses an unknown
        // dialect at the root, so that nobody reviews a subschema believing it means something
        // else.
        dialect_of(value)?;
        let mut node = GraphNode::default();
        for (keyword, sub) in map {
            match keyword.as_str() {
                "properties" => {
                    if let Some(members) = sub.as_object() {
                        node.members.declares = true;
                        for (name, member) in members {
                            if let Some(target) = self.child(member, resolver, draft) {
                                node.properties.insert(name.clone(), target);
                            }
                        }
                    }
                }
                "patternProperties" => {
                    if let Some(patterns) = sub.as_object() {
                        node.members.declares = true;
                        for (pattern, member) in patterns {
                            if let Some(target) = self.child(member, resolver, draft) {
                                node.every_member.push(target);
                                let matcher = pattern_matcher(pattern, draft)?;
                                node.members.patterns.push((matcher, target));
                            }
                        }
                    }
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    node.revisits = true;
                    if let Some(target) = self.child(sub, resolver, draft) {
                        if keyword == "unevaluatedProperties" {
                            node.members.opens |= sub != &Value::Bool(false);
                            node.every_member.push(target);
                            node.members.unevaluated.push(target);
                        } else {
                            node.every_item.push(target);
                        }
                    }
                }
                "additionalProperties" => {
                    node.members.opens |= sub != &Value::Bool(false);
                    node.other_members.extend(self.child(sub, resolver, draft))
                }
                "required" => {
                    let names = sub.as_array().into_iter().flatten();
                    let names = names.filter_map(Value::as_str).map(str::to_owned);
                    node.members.required.extend(names);
                }
                "propertyNames" => node.member_names.extend(self.child(sub, resolver, draft)),
                "items" if sub.is_array() => {
                    let targets = self.children(sub, resolver, draft);
                    node.positional.extend(targets);
                }
                "prefixItems" => {
                    let targets = self.children(sub, resolver, draft);
                    node.positional.extend(targets);
                }
                "items" | "additionalItems" | "contains" => {
                    node.every_item.extend(self.child(sub, resolver, draft));
                }
                "allOf" | "anyOf" | "oneOf" | "dependentSchemas" | "dependencies" => {
                    let targets = self.children(sub, resolver, draft);
                    node.in_place.extend(targets);
                    if keyword == "dependencies" {
                        node.members.required.extend(required_names(sub));
                    }
                }
                "dependentRequired" => node.members.required.extend(required_names(sub)),
                // Definitions apply nowhere by themselves; they are visited so that the dialect
                // check above sees them even when nothing refers to them.
                "$defs" | "definitions" => {
                    self.children(sub, resolver, draft);
                }
                "not" | "if" | "then" | "else" => {
                    let target = self.child(sub, resolver, draft);
                    node.in_place.extend(target);
                    if keyword == "not" {
                        node.members.negated.extend(target);
                    }
                }
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    // jsonschema has already resolved every reference; one this resolver reads
                    // differently (a dynamic reference whose target depends on the evaluation
                    // path) is counted at its static target or, failing that, not at all.
                    if let Some(Ok(resolved)) = sub.as_str().map(|r| resolver.lookup(r)) {
                        let (target, target_resolver, target_draft) = resolved.into_inner();
                        if target.is_object() || target.is_boolean() {
                            let target = self.intern(target, target_resolver, target_draft);
                            node.in_place.push(target);
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(slot) = self.graph.nodes.get_mut(id) {
            *slot = node;
        }
        Ok(())
    }
}

/// Builds the subschema graph of a schema that jsonschema has compiled.
fn build_graph(schema: &Value, dialect: Dialect) -> Result<Graph, SchemaError> {
    let registry = Registry::new()
        .draft(dialect.draft())
        .retriever(RefuseRetriever)
        .retrieve_known_draft_meta_schemas(false)
        .add(DEFAULT_BASE_URI, schema)
        .and_then(|builder| builder.prepare())
        .map_err(|err| referencing_error(&err, dialect))?;
    let base = referencing::uri::from_str(DEFAULT_BASE_URI)
        .map_err(|err| referencing_error(&err, dialect))?;
    let (root, resolver, draft) = registry
        .resolver(base)
        .lookup("")
        .map_err(|err| referencing_error(&err, dialect))?
        .into_inner();
    let mut builder = GraphBuilder {
        ids: HashMap::new(),
        graph: Graph::default(),
        to_visit: Vec::new(),
    };
    builder.intern(root, resolver, draft);
    while let Some((id, value, resolver, draft)) = builder.to_visit.pop() {
        builder.visit(id, value, &resolver, draft)?;
    }
    Ok(builder.graph)
}

impl Graph {
    /// Refuses schemas whose references make them expand to more than
    /// [`MAX_EXPANDED_SUBSCHEMAS`] subschemas when every reference is replaced by its target.
    ///
    /// Such a schema makes every validation expensive, whatever the instance, so it is better
    /// refused when the tool is reviewed than on every call. Each subschema's expanded size is
    /// computed once, so the walk is linear in the graph. A reference back to a subschema still
    /// being expanded (recursion) counts as one: how often recursion repeats depends on the
    /// instance, and `evaluations` bounds that per call.
    fn check_expansion(&self) -> Result<(), SchemaError> {
        let too_complex = || SchemaError::TooComplex {
            limit: MAX_EXPANDED_SUBSCHEMAS,
        };
        if self.nodes.is_empty() {
            return Ok(());
        }
        let mut expanded: Vec<Option<u64>> = vec![None; self.nodes.len()];
        let mut in_progress = vec![false; self.nodes.len()];
        // Each frame: the subschema, its targets, the next target to look at, the size so far.
        let mut stack = vec![(0, self.nodes[0].targets(), 0, 1u64)];
        in_progress[0] = true;
        while let Some((id, targets, next, total)) = stack.last_mut() {
            if let Some(&target) = targets.get(*next) {
                *next += 1;
                if let Some(size) = expanded[target] {
                    *total = total.saturating_add(size);
                } else if in_progress[target] {
                    *total = total.saturating_add(1);
                } else {
                    in_progress[target] = true;
                    let frame = (target, self.nodes[target].targets(), 0, 1);
                    stack.push(frame);
                    continue;
                }
                if *total > MAX_EXPANDED_SUBSCHEMAS {
                    return Err(too_complex());
                }
            } else {
                let (id, total) = (*id, *total);
                stack.pop();
                in_progress[id] = false;
                expanded[id] = Some(total);
                if let Some((_, _, _, parent_total)) = stack.last_mut() {
                    *parent_total = parent_total.saturating_add(total);
                    if *parent_total > MAX_EXPANDED_SUBSCHEMAS {
                        return Err(too_complex());
                    }
                }
            }
        }
        Ok(())
    }

    /// How many (subschema, instance location) evaluations validating `instance` can take at
    /// most, or `None` when that is more than `limit`.
    ///
    /// The count follows every path jsonschema could take, without memoizing, as jsonschema
    /// does, so it over-estimates rather than under-estimates the evaluations of the keywords the
    /// graph records. It stops as soon as it passes `limit`, so counting costs at most about as
    /// much as the validation it protects; the walk is depth-first and produces each subschema's
    /// applications one at a time, so its memory grows with the depth of the path, not with the
    /// width of the instance. Subschema cycles that do not move into the instance
    /// (`{"$ref": "#"}`) are cut, as jsonschema cuts them.
    fn evaluations(&self, instance: &Value, limit: u64) -> Option<u64> {
        if self.nodes.is_empty() {
            return Some(0);
        }
        // The instance location at which each subschema is being evaluated on the current path,
        // if any (0 otherwise: no value lives at address 0). Locations on the path only ever go
        // deeper, and a visit only produces applications while it is the deepest one, so the
        // latest location of a subschema is the only one a cycle can come back to.
        let mut active_at: Vec<usize> = vec![0; self.nodes.len()];
        active_at[0] = address(instance);
        let mut path = vec![Visit::new(0, instance, 0)];
        let mut spent: u64 = 1;
        while let Some(top) = path.last_mut() {
            let Some((target, value)) = self.next_application(top) else {
                active_at[top.node] = top.previous;
                path.pop();
                continue;
            };
            spent += 1;
            if spent > limit {
                return None;
            }
            let here = address(value);
            if active_at[target] == here {
                // A cycle that does not move into the instance: cut, as jsonschema does.
                continue;
            }
            let previous = std::mem::replace(&mut active_at[target], here);
            path.push(Visit::new(target, value, previous));
        }
        Some(spent)
    }

    /// The next (subschema, instance location) pair that the visit's subschema applies: first
    /// its in-place subschemas at the same location, then, member by member or item by item,
    /// the subschemas that apply to each.
    fn next_application<'v>(&self, visit: &mut Visit<'v>) -> Option<(usize, &'v Value)> {
        let schema = self.nodes.get(visit.node)?;
        let rounds = if schema.revisits { 2 } else { 1 };
        if visit.in_place < schema.in_place.len() * rounds {
            let target = schema.in_place[visit.in_place % schema.in_place.len()];
            visit.in_place += 1;
            return Some((target, visit.value));
        }
        loop {
            if let Some(found) = child_application(schema, visit) {
                visit.target += 1;
                return Some(found);
            }
            // The current member or item has no more applications: move to the next one.
            visit.target = 0;
            if let Some((name, member)) = visit.members.as_mut().and_then(Iterator::next) {
                visit.child = Some(Child::Member(member, schema.properties.get(name).copied()));
            } else if let Some((index, item)) = visit.items.next() {
                visit.child = Some(Child::Item(item, schema.positional.get(index).copied()));
            } else {
                return None;
            }
        }
    }
}

/// Application number `visit.target` of `schema` to the visit's current member or item, if
/// there is one.
fn child_application<'v>(schema: &GraphNode, visit: &Visit<'v>) -> Option<(usize, &'v Value)> {
    let mut k = visit.target;
    match visit.child? {
        Child::Member(member, named) => {
            // `properties` if it names the member, `additionalProperties` otherwise.
            let first: &[usize] = match &named {
                Some(target) => std::slice::from_ref(target),
                None => &schema.other_members,
            };
            for (targets, at) in [
                (first, member),
                (&schema.every_member[..], member),
                (&schema.member_names[..], &MEMBER_NAME),
            ] {
                if let Some(&target) = targets.get(k) {
                    return Some((target, at));
                }
                k -= targets.len();
            }
            None
        }
        Child::Item(item, positional) => {
            let first: &[usize] = match &positional {
                Some(target) => std::slice::from_ref(target),
                None => &[],
            };
            for targets in [first, &schema.every_item[..]] {
                if let Some(&target) = targets.get(k) {
                    return Some((target, item));
                }
                k -= targets.len();
            }
            None
        }
    }
}

/// One subschema being evaluated at one instance location, in the walk of `Graph::evaluations`.
struct Visit<'v> {
    node: usize,
    value: &'v Value,
    /// Where the subschema was active before this visit, restored when the visit ends.
    previous: usize,
    /// The next in-place application.
    in_place: usize,
    /// The members or items still to come.
    members: Option<serde_json::map::Iter<'v>>,
    items: std::iter::Enumerate<std::slice::Iter<'v, Value>>,
    /// The member or item whose applications are being produced, and the next one of them.
    child: Option<Child<'v>>,
    target: usize,
}

impl<'v> Visit<'v> {
    fn new(node: usize, value: &'v Value, previous: usize) -> Self {
        let items: &'v [Value] = match value {
            Value::Array(items) => items,
            _ => &[],
        };
        Visit {
            node,
            value,
            previous,
            in_place: 0,
            members: value.as_object().map(|members| members.iter()),
            items: items.iter().enumerate(),
            child: None,
            target: 0,
        }
    }
}

/// A member with the `properties` subschema that names it, or an item with the positional
/// subschema for its index.
#[derive(Clone, Copy)]
enum Child<'v> {
    Member(&'v Value, Option<usize>),
    Item(&'v Value, Option<usize>),
}

/// Stands in for a member name when `propertyNames` is counted: a string without members or
/// items, and an address of its own for the cycle check.
static MEMBER_NAME: Value = Value::String(String::new());

/// The number of values in an instance, containers and scalars alike.
fn count_values(instance: &Value) -> u64 {
    let mut count: u64 = 0;
    let mut pending = vec![instance];
    while let Some(value) = pending.pop() {
        count += 1;
        match value {
            Value::Object(members) => pending.extend(members.values()),
            Value::Array(items) => pending.extend(items.iter()),
            _ => {}
        }
    }
    count
}

/// Identifies a JSON value by where it lives. Within one schema document, or one instance being
/// validated, equal addresses mean the same value.
fn address(value: &Value) -> usize {
    std::ptr::from_ref(value) as usize
}

/// Turns a jsonschema build error into the refusal that tells the user what to fix.
fn build_error(err: &ValidationError<'_>, dialect: Dialect) -> SchemaError {
    match err.kind() {
        ValidationErrorKind::Referencing(inner) => referencing_error(inner, dialect),
        // jsonschema reports a pattern its engine cannot compile as a failed "regex" format
        // check on the pattern string itself.
        ValidationErrorKind::Format { format } if format == "regex" => SchemaError::BadRegex {
            pointer: quote_text(err.schema_path().as_str()),
            pattern: quote_text(err.instance().as_str().unwrap_or_default()),
        },
        // Anything else is the schema failing its meta-schema. The message quotes the schema,
        // which is reviewed text rather than a secret, bounded and escaped for the terminal.
        _ => SchemaError::Invalid {
            dialect,
            pointer: quote_text(err.instance_path().as_str()),
            reason: quote_text(&err.to_string()),
        },
    }
}

fn referencing_error(err: &ReferencingError, dialect: Dialect) -> SchemaError {
    match err {
        ReferencingError::Unretrievable { uri, .. } => SchemaError::RemoteRef {
            uri: quote_text(uri),
        },
        other => SchemaError::Invalid {
            dialect,
            pointer: String::new(),
            reason: quote_text(&other.to_string()),
        },
    }
}

fn internal_violation() -> Violation {
    whole_value_violation("the validator failed internally, so the value is refused")
}

/// A violation about the instance as a whole, not tied to one keyword.
fn whole_value_violation(message: &str) -> Violation {
    Violation {
        instance_pointer: String::new(),
        schema_pointer: String::new(),
        message: message.to_owned(),
    }
}

/// Describes one error without echoing the instance: only the JSON type of the offending value
/// and numbers, names and patterns taken from the schema appear in the message.
fn violation(err: &ValidationError<'_>) -> Violation {
    use ValidationErrorKind as K;
    let message = match err.kind() {
        K::AdditionalItems { limit } => {
            format!("array has more than the {limit} items the schema lists")
        }
        // The unexpected names are not quoted: they are part of the instance.
        K::AdditionalProperties { unexpected } => format!(
            "{} not allowed by the schema (additionalProperties)",
            count_of(unexpected.len(), "property is", "properties are")
        ),
        K::AnyOf { .. } => "value matches none of the alternatives (anyOf)".to_owned(),
        K::OneOfNotValid { .. } => "value matches none of the alternatives (oneOf)".to_owned(),
        K::OneOfMultipleValid { .. } => {
            "value matches more than one of the alternatives (oneOf)".to_owned()
        }
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            "the pattern could not be evaluated, so the value is refused".to_owned()
        }
        K::Constant { .. } => "value is not the one the schema requires (const)".to_owned(),
        K::Contains => "array has no item matching the schema's contains".to_owned(),
        K::ContentEncoding { content_encoding } => {
            format!("string is not valid {} data", quote_text(content_encoding))
        }
        K::ContentMediaType { content_media_type } => {
            format!(
                "string is not valid {} content",
                quote_text(content_media_type)
            )
        }
        K::FromUtf8 { .. } => "decoded string content is not valid UTF-8".to_owned(),
        // A custom keyword's message could quote the instance; none is registered, so only the
        // keyword is named.
        K::Custom { keyword, .. } => format!("value fails the {} keyword", quote_text(keyword)),
        K::Enum { options } => enum_message(options),
        K::ExclusiveMaximum { limit } => format!("number must be less than {limit}"),
        K::ExclusiveMinimum { limit } => format!("number must be greater than {limit}"),
        K::Maximum { limit } => format!("number must be at most {limit}"),
        K::Minimum { limit } => format!("number must be at least {limit}"),
        K::MultipleOf { multiple_of } => format!("number must be a multiple of {multiple_of}"),
        K::FalseSchema => false_schema_message(err.schema_path().as_str()),
        K::Format { format } => format!("string is not a valid {}", quote_text(format)),
        K::MaxItems { limit } => format!("array must have at most {limit} items"),
        K::MinItems { limit } => format!("array must have at least {limit} items"),
        K::MaxLength { limit } => format!("string must be at most {limit} characters long"),
        K::MinLength { limit } => format!("string must be at least {limit} characters long"),
        K::MaxProperties { limit } => format!("object must have at most {limit} properties"),
        K::MinProperties { limit } => format!("object must have at least {limit} properties"),
        K::Not { .. } => "value matches a schema it must not match (not)".to_owned(),
        K::Pattern { pattern } => {
            format!(
                "string does not match the pattern \"{}\"",
                quote_text(pattern)
            )
        }
        K::PropertyNames { .. } => "a property name is not allowed (propertyNames)".to_owned(),
        // The property name comes from the schema's `required` or `dependentRequired`.
        K::Required { property } => format!(
            "required property {} is missing",
            quote_text(&property.to_string())
        ),
        K::Type { kind } => format!(
            "expected {}, got {}",
            expected_types(kind),
            type_name(err.instance())
        ),
        K::UnevaluatedItems { unexpected } => format!(
            "{} not allowed by the schema (unevaluatedItems)",
            count_of(unexpected.len(), "item is", "items are")
        ),
        K::UnevaluatedProperties { unexpected } => format!(
            "{} not allowed by the schema (unevaluatedProperties)",
            count_of(unexpected.len(), "property is", "properties are")
        ),
        K::UniqueItems => "array items must be unique".to_owned(),
        K::Referencing(_) => "a reference in the schema could not be resolved".to_owned(),
    };
    Violation {
        instance_pointer: quote_text(err.instance_path().as_str()),
        schema_pointer: quote_text(err.schema_path().as_str()),
        message,
    }
}

/// jsonschema reports `additionalProperties: false` without `properties` beside it, and a false
/// `items`, as a false schema at the containing object or array; naming the keyword tells the
/// caller what to change.
fn false_schema_message(schema_pointer: &str) -> String {
    match schema_pointer.rsplit('/').next() {
        Some(keyword @ ("additionalProperties" | "unevaluatedProperties")) => {
            format!("a property is not allowed by the schema ({keyword})")
        }
        Some(keyword @ ("items" | "additionalItems" | "unevaluatedItems")) => {
            format!("an item is not allowed by the schema ({keyword})")
        }
        _ => "no value is allowed here (the schema is false)".to_owned(),
    }
}

fn count_of(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Lists the allowed values when they are short: they come from the reviewed schema and help the
/// caller fix the call. Long lists are only counted.
fn enum_message(options: &Value) -> String {
    let listed = options.to_string();
    let count = options.as_array().map_or(0, Vec::len);
    if listed.chars().count() <= MAX_QUOTED_CHARS / 2 {
        format!(
            "value is not one of the allowed values {}",
            quote_text(&listed)
        )
    } else {
        format!("value is not one of the {count} allowed values")
    }
}

fn expected_types(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(ty) => ty.to_string(),
        TypeKind::Multiple(set) => {
            let names: Vec<String> = set.iter().map(|ty| ty.to_string()).collect();
            format!("one of {}", names.join(", "))
        }
    }
}

/// The JSON type of a value, the only thing about an instance value a message reveals.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Makes schema text or a pointer safe to show: control, bidirectional, zero-width and Unicode
/// TAG characters become `\u{..}` escapes (they could rewrite a terminal line or hide text from
/// the person reading it), and the result is cut to [`MAX_QUOTED_CHARS`] characters.
fn quote_text(text: &str) -> String {
    let mut out = String::new();
    for (shown, c) in text.chars().enumerate() {
        if shown == MAX_QUOTED_CHARS {
            out.push('…');
            break;
        }
        if is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

#[cfg(test)]
mod tests;

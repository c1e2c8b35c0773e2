use super::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn compiled(schema: &Value) -> CompiledSchema {
    match compile(schema) {
        Ok(compiled) => compiled,
        Err(err) => panic!("schema {schema} should compile: {err}"),
    }
}

/// Runs a table of (name, schema, instance, valid?) rows and reports every mismatch at once.
fn check_table(rows: &[(&str, Value, Value, bool)]) {
    let mut failures = Vec::new();
    for (name, schema, instance, expected) in rows {
        let outcome = compiled(schema).validate(instance);
        if outcome.is_ok() != *expected {
            failures.push(format!(
                "{name}: expected valid={expected}, got {outcome:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn compile_error(schema: &Value) -> SchemaError {
    match compile(schema) {
        Ok(_) => panic!("schema {schema} should be refused"),
        Err(err) => err,
    }
}

#[test]
fn compiled_schema_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledSchema>();
}

#[test]
fn dialect_detection() {
    let rows = [
        (json!({}), Dialect::Draft202012),
        (json!(true), Dialect::Draft202012),
        (
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
            Dialect::Draft202012,
        ),
        (
            json!({"$schema": "https://json-schema.org/draft/2019-09/schema"}),
            Dialect::Draft201909,
        ),
        (
            json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
            Dialect::Draft7,
        ),
        (
            json!({"$schema": "http://json-schema.org/draft-07/schema"}),
            Dialect::Draft7,
        ),
        (
            json!({"$schema": "https://json-schema.org/draft-07/schema#"}),
            Dialect::Draft7,
        ),
        (
            json!({"$schema": "http://json-schema.org/draft-06/schema#"}),
            Dialect::Draft6,
        ),
        (
            json!({"$schema": "http://json-schema.org/draft-04/schema#"}),
            Dialect::Draft4,
        ),
    ];
    for (schema, dialect) in rows {
        assert_eq!(compiled(&schema).dialect(), dialect, "{schema}");
    }
}

#[test]
fn unknown_dialects_are_refused() {
    let rows = [
        json!({"$schema": "https://example.com/my-dialect"}),
        json!({"$schema": "http://json-schema.org/draft-03/schema#"}),
        json!({"$schema": "http://json-schema.org/draft-07/schema##"}),
        json!({"$schema": "HTTP://JSON-SCHEMA.ORG/draft-07/schema#"}),
        json!({"$schema": "https://json-schema.org/draft/next/schema"}),
        json!({"$schema": ""}),
        json!({"$schema": 7}),
        json!({"$schema": null}),
    ];
    for schema in rows {
        let err = compile_error(&schema);
        assert!(
            matches!(err, SchemaError::UnknownDialect { .. }),
            "{schema}: {err}"
        );
        assert!(
            err.to_string().contains("not a JSON Schema dialect"),
            "{err}"
        );
    }
}

#[test]
fn embedded_resources_with_unknown_dialects_are_refused() {
    let err = compile_error(&json!({
        "$defs": {"x": {"$id": "https://tools.example/x", "$schema": "https://weird.example/s"}}
    }));
    assert!(matches!(err, SchemaError::UnknownDialect { .. }), "{err}");
    // A known dialect inside is fine, and "$schema" as a property name is just a name.
    assert!(compile(&json!({
        "$defs": {"x": {"$id": "https://tools.example/x", "$schema": "http://json-schema.org/draft-07/schema#"}}
    }))
    .is_ok());
    assert!(compile(&json!({"properties": {"$schema": {"type": "string"}}})).is_ok());
}

#[test]
fn default_dialect_is_2020_12() {
    check_table(&[
        (
            "prefixItems accepts a matching tuple",
            json!({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
            json!(["a", 1]),
            true,
        ),
        (
            "prefixItems checks positions",
            json!({"prefixItems": [{"type": "string"}, {"type": "integer"}]}),
            json!([1, "a"]),
            false,
        ),
        (
            "items false after prefixItems refuses extra items",
            json!({"prefixItems": [{"type": "string"}], "items": false}),
            json!(["a", "b"]),
            false,
        ),
        (
            "unevaluatedProperties sees through allOf",
            json!({
                "allOf": [{"properties": {"a": {"type": "string"}}}],
                "properties": {"b": {"type": "integer"}},
                "unevaluatedProperties": false
            }),
            json!({"a": "x", "b": 1}),
            true,
        ),
        (
            "unevaluatedProperties refuses the rest",
            json!({
                "allOf": [{"properties": {"a": {"type": "string"}}}],
                "unevaluatedProperties": false
            }),
            json!({"a": "x", "c": 1}),
            false,
        ),
        (
            "dependentRequired satisfied",
            json!({"dependentRequired": {"card": ["billing"]}}),
            json!({"card": "x", "billing": "y"}),
            true,
        ),
        (
            "dependentRequired violated",
            json!({"dependentRequired": {"card": ["billing"]}}),
            json!({"card": "x"}),
            false,
        ),
        (
            "$defs reference",
            json!({"$defs": {"name": {"type": "string"}}, "properties": {"n": {"$ref": "#/$defs/name"}}}),
            json!({"n": 3}),
            false,
        ),
        (
            "draft-07 style definitions resolve as a plain JSON pointer",
            // (In 2020-12 `items` must be a schema; an array is a meta-schema error, tested
            // in `invalid_schemas_are_refused`.)
            json!({"definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n"}),
            json!(1),
            true,
        ),
    ]);
}

#[test]
fn draft_07_when_declared() {
    let d7 = "http://json-schema.org/draft-07/schema#";
    check_table(&[
        (
            "items as array is the tuple form",
            json!({"$schema": d7, "items": [{"type": "string"}, {"type": "integer"}]}),
            json!(["a", 1, "anything"]),
            true,
        ),
        (
            "tuple form checks positions",
            json!({"$schema": d7, "items": [{"type": "string"}, {"type": "integer"}]}),
            json!(["a", "b"]),
            false,
        ),
        (
            "additionalItems false closes the tuple",
            json!({"$schema": d7, "items": [{"type": "string"}], "additionalItems": false}),
            json!(["a", "b"]),
            false,
        ),
        (
            "definitions reference",
            json!({
                "$schema": d7,
                "definitions": {"pos": {"type": "integer", "minimum": 0}},
                "properties": {"n": {"$ref": "#/definitions/pos"}}
            }),
            json!({"n": -1}),
            false,
        ),
        (
            "definitions reference ok",
            json!({
                "$schema": d7,
                "definitions": {"pos": {"type": "integer", "minimum": 0}},
                "properties": {"n": {"$ref": "#/definitions/pos"}}
            }),
            json!({"n": 1}),
            true,
        ),
        (
            "prefixItems is not a draft-07 keyword",
            json!({"$schema": d7, "prefixItems": [{"type": "string"}]}),
            json!([1]),
            true,
        ),
    ]);
}

#[test]
fn ts_sdk_style_draft_07_schema() {
    let schema = json!({
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Message to echo"}},
        "required": ["message"],
        "additionalProperties": false,
        "$schema": "http://json-schema.org/draft-07/schema#"
    });
    check_table(&[
        ("echo ok", schema.clone(), json!({"message": "hi"}), true),
        ("echo missing", schema.clone(), json!({}), false),
        (
            "echo wrong type",
            schema.clone(),
            json!({"message": 1}),
            false,
        ),
        (
            "echo extra",
            schema.clone(),
            json!({"message": "hi", "x": 1}),
            false,
        ),
        ("echo not an object", schema, json!("hi"), false),
    ]);
}

#[test]
fn python_sdk_style_output_schema() {
    // The shape pydantic gives a structured tool result (as mcp-server-time sends it): no
    // `$schema`, so 2020-12, with `$defs`, `anyOf` for optional fields and `title`s.
    let schema = json!({
        "$defs": {
            "Zone": {"properties": {"name": {"title": "Name", "type": "string"}}, "required": ["name"], "title": "Zone", "type": "object"}
        },
        "properties": {
            "timezone": {"$ref": "#/$defs/Zone"},
            "datetime": {"title": "Datetime", "type": "string", "format": "date-time"},
            "is_dst": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": null, "title": "Is Dst"}
        },
        "required": ["timezone", "datetime"],
        "title": "TimeResult",
        "type": "object"
    });
    let row = |name, instance, valid| (name, schema.clone(), instance, valid);
    check_table(&[
        row(
            "complete",
            json!({"timezone": {"name": "UTC"}, "datetime": "2026-11-29T12:00:00+00:00", "is_dst": false}),
            true,
        ),
        row(
            "optional null",
            json!({"timezone": {"name": "UTC"}, "datetime": "x", "is_dst": null}),
            true,
        ),
        row(
            "bad nested",
            json!({"timezone": {}, "datetime": "x"}),
            false,
        ),
        row(
            "bad optional",
            json!({"timezone": {"name": "UTC"}, "datetime": "x", "is_dst": "no"}),
            false,
        ),
        row("missing", json!({"timezone": {"name": "UTC"}}), false),
    ]);
}

#[test]
fn common_keywords() {
    let object = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 5},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"enum": ["fast", "slow"]},
            "kind": {"const": "file"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "nested": {
                "type": "object",
                "properties": {"deep": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}},
                "required": ["deep"]
            }
        },
        "required": ["name"],
        "additionalProperties": false
    });
    let row = |name, instance, valid| (name, object.clone(), instance, valid);
    check_table(&[
        row("minimal", json!({"name": "a"}), true),
        row(
            "everything",
            json!({"name": "abcde", "count": 10, "mode": "slow", "kind": "file", "tags": ["a", "b"], "nested": {"deep": {"x": true}}}),
            true,
        ),
        row("required missing", json!({"count": 1}), false),
        row("type", json!({"name": 5}), false),
        row("minLength", json!({"name": ""}), false),
        row("maxLength", json!({"name": "abcdef"}), false),
        row("minimum", json!({"name": "a", "count": 0}), false),
        row("maximum", json!({"name": "a", "count": 11}), false),
        row(
            "integer refuses fractions",
            json!({"name": "a", "count": 1.5}),
            false,
        ),
        row("enum", json!({"name": "a", "mode": "medium"}), false),
        row("const", json!({"name": "a", "kind": "dir"}), false),
        row(
            "maxItems",
            json!({"name": "a", "tags": ["a", "b", "c"]}),
            false,
        ),
        row("item type", json!({"name": "a", "tags": [1]}), false),
        row(
            "additionalProperties false",
            json!({"name": "a", "extra": 1}),
            false,
        ),
        row(
            "nested required",
            json!({"name": "a", "nested": {"deep": {}}}),
            false,
        ),
        row(
            "nested type",
            json!({"name": "a", "nested": {"deep": {"x": "yes"}}}),
            false,
        ),
        row("root type", json!([]), false),
        (
            "true schema",
            json!(true),
            json!({"anything": [1, 2]}),
            true,
        ),
        ("false schema", json!(false), json!({}), false),
    ]);
}

#[test]
fn formats_are_annotations() {
    check_table(&[
        (
            "2020-12 email",
            json!({"type": "string", "format": "email"}),
            json!("not an email"),
            true,
        ),
        (
            "draft-07 date-time",
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "format": "date-time"}),
            json!("yesterday"),
            true,
        ),
        (
            "unknown format",
            json!({"format": "made-up"}),
            json!("x"),
            true,
        ),
    ]);
}

#[test]
fn remote_references_are_refused_without_fetching() {
    let rows = [
        (
            json!({"$ref": "https://evil.example/x.json"}),
            "https://evil.example/x.json",
        ),
        (
            json!({"properties": {"a": {"$ref": "http://evil.example/a#/b"}}}),
            "http://evil.example/a",
        ),
        // Never used, still refused: jsonschema resolves every reference at build time.
        (
            json!({"$defs": {"unused": {"$ref": "https://evil.example/y.json"}}}),
            "https://evil.example/y.json",
        ),
        (json!({"$ref": "file:///etc/passwd"}), "file:///etc/passwd"),
        (
            json!({"$id": "https://tools.example/root.json", "$ref": "other.json"}),
            "https://tools.example/other.json",
        ),
        (json!({"$ref": "other.json"}), "other.json"),
        (json!({"$ref": "urn:example:thing"}), "urn:example:thing"),
        (
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "https://evil.example/d7.json"}),
            "https://evil.example/d7.json",
        ),
    ];
    for (schema, uri) in rows {
        let started = Instant::now();
        let err = compile_error(&schema);
        // A refusing retriever answers at once; a network attempt would take far longer.
        assert!(started.elapsed() < Duration::from_secs(1), "{schema}");
        match &err {
            SchemaError::RemoteRef { uri: named } => assert_eq!(named, uri, "{schema}"),
            other => panic!("{schema}: expected a remote reference refusal, got {other}"),
        }
        assert!(err.to_string().contains(uri), "{err}");
        assert!(err.to_string().contains("never fetches"), "{err}");
    }
}

#[test]
fn local_references_work() {
    check_table(&[
        (
            "recursive tree",
            json!({
                "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "additionalProperties": false}},
                "$ref": "#/$defs/node"
            }),
            json!({"children": [{"children": []}, {"children": [{"children": []}]}]}),
            true,
        ),
        (
            "recursive tree refuses a bad leaf",
            json!({
                "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "additionalProperties": false}},
                "$ref": "#/$defs/node"
            }),
            json!({"children": [{"children": [{"x": 1}]}]}),
            false,
        ),
        (
            "anchor",
            json!({"$defs": {"s": {"$anchor": "str", "type": "string"}}, "properties": {"a": {"$ref": "#str"}}}),
            json!({"a": 1}),
            false,
        ),
        (
            "embedded resource by $id",
            json!({
                "$id": "https://tools.example/root.json",
                "$defs": {"s": {"$id": "string.json", "type": "string"}},
                "properties": {"a": {"$ref": "string.json"}}
            }),
            json!({"a": "x"}),
            true,
        ),
        (
            "the 2020-12 meta-schema is known without fetching",
            json!({"$ref": "https://json-schema.org/draft/2020-12/schema"}),
            json!({"type": "string"}),
            true,
        ),
    ]);
}

#[test]
fn broken_local_reference_is_invalid() {
    let err = compile_error(&json!({"$ref": "#/$defs/missing"}));
    assert!(matches!(err, SchemaError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("/$defs/missing"), "{err}");
}

#[test]
fn invalid_schemas_are_refused() {
    let rows = [
        json!({"type": "strin"}),
        json!({"minLength": -1}),
        json!({"required": "name"}),
        json!({"properties": []}),
        json!({"items": [{"type": "string"}]}),
        json!("not a schema"),
        json!(42),
        json!(null),
        json!([{"type": "string"}]),
    ];
    for schema in rows {
        let err = compile_error(&schema);
        assert!(
            matches!(err, SchemaError::Invalid { .. }),
            "{schema}: {err}"
        );
        assert!(err.to_string().contains("not a valid 2020-12"), "{err}");
    }
}

#[test]
fn catastrophic_pattern_runs_in_linear_time() {
    let schema = compiled(&json!({
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}}
    }));
    let evil = format!("{}!", "a".repeat(36));
    let evil_key = format!("{}!", "b".repeat(36));
    let started = Instant::now();
    assert!(schema.validate(&json!({"s": evil})).is_err());
    assert!(schema.validate(&json!({ evil_key: "x" })).is_ok());
    let long = format!("{}!", "a".repeat(100_000));
    assert!(schema.validate(&json!({ "s": long })).is_err());
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "pattern matching took {:?}",
        started.elapsed()
    );
    assert!(schema.validate(&json!({"s": "aaaa"})).is_ok());
}

#[test]
fn patterns_the_linear_engine_cannot_run_are_refused() {
    let rows = [
        (json!({"pattern": "(?<=a)b"}), "/pattern"),
        (json!({"pattern": "^(?=.*[0-9])[a-z0-9]+$"}), "/pattern"),
        (json!({"pattern": "^(?!admin)"}), "/pattern"),
        (json!({"pattern": "(a)\\1"}), "/pattern"),
        (
            json!({"properties": {"p": {"pattern": "(x)\\1"}}}),
            "/properties/p/pattern",
        ),
        (
            json!({"patternProperties": {"(a)\\1": {}}}),
            "/patternProperties/(a)\\1",
        ),
        (json!({"pattern": "a{1000}{1000}"}), "/pattern"),
        (json!({"pattern": "(unclosed"}), "/pattern"),
    ];
    for (schema, pointer) in rows {
        match compile_error(&schema) {
            SchemaError::BadRegex { pointer: named, .. } => {
                assert_eq!(named, pointer, "{schema}")
            }
            other => panic!("{schema}: expected a regex refusal, got {other}"),
        }
    }
}

#[test]
fn ecma_style_patterns_still_work() {
    check_table(&[
        (
            "digits",
            json!({"pattern": "^\\d{3}-\\d{4}$"}),
            json!("555-1234"),
            true,
        ),
        (
            "unanchored search",
            json!({"pattern": "b"}),
            json!("abc"),
            true,
        ),
        (
            "word class",
            json!({"pattern": "^\\w+$"}),
            json!("has space"),
            false,
        ),
    ]);
}

#[test]
fn messages_do_not_echo_instance_values() {
    let cases = [
        (
            json!({"properties": {"token": {"type": "string"}}}),
            json!({"token": 12345}),
            "12345",
            "/token: expected string, got integer",
        ),
        (
            json!({"properties": {"token": {"type": "integer"}}}),
            json!({"token": "sk-live-secret"}),
            "sk-live-secret",
            "/token: expected integer, got string",
        ),
        (
            json!({"properties": {"token": {"maxLength": 3}}}),
            json!({"token": "sk-live-secret"}),
            "sk-live-secret",
            "/token: string must be at most 3 characters long",
        ),
        (
            json!({"properties": {"token": {"pattern": "^[a-z]+$"}}}),
            json!({"token": "SECRET-123"}),
            "SECRET-123",
            "/token: string does not match the pattern \"^[a-z]+$\"",
        ),
        (
            json!({"properties": {"token": {"enum": ["a", "b"]}}}),
            json!({"token": "hunter2"}),
            "hunter2",
            "/token: value is not one of the allowed values [\"a\",\"b\"]",
        ),
        (
            json!({"properties": {"token": {"const": "a"}}}),
            json!({"token": "hunter2"}),
            "hunter2",
            "/token: value is not the one the schema requires (const)",
        ),
        (
            json!({"properties": {"pin": {"maximum": 10}}}),
            json!({"pin": 98765}),
            "98765",
            "/pin: number must be at most 10",
        ),
        (
            json!({"additionalProperties": false}),
            json!({"sk-live-secret-key": 1}),
            "sk-live-secret-key",
            "(root): a property is not allowed by the schema (additionalProperties)",
        ),
        (
            json!({"properties": {"a": {}}, "additionalProperties": false}),
            json!({"a": 1, "sk-live-secret-key": 1}),
            "sk-live-secret-key",
            "(root): 1 property is not allowed by the schema (additionalProperties)",
        ),
        (
            json!({"unevaluatedProperties": false}),
            json!({"sk-live-secret-key": 1, "other-secret": 2}),
            "secret",
            "(root): 2 properties are not allowed by the schema (unevaluatedProperties)",
        ),
        (
            json!({"propertyNames": {"maxLength": 3}}),
            json!({"sk-live-secret-key": 1}),
            "sk-live-secret-key",
            "(root): a property name is not allowed (propertyNames)",
        ),
        (
            json!({"properties": {"token": {"anyOf": [{"type": "integer"}, {"maxLength": 2}]}}}),
            json!({"token": "hunter2"}),
            "hunter2",
            "/token: value matches none of the alternatives (anyOf)",
        ),
        (
            json!({"properties": {"token": {"not": {"type": "string"}}}}),
            json!({"token": "hunter2"}),
            "hunter2",
            "/token: value matches a schema it must not match (not)",
        ),
        (
            json!({"properties": {"list": {"uniqueItems": true}}}),
            json!({"list": ["hunter2", "hunter2"]}),
            "hunter2",
            "/list: array items must be unique",
        ),
        (
            json!({"required": ["message"]}),
            json!({"secret": "hunter2"}),
            "hunter2",
            "(root): required property \"message\" is missing",
        ),
    ];
    for (schema, instance, secret, expected) in cases {
        let violations = match compiled(&schema).validate(&instance) {
            Ok(()) => panic!("{instance} should fail {schema}"),
            Err(violations) => violations,
        };
        let line = summary(&violations);
        assert!(!line.contains(secret), "{line}");
        for v in &violations {
            assert!(!v.message.contains(secret), "{v:?}");
            assert!(!v.schema_pointer.contains(secret), "{v:?}");
        }
        assert_eq!(violations[0].to_string(), expected);
    }
}

#[test]
fn violation_pointers() {
    let schema = compiled(&json!({
        "properties": {"list": {"items": {"properties": {"n": {"type": "integer"}}}}}
    }));
    let violations = schema
        .validate(&json!({"list": [{"n": 1}, {"n": "x"}]}))
        .unwrap_err();
    assert_eq!(
        violations,
        vec![Violation {
            instance_pointer: "/list/1/n".to_owned(),
            schema_pointer: "/properties/list/items/properties/n/type".to_owned(),
            message: "expected integer, got string".to_owned(),
        }]
    );
    assert_eq!(
        summary(&violations),
        "1 schema violation: /list/1/n: expected integer, got string"
    );
}

#[test]
fn pointers_are_escaped_for_display() {
    let schema = compiled(&json!({"additionalProperties": {"type": "integer"}}));
    let violations = schema
        .validate(&json!({"a\u{1b}[2J\u{202e}b": "x"}))
        .unwrap_err();
    assert_eq!(violations[0].instance_pointer, "/a\\u{1b}[2J\\u{202e}b");
}

#[test]
fn violations_are_capped_at_ten() {
    let mut properties = serde_json::Map::new();
    let mut instance = serde_json::Map::new();
    for i in 0..25 {
        properties.insert(format!("p{i}"), json!({"type": "string"}));
        instance.insert(format!("p{i}"), json!(i));
    }
    let schema = compiled(&json!({ "properties": properties }));
    let violations = schema.validate(&Value::Object(instance)).unwrap_err();
    assert_eq!(violations.len(), MAX_VIOLATIONS);
    let line = summary(&violations);
    assert!(line.starts_with("10 or more schema violations"), "{line}");
    assert_eq!(line.matches("expected string, got integer").count(), 10);
}

#[test]
fn summary_lines() {
    assert_eq!(summary(&[]), "no schema violations");
    let violations = compiled(&json!({"required": ["a", "b"]}))
        .validate(&json!({}))
        .unwrap_err();
    assert_eq!(
        summary(&violations),
        "2 schema violations: (root): required property \"a\" is missing; \
         (root): required property \"b\" is missing"
    );
}

/// Wraps `inner` in `levels` levels of `{"properties": {"x": ...}}` (two JSON levels each).
fn nested(levels: usize, inner: Value) -> Value {
    (0..levels).fold(inner, |acc, _| json!({"properties": {"x": acc}}))
}

#[test]
fn depth_limit() {
    // The root object is level 1 and each wrapper adds two levels.
    let at_limit = nested(31, json!({"type": "string"}));
    assert!(compile(&at_limit).is_ok());
    let over = nested(32, json!({"type": "string"}));
    match compile_error(&over) {
        SchemaError::TooDeep { depth, limit } => {
            assert_eq!((depth, limit), (65, MAX_DEPTH));
        }
        other => panic!("expected a depth refusal, got {other}"),
    }
    // Arrays count too, and a value far deeper than serde_json would parse does not overflow
    // the stack. The value is dropped on a thread with a large stack, since serde_json's own
    // drop is recursive.
    let handle = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            // `json!` would serialize (copy) its argument at every level; build directly.
            let deep = (0..100_000).fold(json!(1), |acc, _| Value::Array(vec![acc]));
            let mut root = serde_json::Map::new();
            root.insert("const".to_owned(), deep);
            let err = compile_error(&Value::Object(root));
            assert!(
                matches!(err, SchemaError::TooDeep { depth: 100_001, .. }),
                "{err}"
            );
            assert!(err.to_string().contains("100001 levels deep"), "{err}");
        })
        .unwrap();
    handle.join().unwrap();
}

#[test]
fn size_limit() {
    let properties = |n: usize| -> Value {
        let map: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        json!({ "properties": map })
    };
    // The root and `properties` objects count, plus one per property.
    assert!(compile(&properties(MAX_SUBSCHEMAS - 2)).is_ok());
    match compile_error(&properties(MAX_SUBSCHEMAS - 1)) {
        SchemaError::TooLarge { count, limit } => {
            assert_eq!((count, limit), (MAX_SUBSCHEMAS + 1, MAX_SUBSCHEMAS));
        }
        other => panic!("expected a size refusal, got {other}"),
    }
}

/// `levels` definitions, each of which refers to the next one twice.
fn doubling_chain(levels: usize, combinator: &str) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..levels {
        let next = format!("#/$defs/d{}", i + 1);
        defs.insert(
            format!("d{i}"),
            json!({ combinator: [{"$ref": next}, {"$ref": next}] }),
        );
    }
    defs.insert(format!("d{levels}"), json!({"type": "string"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

#[test]
fn exponential_reference_fan_out_is_refused() {
    for combinator in ["anyOf", "allOf", "oneOf"] {
        // 2^30 visits would take about a minute; the bound refuses it at compile time.
        let started = Instant::now();
        let err = compile_error(&doubling_chain(30, combinator));
        assert!(matches!(err, SchemaError::TooComplex { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(1));
        // A short chain is harmless and still works. (Under oneOf a string matches both
        // branches of every level, which oneOf forbids.)
        let small = compiled(&doubling_chain(5, combinator));
        assert_eq!(small.validate(&json!("x")).is_ok(), combinator != "oneOf");
        assert!(small.validate(&json!(1)).is_err());
    }
}

/// An expression tree in the shape pydantic generates for a recursive union, with the
/// discriminating `op` listed last.
fn expression_schema() -> Value {
    json!({
        "$defs": {
            "Expr": {"anyOf": [{"$ref": "#/$defs/Add"}, {"$ref": "#/$defs/Mul"}, {"type": "integer"}]},
            "Add": {"type": "object", "properties": {"left": {"$ref": "#/$defs/Expr"}, "right": {"$ref": "#/$defs/Expr"}, "op": {"const": "add"}}, "required": ["left", "right", "op"]},
            "Mul": {"type": "object", "properties": {"left": {"$ref": "#/$defs/Expr"}, "right": {"$ref": "#/$defs/Expr"}, "op": {"const": "mul"}}, "required": ["left", "right", "op"]}
        },
        "$ref": "#/$defs/Expr"
    })
}

fn left_chain(depth: usize, leaf: Value) -> Value {
    (0..depth).fold(leaf, |acc, _| {
        let mut node = serde_json::Map::new();
        node.insert("left".to_owned(), acc);
        node.insert("right".to_owned(), json!(1));
        node.insert("op".to_owned(), json!("mul"));
        Value::Object(node)
    })
}

#[test]
fn exponential_recursion_is_refused_per_instance() {
    let schema = compiled(&expression_schema());
    // Shallow expressions validate as usual, with details when invalid.
    assert!(schema.validate(&left_chain(6, json!(1))).is_ok());
    let shallow = schema.validate(&left_chain(6, json!("bad"))).unwrap_err();
    assert_eq!(
        summary(&shallow),
        "1 schema violation: (root): value matches none of the alternatives (anyOf)"
    );
    // Deeper, a valid expression is still accepted (the boolean check is cheap) ...
    assert!(schema.validate(&left_chain(14, json!(1))).is_ok());
    // ... but explaining an invalid one would take a third of a second, so it is refused
    // without details.
    let started = Instant::now();
    let middle = schema.validate(&left_chain(14, json!("bad"))).unwrap_err();
    assert_eq!(middle.len(), 1);
    assert!(middle[0].message.contains("no details"), "{middle:?}");
    // Deeper still, jsonschema could take hours whatever the outcome: refused outright.
    let deep = schema.validate(&left_chain(25, json!("bad"))).unwrap_err();
    assert_eq!(deep.len(), 1);
    assert!(deep[0].message.contains("too complex"), "{deep:?}");
    assert!(!deep[0].message.contains("bad"), "{deep:?}");
    // Counting stops at the budget: a few tens of milliseconds in a release build, about a
    // second in a debug build. Unbounded, this would not finish today.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );

    // The same with two identical branches that both descend into the same member.
    let ambiguous = compiled(&json!({
        "$defs": {
            "a": {"anyOf": [{"$ref": "#/$defs/b"}, {"$ref": "#/$defs/b"}]},
            "b": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}}, "required": ["x"]}
        },
        "$ref": "#/$defs/a"
    }));
    let nested_x = |depth: usize| {
        (0..depth).fold(json!(1), |acc, _| {
            let mut node = serde_json::Map::new();
            node.insert("x".to_owned(), acc);
            Value::Object(node)
        })
    };
    assert!(ambiguous.validate(&nested_x(8)).is_err());
    let started = Instant::now();
    let refused = ambiguous.validate(&nested_x(40)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(refused[0].message.contains("too complex"), "{refused:?}");
}

#[test]
fn large_ordinary_instances_are_within_budget() {
    let schema = compiled(&json!({
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                "additionalProperties": false
            }}
        }
    }));
    let rows: Vec<Value> = (0..50_000)
        .map(|i| json!({"id": i, "name": if i % 2 == 0 { json!("n") } else { Value::Null }}))
        .collect();
    assert!(schema.validate(&json!({ "rows": rows })).is_ok());
    // An invalid instance of a few thousand values still gets details.
    let mut rows: Vec<Value> = (0..5_000).map(|i| json!({ "id": i })).collect();
    rows[4_321] = json!({"id": "4321"});
    let violations = schema.validate(&json!({ "rows": rows })).unwrap_err();
    assert_eq!(
        violations[0].to_string(),
        "/rows/4321/id: expected integer, got string"
    );
    let free_form = compiled(&json!({"type": "object"}));
    let deep = (0..100).fold(json!(1), |acc, _| Value::Array(vec![acc]));
    assert!(free_form.validate(&json!({ "data": deep })).is_ok());
}

#[test]
fn shared_definitions_are_not_mistaken_for_blow_up() {
    // Many properties referring to the same definitions is the normal shape of generated
    // schemas (pydantic, zod) and must stay well inside the expansion bound.
    let mut properties = serde_json::Map::new();
    for i in 0..200 {
        properties.insert(format!("p{i}"), json!({"$ref": "#/$defs/item"}));
    }
    let schema = json!({
        "$defs": {
            "item": {"type": "object", "properties": {"a": {"$ref": "#/$defs/leaf"}, "b": {"$ref": "#/$defs/leaf"}}},
            "leaf": {"type": "object", "properties": {"v": {"type": "string"}, "w": {"type": "integer"}}}
        },
        "properties": properties
    });
    assert!(compile(&schema).is_ok());
}

#[test]
fn self_references_compile_and_terminate() {
    let rows = [
        json!({"$ref": "#"}),
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]}),
    ];
    for schema in rows {
        let compiled = compiled(&schema);
        let _ = compiled.validate(&json!({"a": [1, "b"]}));
    }
}

#[test]
fn error_messages_are_sentences_that_say_what_to_do() {
    let errors = [
        compile_error(&json!({"$schema": "https://example.com/x"})),
        compile_error(&json!({"$ref": "https://evil.example/x.json"})),
        compile_error(&json!({"pattern": "(?<=a)"})),
        compile_error(&nested(40, json!({}))),
        compile_error(&json!({"type": 1})),
    ];
    for err in errors {
        let text = err.to_string();
        assert!(text.starts_with("The "), "{text}");
        assert!(text.ends_with('.'), "{text}");
        assert!(text.contains("must"), "{text}");
    }
}

#[test]
fn hostile_schema_text_is_escaped_in_errors() {
    let err = compile_error(&json!({"$ref": "https://evil.example/\u{1b}]0;pwned\u{7}"}));
    let text = err.to_string();
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(!text.contains('\u{7}'), "{text}");
    let long = format!("https://evil.example/{}", "a".repeat(10_000));
    let text = compile_error(&json!({ "$ref": long })).to_string();
    assert!(text.len() < 1_000, "{}", text.len());
}

/// Runs a table of (name, schema, instance, undeclared pointers) rows for the closed-arguments
/// check and reports every mismatch at once. Every instance is valid against its schema, as the
/// check only sees arguments that validation accepted.
fn check_undeclared(rows: &[(&str, Value, Value, &[&str])]) {
    let mut failures = Vec::new();
    for (name, schema, instance, expected) in rows {
        let schema = compiled(schema);
        if let Err(v) = schema.validate(instance) {
            failures.push(format!("{name}: the instance should be valid: {v:?}"));
            continue;
        }
        let mut found = schema.undeclared(instance);
        found.sort();
        let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        expected.sort();
        if found != expected {
            failures.push(format!("{name}: expected {expected:?}, got {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn undeclared_members_are_found_where_properties_are_declared() {
    let flat = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    check_undeclared(&[
        ("declared only", flat.clone(), json!({"path": "a"}), &[]),
        ("empty", flat.clone(), json!({}), &[]),
        (
            "one extra",
            flat.clone(),
            json!({"path": "a", "mode": "x"}),
            &["/mode"],
        ),
        (
            "pointer escaped",
            flat.clone(),
            json!({"a/b": 1, "c~d": 2}),
            &["/a~1b", "/c~0d"],
        ),
        (
            "no arguments declared",
            json!({"type": "object", "properties": {}}),
            json!({"x": 1}),
            &["/x"],
        ),
        (
            "required names are declared",
            json!({"type": "object", "properties": {}, "required": ["id"]}),
            json!({"id": 1}),
            &[],
        ),
        (
            "dependentRequired names are declared",
            json!({"properties": {"a": {}}, "dependentRequired": {"a": ["b"]}}),
            json!({"a": 1, "b": 2, "c": 3}),
            &["/c"],
        ),
        (
            "draft-07 property dependencies are declared",
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"a": {}}, "dependencies": {"a": ["b"]}}),
            json!({"a": 1, "b": 2}),
            &[],
        ),
        (
            "free-form object stays open",
            json!({"type": "object"}),
            json!({"anything": {"deep": 1}}),
            &[],
        ),
        ("true schema", json!(true), json!({"x": 1}), &[]),
    ]);
}

#[test]
fn open_schemas_stay_open() {
    check_undeclared(&[
        (
            "additionalProperties true",
            json!({"properties": {"a": {}}, "additionalProperties": true}),
            json!({"a": 1, "b": 2}),
            &[],
        ),
        (
            "additionalProperties schema",
            json!({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}),
            json!({"a": 1, "b": 2}),
            &[],
        ),
        (
            "unevaluatedProperties schema",
            json!({"properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}}),
            json!({"a": 1, "b": 2}),
            &[],
        ),
        (
            "an open branch opens the location",
            json!({"anyOf": [{"properties": {"a": {}}}, {"additionalProperties": true}]}),
            json!({"b": 1}),
            &[],
        ),
        (
            "open at the top, closed inside",
            json!({"additionalProperties": {"type": "object", "properties": {"x": {}}}}),
            json!({"any": {"x": 1, "y": 2}}),
            &["/any/y"],
        ),
    ]);
}

#[test]
fn nested_objects_and_arrays_of_objects_are_closed() {
    let nested = json!({
        "type": "object",
        "properties": {
            "options": {"type": "object", "properties": {"recursive": {"type": "boolean"}}},
            "files": {"type": "array", "items": {"type": "object", "properties": {"path": {}}}},
            "free": {"type": "object"},
            "pair": {"type": "array", "prefixItems": [{"properties": {"k": {}}}, {"properties": {"v": {}}}]}
        }
    });
    check_undeclared(&[
        (
            "all declared",
            nested.clone(),
            json!({"options": {"recursive": true}, "files": [{"path": "a"}, {"path": "b"}], "free": {"z": 1}}),
            &[],
        ),
        (
            "nested extra",
            nested.clone(),
            json!({"options": {"recursive": true, "followSymlinks": true}}),
            &["/options/followSymlinks"],
        ),
        (
            "extra in an array item",
            nested.clone(),
            json!({"files": [{"path": "a"}, {"path": "b", "mode": 7}]}),
            &["/files/1/mode"],
        ),
        (
            "positional items",
            nested.clone(),
            json!({"pair": [{"k": 1, "v": 2}, {"v": 2}]}),
            &["/pair/0/v"],
        ),
    ]);
}

#[test]
fn composition_references_and_patterns_declare_members() {
    check_undeclared(&[
        (
            "allOf branches together",
            json!({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}),
            json!({"a": 1, "b": 2, "c": 3}),
            &["/c"],
        ),
        (
            "anyOf branches count whether they matched or not",
            json!({"anyOf": [
                {"properties": {"kind": {"const": "a"}, "a": {}}},
                {"properties": {"kind": {"const": "b"}, "b": {}}}
            ]}),
            json!({"kind": "a", "b": 1, "c": 2}),
            &["/c"],
        ),
        (
            "if then else",
            json!({"properties": {"kind": {}}, "if": {"properties": {"kind": {"const": "x"}}}, "then": {"properties": {"x": {}}}}),
            json!({"kind": "x", "x": 1, "y": 2}),
            &["/y"],
        ),
        (
            "not declares nothing",
            json!({"properties": {"a": {}}, "not": {"properties": {"admin": {"const": true}}, "required": ["admin"]}}),
            json!({"a": 1, "admin": false}),
            &["/admin"],
        ),
        (
            "local $ref",
            json!({
                "$defs": {"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}}},
                "type": "object",
                "properties": {"opts": {"$ref": "#/$defs/opts"}}
            }),
            json!({"opts": {"depth": 1, "extra": true}}),
            &["/opts/extra"],
        ),
        (
            "recursive $ref",
            json!({
                "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}, "name": {}}}},
                "$ref": "#/$defs/node"
            }),
            json!({"name": "r", "children": [{"name": "c", "children": [{"name": "g", "x": 1}]}]}),
            &["/children/0/children/0/x"],
        ),
        (
            "draft-07 definitions",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": {"p": {"type": "object", "properties": {"q": {}}}},
                "properties": {"p": {"$ref": "#/definitions/p"}}
            }),
            json!({"p": {"q": 1, "r": 2}}),
            &["/p/r"],
        ),
        (
            "patternProperties declare by pattern",
            json!({"properties": {"a": {}}, "patternProperties": {"^x-[a-z]+$": {"type": "object", "properties": {"v": {}}}}}),
            json!({"a": 1, "x-one": {"v": 1, "w": 2}, "y": 3}),
            &["/x-one/w", "/y"],
        ),
        (
            "patternProperties alone close the object",
            json!({"patternProperties": {"^\\d+$": {}}}),
            json!({"12": 1, "ab": 2}),
            &["/ab"],
        ),
    ]);
}

#[test]
fn undeclared_reports_are_bounded_and_never_carry_values() {
    let schema = compiled(&json!({"properties": {}}));
    let many: serde_json::Map<String, Value> = (0..50)
        .map(|i| (format!("k{i}"), json!("secret-value")))
        .collect();
    let found = schema.undeclared(&Value::Object(many));
    assert_eq!(found.len(), MAX_VIOLATIONS);
    assert!(found.iter().all(|p| !p.contains("secret")));
    let hidden = schema.undeclared(&json!({"a\u{202e}b": 1}));
    assert_eq!(hidden, vec!["/a\\u{202e}b".to_string()]);
}

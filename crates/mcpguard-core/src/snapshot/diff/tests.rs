use serde_json::json;

use super::*;

/// A small but complete document: two servers, one with two pages and reviews.
fn base() -> Value {
    json!({
        "profile": "openudon.mcp-tool-manifest.0.1",
        "protocolVersion": "2025-11-25",
        "capturedAt": "2026-08-30T12:00:00Z",
        "expiresAt": "2026-09-06T12:00:00Z",
        "servers": {
            "notes": {
                "serverInfo": {"name": "notes-server", "version": "1.2.0"},
                "instructions": "Use read_note before write_note.",
                "toolPages": [
                    {"tools": [
                        {
                            "name": "read_note",
                            "description": "Reads a note.",
                            "inputSchema": {
                                "type": "object",
                                "properties": {"id": {"type": "string", "maxLength": 64}},
                                "required": ["id"],
                                "additionalProperties": false
                            },
                            "annotations": {"readOnlyHint": true}
                        },
                        {
                            "name": "write_note",
                            "description": "Writes a note.",
                            "inputSchema": {
                                "type": "object",
                                "properties": {
                                    "text": {"type": "string", "maxLength": 1000}
                                },
                                "additionalProperties": false
                            },
                            "annotations": {"destructiveHint": false}
                        }
                    ], "nextCursor": "page-2"},
                    {"tools": [
                        {
                            "name": "list_notes",
                            "description": "Lists notes.",
                            "inputSchema": {"type": "object", "additionalProperties": false},
                            "annotations": {"readOnlyHint": true, "limit": 1}
                        }
                    ]}
                ],
                "reviews": {
                    "read_note": {
                        "reviewer": "alice@example.test",
                        "reviewedAt": "2026-08-30T13:00:00Z",
                        "assertions": {
                            "headless": true,
                            "independentCalls": true,
                            "modelBacked": false,
                            "sideEffects": [],
                            "concurrency": "safe",
                            "referenceBasedIO": true
                        },
                        "inputChannels": {"/id": "data"}
                    }
                }
            },
            "clock": {
                "serverInfo": {"name": "clock", "version": "0.1.0"},
                "toolPages": [{"tools": [{"name": "now", "inputSchema": {"type": "object"}}]}],
                "reviews": {}
            }
        }
    })
}

/// Applies `edit` to a copy of the base document.
fn edited(edit: impl FnOnce(&mut Value)) -> Value {
    let mut doc = base();
    edit(&mut doc);
    doc
}

fn at<'a>(doc: &'a mut Value, pointer: &str) -> &'a mut Value {
    doc.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("test fixture has no {pointer}"))
}

/// Inserts (or replaces) member `key` of the object at `pointer`.
fn set(doc: &mut Value, pointer: &str, key: &str, value: Value) {
    match at(doc, pointer) {
        Value::Object(members) => {
            members.insert(key.to_owned(), value);
        }
        _ => panic!("test fixture has no object at {pointer}"),
    }
}

const NOTES: &str = "/servers/notes";
const PAGE0: &str = "/servers/notes/toolPages/0/tools";

type Edit = fn(&mut Value);

/// (case name, edit applied to the base document as the new side, expected rendering).
fn cases() -> Vec<(&'static str, Edit, &'static str)> {
    vec![
        ("identical documents", |_| {}, ""),
        (
            "one-character description change",
            |d| *at(d, &format!("{PAGE0}/0/description")) = json!("Reads a note!"),
            "server notes:\n  tool read_note:\n    ~ /description: \"Reads a note.\" -> \"Reads a note!\"\n",
        ),
        (
            "flipped annotation",
            |d| *at(d, &format!("{PAGE0}/1/annotations/destructiveHint")) = json!(true),
            "server notes:\n  tool write_note:\n    ~ /annotations/destructiveHint: false -> true\n",
        ),
        (
            "added annotation",
            |d| *at(d, &format!("{PAGE0}/0/annotations")) = json!({"readOnlyHint": true, "destructiveHint": true}),
            "server notes:\n  tool read_note:\n    + /annotations/destructiveHint: true\n",
        ),
        (
            "nested schema keyword",
            |d| *at(d, &format!("{PAGE0}/1/inputSchema/properties/text/maxLength")) = json!(1001),
            "server notes:\n  tool write_note:\n    ~ /inputSchema/properties/text/maxLength: 1000 -> 1001\n",
        ),
        (
            "zero-width character inserted into a description",
            |d| *at(d, &format!("{PAGE0}/0/description")) = json!("Reads\u{200B} a note."),
            "server notes:\n  tool read_note:\n    ~ /description: \"Reads a note.\" -> \"Reads\\u{200B} a note.\"\n",
        ),
        (
            "escape sequence that clean() alone would delete",
            |d| *at(d, &format!("{PAGE0}/0/description")) = json!("Reads a note.\u{9b}2J"),
            "server notes:\n  tool read_note:\n    ~ /description: \"Reads a note.\" -> \"Reads a note.\\u{009B}2J\"\n",
        ),
        (
            "serverInfo version",
            |d| *at(d, &format!("{NOTES}/serverInfo/version")) = json!("1.2.1"),
            "server notes:\n  ~ /serverInfo/version: \"1.2.0\" -> \"1.2.1\"\n",
        ),
        (
            "instructions changed",
            |d| *at(d, &format!("{NOTES}/instructions")) = json!("Always call write_note."),
            "server notes:\n  ~ /instructions: \"Use read_note before write_note.\" -> \"Always call write_note.\"\n",
        ),
        (
            "tool added on the last page",
            |d| {
                let tools = at(d, "/servers/notes/toolPages/1/tools");
                tools.as_array_mut().unwrap().push(json!({"name": "delete_note", "inputSchema": {"type": "object"}}));
            },
            "server notes:\n  + tool delete_note (added)\n",
        ),
        (
            "tool removed",
            |d| {
                at(d, PAGE0).as_array_mut().unwrap().remove(1);
            },
            "server notes:\n  - tool write_note (removed)\n",
        ),
        (
            "tool moved to another page",
            |d| {
                let moved = at(d, PAGE0).as_array_mut().unwrap().remove(1);
                at(d, "/servers/notes/toolPages/1/tools").as_array_mut().unwrap().insert(0, moved);
            },
            concat!(
                "server notes:\n",
                "  ~ /toolPages: [{\"tools\":[\"read_note\",\"write_no…ge-2\"},{\"tools\":[\"list_notes\"]}]",
                " -> [{\"tools\":[\"read_note\"],\"nextCur…s\":[\"write_note\",\"list_notes\"]}]\n",
                "      old: [{\"tools\":[\"read_note\",\"write_note\"],\"nextCursor\":\"page-2\"},{\"tools\":[\"list_notes\"]}]\n",
                "      new: [{\"tools\":[\"read_note\"],\"nextCursor\":\"page-2\"},{\"tools\":[\"write_note\",\"list_notes\"]}]\n",
            ),
        ),
        (
            "pages merged into one",
            |d| {
                let last = at(d, "/servers/notes/toolPages").as_array_mut().unwrap().remove(1);
                let tools = at(d, PAGE0).as_array_mut().unwrap();
                tools.extend(last["tools"].as_array().unwrap().iter().cloned());
                at(d, "/servers/notes/toolPages/0").as_object_mut().unwrap().remove("nextCursor");
            },
            concat!(
                "server notes:\n",
                "  ~ /toolPages: [{\"tools\":[\"read_note\",\"write_no…ge-2\"},{\"tools\":[\"list_notes\"]}]",
                " -> [{\"tools\":[\"read_note\",\"write_note\",\"list_notes\"]}]\n",
                "      old: [{\"tools\":[\"read_note\",\"write_note\"],\"nextCursor\":\"page-2\"},{\"tools\":[\"list_notes\"]}]\n",
                "      new: [{\"tools\":[\"read_note\",\"write_note\",\"list_notes\"]}]\n",
            ),
        ),
        (
            "review edited",
            |d| *at(d, &format!("{NOTES}/reviews/read_note/assertions/sideEffects")) = json!(["reads_files"]),
            "server notes:\n  + /reviews/read_note/assertions/sideEffects/0: \"reads_files\"\n",
        ),
        (
            "review removed",
            |d| {
                at(d, &format!("{NOTES}/reviews")).as_object_mut().unwrap().remove("read_note");
            },
            concat!(
                "server notes:\n",
                "  - /reviews/read_note: {\"reviewer\":\"alice@example.test\"…,\"inputChannels\":{\"/id\":\"data\"}}\n",
                "      old: {\"reviewer\":\"alice@example.test\",\"reviewedAt\":\"2026-08-30T13:00:00Z\",",
                "\"assertions\":{\"headless\":true,\"independentCalls\":true,\"modelBacked\":false,",
                "\"sideEffects\":[],\"concurrency\":\"safe\",\"referenceBasedIO\":true},",
                "\"inputChannels\":{\"/id\":\"data\"}}\n",
            ),
        ),
        (
            "1 and 1.0 are the same number",
            |d| *at(d, "/servers/notes/toolPages/1/tools/0/annotations/limit") = json!(1.0),
            "",
        ),
        (
            "member order does not matter",
            |d| {
                let info = at(d, &format!("{NOTES}/serverInfo"));
                *info = json!({"version": "1.2.0", "name": "notes-server"});
            },
            "",
        ),
        (
            "document fields",
            |d| {
                *at(d, "/protocolVersion") = json!("2025-06-18");
                *at(d, "/expiresAt") = json!("2026-09-07T12:00:00Z");
            },
            "document:\n  ~ /protocolVersion: \"2025-11-25\" -> \"2025-06-18\"\n  ~ /expiresAt: \"2026-09-06T12:00:00Z\" -> \"2026-09-07T12:00:00Z\"\n",
        ),
        (
            "server removed",
            |d| {
                at(d, "/servers").as_object_mut().unwrap().remove("clock");
            },
            "- server clock (removed)\n",
        ),
        (
            "server renamed to a key with a zero-width space",
            |d| {
                let servers = at(d, "/servers").as_object_mut().unwrap();
                let clock = servers.remove("clock").unwrap();
                servers.insert("clo\u{200B}ck".to_owned(), clock);
            },
            "- server clock (removed)\n+ server \"clo\\u{200B}ck\" (added)\n",
        ),
        (
            "tool that is not an object",
            |d| *at(d, "/servers/clock/toolPages/0/tools/0") = json!("now"),
            "server clock:\n  + /toolPages/0/tools/0: \"now\"\n  - tool now (removed)\n",
        ),
        (
            "toolPages that is not an array",
            |d| *at(d, "/servers/clock/toolPages") = json!({"tools": []}),
            "server clock:\n  ~ /toolPages: [{\"tools\":[\"now\"]}] -> {\"tools\":[]}\n  - tool now (removed)\n",
        ),
        (
            "long description abbreviated on the summary line only",
            |d| *at(d, &format!("{PAGE0}/0/description")) = json!(format!("Reads a note.{}", "x".repeat(80))),
            concat!(
                "server notes:\n  tool read_note:\n",
                "    ~ /description: \"Reads a note.\" -> \"Reads a note.xxxxxxxxxxxxxxxxxx…xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n",
                "        old: \"Reads a note.\"\n",
                "        new: \"Reads a note.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n",
            ),
        ),
    ]
}

#[test]
fn renders_each_kind_of_change() {
    for (name, edit, want) in cases() {
        let old = base();
        let new = edited(edit);
        let got = render(&diff_documents(&old, &new));
        assert_eq!(got, want, "case {name:?}:\n{got}");
    }
}

#[test]
fn every_difference_is_reported_and_nothing_else() {
    // Whatever the edit, a diff is empty exactly when the documents are canonically equal,
    // and diffing a document against itself in either direction is empty.
    for (name, edit, _) in cases() {
        let old = base();
        let new = edited(edit);
        let forward = diff_documents(&old, &new);
        let backward = diff_documents(&new, &old);
        assert_eq!(forward.is_empty(), json_eq(&old, &new), "case {name:?}");
        assert_eq!(forward.len(), backward.len(), "case {name:?}");
        assert!(diff_documents(&new, &new).is_empty(), "case {name:?}");
    }
}

#[test]
fn pointers_and_kinds() {
    type Expected = &'static [(&'static str, Option<&'static str>, &'static str, ChangeKind)];
    let cases: Vec<(Edit, Expected)> = vec![
        (
            |d| {
                *at(
                    d,
                    &format!("{PAGE0}/1/inputSchema/properties/text/maxLength"),
                ) = json!(1001)
            },
            &[(
                "notes",
                Some("write_note"),
                "/inputSchema/properties/text/maxLength",
                ChangeKind::Changed,
            )],
        ),
        (
            |d| {
                at(d, PAGE0).as_array_mut().unwrap().remove(1);
            },
            &[("notes", Some("write_note"), "", ChangeKind::Removed)],
        ),
        (
            |d| set(d, "/servers/notes/toolPages/0", "_meta", json!({"k": 1})),
            &[("notes", None, "/toolPages/0/_meta", ChangeKind::Added)],
        ),
        (
            |d| *at(d, "/servers/notes/toolPages/0/nextCursor") = json!("p2"),
            &[("notes", None, "/toolPages", ChangeKind::Changed)],
        ),
        (
            |d| {
                at(d, "/servers/notes")
                    .as_object_mut()
                    .unwrap()
                    .remove("toolPages");
            },
            &[
                ("notes", None, "/toolPages", ChangeKind::Removed),
                ("notes", Some("list_notes"), "", ChangeKind::Removed),
                ("notes", Some("read_note"), "", ChangeKind::Removed),
                ("notes", Some("write_note"), "", ChangeKind::Removed),
            ],
        ),
        (
            |d| *at(d, &format!("{PAGE0}/1")) = json!({"name": "read_note", "description": "twin"}),
            &[
                ("notes", None, "/toolPages/0/tools/1", ChangeKind::Added),
                ("notes", Some("write_note"), "", ChangeKind::Removed),
            ],
        ),
        (
            |d| {
                set(
                    d,
                    NOTES,
                    "capabilities",
                    json!({"tools": {"listChanged": true}}),
                )
            },
            &[("notes", None, "/capabilities", ChangeKind::Added)],
        ),
        (
            |d| *at(d, "/servers") = json!([]),
            &[("", None, "/servers", ChangeKind::Changed)],
        ),
        (
            |d| *d = json!("not a document"),
            &[("", None, "", ChangeKind::Changed)],
        ),
        (
            |d| {
                let servers = at(d, "/servers").as_object_mut().unwrap();
                let clock = servers.remove("clock").unwrap();
                servers.insert(String::new(), clock);
            },
            &[
                ("", None, "/servers/", ChangeKind::Added),
                ("clock", None, "", ChangeKind::Removed),
            ],
        ),
    ];
    for (i, (edit, want)) in cases.into_iter().enumerate() {
        let got: Vec<(String, Option<String>, String, ChangeKind)> =
            diff_documents(&base(), &edited(edit))
                .into_iter()
                .map(|c| (c.server, c.tool, c.pointer, c.kind))
                .collect();
        let want: Vec<(String, Option<String>, String, ChangeKind)> = want
            .iter()
            .map(|(s, t, p, k)| ((*s).to_owned(), t.map(str::to_owned), (*p).to_owned(), *k))
            .collect();
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn diff_tool_names_each_leaf() {
    let old =
        json!({"name": "t", "inputSchema": {"type": "object", "required": ["a", "b"]}, "x": 1});
    let new = json!({"name": "t", "inputSchema": {"type": "object", "required": ["a"]}, "x": 1.0, "y": null});
    let got: Vec<(String, ChangeKind)> = diff_tool("s", "t", &old, &new)
        .into_iter()
        .map(|c| {
            assert_eq!((c.server.as_str(), c.tool.as_deref()), ("s", Some("t")));
            (c.pointer, c.kind)
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("/inputSchema/required/1".to_owned(), ChangeKind::Removed),
            ("/y".to_owned(), ChangeKind::Added),
        ]
    );
    // Keys that need escaping in a pointer, and a type change.
    let got = diff_tool("s", "t", &json!({"a/b~c": 1}), &json!({"a/b~c": "1"}));
    assert_eq!(got[0].pointer, "/a~1b~0c");
    assert_eq!(got[0].kind, ChangeKind::Changed);
}

#[test]
fn numbers_compare_as_doubles() {
    let cases = [
        (json!(1), json!(1.0), true),
        (json!(0), json!(-0.0), true),
        (json!(9007199254740993u64), json!(9007199254740992.0), true),
        (json!(1), json!(2), false),
        (json!([1, {"a": 1.5}]), json!([1.0, {"a": 1.5}]), true),
        (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
        (json!(null), json!(false), false),
    ];
    for (a, b, want) in cases {
        assert_eq!(json_eq(&a, &b), want, "{a} vs {b}");
    }
}

#[test]
fn hidden_differences_are_always_visible() {
    // Pairs that a terminal (or `clean`, which deletes escape sequences) would show alike.
    let pairs = [
        ("abc", "ab\u{200B}c"),
        ("abc", "abc\u{E0041}"),
        ("red", "\u{1b}[31mred"),
        ("cleared", "\u{9b}2Jcleared"),
        ("a\\u{202E}b", "a\u{202E}b"),
    ];
    for (a, b) in pairs {
        let changes = diff_tool("s", "t", &json!({"d": a}), &json!({"d": b}));
        let text = render(&changes);
        let line = text.lines().nth(2).unwrap_or_default();
        let (left, right) = line.split_once(" -> ").unwrap_or_default();
        let left = left.trim_start_matches("    ~ /d: ");
        assert_ne!(left, right, "{a:?} vs {b:?} rendered alike: {text}");
        assert!(!text.chars().any(|c| is_hidden(c) && c != '\n'), "{text:?}");
    }
}

#[test]
fn abbreviation_never_splits_a_marker() {
    let long = format!("{}\u{200B}{}", "a".repeat(30), "b".repeat(100));
    let shown = abbreviate(&visible_json(&json!(long)));
    assert!(
        shown.starts_with(&format!("\"{}\\u{{200B}}…", "a".repeat(30))),
        "{shown}"
    );
    assert_eq!(
        atoms("\\u001b\\\\u{41}\\u{200B}x"),
        ["\\u001b", "\\\\", "u", "{", "4", "1", "}", "\\u{200B}", "x"]
    );
}

#[test]
fn odd_shapes_never_panic() {
    let shapes = [
        json!(null),
        json!(1),
        json!([]),
        json!({}),
        json!({"servers": 1}),
        json!({"servers": {"a": 1}}),
        json!({"servers": {"a": {"toolPages": 1}}}),
        json!({"servers": {"a": {"toolPages": [1, {"tools": 2}, {"tools": [3, {"name": 4}, {"name": "x"}, {"name": "x"}]}]}}}),
        json!({"servers": {"a": {"toolPages": [{"tools": [{"name": "x"}]}], "reviews": []}}}),
        json!({"servers": {"": {"toolPages": [{"tools": [{"name": ""}]}]}}}),
    ];
    for a in &shapes {
        for b in &shapes {
            let changes = diff_documents(a, b);
            assert_eq!(changes.is_empty(), json_eq(a, b), "{a} vs {b}");
            let _ = render(&changes);
        }
    }
}

/// A small deterministic generator, so that the randomized tests below are reproducible.
pub(crate) struct Lcg(pub(crate) u64);

impl Lcg {
    pub(crate) fn pick(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        usize::try_from(self.0 >> 33).unwrap_or(0) % n.max(1)
    }
}

const WORDS: [&str; 8] = [
    "name",
    "tools",
    "a",
    "read_note",
    "x\u{200B}",
    "nextCursor",
    "1",
    "",
];

fn random_value(rng: &mut Lcg, depth: usize) -> Value {
    match rng.pick(if depth == 0 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.pick(2) == 0),
        2 => [json!(1), json!(1.0), json!(2), json!(-0.0)][rng.pick(4)].clone(),
        3 | 4 => json!(WORDS[rng.pick(WORDS.len())]),
        5 => Value::Array(
            (0..rng.pick(3))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        6 => random_tool(rng, depth - 1),
        _ => {
            let mut m = Map::new();
            for _ in 0..rng.pick(4) {
                m.insert(
                    WORDS[rng.pick(WORDS.len())].to_owned(),
                    random_value(rng, depth - 1),
                );
            }
            Value::Object(m)
        }
    }
}

fn random_tool(rng: &mut Lcg, depth: usize) -> Value {
    let mut tool = Map::new();
    tool.insert(
        "name".to_owned(),
        json!(["read_note", "write_note", "x"][rng.pick(3)]),
    );
    if rng.pick(2) == 0 {
        tool.insert("description".to_owned(), random_value(rng, depth));
    }
    Value::Object(tool)
}

/// A document that mostly has the profile's shape, with random noise where it matters.
fn random_doc(rng: &mut Lcg) -> Value {
    let mut servers = Map::new();
    for key in ["s", "t", ""].iter().take(rng.pick(4)) {
        let mut pages = Vec::new();
        for _ in 0..rng.pick(3) {
            let tools: Vec<Value> = (0..rng.pick(4))
                .map(|_| {
                    if rng.pick(5) == 0 {
                        random_value(rng, 2)
                    } else {
                        random_tool(rng, 2)
                    }
                })
                .collect();
            let mut page = json!({"tools": tools});
            if rng.pick(3) == 0 {
                page["nextCursor"] = json!(WORDS[rng.pick(WORDS.len())]);
            }
            pages.push(if rng.pick(10) == 0 {
                random_value(rng, 1)
            } else {
                page
            });
        }
        let entry = json!({
            "serverInfo": random_value(rng, 2),
            "toolPages": if rng.pick(10) == 0 { random_value(rng, 1) } else { Value::Array(pages) },
            "reviews": random_value(rng, 2),
        });
        servers.insert((*key).to_owned(), entry);
    }
    json!({"profile": "p", "protocolVersion": random_value(rng, 0), "servers": servers})
}

/// Replaces one randomly chosen node of `doc` by a random value (or leaves it alone).
fn mutate(rng: &mut Lcg, doc: &mut Value) {
    let mut node = doc;
    loop {
        let len = match &*node {
            Value::Array(items) => items.len(),
            Value::Object(m) => m.len(),
            _ => 0,
        };
        if len == 0 || rng.pick(3) == 0 {
            *node = random_value(rng, 2);
            return;
        }
        let i = rng.pick(len);
        node = match node {
            Value::Array(items) => &mut items[i],
            Value::Object(m) => match m.values_mut().nth(i) {
                Some(v) => v,
                None => return,
            },
            _ => return,
        };
    }
}

#[test]
fn randomized_documents() {
    let mut rng = Lcg(0x5eed);
    for round in 0..3000 {
        let old = random_doc(&mut rng);
        let mut new = old.clone();
        for _ in 0..=rng.pick(2) {
            mutate(&mut rng, &mut new);
        }
        let changes = diff_documents(&old, &new);
        assert_eq!(
            changes.is_empty(),
            json_eq(&old, &new),
            "round {round}: {old} vs {new}"
        );
        assert!(
            diff_documents(&new, &new).is_empty(),
            "round {round}: {new}"
        );
        // The safety net must never be what reported a difference in a profile-shaped document.
        let both_objects = old.is_object() && new.is_object();
        assert!(
            !both_objects
                || !changes
                    .iter()
                    .any(|c| c.server.is_empty() && c.tool.is_none() && c.pointer.is_empty()),
            "round {round}: whole-document change for {old} vs {new}"
        );
        let text = render(&changes);
        assert!(
            !text.chars().any(|c| is_hidden(c) && c != '\n'),
            "round {round}"
        );
    }
}

#[test]
fn deep_values_do_not_exhaust_the_stack() {
    // Built by hand (serde_json's parser would refuse this depth) to show the walks are
    // iterative. The values are dismantled iteratively too, since Value's own drop recurses.
    fn nest(depth: usize, leaf: Value) -> Value {
        let mut v = leaf;
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }
    fn dismantle(mut v: Value) {
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }
    let a = nest(50_000, json!(1));
    let b = nest(50_000, json!(2));
    assert!(!json_eq(&a, &b));
    let changes = diff_tool("s", "t", &a, &b);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].pointer.len(), 2 * 50_000);
    for c in changes {
        c.old.into_iter().chain(c.new).for_each(dismantle);
    }
    dismantle(a);
    dismantle(b);
}

//! The live catalogue: one complete live `tools/list` walk, read cheaply (a page is read in one
//! pass over text the envelope parse already validated; names indexed; only compared tools parsed
//! strictly and canonicalized), and the drift check of a live tool against the reviewed one.
//!
//! Pure functions of values; the walks themselves are driven by `gate::session`.

use std::collections::HashMap;

use crate::wire::message::Raw;

use crate::gate::pin::ReviewedTool;
use crate::snapshot::canonical;
/// One page of a live `tools/list`, read cheaply: each Tool stays raw JSON text and only its
/// name is read. A live walk of a large catalogue happens before every call, so the full strict
/// parse and canonicalization are kept for the few tools that are actually compared.
/// One live Tool: its name and its raw JSON text (valid JSON, as the server sent it).
pub type LiveTool = (String, Box<str>);

#[derive(Debug)]
pub struct LivePage {
    pub tools: Vec<LiveTool>,
    pub next_cursor: Option<String>,
}

/// Reads one page result. The page is a `Raw`, which the envelope reader has already validated
/// as JSON when the response was parsed; the page is then read in one pass over its text, without
/// a second validation (on the gated path a second serde pass over a 200 KiB page, and a third
/// one per Tool for its name, cost more than everything else mcpguard does for a call). A
/// repeated `tools`, `nextCursor` or Tool `name` member is an error, as it is for the strict
/// parser; other members are ignored.
pub fn parse_page(raw: Raw<'_>) -> Result<LivePage, String> {
    let bad = |e: String| format!("a live tools/list page is not acceptable: {e}");
    let text = raw.get();
    let b = text.as_bytes();
    let mut tools: Option<Vec<LiveTool>> = None;
    let mut cursor: Option<&str> = None;
    walk_object(text, 0, |key, start| match key {
        "tools" => {
            if tools.is_some() {
                return Err("duplicate member `tools`".into());
            }
            let (end, list) = read_tools(text, start)?;
            tools = Some(list);
            Ok(end)
        }
        "nextCursor" => {
            let end = skip_value(b, start);
            if cursor.replace(&text[start..end]).is_some() {
                return Err("duplicate member `nextCursor`".into());
            }
            Ok(end)
        }
        _ => Ok(skip_value(b, start)),
    })
    .map_err(bad)?;
    let next_cursor = match cursor {
        None | Some("null") => None,
        Some(c) => Some(
            serde_json::from_str::<String>(c)
                .map_err(|_| bad("`nextCursor` is not a string".into()))?,
        ),
    };
    let tools = tools.ok_or_else(|| bad("missing member `tools`".into()))?;
    Ok(LivePage { tools, next_cursor })
}

/// The `tools` array starting at `i`: each Tool's name and raw text, and the index past the
/// array.
fn read_tools(text: &str, mut i: usize) -> Result<(usize, Vec<LiveTool>), String> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'[') {
        return Err("`tools` is not an array".into());
    }
    i += 1;
    let mut tools = Vec::new();
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() || b[i] == b']' {
            return Ok((i + 1, tools));
        }
        let (end, name) =
            read_tool(text, i).map_err(|e| format!("a live tool has no usable name: {e}"))?;
        tools.push((name, Box::from(&text[i..end])));
        i = end;
    }
}

/// Walks the object that starts at `i` in `raw`, which must be valid JSON (a validated
/// `Raw` or a part of one), calling `f(key, value start)` for each member; `f` returns the
/// index just past the value (usually [`skip_value`]), so that a caller can read a value while
/// skipping it. Keys are passed decoded (`"n\u0061me"` is `name`). Returns the index past the
/// object. Skipping by brackets and quotes is sound only on valid JSON.
fn walk_object(
    raw: &str,
    mut i: usize,
    mut f: impl FnMut(&str, usize) -> Result<usize, String>,
) -> Result<usize, String> {
    let b = raw.as_bytes();
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return Err("not an object".into());
    }
    i += 1;
    loop {
        ws(&mut i);
        match b.get(i) {
            Some(b'}') => return Ok(i + 1),
            None => return Ok(i),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(b'"') => {}
            Some(_) => return Err("not an object".into()),
        }
        let (key_end, escaped) = scan_string(b, i);
        let token = &raw[i..key_end];
        let decoded;
        let key = if escaped {
            decoded = serde_json::from_str::<String>(token).map_err(|e| e.to_string())?;
            decoded.as_str()
        } else {
            &token[1..token.len() - 1]
        };
        i = key_end;
        ws(&mut i);
        i += 1; // The `:` that valid JSON has here.
        ws(&mut i);
        i = f(key, i)?;
    }
}

/// The Tool object starting at `i` of valid JSON text (see [`walk_object`]): the index past it
/// and its `name`. A second `name` member is an error, as it is for the strict parser.
fn read_tool(text: &str, i: usize) -> Result<(usize, String), String> {
    let b = text.as_bytes();
    let mut name: Option<&str> = None;
    let end = walk_object(text, i, |key, start| {
        let end = skip_value(b, start);
        if key == "name" && name.replace(&text[start..end]).is_some() {
            return Err("the Tool has two `name` members".into());
        }
        Ok(end)
    })?;
    let name = name.ok_or("the Tool has no `name`")?;
    let name = serde_json::from_str::<String>(name).map_err(|_| "`name` is not a string")?;
    Ok((end, name))
}

/// The index just past the JSON string that starts at `i` (a `"`), in valid JSON.
fn skip_string(b: &[u8], i: usize) -> usize {
    scan_string(b, i).0
}

/// [`skip_string`], also saying whether the string has an escape (keys without one are compared
/// as they are, with no decoding). The plain runs between escapes are skipped a word at a time
/// by the envelope reader's scan: descriptions are most of a page's bytes.
fn scan_string(b: &[u8], i: usize) -> (usize, bool) {
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        j = crate::wire::envelope::string_stop(b, j);
        match b.get(j) {
            Some(b'"') => return (j + 1, escaped),
            Some(b'\\') => {
                escaped = true;
                j += 2;
            }
            // A control character, which valid JSON does not have in a string: step over it.
            Some(_) => j += 1,
            None => return (b.len(), escaped),
        }
    }
}

/// The index just past the JSON value that starts at `i`, in valid JSON.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => skip_string(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

/// The live catalogue from one complete `tools/list` walk: name → the Tool as raw JSON text.
#[derive(Debug, Default)]
pub struct LiveCatalogue {
    pub tools: HashMap<String, Box<str>>,
}

impl LiveCatalogue {
    /// Builds the catalogue from the pages of a walk; a name occurring twice is an error.
    pub fn from_pages(pages: Vec<LivePage>) -> Result<Self, String> {
        let mut tools = HashMap::with_capacity(pages.iter().map(|p| p.tools.len()).sum());
        for page in pages {
            for (name, raw) in page.tools {
                match tools.entry(name) {
                    std::collections::hash_map::Entry::Occupied(seen) => {
                        return Err(format!("the live tools/list names {:?} twice", seen.key()))
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(raw);
                    }
                }
            }
        }
        Ok(LiveCatalogue { tools })
    }

    /// Why the live object of `tool` differs from the reviewed one, or `None` if identical.
    /// The live object is parsed strictly (duplicate members are drift) and compared by its
    /// RFC 8785 canonical bytes.
    pub fn drift(&self, pin_key: &str, tool: &ReviewedTool) -> Option<String> {
        let Some(raw) = self.tools.get(&tool.name) else {
            return Some(format!(
                "tool {:?} is no longer in the live catalogue",
                tool.name
            ));
        };
        let live = match crate::snapshot::strict::parse_strict_str(raw) {
            Ok(v) => v,
            Err(e) => {
                return Some(format!(
                    "the live definition of tool {:?} is not acceptable: {e}",
                    tool.name
                ))
            }
        };
        if canonical::canonical_bytes(&live) == tool.canonical() {
            return None;
        }
        let changes = crate::snapshot::diff::diff_tool(pin_key, &tool.name, &tool.tool, &live);
        let pointers: Vec<String> = changes.iter().map(|c| c.pointer.clone()).collect();
        Some(format!(
            "the live definition of tool {:?} differs from the reviewed one at {}",
            tool.name,
            if pointers.is_empty() {
                "(unknown)".to_string()
            } else {
                pointers.join(", ")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    #[test]
    fn live_catalogue_rejects_duplicates() {
        // Pages reach `parse_page` validated, as they do from the envelope parse.
        let page = |text: &str| parse_page(Raw::validate(text).unwrap());
        let one = r#"{"tools": [{"name": "a", "inputSchema": {}}]}"#;
        let pages = vec![page(one).unwrap(), page(one).unwrap()];
        assert!(LiveCatalogue::from_pages(pages)
            .unwrap_err()
            .contains("twice"));
        for bad in [
            r#"{"tools": [], "tools": []}"#,
            r#"{"tools": [{"inputSchema": {}}]}"#,
            r#"{"tools": {}}"#,
            r#"{"tools": [5]}"#,
            r#"{"nextCursor": "c"}"#,
            r#"{"tools": [], "nextCursor": 3}"#,
            r#"{"tools": [], "nextCursor": "a", "next\u0043ursor": "b"}"#,
            r#"[]"#,
        ] {
            assert!(page(bad).is_err(), "{bad}");
        }
        let next = page(r#"{"tools": [], "nextCursor": "c2", "x": 1}"#)
            .unwrap()
            .next_cursor;
        assert_eq!(next.as_deref(), Some("c2"));
        assert_eq!(
            page(r#"{"tools": [], "nextCursor": null}"#)
                .unwrap()
                .next_cursor,
            None
        );
    }

    /// The one-pass page reader agrees with serde_json on pages of every shape: names, the raw
    /// text of each Tool, and the cursor.
    #[test]
    fn the_page_reader_agrees_with_serde_json() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        fn value(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
            let strings = ["", "a\"b", "\\", "x\u{1}y", "名前", "{[\"]}", "name"];
            match next() % if depth > 3 { 4 } else { 6 } {
                0 => Value::Null,
                1 => json!(next() % 2 == 0),
                2 => json!((next() % 2000) as f64 / 7.0 - 100.0),
                3 => json!(strings[(next() % strings.len() as u64) as usize]),
                4 => Value::Array((0..next() % 4).map(|_| value(next, depth + 1)).collect()),
                _ => {
                    let mut m = Map::new();
                    for _ in 0..next() % 4 {
                        let k = strings[(next() % strings.len() as u64) as usize];
                        m.insert(k.to_string(), value(next, depth + 1));
                    }
                    Value::Object(m)
                }
            }
        }
        for round in 0..300 {
            let tools: Vec<Value> = (0..next() % 5)
                .map(|i| {
                    let mut t = match value(&mut next, 1) {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    t.insert("name".into(), json!(format!("t{round}-{i}\"\u{e9}")));
                    Value::Object(t)
                })
                .collect();
            let mut page = json!({"tools": tools, "extra": value(&mut next, 1)});
            if next() % 2 == 0 {
                page["nextCursor"] = json!(format!("c{round}"));
            }
            let text = serde_json::to_string_pretty(&page).unwrap();
            let got = parse_page(Raw::validate(&text).unwrap()).unwrap();
            assert_eq!(got.next_cursor.as_deref(), page["nextCursor"].as_str());
            assert_eq!(got.tools.len(), tools.len());
            for ((name, raw_tool), tool) in got.tools.iter().zip(&tools) {
                assert_eq!(Some(name.as_str()), tool["name"].as_str());
                assert_eq!(&serde_json::from_str::<Value>(raw_tool).unwrap(), tool);
            }
        }
    }

    #[test]
    fn tool_names_are_read_from_valid_json_without_a_second_parse() {
        let ok = [
            (r#"{"name":"echo"}"#, "echo"),
            (
                r#" { "description": "a \"name\": \"x\" {[", "inputSchema": {"properties": {"name": {"type": "string"}}}, "name" : "real" } "#,
                "real",
            ),
            (
                r#"{"n\u0061me":"escaped-key","x":[1,{"name":"nested"}]}"#,
                "escaped-key",
            ),
            (
                r#"{"a":-1.5e3,"b":true,"c":null,"name":"t\u00e9"}"#,
                "t\u{e9}",
            ),
        ];
        for (raw, want) in ok {
            assert_eq!(
                read_tool(raw, 0).map(|(_, n)| n).as_deref(),
                Ok(want),
                "{raw}"
            );
        }
        for raw in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"name":5}"#,
            r#"{"title":"no name"}"#,
            r#"["name","x"]"#,
        ] {
            assert!(read_tool(raw, 0).is_err(), "{raw}");
        }
    }
}

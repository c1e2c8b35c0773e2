//! Fuzzes the one-pass `tools/list` page reader, which trusts that its input is valid JSON: for
//! every input that serde_json accepts as JSON, the reader must not panic, and whenever serde's
//! own reading of the page (an object with a `tools` array of objects that each have one string
//! `name`, and an optional string `nextCursor`) succeeds, the reader must succeed with the same
//! names, Tool texts and cursor. Run with `cargo fuzz run page` (nightly).

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;

#[derive(serde::Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    tools: Vec<&'a RawValue>,
    #[serde(rename = "nextCursor", default)]
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct Named {
    name: String,
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(raw) = serde_json::from_str::<&RawValue>(text) else {
        return;
    };
    let ours = mcpguard_core::gate::catalogue::parse_page(
        mcpguard_core::wire::message::Raw::validate(raw.get()).expect("validated above"),
    );
    // serde's derive also reads structs from arrays; MCP pages and Tools are objects, and the
    // reader refuses anything else, so compare only where serde read objects.
    let is_object = |t: &str| t.trim_start().starts_with('{');
    if !is_object(raw.get()) {
        return;
    }
    let Ok(page) = serde_json::from_str::<Page<'_>>(raw.get()) else {
        return;
    };
    if !page.tools.iter().all(|t| is_object(t.get())) {
        return;
    }
    let names: Result<Vec<String>, _> = page
        .tools
        .iter()
        .map(|t| serde_json::from_str::<Named>(t.get()).map(|n| n.name))
        .collect();
    let Ok(names) = names else {
        return;
    };
    let ours = ours.expect("serde reads this page, so the page reader must too");
    assert_eq!(ours.next_cursor, page.next_cursor);
    let got: Vec<&str> = ours.tools.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(got, names.iter().map(String::as_str).collect::<Vec<_>>());
    for ((_, ours), theirs) in ours.tools.iter().zip(&page.tools) {
        assert_eq!(&**ours, theirs.get());
    }
});

//! Codex's `config.toml` (`[mcp_servers.NAME]` tables): read into the JSON view every format
//! shares, and the changed commands and arguments written back with `toml_edit`, which keeps the
//! file's comments and layout.

use serde_json::{Map, Value};

/// A TOML value as JSON, for the classification every format shares. Dates become their text.
fn toml_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(toml_json).collect()),
        T::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_json(v)))
                .collect(),
        ),
    }
}

fn toml_item_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::Value(v) => toml_json(v),
        toml_edit::Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_item_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| toml_item_json(&toml_edit::Item::Table(t.clone())))
                .collect(),
        ),
        toml_edit::Item::None => Value::Null,
    }
}

/// Codex's `[mcp_servers.NAME]` tables as the JSON servers object the other hosts have.
pub(super) fn toml_servers(doc: &toml_edit::DocumentMut) -> Result<Map<String, Value>, String> {
    let Some(item) = doc.get("mcp_servers") else {
        return Err("it has no [mcp_servers] table (Codex's config.toml)".into());
    };
    match toml_item_json(item) {
        Value::Object(m) => Ok(m),
        _ => Err("`mcp_servers` is not a table".into()),
    }
}

/// Writes the command and arguments of every entry that `super::rewrite` changed back into the TOML
/// document; everything else in it, comments and layout included, stays as it was.
pub(super) fn set_toml_servers(doc: &mut toml_edit::DocumentMut, servers: &Map<String, Value>) {
    let before = toml_servers(doc).unwrap_or_default();
    for (name, entry) in servers {
        let old = before.get(name);
        for key in ["command", "args"] {
            let Some(new) = entry.get(key) else {
                continue;
            };
            if old.and_then(|o| o.get(key)) == Some(new) {
                continue;
            }
            let value = match new {
                Value::String(s) => toml_edit::value(s.as_str()),
                Value::Array(a) => {
                    let mut arr = toml_edit::Array::new();
                    for v in a.iter().filter_map(Value::as_str) {
                        arr.push(v);
                    }
                    toml_edit::value(arr)
                }
                _ => continue,
            };
            doc["mcp_servers"][name.as_str()][key] = value;
        }
    }
}

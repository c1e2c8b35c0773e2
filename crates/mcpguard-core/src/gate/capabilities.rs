//! The capability filter: which MCP capabilities (sampling, elicitation, roots, tasks, prompts,
//! resources, logging) pass the gate, and the removal of blocked ones from what each side advertises.
//!
//! Plain data and pure functions; it knows nothing of the session or of processes.

use serde_json::{Map, Value};

/// Which MCP capabilities pass the gate. Everything the seed excludes is blocked by default; the
/// policy issue makes these configurable.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
    pub tasks: bool,
    pub prompts: bool,
    pub resources: bool,
    /// Server log messages (`notifications/message`) and `logging/setLevel`.
    pub logging: bool,
}

impl Capabilities {
    /// Removes blocked client capabilities from the `initialize` params the server sees,
    /// including the tasks extension (`extensions["io.modelcontextprotocol/tasks"]`) that newer
    /// clients advertise instead of, or beside, the top-level `tasks`.
    pub fn filter_client(&self, caps: &mut Map<String, Value>) -> Vec<String> {
        let mut removed = Vec::new();
        if !self.tasks {
            if let Some(ext) = caps.get_mut("extensions").and_then(Value::as_object_mut) {
                if ext.remove("io.modelcontextprotocol/tasks").is_some() {
                    removed.push("extensions/io.modelcontextprotocol/tasks".to_string());
                }
            }
        }
        for (key, allowed) in [
            ("sampling", self.sampling),
            ("elicitation", self.elicitation),
            ("roots", self.roots),
            ("tasks", self.tasks),
        ] {
            if !allowed && caps.remove(key).is_some() {
                removed.push(key.to_string());
            }
        }
        removed
    }

    /// Removes blocked server capabilities from the `initialize` result the host sees.
    pub fn filter_server(&self, caps: &mut Map<String, Value>) -> Vec<String> {
        let mut removed = Vec::new();
        for (key, allowed) in [
            ("prompts", self.prompts),
            ("resources", self.resources),
            ("tasks", self.tasks),
            ("completions", self.prompts || self.resources),
            ("logging", self.logging),
        ] {
            if !allowed && caps.remove(key).is_some() {
                removed.push(key.to_string());
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn capability_filters() {
        let caps = Capabilities::default();
        let mut c = json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}, "experimental": {}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_client(&mut c),
            vec!["sampling", "elicitation", "roots"]
        );
        assert_eq!(Value::Object(c), json!({"experimental": {}}));
        let mut c = json!({"extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_client(&mut c),
            vec!["extensions/io.modelcontextprotocol/tasks"]
        );
        assert_eq!(
            Value::Object(c),
            json!({"extensions": {"io.modelcontextprotocol/skills": {}}})
        );
        let mut s = json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {}, "logging": {}, "completions": {}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_server(&mut s),
            vec!["prompts", "resources", "completions", "logging"]
        );
        assert_eq!(Value::Object(s), json!({"tools": {"listChanged": true}}));
        let logging = Capabilities {
            logging: true,
            ..Capabilities::default()
        };
        let mut s = json!({"tools": {}, "logging": {}})
            .as_object()
            .unwrap()
            .clone();
        assert!(logging.filter_server(&mut s).is_empty());
        assert_eq!(Value::Object(s), json!({"tools": {}, "logging": {}}));
    }
}

//! The detectors as they were before the one-pass scanner (issue 34), kept as the tests'
//! oracle: every pattern over the whole text, every literal by `str::find`, and the quick test
//! as one regular expression of the anchors plus a search per literal. The differential tests
//! hold [`Detector::find`] and [`Detector::may_contain`] to these.

use super::*;

/// Every finding in `text`, the way the detector found them before the scanner.
pub(super) fn find(d: &Detector, text: &str) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::new();
    let builtin: &[Pattern] = match (d.builtin, builtin_patterns()) {
        (false, _) => &[],
        (true, Ok(b)) => &b.patterns,
        (true, Err(_)) => {
            return vec![Hit {
                kind: "built-in-detector-unavailable".to_string(),
                range: 0..text.len(),
            }]
        }
    };
    for p in builtin.iter().chain(&d.patterns) {
        find_all(p, text, &mut hits);
    }
    for l in &d.literals {
        let mut from = 0;
        while let Some(at) = text[from..].find(l.value.as_str()) {
            let start = from + at;
            hits.push(Hit {
                kind: l.kind.clone(),
                range: start..start + l.value.len(),
            });
            from = start + l.value.len();
        }
    }
    keep_first(hits)
}

/// The quick test the way it was before the scanner.
pub(super) fn may_contain(d: &Detector, json_text: &str) -> bool {
    if d.is_empty() {
        return false;
    }
    if !d.patterns.is_empty() {
        return true;
    }
    if json_text.contains("\\u") || json_text.contains("\\/") {
        return true;
    }
    static UNION: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let union = UNION.get_or_init(|| {
        let all: Vec<String> = ANCHORS.iter().map(|a| regex::escape(a)).collect();
        compile(&all.join("|")).unwrap()
    });
    if d.builtin && union.is_match(json_text) {
        return true;
    }
    d.literals.iter().any(|l| {
        json_text.contains(l.value.as_str()) || {
            let escaped = serde_json::to_string(&l.value).unwrap_or_default();
            json_text.contains(escaped.trim_matches('"'))
        }
    })
}

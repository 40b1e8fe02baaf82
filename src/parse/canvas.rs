//! JSON Canvas 1.0 files (`.canvas`) read as notes: their text nodes are
//! the body, their file nodes links to the files they show.

use serde_json::Value;

/// The file extension of a canvas.
pub const EXTENSION: &str = "canvas";
/// Nodes past this many are not read.
pub const MAX_NODES: usize = 10_000;

/// Whether the file at `path` is a canvas.
pub fn is_canvas(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case(EXTENSION))
}

/// The canvas's text as Markdown: text nodes in reading order (top to
/// bottom, then left to right) as paragraphs, file nodes as
/// `File: [[file]]` (a link, and a backlink entry for the file), link
/// nodes as bare URLs. Groups only arrange nodes and add
/// nothing. An error says why the file is not a canvas.
pub fn to_markdown(json: &str) -> Result<String, String> {
    let canvas: Value =
        serde_json::from_str(json).map_err(|err| format!("not a JSON Canvas file: {err}"))?;
    let nodes = match canvas.get("nodes") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Array(nodes)) => nodes,
        Some(_) => return Err("not a JSON Canvas file: 'nodes' is not a list".into()),
    };
    let mut placed: Vec<(f64, f64, usize, String)> = Vec::new();
    for (order, node) in nodes.iter().take(MAX_NODES).enumerate() {
        let field = |key: &str| node.get(key).and_then(Value::as_str);
        let coordinate = |key: &str| {
            node.get(key)
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
        };
        let shown = match field("type") {
            Some("text") => field("text").map(|t| t.trim().to_string()),
            Some("file") => field("file").and_then(|file| file_link(file, field("subpath"))),
            Some("link") => field("url")
                .filter(|url| !url.is_empty() && !url.contains(char::is_whitespace))
                .filter(|url| !url.contains(['<', '>']))
                .map(|url| format!("<{url}>")),
            _ => None,
        };
        if let Some(shown) = shown.filter(|s| !s.is_empty()) {
            placed.push((coordinate("y"), coordinate("x"), order, shown));
        }
    }
    placed.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.total_cmp(&b.1))
            .then(a.2.cmp(&b.2))
    });
    let mut out = placed
        .into_iter()
        .map(|(_, _, _, text)| text)
        .collect::<Vec<_>>()
        .join("\n\n");
    // A first text node opening with `---` must not read as frontmatter.
    if out.starts_with("---") {
        out.insert(0, '\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// A file node as a wikilink, or `None` when its path cannot be written
/// as one.
fn file_link(file: &str, subpath: Option<&str>) -> Option<String> {
    let bad = |s: &str| s.contains(['[', ']', '|', '\n', '\r']) || s.trim().is_empty();
    if bad(file) {
        return None;
    }
    match subpath.filter(|s| s.starts_with('#') && !bad(s)) {
        Some(subpath) => Some(format!("File: [[{file}{subpath}]]")),
        None => Some(format!("File: [[{file}]]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_in_reading_order_and_files_as_links() {
        let json = r##"{"nodes":[
            {"id":"b","type":"text","text":"Second","x":0,"y":200,"width":10,"height":10},
            {"id":"a","type":"text","text":"First","x":300,"y":0},
            {"id":"f","type":"file","file":"Notes/Raft.md","subpath":"#Safety","x":0,"y":0},
            {"id":"l","type":"link","url":"https://example.org","x":0,"y":900},
            {"id":"g","type":"group","label":"Box","x":-10,"y":-10},
            {"id":"x","type":"file","file":"bad]]name.md","x":0,"y":1000}
        ],"edges":[{"id":"e","fromNode":"a","toNode":"b"}]}"##;
        assert_eq!(
            to_markdown(json).unwrap(),
            "File: [[Notes/Raft.md#Safety]]\n\nFirst\n\nSecond\n\n<https://example.org>\n"
        );
    }

    #[test]
    fn hostile_canvases_are_errors_or_empty() {
        assert!(to_markdown("not json").is_err());
        assert!(to_markdown(r#"{"nodes": 3}"#).is_err());
        assert_eq!(to_markdown("{}").unwrap(), "");
        let deep = "[".repeat(10_000);
        assert!(to_markdown(&deep).is_err());
        let frontmatter_like = r#"{"nodes":[{"type":"text","text":"---\na: b\n---\nbody"}]}"#;
        assert!(to_markdown(frontmatter_like).unwrap().starts_with("\n---"));
        assert!(is_canvas("a/B.Canvas") && !is_canvas("a/b.md"));
    }
}

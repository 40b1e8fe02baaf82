//! JSON Canvas 1.0 files (`.canvas`) read as notes: their text nodes are
//! the body, their file nodes links to the files they show.

use serde_json::Value;

/// The file extension of a canvas.
pub(crate) const EXTENSION: &str = "canvas";
/// Nodes past this many are not read.
pub(crate) const MAX_NODES: usize = 10_000;

/// Whether the file at `path` is a canvas.
pub(crate) fn is_canvas(path: &str) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case(EXTENSION))
}

/// Edges past this many are not read.
pub(crate) const MAX_EDGES: usize = 10_000;
/// How much of a text node names it in the list of connections.
const EDGE_NAME_CHARS: usize = 60;

/// One node as the reader sees it.
struct Shown {
    y: f64,
    x: f64,
    order: usize,
    text: String,
}

/// A group's box and label.
struct Group {
    y: f64,
    x: f64,
    width: f64,
    height: f64,
    order: usize,
    label: String,
}

impl Group {
    fn contains(&self, y: f64, x: f64, width: f64, height: f64) -> bool {
        x >= self.x
            && y >= self.y
            && x + width <= self.x + self.width
            && y + height <= self.y + self.height
    }
}

/// The canvas's text as Markdown: text nodes in reading order (top to
/// bottom, then left to right) as paragraphs, file nodes as
/// `File: [[file]]` (a link, and a backlink entry for the file), link
/// nodes as bare URLs. Then, as lists of the nodes' names, the labelled
/// groups with the nodes inside their boxes (a node belongs to the
/// smallest group around it) and the edges between nodes. An error says
/// why the file is not a canvas.
/// Why a `.canvas` file is not read as a canvas (the note's diagnostic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CanvasError {
    /// Not JSON, or JSON nested past the parser's limit; the parser's words.
    NotJson(String),
    NodesNotAList,
    /// More nodes or edges than are read: what lies past the bound (a
    /// `#private` node) would go unseen.
    TooLarge,
}

impl std::fmt::Display for CanvasError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CanvasError::NotJson(why) => write!(f, "not a JSON Canvas file: {why}"),
            CanvasError::NodesNotAList => {
                f.write_str("not a JSON Canvas file: 'nodes' is not a list")
            }
            CanvasError::TooLarge => write!(
                f,
                "a canvas of more than {MAX_NODES} nodes or {MAX_EDGES} edges is not read"
            ),
        }
    }
}

impl std::error::Error for CanvasError {}

pub(crate) fn to_markdown(json: &str) -> Result<String, CanvasError> {
    let canvas: Value =
        serde_json::from_str(json).map_err(|err| CanvasError::NotJson(err.to_string()))?;
    let nodes = match canvas.get("nodes") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Array(nodes)) => nodes,
        Some(_) => return Err(CanvasError::NodesNotAList),
    };
    let edge_count = canvas
        .get("edges")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if nodes.len() > MAX_NODES || edge_count > MAX_EDGES {
        return Err(CanvasError::TooLarge);
    }
    let number = |node: &Value, key: &str| {
        node.get(key)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
            .unwrap_or(0.0)
    };
    let groups: Vec<Group> = nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.get("type").and_then(Value::as_str) == Some("group"))
        .filter_map(|(order, node)| {
            let label = node.get("label").and_then(Value::as_str)?.trim();
            (!label.is_empty() && !label.contains(['\n', '\r'])).then(|| Group {
                y: number(node, "y"),
                x: number(node, "x"),
                width: number(node, "width").max(0.0),
                height: number(node, "height").max(0.0),
                order,
                label: label.to_string(),
            })
        })
        .collect();
    let mut shown_nodes: Vec<Shown> = Vec::new();
    // Per group, its members' names with their places.
    let mut members: Vec<Vec<Shown>> = groups.iter().map(|_| Vec::new()).collect();
    let mut names: Vec<(&str, String)> = Vec::new();
    for (order, node) in nodes.iter().enumerate() {
        let field = |key: &str| node.get(key).and_then(Value::as_str);
        let shown = match field("type") {
            Some("text") => field("text").map(|t| t.trim().to_string()),
            Some("file") => field("file").and_then(|file| file_link(file, field("subpath"))),
            Some("link") => field("url")
                .filter(|url| !url.is_empty() && !url.contains(char::is_whitespace))
                .filter(|url| !url.contains(['<', '>']))
                .map(|url| format!("<{url}>")),
            _ => None,
        };
        let name = node_name(node);
        let (y, x) = (number(node, "y"), number(node, "x"));
        let (width, height) = (
            number(node, "width").max(0.0),
            number(node, "height").max(0.0),
        );
        if let Some(name) = &name
            && field("type") != Some("group")
        {
            let innermost = groups
                .iter()
                .enumerate()
                .filter(|(_, group)| group.contains(y, x, width, height))
                .min_by(|a, b| (a.1.width * a.1.height).total_cmp(&(b.1.width * b.1.height)));
            if let Some((index, _)) = innermost {
                members[index].push(Shown {
                    y,
                    x,
                    order,
                    text: name.clone(),
                });
            }
        }
        if let (Some(id), Some(name)) = (field("id"), name) {
            names.push((id, name));
        }
        if let Some(text) = shown.filter(|s| !s.is_empty()) {
            shown_nodes.push(Shown { y, x, order, text });
        }
    }
    let reading = |a: &Shown, b: &Shown| {
        a.y.total_cmp(&b.y)
            .then(a.x.total_cmp(&b.x))
            .then(a.order.cmp(&b.order))
    };
    shown_nodes.sort_by(reading);
    let mut out = shown_nodes
        .into_iter()
        .map(|node| node.text)
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut group_lines: Vec<(&Group, String)> = Vec::new();
    for (group, mut inside) in groups.iter().zip(members) {
        if inside.is_empty() {
            continue;
        }
        inside.sort_by(reading);
        let list: Vec<String> = inside.into_iter().map(|member| member.text).collect();
        group_lines.push((group, format!("- {}: {}", group.label, list.join("; "))));
    }
    group_lines.sort_by(|a, b| {
        a.0.y
            .total_cmp(&b.0.y)
            .then(a.0.x.total_cmp(&b.0.x))
            .then(a.0.order.cmp(&b.0.order))
    });
    if !group_lines.is_empty() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str("Groups:\n");
        let lines: Vec<String> = group_lines.into_iter().map(|(_, line)| line).collect();
        out.push_str(&lines.join("\n"));
    }
    let connections = connections(&canvas, &names);
    if !connections.is_empty() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str("Connections:\n");
        out.push_str(&connections.join("\n"));
    }
    // A first text node opening with `---` must not read as frontmatter.
    if out.starts_with("---") {
        out.insert(0, '\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// The text of each text card of a canvas (unparsed canvases have none):
/// Obsidian shows each card by itself, so each is also read by itself for
/// what makes a note private (an unclosed fence in one card cannot hide
/// another card's `#private`).
pub(crate) fn text_cards(json: &str) -> Vec<String> {
    let Ok(canvas) = serde_json::from_str::<Value>(json) else {
        return Vec::new();
    };
    let Some(Value::Array(nodes)) = canvas.get("nodes") else {
        return Vec::new();
    };
    nodes
        .iter()
        .take(MAX_NODES)
        .filter(|node| node.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|node| node.get("text").and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// What a node is called in the list of connections: a text node's first
/// line (without heading marks, shortened), a file's name, a link's URL, a
/// group's label.
fn node_name(node: &Value) -> Option<String> {
    let field = |key: &str| node.get(key).and_then(Value::as_str);
    let name = match field("type")? {
        "text" => {
            let line = field("text")?
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())?;
            let line = line.trim_start_matches('#').trim();
            let mut short: String = line.chars().take(EDGE_NAME_CHARS).collect();
            if line.chars().count() > EDGE_NAME_CHARS {
                short.push('…');
            }
            short
        }
        "file" => {
            let file = field("file")?;
            let stem = file.rsplit('/').next().unwrap_or(file);
            stem.strip_suffix(".md").unwrap_or(stem).to_string()
        }
        "link" => field("url")?.to_string(),
        "group" => field("label")?.trim().to_string(),
        _ => return None,
    };
    let name = name.replace(['\n', '\r'], " ");
    (!name.trim().is_empty()).then_some(name)
}

/// The edges as list items: `- from → to`, with the edge's label after a
/// colon; an edge whose ends are not named nodes is left out.
fn connections(canvas: &Value, names: &[(&str, String)]) -> Vec<String> {
    let Some(Value::Array(edges)) = canvas.get("edges") else {
        return Vec::new();
    };
    let mut names: Vec<&(&str, String)> = names.iter().collect();
    // The first node of an id names it.
    names.sort_by(|a, b| a.0.cmp(b.0));
    names.dedup_by(|later, first| later.0 == first.0);
    let name_of = |id: &str| {
        names
            .binary_search_by(|(node, _)| (*node).cmp(id))
            .ok()
            .map(|at| &names[at].1)
    };
    edges
        .iter()
        .take(MAX_EDGES)
        .filter_map(|edge| {
            let end = |key: &str| edge.get(key).and_then(Value::as_str).and_then(name_of);
            let (from, to) = (end("fromNode")?, end("toNode")?);
            let arrow = match (
                edge.get("fromEnd").and_then(Value::as_str),
                edge.get("toEnd").and_then(Value::as_str),
            ) {
                (Some("arrow"), Some("none")) => "←",
                (Some("arrow"), _) => "↔",
                (_, Some("none")) => "—",
                _ => "→",
            };
            let label = edge
                .get("label")
                .and_then(Value::as_str)
                .map(|l| l.replace(['\n', '\r'], " "))
                .filter(|l| !l.trim().is_empty());
            Some(match label {
                Some(label) => format!("- {from} {arrow} {to}: {}", label.trim()),
                None => format!("- {from} {arrow} {to}"),
            })
        })
        .collect()
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
            "File: [[Notes/Raft.md#Safety]]\n\nFirst\n\nSecond\n\n<https://example.org>\n\nConnections:\n- First → Second\n"
        );
    }

    #[test]
    fn groups_are_sections_and_edges_are_named() {
        let json = r##"{"nodes":[
            {"id":"t","type":"text","text":"Loose on top","x":0,"y":-500,"width":10,"height":10},
            {"id":"g","type":"group","label":"Outer","x":0,"y":0,"width":1000,"height":1000},
            {"id":"h","type":"group","label":"Inner","x":500,"y":500,"width":400,"height":400},
            {"id":"a","type":"text","text":"# Plan\nmore","x":10,"y":10,"width":100,"height":50},
            {"id":"b","type":"text","text":"Inside inner","x":600,"y":600,"width":100,"height":50},
            {"id":"f","type":"file","file":"dir/Tides.md","x":10,"y":2000,"width":100,"height":50}
        ],"edges":[
            {"id":"e1","fromNode":"a","toNode":"b","label":"leads to"},
            {"id":"e2","fromNode":"b","toNode":"f","fromEnd":"arrow"},
            {"id":"e3","fromNode":"a","toNode":"missing"},
            {"id":"e4","fromNode":"g","toNode":"t","toEnd":"none"}
        ]}"##;
        assert_eq!(
            to_markdown(json).unwrap(),
            "Loose on top\n\n# Plan\nmore\n\nInside inner\n\nFile: [[dir/Tides.md]]\n\nGroups:\n- Outer: Plan\n- Inner: Inside inner\n\nConnections:\n- Plan → Inside inner: leads to\n- Inside inner ↔ Tides\n- Outer — Loose on top\n"
        );
    }

    #[test]
    fn hostile_canvases_are_errors_or_empty() {
        assert!(to_markdown("not json").is_err());
        assert_eq!(
            to_markdown(r#"{"nodes": 3}"#).unwrap_err().to_string(),
            "not a JSON Canvas file: 'nodes' is not a list"
        );
        assert_eq!(
            to_markdown("[").unwrap_err().to_string(),
            "not a JSON Canvas file: EOF while parsing a list at line 1 column 1"
        );
        assert_eq!(to_markdown("{}").unwrap(), "");
        let deep = "[".repeat(10_000);
        assert!(to_markdown(&deep).is_err());
        let frontmatter_like = r#"{"nodes":[{"type":"text","text":"---\na: b\n---\nbody"}]}"#;
        assert!(to_markdown(frontmatter_like).unwrap().starts_with("\n---"));
        assert!(is_canvas("a/B.Canvas") && !is_canvas("a/b.md"));
    }
}

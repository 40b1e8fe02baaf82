//! Obsidian Bases files (`.base`, YAML): the views they define and the
//! part of their filter language ctxpack can evaluate. A filter outside
//! that part is kept as [`Expr::Unsupported`], so a view using one is
//! never shown with a wrong list.

use yaml_serde::Value;

/// A `.base` file larger than this is not read.
pub(crate) const MAX_BASE_BYTES: u64 = 256 * 1024;
/// Filters nested deeper than this are not read.
const MAX_FILTER_DEPTH: usize = 16;
/// Views past this many are not read.
const MAX_VIEWS: usize = 64;
/// A filter expression longer than this is not evaluated.
const MAX_EXPR_CHARS: usize = 1000;

/// A parsed Bases file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Base {
    /// Filters every view applies.
    pub filters: Option<Filter>,
    pub views: Vec<View>,
}

/// One view of a base.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct View {
    pub name: String,
    pub filters: Option<Filter>,
    /// The columns shown, as written (`file.name`, `note.year`, `year`, …).
    pub order: Vec<String>,
    /// Sort keys, with `true` for descending.
    pub sort: Vec<(String, bool)>,
    pub limit: Option<usize>,
}

/// A filter tree: `and`, `or`, `not` over expressions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Filter {
    And(Vec<Filter>),
    Or(Vec<Filter>),
    /// True when none of its filters is.
    Not(Vec<Filter>),
    Expr(Expr),
}

/// What a filter expression compares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Subject {
    /// A frontmatter property (`author`, `note.author`, `list(author)`).
    Property(String),
    /// A property read as one text (`created.toString()`): a date, or a
    /// list's items joined by `, `, so `contains` is a substring test.
    PropertyText(String),
    FileName,
    FilePath,
    FileFolder,
    FileExt,
    FileTags,
}

/// A value a filter compares with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    /// The note that embeds the view (`this`, `this.file`,
    /// `this.file.asLink()`).
    This,
    ThisName,
    ThisPath,
    /// `link("Name")`.
    Link(String),
    Text(String),
}

/// One filter expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expr {
    Negated(Box<Expr>),
    /// `subject.contains(arg)`, or with `any`, `subject.containsAny(a, b)`.
    Contains {
        subject: Subject,
        args: Vec<Arg>,
        any: bool,
    },
    /// `subject == arg` (or `!=`, with `equal` false).
    Compare {
        subject: Subject,
        arg: Arg,
        equal: bool,
    },
    /// `file.hasTag("a", "b")`: any of the tags, or a tag nested under one.
    HasTag(Vec<String>),
    /// `file.inFolder("F")`.
    InFolder(String),
    /// `file.hasLink(this)`: the note links to the embedding note.
    LinksToThis,
    /// Anything else, as written.
    Unsupported(String),
}

/// Why a Bases file is not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BaseError {
    TooLarge,
    BrokenYaml(super::yaml::YamlError),
    NotAMapping,
    NestedTooDeep,
}

impl std::fmt::Display for BaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseError::TooLarge => f.write_str("too large"),
            BaseError::BrokenYaml(err) => write!(f, "broken YAML: {err}"),
            BaseError::NotAMapping => f.write_str("not a key/value mapping"),
            BaseError::NestedTooDeep => f.write_str("filters nested too deep"),
        }
    }
}

impl std::error::Error for BaseError {}

/// Reads a Bases file's YAML; an error says what is wrong.
pub(crate) fn parse(text: &str) -> Result<Base, BaseError> {
    if text.len() as u64 > MAX_BASE_BYTES {
        return Err(BaseError::TooLarge);
    }
    let value: Value = super::yaml::parse_value(text).map_err(BaseError::BrokenYaml)?;
    let Value::Mapping(map) = value else {
        return Err(BaseError::NotAMapping);
    };
    let filters = map.get("filters").map(|f| filter(f, 0)).transpose()?;
    let mut views = Vec::new();
    if let Some(Value::Sequence(list)) = map.get("views") {
        for view in list.iter().take(MAX_VIEWS) {
            let Value::Mapping(view) = view else { continue };
            let text = |key: &str| view.get(key).and_then(crate::parse::frontmatter::scalar);
            let strings = |key: &str| match view.get(key) {
                Some(Value::Sequence(items)) => items
                    .iter()
                    .filter_map(crate::parse::frontmatter::scalar)
                    .collect(),
                _ => Vec::new(),
            };
            let sort = match view.get("sort") {
                Some(Value::Sequence(keys)) => keys
                    .iter()
                    .filter_map(|key| {
                        let property = crate::parse::frontmatter::scalar(key.get("property")?)?;
                        let descending = key
                            .get("direction")
                            .and_then(crate::parse::frontmatter::scalar)
                            .is_some_and(|d| d.eq_ignore_ascii_case("desc"));
                        Some((property, descending))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            views.push(View {
                name: text("name").unwrap_or_default(),
                filters: view.get("filters").map(|f| filter(f, 0)).transpose()?,
                order: strings("order"),
                sort,
                limit: text("limit").and_then(|l| l.parse().ok()),
            });
        }
    }
    Ok(Base { filters, views })
}

fn filter(value: &Value, depth: usize) -> Result<Filter, BaseError> {
    if depth > MAX_FILTER_DEPTH {
        return Err(BaseError::NestedTooDeep);
    }
    match value {
        Value::String(text) => Ok(Filter::Expr(expr(text))),
        Value::Mapping(map) if map.len() == 1 => {
            let (key, inner) = map.iter().next().expect("one entry");
            let list = match inner {
                Value::Sequence(items) => items
                    .iter()
                    .map(|item| filter(item, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?,
                other => vec![filter(other, depth + 1)?],
            };
            match key.as_str() {
                Some("and") => Ok(Filter::And(list)),
                Some("or") => Ok(Filter::Or(list)),
                Some("not") => Ok(Filter::Not(list)),
                _ => Ok(Filter::Expr(Expr::Unsupported(format!("{key:?}")))),
            }
        }
        other => Ok(Filter::Expr(Expr::Unsupported(format!("{other:?}")))),
    }
}

/// Parses one expression; what ctxpack cannot evaluate is `Unsupported`.
pub(crate) fn expr(text: &str) -> Expr {
    let trimmed = text.trim();
    let unsupported = || Expr::Unsupported(trimmed.chars().take(80).collect());
    if trimmed.chars().count() > MAX_EXPR_CHARS {
        return unsupported();
    }
    if let Some(rest) = trimmed.strip_prefix('!') {
        return match expr(rest) {
            Expr::Unsupported(_) => unsupported(),
            inner => Expr::Negated(Box::new(inner)),
        };
    }
    for (op, equal) in [("==", true), ("!=", false)] {
        if let Some((left, right)) = trimmed.split_once(op) {
            return match (subject(left.trim()), arg(right.trim())) {
                (Some(subject), Some(arg)) => Expr::Compare {
                    subject,
                    arg,
                    equal,
                },
                _ => unsupported(),
            };
        }
    }
    let Some((call, args)) = method_call(trimmed) else {
        return unsupported();
    };
    let Some(args) = args else {
        return unsupported();
    };
    match call {
        "file.hasTag" => texts(&args).map_or_else(unsupported, |tags| {
            Expr::HasTag(
                tags.into_iter()
                    .map(|t| t.trim_start_matches('#').to_string())
                    .collect(),
            )
        }),
        "file.inFolder" => match texts(&args).as_deref() {
            Some([folder]) => Expr::InFolder(folder.trim_matches('/').to_string()),
            _ => unsupported(),
        },
        "file.hasLink" | "file.links.contains" if args == [Arg::This] => Expr::LinksToThis,
        _ => {
            let (target, any) = if let Some(target) = call.strip_suffix(".containsAny") {
                (target, true)
            } else if let Some(target) = call.strip_suffix(".contains") {
                (target, false)
            } else {
                return unsupported();
            };
            match subject(target) {
                Some(subject) if !args.is_empty() && (any || args.len() == 1) => {
                    Expr::Contains { subject, args, any }
                }
                _ => unsupported(),
            }
        }
    }
}

/// Splits `callee(args)` at its last top-level call (so
/// `list(author).contains(this)` is `list(author).contains` and `this`):
/// the callee and the arguments (`None` when one cannot be read).
fn method_call(text: &str) -> Option<(&str, Option<Vec<Arg>>)> {
    if !text.ends_with(')') {
        return None;
    }
    let mut open = None;
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, ch) in text.char_indices() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(ch),
            (None, '(') => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            (None, ')') => depth = depth.checked_sub(1)?,
            _ => {}
        }
    }
    if depth != 0 || quote.is_some() {
        return None;
    }
    let open = open?;
    let args = split_args(&text[open + 1..text.len() - 1])
        .and_then(|parts| parts.iter().map(|p| arg(p)).collect());
    Some((&text[..open], args))
}

/// Comma-separated arguments, respecting quotes and parentheses.
fn split_args(text: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for ch in text.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(ch);
                current.push(ch);
            }
            (None, '(') => {
                depth += 1;
                current.push(ch);
            }
            (None, ')') => {
                depth = depth.checked_sub(1)?;
                current.push(ch);
            }
            (None, ',') if depth == 0 => parts.push(std::mem::take(&mut current)),
            (None, c) => current.push(c),
        }
    }
    if quote.is_some() || depth != 0 {
        return None;
    }
    if !current.trim().is_empty() || !parts.is_empty() {
        parts.push(current);
    }
    Some(parts.into_iter().map(|p| p.trim().to_string()).collect())
}

fn subject(text: &str) -> Option<Subject> {
    let text = text.trim();
    if let Some(inner) = text.strip_suffix(".toString()") {
        return match subject(inner)? {
            Subject::Property(name) => Some(Subject::PropertyText(name)),
            // A file's name, path, folder or extension is a text already.
            Subject::FileTags | Subject::PropertyText(_) => None,
            scalar => Some(scalar),
        };
    }
    let text = text
        .strip_prefix("list(")
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(text);
    Some(match text {
        "file.name" | "file.basename" => Subject::FileName,
        "file.path" => Subject::FilePath,
        "file.folder" => Subject::FileFolder,
        "file.ext" => Subject::FileExt,
        "file.tags" | "tags" | "note.tags" => Subject::FileTags,
        _ => {
            let name = text.strip_prefix("note.").unwrap_or(text);
            let name = match name.strip_prefix("note[").and_then(|n| n.strip_suffix(']')) {
                Some(quoted) => string_literal(quoted)?,
                None => name.to_string(),
            };
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '));
            if !plain || name.starts_with("file") || name.starts_with("formula") || name == "this" {
                return None;
            }
            Subject::Property(name)
        }
    })
}

fn arg(text: &str) -> Option<Arg> {
    let text = text.trim();
    Some(match text {
        "this" | "this.file" | "this.file.asLink()" => Arg::This,
        "this.file.name" | "this.file.basename" => Arg::ThisName,
        "this.file.path" => Arg::ThisPath,
        _ => {
            if let Some(inner) = text.strip_prefix("link(").and_then(|t| t.strip_suffix(')')) {
                Arg::Link(string_literal(inner.trim())?)
            } else {
                Arg::Text(string_literal(text)?)
            }
        }
    })
}

fn string_literal(text: &str) -> Option<String> {
    let quote = text.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let inner = text.strip_prefix(quote)?.strip_suffix(quote)?;
    (!inner.contains(quote) && !inner.contains('\\')).then(|| inner.to_string())
}

fn texts(args: &[Arg]) -> Option<Vec<String>> {
    args.iter()
        .map(|arg| match arg {
            Arg::Text(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_supported_expressions() {
        assert_eq!(
            expr("list(author).contains(this)"),
            Expr::Contains {
                subject: Subject::Property("author".into()),
                args: vec![Arg::This],
                any: false
            }
        );
        assert_eq!(
            expr("created.toString().contains(this.file.name)"),
            Expr::Contains {
                subject: Subject::PropertyText("created".into()),
                args: vec![Arg::ThisName],
                any: false
            }
        );
        assert_eq!(expr("file.links.contains(this.file)"), Expr::LinksToThis);
        assert!(matches!(
            expr("file.tags.toString().contains(\"a\")"),
            Expr::Unsupported(_)
        ));
        assert_eq!(
            expr("note.categories.contains(link(\"Books\"))"),
            Expr::Contains {
                subject: Subject::Property("categories".into()),
                args: vec![Arg::Link("Books".into())],
                any: false
            }
        );
        assert_eq!(
            expr("'!file.name.contains(\"Template\")'".trim_matches('\'')),
            Expr::Negated(Box::new(Expr::Contains {
                subject: Subject::FileName,
                args: vec![Arg::Text("Template".into())],
                any: false
            }))
        );
        assert_eq!(
            expr("file.hasTag(\"book\", \"#read\")"),
            Expr::HasTag(vec!["book".into(), "read".into()])
        );
        assert_eq!(
            expr("file.inFolder(\"Notes/\")"),
            Expr::InFolder("Notes".into())
        );
        assert_eq!(
            expr("file.path != this.file.path"),
            Expr::Compare {
                subject: Subject::FilePath,
                arg: Arg::ThisPath,
                equal: false
            }
        );
        assert_eq!(expr("file.hasLink(this)"), Expr::LinksToThis);
        assert_eq!(
            expr("author.contains(this.file.asLink())"),
            Expr::Contains {
                subject: Subject::Property("author".into()),
                args: vec![Arg::This],
                any: false
            }
        );
        for unsupported in [
            "rating > 6",
            "formula.LinksOverlap > 2",
            "start.toString().toString().contains(this.file.name)",
            "file.name.contains(\"unclosed)",
            "this.file.hasLink(file)",
            "",
        ] {
            assert!(
                matches!(expr(unsupported), Expr::Unsupported(_)),
                "{unsupported}: {:?}",
                expr(unsupported)
            );
        }
    }

    #[test]
    fn reads_views_and_refuses_hostile_files() {
        let base = parse(
            "filters:\n  and:\n    - categories.contains(link(\"Books\"))\n\
             views:\n  - type: table\n    name: Author\n    filters:\n      or:\n        - list(author).contains(this)\n\
             \x20   order: [file.name, year]\n    sort:\n      - property: year\n        direction: DESC\n    limit: 5\n",
        )
        .unwrap();
        assert_eq!(base.views.len(), 1);
        assert_eq!(base.views[0].name, "Author");
        assert_eq!(base.views[0].order, ["file.name", "year"]);
        assert_eq!(base.views[0].sort, [("year".to_string(), true)]);
        assert_eq!(base.views[0].limit, Some(5));
        assert!(matches!(
            parse("[unclosed"),
            Err(BaseError::BrokenYaml(
                crate::parse::yaml::YamlError::Syntax(_)
            ))
        ));
        assert_eq!(parse("- a list").unwrap_err(), BaseError::NotAMapping);
        assert_eq!(
            parse(&"x".repeat(MAX_BASE_BYTES as usize + 1)).unwrap_err(),
            BaseError::TooLarge
        );
        let mut deep = String::from("filters:\n");
        for level in 0..40 {
            deep.push_str(&format!(
                "{}and:\n{}- ",
                "  ".repeat(level + 1),
                "  ".repeat(level + 1)
            ));
        }
        assert!(parse(&deep).is_err());
        // An alias bomb is refused by the YAML reader, not expanded.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (level, name) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
            let previous = ["a", "b", "c", "d", "e", "f", "g", "h"][level];
            bomb.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{previous}"); 9].join(", ")
            ));
        }
        bomb.push_str("views: *i\n");
        assert_eq!(
            parse(&bomb).unwrap_err().to_string(),
            "broken YAML: YAML expands past its bound (aliases repeated too often)"
        );
    }
}

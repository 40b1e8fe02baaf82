//! User templates (`--template FILE`): the pack printed through a
//! minijinja template whose data is the pack's JSON model, so a user can
//! match an agent's prompt format without post-processing.
//!
//! The data is the `--format json` report without `bundle`, with `title`
//! and, on each page and daily, `content` (the body as the markdown pack
//! prints it, or none), `label` (tier or `daily`) and `shown_summary`.
//! `actual` is the size of the template's own output.

use std::path::Path;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, Value};
use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use super::Pack;

/// Bounds a template's work (loops over `range` and the like), so a
/// mistaken template ends with an error instead of running on.
const TEMPLATE_FUEL: u64 = 50_000_000;

/// The largest template accepted, in bytes: a template is the frame of a
/// pack, and its own text counts against the budget.
pub(crate) const MAX_TEMPLATE_BYTES: usize = 256 * 1024;

/// The most operators (`~`, `+`, `|`, `.`, `and`, a call, …) one tag may
/// hold. minijinja parses a chain such as `a ~ a ~ a` into a tree as deep as
/// the chain is long and walks it recursively, so a long chain overflows the
/// stack and aborts the process; this bound keeps the tree shallow enough
/// for a 2 MiB thread (a server's worker) in a debug build.
pub(crate) const MAX_TAG_OPERATORS: usize = 200;

/// The deepest nesting of brackets in one tag, and of block tags (`if`,
/// `for`, …) in a template: each level is a recursion in minijinja's
/// parser and compiler.
pub(crate) const MAX_TEMPLATE_NESTING: usize = 32;

/// Why a template was refused or failed: each message names the template
/// (its path, or the name it was given) and, where known, the line.
#[derive(Debug)]
pub enum TemplateError {
    /// The template file at `path` could not be read.
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// Larger than `limit` bytes (`MAX_TEMPLATE_BYTES`).
    TooLarge {
        name: String,
        bytes: usize,
        limit: usize,
    },
    /// Brackets in one tag nest deeper than `limit` levels.
    BracketsTooDeep {
        name: String,
        line: usize,
        depth: usize,
        limit: usize,
    },
    /// One tag chains more than `limit` operators.
    TooManyOperators {
        name: String,
        line: usize,
        operators: usize,
        limit: usize,
    },
    /// Block tags nest deeper than `limit`.
    BlocksTooDeep {
        name: String,
        line: usize,
        limit: usize,
    },
    /// minijinja refused the template (syntax) or failed to render it.
    Jinja {
        name: String,
        source: minijinja::Error,
    },
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::Read { path, source } => {
                write!(f, "cannot read template {}: {source}", path.display())
            }
            TemplateError::TooLarge { name, bytes, limit } => write!(
                f,
                "template {name}: {bytes} bytes is too large; a template may hold at most \
                 {limit} bytes"
            ),
            TemplateError::BracketsTooDeep {
                name,
                line,
                depth,
                limit,
            } => write!(
                f,
                "template {name}: line {line}: brackets nest {depth} deep; at most {limit} \
                 levels are allowed"
            ),
            TemplateError::TooManyOperators {
                name,
                line,
                operators,
                limit,
            } => write!(
                f,
                "template {name}: line {line}: a tag chains {operators} operators; at most \
                 {limit} are allowed (split the expression with `set`)"
            ),
            TemplateError::BlocksTooDeep { name, line, limit } => write!(
                f,
                "template {name}: line {line}: block tags nest more than {limit} deep"
            ),
            TemplateError::Jinja { name, source } => {
                let what = source
                    .detail()
                    .map(|detail| format!("{}: {detail}", source.kind()))
                    .unwrap_or_else(|| source.kind().to_string());
                match source.line() {
                    Some(line) => write!(f, "template {name}, line {line}: {what}"),
                    None => write!(f, "template {name}: {what}"),
                }
            }
        }
    }
}

impl std::error::Error for TemplateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TemplateError::Read { source, .. } => Some(source),
            TemplateError::Jinja { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A template checked to parse.
#[derive(Clone, Debug)]
pub struct PackTemplate {
    name: String,
    source: String,
}

impl PackTemplate {
    /// Reads and parses the template at `path`.
    pub fn load(path: &Path) -> Result<PackTemplate, TemplateError> {
        // A regular file, read no further than the limit: a device or a
        // FIFO given as the template would be read without end. (Looked up
        // first, so a missing file keeps its own error.)
        let meta = std::fs::metadata(path).map_err(|source| TemplateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if meta.is_file() && meta.len() > MAX_TEMPLATE_BYTES as u64 {
            return Err(TemplateError::TooLarge {
                name: path.display().to_string(),
                bytes: usize::try_from(meta.len()).unwrap_or(usize::MAX),
                limit: MAX_TEMPLATE_BYTES,
            });
        }
        let (source, _) =
            crate::safe_fs::read_text(path, MAX_TEMPLATE_BYTES as u64).map_err(|err| {
                TemplateError::Read {
                    path: path.to_path_buf(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, err.reason()),
                }
            })?;
        PackTemplate::parse(&path.display().to_string(), source)
    }

    /// Parses `source`; an error names the line.
    pub fn parse(name: &str, source: String) -> Result<PackTemplate, TemplateError> {
        check_shape(name, &source)?;
        let template = PackTemplate {
            name: name.to_string(),
            source,
        };
        template
            .environment()
            .template_from_str(&template.source)
            .map_err(|err| template.describe(err))?;
        Ok(template)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    fn environment(&self) -> Environment<'_> {
        let mut env = Environment::new();
        // A pack is text for a model, never HTML.
        env.set_auto_escape_callback(|_| AutoEscape::None);
        // Printing a missing field is an error (a typo shows), testing one
        // with `if` is not (optional fields are left out of the model).
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        env.set_fuel(Some(TEMPLATE_FUEL));
        // Block tags take their line with them, so a template reads like the
        // text it prints.
        if let Ok(syntax) = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        env
    }

    /// The template's output for `pack`, with `actual` as its size.
    pub fn render(&self, pack: &Pack, actual: usize) -> Result<String, TemplateError> {
        let env = self.environment();
        let template = env
            .template_from_str(&self.source)
            .map_err(|err| self.describe(err))?;
        template
            .render(Value::from(Serde(model(pack, actual))))
            .map_err(|err| self.describe(err))
    }

    /// The template's output for any data (a vault map's model).
    pub fn render_value(&self, data: serde_json::Value) -> Result<String, TemplateError> {
        let env = self.environment();
        let template = env
            .template_from_str(&self.source)
            .map_err(|err| self.describe(err))?;
        template
            .render(Value::from(Serde(data)))
            .map_err(|err| self.describe(err))
    }

    fn describe(&self, err: minijinja::Error) -> TemplateError {
        TemplateError::Jinja {
            name: self.name.clone(),
            source: err,
        }
    }
}

/// Refuses, before minijinja sees it, a template whose size, chains of
/// operators or nesting could exhaust the stack while it is parsed,
/// compiled or rendered (a stack overflow aborts the whole process).
fn check_shape(name: &str, source: &str) -> Result<(), TemplateError> {
    let name = || name.to_string();
    if source.len() > MAX_TEMPLATE_BYTES {
        return Err(TemplateError::TooLarge {
            name: name(),
            bytes: source.len(),
            limit: MAX_TEMPLATE_BYTES,
        });
    }
    let bytes = source.as_bytes();
    let line_of = |at: usize| 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
    let mut blocks = 0usize;
    let mut in_raw = false;
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'{', &bytes[at..]) {
        let open = at + found;
        let close_marker: &[u8] = match bytes.get(open + 1) {
            Some(b'{') => b"}}",
            Some(b'%') => b"%}",
            Some(b'#') => b"#}",
            _ => {
                at = open + 1;
                continue;
            }
        };
        let inner_start = open + 2;
        if close_marker == b"#}" {
            if in_raw {
                at = inner_start;
                continue;
            }
            // A comment runs to its end marker; an unclosed one is
            // minijinja's error to report.
            match memchr::memmem::find(&bytes[inner_start..], b"#}") {
                Some(end) => at = inner_start + end + 2,
                None => return Ok(()),
            }
            continue;
        }
        let tag = scan_tag(bytes, inner_start, close_marker);
        at = tag.end;
        let words = &source[inner_start..tag.content_end];
        let words = words.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        let keyword = words.split_whitespace().next().unwrap_or("");
        if in_raw {
            // Inside `raw`, tags are text; only `endraw` counts.
            in_raw = !(close_marker == b"%}" && keyword == "endraw");
            continue;
        }
        if tag.depth > MAX_TEMPLATE_NESTING {
            return Err(TemplateError::BracketsTooDeep {
                name: name(),
                line: line_of(open),
                depth: tag.depth,
                limit: MAX_TEMPLATE_NESTING,
            });
        }
        if tag.operators > MAX_TAG_OPERATORS {
            return Err(TemplateError::TooManyOperators {
                name: name(),
                line: line_of(open),
                operators: tag.operators,
                limit: MAX_TAG_OPERATORS,
            });
        }
        if close_marker == b"%}" {
            match keyword {
                "raw" => in_raw = true,
                "if" | "for" | "macro" | "call" | "filter" | "with" | "autoescape" | "block" => {
                    blocks += 1;
                    if blocks > MAX_TEMPLATE_NESTING {
                        return Err(TemplateError::BlocksTooDeep {
                            name: name(),
                            line: line_of(open),
                            limit: MAX_TEMPLATE_NESTING,
                        });
                    }
                }
                // `set` with no `=` opens a block that `endset` closes.
                "set" if !words.contains('=') => blocks += 1,
                _ if keyword.starts_with("end") => blocks = blocks.saturating_sub(1),
                _ => {}
            }
        }
    }
    Ok(())
}

/// What [`check_shape`] learns of one tag.
struct TagShape {
    /// Where the tag's text ends (its end marker, or the end of the source).
    content_end: usize,
    /// Just past the end marker.
    end: usize,
    operators: usize,
    depth: usize,
}

/// Reads the tag whose text starts at `start` up to `close_marker`,
/// outside string literals, counting operators (a run of operator
/// characters, `.`, an opening bracket, or an operator word) and the
/// deepest bracket nesting. Overcounting only makes the bound stricter.
fn scan_tag(bytes: &[u8], start: usize, close_marker: &[u8]) -> TagShape {
    let mut operators = 0usize;
    // Signed, as minijinja's lexer counts it: a tag ends at its marker only
    // when the brackets balance.
    let mut depth = 0isize;
    let mut max_depth = 0isize;
    let mut in_operator = false;
    let mut i = start;
    while i < bytes.len() {
        let byte = bytes[i];
        if depth == 0 && bytes[i..].starts_with(close_marker) {
            return TagShape {
                content_end: i,
                end: i + close_marker.len(),
                operators,
                depth: max_depth.unsigned_abs(),
            };
        }
        let operator_char = matches!(
            byte,
            b'~' | b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'|'
        );
        if operator_char && !in_operator {
            operators += 1;
        }
        in_operator = operator_char;
        match byte {
            b'"' | b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != byte {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'.' => operators += 1,
            b'(' | b'[' | b'{' => {
                operators += 1;
                depth += 1;
                max_depth = max_depth.max(depth);
            }
            b')' | b']' | b'}' => depth -= 1,
            _ if byte.is_ascii_alphabetic() || byte == b'_' => {
                let word_end = bytes[i..]
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                    .map_or(bytes.len(), |n| i + n);
                if matches!(
                    &bytes[i..word_end],
                    b"and" | b"or" | b"not" | b"in" | b"is" | b"if" | b"else"
                ) {
                    operators += 1;
                }
                i = word_end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    TagShape {
        content_end: bytes.len(),
        end: bytes.len(),
        operators,
        depth: max_depth.unsigned_abs(),
    }
}

/// The template's data: the pack's JSON model with the printed text of
/// each page.
pub(crate) fn model(pack: &Pack, actual: usize) -> serde_json::Value {
    let mut value = serde_json::to_value(pack).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("bundle");
        object.insert("actual".into(), actual.into());
        object.insert("title".into(), super::style::title(pack).into());
        for (key, pages) in [("pages", &pack.pages), ("dailies", &pack.dailies)] {
            let Some(list) = object.get_mut(key).and_then(|v| v.as_array_mut()) else {
                continue;
            };
            for (entry, page) in list.iter_mut().zip(pages) {
                if let Some(entry) = entry.as_object_mut() {
                    // A fenced pack's page text comes with its markers.
                    let content = page
                        .shown
                        .body
                        .as_deref()
                        .map(|body| super::style::fenced(pack, body));
                    entry.insert("content".into(), content.into());
                    entry.insert("label".into(), page.shown.label.clone().into());
                    entry.insert("shown_summary".into(), page.shown.summary.clone().into());
                }
            }
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses and renders `source` (with `topic` set) on a thread with the
    /// 2 MiB stack of a server's worker: the bounds must hold there.
    fn render_on_small_stack(source: String) -> Result<String, TemplateError> {
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                let template = PackTemplate::parse("t.j2", source)?;
                let env = template.environment();
                let compiled = env
                    .template_from_str(&template.source)
                    .map_err(|err| template.describe(err))?;
                compiled
                    .render(minijinja::context! { topic => "x" })
                    .map_err(|err| template.describe(err))
            })
            .expect("thread")
            .join()
            .expect("no panic")
    }

    fn chain(operator: &str, terms: usize) -> String {
        vec!["topic"; terms].join(&format!(" {operator} "))
    }

    #[test]
    fn long_operator_chains_are_refused_before_parsing() {
        for operator in ["~", "+", "and", "|"] {
            let source = format!("head\n{{{{ {} }}}}\n", chain(operator, 20_000));
            assert_eq!(
                PackTemplate::parse("t.j2", source).unwrap_err().to_string(),
                "template t.j2: line 2: a tag chains 19999 operators; at most 200 are allowed \
                 (split the expression with `set`)"
            );
        }
        let negations = format!("{{{{ {}1 }}}}", "- ".repeat(40_000));
        assert_eq!(
            PackTemplate::parse("t.j2", negations)
                .unwrap_err()
                .to_string(),
            "template t.j2: line 1: a tag chains 40000 operators; at most 200 are allowed \
             (split the expression with `set`)"
        );
        let statement = format!("{{% set x = {} %}}", chain("~", 5_000));
        assert!(
            PackTemplate::parse("t.j2", statement)
                .unwrap_err()
                .to_string()
                .contains("a tag chains 5000 operators")
        );
    }

    #[test]
    fn an_unreadable_or_broken_template_carries_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone.j2");
        let err = PackTemplate::load(&missing).unwrap_err();
        let TemplateError::Read { path, source } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(path, &missing);
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            format!("cannot read template {}: {source}", missing.display())
        );
        assert!(std::error::Error::source(&err).is_some());

        let err = PackTemplate::parse("t.j2", "a\n{% if %}\n".into()).unwrap_err();
        assert!(matches!(err, TemplateError::Jinja { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "template t.j2, line 2: syntax error: unexpected end of block"
        );
        let source = std::error::Error::source(&err).expect("minijinja's error");
        assert!(source.is::<minijinja::Error>());

        let err = PackTemplate::parse("t.j2", "x".repeat(MAX_TEMPLATE_BYTES + 1)).unwrap_err();
        assert!(matches!(
            err,
            TemplateError::TooLarge {
                limit: MAX_TEMPLATE_BYTES,
                ..
            }
        ));
        assert!(std::error::Error::source(&err).is_none());
    }

    #[test]
    fn deep_nesting_and_huge_templates_are_refused() {
        let brackets = format!("{{{{ {}1{} }}}}", "(".repeat(33), ")".repeat(33));
        assert_eq!(
            PackTemplate::parse("t.j2", brackets)
                .unwrap_err()
                .to_string(),
            "template t.j2: line 1: brackets nest 33 deep; at most 32 levels are allowed"
        );
        let blocks = format!(
            "{}x{}",
            "{% if true %}".repeat(33),
            "{% endif %}".repeat(33)
        );
        assert_eq!(
            PackTemplate::parse("t.j2", blocks).unwrap_err().to_string(),
            "template t.j2: line 1: block tags nest more than 32 deep"
        );
        let huge = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        assert_eq!(
            PackTemplate::parse("t.j2", huge).unwrap_err().to_string(),
            "template t.j2: 262145 bytes is too large; a template may hold at most 262144 bytes"
        );
    }

    #[test]
    fn templates_at_the_bounds_render_on_a_small_stack() {
        let at_limit = format!("{{{{ {} }}}}", chain("~", MAX_TAG_OPERATORS + 1));
        assert_eq!(
            render_on_small_stack(at_limit).unwrap(),
            "x".repeat(MAX_TAG_OPERATORS + 1)
        );
        let negations = format!("{{{{ {}1 }}}}", "- ".repeat(MAX_TAG_OPERATORS));
        assert_eq!(render_on_small_stack(negations).unwrap(), "1");
        let nested = format!(
            "{{{{ {}topic{} }}}}",
            "(".repeat(MAX_TEMPLATE_NESTING),
            ")".repeat(MAX_TEMPLATE_NESTING)
        );
        assert_eq!(render_on_small_stack(nested).unwrap(), "x");
        let blocks = format!(
            "{}{{{{ topic }}}}{}",
            "{% if true %}".repeat(MAX_TEMPLATE_NESTING),
            "{% endif %}".repeat(MAX_TEMPLATE_NESTING)
        );
        assert_eq!(render_on_small_stack(blocks).unwrap(), "x");
        // Sequential blocks and tags add nothing to the depth.
        let many = "{% if true %}{{ topic ~ topic }}{% endif %}".repeat(1_000);
        assert_eq!(render_on_small_stack(many).unwrap(), "xx".repeat(1_000));
    }

    #[test]
    fn operators_in_strings_comments_and_raw_blocks_do_not_count() {
        let text = "+".repeat(1_000);
        let source = format!(
            "{{{{ topic ~ \"{text}\" ~ '{text}' }}}}{{# {text} #}}\
             {{% raw %}}{{{{ {} }}}}{{% endraw %}}",
            chain("~", 1_000)
        );
        let expected = format!("x{text}{text}{{{{ {} }}}}", chain("~", 1_000));
        assert_eq!(render_on_small_stack(source).unwrap(), expected);
    }
}

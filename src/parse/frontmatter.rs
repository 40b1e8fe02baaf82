//! YAML frontmatter: splitting it from the body and reading typed fields.

use yaml_serde::{Mapping, Value};

/// A note's text split at its frontmatter.
pub(crate) struct Split<'a> {
    /// The YAML between the `---` lines, if the note has a frontmatter block.
    pub yaml: Option<&'a str>,
    pub body: &'a str,
    pub problem: Option<String>,
}

/// Splits `---` frontmatter off the text. An unterminated block is body text.
pub(crate) fn split(text: &str) -> Split<'_> {
    let no_frontmatter = Split {
        yaml: None,
        body: text,
        problem: None,
    };
    let Some(first_line_end) = text.find('\n') else {
        return no_frontmatter;
    };
    if text[..first_line_end].trim_end() != "---" {
        return no_frontmatter;
    }
    let yaml_start = first_line_end + 1;
    let mut line_start = yaml_start;
    while line_start <= text.len() {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let line = text[line_start..line_end].trim_end();
        if line == "---" || line == "..." {
            let body_start = (line_end + 1).min(text.len());
            return Split {
                yaml: Some(&text[yaml_start..line_start]),
                body: &text[body_start..],
                problem: None,
            };
        }
        if line_end == text.len() {
            break;
        }
        line_start = line_end + 1;
    }
    Split {
        problem: Some("frontmatter has no closing '---' line; read as body text".into()),
        ..no_frontmatter
    }
}

/// Why a frontmatter block could not be read as fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FrontmatterError {
    /// Not valid YAML, a duplicate key, or not a key/value mapping.
    Broken(String),
    /// Valid YAML that expands past the bound: nothing in it can be read.
    Unreadable(String),
}

impl std::fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrontmatterError::Broken(message) | FrontmatterError::Unreadable(message) => {
                f.write_str(message)
            }
        }
    }
}

/// Parses the YAML of a frontmatter block into a mapping (bounded: see
/// [`super::yaml`]).
pub(crate) fn parse(yaml: &str) -> Result<Mapping, FrontmatterError> {
    if yaml.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match super::yaml::parse_value(yaml) {
        Ok(Value::Mapping(mapping)) => Ok(mapping),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err(FrontmatterError::Broken(
            "frontmatter is not a key/value mapping".into(),
        )),
        Err(super::yaml::YamlError::Syntax(err)) => Err(FrontmatterError::Broken(format!(
            "broken YAML frontmatter: {err}"
        ))),
        Err(err @ super::yaml::YamlError::TooLarge) => Err(FrontmatterError::Unreadable(format!(
            "frontmatter cannot be read: {err}"
        ))),
    }
}

/// Looks a key up exactly, then ignoring ASCII case.
pub(crate) fn get<'a>(fields: &'a Mapping, key: &str) -> Option<&'a Value> {
    fields.get(key).or_else(|| {
        fields
            .iter()
            .find(|(k, _)| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(key)))
            .map(|(_, v)| v)
    })
}

/// The field named `name` compared loosely, as people write a key: in any
/// case, with spaces, `_` or `-` between its words or none (`Date
/// Modified`, `date_modified`, `dateModified`); with the key as written.
pub(crate) fn get_loosely<'a>(fields: &'a Mapping, name: &str) -> Option<(&'a str, &'a Value)> {
    fn squeezed(key: &str) -> impl Iterator<Item = char> + '_ {
        key.chars()
            .filter(|c| !matches!(c, ' ' | '_' | '-'))
            .map(|c| c.to_ascii_lowercase())
    }
    fields.iter().find_map(|(key, value)| {
        let key = key.as_str()?;
        squeezed(key).eq(squeezed(name)).then_some((key, value))
    })
}

/// A scalar field as text; `None` for missing, null, empty or non-scalar.
pub(crate) fn scalar(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Tagged(tagged) => return scalar(&tagged.value),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => return None,
    };
    let text = text.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// A list field: a YAML sequence, or a string split at `separators`.
pub(crate) fn list(value: &Value, separators: &[char]) -> Vec<String> {
    let items: Vec<String> = match value {
        Value::Sequence(items) => items.iter().filter_map(scalar).collect(),
        Value::Tagged(tagged) => return list(&tagged.value, separators),
        other => scalar(other)
            .map(|s| {
                s.split(separators)
                    .map(|part| part.trim().to_string())
                    .collect()
            })
            .unwrap_or_default(),
    };
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frontmatter_and_body() {
        let s = split("---\ntitle: A\n---\nBody\n");
        assert_eq!(s.yaml, Some("title: A\n"));
        assert_eq!(s.body, "Body\n");
        let s = split("No frontmatter\n---\n");
        assert!(s.yaml.is_none());
        let s = split("---\ntitle: A\nno end\n");
        assert!(s.yaml.is_none() && s.problem.is_some());
        let s = split("---\n---\n");
        assert_eq!((s.yaml, s.body), (Some(""), ""));
    }

    #[test]
    fn reads_lists_in_both_styles_and_strings() {
        let m = parse("a: [x, y]\nb:\n  - z\nc: p, q\nd: 3\n").unwrap();
        assert_eq!(list(get(&m, "a").unwrap(), &[',']), ["x", "y"]);
        assert_eq!(list(get(&m, "b").unwrap(), &[',']), ["z"]);
        assert_eq!(list(get(&m, "c").unwrap(), &[',']), ["p", "q"]);
        assert_eq!(scalar(get(&m, "D").unwrap()).as_deref(), Some("3"));
    }

    #[test]
    fn broken_yaml_is_an_error_message() {
        let err = parse("title: [unclosed\n").unwrap_err();
        assert!(
            err.to_string().starts_with("broken YAML frontmatter"),
            "{err}"
        );
    }
}

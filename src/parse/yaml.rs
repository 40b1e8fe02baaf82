//! YAML read with a bound on what it may expand to.
//!
//! YAML aliases let a few kilobytes stand for gigabytes (`&a [x, x, …]`,
//! `&b [*a, *a, …]`); the parser bounds the depth of such nesting but not
//! its width, so every YAML ctxpack reads (frontmatter, `.base` files, the
//! policy, configs, recipes) is built through [`parse_value`], which counts
//! every node and byte as the document is expanded and stops at the bound,
//! before the memory is spent.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};
use yaml_serde::value::{Tag, TaggedValue};
use yaml_serde::{Mapping, Value};

/// The least a document may expand to, whatever its size.
const MIN_EXPANDED_BYTES: usize = 1 << 20;
/// A document may expand to this many times its own length (a plain
/// mapping costs about three; aliases are what go past it).
const EXPANSION_FACTOR: usize = 16;
/// What one node costs besides its text.
const NODE_COST: usize = 16;

const TOO_LARGE: &str = "YAML expands past its bound (aliases repeated too often)";

/// Why a YAML text could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum YamlError {
    /// Not valid YAML (or a duplicate key).
    Syntax(String),
    /// Valid YAML that expands past the bound: read as nothing.
    TooLarge,
}

impl std::error::Error for YamlError {}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            YamlError::Syntax(message) => f.write_str(message),
            YamlError::TooLarge => f.write_str(TOO_LARGE),
        }
    }
}

/// The bound for a document of `len` bytes.
pub(crate) fn expansion_bound(len: usize) -> usize {
    len.saturating_mul(EXPANSION_FACTOR).max(MIN_EXPANDED_BYTES)
}

/// Parses one YAML document into a value, refusing one that expands past
/// [`expansion_bound`] of its length.
pub(crate) fn parse_value(text: &str) -> Result<Value, YamlError> {
    if flow_nesting_exceeds(text, MAX_FLOW_NESTING) {
        return Err(YamlError::Syntax(format!(
            "brackets nested more than {MAX_FLOW_NESTING} deep"
        )));
    }
    let left = Cell::new(expansion_bound(text.len()));
    let deserializer = yaml_serde::Deserializer::from_str(text);
    let mut value = Bounded { left: &left }
        .deserialize(deserializer)
        .map_err(|err| {
            let message = err.to_string();
            if message.contains(TOO_LARGE) {
                YamlError::TooLarge
            } else {
                YamlError::Syntax(message)
            }
        })?;
    // `<<: *defaults` merges a mapping's keys into this one (YAML 1.1, as
    // most tools read it): a key set that way (`private: true`) is the
    // note's own. A merge of something else is broken YAML.
    value
        .apply_merge()
        .map_err(|err| YamlError::Syntax(format!("a `<<` merge key: {err}")))?;
    Ok(value)
}

/// The parser refuses nesting deeper than this anyway ("recursion limit
/// exceeded"), but only after a scan that is quadratic in the depth: 60,000
/// nested `[` in a frontmatter cost every command 14 s.
const MAX_FLOW_NESTING: usize = 128;

/// Whether `[` and `{` outside quoted scalars and comments nest deeper
/// than `limit`: a linear scan, run before the parser. A quote opens a
/// scalar only where one may start (not the apostrophe of `it's`).
fn flow_nesting_exceeds(text: &str, limit: usize) -> bool {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        let starts_a_token = at == 0 || b" \t\r\n:,[{-".contains(&bytes[at - 1]);
        match quote {
            Some(b'"') if byte == b'\\' => at += 1,
            Some(open) if byte == open => quote = None,
            Some(_) => {}
            None => match byte {
                b'"' | b'\'' if starts_a_token => quote = Some(byte),
                b'#' if starts_a_token => {
                    while at < bytes.len() && bytes[at] != b'\n' {
                        at += 1;
                    }
                }
                b'[' | b'{' => {
                    depth += 1;
                    if depth > limit {
                        return true;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        at += 1;
    }
    false
}

/// Deserializes `T` from YAML after checking that the document stays
/// within the bound (the typed pass keeps its own error messages).
pub(crate) fn from_str<T: de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    parse_value(text)?;
    yaml_serde::from_str(text).map_err(|err| YamlError::Syntax(err.to_string()))
}

struct Bounded<'a> {
    left: &'a Cell<usize>,
}

impl Bounded<'_> {
    fn charge<E: de::Error>(&self, cost: usize) -> Result<(), E> {
        let left = self.left.get();
        if cost > left {
            return Err(E::custom(TOO_LARGE));
        }
        self.left.set(left - cost);
        Ok(())
    }

    fn again(&self) -> Bounded<'_> {
        Bounded { left: self.left }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.charge(NODE_COST)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        self.charge(NODE_COST)?;
        Ok(Value::Number(i.into()))
    }

    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        self.charge(NODE_COST)?;
        Ok(Value::Number(u.into()))
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.charge(NODE_COST)?;
        Ok(Value::Number(f.into()))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.charge(NODE_COST + s.len())?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.charge(NODE_COST + s.len())?;
        Ok(Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.charge(NODE_COST)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        self.charge(NODE_COST)?;
        let mut sequence = Vec::new();
        while let Some(item) = items.next_element_seed(self.again())? {
            sequence.push(item);
        }
        Ok(Value::Sequence(sequence))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        self.charge(NODE_COST)?;
        let mut mapping = Mapping::new();
        while let Some(key) = entries.next_key_seed(self.again())? {
            if mapping.contains_key(&key) {
                let shown = key
                    .as_str()
                    .map_or_else(|| "a key".to_string(), |k| format!("key '{k}'"));
                return Err(de::Error::custom(format!("duplicate entry with {shown}")));
            }
            let value = entries.next_value_seed(self.again())?;
            mapping.insert(key, value);
        }
        Ok(Value::Mapping(mapping))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        use serde::de::VariantAccess;
        let (tag, contents): (String, _) = data.variant()?;
        self.charge(NODE_COST + tag.len())?;
        let value = contents.newtype_variant_seed(self.again())?;
        Ok(Value::Tagged(Box::new(TaggedValue {
            tag: Tag::new(tag),
            value,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_yaml_reads_as_the_unbounded_parser_reads_it() {
        let text = "title: T\ntags: [a, b]\nn: 3\nf: 1.5\nok: true\nnone: ~\n\
                    nested:\n  k: [1, {x: y}]\nanchor: &a v\nalias: *a\ntagged: !custom 7\n";
        let ours = parse_value(text).unwrap();
        let theirs: Value = yaml_serde::from_str(text).unwrap();
        assert_eq!(ours, theirs);
        assert_eq!(parse_value("").unwrap(), Value::Null);
    }

    #[test]
    fn wide_alias_expansion_stops_at_the_bound() {
        // Each level repeats the one below 32 times: 32^4 copies of a 1 KB
        // string (a gigabyte) from a text of a few kilobytes.
        let mut text = format!("l0: &l0 \"{}\"\n", "x".repeat(1024));
        for level in 1..=4 {
            let items = vec![format!("*l{}", level - 1); 32].join(", ");
            text.push_str(&format!("l{level}: &l{level} [{items}]\n"));
        }
        assert!(text.len() < 8 * 1024);
        assert_eq!(parse_value(&text), Err(YamlError::TooLarge));
        // A little sharing stays well within it.
        assert!(parse_value("a: &a [1, 2]\nb: [*a, *a, *a]\n").is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_before_the_parser_runs() {
        let deep = |open: &str, close: &str, n: usize| {
            format!("x: {}{}\n", open.repeat(n), close.repeat(n))
        };
        assert!(parse_value(&deep("[", "]", 100)).is_ok());
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let err = parse_value(&deep(open, close, 60_000)).unwrap_err();
            assert_eq!(
                err,
                YamlError::Syntax("brackets nested more than 128 deep".into())
            );
        }
        // Brackets in quotes, comments and words nest nothing.
        let quoted = format!("x: \"{}\"\ny: '{}'\n", "[".repeat(500), "{".repeat(500));
        assert!(parse_value(&quoted).is_ok());
        let commented = format!("# {}\nx: 1\n", "[".repeat(500));
        assert!(parse_value(&commented).is_ok());
        // An apostrophe or a comment quote opens no scalar that hides nesting.
        for prefix in ["x: it's ", "# 'x\nx: "] {
            let text = format!("{prefix}{}{}\n", "[".repeat(200), "]".repeat(200));
            assert!(flow_nesting_exceeds(&text, MAX_FLOW_NESTING), "{prefix}");
        }
    }

    #[test]
    fn merge_keys_merge_into_their_mapping() {
        let merged = parse_value("d: &d {private: true}\n<<: *d\ntitle: T\n").unwrap();
        assert_eq!(merged.get("private"), Some(&Value::Bool(true)));
        let inline = parse_value("<<: {private: true}\n").unwrap();
        assert_eq!(inline.get("private"), Some(&Value::Bool(true)));
        // A key of the mapping itself wins over a merged one.
        let own = parse_value("<<: {private: true}\nprivate: false\n").unwrap();
        assert_eq!(own.get("private"), Some(&Value::Bool(false)));
        assert!(matches!(parse_value("<<: 7\n"), Err(YamlError::Syntax(_))));
    }

    #[test]
    fn duplicate_keys_and_broken_syntax_are_syntax_errors() {
        assert!(matches!(
            parse_value("a: 1\na: 2\n"),
            Err(YamlError::Syntax(message)) if message.contains("duplicate entry with key 'a'")
        ));
        assert!(matches!(
            parse_value("summary: Note: two\n"),
            Err(YamlError::Syntax(_))
        ));
        assert!(from_str::<Value>("a: [").is_err());
    }
}

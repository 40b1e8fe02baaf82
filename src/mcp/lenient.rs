//! Arguments as agents send them: a model writing a tool call often
//! quotes a number or a flag (`"budget_tokens": "1500"`, `"recent":
//! "true"`). Such a value is read as what it spells; anything else is
//! refused as before, with the field's name.

use serde::{Deserialize, Deserializer, de::Error};

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(u64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FlagOrText {
    Flag(bool),
    Text(String),
}

/// An optional count: a JSON number, or a string of its digits.
pub(crate) fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    match Option::<NumberOrText>::deserialize(deserializer) {
        Ok(None) => Ok(None),
        Ok(Some(NumberOrText::Number(n))) => usize::try_from(n)
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{n} is too large"))),
        Ok(Some(NumberOrText::Text(text))) => text
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("expected a whole number, not {text:?}"))),
        Err(_) => Err(D::Error::custom("expected a whole number")),
    }
}

/// An optional flag: `true`/`false`, or a string spelling one of them.
pub(crate) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    match Option::<FlagOrText>::deserialize(deserializer) {
        Ok(None) => Ok(None),
        Ok(Some(FlagOrText::Flag(flag))) => Ok(Some(flag)),
        Ok(Some(FlagOrText::Text(text))) => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(D::Error::custom(format!(
                "expected true or false, not {text:?}"
            ))),
        },
        Err(_) => Err(D::Error::custom("expected true or false")),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Args {
        #[serde(default, deserialize_with = "super::count")]
        budget: Option<usize>,
        #[serde(default, deserialize_with = "super::flag")]
        recent: Option<bool>,
    }

    fn read(json: &str) -> Result<Args, String> {
        serde_json::from_str(json).map_err(|err| err.to_string())
    }

    #[test]
    fn quoted_numbers_and_flags_are_read_as_they_spell() {
        let both = |budget, recent| Args { budget, recent };
        assert_eq!(read("{}"), Ok(both(None, None)));
        assert_eq!(
            read(r#"{"budget": 1500, "recent": true}"#),
            Ok(both(Some(1500), Some(true)))
        );
        assert_eq!(
            read(r#"{"budget": " 1500", "recent": "False"}"#),
            Ok(both(Some(1500), Some(false)))
        );
        assert_eq!(read(r#"{"budget": null}"#), Ok(both(None, None)));
        for bad in [
            r#"{"budget": "1.5k"}"#,
            r#"{"budget": -3}"#,
            r#"{"budget": 2.5}"#,
            r#"{"recent": "yes"}"#,
            r#"{"recent": 1}"#,
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }
}

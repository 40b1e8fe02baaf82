//! Field visibility by purpose: the `aiContext` rules of `meta/schemas/`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::error::ProjectError;
use super::project::Project;
use crate::privacy::policy::{before_remark, field_name_key};

/// `aiContext`: visible to every purpose, to none, or to those listed.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub(crate) enum AiContext {
    All(bool),
    Only(Vec<String>),
    /// The field's type has no schema: whether it may be seen is unknown,
    /// so no purpose sees it (never read from a schema file).
    #[serde(skip)]
    NoSchema,
}

impl AiContext {
    pub(crate) fn allows(&self, purpose: &str) -> bool {
        match self {
            AiContext::All(all) => *all,
            AiContext::Only(purposes) => purposes.iter().any(|p| p == purpose),
            AiContext::NoSchema => false,
        }
    }
}

impl AiContext {
    /// What both rules allow.
    pub(crate) fn narrowest(&self, other: &AiContext) -> AiContext {
        match (self, other) {
            (AiContext::NoSchema, _) | (_, AiContext::NoSchema) => AiContext::NoSchema,
            (AiContext::All(true), rule) | (rule, AiContext::All(true)) => rule.clone(),
            (AiContext::All(false), _) | (_, AiContext::All(false)) => AiContext::All(false),
            (AiContext::Only(these), AiContext::Only(those)) => AiContext::Only(
                these
                    .iter()
                    .filter(|purpose| those.contains(purpose))
                    .cloned()
                    .collect(),
            ),
        }
    }
}

impl fmt::Display for AiContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AiContext::All(all) => write!(f, "aiContext: {all}"),
            AiContext::Only(purposes) => write!(f, "aiContext: [{}]", purposes.join(", ")),
            AiContext::NoSchema => f.write_str("no schema for its type"),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FieldRule {
    #[serde(rename = "aiContext")]
    pub ai_context: AiContext,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Schema {
    #[serde(rename = "type")]
    pub type_name: String,
    /// The rule for fields the schema does not list.
    #[serde(default = "visible")]
    pub default: AiContext,
    /// Fields in the schema's order.
    #[serde(default)]
    pub fields: yaml_serde::Mapping,
    #[serde(skip)]
    pub rules: Vec<(String, FieldRule)>,
    /// The file it was read from.
    #[serde(skip)]
    pub path: String,
}

fn visible() -> AiContext {
    AiContext::All(true)
}

impl Schema {
    /// Each listed field's rule, then the default's (as `(default)`).
    fn every_rule(&self) -> impl Iterator<Item = (&str, &AiContext)> {
        self.rules
            .iter()
            .map(|(name, rule)| (name.as_str(), &rule.ai_context))
            .chain([("(default)", &self.default)])
    }

    /// The rule for a field as a card writes its name: compared as a reader
    /// sees it (`## **Notes** ^id`, `NOTES:`, `no&shy;tes` name `notes`),
    /// else by its name before a remark (`## Notes (old)`); where two rules
    /// name it alike, only what both allow is allowed.
    pub(crate) fn rule(&self, field: &str) -> AiContext {
        let matching = |key: &str| {
            self.rules
                .iter()
                .filter(|(name, _)| field_name_key(name) == key)
                .map(|(_, rule)| &rule.ai_context)
                .fold(None, |narrowest: Option<AiContext>, rule| {
                    Some(narrowest.map_or_else(|| rule.clone(), |n| n.narrowest(rule)))
                })
        };
        matching(&field_name_key(field))
            .or_else(|| before_remark(field).and_then(|name| matching(&field_name_key(name))))
            .unwrap_or_else(|| self.default.clone())
    }
}

/// Every schema of a project, by type name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Schemas {
    pub by_type: BTreeMap<String, Schema>,
}

impl Schemas {
    pub(crate) fn load(project: &Project, dir: &str) -> Result<Schemas, ProjectError> {
        let mut by_type = BTreeMap::new();
        for entry in project.list(dir)? {
            if entry.is_dir || !(entry.name.ends_with(".yaml") || entry.name.ends_with(".yml")) {
                continue;
            }
            let text = project.read(&entry.path)?;
            let mut schema: Schema =
                crate::parse::yaml::from_str(&text).map_err(|err| ProjectError::SchemaSyntax {
                    path: entry.path.clone(),
                    error: err.to_string(),
                })?;
            for (name, rule) in &schema.fields {
                let name = name
                    .as_str()
                    .ok_or_else(|| ProjectError::FieldNameNotText {
                        path: entry.path.clone(),
                    })?;
                let rule: FieldRule = yaml_serde::from_value(rule.clone()).map_err(|err| {
                    ProjectError::FieldRule {
                        path: entry.path.clone(),
                        field: name.to_string(),
                        error: err.to_string(),
                    }
                })?;
                schema.rules.push((name.to_string(), rule));
            }
            schema.path = entry.path.clone();
            if by_type.contains_key(&schema.type_name) {
                return Err(ProjectError::DuplicateType {
                    dir: dir.to_string(),
                    type_name: schema.type_name.clone(),
                });
            }
            by_type.insert(schema.type_name.clone(), schema);
        }
        Ok(Schemas { by_type })
    }

    /// The rule for `field` of `type_name`. A type without a schema shows
    /// no field (fail closed: a schema file deleted or misnamed must not
    /// show what it hid).
    pub(crate) fn rule(&self, type_name: &str, field: &str) -> AiContext {
        self.by_type
            .get(type_name)
            .map_or(AiContext::NoSchema, |schema| schema.rule(field))
    }

    /// Refuses a recipe that names a type (`what` says where) with no
    /// schema in `dir`: every field of it would be hidden.
    pub(crate) fn check_named<'a>(
        &self,
        dir: &str,
        named: impl IntoIterator<Item = (&'a str, String)>,
    ) -> Result<(), ProjectError> {
        for (type_name, place) in named {
            if !self.by_type.contains_key(type_name) {
                return Err(ProjectError::NoSchema {
                    dir: dir.to_string(),
                    type_name: type_name.to_string(),
                    place,
                });
            }
        }
        Ok(())
    }

    /// Refuses a rule that lists a purpose not in `purposes`: a misspelt
    /// purpose would hide its field from everyone without a word.
    pub(crate) fn check_purposes(
        &self,
        purposes: &std::collections::BTreeSet<&str>,
    ) -> Result<(), ProjectError> {
        for schema in self.by_type.values() {
            for (field, rule) in schema.every_rule() {
                let AiContext::Only(listed) = rule else {
                    continue;
                };
                if let Some(purpose) = listed.iter().find(|p| !purposes.contains(p.as_str())) {
                    return Err(ProjectError::UnknownPurpose {
                        path: schema.path.clone(),
                        field: field.to_string(),
                        purpose: purpose.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Refuses rules under which the shared baseline (seen by everyone)
    /// would show a field that `purpose` may not see.
    pub(crate) fn check_baseline_is_safe(
        &self,
        baseline: &str,
        purposes: &[&str],
    ) -> Result<(), ProjectError> {
        for schema in self.by_type.values() {
            for (field, rule) in schema.every_rule() {
                if !rule.allows(baseline) {
                    continue;
                }
                if let Some(purpose) = purposes.iter().find(|p| !rule.allows(p)) {
                    return Err(ProjectError::BaselineLeak {
                        type_name: schema.type_name.clone(),
                        field: field.to_string(),
                        baseline: baseline.to_string(),
                        purpose: purpose.to_string(),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_allow_by_purpose() {
        let only = AiContext::Only(vec!["planning".into()]);
        assert!(only.allows("planning") && !only.allows("generation"));
        assert!(AiContext::All(true).allows("x") && !AiContext::All(false).allows("x"));
        assert_eq!(only.to_string(), "aiContext: [planning]");
    }
}

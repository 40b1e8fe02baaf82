//! Field visibility by purpose: the `aiContext` rules of `meta/schemas/`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::error::ProjectError;
use super::project::Project;

/// `aiContext`: visible to every purpose, to none, or to those listed.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub(crate) enum AiContext {
    All(bool),
    Only(Vec<String>),
}

impl AiContext {
    pub(crate) fn allows(&self, purpose: &str) -> bool {
        match self {
            AiContext::All(all) => *all,
            AiContext::Only(purposes) => purposes.iter().any(|p| p == purpose),
        }
    }
}

impl fmt::Display for AiContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AiContext::All(all) => write!(f, "aiContext: {all}"),
            AiContext::Only(purposes) => write!(f, "aiContext: [{}]", purposes.join(", ")),
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
}

fn visible() -> AiContext {
    AiContext::All(true)
}

impl Schema {
    pub(crate) fn rule(&self, field: &str) -> &AiContext {
        self.rules
            .iter()
            .find(|(name, _)| name == field)
            .map_or(&self.default, |(_, rule)| &rule.ai_context)
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

    /// The rule for `field` of `type_name`; types without a schema show
    /// every field.
    pub(crate) fn rule(&self, type_name: &str, field: &str) -> AiContext {
        self.by_type
            .get(type_name)
            .map_or(AiContext::All(true), |schema| schema.rule(field).clone())
    }

    /// Refuses rules under which the shared baseline (seen by everyone)
    /// would show a field that `purpose` may not see.
    pub(crate) fn check_baseline_is_safe(
        &self,
        baseline: &str,
        purposes: &[&str],
    ) -> Result<(), ProjectError> {
        for schema in self.by_type.values() {
            let rules = schema
                .rules
                .iter()
                .map(|(name, rule)| (name.as_str(), &rule.ai_context))
                .chain([("(default)", &schema.default)]);
            for (field, rule) in rules {
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

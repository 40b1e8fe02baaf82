//! The recipe: a project's layers, sources and agents as data
//! (`meta/recipe.yaml`; the format is documented in `docs/assemble.md`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::project::is_plain_name;

/// Where a recipe lives inside a project unless `--recipe` names another.
pub(crate) const RECIPE_FILE: &str = "meta/recipe.yaml";

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    pub name: String,
    /// The file holding the one-line system statement shared by all agents.
    pub system: String,
    #[serde(default)]
    pub labels: Labels,
    pub unit: UnitSpec,
    pub outline: OutlineSpec,
    /// The work's bindings file (libraries and identity slots).
    pub bindings: String,
    #[serde(default = "default_libraries_dir")]
    pub libraries_dir: String,
    #[serde(default = "default_schemas_dir")]
    pub schemas_dir: String,
    #[serde(default)]
    pub cards: CardKeys,
    pub review_file: Option<String>,
    pub baseline: BaselineSpec,
    pub scenarios: BTreeMap<String, ScenarioSpec>,
    pub agents: BTreeMap<String, AgentSpec>,
    pub sources: BTreeMap<String, SourceSpec>,
}

fn default_libraries_dir() -> String {
    "knowledge".into()
}

fn default_schemas_dir() -> String {
    "meta/schemas".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitSpec {
    /// A unit's heading, e.g. `第{unit}章` or `Task {unit}`.
    pub heading: String,
    /// The unit's file, e.g. `works/{work}/正文/第{unit:03}章.md`.
    pub file: String,
    /// Frontmatter keys that make a unit's summary.
    #[serde(default)]
    pub summary_keys: Vec<String>,
    /// The frontmatter key checked against `--expected-revision`.
    pub revision_key: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlineSpec {
    pub file: String,
    /// The schema type whose fields are the outline's parts.
    pub schema: String,
    /// The `##` heading holding the main line.
    pub main_heading: String,
    /// The entry line naming the unit's cast.
    pub cast_key: String,
    /// The entry line naming the unit's scene types.
    pub scene_key: String,
    pub fields: OutlineFields,
}

/// The field names (in the outline's schema) of the outline's parts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlineFields {
    pub main: String,
    pub group: String,
    pub recent: String,
    pub future: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CardKeys {
    pub type_key: String,
    pub name_key: String,
    pub alias_key: String,
    pub parties_key: String,
    pub category_key: String,
    pub scene_key: String,
}

impl Default for CardKeys {
    fn default() -> CardKeys {
        CardKeys {
            type_key: "type".into(),
            name_key: "name".into(),
            alias_key: "aliases".into(),
            parties_key: "parties".into(),
            category_key: "category".into(),
            scene_key: "kinds".into(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSpec {
    /// The agent whose view every pack shares (the most conservative one).
    pub agent: String,
    /// The share of the budget the baseline may take.
    #[serde(default = "default_share")]
    pub share: f64,
}

fn default_share() -> f64 {
    0.6
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// The purpose whose agents serve this scenario.
    pub purpose: String,
    /// The agent used when `--agent` is not given.
    pub agent: String,
    /// The function instruction for this scenario.
    pub chain: String,
    #[serde(default)]
    pub requires: Vec<Requirement>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    Selection,
    ExpectedRevision,
    Candidate,
}

impl Requirement {
    pub fn flag(self) -> &'static str {
        match self {
            Requirement::Selection => "--selection",
            Requirement::ExpectedRevision => "--expected-revision",
            Requirement::Candidate => "--candidate",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// The purposes of the scenarios this agent may serve.
    pub purposes: Vec<String>,
    /// The purpose whose `aiContext` rules decide what this agent sees.
    pub visibility: String,
    pub identity: String,
    pub contract: Option<String>,
    /// The sources this agent reads, most important first within a layer.
    pub sources: Vec<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layer {
    L0,
    L1,
    L2,
    L3,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::L0 => "L0",
            Layer::L1 => "L1",
            Layer::L2 => "L2",
            Layer::L3 => "L3",
        })
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct SourceSpec {
    pub layer: Layer,
    pub title: String,
    /// Within a layer, lower priorities are degraded first (default 0).
    #[serde(default)]
    pub priority: i32,
    #[serde(flatten)]
    pub kind: SourceKind,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceKind {
    File {
        path: String,
        #[serde(default)]
        keep: Keep,
    },
    Sections {
        path: String,
        schema: String,
    },
    UnitScenes {
        offset: i64,
        last: usize,
    },
    UnitSummary {
        offset: i64,
    },
    UnitFull {
        offset: i64,
    },
    Candidate,
    Outline {
        #[serde(default = "default_recent")]
        recent: usize,
    },
    Cards {
        dir: String,
        scope: CardScope,
        #[serde(default)]
        cast_types: Vec<String>,
        #[serde(default)]
        linked_types: Vec<String>,
    },
    CardIndex {
        dir: String,
        summary_field: String,
    },
    Schemas,
    Library {
        #[serde(default)]
        prefer: Vec<String>,
        limit: usize,
        fields: Option<Vec<String>>,
    },
}

fn default_recent() -> usize {
    3
}

/// Which end of a file survives truncation.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Keep {
    #[default]
    Head,
    Tail,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CardScope {
    Cast,
    All,
}

/// Headings of the rendered pack; a recipe may translate them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Labels {
    pub baseline: String,
    pub l0: String,
    pub l1: String,
    pub l2: String,
    pub l3: String,
    pub stable: String,
    pub identity: String,
    pub contract: String,
    pub chain: String,
    pub increment: String,
    pub volatile: String,
    pub object: String,
    pub work: String,
    pub selection: String,
    pub expected_revision: String,
    pub comments: String,
    pub intent: String,
    pub report: String,
    pub hidden_fields: String,
    pub omitted_sources: String,
    pub none: String,
    /// Joins list values (`、` in Chinese, `, ` in English).
    pub separator: String,
    /// Between a name and its value (`：` in Chinese, `: ` in English).
    pub colon: String,
}

impl Default for Labels {
    fn default() -> Labels {
        Labels {
            baseline: "Shared baseline".into(),
            l0: "Current input".into(),
            l1: "Neighbouring text".into(),
            l2: "Work facts".into(),
            l3: "Authorized material".into(),
            stable: "This unit's outline".into(),
            identity: "Agent".into(),
            contract: "Output contract".into(),
            chain: "Function".into(),
            increment: "Increment".into(),
            volatile: "This turn".into(),
            object: "Operation object".into(),
            work: "Work".into(),
            selection: "Selection".into(),
            expected_revision: "Expected revision".into(),
            comments: "Revision comments".into(),
            intent: "User intent".into(),
            report: "Omission report".into(),
            hidden_fields: "Hidden fields".into(),
            omitted_sources: "omittedSources".into(),
            none: "none".into(),
            separator: ", ".into(),
            colon: ": ".into(),
        }
    }
}

impl Labels {
    pub fn layer(&self, layer: Layer) -> &str {
        match layer {
            Layer::L0 => &self.l0,
            Layer::L1 => &self.l1,
            Layer::L2 => &self.l2,
            Layer::L3 => &self.l3,
        }
    }
}

/// Why a recipe was refused: YAML that does not read as a recipe, a name
/// that names nothing, a name or folder that cannot fill a path, or a path
/// template that does not expand. Every message starts `bad recipe: `.
#[derive(Clone, Debug, PartialEq)]
pub enum RecipeError {
    /// Not YAML, or not a recipe's shape (the parser's message).
    Syntax(String),
    /// `baseline.share` outside (0, 1].
    Share(f64),
    /// The baseline agent is not among the agents.
    UnknownBaselineAgent(String),
    /// A scenario names an agent that is not there.
    UnknownAgent { scenario: String, agent: String },
    /// A scenario's agent does not serve the scenario's purpose.
    PurposeNotServed {
        scenario: String,
        agent: String,
        purpose: String,
    },
    /// An agent names a source that is not there.
    UnknownSource { agent: String, source: String },
    /// A scenario, agent or purpose name (`what`) that cannot fill a path.
    NotAName { what: &'static str, name: String },
    /// `libraries_dir` or `schemas_dir` (`key`) is not a folder inside the
    /// project.
    NotAFolder { key: &'static str, dir: String },
    /// The path template at `key` does not expand.
    Template {
        key: String,
        error: PathTemplateError,
    },
}

impl std::fmt::Display for RecipeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bad recipe: ")?;
        match self {
            RecipeError::Syntax(message) => f.write_str(message),
            RecipeError::Share(share) => {
                write!(f, "baseline.share must be in (0, 1], not {share}")
            }
            RecipeError::UnknownBaselineAgent(agent) => {
                write!(f, "baseline agent '{agent}' is not among the agents")
            }
            RecipeError::UnknownAgent { scenario, agent } => {
                write!(f, "scenario '{scenario}' names unknown agent '{agent}'")
            }
            RecipeError::PurposeNotServed {
                scenario,
                agent,
                purpose,
            } => write!(
                f,
                "agent '{agent}' does not serve purpose '{purpose}' of scenario '{scenario}'"
            ),
            RecipeError::UnknownSource { agent, source } => {
                write!(f, "agent '{agent}' names unknown source '{source}'")
            }
            RecipeError::NotAName { what, name } => write!(
                f,
                "{what} '{name}' is not a name (it fills path templates: no '/', '\\', '..' \
                 or empty name)"
            ),
            RecipeError::NotAFolder { key, dir } => write!(
                f,
                "{key} '{dir}' must be a folder inside the project (a relative path without \
                 '.' or '..')"
            ),
            RecipeError::Template { key, error } => write!(f, "{key}: {error}"),
        }
    }
}

impl std::error::Error for RecipeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecipeError::Template { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a path template (`works/{work}/{unit:03}.md`) does not expand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathTemplateError {
    /// A `{` with no `}` after it.
    Unclosed { template: String },
    /// A placeholder that is not one of the six.
    UnknownPlaceholder { name: String, template: String },
    /// A width on another placeholder than `{unit}`.
    WidthNotOnUnit {
        name: String,
        spec: String,
        template: String,
    },
    /// A width that is not digits.
    BadWidth { spec: String, template: String },
    /// A width over `limit` digits (`MAX_WIDTH`).
    WidthTooLarge {
        spec: String,
        template: String,
        limit: usize,
    },
}

impl std::fmt::Display for PathTemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathTemplateError::Unclosed { template } => {
                write!(f, "unclosed '{{' in path template '{template}'")
            }
            PathTemplateError::UnknownPlaceholder { name, template } => {
                write!(
                    f,
                    "unknown placeholder '{{{name}}}' in path template '{template}'"
                )
            }
            PathTemplateError::WidthNotOnUnit {
                name,
                spec,
                template,
            } => write!(
                f,
                "'{{{name}:{spec}}}' in path template '{template}': only {{unit}} takes a width"
            ),
            PathTemplateError::BadWidth { spec, template } => write!(
                f,
                "bad width '{spec}' in path template '{template}': write digits, e.g. {{unit:03}}"
            ),
            PathTemplateError::WidthTooLarge {
                spec,
                template,
                limit,
            } => write!(
                f,
                "width '{spec}' in path template '{template}' is too large: at most {limit} digits"
            ),
        }
    }
}

impl std::error::Error for PathTemplateError {}

impl Recipe {
    pub fn parse(text: &str) -> Result<Recipe, RecipeError> {
        let recipe: Recipe = crate::parse::yaml::from_str(text)
            .map_err(|err| RecipeError::Syntax(err.to_string()))?;
        recipe.check()?;
        Ok(recipe)
    }

    /// Cross-references: every agent, scenario and source named exists.
    fn check(&self) -> Result<(), RecipeError> {
        if !(self.baseline.share > 0.0 && self.baseline.share <= 1.0) {
            return Err(RecipeError::Share(self.baseline.share));
        }
        if !self.agents.contains_key(&self.baseline.agent) {
            return Err(RecipeError::UnknownBaselineAgent(
                self.baseline.agent.clone(),
            ));
        }
        for (name, scenario) in &self.scenarios {
            let Some(agent) = self.agents.get(&scenario.agent) else {
                return Err(RecipeError::UnknownAgent {
                    scenario: name.clone(),
                    agent: scenario.agent.clone(),
                });
            };
            if !agent.purposes.contains(&scenario.purpose) {
                return Err(RecipeError::PurposeNotServed {
                    scenario: name.clone(),
                    agent: scenario.agent.clone(),
                    purpose: scenario.purpose.clone(),
                });
            }
        }
        for (name, agent) in &self.agents {
            for source in &agent.sources {
                if !self.sources.contains_key(source) {
                    return Err(RecipeError::UnknownSource {
                        agent: name.clone(),
                        source: source.clone(),
                    });
                }
            }
        }
        self.check_names()?;
        self.check_templates()
    }

    /// Names that fill path templates (`{agent}`, `{scenario}`, `{purpose}`)
    /// and the folders named directly must be plain names and paths.
    fn check_names(&self) -> Result<(), RecipeError> {
        let bad_name = |what: &'static str, name: &str| RecipeError::NotAName {
            what,
            name: name.to_string(),
        };
        for (name, scenario) in &self.scenarios {
            if !is_plain_name(name) {
                return Err(bad_name("scenario", name));
            }
            if !is_plain_name(&scenario.purpose) {
                return Err(bad_name("purpose", &scenario.purpose));
            }
        }
        for (name, agent) in &self.agents {
            if !is_plain_name(name) {
                return Err(bad_name("agent", name));
            }
            for purpose in agent.purposes.iter().chain([&agent.visibility]) {
                if !is_plain_name(purpose) {
                    return Err(bad_name("purpose", purpose));
                }
            }
        }
        for (key, dir) in [
            ("libraries_dir", &self.libraries_dir),
            ("schemas_dir", &self.schemas_dir),
        ] {
            let path = std::path::Path::new(dir);
            if dir.is_empty()
                || path
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(RecipeError::NotAFolder {
                    key,
                    dir: dir.clone(),
                });
            }
        }
        Ok(())
    }

    /// Every path template expands (known placeholders, widths in bounds),
    /// so a bad one is a recipe error before anything is read.
    fn check_templates(&self) -> Result<(), RecipeError> {
        let mut templates: Vec<(String, &str)> = vec![
            ("unit.heading".into(), &self.unit.heading),
            ("unit.file".into(), &self.unit.file),
            ("outline.file".into(), &self.outline.file),
            ("bindings".into(), &self.bindings),
            ("system".into(), &self.system),
        ];
        if let Some(review) = &self.review_file {
            templates.push(("review_file".into(), review));
        }
        for (name, scenario) in &self.scenarios {
            templates.push((format!("scenarios.{name}.chain"), &scenario.chain));
        }
        for (name, agent) in &self.agents {
            templates.push((format!("agents.{name}.identity"), &agent.identity));
            if let Some(contract) = &agent.contract {
                templates.push((format!("agents.{name}.contract"), contract));
            }
        }
        for (name, source) in &self.sources {
            match &source.kind {
                SourceKind::File { path, .. } | SourceKind::Sections { path, .. } => {
                    templates.push((format!("sources.{name}.path"), path));
                }
                SourceKind::Cards { dir, .. } | SourceKind::CardIndex { dir, .. } => {
                    templates.push((format!("sources.{name}.dir"), dir));
                }
                _ => {}
            }
        }
        let probe = Placeholders {
            work: "w",
            unit: 1,
            agent: "a",
            scenario: "s",
            purpose: "p",
        };
        for (key, template) in templates {
            expand(template, &probe).map_err(|error| RecipeError::Template { key, error })?;
        }
        Ok(())
    }

    pub fn agent(&self, name: &str) -> &AgentSpec {
        &self.agents[name]
    }

    /// The types whose fields the recipe reads by name, each with where it
    /// names it: the outline's, a `sections` source's and a `cards`
    /// source's cast and linked types.
    pub(crate) fn named_types(&self) -> Vec<(&str, String)> {
        let mut named = vec![(self.outline.schema.as_str(), "the outline".to_string())];
        for (id, spec) in &self.sources {
            match &spec.kind {
                SourceKind::Sections { schema, .. } => {
                    named.push((schema.as_str(), format!("source '{id}'")));
                }
                SourceKind::Cards {
                    cast_types,
                    linked_types,
                    ..
                } => named.extend(
                    cast_types
                        .iter()
                        .chain(linked_types)
                        .map(|t| (t.as_str(), format!("source '{id}'"))),
                ),
                _ => {}
            }
        }
        named
    }

    /// Every purpose an agent or scenario of the recipe has.
    pub(crate) fn purposes(&self) -> std::collections::BTreeSet<&str> {
        self.agents
            .values()
            .flat_map(|a| a.purposes.iter().chain([&a.visibility]))
            .chain(self.scenarios.values().map(|s| &s.purpose))
            .map(String::as_str)
            .collect()
    }
}

/// The values a path template may use.
pub(crate) struct Placeholders<'a> {
    pub work: &'a str,
    pub unit: i64,
    pub agent: &'a str,
    pub scenario: &'a str,
    pub purpose: &'a str,
}

/// The widest zero padding a template may ask for (`{unit:016}`); a unit
/// number never needs more, and formatting panics on very large widths.
pub(crate) const MAX_WIDTH: usize = 16;

/// Expands `{work}`, `{unit}`, `{unit:03}`, `{agent}`, `{scenario}` and
/// `{purpose}` in `template`.
pub(crate) fn expand(
    template: &str,
    values: &Placeholders<'_>,
) -> Result<String, PathTemplateError> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map(|i| open + i).ok_or_else(|| {
            PathTemplateError::Unclosed {
                template: template.to_string(),
            }
        })?;
        let inner = &rest[open + 1..close];
        let (name, width) = match inner.split_once(':') {
            Some((name, spec)) => (name, parse_width(name, spec, template)?),
            None => (inner, 0),
        };
        match name {
            "work" => out.push_str(values.work),
            "unit" => out.push_str(&format!("{:0width$}", values.unit, width = width)),
            "agent" => out.push_str(values.agent),
            "scenario" => out.push_str(values.scenario),
            "purpose" => out.push_str(values.purpose),
            other => {
                return Err(PathTemplateError::UnknownPlaceholder {
                    name: other.to_string(),
                    template: template.to_string(),
                });
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The zero padding of `{unit:03}`: ASCII digits, at most `MAX_WIDTH`.
fn parse_width(name: &str, spec: &str, template: &str) -> Result<usize, PathTemplateError> {
    if name != "unit" {
        return Err(PathTemplateError::WidthNotOnUnit {
            name: name.to_string(),
            spec: spec.to_string(),
            template: template.to_string(),
        });
    }
    let digits = spec.trim_start_matches('0');
    if spec.is_empty() || !spec.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PathTemplateError::BadWidth {
            spec: spec.to_string(),
            template: template.to_string(),
        });
    }
    match digits.parse::<usize>() {
        Ok(width) if width <= MAX_WIDTH => Ok(width),
        _ if digits.is_empty() => Ok(0),
        _ => Err(PathTemplateError::WidthTooLarge {
            spec: spec.to_string(),
            template: template.to_string(),
            limit: MAX_WIDTH,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_placeholders_with_padding() {
        let values = Placeholders {
            work: "书",
            unit: 7,
            agent: "writer",
            scenario: "continuation",
            purpose: "generation",
        };
        assert_eq!(
            expand("works/{work}/评审/第{unit:03}章-{purpose}.md", &values).unwrap(),
            "works/书/评审/第007章-generation.md"
        );
        assert_eq!(
            expand("{agent}/{scenario}/{unit}", &values).unwrap(),
            "writer/continuation/7"
        );
        assert!(expand("{nope}", &values).is_err());
        assert!(expand("{work", &values).is_err());
    }

    #[test]
    fn a_refused_recipe_says_what_and_carries_the_template_error() {
        let template = PathTemplateError::WidthTooLarge {
            spec: "17".into(),
            template: "{unit:17}.md".into(),
            limit: MAX_WIDTH,
        };
        let err = RecipeError::Template {
            key: "unit.file".into(),
            error: template.clone(),
        };
        assert_eq!(
            err.to_string(),
            "bad recipe: unit.file: width '17' in path template '{unit:17}.md' is too large: \
             at most 16 digits"
        );
        let source = std::error::Error::source(&err).expect("the template's error");
        assert_eq!(source.downcast_ref::<PathTemplateError>(), Some(&template));
        let err = RecipeError::NotAName {
            what: "agent",
            name: "a/b".into(),
        };
        assert_eq!(
            err.to_string(),
            "bad recipe: agent 'a/b' is not a name (it fills path templates: no '/', '\\', \
             '..' or empty name)"
        );
        assert!(std::error::Error::source(&err).is_none());
        assert_eq!(
            Recipe::parse("baseline: [").unwrap_err().to_string(),
            format!(
                "bad recipe: {}",
                crate::parse::yaml::from_str::<Recipe>("baseline: [").unwrap_err()
            )
        );
    }

    #[test]
    fn widths_are_bounded_digits_on_unit_only() {
        let values = Placeholders {
            work: "w",
            unit: 7,
            agent: "a",
            scenario: "s",
            purpose: "p",
        };
        assert_eq!(expand("{unit:016}", &values).unwrap(), "0000000000000007");
        assert_eq!(expand("{unit:0}", &values).unwrap(), "7");
        for (template, message) in [
            ("{unit:65536}", "too large: at most 16 digits"),
            ("{unit:17}", "too large"),
            ("{unit:99999999999999999999999}", "too large"),
            ("{unit:+3}", "bad width '+3'"),
            ("{unit:}", "bad width ''"),
            ("{unit:-3}", "bad width '-3'"),
            ("{work:3}", "only {unit} takes a width"),
        ] {
            let err = expand(template, &values).unwrap_err().to_string();
            assert!(err.contains(message), "{template}: {err}");
        }
    }
}

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

/// A template checked to parse.
#[derive(Clone, Debug)]
pub struct PackTemplate {
    name: String,
    source: String,
}

impl PackTemplate {
    /// Reads and parses the template at `path`.
    pub fn load(path: &Path) -> Result<PackTemplate, String> {
        let source = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read template {}: {err}", path.display()))?;
        PackTemplate::parse(&path.display().to_string(), source)
    }

    /// Parses `source`; an error names the line.
    pub fn parse(name: &str, source: String) -> Result<PackTemplate, String> {
        let template = PackTemplate {
            name: name.to_string(),
            source,
        };
        template
            .environment()
            .template_from_str(&template.source)
            .map_err(|err| template.describe(&err))?;
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
    pub fn render(&self, pack: &Pack, actual: usize) -> Result<String, String> {
        let env = self.environment();
        let template = env
            .template_from_str(&self.source)
            .map_err(|err| self.describe(&err))?;
        template
            .render(Value::from(Serde(model(pack, actual))))
            .map_err(|err| self.describe(&err))
    }

    fn describe(&self, err: &minijinja::Error) -> String {
        let what = err
            .detail()
            .map(|detail| format!("{}: {detail}", err.kind()))
            .unwrap_or_else(|| err.kind().to_string());
        match err.line() {
            Some(line) => format!("template {}, line {line}: {what}", self.name),
            None => format!("template {}: {what}", self.name),
        }
    }
}

/// The template's data: the pack's JSON model with the printed text of
/// each page.
pub fn model(pack: &Pack, actual: usize) -> serde_json::Value {
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
                    entry.insert("content".into(), page.shown.body.clone().into());
                    entry.insert("label".into(), page.shown.label.clone().into());
                    entry.insert("shown_summary".into(), page.shown.summary.clone().into());
                }
            }
        }
    }
    value
}

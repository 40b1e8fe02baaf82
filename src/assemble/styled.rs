//! The printed layout of an assembled pack: the seed's markdown, or the
//! same sections as XML or JSON elements. Whatever the style, the system
//! statement and the baseline come first and print the same bytes for every
//! agent of a unit, so the shared prefix survives the style.

use std::fmt::Write as _;

use crate::pack::style::{Style, xml_escape};

/// The sections of a pack, each already rendered as markdown, in the
/// order they are printed.
pub(super) struct Sections<'a> {
    pub system: &'a str,
    pub baseline: &'a str,
    pub identity: &'a str,
    pub chain: &'a str,
    /// Empty when the agent adds nothing to the baseline.
    pub increment: &'a str,
    pub volatile: &'a str,
    pub report: &'a str,
}

/// What the elements of the structured styles are labelled with. Only
/// `recipe`, `work` and `unit` may appear before the baseline: they are the
/// same for every agent of the unit.
pub(super) struct Facts<'a> {
    pub recipe: &'a str,
    pub work: &'a str,
    pub unit: i64,
    pub agent: &'a str,
    pub purpose: &'a str,
    pub scenario: &'a str,
}

pub(super) struct Printed {
    pub text: String,
    /// Bytes of `text` every agent of the unit shares (system + baseline).
    pub shared_prefix: usize,
}

/// Why a style does not apply to `assemble`, if it does not.
pub(super) fn unsupported(style: Style) -> Option<String> {
    (style == Style::Plain).then(|| {
        "--style plain does not fit assemble: its layers, sources and entities are told apart \
         only by their headings; use markdown, xml or json"
            .to_string()
    })
}

pub(super) fn print(style: Style, facts: &Facts, sections: &Sections) -> Printed {
    match style {
        Style::Xml => xml(facts, sections),
        Style::Json => json(facts, sections),
        Style::Markdown | Style::Plain => markdown(sections),
    }
}

fn markdown(s: &Sections) -> Printed {
    let shared_prefix = s.system.len() + s.baseline.len();
    let text = format!(
        "{}{}{}{}{}{}\n---\n\n{}",
        s.system, s.baseline, s.identity, s.chain, s.increment, s.volatile, s.report
    );
    Printed {
        text,
        shared_prefix,
    }
}

/// One part of the pack as the structured styles print it.
struct Element<'a> {
    name: &'static str,
    attributes: Vec<(&'static str, &'a str)>,
    text: &'a str,
}

/// How many elements every agent of the unit shares: system and baseline.
const SHARED_ELEMENTS: usize = 2;

/// The parts in printed order; only those after the shared ones name the
/// agent, so the shared prefix holds in every style.
fn elements<'a>(facts: &Facts<'a>, s: &Sections<'a>) -> Vec<Element<'a>> {
    let element = |name, attributes, text| Element {
        name,
        attributes,
        text,
    };
    let mut all = vec![
        element("system", vec![], s.system),
        element("baseline", vec![], s.baseline),
        element(
            "identity",
            vec![("agent", facts.agent), ("purpose", facts.purpose)],
            s.identity,
        ),
        element("chain", vec![("scenario", facts.scenario)], s.chain),
    ];
    if !s.increment.is_empty() {
        all.push(element("increment", vec![], s.increment));
    }
    all.push(element("volatile", vec![], s.volatile));
    all.push(element("report", vec![], s.report));
    all
}

/// `open`, then each element written by `write` (with `separator` between
/// them), then `close`; the shared prefix ends after the shared elements.
fn structured(
    open: String,
    elements: &[Element],
    separator: &str,
    write: impl Fn(&mut String, &Element),
    close: &str,
) -> Printed {
    let mut out = open;
    let mut shared_prefix = out.len();
    for (i, element) in elements.iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        write(&mut out, element);
        if i + 1 == SHARED_ELEMENTS {
            shared_prefix = out.len();
        }
    }
    out.push_str(close);
    Printed {
        text: out,
        shared_prefix,
    }
}

fn xml(facts: &Facts, s: &Sections) -> Printed {
    let open = format!(
        "<context recipe=\"{}\" work=\"{}\" unit=\"{}\">\n",
        xml_escape(facts.recipe),
        xml_escape(facts.work),
        facts.unit
    );
    let write = |out: &mut String, element: &Element| {
        let _ = write!(out, "<section name=\"{}\"", element.name);
        for (key, value) in &element.attributes {
            let _ = write!(out, " {key}=\"{}\"", xml_escape(value));
        }
        let _ = write!(
            out,
            ">\n{}\n</section>\n",
            xml_escape(element.text.trim_end())
        );
    };
    structured(open, &elements(facts, s), "", write, "</context>\n")
}

/// One JSON object, a section per line, so that the shared prefix ends at
/// a line break.
fn json(facts: &Facts, s: &Sections) -> Printed {
    let quoted = |text: &str| serde_json::Value::from(text).to_string();
    let open = format!(
        "{{\"recipe\":{},\"work\":{},\"unit\":{},\"sections\":[\n",
        quoted(facts.recipe),
        quoted(facts.work),
        facts.unit
    );
    let write = |out: &mut String, element: &Element| {
        let _ = write!(out, "{{\"name\":{}", quoted(element.name));
        for (key, value) in &element.attributes {
            let _ = write!(out, ",{}:{}", quoted(key), quoted(value));
        }
        let _ = write!(out, ",\"text\":{}}}", quoted(element.text.trim_end()));
    };
    structured(open, &elements(facts, s), ",\n", write, "\n]}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FACTS: Facts = Facts {
        recipe: "novel",
        work: "w\"1",
        unit: 3,
        agent: "writer",
        purpose: "generation",
        scenario: "continuation",
    };

    fn sections(increment: &str) -> Sections<'_> {
        Sections {
            system: "System.\n\n",
            baseline: "# Baseline\n\n</section> ]]> & \u{1}\n\n",
            identity: "# Identity\n\n",
            chain: "# Chain\n\n",
            increment,
            volatile: "# Turn\n\n## Intent\n\nWrite.\n",
            report: "# Report\n\n- none\n",
        }
    }

    #[test]
    fn markdown_is_the_sections_joined_with_the_report_rule() {
        let printed = print(Style::Markdown, &FACTS, &sections(""));
        assert_eq!(
            printed.text,
            "System.\n\n# Baseline\n\n</section> ]]> & \u{1}\n\n# Identity\n\n# Chain\n\n\
             # Turn\n\n## Intent\n\nWrite.\n\n---\n\n# Report\n\n- none\n"
        );
        assert_eq!(
            &printed.text[..printed.shared_prefix],
            "System.\n\n# Baseline\n\n</section> ]]> & \u{1}\n\n"
        );
    }

    #[test]
    fn xml_escapes_every_section_and_names_the_agent_after_the_baseline() {
        let printed = print(Style::Xml, &FACTS, &sections("# More\n\n"));
        assert_eq!(
            printed.text,
            "<context recipe=\"novel\" work=\"w&quot;1\" unit=\"3\">\n\
             <section name=\"system\">\nSystem.\n</section>\n\
             <section name=\"baseline\">\n# Baseline\n\n&lt;/section&gt; ]]&gt; &amp; \u{fffd}\n</section>\n\
             <section name=\"identity\" agent=\"writer\" purpose=\"generation\">\n# Identity\n</section>\n\
             <section name=\"chain\" scenario=\"continuation\">\n# Chain\n</section>\n\
             <section name=\"increment\">\n# More\n</section>\n\
             <section name=\"volatile\">\n# Turn\n\n## Intent\n\nWrite.\n</section>\n\
             <section name=\"report\">\n# Report\n\n- none\n</section>\n\
             </context>\n"
        );
        assert!(printed.text[..printed.shared_prefix].ends_with("</section>\n"));
        assert!(!printed.text[..printed.shared_prefix].contains("writer"));
    }

    #[test]
    fn json_is_one_object_whose_sections_keep_their_text() {
        let printed = print(Style::Json, &FACTS, &sections(""));
        let value: serde_json::Value = serde_json::from_str(&printed.text).unwrap();
        let names: Vec<&str> = value["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "system", "baseline", "identity", "chain", "volatile", "report"
            ]
        );
        assert_eq!(
            value["sections"][1]["text"],
            "# Baseline\n\n</section> ]]> & \u{1}"
        );
        assert_eq!(value["sections"][2]["agent"], "writer");
        assert_eq!(value["work"], "w\"1");
        assert!(printed.text[..printed.shared_prefix].ends_with('}'));
    }

    #[test]
    fn plain_is_refused() {
        assert!(unsupported(Style::Plain).is_some());
        for style in [Style::Markdown, Style::Xml, Style::Json] {
            assert!(unsupported(style).is_none());
        }
    }
}

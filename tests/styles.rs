//! Output styles and user templates: exact text, XML a parser accepts
//! whatever the notes hold, and the budget kept by every layout.

mod common;

use common::{World, fails, ok, stdout, write};

/// The count of `text` under chars4, the default counter (a CJK character counts whole: the
/// example vault has Chinese notes).
fn chars4(text: &str) -> usize {
    ctxpack::Tokenizer::Chars4.count(text)
}

fn styled(world: &World, vault: &std::path::Path, style: &str, args: &[&str]) -> String {
    ok(&world.pack(vault, &[args, &["--style", style]].concat()))
}

#[test]
fn xml_style() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = styled(
        &world,
        &vault,
        "xml",
        &["raft consensus", "--budget", "1500"],
    );
    insta::assert_snapshot!(out);
}

#[test]
fn plain_style() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = styled(
        &world,
        &vault,
        "plain",
        &["raft consensus", "--budget", "1500"],
    );
    insta::assert_snapshot!(out);
}

#[test]
fn json_style() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = styled(
        &world,
        &vault,
        "json",
        &["raft consensus", "--budget", "1500"],
    );
    insta::assert_snapshot!(out);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["actual"].as_u64().unwrap() as usize, chars4(&out));
}

#[test]
fn markdown_is_the_default_byte_for_byte() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let plain = ok(&world.pack(&vault, &["raft consensus"]));
    let markdown = styled(&world, &vault, "markdown", &["raft consensus"]);
    assert_eq!(plain, markdown);
    // --format json still reports the pack; its bundle is the text printed
    // in the chosen style.
    let report: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &["raft consensus", "--format", "json", "--style", "xml"],
    )))
    .unwrap();
    let xml = styled(&world, &vault, "xml", &["raft consensus"]);
    assert_eq!(report["bundle"].as_str().unwrap(), xml);
    assert_eq!(report["actual"].as_u64().unwrap() as usize, chars4(&xml));
}

#[test]
fn the_empty_pack_in_each_style() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let topic = ["sourdough starter"];
    assert_eq!(
        styled(&world, &vault, "plain", &topic),
        "Context Pack: sourdough starter\n\nNo relevant pages found. Consider running \
         /wiki-ingest to add sources about this topic.\n"
    );
    let xml = styled(&world, &vault, "xml", &topic);
    let document = roxmltree::Document::parse(&xml).unwrap();
    let root = document.root_element();
    assert_eq!(root.attribute("pages"), Some("0"));
    assert_eq!(
        root.attribute("actual"),
        Some(chars4(&xml).to_string().as_str())
    );
    assert_eq!(
        root.first_element_child().unwrap().text(),
        Some(
            "No relevant pages found. Consider running /wiki-ingest to add sources about this topic."
        )
    );
}

/// A note whose text would break naive XML: closing tags, CDATA ends,
/// entities and control characters.
const HOSTILE: &str = "---\ntitle: \"Raft <b>&</b> \\\"quotes\\\"\"\ntags: [raft]\nsummary: \"raft ]]> and </summary>\"\n---\nRaft text `</document>` and </document_content> `</documents>` here.\n\n`<![CDATA[ raft ]]>` &amp; &lt; \u{1}\u{8} raft\n\n```xml\n<document index=\"9\"><source>x</source></document>\n```\n";

#[test]
fn xml_survives_notes_that_look_like_its_markup() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("concepts/raft.md", HOSTILE),
            (
                "concepts/other.md",
                "---\ntags: [raft]\n---\nRaft, a second note.\n",
            ),
        ],
    );
    let xml = styled(&world, &vault, "xml", &["raft", "--budget", "4000"]);
    let document = roxmltree::Document::parse(&xml).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "documents");
    let documents: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(documents.len(), 2, "{xml}");
    let raft = documents
        .iter()
        .find(|d| {
            d.children()
                .any(|c| c.has_tag_name("source") && c.text() == Some("concepts/raft.md"))
        })
        .unwrap();
    let child = |name: &str| {
        raft.children()
            .find(|c| c.has_tag_name(name))
            .and_then(|c| c.text())
            .unwrap()
            .to_string()
    };
    assert_eq!(child("title"), "Raft <b>&</b> \"quotes\"");
    assert_eq!(child("summary"), "raft ]]> and </summary>");
    let content = child("document_content");
    // Raw HTML is shown as a reader sees it (not at all), so the markup
    // that must survive escaping sits in code spans and blocks.
    assert!(
        content.contains("Raft text `</document>` and </document_content> `</documents>` here."),
        "{content}"
    );
    assert!(
        // The note's character references read as their characters
        // (`&amp;` as `&`; `&lt;`, which would become markup, as written),
        // escaped again by the XML writer.
        content.contains("`<![CDATA[ raft ]]>` & &lt; \u{fffd}\u{fffd} raft"),
        "{content}"
    );
    assert!(content.contains("<document index=\"9\"><source>x</source></document>"));
}

#[test]
fn every_style_keeps_every_budget_and_prints_its_true_size() {
    let world = World::new();
    let vault = world.example_vault("vault");
    for budget in [40, 120, 300, 800, 3000] {
        let budget_text = budget.to_string();
        let markdown_pages = {
            let out = ok(&world.pack(
                &vault,
                &[
                    "raft consensus",
                    "--budget",
                    &budget_text,
                    "--format",
                    "json",
                ],
            ));
            let value: serde_json::Value = serde_json::from_str(&out).unwrap();
            value["pages"].as_array().unwrap().len()
        };
        for style in ["xml", "plain", "json"] {
            let args = [
                "raft consensus",
                "--budget",
                &budget_text,
                "--style",
                style,
                "--format",
                "json",
            ];
            let report: serde_json::Value =
                serde_json::from_str(&ok(&world.pack(&vault, &args))).unwrap();
            let text = report["bundle"].as_str().unwrap();
            let counted = chars4(text);
            assert!(counted <= budget, "{style} {budget}: {counted}\n{text}");
            assert_eq!(report["actual"].as_u64().unwrap() as usize, counted);
            let pages = report["pages"].as_array().unwrap().len();
            assert!(pages <= markdown_pages, "{style} {budget}");
            assert_eq!(
                pages + report["pages_dropped"].as_u64().unwrap() as usize,
                report["candidates"].as_u64().unwrap() as usize
            );
            if !text.is_empty() {
                let printed = match style {
                    "xml" => format!("budget=\"{budget}\" actual=\"{counted}\""),
                    "plain" => format!("Actual: {counted} tokens"),
                    _ => format!("\"actual\": {counted},"),
                };
                assert!(text.contains(&printed), "{style} {budget}\n{text}");
            }
        }
    }
}

#[test]
fn styles_are_byte_identical_on_repeated_runs() {
    let world = World::new();
    let vault = world.example_vault("vault");
    for style in ["xml", "plain", "json"] {
        let first = styled(
            &world,
            &vault,
            style,
            &["raft consensus", "--budget", "900"],
        );
        let second = styled(
            &world,
            &vault,
            style,
            &["raft consensus", "--budget", "900"],
        );
        assert_eq!(first, second, "{style}");
    }
}

#[test]
fn an_unknown_style_is_a_usage_error() {
    let world = World::new();
    let vault = world.example_vault("vault");
    fails(
        &world.pack(&vault, &["raft", "--style", "html"]),
        2,
        "unknown style 'html'",
    );
}

// ---------------------------------------------------------------- templates

fn two_note_vault(world: &World) -> std::path::PathBuf {
    world.vault(
        "vault",
        &[
            (
                "concepts/raft.md",
                "---\ntitle: Raft\ntier: core\ntags: [consensus]\nsummary: \"Leader-based consensus.\"\n---\nRaft elects a leader and replicates a log.\n",
            ),
            (
                "concepts/paxos.md",
                "---\ntitle: Paxos\ntags: [consensus]\nsummary: \"The classic consensus protocol.\"\n---\nPaxos agrees on one value; raft is its cousin.\n",
            ),
        ],
    )
}

#[test]
fn a_template_prints_the_pack_model() {
    let world = World::new();
    let vault = two_note_vault(&world);
    let template = world.path().join("prompt.j2");
    write(
        &template,
        b"<context topic=\"{{ topic }}\" size=\"{{ actual }}/{{ budget }}\">\n\
{% for page in pages %}\n\
[{{ loop.index }}] {{ page.title }} ({{ page.label }}) {{ page.path }}\n\
{{ page.content }}\n\
{% endfor %}\n\
</context>\n",
    );
    let template = template.to_str().unwrap();
    let out = ok(&world.pack(&vault, &["raft", "--template", template]));
    let size = chars4(&out);
    assert_eq!(
        out,
        format!(
            "<context topic=\"raft\" size=\"{size}/8000\">\n\
[1] Raft (core) concepts/raft.md\n\
Raft elects a leader and replicates a log.\n\
[2] Paxos (supporting) concepts/paxos.md\n\
Paxos agrees on one value; raft is its cousin.\n\
</context>\n"
        )
    );
    let again = ok(&world.pack(&vault, &["raft", "--template", template]));
    assert_eq!(again, out);
}

#[test]
fn template_errors_name_the_line() {
    let world = World::new();
    let vault = two_note_vault(&world);
    let broken = world.path().join("broken.j2");
    write(
        &broken,
        b"first line\n{% for page in pages %}\n{{ page.title }\n{% endfor %}\n",
    );
    let output = world.pack(&vault, &["raft", "--template", broken.to_str().unwrap()]);
    fails(&output, 2, "line 3");
    fails(&output, 2, "syntax error");
    let failing = world.path().join("failing.j2");
    write(
        &failing,
        b"ok\n{% for page in pages %}\n{{ page.no_such_field }}\n{% endfor %}\n",
    );
    let output = world.pack(&vault, &["raft", "--template", failing.to_str().unwrap()]);
    fails(&output, 2, "line 3");
    fails(&output, 2, "undefined");
    let missing = world.path().join("missing.j2");
    fails(
        &world.pack(&vault, &["raft", "--template", missing.to_str().unwrap()]),
        2,
        "cannot read template",
    );
}

#[test]
fn a_template_keeps_the_budget_by_reserving_its_text_and_dropping_pages() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let template = world.path().join("heavy.j2");
    // Fixed text of its own plus a heavy block per page: the packer knows
    // neither, so the pages must be chosen again or dropped.
    let mut source = String::from("SIZE {{ actual }}\n");
    source.push_str(&"Instructions for the agent, repeated. ".repeat(20));
    source.push_str("\n{% for page in pages %}\n");
    source.push_str(&"=".repeat(300));
    source.push_str("\n{{ page.path }}\n{{ page.content }}\n{% endfor %}\n");
    write(&template, source.as_bytes());
    let template = template.to_str().unwrap();
    for budget in [100, 400, 1200, 4000] {
        let budget_text = budget.to_string();
        let args = [
            "raft consensus",
            "--budget",
            &budget_text,
            "--template",
            template,
        ];
        let out = ok(&world.pack(&vault, &args));
        let counted = chars4(&out);
        assert!(counted <= budget, "{budget}: {counted}");
        if !out.is_empty() {
            assert!(out.starts_with(&format!("SIZE {counted}\n")), "{budget}");
        }
        let report: serde_json::Value = serde_json::from_str(&ok(
            &world.pack(&vault, &[&args[..], &["--format", "json"]].concat())
        ))
        .unwrap();
        assert_eq!(report["bundle"].as_str().unwrap(), out);
    }
    // 100 tokens cannot hold the template's own text: nothing is printed.
    let out = ok(&world.pack(
        &vault,
        &["raft consensus", "--budget", "100", "--template", template],
    ));
    assert_eq!(out, "");
}

#[test]
fn template_and_style_do_not_mix() {
    let world = World::new();
    let vault = two_note_vault(&world);
    let template = world.path().join("t.j2");
    write(&template, b"{{ title }}\n");
    fails(
        &world.pack(
            &vault,
            &[
                "raft",
                "--style",
                "xml",
                "--template",
                template.to_str().unwrap(),
            ],
        ),
        2,
        "cannot be used with",
    );
}

#[test]
fn templates_that_would_exhaust_the_stack_are_usage_errors() {
    let world = World::new();
    let vault = two_note_vault(&world);
    let path = world.path().join("hostile.j2");
    let run = |source: String| {
        write(&path, source.as_bytes());
        world.pack(&vault, &["raft", "--template", path.to_str().unwrap()])
    };
    // Each of these overflowed minijinja's recursion and aborted (exit 134).
    let output = run(format!("{{{{ {} }}}}\n", vec!["topic"; 30_000].join(" ~ ")));
    fails(
        &output,
        2,
        "line 1: a tag chains 29999 operators; at most 200 are allowed",
    );
    let output = run(format!("{{{{ {}1 }}}}\n", "- ".repeat(100_000)));
    fails(&output, 2, "a tag chains 100000 operators");
    let output = run(format!(
        "{{{{ {}1{} }}}}\n",
        "[".repeat(50_000),
        "]".repeat(50_000)
    ));
    fails(&output, 2, "brackets nest 50000 deep; at most 32 levels");
    let output = run(format!("{{{{ {} }}}}\n", vec!["1"; 100_000].join(" + ")));
    fails(
        &output,
        2,
        "400004 bytes is too large; a template may hold at most 262144 bytes",
    );
    assert!(stdout(&output).is_empty());
}

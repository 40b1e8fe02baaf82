//! Invariants over random vaults: the pack never exceeds its budget, its
//! printed size is its true size, and it is deterministic.

use chrono::{TimeZone, Utc};
use ctxpack::NoteAnchor;
use ctxpack::PackTemplate;
use ctxpack::RankOptions;
use ctxpack::{IndexChoice, ModelChoice, PackRequest, Ranker, Session};
use ctxpack::{PackMode, PackOptions, Tokenizer, Vault, build_pack};
use ctxpack::{Shape, Style};
use proptest::prelude::*;

const WORDS: &[&str] = &[
    "raft",
    "paxos",
    "leader",
    "quorum",
    "log",
    "replica",
    "commit",
    "clock",
    "gossip",
    "shard",
    "分布式",
    "事务",
    "共识",
    "日志",
    "a",
    "the",
    "of",
];

fn words(count: std::ops::Range<usize>) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), count).prop_map(|w| w.join(" "))
}

fn paragraph() -> impl Strategy<Value = String> {
    words(3..40).prop_map(|w| format!("{w}."))
}

#[derive(Debug, Clone)]
struct NoteSpec {
    title: Option<String>,
    tier: Option<&'static str>,
    tags: Vec<&'static str>,
    summary: Option<String>,
    paragraphs: Vec<String>,
    key_ideas: Vec<String>,
    links: Vec<usize>,
    sources: bool,
    empty_heading: bool,
}

fn note_spec() -> impl Strategy<Value = NoteSpec> {
    (
        prop::option::of(words(1..3)),
        prop::option::of(prop::sample::select(
            &["core", "supporting", "peripheral", "bogus"][..],
        )),
        prop::collection::vec(prop::sample::select(WORDS), 0..3),
        prop::option::of(words(2..12)),
        prop::collection::vec(paragraph(), 0..6),
        prop::collection::vec(words(2..10), 0..4),
        prop::collection::vec(0usize..12, 0..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(title, tier, tags, summary, paragraphs, key_ideas, links, sources, empty_heading)| {
                NoteSpec {
                    title,
                    tier,
                    tags,
                    summary,
                    paragraphs,
                    key_ideas,
                    links,
                    sources,
                    empty_heading,
                }
            },
        )
}

fn render_note(spec: &NoteSpec, count: usize, shared: &str) -> String {
    let mut text = String::from("---\n");
    if let Some(title) = &spec.title {
        text.push_str(&format!("title: \"{title}\"\n"));
    }
    if let Some(tier) = spec.tier {
        text.push_str(&format!("tier: {tier}\n"));
    }
    if !spec.tags.is_empty() {
        text.push_str(&format!("tags: [{}]\n", spec.tags.join(", ")));
    }
    if let Some(summary) = &spec.summary {
        text.push_str(&format!("summary: \"{summary}\"\n"));
    }
    text.push_str("updated: 2026-05-01\n---\n");
    for paragraph in &spec.paragraphs {
        text.push_str(paragraph);
        for link in &spec.links {
            text.push_str(&format!(" [[n{}]]", link % count));
        }
        text.push_str("\n\n");
    }
    text.push_str(shared);
    text.push_str("\n\n");
    if spec.empty_heading {
        text.push_str("## Nothing here\n\n");
    }
    if !spec.key_ideas.is_empty() {
        text.push_str("## Key Ideas\n\n");
        for idea in &spec.key_ideas {
            text.push_str(&format!("- {idea}\n"));
        }
        text.push('\n');
    }
    if spec.sources {
        text.push_str("## Sources\n\n- first source\n- [[n0|second]]\n");
    }
    text
}

fn files_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
    (prop::collection::vec(note_spec(), 1..12), paragraph()).prop_map(|(specs, shared)| {
        let count = specs.len();
        let mut files: Vec<(String, String)> = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let name = if i % 3 == 2 {
                    format!("daily/2026-05-{:02}.md", i + 1)
                } else {
                    format!("n{i}.md")
                };
                (name, render_note(spec, count, &shared))
            })
            .collect();
        files.push((
            "index.md".into(),
            (0..count)
                .map(|i| format!("- [[n{i}]] — raft entry {i}\n"))
                .collect(),
        ));
        files.push(("hot.md".into(), "- [[n0]]\n".into()));
        files
    })
}

fn vault_strategy() -> impl Strategy<Value = Vault> {
    files_strategy().prop_map(|files| Vault::from_texts("/vault".into(), &files))
}

fn options(budget: usize, tokenizer: Tokenizer) -> PackOptions {
    PackOptions::new(
        budget,
        tokenizer,
        Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn never_over_budget_and_actual_is_true(
        vault in vault_strategy(),
        topic in prop::option::of(words(1..4)),
        budget in prop_oneof![1usize..200, 200usize..3000, Just(100_000usize)],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let mode = match topic {
            Some(topic) => PackMode::Topic(topic),
            None => PackMode::Recent,
        };
        let pack = build_pack(&vault, &mode, &options(budget, tokenizer));
        let counted = tokenizer.count(&pack.bundle);
        prop_assert!(counted <= budget, "{counted} > {budget}\n{}", pack.bundle);
        prop_assert_eq!(counted, pack.actual);
        if !pack.pages.is_empty() {
            let header = format!("| Actual: {} tokens |", pack.actual);
            prop_assert!(pack.bundle.contains(&header));
        }
        prop_assert_eq!(pack.pages.len() + pack.pages_dropped, pack.candidates);
        let again = build_pack(&vault, &mode, &options(budget, tokenizer));
        prop_assert_eq!(&again.bundle, &pack.bundle);
    }

    #[test]
    fn query_aware_packs_never_exceed_the_budget(
        vault in vault_strategy(),
        topic in prop::option::of(words(1..4)),
        subqueries in prop::collection::vec(words(1..3), 0..3),
        dailies in 0usize..4,
        budget in prop_oneof![1usize..300, 300usize..3000],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let session = Session::without_index(vault);
        let (mode, subqueries) = match topic {
            Some(topic) => (PackMode::Topic(topic), subqueries),
            None => (PackMode::Recent, Vec::new()),
        };
        let request = PackRequest {
            mode,
            ranker: Ranker::Hybrid,
            rank: RankOptions::new(Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap()),
            options: PackOptions { dailies, ..options(budget, tokenizer) },
            subqueries,
            backlinks: true,
            filter: Default::default(),
        };
        let pack = session.pack(&request);
        let counted = tokenizer.count(&pack.bundle);
        prop_assert!(counted <= budget, "{counted} > {budget}\n{}", pack.bundle);
        prop_assert_eq!(counted, pack.actual);
        prop_assert_eq!(pack.pages.len() + pack.pages_dropped, pack.candidates);
        prop_assert_eq!(&session.pack(&request).bundle, &pack.bundle);
        // Every daily asked for is a page, a daily, or counted as dropped.
        // Newest first, ties by path, as the packer orders them.
        let mut recent: Vec<(&str, &str)> = session
            .vault
            .metas
            .iter()
            .filter_map(|m| m.daily.as_deref().map(|day| (day, m.path.as_str())))
            .collect();
        recent.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(b.1)));
        let shown = recent
            .iter()
            .take(dailies)
            .filter(|&&(_, path)| {
                pack.pages.iter().chain(&pack.dailies).any(|p| p.path == path)
            })
            .count();
        prop_assert_eq!(
            shown + pack.dailies_dropped,
            dailies.min(recent.len()),
            "{}",
            pack.bundle
        );
    }
}

/// Text made of the characters that Markdown, YAML and Obsidian syntax
/// react to, so that odd combinations come up often.
fn markdownish() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("---\n"),
            Just("#"),
            Just("# "),
            Just("## Key Ideas\n"),
            Just("## Sources\n"),
            Just("[["),
            Just("]]"),
            Just("|"),
            Just("!"),
            Just("`"),
            Just("```\n"),
            Just("- "),
            Just("\n"),
            Just("\n\n"),
            Just(" "),
            Just("raft"),
            Just("分布式"),
            Just("%%"),
            Just("^"),
            Just(":"),
            Just("title: "),
            Just("tags: ["),
            Just("\""),
            Just("\r\n"),
            Just("[x](y.md)"),
            Just("<div>"),
            Just("> "),
            Just("1. "),
            Just("\u{feff}"),
            Just("</document>"),
            Just("]]>"),
            Just("&amp;"),
            Just("\u{1}"),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_text_parses_and_packs_within_budget(
        texts in prop::collection::vec(markdownish(), 1..6),
        budget in 1usize..1500,
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let files: Vec<(String, String)> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| (format!("d{}/n{i}.md", i % 2), text.clone()))
            .collect();
        let vault = Vault::from_texts("/vault".into(), &files);
        for mode in [PackMode::Topic("raft".into()), PackMode::Recent] {
            let pack = build_pack(&vault, &mode, &options(budget, tokenizer));
            let counted = tokenizer.count(&pack.bundle);
            prop_assert!(counted <= budget);
            prop_assert_eq!(counted, pack.actual);
        }
        let session = Session::without_index(vault);
        let request = PackRequest::new(PackMode::Topic("raft".into()), options(budget, tokenizer));
        let pack = session.pack_shaped(&request, &Shape::Style(Style::Xml)).unwrap();
        prop_assert!(tokenizer.count(&pack.bundle) <= budget);
        if !pack.bundle.is_empty() {
            let parsed = roxmltree::Document::parse(&pack.bundle);
            prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), pack.bundle);
        }
    }
}

/// A template with text of its own and per page, as a user would write.
const TEMPLATE: &str = "<context size=\"{{ actual }}\">\n{% for page in pages %}\n## {{ page.title }} [{{ page.label }}]\n{{ page.shown_summary }}\n{{ page.content }}\n{% endfor %}\n{% for page in dailies %}\n## {{ page.path }}\n{{ page.content }}\n{% endfor %}\n</context>\n";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Every style and a template: never over budget, `actual` is the true
    /// size, XML parses, the same input prints the same bytes.
    #[test]
    fn every_style_and_template_keeps_the_budget(
        vault in vault_strategy(),
        topic in prop::option::of(words(1..4)),
        dailies in 0usize..3,
        budget in prop_oneof![1usize..300, 300usize..3000],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let session = Session::without_index(vault);
        let mode = match topic {
            Some(topic) => PackMode::Topic(topic),
            None => PackMode::Recent,
        };
        let request = PackRequest::new(mode, PackOptions { dailies, ..options(budget, tokenizer) });
        let template = PackTemplate::parse("t", TEMPLATE.to_string()).unwrap();
        let shapes = Style::ALL
            .into_iter()
            .map(Shape::Style)
            .chain([Shape::Template(std::sync::Arc::new(template))]);
        for shape in shapes {
            let pack = session.pack_shaped(&request, &shape).unwrap();
            let counted = tokenizer.count(&pack.bundle);
            prop_assert!(counted <= budget, "{shape:?} {counted} > {budget}\n{}", pack.bundle);
            prop_assert_eq!(counted, pack.actual, "{:?}", shape);
            prop_assert_eq!(pack.pages.len() + pack.pages_dropped, pack.candidates);
            let again = session.pack_shaped(&request, &shape).unwrap();
            prop_assert_eq!(&again.bundle, &pack.bundle);
            if matches!(shape, Shape::Style(Style::Xml)) && !pack.bundle.is_empty() {
                let parsed = roxmltree::Document::parse(&pack.bundle);
                prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), pack.bundle);
                let documents = parsed.unwrap().root_element().children().filter(|n| n.has_tag_name("document")).count();
                prop_assert_eq!(documents, pack.pages.len() + pack.dailies.len());
            }
            let shows_pages = !(pack.pages.is_empty() && pack.dailies.is_empty());
            if shows_pages && !matches!(shape, Shape::Style(Style::Markdown)) {
                let printed = match &shape {
                    Shape::Style(Style::Xml) => format!("actual=\"{counted}\""),
                    Shape::Style(Style::Plain) => format!("Actual: {counted} tokens"),
                    Shape::Style(Style::Json) => format!("\"actual\": {counted},"),
                    _ => format!("<context size=\"{counted}\">"),
                };
                prop_assert!(pack.bundle.contains(&printed), "{:?}\n{}", shape, pack.bundle);
            }
        }
    }
}

proptest! {
    // Each case writes a vault and builds its index (links need it).
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Note-anchored packs, at every depth, with and without the note
    /// itself: never over budget, `actual` true, deterministic, the note
    /// shown only when asked for.
    #[test]
    fn note_packs_never_exceed_the_budget(
        files in files_strategy(),
        anchor in 0usize..12,
        depth in 0usize..=3,
        include_self in any::<bool>(),
        budget in prop_oneof![1usize..300, 300usize..3000],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vault");
        for (path, text) in &files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let session = Session::open(
            &root,
            &IndexChoice {
                dir: Some(dir.path().join("index")),
                model: ModelChoice::Off,
                ..IndexChoice::default()
            },
        )
        .unwrap();
        let notes = &session.vault.metas;
        let path = notes[anchor % notes.len()].path.clone();
        prop_assert_eq!(session.anchor_note(&path).unwrap(), path.clone());
        let request = PackRequest::new(
            PackMode::Note(NoteAnchor { path: path.clone(), depth, include_self }),
            options(budget, tokenizer),
        );
        let pack = session.pack(&request);
        let counted = tokenizer.count(&pack.bundle);
        prop_assert!(counted <= budget, "{counted} > {budget}\n{}", pack.bundle);
        prop_assert_eq!(counted, pack.actual);
        prop_assert_eq!(pack.pages.len() + pack.pages_dropped, pack.candidates);
        prop_assert_eq!(&session.pack(&request).bundle, &pack.bundle);
        prop_assert!(pack.signal_errors.is_empty(), "{:?}", pack.signal_errors);
        let shown = pack.pages.iter().any(|p| p.path == path);
        prop_assert!(include_self || !shown);
        if shown {
            prop_assert_eq!(&pack.pages[0].path, &path);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Pins, notes left out and fences (issue 41), in every style and
    /// counter: never over budget, `actual` true, deterministic; the pins
    /// open the pack in their order within half the budget, a note left
    /// out never shows, and a fenced pack fences every page with one id.
    #[test]
    fn fenced_and_pinned_packs_keep_the_budget_in_every_style(
        vault in vault_strategy(),
        topic in words(1..4),
        pin_picks in prop::collection::vec(0usize..12, 0..3),
        exclude_picks in prop::collection::vec(0usize..12, 0..3),
        fence in any::<bool>(),
        dailies in 0usize..3,
        budget in prop_oneof![1usize..300, 300usize..3000],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let session = Session::without_index(vault);
        let paths: Vec<String> = session.vault.metas.iter().map(|m| m.path.clone()).collect();
        let pick = |picks: &[usize]| -> Vec<String> {
            let mut chosen: Vec<String> = Vec::new();
            for &i in picks {
                let path = paths[i % paths.len()].clone();
                if !chosen.contains(&path) {
                    chosen.push(path);
                }
            }
            chosen
        };
        let pins = pick(&pin_picks);
        let exclude = pick(&exclude_picks);
        let request = PackRequest::new(
            PackMode::Topic(topic),
            PackOptions {
                dailies,
                pins: pins.clone(),
                exclude: exclude.clone(),
                fence,
                ..options(budget, tokenizer)
            },
        );
        let template = PackTemplate::parse("t", TEMPLATE.to_string()).unwrap();
        let shapes = Style::ALL
            .into_iter()
            .map(Shape::Style)
            .chain([Shape::Template(std::sync::Arc::new(template))]);
        for shape in shapes {
            let pack = session.pack_shaped(&request, &shape).unwrap();
            let counted = tokenizer.count(&pack.bundle);
            prop_assert!(counted <= budget, "{shape:?} {counted} > {budget}\n{}", pack.bundle);
            prop_assert_eq!(counted, pack.actual, "{:?}", shape);
            prop_assert_eq!(pack.pages.len() + pack.pages_dropped, pack.candidates);
            prop_assert_eq!(&session.pack_shaped(&request, &shape).unwrap().bundle, &pack.bundle);
            for page in pack.pages.iter().chain(&pack.dailies) {
                prop_assert!(!exclude.contains(&page.path), "{} was left out\n{}", page.path, pack.bundle);
            }
            // The pins shown are the first pages, in pin order.
            let pinned: Vec<&str> = pack
                .pages
                .iter()
                .take_while(|p| p.shown.label == "pinned")
                .map(|p| p.path.as_str())
                .collect();
            prop_assert!(pack.pages.iter().skip(pinned.len()).all(|p| p.shown.label != "pinned"));
            let wanted: Vec<&str> = pins
                .iter()
                .filter(|p| !exclude.contains(p))
                .map(String::as_str)
                .filter(|p| pinned.contains(p))
                .collect();
            prop_assert_eq!(&pinned, &wanted);
            if matches!(shape, Shape::Style(Style::Markdown)) {
                let pin_tokens: usize = pack.pages.iter().take(pinned.len()).map(|p| p.tokens).sum();
                // Each page's figure is rounded on its own (chars4).
                prop_assert!(pin_tokens <= budget / 2 + pinned.len(), "{pin_tokens}\n{}", pack.bundle);
                let shown = pack.pages.len() + pack.dailies.len();
                if fence && shown > 0 {
                    let id = pack.fence.clone().unwrap();
                    prop_assert_eq!(pack.bundle.matches(&format!("\n«vault {id}»\n")).count(), shown);
                    prop_assert_eq!(pack.bundle.matches(&format!("\n«/vault {id}»\n")).count(), shown);
                    let notice = format!("# Fenced: text between «vault {id}»");
                    prop_assert!(pack.bundle.contains(&notice), "{}", pack.bundle);
                } else {
                    prop_assert!(!pack.bundle.contains("«vault"), "{}", pack.bundle);
                }
            }
            if matches!(shape, Shape::Style(Style::Xml)) && !pack.bundle.is_empty() {
                let parsed = roxmltree::Document::parse(&pack.bundle);
                prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), pack.bundle);
            }
        }
    }

    /// The vault map in every style and counter, fenced or not: never over
    /// budget, `actual` true, deterministic, XML parses.
    #[test]
    fn the_vault_map_keeps_the_budget_in_every_style(
        vault in vault_strategy(),
        fence in any::<bool>(),
        budget in prop_oneof![1usize..120, 120usize..2000],
        tokenizer in prop::sample::select(&Tokenizer::ALL[..]),
    ) {
        let session = Session::without_index(vault);
        let request = PackRequest::new(
            PackMode::Map,
            PackOptions { fence, ..options(budget, tokenizer) },
        );
        let template = PackTemplate::parse("t", "{{ title }} {{ actual }}\n{% for f in folders %}{{ f.path }} {{ f.notes }}\n{% endfor %}".to_string()).unwrap();
        let shapes = Style::ALL
            .into_iter()
            .map(Shape::Style)
            .chain([Shape::Template(std::sync::Arc::new(template))]);
        for shape in shapes {
            let pack = session.pack_shaped(&request, &shape).unwrap();
            let counted = tokenizer.count(&pack.bundle);
            prop_assert!(counted <= budget, "{shape:?} {counted} > {budget}\n{}", pack.bundle);
            prop_assert_eq!(counted, pack.actual, "{:?}", shape);
            prop_assert_eq!(&session.pack_shaped(&request, &shape).unwrap().bundle, &pack.bundle);
            if !pack.bundle.is_empty() {
                prop_assert!(pack.bundle.contains(&pack.actual.to_string()), "{:?}\n{}", shape, pack.bundle);
            }
            if matches!(shape, Shape::Style(Style::Xml)) && !pack.bundle.is_empty() {
                let parsed = roxmltree::Document::parse(&pack.bundle);
                prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), pack.bundle);
            }
        }
    }
}

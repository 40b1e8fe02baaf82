//! Vaults as Obsidian users write them (no `title:` fields, block ids,
//! callouts, badges, HTML, embeds): what a pack shows is what they read.

mod common;

use common::{World, ok};

/// A small plugin-documentation vault with the noise real vaults carry.
/// Written for these tests; no text comes from a real vault.
const PLUGIN_VAULT: &[(&str, &str)] = &[
    (
        "plugins/Tidy Sync.md",
        "# Overview\n\
         \n\
         [![build](https://img.shields.io/badge/build-passing-green)](https://ci.example.org/tidy-sync/builds/main) \
         ![downloads](https://img.shields.io/badge/downloads-12k-blue)\n\
         \n\
         %% template: fill in the summary below %%\n\
         \n\
         Tidy Sync mirrors a vault to a [remote folder](https://docs.example.org/tidy-sync/guide/remote-folders.html) \
         on a schedule. ^intro\n\
         \n\
         ![sync diagram](attachments/sync.png)\n\
         \n\
         status:: stable\n\
         \n\
         > [!warning]- Conflicts\n\
         > Two edits of one note keep both copies. ^conflict\n\
         \n\
         ## Setup\n\
         \n\
         Install it from [[Community plugins|the plugin browser]] and read [[Sync basics|the basics]].\n\
         Source at <https://code.example.org/tidy-sync> and [site](https://tidy.example).\n\
         \n\
         ```yaml\n\
         interval: 15 ^keep\n\
         url: https://img.shields.io/badge/x\n\
         ```\n\
         \n\
         <div align=\"center\">\n\
         <a href=\"https://code.example.org/tidy-sync/edit/main/docs/plugins/Tidy%20Sync.md\">Edit</a> | \
         <a href=\"https://code.example.org/tidy-sync/raw/main/docs/plugins/Tidy%20Sync.md\">Download</a>\n\
         </div>\n",
    ),
    (
        "plugins/Sync basics.md",
        "# Sync basics\n\nA sync copies a vault's notes to a remote folder on a schedule.\n",
    ),
];

#[test]
fn titles_come_from_file_names_and_noise_is_left_out() {
    let world = World::new();
    let vault = world.vault("plugins", PLUGIN_VAULT);
    let out = ok(&world.pack(&vault, &["tidy sync schedule", "--budget", "2000"]));
    insta::assert_snapshot!(out);
}

#[test]
fn search_finds_a_note_by_its_first_heading() {
    let world = World::new();
    let vault = world.vault("plugins", PLUGIN_VAULT);
    let out = ok(&world
        .cmd()
        .args(["search", "overview", "--format", "json", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let first = &json["hits"][0];
    assert_eq!(first["path"], "plugins/Tidy Sync.md", "{json}");
    assert_eq!(first["title"], "Tidy Sync", "{json}");
}

/// Notes that embed each other: a heading, a block, a cycle, a missing
/// note, an image, and one too large for a small pack.
const EMBED_VAULT: &[(&str, &str)] = &[
    (
        "Hub.md",
        "Embeds gathered on one page.\n\
         \n\
         ![[Glossary#Quorum]]\n\
         \n\
         - Claim: ![[Claims#^c2]]\n\
         \n\
         ![[Loop A]]\n\
         \n\
         ![[Nowhere]]\n\
         \n\
         ![[diagram.png]]\n\
         \n\
         ![[Long read]]\n",
    ),
    (
        "Glossary.md",
        "# Glossary\n\n## Quorum\n\nA quorum is a majority of voters.\n\n## Term\n\nA term numbers an election.\n",
    ),
    (
        "Claims.md",
        "- Leaders are elected by votes. ^c1\n- Entries commit at a quorum. ^c2\n",
    ),
    ("Loop A.md", "Loop A text.\n\n![[Loop B]]\n"),
    ("Loop B.md", "Loop B text.\n\n![[Loop A]]\n"),
];

fn embed_vault(world: &World) -> std::path::PathBuf {
    let long = format!("{}\n", "A long aside about elections. ".repeat(40));
    let mut files: Vec<(&str, &str)> = EMBED_VAULT.to_vec();
    files.push(("Long read.md", &long));
    world.vault("embeds", &files)
}

#[test]
fn editor_stamps_show_in_a_recent_pack_only_and_pictures_never() {
    let world = World::new();
    let note = "---\nmodified: 2024-01-02\ncover: \"[[tart.jpg]]\"\nauthor: Ana\n---\nA zebra tart recipe.\n";
    let vault = world.vault("stamps", &[("Tart.md", note)]);
    let topic = ok(&world.pack(&vault, &["zebra", "--budget", "2000"]));
    assert!(
        topic.contains("author: Ana") && !topic.contains("modified:"),
        "{topic}"
    );
    let recent = ok(&world.pack(&vault, &["--recent", "--budget", "2000"]));
    assert!(recent.contains("modified: 2024-01-02"), "{recent}");
    for pack in [&topic, &recent] {
        assert!(
            !pack.contains("cover:") && !pack.contains("tart.jpg"),
            "{pack}"
        );
    }
}

#[test]
fn past_64_embeds_a_page_neither_marks_nor_reports_them() {
    let world = World::new();
    let body: String = (0..100).map(|i| format!("zebra ![[Gone {i}]] ")).collect();
    let vault = world.vault("many-embeds", &[("Hub.md", &format!("{body}\n"))]);
    let args = ["zebra", "--budget", "20000", "--no-backlinks"];
    let out = ok(&world.pack(&vault, &args));
    assert_eq!(out.matches("_(embed not expanded: ").count(), 64, "{out}");
    assert!(out.contains("![[Gone 63]] _(embed not expanded"), "{out}");
    assert!(
        out.contains("zebra ![[Gone 64]] zebra ![[Gone 65]]"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(
        &world.pack(&vault, &[&args[..], &["--format", "json"]].concat())
    ))
    .unwrap();
    assert_eq!(json["pages"][0]["embeds"].as_array().unwrap().len(), 64);
}

#[test]
fn embeds_past_the_sixteenth_stay_links_without_a_marker() {
    let world = World::new();
    let mut files: Vec<(String, String)> = (0..20)
        .map(|i| (format!("e{i}.md"), format!("Part {i} of the walrus.\n")))
        .collect();
    let hub: String = (0..20).map(|i| format!("![[e{i}]]\n\n")).collect();
    files.push(("Hub.md".into(), format!("The walrus hub.\n\n{hub}")));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let vault = world.vault("sixteen", &files);
    let args = ["walrus hub", "--budget", "4000", "--no-backlinks"];
    let out = ok(&world.pack(&vault, &args));
    assert!(out.contains("Part 15 of the walrus."), "{out}");
    assert!(out.contains("\n![[e16]]\n"), "{out}");
    assert!(!out.contains("embed not expanded"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok(
        &world.pack(&vault, &[&args[..], &["--format", "json"]].concat())
    ))
    .unwrap();
    let hub = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "Hub.md")
        .unwrap();
    let too_many = hub["embeds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] == "too_many")
        .count();
    assert_eq!(too_many, 4);
}

#[test]
fn embeds_are_expanded_in_place_within_bounds() {
    let world = World::new();
    let vault = embed_vault(&world);
    let out = ok(&world.pack(
        &vault,
        &["embeds gathered", "--budget", "800", "--no-backlinks"],
    ));
    insta::assert_snapshot!(out);
    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &[
            "embeds gathered",
            "--budget",
            "800",
            "--no-backlinks",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let hub = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "Hub.md")
        .unwrap();
    let embeds: Vec<String> = hub["embeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e["depth"],
                e["link"].as_str().unwrap(),
                e["status"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        embeds,
        [
            "1 ![[Glossary#Quorum]] expanded",
            "1 ![[Claims#^c2]] expanded",
            "1 ![[Loop A]] expanded",
            "2 ![[Loop B]] expanded",
            "3 ![[Loop A]] cycle",
            "1 ![[Nowhere]] not_found",
            "1 ![[Long read]] too_large",
        ]
    );
    assert!(json["actual"].as_u64().unwrap() <= 800);
}

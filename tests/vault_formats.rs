//! Vaults laid out around properties, Bases views and canvases: a page
//! shows its properties, an embedded view the notes it lists, a canvas is
//! a document.

mod common;

use common::{World, ok};

/// A small reading-log vault: people and books joined by properties,
/// people pages made of embedded views. Written for these tests.
const LIBRARY: &[(&str, &str)] = &[
    (
        "People/Ada Quill.md",
        "---\ncategories:\n  - \"[[People]]\"\nrole: \"[[Novelists|novelist]]\"\nborn: 1961\n\
         private: false\naccess_key: AKIA29326ML64LG2TJF8\nempty:\n---\n\
         ## Books\n\n![[Library.base#By author]]\n\n\
         ## Shelved\n\n![[Library.base#Rated]]\n\n\
         ## Tagged\n\n![[Library.base#Tagged]]\n\n\
         ## Missing\n\n![[Library.base#No such view]] ![[Gone.base]]\n",
    ),
    (
        "Books/Salt Roads.md",
        "---\ncategories: [\"[[Books]]\"]\nauthor:\n  - \"[[Ada Quill]]\"\nyear: 2004\n\
         genre: [\"[[Fantasy]]\", Travel]\nrating: 8\ntags: [reading/done]\n---\n\
         A caravan crosses the salt flats.\n",
    ),
    (
        "Books/Glass Harbor.md",
        "---\ncategories: [\"[[Books]]\"]\nauthor: \"[[People/Ada Quill|Ada]]\"\nyear: 1999\n\
         genre: [Mystery]\ntags: [reading/queue]\n---\nA lighthouse keeper keeps a secret.\n",
    ),
    (
        "Books/Other Hands.md",
        "---\ncategories: [\"[[Books]]\"]\nauthor: \"[[Ben Marsh]]\"\nyear: 2010\n---\nNot by Ada.\n",
    ),
    (
        "Books/Template.md",
        "---\ncategories: [\"[[Books]]\"]\nauthor: \"[[Ada Quill]]\"\n---\nA template.\n",
    ),
    (
        "Books/Hidden Diary.md",
        "---\ncategories: [\"[[Books]]\"]\nauthor: \"[[Ada Quill]]\"\nprivate: true\n---\nPrivate.\n",
    ),
    (
        "Templates/Library.base",
        "filters:\n  and:\n    - categories.contains(link(\"Books\"))\n    - '!file.name.contains(\"Template\")'\n\
         views:\n\
         \x20 - type: table\n    name: By author\n    filters:\n      and:\n        - list(author).contains(this)\n\
         \x20   order: [file.name, year, genre]\n    sort:\n      - property: year\n        direction: DESC\n\
         \x20 - type: table\n    name: Rated\n    filters:\n      and:\n        - rating > 6\n\
         \x20 - type: cards\n    name: Tagged\n    filters:\n      or:\n        - file.hasTag(\"reading\")\n\
         \x20       - file.inFolder(\"Nowhere\")\n    order: [file.name]\n",
    ),
    (
        "wiki/Seed page.md",
        "---\ntitle: Seed page\nsummary: A page in the obsidian-wiki layout.\nsource_count: 3\nstatus: draft\n---\n\
         Seed pages keep the seed's exact block.\n",
    ),
];

#[test]
fn properties_and_a_bases_view_with_a_link_filter() {
    let world = World::new();
    let vault = world.vault("library", LIBRARY);
    let out = ok(&world.pack(&vault, &["ada quill", "--budget", "1200", "--no-backlinks"]));
    insta::assert_snapshot!(out);
    assert!(!out.contains("AKIA29326ML64LG2TJF8"), "{out}");
    assert!(!out.contains("private:"), "{out}");
    assert!(!out.contains("Hidden Diary"), "{out}");

    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &[
            "ada quill",
            "--budget",
            "1200",
            "--no-backlinks",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let ada = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "People/Ada Quill.md")
        .unwrap();
    let embeds: Vec<String> = ada["embeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {}",
                e["link"].as_str().unwrap(),
                e["path"].as_str().unwrap_or("-"),
                e["status"].as_str().unwrap(),
                e["notes"]
            )
        })
        .collect();
    assert_eq!(
        embeds,
        [
            "![[Library.base#By author]] Templates/Library.base expanded 2",
            "![[Library.base#Rated]] Templates/Library.base unsupported_filter null",
            "![[Library.base#Tagged]] Templates/Library.base expanded 2",
            "![[Library.base#No such view]] Templates/Library.base no_such_view null",
            "![[Gone.base]] - not_found null",
        ]
    );
}

#[test]
fn a_seed_page_shows_no_properties_and_a_base_is_never_a_note() {
    let world = World::new();
    let vault = world.vault("library", LIBRARY);
    let out = ok(&world.pack(&vault, &["seed page", "--budget", "400"]));
    assert!(
        out.contains("summary: A page in the obsidian-wiki layout."),
        "{out}"
    );
    assert!(
        !out.contains("source_count") && !out.contains("status: draft"),
        "{out}"
    );
    let found = ok(&world
        .cmd()
        .args([
            "search",
            "views filters table",
            "--format",
            "files",
            "--vault",
        ])
        .arg(&vault)
        .output()
        .unwrap());
    assert!(!found.contains(".base"), "{found}");
}

/// A daily note embedding a view of the notes dated or named by its day,
/// or linking to it (the shape of a common vault template's daily base).
#[test]
fn a_daily_view_lists_the_notes_its_day_names_or_that_link_to_it() {
    let world = World::new();
    let vault = world.vault(
        "days",
        &[
            ("Daily/2024-03-05.md", "Rowing day.\n\n![[Daily.base]]\n"),
            (
                "Notes/Boathouse trip.md",
                "---\nstart: 2024-03-01\nend: 2024-03-05\n---\nRowing on the lake.\n",
            ),
            (
                "Notes/Oar care.md",
                "---\ncreated: 2024-03-05T09:12\n---\nWax the oars after rowing.\n",
            ),
            (
                "Notes/2024-03-05 crew meeting.md",
                "Crew list for rowing.\n",
            ),
            ("Notes/Linked.md", "Rowing notes from [[2024-03-05]].\n"),
            (
                "Notes/Other day.md",
                "---\ncreated: 2024-03-06\n---\nRowing again.\n",
            ),
            ("Daily/2024-03-06.md", "#daily Rowing.\n"),
            (
                "Templates/Daily.base",
                "filters:\n  or:\n    - file.name.contains(this.file.name)\n\
                 \x20   - created.toString().contains(this.file.name)\n\
                 \x20   - end.toString().contains(this.file.name)\n\
                 \x20   - file.links.contains(this.file)\n\
                 views:\n  - type: table\n    name: Daily notes\n    filters:\n      and:\n\
                 \x20       - '!file.tags.contains(\"daily\")'\n\
                 \x20       - file.name != this.file.name\n    order: [file.name]\n\
                 \x20   sort:\n      - property: file.name\n        direction: ASC\n",
            ),
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &[
            "--note",
            "Daily/2024-03-05.md",
            "--depth",
            "0",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let page = &json["pages"][0];
    assert_eq!(page["embeds"][0]["status"], "expanded", "{json}");
    assert_eq!(page["embeds"][0]["notes"], 4, "{json}");
    let bundle = json["bundle"].as_str().unwrap();
    for listed in [
        "2024-03-05 crew meeting",
        "Boathouse trip",
        "Linked",
        "Oar care",
    ] {
        assert!(
            bundle.contains(&format!("- {listed}")),
            "{listed}: {bundle}"
        );
    }
    assert!(!bundle.contains("- Other day"), "{bundle}");
}

#[test]
fn a_tiny_budget_keeps_a_bases_view_within_it() {
    let world = World::new();
    let vault = world.vault("library", LIBRARY);
    for budget in ["60", "90", "150", "250"] {
        let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
            &vault,
            &["ada quill", "--budget", budget, "--format", "json"],
        )))
        .unwrap();
        assert!(
            json["actual"].as_u64().unwrap() <= budget.parse().unwrap(),
            "{json}"
        );
    }
}

#[test]
fn a_base_in_a_private_or_skipped_folder_is_not_read() {
    let world = World::new();
    let mut files = LIBRARY.to_vec();
    files.push((
        "People/Ben Marsh.md",
        "Ben writes too.\n\n![[Secret.base]]\n\n![[Raw.base]]\n",
    ));
    files.push((".ctxpack.yaml", "private:\n  folders: [\"vaulted/\"]\n"));
    files.push((
        "vaulted/Secret.base",
        "views:\n  - type: table\n    name: All\n    filters:\n      and:\n        - list(author).contains(this)\n",
    ));
    files.push(("_raw/Raw.base", "views:\n  - type: table\n    name: All\n"));
    let vault = world.vault("library", &files);
    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &["ben marsh", "--budget", "800", "--format", "json"],
    )))
    .unwrap();
    let ben = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "People/Ben Marsh.md")
        .unwrap();
    let statuses: Vec<&str> = ben["embeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    // A Bases file in a private folder reads as one that does not exist
    // (it once read as "unreadable": a sign that it does).
    assert_eq!(statuses, ["not_found", "not_found"], "{ben}");
    assert!(
        !json["bundle"].as_str().unwrap().contains("Other Hands ("),
        "{json}"
    );
}

const CANVAS: &str = r##"{
  "nodes": [
    {"id": "n2", "type": "text", "text": "Then the **harbour pilots** board each ship.", "x": 0, "y": 300, "width": 200, "height": 80},
    {"id": "n1", "type": "text", "text": "# Docking plan\n\nTugboats meet the ferry at the breakwater.", "x": 0, "y": 0, "width": 200, "height": 80},
    {"id": "f1", "type": "file", "file": "Notes/Tides.md", "x": 400, "y": 0, "width": 200, "height": 80},
    {"id": "g1", "type": "group", "label": "Morning", "x": -20, "y": -20, "width": 700, "height": 500}
  ],
  "edges": [{"id": "e1", "fromNode": "n1", "toNode": "n2"}]
}"##;

/// `![[board.canvas]]`, as Obsidian writes a canvas embed, is expanded as
/// `![[board]]` is (it was left a bare link, as an image is); a canvas
/// that does not parse is private, so its embed finds nothing.
#[test]
fn a_canvas_embedded_by_its_file_name_is_expanded() {
    let world = World::new();
    let vault = world.vault(
        "harbour",
        &[
            ("Boards/Harbour day.canvas", CANVAS),
            ("Boards/Broken.canvas", "{not json"),
            (
                "Plan.md",
                "# Plan\n\nferry plan.\n\n![[Harbour day.canvas]]\n\n![[Broken.canvas]]\n",
            ),
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &["ferry plan", "--budget", "600", "--format", "json"],
    )))
    .unwrap();
    let plan = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == "Plan.md")
        .unwrap();
    assert_eq!(
        plan["embeds"],
        serde_json::json!([
            {"link": "![[Harbour day.canvas]]", "path": "Boards/Harbour day.canvas", "status": "expanded", "depth": 1},
            {"link": "![[Broken.canvas]]", "status": "not_found", "depth": 1}
        ])
    );
    assert!(
        json["bundle"]
            .as_str()
            .unwrap()
            .contains("Tugboats meet the ferry at the breakwater."),
        "{json}"
    );
}

#[test]
fn a_canvas_is_a_document_and_its_file_nodes_are_links() {
    let world = World::new();
    let vault = world.vault(
        "harbour",
        &[
            ("Boards/Harbour day.canvas", CANVAS),
            ("Notes/Tides.md", "The moon pulls the water twice a day.\n"),
            ("Boards/Broken.canvas", "{not json"),
        ],
    );
    let out = ok(&world.pack(&vault, &["harbour pilots tugboats", "--budget", "600"]));
    insta::assert_snapshot!(out);
    let json: serde_json::Value = serde_json::from_str(&ok(&world
        .cmd()
        .args(["search", "harbour pilots", "--format", "json", "--vault"])
        .arg(&vault)
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(
        json["hits"][0]["path"], "Boards/Harbour day.canvas",
        "{json}"
    );
    assert_eq!(json["hits"][0]["title"], "Harbour day", "{json}");
    let tides = ok(&world.pack(&vault, &["moon water", "--budget", "600"]));
    assert!(
        tides.contains("- [[Boards/Harbour day.canvas|Harbour day]]"),
        "the file node is a backlink: {tides}"
    );
    let status = ok(&world
        .cmd()
        .args(["status", "--format", "json", "--vault"])
        .arg(&vault)
        .output()
        .unwrap());
    // What a canvas that does not parse says cannot be read, nor whether it
    // is private: it is left out as private, and says so.
    assert!(
        status.contains(
            "\"message\": \"the canvas cannot be read whole (not JSON Canvas, or past 10,000 nodes or edges), so it is treated as private and left out\",\n      \"path\": \"Boards/Broken.canvas\""
        ),
        "{status}"
    );
    let broken = world
        .cmd()
        .args([
            "pack",
            "--note",
            "Boards/Broken.canvas",
            "--no-log",
            "--vault",
        ])
        .arg(&vault)
        .output()
        .unwrap();
    common::fails(&broken, 2, "no note 'Boards/Broken.canvas' in the vault");
}

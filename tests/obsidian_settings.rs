//! Obsidian's own settings (`.obsidian/`): the templates folder, Excluded
//! files and the daily notes' folder and format are honoured, each can be
//! turned off in `.ctxpack.yaml`, `status` names what it read, and a
//! malformed settings file is a diagnostic, never a failure. The vaults are
//! written here; no text comes from a real vault.

mod common;

use std::path::Path;

use common::{World, ok, write};

const BASE: &str = "views:\n  - type: table\n    name: By author\n    filters:\n      and:\n        \
                    - list(author).contains(this)\n    order: [file.name]\n";

/// A reading vault whose templates sit beside the notes, one Bases file
/// among them.
fn reading_vault(world: &World) -> std::path::PathBuf {
    world.vault(
        "reading",
        &[
            (
                ".obsidian/templates.json",
                "{\"folder\": \"Templates\", \"dateFormat\": \"YYYY\"}",
            ),
            (
                ".obsidian/plugins/templater-obsidian/data.json",
                "{\"templates_folder\": \"Meta/Scaffolds\"}",
            ),
            (
                ".obsidian/app.json",
                "{\"userIgnoreFilters\": [\"Archive/\"], \"alwaysUpdateLinks\": true}",
            ),
            (
                "Templates/Book Template.md",
                "---\nauthor:\ngenre:\n---\n## Evergreen reading notes\n\n- \n",
            ),
            ("Templates/Bases/Library.base", BASE),
            (
                "Meta/Scaffolds/Evergreen.md",
                "# Evergreen scaffold\n\nEvergreen reading notes go here.\n",
            ),
            (
                "Archive/Old reading list.md",
                "# Old reading list\n\nEvergreen reading notes from school.\n",
            ),
            (
                "People/Ada Quill.md",
                "# Ada Quill\n\nWrites evergreen reading notes.\n\n![[Library.base#By author]]\n",
            ),
            (
                "Books/Salt Roads.md",
                "---\nauthor: \"[[Ada Quill]]\"\n---\nA caravan crosses the salt flats.\n",
            ),
        ],
    )
}

fn files(world: &World, vault: &Path, query: &str) -> String {
    ok(&world
        .cmd()
        .args(["search", query, "--format", "files", "--vault"])
        .arg(vault)
        .output()
        .unwrap())
}

fn status(world: &World, vault: &Path) -> String {
    ok(&world
        .cmd()
        .arg("status")
        .arg("--vault")
        .arg(vault)
        .output()
        .unwrap())
}

#[test]
fn templates_and_excluded_files_are_neither_ranked_nor_packed_while_their_bases_serve_embeds() {
    let world = World::new();
    let vault = reading_vault(&world);
    assert_eq!(
        files(&world, &vault, "evergreen reading notes"),
        "People/Ada Quill.md\n"
    );
    let pack = ok(&world.pack(&vault, &["ada quill", "--budget", "2000"]));
    assert!(!pack.contains("Template"), "{pack}");
    assert!(!pack.contains("Old reading list"), "{pack}");
    // The Bases file in the templates folder still renders its view.
    assert!(pack.contains("Library › By author (1 note)"), "{pack}");
    assert!(pack.contains("Salt Roads"), "{pack}");
    // A note pack cannot anchor on a template either.
    let anchored = world.pack(&vault, &["--note", "Templates/Book Template.md"]);
    assert_eq!(anchored.status.code(), Some(2), "{anchored:?}");
    let said = status(&world, &vault);
    assert!(
        said.contains(
            "\nobsidian:     .obsidian/templates.json (templates folder Templates/), \
             .obsidian/plugins/templater-obsidian/data.json (templates folder Meta/Scaffolds/), \
             .obsidian/app.json (1 excluded-files filters)\ndiagnostics:  0\n"
        ),
        "{said}"
    );
    assert!(said.contains("\nnotes:        2\n"), "{said}");
}

#[test]
fn each_setting_can_be_turned_off_in_the_policy() {
    let world = World::new();
    let vault = reading_vault(&world);
    write(
        &vault.join(".ctxpack.yaml"),
        b"obsidian:\n  templates: false\n  excluded_files: false\n",
    );
    assert_eq!(
        files(&world, &vault, "evergreen reading notes"),
        "Meta/Scaffolds/Evergreen.md\nTemplates/Book Template.md\nArchive/Old reading list.md\n\
         People/Ada Quill.md\n"
    );
    assert!(!status(&world, &vault).contains("obsidian:"));
    // Turned back on, the index is rebuilt without them.
    write(
        &vault.join(".ctxpack.yaml"),
        b"obsidian:\n  templates: true\n",
    );
    assert_eq!(
        files(&world, &vault, "evergreen reading notes"),
        "People/Ada Quill.md\n"
    );
    // An unknown key is refused, as everywhere in the policy.
    write(
        &vault.join(".ctxpack.yaml"),
        b"obsidian:\n  templatez: false\n",
    );
    let refused = world
        .cmd()
        .args(["search", "ada", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}

#[test]
fn dailies_are_found_by_the_daily_notes_folder_and_format() {
    let world = World::new();
    let vault = world.vault(
        "journal",
        &[
            (
                ".obsidian/daily-notes.json",
                "{\"folder\": \"Journal/\", \"format\": \"DD.MM.YYYY\"}",
            ),
            ("Journal/14.05.2026.md", "Planted the tomatoes.\n"),
            ("Journal/13.05.2026.md", "Bought seeds.\n"),
            ("Notes/Garden.md", "# Garden\n\nTomatoes need sun.\n"),
        ],
    );
    // The latest daily by its name's date, though no file name starts
    // with one.
    let pack = ok(&world.pack(&vault, &["sun", "--dailies", "1"]));
    let heads: Vec<&str> = pack.lines().filter(|l| l.starts_with("## [[")).collect();
    assert_eq!(
        heads,
        [
            "## [[Notes/Garden]] (supporting, ~20 tokens)",
            "## [[Journal/14.05.2026]] (daily, ~21 tokens)"
        ],
        "{pack}"
    );
    write(
        &vault.join(".ctxpack.yaml"),
        b"obsidian:\n  daily_notes: false\n",
    );
    let pack = ok(&world.pack(&vault, &["sun", "--dailies", "1"]));
    assert!(!pack.contains("(daily,"), "{pack}");
    std::fs::remove_file(vault.join(".ctxpack.yaml")).unwrap();
    assert!(
        status(&world, &vault).contains(
            "obsidian:     .obsidian/daily-notes.json (dailies DD.MM.YYYY in Journal/)\n"
        )
    );
}

#[test]
fn malformed_settings_are_diagnostics_and_every_command_goes_on() {
    let world = World::new();
    let vault = world.vault(
        "broken",
        &[
            (".obsidian/templates.json", "{\"folder\": "),
            (".obsidian/app.json", "[\"Archive/\"]"),
            ("Templates/Daily.md", "# Daily template\n\nTomatoes.\n"),
            ("Notes/Garden.md", "# Garden\n\nTomatoes need sun.\n"),
        ],
    );
    // Settings that cannot be read say nothing: the template is a note.
    assert_eq!(
        files(&world, &vault, "tomatoes"),
        "Notes/Garden.md\nTemplates/Daily.md\n"
    );
    let said = status(&world, &vault);
    assert!(said.contains("diagnostics:  2\n"), "{said}");
    assert!(
        said.contains(".obsidian/app.json: not a JSON object; its settings ignored"),
        "{said}"
    );
    assert!(
        said.contains(".obsidian/templates.json: not JSON: "),
        "{said}"
    );
    ok(&world.pack(&vault, &["tomatoes"]));
}

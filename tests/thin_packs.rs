//! The floor under packs: a note pack's similar notes share more than one
//! word with the anchor, a note of properties alone is packed with the
//! notes its properties link to, and a topic pack that fills less than a
//! quarter of its budget while linked notes are left out says so.

mod common;

use common::{World, ok, stderr};

const BOOKS: &[(&str, &str)] = &[
    (
        "Books/Out of Control.md",
        "---\nauthor: \"[[Kevin Kelly]]\"\ntopics: [\"[[Emergence]]\"]\nyear: 1994\n---\n",
    ),
    (
        "People/Kevin Kelly.md",
        "Kevin Kelly writes about technology and culture.\n",
    ),
    (
        "Topics/Emergence.md",
        "Emergence is order that no part of a system plans.\n",
    ),
    (
        "Essays/Socks.md",
        "# Socks\n\nSelf-control is buying one kind of sock, so that out of a drawer \
         any two make a pair.\n",
    ),
    (
        "Essays/Hives.md",
        "# Hives\n\nA hive shows emergence: no bee is in control, yet the colony builds.\n",
    ),
];

fn pages(pack: &serde_json::Value) -> Vec<String> {
    pack["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_note_of_properties_alone_is_packed_with_what_they_link_to_and_one_shared_word_is_no_likeness()
{
    let world = World::new();
    let vault = world.vault("books", BOOKS);
    for depth in ["0", "1"] {
        let pack: serde_json::Value = serde_json::from_str(&ok(&world.pack(
            &vault,
            &[
                "--note",
                "Books/Out of Control.md",
                "--depth",
                depth,
                "--format",
                "json",
            ],
        )))
        .unwrap();
        // The socks essay shares only "control" (and the function word
        // "out"); the hive essay shares "control" and "emergence".
        assert_eq!(
            pages(&pack),
            [
                "Books/Out of Control.md",
                "People/Kevin Kelly.md",
                "Topics/Emergence.md",
                "Essays/Hives.md"
            ],
            "depth {depth}"
        );
        assert_eq!(
            pack["graph"]["similar_query"],
            "Out of Control Kelly Kevin Emergence"
        );
    }
}

#[test]
fn a_thin_pack_with_linked_notes_left_out_says_how_to_get_more() {
    let world = World::new();
    let vault = world.vault("books", BOOKS);
    let thin = world.pack(&vault, &["Kevin Kelly technology", "--budget", "2000"]);
    let said = stderr(&thin);
    let warning = "ctxpack: warning: the pack fills 117 of its 2000 tokens, and 1 note linked to \
                   its pages is not in it: following links adds them (--graph-depth 1 on the \
                   command line, graph_depth 1 over MCP)\n";
    assert!(said.contains(warning), "{said}");
    let json: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &[
            "Kevin Kelly technology",
            "--budget",
            "2000",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    // The book is found by its author property; the topic it links to
    // is the note left out.
    assert_eq!(
        pages(&json),
        ["People/Kevin Kelly.md", "Books/Out of Control.md"]
    );
    assert_eq!(
        json["warnings"][0],
        warning["ctxpack: warning: ".len()..].trim_end()
    );
    // Following links, the pack holds the topic and says nothing.
    let followed = world.pack(
        &vault,
        &[
            "Kevin Kelly technology",
            "--budget",
            "2000",
            "--graph-depth",
            "1",
        ],
    );
    assert!(ok(&followed).contains("## [[Topics/Emergence]]"));
    assert!(!stderr(&followed).contains("the pack fills"));
    // A pack filling a quarter of its budget is not thin.
    let full = world.pack(&vault, &["Kevin Kelly technology", "--budget", "240"]);
    assert!(
        !stderr(&full).contains("the pack fills"),
        "{}",
        stderr(&full)
    );
}

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

/// A title's date names the day, it does not describe the note: a meeting
/// note's likeness is sought by its words, not among every note created
/// that day.
#[test]
fn a_date_in_a_title_is_no_likeness() {
    let world = World::new();
    let mut notes = BOOKS.to_vec();
    notes.push((
        "Notes/2023-09-12 Meeting with Steph.md",
        "---\ncreated: 2023-09-12\n---\nDiscussed the book [[Out of Control]] on the topic of [[Emergence]].\n",
    ));
    notes.push((
        "Recipes/Tart.md",
        "---\ncreated: 2023-09-12\nlast: 2023-09-12\n---\nBrown butter, nectarines and a short crust, baked on 2023-09-12.\n",
    ));
    let vault = world.vault("books", &notes);
    let pack: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &[
            "--note",
            "Notes/2023-09-12 Meeting with Steph.md",
            "--format",
            "json",
        ],
    )))
    .unwrap();
    let query = pack["graph"]["similar_query"].as_str().unwrap();
    assert!(query.starts_with("Meeting with Steph"), "{query}");
    assert!(
        !pages(&pack).contains(&"Recipes/Tart.md".to_string()),
        "{:?}",
        pages(&pack)
    );
}

#[test]
fn a_thin_pack_with_linked_notes_left_out_says_how_to_get_more() {
    let world = World::new();
    let vault = world.vault("books", BOOKS);
    let thin = world.pack(&vault, &["Kevin Kelly technology", "--budget", "2000"]);
    let said = stderr(&thin);
    let warning = "ctxpack: warning: the pack fills 113 of its 2000 tokens, and 1 note linked to \
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

/// A plain Obsidian vault's messages name nothing its user lacks; the
/// large-pack warning is about the pack's size, not the budget asked.
#[test]
fn messages_outside_obsidian_wiki_vaults_name_no_missing_command_and_weigh_the_pack() {
    let world = World::new();
    let vault = world.vault("books", BOOKS);
    assert_eq!(
        ok(&world.pack(&vault, &["sourdough starter"])),
        "# Context Pack: sourdough starter\n\nNo relevant pages found. No note of the vault \
         matches this topic.\n"
    );
    let empty = world.vault("empty", &[]);
    assert_eq!(
        ok(&world.pack(&empty, &["--recent"])),
        "# Context Pack: Recent Activity (last 0 pages)\n\nNo recent pages found. The vault \
         has no notes.\n"
    );
    // A small pack under a large budget: no warning.
    let small = world.pack(&vault, &["Kevin Kelly", "--budget", "60000"]);
    assert!(!stderr(&small).contains("large"), "{}", stderr(&small));
    // A pack over 50,000 tokens is large, whatever the vault.
    let words = [
        "sun", "soil", "stake", "mulch", "frost", "seed", "vine", "leaf", "root",
    ];
    let note = |part: usize| {
        let mut long = String::from("# Tomatoes\n\n");
        for i in part * 5000..(part + 1) * 5000 {
            long.push_str(&format!(
                "Tomato plant {i} wants {} and {} before {} season {}.\n\n",
                words[i % 9],
                words[(i / 9) % 9],
                words[(i / 81) % 9],
                i * 7919 % 10007
            ));
        }
        long
    };
    let notes: Vec<(String, String)> = (0..3)
        .map(|part| (format!("Tomatoes {part}.md"), note(part)))
        .collect();
    let files: Vec<(&str, &str)> = notes
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let big = world.vault("big", &files);
    let out = world.pack(&big, &["tomato plant", "--budget", "90000"]);
    let pack = ok(&out);
    let actual: usize = pack
        .lines()
        .nth(2)
        .and_then(|l| l.split("Actual: ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(actual > 50_000, "{actual}");
    assert!(
        stderr(&out).contains(&format!(
            "ctxpack: warning: This pack is large ({actual} tokens). Consider narrowing the topic.\n"
        )),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("wiki-query"));
}

/// A question the vault does not answer gets the "No relevant pages"
/// message, not the notes that share one of its words: a question of
/// three telling words or more asks a note to hold two (`how do bees get
/// elected`: the hive note says "bee" only).
#[test]
fn a_question_the_notes_do_not_answer_finds_no_pages() {
    let world = World::new();
    let vault = world.vault("books", BOOKS);
    let unanswered = ok(&world.pack(&vault, &["how do bees get elected", "--budget", "2000"]));
    assert!(
        unanswered.contains("No relevant pages found."),
        "{unanswered}"
    );
    // Two words held, or a short question, still finds the note.
    let answered = ok(&world.pack(
        &vault,
        &["how does a hive show emergence", "--budget", "2000"],
    ));
    assert!(answered.contains("## [[Essays/Hives]]"), "{answered}");
    let short = ok(&world.pack(&vault, &["bee colony", "--budget", "2000"]));
    assert!(short.contains("## [[Essays/Hives]]"), "{short}");
    // A list of keywords asks for each: one word held is an answer.
    let keywords = ok(&world.pack(&vault, &["hive sock culture", "--budget", "2000"]));
    for page in [
        "## [[Essays/Hives]]",
        "## [[Essays/Socks]]",
        "## [[People/Kevin Kelly]]",
    ] {
        assert!(keywords.contains(page), "{page}: {keywords}");
    }
}

#[test]
fn a_topic_word_many_notes_hold_or_part_of_a_hyphenated_word_is_no_match_alone() {
    let mut files: Vec<(String, String)> = (1..=6)
        .map(|day| {
            (
                format!("Daily/2024-01-0{day}.md"),
                "## Notes\n\nGroceries and errands.\n".to_string(),
            )
        })
        .collect();
    files.extend((1..=8).map(|n| {
        (
            format!("Misc/Weather {n}.md"),
            format!("The weather was mild on day {n}.\n"),
        )
    }));
    for (path, text) in [
        ("Topics/Evergreen.md", "An evergreen idea is composable.\n"),
        (
            "Notes/Evergreen notes.md",
            "Evergreen notes turn ideas into objects.\n",
        ),
        ("Essays/Advice.md", "Two things matter: sleep and walks.\n"),
        (
            "Essays/Databases.md",
            "A two-phase commit asks every participant to vote before it commits.\n",
        ),
        ("Categories/Books.md", "Titles go here, one a line.\n"),
        ("Essays/Reading.md", "I want to read more slowly.\n"),
    ] {
        files.push((path.to_string(), text.to_string()));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let world = World::new();
    let vault = world.vault("notes", &files);
    let pack = |topic: &str| ok(&world.pack(&vault, &[topic, "--budget", "2000"]));
    // `notes` is in seven of the vault's notes: a daily note's `## Notes`
    // heading is no answer to `evergreen notes`.
    let evergreen = pack("evergreen notes");
    assert!(evergreen.contains("## [[Topics/Evergreen]]"), "{evergreen}");
    assert!(
        evergreen.contains("## [[Notes/Evergreen notes]]"),
        "{evergreen}"
    );
    assert!(!evergreen.contains("[[Daily/"), "{evergreen}");
    // And says so: the notes left out are listed with their reason.
    let listed: serde_json::Value = serde_json::from_str(&ok(&world.pack(
        &vault,
        &["evergreen notes", "--budget", "2000", "--format", "json"],
    )))
    .unwrap();
    let weak: Vec<&str> = listed["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["reason"] == "weak_match")
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(weak.len(), 6, "{weak:?}");
    assert!(
        weak.iter().all(|path| path.starts_with("Daily/")),
        "{weak:?}"
    );
    // `two` alone is not `two-phase`.
    let commit = pack("two-phase commit");
    assert!(commit.contains("## [[Essays/Databases]]"), "{commit}");
    assert!(!commit.contains("[[Essays/Advice]]"), "{commit}");
    // A question's note named by one of its words is an answer.
    let books = pack("books I want to read");
    assert!(books.contains("## [[Categories/Books]]"), "{books}");
    assert!(books.contains("## [[Essays/Reading]]"), "{books}");
}

/// In a vault about one thing, the word for it is common; a note its
/// writer tagged with that word is about it all the same (the newcomer's
/// `consensus algorithms`, which left Paxos out for holding only
/// `consensus`), while one that only mentions it stays out.
#[test]
fn a_note_tagged_with_a_common_topic_word_is_about_the_topic() {
    let mut files: Vec<(String, String)> = (1..=8)
        .map(|n| {
            (
                format!("Mentions/m{n}.md"),
                format!("Replication note {n} reaches consensus eventually.\n"),
            )
        })
        .collect();
    files.push((
        "Paxos.md".into(),
        "---\ntags: [consensus]\n---\nProposers and acceptors agree on one value.\n".into(),
    ));
    files.push((
        "Lamport.md".into(),
        "Wrote papers on distributed algorithms and clocks.\n".into(),
    ));
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let world = World::new();
    let vault = world.vault("notes", &files);
    let pack = ok(&world.pack(&vault, &["consensus algorithms", "--budget", "2000"]));
    assert!(pack.contains("## [[Paxos]]"), "{pack}");
    assert!(pack.contains("## [[Lamport]]"), "{pack}");
    assert!(!pack.contains("[[Mentions/"), "{pack}");
}

//! End-to-end tests of the `ctxpack` binary, run as a user runs it.

mod common;

use std::fs;

use common::{GENERATED_AT, World, ok, stderr, stdout, write};

// ---------------------------------------------------------------- snapshots

#[test]
fn topic_pack_markdown() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["raft consensus"]));
    insta::assert_snapshot!(out);
}

#[test]
fn frontmatter_ranker_pack() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(
        &vault,
        &[
            "raft consensus",
            "--ranker",
            "frontmatter",
            "--budget",
            "1200",
        ],
    ));
    insta::assert_snapshot!(out);
}

#[test]
fn topic_pack_json() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["raft consensus", "--format", "json"]));
    insta::assert_snapshot!(out);
}

#[test]
fn recent_pack() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["--recent", "--budget", "1500"]));
    insta::assert_snapshot!(out);
}

#[test]
fn empty_result() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["sourdough starter"]));
    assert_eq!(
        out,
        "# Context Pack: sourdough starter\n\nNo relevant pages found. Consider running \
         /wiki-ingest to add sources about this topic.\n"
    );
}

#[test]
fn a_vault_without_notes_is_named_as_such_not_only_as_no_match() {
    let world = World::new();
    let empty = world.vault("empty", &[("photos/cat.jpg", "not a note")]);
    let warning = "the vault has no note to read";
    let packed = world.pack(&empty, &["raft"]);
    ok(&packed);
    assert!(stderr(&packed).contains(warning), "{}", stderr(&packed));
    let searched = world
        .cmd()
        .args(["search", "raft", "--vault"])
        .arg(&empty)
        .output()
        .unwrap();
    ok(&searched);
    assert!(stderr(&searched).contains(warning));
    // A vault with notes, none matching, says only that nothing matched.
    let vault = world.example_vault("vault");
    assert!(!stderr(&world.pack(&vault, &["sourdough starter"])).contains(warning));
}

#[test]
fn a_note_is_found_by_its_name_and_a_typo_gets_the_nearest_paths() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let by_path = ok(&world.pack(&vault, &["--note", "concepts/leader-election.md"]));
    for name in [
        "leader-election",
        "[[leader-election]]",
        "Leader-Election.md",
    ] {
        assert_eq!(
            ok(&world.pack(&vault, &["--note", name])),
            by_path,
            "{name}"
        );
    }
    let typo = world.pack(&vault, &["--note", "concepts/leader-elektion.md"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        stderr(&typo).ends_with("; did you mean 'concepts/leader-election.md'?\n"),
        "{}",
        stderr(&typo)
    );
    // Nothing near: no suggestion.
    let far = world.pack(&vault, &["--note", "zzzz"]);
    assert!(!stderr(&far).contains("did you mean"), "{}", stderr(&far));
}

#[test]
fn a_budget_holding_the_header_but_no_page_says_so() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = world.pack(&vault, &["raft", "--budget", "60"]);
    assert!(ok(&out).contains("| Pages: 0 / 14\n"), "{}", stdout(&out));
    assert_eq!(
        stderr(&out),
        "ctxpack: warning: a budget of 60 tokens holds the header but not even a summary of \
         any of the 14 notes that match: raise the budget\n"
    );
    // A pack with a page, and one with nothing to match, say nothing more.
    assert_eq!(
        stderr(&world.pack(&vault, &["raft", "--budget", "120"])),
        ""
    );
    assert_eq!(
        stderr(&world.pack(&vault, &["sourdough starter", "--budget", "60"])),
        ""
    );
}

#[test]
fn tiny_budget_keeps_summaries_and_drops_peripheral_first() {
    // The seed's rule, kept by the frontmatter ranker: summary blocks first,
    // peripheral pages dropped before any other.
    let world = World::new();
    let vault = world.example_vault("vault");
    let seed = ["raft", "--budget", "300", "--ranker", "frontmatter"];
    let out = ok(&world.pack(&vault, &seed));
    insta::assert_snapshot!(out);
    let json: serde_json::Value = serde_json::from_str(&ok(
        &world.pack(&vault, &[&seed[..], &["--format", "json"]].concat())
    ))
    .unwrap();
    assert!(json["actual"].as_u64().unwrap() <= 300);
    let dropped = json["dropped"].as_array().unwrap();
    assert!(!dropped.is_empty());
    assert!(dropped.iter().all(|d| d["reason"] == "budget"));
    // Peripheral pages go first: none is kept while another page is dropped.
    let kept_tiers: Vec<&str> = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tier"].as_str().unwrap())
        .collect();
    assert!(dropped.iter().any(|d| d["tier"] == "peripheral"));
    assert!(!kept_tiers.contains(&"peripheral"), "{kept_tiers:?}");
}

#[test]
fn tiny_query_aware_budget_spends_on_the_best_text() {
    // The hybrid ranker's pack spends a small budget on the sentences that
    // match best, across pages, rather than on one summary per page.
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["raft", "--budget", "300"]));
    insta::assert_snapshot!(out);
    let json: serde_json::Value = serde_json::from_str(&ok(
        &world.pack(&vault, &["raft", "--budget", "300", "--format", "json"])
    ))
    .unwrap();
    assert!(json["actual"].as_u64().unwrap() <= 300);
    let pages = json["pages"].as_array().unwrap();
    assert_eq!(pages[0]["path"], "concepts/raft.md");
    assert!(pages.iter().all(|p| p["body_mode"] == "excerpt"));
    assert!(pages.len() >= 2, "the budget is spread over pages");
    let dropped = json["dropped"].as_array().unwrap();
    assert!(dropped.iter().all(|d| d["reason"] == "budget"));
}

#[test]
fn exact_counters() {
    let world = World::new();
    let vault = world.example_vault("vault");
    for counter in ["o200k", "cl100k"] {
        let out = ok(&world.pack(
            &vault,
            &["leader election", "--budget", "700", "--tokenizer", counter],
        ));
        insta::assert_snapshot!(format!("counter_{counter}"), out);
    }
}

#[test]
fn a_long_nested_quote_is_packed_within_an_exact_budget() {
    let world = World::new();
    let quote: String = (0..1_500)
        .map(|i| format!("{} reply {i} quoted here.\n", "> ".repeat(1 + i % 40)))
        .collect();
    let vault = world.vault(
        "vault",
        &[("thread.md", &format!("---\ntitle: thread\n---\n{quote}"))],
    );
    for budget in ["600", "3000"] {
        let out = ok(&world.pack(
            &vault,
            &[
                "quoted",
                "--budget",
                budget,
                "--tokenizer",
                "o200k",
                "--format",
                "json",
            ],
        ));
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        let actual = json["actual"].as_u64().unwrap();
        // A debug build also checks, each time a page is measured, that the
        // line-by-line sum equals the count of the whole page.
        assert!(actual <= budget.parse().unwrap(), "{actual} > {budget}");
        assert!(
            actual > budget.parse::<u64>().unwrap() / 2,
            "{actual} of {budget}"
        );
        assert_eq!(json["pages"][0]["path"], "thread.md");
        assert_eq!(json["pages"][0]["body_mode"], "excerpt");
    }
}

#[test]
fn chinese_topic() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["分布式事务", "--budget", "2000"]));
    insta::assert_snapshot!(out);
}

#[test]
fn output_is_deterministic() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let first = ok(&world.pack(&vault, &["consensus", "--format", "json"]));
    let second = ok(&world.pack(&vault, &["consensus", "--format", "json"]));
    assert_eq!(first, second);
}

#[test]
fn source_date_epoch_fixes_the_timestamp() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = world
        .cmd()
        .args(["pack", "raft", "--no-log", "--vault"])
        .arg(&vault)
        .env("SOURCE_DATE_EPOCH", "1780000000")
        .output()
        .unwrap();
    assert!(ok(&out).contains("# Generated: 2026-05-28T20:26:40Z\n"));
}

// ------------------------------------------------------------- compression

#[test]
fn compression_rules_apply_to_the_example() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["raft consensus"]));
    // The Sources section becomes one line of names.
    assert!(
        out.contains("\nSources: raft-paper-notes; Reading session, 12 May; Raft visualisation\n")
    );
    assert!(!out.contains("## Sources"));
    // The empty "Membership Changes" heading is gone.
    assert!(!out.contains("## Membership Changes"));
    // The paragraph shared by raft and log-replication stays in raft only.
    assert_eq!(
        out.matches("The leader appends each client command")
            .count(),
        1
    );
    assert!(out.contains("## How Raft Does It\n\n_(content also in [[concepts/raft]])_"));
    // A near-identical paragraph (one sentence shorter) is replaced too.
    assert_eq!(
        out.matches("Followers expect periodic heartbeats").count(),
        1
    );
    // A link already shown becomes plain text (the page's title).
    assert!(out.contains("including Raft.\n"));
    // Thematic breaks in bodies are dropped: `---` only separates pages.
    let rules = out.lines().filter(|l| *l == "---").count();
    assert_eq!(rules, out.matches("\n---\n## [[").count());
    // Code blocks are kept verbatim, with their link-like text.
    assert!(out.contains("// Not a tag: #merge, not a link: [[concepts/raft]]"));
}

#[test]
fn ignored_and_role_files_are_never_packed() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = ok(&world.pack(&vault, &["consensus", "--budget", "100000"]));
    for absent in [
        "drafts/",
        "_raw/",
        "AGENTS",
        "[[index]]",
        "[[hot]]",
        "[[log]]",
        ".obsidian",
    ] {
        assert!(!out.contains(absent), "{absent} leaked into the pack");
    }
}

#[test]
fn large_budget_warns_on_stderr() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let out = world.pack(&vault, &["raft", "--budget", "60000"]);
    ok(&out);
    assert!(stderr(&out).contains("This pack is large."));
    let out = world.pack(&vault, &["raft", "--budget", "50000"]);
    assert!(!stderr(&out).contains("This pack is large."));
}

// ------------------------------------------------------------- bad input

#[test]
fn bad_arguments_exit_2_with_a_message() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let cases: &[(&[&str], &str)] = &[
        (
            &["raft", "--budget", "0"],
            "budget must be between 1 and 100000",
        ),
        (
            &["raft", "--budget", "-3"],
            "budget must be between 1 and 100000",
        ),
        (
            &["raft", "--budget", "100001"],
            "budget must be between 1 and 100000",
        ),
        (&["raft", "--budget", "lots"], "is not a whole number"),
        (&["raft", "--tokenizer", "gpt2"], "unknown tokenizer 'gpt2'"),
        (&["  "], "the topic is empty"),
        (&[], "a topic is required"),
        (&["raft", "--recent"], "cannot be used with"),
        (&["raft", "@one", "@two"], "two vault names given"),
    ];
    let out = world
        .cmd()
        .args(["pack", "raft", "--generated-at", "noon", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--generated-at 'noon' is not an ISO 8601 date"));
    for (args, message) in cases {
        let out = world.pack(&vault, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
}

#[test]
fn broken_notes_are_reported_and_the_run_goes_on() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            (
                "good.md",
                "---\ntitle: Raft notes\nsummary: about raft\n---\nRaft body.\n",
            ),
            (
                "broken.md",
                "---\ntitle: [unclosed\ntags: raft\n---\n# Raft\n\nStill read.\n",
            ),
            ("binary.md", "raft\0\0\0"),
        ],
    );
    write(&vault.join("latin1.md"), b"caf\xe9 raft\n");
    let big = format!(
        "---\ntitle: raft\n---\n{}",
        "x".repeat(10 * 1024 * 1024 + 1)
    );
    write(&vault.join("huge.md"), big.as_bytes());
    let out = world.pack(&vault, &["raft", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let mut paths: Vec<&str> = json["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    // Both are packed; their order is the ranking's business.
    paths.sort_unstable();
    assert_eq!(paths, ["broken.md", "good.md"]);
    let diagnostics: Vec<String> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}: {}",
                d["path"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(diagnostics.len(), 4, "{diagnostics:?}");
    assert!(diagnostics[0].starts_with("binary.md: binary file"));
    assert!(diagnostics[1].starts_with("broken.md: broken YAML frontmatter"));
    assert_eq!(
        diagnostics[2],
        format!(
            "huge.md: file is {} bytes, over the 10485760 byte limit; skipped",
            big.len()
        )
    );
    assert_eq!(
        diagnostics[3],
        "latin1.md: invalid UTF-8 at byte 3; skipped"
    );
    // Diagnostics also go to stderr, naming the file.
    assert!(stderr(&out).contains("warning: broken.md: broken YAML frontmatter"));
}

#[test]
fn symlinks_leading_outside_the_vault_are_not_read() {
    let world = World::new();
    let secret = world.vault(
        "outside",
        &[("secret.md", "---\ntitle: raft secret\n---\nTOP SECRET\n")],
    );
    let vault = world.vault(
        "vault",
        &[("inside.md", "---\ntitle: raft\n---\nInside.\n")],
    );
    std::os::unix::fs::symlink(secret.join("secret.md"), vault.join("link.md")).unwrap();
    std::os::unix::fs::symlink(&secret, vault.join("linked-dir")).unwrap();
    let out = world.pack(&vault, &["raft"]);
    let text = ok(&out);
    assert!(!text.contains("TOP SECRET"));
    assert!(stderr(&out).contains("link.md: symlink leads outside the vault; skipped"));
}

#[test]
fn missing_vault_folder_is_a_usage_error() {
    let world = World::new();
    let out = world.pack(&world.path().join("nope"), &["raft"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not an existing folder"));
}

// ------------------------------------------------------------------ config

fn topic_only(world: &World, args: &[&str]) -> std::process::Output {
    world
        .cmd()
        .arg("pack")
        .args(args)
        .args(["--generated-at", GENERATED_AT, "--no-log"])
        .output()
        .unwrap()
}

fn one_page_vault(world: &World, name: &str) -> std::path::PathBuf {
    world.vault(
        name,
        &[(
            &format!("{name}.md"),
            &format!("---\ntitle: raft\n---\nfrom {name}\n"),
        )],
    )
}

#[test]
fn config_dotenv_is_found_walking_up() {
    let world = World::new();
    one_page_vault(&world, "envvault");
    write(
        &world.work().join(".env"),
        b"# project settings\nexport OBSIDIAN_VAULT_PATH=\"../envvault\"\nQMD_WIKI_COLLECTION=wiki\n",
    );
    let nested = world.work().join("a/b");
    fs::create_dir_all(&nested).unwrap();
    let out = world
        .cmd()
        .current_dir(&nested)
        .args(["pack", "raft", "--no-log"])
        .output()
        .unwrap();
    assert!(ok(&out).contains("[[envvault]]"));
}

#[test]
fn config_environment_variables_name_the_vault_before_a_dotenv() {
    let world = World::new();
    one_page_vault(&world, "envvault");
    one_page_vault(&world, "obsidianvault");
    one_page_vault(&world, "ctxpackvault");
    write(
        &world.work().join(".env"),
        b"OBSIDIAN_VAULT_PATH=../envvault\n",
    );
    let pack = |vars: &[(&str, &str)], args: &[&str]| {
        let mut cmd = world.cmd();
        for (key, value) in vars {
            cmd.env(key, value);
        }
        ok(&cmd
            .args(["pack", "raft", "--no-log"])
            .args(args)
            .output()
            .unwrap())
    };
    let obsidian = world.path().join("obsidianvault");
    let obsidian = obsidian.to_str().unwrap();
    assert!(pack(&[("OBSIDIAN_VAULT_PATH", obsidian)], &[]).contains("[[obsidianvault]]"));
    // A relative path is taken from the working folder.
    assert!(
        pack(
            &[
                ("CTXPACK_VAULT", "../ctxpackvault"),
                ("OBSIDIAN_VAULT_PATH", obsidian)
            ],
            &[]
        )
        .contains("[[ctxpackvault]]")
    );
    let flag = world.path().join("envvault");
    assert!(
        pack(
            &[("CTXPACK_VAULT", "../ctxpackvault")],
            &["--vault", flag.to_str().unwrap()]
        )
        .contains("[[envvault]]")
    );
    // Empty variables are not set.
    assert!(pack(&[("CTXPACK_VAULT", "")], &[]).contains("[[envvault]]"));
    let missing = world
        .cmd()
        .env("CTXPACK_VAULT", "../nowhere")
        .args(["pack", "raft"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("(from $CTXPACK_VAULT) is not an existing folder"));
}

#[test]
fn config_dotenv_without_the_key_is_skipped() {
    let world = World::new();
    one_page_vault(&world, "globalvault");
    write(&world.work().join(".env"), b"OTHER=1\n");
    write(
        &world.home().join(".config/obsidian-wiki/config"),
        format!(
            "OBSIDIAN_VAULT_PATH={}\n",
            world.path().join("globalvault").display()
        )
        .as_bytes(),
    );
    assert!(ok(&topic_only(&world, &["raft"])).contains("[[globalvault]]"));
}

#[test]
fn config_named_vault_and_flag_precedence() {
    let world = World::new();
    for name in ["work", "personal", "flagged"] {
        one_page_vault(&world, name);
    }
    let config_dir = world.home().join(".config/obsidian-wiki");
    for name in ["work", "personal"] {
        write(
            &config_dir.join(format!("config.{name}")),
            format!(
                "OBSIDIAN_VAULT_PATH={}\n",
                world.path().join(name).display()
            )
            .as_bytes(),
        );
    }
    write(
        &config_dir.join("config"),
        format!(
            "OBSIDIAN_VAULT_PATH={}\n",
            world.path().join("work").display()
        )
        .as_bytes(),
    );
    // @name anywhere among the arguments, for this call only.
    assert!(ok(&topic_only(&world, &["@personal", "raft"])).contains("[[personal]]"));
    assert!(ok(&topic_only(&world, &["raft", "@personal"])).contains("[[personal]]"));
    assert!(ok(&topic_only(&world, &["raft"])).contains("[[work]]"));
    // --vault beats everything.
    let flagged = world.path().join("flagged");
    let out = topic_only(
        &world,
        &["raft", "@personal", "--vault", flagged.to_str().unwrap()],
    );
    assert!(ok(&out).contains("[[flagged]]"));
    // A missing name lists the known ones and never falls back.
    let out = topic_only(&world, &["raft", "@missing"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no vault config named '@missing'"), "{err}");
    assert!(err.contains("named configs: @personal, @work"), "{err}");
}

#[test]
fn config_xdg_and_legacy_directories() {
    let world = World::new();
    one_page_vault(&world, "legacy");
    one_page_vault(&world, "xdg");
    write(
        &world.home().join(".obsidian-wiki/config"),
        format!(
            "OBSIDIAN_VAULT_PATH={}\n",
            world.path().join("legacy").display()
        )
        .as_bytes(),
    );
    // Only the legacy folder exists: it is used.
    assert!(ok(&topic_only(&world, &["raft"])).contains("[[legacy]]"));
    // An XDG folder (here under $XDG_CONFIG_HOME) takes precedence.
    let xdg = world.path().join("xdg-config");
    write(
        &xdg.join("obsidian-wiki/config"),
        format!(
            "OBSIDIAN_VAULT_PATH={}\n",
            world.path().join("xdg").display()
        )
        .as_bytes(),
    );
    let out = world
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["pack", "raft", "--no-log"])
        .output()
        .unwrap();
    assert!(ok(&out).contains("[[xdg]]"));
}

#[test]
fn config_missing_everywhere_says_how_to_set_it() {
    let world = World::new();
    let out = topic_only(&world, &["raft"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("no vault configured"), "{err}");
    assert!(err.contains("--vault PATH"), "{err}");
    assert!(err.contains("OBSIDIAN_VAULT_PATH="), "{err}");
}

// --------------------------------------------------------------------- log

#[test]
fn log_line_is_appended() {
    let world = World::new();
    let vault = world.example_vault("vault");
    let before = fs::read_to_string(vault.join("log.md")).unwrap();
    let out = world
        .cmd()
        .args([
            "pack",
            "raft \"consensus\"",
            "--budget",
            "500",
            "--generated-at",
            GENERATED_AT,
            "--vault",
        ])
        .arg(&vault)
        .output()
        .unwrap();
    let pack = ok(&out);
    let pages = pack.lines().find(|l| l.starts_with("# Budget:")).unwrap();
    let pages = pages.split("Pages: ").nth(1).unwrap();
    let (included, candidates) = pages.split_once(" / ").unwrap();
    let (included, candidates): (usize, usize) =
        (included.parse().unwrap(), candidates.parse().unwrap());
    let after = fs::read_to_string(vault.join("log.md")).unwrap();
    let appended = after.strip_prefix(&before).expect("log only grows");
    assert_eq!(
        appended,
        format!(
            "- [2026-06-01T00:00:00Z] CONTEXT_PACK topic=\"raft \\\"consensus\\\"\" budget=500 \
             actual_tokens={} pages_included={included} pages_dropped={}\n",
            actual_of(&pack),
            candidates - included
        )
    );
}

/// A pack or search runs beside the walk that checks the index (see
/// `Session::open_then`); after an edit it must still answer from the edit,
/// and a pack logs one line however many times it was computed.
#[test]
fn a_pack_after_an_edit_answers_from_it_and_logs_once() {
    let world = World::new();
    let vault = world.vault(
        "vault",
        &[
            ("log.md", "# Log\n\n"),
            (
                "otters.md",
                "# Otters\n\nOtters hold hands while they sleep.\n",
            ),
            ("voles.md", "# Voles\n\nVoles dig shallow tunnels.\n"),
        ],
    );
    let run = |args: &[&str]| {
        let out = world
            .cmd()
            .args(args)
            .args(["--generated-at", GENERATED_AT, "--vault"])
            .arg(&vault)
            .output()
            .unwrap();
        ok(&out)
    };
    let search = |query: &str| {
        let out = world
            .cmd()
            .args(["search", query, "--format", "files", "--vault"])
            .arg(&vault)
            .output()
            .unwrap();
        ok(&out)
    };
    assert_eq!(search("tunnels"), "voles.md\n");
    let first = run(&["pack", "tunnels", "--budget", "400"]);
    assert!(first.contains("Voles dig shallow tunnels."), "{first}");

    fs::write(
        vault.join("otters.md"),
        "# Otters\n\nOtters dig no tunnels; they float.\n",
    )
    .unwrap();
    fs::write(
        vault.join("moles.md"),
        "# Moles\n\nMoles dig deep tunnels.\n",
    )
    .unwrap();
    assert_eq!(search("tunnels"), "moles.md\notters.md\nvoles.md\n");
    let second = run(&["pack", "float", "--budget", "400"]);
    assert!(
        second.contains("Otters dig no tunnels; they float."),
        "{second}"
    );
    assert!(!second.contains("hold hands"), "{second}");

    let log = fs::read_to_string(vault.join("log.md")).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.starts_with("- [")).collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].contains("topic=\"tunnels\""), "{log}");
    assert!(lines[1].contains("topic=\"float\""), "{log}");
}

fn actual_of(pack: &str) -> usize {
    let line = pack.lines().find(|l| l.starts_with("# Budget:")).unwrap();
    let actual = line.split("Actual: ").nth(1).unwrap();
    actual.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn log_is_appended_only_where_it_exists_or_the_vault_asks() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    let run = |extra: &[&str]| {
        world
            .cmd()
            .args([
                "pack",
                "--recent",
                "--generated-at",
                GENERATED_AT,
                "--vault",
            ])
            .arg(&vault)
            .args(extra)
            .output()
            .unwrap()
    };
    ok(&run(&["--no-log"]));
    assert!(!vault.join("log.md").exists());
    // A plain vault is not written to unasked.
    ok(&run(&[]));
    assert!(!vault.join("log.md").exists());
    // Asked for: created with its header.
    fs::write(vault.join(".ctxpack.yaml"), "log: always\n").unwrap();
    ok(&run(&[]));
    ok(&run(&["--no-log"]));
    let log = fs::read_to_string(vault.join("log.md")).unwrap();
    assert!(log.starts_with(
        "# Wiki Log\n\n- [2026-06-01T00:00:00Z] CONTEXT_PACK topic=\"Recent Activity\""
    ));
    assert_eq!(log.lines().count(), 3);
    // Where log.md exists, the default appends to it; `never` does not.
    fs::write(vault.join(".ctxpack.yaml"), "log: if-present\n").unwrap();
    ok(&run(&[]));
    fs::write(vault.join(".ctxpack.yaml"), "log: never\n").unwrap();
    ok(&run(&[]));
    let log = fs::read_to_string(vault.join("log.md")).unwrap();
    assert_eq!(log.lines().count(), 4);
}

#[test]
fn unwritable_log_still_prints_the_pack() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    // A folder where log.md should be: the append fails whoever runs it.
    fs::create_dir_all(vault.join("log.md")).unwrap();
    let out = world
        .cmd()
        .args(["pack", "raft", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert!(ok(&out).contains("[[a]]"));
    assert!(stderr(&out).contains("could not append to"));
}

#[test]
fn log_symlink_is_not_followed() {
    let world = World::new();
    let outside = world.vault("outside", &[("target.md", "keep me\n")]);
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    std::os::unix::fs::symlink(outside.join("target.md"), vault.join("log.md")).unwrap();
    let out = world
        .cmd()
        .args(["pack", "raft", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(
        fs::read_to_string(outside.join("target.md")).unwrap(),
        "keep me\n"
    );
    assert!(stderr(&out).contains("could not append to"));
}

#[test]
fn a_foreign_lock_on_the_log_skips_the_line_instead_of_hanging() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    fs::write(vault.join("log.md"), "# Wiki Log\n\n").unwrap();
    // As an editor or a sync tool would: an exclusive flock, held throughout.
    let holder = fs::File::open(vault.join("log.md")).unwrap();
    holder.lock().unwrap();
    let mut child = world
        .cmd()
        .args(["pack", "raft", "--generated-at", GENERATED_AT, "--vault"])
        .arg(&vault)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("pack still blocked on the lock after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(ok(&out).contains("[[a]]"));
    assert_eq!(
        stderr(&out),
        format!(
            "ctxpack: warning: could not append to {}: another process holds a lock on log.md; \
             the log line was skipped after waiting 200 ms (the pack was still printed)\n",
            vault.join("log.md").display()
        )
    );
    holder.unlock().unwrap();
    assert_eq!(
        fs::read_to_string(vault.join("log.md")).unwrap(),
        "# Wiki Log\n\n"
    );
}

#[test]
fn concurrent_log_appends_keep_every_line_whole() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    fs::write(vault.join(".ctxpack.yaml"), "log: always\n").unwrap();
    let children: Vec<_> = (0..8)
        .map(|_| {
            world
                .cmd()
                .args(["pack", "raft", "--vault"])
                .arg(&vault)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let log = fs::read_to_string(vault.join("log.md")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], "# Wiki Log");
    assert_eq!(lines.len(), 2 + 8, "{log}");
    assert!(
        lines[2..]
            .iter()
            .all(|l| l.starts_with("- [") && l.ends_with("pages_dropped=0"))
    );
}

#[test]
fn without_a_usable_index_folder_packs_still_work() {
    let world = World::new();
    let vault = world.example_vault("vault");
    // The cache location is a file, so no index can be made there.
    let blocker = world.path().join("not-a-folder");
    fs::write(&blocker, "x").unwrap();
    let out = world
        .cmd()
        .env("XDG_CACHE_HOME", &blocker)
        .args(["pack", "paxos", "--no-log", "--format", "json", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(json["pages"][0]["path"], "concepts/paxos.md");
    assert_eq!(json["signal_errors"][0]["arm"], "bm25");
    assert!(stderr(&out).contains("no index"), "{}", stderr(&out));
}

#[test]
fn an_empty_vault_gives_empty_results() {
    let world = World::new();
    let vault = world.vault("empty", &[]);
    let out = ok(&world.pack(&vault, &["anything"]));
    assert!(out.contains("No relevant pages found."));
    let out = ok(&world.pack(&vault, &["--recent"]));
    assert!(out.contains("No recent pages found."));
    let out = world
        .cmd()
        .args(["search", "anything", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(ok(&out), "No notes match 'anything'.\n");
    let out = world
        .cmd()
        .args(["search", "x", "--limit", "0", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn eval_reports_evidence_and_its_notes_in_packs() {
    let world = World::new();
    let corpus = world.path().join("corpus.jsonl");
    let filler = "Field notes were copied out by hand each evening. ".repeat(12);
    let docs = [
        (
            "g1",
            "Glacier retreat",
            format!(
                "{filler}Alpine glaciers lost a third of their ice mass between 1990 and 2020. {filler}"
            ),
        ),
        (
            "c/2",
            "Coral bleaching",
            format!("Marine heatwaves bleach reef corals within weeks. {filler}"),
        ),
        (
            "x3",
            "Bread",
            format!("Sourdough needs a lively starter. {filler}"),
        ),
    ];
    let lines: Vec<String> = docs
        .iter()
        .map(|(id, title, text)| {
            serde_json::json!({"_id": id, "title": title, "text": text}).to_string()
        })
        .collect();
    common::write(&corpus, lines.join("\n").as_bytes());
    let queries = world.path().join("queries.tsv");
    common::write(
        &queries,
        b"q1\tglacier ice mass loss\nq2\tcoral reef heatwaves\nq3\tbread starter\n",
    );
    // q1 names its document; q2 gives an answer and no document; q3 has
    // no evidence and is not scored.
    let evidence = world.path().join("evidence.jsonl");
    common::write(
        &evidence,
        concat!(
            r#"{"qid": "q1", "doc_id": "g1", "sentences": ["Alpine glaciers lost a third of their ice mass between 1990 and 2020."]}"#,
            "\n",
            r#"{"qid": "q2", "answers": ["within a year", "within weeks"]}"#,
            "\n"
        )
        .as_bytes(),
    );
    let eval = |args: &[&str]| {
        ok(&world
            .cmd()
            .args(["eval", "--model", "none"])
            .args(args)
            .arg("--corpus")
            .arg(&corpus)
            .arg("--queries")
            .arg(&queries)
            .arg("--evidence")
            .arg(&evidence)
            .output()
            .unwrap())
    };
    let out = eval(&["--format", "json", "--budgets", "60,2000"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let packs = json["packs"].as_array().unwrap();
    let row = |budget: u64| packs.iter().find(|r| r["budget"] == budget).unwrap();
    // Sixty tokens hold the header and no page.
    assert_eq!(row(60)["queries"], 2);
    assert_eq!(row(60)["evidence_in_pack"], 0.0);
    assert_eq!(row(60)["notes_in_pack"], 0.0);
    assert!(row(60)["mean_tokens"].as_f64().unwrap() <= 60.0);
    assert_eq!(row(2000)["evidence_in_pack"], 1.0);
    assert_eq!(row(2000)["notes_in_pack"], 1.0);

    let text = eval(&["--budgets", "2000"]);
    assert!(
        text.contains("budget  queries  in pack  notes in pack  mean tokens\n"),
        "{text}"
    );
    assert!(
        text.contains("  2000        2   1.0000         1.0000"),
        "{text}"
    );
}

#[test]
fn a_dotenv_found_walking_up_chooses_the_vault_but_runs_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new();
    one_page_vault(&world, "envvault");
    let ran = world.path().join("ran");
    let program = world.work().join("x");
    write(
        &program,
        format!("#!/bin/sh\ntouch {}\n", ran.display()).as_bytes(),
    );
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).unwrap();
    write(
        &world.work().join(".env"),
        b"OBSIDIAN_VAULT_PATH=../envvault\nQMD_WIKI_COLLECTION=wiki\nQMD_CLI=./x\n\
          CTXPACK_DAEMON=1\nCTXPACK_STORE=postgres://elsewhere.invalid/db\n",
    );
    let out = world
        .cmd()
        .current_dir(world.work())
        .env(
            "PATH",
            format!(".:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .args(["pack", "raft", "--no-log"])
        .output()
        .unwrap();
    let stderr = common::stderr(&out);
    assert!(ok(&out).contains("[[envvault]]"));
    assert!(
        stderr.contains("warning: CTXPACK_DAEMON, CTXPACK_STORE, QMD_CLI in ")
            && stderr.contains("ignored: a .env found by walking up from the working folder may only choose the vault"),
        "{stderr}"
    );
    assert!(!ran.exists(), "the .env's program ran");
    // Neither `qmd` in the working folder (via a relative PATH entry) runs.
    let qmd = world.work().join("qmd");
    fs::copy(&program, &qmd).unwrap();
    let out = world
        .cmd()
        .current_dir(world.work())
        .env(
            "PATH",
            format!(".:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .args(["pack", "raft", "--no-log"])
        .output()
        .unwrap();
    assert!(ok(&out).contains("[[envvault]]"));
    assert!(!ran.exists(), "a qmd in the working folder ran");
}

/// The allocator options `main.rs` sets are mimalloc's purge delay and
/// its transparent huge pages, and they are in force from the start: mimalloc lists its options, by name, as it
/// initialises (before `main`), when asked to be verbose.
#[test]
fn the_allocator_keeps_freed_memory_from_the_start() {
    let world = World::new();
    let out = world
        .cmd()
        .arg("--version")
        .env("MIMALLOC_VERBOSE", "1")
        .output()
        .unwrap();
    let stderr = common::stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("option 'purge_delay': -1"),
        "mimalloc started with another purge delay:\n{stderr}"
    );
    assert!(
        stderr.contains("option 'allow_thp': 0"),
        "mimalloc started with transparent huge pages:\n{stderr}"
    );
}

/// The executable is linked at a fixed address on Linux (build.rs: no
/// relocation at start): its ELF type is `ET_EXEC`, not the `ET_DYN` of
/// a position-independent executable.
#[cfg(target_os = "linux")]
#[test]
fn the_executable_needs_no_relocation_at_start() {
    let elf = std::fs::read(env!("CARGO_BIN_EXE_ctxpack")).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");
    const ET_EXEC: u16 = 2;
    assert_eq!(
        u16::from_le_bytes([elf[16], elf[17]]),
        ET_EXEC,
        "ctxpack was linked as a PIE"
    );
}

// ---------------------------------------------------------------- --help

/// The long options of one `--help` page, each with its description
/// (continuation lines joined), and the headings in order.
fn help_options(help: &str) -> (Vec<(String, String)>, Vec<String>) {
    let mut options: Vec<(String, String)> = Vec::new();
    let mut headings = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if !line.starts_with(' ') && line.ends_with(':') {
            headings.push(line.trim_end_matches(':').to_string());
        } else if trimmed.starts_with('-') {
            // The flag, then two spaces, then its description (or the
            // description alone on the next lines when the flag is long).
            let (spec, text) = trimmed.split_once("  ").unwrap_or((trimmed, ""));
            let long = spec
                .split([',', ' '])
                .find(|word| word.starts_with("--"))
                .unwrap_or_else(|| panic!("no long flag in {line:?}"));
            options.push((long.to_string(), text.trim().to_string()));
        } else if let Some((_, text)) = options.last_mut()
            && !trimmed.is_empty()
            && line.starts_with("  ")
        {
            text.push(' ');
            text.push_str(trimmed);
        }
    }
    (options, headings)
}

/// Each command's help lists the options it takes and no other: the
/// store, model and vector options only where the command uses them, the
/// options every command takes under "Global options", each one described,
/// and env hints without an empty value.
#[test]
fn every_command_help_lists_only_its_own_options_each_described() {
    let world = World::new();
    // The options that once were global to every command, and the
    // commands that take each.
    let index_options = [
        "--store",
        "--vault-id",
        "--model",
        "--ann",
        "--exact",
        "--vectors",
        "--reranker",
        "--daemon",
    ];
    let ranking = &index_options[..];
    let serving = &index_options[..7];
    let commands: [(&[&str], &[&str]); 13] = [
        (&[], &[]),
        (&["pack"], ranking),
        (&["search"], ranking),
        (&["index"], &index_options[..6]),
        (&["status"], &index_options[..3]),
        (&["audit"], &[]),
        (
            &["mark-useful"],
            &["--store", "--vault-id", "--model", "--daemon"],
        ),
        (&["eval"], serving),
        (&["serve"], serving),
        (&["assemble"], &["--store", "--vault-id"]),
        (&["model", "import"], &[]),
        (&["model", "list"], &[]),
        // `model embed` has a --model of its own: the model to embed with.
        (&["model", "embed"], &["--model"]),
    ];
    for (command, expected) in commands {
        let out = world.cmd().args(command).arg("--help").output().unwrap();
        let help = ok(&out);
        let (options, headings) = help_options(&help);
        let listed: Vec<&str> = options
            .iter()
            .map(|(flag, _)| flag.as_str())
            .filter(|flag| index_options.contains(flag))
            .collect();
        assert_eq!(listed, expected, "{command:?} --help:\n{help}");
        for (flag, text) in &options {
            // clap's own hints ([default: …], [possible values: …]) are no
            // description.
            let described = text
                .split('[')
                .map(|part| part.split_once(']').map_or(part, |(_, rest)| rest))
                .any(|part| !part.trim().is_empty());
            assert!(
                described,
                "{command:?} --help: {flag} has no description:\n{help}"
            );
        }
        assert!(!help.contains("=]"), "{command:?} --help:\n{help}");
        // The global options come last, under their own heading.
        assert_eq!(
            headings.last().map(String::as_str),
            Some("Global options"),
            "{command:?} --help:\n{help}"
        );
        let global = &help[help.find("\nGlobal options:\n").unwrap()..];
        let (global, _) = help_options(global);
        let global: Vec<&str> = global.iter().map(|(flag, _)| flag.as_str()).collect();
        assert_eq!(
            global,
            ["--vault", "--index-dir", "--quiet"],
            "{command:?} --help:\n{help}"
        );
    }
    // The old placement of a store option is refused where it means
    // nothing, with the usage exit code.
    let out = world
        .cmd()
        .args(["audit", "--reranker", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unexpected argument '--reranker'"),
        "{}",
        stderr(&out)
    );
}

/// `--format xml` on a command that prints a pack points at `--style xml`,
/// the flag that chooses the layout; exit code 2.
#[test]
fn format_xml_suggests_style_xml() {
    let world = World::new();
    let vault = world.example_vault("vault");
    for command in [
        &["pack", "raft"][..],
        &[
            "assemble",
            "--work",
            "w",
            "--scenario",
            "s",
            "--chapter",
            "1",
            "--intent",
            "i",
        ],
    ] {
        let out = world
            .cmd()
            .args(command)
            .args(["--format", "xml", "--vault"])
            .arg(&vault)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        let err = stderr(&out);
        assert!(
            err.contains("invalid value 'xml' for '--format <FORMAT>'"),
            "{command:?}: {err}"
        );
        assert!(
            err.contains("tip: 'xml' is a layout: print the pack in it with '--style xml'"),
            "{command:?}: {err}"
        );
        assert_eq!(stdout(&out), "", "{command:?}");
    }
    // A value that is no layout either gets no such tip.
    let out = world
        .cmd()
        .args(["pack", "raft", "--format", "yaml", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("[possible values: markdown, json]"));
    assert!(!stderr(&out).contains("--style"), "{}", stderr(&out));
    // The formats themselves still parse.
    let json = ok(&world.pack(&vault, &["raft", "--format", "json"]));
    assert!(json.starts_with('{'), "{json}");
}

#[test]
fn a_bad_source_date_epoch_is_a_usage_error() {
    let world = World::new();
    let vault = world.vault("vault", &[("a.md", "---\ntitle: raft\n---\nx\n")]);
    let out = world
        .cmd()
        .env("SOURCE_DATE_EPOCH", "soon")
        .args(["pack", "raft", "--no-log", "--vault"])
        .arg(&vault)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("SOURCE_DATE_EPOCH 'soon' is not a number of seconds"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
}

/// A note found by a property shows that property as its snippet, and a
/// search a filter emptied says the filter did it.
#[test]
fn search_shows_the_property_it_matched_and_blames_a_filter() {
    let world = World::new();
    let vault = world.vault(
        "films",
        &[
            (
                "Blade Runner.md",
                "---\ncategories: \"[[Movies]]\"\ndirector: \"[[Ridley Scott]]\"\n---\nRewatched the Final Cut.\n",
            ),
            ("Out of Control.md", "---\ncategories: \"[[Books]]\"\n---\nSwarm systems.\n"),
        ],
    );
    let search = |args: &[&str]| {
        ok(&world
            .cmd()
            .arg("search")
            .args(args)
            .arg("--vault")
            .arg(&vault)
            .output()
            .unwrap())
    };
    let found = search(&["Ridley Scott"]);
    assert!(found.contains("\n     director: Ridley Scott\n"), "{found}");
    assert_eq!(
        search(&["swarm", "--where", "categories=Movies"]),
        "No note the filter lets through matches 'swarm'.\n"
    );
    let json = search(&["swarm", "--where", "categories=Movies", "--format", "json"]);
    assert!(json.contains("\"filtered\": true"), "{json}");
    assert_eq!(search(&["zebra"]), "No notes match 'zebra'.\n");
}

/// A template or recipe that is a device is refused, not read without
/// end; a cache folder set inside the vault gets no prepared vocabulary.
#[test]
fn local_files_are_read_bounded_and_the_vault_is_never_a_cache() {
    let world = World::new();
    let vault = world.vault("v", &[("a.md", "# A\n\nzebra crossing\n")]);
    let output = world.pack(&vault, &["zebra", "--template", "/dev/zero"]);
    common::fails(&output, 2, "cannot read template /dev/zero: a device");
    let output = world
        .cmd()
        .args([
            "pack",
            "zebra",
            "--no-log",
            "--tokenizer",
            "o200k",
            "--vault",
        ])
        .arg(&vault)
        .arg("--index-dir")
        .arg(world.path().join("index"))
        .env("XDG_CACHE_HOME", vault.join(".cache"))
        .output()
        .unwrap();
    ok(&output);
    assert!(
        !vault.join(".cache").exists(),
        "a cache was written in the vault"
    );
}

/// A vault id the store cannot take is refused saying why, not as if none
/// had been given (before any connection is tried).
#[test]
fn a_vault_id_too_long_or_with_a_control_character_is_refused_saying_so() {
    let world = World::new();
    let vault = world.path().join("vault");
    fs::create_dir_all(&vault).unwrap();
    fs::write(vault.join("a.md"), "# a\n\nx\n").unwrap();
    let store = "postgres://nobody@127.0.0.1:1/none";
    let long = "x".repeat(201);
    for (id, why) in [
        (long.as_str(), "this one is 201 bytes"),
        ("tab\there", "holds a control character"),
    ] {
        let output = world
            .cmd()
            .args([
                "index",
                "--store",
                store,
                "--model",
                "none",
                "--vault-id",
                id,
                "--vault",
            ])
            .arg(&vault)
            .output()
            .unwrap();
        common::fails(&output, 2, "at most 200 bytes with no control character");
        common::fails(&output, 2, why);
    }
}

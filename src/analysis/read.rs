//! One vault file read under the privacy policy: its file entry (size,
//! time, content hash, problems) and the prepared note. Both stores read
//! through here, so a note has the same hash and the same text in each.

use crate::note::Diagnostic;
use crate::privacy::Policy;
use crate::vault::walk;
use std::path::Path;

/// One Markdown file as last seen.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub mtime_ns: i128,
    pub hash: [u8; 32],
    /// Problems found reading or parsing it (a skipped file has one).
    pub problems: Vec<String>,
    /// Whether the file is a packable note (not skipped, not a role file).
    pub is_note: bool,
    /// How many sections of the note are indexed.
    pub sections: u32,
    /// For a symlink, its target's relative path (a change to the target
    /// is a change to the link).
    pub link_target: Option<String>,
}

/// A file to (re)index.
pub(crate) struct Pending {
    pub found: walk::Found,
    pub stat: Option<(u64, i128)>,
    pub previous_hash: Option<[u8; 32]>,
}

pub(crate) fn walk_diagnostics(
    problems: Vec<(String, String)>,
    policy: &Policy,
) -> Vec<Diagnostic> {
    // A file in a private folder is never opened, and not even its name
    // reaches a diagnostic: nor does a special file, a link or an odd name
    // the walk found there.
    let mut diagnostics: Vec<Diagnostic> = problems
        .into_iter()
        .filter(|(path, _)| !policy.is_private_path(path))
        .map(|(path, message)| Diagnostic { path, message })
        .collect();
    diagnostics.sort();
    diagnostics
}

pub(crate) fn read_and_parse(
    root: &Path,
    item: &Pending,
    max_bytes: u64,
    policy: &Policy,
) -> (FileEntry, Option<crate::privacy::Prepared>) {
    let rel = &item.found.rel_path;
    let (size, mtime_ns) = item.stat.unwrap_or((0, 0));
    let mut entry = FileEntry {
        path: rel.clone(),
        size,
        mtime_ns,
        hash: [0; 32],
        problems: Vec::new(),
        is_note: false,
        sections: 0,
        link_target: item.found.target.clone(),
    };
    let is_role = walk::ROLE_FILES.contains(&rel.as_str());
    // Bases files are listed (so the vault knows them) but read only when
    // a pack expands an embed of one.
    if rel == crate::vault::log::LOG_FILE || walk::is_base(rel) {
        return (entry, None);
    }
    // A file in a private folder is never opened, so nothing about it (not
    // even that it cannot be read) reaches a diagnostic.
    let private_path = policy.is_private_path(rel)
        || item
            .found
            .target
            .as_deref()
            .is_some_and(|target| policy.is_private_path(target));
    if private_path {
        // Not read, but known: counted among the private notes, and seen as
        // unchanged until its size or time changes.
        let mut hasher = blake3::Hasher::new();
        hasher.update(policy.fingerprint().as_bytes());
        hasher.update(b"\0private folder\0");
        hasher.update(rel.as_bytes());
        hasher.update(&size.to_le_bytes());
        hasher.update(&mtime_ns.to_le_bytes());
        entry.hash = *hasher.finalize().as_bytes();
        return (entry, None);
    }
    match walk::read_text(&item.found.read_path(root), max_bytes) {
        Ok((text, mtime)) => {
            // The policy is part of what a note's content is: under another
            // policy the same file reads differently (and is re-embedded).
            let mut hasher = blake3::Hasher::new();
            hasher.update(policy.fingerprint().as_bytes());
            hasher.update(text.as_bytes());
            entry.hash = *hasher.finalize().as_bytes();
            let mtime = mtime.map(chrono::DateTime::<chrono::Utc>::from);
            // A private note is remembered as a file (so it is not read again
            // until it changes) and never indexed.
            let target_private = item
                .found
                .target
                .as_deref()
                .is_some_and(|target| policy.is_private_path(target));
            let Some(prepared) = policy
                .prepare(rel, &text, mtime)
                .filter(|_| !target_private)
            else {
                if let Some(why) = Policy::unreadable(rel, &text) {
                    entry.problems.push(why.to_string());
                }
                return (entry, None);
            };
            entry.problems = prepared.problems.clone();
            entry.is_note = !is_role;
            (entry, (!is_role).then_some(prepared))
        }
        Err(problem) => {
            if problem.is_passing() {
                // Not the file the walk saw: no stat of it stands, so the
                // next walk reads the path again.
                entry.size = 0;
                entry.mtime_ns = 0;
            }
            entry.problems.push(problem.to_string());
            (entry, None)
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A note (or its folder) swapped for a symlink between the walk and
    /// the read: the walk judged a regular file, so the link is not
    /// followed, and the stat the walk took does not stand.
    #[test]
    fn a_symlink_swapped_in_after_the_walk_is_not_followed() {
        let world = tempfile::tempdir().unwrap();
        let base = world.path().canonicalize().unwrap();
        let root = base.join("vault");
        fs::create_dir_all(root.join("notes")).unwrap();
        fs::create_dir_all(root.join("journal")).unwrap();
        fs::write(base.join("outside.md"), "# o\n\nOUTSIDE kumquat\n").unwrap();
        fs::write(root.join("journal/a.md"), "# j\n\nJOURNAL kumquat\n").unwrap();
        fs::write(root.join("notes/a.md"), "# a\n\npublic kumquat\n").unwrap();
        fs::write(
            root.join(".ctxpack.yaml"),
            "private:\n  folders: [\"journal/\"]\n",
        )
        .unwrap();
        let policy = Policy::load(&root).unwrap();
        let walked = walk::walk(&root, &[]);
        let found = walked
            .files
            .iter()
            .find(|f| f.rel_path == "notes/a.md")
            .unwrap()
            .clone();
        let pending = Pending {
            stat: found.stat,
            found,
            previous_hash: None,
        };
        let (entry, prepared) = read_and_parse(&root, &pending, 1 << 20, &policy);
        assert!(prepared.unwrap().text.contains("public kumquat"));
        assert_ne!(entry.size, 0);

        let expect_refused = |what: &str| {
            let (entry, prepared) = read_and_parse(&root, &pending, 1 << 20, &policy);
            assert!(prepared.is_none(), "{what}: read through the link");
            assert_eq!(
                entry.problems,
                [crate::safe_fs::SWAPPED_FOR_A_LINK],
                "{what}"
            );
            assert_eq!((entry.size, entry.mtime_ns), (0, 0), "{what}");
        };
        // The note itself, to a file outside the vault.
        fs::rename(root.join("notes/a.md"), base.join("a.real")).unwrap();
        symlink(base.join("outside.md"), root.join("notes/a.md")).unwrap();
        expect_refused("the note swapped for a link out of the vault");
        // Its folder, to the private folder holding a note of that name.
        fs::remove_file(root.join("notes/a.md")).unwrap();
        fs::rename(base.join("a.real"), root.join("notes/a.md")).unwrap();
        fs::rename(root.join("notes"), base.join("notes.real")).unwrap();
        symlink("journal", root.join("notes")).unwrap();
        expect_refused("the folder swapped for a link into a private folder");
    }
}

//! A writing project's tree in the store (`ctxpack_project_entries`): what
//! `index --store` records of a project so that `assemble --store` can read
//! it without the folder, and the read side, one repeatable-read
//! transaction per pack so that a pack sees one committed sync.
//!
//! The store knows nothing of recipes: it keeps rows the assembler made
//! and hands back those a caller may see. The one rule it applies is the
//! library gate, inside the SQL: a row whose path lies in a library the
//! caller has not opened is never returned, and a row leading into one is
//! returned without its content or its exact target.

use std::collections::HashMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use tokio_postgres::Transaction;

use super::connection::{Connection, Held, StoreUrl};

/// One entry of a project's tree, as a sync saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectEntry {
    /// Relative to the root, `/`-separated, through real folders only.
    pub path: String,
    /// `d` folder, `f` file, `s` special file, `x` broken symlink, `o` a
    /// symlink leading outside the root (for a symlink: what it leads to).
    pub kind: char,
    /// For a symlink inside the root: its target, relative to the root
    /// (`""` is the root itself).
    pub target: Option<String>,
    /// Whether the vault's walk lists the path.
    pub listed: bool,
    /// The library folders (names) the path itself lies in.
    pub inside: Vec<String>,
    /// The library folders (names) the path's target lies in.
    pub reaches: Vec<String>,
    /// The innermost library folder holding the target, relative to the root.
    pub library: Option<String>,
    /// What reading the file gives, encoded by the assembler.
    pub content: Option<Vec<u8>>,
}

impl ProjectEntry {
    fn hash(&self) -> Vec<u8> {
        let bytes = postcard::to_allocvec(self).unwrap_or_default();
        blake3::hash(&bytes).as_bytes().to_vec()
    }
}

/// Rows written per statement.
const BATCH: usize = 1_000;

/// Replaces the project rows of vault `vault` with `entries`, writing only
/// the rows that differ. Returns how many rows were written or deleted,
/// and, of the files the vault's own rows do not count (the recipe,
/// schemas, bindings: files with a content that are not notes), how many
/// were added, changed and removed.
pub(super) async fn write_entries(
    tx: &Transaction<'_>,
    vault: i32,
    entries: &[ProjectEntry],
) -> Result<(usize, [usize; 3])> {
    let mut stored: HashMap<String, (Vec<u8>, bool)> = HashMap::new();
    for row in tx
        .query(
            "SELECT path, hash, NOT listed AND content IS NOT NULL \
             FROM ctxpack_project_entries WHERE vault = $1",
            &[&vault],
        )
        .await?
    {
        stored.insert(row.get(0), (row.get(1), row.get(2)));
    }
    let mut changed: Vec<(&ProjectEntry, Vec<u8>)> = Vec::new();
    let mut others = [0; 3];
    for entry in entries {
        let hash = entry.hash();
        let before = stored.remove(&entry.path);
        if before.as_ref().map(|(hash, _)| hash) != Some(&hash) {
            if !entry.listed && entry.content.is_some() {
                others[usize::from(before.is_some())] += 1;
            }
            changed.push((entry, hash));
        }
    }
    others[2] = stored.values().filter(|(_, other)| *other).count();
    let mut gone: Vec<String> = stored.into_keys().collect();
    gone.sort();
    for chunk in gone.chunks(BATCH) {
        let chunk = chunk.to_vec();
        tx.execute(
            "DELETE FROM ctxpack_project_entries WHERE vault = $1 AND path = ANY($2)",
            &[&vault, &chunk],
        )
        .await?;
    }
    for chunk in changed.chunks(BATCH) {
        for (entry, hash) in chunk {
            let kind = i8::try_from(u32::from(entry.kind)).unwrap_or(b'?' as i8);
            tx.execute(
                "INSERT INTO ctxpack_project_entries \
                 (vault, path, kind, target, listed, inside, reaches, library, content, hash) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                 ON CONFLICT (vault, path) DO UPDATE SET kind = EXCLUDED.kind, \
                 target = EXCLUDED.target, listed = EXCLUDED.listed, inside = EXCLUDED.inside, \
                 reaches = EXCLUDED.reaches, library = EXCLUDED.library, \
                 content = EXCLUDED.content, hash = EXCLUDED.hash",
                &[
                    &vault,
                    &entry.path,
                    &kind,
                    &entry.target,
                    &entry.listed,
                    &entry.inside,
                    &entry.reaches,
                    &entry.library,
                    &entry.content,
                    hash,
                ],
            )
            .await?;
        }
    }
    Ok((changed.len() + gone.len(), others))
}

/// One project in the store, read inside one repeatable-read, read-only
/// transaction: every call sees the same committed sync, whatever syncs
/// commit meanwhile. Dropped, its connection closes and the transaction
/// with it (the client goes back to the process's pool).
pub struct ProjectSnapshot {
    held: Held,
    vault: i32,
    generation: i64,
}

impl ProjectSnapshot {
    /// Opens the project synced as vault `name`; `None` when the store has
    /// no such vault or the vault holds no project.
    pub fn open(url: &StoreUrl, name: &str) -> Result<Option<ProjectSnapshot>> {
        // Its own pool: each pack holds one client throughout, and must not
        // wait for one the libraries' ranking holds.
        let connection = Connection::open(url, 8)?;
        connection.check_schema()?;
        let held = connection.hold()?;
        let name = name.to_string();
        let found = held.run(move |client| async move {
            client
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await?;
            let row = client
                .query_opt(
                    "SELECT v.id, v.generation FROM ctxpack_vaults v WHERE v.name = $1 \
                     AND EXISTS (SELECT 1 FROM ctxpack_project_entries e WHERE e.vault = v.id)",
                    &[&name],
                )
                .await?;
            Ok(row.map(|row| (row.get::<_, i32>(0), row.get::<_, i64>(1))))
        })?;
        Ok(found.map(|(vault, generation)| ProjectSnapshot {
            held,
            vault,
            generation,
        }))
    }

    /// The project vault's generation in this snapshot.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// Every row outside the libraries, without content: rows whose own
    /// path lies in a library are left in the database, and a row leading
    /// into one comes with its target cut to the library's folder. A row
    /// whose content may be read has `Some(empty)` for it ([`Self::contents`]
    /// fetches it).
    pub fn outside_libraries(&self) -> Result<Vec<ProjectEntry>> {
        self.rows(None)
    }

    /// The rows that lie in or lead into libraries, all of whose names are
    /// in `open`, without content as above. A row in open libraries that
    /// leads into one not open comes with its target cut to that library's
    /// folder and no content, as a row outside the libraries does: the
    /// gate refuses it and the report names it, as over the folder.
    pub fn in_libraries(&self, open: &[String]) -> Result<Vec<ProjectEntry>> {
        self.rows(Some(open.to_vec()))
    }

    fn rows(&self, open: Option<Vec<String>>) -> Result<Vec<ProjectEntry>> {
        let vault = self.vault;
        self.held.run(move |client| async move {
            let rows = match &open {
                None => {
                    client
                        .query(
                            "SELECT path, kind, \
                             CASE WHEN cardinality(reaches) = 0 OR target IS NULL THEN target \
                             ELSE library END, \
                             listed, inside, reaches, library, \
                             CASE WHEN cardinality(reaches) = 0 AND content IS NOT NULL \
                             THEN '\\x'::bytea END \
                             FROM ctxpack_project_entries \
                             WHERE vault = $1 AND cardinality(inside) = 0 ORDER BY path",
                            &[&vault],
                        )
                        .await?
                }
                Some(open) => {
                    client
                        .query(
                            "SELECT path, kind, \
                             CASE WHEN reaches <@ $2::text[] THEN target ELSE library END, \
                             listed, inside, reaches, library, \
                             CASE WHEN content IS NOT NULL AND reaches <@ $2::text[] \
                             THEN '\\x'::bytea END \
                             FROM ctxpack_project_entries \
                             WHERE vault = $1 AND cardinality(reaches) > 0 \
                             AND inside <@ $2::text[] \
                             AND (reaches <@ $2::text[] OR cardinality(inside) > 0) \
                             ORDER BY path",
                            &[&vault, open],
                        )
                        .await?
                }
            };
            Ok(rows
                .into_iter()
                .map(|row| ProjectEntry {
                    path: row.get(0),
                    kind: char::from(row.get::<_, i8>(1) as u8),
                    target: row.get(2),
                    listed: row.get(3),
                    inside: row.get(4),
                    reaches: row.get(5),
                    library: row.get(6),
                    content: row.get(7),
                })
                .collect())
        })
    }

    /// The contents of the rows at `paths`, or of every row under the
    /// folder `under` (relative to the root), whose library names are all
    /// in `open`: `(path, content)`. The gate is the query's: a row in or
    /// leading into a library not open is not returned, whatever is asked.
    pub fn contents(
        &self,
        paths: &[String],
        under: Option<&str>,
        open: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>> {
        let vault = self.vault;
        let paths = paths.to_vec();
        let prefix = under.map(|dir| format!("{dir}/"));
        let open = open.to_vec();
        self.held.run(move |client| async move {
            let rows = client
                .query(
                    "SELECT path, content FROM ctxpack_project_entries \
                     WHERE vault = $1 AND content IS NOT NULL \
                     AND (path = ANY($2) OR left(path, length($3)) = $3) \
                     AND inside <@ $4::text[] AND reaches <@ $4::text[] ORDER BY path",
                    &[&vault, &paths, &prefix, &open],
                )
                .await?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    /// The generation of each vault in `names` in this snapshot (a vault
    /// the store does not hold is left out).
    pub fn generations(&self, names: &[String]) -> Result<Vec<(String, i64)>> {
        let names = names.to_vec();
        self.held.run(move |client| async move {
            let rows = client
                .query(
                    "SELECT name, generation FROM ctxpack_vaults WHERE name = ANY($1) \
                     ORDER BY name",
                    &[&names],
                )
                .await?;
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

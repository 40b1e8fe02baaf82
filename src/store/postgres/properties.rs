//! Every note's property values for filters (`crate::filter`), written
//! and deleted by a sync beside the note's own row: one row per note in
//! `ctxpack_note_properties` (the postcard of its [`NoteProperties`], its
//! date and its folded tags) and one per value in `ctxpack_note_values`,
//! typed as a filter types it, which `super::filters` reads in SQL.

use std::sync::Arc;

use anyhow::Result;
use tokio_postgres::Transaction;

use crate::filter::{NoteProperties, PropertyTable, TypedValue};
use crate::note::Note;
use crate::note_tables::MetaTable;
use crate::text::fold;

use super::connection::Connection;

/// What a sync writes of one note for filters.
#[derive(Debug, Default)]
pub(super) struct PropertyRow {
    pub path: String,
    /// Postcard of the note's [`NoteProperties`].
    pub props: Vec<u8>,
    pub updated: Option<i64>,
    /// Folded, as bytes.
    pub tags: Vec<Vec<u8>>,
    /// `(folded key, place among the key's values, value)`.
    pub values: Vec<(String, i32, TypedValue)>,
}

impl PropertyRow {
    pub(super) fn of(note: &Note) -> PropertyRow {
        let props = NoteProperties::of(note);
        let values = props
            .0
            .iter()
            .flat_map(|(key, values)| {
                values
                    .iter()
                    .enumerate()
                    .map(move |(ord, value)| (key.clone(), ord as i32, TypedValue::of(value)))
            })
            .collect();
        PropertyRow {
            path: note.meta.path.clone(),
            props: postcard::to_allocvec(&props).unwrap_or_default(),
            updated: note.meta.date(),
            tags: note
                .meta
                .tags
                .iter()
                .map(|t| fold(t).into_bytes())
                .collect(),
            values,
        }
    }
}

/// Rows per statement.
const BATCH: usize = 2_000;

/// Writes (or replaces) the property rows of `notes`.
pub(super) async fn write_properties(
    tx: &Transaction<'_>,
    vault: i32,
    notes: &[PropertyRow],
) -> Result<()> {
    for chunk in notes.chunks(BATCH) {
        let paths: Vec<&str> = chunk.iter().map(|row| row.path.as_str()).collect();
        let props: Vec<&[u8]> = chunk.iter().map(|row| row.props.as_slice()).collect();
        let updated: Vec<Option<i64>> = chunk.iter().map(|row| row.updated).collect();
        // An array of arrays must be rectangular: each note's tags go as
        // one array literal of hex bytes, unpacked on the server.
        let tags: Vec<String> = chunk.iter().map(|row| tag_literal(&row.tags)).collect();
        tx.execute(
            "INSERT INTO ctxpack_note_properties (vault, path, props, updated, tags) \
             SELECT $1, p, b, u, t::bytea[] FROM unnest($2::text[], $3::bytea[], $4::int8[], $5::text[]) \
             AS x(p, b, u, t) \
             ON CONFLICT (vault, path) DO UPDATE SET props = EXCLUDED.props, \
             updated = EXCLUDED.updated, tags = EXCLUDED.tags",
            &[&vault, &paths, &props, &updated, &tags],
        )
        .await?;
        tx.execute(
            "DELETE FROM ctxpack_note_values WHERE vault = $1 AND path = ANY($2)",
            &[&vault, &paths],
        )
        .await?;
        let mut columns = ValueColumns::default();
        for row in chunk {
            for (key, ord, value) in &row.values {
                columns.push(&row.path, key, *ord, value);
            }
        }
        tx.execute(
            "INSERT INTO ctxpack_note_values (vault, path, key, ord, value, num, at_s, at_ns, day) \
             SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int4[], $5::bytea[], \
             $6::float8[], $7::int8[], $8::int4[], $9::int4[])",
            &[
                &vault,
                &columns.paths,
                &columns.keys,
                &columns.ords,
                &columns.values,
                &columns.nums,
                &columns.at_s,
                &columns.at_ns,
                &columns.days,
            ],
        )
        .await?;
    }
    Ok(())
}

/// A PostgreSQL array literal of `bytea` values in hex (`{"\\x6162"}`).
fn tag_literal(tags: &[Vec<u8>]) -> String {
    use std::fmt::Write;
    let mut out = String::from("{");
    for (i, tag) in tags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("\"\\\\x");
        for byte in tag {
            let _ = write!(out, "{byte:02x}");
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// The value rows of a batch, one array per column.
#[derive(Default)]
struct ValueColumns<'a> {
    paths: Vec<&'a str>,
    keys: Vec<&'a str>,
    ords: Vec<i32>,
    values: Vec<&'a [u8]>,
    nums: Vec<Option<f64>>,
    at_s: Vec<Option<i64>>,
    at_ns: Vec<Option<i32>>,
    days: Vec<Option<i32>>,
}

impl<'a> ValueColumns<'a> {
    fn push(&mut self, path: &'a str, key: &'a str, ord: i32, value: &'a TypedValue) {
        self.paths.push(path);
        self.keys.push(key);
        self.ords.push(ord);
        self.values.push(value.folded.as_bytes());
        self.nums.push(value.number);
        self.at_s.push(value.date.map(|d| d.0));
        self.at_ns.push(value.date.map(|d| d.1 as i32));
        self.days.push(value.date.map(|d| d.2));
    }
}

/// Deletes the property rows of the notes at `paths`.
pub(super) async fn forget_properties(
    tx: &Transaction<'_>,
    vault: i32,
    paths: &[String],
) -> Result<()> {
    for chunk in paths.chunks(BATCH) {
        tx.execute(
            "DELETE FROM ctxpack_note_properties WHERE vault = $1 AND path = ANY($2)",
            &[&vault, &chunk],
        )
        .await?;
        tx.execute(
            "DELETE FROM ctxpack_note_values WHERE vault = $1 AND path = ANY($2)",
            &[&vault, &chunk],
        )
        .await?;
    }
    Ok(())
}

/// The property table of a vault's notes (`metas`, in path order); a note
/// without a row has no properties.
pub(super) fn read_properties(
    connection: &Connection,
    vault: i32,
    metas: &MetaTable,
) -> Result<Arc<PropertyTable>> {
    let rows = connection.run(move |client| async move {
        client
            .query(
                "SELECT path, props FROM ctxpack_note_properties WHERE vault = $1",
                &[&vault],
            )
            .await
    })?;
    let mut table = PropertyTable::from_notes(vec![NoteProperties::default(); metas.len()]);
    for row in rows {
        let path: &str = row.get(0);
        let bytes: &[u8] = row.get(1);
        if let Some(idx) = metas.position(path) {
            table.notes[idx] = postcard::from_bytes(bytes).map_err(|err| {
                anyhow::anyhow!("the store's properties of {path} do not decode: {err}")
            })?;
        }
    }
    Ok(Arc::new(table))
}

//! Every note's property values for filters (`crate::filter`), one row per
//! note in `ctxpack_note_properties`: written and deleted by a sync beside
//! the note's own row, read by a server the first time a `--where` asks.

use std::sync::Arc;

use anyhow::Result;
use tokio_postgres::Transaction;

use crate::filter::{NoteProperties, PropertyTable};
use crate::note_tables::MetaTable;

use super::connection::Connection;

/// Rows per statement.
const BATCH: usize = 2_000;

/// Writes (or replaces) the property rows of `notes`: `(path, postcard
/// of its [`NoteProperties`])`.
pub(super) async fn write_properties(
    tx: &Transaction<'_>,
    vault: i32,
    notes: &[(String, Vec<u8>)],
) -> Result<()> {
    for chunk in notes.chunks(BATCH) {
        let paths: Vec<&str> = chunk.iter().map(|(path, _)| path.as_str()).collect();
        let props: Vec<&[u8]> = chunk.iter().map(|(_, props)| props.as_slice()).collect();
        tx.execute(
            "INSERT INTO ctxpack_note_properties (vault, path, props) \
             SELECT $1, * FROM unnest($2::text[], $3::bytea[]) \
             ON CONFLICT (vault, path) DO UPDATE SET props = EXCLUDED.props",
            &[&vault, &paths, &props],
        )
        .await?;
    }
    Ok(())
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
    let mut table = PropertyTable {
        notes: vec![NoteProperties::default(); metas.len()],
    };
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

//! When a file's modification time says when its note was edited, and when
//! it only says when a checkout, a copy or a sync wrote the whole vault.

use crate::note::{NoteMeta, UpdatedSource};

/// File times this close (seconds) follow one another in one write of
/// many files: a clone, a copy, a first sync write file after file.
const SHARED_RUN_GAP_SECS: i64 = 2;
/// Fewer notes than this written together are a person's or an agent's
/// edits, not a whole vault written at once.
const MIN_SHARED_NOTES: usize = 5;

/// Marks the notes dated only by their file's time whose time is shared:
/// at least [`MIN_SHARED_NOTES`] of them, and at least half of all the
/// notes dated that way, written within seconds of one another (each at
/// most [`SHARED_RUN_GAP_SECS`] after the one before). Those times are a
/// checkout's, a copy's or a sync's (after `git clone` every note of a
/// vault has the clone's time), and say nothing of when anyone edited the
/// notes: a note so marked has no date ([`NoteMeta::date`]) and sorts after
/// the dated ones in recent order, as an undated note does. A note edited
/// since has a time of its own again.
///
/// Both stores run this over every note at each commit (a marking depends
/// on the other notes' times); it returns the notes whose marking changed.
pub(crate) fn mark_shared_file_times(metas: &mut [NoteMeta]) -> Vec<usize> {
    let mut file_timed: Vec<(i64, usize)> = metas
        .iter()
        .enumerate()
        .filter(|(_, meta)| {
            matches!(
                meta.updated_source,
                UpdatedSource::FileMtime | UpdatedSource::SharedFileTime
            )
        })
        .filter_map(|(idx, meta)| Some((meta.updated?, idx)))
        .collect();
    file_timed.sort_unstable();
    let mut shared = vec![false; file_timed.len()];
    let mut start = 0;
    while start < file_timed.len() {
        let mut end = start + 1;
        while end < file_timed.len()
            && file_timed[end].0.saturating_sub(file_timed[end - 1].0) <= SHARED_RUN_GAP_SECS
        {
            end += 1;
        }
        let run = end - start;
        if run >= MIN_SHARED_NOTES && 2 * run >= file_timed.len() {
            shared[start..end].fill(true);
        }
        start = end;
    }
    let mut changed = Vec::new();
    for (&(_, idx), shared) in file_timed.iter().zip(shared) {
        let source = if shared {
            UpdatedSource::SharedFileTime
        } else {
            UpdatedSource::FileMtime
        };
        if metas[idx].updated_source != source {
            metas[idx].updated_source = source;
            changed.push(idx);
        }
    }
    changed.sort_unstable();
    changed
}

/// How a vault's notes are dated, for `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DateSources {
    /// By a property (`updated`, `modified`, `date`, `created`) or a daily
    /// note's name.
    pub own: usize,
    pub file_time: usize,
    /// Undated: a file time most notes share.
    pub shared_file_time: usize,
    pub none: usize,
}

impl DateSources {
    pub(crate) fn of<'a>(metas: impl Iterator<Item = &'a NoteMeta>) -> DateSources {
        let mut sources = DateSources::default();
        for meta in metas {
            match (meta.updated_source, meta.updated) {
                (UpdatedSource::Updated | UpdatedSource::Created, _) => sources.own += 1,
                (UpdatedSource::FileMtime, Some(_)) => sources.file_time += 1,
                (UpdatedSource::SharedFileTime, _) => sources.shared_file_time += 1,
                _ => sources.none += 1,
            }
        }
        sources
    }
}

impl std::fmt::Display for DateSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} by their properties or names, {} by their file's time, {} undated",
            self.own,
            self.file_time,
            self.shared_file_time + self.none
        )?;
        if self.shared_file_time > 0 {
            write!(
                f,
                " ({} of them on a file time most notes share: a checkout, a copy or a sync)",
                self.shared_file_time
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, updated: Option<i64>, source: UpdatedSource) -> NoteMeta {
        let mut meta = crate::parse::parse_note(path, "Some text.\n", None).0.meta;
        meta.updated = updated;
        meta.updated_source = source;
        meta
    }

    fn sources(metas: &[NoteMeta]) -> Vec<UpdatedSource> {
        metas.iter().map(|m| m.updated_source).collect()
    }

    const DAY: i64 = 86_400;
    const CLONED: i64 = 1_780_000_000;

    #[test]
    fn a_checkouts_time_dates_no_note_and_an_edit_since_does() {
        use UpdatedSource::*;
        // Eight undated notes written by one clone over four seconds, two
        // notes with dates of their own (their times are not looked at).
        let mut metas: Vec<NoteMeta> = (0..8)
            .map(|i| meta(&format!("n{i}.md"), Some(CLONED + i / 2), FileMtime))
            .collect();
        metas.push(meta("dated.md", Some(CLONED - 300 * DAY), Updated));
        metas.push(meta("made.md", Some(CLONED - 600 * DAY), Created));
        assert_eq!(
            mark_shared_file_times(&mut metas),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(
            sources(&metas),
            [vec![SharedFileTime; 8], vec![Updated, Created]].concat()
        );
        assert!(
            metas[..8]
                .iter()
                .all(|m| m.date().is_none() && m.updated_at().is_none())
        );
        assert_eq!(metas[8].date(), Some(CLONED - 300 * DAY));
        // Marking again changes nothing.
        assert!(mark_shared_file_times(&mut metas).is_empty());
        // Two notes edited a day later have their own times; six still
        // share the clone's, most of the eight.
        metas[0].updated = Some(CLONED + DAY);
        metas[3].updated = Some(CLONED + DAY + 600);
        assert_eq!(mark_shared_file_times(&mut metas), vec![0, 3]);
        assert_eq!(metas[0].date(), Some(CLONED + DAY));
        assert_eq!(metas[1].date(), None);
        // Once edits leave fewer than five notes on the clone's time, those
        // times count as dates again.
        metas[1].updated = Some(CLONED + 2 * DAY);
        metas[2].updated = Some(CLONED + 3 * DAY);
        assert_eq!(mark_shared_file_times(&mut metas), vec![1, 2, 4, 5, 6, 7]);
        assert!(metas[..8].iter().all(|m| m.updated_source == FileMtime));
    }

    #[test]
    fn edits_spread_over_time_or_a_minority_written_together_keep_their_times() {
        use UpdatedSource::*;
        // Twelve notes edited a minute apart, then five written together
        // by an agent: five of seventeen is not most.
        let mut metas: Vec<NoteMeta> = (0..12)
            .map(|i| meta(&format!("e{i:02}.md"), Some(CLONED + 60 * i), FileMtime))
            .chain((0..5).map(|i| meta(&format!("a{i}.md"), Some(CLONED + DAY + i), FileMtime)))
            .collect();
        assert!(mark_shared_file_times(&mut metas).is_empty());
        assert!(metas.iter().all(|m| m.date() == m.updated));
        // Four notes of a four-note vault copied at once: too few to tell.
        let mut small: Vec<NoteMeta> = (0..4)
            .map(|i| meta(&format!("s{i}.md"), Some(CLONED), FileMtime))
            .collect();
        assert!(mark_shared_file_times(&mut small).is_empty());
        // A note with no time at all is left as it is.
        let mut unknown = vec![meta("u.md", None, Unknown)];
        assert!(mark_shared_file_times(&mut unknown).is_empty());
        // Times at the ends of the range are far apart, not an overflow.
        let mut extremes: Vec<NoteMeta> = [i64::MIN, i64::MIN + 1, 0, i64::MAX - 1, i64::MAX]
            .iter()
            .enumerate()
            .map(|(i, &t)| meta(&format!("x{i}.md"), Some(t), FileMtime))
            .collect();
        assert!(mark_shared_file_times(&mut extremes).is_empty());
    }
}

//! The persistent index of a vault: a tantivy full-text index of every note
//! and every section, plus a catalog of note metadata and a link table, all
//! in a folder outside the vault, brought up to date on every open.
//!
//! Consistency: the tantivy commit is the single atomic switch. Its payload
//! names the format version and the content hashes of the catalog and link
//! table written (and fsynced) just before it, so a process killed at any
//! point leaves either the old commit with its blobs or the new one with
//! its. One process updates at a time (an exclusive lock on
//! `ctxpack.lock`); others read the last commit without waiting.

pub(crate) mod ann;
pub(crate) mod catalog;
pub(crate) mod feedback;
pub(crate) mod location;
mod store;
pub(crate) mod vector_journal;
pub(crate) mod vectors;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::analysis::{
    FIELD_REPEATS, LinkEntry, Pending, RawLink, note_text_parts, order_hits, raw_links,
    read_and_parse, resolve_links, section_texts, walk_diagnostics,
};
use crate::filter::{NoteProperties, PropertyTable};
use crate::note::MatchKeys;
use crate::note::{Diagnostic, Note, NoteMeta};
use crate::note_tables::{KeysTable, MetaTable};
use crate::privacy::Policy;
use crate::progress::{Event, Progress, Stage};
use crate::vault::{LinkResolver, MAX_FILE_BYTES, Vault, changes, walk};
use catalog::{Catalog, FileEntry, LinkRecord, LinkTable};

// The analysed note lives in `crate::analysis`; these old paths stay so
// that code written against them (other branches) builds until it moves.
pub(crate) use crate::analysis::{analyzer, backlink_sentences, query_terms};
pub(crate) use crate::store::UpdateReport;

/// Bumped whenever the layout of the index or its blobs changes; an index
/// of another version is rebuilt (4: a note without `title:` is titled by
/// its file name, no longer by its first heading; 6: symlink targets in the
/// catalog, stored in four parts decoded in parallel; 7: the catalog read in
/// place: note records behind an offset table, match keys as one text;
/// links written in properties in the link table; 8: every note's property
/// values for filters, in a blob of their own; 9: a note record holds the
/// share of its text on link lines; 10: a file time most notes share is
/// marked as no date; 11: at most 10,000 sections a note, and no editor
/// time stamp or picture in a summary made of properties).
pub(crate) const FORMAT_VERSION: u32 = 11;
const LOCK_FILE: &str = "ctxpack.lock";
/// How long a command waits for another process's update (a watcher's is
/// a few milliseconds) before it answers from the last commit instead.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a command waits for the index lock when it cannot go on
/// without it (no commit to read yet, or `index --rebuild`): a holder that
/// makes no progress must not make every later command hang.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Overrides [`LOCK_WAIT`], in seconds.
pub(crate) const LOCK_WAIT_VAR: &str = "CTXPACK_LOCK_WAIT";
const TANTIVY_DIR: &str = "tantivy";
/// Notes parsed and indexed per batch, bounding memory during a build.
const BATCH: usize = 512;
const WRITER_MEMORY: usize = 256 * 1024 * 1024;
/// Sets [`IndexConfig::threads`] (a number of threads; for tests and
/// measurements).
pub(crate) const THREADS_VAR: &str = "CTXPACK_INDEX_THREADS";
/// The most threads [`THREADS_VAR`] may ask for: each is a stack and a
/// share of the work, and thousands took seconds to start for nothing.
const MAX_INDEX_THREADS: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Fields {
    path: Field,
    section: Field,
    text: Field,
    sec_heading: Field,
    sec_body: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(analyzer::ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let path = builder.add_text_field("path", STRING | STORED);
    let section = builder.add_u64_field("section", STORED);
    let note_text = builder.add_text_field("text", text.clone());
    let sec_heading = builder.add_text_field("section_heading", text.clone());
    let sec_body = builder.add_text_field("section_body", text);
    (
        builder.build(),
        Fields {
            path,
            section,
            text: note_text,
            sec_heading,
            sec_body,
        },
    )
}

/// What the tantivy commit payload records.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    format: u32,
    catalog: String,
    links: String,
    backlinks: String,
    /// The privacy policy's fingerprint the notes were read under.
    #[serde(default)]
    policy: String,
    /// Every note's property values for filters (`crate::filter`).
    #[serde(default)]
    props: String,
}

/// How to open an index.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    pub dir: PathBuf,
    /// Where the progress of reading the vault is reported.
    pub progress: Progress,
    pub max_file_bytes: u64,
    /// Folders left out of the index (see `VaultOptions::hidden`).
    pub hidden: Vec<String>,
    /// What of each note may be indexed at all; an index built under
    /// another policy is rebuilt.
    pub policy: Arc<Policy>,
    /// Threads that parse notes and write the full-text index: `None` for
    /// one per core ([`THREADS_VAR`] overrides it). The index answers the
    /// same whatever the number.
    pub threads: Option<usize>,
}

impl IndexConfig {
    pub fn new(dir: PathBuf) -> IndexConfig {
        IndexConfig {
            dir,
            progress: Progress::none(),
            max_file_bytes: MAX_FILE_BYTES,
            hidden: Vec::new(),
            policy: Arc::new(Policy::default()),
            threads: std::env::var(THREADS_VAR)
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .map(|n| n.min(MAX_INDEX_THREADS)),
        }
    }

    /// How many threads tantivy's writer indexes with: one per core (tantivy
    /// takes at most 8), each with an equal share of [`WRITER_MEMORY`].
    fn writer_threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .clamp(1, 8)
    }
}

/// Whether an error of [`VaultIndex::open`] must end the command rather
/// than let it go on without the index: an index folder ctxpack refuses,
/// or a vault that vanished while it was read.
pub(crate) fn is_fatal(err: &anyhow::Error) -> bool {
    err.downcast_ref::<location::IndexDirError>().is_some()
        || err.downcast_ref::<VaultVanished>().is_some()
}

/// The vault's folder was moved away or deleted while it was being
/// indexed: what was read is no vault, and nothing is committed.
#[derive(Debug)]
pub(crate) struct VaultVanished(pub PathBuf);

impl std::fmt::Display for VaultVanished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the vault folder {} vanished (moved or deleted) while it was being indexed; \
             nothing was committed",
            self.0.display()
        )
    }
}

impl std::error::Error for VaultVanished {}

/// The vault folder's identity (device, inode), or the error saying it is gone.
fn root_identity(root: &Path) -> Result<(u64, u64), VaultVanished> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(root)
        .ok()
        .filter(|meta| meta.is_dir())
        .map(|meta| (meta.dev(), meta.ino()))
        .ok_or_else(|| VaultVanished(root.to_path_buf()))
}

/// The diagnostic of a file listed by the walk and gone when it was read.
const VANISHED: &str = "vanished while the index was being updated; not indexed";

/// A filter keeping at most one note in this many is narrow: a search
/// restricted to its notes' paths beats deeper unfiltered lists (see
/// [`VaultIndex::search_notes_kept`]; measured in docs/benchmarks.md).
const NARROW_FILTER_SHARE: usize = 8;

/// Takes `lock`, retrying while another process holds it, for at most `wait`.
fn try_lock_for(lock: &fs::File, wait: std::time::Duration) -> Result<(), fs::TryLockError> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match lock.try_lock() {
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn lock_wait() -> std::time::Duration {
    std::env::var(LOCK_WAIT_VAR)
        .ok()
        .and_then(|text| text.trim().parse::<f64>().ok())
        .and_then(|secs| std::time::Duration::try_from_secs_f64(secs).ok())
        .unwrap_or(LOCK_WAIT)
}

/// Writes this process's id and command (the program and its subcommand,
/// never the rest: a query is nobody's business) into the lock file it
/// now holds, for a process that finds it taken to name. Best effort.
fn record_holder(lock: &fs::File) {
    use std::os::unix::fs::FileExt;
    let mut args = std::env::args_os();
    let program = args
        .next()
        .and_then(|p| {
            Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "ctxpack".into());
    let command = args
        .next()
        .map(|a| a.to_string_lossy().chars().take(40).collect::<String>())
        .unwrap_or_default();
    let line = format!("{} {} {}", std::process::id(), program, command);
    let _ = lock.set_len(0);
    let _ = lock.write_all_at(line.trim_end().as_bytes(), 0);
}

/// Who holds the lock of the index in `dir`, as its holder recorded it:
/// `pid N (command)`, or `another process` when that record is missing
/// or names a process that no longer runs.
fn lock_holder(dir: &Path) -> String {
    use std::io::Read;
    let mut text = String::new();
    let _ = crate::safe_fs::open_regular(&dir.join(LOCK_FILE))
        .and_then(|file| file.take(256).read_to_string(&mut text));
    let (pid, command) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    match pid.parse::<u32>() {
        Ok(pid) if Path::new(&format!("/proc/{pid}")).exists() => {
            format!("pid {pid} ({})", command.trim())
        }
        _ => "another process".into(),
    }
}

/// Takes the index lock, waiting for its holder at most [`lock_wait`];
/// says once, on stderr, that it waits and for whom, and ends in an error
/// naming the holder when the wait runs out.
fn wait_for_lock(lock: &fs::File, dir: &Path) -> Result<()> {
    let taken = match lock.try_lock() {
        Err(fs::TryLockError::WouldBlock) => {
            let wait = lock_wait();
            let holder = lock_holder(dir);
            eprintln!(
                "ctxpack: waiting for the index lock in {}, held by {holder} (at most {} s)",
                dir.display(),
                wait.as_secs_f64()
            );
            match try_lock_for(lock, wait) {
                Err(fs::TryLockError::WouldBlock) => bail!(
                    "the index in {} stayed locked by {holder} for {} s; if that process is stuck, \
                     stop it (or set {LOCK_WAIT_VAR} to wait longer)",
                    dir.display(),
                    wait.as_secs_f64()
                ),
                other => other,
            }
        }
        other => other,
    };
    match taken {
        Ok(()) => {
            record_holder(lock);
            Ok(())
        }
        Err(fs::TryLockError::Error(err)) => Err(err).context("lock the index"),
        Err(fs::TryLockError::WouldBlock) => bail!("the index is locked"),
    }
}

/// How an update learns what changed in the vault.
enum Changes {
    /// The whole vault walked.
    Walked(walk::WalkResult),
    /// The paths a live watcher named.
    Listed(Vec<String>),
}

struct Detected {
    changes: Changes,
    /// The watcher's token once these changes are applied.
    token: Option<changes::Token>,
}

impl Detected {
    fn find(root: &Path, config: &IndexConfig, stored: Option<&changes::Token>) -> Detected {
        let mut timed = crate::timings::phase("index.changes");
        let answer = changes::ask(&config.dir, root, stored);
        timed.note(|| match &answer {
            Some(changes::Answer {
                changed: Some(paths),
                ..
            }) => format!("watcher: {} paths", paths.len()),
            Some(_) => "watcher: token unknown, walking".into(),
            None => "no watcher, walking".into(),
        });
        match answer {
            Some(changes::Answer {
                token,
                changed: Some(paths),
                ..
            }) => Detected {
                changes: Changes::Listed(paths),
                token: Some(token),
            },
            answer => Detected {
                changes: Changes::Walked(walk::walk(root, &config.hidden)),
                token: answer.map(|a| a.token),
            },
        }
    }
}

/// What names a watcher's token: it stands for what the walk saw with
/// these folders left out.
fn token_context(config: &IndexConfig) -> String {
    blake3::hash(config.hidden.join("\n").as_bytes()).to_hex()[..16].to_string()
}

/// What a speculative open detected, for the update that must follow.
pub(crate) struct Prechecked {
    detected: Detected,
    /// The watcher's token when it was asked.
    stored: Option<changes::Token>,
    /// The commit the detection was compared with (none if none opened).
    catalog_hash: Option<String>,
}

/// What [`VaultIndex::open_speculating`] found.
pub(crate) enum Speculation<R> {
    /// The committed index was the vault's: what ran on it stands.
    Fresh(R, UpdateReport),
    /// The vault changed, or no index could be opened: open it with
    /// [`VaultIndex::open_prechecked`] and run again.
    Stale(Prechecked),
}

/// A note's incoming link, as the index records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Backlink {
    /// Index of the linking note in the catalog.
    pub source: usize,
    /// The sentence around the link.
    pub context: String,
}

/// An open, up-to-date index of one vault.
pub struct VaultIndex {
    pub dir: PathBuf,
    pub root: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    pub catalog: Catalog,
    /// The commit's catalog blob: what names this commit.
    catalog_hash: String,
    links_hash: String,
    links: OnceLock<Option<LinkTable>>,
    graph: OnceLock<Option<std::sync::Arc<crate::note::LinkGraph>>>,
    backlinks_hash: String,
    props_hash: String,
    /// Decoded on first use: only a request with `--where` reads it.
    props: OnceLock<Option<Arc<PropertyTable>>>,
}

impl VaultIndex {
    /// Opens the index of the vault at `root` (canonical) in `config.dir`,
    /// building it on first use and bringing it up to date. If another
    /// process is updating it, the last committed state is used instead.
    pub fn open(root: &Path, config: &IndexConfig) -> Result<(VaultIndex, UpdateReport)> {
        Self::open_with(root, config, None)
    }

    /// Like [`open`](Self::open), reusing what a speculative open found
    /// changed (see [`open_speculating`](Self::open_speculating)).
    pub(crate) fn open_prechecked(
        root: &Path,
        config: &IndexConfig,
        prechecked: Prechecked,
    ) -> Result<(VaultIndex, UpdateReport)> {
        Self::open_with(root, config, Some(prechecked))
    }

    fn open_with(
        root: &Path,
        config: &IndexConfig,
        prechecked: Option<Prechecked>,
    ) -> Result<(VaultIndex, UpdateReport)> {
        location::claim(root, &config.dir, LOCK_FILE)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(config.dir.join(LOCK_FILE))
            .with_context(|| format!("cannot open {}", config.dir.join(LOCK_FILE).display()))?;
        match try_lock_for(&lock, BUSY_WAIT) {
            Ok(()) => {
                record_holder(&lock);
                let result = Self::open_as_writer(root, config, prechecked);
                let _ = lock.unlock();
                result
            }
            Err(fs::TryLockError::WouldBlock) => {
                match Self::open_committed(root, &config.dir, &config.policy) {
                    Ok(index) => Ok((
                        index,
                        UpdateReport {
                            busy: true,
                            ..UpdateReport::default()
                        },
                    )),
                    Err(_) => {
                        // Nothing usable yet: wait for the other process's build.
                        wait_for_lock(&lock, &config.dir)?;
                        let result = Self::open_as_writer(root, config, prechecked);
                        let _ = lock.unlock();
                        result
                    }
                }
            }
            Err(fs::TryLockError::Error(err)) => Err(err).context("lock the index"),
        }
    }

    /// Runs `run` on the last committed state while the vault is walked
    /// (or its watcher asked) beside it: most calls find nothing changed,
    /// and without a watcher the walk is most of their cost. Nothing is
    /// written and no lock taken. When the walk finds the vault as the
    /// commit has it, what `run` made stands, exactly as if the index had
    /// been opened and found current first; otherwise it is dropped and the
    /// detection handed back.
    pub(crate) fn open_speculating<R: Send>(
        root: &Path,
        config: &IndexConfig,
        run: impl FnOnce(VaultIndex) -> R + Send,
    ) -> Result<Speculation<R>> {
        location::claim(root, &config.dir, LOCK_FILE)?;
        let context = token_context(config);
        let stored = changes::read_token(&config.dir, &context);
        let (ran, detected) = rayon::join(
            || {
                let index = {
                    let _timed = crate::timings::phase("index.catalog");
                    Self::open_committed(root, &config.dir, &config.policy).ok()?
                };
                let freshness = index.catalog.freshness();
                let catalog_hash = index.catalog_hash.clone();
                let ran = run(index);
                freshness.prepare();
                Some((freshness, catalog_hash, ran))
            },
            || Detected::find(root, config, stored.as_ref()),
        );
        let Some((freshness, catalog_hash, ran)) = ran else {
            return Ok(Speculation::Stale(Prechecked {
                detected,
                stored,
                catalog_hash: None,
            }));
        };
        // The reports an update that found nothing to do would give.
        let report = match &detected {
            Detected {
                changes: Changes::Listed(paths),
                token: Some(token),
            } if paths.is_empty() && stored.as_ref() == Some(token) => Some(UpdateReport {
                unchanged: freshness.file_count(),
                from_watcher: true,
                ..UpdateReport::default()
            }),
            // A token to record after the walk is a write: the update does it.
            Detected {
                changes: Changes::Walked(walked),
                token: None,
            } if freshness.holds(walked, &config.policy) => Some(UpdateReport {
                unchanged: walked.files.len(),
                ..UpdateReport::default()
            }),
            _ => None,
        };
        Ok(match report {
            Some(report) => Speculation::Fresh(ran, report),
            None => Speculation::Stale(Prechecked {
                detected,
                stored,
                catalog_hash: Some(catalog_hash),
            }),
        })
    }

    /// Opens the last committed state without updating it.
    pub fn open_committed(root: &Path, dir: &Path, policy: &Policy) -> Result<VaultIndex> {
        let (schema, fields) = schema();
        let index = Index::open_in_dir(dir.join(TANTIVY_DIR))
            .map_err(|err| anyhow!("cannot open the full-text index: {err}"))?;
        if index.schema() != schema {
            bail!("the full-text index has another schema");
        }
        index
            .tokenizers()
            .register(analyzer::ANALYZER, analyzer::analyzer());
        let metas = index.load_metas()?;
        let payload: Payload = metas
            .payload
            .as_deref()
            .ok_or_else(|| anyhow!("the index has no ctxpack commit"))
            .and_then(|p| serde_json::from_str(p).context("unreadable commit payload"))?;
        if payload.format != FORMAT_VERSION {
            bail!(
                "the index is in format {}, this ctxpack reads format {FORMAT_VERSION}",
                payload.format
            );
        }
        if payload.policy != policy.fingerprint() {
            bail!("the index was built under another privacy policy");
        }
        let (catalog, reader) = rayon::join(
            || Catalog::load(dir, &payload.catalog),
            || {
                index
                    .reader_builder()
                    .reload_policy(ReloadPolicy::Manual)
                    .try_into()
            },
        );
        let (catalog, reader) = (catalog?, reader?);
        if Path::new(&catalog.root) != root {
            bail!("the index belongs to another vault ({})", catalog.root);
        }
        Ok(VaultIndex {
            dir: dir.to_path_buf(),
            root: root.to_path_buf(),
            index,
            reader,
            fields,
            catalog,
            catalog_hash: payload.catalog,
            links_hash: payload.links,
            links: OnceLock::new(),
            graph: OnceLock::new(),
            backlinks_hash: payload.backlinks,
            props_hash: payload.props,
            props: OnceLock::new(),
        })
    }

    fn open_as_writer(
        root: &Path,
        config: &IndexConfig,
        prechecked: Option<Prechecked>,
    ) -> Result<(VaultIndex, UpdateReport)> {
        let context = token_context(config);
        let stored = changes::read_token(&config.dir, &context);
        let open = || {
            let _timed = crate::timings::phase("index.catalog");
            Self::open_committed(root, &config.dir, &config.policy)
        };
        let (opened, detected) = match prechecked {
            // What the speculative open detected holds only against the
            // commit it compared with: another process may have committed
            // since (its walk then might miss notes added meanwhile).
            Some(prechecked) => {
                let opened = open();
                let same_commit = opened
                    .as_ref()
                    .ok()
                    .map(|index| index.catalog_hash.as_str())
                    == prechecked.catalog_hash.as_deref()
                    && stored == prechecked.stored;
                let detected = if same_commit {
                    prechecked.detected
                } else {
                    Detected::find(root, config, stored.as_ref())
                };
                (opened, detected)
            }
            // Decoding the catalog and finding what changed (the watcher's
            // answer, or the walk) are the two costs of a no-op update, and
            // they are independent.
            None => rayon::join(open, || Detected::find(root, config, stored.as_ref())),
        };
        let mut updating = crate::timings::phase("index.update");
        let Detected { changes, token } = detected;
        let from_watcher = matches!(changes, Changes::Listed(_));
        let result = match opened {
            // Nothing changed since the token: nothing to compare.
            Ok(index) if matches!(&changes, Changes::Listed(paths) if paths.is_empty()) => {
                let unchanged = index.catalog.file_count;
                Ok((
                    index,
                    UpdateReport {
                        unchanged,
                        ..UpdateReport::default()
                    },
                ))
            }
            Ok(mut index) => {
                let walked = match changes {
                    Changes::Walked(walked) => walked,
                    Changes::Listed(paths) => index
                        .walk_changed(config, paths)
                        .unwrap_or_else(|| walk::walk(root, &config.hidden)),
                };
                match index.update_from(config, walked) {
                    Ok(report) => Ok((index, report)),
                    Err(err) if err.downcast_ref::<VaultVanished>().is_some() => Err(err),
                    Err(err) => {
                        drop(index);
                        match Self::build(root, config) {
                            Ok(mut report) => {
                                report.rebuilt = Some(format!("the update failed: {err:#}"));
                                let index =
                                    Self::open_committed(root, &config.dir, &config.policy)?;
                                Ok((index, report))
                            }
                            Err(build_err)
                                if build_err.downcast_ref::<VaultVanished>().is_some() =>
                            {
                                Err(build_err)
                            }
                            // Neither the update nor a rebuild could be
                            // written, but the last commit is intact: it
                            // serves, and the next open tries again.
                            Err(build_err) => {
                                match Self::open_committed(root, &config.dir, &config.policy) {
                                    Ok(index) => Ok((
                                        index,
                                        UpdateReport {
                                            failed: Some(format!("{err:#}")),
                                            ..UpdateReport::default()
                                        },
                                    )),
                                    Err(_) => Err(build_err),
                                }
                            }
                        }
                    }
                }
            }
            Err(err) => {
                let reason = if config.dir.join(TANTIVY_DIR).exists() {
                    format!("{err:#}")
                } else {
                    String::new()
                };
                let mut report = Self::build(root, config)?;
                report.rebuilt = (!reason.is_empty()).then_some(reason);
                let index = Self::open_committed(root, &config.dir, &config.policy)?;
                Ok((index, report))
            }
        };
        result.map(|(index, mut report)| {
            // Whatever path was taken, the index now holds every change the
            // watcher had seen when it answered.
            // A failed update applied none of them: the token stays.
            if let Some(token) = token
                && stored.as_ref() != Some(&token)
                && report.failed.is_none()
            {
                let _ = changes::write_token(&config.dir, &token, &context);
            }
            report.from_watcher = from_watcher && report.rebuilt.is_none();
            updating.note(|| {
                format!(
                    "{} changed, {} added, {} removed",
                    report.changed, report.added, report.removed
                )
            });
            (index, report)
        })
    }

    /// The vault as the catalog knows it, with only the `changed` paths
    /// (files or folders, from the watcher) walked again. `None` when a
    /// change involves a symlinked note or an `.okignore`, which only a
    /// whole walk decides.
    fn walk_changed(&self, config: &IndexConfig, changed: Vec<String>) -> Option<walk::WalkResult> {
        if changed
            .iter()
            .any(|path| path.rsplit('/').next() == Some(walk::IGNORE_FILE))
        {
            return None;
        }
        let scope = walk::Scope::new(changed);
        let catalog = &self.catalog;
        let touches_link = catalog.files().iter().any(|file| {
            file.link_target
                .as_deref()
                .is_some_and(|target| scope.covers(target) || scope.covers(&file.path))
        });
        if touches_link {
            return None;
        }
        let mut walked = walk::walk_scope(&self.root, &config.hidden, &scope)?;
        let mut files = std::mem::take(&mut walked.files).into_vec();
        for file in catalog.files() {
            if scope.covers(&file.path) {
                continue;
            }
            // Out of scope, a file is as it was: its stat is the catalog's.
            files.push(walk::Found {
                rel_path: file.path.clone(),
                target: file.link_target.clone(),
                stat: Some((file.size, file.mtime_ns)),
            });
        }
        files.sort_by(|a, b| a.rel_path.cmp(&b.rel_path));
        walked.files = files.into();
        walked.problems.extend(
            catalog
                .walk_problems
                .iter()
                .filter(|problem| !scope.covers(&problem.path))
                .map(|problem| (problem.path.clone(), problem.message.clone())),
        );
        walked.problems.sort();
        Some(walked)
    }

    /// Deletes the index (keeping the feedback store) and builds it anew.
    pub fn rebuild(root: &Path, config: &IndexConfig) -> Result<(VaultIndex, UpdateReport)> {
        location::claim(root, &config.dir, LOCK_FILE)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(config.dir.join(LOCK_FILE))?;
        wait_for_lock(&lock, &config.dir)?;
        let mut report = Self::build(root, config)?;
        report.rebuilt = Some("requested".into());
        let index = Self::open_committed(root, &config.dir, &config.policy)?;
        let _ = lock.unlock();
        Ok((index, report))
    }

    /// Builds the index anew in `config.dir` (the caller holds the lock).
    /// An existing, readable full-text index is emptied and refilled in one
    /// commit, so readers keep the old state until the new one is complete;
    /// an unreadable one is deleted first.
    /// If refilling fails, the folder is deleted and built once more,
    /// unless its last commit is one this ctxpack reads: that commit is
    /// never destroyed by a build that could not be written (a full disk
    /// would then leave no index at all), and the error is returned.
    fn build(root: &Path, config: &IndexConfig) -> Result<UpdateReport> {
        let tantivy_dir = config.dir.join(TANTIVY_DIR);
        let (schema, _) = schema();
        match Index::open_in_dir(&tantivy_dir) {
            Ok(index) if index.schema() == schema => {
                let refilled = remove_uncommitted_files(&index, &tantivy_dir)
                    .and_then(|()| Self::fill(root, config, index));
                let vanished = refilled
                    .as_ref()
                    .is_err_and(|err| err.downcast_ref::<VaultVanished>().is_some());
                if refilled.is_ok()
                    || vanished
                    || Self::open_committed(root, &config.dir, &config.policy).is_ok()
                {
                    return refilled;
                }
            }
            _ => {}
        }
        if tantivy_dir.exists() {
            fs::remove_dir_all(&tantivy_dir)
                .with_context(|| format!("cannot clear {}", tantivy_dir.display()))?;
        }
        fs::create_dir_all(&tantivy_dir)?;
        Self::fill(root, config, Index::create_in_dir(&tantivy_dir, schema)?)
    }

    /// Replaces everything in `index` with the notes of the vault, in one
    /// commit.
    fn fill(root: &Path, config: &IndexConfig, index: Index) -> Result<UpdateReport> {
        let (_, fields) = schema();
        index
            .tokenizers()
            .register(analyzer::ANALYZER, analyzer::analyzer());
        let mut writer: IndexWriter =
            index.writer_with_num_threads(config.writer_threads(), WRITER_MEMORY)?;
        writer.delete_all_documents()?;
        let mut state = IndexState {
            policy: Arc::clone(&config.policy),
            root_identity: Some(root_identity(root)?),
            ..IndexState::default()
        };
        let walked = walk::walk(root, &config.hidden);
        state.walk_problems = walk_diagnostics(walked.problems, &config.policy);
        let work: Vec<Pending> = walked
            .files
            .into_iter()
            .map(|found| Pending {
                stat: found.stat,
                found,
                previous_hash: None,
            })
            .collect();
        let listed = work.len();
        let indexed = index_files(root, &writer, fields, work, config, &mut state)?;
        finish(root, &config.dir, &mut writer, state)?;
        Ok(UpdateReport {
            added: listed - indexed.vanished_new,
            ..UpdateReport::default()
        })
    }

    /// Brings the index up to date with the vault (the caller holds the
    /// lock): changed files are found by size and mtime and confirmed by
    /// their content hash.
    pub fn update(&mut self, config: &IndexConfig) -> Result<UpdateReport> {
        let walked = walk::walk(&self.root, &config.hidden);
        self.update_from(config, walked)
    }

    /// Like [`update`](Self::update), with the vault already walked.
    fn update_from(
        &mut self,
        config: &IndexConfig,
        walked: walk::WalkResult,
    ) -> Result<UpdateReport> {
        let walk_problems = walk_diagnostics(walked.problems, &config.policy);
        let mut report = UpdateReport::default();
        // The catalog's files are in path order, and the check pairs them
        // one by one: files it finds unchanged are in order, and need no
        // sorting first.
        if walk_problems == self.catalog.walk_problems
            && self.catalog.files_unchanged(&walked.files)
        {
            report.unchanged = walked.files.len();
            return Ok(report);
        }
        let found_files = walked.files.sorted();
        let mut pending = Vec::new();
        let mut kept: Vec<&FileEntry> = Vec::new();
        let mut removed: Vec<&FileEntry> = Vec::new();
        // Both lists are sorted by path: one pass pairs them.
        let mut known = self.catalog.files().iter().peekable();
        for found in &found_files {
            while let Some(gone) = known.next_if(|f| f.path < found.rel_path) {
                removed.push(gone);
            }
            let previous = known.next_if(|f| f.path == found.rel_path);
            match (previous, found.stat) {
                (Some(old), Some((size, mtime))) if old.size == size && old.mtime_ns == mtime => {
                    kept.push(old);
                    report.unchanged += 1;
                }
                (old, stat) => pending.push(Pending {
                    found: found.clone(),
                    stat,
                    previous_hash: old.map(|o| o.hash),
                }),
            }
        }
        removed.extend(known);
        if pending.is_empty() && removed.is_empty() && walk_problems == self.catalog.walk_problems {
            return Ok(report);
        }

        remove_uncommitted_files(&self.index, &self.dir.join(TANTIVY_DIR))?;
        // A few changed notes would only scatter over one small segment per
        // thread; many are worth every core.
        let threads = if pending.len() > BATCH {
            config.writer_threads()
        } else {
            config.writer_threads().min(2)
        };
        let mut writer: IndexWriter = self
            .index
            .writer_with_num_threads(threads, WRITER_MEMORY)
            .map_err(|err| anyhow!("cannot write the index: {err}"))?;
        for file in &removed {
            writer.delete_term(Term::from_field_text(self.fields.path, &file.path));
        }
        report.removed = removed.len();

        // Unchanged notes keep their metadata, links and property values;
        // links are re-resolved at the end, since added or removed notes
        // can change link targets.
        let links = self.link_table().cloned().unwrap_or_default();
        let props = self.property_table().unwrap_or_default();
        let mut state = IndexState {
            walk_problems,
            policy: Arc::clone(&config.policy),
            root_identity: Some(root_identity(&self.root)?),
            ..IndexState::default()
        };
        for file in kept {
            if file.is_note
                && let Some(idx) = self.catalog.note_index(&file.path)
            {
                state.metas.push(self.catalog.metas[idx].clone());
                state
                    .raw_links
                    .push(links.links.get(idx).map_or_else(Vec::new, |l| {
                        l.iter()
                            .cloned()
                            .map(|record| RawLink::from_record(record, &self.catalog.metas))
                            .collect()
                    }));
                state.props.push(props.get(idx).clone());
            }
            state.files.push(file.clone());
        }
        for item in &pending {
            match item.previous_hash {
                Some(_) => report.changed += 1,
                None => report.added += 1,
            }
        }
        // A file touched but rewritten with identical content is not a change.
        let indexed = index_files(
            &self.root,
            &writer,
            self.fields,
            pending,
            config,
            &mut state,
        )?;
        report.changed -= indexed.identical + indexed.vanished_known;
        report.unchanged += indexed.identical;
        report.added -= indexed.vanished_new;
        report.removed += indexed.vanished_known;
        let dir = self.dir.clone();
        let root = self.root.clone();
        finish(&root, &dir, &mut writer, state)?;
        drop(writer);
        *self = Self::open_committed(&root, &dir, &config.policy)?;
        Ok(report)
    }

    /// The vault as the index knows it: metadata of every note, bodies read
    /// on demand.
    pub fn vault(&self) -> Vault {
        // The descriptions only make match keys, which the catalog holds.
        let mut vault = Vault::from_metas(
            self.root.clone(),
            Arc::clone(&self.catalog.metas),
            HashMap::new(),
            self.catalog.hot.iter().map(|&i| i as usize).collect(),
            self.catalog.diagnostics.clone(),
        );
        vault.set_match_keys(Arc::clone(&self.catalog.match_keys));
        vault.set_resolver(Arc::clone(&self.catalog.resolver));
        vault.set_bases(self.catalog.bases.clone());
        vault
    }

    /// BM25 over the note-level fields, best first: `(note index, score)`.
    /// Query text is analysed like the documents, so no character has a
    /// special meaning; terms are combined as a ranked OR.
    pub fn search_notes(&self, text: &str, limit: usize) -> Result<Vec<(usize, f32)>> {
        self.search_notes_within(text, None, limit)
    }

    /// [`VaultIndex::search_notes`] among the notes `keep` accepts, in one
    /// search whose documents the kept notes' paths filter: a narrow
    /// filter (one folder, a rare property) costs what its notes cost, not
    /// a search of the whole vault repeated with deeper lists. `None` for a
    /// wide filter, which a list a little deeper than `limit` satisfies.
    pub fn search_notes_kept(
        &self,
        text: &str,
        limit: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Option<Result<Vec<(usize, f32)>>> {
        let metas = &self.catalog.metas;
        let most = metas.len() / NARROW_FILTER_SHARE;
        let mut kept = Vec::new();
        for note in (0..metas.len()).filter(|&note| keep(note)) {
            if kept.len() >= most {
                return None;
            }
            kept.push(note);
        }
        let paths = kept
            .into_iter()
            .map(|note| Term::from_field_text(self.fields.path, &metas[note].path))
            .collect();
        Some(self.search_notes_within(text, Some(paths), limit))
    }

    fn search_notes_within(
        &self,
        text: &str,
        within: Option<Vec<Term>>,
        limit: usize,
    ) -> Result<Vec<(usize, f32)>> {
        let terms = query_terms(text);
        if terms.is_empty() || limit == 0 || within.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|term| should_term(self.fields.text, term, IndexRecordOption::WithFreqs, 1.0))
            .collect();
        let ranked = BooleanQuery::new(clauses);
        // The filter scores nothing (boost 0): the hits' scores are those
        // of the unfiltered search.
        let query: Box<dyn Query> = match within {
            None => Box::new(ranked),
            Some(paths) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, Box::new(ranked) as Box<dyn Query>),
                (
                    Occur::Must,
                    Box::new(BoostQuery::new(Box::new(TermSetQuery::new(paths)), 0.0)),
                ),
            ])),
        };
        let stats = KindStatistics {
            searcher: self.reader.searcher(),
            docs: self.catalog.metas.len() as u64,
        };
        let scored: Vec<(Term, f32)> = terms
            .iter()
            .map(|term| (Term::from_field_text(self.fields.text, term), 1.0))
            .collect();
        self.top_paths(query.as_ref(), &scored, limit, &stats)
            .map(|hits| {
                hits.into_iter()
                    .filter_map(|(path, _, score)| {
                        self.catalog.note_index(&path).map(|idx| (idx, score))
                    })
                    .collect()
            })
    }

    /// The inverse document frequency, over sections, of each term:
    /// `ln(1 + (N - df + 0.5) / (df + 0.5))`.
    pub fn section_idf(&self, terms: &[String]) -> Vec<f64> {
        let searcher = self.reader.searcher();
        let n = self.catalog.sections.max(1) as f64;
        terms
            .iter()
            .map(|term| {
                let df = searcher
                    .doc_freq(&Term::from_field_text(self.fields.sec_body, term))
                    .unwrap_or(0) as f64;
                let df = df.min(n);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect()
    }

    /// BM25 over sections, restricted to the notes at `paths`:
    /// `(path, section ordinal, score)`, best first.
    pub fn search_sections(
        &self,
        text: &str,
        paths: &[&str],
        limit: usize,
    ) -> Result<Vec<(String, usize, f32)>> {
        let terms = query_terms(text);
        if terms.is_empty() || paths.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut scored: Vec<(Term, f32)> = Vec::new();
        for term in &terms {
            for (field, boost) in [(self.fields.sec_heading, 1.5), (self.fields.sec_body, 1.0)] {
                scored.push((Term::from_field_text(field, term), boost));
                should.push(should_term(
                    field,
                    term,
                    IndexRecordOption::WithFreqs,
                    boost,
                ));
            }
        }
        let filter: Vec<(Occur, Box<dyn Query>)> = paths
            .iter()
            .map(|path| should_term(self.fields.path, path, IndexRecordOption::Basic, 1.0))
            .collect();
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(BooleanQuery::new(should)) as Box<dyn Query>,
            ),
            (
                Occur::Must,
                Box::new(BoostQuery::new(Box::new(BooleanQuery::new(filter)), 0.0)),
            ),
        ]);
        let stats = KindStatistics {
            searcher: self.reader.searcher(),
            docs: self.catalog.sections.max(1),
        };
        self.top_paths(&query, &scored, limit, &stats).map(|hits| {
            hits.into_iter()
                .filter_map(|(path, section, score)| section.map(|s| (path, s, score)))
                .collect()
        })
    }

    /// Runs `query` and returns `(path, section ordinal, score)` sorted by
    /// score, then path, so ties never depend on segment layout. `scored`
    /// is every scoring term of the query with its boost, in clause order:
    /// the score of a hit is their BM25 scores summed in that order.
    fn top_paths(
        &self,
        query: &dyn Query,
        scored: &[(Term, f32)],
        limit: usize,
        stats: &KindStatistics,
    ) -> Result<Vec<(String, Option<usize>, f32)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let searcher = &stats.searcher;
        let mut fetch = limit.saturating_mul(2).saturating_add(16);
        // Among documents of equal score tantivy keeps those of the lowest
        // document ids, which follow the indexing threads' scheduling: when
        // the hits fetched end on a tie with the `limit`-th, more may tie
        // beyond them, and all are fetched so the path decides. Tantivy's
        // scores of equal hits can differ in their last bits (below), so a
        // near tie counts as one.
        let mut top: Vec<(f32, DocAddress)> = loop {
            let top: Vec<(f32, DocAddress)> = searcher.search_with_statistics_provider(
                query,
                &TopDocs::with_limit(fetch).tweak_score(every_score),
                stats,
            )?;
            let kth = top.get(limit - 1).map_or(0.0, |hit| hit.0);
            let cut_in_a_tie = top.len() == fetch && top[fetch - 1].0 >= kth - kth.abs() * 1e-5;
            if !cut_in_a_tie {
                break top;
            }
            fetch = fetch.saturating_mul(4);
        };
        rescore(searcher, stats, scored, &mut top)?;
        top.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut hits = Vec::with_capacity(top.len().min(limit + 8));
        for (score, address) in top {
            // Best first: past the `limit`-th hit only ties with it can
            // still be kept (they are ordered by path below), so the
            // stored documents of the rest are never read.
            if hits.len() >= limit
                && hits
                    .last()
                    .is_some_and(|last: &(String, Option<usize>, f32)| score < last.2)
            {
                break;
            }
            let doc: TantivyDocument = searcher.doc(address)?;
            let Some(path) = doc.get_first(self.fields.path).and_then(|v| v.as_str()) else {
                continue;
            };
            let section = doc
                .get_first(self.fields.section)
                .and_then(|v| v.as_u64())
                .map(|s| s as usize);
            hits.push((path.to_string(), section, score));
        }
        order_hits(&mut hits, limit);
        Ok(hits)
    }

    /// Every note's property values, parallel to the catalog's notes.
    pub fn property_table(&self) -> Option<Arc<PropertyTable>> {
        self.props
            .get_or_init(|| {
                // Read in place: a filter decodes only the notes it asks
                // about, not the whole table.
                let bytes = catalog::load_blob_bytes(&self.dir, "props", &self.props_hash).ok()?;
                let table = PropertyTable::in_place(bytes).ok()?;
                (table.len() == self.catalog.metas.len()).then(|| Arc::new(table))
            })
            .clone()
    }

    fn link_table(&self) -> Option<&LinkTable> {
        self.links
            .get_or_init(|| catalog::load_blob(&self.dir, "links", &self.links_hash).ok())
            .as_ref()
    }

    /// Every resolved link of the vault as a graph (decoded from the link
    /// table once per open index).
    pub fn link_graph(&self) -> Option<std::sync::Arc<crate::note::LinkGraph>> {
        self.graph
            .get_or_init(|| {
                let table = self.link_table()?;
                let links = table.links.iter().enumerate().flat_map(|(source, links)| {
                    links.iter().map(move |link| (source, link.target as usize))
                });
                Some(std::sync::Arc::new(crate::note::LinkGraph::from_links(
                    self.catalog.metas.len(),
                    links,
                )))
            })
            .clone()
    }

    /// The notes linking to `path`, with the sentence around each link, in
    /// path order of the linking notes (at most
    /// [`crate::analysis::BACKLINKS_KEPT`]). A lookup in the index's backlink
    /// table plus a read of the linking notes; the vault is not scanned.
    pub fn backlinks(&self, vault: &Vault, path: &str) -> Vec<Backlink> {
        let Some(target) = self.catalog.note_index(path) else {
            return Vec::new();
        };
        let entries = self.backlink_entries(&[target]).remove(&target);
        backlink_sentences(
            vault,
            entries.as_deref().unwrap_or_default(),
            crate::analysis::BACKLINKS_KEPT,
        )
        .into_iter()
        .map(|(source, context)| Backlink {
            source,
            context: crate::text::collapse_whitespace(&context),
        })
        .collect()
    }

    /// The backlink table's entries of each note in `targets`: `target ->
    /// [(source, link span)]`, in path order of the linking notes. Only
    /// the table is read; the sentences come from [`backlink_sentences`].
    pub fn backlink_entries(&self, targets: &[usize]) -> HashMap<usize, Vec<LinkEntry>> {
        let mut found = HashMap::new();
        let path = catalog::blob_path(&self.dir, "backlinks", &self.backlinks_hash);
        let Ok(file) = fs::File::open(path) else {
            return found;
        };
        for &target in targets {
            let entries = catalog::read_backlinks(&file, target)
                .into_iter()
                .map(|[source, start, end]| (source as usize, start, end))
                .collect();
            found.insert(target, entries);
        }
        found
    }

    /// Total size of the index folder, in bytes.
    pub fn size_bytes(&self) -> u64 {
        dir_size(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tantivy index in memory, with ctxpack's schema and analyzer.
    fn memory_index() -> (Index, Fields) {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        index
            .tokenizers()
            .register(analyzer::ANALYZER, analyzer::analyzer());
        (index, fields)
    }

    fn pending(root: &Path, previous_hash: Option<[u8; 32]>) -> Vec<Pending> {
        walk::walk(root, &[])
            .files
            .into_iter()
            .map(|found| Pending {
                stat: found.stat,
                found,
                previous_hash,
            })
            .collect()
    }

    /// `index` opened as a vault's index with an empty catalog: for
    /// asking tantivy through [`VaultIndex::top_paths`].
    fn bare_index(index: &Index, reader: IndexReader, fields: Fields) -> VaultIndex {
        VaultIndex {
            dir: PathBuf::new(),
            root: PathBuf::new(),
            index: index.clone(),
            reader,
            fields,
            catalog: Catalog::default(),
            catalog_hash: String::new(),
            links_hash: String::new(),
            links: OnceLock::new(),
            graph: OnceLock::new(),
            backlinks_hash: String::new(),
            props_hash: String::new(),
            props: OnceLock::new(),
        }
    }

    /// Which notes a search of `index` finds for `query`, by path.
    fn found(index: &VaultIndex, query: &str) -> Vec<String> {
        let metas = index.vault().metas;
        index
            .search_notes(query, 10)
            .unwrap()
            .into_iter()
            .map(|(note, _)| metas[note].path.clone())
            .collect()
    }

    #[test]
    fn a_speculative_open_stands_only_when_the_walk_finds_the_commit_current() {
        let vault = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = vault.path().canonicalize().unwrap();
        fs::write(root.join("a.md"), "# A\n\nAbout otters.\n").unwrap();
        fs::write(root.join("b.md"), "# B\n\nAbout badgers.\n").unwrap();
        let config = IndexConfig::new(dir.path().join("index"));
        let speculate = || {
            VaultIndex::open_speculating(&root, &config, |index| found(&index, "otters")).unwrap()
        };
        // No index yet: nothing to run on.
        let Speculation::Stale(prechecked) = speculate() else {
            panic!("ran without an index");
        };
        assert!(prechecked.catalog_hash.is_none());
        let (_, report) = VaultIndex::open_prechecked(&root, &config, prechecked).unwrap();
        assert_eq!(report.added, 2);

        // Unchanged: what ran stands, with the report a no-op update gives.
        match speculate() {
            Speculation::Fresh(paths, report) => {
                assert_eq!(paths, ["a.md"]);
                assert_eq!((report.unchanged, report.from_watcher), (2, false));
                assert!(!report.changed_anything());
            }
            Speculation::Stale(_) => panic!("an unchanged vault was found stale"),
        }

        // A note changed and one added: the answer from the commit is
        // dropped; the update reuses the walk and answers anew.
        fs::write(
            root.join("b.md"),
            "# B\n\nAbout otters and badgers, at length.\n",
        )
        .unwrap();
        fs::write(root.join("c.md"), "# C\n\nOtters again.\n").unwrap();
        let Speculation::Stale(prechecked) = speculate() else {
            panic!("a changed vault was found current");
        };
        let (index, report) = VaultIndex::open_prechecked(&root, &config, prechecked).unwrap();
        assert_eq!((report.changed, report.added, report.unchanged), (1, 1, 1));
        let mut paths = found(&index, "otters");
        paths.sort();
        assert_eq!(paths, ["a.md", "b.md", "c.md"]);
        drop(index);

        // A walk compared with a commit that another process replaced
        // since is not trusted: the update walks again.
        fs::write(root.join("d.md"), "# D\n\nNo otters here, only voles.\n").unwrap();
        let Speculation::Stale(prechecked) = speculate() else {
            panic!("a changed vault was found current");
        };
        fs::write(root.join("e.md"), "# E\n\nVoles.\n").unwrap();
        VaultIndex::open(&root, &config).unwrap();
        fs::write(root.join("f.md"), "# F\n\nMore voles.\n").unwrap();
        // Reused, that walk would take e.md out of the index.
        let (index, report) = VaultIndex::open_prechecked(&root, &config, prechecked).unwrap();
        assert_eq!((report.added, report.removed, report.unchanged), (1, 0, 5));
        assert_eq!(index.catalog.file_count, 6);
        drop(index);
        assert!(matches!(speculate(), Speculation::Fresh(..)));
    }

    /// A narrow filter is searched among its own notes (one search
    /// restricted to their paths), a wide one is left to the caller's
    /// deeper lists: either way the hits are the unfiltered ranking's kept
    /// hits, in its order and with its scores, ties included.
    #[test]
    fn a_narrow_filter_ranks_its_notes_as_the_whole_vault_does() {
        let vault = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = vault.path().canonicalize().unwrap();
        let notes = 96;
        for n in 0..notes {
            // Notes of the same `n % 7` and `n % 3` have the same text:
            // ties by score, ordered by path.
            let body = format!(
                "# N{n}\n\n{}{}filler words here\n",
                "raft ".repeat(1 + n % 7),
                "leader ".repeat(n % 3)
            );
            fs::write(root.join(format!("n{n:02}.md")), body).unwrap();
        }
        let config = IndexConfig::new(dir.path().join("index"));
        let (index, _) = VaultIndex::open(&root, &config).unwrap();
        let all = index.search_notes("raft leader", notes).unwrap();
        assert_eq!(all.len(), notes);
        let narrow: [&dyn Fn(usize) -> bool; 3] =
            [&|note| note % 23 == 0, &|note| note < 11, &|_| false];
        for keep in narrow {
            let kept: Vec<_> = all
                .iter()
                .filter(|(note, _)| keep(*note))
                .copied()
                .collect();
            for limit in [1, 3, 10, notes] {
                let got = index.search_notes_kept("raft leader", limit, keep);
                let got = got
                    .expect("a narrow filter is searched among its notes")
                    .unwrap();
                assert_eq!(got, kept[..kept.len().min(limit)], "limit {limit}");
            }
        }
        // Wide: more than an eighth of the notes.
        assert!(
            index
                .search_notes_kept("raft leader", 10, &|note| note < 12)
                .is_some()
        );
        assert!(
            index
                .search_notes_kept("raft leader", 10, &|note| note < 13)
                .is_none()
        );
        assert!(
            index
                .search_notes_kept("raft leader", 10, &|_| true)
                .is_none()
        );
    }

    #[test]
    fn files_gone_before_they_are_read_are_diagnosed_not_indexed() {
        let vault = tempfile::tempdir().unwrap();
        let root = vault.path().canonicalize().unwrap();
        for name in ["a.md", "b.md", "c.md"] {
            fs::write(root.join(name), format!("# {name}\n\nText of {name}.\n")).unwrap();
        }
        let config = IndexConfig::new(root.join("unused"));
        for previous_hash in [None, Some([1; 32])] {
            let work = pending(&root, previous_hash);
            fs::rename(root.join("b.md"), root.join("b.txt")).unwrap();
            let (index, fields) = memory_index();
            let writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
            let mut state = IndexState::default();
            let indexed = index_files(&root, &writer, fields, work, &config, &mut state).unwrap();
            fs::rename(root.join("b.txt"), root.join("b.md")).unwrap();
            let (new, known) = if previous_hash.is_some() {
                (0, 1)
            } else {
                (1, 0)
            };
            assert_eq!(
                (
                    indexed.identical,
                    indexed.vanished_new,
                    indexed.vanished_known
                ),
                (0, new, known)
            );
            let files: Vec<&str> = state.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(files, ["a.md", "c.md"]);
            assert_eq!(
                state.walk_problems,
                [Diagnostic {
                    path: "b.md".into(),
                    message: VANISHED.into(),
                }]
            );
        }
    }

    #[test]
    fn nothing_is_committed_when_the_vault_folder_vanished_or_was_replaced() {
        let world = tempfile::tempdir().unwrap();
        let root = world.path().canonicalize().unwrap().join("vault");
        let dir = world.path().join("index");
        fs::create_dir_all(&dir).unwrap();
        for replace in [false, true] {
            fs::create_dir_all(&root).unwrap();
            fs::write(root.join("a.md"), "# A\n\nSome text.\n").unwrap();
            let (index, fields) = memory_index();
            let mut writer = index.writer_with_num_threads(1, 15_000_000).unwrap();
            let mut state = IndexState {
                root_identity: Some(root_identity(&root).unwrap()),
                ..IndexState::default()
            };
            let config = IndexConfig::new(dir.clone());
            index_files(
                &root,
                &writer,
                fields,
                pending(&root, None),
                &config,
                &mut state,
            )
            .unwrap();
            fs::rename(&root, world.path().join(format!("moved-{replace}"))).unwrap();
            if replace {
                fs::create_dir(&root).unwrap();
            }
            let err = finish(&root, &dir, &mut writer, state).unwrap_err();
            assert!(err.downcast_ref::<VaultVanished>().is_some(), "{err:#}");
            assert_eq!(index.load_metas().unwrap().payload, None);
            let _ = fs::remove_dir(&root);
        }
    }

    #[test]
    fn hits_of_equal_score_are_taken_in_path_order_whatever_the_document_order() {
        let (index, fields) = memory_index();
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        // Added in reverse path order: document ids run against the paths.
        for n in (0..100).rev() {
            let mut doc = TantivyDocument::default();
            doc.add_text(fields.path, format!("n{n:03}.md"));
            doc.add_text(fields.text, "the zebra grazes");
            writer.add_document(doc).unwrap();
        }
        writer.commit().unwrap();
        let reader: IndexReader = index.reader().unwrap();
        let stats = KindStatistics {
            searcher: reader.searcher(),
            docs: 100,
        };
        let query = BooleanQuery::new(vec![should_term(
            fields.text,
            "zebra",
            IndexRecordOption::WithFreqs,
            1.0,
        )]);
        let scored = [(Term::from_field_text(fields.text, "zebra"), 1.0)];
        let opened = bare_index(&index, reader, fields);
        for limit in [1, 10, 50, 100, 150] {
            let paths: Vec<String> = opened
                .top_paths(&query, &scored, limit, &stats)
                .unwrap()
                .into_iter()
                .map(|(path, _, _)| path)
                .collect();
            let expected: Vec<String> =
                (0..limit.min(100)).map(|n| format!("n{n:03}.md")).collect();
            assert_eq!(paths, expected, "limit {limit}");
        }
    }

    /// The first hits must not depend on how many are asked for: with
    /// tantivy's block-max pruning, a query of a word no note has beside
    /// one every note has skipped the best note (its block's bound, made
    /// under the segment's statistics, fell below the notes' scores).
    #[test]
    fn the_first_hits_do_not_depend_on_how_many_are_asked() {
        let (index, fields) = memory_index();
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 60_000_000).unwrap();
        // Notes 0-127 mention the word 8 times in 50 words; then short
        // notes that mention it once, among them one long note with 50
        // mentions, the best hit. Sixteen sections a note make the
        // segment's average length far below the notes'.
        let notes = 400;
        for n in 0..notes {
            let (mentions, filler) = match n {
                0..128 => (6 + n % 4, 42 + n % 3),
                200 => (50, 150),
                _ => (1, 2),
            };
            let mut doc = TantivyDocument::default();
            doc.add_text(fields.path, format!("n{n:03}.md"));
            doc.add_text(
                fields.text,
                "alpha ".repeat(mentions) + &"filler ".repeat(filler),
            );
            writer.add_document(doc).unwrap();
            for section in 0..16 {
                let mut doc = TantivyDocument::default();
                doc.add_text(fields.path, format!("n{n:03}.md"));
                doc.add_u64(fields.section, section);
                doc.add_text(fields.sec_body, "alpha filler");
                writer.add_document(doc).unwrap();
            }
        }
        writer.commit().unwrap();
        let reader: IndexReader = index.reader().unwrap();
        let stats = KindStatistics {
            searcher: reader.searcher(),
            docs: notes as u64,
        };
        // A word no note has, beside one every note has.
        let query = BooleanQuery::new(vec![
            should_term(fields.text, "omega", IndexRecordOption::WithFreqs, 1.0),
            should_term(fields.text, "alpha", IndexRecordOption::WithFreqs, 1.0),
        ]);
        let scored = [
            (Term::from_field_text(fields.text, "omega"), 1.0),
            (Term::from_field_text(fields.text, "alpha"), 1.0),
        ];
        let opened = bare_index(&index, reader, fields);
        let all = opened.top_paths(&query, &scored, notes, &stats).unwrap();
        assert_eq!(all.len(), notes);
        for limit in [1, 2, 5, 10, 40] {
            let top = opened.top_paths(&query, &scored, limit, &stats).unwrap();
            assert_eq!(top, all[..limit], "limit {limit}");
        }
    }

    #[test]
    fn a_score_is_the_sum_of_its_terms_scores_in_clause_order() {
        let (index, fields) = memory_index();
        // Two writer threads: documents spread over segments.
        let mut writer: IndexWriter = index.writer_with_num_threads(2, 30_000_000).unwrap();
        let texts = [
            "the zebra grazes near the river",
            "zebra zebra zebra",
            "a giraffe grazes; the zebra rests by the river bank",
            "river river grazes",
        ];
        for round in 0..50 {
            for (n, text) in texts.iter().enumerate() {
                let mut doc = TantivyDocument::default();
                doc.add_text(fields.path, format!("n{round:02}-{n}.md"));
                doc.add_text(fields.text, text);
                writer.add_document(doc).unwrap();
            }
        }
        writer.commit().unwrap();
        let reader: IndexReader = index.reader().unwrap();
        let searcher = reader.searcher();
        let stats = KindStatistics {
            searcher: searcher.clone(),
            docs: 200,
        };
        let words = ["zebra", "graze", "river"];
        let scored: Vec<(Term, f32)> = words
            .iter()
            .zip([1.0, 1.5, 1.0])
            .map(|(word, boost)| (Term::from_field_text(fields.text, word), boost))
            .collect();
        // Each term alone: tantivy's own score of every document.
        let alone: Vec<HashMap<DocAddress, f32>> = scored
            .iter()
            .map(|(term, boost)| {
                let query = BoostQuery::new(
                    Box::new(TermQuery::new(term.clone(), IndexRecordOption::WithFreqs)),
                    *boost,
                );
                searcher
                    .search_with_statistics_provider(
                        &query,
                        &TopDocs::with_limit(200).order_by_score(),
                        &stats,
                    )
                    .unwrap()
                    .into_iter()
                    .map(|(score, address)| (address, score))
                    .collect()
            })
            .collect();
        let mut top: Vec<(f32, DocAddress)> = (0..searcher.segment_readers().len() as u32)
            .flat_map(|segment| {
                let docs = searcher.segment_reader(segment).max_doc();
                (0..docs).map(move |doc| (f32::NAN, DocAddress::new(segment, doc)))
            })
            .collect();
        assert_eq!(top.len(), 200);
        rescore(&searcher, &stats, &scored, &mut top).unwrap();
        for (score, address) in top {
            let mut expected = 0.0f32;
            for scores in &alone {
                expected += scores.get(&address).copied().unwrap_or(0.0);
            }
            assert_eq!(score.to_bits(), expected.to_bits(), "{address:?}");
        }
    }
}

/// Removes the files of the full-text index that its last commit does not
/// use: what a killed writer left behind, which tantivy would otherwise try
/// to create again under the same name (`FileAlreadyExists`, on every later
/// update). The caller holds the ctxpack lock, so no other writer runs;
/// readers only open files `meta.json` names, and tantivy's meta lock is
/// held so none is between reading `meta.json` and opening its files.
fn remove_uncommitted_files(index: &Index, tantivy_dir: &Path) -> Result<()> {
    use tantivy::directory::Directory;
    let metas = index
        .load_metas()
        .map_err(|err| anyhow!("cannot read the full-text index: {err}"))?;
    let committed = metas.list_segment_files();
    let _meta_lock = index
        .directory()
        .acquire_lock(&tantivy::directory::META_LOCK)
        .map_err(|err| anyhow!("cannot lock the full-text index: {err}"))?;
    let entries = fs::read_dir(tantivy_dir)
        .with_context(|| format!("cannot list {}", tantivy_dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        // Lock files and `.managed.json` start with a dot; tantivy's own
        // temporary files (`.tmp…`, from an interrupted `meta.json` write)
        // are the only dot files that are left behind.
        let bookkeeping = name_text.starts_with('.') && !name_text.starts_with(".tmp");
        if bookkeeping || name_text == "meta.json" || committed.contains(Path::new(&name)) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        // A view's index (see `location::view_dir`) is not this index.
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with("view-"))
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            _ => entry.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

/// Scores the `top` hits anew: each term's BM25 score (as tantivy's term
/// scorer computes it, boost included) summed in the order of `scored`.
/// Tantivy sums a ranked OR in the order its scorers happen to stand in,
/// which follows document ids: with several indexing threads, which
/// document lands in which segment varies from build to build, and so did
/// the last bits of a score, and with them a pack's order among near ties.
/// Summed in one order, a score depends on the vault alone.
fn rescore(
    searcher: &tantivy::Searcher,
    stats: &KindStatistics,
    scored: &[(Term, f32)],
    top: &mut [(f32, DocAddress)],
) -> Result<()> {
    use tantivy::DocSet;
    use tantivy::postings::Postings;
    let weights = scored
        .iter()
        .map(|(term, boost)| {
            Ok(
                tantivy::query::Bm25Weight::for_terms(stats, std::slice::from_ref(term))?
                    .boost_by(*boost),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    // Postings are read forward: the hits of each segment in document order.
    let mut order: Vec<usize> = (0..top.len()).collect();
    order.sort_by_key(|&i| (top[i].1.segment_ord, top[i].1.doc_id));
    let mut scores = vec![0.0f32; top.len()];
    for segment in order.chunk_by(|&a, &b| top[a].1.segment_ord == top[b].1.segment_ord) {
        let reader = searcher.segment_reader(top[segment[0]].1.segment_ord);
        for ((term, _), weight) in scored.iter().zip(&weights) {
            let Some(mut postings) = reader
                .inverted_index(term.field())?
                .read_postings(term, IndexRecordOption::WithFreqs)?
            else {
                continue;
            };
            let fieldnorms = reader.get_fieldnorms_reader(term.field())?;
            for &hit in segment {
                let doc = top[hit].1.doc_id;
                // Already past `doc`: the term is not in it.
                let at = if postings.doc() < doc {
                    postings.seek(doc)
                } else {
                    postings.doc()
                };
                if at == doc {
                    scores[hit] += weight.score(fieldnorms.fieldnorm_id(doc), postings.term_freq());
                }
            }
        }
    }
    for (hit, score) in top.iter_mut().zip(scores) {
        hit.0 = score;
    }
    Ok(())
}

/// One optional term of a ranked-OR query, boosted unless `boost` is 1.
fn should_term(
    field: Field,
    text: &str,
    record: IndexRecordOption,
    boost: f32,
) -> (Occur, Box<dyn Query>) {
    let query: Box<dyn Query> =
        Box::new(TermQuery::new(Term::from_field_text(field, text), record));
    if boost == 1.0 {
        (Occur::Should, query)
    } else {
        (Occur::Should, Box::new(BoostQuery::new(query, boost)))
    }
}

/// A collector's score of a document: the query's own. Collecting through
/// it scores every matching document. Ordered by plain score, tantivy
/// skips blocks of postings by a bound its segment computed under the
/// segment's own statistics (all its documents, sections among them) and
/// with a word no note has beside one every note has, skipped the best
/// hit: a top ten depended on how many hits were asked for, and on how the
/// indexing threads had cut the segments. Measured at 10k and 100k notes,
/// scoring every match costs nothing a search shows (docs/benchmarks.md).
fn every_score(_: &tantivy::SegmentReader) -> impl Fn(tantivy::DocId, f32) -> f32 + use<> {
    |_, score| score
}

/// BM25 statistics for one kind of document (notes or sections), which
/// share one tantivy index but never share a field.
struct KindStatistics {
    searcher: tantivy::Searcher,
    docs: u64,
}

impl tantivy::query::Bm25StatisticsProvider for KindStatistics {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searcher.total_num_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        // Deleted documents count until their segment is merged.
        Ok(self.searcher.doc_freq(term)?.min(self.docs))
    }
}

impl RawLink {
    fn from_record(record: LinkRecord, metas: &MetaTable) -> RawLink {
        let target = if record.raw.is_empty() {
            metas
                .get(record.target as usize)
                .map(|m| m.name().to_string())
                .unwrap_or_default()
        } else {
            record.raw
        };
        RawLink {
            target,
            markdown: record.markdown,
            context: record.context,
        }
    }
}

/// What a build or update accumulates before its commit.
#[derive(Default)]
struct IndexState {
    policy: Arc<Policy>,
    files: Vec<FileEntry>,
    metas: Vec<NoteMeta>,
    raw_links: Vec<Vec<RawLink>>,
    /// Parallel to `metas`.
    props: Vec<NoteProperties>,
    walk_problems: Vec<Diagnostic>,
    /// The vault folder's (device, inode) when the work began: a commit is
    /// made only if the same folder is still there.
    root_identity: Option<(u64, u64)>,
}

/// What [`index_files`] did besides indexing.
struct Indexed {
    /// Files with the same content as before (their documents kept).
    identical: usize,
    /// New files gone before they were read (not indexed, diagnosed).
    vanished_new: usize,
    /// Known files gone before they were read again (their documents
    /// deleted: they are removed).
    vanished_known: usize,
}

/// Reads, parses and indexes `work` in batches, recording the results in
/// `state`. A file the walk listed and that is gone when read is left out
/// of the catalog with a diagnostic, so the next update does not believe
/// it was indexed.
fn index_files(
    root: &Path,
    writer: &IndexWriter,
    fields: Fields,
    work: Vec<Pending>,
    config: &IndexConfig,
    state: &mut IndexState,
) -> Result<Indexed> {
    let stage = Stage::Indexing;
    config.progress.report(Event::Started {
        stage,
        total: work.len() as u64,
    });
    let mut indexed = Indexed {
        identical: 0,
        vanished_new: 0,
        vanished_known: 0,
    };
    let problems_before = state.walk_problems.len();
    // A set number of threads holds the parsing too (the global pool has
    // one per core).
    let pool = match config.threads {
        Some(threads) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()?,
        ),
        None => None,
    };
    let parse = |batch: &[Pending]| -> Vec<Parsed> {
        batch
            .par_iter()
            .map(|item| {
                let (entry, prepared) =
                    read_and_parse(root, item, config.max_file_bytes, &config.policy);
                Parsed::new(fields, item, entry, prepared.map(|p| p.note))
            })
            .collect()
    };
    for batch in work.chunks(BATCH) {
        // Everything a note adds (its documents, its links) is made on the
        // parsing threads: the loop below only hands documents to the
        // writer, whose own threads tokenize them meanwhile. Made here, in
        // one thread, it held the build to about one core.
        let parsed = match &pool {
            Some(pool) => pool.install(|| parse(batch)),
            None => parse(batch),
        };
        for (item, parsed) in batch.iter().zip(parsed) {
            let Parsed {
                mut entry,
                note,
                same,
            } = parsed;
            if note.is_none() && !entry.problems.is_empty() && vanished(root, &item.found) {
                if item.previous_hash.is_some() {
                    writer.delete_term(Term::from_field_text(fields.path, &item.found.rel_path));
                    indexed.vanished_known += 1;
                } else {
                    indexed.vanished_new += 1;
                }
                state.walk_problems.push(Diagnostic {
                    path: item.found.rel_path.clone(),
                    message: VANISHED.into(),
                });
                continue;
            }
            if same {
                indexed.identical += 1;
            } else if item.previous_hash.is_some() {
                writer.delete_term(Term::from_field_text(fields.path, &item.found.rel_path));
            }
            if let Some(note) = note {
                entry.sections = note.sections;
                for document in note.documents {
                    writer.add_document(document)?;
                }
                state.raw_links.push(note.links);
                state.props.push(note.props);
                state.metas.push(note.meta);
            }
            state.files.push(entry);
        }
        config.progress.report(Event::Advanced {
            stage,
            count: batch.len() as u64,
        });
    }
    config.progress.report(Event::Finished { stage });
    if state.walk_problems.len() > problems_before {
        state.walk_problems.sort();
    }
    Ok(indexed)
}

/// A file of a batch, read and parsed on a parsing thread.
struct Parsed {
    entry: FileEntry,
    note: Option<ParsedNote>,
    /// The content is what the index holds already (its documents kept).
    same: bool,
}

/// What a note adds to the index, the note itself dropped.
struct ParsedNote {
    meta: NoteMeta,
    links: Vec<RawLink>,
    props: NoteProperties,
    sections: u32,
    /// The note's documents; none when its content is unchanged.
    documents: Vec<TantivyDocument>,
}

impl Parsed {
    fn new(fields: Fields, item: &Pending, entry: FileEntry, note: Option<Note>) -> Parsed {
        let same = item.previous_hash == Some(entry.hash) && entry.hash != [0; 32];
        let note = note.map(|note| {
            let documents = if same {
                Vec::new()
            } else {
                note_documents(fields, &note)
            };
            ParsedNote {
                sections: note.sections().len() as u32,
                links: raw_links(&note),
                props: NoteProperties::of(&note),
                documents,
                meta: note.meta,
            }
        });
        Parsed { entry, note, same }
    }
}

/// Whether the file the walk found is no longer there to read.
fn vanished(root: &Path, found: &walk::Found) -> bool {
    fs::symlink_metadata(found.read_path(root))
        .is_err_and(|err| err.kind() == std::io::ErrorKind::NotFound)
}

/// The note-level document: path and the weighted text of the note.
fn note_document(fields: Fields, note: &Note) -> TantivyDocument {
    let mut doc = TantivyDocument::default();
    doc.add_text(fields.path, &note.meta.path);
    for (part, (_, repeats)) in note_text_parts(note).iter().zip(FIELD_REPEATS) {
        if !part.is_empty() {
            for _ in 0..repeats {
                doc.add_text(fields.text, part);
            }
        }
    }
    doc
}

/// The note document followed by one document per section, in section
/// order.
fn note_documents(fields: Fields, note: &Note) -> Vec<TantivyDocument> {
    let sections = section_texts(note);
    let mut documents = Vec::with_capacity(1 + sections.len());
    documents.push(note_document(fields, note));
    for (ordinal, (heading, text)) in sections.iter().enumerate() {
        let mut doc = TantivyDocument::default();
        doc.add_text(fields.path, &note.meta.path);
        doc.add_u64(fields.section, ordinal as u64);
        if let Some(heading) = heading {
            doc.add_text(fields.sec_heading, heading);
        }
        doc.add_text(fields.sec_body, text);
        documents.push(doc);
    }
    documents
}

/// Sorts what was indexed, resolves links and role files against the final
/// set of notes, writes the blobs and commits with a payload naming them.
fn finish(root: &Path, dir: &Path, writer: &mut IndexWriter, state: IndexState) -> Result<()> {
    let IndexState {
        policy,
        files,
        mut metas,
        raw_links,
        props,
        walk_problems,
        root_identity: identity_at_start,
    } = state;
    // Notes read from a folder moved away or deleted meanwhile are not
    // the vault: commit nothing (the last commit, if any, stays).
    if let Some(identity) = identity_at_start
        && root_identity(root)? != identity
    {
        return Err(VaultVanished(root.to_path_buf()).into());
    }
    crate::analysis::mark_shared_file_times(&mut metas);
    let mut order: Vec<usize> = (0..metas.len()).collect();
    order.sort_by(|&a, &b| metas[a].path.cmp(&metas[b].path));
    let mut metas_sorted = Vec::with_capacity(metas.len());
    let mut links_sorted = Vec::with_capacity(metas.len());
    let mut metas = metas.into_iter().map(Some).collect::<Vec<_>>();
    let mut raw_links = raw_links.into_iter().map(Some).collect::<Vec<_>>();
    let mut props = props.into_iter().map(Some).collect::<Vec<_>>();
    let mut props_sorted = PropertyTable::default();
    for idx in order {
        metas_sorted.extend(metas[idx].take());
        links_sorted.push(raw_links[idx].take().unwrap_or_default());
        props_sorted.notes.push(
            props
                .get_mut(idx)
                .and_then(Option::take)
                .unwrap_or_default(),
        );
    }
    let metas_sorted = Arc::new(MetaTable::new(metas_sorted));
    let resolver = Arc::new(LinkResolver::new(&metas_sorted));
    let table = LinkTable {
        links: resolve_links(
            &metas_sorted,
            &resolver,
            links_sorted,
            |link: &RawLink| (link.target.as_str(), link.markdown),
            |link, target| {
                // The usual case, a link written as its target's name,
                // needs no copy of the name.
                let raw = if link
                    .target
                    .eq_ignore_ascii_case(metas_sorted[target].name())
                {
                    String::new()
                } else {
                    link.target
                };
                LinkRecord {
                    target: target as u32,
                    raw,
                    markdown: link.markdown,
                    context: link.context,
                }
            },
        ),
    };
    let mut role_vault = Vault::from_metas(
        root.to_path_buf(),
        Arc::clone(&metas_sorted),
        HashMap::new(),
        Vec::new(),
        Vec::new(),
    );
    role_vault.set_policy(Arc::clone(&policy));
    role_vault.set_resolver(Arc::clone(&resolver));
    let (index_descriptions, hot) = role_vault.read_role_files();
    let mut index_descriptions: Vec<(u32, String)> = index_descriptions
        .into_iter()
        .map(|(i, d)| (i as u32, d))
        .collect();
    index_descriptions.sort();
    let descriptions: HashMap<usize, &str> = index_descriptions
        .iter()
        .map(|(i, d)| (*i as usize, d.as_str()))
        .collect();
    let match_keys: Vec<MatchKeys> = metas_sorted
        .iter()
        .enumerate()
        .map(|(idx, meta)| MatchKeys::new(meta, descriptions.get(&idx).copied()))
        .collect();
    let catalog = Catalog::new(
        root.to_string_lossy().into_owned(),
        files,
        metas_sorted,
        Arc::new(KeysTable::new(&match_keys)),
        Arc::clone(&resolver),
        index_descriptions,
        hot.into_iter().map(|i| i as u32).collect(),
        walk_problems,
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    );
    let catalog_hash = catalog.save(dir)?;
    let links_hash = catalog::save_blob(dir, "links", &table)?;
    let backlinks = catalog::encode_backlinks(&table, catalog.metas.len());
    let backlinks_hash = catalog::save_bytes(dir, "backlinks", &backlinks)?;
    let props_hash = catalog::save_blob(dir, "props", &props_sorted)?;
    let payload = serde_json::to_string(&Payload {
        format: FORMAT_VERSION,
        catalog: catalog_hash.clone(),
        links: links_hash.clone(),
        backlinks: backlinks_hash.clone(),
        policy: policy.fingerprint().to_string(),
        props: props_hash.clone(),
    })?;
    // The commit this one replaces: readers that opened it may still read
    // its blobs (the backlink table and link table are opened lazily), so
    // they are kept until the next commit; every older blob is collected.
    let previous: Option<Payload> = writer
        .index()
        .load_metas()
        .ok()
        .and_then(|metas| metas.payload)
        .and_then(|payload| serde_json::from_str(&payload).ok());
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&payload);
    prepared.commit()?;
    let mut keep = vec![catalog_hash, links_hash, backlinks_hash, props_hash];
    if let Some(previous) = previous {
        keep.extend([
            previous.catalog,
            previous.links,
            previous.backlinks,
            previous.props,
        ]);
    }
    // A payload of an older format names no property blob.
    keep.retain(|hash| !hash.is_empty());
    catalog::remove_stale(dir, &keep);
    Ok(())
}

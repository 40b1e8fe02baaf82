//! Keeping a vault's index: where it lives, building or updating it,
//! syncing a store, and the status report. The CLI and the MCP server call
//! these and print what they return; what an error means (the user's
//! configuration to fix, or a failure) is decided here too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use chrono::{DateTime, SecondsFormat};

use super::{SessionError, StoreTarget};
use crate::index::{VaultIndex, location};
use crate::note::Diagnostic;
use crate::privacy::Policy;
use crate::store::postgres::StoreError;

// The settings and reports a face passes through without looking inside.
pub(crate) use super::embedding::embedding_progress;
pub(crate) use crate::index::vectors::{AnnChoice, VectorFormat};
pub(crate) use crate::index::{IndexConfig, UpdateReport};
pub(crate) use crate::retrieve::qmd::{QmdConfig, QmdError};
pub(crate) use crate::store::postgres::StoreUrl;

/// A user's mistake (bad configuration, bad arguments) met while running an
/// operation, as opposed to a failure: a face exits 2 for it, not 1.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The message of `err` when it is the user's to fix (an index folder
/// inside the vault, a policy that does not parse, a store URL or id that
/// is wrong, a [`UsageError`]); `None` for a failure.
pub(crate) fn usage_message(err: &anyhow::Error) -> Option<String> {
    if let Some(usage) = err.downcast_ref::<UsageError>() {
        return Some(usage.0.clone());
    }
    if let Some(refused) = err.downcast_ref::<location::IndexDirError>() {
        return Some(refused.to_string());
    }
    if let Some(policy) = err.downcast_ref::<crate::privacy::PolicyError>() {
        return Some(policy.to_string());
    }
    err.downcast_ref::<StoreError>().map(StoreError::to_string)
}

pub(crate) use crate::audit::{AuditReport, render as render_audit};

/// The vault's privacy policy (its `.ctxpack.yaml`, else the defaults),
/// or why it does not parse.
pub(crate) fn load_policy(root: &Path) -> Result<Arc<Policy>, SessionError> {
    Ok(Arc::new(Policy::load(root)?))
}

/// What the privacy policy keeps out of the vault's view, file by file.
pub(crate) fn audit_vault(root: &Path) -> Result<AuditReport, SessionError> {
    let policy = load_policy(root)?;
    Ok(crate::audit::audit(root, &policy, &[]))
}

/// The store URL in `text`, or why it is not one.
pub(crate) fn parse_store_url(text: &str) -> Result<StoreUrl, SessionError> {
    text.parse().map_err(SessionError::StoreUrl)
}

/// The index folder of the vault at `root` (`dir` if given, else the
/// environment's cache folder), checked to lie outside the vault, with the
/// vault's privacy policy.
pub(crate) fn index_config(root: &Path, dir: Option<&Path>) -> Result<IndexConfig, SessionError> {
    let dir = location::index_dir(root, dir).ok_or(SessionError::NoIndexPlace)?;
    // Checked before `--stop` or a background watcher's lock touch it.
    location::check_outside(root, &dir).map_err(|err| SessionError::IndexDir(err.0))?;
    let mut config = IndexConfig::new(dir);
    config.policy = load_policy(root)?;
    Ok(config)
}

/// What building or updating an index did.
#[derive(Clone, Debug)]
pub(crate) struct IndexBuilt {
    pub notes: usize,
    pub sections: u64,
    pub report: UpdateReport,
}

/// Builds the index anew (`rebuild`) or brings it up to date.
pub(crate) fn build_index(root: &Path, config: &IndexConfig, rebuild: bool) -> Result<IndexBuilt> {
    let (index, report) = if rebuild {
        VaultIndex::rebuild(root, config)?
    } else {
        VaultIndex::open(root, config)?
    };
    Ok(IndexBuilt {
        notes: index.catalog.metas.len(),
        sections: index.catalog.sections,
        report,
    })
}

/// Brings the index up to date and says what changed.
pub(crate) fn update_index(root: &Path, config: &IndexConfig) -> Result<UpdateReport> {
    VaultIndex::open(root, config).map(|(_, report)| report)
}

/// One line saying what an update did.
pub(crate) fn describe_update(report: &UpdateReport) -> String {
    format!(
        "{} added, {} changed, {} removed, {} unchanged",
        report.added, report.changed, report.removed, report.unchanged
    )
}

/// A store's own refusal (a bad URL, an unknown vault id) as the user's
/// to fix; `None` for any other failure.
pub(crate) fn store_usage_message(err: &anyhow::Error) -> Option<String> {
    err.downcast_ref::<StoreError>().map(StoreError::to_string)
}

/// QMD's settings from the resolved config, the process environment
/// filling in what the config file does not set.
pub(crate) fn qmd_config(
    vars: &std::collections::BTreeMap<String, String>,
) -> Option<Result<QmdConfig, QmdError>> {
    use crate::retrieve::qmd;
    let mut vars = vars.clone();
    for key in [qmd::COLLECTION_KEY, qmd::CLI_KEY, qmd::MODE_KEY] {
        if let Ok(value) = std::env::var(key) {
            vars.entry(key.to_string()).or_insert(value);
        }
    }
    QmdConfig::from_vars(&vars, std::env::var_os("PATH").as_deref())
}

/// Syncs the vault at `root` into the store (by content hash). A writing
/// project (a folder with `meta/recipe.yaml`) is synced whole, in the same
/// transaction: its tree for `assemble --store`, and each library some
/// work binds as a vault of its own (`<id>/<library folder>`), which L3
/// ranks from; libraries no work binds stay out of the store.
pub(crate) fn sync_store(
    root: &Path,
    target: &StoreTarget,
    policy: Arc<Policy>,
) -> Result<UpdateReport> {
    use crate::store::postgres::sync::Overtaken;
    // A sync overtaken by a change to the policy (or the project's tree)
    // while it waited for the store's lock runs again, the policy read
    // afresh; a vault whose policy keeps changing is left to the next run.
    const ATTEMPTS: usize = 3;
    let mut policy = policy;
    for attempt in 1.. {
        match sync_store_once(root, target, Arc::clone(&policy)) {
            Err(err) if attempt < ATTEMPTS && err.downcast_ref::<Overtaken>().is_some() => {
                policy = load_policy(root).map_err(anyhow::Error::msg)?;
            }
            done => return done,
        }
    }
    unreachable!("the loop returns by its last attempt")
}

fn sync_store_once(root: &Path, target: &StoreTarget, policy: Arc<Policy>) -> Result<UpdateReport> {
    use crate::store::postgres::sync::{Overtaken, ProjectPart, SyncOptions, sync, sync_project};
    let mut options = SyncOptions::new(target.vault.clone(), Arc::clone(&policy));
    // The project's tree is read as the assembler reads it: each purpose
    // is shown its own fields from it (the vault's rows are synced under
    // `policy`, which hides what some purpose may not see).
    let assembly_policy = Policy::load_without_project(root)?;
    let Some(libraries) =
        crate::assemble::project_libraries(root, &assembly_policy).map_err(|problem| {
            anyhow::Error::new(crate::store::postgres::StoreError::Project(format!(
                "{} cannot be synced as a writing project: {problem}",
                root.display()
            )))
        })?
    else {
        return sync(&target.url, root, &options);
    };
    // The vault tools served from the store see what some work may read,
    // as `serve` over the folder does.
    options.hidden = crate::assemble::unbound_libraries(root).map_err(anyhow::Error::msg)?;
    let mut parts = vec![ProjectPart {
        root: root.to_path_buf(),
        options,
    }];
    for (_, folder) in &libraries {
        let library_root = root.join(folder);
        // Ranked as `assemble` ranks a library in the folder: a vault of its
        // own, read under its own policy.
        let policy = Arc::new(Policy::load(&library_root)?);
        parts.push(ProjectPart {
            root: library_root,
            options: SyncOptions::new(format!("{}/{folder}", target.vault), policy),
        });
    }
    // The tree is read again once the locks are held (the one above only
    // said which libraries to sync): an earlier sync must not write an
    // older tree, nor one read under an older policy, over a newer one.
    let project_root = root.to_path_buf();
    let synced: Vec<String> = libraries.iter().map(|(_, folder)| folder.clone()).collect();
    let entries = move || -> Result<_> {
        let policy = Policy::load_without_project(&project_root)?;
        let image = crate::assemble::project_image(&project_root, &policy).map_err(|problem| {
            anyhow::Error::new(crate::store::postgres::StoreError::Project(format!(
                "{} cannot be synced as a writing project: {problem}",
                project_root.display()
            )))
        })?;
        match image {
            Some((entries, libraries))
                if libraries.iter().map(|(_, folder)| folder).eq(synced.iter()) =>
            {
                Ok(entries)
            }
            _ => {
                Err(Overtaken(format!("the writing project at {}", project_root.display())).into())
            }
        }
    };
    let report = sync_project(&target.url, parts, entries)?;
    let mut total = report.parts.into_iter().next().unwrap_or_default();
    // The recipe, schemas and bindings are files of the project too.
    let [added, changed, removed] = report.others;
    total.added += added;
    total.changed += changed;
    total.removed += removed;
    Ok(total)
}

pub(crate) use crate::vault::changes::{StopOutcome, Watching};

/// Registers one kernel watch set on the vault: its batches of changed
/// paths go to the caller, and it answers other commands' "what changed?"
/// on the index folder's socket (when `index_dir` is given and no other
/// watcher answers there). With `stop`, a stop request sets it.
pub(crate) fn watch_changes(
    root: &Path,
    index_dir: Option<&Path>,
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
) -> std::io::Result<Watching> {
    crate::vault::changes::watch(root, index_dir, stop)
}

/// Whether a watcher answers for the vault's index.
pub(crate) fn watcher_answers(index_dir: &Path, root: &Path) -> bool {
    crate::vault::changes::ask(index_dir, root, None).is_some()
}

/// The lock a background watcher holds for its life, in the index folder.
const BACKGROUND_LOCK: &str = "watch.lock";

/// Takes the background watcher's lock, or `None` when another process
/// (or another open of it here) holds it. Held for the watcher's life: a
/// second background watcher of the same index finds it taken and leaves.
pub(crate) fn lock_background_watcher(index_dir: &Path) -> Option<std::fs::File> {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(index_dir.join(BACKGROUND_LOCK))
        .ok()?;
    lock.try_lock().ok()?;
    Some(lock)
}

/// What asking for a background watcher did.
#[derive(Debug)]
pub(crate) enum WatcherStart {
    /// A watcher answers already, or one is starting.
    Running,
    Started,
    /// No watcher can run here (no inotify), or this program's own path
    /// is unknown.
    Unavailable,
    /// The process could not be started.
    Failed(std::io::Error),
}

/// Starts `ctxpack index --watch` (this program) for the vault in the
/// background, unless a watcher already answers or one is starting; it
/// reads `model` when given. It outlives the caller, in its own session;
/// its messages go to `watch.log` in the index folder.
#[cfg(target_os = "linux")]
pub(crate) fn start_background_watcher(
    root: &Path,
    index_dir: &Path,
    model: Option<&str>,
) -> WatcherStart {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;

    if watcher_answers(index_dir, root) {
        return WatcherStart::Running;
    }
    // Taken and let go at once: only a check that none is starting.
    if lock_background_watcher(index_dir).is_none() {
        return WatcherStart::Running;
    }
    let Ok(exe) = std::env::current_exe() else {
        return WatcherStart::Unavailable;
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(index_dir.join("watch.log"));
    let mut command = std::process::Command::new(exe);
    command
        .args(["index", "--watch", "--background", "--quiet", "--vault"])
        .arg(root)
        .arg("--index-dir")
        .arg(index_dir);
    if let Some(model) = model {
        command.args(["--model", model]);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(match log {
            Ok(file) => std::process::Stdio::from(file),
            Err(_) => std::process::Stdio::null(),
        });
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    match command.spawn() {
        Ok(_) => WatcherStart::Started,
        Err(err) => WatcherStart::Failed(err),
    }
}

/// Without inotify there is no watcher endpoint to start.
#[cfg(not(target_os = "linux"))]
pub fn start_background_watcher(
    _root: &Path,
    _index_dir: &Path,
    _model: Option<&str>,
) -> WatcherStart {
    WatcherStart::Unavailable
}

/// Whether the watcher's socket is still there.
pub(crate) fn watcher_socket_exists(index_dir: &Path) -> bool {
    index_dir.join(crate::vault::changes::SOCKET_FILE).exists()
}

/// Asks the vault's watcher to stop and, when it agrees, waits (up to ten
/// seconds) for its socket to go.
pub(crate) fn stop_watcher(root: &Path, index_dir: &Path) -> StopOutcome {
    let outcome = crate::vault::changes::request_stop(index_dir, root);
    if let StopOutcome::Stopping = outcome {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while watcher_socket_exists(index_dir) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    outcome
}

/// Paths remembered per burst of changes: a storm of events (a sync tool
/// rewriting the vault) keeps memory bounded; paths past it go unnamed.
pub(crate) const MAX_CHANGED_PATHS: usize = 10_000;

/// A watch on a vault's notes, registered: from the moment it exists,
/// nothing written can be missed, and other commands on the vault ask it
/// what changed (on the index folder's socket) instead of walking. One
/// kernel watch set a vault, for `index --watch` and `serve` alike.
pub(crate) struct VaultWatch {
    root: PathBuf,
    watching: Watching,
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl VaultWatch {
    /// Registers the watch on `root`, answering on the socket in
    /// `index_dir` when given; with `stop`, a stop request on that socket
    /// sets it.
    pub(crate) fn start(
        root: &Path,
        index_dir: Option<&Path>,
        stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<VaultWatch> {
        let watching = watch_changes(root, index_dir, stop.clone())
            .map_err(|err| anyhow::anyhow!("cannot watch the vault: {err}"))?;
        if let Some(err) = &watching.socket_error {
            eprintln!("ctxpack: warning: commands will walk the vault: no watcher socket ({err})");
        }
        Ok(VaultWatch {
            root: root.to_path_buf(),
            watching,
            stop,
        })
    }

    /// Calls `on_change` once at once (for what changed before the watch
    /// was registered, with no paths), then after each burst of changes
    /// to the vault's notes (300 ms of quiet ends a burst) with the
    /// burst's paths under the watched folder, at most
    /// [`MAX_CHANGED_PATHS`]; until `stop` is set, or the folder is moved,
    /// deleted or replaced (an error: the watch is on this folder, not on
    /// the path, and another folder there would never be seen).
    pub(crate) fn run(self, on_change: &mut dyn FnMut(&[PathBuf])) -> Result<()> {
        use std::sync::mpsc;
        use std::time::Duration;

        let root = self.root.as_path();
        let events = &self.watching.changes;
        on_change(&[]);
        let quiet_period = Duration::from_millis(300);
        let stopped = || {
            self.stop
                .as_ref()
                .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
        };
        let watched = crate::vault::changes::root_identity(root);
        loop {
            let first = match events.recv_timeout(Duration::from_millis(100)) {
                Ok(batch) => batch,
                Err(mpsc::RecvTimeoutError::Timeout)
                    if crate::vault::changes::root_identity(root) != watched =>
                {
                    anyhow::bail!(
                        "{} was moved, deleted or replaced; the watch stopped (start it again)",
                        root.display()
                    );
                }
                Err(mpsc::RecvTimeoutError::Timeout) if !stopped() => continue,
                Err(_) => break,
            };
            if stopped() {
                break;
            }
            let mut changed: Vec<PathBuf> = Vec::new();
            let mut affects_notes = false;
            let mut batch = first;
            loop {
                affects_notes |= crate::vault::walk::affects_notes(root, &batch);
                let room = MAX_CHANGED_PATHS.saturating_sub(changed.len());
                changed.extend(batch.into_iter().take(room));
                match events.recv_timeout(quiet_period) {
                    Ok(next) => batch = next,
                    Err(_) => break,
                }
            }
            if affects_notes {
                on_change(&changed);
            }
        }
        Ok(())
    }
}

/// Calls `on_change` after each burst of changes to the vault's notes
/// (debounced), until interrupted or `stop` is set (by a `stop` request on
/// the socket published in `index_dir`, when there is one).
pub(crate) fn watch_vault(
    root: &Path,
    index_dir: Option<&Path>,
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
    on_change: &mut dyn FnMut(),
) -> Result<()> {
    let watch = VaultWatch::start(root, index_dir, stop)?;
    eprintln!("ctxpack: watching {} (Ctrl-C to stop)", root.display());
    watch.run(&mut |_changed| on_change())
}

/// The state of a vault's embedded index.
#[derive(Clone, Debug)]
pub(crate) struct IndexStatus {
    pub root: PathBuf,
    pub dir: PathBuf,
    pub format: u32,
    pub notes: usize,
    /// The policy file in use, or that the defaults are.
    pub policy: &'static str,
    pub private_notes: usize,
    pub sections: u64,
    pub files: usize,
    pub index_bytes: u64,
    /// When the index was last updated (RFC 3339), if ever.
    pub last_update: Option<String>,
    pub this_update: UpdateReport,
    /// The semantic arm: the model named, or why there is none.
    pub semantic: String,
    pub diagnostics: Vec<Diagnostic>,
    /// How the notes are dated (what recent order and date filters use).
    pub dates: crate::analysis::DateSources,
    /// The `.obsidian` settings files read and what each said.
    pub obsidian: Vec<(String, String)>,
}

impl IndexStatus {
    /// Opens (and updates) the index to report on it. `semantic` is the
    /// face's account of the model: named, not loaded, so the status stays
    /// quick.
    pub(crate) fn read(root: &Path, config: &IndexConfig, semantic: String) -> Result<IndexStatus> {
        let (index, report) = VaultIndex::open(root, config)?;
        let mut diagnostics = index.catalog.diagnostics.clone();
        // A hand-edited feedback file whose counters are left out says so here.
        if let Ok(feedback) = crate::index::feedback::FeedbackStore::load(&config.dir) {
            diagnostics.extend(feedback.problems.into_iter().map(|message| Diagnostic {
                path: "feedback.json (index folder)".into(),
                message,
            }));
        }
        let policy = if root.join(crate::privacy::POLICY_FILE).exists() {
            crate::privacy::POLICY_FILE
        } else {
            "defaults (no .ctxpack.yaml)"
        };
        Ok(IndexStatus {
            root: root.to_path_buf(),
            dir: config.dir.clone(),
            format: crate::index::FORMAT_VERSION,
            notes: index.catalog.metas.len(),
            policy,
            private_notes: index.catalog.private_notes(),
            sections: index.catalog.sections,
            files: index.catalog.file_count,
            index_bytes: index.size_bytes(),
            last_update: DateTime::from_timestamp(index.catalog.updated_at, 0)
                .map(|d| d.to_rfc3339_opts(SecondsFormat::Secs, true)),
            this_update: report,
            semantic,
            diagnostics,
            dates: crate::analysis::DateSources::of(index.catalog.metas.iter()),
            obsidian: Policy::load(root)
                .map(|policy| policy.obsidian().read.clone())
                .unwrap_or_default(),
        })
    }

    /// The status as `status --format json` prints it.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "vault": self.root,
            "index": self.dir,
            "format": self.format,
            "notes": self.notes,
            "privacy": { "policy": self.policy, "private_notes": self.private_notes },
            "sections": self.sections,
            "files": self.files,
            "index_bytes": self.index_bytes,
            "last_update": self.last_update,
            "this_update": self.this_update,
            "arms": {
                "frontmatter": "available",
                "bm25": "available",
                "semantic": self.semantic,
            },
            "diagnostics": self.diagnostics,
            "dates": self.dates,
            "obsidian": self
                .obsidian
                .iter()
                .map(|(file, said)| serde_json::json!({ "file": file, "read": said }))
                .collect::<Vec<_>>(),
        })
    }

    /// The `.obsidian` settings read, as one line of the text status
    /// (empty when none were).
    pub(crate) fn obsidian_line(&self) -> String {
        if self.obsidian.is_empty() {
            return String::new();
        }
        let said: Vec<String> = self
            .obsidian
            .iter()
            .map(|(file, said)| format!("{file} ({said})"))
            .collect();
        format!("obsidian:     {}\n", said.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_are_told_from_failures() {
        let usage = anyhow::Error::new(UsageError("fix this".into()));
        assert_eq!(usage_message(&usage).as_deref(), Some("fix this"));
        assert_eq!(usage_message(&anyhow::anyhow!("disk on fire")), None);
    }

    #[test]
    fn an_update_is_described_in_one_line() {
        let report = UpdateReport {
            added: 1,
            changed: 2,
            removed: 3,
            unchanged: 4,
            ..UpdateReport::default()
        };
        assert_eq!(
            describe_update(&report),
            "1 added, 2 changed, 3 removed, 4 unchanged"
        );
    }

    #[test]
    fn one_background_watcher_lock_at_a_time_and_none_started_while_held() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_background_watcher(dir.path()).expect("the first takes it");
        assert!(lock_background_watcher(dir.path()).is_none());
        // A watcher starting (the lock taken): nothing is spawned.
        let outcome = start_background_watcher(dir.path(), dir.path(), None);
        if cfg!(target_os = "linux") {
            assert!(matches!(outcome, WatcherStart::Running), "{outcome:?}");
        }
        assert!(!dir.path().join("watch.log").exists());
        drop(held);
        assert!(lock_background_watcher(dir.path()).is_some());
    }
}

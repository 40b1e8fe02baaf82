//! Change detection without walking the vault, as git's filesystem monitor
//! does it: a watcher process (`index --watch`, `serve`) publishes a Unix
//! socket in the index folder that answers "what changed since token T?",
//! and a command that finds a live one walks only the paths it names.
//!
//! Correctness never depends on the watcher: no socket, no answer within
//! [`ANSWER_TIMEOUT`], a token the watcher does not know (another instance,
//! an overflowed event queue, a log past its bound) or a watcher that could
//! not watch every folder all mean a whole walk. The watcher drains the
//! kernel's event queue before it answers, so an edit saved before a command
//! asks is in the answer.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The watcher's socket, in the index folder (owner-only).
pub(crate) const SOCKET_FILE: &str = "watch.sock";
/// The token the index is current to, written after each update.
const TOKEN_FILE: &str = "watch-token";
/// How long a command waits for the watcher's answer before walking.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_millis(50);
/// How long `index --stop` waits for the watcher's answer: no command
/// waits on it, and a busy machine can hold a live watcher past
/// [`ANSWER_TIMEOUT`] (a stop then misread as a refusal).
const STOP_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_ANSWER_BYTES: u64 = 64 << 20;
const MAX_REQUEST_BYTES: u64 = 512;

/// The (device, inode) of the folder at `root` now, `None` when no folder
/// is there. A watcher watches one folder, not a path: when the path names
/// another folder (the vault moved away and a copy put in its place), what
/// it saw says nothing about the vault.
pub(crate) fn root_identity(root: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(root)
        .ok()
        .filter(|meta| meta.is_dir())
        .map(|meta| (meta.dev(), meta.ino()))
}

/// A point in one watcher's history of changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Token {
    /// Names one run of one watcher; a restarted watcher knows no older token.
    pub instance: String,
    pub seq: u64,
}

/// The watcher's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// The vault watched (canonical).
    pub root: String,
    /// The token to ask with next time, once these changes are applied.
    pub token: Token,
    /// Paths (relative, files or folders) changed since the token asked
    /// with, sorted; `None` when that token is unknown.
    pub changed: Option<Vec<String>>,
}

/// The token the index in `index_dir` was last brought up to date with,
/// if it was recorded under the same `context` (what else decides the
/// walk, such as the folders left out).
pub(crate) fn read_token(index_dir: &Path, context: &str) -> Option<Token> {
    let text = fs::read_to_string(index_dir.join(TOKEN_FILE)).ok()?;
    let mut words = text.split_whitespace();
    let (instance, seq, recorded) = (words.next()?, words.next()?, words.next()?);
    (recorded == context && words.next().is_none()).then_some(())?;
    Some(Token {
        instance: instance.to_string(),
        seq: seq.parse().ok()?,
    })
}

/// Records that the index in `index_dir` reflects every change up to
/// `token` (written after the index's own commit, so a crash in between
/// leaves an older token: changes applied twice, never missed).
pub(crate) fn write_token(index_dir: &Path, token: &Token, context: &str) -> io::Result<()> {
    // A lost token costs one walk; a sync would slow each updating command.
    crate::safe_fs::write_atomic_cache(
        &index_dir.join(TOKEN_FILE),
        format!("{} {} {context}\n", token.instance, token.seq).as_bytes(),
    )
}

/// Asks the watcher of the index in `index_dir`, if one is live, what
/// changed in the vault at `root` since `since` (or only for its current
/// token). `None` when there is no usable answer.
#[cfg(unix)]
pub(crate) fn ask(index_dir: &Path, root: &Path, since: Option<&Token>) -> Option<Answer> {
    let request = match since {
        Some(token) => format!("since {} {}\n", token.instance, token.seq),
        None => "current\n".to_string(),
    };
    send(index_dir, root, &request, ANSWER_TIMEOUT)
}

/// What asking a vault's watcher to stop found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopOutcome {
    /// No watcher answers for this index.
    NotRunning,
    /// The watcher stops once its current update is done.
    Stopping,
    /// The watcher answers but does not stop on request (a `serve`).
    Refused,
}

/// Asks the watcher of the index in `index_dir` to stop.
#[cfg(unix)]
pub(crate) fn request_stop(index_dir: &Path, root: &Path) -> StopOutcome {
    // A `serve` refuses by closing without an answer, at once.
    match send(index_dir, root, "stop\n", STOP_TIMEOUT) {
        Some(_) => StopOutcome::Stopping,
        None if send(index_dir, root, "current\n", STOP_TIMEOUT).is_some() => StopOutcome::Refused,
        None => StopOutcome::NotRunning,
    }
}

#[cfg(not(unix))]
pub(crate) fn request_stop(_index_dir: &Path, _root: &Path) -> StopOutcome {
    StopOutcome::NotRunning
}

/// Sends one request line to the watcher's socket and reads its answer,
/// within `timeout`.
#[cfg(unix)]
fn send(index_dir: &Path, root: &Path, request: &str, timeout: Duration) -> Option<Answer> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::os::unix::net::UnixStream;

    let path = index_dir.join(SOCKET_FILE);
    let socket = fs::symlink_metadata(&path).ok()?;
    // Only a socket of the index folder's owner is believed.
    if !socket.file_type().is_socket() || socket.uid() != fs::metadata(index_dir).ok()?.uid() {
        return None;
    }
    let deadline = Instant::now() + timeout;
    let mut stream = UnixStream::connect(&path).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    stream.write_all(request.as_bytes()).ok()?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > MAX_ANSWER_BYTES {
                    return None;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    let answer: Answer = serde_json::from_slice(&bytes).ok()?;
    (Path::new(&answer.root) == root).then_some(answer)
}

#[cfg(not(unix))]
pub(crate) fn ask(_index_dir: &Path, _root: &Path, _since: Option<&Token>) -> Option<Answer> {
    None
}

/// The history of changed paths a watcher keeps, bounded.
#[derive(Debug)]
struct ChangeLog {
    instance: String,
    seq: u64,
    /// Tokens older than this are unknown (their changes were dropped).
    floor: u64,
    /// `(seq, path)`, seq increasing.
    entries: std::collections::VecDeque<(u64, String)>,
    limit: usize,
}

impl ChangeLog {
    fn new(instance: String, limit: usize) -> ChangeLog {
        ChangeLog {
            instance,
            seq: 0,
            floor: 0,
            entries: Default::default(),
            limit,
        }
    }

    fn record(&mut self, path: String) {
        self.seq += 1;
        // A file being written sends many events in a row: keep one entry,
        // moved to the newest seq.
        if let Some(last) = self.entries.back_mut()
            && last.1 == path
        {
            last.0 = self.seq;
            return;
        }
        self.entries.push_back((self.seq, path));
        if self.entries.len() > self.limit
            && let Some((dropped, _)) = self.entries.pop_front()
        {
            self.floor = dropped;
        }
    }

    /// Events were lost: no earlier token can be answered.
    fn lost(&mut self) {
        self.seq += 1;
        self.floor = self.seq;
        self.entries.clear();
    }

    fn token(&self) -> Token {
        Token {
            instance: self.instance.clone(),
            seq: self.seq,
        }
    }

    fn since(&self, token: &Token) -> Option<Vec<String>> {
        if token.instance != self.instance || token.seq < self.floor || token.seq > self.seq {
            return None;
        }
        let start = self.entries.partition_point(|(seq, _)| *seq <= token.seq);
        let mut paths: Vec<String> = self
            .entries
            .range(start..)
            .map(|(_, p)| p.clone())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        Some(paths)
    }
}

/// What a watcher answers to one request line. A `stop` request is
/// answered (like `current`) only by a watcher that stops on request.
fn respond(
    log: &ChangeLog,
    complete: bool,
    root: &Path,
    request: &str,
    stoppable: bool,
) -> Option<Answer> {
    let mut words = request.split_whitespace();
    let changed = match (words.next()?, words.next(), words.next(), words.next()) {
        ("current", None, None, None) => None,
        ("stop", None, None, None) if stoppable => None,
        ("since", Some(instance), Some(seq), None) => {
            let token = Token {
                instance: instance.to_string(),
                seq: seq.parse().ok()?,
            };
            if complete { log.since(&token) } else { None }
        }
        _ => return None,
    };
    Some(Answer {
        root: root.to_string_lossy().into_owned(),
        token: log.token(),
        changed,
    })
}

#[cfg(target_os = "linux")]
pub(crate) use linux::{Publisher, watch};

/// A vault being watched: the changes it sees, and what keeps it running.
/// Dropping it stops the watch (and removes its socket, if it published
/// one).
pub(crate) struct Watching {
    /// Each batch of changed paths (absolute) as the watcher reads them
    /// from the kernel; an empty batch means events were lost, so anything
    /// may have changed.
    pub changes: std::sync::mpsc::Receiver<Vec<PathBuf>>,
    /// Why no socket answers other commands (they then walk the vault),
    /// when one was asked for and could not be published.
    pub socket_error: Option<io::Error>,
    _publisher: Publisher,
}

/// Without inotify there is no watcher; `index --watch` and `serve` say so.
#[cfg(not(target_os = "linux"))]
pub(crate) fn watch(
    _root: &Path,
    _index_dir: Option<&Path>,
    _stop_requests: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> io::Result<Watching> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "watching a vault needs inotify (Linux)",
    ))
}

#[cfg(not(target_os = "linux"))]
pub(crate) struct Publisher;

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

    use super::*;
    use crate::vault::walk::{IGNORE_FILE, SKIPPED_DIRS};

    /// Changed paths remembered; older tokens are then answered unknown.
    const MAX_LOGGED: usize = 200_000;

    /// Changed paths held for the watch's consumer between two sends; a
    /// storm of events (a sync tool rewriting the vault) keeps memory
    /// bounded, and the consumer re-reads the vault anyway.
    const MAX_PENDING: usize = 10_000;

    /// A live watcher; dropping it stops the watcher and removes its
    /// socket, if it has one.
    pub(crate) struct Publisher {
        /// The socket and its inode.
        socket: Option<(PathBuf, u64)>,
        stop: Arc<AtomicBool>,
    }

    impl Drop for Publisher {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            // Never remove the socket of a watcher started after this one.
            if let Some((socket, inode)) = &self.socket
                && fs::symlink_metadata(socket).is_ok_and(|m| m.ino() == *inode)
            {
                let _ = fs::remove_file(socket);
            }
        }
    }

    /// Starts watching the vault at `root` (canonical). The one kernel
    /// watch set both drives the caller's re-indexing (each batch of
    /// changes is sent to [`Watching::changes`]) and, with `index_dir`,
    /// answers other commands on a socket there, unless another watcher of
    /// that index already does. With `stop_requests`, a `stop` request is
    /// answered and sets it. An error means the vault cannot be watched; a
    /// socket that cannot be published is only reported in the result.
    pub(crate) fn watch(
        root: &Path,
        index_dir: Option<&Path>,
        stop_requests: Option<Arc<AtomicBool>>,
    ) -> io::Result<Watching> {
        let (sender, changes) = std::sync::mpsc::channel();
        // Watches first: a change made while the socket is being set up
        // is then already recorded.
        let mut watcher = Watcher::start(root)?;
        watcher.stop_requests = stop_requests;
        watcher.subscriber = Some(sender);
        let (listener, socket, socket_error) = match index_dir {
            Some(dir) if ask(dir, root, None).is_none() => match bind(dir) {
                Ok((listener, socket)) => (Some(listener), Some(socket), None),
                Err(err) => (None, None, Some(err)),
            },
            _ => (None, None, None),
        };
        Ok(Watching {
            changes,
            socket_error,
            _publisher: run(watcher, listener, socket)?,
        })
    }

    /// Publishes the socket in `index_dir`: the socket with its inode.
    fn bind(index_dir: &Path) -> io::Result<(UnixListener, (PathBuf, u64))> {
        let socket = index_dir.join(SOCKET_FILE);
        match fs::remove_file(&socket) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        // Bound under a private name and renamed into place, so the socket
        // is never reachable before it is owner-only.
        let staging = index_dir.join(format!("{SOCKET_FILE}.{}", std::process::id()));
        let _ = fs::remove_file(&staging);
        let listener = UnixListener::bind(&staging)?;
        let placed = fs::set_permissions(&staging, fs::Permissions::from_mode(0o600))
            .and_then(|()| fs::rename(&staging, &socket));
        if let Err(err) = placed {
            let _ = fs::remove_file(&staging);
            return Err(err);
        }
        listener.set_nonblocking(true)?;
        let inode = fs::symlink_metadata(&socket)?.ino();
        Ok((listener, (socket, inode)))
    }

    /// Runs `watcher` on a thread of its own until the returned publisher
    /// is dropped.
    fn run(
        watcher: Watcher,
        listener: Option<UnixListener>,
        socket: Option<(PathBuf, u64)>,
    ) -> io::Result<Publisher> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let publisher = Publisher { socket, stop };
        // On a failed spawn the publisher is dropped here and removes the
        // socket.
        std::thread::Builder::new()
            .name("ctxpack-watch".into())
            .spawn(move || watcher.serve(listener, &stopped))?;
        Ok(publisher)
    }

    fn instance_name(root: &Path) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(root.as_os_str().as_encoded_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        hasher.update(&now.as_nanos().to_le_bytes());
        hasher.finalize().to_hex()[..16].to_string()
    }

    struct Watcher {
        root: PathBuf,
        inotify: Inotify,
        /// Watched folders, relative (`""` is the root).
        dirs: HashMap<WatchDescriptor, String>,
        log: ChangeLog,
        /// False once a folder could not be watched: every token is then
        /// answered unknown, so commands walk.
        complete: bool,
        /// Set by a `stop` request, when the process stops on request.
        stop_requests: Option<Arc<AtomicBool>>,
        /// The folder the watches are on, as [`root_identity`] saw it.
        identity: Option<(u64, u64)>,
        /// Where batches of changes go, for the process's own re-indexing.
        subscriber: Option<std::sync::mpsc::Sender<Vec<PathBuf>>>,
        /// Changes read since the last batch was sent (relative paths).
        pending: Vec<String>,
        /// Events were lost since the last batch was sent.
        pending_lost: bool,
    }

    impl Watcher {
        fn start(root: &Path) -> io::Result<Watcher> {
            let mut watcher = Watcher {
                root: root.to_path_buf(),
                inotify: Inotify::init()?,
                dirs: HashMap::new(),
                log: ChangeLog::new(instance_name(root), MAX_LOGGED),
                complete: true,
                stop_requests: None,
                identity: root_identity(root),
                subscriber: None,
                pending: Vec::new(),
                pending_lost: false,
            };
            watcher.watch_tree(String::new());
            Ok(watcher)
        }

        /// When the root path no longer names the folder watched, starts
        /// over on the folder there now (if any) under a new instance, so
        /// every earlier token is unknown and commands walk.
        fn rearm_if_replaced(&mut self) {
            let now = root_identity(&self.root);
            if now == self.identity {
                return;
            }
            for (wd, _) in self.dirs.drain() {
                let _ = self.inotify.watches().remove(wd);
            }
            self.log = ChangeLog::new(instance_name(&self.root), MAX_LOGGED);
            self.identity = now;
            // Without a folder there is nothing to watch: unknown until one
            // is back.
            self.complete = now.is_some();
            if now.is_some() {
                self.watch_tree(String::new());
            }
        }

        fn serve(mut self, listener: Option<UnixListener>, stop: &AtomicBool) {
            let mut buffer = vec![0u8; 64 * 1024];
            let poll_fd = |fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            while !stop.load(Ordering::Relaxed) {
                let mut fds = [
                    poll_fd(self.inotify.as_raw_fd()),
                    poll_fd(listener.as_ref().map_or(-1, |l| l.as_raw_fd())),
                ];
                // SAFETY: `fds` is a valid array of two pollfd for the call
                // (a negative fd is skipped by poll).
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 500) };
                if ready < 0 {
                    continue;
                }
                if fds[0].revents != 0 {
                    self.drain(&mut buffer);
                }
                while let Some(Ok((stream, _))) = listener.as_ref().map(UnixListener::accept) {
                    self.answer(stream, &mut buffer);
                }
            }
        }

        fn answer(&mut self, mut stream: UnixStream, buffer: &mut [u8]) {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            let mut limited = (&mut stream).take(MAX_REQUEST_BYTES);
            while let Ok(1) = limited.read(&mut byte) {
                if byte[0] == b'\n' {
                    break;
                }
                request.push(byte[0]);
            }
            let Ok(request) = std::str::from_utf8(&request) else {
                return;
            };
            if let Some(answer) = self.respond(request, buffer)
                && let Ok(json) = serde_json::to_vec(&answer)
            {
                let _ = stream.write_all(&json);
            }
        }

        fn respond(&mut self, request: &str, buffer: &mut [u8]) -> Option<Answer> {
            // Everything the kernel queued before the request arrived is
            // read before answering: no stale answer.
            self.drain(buffer);
            self.rearm_if_replaced();
            let answer = respond(
                &self.log,
                self.complete,
                &self.root,
                request,
                self.stop_requests.is_some(),
            );
            if answer.is_some()
                && request.trim() == "stop"
                && let Some(stop) = &self.stop_requests
            {
                stop.store(true, Ordering::Relaxed);
            }
            answer
        }

        /// Reads every queued event without blocking.
        fn drain(&mut self, buffer: &mut [u8]) {
            loop {
                let events: Vec<(WatchDescriptor, EventMask, Option<String>, bool)> =
                    match self.inotify.read_events(buffer) {
                        Ok(events) => events
                            .map(|e| {
                                let name = e.name.map(|n| n.to_str().map(str::to_string));
                                let readable = !matches!(name, Some(None));
                                (e.wd, e.mask, name.flatten(), readable)
                            })
                            .collect(),
                        Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                if events.is_empty() {
                    break;
                }
                for (wd, mask, name, readable) in events {
                    self.apply(wd, mask, name, readable);
                }
            }
            self.send_pending();
        }

        /// Notes a changed path in the log and for the subscriber.
        fn record(&mut self, path: String) {
            self.note_for_subscriber(&path);
            self.log.record(path);
        }

        fn note_for_subscriber(&mut self, path: &str) {
            if self.subscriber.is_some() && self.pending.len() < MAX_PENDING {
                self.pending.push(path.to_string());
            }
        }

        /// Sends what was read since the last batch, if anything was.
        fn send_pending(&mut self) {
            let Some(subscriber) = &self.subscriber else {
                return;
            };
            if self.pending.is_empty() && !self.pending_lost {
                return;
            }
            let batch: Vec<PathBuf> = if self.pending_lost {
                Vec::new()
            } else {
                self.pending.iter().map(|rel| self.root.join(rel)).collect()
            };
            self.pending.clear();
            self.pending_lost = false;
            if subscriber.send(batch).is_err() {
                // Nobody listens any more: stop collecting.
                self.subscriber = None;
            }
        }

        fn apply(
            &mut self,
            wd: WatchDescriptor,
            mask: EventMask,
            name: Option<String>,
            readable: bool,
        ) {
            if mask.contains(EventMask::Q_OVERFLOW) {
                self.log.lost();
                self.pending_lost = true;
                return;
            }
            if mask.contains(EventMask::IGNORED) {
                self.dirs.remove(&wd);
                return;
            }
            let Some(dir) = self.dirs.get(&wd).cloned() else {
                return;
            };
            let Some(name) = name else {
                // An event on the folder itself, or a name that is not
                // UTF-8 (the walk reports it): walk the folder.
                if !readable || mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
                    self.record(dir);
                }
                return;
            };
            // The privacy policy decides what the index holds, though no
            // walk reads it as a note: its change is the subscriber's, not
            // the log's.
            if dir.is_empty() && name == crate::privacy::POLICY_FILE {
                self.note_for_subscriber(&name);
                return;
            }
            // The walk never reads dot files other than `.okignore`, nor the
            // vault's own log.
            if (name.starts_with('.') && name != IGNORE_FILE)
                || (dir.is_empty() && name == "log.md")
            {
                return;
            }
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            if mask.contains(EventMask::ISDIR) {
                if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
                    if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                        self.watch_tree(path.clone());
                    }
                } else if mask.contains(EventMask::MOVED_FROM) {
                    self.unwatch_tree(&path);
                }
            }
            self.record(path);
        }

        /// Watches `rel_dir` and every folder below it the walk may enter.
        fn watch_tree(&mut self, rel_dir: String) {
            let mask = WatchMask::MODIFY
                | WatchMask::CLOSE_WRITE
                | WatchMask::ATTRIB
                | WatchMask::CREATE
                | WatchMask::DELETE
                | WatchMask::MOVED_FROM
                | WatchMask::MOVED_TO
                | WatchMask::DELETE_SELF
                | WatchMask::MOVE_SELF
                | WatchMask::DONT_FOLLOW
                | WatchMask::ONLYDIR
                | WatchMask::EXCL_UNLINK;
            let mut stack = vec![rel_dir];
            while let Some(rel) = stack.pop() {
                let path = self.root.join(&rel);
                match self.inotify.watches().add(&path, mask) {
                    Ok(wd) => {
                        self.dirs.insert(wd, rel.clone());
                    }
                    // Gone already: its removal is an event of its parent.
                    Err(err) if err.raw_os_error() == Some(libc::ENOENT) => continue,
                    Err(_) => {
                        self.complete = false;
                        continue;
                    }
                }
                let Ok(entries) = fs::read_dir(&path) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                    let Ok(name) = entry.file_name().into_string() else {
                        continue;
                    };
                    if is_dir && !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_str()) {
                        stack.push(if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        });
                    }
                }
            }
        }

        /// Stops watching a folder moved out of its place (and its subfolders).
        fn unwatch_tree(&mut self, rel_dir: &str) {
            let below = format!("{rel_dir}/");
            let gone: Vec<WatchDescriptor> = self
                .dirs
                .iter()
                .filter(|(_, path)| *path == rel_dir || path.starts_with(&below))
                .map(|(wd, _)| wd.clone())
                .collect();
            for wd in gone {
                self.dirs.remove(&wd);
                let _ = self.inotify.watches().remove(wd);
            }
        }
    }
    #[cfg(test)]
    mod tests {
        use super::*;

        /// The watch that answers commands also hands its consumer each
        /// batch of changes: note paths (absolute) and the policy file,
        /// never the vault's log nor other dot files. One inotify instance
        /// serves both.
        #[test]
        fn one_watch_feeds_both_the_socket_and_the_consumer() {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            let index = tempfile::tempdir().unwrap();
            let watching = watch(&root, Some(index.path()), None).unwrap();
            assert!(watching.socket_error.is_none());
            fs::write(root.join("log.md"), "x").unwrap();
            fs::write(root.join(".hidden.md"), "x").unwrap();
            fs::write(root.join("a.md"), "x").unwrap();
            let policy = root.join(crate::privacy::POLICY_FILE);
            fs::write(&policy, "x").unwrap();
            // A file's events may come in more than one batch.
            let mut seen = std::collections::BTreeSet::new();
            while !seen.contains(&policy) {
                let batch = watching
                    .changes
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap();
                seen.extend(batch);
            }
            assert_eq!(
                seen.into_iter().collect::<Vec<_>>(),
                [policy, root.join("a.md")]
            );
            // The socket answers from the same watch: the policy file is
            // not a change for the walk, the note is.
            let current = ask(index.path(), &root, None).unwrap().token;
            let start = Token { seq: 0, ..current };
            let answer = ask(index.path(), &root, Some(&start)).unwrap();
            assert_eq!(answer.changed, Some(vec!["a.md".to_string()]));
        }

        /// The guarantee itself, without a socket or thread that might
        /// have read the queue first: an event queued before the request
        /// is in the answer.
        #[test]
        fn an_answer_includes_what_was_queued_before_the_request() {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            fs::create_dir(root.join("sub")).unwrap();
            let mut watcher = Watcher::start(&root).unwrap();
            let mut buffer = vec![0u8; 64 * 1024];
            let start = watcher.log.token();
            for i in 0..50 {
                let token = watcher.log.token();
                let name = format!("sub/n{i}.md");
                fs::write(root.join(&name), "x").unwrap();
                let request = format!("since {} {}", token.instance, token.seq);
                let answer = watcher.respond(&request, &mut buffer).unwrap();
                assert_eq!(answer.changed, Some(vec![name]));
            }
            // A folder made and filled at once is named itself: the files
            // written before its watch existed are found by walking it.
            let token = watcher.log.token();
            fs::create_dir_all(root.join("new/deeper")).unwrap();
            fs::write(root.join("new/deeper/x.md"), "x").unwrap();
            let request = format!("since {} {}", token.instance, token.seq);
            let changed = watcher
                .respond(&request, &mut buffer)
                .unwrap()
                .changed
                .unwrap();
            assert!(changed.contains(&"new".to_string()), "{changed:?}");
            // Dot files and the vault's log are not recorded.
            let token = watcher.log.token();
            fs::write(root.join(".swap"), "x").unwrap();
            fs::write(root.join("log.md"), "x").unwrap();
            let request = format!("since {} {}", token.instance, token.seq);
            assert_eq!(
                watcher.respond(&request, &mut buffer).unwrap().changed,
                Some(vec![])
            );
            let request = format!("since {} {}", start.instance, start.seq);
            assert_eq!(
                watcher
                    .respond(&request, &mut buffer)
                    .unwrap()
                    .changed
                    .unwrap()
                    .len(),
                51
            );
        }

        #[test]
        fn a_vault_folder_replaced_under_the_watcher_is_watched_anew() {
            let dir = tempfile::tempdir().unwrap();
            let base = dir.path().canonicalize().unwrap();
            let root = base.join("vault");
            fs::create_dir_all(root.join("sub")).unwrap();
            let mut watcher = Watcher::start(&root).unwrap();
            let mut buffer = vec![0u8; 64 * 1024];
            let since = |token: &Token| format!("since {} {}", token.instance, token.seq);
            let before = watcher.log.token();
            // Moved away, and a copy put in its place.
            fs::rename(&root, base.join("vault.old")).unwrap();
            fs::create_dir_all(root.join("sub")).unwrap();
            let answer = watcher.respond(&since(&before), &mut buffer).unwrap();
            assert_eq!(answer.changed, None);
            assert_ne!(answer.token.instance, before.instance);
            // The folder now there is the one watched.
            fs::write(root.join("sub/new.md"), "x").unwrap();
            let answer = watcher.respond(&since(&answer.token), &mut buffer).unwrap();
            assert_eq!(answer.changed, Some(vec!["sub/new.md".to_string()]));
            // Gone altogether: unknown, until a folder is back.
            fs::remove_dir_all(&root).unwrap();
            let answer = watcher.respond(&since(&answer.token), &mut buffer).unwrap();
            assert_eq!(answer.changed, None);
            let answer = watcher.respond(&since(&answer.token), &mut buffer).unwrap();
            assert_eq!(answer.changed, None);
            fs::create_dir(&root).unwrap();
            let answer = watcher.respond("current", &mut buffer).unwrap();
            fs::write(root.join("back.md"), "x").unwrap();
            let answer = watcher.respond(&since(&answer.token), &mut buffer).unwrap();
            assert_eq!(answer.changed, Some(vec!["back.md".to_string()]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(log: &ChangeLog) -> Token {
        log.token()
    }

    #[test]
    fn a_token_answers_what_changed_after_it() {
        let mut log = ChangeLog::new("a".into(), 10);
        log.record("x.md".into());
        let t1 = token(&log);
        log.record("y.md".into());
        log.record("y.md".into());
        log.record("b/z.md".into());
        assert_eq!(log.since(&t1).unwrap(), ["b/z.md", "y.md"]);
        assert_eq!(log.since(&token(&log)).unwrap(), Vec::<String>::new());
        // Another instance's token, or one from the future, is unknown.
        assert!(
            log.since(&Token {
                instance: "b".into(),
                seq: 1
            })
            .is_none()
        );
        assert!(
            log.since(&Token {
                instance: "a".into(),
                seq: 99
            })
            .is_none()
        );
    }

    #[test]
    fn repeated_events_move_forward_and_are_not_lost() {
        let mut log = ChangeLog::new("a".into(), 10);
        log.record("x.md".into());
        let t1 = token(&log);
        // The same file written again after the token was handed out.
        log.record("x.md".into());
        assert_eq!(log.since(&t1).unwrap(), ["x.md"]);
    }

    #[test]
    fn dropped_history_and_lost_events_make_old_tokens_unknown() {
        let mut log = ChangeLog::new("a".into(), 2);
        let t0 = token(&log);
        log.record("1.md".into());
        let t1 = token(&log);
        log.record("2.md".into());
        log.record("3.md".into());
        assert!(log.since(&t0).is_none());
        assert_eq!(log.since(&t1).unwrap(), ["2.md", "3.md"]);
        log.lost();
        assert!(log.since(&t1).is_none());
        assert_eq!(log.since(&token(&log)).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn requests_are_parsed_strictly() {
        let mut log = ChangeLog::new("a".into(), 10);
        log.record("x.md".into());
        let root = Path::new("/v");
        let current = respond(&log, true, root, "current", false).unwrap();
        assert_eq!(current.changed, None);
        assert_eq!(current.token, token(&log));
        let since = respond(&log, true, root, "since a 0", false).unwrap();
        assert_eq!(since.changed.unwrap(), ["x.md"]);
        // A watcher that could not watch everything answers nothing known.
        assert_eq!(
            respond(&log, false, root, "since a 0", false)
                .unwrap()
                .changed,
            None
        );
        for bad in [
            "",
            "since",
            "since a",
            "since a x",
            "since a 1 2",
            "delete *",
            "stop now",
        ] {
            assert!(respond(&log, true, root, bad, true).is_none(), "{bad}");
        }
        // Only a watcher that stops on request answers `stop`.
        assert!(respond(&log, true, root, "stop", true).is_some());
        assert!(respond(&log, true, root, "stop", false).is_none());
    }
}

//! Reading files that may be hostile: only regular files are opened (a
//! FIFO, socket or device would block or never end), without blocking even
//! when one is swapped in between the check and the open, and never more
//! than a given number of bytes; and writing a file so that a reader (or a
//! crash) sees either the old content or the new, never a part.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Why a file was not read, worded for a diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReadError(pub String);

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

impl ReadError {
    /// The reason alone, for a file whose failure stops the command (a
    /// policy, a config): a note that cannot be read is skipped and says
    /// so, but such a file is not.
    pub(crate) fn reason(&self) -> &str {
        self.0.strip_suffix("; skipped").unwrap_or(&self.0)
    }
}

/// What kind of non-regular file a file type is, or `None` for a regular
/// file (symlinks are followed by the callers' `metadata`).
pub(crate) fn special_kind(file_type: &fs::FileType) -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return Some("a device");
        }
    }
    if file_type.is_dir() {
        return Some("a folder");
    }
    if !file_type.is_file() {
        return Some("not a regular file");
    }
    None
}

fn not_regular(kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{kind}, not a regular file; skipped"),
    )
}

/// Opens `path` (following symlinks) for reading if it is a regular file.
/// The open itself never blocks: it is non-blocking, and the opened file is
/// checked again, so a FIFO swapped in after the first check is refused too.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    let meta = fs::metadata(path)?;
    if let Some(kind) = special_kind(&meta.file_type()) {
        return Err(not_regular(kind));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    if let Some(kind) = special_kind(&file.metadata()?.file_type()) {
        return Err(not_regular(kind));
    }
    Ok(file)
}

/// Why a path the walk listed is not read: a symlink stands on it now (on
/// the file or on a folder above it), swapped in since the walk judged it.
/// Passing: the next walk sees the link and judges it as any other.
pub(crate) const SWAPPED_FOR_A_LINK: &str =
    "a symlink stands on its path now (it changed while being read); skipped";

impl ReadError {
    /// Whether the file changed under the read (so a later walk must read
    /// it again, whatever its size and time say).
    pub(crate) fn is_passing(&self) -> bool {
        self.0 == SWAPPED_FOR_A_LINK
    }
}

/// Opens `path` (whose every component the caller holds to be a real
/// folder or file: a canonical root and a path the walk listed) only if
/// no symlink stands on it now, and only a regular file, without
/// blocking. The walk judged each symlink by its target; one swapped in
/// between the walk and the read (for the note, or for a folder above it)
/// would otherwise lead the read outside the vault or into a private
/// folder.
pub(crate) fn open_regular_unlinked(path: &Path) -> io::Result<File> {
    let file = open_unlinked(path)?;
    if let Some(kind) = special_kind(&file.metadata()?.file_type()) {
        return Err(not_regular(kind));
    }
    Ok(file)
}

#[cfg(target_os = "linux")]
fn open_unlinked(path: &Path) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    // `struct open_how` of linux/openat2.h (libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let how = OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: `name` is NUL-terminated and `how` is the kernel's layout,
    // its size passed with it; a descriptor returned is owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a fresh descriptor of the file just opened.
        return Ok(unsafe { File::from_raw_fd(fd as i32) });
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ELOOP) => Err(swapped_for_a_link()),
        // A kernel before 5.6, or a sandbox refusing the call: the file
        // itself opened without following a link, then where it really is
        // checked.
        Some(libc::ENOSYS | libc::EPERM) => {
            let file = open_no_follow(path, flags)?;
            use std::os::fd::AsRawFd;
            let real =
                fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "cannot tell whether a symlink stands on its path; skipped",
                    )
                })?;
            if real != path {
                return Err(swapped_for_a_link());
            }
            Ok(file)
        }
        _ => Err(err),
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn open_unlinked(path: &Path) -> io::Result<File> {
    let file = open_no_follow(path, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)?;
    // No way to ask the kernel for a walk without links: the path is read
    // back as the system resolves it, the file once opened.
    if fs::canonicalize(path)? != path {
        return Err(swapped_for_a_link());
    }
    Ok(file)
}

#[cfg(not(unix))]
fn open_unlinked(path: &Path) -> io::Result<File> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(swapped_for_a_link());
    }
    open_regular(path)
}

#[cfg(unix)]
fn open_no_follow(path: &Path, flags: i32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => swapped_for_a_link(),
            _ => err,
        })
}

fn swapped_for_a_link() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, SWAPPED_FOR_A_LINK)
}

/// Reads at most `max_bytes` of the regular file at `path`; a larger file
/// is an error naming its size and the limit.
pub(crate) fn read_bytes(
    path: &Path,
    max_bytes: u64,
) -> Result<(Vec<u8>, fs::Metadata), ReadError> {
    read_opened(open_regular(path), max_bytes)
}

fn read_opened(
    file: io::Result<File>,
    max_bytes: u64,
) -> Result<(Vec<u8>, fs::Metadata), ReadError> {
    let file = file.map_err(|err| ReadError(describe(&err)))?;
    let meta = file
        .metadata()
        .map_err(|err| ReadError(format!("cannot read: {err}")))?;
    if meta.len() > max_bytes {
        return Err(ReadError(format!(
            "file is {} bytes, over the {max_bytes} byte limit; skipped",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| ReadError(format!("cannot read: {err}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError(format!(
            "file is over the {max_bytes} byte limit; skipped"
        )));
    }
    Ok((bytes, meta))
}

/// Reads the regular file at `path` as UTF-8 text of at most `max_bytes`,
/// refusing binary files (a NUL byte anywhere) and invalid UTF-8.
pub(crate) fn read_text(path: &Path, max_bytes: u64) -> Result<(String, fs::Metadata), ReadError> {
    text_of(read_bytes(path, max_bytes)?)
}

/// [`read_text`] of a path no symlink may stand on (see
/// [`open_regular_unlinked`]).
pub(crate) fn read_text_unlinked(
    path: &Path,
    max_bytes: u64,
) -> Result<(String, fs::Metadata), ReadError> {
    text_of(read_opened(open_regular_unlinked(path), max_bytes)?)
}

fn text_of(
    (mut bytes, meta): (Vec<u8>, fs::Metadata),
) -> Result<(String, fs::Metadata), ReadError> {
    if memchr::memchr(0, &bytes).is_some() {
        return Err(ReadError(
            "binary file (contains NUL bytes); skipped".into(),
        ));
    }
    lone_carriage_returns_end_lines(&mut bytes);
    let text = String::from_utf8(bytes).map_err(|err| {
        ReadError(format!(
            "invalid UTF-8 at byte {}; skipped",
            err.utf8_error().valid_up_to()
        ))
    })?;
    Ok((text, meta))
}

/// A carriage return not followed by a line feed (classic Mac OS line
/// endings) becomes a line feed. CommonMark and YAML end a line there too,
/// but the readers that go line by line (the frontmatter's fences, inline
/// fields, private sections) would read the whole file as one line and
/// miss `private: true` (fail open). Same length: no offset moves.
fn lone_carriage_returns_end_lines(bytes: &mut [u8]) {
    let mut from = 0;
    while let Some(found) = memchr::memchr(b'\r', &bytes[from..]) {
        let at = from + found;
        if bytes.get(at + 1) != Some(&b'\n') {
            bytes[at] = b'\n';
        }
        from = at + 1;
    }
}

fn describe(err: &io::Error) -> String {
    if err.kind() == io::ErrorKind::InvalidInput {
        err.to_string()
    } else {
        format!("cannot read: {err}")
    }
}

/// A file being replaced: the new content goes to a temporary file beside
/// the target, which takes the target's place only once it is whole and on
/// disk. Every atomic write of the project goes through here, so all share
/// one rule: the file is synced before the rename (else a crash could leave
/// the new name on empty content) and the folder after it (else the rename
/// itself could be lost). The one exception, [`write_atomic_cache`], is
/// named where it is used.
pub(crate) struct AtomicFile {
    temp: tempfile::NamedTempFile,
    target: PathBuf,
}

impl AtomicFile {
    /// Creates the temporary file beside `target`. Its name starts with a
    /// dot and ends in `.tmp`, so folders that sweep leftovers of a crash
    /// (an index folder) know it; the random middle keeps two writers of
    /// one target apart.
    pub(crate) fn new(target: &Path) -> io::Result<AtomicFile> {
        let dir = parent_dir(target);
        let name = target
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)?;
        Ok(AtomicFile {
            temp,
            target: target.to_path_buf(),
        })
    }

    /// Writes `bytes`, syncs the file, renames it over the target and syncs
    /// the folder. On an error the temporary file is removed and the target
    /// is left as it was.
    pub(crate) fn commit(mut self, bytes: &[u8]) -> io::Result<()> {
        self.temp.write_all(bytes)?;
        self.temp.as_file().sync_all()?;
        self.temp.persist(&self.target).map_err(|err| err.error)?;
        sync_dir(parent_dir(&self.target))
    }
}

/// Replaces the file at `target` with `bytes` atomically (see
/// [`AtomicFile`]).
pub(crate) fn write_atomic(target: &Path, bytes: &[u8]) -> io::Result<()> {
    AtomicFile::new(target)?.commit(bytes)
}

/// Replaces a cache file atomically but without syncing: for a small file
/// whose loss in a crash costs only work redone (a marker saying a blob
/// was hashed, the change token a walk can replace), where two syncs
/// (about 6 ms on this project's machines) would slow every command that
/// writes one. A reader still sees the old content or the new, never a part.
pub(crate) fn write_atomic_cache(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = AtomicFile::new(target)?;
    file.temp.write_all(bytes)?;
    file.temp.persist(&file.target).map_err(|err| err.error)?;
    Ok(())
}

/// The folder a file named by `path` sits in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Makes a rename in `dir` durable. Where a folder cannot be opened for
/// syncing (not on Unix), the rename is as durable as the system makes it.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_limited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        fs::write(&path, "hello").unwrap();
        assert_eq!(read_text(&path, 10).unwrap().0, "hello");
        assert!(
            read_text(&path, 4)
                .unwrap_err()
                .0
                .contains("over the 4 byte limit")
        );
        fs::write(
            &path,
            [b'a'; 9000]
                .iter()
                .chain(b"\0")
                .copied()
                .collect::<Vec<u8>>(),
        )
        .unwrap();
        assert!(read_text(&path, 100_000).unwrap_err().0.contains("NUL"));
        fs::write(&path, "---\rprivate: true\r---\rBody\r\nCRLF kept\r\rlast").unwrap();
        assert_eq!(
            read_text(&path, 100).unwrap().0,
            "---\nprivate: true\n---\nBody\r\nCRLF kept\n\nlast"
        );
        assert!(
            read_text(dir.path(), 10)
                .unwrap_err()
                .0
                .contains("a folder")
        );
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_sockets_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.md");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        assert!(read_text(&fifo, 10).unwrap_err().0.contains("a FIFO"));
        let socket = dir.path().join("sock.md");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(read_text(&socket, 10).unwrap_err().0.contains("a socket"));
        assert!(
            read_text(Path::new("/dev/zero"), 10)
                .unwrap_err()
                .0
                .contains("a device")
        );
    }

    #[test]
    fn an_atomic_write_replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        fs::write(&target, "old content, longer than the new").unwrap();
        write_atomic(&target, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn an_atomic_write_that_is_not_committed_leaves_the_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        fs::write(&target, "old").unwrap();
        let pending = AtomicFile::new(&target).unwrap();
        let temp_name = pending
            .temp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(temp_name.starts_with(".state.json.") && temp_name.ends_with(".tmp"));
        drop(pending);
        assert_eq!(fs::read(&target).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_cache_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("marker.checked");
        write_atomic_cache(&target, b"first").unwrap();
        write_atomic_cache(&target, b"second").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"second");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_atomic_write_into_a_missing_folder_fails_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("absent").join("state.json");
        let err = write_atomic(&target, b"new").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!dir.path().join("absent").exists());
    }
}

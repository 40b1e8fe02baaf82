//! The one write ctxpack makes inside a vault: a line appended to `log.md`.

use std::fs::OpenOptions;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) use crate::privacy::LogMode;

pub(crate) const LOG_FILE: &str = "log.md";
const LOG_HEADER: &str = "# Wiki Log\n\n";

/// How long the append waits for another process's lock on `log.md` (an
/// editor, a sync or backup tool) before it skips the line: a pack is
/// already printed, and a blocking wait would hang the command, or keep a
/// server's worker and its slot, for as long as the other holds the lock.
const LOCK_WAIT: Duration = Duration::from_millis(200);
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// Appends `line` to `<root>/log.md` as `mode` says: always (creating the
/// file), only when the file already exists, or never. True when the line
/// was written.
pub(crate) fn append_as(root: &Path, line: &str, mode: LogMode) -> io::Result<bool> {
    match mode {
        LogMode::Never => Ok(false),
        LogMode::Always => append(root, line).map(|()| true),
        LogMode::IfPresent => match write_line(root, line, false) {
            Ok(()) => Ok(true),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(err) => Err(err),
        },
    }
}

/// Appends `line` to `<root>/log.md` under an exclusive lock, creating the
/// file with a `# Wiki Log` header if it is absent. Refuses to follow a
/// symlink, so the write cannot land outside the vault, and never blocks on
/// a FIFO put in its place.
pub(crate) fn append(root: &Path, line: &str) -> io::Result<()> {
    write_line(root, line, true)
}

fn write_line(root: &Path, line: &str, create: bool) -> io::Result<()> {
    let path = root.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(create)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|err| {
            if err.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "log.md is a symlink; ctxpack writes only to a regular file, never through a link",
                )
            } else {
                err
            }
        })?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "log.md is not a regular file; nothing written",
        ));
    }
    // A hard link shares its text with another name, maybe a private note
    // or a file outside the vault: the line would land there too.
    if std::os::unix::fs::MetadataExt::nlink(&metadata) > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "log.md is a hard link to another file; ctxpack writes only to a file of its own, \
             nothing written",
        ));
    }
    lock_briefly(&file)?;
    let len = file.metadata()?.len();
    let mut text = String::new();
    if len == 0 {
        text.push_str(LOG_HEADER);
    } else {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(line);
    text.push('\n');
    file.write_all(text.as_bytes())?;
    // The line is in place once written; flushing it to disk needs no lock,
    // and holding the lock through the flush would make other appenders
    // wait out its latency.
    file.unlock()?;
    file.sync_data()
}

/// Takes the exclusive lock on `file`, retrying for at most [`LOCK_WAIT`].
fn lock_briefly(file: &std::fs::File) -> io::Result<()> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::Error(err)) => return Err(err),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(LOCK_RETRY);
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another process holds a lock on log.md; the log line was skipped after \
                         waiting {} ms",
                        LOCK_WAIT.as_millis()
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_mode_decides_whether_log_md_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_FILE);
        assert!(!append_as(dir.path(), "a", LogMode::IfPresent).unwrap());
        assert!(!append_as(dir.path(), "b", LogMode::Never).unwrap());
        assert!(!log.exists());
        assert!(append_as(dir.path(), "c", LogMode::Always).unwrap());
        assert!(append_as(dir.path(), "d", LogMode::IfPresent).unwrap());
        assert!(!append_as(dir.path(), "e", LogMode::Never).unwrap());
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "# Wiki Log\n\nc\nd\n"
        );
        let policy = crate::privacy::Policy::parse("log: always\n").unwrap();
        assert_eq!(policy.file.log, LogMode::Always);
        assert_eq!(
            crate::privacy::Policy::parse("").unwrap().file.log,
            LogMode::IfPresent
        );
        assert!(crate::privacy::Policy::parse("log: sometimes\n").is_err());
    }

    #[test]
    fn a_hard_linked_log_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let diary = dir.path().join("diary.md");
        std::fs::write(&diary, "private words\n").unwrap();
        std::fs::hard_link(&diary, dir.path().join(LOG_FILE)).unwrap();
        for mode in [LogMode::IfPresent, LogMode::Always] {
            let err = append_as(dir.path(), "- [t] CONTEXT_PACK", mode).unwrap_err();
            assert!(err.to_string().contains("hard link"), "{err}");
        }
        assert_eq!(std::fs::read_to_string(&diary).unwrap(), "private words\n");
    }

    #[test]
    fn a_foreign_lock_skips_the_line_after_a_bounded_wait() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), "first").unwrap();
        // Another open file description: flock locks conflict between them
        // even within one process, as between two processes.
        let holder = std::fs::File::open(dir.path().join(LOG_FILE)).unwrap();
        holder.lock().unwrap();
        let started = Instant::now();
        let err = append(dir.path(), "second").unwrap_err();
        let waited = started.elapsed();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(
            err.to_string(),
            "another process holds a lock on log.md; the log line was skipped after waiting 200 ms"
        );
        assert!(
            waited >= LOCK_WAIT && waited < Duration::from_secs(5),
            "{waited:?}"
        );
        holder.unlock().unwrap();
        append(dir.path(), "third").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOG_FILE)).unwrap(),
            "# Wiki Log\n\nfirst\nthird\n"
        );
    }
}

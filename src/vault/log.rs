//! The one write ctxpack makes inside a vault: a line appended to `log.md`.

use std::fs::OpenOptions;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub const LOG_FILE: &str = "log.md";
const LOG_HEADER: &str = "# Wiki Log\n\n";

/// Appends `line` to `<root>/log.md` under an exclusive lock, creating the
/// file with a `# Wiki Log` header if it is absent. Refuses to follow a
/// symlink, so the write cannot land outside the vault, and never blocks on
/// a FIFO put in its place.
pub fn append(root: &Path, line: &str) -> io::Result<()> {
    let path = root.join(LOG_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "log.md is not a regular file; nothing written",
        ));
    }
    file.lock()?;
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
    file.sync_data()?;
    file.unlock()
}

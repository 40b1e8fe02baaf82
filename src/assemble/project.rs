//! The only way the assembler touches a project: reads that stay inside the
//! root and are recorded, so tests can prove what was never opened.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

/// Files larger than this are refused rather than read.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

pub struct Project {
    root: PathBuf,
    /// Every relative path read or listed, in order.
    touched: Mutex<Vec<String>>,
}

impl Project {
    pub fn open(root: &Path) -> Result<Project, String> {
        let root = root
            .canonicalize()
            .map_err(|err| format!("cannot open project {}: {err}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("project root {} is not a folder", root.display()));
        }
        Ok(Project {
            root,
            touched: Mutex::new(Vec::new()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The paths read or listed so far.
    pub fn touched(&self) -> Vec<String> {
        self.touched.lock().map(|t| t.clone()).unwrap_or_default()
    }

    fn record(&self, rel: &str) {
        if let Ok(mut touched) = self.touched.lock() {
            touched.push(rel.to_string());
        }
    }

    /// The absolute path of `rel`, refused when it leaves the root (by
    /// `..`, an absolute path or a symlink).
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, String> {
        let path = Path::new(rel);
        if rel.is_empty()
            || path.is_absolute()
            || path
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!("path '{rel}' leaves the project root"));
        }
        let joined = self.root.join(path);
        match joined.canonicalize() {
            Ok(real) if real.starts_with(&self.root) => Ok(real),
            Ok(_) => Err(format!("path '{rel}' leads outside the project root")),
            Err(_) => Ok(joined),
        }
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.resolve(rel).is_ok_and(|p| p.is_file())
    }

    /// Reads `rel` as UTF-8 text; `Ok(None)` when it does not exist. A
    /// FIFO, socket or device is refused without being opened in a way
    /// that blocks.
    pub fn read_optional(&self, rel: &str) -> Result<Option<String>, String> {
        let path = self.resolve(rel)?;
        match fs::metadata(&path) {
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("cannot read {rel}: {err}")),
        }
        let (bytes, _) = crate::safe_fs::read_bytes(&path, MAX_FILE_BYTES)
            .map_err(|err| format!("{rel}: {err}"))?;
        self.record(rel);
        String::from_utf8(bytes)
            .map(|text| Some(text.replace("\r\n", "\n")))
            .map_err(|_| format!("{rel} is not valid UTF-8"))
    }

    /// Reads `rel`, which must exist.
    pub fn read(&self, rel: &str) -> Result<String, String> {
        self.read_optional(rel)?
            .ok_or_else(|| format!("{rel} does not exist"))
    }

    /// The entries of folder `rel` (files and folders, sorted by name), or
    /// nothing when it does not exist.
    pub fn list(&self, rel: &str) -> Result<Vec<Entry>, String> {
        let path = self.resolve(rel)?;
        let Ok(read) = fs::read_dir(&path) else {
            return Ok(Vec::new());
        };
        self.record(&format!("{rel}/"));
        let mut entries = Vec::new();
        for entry in read.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let rel_child = format!("{rel}/{name}");
            let Ok(real) = entry.path().canonicalize() else {
                continue;
            };
            if !real.starts_with(&self.root) {
                continue;
            }
            entries.push(Entry {
                is_dir: real.is_dir(),
                name,
                path: rel_child,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Every Markdown file under folder `rel`, recursively, sorted by path.
    pub fn markdown_files(&self, rel: &str) -> Result<Vec<String>, String> {
        let mut files = Vec::new();
        let mut stack = vec![rel.to_string()];
        while let Some(dir) = stack.pop() {
            for entry in self.list(&dir)? {
                if entry.is_dir {
                    stack.push(entry.path);
                } else if entry.name.ends_with(".md") {
                    files.push(entry.path);
                }
            }
        }
        files.sort();
        Ok(files)
    }

    /// Whether a `.gitignore` in the root or on the way to `rel` ignores it.
    pub fn is_git_ignored(&self, rel: &str) -> bool {
        let mut dir = self.root.clone();
        let mut ignored = false;
        let parts: Vec<&str> = rel.split('/').collect();
        for depth in 0..parts.len() {
            let gitignore = dir.join(".gitignore");
            if let Ok(real) = gitignore.canonicalize()
                && real.starts_with(&self.root)
                && let Ok((text, _)) = crate::safe_fs::read_text(&real, MAX_FILE_BYTES)
            {
                let mut builder = ignore::gitignore::GitignoreBuilder::new(&dir);
                for line in text.lines() {
                    let _ = builder.add_line(None, line);
                }
                let Ok(matcher) = builder.build() else {
                    dir = dir.join(parts[depth]);
                    continue;
                };
                let below = parts[depth..].join("/");
                let matched = matcher.matched_path_or_any_parents(&below, false);
                if matched.is_ignore() {
                    ignored = true;
                } else if matched.is_whitelist() {
                    ignored = false;
                }
            }
            dir = dir.join(parts[depth]);
        }
        ignored
    }
}

pub struct Entry {
    pub name: String,
    pub path: String,
    pub is_dir: bool,
}

/// A work's bindings: the libraries L3 may read and the identity slots.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bindings {
    #[serde(default, alias = "知识绑定")]
    pub libraries: Vec<String>,
    #[serde(default, alias = "槽位")]
    pub slots: BTreeMap<String, String>,
}

impl Bindings {
    pub fn parse(path: &str, text: &str) -> Result<Bindings, String> {
        if text.trim().is_empty() {
            return Ok(Bindings::default());
        }
        yaml_serde::from_str(text).map_err(|err| format!("bad bindings file {path}: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_leaving_the_root() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.md"), "x").unwrap();
        let project = Project::open(dir.path()).unwrap();
        assert!(project.resolve("../a.md").is_err());
        assert!(project.resolve("/etc/passwd").is_err());
        assert!(project.resolve("sub/../../a.md").is_err());
        assert_eq!(project.read("a.md").unwrap(), "x");
        assert_eq!(project.touched(), ["a.md"]);
    }

    #[test]
    fn bindings_accept_chinese_keys() {
        let b = Bindings::parse("b", "知识绑定: [甲]\n槽位:\n  writer: a.md\n").unwrap();
        assert_eq!(b.libraries, ["甲"]);
        assert_eq!(b.slots["writer"], "a.md");
    }
}

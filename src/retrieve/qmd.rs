//! QMD, a local search CLI over Markdown collections, as one more retrieval
//! source: configuration from the resolved config variables, one bounded run
//! of `qmd <search|vsearch|query> … --json`, and its results mapped to
//! vault-relative paths.
//!
//! QMD reports files by its own "handle" of a path (lower case or not, runs
//! of punctuation and spaces turned into `-`), so a hit is resolved against
//! the folders on disk to the real file name when the literal one is absent.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The config key naming the QMD collection that indexes the vault; QMD is
/// used only when it is set.
pub(crate) const COLLECTION_KEY: &str = "QMD_WIKI_COLLECTION";
/// The config key overriding the `qmd` binary (a path, or a name looked up
/// on `PATH`).
pub(crate) const CLI_KEY: &str = "QMD_CLI";
/// The config key choosing the search mode.
pub(crate) const MODE_KEY: &str = "QMD_CLI_SEARCH_MODE";
/// How long one QMD run may take before it is killed.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The binary name looked up on `PATH` when `QMD_CLI` is unset.
const DEFAULT_BINARY: &str = "qmd";
/// More output than any result list needs; beyond it the run is refused.
const MAX_OUTPUT_BYTES: u64 = 32 * 1024 * 1024;
/// The message every unreadable output starts with.
const UNREADABLE: &str = "qmd returned JSON ctxpack cannot read";

/// How to call QMD, from the resolved config variables (`.env` / config
/// file) and the process environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QmdConfig {
    /// `QMD_CLI` if set, else `qmd` found on `PATH`.
    pub binary: PathBuf,
    /// `QMD_WIKI_COLLECTION`.
    pub collection: String,
    /// `QMD_CLI_SEARCH_MODE` (default balanced).
    pub mode: QmdMode,
    /// How long a run may take before it is killed ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
}

/// Which QMD search a run uses (`QMD_CLI_SEARCH_MODE`, as obsidian-wiki
/// documents it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QmdMode {
    /// `qmd query`: hybrid search with reranking, the best and slowest.
    #[default]
    Quality,
    /// `qmd query --no-rerank`: hybrid search without the reranker.
    Balanced,
    /// `qmd vsearch`: vector search alone.
    Fast,
}

impl QmdMode {
    /// The QMD subcommand this mode runs.
    pub fn subcommand(self) -> &'static str {
        match self {
            QmdMode::Quality | QmdMode::Balanced => "query",
            QmdMode::Fast => "vsearch",
        }
    }

    /// The mode's name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            QmdMode::Quality => "quality",
            QmdMode::Balanced => "balanced",
            QmdMode::Fast => "fast",
        }
    }
}

impl fmt::Display for QmdMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for QmdMode {
    type Err = QmdError;

    /// Parses `quality`, `balanced` or `fast`, ignoring case and surrounding
    /// whitespace.
    fn from_str(value: &str) -> Result<QmdMode, QmdError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "quality" => Ok(QmdMode::Quality),
            "balanced" => Ok(QmdMode::Balanced),
            "fast" => Ok(QmdMode::Fast),
            _ => Err(QmdError::Mode(value.to_string())),
        }
    }
}

impl QmdConfig {
    /// None when `QMD_WIKI_COLLECTION` is unset/empty. Err when it
    /// is set but the binary cannot be found or the mode is unknown. `vars`
    /// are the resolved config variables; `path_env` is the `PATH` value to
    /// search.
    pub fn from_vars(
        vars: &BTreeMap<String, String>,
        path_env: Option<&OsStr>,
    ) -> Option<Result<QmdConfig, QmdError>> {
        let collection = non_empty(vars, COLLECTION_KEY)?;
        Some(Self::resolve(vars, collection, path_env))
    }

    fn resolve(
        vars: &BTreeMap<String, String>,
        collection: &str,
        path_env: Option<&OsStr>,
    ) -> Result<QmdConfig, QmdError> {
        let mode = match non_empty(vars, MODE_KEY) {
            Some(value) => value.parse()?,
            None => QmdMode::default(),
        };
        let binary = match non_empty(vars, CLI_KEY) {
            // A bare name behaves like `${QMD_CLI:-qmd}` in a shell: looked up on PATH.
            Some(name) if !name.contains('/') => {
                find_on_path(name, path_env).map_err(|problem| QmdError::Binary {
                    cli: Some(name.to_string()),
                    problem,
                })?
            }
            Some(path) => {
                check_executable(Path::new(path)).map_err(|problem| QmdError::Binary {
                    cli: Some(path.to_string()),
                    problem,
                })?;
                PathBuf::from(path)
            }
            None => find_on_path(DEFAULT_BINARY, path_env)
                .map_err(|problem| QmdError::Binary { cli: None, problem })?,
        };
        Ok(QmdConfig {
            binary,
            collection: collection.to_string(),
            mode,
            timeout: DEFAULT_TIMEOUT,
        })
    }
}

/// A config value, trimmed, when it is set and not blank.
fn non_empty<'a>(vars: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    vars.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The first executable file called `name` in the folders of `path_env`.
fn find_on_path(name: &str, path_env: Option<&OsStr>) -> Result<PathBuf, BinaryProblem> {
    let Some(path_env) = path_env else {
        return Err(BinaryProblem::NoPath);
    };
    std::env::split_paths(path_env)
        // An empty or relative PATH entry means (a folder of) the working
        // folder, which must not supply a binary.
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| check_executable(candidate).is_ok())
        .ok_or(BinaryProblem::NotOnPath)
}

fn check_executable(path: &Path) -> Result<(), BinaryProblem> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(BinaryProblem::NotExecutable),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Err(BinaryProblem::Missing),
        Err(err) => Err(BinaryProblem::Unchecked(Arc::new(err))),
    }
}

/// One QMD hit mapped to a vault-relative path (forward slashes, e.g.
/// "concepts/raft.md").
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QmdHit {
    pub path: String,
    pub score: f64,
}

/// Runs QMD for `query` with at most `limit` results, kills it after
/// `config.timeout`, and maps its results to vault-relative paths under
/// `vault_root` (results outside the root, or not .md, are dropped;
/// duplicates keep the best). Errors: a missing binary, a non-zero exit
/// (with its stderr's first line), a timeout, JSON it cannot read.
pub(crate) fn search(
    config: &QmdConfig,
    vault_root: &Path,
    query: &str,
    limit: usize,
) -> Result<Vec<QmdHit>, QmdError> {
    let query = query.trim();
    if query.is_empty() || limit == 0 {
        return Ok(Vec::new());
    }
    let output = run(config, &arguments(config, query, limit))?;
    let results = parse_results(&output.stdout, &output.stderr)?;
    Ok(map_results(results, vault_root, &config.collection, limit))
}

/// `<subcommand> -c <collection> -n <limit> --json <query>`; a query that
/// starts with `-` comes after `--` so QMD cannot read it as an option.
fn arguments(config: &QmdConfig, query: &str, limit: usize) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        config.mode.subcommand().into(),
        "-c".into(),
        config.collection.as_str().into(),
        "-n".into(),
        limit.to_string().into(),
        "--json".into(),
    ];
    if config.mode == QmdMode::Balanced {
        args.push("--no-rerank".into());
    }
    if query.starts_with('-') {
        args.push("--".into());
    }
    args.push(query.into());
    args
}

/// What a finished run printed.
struct Output {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Runs the binary with `args`, no stdin and no shell, and collects its
/// output; the whole run, output included, must end by the deadline.
fn run(config: &QmdConfig, args: &[OsString]) -> Result<Output, QmdError> {
    let subcommand = config.mode.subcommand();
    let deadline = Instant::now() + config.timeout;
    let mut child = spawn(config, args, deadline)?;
    let stdout = read_in_background(child.stdout.take());
    let stderr = read_in_background(child.stderr.take());
    let status = match wait_until(&mut child, deadline) {
        Ok(Some(status)) => status,
        Ok(None) => {
            stop(&mut child);
            return Err(QmdError::Timeout {
                subcommand,
                timeout: config.timeout,
            });
        }
        Err(err) => {
            stop(&mut child);
            return Err(QmdError::Wait {
                subcommand,
                error: Arc::new(err),
            });
        }
    };
    // A background process QMD started may still hold the pipes open.
    let (stdout, stderr) = match (collect(stdout, deadline), collect(stderr, deadline)) {
        (Ok(stdout), Ok(stderr)) => (stdout, stderr),
        (Err(problem), _) | (_, Err(problem)) => {
            stop(&mut child);
            return Err(QmdError::Output {
                subcommand,
                problem,
            });
        }
    };
    if !status.success() {
        return Err(failure(subcommand, status, &stderr));
    }
    Ok(Output { stdout, stderr })
}

fn spawn(config: &QmdConfig, args: &[OsString], deadline: Instant) -> Result<Child, QmdError> {
    let mut command = Command::new(&config.binary);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout can kill what QMD started too.
        .process_group(0);
    loop {
        match command.spawn() {
            Ok(child) => return Ok(child),
            // A just-written binary is briefly busy (ETXTBSY) while another
            // thread's fork still holds it open for writing.
            Err(err)
                if err.kind() == io::ErrorKind::ExecutableFileBusy
                    && Instant::now() + Duration::from_millis(20) < deadline =>
            {
                thread::sleep(Duration::from_millis(10));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(QmdError::NotFound(config.binary.clone()));
            }
            Err(err) => {
                return Err(QmdError::Spawn {
                    binary: config.binary.clone(),
                    error: Arc::new(err),
                });
            }
        }
    }
}

fn read_in_background<R: Read + Send + 'static>(pipe: Option<R>) -> Receiver<io::Result<Vec<u8>>> {
    let (sender, receiver) = mpsc::channel();
    match pipe {
        Some(pipe) => {
            let spawned = thread::Builder::new()
                .name("qmd-output".to_string())
                .spawn({
                    let sender = sender.clone();
                    move || {
                        let mut bytes = Vec::new();
                        let read = pipe
                            .take(MAX_OUTPUT_BYTES + 1)
                            .read_to_end(&mut bytes)
                            .map(|_| bytes);
                        // The receiver is gone only when the run was already abandoned.
                        let _ = sender.send(read);
                    }
                });
            if let Err(err) = spawned {
                let _ = sender.send(Err(err));
            }
        }
        None => {
            let _ = sender.send(Ok(Vec::new()));
        }
    }
    receiver
}

/// The child's exit status, or None when the deadline passed first.
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<ExitStatus>> {
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(25));
    }
}

fn collect(
    receiver: Receiver<io::Result<Vec<u8>>>,
    deadline: Instant,
) -> Result<Vec<u8>, OutputProblem> {
    let left = deadline.saturating_duration_since(Instant::now());
    match receiver.recv_timeout(left) {
        Ok(Ok(bytes)) if bytes.len() as u64 > MAX_OUTPUT_BYTES => Err(OutputProblem::TooLarge),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(err)) => Err(OutputProblem::Read(Arc::new(err))),
        Err(RecvTimeoutError::Timeout) => Err(OutputProblem::StayedOpen),
        Err(RecvTimeoutError::Disconnected) => Err(OutputProblem::ReaderStopped),
    }
}

/// Kills the child's whole process group, then reaps the child.
fn stop(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        // The group is the one the child leads (process_group(0)); its id
        // stays reserved while the child is unreaped or any member is alive,
        // so it can only name another group after all of them are gone.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    // Already gone (or never in its own group): killing the child alone is all that is left.
    let _ = child.kill();
    let _ = child.wait();
}

fn failure(subcommand: &'static str, status: ExitStatus, stderr: &[u8]) -> QmdError {
    let stderr = String::from_utf8_lossy(stderr);
    let line = stderr.lines().map(str::trim).find(|line| !line.is_empty());
    QmdError::Failed {
        subcommand,
        status,
        line: line.map(str::to_string),
    }
}

fn describe(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// One result as QMD printed it.
#[derive(Clone, Debug, PartialEq)]
struct RawHit {
    file: String,
    score: f64,
}

/// Reads QMD's `--json` output: an array of results, or an object with a
/// `results` array. Tolerates log lines before the JSON and QMD's plain
/// "No results found" message.
fn parse_results(stdout: &[u8], stderr: &[u8]) -> Result<Vec<RawHit>, QmdError> {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        if says_no_results(&String::from_utf8_lossy(stderr)) {
            return Ok(Vec::new());
        }
        return Err(QmdError::Unreadable("it printed nothing".to_string()));
    }
    let first_error = match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => return results_of(&value),
        Err(err) => err,
    };
    if let Some(value) = json_after_noise(trimmed) {
        return results_of(&value);
    }
    if says_no_results(trimmed) {
        return Ok(Vec::new());
    }
    Err(QmdError::Unreadable(format!(
        "{first_error}; output starts with {:?}",
        crate::text::truncate_chars(trimmed, 80)
    )))
}

/// The first JSON array or object that starts a line and parses, with
/// whatever follows it ignored.
fn json_after_noise(text: &str) -> Option<Value> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset + (line.len() - line.trim_start().len());
        offset += line.len();
        if !matches!(text.as_bytes().get(start), Some(b'[' | b'{')) {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(value)) = values.next()
            && results_of(&value).is_ok()
        {
            return Some(value);
        }
    }
    None
}

fn says_no_results(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim().trim_end_matches('.').to_ascii_lowercase();
        line == "no results found" || line.ends_with(": no results found")
    })
}

fn results_of(value: &Value) -> Result<Vec<RawHit>, QmdError> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(object) => match object.get("results") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(QmdError::Unreadable(
                    "an object without a `results` array".to_string(),
                ));
            }
        },
        other => {
            return Err(QmdError::Unreadable(format!(
                "expected an array of results, got {}",
                kind(other)
            )));
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(position, item)| raw_hit(position + 1, item))
        .collect()
}

fn raw_hit(number: usize, item: &Value) -> Result<RawHit, QmdError> {
    let Value::Object(object) = item else {
        return Err(QmdError::Unreadable(format!(
            "result {number} is {}, not an object",
            kind(item)
        )));
    };
    let file = ["file", "path", "filepath"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .filter(|file| !file.trim().is_empty())
        .ok_or_else(|| {
            QmdError::Unreadable(format!(
                "result {number} has no `file`, `path` or `filepath`"
            ))
        })?;
    let score = match object.get("score") {
        Some(Value::Number(number)) => number.as_f64(),
        Some(Value::String(text)) => text.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|score| score.is_finite())
    .ok_or_else(|| QmdError::Unreadable(format!("result {number} has no numeric `score`")))?;
    Ok(RawHit {
        file: file.trim().to_string(),
        score,
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Maps results to vault-relative Markdown paths, best score first, one hit
/// per path, at most `limit`.
fn map_results(
    results: Vec<RawHit>,
    vault_root: &Path,
    collection: &str,
    limit: usize,
) -> Vec<QmdHit> {
    let canonical_root = fs::canonicalize(vault_root).ok();
    let disk_root = canonical_root.as_deref().unwrap_or(vault_root);
    let mut listings = Listings::default();
    let mut hits: Vec<QmdHit> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for result in results {
        let Some(parts) = relative_parts(
            &result.file,
            vault_root,
            canonical_root.as_deref(),
            collection,
        ) else {
            continue;
        };
        let path = listings.resolve(disk_root, &parts).join("/");
        let is_markdown = Path::new(&path)
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|ext| ext.eq_ignore_ascii_case("md"));
        if !is_markdown {
            continue;
        }
        match seen.get(&path) {
            Some(&index) => {
                if result.score > hits[index].score {
                    hits[index].score = result.score;
                }
            }
            None => {
                seen.insert(path.clone(), hits.len());
                hits.push(QmdHit {
                    path,
                    score: result.score,
                });
            }
        }
    }
    // Ties by path, like every other arm, whatever order QMD printed them in.
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
    });
    hits.truncate(limit);
    hits
}

/// The path components, relative to the vault root, that a QMD file
/// reference names; None when it is outside the root, climbs with `..`, or
/// belongs to another collection.
fn relative_parts(
    file: &str,
    vault_root: &Path,
    canonical_root: Option<&Path>,
    collection: &str,
) -> Option<Vec<String>> {
    if let Some(rest) = file.strip_prefix("qmd://") {
        // qmd://<collection>/<path>[?index=<name>]
        let rest = rest.split('?').next().unwrap_or(rest);
        let (name, path) = rest.split_once('/')?;
        if !name.eq_ignore_ascii_case(collection) {
            return None;
        }
        return slash_parts(path);
    }
    let path = Path::new(file);
    if !path.is_absolute() {
        return slash_parts(file);
    }
    let relative = match fs::canonicalize(path) {
        // It exists: only where it really is counts, so a symlink out of the vault is out.
        Ok(real) => real
            .strip_prefix(canonical_root.unwrap_or(vault_root))
            .ok()
            .map(Path::to_path_buf)?,
        Err(_) => [canonical_root, Some(vault_root)]
            .into_iter()
            .flatten()
            .find_map(|root| path.strip_prefix(root).ok())
            .map(Path::to_path_buf)?,
    };
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?.to_string()),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then_some(parts)
}

fn slash_parts(path: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part.to_string()),
        }
    }
    (!parts.is_empty()).then_some(parts)
}

/// Folder listings read while resolving one run's hits.
#[derive(Default)]
struct Listings {
    names: HashMap<PathBuf, Vec<String>>,
}

impl Listings {
    /// The on-disk names for `parts` under `root`: each component is the
    /// entry with exactly that name, else the first whose QMD handle
    /// matches; from the first component with no match on, the parts are
    /// kept as given.
    fn resolve(&mut self, root: &Path, parts: &[String]) -> Vec<String> {
        let mut dir = root.to_path_buf();
        let mut resolved = Vec::with_capacity(parts.len());
        for (index, part) in parts.iter().enumerate() {
            let is_file = index + 1 == parts.len();
            let names = self.names.entry(dir.clone()).or_insert_with(|| list(&dir));
            let found = names.iter().find(|name| *name == part).or_else(|| {
                let wanted = handle_key(part, is_file);
                names
                    .iter()
                    .find(|name| handle_key(name, is_file) == wanted)
            });
            match found {
                Some(name) => {
                    dir.push(name);
                    resolved.push(name.clone());
                }
                None => {
                    resolved.extend(parts[index..].iter().cloned());
                    break;
                }
            }
        }
        resolved
    }
}

/// The UTF-8 entry names of a folder, sorted; empty when it cannot be read.
fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A path component the way QMD's handles compare: lower case, each run of
/// characters other than letters, digits and `$` as one `-`, no leading or
/// trailing `-`, and a file's extension kept.
fn handle_key(name: &str, is_file: bool) -> String {
    let (stem, extension) = match name.rfind('.') {
        Some(dot)
            if is_file
                && dot + 1 < name.len()
                && name[dot + 1..].bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            name.split_at(dot)
        }
        _ => (name, ""),
    };
    let mut key = String::with_capacity(name.len());
    let mut gap = false;
    for c in stem.chars() {
        if c.is_alphanumeric() || c == '$' {
            if gap && !key.is_empty() {
                key.push('-');
            }
            gap = false;
            key.extend(c.to_lowercase());
        } else {
            gap = true;
        }
    }
    key.push_str(&extension.to_ascii_lowercase());
    key
}

/// Why QMD could not be configured or run. The messages are the ones the
/// CLI prints and a pack's signal errors carry.
#[derive(Clone, Debug)]
pub enum QmdError {
    /// `QMD_CLI_SEARCH_MODE` names no mode (the value as written).
    Mode(String),
    /// `QMD_WIKI_COLLECTION` is set but the binary cannot be used: the
    /// `QMD_CLI` value that names it (`None`: `qmd` on `PATH`).
    Binary {
        cli: Option<String>,
        problem: BinaryProblem,
    },
    /// The binary vanished before it could be started.
    NotFound(PathBuf),
    /// The binary could not be started.
    Spawn {
        binary: PathBuf,
        error: Arc<io::Error>,
    },
    /// The run `qmd <subcommand>` outlived its timeout and was killed.
    Timeout {
        subcommand: &'static str,
        timeout: Duration,
    },
    /// Waiting for the run to end failed.
    Wait {
        subcommand: &'static str,
        error: Arc<io::Error>,
    },
    /// The run's output could not be collected.
    Output {
        subcommand: &'static str,
        problem: OutputProblem,
    },
    /// The run exited with a failure, with the first line of its stderr.
    Failed {
        subcommand: &'static str,
        status: ExitStatus,
        line: Option<String>,
    },
    /// The run printed output that is not QMD's JSON (what is wrong).
    Unreadable(String),
}

/// Why the binary QMD's config names cannot be used.
#[derive(Clone, Debug)]
pub enum BinaryProblem {
    NoPath,
    NotOnPath,
    Missing,
    NotExecutable,
    /// Its metadata could not be read.
    Unchecked(Arc<io::Error>),
}

/// Why a finished run's output could not be collected.
#[derive(Clone, Debug)]
pub enum OutputProblem {
    /// More than [`MAX_OUTPUT_BYTES`].
    TooLarge,
    Read(Arc<io::Error>),
    /// A process the run started still held the pipe at the deadline.
    StayedOpen,
    ReaderStopped,
}

impl fmt::Display for QmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QmdError::Mode(value) => write!(
                f,
                "{MODE_KEY}={value:?} is not a QMD search mode; use quality, balanced or fast"
            ),
            QmdError::Binary {
                cli: Some(cli),
                problem,
            } => write!(f, "{COLLECTION_KEY} is set but {CLI_KEY}={cli} {problem}"),
            QmdError::Binary { cli: None, problem } => write!(
                f,
                "{COLLECTION_KEY} is set but `{DEFAULT_BINARY}` {problem}; install QMD or set \
                 {CLI_KEY} to its path"
            ),
            QmdError::NotFound(binary) => write!(f, "qmd not found at {}", binary.display()),
            QmdError::Spawn { binary, error } => {
                write!(f, "cannot run {}: {error}", binary.display())
            }
            QmdError::Timeout {
                subcommand,
                timeout,
            } => write!(
                f,
                "qmd {subcommand} did not finish within {} and was stopped",
                describe(*timeout)
            ),
            QmdError::Wait { subcommand, error } => {
                write!(f, "qmd {subcommand}: cannot wait for it to finish: {error}")
            }
            QmdError::Output {
                subcommand,
                problem,
            } => write!(f, "qmd {subcommand}: {problem}"),
            QmdError::Failed {
                subcommand,
                status,
                line: Some(line),
            } => write!(f, "qmd {subcommand} failed ({status}): {line}"),
            QmdError::Failed {
                subcommand,
                status,
                line: None,
            } => write!(f, "qmd {subcommand} failed ({status}) without a message"),
            QmdError::Unreadable(what) => write!(f, "{UNREADABLE}: {what}"),
        }
    }
}

impl std::error::Error for QmdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QmdError::Spawn { error, .. } | QmdError::Wait { error, .. } => Some(error.as_ref()),
            QmdError::Binary {
                problem: BinaryProblem::Unchecked(error),
                ..
            }
            | QmdError::Output {
                problem: OutputProblem::Read(error),
                ..
            } => Some(error.as_ref()),
            _ => None,
        }
    }
}

impl fmt::Display for BinaryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BinaryProblem::NoPath => f.write_str("was not found: PATH is not set"),
            BinaryProblem::NotOnPath => f.write_str("was not found on PATH"),
            BinaryProblem::Missing => f.write_str("does not exist"),
            BinaryProblem::NotExecutable => f.write_str("is not an executable file"),
            BinaryProblem::Unchecked(error) => write!(f, "cannot be checked: {error}"),
        }
    }
}

impl fmt::Display for OutputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputProblem::TooLarge => write!(
                f,
                "printed more than {} MiB",
                MAX_OUTPUT_BYTES / (1024 * 1024)
            ),
            OutputProblem::Read(error) => write!(f, "cannot read its output: {error}"),
            OutputProblem::StayedOpen => {
                f.write_str("exited, but its output stayed open past the timeout")
            }
            OutputProblem::ReaderStopped => f.write_str("its output reader stopped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs::File;
    use std::io::Write;

    use tempfile::TempDir;

    /// A fake `qmd`: a shell script that records its arguments, one per
    /// line, in `args` next to it, then runs `body`.
    fn fake_qmd(dir: &Path, body: &str) -> PathBuf {
        let path = dir.join("qmd");
        let script =
            format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args\"\n{body}\n");
        let mut file = File::create(&path).unwrap();
        file.write_all(script.as_bytes()).unwrap();
        drop(file);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A fake `qmd` that prints `json` and exits 0.
    fn printing(dir: &Path, json: &str) -> PathBuf {
        fake_qmd(dir, &format!("cat <<'EOF'\n{json}\nEOF"))
    }

    fn config(binary: PathBuf, mode: QmdMode) -> QmdConfig {
        QmdConfig {
            binary,
            collection: "wiki".to_string(),
            mode,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    fn recorded_args(dir: &Path) -> Vec<String> {
        fs::read_to_string(dir.join("args"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A vault with a few notes, in its own temp dir.
    fn vault() -> TempDir {
        let vault = tempfile::tempdir().unwrap();
        for path in [
            "concepts/raft.md",
            "concepts/paxos.md",
            "Concepts Extra/Raft Consensus (2024).md",
            "notes.txt",
        ] {
            let path = vault.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "# note\n").unwrap();
        }
        vault
    }

    fn hit(path: &str, score: f64) -> QmdHit {
        QmdHit {
            path: path.to_string(),
            score,
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn passes_subcommand_collection_count_json_and_query_per_mode() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(bin.path(), "[]");
        for (mode, expected) in [
            (
                QmdMode::Quality,
                &[
                    "query",
                    "-c",
                    "wiki",
                    "-n",
                    "20",
                    "--json",
                    "raft consensus",
                ][..],
            ),
            (
                QmdMode::Balanced,
                &[
                    "query",
                    "-c",
                    "wiki",
                    "-n",
                    "20",
                    "--json",
                    "--no-rerank",
                    "raft consensus",
                ][..],
            ),
            (
                QmdMode::Fast,
                &[
                    "vsearch",
                    "-c",
                    "wiki",
                    "-n",
                    "20",
                    "--json",
                    "raft consensus",
                ][..],
            ),
        ] {
            let hits = search(
                &config(qmd.clone(), mode),
                vault.path(),
                "raft consensus",
                20,
            );
            assert_eq!(hits.map_err(|err| err.to_string()), Ok(Vec::new()));
            assert_eq!(recorded_args(bin.path()), expected);
        }
    }

    #[test]
    fn a_query_starting_with_a_dash_follows_a_double_dash() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(bin.path(), "[]");
        let config = config(qmd, QmdMode::Fast);
        search(&config, vault.path(), "  -n 5 `$(rm -rf /)`; 'x' ", 3).unwrap();
        assert_eq!(
            recorded_args(bin.path()),
            [
                "vsearch",
                "-c",
                "wiki",
                "-n",
                "3",
                "--json",
                "--",
                "-n 5 `$(rm -rf /)`; 'x'"
            ]
        );
    }

    #[test]
    fn reads_qmd_uris_best_first() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(
            bin.path(),
            r##"[
  {"docid": "#a1b2c3", "score": 0.61, "file": "qmd://wiki/concepts/paxos.md", "title": "Paxos", "snippet": "…"},
  {"docid": "#d4e5f6", "score": 0.93, "file": "qmd://wiki/concepts/raft.md?index=main", "title": "Raft"}
]"##,
        );
        let hits = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 20).unwrap();
        assert_eq!(
            hits,
            [
                hit("concepts/raft.md", 0.93),
                hit("concepts/paxos.md", 0.61)
            ]
        );
    }

    #[test]
    fn equal_scores_are_ordered_by_path_whatever_qmd_printed() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(
            bin.path(),
            r##"[
  {"docid": "#a1b2c3", "score": 0.5, "file": "qmd://wiki/concepts/raft.md", "title": "Raft"},
  {"docid": "#d4e5f6", "score": 0.5, "file": "qmd://wiki/concepts/paxos.md", "title": "Paxos"}
]"##,
        );
        let hits = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 20).unwrap();
        assert_eq!(
            hits,
            [hit("concepts/paxos.md", 0.5), hit("concepts/raft.md", 0.5)]
        );
    }

    #[test]
    fn reads_relative_and_absolute_paths_and_a_results_object() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let absolute = vault.path().join("concepts/paxos.md");
        let json = format!(
            r#"{{"results": [
  {{"score": "0.8", "path": "./concepts//raft.md"}},
  {{"score": 0.5, "filepath": "{}"}}
]}}"#,
            absolute.display()
        );
        let qmd = printing(bin.path(), &json);
        let hits = search(&config(qmd, QmdMode::Quality), vault.path(), "raft", 20).unwrap();
        assert_eq!(
            hits,
            [hit("concepts/raft.md", 0.8), hit("concepts/paxos.md", 0.5)]
        );
    }

    #[test]
    fn drops_escapes_other_collections_and_non_markdown_and_keeps_the_best_duplicate() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let outside = tempfile::tempdir().unwrap();
        let outside_note = outside.path().join("secret.md");
        fs::write(&outside_note, "x").unwrap();
        std::os::unix::fs::symlink(&outside_note, vault.path().join("link.md")).unwrap();
        let json = format!(
            r#"[
  {{"score": 0.9, "file": "qmd://wiki/../outside.md"}},
  {{"score": 0.9, "file": "../outside.md"}},
  {{"score": 0.9, "file": "concepts/../../outside.md"}},
  {{"score": 0.9, "file": "{outside}"}},
  {{"score": 0.9, "file": "{link}"}},
  {{"score": 0.9, "file": "qmd://papers/concepts/raft.md"}},
  {{"score": 0.9, "file": "qmd://wiki/notes.txt"}},
  {{"score": 0.3, "file": "qmd://wiki/concepts/raft.md"}},
  {{"score": 0.7, "file": "concepts/raft.md"}},
  {{"score": 0.5, "file": "qmd://wiki/concepts/raft.md"}}
]"#,
            outside = outside_note.display(),
            link = vault.path().join("link.md").display(),
        );
        let qmd = printing(bin.path(), &json);
        let hits = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 20).unwrap();
        assert_eq!(hits, [hit("concepts/raft.md", 0.7)]);
    }

    #[test]
    fn resolves_qmd_handles_to_the_file_names_on_disk() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(
            bin.path(),
            r#"[
  {"score": 0.9, "file": "qmd://wiki/concepts-extra/raft-consensus-2024.md"},
  {"score": 0.8, "file": "qmd://wiki/Concepts-Extra/Raft-Consensus-2024.md"},
  {"score": 0.4, "file": "qmd://wiki/concepts/missing-note.md"}
]"#,
        );
        let hits = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 20).unwrap();
        assert_eq!(
            hits,
            [
                hit("Concepts Extra/Raft Consensus (2024).md", 0.9),
                hit("concepts/missing-note.md", 0.4),
            ]
        );
    }

    #[test]
    fn returns_at_most_limit_hits() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = printing(
            bin.path(),
            r#"[{"score": 0.2, "file": "concepts/paxos.md"}, {"score": 0.9, "file": "concepts/raft.md"}]"#,
        );
        let hits = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 1).unwrap();
        assert_eq!(hits, [hit("concepts/raft.md", 0.9)]);
        assert_eq!(recorded_args(bin.path())[4], "1");
    }

    #[test]
    fn tolerates_log_lines_before_the_json_and_a_no_results_message() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let noisy = printing(
            bin.path(),
            "Loading model…\nSearching [wiki]\n[{\"score\": 1, \"file\": \"concepts/raft.md\"}]\n",
        );
        let hits = search(&config(noisy, QmdMode::Balanced), vault.path(), "raft", 5).unwrap();
        assert_eq!(hits, [hit("concepts/raft.md", 1.0)]);

        let empty = printing(bin.path(), "No results found.");
        let hits = search(&config(empty, QmdMode::Balanced), vault.path(), "raft", 5);
        assert_eq!(hits.map_err(|err| err.to_string()), Ok(Vec::new()));
    }

    #[test]
    fn unreadable_output_is_an_error() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        for output in [
            "this is not json",
            "{\"hits\": []}",
            "\"concepts/raft.md\"",
            "[\"concepts/raft.md\"]",
            "[{\"file\": \"concepts/raft.md\"}]",
            "[{\"score\": 0.5, \"title\": \"Raft\"}]",
            "",
        ] {
            let qmd = printing(bin.path(), output);
            let err = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 5).unwrap_err();
            assert!(
                matches!(err, QmdError::Unreadable(_)),
                "{output:?} gave {err:?}"
            );
            assert!(
                err.to_string()
                    .starts_with("qmd returned JSON ctxpack cannot read: "),
                "{output:?} gave {err:?}"
            );
        }
    }

    #[test]
    fn a_failing_run_reports_the_first_line_of_its_stderr() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = fake_qmd(
            bin.path(),
            "echo '[]'\necho >&2\necho 'Collection not found: wiki' >&2\necho 'second line' >&2\nexit 3",
        );
        let err = search(&config(qmd, QmdMode::Balanced), vault.path(), "raft", 5)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "qmd query failed (exit status: 3): Collection not found: wiki"
        );
    }

    #[test]
    fn a_slow_run_is_killed_at_the_timeout() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = fake_qmd(bin.path(), "sleep 5\necho '[]'");
        let config = QmdConfig {
            timeout: Duration::from_millis(300),
            ..config(qmd, QmdMode::Quality)
        };
        let started = Instant::now();
        let err = search(&config, vault.path(), "raft", 5)
            .unwrap_err()
            .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            err,
            "qmd query did not finish within 300 ms and was stopped"
        );
    }

    #[test]
    fn output_held_open_by_a_background_process_ends_at_the_timeout() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = fake_qmd(bin.path(), "sleep 5 &\necho '[]'");
        let config = QmdConfig {
            timeout: Duration::from_millis(300),
            ..config(qmd, QmdMode::Fast)
        };
        let started = Instant::now();
        let err = search(&config, vault.path(), "raft", 5)
            .unwrap_err()
            .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(err.contains("output stayed open"), "{err}");
    }

    #[test]
    fn a_missing_binary_is_an_error() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let config = config(bin.path().join("no-such-qmd"), QmdMode::Balanced);
        let err = search(&config, vault.path(), "raft", 5)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("qmd not found at "), "{err}");
    }

    #[test]
    fn an_empty_query_or_zero_limit_does_not_run_qmd() {
        let bin = tempfile::tempdir().unwrap();
        let vault = vault();
        let qmd = fake_qmd(bin.path(), "exit 1");
        let config = config(qmd, QmdMode::Balanced);
        assert_eq!(search(&config, vault.path(), "  ", 5).unwrap(), []);
        assert_eq!(search(&config, vault.path(), "raft", 0).unwrap(), []);
        assert!(!bin.path().join("args").exists());
    }

    #[test]
    fn an_error_says_what_the_text_said_and_keeps_the_io_error_as_its_source() {
        use std::error::Error as _;
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        let err = QmdError::Binary {
            cli: Some("/opt/qmd".into()),
            problem: BinaryProblem::Unchecked(Arc::new(denied())),
        };
        assert_eq!(
            err.to_string(),
            format!(
                "QMD_WIKI_COLLECTION is set but QMD_CLI=/opt/qmd cannot be checked: {}",
                denied()
            )
        );
        let source = err.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            source.map(io::Error::kind),
            Some(io::ErrorKind::PermissionDenied)
        );
        let err = QmdError::Binary {
            cli: None,
            problem: BinaryProblem::NotOnPath,
        };
        assert_eq!(
            err.to_string(),
            "QMD_WIKI_COLLECTION is set but `qmd` was not found on PATH; install QMD or set \
             QMD_CLI to its path"
        );
        assert!(err.source().is_none());
        let err = QmdError::Timeout {
            subcommand: "vsearch",
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            err.to_string(),
            "qmd vsearch did not finish within 1500 ms and was stopped"
        );
    }

    #[test]
    fn parses_modes() {
        assert_eq!("quality".parse::<QmdMode>().unwrap(), QmdMode::Quality);
        assert_eq!(" Balanced ".parse::<QmdMode>().unwrap(), QmdMode::Balanced);
        assert_eq!("FAST".parse::<QmdMode>().unwrap(), QmdMode::Fast);
        assert!(
            "turbo"
                .parse::<QmdMode>()
                .unwrap_err()
                .to_string()
                .contains("quality, balanced or fast")
        );
        assert_eq!(QmdMode::default(), QmdMode::Quality);
        for mode in [QmdMode::Quality, QmdMode::Balanced, QmdMode::Fast] {
            assert_eq!(mode.to_string().parse::<QmdMode>().unwrap(), mode);
        }
    }

    #[test]
    fn from_vars_is_none_without_a_collection() {
        let bin = tempfile::tempdir().unwrap();
        fake_qmd(bin.path(), "");
        let path = Some(bin.path().as_os_str());
        assert!(QmdConfig::from_vars(&vars(&[]), path).is_none());
        assert!(
            QmdConfig::from_vars(&vars(&[(COLLECTION_KEY, "  "), (MODE_KEY, "turbo")]), path)
                .is_none()
        );
    }

    #[test]
    fn from_vars_finds_qmd_on_path() {
        let empty = tempfile::tempdir().unwrap();
        let not_executable = tempfile::tempdir().unwrap();
        fs::write(not_executable.path().join("qmd"), "#!/bin/sh\n").unwrap();
        let bin = tempfile::tempdir().unwrap();
        let qmd = fake_qmd(bin.path(), "");
        let path = std::env::join_paths([empty.path(), not_executable.path(), bin.path()]).unwrap();
        let config = QmdConfig::from_vars(
            &vars(&[(COLLECTION_KEY, "wiki"), (MODE_KEY, "fast")]),
            Some(&path),
        );
        assert_eq!(
            config.map(|config| config.map_err(|err| err.to_string())),
            Some(Ok(QmdConfig {
                binary: qmd,
                collection: "wiki".to_string(),
                mode: QmdMode::Fast,
                timeout: DEFAULT_TIMEOUT,
            }))
        );
    }

    #[test]
    fn from_vars_reports_a_missing_binary_or_an_unknown_mode() {
        let empty = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        let qmd = fake_qmd(bin.path(), "");
        let path = Some(empty.path().as_os_str());

        let missing = empty.path().join("bin/qmd");
        let vars_missing = vars(&[
            (COLLECTION_KEY, "wiki"),
            (CLI_KEY, missing.to_str().unwrap()),
        ]);
        let err = QmdConfig::from_vars(&vars_missing, path)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist"), "{err}");

        let err = QmdConfig::from_vars(&vars(&[(COLLECTION_KEY, "wiki")]), path)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not found on PATH") && err.contains(CLI_KEY),
            "{err}"
        );
        let err = QmdConfig::from_vars(&vars(&[(COLLECTION_KEY, "wiki")]), None)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains("PATH is not set"), "{err}");

        let bad_mode = vars(&[
            (COLLECTION_KEY, "wiki"),
            (CLI_KEY, qmd.to_str().unwrap()),
            (MODE_KEY, "turbo"),
        ]);
        let err = QmdConfig::from_vars(&bad_mode, path)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains(MODE_KEY), "{err}");

        let explicit = vars(&[(COLLECTION_KEY, "wiki"), (CLI_KEY, qmd.to_str().unwrap())]);
        let config = QmdConfig::from_vars(&explicit, path).unwrap().unwrap();
        assert_eq!((config.binary, config.mode), (qmd, QmdMode::Quality));
    }

    #[test]
    fn handle_keys_match_qmd_handles() {
        assert_eq!(
            handle_key("Raft Consensus (2024).md", true),
            "raft-consensus-2024.md"
        );
        assert_eq!(
            handle_key("raft-consensus-2024.md", true),
            "raft-consensus-2024.md"
        );
        assert_eq!(handle_key("--Notes & Ideas--", false), "notes-ideas");
        assert_eq!(handle_key("v1.2 plan.MD", true), "v1-2-plan.md");
        assert_eq!(handle_key("Über Straße.md", true), "über-straße.md");
    }
}

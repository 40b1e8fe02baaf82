//! Which vault to use: the seed's config resolution protocol.
//!
//! Order: `--vault PATH` → an inline `@name` (`<global dir>/config.<name>`,
//! this call only, never falling back) → `CTXPACK_VAULT`, then
//! `OBSIDIAN_VAULT_PATH`, in the process's environment (what an MCP
//! client's `"env"` sets) → the first `.env` setting
//! `OBSIDIAN_VAULT_PATH` walking up from the current folder to `$HOME` →
//! the global config (`${XDG_CONFIG_HOME:-~/.config}/obsidian-wiki/config`,
//! or the legacy `~/.obsidian-wiki/config` when only that exists).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

pub(crate) const VAULT_KEY: &str = "OBSIDIAN_VAULT_PATH";
/// ctxpack's own name for the vault in the environment; it wins over
/// [`VAULT_KEY`] there.
pub(crate) const CTXPACK_VAULT_KEY: &str = "CTXPACK_VAULT";

/// Where the vault path came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ConfigSource {
    Flag,
    Named {
        name: String,
        file: PathBuf,
    },
    /// A variable of the process's environment.
    Variable(&'static str),
    DotEnv(PathBuf),
    Global(PathBuf),
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Flag => f.write_str("--vault"),
            ConfigSource::Named { name, file } => write!(f, "@{name} ({})", file.display()),
            ConfigSource::Variable(name) => write!(f, "${name}"),
            ConfigSource::DotEnv(file) => write!(f, "{}", file.display()),
            ConfigSource::Global(file) => write!(f, "{}", file.display()),
        }
    }
}

/// The resolved vault and every key of the config file that named it.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub vault: PathBuf,
    pub source: ConfigSource,
    pub vars: BTreeMap<String, String>,
    /// Keys of a `.env` found by walking up that were not taken (see
    /// [`DOTENV_KEYS`]).
    pub ignored: Vec<String>,
}

/// What a `.env` found by walking up from the working folder may set: it
/// may belong to a checkout the user does not trust, so it may choose the
/// vault (and QMD's collection, searched with a `qmd` the user installed),
/// but never name a program to run, start a background process or send
/// the vault to a store. Those are read from the environment or the
/// user's own config files only.
pub(crate) const DOTENV_KEYS: &[&str] = &[VAULT_KEY, "QMD_WIKI_COLLECTION", "QMD_CLI_SEARCH_MODE"];

/// What resolution needs from the environment, so tests can supply it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Environment {
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    /// `CTXPACK_VAULT` and `OBSIDIAN_VAULT_PATH` as the process has them.
    pub vault_variables: Vec<(&'static str, PathBuf)>,
}

impl Environment {
    pub(crate) fn from_process() -> Environment {
        Environment {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            home: crate::xdg::env_path("HOME"),
            xdg_config_home: crate::xdg::env_path(crate::xdg::Base::Config.variable()),
            vault_variables: [CTXPACK_VAULT_KEY, VAULT_KEY]
                .into_iter()
                .filter_map(|name| crate::xdg::env_path(name).map(|path| (name, path)))
                .collect(),
        }
    }

    fn xdg_dir(&self) -> Option<PathBuf> {
        crate::xdg::Base::Config
            .folder_from(self.xdg_config_home.as_deref(), self.home.as_deref())
            .map(|base| base.join("obsidian-wiki"))
    }

    fn legacy_dir(&self) -> Option<PathBuf> {
        self.home.as_ref().map(|h| h.join(".obsidian-wiki"))
    }

    /// The global config folder: the XDG one, or the legacy one when only
    /// that exists.
    pub(crate) fn global_dir(&self) -> Option<PathBuf> {
        let xdg = self.xdg_dir();
        if xdg.as_ref().is_some_and(|d| d.is_dir()) {
            return xdg;
        }
        let legacy = self.legacy_dir();
        if legacy.as_ref().is_some_and(|d| d.is_dir()) {
            return legacy;
        }
        xdg
    }
}

/// A configuration problem: the CLI exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Resolves the vault from the flag, the `@name`, `.env` files and the
/// global config, in that order.
pub(crate) fn resolve(
    flag: Option<&Path>,
    name: Option<&str>,
    env: &Environment,
) -> Result<Resolved, ConfigError> {
    let resolved = resolve_source(flag, name, env)?;
    if !resolved.vault.is_dir() {
        return Err(ConfigError(format!(
            "vault {} (from {}) is not an existing folder",
            resolved.vault.display(),
            resolved.source
        )));
    }
    // Before anything counts tokens: a vocabulary prepared in a cache
    // folder set inside this vault would be a write in it.
    if let Ok(root) = resolved.vault.canonicalize() {
        crate::tokens::never_cache_inside(&root);
    }
    Ok(resolved)
}

fn resolve_source(
    flag: Option<&Path>,
    name: Option<&str>,
    env: &Environment,
) -> Result<Resolved, ConfigError> {
    if let Some(path) = flag {
        // An MCP client starts ctxpack without a shell: `--vault ~/notes`
        // in its configuration arrives unexpanded.
        let path = path
            .to_str()
            .and_then(|raw| home_expanded(raw, env))
            .unwrap_or_else(|| path.to_path_buf());
        return Ok(Resolved {
            vault: absolute(&env.cwd, &path),
            source: ConfigSource::Flag,
            vars: BTreeMap::new(),
            ignored: Vec::new(),
        });
    }
    if let Some(name) = name {
        return resolve_named(name, env);
    }
    // The user's own environment comes before a `.env` found by walking
    // up, which may belong to a checkout they do not trust.
    if let Some((variable, path)) = env.vault_variables.first() {
        return Ok(Resolved {
            vault: absolute(&env.cwd, path),
            source: ConfigSource::Variable(variable),
            vars: BTreeMap::new(),
            ignored: Vec::new(),
        });
    }
    if let Some(found) = walk_up_dotenv(env)? {
        return Ok(found);
    }
    let global = env.global_dir().map(|dir| dir.join("config"));
    if let Some(file) = global.filter(|f| is_config_file(f)) {
        let vars = read_config_file(&file)?;
        if let Some(vault) = vault_path(&vars, &file, env) {
            return Ok(Resolved {
                vault,
                source: ConfigSource::Global(file),
                vars,
                ignored: Vec::new(),
            });
        }
        return Err(ConfigError(format!(
            "{} does not set {VAULT_KEY}; {}",
            file.display(),
            how_to_set(env)
        )));
    }
    Err(ConfigError(format!(
        "no vault configured; {}",
        how_to_set(env)
    )))
}

fn how_to_set(env: &Environment) -> String {
    let global_config_path = || {
        env.global_dir().map_or_else(
            || "${XDG_CONFIG_HOME:-~/.config}/obsidian-wiki/config".to_string(),
            |dir| dir.join("config").display().to_string(),
        )
    };
    format!(
        "pass --vault PATH, set {CTXPACK_VAULT_KEY} (or {VAULT_KEY}) in the environment, or put \
         {VAULT_KEY}=/path/to/vault in a .env file in this folder or a parent, or in \
         {}",
        global_config_path()
    )
}

fn resolve_named(name: &str, env: &Environment) -> Result<Resolved, ConfigError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    let dir = env.global_dir();
    let file = dir.as_ref().map(|d| d.join(format!("config.{name}")));
    match file.filter(|f| valid && is_config_file(f)) {
        Some(file) => {
            let vars = read_config_file(&file)?;
            match vault_path(&vars, &file, env) {
                Some(vault) => Ok(Resolved {
                    vault,
                    source: ConfigSource::Named {
                        name: name.to_string(),
                        file,
                    },
                    vars,
                    ignored: Vec::new(),
                }),
                None => Err(ConfigError(format!(
                    "{} does not set {VAULT_KEY}",
                    file.display()
                ))),
            }
        }
        None => {
            let known = named_configs(env);
            let list = if known.is_empty() {
                "none found".to_string()
            } else {
                known
                    .iter()
                    .map(|n| format!("@{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let place = dir.map_or_else(
                || "the global config folder".to_string(),
                |d| d.display().to_string(),
            );
            Err(ConfigError(format!(
                "no vault config named '@{name}' (looked for config.{name} in {place}); named configs: {list}"
            )))
        }
    }
}

/// The names of `config.<name>` files in the global config folders.
pub(crate) fn named_configs(env: &Environment) -> Vec<String> {
    let mut names = Vec::new();
    for dir in [env.xdg_dir(), env.legacy_dir()].into_iter().flatten() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("config."))
                && !name.is_empty()
                && !names.iter().any(|n: &String| n == name)
            {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    names
}

fn walk_up_dotenv(env: &Environment) -> Result<Option<Resolved>, ConfigError> {
    let mut dir = Some(env.cwd.as_path());
    while let Some(current) = dir {
        let file = current.join(".env");
        if is_config_file(&file) {
            let (vars, ignored): (BTreeMap<String, String>, BTreeMap<String, String>) =
                read_config_file(&file)?
                    .into_iter()
                    .partition(|(key, _)| DOTENV_KEYS.contains(&key.as_str()));
            if let Some(vault) = vault_path(&vars, &file, env) {
                return Ok(Some(Resolved {
                    vault,
                    source: ConfigSource::DotEnv(file),
                    vars,
                    ignored: ignored.into_keys().collect(),
                }));
            }
        }
        if env.home.as_deref() == Some(current) {
            break;
        }
        dir = current.parent();
    }
    Ok(None)
}

/// The vault path a config sets, with `~` expanded and a relative path
/// taken from the config file's folder.
fn vault_path(vars: &BTreeMap<String, String>, file: &Path, env: &Environment) -> Option<PathBuf> {
    let raw = vars.get(VAULT_KEY).filter(|v| !v.is_empty())?;
    let expanded = home_expanded(raw, env)?;
    let base = file.parent().unwrap_or(Path::new("."));
    Some(absolute(base, &expanded))
}

/// `raw` with a leading `~` and `$HOME` or `${HOME}` read as the home
/// folder, as a shell would; `None` for `~` alone without a home.
fn home_expanded(raw: &str, env: &Environment) -> Option<PathBuf> {
    Some(match (raw.strip_prefix("~/"), &env.home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if raw == "~" => env.home.clone()?,
        _ => {
            let home = env
                .home
                .as_ref()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default();
            PathBuf::from(raw.replace("${HOME}", &home).replace("$HOME", &home))
        }
    })
}

fn absolute(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// Config files larger than this are refused.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Whether something that is not a folder stands at `file`: a FIFO or
/// socket there is found, then refused by [`read_config_file`] with a
/// message, never opened in a blocking way.
fn is_config_file(file: &Path) -> bool {
    fs::metadata(file).is_ok_and(|meta| !meta.is_dir())
}

fn read_config_file(file: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let (text, _) = crate::safe_fs::read_text(file, MAX_CONFIG_BYTES)
        .map_err(|err| ConfigError(format!("cannot read {}: {}", file.display(), err.reason())))?;
    Ok(parse_env(&text))
}

/// Parses `KEY=value` lines; tolerates comments, blank lines, `export` and
/// quoted values.
pub(crate) fn parse_env(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            continue;
        }
        vars.insert(key.to_string(), unquote(value.trim()));
    }
    vars
}

fn unquote(value: &str) -> String {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote)
            && let Some(end) = inner.find(quote)
        {
            let inner = &inner[..end];
            return if quote == '"' {
                inner.replace("\\\"", "\"").replace("\\\\", "\\")
            } else {
                inner.to_string()
            };
        }
    }
    match value.find(" #") {
        Some(comment) => value[..comment].trim_end().to_string(),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_env_files_leniently() {
        let vars = parse_env(
            "# comment\nexport OBSIDIAN_VAULT_PATH=\"/a b/vault\"\nQMD_WIKI_COLLECTION=wiki # trailing\n\
             SINGLE='x # y'\nbroken line\n",
        );
        assert_eq!(vars["OBSIDIAN_VAULT_PATH"], "/a b/vault");
        assert_eq!(vars["QMD_WIKI_COLLECTION"], "wiki");
        assert_eq!(vars["SINGLE"], "x # y");
        assert_eq!(vars.len(), 3);
    }

    #[test]
    fn a_vault_flag_written_from_home_is_expanded_as_a_shell_would() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join("notes")).unwrap();
        let env = Environment {
            cwd: PathBuf::from("/"),
            home: Some(home.path().to_path_buf()),
            ..Environment::default()
        };
        for flag in ["~/notes", "$HOME/notes", "${HOME}/notes"] {
            let resolved = resolve(Some(Path::new(flag)), None, &env).unwrap();
            assert_eq!(resolved.vault, home.path().join("notes"), "{flag}");
        }
        assert_eq!(
            resolve(Some(Path::new("~")), None, &env).unwrap().vault,
            home.path()
        );
    }
}

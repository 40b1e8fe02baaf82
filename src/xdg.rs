//! The user's base folders, by the XDG Base Directory rules: the variable
//! when it is set and not empty, else the conventional folder under
//! `$HOME`. Every folder ctxpack keeps outside the vault (the index cache,
//! the model store, the global config) is found through here, so the rules
//! live in one place.

use std::path::{Path, PathBuf};

/// One of the base folders ctxpack uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    /// `${XDG_CACHE_HOME:-~/.cache}`
    Cache,
    /// `${XDG_DATA_HOME:-~/.local/share}`
    Data,
    /// `${XDG_CONFIG_HOME:-~/.config}`
    Config,
}

impl Base {
    /// The environment variable that names the folder.
    pub(crate) fn variable(self) -> &'static str {
        match self {
            Base::Cache => "XDG_CACHE_HOME",
            Base::Data => "XDG_DATA_HOME",
            Base::Config => "XDG_CONFIG_HOME",
        }
    }

    /// Where the folder is under the home folder when the variable is not
    /// set.
    fn under_home(self) -> &'static str {
        match self {
            Base::Cache => ".cache",
            Base::Data => ".local/share",
            Base::Config => ".config",
        }
    }

    /// The folder from given values of its variable and of `HOME`, so that
    /// callers resolving from a recorded environment (tests, the config's
    /// `Environment`) follow the same rule.
    pub(crate) fn folder_from(
        self,
        variable: Option<&Path>,
        home: Option<&Path>,
    ) -> Option<PathBuf> {
        match variable {
            Some(dir) => Some(dir.to_path_buf()),
            None => home.map(|home| home.join(self.under_home())),
        }
    }

    /// The folder from this process's environment (none when neither the
    /// variable nor `HOME` is set).
    pub(crate) fn resolve(self) -> Option<PathBuf> {
        self.folder_from(
            env_path(self.variable()).as_deref(),
            env_path("HOME").as_deref(),
        )
    }

    /// ctxpack's own folder inside this base folder.
    pub(crate) fn ctxpack(self) -> Option<PathBuf> {
        Some(self.resolve()?.join("ctxpack"))
    }
}

/// The path in the environment variable `key`; an empty value counts as
/// unset, as the XDG rules say.
pub(crate) fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_wins_over_the_home_folder() {
        let home = Path::new("/home/ada");
        assert_eq!(
            Base::Cache.folder_from(Some(Path::new("/var/cache/ada")), Some(home)),
            Some(PathBuf::from("/var/cache/ada"))
        );
        assert_eq!(
            Base::Cache.folder_from(None, Some(home)),
            Some(PathBuf::from("/home/ada/.cache"))
        );
        assert_eq!(
            Base::Data.folder_from(None, Some(home)),
            Some(PathBuf::from("/home/ada/.local/share"))
        );
        assert_eq!(
            Base::Config.folder_from(None, Some(home)),
            Some(PathBuf::from("/home/ada/.config"))
        );
        assert_eq!(Base::Data.folder_from(None, None), None);
    }
}

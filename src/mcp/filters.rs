//! The filter arguments `search` and `context_pack` share, as a tool call
//! spells them; the rules are the library's ([`crate::filter`]).

use serde::Deserialize;

use crate::filter::Filters;

/// One text or a list of them (`tags` took one tag before it took a list).
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
pub(crate) struct FilterArgs {
    #[serde(rename = "where")]
    #[schemars(
        description = "Property conditions, all of which must hold: 'KEY=VALUE', 'KEY!=VALUE', 'KEY>=VALUE', 'KEY<=VALUE', 'KEY~TEXT' (contains), 'KEY' (present), '!KEY' (absent); a list property matches if any item does; numbers and dates compare as such"
    )]
    pub where_: Option<Vec<String>>,
    #[schemars(
        description = "Only notes dated on or after this: a date ('2026-11-01') or a span back from now ('14d', '2w', '3m', '1y'); a note's date is its updated/modified/date/created property, a daily note's name, else its file time (none when most notes share it, as after a checkout)"
    )]
    pub since: Option<String>,
    #[schemars(description = "Only notes dated on or before this (a date or a span, as since)")]
    pub until: Option<String>,
    #[schemars(description = "Only notes under one of these folders")]
    pub folders: Option<Vec<String>>,
    #[schemars(
        description = "Only notes with one of these tags (or a tag nested under one); one tag or a list"
    )]
    pub tags: Option<OneOrMany>,
    #[schemars(description = "No note under any of these folders")]
    pub exclude_folders: Option<Vec<String>>,
    #[schemars(description = "No note with any of these tags (or a tag nested under one)")]
    pub exclude_tags: Option<Vec<String>>,
}

impl FilterArgs {
    /// The filters, with `folder` (the search tool's one folder) among the
    /// folders.
    pub(crate) fn filters(self, folder: Option<String>) -> Filters {
        let mut folders = self.folders.unwrap_or_default();
        folders.extend(folder);
        Filters {
            conditions: self.where_.unwrap_or_default(),
            since: self.since,
            until: self.until,
            folders,
            tags: self.tags.map(OneOrMany::into_vec).unwrap_or_default(),
            exclude_folders: self.exclude_folders.unwrap_or_default(),
            exclude_tags: self.exclude_tags.unwrap_or_default(),
        }
    }
}

//! What a face (the CLI, the MCP server, a library caller) asks of a vault,
//! checked once, here.
//!
//! A face fills a [`PackInput`] or [`SearchInput`] with what it was given
//! and calls `validate`: the ranges, the mutual exclusions, the query
//! lengths and the subquery limit are all decided by this module, and a
//! refusal is one [`RequestError`] whose message the face prints as it is.
//! The limits below are declared once; the clap help and the MCP schemas
//! read them.
//!
//! The faces spell parameters differently (`--graph-depth` on the command
//! line, `graph_depth` in a tool call), so an error carries the
//! [`Spelling`] of the face that asked and names parameters the way its
//! user wrote them. Rules whose message names no parameter read the same
//! in every face.

use std::fmt;

use chrono::{DateTime, Utc};

use crate::pack::{NoteAnchor, PackMode, PackOptions};
use crate::tokens::Tokenizer;

// The parts of a request a face fills in, so that it need not reach into
// the modules that define them.
pub use crate::parse::parse_datetime;
pub use crate::retrieve::RankOptions;
pub use crate::retrieve::fusion::Fusion;
pub use crate::retrieve::graph::{Direction, GraphOptions, NoDirection};
pub use crate::retrieve::query::{QueryTooLong, check_query_length};
pub use crate::session::{PackRequest, Ranker, SearchRequest};

pub use crate::pack::{DEFAULT_BUDGET, MAX_BUDGET};
pub use crate::retrieve::graph::MAX_DEPTH;
pub use crate::retrieve::query::MAX_QUERY_CHARS;

/// The most subqueries a pack takes.
pub const MAX_SUBQUERIES: usize = 5;
/// The most daily notes a pack adds.
pub const MAX_DAILIES: usize = 30;
/// How many results a search shows unless told.
pub const DEFAULT_SEARCH_LIMIT: usize = 10;
/// The most results a command-line search shows.
pub const MAX_SEARCH_LIMIT_CLI: usize = 1000;
/// The most results a search tool call returns: a tool result goes into
/// an agent's context, so it is capped lower than a terminal listing.
pub const MAX_SEARCH_LIMIT_MCP: usize = 100;

/// The time `SOURCE_DATE_EPOCH` fixes for packs (the reproducible-builds
/// convention: whole seconds since 1970), `None` when it is unset or
/// empty. Faces that take no explicit time (the MCP server) read it so that
/// a test or a reproducible pipeline gets byte-identical packs.
pub fn source_date_epoch() -> Result<Option<DateTime<Utc>>, EpochError> {
    let Some(epoch) = std::env::var_os("SOURCE_DATE_EPOCH").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    parse_epoch(&epoch.to_string_lossy()).map(Some)
}

fn parse_epoch(text: &str) -> Result<DateTime<Utc>, EpochError> {
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
        .ok_or_else(|| EpochError(text.to_string()))
}

/// A `SOURCE_DATE_EPOCH` that is not whole seconds since 1970 (the text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochError(pub String);

impl fmt::Display for EpochError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SOURCE_DATE_EPOCH '{}' is not a number of seconds",
            self.0
        )
    }
}

impl std::error::Error for EpochError {}

/// How a face names its parameters in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// Command-line flags: `--graph-depth`, `--subquery`.
    Flags,
    /// Field names, as MCP tool calls and library callers write them:
    /// `graph_depth`, `subqueries`.
    Params,
}

/// Which text was too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryText {
    Topic,
    Subquery,
    SearchQuery,
}

/// The rule a request broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    Budget(usize),
    Dailies(usize),
    Depth(usize),
    GraphDepth(usize),
    Limit(usize),
    TooLong {
        text: QueryText,
        chars: usize,
    },
    /// No topic was given (and no note or recent).
    NoTopic,
    /// The topic given is blank.
    EmptyTopic,
    /// The search query given is blank.
    EmptyQuery,
    TooManySubqueries(usize),
    /// More than one of a topic, a note and recent.
    OneMode,
    /// The note's depth or include-self without a note.
    NoteOnly,
    /// Subqueries or a graph depth with a note.
    TopicOnlyWithNote,
    /// Subqueries with recent.
    SubqueriesWithRecent,
    /// Subqueries with the frontmatter ranker.
    SubqueriesNeedHybrid,
    /// A graph depth with recent.
    GraphDepthWithRecent,
    /// A graph depth or a note with the frontmatter ranker.
    NeedsHybrid,
    /// A map with a topic, a note, recent, subqueries, dailies, a graph
    /// depth, pins or notes to exclude.
    MapAlone,
    /// Pins without a topic.
    PinsNeedTopic,
    /// A filter that does not read (`--where`, `--since`, ...).
    Filter(crate::filter::FilterError),
    /// A query of exclusions only (`-term`, `-"a phrase"`): nothing to
    /// rank by.
    OnlyExclusions(QueryText),
}

/// A request refused, and why, in the words of the face that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    pub rule: Rule,
    pub spelling: Spelling,
}

impl RequestError {
    fn new(spelling: Spelling, rule: Rule) -> RequestError {
        RequestError { rule, spelling }
    }
}

impl std::error::Error for RequestError {}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.spelling == Spelling::Flags;
        let pick = |flag: &'static str, param: &'static str| if flags { flag } else { param };
        let range =
            |f: &mut fmt::Formatter<'_>, name: &str, low: usize, high: usize, unit: &str| {
                write!(f, "{name} must be between {low} and {high}{unit}, got ")
            };
        match &self.rule {
            Rule::Budget(n) => {
                range(
                    f,
                    pick("budget", "budget_tokens"),
                    1,
                    MAX_BUDGET,
                    pick(" tokens", ""),
                )?;
                write!(f, "{n}")
            }
            Rule::Dailies(n) => {
                range(f, pick("dailies", "recent_dailies"), 0, MAX_DAILIES, "")?;
                write!(f, "{n}")
            }
            // The command line's two depth flags share one value parser,
            // whose message says "depth" for both.
            Rule::Depth(n) => {
                range(f, "depth", 0, MAX_DEPTH, "")?;
                write!(f, "{n}")
            }
            Rule::GraphDepth(n) => {
                range(f, pick("depth", "graph_depth"), 0, MAX_DEPTH, "")?;
                write!(f, "{n}")
            }
            Rule::Limit(n) => {
                let high = if flags {
                    MAX_SEARCH_LIMIT_CLI
                } else {
                    MAX_SEARCH_LIMIT_MCP
                };
                range(f, "limit", 1, high, "")?;
                write!(f, "{n}")
            }
            Rule::TooLong { text, chars } => {
                let what = match text {
                    QueryText::Topic => pick("the topic", "query"),
                    QueryText::Subquery => pick("a --subquery", "a subquery"),
                    QueryText::SearchQuery => pick("the query", "query"),
                };
                write!(
                    f,
                    "{what} is {chars} characters long; at most {MAX_QUERY_CHARS} are accepted"
                )
            }
            Rule::NoTopic => f.write_str(pick(
                "a topic is required (or use --recent), e.g. ctxpack pack \"raft consensus\"",
                "query is required (or give a note, or set recent=true)",
            )),
            Rule::EmptyTopic => f.write_str(pick(
                "the topic is empty; give some words to pack, or use --recent",
                "query is required (or give a note, or set recent=true)",
            )),
            Rule::EmptyQuery => f.write_str(pick("the query is empty", "query is empty")),
            Rule::TooManySubqueries(n) => {
                write!(f, "at most {MAX_SUBQUERIES} subqueries, got {n}")
            }
            Rule::OneMode => f.write_str(pick(
                "give one of a topic, --note or --recent",
                "give one of note, query or recent=true",
            )),
            Rule::NoteOnly => f.write_str(pick(
                "--depth and --no-self need --note",
                "depth and include_self need a note",
            )),
            Rule::TopicOnlyWithNote => f.write_str(pick(
                "--subquery and --graph-depth are for topic packs, not --note",
                "subqueries and graph_depth are for query packs, not note",
            )),
            Rule::SubqueriesWithRecent => f.write_str(pick(
                "--subquery needs a topic pack with the hybrid ranker",
                "subqueries need a query, not recent=true",
            )),
            Rule::SubqueriesNeedHybrid => f.write_str(pick(
                "--subquery needs a topic pack with the hybrid ranker",
                "subqueries need the hybrid ranker",
            )),
            Rule::GraphDepthWithRecent => f.write_str(pick(
                "--graph-depth needs a topic, not --recent",
                "graph_depth needs a query, not recent=true",
            )),
            Rule::NeedsHybrid => f.write_str(pick(
                "--graph-depth and --note need the hybrid ranker",
                "graph_depth and note need the hybrid ranker",
            )),
            Rule::MapAlone => f.write_str(pick(
                "--map takes no topic, --note, --recent, --subquery, --dailies, --graph-depth, \
                 --pin, --exclude-note or filter",
                "map takes no query, note, recent, subqueries, recent_dailies, graph_depth, \
                 pins, exclude_seen or filter",
            )),
            Rule::PinsNeedTopic => f.write_str(pick(
                "--pin is for topic packs, not --note or --recent",
                "pins are for query packs, not note or recent=true",
            )),
            Rule::Filter(error) => f.write_str(&error.message(flags)),
            Rule::OnlyExclusions(text) => {
                let what = match text {
                    QueryText::Topic => pick("the topic", "query"),
                    QueryText::Subquery => pick("a --subquery", "a subquery"),
                    QueryText::SearchQuery => pick("the query", "query"),
                };
                write!(
                    f,
                    "{what} only excludes (-term, -\"a phrase\"); give at least one word or \"phrase\" to look for"
                )
            }
        }
    }
}

/// A pack as a face was asked for it, not yet checked.
#[derive(Clone, Debug)]
pub struct PackInput {
    pub spelling: Spelling,
    /// The topic; `None` when no words were given at all.
    pub topic: Option<String>,
    pub recent: bool,
    /// A note to pack the context around (resolved against the vault by
    /// [`crate::session::Session::anchor_note`] once it is open).
    pub note: Option<String>,
    /// Link hops around the note (default 1).
    pub depth: Option<usize>,
    /// Whether the note itself is packed (default yes).
    pub include_self: Option<bool>,
    pub subqueries: Vec<String>,
    pub graph_depth: usize,
    pub graph_direction: Direction,
    pub budget: usize,
    pub dailies: usize,
    pub tokenizer: Tokenizer,
    pub ranker: Ranker,
    pub backlinks: bool,
    pub generated_at: DateTime<Utc>,
    pub rank: RankOptions,
    // Issue 41, parts 5-8: what opens the pack, what stays out, how the
    // vault's text is marked, and the map.
    /// Notes every topic pack opens with, as given (`--pin`, `pins`).
    pub pins: Vec<String>,
    /// Notes left out of the pack, as given (`--exclude-note`; the MCP
    /// server adds what the session already received).
    pub exclude_notes: Vec<String>,
    /// Fence every page's vault text (`--fence`, `fence`).
    pub fence: bool,
    /// The vault map instead of pages (`--map`, `map`).
    pub map: bool,
    /// Which notes may enter the pack (spans read back from
    /// `generated_at`).
    pub filters: crate::filter::Filters,
}

impl PackInput {
    /// An input with every default: no topic yet, the default budget, the
    /// chars/4 counter, the hybrid ranker, backlinks on.
    pub fn new(spelling: Spelling, generated_at: DateTime<Utc>) -> PackInput {
        PackInput {
            spelling,
            topic: None,
            recent: false,
            note: None,
            depth: None,
            include_self: None,
            subqueries: Vec::new(),
            graph_depth: 0,
            graph_direction: Direction::Both,
            budget: DEFAULT_BUDGET,
            dailies: 0,
            tokenizer: Tokenizer::Chars4,
            ranker: Ranker::Hybrid,
            backlinks: true,
            generated_at,
            rank: RankOptions::new(generated_at),
            pins: Vec::new(),
            exclude_notes: Vec::new(),
            fence: false,
            map: false,
            filters: crate::filter::Filters::default(),
        }
    }

    /// The request, or the first rule it breaks. A note's path is kept as
    /// given (the session resolves it).
    pub fn validate(self) -> Result<PackRequest, RequestError> {
        let fail = |rule| Err(RequestError::new(self.spelling, rule));
        if !(1..=MAX_BUDGET).contains(&self.budget) {
            return fail(Rule::Budget(self.budget));
        }
        if let Some(topic) = &self.topic {
            check_length(self.spelling, QueryText::Topic, topic)?;
        }
        for subquery in &self.subqueries {
            check_length(self.spelling, QueryText::Subquery, subquery)?;
        }
        if self.subqueries.len() > MAX_SUBQUERIES {
            return fail(Rule::TooManySubqueries(self.subqueries.len()));
        }
        if self.dailies > MAX_DAILIES {
            return fail(Rule::Dailies(self.dailies));
        }
        if let Some(depth) = self.depth
            && depth > MAX_DEPTH
        {
            return fail(Rule::Depth(depth));
        }
        if self.graph_depth > MAX_DEPTH {
            return fail(Rule::GraphDepth(self.graph_depth));
        }
        if self.map
            && (self.topic.is_some()
                || self.recent
                || self.note.is_some()
                || !self.subqueries.is_empty()
                || self.dailies > 0
                || self.graph_depth > 0
                || !self.pins.is_empty()
                || !self.exclude_notes.is_empty()
                || !self.filters.is_empty())
        {
            return fail(Rule::MapAlone);
        }
        let filter = self
            .filters
            .resolve(self.generated_at)
            .map_err(|error| RequestError::new(self.spelling, Rule::Filter(error)))?;
        if let Some(topic) = &self.topic {
            check_syntax(self.spelling, QueryText::Topic, topic)?;
        }
        for subquery in &self.subqueries {
            check_syntax(self.spelling, QueryText::Subquery, subquery)?;
        }
        let modes = [self.topic.is_some(), self.recent, self.note.is_some()]
            .iter()
            .filter(|m| **m)
            .count();
        if modes > 1 {
            return fail(Rule::OneMode);
        }
        if self.note.is_some() && (!self.subqueries.is_empty() || self.graph_depth > 0) {
            return fail(Rule::TopicOnlyWithNote);
        }
        if self.note.is_none() && (self.depth.is_some() || self.include_self.is_some()) {
            return fail(Rule::NoteOnly);
        }
        if !self.pins.is_empty() && (self.recent || self.note.is_some()) {
            return fail(Rule::PinsNeedTopic);
        }
        let mode = if self.map {
            PackMode::Map
        } else if let Some(path) = &self.note {
            PackMode::Note(NoteAnchor {
                path: path.clone(),
                depth: self.depth.unwrap_or(1),
                include_self: self.include_self.unwrap_or(true),
            })
        } else if self.recent {
            PackMode::Recent
        } else {
            match &self.topic {
                None => return fail(Rule::NoTopic),
                Some(topic) if topic.trim().is_empty() => return fail(Rule::EmptyTopic),
                // A tool call's query is trimmed; a command line's topic is
                // kept as typed (it is printed as given in the pack's title).
                Some(topic) if self.spelling == Spelling::Params => {
                    PackMode::Topic(topic.trim().to_string())
                }
                Some(topic) => PackMode::Topic(topic.clone()),
            }
        };
        let request = PackRequest {
            mode,
            ranker: self.ranker,
            rank: self.rank,
            options: PackOptions {
                dailies: self.dailies,
                graph: GraphOptions {
                    depth: self.graph_depth,
                    direction: self.graph_direction,
                },
                fence: self.fence,
                pins: self.pins,
                exclude: self.exclude_notes,
                filtered: !filter.is_empty(),
                ..PackOptions::new(self.budget, self.tokenizer, self.generated_at)
            },
            subqueries: self.subqueries,
            backlinks: self.backlinks,
            filter,
        };
        check_pack(&request, self.spelling)?;
        Ok(request)
    }
}

/// The rules a built [`PackRequest`] keeps whoever built it: the limits,
/// and which options each mode takes (a recent pack takes no subqueries
/// and no graph depth, which it would otherwise silently ignore).
pub fn check_pack(request: &PackRequest, spelling: Spelling) -> Result<(), RequestError> {
    let fail = |rule| Err(RequestError::new(spelling, rule));
    let options = &request.options;
    if !(1..=MAX_BUDGET).contains(&options.budget) {
        return fail(Rule::Budget(options.budget));
    }
    if let PackMode::Topic(topic) = &request.mode {
        check_length(spelling, QueryText::Topic, topic)?;
        if topic.trim().is_empty() {
            return fail(Rule::EmptyTopic);
        }
    }
    for subquery in &request.subqueries {
        check_length(spelling, QueryText::Subquery, subquery)?;
    }
    if request.subqueries.len() > MAX_SUBQUERIES {
        return fail(Rule::TooManySubqueries(request.subqueries.len()));
    }
    if options.dailies > MAX_DAILIES {
        return fail(Rule::Dailies(options.dailies));
    }
    if let PackMode::Note(anchor) = &request.mode
        && anchor.depth > MAX_DEPTH
    {
        return fail(Rule::Depth(anchor.depth));
    }
    if options.graph.depth > MAX_DEPTH {
        return fail(Rule::GraphDepth(options.graph.depth));
    }
    let graph = options.graph.depth > 0;
    match &request.mode {
        PackMode::Note(_) if graph || !request.subqueries.is_empty() => {
            return fail(Rule::TopicOnlyWithNote);
        }
        PackMode::Recent if !request.subqueries.is_empty() => {
            return fail(Rule::SubqueriesWithRecent);
        }
        PackMode::Recent if graph => return fail(Rule::GraphDepthWithRecent),
        PackMode::Map
            if graph
                || !request.subqueries.is_empty()
                || options.dailies > 0
                || !options.pins.is_empty()
                || !options.exclude.is_empty() =>
        {
            return fail(Rule::MapAlone);
        }
        PackMode::Recent | PackMode::Note(_) if !options.pins.is_empty() => {
            return fail(Rule::PinsNeedTopic);
        }
        _ => {}
    }
    if request.ranker == Ranker::Frontmatter {
        if !request.subqueries.is_empty() {
            return fail(Rule::SubqueriesNeedHybrid);
        }
        if graph || matches!(request.mode, PackMode::Note(_)) {
            return fail(Rule::NeedsHybrid);
        }
    }
    Ok(())
}

/// A search as a face was asked for it, not yet checked.
#[derive(Clone, Debug)]
pub struct SearchInput {
    pub spelling: Spelling,
    pub query: String,
    pub limit: usize,
    pub rank: RankOptions,
    /// Which notes may be found (spans read back from `rank.now`).
    pub filters: crate::filter::Filters,
}

impl SearchInput {
    /// The request, or the first rule it breaks.
    pub fn validate(self) -> Result<SearchRequest, RequestError> {
        let fail = |rule| Err(RequestError::new(self.spelling, rule));
        let high = match self.spelling {
            Spelling::Flags => MAX_SEARCH_LIMIT_CLI,
            Spelling::Params => MAX_SEARCH_LIMIT_MCP,
        };
        if !(1..=high).contains(&self.limit) {
            return fail(Rule::Limit(self.limit));
        }
        if self.query.trim().is_empty() {
            return fail(Rule::EmptyQuery);
        }
        check_length(self.spelling, QueryText::SearchQuery, &self.query)?;
        check_syntax(self.spelling, QueryText::SearchQuery, &self.query)?;
        let filter = self
            .filters
            .resolve(self.rank.now)
            .map_err(|error| RequestError::new(self.spelling, Rule::Filter(error)))?;
        Ok(SearchRequest {
            query: self.query,
            limit: self.limit,
            rank: self.rank,
            filter,
        })
    }
}

/// Refuses a query that only excludes: it has nothing to rank by.
fn check_syntax(spelling: Spelling, text: QueryText, query: &str) -> Result<(), RequestError> {
    if crate::retrieve::syntax::QuerySyntax::parse(query).only_exclusions() {
        return Err(RequestError::new(spelling, Rule::OnlyExclusions(text)));
    }
    Ok(())
}

fn check_length(spelling: Spelling, text: QueryText, query: &str) -> Result<(), RequestError> {
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(RequestError::new(spelling, Rule::TooLong { text, chars }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_is_whole_seconds_or_a_clear_refusal() {
        assert_eq!(
            parse_epoch(" 1780272000 ").unwrap().to_rfc3339(),
            "2026-06-01T00:00:00+00:00"
        );
        assert_eq!(
            parse_epoch("2026-06-01").unwrap_err().to_string(),
            "SOURCE_DATE_EPOCH '2026-06-01' is not a number of seconds"
        );
    }

    fn at() -> DateTime<Utc> {
        "2026-01-02T03:04:05Z".parse().unwrap()
    }

    fn topic(spelling: Spelling, text: &str) -> PackInput {
        PackInput {
            topic: Some(text.to_string()),
            ..PackInput::new(spelling, at())
        }
    }

    fn recent(spelling: Spelling) -> PackInput {
        PackInput {
            recent: true,
            ..PackInput::new(spelling, at())
        }
    }

    fn note(spelling: Spelling) -> PackInput {
        PackInput {
            note: Some("concepts/raft.md".into()),
            ..PackInput::new(spelling, at())
        }
    }

    /// The message of `input`'s refusal, in both spellings.
    fn refused(input: impl Fn(Spelling) -> PackInput) -> (String, String) {
        let message = |spelling| input(spelling).validate().unwrap_err().to_string();
        (message(Spelling::Flags), message(Spelling::Params))
    }

    fn pair(flags: &str, params: &str) -> (String, String) {
        (flags.to_string(), params.to_string())
    }

    #[test]
    fn a_valid_topic_pack_carries_every_option() {
        let request = PackInput {
            subqueries: vec!["who".into()],
            graph_depth: 2,
            graph_direction: Direction::Out,
            budget: 1234,
            dailies: 3,
            tokenizer: Tokenizer::O200k,
            backlinks: false,
            ..topic(Spelling::Params, "  raft  ")
        }
        .validate()
        .unwrap();
        assert_eq!(request.mode, PackMode::Topic("raft".into()));
        assert_eq!(request.options.budget, 1234);
        assert_eq!(request.options.dailies, 3);
        assert_eq!(request.options.tokenizer, Tokenizer::O200k);
        assert_eq!(request.options.graph.depth, 2);
        assert_eq!(request.options.graph.direction, Direction::Out);
        assert_eq!(request.options.generated_at, at());
        assert_eq!(request.subqueries, vec!["who".to_string()]);
        assert!(!request.backlinks);
        // The command line keeps its topic as typed.
        let typed = topic(Spelling::Flags, "  raft  ").validate().unwrap();
        assert_eq!(typed.mode, PackMode::Topic("  raft  ".into()));
    }

    #[test]
    fn a_note_pack_takes_its_depth_and_self() {
        let request = PackInput {
            depth: Some(2),
            include_self: Some(false),
            ..note(Spelling::Flags)
        }
        .validate()
        .unwrap();
        assert_eq!(
            request.mode,
            PackMode::Note(NoteAnchor {
                path: "concepts/raft.md".into(),
                depth: 2,
                include_self: false,
            })
        );
        let defaults = note(Spelling::Params).validate().unwrap();
        assert_eq!(
            defaults.mode,
            PackMode::Note(NoteAnchor {
                path: "concepts/raft.md".into(),
                depth: 1,
                include_self: true,
            })
        );
    }

    #[test]
    fn the_budget_is_between_1_and_the_maximum() {
        for budget in [0, MAX_BUDGET + 1] {
            let got = refused(|s| PackInput {
                budget,
                ..topic(s, "raft")
            });
            assert_eq!(
                got,
                pair(
                    &format!("budget must be between 1 and 100000 tokens, got {budget}"),
                    &format!("budget_tokens must be between 1 and 100000, got {budget}"),
                )
            );
        }
        assert!(
            PackInput {
                budget: MAX_BUDGET,
                ..topic(Spelling::Params, "raft")
            }
            .validate()
            .is_ok_and(|r| r.options.budget == MAX_BUDGET)
        );
    }

    #[test]
    fn dailies_are_at_most_30() {
        let got = refused(|s| PackInput {
            dailies: 31,
            ..recent(s)
        });
        assert_eq!(
            got,
            pair(
                "dailies must be between 0 and 30, got 31",
                "recent_dailies must be between 0 and 30, got 31"
            )
        );
    }

    #[test]
    fn depths_are_at_most_the_graph_maximum() {
        let got = refused(|s| PackInput {
            depth: Some(4),
            ..note(s)
        });
        assert_eq!(
            got,
            pair(
                "depth must be between 0 and 3, got 4",
                "depth must be between 0 and 3, got 4"
            )
        );
        let got = refused(|s| PackInput {
            graph_depth: 4,
            ..topic(s, "raft")
        });
        assert_eq!(
            got,
            pair(
                "depth must be between 0 and 3, got 4",
                "graph_depth must be between 0 and 3, got 4"
            )
        );
    }

    #[test]
    fn a_topic_and_subqueries_have_a_length_limit() {
        let long = "x".repeat(MAX_QUERY_CHARS + 1);
        let got = refused(|s| topic(s, &long));
        assert_eq!(
            got,
            pair(
                "the topic is 4097 characters long; at most 4096 are accepted",
                "query is 4097 characters long; at most 4096 are accepted"
            )
        );
        let got = refused(|s| PackInput {
            subqueries: vec![long.clone()],
            ..topic(s, "raft")
        });
        assert_eq!(
            got,
            pair(
                "a --subquery is 4097 characters long; at most 4096 are accepted",
                "a subquery is 4097 characters long; at most 4096 are accepted"
            )
        );
    }

    #[test]
    fn at_most_five_subqueries_in_every_face() {
        let got = refused(|s| PackInput {
            subqueries: vec!["q".into(); MAX_SUBQUERIES + 1],
            ..topic(s, "raft")
        });
        assert_eq!(
            got,
            pair("at most 5 subqueries, got 6", "at most 5 subqueries, got 6")
        );
    }

    #[test]
    fn a_pack_has_one_mode() {
        for both in [
            |s| PackInput {
                recent: true,
                ..topic(s, "raft")
            },
            |s| PackInput {
                recent: true,
                ..note(s)
            },
            |s| PackInput {
                topic: Some("raft".into()),
                ..note(s)
            },
        ] as [fn(Spelling) -> PackInput; 3]
        {
            assert_eq!(
                refused(both),
                pair(
                    "give one of a topic, --note or --recent",
                    "give one of note, query or recent=true"
                )
            );
        }
    }

    #[test]
    fn a_topic_is_required_and_not_blank() {
        assert_eq!(
            refused(|s| PackInput::new(s, at())),
            pair(
                "a topic is required (or use --recent), e.g. ctxpack pack \"raft consensus\"",
                "query is required (or give a note, or set recent=true)"
            )
        );
        assert_eq!(
            refused(|s| topic(s, " \t ")),
            pair(
                "the topic is empty; give some words to pack, or use --recent",
                "query is required (or give a note, or set recent=true)"
            )
        );
    }

    #[test]
    fn depth_and_self_need_a_note() {
        let got = refused(|s| PackInput {
            include_self: Some(false),
            ..topic(s, "raft")
        });
        assert_eq!(
            got,
            pair(
                "--depth and --no-self need --note",
                "depth and include_self need a note"
            )
        );
    }

    #[test]
    fn a_note_pack_takes_no_subqueries_or_graph_depth() {
        let want = pair(
            "--subquery and --graph-depth are for topic packs, not --note",
            "subqueries and graph_depth are for query packs, not note",
        );
        assert_eq!(
            refused(|s| PackInput {
                graph_depth: 1,
                ..note(s)
            }),
            want
        );
        assert_eq!(
            refused(|s| PackInput {
                subqueries: vec!["q".into()],
                ..note(s)
            }),
            want
        );
    }

    #[test]
    fn a_recent_pack_takes_no_subqueries() {
        let got = refused(|s| PackInput {
            subqueries: vec!["q".into()],
            ..recent(s)
        });
        assert_eq!(
            got,
            pair(
                "--subquery needs a topic pack with the hybrid ranker",
                "subqueries need a query, not recent=true"
            )
        );
    }

    /// The inconsistency the faces had: the library packed `--recent` with
    /// a graph depth and ignored the depth. Now every face refuses it.
    #[test]
    fn a_recent_pack_takes_no_graph_depth() {
        let got = refused(|s| PackInput {
            graph_depth: 1,
            ..recent(s)
        });
        assert_eq!(
            got,
            pair(
                "--graph-depth needs a topic, not --recent",
                "graph_depth needs a query, not recent=true"
            )
        );
    }

    #[test]
    fn the_frontmatter_ranker_takes_no_subqueries_graph_or_note() {
        assert_eq!(
            refused(|s| PackInput {
                ranker: Ranker::Frontmatter,
                subqueries: vec!["q".into()],
                ..topic(s, "raft")
            }),
            pair(
                "--subquery needs a topic pack with the hybrid ranker",
                "subqueries need the hybrid ranker"
            )
        );
        let want = pair(
            "--graph-depth and --note need the hybrid ranker",
            "graph_depth and note need the hybrid ranker",
        );
        assert_eq!(
            refused(|s| PackInput {
                ranker: Ranker::Frontmatter,
                graph_depth: 1,
                ..topic(s, "raft")
            }),
            want
        );
        assert_eq!(
            refused(|s| PackInput {
                ranker: Ranker::Frontmatter,
                ..note(s)
            }),
            want
        );
    }

    /// A request built by hand (the library's own callers) is held to the
    /// same rules when a session packs it.
    #[test]
    fn a_built_request_is_checked_too() {
        let mut request = recent(Spelling::Params).validate().unwrap();
        assert_eq!(check_pack(&request, Spelling::Params), Ok(()));
        request.options.graph.depth = 2;
        assert_eq!(
            check_pack(&request, Spelling::Params)
                .unwrap_err()
                .to_string(),
            "graph_depth needs a query, not recent=true"
        );
        request.options.graph.depth = 0;
        request.options.budget = 0;
        assert_eq!(
            check_pack(&request, Spelling::Params)
                .unwrap_err()
                .to_string(),
            "budget_tokens must be between 1 and 100000, got 0"
        );
    }

    #[test]
    fn pins_exclusions_and_the_fence_reach_the_options() {
        let request = PackInput {
            pins: vec!["a.md".into(), "b.md".into()],
            exclude_notes: vec!["c.md".into()],
            fence: true,
            ..topic(Spelling::Flags, "raft")
        }
        .validate()
        .unwrap();
        assert_eq!(request.options.pins, vec!["a.md", "b.md"]);
        assert_eq!(request.options.exclude, vec!["c.md"]);
        assert!(request.options.fence);
        // Notes may be left out of every kind of pack.
        let recent = PackInput {
            exclude_notes: vec!["c.md".into()],
            ..recent(Spelling::Params)
        }
        .validate()
        .unwrap();
        assert_eq!(recent.options.exclude, vec!["c.md"]);
        let map = PackInput {
            map: true,
            fence: true,
            ..PackInput::new(Spelling::Params, at())
        }
        .validate()
        .unwrap();
        assert_eq!(map.mode, PackMode::Map);
        assert!(map.options.fence);
    }

    #[test]
    fn a_map_takes_nothing_that_chooses_pages() {
        let want = pair(
            "--map takes no topic, --note, --recent, --subquery, --dailies, --graph-depth, \
             --pin, --exclude-note or filter",
            "map takes no query, note, recent, subqueries, recent_dailies, graph_depth, pins, \
             exclude_seen or filter",
        );
        fn map(s: Spelling) -> PackInput {
            PackInput {
                map: true,
                ..PackInput::new(s, at())
            }
        }
        for input in [
            |s| PackInput {
                topic: Some("raft".into()),
                ..map(s)
            },
            |s| PackInput {
                recent: true,
                ..map(s)
            },
            |s| PackInput {
                note: Some("a.md".into()),
                ..map(s)
            },
            |s| PackInput {
                dailies: 2,
                ..map(s)
            },
            |s| PackInput {
                pins: vec!["a.md".into()],
                ..map(s)
            },
            |s| PackInput {
                exclude_notes: vec!["a.md".into()],
                ..map(s)
            },
            |s| PackInput {
                filters: crate::filter::Filters {
                    folders: vec!["notes".into()],
                    ..Default::default()
                },
                ..map(s)
            },
        ] as [fn(Spelling) -> PackInput; 7]
        {
            assert_eq!(refused(input), want);
        }
        // A request built by hand is held to it too.
        let mut request = map(Spelling::Params).validate().unwrap();
        request.options.pins = vec!["a.md".into()];
        assert_eq!(
            check_pack(&request, Spelling::Params)
                .unwrap_err()
                .to_string(),
            want.1
        );
    }

    #[test]
    fn pins_are_for_topic_packs() {
        let want = pair(
            "--pin is for topic packs, not --note or --recent",
            "pins are for query packs, not note or recent=true",
        );
        assert_eq!(
            refused(|s| PackInput {
                pins: vec!["a.md".into()],
                ..recent(s)
            }),
            want
        );
        assert_eq!(
            refused(|s| PackInput {
                pins: vec!["a.md".into()],
                ..note(s)
            }),
            want
        );
    }

    fn search(spelling: Spelling, query: &str, limit: usize) -> SearchInput {
        SearchInput {
            spelling,
            query: query.into(),
            limit,
            rank: RankOptions::new(at()),
            filters: crate::filter::Filters::default(),
        }
    }

    #[test]
    fn a_search_limit_is_capped_per_face() {
        let message = |s, limit| search(s, "raft", limit).validate().unwrap_err().to_string();
        assert_eq!(
            message(Spelling::Flags, 0),
            "limit must be between 1 and 1000, got 0"
        );
        assert_eq!(
            message(Spelling::Params, 101),
            "limit must be between 1 and 100, got 101"
        );
        let request = search(Spelling::Flags, "raft", 1000).validate().unwrap();
        assert_eq!((request.query.as_str(), request.limit), ("raft", 1000));
    }

    #[test]
    fn a_search_query_is_not_blank_or_too_long() {
        let message = |s, q: &str| search(s, q, 10).validate().unwrap_err().to_string();
        assert_eq!(message(Spelling::Flags, "  "), "the query is empty");
        assert_eq!(message(Spelling::Params, "  "), "query is empty");
        let long = "y".repeat(MAX_QUERY_CHARS + 1);
        assert_eq!(
            message(Spelling::Flags, &long),
            "the query is 4097 characters long; at most 4096 are accepted"
        );
        assert_eq!(
            message(Spelling::Params, &long),
            "query is 4097 characters long; at most 4096 are accepted"
        );
    }
}

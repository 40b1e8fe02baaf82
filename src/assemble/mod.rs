//! Layered assembly (seed 003): the context one agent of a pipeline gets
//! for one unit of a project, built from a recipe.
//!
//! Every pack is the system statement, then a baseline shared byte for byte
//! by all agents of the unit (the baseline agent's L2 and L1 items and the
//! unit's outline entry, seen with that agent's field visibility), then the
//! agent's identity, the scenario's function instruction, the agent's
//! increment (only what the baseline lacks), this turn's input, and an
//! omission report. See `docs/assemble.md`.

mod doc;
mod error;
mod layout;
pub(crate) mod project;
pub(crate) mod recipe;
pub(crate) mod schema;
mod sources;
mod stored;
mod styled;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use self::doc::{Doc, Outline};
pub(crate) use self::error::ProjectError;
use self::layout::{Form, MeasureCache, Segment};
use self::project::{Bindings, Project, ReadError};
use self::recipe::{Keep, Layer, Placeholders, RECIPE_FILE, Recipe, Requirement, SourceKind};
use self::schema::Schemas;
use self::sources::{Context, Gathered, Hidden, Item, Reason};
use crate::pack::style::Style;
use crate::tokens::Tokenizer;

pub(crate) use self::sources::Omitted;

/// Budgets outside this range are refused (the same bound as `pack`).
pub(crate) const MAX_BUDGET: usize = crate::pack::MAX_BUDGET;
/// The budget when none is given.
pub(crate) const DEFAULT_BUDGET: usize = 16_000;

/// What the caller asks for.
#[derive(Clone, Debug, Default)]
pub struct AssembleRequest {
    pub work: String,
    pub scenario: String,
    pub unit: i64,
    pub intent: String,
    pub agent: Option<String>,
    pub budget: usize,
    pub tokenizer: Tokenizer,
    pub selection: Option<String>,
    pub expected_revision: Option<String>,
    pub comments: Vec<String>,
    /// The object under review, relative to the project root.
    pub candidate: Option<String>,
    /// New references the user names; they join the L3 query.
    pub references: Vec<String>,
    /// Another recipe than `meta/recipe.yaml`.
    pub recipe: Option<PathBuf>,
    /// Where library indexes live (default: the cache folder).
    pub index_dir: Option<PathBuf>,
    /// Write the pack to the recipe's review file.
    pub write_review: bool,
    /// Rank library cards from a PostgreSQL store, where each library is
    /// synced under `<vault id>/<library folder>`.
    pub store: Option<crate::session::StoreTarget>,
    /// The printed layout: markdown (the seed's), xml or json.
    pub style: Style,
}

/// Why assembly failed: the request (exit 2) or the project (exit 1), or
/// (for [`unbound_libraries`]) a project that cannot be served.
#[derive(Debug)]
pub enum AssembleError {
    Usage(String),
    Project(String),
    /// The writing project at `root` cannot be served: its recipe cannot
    /// be read or parsed (`problem`), so which libraries no work binds is
    /// unknown. The request's fault, as a usage error is (exit 2).
    Unservable {
        root: PathBuf,
        problem: String,
    },
}

impl std::fmt::Display for AssembleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AssembleError::Usage(m) | AssembleError::Project(m) => f.write_str(m),
            AssembleError::Unservable { root, problem } => write!(
                f,
                "{} cannot be served: {problem}; which libraries no work binds and which fields \
                 its schemas hide are unknown, so nothing is served until that is fixed",
                root.display()
            ),
        }
    }
}

impl std::error::Error for AssembleError {}

fn usage(message: impl std::fmt::Display) -> AssembleError {
    AssembleError::Usage(message.to_string())
}

fn project_error(message: impl std::fmt::Display) -> AssembleError {
    AssembleError::Project(message.to_string())
}

/// One secret redacted in a file `assemble` read.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RedactedSecret {
    pub path: String,
    pub line: u32,
    pub kind: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Assembly {
    pub recipe: String,
    pub work: String,
    pub unit: i64,
    pub scenario: String,
    pub purpose: String,
    pub agent: String,
    /// The purpose whose `aiContext` rules the agent reads with.
    pub visibility: String,
    pub tokenizer: Tokenizer,
    pub budget: usize,
    pub tokens: usize,
    pub baseline: BaselineReport,
    /// Bytes of the prefix every agent of the unit shares (system + baseline).
    pub shared_prefix_bytes: usize,
    pub segments: Vec<SegmentReport>,
    pub items: Vec<ItemReport>,
    pub hidden_fields: Vec<HiddenField>,
    #[serde(rename = "omittedSources")]
    pub omitted_sources: Vec<Omitted>,
    /// Secrets the privacy policy redacted in the files read (never the
    /// secret itself).
    pub redactions: Vec<RedactedSecret>,
    pub warnings: Vec<String>,
    pub review_file: Option<String>,
    /// Every project path read or listed, in order.
    pub read: Vec<String>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct BaselineReport {
    pub bytes: usize,
    pub tokens: usize,
    pub blake3: String,
    /// False when this agent's fixed parts forced a smaller baseline.
    pub shared: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SegmentReport {
    pub name: &'static str,
    pub tokens: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct ItemReport {
    pub key: String,
    pub layer: Layer,
    pub segment: &'static str,
    pub form: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct HiddenField {
    #[serde(rename = "type")]
    pub type_name: String,
    pub field: String,
    pub rule: String,
    pub purpose: String,
    pub count: usize,
    pub entities: Vec<String>,
}

/// The fixed, never-cut text of a pack around the baseline and increment.
struct Frame {
    system: String,
    identity: String,
    chain: String,
    volatile: String,
}

/// Assembles the pack for `request` in the project at `root`.
pub fn assemble(root: &Path, request: &AssembleRequest) -> Result<Assembly, AssembleError> {
    let mut project = Project::open(root).map_err(usage)?;
    project.set_policy(
        crate::privacy::Policy::load_without_project(project.root())
            .map_err(|err| usage(err.to_string()))?,
    );
    assemble_project(&mut project, request, Review::InProject).map(|(assembly, _)| assembly)
}

/// Where the review copy goes.
#[derive(Clone, Copy)]
enum Review<'a> {
    /// The recipe's `review_file`, in the project.
    InProject,
    /// The recipe's `review_file`, under this folder instead (a project read
    /// from the store is never written to).
    Under(Option<&'a Path>),
}

/// How many times a pack from the store is assembled again when a sync
/// committed while it was being assembled.
const STORE_ATTEMPTS: usize = 3;

/// Assembles the pack for `request` from the project the store at
/// `request.store` holds under its vault id, reading one committed sync:
/// the same pack, byte for byte, as from the folder that was synced. The
/// review copy is written only under `review_dir`, never into the store.
pub(crate) fn assemble_from_store(
    request: &AssembleRequest,
    review_dir: Option<&Path>,
) -> Result<Assembly, AssembleError> {
    let Some(target) = &request.store else {
        return Err(usage("assembling from the store needs --store URL"));
    };
    for _ in 0..STORE_ATTEMPTS {
        let opening = crate::timings::phase("assemble: open the store's project");
        let Some(snapshot) =
            crate::store::postgres::project::ProjectSnapshot::open(&target.url, &target.vault)
                .map_err(|err| store_error(&err))?
        else {
            return Err(usage(no_stored_project(target)));
        };
        let files = stored::StoreFiles::new(snapshot).map_err(project_error)?;
        drop(opening);
        let mut project = Project::from_store(files);
        let (assembly, seen) = assemble_project(&mut project, request, Review::Under(review_dir))?;
        // L3 was ranked from the libraries' own vaults, read outside this
        // snapshot: the pack stands only if they are at the generation the
        // snapshot holds (a sync commits a project and its libraries at once).
        let names: Vec<String> = seen.iter().map(|(name, _)| name.clone()).collect();
        let held = match project.store_files() {
            Some(files) => files
                .snapshot()
                .generations(&names)
                .map_err(|err| store_error(&err))?,
            None => Vec::new(),
        };
        let mut seen = seen;
        seen.sort();
        if held == seen {
            return Ok(assembly);
        }
    }
    Err(project_error(format!(
        "the store {} changed during each of {STORE_ATTEMPTS} attempts to assemble this pack;          try again when its sync is done",
        target.url
    )))
}

/// Whether the store at `target` holds a synced project under its vault id.
pub(crate) fn store_has_project(
    target: &crate::session::StoreTarget,
) -> Result<bool, AssembleError> {
    crate::store::postgres::project::ProjectSnapshot::open(&target.url, &target.vault)
        .map(|snapshot| snapshot.is_some())
        .map_err(|err| store_error(&err))
}

fn no_stored_project(target: &crate::session::StoreTarget) -> String {
    format!(
        "the store {} holds no project '{}': sync one with `ctxpack index --store URL --vault          PROJECT --vault-id {}` (a folder with meta/recipe.yaml)",
        target.url, target.vault, target.vault
    )
}

/// A store problem: configuration (exit 2) or the server (exit 1).
fn store_error(err: &anyhow::Error) -> AssembleError {
    match crate::session::upkeep::store_usage_message(err) {
        Some(message) => usage(message),
        None => project_error(format!("{err:#}")),
    }
}

/// A project's tree for the store, and the libraries (name, folder) some
/// work binds.
pub(crate) type ProjectImage = (
    Vec<crate::store::postgres::project::ProjectEntry>,
    Vec<(String, String)>,
);

/// The image of the writing project at `root` for the store, and the
/// libraries some work binds (see `stored::image`); `None` when `root` has
/// no recipe.
pub(crate) fn project_image(
    root: &Path,
    policy: &crate::privacy::Policy,
) -> Result<Option<ProjectImage>, ProjectError> {
    Ok(stored::image(root, policy)?.map(|image| (image.entries, image.libraries)))
}

/// The libraries of [`project_image`], without reading the project's tree.
pub(crate) fn project_libraries(
    root: &Path,
    policy: &crate::privacy::Policy,
) -> Result<Option<Vec<(String, String)>>, ProjectError> {
    stored::synced_libraries(root, policy)
}

/// The library vaults (name, generation) the ranking read, with the pack.
type Seen = Vec<(String, i64)>;

fn assemble_project(
    project: &mut Project,
    request: &AssembleRequest,
    review: Review<'_>,
) -> Result<(Assembly, Seen), AssembleError> {
    let recipe = load_recipe(project, request)?;
    if request.budget == 0 || request.budget > MAX_BUDGET {
        return Err(usage(format!(
            "budget must be between 1 and {MAX_BUDGET} tokens, not {}",
            request.budget
        )));
    }
    if let Some(message) = styled::unsupported(request.style) {
        return Err(usage(message));
    }
    if request.intent.trim().is_empty() {
        return Err(usage(
            "the intent is empty: say what this turn should do (--intent)",
        ));
    }
    if request.work.trim().is_empty() || !project::is_plain_name(&request.work) {
        return Err(usage(format!(
            "bad work name '{}': a work is one folder name (no '/', '\\', '..' or absolute path)",
            request.work
        )));
    }
    if request.unit < 1 {
        return Err(usage(format!(
            "the unit must be 1 or more, not {}",
            request.unit
        )));
    }
    let scenario = recipe.scenarios.get(&request.scenario).ok_or_else(|| {
        usage(format!(
            "unknown scenario '{}' (this recipe has: {})",
            request.scenario,
            recipe
                .scenarios
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let agent_name = request
        .agent
        .clone()
        .unwrap_or_else(|| scenario.agent.clone());
    let agent = recipe.agents.get(&agent_name).ok_or_else(|| {
        usage(format!(
            "unknown agent '{agent_name}' (this recipe has: {})",
            recipe.agents.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if !agent.purposes.contains(&scenario.purpose) {
        return Err(usage(format!(
            "agent '{agent_name}' does not serve scenario '{}' (purpose {}); it serves {}",
            request.scenario,
            scenario.purpose,
            agent.purposes.join(", ")
        )));
    }
    for requirement in &scenario.requires {
        let given = match requirement {
            Requirement::Selection => request
                .selection
                .as_deref()
                .is_some_and(|s| !s.trim().is_empty()),
            Requirement::ExpectedRevision => request.expected_revision.is_some(),
            Requirement::Candidate => request.candidate.is_some(),
        };
        if !given {
            return Err(usage(format!(
                "scenario '{}' requires {}",
                request.scenario,
                requirement.flag()
            )));
        }
    }
    if let Some(candidate) = &request.candidate {
        project.resolve(candidate).map_err(usage)?;
    }

    let placeholders = Placeholders {
        work: &request.work,
        unit: request.unit,
        agent: &agent_name,
        scenario: &request.scenario,
        purpose: &scenario.purpose,
    };
    let expand = |template: &str| recipe::expand(template, &placeholders).map_err(project_error);

    // The authorization gate: every library is closed while the bindings
    // are read (they may not lie in one), then the unbound ones stay closed
    // for every later read, whatever path or symlink leads there.
    let libraries = project
        .library_folders(&recipe.libraries_dir)
        .map_err(project_error)?;
    project.close_libraries(&libraries.iter().collect::<Vec<_>>());
    let bindings_path = expand(&recipe.bindings)?;
    let bindings = match project.read_optional(&bindings_path) {
        Ok(Some(text)) => Bindings::parse(&bindings_path, &text).map_err(usage)?,
        Ok(None) => Bindings::default(),
        Err(ReadError::NotAuthorized { library, .. }) => {
            return Err(usage(format!(
                "the bindings file {bindings_path} lies in library {library}: bindings must be \
                 outside the libraries folder {}",
                recipe.libraries_dir
            )));
        }
        Err(err) => return Err(usage(err)),
    };
    let unbound: Vec<&project::Entry> = libraries
        .iter()
        .filter(|e| !bindings.libraries.contains(&e.name))
        .collect();
    project.close_libraries(&unbound);
    let open: Vec<String> = libraries
        .iter()
        .filter(|e| bindings.libraries.contains(&e.name))
        .map(|e| e.name.clone())
        .collect();
    project.open_libraries(&open).map_err(project_error)?;
    let mut omitted = unauthorized_libraries(&unbound, &bindings_path);
    if let Some(candidate) = &request.candidate
        && let Some(library) = project.closed_library_of(candidate)
    {
        return Err(usage(format!(
            "--candidate {candidate} leads into library {library}, which {bindings_path} does \
             not bind; it is not opened"
        )));
    }
    if let Some(candidate) = &request.candidate {
        // One answer whether the file is missing, hidden, skipped or
        // private: an agent learns nothing of what it may not read.
        let readable = project.check_listed(candidate).is_ok()
            && matches!(
                project.read_optional(candidate),
                Ok(Some(_)) | Err(ReadError::Unreadable { .. })
            );
        if !readable {
            return Err(usage(format!(
                "no candidate {candidate} to review: it does not exist, or is not a note the \
                 project may read"
            )));
        }
    }

    let schemas = Schemas::load(project, &recipe.schemas_dir).map_err(project_error)?;
    schemas
        .check_named(&recipe.schemas_dir, recipe.named_types())
        .and_then(|()| schemas.check_purposes(&recipe.purposes()))
        .map_err(project_error)?;
    project.hide_fields_from_all(schemas.clone(), recipe.cards.type_key.clone());
    let baseline_agent = recipe.agent(&recipe.baseline.agent);
    let purposes: Vec<&str> = recipe
        .agents
        .values()
        .map(|a| a.visibility.as_str())
        .collect();
    schemas
        .check_baseline_is_safe(&baseline_agent.visibility, &purposes)
        .map_err(project_error)?;

    let outline_path = expand(&recipe.outline.file)?;
    let read = read_by_recipe(&recipe, &expand, &outline_path)?;
    if let Some(candidate) = &request.candidate {
        refuse_governed_candidate(project, &read, candidate)?;
    }
    let outline_text = project
        .read_optional(&outline_path)
        .map_err(project_error)?
        .ok_or_else(|| {
            usage(format!(
                "no work '{}': {outline_path} does not exist",
                request.work
            ))
        })?;
    let outline = Outline::parse(&outline_text);
    let Some((_, entry)) = outline.find(request.unit) else {
        return Err(usage(format!(
            "{outline_path} has no entry for unit {} (a `###` heading with that number)",
            request.unit
        )));
    };
    check_revision(project, &recipe, &expand, request)?;

    let context = Context {
        project,
        recipe: &recipe,
        schemas: &schemas,
        bindings: &bindings,
        bindings_path: &bindings_path,
        outline: &outline,
        outline_path: &outline_path,
        work: &request.work,
        unit: request.unit,
        candidate: request.candidate.as_deref(),
        references: &request.references,
        library_index_dir: request.index_dir.as_deref(),
        store: request.store.as_ref(),
        separator: &recipe.labels.separator,
        colon: &recipe.labels.colon,
        ranked: Default::default(),
    };

    // The baseline: the baseline agent's L2 and L1, and the outline entry.
    let mut baseline = Gathered::default();
    for id in &baseline_agent.sources {
        let spec = &recipe.sources[id];
        if matches!(spec.layer, Layer::L1 | Layer::L2) {
            context
                .gather(id, spec, &baseline_agent.visibility, &mut baseline)
                .map_err(project_error)?;
        }
    }
    baseline.items.push(Item {
        key: format!("{outline_path}#{}", entry.title),
        layer: Layer::L0,
        source: "outline-entry".into(),
        source_title: recipe.labels.stable.clone(),
        group: Some(entry.title.clone()),
        label: None,
        text: entry.text.clone(),
        keep: Keep::Head,
        priority: (i32::MAX, 0),
    });

    // The agent's own sources; what the baseline already holds is not repeated.
    let mut own = Gathered::default();
    for id in &agent.sources {
        let spec = &recipe.sources[id];
        if agent_name == recipe.baseline.agent && matches!(spec.layer, Layer::L1 | Layer::L2) {
            continue;
        }
        context
            .gather(id, spec, &agent.visibility, &mut own)
            .map_err(|err| {
                // A unit or candidate the request names that is not there
                // is the user's to fix; anything else is the project's.
                if err.is_missing_input() {
                    usage(err)
                } else {
                    project_error(err)
                }
            })?;
    }
    let baseline_keys: BTreeSet<&str> = baseline.items.iter().map(|i| i.key.as_str()).collect();
    let increment_items: Vec<&Item> = own
        .items
        .iter()
        .filter(|item| !baseline_keys.contains(item.key.as_str()))
        .collect();

    let identity_path = match bindings.slots.get(&agent_name) {
        Some(slot) => match project.closed_library_of(&expand(slot)?) {
            Some(library) => {
                omitted.push(Omitted {
                    source: expand(slot)?,
                    reason: Reason::NotAuthorized,
                    count: None,
                    detail: format!(
                        "the {agent_name} slot in {bindings_path} leads into {library}, which is \
                         not bound; not opened (the recipe's identity is used)"
                    ),
                    items: Vec::new(),
                });
                agent.identity.clone()
            }
            None => slot.clone(),
        },
        None => agent.identity.clone(),
    };
    let read_meta = |template: &str| -> Result<String, AssembleError> {
        let path = expand(template)?;
        project
            .read(&path)
            .map(|t| t.trim().to_string())
            .map_err(project_error)
    };
    let labels = &recipe.labels;
    let mut identity = format!(
        "# {} · {agent_name}\n\n{}\n\n",
        labels.identity,
        read_meta(&identity_path)?
    );
    if let Some(contract) = &agent.contract {
        identity.push_str(&format!(
            "## {}\n\n{}\n\n",
            labels.contract,
            doc::nest(&read_meta(contract)?, 2)
        ));
    }
    let frame = Frame {
        system: format!("{}\n\n", read_meta(&recipe.system)?),
        identity,
        chain: format!(
            "# {} · {}\n\n{}\n\n",
            labels.chain,
            request.scenario,
            doc::nest(&read_meta(&scenario.chain)?, 1)
        ),
        volatile: volatile_segment(&recipe, &context, request),
    };

    if !agent
        .sources
        .iter()
        .any(|s| matches!(recipe.sources[s].kind, SourceKind::Library { .. }))
    {
        for library in &bindings.libraries {
            omitted.push(Omitted {
                source: format!("{}/{library}", recipe.libraries_dir),
                reason: Reason::NotRelevant,
                count: None,
                detail: format!("L3 is closed for {agent_name}; not opened"),
                items: Vec::new(),
            });
        }
    }
    omitted.extend(baseline.omitted.iter().cloned());
    omitted.extend(own.omitted.iter().cloned());
    // Every other path the gate refused (a symlink into an unbound library
    // among the cards, a source or slot leading into one).
    for (path, library) in project.refused() {
        if !omitted.iter().any(|o| o.source == path) {
            omitted.push(Omitted {
                source: path,
                reason: Reason::NotAuthorized,
                count: None,
                detail: format!("leads into {library}, which is not bound; not opened"),
                items: Vec::new(),
            });
        }
    }
    // Every entry a listing left out because it leads nowhere readable.
    for (path, why) in project.skipped() {
        if !omitted.iter().any(|o| o.source == path) {
            omitted.push(Omitted {
                source: path,
                reason: Reason::Unreadable,
                count: None,
                detail: why.to_string(),
                items: Vec::new(),
            });
        }
    }
    let mut warnings: Vec<String> = baseline.warnings.clone();
    for warning in &own.warnings {
        if !warnings.contains(warning) {
            warnings.push(warning.clone());
        }
    }

    let mut baseline_order: Vec<String> = baseline_agent.sources.clone();
    baseline_order.push("outline-entry".into());
    let mut baseline_segment = Segment::new(baseline.items.iter().collect(), &baseline_order);
    let mut increment_segment = Segment::new(increment_items, &agent.sources);

    let redactions = project.redactions();
    let facts = styled::Facts {
        recipe: &recipe.name,
        work: &request.work,
        unit: request.unit,
        agent: &agent_name,
        purpose: &scenario.purpose,
        scenario: &request.scenario,
    };
    let fitted = fit(
        request,
        &recipe,
        &facts,
        &frame,
        &mut baseline_segment,
        &mut increment_segment,
        &baseline.hidden,
        &own.hidden,
        &omitted,
        &redactions,
    )?;

    let review_file = match (&recipe.review_file, request.write_review, review) {
        (Some(template), true, Review::InProject) => {
            let path = expand(template)?;
            check_review_path(project, &read, &path, &fitted.text)?;
            write_review(project, &path, &fitted.text).map_err(project_error)?;
            if !project.is_git_ignored(&path) {
                warnings.push(format!(
                    "{path} is not excluded by a .gitignore; add its folder to the work's .gitignore"
                ));
            }
            Some(path)
        }
        (Some(template), true, Review::Under(Some(dir))) => {
            // The same checks as in a project: the copy stays inside `dir`.
            let path = expand(template)?;
            let folder = Project::open(dir).map_err(usage)?;
            check_review_path(&folder, &[], &path, &fitted.text)?;
            write_review(&folder, &path, &fitted.text).map_err(project_error)?;
            Some(path)
        }
        _ => None,
    };

    let mut items = Vec::new();
    for (segment, name) in [
        (&baseline_segment, "baseline"),
        (&increment_segment, "increment"),
    ] {
        for (item, form) in segment.items.iter().zip(&segment.forms) {
            items.push(ItemReport {
                key: item.key.clone(),
                layer: item.layer,
                segment: name,
                form: form.name(),
            });
        }
    }
    Ok(Assembly {
        recipe: recipe.name.clone(),
        work: request.work.clone(),
        unit: request.unit,
        scenario: request.scenario.clone(),
        purpose: scenario.purpose.clone(),
        agent: agent_name.clone(),
        visibility: agent.visibility.clone(),
        tokenizer: request.tokenizer,
        budget: request.budget,
        tokens: fitted.tokens,
        shared_prefix_bytes: fitted.shared_prefix,
        baseline: BaselineReport {
            bytes: fitted.baseline.len(),
            tokens: request.tokenizer.count(&fitted.baseline),
            blake3: blake3::hash(fitted.baseline.as_bytes())
                .to_hex()
                .to_string(),
            shared: fitted.shared,
        },
        segments: fitted.segments,
        items,
        hidden_fields: fitted.hidden,
        omitted_sources: fitted.omitted,
        redactions: redactions
            .into_iter()
            .map(|(path, redaction)| RedactedSecret {
                path,
                line: redaction.line,
                kind: redaction.kind,
            })
            .collect(),
        warnings,
        review_file,
        read: project.touched(),
        text: fitted.text,
    })
    .map(|assembly| (assembly, context.ranked_from()))
}

/// A recipe larger than this is not read.
const RECIPE_MAX_BYTES: u64 = 1024 * 1024;

fn load_recipe(project: &Project, request: &AssembleRequest) -> Result<Recipe, AssembleError> {
    let (label, text) = match &request.recipe {
        Some(path) => (
            path.display().to_string(),
            // Bounded, and only a regular file (a device would be read
            // without end).
            crate::safe_fs::read_text(path, RECIPE_MAX_BYTES)
                .map(|(text, _)| text)
                .map_err(|err| {
                    usage(format!("cannot read recipe {}: {}", path.display(), err.reason()))
                })?,
        ),
        None => (
            RECIPE_FILE.to_string(),
            project.read_optional(RECIPE_FILE).map_err(usage)?.ok_or_else(|| {
                usage(format!(
                    "{} has no {RECIPE_FILE}: run assemble at the root of a project with a recipe \
                     (see docs/assemble.md), or pass --recipe",
                    project.root().display()
                ))
            })?,
        ),
    };
    // A recipe is configuration: its problems are usage errors (exit 2).
    Recipe::parse(&text).map_err(|err| usage(format!("{label}: {err}")))
}

fn check_revision(
    project: &Project,
    recipe: &Recipe,
    expand: &dyn Fn(&str) -> Result<String, AssembleError>,
    request: &AssembleRequest,
) -> Result<(), AssembleError> {
    let (Some(expected), Some(key)) = (&request.expected_revision, &recipe.unit.revision_key)
    else {
        return Ok(());
    };
    let path = expand(&recipe.unit.file)?;
    let Some(text) = project.read_optional(&path).map_err(project_error)? else {
        return Err(usage(format!(
            "{path} does not exist; there is nothing to revise"
        )));
    };
    let doc = Doc::parse(&path, &text).map_err(project_error)?;
    match doc.scalar(key) {
        Some(actual) if actual != *expected => Err(usage(format!(
            "{path} is at {key} {actual}, not the expected {expected}; reload it before rewriting"
        ))),
        _ => Ok(()),
    }
}

fn volatile_segment(recipe: &Recipe, context: &Context<'_>, request: &AssembleRequest) -> String {
    let labels = &recipe.labels;
    let redacted = |text: &str| context.project.redacted(text);
    let mut out = format!("# {}\n\n## {}\n\n", labels.volatile, labels.object);
    out.push_str(&format!(
        "- {}{}{}\n",
        labels.work, labels.colon, request.work
    ));
    out.push_str(&format!("- {}\n", context.unit_heading(request.unit)));
    if let Some(selection) = &request.selection {
        out.push_str(&format!(
            "- {}{}{}\n",
            labels.selection,
            labels.colon,
            redacted(selection)
        ));
    }
    if let Some(revision) = &request.expected_revision {
        out.push_str(&format!(
            "- {}{}{revision}\n",
            labels.expected_revision, labels.colon
        ));
    }
    if let Some(candidate) = &request.candidate {
        out.push_str(&format!("- {candidate}\n"));
    }
    out.push('\n');
    if !request.comments.is_empty() {
        out.push_str(&format!("## {}\n\n", labels.comments));
        for comment in &request.comments {
            out.push_str(&format!("- {}\n", redacted(comment)));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "## {}\n\n{}\n",
        labels.intent,
        redacted(&request.intent)
    ));
    out
}

/// The files and folders the recipe reads for this unit, each with what it
/// is and whether it is read field by field under a schema.
fn read_by_recipe(
    recipe: &Recipe,
    expand: &dyn Fn(&str) -> Result<String, AssembleError>,
    outline_path: &str,
) -> Result<Vec<(String, &'static str, bool)>, AssembleError> {
    let mut read = vec![
        (outline_path.to_string(), "the outline", true),
        (recipe.libraries_dir.clone(), "the libraries folder", true),
        ("meta".to_string(), "the recipe's folder", false),
        (recipe.schemas_dir.clone(), "the schemas folder", false),
        (expand(&recipe.bindings)?, "the bindings file", false),
        (expand(&recipe.unit.file)?, "the unit's file", false),
    ];
    for spec in recipe.sources.values() {
        match &spec.kind {
            SourceKind::Sections { path, .. } => {
                read.push((expand(path)?, "a sections source", true))
            }
            SourceKind::Cards { dir, .. } | SourceKind::CardIndex { dir, .. } => {
                read.push((expand(dir)?, "a cards folder", true));
            }
            SourceKind::File { path, .. } => read.push((expand(path)?, "a file source", false)),
            _ => {}
        }
    }
    Ok(read)
}

/// What `rel` is among `read` (canonical paths compared, so a symlink or
/// `./` leads to the same answer), if anything.
fn among<'a>(
    project: &Project,
    rel: &str,
    read: &'a [(String, &'static str, bool)],
) -> Option<&'a (String, &'static str, bool)> {
    let real = project.resolve(rel).ok()?;
    read.iter().find(|(path, _, _)| {
        project
            .resolve(path)
            .is_ok_and(|governed| real.starts_with(&governed))
    })
}

/// Refuses a `--candidate` that the recipe reads field by field (the
/// outline, a `sections` source, a card or a library): a candidate is shown
/// whole, so it would hand an agent the fields its purpose may not see.
fn refuse_governed_candidate(
    project: &Project,
    read: &[(String, &'static str, bool)],
    candidate: &str,
) -> Result<(), AssembleError> {
    let governed: Vec<_> = read
        .iter()
        .filter(|(_, _, schema)| *schema)
        .cloned()
        .collect();
    match among(project, candidate, &governed) {
        Some((path, what, _)) => Err(usage(format!(
            "--candidate {candidate} is read field by field under a schema ({what}: {path}); a \
             candidate is shown whole, so it may not be one"
        ))),
        None => Ok(()),
    }
}

/// Refuses a review copy path that would replace something not a review
/// copy: a file the recipe reads, a hidden file (`.git/…`, `.obsidian/…`,
/// the policy), anything but a Markdown note, or an existing file whose
/// first line is not the pack's (an earlier copy begins as this one does).
fn check_review_path(
    project: &Project,
    read: &[(String, &'static str, bool)],
    rel: &str,
    text: &str,
) -> Result<(), AssembleError> {
    let refuse = |why: String| {
        Err(usage(format!(
            "review_file {rel} {why}; the review copy is written only where it replaces nothing \
             but an earlier copy"
        )))
    };
    if rel.starts_with('/') || rel.split('/').any(|part| part == "..") {
        return refuse("leads out of the project (an absolute path or `..`)".into());
    }
    if rel.split('/').any(|part| part.starts_with('.')) {
        return refuse("is a hidden file or lies in a hidden folder".into());
    }
    if !project::is_markdown(rel) {
        return refuse("is not a Markdown file (`.md`)".into());
    }
    if let Some((path, what, _)) = among(project, rel, read) {
        return refuse(format!("is {what} or lies in it ({path})"));
    }
    let Ok(real) = project.resolve(rel) else {
        return Ok(());
    };
    // Opened without blocking: a FIFO or device at the path is refused,
    // not waited on.
    let existing = match crate::safe_fs::open_regular(&real) {
        Ok(file) => Some(file),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => {
            let what = std::fs::metadata(&real)
                .ok()
                .and_then(|meta| crate::safe_fs::special_kind(&meta.file_type()))
                .map_or_else(
                    || format!("cannot be read ({err})"),
                    |kind| format!("is {kind}"),
                );
            return refuse(format!("exists and {what}, not an earlier review copy"));
        }
    };
    if let Some(file) = existing {
        use std::io::Read;
        // The first line is all that is compared; a longer one is not a copy's.
        let mut head = Vec::new();
        let _ = file.take(64 * 1024).read_to_end(&mut head);
        let first_line = |bytes: &[u8]| -> Vec<u8> {
            bytes
                .split(|&b| b == b'\n')
                .next()
                .unwrap_or_default()
                .to_vec()
        };
        if first_line(&head) != first_line(text.as_bytes()) {
            return refuse(
                "exists and does not begin as this review copy does (delete it if it is an \
                 earlier copy in another style)"
                    .into(),
            );
        }
    }
    Ok(())
}

/// What the vault tools (search, pack, `get_note`, `serve`) over a writing
/// project must not show, since its schemas hide it from some purpose:
/// they serve no purpose, so they show only what every purpose may see.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProjectRestrictions {
    /// `##` sections (card fields, settings sections) some purpose may not
    /// see: cut from every note, as `## Private` is.
    pub headings: Vec<String>,
    /// Frontmatter keys some purpose may not see: a note with one is
    /// private.
    pub keys: Vec<String>,
    /// `(key, type)`: cards of a type whose unlisted fields some purpose
    /// may not see are private whole.
    pub types: Vec<(String, String)>,
    /// Files private whole (gitignore patterns): an outline whose parts
    /// some purpose may not see (they are not sections by name), a settings
    /// file whose unlisted sections are hidden, and the review copies (each
    /// holds what its own purpose may see).
    pub files: Vec<String>,
}

impl ProjectRestrictions {
    pub fn is_empty(&self) -> bool {
        *self == ProjectRestrictions::default()
    }
}

/// The [`ProjectRestrictions`] of the writing project at `root`; none when
/// it has no recipe. Fails closed: a recipe or schema that cannot be read
/// is an error (what it hides is then unknown).
pub fn project_restrictions(root: &Path) -> Result<ProjectRestrictions, AssembleError> {
    // Most vaults are no project: one `lstat` says so, before anything is
    // opened or loaded (every command loads the policy).
    if std::fs::symlink_metadata(root.join(RECIPE_FILE)).is_err() {
        return Ok(ProjectRestrictions::default());
    }
    let Some((project, recipe)) = served_project(root)? else {
        return Ok(ProjectRestrictions::default());
    };
    let refuse = |problem: String| AssembleError::Unservable {
        root: root.to_path_buf(),
        problem,
    };
    let schemas =
        Schemas::load(&project, &recipe.schemas_dir).map_err(|err| refuse(err.to_string()))?;
    let restricted = |rule: &schema::AiContext| *rule != schema::AiContext::All(true);
    // A path template as a pattern: any placeholder matches any name.
    let pattern = |template: &str| {
        let mut out = String::from("/");
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            out.push('*');
            rest = rest[open..]
                .find('}')
                .map_or("", |close| &rest[open + close + 1..]);
        }
        out.push_str(rest);
        out
    };
    let mut out = ProjectRestrictions::default();
    let mut whole_files = BTreeSet::new();
    for schema in schemas.by_type.values() {
        for (field, rule) in &schema.rules {
            if restricted(&rule.ai_context) {
                out.headings.push(field.clone());
                out.keys.push(field.clone());
            }
        }
        if restricted(&schema.default) {
            out.types
                .push((recipe.cards.type_key.clone(), schema.type_name.clone()));
        }
    }
    let outline = schemas.by_type.get(&recipe.outline.schema);
    if outline.is_none_or(|s| {
        restricted(&s.default) || s.rules.iter().any(|(_, r)| restricted(&r.ai_context))
    }) {
        whole_files.insert(pattern(&recipe.outline.file));
    }
    for spec in recipe.sources.values() {
        if let SourceKind::Sections { path, schema } = &spec.kind
            && schemas
                .by_type
                .get(schema)
                .is_none_or(|s| restricted(&s.default))
        {
            whole_files.insert(pattern(path));
        }
    }
    if (!out.headings.is_empty() || !out.types.is_empty() || !whole_files.is_empty())
        && let Some(review) = &recipe.review_file
    {
        whole_files.insert(pattern(review));
    }
    out.files = whole_files.into_iter().collect();
    out.headings.sort();
    out.headings.dedup();
    out.keys.sort();
    out.keys.dedup();
    out.types.sort();
    out.types.dedup();
    Ok(out)
}

/// Whether `root` holds a writing project: its recipe is there to read,
/// as `assemble` would read it (the MCP server offers `assemble` only then).
pub(crate) fn has_recipe(root: &Path) -> bool {
    Project::open(root)
        .is_ok_and(|project| matches!(project.read_optional(RECIPE_FILE), Ok(Some(_))))
}

/// The writing project at `root` and its recipe, for what the vault's tools
/// must hide (only its YAML is read, which no privacy policy governs);
/// `None` when `root` has no recipe. Fails closed: a recipe that exists but
/// cannot be read or parsed is an error, since what it binds and hides is
/// then unknown.
fn served_project(root: &Path) -> Result<Option<(Project, Recipe)>, AssembleError> {
    let Ok(project) = Project::open(root) else {
        return Ok(None);
    };
    let refuse = |problem: String| AssembleError::Unservable {
        root: root.to_path_buf(),
        problem,
    };
    let text = match project.read_optional(RECIPE_FILE) {
        Ok(None) => return Ok(None),
        Ok(Some(text)) => text,
        Err(err) => return Err(refuse(format!("cannot read its recipe: {err}"))),
    };
    let recipe = Recipe::parse(&text).map_err(|err| refuse(format!("{RECIPE_FILE}: {err}")))?;
    Ok(Some((project, recipe)))
}

/// The library folders (relative to `root`) that no work of the writing
/// project at `root` binds: no agent may read them, so the vault tools
/// served over the project do not see them either. Empty when `root` has
/// no recipe. Fails closed: a recipe that exists but cannot be read or
/// parsed is an error (which folder holds the libraries is then unknown);
/// when a work's bindings cannot be read, every library folder is listed.
pub fn unbound_libraries(root: &Path) -> Result<Vec<String>, AssembleError> {
    let Some((project, recipe)) = served_project(root)? else {
        return Ok(Vec::new());
    };
    let libraries = project
        .library_folders(&recipe.libraries_dir)
        .unwrap_or_default();
    let bound = bound_libraries(&project, &recipe.bindings);
    Ok(libraries
        .into_iter()
        .filter(|e| bound.as_ref().is_none_or(|bound| !bound.contains(&e.name)))
        .map(|e| e.path)
        .collect())
}

/// Every library some work binds, reading the bindings file of each folder
/// that the bindings template's `{work}` ranges over; `None` when one cannot
/// be read or the template has other placeholders.
fn bound_libraries(project: &Project, template: &str) -> Option<BTreeSet<String>> {
    let bindings_of = |path: &str| -> Option<Vec<String>> {
        if path.contains('{') {
            return None;
        }
        match project.read_optional(path).ok()? {
            Some(text) => Bindings::parse(path, &text).ok().map(|b| b.libraries),
            None => Some(Vec::new()),
        }
    };
    let Some((works_dir, _)) = template.split_once("{work}") else {
        return bindings_of(template).map(BTreeSet::from_iter);
    };
    let mut bound = BTreeSet::new();
    for work in project.list(works_dir.trim_end_matches('/')).ok()? {
        if work.is_dir {
            bound.extend(bindings_of(&template.replace("{work}", &work.name))?);
        }
    }
    Some(bound)
}

/// The report lines of the libraries the bindings do not name (hidden
/// folders, closed too, are not reported); their folders are never opened.
fn unauthorized_libraries(unbound: &[&project::Entry], bindings_path: &str) -> Vec<Omitted> {
    unbound
        .iter()
        .filter(|e| !e.name.starts_with('.'))
        .map(|e| Omitted {
            source: e.path.clone(),
            reason: Reason::NotAuthorized,
            count: None,
            detail: format!("not bound in {bindings_path}; not opened"),
            items: Vec::new(),
        })
        .collect()
}

struct Fitted {
    text: String,
    shared_prefix: usize,
    baseline: String,
    tokens: usize,
    shared: bool,
    segments: Vec<SegmentReport>,
    hidden: Vec<HiddenField>,
    omitted: Vec<Omitted>,
}

/// Fits the baseline to its share of the budget and the increment to the
/// rest, re-fitting until the whole pack, report included, is within the
/// budget under the exact counter.
#[allow(clippy::too_many_arguments)]
fn fit(
    request: &AssembleRequest,
    recipe: &Recipe,
    facts: &styled::Facts,
    frame: &Frame,
    baseline: &mut Segment<'_>,
    increment: &mut Segment<'_>,
    baseline_hidden: &[Hidden],
    own_hidden: &[Hidden],
    omitted: &[Omitted],
    redactions: &[(String, crate::privacy::Redaction)],
) -> Result<Fitted, AssembleError> {
    let tokenizer = request.tokenizer;
    let labels = &recipe.labels;
    let capacity = tokenizer.capacity(request.budget);
    let fixed = tokenizer.measure(&frame.system)
        + tokenizer.measure(&frame.identity)
        + tokenizer.measure(&frame.chain)
        + tokenizer.measure(&frame.volatile);
    let mut cache = MeasureCache::default();
    let share =
        tokenizer.capacity((request.budget as f64 * recipe.baseline.share).floor() as usize);
    let mut reserve = {
        let hidden = hidden_report(baseline, increment, baseline_hidden, own_hidden);
        let omitted = omitted_report(omitted, baseline, increment);
        let empty = styled::Sections {
            system: "",
            baseline: "",
            identity: "",
            chain: "",
            increment: "",
            volatile: "",
            report: "",
        };
        // Another style's own markup, measured once with no content.
        let markup = match request.style {
            Style::Markdown => 0,
            style => tokenizer.measure(&styled::print(style, facts, &empty).text),
        };
        markup + tokenizer.measure(&render_report(labels, &hidden, redactions, &omitted))
    };
    for round in 0..16u32 {
        baseline.forms.fill(Form::Full);
        increment.forms.fill(Form::Full);
        // Fitted to its share alone, the baseline is the same for every agent.
        baseline.fit(share, labels, tokenizer, &mut cache);
        let mut shared = true;
        let used = fixed + reserve + baseline.measure(labels, tokenizer, &mut cache);
        if used > capacity
            || !increment.fit(capacity.saturating_sub(used), labels, tokenizer, &mut cache)
        {
            // The agent's never-cut parts need room the shared baseline took.
            shared = false;
            increment.fit(0, labels, tokenizer, &mut cache);
            let needed = increment.measure(labels, tokenizer, &mut cache);
            baseline.forms.fill(Form::Full);
            let room = capacity.saturating_sub(fixed + reserve + needed);
            if !baseline.fit(room, labels, tokenizer, &mut cache) {
                let l0 = fixed + needed + baseline.measure(labels, tokenizer, &mut cache);
                // What was measured against the budget: the never-cut parts,
                // the baseline at its smallest, and the room kept for the
                // report of what is left out.
                return Err(usage(format!(
                    "the budget is {}, and this pack needs more than about {} tokens: {} for the \
                     parts never cut (outline entry, contract, object under review, intent, \
                     identity and instruction) and {} for the report of what is left out",
                    request.budget,
                    tokenizer.tokens(l0 + reserve),
                    tokenizer.tokens(l0),
                    tokenizer.tokens(reserve),
                )));
            }
            increment.forms.fill(Form::Full);
            let used = fixed + reserve + baseline.measure(labels, tokenizer, &mut cache);
            increment.fit(capacity.saturating_sub(used), labels, tokenizer, &mut cache);
        }
        let baseline_text = format!(
            "# {} · {}\n\n{}",
            labels.baseline,
            request.work,
            baseline.render(labels)
        );
        let increment_body = increment.render(labels);
        let increment_text = if increment_body.is_empty() {
            String::new()
        } else {
            format!("# {}\n\n{increment_body}", labels.increment)
        };
        let hidden = hidden_report(baseline, increment, baseline_hidden, own_hidden);
        let omitted = omitted_report(omitted, baseline, increment);
        let report = render_report(labels, &hidden, redactions, &omitted);
        let printed = styled::print(
            request.style,
            facts,
            &styled::Sections {
                system: &frame.system,
                baseline: &baseline_text,
                identity: &frame.identity,
                chain: &frame.chain,
                increment: &increment_text,
                volatile: &frame.volatile,
                report: &report,
            },
        );
        let tokens = tokenizer.count(&printed.text);
        if tokens <= request.budget {
            let segments = [
                ("system", frame.system.as_str()),
                ("baseline", &baseline_text),
                ("identity", &frame.identity),
                ("chain", &frame.chain),
                ("increment", &increment_text),
                ("volatile", &frame.volatile),
                ("report", &report),
            ]
            .into_iter()
            .map(|(name, text)| SegmentReport {
                name,
                tokens: tokenizer.count(text),
            })
            .collect();
            return Ok(Fitted {
                text: printed.text,
                shared_prefix: printed.shared_prefix,
                baseline: baseline_text,
                tokens,
                shared,
                segments,
                hidden,
                omitted,
            });
        }
        // Past a few rounds the fit can swing between two near fits (a
        // dropped part lengthens the report): the margin then doubles.
        let excess = (tokenizer.capacity(tokens - request.budget) + 8) << round.saturating_sub(3);
        // Never less than last round's reserve plus the excess: a style's
        // escaping grows with the content, so the reserve must only grow.
        reserve = (tokenizer.measure(&report) + excess + reserve / 2).max(reserve + excess);
    }
    Err(usage(format!(
        "cannot fit the pack and its report into {} tokens; raise the budget",
        request.budget
    )))
}

fn hidden_report(
    baseline: &Segment<'_>,
    increment: &Segment<'_>,
    baseline_hidden: &[Hidden],
    own_hidden: &[Hidden],
) -> Vec<HiddenField> {
    let shown: BTreeSet<&str> = baseline
        .items
        .iter()
        .chain(&increment.items)
        .map(|i| i.key.as_str())
        .collect();
    // The agent's own verdict on a field wins over the baseline's.
    let mut by_key: BTreeMap<&str, &Hidden> = BTreeMap::new();
    for hidden in baseline_hidden.iter().chain(own_hidden) {
        if !shown.contains(hidden.key.as_str()) {
            by_key.insert(hidden.key.as_str(), hidden);
        }
    }
    let mut groups: BTreeMap<(String, String, String, String), BTreeSet<String>> = BTreeMap::new();
    for hidden in by_key.values() {
        groups
            .entry((
                hidden.type_name.clone(),
                hidden.field.clone(),
                hidden.rule.clone(),
                hidden.purpose.clone(),
            ))
            .or_default()
            .insert(hidden.entity.clone());
    }
    groups
        .into_iter()
        .map(
            |((type_name, field, rule, purpose), entities)| HiddenField {
                type_name,
                field,
                rule,
                purpose,
                count: entities.len(),
                entities: entities.into_iter().collect(),
            },
        )
        .collect()
}

fn omitted_report(
    gathered: &[Omitted],
    baseline: &Segment<'_>,
    increment: &Segment<'_>,
) -> Vec<Omitted> {
    // An entity one source left out may be in the pack through another.
    let included: BTreeSet<&str> = baseline
        .items
        .iter()
        .chain(&increment.items)
        .filter_map(|item| item.group.as_deref())
        .collect();
    let mut out: Vec<Omitted> = Vec::new();
    for omitted in gathered {
        let mut omitted = omitted.clone();
        if !omitted.items.is_empty() {
            omitted
                .items
                .retain(|name| !included.contains(name.as_str()));
            if omitted.items.is_empty() {
                continue;
            }
            omitted.count = Some(omitted.items.len());
        }
        if !out.contains(&omitted) {
            out.push(omitted);
        }
    }
    for form in ["summary", "truncated", "dropped"] {
        let items: Vec<String> = baseline
            .items
            .iter()
            .zip(&baseline.forms)
            .chain(increment.items.iter().zip(&increment.forms))
            .filter(|(_, f)| f.name() == form)
            .map(|(item, _)| format!("{} {}", item.layer, item.display()))
            .collect();
        if !items.is_empty() {
            out.push(Omitted {
                source: "pack".into(),
                reason: Reason::TokenBudget,
                count: Some(items.len()),
                detail: match form {
                    "summary" => "summarised to their first sentence",
                    "truncated" => "truncated",
                    _ => "left out",
                }
                .into(),
                items,
            });
        }
    }
    out
}

/// The most names listed on one report line.
const REPORT_NAMES: usize = 12;

fn render_report(
    labels: &recipe::Labels,
    hidden: &[HiddenField],
    redactions: &[(String, crate::privacy::Redaction)],
    omitted: &[Omitted],
) -> String {
    let names = |items: &[String]| {
        let mut shown = items
            .iter()
            .take(REPORT_NAMES)
            .cloned()
            .collect::<Vec<_>>()
            .join(&labels.separator);
        if items.len() > REPORT_NAMES {
            shown.push_str(&format!(
                "{}… (+{})",
                labels.separator,
                items.len() - REPORT_NAMES
            ));
        }
        shown
    };
    let mut out = format!("# {}\n\n## {}\n\n", labels.report, labels.hidden_fields);
    if hidden.is_empty() && redactions.is_empty() {
        out.push_str(&format!("- {}\n", labels.none));
    }
    for (path, redaction) in redactions {
        out.push_str(&format!(
            "- {path}:{} secret ({}) redacted\n",
            redaction.line, redaction.kind
        ));
    }
    for field in hidden {
        out.push_str(&format!(
            "- {}.{} ({}) hidden for {}: {} × {}\n",
            field.type_name,
            field.field,
            field.rule,
            field.purpose,
            field.count,
            names(&field.entities)
        ));
    }
    out.push_str(&format!("\n## {}\n\n", labels.omitted_sources));
    if omitted.is_empty() {
        out.push_str(&format!("- {}\n", labels.none));
    }
    for entry in omitted {
        let count = entry.count.map(|c| format!(" ({c})")).unwrap_or_default();
        out.push_str(&format!(
            "- {} · {}{count}: {}",
            entry.reason.name(),
            entry.source,
            entry.detail
        ));
        if !entry.items.is_empty() {
            out.push_str(&format!(" — {}", names(&entry.items)));
        }
        out.push('\n');
    }
    out
}

/// Writes the review copy atomically (a temporary file, then a rename).
fn write_review(project: &Project, rel: &str, text: &str) -> Result<(), ProjectError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.display().to_string();
        move |source| ProjectError::Io {
            action,
            path,
            source,
        }
    };
    let path = project.resolve(rel)?;
    let dir = path
        .parent()
        .ok_or_else(|| ProjectError::BadReviewPath(rel.to_string()))?;
    // The nearest folder that exists must be inside the root before any
    // folder is created under it (a symlink could lead elsewhere).
    let existing = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(project.root());
    let existing = existing
        .canonicalize()
        .map_err(io("cannot open", existing))?;
    if !existing.starts_with(project.root()) {
        return Err(ProjectError::ReviewOutside(rel.to_string()));
    }
    std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
    // The folder may be a symlink created since `resolve` looked.
    let real_dir = dir.canonicalize().map_err(io("cannot open", dir))?;
    if !real_dir.starts_with(project.root()) {
        return Err(ProjectError::ReviewOutside(rel.to_string()));
    }
    let target = real_dir.join(path.file_name().unwrap_or_default());
    let file =
        crate::safe_fs::AtomicFile::new(&target).map_err(io("cannot write in", &real_dir))?;
    file.commit(text.as_bytes())
        .map_err(io("cannot write", Path::new(rel)))
}

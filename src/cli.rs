//! The command line: arguments become a validated plan, the plan becomes one
//! library call, and errors become exit codes (0 ok, 1 failure, 2 usage).

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{self, Environment};
use crate::pack::{self, PackMode, PackOptions, build_pack};
use crate::parse::parse_datetime;
use crate::tokens::Tokenizer;
use crate::vault::{Vault, VaultOptions, log};

#[derive(Debug, Parser)]
#[command(
    name = "ctxpack",
    version,
    about = "Turn a Markdown knowledge vault into a token-budgeted context pack",
    after_help = "An inline @name argument anywhere selects the vault configured in \
                  ~/.config/obsidian-wiki/config.<name> for this call."
)]
struct Cli {
    /// The vault folder (overrides @name, .env and the global config).
    #[arg(long, global = true, value_name = "PATH")]
    vault: Option<PathBuf>,
    /// Do not print diagnostics about the vault's notes.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pack the pages most relevant to a topic, or the most recent ones.
    Pack(PackArgs),
}

#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
struct PackArgs {
    /// The topic (several words may be given unquoted).
    #[arg(value_name = "TOPIC", conflicts_with = "recent")]
    topic: Vec<String>,
    /// Token budget for the whole pack (1–100000).
    #[arg(long, value_name = "N", default_value_t = pack::DEFAULT_BUDGET, value_parser = parse_budget)]
    budget: usize,
    /// Pack the most recently updated pages instead of a topic.
    #[arg(long)]
    recent: bool,
    /// Token counter: chars4 (the seed's chars/4 estimate), o200k or cl100k.
    #[arg(long, value_name = "COUNTER", default_value = "chars4", value_parser = parse_tokenizer)]
    tokenizer: Tokenizer,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    format: Format,
    /// Fix the pack's timestamp (ISO 8601), for reproducible output;
    /// SOURCE_DATE_EPOCH is honoured too.
    #[arg(long, value_name = "ISO")]
    generated_at: Option<String>,
    /// Do not append the CONTEXT_PACK line to the vault's log.md.
    #[arg(long)]
    no_log: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Markdown,
    Json,
}

fn parse_budget(text: &str) -> Result<usize, String> {
    let value: i64 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number of tokens"))?;
    if value < 1 || value > pack::MAX_BUDGET as i64 {
        return Err(format!(
            "budget must be between 1 and {} tokens, got {value}",
            pack::MAX_BUDGET
        ));
    }
    Ok(value as usize)
}

fn parse_tokenizer(text: &str) -> Result<Tokenizer, String> {
    text.parse()
}

/// Why a run stopped early.
enum Failure {
    /// Bad arguments or configuration: exit 2.
    Usage(String),
    /// Something failed while running: exit 1.
    Runtime(anyhow::Error),
}

impl From<config::ConfigError> for Failure {
    fn from(err: config::ConfigError) -> Self {
        Failure::Usage(err.0)
    }
}

/// Runs the command line and returns the process exit code.
pub fn run(args: Vec<OsString>) -> i32 {
    let (args, vault_name) = match take_vault_name(args) {
        Ok(split) => split,
        Err(message) => return usage_error(&message),
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return err.exit_code();
        }
    };
    let result = match &cli.command {
        Command::Pack(args) => run_pack(&cli, args, vault_name.as_deref()),
    };
    match result {
        Ok(()) => 0,
        Err(Failure::Usage(message)) => usage_error(&message),
        Err(Failure::Runtime(err)) => {
            eprintln!("ctxpack: error: {err:#}");
            1
        }
    }
}

fn usage_error(message: &str) -> i32 {
    eprintln!("ctxpack: error: {message}");
    2
}

/// Removes an inline `@name` argument (before any `--`), which selects a
/// named vault config for this call.
fn take_vault_name(args: Vec<OsString>) -> Result<(Vec<OsString>, Option<String>), String> {
    let mut kept = Vec::with_capacity(args.len());
    let mut name: Option<String> = None;
    let mut after_separator = false;
    for (i, arg) in args.into_iter().enumerate() {
        let text = arg.to_str().unwrap_or_default();
        if i > 0 && !after_separator && is_vault_name(text) {
            if let Some(first) = &name {
                return Err(format!(
                    "two vault names given (@{first} and {text}); give at most one"
                ));
            }
            name = Some(text[1..].to_string());
            continue;
        }
        if text == "--" {
            after_separator = true;
        }
        kept.push(arg);
    }
    Ok((kept, name))
}

fn is_vault_name(arg: &str) -> bool {
    arg.strip_prefix('@').is_some_and(|name| {
        name.chars().next().is_some_and(char::is_alphanumeric)
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    })
}

fn generated_at(flag: Option<&str>) -> Result<DateTime<Utc>, Failure> {
    if let Some(text) = flag {
        return parse_datetime(text).ok_or_else(|| {
            Failure::Usage(format!(
                "--generated-at '{text}' is not an ISO 8601 date or time (e.g. 2026-05-14T09:30:00Z)"
            ))
        });
    }
    if let Some(epoch) = std::env::var_os("SOURCE_DATE_EPOCH").filter(|v| !v.is_empty()) {
        let text = epoch.to_string_lossy();
        return text
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|secs| DateTime::from_timestamp(secs, 0))
            .ok_or_else(|| {
                Failure::Usage(format!(
                    "SOURCE_DATE_EPOCH '{text}' is not a number of seconds"
                ))
            });
    }
    Ok(Utc::now())
}

fn run_pack(cli: &Cli, args: &PackArgs, vault_name: Option<&str>) -> Result<(), Failure> {
    let topic = args.topic.join(" ");
    let mode = if args.recent {
        PackMode::Recent
    } else if topic.trim().is_empty() {
        let message = if args.topic.is_empty() {
            "a topic is required (or use --recent), e.g. ctxpack pack \"raft consensus\""
        } else {
            "the topic is empty; give some words to pack, or use --recent"
        };
        return Err(Failure::Usage(message.into()));
    } else {
        PackMode::Topic(topic)
    };
    let generated_at = generated_at(args.generated_at.as_deref())?;
    let resolved = config::resolve(
        cli.vault.as_deref(),
        vault_name,
        &Environment::from_process(),
    )?;
    let vault = Vault::load(&resolved.vault, &VaultOptions::default()).map_err(Failure::Runtime)?;
    if !cli.quiet {
        for diagnostic in &vault.diagnostics {
            eprintln!("ctxpack: warning: {diagnostic}");
        }
    }
    let options = PackOptions::new(args.budget, args.tokenizer, generated_at);
    let pack = build_pack(&vault, &mode, &options);
    for warning in &pack.warnings {
        eprintln!("ctxpack: warning: {warning}");
    }
    if pack.bundle.is_empty() {
        eprintln!(
            "ctxpack: warning: a budget of {} tokens is too small for even the pack header",
            args.budget
        );
    }
    let output = match args.format {
        Format::Markdown => pack.bundle.clone(),
        Format::Json => {
            let mut json =
                serde_json::to_string_pretty(&pack).map_err(|err| Failure::Runtime(err.into()))?;
            json.push('\n');
            json
        }
    };
    write_stdout(&output).map_err(|err| Failure::Runtime(err.into()))?;
    if !args.no_log {
        let timestamp = generated_at.to_rfc3339_opts(SecondsFormat::Secs, true);
        if let Err(err) = log::append(&vault.root, &log::log_line(&pack, &timestamp)) {
            eprintln!(
                "ctxpack: warning: could not append to {}: {err} (the pack was still printed)",
                vault.root.join(log::LOG_FILE).display()
            );
        }
    }
    Ok(())
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error.
fn write_stdout(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

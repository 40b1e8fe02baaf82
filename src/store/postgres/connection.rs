//! Connecting to the store: the URL (shown without its password), TLS
//! through rustls, a small connection pool, and the bridge from ctxpack's
//! synchronous code to the async client.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::config::Host;

use super::SCHEMA_VERSION;

/// The migrations, in order: `(version, SQL)`.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../../../migrations/postgres/001_init.sql")),
    (
        2,
        include_str!("../../../migrations/postgres/002_bases.sql"),
    ),
    (
        3,
        include_str!("../../../migrations/postgres/003_compact_terms.sql"),
    ),
    (
        4,
        include_str!("../../../migrations/postgres/004_client_compressed_bodies.sql"),
    ),
    (
        5,
        include_str!("../../../migrations/postgres/005_sync_owned_rows.sql"),
    ),
    (
        6,
        include_str!("../../../migrations/postgres/006_projects.sql"),
    ),
    (
        7,
        include_str!("../../../migrations/postgres/007_note_properties.sql"),
    ),
    (
        8,
        include_str!("../../../migrations/postgres/008_filter_values.sql"),
    ),
    (
        9,
        include_str!("../../../migrations/postgres/009_link_lists.sql"),
    ),
];

/// Store problems the user fixes in their configuration (exit code 2).
#[derive(Debug)]
pub enum StoreError {
    /// The URL does not parse.
    BadUrl(String),
    /// The database was written by another version of ctxpack.
    Schema(String),
    /// No vault of that name in the store: `(store, vault)`.
    NoVault(String, String),
    /// The store has no `vector` extension and cannot create it.
    NoVectorExtension(String),
    /// A writing project that cannot be synced as one (its recipe is
    /// broken): the message says why.
    Project(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::BadUrl(message)
            | StoreError::Schema(message)
            | StoreError::Project(message) => f.write_str(message),
            StoreError::NoVault(store, vault) => write!(
                f,
                "no vault '{vault}' in the store {store}: sync it first with \
                 `ctxpack index --store URL --vault PATH` (or name another with --vault-id)"
            ),
            StoreError::NoVectorExtension(store) => write!(
                f,
                "the store {store} has no pgvector extension: install pgvector on the server \
                 and run `CREATE EXTENSION vector` as a superuser (or use an image or managed \
                 PostgreSQL that ships it)"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// A `postgres://` URL (or key=value string), parsed.
#[derive(Clone)]
pub struct StoreUrl {
    config: tokio_postgres::Config,
    /// The URL with no password, for messages.
    shown: String,
    /// The URL as given (password included): which pool a process reuses.
    /// Never shown.
    key: String,
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl FromStr for StoreUrl {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<StoreUrl, StoreError> {
        let text = text.trim();
        if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
            return Err(StoreError::BadUrl(
                "a store is a PostgreSQL URL: postgres://USER@HOST[:PORT]/DATABASE[?sslmode=require]"
                    .into(),
            ));
        }
        // The parser's message can quote the text, password included.
        let mut config = tokio_postgres::Config::from_str(text).map_err(|_| {
            StoreError::BadUrl(
                "the store URL does not parse: expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]"
                    .into(),
            )
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("ctxpack");
        }
        let shown = shown(&config);
        Ok(StoreUrl {
            config,
            shown,
            key: text.to_string(),
        })
    }
}

/// `postgres://user@host:port/db`: what a message may say of a store.
fn shown(config: &tokio_postgres::Config) -> String {
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config
        .get_ports()
        .first()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{host}{port}/{db}")
}

/// The runtime every store call runs on. ctxpack's ranking is synchronous
/// and runs on rayon threads or a server's blocking pool, where a tokio
/// `block_on` would panic; a call is spawned here and waited for on a
/// plain channel instead.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ctxpack-store")
            .enable_all()
            .build()
            .expect("cannot start the store's runtime")
    })
}

/// An open pool of connections to one store.
#[derive(Clone)]
pub struct Connection {
    pool: Pool,
    shown: Arc<str>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Connection {
    /// Connects (at most `size` connections at once) and checks that the
    /// store answers.
    pub fn open(url: &StoreUrl, size: usize) -> Result<Connection> {
        // A process opens the same store again and again (a server, for
        // each assemble call and each library it ranks): it reuses its
        // pool rather than logging in anew, which costs a password hash
        // and round trips each time.
        static OPEN: OnceLock<std::sync::Mutex<HashMap<(String, usize), Connection>>> =
            OnceLock::new();
        let key = (url.key.clone(), size);
        let open = OPEN.get_or_init(Default::default);
        let cached = open.lock().ok().and_then(|open| open.get(&key).cloned());
        if let Some(connection) = cached {
            connection.run(|client| async move { client.simple_query("SELECT 1").await })?;
            return Ok(connection);
        }
        let connection = Connection::connect(url, size)?;
        if let Ok(mut open) = open.lock() {
            open.insert(key, connection.clone());
        }
        Ok(connection)
    }

    fn connect(url: &StoreUrl, size: usize) -> Result<Connection> {
        let tls = tls_connector().context("cannot set up TLS")?;
        let manager = Manager::from_config(
            url.config.clone(),
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .build()
            .context("cannot set up the store's connection pool")?;
        let connection = Connection {
            pool,
            shown: Arc::from(url.shown.as_str()),
        };
        connection.run(|client| async move { client.simple_query("SELECT 1").await })?;
        Ok(connection)
    }

    /// The store's URL without a password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `body` with a pooled client and waits for it. A failure names
    /// the store, never its password.
    pub fn run<T, F, Fut>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let pool = self.pool.clone();
        let shown = Arc::clone(&self.shown);
        block(async move {
            let client = pool.get().await.map_err(|err| pool_error(&shown, err))?;
            body(client)
                .await
                .map_err(|err| anyhow::anyhow!("store {shown}: {}", describe(&err)))
        })
    }

    /// Like [`run`](Self::run) for a body that reports its own errors.
    pub fn run_with<T, F, Fut>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send,
    {
        let pool = self.pool.clone();
        let shown = Arc::clone(&self.shown);
        block(async move {
            let client = pool.get().await.map_err(|err| pool_error(&shown, err))?;
            body(client).await
        })
    }

    /// Takes one client out of the pool for a caller that runs several
    /// statements on the same session (a read transaction that must see
    /// one committed state throughout).
    pub fn hold(&self) -> Result<Held> {
        let pool = self.pool.clone();
        let shown = Arc::clone(&self.shown);
        let client = block(async move { pool.get().await.map_err(|err| pool_error(&shown, err)) })?;
        Ok(Held {
            client: Some(Arc::new(client)),
            shown: Arc::clone(&self.shown),
        })
    }

    /// Fails unless the store's schema is the one this build knows.
    pub fn check_schema(&self) -> Result<()> {
        let shown = self.shown.to_string();
        let version = self.run(|client| async move {
            let exists = client
                .query_one("SELECT to_regclass('ctxpack_schema') IS NOT NULL", &[])
                .await?
                .get::<_, bool>(0);
            if !exists {
                return Ok(None);
            }
            let row = client
                .query_opt("SELECT max(version) FROM ctxpack_schema", &[])
                .await?;
            Ok(row.and_then(|r| r.get::<_, Option<i32>>(0)))
        })?;
        match version {
            Some(SCHEMA_VERSION) => Ok(()),
            Some(older) if older < SCHEMA_VERSION => Err(StoreError::Schema(format!(
                "the store {shown} has schema version {older}, this ctxpack reads version \
                 {SCHEMA_VERSION}: upgrade it with `ctxpack index --store URL --vault PATH` \
                 (that sync reads every note again)"
            ))
            .into()),
            Some(other) => Err(StoreError::Schema(format!(
                "the store {shown} has schema version {other}, this ctxpack reads version \
                 {SCHEMA_VERSION}: use the matching ctxpack, or sync into a new database"
            ))
            .into()),
            None => Err(StoreError::Schema(format!(
                "the store {shown} has no ctxpack schema: create it with \
                 `ctxpack index --store URL --vault PATH`"
            ))
            .into()),
        }
    }

    /// Creates the `vector` extension and the schema if they are missing
    /// (one writer at a time), then checks the version.
    pub fn migrate(&self) -> Result<()> {
        let shown = self.shown.to_string();
        let shown_for_error = shown.clone();
        self.run_with(move |mut client| async move {
            let fail =
                |err: tokio_postgres::Error| anyhow::anyhow!("store {shown}: {}", describe(&err));
            let tx = client.transaction().await.map_err(fail)?;
            tx.execute("SELECT pg_advisory_xact_lock(7164083150126535)", &[])
                .await
                .map_err(fail)?;
            let has_vector = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
                    &[],
                )
                .await
                .map_err(fail)?
                .get::<_, bool>(0);
            if !has_vector
                && let Err(err) = tx
                    .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                    .await
            {
                let missing = err.as_db_error().is_some_and(|db| {
                    db.message().contains("is not available")
                        || db
                            .message()
                            .contains("could not open extension control file")
                });
                if missing {
                    return Err(StoreError::NoVectorExtension(shown.clone()).into());
                }
                return Err(anyhow::anyhow!(
                    "store {shown}: cannot create the vector extension ({}): ask an administrator \
                     to run `CREATE EXTENSION vector` in this database",
                    describe(&err)
                ));
            }
            let exists = tx
                .query_one("SELECT to_regclass('ctxpack_schema') IS NOT NULL", &[])
                .await
                .map_err(fail)?
                .get::<_, bool>(0);
            let current: i32 = if exists {
                tx.query_one("SELECT coalesce(max(version), 0) FROM ctxpack_schema", &[])
                    .await
                    .map_err(fail)?
                    .get(0)
            } else {
                0
            };
            for (version, sql) in MIGRATIONS {
                if *version > current {
                    tx.batch_execute(sql).await.map_err(fail)?;
                }
            }
            tx.commit().await.map_err(fail)?;
            Ok(())
        })
        .with_context(|| format!("cannot prepare the store {shown_for_error}"))?;
        self.check_schema()
    }
}

fn pool_error(shown: &str, err: deadpool_postgres::PoolError) -> anyhow::Error {
    match err {
        deadpool_postgres::PoolError::Backend(err) => {
            anyhow::anyhow!("cannot connect to the store {shown}: {}", describe(&err))
        }
        other => anyhow::anyhow!("cannot connect to the store {shown}: {other}"),
    }
}

/// One pooled client kept for a sequence of statements ([`Connection::hold`]).
/// Dropped, it ends whatever transaction it began before the client goes
/// back to the pool; a client that cannot is closed instead.
pub struct Held {
    client: Option<Arc<deadpool_postgres::Object>>,
    shown: Arc<str>,
}

impl Held {
    /// Runs `body` on the held client and waits for it.
    pub fn run<T, F, Fut>(&self, body: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<deadpool_postgres::Object>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send,
    {
        let Some(client) = self.client.clone() else {
            return Err(anyhow::anyhow!(
                "store {}: the client was released",
                self.shown
            ));
        };
        let shown = Arc::clone(&self.shown);
        block(async move {
            body(client)
                .await
                .map_err(|err| anyhow::anyhow!("store {shown}: {}", describe(&err)))
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let ending = Arc::clone(&client);
        let ended = block(async move {
            ending
                .batch_execute("ROLLBACK")
                .await
                .map_err(anyhow::Error::from)
        });
        if ended.is_err()
            && let Ok(object) = Arc::try_unwrap(client)
        {
            // Not back into the pool in an unknown state: closed.
            drop(deadpool_postgres::Object::take(object));
        }
    }
}

/// A client error in one line: the server's message when there is one,
/// else the error and its cause (neither ever holds the password).
pub(super) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    match std::error::Error::source(err) {
        Some(source) => format!("{err}: {source}"),
        None => err.to_string(),
    }
}

/// Runs `future` on the store's runtime and waits for it on this thread.
fn block<T: Send + 'static>(future: impl Future<Output = Result<T>> + Send + 'static) -> Result<T> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        let _ = sender.send(future.await);
    });
    receiver
        .recv()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the store's call was abandoned")))
}

/// rustls with the web's root certificates, plus the PEM file named by
/// `CTXPACK_STORE_CA` (a managed database's own CA). With
/// `sslmode=require` the server's certificate must verify; `prefer` (the
/// default) falls back to plain text when the server offers no TLS.
fn tls_connector() -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = std::env::var_os("CTXPACK_STORE_CA") {
        let (bytes, _) = crate::safe_fs::read_bytes(std::path::Path::new(&path), 1 << 20)
            .map_err(|err| anyhow::anyhow!("CTXPACK_STORE_CA: {err}"))?;
        for cert in rustls_pemfile::certs(&mut bytes.as_slice()) {
            roots
                .add(cert.context("CTXPACK_STORE_CA: not a PEM certificate")?)
                .context("CTXPACK_STORE_CA: certificate refused")?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

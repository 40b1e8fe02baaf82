//! A database of its own for each PostgreSQL test, on the server named by
//! `CTXPACK_TEST_PG` (an admin URL; `scripts/pg-test-server start DIR`
//! prints one). Each test is ignored, with the reason, when it was not set
//! at build time: `#[cfg_attr(not(ctxpack_test_pg), ignore = "…")]`, the
//! `cfg` set by build.rs.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

pub const SERVER_VARIABLE: &str = "CTXPACK_TEST_PG";

/// One test's database, dropped with it.
pub struct Pg {
    admin: String,
    pub name: String,
    /// The database's URL, with the admin's credentials.
    pub url: String,
}

impl Pg {
    /// A fresh, empty database.
    pub fn fresh(test: &str) -> Pg {
        let admin = super::required_env(SERVER_VARIABLE);
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "ctxpack_{}_{}_{}",
            test.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        sql(&admin, &format!("CREATE DATABASE {name}"));
        let url = with_database(&admin, &name);
        Pg { admin, name, url }
    }

    /// Runs `statements` in this database as the admin.
    pub fn sql(&self, statements: &str) {
        sql(&self.url, statements);
    }

    /// The rows of `query` (one column of text per value).
    pub fn rows(&self, query: &str) -> Vec<Vec<Option<String>>> {
        rows(&self.url, query)
    }

    /// This database's URL for another login.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        let rest = self.url.split_once('@').map(|(_, rest)| rest).unwrap_or("");
        format!("postgres://{user}:{password}@{rest}")
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|p| p.parse().ok())
            .expect("a port in the URL")
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = try_sql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
        // Roles a test made are named after its database.
        for row in rows(
            &self.admin,
            &format!(
                "SELECT rolname FROM pg_roles WHERE rolname LIKE '%\\_{}'",
                self.name
            ),
        ) {
            if let Some(role) = &row[0] {
                let _ = try_sql(&self.admin, &format!("DROP ROLE IF EXISTS {role}"));
            }
        }
    }
}

/// `url` with its database replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a database in the URL");
    format!("{base}/{name}")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub fn try_sql(url: &str, statements: &str) -> Result<(), String> {
    runtime().block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        client
            .batch_execute(statements)
            .await
            .map_err(|e| format!("{e:?}"))
    })
}

pub fn sql(url: &str, statements: &str) {
    try_sql(url, statements).unwrap_or_else(|e| panic!("{statements}: {e}"));
}

pub fn rows(url: &str, query: &str) -> Vec<Vec<Option<String>>> {
    runtime().block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .simple_query(query)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_string))
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    })
}

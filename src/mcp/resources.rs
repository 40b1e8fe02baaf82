//! MCP resources: every note as `ctxpack://note/<path>` and every kept
//! pack as `ctxpack://pack/<handle>`. Paths are percent-encoded in URIs
//! (a note's name may hold spaces or `#`), and decoded paths go through
//! the same checks as `get_note`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rmcp::model::{ListResourcesResult, Resource, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, RoleServer};

use crate::session::Session;

pub(super) const NOTE_PREFIX: &str = "ctxpack://note/";
pub(super) const PACK_PREFIX: &str = "ctxpack://pack/";
/// The vault map, at the default budget (`context_pack` with `map: true`
/// takes a budget and a style).
pub(super) const MAP_URI: &str = "ctxpack://map";
/// Resources per page of `resources/list`.
pub(super) const PAGE_SIZE: usize = 200;

/// What a resource URI names.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Target {
    Note(String),
    Pack(String),
    Map,
}

/// The URI of the note at vault path `path`.
pub(super) fn note_uri(path: &str) -> String {
    let mut uri = String::from(NOTE_PREFIX);
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(byte as char);
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The note or pack `uri` names.
pub(super) fn parse_uri(uri: &str) -> Result<Target, String> {
    if let Some(encoded) = uri.strip_prefix(NOTE_PREFIX) {
        return percent_decode(encoded).map(Target::Note);
    }
    if let Some(handle) = uri.strip_prefix(PACK_PREFIX) {
        return Ok(Target::Pack(handle.to_string()));
    }
    if uri == MAP_URI {
        return Ok(Target::Map);
    }
    Err(format!(
        "unknown resource '{}' (expected {NOTE_PREFIX}<path>, {PACK_PREFIX}<handle> or {MAP_URI})",
        crate::text::truncate_chars(uri, 200)
    ))
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a resource URI has a broken %-escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a resource URI is not UTF-8 once decoded".to_string())
}

/// One page of the notes, from the position `cursor` names.
pub(super) fn list(session: &Session, cursor: Option<&str>) -> Result<ListResourcesResult, String> {
    let start = match cursor {
        None => 0,
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| format!("invalid cursor '{}'", crate::text::truncate_chars(text, 40)))?,
    };
    let listed: Vec<_> = session.listed_notes().collect();
    let end = (start + PAGE_SIZE).min(listed.len());
    let resources = listed
        .get(start..end)
        .unwrap_or_default()
        .iter()
        .map(|meta| {
            let mut resource = Resource::new(note_uri(&meta.path), meta.path.clone())
                .with_title(meta.title.clone())
                .with_mime_type("text/markdown");
            if !meta.summary.is_empty() {
                resource = resource.with_description(meta.summary.clone());
            }
            resource
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = (end < listed.len()).then(|| end.to_string());
    Ok(result)
}

/// Subscriptions held at most (all clients together).
pub(super) const MAX_SUBSCRIPTIONS: usize = 10_000;

/// Which client watches which note URI.
#[derive(Default)]
pub(super) struct Subscriptions {
    entries: Mutex<Vec<(String, Peer<RoleServer>)>>,
}

impl Subscriptions {
    pub(super) fn add(&self, uri: String, peer: Peer<RoleServer>) -> Result<(), String> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        // Clients that went away no longer count against the bound.
        entries.retain(|(_, p)| !p.is_transport_closed());
        if entries.len() >= MAX_SUBSCRIPTIONS {
            return Err(format!("at most {MAX_SUBSCRIPTIONS} subscriptions"));
        }
        entries.push((uri, peer));
        Ok(())
    }

    /// Drops `uri` for this client: a connection is known by the client
    /// info it sent at initialization (one shared value per connection).
    pub(super) fn remove(&self, uri: &str, peer: &Peer<RoleServer>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let info = peer.peer_info();
        entries.retain(|(u, p)| {
            let same = match (&info, p.peer_info()) {
                (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, &b),
                _ => false,
            };
            u != uri || !same
        });
    }

    /// Tells the subscribers of the notes among `changed` (absolute paths)
    /// that they changed.
    pub(super) fn notify(
        &self,
        runtime: &tokio::runtime::Handle,
        root: &Path,
        changed: &[PathBuf],
    ) {
        let uris: Vec<String> = changed
            .iter()
            .filter_map(|path| path.strip_prefix(root).ok())
            .filter_map(|relative| relative.to_str())
            .map(|relative| note_uri(&relative.replace(std::path::MAIN_SEPARATOR, "/")))
            .collect();
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for (uri, peer) in entries.iter() {
            if uris.contains(uri) {
                let peer = peer.clone();
                let uri = uri.clone();
                runtime.spawn(async move {
                    let _ = peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_uris_round_trip_and_escape_odd_characters() {
        let path = "concepts/raft #2 分布式.md";
        let uri = note_uri(path);
        assert_eq!(
            uri,
            "ctxpack://note/concepts/raft%20%232%20%E5%88%86%E5%B8%83%E5%BC%8F.md"
        );
        assert_eq!(parse_uri(&uri), Ok(Target::Note(path.into())));
        assert_eq!(
            parse_uri("ctxpack://pack/pack-1-ab"),
            Ok(Target::Pack("pack-1-ab".into()))
        );
        assert!(parse_uri("file:///etc/passwd").is_err());
        assert_eq!(parse_uri("ctxpack://map"), Ok(Target::Map));
        assert!(parse_uri("ctxpack://map/x").is_err());
        assert!(parse_uri("ctxpack://note/%zz").is_err());
        assert_eq!(
            parse_uri("ctxpack://note/%2E%2E/secret.md"),
            Ok(Target::Note("../secret.md".into()))
        );
    }
}

//! Pins, notes left out and the vault map, as a session serves them
//! (issue 41, parts 5, 6 and 8): the paths a face was given resolved the
//! way `--note` resolves its note, the vault's `pins:` added, and the map
//! built from the notes this session lists.

use super::{PackRequest, Session, SessionError, no_links_error};
use crate::pack::Pack;
use crate::pack::map::{map_pack, vault_map};
use crate::pack::style::Shape;
use crate::request::Spelling;

impl Session {
    /// The vault path of a note a face named (a pin, a note to leave out),
    /// refused as `--note` refuses its note: on the command line with the
    /// reasons a file is never packed, in a tool call with the one answer
    /// for every path that is not a readable listed note (a private note
    /// and a missing one look alike).
    pub fn resolve_note(&self, given: &str, spelling: Spelling) -> Result<String, SessionError> {
        match (self.anchor_note(given), spelling) {
            (Ok(path), _) if self.vault.is_listed(&path) => Ok(path),
            (Err(err), Spelling::Flags) => Err(err),
            _ => Err(SessionError::no_note(given)),
        }
    }

    /// Resolves a request's note, pins and notes to leave out in place
    /// (the first refused is the error), and checks the vault's own
    /// `pins:` when the pack is a topic pack. A tool call's note must be
    /// one the walker lists, as every note a client reads; the command
    /// line, the vault owner's, may anchor on any note the vault holds.
    pub fn resolve_pack_notes(
        &self,
        request: &mut PackRequest,
        spelling: Spelling,
    ) -> Result<(), SessionError> {
        if let crate::pack::PackMode::Note(anchor) = &mut request.mode {
            anchor.path = match spelling {
                Spelling::Flags => self.anchor_note(&anchor.path)?,
                Spelling::Params => self.resolve_note(&anchor.path, spelling)?,
            };
        }
        let options = &mut request.options;
        for path in options.pins.iter_mut().chain(options.exclude.iter_mut()) {
            *path = self.resolve_note(path, spelling)?;
        }
        if matches!(request.mode, crate::pack::PackMode::Topic(_)) {
            self.config_pins()?;
        }
        Ok(())
    }

    /// The vault's `pins:` (`.ctxpack.yaml`), resolved; a pin that is not
    /// a note the vault lists refuses every topic pack, naming the file.
    pub fn config_pins(&self) -> Result<Vec<String>, SessionError> {
        self.vault
            .policy()
            .file
            .pins
            .iter()
            .map(|pin| {
                self.resolve_note(pin, Spelling::Flags)
                    .map_err(|err| SessionError::Pin(Box::new(err)))
            })
            .collect()
    }

    /// The pins of a topic pack: the vault's, then the request's, each
    /// once. A vault pin that cannot be resolved is left out here (the
    /// operation refused it before packing).
    pub(super) fn pins(&self, requested: &[String]) -> Vec<String> {
        let mut pins: Vec<String> = self.config_pins().unwrap_or_else(|_| {
            self.vault
                .policy()
                .file
                .pins
                .iter()
                .filter_map(|pin| self.resolve_note(pin, Spelling::Flags).ok())
                .collect()
        });
        for pin in requested {
            if !pins.contains(pin) {
                pins.push(pin.clone());
            }
        }
        pins
    }

    /// The vault map in `shape` within the request's budget (an error is a
    /// template's): the notes this session lists, hubs from the store's
    /// links.
    pub fn map_pack(&self, request: &PackRequest, shape: &Shape) -> Result<Pack, SessionError> {
        let graph = self.store.as_deref().and_then(|store| store.link_graph());
        let links = graph.as_deref().ok_or_else(|| no_links_error(self).message);
        let map = vault_map(&self.vault, &|path| self.vault.is_listed(path), links);
        let policy = self.vault.policy();
        map_pack(&map, &request.options, shape, &|text| {
            policy.redact_printed(text)
        })
        // `to_string` whatever the map's error type: a template's.
        .map_err(SessionError::Shape)
    }

    pub(super) fn markdown_map(&self, request: &PackRequest) -> Pack {
        match self.map_pack(request, &Shape::default()) {
            Ok(pack) => pack,
            // Only a template fails, and markdown is none.
            Err(_) => crate::pack::build_pack(&self.vault, &request.mode, &request.options),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::{NoteAnchor, PackMode, PackOptions};

    /// A vault whose `drafts/` the session does not list, though its
    /// notes were read (as a policy's hidden folder leaves them).
    fn session() -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("drafts")).unwrap();
        std::fs::write(dir.path().join("drafts/plan.md"), "# Plan\n\nraft\n").unwrap();
        std::fs::write(dir.path().join("raft.md"), "# Raft\n\nleader\n").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut vault = crate::vault::Vault::load(&root, &Default::default()).unwrap();
        vault.set_hidden(vec!["drafts".into()]);
        (dir, Session::without_index(vault))
    }

    fn note_request(path: &str) -> PackRequest {
        let anchor = NoteAnchor {
            path: path.into(),
            depth: 0,
            include_self: true,
        };
        let options = PackOptions::new(500, crate::tokens::Tokenizer::Chars4, Default::default());
        PackRequest::new(PackMode::Note(anchor), options)
    }

    fn anchor(request: &PackRequest) -> &str {
        match &request.mode {
            PackMode::Note(anchor) => &anchor.path,
            other => panic!("not a note pack: {other:?}"),
        }
    }

    #[test]
    fn a_tool_calls_note_must_be_listed_and_the_command_lines_need_only_exist() {
        let (_dir, session) = session();
        let mut request = note_request("raft");
        session
            .resolve_pack_notes(&mut request, Spelling::Params)
            .unwrap();
        assert_eq!(anchor(&request), "raft.md");

        let mut request = note_request("drafts/plan");
        let err = session
            .resolve_pack_notes(&mut request, Spelling::Params)
            .unwrap_err();
        assert!(matches!(&err, SessionError::NoNote(given) if given == "drafts/plan"));
        assert_eq!(err.to_string(), crate::session::ops::no_note("drafts/plan"));
        assert_eq!(anchor(&request), "drafts/plan");

        let mut request = note_request("drafts/plan");
        session
            .resolve_pack_notes(&mut request, Spelling::Flags)
            .unwrap();
        assert_eq!(anchor(&request), "drafts/plan.md");
    }
}

//! Progress of long work (reading a vault, embedding it), reported as
//! events to a callback that the face supplies. The library never draws:
//! the CLI turns the events into a bar on a terminal, the MCP server and
//! library callers pass none.

use std::fmt;
use std::sync::Arc;

/// Which long piece of work an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading, parsing and indexing notes; counted in notes.
    Indexing,
    /// Embedding chunks for the semantic arm; counted in chunks.
    Embedding,
}

/// One step of a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The stage starts with `total` units of work.
    Started { stage: Stage, total: u64 },
    /// `count` more units are done.
    Advanced { stage: Stage, count: u64 },
    /// The stage is over.
    Finished { stage: Stage },
}

type Callback = dyn Fn(Event) + Send + Sync;

/// Where progress events go: a callback, or nowhere (the default).
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<Callback>>);

impl Progress {
    /// Reports to `callback`, which may be called from any thread.
    pub fn new(callback: impl Fn(Event) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(callback)))
    }

    /// Reports nowhere.
    pub fn none() -> Progress {
        Progress(None)
    }

    pub fn report(&self, event: Event) {
        if let Some(callback) = &self.0 {
            callback(event);
        }
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(callback)"
        } else {
            "Progress(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn events_reach_the_callback_in_order_and_none_goes_nowhere() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let progress = Progress::new(move |event| sink.lock().unwrap().push(event));
        let stage = Stage::Embedding;
        progress.report(Event::Started { stage, total: 3 });
        progress.report(Event::Advanced { stage, count: 3 });
        progress.report(Event::Finished { stage });
        Progress::none().report(Event::Finished { stage });
        assert_eq!(
            *seen.lock().unwrap(),
            [
                Event::Started { stage, total: 3 },
                Event::Advanced { stage, count: 3 },
                Event::Finished { stage },
            ]
        );
    }
}

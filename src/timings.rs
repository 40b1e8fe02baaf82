//! `CTXPACK_TIMINGS=1`: where a command's milliseconds go, one line per
//! phase on stderr (never in anything cached or compared).

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var_os("CTXPACK_TIMINGS").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// A phase being timed; its time is printed when it is dropped.
#[must_use = "a phase is timed until it is dropped"]
pub(crate) struct Phase {
    name: &'static str,
    detail: String,
    started: Option<Instant>,
}

/// Starts timing the phase `name`.
pub(crate) fn phase(name: &'static str) -> Phase {
    Phase {
        name,
        detail: String::new(),
        started: enabled().then(Instant::now),
    }
}

impl Phase {
    /// Adds what the phase found (printed after its time).
    pub(crate) fn note(&mut self, detail: impl FnOnce() -> String) {
        if self.started.is_some() {
            self.detail = detail();
        }
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(started) = self.started {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let sep = if self.detail.is_empty() { "" } else { "  " };
            eprintln!(
                "ctxpack: timing: {:<22} {ms:>8.2} ms{sep}{}",
                self.name, self.detail
            );
        }
    }
}

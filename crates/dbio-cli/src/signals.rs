//! SIGINT (Ctrl-C), SIGTERM and SIGHUP, counted into the [`Interrupts`] that setup, check,
//! runs, ramps and the server engine stop on. SIGTERM is what `timeout`, systemd, CI
//! runners and `docker stop` send, and SIGHUP what a closed terminal sends: each ends a run
//! as Ctrl-C does (statements cancelled, the result written with status `interrupted`);
//! the second of any of them ends the wait for sessions at once.
//!
//! The handlers are installed on first use (when such a command starts), not at process
//! start: once installed, a signal no longer ends the process by itself, so a command that
//! does not listen (compare, scratch) keeps the default behaviour.

use std::sync::Mutex;

use dbio_core::interrupt::Interrupts;
use tokio::signal::unix::{SignalKind, signal};

/// The listener of this process's runtime; reset when the runtime ends (see `forget`).
static LISTENER: Mutex<Option<Interrupts>> = Mutex::new(None);

/// The interrupts of this process, listening from the first call on. Needs a runtime.
pub(crate) fn interrupts() -> Interrupts {
    let Ok(mut listener) = LISTENER.lock() else {
        return Interrupts::never();
    };
    if let Some(i) = listener.as_ref() {
        return i.clone();
    }
    let (tx, rx) = Interrupts::channel();
    let tx = std::sync::Arc::new(tx);
    for (kind, name) in [
        (SignalKind::interrupt(), "Ctrl-C"),
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::hangup(), "SIGHUP"),
    ] {
        match signal(kind) {
            Ok(mut stream) => {
                let tx = std::sync::Arc::clone(&tx);
                tokio::spawn(async move {
                    while stream.recv().await.is_some() {
                        tx.send(name);
                    }
                });
            }
            Err(e) => eprintln!(
                "dbio: warning: cannot watch {name} ({e}); it will end dbio without a result"
            ),
        }
    }
    *listener = Some(rx.clone());
    rx
}

/// Forgets the listener when its runtime ends, so a later runtime in the same process
/// (tests driving the CLI in-process) installs its own.
pub(crate) fn forget() {
    if let Ok(mut l) = LISTENER.lock() {
        *l = None;
    }
}

//! SIGINT (Ctrl-C), SIGTERM and SIGHUP, counted into the [`Interrupts`] that setup, check,
//! runs, ramps and the server engine stop on. SIGTERM is what `timeout`, systemd, CI
//! runners and `docker stop` send, and SIGHUP what a closed terminal sends: each ends a run
//! as Ctrl-C does (statements cancelled, the result written with status `interrupted`);
//! the second of any of them ends the wait for sessions at once.
//!
//! A SIGHUP that the process ignores (`nohup dbio run ...`) stays ignored.
//!
//! The same signal again within [`REPEAT_WINDOW`] counts once: `timeout -s INT` sends SIGINT to
//! dbio and then to its process group, and a terminal's Ctrl-C reaches every process of the
//! foreground group; neither is the user asking a second time.
//!
//! The handlers are installed on first use (when such a command starts), not at process
//! start: once installed, a signal no longer ends the process by itself, so a command that
//! does not listen (compare, scratch) keeps the default behaviour.

use std::sync::Mutex;

use dbio_core::interrupt::Interrupts;
use tokio::signal::unix::{SignalKind, signal};

/// A repeat of the same signal sooner than this after the one counted is the same request.
pub(crate) const REPEAT_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

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
        if name == "SIGHUP" && ignored(libc::SIGHUP) {
            // `nohup dbio run ...`: the user asked for the run to outlive the terminal.
            continue;
        }
        match signal(kind) {
            Ok(mut stream) => {
                let tx = std::sync::Arc::clone(&tx);
                tokio::spawn(async move {
                    let mut counted: Option<std::time::Instant> = None;
                    while stream.recv().await.is_some() {
                        if counted.is_some_and(|t| t.elapsed() < REPEAT_WINDOW) {
                            continue;
                        }
                        counted = Some(std::time::Instant::now());
                        tx.send(name);
                    }
                });
            }
            Err(e) => errln!(
                "dbio: warning: cannot watch {name} ({e}); it will end dbio without a result"
            ),
        }
    }
    *listener = Some(rx.clone());
    rx
}

/// The signal is ignored in this process (nohup ignores SIGHUP before exec).
fn ignored(signal: libc::c_int) -> bool {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction(2) only writes the current one into `old`.
    let rc = unsafe { libc::sigaction(signal, std::ptr::null(), old.as_mut_ptr()) };
    // SAFETY: on success the struct is initialised (it was zeroed before in any case).
    rc == 0 && unsafe { old.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Forgets the listener when its runtime ends, so a later runtime in the same process
/// (tests driving the CLI in-process) installs its own.
pub(crate) fn forget() {
    if let Ok(mut l) = LISTENER.lock() {
        *l = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ignored_signal_is_seen_as_ignored() {
        // SIGWINCH: nothing in the test process depends on it.
        // SAFETY: signal(2) with the predefined dispositions.
        let before = unsafe { libc::signal(libc::SIGWINCH, libc::SIG_IGN) };
        assert!(ignored(libc::SIGWINCH));
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGWINCH, libc::SIG_DFL) };
        assert!(!ignored(libc::SIGWINCH));
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGWINCH, before) };
    }
}

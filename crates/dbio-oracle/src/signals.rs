//! Keeps dbio's own handlers of SIGINT, SIGTERM and SIGHUP in place while the Oracle client
//! initialises. The OCI library may install handlers of its own when it creates its
//! environment or a connection (for its break handling and diagnostics: sqlnet.ora's
//! DIAG_SIGHANDLER_ENABLED, BREAK_POLL_SKIP; 4js Genero's Oracle notes tell users to stop it
//! taking SIGINT), which would leave Ctrl-C to the client library instead of dbio: setup would
//! not stop, a run would not end with its result written. dbio breaks its own statements
//! (`dpiConn_breakExecution`), so it needs none of the client's handlers: whatever the call
//! changed for these three signals is put back as it was.

/// The signals dbio listens to (its CLI's `signals`).
const WATCHED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The handlers of the watched signals now.
fn current() -> Vec<(libc::c_int, libc::sigaction)> {
    WATCHED
        .iter()
        .filter_map(|&sig| {
            let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: with a null new action, sigaction(2) only writes the current one.
            let rc = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) };
            // SAFETY: initialised by sigaction on success (zeroed before in any case).
            (rc == 0).then(|| (sig, unsafe { old.assume_init() }))
        })
        .collect()
}

fn same(a: &libc::sigaction, b: &libc::sigaction) -> bool {
    a.sa_sigaction == b.sa_sigaction && a.sa_flags == b.sa_flags
}

/// Runs `f` (a call into the Oracle client) and restores every watched signal's handler it
/// replaced; returns `f`'s result and the signals that had to be restored.
pub fn keep_handlers<T>(f: impl FnOnce() -> T) -> (T, Vec<libc::c_int>) {
    let before = current();
    let out = f();
    let mut restored = Vec::new();
    for (sig, now) in current() {
        let Some((_, was)) = before.iter().find(|(s, _)| *s == sig) else {
            continue;
        };
        if !same(was, &now) {
            // SAFETY: `was` is a handler sigaction(2) reported for this signal before `f`.
            let rc = unsafe { libc::sigaction(sig, was, std::ptr::null_mut()) };
            if rc == 0 {
                restored.push(sig);
            }
        }
    }
    (out, restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn stand_in(_: libc::c_int) {}

    // Whether dbio still saw Ctrl-C once the Oracle client installed its own handlers was
    // untested: a call that replaces the SIGHUP handler (as a client library may) gets it
    // put back. SIGHUP: the test process does not depend on it.
    #[test]
    fn a_handler_replaced_inside_the_call_is_put_back() {
        // SAFETY: signal(2) with the predefined disposition and a handler that does nothing.
        let original = unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
        let ((), restored) = keep_handlers(|| {
            // SAFETY: as above.
            unsafe { libc::signal(libc::SIGHUP, stand_in as *const () as libc::sighandler_t) };
        });
        assert_eq!(restored, vec![libc::SIGHUP]);
        let after = current();
        let hup = after.iter().find(|(s, _)| *s == libc::SIGHUP).unwrap();
        assert_eq!(
            hup.1.sa_sigaction,
            libc::SIG_IGN,
            "the handler before the call is back"
        );
        // A call that changes nothing restores nothing.
        let (v, restored) = keep_handlers(|| 7);
        assert_eq!((v, restored), (7, vec![]));
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGHUP, original) };
    }
}

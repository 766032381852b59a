//! The user's requests to stop, counted: Ctrl-C (SIGINT), SIGTERM (what `timeout`, systemd,
//! CI runners and `docker stop` send) and SIGHUP (a closed terminal). The first ends a run
//! gracefully: statements cancelled, sessions given a bounded grace to answer, the result
//! written with status `interrupted`. The second ends the wait at once, with what is known.
//! The binary turns signals into these; the driver and the tests only see the count.

use std::time::Duration;

use tokio::sync::watch;

/// What stopped the run, and how many times the user asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Asked {
    count: u32,
    by: &'static str,
}

/// Sends interrupts (the binary's signal listener; tests).
#[derive(Debug)]
pub struct InterruptSender(watch::Sender<Asked>);

impl InterruptSender {
    /// Counts one request to stop; `by` names it in messages (`Ctrl-C`, `SIGTERM`).
    pub fn send(&self, by: &'static str) {
        self.0.send_modify(|a| {
            a.count += 1;
            a.by = by;
        });
    }
}

/// Watches the requests to stop; cheap to clone.
#[derive(Debug, Clone)]
pub struct Interrupts {
    rx: watch::Receiver<Asked>,
}

impl Interrupts {
    pub fn channel() -> (InterruptSender, Interrupts) {
        let (tx, rx) = watch::channel(Asked { count: 0, by: "" });
        (InterruptSender(tx), Interrupts { rx })
    }

    /// Never interrupted.
    pub fn never() -> Interrupts {
        Interrupts::channel().1
    }

    /// Interrupted once, `after` from now (tests of the driver's own logic); needs a runtime.
    pub fn after(after: Duration) -> Interrupts {
        Interrupts::after_each(&[after])
    }

    /// Interrupted once at each of these delays from now; needs a runtime.
    pub fn after_each(delays: &[Duration]) -> Interrupts {
        let (tx, rx) = Interrupts::channel();
        let mut delays = delays.to_vec();
        delays.sort();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for d in delays {
                tokio::time::sleep_until(start + d).await;
                tx.send("a test interrupt");
            }
            // Keep the sender, so the count stays readable after the last one.
            std::future::pending::<()>().await;
        });
        rx
    }

    /// Requests so far.
    pub fn count(&self) -> u32 {
        self.rx.borrow().count
    }

    /// Resolves once `n` requests to stop have arrived, with the name of the last one
    /// (`Ctrl-C`, `SIGTERM`); never, when nothing can send any more.
    pub async fn reached(mut self, n: u32) -> &'static str {
        let by = self.rx.wait_for(|a| a.count >= n).await.map(|a| a.by);
        match by {
            Ok(by) => by,
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_are_counted_and_named() {
        let (tx, rx) = Interrupts::channel();
        assert_eq!(rx.count(), 0);
        tx.send("SIGTERM");
        assert_eq!(rx.clone().reached(1).await, "SIGTERM");
        let second = tokio::spawn(rx.clone().reached(2));
        tx.send("Ctrl-C");
        assert_eq!(second.await.unwrap(), "Ctrl-C");
        assert_eq!(rx.count(), 2);
        let never = tokio::time::timeout(Duration::from_millis(20), Interrupts::never().reached(1));
        assert!(
            never.await.is_err(),
            "a channel nobody sends on never fires"
        );
    }
}

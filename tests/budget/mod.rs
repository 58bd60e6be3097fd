//! The bound of a storm or soak loop: at most `most` rounds (or kills, or claims) and at most
//! `limit` of wall time, whichever comes first; and at least `least` of them by then, or the
//! test fails. So a slow or loaded machine makes a storm shorter, never endless, and a broken
//! one (every round waiting out a timeout, as a missing outside writer once made every
//! `allocate` wait 2.5 s for 40 minutes) fails saying so, instead of passing on nothing.
//!
//! ```text
//! let budget = Budget::new("kill storm", 90, Duration::from_secs(150)).at_least(20);
//! while budget.more(kills) { … }
//! eprintln!("{}", budget.finish());
//! ```

// Every test crate uses a different subset.
#![allow(dead_code)]

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How many rounds a loop may run, and for how long; see the module's documentation.
pub struct Budget {
    what: String,
    most: usize,
    least: usize,
    limit: Duration,
    started: Instant,
    /// What the loop had done when it last asked [`Budget::more`].
    done: Cell<usize>,
    /// When the time ran out first, with what was done then.
    cut: Cell<Option<usize>>,
    checked: Cell<bool>,
}

impl Budget {
    /// At most `most` (rounds, kills, …) and at most `limit`, from now; at least one.
    /// `IPAMCTL_STORM_SECONDS=S` sets every limit (a long run cut to the time there is).
    pub fn new(what: &str, most: usize, limit: Duration) -> Budget {
        let limit = std::env::var("IPAMCTL_STORM_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(limit, Duration::from_secs);
        Budget {
            what: what.to_owned(),
            most,
            least: 1.min(most),
            limit,
            started: Instant::now(),
            done: Cell::new(0),
            cut: Cell::new(None),
            checked: Cell::new(false),
        }
    }

    /// The floor: fewer than `least` by the end fails the test.
    pub fn at_least(mut self, least: usize) -> Budget {
        self.least = least.min(self.most);
        self
    }

    /// Whether another round may start, `done` being what the loop has done so far: while
    /// `done` is under the count and time is left.
    pub fn more(&self, done: usize) -> bool {
        self.done.set(done);
        if done >= self.most {
            return false;
        }
        if self.started.elapsed() >= self.limit {
            self.cut.set(Some(done));
            return false;
        }
        true
    }

    /// The rounds `0, 1, …` while [`Budget::more`] allows them.
    pub fn rounds(&self) -> impl Iterator<Item = usize> + '_ {
        (0..).take_while(|&r| self.more(r))
    }

    /// What the loop had done when it last asked.
    pub fn done(&self) -> usize {
        self.done.get()
    }

    /// Checks the floor (panics below it) and says what was done: `kill storm: 90 of 90 in
    /// 61.2 s`, or `… 40 of 90 in 150.0 s (the time ran out first)`.
    #[track_caller]
    pub fn finish(&self) -> String {
        self.checked.set(true);
        let done = self.done.get();
        let took = self.started.elapsed().as_secs_f64();
        assert!(
            done >= self.least,
            "{}: only {done} done in {took:.1} s, fewer than the {} it must do (at most {} in \
             {} s): the machine is too slow for this test, or each round waits for something \
             that never comes",
            self.what,
            self.least,
            self.most,
            self.limit.as_secs()
        );
        let cut = if self.cut.get().is_some() {
            " (the time ran out first)"
        } else {
            ""
        };
        format!("{}: {done} of {} in {took:.1} s{cut}", self.what, self.most)
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        // A loop that ended without `finish` is checked all the same, unless the test is
        // already failing.
        if !self.checked.get() && !std::thread::panicking() {
            self.finish();
        }
    }
}

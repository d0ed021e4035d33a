//! perftest's "BW peak": the fastest run of consecutive messages in a bandwidth loop.
//!
//! perftest's `ib_*_bw` (26.04, `run_iter_bw` and `print_report_bw`) stamps the cycle
//! counter before each `ibv_post_send` (`tposted[i]`, i the first message of the post, so
//! one stamp per `-l` chain) and on each completion it polls (`tcompleted[j]`, j the last
//! message that completion accounts for: one in `-Q` is signaled). Its peak is the
//! smallest time per message over every window that starts at a post and ends at a
//! completion after it:
//!
//! ```text
//!     min over i <= j of (tcompleted[j] - tposted[i]) / (j - i + 1)
//! ```
//!
//! and BW peak = message size / that time. The whole run is one such window, so the peak
//! is never below the run's average. perftest measures it only in iteration mode, with at
//! most 20000 iterations, and not on a send receiver; `-N` turns it off.
//!
//! perftest searches every (post, completion) pair: quadratic, which is why it gives up
//! above 20000 iterations. [`MessageStamps::fastest`] finds the same window in
//! O(n log 1/eps): for a trial time t, some window is at least that fast exactly when
//! `tcompleted[j] - t(j + 1) <= tposted[i] - t i` for some i <= j, one pass with a running
//! maximum; t is then bisected. The window it returns is perftest's (up to ties), and its
//! time comes from the stamps themselves, not from the bisection.

/// Post and completion stamps of one timed loop, in the loop clock's raw ticks. Only
/// stamps that were taken are kept (a post stamps its first message, a completion its
/// last), in the order they were taken, so message numbers rise in each list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageStamps {
    /// (message number from 0, tick) before each post.
    posted: Vec<(u64, u64)>,
    /// (message number from 0, tick) when a completion showed that message done.
    completed: Vec<(u64, u64)>,
}

/// The fastest window: messages `first..=last`, from the post of `first` to the completion
/// that showed `last` done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub first: u64,
    pub last: u64,
    pub posted_tick: u64,
    pub completed_tick: u64,
}

impl Window {
    /// Messages in the window.
    pub fn messages(&self) -> u64 {
        self.last - self.first + 1
    }
}

impl MessageStamps {
    /// Room for `posts` post stamps and `completions` completion stamps, reserved before
    /// the loop so that stamping in it never allocates.
    pub fn with_capacity(posts: usize, completions: usize) -> Self {
        Self {
            posted: Vec::with_capacity(posts),
            completed: Vec::with_capacity(completions),
        }
    }

    /// Stamps a post whose first message is number `message` (from 0).
    #[inline(always)]
    pub fn post(&mut self, message: u64, tick: u64) {
        self.posted.push((message, tick));
    }

    /// Stamps a completion that shows messages up to number `message` done.
    #[inline(always)]
    pub fn complete(&mut self, message: u64, tick: u64) {
        self.completed.push((message, tick));
    }

    /// The window with the least time per message; `None` without a post followed by a
    /// completion.
    pub fn fastest(&self) -> Option<Window> {
        let (&(_, t0), _) = self.posted.split_first()?;
        // Ticks relative to the first post: small enough for f64 to hold exactly.
        let rel = |t: u64| t.saturating_sub(t0) as f64;
        // The fastest window of those at least as fast as `t` per message, if any.
        let within = |t: f64| -> Option<Window> {
            let mut best: Option<(f64, usize)> = None;
            let mut p = 0;
            for &(j, cj) in &self.completed {
                while p < self.posted.len() && self.posted[p].0 <= j {
                    let (i, pi) = self.posted[p];
                    let a = rel(pi) - t * i as f64;
                    if best.is_none_or(|(b, _)| a > b) {
                        best = Some((a, p));
                    }
                    p += 1;
                }
                if let Some((a, at)) = best {
                    if rel(cj) - t * (j + 1) as f64 <= a {
                        let (i, pi) = self.posted[at];
                        return Some(Window {
                            first: i,
                            last: j,
                            posted_tick: pi,
                            completed_tick: cj,
                        });
                    }
                }
            }
            None
        };
        let span = |w: &Window| rel(w.completed_tick) - rel(w.posted_tick);
        let rate = |w: &Window| span(w) / w.messages() as f64;
        // Every window is at least as fast as its own span, so any window qualifies for a
        // bound past the last stamp; each bisection step then keeps one as fast as the
        // bound, so the last one kept is the answer.
        let longest = self
            .completed
            .iter()
            .map(|&(_, t)| rel(t))
            .fold(0.0, f64::max);
        let mut found = within(longest + 1.0)?;
        let (mut lo, mut hi) = (0.0_f64, rate(&found));
        for _ in 0..100 {
            if hi - lo <= hi * 1e-12 {
                break;
            }
            let mid = (lo + hi) / 2.0;
            match within(mid) {
                Some(w) => {
                    hi = rate(&w).min(mid);
                    found = w;
                }
                None => lo = mid,
            }
        }
        Some(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// perftest's own search, over the stamps that were taken.
    fn brute_force(s: &MessageStamps) -> Option<f64> {
        let mut best: Option<f64> = None;
        for &(i, pi) in &s.posted {
            for &(j, cj) in &s.completed {
                if j >= i {
                    let t = cj.saturating_sub(pi) as f64 / (j - i + 1) as f64;
                    best = Some(best.map_or(t, |b: f64| b.min(t)));
                }
            }
        }
        best
    }

    fn per_message(w: &Window) -> f64 {
        (w.completed_tick - w.posted_tick) as f64 / w.messages() as f64
    }

    #[test]
    fn a_burst_in_the_middle_is_the_peak() {
        // Posts 10 ticks apart but messages 4..=7 in a burst 2 apart; each completes 30
        // ticks after its post, one completion every 2 messages.
        let posts = [1000, 1010, 1020, 1030, 1040, 1042, 1044, 1046, 1060, 1070];
        let mut s = MessageStamps::default();
        for (i, &t) in posts.iter().enumerate() {
            s.post(i as u64, t);
        }
        for j in [1usize, 3, 5, 7, 9] {
            s.complete(j as u64, posts[j] + 30);
        }
        let w = s.fastest().unwrap();
        // 4..=7: posted at 1040, done at 1076, 9 ticks a message; the whole run is 10,
        // 3..=7 is 9.2.
        assert_eq!(
            (w.first, w.last, w.posted_tick, w.completed_tick),
            (4, 7, 1040, 1076)
        );
        assert_eq!(per_message(&w), brute_force(&s).unwrap());
    }

    #[test]
    fn steady_stream_peaks_at_its_average() {
        let mut s = MessageStamps::default();
        for i in 0..100 {
            s.post(i, 7 * i);
            s.complete(i, 7 * i + 7);
        }
        let w = s.fastest().unwrap();
        assert!((per_message(&w) - 7.0).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn nothing_to_measure_without_a_post_and_a_later_completion() {
        assert_eq!(MessageStamps::default().fastest(), None);
        let mut s = MessageStamps::default();
        s.post(5, 100);
        assert_eq!(s.fastest(), None);
        // A completion of messages before the only post is no window.
        s.complete(3, 200);
        assert_eq!(s.fastest(), None);
        s.complete(5, 250);
        assert_eq!(s.fastest().map(|w| w.messages()), Some(1));
    }

    proptest! {
        /// The bisection finds perftest's quadratic answer on any loop's stamps: posts in
        /// chains (`-l`), completions every few messages (`-Q`), jittered ticks.
        #[test]
        fn matches_perftests_search(
            chain in 1u64..4,
            every in 1u64..8,
            gaps in proptest::collection::vec(1u64..500, 2..200),
            lags in proptest::collection::vec(0u64..3000, 2..200),
        ) {
            let n = gaps.len().min(lags.len()) as u64;
            let mut s = MessageStamps::default();
            let mut tick = 1_000_000_000u64;
            let mut posted_at = Vec::new();
            for i in 0..n {
                tick += gaps[i as usize];
                posted_at.push(tick);
                if i % chain == 0 {
                    s.post(i, tick);
                }
            }
            // A completion arrives after its message's post, and never before an earlier one.
            let mut done = 0u64;
            for j in 0..n {
                if (j + 1) % every == 0 || j == n - 1 {
                    done = done.max(posted_at[j as usize] + lags[j as usize]);
                    s.complete(j, done);
                }
            }
            let want = brute_force(&s).unwrap();
            let w = s.fastest().unwrap();
            let got = per_message(&w);
            prop_assert!((got - want).abs() <= want * 1e-9, "got {got} want {want} {w:?}");
        }
    }
}

//! Windows of generations named by the epoch of the server's clock (SPEC.md §4 "window"): the
//! arithmetic every windowed kind shares (a window filter's strings, a window over module
//! filters), as the scripts compute it (`lua/window_args.lua`, `lua/window_epoch.lua`).

use std::ops::RangeInclusive;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A window of `window_ms` over `generations` generations (at least 2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epochs {
    pub(crate) window_ms: u64,
    pub(crate) generations: u32,
}

impl Epochs {
    /// The generation of the time `ms`.
    pub(crate) fn epoch_of(self, ms: u64) -> i64 {
        epoch_of(ms, self.window_ms, self.generations)
    }

    /// The moment (ms) generation `epoch` leaves the window, as the add scripts that make it
    /// set it: the last millisecond before `(epoch + G) · W / (G − 1)`.
    pub(crate) fn leaves_at(self, epoch: i64) -> u64 {
        let g = u128::from(self.generations);
        let end = u128::try_from(epoch).unwrap_or(0) + g;
        let at = (end * u128::from(self.window_ms)).div_ceil(g - 1);
        u64::try_from(at.saturating_sub(1)).unwrap_or(u64::MAX)
    }

    /// The generations a part may have at `epoch`: from the oldest live one to the next (a
    /// client whose clock runs ahead may have made it).
    pub(crate) fn live(self, epoch: i64) -> RangeInclusive<i64> {
        epoch - i64::from(self.generations) + 1..=epoch + 1
    }
}

/// The generation of the time `ms`, as the scripts compute it.
pub(crate) fn epoch_of(ms: u64, window_ms: u64, generations: u32) -> i64 {
    let epoch = u128::from(ms) * u128::from(generations - 1) / u128::from(window_ms);
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

/// The server's time in ms from `TIME`'s reply.
pub(crate) fn server_ms((secs, micros): (u64, u64)) -> u64 {
    secs * 1_000 + micros / 1_000
}

/// The client's guess of the server's clock: its own clock until the server has said
/// otherwise, then the server's time it last heard plus the time elapsed since.
#[derive(Debug, Default)]
pub(crate) struct ServerClock(Mutex<Option<(Instant, u64)>>);

impl ServerClock {
    pub(crate) fn now_ms(&self) -> u64 {
        let heard = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match heard {
            Some((at, ms)) => ms.saturating_add(millis(at.elapsed())),
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, millis),
        }
    }

    pub(crate) fn learn(&self, server_ms: u64) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), server_ms));
    }
}

/// `duration` in whole milliseconds (saturating).
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_are_whole_generations_of_the_window() {
        // W = 3000 ms over 4 generations: 1000 ms each.
        assert_eq!(epoch_of(0, 3000, 4), 0);
        assert_eq!(epoch_of(999, 3000, 4), 0);
        assert_eq!(epoch_of(1000, 3000, 4), 1);
        // W = 2000 ms over 4 generations: 666.67 ms each.
        assert_eq!(epoch_of(666, 2000, 4), 0);
        assert_eq!(epoch_of(667, 2000, 4), 1);
        assert_eq!(epoch_of(1_795_382_209_000, 3_600_000, 4), 1_496_151);
    }

    #[test]
    fn a_generation_leaves_the_window_g_generations_after_it_began() {
        let w = Epochs {
            window_ms: 3000,
            generations: 4,
        };
        // Generation 5 began at 5000 ms; it leaves at 9000 ms (the key goes after 8999).
        assert_eq!(w.leaves_at(5), 8_999);
        assert_eq!(w.epoch_of(w.leaves_at(5) + 1), 9);
        assert_eq!(w.live(9), 6..=10);
    }
}

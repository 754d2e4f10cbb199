//! The in-process parts of a near cache: the items this handle added since its copy was read
//! ([`Overlay`]), a counter for many threads ([`Striped`]), and the one-at-a-time right to read
//! a new copy ([`Turn`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// Items added through a handle kept beside its copy until the next copy is read.
pub(crate) const OVERLAY_ITEMS: usize = 65_536;

/// A counter added to by many threads at once, each on a cache line of its own (one shared
/// counter costs the fast path more than its lookup on a busy machine).
#[derive(Debug, Default)]
pub(super) struct Striped([Padded; STRIPES]);

const STRIPES: usize = 8;

#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl Striped {
    pub(super) fn add(&self, n: u64) {
        thread_local! {
            static STRIPE: usize = {
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
            };
        }
        let stripe = STRIPE.with(|s| *s);
        self.0[stripe].0.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn sum(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

/// The right to read a new copy, held by one call at a time; given back when dropped (also
/// when the call is cancelled).
pub(super) struct Turn<'a>(&'a AtomicBool);

impl<'a> Turn<'a> {
    pub(super) fn take(flag: &'a AtomicBool) -> Option<Self> {
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| Turn(flag))
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Items this handle added since the copy was read: their 128-bit hashes, each with when it
/// was added.
#[derive(Debug, Default)]
pub(super) struct Overlay {
    len: AtomicUsize,
    items: Mutex<HashMap<(u64, u64), u64>>,
}

impl Overlay {
    /// Keeps `items`; `false` when there is no room for them.
    pub(super) fn add<T: AsRef<[u8]>>(&self, items: &[T], now: u64) -> bool {
        let mut kept = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() + items.len() > OVERLAY_ITEMS {
            return false;
        }
        for item in items {
            kept.insert(crate::hash::murmur3_x64_128(item.as_ref()), now);
        }
        self.len.store(kept.len(), Ordering::Release);
        true
    }

    pub(super) fn contains(&self, item: &[u8]) -> bool {
        if self.len.load(Ordering::Acquire) == 0 {
            return false;
        }
        let hash = crate::hash::murmur3_x64_128(item);
        self.items
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&hash)
    }

    /// Forgets the items added before `began` (a copy read since holds them).
    pub(super) fn prune(&self, began: u64) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut kept = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|_, at| *at >= began);
        self.len.store(kept.len(), Ordering::Release);
    }

    pub(super) fn clear(&self) {
        let mut kept = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        kept.clear();
        self.len.store(0, Ordering::Release);
    }
}

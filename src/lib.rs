// The crate's page (docs.rs): docs/crate.md, whose links are intra-doc links; the README, whose
// links are relative to the repository, is doc-tested but not rendered (tests/readme.rs).
#![doc = include_str!("../docs/crate.md")]
#![cfg_attr(doctest, doc = include_str!("../README.md"))]
// docs/cluster.md's and docs/guide.md's Rust examples are doc tests too, though not part of the
// rendered docs.
#![cfg_attr(doctest, doc = include_str!("../docs/cluster.md"))]
#![cfg_attr(doctest, doc = include_str!("../docs/guide.md"))]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod bitfield;
mod core;
mod dense;
mod engine;
mod epochs;
mod error;
mod geometry;
mod hash;
mod info;
mod io;
mod keys;
mod kinds;
mod layout;
mod metrics;
mod near;
mod options;
mod retry;
mod scripts;
#[cfg(feature = "sentinel")]
pub mod sentinel;
mod sizing;
mod snapshot;

pub use self::{
    bitfield::MAX_OFFSETS_PER_COMMAND,
    core::{builder::Builder, legacy::adopt_legacy_names, stored::StoredParams, Bloom, Loaded},
    engine::Engine,
    error::{Error, Result},
    hash::{gozero_locations, murmur3_x64_128, sum64, GOZERO_HASHES},
    info::{
        CountingInfo, FilterInfo, GenerationInfo, GrowingInfo, GrowingLevel, KeyTtl, WindowInfo,
    },
    // RedisBloom, CountingBloom, WindowBloom, GrowingBloom, ModuleBloom (and ModuleInfo,
    // ModuleParams, MODULE_KEY_TYPES): the registry in src/kinds/mod.rs.
    kinds::filters::*,
    kinds::plain::OfflineBloom,
    layout::{native_locations, Layout},
    near::{NearCache, NearCacheStats},
    retry::Retry,
    sizing::{
        bits_for_fixed_k, current_fpr, estimate_items, expected_fpr, growing_level_fpr,
        optimal_bits, optimal_hashes, window_generation_fpr, MAX_BITS,
    },
    snapshot::{
        ImportMode, SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader, SnapshotWriter,
        Transferred,
    },
};

/// The kinds of filter: the `K` of [`Bloom<C, K>`] and [`Builder<K>`] (`Plain`, `Counting`,
/// `Window`, `Growing`, `Module`: the registry in src/kinds/mod.rs).
pub mod kind {
    pub use crate::core::kind::{Kind, KindName, SizedInBits};
    pub use crate::kinds::types::*;
}

/// The redis-rs version this crate is built on, so you never align versions by hand.
pub use redis;

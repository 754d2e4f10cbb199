//! The Lua scripts, embedded from `lua/` and hashed once: go-zero's set and test scripts and
//! their batch forms (the [`Engine::Scripts`](crate::Engine::Scripts) engine), the native
//! layout's parameter check, and the dense path's merge.
//!
//! Each is sent as `EVALSHA` and, when the server answers `NOSCRIPT` (after a restart or a
//! `SCRIPT FLUSH`), loaded and sent again: that is what [`redis::Script::invoke_async`] does.
//! The filter's key always travels in `KEYS[1]`, so the scripts are cluster-safe.

use redis::Script;
use std::sync::LazyLock;

/// go-zero's set script, replying whether any bit flipped.
pub(crate) static ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/add.lua")));

/// go-zero's test script, verbatim.
pub(crate) static EXISTS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/exists.lua")));

/// The set script over a batch of items, one reply per item.
pub(crate) static ADD_MANY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/add_many.lua")));

/// The test script over a batch of items, one reply per item.
pub(crate) static EXISTS_MANY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/exists_many.lua")));

/// Stores a native filter's parameters the first time and replies with what is stored.
pub(crate) static PARAMS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/params.lua")));

/// The dense path's OR of a batch's bitmap into the filter, sent as `EVAL` inside a `MULTI`.
pub(crate) const MERGE: &str = include_str!("../lua/merge.lua");

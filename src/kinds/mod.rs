//! The kinds of filter (SPEC.md §4), one folder each: its public type and its own methods, its
//! builder options, what it does inside one slot group (the core's `Seam`), its Lua, its near
//! cache's copy and its snapshot sections.

pub(crate) mod counting;
pub(crate) mod growing;
pub(crate) mod plain;
pub(crate) mod window;

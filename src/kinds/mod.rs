//! The kinds of filter (SPEC.md §4): each a small module over the shared parts (`io`,
//! `sharded`, `geometry`). A new kind is a file here plus its Lua in `lua/`.

pub(crate) mod counting;
pub(crate) mod growing;
pub(crate) mod plain;
pub(crate) mod window;

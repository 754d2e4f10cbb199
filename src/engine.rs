//! Which Redis commands carry a filter's bits.

/// How a filter's operations reach Redis. Both write exactly go-zero's bits, in go-zero's order,
/// atomically per call; they differ only in cost and in the commands an ACL must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Engine {
    /// `BITFIELD key SET u1 ...` to add and `BITFIELD_RO key GET u1 ...` to check (plain
    /// `BITFIELD` on servers older than Redis 6.2). About a third of the scripts' server CPU per
    /// item (see BENCHMARKS.md). The default.
    #[default]
    Bitfield,
    /// go-zero's own Lua set and test scripts (`EVALSHA`, loaded again on `NOSCRIPT`), and their
    /// batch forms in `lua/`. For ACLs that allow scripts but not `BITFIELD`.
    Lua,
}

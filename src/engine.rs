//! Which Redis commands carry a filter's bits.

/// How a filter's operations reach Redis. Both write exactly go-zero's bits, in go-zero's order,
/// atomically per call; they differ only in cost and in the commands an ACL must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Engine {
    /// The cheapest commands for each call. `BITFIELD key SET u1 ...` to add and
    /// `BITFIELD_RO key GET u1 ...` to check (plain `BITFIELD` before Redis 6.2): about a third
    /// of the scripts' server CPU per item. For batches large enough, the dense path: checks
    /// read the filter's bytes (`GETRANGE`: whole up to 4 MiB, else the ranges they need),
    /// adds send the batch's bits as a bitmap ORed in by `BITOP` (in one transaction up to
    /// 4 MiB, else one range of the key at a time), with identical resulting bytes.
    /// See BENCHMARKS.md. The default.
    #[default]
    Fast,
    /// go-zero's own Lua set and test scripts (`EVALSHA`, loaded again on `NOSCRIPT`), and their
    /// batch forms in `lua/`, one `EVALSHA` per call. For ACLs that allow scripts but not
    /// `BITFIELD`.
    Scripts,
}

impl std::fmt::Display for Engine {
    /// `fast` or `scripts`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::Fast => "fast",
            Engine::Scripts => "scripts",
        })
    }
}

impl std::str::FromStr for Engine {
    type Err = crate::Error;

    /// `fast` or `scripts` (any case).
    ///
    /// ```
    /// use redbloom::Engine;
    /// assert_eq!("scripts".parse::<Engine>().unwrap(), Engine::Scripts);
    /// assert_eq!(Engine::Fast.to_string(), "fast");
    /// assert!("lua".parse::<Engine>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "fast" => Ok(Engine::Fast),
            "scripts" => Ok(Engine::Scripts),
            _ => Err(crate::Error::InvalidConfig(format!(
                "unknown engine {text:?}: fast or scripts"
            ))),
        }
    }
}

//! What `clear` and `expire` do to a filter's keys.

use crate::error::{Error, Result};

/// Delete the keys, or set their TTL.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Removal {
    Delete,
    /// `PEXPIRE` with these milliseconds.
    Expire(i64),
}

impl Removal {
    /// `expire(ttl)` of any kind: millisecond precision; a TTL that rounds to 0 ms (which would
    /// delete the filter at once) or too long for Redis is refused.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the TTL.
    pub(crate) fn expire(ttl: std::time::Duration) -> Result<Self> {
        let millis = i64::try_from(ttl.as_millis())
            .ok()
            .filter(|ms| *ms < i64::MAX / 2)
            .ok_or_else(|| Error::InvalidConfig(format!("a TTL of {ttl:?} is too long")))?;
        if millis == 0 {
            return Err(Error::InvalidConfig(format!(
                "a TTL of {ttl:?} rounds to 0 ms, which would delete the filter at once; \
                 clear it to delete it"
            )));
        }
        Ok(Removal::Expire(millis))
    }

    /// The scripts' arguments: `del` or `pexpire`, and the milliseconds (0 for a delete).
    pub(crate) fn args(self) -> (&'static str, i64) {
        match self {
            Removal::Delete => ("del", 0),
            Removal::Expire(millis) => ("pexpire", millis),
        }
    }
}

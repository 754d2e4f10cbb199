//! Names of the keys kept beside a filter, in the same Redis Cluster slot.

use crate::error::{Error, Result};

/// The key `suffix` beside `key`, hashed to `key`'s cluster slot: `key` keeps its hash tag when
/// it has one (`{user}:seen` gives `{user}:seen:SUFFIX`); otherwise the whole key becomes the
/// tag (`seen` gives `{seen}:SUFFIX`, whose slot is that of `seen`).
///
/// # Errors
/// [`Error::InvalidConfig`] for the rare keys that contain `}` but no hash tag, whose slot no
/// other key name can share.
pub(crate) fn sidecar(key: &str, suffix: &str) -> Result<String> {
    if hash_tag(key).is_some() {
        Ok(format!("{key}:{suffix}"))
    } else if !key.contains('}') {
        Ok(format!("{{{key}}}:{suffix}"))
    } else {
        Err(Error::InvalidConfig(format!(
            "the key {key:?} contains '}}' without a hash tag; give it one, e.g. {{name}}:rest"
        )))
    }
}

/// The hash tag Redis Cluster hashes instead of the whole key: the text between the first `{`
/// and the next `}`, when that is not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_share_the_keys_hash_tag() {
        assert_eq!(sidecar("seen", "p").unwrap(), "{seen}:p");
        assert_eq!(sidecar("{user}:seen", "p").unwrap(), "{user}:seen:p");
        assert_eq!(sidecar("a{b", "p").unwrap(), "{a{b}:p");
        assert_eq!(hash_tag("{a{b}:p"), Some("a{b"));
        assert_eq!(hash_tag("x{}y{z}"), None, "an empty first tag means no tag");
        assert!(sidecar("x{}y{z}", "p").is_err());
        assert!(sidecar("a}b", "p").is_err());
        for key in ["seen", "{user}:seen", "a{b", "x:{t}"] {
            let tag = |k: &str| hash_tag(k).unwrap_or(k).to_owned();
            assert_eq!(tag(&sidecar(key, "p").unwrap()), tag(key), "{key}");
        }
    }
}

//! A window filter's part (one slot group's generations, named by epoch) and the client's
//! guess of the server's clock, which names the generations a step declares.

use crate::geometry::Geometry;
use crate::io::guard::Guard;

/// One slot group's generations.
#[derive(Debug, Clone)]
pub struct Part {
    /// Generation E is the key `{prefix}:{E}`.
    pub(crate) prefix: String,
    /// The ledger of the generations the part made and their expiry (`lua/window_args.lua`),
    /// `{…}:redbloom:made:HASH`: a live generation it lists that is missing was lost, and
    /// checks say so.
    pub(crate) made: String,
    /// The dense add's scratch key, in the same slot group.
    pub(crate) scratch: String,
    /// The add by ranges' second scratch key.
    pub(crate) scratch_or: String,
    pub(crate) geometry: Geometry,
    /// What the last dense add found: whether the next one first probes for a new bit.
    pub(crate) dense_seen: std::sync::Arc<crate::dense::Seen>,
    /// What checks found in the newest generation: whether the next one reads it first.
    pub(crate) newest: std::sync::Arc<super::newest::Newest>,
}

impl Part {
    /// The keys a script declares when the client guesses epoch `guess`: generations
    /// `guess + 1` down to `guess - G`, the ledger of the generations made
    /// ([`made`](Part::made)), then (`checked`: a filter of one key) the parameters key and the
    /// bare key, which the scripts check.
    pub(super) fn keys(
        &self,
        guess: i64,
        generations: u32,
        checked: Option<&Guard>,
    ) -> Vec<String> {
        let mut keys: Vec<String> = (-1..=i64::from(generations))
            .map(|back| format!("{}:{}", self.prefix, guess - back))
            .collect();
        keys.push(self.made.clone());
        if let Some(guard) = checked {
            keys.push(guard.key().to_owned());
            keys.push(guard.bits_key().to_owned());
        }
        keys
    }

    /// The key of the generation of `epoch`.
    pub(super) fn generation(&self, epoch: i64) -> String {
        format!("{}:{epoch}", self.prefix)
    }

    /// A key of the part's slot group to route a command by (generation 0's).
    pub(super) fn anchor(&self) -> String {
        self.generation(0)
    }
}

/// The generations' name beside a filter's key: `redbloom:gen:HASH`, HASH naming the filter's
/// parameters, so that a client with other parameters can never touch this filter's
/// generations (an add checks the stored parameters only when it creates a generation).
pub(super) fn generations_of(fingerprint: &str) -> String {
    let (h1, _) = crate::hash::murmur3_x64_128(fingerprint.as_bytes());
    format!("redbloom:gen:{:08x}", h1 >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys;
    use crate::layout::Layout;

    #[test]
    fn the_client_names_the_generations_around_its_guess() {
        let part = Part {
            prefix: "{k}:redbloom:gen".into(),
            made: "{k}:redbloom:made".into(),
            scratch: "{k}:redbloom:scratch".into(),
            scratch_or: "{k}:redbloom:scratch:or".into(),
            geometry: Geometry::new(Layout::Native, 64, 3).unwrap(),
            dense_seen: Default::default(),
            newest: Default::default(),
        };
        let guard = Guard::of("k", 1, "kind=window".into(), (Layout::Native, 64));
        let keys = part.keys(100, 4, Some(&guard));
        assert_eq!(keys.len(), 4 + 2 + 1 + 2);
        assert_eq!(keys[0], "{k}:redbloom:gen:101");
        assert_eq!(keys[5], "{k}:redbloom:gen:96");
        assert_eq!(keys[6], "{k}:redbloom:made");
        assert_eq!(&keys[7..], ["{k}:redbloom:1:k:params", "k"]);
        assert!(keys.iter().all(|k| keys::slot(k) == keys::slot("k")));
        assert_eq!(part.keys(100, 4, None).len(), 4 + 2 + 1);
    }

    #[test]
    fn generations_are_named_by_their_parameters() {
        let a = generations_of("kind=window window_ms=2000 generations=4");
        let b = generations_of("kind=window window_ms=3000 generations=4");
        assert!(a.starts_with("redbloom:gen:") && a.len() == "redbloom:gen:".len() + 8);
        assert_ne!(a, b);
        assert_eq!(
            a,
            generations_of("kind=window window_ms=2000 generations=4")
        );
    }
}

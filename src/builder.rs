//! Configuring a [`RedisBloom`] and checking the configuration before any I/O.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::filter::RedisBloom;
use crate::hash::GOZERO_HASHES;
use crate::sizing::{bits_for_fixed_k, MAX_BITS};

/// Builds a [`RedisBloom`]: either from a size in bits, or from the number of items you expect
/// and the false-positive rate you accept (SPEC.md §2, with go-zero's k = 14).
///
/// Nothing is validated until [`build`](Builder::build), which returns a typed error and never
/// panics, so the values may come straight from configuration.
///
/// ```
/// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let seen = redbloom::RedisBloom::builder("crawler:seen")
///     .expected_items(10_000_000)
///     .false_positive_rate(1e-4)
///     .build(conn)?;
/// println!("{} bits", seen.bits()); // 191859095: about 23 MiB
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    key: String,
    bits: Option<u64>,
    items: Option<u64>,
    fpr: Option<f64>,
    engine: Engine,
}

impl Builder {
    pub(crate) fn new(key: String) -> Self {
        Builder {
            key,
            bits: None,
            items: None,
            fpr: None,
            engine: Engine::default(),
        }
    }

    /// Sets the filter's size in bits, in `1..=2^32`. Exclusive with
    /// [`expected_items`](Builder::expected_items). No default.
    pub fn bits(mut self, bits: u64) -> Self {
        self.bits = Some(bits);
        self
    }

    /// Sizes the filter for this many items; needs
    /// [`false_positive_rate`](Builder::false_positive_rate) too. No default.
    pub fn expected_items(mut self, items: u64) -> Self {
        self.items = Some(items);
        self
    }

    /// The false-positive rate to reach at [`expected_items`](Builder::expected_items), in
    /// (0, 1). No default.
    pub fn false_positive_rate(mut self, fpr: f64) -> Self {
        self.fpr = Some(fpr);
        self
    }

    /// The commands the filter uses. Defaults to [`Engine::Bitfield`].
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// Checks the configuration and makes the filter on `conn`. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the key is empty, when neither or both of `bits` and
    /// `expected_items` are given, when `bits` is not in `1..=2^32`, or when the items and
    /// rate are invalid or need more than 2^32 bits.
    pub fn build<C>(self, conn: C) -> Result<RedisBloom<C>> {
        let bits = match (self.bits, self.items, self.fpr) {
            (Some(bits), None, None) => bits,
            (None, Some(items), Some(fpr)) => {
                let bits = bits_for_fixed_k(items, fpr, GOZERO_HASHES as u32)?;
                if bits > MAX_BITS {
                    return Err(Error::InvalidConfig(format!(
                        "{items} items at a false-positive rate of {fpr} need {bits} bits, \
                         more than one Redis string holds (2^32)"
                    )));
                }
                bits
            }
            (None, None, None) => {
                return Err(Error::InvalidConfig(
                    "give the size in bits, or the expected items and a false-positive rate".into(),
                ))
            }
            (None, Some(_), None) | (None, None, Some(_)) => {
                return Err(Error::InvalidConfig(
                    "expected items and a false-positive rate go together".into(),
                ))
            }
            (Some(_), _, _) => {
                return Err(Error::InvalidConfig(
                    "give the size in bits or the expected items with a rate, not both".into(),
                ))
            }
        };
        Ok(RedisBloom::new(conn, self.key, bits)?.with_engine(self.engine))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(builder: Builder) -> Result<u64> {
        builder.build(()).map(|bloom| bloom.bits())
    }

    #[test]
    fn sizes_from_items_and_rate_with_k_14() {
        let builder = RedisBloom::builder("k").expected_items(10_000_000);
        assert_eq!(
            build(builder.false_positive_rate(1e-4)).unwrap(),
            191_859_095
        );
        assert_eq!(build(RedisBloom::builder("k").bits(64)).unwrap(), 64);
    }

    #[test]
    fn rejects_every_incomplete_or_invalid_configuration() {
        let cases = [
            RedisBloom::builder("k"),
            RedisBloom::builder("k").expected_items(10),
            RedisBloom::builder("k").false_positive_rate(0.1),
            RedisBloom::builder("k").bits(64).expected_items(10),
            RedisBloom::builder("k").bits(0),
            RedisBloom::builder("k").bits(MAX_BITS + 1),
            RedisBloom::builder("k")
                .expected_items(0)
                .false_positive_rate(0.1),
            RedisBloom::builder("k")
                .expected_items(10)
                .false_positive_rate(1.5),
            RedisBloom::builder("k")
                .expected_items(1_000_000_000)
                .false_positive_rate(1e-9),
            RedisBloom::builder("").bits(64),
        ];
        for builder in cases {
            let debug = format!("{builder:?}");
            assert!(
                matches!(build(builder), Err(Error::InvalidConfig(_))),
                "{debug}"
            );
        }
    }
}

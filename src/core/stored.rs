//! Opening a filter from what Redis stores (SPEC.md §3): every filter redbloom creates stores
//! its kind and parameters beside it (`{KEY}:redbloom:params`), so that a client can open it
//! with its key alone.

use super::builder::Builder;
use super::kind::{Fields, Kind, KindName};
use crate::error::{Error, Result};
use crate::keys;
use crate::snapshot::SnapshotHeader;
use redis::aio::ConnectionLike;

/// The parameters a filter stores beside it, as [`StoredParams::read`] finds them: its kind and
/// its sizes, enough to open it with its key alone ([`StoredParams::builder`]).
///
/// ```no_run
/// # async fn demo(mut conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// use redbloom::{kind::KindName, kind::Window, StoredParams};
/// if let Some(stored) = StoredParams::read(&mut conn, "events:recent").await? {
///     println!("a {} filter: {}", stored.kind()?, stored.fingerprint());
///     if stored.kind()? == KindName::Window {
///         let recent = stored.builder::<Window>()?.build(conn)?;
///         println!("{:?}", recent.window());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredParams {
    key: String,
    fingerprint: String,
}

impl StoredParams {
    /// The parameters stored beside the filter at `key`; `None` when there are none (no filter
    /// there, or a go-zero filter made by Go, which stores none: open that one with its size).
    ///
    /// Parameters stored by an earlier build under the older names (`{KEY}:redbloom:params`)
    /// are read too, when they are `key`'s (the filter built from them moves to today's names
    /// at its first call).
    ///
    /// # Errors
    /// [`Error::WrongType`] when the parameters key holds something else;
    /// [`Error::LegacyNames`] when older parameters may be this key's or another's; network
    /// faults as for [`Bloom::add`](crate::Bloom::add).
    pub async fn read<C: ConnectionLike>(conn: &mut C, key: &str) -> Result<Option<Self>> {
        let params = keys::sidecar(key, "redbloom:params");
        let stored: Option<String> = match redis::cmd("GET").arg(&params).query_async(conn).await {
            Ok(stored) => stored,
            // Any kind keeps a string there.
            Err(err) => return Err(Error::from_redis(err, &params).typed(conn, "").await),
        };
        let stored = match stored {
            Some(stored) => Some(stored),
            // A filter made by an earlier build, under the older names: the handle built from
            // it moves it to today's at its first call (SPEC.md §3, "Names").
            None => super::legacy::stored_params(conn, key).await?,
        };
        Ok(stored.map(|fingerprint| StoredParams {
            key: key.to_owned(),
            fingerprint,
        }))
    }

    /// The parameters a snapshot file holds (its header, [`SnapshotReader::open`]), as if
    /// stored beside a filter at `key`: what [`builder`](Self::builder) opens the filter the
    /// file makes with, so that an import takes every parameter from the file.
    ///
    /// ```
    /// use redbloom::{kind::Plain, SnapshotHeader, StoredParams};
    /// let params = "layout=gozero bits=1024 hashes=14 hash=murmur3_x64_128";
    /// let header = SnapshotHeader::new("plain", params, 1);
    /// let file = StoredParams::from_snapshot("copy", &header);
    /// assert_eq!(file.kind()?, redbloom::kind::KindName::Plain);
    /// assert_eq!(file.field("bits"), Some("1024"));
    /// assert!(file.builder::<Plain>()?.validate().is_ok());
    /// # Ok::<(), redbloom::Error>(())
    /// ```
    ///
    /// [`SnapshotReader::open`]: crate::SnapshotReader::open
    pub fn from_snapshot(key: impl Into<String>, header: &SnapshotHeader) -> Self {
        let mut fingerprint = header.params.clone();
        // A plain filter's parameters do not name their kind: the header does.
        if Fields(&fingerprint).field("kind").is_none() && header.kind != "plain" {
            fingerprint = format!("kind={} {fingerprint}", header.kind);
        }
        StoredParams {
            key: key.into(),
            fingerprint,
        }
    }

    /// The filter's kind, as stored in its `kind` field (a plain filter stores none).
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] for a kind this version does not know (a later version's);
    /// [`field("kind")`](Self::field) has its name.
    pub fn kind(&self) -> Result<KindName> {
        self.field("kind")
            .unwrap_or(KindName::Plain.as_str())
            .parse()
            .map_err(|_| Error::ParamsMismatch {
                key: self.key.clone(),
                stored: self.fingerprint.clone(),
                requested: "a kind of filter this version knows (plain, window, counting, \
                            growing or module)"
                    .to_owned(),
            })
    }

    /// The parameters as stored (`field=value` pairs).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The value of `field` (`bits`, `hashes`, `shards`, `window_ms`, …).
    pub fn field(&self, field: &str) -> Option<&str> {
        Fields(&self.fingerprint).field(field)
    }

    /// A builder of the filter as stored, of kind `K`: the same parameters, so that the filter
    /// built from it opens the stored one (add the options of your client: retries, timeout,
    /// near cache, …; sizes given again must agree, or calls fail with
    /// [`Error::ParamsMismatch`]).
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the filter is of another kind, or its parameters are not
    /// ones this version can read.
    pub fn builder<K: Kind>(&self) -> Result<Builder<K>> {
        let mismatch = |requested: String| Error::ParamsMismatch {
            key: self.key.clone(),
            stored: self.fingerprint.clone(),
            requested,
        };
        if self.kind()? != K::NAME {
            return Err(mismatch(format!("a {} filter", K::NAME)));
        }
        let fields = Fields(&self.fingerprint);
        let sizes = K::reopen(&fields)
            .ok_or_else(|| mismatch(format!("parameters a {} filter can read", K::NAME)))?;
        let shards = fields.number("shards").unwrap_or(1);
        let mut builder = Builder::<K>::of_kind(self.key.clone(), sizes.kind).shards(shards);
        builder.bits = sizes.bits;
        builder.items = sizes.items;
        builder.fpr = sizes.fpr;
        builder.hashes = sizes.hashes;
        let made = builder.made()?;
        if made.guard.fingerprint() != self.fingerprint {
            return Err(mismatch(made.guard.fingerprint().to_owned()));
        }
        Ok(builder)
    }
}

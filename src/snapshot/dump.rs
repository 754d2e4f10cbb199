//! Snapshots of keys the server's Bloom module holds (type `MBbloom--`, SPEC.md §7): read with
//! `BF.SCANDUMP` and written back with `BF.LOADCHUNK`, each dump chunk its own section of the
//! file (role [`CHUNK`], meta: the iterator `BF.SCANDUMP` returned with it, which is what
//! `BF.LOADCHUNK` takes, after the key's own meta and a colon when the kind gives one: a
//! window's generation, `EPOCH:ITER`), the header chunk (iterator 1, with the key's TTL) first.
//! A key that does not exist is one empty section with iterator 0: an import deletes the key
//! there.
//!
//! **Consistency.** The module's dump header describes the filter's sub-filters ("links") and
//! their sizes; `BF.LOADCHUNK` refuses a data chunk past the links of the header it loaded. A
//! copy to dump from is not possible (RedisBloom 2.8 answers `COPY` of its keys with "not
//! supported for this module key"), so an export reads the header first and then only the
//! chunks of the links it describes, in order, each checked to start where the last ended: a
//! sub-filter the module adds meanwhile (a scaling filter filling up) is not written, and
//! holds only items added after the export began. Adds into the links dumped only set bits,
//! so every add acknowledged before the export began is in the file. Last, the header is read
//! again: links other than the first one's (the filter deleted, or made again with other
//! sizes, while it was dumped) fail the export, which names the key and asks for another go.
//!
//! An import checks the same on the file's side (a header first, then chunks that follow each
//! other and end with the header's links) and loads each chunk into a staging key beside the
//! filter's, with the staging TTL; the swap then renames it into place.

use super::stage::{drop_staged, renew, RENEW_EVERY};
use super::transfer::{Staged, Stored, Transferred, STAGING_TTL_MS};
use super::{invalid, SectionHeader, SnapshotHeader, SnapshotReader, SnapshotWriter};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::tx::{Slot, Tx};
use redis::aio::ConnectionLike;
use redis::Value;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};

/// The type of the module's Bloom filter keys that dump (RedisBloom's: valkey-bloom has no
/// `BF.SCANDUMP`), as `TYPE` names it.
pub(crate) const MODULE_TYPE: &str = crate::kinds::filters::MODULE_KEY_TYPES[0];

/// The role of a dump chunk's section.
pub(crate) const CHUNK: &str = "chunk";

/// The most bytes of one chunk a file may hold: the module dumps at most 10 MiB per chunk.
pub(crate) const MAX_CHUNK: u64 = 64 << 20;

/// The dump header's fixed part, and each link's description after it (RedisBloom's
/// `dumpedChainHeader` and `dumpedChainLink`, packed, little-endian).
const HEADER_LEN: usize = 20;
const LINK_LEN: usize = 53;

/// What the commands a module snapshot needs and a server may lack (valkey-bloom has neither).
pub(crate) const DUMP_COMMANDS: [&str; 2] = ["BF.SCANDUMP", "BF.LOADCHUNK"];

/// The links (sub-filters) a dump header describes: each one's description without its item
/// count (which grows as items are added), and its bytes.
#[derive(Debug, PartialEq)]
pub(crate) struct Links(Vec<([u8; LINK_LEN - 8], u64)>);

impl Links {
    /// The links of a dump header; `None` when it is not one.
    pub(crate) fn parse(header: &[u8]) -> Option<Links> {
        let count = u32::from_le_bytes(header.get(8..12)?.try_into().ok()?) as usize;
        if count == 0 || header.len() != HEADER_LEN.checked_add(count.checked_mul(LINK_LEN)?)? {
            return None;
        }
        let links = header[HEADER_LEN..]
            .chunks_exact(LINK_LEN)
            .map(|link| {
                let bytes = u64::from_le_bytes(link[..8].try_into().ok()?);
                let mut id = [0u8; LINK_LEN - 8];
                id[..16].copy_from_slice(&link[..16]);
                id[16..].copy_from_slice(&link[24..]);
                Some((id, bytes))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Links(links))
    }

    /// The bytes of every link's bits together: what the data chunks hold.
    pub(crate) fn data_bytes(&self) -> Option<u64> {
        self.0
            .iter()
            .try_fold(0u64, |sum, (_, b)| sum.checked_add(*b))
    }

    /// Whether `later` still begins with these links (more may have been added).
    fn still_in(&self, later: &Links) -> bool {
        later.0.len() >= self.0.len() && self.0.iter().zip(&later.0).all(|(a, b)| a.0 == b.0)
    }
}

/// RedisBloom's option bit of a filter that does not scale (`BLOOM_OPT_NO_SCALING`).
const NO_SCALING: u32 = 8;

/// What a dump header says of a filter's first link (sub-filter): what `BF.RESERVE` made it
/// with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FirstLink {
    /// Its capacity: `BF.RESERVE`'s.
    pub(crate) entries: u64,
    /// Its error rate: `BF.RESERVE`'s, halved for a scaling filter (the module tightens each
    /// link's rate by half, the first one's included, so that all links stay under it).
    pub(crate) error: f64,
    /// The filter does not scale (`NONSCALING`).
    pub(crate) nonscaling: bool,
}

impl FirstLink {
    /// The first link of a dump header (`BF.SCANDUMP KEY 0`'s chunk); `None` when it is not
    /// one.
    pub(crate) fn parse(header: &[u8]) -> Option<FirstLink> {
        Links::parse(header)?;
        let options = u32::from_le_bytes(header.get(12..16)?.try_into().ok()?);
        let link = header.get(HEADER_LEN..HEADER_LEN + LINK_LEN)?;
        // bytes, bits, size (u64 each), error, bits per entry (f64), hashes (u32), entries.
        let error = f64::from_le_bytes(link.get(24..32)?.try_into().ok()?);
        let entries = u64::from_le_bytes(link.get(44..52)?.try_into().ok()?);
        Some(FirstLink {
            entries,
            error,
            nonscaling: options & NO_SCALING != 0,
        })
    }

    /// The rate the filter was made with (`BF.RESERVE`'s).
    pub(crate) fn rate(&self) -> f64 {
        match self.nonscaling {
            true => self.error,
            false => self.error * 2.0,
        }
    }
}

/// A chunk section's meta: the key's own (`None`: the kind gives none) and the iterator.
pub(crate) fn chunk_meta(meta: &str) -> (Option<&str>, &str) {
    match meta.rsplit_once(':') {
        Some((own, iter)) => (Some(own), iter),
        None => (None, meta),
    }
}

/// One `BF.SCANDUMP` of `key` at `iter`: the next iterator and the chunk; `None` when the key
/// does not exist.
async fn scandump<C>(exec: &Exec<C>, key: &str, iter: u64) -> Result<Option<(u64, Vec<u8>)>>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let cmd = redis::cmd("BF.SCANDUMP").arg(key).arg(iter).to_owned();
    match exec.query::<(u64, Vec<u8>)>(key, &cmd).await {
        Ok(chunk) => Ok(Some(chunk)),
        Err(Error::Redis(err)) if err.to_string().contains("not found") => Ok(None),
        Err(err) => Err(err),
    }
}

/// The error of a filter that changed under its export.
fn changed(key: &str, what: &str) -> Error {
    invalid(format!(
        "the module filter {key:?} changed while it was exported ({what}: deleted, or made \
         again with other sizes); export it again"
    ))
}

/// Writes `header` and the dump of every key of `keys` (in order) to `out` (see the module
/// docs).
///
/// # Errors
/// [`Error::Snapshot`] when a key changed under the export or writing fails; the server's
/// refusals (`WRONGTYPE`, an unknown command); network faults.
pub(crate) async fn export_dumps<C, W>(
    exec: &Exec<C>,
    header: &SnapshotHeader,
    keys: &[Stored],
    out: W,
) -> Result<(W, Transferred)>
where
    C: ConnectionLike + Clone + Send + Sync,
    W: AsyncWrite + Unpin,
{
    let mut writer = SnapshotWriter::new(out, header).await?;
    let mut filter_bytes = 0;
    for stored in keys {
        filter_bytes += dump_key(exec, &mut writer, stored).await?;
    }
    let (out, file_bytes) = writer.finish_counted().await?;
    Ok((
        out,
        Transferred {
            file_bytes,
            filter_bytes,
        },
    ))
}

/// One key's dump into `writer`: its chunks' bytes.
async fn dump_key<C, W>(
    exec: &Exec<C>,
    writer: &mut SnapshotWriter<W>,
    stored: &Stored,
) -> Result<u64>
where
    C: ConnectionLike + Clone + Send + Sync,
    W: AsyncWrite + Unpin,
{
    let key = &stored.key;
    let section = |iter: u64, len: u64, ttl: Option<u64>| {
        let mut section = SectionHeader::new(stored.shard, CHUNK, len);
        section.meta = match stored.meta.as_str() {
            "" => iter.to_string(),
            own => format!("{own}:{iter}"),
        };
        section.ttl_ms = ttl;
        section
    };
    let mut tx = Tx::plain();
    let ttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(key).to_owned());
    let ttl = u64::try_from(exec.run(key, &tx).await?.take(ttl)?)
        .ok()
        .filter(|&t| t > 0);
    let Some((mut iter, head)) = scandump(exec, key, 0).await? else {
        writer.begin_section(&section(0, 0, None)).await?;
        return Ok(0);
    };
    let links = Links::parse(&head)
        .filter(|_| iter == 1)
        .ok_or_else(|| Error::UnexpectedReply(format!("a dump header of {key:?} not read")))?;
    let total = links.data_bytes().unwrap_or(u64::MAX);
    writer
        .begin_section(&section(iter, head.len() as u64, ttl))
        .await?;
    writer.write(&head).await?;
    let mut done = 0u64;
    while done < total {
        let Some((next, data)) = scandump(exec, key, iter).await? else {
            return Err(changed(key, "gone"));
        };
        let len = data.len() as u64;
        if next == 0 || len == 0 || next != iter + len || done + len > total {
            return Err(changed(key, "its chunks no longer follow its header"));
        }
        writer.begin_section(&section(next, len, None)).await?;
        writer.write(&data).await?;
        done += len;
        iter = next;
    }
    match scandump(exec, key, 0).await? {
        Some((_, later)) if Links::parse(&later).is_some_and(|l| links.still_in(&l)) => {}
        _ => return Err(changed(key, "its header changed")),
    }
    Ok(head.len() as u64 + done)
}

/// What an import has loaded into one staging key so far.
#[derive(Debug)]
struct Loading {
    /// The last chunk's iterator (0: the part's key is absent in the file).
    iter: u64,
    /// The data bytes the header describes, and those loaded.
    total: u64,
    done: u64,
}

/// Reads every section of `reader` into staging keys with `BF.LOADCHUNK` (`place(section)`
/// names the filter's key and its staging key): a header chunk first for each key, then its
/// data chunks in order, each following the last, ending with the header's links (or one
/// empty section: the key absent). Returns one staged key per target once the file's end has
/// been verified; on any error the staging keys are deleted (they expire anyway).
///
/// # Errors
/// [`Error::Snapshot`] for a file whose chunks do not make a dump, or one the module refuses;
/// [`Error::MissingCommands`] when the server has no `BF.LOADCHUNK` (nothing written).
pub(crate) async fn stage_dumps<C, R>(
    exec: &Exec<C>,
    reader: &mut SnapshotReader<R>,
    name: &str,
    mut place: impl FnMut(&SectionHeader) -> Result<Staged>,
) -> Result<Vec<Staged>>
where
    C: ConnectionLike + Clone + Send + Sync,
    R: AsyncRead + Unpin,
{
    let mut staged: Vec<Staged> = Vec::new();
    let mut loading: Vec<Loading> = Vec::new();
    let mut renewed = Instant::now();
    let result = async {
        while let Some(section) = reader.next_section().await? {
            let target = place(&section)?;
            let iter: u64 = chunk_meta(&section.meta)
                .1
                .parse()
                .map_err(|_| invalid(format!("a dump chunk without its iterator: {section}")))?;
            if section.len > MAX_CHUNK {
                return Err(invalid(format!("a dump chunk of {} bytes", section.len)));
            }
            let mut data = Vec::with_capacity(section.len as usize);
            while let Some(chunk) = reader.next_chunk().await? {
                data.extend_from_slice(chunk);
            }
            let at = staged.iter().position(|s| s.target == target.target);
            match at {
                None => {
                    let total = match (iter, data.is_empty()) {
                        (0, true) => 0,
                        (1, false) => Links::parse(&data)
                            .and_then(|l| l.data_bytes())
                            .ok_or_else(|| invalid(format!("not a dump header: {section}")))?,
                        _ => {
                            return Err(invalid(format!(
                                "{section} comes before its filter's dump header"
                            )))
                        }
                    };
                    loading.push(Loading {
                        iter,
                        total,
                        done: 0,
                    });
                    staged.push(Staged {
                        len: data.len() as u64,
                        ..target
                    });
                }
                Some(at) => {
                    let state = &mut loading[at];
                    let len = data.len() as u64;
                    let follows = state.iter > 0
                        && len > 0
                        && state.iter.checked_add(len) == Some(iter)
                        && state.done + len <= state.total;
                    if !follows {
                        return Err(invalid(format!(
                            "{section} does not follow the dump chunks before it"
                        )));
                    }
                    state.iter = iter;
                    state.done += len;
                    staged[at].len += len;
                }
            }
            if renewed.elapsed() >= RENEW_EVERY {
                renew(exec, &staged).await?;
                renewed = Instant::now();
            }
            if iter > 0 {
                let staging = &staged[at.unwrap_or(staged.len() - 1)].staging;
                load(exec, name, staging, iter, &data).await?;
            }
        }
        for (s, state) in staged.iter().zip(&loading) {
            if state.done != state.total {
                return Err(invalid(format!(
                    "the dump of {:?} ends at {} of its {} bytes",
                    s.target, state.done, state.total
                )));
            }
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(staged),
        Err(err) => {
            drop_staged(exec, &staged).await;
            Err(err)
        }
    }
}

/// One `BF.LOADCHUNK` into `staging`, with the staging TTL.
async fn load<C>(exec: &Exec<C>, name: &str, staging: &str, iter: u64, data: &[u8]) -> Result<()>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut tx = Tx::plain();
    let loaded: Slot<Value> = tx.add(
        redis::cmd("BF.LOADCHUNK")
            .arg(staging)
            .arg(iter)
            .arg(data)
            .to_owned(),
    );
    tx.add_unread(
        redis::cmd("PEXPIRE")
            .arg(staging)
            .arg(STAGING_TTL_MS)
            .to_owned(),
    );
    let replies = exec.run(staging, &tx).await;
    let refused = |err: &redis::RedisError| {
        let text = err.to_string().to_ascii_lowercase();
        if text.contains("unknown command") {
            return Error::MissingCommands {
                key: name.to_owned(),
                missing: DUMP_COMMANDS.iter().map(|c| (*c).to_owned()).collect(),
                instead: missing_dump_instead().to_owned(),
            };
        }
        invalid(format!(
            "the module refused the dump chunk at iterator {iter}: {err}"
        ))
    };
    match replies {
        Err(Error::Redis(err)) => Err(refused(&err)),
        Err(err) => Err(err),
        Ok(mut replies) => match replies.take(loaded) {
            Err(Error::Redis(err)) => Err(refused(&err)),
            Err(err) => Err(err),
            Ok(_) => Ok(()),
        },
    }
}

/// What to do on a server without the module's dump commands.
pub(crate) fn missing_dump_instead() -> &'static str {
    "a module filter's snapshot goes through BF.SCANDUMP and BF.LOADCHUNK, which this server \
     lacks (valkey-bloom has no dump): keep the items to load them again, or use a plain \
     filter (drop --module), whose snapshots need no module"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(links: &[(u64, u64)]) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN];
        h[8..12].copy_from_slice(&(links.len() as u32).to_le_bytes());
        for &(bytes, items) in links {
            let mut link = [0u8; LINK_LEN];
            link[..8].copy_from_slice(&bytes.to_le_bytes());
            link[16..24].copy_from_slice(&items.to_le_bytes());
            h.extend_from_slice(&link);
        }
        h
    }

    #[test]
    fn the_first_link_gives_the_capacity_and_rate_reserved() {
        // BF.RESERVE k 0.011 50000 (RedisBloom 2.8): options NOROUND | FORCE64.
        let mut h = header(&[(67_688, 0)]);
        h[12..16].copy_from_slice(&5u32.to_le_bytes());
        h[HEADER_LEN + 24..HEADER_LEN + 32].copy_from_slice(&0.0055f64.to_le_bytes());
        h[HEADER_LEN + 44..HEADER_LEN + 52].copy_from_slice(&50_000u64.to_le_bytes());
        let first = FirstLink::parse(&h).unwrap();
        assert_eq!((first.entries, first.nonscaling), (50_000, false));
        assert_eq!(first.rate(), 0.011);
        // NONSCALING: the rate is not tightened.
        h[12..16].copy_from_slice(&13u32.to_le_bytes());
        h[HEADER_LEN + 24..HEADER_LEN + 32].copy_from_slice(&0.01f64.to_le_bytes());
        let first = FirstLink::parse(&h).unwrap();
        assert_eq!((first.nonscaling, first.rate()), (true, 0.01));
        assert!(FirstLink::parse(&h[..h.len() - 1]).is_none());
    }

    #[test]
    fn dump_headers_are_parsed_and_compared() {
        let one = Links::parse(&header(&[(144, 10)])).unwrap();
        assert_eq!(one.data_bytes(), Some(144));
        // More items, or a link added: still the same filter.
        let later = Links::parse(&header(&[(144, 99), (288, 1)])).unwrap();
        assert!(one.still_in(&later));
        let other = Links::parse(&header(&[(145, 10)])).unwrap();
        assert!(!one.still_in(&other));
        assert!(Links::parse(&header(&[])).is_none());
        let mut cut = header(&[(144, 10)]);
        cut.pop();
        assert!(Links::parse(&cut).is_none());
        assert!(Links::parse(b"short").is_none());
    }
}

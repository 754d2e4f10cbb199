//! `export` and `import` of every kind: the parameters checked, the file's header, its
//! sections read or staged and swapped in (`crate::snapshot`), written once; the kind names
//! its keys as sections and says where a file's sections go back.

use super::call::{self, Call};
use super::kind::Kind;
use super::{Bloom, Conn, Core};
use crate::error::{Error, Result};
use crate::snapshot::{
    self, ImportMode, SnapshotError, SnapshotHeader, SnapshotReader, Transferred,
};
use redis::aio::ConnectionLike;
use tokio::io::{AsyncRead, AsyncWrite};

impl<C: ConnectionLike + Clone + Send + Sync, K: Kind> Bloom<C, K> {
    /// Writes the filter to `out` as a snapshot file (docs/snapshot-format.md): its kind and
    /// parameters, then each of its keys (a plain or counting filter's shards, a window's live
    /// generations with their TTLs, a growing filter's segments and level counts), read in
    /// 1 MiB pieces (no command holds the server longer than one piece's copy; this side holds
    /// about 2 MiB whatever the filter's size). Every add acknowledged before the export began
    /// is in the file: bits only ever get set, and each key's length is taken before its bytes
    /// are read (a counting filter: every item added and not removed while it runs).
    ///
    /// ```no_run
    /// # async fn demo(seen: redbloom::RedisBloom<redbloom::redis::aio::MultiplexedConnection>)
    /// # -> redbloom::Result<()> {
    /// let file = tokio::fs::File::create("seen.rbloom").await.expect("file");
    /// let moved = seen.export(file).await?;
    /// println!("{} bytes of filter in {} bytes of file", moved.filter_bytes, moved.file_bytes);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the key holds a filter with other parameters;
    /// [`Error::WrongType`]; [`Error::Snapshot`] when writing `out` fails; network faults.
    pub async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let core = &*self.0;
        call::run(Call::Export, core, None, core.export(out)).await
    }

    /// Puts a snapshot file in place at this filter's key: [`ImportMode::Replace`] makes the
    /// filter the file's (its keys replaced, atomically per slot group: other clients see the
    /// old filter or the new one), [`ImportMode::Merge`] adds the file's items to it (its bits
    /// ORed in, atomically per shard as well; or, when the filter was built with
    /// [`merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), one range of that size at a
    /// time, each range atomic, the merge as a whole not). The file's kind and parameters must
    /// be this filter's. A counting or growing filter's file cannot be merged (counters and
    /// levels do not add up as bits do): import it whole, or load its items.
    ///
    /// The file is read in chunks into staging keys beside the filter's (same slot, a 120 s
    /// TTL renewed as they are written), and swapped (or merged) in only once the whole file
    /// has been verified: a truncated or corrupted file, a mismatch, or an importer killed at
    /// any moment (of a merge by ranges: before its steps begin) leave the filter as it was. A
    /// replace makes each key's staging string at its full size in one command (about 1 ns per
    /// byte: shard big filters to shorten it), and a merge holds the server for one `BITOP` of
    /// each whole key (about 1.6 ms per MiB); a merge by ranges stages one key per range and
    /// never holds the server longer than one range's OR.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the file's parameters or the filter at the key differ
    /// from this filter's; [`Error::Snapshot`] naming what is wrong with the file;
    /// [`Error::InvalidConfig`] for a merge the kind refuses; [`Error::WrongType`]; network
    /// faults. In every case the filter is left as it was.
    pub async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        let core = &*self.0;
        call::run(Call::Import, core, None, core.import(input, mode)).await
    }
}

impl<C: Conn, K: Kind> Core<C, K> {
    async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let clock = self.exec.clock();
        if !K::DUMPED {
            self.guard.ensure(&self.exec, false).await?;
        }
        let mut sections = Vec::new();
        for index in 0..self.parts.parts().len() {
            sections.extend(K::sections(self.ctx(&clock, index)).await?);
        }
        // Hashes (a growing filter's counts) last: read after the bits they count.
        sections.sort_by_key(|stored| stored.hash);
        let header = SnapshotHeader::new(
            K::NAME.as_str(),
            self.guard.fingerprint(),
            self.parts.count(),
        );
        let too_long =
            |stored: &snapshot::Stored, len: u64| K::too_long(&self.key, &self.guard, stored, len);
        let (mut out, moved) = match K::DUMPED {
            true => snapshot::export_dumps(&self.exec, &header, &sections, out).await?,
            false => snapshot::export(&self.exec, &header, &sections, too_long, out).await?,
        };
        tokio::io::AsyncWriteExt::shutdown(&mut out)
            .await
            .map_err(|e| Error::Snapshot(SnapshotError::Io(e)))?;
        Ok(moved)
    }

    async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        if mode == ImportMode::Merge {
            self.kind.merge_allowed()?;
        }
        let input = snapshot::Idle::new(input, self.exec.options().input_idle());
        let (mut reader, header) = SnapshotReader::open(input).await?;
        snapshot::check_header(
            &header,
            &self.key,
            K::NAME.as_str(),
            self.guard.fingerprint(),
            self.parts.count(),
        )?;
        if !K::DUMPED {
            self.guard.ensure(&self.exec, false).await?;
            self.guard.writable()?;
        }
        let clock = self.exec.clock();
        self.writable(&clock, false).await?;
        let nonce = snapshot::nonce();
        let place =
            |section: &snapshot::SectionHeader| self.kind.place(&self.parts, &nonce, section);
        let staged = match K::DUMPED {
            true => snapshot::stage_dumps(&self.exec, &mut reader, &self.key, place).await?,
            false => snapshot::stage(&self.exec, &mut reader, mode, place).await?,
        };
        let key_type = if K::DUMPED {
            snapshot::MODULE_TYPE
        } else {
            "string"
        };
        let swapped = async {
            let groups = K::groups(self.ctx(&clock, 0), &staged, mode).await?;
            let params = self.guard.swap_params(self.inline());
            snapshot::swap_checked(&self.exec, &groups, params, &self.guard, mode, key_type).await
        };
        if let Err(err) = swapped.await {
            snapshot::drop_staged(&self.exec, &staged).await;
            return Err(err);
        }
        self.forget();
        Ok(Transferred {
            file_bytes: reader.bytes_read(),
            filter_bytes: staged.iter().filter(|s| !s.hash).map(|s| s.len).sum(),
        })
    }
}

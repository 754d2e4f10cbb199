//! Round trips, every changed byte, every truncation, forged lengths, misuse, and bounded memory.

use std::time::Instant;

use crc32fast::Hasher;
use proptest::prelude::*;

use super::format::{MAX_BLOCK, MAX_CHUNK};
use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader, SnapshotWriter};

type Sections = Vec<(SectionHeader, Vec<u8>)>;

/// The size of an end block with its frame.
const END_FRAME: usize = 1 + 4 + 4 + 12 + 4;

fn header(shards: u32) -> SnapshotHeader {
    SnapshotHeader {
        kind: "growing".into(),
        params: "kind=growing capacity=1000 fpr=0.01 growth=2".into(),
        shards,
        created_ms: 1_700_000_000_000,
        writer: "redbloom test".into(),
    }
}

fn section(
    shard: u32,
    role: &str,
    meta: &str,
    ttl_ms: Option<u64>,
    data: Vec<u8>,
) -> (SectionHeader, Vec<u8>) {
    let header = SectionHeader {
        shard,
        role: role.into(),
        meta: meta.into(),
        len: data.len() as u64,
        ttl_ms,
    };
    (header, data)
}

/// Bytes no compressor shrinks (xorshift, seeded).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Bytes LZ4 shrinks well: a sparse filter (a few bits set in each 64 bytes).
fn sparse(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0; len];
    for (i, r) in noise(len / 64, seed).into_iter().enumerate() {
        bytes[i * 64 + usize::from(r % 64)] = 1 << (r % 8);
    }
    bytes
}

async fn write_file(
    header: &SnapshotHeader,
    sections: &[(SectionHeader, Vec<u8>)],
    chunk_size: usize,
) -> Vec<u8> {
    let mut writer = SnapshotWriter::start(Vec::new(), header, chunk_size)
        .await
        .unwrap();
    for (section, data) in sections {
        writer.begin_section(section).await.unwrap();
        for piece in data.chunks(777) {
            writer.write(piece).await.unwrap();
        }
    }
    let before_end = writer.bytes_written();
    let file = writer.finish().await.unwrap();
    assert_eq!(file.len() as u64, before_end + END_FRAME as u64);
    file
}

async fn read_file(file: &[u8]) -> Result<(SnapshotHeader, Sections), SnapshotError> {
    let (mut reader, header) = SnapshotReader::open(file).await?;
    let mut sections = Vec::new();
    while let Some(section) = reader.next_section().await? {
        let mut data = Vec::new();
        while let Some(chunk) = reader.next_chunk().await? {
            assert!(!chunk.is_empty() && chunk.len() <= MAX_CHUNK);
            data.extend_from_slice(chunk);
        }
        sections.push((section, data));
    }
    assert_eq!(reader.bytes_read(), file.len() as u64);
    Ok((header, sections))
}

/// A small file (about 3 KB) with several sections of every encoding, cut in chunks of 256.
async fn small_file() -> (Vec<u8>, Sections) {
    let sections = vec![
        section(0, "bits", "", None, noise(1200, 1)),
        section(1, "level", "epoch=17", Some(60_000), vec![0; 600]),
        section(2, "counts", "", Some(0), Vec::new()),
        section(2, "bits", "fields=a,b", None, sparse(1500, 2)),
        section(0, "generation", "", None, vec![0x42]),
    ];
    let file = write_file(&header(3), &sections, 256).await;
    (file, sections)
}

#[tokio::test]
async fn round_trip_keeps_every_section() {
    let sections = vec![
        section(0, "bits", "", Some(12_345), noise(3 * MAX_CHUNK + 1000, 7)),
        section(1, "counts", "", None, Vec::new()),
        section(1, "bits", "m", None, sparse(MAX_CHUNK + 64, 8)),
        section(0, "level", "epoch=3", None, vec![0; 10]),
    ];
    let file = write_file(&header(2), &sections, MAX_CHUNK).await;
    let (header_back, sections_back) = read_file(&file).await.unwrap();
    assert_eq!(header_back, header(2));
    assert_eq!(sections_back, sections);
}

#[tokio::test]
async fn small_chunks_round_trip() {
    let (file, sections) = small_file().await;
    assert!((1_000..4_000).contains(&file.len()), "{}", file.len());
    assert_eq!(read_file(&file).await.unwrap(), (header(3), sections));
}

#[tokio::test]
async fn all_zero_section_is_tiny() {
    let sections = vec![section(0, "bits", "", None, vec![0; 5 << 20])];
    let file = write_file(&header(1), &sections, MAX_CHUNK).await;
    assert!(file.len() < 300, "{} bytes", file.len());
    assert_eq!(read_file(&file).await.unwrap().1, sections);
}

#[tokio::test]
async fn random_bytes_are_stored_raw() {
    let len = 2 * MAX_CHUNK + 5;
    let sections = vec![section(0, "bits", "", None, noise(len, 3))];
    let file = write_file(&header(1), &sections, MAX_CHUNK).await;
    assert!(
        (len..len + 300).contains(&file.len()),
        "{} bytes",
        file.len()
    );
    assert_eq!(read_file(&file).await.unwrap().1, sections);
}

#[tokio::test]
async fn repetitive_bytes_are_compressed() {
    let len = 2 * MAX_CHUNK;
    let sections = vec![section(0, "bits", "", None, sparse(len, 4))];
    let file = write_file(&header(1), &sections, MAX_CHUNK).await;
    assert!(file.len() < len / 4, "{} bytes", file.len());
    assert_eq!(read_file(&file).await.unwrap().1, sections);
}

#[tokio::test]
async fn every_changed_byte_is_reported() {
    let (file, _) = small_file().await;
    for pos in 0..file.len() {
        for mask in [0x01, 0x80, 0xFF] {
            let mut bad = file.clone();
            bad[pos] ^= mask;
            match read_file(&bad).await {
                Err(SnapshotError::NotASnapshot) if pos < 8 => {}
                Err(SnapshotError::Corrupt { offset, .. }) if pos >= 8 && offset <= pos as u64 => {}
                other => panic!("byte {pos} ^ {mask:#04x}: {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn every_truncation_is_reported() {
    let (file, _) = small_file().await;
    for cut in 0..file.len() {
        match read_file(&file[..cut]).await {
            Err(SnapshotError::Truncated { offset, .. }) if offset == cut as u64 => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn trailing_bytes_are_reported() {
    let (file, _) = small_file().await;
    for extra in [&[0][..], &file] {
        let longer = [&file[..], extra].concat();
        match read_file(&longer).await {
            Err(SnapshotError::TrailingBytes { offset }) if offset == file.len() as u64 => {}
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn errors_name_the_problem() {
    let (file, _) = small_file().await;
    let mut bad = file.clone();
    let last_chunk_data = file.len() - END_FRAME - 5;
    bad[last_chunk_data] ^= 1;
    let err = read_file(&bad).await.unwrap_err().to_string();
    assert!(
        err.contains("chunk 1 of section 5: payload checksum mismatch"),
        "{err}"
    );

    let err = read_file(&file[..file.len() - 3])
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "truncated snapshot: it ends at byte {}, in the end block",
            file.len() - 3
        )
    );

    let err = read_file(b"GIF89a...").await.unwrap_err().to_string();
    assert!(err.starts_with("not a redbloom snapshot"), "{err}");
    assert!(matches!(
        read_file(b"").await,
        Err(SnapshotError::Truncated { offset: 0, .. })
    ));
}

#[tokio::test]
async fn unknown_versions_are_refused() {
    let mut forge = Forge::default();
    forge.covered(b"RBLOOMSN").covered(&[0, 2]).crc();
    match read_file(&forge.bytes).await {
        Err(SnapshotError::UnsupportedVersion(2)) => {}
        other => panic!("{other:?}"),
    }
}

/// Builds a file by hand, as docs/snapshot-format.md describes it.
#[derive(Default)]
struct Forge {
    bytes: Vec<u8>,
    crc: Hasher,
}

impl Forge {
    /// Bytes written as they are and covered by the running CRC.
    fn covered(&mut self, bytes: &[u8]) -> &mut Self {
        self.crc.update(bytes);
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// A CRC field: the running CRC so far.
    fn crc(&mut self) -> &mut Self {
        let crc = self.crc.clone().finalize();
        self.bytes.extend_from_slice(&crc.to_be_bytes());
        self
    }

    /// A chunk of `raw` bytes stored as `stored` with `encoding`.
    fn chunk(&mut self, raw: &[u8], encoding: u8, stored: &[u8]) -> &mut Self {
        self.covered(&(raw.len() as u32).to_be_bytes())
            .covered(&[encoding])
            .covered(&(stored.len() as u32).to_be_bytes())
            .covered(&crc32fast::hash(raw).to_be_bytes())
            .crc()
            .covered(stored)
            .crc()
    }

    fn block(&mut self, tag: u8, content: &[u8]) -> &mut Self {
        self.covered(&[tag])
            .covered(&(content.len() as u32).to_be_bytes())
            .crc()
            .covered(content)
            .crc()
    }

    fn preamble_and_header(&mut self, shards: u32) -> &mut Self {
        let mut content = Vec::new();
        content.extend_from_slice(b"\x00\x05plain\x00\x07bits=16");
        content.extend_from_slice(&shards.to_be_bytes());
        content.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        content.extend_from_slice(b"\x00\x01w");
        self.covered(b"RBLOOMSN")
            .covered(&[0, 1])
            .crc()
            .block(b'H', &content)
    }
}

fn section_content(shard: u32, role: &str, meta: &str, len: u64, ttl: i64) -> Vec<u8> {
    let mut content = shard.to_be_bytes().to_vec();
    for s in [role, meta] {
        content.extend_from_slice(&(s.len() as u16).to_be_bytes());
        content.extend_from_slice(s.as_bytes());
    }
    content.extend_from_slice(&len.to_be_bytes());
    content.extend_from_slice(&ttl.to_be_bytes());
    content
}

fn end_content(sections: u32, total: u64) -> Vec<u8> {
    [&sections.to_be_bytes()[..], &total.to_be_bytes()].concat()
}

#[tokio::test]
async fn format_is_pinned_byte_for_byte() {
    let header = SnapshotHeader {
        kind: "plain".into(),
        params: "bits=16".into(),
        shards: 2,
        created_ms: 0x0102_0304_0506_0708,
        writer: "w".into(),
    };
    let sparse_bits = sparse(4096, 9);
    let sections = vec![
        section(1, "bits", "m", Some(1000), vec![0; 3]),
        section(0, "bits", "", None, vec![1, 2, 3]),
        section(0, "counts", "", None, Vec::new()),
        section(0, "level", "", None, sparse_bits.clone()),
    ];
    let written = write_file(&header, &sections, MAX_CHUNK).await;

    let compressed = lz4_flex::block::compress(&sparse_bits);
    let mut forge = Forge::default();
    forge
        .preamble_and_header(2)
        .block(b'S', &section_content(1, "bits", "m", 3, 1000))
        .chunk(&[0, 0, 0], 1, &[])
        .block(b'S', &section_content(0, "bits", "", 3, -1))
        .chunk(&[1, 2, 3], 0, &[1, 2, 3])
        .block(b'S', &section_content(0, "counts", "", 0, -1))
        .block(b'S', &section_content(0, "level", "", 4096, -1))
        .chunk(&sparse_bits, 2, &compressed)
        .block(b'E', &end_content(4, 4102));
    assert_eq!(written, forge.bytes);
}

#[tokio::test]
async fn forged_lengths_are_refused_before_any_allocation() {
    let started = Instant::now();
    // A header block claiming 4 GiB, with valid checksums.
    let mut forge = Forge::default();
    forge
        .covered(b"RBLOOMSN")
        .covered(&[0, 1])
        .crc()
        .covered(b"H\xFF\xFF\xFF\xFF")
        .crc();
    let err = read_file(&forge.bytes).await.unwrap_err();
    assert!(err.to_string().contains("block length 4294967295"), "{err}");
    let mut forge = Forge::default();
    forge.covered(b"RBLOOMSN").covered(&[0, 1]).crc();
    forge
        .covered(b"H")
        .covered(&(MAX_BLOCK as u32 + 1).to_be_bytes())
        .crc();
    assert!(matches!(
        read_file(&forge.bytes).await,
        Err(SnapshotError::Corrupt { .. })
    ));

    // Chunks whose lengths break the caps, with valid checksums.
    for (raw_len, encoding, stored_len) in [
        (u32::MAX, 0, u32::MAX),
        (MAX_CHUNK as u32 + 1, 1, 0),
        (MAX_CHUNK as u32, 2, MAX_CHUNK as u32 + 1),
        (MAX_CHUNK as u32, 2, u32::MAX),
        (MAX_CHUNK as u32, 0, 1),
    ] {
        let mut forge = Forge::default();
        forge
            .preamble_and_header(1)
            .block(b'S', &section_content(0, "bits", "", u64::MAX, -1))
            .covered(&raw_len.to_be_bytes())
            .covered(&[encoding])
            .covered(&stored_len.to_be_bytes())
            .covered(&[0; 4])
            .crc();
        let (mut reader, _) = SnapshotReader::open(&forge.bytes[..]).await.unwrap();
        assert_eq!(reader.next_section().await.unwrap().unwrap().len, u64::MAX);
        let err = reader.next_chunk().await.unwrap_err();
        assert!(matches!(err, SnapshotError::Corrupt { .. }), "{err}");
        assert!(reader.buffer_capacity() <= MAX_CHUNK);
    }
    assert!(started.elapsed().as_secs() < 5);
}

#[tokio::test]
async fn verified_but_inconsistent_files_are_refused() {
    let cases: Vec<(&str, Forge)> = vec![
        ("shard 1 is not below the header's 1 shards", {
            let mut f = Forge::default();
            f.preamble_and_header(1)
                .block(b'S', &section_content(1, "bits", "", 0, -1));
            f
        }),
        ("it counts 2 sections of 0 bytes, the file has 1 of 0", {
            let mut f = Forge::default();
            f.preamble_and_header(1)
                .block(b'S', &section_content(0, "bits", "", 0, -1))
                .block(b'E', &end_content(2, 0));
            f
        }),
        ("the TTL -2 is below -1", {
            let mut f = Forge::default();
            f.preamble_and_header(1)
                .block(b'S', &section_content(0, "bits", "", 0, -2));
            f
        }),
        ("unexpected block tag 0x48", {
            let mut f = Forge::default();
            f.preamble_and_header(1).block(b'H', &[]);
            f
        }),
        ("unexpected block tag 0x58", {
            let mut f = Forge::default();
            f.preamble_and_header(1).block(b'X', &[]);
            f
        }),
        ("block length 11 is not between 12 and 12", {
            let mut f = Forge::default();
            f.preamble_and_header(1).block(b'E', &[0; 11]);
            f
        }),
        ("the LZ4 payload", {
            let mut f = Forge::default();
            f.preamble_and_header(1)
                .block(b'S', &section_content(0, "bits", "", 100, -1))
                .chunk(&[0; 100], 2, &[0xFF; 4]);
            f
        }),
        ("unknown bytes after the block's last field", {
            let mut content = section_content(0, "bits", "", 0, -1);
            content.push(0);
            let mut f = Forge::default();
            f.preamble_and_header(1).block(b'S', &content);
            f
        }),
    ];
    for (expected, forge) in cases {
        let err = read_file(&forge.bytes).await.unwrap_err();
        assert!(matches!(err, SnapshotError::Corrupt { .. }), "{err}");
        assert!(
            err.to_string().contains(expected),
            "{err} lacks {expected:?}"
        );
    }
}

#[tokio::test]
async fn writer_refuses_misuse() {
    let invalid =
        |result: Result<_, SnapshotError>| matches!(result, Err(SnapshotError::InvalidInput(_)));
    assert!(invalid(
        SnapshotWriter::new(Vec::new(), &header(0))
            .await
            .map(|_| ())
    ));
    let long = SnapshotHeader {
        params: "x".repeat(70_000),
        ..header(1)
    };
    assert!(invalid(
        SnapshotWriter::new(Vec::new(), &long).await.map(|_| ())
    ));

    let mut writer = SnapshotWriter::new(Vec::new(), &header(2)).await.unwrap();
    assert!(invalid(writer.write(&[1]).await));
    assert!(invalid(
        writer
            .begin_section(&SectionHeader::new(2, "bits", 1))
            .await
    ));
    let too_long_ttl = SectionHeader {
        ttl_ms: Some(u64::MAX),
        ..SectionHeader::new(0, "bits", 1)
    };
    assert!(invalid(writer.begin_section(&too_long_ttl).await));
    writer
        .begin_section(&SectionHeader::new(1, "bits", 3))
        .await
        .unwrap();
    assert!(invalid(writer.write(&[1, 2, 3, 4]).await));
    writer.write(&[1, 2]).await.unwrap();
    assert!(invalid(
        writer
            .begin_section(&SectionHeader::new(0, "bits", 0))
            .await
    ));
    assert!(invalid(writer.write(&[3, 4]).await));
    writer.write(&[3]).await.unwrap();
    assert!(invalid(
        writer
            .begin_section(&SectionHeader::new(0, "bits", u64::MAX))
            .await
    ));
    writer
        .begin_section(&SectionHeader::new(0, "bits", 1))
        .await
        .unwrap();
    let (writer_left, finish) = (writer.bytes_written(), writer.finish().await);
    assert!(writer_left > 0 && invalid(finish.map(|_| ())));
}

#[tokio::test]
async fn reader_skips_unread_chunks_and_stays_ended() {
    let (file, sections) = small_file().await;
    let (mut reader, _) = SnapshotReader::open(&file[..]).await.unwrap();
    let mut seen = Vec::new();
    while let Some(section) = reader.next_section().await.unwrap() {
        seen.push(section);
    }
    let expected: Vec<_> = sections.into_iter().map(|(s, _)| s).collect();
    assert_eq!(seen, expected);
    assert!(reader.next_section().await.unwrap().is_none());
    assert!(reader.next_chunk().await.unwrap().is_none());
    assert_eq!(reader.bytes_read(), file.len() as u64);
}

#[tokio::test]
async fn reader_refuses_use_after_an_error() {
    let (mut file, _) = small_file().await;
    let last = file.len() - 1;
    file[last] ^= 1;
    let (mut reader, _) = SnapshotReader::open(&file[..]).await.unwrap();
    let err = loop {
        match reader.next_section().await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a changed byte went unnoticed"),
            Err(err) => break err,
        }
    };
    assert!(matches!(err, SnapshotError::Corrupt { .. }));
    assert!(matches!(
        reader.next_section().await,
        Err(SnapshotError::InvalidInput(_))
    ));
    assert!(matches!(
        reader.next_chunk().await,
        Err(SnapshotError::InvalidInput(_))
    ));
}

#[tokio::test]
async fn memory_stays_bounded_over_a_64_mib_stream() {
    const SECTION: usize = 16 << 20;
    let (to_reader, from_writer) = tokio::io::duplex(64 << 10);
    let write = async move {
        let mut writer = SnapshotWriter::new(to_reader, &header(2)).await.unwrap();
        let mut crc = Hasher::new();
        let piece_noise = noise(300_000, 5);
        let piece_sparse = sparse(300_000, 6);
        let zeros = vec![0; 300_000];
        for s in 0..4u32 {
            writer
                .begin_section(&SectionHeader::new(s % 2, "bits", SECTION as u64))
                .await
                .unwrap();
            let mut left = SECTION;
            for i in 0.. {
                let piece = [&zeros, &piece_sparse, &zeros, &piece_noise][i % 4];
                let piece = &piece[..piece.len().min(left)];
                writer.write(piece).await.unwrap();
                crc.update(piece);
                left -= piece.len();
                let (pending, compressed) = writer.buffer_capacity();
                assert!(pending <= MAX_CHUNK);
                assert!(compressed <= lz4_flex::block::get_maximum_output_size(MAX_CHUNK));
                if left == 0 {
                    break;
                }
            }
        }
        let written = writer.bytes_written();
        let mut out = writer.finish().await.unwrap();
        tokio::io::AsyncWriteExt::shutdown(&mut out).await.unwrap();
        (crc.finalize(), written)
    };
    let read = async move {
        let (mut reader, _) = SnapshotReader::open(from_writer).await.unwrap();
        let (mut crc, mut total, mut largest) = (Hasher::new(), 0, 0);
        while reader.next_section().await.unwrap().is_some() {
            while let Some(chunk) = reader.next_chunk().await.unwrap() {
                crc.update(chunk);
                total += chunk.len();
                largest = largest.max(reader.buffer_capacity());
            }
        }
        assert!(largest <= MAX_CHUNK, "{largest}");
        (crc.finalize(), total, reader.bytes_read())
    };
    let ((crc_written, written), (crc_read, total, read)) = tokio::join!(write, read);
    assert_eq!(total, 4 * SECTION);
    assert_eq!(crc_read, crc_written);
    assert!(
        read > written && read < (total / 2) as u64,
        "{read} bytes for {total}"
    );
}

/// A section's data as runs: (0: zeros, 1: one byte repeated, 2: noise; length; byte).
fn runs_to_bytes(runs: &[(u8, usize, u8)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for &(kind, len, byte) in runs {
        match kind {
            0 => bytes.resize(bytes.len() + len, 0),
            1 => bytes.resize(bytes.len() + len, byte),
            _ => bytes.extend(noise(len, u64::from(byte))),
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_sections_round_trip(
        chunk_size in 1usize..300,
        raw_sections in prop::collection::vec(
            (
                0u32..4,
                "[a-z]{0,8}",
                "\\PC{0,12}",
                prop::option::of(0u64..1 << 40),
                prop::collection::vec((0u8..3, 1usize..400, any::<u8>()), 0..4),
            ),
            0..6,
        ),
    ) {
        let sections: Sections = raw_sections
            .into_iter()
            .map(|(shard, role, meta, ttl, runs)| section(shard, &role, &meta, ttl, runs_to_bytes(&runs)))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let back = runtime.block_on(async {
            let file = write_file(&header(4), &sections, chunk_size).await;
            read_file(&file).await
        });
        prop_assert_eq!(back.unwrap(), (header(4), sections));
    }
}

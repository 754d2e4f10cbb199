//! A chunk's encoding: the writer's choice (all zeros, LZ4, or raw), the reader's checks of a
//! chunk's lengths, and LZ4 decoding. Pure functions.

use super::format::MAX_CHUNK;

/// How a chunk's payload stores its raw bytes (the chunk's `encoding` byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// The payload is the raw bytes.
    Raw = 0,
    /// The raw bytes are all zeros; no payload.
    Zeros = 1,
    /// The payload is one LZ4 block (no frame, no size prefix).
    Lz4 = 2,
}

impl Encoding {
    /// The encoding a byte names, if any.
    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::Raw),
            1 => Some(Self::Zeros),
            2 => Some(Self::Lz4),
            _ => None,
        }
    }
}

/// The writer's side: picks each chunk's encoding, keeping one buffer for LZ4's output.
#[derive(Debug)]
pub(super) struct Encoder {
    compressed: Vec<u8>,
}

impl Encoder {
    /// An encoder for chunks of at most `chunk_size` bytes.
    pub(super) fn new(chunk_size: usize) -> Self {
        Self {
            compressed: vec![0; lz4_flex::block::get_maximum_output_size(chunk_size)],
        }
    }

    /// The encoding of `raw` and its payload: no payload if all zeros; an LZ4 block if that
    /// saves at least an eighth; else `raw` itself.
    pub(super) fn encode<'a>(&'a mut self, raw: &'a [u8]) -> (Encoding, &'a [u8]) {
        if is_all_zeros(raw) {
            return (Encoding::Zeros, &[]);
        }
        let wanted = lz4_flex::block::get_maximum_output_size(raw.len());
        if self.compressed.len() < wanted {
            self.compressed.resize(wanted, 0);
        }
        match lz4_flex::block::compress_into(raw, &mut self.compressed) {
            Ok(n) if n <= raw.len() - raw.len() / 8 && n < raw.len() => {
                (Encoding::Lz4, &self.compressed[..n])
            }
            _ => (Encoding::Raw, raw),
        }
    }

    /// The capacity of its buffer, for the tests of bounded memory.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.compressed.capacity()
    }
}

fn is_all_zeros(bytes: &[u8]) -> bool {
    // Word-sized OR over blocks: an order of magnitude faster than a byte loop.
    bytes
        .chunks(64)
        .all(|block| block.iter().fold(0, |acc, &b| acc | b) == 0)
}

/// Checks a chunk's prefix against the rules and the `left` raw bytes its section still has:
/// the raw length is 1 to [`MAX_CHUNK`] and at most `left`, the encoding is known, and the
/// stored length is 0 for all zeros, the raw length for raw, and 1 to the raw length for LZ4.
pub(super) fn check_prefix(
    raw_len: u32,
    encoding: u8,
    stored_len: u32,
    left: u64,
) -> Result<Encoding, String> {
    if raw_len == 0 || raw_len as usize > MAX_CHUNK {
        return Err(format!(
            "raw length {raw_len} is not between 1 and {MAX_CHUNK}"
        ));
    }
    if u64::from(raw_len) > left {
        return Err(format!(
            "raw length {raw_len} is more than the {left} bytes left in the section"
        ));
    }
    let encoding =
        Encoding::from_byte(encoding).ok_or_else(|| format!("unknown encoding {encoding}"))?;
    let stored_ok = match encoding {
        Encoding::Raw => stored_len == raw_len,
        Encoding::Zeros => stored_len == 0,
        Encoding::Lz4 => (1..=raw_len).contains(&stored_len),
    };
    if !stored_ok {
        return Err(format!(
            "stored length {stored_len} does not fit encoding {encoding:?} of {raw_len} raw bytes"
        ));
    }
    Ok(encoding)
}

/// Decodes an LZ4 block into `raw`, which must come out exactly `raw_len` bytes long.
pub(super) fn decode_lz4(payload: &[u8], raw: &mut Vec<u8>, raw_len: usize) -> Result<(), String> {
    raw.clear();
    raw.resize(raw_len, 0);
    match lz4_flex::block::decompress_into(payload, raw) {
        Ok(n) if n == raw_len => Ok(()),
        Ok(n) => Err(format!(
            "the LZ4 payload decodes to {n} bytes, not {raw_len}"
        )),
        Err(err) => Err(format!("the LZ4 payload does not decode ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_need_no_payload() {
        let mut encoder = Encoder::new(4096);
        assert_eq!(encoder.encode(&[0; 4096]), (Encoding::Zeros, &[][..]));
    }

    #[test]
    fn repetitive_bytes_are_compressed_and_come_back() {
        let raw: Vec<u8> = (0..4096).map(|i| (i % 7) as u8).collect();
        let mut encoder = Encoder::new(4096);
        let (encoding, payload) = encoder.encode(&raw);
        assert_eq!(encoding, Encoding::Lz4);
        assert!(payload.len() < raw.len() / 8);
        let mut back = Vec::new();
        decode_lz4(payload, &mut back, raw.len()).unwrap();
        assert_eq!(back, raw);
    }

    #[test]
    fn incompressible_bytes_stay_raw() {
        let mut x = 88_172_645_463_325_252_u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let mut encoder = Encoder::new(4096);
        let (encoding, payload) = encoder.encode(&raw);
        assert_eq!(encoding, Encoding::Raw);
        assert_eq!(payload, &raw[..]);
    }

    #[test]
    fn prefix_rules() {
        assert_eq!(check_prefix(10, 0, 10, 10), Ok(Encoding::Raw));
        assert_eq!(check_prefix(10, 1, 0, 99), Ok(Encoding::Zeros));
        assert_eq!(check_prefix(10, 2, 3, 10), Ok(Encoding::Lz4));
        for (raw, enc, stored, left) in [
            (0, 0, 0, 10),
            (11, 0, 11, 10),
            (MAX_CHUNK as u32 + 1, 1, 0, u64::MAX),
            (u32::MAX, 1, 0, u64::MAX),
            (10, 3, 10, 10),
            (10, 0, 9, 10),
            (10, 1, 1, 10),
            (10, 2, 0, 10),
            (10, 2, 11, 10),
            (10, 2, u32::MAX, 10),
        ] {
            assert!(
                check_prefix(raw, enc, stored, left).is_err(),
                "{raw} {enc} {stored}"
            );
        }
    }

    #[test]
    fn bad_lz4_is_an_error_not_a_panic() {
        let mut raw = Vec::new();
        for payload in [&[0xFF; 16][..], &[0x1F, 1, 0, 0], &[0xF0], &[0x00, 0x10]] {
            assert!(decode_lz4(payload, &mut raw, 100).is_err());
        }
    }
}

//! Token ids stored compactly: each list is bit-packed at the width its largest id needs.
//!
//! A run of 25,000 samples × 8,000 tokens is 200 million ids; as a JSON array of numbers that is
//! about 1.3 GB, as plain 32-bit integers 800 MB, and neither compresses well (the ids of a
//! 150,000-token vocabulary look random to LZ-style compressors). Packed at 18 bits (any
//! vocabulary below 262,144 tokens) it is 450 MB, decoded at memory speed. The format is one
//! byte giving the width in bits (0–32), the number of ids (4 bytes, little-endian), then the
//! ids, least significant bit first.

/// Packs `ids` at the smallest width that holds the largest of them.
pub fn pack(ids: &[u32]) -> Vec<u8> {
    let width = ids.iter().max().map_or(0, |&max| u32::BITS - max.leading_zeros());
    let mut out = Vec::with_capacity(5 + (ids.len() * width as usize).div_ceil(8));
    out.push(width as u8);
    out.extend_from_slice(&u32::try_from(ids.len()).expect("fewer than 4 billion ids").to_le_bytes());
    let (mut buffer, mut filled) = (0u64, 0u32);
    for &id in ids {
        buffer |= u64::from(id) << filled;
        filled += width;
        while filled >= 8 {
            out.push(buffer as u8);
            buffer >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(buffer as u8);
    }
    out
}

/// The ids `pack` wrote.
pub fn unpack(bytes: &[u8]) -> Result<Vec<u32>, String> {
    if bytes.len() < 5 {
        return Err(format!("a token id record of {} bytes, shorter than its header", bytes.len()));
    }
    let width = u32::from(bytes[0]);
    let count = u32::from_le_bytes(bytes[1..5].try_into().expect("four bytes")) as usize;
    let packed = &bytes[5..];
    if width > 32 {
        return Err(format!("a token id record with a width of {width} bits"));
    }
    let needed = (count * width as usize).div_ceil(8);
    if packed.len() != needed {
        return Err(format!("a token id record of {} bytes for {count} ids of {width} bits", packed.len()));
    }
    let mask = if width == 32 { u64::from(u32::MAX) } else { (1u64 << width) - 1 };
    let mut ids = Vec::with_capacity(count);
    let (mut buffer, mut filled, mut bytes) = (0u64, 0u32, packed.iter());
    for _ in 0..count {
        while filled < width {
            buffer |= u64::from(*bytes.next().expect("length checked")) << filled;
            filled += 8;
        }
        ids.push((buffer & mask) as u32);
        buffer >>= width;
        filled -= width;
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_at_every_width() {
        for ids in [
            vec![],
            vec![0, 0, 0],
            vec![1],
            vec![151_645, 198, 3, 151_644, 77_091],
            vec![u32::MAX, 0, 12_345, u32::MAX - 1],
            (0..10_000).map(|i| (i * 7_919) % 200_003).collect(),
        ] {
            let packed = pack(&ids);
            assert_eq!(unpack(&packed).unwrap(), ids);
        }
    }

    #[test]
    fn a_vocabulary_below_262144_tokens_takes_18_bits_an_id() {
        let ids: Vec<u32> = (0..8_000).map(|i| 150_000 + i % 1_000).collect();
        let packed = pack(&ids);
        assert_eq!(packed[0], 18);
        assert_eq!(packed.len(), 5 + 8_000 * 18 / 8);
    }

    #[test]
    fn damaged_records_are_refused() {
        let mut packed = pack(&[5, 6, 7]);
        packed[1] = 9;
        assert!(unpack(&packed).unwrap_err().contains("for 9 ids"));
        assert!(unpack(&[]).is_err());
        assert!(unpack(&[40, 0, 0, 0, 0]).unwrap_err().contains("40 bits"));
    }
}

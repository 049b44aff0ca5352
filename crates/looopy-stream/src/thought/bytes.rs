//! Byte-level helpers for the hot path: model output often arrives a few bytes at a time, so
//! searching and comparing tiny slices must not pay for a `memchr` or `memcmp` call.

/// Position of `needle` in `haystack`. Model output often arrives a few bytes at a time, and
/// for such short slices a plain loop beats `memchr`'s setup.
#[inline]
pub(crate) fn find_byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    if haystack.len() < 16 {
        haystack.iter().position(|b| *b == needle)
    } else {
        memchr::memchr(needle, haystack)
    }
}

/// Whether `bytes` contains `needle`; for 4 to 16 bytes with overlapping word loads instead
/// of a loop or a `memchr` call, since this runs on every small chunk.
#[inline(always)]
pub(crate) fn small_contains(bytes: &[u8], needle: u8) -> bool {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let splat = LOW * u64::from(needle);
    // True when some byte of `x` equals the needle (exact as a yes/no answer).
    let has = |x: u64| {
        let x = x ^ splat;
        x.wrapping_sub(LOW) & !x & HIGH != 0
    };
    let n = bytes.len();
    match n {
        4..8 => match (word::<4>(bytes, 0), word::<4>(bytes, n - 4)) {
            // Both overlapping halves in one word.
            (Some(lo), Some(hi)) => {
                has(u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32)
            }
            _ => bytes.contains(&needle),
        },
        8..=16 => match (word::<8>(bytes, 0), word::<8>(bytes, n - 8)) {
            (Some(lo), Some(hi)) => has(u64::from_le_bytes(lo)) || has(u64::from_le_bytes(hi)),
            _ => bytes.contains(&needle),
        },
        // `contains` would call `memchr`; three compares are cheaper.
        0..4 => bytes.iter().fold(false, |seen, b| seen | (*b == needle)),
        _ => memchr::memchr(needle, bytes).is_some(),
    }
}

/// The `N` bytes of `s` at `at`, if there are that many.
#[inline(always)]
fn word<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
    s.get(at..at.checked_add(N)?)
        .and_then(|w| w.try_into().ok())
}

/// `a == b`, word-wise for short ids: this runs once per delta, and both a `memcmp` call and
/// a byte loop cost more than the rest of a small delta.
#[inline]
pub(crate) fn same_id(a: &str, b: &str) -> bool {
    let (a, b, n) = (a.as_bytes(), b.as_bytes(), a.len());
    if n != b.len() {
        return false;
    }
    match n {
        4..=7 => word::<4>(a, 0) == word(b, 0) && word::<4>(a, n - 4) == word(b, n - 4),
        8..=16 => word::<8>(a, 0) == word(b, 0) && word::<8>(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// Largest char boundary of `s` at or below `at`.
pub(crate) fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_contains_matches_a_plain_search() {
        let base: Vec<u8> = (b'a'..=b'z').collect();
        for len in 0..=20 {
            let hay = &base[..len];
            assert!(!small_contains(hay, b'<'));
            for at in 0..len {
                let mut hay = hay.to_vec();
                hay[at] = b'<';
                assert!(small_contains(&hay, b'<'), "len {len} at {at}");
                assert_eq!(find_byte(b'<', &hay), Some(at));
            }
        }
        assert!(!small_contains(&[0xFF, 0x3C ^ 0xFF, 0, 1], b'<'));
        assert!(small_contains(&[0x80, 0xC3, 0xA9, b'&', 0xFF], b'&'));
    }

    #[test]
    fn same_id_compares_exactly() {
        for a in [
            "",
            "a",
            "abc",
            "abcd",
            "thought-1",
            "thought-12",
            "a-very-long-thought-id-indeed",
        ] {
            for b in [
                "",
                "a",
                "abd",
                "abce",
                "thought-2",
                "thought-12",
                "a-very-long-thought-id-indeeD",
            ] {
                assert_eq!(same_id(a, b), a == b, "{a:?} {b:?}");
            }
            assert!(same_id(a, a));
        }
    }

    #[test]
    fn floor_char_boundary_steps_back_into_chars() {
        let s = "aé日";
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(floor_char_boundary(s, 4), 3);
        assert_eq!(floor_char_boundary(s, 99), s.len());
    }
}

//! Byte-level helpers for the hot path: model output often arrives a few bytes at a time, so
//! searching, comparing and copying tiny slices must not pay for a `memchr`, `memcmp` or
//! `memcpy` call.

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

/// Up to 16 bytes of a chunk of known length, zero-padded into two words, so searching it
/// for a byte is a few ALU operations (no loop, no `memchr` call). Padding never matches: all
/// needles searched for are non-zero.
#[derive(Clone, Copy)]
pub(crate) struct SmallChunk([u64; 2]);

impl SmallChunk {
    /// The first `N` bytes of `bytes` (`N` at most 16; more bytes are ignored).
    #[inline(always)]
    pub(crate) fn new<const N: usize>(bytes: &[u8; N]) -> Self {
        let mut padded = [0u8; 16];
        let n = N.min(16);
        padded[..n].copy_from_slice(&bytes[..n]);
        let lo = word::<8>(&padded, 0).map_or(0, u64::from_le_bytes);
        let hi = word::<8>(&padded, 8).map_or(0, u64::from_le_bytes);
        Self([lo, hi])
    }

    /// Whether some byte equals `needle` (which must not be 0).
    #[inline(always)]
    pub(crate) fn contains(self, needle: u8) -> bool {
        let [lo, hi] = self.0;
        has_byte(lo, needle) | has_byte(hi, needle)
    }
}

/// True when some byte of `word` equals `needle` (exact as a yes/no answer: the classic
/// "has zero byte" test can only err on bytes above a real match).
#[inline(always)]
fn has_byte(word: u64, needle: u8) -> bool {
    const LOW: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = word ^ (LOW * u64::from(needle));
    x.wrapping_sub(LOW) & !x & HIGH != 0
}

/// The `N` bytes of `s` at `at`, if there are that many.
#[inline(always)]
fn word<const N: usize>(s: &[u8], at: usize) -> Option<[u8; N]> {
    s.get(at..at.checked_add(N)?)
        .and_then(|w| w.try_into().ok())
}

/// `a == b`, word-wise for short ids: this runs once per delta, and both a `memcmp` call and
/// a byte loop cost more than the rest of a small delta.
#[inline(always)]
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

/// Appends `s` to `dst`. Streamed tokens are a few bytes long, and a `memcpy` call costs more
/// than such a copy: up to 16 bytes, each length gets its own copy of known size, which
/// compiles to a move or two.
#[inline(always)]
pub(crate) fn append(dst: &mut String, s: &str) {
    macro_rules! by_length {
        ($($n:literal)*) => {
            match s.len() {
                $($n => push_exact::<$n>(dst, s),)*
                _ => dst.push_str(s),
            }
        };
    }
    by_length!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// `s` as a new `String` of exactly its length, copied like [`append`] (a consumer that
/// drains after every chunk gets one such string per event).
#[inline(always)]
pub(crate) fn owned(s: &str) -> String {
    let mut new = String::with_capacity(s.len());
    append(&mut new, s);
    new
}

/// `dst.push_str(s)` for `s.len() == N`, with the length a constant.
#[inline(always)]
fn push_exact<const N: usize>(dst: &mut String, s: &str) {
    if let Some(exact) = s.get(..N) {
        dst.push_str(exact);
    }
}

/// Whether `b` is in the ASCII byte set `set` (bit `b` set); non-ASCII bytes never are.
#[inline(always)]
pub(crate) fn in_set(set: u128, b: u8) -> bool {
    b < 128 && (set >> b) & 1 != 0
}

/// The ASCII byte set holding `b` (empty for non-ASCII bytes).
pub(crate) fn byte_set(b: u8) -> u128 {
    if b < 128 { 1 << b } else { 0 }
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

    /// `SmallChunk::contains` for an `N`-byte chunk, checked against a plain search.
    fn check_small<const N: usize>(hay: &[u8]) {
        if let Some(bytes) = hay.first_chunk::<N>() {
            let small = SmallChunk::new(bytes);
            for needle in [b'<', b'&', b'"', 0xFF, 0xC3] {
                assert_eq!(
                    small.contains(needle),
                    bytes.contains(&needle),
                    "{hay:?} {needle}"
                );
            }
        }
    }

    fn check_small_any(hay: &[u8]) {
        macro_rules! each_length {
            ($($n:literal)*) => { $(if hay.len() == $n { check_small::<$n>(hay); })* };
        }
        each_length!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    }

    #[test]
    fn small_chunk_search_matches_a_plain_search() {
        let base: Vec<u8> = (b'a'..=b'z').collect();
        for len in 0..=16 {
            let hay = &base[..len];
            check_small_any(hay);
            for at in 0..len {
                let mut hay = hay.to_vec();
                hay[at] = b'<';
                check_small_any(&hay);
                assert_eq!(find_byte(b'<', &hay), Some(at));
                hay[at] = 0xFF;
                check_small_any(&hay);
            }
        }
        check_small_any(&[0xFF, 0x3C ^ 0xFF, 0, 1]);
        check_small_any(&[0x80, 0xC3, 0xA9, b'&', 0xFF]);
        check_small_any(&[0x3D, 0x3B, 0x3C, 0x3C, 0x3D, 0, 0x3B, 0x3C, 1, 0x3C]);
        assert!(SmallChunk::new(b"ab<c").contains(b'<'));
        assert!(!SmallChunk::new(b"Vec u8 and more!").contains(b'<'));
    }

    #[test]
    fn append_copies_every_length() {
        let src = "abcdefghijklmnopqrstuvwxyzé日🙂";
        for start in 0..src.len() {
            for end in start..=src.len() {
                let Some(piece) = src.get(start..end) else {
                    continue;
                };
                let mut dst = String::from("x");
                append(&mut dst, piece);
                assert_eq!(dst, format!("x{piece}"));
                let new = owned(piece);
                assert_eq!((new.as_str(), new.capacity()), (piece, piece.len()));
            }
        }
    }

    #[test]
    fn byte_sets() {
        let set = byte_set(b't') | byte_set(b'/');
        assert!(in_set(set, b't') && in_set(set, b'/'));
        assert!(!in_set(set, b'u') && !in_set(set, 0xF4) && !in_set(set, 0x74 | 0x80));
        assert_eq!(byte_set(0xC3), 0);
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

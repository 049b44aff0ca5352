//! Any chunking of an input: a streaming parser must give the same result however its input
//! is cut, so property tests cut inputs at arbitrary points and compare.

/// `input` cut at `cuts`: each cut is taken modulo `len + 1` and moved down to a char
/// boundary; the points are sorted and deduplicated. A cut at 0 or at the end gives an empty
/// first or last piece (a parser must take empty chunks too); there is always at least one
/// piece, and the pieces always join to `input`.
pub fn cut_str<'a>(input: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let points = cuts.iter().map(|&cut| {
        let mut point = cut % (input.len() + 1);
        while !input.is_char_boundary(point) {
            point -= 1;
        }
        point
    });
    ranges(input.len(), points)
        .into_iter()
        .map(|(start, end)| &input[start..end])
        .collect()
}

/// `input` cut at `cuts` (each taken modulo `len + 1`; sorted, deduplicated; empty first or
/// last piece for a cut at 0 or at the end, as [`cut_str`]).
pub fn cut_bytes<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let points = cuts.iter().map(|&cut| cut % (input.len() + 1));
    ranges(input.len(), points)
        .into_iter()
        .map(|(start, end)| &input[start..end])
        .collect()
}

/// The `(start, end)` ranges between consecutive distinct `points` (all `<= len`), from 0 to
/// `len`.
fn ranges(len: usize, points: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
    let mut points: Vec<usize> = points.collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for point in points {
        out.push((start, point));
        start = point;
    }
    out.push((start, len));
    out
}

/// `s` in pieces of at most `max` bytes, each ending on a char boundary (a piece is longer
/// only when one char is).
pub fn char_chunks(s: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + max).min(s.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        if end == start {
            end = start + s[start..].chars().next().map_or(1, char::len_utf8);
        }
        pieces.push(&s[start..end]);
        start = end;
    }
    pieces
}

/// Every way a parser's rules are checked to be chunking-proof: whole, split in two at
/// every char boundary, and one char at a time — each with a description for the
/// assertion message.
pub fn chunkings(input: &str) -> Vec<(String, Vec<&str>)> {
    let mut ways = vec![("whole".to_owned(), vec![input])];
    for (at, _) in input.char_indices().skip(1) {
        ways.push((
            format!("split at byte {at}"),
            vec![&input[..at], &input[at..]],
        ));
    }
    ways.push(("1-char chunks".to_owned(), char_chunks(input, 1)));
    ways
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_move_to_char_boundaries_and_cover_the_input() {
        let input = "aé世b";
        for cuts in [vec![], vec![0], vec![2], vec![3, 1, 3], vec![99, 4, 6]] {
            let pieces = cut_str(input, &cuts);
            assert_eq!(pieces.concat(), input, "{cuts:?}");
        }
        // 2 is inside 'é' (bytes 1..3): moved down to 1.
        assert_eq!(cut_str(input, &[2]), ["a", "é世b"]);
        // A cut at 0 or at the end gives an empty piece there (7 % 8 = 7 = len).
        assert_eq!(cut_str(input, &[0, 7]), ["", "aé世b", ""]);
        assert_eq!(cut_str(input, &[]), ["aé世b"]);
        assert_eq!(cut_str("", &[5]), ["", ""]);
    }

    #[test]
    fn byte_cuts_cover_the_input() {
        let input = b"abcdef";
        assert_eq!(cut_bytes(input, &[4, 2, 2]), [&b"ab"[..], b"cd", b"ef"]);
        // 13 % 7 = 6, the end: an empty last piece; 14 % 7 = 0: an empty first one.
        assert_eq!(cut_bytes(input, &[13]), [&b"abcdef"[..], b""]);
        assert_eq!(cut_bytes(input, &[14]), [&b""[..], b"abcdef"]);
        assert_eq!(cut_bytes(b"", &[]), [&b""[..]]);
    }

    #[test]
    fn char_chunks_keep_chars_whole() {
        assert_eq!(char_chunks("ab世c", 2), ["ab", "世", "c"]);
        assert_eq!(char_chunks("世", 1), ["世"]);
        assert!(char_chunks("", 3).is_empty());
    }

    #[test]
    fn chunkings_are_whole_every_split_and_single_chars() {
        let ways = chunkings("aé");
        let pieces: Vec<_> = ways.iter().map(|(_, p)| p.clone()).collect();
        assert_eq!(pieces, [vec!["aé"], vec!["a", "é"], vec!["a", "é"]]);
        assert!(ways.iter().all(|(_, p)| p.concat() == "aé"));
    }
}

//! Text helpers shared by every crate that bounds a text it keeps.

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on
/// a character boundary.
///
/// ```
/// use loopguard_core_types::truncate_to_char_boundary;
/// assert_eq!(truncate_to_char_boundary("héllo", 2), "h");
/// assert_eq!(truncate_to_char_boundary("héllo", 3), "hé");
/// assert_eq!(truncate_to_char_boundary("héllo", 99), "héllo");
/// ```
pub fn truncate_to_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

//! Bounded, escaped text for messages: what every part of the host uses to quote a value a
//! driver or an operator gave it. A leaf: it depends on nothing else in the crate.

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A driver-supplied value shown safely in a message: at most 64 characters, escaped, with its
/// size when it was longer (a hostile value may hold megabytes or control characters).
pub fn shown(value: &str) -> String {
    let head: String = value.chars().take(64).collect();
    if head.len() < value.len() {
        format!("{head:?}… ({} bytes)", value.len())
    } else {
        format!("{head:?}")
    }
}

//! Small helpers every detector with a bounded history uses: message
//! hashes and windows that drop their oldest item.

use std::collections::VecDeque;

/// Agents a detector remembers per task, the least recently active
/// forgotten first.
pub(crate) const AGENTS_PER_TASK: usize = 64;

use sha2::{Digest, Sha256};

/// The first 128 bits of the SHA-256 of `text`: enough to tell messages
/// apart, half the size of the full digest.
pub fn hash128(text: &str) -> [u8; 16] {
    let digest = Sha256::digest(text.as_bytes());
    let mut head = [0u8; 16];
    for (slot, byte) in head.iter_mut().zip(digest.iter()) {
        *slot = *byte;
    }
    head
}

/// Appends `item` to a window of at most `cap` items, dropping the oldest.
///
/// The buffer grows by half (at least 4) and no further than `cap`, so a
/// full window neither reallocates nor holds spare room, and a window that
/// is mostly empty holds little (a `VecDeque` doubles by default).
pub fn push_bounded<T>(window: &mut VecDeque<T>, item: T, cap: usize) {
    let cap = cap.max(1);
    while window.len() >= cap {
        window.pop_front();
    }
    if window.len() == window.capacity() {
        let grow = (window.len() / 2).max(4).min(cap - window.len());
        window.reserve_exact(grow);
    }
    window.push_back(item);
}

/// The item of `window` that `is_it` finds, made the most recent (moved to
/// the back); without one, `make()` is pushed as the most recent,
/// forgetting the least recent past `cap` (an LRU list small enough to
/// scan).
pub fn most_recent_mut<T>(
    window: &mut VecDeque<T>,
    is_it: impl Fn(&T) -> bool,
    make: impl FnOnce() -> T,
    cap: usize,
) -> &mut T {
    match window.iter().position(is_it) {
        Some(at) => {
            if let Some(item) = window.remove(at) {
                window.push_back(item);
            }
        }
        None => push_bounded(window, make(), cap),
    }
    // Not empty: an item was just moved or pushed to the back.
    let last = window.len() - 1;
    &mut window[last]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_bounded_keeps_the_newest_items() {
        let mut window = VecDeque::new();
        for item in 1..=25 {
            push_bounded(&mut window, item, 10);
            assert!(window.len() <= 10);
        }
        assert_eq!(window, (16..=25).collect::<VecDeque<_>>());
        let mut window = VecDeque::new();
        push_bounded(&mut window, 1, 0);
        push_bounded(&mut window, 2, 0);
        assert_eq!(window, [2]);
        // Grown in steps of at least 4 to exactly the cap, never past it.
        let mut window = VecDeque::new();
        for item in 1..=25 {
            push_bounded(&mut window, item, 10);
        }
        assert_eq!(window.capacity(), 10);
    }

    #[test]
    fn hash128_is_the_head_of_sha256() {
        // SHA-256("") = e3b0c442 98fc1c14 9afbf4c8 996fb924 ...
        assert_eq!(
            hash128(""),
            [
                0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f,
                0xb9, 0x24
            ]
        );
    }

    #[test]
    fn the_item_found_becomes_the_most_recent_and_a_new_one_forgets_the_oldest() {
        let mut window: VecDeque<(u8, u32)> = VecDeque::new();
        for key in 1..=3 {
            *most_recent_mut(&mut window, |item| item.0 == key, || (key, 0), 3) = (key, 1);
        }
        most_recent_mut(&mut window, |item| item.0 == 1, || (1, 0), 3).1 += 1;
        assert_eq!(window, [(2, 1), (3, 1), (1, 2)]);
        most_recent_mut(&mut window, |item| item.0 == 4, || (4, 0), 3);
        assert_eq!(
            window,
            [(3, 1), (1, 2), (4, 0)],
            "the least recent, 2, is forgotten"
        );
    }
}

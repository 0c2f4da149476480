//! Each text as a template: what it does with what both texts name.
//!
//! The whole texts' cosine is dominated by the names they share; written
//! with every content word the other text has too as a placeholder, two
//! texts keep only what each does with those names, and the templates'
//! cosine tells another action on the same thing from the same action
//! reworded.

use std::collections::HashSet;

use crate::text::{ReadText, Tokens};

/// The placeholder [`templates`] writes for a word both texts have.
pub const TEMPLATE_PLACEHOLDER: &str = "X";

/// Each text as written (lowercase, punctuation out), with every content
/// word and identifier the other text has too written as
/// [`TEMPLATE_PLACEHOLDER`]: what is left is what each does with what
/// both name. "Draft the Q3 board deck" and "Present the Q3 board deck
/// once the numbers are final" become "draft the X X X" and "present the
/// X X X once the numbers are final".
pub fn templates(a: &ReadText, b: &ReadText) -> (String, String) {
    (
        template(&a.tokens, &b.tokens),
        template(&b.tokens, &a.tokens),
    )
}

/// `mine` with every content key `theirs` has too as a placeholder.
fn template(mine: &Tokens, theirs: &Tokens) -> String {
    let shared: HashSet<&str> = theirs
        .keys
        .iter()
        .zip(&theirs.shown)
        .filter(|(_, (_, content))| *content)
        .map(|(key, _)| key.as_str())
        .collect();
    let mut out = String::new();
    for (key, (written, content)) in mine.keys.iter().zip(&mine.shown) {
        if !out.is_empty() {
            out.push(' ');
        }
        if *content && shared.contains(key.as_str()) {
            out.push_str(TEMPLATE_PLACEHOLDER);
        } else {
            out.push_str(written);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_writes_what_both_texts_name_as_a_placeholder() {
        let (a, b) = (
            ReadText::new("Draft the Q3 board deck."),
            ReadText::new("Present the Q3 board deck once the numbers are final."),
        );
        assert_eq!(
            templates(&a, &b),
            (
                "draft the X X X".to_owned(),
                "present the X X X once the numbers are final".to_owned()
            )
        );
        // Stop words stay as written, shared or not; a word only one side
        // has stays too.
        let (a, b) = (
            ReadText::new("Can you merge PR #233?"),
            ReadText::new("Please merge the docs in PR #233."),
        );
        assert_eq!(
            templates(&a, &b),
            (
                "can you X X X".to_owned(),
                "please X the docs in X X".to_owned()
            )
        );
    }
}

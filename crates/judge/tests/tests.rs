//! The integration tests, one binary: every shipped pair scored as
//! recorded (`shipped_pairs`), and the veto cases (`veto_cases`).

mod shipped_pairs;
mod support;
mod veto_cases;

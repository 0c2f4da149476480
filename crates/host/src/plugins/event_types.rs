//! Which event types a plugin may be sent, by the ABI minor it was built
//! for. Safe code, consulted by the typed and adapter layers.
//!
//! The trace format grows new event types (revision 1.1 adds `tool_call`),
//! and a consumer must accept types newer than itself. Plugins built with
//! SDKs of ABI 1.0 to 1.2 decode events strictly and answer a type they do
//! not know with an error, which would count as a fault; from ABI 1.3 on,
//! the SDK skips such an event. So the host sends an event only to plugins
//! whose ABI minor is at least the one that first carries its type.
#![forbid(unsafe_code)]

/// Each event type of the trace format, with the ABI minor whose SDK first
/// carries it (reads it, or skips it without an error). Append a row when
/// the format gains an event type.
const FIRST_MINOR_BY_EVENT_TYPE: [(&str, u32); 9] = [
    ("handoff", 0),
    ("collaboration", 0),
    ("failure", 0),
    ("turn", 0),
    ("transition", 0),
    ("progress", 0),
    ("completed", 0),
    ("human", 0),
    ("tool_call", 3),
];

/// The first ABI minor whose SDK skips event types newer than itself.
/// Event types this host does not know go only to plugins of this minor or
/// later.
const SKIPS_NEWER_EVENT_TYPES_SINCE_MINOR: u32 = 3;

// A host cannot rely on a promise of a minor newer than its own.
const _: () = assert!(SKIPS_NEWER_EVENT_TYPES_SINCE_MINOR <= loopguard_plugin_api::abi::ABI_MINOR);

/// The ABI minor that first carries events of `event_type`.
pub(super) fn first_minor_carrying(event_type: &str) -> u32 {
    FIRST_MINOR_BY_EVENT_TYPE
        .iter()
        .find(|(known, _)| *known == event_type)
        .map_or(SKIPS_NEWER_EVENT_TYPES_SINCE_MINOR, |(_, minor)| *minor)
}

/// Whether a plugin built for ABI minor `plugin_minor` may be sent an
/// event of `event_type`.
pub(super) fn plugin_reads(plugin_minor: u32, event_type: &str) -> bool {
    plugin_minor >= first_minor_carrying(event_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopguard_core_types::EVENT_TYPES;
    use loopguard_plugin_api::abi::{ABI_MINOR, ABI_OLDEST_SUPPORTED_MINOR};

    #[test]
    fn the_types_of_format_1_0_reach_every_plugin_and_tool_call_from_1_3() {
        for event_type in EVENT_TYPES.iter().filter(|t| **t != "tool_call") {
            assert_eq!(first_minor_carrying(event_type), 0, "{event_type}");
            assert!(plugin_reads(ABI_OLDEST_SUPPORTED_MINOR, event_type));
        }
        assert_eq!(first_minor_carrying("tool_call"), 3);
        for minor in 0..3 {
            assert!(!plugin_reads(minor, "tool_call"), "minor {minor}");
        }
        assert!(plugin_reads(3, "tool_call"));
        assert!(plugin_reads(ABI_MINOR, "tool_call"));
    }

    #[test]
    fn a_type_this_host_does_not_know_goes_only_to_plugins_that_skip_it() {
        assert!(!plugin_reads(2, "tool_result_v9"));
        assert!(plugin_reads(
            SKIPS_NEWER_EVENT_TYPES_SINCE_MINOR,
            "tool_result_v9"
        ));
    }

    #[test]
    fn no_event_type_needs_a_minor_newer_than_this_host() {
        for (event_type, minor) in FIRST_MINOR_BY_EVENT_TYPE {
            assert!(minor <= ABI_MINOR, "{event_type} needs minor {minor}");
        }
    }
}

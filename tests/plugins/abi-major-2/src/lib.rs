//! A plugin whose table claims ABI 2.0 (through the export macro's hidden
//! fixture arm): a 1.x host must refuse it, naming both versions.

use loopguard_plugin_api::serde_json::Value;
use loopguard_plugin_api::{Detection, Detector, Event};

/// A detector that never reports.
pub struct FromTheFuture;

impl Detector for FromTheFuture {
    const NAME: &'static str = "from_the_future";
    const VERSION: &'static str = "2.0.0";
    const KINDS: &'static [&'static str] = &["future"];

    fn new(_config: Value) -> Result<Self, String> {
        Ok(FromTheFuture)
    }

    fn observe(&mut self, _line: u64, _event: &Event) -> Vec<Detection> {
        Vec::new()
    }
}

loopguard_plugin_api::export_detector!(@abi FromTheFuture, 2, 0);

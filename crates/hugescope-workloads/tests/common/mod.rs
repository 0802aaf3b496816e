//! What the workload tests share: a sink that records a workload's trace as
//! an ordered list of events, and JSON parameters as `Params`.

use hugescope_core::trace::{Access, AccessSink};
use hugescope_workloads::Params;
use serde_json::Value;

pub fn params(v: Value) -> Params {
    v.as_object().cloned().unwrap_or_default()
}

/// One event of a workload's trace, in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ev {
    Access(Access),
    Populate(u64, u64),
    Free(u64, u64),
    Progress(String),
}

#[derive(Default)]
pub struct Record(pub Vec<Ev>);

impl AccessSink for Record {
    fn access(&mut self, a: Access) {
        self.0.push(Ev::Access(a));
    }
    fn progress(&mut self, label: &str) {
        self.0.push(Ev::Progress(label.to_string()));
    }
    fn populate(&mut self, _pid: u16, start: u64, len: u64) {
        self.0.push(Ev::Populate(start, len));
    }
    fn free(&mut self, _pid: u16, start: u64, len: u64) {
        self.0.push(Ev::Free(start, len));
    }
}

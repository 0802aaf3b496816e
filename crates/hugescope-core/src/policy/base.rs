//! `base`: never map a huge page. The 4KB baseline every paper measures against.

use super::{Params, Policy};
use crate::Result;

pub struct Base;

pub fn new(_p: &mut Params) -> Result<Box<dyn Policy>> {
    Ok(Box::new(Base))
}

impl Policy for Base {
    fn name(&self) -> &'static str {
        "base"
    }
}

//! The core's `.hst` reader (`hugescope_core::trace::hst::HstReader`) for
//! Python, one chunk at a time: `python/hugescope/trace_reader.py` wraps each
//! chunk as a numpy structured array without copying it again. The only
//! `.hst` reader there is; every check (checksums, lengths, the footer's
//! counts) is the core's, and a bad file raises one `HugescopeError` naming
//! the file and the byte.

use hugescope_core::trace::hst::HstReader;
use hugescope_core::trace::Access;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{err, json};

/// Bytes of one access in a chunk: `addr` u64, `write` u8 (0 or 1), `cpu`
/// u16, `pid` u16, little-endian and packed (numpy's
/// `[("addr", "<u8"), ("write", "?"), ("cpu", "<u2"), ("pid", "<u2")]`).
pub const RECORD_BYTES: usize = 13;

/// An open trace whose chunks are read in order.
#[pyclass(module = "hugescope._core")]
struct TraceReader {
    reader: HstReader,
}

#[pymethods]
impl TraceReader {
    /// Open `path`: the preamble, header and footer are checked now.
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let reader = py.detach(|| HstReader::open(&path)).map_err(err)?;
        Ok(TraceReader { reader })
    }

    /// The trace header (workload, parameters, regions, ...) as JSON.
    fn header_json(&self) -> PyResult<String> {
        json(self.reader.header())
    }

    /// The next chunk's accesses as packed records (`RECORD_BYTES` each),
    /// or None after the last chunk (once the stream has been checked
    /// against the footer). The GIL is released while decoding.
    fn next_chunk<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let reader = &mut self.reader;
        let chunk: Option<Vec<u64>> = py.detach(|| reader.next_chunk().map(|c| c.map(<[u64]>::to_vec))).map_err(err)?;
        let Some(records) = chunk else {
            return Ok(None);
        };
        let bytes = PyBytes::new_with(py, records.len() * RECORD_BYTES, |buf| {
            for (out, &r) in buf.chunks_exact_mut(RECORD_BYTES).zip(&records) {
                let a = Access::unpack(r);
                out[..8].copy_from_slice(&a.addr.to_le_bytes());
                out[8] = u8::from(a.write);
                out[9..11].copy_from_slice(&a.cpu.to_le_bytes());
                out[11..13].copy_from_slice(&a.pid.to_le_bytes());
            }
            Ok(())
        })?;
        Ok(Some(bytes))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TraceReader>()?;
    m.add("TRACE_RECORD_BYTES", RECORD_BYTES)?;
    Ok(())
}

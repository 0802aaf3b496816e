//! Bindings for tracing real programs and importing other tools' traces
//! (`hugescope trace -- ./prog`, `hugescope trace import`, `hugescope cc`).
//! The work is in `hugescope_core::trace::import`; `python/hugescope/tracing.py`
//! runs the programs.

use std::path::Path;

use hugescope_core::trace::import::{self, Format, ImportOptions, Window};
use hugescope_core::trace::TraceHeader;
use pyo3::prelude::*;

use crate::interrupt::cancellable;
use crate::{err, json};

/// The C runtime's source, built into the extension so `hugescope cc` works
/// from any installation (not only from a source checkout).
const RUNTIME_SOURCE: &str = include_str!("../../../tracer/hugescope_trace.c");

#[pyfunction]
fn tracer_runtime_source() -> &'static str {
    RUNTIME_SOURCE
}

fn header(workload: &str, params_json: &str) -> PyResult<TraceHeader> {
    let mut h = TraceHeader::new(workload);
    match serde_json::from_str::<serde_json::Value>(params_json).map_err(err)? {
        serde_json::Value::Object(m) => h.params = m,
        _ => return Err(err("trace parameters must be a JSON object")),
    }
    Ok(h)
}

/// Import a lackey / ChampSim / text trace from `input` (a file path, or the
/// name shown in messages when `fd` is given: a pipe to read instead, such as
/// valgrind's output). Returns the trace summary as JSON.
#[pyfunction]
#[pyo3(signature = (format, input, output, workload, params_json="{}".to_string(), skip=0, record=None,
    instructions=false, fd=None))]
#[allow(clippy::too_many_arguments)]
fn import_trace(
    py: Python<'_>,
    format: String,
    input: String,
    output: String,
    workload: String,
    params_json: String,
    skip: u64,
    record: Option<u64>,
    instructions: bool,
    fd: Option<i32>,
) -> PyResult<String> {
    let format = Format::parse(&format).map_err(err)?;
    let h = header(&workload, &params_json)?;
    let opts = ImportOptions { window: Window { skip, record }, instructions, cpu: 0 };
    let mut reader: Box<dyn std::io::Read + Send> = match fd {
        Some(fd) => {
            // Borrow the caller's descriptor and read through our own copy,
            // so Python keeps ownership of (and closes) the original.
            let owned = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
                .try_clone_to_owned()
                .map_err(|e| err(format!("{input}: {e}")))?;
            Box::new(std::fs::File::from(owned))
        }
        None => import::open_input(Path::new(&input)).map_err(err)?,
    };
    let summary = cancellable(py, || {
        import::import(format, &mut reader, Path::new(&input), Path::new(&output), &h, &opts).map_err(err)
    })?;
    json(&summary)
}

/// Convert the C runtime's record and metadata files into a trace.
#[pyfunction]
#[pyo3(signature = (raw, meta, output, workload, params_json="{}".to_string()))]
fn tracer_convert(
    py: Python<'_>,
    raw: String,
    meta: String,
    output: String,
    workload: String,
    params_json: String,
) -> PyResult<String> {
    let h = header(&workload, &params_json)?;
    let summary = cancellable(py, || {
        import::raw::convert(Path::new(&raw), Path::new(&meta), Path::new(&output), h).map_err(err)
    })?;
    json(&summary)
}

/// Rewrite a trace of an older format version (1 or 2) as the current one
/// (`hugescope_core::trace::convert`). Returns the trace summary as JSON.
#[pyfunction]
fn convert_trace(py: Python<'_>, input: String, output: String) -> PyResult<String> {
    let summary = cancellable(py, || {
        hugescope_core::trace::convert::convert(Path::new(&input), Path::new(&output)).map_err(err)
    })?;
    json(&summary)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(convert_trace, m)?)?;
    m.add_function(wrap_pyfunction!(tracer_runtime_source, m)?)?;
    m.add_function(wrap_pyfunction!(import_trace, m)?)?;
    m.add_function(wrap_pyfunction!(tracer_convert, m)?)?;
    Ok(())
}

//! Bindings of the reproduction tables (`hugescope_core::reproduce`): the
//! papers' rows as data, and the verdicts, computed in the core only. As
//! everywhere in the bindings, structured data crosses as JSON text.

use crate::{err, json};
use hugescope_core::reproduce::{self, Measured, Scale};
use pyo3::prelude::*;

/// The papers a reproduction covers, in `reproduce all` order.
#[pyfunction]
fn reproduce_papers() -> Vec<String> {
    reproduce::PAPERS.iter().map(|p| p.to_string()).collect()
}

/// One paper's data (`papers/PAPER.toml`, checked) as JSON.
#[pyfunction]
fn reproduce_paper(paper: String) -> PyResult<String> {
    json(&reproduce::load(&paper).map_err(err)?)
}

/// Judge a paper's rows: `measured_json` is a JSON list of measurements
/// (`hugescope_core::reproduce::Measured`); returns the JSON list of rows,
/// every one with its verdict and the reason.
#[pyfunction]
fn reproduce_evaluate(paper: String, scale: String, measured_json: String) -> PyResult<String> {
    let file = reproduce::load(&paper).map_err(err)?;
    let scale = Scale::parse(&scale).map_err(err)?;
    let measured: Vec<Measured> =
        serde_json::from_str(&measured_json).map_err(|e| err(format!("{paper}: measurements: {e}")))?;
    json(&reproduce::evaluate(&file, scale, &measured).map_err(err)?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(reproduce_papers, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_paper, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_evaluate, m)?)?;
    Ok(())
}

//! Typed results for Python: a `Record` is a result of the core (a
//! `PolicyResult`, a static run, a report) as a tree whose fields are the
//! Rust type's serde fields, in the type's order. Python reads it by
//! attribute (`r.translation.walks`, `r.os_stats.promotions`): a misspelt
//! field is an `AttributeError`, not a silent `None`. The result files are
//! written from the same tree here (`to_json`), so a file, the attribute and
//! the Rust field carry one name.
//!
//! Why a tree and not one `#[pyclass]` per Rust struct: the results nest
//! some forty structs whose optional parts appear only when their mechanism
//! ran (reservations, the page daemon, virtualization); a tree made from
//! their serde form follows every one of them with no second list of fields
//! to keep in step, and the core's types stay free of PyO3.
//!
//! `to_json` writes what Python's `json.dumps(obj, indent=...)` writes for
//! the same values (its float repr, ASCII escapes), so result files are byte
//! for byte what they were when the Python side wrote them.

use std::sync::Arc;

use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::err;

/// One value of a result: JSON's kinds, integers kept exact, maps in order.
#[derive(Debug, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Uint(u64),
    Int(i64),
    Real(f64),
    Text(String),
    List(Vec<Arc<Node>>),
    Map(Vec<(String, Arc<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Uint(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(if v >= 0 { Node::Uint(v as u64) } else { Node::Int(v) })
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Real(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = a.next_element::<Node>()? {
                    out.push(Arc::new(x));
                }
                Ok(Node::List(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut out: Vec<(String, Arc<Node>)> = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Node>()? {
                    // A repeated key keeps its last value in its first place,
                    // as Python's json.loads does.
                    match out.iter_mut().find(|(x, _)| *x == k) {
                        Some(slot) => slot.1 = Arc::new(v),
                        None => out.push((k, Arc::new(v))),
                    }
                }
                Ok(Node::Map(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Uint(u) => s.serialize_u64(*u),
            Node::Int(i) => s.serialize_i64(*i),
            Node::Real(x) => s.serialize_f64(*x),
            Node::Text(t) => s.serialize_str(t),
            Node::List(v) => {
                let mut seq = s.serialize_seq(Some(v.len()))?;
                for x in v {
                    seq.serialize_element(&**x)?;
                }
                seq.end()
            }
            Node::Map(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, &**v)?;
                }
                map.end()
            }
        }
    }
}

impl Node {
    /// The tree of any serializable value, fields in the type's order.
    pub fn of<T: Serialize>(v: &T) -> PyResult<Node> {
        let text = serde_json::to_string(v).map_err(err)?;
        Node::parse(&text)
    }

    pub fn parse(text: &str) -> PyResult<Node> {
        serde_json::from_str(text).map_err(|e| err(format!("result JSON: {e}")))
    }

    fn field(&self, name: &str) -> Option<&Arc<Node>> {
        match self {
            Node::Map(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A value as Python reads it: a map is a `Record`, a list a list, the rest
/// plain values. `deep`: maps become dicts (`to_dict`).
fn to_py(py: Python<'_>, node: &Arc<Node>, deep: bool) -> PyResult<Py<PyAny>> {
    Ok(match &**node {
        Node::Null => py.None(),
        Node::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Node::Uint(u) => u.into_pyobject(py)?.into_any().unbind(),
        Node::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Node::Real(x) => x.into_pyobject(py)?.into_any().unbind(),
        Node::Text(t) => t.into_pyobject(py)?.into_any().unbind(),
        Node::List(v) => {
            let items = v.iter().map(|x| to_py(py, x, deep)).collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Node::Map(m) if deep => {
            let d = PyDict::new(py);
            for (k, v) in m {
                d.set_item(k, to_py(py, v, true)?)?;
            }
            d.into_any().unbind()
        }
        Node::Map(_) => Py::new(py, Record { node: node.clone() })?.into_any(),
    })
}

/// A result of the core, read by attribute (module docs).
#[pyclass(frozen, module = "hugescope._core")]
pub struct Record {
    node: Arc<Node>,
}

impl Record {
    pub fn of<T: Serialize>(v: &T) -> PyResult<Record> {
        Ok(Record { node: Arc::new(Node::of(v)?) })
    }
}

/// A list of results as Python's list of `Record`s.
pub fn records<T: Serialize>(py: Python<'_>, v: &[T]) -> PyResult<Py<PyList>> {
    let items = v.iter().map(|x| Py::new(py, Record::of(x)?)).collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.unbind())
}

#[pymethods]
impl Record {
    /// A record from JSON text (a saved result, a checkpoint's entry).
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Record> {
        match Node::parse(text)? {
            n @ Node::Map(_) => Ok(Record { node: Arc::new(n) }),
            _ => Err(err("result JSON: expected an object")),
        }
    }

    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        match self.node.field(name) {
            Some(v) => to_py(py, v, false),
            None => Err(PyAttributeError::new_err(format!("result has no field '{name}'"))),
        }
    }

    /// Whether the result has the field `name` (optional parts appear only
    /// when their mechanism ran).
    fn __contains__(&self, name: &str) -> bool {
        self.node.field(name).is_some()
    }

    /// The field names, in the Rust type's order. (Named as namedtuple's,
    /// with an underscore, so no result field can hide it: a result may
    /// have a field `values`.)
    fn _fields(&self) -> Vec<String> {
        match &*self.node {
            Node::Map(m) => m.iter().map(|(k, _)| k.clone()).collect(),
            _ => Vec::new(),
        }
    }

    /// The field values, in the order of `_fields` (a table of counters
    /// summed whole, such as the promotion failures by cause).
    fn _values(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        match &*self.node {
            Node::Map(m) => m.iter().map(|(_, v)| to_py(py, v, false)).collect(),
            _ => Ok(Vec::new()),
        }
    }

    fn __dir__(&self) -> Vec<String> {
        self._fields()
    }

    /// The whole result as plain dicts and lists (a new copy each call).
    fn to_dict(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.node, true)
    }

    /// The result as JSON, written here from the tree: the bytes Python's
    /// `json.dumps(self.to_dict(), indent=indent)` gives.
    #[pyo3(signature = (indent=None))]
    fn to_json(&self, indent: Option<usize>) -> PyResult<String> {
        crate::pyjson::to_string(&*self.node, indent)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Record>().is_ok_and(|o| *o.get().node == *self.node)
    }

    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (String,))> {
        let cls = py.get_type::<Record>().getattr("from_json")?.unbind();
        Ok((cls, (self.to_json(None)?,)))
    }

    fn __repr__(&self) -> String {
        format!("Record({})", self._fields().join(", "))
    }
}

/// A list of results as one JSON array (a run of several policies), in the
/// form of `Record.to_json`.
#[pyfunction]
#[pyo3(signature = (records, indent=None))]
fn records_to_json(records: Vec<PyRef<'_, Record>>, indent: Option<usize>) -> PyResult<String> {
    let nodes: Vec<&Node> = records.iter().map(|r| &*r.node).collect();
    crate::pyjson::to_string(&nodes, indent)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Record>()?;
    m.add_function(wrap_pyfunction!(records_to_json, m)?)?;
    Ok(())
}

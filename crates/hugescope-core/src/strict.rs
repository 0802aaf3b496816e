//! Text formats read strictly, the same way wherever a user's file is parsed
//! (configurations, plans): a key given twice in one JSON object is an error,
//! never "the last one wins" (one of the two is a mistake, and TOML already
//! refuses it), and a TOML float that is NaN or infinite is refused naming
//! its key (converted to JSON it would silently become `null`, and then fail
//! far away with a message about types). Keys and values in messages are
//! shown cut and escaped (`error::shown`).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{shown, SHOWN_CHARS};

/// A JSON value whose objects had no duplicate keys.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("key \"{}\" given twice in one object", shown(&k, SHOWN_CHARS))));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// Parse JSON text, refusing duplicate keys. The error is serde_json's
/// sentence (with its line and column), which names what was wrong.
pub fn parse_json(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    // serde_json's own limit of 128 nested levels holds here too.
    let Strict(v) = Strict::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// A TOML document as JSON, refusing NaN and infinite floats (named by
/// their dotted key path).
pub fn toml_to_json(t: toml::Value) -> Result<Value, String> {
    fn conv(t: toml::Value, path: &mut Vec<String>) -> Result<Value, String> {
        Ok(match t {
            toml::Value::String(s) => Value::String(s),
            toml::Value::Integer(i) => Value::from(i),
            toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
                Some(n) if f.is_finite() => Value::Number(n),
                _ => {
                    return Err(format!(
                        "{} = {f}: not a finite number (NaN and infinities are refused)",
                        shown(&path.join("."), SHOWN_CHARS)
                    ))
                }
            },
            toml::Value::Boolean(b) => Value::Bool(b),
            toml::Value::Datetime(d) => Value::String(d.to_string()),
            toml::Value::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for (i, x) in a.into_iter().enumerate() {
                    path.push(i.to_string());
                    out.push(conv(x, path)?);
                    path.pop();
                }
                Value::Array(out)
            }
            toml::Value::Table(tbl) => {
                let mut m = Map::new();
                for (k, x) in tbl {
                    path.push(k.clone());
                    let v = conv(x, path)?;
                    path.pop();
                    m.insert(k, v);
                }
                Value::Object(m)
            }
        })
    }
    conv(t, &mut Vec::new())
}

/// A serde message in the words of the input rather than of Rust's types:
/// "invalid type: floating point `1.5`, expected u64 at line 1 column 93"
/// becomes "invalid type: the number 1.5, expected a whole number". The
/// position is dropped: it counts in JSON the user may never have written
/// (a Python keyword, a `--set` value, TOML converted to JSON).
pub fn plain_message(msg: &str) -> String {
    let mut m = msg.to_string();
    if let Some(i) = m.rfind(" at line ") {
        if m[i..].split_whitespace().nth(3).is_some_and(|w| w == "column") {
            m.truncate(i);
        }
    }
    for (rust, words) in [
        ("floating point `", "the number `"),
        ("integer `", "the number `"),
        ("expected usize", "expected a whole number (0 or more)"),
        ("expected u64", "expected a whole number (0 or more)"),
        ("expected u32", "expected a whole number (0 or more)"),
        ("expected u16", "expected a whole number (0 to 65535)"),
        ("expected u8", "expected a whole number (0 to 255)"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("invalid type: null", "invalid type: nothing (null)"),
    ] {
        m = m.replace(rust, words);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_messages_in_the_words_of_the_input() {
        let e = serde_json::from_str::<u64>("1.5").unwrap_err().to_string();
        assert!(e.contains("expected u64 at line 1 column"), "{e}");
        assert_eq!(plain_message(&e), "invalid type: the number `1.5`, expected a whole number (0 or more)");
        let e = serde_json::from_value::<f64>(Value::Null).unwrap_err().to_string();
        assert_eq!(plain_message(&e), "invalid type: nothing (null), expected a number");
    }

    #[test]
    fn duplicate_keys_and_non_finite_numbers_are_refused() {
        assert_eq!(parse_json(r#"{"a": 1, "b": {"c": [1, 2.5]}}"#).unwrap()["b"]["c"][1], 2.5);
        let e = parse_json(r#"{"a": 1, "b": {"c": 1, "c": 2}}"#).unwrap_err();
        assert!(e.contains("key \"c\" given twice"), "{e}");
        assert!(parse_json(r#"[{"x": 1}, {"x": 2}]"#).is_ok(), "the same key in two objects is fine");
        assert!(parse_json("1e400").is_err());
        assert!(parse_json("{} x").is_err());
        let long = format!("{{\"{0}\": 1, \"{0}\": 2}}", "k".repeat(10_000));
        assert!(parse_json(&long).unwrap_err().len() < 300);
        let t: toml::Value = toml::from_str("[cost]\ncpu_ghz = nan\n").unwrap();
        let e = toml_to_json(t).unwrap_err();
        assert!(e.starts_with("cost.cpu_ghz = NaN"), "{e}");
        let t: toml::Value = toml::from_str("x = [1.0, -inf]").unwrap();
        assert!(toml_to_json(t).unwrap_err().starts_with("x.1 = -inf"));
        let t: toml::Value = toml::from_str("a = 1.5\nb = \"s\"").unwrap();
        assert_eq!(toml_to_json(t).unwrap(), serde_json::json!({"a": 1.5, "b": "s"}));
    }
}

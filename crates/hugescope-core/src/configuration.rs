//! A whole configuration of a run (`docs/configuration.md`): the machine
//! (`config`), the OS (`os::config`) and the policies (`[[policy]]`
//! entries), loaded from a preset, a TOML or JSON file and overrides, and
//! written back as a file that loads to the same configuration. Above the
//! policies: loading one builds each policy once to check its parameters
//! and the machine it needs.

use crate::config::{parse_text, resolve_machine, split_overrides, take_preset, MachineConfig, DEFAULT_PRESET};
use crate::os::config::OsSettings;
use crate::run::{PolicySpec, RunOptions};
use crate::{Error, Result};
use serde_json::{Map, Value};

/// The sections of a configuration file. A file with none of them is a
/// machine file (the format from before `[os]` and `[[policy]]`), so every
/// existing `--config` file keeps its meaning.
pub const SECTIONS: &[&str] = &["machine", "os", "policy"];

/// The content of a configuration file and the name its errors use.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    /// JSON by extension or by content (a TOML document cannot start with
    /// '{'); TOML otherwise.
    fn is_json(&self) -> bool {
        self.name.to_ascii_lowercase().ends_with(".json") || self.text.trim_start().starts_with('{')
    }
}

/// One `[[policy]]` entry: a registered policy (or several joined by '+',
/// written as one spec in `name`) with its parameters, validated by the
/// policy's own parameter getters (`policy::params`) when loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyEntry {
    pub name: String,
    /// Sorted by key (a file's tables have no order; the label keeps the
    /// order a flag was typed in).
    pub params: Vec<(String, String)>,
    /// Label in tables and results (`--policy` text as typed, by default).
    pub label: String,
}

impl PolicyEntry {
    /// From `--policy` text (`pcc:entries=64`, `linux:enabled=never+pcc`).
    pub fn from_spec(text: &str) -> Result<PolicyEntry> {
        let spec = PolicySpec::parse(text)?;
        if spec.parts.len() == 1 {
            let mut params = spec.params.clone();
            params.sort();
            Ok(PolicyEntry { name: spec.name, params, label: spec.label })
        } else {
            Ok(PolicyEntry { name: text.to_string(), params: Vec::new(), label: spec.label })
        }
    }

    /// The label a file entry without `label` gets: `name:k=v,...`.
    fn default_label(&self) -> String {
        if self.params.is_empty() {
            return self.name.clone();
        }
        let kv: Vec<String> = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}:{}", self.name, kv.join(","))
    }

    /// From a file's `[[policy]]` table (`where_` names it in errors).
    fn from_table(v: &Value, where_: &str) -> Result<PolicyEntry> {
        let obj = v.as_object().ok_or_else(|| Error::config(format!("{where_}: expected a table with name = \"POLICY\"")))?;
        let text = |key: &str| -> Result<Option<String>> {
            match obj.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(Error::config(format!("{where_}.{key}={other}: expected text"))),
            }
        };
        let name = text("name")?.ok_or_else(|| Error::config(format!("{where_}: no name (name = \"pcc\", ...)")))?;
        let label = text("label")?;
        let mut params = Vec::new();
        for (k, v) in obj.iter().filter(|(k, _)| *k != "name" && *k != "label") {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => return Err(Error::config(format!("{where_}.{k}={other}: expected a number, text or boolean"))),
            };
            params.push((k.clone(), s));
        }
        params.sort();
        if !params.is_empty() && name.contains([':', '+']) {
            return Err(Error::config(format!(
                "{where_}: name '{name}' carries parameters of its own; give them as keys or in the name, not both"
            )));
        }
        let mut e = PolicyEntry { name, params, label: String::new() };
        e.label = label.unwrap_or_else(|| e.default_label());
        Ok(e)
    }

    /// The entry as a `[[policy]]` table; `label` only where a reload would
    /// not produce it by itself.
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::from(self.name.clone()));
        for (k, v) in &self.params {
            m.insert(k.clone(), Value::from(v.clone()));
        }
        if self.label != self.default_label() {
            m.insert("label".into(), Value::from(self.label.clone()));
        }
        Value::Object(m)
    }

    /// The run spec this entry describes.
    pub fn spec(&self) -> Result<PolicySpec> {
        let mut spec = PolicySpec::parse(&self.name)?;
        if !self.params.is_empty() {
            spec.params = self.params.clone();
            spec.parts[0].params = self.params.clone();
        }
        spec.label = self.label.clone();
        Ok(spec)
    }
}

/// A whole configuration: the machine, the OS and the policies to run.
/// Loaded from a preset, a TOML or JSON file (`[machine]`, `[os]`,
/// `[[policy]]`) and `--set` overrides; written back as TOML or JSON that
/// loads to the same configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The preset the machine started from.
    pub preset: String,
    pub machine: MachineConfig,
    pub os: OsSettings,
    pub policies: Vec<PolicyEntry>,
}

impl Config {
    /// Resolve a configuration. Precedence, lowest first: the preset
    /// (`preset`, else the file's `preset`, else `DEFAULT_PRESET`), the
    /// file, the overrides (`os.KEY=VALUE` for the OS, `KEY=VALUE` or
    /// `machine.KEY=VALUE` for the machine). `policies` (`--policy` texts),
    /// when given, replace the file's `[[policy]]` entries.
    pub fn load(preset: Option<&str>, file: Option<Source>, overrides: &[String], policies: &[String]) -> Result<Config> {
        let mut file_preset = None;
        let (mut machine_val, mut os_val, mut policy_val) = (None, None, None);
        if let Some(f) = file {
            let mut top = match parse_text(Some(f.name), f.text, f.is_json())? {
                Value::Object(m) => m,
                _ => return Err(Error::config(format!("{}: expected a table of sections ({})", f.name, SECTIONS.join(", ")))),
            };
            file_preset = take_preset(&mut top, f.name)?;
            if SECTIONS.iter().any(|s| top.contains_key(*s)) {
                if let Some(k) = top.keys().find(|k| !SECTIONS.contains(&k.as_str())) {
                    return Err(Error::config(format!(
                        "{}: unknown key '{k}' beside the sections {} (machine keys go under [machine])",
                        f.name,
                        SECTIONS.join(", ")
                    )));
                }
                if let Some(m) = top.remove("machine") {
                    let mut m = match m {
                        Value::Object(m) => m,
                        _ => return Err(Error::config(format!("{}: machine: expected a table", f.name))),
                    };
                    if let Some(p) = take_preset(&mut m, f.name)? {
                        if let Some(q) = &file_preset {
                            return Err(Error::config(format!("{}: preset given twice ('{q}' and machine.preset '{p}')", f.name)));
                        }
                        file_preset = Some(p);
                    }
                    machine_val = Some(Value::Object(m));
                }
                os_val = match top.remove("os") {
                    None => None,
                    Some(Value::Object(m)) => Some(m),
                    Some(_) => return Err(Error::config(format!("{}: os: expected a table", f.name))),
                };
                policy_val = match top.remove("policy") {
                    None => None,
                    Some(Value::Array(a)) => Some(a),
                    Some(_) => return Err(Error::config(format!("{}: policy: expected [[policy]] tables", f.name))),
                };
            } else {
                machine_val = Some(Value::Object(top));
            }
        }
        let origin = file.map(|f| f.name);
        let mut machine_overrides = Vec::new();
        let mut os_overrides = Vec::new();
        for (k, v) in split_overrides(overrides)? {
            if let Some(key) = k.strip_prefix("os.") {
                os_overrides.push((key.to_string(), v));
            } else if k == "policy" || k.starts_with("policy.") {
                return Err(Error::config(format!("override {k}: policies are given with --policy or [[policy]] entries")));
            } else {
                machine_overrides.push((k, v));
            }
        }
        let start = preset.map(str::to_string).or(file_preset).unwrap_or_else(|| DEFAULT_PRESET.into());
        let machine = resolve_machine(&start, machine_val, &machine_overrides).map_err(|e| with_origin(e, origin))?;
        let mut os = OsSettings::default();
        if let (Some(t), Some(name)) = (&os_val, origin) {
            os.set_table(t, name)?;
        }
        for (k, v) in &os_overrides {
            os.set(k, &Value::String(v.clone()), "override")?;
        }
        os.check(if os_overrides.is_empty() { origin.unwrap_or("override") } else { "override" })?;
        // The file's entries are checked even when --policy replaces them:
        // a broken file is reported, not silently skipped.
        let mut entries = Vec::new();
        if let (Some(list), Some(name)) = (&policy_val, origin) {
            for (i, v) in list.iter().enumerate() {
                let at = format!("{name}: policy[{}]", i + 1);
                let e = PolicyEntry::from_table(v, &at)?;
                check_policy(&e, &machine).map_err(|err| Error::config(format!("{at}: {err}")))?;
                entries.push(e);
            }
        }
        if !policies.is_empty() {
            entries = policies.iter().map(|p| PolicyEntry::from_spec(p)).collect::<Result<_>>()?;
            for e in &entries {
                check_policy(e, &machine)?;
            }
        }
        Ok(Config { preset: start, machine, os, policies: entries })
    }

    /// The run specs of the policies, in order.
    pub fn specs(&self) -> Result<Vec<PolicySpec>> {
        self.policies.iter().map(PolicyEntry::spec).collect()
    }

    /// Options of a run of these policies (the time base of `[os]`).
    pub fn run_options(&self, with_base: bool) -> RunOptions {
        RunOptions { duration_s: self.os.duration(), accesses_per_second: self.os.rate(), with_base, ..Default::default() }
    }

    /// The configuration as JSON: `{"machine": {...}, "os": {...}, "policy": [...]}`,
    /// every OS knob present (null: auto). Loads back (`Source` named *.json).
    pub fn to_json(&self) -> Value {
        let mut machine = serde_json::to_value(&self.machine).expect("machine serializes");
        if let Value::Object(m) = &mut machine {
            m.insert("preset".into(), Value::from(self.preset.clone()));
        }
        serde_json::json!({
            "machine": machine,
            "os": self.os.to_json(),
            "policy": self.policies.iter().map(PolicyEntry::to_json).collect::<Vec<_>>(),
        })
    }

    /// The configuration as a TOML document with the three sections.
    pub fn to_toml(&self) -> Result<String> {
        let bad = |e: &dyn std::fmt::Display| Error::config(format!("cannot write TOML: {e}"));
        let mut machine = toml::Table::new();
        machine.insert("preset".into(), toml::Value::String(self.preset.clone()));
        match toml::Value::try_from(&self.machine).map_err(|e| bad(&e))? {
            toml::Value::Table(t) => machine.extend(t),
            _ => unreachable!("a struct serializes as a table"),
        }
        let mut top = toml::Table::new();
        top.insert("machine".into(), toml::Value::Table(machine));
        top.insert("os".into(), toml::Value::Table(self.os.to_toml()));
        let policies = self
            .policies
            .iter()
            .map(|p| toml::Value::try_from(p.to_json()).map_err(|e| bad(&e)))
            .collect::<Result<Vec<_>>>()?;
        if !policies.is_empty() {
            top.insert("policy".into(), toml::Value::Array(policies));
        }
        toml::to_string_pretty(&top).map_err(|e| bad(&e))
    }
}

/// Build an entry's policies once: their own getters check every parameter
/// (a misspelt key is an error there), so a configuration never holds a
/// policy that would fail to start; and each checks the machine it needs
/// (`Policy::check_machine`: mthp's per-size knobs name sizes the machine
/// must have as folio sizes), said here, before any work, rather than
/// ignored in the run.
fn check_policy(e: &PolicyEntry, machine: &MachineConfig) -> Result<()> {
    for p in e.spec()?.make()? {
        p.check_machine(machine)?;
    }
    Ok(())
}

/// Prefix a configuration error with the file it came from (once).
fn with_origin(e: Error, origin: Option<&str>) -> Error {
    match (e, origin) {
        (Error::Config(msg), Some(name)) if !msg.starts_with(name) => Error::Config(format!("{name}: {msg}")),
        (e, _) => e,
    }
}

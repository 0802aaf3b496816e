//! The machine presets as data: one file per machine under
//! `crates/hugescope-core/presets/`, each citing its source (a paper's table,
//! a vendor manual) beside the values, built into the binary. A preset is
//! the starting point a configuration merges its file and overrides over
//! (`MachineConfig::preset`, `configuration.rs`).

/// Each preset's name and data file, in the order `hugescope presets` lists them.
macro_rules! presets {
    ($($name:literal),* $(,)?) => {
        /// The presets, by name.
        pub const PRESETS: &[&str] = &[$($name),*];
        const FILES: &[&str] = &[$(include_str!(concat!("../../presets/", $name, ".toml"))),*];
    };
}

presets!["haswell-pcc", "sandybridge-ds", "alpha-21264", "modern-x86", "pcc-artifact", "x86-mthp", "arm64-mthp"];

/// The data file of preset `name`, if there is one.
pub fn text(name: &str) -> Option<&'static str> {
    PRESETS.iter().position(|p| *p == name).map(|i| FILES[i])
}

//! Present so that cargo builds the build-dependencies listed in
//! `Cargo.toml` (their features count for build scripts and proc macros).
fn main() {}

//! Export of a [`Profile`]: folded stacks, pprof, JSON, and (feature
//! `flamegraph`) SVG. Filled in by the export work.

use super::Profile;

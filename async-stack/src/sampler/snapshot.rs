//! Saving and loading a [`Profile`]: a versioned, checksummed binary
//! snapshot. Filled in by the snapshot work.

use super::Profile;

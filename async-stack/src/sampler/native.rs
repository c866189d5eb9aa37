//! Native code addresses as module, build id and offset, and their
//! symbolisation. Filled in by the native-frame work.

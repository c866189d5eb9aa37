//! The symbol table of this process's own modules, for the walker: the
//! full name of a frame that line-tables-only debug info names short (see
//! [`super::names`]), read with the sampler's symboliser.

/// The symbol-table name of the function holding the return address (or
/// instruction pointer, looked up one byte back like `backtrace` does)
/// `addr` in this process: its module's file opened with the sampler's
/// symboliser, once per module and build, by one process-wide
/// [`Symbolizer`](super::elf::Symbolizer) (bounded in the files it keeps);
/// the walker caches each address's answer. `None` off Linux, or when no
/// loaded module holds `addr` or its file cannot be read.
///
/// Not for a signal handler: it takes a lock, allocates, and the first
/// time lists the loaded modules.
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
pub(crate) fn symbol_name(addr: usize) -> Option<String> {
    use std::sync::{Mutex, OnceLock};

    use super::elf::Symbolizer;
    use super::modules::Modules;
    use crate::shim::lock_std;

    type State = Mutex<Option<(Modules, Symbolizer)>>;
    static STATE: OnceLock<State> = OnceLock::new();
    let mut state = lock_std(STATE.get_or_init(State::default));
    let (modules, symbolizer) = state.get_or_insert_with(|| (Modules::new(), Symbolizer::new()));
    let (path, build_id, offset) = modules.resolve(addr)?;
    symbolizer.symbol_name(&path, &build_id, offset, true)
}

/// Off Linux (and under loom) there is no module map: the short name
/// stays.
#[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
pub(crate) fn symbol_name(_addr: usize) -> Option<String> {
    None
}

//! The symbol tables of this process's own modules, for the walker: the
//! full name of a frame that line-tables-only debug info names short (see
//! [`super::names`]).
//!
//! Only the ELF symbol table is read (with `object`, not the DWARF that
//! `backtrace` has parsed already), once per module and build, the first
//! time a short name is found in it: its function symbols, sorted by
//! address, about 10 ms and 100 bytes a function for a 30 MB test binary
//! of 8,000 functions. At most [`MAX_MODULES`] tables are kept.

/// The most modules whose tables are kept; past it, all are dropped and
/// read again when asked.
#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
const MAX_MODULES: usize = 64;

/// The function symbols of one file: (address, size, mangled name),
/// sorted by address.
#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
struct SymbolTable(Vec<(u64, u64, Box<str>)>);

#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
impl SymbolTable {
    /// The table of the file at `path`, if it opens, parses, and is of the
    /// build `build_id` (when both have one).
    fn read(path: &str, build_id: &[u8]) -> Option<SymbolTable> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let file = std::fs::File::open(path).ok()?;
        let data = object::ReadCache::new(file);
        if !super::elf::of_build(&data, build_id) {
            return None;
        }
        let object = object::File::parse(&data).ok()?;
        let mut symbols: Vec<(u64, u64, Box<str>)> = object
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.into())))
            .collect();
        symbols.sort_unstable_by_key(|s| s.0);
        Some(SymbolTable(symbols))
    }

    /// The function symbol that covers the virtual address `probe`:
    /// its address and mangled name.
    fn covering(&self, probe: u64) -> Option<(u64, &str)> {
        let i = self.0.partition_point(|s| s.0 <= probe).checked_sub(1)?;
        let (start, size, name) = &self.0[i];
        (probe - start < (*size).max(1)).then_some((*start, &**name))
    }
}

/// A mangled symbol name demangled, without its hash.
#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
fn demangled(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

/// Looks up the function symbol holding the return address (or
/// instruction pointer, looked up one byte back like `backtrace` does)
/// `addr` in this process: `found` gets the symbol's address in this
/// process and its mangled name. `None` when no loaded module holds
/// `addr`, its file cannot be read or is another build, or no function
/// symbol covers it.
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
fn with_function<R>(addr: usize, found: impl FnOnce(usize, &str) -> R) -> Option<R> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};

    use super::modules::Modules;
    use crate::shim::lock_std;

    type Tables = HashMap<(Arc<str>, Arc<[u8]>), Option<SymbolTable>>;
    type State = Mutex<Option<(Modules, Tables)>>;
    static STATE: OnceLock<State> = OnceLock::new();
    let mut state = lock_std(STATE.get_or_init(State::default));
    let (modules, tables) = state.get_or_insert_with(|| (Modules::new(), Tables::new()));
    let (path, build_id, offset) = modules.resolve(addr)?;
    let key = (path.clone(), build_id.clone());
    if tables.len() >= MAX_MODULES && !tables.contains_key(&key) {
        tables.clear();
    }
    let (start, name) = tables
        .entry(key)
        .or_insert_with(|| SymbolTable::read(&path, &build_id))
        .as_ref()?
        .covering(offset.checked_sub(1)?)?;
    // `offset` is `addr` in the file's addresses.
    let here = usize::try_from(start)
        .ok()?
        .checked_add(addr)?
        .checked_sub(usize::try_from(offset).ok()?)?;
    Some(found(here, name))
}

/// The symbol-table name of the function holding the return address (or
/// instruction pointer) `addr` in this process, demangled without its
/// hash; the walker caches each address's answer. `None` off Linux, or
/// when [`with_function`] finds none.
///
/// Not for a signal handler: it takes a lock, allocates, and the first
/// time lists the loaded modules.
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
pub(crate) fn symbol_name(addr: usize) -> Option<String> {
    with_function(addr, |_, name| demangled(name))
}

/// The address, in this process, of the function holding the return
/// address (or instruction pointer) `addr`: two addresses with the same
/// answer are in the code of one physical function. `None` off Linux, or
/// when [`with_function`] finds none. Not for a signal handler either.
#[cfg(all(target_os = "linux", not(async_stack_loom)))]
pub(crate) fn function_start(addr: usize) -> Option<usize> {
    with_function(addr, |start, _| start)
}

/// Off Linux (and under loom) there is no module map: the short name
/// stays.
#[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
pub(crate) fn symbol_name(_addr: usize) -> Option<String> {
    None
}

/// Off Linux (and under loom) there is no module map: no function is
/// known.
#[cfg(not(all(target_os = "linux", not(async_stack_loom))))]
pub(crate) fn function_start(_addr: usize) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demangled name of the function whose symbol covers `probe`.
    fn name(table: &SymbolTable, probe: u64) -> Option<String> {
        table.covering(probe).map(|(_, name)| demangled(name))
    }

    #[test]
    fn a_name_is_found_only_inside_its_symbol() {
        let table = SymbolTable(vec![
            (0x1000, 0x20, "_ZN3app4main17h0123456789abcdefE".into()),
            (0x1040, 0, "_ZN3app5empty17h0123456789abcdefE".into()),
            (0x1100, 0x10, "memcpy".into()),
        ]);
        assert_eq!(name(&table, 0xfff), None, "before the first");
        assert_eq!(name(&table, 0x1000).as_deref(), Some("app::main"));
        assert_eq!(name(&table, 0x101f).as_deref(), Some("app::main"));
        assert_eq!(name(&table, 0x1020), None, "past its size");
        assert_eq!(name(&table, 0x1040).as_deref(), Some("app::empty"));
        assert_eq!(name(&table, 0x1041), None, "a symbol of size 0");
        assert_eq!(name(&table, 0x1108).as_deref(), Some("memcpy"));
        assert_eq!(name(&table, u64::MAX), None);
        assert_eq!(name(&SymbolTable(Vec::new()), 0x1000), None);
    }

    #[test]
    fn a_missing_or_foreign_file_has_no_table() {
        assert!(SymbolTable::read("/nonexistent/app", &[]).is_none());
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        assert!(SymbolTable::read(exe, &[]).is_some_and(|t| !t.0.is_empty()));
        assert!(
            SymbolTable::read(exe, &[0xde, 0xad]).is_none(),
            "another build"
        );
    }
}

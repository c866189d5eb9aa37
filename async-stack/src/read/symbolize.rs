//! Lazy, process-wide cached symbolisation of code addresses, for the
//! walker ([`crate::read::walker`]) and what displays its backtraces (the
//! panic hook, captures checked against the published stack).
//!
//! Capturing a backtrace records addresses only; names, files and lines
//! are looked up (through `backtrace`'s addr2line-based symboliser) the
//! first time a backtrace is displayed or its frames are inspected, and
//! cached per address for every later capture.
//!
//! Line-tables-only debug info names functions without their path
//! (`poll<app::Handler>`, `fetch_row`): the outermost symbol of an address,
//! a function of its own, then takes its full name from the symbol table
//! ([`crate::read::native::names`], [`crate::read::native::process`]), as
//! full debug info would give it.
//!
//! The sampler does not use it: its native frames are (module, build id,
//! offset) triples that may be symbolised in another process, so they go
//! through the readers' own ELF symboliser, at drain time and at export
//! alike (see [`crate::read::native`]). Both symbolisers test frames with
//! [`crate::read::plumbing`], and take short names to the symbol table
//! with the same rule.

use std::collections::HashMap;
// A process-wide cache behind a lock, not part of any protocol another
// thread reads lock-free: loom need not see it.
use std::sync::{Arc, Mutex, OnceLock};

use crate::read::native::{names, process};
use crate::shim::lock_std;

/// One symbol for an address: a physical frame yields several when
/// functions were inlined into it (innermost first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub(crate) name: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
}

type Cache = Mutex<HashMap<usize, Arc<[Symbol]>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The address of the machine function holding each return address (or
/// instruction pointer) of `addrs` ([`process::function_start`]), cached
/// per address like the symbols: the walker asks for a whole stack's at
/// once when it places async frames without debug info.
pub(crate) fn functions(addrs: &[usize]) -> Vec<Option<usize>> {
    type Starts = Mutex<HashMap<usize, Option<usize>>>;
    static STARTS: OnceLock<Starts> = OnceLock::new();
    let starts = STARTS.get_or_init(Default::default);
    let mut out: Vec<Option<Option<usize>>> = {
        let cached = lock_std(starts);
        addrs.iter().map(|a| cached.get(a).copied()).collect()
    };
    // Looked up outside the cache's lock (the lookup takes its own).
    let mut found = Vec::new();
    for (slot, &addr) in out.iter_mut().zip(addrs) {
        if slot.is_none() {
            let start = process::function_start(addr);
            *slot = Some(start);
            found.push((addr, start));
        }
    }
    if !found.is_empty() {
        lock_std(starts).extend(found);
    }
    out.into_iter().map(Option::flatten).collect()
}

/// Symbolises a return address or instruction pointer (`backtrace`
/// subtracts one from it, so a return address maps to its call).
pub(crate) fn resolve(addr: usize) -> Arc<[Symbol]> {
    if let Some(hit) = lock_std(cache()).get(&addr) {
        return hit.clone();
    }
    let mut symbols = Vec::new();
    backtrace::resolve(addr as *mut std::ffi::c_void, |s| {
        symbols.push(Symbol {
            name: s.name().map(|n| format!("{n:#}")),
            file: s.filename().map(|p| p.display().to_string()),
            line: s.lineno(),
            column: s.colno(),
        });
    });
    if let Some(outermost) = symbols.last_mut()
        && let Some(name) = &outermost.name
        && names::short(name, outermost.file.as_deref())
        && let Some(full) = process::symbol_name(addr)
    {
        outermost.name = Some(full);
    }
    let symbols: Arc<[Symbol]> = symbols.into();
    lock_std(cache()).insert(addr, symbols.clone());
    symbols
}

//! Native code addresses as (module, build id, offset), and their
//! symbolisation: the sampler's one symbolisation path, and the symbol
//! table the walker names its frames from when line-tables-only debug
//! info leaves their names short ([`names`]).
//!
//! A sampled instruction address only means something in the process that
//! took it: libraries and position-independent executables load at a
//! different address on every run (ASLR). So the sampler thread turns each
//! raw address into a portable triple, and the export turns the triple
//! into function, file and line, possibly in another process:
//!
//! 1. **Capture** (signal handler, elsewhere): the address as a plain
//!    integer. Nothing here runs there.
//! 2. **Resolve** ([`Modules::resolve`](modules::Modules::resolve), sampler thread): the module whose
//!    executable segment holds the address, from a snapshot of the loaded
//!    modules ([`ModuleMap`](modules::ModuleMap), taken with `dl_iterate_phdr`). The triple is
//!    the module's path, its GNU build id (read from its `PT_NOTE`
//!    segments in memory) and the offset of the address from the module's
//!    load bias. For an ELF file the offset is the virtual address in the
//!    file's own symbol and debug tables, whatever address it was loaded
//!    at.
//! 3. **Symbolise** ([`Symbolizer::symbolize`](elf::Symbolizer::symbolize), export): the file at the
//!    path is opened with `addr2line` (DWARF, including inlined frames,
//!    then the ELF symbol table, dynamic symbols included), after checking
//!    that its build id is the one recorded, so that a rebuilt binary is
//!    never read as the one that was sampled.
//!
//! Between steps 2 and 3, the on-CPU intake must know which of a sample's
//! native frames lie above its innermost poll (the frames the sample
//! keeps). It asks the same symboliser, on the sampler thread, with
//! [`Symbolizer::in_traced_poll`](elf::Symbolizer::in_traced_poll): one
//! [`Symbolizer`](elf::Symbolizer) per on-CPU session, whose caches are
//! bounded and which is dropped with the session. The lookup and the test
//! for `Traced::poll` ([`crate::read::plumbing`]) are the ones the export
//! cuts inline chains with, so the frame the intake keeps as the
//! innermost poll's is the one the export shows cut at that poll. The
//! walker's symboliser (`backtrace`, [`crate::read::symbolize`]) plays no
//! part in this; it only asks [`process::symbol_name`] for the symbol-table
//! name of a frame whose debug-info name is short.
//!
//! Files: [`modules`] (steps 1 and 2: the module map and the resolver),
//! [`names`] (which debug-info names are short), [`process`] (the
//! walker's lookup of this process's symbol tables)
//! and [`elf`] (step 3, and the intake's boundary: the symboliser).
//!
//! # Accuracy
//!
//! What can make a symbolised native frame wrong or poorer:
//!
//! - **The binary changed on disk** since the sample: a different build id
//!   gives `"<file>+0x<offset> [build id mismatch]"`, never wrong names.
//!   An on-CPU sample taken after the change cannot find its innermost
//!   poll either, and keeps the interrupted address only.
//!   A module without a build id (linked with `--build-id=none`) cannot be
//!   checked and is symbolised from whatever file is at its path.
//! - **The binary is gone** (deleted, or a profile read on another
//!   machine): `"<file>+0x<offset>"`. The main executable's path comes from
//!   `/proc/self/exe`, which names a deleted binary `"<path> (deleted)"`.
//! - **No debug info**: names from the symbol table only (no file, no
//!   line, no inlined frames); the nearest symbol whose size covers the
//!   address. Stripped binaries keep only their dynamic symbols, so a
//!   private function shows as `"<file>+0x<offset>"`. The innermost poll
//!   is then found only where `Traced::poll` is a function of its own (a
//!   poll through a `dyn Future`); where it was inlined, as `backtrace`
//!   would find it no better, a sample keeps the interrupted address only.
//! - **Line tables only** (`debug = "line-tables-only"`): debug info
//!   names functions without their path (`poll<app::Handler>`); a frame
//!   that is a function of its own takes its full name from the symbol
//!   table, an inlined frame keeps the short one ([`names`]).
//! - **Separate debug files** (`.gnu_debuglink`, `/usr/lib/debug`) are not
//!   looked up; split DWARF next to the binary (`.dwp`, `.dwo`) is.
//! - **A library unloaded** (`dlclose`) before its samples were resolved:
//!   the snapshot is refreshed only when an address is not found, so an
//!   address in a library unloaded and replaced at the same place between
//!   two refreshes is attributed to the old library.
//! - **A return address** (`call`) is looked up one byte back, inside the
//!   call instruction; a call that is the last instruction of an
//!   executable segment has its return address outside it, and resolves to
//!   `None`.

pub(crate) mod elf;
pub(crate) mod names;
pub(crate) mod process;
// Only on-CPU samples (Linux, not under loom) have native frames to
// resolve.
#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
pub(crate) mod modules;

#[cfg(all(test, not(async_stack_loom)))]
mod tests;

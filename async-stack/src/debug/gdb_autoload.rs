//! The gdb commands, embedded in every ELF binary that links async-stack
//! so that gdb loads them by itself (`.debug_gdb_scripts`, the section
//! `#![debugger_visualizer]` writes, which takes one file only): the text
//! of `async-stack/debugger/async_stack_reader.py` followed by that of
//! `async-stack/debugger/async_stack_gdb.py`, as one inline Python script. gdb runs it
//! only from a path it trusts: `add-auto-load-safe-path /path/to/binary`
//! (or a folder above it) in `~/.gdbinit`, or `-iex` on the command line.

/// Section entry: kind 4 (inline Python), the script's name on the
/// first line, its text, then a NUL.
const SCRIPT: &str = concat!(
    "\x04",
    "async_stack_gdb.py\n",
    include_str!("../../debugger/async_stack_reader.py"),
    include_str!("../../debugger/async_stack_gdb.py"),
    "\0"
);

#[unsafe(link_section = ".debug_gdb_scripts")]
#[used]
static EMBEDDED: [u8; SCRIPT.len()] = {
    let mut out = [0u8; SCRIPT.len()];
    let bytes = SCRIPT.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        out[i] = bytes[i];
        i += 1;
    }
    out
};

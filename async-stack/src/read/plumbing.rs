//! Which native symbols are this crate's own poll machinery: the one
//! definition the walker ([`crate::read::walker`]) and the sampler's
//! export ([`crate::sampler`]'s ELF symboliser) both use. The debugger
//! scripts (Python) keep their own copy of the same rules.
//!
//! - [`is_traced_poll`]: `Traced::poll`, which polls its inner future from
//!   exactly one place: one per instrumented level on a stack, inlined or
//!   not. It is the anchor of each async frame in a native stack.
//! - [`is_own_function`]: a function of this crate, by its demangled name.
//! - [`is_own_plumbing`]: this crate's functions and the thread-local
//!   access they inline, by name or, when line-tables-only debug info gives
//!   inlined frames short names, by source file.

/// This crate's source folder, as debug info names it in this build.
const OWN_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");
/// `Traced::poll`'s source file, as debug info names it in this build.
const TRACED_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/task/traced.rs");

/// Whether `file` is `task/traced.rs` of this crate: this build's path,
/// or (for a profile symbolised from another build) a path ending the
/// same way.
fn is_traced_src(file: &str) -> bool {
    file == TRACED_SRC
        || file
            .replace('\\', "/")
            .ends_with("async-stack/src/task/traced.rs")
}

/// Whether the symbol `name` at `file` is `Traced::poll`: by its full
/// name (in `traced.rs` when the file is known), or by the short name
/// (`poll`, `poll<..>`) line-tables-only debug info gives inlined frames,
/// in `traced.rs`.
pub(crate) fn is_traced_poll(name: &str, file: Option<&str>) -> bool {
    let full = name.starts_with("<async_stack::task::traced::Traced<")
        && name.contains(" as core::future::future::Future>::poll");
    match file {
        Some(file) => is_traced_src(file) && (full || name == "poll" || name.starts_with("poll<")),
        // Without line info, the full name alone tells.
        None => full,
    }
}

/// Whether the demangled `name` is a function of this crate (or a method
/// of one of its types).
pub(crate) fn is_own_function(name: &str) -> bool {
    name.starts_with("async_stack::") || name.starts_with("<async_stack::")
}

/// This crate's own poll machinery (and the thread-local access it
/// inlines), which never belongs in a user's view: recognised by name, or
/// by source file when line-tables-only debug info gives inlined frames
/// short names. The walker's own file is not plumbing: a capture starts
/// there.
pub(crate) fn is_own_plumbing(name: Option<&str>, file: Option<&str>) -> bool {
    let by_name =
        name.is_some_and(|n| is_own_function(n) || n.starts_with("std::thread::local::LocalKey"));
    let by_file = file.is_some_and(|f| {
        (f.starts_with(OWN_SRC) && !f.ends_with("/src/read/walker.rs"))
            || f.ends_with("std/src/thread/local.rs")
    });
    by_name || by_file
}

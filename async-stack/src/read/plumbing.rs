//! Which native symbols are this crate's own poll machinery: the one
//! definition the walker ([`crate::read::walker`]) and the sampler's ELF
//! symboliser (which finds the innermost poll of an on-CPU sample, and
//! cuts inline chains at export) both use. The debugger
//! scripts (Python) keep their own copy of the same rules; a test below
//! checks that it names the same module and files as this one.
//!
//! - [`is_traced_poll`]: `Traced::poll`, which polls its inner future from
//!   exactly one place: one per instrumented level on a stack, inlined or
//!   not. It is the anchor of each async frame in a native stack.
//! - [`is_own_function`]: a function of this crate, by its demangled name.
//! - [`is_own_plumbing`]: this crate's functions and the thread-local
//!   access they inline, by name or, when line-tables-only debug info gives
//!   inlined frames short names, by source file.

/// `Traced`'s source file, under `src/`.
macro_rules! traced_file {
    () => {
        "task/traced.rs"
    };
}

/// The module path of `Traced`, as demangled names spell it.
const TRACED_MODULE: &str = "async_stack::task::traced::";
/// This crate's source folder, as debug info names it in this build.
const OWN_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");
/// `Traced::poll`'s source file, as debug info names it in this build.
const TRACED_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/", traced_file!());

/// Whether `file` is `task/traced.rs` of this crate: this build's path,
/// or (for a profile symbolised from another build) a path ending the
/// same way.
fn is_traced_src(file: &str) -> bool {
    file == TRACED_SRC
        || file
            .replace('\\', "/")
            .ends_with(concat!("async-stack/src/", traced_file!()))
}

/// Whether the symbol `name` at `file` is `Traced::poll`: by its full
/// name (in `traced.rs` when the file is known), or by the short name
/// (`poll`, `poll<..>`) line-tables-only debug info gives inlined frames,
/// in `traced.rs`.
pub(crate) fn is_traced_poll(name: &str, file: Option<&str>) -> bool {
    let full = name
        .strip_prefix('<')
        .and_then(|n| n.strip_prefix(TRACED_MODULE))
        .is_some_and(|n| n.starts_with("Traced<"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The names these rules match are the real ones: moving `Traced` to
    /// another module or file breaks this test, not the walker.
    #[test]
    fn the_rules_name_where_traced_really_is() {
        let ty = std::any::type_name::<crate::task::traced::Traced<std::future::Ready<()>>>();
        assert!(ty.starts_with(TRACED_MODULE), "{ty}");
        assert!(
            std::path::Path::new(TRACED_SRC).is_file(),
            "{TRACED_SRC} exists"
        );
        let full = format!("<{TRACED_MODULE}Traced<F> as core::future::future::Future>::poll");
        assert!(is_traced_poll(&full, None));
        assert!(is_traced_poll(&full, Some(TRACED_SRC)));
        assert!(is_traced_poll("poll<F>", Some(TRACED_SRC)));
        assert!(!is_traced_poll("poll<F>", Some(OWN_SRC)));
        assert!(!is_traced_poll(
            "<async_stack::Other<F> as Future>::poll",
            None
        ));
    }

    /// The debugger scripts' copy of the rules (Python, which cannot
    /// import these constants) names the same module and file.
    #[test]
    fn the_python_reader_names_the_same_module_and_file() {
        let py = include_str!("../../debugger/async_stack_reader.py");
        assert!(
            py.contains(&format!("\"{TRACED_MODULE}\"")),
            "the reader matches {TRACED_MODULE:?}"
        );
        let file_pattern = format!("/src/{}$", traced_file!().replace('.', r"\."));
        assert!(
            py.contains(&file_pattern),
            "the reader matches {file_pattern:?}"
        );
    }
}

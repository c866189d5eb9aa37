//! The names of native frames that line-tables-only debug info leaves
//! short, and the symbol table that names them in full.
//!
//! With `debug = "line-tables-only"` (or `debug = 1`), the debug info
//! rustc writes names every function by its last path segment and
//! generic arguments (`poll<app::Handler>`, `{closure#0}<..>`,
//! `fetch_row`), with no linkage name: it is the symbol table that holds
//! `app::db::fetch_row` and `<app::Traced<F> as Future>::poll`. A native
//! frame that is a function of its own (not inlined) has a symbol, so
//! both symbolisers (the walker's, through `backtrace`, and the sampler's
//! ELF one) take its name from there when its debug-info name is
//! [`short`] (the walker through [`super::process`]). Inlined frames have
//! no symbol of their own and keep their short names. With full debug info every name has its path and the
//! symbol table is not read. The debugger scripts apply the same rule
//! (`is_short_name` in `debugger/async_stack_reader.py`, checked against
//! this one by a test) to the frames gdb and lldb list.

/// Whether a debug-info function `name` at `file` is the short form
/// line-tables-only debug info gives Rust functions: a Rust source file,
/// and no `::` outside the name's generic arguments. Names with a path
/// (`app::main`, `<T as Trait>::poll`) and code of other languages (C
/// functions, whose names have no path either) are not short.
pub(crate) fn short(name: &str, file: Option<&str>) -> bool {
    if name.is_empty() || !file.is_some_and(|f| f.ends_with(".rs")) {
        return false;
    }
    let mut depth = 0usize;
    let mut previous = '\0';
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            // The `>` of `->` in a fn pointer type closes nothing.
            '>' if previous == '-' => {}
            '>' | ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ':' if depth == 0 && chars.peek() == Some(&':') => return false,
            _ => {}
        }
        previous = c;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_the_ones_without_a_path() {
        let rs = Some("/src/app/db.rs");
        for name in [
            "fetch_row",
            "poll<app::Handler>",
            "{closure#0}<tokio::runtime::task::core::Core<T, S>, alloc::sync::Arc<u8>>",
            "drop_in_place<app::db::Row>",
            "call<fn() -> app::Row, (u8, u8)>",
            "with_mut<[u8; 4], core::task::poll::Poll<()>>",
        ] {
            assert!(short(name, rs), "{name}");
        }
        for name in [
            "app::db::fetch_row",
            "<app::Traced<F> as core::future::future::Future>::poll",
            "tokio::runtime::task::core::Core<T,S>::poll::{{closure}}",
            "<fn() -> u8 as core::ops::FnOnce<()>>::call_once",
            "",
        ] {
            assert!(!short(name, rs), "{name}");
        }
        assert!(!short("fetch_row", None), "no file: not debug info");
        assert!(!short("main", Some("../csu/libc-start.c")), "C");
    }

    /// The debugger scripts' port of the rule (`is_short_name`) gives the
    /// same verdicts.
    #[test]
    fn the_python_reader_finds_the_same_names_short() {
        let cases: &[(&str, Option<&str>)] = &[
            ("fetch_row", Some("/src/app/db.rs")),
            ("poll<app::Handler>", Some("/src/app/db.rs")),
            ("{closure#0}<a::B<T, S>, c::D<u8>>", Some("/src/app/db.rs")),
            ("call<fn() -> app::Row, (u8, u8)>", Some("/src/app/db.rs")),
            (
                "with_mut<[u8; 4], core::task::poll::Poll<()>>",
                Some("/a.rs"),
            ),
            ("app::db::fetch_row", Some("/src/app/db.rs")),
            (
                "<app::Traced<F> as core::future::Future>::poll",
                Some("/a.rs"),
            ),
            (
                "<fn() -> u8 as core::ops::FnOnce<()>>::call_once",
                Some("/a.rs"),
            ),
            ("a::b::{{closure}}", Some("/a.rs")),
            ("", Some("/a.rs")),
            ("fetch_row", None),
            ("main", Some("../csu/libc-start.c")),
        ];
        let input: String = cases
            .iter()
            .map(|(name, file)| format!("{name}\t{}\n", file.unwrap_or("")))
            .collect();
        let script = r"
import sys
sys.path.insert(0, sys.argv[1])
import async_stack_reader as r
for line in sys.stdin.read().splitlines():
    name, file = line.split('\t')
    print(int(r.is_short_name(name, file or None)))
";
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/debugger");
        let mut child = std::process::Command::new("python3")
            .args(["-B", "-c", script, dir])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs (scripts/test.sh needs it too)");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let python: Vec<bool> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l == "1")
            .collect();
        let rust: Vec<bool> = cases.iter().map(|(n, f)| short(n, *f)).collect();
        assert_eq!(python, rust, "{cases:?}");
    }
}

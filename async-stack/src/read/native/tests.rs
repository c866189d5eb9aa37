//! Tests of the module map and the ELF symboliser: build-id notes, inline
//! chains cut at `Traced::poll`, fallbacks, and (Linux) real addresses of
//! this test binary and of libc resolved and symbolised.

use std::path::Path;

use super::elf::{NativeSymbol, Symbolizer, cut_plumbing, name_outermost};
use super::modules::{Modules, find_gnu_build_id};

fn note(name: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend((name.len() as u32).to_ne_bytes());
    out.extend((desc.len() as u32).to_ne_bytes());
    out.extend(kind.to_ne_bytes());
    out.extend(name);
    out.resize(out.len().next_multiple_of(align), 0);
    out.extend(desc);
    out.resize(out.len().next_multiple_of(align), 0);
    out
}

#[test]
fn build_id_note_found_after_others_and_with_either_alignment() {
    for align in [4, 8] {
        let mut notes = note(b"GNU\0", 5, &[9; 12], align); // a property note
        notes.extend(note(b"Go\0\0", 3, &[1, 2], align)); // right type, wrong owner
        notes.extend(note(b"GNU\0", 3, &[0xab, 0xcd, 0xef], align));
        assert_eq!(
            find_gnu_build_id(&notes, align),
            Some(&[0xab, 0xcd, 0xef][..])
        );
    }
    let truncated = note(b"GNU\0", 3, &[1; 20], 4);
    assert_eq!(find_gnu_build_id(&truncated[..30], 4), None);
    assert_eq!(find_gnu_build_id(&[], 4), None);
}

fn sym(function: &str, file: Option<&str>) -> NativeSymbol {
    NativeSymbol {
        function: function.to_owned(),
        file: file.map(str::to_owned),
        line: None,
    }
}

#[test]
fn inline_chain_is_cut_at_traced_poll() {
    let traced = "<async_stack::task::traced::Traced<F> as core::future::future::Future>::poll";
    let mut chain = vec![
        sym("app::leaf", None),
        sym("async_stack::record::current::enter", None),
        sym("app::body::{closure#0}", None),
        sym(traced, None),
        sym("app::parent::{closure#0}", None),
    ];
    cut_plumbing(&mut chain);
    let names: Vec<_> = chain.iter().map(|s| s.function.as_str()).collect();
    assert_eq!(names, ["app::leaf", "app::body::{closure#0}"]);

    // Line-tables-only: the short name in traced.rs is the cut too.
    let mut chain = vec![
        sym("leaf", None),
        sym("poll<app::Fut>", Some("/x/async-stack/src/task/traced.rs")),
        sym("outer", None),
    ];
    cut_plumbing(&mut chain);
    assert_eq!(chain, [sym("leaf", None)]);

    // Only plumbing: the innermost stays.
    let mut chain = vec![sym(traced, None), sym("app::parent", None)];
    cut_plumbing(&mut chain);
    assert_eq!(chain, [sym(traced, None)]);
}

#[test]
fn the_outermost_symbol_takes_its_full_name_from_the_symbol_table() {
    let rs = Some("/app/src/db.rs");
    let full = || Some("app::db::fetch_row".to_owned());
    let none = || None;
    let named = |function: &str, file, symbol_name: &dyn Fn() -> Option<String>| {
        let mut outermost = sym(function, file);
        name_outermost(&mut outermost, symbol_name);
        outermost.function
    };
    // Line-tables-only debug info: a short Rust name.
    assert_eq!(named("fetch_row", rs, &full), "app::db::fetch_row");
    assert_eq!(named("fetch_row<u8>", rs, &full), "app::db::fetch_row");
    assert_eq!(named("fetch_row<u8>", rs, &none), "fetch_row<u8>");
    // No name in debug info.
    assert_eq!(named("", rs, &full), "app::db::fetch_row");
    assert_eq!(named("", rs, &none), "");
    // A name with its path, or a C function's, is kept.
    assert_eq!(named("app::db::fetch", rs, &full), "app::db::fetch");
    assert_eq!(named("memcpy", Some("memcpy.c"), &full), "memcpy");
}

#[test]
fn fallback_names_the_file_and_offset() {
    let mut s = Symbolizer::new();
    let symbols = s.symbolize("/nonexistent/dir/libfoo.so", &[1, 2, 3], 0x1234, true);
    assert_eq!(symbols, [sym("libfoo.so+0x1234", None)]);
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;

    /// Returns the line it is on; its definition is the line before.
    #[inline(never)]
    fn marker() -> u32 {
        std::hint::black_box(line!())
    }

    fn exe() -> String {
        let path = std::env::current_exe().unwrap().canonicalize().unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn build_id_on_disk(path: &str) -> Vec<u8> {
        use object::Object;
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        file.build_id().unwrap().unwrap_or_default().to_vec()
    }

    #[test]
    fn function_in_test_binary_resolves_and_symbolises() {
        let addr = marker as *const () as usize;
        let (path, build_id, offset) = Modules::new().resolve(addr).expect("in the executable");
        assert_eq!(&*path, exe());
        assert!(!build_id.is_empty());
        assert_eq!(*build_id, *build_id_on_disk(&path));

        let symbols = Symbolizer::new().symbolize(&path, &build_id, offset, false);
        let [symbol] = &symbols[..] else {
            panic!("one symbol expected, got {symbols:?}");
        };
        let full = "async_stack::read::native::tests::linux::marker";
        assert_eq!(symbol.function, full);
        // The walker's lookup of the symbol table names it the same, from
        // a return address one byte past its entry.
        assert_eq!(
            crate::read::native::process::symbol_name(addr + 1),
            Some(full.to_owned())
        );
        assert_eq!(crate::read::native::process::symbol_name(0), None);
        if cfg!(debug_assertions) {
            let file = symbol.file.as_deref().expect("debug info");
            assert!(file.ends_with(file!()), "{file}");
            let body = marker();
            let line = symbol.line.expect("debug info");
            assert!(
                (body - 1..=body + 1).contains(&line),
                "{line} not in {body}±1"
            );
        }
        // A return address just after the entry is looked up one byte back.
        let again = Symbolizer::new().symbolize(&path, &build_id, offset + 1, true);
        assert_eq!(again, symbols);
    }

    #[test]
    fn libc_function_symbolises_from_dynamic_symbols() {
        let addr = libc::getpid as *const () as usize;
        let (path, build_id, offset) = Modules::new().resolve(addr).expect("in libc");
        assert!(path.contains("libc"), "{path}");
        let symbols = Symbolizer::new().symbolize(&path, &build_id, offset, false);
        assert!(
            symbols.iter().any(|s| s.function.contains("getpid")),
            "{symbols:?}"
        );
    }

    #[test]
    fn a_fresh_symbolizer_gives_the_same_symbols() {
        let mut modules = Modules::new();
        let mut first = Symbolizer::new();
        for addr in [
            marker as *const () as usize,
            libc::getpid as *const () as usize,
            exe as *const () as usize,
        ] {
            let (path, build_id, offset) = modules.resolve(addr).unwrap();
            let here = first.symbolize(&path, &build_id, offset, false);
            // Only the triple crosses over: owned copies, a new symbolizer.
            let (path, build_id) = (path.to_string(), build_id.to_vec());
            let there = Symbolizer::new().symbolize(&path, &build_id, offset, false);
            assert_eq!(here, there);
            assert!(!here[0].function.contains("+0x"), "{here:?}");
        }
    }

    #[test]
    fn mismatched_build_id_and_missing_file_fall_back() {
        let (path, build_id, offset) = Modules::new()
            .resolve(marker as *const () as usize)
            .unwrap();
        let wrong: Vec<u8> = build_id.iter().map(|b| !b).collect();
        let name = Path::new(&*path).file_name().unwrap().to_str().unwrap();
        let mut s = Symbolizer::new();
        assert_eq!(
            s.symbolize(&path, &wrong, offset, true),
            [NativeSymbol {
                function: format!("{name}+0x{offset:x} [build id mismatch]"),
                file: None,
                line: None,
            }]
        );
        // The right build id at the same path still symbolises.
        assert!(
            s.symbolize(&path, &build_id, offset, false)[0]
                .function
                .ends_with("::marker")
        );
        // A file that is not an object file: the fallback too.
        assert_eq!(
            s.symbolize("/proc/self/status", &[], 0x10, false)[0].function,
            "status+0x10"
        );
    }

    #[test]
    fn addresses_outside_modules_resolve_to_none() {
        let mut modules = Modules::new();
        let heap = Box::new(0u64);
        let stack = 0u64;
        assert_eq!(modules.resolve(0), None);
        assert_eq!(modules.resolve(&*heap as *const u64 as usize), None);
        assert_eq!(modules.resolve(&raw const stack as usize), None);
        assert_eq!(modules.resolve(usize::MAX), None);
    }
}

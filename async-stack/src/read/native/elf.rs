//! The ELF symboliser: (module, build id, offset) triples to function,
//! file and line with `addr2line`, step 3 of [`crate::read::native`],
//! possibly in another process than the one that sampled them. It is the
//! sampler's only symboliser: the export names frames with
//! [`Symbolizer::symbolize`], and the on-CPU intake finds where a sample's
//! native frames meet its async ones with [`Symbolizer::in_traced_poll`].
//! Both read one lookup ([`lookup`]) through one test
//! ([`crate::read::plumbing::is_traced_poll`], in [`traced_poll_in`]), so
//! the frame the intake keeps as the innermost poll's is the one whose
//! inline chain the export cuts at `Traced::poll`.
//!
//! Invariants:
//!
//! - [`Symbolizer::symbolize`] never returns an empty list and never
//!   panics on a bad, missing or foreign file: it falls back to
//!   [`unsymbolized`]'s `"<file name>+0x<offset>"`.
//! - Nothing allocates in proportion to a file's contents beyond what
//!   `object` and `addr2line` do; inline chains are cut at
//!   [`MAX_INLINE`] symbols, and every cache is bounded.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use rustc_hash::FxHashMap;

use super::names;
use crate::read::plumbing::{is_own_function, is_traced_poll};

/// The most inlined symbols kept for one address (innermost first).
pub(crate) const MAX_INLINE: usize = 128;
/// The most (path, build id) files a [`Symbolizer`] keeps loaded; beyond
/// it, it drops all and starts again.
const MAX_FILES: usize = 256;
/// The most results one file keeps cached; beyond it, they are dropped.
const MAX_RESULTS_PER_FILE: usize = 1 << 16;
/// One symbol of a native address: a function, and where in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NativeSymbol {
    /// The demangled name, without the hash; `"<unknown>"` for an inlined
    /// frame the debug info does not name, or `"<file>+0x<offset>"` when
    /// nothing could be read.
    pub(crate) function: String,
    /// The source file, from debug info.
    pub(crate) file: Option<String>,
    /// The line (1-based), from debug info.
    pub(crate) line: Option<u32>,
}

/// What a [`Symbolizer`] found at a (path, build id).
enum FileState {
    /// Not there, or not an object file.
    Missing,
    /// There, but another build.
    Mismatch,
    Loaded(Box<addr2line::Loader>),
}

/// One (path, build id) a [`Symbolizer`] has opened.
struct FileEntry {
    /// The build id asked for (the file's own may be empty).
    build_id: Box<[u8]>,
    state: FileState,
    /// [`Symbolizer::symbolize`]'s answers, by (offset, `call`).
    results: FxHashMap<(u64, bool), Vec<NativeSymbol>>,
    /// [`Symbolizer::in_traced_poll`]'s answers, by (offset, `call`): a
    /// bit per address, not its symbols, for the intake, which asks of
    /// every native frame it keeps (Linux, not under loom).
    #[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
    in_poll: FxHashMap<(u64, bool), bool>,
}

/// Symbolises (module, build id, offset) triples, caching the files it
/// opens (by path and build id) and its answers (by offset and `call`).
/// It holds no state of the process that sampled the addresses.
///
/// Memory: at most [`MAX_FILES`] files, each with at most
/// [`MAX_RESULTS_PER_FILE`] answers of each kind, and what `addr2line`
/// parses of each file's debug info (the units of the addresses looked
/// up), freed with the symbolizer.
#[derive(Default)]
pub(crate) struct Symbolizer {
    /// By path, then one entry per build id asked for.
    files: HashMap<Box<str>, Vec<FileEntry>>,
    loaded: usize,
}

impl fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Symbolizer")
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Symbolizer {
    /// An empty symbolizer.
    pub(crate) fn new() -> Self {
        Symbolizer::default()
    }

    /// The symbols at `offset` in `module`, innermost inlined frame first.
    ///
    /// - `call`: the address is a return address, so the symbols of the
    ///   call before it (`offset - 1`) are the ones wanted.
    /// - A file whose build id differs from a non-empty `build_id` is not
    ///   read: the one symbol is `"<file>+0x<offset> [build id mismatch]"`.
    /// - The inline chain is cut at this crate's poll machinery: the first
    ///   `Traced::poll` and everything outside it go, and so do this
    ///   crate's own functions inside it; if that leaves nothing, the
    ///   innermost symbol stays.
    /// - Never empty: `"<file>+0x<offset>"` when the file is missing or
    ///   has no symbol there.
    pub(crate) fn symbolize(
        &mut self,
        module: &str,
        build_id: &[u8],
        offset: u64,
        call: bool,
    ) -> Vec<NativeSymbol> {
        let entry = self.entry(module, build_id);
        let loader = match &entry.state {
            FileState::Missing => return vec![unsymbolized(module, offset, "")],
            FileState::Mismatch => {
                return vec![unsymbolized(module, offset, " [build id mismatch]")];
            }
            FileState::Loaded(loader) => loader,
        };
        if let Some(cached) = entry.results.get(&(offset, call)) {
            return cached.clone();
        }
        let mut symbols = lookup(loader, offset.saturating_sub(u64::from(call)));
        if symbols.is_empty() {
            symbols.push(unsymbolized(module, offset, ""));
        } else {
            cut_plumbing(&mut symbols);
        }
        if entry.results.len() >= MAX_RESULTS_PER_FILE {
            entry.results.clear();
        }
        entry.results.insert((offset, call), symbols.clone());
        symbols
    }

    /// Whether one of the inlined frames at `offset` in `module` (`call`
    /// as for [`symbolize`](Self::symbolize)) is `Traced::poll`: whether
    /// this physical frame holds an async level, the one whose inline
    /// chain [`symbolize`](Self::symbolize) cuts there. `false` when the
    /// file is missing, another build, or has no symbol there.
    #[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
    pub(crate) fn in_traced_poll(
        &mut self,
        module: &str,
        build_id: &[u8],
        offset: u64,
        call: bool,
    ) -> bool {
        let entry = self.entry(module, build_id);
        let FileState::Loaded(loader) = &entry.state else {
            return false;
        };
        if let Some(&cached) = entry.in_poll.get(&(offset, call)) {
            return cached;
        }
        let symbols = lookup(loader, offset.saturating_sub(u64::from(call)));
        let in_poll = traced_poll_in(&symbols).is_some();
        if entry.in_poll.len() >= MAX_RESULTS_PER_FILE {
            entry.in_poll.clear();
        }
        entry.in_poll.insert((offset, call), in_poll);
        in_poll
    }

    /// The cache entry of (`path`, `build_id`), opening the file the first
    /// time.
    fn entry(&mut self, path: &str, build_id: &[u8]) -> &mut FileEntry {
        let known = self
            .files
            .get(path)
            .and_then(|builds| builds.iter().position(|e| *e.build_id == *build_id));
        let index = match known {
            Some(index) => index,
            None => {
                if self.loaded >= MAX_FILES {
                    self.files.clear();
                    self.loaded = 0;
                }
                self.loaded += 1;
                let entry = FileEntry {
                    build_id: build_id.into(),
                    state: open(path, build_id),
                    results: FxHashMap::default(),
                    in_poll: FxHashMap::default(),
                };
                let builds = self.files.entry(path.into()).or_default();
                builds.push(entry);
                builds.len() - 1
            }
        };
        let builds = self.files.get_mut(path).expect("just found or inserted");
        &mut builds[index]
    }
}

/// Opens `path` for symbolisation, if it is there and of the build
/// `build_id` (when both it and the file have one).
fn open(path: &str, build_id: &[u8]) -> FileState {
    let Ok(file) = std::fs::File::open(path) else {
        return FileState::Missing;
    };
    if !of_build(&object::ReadCache::new(file), build_id) {
        return FileState::Mismatch;
    }
    match addr2line::Loader::new(path) {
        Ok(loader) => FileState::Loaded(Box::new(loader)),
        Err(_) => FileState::Missing,
    }
}

/// Whether the ELF file in `data` is of the build `build_id`: true unless
/// both it and `build_id` name a build and they differ (a file or a
/// request without a build id cannot be checked).
pub(super) fn of_build(data: &object::ReadCache<std::fs::File>, build_id: &[u8]) -> bool {
    let on_disk = elf_build_id(data).unwrap_or_default();
    build_id.is_empty() || on_disk.is_empty() || on_disk == build_id
}

/// The GNU build id of the ELF file in `data`, reading only its headers
/// and notes.
fn elf_build_id(data: &object::ReadCache<std::fs::File>) -> Option<Vec<u8>> {
    use object::FileKind;
    use object::elf::{FileHeader32, FileHeader64};
    match FileKind::parse(data).ok()? {
        FileKind::Elf32 => elf_build_id_of::<FileHeader32<object::Endianness>, _>(data),
        FileKind::Elf64 => elf_build_id_of::<FileHeader64<object::Endianness>, _>(data),
        _ => None,
    }
}

fn elf_build_id_of<'a, Elf, R>(data: R) -> Option<Vec<u8>>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
    R: object::ReadRef<'a>,
{
    use object::read::elf::{ProgramHeader, SectionHeader};
    let is_build_id = |note: &object::read::elf::Note<'_, Elf>, endian| {
        note.name() == object::elf::ELF_NOTE_GNU
            && note.n_type(endian) == object::elf::NT_GNU_BUILD_ID
    };
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.section_headers(endian, data).ok()?;
    for section in sections {
        let Ok(Some(mut notes)) = section.notes(endian, data) else {
            continue;
        };
        while let Ok(Some(note)) = notes.next() {
            if is_build_id(&note, endian) {
                return Some(note.desc().to_vec());
            }
        }
    }
    if sections.is_empty() {
        for segment in header.program_headers(endian, data).ok()? {
            let Ok(Some(mut notes)) = segment.notes(endian, data) else {
                continue;
            };
            while let Ok(Some(note)) = notes.next() {
                if is_build_id(&note, endian) {
                    return Some(note.desc().to_vec());
                }
            }
        }
    }
    None
}

/// The symbols at `probe` (a virtual address of the file): the DWARF
/// inline chain, the outermost named from the symbol table when DWARF has
/// no name for it or only a short one (line-tables-only debug info, see
/// [`names`]); or the symbol table alone. Empty if neither knows.
fn lookup(loader: &addr2line::Loader, offset: u64) -> Vec<NativeSymbol> {
    let probe = loader.relative_address_base().wrapping_add(offset);
    let symbol_name = || loader.find_symbol(probe).map(demangle);
    let mut symbols = Vec::new();
    if let Ok(mut frames) = loader.find_frames(probe) {
        while let Ok(Some(frame)) = frames.next() {
            if symbols.len() == MAX_INLINE {
                break;
            }
            let function = frame
                .function
                .as_ref()
                .and_then(|f| f.raw_name().ok())
                .map(|name| demangle(&name));
            let location = frame.location.as_ref();
            symbols.push(NativeSymbol {
                function: function.unwrap_or_default(),
                file: location.and_then(|l| l.file).map(str::to_owned),
                line: location.and_then(|l| l.line),
            });
        }
    }
    match symbols.last_mut() {
        Some(outermost) => name_outermost(outermost, symbol_name),
        None => {
            if let Some(function) = symbol_name() {
                let location = loader.find_location(probe).ok().flatten();
                symbols.push(NativeSymbol {
                    function,
                    file: location.as_ref().and_then(|l| l.file).map(str::to_owned),
                    line: location.and_then(|l| l.line),
                });
            }
        }
    }
    for symbol in &mut symbols {
        if symbol.function.is_empty() {
            symbol.function = "<unknown>".to_owned();
        }
    }
    symbols
}

/// Names the outermost symbol of an inline chain (the function the
/// address is in) from the symbol table (`symbol_name`) when debug info
/// gave it no name, or only a [short](names::short) one; a short name
/// stays if the symbol table has none.
pub(super) fn name_outermost(
    outermost: &mut NativeSymbol,
    symbol_name: impl FnOnce() -> Option<String>,
) {
    if outermost.function.is_empty() {
        outermost.function = symbol_name().unwrap_or_default();
    } else if names::short(&outermost.function, outermost.file.as_deref())
        && let Some(full) = symbol_name()
    {
        outermost.function = full;
    }
}

/// A Rust name demangled without its hash; other names as they are.
fn demangle(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

/// The name of a native frame nothing could be read for:
/// `"<file name>+0x<offset><suffix>"`. The export names unsymbolised frames
/// with it too.
pub(crate) fn unsymbolized(module: &str, offset: u64, suffix: &str) -> NativeSymbol {
    let name = Path::new(module)
        .file_name()
        .map_or_else(|| module.into(), |n| n.to_string_lossy());
    NativeSymbol {
        function: format!("{name}+0x{offset:x}{suffix}"),
        file: None,
        line: None,
    }
}

/// Where the first `Traced::poll` is in an inline chain (innermost
/// first), if it holds one.
fn traced_poll_in(symbols: &[NativeSymbol]) -> Option<usize> {
    symbols
        .iter()
        .position(|s| is_traced_poll(&s.function, s.file.as_deref()))
}

/// Cuts a non-empty inline chain (innermost first) at the first
/// `Traced::poll`, and drops this crate's own functions inside it; keeps
/// the innermost symbol if nothing else is left.
pub(super) fn cut_plumbing(symbols: &mut Vec<NativeSymbol>) {
    let level = traced_poll_in(symbols).unwrap_or(symbols.len());
    if symbols[..level]
        .iter()
        .all(|s| is_own_function(&s.function))
    {
        symbols.truncate(1);
    } else {
        symbols.truncate(level);
        symbols.retain(|s| !is_own_function(&s.function));
    }
}

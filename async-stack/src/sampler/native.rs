//! Native code addresses as (module, build id, offset), and their
//! symbolisation.
//!
//! A sampled instruction address only means something in the process that
//! took it: libraries and position-independent executables load at a
//! different address on every run (ASLR). So the sampler thread turns each
//! raw address into a portable triple, and the export turns the triple
//! into function, file and line, possibly in another process:
//!
//! 1. **Capture** (signal handler, elsewhere): the address as a plain
//!    integer. Nothing here runs there.
//! 2. **Resolve** ([`Modules::resolve`], sampler thread): the module whose
//!    executable segment holds the address, from a snapshot of the loaded
//!    modules ([`ModuleMap`], taken with `dl_iterate_phdr`). The triple is
//!    the module's path, its GNU build id (read from its `PT_NOTE`
//!    segments in memory) and the offset of the address from the module's
//!    load bias. For an ELF file the offset is the virtual address in the
//!    file's own symbol and debug tables, whatever address it was loaded
//!    at.
//! 3. **Symbolise** ([`Symbolizer::symbolize`], export): the file at the
//!    path is opened with `addr2line` (DWARF, including inlined frames,
//!    then the ELF symbol table, dynamic symbols included), after checking
//!    that its build id is the one recorded, so that a rebuilt binary is
//!    never read as the one that was sampled.
//!
//! Invariants:
//!
//! - [`ModuleMap`]'s ranges are sorted by start and each names one module;
//!   an address in none of them (0, the heap, JIT code) resolves to `None`.
//! - [`Symbolizer::symbolize`] never returns an empty list and never
//!   panics on a bad, missing or foreign file: it falls back to
//!   `"<file name>+0x<offset>"`.
//! - Nothing allocates in proportion to a file's contents beyond what
//!   `object` and `addr2line` do; inline chains are cut at
//!   [`MAX_INLINE`] symbols, and both caches are bounded.
//!
//! # Accuracy
//!
//! What can make a symbolised native frame wrong or poorer:
//!
//! - **The binary changed on disk** since the sample: a different build id
//!   gives `"<file>+0x<offset> [build id mismatch]"`, never wrong names.
//!   A module without a build id (linked with `--build-id=none`) cannot be
//!   checked and is symbolised from whatever file is at its path.
//! - **The binary is gone** (deleted, or a profile read on another
//!   machine): `"<file>+0x<offset>"`. The main executable's path comes from
//!   `/proc/self/exe`, which names a deleted binary `"<path> (deleted)"`.
//! - **No debug info**: names from the symbol table only (no file, no
//!   line, no inlined frames); the nearest symbol whose size covers the
//!   address. Stripped binaries keep only their dynamic symbols, so a
//!   private function shows as `"<file>+0x<offset>"`.
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

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The most inlined symbols kept for one address (innermost first).
pub(crate) const MAX_INLINE: usize = 128;
/// The most (path, build id) files a [`Symbolizer`] keeps loaded; beyond
/// it, it drops all and starts again.
const MAX_FILES: usize = 256;
/// The most results one file keeps cached; beyond it, they are dropped.
const MAX_RESULTS_PER_FILE: usize = 1 << 16;
/// The longest build id kept from memory (GNU ones are 8 to 20 bytes).
const MAX_BUILD_ID: usize = 64;

/// A loaded module: its path, build id and load bias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModuleInfo {
    /// The file (the main executable's resolved through `/proc/self/exe`).
    pub(crate) path: Arc<str>,
    /// The GNU build id, empty if the module has none.
    pub(crate) build_id: Arc<[u8]>,
    /// What the module's virtual addresses are offset by (`dlpi_addr`).
    pub(crate) bias: usize,
}

/// One executable segment of a module, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ExecRange {
    start: usize,
    end: usize,
    module: usize,
}

/// The dynamic loader's counters of loads and unloads (glibc and musl):
/// equal counters mean the same set of modules.
type Generation = (u64, u64);

/// A snapshot of the process's loaded modules and where their code is.
#[derive(Clone, Debug, Default)]
pub(crate) struct ModuleMap {
    modules: Vec<ModuleInfo>,
    /// Sorted by `start`.
    ranges: Vec<ExecRange>,
    generation: Option<Generation>,
}

impl ModuleMap {
    /// Takes the snapshot. Not signal-safe (it allocates and takes the
    /// loader's lock): call it on the sampler thread.
    pub(crate) fn current() -> Self {
        let (raw, generation) = platform::loaded_modules();
        let mut exe: Option<Arc<str>> = None;
        let mut map = ModuleMap {
            generation,
            ..ModuleMap::default()
        };
        for module in raw {
            let path = if module.name.is_empty() {
                // The main program: dl_iterate_phdr names it "".
                exe.get_or_insert_with(|| match std::env::current_exe() {
                    Ok(p) => Arc::from(p.to_string_lossy()),
                    Err(_) => Arc::from(""),
                })
                .clone()
            } else {
                Arc::from(module.name)
            };
            let index = map.modules.len();
            map.ranges
                .extend(module.exec.iter().map(|&(start, end)| ExecRange {
                    start,
                    end,
                    module: index,
                }));
            map.modules.push(ModuleInfo {
                path,
                build_id: Arc::from(module.build_id),
                bias: module.bias,
            });
        }
        map.ranges.sort_unstable_by_key(|r| r.start);
        map
    }

    /// The module whose executable code holds `addr`, and the offset of
    /// `addr` from the module's load bias.
    pub(crate) fn lookup(&self, addr: usize) -> Option<(&ModuleInfo, u64)> {
        let after = self.ranges.partition_point(|r| r.start <= addr);
        let range = self.ranges.get(after.checked_sub(1)?)?;
        if addr >= range.end {
            return None;
        }
        let module = &self.modules[range.module];
        Some((module, addr.wrapping_sub(module.bias) as u64))
    }
}

/// Resolves addresses against a [`ModuleMap`], taking a new snapshot when
/// an address is not found and the loader reports modules loaded or
/// unloaded since the last one.
#[derive(Debug)]
pub(crate) struct Modules {
    map: ModuleMap,
}

impl Modules {
    /// Takes the first snapshot.
    pub(crate) fn new() -> Self {
        Modules {
            map: ModuleMap::current(),
        }
    }

    /// The module path, build id and offset of `addr`, or `None` if no
    /// loaded module's code holds it.
    pub(crate) fn resolve(&mut self, addr: usize) -> Option<(Arc<str>, Arc<[u8]>, u64)> {
        if addr == 0 {
            return None;
        }
        if self.map.lookup(addr).is_none() {
            self.refresh();
        }
        let (module, offset) = self.map.lookup(addr)?;
        Some((module.path.clone(), module.build_id.clone(), offset))
    }

    #[cold]
    #[inline(never)]
    fn refresh(&mut self) {
        // Without counters, every miss refreshes: it cannot tell.
        let unchanged = self
            .map
            .generation
            .is_some_and(|g| platform::generation() == Some(g));
        if !unchanged {
            self.map = ModuleMap::current();
        }
    }
}

/// A module as the platform reports it, before paths are resolved.
struct RawModule {
    /// As the loader gives it: empty for the main program.
    name: String,
    bias: usize,
    /// Executable segments, `[start, end)`.
    exec: Vec<(usize, usize)>,
    build_id: Vec<u8>,
}

#[cfg(target_os = "linux")]
mod platform {
    //! `dl_iterate_phdr`: the only unsafe code of the file.

    use super::{Generation, MAX_BUILD_ID, RawModule, find_gnu_build_id};
    use std::ffi::{CStr, c_int, c_void};

    #[cfg(target_pointer_width = "64")]
    type Phdr = libc::Elf64_Phdr;
    #[cfg(target_pointer_width = "32")]
    type Phdr = libc::Elf32_Phdr;

    struct Collect {
        modules: Vec<RawModule>,
        generation: Option<Generation>,
    }

    /// Every loaded module, and the loader's counters.
    pub(super) fn loaded_modules() -> (Vec<RawModule>, Option<Generation>) {
        let mut out = Collect {
            modules: Vec::new(),
            generation: None,
        };
        // SAFETY: `collect` matches the callback signature, and `data`
        // points to `out`, which outlives the call and is used by nothing
        // else during it (the callback runs on this thread, before
        // `dl_iterate_phdr` returns).
        unsafe { libc::dl_iterate_phdr(Some(collect), (&raw mut out).cast()) };
        (out.modules, out.generation)
    }

    /// The loader's counters now (one callback, for the first module).
    pub(super) fn generation() -> Option<Generation> {
        let mut generation: Option<Generation> = None;
        // SAFETY: as in `loaded_modules`: `data` points to `generation`,
        // which outlives the call and is not otherwise used during it.
        unsafe { libc::dl_iterate_phdr(Some(first_generation), (&raw mut generation).cast()) };
        generation
    }

    /// The counters of `info`, if the loader provides them (`size` says
    /// how much of the struct it filled).
    fn counters(info: &libc::dl_phdr_info, size: usize) -> Option<Generation> {
        #[cfg(any(target_env = "gnu", target_env = "musl"))]
        {
            let needed = std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs)
                + std::mem::size_of::<libc::c_ulonglong>();
            (size >= needed).then_some((info.dlpi_adds, info.dlpi_subs))
        }
        #[cfg(not(any(target_env = "gnu", target_env = "musl")))]
        {
            let _ = (info, size);
            None
        }
    }

    /// # Safety
    ///
    /// - `info` points to a `dl_phdr_info` valid for this call, of which
    ///   `size` bytes are filled (the loader's promise);
    /// - `data` points to an `Option<Generation>` not otherwise accessed
    ///   during the call.
    unsafe extern "C" fn first_generation(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the caller's promises above.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Option<Generation>>()) };
        *out = counters(info, size);
        1 // stop after the first module
    }

    /// # Safety
    ///
    /// - `info` points to a `dl_phdr_info` valid for this call, of which
    ///   `size` bytes are filled; its `dlpi_phdr` points to `dlpi_phnum`
    ///   program headers, and its `dlpi_name` to a C string or is null
    ///   (the loader's promises);
    /// - `data` points to a `Collect` not otherwise accessed during the
    ///   call.
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the caller's promises above.
        let (info, out) = unsafe { (&*info, &mut *data.cast::<Collect>()) };
        if out.generation.is_none() {
            out.generation = counters(info, size);
        }
        let phdrs: &[Phdr] = if info.dlpi_phdr.is_null() {
            &[]
        } else {
            // SAFETY: the loader's promise: `dlpi_phnum` headers, which
            // stay in place while the loader lock is held (during the
            // callback).
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: the loader's promise: a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) };
            name.to_string_lossy().into_owned()
        };
        let bias = info.dlpi_addr as usize;
        let exec = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0)
            .filter_map(|p| {
                let start = bias.checked_add(p.p_vaddr as usize)?;
                Some((start, start.checked_add(p.p_memsz as usize)?))
            })
            .collect();
        let build_id = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_NOTE)
            .find_map(|note| {
                let (start, len) = mapped_read_only(phdrs, note)?;
                let align = if note.p_align == 8 { 8 } else { 4 };
                // SAFETY: `mapped_read_only` checked that the note lies
                // inside a loaded, readable and not writable segment of
                // this module, which stays mapped and unchanged while the
                // loader lock is held (during the callback); bytes have
                // no alignment or validity requirement.
                let bytes = unsafe { std::slice::from_raw_parts((bias + start) as *const u8, len) };
                find_gnu_build_id(bytes, align)
                    .filter(|id| id.len() <= MAX_BUILD_ID)
                    .map(<[u8]>::to_vec)
            })
            .unwrap_or_default();
        out.modules.push(RawModule {
            name,
            bias,
            exec,
            build_id,
        });
        0
    }

    /// The virtual address and length of `note` if a `PT_LOAD` segment
    /// that is readable and not writable covers it, so reading it is
    /// sound (a `PT_NOTE` outside every `PT_LOAD` is not mapped).
    fn mapped_read_only(phdrs: &[Phdr], note: &Phdr) -> Option<(usize, usize)> {
        let start = note.p_vaddr as usize;
        let len = note.p_memsz as usize;
        let end = start.checked_add(len)?;
        phdrs
            .iter()
            .any(|p| {
                let (lo, size) = (p.p_vaddr as usize, p.p_memsz as usize);
                p.p_type == libc::PT_LOAD
                    && p.p_flags & libc::PF_R != 0
                    && p.p_flags & libc::PF_W == 0
                    && lo <= start
                    && lo.checked_add(size).is_some_and(|hi| end <= hi)
            })
            .then_some((start, len))
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    //! No module snapshot off Linux yet: every address resolves to `None`.

    use super::{Generation, RawModule};

    pub(super) fn loaded_modules() -> (Vec<RawModule>, Option<Generation>) {
        (Vec::new(), None)
    }

    pub(super) fn generation() -> Option<Generation> {
        None
    }
}

/// The description of the first `NT_GNU_BUILD_ID` note named `"GNU"` in
/// `notes` (an ELF note segment in native byte order, entries padded to
/// `align`), if any.
fn find_gnu_build_id(notes: &[u8], align: usize) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |at: usize| -> Option<u32> {
        let bytes = notes.get(at..at.checked_add(4)?)?;
        Some(u32::from_ne_bytes(bytes.try_into().ok()?))
    };
    let pad = |n: usize| n.checked_next_multiple_of(align);
    let mut at = 0;
    while at < notes.len() {
        let (name_len, desc_len, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name_start = at + 12;
        let name_end = name_start.checked_add(name_len as usize)?;
        let desc_start = pad(name_end)?;
        let desc_end = desc_start.checked_add(desc_len as usize)?;
        if desc_end > notes.len() {
            return None;
        }
        if kind == NT_GNU_BUILD_ID && notes[name_start..name_end] == *b"GNU\0" {
            return Some(&notes[desc_start..desc_end]);
        }
        at = pad(desc_end)?;
    }
    None
}

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
    results: HashMap<(u64, bool), Vec<NativeSymbol>>,
}

/// Symbolises (module, build id, offset) triples, caching the files it
/// opens (by path and build id) and its results (by offset and `call`).
/// It holds no state of the process that sampled the addresses.
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
            FileState::Missing => return vec![fallback(module, offset, "")],
            FileState::Mismatch => return vec![fallback(module, offset, " [build id mismatch]")],
            FileState::Loaded(loader) => loader,
        };
        if let Some(cached) = entry.results.get(&(offset, call)) {
            return cached.clone();
        }
        let mut symbols = lookup(loader, offset.saturating_sub(u64::from(call)));
        if symbols.is_empty() {
            symbols.push(fallback(module, offset, ""));
        } else {
            cut_plumbing(&mut symbols);
        }
        if entry.results.len() >= MAX_RESULTS_PER_FILE {
            entry.results.clear();
        }
        entry.results.insert((offset, call), symbols.clone());
        symbols
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
                    results: HashMap::new(),
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
    let on_disk = elf_build_id(&object::ReadCache::new(file)).unwrap_or_default();
    if !build_id.is_empty() && !on_disk.is_empty() && on_disk != build_id {
        return FileState::Mismatch;
    }
    match addr2line::Loader::new(path) {
        Ok(loader) => FileState::Loaded(Box::new(loader)),
        Err(_) => FileState::Missing,
    }
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
/// no name for it; or the symbol table alone. Empty if neither knows.
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
        Some(outermost) if outermost.function.is_empty() => {
            outermost.function = symbol_name().unwrap_or_default();
        }
        Some(_) => {}
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

/// A Rust name demangled without its hash; other names as they are.
fn demangle(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

/// `"<file name>+0x<offset><suffix>"`.
fn fallback(module: &str, offset: u64, suffix: &str) -> NativeSymbol {
    let name = Path::new(module)
        .file_name()
        .map_or_else(|| module.into(), |n| n.to_string_lossy());
    NativeSymbol {
        function: format!("{name}+0x{offset:x}{suffix}"),
        file: None,
        line: None,
    }
}

/// Cuts a non-empty inline chain (innermost first) at the first
/// `Traced::poll`, and drops this crate's own functions inside it; keeps
/// the innermost symbol if nothing else is left.
fn cut_plumbing(symbols: &mut Vec<NativeSymbol>) {
    let level = symbols
        .iter()
        .position(is_traced_poll)
        .unwrap_or(symbols.len());
    if symbols[..level].iter().all(is_own_plumbing) {
        symbols.truncate(1);
    } else {
        symbols.truncate(level);
        symbols.retain(|s| !is_own_plumbing(s));
    }
}

/// `Traced::poll`, by its full name, or by its short name and file (what
/// line-tables-only debug info gives inlined frames).
fn is_traced_poll(s: &NativeSymbol) -> bool {
    let name = s.function.as_str();
    let full = name.starts_with("<async_stack::task::traced::Traced<")
        && name.contains(" as core::future::future::Future>::poll");
    let short = (name == "poll" || name.starts_with("poll<"))
        && s.file.as_deref().is_some_and(|f| {
            f.replace('\\', "/")
                .ends_with("async-stack/src/task/traced.rs")
        });
    full || short
}

/// This crate's own functions (its plumbing, in a user's stack).
fn is_own_plumbing(s: &NativeSymbol) -> bool {
    s.function.starts_with("async_stack::") || s.function.starts_with("<async_stack::")
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

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
    fn fallback_names_the_file_and_offset() {
        let mut s = Symbolizer::new();
        let symbols = s.symbolize("/nonexistent/dir/libfoo.so", &[1, 2, 3], 0x1234, true);
        assert_eq!(symbols, [sym("libfoo.so+0x1234", None)]);
    }
}

#[cfg(all(test, not(async_stack_loom), target_os = "linux"))]
mod linux_tests {
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
        assert_eq!(
            symbol.function,
            "async_stack::sampler::native::linux_tests::marker"
        );
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

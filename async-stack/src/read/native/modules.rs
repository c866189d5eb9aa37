//! Native code addresses as (module, build id, offset): the snapshot of
//! the loaded modules ([`ModuleMap`]) and the sampler thread's resolver
//! ([`Modules`]), step 2 of [`crate::read::native`].
//!
//! Invariants:
//!
//! - [`ModuleMap`]'s ranges are sorted by start and each names one module;
//!   an address in none of them (0, the heap, JIT code) resolves to `None`.

use std::sync::Arc;

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
pub(super) fn find_gnu_build_id(notes: &[u8], align: usize) -> Option<&[u8]> {
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

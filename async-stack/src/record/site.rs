//! Static call-site and await-site records, and their interned ids.
//!
//! A [`CallSite`] describes an instrumented function (or a `.traced()`
//! call); an [`AwaitSite`] describes one `.await` expression. Both are
//! `&'static`: the macro emits them as `static` items, and `.traced()`
//! leaks one record per distinct caller location (bounded by the number of
//! call sites in the program).
//!
//! Every await site names the call site of the function it is in, so a
//! frame keeps a single word for both (see [`crate::record::frame`]).
//!
//! Other threads never see pointers to these records. They see **ids**:
//! small integers handed out once per record, on its first use, under the
//! table's lock (re-checked inside it, in the style of `tracing-core`'s
//! callsites). The id is `0` until registration completes; the tables that
//! map ids back to records ([`CALL_SITES`], [`AWAIT_SITES`]) are
//! push-only tables ([`crate::pages::PushTable`]) of `#[repr(C)]` entries
//! in pages that are never freed, read without a lock, so an id, once
//! published, resolves forever, from another thread or from a debugger
//! reading memory alone. Ids fit in [`SITE_ID_BITS`] bits (a published stack
//! word holds one); a program with more distinct sites than that (over 16
//! million) gets [`UNKNOWN_SITE`] for the rest, which dumps show as
//! `<unknown>`.

use std::mem::MaybeUninit;
// Always std atomics and locks: these records and tables are `static`s built by
// `const fn`, which loom's atomics cannot be. The tables' code (here and in
// `crate::pages`) is generic over its atomics, and its loom model runs it on
// loom's. The steady state of a poll reads a site's `id` word only.
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::pages::{CountWord, PageCell, PushTable};

/// Static description of an instrumented function or `.traced()` call.
///
/// Emitted by `#[traced_async]` as a `static`; not meant to be built by
/// hand except through the macro and [`TracedExt`](crate::TracedExt).
#[repr(C)]
#[derive(Debug)]
pub struct CallSite {
    /// Interned id, `0` until registered.
    pub(crate) id: AtomicU32,
    name: &'static str,
    module_path: &'static str,
    file: &'static str,
    line: u32,
    column: u32,
    /// `true` when `name` is the whole display name (an explicit
    /// `name = ".."` or `.traced_named(..)`), `false` when it is a function
    /// identifier to be qualified with `module_path`.
    explicit_name: bool,
    /// The display name, formatted once (bounded: one per call site).
    display: OnceLock<&'static str>,
    /// The type name of an item nested in the function (see
    /// [`with_path`](Self::with_path)), which carries the impl's type for a
    /// method.
    path: Option<fn() -> &'static str>,
    /// An address in the code of the function's body (`0` until one is
    /// known): the return address of the first of its `.await`s to be
    /// resolved (see [`AwaitSite`]), which lies in the body's code. The
    /// walker uses it to find the innermost frame's body among the native
    /// frames when the build has no debug info for inlined code.
    pub(crate) body_address: AtomicUsize,
}

/// The path, below the function, of the item `#[traced_async]` nests in
/// each function's call-site `static` to learn the function's path (see
/// [`CallSite::with_path`]).
const PATH_ITEM: &str = "__ASYNC_STACK_CALLSITE::__async_stack_here";

impl CallSite {
    /// Creates a call-site record. Used by the `#[traced_async]` expansion.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        module_path: &'static str,
        file: &'static str,
        line: u32,
        column: u32,
        explicit_name: bool,
    ) -> Self {
        CallSite {
            id: AtomicU32::new(0),
            name,
            module_path,
            file,
            line,
            column,
            explicit_name,
            display: OnceLock::new(),
            path: None,
            body_address: AtomicUsize::new(0),
        }
    }

    /// Adds the function's full path, for methods: `path` returns
    /// `std::any::type_name` of an item `__async_stack_here` nested in the
    /// function's call-site static `__ASYNC_STACK_CALLSITE`, such as
    /// `app::Store::get::__ASYNC_STACK_CALLSITE::__async_stack_here` or
    /// `<app::Store as app::Get>::get::..`. It is called
    /// once, when the name is first displayed. Used by the `#[traced_async]`
    /// expansion.
    #[doc(hidden)]
    pub const fn with_path(mut self, path: fn() -> &'static str) -> Self {
        self.path = Some(path);
        self
    }

    /// Whether frames of this call site record their `.await`s: those of
    /// a `#[traced_async]` body, whose expansion gives every call site a
    /// path ([`with_path`](Self::with_path)); a `.traced()` future records
    /// none, so where it awaits is not known.
    pub(crate) fn records_awaits(&self) -> bool {
        self.path.is_some()
    }

    /// The function's path from [`with_path`](Self::with_path), without the
    /// nested item and the `{{closure}}`s it may sit in: the `async fn`
    /// body's, and those of the `async` blocks that another attribute below
    /// `#[traced_async]` (tracing's `#[instrument]`) wraps the body in.
    fn qualified_path(&self) -> Option<&'static str> {
        let path = (self.path?)();
        let mut path = path.strip_suffix(PATH_ITEM)?.strip_suffix("::")?;
        while let Some(outer) = path.strip_suffix("::{{closure}}") {
            path = outer;
        }
        (!path.is_empty()).then_some(path)
    }

    /// The display name: the function's path for an instrumented function
    /// (`module::function`, or `module::Type::method`,
    /// `<module::Type as module::Trait>::method` for a method, as
    /// `std::any::type_name` spells it), or the explicit name given to the
    /// macro or `.traced_named`.
    ///
    /// An unnamed `.traced()` future has no function name of its own; it is
    /// shown as `<future at file:line:col>` (the walker prefers the name
    /// debug info gives its body).
    pub fn function(&self) -> String {
        if self.is_anonymous() {
            format!("<future at {}:{}:{}>", self.file, self.line, self.column)
        } else if self.explicit_name || self.module_path.is_empty() {
            self.name.to_string()
        } else if let Some(path) = self.qualified_path() {
            path.to_string()
        } else {
            format!("{}::{}", self.module_path, self.name)
        }
    }

    /// [`function`](Self::function), formatted once per call site and kept
    /// for the life of the process.
    pub fn function_static(&self) -> &'static str {
        self.display
            .get_or_init(|| Box::leak(self.function().into_boxed_str()))
    }

    /// Whether this is an unnamed `.traced()` call site.
    pub(crate) fn is_anonymous(&self) -> bool {
        self.name.is_empty()
    }

    /// The bare name (function identifier or explicit name).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether [`name`](Self::name) was given explicitly.
    #[inline]
    pub fn explicit_name(&self) -> bool {
        self.explicit_name
    }

    /// The module path where the function is defined.
    pub fn module_path(&self) -> &'static str {
        self.module_path
    }

    /// Source file of the function (or of the `.traced()` call).
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// Line of the function (or of the `.traced()` call).
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Column of the function (or of the `.traced()` call).
    pub fn column(&self) -> u32 {
        self.column
    }

    /// The interned id, registering the record on first use.
    #[inline]
    pub(crate) fn id(&'static self) -> u32 {
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        register_call_site(self)
    }
}

/// Bits of an interned site id.
pub(crate) const SITE_ID_BITS: u32 = 24;

/// The id of every site registered after the table was full: it resolves
/// to no record.
pub(crate) const UNKNOWN_SITE: u32 = (1 << SITE_ID_BITS) - 1;

/// What a published slot (and a frame, see
/// [`AsyncStackFrame::site_id`](crate::record::frame::AsyncStackFrame::site_id))
/// says about where a frame is: a call site's id, or an await site's id
/// with the await bit ([`SiteId::AWAIT`]) set, in [`SITE_ID_BITS`] + 1
/// bits. This type owns that bit: every other layer builds and reads site
/// fields through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteId(u32);

impl SiteId {
    /// The bit that marks an await site's id.
    pub(crate) const AWAIT: u32 = 1 << SITE_ID_BITS;

    /// The site field of a frame running in the body of call site `id`.
    #[inline(always)]
    pub(crate) const fn call(id: u32) -> Self {
        SiteId(id & !Self::AWAIT)
    }

    /// The site field of a frame at the `.await` of await site `id`.
    #[inline(always)]
    pub(crate) const fn at_await(id: u32) -> Self {
        SiteId(id | Self::AWAIT)
    }

    /// A site field as stored (a published word's site bits).
    #[inline(always)]
    pub(crate) const fn from_raw(raw: u32) -> Self {
        SiteId(raw)
    }

    /// The site field as stored.
    #[inline(always)]
    pub(crate) const fn raw(self) -> u32 {
        self.0
    }

    /// Whether this names an await site.
    #[inline(always)]
    pub(crate) const fn is_await(self) -> bool {
        self.0 & Self::AWAIT != 0
    }

    /// The call or await site's id, without the await bit.
    #[inline(always)]
    pub(crate) const fn id(self) -> u32 {
        self.0 & !Self::AWAIT
    }
}

/// Static description of one `.await` expression inside an instrumented
/// function.
#[repr(C)]
#[derive(Debug)]
pub struct AwaitSite {
    /// Interned id, `0` until registered.
    pub(crate) id: AtomicU32,
    /// The function this `.await` is in.
    pub(crate) call_site: &'static CallSite,
    file: &'static str,
    line: u32,
    column: u32,
    /// Cached return address into the awaiting function's code (see
    /// [`crate::record::frame`]); `0` while unresolved, `1` when resolution failed.
    pub(crate) return_address: AtomicUsize,
}

impl AwaitSite {
    /// Creates an await-site record for an `.await` in the function of
    /// `call_site`. Used by the `#[traced_async]` expansion.
    #[doc(hidden)]
    pub const fn new(
        call_site: &'static CallSite,
        file: &'static str,
        line: u32,
        column: u32,
    ) -> Self {
        AwaitSite {
            id: AtomicU32::new(0),
            call_site,
            file,
            line,
            column,
            return_address: AtomicUsize::new(0),
        }
    }

    /// The cached return address, `0` while unresolved or when resolution
    /// failed.
    #[inline]
    pub(crate) fn cached_return_address(&self) -> usize {
        match self.return_address.load(Ordering::Relaxed) {
            1 => 0,
            ra => ra,
        }
    }

    /// The function this `.await` is in.
    pub fn call_site(&self) -> &'static CallSite {
        self.call_site
    }

    /// Source file of the `.await`.
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// Line of the `.await`.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// Column of the `.await`.
    pub fn column(&self) -> u32 {
        self.column
    }

    /// Where the `.await` is, as dumps show it.
    pub(crate) fn location(&self) -> crate::record::location::SourceLocation {
        crate::record::location::SourceLocation::new_static(self.file, self.line, self.column)
    }

    /// The interned id, registering the record on first use.
    #[inline]
    pub(crate) fn id(&'static self) -> u32 {
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        register_await_site(self)
    }
}

/// A `'static` string as a debugger reads it: address and length in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawStr {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
}

impl RawStr {
    fn new(s: &'static str) -> Self {
        RawStr {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }
}

/// One entry of the call-site table (id `i + 1` at index `i`).
///
/// `#[repr(C)]` and written once, before the table's length covers it, so
/// that a debugger reads a site from memory alone (see [`crate::debug`]).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct CallSiteEntry {
    /// The record itself, for in-process readers.
    pub(crate) site: &'static CallSite,
    /// The display name ([`CallSite::function`]), as dumps print it.
    pub(crate) function: RawStr,
    pub(crate) file: RawStr,
    pub(crate) line: u32,
    pub(crate) column: u32,
    /// The name of a task rooted at this site that has no name of its own:
    /// the explicit name (`#[traced_async(name = ..)]`, `.traced_named`),
    /// or empty.
    pub(crate) task_name: RawStr,
}

/// One entry of the await-site table (id `i + 1` at index `i`).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct AwaitSiteEntry {
    /// The record itself, for in-process readers.
    pub(crate) site: &'static AwaitSite,
    /// The call-site id of the function the `.await` is in (its call site
    /// is registered first).
    pub(crate) call_id: u32,
    pub(crate) line: u32,
    pub(crate) column: u32,
    pub(crate) file: RawStr,
}

// SAFETY: every field is a `'static` reference or a pointer into `'static`
// string data, never written after the entry is published.
unsafe impl Send for CallSiteEntry {}
// SAFETY: as above.
unsafe impl Sync for CallSiteEntry {}
// SAFETY: as above.
unsafe impl Send for AwaitSiteEntry {}
// SAFETY: as above.
unsafe impl Sync for AwaitSiteEntry {}

/// Entries per page of a site table.
pub(crate) const SITE_PAGE: usize = 1024;
/// Pages of a site table: room for every id below [`UNKNOWN_SITE`].
pub(crate) const SITE_PAGES: usize = (UNKNOWN_SITE as usize).div_ceil(SITE_PAGE);

/// The most sites of each kind: every id below [`UNKNOWN_SITE`].
const SITE_CAPACITY: usize = UNKNOWN_SITE as usize - 1;

/// A table of site entries: a push table of the crate's page tables
/// ([`crate::pages::PushTable`]) of [`SITE_PAGE`]-entry pages, whose entry
/// `i` is id `i + 1`. Its page table is in `.bss`, resident only where
/// touched; the debug descriptor points at its `pages` (page addresses)
/// and `len`.
pub(crate) type SiteTable<E> = PushTable<E, SITE_PAGE, SITE_PAGES>;

/// The entry of id `id` in `table`, if registered.
#[inline]
fn entry<E, const PAGE: usize, const PAGES: usize, C, W>(
    table: &PushTable<E, PAGE, PAGES, C, W>,
    id: u32,
) -> Option<&'static E>
where
    C: PageCell<MaybeUninit<E>>,
    W: CountWord,
{
    table.get((id as usize).checked_sub(1)?)
}

/// Registers in `table` the site whose id word is `id`, with the entry
/// `make` builds: the id it gets, or [`UNKNOWN_SITE`] if the table is
/// full. `make` runs under the table's lock, once per site.
///
/// Generic over the table's atomics so that the loom model below runs
/// this very code on loom's, with pages of two entries; the process's
/// tables use std's (statics, see [`SiteTable`]).
#[cold]
fn register<E, const PAGE: usize, const PAGES: usize, C, W>(
    table: &PushTable<E, PAGE, PAGES, C, W>,
    id: &AtomicU32,
    make: impl FnOnce() -> E,
) -> u32
where
    C: PageCell<MaybeUninit<E>>,
    W: CountWord,
{
    let mut pusher = table.lock();
    // Re-check under the lock: another thread may have won the race.
    let current = id.load(Ordering::Acquire);
    if current != 0 {
        return current;
    }
    let new_id = pusher
        .push(SITE_CAPACITY, make)
        .map_or(UNKNOWN_SITE, |index| index as u32 + 1);
    id.store(new_id, Ordering::Release);
    new_id
}

/// The call-site table: call-site id `i + 1` at index `i`.
pub(crate) static CALL_SITES: SiteTable<CallSiteEntry> = SiteTable::new();
/// The await-site table: await-site id `i + 1` at index `i`.
pub(crate) static AWAIT_SITES: SiteTable<AwaitSiteEntry> = SiteTable::new();

#[cold]
#[inline(never)]
fn register_call_site(site: &'static CallSite) -> u32 {
    // Formatted outside the table's lock: it may register nothing, but
    // formatting once is enough (the name is kept per site).
    let function = site.function_static();
    register(&CALL_SITES, &site.id, || CallSiteEntry {
        site,
        function: RawStr::new(function),
        file: RawStr::new(site.file),
        line: site.line,
        column: site.column,
        task_name: RawStr::new(if site.explicit_name && !site.is_anonymous() {
            site.name
        } else {
            ""
        }),
    })
}

#[cold]
#[inline(never)]
fn register_await_site(site: &'static AwaitSite) -> u32 {
    let call_id = site.call_site.id();
    register(&AWAIT_SITES, &site.id, || AwaitSiteEntry {
        site,
        call_id,
        line: site.line,
        column: site.column,
        file: RawStr::new(site.file),
    })
}

/// A snapshot of both id tables, for resolving many ids with one bounds
/// check each (dumps).
pub(crate) fn snapshot() -> (Vec<&'static CallSite>, Vec<&'static AwaitSite>) {
    let calls = (1..=CALL_SITES.len() as u32)
        .filter_map(|id| entry(&CALL_SITES, id).map(|e| e.site))
        .collect();
    let awaits = (1..=AWAIT_SITES.len() as u32)
        .filter_map(|id| entry(&AWAIT_SITES, id).map(|e| e.site))
        .collect();
    (calls, awaits)
}

/// Resolves a call-site id published by another thread.
pub(crate) fn call_site_by_id(id: u32) -> Option<&'static CallSite> {
    entry(&CALL_SITES, id).map(|e| e.site)
}

/// Resolves an await-site id published by another thread.
pub(crate) fn await_site_by_id(id: u32) -> Option<&'static AwaitSite> {
    entry(&AWAIT_SITES, id).map(|e| e.site)
}

/// The key of a `.traced()` call site: its location's address and its
/// explicit name's address and length (all `'static`).
type CallerKey = (usize, usize, usize);

/// Returns the leaked call-site record for a `.traced()` caller location
/// (and optional explicit name), creating it on first use.
///
/// Records are keyed by the location's address and the name's address,
/// both `'static`, so the number of records is bounded by the number of
/// distinct `.traced()` / `.traced_named()` calls in the program. A small
/// per-thread direct-mapped cache answers the common case (a `.traced()`
/// call in a loop or a spawn helper) with one compare, no hashing and no
/// lock.
#[inline]
pub(crate) fn call_site_for_caller(
    location: &'static std::panic::Location<'static>,
    name: Option<&'static str>,
) -> &'static CallSite {
    use std::cell::Cell;
    const WAYS: usize = 64;
    thread_local! {
        static RECENT: [Cell<(CallerKey, Option<&'static CallSite>)>; WAYS] =
            const { [const { Cell::new(((0, 0, 0), None)) }; WAYS] };
    }
    let key = (
        location as *const _ as usize,
        name.map_or(0, |n| n.as_ptr() as usize),
        name.map_or(0, str::len),
    );
    // Locations are distinct statics a few words apart.
    let way = (key.0 >> 3) % WAYS;
    let cached = RECENT
        .try_with(|recent| match recent[way].get() {
            (k, Some(site)) if k == key => Some(site),
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(site) = cached {
        return site;
    }
    let site = caller_site_slow(key, location, name);
    let _ = RECENT.try_with(|recent| recent[way].set((key, Some(site))));
    site
}

/// The shared map behind [`call_site_for_caller`]'s cache.
#[cold]
#[inline(never)]
fn caller_site_slow(
    key: CallerKey,
    location: &'static std::panic::Location<'static>,
    name: Option<&'static str>,
) -> &'static CallSite {
    use std::collections::HashMap;
    static LEAKED: OnceLock<crate::shim::Mutex<HashMap<CallerKey, &'static CallSite>>> =
        OnceLock::new();
    let map = LEAKED.get_or_init(Default::default);
    let mut map = crate::shim::lock(map);
    let site: &'static CallSite = map.entry(key).or_insert_with(|| {
        Box::leak(Box::new(CallSite::new(
            name.unwrap_or(""),
            "",
            location.file(),
            location.line(),
            location.column(),
            true,
        )))
    });
    site
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(path: fn() -> &'static str) -> String {
        CallSite::new("run", "app", "src/app.rs", 1, 1, false)
            .with_path(path)
            .function()
    }

    /// The nested item's path names the function whatever wraps the body:
    /// nothing (the desugared fn), the `async fn`'s body, or that body
    /// wrapped again by an attribute below `#[traced_async]`.
    #[test]
    fn the_function_is_named_without_the_closures_around_its_body() {
        assert_eq!(
            named(|| "app::Handler::run::__ASYNC_STACK_CALLSITE::__async_stack_here"),
            "app::Handler::run"
        );
        assert_eq!(
            named(|| "app::Handler::run::{{closure}}::__ASYNC_STACK_CALLSITE::__async_stack_here"),
            "app::Handler::run"
        );
        assert_eq!(
            named(|| {
                "app::Handler::run::{{closure}}::{{closure}}::__ASYNC_STACK_CALLSITE::__async_stack_here"
            }),
            "app::Handler::run"
        );
        // A closure the fn itself is defined in stays in its path.
        assert_eq!(
            named(|| "app::main::{{closure}}::run::__ASYNC_STACK_CALLSITE::__async_stack_here"),
            "app::main::{{closure}}::run"
        );
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;

    /// Pages of two entries, three pages, on loom's atomics.
    type LoomTable = PushTable<
        u64,
        2,
        3,
        loom::sync::atomic::AtomicPtr<MaybeUninit<u64>>,
        loom::sync::atomic::AtomicUsize,
    >;

    /// A reader that sees a length sees every entry below it, whole, across
    /// page boundaries, while the writer registers: never a page it cannot
    /// reach, never an entry of another id.
    #[test]
    fn every_id_below_the_published_length_resolves() {
        loom::model(|| {
            let table: &'static LoomTable = Box::leak(Box::new(PushTable::with_cells(
                std::array::from_fn(|_| loom::sync::atomic::AtomicPtr::default()),
                loom::sync::atomic::AtomicUsize::new(0),
            )));
            let ids: &'static [AtomicU32; 3] = Box::leak(Box::default());
            let writer = loom::thread::spawn(move || {
                for (i, id) in ids.iter().enumerate() {
                    register(table, id, || 10 * (i as u64 + 1));
                }
            });
            loop {
                let n = table.len() as u32;
                for id in 1..=n {
                    assert_eq!(
                        entry(table, id),
                        Some(&(10 * u64::from(id))),
                        "id {id} of {n}"
                    );
                }
                if n == 3 {
                    break;
                }
                loom::thread::yield_now();
            }
            writer.join().unwrap();
        });
    }
}

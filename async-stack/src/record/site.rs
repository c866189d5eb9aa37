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
//! callsites). The id is `0` until registration completes; the table that
//! maps ids back to records is append-only, so an id, once published,
//! resolves forever. Ids fit in [`SITE_ID_BITS`] bits (a published stack
//! word holds one); a program with more distinct sites than that (over 16
//! million) gets [`UNKNOWN_SITE`] for the rest, which dumps show as
//! `<unknown>`.

use std::sync::OnceLock;
use std::sync::RwLock;

// Always std atomics: these records are `static`s built by `const fn`,
// which loom's atomics cannot be; no loom model involves them.
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// Static description of an instrumented function or `.traced()` call.
///
/// Emitted by `#[traced_async]` as a `static`; not meant to be built by
/// hand except through the macro and [`TracedExt`](crate::TracedExt).
#[repr(C)]
#[derive(Debug)]
pub struct CallSite {
    /// Interned id, `0` until registered.
    id: AtomicU32,
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

    /// The function's path from [`with_path`](Self::with_path), without the
    /// nested item (and the `async fn` body's `{{closure}}` it may sit in).
    fn qualified_path(&self) -> Option<&'static str> {
        let path = (self.path?)();
        let path = path.strip_suffix(PATH_ITEM)?.strip_suffix("::")?;
        let path = path.strip_suffix("::{{closure}}").unwrap_or(path);
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

/// Static description of one `.await` expression inside an instrumented
/// function.
#[repr(C)]
#[derive(Debug)]
pub struct AwaitSite {
    /// Interned id, `0` until registered.
    id: AtomicU32,
    /// The function this `.await` is in.
    call_site: &'static CallSite,
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

/// Append-only id -> record tables. Index `i` holds the record with id
/// `i + 1`. Readers take the read lock only off the hot path (dumps,
/// symbolisation); registration takes the write lock once per record.
struct Tables {
    calls: RwLock<Vec<&'static CallSite>>,
    awaits: RwLock<Vec<&'static AwaitSite>>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        calls: RwLock::new(Vec::new()),
        awaits: RwLock::new(Vec::new()),
    })
}

#[cold]
#[inline(never)]
fn register_call_site(site: &'static CallSite) -> u32 {
    let mut calls = tables().calls.write().unwrap_or_else(|e| e.into_inner());
    // Re-check under the lock: another thread may have won the race.
    let id = site.id.load(Ordering::Acquire);
    if id != 0 {
        return id;
    }
    let id = if calls.len() + 1 < UNKNOWN_SITE as usize {
        calls.push(site);
        calls.len() as u32
    } else {
        UNKNOWN_SITE
    };
    site.id.store(id, Ordering::Release);
    id
}

#[cold]
#[inline(never)]
fn register_await_site(site: &'static AwaitSite) -> u32 {
    let mut awaits = tables().awaits.write().unwrap_or_else(|e| e.into_inner());
    let id = site.id.load(Ordering::Acquire);
    if id != 0 {
        return id;
    }
    let id = if awaits.len() + 1 < UNKNOWN_SITE as usize {
        awaits.push(site);
        awaits.len() as u32
    } else {
        UNKNOWN_SITE
    };
    site.id.store(id, Ordering::Release);
    id
}

/// A snapshot of both id tables, for resolving many ids without taking the
/// lock for each (dumps).
pub(crate) fn snapshot() -> (Vec<&'static CallSite>, Vec<&'static AwaitSite>) {
    let t = tables();
    let calls = t.calls.read().unwrap_or_else(|e| e.into_inner()).clone();
    let awaits = t.awaits.read().unwrap_or_else(|e| e.into_inner()).clone();
    (calls, awaits)
}

/// Resolves a call-site id published by another thread.
pub(crate) fn call_site_by_id(id: u32) -> Option<&'static CallSite> {
    let idx = (id as usize).checked_sub(1)?;
    let calls = tables().calls.read().unwrap_or_else(|e| e.into_inner());
    calls.get(idx).copied()
}

/// Resolves an await-site id published by another thread.
pub(crate) fn await_site_by_id(id: u32) -> Option<&'static AwaitSite> {
    let idx = (id as usize).checked_sub(1)?;
    let awaits = tables().awaits.read().unwrap_or_else(|e| e.into_inner());
    awaits.get(idx).copied()
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
    static LEAKED: OnceLock<crate::sync::Mutex<HashMap<CallerKey, &'static CallSite>>> =
        OnceLock::new();
    let map = LEAKED.get_or_init(Default::default);
    let mut map = crate::sync::lock(map);
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

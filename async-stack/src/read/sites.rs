//! Site ids, as published stacks and live chains hold them, resolved to
//! the static call and await sites they name.
//!
//! A site id is a call-site id, or an await-site id with
//! [`SiteId::AWAIT`] set (see [`crate::task::stack`]). `0` and ids of sites
//! never interned name nothing: every function here answers `None` for
//! them, never a wrong site.

use crate::record::site::SiteId;
use crate::record::site::{AwaitSite, CallSite, await_site_by_id, call_site_by_id};
use crate::shim::Ordering;

/// Where a site id points: the function it is in and the source location
/// (the `.await` for an await site, the function's own for a call site).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteLocation {
    pub(crate) function: &'static str,
    pub(crate) file: &'static str,
    pub(crate) line: u32,
    pub(crate) column: u32,
}

/// The location a site id names, if it names a site. An await-site id
/// that names no await site is looked up as a call-site id.
pub(crate) fn location_of(site: u32) -> Option<SiteLocation> {
    let site = SiteId::from_raw(site);
    if site.is_await()
        && let Some(a) = await_site_by_id(site.id())
    {
        return Some(SiteLocation {
            function: a.call_site().function_static(),
            file: a.file(),
            line: a.line(),
            column: a.column(),
        });
    }
    call_site_by_id(site.id()).map(|c| SiteLocation {
        function: c.function_static(),
        file: c.file(),
        line: c.line(),
        column: c.column(),
    })
}

/// The call site (the function) a site id belongs to: itself, or the
/// function an await site is in.
pub(crate) fn call_site_of(site: u32) -> Option<&'static CallSite> {
    let site = SiteId::from_raw(site);
    if site.is_await() {
        await_site_by_id(site.id()).map(|a| a.call_site())
    } else {
        call_site_by_id(site.id())
    }
}

/// An address in the code that runs the body of the function a site id
/// belongs to, `0` when none is known yet: the `.await`'s cached return
/// address for an await site, else the function's body address (see
/// `CallSite::body_address`), set when any of its `.await`s was first
/// reached. Where no debug info tells which native frame runs which body,
/// the function holding this address does.
#[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
pub(crate) fn body_address(site: u32) -> usize {
    let id = SiteId::from_raw(site);
    let at_await = id
        .is_await()
        .then(|| await_site_by_id(id.id()))
        .flatten()
        .map_or(0, AwaitSite::cached_return_address);
    match at_await {
        0 => call_site_of(site).map_or(0, |c| c.body_address.load(Ordering::Relaxed)),
        ra => ra,
    }
}

/// Whether the demangled symbol `name` is the generator of the body of the
/// function of `cs`: `module::fn::{{closure}}`, or the function's whole path
/// (a method's) followed by `::{{closure}}`, once or more (another
/// attribute below `#[traced_async]` may wrap the body in `async` blocks).
pub(crate) fn is_body_name(cs: &CallSite, name: &str) -> bool {
    let Some(mut f) = name.strip_suffix("::{{closure}}") else {
        return false;
    };
    while let Some(outer) = f.strip_suffix("::{{closure}}") {
        f = outer;
    }
    !cs.module_path().is_empty()
        && (f == cs.function_static()
            || f.strip_prefix(cs.module_path())
                .and_then(|f| f.strip_prefix("::"))
                .is_some_and(|f| f == cs.name()))
}

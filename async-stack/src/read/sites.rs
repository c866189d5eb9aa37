//! Site ids, as published stacks and live chains hold them, resolved to
//! the static call and await sites they name.
//!
//! A site id is a call-site id, or an await-site id with
//! [`SiteId::AWAIT`] set (see [`crate::task::stack`]). `0` and ids of sites
//! never interned name nothing: every function here answers `None` for
//! them, never a wrong site.

use crate::record::site::SiteId;
use crate::record::site::{CallSite, await_site_by_id, call_site_by_id};

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

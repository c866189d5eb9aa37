//! Labels: what a sample's frames and group are called in a profile.
//!
//! Site ids become async frames ([`site_frame`], [`resolve_site`]) through
//! [`crate::read::sites`], and a task's name, spawn location or root site
//! becomes its group ([`group_of`], see [`Grouping`]). The wall-clock
//! tick, its caches and the on-CPU drain all label through here, so a
//! task reads the same whichever path sampled it.

use std::borrow::Cow;

use super::Grouping;
use super::profile::RawFrame;
use crate::read::sites::{call_site_of, location_of};
use crate::record::site::CallSite;
use crate::task::record::TaskName;

/// An interned site id as a profile frame (`<unknown>` if it names no
/// site).
pub(crate) fn site_frame(site: u32) -> RawFrame<'static> {
    resolve_site(site).unwrap_or(RawFrame::Async {
        function: "<unknown>",
        file: "",
        line: 0,
        column: 0,
    })
}

/// An interned site id as a profile frame, if it names a site.
pub(crate) fn resolve_site(site: u32) -> Option<RawFrame<'static>> {
    location_of(site).map(|l| RawFrame::Async {
        function: l.function,
        file: l.file,
        line: l.line,
        column: l.column,
    })
}

/// The group of a task (see [`Grouping`]) with this name, spawn location
/// and root site, and whether it is the root's (so depends on the root
/// site).
pub(crate) fn group_of<'a>(
    name: Option<&'a TaskName>,
    location: Option<&'static CallSite>,
    root_site: u32,
    grouping: Grouping,
) -> (Cow<'a, str>, bool) {
    let spawn = || location.map(|l| Cow::Owned(format!("{}:{}", l.file(), l.line())));
    let group = match grouping {
        Grouping::TaskName => name.map(|n| Cow::Borrowed(n.as_str())).or_else(spawn),
        Grouping::SpawnSite => spawn(),
    };
    if let Some(group) = group {
        return (group, false);
    }
    (
        Cow::Borrowed(call_site_of(root_site).map_or("<unknown>", CallSite::function_static)),
        true,
    )
}

//! Labels: what a sample's frames and group are called in a profile.
//!
//! Site ids become async frames ([`site_frame`], [`resolve_site`]) through
//! [`crate::read::sites`], and a task's name, spawn location or root site
//! becomes its group ([`group_of`], see [`Grouping`]); the roots of one
//! tokio task take theirs from the first root that has each ([`Sources`],
//! see [`crate::sampler::tokio_tasks`]). The wall-clock tick, its caches
//! and the on-CPU drain all label through here, so a task reads the same
//! whichever path sampled it.

use std::borrow::Cow;
use std::sync::Arc;

use super::Grouping;
use super::profile::FrameRef;
use crate::read::sites::{call_site_of, location_of};
use crate::record::site::CallSite;
use crate::task::record::TaskName;

/// An interned site id as a profile frame (`<unknown>` if it names no
/// site).
pub(crate) fn site_frame(site: u32) -> FrameRef<'static> {
    resolve_site(site).unwrap_or(FrameRef::Async {
        function: "<unknown>",
        file: "",
        line: 0,
        column: 0,
    })
}

/// An interned site id as a profile frame, if it names a site.
pub(crate) fn resolve_site(site: u32) -> Option<FrameRef<'static>> {
    location_of(site).map(|l| FrameRef::Async {
        function: l.function,
        file: l.file,
        line: l.line,
        column: l.column,
    })
}

/// What the labels of the roots of one tokio task come from, gathered
/// root by root in their order ([`add`](Self::add)): the task id and
/// root site of the first, and the first name and spawn location, each
/// with the task id of the root it is of (see
/// [`crate::sampler::tokio_tasks`]).
#[derive(Debug, Default)]
pub(crate) struct Sources {
    pub(crate) first: Option<(u64, u32)>,
    pub(crate) named: Option<(u64, Arc<TaskName>)>,
    pub(crate) located: Option<(u64, &'static CallSite)>,
}

impl Sources {
    /// Takes in the next root: task `id`, at root site `root_site`, with
    /// this name and spawn location.
    pub(crate) fn add(
        &mut self,
        id: u64,
        root_site: u32,
        name: Option<&Arc<TaskName>>,
        location: Option<&'static CallSite>,
    ) {
        self.first.get_or_insert((id, root_site));
        if self.named.is_none()
            && let Some(name) = name
        {
            self.named = Some((id, name.clone()));
        }
        if self.located.is_none() {
            self.located = location.map(|l| (id, l));
        }
    }

    /// The task id the roots are sampled as: the first root's (`0`: no
    /// root yet).
    pub(crate) fn task_id(&self) -> u64 {
        self.first.map_or(0, |(id, _)| id)
    }

    /// The first root's root site.
    pub(crate) fn root_site(&self) -> u32 {
        self.first.map_or(0, |(_, site)| site)
    }

    /// The name the roots show.
    pub(crate) fn name(&self) -> Option<&TaskName> {
        self.named.as_ref().map(|(_, name)| &**name)
    }

    /// The spawn location the roots show.
    pub(crate) fn location(&self) -> Option<&'static CallSite> {
        self.located.map(|(_, l)| l)
    }

    /// The task ids of the roots the labels come from (`0`: none): the
    /// first, the named one and the located one. Labels found for one
    /// key hold for as long as it does.
    pub(crate) fn key(&self) -> [u64; 3] {
        [
            self.task_id(),
            self.named.as_ref().map_or(0, |(id, _)| *id),
            self.located.map_or(0, |(id, _)| id),
        ]
    }
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

//! **Roots filed under their tokio task** (feature `tokio`).
//!
//! A plain `tokio::spawn(async { tokio::join!(left(), right()) })` with
//! `left` and `right` traced polls two task roots inside one tokio task.
//! Each root keeps a record of its own, and a dump shows them as one entry
//! ([`crate::read::dump`]): its first poll ([`crate::task::root`]) asks
//! tokio which task is being polled (`tokio::task::try_id()`, a read of a
//! thread-local), and files the root under that task's id, in a side
//! table of the registry indexed by record (8 bytes per root; a root
//! outside tokio tasks allocates none of it). The root then takes its
//! task id alone from the registry's counter rather than from its
//! thread's block of ids, so that ids order the roots of one tokio task
//! by their first poll even when the tokio task moved between threads.
//! Nothing more happens on the polls that follow: the cost is paid once
//! per root, on its (already cold) first poll.
//!
//! A root keeps the tokio task of its first poll. Outside a tokio task
//! (a `block_on`, another executor, a plain thread), or without the
//! feature, a root is filed under nothing and stands for a task of its
//! own, as before.

/// A root's tokio task, as the registry files it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TokioTask {
    /// The tokio task id: what `JoinHandle::id()` and
    /// `tokio::task::id()` display.
    pub(crate) id: u64,
    /// The root's place among the roots filed under tokio tasks, in the
    /// order of their first poll: its task id (see
    /// [`registry::next_ordered_id`](crate::task::registry::next_ordered_id)).
    pub(crate) order: u64,
}

/// The id of the tokio task being polled on this thread, if any.
#[cfg(all(feature = "tokio", not(async_stack_loom)))]
pub(crate) fn current() -> Option<u64> {
    ::tokio::task::try_id().map(id_number)
}

/// Without the feature, no root is ever filed under a tokio task.
#[cfg(not(all(feature = "tokio", not(async_stack_loom))))]
#[inline(always)]
pub(crate) fn current() -> Option<u64> {
    None
}

/// The number a tokio task id displays, which tokio does not otherwise
/// hand out: its `Hash` writes that number as one `u64` (it derives `Hash`
/// over a `NonZeroU64`); should that ever change, the number is parsed
/// from its `Display` instead, which tokio documents as the id.
#[cfg(all(feature = "tokio", not(async_stack_loom)))]
pub(crate) fn id_number(id: ::tokio::task::Id) -> u64 {
    use std::hash::{Hash, Hasher};

    /// Keeps the one `u64` hashed into it; anything else spoils it.
    #[derive(Default)]
    struct Capture {
        value: Option<u64>,
        spoiled: bool,
    }
    impl Hasher for Capture {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, _bytes: &[u8]) {
            self.spoiled = true;
        }
        fn write_u64(&mut self, n: u64) {
            self.spoiled |= self.value.replace(n).is_some();
        }
    }

    let mut capture = Capture::default();
    id.hash(&mut capture);
    match capture.value {
        Some(n) if !capture.spoiled => n,
        _ => from_display(id),
    }
}

/// The number `id` displays (tokio writes it in decimal).
#[cfg(all(feature = "tokio", not(async_stack_loom)))]
#[cold]
fn from_display(id: ::tokio::task::Id) -> u64 {
    id.to_string().parse().unwrap_or(0)
}

#[cfg(all(test, feature = "tokio", not(async_stack_loom)))]
mod tests {
    use super::*;

    /// The number is the one tokio displays, on every kind of runtime.
    #[test]
    fn the_id_is_the_number_tokio_displays() {
        assert_eq!(current(), None, "not inside a tokio task");
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let h = ::tokio::spawn(async { current() });
            let shown = h.id().to_string();
            let seen = h.await.unwrap();
            assert_eq!(seen.map(|n| n.to_string()), Some(shown));
        });
        for _ in 0..3 {
            let id = rt.block_on(async { ::tokio::spawn(async {}).id() });
            assert_eq!(id_number(id).to_string(), id.to_string());
            assert_eq!(from_display(id), id_number(id));
        }
    }
}

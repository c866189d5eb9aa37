//! Who waits ([`Waiter`]): the task whose poll polled an acquire future
//! or a `JoinHandle`, and the `.await` that polled it, which the wait
//! lasts at.

use crate::record::site::SiteId;
use crate::task::record::layout::awaited_birth;
use crate::task::record::layout::current_task_and_await;
pub(crate) use crate::task::record::layout::{NOT_AT_AWAIT, awaited_site};
use crate::task::stack::{CopiedFrame, ancestry};

/// Who waits: the task whose poll polled the future (`0`: outside any
/// traced root), and the await site its current frame was at, with that
/// frame's birth (see `task::record::layout::awaited`; `0`: not known,
/// the frame has no slot a reader could see it in, or is a `.traced()`
/// future's, which records no `.await`s; [`NOT_AT_AWAIT`]: the frame
/// polled it between two `.await`s, as `futures::poll!` or
/// `now_or_never()` do, and awaits it nowhere).
///
/// Readers count a wait only while the waiter's task is suspended at
/// that `.await` (see [`crate::waits`]), under the same frames: a future
/// raced in `select!` on `&mut future` and kept after another branch won
/// waits no more once its task went on elsewhere, and neither does a
/// traced fn kept that way, whose own frame stays at its `.await` while
/// its caller is at another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) task: u64,
    pub(crate) awaiting: u64,
    /// The ancestry of the frame `awaiting` names (see [`ancestry`]);
    /// `0`: not known (then only that frame is checked).
    pub(crate) path: u64,
}

impl Waiter {
    /// Who polls now: the running task, and the `.await` its current frame
    /// is at.
    #[inline]
    // Its callers are the waits of feature `tokio`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn now() -> Waiter {
        let (task, awaiting, path) = current_task_and_await();
        Waiter {
            task,
            awaiting,
            path,
        }
    }

    /// `task`, at no known `.await`.
    #[cfg(test)]
    pub(crate) const fn of(task: u64) -> Waiter {
        Waiter {
            task,
            awaiting: 0,
            path: 0,
        }
    }
}

/// Whether the frame that `awaiting` names (a known [`Waiter::awaiting`],
/// not `0`) is among `frames`, a root's shown frames, still suspended at
/// the `.await` it names, and (with a known `path`, its ancestry) under the
/// frames it was under, each where it was: another frame at the same
/// `.await` (a generic helper called again, a recursion) is not it, and a
/// frame whose caller went on to another `.await` is awaited by nobody.
pub(crate) fn suspended_in(awaiting: u64, path: u64, frames: &[CopiedFrame]) -> bool {
    let at = SiteId::at_await(awaited_site(awaiting)).raw();
    let birth = awaited_birth(awaiting);
    frames.iter().enumerate().any(|(i, f)| {
        !f.innermost
            && f.site == at
            && f.birth == birth
            && (path == 0 || ancestry_in(frames, i) == path)
    })
}

/// The ancestry of `frames[i]` in a pre-order copy: its parent is the
/// nearest frame before it one level up, and so on to the root.
fn ancestry_in(frames: &[CopiedFrame], i: usize) -> u64 {
    let mut digest = ancestry::START;
    let mut depth = frames[i].depth;
    for f in frames[..i].iter().rev() {
        if depth == 0 {
            break;
        }
        if f.depth + 1 == depth {
            digest = ancestry::step(digest, f.site, f.birth);
            depth = f.depth;
        }
    }
    ancestry::done(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::record::layout::awaited;

    fn frame(depth: u32, site: u32, birth: u32) -> CopiedFrame {
        CopiedFrame {
            depth,
            site,
            birth,
            running: false,
            innermost: false,
        }
    }

    /// A frame's ancestry is its parent's and up, each the nearest frame
    /// before it one level up, past siblings and their subtrees.
    #[test]
    fn the_ancestry_of_a_copied_frame_folds_its_ancestors_only() {
        let at = |id: u32| SiteId::at_await(id).raw();
        // root(1) -> a(2) -> [b(3) -> c(4)], d(5) -> e(6)
        let frames = [
            frame(0, at(10), 1),
            frame(1, at(20), 2),
            frame(2, at(30), 3),
            frame(3, at(40), 4),
            frame(2, at(50), 5),
            frame(3, at(60), 6),
        ];
        let of = |chain: &[usize]| {
            ancestry::done(chain.iter().fold(ancestry::START, |h, &i| {
                ancestry::step(h, frames[i].site, frames[i].birth)
            }))
        };
        assert_eq!(ancestry_in(&frames, 5), of(&[4, 1, 0]));
        assert_eq!(ancestry_in(&frames, 3), of(&[2, 1, 0]));
        assert_eq!(ancestry_in(&frames, 0), of(&[]));
        assert_ne!(ancestry_in(&frames, 5), ancestry_in(&frames, 3));

        let e = awaited(60, 6);
        assert!(suspended_in(e, 0, &frames), "no ancestry known");
        assert!(suspended_in(e, of(&[4, 1, 0]), &frames));
        assert!(!suspended_in(e, of(&[2, 1, 0]), &frames), "another caller");
        // `d` went on to another `.await`: `e` is kept, not awaited.
        let mut moved = frames;
        moved[4].site = at(51);
        assert!(!suspended_in(e, of(&[4, 1, 0]), &moved));
        assert!(suspended_in(e, 0, &moved));
    }
}

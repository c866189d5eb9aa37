//! `#[traced_async]` on an impl block, compared with the same methods
//! annotated one by one: each method of the block is a frame with the same
//! name (`module::Type::method`, `<Type as Trait>::method`), suspended at the
//! same `.await` (line and column), in a backtrace and in a dump.
//!
//! `Block` and `OneByOne` have the same methods, line for line (a comment
//! stands where `OneByOne` has an attribute); each impl records its first
//! line in an associated const (which also shows that the block attribute
//! leaves consts alone), so that a frame of one is compared with the frame
//! of the other at the same offset.

mod common;

use async_stack::{Backtrace, traced_async};
use tokio::sync::oneshot;

use common::{Seen, async_frames, awaiting, running};

struct Block;

#[traced_async]
impl Block {
    const FIRST_LINE: u32 = line!();

    // (no attribute here)
    async fn outer(&self) -> (Backtrace, u32, u32) {
        let ((bt, inner_line), line) = (self.inner().await, line!());
        (bt, inner_line, line)
    }

    // (no attribute here)
    async fn inner(&self) -> (Backtrace, u32) {
        common::yield_once().await;
        let (bt, line) = (async_stack::backtrace(), line!());
        (bt, line)
    }
}

struct OneByOne;

impl OneByOne {
    const FIRST_LINE: u32 = line!();

    #[traced_async]
    async fn outer(&self) -> (Backtrace, u32, u32) {
        let ((bt, inner_line), line) = (self.inner().await, line!());
        (bt, inner_line, line)
    }

    #[traced_async]
    async fn inner(&self) -> (Backtrace, u32) {
        common::yield_once().await;
        let (bt, line) = (async_stack::backtrace(), line!());
        (bt, line)
    }
}

trait Service {
    async fn call(&self) -> (Backtrace, u32, u32);
    async fn serve(&self, rx: oneshot::Receiver<()>);
    async fn wait(&self, rx: oneshot::Receiver<()>);
}

#[traced_async]
impl Service for Block {
    async fn call(&self) -> (Backtrace, u32, u32) {
        let ((bt, inner_line), line) = (self.inner().await, line!());
        (bt, inner_line, line)
    }

    async fn serve(&self, rx: oneshot::Receiver<()>) {
        self.wait(rx).await;
    }

    async fn wait(&self, rx: oneshot::Receiver<()>) {
        let _ = rx.await;
    }
}

/// `(function, line relative to the impl's first line, column, running)`
/// of the async frames of `bt`, with `ty` in function names written `Type`.
fn relative(bt: &Backtrace, ty: &str, first_line: u32) -> Vec<(String, u32, u32, bool)> {
    bt.async_frames()
        .map(|frame| {
            (
                frame.function().unwrap_or("<none>").replace(ty, "Type"),
                frame.line().unwrap_or(0) - first_line,
                frame.column().unwrap_or(0),
                frame.is_running(),
            )
        })
        .collect()
}

#[test]
fn methods_of_an_annotated_block_are_named_and_suspended_at_their_awaits() {
    let ((bt, inner_line, outer_line), _) = common::block_on(Block.outer());
    assert_eq!(
        async_frames(&bt),
        [
            running("macro_impl_block::Block::inner", file!(), inner_line),
            awaiting("macro_impl_block::Block::outer", file!(), outer_line),
        ],
        "{bt}"
    );
    assert_eq!(bt.async_depth(), 2, "{bt}");
}

#[test]
fn a_block_annotated_once_shows_what_methods_annotated_one_by_one_show() {
    let ((one_by_one, inner_line, outer_line), _) = common::block_on(OneByOne.outer());
    let expected: Vec<Seen> = vec![
        running("macro_impl_block::OneByOne::inner", file!(), inner_line),
        awaiting("macro_impl_block::OneByOne::outer", file!(), outer_line),
    ];
    assert_eq!(async_frames(&one_by_one), expected, "{one_by_one}");
    let ((block, _, _), _) = common::block_on(Block.outer());
    assert_eq!(
        relative(&block, "Block", Block::FIRST_LINE),
        relative(&one_by_one, "OneByOne", OneByOne::FIRST_LINE),
        "annotated once:\n{block}\nannotated one by one:\n{one_by_one}"
    );
}

#[test]
fn methods_of_an_annotated_trait_impl_are_named_as_trait_methods() {
    let ((bt, inner_line, call_line), _) = common::block_on(Block.call());
    assert_eq!(
        async_frames(&bt),
        [
            running("macro_impl_block::Block::inner", file!(), inner_line),
            awaiting(
                "<macro_impl_block::Block as macro_impl_block::Service>::call",
                file!(),
                call_line
            ),
        ],
        "{bt}"
    );
}

#[tokio::test]
async fn a_dump_names_each_method_of_an_annotated_block() {
    let (tx, rx) = oneshot::channel();
    let task = async_stack::tokio::spawn_named("impl-block-methods", async move {
        Block.serve(rx).await;
    });
    tokio::task::yield_now().await;
    let dump = async_stack::dump().with_name_containing("impl-block-methods");
    assert_eq!(dump.tasks.len(), 1, "{dump}");
    let frames: Vec<(u32, &str)> = dump.tasks[0]
        .frames
        .iter()
        .map(|frame| (frame.depth, &*frame.function))
        .collect();
    assert_eq!(
        frames,
        [
            (
                0,
                "<macro_impl_block::Block as macro_impl_block::Service>::serve"
            ),
            (
                1,
                "<macro_impl_block::Block as macro_impl_block::Service>::wait"
            ),
        ],
        "{dump}"
    );
    tx.send(()).unwrap();
    task.await.unwrap();
}

// `#[traced_async]` on an inherent impl block, plain and generic: every
// `async fn` inside is a frame named as with the attribute on it, and the
// other items (consts, types, plain fns, macro invocations) are untouched.
#![deny(warnings)]

use async_stack::traced_async;

#[path = "common/frames.rs"]
mod frames;

use frames::{frames, here};

macro_rules! async_method {
    ($name:ident) => {
        async fn $name(&self) -> Vec<String> {
            frames()
        }
    };
}

struct Fetcher {
    base: u32,
}

#[traced_async]
impl Fetcher {
    const STEP: u32 = 2;

    fn new() -> Self {
        Fetcher { base: 40 }
    }

    fn sync_frames(&self) -> Vec<String> {
        frames()
    }

    async fn fetch(&self) -> (u32, Vec<String>) {
        self.add(Self::STEP).await
    }

    async fn add(&self, step: u32) -> (u32, Vec<String>) {
        (self.base + step, frames())
    }

    pub(crate) async fn associated() -> Vec<String> {
        frames()
    }

    // What a macro invocation expands to is out of sight: not instrumented.
    async_method!(from_macro);
}

// A macro invocation that expands to nothing: the block attribute leaves
// invocations where they are.
macro_rules! nothing {
    () => {};
}

struct Wrapper<T>(T);

#[traced_async]
impl<T> Wrapper<T>
where
    T: Copy + Into<u32>,
{
    nothing!();

    async fn get(&self) -> (u32, Vec<String>) {
        (self.0.into(), frames())
    }
}

fn main() {
    let fetcher = Fetcher::new();
    assert_eq!(fetcher.sync_frames(), Vec::<String>::new());
    futures::executor::block_on(async {
        assert_eq!(
            fetcher.fetch().await,
            (42, vec![here("Fetcher::add"), here("Fetcher::fetch")])
        );
        assert_eq!(Fetcher::associated().await, [here("Fetcher::associated")]);
        assert_eq!(fetcher.from_macro().await, Vec::<String>::new());
        assert_eq!(Wrapper(7u8).get().await, (7, vec![here("Wrapper<_>::get")]));
    });
}

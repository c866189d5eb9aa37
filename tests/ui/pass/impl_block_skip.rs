// Inside a `#[traced_async]` block: `#[traced_async(skip)]` leaves a fn
// alone, and a fn that already carries `#[traced_async]`, with or without
// arguments, is instrumented once, with its own arguments. `skip` on a fn
// outside any block does nothing.
#![deny(warnings)]

use async_stack::traced_async;

#[path = "common/frames.rs"]
mod frames;

use frames::{frames, here};

struct Cache;

#[traced_async]
impl Cache {
    #[traced_async(skip)]
    async fn hot(&self) -> Vec<String> {
        frames()
    }

    #[traced_async]
    async fn annotated(&self) -> Vec<String> {
        frames()
    }

    #[traced_async(name = "cache::named")]
    async fn named(&self) -> Vec<String> {
        frames()
    }

    /// Docs and lint attributes stay below the attribute.
    #[allow(clippy::unused_async)]
    async fn documented(&self) -> Vec<String> {
        self.hot().await
    }
}

#[traced_async(skip)]
async fn lone() -> Vec<String> {
    frames()
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(Cache.hot().await, Vec::<String>::new());
        assert_eq!(Cache.annotated().await, [here("Cache::annotated")]);
        assert_eq!(Cache.named().await, ["cache::named"]);
        assert_eq!(Cache.documented().await, [here("Cache::documented")]);
        assert_eq!(lone().await, Vec::<String>::new());
    });
}

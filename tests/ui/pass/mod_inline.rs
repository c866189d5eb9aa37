// `#[traced_async]` on an inline `mod`: every `async fn` in it, in its
// impl blocks (inherent and trait impls) and in its nested inline mods, is a
// frame named as with the attribute on it; `skip` on a nested block leaves
// the whole block alone.
#![deny(warnings)]

use async_stack::traced_async;

#[path = "common/frames.rs"]
mod frames;

use frames::{frames, here};

#[allow(async_fn_in_trait)]
pub trait Named {
    async fn name(&self) -> Vec<String>;
}

#[traced_async]
mod service {
    use super::{Named, frames};

    pub const PORT: u16 = 8080;

    pub struct Handler;

    pub fn sync_frames() -> Vec<String> {
        frames()
    }

    pub async fn serve() -> Vec<String> {
        Handler.handle().await
    }

    impl Handler {
        pub async fn handle(&self) -> Vec<String> {
            storage::read().await
        }
    }

    impl Named for Handler {
        async fn name(&self) -> Vec<String> {
            frames()
        }
    }

    pub mod storage {
        pub async fn read() -> Vec<String> {
            super::frames()
        }
    }

    #[traced_async(skip)]
    pub mod hot {
        pub async fn untraced() -> Vec<String> {
            super::frames()
        }
    }
}

fn main() {
    assert_eq!(service::PORT, 8080);
    assert_eq!(service::sync_frames(), Vec::<String>::new());
    futures::executor::block_on(async {
        assert_eq!(
            service::serve().await,
            [
                here("service::storage::read"),
                here("service::Handler::handle"),
                here("service::serve"),
            ]
        );
        let krate = module_path!();
        assert_eq!(
            service::Handler.name().await,
            [format!(
                "<{krate}::service::Handler as {krate}::Named>::name"
            )]
        );
        assert_eq!(service::hot::untraced().await, Vec::<String>::new());
    });
}

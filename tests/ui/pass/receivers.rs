// Every receiver: self, &self, &mut self, self: Pin<&mut Self>, Box and Arc.
#![deny(warnings)]

use std::pin::Pin;
use std::sync::Arc;

use async_stack::traced_async;

#[derive(Clone)]
struct Counter {
    n: u32,
}

impl Counter {
    #[traced_async]
    async fn by_value(self) -> u32 {
        self.n
    }

    #[traced_async]
    async fn by_ref(&self) -> u32 {
        self.n
    }

    #[traced_async]
    async fn by_mut(&mut self) -> u32 {
        self.n += 1;
        self.n
    }

    #[traced_async]
    async fn pinned(self: Pin<&mut Self>) -> u32 {
        self.get_mut().n
    }

    #[traced_async]
    async fn boxed(self: Box<Self>) -> u32 {
        self.n
    }

    #[traced_async]
    async fn arced(self: Arc<Self>) -> u32 {
        self.n
    }

    #[traced_async]
    async fn calls_self(&self) -> u32 {
        self.by_ref().await + Self::associated().await
    }

    #[traced_async]
    async fn associated() -> u32 {
        100
    }
}

fn main() {
    futures::executor::block_on(async {
        let mut c = Counter { n: 1 };
        assert_eq!(c.by_ref().await, 1);
        assert_eq!(c.by_mut().await, 2);
        assert_eq!(Pin::new(&mut c).pinned().await, 2);
        assert_eq!(Box::new(c.clone()).boxed().await, 2);
        assert_eq!(Arc::new(c.clone()).arced().await, 2);
        assert_eq!(c.calls_self().await, 102);
        assert_eq!(c.by_value().await, 2);
    });
}

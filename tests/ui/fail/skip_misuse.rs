// `skip` is alone and takes no value; a fn's own attribute reports it,
// inside a block as outside, and nothing else is reported.
use async_stack::traced_async;

struct Cache;

#[traced_async]
impl Cache {
    #[traced_async(skip, name = "hot")]
    async fn hot(&self) {}

    #[traced_async(skip = true)]
    async fn cold(&self) {}
}

#[traced_async(name = "lone", skip)]
async fn lone() {}

fn main() {
    let _ = (Cache.hot(), Cache.cold(), lone());
}

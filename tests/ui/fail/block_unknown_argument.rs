use async_stack::traced_async;

#[traced_async(all)]
mod service {
    pub async fn serve() {}
}

fn main() {
    let _ = service::serve();
}

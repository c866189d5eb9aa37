// A file module: the attribute gets `mod mod_file_items;`, not the items.
use async_stack::traced_async;

#[traced_async]
mod mod_file_items;

fn main() {
    let _ = mod_file_items::fetch();
}

//! What a streamed dump, text or JSON, allocates does not grow with the
//! number of tasks: the same bytes for 200 and for 2,000 tasks, and less
//! than a fixed bound.
//!
//! A test binary of its own, with one test, because it replaces the global
//! allocator with one that counts the bytes each thread allocates, and
//! compares two dumps that must see the same site tables (a test running
//! beside it could intern new sites in between).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use async_stack::traced_async;

/// [`System`], counting the bytes this thread asks for.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: nothing to count into while the thread is being torn down.
    let _ = ALLOCATED.try_with(|a| a.set(a.get() + bytes as u64));
}

// SAFETY: every call goes to `System` unchanged; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's obligations are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout` (every allocation
        // of this allocator does).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as for `dealloc`, and `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes this thread allocates while running `f`.
fn allocated_by(f: impl FnOnce()) -> u64 {
    let before = ALLOCATED.with(Cell::get);
    f();
    ALLOCATED.with(Cell::get) - before
}

#[traced_async]
async fn leaf() {
    std::future::pending::<()>().await;
}

#[traced_async]
async fn middle() {
    leaf().await;
}

#[traced_async]
async fn root() {
    middle().await;
}

/// `n` more suspended tasks, each three frames deep.
fn park(tasks: &mut Vec<Pin<Box<dyn Future<Output = ()>>>>, n: usize) {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        let mut task: Pin<Box<dyn Future<Output = ()>>> = Box::pin(root());
        assert!(task.as_mut().poll(&mut cx).is_pending());
        tasks.push(task);
    }
}

/// A streaming dump: `write_text` or `write_json`.
type Write = fn(std::io::Sink) -> std::io::Result<async_stack::dump::DumpSummary>;

/// Streams every live task to a sink with `write`; returns the bytes
/// allocated and the tasks written.
fn stream(write: Write) -> (u64, usize) {
    let mut tasks = 0;
    let bytes = allocated_by(|| {
        tasks = write(std::io::sink()).unwrap().tasks;
    });
    (bytes, tasks)
}

#[test]
fn a_streamed_dump_allocates_the_same_for_200_and_2000_tasks() {
    let forms: [(&str, Write); 2] = [
        ("write_text", |out| async_stack::dump::write_text(out)),
        ("write_json", |out| async_stack::dump::write_json(out)),
    ];
    let mut tasks = Vec::new();
    park(&mut tasks, 200);
    let mut few = Vec::new();
    for (name, write) in forms {
        // Interns the sites and starts what starts once per process.
        let _ = stream(write);
        let (bytes, written) = stream(write);
        assert_eq!(written, 200, "{name}");
        few.push(bytes);
    }
    park(&mut tasks, 1_800);
    for ((name, write), few) in forms.into_iter().zip(few) {
        let (many, written) = stream(write);
        assert_eq!(written, 2_000, "{name}");
        assert_eq!(
            few, many,
            "{name}: bytes allocated for 200 and for 2,000 tasks"
        );
        // The buffer (40 KB), the renderer's caches, one task: well under
        // what 2,000 tasks' text alone would take (about 600 KB of text,
        // 1.2 MB of JSON).
        assert!(many < 128 * 1024, "{name}: {many} bytes");
    }
    // The whole dump, for scale: it grows with the tasks.
    let (many, _) = stream(forms[0].1);
    let whole = allocated_by(|| drop(async_stack::dump().to_string()));
    assert!(whole > 10 * many, "dump().to_string(): {whole} bytes");
    let (many, _) = stream(forms[1].1);
    let whole = allocated_by(|| drop(async_stack::dump().to_json()));
    assert!(whole > 10 * many, "dump().to_json(): {whole} bytes");
}

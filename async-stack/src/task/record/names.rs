//! **Names and extensions**: what few tasks have beyond their record (a
//! name given through a spawn helper, a fallback waker, the tokio task it
//! is filed under), kept in an extension beside the record.

use std::sync::Arc;

use crate::shim::AtomicPtr;

/// What few tasks have beyond their record: a name given through a spawn
/// helper, and a second waker for a root whose executor changed its waker
/// (the tokio task a root is filed under has a side table of its own, see
/// [`crate::task::tokio_task`]). Extension `i` belongs to record `i`;
/// extensions live in pages
/// beside the records' (see [`crate::task::registry`]), allocated the first
/// time a task of that page needs one and never freed. Readers validate
/// what they read against the record's `id`. `#[repr(C)]` for debugger
/// scripts.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct TaskExt {
    /// The task's name, while the record's `spawn` word says `named`.
    pub(crate) name: NameCell,
    /// The waker of a root whose executor's waker changed (see
    /// [`crate::task::waker`]); owned, released when the task ends.
    pub(crate) fallback: AtomicPtr<()>,
}

/// A task's name, laid out for debugger scripts: the text's address and
/// length first (`#[repr(C)]`), then the string that owns the text.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct TaskName {
    ptr: *const u8,
    len: usize,
    text: Box<str>,
}

// SAFETY: `ptr` and `len` describe `text`, which the name owns and never
// changes; they are only read.
unsafe impl Send for TaskName {}
// SAFETY: as above.
unsafe impl Sync for TaskName {}

impl TaskName {
    /// Where a debugger finds the text's address and length.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const PTR_OFFSET: usize = std::mem::offset_of!(TaskName, ptr);
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) const LEN_OFFSET: usize = std::mem::offset_of!(TaskName, len);

    pub(crate) fn new(text: String) -> Self {
        let text = text.into_boxed_str();
        TaskName {
            ptr: text.as_ptr(),
            len: text.len(),
            text,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

/// A task name that readers load without taking a lock.
#[cfg(not(async_stack_loom))]
#[derive(Debug, Default)]
pub(crate) struct NameCell(arc_swap::ArcSwapOption<TaskName>);

#[cfg(not(async_stack_loom))]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<TaskName>>) {
        self.0.store(name);
    }
    pub(crate) fn load(&self) -> Option<Arc<TaskName>> {
        self.0.load_full()
    }
}

/// Under loom, a mutex stands in for `arc-swap` (which loom cannot model).
#[cfg(async_stack_loom)]
#[derive(Debug, Default)]
pub(crate) struct NameCell(crate::shim::Mutex<Option<Arc<TaskName>>>);

#[cfg(async_stack_loom)]
impl NameCell {
    pub(crate) fn store(&self, name: Option<Arc<TaskName>>) {
        *crate::shim::lock(&self.0) = name;
    }
    pub(crate) fn load(&self) -> Option<Arc<TaskName>> {
        crate::shim::lock(&self.0).clone()
    }
}

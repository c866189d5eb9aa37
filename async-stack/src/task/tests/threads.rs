//! The thread-root list ([`crate::record::threads`]) as task polls fill
//! it.

use crate::record::threads::{is_registered, registered, thread_id};
use crate::task::traced::TracedExt;

/// A thread that polls a task root is listed with its OS id and the
/// address of its state; once it exits, it is no longer listed.
#[test]
fn a_polling_thread_is_listed_until_it_exits() {
    let (tid, active) = std::thread::spawn(|| {
        futures::executor::block_on(async {}.traced_named("thread-root-test"));
        let tid = thread_id(crate::record::current::current());
        let active = std::ptr::from_ref(crate::record::current::current());
        assert!(is_registered());
        assert!(registered().contains(&(tid, active)));
        (tid, active as usize)
    })
    .join()
    .unwrap();
    assert_ne!(tid, 0);
    assert!(
        !registered()
            .iter()
            .any(|&(t, a)| t == tid && a as usize == active),
        "the exited thread is no longer listed"
    );
}

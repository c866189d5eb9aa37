//! How `.traced()` futures are named: an explicit name is used as is; an
//! unnamed one is shown in backtraces by its body's debug-info name when
//! debug info has its path, and otherwise (inlined bodies in line-tables-only
//! builds, and dumps, which read no debug info) by its location.

use async_stack::{FrameKind, TracedExt};

fn async_names(bt: &async_stack::Backtrace) -> Vec<String> {
    bt.frames()
        .iter()
        .filter(|f| f.kind() == FrameKind::Async)
        .map(|f| f.function().unwrap_or("<none>").to_string())
        .collect()
}

#[test]
fn unnamed_traced_futures_take_their_body_name_named_ones_their_name() {
    let body = async {
        let id = async_stack::current_task_id().unwrap();
        let d = async_stack::dump();
        let task = d.task(id).unwrap();
        // An unnamed `.traced()` root gives its task no name.
        assert_eq!(task.name, None);
        let root = task.frames[0].function.to_string();
        let inner = async { async_stack::backtrace() }.traced_named("inner");
        (inner.await, root)
    };
    // The location of this `.traced()` call names the unnamed root.
    let (root, line) = (body.traced(), line!());
    let (bt, dumped) = futures::executor::block_on(root);
    let names = async_names(&bt);
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "inner");
    let location = format!("<future at {}:{line}:30>", file!());
    if cfg!(debug_assertions) {
        assert_eq!(
            names[1],
            "walker_traced_ext::unnamed_traced_futures_take_their_body_name_named_ones_their_name::{{closure}}"
        );
    } else {
        // Inlined into its caller, the body has only a short name
        // (`{async_block#0}`) in line tables: the location names it.
        assert_eq!(names[1], location);
    }
    assert_eq!(dumped, location);
}

#[test]
fn a_named_traced_root_names_its_task() {
    let root = async {
        let id = async_stack::current_task_id().unwrap();
        async_stack::dump().task(id).unwrap().name.clone()
    }
    .traced_named("named-root");
    assert_eq!(
        futures::executor::block_on(root).as_deref(),
        Some("named-root")
    );
}

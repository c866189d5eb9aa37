//! The tree a dump shows for a task holds every live frame of the task,
//! whether or not its last poll reached it, and loses a frame as soon as
//! the frame belongs elsewhere.

use async_stack::{TaskDump, TaskInfo, traced_async};
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};
use futures::future::{FutureExt, Shared};
use futures::stream::FuturesUnordered;
use futures::task::LocalSpawnExt;

/// A task's frames as `(depth, function)`, in the order the dump lists them.
fn tree(task: &TaskInfo) -> Vec<(u32, &str)> {
    task.frames
        .iter()
        .map(|f| (f.depth, &*f.function))
        .collect()
}

/// The one live task named `name`.
fn task(d: &TaskDump, name: &str) -> TaskInfo {
    let found: Vec<&TaskInfo> = d
        .tasks
        .iter()
        .filter(|t| t.name.as_deref() == Some(name))
        .collect();
    assert_eq!(found.len(), 1, "{d}");
    found[0].clone()
}

// --- FuturesUnordered ---------------------------------------------------

/// Waits for messages until its sender goes away.
#[traced_async]
async fn member(mut rx: mpsc::UnboundedReceiver<()>) {
    while rx.next().await.is_some() {}
}

#[traced_async]
async fn unordered(receivers: Vec<mpsc::UnboundedReceiver<()>>) {
    let mut set: FuturesUnordered<_> = receivers.into_iter().map(member).collect();
    while set.next().await.is_some() {}
}

#[traced_async(name = "unordered-root")]
async fn unordered_root(receivers: Vec<mpsc::UnboundedReceiver<()>>) {
    unordered(receivers).await
}

/// `FuturesUnordered` polls only the children that were woken. The ones it
/// skipped are still pending, and the dump still shows them, in the order
/// they were first polled.
#[test]
fn children_not_polled_in_the_last_poll_stay_in_the_tree() {
    let mut pool = futures::executor::LocalPool::new();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..3).map(|_| mpsc::unbounded()).unzip();
    pool.spawner()
        .spawn_local(unordered_root(receivers))
        .unwrap();
    pool.run_until_stalled();
    let expected = [
        (0, "unordered-root"),
        (1, "dump_tree::unordered"),
        (2, "dump_tree::member"),
        (2, "dump_tree::member"),
        (2, "dump_tree::member"),
    ];
    let first = task(&async_stack::dump(), "unordered-root");
    assert_eq!(tree(&first), expected);

    // Wake the middle child only: the next poll reaches it alone.
    senders[1].unbounded_send(()).unwrap();
    pool.run_until_stalled();
    let second = task(&async_stack::dump(), "unordered-root");
    assert_eq!(second.polls, first.polls + 1);
    assert_eq!(tree(&second), expected);
    let member_line = second.frames[2].awaiting_at.as_ref().unwrap().line;
    for f in &second.frames[2..] {
        assert_eq!(f.awaiting_at.as_ref().unwrap().line, member_line);
    }

    // A child that completes leaves the tree; the others stay.
    let mut senders = senders;
    drop(senders.remove(0));
    pool.run_until_stalled();
    let third = task(&async_stack::dump(), "unordered-root");
    assert_eq!(tree(&third), expected[..4]);
    drop(senders);
    pool.run();
    let d = async_stack::dump();
    assert!(
        d.tasks
            .iter()
            .all(|t| t.name.as_deref() != Some("unordered-root"))
    );
}

// --- A frame that moves to another task ---------------------------------

#[traced_async]
async fn shared_wait(rx: oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[traced_async]
async fn wait_forever(rx: oneshot::Receiver<()>) {
    let _ = rx.await;
}

type SharedWait = Shared<futures::future::BoxFuture<'static, ()>>;

#[traced_async(name = "first-holder")]
async fn first_holder(
    shared: SharedWait,
    poke: oneshot::Receiver<()>,
    rest: oneshot::Receiver<()>,
) {
    // `poke` is polled first: once it fires, `shared` is dropped unpolled.
    futures::future::select(poke, shared).await;
    wait_forever(rest).await;
}

#[traced_async(name = "second-holder")]
async fn second_holder(shared: SharedWait) {
    shared.await;
}

/// A `Shared` future's frame belongs to the task that polled it last. When
/// another task polls it, it leaves the first task's tree at once, before
/// the first task polls again, and never shows up there again.
#[test]
fn a_frame_polled_by_another_task_leaves_the_first_at_once() {
    let mut pool = futures::executor::LocalPool::new();
    let (done_tx, done_rx) = oneshot::channel();
    let shared: SharedWait = shared_wait(done_rx).boxed().shared();
    let (poke_tx, poke_rx) = oneshot::channel();
    let (rest_tx, rest_rx) = oneshot::channel();
    pool.spawner()
        .spawn_local(first_holder(shared.clone(), poke_rx, rest_rx))
        .unwrap();
    pool.run_until_stalled();
    let d = async_stack::dump();
    assert_eq!(
        tree(&task(&d, "first-holder")),
        [(0, "first-holder"), (1, "dump_tree::shared_wait")]
    );

    pool.spawner()
        .spawn_local(second_holder(shared.clone()))
        .unwrap();
    pool.run_until_stalled();
    let d = async_stack::dump();
    assert_eq!(
        tree(&task(&d, "second-holder")),
        [(0, "second-holder"), (1, "dump_tree::shared_wait")]
    );
    assert_eq!(tree(&task(&d, "first-holder")), [(0, "first-holder")]);

    poke_tx.send(()).unwrap();
    pool.run_until_stalled();
    let d = async_stack::dump();
    assert_eq!(
        tree(&task(&d, "first-holder")),
        [(0, "first-holder"), (1, "dump_tree::wait_forever")]
    );
    assert_eq!(
        tree(&task(&d, "second-holder")),
        [(0, "second-holder"), (1, "dump_tree::shared_wait")]
    );

    done_tx.send(()).unwrap();
    rest_tx.send(()).unwrap();
    pool.run();
    drop(shared);
    let d = async_stack::dump();
    assert!(
        !d.tasks
            .iter()
            .any(|t| t.name.as_deref().is_some_and(|n| n.ends_with("-holder"))),
        "{d}"
    );
}

// --- More live frames than a published stack holds -----------------------

#[traced_async(name = "wide-root")]
async fn wide_root(receivers: Vec<mpsc::UnboundedReceiver<()>>) {
    unordered(receivers).await
}

/// A task with more live frames than [`async_stack::task::STACK_CAPACITY`] shows
/// the first ones and counts the rest; as frames end, the count follows.
#[test]
fn frames_beyond_the_capacity_are_counted_not_shown() {
    let cap = async_stack::task::STACK_CAPACITY;
    let mut pool = futures::executor::LocalPool::new();
    let members = cap + 10;
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..members).map(|_| mpsc::unbounded()).unzip();
    pool.spawner().spawn_local(wide_root(receivers)).unwrap();
    pool.run_until_stalled();
    let t = task(&async_stack::dump(), "wide-root");
    // The root and `unordered` hold two slots; the members fill the rest.
    assert_eq!(t.frames.len(), cap);
    assert_eq!(t.hidden_frames as usize, members + 2 - cap);
    assert!(
        t.frames[2..]
            .iter()
            .all(|f| f.function == "dump_tree::member")
    );

    // Members end, shown or not (`FuturesUnordered` decides the order of
    // first polls, hence which ones got a slot): shown plus counted is
    // always the number of live frames. A hidden frame stays hidden.
    let mut senders = senders;
    for live in [members - 10, 5] {
        senders.truncate(live);
        pool.run_until_stalled();
        let t = task(&async_stack::dump(), "wide-root");
        assert_eq!(
            t.frames.len() + t.hidden_frames as usize,
            live + 2,
            "{live}"
        );
        assert!(t.frames.len() <= cap);
    }
    drop(senders);
    pool.run();
}

// --- A frame dropped on another thread ----------------------------------

/// Polls a boxed traced future once inside the task, then hands it out.
#[traced_async(name = "lender")]
async fn lender(
    out: std::sync::mpsc::Sender<futures::future::BoxFuture<'static, ()>>,
    rest: oneshot::Receiver<()>,
    wake: oneshot::Receiver<()>,
) {
    let (_tx, rx) = oneshot::channel::<()>();
    let mut lent = shared_wait(rx).boxed();
    assert!(futures::poll!(&mut lent).is_pending());
    out.send(lent).unwrap();
    let _ = wake.await;
    wait_forever(rest).await;
}

/// A frame its task polled, then dropped on another thread, leaves the
/// task's tree at once.
#[test]
fn a_frame_dropped_on_another_thread_leaves_its_task_at_once() {
    let mut pool = futures::executor::LocalPool::new();
    let (out_tx, out_rx) = std::sync::mpsc::channel();
    let (rest_tx, rest_rx) = oneshot::channel();
    let (wake_tx, wake_rx) = oneshot::channel();
    pool.spawner()
        .spawn_local(lender(out_tx, rest_rx, wake_rx))
        .unwrap();
    pool.run_until_stalled();
    let lent = out_rx.recv().unwrap();
    assert_eq!(
        tree(&task(&async_stack::dump(), "lender")),
        [(0, "lender"), (1, "dump_tree::shared_wait")]
    );
    std::thread::spawn(move || drop(lent)).join().unwrap();
    assert_eq!(tree(&task(&async_stack::dump(), "lender")), [(0, "lender")]);
    wake_tx.send(()).unwrap();
    pool.run_until_stalled();
    assert_eq!(
        tree(&task(&async_stack::dump(), "lender")),
        [(0, "lender"), (1, "dump_tree::wait_forever")]
    );
    rest_tx.send(()).unwrap();
    pool.run();
}

// --- A frame awaited by a younger parent --------------------------------

#[traced_async]
async fn adopted(rx: oneshot::Receiver<()>) {
    let _ = rx.await;
}

type Adopted = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// Polls `child` once, then returns without awaiting it to the end.
#[traced_async]
async fn first_poller(child: &mut Adopted) {
    assert!(futures::poll!(child.as_mut()).is_pending());
}

/// Awaits `child`: a parent younger than the child (created after it).
#[traced_async]
async fn second_awaiter(child: Adopted) {
    child.await
}

#[traced_async(name = "adoption")]
async fn adoption(rx: oneshot::Receiver<()>) {
    let mut child: Adopted = Box::pin(adopted(rx));
    first_poller(&mut child).await;
    second_awaiter(child).await;
}

/// A frame first polled under one parent and then awaited by a second,
/// younger one is shown under the second: the frame that awaits it now.
#[test]
fn a_frame_awaited_by_a_younger_parent_shows_under_it() {
    let mut pool = futures::executor::LocalPool::new();
    let (tx, rx) = oneshot::channel();
    pool.spawner().spawn_local(adoption(rx)).unwrap();
    pool.run_until_stalled();
    assert_eq!(
        tree(&task(&async_stack::dump(), "adoption")),
        [
            (0, "adoption"),
            (1, "dump_tree::second_awaiter"),
            (2, "dump_tree::adopted"),
        ]
    );
    tx.send(()).unwrap();
    pool.run();
}

// --- A root that a task awaits later --------------------------------------

#[traced_async(name = "adopter")]
async fn adopter(child: Adopted) {
    child.await
}

/// A traced future polled once outside any task is a task root of its own.
/// Once a task awaits it, it is a frame of that task: the first task ends,
/// and no dump shows it again.
#[test]
fn a_root_later_awaited_by_a_task_leaves_no_ghost_task() {
    use std::task::{Context, Waker};
    let (tx, rx) = oneshot::channel();
    let mut child: Adopted = Box::pin(adopted(rx));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(child.as_mut().poll(&mut cx).is_pending());
    let roots = |d: &TaskDump| {
        d.tasks
            .iter()
            .filter(|t| t.root.as_deref() == Some("dump_tree::adopted"))
            .count()
    };
    assert_eq!(roots(&async_stack::dump()), 1, "a root of its own first");

    let mut pool = futures::executor::LocalPool::new();
    pool.spawner().spawn_local(adopter(child)).unwrap();
    pool.run_until_stalled();
    let d = async_stack::dump();
    assert_eq!(roots(&d), 0, "{d}");
    assert_eq!(
        tree(&task(&d, "adopter")),
        [(0, "adopter"), (1, "dump_tree::adopted")]
    );
    tx.send(()).unwrap();
    pool.run();
    let d = async_stack::dump();
    assert!(d.tasks.iter().all(|t| t.name.as_deref() != Some("adopter")));
    assert_eq!(roots(&d), 0, "{d}");
}

// --- A hidden frame dropped on another thread -----------------------------

#[traced_async]
async fn forever() {
    std::future::pending::<()>().await
}

type SendFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Polls more members than a published stack holds, then hands the last
/// one (which holds no slot) out.
#[traced_async(name = "overfull")]
async fn overfull(
    members: usize,
    out: std::sync::mpsc::Sender<SendFuture>,
    rest: oneshot::Receiver<()>,
) {
    let mut held: Vec<SendFuture> = Vec::new();
    for _ in 0..members {
        let mut f: SendFuture = Box::pin(forever());
        assert!(futures::poll!(f.as_mut()).is_pending());
        held.push(f);
    }
    out.send(held.pop().unwrap()).unwrap();
    let _ = rest.await;
}

/// A frame that holds no slot (the stack was full) and is dropped on
/// another thread is no longer counted: shown plus hidden frames is the
/// number of live frames, at once and after the task polls again.
#[test]
fn a_hidden_frame_dropped_on_another_thread_is_no_longer_counted() {
    let cap = async_stack::task::STACK_CAPACITY;
    let members = cap + 3;
    let mut pool = futures::executor::LocalPool::new();
    let (out_tx, out_rx) = std::sync::mpsc::channel();
    let (rest_tx, rest_rx) = oneshot::channel();
    pool.spawner()
        .spawn_local(overfull(members, out_tx, rest_rx))
        .unwrap();
    pool.run_until_stalled();
    let last = out_rx.recv().unwrap();
    // The root (`overfull`) and the members: one frame more than the
    // members, `cap` of them shown.
    let t = task(&async_stack::dump(), "overfull");
    assert_eq!(t.frames.len(), cap);
    assert_eq!(t.hidden_frames as usize, members + 1 - cap);

    std::thread::spawn(move || drop(last)).join().unwrap();
    let t = task(&async_stack::dump(), "overfull");
    assert_eq!(t.frames.len(), cap);
    assert_eq!(t.hidden_frames as usize, members - cap, "{t:?}");
    rest_tx.send(()).unwrap();
    pool.run();
}

// --- An `Unpin` frame moved between polls -----------------------------------

/// A leaf that is `Pending` on its first poll (waking itself) and ready on
/// its second.
fn ready_on_second_poll() -> impl std::future::Future<Output = ()> + Unpin {
    let mut polled = false;
    std::future::poll_fn(move |cx| {
        if std::mem::replace(&mut polled, true) {
            std::task::Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}

/// A leaf that, from its second poll on, records a dump taken inside its
/// own poll and completes.
fn recorder(
    seen: std::sync::Arc<std::sync::Mutex<Option<TaskDump>>>,
) -> impl std::future::Future<Output = ()> + Unpin {
    let mut polls = 0;
    std::future::poll_fn(move |_| {
        polls += 1;
        if polls == 1 {
            return std::task::Poll::Pending;
        }
        *seen.lock().unwrap() = Some(async_stack::dump());
        std::task::Poll::Ready(())
    })
}

#[traced_async(name = "mover")]
async fn mover(seen: std::sync::Arc<std::sync::Mutex<Option<TaskDump>>>) {
    use async_stack::TracedExt;
    let futures = vec![
        futures::future::Either::Left(ready_on_second_poll().traced_named("quick")),
        futures::future::Either::Right(recorder(seen).traced_named("moved")),
    ];
    // `quick` completes at the second poll; `select_all` then moves the
    // last future (`moved`, polled once already) into its place.
    let (_, _, rest) = futures::future::select_all(futures).await;
    futures::future::select_all(rest).await;
}

/// An `Unpin` traced future moved after a poll (as `select_all` moves
/// them) is still shown running while its poll runs.
#[test]
fn an_unpin_frame_moved_between_polls_is_shown_running() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    futures::executor::block_on(mover(seen.clone()));
    let d = seen.lock().unwrap().take().expect("the recorder ran");
    let t = task(&d, "mover");
    let running: Vec<(u32, &str)> = t
        .frames
        .iter()
        .filter(|f| f.running)
        .map(|f| (f.depth, &*f.function))
        .collect();
    // The running frames are marked on x86-64 only (README, "Stack
    // accuracy").
    let marked: &[(u32, &str)] = if cfg!(target_arch = "x86_64") {
        &[(0, "mover"), (1, "moved")]
    } else {
        &[]
    };
    assert_eq!(running, marked, "{d}");
    let moved = t.frames.iter().find(|f| f.function == "moved").unwrap();
    assert!(moved.awaiting_at.is_none(), "the innermost running frame");
}

//! A program for the debugger-script tests (`tests/tests/debugger_*.rs`):
//! it stops, on tokio's multi-thread runtime (but for mode `tokio`),
//! inside nested traced fns, after writing what the in-process walker and dump say at that point, so
//! that a test can compare `async-bt` and `async-tasks` in gdb and lldb
//! with them.
//!
//! Usage: `debuggee <mode> <out-dir>`. Every mode stops by calling
//! [`async_stack_debug_break`] (a debugger sets a breakpoint on that
//! symbol), then exits with status 0 once the debugger lets it go on.
//!
//! - `chain`: three idle tasks (`idle-1`..`idle-3`, each in
//!   `idle_outer -> idle_inner`, waiting on a channel), an idle task
//!   spawned with plain `tokio::spawn` whose name comes from its root
//!   (`#[traced_async(name = "named-root")]`), and a task `chain`
//!   (`chain_outer -> chain_middle -> chain_inner`), which writes
//!   `walker.txt` (the in-process backtrace, `{}`) and `dump.txt` (the
//!   in-process dump of every task, `{}`) and then stops. The backtrace is
//!   taken on the same line as the call that stops.
//! - `two`: tasks `left` (`left_outer -> left_inner`) and `right`
//!   (`right_outer -> right_inner`) on the two worker threads at once;
//!   each writes `walker-left.txt` / `walker-right.txt` and `tid-left.txt`
//!   / `tid-right.txt` (its OS thread id); `left` stops while `right` waits
//!   inside `right_inner`'s poll.
//! - `cycle`, `wild`: as `chain`, but before stopping `chain_inner` makes
//!   its frame its own parent (`cycle`) or gives it the parent `0x10`
//!   (`wild`), an address that cannot be read.
//! - `deep`: as `chain`, but `chain_inner`'s parent is a chain of 2,000
//!   frames, past any script's depth limit.
//! - `magic`, `version`: as `chain`, with the descriptor's magic number or
//!   version overwritten.
//! - `tokio`: on a current-thread runtime, one plain `tokio::spawn` whose
//!   block joins two traced roots (`tokio_left -> tokio_left_inner`,
//!   parked on a channel, and `tokio_right`, parked on `pending`), one
//!   task spawned with `async_stack::tokio::spawn_named("solo", ..)`
//!   (`tokio_solo`), after ten tokio tasks that end at once, and, outside the runtime, a traced root polled by
//!   hand (`tokio_alone`), all idle after one poll; and one more task
//!   spawned with `async_stack::tokio::spawn_named("unpolled", ..)` just
//!   before the runtime stops running tasks, so never polled. It writes
//!   `tokio-ids.txt` (`join <id>` and `solo <id>`, as `JoinHandle::id()`
//!   displays them), `task-ids.txt` (`left`, `right`, `solo`, `alone` and
//!   `unpolled` with their async-stack task ids) and `dump.txt`, then stops
//!   on the main thread, outside any poll.
//! - `waits`: on a current-thread runtime, tasks waiting for the wrapped
//!   resources of `async_stack::sync` and for a `JoinHandle`, each spawned
//!   by name with `async_stack::tokio::spawn_named` and idle after one
//!   poll: `holder` holds a `Mutex` that `locker` waits for (in
//!   `waits_locker -> waits_lock_inner`); `reader` holds a read lock of an
//!   `RwLock` that `writer` waits to write, and `queued` waits to read
//!   behind that writer; the main thread (outside any traced task) and
//!   `permit` each hold one of a `Semaphore`'s two permits, and
//!   `acquirer` waits for one; `starved` waits for a `Semaphore` of no
//!   permits; `joiner` awaits the `JoinHandle` of `awaited`, which never
//!   ends; `racer` polled the handle of `raced` (which never ends) in a
//!   `select!` that another branch won, kept it, and parked elsewhere;
//!   `lracer` did the same with an acquire of the `Mutex` (and polled
//!   another once between two `.await`s), which stays
//!   queued behind `locker`'s; `hracer` raced one through a generic
//!   helper, kept it, and parked in the helper again, at the same line;
//!   `fracer` raced a traced fn that locks it, kept it (its frame stays
//!   at the lock's `.await`), and parked elsewhere;
//!   `selector` waits in a `select!` for the handle of `selected` (which
//!   never ends) or for `waits_never`, a traced fn. It writes `task-ids.txt` and `tokio-ids.txt` (each label with
//!   its async-stack and tokio task ids) and `dump.txt`, then stops on
//!   the main thread, outside any poll.
//! - `waits-len`, `waits-torn`: as `waits`, then, after writing the dump,
//!   the length of the `waits` list that debuggers read of every resource
//!   is overwritten with 2^40 (`waits-len`), or every resource's lists are
//!   shown as caught in the middle of a change (`waits-torn`).
//! - `deadlock`: on a current-thread runtime, three deadlocks among tasks
//!   spawned by name, each idle after its last poll: `alpha` and `beta`
//!   each hold one of two `Mutex`es and wait for the other's (a lock-order
//!   inversion); `gamma` holds a `Semaphore`'s only permit and waits to
//!   write an `RwLock` that `delta` reads, `delta` waits for a `Mutex`
//!   that `epsilon` holds, and `epsilon` waits for the permit (three
//!   parties); `parent` holds a `Mutex` and awaits the `JoinHandle` of
//!   `child` (spawned by `parent`, without a name), which waits for that
//!   `Mutex`. `bystander` waits for `alpha`'s `Mutex` too, queued behind
//!   `beta`: stuck, but no deadlock of its own. Once
//!   `async_stack::deadlocks()` reports the three, it writes their report
//!   (`deadlocks.txt`: each deadlock's text, an empty line between two),
//!   `task-ids.txt` and `dump.txt`, then stops on the main thread,
//!   outside any poll.
//! - `deadlock-torn`, `deadlock-claimed`: as `deadlock`, then `alpha`'s
//!   `Mutex` (the oldest resource with waits) is shown to debuggers as in a
//!   change, or a free shared slot of each resource with waits is claimed.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};

use async_stack::traced_async;

static OUT: OnceLock<PathBuf> = OnceLock::new();
static MODE: OnceLock<String> = OnceLock::new();

/// Where a debugger stops. Never inlined, and named without mangling so
/// both debuggers find it by name.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn async_stack_debug_break() {
    std::hint::black_box(());
}

fn write(name: &str, text: &str) {
    let path: &Path = OUT.get().expect("out dir");
    std::fs::write(path.join(name), text).expect("write output");
}

/// Writes the in-process backtrace taken by the caller, then stops.
#[inline(never)]
fn stop_here(file: &str, bt: async_stack::Backtrace) {
    write(file, &format!("{bt}"));
    async_stack_debug_break();
}

// ---- chain ----

static IDLE_PARKED: AtomicUsize = AtomicUsize::new(0);

#[traced_async]
async fn idle_inner(rx: tokio::sync::oneshot::Receiver<()>) {
    IDLE_PARKED.fetch_add(1, Ordering::SeqCst);
    let _ = rx.await;
}

#[traced_async]
async fn idle_outer(rx: tokio::sync::oneshot::Receiver<()>) {
    idle_inner(rx).await;
}

#[traced_async(name = "named-root")]
async fn named_root(rx: tokio::sync::oneshot::Receiver<()>) {
    IDLE_PARKED.fetch_add(1, Ordering::SeqCst);
    let _ = rx.await;
}

#[traced_async]
async fn chain_inner() {
    while IDLE_PARKED.load(Ordering::SeqCst) < 4 {
        tokio::task::yield_now().await;
    }
    // Let the idle tasks' polls return, so they show as idle.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    write("dump.txt", &async_stack::dump().to_string());
    match MODE.get().map(String::as_str) {
        Some("cycle") => {
            let me = async_stack::debug::__testing::set_current_parent(std::ptr::null());
            async_stack::debug::__testing::set_current_parent(me);
        }
        Some("wild") => {
            async_stack::debug::__testing::set_current_parent(0x10 as *const _);
        }
        Some("deep") => {
            let chain = async_stack::debug::__testing::leaked_chain(2000);
            async_stack::debug::__testing::set_current_parent(chain);
        }
        Some("magic") => async_stack::debug::__testing::corrupt_descriptor_magic(),
        Some("version") => async_stack::debug::__testing::corrupt_descriptor_version(),
        _ => {}
    }
    stop_here("walker.txt", async_stack::backtrace());
    std::process::exit(0);
}

#[traced_async]
async fn chain_middle() {
    chain_inner().await;
}

#[traced_async]
async fn chain_outer() {
    chain_middle().await;
}

async fn chain() {
    let mut senders = Vec::new();
    for i in 1..=3 {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        senders.push(tx);
        async_stack::tokio::spawn_named(format!("idle-{i}"), idle_outer(rx));
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    senders.push(tx);
    tokio::spawn(named_root(rx));
    let _ = async_stack::tokio::spawn_named("chain", chain_outer()).await;
    drop(senders);
}

// ---- tokio ----
//
// The tests find the `.await` lines by the comments at their ends.

static PARKED: AtomicUsize = AtomicUsize::new(0);
static TASK_IDS: Mutex<Vec<(&str, u64)>> = Mutex::new(Vec::new());

/// Notes the id of the task being polled as `label`'s, and that it parked
/// (or is about to, in the same poll).
fn parked(label: &'static str) {
    let id = async_stack::current_task_id().expect("polled as a task root");
    TASK_IDS.lock().unwrap().push((label, id));
    PARKED.fetch_add(1, Ordering::SeqCst);
}

/// Yields until `n` tasks have parked.
async fn until_parked(n: usize) {
    while PARKED.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
}

/// Writes `task-ids.txt` from [`parked`]'s notes.
fn write_task_ids() {
    let ids = TASK_IDS.lock().unwrap().clone();
    let ids: String = ids.iter().map(|(l, id)| format!("{l} {id}\n")).collect();
    write("task-ids.txt", &ids);
}

#[traced_async]
async fn tokio_left_inner(rx: tokio::sync::oneshot::Receiver<()>) {
    parked("left");
    let _ = rx.await; // left
}

#[traced_async]
async fn tokio_left(rx: tokio::sync::oneshot::Receiver<()>) {
    tokio_left_inner(rx).await;
}

#[traced_async]
async fn tokio_right() {
    parked("right");
    std::future::pending::<()>().await; // right
}

#[traced_async]
async fn tokio_solo(rx: tokio::sync::oneshot::Receiver<()>) {
    parked("solo");
    let _ = rx.await; // solo
}

/// Spawned, never polled.
#[traced_async]
async fn tokio_unpolled() {}

#[traced_async]
async fn tokio_alone() {
    parked("alone");
    std::future::pending::<()>().await; // alone
}

fn tokio_mode() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let (left_tx, left_rx) = tokio::sync::oneshot::channel::<()>();
    let (solo_tx, solo_rx) = tokio::sync::oneshot::channel::<()>();
    let (join, solo) = rt.block_on(async {
        // Tokio ids apart from task ids, so that neither passes for the
        // other.
        for _ in 0..10 {
            let _ = tokio::spawn(async {}).await;
        }
        let join = tokio::spawn(async { tokio::join!(tokio_left(left_rx), tokio_right()) });
        let solo = async_stack::tokio::spawn_named("solo", tokio_solo(solo_rx));
        until_parked(3).await;
        // Never polled: the runtime runs tasks only inside `block_on`.
        let unpolled = async_stack::tokio::spawn_named("unpolled", tokio_unpolled());
        drop(unpolled);
        (join, solo)
    });
    let unpolled = async_stack::dump()
        .tasks
        .iter()
        .find(|t| t.name.as_deref() == Some("unpolled"))
        .expect("the unpolled task is in the dump")
        .id;
    TASK_IDS.lock().unwrap().push(("unpolled", unpolled));
    let mut alone = Box::pin(tokio_alone());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(alone.as_mut().poll(&mut cx).is_pending());
    write(
        "tokio-ids.txt",
        &format!("join {}\nsolo {}\n", join.id(), solo.id()),
    );
    write_task_ids();
    write("dump.txt", &async_stack::dump().to_string());
    async_stack_debug_break();
    drop((left_tx, solo_tx, alone));
    std::process::exit(0);
}

// ---- waits ----
//
// The tests find the lines by the comments at their ends.

type Lock = Arc<async_stack::sync::Mutex<u32>>;
type Rw = Arc<async_stack::sync::RwLock<u32>>;
type Permits = Arc<async_stack::sync::Semaphore>;

#[traced_async]
async fn waits_holder(m: Lock) {
    let _guard = m.lock().await; // holder locks
    parked("holder");
    std::future::pending::<()>().await; // holder parks
}

#[traced_async]
async fn waits_lock_inner(m: Lock) {
    parked("locker");
    let _guard = m.lock().await; // locker waits
}

#[traced_async]
async fn waits_locker(m: Lock) {
    waits_lock_inner(m).await;
}

#[traced_async]
async fn waits_reader(l: Rw) {
    let _read = l.read().await; // reader reads
    parked("reader");
    std::future::pending::<()>().await; // reader parks
}

#[traced_async]
async fn waits_writer(l: Rw) {
    parked("writer");
    let _write = l.write().await; // writer waits
}

#[traced_async]
async fn waits_queued(l: Rw) {
    parked("queued");
    let _read = l.read().await; // queued waits
}

#[traced_async]
async fn waits_permit(s: Permits) {
    let _permit = s.acquire().await; // permit acquires
    parked("permit");
    std::future::pending::<()>().await; // permit parks
}

#[traced_async]
async fn waits_acquirer(s: Permits) {
    parked("acquirer");
    let _permit = s.acquire().await; // acquirer waits
}

#[traced_async]
async fn waits_starved(s: Permits) {
    parked("starved");
    let _permit = s.acquire().await; // starved waits
}

#[traced_async]
async fn waits_awaited() {
    parked("awaited");
    std::future::pending::<()>().await; // awaited parks
}

#[traced_async]
async fn waits_joiner(awaited: async_stack::tokio::JoinHandle<()>) {
    parked("joiner");
    let _ = awaited.await; // joiner waits
}

#[traced_async]
async fn waits_raced() {
    parked("raced");
    std::future::pending::<()>().await; // raced parks
}

/// Polls `raced`'s handle in a `select!` that another branch wins at
/// once, keeps it, and parks elsewhere: it waits for nothing.
#[traced_async]
async fn waits_racer(mut raced: async_stack::tokio::JoinHandle<()>) {
    tokio::select! {
        biased;
        _ = &mut raced => {}
        () = std::future::ready(()) => {}
    }
    parked("racer");
    std::future::pending::<()>().await; // racer parks
}

/// Polls an acquire of `m` (which `holder` holds) in a `select!` that
/// another branch wins at once, and another once between two `.await`s,
/// keeps both (queued behind `locker`), and parks elsewhere: it waits for
/// nothing.
#[traced_async]
async fn waits_lock_racer(m: Lock) {
    // Before any `.await` or `select!` (whose site stays the frame's
    // until its next `.await`).
    let mut once = std::pin::pin!(m.lock());
    let polled = once
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    assert!(polled.is_pending(), "`holder` holds it");
    let mut acquire = std::pin::pin!(m.lock());
    tokio::select! {
        biased;
        _ = &mut acquire => {}
        () = std::future::ready(()) => {}
    }
    parked("lracer");
    std::future::pending::<()>().await; // lracer parks
}

/// Awaits `f`: one `.await` line for whatever it is called with.
#[traced_async]
async fn waits_run<F: Future>(f: F) -> F::Output {
    f.await // run awaits
}

/// Polls an acquire of `m` through `waits_run` in a `select!` that
/// another branch wins at once, keeps it (queued behind `locker`), and
/// parks in `waits_run` again, at the same `.await` line but in another
/// frame: it waits for nothing.
#[traced_async]
async fn waits_helper_racer(m: Lock) {
    let mut acquire = std::pin::pin!(m.lock());
    tokio::select! {
        biased;
        _ = waits_run(&mut acquire) => {}
        () = std::future::ready(()) => {}
    }
    parked("hracer");
    waits_run(std::future::pending::<()>()).await; // hracer parks
}

/// Locks `m`: `fracer`'s kept traced fn.
#[traced_async]
async fn waits_fn_lock(m: Lock) {
    let _guard = m.lock().await; // fracer's fn waits
}

/// Polls `waits_fn_lock(m)` in a `select!` on `&mut` that another branch
/// wins at once, keeps it (its frame stays suspended at its lock's
/// `.await`, queued behind `locker`), and parks elsewhere: it waits for
/// nothing.
#[traced_async]
async fn waits_fn_racer(m: Lock) {
    let mut locking = std::pin::pin!(waits_fn_lock(m));
    tokio::select! {
        biased;
        () = &mut locking => {}
        () = std::future::ready(()) => {}
    }
    parked("fracer");
    std::future::pending::<()>().await; // fracer parks
}

#[traced_async]
async fn waits_selected() {
    parked("selected");
    std::future::pending::<()>().await; // selected parks
}

#[traced_async]
async fn waits_never() {
    std::future::pending::<()>().await; // never parks
}

/// Waits for `selected`'s end, or for a traced fn that never ends, in
/// one `select!`.
#[traced_async]
async fn waits_selector(mut selected: async_stack::tokio::JoinHandle<()>) {
    parked("selector");
    tokio::select! { // selector waits
        _ = &mut selected => {}
        () = waits_never() => {}
    }
}

/// Notes `handle`'s tokio id as `label`'s, then yields until its task
/// parked (the tasks of `ids` park one after the other).
async fn parked_task(
    ids: &mut Vec<(&'static str, async_stack::tokio::Id)>,
    label: &'static str,
    handle: &async_stack::tokio::JoinHandle<()>,
) {
    ids.push((label, handle.id()));
    until_parked(ids.len()).await;
}

fn waits_mode(mode: &str) {
    use async_stack::tokio::spawn_named;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let mutex = Arc::new(async_stack::sync::Mutex::new(0)); // waits: mutex
    let rwlock = Arc::new(async_stack::sync::RwLock::new(0)); // waits: rwlock
    let semaphore = Arc::new(async_stack::sync::Semaphore::new(2)); // waits: semaphore
    let empty = Arc::new(async_stack::sync::Semaphore::new(0)); // waits: empty
    let (outside, tokio_ids) = rt.block_on(async {
        // Tokio ids apart from task ids, so that neither passes for the
        // other.
        for _ in 0..10 {
            let _ = tokio::spawn(async {}).await;
        }
        // Outside any traced task: held by the unknown task, 0.
        let outside = semaphore.clone().acquire_owned().await; // outside acquires
        // One at a time, so that each holds or queues in this order.
        let mut ids = Vec::new();
        let h = spawn_named("holder", waits_holder(mutex.clone()));
        parked_task(&mut ids, "holder", &h).await;
        let h = spawn_named("locker", waits_locker(mutex.clone()));
        parked_task(&mut ids, "locker", &h).await;
        let h = spawn_named("reader", waits_reader(rwlock.clone()));
        parked_task(&mut ids, "reader", &h).await;
        let h = spawn_named("writer", waits_writer(rwlock.clone()));
        parked_task(&mut ids, "writer", &h).await;
        let h = spawn_named("queued", waits_queued(rwlock.clone()));
        parked_task(&mut ids, "queued", &h).await;
        let h = spawn_named("permit", waits_permit(semaphore.clone()));
        parked_task(&mut ids, "permit", &h).await;
        let h = spawn_named("acquirer", waits_acquirer(semaphore.clone()));
        parked_task(&mut ids, "acquirer", &h).await;
        let h = spawn_named("starved", waits_starved(empty.clone()));
        parked_task(&mut ids, "starved", &h).await;
        let awaited = async_stack::tokio::spawn(waits_awaited()); // joiner awaits
        parked_task(&mut ids, "awaited", &awaited).await;
        let h = spawn_named("joiner", waits_joiner(awaited));
        parked_task(&mut ids, "joiner", &h).await;
        let raced = spawn_named("raced", waits_raced()); // racer races
        parked_task(&mut ids, "raced", &raced).await;
        let h = spawn_named("racer", waits_racer(raced));
        parked_task(&mut ids, "racer", &h).await;
        let h = spawn_named("lracer", waits_lock_racer(mutex.clone()));
        parked_task(&mut ids, "lracer", &h).await;
        let h = spawn_named("hracer", waits_helper_racer(mutex.clone()));
        parked_task(&mut ids, "hracer", &h).await;
        let h = spawn_named("fracer", waits_fn_racer(mutex.clone()));
        parked_task(&mut ids, "fracer", &h).await;
        let selected = spawn_named("selected", waits_selected()); // selector selects
        parked_task(&mut ids, "selected", &selected).await;
        let h = spawn_named("selector", waits_selector(selected));
        parked_task(&mut ids, "selector", &h).await;
        (outside, ids)
    });
    write(
        "tokio-ids.txt",
        &tokio_ids
            .iter()
            .map(|(label, id)| format!("{label} {id}\n"))
            .collect::<String>(),
    );
    write_task_ids();
    write("dump.txt", &async_stack::dump().to_string());
    match mode {
        "waits-len" => {
            async_stack::debug::__testing::corrupt_waits_len(1 << 40);
        }
        "waits-torn" => {
            async_stack::debug::__testing::mark_waits_changing();
        }
        _ => {}
    }
    async_stack_debug_break();
    drop((outside, mutex, rwlock, empty));
    std::process::exit(0);
}

// ---- deadlock ----
//
// The tests find the lines by the comments at their ends.

/// Locks `mine`, waits until the `parties` tasks of `both` hold theirs,
/// then waits for `theirs` for good.
#[traced_async]
async fn deadlock_pair(
    label: &'static str,
    mine: Lock,
    theirs: Lock,
    both: Arc<tokio::sync::Barrier>,
) {
    let _mine = mine.lock().await; // pair holds
    both.wait().await;
    parked(label);
    let _theirs = theirs.lock().await; // pair waits
}

#[traced_async]
async fn deadlock_gamma(permit: Permits, rw: Rw, all: Arc<tokio::sync::Barrier>) {
    let _permit = permit.acquire().await; // gamma holds
    all.wait().await;
    parked("gamma");
    let _write = rw.write().await; // gamma waits
}

#[traced_async]
async fn deadlock_delta(rw: Rw, m: Lock, all: Arc<tokio::sync::Barrier>) {
    let _read = rw.read().await; // delta holds
    all.wait().await;
    parked("delta");
    let _guard = m.lock().await; // delta waits
}

#[traced_async]
async fn deadlock_epsilon(m: Lock, permit: Permits, all: Arc<tokio::sync::Barrier>) {
    let _guard = m.lock().await; // epsilon holds
    all.wait().await;
    parked("epsilon");
    let _permit = permit.acquire().await; // epsilon waits
}

#[traced_async]
async fn deadlock_child(m: Lock) {
    parked("child");
    let _guard = m.lock().await; // child waits
}

#[traced_async]
async fn deadlock_parent(m: Lock) {
    let _guard = m.lock().await; // parent holds
    let child = async_stack::tokio::spawn(deadlock_child(m.clone())); // parent spawns
    parked("parent");
    let _ = child.await; // parent waits
}

#[traced_async]
async fn deadlock_bystander(m: Lock) {
    parked("bystander");
    let _guard = m.lock().await; // bystander waits
}

fn deadlock_mode(mode: &str) {
    use async_stack::tokio::spawn_named;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let first = Arc::new(async_stack::sync::Mutex::new(1)); // deadlock: first
    let second = Arc::new(async_stack::sync::Mutex::new(2)); // deadlock: second
    let permit = Arc::new(async_stack::sync::Semaphore::new(1)); // deadlock: permit
    let rw = Arc::new(async_stack::sync::RwLock::new(5)); // deadlock: rw
    let third = Arc::new(async_stack::sync::Mutex::new(3)); // deadlock: third
    let fourth = Arc::new(async_stack::sync::Mutex::new(4)); // deadlock: fourth
    let found = rt.block_on(async {
        let both = Arc::new(tokio::sync::Barrier::new(2));
        spawn_named(
            "alpha",
            deadlock_pair("alpha", first.clone(), second.clone(), both.clone()),
        );
        spawn_named(
            "beta",
            deadlock_pair("beta", second.clone(), first.clone(), both),
        );
        until_parked(2).await;
        let all = Arc::new(tokio::sync::Barrier::new(3));
        spawn_named(
            "gamma",
            deadlock_gamma(permit.clone(), rw.clone(), all.clone()),
        );
        spawn_named(
            "delta",
            deadlock_delta(rw.clone(), third.clone(), all.clone()),
        );
        spawn_named(
            "epsilon",
            deadlock_epsilon(third.clone(), permit.clone(), all),
        );
        until_parked(5).await;
        spawn_named("parent", deadlock_parent(fourth.clone()));
        until_parked(7).await;
        spawn_named("bystander", deadlock_bystander(first.clone()));
        until_parked(8).await;
        // Every task parked in its last poll; a few more turns let those
        // polls end.
        for _ in 0..10_000 {
            let found = async_stack::deadlocks();
            if found.len() == 3 {
                return found;
            }
            tokio::task::yield_now().await;
        }
        panic!("the three deadlocks did not form");
    });
    let report: Vec<String> = found.iter().map(ToString::to_string).collect();
    write("deadlocks.txt", &report.join("\n\n"));
    write_task_ids();
    write("dump.txt", &async_stack::dump().to_string());
    if mode == "deadlock-torn" {
        assert!(async_stack::debug::__testing::mark_oldest_waits_changing());
    }
    if mode == "deadlock-claimed" {
        // `gamma`'s `Semaphore` and `delta`'s `RwLock`, each with a slot
        // left claimed, as by a holder stopped before it wrote its hold.
        assert_eq!(async_stack::debug::__testing::claim_free_shared_slots(), 2);
    }
    async_stack_debug_break();
    std::process::exit(0);
}

// ---- two ----

static DONE: AtomicBool = AtomicBool::new(false);

fn tid() -> String {
    // SAFETY: `gettid` takes no argument and cannot fail.
    unsafe { libc_gettid() }.to_string()
}

unsafe extern "C" {
    #[link_name = "gettid"]
    fn libc_gettid() -> i32;
}

#[traced_async]
async fn left_inner(barrier: Arc<Barrier>) {
    write("tid-left.txt", &tid());
    barrier.wait();
    stop_here("walker-left.txt", async_stack::backtrace());
    DONE.store(true, Ordering::SeqCst);
}

#[traced_async]
async fn left_outer(barrier: Arc<Barrier>) {
    left_inner(barrier).await;
}

#[traced_async]
async fn right_inner(barrier: Arc<Barrier>) {
    write("tid-right.txt", &tid());
    write("walker-right.txt", &format!("{}", async_stack::backtrace()));
    barrier.wait();
    while !DONE.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[traced_async]
async fn right_outer(barrier: Arc<Barrier>) {
    right_inner(barrier).await;
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(mode), Some(out)) = (args.next(), args.next()) else {
        eprintln!(
            "usage: debuggee <chain|two|cycle|wild|deep|magic|version|tokio|waits|waits-len|waits-torn|deadlock|deadlock-torn|deadlock-claimed> <out-dir>"
        );
        std::process::exit(2);
    };
    OUT.set(PathBuf::from(out)).expect("set once");
    MODE.set(mode.clone()).expect("set once");
    if mode == "tokio" {
        tokio_mode();
    }
    if mode.starts_with("waits") {
        let _idle = contended_once();
        waits_mode(&mode);
    }
    if mode.starts_with("deadlock") {
        deadlock_mode(&mode);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a runtime");
    match mode.as_str() {
        "chain" | "cycle" | "wild" | "deep" | "magic" | "version" => rt.block_on(chain()),
        "two" => {
            let barrier = Arc::new(Barrier::new(2));
            let left =
                rt.spawn(async_stack::task::spawned(left_outer(barrier.clone())).named("left"));
            let right = rt.spawn(async_stack::task::spawned(right_outer(barrier)).named("right"));
            rt.block_on(async {
                let _ = left.await;
                let _ = right.await;
            });
        }
        other => {
            eprintln!("debuggee: unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}

/// A `Mutex` of the `waits` modes whose only wait is over (its owner, the
/// `Mutex`, lives on, so it stays listed in the waits registry): it must
/// show nothing, and no note may count it, even shown as caught in the
/// middle of a change (`waits-torn`). Contended outside any task and any
/// runtime, so that the scenario's task and tokio ids stay as they were.
fn contended_once() -> async_stack::sync::Mutex<u32> {
    use std::task::{Context, Poll, Waker};
    let m = async_stack::sync::Mutex::new(1);
    {
        let held = m.try_lock().expect("a new mutex is free");
        let mut cx = Context::from_waker(Waker::noop());
        let mut waiting = std::pin::pin!(m.lock());
        assert!(waiting.as_mut().poll(&mut cx).is_pending(), "it waits");
        drop(held);
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(_)));
    }
    m
}

//! Profiling a small tokio service with the sampler.
//!
//! An accept loop takes a request every millisecond and spawns a named
//! handler task for it (`GET /users`, `GET /orders`, `GET /health`). A
//! handler parses the request (CPU work in a plain function), queries a
//! fake database (a connection pool, then a `tokio::time::sleep`), and
//! renders the rows (CPU work again). The sampler watches it for two
//! seconds, wall-clock on every platform and on-CPU on Linux, then the
//! example writes the profile in every format and prints where each goes:
//!
//! - `profile.pb.gz`: pprof, for `go tool pprof`;
//! - `profile.folded`: folded stacks, for `inferno-flamegraph` or
//!   `flamegraph.pl`;
//! - `profile.json`: the JSON form (schema in `Profile::write_json`);
//! - `profile.svg`: a flamegraph (only with `--features flamegraph`);
//! - `profile.asprof`: a snapshot, for `Profile::load` and `resume`.
//!
//! Run it with `cargo run --example profile [-- <dir>]` (the files go to
//! `<dir>`, by default `target/profile`), and add `--features flamegraph`
//! for the SVG. Native frames beyond the interrupted function need frame
//! pointers: `RUSTFLAGS="-C force-frame-pointers=yes"`.

use std::error::Error;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_stack::sampler::{Profile, Sampler, Stats};
use async_stack::traced_async;

/// How long the service runs under the sampler.
const RUN_FOR: Duration = Duration::from_secs(2);

/// The routes the fake clients ask for, in turn.
#[derive(Clone, Copy, Debug)]
enum Route {
    Users,
    Orders,
    Health,
}

impl Route {
    fn path(self) -> &'static str {
        match self {
            Route::Users => "/users",
            Route::Orders => "/orders",
            Route::Health => "/health",
        }
    }
}

mod db {
    use std::sync::LazyLock;

    use tokio::sync::{Semaphore, SemaphorePermit};

    use super::*;

    /// Three connections for every handler: enough on average, not always.
    static POOL: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(3));

    /// Waits for a free connection.
    #[traced_async]
    async fn checkout() -> SemaphorePermit<'static> {
        POOL.acquire().await.expect("the pool is never closed")
    }

    /// Runs a query: a connection, then the (simulated) round trip.
    #[traced_async]
    pub async fn query(table: &'static str, key: u64) -> Vec<u64> {
        let _conn = checkout().await;
        let latency = if table == "orders" { 4 } else { 1 };
        tokio::time::sleep(Duration::from_millis(latency)).await;
        (0..latency * 16)
            .map(|i| key.wrapping_mul(31) ^ i)
            .collect()
    }
}

mod service {
    use super::*;

    /// Parses a request body: CPU work in a plain function.
    #[inline(never)]
    pub fn parse(body: &[u8], rounds: u32) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for _ in 0..rounds {
            for &b in body {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        std::hint::black_box(hash)
    }

    /// Formats the rows as an HTML table.
    #[inline(never)]
    fn to_html(rows: &[u64]) -> String {
        let mut html = String::from("<table>");
        for _ in 0..32 {
            html.truncate(7);
            for row in rows {
                html.push_str(&format!("<tr><td>{row:x}</td></tr>"));
            }
        }
        html + "</table>"
    }

    /// Renders the response, after a yield to the runtime.
    #[traced_async]
    pub async fn render(rows: Vec<u64>) -> usize {
        tokio::task::yield_now().await;
        std::hint::black_box(to_html(&rows)).len()
    }

    /// One request: parse, query, render.
    #[traced_async]
    pub async fn handle(route: Route, body: Vec<u8>) -> usize {
        let key = parse(&body, 4000);
        let rows = match route {
            Route::Users => db::query("users", key).await,
            Route::Orders => db::query("orders", key).await,
            Route::Health => Vec::new(),
        };
        render(rows).await
    }
}

/// Takes the next request: one a millisecond.
#[traced_async]
async fn next_request(clock: &mut tokio::time::Interval, n: u64) -> (Route, Vec<u8>) {
    clock.tick().await;
    let route = [Route::Users, Route::Orders, Route::Users, Route::Health][n as usize % 4];
    let body = format!("GET {} HTTP/1.1\r\nx-request-id: {n}\r\n\r\n", route.path());
    (route, body.into_bytes())
}

/// Accepts requests for `run_for`, each in a task named after its route,
/// then waits for the handlers still running. Returns how many it served.
#[traced_async]
async fn accept_loop(run_for: Duration) -> u64 {
    let deadline = tokio::time::Instant::now() + run_for;
    let mut clock = tokio::time::interval(Duration::from_millis(1));
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut handlers = Vec::new();
    let mut n = 0;
    while tokio::time::Instant::now() < deadline {
        let (route, body) = next_request(&mut clock, n).await;
        let name = format!("GET {}", route.path());
        handlers.push(async_stack::tokio::spawn_named(
            name,
            service::handle(route, body),
        ));
        n += 1;
    }
    for handler in handlers {
        handler.await.expect("handlers do not panic");
    }
    n
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/profile".into()),
    );
    std::fs::create_dir_all(&dir)?;

    let started = Instant::now();
    let sampler = Sampler::builder()
        .frequency_hz(99)
        .on_cpu(cfg!(target_os = "linux"))
        .start()?;
    let served = async_stack::tokio::spawn_named("accept", accept_loop(RUN_FOR)).await?;
    let profile = sampler.stop();
    println!(
        "served {served} requests in {:.1} s under the sampler\n",
        started.elapsed().as_secs_f64()
    );

    print_stats(profile.stats());
    print_groups(&profile);
    write_all(&profile, &dir)?;
    Ok(())
}

fn print_stats(s: &Stats) {
    println!("sampler stats:");
    println!("  ticks       {} ({} late)", s.ticks, s.late_ticks);
    println!(
        "  ok          {} of {} stacks read ({} retried)",
        s.ok, s.attempted, s.retried
    );
    println!(
        "  dropped     {} torn, {} inconsistent, {} on-CPU signals lost (of {})",
        s.dropped_torn, s.dropped_inconsistent, s.signals_lost, s.signals
    );
    println!("  mismatches  {}", s.mismatches);
    println!(
        "  cost        sampler thread {:.1} ms CPU, signal handler {:.2} ms\n",
        s.sampler_cpu_ns as f64 / 1e6,
        s.handler_ns as f64 / 1e6
    );
}

fn print_groups(profile: &Profile) {
    let groups = profile.groups();
    let top = &groups[..groups.len().min(5)];
    let width = top.iter().map(|(g, _)| g.len()).max().unwrap_or(0).max(5);
    println!("heaviest groups (wall time adds up over concurrent tasks):");
    println!(
        "  {:<width$} {:>8} {:>10} {:>10}",
        "group", "samples", "wall", "on-CPU"
    );
    for (group, w) in top {
        println!(
            "  {group:<width$} {:>8} {:>8.2} s {:>7.0} ms",
            w.samples,
            w.wall_ns as f64 / 1e9,
            w.cpu_ns as f64 / 1e6
        );
    }
    println!();
}

/// Writes every format to `dir` and says how to open each.
fn write_all(profile: &Profile, dir: &Path) -> Result<(), Box<dyn Error>> {
    let create = |name: &str| -> std::io::Result<(PathBuf, BufWriter<File>)> {
        let path = dir.join(name);
        Ok((path.clone(), BufWriter::new(File::create(path)?)))
    };

    let (pprof, mut out) = create("profile.pb.gz")?;
    profile.write_pprof(&mut out)?;
    out.flush()?;
    let (folded, mut out) = create("profile.folded")?;
    profile.write_folded(&mut out)?;
    out.flush()?;
    let (json, mut out) = create("profile.json")?;
    profile.write_json(&mut out)?;
    out.flush()?;
    let snapshot = dir.join("profile.asprof");
    profile.save(&snapshot)?;
    let reloaded = Profile::load(&snapshot)?;
    assert_eq!(reloaded.totals(), profile.totals());

    println!("wrote {}:", dir.display());
    println!("  {}", pprof.display());
    println!("      go tool pprof -http=:8080 {}", pprof.display());
    println!("      go tool pprof -top {}", pprof.display());
    println!("  {}", folded.display());
    println!(
        "      inferno-flamegraph < {} > flamegraph.svg   (or flamegraph.pl)",
        folded.display()
    );
    println!("  {}", json.display());
    println!("      schema: the rustdoc of Profile::write_json");
    println!("  {}", snapshot.display());
    println!("      Profile::load(..), then Sampler::builder().resume(profile)");
    write_svg(profile, dir)?;
    Ok(())
}

#[cfg(feature = "flamegraph")]
fn write_svg(profile: &Profile, dir: &Path) -> std::io::Result<()> {
    let path = dir.join("profile.svg");
    let mut out = BufWriter::new(File::create(&path)?);
    profile.write_svg(&mut out)?;
    out.flush()?;
    println!("  {}", path.display());
    println!("      open it in a browser (click a frame to zoom, Ctrl-F to search)");
    Ok(())
}

#[cfg(not(feature = "flamegraph"))]
fn write_svg(_: &Profile, _: &Path) -> std::io::Result<()> {
    println!("  (no profile.svg: run with --features flamegraph for a flamegraph)");
    Ok(())
}

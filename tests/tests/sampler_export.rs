//! `go tool pprof` reads what `Profile::write_pprof` writes, and finds in
//! it the stacks and counts of `Profile::write_folded`: the total, each
//! function's flat and cumulative samples (`-top`), and each sample's
//! stack and labels (`-traces`), on a fixed, hand-made profile (saved in
//! `async-stack/src/sampler/export/fixture.asprof` by the crate's export unit
//! tests, which check it is their fixture) and on a real sampler run.
//!
//! Needs Go (`scripts/test.sh` installs `golang-go`). Under CI (`CI` set) a
//! missing `go` fails the test; elsewhere the test says so and passes. The
//! `go` command runs offline, with its caches in the test's folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
mod go_tool;

use async_stack::sampler::{Profile, Sampler};
use async_stack::traced_async;
use common::wait_for;
use go_tool::have_go;

/// A profile written to a folder: its pprof file and its folded text.
struct Exported {
    dir: PathBuf,
    pprof: PathBuf,
    folded: String,
}

fn export(profile: &Profile, name: &str) -> Exported {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sampler-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the output folder");
    let pprof = dir.join("profile.pb.gz");
    let mut file = std::fs::File::create(&pprof).expect("create profile.pb.gz");
    profile.write_pprof(&mut file).expect("write pprof");
    let mut folded = Vec::new();
    profile.write_folded(&mut folded).expect("write folded");
    let folded = String::from_utf8(folded).expect("folded text is UTF-8");
    std::fs::write(dir.join("profile.folded"), &folded).expect("write profile.folded");
    Exported { dir, pprof, folded }
}

impl Exported {
    /// The standard output of `go tool pprof ARGS profile.pb.gz`, which
    /// must succeed.
    #[track_caller]
    fn pprof(&self, args: &[&str]) -> String {
        let path = self.pprof.to_str().expect("a UTF-8 path");
        let args: Vec<&str> = args.iter().copied().chain([path]).collect();
        go_tool::pprof(&self.dir, &args)
    }

    /// The folded stacks as function names (a frame's label up to ` at `),
    /// root first, with their counts; the group is the first name.
    fn folded_stacks(&self) -> Vec<(Vec<String>, u64)> {
        self.folded
            .lines()
            .map(|line| {
                let (stack, count) = line.rsplit_once(' ').expect("`stack count`");
                let names = stack
                    .split(';')
                    .map(|label| label.split(" at ").next().unwrap().to_owned())
                    .collect();
                (names, count.parse().expect("a count"))
            })
            .collect()
    }

    /// Flat (as the leaf) and cumulative (anywhere in the stack, once per
    /// stack) samples of every function, from the folded stacks.
    fn folded_top(&self) -> BTreeMap<String, (u64, u64)> {
        let mut top: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (names, count) in self.folded_stacks() {
            top.entry(names.last().unwrap().clone()).or_default().0 += count;
            let mut seen: Vec<&String> = Vec::new();
            for name in &names {
                if !seen.contains(&name) {
                    seen.push(name);
                    top.entry(name.clone()).or_default().1 += count;
                }
            }
        }
        top
    }

    fn folded_total(&self) -> u64 {
        self.folded_stacks().iter().map(|(_, n)| n).sum()
    }

    /// Checks `-top` and `-traces` against the folded stacks; returns the
    /// `-top` table (function -> flat, cumulative samples).
    #[track_caller]
    fn check_against_folded(&self) -> BTreeMap<String, (u64, u64)> {
        let total = self.folded_total();
        let text = self.pprof(&[
            "-top",
            "-sample_index=samples",
            "-nodecount=1000",
            "-nodefraction=0",
            "-edgefraction=0",
        ]);
        assert!(
            text.contains(&format!(
                "Showing nodes accounting for {total}, 100% of {total} total"
            )),
            "total {total} expected in\n{text}\nfolded:\n{}",
            self.folded
        );
        let top = parse_top(&text);
        assert_eq!(
            top,
            self.folded_top(),
            "-top:\n{text}\nfolded:\n{}",
            self.folded
        );

        let traces = self.pprof(&["-traces", "-sample_index=samples"]);
        let mut stacks: BTreeMap<Vec<String>, u64> = BTreeMap::new();
        for trace in parse_traces(&traces) {
            *stacks.entry(trace.stack).or_default() += trace.count;
        }
        let mut want: BTreeMap<Vec<String>, u64> = BTreeMap::new();
        for (names, count) in self.folded_stacks() {
            *want.entry(names).or_default() += count;
        }
        assert_eq!(stacks, want, "-traces:\n{traces}\nfolded:\n{}", self.folded);
        top
    }
}

/// pprof keeps names as they are; the folded format turns `;` into `,`.
fn folded_name(pprof_name: &str) -> String {
    pprof_name.replace(';', ",")
}

/// The rows of `go tool pprof -top`: function -> (flat, cum).
fn parse_top(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut rows = BTreeMap::new();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"));
    assert!(lines.next().is_some(), "no table in\n{text}");
    for line in lines {
        let mut fields = line.split_whitespace();
        let mut number = || fields.next().expect("a column");
        let flat: u64 = number().parse().expect("flat");
        let _flat_pc = number();
        let _sum_pc = number();
        let cum: u64 = number().parse().expect("cum");
        let _cum_pc = number();
        let name = fields.collect::<Vec<_>>().join(" ");
        rows.insert(folded_name(&name), (flat, cum));
    }
    rows
}

/// One sample of `go tool pprof -traces`.
#[derive(Debug)]
struct Trace {
    count: u64,
    /// Root first.
    stack: Vec<String>,
    /// `key=value`, in pprof's order.
    labels: Vec<String>,
}

/// The samples of `go tool pprof -traces`: blocks after
/// `-----------+---` lines, each with its labels (`key:  value`), then
/// the count beside the leaf, and the callers below it.
fn parse_traces(text: &str) -> Vec<Trace> {
    let mut traces = Vec::new();
    let mut blocks = text.split("\n-----------+");
    blocks.next(); // the header
    for block in blocks {
        let mut trace = Trace {
            count: 0,
            stack: Vec::new(),
            labels: Vec::new(),
        };
        // The rest of the separator line.
        for line in block.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let line = line.trim();
            let (first, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let rest = rest.trim();
            if !trace.stack.is_empty() {
                trace.stack.push(folded_name(line));
            } else if let Some(key) = first.strip_suffix(':') {
                trace.labels.push(format!("{key}={rest}"));
            } else {
                trace.count = first
                    .parse()
                    .unwrap_or_else(|_| panic!("a count: {line:?}"));
                trace.stack.push(folded_name(rest));
            }
        }
        if !trace.stack.is_empty() {
            trace.stack.reverse();
            traces.push(trace);
        }
    }
    traces
}

#[test]
fn go_pprof_reads_the_fixture_as_folded_says() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../async-stack/src/sampler/export/fixture.asprof"
    );
    let profile = Profile::load(fixture).expect("the saved fixture profile");
    let exported = export(&profile, "fixture");
    if !have_go() {
        return;
    }
    let top = exported.check_against_folded();
    // What the fixture holds, by hand: `api` waits in `fetch_row` most.
    assert_eq!(top["api"], (0, 17));
    assert_eq!(top["worker"], (0, 14));
    assert_eq!(top["tour::fetch_row"], (9, 9));
    assert_eq!(top["tour::crunch"], (6, 14));
    assert_eq!(top["<[u8, 4] as tour::Codec>::decode"], (2, 2));

    let traces = parse_traces(&exported.pprof(&["-traces", "-sample_index=samples"]));
    assert_eq!(traces.len(), 8);
    let fetch_row: Vec<_> = traces
        .iter()
        .filter(|t| t.stack.last().unwrap() == "tour::fetch_row")
        .map(|t| (t.count, t.labels.join(" ")))
        .collect();
    assert_eq!(fetch_row.len(), 2, "{traces:?}");
    for (count, labels) in fetch_row {
        let task = if count == 5 { "1" } else { "2" };
        for label in ["state=off-cpu", "task_name=api", &format!("task_id={task}")] {
            assert!(labels.contains(label), "{label} not in {labels}");
        }
    }

    // `worker` is filed under tokio task 34; `api` under none.
    for t in &traces {
        let filed = t.labels.iter().any(|l| l == "tokio_task_id=34");
        assert_eq!(filed, t.stack.contains(&"worker".to_owned()), "{t:?}");
    }

    let raw = exported.pprof(&["-raw"]);
    for want in [
        "async-stack stats: ticks=200 late_ticks=0 attempted=31 ok=31 retried=2",
        "async-stack grouping: task_name",
        "PeriodType: wall nanoseconds",
        "Period: 10000000",
        "Duration: 2s",
    ] {
        assert!(raw.contains(want), "{want:?} not in\n{raw}");
    }
}

/// Waits in a known function, as a task's leaf, until released.
#[traced_async]
async fn nap(release: tokio::sync::oneshot::Receiver<()>) {
    let _ = release.await;
}

#[traced_async]
async fn sleeper(release: tokio::sync::oneshot::Receiver<()>) {
    nap(release).await;
}

#[test]
fn go_pprof_reads_a_real_run_as_folded_says() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (releases, tasks): (Vec<_>, Vec<_>) = (0..3)
        .map(|_| {
            let (release, parked) = tokio::sync::oneshot::channel();
            let _in_runtime = runtime.enter();
            (
                release,
                async_stack::tokio::spawn_named("sleeper", sleeper(parked)),
            )
        })
        .unzip();
    // The sampler runs while the tasks are parked in `nap`: idle, not only
    // two frames deep (a task whose leaf has just returned `Pending` is
    // still in its poll, and one preempted on its way is elsewhere), and
    // stops before they move on, however late a worker or the sampler's
    // thread gets its turn.
    wait_for("the three tasks parked in nap", || {
        let d = async_stack::dump();
        let parked = d.tasks.iter().filter(|t| {
            t.name.as_deref() == Some("sleeper")
                && t.frames.len() == 2
                && t.state == async_stack::TaskState::Idle
        });
        parked.count() == 3
    });
    let sampler = Sampler::builder()
        .frequency_hz(1000)
        .start()
        .expect("start the sampler");
    wait_for("300 ticks", || sampler.stats().ticks >= 300);
    let profile = sampler.stop();
    drop(releases);
    runtime.block_on(async {
        for task in tasks {
            task.await.expect("sleeper");
        }
    });
    let exported = export(&profile, "run");
    assert!(profile.stats().ticks > 0, "{:?}", profile.stats());
    let total = exported.folded_total();
    assert!(total > 0, "no sample in {:?}", profile.stats());
    if !have_go() {
        return;
    }
    let top = exported.check_against_folded();
    // Every task spends its life in `nap`, awaiting its sleep, under
    // `sleeper`, in its group.
    let nap = "sampler_export::nap";
    let flat = top.get(nap).map_or(0, |&(flat, _)| flat);
    assert!(
        flat * 10 >= total * 9,
        "{nap}: {flat} of {total} flat\n{top:?}"
    );
    assert_eq!(top["sampler_export::sleeper"].1, total);
    assert_eq!(top["sleeper"], (0, total));
}

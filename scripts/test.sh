#!/usr/bin/env bash
# The full test suite of async-stack: the command the README gives, and
# the one `.ci/run` calls. It installs the system tools the tests need
# when they are missing, then runs, in order:
#   1. every unit, integration, UI (trybuild) and doc test, debug build,
#      the fault-injection suite (tests/tests/faults_*.rs) included;
#   2. the walker, dump, sampler and debugger-script tests again in a
#      release build with line tables only (profile `release-lines`),
#      where inlining changes the native stack, and the million-live-task
#      registry test, too slow for a debug build;
#   3. the walker test meant for it, the debugger scripts' test of where
#      they place async frames among native ones, and the sampler's tests
#      of where a sample's native frames end, in a release build with no
#      debug info (profile `release-lines` with the workspace crates' debug info
#      off and the binaries stripped, which reuses stage 2's dependencies);
#   4. the loom models of everything another thread reads.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the debugger-script tests need (they fail, never skip, when
# one is missing): gdb (with gcore), and lldb with its Python module; and
# readelf, which stage 3 checks its binaries with. Debian's
# lldb 14 cannot start its embedded Python as installed: it needs the
# python3-lldb-14 package, and PYTHONPATH naming the dist-packages folder
# that package puts under llvm-14.
need=()
command -v gdb >/dev/null 2>&1 || need+=(gdb)
command -v gcore >/dev/null 2>&1 || need+=(gdb)
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v readelf >/dev/null 2>&1 || need+=(binutils)
command -v lldb >/dev/null 2>&1 || need+=(lldb)
dpkg -s python3-lldb-14 >/dev/null 2>&1 || need+=(python3-lldb-14)
if [ ${#need[@]} -gt 0 ]; then
    echo "== installing ${need[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
lldb_py=$(ls -d /usr/lib/llvm-*/lib/python3*/dist-packages 2>/dev/null | grep -v '/python3/' | head -n1 || true)
if [ -n "$lldb_py" ]; then
    export PYTHONPATH="$lldb_py${PYTHONPATH:+:$PYTHONPATH}"
fi

# The walker is checked against the published stacks on every
# `backtrace()` capture (on by default in debug builds, and through
# ASYNC_STACK_VERIFY=1 in the release stage); every mismatch is appended
# to this log, which must stay empty.
export ASYNC_STACK_VERIFY_LOG="$PWD/target/verify-mismatches.log"
mkdir -p target
rm -f "$ASYNC_STACK_VERIFY_LOG"

# A cold run writes about 8 GB under target/ (the debug build's test
# binaries 4 GB of it). When the disk fills, the linker dies with an
# unhelpful SIGBUS, so say beforehand when room looks short.
free_kb=$(df -Pk target | awk 'NR == 2 { print $4 }')
echo "== $(date -u +%T) $((free_kb / 1024 / 1024)) GB free for target/"
if [ "${free_kb:-0}" -lt $((10 * 1024 * 1024)) ]; then
    echo "== warning: less than 10 GB free; a cold run writes about 8 GB under target/" >&2
fi

echo "== $(date -u +%T) 1/4 workspace tests (debug)"
cargo test --workspace --all-features

echo "== $(date -u +%T) 2/4 walker, frame, await-site, dump, debugger, sampler and million-task tests (release, line tables only)"
walker_tests=(--test registry_million --test sampler_torture --test sampler_native_frames)
for t in tests/tests/walker_*.rs tests/tests/frame_*.rs tests/tests/macro_await_sites.rs tests/tests/dump_*.rs tests/tests/debugger_*.rs; do
    [ -e "$t" ] && walker_tests+=(--test "$(basename "$t" .rs)")
done
ASYNC_STACK_VERIFY=1 cargo test -p tests --profile release-lines "${walker_tests[@]}"

echo "== $(date -u +%T) 3/4 walker, debugger scripts and sampler without debug info (release, no debug info)"
nodebug=(--profile release-lines --config 'profile.release-lines.debug=false'
    --config 'profile.release-lines.strip="debuginfo"')
nodebug_tests=(--test walker_no_debuginfo --test sampler_native_frames --test debugger_gdb --test debugger_lldb)
cargo test -p tests "${nodebug[@]}" --test walker_no_debuginfo --test sampler_native_frames
cargo test -p tests "${nodebug[@]}" --test debugger_gdb --test debugger_lldb native_frames_in_order
cargo test -p async-stack --lib "${nodebug[@]}" boundary_tests
# What the stage claims: its five test binaries and the debuggee the
# debugger tests stop carry no debug info (`.debug_gdb_scripts`, the
# debugger scripts the library embeds, aside).
bins=$({ cargo test -p tests "${nodebug[@]}" "${nodebug_tests[@]}" --no-run --message-format=json
    cargo test -p async-stack --lib "${nodebug[@]}" --no-run --message-format=json; } 2>/dev/null |
    python3 -c 'import json,sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("executable") and (m["profile"]["test"] or m["target"]["name"] == "debuggee")]')
if [ "$(wc -l <<<"$bins")" -ne 6 ]; then
    echo "== expected five test binaries and the debuggee, found: $bins" >&2
    exit 1
fi
while read -r bin; do
    if readelf -S -W "$bin" | grep -E '\.debug_(info|line) '; then
        echo "== $bin has debug info" >&2
        exit 1
    fi
done <<<"$bins"

echo "== $(date -u +%T) 4/4 loom models"
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg async_stack_loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p async-stack --lib --release loom

if [ -s "$ASYNC_STACK_VERIFY_LOG" ]; then
    echo "== walker verification found mismatches:"
    cat "$ASYNC_STACK_VERIFY_LOG"
    exit 1
fi
echo "== $(date -u +%T) walker verification: no mismatch"

#!/usr/bin/env bash
# The full test suite of async-stack: the command the README gives, and
# the one `.ci/run` calls. It installs the system tools the tests need
# when they are missing, then runs, in order:
#   1. every unit, integration, UI (trybuild) and doc test, debug build;
#   2. the walker tests again in a release build with line tables only
#      (profile `release-lines`), where inlining changes the native stack;
#   3. the loom models of everything another thread reads.
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools. None are needed yet beyond a Rust toolchain; debugger
# script tests (gdb, lldb) will add theirs here, installed when missing.
need_tool() {
    local tool=$1 package=$2
    if command -v "$tool" >/dev/null 2>&1; then
        return
    fi
    echo "== installing $package (for $tool)"
    if command -v apt-get >/dev/null 2>&1; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq && $sudo apt-get install -y -qq "$package"
    else
        echo "error: $tool is missing and this system has no apt-get; install $package" >&2
        exit 1
    fi
}


echo "== 1/3 workspace tests (debug)"
cargo test --workspace --all-features

echo "== 2/3 walker, frame, await-site and dump tests (release, line tables only)"
walker_tests=()
for t in tests/tests/walker_*.rs tests/tests/frame_*.rs tests/tests/macro_await_sites.rs tests/tests/dump_*.rs; do
    [ -e "$t" ] && walker_tests+=(--test "$(basename "$t" .rs)")
done
cargo test -p tests --profile release-lines "${walker_tests[@]}"

echo "== 3/3 loom models"
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg async_stack_loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p async-stack --lib --release loom

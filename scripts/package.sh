#!/usr/bin/env bash
# Packages both published crates as `cargo publish` would (the macro crate
# first: async-stack depends on it by version, and cargo verifies the pair
# against a local copy of the registry), builds each package from its own
# sources with every feature, and checks that the files the library
# reads at run or build time are in the package: the debugger scripts it
# embeds in `.debug_gdb_scripts`, the export tests' fixture, the README
# its docs include, and the licence files.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo package -p async-stack-macros -p async-stack --all-features --locked

version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "async-stack"))')
crate="target/package/async-stack-$version.crate"
listing=$(tar tzf "$crate")
missing=0
for f in debugger/async_stack_gdb.py debugger/async_stack_lldb.py debugger/async_stack_reader.py \
    src/sampler/export/fixture.asprof README.md LICENSE-MIT LICENSE-APACHE; do
    if ! grep -qx "async-stack-$version/$f" <<<"$listing"; then
        echo "package.sh: $crate lacks $f" >&2
        missing=1
    fi
done
macros="target/package/async-stack-macros-$version.crate"
macros_listing=$(tar tzf "$macros")
for f in LICENSE-MIT LICENSE-APACHE; do
    if ! grep -qx "async-stack-macros-$version/$f" <<<"$macros_listing"; then
        echo "package.sh: $macros lacks $f" >&2
        missing=1
    fi
done
exit $missing

#!/usr/bin/env bash
# might against might: bench/ab.sh BASE_REV [ab.py flags: --reps N --threads 1,2 --quick]
# Builds BASE_REV (a git revision) in a detached worktree with its own target folder and the
# working tree as it is, both in release, then runs bench/ab.py on the two binaries (alternating,
# medians; writes bench/AB.md). No PyTorch needed.
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:?usage: bench/ab.sh BASE_REV [--reps N] [--threads 1,2] [--quick]}"
shift
wt="${AB_BASE_DIR:-/tmp/might-ab-base}"
if [ ! -d "$wt" ]; then
    git worktree add --detach "$wt" "$base" >&2
else
    git -C "$wt" checkout --detach --quiet "$base"
fi
(cd "$wt" && CARGO_TARGET_DIR="$wt/target" cargo build --release -p might-cli >&2)
cargo build --release -p might-cli >&2
exec python3 bench/ab.py --base "$wt/target/release/might" --cand "${CARGO_TARGET_DIR:-target}/release/might" \
    --base-name "$(git rev-parse --short "$base")" --cand-name "$(git describe --always --dirty)" "$@"

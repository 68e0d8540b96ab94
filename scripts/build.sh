#!/usr/bin/env bash
# Configures and builds tenax into a build directory (default: build/ at the repository root).
#   scripts/build.sh [BUILD_DIR] [extra cmake -D options…]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
shift || true
source "$root/scripts/script-settings.sh"
jobs=$(tenax_setting_count TENAX_BUILD_JOBS "$(nproc)" 4096)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$build" -j "$jobs"

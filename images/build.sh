#!/usr/bin/env bash
# Build every image the real-cluster backend needs, from nothing, idempotently.
#   bash images/build.sh [--kafka-version 4.3.1 [--kafka-version 4.1.2]] [--force]
# Makes sure a Docker engine answers first (images/setup-host.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup-host.sh"
cd "$here/.."
exec python3 -m pytest_elr images build "$@"

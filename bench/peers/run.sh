#!/usr/bin/env bash
# Peer benchmark: rate-limiter-flexible RateLimiterMemory (Node.js).
# Prints one JSON line per case to stdout. Takes ~10 s on a 2-core machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if [ ! -d node_modules/rate-limiter-flexible ]; then
  npm ci --silent --no-audit --no-fund >&2
fi

OPS="${OPS:-2000000}"

# Case 1: hot key (every call hits the same key).
node rlf_memory.js --keys 1 --ops "$OPS"
# Case 2: 100k keys, uniformly random.
node rlf_memory.js --keys 100000 --ops "$OPS"

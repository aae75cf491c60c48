#!/usr/bin/env node
'use strict';
// Peer benchmark: rate-limiter-flexible's RateLimiterMemory, called the way
// users call it (consume() returns a Promise). See README.md for caveats.
//
// usage: node rlf_memory.js --keys K --ops M [--points P] [--duration-s D]
//                           [--mode batch|seq] [--batch B] [--warmup-frac F]
//                           [--seed S]
//
// Prints exactly one JSON line to stdout; diagnostics go to stderr.

const path = require('path');
const { RateLimiterMemory, RateLimiterRes } = require('rate-limiter-flexible');
const RLF_VERSION = require('rate-limiter-flexible/package.json').version;

function usage(msg) {
  if (msg) process.stderr.write(`rlf_memory.js: ${msg}\n`);
  process.stderr.write(
    'usage: node ' + path.basename(__filename) +
      ' --keys K --ops M [--points P] [--duration-s D]' +
      ' [--mode batch|seq] [--batch B] [--warmup-frac F] [--seed S]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {
    keys: null,
    ops: null,
    // Default is huge so nothing is ever rejected: this measures the cost of
    // a decision, not the admitted/rejected mix.
    points: 1e9,
    durationS: 1,
    mode: 'batch',
    batch: 1000,
    warmupFrac: 0.1,
    seed: 12345,
  };
  const num = (name, v) => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n)) usage(`${name} needs a number`);
    return n;
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    switch (a) {
      case '--keys': opts.keys = num(a, v); i++; break;
      case '--ops': opts.ops = num(a, v); i++; break;
      case '--points': opts.points = num(a, v); i++; break;
      case '--duration-s': opts.durationS = num(a, v); i++; break;
      case '--batch': opts.batch = num(a, v); i++; break;
      case '--warmup-frac': opts.warmupFrac = num(a, v); i++; break;
      case '--seed': opts.seed = num(a, v); i++; break;
      case '--mode':
        if (v !== 'batch' && v !== 'seq') usage('--mode must be batch or seq');
        opts.mode = v; i++; break;
      case '-h': case '--help': usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!Number.isInteger(opts.keys) || opts.keys < 1) usage('--keys K (integer >= 1) is required');
  if (!Number.isInteger(opts.ops) || opts.ops < 1) usage('--ops M (integer >= 1) is required');
  if (!Number.isInteger(opts.batch) || opts.batch < 1) usage('--batch must be an integer >= 1');
  if (!(opts.points > 0)) usage('--points must be > 0');
  if (!(opts.durationS >= 0)) usage('--duration-s must be >= 0');
  if (!(opts.warmupFrac >= 0 && opts.warmupFrac <= 1)) usage('--warmup-frac must be in [0,1]');
  return opts;
}

// Key indices are drawn uniformly at random before timing starts, so the RNG
// is not part of the measured cost. xorshift32, seeded: reproducible runs.
function makeIndices(n, keys, seed) {
  const idx = new Uint32Array(n);
  if (keys === 1) return idx; // always key 0
  let x = (seed >>> 0) || 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    // Multiply-shift to [0, keys) (bias negligible for keys << 2^32).
    idx[i] = Math.floor((x / 4294967296) * keys);
  }
  return idx;
}

const yieldToEventLoop = () => new Promise((r) => setImmediate(r));

// Counters for decisions. A RateLimiterRes rejection is a "rejected" decision,
// anything else is a real error and aborts the run.
const counts = { allowed: 0, rejected: 0 };
function onAllowed() { counts.allowed++; }
function onRejected(e) {
  if (e instanceof RateLimiterRes) { counts.rejected++; return; }
  throw e;
}

// Bounded concurrency: issue up to `batch` consume() calls, await them all,
// then yield one macrotask turn (so RateLimiterMemory's expiry timers can fire,
// as they would in a server), and continue.
async function runBatched(limiter, keyStrs, idx, from, to, batch) {
  const pending = new Array(batch);
  for (let i = from; i < to; i += batch) {
    const end = Math.min(i + batch, to);
    let n = 0;
    for (let j = i; j < end; j++) {
      pending[n++] = limiter.consume(keyStrs[idx[j]], 1).then(onAllowed, onRejected);
    }
    pending.length = n;
    await Promise.all(pending);
    pending.length = batch;
    await yieldToEventLoop();
  }
}

// Strictly sequential: await each call; yield a macrotask turn every `batch`.
async function runSequential(limiter, keyStrs, idx, from, to, batch) {
  for (let i = from; i < to; i++) {
    try {
      await limiter.consume(keyStrs[idx[i]], 1);
      counts.allowed++;
    } catch (e) {
      onRejected(e);
    }
    if ((i - from + 1) % batch === 0) await yieldToEventLoop();
  }
}

async function main() {
  const opts = parseArgs(process.argv);
  const keyStrs = new Array(opts.keys);
  for (let k = 0; k < opts.keys; k++) keyStrs[k] = `key-${k}`;

  const warmupOps = opts.warmupFrac > 0
    ? Math.max(1000, Math.floor(opts.ops * opts.warmupFrac)) : 0;
  const idx = makeIndices(warmupOps + opts.ops, opts.keys, opts.seed);

  const limiter = new RateLimiterMemory({ points: opts.points, duration: opts.durationS });
  const run = opts.mode === 'batch' ? runBatched : runSequential;

  // Warm-up on the same limiter (JIT warm, keys populated = steady state).
  await run(limiter, keyStrs, idx, 0, warmupOps, opts.batch);
  counts.allowed = 0;
  counts.rejected = 0;

  const t0 = process.hrtime.bigint();
  await run(limiter, keyStrs, idx, warmupOps, warmupOps + opts.ops, opts.batch);
  const t1 = process.hrtime.bigint();

  const seconds = Number(t1 - t0) / 1e9;
  const decided = counts.allowed + counts.rejected;
  if (decided !== opts.ops) {
    throw new Error(`decision count ${decided} != ops ${opts.ops}`);
  }
  process.stderr.write(
    `rlf_memory: mode=${opts.mode} batch=${opts.batch} warmup=${warmupOps} ` +
      `points=${opts.points} duration_s=${opts.durationS} ` +
      `allowed=${counts.allowed} rejected=${counts.rejected} node=${process.version}\n`);
  process.stdout.write(JSON.stringify({
    peer: 'rate-limiter-flexible',
    version: RLF_VERSION,
    store: 'RateLimiterMemory',
    keys: opts.keys,
    ops: opts.ops,
    seconds: Number(seconds.toFixed(6)),
    decisions_per_sec: Math.round(opts.ops / seconds),
  }) + '\n');
}

main().catch((e) => {
  process.stderr.write(`rlf_memory.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});

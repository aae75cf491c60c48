#!/usr/bin/env node
'use strict';
// Peer benchmark: rate-limiter-flexible's RateLimiterRedis over ioredis, the way its docs set it
// up, against a Redis we are given (scripts/run-redis-bench starts one on a loopback port).
//
// C concurrent "callers" in one Node process: each is an async loop that awaits one consume()
// on a random key before issuing the next, so exactly C decisions are in flight, the same
// concurrency as C blocking sluice callers or redis-benchmark -c C. Runs a warm-up, then a fixed
// measured time, then stops by itself.
//
// usage: node rlf_redis.js --port P [--host H] [--callers C] [--seconds S] [--warmup S]
//                          [--keys K] [--points N] [--duration-s D] [--auto-pipelining]
//
// Prints one line of key=value pairs on stdout (the same shape as bench/redis_load.cc).

const path = require('path');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
const RLF_VERSION = require('rate-limiter-flexible/package.json').version;
const IOREDIS_VERSION = require('ioredis/package.json').version;

function usage(msg) {
  if (msg) process.stderr.write(`rlf_redis.js: ${msg}\n`);
  process.stderr.write(
    'usage: node ' + path.basename(__filename) +
      ' --port P [--host H] [--callers C] [--seconds S] [--warmup S] [--keys K]' +
      ' [--points N] [--duration-s D] [--auto-pipelining]\n');
  process.exit(2);
}

function parseArgs(argv) {
  // Same limit and key space as redis_load's defaults: 100 per 1 s, 10k keys.
  const o = {
    host: '127.0.0.1', port: null, callers: 64, seconds: 5, warmup: 1, keys: 10000,
    points: 100, durationS: 1, autoPipelining: false,
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
      case '--host': o.host = v; i++; break;
      case '--port': o.port = num(a, v); i++; break;
      case '--callers': o.callers = num(a, v); i++; break;
      case '--seconds': o.seconds = num(a, v); i++; break;
      case '--warmup': o.warmup = num(a, v); i++; break;
      case '--keys': o.keys = num(a, v); i++; break;
      case '--points': o.points = num(a, v); i++; break;
      case '--duration-s': o.durationS = num(a, v); i++; break;
      case '--auto-pipelining': o.autoPipelining = true; break;
      case '-h': case '--help': usage(); break;
      default: usage(`unknown argument ${a}`);
    }
  }
  if (!Number.isInteger(o.port)) usage('--port P is required');
  if (!(o.callers >= 1 && o.keys >= 1 && o.seconds > 0 && o.warmup >= 0)) usage('bad value');
  return o;
}

async function main() {
  const o = parseArgs(process.argv);
  // enableOfflineQueue: false is what the rate-limiter-flexible docs recommend for ioredis, so
  // a down Redis fails fast instead of queueing; we wait for 'ready' before starting.
  const client = new Redis({
    host: o.host, port: o.port, enableOfflineQueue: false,
    enableAutoPipelining: o.autoPipelining,
  });
  await new Promise((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
  const limiter = new RateLimiterRedis({
    storeClient: client, points: o.points, duration: o.durationS, keyPrefix: 'rlflx',
  });

  const keyStrs = new Array(o.keys);
  for (let k = 0; k < o.keys; k++) keyStrs[k] = `user-${k}`;

  // phase 0: warm-up (JIT, script loaded, keys present), 1: measured, 2: stop.
  let phase = 0;
  let decisions = 0;
  let rejected = 0;
  const lat = [];
  async function caller(seed) {
    let x = (seed * 0x9e3779b1) >>> 0 || 1;
    while (phase !== 2) {
      x ^= x << 13; x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5; x >>>= 0;
      const key = keyStrs[Math.floor((x / 4294967296) * o.keys)];
      const p = phase;
      const t0 = process.hrtime.bigint();
      let over = false;
      try {
        await limiter.consume(key, 1);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;  // a Redis error ends the run
        over = true;
      }
      if (p !== 1) continue;
      decisions++;
      if (over) rejected++;
      lat.push(Number(process.hrtime.bigint() - t0));
    }
  }
  const callers = [];
  for (let c = 0; c < o.callers; c++) callers.push(caller(c + 1));
  const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
  await sleep(o.warmup);
  const t0 = process.hrtime.bigint();
  phase = 1;
  await sleep(o.seconds);
  phase = 2;
  const t1 = process.hrtime.bigint();
  await Promise.all(callers);
  client.disconnect();

  const secs = Number(t1 - t0) / 1e9;
  lat.sort((a, b) => a - b);
  const pct = (q) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] / 1000 : 0);
  process.stdout.write(
    `peer=rate-limiter-flexible/${RLF_VERSION} client=ioredis/${IOREDIS_VERSION}` +
      ` auto_pipelining=${o.autoPipelining ? 1 : 0} callers=${o.callers} keys=${o.keys}` +
      ` seconds=${secs.toFixed(2)} decisions=${decisions}` +
      ` decisions_per_s=${Math.round(decisions / secs)}` +
      ` p50_us=${pct(0.5).toFixed(1)} p99_us=${pct(0.99).toFixed(1)} rejected=${rejected}` +
      ` node=${process.version}\n`);
}

main().catch((e) => {
  process.stderr.write(`rlf_redis.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});

# shellcheck shell=bash
# Sourced by the benchmark scripts: free loopback ports and a private redis-server.
#
# Ports come from 10000-32767, below the kernel's ephemeral range (32768-60999), which every
# outgoing connection draws its local port from: a port checked free up there can be taken by a
# client before our server binds it. A server that still cannot start is retried on another port.

# free_port: a 127.0.0.1 port in 10000-32767 nothing answers on now.
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % 22768))
    # Nothing answers on it: connecting fails.
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "free_port: no free loopback port in 10000-32767" >&2
  return 1
}

# start_private_redis LOGFILE [redis-server options...]: a redis-server with no persistence on
# a free port; sets redis_port and redis_pid once it answers PING. It waits up to 30 s for a
# slow machine, tries 5 ports when one cannot be bound, and on failure prints redis's log and
# returns 1. Not in a subshell ($(...)): it sets variables. The caller stops it (kill $redis_pid).
start_private_redis() {
  local log=$1 try _
  shift
  for try in 1 2 3 4 5; do
    redis_port=$(free_port) || return 1
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
      --logfile "$log" "$@" &
    redis_pid=$!
    for _ in $(seq 300); do
      timeout 5 redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && return 0
      kill -0 "$redis_pid" 2>/dev/null || break  # it exited: could not bind, most likely
      sleep 0.1
    done
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    echo "redis-server on port $redis_port did not answer (try $try of 5):" \
      "$(tail -n 3 "$log" 2>/dev/null | tr '\n' ' ')" >&2
  done
  return 1
}

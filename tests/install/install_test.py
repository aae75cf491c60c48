#!/usr/bin/env python3
"""sluice as an installed library (docs/install.md).

  install_test.py --build-dir DIR --source-dir DIR
      `cmake --install`s the build into a temporary prefix, checks what is there, then builds
      a program outside the tree against it both ways -- a CMake project with
      find_package(sluice CONFIG) (examples/cpp, on sluice::sluice and sluice::client, and a
      Redis consumer, sluice::redis, that includes every installed header) and a plain
      compiler command with `pkg-config --cflags --libs sluice` -- and runs them.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from examples_test import check_in_process

# The Redis consumer, built against sluice::redis: a limit whose Redis is not there answers by
# its failure policy (closed here), which says hiredis is linked and the store runs. It includes
# every installed header first: none may need one that was not installed.
REDIS_CONSUMER = r"""
{all_headers}
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include "sluice/redis_store.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  sluice::RedisStoreOptions options;
  options.port = std::atoi(argv[1]);
  options.fail_open = false;
  options.monitor_interval = std::chrono::milliseconds(0);
  sluice::LimitSpec spec;
  spec.limit = 10;
  spec.period = std::chrono::seconds(1);
  auto limiter = sluice::MakeRedisLimiter(spec, options);
  if (!limiter) return 3;
  sluice::MonotonicClock clock;
  sluice::Decision d = (*limiter)->Decide("k", clock.Now(), 1);
  std::printf("allowed=%d degraded=%d unavailable=%d\n", d.allowed, d.degraded,
              d.reason == sluice::DecisionReason::kStoreUnavailable);
  return 0;
}
"""

CONSUMER_CMAKE = """
cmake_minimum_required(VERSION 3.25)
project(sluice_consumer LANGUAGES CXX)
find_package(sluice 0.1 CONFIG REQUIRED COMPONENTS sluice redis client)
add_subdirectory({examples} examples)
add_executable(redis_consumer redis_consumer.cc)
target_link_libraries(redis_consumer PRIVATE sluice::redis)
"""

TIMEOUT = 300  # per command: a compile on a loaded 2-core machine can take a minute


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kwargs):
    """Runs cmd; fails the test with its output if it exits non-zero."""
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)
    if r.returncode != 0:
        fail(f"{cmd[0]} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def closed_port():
    """A loopback port nobody listens on (it was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def libdir_of(prefix):
    """lib, or lib/<multiarch> when the build was configured for /usr (GNUInstallDirs)."""
    for root, _, files in os.walk(prefix):
        if "sluice.pc" in files:
            return os.path.relpath(os.path.dirname(root), prefix)
    fail(f"no sluice.pc under {prefix}")


def check_installed_files(prefix):
    lib = libdir_of(prefix)
    for want in ["bin/sluiced", "bin/sluice", "include/sluice/memory_store.h",
                 "include/sluice/redis_store.h", "include/sluice/store.h",
                 f"{lib}/libsluice_core.a", f"{lib}/libsluice_memory.a",
                 f"{lib}/libsluice_redis.a", f"{lib}/libsluice_client.a",
                 "include/sluice/client/client.h", f"{lib}/cmake/sluice/sluiceConfig.cmake",
                 f"{lib}/cmake/sluice/sluiceTargets.cmake", f"{lib}/pkgconfig/sluice.pc"]:
        if not os.path.exists(os.path.join(prefix, want)):
            fail(f"cmake --install left out {want}")
    # Headers of libraries that are not installed would promise symbols nobody can link.
    for unwanted in ["include/sluice/open_store.h", "include/sluice/batched_store.h", "etc"]:
        if os.path.exists(os.path.join(prefix, unwanted)):
            fail(f"cmake --install put {unwanted} under the prefix")
    print(f"ok: the installed files under {prefix}")


def build_with_cmake(prefix, source_dir, work):
    project = os.path.join(work, "consumer")
    os.makedirs(project)
    examples = os.path.join(source_dir, "examples", "cpp").replace("\\", "/")
    with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
        f.write(CONSUMER_CMAKE.format(examples=examples))
    with open(os.path.join(project, "redis_consumer.cc"), "w") as f:
        include = os.path.join(prefix, "include")
        headers = sorted(os.path.relpath(os.path.join(root, h), include)
                         for root, _, files in os.walk(include) for h in files)
        f.write(REDIS_CONSUMER.replace("{all_headers}", "\n".join(
            f'#include "{h}"' for h in headers)))
    build = os.path.join(work, "consumer-build")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    # CMAKE_PREFIX_PATH only: nothing of sluice's own build may leak into the consumer. No
    # build type: unoptimized, the quickest to compile.
    run(["cmake", "-S", project, "-B", build, *generator, f"-DCMAKE_PREFIX_PATH={prefix}"])
    run(["cmake", "--build", build])
    check_in_process(os.path.join(build, "examples", "in_process_limiter"))
    out = run([os.path.join(build, "redis_consumer"), str(closed_port())]).strip()
    if out != "allowed=0 degraded=1 unavailable=1":
        fail(f"redis_consumer without a Redis: {out}")
    print("ok: sluice::redis without a Redis answers by its failure policy")


def build_with_pkg_config(prefix, source_dir, work):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, libdir_of(prefix), "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "sluice"], env=env).split()
    binary = os.path.join(work, "in_process_limiter_pc")
    source = os.path.join(source_dir, "examples", "cpp", "in_process_limiter.cc")
    run([os.environ.get("CXX", "c++"), "-std=c++23", source, "-o", binary, *flags])
    check_in_process(binary)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build-dir", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--work-dir", help="emptied first; a fixed place lets ccache hit on reruns")
    a = p.parse_args()
    a.source_dir = os.path.abspath(a.source_dir)
    a.build_dir = os.path.abspath(a.build_dir)
    work = a.work_dir or tempfile.mkdtemp(prefix="sluice-install-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prefix = os.path.join(work, "prefix")
    run(["cmake", "--install", a.build_dir, "--prefix", prefix])
    check_installed_files(prefix)
    build_with_cmake(prefix, a.source_dir, work)
    build_with_pkg_config(prefix, a.source_dir, work)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()

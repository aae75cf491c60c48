#!/usr/bin/env bash
# --store-file / --global-store-file (SLUICE_STORE_FILE): the address is read from a file, its
# trailing newline dropped; a file others may read is refused; the flag excludes --store; the
# password is never printed. Usage: store_file_test.sh SLUICED CONFIG
set -euo pipefail
sluiced=$1 config=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf 'redis://app:s3cret-pw@127.0.0.1:1/3\n' >"$dir/store"
chmod 0644 "$dir/store"
out=$("$sluiced" --config "$config" --check-config --store-file "$dir/store" 2>&1) && fail "a world-readable file was accepted"
grep -q "chmod o-rwx" <<<"$out" || fail "no reason given: $out"

chmod 0600 "$dir/store"
out=$("$sluiced" --config "$config" --check-config --store-file "$dir/store" 2>&1) || fail "$out"
grep -q 'redis://\*\*\*@127.0.0.1:1/3' <<<"$out" || fail "not the file's address: $out"
grep -q 's3cret' <<<"$out" && fail "the password was printed: $out"
out=$(SLUICE_STORE_FILE="$dir/store" "$sluiced" --config "$config" --check-config 2>&1) || fail "$out"
grep -q 'redis://\*\*\*@127.0.0.1:1/3' <<<"$out" || fail "SLUICE_STORE_FILE not read: $out"

"$sluiced" --config "$config" --check-config --store-file "$dir/store" --store memory >/dev/null 2>&1 &&
  fail "--store and --store-file together were accepted"
: >"$dir/empty"
chmod 0600 "$dir/empty"
"$sluiced" --config "$config" --check-config --store-file "$dir/empty" >/dev/null 2>&1 &&
  fail "an empty store file was accepted"
"$sluiced" --config "$config" --check-config --global-store-file "$dir/missing" >/dev/null 2>&1 &&
  fail "a missing global store file was accepted"
echo "store file: ok"

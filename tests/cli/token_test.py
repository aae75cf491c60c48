#!/usr/bin/env python3
"""`sluice token`: the printed token is 32 random bytes in base64url after "sluice_", and the
printed file line is its SHA-256 as Python's hashlib computes it (an independent implementation).

  token_test.py SLUICE_BIN
"""
import base64
import hashlib
import re
import subprocess
import sys


def run(sluice):
    out = subprocess.run([sluice, "token"], check=True, capture_output=True, text=True).stdout
    lines = out.split("\n")
    assert len(lines) == 3 and lines[2] == "", f"expected two lines, got {out!r}"
    return lines[0], lines[1]


def main():
    sluice = sys.argv[1]
    seen = set()
    for _ in range(3):
        token, line = run(sluice)
        m = re.fullmatch(r"sluice_([A-Za-z0-9_-]{43})", token)
        assert m, "the token is not sluice_ and 43 base64url characters"
        raw = base64.urlsafe_b64decode(m.group(1) + "=")
        assert len(raw) == 32, f"the token carries {len(raw)} bytes, not 32"
        expected = "token_sha256: " + hashlib.sha256(token.encode()).hexdigest()
        assert line == expected, f"the file line {line!r} is not the token's SHA-256"
        seen.add(token)
    assert len(seen) == 3, "sluice token printed the same token twice"
    print("ok: 3 tokens, each 32 bytes, each line its SHA-256")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Rewrites a FlexPipe checkpoint file of format version 3 as version 2 (no
precision field), in place, with its checksum: what an earlier FlexPipe
wrote. Usage: checkpoint-as-v2.py FILE"""
import struct
import sys

path = sys.argv[1]
b = open(path, "rb").read()[:-8]
assert b[:8] == b"FLXPCKPT" and struct.unpack_from("<I", b, 8)[0] == 3
at = 8 + 4 + 8 + 8  # magic, version, run, schedule hash
for _ in range(2):  # schedule name, model
    at += 4 + struct.unpack_from("<I", b, at)[0]
at += 4 * 4 + 8 + 4  # actors, dp, ranks, rank; iterations; lr
precision = 4 + struct.unpack_from("<I", b, at)[0]
b = b[:8] + struct.pack("<I", 2) + b[12:at] + b[at + precision:]
h = 0xCBF29CE484222325
for c in b:
    h = ((h ^ c) * 0x100000001B3) % 2**64
open(path, "wb").write(b + struct.pack("<Q", h))

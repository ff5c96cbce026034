#!/usr/bin/env python3
"""Writes a NaN into the first value of every parameter of a rank's
checkpoint file (runtime/lib/Checkpoint.cpp's format) and mends its
checksum: a run resumed from it computes with weights that are not numbers
(one in the token embedding alone is read only for token 0).

usage: poison-checkpoint.py FILE
"""
import struct
import sys

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a(data):
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    path = sys.argv[1]
    data = bytearray(open(path, "rb").read())
    (version,) = struct.unpack_from("<I", data, 8)
    at = 8 + 4 + 8 + 8  # magic, version, run, schedule hash

    def string(at):
        (n,) = struct.unpack_from("<I", data, at)
        return at + 4 + n

    at = string(string(at))  # schedule name, model
    at += 4 * 4 + 8 + 4  # actors, dp, ranks, rank; iterations; lr
    if version >= 3:
        at = string(at)  # precision
    (losses,) = struct.unpack_from("<Q", data, at)
    at += 8 + 8 * losses + 8  # losses, Adam's step
    (parameters,) = struct.unpack_from("<Q", data, at)
    if parameters == 0:
        sys.exit("poison-checkpoint.py: %s holds no parameters" % path)
    at += 8
    for _ in range(parameters):
        at = string(at)  # its name
        (n,) = struct.unpack_from("<Q", data, at)
        at += 8
        struct.pack_into("<f", data, at, float("nan"))
        at += 3 * 4 * n  # value, m, v
    struct.pack_into("<Q", data, len(data) - 8, fnv1a(data[:-8]))
    open(path, "wb").write(data)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What an append costs the disk, by how the file was prepared: a write of SIZE bytes and an fdatasync, 1000
times back to back, into a file that (append) grows with each write, (zeroed) was written full of zeros and
fsynced first, (fallocate) was posix_fallocate'd, or (ftruncate) was only given its length. Prints the p50 and
p90 of each. The reason the safekeepers write zeros ahead of their WAL (safekeeper/src/filestore/mod.rs).

    scripts/bench-fsync-modes.py [SIZE_BYTES] [DIR]     (defaults: 16000, target/)
"""
import os, sys, time

size = int(sys.argv[1]) if len(sys.argv) > 1 else 16000
root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
os.makedirs(root, exist_ok=True)
rounds = 1000


def run(mode):
    path = os.path.join(root, f"fsync-mode-{mode}")
    if os.path.exists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        length = rounds * size + 4096
        if mode == "zeroed":
            os.write(fd, b"\0" * length)
            os.fsync(fd)
        elif mode == "fallocate":
            os.posix_fallocate(fd, 0, length)
            os.fsync(fd)
        elif mode == "ftruncate":
            os.ftruncate(fd, length)
            os.fsync(fd)
        data = b"x" * size
        times = []
        for i in range(rounds):
            start = time.perf_counter()
            os.pwrite(fd, data, i * size)
            os.fdatasync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return times[len(times) // 2] * 1e6, times[len(times) * 9 // 10] * 1e6


for mode in ["append", "zeroed", "fallocate", "ftruncate"]:
    p50, p90 = run(mode)
    print(f"{mode:10s} {size} B: p50 {p50:.0f} µs, p90 {p90:.0f} µs")

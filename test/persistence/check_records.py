#!/usr/bin/env python3
"""Checks a disk image written by test/persistence/power_cut.c.

    check_records.py IMAGE LAST

Records 0..LAST (LAST -1: none) were reported flushed: each must be in IMAGE
intact (magic, number, fill pattern). Prints one line: how many were checked,
how many are missing or damaged, and how many records beyond LAST are there
too. Exit status: 0 when none is lost, 1 otherwise, 2 on bad usage.
"""
import struct
import sys

RECORD_SIZE = 512
RECORD_MAGIC = 0x4152504D41524543


def expected(n):
    head = struct.pack("<QQ", RECORD_MAGIC, n)
    return head + bytes((n * 31 + i) & 0xFF for i in range(16, RECORD_SIZE))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], "rb") as image:
        data = image.read()
    last = int(argv[2])
    lost = [n for n in range(last + 1)
            if data[n * RECORD_SIZE:(n + 1) * RECORD_SIZE] != expected(n)]
    beyond = 0
    n = last + 1
    while (n + 1) * RECORD_SIZE <= len(data) and \
            data[n * RECORD_SIZE:(n + 1) * RECORD_SIZE] == expected(n):
        beyond += 1
        n += 1
    print(f"records reported: {last + 1}, lost or damaged: {len(lost)}"
          f"{' (first: %d)' % lost[0] if lost else ''}, intact beyond them: {beyond}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

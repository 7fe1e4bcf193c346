#!/usr/bin/env python3
"""Writes the seed corpora of the data-path, validator and descriptor harnesses
(test/fuzz/corpus/<name>/) from the documented layouts: docs/soft-provider.md
("Wire protocol") for frames, librpma's descriptor layouts for descriptors, and
each harness's header comment for its input layout. Run from anywhere; it
rewrites those five directories (soft_cm_frames' seeds are kept as they are)."""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x4152504D


def frame(ftype, payload=b""):
    return struct.pack(">IBBHI", MAGIC, 1, ftype, 0, len(payload)) + payload


def remote(key, offset):
    """rkey field < 8: the harness maps it to a region, offset from its base."""
    return struct.pack(">IQ", key, offset & 0xFFFFFFFFFFFFFFFF)


SEND, SEND_IMM, WRITE, WRITE_IMM, READ, ATOMIC, FLUSH, ACK, NAK, READ_RESP = range(16, 26)
R0, R1, R2, L = 0, 1, 2, 3  # regions of soft_datapath_frames_fuzz


def dp(recvs=0, recv_len=0, posts=b"", frames=()):
    return bytes([recvs, recv_len, len(posts)]) + posts + b"".join(frames)


def datapath_seeds():
    s = {}
    s["write_r0"] = dp(frames=[frame(WRITE, remote(R0, 0) + b"hello")])
    s["write_r0_last_byte"] = dp(frames=[frame(WRITE, remote(R0, 1023) + b"x")])
    s["write_r0_one_past"] = dp(frames=[frame(WRITE, remote(R0, 1020) + b"12345")])
    s["write_r0_before_base"] = dp(frames=[frame(WRITE, remote(R0, -1) + b"ab")])
    s["write_r1_read_only"] = dp(frames=[frame(WRITE, remote(R1, 0) + b"no")])
    s["write_r2_other_pd"] = dp(frames=[frame(WRITE, remote(R2, 0) + b"no")])
    s["write_local_only"] = dp(frames=[frame(WRITE, remote(L, 0) + b"no")])
    s["write_raw_rkey"] = dp(frames=[frame(WRITE, struct.pack(">IQ", 0xDEADBEEF, 0x1000) + b"z")])
    s["write_empty"] = dp(frames=[frame(WRITE, remote(R0, 5))])
    s["write_imm_recv"] = dp(1, 16, frames=[frame(WRITE_IMM, remote(R0, 8) + struct.pack(">I", 77) + b"data")])
    s["write_imm_no_recv"] = dp(frames=[frame(WRITE_IMM, remote(R0, 8) + struct.pack(">I", 77) + b"data")])
    s["read_r0"] = dp(frames=[frame(READ, remote(R0, 16) + struct.pack(">I", 32))])
    s["read_r1"] = dp(frames=[frame(READ, remote(R1, 500) + struct.pack(">I", 12))])
    s["read_r1_past_end"] = dp(frames=[frame(READ, remote(R1, 500) + struct.pack(">I", 13))])
    s["read_zero"] = dp(frames=[frame(READ, struct.pack(">IQI", 0x12345678, 0, 0))])
    s["read_oversized"] = dp(frames=[frame(READ, remote(R0, 0) + struct.pack(">I", (8 << 20) + 1))])
    s["atomic_r0"] = dp(frames=[frame(ATOMIC, remote(R0, 64) + b"ABCDEFGH")])
    s["atomic_unaligned"] = dp(frames=[frame(ATOMIC, remote(R0, 65) + b"ABCDEFGH")])
    s["atomic_last_word"] = dp(frames=[frame(ATOMIC, remote(R0, 1016) + b"ABCDEFGH")])
    s["flush_range_global"] = dp(frames=[frame(FLUSH, remote(R0, 0) + struct.pack(">QBB", 64, 0, 0))])
    s["flush_mr_persistent"] = dp(frames=[frame(FLUSH, remote(R0, 0) + struct.pack(">QBB", 0, 1, 1))])
    s["flush_r1_no_access"] = dp(frames=[frame(FLUSH, remote(R1, 0) + struct.pack(">QBB", 8, 0, 0))])
    s["flush_bad_type"] = dp(frames=[frame(FLUSH, remote(R0, 0) + struct.pack(">QBB", 8, 2, 0))])
    s["send_fits"] = dp(2, 32, frames=[frame(SEND, b"message"), frame(SEND_IMM, struct.pack(">I", 5) + b"m2")])
    s["send_too_long"] = dp(1, 4, frames=[frame(SEND, b"too long"), frame(WRITE, remote(R0, 0) + b"after")])
    s["send_no_recv"] = dp(frames=[frame(SEND, b"rnr")])
    # responses: write (0), read (1), send (2), signaled (4), length << 3
    posts = bytes([4 | (8 << 3), 1 | 4 | (16 << 3), 2 | (4 << 3)])
    s["ack_write_then_read_resp"] = dp(posts=posts, frames=[frame(ACK, struct.pack(">I", 1)), frame(READ_RESP, b"R" * 16), frame(ACK, struct.pack(">I", 1))])
    s["ack_too_many"] = dp(posts=posts, frames=[frame(ACK, struct.pack(">I", 3))])
    s["ack_zero"] = dp(posts=posts, frames=[frame(ACK, struct.pack(">I", 0))])
    s["nak_access"] = dp(1, 8, posts=posts, frames=[frame(NAK, struct.pack(">I", 10)), frame(WRITE, remote(R0, 0) + b"ignored")])
    s["nak_unknown_status"] = dp(posts=posts, frames=[frame(NAK, struct.pack(">I", 3))])
    s["read_resp_wrong_length"] = dp(posts=bytes([1 | 4 | (16 << 3)]), frames=[frame(READ_RESP, b"short")])
    s["cm_frame_skipped"] = dp(frames=[frame(4), frame(WRITE, remote(R0, 0) + b"x")])
    s["bad_magic"] = dp(frames=[b"\x00" * 12 + b"x"])
    s["truncated_payload"] = dp(frames=[frame(WRITE, remote(R0, 0) + b"0123456789")[:-3]])
    return s


def access_seeds():
    s = {}
    region = struct.pack("<QQHB", 0x10000, 4096, 0x30F, 0)
    def q(addr, length, need, pd=0, mode=0, extra=b""):
        return struct.pack("<QQHBB", addr & 0xFFFFFFFFFFFFFFFF, length, need, pd, mode) + extra
    s["inside"] = region + q(0x10000, 4096, 2) + q(0x10010, 16, 4)
    s["edges"] = region + q(0x10FFF, 1, 2) + q(0x11000, 0, 2) + q(0x11000, 1, 2) + q(0xFFFF, 1, 2)
    s["relative"] = region + q(0, 4096, 2, mode=1) + q(4096, 1, 2, mode=1) + q(-1, 2, 2, mode=1)
    s["huge_len"] = region + q(0x10000, 0xFFFFFFFFFFFFFFFF, 2) + q(0x10001, 0xFFFFFFFFFFFFFFFF, 0)
    s["wrong_pd_or_access"] = region + q(0x10000, 1, 2, pd=1) + q(0x10000, 1, 0x400)
    s["top_of_space"] = struct.pack("<QQHB", 0xFFFFFFFFFFFFF000, 0xFFFFFFFFFFFFFFFF, 6, 1) + q(0xFFFFFFFFFFFFFFFF, 1, 2, pd=1) + q(0xFFFFFFFFFFFFF000, 0x1000, 2, pd=1)
    s["table_regions"] = region + q(0, 1024, 2, mode=1 | 2) + q(1020, 8, 2, mode=1 | 2) + q(0, 4, 2, mode=1 | 2 | 4) + q(0, 4, 2, pd=1, mode=1 | 2 | 8)
    s["table_raw_rkey"] = region + q(0, 4, 2, mode=1 | 2 | 16, extra=struct.pack("<I", 0x12345678))
    return s


def mr_seeds():
    s = {}
    def desc(addr, size, rkey, usage):
        return struct.pack("<QQIB", addr, size, rkey, usage)
    s["read_write"] = desc(0x7F0000001000, 4096, 0xABCD, 0x0F)
    s["persistent"] = desc(0x1000, 1 << 30, 1, 0x20 | 0x08)
    s["visibility"] = desc(0, 0, 0, 0x10)
    s["all_bits"] = desc(0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFF)
    s["usage_zero"] = desc(0x1000, 64, 7, 0)
    s["short_20"] = desc(0x1000, 64, 7, 1)[:20]
    s["long_32"] = desc(0x1000, 64, 7, 0x30) + b"\x00" * 11
    s["empty"] = b""
    return s


def peer_seeds():
    return {"zero": b"\x00", "one": b"\x01", "other": b"\x7f", "long": b"\x01\x00\xff", "empty": b""}


def link_seeds():
    """soft_link_fuzz: the stream after the handshake; 'RK' xx and 'AD' + 6 bytes
    are the harness's placeholders for the region's rkey and base + offset."""
    def at(offset):
        return b"RK\x00\x00" + b"AD" + struct.pack(">Q", offset)[2:]
    s = {}
    s["write"] = frame(WRITE, at(0) + bytes(range(64)))
    s["write_oob"] = frame(WRITE, at(4090) + b"x" * 16)
    s["read"] = frame(READ, at(128) + struct.pack(">I", 256))
    s["reads_past_resources"] = frame(READ, at(0) + struct.pack(">I", 4096)) * 40
    s["send"] = frame(SEND, b"hello") + frame(SEND_IMM, struct.pack(">I", 7) + b"imm")
    s["sends_past_receives"] = frame(SEND, b"a") * 5 + frame(SEND) * 2000
    s["atomic"] = frame(ATOMIC, at(8) + b"\x01" * 8) + frame(ATOMIC, at(3) + b"\x02" * 8)
    s["flush"] = frame(FLUSH, at(0) + struct.pack(">QBB", 4096, 1, 0))
    s["ack_of_nothing"] = frame(ACK, struct.pack(">I", 3))
    s["partial"] = frame(WRITE, at(0) + b"y" * 64)[:30]
    s["garbage"] = bytes(range(256))
    return s


def write(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)


write("soft_datapath_frames", datapath_seeds())
write("soft_mr_access", access_seeds())
write("mr_descriptor", mr_seeds())
write("peer_cfg_descriptor", peer_seeds())
write("soft_link", link_seeds())

#!/usr/bin/env python3
"""Reads tenax token datasets with nothing from tenax: the header with struct, the payload with numpy, CRC32C bit by
bit. Runs the C++ fixture writer into a fresh directory and checks, for a 2-byte and a 4-byte dataset:
  - index.json: format, version, its own checksum (CRC32C of every byte before "index_crc32c"), the tokenizer's
    size and checksum, token counts that add up;
  - every shard: the header layout of docs/data-format.md (magic, version, sizes, 8-byte aligned payload, reserved
    zeros, header checksum), the file size, the payload checksum in the header and in the index;
  - the tokens of each split's stream equal the raw int32 tokens the fixture was given.
usage: read_shards_test.py FIXTURE_WRITER
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def crc32c_fast(data: bytes) -> int:
    """The same CRC through a 256-entry table built from the bitwise definition (large payloads)."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    crc = 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


HEADER = struct.Struct("<8sIIIIQQIII8sI")  # docs/data-format.md, 64 bytes
assert HEADER.size == 64


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def read_dataset(path):
    text = open(os.path.join(path, "index.json"), "rb").read()
    index = json.loads(text)
    check(index["format"] == "tenax-token-dataset" and index["version"] == 1, "format/version")
    key = text.rfind(b'"index_crc32c"')
    check(list(index)[-1] == "index_crc32c", "index_crc32c is the last member")
    check(crc32c(text[:key]) == index["index_crc32c"], "index checksum")
    vocab = index["vocab_size"]
    width = 2 if vocab <= 65536 else 4
    check(index["token_bytes"] == width, "token width from vocab")
    tok = open(os.path.join(path, index["tokenizer"]["file"]), "rb").read()
    check(len(tok) == index["tokenizer"]["bytes"] and crc32c(tok) == index["tokenizer"]["crc32c"], "tokenizer")
    streams = {}
    for split_no, split in enumerate(("train", "validation")):
        entry = index["splits"][split]
        parts = []
        for number, shard in enumerate(entry["shards"]):
            raw = open(os.path.join(path, shard["file"]), "rb").read()
            (magic, version, header_bytes, token_bytes, vocab_size, count, offset, payload_crc, split_id, shard_no,
             reserved, header_crc) = HEADER.unpack_from(raw, 0)
            check(magic == b"TNXTOKSH" and version == 1 and header_bytes == 64, "magic/version/header size")
            check(token_bytes == width and vocab_size == vocab, "width/vocab")
            check(offset == 64 and offset % 8 == 0, "payload offset")
            check(split_id == split_no and shard_no == number, "split/shard number")
            check(reserved == bytes(8), "reserved zero")
            check(crc32c(raw[:60]) == header_crc, "header checksum")
            check(count == shard["tokens"], "token count")
            check(len(raw) == offset + count * width, "file size")
            payload = raw[offset:]
            check(crc32c_fast(payload) == payload_crc == shard["crc32c"], "payload checksum " + shard["file"])
            parts.append(np.frombuffer(payload, dtype="<u2" if width == 2 else "<u4").astype(np.int64))
        stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        check(len(stream) == entry["tokens"], "split token count")
        check(stream.size == 0 or int(stream.max()) < vocab, "ids below vocab")
        streams[split] = stream
    return streams, width


def main():
    writer = sys.argv[1]
    out = tempfile.mkdtemp(prefix="tenax-data-pyreader-")
    try:
        subprocess.run([writer, out], check=True)
        widths = set()
        for name in ("u16", "u32"):
            streams, width = read_dataset(os.path.join(out, name))
            widths.add(width)
            for split, stream in streams.items():
                expected = np.fromfile(os.path.join(out, f"{name}_expected_{split}.i32"), dtype="<i4")
                check(len(expected) > 10000 or split == "validation", "fixture size")
                if not np.array_equal(stream, expected.astype(np.int64)):
                    bad = int(np.nonzero(stream != expected)[0][0]) if len(stream) == len(expected) else -1
                    raise AssertionError(f"{name} {split}: tokens differ (first at {bad})")
            print(f"{name}: {sum(len(s) for s in streams.values())} tokens of {width} bytes read back and checked")
        check(widths == {2, 4}, "both token widths")
        check(crc32c(b"123456789") == 0xE3069283, "CRC32C check value")
    finally:
        shutil.rmtree(out)


if __name__ == "__main__":
    main()

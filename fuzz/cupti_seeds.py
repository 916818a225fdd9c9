#!/usr/bin/env python3
"""Seeds for the CUPTI record parser's fuzzer, cut from the real H200
recordings in ../shared/data/gpu (never copied into the repository).

  fuzz/cupti_seeds.py GPU_DATA_DIR OUT_DIR [MAX_BYTES]

Each seed is one byte that picks the fuzzer's form, then the bytes:
  - odd (1): a run of whole consecutive records of one activity buffer, cut
    at record boundaries, at most MAX_BYTES (default 4096) long; runs start
    at every kind of record the recordings hold;
  - even (0): the smallest whole recording file (h200_loop.bin), as is.
Record sizes are CUPTI 13.0's (the strides the real buffers have).
"""
import gzip
import os
import struct
import sys

# CUpti_ActivityKind -> record size in CUPTI 13.0 (as walked by
# cuptiActivityGetNextRecord on these recordings).
SIZES = {1: 96, 2: 88, 4: 40, 5: 40, 10: 216, 17: 56, 38: 56, 39: 24, 49: 128, 50: 80}


def buffers(data):
    off = 16
    while off + 8 <= len(data):
        (size,) = struct.unpack_from("<Q", data, off)
        if size == 0:
            return
        yield data[off + 16: off + 16 + size]
        off += 16 + size


def records(buf):
    off = 0
    while off + 4 <= len(buf):
        (kind,) = struct.unpack_from("<I", buf, off)
        size = SIZES.get(kind)
        if size is None or off + size > len(buf):
            return
        yield kind, off, size
        off += size


def main():
    src, out = sys.argv[1], sys.argv[2]
    max_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    os.makedirs(out, exist_ok=True)
    n = 0
    loop = os.path.join(src, "h200", "h200_loop.bin")
    files = [loop, os.path.join(src, "h200", "resnet18_8steps_injected.bin.gz")]
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read()
        if path == loop:
            with open(os.path.join(out, "recording_h200_loop.bin"), "wb") as f:
                f.write(b"\x00" + data)
            n += 1
        seen_kinds = {}
        for bi, buf in enumerate(buffers(data)):
            recs = list(records(buf))
            for i, (kind, off, _) in enumerate(recs):
                # A few runs starting at each kind, and one every 200 records.
                if seen_kinds.get(kind, 0) >= 3 and i % 200:
                    continue
                seen_kinds[kind] = seen_kinds.get(kind, 0) + 1
                end = off
                for _, o2, s2 in recs[i:]:
                    if o2 + s2 - off > max_bytes:
                        break
                    end = o2 + s2
                name = "buffer_%s_%d_%d_kind%d.bin" % (os.path.basename(path).split(".")[0], bi, i, kind)
                with open(os.path.join(out, name), "wb") as f:
                    f.write(b"\x01" + buf[off:end])
                n += 1
    print("cupti_seeds: %d seeds in %s" % (n, out))


if __name__ == "__main__":
    main()

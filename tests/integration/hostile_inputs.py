"""Hostile inputs for `tvmffi-jit inspect`, generated without any compressor
or toolkit: decompression bombs (zstd frames of RLE blocks, LZ4 blocks of one
long match), huge entry/section/symbol counts, overlapping sections and
embedded blobs, fatbin lookalikes, archives sharing one long member name.

Used by tests/integration/test_inspect_hostile.py (each must be refused or
listed, exit 0 or 3, with the expected message) and by bench/hostile/run.sh
(each within 1 s and 200 MB). `python3 hostile_inputs.py DIR` writes them all
and prints one line per case: name|size|extra arguments|exit code|expected.

Each case: name -> (bytes, extra inspect arguments, expected exit code,
a substring of the file's error (exit 3) or the number of entries (exit 0))."""
import struct
import sys
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
GiB = 1 << 30
MiB = 1 << 20


# ---- compressed payloads -------------------------------------------------

def zstd_rle_frame(size, byte=0):
    """A zstd frame holding `size` copies of `byte`: RLE blocks of 128 KiB,
    4 bytes each, so 1 GiB costs 32 KiB. The frame records its content size."""
    out = bytearray(struct.pack("<IB", 0xFD2FB528, 0xE0) + struct.pack("<Q", size))  # single segment, 8-byte FCS
    left = size
    while left > 0:
        n = min(left, 128 << 10)
        left -= n
        header = (1 if left == 0 else 0) | (1 << 1) | (n << 3)  # last?, RLE, size
        out += struct.pack("<I", header)[:3] + bytes([byte])
    return bytes(out)


def _length_bytes(n):
    """LZ4's extension of a 4-bit length: 255s, then the remainder."""
    return b"\xff" * (n // 255) + bytes([n % 255])


def lz4_block(literals, period, match, tail):
    """An LZ4 block: `literals`, then `match` bytes repeating the `period`
    bytes before them (one sequence, ~255x smaller than its output), then
    `tail` as literals (a block ends in at least 12 literal bytes)."""
    assert match >= 4 and len(tail) >= 12 and 0 < period <= len(literals)
    out = bytearray([(min(len(literals), 15) << 4) | min(match - 4, 15)])
    if len(literals) >= 15:
        out += _length_bytes(len(literals) - 15)
    out += literals + struct.pack("<H", period)
    if match - 4 >= 15:
        out += _length_bytes(match - 4 - 15)
    out.append(min(len(tail), 15) << 4)
    if len(tail) >= 15:
        out += _length_bytes(len(tail) - 15)
    return bytes(out + tail)


# ---- fatbin ----------------------------------------------------------------

def fatbin_entry(kind, payload, decompressed=0, flags=0, arch=90):
    """One entry: kind 1 PTX, 2 ELF, 8 LTO-IR; flags 0x2000 LZ4, 0x8000 zstd."""
    pad = bytes((-len(payload)) % 8)
    h = bytearray(64)
    struct.pack_into("<HHIQ", h, 0, kind, 0x101, 64, len(payload) + len(pad))
    struct.pack_into("<I", h, 16, len(payload) if flags & 0xA000 else 0)
    struct.pack_into("<HHI", h, 24, 8, 1, arch)
    struct.pack_into("<Q", h, 40, flags)
    struct.pack_into("<Q", h, 56, decompressed)
    return bytes(h) + payload + pad


def fatbin(entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(body)) + body


# ---- ELF -------------------------------------------------------------------

class Section:
    def __init__(self, name, type_, data=b"", flags=0, link=0, info=0, entsize=0, offset=None, size=None):
        self.name, self.type, self.data, self.flags = name, type_, data, flags
        self.link, self.info, self.entsize = link, info, entsize
        self.offset, self.size = offset, size  # forced header values (overlaps)


def elf(sections, machine=62, etype=3, flags=0):
    """ELF64 LE: header, section data, .shstrtab, section headers. Section 0
    is added; `link`/`info` are section indices (1-based as in the file)."""
    names = bytearray(b"\0")
    name_off = {}
    for s in sections:
        if s.name not in name_off:
            name_off[s.name] = len(names)
            names += s.name.encode() + b"\0"
    name_off.setdefault(".shstrtab", len(names))
    if ".shstrtab".encode() + b"\0" not in bytes(names):
        names += b".shstrtab\0"
    data = bytearray(64)
    placed = []
    for s in sections:
        data += bytes((-len(data)) % 8)
        placed.append((len(data), len(s.data)))
        data += s.data
    shstr_off = len(data)
    data += names
    data += bytes((-len(data)) % 8)
    shoff = len(data)
    shnum = len(sections) + 2
    headers = bytearray(64)  # section 0
    for s, (off, size) in zip(sections, placed):
        headers += struct.pack("<IIQQQQIIQQ", name_off[s.name], s.type, s.flags, 0,
                               off if s.offset is None else s.offset, size if s.size is None else s.size,
                               s.link, s.info, 8, s.entsize)
    headers += struct.pack("<IIQQQQIIQQ", name_off[".shstrtab"], 3, 0, 0, shstr_off, len(names), 0, 0, 1, 0)
    big = shnum >= 0xff00
    if big:  # extended numbering: the count lives in section 0's sh_size
        headers[32:40] = struct.pack("<Q", shnum)
    data += headers
    struct.pack_into("<4sBBBBB7xHHIQQQIHHHHHH", data, 0, b"\x7fELF", 2, 1, 1, 0, 0, etype, machine, 1, 0, 0,
                     shoff, flags, 64, 0, 0, 64, 0 if big else shnum, shnum - 1 if not big else 0xffff)
    if big:
        headers_at = shoff
        struct.pack_into("<I", data, headers_at + 40, shnum - 1)  # section 0 sh_link = shstrndx
    return bytes(data)


def symbol(name_off, info, other, shndx, value=0, size=0):
    return struct.pack("<IBBHQQ", name_off, info, other, shndx, value, size)


# ---- the cases ---------------------------------------------------------------

def cases():
    c = {}
    # 1 GiB of zeros claimed by a 32 KiB zstd ELF entry (the 33 KB fatbin).
    c["zstd-bomb-1g.fatbin"] = (fatbin([fatbin_entry(2, zstd_rle_frame(GiB), GiB, 0x8000)]), [], 3,
                                "decompression bomb")
    # 8 of them (the 265 KB fatbin that took 62 s).
    c["zstd-bomb-8x1g.fatbin"] = (fatbin([fatbin_entry(2, zstd_rle_frame(GiB), GiB, 0x8000)] * 8), [], 3,
                                  "decompression bomb")
    # 16 LZ4 LTO-IR entries of 64 MiB of zeros each (LZ4's 255x: 4 MB of file).
    block = lz4_block(bytes(8), 8, 64 * MiB - 8 - 16, bytes(16))
    c["lz4-bomb-16x64m.fatbin"] = (fatbin([fatbin_entry(8, block, 64 * MiB, 0x2000)] * 16), [], 3,
                                   "decompression bomb")
    # Headers claiming more than LZ4 can produce.
    c["lz4-lie.fatbin"] = (fatbin([fatbin_entry(2, block, 1000 * len(block), 0x2000)]), [], 3,
                           "is impossible for")
    # 40,000 entries of an unknown kind (listed, skipped): a valid file.
    c["entries-40k.fatbin"] = (fatbin([fatbin_entry(0x40, b"")] * 40000), [], 0, 40000)
    # 40,000 empty ELF entries: each one an error, the first one reported.
    c["elf-entries-40k.fatbin"] = (fatbin([fatbin_entry(2, b"")] * 40000), [], 3, "entry 0:")
    # A host ELF with 30,000 small .nv_fatbin sections (one container each).
    one = fatbin([fatbin_entry(0x40, b"")])
    c["sections-30k.so"] = (elf([Section(".nv_fatbin", 1, one, flags=2) for _ in range(30000)]), [], 0, 30000)
    # 100,000 section headers over the same bytes (every reader of sections
    # would be quadratic).
    blob = fatbin([fatbin_entry(0x40, b"")] * 1000)
    secs = [Section(".nv_fatbin", 1, blob, flags=2)] + [
        Section(".nv_fatbin", 1, b"", flags=2, offset=64, size=len(blob)) for _ in range(100000)]
    c["overlapping-sections-100k.so"] = (elf(secs), [], 3, "(they overlap)")
    # A cubin (LZ4 entry, 24 MiB decompressed from ~100 KB) whose symbol table
    # is one kernel symbol repeated a million times: same name, same .text,
    # same .nv.info (whose 64 KB of records each kernel would re-read).
    c["kernels-1m.fatbin"] = (kernel_bomb(), [], 3, "listing limit")
    # One symbol name of 1 MiB that 40,000 symbols point at.
    c["long-shared-name.so"] = (long_name_elf(), [], 3, "more than 4 times its size")
    # A TVM FFI module whose 20,000 embedded-cubin symbol pairs all cover one 1 MB fatbin.
    c["embedded-overlap.so"] = (embedded_overlap_elf(), [], 3, "overlap")
    # 4 MiB of fatbin lookalikes in .ldata (--scan-data).
    c["lookalikes.so"] = (lookalike_elf(), ["--scan-data"], 3, "too many fatbin lookalikes")
    # An archive of 50,000 members that share one 1 MiB long name.
    c["ar-long-names.a"] = (archive_long_names(), [], 3, "name is longer than")
    # A PTX file with 300,000 kernels.
    ptx = b".version 8.0\n.target sm_90\n.address_size 64\n" + b"".join(
        b".visible .entry k%d(){ ret; }\n" % i for i in range(300000))
    c["ptx-300k-kernels.ptx"] = (ptx, [], 3, "listing limit")
    return c


def kernel_bomb():
    names = b"\0k\0"
    info_records = struct.pack("<BBH", 4, 0x17, 12) + bytes(12)  # KPARAM_INFO, 16 bytes
    info = info_records * 4096
    count = (24 * MiB) // 24
    # Sections: 1 .shstrtab (added), then .strtab, .nv.info.k, .text.k, .symtab (last: its
    # repeated symbols run to the end of the data, before the header table).
    prefix_sections = [
        Section(".strtab", 3, names),
        Section(".nv.info.k", 0x70000000, info),
        Section(".text.k", 1, bytes(128), flags=6),
    ]
    sym = symbol(1, 0x12, 0x10, 3, 0, 128)
    # The symbol table is built as: null symbol + `count` copies; compressed
    # as LZ4 "prefix + repeat".
    table = bytes(24) + sym * count
    cubin = elf(prefix_sections + [Section(".symtab", 2, table, link=1, entsize=24)], machine=190, etype=2,
                flags=0x5a5a)
    # Everything up to the first real symbol literally, then the symbol
    # repeated, then the rest (.shstrtab, section headers) literally.
    first = cubin.index(bytes(24) + sym) + 24
    end = first + 24 * count
    block = lz4_block(cubin[:first + 24], 24, end - first - 24, cubin[end:])
    return fatbin([fatbin_entry(2, block, len(cubin), 0x2000)])


def long_name_elf():
    strtab = b"\0" + b"a" * MiB + b"\0"
    syms = bytes(24) + symbol(1, 0x12, 0, 3, 0, 0) * 40000
    return elf([Section(".strtab", 3, strtab), Section(".symtab", 2, syms, link=1, entsize=24),
                Section(".text", 1, bytes(16), flags=6)])


def embedded_overlap_elf():
    blob = fatbin([fatbin_entry(0x40, b"")] * 16000)  # ~1 MB
    names = bytearray(b"\0")
    syms = bytearray(24)
    for i in range(20000):
        start = len(names)
        names += b"__tvm_ffi__cubin_k%d\0" % i
        end = len(names)
        names += b"__tvm_ffi__cubin_k%d_end\0" % i
        syms += symbol(start, 0x01, 0, 3, 0, 0) + symbol(end, 0x01, 0, 3, len(blob), 0)
    return elf([Section(".strtab", 3, bytes(names)), Section(".symtab", 2, bytes(syms), link=1, entsize=24),
                Section(".rodata", 1, blob, flags=2)])


def lookalike_elf():
    # Every 64 bytes: an entry header of one long chain (kind 2, header 64,
    # payload 0) and, in its last 16 bytes, a container header whose entries
    # are the rest of that chain, ending 8 bytes short of the container's end
    # (each candidate is rejected only after walking the chain to the end).
    n = 4 * MiB
    blob = bytearray(n)
    for b in range(0, n, 64):
        blob[b:b + 16] = struct.pack("<HHIQ", 2, 0, 64, 0)
        fat = n - b - 64 - 8
        if fat > 0:
            blob[b + 48:b + 64] = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, fat)
    return elf([Section(".ldata", 1, bytes(blob), flags=2)])


def archive_long_names():
    out = bytearray(b"!<arch>\n")
    long_names = b"x" * MiB + b"/\n"
    out += b"%-16s%-12s%-6s%-6s%-8s%-10d`\n" % (b"//", b"0", b"0", b"0", b"644", len(long_names)) + long_names
    member = b"not an object"
    for _ in range(50000):
        if len(out) % 2:
            out += b"\n"
        out += b"%-16s%-12s%-6s%-6s%-8s%-10d`\n" % (b"/0", b"0", b"0", b"0", b"644", len(member)) + member
    return bytes(out)


def write_all(directory):
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, (data, _, _, _) in cases().items():
        (d / name).write_bytes(data)
    return d


if __name__ == "__main__":
    out = write_all(sys.argv[1] if len(sys.argv) > 1 else "hostile")
    for name, (data, args, code, expect) in cases().items():
        print(f"{name}|{len(data)}|{' '.join(args)}|{code}|{expect}")

"""Walking HDF5's indexes: old-style group B-trees with their symbol nodes and local heap,
and the chunk indexes (v1 B-tree, single chunk, implicit, fixed array, extensible array).

Every walk is bounded: nodes are visited once (a cycle is an error), entry counts are checked
against what fits, and a chunk index yields at most one chunk per grid cell.
"""

from __future__ import annotations

import math
import struct

from guideloom.fastread.chunks import first_overlap
from guideloom.h5native.checksum import lookup3
from guideloom.h5native.errors import NativeDamageError, NativeFormatError, NativeUnsupported
from guideloom.h5native.messages import Layout
from guideloom.h5native.objects import Reader

Chunk = tuple[tuple[int, ...], int, int, int]  # (element offset, filter mask, address, size)
MAX_DEPTH = 64
MAX_NODE_ENTRIES = 1 << 16

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def group_members(r: Reader, btree: int, heap: int) -> dict[str, int]:
    """``{name: object header address}`` of an old-style group."""
    names = _local_heap(r, heap)
    out: dict[str, int] = {}
    for snod in _btree_children(r, btree, 0, lambda _n, _k: None):
        _symbol_node(r, snod, names, out)
    return out


def _local_heap(r: Reader, addr: int) -> tuple[bytes, int]:
    """The local heap's data segment and its size."""
    osz, lsz = r.osz, r.lsz
    buf, o = r.blocks.get(addr, 8 + 2 * lsz + osz, "local heap")
    if buf[o:o + 4] != b"HEAP" or buf[o + 4] != 0:
        raise NativeFormatError(f"bad local heap at {addr}")
    size = r.length(buf, o + 8)
    data = r.addr(buf, o + 8 + 2 * lsz)
    if data is None:
        raise NativeFormatError("local heap without a data segment")
    return r.blocks.bytes(data, size, "local heap data"), size


def _name(heap: tuple[bytes, int], offset: int) -> str:
    data, size = heap
    if offset >= size:
        raise NativeFormatError(f"link name offset {offset} beyond the local heap")
    end = data.find(b"\0", offset)
    if end < 0:
        raise NativeFormatError("unterminated link name in the local heap")
    return data[offset:end].decode("utf-8", "replace")


def _symbol_node(r: Reader, addr: int, heap: tuple[bytes, int], out: dict[str, int]) -> None:
    osz = r.osz
    buf, o = r.blocks.get(addr, 8, "symbol table node")
    if buf[o:o + 4] != b"SNOD" or buf[o + 4] != 1:
        raise NativeFormatError(f"bad symbol table node at {addr}")
    n = _U16.unpack_from(buf, o + 6)[0]
    entry = 2 * osz + 24
    buf, o = r.blocks.get(addr, 8 + n * entry, "symbol table node")
    for i in range(n):
        p = o + 8 + i * entry
        name = _name(heap, int.from_bytes(buf[p:p + osz], "little"))
        target = r.addr(buf, p + osz)
        if _U32.unpack_from(buf, p + 2 * osz)[0] == 2:
            raise NativeUnsupported(f"soft link {name!r}")
        if target is None:
            raise NativeFormatError(f"symbol {name!r} points at an undefined address")
        out[name] = target


PREFETCH_ENTRIES = 64  # entries of a v1 B-tree node as HDF5 writes them by default (2K)


def _btree_children(r: Reader, root: int, node_type: int, on_key, rank: int = 0) -> list[int]:
    """Leaf children of a v1 B-tree; ``on_key(n, key bytes)`` sees each leaf's keys."""
    osz = r.osz
    key_size = r.lsz if node_type == 0 else 8 + 8 * (rank + 1)
    out: list[int] = []
    seen: set[int] = set()
    stack: list[tuple[int, int | None]] = [(root, None)]  # (node, the level it must have)
    while stack:
        addr, want_level = stack.pop()
        if addr in seen:
            raise NativeFormatError(f"B-tree cycle at {addr}")
        seen.add(addr)
        if len(seen) > MAX_NODE_ENTRIES:
            raise NativeFormatError("B-tree with too many nodes")
        head = 8 + 2 * osz
        buf, o = r.blocks.get(addr, head, "B-tree node")
        if buf[o:o + 4] != b"TREE" or buf[o + 4] != node_type:
            raise NativeFormatError(f"bad B-tree node at {addr}")
        level = buf[o + 5]
        if want_level is not None and level != want_level:
            raise NativeFormatError(f"B-tree node at {addr} has level {level}, expected "
                                    f"{want_level}")
        if level > MAX_DEPTH:
            raise NativeFormatError(f"B-tree node at {addr} has level {level}")
        n = _U16.unpack_from(buf, o + 6)[0]
        size = head + n * (key_size + osz) + key_size
        buf, o = r.blocks.get(addr, size, "B-tree node")
        children = []
        for i in range(n):
            p = o + head + i * (key_size + osz)
            child = r.addr(buf, p + key_size)
            if child is None:
                raise NativeFormatError(f"B-tree node at {addr}: undefined child")
            if level == 0:
                on_key(child, buf[p:p + key_size])
                out.append(child)
            else:
                children.append(child)
        if len(children) > 1:  # a level's nodes in one request (at most 2K = 64 entries each)
            r.blocks.prefetch([(c, head + PREFETCH_ENTRIES * (key_size + osz) + key_size)
                               for c in children])
        stack.extend((c, level - 1) for c in reversed(children))
    return out


def prefetch_btrees(r: Reader, trees: list[tuple[int, int, int]]) -> None:
    """Fetch the nodes of the v1 chunk B-trees ``trees`` (``(root, rank, span)``) level by
    level: every tree's nodes of one level in one :meth:`Blocks.prefetch` call, so several
    datasets' indexes cost as many round trips as the deepest one has levels. A tree's leaves
    lying within ``span`` bytes of each other are fetched as one range: HDF5 writes them
    between the chunks, so for a dataset read whole that range is mostly chunks it needs
    anyway, and one request replaces one per leaf. Nothing is checked here:
    :func:`chunk_index` walks the held nodes and words any damage."""
    osz = r.osz
    head = 8 + 2 * osz
    seen = {root for root, _, _ in trees}
    level_nodes = [(root, root, rank, span, False) for root, rank, span in trees]
    for _ in range(MAX_DEPTH):
        if not level_nodes:
            return
        r.blocks.prefetch(_spanned(level_nodes, head, osz))
        below: list[tuple[int, int, int, int, bool]] = []
        for addr, tree, rank, span, _leaf in level_nodes:
            key_size = _chunk_key(rank)
            buf, o = r.blocks.get(addr, head, "B-tree node")
            if buf[o:o + 4] != b"TREE" or buf[o + 4] != 1 or buf[o + 5] == 0:
                continue  # not a chunk B-tree node, or a leaf (its children are chunks)
            leaves = buf[o + 5] == 1
            n = _U16.unpack_from(buf, o + 6)[0]
            buf, o = r.blocks.get(addr, head + n * (key_size + osz) + key_size, "B-tree node")
            for i in range(n):
                child = r.addr(buf, o + head + i * (key_size + osz) + key_size)
                if child is not None and child not in seen and len(seen) < MAX_NODE_ENTRIES:
                    seen.add(child)
                    below.append((child, tree, rank, span, leaves))
        level_nodes = below


def _spanned(nodes: list[tuple[int, int, int, int, bool]], head: int, osz: int
             ) -> list[tuple[int, int]]:
    """The ranges that hold ``nodes`` (``(address, tree, rank, span, is a leaf)``): a node
    each, or one range across a tree's leaves where they lie within its span."""
    out: list[tuple[int, int]] = []
    leaves: dict[int, list[tuple[int, int]]] = {}
    spans: dict[int, int] = {}
    for addr, tree, rank, span, leaf in nodes:
        size = head + PREFETCH_ENTRIES * (_chunk_key(rank) + osz) + _chunk_key(rank)
        if leaf and span:
            leaves.setdefault(tree, []).append((addr, size))
            spans[tree] = span
        else:
            out.append((addr, size))
    for tree, ranges in leaves.items():
        first = min(a for a, _ in ranges)
        end = max(a + n for a, n in ranges)
        if len(ranges) > 1 and end - first <= spans[tree]:
            out.append((first, end - first))
        else:
            out.extend(ranges)
    return out


def _chunk_key(rank: int) -> int:
    """Bytes of one key of a v1 chunk B-tree node (size, filter mask, rank + 1 offsets)."""
    return 8 + 8 * (rank + 1)


def chunk_index(r: Reader, lay: Layout, shape: tuple[int, ...],
                maxshape: tuple[int | None, ...], itemsize: int) -> list[Chunk]:
    """The allocated chunks of a chunked dataset, in no particular order.

    Raises:
        NativeDamageError: Two chunks' bytes overlap (an index entry pointing at another
            chunk's bytes: HDF5 serves that chunk's rows twice, without an error).
    """
    return disjoint(_chunk_index(r, lay, shape, maxshape, itemsize))


def disjoint(chunks: list[Chunk]) -> list[Chunk]:
    """``chunks``, refused when the byte extents of two of them overlap
    (:func:`guideloom.fastread.chunks.first_overlap`, which the h5py path uses too).

    Raises:
        NativeDamageError: Naming both chunks and their extents.
    """
    pair = first_overlap([(c[2], c[3]) for c in chunks])
    if pair is None:
        return chunks
    (first, _, at, size), (offset, _, addr, length) = chunks[pair[0]], chunks[pair[1]]
    raise NativeDamageError(
        f"the bytes of chunk {offset} (at {addr}, {length} bytes) overlap those of chunk "
        f"{first} (at {at}, {size} bytes): one chunk index entry points at "
        "another chunk's bytes (HDF5 would serve its rows twice)")


def _chunk_index(r: Reader, lay: Layout, shape: tuple[int, ...],
                 maxshape: tuple[int | None, ...], itemsize: int) -> list[Chunk]:
    cs = lay.chunk_shape
    grid = tuple(-(-n // c) for n, c in zip(shape, cs, strict=True))
    if lay.address is None or 0 in shape:
        return []
    if lay.index == 0:
        return _btree_chunks(r, lay.address, cs, shape, grid, maxshape)
    unfiltered = math.prod(cs) * itemsize
    if lay.index == 1:
        size, mask = lay.single_filtered or (unfiltered, 0)
        return [((0,) * len(shape), mask, lay.address, size)]
    max_grid = _max_grid(shape, maxshape, cs)
    if lay.index == 2:
        return [(_offset(i, max_grid, cs), 0, lay.address + i * unfiltered, unfiltered)
                for i in _live(grid, max_grid)]
    if lay.index == 3:
        entries = _fixed_array(r, lay.address, math.prod(max_grid), unfiltered)
    else:
        entries = _extensible_array(r, lay, unfiltered)
    out = []
    live = set(_live(grid, max_grid))
    for i, entry in enumerate(entries):
        if entry is not None and i in live:
            addr, size, mask = entry
            out.append((_offset(i, max_grid, cs), mask, addr, size))
    return out


def _max_grid(shape, maxshape, cs) -> tuple[int, ...]:
    """Chunks per axis at the maximum shape (the first axis may be unlimited)."""
    out = []
    for k, (n, m, c) in enumerate(zip(shape, maxshape, cs, strict=True)):
        if m is None:
            if k != 0:
                raise NativeUnsupported("an unlimited axis other than the first")
            m = n
        out.append(-(-max(m, n) // c))
    return tuple(out)


def _live(grid: tuple[int, ...], max_grid: tuple[int, ...]) -> list[int]:
    """Linear indexes (over ``max_grid``, row-major) of the chunks inside the current shape."""
    if math.prod(grid) > MAX_NODE_ENTRIES * 64:
        raise NativeUnsupported(f"{math.prod(grid)} chunks")
    idx = [0]
    for g, m in zip(grid, max_grid, strict=True):
        idx = [i * m + j for i in idx for j in range(g)]
    return idx


def _offset(i: int, max_grid: tuple[int, ...], cs: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for m in reversed(max_grid):
        i, k = divmod(i, m)
        out.append(k)
    return tuple(k * c for k, c in zip(reversed(out), cs, strict=True))


def _btree_chunks(r: Reader, root: int, cs, shape, grid, maxshape=None) -> list[Chunk]:
    rank = len(shape)
    bound = tuple(n if m is None else max(m, n) for n, m in zip(shape, maxshape or shape,
                                                                 strict=True))
    found: list[Chunk] = []
    limit = math.prod(grid)
    seen_offsets: set[tuple[int, ...]] = set()

    head = struct.Struct(f"<II{rank}Q")  # size, filter mask, the chunk's offset per axis
    element = struct.Struct("<Q")  # the offset into the chunk, always 0
    axes = tuple(zip(cs, bound, shape, strict=True))

    def on_key(child: int, key: bytes) -> None:
        size, mask, *coords = head.unpack_from(key, 0)
        offset = tuple(coords)
        off_grid = beyond = False
        inside = True
        for o, (c, b, n) in zip(offset, axes, strict=True):  # one pass: this runs once per chunk
            if o % c:
                off_grid = True
            if b and o >= b:
                beyond = True
            if o >= n:
                inside = False
        if off_grid:
            raise NativeFormatError(f"chunk offset {offset} not on the chunk grid")
        if beyond or (len(key) >= 16 + 8 * rank and element.unpack_from(key, 8 + 8 * rank)[0]):
            raise NativeDamageError(f"chunk offset {offset} beyond the dataset's maximum shape "
                                    "(HDF5 reads its chunk as fill values)")
        if offset in seen_offsets:
            raise NativeFormatError(f"chunk {offset} listed twice")
        seen_offsets.add(offset)
        if len(seen_offsets) > limit:
            raise NativeFormatError("more chunks than the dataset has room for")
        if inside:
            found.append((offset, mask, child, size))

    _btree_children(r, root, 1, on_key, rank)
    return found


def _check(buf: bytes, o: int, n: int, what: str) -> None:
    if lookup3(buf[o:o + n]) != _U32.unpack_from(buf, o + n)[0]:
        raise NativeFormatError(f"{what} checksum mismatch")


def _elements(r: Reader, buf: bytes, p: int, n: int, entry: int, client: int,
              unfiltered: int) -> list[tuple[int, int, int] | None]:
    out: list[tuple[int, int, int] | None] = []
    for i in range(n):
        q = p + i * entry
        addr = r.addr(buf, q)
        if addr is None:
            out.append(None)
        elif client == 0:
            out.append((addr, unfiltered, 0))
        else:
            width = entry - r.osz - 4
            size = int.from_bytes(buf[q + r.osz:q + r.osz + width], "little")
            mask = _U32.unpack_from(buf, q + r.osz + width)[0]
            out.append((addr, size, mask))
    return out


def _fixed_array(r: Reader, addr: int, n_max: int, unfiltered: int
                 ) -> list[tuple[int, int, int] | None]:
    osz, lsz = r.osz, r.lsz
    size = 8 + lsz + osz
    buf, o = r.blocks.get(addr, size + 4, "fixed array header")
    if buf[o:o + 4] != b"FAHD" or buf[o + 4] != 0:
        raise NativeFormatError(f"bad fixed array header at {addr}")
    _check(buf, o, size, "fixed array header")
    client, entry, page_bits = buf[o + 5], buf[o + 6], buf[o + 7]
    n = r.length(buf, o + 8)
    block = r.addr(buf, o + 8 + lsz)
    if n > n_max or entry < osz or entry > osz + 12:
        raise NativeFormatError(f"fixed array of {n} entries of {entry} bytes")
    if block is None:
        return []
    if n > (1 << page_bits):
        return _fixed_array_pages(r, block, n, entry, client, page_bits, unfiltered)
    dsize = 6 + osz + n * entry
    buf, o = r.blocks.get(block, dsize + 4, "fixed array data block")
    if buf[o:o + 4] != b"FADB":
        raise NativeFormatError(f"bad fixed array data block at {block}")
    _check(buf, o, dsize, "fixed array data block")
    return _elements(r, buf, o + 6 + osz, n, entry, client, unfiltered)


def _fixed_array_pages(r: Reader, block: int, n: int, entry: int, client: int, page_bits: int,
                       unfiltered: int) -> list[tuple[int, int, int] | None]:
    """The entries of a paged fixed array: its data block holds a bitmap of the pages written
    (most significant bit first), and the pages of ``2**page_bits`` entries (the last one
    shorter), each with its checksum, follow the block; an unwritten page's chunks are not
    allocated."""
    per_page = 1 << page_bits
    pages = -(-n // per_page)
    bitmap_len = -(-pages // 8)
    dsize = 6 + r.osz + bitmap_len
    buf, o = r.blocks.get(block, dsize + 4, "fixed array data block")
    if buf[o:o + 4] != b"FADB":
        raise NativeFormatError(f"bad fixed array data block at {block}")
    _check(buf, o, dsize, "fixed array data block")
    bitmap = buf[o + 6 + r.osz:o + dsize]
    out: list[tuple[int, int, int] | None] = []
    page_addr = block + dsize + 4
    for page in range(pages):
        count = min(per_page, n - page * per_page)
        size = count * entry
        if bitmap[page // 8] & (0x80 >> (page % 8)):
            pbuf, po = r.blocks.get(page_addr, size + 4, "fixed array data block page")
            _check(pbuf, po, size, "fixed array data block page")
            out += _elements(r, pbuf, po, count, entry, client, unfiltered)
        else:
            out += [None] * count
        page_addr += size + 4
    return out


def _ea_index_addresses(header: bytes, o: int) -> int:
    """Data and super block addresses an extensible array's index block holds after its
    elements (from the header's creation parameters, as HDF5 sizes the block)."""
    max_bits, dblk_min, sblk_min = header[o + 7], header[o + 9], header[o + 10]
    if dblk_min < 1 or sblk_min < 1 or dblk_min & (dblk_min - 1) or sblk_min & (sblk_min - 1):
        raise NativeFormatError("extensible array header with bad creation parameters")
    n_super = 1 + max_bits - (dblk_min.bit_length() - 1)
    first_super = 2 * (sblk_min.bit_length() - 1)
    if n_super < first_super:
        raise NativeFormatError("extensible array header with bad creation parameters")
    return 2 * (sblk_min - 1) + (n_super - first_super)


def _extensible_array(r: Reader, lay: Layout, unfiltered: int
                      ) -> list[tuple[int, int, int] | None]:
    osz, lsz = r.osz, r.lsz
    addr = lay.address
    assert addr is not None
    size = 12 + 6 * lsz + osz
    buf, o = r.blocks.get(addr, size + 4, "extensible array header")
    if buf[o:o + 4] != b"EAHD" or buf[o + 4] != 0:
        raise NativeFormatError(f"bad extensible array header at {addr}")
    _check(buf, o, size, "extensible array header")
    client, entry = buf[o + 5], buf[o + 6]
    idx_elements = buf[o + 8]
    if entry < osz or entry > osz + 12:
        raise NativeFormatError(f"extensible array entries of {entry} bytes")
    stats = [r.length(buf, o + 12 + i * lsz) for i in range(6)]
    n_secondary, n_data = stats[0], stats[2]
    realized = stats[5]
    index = r.addr(buf, o + 12 + 6 * lsz)
    if index is None:
        return []
    if n_secondary or n_data or realized > idx_elements:
        raise NativeUnsupported("an extensible array chunk index beyond its index block")
    isize = 6 + osz + idx_elements * entry + _ea_index_addresses(buf, o) * osz
    buf, o = r.blocks.get(index, isize + 4, "extensible array index block")
    if buf[o:o + 4] != b"EAIB":
        raise NativeFormatError(f"bad extensible array index block at {index}")
    _check(buf, o, isize, "extensible array index block")  # a moved chunk address is damage
    return _elements(r, buf, o + 6 + osz, idx_elements, entry, client, unfiltered)

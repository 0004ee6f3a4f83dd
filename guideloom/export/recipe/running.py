"""Whether a function's code is what its module file says now, without compiling the file.

A module file edited after it was imported (and not reloaded) no longer describes the code that
runs. Two proofs, neither compiling anything:

1. By time: a file whose mtime and ctime are both older than this process (less a margin of
   2 s: ``psutil`` computes the start from ``/proc/self/stat``'s clock ticks, 10 ms, and the
   boot time, whole seconds) cannot have been edited after its import. The process is the
   oldest ancestor running the same executable (a child forked without ``exec`` holds its
   parent's modules); the start is taken before any fork of this process, so a forked child
   keeps it.
2. By structure: the running code object (with its nested code) is compared with the
   definition's node in the file as it is now (``ast.parse``): the first line; the identifiers
   (names, attributes, arguments, imports; both ways); every instruction's source position
   (``co_positions``) must be a node's position inside the definition; the literal constants
   (both ways, allowing for constant folding and docstrings); the operators (``+`` ``-`` ...,
   comparisons, ``is``/``in``, unary ``-``/``~``/``+``). When unsure it says "changed".

What it cannot see: an edit made after the process started that keeps every identifier,
constant, operator and every instruction's position, e.g. ``a and b`` -> ``a or  b`` (padded to
keep the columns), ``not x`` -> ``    x``, ``x is None`` <-> ``x is not None`` written in a
width-keeping way in a condition, or two same-width names swapped where both are used; for the
proof by time, a clock stepped forward (or a file server's clock behind) by more than the
margin. A formatting-only edit that moves code (another line or column) is reported as changed
(positions are the only trace of the layout in code); a comment, or a docstring keeping its
lines, is not. Rare code the comparison does not model (dead code, some constant folding) is
reported as changed: about 0.2 % (3.11) and 0.7 % (3.13) of the standard library's functions.
"""

from __future__ import annotations

import ast
import dis
import functools
import logging
import operator
import os
import re
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

logger = logging.getLogger(__name__)

START_MARGIN_NS = 2_000_000_000  # btime has whole seconds, the start ticks 10 ms


@functools.cache
def process_start_ns() -> int | None:
    """When this process (or its oldest ancestor running the same executable: a fork without
    ``exec`` holds its parent's modules) started, in ns since the epoch; ``None`` if unknown."""
    try:
        import psutil

        process = psutil.Process()
        start, exe = process.create_time(), process.exe()
    except Exception as exc:  # no psutil, no /proc
        logger.debug("the process start is unknown: %s", exc)
        return None
    try:
        parent = process.parent()
        while parent is not None and parent.pid > 1 and parent.exe() == exe:
            start = min(start, parent.create_time())
            parent = parent.parent()
    except Exception as exc:  # a parent gone or not ours: the start found so far
        logger.debug("an ancestor's start is unknown: %s", exc)
    return int(start * 1e9)


if hasattr(os, "register_at_fork"):  # a forked child keeps the start of the process it copies
    os.register_at_fork(before=process_start_ns)


def older_than_process(filename: str, start_ns: int | None = None) -> bool:
    """Whether ``filename`` was last written (mtime and ctime) before this process started,
    less :data:`START_MARGIN_NS`: then it cannot have been edited after its import."""
    start = process_start_ns() if start_ns is None else start_ns
    if start is None:
        return False
    try:
        st = os.stat(filename)
    except OSError:
        return False
    return max(st.st_mtime_ns, st.st_ctime_ns) < start - START_MARGIN_NS


# -- the structural comparison ------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.MatMult: "@", ast.Div: "/",
           ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
           ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&"}
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
            ast.GtE: ">="}
_FAMILY = {ast.Is: ("is", 0), ast.IsNot: ("is", 1), ast.In: ("in", 0), ast.NotIn: ("in", 1)}
_UNARY = {ast.USub: "neg", ast.Invert: "inv", ast.UAdd: "pos"}
_FOLD: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
    ast.Not: operator.not_}
_ADDED_NAMES = frozenset({"__class__", "__classcell__", "__classdict__", "__classdictcell__",
                          "__name__", "__module__", "__qualname__", "__doc__", "__annotations__",
                          "__firstlineno__", "__static_attributes__", "__type_params__",
                          "__annotate__", "__conditional_annotations__", "format"})
_UNARY_OPS = {"UNARY_NEGATIVE": "neg", "UNARY_INVERT": "inv", "UNARY_POSITIVE": "pos",
              "UNARY_NOT": "not"}
_SYMBOLS = (set(_BINARY.values()) | {s + "=" for s in _BINARY.values()} | set(_COMPARE.values())
            | set(_UNARY_OPS.values()))
_NOTHING = object()
_FORMAT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[sra]")


def code_matches(code: types.CodeType, node: ast.AST) -> bool:
    """Whether ``code`` (a function's, with its nested code) is what ``node`` (its definition
    or lambda, parsed from the file as it is now, docstrings kept) describes."""
    if first_line(node) != code.co_firstlineno:
        return False
    codes = list(_code_tree(code))
    source = _Source(node)
    checks = (source.scopes_match, source.names_match, source.positions_match,
              source.constants_match, source.operators_match)
    for check in checks:
        if not check(codes):
            logger.debug("%s (line %d): %s differs", code.co_name, code.co_firstlineno,
                         check.__name__)
            return False
    return True


def definitions(tree: ast.AST) -> dict[tuple[str, int], list[ast.AST]]:
    """The functions and lambdas of a parsed file by (code name, first line)."""
    found: dict[tuple[str, int], list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault((node.name, first_line(node)), []).append(node)
        elif isinstance(node, ast.Lambda):
            found.setdefault(("<lambda>", node.lineno), []).append(node)
    return found


def first_line(node: ast.AST) -> int:
    """The line a definition starts on, its decorators included (as `co_firstlineno`)."""
    decorators = getattr(node, "decorator_list", [])
    return int(min([getattr(node, "lineno", 0), *(d.lineno for d in decorators)]))


def _code_tree(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_tree(const)


def _key(value: Any) -> tuple[str, str]:
    """A constant's identity (``1``, ``1.0``, ``True`` and ``0.0``/``-0.0`` apart)."""
    try:
        return type(value).__name__, repr(value)
    except ValueError:  # an int too long for repr
        return type(value).__name__, hex(value)


def _flat(value: Any) -> Iterator[Any]:
    """A constant and, for tuples, frozensets and slices, its elements."""
    if isinstance(value, tuple | frozenset):
        for item in value:
            yield from _flat(item)
    elif isinstance(value, slice):
        yield from _flat((value.start, value.stop, value.step))
    else:
        yield value


def _docstring(node: ast.AST) -> ast.Constant | None:
    body = getattr(node, "body", None)
    if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and body
            and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return body[0].value
    return None


def _fold(node: ast.AST) -> Any:
    """The value the compiler folds a constant expression to (as far as this knows: sizes it
    would not fold and operations it does not know give ``_NOTHING``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        items = [_fold(e) for e in node.elts]
        return _NOTHING if any(i is _NOTHING for i in items) else tuple(items)
    if isinstance(node, ast.Subscript):
        value, index = _fold(node.value), _fold(node.slice)
        if value is _NOTHING or not isinstance(index, int) or isinstance(index, bool):
            return _NOTHING
        try:
            return value[index]
        except Exception:
            return _NOTHING
    if isinstance(node, ast.UnaryOp):
        operand = _fold(node.operand)
        if operand is _NOTHING or isinstance(node.op, ast.Not):
            return _NOTHING
        try:
            return _FOLD[type(node.op)](operand)
        except Exception:
            return _NOTHING
    if isinstance(node, ast.BinOp):
        left, right = _fold(node.left), _fold(node.right)
        if left is _NOTHING or right is _NOTHING or not _small(node.op, left, right):
            return _NOTHING
        try:
            return _FOLD[type(node.op)](left, right)
        except Exception:
            return _NOTHING
    return _NOTHING


def _small(op: ast.operator, left: Any, right: Any) -> bool:
    """Whether folding ``left op right`` stays small (the compiler folds only small results)."""
    if isinstance(op, ast.Pow | ast.LShift):
        return (isinstance(left, int | float) and isinstance(right, int | float)
                and abs(right) <= 128 and abs(left) < 2 ** 64)
    if isinstance(op, ast.Mult) and (isinstance(left, str | bytes | tuple)
                                     or isinstance(right, str | bytes | tuple)):
        n, seq = (right, left) if isinstance(left, str | bytes | tuple) else (left, right)
        return isinstance(n, int) and n >= 0 and len(seq) * n <= 4096
    return True


class _Source:
    """What a definition's node says its code holds."""

    def __init__(self, node: ast.AST) -> None:
        self.node = node
        self.nodes = list(ast.walk(node))
        docstrings = {id(d) for n in self.nodes if (d := _docstring(n)) is not None}
        self.function_docstrings = {
            (n.name, first_line(n)) for n in self.nodes
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _docstring(n)}
        self.not_compiled = {id(n) for n in self._outside(node)}  # decorators, defaults...
        self.folded: set[int] = set()  # nodes inside a folded constant expression
        # each a choice: all of the first list held, or all of the second
        self.required_consts: list[tuple[list[tuple[str, str]], list[tuple[str, str]]]] = []
        self.allowed_consts: set[tuple[str, str]] = {_key(None), _key(True), _key(False),
                                                     _key(...)}
        self.formats = formats = {id(n.left) for n in self.nodes if isinstance(n, ast.BinOp)
                   and isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Constant)
                   and isinstance(n.left.value, str)}  # "%s" % (a,): compiled as an f-string
        tests = {id(n.test) for n in self.nodes if isinstance(n, ast.If | ast.While | ast.IfExp)}
        for n in self.nodes:
            if isinstance(n, ast.Constant) and (id(n) in tests or n.value is None):
                self.allowed_consts.update(_key(v) for v in _flat(n.value))  # folded away
            elif isinstance(n, ast.Constant) and id(n) not in self.folded:
                keys = [_key(v) for v in _flat(n.value)]
                self.allowed_consts.update(keys)
                if id(n) in formats and isinstance(n.value, str):
                    parts = [_key(p) for p in _FORMAT.split(n.value) if p]
                    self.allowed_consts.update(parts)
                    if "%%" not in n.value and id(n) not in self.not_compiled:
                        self.required_consts.append((keys, parts))
                elif id(n) not in docstrings and id(n) not in self.not_compiled:
                    self.required_consts += [(keys, keys)]
            elif (isinstance(n, ast.BinOp | ast.UnaryOp | ast.Subscript)
                  and id(n) not in self.folded
                  and _fold(n) is not _NOTHING):
                inside = list(ast.walk(n))
                self.folded.update(id(i) for i in inside)
                leaves = [_key(v) for i in inside if isinstance(i, ast.Constant)
                          for v in _flat(i.value)]
                value = [_key(v) for v in _flat(_fold(n))]
                self.allowed_consts.update(leaves + value)
                if id(n) not in self.not_compiled:
                    # the folded value, or (the compiler did not fold) the leaves
                    self.required_consts.append((value, leaves))
        self.names, self.required_names = self._identifiers()
        self.allowed_consts.update(_key(s) for s in self.names)

    @staticmethod
    def _outside(node: ast.AST) -> Iterator[ast.AST]:
        """What of the definition's node its own code does not compile (the enclosing code
        evaluates decorators, defaults and annotations)."""
        parts: list[ast.AST] = list(getattr(node, "decorator_list", []))
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            parts += args.defaults + [d for d in args.kw_defaults if d is not None]
        if getattr(node, "returns", None) is not None:
            parts.append(node.returns)  # type: ignore[attr-defined]
        for part in parts:
            yield from ast.walk(part)

    def _identifiers(self) -> tuple[set[str], set[str]]:
        """The identifiers the code may hold, and those it must hold."""
        names: set[str] = set()
        required: set[str] = set()
        skip = set(self.not_compiled)
        for n in self.nodes:  # annotations: strings (``from __future__``) or not evaluated
            for ann in (getattr(n, "annotation", None), getattr(n, "returns", None)):
                if isinstance(ann, ast.AST):
                    skip.update(id(a) for a in ast.walk(ann))
        for n in self.nodes:
            found: list[str] = []
            must = id(n) not in skip
            if isinstance(n, ast.Name):
                found = [n.id]
                must = must and n.id != "__debug__"
            elif isinstance(n, ast.Attribute):
                found = [n.attr]
            elif isinstance(n, ast.arg):
                found = [n.arg]
            elif isinstance(n, ast.alias):
                found = [n.name, *n.name.split("."), *([n.asname] if n.asname else [])]
                if n.name == "*":
                    found, must = [], False
                elif must:
                    required.update([n.name, n.asname or n.name.split(".")[0]])
                    must = False
            elif isinstance(n, ast.ImportFrom):
                found = [n.module, *n.module.split(".")] if n.module else []
                if n.module and must:
                    required.add(n.module)
                must = False
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found = [n.name]
                must = must and n is not self.node
            elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar):
                found = [n.name] if n.name else []
            elif isinstance(n, ast.MatchMapping):
                found = [n.rest] if n.rest else []
            elif isinstance(n, ast.MatchClass):
                found, must = list(n.kwd_attrs), False  # a tuple of strings
            elif isinstance(n, ast.keyword):
                found, must = ([n.arg] if n.arg else []), False  # names of a call: strings
            elif isinstance(n, ast.Global | ast.Nonlocal):
                found, must = list(n.names), False
            names.update(found)
            if must:
                required.update(found)
        return names, required

    def scopes_match(self, codes: list[types.CodeType]) -> bool:
        """Every nested code starts on the first line of a scope of the definition."""
        firsts = {first_line(n) for n in self.nodes if isinstance(n, _SCOPES)}
        return all(c.co_firstlineno in firsts for c in codes)

    def names_match(self, codes: list[types.CodeType]) -> bool:
        held: set[str] = set()
        for c in codes:
            held.update(c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars)

        def explained(name: str) -> bool:
            return (name in self.names or name in _ADDED_NAMES or name.startswith(".")
                    or (name.startswith("_") and "__" in name  # mangled: _Cls__x
                        and name[name.index("__", 1):] in self.names))

        def present(name: str) -> bool:
            return name in held or (name.startswith("__") and not name.endswith("__")
                                    and any(h.endswith(name) for h in held))
        return all(map(explained, held)) and all(map(present, self.required_names))

    def positions_match(self, codes: list[types.CodeType]) -> bool:
        spans = {(getattr(n, "lineno", None), getattr(n, "end_lineno", None),
                  getattr(n, "col_offset", None), getattr(n, "end_col_offset", None))
                 for n in self.nodes if hasattr(n, "lineno") and hasattr(n, "col_offset")}
        for n in self.nodes:  # an attribute over lines: from its name (the compiler's choice)
            if isinstance(n, ast.Attribute) and n.end_lineno != n.lineno:
                start = (n.end_col_offset or 0) - len(n.attr)
                spans.add((n.end_lineno, n.end_lineno, start, n.end_col_offset))
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.end_lineno != n.func.lineno):
                start = (n.func.end_col_offset or 0) - len(n.func.attr)
                spans.add((n.func.end_lineno, n.end_lineno, start, n.end_col_offset))
            if isinstance(n, ast.DictComp):  # a key: value pair
                spans.add((n.key.lineno, n.value.end_lineno, n.key.col_offset,
                           n.value.end_col_offset))
        lines = {(s[0], s[1]) for s in spans}
        for c in codes:
            for pos in set(c.co_positions()):
                if pos[0] is None or pos in spans:
                    continue
                if pos[:2] == (c.co_firstlineno, c.co_firstlineno) and pos[2:] in (
                        (0, 0), (None, None)):  # the prologue
                    continue
                if pos[2] is None and (pos[0], pos[1]) in lines | {(pos[0], None)}:
                    continue  # no columns (-X no_debug_ranges)
                return False
        return True

    def constants_match(self, codes: list[types.CodeType]) -> bool:
        held: dict[tuple[str, str], Any] = {}
        for c in codes:
            consts = list(c.co_consts)
            if (consts and isinstance(consts[0], str)
                    and (c.co_name, c.co_firstlineno) in self.function_docstrings):
                consts = consts[1:]  # the docstring: it does not count
            held.update((_key(v), v) for const in consts
                        if not isinstance(const, types.CodeType) for v in _flat(const))
        for folded, leaves in self.required_consts:  # the folded value, or its parts unfolded
            if not (all(k in held for k in folded) or all(k in held for k in leaves)):
                return False
        return all(k in self.allowed_consts or self._compiler_const(v)
                   for k, v in held.items())

    def _compiler_const(self, value: Any) -> bool:
        """Constants the compiler adds: qualified names, class first lines, import levels,
        annotations as strings, match lengths."""
        if isinstance(value, str):
            if all(p in self.names or p.startswith("<") for p in value.split(".")):
                return True
            return value in self._annotation_texts
        if type(value) is int:
            value_int = value
            levels = {getattr(n, "level", 0) or 0 for n in self.nodes
                      if isinstance(n, ast.ImportFrom | ast.Import)}
            firsts = {first_line(n) for n in self.nodes if isinstance(n, ast.ClassDef)}
            has_match = any(isinstance(n, ast.Match) for n in self.nodes)
            return (value_int in levels or value_int in firsts
                    or (has_match and 0 <= value_int <= 256))
        return False

    @functools.cached_property
    def _annotation_texts(self) -> set[str]:
        texts: set[str] = {"return"}
        for n in self.nodes:
            for ann in (getattr(n, "annotation", None), getattr(n, "returns", None)):
                if isinstance(ann, ast.AST):
                    texts.add(ast.unparse(ann))
        return texts

    def operators_match(self, codes: list[types.CodeType]) -> bool:
        low: Counter[Any] = Counter()  # operators the code must hold at least
        high: Counter[Any] = Counter()  # and at most
        looped = {id(i) for n in self.nodes if isinstance(n, ast.While)
                  for i in ast.walk(n.test)}  # a loop's test may be compiled twice,
        looped.update(id(i) for n in self.nodes if isinstance(n, ast.Try | ast.TryStar)
                      for f in n.finalbody for i in ast.walk(f))  # a finally block too
        negated = {id(n.operand) for n in self.nodes
                   if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
                   and isinstance(n.operand, ast.Compare) and len(n.operand.ops) == 1}

        def count(key: Any, optional: bool, n: ast.AST) -> None:
            low[key] += 0 if optional else 1
            high[key] += 2 if id(n) in looped else 1
        for n in self.nodes:
            if id(n) in self.not_compiled:
                continue
            folded = id(n) in self.folded
            if isinstance(n, ast.BinOp | ast.AugAssign) and type(n.op) in _BINARY:
                symbol = _BINARY[type(n.op)] + ("=" if isinstance(n, ast.AugAssign) else "")
                formatted = isinstance(n, ast.BinOp) and id(n.left) in self.formats
                count(symbol, folded or formatted, n)
            elif isinstance(n, ast.UnaryOp):
                count(_UNARY.get(type(n.op), "not"), folded or isinstance(n.op, ast.Not), n)
            elif isinstance(n, ast.Compare):
                operands = [n.left, *n.comparators]
                for i, op in enumerate(n.ops):
                    if type(op) in _COMPARE:
                        count(_COMPARE[type(op)], False, n)
                        continue
                    family, arg = _FAMILY[type(op)]
                    with_none = any(isinstance(o, ast.Constant) and o.value is None
                                    for o in operands[i:i + 2])
                    if id(n) in negated or (family == "is" and with_none):
                        count(family, False, n)  # inverted, or a jump on None: either arg
                    else:
                        count((family, arg), False, n)
        held: Counter[Any] = Counter()
        for c in codes:
            for ins in dis.get_instructions(c):
                name, rep = ins.opname, ins.argrepr
                if name == "BINARY_OP":
                    held[rep] += 1
                elif name == "COMPARE_OP":
                    held[rep.removeprefix("bool(").removesuffix(")")] += 1
                elif name in ("IS_OP", "CONTAINS_OP"):
                    held[("is" if name == "IS_OP" else "in", int(ins.arg or 0))] += 1
                elif "_IF_NONE" in name or "_IF_NOT_NONE" in name:
                    held["is"] += 1
                elif name in _UNARY_OPS:
                    held[_UNARY_OPS[name]] += 1
                elif name == "CALL_INTRINSIC_1" and rep == "INTRINSIC_UNARY_POSITIVE":
                    held["pos"] += 1
        for symbol in _SYMBOLS:
            if not low[symbol] <= held[symbol] <= high[symbol]:
                return False
        for family in ("is", "in"):  # each arg at least its sure count, the rest either
            spare = 0
            for arg in (0, 1):
                if held[(family, arg)] < low[(family, arg)]:
                    return False
                spare += held[(family, arg)] - low[(family, arg)]
            slack = sum(high[(family, a)] - low[(family, a)] for a in (0, 1))
            if not low[family] <= spare + held[family] <= high[family] + slack:
                return False
        return True

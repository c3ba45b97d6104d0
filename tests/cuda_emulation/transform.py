#!/usr/bin/env python3
"""Rewrites a CUDA source file (.cu) into C++ that g++ compiles against tests/cuda_emulation/emu_cuda.h.

Only the three constructs the C++ compiler cannot take are rewritten; the rest of the file is left untouched, so
what runs on the CPU is the kernel code itself:
  kernel<<<grid, block[, shared_bytes[, stream]]>>>(args);
      -> ::emu::launch("kernel", FILE, LINE, kernel, dim3(grid), dim3(block), shared_bytes, stream, args);
  extern __shared__ [__align__(N)] TYPE name[];
      -> TYPE* const name = reinterpret_cast<TYPE*>(::emu::dynamic_shared(N));
  __shared__ [__align__(N)] TYPE name[D1][D2]...[, name2...];   (block-scope variables)
      -> static char tag; auto& name = ::emu::shared_variable<TYPE[D1][D2]...>(&tag, N); (one per name)
Every rewrite keeps the line count, and a #line directive maps the output back to the .cu file, so compiler
diagnostics, __FILE__/__LINE__ in error messages and the emulator's launch sites name the real source lines.
Like nvcc, the output includes the CUDA runtime (here emu_cuda.h) first and defines __CUDACC__.

Limits (each reported as an error, never silently mistranslated): launches must be plain statements ending in ';'
with a kernel name (optionally with template arguments) before '<<<'. Not handled: launches inside a multi-line
macro definition, raw string literals.

Usage: transform.py INPUT.cu OUTPUT.cpp [--name PATH_SHOWN_IN_DIAGNOSTICS]
Python 3 standard library only.
"""

import argparse
import os
import re
import sys


class TransformError(Exception):
    pass


def code_mask(src):
    """True for each character that is code (not inside a comment, string or character literal)."""
    mask = [True] * len(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k] = False
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c == "'" and i > 0 and src[i - 1].isalnum():  # a digit separator (1'000), not a literal
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i, j):
                mask[k] = False
            i = j
        else:
            i += 1
    return mask


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


def match_forward(src, mask, pos, open_ch, close_ch):
    """Index just past the bracket that closes the one at pos, skipping comments and literals."""
    depth = 0
    for i in range(pos, len(src)):
        if not mask[i]:
            continue
        if src[i] == open_ch:
            depth += 1
        elif src[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise TransformError(f"line {line_of(src, pos)}: unbalanced '{open_ch}'")


def split_top_level(text):
    """Splits on commas outside (), [] and {}."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*(?:::[A-Za-z_][A-Za-z_0-9]*)*$")


def kernel_start(src, mask, pos):
    """Start of the kernel expression that ends just before pos ('<<<'): name or name<template args>."""
    i = pos - 1
    while i >= 0 and src[i].isspace():
        i -= 1
    if i >= 0 and src[i] == ">":  # template arguments: walk back to the matching '<'
        depth = 0
        while i >= 0:
            if mask[i]:
                if src[i] == ">":
                    depth += 1
                elif src[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            i -= 1
        i -= 1
        while i >= 0 and src[i].isspace():
            i -= 1
    end = i + 1
    while i >= 0 and (src[i].isalnum() or src[i] in "_:"):
        i -= 1
    start = i + 1
    if start == end or not IDENT.match(src[start:end]):
        raise TransformError(f"line {line_of(src, pos)}: no kernel name before '<<<'")
    return start


def rewrite_launches(src, name):
    out, last = [], 0
    mask = code_mask(src)
    pos = 0
    while True:
        pos = src.find("<<<", pos)
        if pos < 0:
            break
        if not mask[pos]:
            pos += 3
            continue
        start = kernel_start(src, mask, pos)
        if start < last:
            raise TransformError(f"line {line_of(src, pos)}: overlapping launches")
        close = src.find(">>>", pos + 3)
        while close >= 0 and not mask[close]:
            close = src.find(">>>", close + 3)
        if close < 0:
            raise TransformError(f"line {line_of(src, pos)}: '<<<' without '>>>'")
        config = split_top_level(src[pos + 3:close])
        if not 2 <= len(config) <= 4:
            raise TransformError(f"line {line_of(src, pos)}: launch configuration needs 2 to 4 values")
        paren = close + 3
        while paren < len(src) and src[paren].isspace():
            paren += 1
        if paren >= len(src) or src[paren] != "(":
            raise TransformError(f"line {line_of(src, pos)}: no argument list after '>>>'")
        args_end = match_forward(src, mask, paren, "(", ")")
        semi = args_end
        while semi < len(src) and src[semi].isspace():
            semi += 1
        if semi >= len(src) or src[semi] != ";":
            raise TransformError(f"line {line_of(src, pos)}: a launch must be a statement ending in ';'")
        kernel = " ".join(src[start:pos].split())
        shared = config[2] if len(config) > 2 else "0"
        stream = config[3] if len(config) > 3 else "nullptr"
        args = " ".join(src[paren + 1:args_end - 1].split())
        line = line_of(src, start)
        call = (f'::emu::launch("{kernel}", "{name}", {line}, {kernel}, dim3({config[0]}), dim3({config[1]}), '
                f'{shared}, {stream}{", " + args if args else ""});')
        out.append(src[last:start])
        out.append(call + "\n" * src.count("\n", start, semi + 1))
        last = semi + 1
        pos = last
    out.append(src[last:])
    return "".join(out)


ALIGN = r"(?:__align__\(\s*(\d+)\s*\)\s+)?"
EXTERN_SHARED = re.compile(r"extern\s+" + ALIGN + r"__shared__\s+" + ALIGN +
                           r"([A-Za-z_][\w\s:<>,*]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"(?:static\s+)?" + ALIGN + r"__shared__\s+" + ALIGN +
                           r"([A-Za-z_][\w\s:<>,*]*?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]\n]+\]\s*)*);")


def rewrite_shared(src):
    def extern(m):
        align = m.group(1) or m.group(2) or "16"
        type_, name = " ".join(m.group(3).split()), m.group(4)
        return (f"{type_}* const {name} = reinterpret_cast<{type_}*>(::emu::dynamic_shared({align}));"
                + "\n" * m.group(0).count("\n"))

    def static(m):
        align = m.group(1) or m.group(2) or "1"
        # `__shared__ int a, b[4];` declares several variables of one type: the regex's type part then holds
        # "int a, b" up to the last declarator. Split at commas outside <> so that Foo<A, B> stays one type.
        parts, depth, cur = [], 0, ""
        for ch in " ".join(m.group(3).split()) + " " + m.group(4) + m.group(5):
            depth += {"<": 1, ">": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        first = re.fullmatch(r"\s*(.*?)\s*\b([A-Za-z_]\w*)\s*((?:\[[^\]]+\]\s*)*)", parts[0])
        declarators = [(first.group(2), first.group(3))]
        for part in parts[1:]:
            d = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*((?:\[[^\]]+\]\s*)*)", part)
            if d is None:
                raise TransformError(f"a __shared__ declarator this script cannot rewrite: {part.strip()}")
            declarators.append((d.group(1), d.group(2)))
        type_ = first.group(1)
        if len(declarators) > 1 and type_.rstrip().endswith(("*", "&")):  # `int *a, b`: the * is a's alone
            raise TransformError(f"a __shared__ pointer among several declarators: {m.group(0).strip()}")
        out = []
        for name, dims in declarators:
            dims = "".join(dims.split())
            out.append(f"static char emu_shared_site_{name}; auto& {name} = "
                       f"::emu::shared_variable<{type_}{dims}>(&emu_shared_site_{name}, {align});")
        return " ".join(out) + "\n" * m.group(0).count("\n")

    for pattern, fn in ((EXTERN_SHARED, extern), (STATIC_SHARED, static)):
        mask = code_mask(src)
        out, last = [], 0
        for m in pattern.finditer(src):
            if not mask[m.start()] or m.start() < last:
                continue
            out.append(src[last:m.start()])
            out.append(fn(m))
            last = m.end()
        out.append(src[last:])
        src = "".join(out)

    mask = code_mask(src)
    for m in re.finditer(r"\b__shared__\b", src):
        if mask[m.start()]:
            raise TransformError(f"line {line_of(src, m.start())}: a __shared__ declaration this script cannot "
                                 f"rewrite: {src[m.start():src.find(chr(10), m.start())].strip()}")
    return src


def transform(src, name):
    src = rewrite_shared(src)
    src = rewrite_launches(src, name)
    header = ("// Generated by tests/cuda_emulation/transform.py from " + name + ": do not edit.\n"
              "#define __CUDACC__ 1\n"
              '#include "emu_cuda.h"\n'
              f'#line 1 "{name}"\n')
    return header + src


def main():
    parser = argparse.ArgumentParser(description="Rewrite a .cu file for the CPU CUDA emulation.")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--name", help="the path diagnostics show for the input (default: INPUT as given)")
    a = parser.parse_args()
    with open(a.input, encoding="utf-8") as f:
        src = f.read()
    try:
        result = transform(src, a.name or a.input)
    except TransformError as e:
        sys.exit(f"transform.py: {a.input}: {e}")
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(result)


if __name__ == "__main__":
    main()

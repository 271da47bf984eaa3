"""Short kernel function names from demangled kernel names, the way ncu's `--print-kernel-base
function` shows them: no return type, no namespaces, no template arguments, no parameter list.

    void at::native::<unnamed>::vectorized_elementwise_kernel<4,
            at::native::silu_kernel(...)::{lambda(float)#1}, ...>(int, ...)
        -> vectorized_elementwise_kernel
    unnamed>::saxpy_kernel(float, const float *, float *, int)     (ncu >= 2025 strips namespaces)
        -> saxpy_kernel
    ampere_sgemm_32x32_sliced1x4_tn                                 (cuBLAS: no C++ decoration)
        -> ampere_sgemm_32x32_sliced1x4_tn

Names reach thousands of characters with nested templates, lambdas and quotes, so this scans once,
from bracket to bracket tracking the depth, instead of using regular expressions that backtrack.
"""

from __future__ import annotations

import functools
import re

_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
# Qualifiers that can precede the function name and are not part of it.
_LEADING_WORDS = ("void ", "static ", "__global__ ", "extern ", "inline ")


# The characters that open or close a bracket: the scan jumps from one to the next (kernel names are
# ~1 KB of template arguments; a character-by-character loop spent ~0.2 ms on each).
_BRACKET = re.compile(r"[<>\[\]{}()]")
_ANONYMOUS = "(anonymous namespace)"


def _top_level_segments(name: str) -> tuple[str, str]:
    """(text before the first top-level '(' with top-level template args removed, rest)."""
    depth = 0
    kept: list[str] = []
    pos = 0  # the text from here to the next bracket lies at `depth`
    while True:
        m = _BRACKET.search(name, pos)
        if m is None:
            if depth == 0:
                kept.append(name[pos:])
            return "".join(kept), ""
        at = m.start()
        if depth == 0:
            kept.append(name[pos:at])
        ch = name[at]
        if ch in "<[{":
            # `operator<` / `operator<<` are names, not template brackets; rare in kernels, tolerate
            depth += 1
        elif ch in ">]}" or ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:  # "(" at the top level
            # `(anonymous namespace)::` is a namespace, not the parameter list
            if name.startswith(_ANONYMOUS, at):
                kept.append(_ANONYMOUS)
                pos = at + len(_ANONYMOUS)
                continue
            return "".join(kept), name[at:]
        else:
            depth += 1
        pos = at + 1


@functools.lru_cache(maxsize=65536)
def short_name(kernel_name: str) -> str:
    """The bare function name of a (demangled) kernel name; '' for an empty name."""
    text = kernel_name.strip()
    if not text:
        return ""
    # Old ncu prints `<unnamed>::`; ncu >= 2025 strips namespaces and leaves a dangling `unnamed>::`,
    # sometimes inside template arguments whose `<` it kept. Neither `>` closes a bracket.
    text = text.replace("<unnamed>", "unnamed").replace("unnamed>::", "unnamed::")
    head, _ = _top_level_segments(text)
    head = head.strip()
    # Return type / qualifiers: everything up to the last top-level space belongs to them
    # (`void`, `static void`, `cutlass::Status`), because a function name has no spaces.
    for word in _LEADING_WORDS:
        while head.startswith(word):
            head = head[len(word):].lstrip()
    if " " in head:
        head = head.rsplit(" ", 1)[1]
    # Namespaces and classes: keep the last `::` component. ncu >= 2025 leaves `unnamed>::`.
    if "::" in head:
        head = head.rsplit("::", 1)[1]
    head = head.strip("*& ")
    return head or text


def fit_name(name: str, width: int) -> str:
    """`name` in at most `width` characters: cut in the middle with '…', keeping the head and the tail,
    because kernels of one family differ at the end (`…gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn` /
    `…_tn`). The one shortener of kernel and op names for tables, labels and charts."""
    text = str(name)
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return text[:head] + "…" + (text[-tail:] if tail else "")


def fit_tail(name: str, width: int) -> str:
    """`name` in at most `width` characters keeping its end: '…' + the tail. For dotted module paths, whose
    head is the model's root shared by every row (`…layers.11.self_attn.q_proj`)."""
    text = str(name)
    if len(text) <= width:
        return text
    kept = text[len(text) - width + 1:] if width > 1 else ""
    dot = kept.find(".")
    # start at a path component when one starts close by, unless the cut one is a layer's index
    if 0 <= dot < min(8, len(kept) // 3) and not kept[:dot].isdigit():
        kept = kept[dot + 1:]
    return "…"[:width] + kept


def fit_names(names: list[str], width: int, *, keep: str = "middle") -> list[str]:
    """Each of `names` in at most `width` characters — cut in the middle (fit_name) or, keep="tail", at the
    head (fit_tail) — such that distinct names stay distinct where the width allows: names whose cut
    forms coincide (`aten::convolution_backward` / `aten::convolution` cut to the same head, two layers'
    modules differing only in their middle) are shown instead as the window of `width` characters around
    where they first differ, '…' on each cut side. The one shortener of a table's or a chart's column."""
    fit = fit_tail if keep == "tail" else fit_name
    texts = [str(n) for n in names]
    out = [fit(t, width) for t in texts]
    for _ in range(4):  # a window can collide again within a larger group: refine a few times
        groups: dict[str, set[str]] = {}
        for text, shown in zip(texts, out, strict=True):
            groups.setdefault(shown, set()).add(text)
        clashes = {shown: sorted(full) for shown, full in groups.items() if len(full) > 1}
        if not clashes:
            break
        for shown, full in clashes.items():
            at = len(_common_prefix(full))
            windows = {t: _window(t, at, width) for t in full}
            out = [windows.get(t, o) if o == shown else o for t, o in zip(texts, out, strict=True)]
    return out


def _common_prefix(texts: list[str]) -> str:
    import os.path

    return os.path.commonprefix(texts)


def _window(text: str, at: int, width: int) -> str:
    """The `width` characters of `text` around position `at` (where it differs from its look-alikes), '…'
    marking each cut side: the differing character and what follows it come first."""
    if len(text) <= width:
        return text
    room = width - 2  # both sides cut, at most
    start = max(0, min(at - room // 3, len(text) - (width - 1)))
    if start == 0:
        return text[:width - 1] + "…"
    end = start + room
    if end >= len(text):
        return "…" + text[len(text) - (width - 1):]
    return "…" + text[start:end] + "…"

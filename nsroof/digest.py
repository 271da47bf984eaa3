"""SHA-256 of input files, for the report's provenance (metadata `inputs[].sha256`).

Standard library only, so `nsroof analyze` can start hashing before it imports pandas and pyarrow:
hashing releases the GIL, so the digest of a large export is computed on another core while the
interpreter imports (and then while the importer parses), instead of after.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

# Hashed in windows of the mapped file: one `update` per window, which releases the GIL for the whole
# window (1 MiB reads took the GIL back ~500 times for a 254 MB export while the main thread parsed,
# and finished ~0.15 s later), and each window's pages are dropped from this process after it (the
# page cache keeps them), so the resident set does not grow by the file. 8 MiB: the window is resident
# while it is hashed, and 32 MiB windows were a quarter of the peak RSS a 122 MB export added.
HASH_WINDOW_BYTES = 8 << 20


def sha256_of(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty, or not a regular file: read it
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
    with mm, memoryview(mm) as view:
        can_drop = hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED")
        for start in range(0, len(mm), HASH_WINDOW_BYTES):
            with view[start : start + HASH_WINDOW_BYTES] as window:
                h.update(window)
            if can_drop:
                mm.madvise(mmap.MADV_DONTNEED, start, min(HASH_WINDOW_BYTES, len(mm) - start))
    return h.hexdigest()


def start(paths: Iterable[str | os.PathLike[str]]) -> dict[str, Future[str]]:
    """Hash each regular file on a background thread; {os.fspath(path): future digest}. Anything else
    (missing, a directory, a pipe — which hashing would drain, and opening could block on) gets a future
    holding the error, unread: the importer reports that input first, in its own words."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsroof-sha256")
    futures: dict[str, Future[str]] = {}
    try:
        for p in paths:
            if os.path.isfile(p):
                futures[os.fspath(p)] = pool.submit(sha256_of, p)
            else:
                failed: Future[str] = Future()
                failed.set_exception(OSError(f"{os.fspath(p)}: not a regular file; not hashed"))
                futures[os.fspath(p)] = failed
        return futures
    finally:
        pool.shutdown(wait=False)

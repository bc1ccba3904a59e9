"""The operator's malloc settings hold in a real process (glibc's own counts, from malloc_info):
threads alive at once share the capped arenas instead of each getting its own; a large block
allocated after a larger one was freed is still mapped on its own (glibc's rising threshold
would carve it from an arena). The probes read the settings as the operator does
(PHALANX_OPERATOR_MALLOC_ARENAS, PHALANX_OPERATOR_MALLOC_MMAP_THRESHOLD)."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import textwrap

import pytest

THREADS = 6

PROBE = textwrap.dedent(f"""
    import ctypes, ctypes.util, re, threading
    from phalanx.operator import allocator
    from phalanx.operator.settings import OperatorSettings

    allocator.cap_arenas(OperatorSettings().malloc_arenas)
    together = threading.Barrier({THREADS})

    def allocate():
        together.wait()  # every thread alive: none can reuse an exited one's arena
        kept = [bytes(4096) for _ in range(100)]  # past pymalloc's 512 bytes: malloc's own
        together.wait()

    threads = [threading.Thread(target=allocate) for _ in range({THREADS})]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.open_memstream.restype = ctypes.c_void_p
    text, size = ctypes.c_char_p(), ctypes.c_size_t()
    stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    print(len(re.findall(r"<heap nr=", text.value.decode())))
""")


MMAP_PROBE = textwrap.dedent("""
    import ctypes, ctypes.util, re
    from phalanx.operator import allocator
    from phalanx.operator.settings import OperatorSettings

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.open_memstream.restype = ctypes.c_void_p

    def mapped_bytes():
        text, size = ctypes.c_char_p(), ctypes.c_size_t()
        stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        return int(re.findall(r'<total type="mmap" count="\\d+" size="(\\d+)"',
                              text.value.decode())[-1])

    allocator.fix_mmap_threshold(OperatorSettings().malloc_mmap_threshold)
    freed = bytes(8 << 20)  # mapped on its own, then freed: glibc's threshold rises past it
    del freed
    before = mapped_bytes()
    kept = bytes(1 << 20)
    print(mapped_bytes() - before >= len(kept))
""")


def _probe(code: str, settings: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_OPERATOR_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, env=env | settings)  # fmt: skip
    return done.stdout.strip()


def arenas_used(cap: int | None) -> int:
    """Arenas in use after THREADS threads allocated at once; `cap` None: the default setting."""
    return int(_probe(PROBE, {} if cap is None else {"PHALANX_OPERATOR_MALLOC_ARENAS": str(cap)}))


glibc_only = pytest.mark.skipif(
    "libc.so" not in (ctypes.util.find_library("c") or ""), reason="malloc arenas are glibc's"
)


@glibc_only
def test_without_a_cap_each_thread_gets_an_arena_and_with_one_they_share() -> None:
    assert arenas_used(0) > THREADS // 2, "glibc's default: an arena per allocating thread"
    assert arenas_used(None) == 2, "the operator's default cap"
    assert arenas_used(1) == 1


@glibc_only
def test_a_large_block_stays_mapped_on_its_own_after_a_larger_one_was_freed() -> None:
    assert _probe(MMAP_PROBE, {}) == "True", "the operator's default: 128 KiB, fixed"
    threshold = {"PHALANX_OPERATOR_MALLOC_MMAP_THRESHOLD": "0"}
    assert _probe(MMAP_PROBE, threshold) == "False", "glibc's rising threshold: from an arena"

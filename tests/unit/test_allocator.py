"""The operator's malloc arena cap holds in a real process: threads alive at once share the
capped arenas instead of each getting its own (glibc's own count, from malloc_info). The probe
reads the cap as the operator does, from its settings (PHALANX_OPERATOR_MALLOC_ARENAS)."""

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


def arenas_used(cap: int | None) -> int:
    """Arenas in use after THREADS threads allocated at once; `cap` None: the default setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_OPERATOR_")}
    if cap is not None:
        env["PHALANX_OPERATOR_MALLOC_ARENAS"] = str(cap)
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, check=True, env=env)  # fmt: skip
    return int(done.stdout)


glibc_only = pytest.mark.skipif(
    "libc.so" not in (ctypes.util.find_library("c") or ""), reason="malloc arenas are glibc's"
)


@glibc_only
def test_without_a_cap_each_thread_gets_an_arena_and_with_one_they_share() -> None:
    assert arenas_used(0) > THREADS // 2, "glibc's default: an arena per allocating thread"
    assert arenas_used(None) == 2, "the operator's default cap"
    assert arenas_used(1) == 1

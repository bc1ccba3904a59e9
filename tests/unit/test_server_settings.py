"""`phalanx-api` refuses to send bearer tokens in the clear without being told to.

Covers: plain HTTP on loopback (the default address) is allowed; on another address it is refused
with an error that names both ways out (a certificate, or insecure_http), by the settings and by
the command (exit 2, one line, no traceback); a certificate without its key is refused; with both
the settings serve TLS; insecure_http lets plain HTTP through.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from phalanx.server.settings import ServerSettings


def test_plain_http_is_fine_on_loopback_only() -> None:
    assert not ServerSettings().tls
    assert ServerSettings(host="::1").host == "::1"
    assert ServerSettings(host="localhost").host == "localhost"
    with pytest.raises(ValidationError, match=r"tls_cert_file and tls_key_file.*insecure_http"):
        ServerSettings(host="0.0.0.0")
    assert ServerSettings(host="0.0.0.0", insecure_http=True).insecure_http


def test_a_certificate_goes_with_its_key(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    with pytest.raises(ValidationError, match="set both or neither"):
        ServerSettings(host="0.0.0.0", tls_cert_file=cert)
    assert ServerSettings(host="0.0.0.0", tls_cert_file=cert, tls_key_file=key).tls


def test_the_command_says_why_it_will_not_start_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.server", "--host", "10.1.2.3"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("phalanx-api: ")
    assert "PHALANX_API_TLS_CERT_FILE" in done.stderr
    assert "PHALANX_API_INSECURE_HTTP" in done.stderr

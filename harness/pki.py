"""Throw-away certificates for a loopback control plane, made with the openssl CLI.

Why: kube-apiserver needs a serving certificate, a client CA for the admin's certificate, and a key
pair to sign service-account tokens. openssl is on every machine we run on, so no Python crypto
dependency is needed for tests.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    """Paths of the files a loopback kube-apiserver and its admin client need."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_public_key: Path
    sa_private_key: Path


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True)


def _issue(directory: Path, name: str, subject: str, extensions: str) -> None:
    """Sign `<name>.crt` with the CA for `subject`, with the given X.509 v3 extensions."""
    (directory / f"{name}.ext").write_text(extensions)
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=directory)
    _openssl(
        "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=directory
    )
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "30", "-out", f"{name}.crt", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


def make_pki(directory: Path) -> Pki:
    """Create a CA, a serving cert for loopback, an admin client cert and a service-account key."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "30", "-subj", "/CN=phalanx-test-ca", cwd=directory,
    )  # fmt: skip
    _issue(
        directory,
        "serving",
        "/CN=kube-apiserver",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc\n",
    )
    _issue(
        directory,
        "admin",
        "/O=system:masters/CN=phalanx-admin",
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\n",
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    return Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_public_key=directory / "sa.pub",
        sa_private_key=directory / "sa.key",
    )

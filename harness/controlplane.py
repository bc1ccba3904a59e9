"""A real etcd + kube-apiserver on loopback, for tests and for contributors' laptops.

Why real: an operator's tests must meet what the API server enforces (structural schemas, CEL,
RBAC, resourceVersion conflicts, watches). Like controller-runtime's envtest, this starts the
pinned binaries that `tests/tools/k8s-binaries.sh` builds, with TLS, RBAC and service-account
token issuing, writes an admin kubeconfig and installs the shipped CRD.

Contributors: `make apiserver` (or `python -m harness.controlplane`) starts one and prints
the KUBECONFIG to export; Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.pki import Pki, make_pki

REPO_ROOT = Path(__file__).resolve().parents[1]
BINARIES_SCRIPT = REPO_ROOT / "tests/tools/k8s-binaries.sh"
SHIPPED_CRDS = (REPO_ROOT / "deploy/crds/phalanx.dev_trainingjobs.yaml",)
START_TIMEOUT_S = 60.0


def binaries_dir() -> Path:
    """Where the pinned binaries are, building them first if the cache lacks them."""
    result = subprocess.run(
        [
            "bash",
            str(BINARIES_SCRIPT),
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kubectl",
            "promtool",
        ],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(result.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(predicate: object, timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll `predicate` until it is true, or raise TimeoutError naming `what`."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class ControlPlane:
    """etcd, kube-apiserver and kube-controller-manager, and the files a client needs."""

    workdir: Path
    bin_dir: Path = field(default_factory=binaries_dir)
    server: str = ""
    apiserver_args: tuple[str, ...] = ()
    """More kube-apiserver flags (the control-plane benchmark's audit log and token file)."""
    controllers: str = "garbagecollector,namespace"
    """kube-controller-manager's controllers (the detection benchmark adds nodelifecycle)."""
    controller_manager_args: tuple[str, ...] = ()
    """More kube-controller-manager flags (the Job-controller baseline lifts its client limits)."""
    kubeconfig: Path = field(init=False)
    pki: Pki = field(init=False)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kubeconfig = self.workdir / "kubeconfig"

    @property
    def kubectl(self) -> Path:
        """The pinned kubectl (the one on PATH may be another version)."""
        return self.bin_dir / "kubectl"

    @property
    def pids(self) -> list[int]:
        """Process ids of the running components."""
        return [p.pid for p in self._processes]

    def start(self) -> None:
        """Start etcd and kube-apiserver, write the kubeconfig and install the shipped CRDs."""
        try:
            self.pki = make_pki(self.workdir / "pki")
            etcd_url = self._start_etcd()
            self._start_apiserver(etcd_url)
            self._write_kubeconfig()
            self._start_controller_manager()
            self.install_crds()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL) and reap it; safe to call twice."""
        for proc in reversed(self._processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._processes):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._processes.clear()

    def kubectl_run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this control plane; failures carry kubectl's stderr."""
        result = subprocess.run(
            [str(self.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            check=False,
            capture_output=True,
            text=True,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def install_crds(self) -> None:
        """Apply the CRD files that ship in deploy/ and wait until each is Established."""
        for crd in SHIPPED_CRDS:
            self.kubectl_run("apply", "--server-side", "-f", str(crd))
            self.wait_established(crd)

    def wait_established(self, manifest: Path) -> None:
        """Until the CRD in `manifest` is Established (`kubectl wait` errors while the CRD has
        no conditions yet, so poll instead)."""
        query = '{.status.conditions[?(@.type=="Established")].status}'

        def established() -> bool:
            result = self.kubectl_run(
                "get", "-f", str(manifest), "-o", f"jsonpath={query}", check=False
            )
            return result.stdout.strip() == "True"

        wait_until(established, 30, f"{manifest.name} to be Established", interval=0.2)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with (self.workdir / f"{name}.log").open("wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._processes.append(proc)
        return proc

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        wait_until(lambda: self._healthy(f"{url}/health"), START_TIMEOUT_S, "etcd")
        return url

    def _start_apiserver(self, etcd_url: str) -> None:
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'certs'}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.pki.sa_public_key}",
                f"--service-account-signing-key-file={self.pki.sa_private_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--api-audiences=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.0.0.0/24",
                # No controller-manager runs here, so nothing creates namespaces' default
                # ServiceAccount; the admission plugin that requires it would refuse every pod.
                "--disable-admission-plugins=ServiceAccount",
                # As on OpenShift and hardened clusters: setting blockOwnerDeletion on a child
                # needs update on its owner's finalizers (the chart's RBAC tests rely on it).
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
                *self.apiserver_args,
            ],
        )
        wait_until(lambda: self._healthy(f"{self.server}/readyz"), START_TIMEOUT_S, "apiserver")

    def _start_controller_manager(self) -> None:
        """By default only the controllers tests rely on: garbage collection (owner references)
        and namespace deletion. Pods are never scheduled or run here: tests play kubelet."""
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={self.controllers}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=5",
                "--v=1",
                *self.controller_manager_args,
            ],
        )

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def _healthy(self, url: str) -> bool:
        self._raise_if_exited()
        context = self._ssl_context() if url.startswith("https") else None
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def _raise_if_exited(self) -> None:
        for proc in self._processes:
            if proc.poll() is not None:
                log = Path(str(proc.args[0])).name  # type: ignore[index]
                tail = (self.workdir / f"{log}.log").read_text(errors="replace")[-4000:]
                raise RuntimeError(f"{log} exited with {proc.returncode}:\n{tail}")

    def _write_kubeconfig(self) -> None:
        self.kubeconfig.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: phalanx-test
  cluster:
    server: {self.server}
    certificate-authority: {self.pki.ca_cert}
users:
- name: admin
  user:
    client-certificate: {self.pki.admin_cert}
    client-key: {self.pki.admin_key}
contexts:
- name: phalanx-test
  context: {{cluster: phalanx-test, user: admin}}
current-context: phalanx-test
"""
        )


@contextlib.contextmanager
def running_control_plane(
    workdir: Path | None = None,
    apiserver_args: tuple[str, ...] = (),
    controllers: str = ControlPlane.controllers,
    controller_manager_args: tuple[str, ...] = (),
) -> Iterator[ControlPlane]:
    """A started control plane, stopped on exit."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="phalanx-cp-")))
        plane = ControlPlane(
            workdir=workdir, apiserver_args=apiserver_args, controllers=controllers,
            controller_manager_args=controller_manager_args,
        )  # fmt: skip
        plane.start()
        stack.callback(plane.stop)
        yield plane


def main(argv: list[str] | None = None) -> int:
    """Start a control plane for manual use and keep it running until interrupted."""
    parser = argparse.ArgumentParser(description="Run a local kube-apiserver + etcd for Phalanx.")
    parser.add_argument("--dir", type=Path, help="working directory (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
    with running_control_plane(args.dir) as plane:
        print(f"kube-apiserver ready at {plane.server} with the TrainingJob CRD installed.")
        print(f"export KUBECONFIG={plane.kubeconfig}")
        print(f"pinned kubectl: {plane.kubectl}")
        print("Ctrl-C stops it.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


if __name__ == "__main__":
    sys.exit(main())

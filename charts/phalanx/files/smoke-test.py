"""`helm test`: the TrainingJob API is served, and the API service is ready and reviews tokens.

Standard library only. Exits 0 when every check passes, 1 with the reason otherwise. Inside the
test pod it reads the service-account token and CA; the environment can point it elsewhere:
  PHALANX_API_URL   the API service (empty: skip its checks)
  PHALANX_API_TOKEN_FILE   a token for the service's audience (default: the kube API's token)
  PHALANX_API_CA_FILE   the CA the service's certificate must verify against (https URLs)
  POD_NAMESPACE     the namespace whose job list the test asks for
  KUBE_API_URL, KUBE_TOKEN_FILE, KUBE_CA_FILE   default: the in-cluster service account
  SMOKE_TIMEOUT_SECONDS   how long the API service may take to be ready (default 120)
"""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GROUP_VERSION = "phalanx.dev/v1alpha1"


def fetch(
    url: str, token: str | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """(status, body) of a GET; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def check_crd_served(kube_url: str, token: str, context: ssl.SSLContext) -> None:
    status, body = fetch(f"{kube_url}/apis/{GROUP_VERSION}", token, context)
    if status != 200:
        raise SystemExit(f"FAIL: {GROUP_VERSION} is not served ({status}): {body[:300]}")
    names = {r["name"] for r in json.loads(body).get("resources", [])}
    if "trainingjobs" not in names:
        raise SystemExit(f"FAIL: {GROUP_VERSION} serves {sorted(names)}, not trainingjobs")
    print(f"ok: the API server serves trainingjobs.{GROUP_VERSION.split('/')[0]}")


def check_api_ready(api_url: str, timeout: float, context: ssl.SSLContext | None) -> None:
    deadline, last = time.monotonic() + timeout, "no answer"
    while time.monotonic() < deadline:
        try:
            status, body = fetch(f"{api_url}/readyz", context=context)
        except urllib.error.URLError as error:
            if isinstance(error.reason, ssl.SSLCertVerificationError):  # the wrong certificate
                raise SystemExit(f"FAIL: {api_url}: its certificate does not verify: {error}")
            status, body = 0, str(error)  # not listening yet
        except OSError as error:  # not listening yet
            status, body = 0, str(error)
        if status == 200:
            verified = " (its certificate verified against its CA)" if context else ""
            print(f"ok: {api_url}/readyz{verified}")
            return
        last = f"{status} {body[:200]}"
        time.sleep(2)
    raise SystemExit(f"FAIL: {api_url}/readyz not ready after {timeout:.0f} s: {last}")


def check_api_reviews_tokens(
    api_url: str, token: str, namespace: str, context: ssl.SSLContext | None
) -> None:
    """This pod's identity has no rights on jobs: 403 shows that the service's TokenReview
    accepted the token and its SubjectAccessReview answered (401 or 5xx: its RBAC is wrong)."""
    url = f"{api_url}/api/v1/jobs?namespace={namespace}&limit=1"
    status, body = fetch(url, token, context)
    if status not in (200, 403):
        raise SystemExit(f"FAIL: listing jobs with this pod's token gave {status}: {body[:300]}")
    print(f"ok: the API service reviewed this pod's token ({status})")


def main() -> int:
    kube_url = os.environ.get("KUBE_API_URL") or "https://{}:{}".format(
        os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    )
    token = Path(os.environ.get("KUBE_TOKEN_FILE", f"{SA_DIR}/token")).read_text().strip()
    context = ssl.create_default_context(cafile=os.environ.get("KUBE_CA_FILE", f"{SA_DIR}/ca.crt"))
    check_crd_served(kube_url, token, context)
    api_url = os.environ.get("PHALANX_API_URL", "").rstrip("/")
    if api_url:
        ca_file = os.environ.get("PHALANX_API_CA_FILE")
        if api_url.startswith("https://") and not ca_file:
            raise SystemExit("FAIL: an https API service needs PHALANX_API_CA_FILE to verify it")
        api_context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        api_token_file = os.environ.get("PHALANX_API_TOKEN_FILE")
        api_token = Path(api_token_file).read_text().strip() if api_token_file else token
        check_api_ready(api_url, float(os.environ.get("SMOKE_TIMEOUT_SECONDS", "120")), api_context)
        namespace = os.environ.get("POD_NAMESPACE", "default")
        check_api_reviews_tokens(api_url, api_token, namespace, api_context)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""kopf connects with the operator's own token, however the kubernetes client stored it.

Found on kind: in a pod the client keeps the service account's token as
api_key["BearerToken"] = "bearer <token>", the operator looked for api_key["authorization"], and
kopf watched as system:anonymous (403 on /api), so no job was ever reconciled in a cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from phalanx.operator import kube


@pytest.mark.parametrize(
    ("api_key", "expected"),
    [
        ({"BearerToken": "bearer in-cluster-token"}, "in-cluster-token"),  # load_incluster_config
        ({"BearerToken": "Bearer kubeconfig-token"}, "kubeconfig-token"),  # load_kube_config
        ({"authorization": "Bearer old-client-token"}, "old-client-token"),
        ({}, None),  # client certificates only
    ],
)
def test_the_bearer_token_is_found_where_the_client_keeps_it(
    api_key: dict[str, str], expected: str | None
) -> None:
    configuration = k8s.Configuration()
    configuration.api_key = api_key
    info = kube.connection_info(configuration)
    assert info.token == expected
    assert info.scheme == ("Bearer" if expected else None)


def test_a_rotated_token_is_read_again_when_kopf_logs_in_again(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    configuration = k8s.Configuration()

    def refresh(config: k8s.Configuration) -> None:  # what load_incluster_config installs
        config.api_key = {"BearerToken": "bearer " + token_file.read_text()}

    configuration.refresh_api_key_hook = refresh  # type: ignore[assignment]
    assert kube.connection_info(configuration).token == "first"
    token_file.write_text("second")
    assert kube.connection_info(configuration).token == "second"

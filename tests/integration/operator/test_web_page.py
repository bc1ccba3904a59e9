"""The web page in headless Chromium, against the API service, with the operator running and
the test as kubelet: a job that fails, restarts, then shrinks shows its world-size and epoch
timeline, its throughput and loss, its failure, its events and its ETA (the CLI's `get` shows
the same); the charts follow a window resize. A screenshot is saved as a test artifact.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx
from kubernetes import client as k8s
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from typer.testing import CliRunner

from harness.rbac import grant, grant_jobs, identity
from phalanx.cli.main import app
from tests.integration.operator.conftest import Cluster
from tests.support.apiserver import running_api
from tests.support.browser import artifacts_dir, chromium, page_state

NARROW, WIDE = (720, 900), (1400, 1100)
TOTAL_STEPS, STEP_SECONDS = 1000, 6.5  # epoch 3: 900 steps left, 1 h 37 min 30 s


def _train(cluster: Cluster, epoch: int, steps: range) -> None:
    """Node rank 0's heartbeats for `steps`, each seen in the job's status before the next."""
    for step in steps:
        beat = {
            "epoch": epoch,
            "step": step,
            "samplesPerSecond": 100.0 + step,
            "loss": 4 - step / 50,
        }
        if epoch == 3:
            beat |= {"totalSteps": TOTAL_STEPS, "stepSeconds": STEP_SECONDS}
        cluster.kubelet.heartbeat("web", beat)
        cluster.wait_status("web", functools.partial(_at_step, step=step), f"step {step}")


def _at_step(status: dict[str, Any], step: int) -> bool:
    return bool((status.get("progress") or {}).get("step") == step)


def _run_a_job_that_fails_then_shrinks(cluster: Cluster) -> None:
    cluster.create_job("web", nprocPerNode=1, failurePolicy={"scheduleTimeoutSeconds": 3})
    cluster.kubelet.start_gang("web", 1, 4)
    cluster.wait_status("web", lambda s: s.get("phase") == "Running", "Running")
    _train(cluster, 1, range(10, 60, 10))
    cluster.kubelet.exit("web-1-3", 1, message="ZeroDivisionError: division by zero")
    pods = cluster.kubelet.wait_pods("web", 2, 4)
    for rank in range(3):
        cluster.kubelet.bind(pods[rank].metadata.name, f"node-{rank}")
        cluster.kubelet.run(pods[rank].metadata.name)
    cluster.kubelet.unschedulable(pods[3].metadata.name)
    cluster.wait_status("web", lambda s: s.get("epoch") == 3, "a shrink to epoch 3")
    cluster.kubelet.start_gang("web", 3, 3)
    _train(cluster, 3, range(60, 110, 10))


def test_web_page_shows_the_timeline_after_a_resize(
    cluster: Cluster, kube_client: k8s.ApiClient, namespace: str
) -> None:
    user = identity(kube_client, namespace, "web-user")
    grant_jobs(kube_client, namespace, user)
    read_events = k8s.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"])
    grant(kube_client, namespace, user, "events", [read_events])
    with running_api(kube_client, authz_cache_seconds=5.0) as url:
        _run_a_job_that_fails_then_shrinks(cluster)
        history = httpx.get(
            f"{url}/api/v1/namespaces/{namespace}/jobs/web/history", headers=user.headers
        ).json()["points"]
        assert {p["epoch"] for p in history} >= {1, 2, 3}
        assert [p["worldSize"] for p in history if p["epoch"] == 3][-1] == 3

        with chromium(*NARROW) as browser:
            browser.get(f"{url}/#{namespace}/web")
            browser.find_element(By.ID, "token").send_keys(user.token)
            browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
            wait = WebDriverWait(browser, 30)
            try:
                wait.until(lambda b: int(_attr(b, "#timeline", "data-points")) >= len(history))
            except TimeoutException:
                raise AssertionError(page_state(browser)) from None
            narrow = _chart_width(browser)

            browser.set_window_size(*WIDE)
            wait.until(lambda b: _chart_width(b) > narrow and _fits(b, "#timeline"))
            assert _fits(browser, "#throughput")
            assert int(_attr(browser, "#throughput", "data-points")) >= 10  # 10 steps and a break
            assert "web" in browser.find_element(By.ID, "jobs").text  # listed in its namespace
            assert not browser.find_element(By.ID, "error").is_displayed()
            assert f"{namespace}/web" in browser.find_element(By.ID, "job-title").text
            failures = browser.find_element(By.ID, "failures").text
            assert "web-1-3" in failures
            assert "ZeroDivisionError" in failures
            wait.until(lambda b: "Shrink" in b.find_element(By.ID, "events").text)
            facts = browser.find_element(By.ID, "job-facts").text
            assert f"100 / {TOTAL_STEPS}" in facts, facts
            assert "ETA\nin 1 h 37 min" in facts, facts
            legend = browser.find_element(By.CSS_SELECTOR, "#timeline .u-legend").text
            assert "world size" in legend
            assert "epoch" in legend
            shot = artifacts_dir() / "web-job-timeline.png"
            assert browser.save_screenshot(str(shot)), "no screenshot"
            print(f"screenshot: {shot}")

        got = CliRunner().invoke(
            app, ["get", "web", "--server", url, "--token", user.token, "-n", namespace]
        )
        assert got.exit_code == 0, got.output
        assert f"step 100 / {TOTAL_STEPS}" in got.output
        assert "ETA in 1h37m" in got.output, got.output


def _attr(browser: Any, selector: str, name: str) -> str:
    value = browser.find_element(By.CSS_SELECTOR, selector).get_attribute(name)
    return str(value or "0")


def _chart_width(browser: Any) -> float:
    """The drawn width of the timeline's plot (its canvas), in CSS pixels."""
    width: float = browser.execute_script(
        "const c = document.querySelector('#timeline canvas');"
        "return c ? c.getBoundingClientRect().width : 0;"
    )
    return width


def _fits(browser: Any, selector: str) -> bool:
    """The chart was redrawn for its container's current width (not left at an old size)."""
    fits: bool = browser.execute_script(
        "const el = document.querySelector(arguments[0]);"
        "const plot = el.querySelector('.uplot');"
        "return !!plot && Math.abs(plot.getBoundingClientRect().width - el.clientWidth) <= 2;",
        selector,
    )
    return fits

"""`python -m phalanx.agent`: the node pod's entrypoint (see main.py)."""

from phalanx.agent.main import run

if __name__ == "__main__":  # not when multiprocessing re-imports it in a warm worker
    run()

"""`python -m phalanx.trainer.agent`: the node pod's entrypoint (see main.py)."""

from phalanx.trainer.agent.main import run

if __name__ == "__main__":  # not when multiprocessing re-imports it in a warm worker
    run()

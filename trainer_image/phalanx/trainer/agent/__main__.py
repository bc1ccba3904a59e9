"""`python -m phalanx.trainer.agent`."""

from phalanx.trainer.agent.main import run

run()

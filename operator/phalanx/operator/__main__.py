"""`python -m phalanx.operator`."""

from phalanx.operator.main import main

main()

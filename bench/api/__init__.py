"""The REST service: reads from its watch cache beside reads from the kube API."""

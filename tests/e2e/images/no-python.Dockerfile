# An image with no Python at all (a Go or C++ trainer's, say): the agent injected into it cannot
# run, and the operator must say so and run the job's command without it (test_any_image.py).
ARG BASE=python:3.11-slim
FROM ${BASE}
RUN rm -f /usr/bin/python* /usr/local/bin/python* && ! command -v python3 && ! command -v python
USER 1000:1000

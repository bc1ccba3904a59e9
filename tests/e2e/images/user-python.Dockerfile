# An image a user brings: the base's python3 and torch, and no Phalanx at all (no phalanx-agent,
# no phalanx package, nothing pip-installed by us). The kind suite runs its own scripts in it to
# show that the operator injects the agent into any image (operator.agentInjection).
#
# torch comes, as for the suite's trainer image, from the host's folder that kind mounts on the
# workers at /opt/phalanx-torch (a 6 GB image per node would cost minutes to load): a .pth file
# puts it on the interpreter's path, as a pip install would.
ARG BASE=python:3.11-slim
FROM ${BASE}
RUN if ! command -v python3 >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends python3 && \
      rm -rf /var/lib/apt/lists/*; \
    fi && \
    site=$(python3 -c 'import site; print(site.getsitepackages()[0])') && \
    mkdir -p "$site" && echo /opt/phalanx-torch > "$site/torch-from-host.pth" && \
    if python3 -c 'import phalanx' 2>/dev/null; then echo "phalanx must not be importable" >&2; exit 1; fi
RUN useradd --uid 1000 --create-home --shell /usr/sbin/nologin user
USER 1000:1000
WORKDIR /home/user
ENV PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1

# The evalgate action's image. The base is a build argument so that an air-gapped build can use
# a local Python image; the default is the official slim image.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Dependencies first, from the pinned list, so that code changes rebuild only the last layer.
# They are byte-compiled here, in their own cached layer (PYTHONDONTWRITEBYTECODE: nothing is
# compiled at run time), so a code change recompiles only evalgate (seconds, not a minute).
COPY constraints.txt /opt/evalgate/constraints.txt
# The test suites that numpy and scipy ship (about 50 MB, and as much again compiled) are never
# imported at run time: they are removed before compiling.
RUN python3 -m venv /opt/evalgate/venv \
 && /opt/evalgate/venv/bin/pip install --no-compile -r /opt/evalgate/constraints.txt \
 && find /opt/evalgate/venv/lib -depth -type d -name tests \
      \( -path "*/site-packages/scipy/*" -o -path "*/site-packages/numpy/*" \) -exec rm -rf {} + \
 && /opt/evalgate/venv/bin/python -m compileall -q /opt/evalgate/venv/lib

COPY pyproject.toml README.md /opt/evalgate/src/
COPY evalgate /opt/evalgate/src/evalgate
COPY examples/bike-shop /opt/evalgate/src/examples/bike-shop
RUN /opt/evalgate/venv/bin/pip install --no-deps --no-compile /opt/evalgate/src \
 && /opt/evalgate/venv/bin/python -m compileall -q /opt/evalgate/venv/lib/python3*/site-packages/evalgate \
 && rm -rf /opt/evalgate/src

ENTRYPOINT ["/opt/evalgate/venv/bin/python", "-m", "evalgate", "action"]

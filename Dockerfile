# The evalgate action's image. The base is a build argument so that an air-gapped build can use
# a local Python image; the default is the official slim image. Released images are prebuilt
# (.github/workflows/release.yml) and action.yml points at them; this file is for local and
# air-gapped builds (see docs/action.md, "Air-gapped and local builds").
ARG BASE_IMAGE=python:3.11-slim

# --- deps: the pinned dependencies, trimmed. Cached while constraints.txt is unchanged. -------
FROM ${BASE_IMAGE} AS deps
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY constraints.txt /opt/evalgate/constraints.txt
# What the trimming removes is never used at run time: pip and setuptools (the venv is never
# installed into again), the test suites numpy and scipy ship, type stubs, and each dependency's
# .py source once it is byte-compiled next to it (a sourceless .pyc imports as the module;
# evalgate's own source stays, for readable tracebacks), and the symbol tables of the Python
# extension modules (strip --strip-unneeded keeps what the dynamic loader needs), and what only
# a build against numpy or scipy reads (C headers and sources, Cython declarations, static
# libraries: about 3 MB), numpy.distutils (a build tool; f2py stays, scipy imports it), the scipy subpackages outside what scipy.stats imports that evalgate never uses
# (scipy.io's file formats, scipy.odr) and the wheels' RECORD files (read only by pip, which is
# gone): with them the image stays within 200 MB of its base with openai in it. The build
# imports what evalgate uses of numpy and scipy once the trimming is done. The libraries
# that wheels vendor (*.libs/) are left as they are: stripping them breaks their patched ELF
# headers (numpy then fails to load). binutils stays in this stage only.
RUN apt-get update -q >/dev/null \
 && apt-get install -y -q --no-install-recommends binutils >/dev/null \
 && python3 -m venv /opt/evalgate/venv \
 && /opt/evalgate/venv/bin/pip install --no-compile -q -r /opt/evalgate/constraints.txt \
 && /opt/evalgate/venv/bin/pip uninstall -y -q pip setuptools \
 && SITE=$(/opt/evalgate/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
 && find "$SITE" -depth -type d -name tests \
      \( -path "*/site-packages/scipy/*" -o -path "*/site-packages/numpy/*" \) -exec rm -rf {} + \
 && rm -rf "$SITE/numpy/distutils" "$SITE/scipy/io" "$SITE/scipy/odr" \
 && find "$SITE" -path "*.dist-info/RECORD" -type f -delete \
 && find "$SITE" -type f \( -name "*.h" -o -name "*.c" -o -name "*.cpp" -o -name "*.pxd" \
      -o -name "*.pyx" -o -name "*.pxi" -o -name "*.a" \) -delete \
 && find "$SITE" -name "*.cpython-*.so" -type f -not -path "*.libs/*" \
      -exec strip --strip-unneeded {} + \
 && /opt/evalgate/venv/bin/python -m compileall -q -b "$SITE" \
 && find "$SITE" \( -name "*.py" -o -name "*.pyi" \) -type f -delete \
 && find "$SITE" -depth -type d -name __pycache__ -exec rm -rf {} + \
 && /opt/evalgate/venv/bin/python -c "import numpy, numpy.typing, scipy.special, scipy.stats, scipy.integrate" \
 && echo /opt/evalgate/app >"$SITE/evalgate-app.pth"

# --- app: evalgate itself, into its own folder, so that a code change rebuilds only this. -----
FROM deps AS app
COPY pyproject.toml README.md /opt/evalgate/src/
COPY evalgate /opt/evalgate/src/evalgate
COPY examples/bike-shop /opt/evalgate/src/examples/bike-shop
# The loopback stand-ins live under tests/support, outside the package: not in the image. The
# extras are evalgate.setup.image.IMAGE_EXTRAS (every backend runs here); their dependencies
# are pinned in constraints.txt and installed with the others above.
RUN python3 -m pip install -q --no-deps --no-compile --target /opt/evalgate/app "/opt/evalgate/src[openai]" \
 && rm -rf /opt/evalgate/app/bin \
 && /opt/evalgate/venv/bin/python -m compileall -q /opt/evalgate/app \
 && /opt/evalgate/venv/bin/python -c "from evalgate.report import render, template_cache as c; \
c.configure({c.VARIABLE: '/opt/evalgate/templates'}); render.compile_all()"

# --- the image: the base, the trimmed dependencies, evalgate. ---------------------------------
# The report templates compiled like the modules (evalgate.report.template_cache): a job
# renders its comment without compiling a template.
FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    EVALGATE_TEMPLATE_CACHE=/opt/evalgate/templates
COPY --from=deps /opt/evalgate/venv /opt/evalgate/venv
COPY --from=app /opt/evalgate/app /opt/evalgate/app
COPY --from=app /opt/evalgate/templates /opt/evalgate/templates
ENTRYPOINT ["/opt/evalgate/venv/bin/python", "-m", "evalgate", "action"]

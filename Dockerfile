# syntax=docker/dockerfile:1
# The image deploy/k8s names (registry.example/cardcat): the catalog ingress (`cardcat serve`) and the
# scanner's Ray head and workers (KubeRay runs `ray start` in it).
#   docker build -t registry.example/cardcat:$(git rev-parse --short HEAD) . && docker push ...
# then the release process writes the pushed digest into deploy/k8s/*.yaml (they pin by digest).
#
# Two stages: `build` downloads every dependency's wheel from requirements.lock, each checked against the
# lock's sha256, and builds the project's own wheel; the runtime stage installs only those wheels into a
# slim Python, with no compiler, no pip cache and no source tree, and runs as a numeric non-root user
# (Kubernetes' runAsNonRoot can only verify a numeric one).
#
# Not in the image: the models' weights (models/weights) and the FAISS index. Both live on the data
# volume mounted at /var/lib/cardcat (weights/ and index/, beside the rest of CARDCAT_DATA_DIR): a
# retrained model or a rebuilt index needs no new image, and the image holds no trained artefact. The
# package's models/weights is a link to /var/lib/cardcat/weights (serve_app.config and models.* look for
# the weights beside the package). .dockerignore keeps them, var/ and local environments out of the
# build context altogether.
#
# The base image is pinned by digest too: the release process fills in python:3.11-slim-bookworm's.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0000000000000000000000000000000000000000000000000000000000000000

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY requirements.lock ./
RUN python -m pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r requirements.lock
COPY pyproject.toml README.md ./
COPY core core
COPY catalog_api catalog_api
COPY serve_app serve_app
COPY models/*.py models/
COPY training training
COPY deploy deploy
COPY cardcat cardcat
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels/project .

FROM ${PYTHON_IMAGE}
# libGL and GLib for OpenCV; wget for KubeRay's readiness probes (they run it in the Ray containers).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 libgomp1 wget \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 cardcat \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --shell /usr/sbin/nologin cardcat
# The wheels are bind-mounted from the build stage (and the lock from the context), so no layer keeps a
# copy of them; the hashes are checked again on install.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,source=requirements.lock,target=/requirements.lock \
    python -m venv /opt/cardcat \
    && /opt/cardcat/bin/pip install --no-cache-dir --no-index --find-links /wheels \
        --require-hashes -r /requirements.lock \
    && /opt/cardcat/bin/pip install --no-cache-dir --no-index --no-deps /wheels/project/*.whl \
    && ln -s /var/lib/cardcat/weights /opt/cardcat/lib/python3.11/site-packages/models/weights
# The root filesystem is read-only in deploy/k8s: HOME and every cache point at /tmp, an emptyDir there.
ENV PATH=/opt/cardcat/bin:$PATH \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CARDCAT_DATA_DIR=/var/lib/cardcat
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000 9100
CMD ["cardcat", "serve", "--host", "0.0.0.0", "--port", "8000", "--no-scan"]

# The trainer-controller-manager image: `docker build -t <registry>/kubeflow-trainer-py:<version> .` from the
# repository root (the build needs pyproject.toml and the packages beside it). config/default deploys it
# (docs/install.md). Nothing here runs as root at run time; the user's numeric UID is the Deployment's
# runAsUser.

# BASE_IMAGE: any Debian-like image with Python 3.11 and its venv module (python:3.11 images, or Debian's
# python3 + python3-venv, which hack/build-images.sh uses where no registry is reachable).
# PIP_INDEX_URL, PIP_NO_INDEX, PIP_FIND_LINKS: passed to pip as they are, for a mirror or an offline build.
ARG BASE_IMAGE=python:3.11.7-slim-bookworm

# Build the wheel of this package, and wheels of its pinned dependencies.
FROM ${BASE_IMAGE} AS build
ARG PIP_INDEX_URL
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/build
WORKDIR /src
COPY requirements/manager.txt requirements/manager.txt
COPY pyproject.toml README.md ./
# runtime/crds is a link to config/crd: the wheel carries the CRDs that trainer-render validates against.
COPY config/crd config/crd
COPY controller controller
COPY runtime runtime
COPY cmd cmd
RUN PIP_CONSTRAINT=/src/requirements/manager.txt \
    /opt/build/bin/pip wheel --wheel-dir /wheels --constraint requirements/manager.txt .

# Run: only the installed wheels in a virtualenv, no compiler, no source tree.
FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/trainer/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY --from=build /wheels /wheels
COPY requirements/manager.txt /tmp/constraints.txt
RUN python3 -m venv /opt/trainer \
    && /opt/trainer/bin/pip install --no-index --find-links /wheels --constraint /tmp/constraints.txt \
        kubeflow-trainer-py==0.1.0 \
    && rm -rf /wheels /tmp/constraints.txt \
    && groupadd --system --gid 65532 trainer \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin trainer
WORKDIR /
USER 65532:65532
EXPOSE 8081 8443 9443 10443
ENTRYPOINT ["trainer-controller-manager"]
CMD ["--config=/controller_manager_config.yaml"]

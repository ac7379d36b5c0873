# The trainer-controller-manager image: `docker build -t <registry>/kubeflow-trainer-py:<version> .` from the
# repository root (the build needs pyproject.toml and the packages beside it). config/default deploys it
# (docs/install.md). Nothing here runs as root at run time; the user's numeric UID is the Deployment's
# runAsUser.

# Build the wheel of this package, and wheels of its pinned dependencies.
FROM python:3.11.7-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements/manager.txt requirements/manager.txt
COPY pyproject.toml README.md ./
# runtime/crds is a link to config/crd: the wheel carries the CRDs that trainer-render validates against.
COPY config/crd config/crd
COPY controller controller
COPY runtime runtime
COPY cmd cmd
RUN PIP_CONSTRAINT=/src/requirements/manager.txt \
    pip wheel --wheel-dir /wheels --constraint requirements/manager.txt .

# Run: only the installed wheels, no compiler, no source tree.
FROM python:3.11.7-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
COPY requirements/manager.txt /tmp/constraints.txt
RUN pip install --no-index --find-links /wheels --constraint /tmp/constraints.txt \
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

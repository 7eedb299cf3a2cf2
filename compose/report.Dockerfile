# The weekly capacity report's image: `tritonwatch report` and nothing else.
#
#   docker build -f compose/report.Dockerfile -t tritonwatch-report:0.1.0 .     (from the repository root)
#
# Its own file, not a stage of compose/Dockerfile: the sidecar's image stays without pandas,
# matplotlib and statsmodels. Two stages, as there: wheels for the `report` extra, then a slim Python
# that installs only those and runs as the same unprivileged user (10001), whose archive volume is
# writable (Kubernetes: fsGroup 10001; compose: a named volume).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md* ./
COPY tritonwatch/ tritonwatch/
COPY exporters/ exporters/
COPY alerts/ alerts/
COPY dashboards/ dashboards/
COPY reports/ reports/
COPY advise/ advise/
COPY local/ local/
COPY cli/ cli/
COPY model_repository/ model_repository/
RUN pip wheel --wheel-dir /wheels ".[report]"

FROM ${PYTHON_IMAGE} AS runtime
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links /wheels "tritonwatch[report]" \
    && rm -rf /wheels \
    && groupadd --system --gid 10001 tritonwatch \
    && useradd --system --uid 10001 --gid tritonwatch --no-create-home --shell /usr/sbin/nologin tritonwatch \
    && mkdir /archive && chown 10001:10001 /archive
USER 10001:10001
VOLUME /archive
ENTRYPOINT ["tritonwatch", "report"]

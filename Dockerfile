# weir: the engine, the API and the Spark backfill in one image (Python 3.11, Java 17 for Spark).
# The build stage compiles weir's kernels (Cython, gcc) into a wheel; the image installs that
# wheel, so it carries no compiler.
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE constraints.txt ./
COPY app app
COPY engine engine
COPY state state
COPY api api
COPY weir weir
RUN PIP_CONSTRAINT=/src/constraints.txt pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY constraints.txt ./
COPY --from=build /wheels /wheels
# the Spark extra for the backfill service, at the versions the tests pass with
RUN pip install --no-cache-dir -c constraints.txt "$(ls /wheels/weir_stream-*.whl)[all]" \
 && rm -rf /wheels
# an unprivileged user runs everything; the volumes' mount points are its own, so a named
# volume created from them is too
RUN useradd --create-home --uid 10001 --user-group weir \
 && mkdir -p /state /checkpoints /backfill \
 && chown weir:weir /state /checkpoints /backfill \
 && chmod 0700 /state /checkpoints
USER weir
ENV PYTHONUNBUFFERED=1 SPARK_LOCAL_IP=127.0.0.1
EXPOSE 8000
# bound to every interface, the API serves only /health until WEIR_API_TOKEN is set
CMD ["weir", "demo", "--api-host", "0.0.0.0"]

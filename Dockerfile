# The operator image that manifests/operator/ runs (placeholder name gputwin:dev).
#   docker build -t gputwin:dev .          # then, on kind: kind load docker-image gputwin:dev --name gputwin
# The repo is copied to /app so the sample TraceReplay's relative trace path resolves there.
# GPUTWIN_COMPILE=1 builds the mypyc-compiled scheduling core (see setup.py).
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . /app
RUN GPUTWIN_COMPILE=1 pip install . && apt-get purge -y gcc libc6-dev && apt-get autoremove -y
USER 65532
ENTRYPOINT []
CMD ["gputwin", "operator", "--all-namespaces"]

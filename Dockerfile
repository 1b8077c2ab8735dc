# Image for docker-compose.yml (production path). Installs the CPU build of torch first so no
# dependency pulls a CUDA build.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# llama-cpp-python (the offline answer model's runtime, a dependency) builds from source.
RUN apt-get update && apt-get install -y --no-install-recommends g++ make cmake \
    && rm -rf /var/lib/apt/lists/*
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
COPY livingrag ./livingrag
RUN pip install .
RUN useradd --create-home livingrag
USER livingrag
EXPOSE 8000
CMD ["sh", "-c", "livingrag db upgrade && exec livingrag serve --host 0.0.0.0 --port 8000"]

# digestbot: the web app and the scheduler in one process (`digestbot run`).
#   docker compose up -d      (see docker-compose.yml and README.md, "Deploy with docker-compose")
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Extras: `postgres` (psycopg, for a postgresql+psycopg:// DIGESTBOT_DATABASE_URL) by
# default, as docker-compose.yml runs PostgreSQL; EXTRAS="" builds without it.
ARG EXTRAS="postgres"

# The same install CI exercises (tests/test_packaging.py): a plain `pip install .`
# of the repository, which ships templates, migrations and the example feed.
WORKDIR /src
COPY . .
RUN pip install . \
    && if [ -n "$EXTRAS" ]; then pip install ".[$EXTRAS]"; fi \
    && cd / && rm -rf /src

# A non-root user; its data (SQLite database, secret key, outbox) lives in /data,
# which docker-compose.yml mounts as a named volume.
RUN useradd --system --create-home --uid 10001 --shell /usr/sbin/nologin digestbot \
    && mkdir -p /data \
    && chown digestbot:digestbot /data
USER digestbot
WORKDIR /data

ENV DIGESTBOT_DATABASE_URL=sqlite:////data/digestbot.sqlite3 \
    DIGESTBOT_OUTBOX_DIR=/data/outbox \
    DIGESTBOT_HOST=0.0.0.0 \
    DIGESTBOT_PORT=8000

EXPOSE 8000
VOLUME ["/data"]

# python, not curl (there is none in the slim image); a 503 from /healthz fails the check
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('DIGESTBOT_PORT', '8000'), timeout=4)"

# Migrate, then run. `exec` makes digestbot PID 1's direct replacement, so it
# gets `docker stop`'s SIGTERM and shuts down cleanly (exit code 0).
CMD ["sh", "-c", "digestbot db upgrade && exec digestbot run --host 0.0.0.0"]

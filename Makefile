# The two commands the README promises:
#   make demo   set up from nothing and run the main job on embedded defaults
#   make test   set up from nothing and run the checks, build the manual, run the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup demo test test-fast lint docs bench models system-deps clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,postgres]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/digestbot db upgrade
	$(BIN)/digestbot poll
	$(BIN)/digestbot preview
	$(BIN)/digestbot subscribers add --confirmed demo@example.org
	$(BIN)/digestbot send
	@echo "the digest as mailed to demo@example.org: $$(ls -t $${DIGESTBOT_OUTBOX_DIR:-var/outbox}/*.eml | head -n 1)"

# Chromium (with CJK fonts) for the rendering tests, docker-compose to validate
# the compose file, PostgreSQL for the database tests (a throwaway cluster, see
# tests/pg.py), SpamAssassin and Dovecot for the deliverability tests (a
# throwaway IMAP/POP3 server, see tests/dovecot.py); installed with apt-get
# when missing and we are root.
system-deps:
	@sh scripts/install-system-deps.sh

lint: setup
	$(BIN)/ruff check bot tests bench scripts evaluation
	$(BIN)/mypy bot

# The manual (docs/ and mkdocs.yml) into build/site; --strict: a broken link,
# a missing anchor or a page left out of the nav fails the build (and CI).
$(BIN)/.docs-installed: pyproject.toml $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test,postgres,docs]'
	touch $@

docs: $(BIN)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The PostgreSQL tests may be skipped only where system-deps cannot install
# PostgreSQL (not root, or no apt-get); in CI and as root a missing server fails them.
DIGESTBOT_REQUIRE_PG ?= $(shell { [ -n "$$CI" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get; }; } >/dev/null 2>&1 && echo 1 || echo 0)

test: setup system-deps lint docs
	DIGESTBOT_REQUIRE_PG=$(DIGESTBOT_REQUIRE_PG) $(BIN)/python -m pytest

# the edit loop: everything but the slow tests (grouping quality over every labelled set);
# CI (`make test`, .ci/run) runs them all
test-fast: setup
	$(BIN)/python -m pytest -m "not slow" -q

# the default theme pack's trained file (bot/data/learned_themes.json.gz) from the training
# sets; tests/test_theme_pack.py checks that what ships is what this writes
models: setup
	$(BIN)/python -m pip install --quiet -e '.[train]'
	$(BIN)/python -m scripts.train_theme_model

bench: setup
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) var build *.egg-info

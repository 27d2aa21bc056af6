# Two commands do all the set-up on a fresh machine with python3 and make:
#   make repro   -> installs what is needed, runs every reproduction, writes repro_out/
#   make test    -> installs what is needed, runs the whole test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
OUT    ?= repro_out

.PHONY: repro test install docs bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall only when pyproject.toml changed.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

repro: $(STAMP)
	$(VENV)/bin/markovsim repro all --out $(OUT) --force

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup tests

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	for b in engine wide_band availability training sweep; do $(PY) benchmarks/$$b.py || exit 1; done

clean:
	rm -rf $(VENV) $(OUT) site .pytest_cache

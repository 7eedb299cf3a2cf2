# tritonwatch: `make demo` runs the whole stack locally, `make test` runs the suite, `make check` the fast part.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DURATION ?= 0
BENCH_SECONDS ?= 600
DEBS := prometheus prometheus-alertmanager chromium kubectl haproxy victoria-metrics
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv debs demo test check lint typecheck pytest generate bench clean

venv: $(BIN)/tritonwatch

$(BIN)/tritonwatch: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all]' --group dev
	touch $@

# Debian packages: Prometheus 2.42, promtool, Alertmanager 0.25, amtool, Chromium (report render test),
# kubectl (kustomize render test), HAProxy 2.6 (a front for the availability-from test), VictoriaMetrics 1.79
# and vmalert (the fleet topology test). The suite fails, never skips, when one is missing.
debs:
	@missing=""; \
	for b in prometheus promtool prometheus-alertmanager amtool chromium kubectl haproxy victoria-metrics vmalert; do command -v $$b >/dev/null || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $(DEBS)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEBS) >/dev/null; \
	fi

demo: venv debs
	$(BIN)/tritonwatch demo $(if $(filter-out 0,$(DURATION)),--duration $(DURATION))

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

pytest: venv debs
	$(BIN)/pytest -q -ra $(PYTEST_ARGS)

test: venv debs lint typecheck pytest

# Lint, types and the fast tests (not marked slow: tests/conftest.py), in under 3 minutes.
check: venv debs lint typecheck
	$(BIN)/pytest -q -ra -m "not slow" $(PYTEST_ARGS)

# Regenerate every committed generated file (rules, Alertmanager config, dashboards, model).
generate: venv
	$(BIN)/tritonwatch rules --slo alerts/slo.yaml --out alerts/generated
	$(BIN)/tritonwatch dashboards --out dashboards/generated
	$(BIN)/python deploy/kubernetes/generate.py --out deploy/kubernetes/generated --autoscaling deploy/autoscaling
	$(BIN)/python docs/configdoc.py docs/configuration.md
	$(BIN)/python docs/signals_doc.py > docs/signals.md
	$(BIN)/python model_repository/make_fraud_detector.py
	$(BIN)/python local/replay/make_gpu_replay.py

bench: venv debs
	$(BIN)/python -m bench.run --seconds $(BENCH_SECONDS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
